Bxj
locationweights.binj
offset4j
length12p
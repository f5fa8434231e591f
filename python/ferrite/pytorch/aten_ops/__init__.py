"""Families of the ATen table; each module registers its entries with ``aten_table.aten``."""

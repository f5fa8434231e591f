#!/usr/bin/env bash
# Runs CMD in the background; if it is still running after SECS, prints every thread's stack
# (gdb, else eu-stack) and kills it. For hangs on a lent machine where nothing else is at hand.
#   scripts/gpu/tp_diag.sh SECS LOG CMD...
secs=$1 log=$2; shift 2
"$@" > "$log" 2>&1 &
pid=$!
for ((i = 0; i < secs; i++)); do
  kill -0 $pid 2>/dev/null || { wait $pid; echo "exit $? after ${i}s" >> "$log"; exit 0; }
  sleep 1
done
echo "STILL RUNNING after ${secs}s: stacks" >> "$log"
for p in $pid $(pgrep -P $pid); do
  if command -v gdb > /dev/null; then
    gdb -p "$p" -batch -ex "thread apply all bt 25" >> "$log" 2>&1
  elif command -v eu-stack > /dev/null; then
    eu-stack -p "$p" >> "$log" 2>&1
  else
    echo "no gdb or eu-stack; /proc/$p/task/*/wchan:" >> "$log"
    for t in /proc/$p/task/*; do echo "$t $(cat $t/wchan) $(cat $t/stat | cut -d' ' -f3)"; done >> "$log"
  fi
done
kill -9 $pid 2>/dev/null

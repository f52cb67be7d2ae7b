#!/bin/sh
# tests/fuzz/run.sh: runs the fuzz harnesses of the build directory over
# their seed corpora (tests/fuzz/seeds.sh), one after the other.
#   tests/fuzz/run.sh smoke RUNS       each for RUNS inputs after its seeds
#   tests/fuzz/run.sh long SECONDS     each for SECONDS, corpus kept in fuzz-corpus/
# Stops at the first crash, leak or timeout (libFuzzer writes the input). A harness with a
# dictionary beside this script (tests/fuzz/NAME.dict) is given it.
set -eu
mode=$1
n=$2
here=$(cd "$(dirname "$0")" && pwd)
seeds=fuzz-seeds
"$here/seeds.sh" "$PWD/$seeds"
for h in idx cifar safetensors ini trace format model; do
  bin=tests/fuzz/fuzz_$h
  work=fuzz-corpus/$h
  mkdir -p "$work"
  case "$mode" in
    smoke) opts="-runs=$n" ;;
    long) opts="-max_total_time=$n -print_final_stats=1" ;;
    *) echo "run.sh: expected smoke or long, got '$mode'" >&2; exit 2 ;;
  esac
  # a dictionary of the format's words, where there is one (tests/fuzz/NAME.dict)
  if [ -f "$here/$h.dict" ]; then opts="$opts -dict=$here/$h.dict"; fi
  echo "=== fuzz_$h ($mode $n)"
  # -rss_limit_mb: the parsers allocate what the file holds, never much more
  "$bin" $opts -rss_limit_mb=1024 -timeout=10 -max_len=65536 -detect_leaks=1 \
    "$work" "$seeds/$h" 2>&1 | grep -E '^#[0-9]+ +(INITED|DONE|pulse)|stat::|ERROR|SUMMARY|Done' |
    tail -n 12
  # grep ends the pipe; the harness's status is what counts
  "$bin" -runs=0 "$work" > /dev/null 2>&1 || { echo "fuzz_$h: failed" >&2; exit 1; }
done

#!/bin/bash
# scripts/cuda-census.sh: what one GPU training step asks of the device, counted on a machine
# without a GPU. On a small network a step's time is mostly its launches, so the counts show
# where a policy's step cost over float32 comes from before a GPU is at hand to time it.
#
#   scripts/cuda-census.sh [--model M] [--batch B] [--policy P[,P...]] [--kernels]
#
# Builds scripts/cuda-census.c (a stand-in for the CUDA runtime, cuBLAS and cuDNN that counts
# calls and runs no kernel) and runs `./adapt-bench train --device cuda` under it (LD_PRELOAD),
# twice per policy, timing 20 and 220 steps; the difference of the two runs' counts divided by
# the difference of their steps (200) is the per-step count, setup (allocation, cuDNN's algorithm
# search, the first weight copies) left out. Policies that act every few steps (AdaPT's
# push-downs) show fractions. Columns: kernel launches, memsets, copies (to and from the host
# and on the device), host waits (stream and event synchronisations), cuBLAS GEMMs, cuDNN
# convolutions, and all calls that queue work on the device (these, event records and stream
# waits on events; host waits are not among them); --kernels adds each kernel's launches per
# step. Defaults: --model lenet5 --batch 128 --policy fp32,fixed,adapt,muppet,amp. Needs a
# CUDA build of this tree (./configure --with-cuda; $ADAPT_BENCH names its adapt-bench, default
# the one in the tree) and the CUDA headers to compile the stand-in (CUDA_HOME or
# /usr/local/cuda). The counts are not times: a cuDNN call costs the host more than a kernel
# launch, and a wait costs what the device still has queued.
set -uo pipefail

die() { echo "cuda-census: $*" >&2; exit 1; }

model=lenet5 batch=128 policies=fp32,fixed,adapt,muppet,amp kernels=0
while [ $# -gt 0 ]; do
    case $1 in
    --model) model=${2:?--model needs a name}; shift 2 ;;
    --batch) batch=${2:?--batch needs a number}; shift 2 ;;
    --policy) policies=${2:?--policy needs names}; shift 2 ;;
    --kernels) kernels=1; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
bench=${ADAPT_BENCH:-$top/adapt-bench}
[ -x "$bench" ] || die "no $bench: build first"
"$bench" --version 2>/dev/null | grep -q '^CUDA: *yes' ||
    die "$bench was built without CUDA (./configure --with-cuda)"
cuda=${CUDA_HOME:-/usr/local/cuda}
[ -r "$cuda/include/cuda_runtime_api.h" ] || die "no CUDA headers in $cuda/include (set CUDA_HOME)"
work=$(mktemp -d "${TMPDIR:-/tmp}/cuda-census-XXXXXX") || die "cannot make a temporary folder"
trap 'rm -rf "$work"' EXIT
${CC:-cc} -O1 -shared -fPIC -Wno-deprecated-declarations -I"$cuda/include" \
    "$top/scripts/cuda-census.c" -o "$work/census.so" 2> "$work/cc.log" ||
    { cat "$work/cc.log" >&2; die "cannot compile scripts/cuda-census.c"; }

# census POLICY STEPS OUT: one adapt-bench run under the stand-in, 3 warm-up steps and one
# timed sample of STEPS steps
census() {
    CENSUS_STEP=xent_kernel CENSUS_OUT=$3 LD_PRELOAD=$work/census.so \
        "$bench" train --device cuda --model "$model" --batch "$batch" --policy "$1" \
        --repeats 1 --warmup 3 --steps "$2" > "$work/bench.log" 2>&1 ||
        { cat "$work/bench.log" >&2; die "adapt-bench train --policy $1 failed under the stand-in"; }
}

echo "$model, batch $batch: device calls per training step (scripts/cuda-census.sh; counts, not times)"
printf '%-8s %8s %8s %8s %8s %8s %8s %8s\n' policy kernels memsets copies waits gemms cudnn total
for p in ${policies//,/ }; do
    census "$p" 20 "$work/a.txt"
    census "$p" 220 "$work/b.txt"
    python3 - "$work/a.txt" "$work/b.txt" "$p" "$kernels" <<'PY' || die "cannot read the counts"
import subprocess, sys
def load(path):
    c, k = {}, {}
    for line in open(path):
        f = line.split()
        if f[0] == "kernel":
            k[f[1]] = int(f[2])
        else:
            c[f[0]] = int(f[1])
    return c, k
(ca, ka), (cb, kb) = load(sys.argv[1]), load(sys.argv[2])
steps = cb["steps"] - ca["steps"]
if steps <= 0:
    sys.exit("the two runs took the same number of steps")
d = lambda *names: sum(cb.get(n, 0) - ca.get(n, 0) for n in names) / steps
cols = [d("kernels"), d("memsets"), d("copies_to_host", "copies_to_device", "copies_on_device"),
        d("stream_waits", "event_waits"), d("sgemm", "gemmex"),
        d("cudnn_forward", "cudnn_backward_data", "cudnn_backward_filter")]
total = cols[0] + cols[1] + cols[2] + cols[4] + cols[5] + d("event_records", "stream_event_waits")
print("%-8s" % sys.argv[3] + "".join(" %8.2f" % v for v in cols + [total]))
if sys.argv[4] == "1":
    names = sorted(set(ka) | set(kb))
    try:
        plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                               text=True).stdout.split("\n")
    except OSError:
        plain = names
    for name, shown in zip(names, plain):
        n = (kb.get(name, 0) - ka.get(name, 0)) / steps
        if n:
            print("%10.2f  %s" % (n, shown.replace("(anonymous namespace)::", "")))
PY
done

#!/bin/bash
# scripts/gpu-acceptance.sh: the GPU engine's figures in one go, on a machine with an NVIDIA GPU
# and a CUDA build of this tree (./configure --with-cuda; doc/install.md, "Building on a machine without
# network" for a GPU server without network). Each part writes its logs and JSON lines into
# OUTDIR, and every figure with its target goes to OUTDIR/summary.txt (also printed).
#
#   scripts/gpu-acceptance.sh [--device cuda|cpu] [--quick] [--cpu-trace FILE]
#                             [--python PY] OUTDIR [PART...]
#
# PARTs (default: tests bench quant accuracy), each a few minutes on one GPU:
#   tests     tests/test_quant_cuda, tests/test_net_cuda and tests/test_policy_cuda (built with
#             make first); each must pass (exit 77, a skip, counts as not run)
#   bench     adapt-bench train for lenet5, alexnet_cifar and resnet20 at batch 128 and 512 under
#             fp32, fixed, adapt, muppet and amp (timed alternately, so each policy's step cost
#             against fp32 comes from one run), beside scripts/torch_train_step.py's float32
#             step on the same device when PyTorch imports; targets: ours / PyTorch >= 1.0 for
#             float32, AdaPT's step <= 1.15 x our float32 step
#   quant     adapt-bench quant: stochastic rounding against the device-to-device copy of the
#             same run, 16M and 64M elements; target: >= 0.8 of the copy's bandwidth
#   accuracy  the AdaPT LeNet-5 Fashion-MNIST recipe (experiments/configs/fmnist_lenet5.ini) on
#             the device and on the CPU engine (or, with --cpu-trace FILE, the trace of that
#             configuration trained on the CPU earlier): final test accuracies; target: within
#             0.3 points. adapt-perf and adapt-heatmap must read the device run's trace.
#
# --device cpu runs the same parts on the CPU engine, which tries the script out on a machine
# without a GPU; --quick takes small sizes and one epoch (a check of the script, not figures).
# --python names the Python that has PyTorch (default: python3). The script stops at the first
# part that cannot run (no GPU, no build, no data) with a message; a figure that misses its target
# is marked MISSED in the summary, and the exit status is then 2.
set -uo pipefail

die() { echo "gpu-acceptance: $*" >&2; exit 1; }

device=cuda quick=0 cpu_trace="" py=python3
while [ $# -gt 0 ]; do
    case $1 in
    --device) device=${2:?--device needs cpu or cuda}; shift 2 ;;
    --quick) quick=1; shift ;;
    --cpu-trace) cpu_trace=${2:?--cpu-trace needs a trace file}; shift 2 ;;
    --python) py=${2:?--python needs a program}; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) break ;;
    esac
done
[ "$device" = cuda ] || [ "$device" = cpu ] || die "--device expects cpu or cuda, got '$device'"
out=${1:-}
[ -n "$out" ] || die "usage: gpu-acceptance.sh [options] OUTDIR [PART...] (see --help)"
shift
parts=${*:-tests bench quant accuracy}
for p in $parts; do
    case $p in tests|bench|quant|accuracy) ;; *) die "unknown part '$p' (tests, bench, quant, accuracy)" ;; esac
done
[ -z "$cpu_trace" ] || [ -r "$cpu_trace" ] || die "--cpu-trace $cpu_trace: cannot read it"
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
[ -x ./adapt-bench ] && [ -x ./adapt-train ] || die "no ./adapt-bench or ./adapt-train in $top: build first"
mkdir -p "$out" || die "cannot make $out"
summary=$out/summary.txt
: > "$summary" || die "cannot write $summary"
missed=0

say() { echo "$*" | tee -a "$summary"; }
# figure NAME VALUE OP TARGET: one summary line, MISSED when VALUE OP TARGET is false
figure() {
    local ok
    ok=$(python3 -c "import sys; v,t=float(sys.argv[1]),float(sys.argv[3]); \
print(int(v>=t if sys.argv[2]=='>=' else v<=t))" "$2" "$3" "$4") || ok=0
    if [ "$ok" = 1 ]; then say "  $1 = $2 (target $3 $4): met"
    else say "  $1 = $2 (target $3 $4): MISSED"; missed=1; fi
}

say "gpu-acceptance: $(date -u +%Y-%m-%dT%H:%M:%SZ), device $device, $(git -C "$top" describe --always --dirty 2>/dev/null || echo 'no git')"
if [ "$device" = cuda ]; then
    command -v nvidia-smi > /dev/null && say "  $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 1)"
fi

models=lenet5,alexnet_cifar,resnet20
batches="128 512"
reps=(--repeats 7 --min-sample-s 0.5)
if [ "$quick" = 1 ]; then models=lenet5; batches=16; reps=(--repeats 1 --warmup 0 --min-sample-s 0.01); fi

part_tests() {
    say "tests:"
    local t rc
    for t in test_quant_cuda test_net_cuda test_policy_cuda; do
        make -s "tests/$t" > "$out/$t.build.log" 2>&1 || die "make tests/$t failed: $out/$t.build.log"
        "./tests/$t" > "$out/$t.log" 2>&1
        rc=$?
        case $rc in
        0) say "  $t: passed" ;;
        77) say "  $t: skipped (not run): $(head -n 1 "$out/$t.log")"; missed=1 ;;
        *) say "  $t: FAILED (exit $rc), $out/$t.log"; missed=1 ;;
        esac
    done
}

# the lines of a part's Python helper: "L text" goes to the summary, "F name|value|op|target" is
# a figure
report() {
    local kind rest name value op target
    while read -r kind rest; do
        case $kind in
        L) say "  $rest" ;;
        F) IFS='|' read -r name value op target <<< "$rest"; figure "$name" "$value" "$op" "$target" ;;
        esac
    done
}

part_bench() {
    say "bench (images/s, median of the samples; x = step cost against our float32 step):"
    local have_torch=0 b m
    "$py" -c "import torch" > /dev/null 2>&1 && have_torch=1
    [ "$have_torch" = 1 ] || say "  ($py cannot import torch: no PyTorch column)"
    for b in $batches; do
        ./adapt-bench train --device "$device" --model "$models" --policy fp32,fixed,adapt,muppet,amp \
            --batch "$b" "${reps[@]}" --json > "$out/bench_$b.json" 2> "$out/bench_$b.log" ||
            die "adapt-bench train --batch $b failed: $out/bench_$b.log"
        for m in ${models//,/ }; do
            if [ "$have_torch" = 1 ]; then
                "$py" scripts/torch_train_step.py --device "$device" --model "$m" --batch "$b" \
                    "${reps[@]}" > "$out/torch_${m}_$b.json" 2> "$out/torch_${m}_$b.log" ||
                    die "torch_train_step.py --model $m --batch $b failed: $out/torch_${m}_$b.log"
            fi
            report < <(python3 scripts/gpu_figures.py bench "$out/bench_$b.json" "$m" "$b" \
                "$out/torch_${m}_$b.json")
        done
    done
}

part_quant() {
    say "quant (stochastic rounding against the copy of the same run):"
    local sizes=16M,64M
    [ "$quick" = 1 ] && sizes=64K
    ./adapt-bench quant --device "$device" --sizes "$sizes" --formats "fixed(8,4),fixed(16,8),fp16,bf16" \
        --json > "$out/quant.json" 2> "$out/quant.log" || die "adapt-bench quant failed: $out/quant.log"
    report < <(python3 scripts/gpu_figures.py quant "$out/quant.json")
}

part_accuracy() {
    say "accuracy (AdaPT, LeNet-5, Fashion-MNIST):"
    local sets=() acc
    [ "$quick" = 1 ] && sets=(--set train.epochs=1 --set data.train_limit=2000 --set data.val_size=1000 --set data.test_limit=1000)
    ./adapt-train --config experiments/configs/fmnist_lenet5.ini --device "$device" "${sets[@]}" \
        --out "$out/fmnist_adapt" --force --quiet > "$out/accuracy.log" 2>&1 ||
        die "adapt-train on $device failed: $out/accuracy.log"
    test_acc() { python3 -c "import json,sys; print([r for r in map(json.loads, open(sys.argv[1])) if r.get('type')=='test'][-1]['test_acc']*100)" "$1"; }
    acc=$(test_acc "$out/fmnist_adapt/trace.jsonl")
    say "  test accuracy on $device: $acc %"
    if [ -z "$cpu_trace" ] && [ "$device" = cuda ]; then # the same run on the CPU engine
        ./adapt-train --config experiments/configs/fmnist_lenet5.ini --device cpu "${sets[@]}" \
            --out "$out/fmnist_adapt_cpu" --force --quiet > "$out/accuracy_cpu.log" 2>&1 ||
            die "adapt-train on the CPU failed: $out/accuracy_cpu.log"
        cpu_trace=$out/fmnist_adapt_cpu/trace.jsonl
    fi
    if [ -n "$cpu_trace" ]; then
        local cpu
        cpu=$(test_acc "$cpu_trace") || die "$cpu_trace: no test record"
        say "  test accuracy on the CPU ($cpu_trace): $cpu %"
        figure "accuracy difference (points)" "$(python3 -c "print(round(abs($acc-$cpu), 3))")" "<=" 0.3
    fi
    ./adapt-perf "$out/fmnist_adapt/trace.jsonl" > "$out/perf.txt" 2>&1 || die "adapt-perf could not read the trace"
    ./adapt-heatmap "$out/fmnist_adapt/trace.jsonl" --metric wl -o "$out/wl.png" > /dev/null 2>&1 ||
        die "adapt-heatmap could not read the trace"
    say "  adapt-perf and adapt-heatmap read the trace ($out/perf.txt, $out/wl.png)"
}

for p in $parts; do "part_$p"; done
say "done: $([ $missed = 0 ] && echo 'every figure met its target' || echo 'some figures MISSED or did not run')"
exit $((missed ? 2 : 0))

#!/bin/bash
# scripts/gpu-window.sh: the GPU engine checked in one offline command on a lent GPU machine
# (one NVIDIA GPU, no network, a few minutes), correctness first, then figures.
#
#   scripts/gpu-window.sh pack DIR [--quick]
#       Here, on a Debian 12 machine with the build dependencies and a built tree: writes into
#       DIR everything the GPU machine needs beside the tracked tree: prefix.tar.xz (headers,
#       shared libraries and pkg-config files of the build dependencies, and GNU make),
#       autotools.tar.gz (configure, the Makefile.in files, aclocal.m4, config.h.in,
#       build-aux/: the GPU machine needs no autotools), fmnist-cut/ (the first 9,000
#       training and 2,000 test images of Fashion-MNIST, idx.gz) and cpu-fp32.jsonl,
#       cpu-adapt.jsonl and cpu-fp8.jsonl (this tree's CPU engine trained on that cut: the
#       float32, AdaPT and fp8_hybrid_delayed-roles LeNet-5 recipes, 4 epochs). Prints the carry (tracked tree + DIR) in MiB and
#       fails above 56 MiB. --quick: a smaller cut and 1 epoch (for rehearse).
#   scripts/gpu-window.sh run OUT [--pack DIR] [--device cuda|cpu] [--budget-scale X]
#                         [--parts P,P...]
#       On the GPU machine, in a copy of the tree that holds DIR (default .gpu): the parts
#       below, each under timeout(1) with its own budget (seconds, times X, default 1), each
#       appending its lines to OUT/summary.txt as soon as it ends; a failed part is recorded
#       and the next one starts. Logs stay outside OUT and are packed into OUT/logs.tgz after
#       every part, so a kill at the limit still returns every finished part. OUT ends with at
#       most 8 files: summary.txt, logs.tgz, bench.jsonl, quant.jsonl, accuracy.tgz.
#         probe      15 s  nvidia-smi, driver, toolkit, where cuDNN is, compute-sanitizer
#         build      60 s  unpack, configure (this GPU's architecture only; cuDNN from the
#                          toolkit or PyTorch's nvidia-cudnn wheel), make the programs and tests
#         tests      90 s  tests/test_quant_cuda, test_net_cuda and test_policy_cuda at once,
#                          with every failed case named
#         sanitizer  75 s  compute-sanitizer memcheck on a few steps of every policy and model,
#                          initcheck on LeNet-5 (skipped with a line when the tool is absent or
#                          refuses the device)
#         bench     135 s  adapt-bench train beside PyTorch's float32 step, batch 128 and 512
#         quant      20 s  stochastic and nearest rounding against the device-to-device copy
#         accuracy   45 s  the three cut recipes on the device against the carried CPU traces
#         roles      45 s  adapt-bench train under the [roles] recipes beside the fixed policy
#       (485 s in all). --device cpu runs the same parts on the CPU engine (a build without
#       CUDA; the GPU parts then skip), which is what rehearse does.
#   scripts/gpu-window.sh rehearse OUT
#       Here, without a GPU: pack --quick into a scratch copy of what travels, then run
#       --device cpu there, and check that the carry is within its limit, that every part
#       started, wrote its summary line and kept its budget, and that OUT holds at most 8
#       files. .ci/run runs it.
#   scripts/gpu-window.sh report OUT
#       Here, after the window: adapt-perf and adapt-heatmap over the returned device traces.
#
# doc/gpu.md: how the lent machine is called and what came back.
set -uo pipefail

die() { echo "gpu-window: $*" >&2; exit 1; }
here=$(cd "$(dirname "$0")/.." && pwd) || exit 1
self=$here/scripts/gpu-window.sh
carry_max_mib=56
out_max_files=8
# the recipes of the accuracy part: --set options on top of the configuration
recipe_sets() { # QUICK
    local e=4 v=1000
    [ "$1" = 1 ] && { e=1; v=200; }
    echo "--set train.epochs=$e --set data.val_size=$v --set run.seed=1"
}
part_names="probe build tests sanitizer bench quant accuracy roles"
budget_of() {
    case $1 in probe) echo 15 ;; build) echo 60 ;; tests) echo 90 ;; sanitizer) echo 75 ;;
    bench) echo 135 ;; quant) echo 20 ;; accuracy) echo 45 ;; roles) echo 45 ;; esac
}

# the cut recipes (pack, accuracy, report) and the policy settings of each
cut_recipes="fp32 adapt fp8"
recipe_policy() {
    case $1 in
    fp8) echo "--set policy.name=fixed --set roles.recipe=fp8_hybrid_delayed" ;;
    *) echo "--set policy.name=$1" ;;
    esac
}

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# bytes of what a device call sends: the tracked and untracked-not-ignored files
tree_bytes() {
    (cd "$1" && git ls-files -co --exclude-standard -z | xargs -0 -r stat -L -c %s -- 2>/dev/null |
        awk '{ s += $1 } END { print s + 0 }')
}

# ---------------------------------------------------------------------------------------------
# pack

cut_fmnist() { # SRC DST NTRAIN NTEST
    python3 - "$@" <<'PY' || die "cannot cut Fashion-MNIST from $1"
import gzip, os, struct, sys
src, dst, ntrain, ntest = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(dst, exist_ok=True)
for stem, n in (("train", ntrain), ("t10k", ntest)):
    for kind, dims in (("images-idx3-ubyte", 3), ("labels-idx1-ubyte", 1)):
        name = "%s-%s.gz" % (stem, kind)
        with gzip.open(os.path.join(src, name), "rb") as f:
            magic, count = struct.unpack(">II", f.read(8))
            shape = struct.unpack(">%dI" % (dims - 1), f.read(4 * (dims - 1)))
            per = 1
            for d in shape:
                per *= d
            if count < n:
                sys.exit("%s holds %d items, fewer than %d" % (name, count, n))
            body = f.read(n * per)
        with gzip.GzipFile(os.path.join(dst, name), "wb", compresslevel=9, mtime=0) as g:
            g.write(struct.pack(">II", magic, n) + struct.pack(">%dI" % (dims - 1), *shape) + body)
PY
}

pack() {
    local dir=$1 quick=${2:-0}
    [ -x "$here/adapt-train" ] || die "pack: no $here/adapt-train: build this tree first"
    command -v dpkg > /dev/null || die "pack: needs a Debian machine (dpkg) with the build dependencies"
    local data=${ADAPT_FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
    [ -r "$data/train-images-idx3-ubyte.gz" ] ||
        die "pack: no Fashion-MNIST in $data (scripts/setup-deps.sh installs it; or set ADAPT_FMNIST_DIR)"
    mkdir -p "$dir" || die "pack: cannot make $dir"
    dir=$(cd "$dir" && pwd)
    rm -rf "$dir/fmnist-cut" "$dir"/*.tar.* "$dir"/cpu-*.jsonl "$dir/MANIFEST"
    local t0=$SECONDS
    # 1. the slim prefix: headers, shared libraries, pkg-config files and the tools of the
    #    packages offline-deps.sh selects, plus make
    local pkgs
    pkgs=$("$here/scripts/offline-deps.sh" list) || die "pack: offline-deps.sh list failed"
    dpkg-query -W make > /dev/null 2>&1 && pkgs="$pkgs make"
    # shellcheck disable=SC2086
    dpkg -L $pkgs 2>/dev/null | sort -u |
        grep -E '^/(usr/)?(include/.+|lib/.+\.so(\.[0-9][0-9.]*)?|lib/.+/pkgconfig/.+\.pc|share/pkgconfig/.+\.pc|share/aclocal/pkg\.m4|bin/(make|pkgconf|pkg-config|x86_64-linux-gnu-pkg-config))$' |
        while IFS= read -r f; do [ -e "$f" ] || [ -L "$f" ] && [ ! -d "$f" ] && echo "${f#/}"; done \
        > "$dir/prefix.files"
    # static archives of the libraries that come without a shared one (check: libcheck_pic.a)
    local a
    # shellcheck disable=SC2086
    for a in $(dpkg -L $pkgs 2>/dev/null | grep -E '^/(usr/)?lib/.+/lib[^/]+\.a$' | sort -u); do
        [ -e "${a%.a}.so" ] || echo "${a#/}" >> "$dir/prefix.files"
    done
    # the openblas alternative's links live outside the package lists
    local alt
    for alt in /usr/lib/x86_64-linux-gnu/libopenblas.so /usr/lib/x86_64-linux-gnu/libopenblas.so.0 \
               /usr/lib/x86_64-linux-gnu/libblas.so.3 /usr/lib/x86_64-linux-gnu/liblapack.so.3; do
        [ -e "$alt" ] || continue
        alt=$(readlink -f "$alt")
        echo "${alt#/}" >> "$dir/prefix.files"
    done
    sort -u -o "$dir/prefix.files" "$dir/prefix.files"
    tar -C / --no-recursion -cf - -T "$dir/prefix.files" | xz -T0 -8 > "$dir/prefix.tar.xz" ||
        die "pack: cannot write $dir/prefix.tar.xz"
    echo "gpu-window: prefix: $(wc -l < "$dir/prefix.files") files from $(wc -w <<< "$pkgs") packages, $(mib "$(stat -c %s "$dir/prefix.tar.xz")") MiB"
    # 2. the generated autotools files, newest last (configure after aclocal.m4)
    (cd "$here" && { [ -x configure ] && [ ! configure.ac -nt configure ] || ./autogen.sh > /dev/null; }) ||
        die "pack: autogen.sh failed"
    (cd "$here" && tar -czf "$dir/autotools.tar.gz" aclocal.m4 configure config.h.in build-aux \
        $(git ls-files -o -i --exclude-standard -- '*Makefile.in' 'Makefile.in')) ||
        die "pack: cannot write $dir/autotools.tar.gz"
    # 3. the cut dataset and the CPU traces of the two recipes on it
    local ntrain=9000 ntest=2000
    [ "$quick" = 1 ] && { ntrain=1400; ntest=400; }
    cut_fmnist "$data" "$dir/fmnist-cut" "$ntrain" "$ntest"
    local r scratch
    scratch=$(mktemp -d) || die "pack: no scratch folder"
    for r in $cut_recipes; do
        # shellcheck disable=SC2046
        "$here/adapt-train" --config "$here/experiments/configs/fmnist_lenet5.ini" --device cpu \
            $(recipe_policy $r) --set data.path="$dir/fmnist-cut" $(recipe_sets "$quick") \
            --out "$scratch/$r" --quiet > "$scratch/$r.log" 2>&1 ||
            { cat "$scratch/$r.log" >&2; rm -rf "$scratch"; die "pack: the CPU $r recipe failed"; }
        cp "$scratch/$r/trace.jsonl" "$dir/cpu-$r.jsonl"
    done
    rm -rf "$scratch"
    {
        echo "commit $(git -C "$here" describe --always --dirty 2>/dev/null || echo none)"
        echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
        echo "quick $quick"
        echo "cut $ntrain train, $ntest test"
        echo "recipe $(recipe_sets "$quick")"
    } > "$dir/MANIFEST"
    rm -f "$dir/prefix.files"
    local pb tb
    pb=$(du -sb "$dir" | cut -f1)
    tb=$(tree_bytes "$here")
    # the pack folder is counted once even when it lies in the tree as untracked files
    case $dir in "$here"/*) git -C "$here" check-ignore -q "$dir" || tb=$((tb - pb)) ;; esac
    echo "gpu-window: pack $dir: $(mib "$pb") MiB; tree $(mib "$tb") MiB; carry $(mib $((pb + tb))) MiB (limit $carry_max_mib MiB); $((SECONDS - t0)) s"
    [ $((pb + tb)) -le $((carry_max_mib * 1048576)) ] || die "pack: the carry is over $carry_max_mib MiB"
}

# ---------------------------------------------------------------------------------------------
# run

# state shared with the parts (run re-invokes this script once per part, under timeout)
export GW_OUT GW_LOG GW_PACK GW_DEVICE GW_PREFIX

say() { echo "$*" | tee -a "$GW_OUT/summary.txt"; }
# figure NAME VALUE OP TARGET: a summary line, MISSED when VALUE OP TARGET does not hold
figure() {
    local ok
    ok=$(awk -v v="$2" -v o="$3" -v t="$4" 'BEGIN { print (o == ">=" ? v >= t : v <= t) ? 1 : 0 }')
    if [ "$ok" = 1 ]; then say "  $1 = $2 (target $3 $4): met"
    else say "  $1 = $2 (target $3 $4): MISSED"; fi
}

# the lines of scripts/gpu_figures.py on stdin: "L text" goes to the summary, "F
# name|value|op|target" is a figure
summarize() {
    local kind rest name value op target
    while read -r kind rest; do
        case $kind in
        L) say "  $rest" ;;
        F) IFS='|' read -r name value op target <<< "$rest"; figure "$name" "$value" "$op" "$target" ;;
        esac
    done
}

env_build() { # the build dependencies from the unpacked prefix
    [ -d "$GW_PREFIX/usr" ] || return 0
    eval "$("$here/scripts/offline-deps.sh" env "$GW_PREFIX")"
    export PATH="$PATH"
}

cudnn_dir() { # cuDNN: the toolkit's, else the nvidia-cudnn wheel's folder
    local d
    for d in /usr/local/cuda /usr; do
        ls "$d"/include/cudnn.h "$d"/include/x86_64-linux-gnu/cudnn*.h > /dev/null 2>&1 && { echo "$d"; return; }
    done
    python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null
}

part_probe() {
    say "  host: $(uname -n), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
    if [ "$GW_DEVICE" = cpu ]; then say "  device: cpu (rehearsal: no GPU parts)"; return 0; fi
    command -v nvidia-smi > /dev/null || { say "  nvidia-smi: absent"; return 1; }
    say "  gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv,noheader | head -n 1)"
    say "  nvcc: $( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) | head -n 1) $( (nvcc --version 2>/dev/null || /usr/local/cuda/bin/nvcc --version) | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
    say "  cuDNN: $(cudnn_dir || true)"
    say "  compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo absent)"
    say "  python3: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -n 1)"
    say "  gcc: $(gcc -dumpfullversion 2>&1), make: $(command -v make || echo "absent (the prefix's)")"
}

part_build() {
    cd "$here" || return 1
    tar -xzf "$GW_PACK/autotools.tar.gz" || return 1
    # generated after their sources: make must not try to run autotools
    touch aclocal.m4 && sleep 1 &&
        touch configure config.h.in $(tar -tzf "$GW_PACK/autotools.tar.gz" | grep 'Makefile.in$') ||
        return 1
    rm -rf "$GW_PREFIX" && mkdir -p "$GW_PREFIX" || return 1
    if command -v xz > /dev/null; then
        xz -dc "$GW_PACK/prefix.tar.xz" | tar -C "$GW_PREFIX" -xf - || return 1
    else
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$GW_PACK/prefix.tar.xz" "$GW_PREFIX" || return 1
    fi
    "$here/scripts/offline-deps.sh" relocate "$GW_PREFIX" || return 1
    env_build
    local args=(--without-cuda) cc
    if [ "$GW_DEVICE" = cuda ]; then
        cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
        [ -n "$cc" ] || cc=90
        local nvcc_dir=/usr/local/cuda d
        [ -x "$nvcc_dir/bin/nvcc" ] || nvcc_dir=$(dirname "$(dirname "$(command -v nvcc)")")
        d=$(cudnn_dir)
        args=(--with-cuda="$nvcc_dir" NVCC_GENCODE="-gencode arch=compute_$cc,code=sm_$cc")
        if [ -n "$d" ]; then args+=(--with-cudnn="$d"); else args+=(--without-cudnn); fi
    fi
    ./configure "${args[@]}" > "$GW_LOG/configure.log" 2>&1 ||
        { tail -n 30 config.log >> "$GW_LOG/configure.log"; say "  configure failed"; return 1; }
    say "  configure $(printf '%q ' "${args[@]}")"
    say "  $(grep -E '^ +(CUDA|cuDNN):' "$GW_LOG/configure.log" | tr -s ' ' | paste -sd';')"
    # BUILT_SOURCES first: make builds them by itself only for all, check and install
    make -s $(sed -n 's/^BUILT_SOURCES = //p' Makefile) > "$GW_LOG/make.log" 2>&1 &&
    make -j"$(nproc)" -s adapt-train adapt-bench adapt-perf \
        tests/test_quant_cuda tests/test_net_cuda tests/test_policy_cuda >> "$GW_LOG/make.log" 2>&1 ||
        { tail -n 40 "$GW_LOG/make.log"; say "  make failed"; return 1; }
    ./adapt-bench --version 2>&1 | grep -E '^(adapt-bench|commit|compiler|CUDA|cuDNN):' | sed 's/^/  /' |
        tee -a "$GW_OUT/summary.txt"
}

part_tests() {
    cd "$here" || return 1
    env_build
    local t pids=() rc=0
    for t in test_quant_cuda test_net_cuda test_policy_cuda; do
        [ -x "tests/$t" ] || { say "  $t: not built"; rc=1; continue; }
        OMP_NUM_THREADS=5 CK_VERBOSITY=verbose CK_XML_LOG_FILE_NAME="$GW_LOG/$t.xml" \
            timeout -k 5 $(( $(budget_of tests) * ${GW_SCALE:-1} - 10 )) "./tests/$t" \
            > "$GW_LOG/$t.log" 2>&1 &
        pids+=("$!:$t")
    done
    local p r n f
    for p in "${pids[@]}"; do
        t=${p#*:}
        wait "${p%%:*}"; r=$?
        n=$(grep -cE ':(P|F|E):' "$GW_LOG/$t.log")
        f=$(grep -cE ':(F|E):' "$GW_LOG/$t.log")
        case $r in
        0) say "  $t: passed, $n cases" ;;
        77) say "  $t: skipped: $(head -n 1 "$GW_LOG/$t.log")"; [ "$GW_DEVICE" = cpu ] || rc=1 ;;
        124|137) say "  $t: TIMEOUT after $((n)) cases: $(grep -m1 watchdog "$GW_LOG/$t.log")"; rc=1 ;;
        *) say "  $t: FAILED (exit $r), $f of $n cases failed"; rc=1 ;;
        esac
        grep -E ':(F|E):' "$GW_LOG/$t.log" | head -n 20 | cut -c1-400 | sed 's/^/    /' |
            tee -a "$GW_OUT/summary.txt"
    done
    return $rc
}

part_sanitizer() {
    cd "$here" || return 1
    env_build
    if [ "$GW_DEVICE" = cpu ]; then say "  skipped: no GPU"; return 0; fi
    local cs
    cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null) ||
        { say "  skipped: compute-sanitizer absent"; return 0; }
    local rc=0 tool r
    for tool in memcheck initcheck; do
        local models=lenet5,resnet20 lim=30 algo=find
        local policies=fp32,fixed,adapt,muppet,amp,fixed+fp8_hybrid_delayed,fixed+w4a8
        # initcheck: cudnnFind* times its candidates at the engine's creation on buffers cuDNN
        # allocates and never fills; under initcheck every one of their reads is a report
        # (87,703 from cudnnFind*'s kernels in 100 s on an H200, still in the creation), so
        # initcheck takes cuDNN's heuristic algorithms, which run nothing at creation
        [ $tool = initcheck ] && { models=lenet5; lim=40; algo=heuristic; }
        ADAPT_CUDNN_ALGO=$algo timeout -k 3 $((lim * ${GW_SCALE:-1})) "$cs" --tool $tool --error-exitcode 3 --print-limit 100000 \
            ./adapt-bench train --device cuda --model $models --policy $policies --batch 16 \
            --repeats 1 --warmup 1 --steps 2 > "$GW_LOG/sanitizer-$tool.log" 2>&1
        r=$?
        # cudnnFind* times every algorithm on buffers it allocates itself and never fills: the
        # reads of those at the engine's creation (conv_setup) are cuDNN's, not the engine's
        local n_find n_other
        read -r n_find n_other < <(awk '
            /^========= [A-Z]/ && !/ERROR SUMMARY|COMPUTE-SANITIZER/ { if (inb) { f += find; o += !find }; inb = 1; find = 0; next }
            /^=========[ \t]*$/ { if (inb) { f += find; o += !find }; inb = 0; next }
            inb && /conv_setup|cudnnFind/ { find = 1 }
            END { if (inb) { f += find; o += !find }; print f + 0, o + 0 }' "$GW_LOG/sanitizer-$tool.log")
        if [ "$r" = 3 ] && [ "$tool" = initcheck ] && [ "$n_other" = 0 ] && [ "$n_find" -gt 0 ]; then
            say "  $tool ($models; $policies; 2 steps each): no error in the engine's kernels ($n_find reads of cuDNN's own unfilled buffers inside cudnnFind* at creation)"
            continue
        fi
        case $r in
        0) say "  $tool ($models; $policies; 2 steps each; cuDNN algorithms by $algo): no error" ;;
        124|137) say "  $tool: TIMEOUT after ${lim} s"; rc=1 ;;
        *) if grep -qiE 'not supported|Device not supported|unable to' "$GW_LOG/sanitizer-$tool.log" &&
              ! grep -q '=========.*Invalid\|========= Program hit' "$GW_LOG/sanitizer-$tool.log"; then
               say "  $tool: skipped, the tool refused: $(grep -m1 -iE 'not supported|unable' "$GW_LOG/sanitizer-$tool.log" | cut -c1-200)"
           else
               say "  $tool: ERRORS (exit $r; $n_other outside cudnnFind*): $(grep -m1 -E '^========= [A-Z]' "$GW_LOG/sanitizer-$tool.log" | cut -c1-200)"
               grep -m1 -E 'ERROR SUMMARY' "$GW_LOG/sanitizer-$tool.log" | sed 's/^/    /' | tee -a "$GW_OUT/summary.txt"
               rc=1
           fi ;;
        esac
    done
    return $rc
}

part_bench() {
    cd "$here" || return 1
    env_build
    local b m have_torch=0 reps=(--repeats 5 --min-sample-s 0.25) models=lenet5,alexnet_cifar,resnet20
    local batches="128 512"
    [ "$GW_DEVICE" = cpu ] && { reps=(--repeats 1 --warmup 0 --steps 1); models=lenet5; batches=16; }
    python3 -c "import torch; assert torch.cuda.is_available() or '$GW_DEVICE' == 'cpu'" > /dev/null 2>&1 &&
        have_torch=1
    [ "$have_torch" = 1 ] || say "  (python3 cannot use PyTorch on $GW_DEVICE: no PyTorch column)"
    : > "$GW_OUT/bench.jsonl"
    local rc=0
    for b in $batches; do
        ./adapt-bench train --device "$GW_DEVICE" --model "$models" --policy fp32,fixed,adapt,muppet,amp \
            --batch "$b" "${reps[@]}" --json > "$GW_LOG/bench_$b.json" 2> "$GW_LOG/bench_$b.log" ||
            { say "  adapt-bench train --batch $b FAILED: $(tail -n 1 "$GW_LOG/bench_$b.log")"; rc=1; continue; }
        grep '^{' "$GW_LOG/bench_$b.json" >> "$GW_OUT/bench.jsonl"
        if [ "$have_torch" = 1 ]; then
            python3 scripts/torch_train_step.py --device "$GW_DEVICE" --model "$models" --batch "$b" \
                "${reps[@]}" > "$GW_LOG/torch_$b.json" 2> "$GW_LOG/torch_$b.log" ||
                say "  torch_train_step.py --batch $b failed: $(tail -n 1 "$GW_LOG/torch_$b.log")"
            grep '^{' "$GW_LOG/torch_$b.json" 2>/dev/null >> "$GW_OUT/bench.jsonl"
        fi
        for m in ${models//,/ }; do
            python3 scripts/gpu_figures.py bench "$GW_LOG/bench_$b.json" "$m" "$b" \
                "$GW_LOG/torch_$b.json" > "$GW_LOG/fig.txt"
            summarize < "$GW_LOG/fig.txt"
        done
    done
    return $rc
}

part_quant() {
    cd "$here" || return 1
    env_build
    local sizes=16M,64M
    [ "$GW_DEVICE" = cpu ] && sizes=64K
    : > "$GW_OUT/quant.jsonl"
    local rc=0
    ./adapt-bench quant --device "$GW_DEVICE" --sizes "$sizes" \
        --formats "fixed(8,4),fixed(16,8),fp16,bf16" --json > "$GW_LOG/quant.json" 2> "$GW_LOG/quant.log" ||
        { say "  adapt-bench quant FAILED: $(tail -n 1 "$GW_LOG/quant.log")"; return 1; }
    grep '^{' "$GW_LOG/quant.json" >> "$GW_OUT/quant.jsonl"
    python3 scripts/gpu_figures.py quant "$GW_OUT/quant.jsonl" > "$GW_LOG/fig.txt"
    # the CPU's rounding against its copy is no figure of the GPU's
    if [ "$GW_DEVICE" = cuda ]; then summarize < "$GW_LOG/fig.txt"; else grep '^L ' "$GW_LOG/fig.txt" | summarize; fi
    return $rc
}

test_acc() {
    python3 -c "import json,sys; print('%.2f' % ([r for r in map(json.loads, open(sys.argv[1])) if r.get('type')=='test'][-1]['test_acc']*100))" "$1"
}

part_accuracy() {
    cd "$here" || return 1
    env_build
    local quick r acc cpu rc=0
    quick=$(sed -n 's/^quick //p' "$GW_PACK/MANIFEST")
    mkdir -p "$GW_LOG/accuracy"
    for r in $cut_recipes; do
        # shellcheck disable=SC2046
        ./adapt-train --config experiments/configs/fmnist_lenet5.ini --device "$GW_DEVICE" \
            $(recipe_policy $r) --set data.path="$GW_PACK/fmnist-cut" $(recipe_sets "$quick") \
            --out "$GW_LOG/accuracy/$r" --force --quiet > "$GW_LOG/accuracy-$r.log" 2>&1 ||
            { say "  $r recipe on $GW_DEVICE FAILED: $(tail -n 1 "$GW_LOG/accuracy-$r.log")"; rc=1; continue; }
        acc=$(test_acc "$GW_LOG/accuracy/$r/trace.jsonl") || { say "  $r: no test record"; rc=1; continue; }
        cpu=$(test_acc "$GW_PACK/cpu-$r.jsonl") || { say "  $r: no test record in the carried trace"; rc=1; continue; }
        say "  $r: test accuracy $acc % on $GW_DEVICE, $cpu % in the carried CPU trace ($(sed -n 's/^cut //p' "$GW_PACK/MANIFEST"))"
        [ "$GW_DEVICE" = cuda ] &&
            figure "$r test accuracy, |device - CPU| (points)" "$(awk -v a="$acc" -v b="$cpu" 'BEGIN { d = a - b; printf "%.2f", d < 0 ? -d : d }')" "<=" 0.3
    done
    tar -czf "$GW_OUT/accuracy.tgz" -C "$GW_LOG" accuracy 2>/dev/null
    return $rc
}

part_roles() {
    cd "$here" || return 1
    env_build
    local reps=(--repeats 3 --min-sample-s 0.2) models=lenet5,resnet20 b=128
    [ "$GW_DEVICE" = cpu ] && { reps=(--repeats 1 --warmup 0 --steps 1); models=lenet5; b=16; }
    local pols=fixed,fixed+fp8_hybrid_delayed,fixed+fp8_current,fixed+mxfp8,fixed+bf16_sr_master,fixed+w4a8
    ./adapt-bench train --device "$GW_DEVICE" --model "$models" --policy "$pols" --batch "$b" \
        "${reps[@]}" --json > "$GW_LOG/roles.json" 2> "$GW_LOG/roles.log" ||
        { say "  adapt-bench train (roles) FAILED: $(tail -n 1 "$GW_LOG/roles.log")"; return 1; }
    grep '^{' "$GW_LOG/roles.json" >> "$GW_OUT/bench.jsonl"
    python3 - "$GW_LOG/roles.json" <<'PY' > "$GW_LOG/roles.txt" || return 1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for m in dict.fromkeys(r["model"] for r in rows):
    rs = [r for r in rows if r["model"] == m]
    print("L %-8s batch %4d: fixed %.0f img/s; step against fixed: %s" % (
        m, rs[0]["batch"], rs[0]["img_per_s_median"],
        "  ".join("%s x%.3f" % (r["policy"].split("+", 1)[-1], r["step_cost_vs_fixed"])
                  for r in rs[1:])))
PY
    summarize < "$GW_LOG/roles.txt"
}

run_parts() {
    local out=$1; shift
    local pack_dir=$here/.gpu parts=$part_names scale=1
    GW_DEVICE=cuda
    while [ $# -gt 0 ]; do
        case $1 in
        --pack) pack_dir=${2:?--pack needs a folder}; shift 2 ;;
        --device) GW_DEVICE=${2:?--device needs cpu or cuda}; shift 2 ;;
        --budget-scale) scale=${2:?--budget-scale needs a number}; shift 2 ;;
        --parts) parts=${2//,/ }; shift 2 ;;
        *) die "run: unknown option $1" ;;
        esac
    done
    [ "$GW_DEVICE" = cuda ] || [ "$GW_DEVICE" = cpu ] || die "run: --device expects cpu or cuda"
    [[ $scale =~ ^[1-9][0-9]*$ ]] || die "run: --budget-scale expects a whole number >= 1"
    local p
    for p in $parts; do [ -n "$(budget_of "$p")" ] || die "run: unknown part '$p' ($part_names)"; done
    [ -f "$pack_dir/MANIFEST" ] || die "run: no pack in $pack_dir (scripts/gpu-window.sh pack $pack_dir)"
    mkdir -p "$out" || die "run: cannot make $out"
    GW_OUT=$(cd "$out" && pwd) GW_PACK=$(cd "$pack_dir" && pwd)
    GW_LOG=$(mktemp -d "${TMPDIR:-/tmp}/gpu-window-logs.XXXXXX") || die "run: no log folder"
    GW_PREFIX=${GW_PREFIX:-${TMPDIR:-/tmp}/adapt-prefix}
    export GW_SCALE=$scale
    : >> "$GW_OUT/summary.txt"
    say "gpu-window run: $(date -u +%Y-%m-%dT%H:%M:%SZ), device $GW_DEVICE, pack of $(sed -n 's/^commit //p' "$GW_PACK/MANIFEST"), budget scale $scale"
    local b t0 r el status failed=0 start=$SECONDS
    for p in $parts; do
        b=$(( $(budget_of "$p") * scale ))
        say "$p (budget $b s):"
        t0=$SECONDS
        timeout -k 5 "$b" "$self" _part "$p" > "$GW_LOG/part-$p.log" 2>&1
        r=$?
        el=$((SECONDS - t0))
        case $r in
        0) status=ok ;;
        124|137) status="TIMEOUT"; failed=1 ;;
        *) status="FAILED (exit $r; logs.tgz: part-$p.log)"; failed=1 ;;
        esac
        say "$p: $status, ${el} s of $b"
        tar -czf "$GW_OUT/logs.tgz.tmp" -C "$GW_LOG" --exclude=accuracy . 2>/dev/null &&
            mv "$GW_OUT/logs.tgz.tmp" "$GW_OUT/logs.tgz"
        [ "$p" = build ] && [ "$r" != 0 ] && { say "the build failed: the later parts cannot run"; break; }
    done
    say "done in $((SECONDS - start)) s: $([ $failed = 0 ] && echo 'every part ran' || echo 'some parts FAILED or timed out'); $(grep -c ': MISSED' "$GW_OUT/summary.txt") figures MISSED"
    rm -rf "$GW_LOG"
    return $failed
}

# ---------------------------------------------------------------------------------------------
# rehearse

rehearse() {
    local out=$1 scratch rc=0
    [ -n "$out" ] || die "usage: gpu-window.sh rehearse OUT"
    mkdir -p "$out" && out=$(cd "$out" && pwd) || die "rehearse: cannot make $out"
    scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpu-window-rehearse.XXXXXX") || die "rehearse: no scratch"
    # what a device call sends: the tracked and untracked-not-ignored files
    (cd "$here" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) |
        tar -xf - -C "$scratch" || die "rehearse: cannot copy the tree"
    pack "$scratch/.gpu" 1 | tee "$out/pack.txt" || { rm -rf "$scratch"; die "rehearse: pack failed"; }
    local tb pb
    tb=$(tree_bytes "$here")
    pb=$(du -sb "$scratch/.gpu" | cut -f1)
    echo "gpu-window rehearse: carry $(mib $((tb + pb))) MiB of $carry_max_mib (tree $(mib "$tb"), pack $(mib "$pb"))"
    (cd "$scratch" && GW_PREFIX=$scratch/prefix "$scratch/scripts/gpu-window.sh" run "$out/OUT" --device cpu \
        --budget-scale "${ADAPT_GW_BUDGET_SCALE:-4}")
    local r=$?
    echo "gpu-window rehearse: run exited $r"
    [ "$r" = 0 ] || rc=1
    local p sum=$out/OUT/summary.txt
    for p in $part_names; do
        grep -qE "^$p: ok, [0-9]+ s of [0-9]+$" "$sum" || { echo "rehearse: part $p did not end ok within its budget: $(grep "^$p:" "$sum")"; rc=1; }
    done
    local n
    n=$(find "$out/OUT" -type f | wc -l)
    echo "gpu-window rehearse: OUT holds $n files (limit $out_max_files): $(cd "$out/OUT" && ls | paste -sd' ')"
    [ "$n" -le "$out_max_files" ] || rc=1
    [ $((tb + pb)) -le $((carry_max_mib * 1048576)) ] || { echo "rehearse: carry over $carry_max_mib MiB"; rc=1; }
    rm -rf "$scratch"
    [ $rc = 0 ] && echo "gpu-window rehearse: passed" || echo "gpu-window rehearse: FAILED"
    return $rc
}

report() {
    local out=$1 r t
    [ -f "$out/accuracy.tgz" ] || die "report: no $out/accuracy.tgz"
    local x; x=$(mktemp -d) || exit 1
    tar -xzf "$out/accuracy.tgz" -C "$x" || die "report: cannot unpack $out/accuracy.tgz"
    for r in $cut_recipes; do
        t=$x/accuracy/$r/trace.jsonl
        [ -f "$t" ] || continue
        "$here/adapt-perf" "$t" > "$out/perf-$r.txt" || die "report: adapt-perf could not read $t"
        "$here/adapt-heatmap" "$t" --metric wl -o "$out/wl-$r.png" > /dev/null ||
            die "report: adapt-heatmap could not read $t"
        echo "gpu-window report: $out/perf-$r.txt, $out/wl-$r.png"
    done
    rm -rf "$x"
}

case ${1:-} in
pack) [ $# -ge 2 ] || die "usage: gpu-window.sh pack DIR [--quick]"
      q=0; [ "${3:-}" = --quick ] && q=1; pack "$2" "$q" ;;
run) [ $# -ge 2 ] || die "usage: gpu-window.sh run OUT [--pack DIR] [--device cuda|cpu] [--budget-scale X] [--parts P,...]"
     run_parts "${@:2}" ;;
rehearse) rehearse "${2:-}" ;;
report) [ $# -eq 2 ] || die "usage: gpu-window.sh report OUT"; report "$2" ;;
_part) "part_$2" ;;
-h|--help) sed -n '2,48p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "usage: gpu-window.sh pack DIR [--quick] | run OUT [options] | rehearse OUT | report OUT (see --help)" ;;
esac

#!/bin/sh
# tests/configs_dry_run.sh: every shipped experiment configuration
# (experiments/configs/*.ini and experiments/configs/reference/*.ini) loads,
# passes the cross-field checks and builds its model: adapt-train --dry-run
# exits 0 for each, and prints the key values the file sets (spot checks on
# the mapping of the reference files).
src=${ADAPT_SRCDIR:-${srcdir:-.}}
bin=./adapt-train
[ -x "$bin" ] || { echo "configs_dry_run: $bin not built"; exit 99; }
fail=0 n=0
# the data sets are not loaded here (test_train checks the dry run's data check): a data.path
# that does not exist makes every dry run stop at its "data:   not available" line
nodata="--set data.path=/nonexistent/adapt-sim-test-data"
for f in "$src"/experiments/configs/*.ini "$src"/experiments/configs/reference/*.ini; do
    n=$((n + 1))
    # exit status 1 with "data:   not available" is a data set this machine lacks (CIFAR,
    # MNIST, EMNIST): the configuration, the model and the policy passed
    if ! out=$("$bin" --config "$f" --dry-run $nodata 2>&1) &&
       ! echo "$out" | grep -q "^data:   not available: "; then
        echo "FAIL: $f"
        echo "$out" | tail -5
        fail=1
    fi
done
# every run of the shipped run lists (experiments/runlists/*.txt: NAME CONFIG [--set ...])
for rl in "$src"/experiments/runlists/*.txt; do
    while read -r name cfg rest; do
        case $name in ''|'#'*) continue ;; esac
        # the overrides split as report.py splits them (shlex: quotes, '#' comments)
        eval "set -- $(python3 -c 'import shlex, sys
print(" ".join(shlex.quote(w) for w in shlex.split(sys.argv[1], comments=True)))' "$rest")"
        # shellcheck disable=SC2086 # $nodata is --set words
        if ! out=$(cd "$src" && "$OLDPWD/$bin" --config "$cfg" "$@" --dry-run $nodata 2>&1) &&
           ! echo "$out" | grep -q "^data:   not available: "; then
            echo "FAIL: $rl: run $name"
            echo "$out" | tail -5
            fail=1
        fi
        n=$((n + 1))
    done < "$rl"
done

# at least the 16 experiment files, the 21 reference files and 30 run-list lines
[ "$n" -ge 67 ] ||
  { echo "FAIL: only $n configurations found under $src/experiments/configs"; fail=1; }

# The resolved values of some reference files (the file and README state why).
expect() { # file key value: "key = value" in the dry-run's printed configuration
    got=$("$bin" --config "$src/experiments/configs/reference/$1" --dry-run 2>/dev/null |
          sed -n "/^\[$2\]/,/^\[/p" | grep -E "^$3 = " | head -1)
    if [ "$got" != "$3 = $4" ]; then
        echo "FAIL: $1 [$2] expected '$3 = $4', got '$got'"
        fail=1
    fi
}
expect lenet_msgd_fp_mnist.ini optim lr 0.1
expect lenet_msgd_fp_mnist.ini optim l1_decay 0.0001
expect lenet_msgd_fp_mnist.ini train accumulation_steps 4
expect lenet_msgd_fp_mnist.ini quantization buffer_bits 8
expect lenet_msgd_fp_mnist.ini quantization lb_upr 150
expect lenet_msgd_fp_mnist.ini quantization gamma 0.9
expect lenet_msgd_fp_mnist.ini data val_size 6000
expect alexnet_msgd_fp_fmnist.ini quantization lb_lwr 100
expect alexnet_msgd_fp_fmnist.ini quantization lb_upr 100
expect alexnet_msgd_fp_fmnist.ini model name '"alexnet_mnist"'
expect alexnet_msgd_fp_cifar100.ini optim lr 0.1
expect alexnet_sgd_fl32_mnist.ini model classes 47
expect lenet_sgd_fl32_fmnist.ini optim l1_decay 1e-08
expect resnet_msgd_fp_emnist.ini data dataset emnist-balanced
[ $fail -eq 0 ] && echo "configs_dry_run: $n configurations load"
exit $fail

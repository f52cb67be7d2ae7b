#!/usr/bin/python3
"""Training throughput of adapt-sim and PyTorch side by side, in one run.

For each model, runs `adapt-bench train --json` and scripts/torch_train_step.py (the same
network in PyTorch, timed the same way: warm-up, steps per sample chosen for --min-sample-s,
median of --repeats samples) alternately, ROUNDS times, and prints the median images/s of each
and their ratio. Both use the same thread count (OMP_NUM_THREADS, else every CPU).

  scripts/bench_vs_torch.py [--models lenet5,alexnet_cifar,resnet20] [--batch 128]
                            [--rounds 2] [--repeats 7] [--min-sample-s 0.5]
                            [--python /usr/bin/python3] [--bench ./adapt-bench]
Needs PyTorch for --python (Debian: apt-get install python3-torch).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    lines = [l for l in out.splitlines() if l.startswith("{")]
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="lenet5,alexnet_cifar,resnet20")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--min-sample-s", type=float, default=0.5)
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the Python that has PyTorch (default: Debian's)")
    ap.add_argument("--bench", default=os.path.join(top, "adapt-bench"))
    a = ap.parse_args()
    torch_script = os.path.join(here, "torch_train_step.py")
    if subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit("bench_vs_torch: %s cannot import torch (Debian: apt-get install python3-torch;"
                 " or --python PATH)" % a.python)
    if not os.access(a.bench, os.X_OK):
        sys.exit("bench_vs_torch: %s not found (build first, or --bench PATH)" % a.bench)
    threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count()
    timing = ["--batch", str(a.batch), "--repeats", str(a.repeats),
              "--min-sample-s", str(a.min_sample_s)]
    tenv = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    rows = []
    for m in a.models.split(","):
        ours, theirs = [], []
        for _ in range(a.rounds):
            ours.append(run_json([a.bench, "train", "--model", m, "--json"] + timing,
                                 env=tenv)["img_per_s_median"])
            theirs.append(run_json([a.python, torch_script, "--model", m,
                                    "--threads", str(threads)] + timing,
                                   env=tenv)["img_per_s_median"])
        o, t = statistics.median(ours), statistics.median(theirs)
        rows.append((m, o, t, o / t))
        print(json.dumps({"model": m, "batch": a.batch, "threads": threads,
                          "adapt_img_per_s": round(o, 1),
                          "torch_img_per_s": round(t, 1), "ratio": round(o / t, 3)}),
              flush=True)
    print(f"\n{'model':<14} {'batch':>5} {'adapt-sim img/s':>16} {'PyTorch img/s':>14} "
          f"{'ratio':>6}")
    for m, o, t, r in rows:
        print(f"{m:<14} {a.batch:>5} {o:>16.1f} {t:>14.1f} {r:>6.2f}")


if __name__ == "__main__":
    main()

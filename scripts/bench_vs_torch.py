#!/usr/bin/python3
"""Training throughput of adapt-sim and PyTorch side by side, in one run.

For each model, runs `adapt-bench train --json` and the project's PyTorch
anchor (torch_train_step.py from the shared bench folder) alternately,
ROUNDS times, and prints the median images/s of each and their ratio.

  scripts/bench_vs_torch.py [--models lenet5,alexnet_cifar,resnet20]
                            [--batch 128] [--rounds 2] [--torch-script PATH]
Needs Debian's python3-torch (apt-get install python3-torch).
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
    ap.add_argument("--torch-script",
                    default=os.path.join(top, "..", "shared", "bench", "torch_train_step.py"))
    ap.add_argument("--bench", default=os.path.join(top, "adapt-bench"))
    a = ap.parse_args()
    if not os.path.exists(a.torch_script):
        sys.exit(f"bench_vs_torch: {a.torch_script} not found (--torch-script PATH)")
    tenv = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    rows = []
    for m in a.models.split(","):
        ours, theirs = [], []
        for _ in range(a.rounds):
            ours.append(run_json([a.bench, "train", "--model", m, "--batch", str(a.batch),
                                  "--json"])["img_per_s_median"])
            theirs.append(run_json(["/usr/bin/python3", a.torch_script, "--model", m,
                                    "--batch", str(a.batch)], env=tenv)["img_per_s_median"])
        o, t = statistics.median(ours), statistics.median(theirs)
        rows.append((m, o, t, o / t))
        print(json.dumps({"model": m, "batch": a.batch, "adapt_img_per_s": round(o, 1),
                          "torch_img_per_s": round(t, 1), "ratio": round(o / t, 3)}),
              flush=True)
    print(f"\n{'model':<14} {'batch':>5} {'adapt-sim img/s':>16} {'PyTorch img/s':>14} "
          f"{'ratio':>6}")
    for m, o, t, r in rows:
        print(f"{m:<14} {a.batch:>5} {o:>16.1f} {t:>14.1f} {r:>6.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The GPU checks' figures (scripts/gpu-window.sh, scripts/gpu-acceptance.sh), as lines for the
summary: "L text" is printed as is, "F name|value|op|target" is a figure held to its target.

  gpu_figures.py bench BENCH.json MODEL BATCH [TORCH.json]
      adapt-bench train --json lines of one batch size: MODEL's images/s and step cost of each
      policy against float32, PyTorch's float32 images/s beside them when TORCH.json (lines of
      scripts/torch_train_step.py) holds MODEL; figures: ours / PyTorch >= 1.0 in float32,
      AdaPT's step <= 1.15 x our float32 step
  gpu_figures.py quant QUANT.json
      adapt-bench quant --json lines: each rounding's bandwidth against the copy's; figure:
      stochastic rounding >= 0.8 of the copy
"""
import json
import os
import sys


def lines(path):
    """The JSON objects of a file's lines that start with '{' (none when it is missing)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.startswith("{")]


def bench(path, model, batch, tpath=None):
    rows = {r["policy"]: r for r in lines(path) if r.get("model") == model}
    out = "%-13s batch %4s:" % (model, batch)
    for name, r in rows.items():
        out += "  %s %.0f (x%.3f)" % (name, r["img_per_s_median"], r["step_cost_vs_fp32"])
    torch = [r for r in lines(tpath) if r.get("model") == model] if tpath else []
    if torch:
        out += "  PyTorch fp32 %.0f" % torch[-1]["img_per_s_median"]
    print("L", out)
    if torch and "fp32" in rows:
        print("F %s batch %s float32 ours/PyTorch|%.3f|>=|1.0"
              % (model, batch, rows["fp32"]["img_per_s_median"] / torch[-1]["img_per_s_median"]))
    if "adapt" in rows:
        print("F %s batch %s adapt step / fp32 step|%.3f|<=|1.15"
              % (model, batch, rows["adapt"]["step_cost_vs_fp32"]))


def quant(path):
    for r in lines(path):
        print("L %-10s %-10s %9d elements: %.1f GB/s, %.3f of the copy"
              % (r["format"], r["rounding"], r["elements"], r.get("gb_per_s", 0.0), r["ratio"]))
        if r["rounding"] == "stochastic":
            print("F stochastic %s, %d elements / copy|%.3f|>=|0.8"
                  % (r["format"], r["elements"], r["ratio"]))


def main(argv):
    if len(argv) >= 4 and argv[0] == "bench":
        bench(argv[1], argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    elif len(argv) == 2 and argv[0] == "quant":
        quant(argv[1])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

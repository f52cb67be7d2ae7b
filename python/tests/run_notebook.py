#!/usr/bin/python3
"""Runs a notebook's code cells in order in one namespace, without Jupyter.

    python/tests/run_notebook.py NOTEBOOK.ipynb [--figures DIR] [--executed OUT.ipynb]

matplotlib draws with the Agg backend; plt.show() does not block. After each
cell every open figure is saved as DIR/cell-NN-K.png (with --figures) and
closed. A failing cell is reported with its number and the traceback, and the
exit status is 1. With --executed, the notebook is also run with
nbconvert's ExecutePreprocessor (needs nbconvert, nbformat and ipykernel) and
written there with its outputs; the images it holds are saved too.
Prints one line per cell and, last, the number of figures.
"""
import argparse
import base64
import json
import os
import sys
import traceback


def run_cells(path, figures=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(path) as f:
        nb = json.load(f)
    ns = {"__name__": "__main__"}
    n_fig = 0
    cwd = os.getcwd()
    os.chdir(os.path.dirname(os.path.abspath(path)))  # as Jupyter: next to the notebook
    try:
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = "".join(cell["source"])
            print("--- cell %d" % i, flush=True)
            try:
                exec(compile(src, "%s [cell %d]" % (path, i), "exec"), ns)
            except Exception:
                traceback.print_exc()
                print("%s: cell %d failed" % (path, i), file=sys.stderr)
                return 1, n_fig
            for k, num in enumerate(plt.get_fignums()):
                if figures:
                    plt.figure(num).savefig(os.path.join(figures, "cell-%02d-%d.png" % (i, k)),
                                            dpi=100)
                n_fig += 1
            plt.close("all")
    finally:
        os.chdir(cwd)
    return 0, n_fig


def run_nbconvert(path, out, figures=None):
    import nbformat
    from nbconvert.preprocessors import ExecutePreprocessor
    nb = nbformat.read(path, as_version=4)
    ExecutePreprocessor(timeout=600, kernel_name="python3").preprocess(
        nb, {"metadata": {"path": os.path.dirname(os.path.abspath(path))}})
    nbformat.write(nb, out)
    n_fig = 0
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            png = o.get("data", {}).get("image/png")
            if png:
                if figures:
                    with open(os.path.join(figures, "cell-%02d-%d.png" % (i, n_fig)), "wb") as f:
                        f.write(base64.b64decode(png))
                n_fig += 1
    return n_fig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("notebook")
    ap.add_argument("--figures", metavar="DIR")
    ap.add_argument("--executed", metavar="OUT.ipynb",
                    help="run with nbconvert instead and write the executed notebook here")
    a = ap.parse_args()
    if a.figures:
        os.makedirs(a.figures, exist_ok=True)
    if a.executed:
        n_fig = run_nbconvert(a.notebook, a.executed, a.figures)
        rc = 0
    else:
        rc, n_fig = run_cells(a.notebook, a.figures)
    print("%s: %d figures" % (a.notebook, n_fig))
    return rc


if __name__ == "__main__":
    sys.exit(main())

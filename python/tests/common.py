"""Shared helpers of the adaptsim tests: where the sources and programs are, tiny runs."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("ADAPT_SRCDIR") or os.path.dirname(os.path.dirname(HERE))
BUILDDIR = os.environ.get("ADAPT_BUILDDIR") or SRCDIR
sys.path.insert(0, os.path.join(SRCDIR, "python"))
sys.path.insert(0, HERE)

REPORT_TRACES = os.path.join(SRCDIR, "experiments", "reports", "fmnist_lenet5", "traces")
SCHEMA = os.path.join(SRCDIR, "doc", "trace.schema.json")
FMNIST = "/usr/share/datasets/fashion-mnist"
POLICIES = ("fp32", "fixed", "adapt", "muppet", "amp")
# one more run: amp with graph precision propagation, the classifier (layer 11) kept float32
GRAPH_RUN = "amp-graph"
GRAPH_SETS = ("policy.name=amp", "quantization.precision_propagation=graph",
              "quantization.graph_float=11")


def have(module):
    return importlib.util.find_spec(module) is not None


def program(name):
    return os.path.join(BUILDDIR, name)


needs_jsonschema = unittest.skipUnless(have("jsonschema"), "python3-jsonschema not installed")
needs_report = unittest.skipUnless(os.path.isdir(REPORT_TRACES),
                                   "no committed report traces in " + REPORT_TRACES)
needs_torch = unittest.skipUnless(have("torch"), "torch not installed")
needs_trainer = unittest.skipUnless(os.access(program("adapt-train"), os.X_OK),
                                    "adapt-train not built (set ADAPT_BUILDDIR)")


def train(out, config, *sets):
    """Runs adapt-train with --set overrides into out; returns out. Fails the test on error."""
    cmd = [program("adapt-train"), "--config", os.path.join(SRCDIR, config), "--force",
           "--set", "run.out=" + out, "--set", "run.threads=1"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=SRCDIR)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode,
                                                       p.stdout.decode(errors="replace")))
    return out


BASE_CONFIG = "experiments/configs/fmnist_lenet5.ini"
TINY = ("data.train_limit=256", "data.val_size=256", "data.test_limit=256", "train.epochs=2",
        "train.eval_batch=256")


class RunsFixture:
    """One tiny Fashion-MNIST LeNet-5 run per policy, and GRAPH_RUN, made once per process."""
    _dir = None
    runs = {}

    @classmethod
    def get(cls):
        if cls._dir is None:
            cls._dir = tempfile.TemporaryDirectory(prefix="adaptsim-runs-")
            for p in POLICIES:
                cls.runs[p] = train(os.path.join(cls._dir.name, p), BASE_CONFIG,
                                    "policy.name=" + p, *TINY)
            cls.runs[GRAPH_RUN] = train(os.path.join(cls._dir.name, GRAPH_RUN), BASE_CONFIG,
                                        *(GRAPH_SETS + TINY))
        return cls.runs

"""experiments/report.py build: one colour scale per metric shared by the heatmaps of a report,
and one README line plus a word-length heatmap for a run whose per-unit formats never change."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from common import REPORT_TRACES, SRCDIR, needs_report, program

spec = importlib.util.spec_from_file_location(
    "report", os.path.join(SRCDIR, "experiments", "report.py"))
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)

needs_programs = unittest.skipUnless(
    all(os.access(program(p), os.X_OK) for p in ("adapt-perf", "adapt-heatmap")),
    "adapt-perf and adapt-heatmap not built (set ADAPT_BUILDDIR)")


def write_trace(path, policy, steps, config_file="", names=("0", "3")):
    """A trace with the fields report.py reads: a header, then one step record per entry of
    steps, each a list of (wl, fl) per unit; adapt runs also record a lookback."""
    header = {"type": "header", "policy": policy, "config_file": config_file,
              "model": {"name": "lenet5"}, "dataset": {"name": "synthetic"},
              "config": {"policy": {"format": "fixed", "amp_type": "bf16"}},
              "units": [{"name": n} for n in names]}
    with open(path, "w") as f:
        f.write(json.dumps(header) + "\n")
        for i, units in enumerate(steps, 1):
            us = [dict({"wl": wl, "fl": fl}, **({"lb": 25 + i} if policy == "adapt" else {}))
                  for wl, fl in units]
            f.write(json.dumps({"type": "step", "step": i, "units": us}) + "\n")
    return path


class TestScalesAndConstantRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="adapt-report-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def trace(self, name, policy, steps, **kw):
        return report.trace_info(write_trace(os.path.join(self.tmp, name + ".jsonl"), policy,
                                             steps, **kw))

    def test_constant_runs_get_one_line(self):
        fixed = self.trace("fixed8", "fixed", [[(8, 4), (8, 4)]] * 3)
        self.assertEqual(report.constant_line(fixed),
                         "fixed8: every unit `<8,4>` for the whole run")
        mixed = self.trace("mixed", "fixed", [[(8, 4), (16, 8)]] * 3)
        self.assertEqual(report.constant_line(mixed),
                         "mixed: unit 0 `<8,4>`, unit 3 `<16,8>` for the whole run")
        fp32 = self.trace("fp32", "fp32", [[(32, 0), (32, 0)]] * 2)
        self.assertEqual(report.constant_line(fp32), "fp32: every unit float32 for the whole run")
        amp = self.trace("amp", "amp", [[(16, 0), (16, 0)]] * 2)  # amp_type bf16 in the header
        self.assertEqual(report.constant_line(amp), "amp: every unit bf16 for the whole run")
        # a change in one unit's FL at the last step is a change
        moving = self.trace("moving", "adapt", [[(8, 4), (8, 4)]] * 2 + [[(8, 4), (8, 5)]])
        self.assertIsNone(report.constant_line(moving))

    def test_shared_scale(self):
        """An 8-bit run and one that reaches 32 bits are drawn on one scale, 8 to 32; of the
        constant runs only the quantized one's WL is drawn and counts (float32's FL 0 would
        widen FL's)."""
        low = self.trace("low", "adapt", [[(8, 4), (8, 4)], [(10, 6), (8, 4)]])
        high = self.trace("high", "adapt", [[(16, 8), (20, 8)], [(32, 28), (24, 8)]])
        fixed = self.trace("fixed16", "fixed", [[(16, 8), (16, 8)]] * 2)
        fp32 = self.trace("fp32", "fp32", [[(32, 0), (32, 0)]] * 2)
        self.assertEqual(report.shared_scales([low, fixed, fp32])["wl"], (8, 16))
        self.assertEqual(low["ranges"]["wl"], (8, 10))
        self.assertEqual(high["ranges"]["fl"], (8, 28))
        scales = report.shared_scales([low, high, fixed, fp32])
        self.assertEqual(scales["wl"], (8, 32))
        self.assertEqual(scales["fl"], (4, 28))  # fp32's FL 0 is not drawn
        self.assertEqual(scales["lb"], (26, 27))
        for m in ("wl", "fl"):
            self.assertEqual(report.scale_args(scales, m),
                             ["--vmin", repr(scales[m][0]), "--vmax", repr(scales[m][1])])
        # one value in every run: no scale, adapt-heatmap draws the same band for each
        self.assertEqual(report.scale_args({"r": (50, 50)}, "r"), [])


@needs_report
@needs_programs
class TestBuild(unittest.TestCase):
    """The committed Fashion-MNIST traces: fixed16 and fp32 get one line each, fixed16 its WL
    heatmap and fp32 no picture; the two AdaPT runs get heatmaps in PNG, SVG and PDF on one scale per metric and
    word-length shares; one loss and accuracy picture shows all runs."""

    def test_build(self):
        out = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, out)
        traces = [os.path.join(REPORT_TRACES, n + ".jsonl")
                  for n in ("fp32", "fixed16", "adapt", "adapt_ref")]
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "build"] + traces + \
              ["--baseline", traces[0], "--out", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        self.assertIn("- fmnist_lenet5_fixed: every unit `<16,8>` for the whole run\n", md)
        self.assertIn("- fmnist_lenet5_fp32: every unit float32 for the whole run\n", md)
        self.assertIn("share one colour scale, its range over the runs drawn: wl 8 to 32;", md)
        pics = sorted(os.listdir(os.path.join(out, "pictures")))
        self.assertFalse([f for f in pics if f.startswith("fp32_")], pics)
        self.assertEqual([f for f in pics if f.startswith("fixed16_")],
                         ["fixed16_wl.pdf", "fixed16_wl.png", "fixed16_wl.svg"])
        for run in ("adapt", "adapt_ref"):
            for ext in ("png", "svg", "pdf"):
                self.assertIn("%s_wl.%s" % (run, ext), pics)
        with open(os.path.join(out, "pictures", "adapt_wl.pdf"), "rb") as f:
            self.assertEqual(f.read(5), b"%PDF-")
        self.assertIn("cost_curve.pdf", pics)
        # loss and accuracy of all runs; word-length shares of the runs whose formats change
        for f in ("accuracy.png", "accuracy.svg", "accuracy.pdf", "adapt_wldist.png",
                  "adapt_ref_wldist.pdf"):
            self.assertIn(f, pics)
        self.assertIn("## Loss and accuracy per epoch", md)
        self.assertIn("![adapt_ref wldist](pictures/adapt_ref_wldist.png)", md)


class TestMarkdownEscapes(unittest.TestCase):
    def test_md(self):
        """One helper escapes every name from a trace: '|', '\\' and '`' get a backslash, HTML's
        characters become entities, control characters spaces (as adapt-perf's md_text)."""
        self.assertEqual(report.md("a|b<script>&`x`\\\n\r\x7f."),
                         "a\\|b&lt;script&gt;&amp;\\`x\\`\\\\   .")
        self.assertEqual(report.md("fmnist_lenet5_adapt_ref [reference]"),
                         "fmnist_lenet5_adapt_ref [reference]")
        self.assertEqual(report.md_code("r|<b>"), "<code>r\\|&lt;b&gt;</code>")

    @needs_report
    @needs_programs
    def test_build_escapes_trace_names(self):
        """A run whose configuration file, model and data set are named with '|', HTML, '`',
        '\\' and a line break: the README's tables keep their cells and carry no HTML but the
        code elements of the paths."""
        out = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, out)
        trace = os.path.join(out, "hostile.jsonl")
        with open(os.path.join(REPORT_TRACES, "fp32.jsonl")) as f, open(trace, "w") as g:
            for line in f:  # the header and the first epoch: steps 1..215, its epoch record
                rec = json.loads(line)
                if rec["type"] == "header":
                    rec["config_file"] = "cfg/r|<b>&`n`\\\n.ini"
                    rec["model"]["name"] = "a|b<script>alert(1)</script>"
                    rec["dataset"]["name"] = "d|s\nx"
                elif rec["type"] == "step" and rec["step"] > 215 or rec["type"] == "epoch" \
                        and rec["epoch"] > 0 or rec["type"] in ("test", "end"):
                    continue
                g.write(json.dumps(rec) + "\n")
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "build", trace, "--out", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        label = "r\\|&lt;b&gt;&amp;\\`n\\`\\\\ "
        self.assertIn("\n| %s | fp32 | - | a\\|b&lt;script&gt;alert(1)&lt;/script&gt; | d\\|s x | "
                      "<code>hostile.jsonl</code> |\n" % label, md)
        self.assertIn("\n- %s: every unit float32 for the whole run\n" % label, md)
        self.assertNotIn("<script", md)
        self.assertNotIn("<b>", md)
        # every table line has as many cells as its table's first line
        cells = None
        for line in md.split("\n"):
            n = len(re.findall(r"(?<!\\)(?:\\\\)*\|", line)) - 1 if line.startswith("|") else None
            if n is not None and cells is not None:
                self.assertEqual(n, cells, line)
            cells = n


if __name__ == "__main__":
    unittest.main()

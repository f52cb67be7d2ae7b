"""experiments/report.py build: one colour scale per metric shared by the heatmaps of a report,
and one README line instead of word-length heatmaps for a run whose per-unit formats never
change."""
import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from common import FMNIST, REPORT_TRACES, SRCDIR, needs_report, needs_trainer, program

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
        """An 8-bit run and one that reaches 32 bits are drawn on one scale, 8 to 32; the
        constant runs' formats are not drawn and do not count (fixed16's 16 bits would not
        widen WL's, float32's FL 0 would widen FL's)."""
        low = self.trace("low", "adapt", [[(8, 4), (8, 4)], [(10, 6), (8, 4)]])
        high = self.trace("high", "adapt", [[(16, 8), (20, 8)], [(32, 28), (24, 8)]])
        fixed = self.trace("fixed16", "fixed", [[(16, 8), (16, 8)]] * 2)
        fp32 = self.trace("fp32", "fp32", [[(32, 0), (32, 0)]] * 2)
        self.assertEqual(report.shared_scales([low, fixed, fp32])["wl"], (8, 10))
        self.assertNotIn("wl", report.shared_scales([fixed, fp32]))
        self.assertEqual(low["ranges"]["wl"], (8, 10))
        self.assertEqual(high["ranges"]["fl"], (8, 28))
        scales = report.shared_scales([low, high, fixed, fp32])
        self.assertEqual(scales["wl"], (8, 32))
        self.assertEqual(scales["fl"], (4, 28))  # fp32's FL 0 is not drawn
        self.assertEqual(scales["lb"], (26, 27))
        for m in ("wl", "fl"):
            self.assertEqual(report.scale_args(scales, m),
                             ["--vmin", repr(scales[m][0]), "--vmax", repr(scales[m][1])])
        # one value in every run: no scale, adapt-heatmap draws it on the metric's own range
        self.assertEqual(report.scale_args({"r": (50, 50)}, "r"), [])

    def test_constant_formats_moving_lookback(self):
        """An AdaPT run that never left its start format: no WL or FL heatmap, but its
        lookback, which changes, is drawn."""
        still = self.trace("still", "adapt", [[(8, 4), (8, 4)]] * 3)
        self.assertEqual(report.constant_line(still), "still: every unit `<8,4>` for the whole run")
        self.assertEqual(report.drawn_metrics(still), ["lb"])
        self.assertEqual(report.shared_scales([still])["lb"], (26, 28))

    def test_nice_range(self):
        """Scale ends rounded outward to a tenth of the span's order of magnitude (the review's
        lookback 25.2849 to 63.9531 reads 25 to 64); integer ends stay."""
        self.assertEqual(report.nice_range(25.2849, 63.9531), (25, 64))
        self.assertEqual(report.nice_range(0.0123, 0.4567), (0.01, 0.46))
        self.assertEqual(report.nice_range(8, 32), (8, 32))
        self.assertEqual(report.nice_range(3.5, 3.5), (3.5, 3.5))


@needs_report
@needs_programs
class TestBuild(unittest.TestCase):
    """The committed Fashion-MNIST traces: fixed16 and fp32 get one line each and no picture; the two AdaPT runs get heatmaps in PNG, SVG and PDF on one scale per metric and
    word-length shares; one loss and accuracy picture shows all runs."""

    def test_build(self):
        out = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, out)
        traces = [os.path.join(REPORT_TRACES, n + ".jsonl")
                  for n in ("fp32", "fixed16", "adapt", "adapt_ref")]
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "build"] + traces + \
              ["--baseline", traces[0], "--out", out]
        # a --notes file that cannot be read is refused by name before anything is written
        bad = subprocess.run(cmd + ["--notes", os.path.join(out, "none.md")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(bad.returncode, 1)
        self.assertIn(b"--notes %s: cannot read it" % os.path.join(out, "none.md").encode(),
                      bad.stdout)
        self.assertEqual(os.listdir(out), [])
        notes = os.path.join(out, "notes.md")
        with open(notes, "w") as f:
            f.write("AdaPT's memory is **1.03** of float32's.\n")
        p = subprocess.run(cmd + ["--notes", notes], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        self.assertIn("## Reading the numbers\n\nAdaPT's memory is **1.03** of float32's.\n"
                      "\n## Training cost relative to float32", md)
        self.assertIn("- fmnist_lenet5_fixed: every unit `<16,8>` for the whole run\n", md)
        self.assertIn("- fmnist_lenet5_fp32: every unit float32 for the whole run\n", md)
        self.assertIn("share one colour scale, its range over the runs drawn: wl 8 to 32;", md)
        pics = sorted(os.listdir(os.path.join(out, "pictures")))
        self.assertFalse([f for f in pics if f.startswith("fp32_")], pics)
        self.assertFalse([f for f in pics if f.startswith("fixed16_")], pics)
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


    def test_machines(self):
        """Two runs whose headers name two CPUs: the run table gets a machine column (A, B)
        and the two machines are listed; the same two runs on one machine: one sentence."""
        tmp = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, tmp)
        one = {"commit": "abc", "compiler": "gcc 12.2.0", "cpu": "CPU One", "isa": "x86-64-v4",
               "blas": "OpenBLAS 0.3.21 Haswell", "device": "cpu"}
        two = dict(one, cpu="CPU Two")
        a = first_epoch(os.path.join(REPORT_TRACES, "fp32.jsonl"),
                        os.path.join(tmp, "a", "trace.jsonl"), build=one)
        b = first_epoch(os.path.join(REPORT_TRACES, "fixed16.jsonl"),
                        os.path.join(tmp, "b", "trace.jsonl"), build=two)
        for traces, want in (([a, b], ["| A |", "| B |"]), ([a, a.replace("/a/", "/a2/")], None)):
            if want is None:
                shutil.copytree(os.path.dirname(a), os.path.dirname(traces[1]))
            out = os.path.join(tmp, "out%d" % len(os.listdir(tmp)))
            p = subprocess.run([sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                                "--bin", os.path.dirname(program("adapt-perf")), "build"] +
                               traces + ["--out", out], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
            with open(os.path.join(out, "README.md")) as f:
                md = f.read()
            table = [l for l in md.split("\n") if l.startswith("| ")]
            if want:
                self.assertTrue(table[0].endswith("| trace | machine |"), table[0])
                self.assertTrue(table[1].endswith(want[0]), table[1])
                self.assertTrue(table[2].endswith(want[1]), table[2])
                self.assertIn("Runs come from 2 machines or builds", md)
                self.assertIn("| B | CPU Two (x86-64-v4), OpenBLAS 0.3.21 Haswell, device cpu; "
                              "commit abc, gcc 12.2.0 |", md)
            else:
                self.assertTrue(table[0].endswith("| trace |"), table[0])
                self.assertIn("Every run's machine and build (trace header \"build\"): CPU One",
                              md)


def first_epoch(src, dst, **header):
    """The header (its fields updated from `header`; run_name: config.run.name) and first epoch
    of trace src, written to dst (its folder made)."""
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(src) as f, open(dst, "w") as g:
        for line in f:  # the header and the first epoch: steps 1..215, its epoch record
            rec = json.loads(line)
            if rec["type"] == "header":
                name = header.pop("run_name", None)
                if name is not None:
                    rec["config"]["run"]["name"] = name
                rec.update(header)
            elif rec["type"] == "step" and rec["step"] > 215 or rec["type"] == "epoch" \
                    and rec["epoch"] > 0 or rec["type"] in ("test", "end"):
                continue
            g.write(json.dumps(rec) + "\n")
    return dst


def run_rows(md):
    """The (run, policy) cells of the rows of README.md's first table and of adapt-perf's
    comparison table (the one after "## Comparison")."""
    def rows(text):
        lines = text.split("\n")
        start = next(i for i, l in enumerate(lines) if l.startswith("| run |"))
        out = []
        for l in lines[start + 2:]:
            if not l.startswith("|"):
                break
            out.append(tuple(c.strip() for c in l.strip("|").split("|")[:2]))
        return out
    return rows(md), rows(md.split("## Comparison", 1)[1])


class TestRunNames(unittest.TestCase):
    """Runs are named by one rule (adapt-perf's perf_runs_label): run.name, else the
    configuration file's stem; runs that share a name get the fewest trailing path components
    that tell them apart."""

    def test_tell_apart(self):
        t = report.tell_apart
        self.assertEqual(t(["fmnist_lenet5"] * 2, ["runs/long/adapt/trace.jsonl",
                                                   "runs/my/adapt/trace.jsonl"]),
                         ["fmnist_lenet5 (long/adapt)", "fmnist_lenet5 (my/adapt)"])
        # the folder alone tells them apart: the labels of before
        self.assertEqual(t(["s", "s"], ["out/runs/fixed8/trace.jsonl", "out/runs/mxfp8/trace.jsonl"]),
                         ["s (fixed8)", "s (mxfp8)"])
        # each run the fewest components; unique names kept; trace files by their stem
        self.assertEqual(t(["s", "s", "s", "u"], ["a/x/trace.jsonl", "b/x/trace.jsonl",
                                                  "./c//y.jsonl", "a/x/trace.jsonl"]),
                         ["s (a/x)", "s (b/x)", "s (y)", "u"])
        hdr = {"policy": "fixed", "config_file": "experiments/configs/fmnist_lenet5_fixed.ini",
               "config": {"run": {"name": "fixed8"}}}
        self.assertEqual(report.run_label(hdr, "x/trace.jsonl"), ("fixed8", ""))
        hdr["config"]["run"]["name"] = ""
        self.assertEqual(report.run_label(hdr, "x/trace.jsonl"), ("fmnist_lenet5_fixed", ""))

    @needs_trainer
    def test_commands_name_runs(self):
        """`run` passes the run list's NAME as run.name, before the line's own --set."""
        tmp = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, tmp)
        rl = os.path.join(tmp, "runs.txt")
        with open(rl, "w") as f:
            f.write("fixed8  experiments/configs/fmnist_lenet5_fixed.ini --set policy.wl=8\n"
                    "fixed12 experiments/configs/fmnist_lenet5_fixed.ini --set policy.wl=12\n")
        args = argparse.Namespace(out=tmp, bin=os.path.dirname(program("adapt-train")),
                                  threads=1, set=None)
        with open(report.write_commands(args, report.read_runlist(rl))) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 2)
        for line, name, wl in zip(lines, ("fixed8", "fixed12"), ("8", "12")):
            self.assertIn(" --set run.name=%s --set policy.wl=%s " % (name, wl), line)

    @needs_report
    @needs_programs
    def test_build_same_folder(self):
        """Two runs of one configuration in runs/long/adapt and runs/my/adapt: the README's
        table and adapt-perf's name them by the ends of their paths, and their pictures are
        named apart; a run.name names its run."""
        out = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, out)
        src = os.path.join(REPORT_TRACES, "adapt.jsonl")
        dirs = [os.path.join(out, "runs", w, "adapt") for w in ("long", "my")]
        for d in dirs:
            first_epoch(src, os.path.join(d, "trace.jsonl"))
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "build"] + dirs + ["--out", out]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        want = [("fmnist_lenet5 (long/adapt)", "adapt"),
                ("fmnist_lenet5 (my/adapt)", "adapt")]
        self.assertEqual(run_rows(md), (want, want))
        pics = os.listdir(os.path.join(out, "pictures"))
        for f in ("long_adapt_wl.png", "my_adapt_wl.png"):
            self.assertIn(f, pics)
        first_epoch(src, os.path.join(dirs[1], "trace.jsonl"), run_name="mxfp8")
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        want = [("fmnist_lenet5", "adapt"), ("mxfp8", "adapt")]
        self.assertEqual(run_rows(md), (want, want))

    @needs_trainer
    @needs_programs
    @unittest.skipUnless(os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")),
                         "no Fashion-MNIST in " + FMNIST)
    def test_all_names_runs(self):
        """`report.py all` on a run list of two lines of one configuration (a short run each):
        the README's run table, adapt-perf's tables and table.csv carry the run list's NAMEs."""
        out = tempfile.mkdtemp(prefix="adapt-report-")
        self.addCleanup(shutil.rmtree, out)
        rl = os.path.join(out, "runs.txt")
        with open(rl, "w") as f:
            f.write("fixed8  experiments/configs/fmnist_lenet5_fixed.ini "
                    "--set policy.wl=8 --set policy.fl=4\n"
                    "fixed12 experiments/configs/fmnist_lenet5_fixed.ini "
                    "--set policy.wl=12 --set policy.fl=6\n")
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "all", rl, "--out", out,
               "--jobs", "1", "--threads", "1"]
        for kv in ("train.epochs=1", "data.train_limit=300", "data.val_size=100",
                   "data.test_limit=100"):
            cmd += ["--set", kv]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)
        self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
        with open(os.path.join(out, "README.md")) as f:
            md = f.read()
        want = [("fixed12", "fixed"), ("fixed8", "fixed")]  # runs/* in sorted order
        self.assertEqual(run_rows(md), (want, want))
        with open(os.path.join(out, "table.csv")) as f:
            self.assertEqual([l.split(",")[0] for l in f.read().splitlines()[1:]],
                             ["fixed12", "fixed8"])


class TestAblation(unittest.TestCase):
    """`report.py ablation`: the runs a configuration's ablation trains, and its table."""

    @needs_trainer
    @needs_programs
    @unittest.skipUnless(os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")),
                         "no Fashion-MNIST in " + FMNIST)
    def test_ablation_runs_and_table(self):
        """One switch, two seeds, short runs: reference, the switch off alone and corrected,
        each seed a run named VARIANT_sSEED with its settings; a table row per variant with
        the seeds' test accuracies in order, and the ablation's run list and JSON."""
        out = tempfile.mkdtemp(prefix="adapt-ablation-")
        self.addCleanup(shutil.rmtree, out)
        cmd = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
               "--bin", os.path.dirname(program("adapt-perf")), "ablation",
               "reference/lenet_msgd_fp_fmnist", "--out", out, "--seeds", "3,4",
               "--switches", "softmax_before_ce", "--jobs", "2", "--threads", "1"]
        for kv in ("train.epochs=1", "data.train_limit=300", "data.val_size=100",
                   "data.test_limit=100"):
            cmd += ["--set", kv]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)
        text = p.stdout.decode(errors="replace")
        if "matplotlib is not importable" in text:  # the table is written all the same
            self.assertNotEqual(p.returncode, 0)
        else:
            self.assertEqual(p.returncode, 0, text)
            self.assertTrue(os.path.isfile(os.path.join(out, "ablation.png")))
        with open(os.path.join(out, "ablation.json")) as f:
            j = json.load(f)
        self.assertEqual([r["variant"] for r in j["rows"]],
                         ["reference", "no_softmax_before_ce", "corrected"])
        self.assertEqual(j["seeds"], [3, 4])
        for r in j["rows"]:
            accs = []
            for seed in (3, 4):
                d = os.path.join(out, "runs", "%s_s%d" % (r["variant"], seed))
                with open(os.path.join(d, "config.ini")) as f:
                    ini = f.read()
                self.assertRegex(ini, r"seed = %d\b" % seed)
                self.assertIn("compat = %s" % ("corrected" if r["variant"] == "corrected"
                                                 else "reference"), ini)
                if r["variant"] == "no_softmax_before_ce":
                    self.assertRegex(ini, r"softmax_before_ce = off")
                with open(os.path.join(d, "trace.jsonl")) as f:
                    tests = [json.loads(l) for l in f if '"type":"test"' in l]
                accs.append(tests[-1]["test_acc"])
            self.assertEqual(r["accs"], accs)
            self.assertAlmostEqual(r["acc_mean"], sum(accs) / 2)
        with open(os.path.join(out, "ablation.md")) as f:
            md = f.read()
        self.assertEqual([l.split("|")[1].strip() for l in md.splitlines()
                          if l.startswith("| ") and not l.startswith("| variant")],
                         ["reference", "no_softmax_before_ce", "corrected"])
        self.check_merge(cmd, out, j)
        self.check_each_on(cmd, j)

    def check_merge(self, cmd, out, both):
        """--merge: seed 4's table with seed 3's ablation.json merged equals the two-seed table
        built from the runs, also from a single-seed file written before per_seed lists were
        kept; a seed a merged file holds is not taken from the runs; a file of some of the
        switches adds their variants' seeds, and a variant left without a seed is named; two
        files that disagree on a seed, a two-seed file without per_seed lists and a file of
        other switches are refused by name."""
        base = cmd[:cmd.index("--seeds")]
        tail = [w for kv in ("train.epochs=1", "data.train_limit=300", "data.val_size=100",
                             "data.test_limit=100") for w in ("--set", kv)]
        tail += ["--switches", "softmax_before_ce", "--table-only"]

        def table(seeds, *extra):
            p = subprocess.run(base + ["--seeds", seeds] + tail + list(extra),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)
            text = p.stdout.decode(errors="replace")
            j = None
            if os.path.isfile(os.path.join(out, "ablation.json")):
                with open(os.path.join(out, "ablation.json")) as f:
                    j = json.load(f)
            return p.returncode, text, j

        rc, text, one = table("3")
        self.assertIn(rc, (0, 1), text)
        self.assertEqual(one["seeds"], [3])
        first = os.path.join(out, "seed3.json")
        with open(first, "w") as f:
            json.dump(one, f)
        old = dict(one, rows=[{k: v for k, v in r.items() if k != "per_seed"}
                              for r in one["rows"]])
        oldp = os.path.join(out, "seed3-old.json")
        with open(oldp, "w") as f:
            json.dump(old, f)
        for m in (first, oldp):
            rc, text, merged = table("4", "--merge", m)
            self.assertIn("ablation.md", text)
            self.assertEqual(merged["seeds"], [3, 4])
            self.assertEqual(merged["rows"], both["rows"])
        # a variant and seed that a merged file holds is taken from it, not from the runs
        rc, text, again = table("3", "--merge", first)
        self.assertIn("ablation.md", text)
        self.assertEqual(again["rows"], one["rows"])
        with open(os.path.join(out, "ablation.txt")) as f:
            self.assertEqual([l for l in f.read().splitlines() if not l.startswith("#")], [])
        # a file of some of the switches (here none: reference and corrected only) adds their
        # seeds; two files may hold a variant and seed with the same figures, not others
        sub = os.path.join(out, "sub.json")
        with open(sub, "w") as f:
            json.dump(dict(one, switches=[], rows=[r for r in one["rows"]
                                                   if r["variant"] != "no_softmax_before_ce"]), f)
        rc, text, merged = table("4", "--merge", sub, "--merge", first)
        self.assertIn("ablation.md", text)
        self.assertEqual(merged["rows"], both["rows"])
        rc, text, _ = table("4", "--merge", sub)  # seed 3 of the switch off alone is missing
        self.assertNotEqual(rc, 0)
        self.assertIn("the seeds of no_softmax_before_ce (4) are not those of reference (3,4): "
                      "run the ablation with --seeds 3,4", text)
        clash = os.path.join(out, "clash.json")
        rows = json.loads(json.dumps(one["rows"]))
        rows[0]["per_seed"][0]["test_acc"] = 0.5
        with open(clash, "w") as f:
            json.dump(dict(one, rows=rows), f)
        rc, text, _ = table("4", "--merge", first, "--merge", clash)
        self.assertNotEqual(rc, 0)
        self.assertIn("clash.json: seed 3 of reference differs from that of an earlier --merge",
                      text)
        two = os.path.join(out, "two-old.json")
        with open(two, "w") as f:
            json.dump(dict(both, seeds=[3, 4], rows=[{k: v for k, v in r.items()
                                                       if k != "per_seed"}
                                                      for r in both["rows"]]), f)
        rc, text, _ = table("4", "--merge", two)
        self.assertNotEqual(rc, 0)
        self.assertIn("no \"per_seed\" list, and more than one seed", text)
        other = os.path.join(out, "other.json")
        with open(other, "w") as f:
            json.dump(dict(one, switches=["act_formats"]), f)
        rc, text, _ = table("4", "--merge", other)
        self.assertNotEqual(rc, 0)
        self.assertIn("\"switches\" is [\"act_formats\"], not among this ablation's "
                      "[\"softmax_before_ce\"]", text)
        rc, text, _ = table("4", "--merge", first, "--each", "on")
        self.assertNotEqual(rc, 0)
        self.assertIn("\"each\" is \"off\", this ablation's is \"on\"", text)

    def check_each_on(self, cmd, off):
        """--each on, seed 3: corrected, corrected with the switch on alone and the reference,
        in that order; the corrected and reference runs are those of the ablation of each switch
        off (the same commands: the same test accuracies), and the switch on alone runs the
        corrected mode with it (its configuration, and a loss that differs from corrected's from
        the first step: softmax_before_ce changes the loss itself)."""
        out = tempfile.mkdtemp(prefix="adapt-ablation-on-")
        self.addCleanup(shutil.rmtree, out)
        c = list(cmd)
        c[c.index("--out") + 1] = out
        c[c.index("--seeds") + 1] = "3"
        p = subprocess.run(c + ["--each", "on"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, cwd=out)
        text = p.stdout.decode(errors="replace")
        self.assertIn("ablation.md", text)
        with open(os.path.join(out, "ablation.json")) as f:
            j = json.load(f)
        self.assertEqual(j["each"], "on")
        self.assertEqual([r["variant"] for r in j["rows"]],
                         ["corrected", "with_softmax_before_ce", "reference"])
        acc_off = {r["variant"]: r["accs"][0] for r in off["rows"]}  # seed 3 first
        rows = {r["variant"]: r for r in j["rows"]}
        self.assertEqual(rows["corrected"]["accs"], [acc_off["corrected"]])
        self.assertEqual(rows["reference"]["accs"], [acc_off["reference"]])

        def run(name):
            d = os.path.join(out, "runs", name + "_s3")
            with open(os.path.join(d, "config.ini")) as f:
                ini = f.read()
            with open(os.path.join(d, "trace.jsonl")) as f:
                steps = [json.loads(l) for l in f if '"type":"step"' in l]
            return ini, steps[0]["loss"]

        ini, loss_with = run("with_softmax_before_ce")
        self.assertIn("compat = corrected", ini)
        self.assertRegex(ini, r"softmax_before_ce = on")
        _, loss_corr = run("corrected")
        self.assertNotEqual(loss_with, loss_corr)
        with open(os.path.join(out, "ablation.md")) as f:
            self.assertIn("each [reference] switch on alone", f.read())

    @needs_trainer
    @needs_programs
    @unittest.skipUnless(os.path.isfile(os.path.join(FMNIST, "train-images-idx3-ubyte.gz")),
                         "no Fashion-MNIST in " + FMNIST)
    def test_compat_settings(self):
        """ste, round_logits and lb_update are switches too: off alone from the reference, each
        run's configuration holds the corrected mode's value of that one setting; a name that
        is no switch is refused before any run."""
        out = tempfile.mkdtemp(prefix="adapt-ablation-compat-")
        self.addCleanup(shutil.rmtree, out)
        base = [sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                "--bin", os.path.dirname(program("adapt-perf")), "ablation",
                "reference/lenet_msgd_fp_fmnist", "--out", out, "--seeds", "3",
                "--jobs", "2", "--threads", "1"]
        for kv in ("train.epochs=1", "data.train_limit=200", "data.val_size=100",
                   "data.test_limit=100"):
            base += ["--set", kv]
        p = subprocess.run(base + ["--switches", "ste,nonesuch"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, cwd=out)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("'nonesuch' is neither a key of the [reference] section", p.stdout.decode())
        self.assertFalse(os.path.isdir(os.path.join(out, "runs")))
        # a setting the configuration pins is the same in both modes: no switch
        p = subprocess.run(base + ["--set", "quantization.ste=plain", "--switches", "ste"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("'ste' is neither a key", p.stdout.decode())
        self.assertIn("(round_logits, lb_update)", p.stdout.decode())
        p = subprocess.run(base + ["--switches", "ste,round_logits,lb_update"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=out)
        text = p.stdout.decode(errors="replace")
        self.assertIn("ablation.md", text)
        want = {"no_ste": "ste = saturating", "no_round_logits": "round_logits = false",
                "no_lb_update": "lb_update = window"}
        for name, line in want.items():
            with open(os.path.join(out, "runs", name + "_s3", "config.ini")) as f:
                ini = f.read()
            self.assertIn("compat = reference", ini)
            self.assertRegex(ini, r"(?m)^%s$" % line)
            for other, oline in want.items():
                if other != name:
                    self.assertRegex(ini, r"(?m)^%s = auto$" % oline.split(" =")[0])

    def test_bad_seeds(self):
        p = subprocess.run([sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                            "ablation", "fmnist_lenet5", "--out", tempfile.gettempdir(),
                            "--seeds", "1,x"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--seeds expects integers", p.stdout.decode())


class TestLookup(unittest.TestCase):
    """Run lists and configurations found by name, as adapt-train --config finds a
    configuration; messages name the command (adapt-report when installed)."""

    def test_runlist_by_name(self):
        runs = report.read_runlist("fmnist_lenet5_policies")  # no folder, no .txt
        self.assertGreaterEqual(len(runs), 3)
        for _, cfg, _ in runs:
            self.assertTrue(os.path.isfile(cfg), cfg)

    def test_config_by_name(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mine.txt")
            with open(path, "w") as f:
                f.write("a fmnist_lenet5_fp32 --set train.epochs=1\nb fmnist_lenet5.ini\n")
            runs = report.read_runlist(path)
            self.assertEqual([os.path.basename(c) for _, c, _ in runs],
                             ["fmnist_lenet5_fp32.ini", "fmnist_lenet5.ini"])

    def test_missing_names_the_command_and_places(self):
        env = dict(os.environ, ADAPT_REPORT_PROG="adapt-report")
        r = subprocess.run([sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                            "slurm", "no_such_list", "--out", "x"], env=env,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertTrue(r.stderr.startswith("adapt-report: no_such_list: no such run list "
                                            "(looked in the current directory"), r.stderr)
        self.assertIn(os.path.join("experiments", "runlists"), r.stderr)


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


class TestAccum(unittest.TestCase):
    """`report.py accum`: the accumulator-width table from finished runs."""

    def run_trace(self, d, name, seed, accumulator, acc, overflows, build=None):
        os.makedirs(os.path.join(d, "runs", name))
        cfg = {"run": {"name": name}}
        if accumulator:
            cfg["arithmetic"] = {"accumulator": accumulator}
        header = {"type": "header", "seed": seed, "config": cfg}
        if build:
            header["build"] = build
        with open(os.path.join(d, "runs", name, "trace.jsonl"), "w") as f:
            f.write(json.dumps(header) + "\n")
            for _ in range(2):
                u = {"wl": 8, "fl": 4, "acc": {"gemms": [1, 0, 0], "overflows": [overflows, 0, 0]}}
                f.write(json.dumps({"type": "step", "units": [u, u]}) + "\n")
            if acc is not None:
                f.write(json.dumps({"type": "test", "test_acc": acc}) + "\n")

    def test_table_and_narrowest(self):
        """Two seeds. exact: 86.0 both. wrap: 24 bits 85.8 (0.2 off), 16 bits 80.0: the
        narrowest within 0.5 points is 24. saturate: 24 bits 86.1, 20 bits 85.0 (1.0 off),
        16 bits 85.7 (0.3 off): 16 is within but 20 is not, so the narrowest is 24; a register
        with its binary point at F = 2 is a rule of its own (16 bits, 85.9: 16). Overflows
        per step: 2 units x 7 per step record = 14."""
        tmp = tempfile.mkdtemp(prefix="adapt-accum-")
        self.addCleanup(shutil.rmtree, tmp)
        runs = {"fixed84_float32": (None, 0.86), "fixed84_exact": ("exact", 0.86),
                "fixed84_int24_wrap": ("int(24, wrap)", 0.858),
                "fixed84_int16_wrap": ("int(16,wrap)", 0.80),
                "fixed84_int24_sat": ("int(24, saturate)", 0.861),
                "fixed84_int20_sat": ("int(20, saturate)", 0.85),
                "fixed84_int16_sat": ("int(16, saturate)", 0.857),
                "fixed84_int16_sat_f2": ("int(16, saturate, 2)", 0.859)}
        for seed in (1, 2):
            for name, (a, acc) in runs.items():
                self.run_trace(os.path.join(tmp, "s%d" % seed), name, seed, a, acc,
                               7 if a and a.startswith("int") else 0)
        # a run still training (no test record) is left out
        self.run_trace(os.path.join(tmp, "s2"), "fixed84_int12_sat", 2, "int(12, saturate)",
                       None, 7)
        out = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                            "accum", os.path.join(tmp, "s1"), os.path.join(tmp, "s2"),
                            "--out", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        text = p.stdout.decode(errors="replace")
        if "matplotlib is not importable" not in text:
            self.assertEqual(p.returncode, 0, text)
            self.assertTrue(os.path.isfile(os.path.join(out, "accum.png")))
        with open(os.path.join(out, "accum.json")) as f:
            j = json.load(f)
        rows = [(r["group"], r["accumulator"], r["seeds"]) for r in j["rows"]]
        self.assertEqual(rows, [("fixed84", "float32", [1, 2]), ("fixed84", "exact", [1, 2]),
                                ("fixed84", "int(16, saturate)", [1, 2]),
                                ("fixed84", "int(16, saturate, 2)", [1, 2]),
                                ("fixed84", "int(16,wrap)", [1, 2]),
                                ("fixed84", "int(20, saturate)", [1, 2]),
                                ("fixed84", "int(24, saturate)", [1, 2]),
                                ("fixed84", "int(24, wrap)", [1, 2])])
        self.assertEqual([r["fwd_ov_per_step"] for r in j["rows"]], [0, 0, 14, 14, 14, 14, 14, 14])
        narrow = {(n["group"], n["rule"]): n["bits"] for n in j["narrowest"]}
        self.assertEqual(narrow, {("fixed84", "wrap"): 24, ("fixed84", "saturate"): 24,
                                  ("fixed84", "saturate, F=2"): 16})
        with open(os.path.join(out, "accum.md")) as f:
            self.assertIn("| fixed84 | saturate | 86.00 | int(24) | 16, 20, 24 |", f.read())

    def accum(self, *argv):
        p = subprocess.run([sys.executable, os.path.join(SRCDIR, "experiments", "report.py"),
                            "accum"] + list(argv), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        return p.returncode, p.stdout.decode(errors="replace")

    def test_accumulator_text(self):
        """The rule of a register from its text: the overflow, F when given, and the
        alignment when it is not the default floor."""
        def of(a):
            return report.accum_of({"config": {"arithmetic": {"accumulator": a}}})
        self.assertEqual(of("int(16,  saturate, 8, nearest)"),
                         ("int(16, saturate, 8, nearest)", 16, "saturate, F=8, nearest"))
        self.assertEqual(of("int(16, saturate, 8, floor)")[2], "saturate, F=8")
        self.assertEqual(of("int(24)")[1:], (24, "wrap"))
        self.assertEqual(of("exact"), ("exact", None, None))

    def test_machines(self):
        """The machine of each run from its header's build. Seeds 1 and 2 on one machine:
        one sentence names it, no column. Seed 3 on another CPU, merged with the first file:
        a machine column (A / A / B) and a table of the two machines; a row of an older file
        without builds, merged, is "?", "not recorded", and no machine of its own."""
        tmp = tempfile.mkdtemp(prefix="adapt-accum-")
        self.addCleanup(shutil.rmtree, tmp)
        one = {"commit": "abc", "compiler": "gcc 12.2.0", "cpu": "CPU One", "isa": "x86-64-v4",
               "blas": "OpenBLAS 0.3.21 Haswell", "device": "cpu"}
        two = dict(one, cpu="CPU Two", blas="OpenBLAS 0.3.21 SkylakeX")
        for seed in (1, 2):
            self.run_trace(os.path.join(tmp, "s%d" % seed), "fixed84_exact", seed, "exact",
                           0.86, 0, one)
        first = os.path.join(tmp, "first")
        rc, text = self.accum(os.path.join(tmp, "s1"), os.path.join(tmp, "s2"), "--out", first)
        with open(os.path.join(first, "accum.md")) as f:
            md1 = f.read()
        self.assertIn("Every run's machine and build (trace header \"build\"): CPU One "
                      "(x86-64-v4), OpenBLAS 0.3.21 Haswell, device cpu; commit abc, gcc "
                      "12.2.0.", md1)
        self.assertNotIn("machine per seed", md1)
        d3 = os.path.join(tmp, "s3")
        self.run_trace(d3, "fixed84_exact", 3, "exact", 0.83, 0, two)
        out = os.path.join(tmp, "out")
        rc, text = self.accum(d3, "--merge", os.path.join(first, "accum.json"), "--out", out)
        with open(os.path.join(out, "accum.md")) as f:
            md2 = f.read()
        self.assertIn("| fixed84 | exact | 85.00 | 83.00 - 86.00 | 86.00 / 86.00 / 83.00 "
                      "(1,2,3) | 0.0 | A / A / B |", md2)
        self.assertIn("Runs come from 2 machines or builds", md2)
        self.assertIn("| B | CPU Two (x86-64-v4), OpenBLAS 0.3.21 SkylakeX, device cpu; "
                      "commit abc, gcc 12.2.0 |", md2)
        with open(os.path.join(out, "accum.json")) as f:
            rows = json.load(f)["rows"]
        self.assertEqual([b["cpu"] for b in rows[0]["builds"]], ["CPU One", "CPU One", "CPU Two"])
        # an older accum.json without builds: its runs are "not recorded"
        old = {"rows": [{"group": "adapt", "accumulator": "exact", "seeds": [1],
                         "accs": [0.88]}]}
        oldp = os.path.join(tmp, "old.json")
        with open(oldp, "w") as f:
            json.dump(old, f)
        rc, text = self.accum("--merge", os.path.join(out, "accum.json"), "--merge", oldp,
                              "--out", os.path.join(tmp, "out3"))
        with open(os.path.join(tmp, "out3", "accum.md")) as f:
            md3 = f.read()
        self.assertIn("| adapt | exact | 88.00 | 88.00 - 88.00 | 88.00 (1) | - | ? |", md3)
        self.assertIn("Runs come from 2 machines or builds (trace header \"build\"), and some "
                      "(?) do not record theirs", md3)
        self.assertIn("| ? | not recorded (a trace written before trace headers had a "
                      "\"build\") |", md3)
        # only runs that do not say: one sentence, no column
        rc, text = self.accum("--merge", oldp, "--out", os.path.join(tmp, "out4"))
        with open(os.path.join(tmp, "out4", "accum.md")) as f:
            md4 = f.read()
        self.assertIn("The runs' traces do not record their machine", md4)
        self.assertNotIn("machine per seed", md4)

    def test_merge_seeds(self):
        """Seeds 1 and 2 in a first accum.json, seed 3 from its runs with --merge: every row
        has seeds 1, 2, 3 and the mean of the three. exact 0.86, 0.86, 0.83: 85.00; int(16,
        saturate) 0.85, 0.85, 0.82 with 4, 4, 10 overflows per step (2 units x 2, 2 x 5):
        mean 6; int(8, saturate) 0.1 in all three, whose float mean is a hair above 0.1 (the
        figure's error bars must not go negative). A seed in both the runs and the merged file
        is refused by name, as is a file that is not an accum.json."""
        tmp = tempfile.mkdtemp(prefix="adapt-accum-")
        self.addCleanup(shutil.rmtree, tmp)
        for seed in (1, 2):
            d = os.path.join(tmp, "s%d" % seed)
            self.run_trace(d, "fixed84_exact", seed, "exact", 0.86, 0)
            self.run_trace(d, "fixed84_int16_sat", seed, "int(16, saturate)", 0.85, 2)
            self.run_trace(d, "fixed84_int8_sat", seed, "int(8, saturate)", 0.1, 9)
        first = os.path.join(tmp, "first")
        rc, text = self.accum(os.path.join(tmp, "s1"), os.path.join(tmp, "s2"), "--out", first)
        self.assertIn(rc, (0, 1), text)
        d3 = os.path.join(tmp, "s3")
        self.run_trace(d3, "fixed84_exact", 3, "exact", 0.83, 0)
        self.run_trace(d3, "fixed84_int16_sat", 3, "int(16, saturate)", 0.82, 5)
        self.run_trace(d3, "fixed84_int8_sat", 3, "int(8, saturate)", 0.1, 9)
        out = os.path.join(tmp, "out")
        rc, text = self.accum(d3, "--merge", os.path.join(first, "accum.json"), "--out", out)
        # three equal accuracies whose mean rounds a hair above them: the figure still draws
        if "matplotlib is not importable" not in text:
            self.assertEqual(rc, 0, text)
        with open(os.path.join(out, "accum.json")) as f:
            j = json.load(f)
        rows = {r["accumulator"]: r for r in j["rows"]}
        self.assertEqual(rows["exact"]["seeds"], [1, 2, 3])
        self.assertAlmostEqual(rows["exact"]["acc_mean"], 0.85)
        self.assertEqual(rows["int(16, saturate)"]["accs"], [0.85, 0.85, 0.82])
        self.assertEqual(rows["int(16, saturate)"]["fwd_ov_per_seed"], [4, 4, 10])
        self.assertAlmostEqual(rows["int(16, saturate)"]["fwd_ov_per_step"], 6)
        # an older file, with the mean of the overflows only: the same means
        with open(os.path.join(first, "accum.json")) as f:
            old = json.load(f)
        for r in old["rows"]:
            del r["fwd_ov_per_seed"]
        oldp = os.path.join(tmp, "old.json")
        with open(oldp, "w") as f:
            json.dump(old, f)
        rc, text = self.accum(d3, "--merge", oldp, "--out", os.path.join(tmp, "out2"))
        with open(os.path.join(tmp, "out2", "accum.json")) as f:
            rows2 = {r["accumulator"]: r for r in json.load(f)["rows"]}
        self.assertAlmostEqual(rows2["int(16, saturate)"]["fwd_ov_per_step"], 6)
        # seed 2 twice
        rc, text = self.accum(os.path.join(tmp, "s2"), "--merge", os.path.join(first, "accum.json"),
                              "--out", os.path.join(tmp, "dup"))
        self.assertNotEqual(rc, 0)
        self.assertIn("seed 2 of fixed84 exact: also in", text)
        # --drop: seed 2 from its runs, the merged file's seed 2 left out; a whole group left
        # out; a group or seed the merged files do not have, and a malformed one, refused
        rc, text = self.accum(os.path.join(tmp, "s2"), "--merge", os.path.join(first, "accum.json"),
                              "--drop", "fixed84@2", "--out", os.path.join(tmp, "drop"))
        if "matplotlib is not importable" not in text:
            self.assertEqual(rc, 0, text)
        with open(os.path.join(tmp, "drop", "accum.json")) as f:
            jd = json.load(f)
        self.assertEqual({r["accumulator"]: r["seeds"] for r in jd["rows"]},
                         {"exact": [1, 2], "int(16, saturate)": [1, 2], "int(8, saturate)": [1, 2]})
        rc, text = self.accum(d3, "--merge", os.path.join(first, "accum.json"), "--drop",
                              "fixed84", "--out", os.path.join(tmp, "drop2"))
        with open(os.path.join(tmp, "drop2", "accum.json")) as f:
            self.assertEqual({tuple(r["seeds"]) for r in json.load(f)["rows"]}, {(3,)})
        for d, msg in (("fixed84@7", "--drop fixed84@7: no such runs in "),
                       ("adapt", "--drop adapt: no such runs in "),
                       ("fixed84@x", "--drop fixed84@x: expected GROUP or GROUP@SEED")):
            rc, text = self.accum(d3, "--merge", os.path.join(first, "accum.json"), "--drop", d,
                                  "--out", os.path.join(tmp, "drop3"))
            self.assertNotEqual(rc, 0)
            self.assertIn(msg, text)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"rows": [{"group": "g", "accumulator": "exact", "seeds": [1],
                                 "accs": [86.0]}]}, f)
        rc, text = self.accum(d3, "--merge", bad, "--out", os.path.join(tmp, "bad"))
        self.assertNotEqual(rc, 0)
        self.assertIn("bad.json: rows[0]: test accuracy 86.0 of seed 1 is not a fraction", text)
        # nothing to read, and a merged file without rows: each says what it read
        rc, text = self.accum("--out", os.path.join(tmp, "none"))
        self.assertNotEqual(rc, 0)
        self.assertIn("no runs to read: give folders of runs (DIR) or --merge", text)
        empty = os.path.join(tmp, "empty.json")
        with open(empty, "w") as f:
            json.dump({"rows": []}, f)
        rc, text = self.accum("--merge", empty, "--out", os.path.join(tmp, "none"))
        self.assertNotEqual(rc, 0)
        self.assertIn("no finished runs (with a test record) in --merge " + empty, text)


if __name__ == "__main__":
    unittest.main()

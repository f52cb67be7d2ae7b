"""adaptsim.trace: reading real traces, absent values, and file:line errors for bad ones."""
import glob
import json
import math
import os
import subprocess
import tempfile
import tracemalloc
import unittest

import numpy as np

from common import (GRAPH_RUN, POLICIES, REPORT_TRACES, RunsFixture, needs_report,
                    needs_trainer, program)

import adaptsim
from adaptsim import TraceError, read_trace

HEADER = {"type": "header", "schema": 1, "program": "adapt-sim", "version": "0.1.0",
          "created": "2024-05-01T12:00:00Z", "seed": 1, "threads": 1, "policy": "adapt",
          "config": {}, "config_file": None, "overrides": [],
          "dataset": {"name": "fashion-mnist", "train": 10, "val": 0, "test": 10, "classes": 10},
          "model": {"name": "lenet5", "input": [1, 32, 32], "classes": 10, "params": 20,
                    "macs": 20,
                    "layers": [{"name": "0", "kind": "linear", "in": [4], "out": [4],
                                "params": 20, "macs": 16, "elementwise": 0, "unit": 0}]},
          "units": [{"name": "0", "layer": 0, "weights": 16, "macs": 16}]}
STEP = {"type": "step", "step": 1, "epoch": 0, "lr": 0.1, "loss": None, "strategy": "min",
        "units": [{"wl": 8, "fl": 4, "lb": 25.5, "r": 50}],
        "events": [{"unit": 0, "kind": "pd", "before": [8, 4], "after": [7, 4],
                    "bisect_steps": 2, "kl_evals": 3, "sample": 16},
                   {"unit": 0, "kind": "pu", "before": [7, 4], "after": [9, 6], "s": 2}],
        "accum": 1, "overflow": False}
EPOCH = {"type": "epoch", "epoch": 0, "step": 1, "lr": 0.1, "train_loss": 2.0, "train_acc": 0.5,
         "val_loss": None, "val_acc": None, "wall_s": 1.5, "images_per_s": 100.0}
TEST = {"type": "test", "epoch": 1, "test_loss": 1.25, "test_acc": 0.75}
END = {"type": "end", "status": "ok", "wall_s": 2.0}


def lines(*recs):
    return "".join(json.dumps(r) + "\n" for r in recs)


def changed(rec, **kv):
    r = json.loads(json.dumps(rec))
    for k, v in kv.items():
        if v is KeyError:
            del r[k]
        else:
            r[k] = v
    return r


class TmpTrace(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, text, name="trace.jsonl"):
        p = os.path.join(self.tmp.name, name)
        with open(p, "w") as f:
            f.write(text)
        return p


class TestSynthetic(TmpTrace):
    def test_fields_and_absent_values(self):
        fp32_units = [{"wl": 32, "fl": 0}]
        step2 = changed(STEP, step=2, loss=1.5, strategy=None, units=fp32_units, events=[],
                        overflow=True)
        t = read_trace(self.write(lines(HEADER, STEP, step2, EPOCH, TEST, END)))
        self.assertEqual(t.policy, "adapt")
        self.assertEqual(t.unit_names, ["0"])
        self.assertEqual(len(t.steps), 2)
        np.testing.assert_array_equal(t.steps.step, [1, 2])
        self.assertTrue(math.isnan(t.steps.loss[0]))  # null reads as NaN
        self.assertEqual(t.steps.loss[1], 1.5)
        self.assertEqual(list(t.steps.strategy), ["min", None])
        np.testing.assert_array_equal(t.steps.overflow, [False, True])
        self.assertEqual(t.steps.wl.shape, (2, 1))
        np.testing.assert_array_equal(t.steps.wl[:, 0], [8, 32])
        # absent per-unit fields: NaN for lb / sparsity, -1 for r / sat / flush
        self.assertEqual(t.steps.lb[0, 0], 25.5)
        self.assertTrue(math.isnan(t.steps.lb[1, 0]) and math.isnan(t.steps.sparsity[0, 0]))
        np.testing.assert_array_equal(t.steps.r[:, 0], [50, -1])
        np.testing.assert_array_equal(t.steps.sat[:, 0], [-1, -1])
        self.assertEqual(len(t.events), 2)
        pd, pu = t.events
        self.assertEqual((pd.kind, pd.step, pd.before, pd.after, pd.kl_evals, pd.s),
                         ("pd", 1, (8, 4), (7, 4), 3, -1))
        self.assertEqual((pu.kind, pu.s, pu.bisect_steps), ("pu", 2, -1))
        et = t.events_table()
        np.testing.assert_array_equal(et.after, [[7, 4], [9, 6]])
        np.testing.assert_array_equal(et.kind, ["pd", "pu"])
        self.assertTrue(math.isnan(t.epochs.val_acc[0]))
        self.assertEqual(t.epochs.train_acc[0], 0.5)
        self.assertEqual(t.test, adaptsim.trace.Test(1, 1.25, 0.75))
        self.assertTrue(t.finished)
        self.assertEqual(t.n_lines, 6)
        with self.assertRaisesRegex(AttributeError, "no column 'acc'.*val_acc"):
            t.epochs.acc

    def test_run_directory_and_unknown_fields(self):
        # fields the reader does not know are ignored (additions keep schema 1)
        self.write(lines(changed(HEADER, extra=1), changed(STEP, note="x"), EPOCH))
        t = read_trace(self.tmp.name)
        self.assertEqual(len(t.epochs), 1)
        self.assertIsNone(t.test)
        self.assertIsNone(t.end)
        self.assertFalse(t.finished)

    def test_partial(self):
        p = self.write(lines(HEADER, STEP) + '{"type":"epo')
        with self.assertRaisesRegex(TraceError, r"trace.jsonl:3: truncated trace"):
            read_trace(p)
        t = read_trace(p, partial=True)
        self.assertTrue(t.truncated)
        self.assertEqual((len(t.steps), t.n_lines), (1, 2))

    # (text, line, message fragment): each must be refused naming that line.
    BAD = [
        ("", 0, "missing header: the trace is empty"),
        (lines(STEP), 1, "missing header: the first line is a step record"),
        (lines(HEADER) + "{not json\n", 2, "malformed JSON"),
        (lines(HEADER) + '{"type":"step","loss":NaN}\n', 2, "NaN is not JSON"),
        (lines(HEADER) + "[1, 2]\n", 2, 'not a trace record'),
        (lines(HEADER, HEADER), 2, "header record: a second header"),
        (lines(changed(HEADER, schema=2)), 1, "unknown schema version 2"),
        (lines(HEADER, changed(STEP, type="batch")), 2, "unknown record type"),
        (lines(HEADER, changed(STEP, loss=KeyError)), 2, 'step record: field "loss" is missing'),
        (lines(HEADER, changed(STEP, loss="high")), 2, 'field "loss" must be a number or null'),
        (lines(HEADER, changed(STEP, step=1.5)), 2, 'field "step" must be an integer'),
        (lines(HEADER, changed(STEP, strategy="median")), 2,
         'field "strategy" has an unknown value "median"'),
        (lines(HEADER, changed(STEP, units=[])), 2, "0 units, but the header lists 1"),
        (lines(HEADER, changed(STEP, units=[{"wl": 8}])), 2, 'field "fl" is missing'),
        (lines(HEADER, changed(STEP, units=[{"wl": 99, "fl": 0}])), 2,
         'field "wl" = 99 is out of range'),
        (lines(HEADER, changed(STEP, overflow=1)), 2, 'field "overflow" must be true or false'),
        (lines(HEADER, changed(STEP, events=[{"unit": 3, "kind": "pd", "before": [8, 4],
                                               "after": [7, 4]}])), 2, 'field "unit" = 3'),
        (lines(HEADER, changed(STEP, events=[{"unit": 0, "kind": "pd", "before": [8],
                                               "after": [7, 4]}])), 2,
         'field "before" must hold 2 integers'),
        (lines(HEADER, EPOCH, changed(EPOCH, val_acc="0.5")), 3,
         'epoch record: field "val_acc" must be a number or null'),
        (lines(HEADER, TEST, TEST), 3, "a second test record"),
        (lines(HEADER, changed(END, status="crashed")), 2, 'field "status" has an unknown value'),
        (lines(HEADER, END, EPOCH), 3, "record after the end record"),
        (lines(HEADER) + '{"type":"step"', 2, "truncated trace"),
        (lines(changed(HEADER, config=[])), 1, 'field "config" must be an object'),
        (lines(changed(HEADER, units=[{"name": "0", "layer": 5, "weights": 1, "macs": 1}])), 1,
         'field "layer" = 5 is out of range'),
    ]

    def test_errors_name_file_and_line(self):
        for i, (text, line, frag) in enumerate(self.BAD):
            with self.subTest(case=i, expect=frag):
                p = self.write(text, "bad%d.jsonl" % i)
                with self.assertRaises(TraceError) as cm:
                    read_trace(p)
                where = "%s:%d: " % (p, line) if line else "%s: " % p
                self.assertTrue(str(cm.exception).startswith(where), str(cm.exception))
                self.assertIn(frag, str(cm.exception))
                self.assertEqual((cm.exception.path, cm.exception.line), (p, line))

    def test_missing_file(self):
        p = os.path.join(self.tmp.name, "none.jsonl")
        with self.assertRaisesRegex(TraceError, "none.jsonl: cannot open the trace"):
            read_trace(p)


@needs_report
class TestReportTraces(unittest.TestCase):
    """The committed Fashion-MNIST report: the reader against a plain json.loads of each line."""

    def test_against_raw_json(self):
        paths = sorted(glob.glob(os.path.join(REPORT_TRACES, "*.jsonl")))
        self.assertGreaterEqual(len(paths), 5)
        for p in paths:
            with self.subTest(trace=os.path.basename(p)):
                with open(p) as f:
                    recs = [json.loads(line) for line in f]
                t = read_trace(p)
                steps = [r for r in recs if r["type"] == "step"]
                epochs = [r for r in recs if r["type"] == "epoch"]
                self.assertEqual(t.header, recs[0])
                self.assertEqual(len(t.steps), len(steps))
                self.assertEqual(t.steps.wl.shape, (len(steps), len(recs[0]["units"])))
                k = len(steps) // 2
                self.assertEqual(list(t.steps.wl[k]), [u["wl"] for u in steps[k]["units"]])
                self.assertEqual(list(t.epochs.val_acc), [e["val_acc"] for e in epochs])
                self.assertEqual(t.test.test_acc, recs[-2]["test_acc"])
                self.assertEqual(len(t.events), sum(len(s["events"]) for s in steps))
                self.assertEqual(t.end.status, "ok")

    def test_adapt_events(self):
        t = read_trace(os.path.join(REPORT_TRACES, "adapt.jsonl"))
        kinds = {e.kind for e in t.events}
        self.assertEqual(kinds, {"pd", "pu"})
        for e in t.events:
            self.assertTrue(e.bisect_steps >= 0 if e.kind == "pd" else e.s >= 0)


@needs_trainer
class TestTrainerTraces(unittest.TestCase):
    """Traces adapt-train writes for each policy read back with the values the policy sets."""

    def test_policies(self):
        runs = RunsFixture.get()
        for p in POLICIES:
            with self.subTest(policy=p):
                t = read_trace(runs[p])
                self.assertEqual(t.policy, p)
                self.assertEqual(len(t.epochs), 2)
                self.assertTrue(t.finished)
                n_units = len(t.header["units"])
                self.assertEqual(t.steps.wl.shape, (len(t.steps), n_units))
                # the header's start formats (config defaults: fixed 16/8, adapt <8,4>, amp fp16)
                want = {"fp32": 32, "fixed": 16, "adapt": 8, "muppet": 8, "amp": 16}[p]
                self.assertTrue((t.steps.wl[0] == want).all(), t.steps.wl[0])
                has_lb = p == "adapt"
                self.assertEqual(bool(np.isfinite(t.steps.lb).all()), has_lb)
                self.assertEqual(bool((t.steps.sat >= 0).all()), p != "fp32")
                self.assertIsNone(t.layer_precision)

    def test_graph_propagation(self):
        """amp with graph propagation (default preset) and graph_float = 11: every LeNet-5
        layer fp16 but the classifier 11 and the tanh 10 that only feeds it; unit 4 (layer 11)
        is float32 in every step."""
        t = read_trace(RunsFixture.get()[GRAPH_RUN])
        prec = t.layer_precision
        want = {str(i): "fp16" for i in range(12)}
        want["10"] = want["11"] = "float32"
        self.assertEqual(prec, want)
        layers = t.header["model"]["layers"]
        self.assertEqual([ly["graph_set"] for ly in layers],
                         ["allow", "infer", "infer", "allow", "infer", "infer", "allow", "infer",
                          "infer", "allow", "infer", "deny"])
        self.assertEqual(layers[11]["graph_source"], "layer")
        self.assertEqual([ly["precision_unit"] for ly in layers],
                         [0, 1, 1, 1, 2, 2, 2, 3, 3, 3, -1, -1])
        self.assertTrue((t.steps.wl[:, :4] == 16).all())
        self.assertTrue((t.steps.wl[:, 4] == 32).all())
        self.assertTrue(t.finished)


class TestGraphFields(TmpTrace):
    def test_graph_fields_checked(self):
        """The per-layer fields of graph propagation: read back, and checked."""
        h = changed(HEADER)
        h["model"]["layers"][0].update(graph_set="allow", graph_source="preset", precision="fp16",
                                       precision_unit=0)
        p = self.write(lines(h, STEP))
        self.assertEqual(read_trace(p).layer_precision, {"0": "fp16"})
        for change, frag in ((dict(precision_unit=1), "precision_unit 1 is not a unit"),
                             (dict(precision_unit=-1), "precision fp16 with precision_unit"),
                             (dict(graph_set="low"), 'field "graph_set" has an unknown')):
            bad = changed(h)
            bad["model"]["layers"][0].update(change)
            p = self.write(lines(bad, STEP))
            with self.subTest(change=change):
                with self.assertRaises(TraceError) as cm:
                    read_trace(p)
                self.assertIn(frag, str(cm.exception))


def unit(wl, fl, **kw):
    return [dict({"wl": wl, "fl": fl}, **kw)]


def nested(depth):
    """A step record whose unknown field "x" nests depth - 1 arrays (the record is depth deep)."""
    return ('{"type":"step","x":' + "[" * (depth - 1) + "]" * (depth - 1) +
            ',"step":1,"epoch":0,"lr":0.1,"loss":2.3,"strategy":null,"units":[{"wl":8,"fl":4}]}\n')


class TestBounds(TmpTrace):
    """What the C reader refuses (src/trace/trace.h, tests/test_io_read.c), refused here with the same
    message; and adapt-perf, which reads with the C reader, says the same where it is built."""

    # (text, line, message): the same cases and messages as tests/test_io_read.c's bad_traces
    BAD = [
        (lines(HEADER, changed(STEP, step=(1 << 63) - 1)), 2,
         'step record: field "step" = 9223372036854775807 is out of range [1, 9007199254740992]'),
        (lines(HEADER, changed(STEP, epoch=-7)), 2,
         'step record: field "epoch" = -7 is out of range [0, 99999]'),
        (lines(HEADER, changed(EPOCH, epoch=(1 << 31) - 1)), 2,
         'epoch record: field "epoch" = 2147483647 is out of range [0, 99999]'),
        (lines(HEADER, changed(TEST, epoch=100001)), 2,
         'test record: field "epoch" = 100001 is out of range [0, 100000]'),
        (lines(HEADER, changed(STEP, step=2), changed(STEP, step=2)), 3,
         "step record: step 2 does not follow step 2 (line 2): step numbers increase"),
        (lines(HEADER, changed(STEP, epoch=3), changed(STEP, step=2, epoch=2)), 3,
         "step record: epoch 2 is before epoch 3 of step 1 (line 2)"),
        (lines(HEADER, EPOCH, changed(EPOCH, step=2)), 3,
         "epoch record: epoch 0 does not follow epoch 0 (line 2)"),
        (lines(HEADER, EPOCH, changed(EPOCH, epoch=10 ** 9, step=2)), 3,
         'epoch record: field "epoch" = 1000000000 is out of range [0, 99999]'),
        (lines(HEADER, EPOCH, changed(EPOCH, epoch=1)), 3,
         "epoch record: step 1 does not follow step 1 of epoch 0 (line 2)"),
        (lines(HEADER, changed(EPOCH, train_acc=5.0)), 2,
         'epoch record: field "train_acc" = 5 is out of range [0, 1]'),
        (lines(HEADER, changed(EPOCH, val_acc=-3.0)), 2,
         'epoch record: field "val_acc" = -3 is out of range [0, 1]'),
        (lines(HEADER, changed(EPOCH, wall_s=-1e300)), 2,
         'epoch record: field "wall_s" = -1e+300 is out of range: expected >= 0'),
        (lines(HEADER, changed(EPOCH, wall_s=None)), 2,
         'epoch record: field "wall_s" must be a number'),
        (lines(HEADER, changed(END, wall_s=-1)), 2,
         'end record: field "wall_s" = -1 is out of range: expected >= 0'),
        (lines(HEADER, changed(TEST, test_acc=1.5)), 2,
         'test record: field "test_acc" = 1.5 is out of range [0, 1]'),
        (lines(HEADER, changed(STEP, lr=-0.1)), 2,
         'step record: field "lr" = -0.1 is out of range: expected >= 0'),
        (lines(HEADER, changed(STEP, units=unit(2, 64))), 2,
         'step record: field "fl" = 64 is out of range [0, 32]'),
        (lines(HEADER, changed(STEP, units=unit(0, 0))), 2,
         'step record: field "wl" = 0 is out of range [1, 32]'),
        (lines(HEADER, changed(STEP, units=unit(8, -1))), 2,
         'step record: field "fl" = -1 is out of range [0, 32]'),
        (lines(HEADER, changed(STEP, units=unit(8, 4, sparsity=1.5))), 2,
         'step record: field "sparsity" = 1.5 is out of range [0, 1]'),
        (lines(HEADER, changed(STEP, units=unit(8, 4, act_sat=-0.5))), 2,
         'step record: field "act_sat" = -0.5 is out of range [0, 1]'),
        (lines(HEADER, changed(STEP, events=[dict(STEP["events"][1], after=[2, 64])])), 2,
         'step record: field "after"[1] = 64 is out of range [0, 32]'),
        (lines(HEADER, changed(STEP, events=[dict(STEP["events"][1], before=[0, 0])])), 2,
         'step record: field "before" = [0, 0]: the word length must be in [1, 32]'),
        (lines(changed(HEADER, model=dict(HEADER["model"], input=[1, 32, 0]))), 1,
         'header record: field "input"[2] = 0 is out of range [1, 2147483647]'),
        (lines(HEADER) + nested(65), 2, "JSON nested deeper than 64 arrays and objects"),
        (lines(HEADER) + nested(100000), 2, "JSON nested deeper than 64 arrays and objects"),
        (lines(HEADER) + lines(STEP).replace('"lr": 0.1', '"lr": 1e999'), 2,
         "malformed JSON"),
        (lines(HEADER) + lines(STEP).replace('"lr": 0.1', '"lr": 9223372036854775808'), 2,
         "malformed JSON"),
        (lines(HEADER) + lines(STEP).replace('"step": 1,', '"step": 1, "step": 2,'), 2,
         "malformed JSON"),
    ]

    def test_refused_as_in_c(self):
        perf = program("adapt-perf")
        for i, (text, line, frag) in enumerate(self.BAD):
            with self.subTest(case=i, expect=frag[:60]):
                p = self.write(text, "bad%d.jsonl" % i)
                with self.assertRaises(TraceError) as cm:
                    read_trace(p)
                self.assertTrue(str(cm.exception).startswith("%s:%d: " % (p, line)),
                                str(cm.exception))
                self.assertIn(frag, str(cm.exception))
                if os.access(perf, os.X_OK):
                    r = subprocess.run([perf, p], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       universal_newlines=True)
                    self.assertNotEqual(r.returncode, 0)
                    c_where = r.stderr.strip().split(": ", 1)[1]
                    self.assertTrue(c_where.startswith("%s:%d: " % (p, line)), r.stderr)
                    self.assertIn(frag.split(":", 1)[0], c_where)
                    if not frag.startswith("malformed"):  # jansson words its own
                        self.assertEqual(c_where, str(cm.exception))

    def test_accepted_up_to_the_bounds(self):
        """FL > WL is a format (fixed(2,8): magnitudes below 2^-7); the last step, epoch and
        test epoch a trace may hold; a record nested 64 deep; a line of exactly 4 MiB."""
        big = changed(STEP, step=1 << 53, epoch=99999, units=unit(32, 32), events=[])
        text = lines(HEADER, changed(STEP, units=unit(2, 8)), big,
                     changed(EPOCH, epoch=99999, step=1 << 53, wall_s=0),
                     changed(TEST, epoch=100000, test_acc=0))
        t = read_trace(self.write(text))
        self.assertEqual((t.steps.wl[0, 0], t.steps.fl[0, 0]), (2, 8))
        self.assertEqual(int(t.steps.step[-1]), 1 << 53)
        self.assertEqual(int(t.epochs.epoch[0]), 99999)
        self.assertEqual(t.test.epoch, 100000)
        # nesting counts arrays and objects, not brackets in strings (escaped quotes included)
        t = read_trace(self.write(lines(HEADER) + nested(64)))
        self.assertEqual(len(t.steps), 1)
        t = read_trace(self.write(lines(HEADER, changed(STEP, x="[" * 70, y='\\"' + "{" * 70))))
        self.assertEqual(t.steps.step[0], 1)
        # a header padded to 4 MiB before its newline: read; one byte more: refused
        head = json.dumps(HEADER)
        pad = adaptsim.trace.LINE_MAX - len(head) - len(', "pad": ""')
        exact = head[:-1] + ', "pad": "%s"}' % ("x" * pad)
        self.assertEqual(len(exact), 4 << 20)
        t = read_trace(self.write(exact + "\n" + lines(STEP)))
        self.assertEqual(len(t.header["pad"]), pad)
        p = self.write(exact.replace('"x', '"xx', 1) + "\n" + lines(STEP))
        with self.assertRaisesRegex(TraceError, r"trace.jsonl:1: line longer than 4194304 bytes"):
            read_trace(p)

    def test_long_line_not_read_whole(self):
        """A 32 MiB line is refused after reading 4 MiB of it (the C reader's cap): the reader
        allocates a few MiB, not the line."""
        p = os.path.join(self.tmp.name, "long.jsonl")
        with open(p, "w") as f:
            f.write(lines(HEADER))
            f.write('{"type":"step","x":"' + "x" * (32 << 20) + '"}\n')
        tracemalloc.start()
        try:
            with self.assertRaisesRegex(TraceError, r"long.jsonl:2: line longer than"):
                read_trace(p)
            with self.assertRaisesRegex(TraceError, r"long.jsonl:2: line longer than"):
                list(adaptsim.trace.iter_records(p))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 12 << 20)


SAMPLE = {"type": "sample", "stage": 1, "plan": "0", "steps": 3, "samples": 300, "loss": 2.25,
          "cost": 1e6, "safe": True, "chosen": False, "wl": [16], "gov": [0]}


class TestSamples(TmpTrace):
    def test_samples_read_and_checked(self):
        """The comp policy's search records: read back before the steps, and checked."""
        s2 = changed(SAMPLE, stage=2, steps=0, loss=None, chosen=True)
        t = read_trace(self.write(lines(HEADER, SAMPLE, s2, STEP, EPOCH)))
        self.assertEqual(len(t.samples), 2)
        self.assertEqual((t.samples[0].plan, t.samples[0].wl, t.samples[0].gov), ("0", (16,), (0,)))
        self.assertTrue(math.isnan(t.samples[1].loss))
        self.assertTrue(t.samples[1].chosen)
        for text, frag in ((lines(HEADER, STEP, SAMPLE), "after the first step"),
                           (lines(HEADER, changed(SAMPLE, plan="00")), "has 2 digits"),
                           (lines(HEADER, changed(SAMPLE, wl=[16, 16])), 'field "wl" must hold'),
                           (lines(HEADER, changed(SAMPLE, gov=[1])), 'field "gov" must hold'),
                           (lines(HEADER, changed(SAMPLE, safe=1)), '"safe" must be true')):
            with self.subTest(frag=frag):
                with self.assertRaises(TraceError) as cm:
                    read_trace(self.write(text))
                self.assertIn(frag, str(cm.exception))


if __name__ == "__main__":
    unittest.main()

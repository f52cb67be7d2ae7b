"""doc/trace.schema.json: real traces (trainer, C writer tests, the committed report) are valid;
records that break the format are not."""
import copy
import glob
import json
import os
import subprocess
import tempfile
import unittest

from common import (GRAPH_RUN, POLICIES, REPORT_TRACES, SCHEMA, RunsFixture, needs_jsonschema,
                    needs_report, needs_trainer, program)

import validate_trace


@needs_jsonschema
class TestSchema(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.v = validate_trace.load_validator(SCHEMA)  # also checks it against its metaschema
        cls.samples = None
        if os.access(program("tests/test_io"), os.X_OK):
            cls._tmp = tempfile.TemporaryDirectory(prefix="adaptsim-io-")
            env = dict(os.environ, ADAPT_TRACE_SAMPLES=cls._tmp.name, CK_RUN_CASE="trace",
                       CK_VERBOSITY="silent")
            r = subprocess.run([program("tests/test_io")], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
            cls.samples = (r.returncode, r.stdout.decode(errors="replace"), cls._tmp.name)

    @classmethod
    def tearDownClass(cls):
        if cls.samples:
            cls._tmp.cleanup()

    def assertValid(self, path, step_every=1):
        problems = validate_trace.validate_file(self.v, path, step_every=step_every)
        self.assertEqual(problems, [], "\n".join(problems))

    @needs_report
    def test_report_traces(self):
        # every 20th step and all with events: the schema is slow on 3000-step traces
        paths = sorted(glob.glob(os.path.join(REPORT_TRACES, "*.jsonl")))
        self.assertGreaterEqual(len(paths), 5)
        for p in paths:
            with self.subTest(trace=os.path.basename(p)):
                self.assertValid(p, step_every=20)

    @needs_trainer
    def test_trainer_traces(self):
        runs = RunsFixture.get()
        for p in POLICIES + (GRAPH_RUN,):
            with self.subTest(policy=p):
                self.assertValid(runs[p])

    @unittest.skipUnless(os.access(program("tests/test_io"), os.X_OK), "tests/test_io not built")
    def test_c_writer_tests(self):
        """The traces tests/test_io writes (every optional field, null numbers, both event
        kinds, a stopped run, a header-only trace without configuration)."""
        rc, out, d = self.samples
        self.assertEqual(rc, 0, out)
        samples = sorted(os.listdir(d))
        self.assertEqual(samples, ["io_header_only.jsonl", "io_layer_precision.jsonl",
                                   "io_roundtrip.jsonl"])
        for s in samples:
            with self.subTest(sample=s):
                self.assertValid(os.path.join(d, s))

    def records(self):
        """One record of each kind as the writer wrote it, the step with a pd and a pu event:
        from the committed AdaPT trace, else from tests/test_io's trace."""
        path = os.path.join(REPORT_TRACES, "adapt.jsonl")
        if not os.path.exists(path):
            if not self.samples or self.samples[0]:
                self.skipTest("neither the report's traces nor tests/test_io's")
            path = os.path.join(self.samples[2], "io_roundtrip.jsonl")
        recs = {}
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                kinds = {e["kind"] for e in r.get("events", [])}
                if r["type"] != "step" or kinds == {"pd", "pu"}:
                    recs.setdefault(r["type"], r)
        self.assertEqual(set(recs), {"header", "step", "epoch", "test", "end"})
        return recs

    # (record type, change, fragment of the error's location or message)
    def mutations(self):
        def pd(s):
            return next(e for e in s["events"] if e["kind"] == "pd")

        def pu(s):
            return next(e for e in s["events"] if e["kind"] == "pu")
        return [
            ("header", lambda h: h.pop("seed"), "'seed' is a required property"),
            ("header", lambda h: h.update(schema=2), "at schema"),
            ("header", lambda h: h.update(policy="fp64"), "at policy"),
            ("header", lambda h: h.update(created="yesterday"), "at created"),
            ("header", lambda h: h.update(config_file=""), "at config_file"),
            ("header", lambda h: h["config"]["train"].update(epochs={"n": 3}),
             "at config/train/epochs"),
            ("header", lambda h: h.update(overrides=["epochs 3"]), "at overrides/0"),
            ("header", lambda h: h["model"]["layers"][0].pop("stride"), "at model/layers/0"),
            ("header", lambda h: h["model"]["layers"][1].update(kind="softplus"),
             "at model/layers/1/kind"),
            ("header", lambda h: h["model"].update(input=[1, 32]), "at model/input"),
            ("header", lambda h: h["units"][0].pop("weights"), "at units/0"),
            ("header", lambda h: h["model"]["layers"][0].update(precision="fp16"),
             "at model/layers/0"),
            ("header", lambda h: h["model"]["layers"][0].update(
                precision="fp16", precision_unit=0, graph_set="low", graph_source="preset"),
             "at model/layers/0/graph_set"),
            ("header", lambda h: h.update(commit="abc"), "'commit' was unexpected"),
            ("header", lambda h: h["config"].update(format={"f8": {"kind": "float", "size": 3}}),
             "at config/format/f8"),
            ("header", lambda h: h["config"].update(format={"8bit": {"kind": "fixed"}}),
             "at config/format"),
            ("header", lambda h: h["config"].update(format={"f8": {"kind": ["float"]}}),
             "at config/format/f8/kind"),
            ("step", lambda s: s.update(step=0), "at step"),
            ("step", lambda s: s.update(strategy="median"), "at strategy"),
            ("step", lambda s: s.update(overflow=0), "at overflow"),
            ("step", lambda s: s["units"][0].update(wl="8"), "at units/0/wl"),
            ("step", lambda s: s["units"][0].update(lb=None, r=None), "at units/0/r"),
            ("step", lambda s: s["units"][0].update(sparsity=1.5), "at units/0/sparsity"),
            ("step", lambda s: s["units"][0].update(extra=1), "at units/0"),
            ("step", lambda s: pd(s).pop("kl_evals"), "'kl_evals' is a required property"),
            ("step", lambda s: pd(s).update(s=1), "'s' was unexpected"),
            ("step", lambda s: pu(s).update(bisect_steps=1), "'bisect_steps' was unexpected"),
            ("step", lambda s: pu(s).update(kind="up"), "at events"),
            ("step", lambda s: pu(s).update(after=[8, 4, 0]), "after"),
            ("epoch", lambda e: e.update(val_acc=85.0), "at val_acc"),
            ("epoch", lambda e: e.update(train_loss="nan"), "at train_loss"),
            ("epoch", lambda e: e.pop("wall_s"), "'wall_s' is a required property"),
            ("test", lambda t: t.update(test_acc=-0.1), "at test_acc"),
            ("end", lambda e: e.update(status="crashed"), "at status"),
            ("end", lambda e: e.update(type="finish"), "at type"),
            # the bounds the readers share (src/trace/trace.h)
            ("step", lambda s: s.update(step=(1 << 53) + 1), "at step"),
            ("step", lambda s: s.update(epoch=100000), "at epoch"),
            ("step", lambda s: s.update(lr=-0.1), "at lr"),
            ("step", lambda s: s["units"][0].update(wl=2, fl=64), "at units/0/fl"),
            ("step", lambda s: s["units"][0].update(wl=0), "at units/0/wl"),
            ("step", lambda s: pd(s).update(after=[0, 0]), "after"),
            ("epoch", lambda e: e.update(epoch=-7), "at epoch"),
            ("epoch", lambda e: e.update(train_acc=5.0), "at train_acc"),
            ("epoch", lambda e: e.update(wall_s=-1e300), "at wall_s"),
            ("epoch", lambda e: e.update(wall_s=None), "at wall_s"),
            ("test", lambda t: t.update(epoch=100001), "at epoch"),
            ("end", lambda e: e.update(wall_s=-1), "at wall_s"),
        ]

    def test_mutations_rejected(self):
        recs = self.records()
        for typ, change, frag in self.mutations():
            self.assertEqual(validate_trace.record_errors(self.v, recs[typ]), [])
            r = copy.deepcopy(recs[typ])
            change(r)
            with self.subTest(record=typ, expect=frag):
                errors = validate_trace.record_errors(self.v, r)
                self.assertTrue(errors, "accepted: %s" % json.dumps(r)[:300])
                self.assertTrue(any(frag in e for e in errors), errors)

    def test_format_sections(self):
        """[format NAME] sections as the writer puts them under config.format (the keys a
        configuration set, tests/test_config_formats.c test_format_sections)."""
        h = copy.deepcopy(self.records()["header"])
        h["config"]["format"] = {
            "myfp8": {"kind": "float", "exp_bits": 4, "man_bits": 3, "bias": 8, "nan": "fn",
                      "subnormals": True, "overflow": "saturate"},
            "q8": {"kind": "fixed", "wl": 8, "fl": 5}, "_E2M1": {"kind": "float"}}
        self.assertEqual(validate_trace.record_errors(self.v, h), [])

    def test_nulls_where_numbers_may_be_non_finite(self):
        recs = self.records()
        s = copy.deepcopy(recs["step"])
        s.update(loss=None, lr=None)
        s["units"][0]["lb"] = None
        e = copy.deepcopy(recs["epoch"])
        e.update(val_loss=None, val_acc=None, train_loss=None)
        for r in (s, e):
            self.assertEqual(validate_trace.record_errors(self.v, r), [])

    def test_bounds_accepted(self):
        """Up to the readers' bounds: FL > WL (fixed(2,8)), step 2^53, epoch 99999, a test
        after 100000 epochs."""
        recs = self.records()
        s = copy.deepcopy(recs["step"])
        s.update(step=1 << 53, epoch=99999)
        s["units"][0].update(wl=2, fl=8)
        e = copy.deepcopy(recs["epoch"])
        e.update(step=1 << 53, epoch=99999, wall_s=0)
        t = copy.deepcopy(recs["test"])
        t.update(epoch=100000)
        for r in (s, e, t):
            self.assertEqual(validate_trace.record_errors(self.v, r), [])


if __name__ == "__main__":
    unittest.main()

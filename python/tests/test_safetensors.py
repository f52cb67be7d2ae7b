"""adaptsim.safetensors: files written here byte by byte, corrupt files, real checkpoints."""
import json
import os
import struct
import tempfile
import tracemalloc
import unittest

import numpy as np

from common import POLICIES, RunsFixture, needs_trainer

from adaptsim import SafetensorsError, read_checkpoint, read_safetensors, read_trace


def st_bytes(entries, meta=None, pad=True):
    """A safetensors file from (name, dtype, shape, raw bytes); offsets in the given order."""
    hdr, blob = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape, raw in entries:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    h = json.dumps(hdr).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob


class TestFormat(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def write(self, data, name="x.safetensors"):
        p = os.path.join(self.tmp.name, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_dtypes_and_metadata(self):
        w = np.arange(6, dtype="<f4").reshape(2, 3) / 4
        # bfloat16 1.5 = 0x3FC0, -2 = 0xC000 (the top 16 bits of the float32)
        bf = struct.pack("<2H", 0x3FC0, 0xC000)
        p = self.write(st_bytes([("w", "F32", [2, 3], w.tobytes()),
                                 ("n", "I64", [], struct.pack("<q", -7)),
                                 ("h", "F16", [2], np.array([0.5, 3], "<f2").tobytes()),
                                 ("b", "BF16", [2], bf),
                                 ("m", "BOOL", [3], b"\x01\x00\x01"),
                                 ("e", "U8", [0], b"")],
                                meta={"format": "test", "epoch": "3"}))
        st = read_safetensors(p)
        self.assertEqual(list(st.tensors), ["w", "n", "h", "b", "m", "e"])
        np.testing.assert_array_equal(st.tensors["w"], w)
        self.assertEqual(st.tensors["n"].shape, ())
        self.assertEqual(int(st.tensors["n"]), -7)
        np.testing.assert_array_equal(st.tensors["h"], [0.5, 3])
        self.assertEqual(st.tensors["b"].dtype, np.float32)
        np.testing.assert_array_equal(st.tensors["b"], [1.5, -2])
        np.testing.assert_array_equal(st.tensors["m"], [True, False, True])
        self.assertEqual(st.tensors["e"].shape, (0,))
        self.assertEqual(st.metadata, {"format": "test", "epoch": "3"})
        self.assertEqual(st.dtypes["b"], "BF16")
        st.tensors["w"][0, 0] = 9  # a writable copy

    # (file bytes, message fragment)
    GOOD = [("a", "F32", [2], b"\0" * 8)]
    BAD = [
        (b"\1\0\0", "too short for the 8-byte header length"),
        (struct.pack("<Q", 1 << 40) + b"{}", "does not fit"),
        (struct.pack("<Q", 4) + b"{x}!", "the header is not JSON"),
        (struct.pack("<Q", 2) + b"[]", "the header is not a JSON object"),
        (st_bytes([("a", "F33", [2], b"\0" * 8)]), 'tensor "a": unknown dtype "F33"'),
        (st_bytes([("a", "F8_E4M3", [2], b"\0" * 2)]), "has no numpy type"),
        (st_bytes([("a", "F32", [3], b"\0" * 8)]), "8 bytes for F32 of shape (3,) (12 bytes)"),
        (st_bytes([("a", "F32", [-2], b"\0" * 8)]), "shape must be a list of sizes"),
        (st_bytes(GOOD)[:-1], "outside the 7-byte data"),
        (st_bytes(GOOD, meta={"epoch": 3}), "__metadata__ must map names to strings"),
        (struct.pack("<Q", 64) + b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                                  b'"a":{}}    ' + b"\0", 'duplicate name "a"'),
        # each of these escaped as another exception type before
        (st_bytes([("a", ["F32"], [2], b"\0" * 8)]), 'tensor "a": dtype must be a string'),
        (st_bytes([("a", {"F32": 1}, [2], b"\0" * 8)]), 'tensor "a": dtype must be a string'),
        (st_bytes([("a", "U8", [1 << 32, 1 << 32], b"")]),
         '0 bytes for U8 of shape (4294967296, 4294967296) (18446744073709551616 bytes)'),
        (st_bytes([("a", "U8", [1 << 70], b"")]), "0 bytes for U8 of shape"),
        (st_bytes([("a", "F32", [1 << 62], b"")]), "(18446744073709551616 bytes)"),
        (st_bytes([("a", "U8", [1] * 9, b"\0")]), 'tensor "a": 9 dimensions (at most 8)'),
        (struct.pack("<Q", 200006) + b'{"a":' + b"[" * 100000 + b"]" * 100000 + b"}",
         "the header is not JSON"),
        (struct.pack("<Q", (100 << 20) + 1) + b"{}", "at most 104857600 allowed"),
    ]

    def test_corrupt(self):
        for i, (data, frag) in enumerate(self.BAD):
            with self.subTest(case=i, expect=frag):
                p = self.write(data, "bad%d.safetensors" % i)
                with self.assertRaises(SafetensorsError) as cm:
                    read_safetensors(p)
                self.assertTrue(str(cm.exception).startswith(p + ": "), str(cm.exception))
                self.assertIn(frag, str(cm.exception))

    def test_header_length_checked_before_reading(self):
        """A header length beyond the file is refused from the first 8 bytes and the file's
        size, without reading the rest (a 64 MiB file costs a few MiB, not 64)."""
        p = os.path.join(self.tmp.name, "big.safetensors")
        with open(p, "wb") as f:
            f.write(struct.pack("<Q", 80 << 20) + b"{}")
            f.truncate(64 << 20)
        tracemalloc.start()
        try:
            with self.assertRaisesRegex(SafetensorsError, "header length 83886080 does not fit "
                                        "in the 67108864-byte file"):
                read_safetensors(p)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        self.assertLess(peak, 4 << 20)

    def test_policy_state_nested_too_deep(self):
        """optim.safetensors' policy_state metadata nested 100000 deep: a SafetensorsError."""
        ck = os.path.join(self.tmp.name, "run")
        os.mkdir(ck)
        meta = {"format": "adapt-sim checkpoint 1", "epoch": "1", "step": "3"}
        self.write(st_bytes(self.GOOD, meta=meta), os.path.join("run", "model.safetensors"))
        deep = "[" * 100000 + "]" * 100000
        self.write(st_bytes(self.GOOD, meta=dict(meta, sgd_steps="3", policy_state=deep)),
                   os.path.join("run", "optim.safetensors"))
        with self.assertRaisesRegex(SafetensorsError, "optim.safetensors: policy_state is not "
                                    "JSON"):
            read_checkpoint(ck)

    def test_overlap(self):
        h = json.dumps({"a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
                        "b": {"dtype": "U8", "shape": [2], "data_offsets": [1, 3]}}).encode()
        p = self.write(struct.pack("<Q", len(h)) + h + b"\0\0\0")
        with self.assertRaisesRegex(SafetensorsError, 'tensors "a" and "b" overlap'):
            read_safetensors(p)

    def test_not_a_checkpoint(self):
        p = self.write(st_bytes(self.GOOD, meta={"format": "other"}), "model.safetensors")
        with self.assertRaisesRegex(SafetensorsError, "not an adapt-sim checkpoint"):
            read_checkpoint(p)
        trace = self.write(b'{"type":"header"}\n', "trace.jsonl")
        with self.assertRaisesRegex(SafetensorsError, "trace.jsonl: header length .* does not fit"):
            read_checkpoint(trace)


@needs_trainer
class TestCheckpoints(unittest.TestCase):
    """Checkpoints adapt-train writes: names, sizes and metadata against the run's trace."""

    def test_policies(self):
        runs = RunsFixture.get()
        for p in POLICIES:
            with self.subTest(policy=p):
                t = read_trace(runs[p])
                ck = read_checkpoint(runs[p])
                layers = t.header["model"]["layers"]
                want = set()
                for ly in layers:
                    if ly["params"]:
                        want |= {ly["name"] + ".weight", ly["name"] + ".bias"}
                self.assertEqual(set(ck.weights), want)
                n = sum(v.size for v in ck.weights.values())
                self.assertEqual(n, t.header["model"]["params"])
                self.assertEqual(set(ck.momentum), want)
                self.assertEqual(ck.weights["0.weight"].dtype, np.float32)
                self.assertEqual((ck.epoch, ck.step), (2, int(t.epochs.step[-1])))
                self.assertEqual(ck.model, t.header["model"]["name"])
                self.assertEqual(ck.policy, p)
                self.assertEqual(float(ck.optim_meta["lr"]), t.epochs.lr[-1])
                if p == "adapt":
                    # the per-unit formats in policy_state are the last logged step's
                    wl = [u["wl"] for u in ck.policy_state["units"]]
                    self.assertEqual(wl, list(t.steps.wl[-1]))
                    self.assertEqual(len(ck.policy_tensors), len(t.header["units"]))

    def test_optimizer_file_as_model(self):
        runs = RunsFixture.get()
        with self.assertRaisesRegex(SafetensorsError, "optim.safetensors: this is an optimizer "
                                    "checkpoint"):
            read_checkpoint(os.path.join(runs["fp32"], "optim.safetensors"))

    def test_mismatched_epochs(self):
        runs = RunsFixture.get()
        with tempfile.TemporaryDirectory() as d:
            for f in ("model", "optim"):
                with open(os.path.join(runs["fixed"], f + ".safetensors"), "rb") as src:
                    data = src.read()
                if f == "optim":  # same length, other epoch: "2" -> "1"
                    data = data.replace(b'"epoch":"2"', b'"epoch":"1"')
                with open(os.path.join(d, f + ".safetensors"), "wb") as dst:
                    dst.write(data)
            with self.assertRaisesRegex(SafetensorsError, "do not belong together"):
                read_checkpoint(d)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/python3
"""Checks that adapt-sim checkpoints are PyTorch state_dicts of the same model.

Builds the model in PyTorch from the model description in the run's trace
(python/adaptsim/model.py reads it; any described network), loads an adapt-sim model.safetensors
into it with load_state_dict(strict=True) (the file is parsed here with the
standard library, so the safetensors package is not needed), scores the
test set in PyTorch and compares with the test accuracy in the run's trace.

  experiments/tools/torch_interop.py RUN_DIR [--data /usr/share/datasets/fashion-mnist]

Prints the PyTorch test accuracy next to the trace's and exits non-zero if
they differ by more than 0.05 points (float summation order only).

Float32 runs only (policy fp32): a quantized run is tested with weight copies
rounded stochastically by the simulator's counter-based generator and with
rounded unit inputs and outputs, which this script does not reproduce; it
refuses such runs (exit status 2). Score them with
  adapt-train --eval-only --config RUN_DIR/config.ini --init-from RUN_DIR/model.safetensors
which applies the per-unit formats stored in the checkpoint.
Also writes RUN_DIR/torch_roundtrip.safetensors (the state_dict saved back
from PyTorch) for `adapt-train --init-from`.
Needs Debian's python3-torch and python3-numpy.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch

DT = {"F32": (torch.float32, 4), "I64": (torch.int64, 8)}
DT_NAME = {torch.float32: "F32", torch.int64: "I64"}


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in hdr.items():
        dt, _ = DT[t["dtype"]]
        b, e = t["data_offsets"]
        buf = bytearray(raw[base + b:base + e])
        out[name] = torch.frombuffer(buf, dtype=dt).reshape(t["shape"]).clone()
    return out, meta


def save_safetensors(path, sd):
    hdr, off, blobs = {}, 0, []
    for name, t in sd.items():
        t = t.detach().contiguous()
        b = t.numpy().tobytes()
        hdr[name] = {"dtype": DT_NAME[t.dtype], "shape": list(t.shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def build_model(hdr):
    """The nn.Module of a trace header: from the model description it carries, else (traces
    of older versions) from the built-in description of its model name (models/NAME.model);
    both read by python/adaptsim/model.py, the language of doc/model-format.md."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(top, "python"))
    from adaptsim.model import build_torch, load, parse
    m = hdr["model"]
    d = m.get("description")
    if d:
        return build_torch(parse(d["text"], m["classes"], d["args"], d["file"]))
    return build_torch(load(m["name"], m["classes"], models_dir=os.path.join(top, "models")))


def read_idx(path):
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        raw = f.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, r, c)
    return np.frombuffer(raw, np.uint8, offset=8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    with open(os.path.join(a.run, "trace.jsonl")) as f:
        recs = [json.loads(l) for l in f]
    hdr = recs[0]
    if hdr.get("policy") != "fp32":
        print("torch_interop: %s is a %s run; this script reproduces float32 evaluation only "
              "(quantized runs: adapt-train --eval-only --config %s --init-from %s)"
              % (a.run, hdr.get("policy"), os.path.join(a.run, "config.ini"),
                 os.path.join(a.run, "model.safetensors")), file=sys.stderr)
        sys.exit(2)
    test = [r for r in recs if r["type"] == "test"][-1]
    name = hdr["model"]["name"]
    model = build_model(hdr)
    sd, meta = load_safetensors(os.path.join(a.run, "model.safetensors"))
    model.load_state_dict(sd, strict=True)
    model.eval()
    if hdr["model"]["input"][0] != 1:
        sys.exit("torch_interop: only the MNIST family is read here (IDX files)")
    x = read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz"))
    n = hdr["dataset"]["test"]
    x = np.pad(x[:n], ((0, 0), (2, 2), (2, 2))).astype(np.float32)
    x = torch.from_numpy(((x / 255.0 - 0.1307) / 0.3081).astype(np.float32)).unsqueeze(1)
    with torch.no_grad():
        acc = (model(x).argmax(1).numpy() == y[:n]).mean()
    ours = test["test_acc"]
    print(json.dumps({"model": name, "tensors": len(sd),
                      "torch_test_acc": round(100 * float(acc), 3),
                      "adapt_test_acc": round(100 * ours, 3)}))
    save_safetensors(os.path.join(a.run, "torch_roundtrip.safetensors"), model.state_dict())
    if abs(acc - ours) > 5e-4:
        sys.exit("torch_interop: accuracies differ")


if __name__ == "__main__":
    main()

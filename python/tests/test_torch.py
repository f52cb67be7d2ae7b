"""adaptsim.torch_io: checkpoints load strictly into the PyTorch module built from the header,
and PyTorch's float32 test loss equals the one the trace recorded for an fp32 run."""
import gzip
import json
import os
import struct
import subprocess
import tempfile
import unittest

import numpy as np

from common import (FMNIST, REPORT_TRACES, SRCDIR, RunsFixture, needs_report, needs_torch,
                    needs_trainer, program, train)

from adaptsim import read_trace, torch_io

# Input normalisation of adapt-sim's data loader (torchvision's recipes).
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
CIFAR_MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
CIFAR_STD = np.array([0.2023, 0.1994, 0.2010], np.float32)


def read_idx(path):
    with (gzip.open(path) if path.endswith(".gz") else open(path, "rb")) as f:
        raw = f.read()
    magic, n = struct.unpack(">II", raw[:8])
    if magic == 0x803:
        r, c = struct.unpack(">II", raw[8:16])
        return np.frombuffer(raw, np.uint8, offset=16).reshape(n, r, c)
    return np.frombuffer(raw, np.uint8, offset=8)


def idx_file(name):
    for suffix in (".gz", ""):
        p = os.path.join(FMNIST, name + suffix)
        if os.path.exists(p):
            return p
    return None


# A description with the newer kinds: gelu (both forms), hardswish, a concat of three branches,
# max and average pools with padding (one counting only the cells inside).
KINDS_MODEL = ("input 3 32 32\n"
               "conv2d stem out=8 k=3 pad=1\n"
               "maxpool2d pool0 k=3 stride=2 pad=1\n"
               "gelu act0\n"
               "conv2d b1 out=4 k=1\n"
               "hardswish h1\n"
               "conv2d b2 in=act0 out=4 k=3 pad=1\n"
               "gelu g2 approximate=tanh\n"
               "avgpool2d b3 in=act0 k=3 stride=1 pad=1 count_include_pad=0\n"
               "concat mix in=h1,g2,b3\n"
               "avgpool2d pool1 k=2 stride=2 pad=1\n"
               "flatten f\n"
               "linear fc out=classes\n")


def synthetic_cifar10(d, rng):
    """Random CIFAR-10-format records in d/cifar-10-batches-bin (8 per training batch, 16 test
    images); returns the test labels and the normalised test images."""
    data = os.path.join(d, "cifar-10-batches-bin")
    os.mkdir(data)
    recs = {}
    for name, n in [("data_batch_%d.bin" % i, 8) for i in range(1, 6)] + \
                   [("test_batch.bin", 16)]:
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        pix = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        recs[name] = (labels, pix)
        with open(os.path.join(data, name), "wb") as f:
            f.write(np.concatenate([labels[:, None], pix], 1).tobytes())
    labels, pix = recs["test_batch.bin"]
    x = pix.reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    x = ((x - CIFAR_MEAN[:, None, None]) / CIFAR_STD[:, None, None]).astype(np.float32)
    return labels, x


def write_safetensors(path, sd):
    """A PyTorch state_dict as a safetensors file: the writer of
    experiments/tools/torch_interop.py, the one users run."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "torch_interop", os.path.join(SRCDIR, "experiments/tools/torch_interop.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.save_safetensors(path, sd)


def torch_test_loss(model, x, y):
    import torch
    import torch.nn.functional as F
    with torch.no_grad():
        logits = model(torch.from_numpy(x))
        loss = F.cross_entropy(logits, torch.from_numpy(y.astype(np.int64))).item()
        acc = (logits.argmax(1).numpy() == y).mean()
    return loss, acc


@needs_torch
class TestBuild(unittest.TestCase):
    @needs_report
    def test_lenet5_from_report_header(self):
        import torch
        t = read_trace(os.path.join(REPORT_TRACES, "fp32.jsonl"))
        model = torch_io.build_model(t)
        self.assertEqual(sum(p.numel() for p in model.parameters()), t.header["model"]["params"])
        out = model(torch.zeros(2, *t.header["model"]["input"]))
        self.assertEqual(tuple(out.shape), (2, t.header["model"]["classes"]))

    def test_unknown_layer_kind(self):
        hdr = {"model": {"layers": [{"name": "0", "kind": "softplus", "in": [4], "out": [4],
                                     "params": 0}]}}
        with self.assertRaisesRegex(ValueError, "layer 0: no PyTorch module for kind softplus"):
            torch_io.build_model(hdr)


@needs_torch
@needs_trainer
class TestRuns(unittest.TestCase):
    @unittest.skipUnless(idx_file("t10k-images-idx3-ubyte"), "Fashion-MNIST not installed")
    def test_lenet5_fp32_test_loss(self):
        run = RunsFixture.get()["fp32"]
        t = read_trace(run)
        model = torch_io.load_model(run)
        n = t.header["dataset"]["test"]
        x = read_idx(idx_file("t10k-images-idx3-ubyte"))[:n]
        y = read_idx(idx_file("t10k-labels-idx1-ubyte"))[:n]
        x = np.pad(x, ((0, 0), (2, 2), (2, 2))).astype(np.float32)  # 28x28 -> 32x32
        x = ((x / 255.0 - MNIST_MEAN) / MNIST_STD).astype(np.float32)[:, None]
        loss, acc = torch_test_loss(model, x, y)
        # same weights, same arithmetic up to summation order: 1e-4 relative
        self.assertAlmostEqual(loss, t.test.test_loss, delta=1e-4 * t.test.test_loss)
        self.assertAlmostEqual(acc, t.test.test_acc, delta=1.01 / n)

    def test_described_models_synthetic_cifar10(self):
        """ResNet-20, VGG-11 and MobileNet-v2 (batch norm in eval mode, shortcuts, depthwise
        convolutions, ReLU6) on random CIFAR-10-format records: the module built from the
        trace's model description loads the checkpoint strictly and PyTorch's test loss
        equals the trace's."""
        rng = np.random.default_rng(7)
        with tempfile.TemporaryDirectory() as d:
            labels, x = synthetic_cifar10(d, rng)
            # descriptions of one's own with the other layer kinds (dropout passes through
            # in evaluation, as nn.Dropout in eval mode)
            own = os.path.join(d, "own.model")
            with open(own, "w") as f:
                f.write("input 3 32 32\nconv2d c1 out=8 k=3 stride=2 pad=1\nhardswish h1\n"
                        "conv2d dw out=16 k=3 pad=1 groups=8 bias=0\nsigmoid s1\n"
                        "conv2d side in=h1 out=4 k=3 pad=2 dilation=2\n"
                        "concat cat in=s1,side\nrelu6 r\n"
                        "dropout drop p=0.3\nmaxpool2d p k=2\nflatten f\n"
                        "linear fc out=classes\n")
            kinds = os.path.join(d, "kinds.model")
            with open(kinds, "w") as f:
                f.write(KINDS_MODEL)
            for model in ("resnet20", "vgg11", "mobilenetv2", own, kinds):
                with self.subTest(model=model):
                    mine = model in (own, kinds)
                    key = "model.file=" if mine else "model.name="
                    name = os.path.basename(model).split(".")[0]
                    run = train(os.path.join(d, name),
                                "experiments/configs/c10_resnet20.ini", key + model, "data.path=" + d, "data.val_size=0",
                                "data.augment=off", "data.train_limit=8", "train.epochs=1",
                                "train.batch=8", "train.eval_batch=16", "policy.name=fp32",
                                "run.checkpoint_every=0")
                    t = read_trace(run)
                    self.assertEqual(t.header["model"]["name"], name)
                    self.assertIn("description", t.header["model"])
                    model_t = torch_io.load_model(run)  # strict: every name and shape matches
                    loss, acc = torch_test_loss(model_t, x, labels)
                    self.assertAlmostEqual(loss, t.test.test_loss, delta=1e-4 * t.test.test_loss)
                    self.assertAlmostEqual(acc, t.test.test_acc, delta=1.01 / len(labels))

    def test_described_kinds_from_torch(self):
        """The other way: weights initialised in PyTorch in the module built from a description
        with gelu, hardswish, a 3-way concat and padded pools, saved as a safetensors file,
        load into adapt-sim (every name and shape must match) and score the same test loss."""
        import torch
        from adaptsim.model import build_torch, parse
        rng = np.random.default_rng(11)
        with tempfile.TemporaryDirectory() as d:
            labels, x = synthetic_cifar10(d, rng)
            kinds = os.path.join(d, "kinds.model")
            with open(kinds, "w") as f:
                f.write(KINDS_MODEL)
            torch.manual_seed(3)
            model_t = build_torch(parse(KINDS_MODEL, 10, "", kinds)).eval()
            with torch.no_grad():  # logits of a few units, so that the loss feels every layer
                model_t.fc.weight.mul_(40.0)
            weights = os.path.join(d, "torch.safetensors")
            write_safetensors(weights, model_t.state_dict())
            loss, acc = torch_test_loss(model_t, x, labels)
            self.assertGreater(loss, 3.0)
            out = os.path.join(d, "eval.json")
            cmd = [program("adapt-train"), "--config",
                   os.path.join(SRCDIR, "experiments/configs/c10_resnet20.ini"),
                   "--eval-only", "--init-from", weights, "--eval-json", out,
                   "--set", "model.file=" + kinds,
                   "--set", "data.path=" + d, "--set", "data.val_size=0",
                   "--set", "train.eval_batch=16", "--set", "policy.name=fp32",
                   "--set", "run.threads=1"]
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               cwd=SRCDIR)
            self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
            with open(out) as f:
                ev = json.load(f)
            # same weights, same arithmetic up to summation order and a few ulps per layer
            self.assertAlmostEqual(ev["loss"], loss, delta=1e-4 * loss)
            self.assertAlmostEqual(ev["accuracy"], acc, delta=1.01 / len(labels))


if __name__ == "__main__":
    unittest.main()

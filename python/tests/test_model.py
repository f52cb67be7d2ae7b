"""adaptsim.model: the Python reader of model descriptions agrees with the simulator's
(src/graph) on every shipped file, evaluates C integer expressions as C does, and builds
PyTorch modules with the checkpoint names."""
import glob
import os
import re
import subprocess
import tempfile
import unittest

from common import SRCDIR, needs_torch, needs_trainer, program

from adaptsim.model import build_torch, evaluate, parse

MODELS = sorted(glob.glob(os.path.join(SRCDIR, "models", "*.model")))
# the parameters each shipped file is tried with, beyond its defaults
ARGS = {"resnet.model": ["", "depth=32", "depth=56", "depth=110"],
        "vgg.model": ["depth=11", "depth=13", "depth=16", "depth=19"], "mlp.model": ["hidden=100"]}


def model_text(name):
    with open(os.path.join(SRCDIR, "models", name + ".model")) as f:
        return f.read()


def same_state(test, ours, ref):
    """Equal state_dict names and shapes (so checkpoints load both ways)."""
    a = {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    b = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    test.assertEqual(a, b)


def c_totals(path, args):
    """(layers, units, params, MACs) from adapt-train --dry-run's resolved graph."""
    cmd = [program("adapt-train"), "--config",
           os.path.join(SRCDIR, "experiments", "configs", "quickstart.ini"), "--dry-run",
           "--set", "model.file=" + path,
           "--set", "model.args=" + args, "--set", "data.path=/nonexistent"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         cwd=SRCDIR).stdout.decode()
    m = re.search(r"total: (\d+) layers, (\d+) precision units, (\d+) parameters", out)
    if not m:
        raise AssertionError("no totals in:\n" + out)
    return tuple(int(x) for x in m.groups())


class TestExpressions(unittest.TestCase):
    def test_c_semantics(self):
        # the values C computes (tests/test_graph.c checks the same in C)
        self.assertEqual(evaluate("-7 / 2", {}), -3)
        self.assertEqual(evaluate("-7 % 2", {}), -1)
        self.assertEqual(evaluate("16 << 2 - 1", {}), 32)
        self.assertEqual(evaluate("(d - 2) % 6 == 0 ? (d - 2) / 6 : 0", {"d": 56}), 9)
        self.assertEqual(evaluate("0 ? 1 : 0 ? 2 : 3", {}), 3)
        self.assertEqual(evaluate("1 < 2 && 2 <= 2 || 0", {}), 1)
        for bad, msg in [("1 / 0", "division by zero"), ("w * 2", "unknown name 'w'"),
                         ("(1 + 2", "expected '\\)'"), ("1 2", "unexpected text"),
                         ("1 << 63", "shift count")]:
            with self.assertRaisesRegex(ValueError, msg):
                evaluate(bad, {})


class TestShippedFiles(unittest.TestCase):
    def test_files_found(self):
        self.assertGreaterEqual(len(MODELS), 4)

    @needs_trainer
    def test_python_and_c_readers_agree(self):
        for path in MODELS:
            for args in ARGS.get(os.path.basename(path), [""]):
                with self.subTest(model=os.path.basename(path), args=args):
                    with open(path) as f:
                        g = parse(f.read(), 10, args, path)
                    units = sum(ly.kind in ("conv2d", "linear") for ly in g.layers)
                    self.assertEqual((len(g.layers), units, g.params), c_totals(path, args)[:3])

    @needs_trainer
    def test_readers_agree_on_new_kinds(self):
        text = ("input 1 32 32\nconv2d stem out=8 k=3 pad=1\nmaxpool2d p0 k=3 stride=2 pad=1\n"
                "gelu g0\nconv2d b1 out=4 k=1\nhardswish h1\nconv2d b2 in=g0 out=4 k=3 pad=1\n"
                "gelu g2 approximate=tanh\n"
                "avgpool2d b3 in=g0 k=3 stride=1 pad=1 count_include_pad=0\n"
                "concat mix in=h1,g2,b3,g0\navgpool2d p1 k=2 stride=2 pad=1\nflatten f\n"
                "linear fc out=classes\n")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kinds.model")
            with open(path, "w") as f:
                f.write(text)
            g = parse(text, 10, "", path)
            units = sum(ly.kind in ("conv2d", "linear") for ly in g.layers)
            self.assertEqual(g.layers[8].out_dim, (24, 16, 16))
            self.assertEqual((len(g.layers), units, g.params), c_totals(path, "")[:3])

    def test_errors_name_file_and_line(self):
        with self.assertRaisesRegex(ValueError, r"^t.model:3: .*put a flatten before it"):
            parse("input 1 8 8\nconv2d c out=2 k=3\nlinear fc out=classes\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:5: layer name 'x' is already used"):
            parse("input 1 8 8\nrelu x\nrelu y\nlabel x\nrelu x\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: this block has no 'end'"):
            parse("input 1 8 8\nrepeat i = 0..1\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: maxpool2d p: pad=2 is more than "
                                                r"half the kernel \(k=3\)"):
            parse("input 1 8 8\nmaxpool2d p k=3 pad=2\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: approximate=fast: expected none "
                                                r"or tanh"):
            parse("input 1 8 8\ngelu g approximate=fast\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:4: concat c: the planes must be "
                                                r"equal"):
            parse("input 1 8 8\nrelu a\nmaxpool2d b k=2\nconcat c in=a,a,b\n", 10, "",
                  "t.model")

    def test_new_kinds(self):
        """gelu (both forms), a concat of three and pools with padding: shapes as PyTorch's."""
        g = parse("input 2 7 7\ngelu g approximate=tanh\nmaxpool2d m k=3 stride=2 pad=1\n"
                  "avgpool2d a in=g k=3 stride=2 pad=1 count_include_pad=0\n"
                  "concat c in=m,a,m\nflatten f\nlinear fc out=classes\n", 10, "", "t.model")
        self.assertEqual(g.layers[0].keys["approximate"], "tanh")
        self.assertEqual(g.layers[1].out_dim, (2, 4, 4))
        self.assertEqual(g.layers[2].keys["count_include_pad"], 0)
        self.assertEqual(g.layers[3].out_dim, (6, 4, 4))
        self.assertEqual(g.layers[3].inputs, [1, 2, 1])


@needs_torch
class TestTorch(unittest.TestCase):
    def test_modules_and_names(self):
        import torch
        for path in MODELS:
            with self.subTest(model=os.path.basename(path)):
                with open(path) as f:
                    g = parse(f.read(), 10, "", path)
                net = build_torch(g)
                self.assertEqual(sum(p.numel() for p in net.parameters()), g.params)
                out = net.eval()(torch.zeros(2, *g.input))
                self.assertEqual(tuple(out.shape), (2, 10))
        with open(os.path.join(SRCDIR, "models", "resnet.model")) as f:
            keys = list(build_torch(parse(f.read(), 10, "depth=20")).state_dict())
        # the usual PyTorch CIFAR ResNet names, batch-norm buffers included
        for k in ("conv1.weight", "bn1.num_batches_tracked", "layer2.0.shortcut.0.weight",
                  "layer3.2.bn2.running_var", "linear.bias"):
            self.assertIn(k, keys)


@needs_torch
class TestAgainstPyTorchDefinitions(unittest.TestCase):
    """The shipped files against the usual PyTorch definitions of the same networks, written
    out here: parameter counts and state_dict names and shapes."""

    def test_cifar_vgg(self):
        # the widely used PyTorch CIFAR VGG (conv3x3 + BatchNorm2d + ReLU per entry, "M" a 2x2
        # max-pool, Linear(512, classes)); its parameter counts: VGG-11 9,231,114 and VGG-16
        # 14,728,266 for 10 classes
        import torch.nn as nn
        cfg = {11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
               16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
                    512, 512, 512, "M"]}
        for depth, want in ((11, 9231114), (16, 14728266)):
            layers, c = [], 3
            for x in cfg[depth]:
                if x == "M":
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(c, x, 3, padding=1), nn.BatchNorm2d(x), nn.ReLU()]
                    c = x
            ref = nn.Module()
            ref.features = nn.Sequential(*layers)
            ref.classifier = nn.Linear(512, 10)
            ours = build_torch(parse(model_text("vgg"), 10, "depth=%d" % depth))
            self.assertEqual(sum(p.numel() for p in ref.parameters()), want)
            self.assertEqual(sum(p.numel() for p in ours.parameters()), want)
            same_state(self, ours, ref)

    def test_cifar_resnet(self):
        # the usual PyTorch CIFAR ResNet (He et al. 2016, 6n+2 layers) with projection
        # shortcuts (1x1 conv + BatchNorm2d) where the shape changes
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(cout)
                self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.bn2 = nn.BatchNorm2d(cout)
                self.shortcut = nn.Sequential()
                if stride != 1 or cin != cout:
                    self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                  nn.BatchNorm2d(cout))

        for depth in (20, 32, 56):
            n = (depth - 2) // 6
            ref = nn.Module()
            ref.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
            ref.bn1 = nn.BatchNorm2d(16)
            cin = 16
            for s, w in enumerate((16, 32, 64), 1):
                blocks = []
                for b in range(n):
                    blocks.append(Block(cin, w, 2 if s > 1 and b == 0 else 1))
                    cin = w
                setattr(ref, "layer%d" % s, nn.Sequential(*blocks))
            ref.linear = nn.Linear(64, 10)
            ours = build_torch(parse(model_text("resnet"), 10, "depth=%d" % depth))
            same_state(self, ours, ref)

    def test_cifar_mobilenetv2(self):
        # the usual PyTorch CIFAR MobileNet-v2: inverted residual blocks (expand 1x1,
        # depthwise 3x3 with groups = planes, project 1x1), cfg (expansion, out, blocks,
        # stride) below, stem stride 1; 2,296,922 parameters for 10 classes
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, cin, cout, t, stride):
                super().__init__()
                planes = t * cin
                self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
                self.bn1 = nn.BatchNorm2d(planes)
                self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, groups=planes, bias=False)
                self.bn2 = nn.BatchNorm2d(planes)
                self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
                self.bn3 = nn.BatchNorm2d(cout)
                self.shortcut = nn.Sequential()
                if stride == 1 and cin != cout:
                    self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False),
                                                  nn.BatchNorm2d(cout))

        cfg = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
               (6, 160, 3, 2), (6, 320, 1, 1)]
        ref = nn.Module()
        ref.conv1 = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
        ref.bn1 = nn.BatchNorm2d(32)
        blocks, cin = [], 32
        for t, c, n, s in cfg:
            for st in [s] + [1] * (n - 1):
                blocks.append(Block(cin, c, t, st))
                cin = c
        ref.layers = nn.Sequential(*blocks)
        ref.conv2 = nn.Conv2d(320, 1280, 1, bias=False)
        ref.bn2 = nn.BatchNorm2d(1280)
        ref.linear = nn.Linear(1280, 10)
        ours = build_torch(parse(model_text("mobilenetv2"), 10))
        self.assertEqual(sum(p.numel() for p in ref.parameters()), 2296922)
        same_state(self, ours, ref)

    def test_mlp(self):
        import torch.nn as nn
        ref = nn.Module()
        ref.fc1, ref.fc2, ref.fc3 = nn.Linear(1024, 512), nn.Linear(512, 512), nn.Linear(512, 10)
        ours = build_torch(parse(model_text("mlp"), 10))
        self.assertEqual(sum(p.numel() for p in ours.parameters()), 792586)
        same_state(self, ours, ref)


if __name__ == "__main__":
    unittest.main()

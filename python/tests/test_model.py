"""adaptsim.model: the Python reader of model descriptions agrees with the simulator's
(src/graph) on every shipped file, evaluates C integer expressions as C does, and builds
PyTorch modules with the checkpoint names."""
import glob
import os
import random
import re
import subprocess
import tempfile
import unittest

from common import SRCDIR, needs_torch, needs_trainer, program

from adaptsim.model import build_torch, evaluate, load, parse

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
        with self.assertRaisesRegex(ValueError, r"^t.model:3: layer name 'x' is already used"):
            parse("input 1 8 8\nrelu x\nrelu x\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: this block has no 'end'"):
            parse("input 1 8 8\nrepeat i = 0..1\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: maxpool2d p: pad=2 is more than "
                                                r"half the kernel \(k=3\)"):
            parse("input 1 8 8\nmaxpool2d p k=3 pad=2\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:2: approximate=fast: expected none "
                                                r"or tanh"):
            parse("input 1 8 8\ngelu g approximate=fast\n", 10, "", "t.model")
        with self.assertRaisesRegex(ValueError, r"^t.model:4: concat c: a \(line 2\) gives "
                                                r"1x8x8 but b \(line 3\) gives 1x4x4 \(the "
                                                r"planes must be equal\)"):
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


TAIL = "flatten f\nlinear fc out=classes\n"


def c_outcome(text, args=""):
    """("OK", (layers, units, params)) or ("ERR", line) from adapt-train --dry-run."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.model")
        with open(path, "wb") as f:
            f.write(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
        cmd = [program("adapt-train"), "--config",
               os.path.join(SRCDIR, "experiments", "configs", "quickstart.ini"), "--dry-run",
               "--set", "model.file=" + path, "--set", "model.args=" + args,
               "--set", "data.path=/nonexistent"]
        out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             cwd=SRCDIR).stdout.decode("utf-8", "replace")
        m = re.search(r"total: (\d+) layers, (\d+) precision units, (\d+) parameters", out)
        if m:
            return "OK", tuple(int(x) for x in m.groups())
        m = re.search(r"^adapt-train: " + re.escape(path) + r":(\d+): ", out, re.M)
        if m:
            return "ERR", int(m.group(1))
        raise AssertionError("neither totals nor an error at a line in:\n" + out)


def py_outcome(text, args=""):
    try:
        g = parse(text, 10, args, "t.model")
    except ValueError as e:
        m = re.match(r"t\.model:(\d+): ", str(e))
        if not m:
            raise AssertionError("no line in '%s'" % e) from None
        return "ERR", int(m.group(1))
    units = sum(ly.kind in ("conv2d", "linear") for ly in g.layers)
    return "OK", (len(g.layers), units, g.params)


def nested(n, line="repeat i = 0..1"):
    """n blocks inside one another (n repeats of 2 passes: 2^n passes of the innermost)."""
    return "input 1 8 8\n" + (line + "\n") * n + "end\n" * n + TAIL


# Descriptions the readers refuse (or accept) alike, with the line and the message: malformed
# ones (before, KeyError, IndexError, ZeroDivisionError or a ValueError without the file), the
# bounds of src/graph/graph.h, labels against layers, UTF-8, the engine's floats.
CASES = [
    # malformed
    ("input 1 8 8\nconv2d c out=2 k=3 stride=0\n", 2, "stride=0, expected 1..1024"),
    ("input 1 8 8\nconv2d c k=3\n", 2, "conv2d c: key 'out' is required"),
    ("input 1 8 8\nmaxpool2d p\n", 2, "maxpool2d p: key 'k' is required"),
    ("input 1 8 8\nflatten f\nlinear fc\n", 3, "linear fc: key 'out' is required"),
    ("input 1 8\n", 1, "expected 'input CHANNELS HEIGHT WIDTH'"),
    ("input 1 8 8\nrequire 1\n", 2, "expected 'require EXPRESSION \"message\"'"),
    ("input 1 8 8\nrelu\n", 2, "expected 'relu NAME [key=value ...]'"),
    ("input 1 8 8\nrepeat i\nend\n", 2, "expected 'repeat NAME = EXPRESSION'"),
    ("input 1 8 8\nrepeat i = 3\nend\n", 2, "expected 'repeat i = FIRST..LAST'"),
    ("input 1 8 8\nrelu r k=\n", 2, "expected key=value, got 'k='"),
    ("input 1 8 8\nrelu r{\n", 2, "'{' without its '}'"),
    ("input 1 8 8\nrelu r}\n", 2, "'}' without its '{'"),
    ("input 1 8 8\nadd a in=input\n", 2, "add a reads 2 inputs, in= names 1"),
    ("input 1 8 8\nend x\n", 2, "nothing may follow 'end' on its line"),
    ("param 1x = 2\n", 1, "'1x' is not a name"),
    ("input 1 8 8\nlet classes = 3\n", 2, "'classes' is predefined"),
    ("input 1 8 8\nbatchnorm2d b eps=1_0\n", 2, "eps=1_0: expected a number"),
    ("input 1 8 8\ngelu g approximate\n", 2, "expected key=value, got 'approximate'"),
    ("input 1 8 8\n" + TAIL + "loss mse\n", 4, "expected 'loss softmax_xent'"),
    ("input \u0661 8 8\n", 1, "expected a number, a name or '('"),
    ("input 1 8 8\nlet x = 1e5\n", 2, "expected an integer (no fractions or suffixes)"),
    ("input 1 8 8\nlet x = -9223372036854775807 - 1\nlet y = x % -1\n", 3, "integer overflow"),
    ("input 1 8 8\nlet x = 9223372036854775808\n", 2, "integer literal too large"),
    ("input 1 8 8\nlet x = (1 ? 2 )\n", 2, "expected ':' of '?:'"),
    ("input 1 8 8\nlet x = (1 : 2)\n", 2, "expected ')'"),
    ("input 1 8 8\nlet x = 1 < > 2\n", 2, "expected a number, a name or '('"),
    ("input 1 8 8\nlet x = 1 <> 2\n", 2, "unexpected text after the expression"),
    ("input 1 8 8\nlet x = 0 && 1 / 0\n", 2, "division by zero"),
    ("input 1 8 8\nif 1\nelse\nelse\nend\n", 4, "'else' without an open 'if'"),
    ("input 1 8 8\nrelu r\x0bs\n", 2, "control character"),
    # bounds (D3): passes of one repeat, the work of a run, nesting, labels, layers
    ("input 1 8 8\nrepeat i = 0..9223372036854775807\nend\n" + TAIL, 2,
     "repeat i = 0..9223372036854775807 makes more than 100000 passes"),
    ("input 1 8 8\nrepeat i = 1..10000000000\n  let x = i\nend\n" + TAIL, 2,
     "more than 100000 passes (the bound of one repeat)"),
    (nested(31), 29, "runs more than 10000000 characters of lines"),
    (nested(33), 34, "blocks nested deeper than 32"),
    ("input 1 8 8\nrepeat i = 0..10000\n  label L{i}\nend\n" + TAIL, 3,
     "label 'L10000': more than 10000 label names"),
    ("input 1 8 8\nrepeat i = 0..10000\n  relu r{i}\nend\n" + TAIL, 3, "more than 10000 layers"),
    # sizes (D5)
    ("input 2 33025 65026\n" + TAIL, 1,
     "input 2x33025x65026 has 4294967300 elements per sample, more than 268435456"),
    ("input 1 1 1\nconv2d a out=1048576 k=1\nconv2d b out=1048576 k=1024 pad=512\n"
     "avgpool2d g global=1\n" + TAIL, 3,
     "conv2d b: its weight tensor 1048576x1048576x1024x1024 has more than 268435456 elements"),
    ("input 16384 1 1\nconv2d c out=16385 k=1\n" + TAIL, 2, "more than 268435456 elements"),
    ("input 1 16384 16384\nconv2d c out=2 k=1\n" + TAIL, 2,
     "its output 2x16384x16384 has 536870912 elements per sample, more than 268435456"),
    ("input 1 1 65536\nconv2d c out=1 k=1 pad=1\n" + TAIL, 2,
     "its output plane 3x65538 is larger than 65536 in a dimension"),
    ("input 256 1024 1024\nrepeat i = 0..8999\n  conv2d c{i} in=input out=1 k=1024 pad=1024 "
     "bias=0\nend\n" + TAIL, 3, "the network's total parameters or MACs overflow 64 bits"),
    # labels and layers share one name space (D9)
    ("input 1 8 8\nconv2d x out=2 k=3\nrelu y\nlabel x\nrelu r in=x\n" + TAIL, 4,
     "label 'x': a layer has that name (line 2)"),
    ("input 1 8 8\nrelu y\nlabel x\nrelu x\n" + TAIL, 4, "layer name 'x' is a label's (line 3)"),
    # UTF-8 (D7)
    (b"input 1 8 8 # caf\xe9\n" + TAIL.encode(), 1, "byte 18 of the line (0xe9) is not UTF-8"),
    ("input 1 8 8\n# \udce9\n" + TAIL, 2, "byte 3 of the line (0xed) is not UTF-8"),
    # the engine's limits (D11)
    ("input 1 8 8\nrelu %s\n" % ("n" * 51) + TAIL, 2, "is too long (at most 50 characters)"),
    ("input 1 8 8\nrelu %s\n" % ("\u00e9" * 25 + "x") + TAIL, 2, "is too long (at most 50"),
    ("input 1 8 8\ndropout d p=0.99999999999\n" + TAIL, 2, "rounds to 1 in single precision"),
    ("input 1 8 8\nbatchnorm2d b eps=4.9e-324\n" + TAIL, 2,
     "eps=4.94066e-324, expected 1.17549e-38 <= eps < 1 in single precision"),
    ("input 1 8 8\nbatchnorm2d b eps=1e999\n" + TAIL, 2, "eps=inf, expected"),
    ("input 1 8 8\nbatchnorm2d b eps=nan\n" + TAIL, 2, "eps=nan: expected a number"),
    # accepted
    ("input 1 8 8\nrelu %s\n" % ("\u00e9" * 25) + TAIL, 0, None),
    ("input 1 8 8\nlet x = %s1%s\n" % ("(" * 495, ")" * 495) + TAIL, 0, None),
    ("input 1 8 8\nlet x = %s1\n" % ("-" * 990) + TAIL, 0, None),
    ("input 1 8 8\nbatchnorm2d b eps=0x1p-3 momentum=1e-320\ndropout d p=0.99999994\n" + TAIL, 0,
     None),
    ("input 1 8 8\nrepeat i = 0..9999\n  label L{i}\nend\nrelu r in=L9999\n" + TAIL, 0, None),
    (nested(32, "if 1"), 0, None),
]


class TestAsTheCReader(unittest.TestCase):
    """Every malformed description raises ValueError with the file and the line, and the
    bounds, name spaces, encoding and number syntax are the C reader's."""

    def test_cases(self):
        for text, line, msg in CASES:
            with self.subTest(text=text[:60]):
                if msg is None:
                    parse(text, 10, "", "t.model")
                    continue
                with self.assertRaises(ValueError) as cm:
                    parse(text, 10, "", "t.model")
                self.assertTrue(str(cm.exception).startswith("t.model:%d: " % line),
                                str(cm.exception))
                self.assertIn(msg, str(cm.exception))

    @needs_trainer
    def test_c_reader_agrees(self):
        for text, line, msg in CASES:
            if isinstance(text, str) and re.search("[\ud800-\udfff]", text):
                continue  # a Python string only
            with self.subTest(text=text[:60]):
                want = ("ERR", line) if msg else py_outcome(text)
                self.assertEqual(c_outcome(text), want)

    def test_values(self):
        g = parse("input 1 8 8\nbatchnorm2d b eps=0x1p-3\ndropout d p=0x1p-1\n" + TAIL, 10)
        self.assertEqual(g.layers[0].keys["eps"], 0.125)
        self.assertEqual(g.layers[1].keys["p"], 0.5)
        # no recursion: nesting as deep as a line (or any string) holds
        self.assertEqual(evaluate("(" * 5000 + "7" + ")" * 5000, {}), 7)
        self.assertEqual(evaluate("-" * 5001 + "7", {}), -7)
        self.assertEqual(evaluate("!" * 4000 + "7", {}), 1)
        self.assertEqual(evaluate("1 ? 2 ? 3 : 4 : 5", {}), 3)
        self.assertEqual(evaluate("0 ? 1 : 0 ? 2 : 3", {}), 3)
        self.assertEqual(evaluate("-2 * 3 + 1 << 2 > 5 == 0 || 7 && 0", {}), 1)
        with self.assertRaisesRegex(ValueError, "division by zero"):
            evaluate("1 ? 2 : 3 / 0", {})  # C evaluates both branches

    def test_model_arguments(self):
        text = "param n = 1\ninput 1 8 8\nrepeat i = 1..n\nend\n" + TAIL
        with self.assertRaisesRegex(ValueError, "^t.model:3: .*more than 100000 passes"):
            parse(text, 10, "n=100001", "t.model")
        for args, msg in (("n", "expected name=value"), ("n=1,n=2", "'n' is set twice"),
                          ("n=x", "unknown name 'x'"), ("m=1", "'m' is not a parameter")):
            with self.assertRaisesRegex(ValueError, "^t.model: .*" + msg):
                parse(text, 10, args, "t.model")

    def test_name_and_depth(self):
        with self.assertRaisesRegex(ValueError, "model resnet20 sets depth=20, but the model "
                                                "arguments set depth=56: name the model "
                                                "resnet56 or resnet"):
            load("resnet20", 10, "depth=56")
        g = load("resnet20", 10, "depth=20")
        self.assertEqual((g.name, len(g.layers)), ("resnet20", 73))

    def test_bounds_at_the_limits(self):
        g = parse(model_text("resnet"), 10, "depth=2852")
        self.assertEqual(len(g.layers), 9985)
        with self.assertRaisesRegex(ValueError, "more than 10000 layers"):
            parse(model_text("resnet"), 10, "depth=2858")

    def test_mutations_raise_value_error(self):
        """Random edits of the shipped files: ValueError or a graph, nothing else."""
        rng = random.Random(1)
        texts = [model_text(os.path.basename(p)[:-6]) for p in MODELS]
        pieces = ["(", ")", "{", "}", "-", "!", "?", ":", "=", "..", " ", "\n", "#", ",", "0",
                  "9223372036854775807", "x", "in=", "k=", "p=", "eps=", "label", "repeat",
                  "end", "if", "else", '"', "\u00e9", "\udce9", "\x00"]
        for _ in range(1500):
            t = rng.choice(texts)
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(t) + 1)
                t = t[:i] + rng.choice(pieces) + t[i + rng.randint(0, 3):]
            try:
                parse(t, 10, rng.choice(["", "depth=20", "channels=1", "hidden=x"]), "t.model")
            except ValueError:
                pass


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

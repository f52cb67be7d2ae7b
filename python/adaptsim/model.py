"""adaptsim.model: model descriptions (doc/model-format.md) in Python, and their PyTorch module.

The same language as the simulator's reader (src/graph): one layer per line,
``param``/``let``/``repeat``/``if``/``label``, integer expressions with C's
operators, ``{EXPR}`` in names. :func:`parse` resolves a description into
layers with shapes; :func:`build_torch` makes the ``nn.Module`` whose
``state_dict`` has the simulator's checkpoint names, for any description.

    >>> g = parse(open("models/resnet.model").read(), classes=10, args="depth=56")
    >>> net = build_torch(g)            # torch.nn.Module; net.state_dict() keys = checkpoint keys

Errors raise ``ValueError("FILE:LINE: ...")``.
"""

import re
import struct

_KINDS = {
    "conv2d": ({"out", "k", "stride", "pad", "bias", "in_channels", "groups", "dilation"}, 1),
    "linear": ({"out", "bias", "in_features"}, 1),
    "relu": (set(), 1),
    "tanh": (set(), 1),
    "maxpool2d": ({"k", "stride", "pad"}, 1),
    "avgpool2d": ({"k", "stride", "pad", "global", "count_include_pad"}, 1),
    "batchnorm2d": ({"eps", "momentum"}, 1),
    "flatten": (set(), 1),
    "add": (set(), 2),
    "relu6": (set(), 1),
    "sigmoid": (set(), 1),
    "hardswish": (set(), 1),
    "dropout": ({"p"}, 1),
    "concat": (set(), (2, 16)),
    "gelu": ({"approximate"}, 1),
}
# the keys in the order the C reader checks them (src/graph/shape.h, enum graph_key)
_KEY_ORDER = ("out", "k", "stride", "pad", "bias", "global", "in_channels", "in_features", "eps",
              "momentum", "groups", "p", "dilation", "count_include_pad", "approximate")
_REAL_KEYS = {"eps", "momentum", "p"}
_WORD_KEYS = {"approximate": ("none", "tanh")}  # torch.nn.GELU(approximate=...)

# The bounds of src/graph/graph.h (doc/model-format.md, "Limits"): the same descriptions are
# refused here and there.
NAME_MAX = 63            # bytes of a name (ADAPT_GRAPH_NAME_MAX - 1)
LAYER_NAME_MAX = 50      # bytes of a layer name
MAX_NUMEL = 1 << 28      # elements of one tensor (an activation of one sample, a weight)
MAX_DIM = 65536          # height and width of the input and of every output
MAX_LAYERS = 10000
MAX_LABELS = 10000       # distinct label names
MAX_REPEAT = 100000      # passes of one repeat
MAX_WORK = 10000000      # each line run counts its length + 1, each repeat pass 1
MAX_DEPTH = 32           # nesting of repeat and if blocks
MAX_LINE = 1000          # bytes of a line without its comment
MAX_VARS = 64
MAX_IN = 16
MAX_ARGS_LEN = 511       # bytes of model arguments
MAX_FILE = 1 << 20       # bytes of a description file
_FLT_MIN = 2.0 ** -126
_I64 = (-(1 << 63), (1 << 63) - 1)


class Layer:
    """One resolved layer: name, kind, inputs (indices, -1 = network input), shapes, keys and
    per-sample costs (params, macs, elementwise, as src/graph counts them)."""

    def __init__(self, name, kind, line):
        self.name, self.kind, self.line = name, kind, line
        self.inputs, self.in_dims, self.out_dim, self.keys = [], [], None, {}
        self.params = self.weights = self.macs = self.elementwise = 0

    def __repr__(self):
        return "Layer(%s %s %s)" % (self.kind, self.name, self.out_dim)


class Graph:
    def __init__(self):
        self.name, self.input, self.classes, self.layers = "", None, 0, []
        self.args = ""

    @property
    def params(self):
        return sum(ly.params for ly in self.layers)

    @property
    def macs(self):
        return sum(ly.macs for ly in self.layers)


def _f32(x):
    """x rounded to single precision (the engine's floats); x within float's range."""
    return struct.unpack("f", struct.pack("f", x))[0]


def _blen(s):
    return len(s.encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- numbers as C's strtod reads

_DEC = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?\Z")
_SPECIAL = re.compile(r"[+-]?(?:inf|infinity|nan(?:\([0-9A-Za-z_]*\))?)\Z", re.I)


def strtod(text):
    """The double C's strtod reads from all of ``text`` (decimal, hexadecimal, inf, nan), or
    None. Values beyond double's range read as an infinity or 0, as strtod gives them."""
    if _DEC.match(text):
        return float(text)
    if _HEX.match(text):
        t = text if "p" in text.lower() else text + "p0"
        try:
            return float.fromhex(t)
        except OverflowError:
            return float("-inf") if text.startswith("-") else float("inf")
    if _SPECIAL.match(text):
        neg = text.startswith("-")
        if "nan" in text.lower():
            return float("nan")
        return float("-inf") if neg else float("inf")
    return None


# ---------------------------------------------------------------- expressions (C semantics)

def _cdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_BINARY = {"*": 8, "/": 8, "%": 8, "+": 7, "-": 7, "<<": 6, ">>": 6, "<": 5, "<=": 5, ">": 5,
           ">=": 5, "==": 4, "!=": 4, "&&": 3, "||": 2}
_OPS2 = ("<<", ">>", "<=", ">=", "==", "!=", "&&", "||")
_NOT_AFTER = "<>=&|"  # "<", ">" and "!" are not themselves when one of these follows
_ASCII_LETTER = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"


def evaluate(text, names):
    """The int64 value of a C integer expression over ``names`` (a dict), evaluated as
    src/graph/expr.c does (every operand, both branches of ?:, errors in the same order),
    without recursion: any nesting a line can hold."""
    def fail(msg):
        raise ValueError("in '%s': %s" % (text, msg))

    def check(v):
        if not _I64[0] <= v <= _I64[1]:
            fail("integer overflow")
        return v

    def apply(op, a, b):
        if op in ("/", "%"):
            if b == 0:
                fail("division by zero")
            if a == _I64[0] and b == -1:
                fail("integer overflow")
            return _cdiv(a, b) if op == "/" else a - _cdiv(a, b) * b
        if op == "*":
            return check(a * b)
        if op == "+":
            return check(a + b)
        if op == "-":
            return check(a - b)
        if op in ("<<", ">>"):
            if not 0 <= b <= 62:
                fail("shift count outside 0..62")
            return check(a << b) if op == "<<" else a >> b
        return int({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                    "!=": a != b, "&&": bool(a) and bool(b), "||": bool(a) or bool(b)}[op])

    vals, ops = [], []  # ops: "(", "?", ":" (a ?: waiting for its else value), unary, binary

    def reduce_top():
        op = ops.pop()
        if op == ":":
            b, a, c = vals.pop(), vals.pop(), vals.pop()
            vals.append(a if c else b)
        elif op in ("u-", "u+", "u!"):
            v = vals.pop()
            if op == "u-":
                if v == _I64[0]:
                    fail("integer overflow")
                v = -v
            elif op == "u!":
                v = int(not v)
            vals.append(v)
        else:
            b = vals.pop()
            vals.append(apply(op, vals.pop(), b))

    def close(stop):
        """Reduces down to the nearest "(" or "?" (both kept); ":" closes on the way when
        stop includes it. Returns that marker, or None at the bottom."""
        while ops and ops[-1] not in ("(", "?"):
            if ops[-1] == ":" and ":" not in stop:
                break
            reduce_top()
        return ops[-1] if ops else None

    def context_error(marker):
        fail("expected ')'" if marker == "(" else "expected ':' of '?:'" if marker == "?"
             else "unexpected text after the expression")

    p, n, operand = 0, len(text), True
    while True:
        while p < n and text[p] in " \t":
            p += 1
        c = text[p] if p < n else ""
        if operand:
            if c == "(":
                ops.append("(")
                p += 1
            elif c in ("-", "+") and c:
                ops.append("u" + c)
                p += 1
            elif c == "!" and (p + 1 >= n or text[p + 1] not in _NOT_AFTER):
                ops.append("u!")
                p += 1
            elif c and c in _DIGITS:
                v = 0
                while p < n and text[p] in _DIGITS:
                    v = v * 10 + ord(text[p]) - 48
                    p += 1
                    if v > _I64[1]:
                        fail("integer literal too large")
                if p < n and (text[p] in _ASCII_LETTER or text[p] in "_."):
                    fail("expected an integer (no fractions or suffixes)")
                vals.append(v)
                operand = False
            elif c and (c in _ASCII_LETTER or c == "_"):
                q = p
                while q < n and q - p < NAME_MAX and (text[q] in _ASCII_LETTER or
                                                      text[q] in _DIGITS or text[q] == "_"):
                    q += 1
                name = text[p:q]
                p = q
                if name not in names:
                    fail("unknown name '%s'" % name)
                vals.append(names[name])
                operand = False
            else:
                fail("expected a number, a name or '('" if c else "expression ends too early")
            continue
        op = text[p:p + 2] if text[p:p + 2] in _OPS2 else c
        if op in ("<", ">") and p + 1 < n and text[p + 1] in _NOT_AFTER:
            op = ""
        if op in _BINARY:
            while ops and ops[-1] not in ("(", "?", ":") and (
                    ops[-1][0] == "u" or _BINARY[ops[-1]] >= _BINARY[op]):
                reduce_top()
            ops.append(op)
            p += len(op)
            operand = True
        elif op == "?":
            close(())
            ops.append("?")
            p += 1
            operand = True
        elif op == ":":
            marker = close((":",))
            if marker != "?":
                context_error(marker)
            ops[-1] = ":"
            p += 1
            operand = True
        elif op == ")":
            marker = close((":",))
            if marker != "(":
                context_error(marker)
            ops.pop()
            p += 1
        else:
            marker = close((":",))
            if marker is not None or c:
                context_error(marker)
            return vals[-1]


# ---------------------------------------------------------------- the reader

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse(text, classes, args="", file="<model>"):
    """The resolved :class:`Graph` of a description for ``classes`` outputs, or ValueError
    ("FILE:LINE: ...") for whatever the simulator's reader (src/graph) refuses.

    ``text``: str or UTF-8 bytes; ``args``: "name=value,..." settings of declared parameters.
    """
    # the reader (adaptsim._model_reader) imports this module's definitions: imported here,
    # once this module is complete
    from ._model_reader import _Reader
    return _Reader(text, classes, args, file).graph


# ---------------------------------------------------------------- built-in models and files

def models_dirs():
    """The folders a built-in model name is looked up in, in order, as adapt-sim's programs
    look (adapt_find_file): ``models`` in every folder of $ADAPT_DATA_PATH, the ``models``
    folder of the source tree this package sits in, then the installed data folder
    PREFIX/share/adapt-sim/models for the PREFIX of the adapt-train on PATH, of this Python
    (sys.prefix), /usr/local and /usr. Only existing folders are listed."""
    import os
    import shutil
    import sys
    out = [os.path.join(p, "models") for p in os.environ.get("ADAPT_DATA_PATH", "").split(":")
           if p]
    out.append(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "models"))
    prefixes = []
    train = shutil.which("adapt-train")
    if train:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(train))))
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    out += [os.path.join(p, "share", "adapt-sim", "models") for p in prefixes]
    seen = []
    for d in out:
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def _models_dir(name):
    """The first of :func:`models_dirs` holding NAME.model, or else the base name of a name
    ending in digits; the source tree's folder when none does (the error names it)."""
    import os
    dirs = models_dirs()
    m = re.match(r"^(.*?)([0-9]+)$", name)
    for d in dirs:
        if os.path.exists(os.path.join(d, name + ".model")):
            return d
    for d in dirs:
        if m and m.group(1) and os.path.exists(os.path.join(d, m.group(1) + ".model")):
            return d
    return dirs[0] if dirs else os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "models")


def load(name, classes, args="", models_dir=None):
    """:func:`parse` of a file path, or of a built-in name looked up in ``models_dir`` (default:
    the first of :func:`models_dirs` that has it: $ADAPT_DATA_PATH, this source tree, the
    installed data folder) as adapt-sim does:
    ``NAME.model``, else a name ending in digits names the file without them with ``depth``
    set (``resnet56``: ``resnet.model``, depth=56); model arguments may repeat that depth but
    not contradict it."""
    import os
    is_path = "/" in name or (len(name) > 6 and name.endswith(".model"))
    extra = ""
    if is_path:
        path = name
    else:
        if not name or len(name) > 48 or not _IDENT.match(name):
            raise ValueError("unknown model '%s' (expected a built-in name such as lenet5 or "
                             "resnet56, or a .model file)" % name)
        d = models_dir or _models_dir(name)
        path = os.path.join(d, name + ".model")
        m = re.match(r"^(.*?)([0-9]+)$", name)
        if not os.path.exists(path) and m and m.group(1):
            base = os.path.join(d, m.group(1) + ".model")
            if os.path.exists(base):
                path, extra = base, m.group(2)
        if not os.path.exists(path):
            if models_dir:
                raise ValueError("unknown model '%s' (no %s)" % (name, path))
            raise ValueError("unknown model '%s' (no %s.model in %s; ADAPT_DATA_PATH names "
                             "folders holding models/, and `make install` puts the built-in "
                             "models in PREFIX/share/adapt-sim/models)"
                             % (name, name, ", ".join(models_dirs()) or "no models folder: none in "
                                "$ADAPT_DATA_PATH, the source tree or PREFIX/share/adapt-sim"))
    if extra and args:
        for t in args.split(","):
            k, eq, v = t.partition("=")
            if not eq or k.strip(" ") != "depth":
                continue
            try:
                got, want = evaluate(v, {}), evaluate(extra, {})
            except ValueError:
                continue
            if got != want:
                base = m.group(1)
                raise ValueError("model %s sets depth=%d, but the model arguments set depth=%d: "
                                 "name the model %s%d or %s, or drop depth from the arguments"
                                 % (name, want, got, base, got, base))
            extra = ""
    with open(path, "rb") as f:
        data = f.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError("%s: larger than %d bytes" % (path, MAX_FILE))
    if b"\0" in data:
        raise ValueError("%s: contains a NUL byte (a text file expected)" % path)
    full = ",".join(a for a in ("depth=" + extra if extra else "", args) if a)
    g = parse(data, classes, full, path)
    if not is_path:
        g.name = name
    return g


# ---------------------------------------------------------------- PyTorch

def _module(nn, ly):
    k = ly.keys
    cin = ly.in_dims[0][0]
    if ly.kind == "conv2d":
        return nn.Conv2d(cin, k["out"], k["k"], k["stride"], k["pad"], bias=bool(k["bias"]),
                         groups=k.get("groups", 1), dilation=k.get("dilation", 1))
    if ly.kind == "linear":
        return nn.Linear(cin, k["out"], bias=bool(k["bias"]))
    if ly.kind == "batchnorm2d":
        return nn.BatchNorm2d(cin, eps=k["eps"], momentum=k["momentum"])
    if ly.kind == "relu":
        return nn.ReLU()
    if ly.kind == "relu6":
        return nn.ReLU6()
    if ly.kind == "sigmoid":
        return nn.Sigmoid()
    if ly.kind == "hardswish":
        return nn.Hardswish()
    if ly.kind == "gelu":
        return nn.GELU(approximate=k.get("approximate", "none"))
    if ly.kind == "dropout":
        return nn.Dropout(ly.keys["p"])
    if ly.kind == "tanh":
        return nn.Tanh()
    if ly.kind == "flatten":
        return nn.Flatten()
    if ly.kind == "maxpool2d":
        return nn.MaxPool2d(k["k"], k["stride"], k["pad"])
    if ly.kind == "avgpool2d":
        if k["k"] == 0:
            return nn.AdaptiveAvgPool2d(1)
        return nn.AvgPool2d(k["k"], k["stride"], k["pad"],
                            count_include_pad=bool(k["count_include_pad"]))
    return None  # add, concat: computed in forward


def build_torch(g):
    """The ``nn.Module`` of a resolved :class:`Graph`: submodules at the layers' dotted names
    (so ``state_dict()`` keys are the checkpoint's), forward in the description's order."""
    import torch
    import torch.nn as nn

    class Described(nn.Module):
        def __init__(self):
            super().__init__()
            self._order = []
            for ly in g.layers:
                m = _module(nn, ly)
                if m is None:
                    self._order.append((ly, None))
                    continue
                parent = self
                parts = ly.name.split(".")
                for p in parts[:-1]:
                    if not hasattr(parent, p) or p not in parent._modules:
                        parent.add_module(p, nn.Module())
                    parent = parent._modules[p]
                parent.add_module(parts[-1], m)
                self._order.append((ly, m))

        def forward(self, x):
            outs = []
            for ly, m in self._order:
                ins = [x if j < 0 else outs[j] for j in ly.inputs]
                if m is not None:
                    outs.append(m(ins[0]))
                elif ly.kind == "concat":
                    outs.append(torch.cat(ins, 1))
                else:
                    outs.append(ins[0] + ins[1])
            return outs[-1]

    return Described()

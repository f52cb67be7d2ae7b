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

_KINDS = {
    "conv2d": ({"out", "k", "stride", "pad", "bias", "in_channels", "groups", "dilation"}, 1),
    "linear": ({"out", "bias", "in_features"}, 1),
    "relu": (set(), 1),
    "relu6": (set(), 1),
    "sigmoid": (set(), 1),
    "hardswish": (set(), 1),
    "gelu": ({"approximate"}, 1),
    "dropout": ({"p"}, 1),
    "concat": (set(), (2, 16)),
    "tanh": (set(), 1),
    "maxpool2d": ({"k", "stride", "pad"}, 1),
    "avgpool2d": ({"k", "stride", "pad", "global", "count_include_pad"}, 1),
    "batchnorm2d": ({"eps", "momentum"}, 1),
    "flatten": (set(), 1),
    "add": (set(), 2),
}
_REAL_KEYS = {"eps", "momentum", "p"}
_WORD_KEYS = {"approximate": ("none", "tanh")}  # torch.nn.GELU(approximate=...)
MAX_LAYERS = 10000


class Layer:
    """One resolved layer: name, kind, inputs (indices, -1 = network input), shapes, keys."""

    def __init__(self, name, kind, line):
        self.name, self.kind, self.line = name, kind, line
        self.inputs, self.in_dims, self.out_dim, self.keys = [], [], None, {}

    def __repr__(self):
        return "Layer(%s %s %s)" % (self.kind, self.name, self.out_dim)


class Graph:
    def __init__(self):
        self.name, self.input, self.classes, self.layers = "", None, 0, []

    @property
    def params(self):
        return sum(_params(ly) for ly in self.layers)


def _params(ly):
    k = ly.keys
    if ly.kind == "conv2d":
        return (k["out"] * (ly.in_dims[0][0] // k.get("groups", 1)) * k["k"] ** 2
                + (k["out"] if k["bias"] else 0))
    if ly.kind == "linear":
        return k["out"] * ly.in_dims[0][0] + (k["out"] if k["bias"] else 0)
    if ly.kind == "batchnorm2d":
        return 2 * ly.in_dims[0][0]
    return 0


# ---------------------------------------------------------------- expressions (C semantics)

_TOK = re.compile(r"\s*(\d+|[A-Za-z_]\w*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%()<>!?:])")


def _cdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def evaluate(text, names):
    """The int64 value of a C integer expression over ``names`` (a dict)."""
    toks, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOK.match(text, pos)
        if not m:
            raise ValueError("in '%s': unexpected character %r" % (text, text[pos]))
        toks.append(m.group(1))
        pos = m.end()
    i = [0]

    def peek():
        return toks[i[0]] if i[0] < len(toks) else None

    def take():
        i[0] += 1
        return toks[i[0] - 1]

    def check(v):
        if not -(1 << 63) <= v < (1 << 63):
            raise ValueError("in '%s': integer overflow" % text)
        return v

    def primary():
        t = peek()
        if t is None:
            raise ValueError("in '%s': expression ends too early" % text)
        take()
        if t == "(":
            v = ternary()
            if take_if(")") is None:
                raise ValueError("in '%s': expected ')'" % text)
            return v
        if t == "-":
            return check(-primary())
        if t == "+":
            return primary()
        if t == "!":
            return int(not primary())
        if t.isdigit():
            return check(int(t))
        if t[0].isalpha() or t[0] == "_":
            if t not in names:
                raise ValueError("in '%s': unknown name '%s'" % (text, t))
            return names[t]
        raise ValueError("in '%s': expected a number, a name or '('" % text)

    def take_if(*ops):
        if peek() in ops:
            return take()
        return None

    def binary(sub, ops, fn):
        def level():
            v = sub()
            while True:
                op = take_if(*ops)
                if op is None:
                    return v
                v = fn(op, v, sub())
        return level

    def arith(op, a, b):
        if op in "/%" and b == 0:
            raise ValueError("in '%s': division by zero" % text)
        if op == "*":
            return check(a * b)
        if op == "/":
            return check(_cdiv(a, b))
        if op == "%":
            return a - _cdiv(a, b) * b
        if op == "+":
            return check(a + b)
        if op == "-":
            return check(a - b)
        if not 0 <= b <= 62:
            raise ValueError("in '%s': shift count outside 0..62" % text)
        return check(a << b) if op == "<<" else a >> b

    cmp = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
           ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}
    mul = binary(primary, ("*", "/", "%"), arith)
    add = binary(mul, ("+", "-"), arith)
    shift = binary(add, ("<<", ">>"), arith)
    rel = binary(shift, ("<", "<=", ">", ">="), lambda op, a, b: int(cmp[op](a, b)))
    eq = binary(rel, ("==", "!="), lambda op, a, b: int(cmp[op](a, b)))
    land = binary(eq, ("&&",), lambda op, a, b: int(bool(a) and bool(b)))
    lor = binary(land, ("||",), lambda op, a, b: int(bool(a) or bool(b)))

    def ternary():
        c = lor()
        if take_if("?") is None:
            return c
        a = ternary()
        if take_if(":") is None:
            raise ValueError("in '%s': expected ':' of '?:'" % text)
        b = ternary()
        return a if c else b

    v = ternary()
    if peek() is not None:
        raise ValueError("in '%s': unexpected text after the expression" % text)
    return v


# ---------------------------------------------------------------- the reader

def parse(text, classes, args="", file="<model>"):
    """The resolved :class:`Graph` of a description for ``classes`` outputs.

    ``args``: "name=value,..." settings of declared parameters.
    """
    lines = []
    for no, raw in enumerate(text.split("\n"), 1):
        lines.append((no, raw.split("#", 1)[0].strip()))
    # pair blocks
    ends, elses, stack = {}, {}, []
    for idx, (no, t) in enumerate(lines):
        kw = t.split(" ", 1)[0].split("\t", 1)[0]
        if kw in ("repeat", "if"):
            stack.append(idx)
        elif t == "else":
            if not stack or not lines[stack[-1]][1].startswith("if") or stack[-1] in elses:
                raise ValueError("%s:%d: 'else' without an open 'if'" % (file, no))
            elses[stack[-1]] = idx
        elif t == "end":
            if not stack:
                raise ValueError("%s:%d: 'end' without an open 'repeat' or 'if'" % (file, no))
            ends[stack.pop()] = idx
    if stack:
        raise ValueError("%s:%d: this block has no 'end'" % (file, lines[stack[-1]][0]))
    overrides = {}
    for a in filter(None, (s.strip() for s in (args or "").split(","))):
        k, _, v = a.partition("=")
        overrides[k.strip()] = evaluate(v, {})
    g = Graph()
    g.classes = classes
    st = {"names": {"classes": classes}, "labels": {}, "cur": -1, "loss": False, "used": set()}

    def fail(no, msg):
        raise ValueError("%s:%d: %s" % (file, no, msg))

    def ev(no, s):
        try:
            return evaluate(s, st["names"])
        except ValueError as e:
            fail(no, str(e))

    def interp(no, s):
        return re.sub(r"\{([^}]*)\}", lambda m: str(ev(no, m.group(1))), s)

    def lookup(name):
        if name == "input":
            return -1
        if name in st["labels"]:
            return st["labels"][name]
        for j in range(len(g.layers) - 1, -1, -1):
            if g.layers[j].name == name:
                return j
        return None

    def run(a, b):
        idx = a
        while idx < b:
            no, t = lines[idx]
            if not t or t in ("else", "end"):
                idx += 1
                continue
            if st["loss"]:
                fail(no, "nothing may follow the 'loss' line")
            kw, _, rest = t.partition(" ")
            rest = rest.strip()
            if kw == "repeat":
                var, _, rng = rest.partition("=")
                lo, _, hi = rng.partition("..")
                for v in range(ev(no, lo), ev(no, hi) + 1):
                    st["names"][var.strip()] = v
                    run(idx + 1, ends[idx])
                idx = ends[idx] + 1
                continue
            if kw == "if":
                if ev(no, rest):
                    run(idx + 1, elses.get(idx, ends[idx]))
                elif idx in elses:
                    run(elses[idx] + 1, ends[idx])
                idx = ends[idx] + 1
                continue
            line(no, kw, rest, t)
            idx += 1

    def line(no, kw, rest, t):
        if kw in ("param", "let"):
            name, _, expr = rest.partition("=")
            name = name.strip()
            v = ev(no, expr)
            if kw == "param":
                if name in overrides:
                    v = overrides[name]
                    st["used"].add(name)
            st["names"][name] = v
        elif kw == "model":
            g.name = rest
        elif kw == "input":
            g.input = tuple(ev(no, w) for w in rest.split())
        elif kw == "require":
            expr, msg = rest.split('"', 1)
            if not ev(no, expr):
                fail(no, "requirement failed: %s" % msg.rstrip('"'))
        elif kw == "label":
            st["labels"][interp(no, rest)] = st["cur"]
        elif kw == "loss":
            st["loss"] = True
        elif kw in _KINDS:
            layer(no, re.findall(r"(?:\{[^}]*\}|[^\s{])+", t))
        else:
            fail(no, "unknown line '%s'" % kw)

    def layer(no, words):
        kind = words[0]
        allowed, n_in = _KINDS[kind]
        if g.input is None:
            fail(no, "the 'input' line must come before the first layer")
        if len(g.layers) >= MAX_LAYERS:
            fail(no, "more than %d layers" % MAX_LAYERS)
        ly = Layer(interp(no, words[1]), kind, no)
        if ly.name == "input":
            fail(no, "'input' is the network input's name")
        if any(x.name == ly.name for x in g.layers):
            fail(no, "layer name '%s' is already used" % ly.name)
        keys = {}
        for w in words[2:]:
            k, _, v = w.partition("=")
            if k == "in":
                for nm in v.split(","):
                    j = lookup(interp(no, nm))
                    if j is None:
                        fail(no, "in=%s: no earlier layer or label is called '%s'" % (v, nm))
                    ly.inputs.append(j)
                continue
            if k not in allowed:
                fail(no, "%s %s: key '%s' does not apply" % (kind, ly.name, k))
            if k in _WORD_KEYS:
                if v not in _WORD_KEYS[k]:
                    fail(no, "%s=%s: expected %s" % (k, v, " or ".join(_WORD_KEYS[k])))
                keys[k] = v
            else:
                keys[k] = float(v) if k in _REAL_KEYS else ev(no, v)
        if not ly.inputs:
            ly.inputs = [st["cur"]]
        lo, hi = (n_in, n_in) if isinstance(n_in, int) else n_in
        if not lo <= len(ly.inputs) <= hi:
            fail(no, "%s %s reads %s inputs, in= names %d"
                 % (kind, ly.name, lo if lo == hi else "%d to %d" % (lo, hi), len(ly.inputs)))
        ly.in_dims = [g.input if j < 0 else g.layers[j].out_dim for j in ly.inputs]
        c, h, w = ly.in_dims[0]
        keys.setdefault("bias", 1)
        if kind in ("conv2d", "maxpool2d", "avgpool2d"):
            if keys.get("global"):
                if {"k", "stride", "pad", "count_include_pad"} & set(keys):
                    fail(no, "avgpool2d %s: global=1 takes no k, stride, pad or "
                         "count_include_pad" % ly.name)
                keys["k"], keys["stride"], out = 0, 1, (c, 1, 1)
            else:
                keys.setdefault("stride", 1 if kind == "conv2d" else keys["k"])
                keys.setdefault("pad", 0)
                k, s, p = keys["k"], keys["stride"], keys["pad"]
                if kind != "conv2d" and p > k // 2:
                    fail(no, "%s %s: pad=%d is more than half the kernel (k=%d)"
                         % (kind, ly.name, p, k))
                span = (k - 1) * keys.get("dilation", 1) + 1
                if span > h + 2 * p or span > w + 2 * p:
                    fail(no, "%s %s: kernel %d is larger than its padded input" % (kind, ly.name, k))
                out = (keys["out"] if kind == "conv2d" else c,
                       (h + 2 * p - span) // s + 1, (w + 2 * p - span) // s + 1)
        elif kind == "linear":
            if h != 1 or w != 1:
                fail(no, "linear %s reads features (put a flatten before it)" % ly.name)
            out = (keys["out"], 1, 1)
        elif kind == "flatten":
            out = (c * h * w, 1, 1)
        elif kind == "add":
            if ly.in_dims[0] != ly.in_dims[1]:
                fail(no, "add %s: the shapes must be equal" % ly.name)
            out = ly.in_dims[0]
        elif kind == "concat":
            if any(d[1:] != ly.in_dims[0][1:] for d in ly.in_dims):
                fail(no, "concat %s: the planes must be equal" % ly.name)
            out = (sum(d[0] for d in ly.in_dims), h, w)
        else:
            out = (c, h, w)
        if kind == "dropout":
            keys.setdefault("p", 0.5)
        if kind == "avgpool2d":
            keys.setdefault("count_include_pad", 1)
        if kind == "batchnorm2d":
            keys.setdefault("eps", 1e-5)
            keys.setdefault("momentum", 0.1)
        ly.out_dim, ly.keys = tuple(out), keys
        g.layers.append(ly)
        st["cur"] = len(g.layers) - 1

    run(0, len(lines))
    unused = set(overrides) - st["used"]
    if unused:
        raise ValueError("%s: model argument '%s' is not a parameter of the description"
                         % (file, sorted(unused)[0]))
    if not g.layers or g.layers[-1].out_dim != (classes, 1, 1):
        raise ValueError("%s: the network must end in %d class scores" % (file, classes))
    if not g.name:
        g.name = re.sub(r"\..*$", "", file.rsplit("/", 1)[-1])
    return g


def load(name, classes, args="", models_dir=None):
    """:func:`parse` of a file path, or of a built-in name looked up in ``models_dir`` (default:
    the ``models`` folder of the source tree this package sits in) as adapt-sim does:
    ``NAME.model``, else a name ending in digits names the file without them with ``depth``
    set (``resnet56``: ``resnet.model``, depth=56)."""
    import os
    if "/" in name or name.endswith(".model"):
        path, extra = name, ""
    else:
        d = models_dir or os.path.join(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))), "models")
        path, extra = os.path.join(d, name + ".model"), ""
        m = re.match(r"^(.*?)(\d+)$", name)
        if not os.path.exists(path) and m and m.group(1):
            path, extra = os.path.join(d, m.group(1) + ".model"), "depth=" + m.group(2)
        if not os.path.exists(path):
            raise ValueError("unknown model '%s' (no %s)" % (name, path))
    with open(path) as f:
        g = parse(f.read(), classes, ",".join(a for a in (extra, args) if a), path)
    if "/" not in name and not name.endswith(".model"):
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

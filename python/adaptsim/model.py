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


def _utf8_text(data, file):
    """``data`` (bytes or str) as str, refusing what is not UTF-8 as the C reader does: with
    the line and the byte in it."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
            return data
        except UnicodeEncodeError as e:  # lone surrogates
            bad = len(data[:e.start].encode("utf-8", "surrogatepass"))
            data = data.encode("utf-8", "surrogatepass")
    else:
        try:
            return bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            bad = e.start
    line = data.count(b"\n", 0, bad) + 1
    col = bad - (data.rfind(b"\n", 0, bad) + 1) + 1
    raise ValueError("%s:%d: byte %d of the line (0x%02x) is not UTF-8 (a description is UTF-8 "
                     "text)" % (file, line, col, data[bad]))


def _split(s, cap):
    """Words of s at blanks outside {} (as the C reader's split); cap + 1 when more."""
    words, p, n = [], 0, len(s)
    while p < n:
        while p < n and s[p] in " \t":
            p += 1
        if p >= n:
            break
        if len(words) == cap:
            return cap + 1
        q, depth = p, 0
        while q < n and (depth or s[q] not in " \t"):
            depth += 1 if s[q] == "{" else -1 if s[q] == "}" and depth else 0
            q += 1
        words.append(s[p:q])
        p = q
    return words


def _parse_args(args, file):
    out = []
    if not args:
        return out
    if _blen(args) > MAX_ARGS_LEN:
        raise ValueError("%s: model arguments too long" % file)
    for t in filter(None, args.split(",")):
        t = t.lstrip(" ")
        eq = t.find("=")
        if eq <= 0 or len(out) == MAX_VARS:
            raise ValueError("%s: model arguments '%s': expected name=value[,...]" % (file, args))
        name = t[:eq].rstrip(" ")
        if not _IDENT.match(name) or _blen(name) > NAME_MAX:
            raise ValueError("%s: model arguments '%s': '%s' is not a name" % (file, args, name))
        try:
            v = evaluate(t[eq + 1:], {})
        except ValueError as e:
            raise ValueError("%s: model argument %s: %s" % (file, name, e)) from None
        if any(a == name for a, _ in out):
            raise ValueError("%s: model arguments '%s': '%s' is set twice" % (file, args, name))
        out.append((name, v))
    return out


def _axis_reads(n, no, k, s, p):
    """Input cells the windows of one axis read (src/graph/shape.c)."""
    o0 = min((p + s - 1) // s, no)
    o1 = min((n - k + p) // s if n - k + p >= 0 else -1, no - 1)
    r = (o1 - o0 + 1) * k if o1 >= o0 else 0
    for o in list(range(0, min(o0, no))) + list(range(max(o1 + 1, o0), no)):
        a = o * s - p
        r += min(a + k, n) - max(a, 0)
    return r


def parse(text, classes, args="", file="<model>"):
    """The resolved :class:`Graph` of a description for ``classes`` outputs, or ValueError
    ("FILE:LINE: ...") for whatever the simulator's reader (src/graph) refuses.

    ``text``: str or UTF-8 bytes; ``args``: "name=value,..." settings of declared parameters.
    """
    return _Reader(text, classes, args, file).graph


class _Reader:
    def __init__(self, text, classes, args, file):
        self.file = file
        if classes < 2:
            raise ValueError("%s: need at least 2 classes, got %d" % (file, classes))
        try:
            file.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("model file name '%s' is not UTF-8 (the trace records it)"
                             % file) from None
        g = self.graph = Graph()
        g.classes, g.args = classes, args or ""
        self.args = _parse_args(args, file)
        text = _utf8_text(text, file)
        self.used = set()
        self.names = {"classes": classes}
        self.table = {}   # name -> [is_label, node, line]
        self.n_labels = 0
        self.cur, self.have_loss, self.layers_seen, self.work = -1, False, 0, 0
        self.n_units = 0
        self.line = 1
        self.scan(text)
        self.run(0, len(self.lines))
        self.line = self.lines[-1][0] if self.lines else 1
        for name, _ in self.args:
            if name not in self.used:
                raise ValueError("%s: model argument '%s' is not a parameter of the description "
                                 "(declare it with 'param %s = ...')" % (file, name, name))
        if g.input is None:
            self.fail("no 'input CHANNELS HEIGHT WIDTH' line")
        self.check_output()
        if not g.name:
            base = file.rsplit("/", 1)[-1].split(".", 1)[0]
            while _blen(base) > NAME_MAX:
                base = base[:-1]
            g.name = base or "model"

    def fail(self, msg, line=None):
        raise ValueError("%s:%d: %s" % (self.file, self.line if line is None else line, msg))

    # -- lines and blocks
    def scan(self, text):
        pieces = text.split("\n")
        if len(pieces) > 1 and pieces[-1] == "":
            pieces.pop()
        self.lines = []
        self.els, self.end, stack = {}, {}, []
        for no, raw in enumerate(pieces, 1):
            self.line = no
            t = raw.split("#", 1)[0].rstrip(" \t\n\v\f\r").lstrip(" \t")
            if any(ch < " " and ch != "\t" for ch in t):
                self.fail("control character in the line (a text file expected)")
            if _blen(t) > MAX_LINE:
                self.fail("line longer than %d characters" % MAX_LINE)
            idx = len(self.lines)
            kw = re.split(r"[ \t]", t, 1)[0]
            if kw in ("repeat", "if"):
                if len(stack) == MAX_DEPTH:
                    self.fail("blocks nested deeper than %d" % MAX_DEPTH)
                stack.append(idx)
            elif kw == "else":
                if t != "else":
                    self.fail("nothing may follow 'else' on its line")
                if not stack or not self.lines[stack[-1]][1].startswith("if") or \
                        stack[-1] in self.els:
                    self.fail("'else' without an open 'if'")
                self.els[stack[-1]] = idx
            elif kw == "end":
                if t != "end":
                    self.fail("nothing may follow 'end' on its line")
                if not stack:
                    self.fail("'end' without an open 'repeat' or 'if'")
                self.end[stack.pop()] = idx
                t = ""
            self.lines.append((no, t))
        if stack:
            self.line = self.lines[stack[-1]][0]
            self.fail("this block has no 'end'")
        self.lines = [(no, "" if t == "else" else t) for no, t in self.lines]

    def add_work(self, n):
        self.work += n
        if self.work > MAX_WORK:
            self.fail("the description runs more than %d characters of lines (each line counts "
                      "its length plus one each time it runs, each repeat pass one): is a "
                      "repeat's range too large?" % MAX_WORK)

    def run(self, a, b):
        i = a
        while i < b:
            no, t = self.lines[i]
            if t:
                self.line = no
                self.add_work(_blen(t) + 1)
                self.run_line(i, t)
                if i in self.end:
                    i = self.end[i]
            i += 1

    def ev(self, s):
        try:
            return evaluate(s, self.names)
        except ValueError as e:
            self.fail(str(e))

    def set_var(self, name, v):
        if name not in self.names and len(self.names) == MAX_VARS:
            self.fail("more than %d names defined" % MAX_VARS)
        self.names[name] = v

    def interp(self, src, cap, what):
        out, p = [], 0
        while p < len(src):
            if src[p] == "{":
                q = src.find("}", p)
                if q < 0:
                    self.fail("%s '%s': '{' without its '}'" % (what, src))
                if _blen(src[p + 1:q]) >= 128:
                    self.fail("%s '%s': expression in {} too long" % (what, src))
                piece, p = str(self.ev(src[p + 1:q])), q + 1
            elif src[p] == "}":
                self.fail("%s '%s': '}' without its '{'" % (what, src))
            else:
                piece, p = src[p], p + 1
            out.append(piece)
            if _blen("".join(out)) > cap:
                self.fail("%s '%s' is too long (at most %d characters)" % (what, src, cap))
        if not out:
            self.fail("%s is empty" % what)
        return "".join(out)

    def name_eq_expr(self, rest, kw):
        eq = rest.find("=")
        name = rest[:eq].rstrip(" \t") if eq >= 0 else ""
        if not name or _blen(name) > NAME_MAX:
            self.fail("expected '%s NAME = EXPRESSION'" % kw)
        if not _IDENT.match(name):
            self.fail("'%s' is not a name (letters, digits and '_', not first a digit)" % name)
        if name in ("classes", "input"):
            self.fail("'%s' is predefined and cannot be set" % name)
        return name, rest[eq + 1:]

    def run_line(self, i, t):
        m = re.match(r"([^ \t]*)[ \t]*(.*)\Z", t, re.S)
        kw, rest = m.group(1), m.group(2)
        g = self.graph
        if self.have_loss:
            self.fail("nothing may follow the 'loss' line")
        if kw == "param":
            if self.layers_seen:
                self.fail("'param' must come before the first layer")
            name, expr = self.name_eq_expr(rest, "param")
            if name in self.names:
                self.fail("'%s' is already defined" % name)
            v = self.ev(expr)
            for a, av in self.args:
                if a == name:
                    v = av
                    self.used.add(a)
            self.set_var(name, v)
        elif kw == "let":
            name, expr = self.name_eq_expr(rest, "let")
            self.set_var(name, self.ev(expr))
        elif kw == "model":
            if not _IDENT.match(rest) or _blen(rest) > NAME_MAX:
                self.fail("expected 'model NAME' (letters, digits, '_')")
            g.name = rest
        elif kw == "input":
            self.run_input(rest)
        elif kw == "require":
            self.run_require(rest)
        elif kw == "label":
            name = self.interp(rest, NAME_MAX, "label")
            if " " in name or name == "input":
                self.fail("expected 'label NAME'")
            e = self.table.get(name)
            if e and not e[0]:
                self.fail("label '%s': a layer has that name (line %d); a label and a layer "
                          "cannot share a name" % (name, e[2]))
            if e:
                e[1], e[2] = self.cur, self.line
            else:
                if self.n_labels == MAX_LABELS:
                    self.fail("label '%s': more than %d label names" % (name, MAX_LABELS))
                self.n_labels += 1
                self.table[name] = [True, self.cur, self.line]
        elif kw == "loss":
            if rest != "softmax_xent":
                self.fail("expected 'loss softmax_xent' (the only loss), got '%s'" % rest[:80])
            self.have_loss = True
        elif kw == "repeat":
            self.run_repeat(i, rest)
        elif kw == "if":
            v = self.ev(rest)
            end, els = self.end[i], self.els.get(i)
            if v:
                self.run(i + 1, els if els is not None else end)
            elif els is not None:
                self.run(els + 1, end)
        elif kw in _KINDS:
            words = _split(t, 40)
            if words == 41:
                self.fail("too many words")
            self.run_layer(kw, words)
        else:
            self.fail("unknown line '%s' (expected a layer kind or a keyword; see "
                      "doc/model-format.md)" % kw[:80])

    def run_repeat(self, i, rest):
        var, rng = self.name_eq_expr(rest, "repeat")
        dots = rng.find("..")
        if dots < 0:
            self.fail("expected 'repeat %s = FIRST..LAST'" % var)
        if _blen(rng[:dots]) >= 128:
            self.fail("range too long")
        lo = self.ev(rng[:dots])
        hi = self.ev(rng[dots + 2:])
        if hi - lo >= MAX_REPEAT:
            self.fail("repeat %s = %d..%d makes more than %d passes (the bound of one repeat)"
                      % (var, lo, hi, MAX_REPEAT))
        no = self.lines[i][0]
        for v in range(lo, hi + 1):
            self.line = no
            self.add_work(1)
            self.set_var(var, v)
            self.run(i + 1, self.end[i])

    def run_require(self, rest):
        q = rest.find('"')
        if q < 0 or len(rest) < 2 or not rest.endswith('"') or q == len(rest) - 1:
            self.fail("expected 'require EXPRESSION \"message\"'")
        expr, msg = rest[:q], rest[q + 1:-1]
        if _blen(expr) >= 256 or _blen(msg) + 1 >= 200:
            self.fail("require line too long")
        if not self.ev(expr):
            self.fail("requirement failed: %s" % msg)

    def run_input(self, rest):
        g = self.graph
        if g.input is not None:
            self.fail("a second 'input' line")
        if self.layers_seen:
            self.fail("'input' must come before the first layer")
        words = _split(rest, 4)
        if words == 5 or len(words) != 3:
            self.fail("expected 'input CHANNELS HEIGHT WIDTH'")
        chw = []
        for w in words:
            v = self.ev(w)
            if not 1 <= v <= MAX_DIM:
                self.fail("input size '%s' must be between 1 and %d" % (w, MAX_DIM))
            chw.append(v)
        if chw[0] * chw[1] * chw[2] > MAX_NUMEL:
            self.fail("input %dx%dx%d has %d elements per sample, more than %d (the engine's "
                      "bound on one tensor)" % (chw[0], chw[1], chw[2],
                                                chw[0] * chw[1] * chw[2], MAX_NUMEL))
        g.input = tuple(chw)

    # -- layers
    def run_layer(self, kind, words):
        g = self.graph
        if g.input is None:
            self.fail("the 'input' line must come before the first layer")
        if len(words) < 2:
            self.fail("expected '%s NAME [key=value ...]'" % words[0])
        self.layers_seen += 1
        if len(g.layers) == MAX_LAYERS:
            self.fail("more than %d layers" % MAX_LAYERS)
        ly = Layer(self.interp(words[1], LAYER_NAME_MAX, "layer name"), kind, self.line)
        if ly.name == "input":
            self.fail("'input' is the network input's name")
        e = self.table.get(ly.name)
        if e and not e[0]:
            self.fail("layer name '%s' is already used (line %d)" % (ly.name, e[2]))
        if e:
            self.fail("layer name '%s' is a label's (line %d); a layer and a label cannot share "
                      "a name" % (ly.name, e[2]))
        keys, inputs = {}, None
        for w in words[2:]:
            eq = w.find("=")
            if eq <= 0 or eq == len(w) - 1:
                self.fail("expected key=value, got '%s'" % w)
            k, v = w[:eq], w[eq + 1:]
            if k == "in":
                if inputs is not None:
                    self.fail("key 'in' given twice")
                inputs = []
                for nm in filter(None, v.split(",")):
                    nm = self.interp(nm, NAME_MAX, "input name")
                    j = -1 if nm == "input" else (self.table[nm][1] if nm in self.table else None)
                    if j is None:
                        self.fail("in=%s: no earlier layer or label is called '%s'" % (v, nm))
                    if len(inputs) == MAX_IN:
                        self.fail("in=%s: at most %d inputs" % (v[:200], MAX_IN))
                    inputs.append(j)
                if not inputs:
                    self.fail("in= names no layer")
                continue
            if k not in _KEY_ORDER:
                self.fail("unknown key '%s' (see doc/model-format.md)" % k)
            if k in keys:
                self.fail("key '%s' given twice" % k)
            if k in _WORD_KEYS:
                if v not in _WORD_KEYS[k]:
                    self.fail("%s=%s: expected %s" % (k[:60], v[:60], " or ".join(_WORD_KEYS[k])))
                keys[k] = v
            elif k in _REAL_KEYS:
                d = strtod(v)
                if d is None or d != d:
                    self.fail("%s=%s: expected a number" % (k, v))
                keys[k] = d
            else:
                keys[k] = self.ev(v)
        ly.inputs = inputs or [self.cur]
        self.resolve(ly, keys)
        g.layers.append(ly)
        self.cur = len(g.layers) - 1
        self.table[ly.name] = [False, self.cur, self.line]

    def who(self, j):
        if j < 0:
            return "the network input"
        ly = self.graph.layers[j]
        return "%s (line %d)" % (ly.name, ly.line)

    def resolve(self, ly, keys):
        """Keys, shapes and costs of one layer, as src/graph/shape.c."""
        g, kind, name = self.graph, ly.kind, ly.name
        allowed, n_in = _KINDS[kind]
        given = set(keys)
        pre = "%s %s" % (kind, name)
        for k in _KEY_ORDER:
            if k in keys and k not in allowed:
                self.fail("%s: key '%s' does not apply to %s layers" % (pre, k, kind))
        if isinstance(n_in, tuple):
            if not n_in[0] <= len(ly.inputs) <= n_in[1]:
                self.fail("%s reads 2 to %d inputs, in= names %d" % (pre, MAX_IN, len(ly.inputs)))
        elif len(ly.inputs) != n_in:
            self.fail("%s reads %d input%s, in= names %d"
                      % (pre, n_in, "" if n_in == 1 else "s", len(ly.inputs)))
        ly.in_dims = [g.input if j < 0 else g.layers[j].out_dim for j in ly.inputs]
        x = ly.in_dims[0]
        c, h, w = x

        def dims(d):
            return "%dx%dx%d" % tuple(d)

        def int_key(k, lo, hi, default):
            if k not in keys:
                if default < lo:
                    self.fail("%s: key '%s' is required" % (pre, k))
                keys[k] = default
            elif not lo <= keys[k] <= hi:
                self.fail("%s: %s=%d, expected %d..%d" % (pre, k, keys[k], lo, hi))
            return keys[k]

        def window(k, s, p, dil):
            span = (k - 1) * dil + 1
            if span > h + 2 * p or span > w + 2 * p:
                self.fail("%s: kernel %d (spanning %d) is larger than its padded input (%s from "
                          "%s, padding %d)" % (pre, k, span, dims(x), self.who(ly.inputs[0]), p))
            oh, ow = (h + 2 * p - span) // s + 1, (w + 2 * p - span) // s + 1
            if oh > MAX_DIM or ow > MAX_DIM:
                self.fail("%s: its output plane %dx%d is larger than %d in a dimension"
                          % (pre, oh, ow, MAX_DIM))
            return oh, ow

        out = x
        if kind == "conv2d":
            int_key("out", 1, 1 << 20, 0)
            int_key("k", 1, 1024, 0)
            int_key("stride", 1, 1024, 1)
            int_key("pad", 0, 1024, 0)
            int_key("bias", 0, 1, 1)
            int_key("in_channels", 1, 1 << 20, c)
            int_key("groups", 1, 1 << 20, 1)
            int_key("dilation", 1, 1024, 1)
            if keys["in_channels"] != c:
                self.fail("conv2d %s expects %d input channels, but %s gives %d"
                          % (name, keys["in_channels"], self.who(ly.inputs[0]), c))
            grp, o = keys["groups"], keys["out"]
            if c % grp or o % grp:
                self.fail("conv2d %s: groups=%d must divide its %d input and %d output channels"
                          % (name, grp, c, o))
            oh, ow = window(keys["k"], keys["stride"], keys["pad"], keys["dilation"])
            out = (o, oh, ow)
            ly.weights = o * (c // grp) * keys["k"] ** 2
            if ly.weights > MAX_NUMEL:
                self.fail("conv2d %s: its weight tensor %dx%dx%dx%d has more than %d elements "
                          "(the engine's bound on one tensor)"
                          % (name, o, c // grp, keys["k"], keys["k"], MAX_NUMEL))
            ly.params = ly.weights + (o if keys["bias"] else 0)
            ly.macs = oh * ow * ly.weights
        elif kind == "linear":
            f = c * h * w
            if h != 1 or w != 1:
                self.fail("linear %s reads features, but %s gives %s (put a flatten before it)"
                          % (name, self.who(ly.inputs[0]), dims(x)))
            int_key("out", 1, 1 << 24, 0)
            int_key("bias", 0, 1, 1)
            int_key("in_features", 1, (1 << 31) - 1, f)
            if keys["in_features"] != f:
                self.fail("linear %s expects %d input features, but %s gives %d"
                          % (name, keys["in_features"], self.who(ly.inputs[0]), f))
            out = (keys["out"], 1, 1)
            ly.weights = f * keys["out"]
            if ly.weights > MAX_NUMEL:
                self.fail("linear %s: its weight tensor %dx%d has more than %d elements (the "
                          "engine's bound on one tensor)" % (name, keys["out"], f, MAX_NUMEL))
            ly.params = ly.weights + (keys["out"] if keys["bias"] else 0)
            ly.macs = ly.weights
        elif kind in ("relu", "relu6", "sigmoid", "hardswish", "tanh", "gelu"):
            if kind == "gelu":
                keys.setdefault("approximate", "none")
            ly.elementwise = c * h * w
        elif kind in ("maxpool2d", "avgpool2d"):
            glob = 0
            if kind == "avgpool2d":
                glob = int_key("global", 0, 1, 0)
                int_key("count_include_pad", 0, 1, 1)
            if glob:
                if {"k", "stride", "pad", "count_include_pad"} & given:
                    self.fail("avgpool2d %s: global=1 takes no k, stride, pad or "
                              "count_include_pad" % name)
                out = (c, 1, 1)
                keys["k"], keys["stride"], keys["pad"] = 0, 1, 0
                ly.elementwise = c * h * w
            else:
                k = int_key("k", 1, 1024, 0)
                s = int_key("stride", 1, 1024, k)
                p = int_key("pad", 0, 1024, 0)
                if p > k // 2:
                    self.fail("%s: pad=%d is more than half the kernel (k=%d): pools pad by at "
                              "most k/2 = %d, as PyTorch" % (pre, p, k, k // 2))
                oh, ow = window(k, s, p, 1)
                out = (c, oh, ow)
                ly.elementwise = c * _axis_reads(h, oh, k, s, p) * _axis_reads(w, ow, k, s, p)
        elif kind == "batchnorm2d":
            eps = keys.setdefault("eps", 1e-5)
            mom = keys.setdefault("momentum", 0.1)
            if not (0 < eps < 1) or not _FLT_MIN <= _f32(eps) < 1:
                self.fail("batchnorm2d %s: eps=%s, expected %s <= eps < 1 in single precision "
                          "(the engine's)" % (name, _g(eps), _g(_FLT_MIN)))
            if not 0 <= mom <= 1:
                self.fail("batchnorm2d %s: momentum=%s, expected 0 <= momentum <= 1"
                          % (name, _g(mom)))
            ly.params = 2 * c
            ly.elementwise = c * h * w
        elif kind == "dropout":
            p = keys.setdefault("p", 0.5)
            if not 0 <= p < 1:
                self.fail("dropout %s: p=%s, expected 0 <= p < 1" % (name, _g(p)))
            if _f32(p) >= 1:
                self.fail("dropout %s: p=%r rounds to 1 in single precision (the engine's), "
                          "expected 0 <= p <= 0.99999994 (the float below 1)" % (name, p))
            ly.elementwise = c * h * w
        elif kind == "concat":
            for j, d in zip(ly.inputs, ly.in_dims):
                if d[1:] != x[1:]:
                    self.fail("concat %s: %s gives %s but %s gives %s (the planes must be equal)"
                              % (name, self.who(ly.inputs[0]), dims(x), self.who(j), dims(d)))
            total = sum(d[0] for d in ly.in_dims)
            if total > 1 << 30:
                self.fail("concat %s: %d channels" % (name, total))
            out = (total, h, w)
        elif kind == "flatten":
            out = (c * h * w, 1, 1)
        elif kind == "add":
            if ly.in_dims[0] != ly.in_dims[1]:
                self.fail("add %s: %s gives %s but %s gives %s (the shapes must be equal)"
                          % (name, self.who(ly.inputs[0]), dims(ly.in_dims[0]),
                             self.who(ly.inputs[1]), dims(ly.in_dims[1])))
            ly.elementwise = c * h * w
        if max(ly.macs, ly.elementwise) > _I64[1]:
            self.fail("%s: its operation count overflows 64 bits" % pre)
        if out[1] > MAX_DIM or out[2] > MAX_DIM:
            self.fail("%s: its output plane %dx%d is larger than %d in a dimension"
                      % (pre, out[1], out[2], MAX_DIM))
        if out[0] * out[1] * out[2] > MAX_NUMEL:
            self.fail("%s: its output %s has %d elements per sample, more than %d (the engine's "
                      "bound on one tensor)" % (pre, dims(out), out[0] * out[1] * out[2],
                                                MAX_NUMEL))
        ly.out_dim, ly.keys = tuple(out), keys
        ly.unit = -1
        if kind in ("conv2d", "linear"):
            ly.unit = self.n_units
            self.n_units += 1

    def check_output(self):
        g = self.graph
        if not g.layers:
            raise ValueError("%s: describes no layer" % self.file)
        last = g.layers[-1]
        if last.out_dim != (g.classes, 1, 1):
            self.fail("the last layer, %s, gives %dx%dx%d, but the network must end in %d class "
                      "scores (out=classes)" % ((last.name,) + last.out_dim + (g.classes,)),
                      last.line)
        if not any(ly.kind in ("conv2d", "linear") for ly in g.layers):
            raise ValueError("%s: has no conv2d or linear layer (no precision unit)" % self.file)
        params = macs = 0
        for ly in g.layers:
            params += ly.params
            macs += ly.macs
            if params > _I64[1] or macs > _I64[1]:
                self.fail("%s %s: the network's total parameters or MACs overflow 64 bits"
                          % (ly.kind, ly.name), ly.line)


def _g(x):
    """x as C's %g prints it."""
    return "%g" % x


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

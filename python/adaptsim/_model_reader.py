"""adaptsim._model_reader: the reader behind :func:`adaptsim.model.parse`: a description's text
(doc/model-format.md) run line by line as the simulator's reader (src/graph) runs it, into a
resolved :class:`adaptsim.model.Graph`, refusing what it refuses with the same messages.
Private: use :mod:`adaptsim.model`.
"""

import re

from .model import (LAYER_NAME_MAX, MAX_ARGS_LEN, MAX_DEPTH, MAX_DIM, MAX_IN, MAX_LABELS,
                    MAX_LAYERS, MAX_LINE, MAX_NUMEL, MAX_REPEAT, MAX_VARS, MAX_WORK, NAME_MAX,
                    _FLT_MIN, _I64, _IDENT, _KEY_ORDER, _KINDS, _REAL_KEYS, _WORD_KEYS, Graph,
                    Layer, _blen, _f32, evaluate, strtod)


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

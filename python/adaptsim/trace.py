"""adaptsim.trace: reads adapt-sim's JSON-lines run traces (schema 1).

A trace is one JSON object per line, in this order: one ``header``, then
``step`` lines (every ``run.log_every`` optimizer steps) and ``epoch`` lines,
at most one ``test`` line and an ``end`` line. Numbers that were not finite
are written as ``null`` and read here as NaN. Optional per-unit fields that a
policy does not record read as NaN (``lb``, ``sparsity``, ``act_sat``) or -1 (``r``,
``sat``, ``flush``), the same "absent" values as the C reader.

    >>> t = read_trace("runs/quickstart/trace.jsonl")
    >>> t.epochs.val_acc            # numpy array, one value per epoch
    >>> t.steps.wl[:, 0]            # word length of the first unit at each logged step
    >>> t.unit_names                # ["0", "3", ...], the columns of t.steps.wl
    >>> [e for e in t.events if e.kind == "pd"]

Errors are :class:`TraceError` and name the file and line, as in
``runs/x/trace.jsonl:12: step record: field "loss" must be a number or null``.
Unknown fields are ignored (fields may be added within schema 1); another
schema version is refused.

The reader accepts what the C reader (src/trace/read*.c) accepts, with the same bounds
(src/trace/trace.h, doc/trace.schema.json): lines of at most 4 MiB (a longer one is refused
without being read whole), at most 64 nested arrays and objects, no duplicate field, finite
numbers and 64-bit integers only; step numbers 1..2^53 and increasing; epoch numbers
0..99999, never decreasing over the step records and increasing over the epoch records;
word lengths 1..32 and fractional lengths 0..32; accuracies and sparsities in [0, 1];
wall times >= 0.
"""

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

SCHEMA = 1
LINE_MAX = 4 << 20        # bytes of a line, its newline excepted (ADAPT_TRACE_LINE_MAX)
DEPTH_MAX = 64            # nested arrays and objects in a line (ADAPT_TRACE_DEPTH_MAX)
STEP_MAX = 1 << 53        # step numbers (ADAPT_TRACE_STEP_MAX)
EPOCH_MAX = 100000        # epochs of a run; epoch numbers are below it (ADAPT_TRACE_EPOCH_MAX)
INT_MAX = (1 << 31) - 1
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1
RECORD_TYPES = ("header", "sample", "step", "epoch", "test", "end")
STRATEGIES = ("min", "mean", "max")
EVENT_KINDS = ("pd", "pu")
END_STATUSES = ("ok", "stopped")

# Per-unit step fields: name -> (numpy dtype, value when absent, optional).
UNIT_FIELDS = {
    "wl": (np.int32, None, False),
    "fl": (np.int32, None, False),
    "lb": (np.float64, math.nan, True),
    "r": (np.int32, -1, True),
    "sparsity": (np.float64, math.nan, True),
    "sat": (np.int64, -1, True),
    "flush": (np.int64, -1, True),
    "act_sat": (np.float64, math.nan, True),
}
EPOCH_FIELDS = ("lr", "train_loss", "train_acc", "val_loss", "val_acc", "wall_s",
                "images_per_s")


class TraceError(ValueError):
    """A trace that cannot be read: ``path`` and ``line`` (1-based, 0 = whole file)."""

    def __init__(self, path, line, message):
        self.path = path
        self.line = line
        where = "%s:%d" % (path, line) if line else str(path)
        super().__init__("%s: %s" % (where, message))


class Table:
    """Columns of equal length as numpy arrays, reachable as attributes or by name.

    >>> t.epochs.columns          # ("epoch", "step", "lr", ...)
    >>> t.epochs["val_acc"][-1]
    """

    def __init__(self, columns: Dict[str, np.ndarray]):
        self._cols = dict(columns)

    @property
    def columns(self) -> Tuple[str, ...]:
        return tuple(self._cols)

    def __getattr__(self, name):
        cols = self.__dict__.get("_cols", {})
        if name in cols:
            return cols[name]
        raise AttributeError("no column %r (columns: %s)" % (name, ", ".join(cols)))

    def __getitem__(self, name):
        return self._cols[name]

    def __contains__(self, name):
        return name in self._cols

    def __len__(self):
        return len(next(iter(self._cols.values()))) if self._cols else 0

    def as_dict(self) -> Dict[str, np.ndarray]:
        """The columns (a pandas.DataFrame takes this directly when all are 1-D)."""
        return dict(self._cols)

    def __repr__(self):
        return "Table(%d rows: %s)" % (len(self), ", ".join(self._cols))


@dataclass
class Event:
    """A push-down ("pd") or push-up ("pu") of one precision unit at a logged step."""
    step: int
    epoch: int
    unit: int
    kind: str
    before: Tuple[int, int]  # (WL, FL)
    after: Tuple[int, int]
    bisect_steps: int = -1   # pd: bisection steps; -1 when absent
    kl_evals: int = -1       # pd: KL evaluations
    sample: int = -1         # pd: elements tested per evaluation
    s: int = -1              # pu: FL increase


@dataclass
class Sample:
    """A plan the comp policy's search sampled before training (policy overhead)."""
    stage: int               # 1: an epoch (or comp_sample_steps steps); 2: one batch
    plan: str                # one digit per layer
    steps: int
    samples: int
    loss: float
    cost: float              # the price the search compared (one optimizer step)
    safe: bool
    chosen: bool
    wl: Tuple[int, ...]      # per unit, 32 = float32
    gov: Tuple[int, ...]     # per layer: the unit whose format it rounds in, -1 float32


@dataclass
class Test:
    epoch: int
    test_loss: float
    test_acc: float


@dataclass
class End:
    status: str              # "ok" or "stopped"
    wall_s: float


@dataclass
class Trace:
    """A whole trace. ``header`` is the header record as a dict (config, model, units...)."""
    path: str
    header: Dict[str, Any]
    steps: Table
    epochs: Table
    events: List[Event]
    test: Optional[Test]
    end: Optional[End]
    truncated: bool = False  # an incomplete last line was skipped (partial=True)
    n_lines: int = 0
    samples: List[Sample] = field(default_factory=list)  # comp's search, before the steps

    @property
    def policy(self) -> str:
        return self.header["policy"]

    @property
    def unit_names(self) -> List[str]:
        return [u["name"] for u in self.header["units"]]

    @property
    def config(self) -> Dict[str, Dict[str, Any]]:
        return self.header["config"]

    @property
    def layer_precision(self) -> Optional[Dict[str, str]]:
        """Each layer's resolved precision ("float32" or a format such as "fp16") by layer
        name, from a run with graph precision propagation; None for other runs and traces
        written before the field existed."""
        layers = self.header["model"]["layers"]
        if not any("precision" in ly for ly in layers):
            return None
        return {ly["name"]: ly.get("precision", "float32") for ly in layers}

    @property
    def finished(self) -> bool:
        return self.end is not None and self.end.status == "ok"

    def events_table(self) -> Table:
        """The events as columns (before/after as (n, 2) arrays)."""
        ev = self.events
        cols = {k: np.array([getattr(e, k) for e in ev], dtype=np.int64)
                for k in ("step", "epoch", "unit", "bisect_steps", "kl_evals", "sample", "s")}
        cols["kind"] = np.array([e.kind for e in ev], dtype="<U2")
        cols["before"] = np.array([e.before for e in ev], dtype=np.int32).reshape(-1, 2)
        cols["after"] = np.array([e.after for e in ev], dtype=np.int32).reshape(-1, 2)
        return Table(cols)


class _Reader:
    """Field checks of one record; messages as the C reader's."""

    def __init__(self, path):
        self.path = path
        self.line = 0
        self.rec = ""

    def fail(self, msg):
        raise TraceError(self.path, self.line, "%s record: %s" % (self.rec, msg))

    def get(self, o, key, optional=False):
        if key not in o:
            if optional:
                return None
            self.fail('field "%s" is missing' % key)
        return o[key]

    def int(self, o, key, optional=False, absent=-1, lo=-(1 << 63), hi=(1 << 63) - 1):
        v = self.get(o, key, optional)
        if v is None and optional and key not in o:
            return absent
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail('field "%s" must be an integer' % key)
        if v < lo or v > hi:
            self.fail('field "%s" = %d is out of range [%d, %d]' % (key, v, lo, hi))
        return v

    def num(self, o, key, optional=False, nullable=True, lo=-math.inf, hi=math.inf):
        v = self.get(o, key, optional)
        if v is None and (nullable or key not in o):
            return math.nan
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail('field "%s" must be a number%s' % (key, " or null" if nullable else ""))
        x = float(v)
        if not lo <= x <= hi:
            if hi == math.inf:
                self.fail('field "%s" = %g is out of range: expected >= %g' % (key, x, lo))
            self.fail('field "%s" = %g is out of range [%g, %g]' % (key, x, lo, hi))
        return x

    def fraction(self, o, key, optional=False):
        return self.num(o, key, optional, lo=0.0, hi=1.0)

    def str(self, o, key, nullable=False):
        v = self.get(o, key, nullable)
        if v is None and nullable:
            return None
        if not isinstance(v, str):
            self.fail('field "%s" must be a string%s' % (key, " or null" if nullable else ""))
        return v

    def typed(self, o, key, typ, optional=False):
        v = self.get(o, key, optional)
        if v is not None and not isinstance(v, typ):
            self.fail('field "%s" must be %s' % (key, "an array" if typ is list else "an object"))
        return v

    def ints(self, o, key, n_max, exact=False, lo=I64_MIN, hi=I64_MAX):
        a = self.typed(o, key, list)
        if not a or len(a) > n_max or (exact and len(a) != n_max):
            self.fail('field "%s" must hold %s%d integers' % (key, "" if exact else "1 to ", n_max))
        for i, v in enumerate(a):
            if isinstance(v, bool) or not isinstance(v, int):
                self.fail('field "%s" must hold integers' % key)
            if not lo <= v <= hi:
                self.fail('field "%s"[%d] = %d is out of range [%d, %d]' % (key, i, v, lo, hi))
        return tuple(a)

    def format(self, o, key):
        """A [WL, FL] pair: WL 1..32, FL 0..32 (quant's fixed(WL,FL))."""
        wl, fl = self.ints(o, key, 2, exact=True, lo=0, hi=32)
        if wl < 1:
            self.fail('field "%s" = [%d, %d]: the word length must be in [1, 32]' % (key, wl, fl))
        return wl, fl

    def enum(self, o, key, names, nullable=False):
        v = self.get(o, key)
        if v is None and nullable:
            return None
        if v not in names:
            self.fail('field "%s" has an unknown value %s (expected %s)'
                      % (key, json.dumps(v), ", ".join(names + (("null",) if nullable else ()))))
        return v


def _check_header(r, o):
    schema = r.int(o, "schema")
    if schema != SCHEMA:
        r.fail("unknown schema version %d (this reader knows version %d)" % (schema, SCHEMA))
    for k in ("program", "version", "created", "policy"):
        r.str(o, k)
    r.int(o, "seed")
    r.int(o, "threads", lo=-(1 << 31), hi=(1 << 31) - 1)
    if r.int(o, "sr_bits", optional=True, absent=32, lo=16, hi=32) not in (16, 32):
        r.fail('field "sr_bits" must be 16 or 32')
    b = r.typed(o, "build", dict, optional=True)  # absent before traces recorded their machine
    if b is not None:
        for k in ("commit", "compiler", "cpu", "isa", "blas", "device"):
            r.str(b, k)
    r.typed(o, "config", dict)
    r.str(o, "config_file", nullable=True)
    ov = r.typed(o, "overrides", list, optional=True)
    if ov is not None and not all(isinstance(s, str) for s in ov):
        r.fail('field "overrides" must hold strings')
    ds = r.typed(o, "dataset", dict)
    r.str(ds, "name")
    for k in ("train", "val", "test", "classes"):
        r.int(ds, k, lo=0)
    m = r.typed(o, "model", dict)
    r.str(m, "name")
    r.ints(m, "input", 3, exact=True, lo=1, hi=INT_MAX)
    for k in ("classes", "params", "macs"):
        r.int(m, k, lo=0)
    layers = r.typed(m, "layers", list)
    for ly in layers:
        if not isinstance(ly, dict):
            r.fail("model.layers entries must be objects")
        r.str(ly, "name")
        r.str(ly, "kind")
        r.ints(ly, "in", 4, lo=0)
        r.ints(ly, "out", 4, lo=0)
        for k in ("params", "macs", "elementwise"):
            r.int(ly, k, lo=0)
        r.int(ly, "unit", lo=-1)
        for k in ("k", "stride", "pad"):
            r.int(ly, k, optional=True, absent=0, lo=0)
        for k in ("groups", "dilation"):  # conv2d, written only when not 1
            r.int(ly, k, optional=True, absent=1, lo=1)
        # graph precision propagation only: the set, its source and the resolved precision
        if "graph_set" in ly:
            r.enum(ly, "graph_set", ("allow", "infer", "deny"))
        if "graph_source" in ly:
            r.enum(ly, "graph_source", ("preset", "kind", "layer"))
        if "precision" in ly or "precision_unit" in ly:
            prec = r.str(ly, "precision")
            pu = r.int(ly, "precision_unit", lo=-1, hi=(1 << 31) - 1)
            if (pu < 0) != (prec == "float32"):
                r.fail('model.layers["%s"]: precision %s with precision_unit %d (-1 is '
                       'float32, and only it)' % (ly["name"], prec, pu))
    units = r.typed(o, "units", list)
    for u in units:
        if not isinstance(u, dict):
            r.fail("units entries must be objects")
        r.str(u, "name")
        r.int(u, "layer", lo=0, hi=len(layers) - 1)
        r.int(u, "weights", lo=0)
        r.int(u, "macs", lo=0)
    for ly in layers:
        if ly.get("precision_unit", -1) >= len(units):
            r.fail('model.layers["%s"]: precision_unit %d is not a unit (%d units)'
                   % (ly["name"], ly["precision_unit"], len(units)))


class _Steps:
    """Step columns collected line by line."""

    def __init__(self, n_units):
        self.n_units = n_units
        self.scalars = {k: [] for k in ("step", "epoch", "lr", "loss", "strategy", "accum",
                                        "overflow")}
        self.units = {k: [] for k in UNIT_FIELDS}
        self.lines = []  # file line of each step record

    def add(self, r, o, events):
        sc = self.scalars
        step = r.int(o, "step", lo=1, hi=STEP_MAX)
        epoch = r.int(o, "epoch", lo=0, hi=EPOCH_MAX - 1)
        sc["step"].append(step)
        sc["epoch"].append(epoch)
        sc["lr"].append(r.num(o, "lr", lo=0.0))
        sc["loss"].append(r.num(o, "loss"))
        sc["strategy"].append(r.enum(o, "strategy", STRATEGIES, nullable=True))
        sc["accum"].append(r.int(o, "accum", optional=True, absent=0, lo=0))
        ov = r.get(o, "overflow", optional=True)
        if ov is not None and not isinstance(ov, bool):
            r.fail('field "overflow" must be true or false')
        sc["overflow"].append(bool(ov))
        units = r.typed(o, "units", list)
        if len(units) != self.n_units:
            r.fail("%d units, but the header lists %d" % (len(units), self.n_units))
        row = {k: [] for k in UNIT_FIELDS}
        for u in units:
            if not isinstance(u, dict):
                r.fail("units entries must be objects")
            row["wl"].append(r.int(u, "wl", lo=1, hi=32))
            row["fl"].append(r.int(u, "fl", lo=0, hi=32))
            row["lb"].append(r.num(u, "lb", optional=True))
            row["r"].append(r.int(u, "r", optional=True, absent=-1, lo=0))
            row["sparsity"].append(r.fraction(u, "sparsity", optional=True))
            row["sat"].append(r.int(u, "sat", optional=True, absent=-1, lo=0))
            row["flush"].append(r.int(u, "flush", optional=True, absent=-1, lo=0))
            row["act_sat"].append(r.fraction(u, "act_sat", optional=True))
        for k, v in row.items():
            self.units[k].append(v)
        evs = r.typed(o, "events", list, optional=True) or []
        for e in evs:
            if not isinstance(e, dict):
                r.fail("events entries must be objects")
            events.append(Event(
                step=step, epoch=epoch,
                unit=r.int(e, "unit", lo=0, hi=self.n_units - 1),
                kind=r.enum(e, "kind", EVENT_KINDS),
                before=r.format(e, "before"),
                after=r.format(e, "after"),
                bisect_steps=r.int(e, "bisect_steps", optional=True, lo=0),
                kl_evals=r.int(e, "kl_evals", optional=True, lo=0),
                sample=r.int(e, "sample", optional=True, lo=0),
                s=r.int(e, "s", optional=True)))
        if len(sc["step"]) > 1:
            prev, prev_epoch, prev_line = sc["step"][-2], sc["epoch"][-2], self.lines[-1]
            if step <= prev:
                r.fail("step %d does not follow step %d (line %d): step numbers increase"
                       % (step, prev, prev_line))
            if epoch < prev_epoch:
                r.fail("epoch %d is before epoch %d of step %d (line %d): epoch numbers do not "
                       "decrease" % (epoch, prev_epoch, prev, prev_line))
        self.lines.append(r.line)

    def table(self):
        sc = self.scalars
        n = len(sc["step"])
        cols = {
            "step": np.array(sc["step"], dtype=np.int64),
            "epoch": np.array(sc["epoch"], dtype=np.int64),
            "lr": np.array(sc["lr"], dtype=np.float64),
            "loss": np.array(sc["loss"], dtype=np.float64),
            "strategy": np.array(sc["strategy"], dtype=object),
            "accum": np.array(sc["accum"], dtype=np.int64),
            "overflow": np.array(sc["overflow"], dtype=bool),
        }
        for k, (dt, _, _) in UNIT_FIELDS.items():
            cols[k] = np.array(self.units[k], dtype=dt).reshape(n, self.n_units)
        return Table(cols)


def _lines(f, path):
    """Yields (line number, bytes) for each line of f, its newline included; a line longer than
    LINE_MAX bytes (newline excepted) is refused after reading LINE_MAX + 2 bytes of it."""
    no = 0
    while True:
        raw = f.readline(LINE_MAX + 2)
        if not raw:
            return
        no += 1
        if len(raw) > LINE_MAX + 1:
            raise TraceError(path, no, "line longer than %d bytes: not a trace record" % LINE_MAX)
        yield no, raw


# what the nesting scan looks at: quotes, backslashes and brackets
_SCANNED = re.compile(rb'["\\\[\]{}]')


def _nested_deeper(raw, limit=DEPTH_MAX):
    """Whether the JSON text nests more than limit arrays and objects, scanned as the C reader
    scans it (brackets in strings do not count; a backslash in a string hides the next byte;
    malformed text is left to the parser). Linear in the line's length."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth, in_string, hidden = 0, False, -1
    for m in _SCANNED.finditer(raw):
        i = m.start()
        if i == hidden:
            continue
        c = raw[i]
        if in_string:
            if c == 0x5C:  # backslash
                hidden = i + 1
            elif c == 0x22:
                in_string = False
        elif c == 0x22:
            in_string = True
        elif c in b"[{":
            depth += 1
            if depth > limit:
                return True
        elif c in b"]}":
            depth -= 1
    return False


def _finite(text):
    v = float(text)
    if not math.isfinite(v):
        raise ValueError("number %s is not finite (the trace writes null for non-finite numbers)"
                         % text)
    return v


def _int64(text):
    v = int(text)
    if not I64_MIN <= v <= I64_MAX:
        raise ValueError("integer %s does not fit 64 bits" % text)
    return v


def _no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError('duplicate field "%s"' % k)
        d[k] = v
    return d


def _parse(raw, path, line):
    """One line's JSON as the C reader parses it (jansson with JSON_REJECT_DUPLICATES): finite
    numbers, 64-bit integers, no duplicate field, at most DEPTH_MAX nested arrays and objects.
    Every problem is a TraceError naming path and line."""
    if _nested_deeper(raw):
        raise TraceError(path, line, "JSON nested deeper than %d arrays and objects: not a "
                         "trace record" % DEPTH_MAX)
    try:
        return json.loads(raw, parse_float=_finite, parse_int=_int64,
                          parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise TraceError(path, line, "malformed JSON: %s" % e) from None


def iter_records(path):
    """Yields (line number, record dict) for each complete line, parsing JSON only.

    No field checks: for quick looks or tools that tolerate any schema. The JSON is checked
    as read_trace checks it (line length, nesting, finite numbers).
    """
    with open(path, "rb") as f:
        for i, raw in _lines(f, path):
            if not raw.endswith(b"\n"):
                raise TraceError(path, i, "truncated trace: the last line is incomplete")
            rec = _parse(raw, path, i)
            yield i, rec


def read_trace(path, partial=False) -> Trace:
    """Reads a whole trace (a path to ``trace.jsonl`` or to a run directory).

    ``partial=True`` accepts an incomplete last line (a run still writing, or
    killed): it is skipped and ``truncated`` is set, instead of an error.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "trace.jsonl")
    r = _Reader(path)
    header = None
    steps = None
    epochs = {k: [] for k in ("epoch", "step", "line") + EPOCH_FIELDS}
    events: List[Event] = []
    samples: List[Sample] = []
    test = end = None
    truncated = False
    n_lines = 0
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TraceError(path, 0, "cannot open the trace: %s" % e.strerror) from None
    with f:
        for r.line, raw in _lines(f, path):
            r.rec = ""
            if not raw.endswith(b"\n"):
                if partial:
                    truncated = True
                    break
                raise TraceError(path, r.line, "truncated trace: the last line is incomplete "
                                 "(no newline; the run stopped while writing it)")
            if end is not None:
                raise TraceError(path, r.line, "record after the end record")
            o = _parse(raw, path, r.line)
            typ = o.get("type") if isinstance(o, dict) else None
            if not isinstance(typ, str):
                raise TraceError(path, r.line,
                                 'not a trace record (an object with a "type" string)')
            r.rec = typ
            if r.line == 1 and typ != "header":
                raise TraceError(path, 1, "missing header: the first line is a %s record" % typ)
            if typ == "header":
                if r.line != 1:
                    r.fail("a second header")
                _check_header(r, o)
                header = o
                steps = _Steps(len(o["units"]))
            elif typ == "sample":
                samples.append(_sample(r, o, header, len(steps.scalars["step"]),
                                       len(epochs["epoch"])))
            elif typ == "step":
                steps.add(r, o, events)
            elif typ == "epoch":
                _epoch(r, o, epochs)
            elif typ == "test":
                if test is not None:
                    r.fail("a second test record")
                test = Test(r.int(o, "epoch", lo=0, hi=EPOCH_MAX), r.num(o, "test_loss"),
                            r.fraction(o, "test_acc"))
            elif typ == "end":
                end = End(r.enum(o, "status", END_STATUSES),
                          r.num(o, "wall_s", nullable=False, lo=0.0))
            else:
                r.fail("unknown record type (expected one of %s)" % ", ".join(RECORD_TYPES))
            n_lines = r.line
    if header is None:
        raise TraceError(path, 0, "missing header: the trace is empty")
    ep = {k: np.array(v, dtype=np.int64 if k in ("epoch", "step") else np.float64)
          for k, v in epochs.items() if k != "line"}
    return Trace(path=path, header=header, steps=steps.table(), epochs=Table(ep),
                 events=events, test=test, end=end, truncated=truncated, n_lines=n_lines,
                 samples=samples)


def _epoch(r, o, epochs):
    """Appends an epoch record to the columns, checking that it follows the previous one."""
    epoch = r.int(o, "epoch", lo=0, hi=EPOCH_MAX - 1)
    step = r.int(o, "step", lo=1, hi=STEP_MAX)
    row = {"lr": r.num(o, "lr", lo=0.0), "train_loss": r.num(o, "train_loss"),
           "train_acc": r.fraction(o, "train_acc"), "val_loss": r.num(o, "val_loss"),
           "val_acc": r.fraction(o, "val_acc"),
           "wall_s": r.num(o, "wall_s", nullable=False, lo=0.0),
           "images_per_s": r.num(o, "images_per_s", lo=0.0)}
    if epochs["epoch"]:
        prev, prev_step, prev_line = epochs["epoch"][-1], epochs["step"][-1], epochs["line"][-1]
        if epoch <= prev:
            r.fail("epoch %d does not follow epoch %d (line %d): epoch numbers increase"
                   % (epoch, prev, prev_line))
        if step <= prev_step:
            r.fail("step %d does not follow step %d of epoch %d (line %d): each epoch trains at "
                   "least one step" % (step, prev_step, prev, prev_line))
    epochs["epoch"].append(epoch)
    epochs["step"].append(step)
    epochs["line"].append(r.line)
    for k in EPOCH_FIELDS:
        epochs[k].append(row[k])


def _sample(r, o, header, n_steps, n_epochs):
    if n_steps or n_epochs:
        r.fail("a sample record after the first step or epoch record")
    n_units, n_layers = len(header["units"]), len(header["model"]["layers"])
    plan = r.str(o, "plan")
    if len(plan) != n_layers:
        r.fail('plan "%s" has %d digits, the model %d layers' % (plan, len(plan), n_layers))
    for k in ("safe", "chosen"):
        if not isinstance(o.get(k), bool):
            r.fail('field "%s" must be true or false' % k)

    def ints(key, n, lo, hi):
        v = r.typed(o, key, list)
        if len(v) != n or not all(isinstance(x, int) and not isinstance(x, bool)
                                  and lo <= x <= hi for x in v):
            r.fail('field "%s" must hold %d integers in [%d, %d]' % (key, n, lo, hi))
        return tuple(v)
    return Sample(r.int(o, "stage", lo=1, hi=2), plan, r.int(o, "steps", lo=0, hi=STEP_MAX),
                  r.int(o, "samples", lo=0), r.num(o, "loss"), r.num(o, "cost"),
                  o["safe"], o["chosen"], ints("wl", n_units, 1, 32),
                  ints("gov", n_layers, -1, n_units - 1))


def _reject_constant(name):
    # NaN / Infinity are not JSON; the writer puts null in their place.
    raise ValueError("%s is not JSON (the trace writes null for non-finite numbers)" % name)

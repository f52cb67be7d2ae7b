"""Round float32 arrays to adapt-sim's number formats with its own C kernels.

    >>> import numpy as np, adaptsim
    >>> x = np.array([0.03125, 0.09375, 7.99, -9.0, np.nan], dtype=np.float32)
    >>> adaptsim.quantize(x, "fixed(8,4)")                  # nearest, ties to even
    array([ 0.    ,  0.125 ,  7.9375, -8.    ,     nan], dtype=float32)
    >>> y, st = adaptsim.quantize(x, "e4m3", mode="stochastic", seed=7, offset=0, stats=True)
    >>> y, st
    (array([ 0.03125,  0.09375,  8.     , -9.     ,      nan], dtype=float32),
     QuantStats(saturated=0, flushed=0, zeros=0))

The rounding is src/quant's quant_rows, loaded with ctypes from the shared object
``_libadaptquant.so`` that ``make`` builds beside this package (python/adaptsim/) and ``make
install`` puts in $(pkglibdir) (PREFIX/lib/adapt-sim). It is looked for, in order: the file named
by the environment variable ADAPTSIM_LIB, this package's folder, then PREFIX/lib/adapt-sim for
the PREFIX of the adapt-train found on PATH, of this Python (sys.prefix), /usr/local and /usr.

Formats: every text a configuration accepts for a format (doc/numerics.md, src/quant/quant.h):
fixed(WL,FL), bfp(WL), muppet(WL), fp16, bf16, float(E,M[,bias=B,nan=ieee|fn|none,sub=0|1,
ovf=sat|inf]), e4m3, e5m2, mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8,
plugin(PATH[:NAME]), and the names registered with :func:`define_format` or
:func:`load_formats` (a configuration's ``[format NAME]`` sections).

Random bits (stochastic rounding) are Philox4x32-10 keyed by (seed, stream, index), as in
src/base/rng.h: element i of the array (row-major) uses value number ``offset + i`` of (``seed``,
``stream``), i.e. key.seed = seed, key.stream = stream, key.index = offset. ``stream`` defaults
to ADAPT_STREAM_QUANT (16), the stream of a plain tensor rounding (quant.h's example with tensor
id 0); adapt-train's own roundings use :func:`train_stream`. The same format, mode, seed, stream,
offset and rows give the same bits as adapt-train's rounding of that tensor on the CPU (and on
its GPU engine, which follows the CPU bit for bit).

Rows: an array of two or more dimensions is rounded as ``shape[0]`` rows of the remaining
elements (as adapt-train rounds a weight tensor): the MX formats start their 32-element blocks
at every row, and bfp/muppet with ``block="dim0"`` take one scale per row. Other formats do not
depend on the split. ``rows=`` overrides it.
"""
import collections
import ctypes
import os
import shutil
import sys

import numpy as np

__all__ = ["ADAPT_STREAM_QUANT", "QuantStats", "QuantError", "quantize", "canonical",
           "define_format", "load_formats", "train_stream", "library_path"]

ADAPT_STREAM_QUANT = 16
LIB_NAME = "_libadaptquant.so"
_API_VERSION = 1
_MODES = {"nearest": 0, "stochastic": 1}
_TIES = {"even": 0, "away": 2}
_BLOCKS = {"tensor": 0, "dim0": 4}
# src/policy/precision.c: what a rounding in training is of (bits 8..15 of its stream)
_WHAT = {"weight": 1, "bias": 2, "input": 3, "output": 4, "grad_w": 5, "grad_b": 6,
         "attached": 7, "grad_att": 8, "grad_x": 9}
_U64 = 1 << 64

QuantStats = collections.namedtuple("QuantStats", "saturated flushed zeros")
QuantStats.__doc__ = """Counts of one rounding: values clamped to the range (+-inf inputs
included), nonzero inputs that became zero, and zero outputs."""


class QuantError(ValueError):
    """A format the C side refuses (unknown name, bad syntax, parameters out of range)."""


def _candidates():
    env = os.environ.get("ADAPTSIM_LIB")
    if env:
        return [env], True
    out = [os.path.join(os.path.dirname(os.path.abspath(__file__)), LIB_NAME)]
    prefixes = []
    train = shutil.which("adapt-train")
    if train:
        prefixes.append(os.path.dirname(os.path.dirname(os.path.realpath(train))))
    prefixes += [sys.prefix, "/usr/local", "/usr"]
    for p in prefixes:
        for lib in ("lib", "lib64"):
            c = os.path.join(p, lib, "adapt-sim", LIB_NAME)
            if c not in out:
                out.append(c)
    return out, False


def library_path():
    """The shared object :func:`quantize` loads; raises FileNotFoundError naming the places
    looked when there is none."""
    cands, explicit = _candidates()
    for c in cands:
        if os.path.isfile(c):
            return c
    if explicit:
        raise FileNotFoundError("ADAPTSIM_LIB=%s: no such file" % cands[0])
    raise FileNotFoundError(
        "adaptsim.quantize needs %s, the rounding kernels of adapt-sim; looked in %s. Build it "
        "with `make` in the adapt-sim source tree (it lands in python/adaptsim/), install it "
        "with `make install`, or set ADAPTSIM_LIB to its path" % (LIB_NAME, ", ".join(cands)))


_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    lib = ctypes.CDLL(path)
    lib.adapt_py_version.restype = ctypes.c_int
    lib.adapt_py_version.argtypes = []
    if lib.adapt_py_version() != _API_VERSION:
        raise OSError("%s: interface version %d, this package needs %d (rebuild it)"
                      % (path, lib.adapt_py_version(), _API_VERSION))
    u64, sz, cp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_char_p
    lib.adapt_py_quantize.restype = ctypes.c_int
    lib.adapt_py_quantize.argtypes = [cp, ctypes.c_int, u64, u64, u64, ctypes.c_void_p,
                                      ctypes.c_void_p, sz, sz, ctypes.POINTER(u64), cp, sz]
    lib.adapt_py_canonical.restype = ctypes.c_int
    lib.adapt_py_canonical.argtypes = [cp, cp, sz, cp, sz]
    lib.adapt_py_define.restype = ctypes.c_int
    lib.adapt_py_define.argtypes = [cp, cp, cp, sz]
    _lib = lib
    return lib


def _text(s, what):
    if not isinstance(s, str):
        raise TypeError("%s must be a str, not %s" % (what, type(s).__name__))
    return s.encode()


def _u64(v, what):
    v = int(v)
    if not 0 <= v < _U64:
        raise ValueError("%s must be in [0, 2^64), got %d" % (what, v))
    return v


def _choice(table, v, what):
    if v not in table:
        raise ValueError("%s must be one of %s, got %r" % (what, ", ".join(table), v))
    return table[v]


def train_stream(what, tensor, counter):
    """The stream adapt-train's rounding of a tensor uses (src/policy/precision.h):
    ADAPT_STREAM_QUANT | what << 8 | tensor << 16 | counter << 32, with what one of weight,
    bias, input, output, grad_w, grad_b, attached, grad_att, grad_x, tensor the layer's node
    (or parameter) number and counter the optimizer step (weights, gradients) or micro-batch
    (activations)."""
    w = _choice(_WHAT, what, "what")
    return (ADAPT_STREAM_QUANT | (w << 8) | ((int(tensor) & 0xffff) << 16)
            | ((int(counter) & 0xffffffff) << 32))


def quantize(array, format, mode="nearest", seed=0, offset=0, stream=ADAPT_STREAM_QUANT,
             tie="even", block="tensor", rows=None, stats=False):
    """A new float32 array of array's shape: array rounded to format.

    array: float32 values (a numpy array or anything np.asarray reads, e.g. a CPU torch
    tensor); other dtypes are refused rather than rounded twice. mode: "nearest" or
    "stochastic". seed, stream, offset: the key of the random bits (module doc). tie: "even" or
    "away" (nearest only). block: "tensor" or "dim0" (bfp, muppet). rows: rows of the rounding
    (default shape[0] for two or more dimensions, else 1). stats=True returns (array,
    QuantStats)."""
    x = np.asarray(array)
    if x.dtype != np.float32:
        raise TypeError("adaptsim.quantize rounds float32 values, got %s (convert first, e.g. "
                        "x.astype(np.float32))" % x.dtype)
    x = np.ascontiguousarray(x)
    n = x.size
    if rows is None:
        rows = x.shape[0] if x.ndim >= 2 else 1
    rows = int(rows)
    if rows < 0 or (rows == 0 and n) or (rows and n % rows):
        raise ValueError("rows=%d does not divide the %d elements" % (rows, n))
    cols = n // rows if rows else 0
    flags = (_choice(_MODES, mode, "mode") | _choice(_TIES, tie, "tie")
             | _choice(_BLOCKS, block, "block"))
    y = np.empty_like(x)
    counts = (ctypes.c_uint64 * 3)()
    err = ctypes.create_string_buffer(1024)
    lib = _load()
    st = lib.adapt_py_quantize(_text(format, "format"), flags, _u64(seed, "seed"),
                               _u64(stream, "stream"), _u64(offset, "offset"),
                               x.ctypes.data if n else None, y.ctypes.data if n else None,
                               rows, cols, counts, err, len(err))
    if st:
        raise QuantError(err.value.decode(errors="replace"))
    if stats:
        return y, QuantStats(int(counts[0]), int(counts[1]), int(counts[2]))
    return y


def canonical(format):
    """The canonical text of a format ("float(4,3,nan=fn)" for e4m3's definition; a named
    format prints as its definition)."""
    out = ctypes.create_string_buffer(512)
    err = ctypes.create_string_buffer(1024)
    if _load().adapt_py_canonical(_text(format, "format"), out, len(out), err, len(err)):
        raise QuantError(err.value.decode(errors="replace"))
    return out.value.decode()


def define_format(name, format):
    """Registers name for format (a format text), as a configuration's [format NAME] section
    does; later calls of :func:`quantize` accept the name. Defining a name again replaces it."""
    err = ctypes.create_string_buffer(1024)
    if _load().adapt_py_define(_text(name, "name"), _text(format, "format"), err, len(err)):
        raise QuantError(err.value.decode(errors="replace"))


def _format_text(name, sec):
    def get(k, default=None):
        v = sec.get(k)
        return default if v is None else v.strip().strip('"')
    kind = get("kind")
    if kind == "fixed":
        if get("wl") is None or get("fl") is None:
            raise QuantError("[format %s] (kind = fixed) needs wl and fl" % name)
        return "fixed(%s,%s)" % (get("wl"), get("fl"))
    if kind != "float":
        raise QuantError("[format %s] needs kind = float or fixed" % name)
    if get("exp_bits") is None or get("man_bits") is None:
        raise QuantError("[format %s] (kind = float) needs exp_bits and man_bits" % name)
    opts = []
    if get("bias") is not None:
        opts.append("bias=" + get("bias"))
    opts.append("nan=" + get("nan", "ieee"))
    sub = get("subnormals", "true").lower()
    if sub not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise QuantError("[format %s] subnormals = %s is not a boolean" % (name, sub))
    opts.append("sub=" + ("1" if sub in ("true", "1", "yes", "on") else "0"))
    ovf = get("overflow", "saturate")
    opts.append("ovf=" + {"saturate": "sat"}.get(ovf, ovf))
    return "float(%s,%s,%s)" % (get("exp_bits"), get("man_bits"), ",".join(opts))


def load_formats(path):
    """Registers the [format NAME] sections of a configuration file (keys kind, exp_bits,
    man_bits, bias, nan, subnormals, overflow, wl, fl; doc/numerics.md); returns
    {name: canonical text}."""
    import configparser
    cp = configparser.ConfigParser(inline_comment_prefixes=(";", "#"), interpolation=None,
                                   strict=False)
    with open(path) as f:
        cp.read_file(f)
    out = {}
    for s in cp.sections():
        head = s.split(None, 1)
        if len(head) == 2 and head[0] == "format":
            name = head[1].strip()
            define_format(name, _format_text(name, cp[s]))
            out[name] = canonical(name)
    return out

"""adaptsim.quantize (the shared object python/adaptsim/_libadaptquant.so, through ctypes)
against tests/quant_rows_dump (libquant.a's quant_rows in a program of its own) bit for bit:
2^20 values per format and mode (ties, float32 subnormals, values past every format's range,
+-inf, NaN, random bit patterns), and fixed(8,4) against a reference written here from the
format's definition (nearest ties to even; stochastic with Philox4x32-10 in numpy)."""
import os
import subprocess
import tempfile
import unittest

import numpy as np

from common import BUILDDIR

LIB = os.path.join(BUILDDIR, "python", "adaptsim", "_libadaptquant.so")
if "ADAPTSIM_LIB" not in os.environ and os.path.isfile(LIB):
    os.environ["ADAPTSIM_LIB"] = LIB  # a build outside the source tree
import adaptsim  # noqa: E402 (after ADAPTSIM_LIB)
from adaptsim import quant  # noqa: E402

DUMP = os.path.join(BUILDDIR, "tests", "quant_rows_dump")


def have_lib():
    try:
        quant.library_path()
        return True
    except FileNotFoundError:
        return False


needs_lib = unittest.skipUnless(have_lib(), "no _libadaptquant.so (run make)")
needs_dump = unittest.skipUnless(os.access(DUMP, os.X_OK),
                                 "tests/quant_rows_dump not built (make check builds it)")

ROWS, COLS = 1024, 1024  # 2^20 values
CUSTOM = "float(4,3,bias=11,nan=fn,ovf=inf)"
FORMATS = ["fixed(8,4)", "fixed(16,8)", "fixed(4,6)", "fixed(32,16)", "fixed(24,30)",
           "bfp(8)", "bfp(16)", "muppet(8)", "muppet(12)", "fp16", "bf16", "float(5,10)",
           "float(3,2)", "float(8,23)", "float(8,3)", "float(2,1,nan=none)",
           "float(4,3,nan=fn)", "float(5,2,ovf=inf)", "float(4,3,sub=0)", CUSTOM,
           "float(6,4,bias=40)", "e4m3", "e5m2", "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3",
           "mxfp6_e3m2", "mxfp4", "mxint8", "pyfmt"]
# (mode as quant_rows_dump names it, quantize's keyword arguments)
MODES = [("nearest", {}), ("stochastic", {"mode": "stochastic"})]
EXTRA = {"bfp(8)": [("nearest-dim0", {"block": "dim0"}),
                    ("stochastic-dim0", {"mode": "stochastic", "block": "dim0"})],
         "muppet(8)": [("nearest-dim0", {"block": "dim0"}),
                       ("stochastic-dim0", {"mode": "stochastic", "block": "dim0"})],
         "fixed(8,4)": [("nearest-away", {"tie": "away"})],
         "e4m3": [("nearest-away", {"tie": "away"})]}


def inputs(rows=ROWS, cols=COLS, seed=2024):
    """rows x cols float32 values; each row one kind, so that bfp/muppet per row and the MX
    blocks see both clean and wild data."""
    g = np.random.default_rng(seed)
    x = np.empty((rows, cols), np.float32)
    for r in range(rows):
        kind = r % 6
        if kind == 0:    # random bit patterns: every exponent, NaN payloads, +-inf, subnormals
            v = g.integers(0, 1 << 32, cols, dtype=np.uint64).astype(np.uint32).view(np.float32)
        elif kind == 1:  # normal data at one scale per row
            v = (g.standard_normal(cols) * 2.0 ** g.integers(-20, 20)).astype(np.float32)
        elif kind == 2:  # midpoints and points of many grids: odd and even multiples of 2^e
            m = g.integers(-300, 300, cols).astype(np.float64)
            e = g.integers(-150, 20, cols)
            v = (np.ldexp(m, e) + 0.0).astype(np.float32)
        elif kind == 3:  # float32 subnormals and tiny normals
            bits = g.integers(0, 1 << 23, cols, dtype=np.uint64).astype(np.uint32)
            bits |= (g.integers(0, 3, cols).astype(np.uint32) << 23)
            bits |= (g.integers(0, 2, cols).astype(np.uint32) << 31)
            v = bits.view(np.float32)
        elif kind == 4:  # around the formats' largest values and beyond
            tops = np.array([7.9375, 8, 127.99, 448, 464, 480, 57344, 61440, 65504, 65520, 6,
                             7, 7.5, 28, 30, 32, 1.984375, 2.0, 3.4e38, 1e30, 2.0 ** 40, 15,
                             16, 240, 256], np.float64)
            with np.errstate(over="ignore"):  # 3.4e38 * 1.05: inf on purpose
                v = (g.choice(tops, cols) * (1 + g.uniform(-0.05, 0.05, cols))
                     * g.choice([-1.0, 1.0], cols)).astype(np.float32)
        else:            # specials mixed into ordinary values
            v = g.uniform(-4, 4, cols).astype(np.float32)
            sp = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4028235e38, -3.4028235e38,
                           1e-45, -1e-45, 1.1754944e-38], np.float32)
            pick = g.random(cols) < 0.05
            v[pick] = g.choice(sp, int(pick.sum()))
        x[r] = v
    return x


def bits_equal(a, b):
    """Count of elements whose bit patterns differ (NaN payloads included)."""
    return int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))


@needs_lib
@needs_dump
class TestParity(unittest.TestCase):
    """adaptsim.quantize == quant_rows bit for bit, every format and mode."""

    def test_formats_modes(self):
        adaptsim.define_format("pyfmt", CUSTOM)
        x = inputs()
        seed, offset = 0x9E3779B97F4A7C15, 1000
        stream = adaptsim.train_stream("weight", 3, 17)
        table, total, bad = [], 0, 0
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "in.f32")
            x.tofile(src)
            for fmt in FORMATS:
                modes = MODES + EXTRA.get(fmt, [])
                cmd = [DUMP, "-D", "pyfmt=" + CUSTOM, src, str(ROWS), str(COLS), str(seed),
                       str(stream), str(offset)]
                for i, (m, _) in enumerate(modes):
                    cmd += [fmt, m, os.path.join(d, "out%d.f32" % i)]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                self.assertEqual(p.returncode, 0, p.stdout.decode(errors="replace"))
                csat = [int(l.split()[2]) for l in p.stdout.decode().splitlines()]
                for i, (m, kw) in enumerate(modes):
                    want = np.fromfile(os.path.join(d, "out%d.f32" % i), np.float32)
                    got, st = adaptsim.quantize(x, fmt, seed=seed, stream=stream, offset=offset,
                                                stats=True, **kw)
                    self.assertEqual(got.shape, x.shape)
                    self.assertEqual(got.dtype, np.float32)
                    mism = bits_equal(got.reshape(-1), want)
                    table.append((fmt, m, x.size, mism, st.saturated, csat[i]))
                    total += x.size
                    bad += mism + (st.saturated != csat[i])
        print("\nadaptsim.quantize vs quant_rows (values, mismatches, saturated py/C):")
        for fmt, m, n, mism, s1, s2 in table:
            print("  %-36s %-16s %8d %3d  %d/%d" % (fmt, m, n, mism, s1, s2))
        print("  total: %d values in %d roundings, %d mismatches" % (total, len(table), bad))
        self.assertEqual(bad, 0)

    def test_offset_is_index(self):
        """Rounding the second half alone with offset = its start gives the same bits."""
        x = inputs(8, 4096)
        y = adaptsim.quantize(x.reshape(-1), "bf16", mode="stochastic", seed=5)
        h = x.reshape(-1)[16384:]
        yh = adaptsim.quantize(h, "bf16", mode="stochastic", seed=5, offset=16384)
        self.assertEqual(bits_equal(y[16384:], yh), 0)
        ys = adaptsim.quantize(h, "bf16", mode="stochastic", seed=6, offset=16384)
        self.assertGreater(bits_equal(yh, ys), 0)


def philox_u32(seed, stream, index):
    """src/base/rng.h's adapt_rng_u32_at for an array of indices (numpy, uint64 lanes)."""
    M = np.uint64(0xffffffff)
    idx = np.asarray(index, np.uint64)
    q = idx >> np.uint64(2)
    c = [q & M, q >> np.uint64(32), np.full_like(q, stream & 0xffffffff),
         np.full_like(q, stream >> 32)]
    k0, k1 = seed & 0xffffffff, seed >> 32
    for _ in range(10):
        p0 = np.uint64(0xD2511F53) * c[0]
        p1 = np.uint64(0xCD9E8D57) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & M,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & M]
        k0, k1 = (k0 + 0x9E3779B9) & 0xffffffff, (k1 + 0xBB67AE85) & 0xffffffff
    lane = (idx & np.uint64(3)).astype(np.int64)
    return np.choose(lane, c).astype(np.uint64)


def fixed84_reference(x, mode, seed=0, stream=16, offset=0):
    """fixed(8,4) from its definition: k = x 2^4 rounded to an integer (ties to even, or up with
    probability equal to the fraction: r + floor(frac 2^32) >= 2^32 for the element's Philox
    value r), clamped to [-128, 127]; y = k 2^-4; NaN stays, +-inf clamps."""
    t = x.astype(np.float64) * 16
    if mode == "nearest":
        k = np.round(t)  # half to even
    else:
        fl = np.floor(np.where(np.isfinite(t), t, 0))
        f32 = np.floor((t - fl) * 2.0 ** 32)
        r = philox_u32(seed, stream, offset + np.arange(x.size, dtype=np.uint64))
        k = fl + (r.astype(np.float64) + f32 >= 2.0 ** 32)
        k = np.where(np.isfinite(t), k, t)
    y = (np.clip(k, -128, 127) / 16).astype(np.float32) + np.float32(0)
    return np.where(np.isnan(x), x, y)


@needs_lib
class TestFixedReference(unittest.TestCase):
    def setUp(self):
        g = np.random.default_rng(7)
        ties = (np.arange(-260, 260) + 0.5) / 16  # every midpoint of the grid, and past it
        grid = np.arange(-130, 130) / 16
        wide = g.uniform(-10, 10, 200000)
        special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3.4e38, -3.4e38]
        self.x = np.concatenate([ties, grid, wide, special]).astype(np.float32)

    def test_nearest(self):
        want = fixed84_reference(self.x, "nearest")
        got, st = adaptsim.quantize(self.x, "fixed(8,4)", stats=True)
        self.assertEqual(bits_equal(got, want), 0)
        self.assertEqual(float(adaptsim.quantize(np.float32([0.03125]), "fixed(8,4)")[0]), 0.0)
        self.assertEqual(float(adaptsim.quantize(np.float32([0.09375]), "fixed(8,4)")[0]), 0.125)
        k = np.round(self.x.astype(np.float64) * 16)
        self.assertEqual(st.saturated, int(np.count_nonzero((k < -128) | (k > 127))))

    def test_stochastic(self):
        for seed, stream, offset in [(0, 16, 0), (123456789012345, 16 | 7 << 8, 99)]:
            want = fixed84_reference(self.x, "stochastic", seed, stream, offset)
            got = adaptsim.quantize(self.x, "fixed(8,4)", mode="stochastic", seed=seed,
                                    stream=stream, offset=offset)
            self.assertEqual(bits_equal(got, want), 0, (seed, stream, offset))


@needs_lib
class TestInterface(unittest.TestCase):
    def test_shape_dtype_copy(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
        y = adaptsim.quantize(x, "bf16")
        self.assertEqual((y.shape, y.dtype), (x.shape, np.float32))
        self.assertFalse(np.shares_memory(x, y))
        self.assertEqual(adaptsim.quantize(np.zeros(0, np.float32), "e4m3").shape, (0,))
        xt = x.transpose(2, 0, 1)  # not contiguous
        self.assertEqual(bits_equal(adaptsim.quantize(xt, "fp16"),
                                    adaptsim.quantize(np.ascontiguousarray(xt), "fp16")), 0)

    def test_errors(self):
        x = np.ones(4, np.float32)
        with self.assertRaises(TypeError):
            adaptsim.quantize(x.astype(np.float64), "fp16")
        for bad in ("fixed(8)", "float(9,3)", "nosuchformat", "float(4,3,bias=200)"):
            with self.assertRaises(adaptsim.QuantError):
                adaptsim.quantize(x, bad)
        with self.assertRaises(ValueError):
            adaptsim.quantize(x, "fp16", mode="up")
        with self.assertRaises(ValueError):
            adaptsim.quantize(x, "fp16", seed=-1)
        with self.assertRaises(ValueError):
            adaptsim.quantize(x, "fp16", rows=3)

    def test_canonical_and_named(self):
        self.assertEqual(adaptsim.canonical("e4m3"), "e4m3")
        self.assertEqual(adaptsim.canonical("float(5,10)"), "float(5,10)")
        with tempfile.TemporaryDirectory() as d:
            ini = os.path.join(d, "f.ini")
            with open(ini, "w") as f:
                f.write("[format myfp8]\nkind = float\nexp_bits = 4\nman_bits = 3\n"
                        "bias = 11 ; comment\nnan = fn\noverflow = inf\n\n"
                        "[format q44]\nkind = fixed\nwl = 8\nfl = 4\n[train]\nepochs = 1\n")
            got = adaptsim.load_formats(ini)
        self.assertEqual(sorted(got), ["myfp8", "q44"])
        x = inputs(4, 256).reshape(-1)
        self.assertEqual(bits_equal(adaptsim.quantize(x, "myfp8"),
                                    adaptsim.quantize(x, CUSTOM)), 0)
        self.assertEqual(bits_equal(adaptsim.quantize(x, "q44"),
                                    adaptsim.quantize(x, "fixed(8,4)")), 0)

    def test_missing_library(self):
        saved, quant._lib = quant._lib, None
        old = os.environ.get("ADAPTSIM_LIB")
        os.environ["ADAPTSIM_LIB"] = "/nonexistent/_libadaptquant.so"
        try:
            with self.assertRaises(FileNotFoundError) as cm:
                adaptsim.quantize(np.ones(2, np.float32), "fp16")
            self.assertIn("ADAPTSIM_LIB", str(cm.exception))
        finally:
            quant._lib = saved
            if old is None:
                del os.environ["ADAPTSIM_LIB"]
            else:
                os.environ["ADAPTSIM_LIB"] = old

    @unittest.skipUnless(__import__("importlib").util.find_spec("torch"), "torch not installed")
    def test_torch_tensor(self):
        import torch
        t = torch.linspace(-3, 3, 1001)
        y = adaptsim.quantize(t, "e4m3")
        self.assertEqual(bits_equal(y, adaptsim.quantize(t.numpy(), "e4m3")), 0)


if __name__ == "__main__":
    unittest.main()

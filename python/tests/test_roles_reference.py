"""The [roles] recipes fp8_hybrid_delayed and mxfp8 against an outside reference.

tests/roles_step_dump (C, the CPU engine) writes forward, loss and backward passes of LeNet-5
(1x32x32: Fashion-MNIST's 28x28 images centred, as the loader pads them) and ResNet-20
(3x32x32) on a batch of 8, under a recipe of the `fixed` policy. This test rebuilds each
model in float64 PyTorch with the same master weights and batch and emulates the recipe from
the specifications, without adapt-sim's rounding library (adaptsim.quant is not used):

* OCP 8-bit floating point (OFP8) formats: E4M3 (bias 7, largest 448, no infinities, smallest
  subnormal 2^-9) and E5M2 (bias 15, largest 57344, smallest subnormal 2^-16), round to
  nearest even; values past the largest finite saturate to it, as Transformer Engine's casts do
  (adapt-sim's fp8_hybrid_delayed uses float(5,2), E5M2 with saturation, for that reason).
* Transformer Engine's DelayedScaling (HYBRID: E4M3 forward, E5M2 backward): y = Q(x s) / s
  with one scale per tensor; after each rounding its amax joins the tensor's history and the
  next scale is (fp8_max / amax) / 2^margin with amax the history's max (amax_compute_algo
  "max") or its most recent value; an amax of 0 or a non-finite one keeps the old scale; the
  first scale is 1 (Transformer Engine initialises its scales to 1 too). Choices of
  adapt-sim's own that the reference follows: the history is per unit and role (and per
  rounding, which is per step here); the weight copy is made once before each pass (the
  weight's history entry comes from that copy); roles.scale = pow2 takes the power of two at
  or below the scale (not a Transformer Engine option of DelayedScaling); the scale is a
  float32 number (computed here in float64 and rounded to float32).
* OCP Microscaling Formats (MX) v1.0, MXFP8 E4M3: blocks of 32 elements share the E8M0 scale
  X = 2^(floor(log2(amax)) - emax_elem) with emax_elem = 8; elements are V / X rounded to
  E4M3, past 448 clamped to 448. Which 32 values form a block is adapt-sim's choice (the
  specification leaves it to the user): weights in blocks of 32 along each row of the
  (out, in * kh * kw) matrix; activations and error gradients along each sample's (C, H, W)
  values in memory order, a short last block at the end of a row or sample.

Where each role rounds (doc/numerics.md, "Tensor roles and scaling"): the weight copy a unit
(conv2d, linear) computes with; the unit's input activation; the error gradient of its output
before its backward reads it (so the weight, bias and input gradients of the unit all read
the rounded one). Both recipes round to nearest (no stochastic role), so both sides are
deterministic. Nothing else is rounded: biases, outputs, parameter gradients and the layers
between units stay float32. The rounding is straight-through in the backward.

Each case runs two passes on the same batch and master weights: the first rounds with scale
1 everywhere (delayed scaling has seen nothing), the second with the scales the first left.

What is compared, per pass:

* the scales: the scale each role used, and the one it leaves for the next rounding. The
  scale is a function of an amax history; the reference recomputes it from the simulator's
  own amax values with the formula above, which must give the simulator's scale bit for bit
  (a power of two with pow2, else one float32 rounding of the same quotient). The weights'
  and the network input's amax (the same tensors on both sides) must be equal, and so must
  the scales the reference's own state gives them. So pass 1 uses scale 1 everywhere and
  pass 2 exactly the scales pass 1 left. MX roles must report no tensor scale.
* layer by layer, from the simulator's own tensors (tests/roles_step_dump with
  ROLES_DUMP_ACTS=1 writes every activation and error gradient): each layer's output from
  the simulator's inputs, weights and scales; each error gradient from the simulator's
  error gradients of the layers after it (a unit's output's rounded by its grad_output
  role); each parameter gradient. No flip travels from one layer to the next, so each
  distance carries the flips of one rounding at most.
* whole passes, LeNet-5 only: the loss (1e-4 relative) and each parameter gradient as
  ||g_sim - g_ref|| / ||g_ref||. For ResNet-20 they are printed, not checked: a rounding
  turns a difference d of its input into about sqrt(2 d r) of its output (r the format's
  relative step, below), which is larger than d, so a single flip grows layer after layer;
  after the 19 rounded layers behind one, two runs that differ only in float32 versus
  float64 sums end 50-100 % apart in their gradients. Measured: under mxfp8 this PyTorch
  reference computed in float32 parts from itself in float64 as far as the simulator does
  (and its forward equals the simulator's); in pass 2 of fp8_hybrid_delayed the simulator
  parts from the reference at one flipped value of layer1.1.conv1's rounded input (134
  outputs of that conv differ; every layer before it agrees to 2e-7). LeNet-5's four
  rounded layers behind the first keep such a flip small.

The bounds, from flip noise. The simulator sums in float32, the reference in float64: a
value differs by about delta = 1e-6 relative (float32's unit roundoff 6e-8 times the square
root of the up to ~300 terms of a sum, rounded up). A value within delta |v| of a rounding
boundary of an 8-bit float rounds to the other neighbour: with a relative spacing r (2^-3
for E4M3's three mantissa bits, 2^-2 for E5M2's two) a fraction of about 2 delta / r of the
values flips, each by r |v|, and the rounded tensor moves by sqrt(2 delta / r) r =
sqrt(2 delta r) in relative norm: 5e-4 for E4M3, 7e-4 for E5M2. A layer's check carries one
rounding: bound 4 sqrt(2 delta 2^-2) = 2.8e-3 (4 for the few flips' distance from their
mean). A whole pass's parameter gradient reads every rounded tensor from its unit to the
loss, at most R = 3 units + 1, whose flips add in quadrature: bound 4 sqrt(2 delta R / 4),
1.1e-2 for LeNet-5 (5 units). A semantic difference (a role in another format, a missing
rounding, a scale from another amax) moves every rounded value by the formats' rounding
error, 2e-2 and more, past these bounds; a margin or pow2 error is caught by the scales,
which must be equal. Each case prints its largest distances and bounds.
"""
import math
import os
import subprocess
import tempfile
import unittest

import numpy as np

from common import needs_torch, program

from adaptsim import model as described
from adaptsim.safetensors import read_safetensors

DELTA = 1e-6
LOCAL_BOUND = 4.0 * math.sqrt(2.0 * DELTA * 2.0 ** -2)
# the models whose whole passes are compared (see above: not ResNet-20)
WHOLE = ("lenet5",)
BATCH = 8
SEED = 11
PASSES = 2

# (largest finite, mantissa bits, smallest normal exponent) of the OCP FP8 formats
E4M3 = (448.0, 3, -6)
E5M2 = (57344.0, 2, -14)
MX_EMAX_ELEM = 8  # E4M3's largest exponent (448 = 1.75 * 2^8)
MX_BLOCK = 32

RECIPES = {
    # role -> (format, scaling); weight, input, grad_output (doc/numerics.md, "Recipes")
    "fp8_hybrid_delayed": {"weight": (E4M3, "delayed"), "input": (E4M3, "delayed"),
                           "grad_output": (E5M2, "delayed")},
    "mxfp8": {"weight": ("mx", None), "input": ("mx", None), "grad_output": ("mx", None)},
    "mxfp8_gemm": {"weight": ("mx", None), "input": ("mx", None), "grad_output": ("mx", None)},
    # mxfp8 with roles.mx_axis = channels
    "mxfp8_channels": {"weight": ("mx", None), "input": ("mx", None),
                       "grad_output": ("mx", None)},
}
# the recipes whose MX operands are rounded per GEMM (channels: microxcaling's convolution)
GEMM_AXIS = ("mxfp8_gemm", "mxfp8_channels")
# the simulator's settings of a recipe name that is not its own
RECIPE_SETS = {"mxfp8_channels": ("roles.recipe=mxfp8", "roles.mx_axis=channels")}
ROLES = ("weight", "input", "grad_output")


def dump_program():
    return program(os.path.join("tests", "roles_step_dump"))


needs_dump = unittest.skipUnless(os.access(dump_program(), os.X_OK),
                                 "tests/roles_step_dump not built (make check builds it)")


def fp8_round(torch, v, fmt):
    """v (float64) rounded to nearest even in an OFP8 format, saturating past its largest."""
    fmax, mbits, emin = fmt
    a = v.abs()
    # exponent of each value: floor(log2 |v|), no lower than the smallest normal's
    _, e = torch.frexp(a)
    e = torch.clamp(e.to(v.dtype) - 1.0, min=float(emin))
    step = torch.pow(2.0, e - mbits)
    q = torch.round(a / step) * step  # torch.round: half to even
    q = torch.clamp(q, max=fmax)
    return torch.where(v < 0, -q, q)


def mx_round(torch, v, rows):
    """OCP MX v1.0 MXFP8 (E4M3 elements) of v in blocks of 32 along rows of v.numel() / rows."""
    flat = v.reshape(rows, -1)
    cols = flat.shape[1]
    nb = -(-cols // MX_BLOCK)
    pad = torch.zeros(rows, nb * MX_BLOCK - cols, dtype=v.dtype)
    blocks = torch.cat([flat, pad], 1).reshape(rows, nb, MX_BLOCK)
    amax = blocks.abs().amax(2, keepdim=True)
    _, e = torch.frexp(amax)
    shared = torch.where(amax > 0, e.to(v.dtype) - 1.0 - MX_EMAX_ELEM,
                         torch.zeros_like(amax))
    shared = torch.clamp(shared, -127.0, 127.0)  # E8M0's range
    x = torch.pow(2.0, shared)
    q = fp8_round(torch, blocks / x, E4M3) * x
    return q.reshape(rows, -1)[:, :cols].reshape(v.shape)


def mx_gemm_unit(torch, x, w, wq, b, stride, pad):
    """A conv2d (stride, pad; pad None: linear) under OCP MX with every GEMM's operands blocked
    along that GEMM's reduction dimension, as the MX specification's training flow has it
    (each operand quantized once per GEMM it enters): with Xcol (K, N*L) the lowered input
    (torch's unfold: K = C*kh*kw in (c, ky, kx) order, L output pixels per sample),

      forward      Y = Wq Xcol             Wq the unit's weight copy (rows along K), Xcol's
                                           columns blocked along K (one per output pixel);
      input grad   dXcol = W^T dY          W^T's rows (the master weight's columns) and dY's
                                           columns (one per output pixel) along Cout;
      weight grad  dW = dY Xcol^T          dY's and Xcol's rows along N*L.

    The bias gradient sums dY unrounded (it is no GEMM). x and the rounded copies are
    float64; the element order of each blocked row is that of the matrices above."""
    F = torch.nn.functional

    def rows(m):
        return mx_round(torch, m.contiguous(), m.shape[0])

    class Unit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            n = x.shape[0]
            if pad is None:
                cols = x.reshape(n, -1, 1)
                oshape = (n, w.shape[0])
            else:
                cols = F.unfold(x, w.shape[2:], padding=pad, stride=stride)
                ho = (x.shape[2] + 2 * pad - w.shape[2]) // stride + 1
                oshape = (n, w.shape[0], ho, cols.shape[2] // ho)
            K, L = cols.shape[1], cols.shape[2]
            xf = rows(cols.transpose(1, 2).reshape(n * L, K))
            y = (xf @ wq.reshape(w.shape[0], K).t()).reshape(n, L, -1).transpose(1, 2)
            if b is not None:
                y = y + b.reshape(1, -1, 1)
            ctx.save_for_backward(cols, w)
            ctx.xshape = x.shape
            ctx.has_bias = b is not None
            return y.reshape(oshape)

        @staticmethod
        def backward(ctx, g):
            cols, w = ctx.saved_tensors
            n, K, L = cols.shape
            cout = w.shape[0]
            g = g.reshape(n, cout, L)
            dyw = rows(g.transpose(0, 1).reshape(cout, n * L))
            xw = rows(cols.transpose(0, 1).reshape(K, n * L))
            dw = (dyw @ xw.t()).reshape(w.shape)
            wt = rows(w.reshape(cout, K).t())
            dyd = rows(g.transpose(1, 2).reshape(n * L, cout))
            dcols = (dyd @ wt.t()).reshape(n, L, K).transpose(1, 2)
            if pad is None:
                dx = dcols.reshape(ctx.xshape)
            else:
                dx = F.fold(dcols, ctx.xshape[2:], w.shape[2:], padding=pad, stride=stride)
            db = g.sum((0, 2)) if ctx.has_bias else None
            return dx, dw, db

    return Unit.apply(x, w, b)


def mx_along(torch, v, axis):
    """mx_round of v in blocks along dimension `axis` (every other index fixed)."""
    m = v.movedim(axis, -1).contiguous()
    q = mx_round(torch, m.reshape(-1, m.shape[-1]), m.numel() // m.shape[-1])
    return q.reshape(m.shape).movedim(-1, axis)


def mx_channels_unit(torch, x, w, wq, b, stride, pad):
    """A conv2d under OCP MX as microxcaling's MX convolution rounds its operands (its
    mx/convolution.py, read for the axes only): each operand quantized before the
    convolution, once for each of the three it enters,

      forward      conv(x, Wq)             x along the input channels (dim 1) at each
                                           (n, y, x); Wq the unit's weight copy, along Cin
                                           at each (o, ky, kx);
      weight grad  conv_weight(x, dY)      x and dY along the batch (dim 0);
      input grad   conv_input(W, dY)       the master W along Cout (dim 0), dY along its
                                           channels (dim 1).

    The convolutions themselves are torch's unfold and fold with float64 products. The bias
    gradient sums dY unrounded. A linear layer (pad None) is mx_gemm_unit's."""
    if pad is None:
        return mx_gemm_unit(torch, x, w, wq, b, stride, pad)
    F = torch.nn.functional
    ks = w.shape[2:]

    class Unit(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            y = F.conv2d(mx_along(torch, x, 1), wq, b, stride, pad)
            ctx.save_for_backward(x, w)
            ctx.has_bias = b is not None
            return y

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            n, cout = g.shape[0], g.shape[1]
            g = g.contiguous()
            cols = F.unfold(mx_along(torch, x, 0), ks, padding=pad, stride=stride)
            gw = mx_along(torch, g, 0).reshape(n, cout, -1)
            dw = torch.einsum("nol,nkl->ok", gw, cols).reshape(w.shape)
            wd = mx_along(torch, w, 0).reshape(cout, -1)
            gd = mx_along(torch, g, 1).reshape(n, cout, -1)
            dcols = torch.einsum("ok,nol->nkl", wd, gd)
            dx = F.fold(dcols, x.shape[2:], ks, padding=pad, stride=stride)
            db = g.sum((0, 2, 3)) if ctx.has_bias else None
            return dx, dw, db

    return Unit.apply(x, w, b)


class Scaled:
    """Transformer Engine's delayed scaling state of one tensor (role, unit)."""

    def __init__(self, opts):
        self.opts = opts
        self.scale = 1.0
        self.hist = []
        self.used = None
        self.amax = None

    def scale_for(self, fmax, amax):
        """(fmax / amax) / 2^margin as a float32 number (pow2: the power of two at or below);
        None where amax gives none."""
        if not (amax > 0) or not math.isfinite(amax):
            return None
        s = fmax / amax / 2.0 ** self.opts["margin"]
        if self.opts["pow2"]:
            s = 2.0 ** math.floor(math.log2(s))
        return float(np.float32(s))

    def round(self, torch, v, fmt):
        s = self.scale
        y = fp8_round(torch, v * s, fmt) / s
        self.used = s
        self.amax = float(v.abs().max())
        self.hist = (self.hist + [self.amax])[-self.opts["history"]:]
        a = self.hist[-1] if self.opts["most_recent"] else max(self.hist)
        n = self.scale_for(fmt[0], a)
        if n is not None:
            self.scale = n
        return y


class Reference:
    """One model's float64 emulation under a recipe, pass after pass."""

    def __init__(self, torch, dump, recipe, opts, dtype):
        self.torch = torch
        self.dtype = dtype
        self.recipe = RECIPES[recipe]
        self.gemm = recipe in GEMM_AXIS
        self.unit_fn = mx_channels_unit if recipe == "mxfp8_channels" else mx_gemm_unit
        self.channels = recipe == "mxfp8_channels"
        self.opts = opts
        self.g = described.load(dump.metadata["model"], 10)
        self.units = [ly.name for ly in self.g.layers if ly.kind in ("conv2d", "linear")]
        self.params = {k[6:]: torch.from_numpy(np.array(v, dtype=np.float64)).to(dtype)
                       for k, v in dump.tensors.items() if k.startswith("param.")}
        self.state = {(r, u): Scaled(opts) for r in ROLES for u in self.units}

    def rounder(self, role, unit, rows):
        """The function that rounds role's tensor of unit (rows: MX rows)."""
        fmt, scaling = self.recipe[role]
        torch = self.torch
        if fmt == "mx":
            return lambda v: mx_round(torch, v, rows(v))
        if fmt == "f32":
            return lambda v: v
        assert scaling == "delayed"
        st = self.state[(role, unit)]
        return lambda v: st.round(torch, v, fmt)

    def ste(self, f):
        """A rounding f in the forward, passing the gradient unchanged (straight through)."""
        torch = self.torch

        class STE(torch.autograd.Function):
            @staticmethod
            def forward(ctx, v):
                return f(v.detach())

            @staticmethod
            def backward(ctx, g):
                return g

        return STE.apply

    def grad_rounding(self, f):
        """The identity in the forward, f on the gradient."""
        torch = self.torch

        class GradQ(torch.autograd.Function):
            @staticmethod
            def forward(ctx, v):
                return v.clone()

            @staticmethod
            def backward(ctx, g):
                return f(g.contiguous())

        return GradQ.apply

    def weight_copies(self):
        """The weight copies the units compute with in the next pass (made once per pass)."""
        out = {}
        for u in self.units:
            w = self.params[u + ".weight"]
            if self.channels and w.dim() == 4:  # a convolution's: along Cin at each (o, ky, kx)
                out[u] = mx_along(self.torch, w, 1)
            else:
                out[u] = self.rounder("weight", u, lambda v: v.shape[0])(w)
        return out

    def run_pass(self, x, labels):
        torch = self.torch
        x = x.to(self.dtype)
        F = torch.nn.functional
        wq = self.weight_copies()
        leaves = {k: v.clone().requires_grad_(True) for k, v in self.params.items()
                  if not k.endswith(("running_mean", "running_var", "num_batches_tracked"))}
        outs = []
        for ly in self.g.layers:
            ins = [x if j < 0 else outs[j] for j in ly.inputs]
            k, name = ly.keys, ly.name
            if ly.kind in ("conv2d", "linear") and self.gemm:
                y = self.unit_fn(torch, ins[0], leaves[name + ".weight"], wq[name].detach(),
                                 leaves.get(name + ".bias"), k.get("stride"),
                                 k.get("pad") if ly.kind == "conv2d" else None)
            elif ly.kind in ("conv2d", "linear"):
                w = leaves[name + ".weight"]
                # the copy in the forward, the gradient to the master (straight through)
                wc = w + (wq[name] - w).detach()
                b = leaves.get(name + ".bias")
                xi = self.ste(self.rounder("input", name, lambda v: v.shape[0]))(ins[0])
                if ly.kind == "conv2d":
                    y = F.conv2d(xi, wc, b, k["stride"], k["pad"], k.get("dilation", 1),
                                 k.get("groups", 1))
                else:
                    y = F.linear(xi.reshape(xi.shape[0], -1), wc, b)
                y = self.grad_rounding(self.rounder("grad_output", name,
                                                    lambda v: v.shape[0]))(y)
            elif ly.kind == "batchnorm2d":
                y = F.batch_norm(ins[0], None, None, leaves[name + ".weight"],
                                 leaves[name + ".bias"], True, 0.0, k["eps"])
            elif ly.kind == "relu":
                y = F.relu(ins[0])
            elif ly.kind == "tanh":
                y = torch.tanh(ins[0])
            elif ly.kind == "flatten":
                y = ins[0].reshape(ins[0].shape[0], -1)
            elif ly.kind == "avgpool2d":
                y = (ins[0].mean((2, 3), keepdim=True) if k["k"] == 0 else
                     F.avg_pool2d(ins[0], k["k"], k["stride"], k["pad"],
                                  count_include_pad=bool(k["count_include_pad"])))
            elif ly.kind == "add":
                y = ins[0] + ins[1]
            else:
                raise AssertionError("no reference for layer kind " + ly.kind)
            outs.append(y)
        self.outs = outs
        logits = outs[-1].reshape(x.shape[0], -1)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        grads = {k: v.grad.detach().double().numpy() for k, v in leaves.items()}
        return float(loss), grads


    def layer(self, ly, ins, params, wq, rnd):
        """Layer ly's output from ins (float64 tensors) with the unit roles applied: wq the
        unit's weight copy, rnd(role, v) the input and grad_output roundings."""
        torch = self.torch
        F = torch.nn.functional
        k, name = ly.keys, ly.name
        if ly.kind in ("conv2d", "linear") and self.gemm:
            return self.unit_fn(torch, ins[0], params[name + ".weight"], wq.detach(),
                                params.get(name + ".bias"), k.get("stride"),
                                k.get("pad") if ly.kind == "conv2d" else None)
        if ly.kind in ("conv2d", "linear"):
            w = params[name + ".weight"]
            wc = w + (wq - w).detach()
            b = params.get(name + ".bias")
            xi = self.ste(lambda v: rnd("input", v))(ins[0])
            if ly.kind == "conv2d":
                y = F.conv2d(xi, wc, b, k["stride"], k["pad"], k.get("dilation", 1),
                             k.get("groups", 1))
            else:
                y = F.linear(xi.reshape(xi.shape[0], -1), wc, b)
            return y
        if ly.kind == "batchnorm2d":
            return F.batch_norm(ins[0], None, None, params[name + ".weight"],
                                params[name + ".bias"], True, 0.0, k["eps"])
        if ly.kind == "relu":
            return F.relu(ins[0])
        if ly.kind == "tanh":
            return torch.tanh(ins[0])
        if ly.kind == "flatten":
            return ins[0].reshape(ins[0].shape[0], -1)
        if ly.kind == "avgpool2d":
            return (ins[0].mean((2, 3), keepdim=True) if k["k"] == 0 else
                    F.avg_pool2d(ins[0], k["k"], k["stride"], k["pad"],
                                 count_include_pad=bool(k["count_include_pad"])))
        if ly.kind == "add":
            return ins[0] + ins[1]
        raise AssertionError("no reference for layer kind " + ly.kind)

    def local_pass(self, t, ps):
        """Every layer from the simulator's own tensors of pass ps (its activations, the
        error gradients it received, the scales it used): the distance of each of its
        outputs, error gradients and parameter gradients to the reference's, as
        {what: distance}. No rounding flip travels from one layer to the next here."""
        torch = self.torch
        units = {u: i for i, u in enumerate(self.units)}
        scales = np.asarray(t["pass%d.scale" % ps], np.float64)

        def rounding(role, unit, v):
            fmt, scaling = self.recipe[role]
            if fmt == "f32":
                return v
            if fmt == "mx":
                return mx_round(torch, v, v.shape[0])
            s = float(scales[units[unit], ROLES.index(role)])
            return fp8_round(torch, v * s, fmt) / s

        act = lambda a: torch.from_numpy(np.array(t["pass%d.act.%d" % (ps, a)],
                                                  dtype=np.float64))
        dact = lambda a: np.array(t["pass%d.dact.%d" % (ps, a)], dtype=np.float64)
        n = np.asarray(t["input"]).shape[0]
        x0 = torch.from_numpy(np.array(t["input"], dtype=np.float64)).reshape(n, -1)
        out, pre, grads = {}, {}, {}
        for j, ly in enumerate(self.g.layers):
            ins = [(x0 if a < 0 else act(a + 1)).reshape([n] + list(d)).requires_grad_(True)
                   for a, d in zip(ly.inputs, ly.in_dims)]
            params = {k[len(ly.name) + 1:]: v.clone().requires_grad_(True)
                      for k, v in self.params.items() if k.startswith(ly.name + ".") and
                      not k.endswith(("running_mean", "running_var", "num_batches_tracked"))}
            params = {ly.name + "." + k: v for k, v in params.items()}
            wq = None
            if ly.kind in ("conv2d", "linear"):
                w = params[ly.name + ".weight"].detach()
                if self.channels and w.dim() == 4:
                    wq = mx_along(torch, w, 1)
                else:
                    wq = rounding("weight", ly.name, w.reshape(w.shape[0], -1)).reshape(w.shape)
            y = self.layer(ly, ins, params, wq, lambda r, v: rounding(r, ly.name, v))
            sim_y = act(j + 1)
            out["act %d (%s)" % (j + 1, ly.name)] = rel(sim_y.numpy().reshape(-1),
                                                       y.detach().numpy().reshape(-1))
            dy = torch.from_numpy(dact(j + 1).reshape(y.shape))
            leaves = [v for v in ins if v is not None] + list(params.values())
            got = torch.autograd.grad(y, leaves, dy, allow_unused=True)
            for a, g in zip(ly.inputs, got[:len(ins)]):
                if a >= 0:
                    pre[a + 1] = pre.get(a + 1, 0) + g.detach().reshape(n, -1)
            for name, g in zip(params, got[len(ins):]):
                grads[name] = g.detach().numpy()
        # the error gradients: each activation's from its consumers' backward, a unit's
        # output's rounded as its grad_output role says; the logits' from the loss
        logits = act(len(self.g.layers)).reshape(n, -1)
        labels = torch.from_numpy(np.array(t["labels"], dtype=np.int64))
        onehot = torch.nn.functional.one_hot(labels, logits.shape[1]).to(torch.float64)
        pre[len(self.g.layers)] = (torch.softmax(logits, 1) - onehot) / n
        for j, ly in enumerate(self.g.layers):
            g = pre[j + 1]
            if ly.name in units and not self.gemm:  # gemm: the unit rounds its own copies
                g = rounding("grad_output", ly.name, g.contiguous())
            out["grad act %d (%s)" % (j + 1, ly.name)] = rel(dact(j + 1).reshape(-1),
                                                            g.numpy().reshape(-1))
        for name, g in grads.items():
            out["grad " + name] = rel(t["pass%d.grad.%s" % (ps, name)], g)
        return out


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nb = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / nb) if nb > 0 else float(np.linalg.norm(a))


def bound(units):
    """The gradient distance bound of the docstring for a model of `units` units."""
    return 4.0 * math.sqrt(2.0 * DELTA * (3 * units + 1) * 2.0 ** -2)


def run_dump(out, model, *sets):
    cmd = [dump_program(), model, str(BATCH), str(SEED), str(PASSES), out] + list(sets)
    env = dict(os.environ, ROLES_DUMP_ACTS="1")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), p.returncode,
                                                       p.stdout.decode(errors="replace")))
    return read_safetensors(out)


@needs_torch
@needs_dump
class RolesReference(unittest.TestCase):
    def compare(self, model, recipe, *sets, opts=None):
        import torch
        o = {"history": 1024, "most_recent": False, "margin": 0, "pow2": False}
        o.update(opts or {})
        with tempfile.TemporaryDirectory() as d:
            dump = run_dump(os.path.join(d, "dump.safetensors"), model,
                            *RECIPE_SETS.get(recipe, ("roles.recipe=" + recipe,)), *sets)
        t = dump.tensors
        ref = Reference(torch, dump, recipe, o, torch.float64)
        self.assertEqual(dump.metadata["units"].split(","), ref.units)
        x = torch.from_numpy(np.array(t["input"], dtype=np.float64))
        labels = torch.from_numpy(np.array(t["labels"], dtype=np.int64))
        tol, ltol = bound(len(ref.units)), LOCAL_BOUND
        whole = model in WHOLE
        for ps in range(1, PASSES + 1):
            what = "%s %s pass %d" % (model, recipe, ps)
            loss, grads = ref.run_pass(x, labels)
            self.check_scales(what, ref, t, ps, tol if whole else None)
            local = ref.local_pass(t, ps)
            lfar = max(local, key=local.get)
            sim_loss = float(t["pass%d.loss" % ps])
            self.assertEqual(set("pass%d.grad.%s" % (ps, k) for k in grads),
                             set(k for k in t if k.startswith("pass%d.grad." % ps)))
            rows = sorted((rel(t["pass%d.grad.%s" % (ps, k)], g), k) for k, g in grads.items())
            print("roles reference: %s: layer by layer largest distance %.2e (%s), bound %.2e; "
                  "whole pass: loss %.7f (reference %.7f), gradient distance largest %.2e (%s), "
                  "median %.2e, bound %s"
                  % (what, local[lfar], lfar, ltol, sim_loss, loss, rows[-1][0], rows[-1][1],
                     rows[len(rows) // 2][0], "%.2e" % tol if whole else "none (not checked)"))
            for k, dist in sorted(local.items()):
                self.assertLess(dist, ltol, "%s: %s: distance %.3e" % (what, k, dist))
            if not whole:
                continue
            self.assertLess(abs(sim_loss - loss), 1e-4 * abs(loss),
                            "%s: loss %.9g, reference %.9g" % (what, sim_loss, loss))
            for dist, k in rows:
                self.assertLess(dist, tol, "%s: gradient of %s: distance %.3e" % (what, k, dist))

    def check_scales(self, what, ref, t, ps, tol):
        amax, used, nxt = (np.asarray(t["pass%d.%s" % (ps, w)], np.float64)
                           for w in ("amax", "scale", "next_scale"))
        for i, u in enumerate(ref.units):
            for q, role in enumerate(ROLES):
                fmt, scaling = ref.recipe[role]
                where = "%s unit %s %s" % (what, u, role)
                if scaling is None:  # MX: the blocks' own scales, no tensor scale
                    self.assertEqual((amax[i, q], used[i, q], nxt[i, q]), (0, 0, 0), where)
                    continue
                st = ref.state[(role, u)]
                # the simulator's amax history (one rounding per pass) and the scales it gives
                hist = [float(t["pass%d.amax" % p][i, q]) for p in range(1, ps + 1)]
                hist = hist[-st.opts["history"]:]

                def from_hist(h):
                    s = st.scale_for(fmt[0], h[-1] if st.opts["most_recent"] else max(h))
                    return 1.0 if s is None else s
                expect_used = 1.0 if ps == 1 else from_hist(hist[:-1])
                self.assertEqual(used[i, q], expect_used, where + ": scale used")
                self.assertEqual(nxt[i, q], from_hist(hist), where + ": next scale")
                # the reference's own: equal where its tensor is (the weights, the network
                # input; then its scales are too), else within the flip bound
                if role == "weight" or (role == "input" and i == 0):
                    self.assertEqual(amax[i, q], np.float32(st.amax), where + ": amax")
                    self.assertEqual(used[i, q], st.used, where + ": scale used (reference)")
                elif tol is not None:
                    self.assertLessEqual(abs(amax[i, q] - st.amax), tol * st.amax,
                                         where + ": amax %.9g, reference %.9g"
                                         % (amax[i, q], st.amax))

    def test_lenet5_fp8_hybrid_delayed(self):
        self.compare("lenet5", "fp8_hybrid_delayed")

    def test_lenet5_mxfp8(self):
        self.compare("lenet5", "mxfp8")

    def test_lenet5_mxfp8_gemm(self):
        self.compare("lenet5", "mxfp8_gemm")

    def test_resnet20_mxfp8_gemm(self):
        self.compare("resnet20", "mxfp8_gemm")

    def test_lenet5_mxfp8_channels(self):
        self.compare("lenet5", "mxfp8_channels")

    def test_resnet20_mxfp8_channels(self):
        self.compare("resnet20", "mxfp8_channels")

    def test_resnet20_fp8_hybrid_delayed(self):
        self.compare("resnet20", "fp8_hybrid_delayed")

    def test_resnet20_mxfp8(self):
        self.compare("resnet20", "mxfp8")

    def test_lenet5_delayed_options(self):
        """margin 1, pow2 scales, the most recent amax: each must change the scales as the
        formula says."""
        self.compare("lenet5", "fp8_hybrid_delayed", "roles.margin=1", "roles.scale=pow2",
                     "roles.amax_compute=most_recent", "roles.amax_history=4",
                     opts={"margin": 1, "pow2": True, "most_recent": True, "history": 4})


if __name__ == "__main__":
    unittest.main()

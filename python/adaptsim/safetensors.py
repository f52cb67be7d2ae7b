"""adaptsim.safetensors: reads safetensors files and adapt-sim checkpoints with numpy.

The format: an 8-byte little-endian header length N, N bytes of JSON
``{"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets"}}``,
then the tensor bytes. :func:`read_safetensors` validates it as adapt-sim's C
reader does (header length, dtypes, shapes against byte ranges, offsets in
bounds and not overlapping) and returns numpy arrays.

A run directory holds two of them:

- ``model.safetensors``: the weights under PyTorch ``state_dict`` names
  (``0.weight``, ``layer1.0.bn1.running_mean``...); metadata ``format``,
  ``model``, ``dataset``, ``epoch``, ``step``, ``seed``, ``rng``;
- ``optim.safetensors``: SGD momentum under the same names, the policy's own
  tensors (``adapt.G.<unit>``...); metadata ``format``, ``epoch``,
  ``sgd_steps``, ``lr``, ``sched_*``, ``policy`` and ``policy_state`` (JSON).

    >>> ck = read_checkpoint("runs/quickstart")
    >>> ck.weights["0.weight"].shape, ck.epoch, ck.policy, ck.policy_state
"""

import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict

import numpy as np

CHECKPOINT_FORMAT = "adapt-sim checkpoint 1"
HEADER_MAX = 100 << 20  # bytes of JSON header accepted (ADAPT_ST_HEADER_MAX)
MAX_DIMS = 8            # dimensions of a tensor (ADAPT_ST_MAX_DIMS)
I64_MAX = (1 << 63) - 1

# dtype name -> numpy dtype (little-endian); BF16 is widened to float32 on read.
DTYPES = {
    "BOOL": np.dtype("?"), "U8": np.dtype("u1"), "I8": np.dtype("i1"),
    "I16": np.dtype("<i2"), "U16": np.dtype("<u2"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"), "I32": np.dtype("<i4"), "U32": np.dtype("<u4"),
    "F32": np.dtype("<f4"), "F64": np.dtype("<f8"), "I64": np.dtype("<i8"),
    "U64": np.dtype("<u8"),
}
NO_NUMPY_TYPE = ("F8_E5M2", "F8_E4M3")


class SafetensorsError(ValueError):
    """A file that is not valid safetensors, or not the checkpoint expected; names the file."""

    def __init__(self, path, message):
        self.path = path
        super().__init__("%s: %s" % (path, message))


@dataclass
class SafeTensors:
    path: str
    tensors: Dict[str, np.ndarray]  # in file order
    metadata: Dict[str, str]
    dtypes: Dict[str, str]          # the file's dtype name of each tensor


def read_safetensors(path) -> SafeTensors:
    """Reads a whole safetensors file into numpy arrays (copies, writable).

    Every malformed file is a SafetensorsError naming it; the header length is checked against
    the file's size and HEADER_MAX before anything else is read."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise SafetensorsError(path, "%d bytes: too short for the 8-byte header length"
                                       % len(head))
            (n,) = struct.unpack("<Q", head)
            if n > HEADER_MAX or n > size - 8:
                raise SafetensorsError(path, "header length %d does not fit in the %d-byte file "
                                       "(at most %d allowed; not a safetensors file?)"
                                       % (n, size, HEADER_MAX))
            raw = head + f.read()
    except OSError as e:
        raise SafetensorsError(path, "cannot read: %s" % e.strerror) from None
    if 8 + n > len(raw):  # the file shrank while being read
        raise SafetensorsError(path, "header length %d does not fit in the %d-byte file"
                               % (n, len(raw)))
    try:
        hdr = json.loads(raw[8:8 + n].decode("utf-8"),
                         object_pairs_hook=lambda kv: _no_duplicates(path, kv))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        if isinstance(e, SafetensorsError):
            raise
        raise SafetensorsError(path, "the header is not JSON: %s" % e) from None
    if not isinstance(hdr, dict):
        raise SafetensorsError(path, "the header is not a JSON object")
    meta = hdr.pop("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise SafetensorsError(path, "__metadata__ must map names to strings")
    base = 8 + n
    size = len(raw) - base
    tensors, dtypes, spans = {}, {}, []
    for name, t in hdr.items():
        if not isinstance(t, dict):
            raise SafetensorsError(path, 'tensor "%s": entry is not an object' % name)
        dt, shape, offs = t.get("dtype"), t.get("shape"), t.get("data_offsets")
        if not isinstance(dt, str):
            raise SafetensorsError(path, 'tensor "%s": dtype must be a string' % name)
        if dt in NO_NUMPY_TYPE:
            raise SafetensorsError(path, 'tensor "%s": dtype %s has no numpy type' % (name, dt))
        if dt not in DTYPES:
            raise SafetensorsError(path, 'tensor "%s": unknown dtype %s' % (name, json.dumps(dt)))
        if (not isinstance(shape, list)
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                           for d in shape)):
            raise SafetensorsError(path, 'tensor "%s": shape must be a list of sizes' % name)
        if len(shape) > MAX_DIMS:
            raise SafetensorsError(path, 'tensor "%s": %d dimensions (at most %d)'
                                   % (name, len(shape), MAX_DIMS))
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise SafetensorsError(path, 'tensor "%s": data_offsets must be [begin, end]' % name)
        b, e = offs
        if not 0 <= b <= e <= size:
            raise SafetensorsError(path, 'tensor "%s": data_offsets [%d, %d] outside the %d-byte '
                                   "data" % (name, b, e, size))
        want = DTYPES[dt].itemsize
        for d in shape:  # Python integers: exact, then held to int64 as the C reader
            want *= d
        if want > I64_MAX or e - b != want:
            raise SafetensorsError(path, 'tensor "%s": %d bytes for %s of shape %s (%d bytes)'
                                   % (name, e - b, dt, tuple(shape), want))
        a = np.frombuffer(raw, dtype=DTYPES[dt], count=want // DTYPES[dt].itemsize,
                          offset=base + b).reshape(shape)
        if dt == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        tensors[name] = a.astype(a.dtype.newbyteorder("="), copy=True)
        dtypes[name] = dt
        spans.append((b, e, name))
    spans.sort()
    for (b0, e0, n0), (b1, _, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise SafetensorsError(path, 'tensors "%s" and "%s" overlap' % (n0, n1))
    return SafeTensors(path=path, tensors=tensors, metadata=meta, dtypes=dtypes)


def _no_duplicates(path, pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise SafetensorsError(path, 'header: duplicate name "%s"' % k)
        d[k] = v
    return d


@dataclass
class Checkpoint:
    """A run's checkpoint: model.safetensors and (when present) optim.safetensors."""
    model_path: str
    optim_path: str             # "" when the run directory has no optim.safetensors
    weights: Dict[str, np.ndarray]   # PyTorch state_dict names
    model_meta: Dict[str, str]
    momentum: Dict[str, np.ndarray]  # SGD momentum of each trainable tensor
    policy_tensors: Dict[str, np.ndarray]  # the policy's own state ("adapt.G.0"...)
    optim_meta: Dict[str, str]
    epoch: int                  # epochs done when it was written
    step: int                   # optimizer steps done
    model: str                  # "lenet5", ...
    policy: str                 # "" without optim.safetensors
    policy_state: Dict[str, Any]  # parsed policy_state metadata ({} without optim)


def read_checkpoint(path) -> Checkpoint:
    """Reads a run directory's checkpoint, or a model.safetensors path (its optim file beside).

    Refuses an optimizer file given as the model, a file from another
    program, and a model/optimizer pair from different epochs.
    """
    path = os.fspath(path)
    model_path = os.path.join(path, "model.safetensors") if os.path.isdir(path) else path
    m = read_safetensors(model_path)
    fmt = m.metadata.get("format")
    if fmt != CHECKPOINT_FORMAT:
        raise SafetensorsError(model_path, "not an adapt-sim checkpoint (format %s, expected %s)"
                               % (json.dumps(fmt), json.dumps(CHECKPOINT_FORMAT)))
    if "sgd_steps" in m.metadata or "policy_state" in m.metadata:
        raise SafetensorsError(model_path, "this is an optimizer checkpoint "
                               "(optim.safetensors), not the model weights")
    epoch = _meta_int(m, "epoch")
    step = _meta_int(m, "step")
    optim_path = os.path.join(os.path.dirname(model_path), "optim.safetensors")
    momentum, ptensors, ometa, pstate, policy = {}, {}, {}, {}, ""
    if os.path.exists(optim_path):
        o = read_safetensors(optim_path)
        if o.metadata.get("format") != CHECKPOINT_FORMAT:
            raise SafetensorsError(optim_path, "not an adapt-sim checkpoint")
        if _meta_int(o, "epoch") != epoch:
            raise SafetensorsError(optim_path, "epoch %s, but %s is of epoch %d: they do not "
                                   "belong together" % (o.metadata["epoch"], model_path, epoch))
        ometa = o.metadata
        policy = ometa.get("policy", "")
        try:
            pstate = json.loads(ometa.get("policy_state", "{}"))
        except (ValueError, RecursionError) as e:
            raise SafetensorsError(optim_path, "policy_state is not JSON: %s" % e) from None
        for k, v in o.tensors.items():
            (momentum if k in m.tensors else ptensors)[k] = v
    else:
        optim_path = ""
    return Checkpoint(model_path=model_path, optim_path=optim_path, weights=m.tensors,
                      model_meta=m.metadata, momentum=momentum, policy_tensors=ptensors,
                      optim_meta=ometa, epoch=epoch, step=step,
                      model=m.metadata.get("model", ""), policy=policy, policy_state=pstate)


def _meta_int(st, key):
    v = st.metadata.get(key)
    try:
        return int(v)
    except (TypeError, ValueError):
        raise SafetensorsError(st.path, "metadata %s = %s is not an integer"
                               % (key, json.dumps(v))) from None

"""adaptsim: read adapt-sim run traces and checkpoints in Python (numpy; PyTorch optional).

    >>> import adaptsim
    >>> t = adaptsim.read_trace("runs/quickstart")          # or .../trace.jsonl
    >>> t.epochs.val_acc, t.steps.wl, t.events, t.test.test_acc
    >>> ck = adaptsim.read_checkpoint("runs/quickstart")    # model + optim .safetensors
    >>> ck.weights["0.weight"], ck.epoch, ck.policy_state
    >>> model = adaptsim.torch_io.load_model("runs/quickstart")   # needs torch

    >>> y = adaptsim.quantize(x, "e4m3", mode="stochastic", seed=1)  # float32 array x

Modules: adaptsim.trace, adaptsim.safetensors, adaptsim.model (model
descriptions, doc/model-format.md), adaptsim.torch_io (imports torch only
when used), adaptsim.quant (adapt-sim's rounding kernels through ctypes: quantize, canonical,
define_format, load_formats; needs the shared object that `make` builds).
"""

from . import model, quant, safetensors, trace, torch_io
from .quant import (ADAPT_STREAM_QUANT, QuantError, QuantStats, canonical, define_format,
                    load_formats, quantize, train_stream)
from .safetensors import (Checkpoint, SafeTensors, SafetensorsError, read_checkpoint,
                          read_safetensors)
from .trace import Event, Table, Trace, TraceError, iter_records, read_trace

__version__ = "0.1.0"

__all__ = ["Checkpoint", "Event", "SafeTensors", "SafetensorsError", "Table", "Trace",
           "TraceError", "iter_records", "read_checkpoint", "read_safetensors", "read_trace",
           "model", "safetensors", "trace", "torch_io", "__version__", "quant", "quantize",
           "canonical", "define_format", "load_formats", "train_stream", "QuantError",
           "QuantStats", "ADAPT_STREAM_QUANT"]

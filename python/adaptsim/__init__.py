"""adaptsim: read adapt-sim run traces and checkpoints in Python (numpy; PyTorch optional).

    >>> import adaptsim
    >>> t = adaptsim.read_trace("runs/quickstart")          # or .../trace.jsonl
    >>> t.epochs.val_acc, t.steps.wl, t.events, t.test.test_acc
    >>> ck = adaptsim.read_checkpoint("runs/quickstart")    # model + optim .safetensors
    >>> ck.weights["0.weight"], ck.epoch, ck.policy_state
    >>> model = adaptsim.torch_io.load_model("runs/quickstart")   # needs torch

Modules: adaptsim.trace, adaptsim.safetensors, adaptsim.model (model
descriptions, doc/model-format.md), adaptsim.torch_io (imports torch only
when used).
"""

from . import model, safetensors, trace, torch_io
from .safetensors import (Checkpoint, SafeTensors, SafetensorsError, read_checkpoint,
                          read_safetensors)
from .trace import Event, Table, Trace, TraceError, iter_records, read_trace

__version__ = "0.1.0"

__all__ = ["Checkpoint", "Event", "SafeTensors", "SafetensorsError", "Table", "Trace",
           "TraceError", "iter_records", "read_checkpoint", "read_safetensors", "read_trace",
           "model", "safetensors", "trace", "torch_io", "__version__"]

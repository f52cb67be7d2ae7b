"""adaptsim.torch_io: adapt-sim weights in PyTorch (needs torch; imported on first use).

Checkpoints already use PyTorch ``state_dict`` names, so the weights load
with ``load_state_dict(strict=True)`` into the matching ``nn.Module``.
:func:`build_model` makes that module from a trace header: from the model
description the header carries (:mod:`adaptsim.model`, any described
network), or, for traces written before headers carried it, from the layer
list: an ``nn.Sequential`` for LeNet-5 and AlexNet, a CIFAR ResNet (basic
blocks, named ``conv1``, ``layer1.0.conv1``, ``layer2.0.shortcut.0``...) for
ResNet-20.

    >>> model = load_model("runs/quickstart")       # header from trace.jsonl
    >>> model.eval(); logits = model(x)             # x: (N, C, H, W), normalised as in training

The module computes in float32: for a quantized run this is the trained
master weights in full precision, not the run's quantized evaluation.
"""

import os

import numpy as np

from .safetensors import read_checkpoint
from .trace import read_trace


def _torch():
    try:
        import torch  # noqa: F401
        import torch.nn  # noqa: F401
    except ImportError as e:
        raise ImportError("adaptsim.torch_io needs PyTorch (Debian: python3-torch; "
                          "pip: torch): %s" % e) from None
    return torch


def state_dict(weights):
    """numpy weights (a dict, a Checkpoint or a model.safetensors path) as torch tensors."""
    torch = _torch()
    if isinstance(weights, (str, os.PathLike)):
        weights = read_checkpoint(weights).weights
    elif hasattr(weights, "weights"):
        weights = weights.weights
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}


def _conv(nn, ly):
    cin, cout, k = ly["in"][0], ly["out"][0], ly["k"]
    groups, dilation = ly.get("groups", 1), ly.get("dilation", 1)
    bias = ly["params"] != cout * (cin // groups) * k * k
    return nn.Conv2d(cin, cout, k, ly["stride"], ly["pad"], dilation=dilation, groups=groups,
                     bias=bias)


def _linear(nn, ly):
    fin = int(np.prod(ly["in"]))
    fout = int(np.prod(ly["out"]))
    return nn.Linear(fin, fout, bias=ly["params"] != fin * fout)


def _layer(nn, ly, global_pool=False):
    kind = ly["kind"]
    if kind == "conv2d":
        return _conv(nn, ly)
    if kind == "linear":
        return _linear(nn, ly)
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(ly["in"][0])
    if kind == "relu":
        return nn.ReLU()
    if kind == "tanh":
        return nn.Tanh()
    if kind == "flatten":
        return nn.Flatten()
    if kind in ("maxpool2d", "avgpool2d"):
        if global_pool or "k" not in ly:
            return nn.AdaptiveAvgPool2d(1) if kind == "avgpool2d" else nn.AdaptiveMaxPool2d(1)
        cls = nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d
        return cls(ly["k"], ly["stride"], ly["pad"])
    raise ValueError("layer %s: no PyTorch module for kind %s" % (ly["name"], kind))


def build_model(header):
    """The PyTorch module of a trace header (a dict, a Trace or a trace/run path)."""
    _torch()
    import torch.nn as nn
    if isinstance(header, (str, os.PathLike)):
        header = read_trace(header, partial=True).header
    elif hasattr(header, "header"):
        header = header.header
    desc = header["model"].get("description")
    if desc:
        from .model import build_torch, parse
        return build_torch(parse(desc["text"], header["model"]["classes"], desc["args"],
                                 desc["file"]))
    layers = header["model"]["layers"]
    if all(ly["name"].isdigit() for ly in layers):
        if [int(ly["name"]) for ly in layers] != list(range(len(layers))):
            raise ValueError("layers are not numbered 0..%d in order" % (len(layers) - 1))
        return nn.Sequential(*[_layer(nn, ly) for ly in layers])
    return _ResNet(nn, layers)


def load_model(run, trace=None):
    """The model of a run directory with its checkpoint's weights loaded (strict), in eval mode.

    ``trace``: the trace whose header describes the model (default: the run's
    trace.jsonl).
    """
    run = os.fspath(run)
    model = build_model(trace or os.path.join(run, "trace.jsonl"))
    model.load_state_dict(state_dict(run), strict=True)
    return model.eval()


def _ResNet(nn, layers):
    """A CIFAR ResNet from the header's layers (stem, stages of basic blocks, pool, linear)."""
    import torch.nn.functional as F

    by_name = {ly["name"]: ly for ly in layers}

    class Block(nn.Module):
        def __init__(self, prefix):
            super().__init__()
            self.conv1 = _conv(nn, by_name[prefix + "conv1"])
            self.bn1 = nn.BatchNorm2d(by_name[prefix + "bn1"]["in"][0])
            self.conv2 = _conv(nn, by_name[prefix + "conv2"])
            self.bn2 = nn.BatchNorm2d(by_name[prefix + "bn2"]["in"][0])
            self.shortcut = nn.Sequential()
            if prefix + "shortcut.0" in by_name:
                self.shortcut = nn.Sequential(
                    _conv(nn, by_name[prefix + "shortcut.0"]),
                    nn.BatchNorm2d(by_name[prefix + "shortcut.1"]["in"][0]))

        def forward(self, x):
            y = F.relu(self.bn1(self.conv1(x)))
            return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            for name in ("conv1", "bn1", "linear"):
                if name not in by_name:
                    raise ValueError("model %s: no layer %r; only sequential models and CIFAR "
                                     "ResNets are built" % (layers[0]["name"], name))
            self.conv1 = _conv(nn, by_name["conv1"])
            self.bn1 = nn.BatchNorm2d(by_name["bn1"]["in"][0])
            stages = {}
            for ly in layers:
                parts = ly["name"].split(".")
                if len(parts) >= 3 and parts[0].startswith("layer"):
                    stages.setdefault(parts[0], []).append(parts[1])
            self.stages = []
            for s, blocks in stages.items():
                seq = nn.Sequential(*[Block("%s.%s." % (s, b)) for b in dict.fromkeys(blocks)])
                setattr(self, s, seq)
                self.stages.append(s)
            self.linear = _linear(nn, by_name["linear"])

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            for s in self.stages:
                x = getattr(self, s)(x)
            return self.linear(F.adaptive_avg_pool2d(x, 1).flatten(1))

    return ResNet()

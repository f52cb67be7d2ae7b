#!/usr/bin/python3
"""Training throughput of one model in PyTorch, measured as adapt-bench train measures it.

The same networks as adapt-sim's (built from the same model description, models/NAME.model,
by python/adaptsim/model.py; state_dict names match our checkpoints), float32, one training step = forward, softmax
cross-entropy, backward, SGD with momentum 0.9, on a pool of four synthetic batches of the
model's input shape (approximately standard normal inputs, uniform labels). After WARMUP steps,
one step is timed to choose the steps per sample (at least MIN_SAMPLE_S seconds a sample),
then REPEATS samples are taken; the output is one JSON line with the median, lowest and highest
images per second, in adapt-bench train's keys.

  scripts/torch_train_step.py --model NAME|FILE.model[,...]   (lenet5, resnet20, vgg11, ...)
                              [--batch 128[,...]] [--classes 10] [--repeats 7] [--warmup 3]
                              [--min-sample-s 0.5] [--threads N] [--device cpu|cuda]

Threads: --threads, else OMP_NUM_THREADS, else every CPU (torch.set_num_threads). Needs
PyTorch (Debian: python3-torch). scripts/bench_vs_torch.py runs it beside adapt-bench train.

--device cuda: the model, the batches and the optimizer live on GPU 0; float32 means float32
(TF32 off for cuBLAS and cuDNN), cuDNN picks its fastest algorithms (cudnn.benchmark), and each
sample ends with torch.cuda.synchronize() so it times the GPU's work, not the launches.
"""
import argparse
import json
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)


def build(name, classes):
    """The PyTorch module of an adapt-sim model (a built-in name or a .model file) and its
    input shape, from the same model description the simulator trains (python/adaptsim)."""
    sys.path.insert(0, os.path.join(top, "python"))
    from adaptsim.model import build_torch, load
    g = load(name, classes, models_dir=os.path.join(top, "models"))
    return build_torch(g), g.input


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="NAME[,NAME...]: one line each")
    ap.add_argument("--batch", default="128", help="B[,B...]: one line each")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-sample-s", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = ap.parse_args()
    try:
        batches = [int(b) for b in a.batch.split(",")]
    except ValueError:
        sys.exit("torch_train_step: --batch expects whole numbers separated by commas")
    if min(batches) < 1 or a.classes < 2 or not 1 <= a.repeats <= 64 or a.warmup < 0 \
            or not a.min_sample_s > 0:
        sys.exit("torch_train_step: need --batch >= 1, --classes >= 2, --repeats 1..64, "
                 "--warmup >= 0, --min-sample-s > 0")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        sys.exit("torch_train_step: needs PyTorch (Debian: apt-get install python3-torch)")
    threads = a.threads or int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or os.cpu_count()
    torch.set_num_threads(threads)
    for model in a.model.split(","):
        for batch in batches:
            one_model(torch, F, a, model, batch, threads)


def one_model(torch, F, a, model, batch, threads):
    """One JSON line: the float32 training throughput of model at batch."""
    torch.manual_seed(1)
    try:
        net, shape = build(model, a.classes)
    except (ValueError, OSError) as e:
        sys.exit("torch_train_step: %s" % e)
    cuda = a.device == "cuda"
    if cuda:
        if not torch.cuda.is_available():
            sys.exit("torch_train_step: --device cuda: PyTorch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    dev = torch.device(a.device)
    net = net.to(dev)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(7)
    # approximately standard normal, as adapt-bench train: a sum of 4 uniforms, scaled
    pool = [((torch.rand(4, batch, *shape, generator=g).sum(0) - 2.0) * 3.0 ** 0.5,
             torch.randint(0, a.classes, (batch,), generator=g)) for _ in range(4)]
    pool = [(x.to(dev), y.to(dev)) for x, y in pool]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    it = [0]

    def step():
        x, y = pool[it[0] & 3]
        it[0] += 1
        opt.zero_grad(set_to_none=False)
        F.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    step()
    sync()
    one = time.perf_counter() - t0
    steps = max(1, int(-(-a.min_sample_s // max(one, 1e-6))))
    ips = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        ips.append(batch * steps / (time.perf_counter() - t0))
    print(json.dumps({"bench": "torch_train", "model": model, "batch": batch,
                      "threads": threads, "torch": torch.__version__, "device": a.device,
                      "gpu": torch.cuda.get_device_name(0) if cuda else None,
                      "img_per_s_median": round(statistics.median(ips), 1),
                      "img_per_s_min": round(min(ips), 1), "img_per_s_max": round(max(ips), 1),
                      "steps_per_sample": steps, "repeats": a.repeats}), flush=True)


if __name__ == "__main__":
    main()

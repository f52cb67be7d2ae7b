#!/usr/bin/python3
"""Per-layer PyTorch reference for tests/bench_layers (same layers, shapes and timing rules).

Usage:
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 tests/bench_layers_torch.py [lenet|alexnet|resnet ...]
      [--threads T] [--cpu-clock] [--batch N]

For each layer of LeNet-5, AlexNet-CIFAR and ResNet-20 at batch N (default
128): the time of a forward under no_grad, and of forward + backward (input
gradient requested except for a model's first layer), in ms. Each figure is
the median over 5 clean samples of >= 30 ms (a sample during which other
processes used more than 10% of a core is discarded; after 30 samples, the
fastest sample is taken). --cpu-clock times by process CPU time instead of
wall time (use with --threads 1 on a shared host; no sample is discarded).
"""
import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("models", nargs="*")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--cpu-clock", action="store_true")
ap.add_argument("--batch", type=int, default=128)
A = ap.parse_args()
torch.set_num_threads(A.threads)
clk = time.process_time if A.cpu_clock else time.perf_counter
N = A.batch
def conv(cin, h, cout, k, s=1, p=0, bias=True, dx=True):
    m = nn.Conv2d(cin, cout, k, stride=s, padding=p, bias=bias)
    return m, (cin, h, h), dx
def mod(m, shape, dx=True): return m, shape, dx
def dwconv(c, h, s):
    return nn.Conv2d(c, c, 3, stride=s, padding=1, groups=c, bias=False), (c, h, h), True
L = {
 'lenet': [
  ('conv1 1x32x32->6 k5', *conv(1, 32, 6, 5, dx=False)),
  ('tanh 6x28x28', *mod(nn.Tanh(), (6, 28, 28))),
  ('avgpool 6x28x28', *mod(nn.AvgPool2d(2), (6, 28, 28))),
  ('conv2 6x14x14->16 k5', *conv(6, 14, 16, 5)),
  ('tanh 16x10x10', *mod(nn.Tanh(), (16, 10, 10))),
  ('avgpool 16x10x10', *mod(nn.AvgPool2d(2), (16, 10, 10))),
  ('conv3 16x5x5->120 k5', *conv(16, 5, 120, 5)),
  ('tanh 120', *mod(nn.Tanh(), (120,))),
  ('fc 120->84', *mod(nn.Linear(120, 84), (120,))),
  ('tanh 84', *mod(nn.Tanh(), (84,))),
  ('fc 84->10', *mod(nn.Linear(84, 10), (84,))),
 ],
 'alexnet': [
  ('conv1 3x32x32->64 k11 s4 p5', *conv(3, 32, 64, 11, 4, 5, dx=False)),
  ('relu 64x8x8', *mod(nn.ReLU(), (64, 8, 8))),
  ('maxpool 64x8x8', *mod(nn.MaxPool2d(2), (64, 8, 8))),
  ('conv2 64x4x4->192 k5 p2', *conv(64, 4, 192, 5, 1, 2)),
  ('relu 192x4x4', *mod(nn.ReLU(), (192, 4, 4))),
  ('maxpool 192x4x4', *mod(nn.MaxPool2d(2), (192, 4, 4))),
  ('conv3 192x2x2->384 k3 p1', *conv(192, 2, 384, 3, 1, 1)),
  ('relu 384x2x2', *mod(nn.ReLU(), (384, 2, 2))),
  ('conv4 384x2x2->256 k3 p1', *conv(384, 2, 256, 3, 1, 1)),
  ('relu 256x2x2', *mod(nn.ReLU(), (256, 2, 2))),
  ('conv5 256x2x2->256 k3 p1', *conv(256, 2, 256, 3, 1, 1)),
  ('relu 256x2x2 b', *mod(nn.ReLU(), (256, 2, 2))),
  ('maxpool 256x2x2', *mod(nn.MaxPool2d(2), (256, 2, 2))),
  ('fc 256->100', *mod(nn.Linear(256, 100), (256,))),
 ],
 'resnet': [
  ('conv 3x32x32->16 k3 p1', *conv(3, 32, 16, 3, 1, 1, False, dx=False)),
  ('conv 16x32x32->16 k3 p1 (x6)', *conv(16, 32, 16, 3, 1, 1, False)),
  ('conv 16x32x32->32 k3 s2 p1', *conv(16, 32, 32, 3, 2, 1, False)),
  ('conv 16x32x32->32 k1 s2', *conv(16, 32, 32, 1, 2, 0, False)),
  ('conv 32x16x16->32 k3 p1 (x5)', *conv(32, 16, 32, 3, 1, 1, False)),
  ('conv 32x16x16->64 k3 s2 p1', *conv(32, 16, 64, 3, 2, 1, False)),
  ('conv 32x16x16->64 k1 s2', *conv(32, 16, 64, 1, 2, 0, False)),
  ('conv 64x8x8->64 k3 p1 (x5)', *conv(64, 8, 64, 3, 1, 1, False)),
  ('bn 16x32x32 (x7)', *mod(nn.BatchNorm2d(16), (16, 32, 32))),
  ('bn 32x16x16 (x7)', *mod(nn.BatchNorm2d(32), (32, 16, 16))),
  ('bn 64x8x8 (x7)', *mod(nn.BatchNorm2d(64), (64, 8, 8))),
  ('relu 16x32x32 (x7)', *mod(nn.ReLU(), (16, 32, 32))),
  ('relu 32x16x16 (x6)', *mod(nn.ReLU(), (32, 16, 16))),
  ('relu 64x8x8 (x6)', *mod(nn.ReLU(), (64, 8, 8))),
  ('gap 64x8x8', *mod(nn.AdaptiveAvgPool2d(1), (64, 8, 8))),
  ('fc 64->10', *mod(nn.Linear(64, 10), (64,))),
 ],
 'vgg': [
  ('conv 3x32x32->64 k3 p1', *conv(3, 32, 64, 3, 1, 1, dx=False)),
  ('conv 64x16x16->128 k3 p1', *conv(64, 16, 128, 3, 1, 1)),
  ('conv 128x8x8->256 k3 p1', *conv(128, 8, 256, 3, 1, 1)),
  ('conv 256x8x8->256 k3 p1', *conv(256, 8, 256, 3, 1, 1)),
  ('conv 256x4x4->512 k3 p1', *conv(256, 4, 512, 3, 1, 1)),
  ('conv 512x4x4->512 k3 p1', *conv(512, 4, 512, 3, 1, 1)),
  ('conv 512x2x2->512 k3 p1 (x2)', *conv(512, 2, 512, 3, 1, 1)),
  ('bn 64x32x32', *mod(nn.BatchNorm2d(64), (64, 32, 32))),
  ('bn 128x16x16', *mod(nn.BatchNorm2d(128), (128, 16, 16))),
  ('bn 256x8x8 (x2)', *mod(nn.BatchNorm2d(256), (256, 8, 8))),
  ('bn 512x4x4 (x2)', *mod(nn.BatchNorm2d(512), (512, 4, 4))),
  ('bn 512x2x2 (x2)', *mod(nn.BatchNorm2d(512), (512, 2, 2))),
 ],
 'mobilenet': [
  ('dw 32x32x32 k3 p1', *dwconv(32, 32, 1)),
  ('dw 96x32x32 k3 p1', *dwconv(96, 32, 1)),
  ('dw 144x32x32 k3 p1', *dwconv(144, 32, 1)),
  ('dw 144x32x32 k3 s2 p1', *dwconv(144, 32, 2)),
  ('dw 192x16x16 k3 p1 (x2)', *dwconv(192, 16, 1)),
  ('dw 192x16x16 k3 s2 p1', *dwconv(192, 16, 2)),
  ('dw 384x8x8 k3 p1 (x4)', *dwconv(384, 8, 1)),
  ('dw 576x8x8 k3 p1 (x2)', *dwconv(576, 8, 1)),
  ('dw 576x8x8 k3 s2 p1', *dwconv(576, 8, 2)),
  ('dw 960x4x4 k3 p1 (x3)', *dwconv(960, 4, 1)),
 ],
}
HZ = os.sysconf("SC_CLK_TCK")
def sysbusy():
    v = [int(t) for t in open("/proc/stat").readline().split()[1:9]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / HZ
def selfcpu():
    r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime
DIRTY = [0]
def tm(f, minT=0.03, reps=5):
    for _ in range(3): f()
    t0 = clk(); f(); t1 = clk() - t0
    it = max(1, int(minT / max(t1, 1e-6)))
    clean, allv = [], []
    while len(clean) < reps and len(allv) < 30:
        b0, s0 = sysbusy(), selfcpu()
        t0 = clk()
        for _ in range(it): f()
        w = clk() - t0
        foreign = ((sysbusy() - b0) - (selfcpu() - s0)) / w
        allv.append(w / it)
        if foreign <= 0.10 or A.cpu_clock: clean.append(w / it)
        else: DIRTY[0] += 1
    if len(clean) < reps: return min(allv) * 1e3
    return statistics.median(clean) * 1e3
for net in A.models or L:
    print('#', net)
    for name, m, shape, dx in L[net]:
        x = torch.randn(N, *shape, requires_grad=dx)
        y = m(x); dy = torch.randn_like(y)
        def fwd():
            with torch.no_grad(): m(x)
        def fb():
            for p in m.parameters(): p.grad = None
            y = m(x); y.backward(dy)
        print('%-32s fwd %8.3f  fwd+bwd %8.3f ms' % (name, tm(fwd), tm(fb)))
    # add
    if net == 'resnet':
        for c, h in ((16, 32), (32, 16), (64, 8)):
            a = torch.randn(N, c, h, h, requires_grad=True)
            b = torch.randn(N, c, h, h, requires_grad=True)
            dy = torch.randn(N, c, h, h)
            def fb():
                y = a + b; y.backward(dy)
            print('%-32s fwd+bwd %8.3f ms' % ('add %dx%dx%d (x3)' % (c, h, h), tm(fb)))
    lg = torch.randn(N, 10, requires_grad=True); lab = torch.randint(0, 10, (N,))
    def fb():
        l = F.cross_entropy(lg, lab); l.backward()
    print('%-32s fwd+bwd %8.3f ms' % ('xent 10', tm(fb)))
    print('# discarded samples', DIRTY[0]); DIRTY[0] = 0

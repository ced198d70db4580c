#!/usr/bin/python3
"""micro_valgrad_torch — the PyTorch twin of bench/micro_valgrad.c.

SimpleChains.jl's README micro-benchmark: one value-and-gradient of
24 -> 8 tanh -> 2 (no biases), float32, batch 200, squared loss summed over the 2 outputs
and averaged over the batch (simplechain's SC_LOSS_SQUARED:
L = (1/B) sum_b sum_j (yhat_bj - t_bj)^2).  One call = forward, loss, loss.backward(),
with the gradients cleared before each call (p.grad = None), so every call computes fresh
gradients like sc_valgrad writes a fresh g.

Timing like the C program: a warm-up of calls/10 calls, then --reps repetitions of
--calls calls each; a repetition's time / calls is its time per call; the RESULT line
gives the median (and min, max) over the repetitions in microseconds.

x is uniform in [-0.5, 0.5), y uniform in [0, 1), weights Glorot-uniform, as in the C
program (same distributions, not the same numbers, so the losses differ slightly).

Run with the Debian interpreter and bench_toy.sh's environment, e.g.
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OPENBLAS_CORETYPE=SkylakeX \\
    ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 bench/micro_valgrad_torch.py
Last line:
    RESULT engine=pytorch bench=valgrad_24_8_2_b200 threads=1 kernels=.. us_per_call=.. min=.. max=.. loss=..
"""
import argparse
import sys
import time

import torch
from torch import nn
import torch.nn.functional as F

B, IN, HID, OUT = 200, 24, 8, 2


def positive_int(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {s}")
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=positive_int, default=15, help="repetitions (default 15)")
    ap.add_argument("--calls", type=positive_int, default=2000,
                    help="calls per repetition (default 2000)")
    ap.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x = torch.rand(B, IN, dtype=torch.float32) - 0.5
    y = torch.rand(B, OUT, dtype=torch.float32)
    model = nn.Sequential(nn.Linear(IN, HID, bias=False), nn.Tanh(),
                          nn.Linear(HID, OUT, bias=False)).float()
    for mod in model:
        if isinstance(mod, nn.Linear):
            nn.init.xavier_uniform_(mod.weight)
    params = list(model.parameters())
    inv_b = 1.0 / B

    def valgrad():
        for p in params:
            p.grad = None
        # sum over outputs and batch in one fused op, then the mean over the batch
        loss = F.mse_loss(model(x), y, reduction="sum") * inv_b
        loss.backward()
        return loss

    loss = None
    for _ in range(max(1, args.calls // 10)):
        loss = valgrad()
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            loss = valgrad()
        times.append((time.perf_counter() - t0) / args.calls * 1e6)
    times.sort()
    n = len(times)
    med = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    cap = torch.__config__.show().split("CPU capability usage:")[-1].split("\n")[0].strip()
    print(f"RESULT engine=pytorch bench=valgrad_24_8_2_b200 threads={args.threads} "
          f"kernels=torch{torch.__version__}-{cap} us_per_call={med:.3f} min={times[0]:.3f} "
          f"max={times[-1]:.3f} loss={loss.item():.6f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

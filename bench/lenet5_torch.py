#!/usr/bin/python3
"""PyTorch twin of examples/lenet5.c: the same LeNet5, ADAM, logit cross-entropy (mean
over the batch), shuffled minibatches, float32, on MNIST-style IDX files (raw or .gz).

Times the training loop of each epoch (data already in memory as tensors, shuffling by
index like simplechain); optionally evaluates the test accuracy after each epoch (not
timed). Prints a RESULT line in the format of examples/lenet5.

  /usr/bin/python3 bench/lenet5_torch.py --data DIR [--epochs N] [--batch B] [--lr LR]
                                         [--threads T] [--seed S] [--limit N] [--no-eval]
                                         [--precision fp32|bf16]
--precision bf16 runs the forward pass under torch.autocast("cpu", dtype=torch.bfloat16)
(PyTorch's CPU mixed precision: bf16 convolutions and linear layers, fp32 master weights and
optimizer), the twin of `build/lenet5 --precision bf16`.
Run it with Debian's python3-torch (/usr/bin/python3); see bench/torch_env.sh for the
fast BLAS configuration the benchmark scripts use.
"""
import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn as nn


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 8:
        raise ValueError(f"{path}: not a uint8 IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def find(d, name):
    for cand in (os.path.join(d, name + ".gz"), os.path.join(d, name)):
        if os.path.exists(cand):
            return cand
    raise FileNotFoundError(f"{d}: no {name}[.gz]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--no-eval", action="store_true")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    xtr = read_idx(find(a.data, "train-images-idx3-ubyte")).astype(np.float32) / 255
    ytr = read_idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64)
    xte = read_idx(find(a.data, "t10k-images-idx3-ubyte")).astype(np.float32) / 255
    yte = read_idx(find(a.data, "t10k-labels-idx1-ubyte")).astype(np.int64)
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    xtr = torch.from_numpy(xtr).reshape(-1, 1, 28, 28)
    ytr = torch.from_numpy(ytr)
    xte = torch.from_numpy(xte).reshape(-1, 1, 28, 28)
    yte = torch.from_numpy(yte)
    n = xtr.shape[0]

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    model = nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(256, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    lossf = nn.CrossEntropyLoss()

    # warm-up (untimed): a few steps, then restore the initial state
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for i in range(3):
        opt.zero_grad(set_to_none=True)
        with autocast():
            out = model(xtr[:a.batch])
        lossf(out.float(), ytr[:a.batch]).backward()
        opt.step()
    model.load_state_dict(state)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)

    g = torch.Generator().manual_seed(a.seed)
    times, acc = [], float("nan")
    for ep in range(a.epochs):
        perm = torch.randperm(n, generator=g)
        t0 = time.perf_counter()
        tot = 0.0
        for b0 in range(0, n, a.batch):
            idx = perm[b0:b0 + a.batch]
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = model(xtr[idx])
            loss = lossf(out.float(), ytr[idx])
            loss.backward()
            opt.step()
            tot += loss.item() * len(idx)
        dt = time.perf_counter() - t0
        times.append(dt)
        if not a.no_eval:
            with torch.no_grad():
                with autocast():
                    correct = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                                  for i in range(0, xte.shape[0], 1000))
            acc = correct / xte.shape[0]
        print(f"epoch {ep + 1}/{a.epochs}  train loss {tot / n:.4f}  test accuracy "
              f"{100 * acc:.2f} %  {dt:.3f} s ({n / dt:.0f} images/s)", flush=True)
    med = sorted(times)[len(times) // 2]
    print(f"RESULT engine=pytorch bench=lenet5 epochs={a.epochs} batch={a.batch} "
          f"threads={a.threads} train={n} precision={a.precision} seconds_per_epoch={med:.4f} test_accuracy={acc:.4f}")


if __name__ == "__main__":
    sys.exit(main())

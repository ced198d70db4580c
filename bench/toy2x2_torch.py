#!/usr/bin/python3
"""toy2x2_torch — the PyTorch twin of examples/toy2x2.c, for bench/bench_toy.sh.

Trains 4 -> 32 tanh -> 16 tanh -> 4 (identity) to map a 2x2 matrix to its matrix
exponential: X = 4 standard normals per sample read as [[x0, x1], [x2, x3]], Y = the 4
entries of expm(X) from the closed form for 2x2 matrices, computed in double (numpy) and
stored as float32.  A separate test set of the same size.  Full-batch torch.optim.Adam
(lr 1e-3), nn.MSELoss() (mean over samples and outputs), float32.

The data come from numpy's generator, not from the C program's splitmix64/Box-Muller, so
they are the same distribution but not the same numbers.  The layers are initialised like
the C engine (Glorot-uniform weights, zero biases) so that the losses are comparable;
ADAM is invariant to the loss scale (up to eps), so MSELoss(mean) trains like the C
engine's squared loss summed over the 4 outputs.

A few warm-up steps run first on the same model and are then undone (parameters restored,
a fresh optimizer), so the timed loop performs exactly --steps steps from the initial
parameters.  Only that loop is timed.

Run with the Debian interpreter (/usr/bin/python3 has python3-torch):
    /usr/bin/python3 bench/toy2x2_torch.py --steps 1000 --threads 1

The last line has the same format as toy2x2's:
    RESULT engine=pytorch steps=.. samples=.. threads=.. seconds=.. train_mse=.. test_mse=.. gflops=..
"""
import argparse
import copy
import os
import sys
import time

import numpy as np
import torch
from torch import nn

# multiply-adds of one sample's forward + pullback, x2 for flops (same as toy2x2.c):
# forward W1..W3 (4*32 + 32*16 + 16*4 = 704), dW the same, dX for layers 2 and 3 (576)
FLOPS_PER_SAMPLE_STEP = 2.0 * (704 + 704 + 576)


def expm2x2(m):
    """exp of each [[a, b], [c, d]] row of m (n x 4, float64), closed form.

    A = s I + B with s = (a+d)/2, B traceless, B^2 = q I with q = ((a-d)/2)^2 + b c, so
    exp(A) = e^s (ch(q) I + sh(q) B), ch = cosh(sqrt q), sh = sinh(sqrt q)/sqrt q
    (cos/sin of sqrt(-q) for q < 0, a series near 0)."""
    a, b, c, d = m[:, 0], m[:, 1], m[:, 2], m[:, 3]
    s = 0.5 * (a + d)
    h = 0.5 * (a - d)
    q = h * h + b * c
    r = np.sqrt(np.abs(q))
    small = np.abs(q) < 1e-8
    rs = np.where(small, 1.0, r)  # avoid 0/0 in the branches not taken
    ch = np.where(q > 0, np.cosh(r), np.cos(r))
    sh = np.where(q > 0, np.sinh(rs) / rs, np.sin(rs) / rs)
    ch = np.where(small, 1 + q / 2 + q * q / 24, ch)
    sh = np.where(small, 1 + q / 6 + q * q / 120, sh)
    es = np.exp(s)
    return np.stack([es * (ch + sh * h), es * sh * b, es * sh * c, es * (ch - sh * h)], axis=1)


def make_data(n, rng):
    m = rng.standard_normal((n, 4))  # float64
    e = expm2x2(m)
    return (torch.from_numpy(m.astype(np.float32)).contiguous(),
            torch.from_numpy(e.astype(np.float32)).contiguous())


def build_model():
    model = nn.Sequential(
        nn.Linear(4, 32), nn.Tanh(),
        nn.Linear(32, 16), nn.Tanh(),
        nn.Linear(16, 4),
    )
    for mod in model:
        if isinstance(mod, nn.Linear):  # like sc_params_init: Glorot-uniform, zero bias
            nn.init.xavier_uniform_(mod.weight)
            nn.init.zeros_(mod.bias)
    return model.float()


def positive_int(s):
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {s}")
    return v


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=positive_int, default=10000, help="ADAM steps (default 10000)")
    ap.add_argument("--samples", type=positive_int, default=10000,
                    help="training samples; a separate test set of the same size (default 10000)")
    ap.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    ap.add_argument("--seed", type=int, default=1, help="seed for data and init (default 1)")
    ap.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    ap.add_argument("--warmup", type=int, default=5,
                    help="untimed warm-up steps, undone before the timed run (default 5)")
    ap.add_argument("--foreach", choices=["auto", "on", "off"], default="auto",
                    help="Adam's multi-tensor (foreach) implementation (default: torch's choice)")
    ap.add_argument("--quiet", action="store_true", help="only the RESULT line")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    x, y = make_data(args.samples, rng)
    xt, yt = make_data(args.samples, rng)

    model = build_model()
    loss_fn = nn.MSELoss()  # mean over samples and the 4 outputs
    foreach = {"auto": None, "on": True, "off": False}[args.foreach]

    def make_opt():
        return torch.optim.Adam(model.parameters(), lr=args.lr, foreach=foreach)

    def step(opt):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    # warm-up (allocator, BLAS/OpenMP thread pools, first-call dispatch), then undo it
    if args.warmup > 0:
        init_state = copy.deepcopy(model.state_dict())
        opt = make_opt()
        for _ in range(args.warmup):
            step(opt)
        with torch.no_grad():
            model.load_state_dict(init_state)
    opt = make_opt()

    t0 = time.perf_counter()
    for _ in range(args.steps):
        step(opt)
    seconds = time.perf_counter() - t0

    with torch.no_grad():
        train_mse = loss_fn(model(x), y).item()
        test_mse = loss_fn(model(xt), yt).item()
    gflops = FLOPS_PER_SAMPLE_STEP * args.samples * args.steps / seconds * 1e-9
    if not args.quiet:
        cap = torch.__config__.show().split("CPU capability usage:")[-1].split("\n")[0].strip()
        print(f"toy2x2_torch: torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
              f"CPU capability {cap}, LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')!r}, "
              f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')!r}")
        print(f"done: {args.steps} steps in {seconds:.3f} s ({args.steps / seconds:.0f} steps/s, "
              f"{gflops:.1f} GFLOP/s on the matmuls)")
        print(f"train MSE {train_mse:.5f}   test MSE {test_mse:.5f}")
    print(f"RESULT engine=pytorch steps={args.steps} samples={args.samples} threads={args.threads} "
          f"seconds={seconds:.4f} train_mse={train_mse:.6f} test_mse={test_mse:.6f} "
          f"gflops={gflops:.2f}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

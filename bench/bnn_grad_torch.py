#!/usr/bin/python3
"""PyTorch twin of bench/bnn_grad.c: the log density of examples/bnn_model.h's Bayesian
neural network (1 -> H relu -> 1, theta ~ N(0, I), sigma ~ Gamma(0.1, 1), Gaussian
likelihood) in the linked parameterisation v = (theta, log sigma), and its gradient by
torch.autograd, float64, one thread. The same data (the same generator, re-implemented
here) and the same evaluation point; prints the log density so the two can be compared.

Times, in ns per call (median of repetitions of the mean over many calls):
  grad:  v.grad from lp.backward() with the model written as a plain function of the
         flat vector (the way a PPL's AD backend sees it)
  module: the same with an nn.Sequential whose parameters are loaded from v
          (torch.nn.utils.vector_to_parameters) every call
grad_ns is the faster of the two."""
import argparse
import math

import torch
import torch.nn as nn

from twin_timing import timeit

MASK = (1 << 64) - 1


def splitmix(state):
    state[0] = (state[0] + 0x9E3779B97F4A7C15) & MASK
    z = state[0]
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def unif(state):
    return ((splitmix(state) >> 11) + 0.5) * 2.0**-53


def bnn_data(n, seed):
    s = [seed]
    xs, ys = [], []
    for _ in range(n):
        x = -3 + 6 * unif(s)
        u, w = unif(s), unif(s)
        noise = math.sqrt(-2 * math.log(u)) * math.cos(6.283185307179586 * w)
        xs.append(x)
        ys.append(math.sin(1.5 * x) + 0.2 * x + 0.15 * noise)
    return xs, ys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--points", type=int, default=100)
    ap.add_argument("--data-seed", type=int, default=2454)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    H, N = a.hidden, a.points
    xs, ys = bnn_data(N, a.data_seed)
    x = torch.tensor(xs, dtype=torch.float64).reshape(N, 1)
    y = torch.tensor(ys, dtype=torch.float64)
    P = 3 * H + 1
    v0 = [0.5 * math.sin(k + 1) for k in range(P)] + [math.log(0.3)]
    v = torch.tensor(v0, dtype=torch.float64, requires_grad=True)
    log2pi = math.log(2 * math.pi)
    lg01 = math.lgamma(0.1)

    def logdensity(v):
        # simplechain's layout: W1 (H x 1), b1 (H), W2 (1 x H), b2 (1), then log sigma
        W1 = v[0:H].reshape(H, 1)
        b1 = v[H:2 * H]
        W2 = v[2 * H:3 * H].reshape(1, H)
        b2 = v[3 * H:3 * H + 1]
        s = v[P]
        f = (torch.relu(x @ W1.T + b1) @ W2.T + b2).reshape(N)
        r = y - f
        theta = v[:P]
        return (-0.5 * (theta * theta).sum() - 0.5 * P * log2pi
                + 0.1 * s - torch.exp(s) - lg01
                - N * s - 0.5 * N * log2pi - (r * r).sum() * 0.5 * torch.exp(-2 * s))

    def grad_functional():
        v.grad = None
        lp = logdensity(v)
        lp.backward()
        return lp

    net = nn.Sequential(nn.Linear(1, H), nn.ReLU(), nn.Linear(H, 1)).double()
    params = list(net.parameters())

    def grad_module():
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(v[:P], params)
        for p in params:
            p.grad = None
        s = v.detach()[P].clone().requires_grad_(True)
        f = net(x).reshape(N)
        r = y - f
        sq = sum((p * p).sum() for p in params)
        lp = (-0.5 * sq - 0.5 * P * log2pi + 0.1 * s - torch.exp(s) - lg01
              - N * s - 0.5 * N * log2pi - (r * r).sum() * 0.5 * torch.exp(-2 * s))
        lp.backward()
        return lp

    lp = grad_functional()
    t_fun = timeit(grad_functional, a.calls, a.reps)
    t_mod = timeit(grad_module, a.calls, a.reps)
    print(f"  plain function of v: {t_fun:.0f} ns; nn.Sequential loaded from v: {t_mod:.0f} ns")
    print(f"RESULT engine=pytorch bench=bnn_grad hidden={H} points={N} dtype=float64 "
          f"torch={torch.__version__} logp={lp.item():.12g} grad_ns={min(t_fun, t_mod):.1f} "
          f"functional_ns={t_fun:.1f} module_ns={t_mod:.1f}")


if __name__ == "__main__":
    main()

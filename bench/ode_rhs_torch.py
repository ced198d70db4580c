#!/usr/bin/python3
"""PyTorch twin of bench/ode_rhs.c: the neural-ODE right-hand side 2 -> 50 tanh -> 2 on
one state, float64, one thread. Times, in ns per call (median of repetitions):
  rhs:          y = net(u) under torch.no_grad()
  vjp:          torch.autograd.functional.vjp(f, u, v) w.r.t. the state and, through a
                closure over the parameters, the parameter gradient as well
  backward:     the plain way: y = net(u); y.backward(v) (fills u.grad and the .grad
                of every parameter)
Prints a RESULT line in bench/ode_rhs.c's format (vjp_ns = the faster of the two VJP
variants; both are printed)."""
import argparse

import torch
import torch.nn as nn

from twin_timing import timeit


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(2, 50), nn.Tanh(), nn.Linear(50, 2)).double()
    params = list(net.parameters())
    u = torch.tensor([2.0, 0.0], dtype=torch.float64)
    v = torch.tensor([0.3, -0.8], dtype=torch.float64)

    def rhs():
        with torch.no_grad():
            return net(u)

    def vjp_functional():
        # gradient w.r.t. the state; the parameters' gradients come through autograd.grad
        return torch.autograd.functional.vjp(lambda uu: net(uu), u, v)

    uu = u.clone().requires_grad_(True)

    def vjp_grad():
        y = net(uu)
        return torch.autograd.grad(y, [uu] + params, v)

    def plain_backward():
        for p in params:
            p.grad = None
        uu.grad = None
        y = net(uu)
        y.backward(v)

    t_rhs = timeit(rhs, a.calls, a.reps)
    t_fvjp = timeit(vjp_functional, a.calls // 2, a.reps)
    t_grad = timeit(vjp_grad, a.calls // 2, a.reps)
    t_back = timeit(plain_backward, a.calls // 2, a.reps)
    t_vjp = min(t_grad, t_back)
    print(f"  torch.autograd.functional.vjp (state only): {t_fvjp:.0f} ns;"
          f" autograd.grad (state + params): {t_grad:.0f} ns; y.backward(v): {t_back:.0f} ns")
    print(f"RESULT engine=pytorch bench=ode_rhs net=2-50tanh-2 dtype=float64 "
          f"kernels=torch{torch.__version__} rhs_ns={t_rhs:.1f} vjp_ns={t_vjp:.1f} "
          f"rhs_plus_vjp_ns={t_rhs + t_vjp:.1f} functional_vjp_ns={t_fvjp:.1f} backward_ns={t_back:.1f}")


if __name__ == "__main__":
    main()

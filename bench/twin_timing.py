"""Timing helpers the PyTorch twins share (bench/ode_rhs_torch.py, bench/bnn_grad_torch.py)."""
import time


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def timeit(fn, calls, reps):
    """ns per call of fn: the median over reps runs of the mean over calls calls, after
    max(calls // 10, 10) untimed warm-up calls."""
    for _ in range(max(calls // 10, 10)):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e9)
    return median(out)

#!/usr/bin/env python3
"""tests/npz_check.py DIR SPEC -- run by tests/test_npz.c.

DIR holds what the C test wrote: params.npz (sc_params_export_npz), p.bin (the flat float32
parameter vector), x.bin (a float32 input batch) and y.bin (simplechain's float32 forward of it).
SPEC describes the chain, one layer per ';':  input C H W | dense O ACT BIAS |
conv KH KW K ACT BIAS SH SW PH PW | pool KH KW | flatten | dropout RATE

Checks with NumPy: np.load gives exactly the state_dict names of the matching nn.Sequential
(simplechain.h documents the mapping), each with its shape and the values of p in order.
With PyTorch (where installed): the Sequential built from SPEC takes the arrays through
load_state_dict(strict=True) and its forward (in double, eval mode) matches y.
Writes numpy.npz (np.savez, float32), numpy_c.npz (np.savez_compressed, float64) and, with
PyTorch, torch.npz (the model's state_dict) into DIR for the C test to import back.
Prints NPZ_CHECK OK (and TORCH OK or TORCH SKIPPED) or fails with a message.
"""
import sys

import numpy as np


def main():
    d, spec = sys.argv[1], sys.argv[2]
    layers = [s.split() for s in spec.split(";") if s.strip()]
    assert layers[0][0] == "input"
    c, h, w = map(int, layers[0][1:4])
    # the expected names and shapes, following the documented mapping
    names, idx, shape = [], 0, (c, h, w)
    for L in layers[1:]:
        k = L[0]
        if k == "dense":
            o, act, bias = int(L[1]), L[2], int(L[3])
            fin = shape[0] * shape[1] * shape[2]
            names.append((f"{idx}.weight", (o, fin)))
            if bias:
                names.append((f"{idx}.bias", (o,)))
            idx += 1 if act == "identity" else 2
            shape = (o, 1, 1)
        elif k == "conv":
            kh, kw, kk, act, bias, sh, sw, ph, pw = L[1], L[2], L[3], L[4], L[5], L[6], L[7], L[8], L[9]
            kh, kw, kk, bias, sh, sw, ph, pw = map(int, (kh, kw, kk, bias, sh, sw, ph, pw))
            names.append((f"{idx}.weight", (kk, shape[0], kh, kw)))
            if bias:
                names.append((f"{idx}.bias", (kk,)))
            idx += 1 if act == "identity" else 2
            shape = (kk, (shape[1] + 2 * ph - kh) // sh + 1, (shape[2] + 2 * pw - kw) // sw + 1)
        elif k == "pool":
            kh, kw = int(L[1]), int(L[2])
            shape = (shape[0], shape[1] // kh, shape[2] // kw)
            idx += 1
        elif k == "flatten":
            shape = (shape[0] * shape[1] * shape[2], 1, 1)
            idx += 1
        elif k == "dropout":
            idx += 1
        else:
            raise SystemExit(f"unknown layer {k}")

    z = np.load(f"{d}/params.npz")
    got = list(z.keys())
    want = [n for n, _ in names]
    if sorted(got) != sorted(want):
        raise SystemExit(f"names differ: got {got}, want {want}")
    p = np.fromfile(f"{d}/p.bin", dtype="<f4")
    off = 0
    arrays = {}
    for n, s in names:
        a = z[n]
        if a.shape != s or a.dtype != np.float32:
            raise SystemExit(f"{n}: shape {a.shape} dtype {a.dtype}, want {s} float32")
        cnt = int(np.prod(s))
        if not np.array_equal(a.ravel(), p[off:off + cnt]):
            raise SystemExit(f"{n}: values differ from p[{off}:{off + cnt}]")
        off += cnt
        arrays[n] = a
    if off != p.size:
        raise SystemExit(f"arrays hold {off} values, p has {p.size}")
    # written back by NumPy itself, stored and deflated, for the C test to import
    np.savez(f"{d}/numpy.npz", **arrays)
    np.savez_compressed(f"{d}/numpy_c.npz", **{k: v.astype(np.float64) for k, v in arrays.items()})
    print("NPZ_CHECK OK")

    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("TORCH SKIPPED (no torch)")
        return
    acts = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "softplus": nn.Softplus,
            "gelu": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU}
    mods, shape = [], (c, h, w)
    for L in layers[1:]:
        k = L[0]
        if k == "dense":
            o, act, bias = int(L[1]), L[2], int(L[3])
            mods.append(nn.Linear(shape[0] * shape[1] * shape[2], o, bias=bool(bias)))
            shape = (o, 1, 1)
        elif k == "conv":
            kh, kw, kk, act, bias, sh, sw, ph, pw = L[1:10]
            kh, kw, kk, bias, sh, sw, ph, pw = map(int, (kh, kw, kk, bias, sh, sw, ph, pw))
            mods.append(nn.Conv2d(shape[0], kk, (kh, kw), stride=(sh, sw), padding=(ph, pw),
                                  bias=bool(bias)))
            shape = (kk, (shape[1] + 2 * ph - kh) // sh + 1, (shape[2] + 2 * pw - kw) // sw + 1)
        elif k == "pool":
            mods.append(nn.MaxPool2d((int(L[1]), int(L[2]))))
            shape = (shape[0], shape[1] // int(L[1]), shape[2] // int(L[2]))
            act = "identity"
        elif k == "flatten":
            mods.append(nn.Flatten())
            shape = (shape[0] * shape[1] * shape[2], 1, 1)
            act = "identity"
        elif k == "dropout":
            mods.append(nn.Dropout(float(L[1])))
            act = "identity"
        if act != "identity":
            mods.append(acts[act]())
    model = nn.Sequential(*mods).double().eval()
    model.load_state_dict({k: torch.from_numpy(v).double() for k, v in z.items()}, strict=True)
    x = np.fromfile(f"{d}/x.bin", dtype="<f4").astype(np.float64)
    y = np.fromfile(f"{d}/y.bin", dtype="<f4").astype(np.float64)
    nb = x.size // (c * h * w)
    xin = torch.from_numpy(x.reshape(nb, c, h, w))
    if layers[1][0] == "dense" and h == 1 and w == 1:
        xin = xin.reshape(nb, c)
    # PyTorch's own state_dict (float64 here) back out as .npz
    np.savez(f"{d}/torch.npz", **{k: v.numpy() for k, v in model.state_dict().items()})
    with torch.no_grad():
        t = model(xin).reshape(nb, -1).numpy().ravel()
    err = np.max(np.abs(t - y) / (1e-3 + np.abs(t)))
    if t.size != y.size or not err < 1e-4:
        raise SystemExit(f"forward differs: max relative error {err} over {t.size} outputs")
    print(f"TORCH OK (max relative difference {err:.2e}, {t.size} outputs)")


if __name__ == "__main__":
    main()

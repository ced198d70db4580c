#!/usr/bin/env python3
"""The coefficients of the double tanh's two polynomials (simplechain.c, sc__tanh_f64):

  q(r) ~ (e^r - 1 - r) / r^2      on |r| <= ln2/2 (with 0.1 % to spare), degree 10
  P(z) ~ (tanh(x) - x) / x^3      with z = x^2, on |x| <= 0.35, degree 8

Chebyshev fits (mpmath.chebyfit, 50 digits), rounded to double; prints them lowest degree
first, and the largest error of the rounded polynomial on a fine grid (4,001 points).
Needs python3-mpmath.   python3 scripts/fit-tanh-f64.py
"""
import mpmath as mp

mp.mp.dps = 50


def p_exact(z):
    if z == 0:
        return mp.mpf(-1) / 3
    x = mp.sqrt(z)
    return (mp.tanh(x) - x) / x**3


def q_exact(r):
    if r == 0:
        return mp.mpf(1) / 2
    return (mp.expm1(r) - r) / r**2


def fit(f, a, b, ncoef):
    c = mp.chebyfit(f, [a, b], ncoef)
    cd = [float(v) for v in c]  # highest degree first, rounded to double
    worst = max(abs(mp.polyval([mp.mpf(v) for v in cd], t) - f(t))
                for t in (a + (b - a) * i / 4000 for i in range(4001)))
    return cd[::-1], worst


if __name__ == "__main__":
    half_ln2 = mp.log(2) / 2 * mp.mpf("1.001")
    for name, f, a, b, n in (("q", q_exact, -half_ln2, half_ln2, 11),
                             ("P", p_exact, mp.mpf(0), mp.mpf("0.1225"), 9)):
        cd, worst = fit(f, a, b, n)
        print(f"{name}: degree {n - 1}, largest error {mp.nstr(worst, 3)}")
        for k, v in enumerate(cd):
            print(f"  c{k} = {v!r}")

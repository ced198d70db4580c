/* src/typed/math.h — the element type's tanh (our own, in float and in double) and the libm
 * functions the portable kernels call, as SC__TANH, SC__EXP, ... */
#if SC__F32
/* The float tanh, our own (vectorizable; kernels/vec_f32.h has the same steps on
 * vectors). With a = 2 min(|x|, 9) and E = expm1(a),
 *     tanh|x| = E / (E + 2)                      for |x| >= 0.35,
 *     tanh|x| = |x| + |x|^3 P(x^2)               for |x| <  0.35,
 * and the sign of x put back (so tanh is odd and +-0 maps to +-0). E is computed as
 * 2^n expm1(r) + (2^n - 1), r = a - n ln2 (|r| <= ln2/2, ln2 split in two so that n ln2hi
 * is exact), expm1(r) = r + r^2 q(r). E / (E + 2) has a relative condition number
 * 2 / (E + 2) <= 1 in E, so the error of E is not amplified; for small |x| the odd
 * polynomial avoids the rounding of E + 2. q and P are minimax-style fits of our own
 * (iteratively reweighted least squares on relative error): q to 1.3e-8, P to 6e-10.
 * Max error 1.5 ULP (tests/test_math.c states the bound and measures it on every path);
 * exactly +-1 from |x| = 9 on (9.125 on the vector paths), never outside [-1, 1].
 * tanh(+-inf) = +-1 and tanh(NaN) is NaN (the NaN propagates, as on the vector paths). */
/* c ? a : b as bit operations: a ternary here keeps GCC from vectorizing the loop */
static inline float SC__TN(sc__fsel)(int c, float a, float b) {
  uint32_t m = (uint32_t)0 - (uint32_t)c;
  return sc__fof((sc__fbits(a) & m) | (sc__fbits(b) & ~m));
}
static inline float SC__TN(sc__tanh)(float x) {
  float ax = sc__fof(sc__fbits(x) & 0x7fffffffu);
  float a = 2.0f * SC__TN(sc__fsel)(ax > 9.0f, 9.0f, ax); /* NaN stays NaN: tanh(NaN) is NaN */
  float t = a * 1.44269504f + 12582912.0f; /* 1.5 2^23: round(a / ln2) lands in the low bits */
  float n = t - 12582912.0f;
  float r = a - n * 0.693145752f; /* ln2 high part: n ln2hi is exact for n <= 26 */
  r = r - n * 1.42860677e-06f;    /* ln2 low part */
  float q =
      (((1.38825155e-3f * r + 8.36654752e-3f) * r + 4.16672006e-2f) * r + 1.66665435e-1f) * r +
      4.99999970e-1f;
  float p = (r * r) * q + r;                             /* expm1(r) */
  float s = sc__fof((sc__fbits(t) << 23) + 0x3f800000u); /* 2^n */
  float E = s * p + (s - 1.0f);                          /* expm1(a) */
  float y = E / (E + 2.0f);
  float z = ax * ax;
  float ys = (ax * z) * (((1.92903522e-02f * z - 5.36949411e-02f) * z + 1.33321747e-01f) * z -
                         3.33333194e-01f) +
             ax;
  y = SC__TN(sc__fsel)(ax < 0.35f, ys, y);
  return sc__fof(sc__fbits(y) | (sc__fbits(x) & 0x80000000u));
}
#define SC__TANH(v) SC__TN(sc__tanh)(v)
#define SC__EXPMAX 80.0f /* exp of this is finite in float */
#define SC__EXP(v) expf(v)
#define SC__EXPM1(v) expm1f(v)
#define SC__LOG1P(v) log1pf(v)
#define SC__LOG(v) logf(v)
#define SC__FABS(v) fabsf(v)
#else
/* The double tanh, our own, the float one's method in double (vectorizable: the loops over
 * it are auto-vectorized in the kernel-set builds). With a = 2 min(|x|, 19.1) and E =
 * expm1(a): tanh|x| = E / (E + 2) for |x| >= 0.35, else x + x^3 P(x^2) (below 0.35 the
 * quotient's roundings would reach 2.15 ULP). E = 2^n expm1(r) + (2^n - 1), r = a - n ln2
 * (Cody-Waite, ln2 in two parts so that n ln2hi is exact), expm1(r) = r + r^2 q(r). q (degree
 * 10 on |r| <= ln2/2, by Estrin's scheme) and P (degree 8 in x^2 on |x| <= 0.35, Horner) are
 * Chebyshev fits (scripts/fit-tanh-f64.py: mpmath, 50 digits, rounded to double): largest error of
 * the rounded coefficients 2.5e-18 in q and 1.9e-17 in P (2.3e-18 after the x^3 factor). They
 * replaced Taylor polynomials of degree 12 and 13 (2026-11-23): 2.54 -> 2.16 ns per element,
 * the same 1.48 ULP. Estrin for q: its short dependency chain took 2.78 to 2.55 ns with the
 * Taylor terms; Estrin for P was slower (more operations, and that chain is not the critical
 * one). Exactly +-1 from |x| = 19.1 on (tanh rounds to 1 from 19.06), odd, never outside
 * [-1, 1]; max error 1.48 ULP measured, 2 bounded by tests/test_math.c (test_tanh_f64_ulp).
 * make bench-tanh (AVX2, Zen 4) before the fits: 2.55 ns per element, against 5.40 for SLEEF's
 * 1-ULP tanhd4_u10 (used here before) and 2.75 for its 3.5-ULP u35. Tried: correcting E / (E +
 * 2) with its exact residual instead of the small-|x| polynomial (2.02 ns) reached 1.96 ULP
 * near 0.2 and 2.8 near 19 (1 - y is inexact there). */
static inline double SC__TN(sc__dsel)(int c, double a, double b) {
  uint64_t m = (uint64_t)0 - (uint64_t)c;
  return sc__dof((sc__dbits(a) & m) | (sc__dbits(b) & ~m));
}
static inline double SC__TN(sc__tanh)(double x) {
  double ax = sc__dof(sc__dbits(x) & 0x7fffffffffffffffu);
  double a = 2.0 * SC__TN(sc__dsel)(ax > 19.1, 19.1, ax); /* NaN stays NaN */
  double t = a * 1.4426950408889634 + 6755399441055744.0; /* 1.5 2^52: round(a / ln2) */
  double n = t - 6755399441055744.0;
  double r = a - n * 0.6931471787393093; /* ln2 high part (28 bits): n ln2hi exact */
  r = r - n * 1.8206359985041462e-09;    /* ln2 low part */
  /* q by Estrin's scheme (a short dependency chain: the loop runs at its latency) */
  double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  double q01 = 0.1666666666666667 * r + 0.5;
  double q23 = 0.008333333333326084 * r + 0.04166666666666667;
  double q45 = 0.0001984126987500228 * r + 0.0013888888888883711;
  double q67 = 2.755725517000089e-06 * r + 2.480158732567746e-05;
  double q89 = 2.5105312729622103e-08 * r + 2.755727347871858e-07;
  double q0_3 = q23 * r2 + q01, q4_7 = q67 * r2 + q45;
  double q8_10 = 2.09147553258932e-09 * r2 + q89;
  double q = (q8_10 * r8 + q4_7 * r4) + q0_3;
  double pm = r2 * q + r;                                          /* expm1(r) */
  double sc = sc__dof((sc__dbits(t) << 52) + 0x3ff0000000000000u); /* 2^n */
  double E = sc * pm + (sc - 1.0);                                 /* expm1(a) */
  double y = E / (E + 2.0);
  double z = ax * ax;
  double P = -0.00019202753283131075;
  P = P * z + 0.0005796641245845887;
  P = P * z - 0.0014545775399280403;
  P = P * z + 0.003592038401479678;
  P = P * z - 0.00886323175761739;
  P = P * z + 0.02186948844673358;
  P = P * z - 0.053968253967190176;
  P = P * z + 0.13333333333332845;
  P = P * z - 0.33333333333333331;
  double ys = (ax * z) * P + ax;
  y = SC__TN(sc__dsel)(ax < 0.35, ys, y);
  return sc__dof(sc__dbits(y) | (sc__dbits(x) & 0x8000000000000000u));
}
#define SC__TANH(v) SC__TN(sc__tanh)(v)
#define SC__EXPMAX 700.0
#define SC__EXP(v) exp(v)
#define SC__EXPM1(v) expm1(v)
#define SC__LOG1P(v) log1p(v)
#define SC__LOG(v) log(v)
#define SC__FABS(v) fabs(v)
#endif

#define SC__GELU_K0 ((SC__T)0.7978845608028654) /* sqrt(2/pi) */
#define SC__GELU_K1 ((SC__T)0.044715)

/* toy_data.h — the data of the SimpleChains.jl 2x2 benchmark (examples/toy2x2.c,
 * examples/train_mpi.c): X holds 4 standard-normal numbers per sample, read as a 2x2 matrix;
 * Y is its matrix exponential, computed in double with the closed form. */
#ifndef TOY_DATA_H
#define TOY_DATA_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>

typedef struct {
  uint64_t s;
} rng64;
static inline uint64_t rng_next(rng64 *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline double rng_unif(rng64 *r) { return ((double)(rng_next(r) >> 11) + 0.5) * 0x1.0p-53; }
static inline double rng_normal(rng64 *r) { /* Box-Muller */
  double u = rng_unif(r), v = rng_unif(r);
  return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* exp of [[a, b], [c, d]] in double: A = s I + B with s = (a+d)/2 and B traceless,
 * B^2 = q I with q = ((a-d)/2)^2 + b c, so exp(A) = e^s (ch(q) I + sh(q) B) where
 * ch = cosh(sqrt q), sh = sinh(sqrt q)/sqrt q (cos/sin for q < 0, series near 0). */
static inline void expm2x2(const double m[4], double e[4]) {
  double s = 0.5 * (m[0] + m[3]), h = 0.5 * (m[0] - m[3]);
  double q = h * h + m[1] * m[2], ch, sh;
  if (fabs(q) < 1e-8) {
    ch = 1 + q / 2 + q * q / 24;
    sh = 1 + q / 6 + q * q / 120;
  } else if (q > 0) {
    double r = sqrt(q);
    ch = cosh(r);
    sh = sinh(r) / r;
  } else {
    double r = sqrt(-q);
    ch = cos(r);
    sh = sin(r) / r;
  }
  double es = exp(s);
  e[0] = es * (ch + sh * h);
  e[1] = es * sh * m[1];
  e[2] = es * sh * m[2];
  e[3] = es * (ch - sh * h);
}

static inline void make_data(float *x, float *y, size_t n, uint64_t seed) {
  rng64 r = {seed};
  for (size_t i = 0; i < n; i++) {
    double m[4], e[4];
    for (int k = 0; k < 4; k++) m[k] = rng_normal(&r);
    expm2x2(m, e);
    for (int k = 0; k < 4; k++) {
      x[i * 4 + k] = (float)m[k];
      y[i * 4 + k] = (float)e[k];
    }
  }
}

#endif

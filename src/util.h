/* src/util.h — small helpers every room uses, inline: size arithmetic that detects overflow,
 * the PRNG (splitmix64 to seed, xoshiro256** to draw: the same numbers on every machine), the
 * clock. Included by src/internal.h. */
#ifndef SC_UTIL_H
#define SC_UTIL_H
/* ---------------------------------------------------------------- size arithmetic */
/* All size computations go through these; *ok is cleared on overflow. */
static inline size_t sc__add(size_t a, size_t b, int *ok) {
  if (a > SIZE_MAX - b) {
    *ok = 0;
    return 0;
  }
  return a + b;
}
static inline size_t sc__mul(size_t a, size_t b, int *ok) {
  if (a != 0 && b > SIZE_MAX / a) {
    *ok = 0;
    return 0;
  }
  return a * b;
}
static inline size_t sc__roundup(size_t a, size_t m, int *ok) {
  size_t r = sc__add(a, m - 1, ok);
  return r - r % m;
}

/* ---------------------------------------------------------------- PRNG */
/* splitmix64 to seed, xoshiro256** to draw: same numbers on every machine. */
typedef struct sc__rng {
  uint64_t s[4];
} sc__rng;

static inline uint64_t sc__splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static inline void sc__rng_seed(sc__rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = sc__splitmix(&seed);
}
static inline uint64_t sc__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static inline uint64_t sc__rng_next(sc__rng *r) {
  uint64_t *s = r->s;
  uint64_t out = sc__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = sc__rotl(s[3], 45);
  return out;
}
/* uniform in [0, 1) with 53 random bits */
static inline double sc__rng_unif(sc__rng *r) {
  return (double)(sc__rng_next(r) >> 11) * 0x1.0p-53;
}
/* uniform integer in [0, n), unbiased (rejection) */
static inline uint64_t sc__rng_below(sc__rng *r, uint64_t n) {
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
  do v = sc__rng_next(r);
  while (v >= lim);
  return v % n;
}

/* wall-clock seconds (sc_train's report) */
static inline double sc__now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* SC_UTIL_H */

/* src/engine.c — the engine: errors, layers, chain planning, files, the planner, threads,
 * workspaces, precision, profiling, the portable kernel set and the typed entry points,
 * optimizers, checkpoints, training. See simplechain.h. */
#include "internal.h"

/* ---------------------------------------------------------------- errors */
static SC__TLS char sc__errbuf[512];

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static sc_status
sc__fail(sc_status st, const char *fn, const char *fmt, ...) {
  va_list ap;
  int k = snprintf(sc__errbuf, sizeof sc__errbuf, "%s: ", fn);
  if (k < 0) k = 0;
  if ((size_t)k >= sizeof sc__errbuf) k = (int)sizeof sc__errbuf - 1;
  va_start(ap, fmt);
  vsnprintf(sc__errbuf + k, sizeof sc__errbuf - (size_t)k, fmt, ap);
  va_end(ap);
  return st;
}
#define SC__FAIL(st, ...) sc__fail((st), __func__, __VA_ARGS__)
#define SC__CHECK_NULL(ptr)                                                                        \
  do {                                                                                             \
    if (!(ptr)) return SC__FAIL(SC_ERR_NULL, "argument '%s' is NULL", #ptr);                       \
  } while (0)

const char *sc_last_error(void) { return sc__errbuf; }

sc_status sc_set_error(sc_status st, const char *fn, const char *fmt, ...) {
  va_list ap;
  int k = fn ? snprintf(sc__errbuf, sizeof sc__errbuf, "%s: ", fn) : 0;
  if (k < 0) k = 0;
  if ((size_t)k >= sizeof sc__errbuf) k = (int)sizeof sc__errbuf - 1;
  sc__errbuf[k] = 0;
  if (fmt) {
    va_start(ap, fmt);
    vsnprintf(sc__errbuf + k, sizeof sc__errbuf - (size_t)k, fmt, ap);
    va_end(ap);
  }
  return st;
}

const char *sc_status_str(sc_status s) {
  switch (s) {
  case SC_OK: return "SC_OK";
  case SC_ERR_NULL: return "SC_ERR_NULL";
  case SC_ERR_ARG: return "SC_ERR_ARG";
  case SC_ERR_SHAPE: return "SC_ERR_SHAPE";
  case SC_ERR_OVERFLOW: return "SC_ERR_OVERFLOW";
  case SC_ERR_NOMEM: return "SC_ERR_NOMEM";
  case SC_ERR_NONFINITE: return "SC_ERR_NONFINITE";
  case SC_ERR_BATCH: return "SC_ERR_BATCH";
  case SC_ERR_IO: return "SC_ERR_IO";
  case SC_ERR_FORMAT: return "SC_ERR_FORMAT";
  case SC_ERR_UNSUPPORTED: return "SC_ERR_UNSUPPORTED";
  case SC_ERR_THREAD: return "SC_ERR_THREAD";
  case SC_ERR_STOPPED: return "SC_ERR_STOPPED";
  case SC_ERR_CALLBACK: return "SC_ERR_CALLBACK";
  }
  return "SC_ERR_(unknown)";
}

/* ---------------------------------------------------------------- size arithmetic */
/* All size computations go through these; *ok is cleared on overflow. */
static size_t sc__add(size_t a, size_t b, int *ok) {
  if (a > SIZE_MAX - b) {
    *ok = 0;
    return 0;
  }
  return a + b;
}
static size_t sc__mul(size_t a, size_t b, int *ok) {
  if (a != 0 && b > SIZE_MAX / a) {
    *ok = 0;
    return 0;
  }
  return a * b;
}
static size_t sc__roundup(size_t a, size_t m, int *ok) {
  size_t r = sc__add(a, m - 1, ok);
  return r - r % m;
}

/* ---------------------------------------------------------------- PRNG */
/* splitmix64 to seed, xoshiro256** to draw: same numbers on every machine. */
typedef struct sc__rng {
  uint64_t s[4];
} sc__rng;

static uint64_t sc__splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static void sc__rng_seed(sc__rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = sc__splitmix(&seed);
}
static uint64_t sc__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t sc__rng_next(sc__rng *r) {
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
static double sc__rng_unif(sc__rng *r) { return (double)(sc__rng_next(r) >> 11) * 0x1.0p-53; }
/* uniform integer in [0, n), unbiased (rejection) */
static uint64_t sc__rng_below(sc__rng *r, uint64_t n) {
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
  do v = sc__rng_next(r);
  while (v >= lim);
  return v % n;
}

/* ---------------------------------------------------------------- layers */
sc_layer sc_dense(size_t outputs, sc_act act) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_DENSE;
  l.act = act;
  l.outputs = outputs;
  l.bias = 1;
  return l;
}
sc_layer sc_dense_nobias(size_t outputs, sc_act act) {
  sc_layer l = sc_dense(outputs, act);
  l.bias = 0;
  return l;
}

sc_layer sc_conv2d_ex(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                      size_t ph, size_t pw) {
  sc_layer l = sc_dense(channels, act);
  l.kind = SC_LAYER_CONV2D;
  l.kh = kh, l.kw = kw, l.sh = sh, l.sw = sw, l.ph = ph, l.pw = pw;
  return l;
}
sc_layer sc_conv2d(size_t kh, size_t kw, size_t channels, sc_act act) {
  return sc_conv2d_ex(kh, kw, channels, act, 1, 1, 0, 0);
}
sc_layer sc_conv2d_nobias(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                          size_t ph, size_t pw) {
  sc_layer l = sc_conv2d_ex(kh, kw, channels, act, sh, sw, ph, pw);
  l.bias = 0;
  return l;
}
sc_layer sc_maxpool2d(size_t kh, size_t kw) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_MAXPOOL2D;
  l.kh = kh, l.kw = kw, l.sh = kh, l.sw = kw;
  return l;
}
sc_layer sc_flatten(void) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_FLATTEN;
  return l;
}
sc_layer sc_dropout(double rate) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_DROPOUT;
  l.rate = rate;
  return l;
}

const char *sc_layer_name(sc_layer_kind kind) {
  switch (kind) {
  case SC_LAYER_DENSE: return "dense";
  case SC_LAYER_CONV2D: return "conv2d";
  case SC_LAYER_MAXPOOL2D: return "maxpool2d";
  case SC_LAYER_FLATTEN: return "flatten";
  case SC_LAYER_DROPOUT: return "dropout";
  }
  return "?";
}

const char *sc_act_name(sc_act act) {
  switch (act) {
  case SC_IDENTITY: return "identity";
  case SC_RELU: return "relu";
  case SC_TANH: return "tanh";
  case SC_SIGMOID: return "sigmoid";
  case SC_SOFTPLUS: return "softplus";
  case SC_GELU: return "gelu";
  }
  return "?";
}

/* ---------------------------------------------------------------- chain plan */
/* kernel tables: reference ones from the typed section below, optional ISA ones */
static const sc__kt_f32 sc__kt_ref_f32;
static const sc__kt_f64 sc__kt_ref_f64;
/* A build without kernels/ files (the two drop-in files, SC_HAVE_KERNELS undefined) on
 * x86-64 with GCC >= 8 or Clang >= 10 compiles the typed section twice more at the end of
 * this file, by target pragma: for AVX2 + FMA (the same code as kernels/avx2.c: the "avx2"
 * set) and for AVX-512 (as kernels/avx512.c: "avx512"), picked by CPUID like the kernels/
 * ones. -DSC_NO_BUILTIN_AVX512 leaves out the second (a faster compile), -DSC_NO_BUILTIN_AVX2
 * both. */
#if !defined(SC_HAVE_KERNELS) && !defined(SC__KERNELS_ONLY) && !defined(SC_NO_BUILTIN_AVX2) &&     \
    defined(__x86_64__) && defined(__GNUC__) && defined(__OPTIMIZE__)
#if (defined(__clang__) && __clang_major__ >= 10) || (!defined(__clang__) && __GNUC__ >= 8)
#define SC__BUILTIN_AVX2 1
static const sc__kt_f32 sc__kt_f32_avx2in;
static const sc__kt_f64 sc__kt_f64_avx2in;
#ifndef SC_NO_BUILTIN_AVX512
#define SC__BUILTIN_AVX512 1
static const sc__kt_f32 sc__kt_f32_avx512in;
static const sc__kt_f64 sc__kt_f64_avx512in;
#endif
#endif
#endif
#ifndef SC__BUILTIN_AVX2
#define SC__BUILTIN_AVX2 0
#endif
#ifndef SC__BUILTIN_AVX512
#define SC__BUILTIN_AVX512 0
#endif
#ifdef SC_HAVE_KERNELS
extern const sc__kt_f32 sc__kt_f32_avx2, sc__kt_f32_avx512;
extern const sc__kt_f64 sc__kt_f64_avx2, sc__kt_f64_avx512;
#define SC__KERNELS 1
#define SC__HAS_KT(t) 1
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__ELF__)
/* A drop-in build that compiles kernels/avx2.c and kernels/avx512.c along (no -D needed):
 * weak references, null when those files are not linked in */
extern const sc__kt_f32 sc__kt_f32_avx2 __attribute__((weak));
extern const sc__kt_f32 sc__kt_f32_avx512 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx2 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx512 __attribute__((weak));
#define SC__KERNELS 1
#define SC__HAS_KT(t) (&(t) != NULL)
#else
#define SC__KERNELS 0
#endif

/* The kernel tables for this CPU, or the ones SC_ISA forces. */
static sc_status sc__pick_kernels(const char *fn, const sc__kt_f32 **kf, const sc__kt_f64 **kd) {
  const char *want = getenv("SC_ISA");
  const sc__kt_f32 *f2 = NULL, *f5 = NULL; /* the AVX2 and AVX-512 sets, where usable */
  const sc__kt_f64 *d2 = NULL, *d5 = NULL;
#if (SC__KERNELS || SC__BUILTIN_AVX2) && defined(__GNUC__) &&                                      \
    (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
#if SC__KERNELS
    if (SC__HAS_KT(sc__kt_f32_avx2) && SC__HAS_KT(sc__kt_f64_avx2))
      f2 = &sc__kt_f32_avx2, d2 = &sc__kt_f64_avx2;
#endif
#if SC__BUILTIN_AVX2
    if (!f2) f2 = &sc__kt_f32_avx2in, d2 = &sc__kt_f64_avx2in;
#endif
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
#if SC__KERNELS
    if (SC__HAS_KT(sc__kt_f32_avx512) && SC__HAS_KT(sc__kt_f64_avx512))
      f5 = &sc__kt_f32_avx512, d5 = &sc__kt_f64_avx512;
#endif
#if SC__BUILTIN_AVX512
    if (!f5) f5 = &sc__kt_f32_avx512in, d5 = &sc__kt_f64_avx512in;
#endif
  }
#endif
  *kf = &sc__kt_ref_f32;
  *kd = &sc__kt_ref_f64;
  if (want && *want && strcmp(want, "auto") != 0) {
    if (strcmp(want, "scalar") == 0) return SC_OK;
    if (strcmp(want, "avx2") != 0 && strcmp(want, "avx512") != 0)
      return sc__fail(SC_ERR_ARG, fn, "SC_ISA='%s' is not one of scalar, avx2, avx512, auto", want);
    if ((strcmp(want, "avx2") == 0 && !f2) || (strcmp(want, "avx512") == 0 && !f5))
      return sc__fail(SC_ERR_UNSUPPORTED, fn, "SC_ISA=%s requested, but %s", want,
#if SC__KERNELS
                      "this CPU does not support it, or its kernels/ file was not compiled in"
#elif SC__BUILTIN_AVX2
                      "this CPU does not support it"
#else
                      "this build has no SIMD kernels (build with make, or compile kernels/avx2.c "
                      "and kernels/avx512.c with simplechain.c)"
#endif
      );
  }
  if (f5 && !(want && strcmp(want, "avx2") == 0))
    *kf = f5, *kd = d5;
  else if (f2)
    *kf = f2, *kd = d2;
  return SC_OK;
}

const char *sc_chain_isa(const sc_chain *chain) { return chain ? chain->kf->name : "?"; }

/* the variant planner (after the file helpers it uses; see "variants" below) */
static sc_status sc__variant_plan(const char *fn, sc_chain *c);

static size_t sc__tile_alloc(size_t *cursor, size_t elems, int *ok) {
  size_t at = *cursor;
  *cursor = sc__roundup(sc__add(at, elems, ok), 16, ok);
  return at;
}

#define SC__DIM_MAX ((size_t)1 << 28) /* keeps every per-tile buffer addressable */

/* Fields a layer kind does not use must hold what its constructor sets (0, or for a
 * maxpool's stride the window), so that a hand-built layer means exactly one thing and
 * fingerprints (parameter files) match the constructor-built twin. */
enum {
  SC__F_ACT = 1,
  SC__F_OUT = 2,
  SC__F_BIAS = 4,
  SC__F_K = 8,
  SC__F_S = 16,
  SC__F_P = 32,
  SC__F_RATE = 64
};
static sc_status sc__unused_fields(const char *fn, size_t l, const char *nm, const sc_layer *s,
                                   unsigned must_be_zero) {
  const char *f = NULL;
  size_t v = 0;
  if ((must_be_zero & SC__F_ACT) && s->act != SC_IDENTITY)
    f = "act", v = (size_t)s->act;
  else if ((must_be_zero & SC__F_OUT) && s->outputs)
    f = "outputs", v = s->outputs;
  else if ((must_be_zero & SC__F_BIAS) && s->bias)
    f = "bias", v = (size_t)s->bias;
  else if ((must_be_zero & SC__F_K) && s->kh)
    f = "kh", v = s->kh;
  else if ((must_be_zero & SC__F_K) && s->kw)
    f = "kw", v = s->kw;
  else if ((must_be_zero & SC__F_S) && s->sh)
    f = "sh", v = s->sh;
  else if ((must_be_zero & SC__F_S) && s->sw)
    f = "sw", v = s->sw;
  else if ((must_be_zero & SC__F_P) && s->ph)
    f = "ph", v = s->ph;
  else if ((must_be_zero & SC__F_P) && s->pw)
    f = "pw", v = s->pw;
  if (f)
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (%s): field '%s' = %lld is not used by a %s layer and must be 0", l,
                    nm, f, (long long)v, nm);
  if ((must_be_zero & SC__F_RATE) && s->rate != 0.0)
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (%s): field 'rate' = %g is not used by a %s layer and must be 0", l,
                    nm, s->rate, nm);
  return SC_OK;
}

/* Validates one layer against its input shape and fills its shapes and parameter
 * count. Returns a status with the message already set. */
static sc_status sc__plan_layer(const char *fn, size_t l, sc__lplan *P, int *ok) {
  const sc_layer *s = &P->spec;
  const char *nm = sc_layer_name(s->kind);
  if (strcmp(nm, "?") == 0)
    return sc__fail(SC_ERR_ARG, fn, "layer %zu: unknown layer kind %d", l, (int)s->kind);
  P->in = sc__mul(sc__mul(P->ic, P->ih, ok), P->iw, ok);
  P->roff = NULL;
  P->tperm = P->troff = P->cpoff = NULL;
  static const unsigned unused[] = {
      [SC_LAYER_DENSE] = SC__F_K | SC__F_S | SC__F_P | SC__F_RATE,
      [SC_LAYER_CONV2D] = SC__F_RATE,
      [SC_LAYER_MAXPOOL2D] = SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_P | SC__F_RATE,
      [SC_LAYER_FLATTEN] =
          SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_K | SC__F_S | SC__F_P | SC__F_RATE,
      [SC_LAYER_DROPOUT] = SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_K | SC__F_S | SC__F_P};
  sc_status ust = sc__unused_fields(fn, l, nm, s, unused[s->kind]);
  if (ust) return ust;
  if (s->kind == SC_LAYER_MAXPOOL2D && (s->sh != s->kh || s->sw != s->kw))
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (maxpool2d): stride %zux%zu must equal the window %zux%zu "
                    "(only non-overlapping windows are supported)",
                    l, s->sh, s->sw, s->kh, s->kw);
  switch (s->kind) {
  case SC_LAYER_DENSE:
  case SC_LAYER_CONV2D:
    if ((unsigned)s->act > (unsigned)SC_GELU)
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (%s): unknown activation %d", l, nm, (int)s->act);
    if (s->bias != 0 && s->bias != 1)
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (%s): bias must be 0 or 1, got %d", l, nm,
                      s->bias);
    if (s->outputs == 0)
      return sc__fail(SC_ERR_SHAPE, fn, "layer %zu (%s): %s must be > 0", l, nm,
                      s->kind == SC_LAYER_DENSE ? "outputs" : "channels");
    if (s->outputs > SC__DIM_MAX)
      return sc__fail(SC_ERR_OVERFLOW, fn, "layer %zu (%s): %zu outputs is too large", l, nm,
                      s->outputs);
    break;
  default: break;
  }
  switch (s->kind) {
  case SC_LAYER_DENSE:
    if (P->ih != 1 || P->iw != 1)
      return sc__fail(
          SC_ERR_SHAPE, fn,
          "layer %zu (dense): input is %zux%zux%zu, not a vector: add sc_flatten() before it", l,
          P->ic, P->ih, P->iw);
    P->oc = s->outputs, P->oh = 1, P->ow = 1;
    P->np = sc__add(sc__mul(P->oc, P->in, ok), s->bias ? P->oc : 0, ok);
    break;
  case SC_LAYER_CONV2D: {
    if (s->kh == 0 || s->kw == 0 || s->sh == 0 || s->sw == 0)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): kernel %zux%zu and stride %zux%zu must be > 0", l, s->kh,
                      s->kw, s->sh, s->sw);
    if (s->kh > SC__DIM_MAX || s->kw > SC__DIM_MAX || s->ph > SC__DIM_MAX || s->pw > SC__DIM_MAX ||
        s->sh > SC__DIM_MAX || s->sw > SC__DIM_MAX)
      return sc__fail(SC_ERR_OVERFLOW, fn,
                      "layer %zu (conv2d): kernel, stride or padding too large", l);
    if (s->ph >= s->kh || s->pw >= s->kw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): padding %zux%zu must be smaller than the kernel %zux%zu",
                      l, s->ph, s->pw, s->kh, s->kw);
    P->hp = P->ih + 2 * s->ph;
    P->wp = P->iw + 2 * s->pw;
    if (P->hp < s->kh || P->wp < s->kw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): kernel %zux%zu larger than the %s input %zux%zu", l,
                      s->kh, s->kw, (s->ph || s->pw) ? "padded" : "", P->hp, P->wp);
    P->oc = s->outputs;
    P->oh = (P->hp - s->kh) / s->sh + 1;
    P->ow = (P->wp - s->kw) / s->sw + 1;
    P->R = sc__mul(sc__mul(P->ic, s->kh, ok), s->kw, ok);
    P->np = sc__add(sc__mul(P->oc, P->R, ok), s->bias ? P->oc : 0, ok);
    break;
  }
  case SC_LAYER_MAXPOOL2D:
    if (s->kh == 0 || s->kw == 0)
      return sc__fail(SC_ERR_SHAPE, fn, "layer %zu (maxpool2d): window %zux%zu must be > 0", l,
                      s->kh, s->kw);
    if (s->kh > P->ih || s->kw > P->iw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (maxpool2d): window %zux%zu larger than the input %zux%zu", l,
                      s->kh, s->kw, P->ih, P->iw);
    P->oc = P->ic, P->oh = P->ih / s->kh, P->ow = P->iw / s->kw;
    P->np = 0;
    break;
  case SC_LAYER_FLATTEN:
    P->oc = P->in, P->oh = 1, P->ow = 1;
    P->np = 0;
    break;
  case SC_LAYER_DROPOUT:
    if (!(s->rate >= 0.0 && s->rate < 1.0))
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (dropout): rate %g must be in [0, 1)", l, s->rate);
    P->oc = P->ic, P->oh = P->ih, P->ow = P->iw;
    P->np = 0;
    break;
  }
  P->out = sc__mul(sc__mul(P->oc, P->oh, ok), P->ow, ok);
  if (!*ok || P->out > SC__DIM_MAX)
    return sc__fail(SC_ERR_OVERFLOW, fn, "layer %zu (%s): output of %zux%zux%zu is too large", l,
                    nm, P->oc, P->oh, P->ow);
  return SC_OK;
}

static sc_status sc__chain_create(const char *fn, sc_chain **out, size_t ic, size_t ih, size_t iw,
                                  const sc_layer *layers, size_t nlayers) {
  if (!out) return sc__fail(SC_ERR_NULL, fn, "argument 'out' is NULL");
  *out = NULL;
  if (!layers) return sc__fail(SC_ERR_NULL, fn, "argument 'layers' is NULL");
  if (nlayers == 0)
    return sc__fail(SC_ERR_ARG, fn, "nlayers is 0: a chain needs at least one layer");
  if (ic == 0 || ih == 0 || iw == 0)
    return sc__fail(SC_ERR_SHAPE, fn, "input shape %zux%zux%zu has a zero dimension", ic, ih, iw);
  if (nlayers > 100000)
    return sc__fail(SC_ERR_ARG, fn, "nlayers = %zu is unreasonably large", nlayers);
  int ok = 1;
  size_t in = sc__mul(sc__mul(ic, ih, &ok), iw, &ok);
  if (!ok || in > SC__DIM_MAX)
    return sc__fail(SC_ERR_OVERFLOW, fn, "input of %zux%zux%zu is too large", ic, ih, iw);
  /* conv tap-offset tables live after the layer plans, in the same allocation */
  size_t ntaps = 0;
  {
    size_t c = ic, h = ih, w = iw;
    for (size_t l = 0; l < nlayers; l++) {
      sc__lplan tmp;
      memset(&tmp, 0, sizeof tmp);
      tmp.spec = layers[l];
      tmp.ic = c, tmp.ih = h, tmp.iw = w;
      sc_status st = sc__plan_layer(fn, l, &tmp, &ok);
      if (st) return st;
      if (tmp.spec.kind == SC_LAYER_CONV2D) ntaps = sc__add(ntaps, sc__mul(4, tmp.R, &ok), &ok);
      c = tmp.oc, h = tmp.oh, w = tmp.ow;
    }
  }
  size_t head = sc__add(sizeof(sc_chain), sc__mul(nlayers, sizeof(sc__lplan), &ok), &ok);
  size_t bytes = sc__add(head, sc__mul(ntaps, sizeof(size_t), &ok), &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "chain description size overflows");
  sc_chain *c = calloc(1, bytes);
  if (!c)
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory allocating the chain (%zu bytes)", bytes);
  size_t *taps = (size_t *)(void *)((unsigned char *)c + head);
  c->nlayers = nlayers;
  c->in_c = ic, c->in_h = ih, c->in_w = iw;
  c->in = in;
  size_t np = 0, maxw = in, maxdense = 0;
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    P->spec = layers[l];
    if (l == 0)
      P->ic = ic, P->ih = ih, P->iw = iw;
    else
      P->ic = c->L[l - 1].oc, P->ih = c->L[l - 1].oh, P->iw = c->L[l - 1].ow;
    sc__plan_layer(fn, l, P, &ok); /* validated above */
    if (P->spec.kind == SC_LAYER_CONV2D) {
      size_t r = 0;
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t i = 0; i < P->spec.kh; i++)
          for (size_t j = 0; j < P->spec.kw; j++) taps[r++] = (ci * P->hp + i) * P->wp + j;
      P->roff = taps;
      size_t *perm = taps + P->R, *poff = perm + P->R, m = 0;
      for (size_t i = 0; i < P->spec.kh; i++)
        for (size_t j = 0; j < P->spec.kw; j++)
          for (size_t ci = 0; ci < P->ic; ci++, m++) {
            perm[m] = (ci * P->spec.kh + i) * P->spec.kw + j;
            poff[m] = P->roff[perm[m]];
          }
      P->tperm = perm, P->troff = poff;
      /* the direct forward's pairs of taps (sc__bf16_pack_colpairs), ic ceil(kh kw / 2) <= R */
      size_t *cpo = poff + P->R, kh = P->spec.kh, kw = P->spec.kw, t = kh * kw;
      size_t plane2 = P->ic * P->hp * P->wp; /* the wrapped pairs (or the single copies) */
      m = 0;
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t q = 2; q <= t + 1; q += 2) { /* taps q - 2 and q - 1 */
          size_t i = (q - 2) / kw, j = (q - 2) % kw, row = (ci * P->hp + i) * P->wp;
          if (q <= t) /* a column pair in row i, or a wrapped pair into row i + 1 */
            cpo[m++] = j + 1 < kw ? row + j : plane2 + row;
          else if (kw >= 2) /* the last tap: its column pair's second half */
            cpo[m++] = row + j - 1;
          else /* kw = 1: its wrapped pair's second half; 1 x 1: its single copy */
            cpo[m++] = kh >= 2 ? plane2 + row - P->wp : plane2 + row;
        }
      P->cpoff = cpo;
      taps += 4 * P->R;
    }
    if (P->spec.kind == SC_LAYER_DENSE && P->in > maxdense) maxdense = P->in;
    P->poff = np;
    np = sc__add(np, P->np, &ok);
    if (P->out > maxw) maxw = P->out;
  }
  if (!ok) {
    free(c);
    return sc__fail(SC_ERR_OVERFLOW, fn, "parameter count overflows size_t");
  }
  c->out = c->L[nlayers - 1].out;
  c->nparams = np;
  {
    /* multiply-adds per sample, forward; a slice should hold >= ~2^19 per tile-sample */
    double macs = 0;
    for (size_t l = 0; l < nlayers; l++) {
      const sc__lplan *P = &c->L[l];
      if (P->spec.kind == SC_LAYER_DENSE)
        macs += (double)P->in * (double)P->out;
      else if (P->spec.kind == SC_LAYER_CONV2D)
        macs += (double)P->R * (double)P->out;
      else
        macs += (double)P->in;
    }
    double want = 524288.0 / (macs * SC__TW);
    c->min_tiles = want >= SC__MIN_TILES ? SC__MIN_TILES : (want <= 1 ? 1 : (size_t)ceil(want));
  }
  c->maxw = maxw;
  /* tile plan (elements of one slice's tile memory) */
  size_t cur = 0, TW = SC__TW;
  c->x_off = sc__tile_alloc(&cur, sc__mul(c->in, TW, &ok), &ok);
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    int k = P->spec.kind, has_w = k == SC_LAYER_DENSE || k == SC_LAYER_CONV2D;
    P->a_off = k == SC_LAYER_FLATTEN ? (l ? c->L[l - 1].a_off : c->x_off)
                                     : sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok);
    P->z_off = has_w && P->spec.act == SC_GELU ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok)
                                               : SIZE_MAX;
    P->lane_off =
        has_w && P->spec.bias ? sc__tile_alloc(&cur, sc__mul(P->oc, TW, &ok), &ok) : SIZE_MAX;
    size_t nw = has_w ? P->np - (P->spec.bias ? P->oc : 0) : 0;
    P->dwl_off = (k == SC_LAYER_CONV2D || (k == SC_LAYER_DENSE && nw <= SC__DWL_MAX))
                     ? sc__tile_alloc(&cur, sc__mul(nw, TW, &ok), &ok)
                     : SIZE_MAX;
    /* holding a tile's dz costs out row copies (and its input a second buffer, a_off2)
     * and saves out x in accumulator stores, the lane form's bottleneck: taken from
     * about 2 (in + out) weights up */
    P->hold_off = k == SC_LAYER_DENSE && P->dwl_off != SIZE_MAX && nw >= 2 * (P->in + P->out)
                      ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok)
                      : SIZE_MAX;
    P->pad_off =
        k == SC_LAYER_CONV2D && (P->spec.ph || P->spec.pw)
            ? sc__tile_alloc(&cur, sc__mul(sc__mul(P->ic * P->hp, P->wp, &ok), TW, &ok), &ok)
            : SIZE_MAX;
    P->mask_off = k == SC_LAYER_DROPOUT ? sc__tile_alloc(&cur, P->out, &ok) : SIZE_MAX;
#if defined(SC_HAVE_XSMM) && defined(SC_HAVE_KERNELS)
    P->col_off = k == SC_LAYER_CONV2D
                     ? sc__tile_alloc(&cur, sc__mul(sc__mul(P->R, P->ow, &ok), TW, &ok), &ok)
                     : SIZE_MAX;
#else
    P->col_off = SIZE_MAX;
#endif
  }
  /* second buffers for the inputs of layers that hold a tile (dW in pairs): the first
   * tile's input must survive the second tile's forward. Backwards first: whether the
   * layer reading each output (through flattens, which are views) holds; a_off2 keeps
   * that flag until the forward pass below places the buffers. */
  int reader_holds = 0; /* for the last layer's output: nothing reads it */
  for (size_t l = nlayers; l-- > 0;) {
    sc__lplan *P = &c->L[l];
    P->a_off2 = (size_t)reader_holds;
    reader_holds = P->spec.kind == SC_LAYER_FLATTEN ? reader_holds : P->hold_off != SIZE_MAX;
  }
  c->x_off2 = reader_holds ? sc__tile_alloc(&cur, sc__mul(c->in, TW, &ok), &ok) : c->x_off;
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    if (P->spec.kind == SC_LAYER_FLATTEN)
      P->a_off2 = l ? c->L[l - 1].a_off2 : c->x_off2;
    else
      P->a_off2 = P->a_off2 ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok) : P->a_off;
  }
  c->d0_off = sc__tile_alloc(&cur, sc__mul(c->maxw, TW, &ok), &ok);
  c->d1_off = sc__tile_alloc(&cur, sc__mul(c->maxw, TW, &ok), &ok);
  c->ldT = sc__roundup(maxdense ? maxdense : 1, 16, &ok);
  c->xT_off = sc__tile_alloc(&cur, sc__mul(c->ldT, TW, &ok), &ok);
  c->t_off = sc__tile_alloc(&cur, sc__mul(c->out, TW, &ok), &ok); /* gathered targets */
  c->lossl_off = sc__tile_alloc(&cur, 2 * TW, &ok);               /* loss, correct lanes */
  c->tile_elems = cur;
  if (!ok) {
    free(c);
    return sc__fail(SC_ERR_OVERFLOW, fn, "tile memory plan overflows size_t");
  }
  sc_status st = sc__pick_kernels(fn, &c->kf, &c->kd);
  if (st != SC_OK) {
    free(c);
    return st;
  }
  if ((st = sc__variant_plan(fn, c)) != SC_OK) {
    free(c);
    return st;
  }
  *out = c;
  return SC_OK;
}

sc_status sc_chain_create(sc_chain **out, size_t input_features, const sc_layer *layers,
                          size_t nlayers) {
  if (out) *out = NULL;
  if (out && layers && nlayers && input_features == 0)
    return SC__FAIL(SC_ERR_SHAPE, "input_features is 0");
  return sc__chain_create(__func__, out, input_features, 1, 1, layers, nlayers);
}
sc_status sc_chain_create_image(sc_chain **out, size_t channels, size_t height, size_t width,
                                const sc_layer *layers, size_t nlayers) {
  return sc__chain_create(__func__, out, channels, height, width, layers, nlayers);
}

void sc_chain_destroy(sc_chain *chain) { free(chain); }

sc_status sc_chain_nparams(const sc_chain *chain, size_t *nparams) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(nparams);
  *nparams = chain->nparams;
  return SC_OK;
}
sc_status sc_chain_input_size(const sc_chain *chain, size_t *features) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(features);
  *features = chain->in;
  return SC_OK;
}
sc_status sc_chain_output_size(const sc_chain *chain, size_t *features) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(features);
  *features = chain->out;
  return SC_OK;
}
sc_status sc_chain_nlayers(const sc_chain *chain, size_t *nlayers) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(nlayers);
  *nlayers = chain->nlayers;
  return SC_OK;
}
sc_status sc_chain_layer_info(const sc_chain *chain, size_t index, sc_layer_info *info) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(info);
  if (index >= chain->nlayers)
    return SC__FAIL(SC_ERR_ARG, "layer index %zu out of range (chain has %zu layers)", index,
                    chain->nlayers);
  const sc__lplan *P = &chain->L[index];
  info->layer = P->spec;
  info->inputs = P->in;
  info->outputs = P->out;
  info->in_shape[0] = P->ic, info->in_shape[1] = P->ih, info->in_shape[2] = P->iw;
  info->out_shape[0] = P->oc, info->out_shape[1] = P->oh, info->out_shape[2] = P->ow;
  info->nparams = P->np;
  info->param_offset = P->poff;
  return SC_OK;
}

/* appends to a bounded buffer, tracking the length it would have had */
typedef struct sc__sbuf {
  char *buf;
  size_t cap, len;
} sc__sbuf;
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sc__sprintf(sc__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = b->len < b->cap ? b->buf + b->len : NULL;
  size_t room = b->len < b->cap ? b->cap - b->len : 0;
  int k = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (k > 0) b->len += (size_t)k;
}

sc_status sc_chain_summary(const sc_chain *chain, char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  if (!buf && cap > 0) return SC__FAIL(SC_ERR_NULL, "buf is NULL but cap is %zu", cap);
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  char shape[64];
  sc__sprintf(&b, "%-6s %-18s %-9s %14s %10s %10s\n", "layer", "type", "act", "output", "params",
              "offset");
  if (chain->in_h == 1 && chain->in_w == 1)
    snprintf(shape, sizeof shape, "%zu", chain->in_c);
  else
    snprintf(shape, sizeof shape, "%zux%zux%zu", chain->in_c, chain->in_h, chain->in_w);
  sc__sprintf(&b, "%-6s %-18s %-9s %14s %10s %10s\n", "-", "input", "-", shape, "-", "-");
  for (size_t l = 0; l < chain->nlayers; l++) {
    const sc__lplan *P = &chain->L[l];
    char type[32];
    const char *act = "-";
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
      snprintf(type, sizeof type, "%s%s", P->spec.bias ? "dense" : "dense (no bias)",
               P->xfwd ? " xsmm" : "");
      act = sc_act_name(P->spec.act);
      break;
    case SC_LAYER_CONV2D:
      snprintf(type, sizeof type, "conv2d %zux%zu%s", P->spec.kh, P->spec.kw,
               P->spec.bias ? "" : " nobias");
      act = sc_act_name(P->spec.act);
      break;
    case SC_LAYER_MAXPOOL2D:
      snprintf(type, sizeof type, "maxpool2d %zux%zu", P->spec.kh, P->spec.kw);
      break;
    case SC_LAYER_DROPOUT: snprintf(type, sizeof type, "dropout %.3g", P->spec.rate); break;
    default: snprintf(type, sizeof type, "%s", sc_layer_name(P->spec.kind));
    }
    if (P->oh == 1 && P->ow == 1)
      snprintf(shape, sizeof shape, "%zu", P->oc);
    else
      snprintf(shape, sizeof shape, "%zux%zux%zu", P->oc, P->oh, P->ow);
    sc__sprintf(&b, "%-6zu %-18s %-9s %14s %10zu %10zu\n", l, type, act, shape, P->np, P->poff);
  }
  sc__sprintf(&b, "total parameters: %zu (%zu bytes as float); kernels: %s\n", chain->nparams,
              chain->nparams * sizeof(float), chain->kf->name);
  if (needed) *needed = b.len + 1;
  if (b.len + 1 > cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return SC__FAIL(SC_ERR_NOMEM, "buffer of %zu bytes too small for the summary (%zu needed)", cap,
                    b.len + 1);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- params init */
static sc_status sc__init_check(const char *fn, const sc_chain *c, const void *p, size_t n) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (n != c->nparams)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the chain has %zu parameters", n, c->nparams);
  return SC_OK;
}

/* Glorot-uniform in double; `put` stores one value at index k */
#define SC__GLOROT_BODY(PUT)                                                                       \
  do {                                                                                             \
    sc__rng r;                                                                                     \
    sc__rng_seed(&r, seed);                                                                        \
    for (size_t l = 0; l < chain->nlayers; l++) {                                                  \
      const sc__lplan *P = &chain->L[l];                                                           \
      if (P->np == 0) continue;                                                                    \
      size_t taps = P->spec.kind == SC_LAYER_CONV2D ? P->spec.kh * P->spec.kw : 1;                 \
      size_t fan_in = P->spec.kind == SC_LAYER_CONV2D ? P->R : P->in;                              \
      double a = sqrt(6.0 / (double)(fan_in + P->oc * taps));                                      \
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);                                              \
      for (size_t k = 0; k < nw; k++) PUT(P->poff + k, a * (2.0 * sc__rng_unif(&r) - 1.0));        \
      for (size_t k = nw; k < P->np; k++) PUT(P->poff + k, 0.0);                                   \
    }                                                                                              \
  } while (0)

sc_status sc_params_init(const sc_chain *chain, float *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTF(k, v) p[(k)] = (float)(v)
  SC__GLOROT_BODY(SC__PUTF);
#undef SC__PUTF
  return SC_OK;
}
sc_status sc_params_init_f64(const sc_chain *chain, double *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTD(k, v) p[(k)] = (v)
  SC__GLOROT_BODY(SC__PUTD);
#undef SC__PUTD
  return SC_OK;
}

/* ---------------------------------------------------------------- parameter files */
#define SC__PF_MAGIC "SCPARAMS"
#define SC__PF_HEAD 32

static uint64_t sc__fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001B3ull;
  }
  return h;
}
#define SC__FNV_INIT 0xCBF29CE484222325ull

static uint64_t sc__fingerprint(const sc_chain *c) {
  uint64_t h = SC__FNV_INIT, v[10];
  v[0] = (uint64_t)c->in_c, v[1] = (uint64_t)c->in_h, v[2] = (uint64_t)c->in_w;
  h = sc__fnv1a(h, v, 3 * sizeof v[0]);
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc_layer *s = &c->L[l].spec;
    int w = s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D;
    v[0] = (uint64_t)s->kind;
    v[1] = w ? (uint64_t)s->outputs : 0;
    v[2] = w ? (uint64_t)s->act : 0;
    v[3] = w ? (uint64_t)s->bias : 0;
    v[4] = (uint64_t)s->kh, v[5] = (uint64_t)s->kw, v[6] = (uint64_t)s->sh;
    v[7] = (uint64_t)s->sw, v[8] = (uint64_t)s->ph, v[9] = (uint64_t)s->pw;
    h = sc__fnv1a(h, v, sizeof v);
  }
  return h;
}

static void sc__put_le(unsigned char *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t sc__get_le(const unsigned char *b, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* ---------------------------------------------------------------- atomic file writes */
/* Files are written under a temporary name no other writer uses, in the directory of the
 * target ("<path>.tmp-<pid>-<counter>-<clock>", created exclusively), flushed to the disk
 * (fsync, where the system has it) and renamed over the target; the directory is then
 * synced so the rename itself survives a power cut. On every error path the temporary file
 * is removed. Where POSIX I/O exists no heap memory is used (the caller gives the name
 * buffer), so a trainer may checkpoint without allocating. */
#if defined(__unix__) || defined(__APPLE__)
#define SC__POSIX_IO 1
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define SC__POSIX_IO 0
#endif

#define SC__TMP_EXTRA 64 /* bytes a temporary name needs beyond the path */

typedef struct sc__wfile {
#if SC__POSIX_IO
  int fd;
#else
  FILE *f;
#endif
  char *tmp; /* caller's buffer of strlen(path) + SC__TMP_EXTRA bytes */
  int err;   /* first errno seen (0: none), or -1 for a short write without errno */
} sc__wfile;

static sc_status sc__io_fail(const char *fn, int e, const char *what, const char *path) {
  if (e == ENOMEM) return sc__fail(SC_ERR_NOMEM, fn, "%s '%s': out of memory", what, path);
  return sc__fail(SC_ERR_IO, fn, "%s '%s': %s", what, path,
                  e > 0 ? strerror(e) : "write error (disk full?)");
}

static sc_status sc__wopen(sc__wfile *w, const char *path, char *tmp, const char *fn) {
  static unsigned long counter; /* a race only costs a retry: creation is exclusive */
  size_t plen = strlen(path);
  int e = 0;
  w->tmp = tmp;
  w->err = 0;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned long k = counter++;
#if SC__POSIX_IO
    unsigned long id = (unsigned long)getpid();
#else
    unsigned long id = (unsigned long)(uintptr_t)&k;
#endif
    snprintf(tmp, plen + SC__TMP_EXTRA, "%s.tmp-%lx-%lx-%lx", path, id, k, (unsigned long)clock());
    errno = 0;
#if SC__POSIX_IO
    w->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0666);
    if (w->fd >= 0) return SC_OK;
#else
    w->f = fopen(tmp, "wbx");
    if (w->f) return SC_OK;
#endif
    e = errno;
    if (e != EEXIST) break;
  }
  if (e == ENOMEM)
    return sc__fail(SC_ERR_NOMEM, fn, "cannot create a file beside '%s': out of memory", path);
  return sc__fail(SC_ERR_IO, fn, "cannot create a temporary file beside '%s': %s", path,
                  e ? strerror(e) : "no unused name");
}

static void sc__wwrite(sc__wfile *w, const void *data, size_t n) {
  const unsigned char *b = data;
  while (n > 0 && !w->err) {
#if SC__POSIX_IO
    ssize_t r = write(w->fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      w->err = r < 0 && errno ? errno : -1;
      break;
    }
    b += r, n -= (size_t)r;
#else
    size_t r = fwrite(b, 1, n, w->f);
    if (r < n) w->err = errno ? errno : -1;
    n = 0;
#endif
  }
}

/* Ends the write: sync, close, rename over path, sync the directory; or, after an error
 * (w->err or fail), removes the temporary file. Returns the status with a message. */
static sc_status sc__wcommit(sc__wfile *w, const char *path, const char *fn) {
  int e = w->err;
#if SC__POSIX_IO
  if (!e && fsync(w->fd) != 0) e = errno;
  if (close(w->fd) != 0 && !e) e = errno;
#else
  if (!e && fflush(w->f) != 0) e = errno ? errno : -1;
  if (fclose(w->f) != 0 && !e) e = errno ? errno : -1;
#endif
  if (!e && rename(w->tmp, path) != 0) e = errno ? errno : -1;
  if (e) {
    remove(w->tmp);
    return sc__io_fail(fn, e, "cannot write", path);
  }
#if SC__POSIX_IO
  /* the directory entry: sync the directory holding path (best effort: some file systems
   * refuse fsync on a directory, and the data itself is already on the disk) */
  const char *slash = strrchr(path, '/');
  char *dir = w->tmp;
  if (!slash)
    strcpy(dir, ".");
  else if (slash == path)
    strcpy(dir, "/");
  else {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
  }
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
#endif
  return SC_OK;
}

/* Opens path for reading; a directory or an unreadable path is SC_ERR_IO with the system's
 * reason, an allocation failure SC_ERR_NOMEM. */
static sc_status sc__ropen(FILE **f, const char *path, const char *fn) {
  errno = 0;
  *f = fopen(path, "rb");
  if (!*f) return sc__io_fail(fn, errno, "cannot open", path);
#if SC__POSIX_IO
  struct stat sb;
  if (fstat(fileno(*f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(*f);
    *f = NULL;
    return sc__io_fail(fn, EISDIR, "cannot read", path);
  }
#endif
  return SC_OK;
}

/* After a short fread: a read error (SC_ERR_IO with the system's reason) or end of file (0). */
static sc_status sc__rerr(FILE *f, const char *path, const char *fn) {
  if (!ferror(f)) return SC_OK;
  return sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
}

/* What every parameter writer (files, .npz) checks first: chain, p and n, a usable path, and
 * finite values, float (f64 = 0) or double: a file the loaders would refuse is never written.
 * verb says what did not happen ("saved", "exported"). */
static sc_status sc__write_check(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                 size_t n, const char *path, const char *verb) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  size_t plen = strlen(path);
  if (plen == 0) return sc__fail(SC_ERR_ARG, fn, "path is empty");
  if (plen > SIZE_MAX - SC__TMP_EXTRA) return sc__fail(SC_ERR_OVERFLOW, fn, "path too long");
  for (size_t k = 0; k < n; k++) {
    double v = f64 ? ((const double *)pv)[k] : (double)((const float *)pv)[k];
    if (!isfinite(v))
      return sc__fail(SC_ERR_NONFINITE, fn, "parameter p[%zu] is %s: not %s to '%s'", k,
                      isnan(v) ? "NaN" : "Inf", verb, path);
  }
  return SC_OK;
}

/* element type 1 (float32) from float p, or 2 (float64) from double p */
static sc_status sc__params_save(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                 size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, pv, f64, n, path, "saved");
  if (st) return st;
  const float *p32 = pv;
  const double *p64 = pv;
  size_t es = f64 ? 8 : 4, plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    return st;
  }
  unsigned char head[SC__PF_HEAD], buf[4096];
  memcpy(head, SC__PF_MAGIC, 8);
  sc__put_le(head + 8, 1, 4);
  sc__put_le(head + 12, f64 ? 2 : 1, 4);
  sc__put_le(head + 16, (uint64_t)n, 8);
  sc__put_le(head + 24, sc__fingerprint(chain), 8);
  sc__wwrite(&w, head, sizeof head);
  uint64_t sum = SC__FNV_INIT;
  for (size_t k = 0; !w.err && k < n;) {
    size_t m = 0;
    for (; k < n && m + es <= sizeof buf; k++, m += es)
      sc__put_le(buf + m, f64 ? sc__dbits(p64[k]) : sc__fbits(p32[k]), (int)es);
    sum = sc__fnv1a(sum, buf, m);
    sc__wwrite(&w, buf, m);
  }
  sc__put_le(head, sum, 8);
  sc__wwrite(&w, head, 8);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  return st;
}

/* either element type into float p (f64 = 0; a double beyond float range is
 * SC_ERR_NONFINITE) or double p (f64 = 1) */
static sc_status sc__params_load(const char *fn, const sc_chain *chain, void *pv, int f64, size_t n,
                                 const char *path) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  FILE *f;
  if ((st = sc__ropen(&f, path, fn))) return st;
  unsigned char head[SC__PF_HEAD], buf[4096];
  errno = 0;
  size_t got = fread(head, 1, sizeof head, f);
  if (got < sizeof head && (st = sc__rerr(f, path, fn))) {
    fclose(f);
    return st;
  }
  if (got < 8 || memcmp(head, SC__PF_MAGIC, 8) != 0) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': not a simplechain parameter file (bad magic at offset 0)", path);
  }
  if (got < sizeof head) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)",
                    path, got, SC__PF_HEAD);
  }
  uint64_t ver = sc__get_le(head + 8, 4), type = sc__get_le(head + 12, 4);
  uint64_t cnt = sc__get_le(head + 16, 8), fp = sc__get_le(head + 24, 8);
  if (ver != 1)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported format version %llu at offset 8", path,
                  (unsigned long long)ver);
  else if (type != 1 && type != 2)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': unsupported element type %llu at offset 12 (1 = float32, 2 = float64)",
                  path, (unsigned long long)type);
  else if (cnt != (uint64_t)n)
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)cnt, n);
  else if (fp != sc__fingerprint(chain))
    st = sc__fail(SC_ERR_SHAPE, fn,
                  "'%s': saved for a chain of a different shape (fingerprint at offset 24)", path);
  if (st) {
    fclose(f);
    return st;
  }
  /* read into a scratch copy first: p is written only when everything checks out */
  size_t es = type == 2 ? 8 : 4;
  double *tmp = malloc(n * sizeof *tmp);
  if (!tmp) {
    fclose(f);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  uint64_t sum = SC__FNV_INIT;
  size_t k = 0;
  while (k < n) {
    size_t want = (n - k) * es < sizeof buf ? (n - k) * es : sizeof buf;
    errno = 0;
    got = fread(buf, 1, want, f);
    sum = sc__fnv1a(sum, buf, got);
    for (size_t m = 0; m + es <= got; m += es, k++)
      tmp[k] = es == 8 ? sc__dof(sc__get_le(buf + m, 8))
                       : (double)sc__fof((uint32_t)sc__get_le(buf + m, 4));
    if (got < want) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': truncated: file ends at offset %zu, expected %zu bytes of values",
                      path, SC__PF_HEAD + k * es + got % es, SC__PF_HEAD + n * es);
      break;
    }
  }
  if (!st) {
    errno = 0;
    got = fread(head, 1, 8, f);
    if (got < 8) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path,
                      SC__PF_HEAD + n * es + got);
    } else if (sc__get_le(head, 8) != sum)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)",
                    path, SC__PF_HEAD + n * es);
    else if (fgetc(f) != EOF)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unexpected bytes after offset %zu", path,
                    SC__PF_HEAD + n * es + 8);
  }
  if (!st)
    for (k = 0; k < n; k++) {
      double v = f64 ? tmp[k] : (double)(float)tmp[k];
      if (!isfinite(v)) {
        st = sc__fail(SC_ERR_NONFINITE, fn, "'%s': parameter %zu (offset %zu) is %s%s", path, k,
                      SC__PF_HEAD + k * es, isnan(v) ? "NaN" : "Inf",
                      isfinite(tmp[k]) ? " as a float (beyond float range)" : "");
        break;
      }
    }
  if (!st)
    for (k = 0; k < n; k++) {
      if (f64)
        ((double *)pv)[k] = tmp[k];
      else
        ((float *)pv)[k] = (float)tmp[k];
    }
  free(tmp);
  fclose(f);
  return st;
}

sc_status sc_params_save(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 0, n, path);
}
sc_status sc_params_save_f64(const sc_chain *chain, const double *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 1, n, path);
}
sc_status sc_params_load(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 0, n, path);
}
sc_status sc_params_load_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 1, n, path);
}

/* ---------------------------------------------------------------- NumPy .npz files */
/* An .npz file is a zip archive of .npy files, one per array. The arrays are the
 * parameter blocks, named as the state_dict of the matching torch.nn.Sequential (see the
 * header). Written "stored" (no compression, so zlib is not needed); read stored or
 * deflated (np.savez_compressed; deflate needs zlib). Zip64 end records (archives over
 * 4 GiB or 65535 arrays) are refused; zip64 size fields of single entries are read. */

typedef struct sc__npz_arr {
  char name[48]; /* "3.weight" */
  size_t poff, count;
  int ndim;
  size_t shape[4];
  uint32_t crc;    /* export: of the .npy bytes */
  uint64_t offset; /* export: of its local header */
  size_t hlen;     /* export: .npy header bytes (magic included) */
  int seen;        /* import */
} sc__npz_arr;

/* The arrays of a chain in parameter order, and the Sequential indices they carry: a dense
 * or conv layer is module i (Linear / Conv2d) followed, unless its activation is the
 * identity, by the activation's module i+1; maxpool2d, flatten and dropout are one module
 * each. *out is malloc'ed. */
static sc_status sc__npz_plan(const char *fn, const sc_chain *c, sc__npz_arr **out, size_t *na) {
  sc__npz_arr *a = calloc(2 * c->nlayers + 1, sizeof *a);
  if (!a) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  size_t k = 0, idx = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc__lplan *P = &c->L[l];
    const sc_layer *s = &P->spec;
    if (s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D) {
      size_t nw = P->np - (s->bias ? s->outputs : 0);
      sc__npz_arr *w = &a[k++];
      snprintf(w->name, sizeof w->name, "%zu.weight", idx);
      w->poff = P->poff, w->count = nw;
      w->shape[0] = s->outputs;
      if (s->kind == SC_LAYER_DENSE) {
        w->ndim = 2, w->shape[1] = P->in;
      } else {
        w->ndim = 4, w->shape[1] = P->ic, w->shape[2] = s->kh, w->shape[3] = s->kw;
      }
      if (s->bias) {
        sc__npz_arr *b = &a[k++];
        snprintf(b->name, sizeof b->name, "%zu.bias", idx);
        b->poff = P->poff + nw, b->count = s->outputs, b->ndim = 1, b->shape[0] = s->outputs;
      }
      idx += s->act != SC_IDENTITY ? 2 : 1;
    } else {
      idx++;
    }
  }
  *out = a, *na = k;
  return SC_OK;
}

/* CRC-32 of zip (reflected polynomial 0xEDB88320), bit by bit: a few ms per MB, and no
 * table to initialise */
static uint32_t sc__crc32(uint32_t crc, const unsigned char *b, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= b[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/* the .npy header of an array: magic, version 1.0, length, the dict padded with spaces to
 * a multiple of 64 bytes in all, ending in a newline (as numpy writes it) */
static size_t sc__npy_header(unsigned char *h, size_t cap, const sc__npz_arr *a, int f64) {
  char dict[256], shape[128];
  int m = 0;
  shape[0] = 0;
  for (int d = 0; d < a->ndim; d++)
    m += snprintf(shape + m, sizeof shape - (size_t)m, "%s%zu", d ? ", " : "", a->shape[d]);
  snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (%s%s), }",
           f64 ? 8 : 4, shape, a->ndim == 1 ? "," : "");
  size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
  if (total > cap) return 0;
  memcpy(h, "\x93NUMPY\x01\x00", 8);
  sc__put_le(h + 8, total - 10, 2);
  memcpy(h + 10, dict, dl);
  memset(h + 10 + dl, ' ', total - 10 - dl - 1);
  h[total - 1] = '\n';
  return total;
}

/* the values p[poff .. poff+count) as little-endian bytes, chunk by chunk: crc (w NULL) or
 * write */
static uint32_t sc__npz_values(const void *p, int f64, const sc__npz_arr *a, uint32_t crc,
                               sc__wfile *w) {
  unsigned char buf[4096];
  size_t es = f64 ? 8 : 4;
  for (size_t k = 0; k < a->count;) {
    size_t m = 0;
    for (; k < a->count && m + es <= sizeof buf; k++, m += es) {
      if (f64)
        sc__put_le(buf + m, sc__dbits(((const double *)p)[a->poff + k]), 8);
      else
        sc__put_le(buf + m, sc__fbits(((const float *)p)[a->poff + k]), 4);
    }
    if (w)
      sc__wwrite(w, buf, m);
    else
      crc = sc__crc32(crc, buf, m);
  }
  return crc;
}

#define SC__ZIP_LOCAL 0x04034b50u
#define SC__ZIP_CENTRAL 0x02014b50u
#define SC__ZIP_END 0x06054b50u
#define SC__ZIP_DATE 0x21 /* 1980-01-01, 00:00: the file depends on the values alone */

static sc_status sc__npz_export(const char *fn, const sc_chain *chain, const void *p, int f64,
                                size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, p, f64, n, path, "exported");
  if (st) return st;
  size_t plen = strlen(path);
  sc__npz_arr *a;
  size_t na;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  if (na > 0xFFFF) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%zu arrays: more than a zip without zip64 holds", na);
  }
  /* offsets and CRCs first: the local headers carry them */
  unsigned char h[512];
  uint64_t off = 0;
  for (size_t i = 0; i < na; i++) {
    a[i].hlen = sc__npy_header(h, sizeof h, &a[i], f64);
    a[i].crc = sc__npz_values(p, f64, &a[i], sc__crc32(0, h, a[i].hlen), NULL);
    a[i].offset = off;
    off += 30 + strlen(a[i].name) + 4 + a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
  }
  if (off > 0xFFFFFFFFu - 65536u * (na + 1)) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "%zu parameters: over the 4 GiB a zip without zip64 holds", n);
  }
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) {
    free(a);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    free(a);
    return st;
  }
  unsigned char z[64];
  uint64_t cd_size = 0;
  for (int pass = 0; pass < 2; pass++) /* 0: entries, 1: central directory */
    for (size_t i = 0; i < na; i++) {
      size_t nl = strlen(a[i].name) + 4;
      uint64_t size = a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
      unsigned char *q = z;
      sc__put_le(q, pass ? SC__ZIP_CENTRAL : SC__ZIP_LOCAL, 4), q += 4;
      if (pass) sc__put_le(q, 20, 2), q += 2; /* made by: version 2.0 */
      sc__put_le(q, 20, 2), q += 2;           /* needed: 2.0 */
      sc__put_le(q, 0, 2), q += 2;            /* flags */
      sc__put_le(q, 0, 2), q += 2;            /* stored */
      sc__put_le(q, 0, 2), q += 2;            /* time */
      sc__put_le(q, SC__ZIP_DATE, 2), q += 2;
      sc__put_le(q, a[i].crc, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, nl, 2), q += 2;
      sc__put_le(q, 0, 2), q += 2; /* extra */
      if (pass) {
        memset(q, 0, 10), q += 10; /* comment, disk, internal and external attributes */
        sc__put_le(q, a[i].offset, 4), q += 4;
        cd_size += (uint64_t)(q - z) + nl;
      }
      sc__wwrite(&w, z, (size_t)(q - z));
      sc__wwrite(&w, a[i].name, nl - 4);
      sc__wwrite(&w, ".npy", 4);
      if (!pass) {
        sc__npy_header(h, sizeof h, &a[i], f64);
        sc__wwrite(&w, h, a[i].hlen);
        sc__npz_values(p, f64, &a[i], 0, &w);
      }
    }
  sc__put_le(z, SC__ZIP_END, 4);
  sc__put_le(z + 4, 0, 4); /* disk numbers */
  sc__put_le(z + 8, na, 2);
  sc__put_le(z + 10, na, 2);
  sc__put_le(z + 12, cd_size, 4);
  sc__put_le(z + 16, off, 4);
  sc__put_le(z + 20, 0, 2);
  sc__wwrite(&w, z, 22);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  free(a);
  return st;
}

/* --- reading */

/* reads len bytes at offset off; a short read is SC_ERR_FORMAT naming what was read */
static sc_status sc__npz_pread(const char *fn, FILE *f, const char *path, uint64_t off,
                               unsigned char *buf, size_t len, const char *what) {
  if (off > (uint64_t)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': %s at offset %llu lies outside the file", path, what,
                    (unsigned long long)off);
  errno = 0;
  size_t got = fread(buf, 1, len, f);
  if (got < len) {
    sc_status st = sc__rerr(f, path, fn);
    if (st) return st;
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': truncated: %s at offset %llu (file ends %zu bytes in)", path, what,
                    (unsigned long long)off, got);
  }
  return SC_OK;
}

/* The dict of an .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (8, 3), }
 * in any key order. Fills descr, fortran and the shape; 0 or a message in err. */
static int sc__npy_dict(const char *s, size_t len, char *descr, size_t dcap, int *fortran,
                        size_t *shape, int *ndim, char *err, size_t ecap) {
  size_t i = 0;
  int have = 0;
#define SC__WS()                                                                                   \
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++
#define SC__BAD(...)                                                                               \
  do {                                                                                             \
    snprintf(err, ecap, __VA_ARGS__);                                                              \
    return -1;                                                                                     \
  } while (0)
  SC__WS();
  if (i >= len || s[i] != '{') SC__BAD("header does not start with '{'");
  i++;
  for (;;) {
    SC__WS();
    if (i < len && s[i] == '}') break;
    if (i >= len || (s[i] != '\'' && s[i] != '"'))
      SC__BAD("expected a quoted key at header byte %zu", i);
    char q = s[i++], key[16];
    size_t k0 = i;
    while (i < len && s[i] != q) i++;
    if (i >= len || i - k0 >= sizeof key) SC__BAD("bad key at header byte %zu", k0);
    memcpy(key, s + k0, i - k0);
    key[i - k0] = 0;
    i++;
    SC__WS();
    if (i >= len || s[i] != ':') SC__BAD("expected ':' after '%s'", key);
    i++;
    SC__WS();
    if (!strcmp(key, "descr")) {
      if (i >= len || (s[i] != '\'' && s[i] != '"')) SC__BAD("'descr' is not a string");
      char dq = s[i++];
      size_t d0 = i;
      while (i < len && s[i] != dq) i++;
      if (i >= len || i - d0 >= dcap) SC__BAD("bad 'descr'");
      memcpy(descr, s + d0, i - d0);
      descr[i - d0] = 0;
      i++;
      have |= 1;
    } else if (!strcmp(key, "fortran_order")) {
      if (len - i >= 4 && !memcmp(s + i, "True", 4))
        *fortran = 1, i += 4;
      else if (len - i >= 5 && !memcmp(s + i, "False", 5))
        *fortran = 0, i += 5;
      else
        SC__BAD("'fortran_order' is neither True nor False");
      have |= 2;
    } else if (!strcmp(key, "shape")) {
      if (i >= len || s[i] != '(') SC__BAD("'shape' is not a tuple");
      i++;
      *ndim = 0;
      for (;;) {
        SC__WS();
        if (i < len && s[i] == ')') break;
        if (i >= len || s[i] < '0' || s[i] > '9') SC__BAD("bad 'shape' at header byte %zu", i);
        uint64_t v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
          if (v > (UINT64_MAX - 9) / 10) SC__BAD("a dimension of 'shape' overflows");
          v = v * 10 + (uint64_t)(s[i++] - '0');
        }
        if (*ndim >= 8) SC__BAD("'shape' has more than 8 dimensions");
        if (v > SIZE_MAX) SC__BAD("a dimension of 'shape' overflows");
        shape[(*ndim)++] = (size_t)v;
        SC__WS();
        if (i < len && s[i] == ',') {
          i++;
          continue;
        }
        if (i < len && s[i] == ')') break;
        SC__BAD("bad 'shape' at header byte %zu", i);
      }
      i++;
      have |= 4;
    } else {
      SC__BAD("unknown key '%s'", key);
    }
    SC__WS();
    if (i < len && s[i] == ',') {
      i++;
      continue;
    }
    if (i < len && s[i] == '}') break;
    SC__BAD("expected ',' or '}' at header byte %zu", i);
  }
  i++;
  SC__WS();
  if (i != len) SC__BAD("bytes after the header's '}'");
  if (have != 7)
    SC__BAD("header lacks '%s'", !(have & 1) ? "descr" : !(have & 2) ? "fortran_order" : "shape");
  return 0;
#undef SC__WS
#undef SC__BAD
}

static void sc__shape_str(char *b, size_t cap, const size_t *shape, int ndim) {
  int m = snprintf(b, cap, "(");
  for (int d = 0; d < ndim && m > 0 && (size_t)m < cap; d++)
    m += snprintf(b + m, cap - (size_t)m, "%s%zu", d ? ", " : "", shape[d]);
  if (m > 0 && (size_t)m < cap) snprintf(b + m, cap - (size_t)m, "%s)", ndim == 1 ? "," : "");
}

/* one .npy (bytes u[0..len)) into dst (float or double) at the array's place */
static sc_status sc__npy_read(const char *fn, const char *path, const sc__npz_arr *a,
                              const unsigned char *u, size_t len, void *dst, int f64) {
  if (len < 10 || memcmp(u, "\x93NUMPY", 6) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is not an .npy (bad magic)", path,
                    a->name);
  unsigned major = u[6];
  if (major < 1 || major > 3)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': unsupported .npy version %u.%u", path,
                    a->name, major, u[7]);
  size_t hl = major == 1 ? (size_t)sc__get_le(u + 8, 2)
                         : (len >= 12 ? (size_t)sc__get_le(u + 8, 4) : SIZE_MAX);
  size_t h0 = major == 1 ? 10 : 12;
  if (hl > len - h0 || len < h0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': truncated .npy header", path, a->name);
  char descr[16], msg[160];
  int fortran = 0, ndim = 0;
  size_t shape[8];
  if (sc__npy_dict((const char *)u + h0, hl, descr, sizeof descr, &fortran, shape, &ndim, msg,
                   sizeof msg))
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': .npy header: %s", path, a->name, msg);
  int big = 0, es = 0;
  if ((descr[0] == '<' || descr[0] == '>' || descr[0] == '=') && descr[1] == 'f' &&
      (descr[2] == '4' || descr[2] == '8') && !descr[3]) {
    big = descr[0] == '>';
    es = descr[2] - '0';
  }
  if (!es)
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' has dtype '%s'; float32 ('<f4') or float64 ('<f8') needed",
                    path, a->name, descr);
  char got[128], want[128];
  sc__shape_str(got, sizeof got, shape, ndim);
  sc__shape_str(want, sizeof want, a->shape, a->ndim);
  if (strcmp(got, want) != 0)
    return sc__fail(SC_ERR_SHAPE, fn, "'%s': array '%s' has shape %s, the chain needs %s", path,
                    a->name, got, want);
  if (fortran) {
    int wide = 0;
    for (int d = 0; d < ndim; d++) wide += shape[d] > 1;
    if (wide > 1)
      return sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': array '%s' is in Fortran order; save C-ordered arrays "
                      "(np.ascontiguousarray)",
                      path, a->name);
  }
  const unsigned char *v = u + h0 + hl;
  size_t nb = len - h0 - hl;
  if (nb != a->count * (size_t)es)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' holds %zu bytes of values, %zu expected",
                    path, a->name, nb, a->count * (size_t)es);
  for (size_t k = 0; k < a->count; k++, v += es) {
    unsigned char b[8] = {0};
    for (int j = 0; j < es; j++) b[j] = big ? v[es - 1 - j] : v[j];
    double x = es == 8 ? sc__dof(sc__get_le(b, 8)) : (double)sc__fof((uint32_t)sc__get_le(b, 4));
    if (f64)
      ((double *)dst)[a->poff + k] = x;
    else
      ((float *)dst)[a->poff + k] = (float)x;
    double y = f64 ? x : (double)(float)x;
    if (!isfinite(y))
      return sc__fail(SC_ERR_NONFINITE, fn, "'%s': array '%s' element %zu is %s%s", path, a->name,
                      k, isnan(y) ? "NaN" : "Inf", isfinite(x) ? " (beyond float range)" : "");
  }
  return SC_OK;
}

/* the uncompressed bytes of one entry into out (exactly usize bytes) */
static sc_status sc__npz_inflate(const char *fn, const char *path, const char *name,
                                 unsigned char *in, size_t csize, unsigned char *out,
                                 size_t usize) {
#ifdef SC_HAVE_ZLIB
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    return sc__fail(SC_ERR_NOMEM, fn, "zlib's inflateInit2 failed (out of memory)");
  sc_status st = SC_OK;
  size_t done_in = 0, done_out = 0;
  int r = Z_OK, longer = 0;
  unsigned char spill; /* one byte past the stated size: a longer stream (a bomb) shows */
  for (;;) {
    /* zlib counts in uInt: at most 1 GiB at a time */
    size_t ci = csize - done_in, co = usize - done_out;
    zs.next_in = in + done_in;
    zs.avail_in = (uInt)(ci > (1u << 30) ? (1u << 30) : ci);
    zs.next_out = co ? out + done_out : &spill;
    zs.avail_out = co ? (uInt)(co > (1u << 30) ? (1u << 30) : co) : 1;
    uInt ai = zs.avail_in, ao = zs.avail_out;
    r = inflate(&zs, Z_NO_FLUSH);
    done_in += ai - zs.avail_in;
    if (co) {
      done_out += ao - zs.avail_out;
    } else if (zs.avail_out == 0) {
      longer = 1;
      break;
    }
    if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR)) break;
    if (ai == zs.avail_in && ao == zs.avail_out) break; /* no progress: input ends early */
  }
  if (r == Z_MEM_ERROR)
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory in zlib");
  else if (longer)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': array '%s': the deflated data is longer than its stated %zu bytes "
                  "(a zip bomb?)",
                  path, name, usize);
  else if (r != Z_STREAM_END)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is damaged or truncated",
                  path, name);
  else if (done_out != usize)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is %zu bytes, %zu stated",
                  path, name, done_out, usize);
  inflateEnd(&zs);
  return st;
#else
  (void)in, (void)csize, (void)out, (void)usize;
  return sc__fail(SC_ERR_UNSUPPORTED, fn,
                  "'%s': array '%s' is compressed (np.savez_compressed); reading it needs zlib: "
                  "compile with -DSC_HAVE_ZLIB and link -lz, or save with np.savez",
                  path, name);
#endif
}

static sc_status sc__npz_import(const char *fn, const sc_chain *chain, void *p, int f64, size_t n,
                                const char *path) {
  sc_status st = sc__init_check(fn, chain, p, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  sc__npz_arr *a = NULL;
  size_t na = 0;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  FILE *f = NULL;
  unsigned char *tail = NULL, *cd = NULL, *cbuf = NULL, *ubuf = NULL;
  void *tmp = NULL;
  if ((st = sc__ropen(&f, path, fn))) goto done;
  if (fseek(f, 0, SEEK_END) != 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  long fsl = ftell(f);
  if (fsl < 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  uint64_t fsize = (uint64_t)fsl;
  if (fsize < 22) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not an .npz (zip) file: %llu bytes", path,
                  (unsigned long long)fsize);
    goto done;
  }
  /* the end record: the last "PK\5\6" whose comment ends the file */
  size_t tl = fsize < 22 + 65535 ? (size_t)fsize : 22 + 65535;
  tail = malloc(tl);
  tmp = malloc(n * (f64 ? sizeof(double) : sizeof(float)) + 1);
  if (!tail || !tmp) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, fsize - tl, tail, tl, "the end of the file"))) goto done;
  size_t e = tl - 22 + 1;
  while (e-- > 0)
    if (sc__get_le(tail + e, 4) == SC__ZIP_END && e + 22 + sc__get_le(tail + e + 20, 2) == tl)
      break;
  if (e == (size_t)-1) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': not an .npz (zip) file: no end-of-central-directory record", path);
    goto done;
  }
  uint64_t eoff = fsize - tl + e;
  uint64_t nent = sc__get_le(tail + e + 10, 2), cds = sc__get_le(tail + e + 12, 4);
  uint64_t cdo = sc__get_le(tail + e + 16, 4);
  if (sc__get_le(tail + e + 4, 4) != 0 || sc__get_le(tail + e + 8, 2) != nent) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip split over several disks", path);
    goto done;
  }
  if (nent == 0xFFFF || cds == 0xFFFFFFFFu || cdo == 0xFFFFFFFFu) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip64 archive (over 4 GiB or 65535 entries)",
                  path);
    goto done;
  }
  if (cdo > eoff || cds > eoff - cdo) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': the central directory (offset %llu, %llu bytes) lies outside the file",
                  path, (unsigned long long)cdo, (unsigned long long)cds);
    goto done;
  }
  cd = malloc((size_t)cds + 1);
  if (!cd) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, cdo, cd, (size_t)cds, "the central directory"))) goto done;
  size_t at = 0;
  for (uint64_t ent = 0; ent < nent; ent++) {
    if (cds - at < 46 || sc__get_le(cd + at, 4) != SC__ZIP_CENTRAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': bad central directory entry %llu at offset %llu",
                    path, (unsigned long long)ent, (unsigned long long)(cdo + at));
      goto done;
    }
    const unsigned char *c = cd + at;
    unsigned flags = (unsigned)sc__get_le(c + 8, 2), method = (unsigned)sc__get_le(c + 10, 2);
    uint32_t crc = (uint32_t)sc__get_le(c + 16, 4);
    uint64_t csize = sc__get_le(c + 20, 4), usize = sc__get_le(c + 24, 4);
    size_t nl = (size_t)sc__get_le(c + 28, 2), xl = (size_t)sc__get_le(c + 30, 2);
    size_t cl = (size_t)sc__get_le(c + 32, 2);
    uint64_t loff = sc__get_le(c + 42, 4);
    if (cds - at - 46 < (uint64_t)nl + xl + cl) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': central directory entry %llu is truncated", path,
                    (unsigned long long)ent);
      goto done;
    }
    char name[64];
    const char *nm = (const char *)c + 46;
    int named = nl > 4 && nl - 4 < sizeof name && !memcmp(nm + nl - 4, ".npy", 4);
    if (named) {
      memcpy(name, nm, nl - 4);
      name[nl - 4] = 0;
      named = strlen(name) == nl - 4;
    }
    if (!named) {
      char shown[40];
      size_t sl = nl < sizeof shown - 1 ? nl : sizeof shown - 1;
      for (size_t i = 0; i < sl; i++) shown[i] = nm[i] >= 32 && nm[i] < 127 ? nm[i] : '?';
      shown[sl] = 0;
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': entry '%s%s' is not an .npy array of this chain",
                    path, shown, nl > sl ? "..." : "");
      goto done;
    }
    /* zip64 sizes of this entry */
    for (size_t x = 0; x + 4 <= xl;) {
      const unsigned char *xp = c + 46 + nl + x;
      size_t id = (size_t)sc__get_le(xp, 2), len = (size_t)sc__get_le(xp + 2, 2);
      if (len > xl - x - 4) break;
      if (id == 1) {
        const unsigned char *v = xp + 4, *vend = xp + 4 + len;
        if (usize == 0xFFFFFFFFu && vend - v >= 8) usize = sc__get_le(v, 8), v += 8;
        if (csize == 0xFFFFFFFFu && vend - v >= 8) csize = sc__get_le(v, 8), v += 8;
        if (loff == 0xFFFFFFFFu && vend - v >= 8) loff = sc__get_le(v, 8), v += 8;
      }
      x += 4 + len;
    }
    at += 46 + nl + xl + cl;
    sc__npz_arr *A = NULL;
    for (size_t i = 0; i < na && !A; i++)
      if (!strcmp(a[i].name, name)) A = &a[i];
    if (!A) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': unexpected array '%s' (this chain's arrays are %s ... %s, see the "
                    "header)",
                    path, name, na ? a[0].name : "none", na ? a[na - 1].name : "none");
      goto done;
    }
    if (A->seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' appears twice", path, name);
      goto done;
    }
    A->seen = 1;
    if (flags & 1u) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': array '%s' is encrypted", path, name);
      goto done;
    }
    if (method != 0 && method != 8) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "'%s': array '%s' uses zip compression method %u (stored and deflate only)",
                    path, name, method);
      goto done;
    }
    /* no more than its shape can need: 8 bytes a value and a header of at most 64 KiB */
    uint64_t cap = (uint64_t)A->count * 8 + 65536 + 12;
    if (usize > cap) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' claims %llu bytes, more than its shape can need (%llu)", path,
                    name, (unsigned long long)usize, (unsigned long long)cap);
      goto done;
    }
    if ((method == 0 && csize != usize) || loff > eoff || csize > eoff) {
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': inconsistent sizes or offset", path, name);
      goto done;
    }
    unsigned char lh[30];
    if ((st = sc__npz_pread(fn, f, path, loff, lh, 30, "a local header"))) goto done;
    if (sc__get_le(lh, 4) != SC__ZIP_LOCAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': no local header at offset %llu", path,
                    name, (unsigned long long)loff);
      goto done;
    }
    uint64_t doff = loff + 30 + sc__get_le(lh + 26, 2) + sc__get_le(lh + 28, 2);
    if (doff > eoff || csize > eoff - doff) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': its data runs past the archive", path,
                    name);
      goto done;
    }
    free(cbuf);
    free(ubuf);
    cbuf = malloc((size_t)csize + 1);
    ubuf = method == 0 ? NULL : malloc((size_t)usize + 1);
    if (!cbuf || (method != 0 && !ubuf)) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto done;
    }
    if ((st = sc__npz_pread(fn, f, path, doff, cbuf, (size_t)csize, "an array's data"))) goto done;
    const unsigned char *u = cbuf;
    if (method == 8) {
      if ((st = sc__npz_inflate(fn, path, name, cbuf, (size_t)csize, ubuf, (size_t)usize)))
        goto done;
      u = ubuf;
    }
    if (sc__crc32(0, u, (size_t)usize) != crc) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': CRC mismatch (the file is damaged)", path,
                    name);
      goto done;
    }
    if ((st = sc__npy_read(fn, path, A, u, (size_t)usize, tmp, f64))) goto done;
  }
  for (size_t i = 0; i < na; i++)
    if (!a[i].seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is missing", path, a[i].name);
      goto done;
    }
  memcpy(p, tmp, n * (f64 ? sizeof(double) : sizeof(float)));
done:
  if (f) fclose(f);
  free(tail);
  free(cd);
  free(cbuf);
  free(ubuf);
  free(tmp);
  free(a);
  return st;
}

sc_status sc_params_export_npz(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__npz_export(__func__, chain, p, 0, n, path);
}
sc_status sc_params_export_npz_f64(const sc_chain *chain, const double *p, size_t n,
                                   const char *path) {
  return sc__npz_export(__func__, chain, p, 1, n, path);
}
sc_status sc_params_import_npz(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 0, n, path);
}
sc_status sc_params_import_npz_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 1, n, path);
}

/* ---------------------------------------------------------------- variants (the planner) */
/* The dense layers' float forward comes in two variants on the SIMD kernel sets: "fused"
 * (our register-blocked GEMM with bias and activation in the same pass) and "xsmm"
 * (libxsmm's JIT GEMM, then a bias/activation pass), when make finds libxsmm-dev
 * (SC_HAVE_XSMM). Which one a layer runs is decided once, at chain creation:
 *   - by rule (default, SC_PLAN=rules): xsmm on the AVX-512 kernel set for dense layers with
 *     at least SC__XSMM_MIN_IN inputs, where it measured faster (bench/xsmm_dense.c, make
 *     bench-xsmm, Zen 5: faster by 3-7 % from 84 inputs up, slower by 2-34 % at 32 inputs and
 *     below); fused everywhere else;
 *   - by measurement (SC_PLAN=measure): both variants time a forward of one slice-sized
 *     batch on this machine, the faster wins. With SC_WISDOM=path the answers are kept in a
 *     text file keyed by CPU model, kernel set and layer shape, read back on the next
 *     creation instead of timing again (a file that is not a wisdom file is ignored, left
 *     alone, and said so in sc_chain_plan);
 *   - by force (SC_DENSE_FWD=fused|xsmm), for tests and experiments.
 * The float tanh of a dense layer on the vector kernel sets has four variants: "div"
 * (tanh's final quotient E / (E + 2) as a divide) and "rcp" (a reciprocal estimate r, on
 * AVX2 refined by one Newton step, then y0 = E r, y = y0 + r (E - (E + 2) y0): no divide
 * instruction, a longer dependency chain; at most 1.5 ULP like div, test_math), and the
 * rational form (v_tanh_rat: 12 operations instead of 28, at most 6 ULP) with either
 * quotient, "rat" and "ratrcp". The rational ones are less accurate than SLEEF's tanhf u35,
 * so they are opt-in: SC_TANH_VARIANT=fast lets the planner choose among all four, otherwise
 * it chooses between div and rcp. Chosen the same three ways: by rule (div; rat with fast:
 * see SC__TANH_RULE), by measurement (SC_PLAN=measure, the same one-layer timing, kept in the
 * wisdom file with the four timings, 0 for those not timed), or by force (SC_TANH_VARIANT=
 * div|rcp|rat|ratrcp). The scalar kernels and conv layers have the divide form only.
 * Conv layers on the vector float kernel sets have SC__CONV_NV register-block shapes for the
 * forward and for dW (the kernel table names them; all give the same bits): by rule the first
 * of each (measured best on LeNet5), by SC_PLAN=measure the fastest forward (sc_forward on a
 * one-layer twin), then the fastest dW with it (sc_valgrad), kept as "conv" wisdom entries;
 * forced by SC_CONV_FWD / SC_CONV_DW (the other keeps the rule's). With libxsmm the forward
 * has "xsmm" too (im2col rows + sc__xsmm_conv_kernel's GEMM, P->xconv): measured against the
 * fastest block, forced by SC_CONV_FWD=xsmm, never by rule (bench/xsmm_conv.c and the LeNet5
 * profile on the AVX2 host: slower on conv1, within noise to slower on conv2).
 * Dense layers with lane accumulators for dW (dwl_off) have the dot form as a variant
 * (P->dw_dot: transpose + SC__K_DW, as the larger layers): rule lane, SC_PLAN=measure times
 * sc_valgrad of a one-layer twin with each ("dense_dw" wisdom entries), SC_DENSE_DW forces;
 * every kernel set, float and double, runs both.
 * The choice belongs to the chain, so results never depend on the thread count; the
 * variants may differ from each other in the last bits. SC_XSMM=0 keeps libxsmm out. */
#define SC__XSMM_MIN_IN 64
enum { SC__HOW_ONLY = 0, SC__HOW_RULE, SC__HOW_MEASURED, SC__HOW_WISDOM, SC__HOW_FORCED };
static SC__TLS int sc__planning; /* set while timing candidates: their chains plan nothing */

#if defined(SC_HAVE_XSMM) && defined(SC_HAVE_KERNELS)
#include <libxsmm.h>
#define SC__XSMM 1
/* libxsmm's GEMM for layer P, or NULL (no JIT for it) */
static sc__xsmm_fn sc__xsmm_kernel(const sc__lplan *P) {
  /* row-major a (out x TW) = W (out x in) x (in x TW) is the column-major
   * a^T (TW x out) = x^T (TW x in) W^T (in x out): m = TW, n = out, k = in */
  libxsmm_blasint m = SC__TW, n = (libxsmm_blasint)P->out, k = (libxsmm_blasint)P->in;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &m, &alpha, &beta, &flags, NULL);
}
/* libxsmm's GEMM for one output row of conv layer P (every channel), or NULL: row-major
 * a[k][(v,t)] = sum_r W[k][r] col[r][(v,t)] is the column-major a^T ((v,t) x k) = col^T W^T:
 * m = ow TW, n = oc, k = R, lda = m, ldb = R, ldc = oh ow TW (one channel's rows) */
static sc__xsmm_fn sc__xsmm_conv_kernel(const sc__lplan *P) {
  size_t m_ = P->ow * SC__TW, ldc_ = P->oh * P->ow * SC__TW;
  if (m_ > INT_MAX || ldc_ > INT_MAX || P->oc > INT_MAX || P->R > INT_MAX) return NULL;
  libxsmm_blasint m = (libxsmm_blasint)m_, n = (libxsmm_blasint)P->oc, k = (libxsmm_blasint)P->R,
                  ldc = (libxsmm_blasint)ldc_;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &ldc, &alpha, &beta, &flags, NULL);
}
#else
#define SC__XSMM 0
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* r = EAX, EBX, ECX, EDX of CPUID leaf, subleaf */
static inline void sc__cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* The CPU's brand string (x86 CPUID), spaces as '_', for wisdom keys */
static void sc__cpu_model(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned r[12];
  for (unsigned i = 0; i < 3; i++) sc__cpuid(0x80000002u + i, 0, r + 4 * i);
  char s[49];
  memcpy(s, r, 48);
  s[48] = 0;
  size_t k = 0;
  const char *q = s;
  while (*q == ' ') q++;
  for (; *q && k + 1 < cap; q++) buf[k++] = (*q == ' ' || *q == '=' || *q == '\n') ? '_' : *q;
  while (k > 0 && buf[k - 1] == '_') k--;
  if (k) buf[k] = 0;
#endif
}

/* the index of the first n characters of s in names (NULL-terminated), or -1 */
static int sc__name_index(const char *const *names, const char *s, size_t n) {
  for (int i = 0; names && names[i]; i++)
    if (strlen(names[i]) == n && !strncmp(names[i], s, n)) return i;
  return -1;
}
/* the tanh variants' names, by SC__TANH_* */
static const char *const sc__tanh_names[] = {"div", "rcp", "rat", "ratrcp", NULL};

/* one wisdom entry */
enum { SC__WIS_DENSE = 0, SC__WIS_TANH, SC__WIS_CONV, SC__WIS_DW };
typedef struct sc__wis {
  int tanh; /* SC__WIS_DENSE: a dense_fwd entry (fused / xsmm), SC__WIS_TANH: a tanh entry
               (div / rcp / rat / ratrcp), SC__WIS_CONV: a conv entry (forward block : dW block),
               SC__WIS_DW: a dense_dw entry (lane / dot) */
  char cpu[64], isa[16], act[16], pick[16];
  char shape[64]; /* conv: the layer's key (sc__conv_key) */
  size_t in, out;
  int bias;
  double ns_a, ns_b;                /* fused and xsmm, or lane and dot */
  double ns_c[2 * SC__CONV_NV + 1]; /* conv: the forward blocks' times, the dW blocks', then
                                       libxsmm's forward; tanh: the variants' (0: not timed) */
} sc__wis;

/* a conv layer's wisdom key: input shape, channels, kernel, stride, padding, activation, bias */
static void sc__conv_key(char *b, size_t cap, const sc__lplan *P) {
  snprintf(b, cap, "%zux%zux%zu>%zu:k%zux%zu:s%zux%zu:p%zux%zu:%s:b%d", P->ic, P->ih, P->iw, P->oc,
           P->spec.kh, P->spec.kw, P->spec.sh, P->spec.sw, P->spec.ph, P->spec.pw,
           sc_act_name(P->spec.act), P->spec.bias);
}

#define SC__WIS_MAX 4096
/* Reads the wisdom file: entries into *w (malloc'ed), their count into *nw. A missing file is
 * no entries; anything else that is not a wisdom file leaves a note and returns -1. */
static int sc__wis_read(const char *path, sc__wis **w, size_t *nw, char *note, size_t cap) {
  *w = NULL, *nw = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  size_t ln = 0, capw = 0;
  int bad = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    if (!strchr(line, '\n') && !feof(f)) {
      bad = 1;
      break;
    }
    if (ln == 1) {
      if (strcmp(line, "# simplechain wisdom 1\n") != 0) {
        bad = 1;
        break;
      }
      continue;
    }
    sc__wis e;
    memset(&e, 0, sizeof e);
    int used = 0, fields, want;
    e.tanh = !strncmp(line, "tanh ", 5)       ? SC__WIS_TANH
             : !strncmp(line, "conv ", 5)     ? SC__WIS_CONV
             : !strncmp(line, "dense_dw ", 9) ? SC__WIS_DW
                                              : SC__WIS_DENSE;
    want = e.tanh == SC__WIS_TANH ? 8 : e.tanh == SC__WIS_CONV ? 11 : 9; /* each kind's fields */
    char *colon = NULL;
    if (e.tanh == SC__WIS_CONV) {
      fields = sscanf(line,
                      "conv cpu=%63s isa=%15s shape=%63s pick=%15s fwd_ns=%lf,%lf,%lf "
                      "xsmm_ns=%lf dw_ns=%lf,%lf,%lf%n",
                      e.cpu, e.isa, e.shape, e.pick, &e.ns_c[0], &e.ns_c[1], &e.ns_c[2], &e.ns_c[6],
                      &e.ns_c[3], &e.ns_c[4], &e.ns_c[5], &used);
      colon = strchr(e.pick, ':');
    } else if (e.tanh == SC__WIS_DW) {
      fields = sscanf(line,
                      "dense_dw cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "lane_ns=%lf dot_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    } else if (e.tanh == SC__WIS_TANH) { /* (the rat timings are newer: optional) */
      fields = sscanf(line,
                      "tanh cpu=%63s isa=%15s in=%zu out=%zu bias=%d pick=%7s div_ns=%lf "
                      "rcp_ns=%lf%n rat_ns=%lf ratrcp_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, &e.bias, e.pick, &e.ns_c[0], &e.ns_c[1], &used,
                      &e.ns_c[2], &e.ns_c[3], &used);
      if (fields == 10) fields = 8;
    } else
      fields = sscanf(line,
                      "dense_fwd cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "fused_ns=%lf xsmm_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    if (fields != want || (line[used] != '\n' && line[used] != 0) ||
        (e.tanh == SC__WIS_CONV   ? !colon || colon == e.pick || !colon[1]
         : e.tanh == SC__WIS_TANH ? sc__name_index(sc__tanh_names, e.pick, strlen(e.pick)) < 0
         : e.tanh == SC__WIS_DW   ? strcmp(e.pick, "lane") && strcmp(e.pick, "dot")
                                  : strcmp(e.pick, "fused") && strcmp(e.pick, "xsmm")) ||
        *nw >= SC__WIS_MAX) {
      bad = 1;
      break;
    }
    if (*nw == capw) {
      size_t nc = capw ? 2 * capw : 16;
      sc__wis *nwp = realloc(*w, nc * sizeof **w);
      if (!nwp) {
        bad = 1;
        break;
      }
      *w = nwp, capw = nc;
    }
    (*w)[(*nw)++] = e;
  }
  int err = ferror(f);
  fclose(f);
  if (bad || err || ln == 0) {
    free(*w);
    *w = NULL, *nw = 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: line %zu is not a wisdom entry", path,
             ln ? ln : 1);
    return -1;
  }
  return 0;
}

static sc_status sc__wis_write(const char *fn, const char *path, const sc__wis *w, size_t nw) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile wf;
  sc_status st = sc__wopen(&wf, path, tmp, fn);
  if (!st) {
    char line[512];
    int k = snprintf(line, sizeof line, "# simplechain wisdom 1\n");
    sc__wwrite(&wf, line, (size_t)k);
    for (size_t i = 0; i < nw; i++) {
      if (w[i].tanh == SC__WIS_CONV)
        k = snprintf(line, sizeof line,
                     "conv cpu=%s isa=%s shape=%s pick=%s fwd_ns=%.1f,%.1f,%.1f "
                     "xsmm_ns=%.1f dw_ns=%.1f,%.1f,%.1f\n",
                     w[i].cpu, w[i].isa, w[i].shape, w[i].pick, w[i].ns_c[0], w[i].ns_c[1],
                     w[i].ns_c[2], w[i].ns_c[6], w[i].ns_c[3], w[i].ns_c[4], w[i].ns_c[5]);
      else if (w[i].tanh == SC__WIS_DW)
        k = snprintf(line, sizeof line,
                     "dense_dw cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "lane_ns=%.1f dot_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      else if (w[i].tanh)
        k = snprintf(line, sizeof line,
                     "tanh cpu=%s isa=%s in=%zu out=%zu bias=%d pick=%s div_ns=%.1f rcp_ns=%.1f "
                     "rat_ns=%.1f ratrcp_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].bias, w[i].pick, w[i].ns_c[0],
                     w[i].ns_c[1], w[i].ns_c[2], w[i].ns_c[3]);
      else
        k = snprintf(line, sizeof line,
                     "dense_fwd cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "fused_ns=%.1f xsmm_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      if (k > 0) sc__wwrite(&wf, line, (size_t)k);
    }
    st = sc__wcommit(&wf, path, fn);
  }
  free(tmp);
  return st;
}

/* ns per forward (grad: per sc_valgrad, squared loss) of a slice-sized batch through a
 * one-layer twin of P, with the variants of P except for: the xsmm GEMM xs or (NULL) our
 * fused kernel, the tanh variant tv, the conv blocks cf and cd; the median of 5 rounds */
static double sc__time_layer(const sc_chain *c, const sc__lplan *P, sc__xsmm_fn xs, int tv, int dot,
                             int cf, int cd, int grad) {
  sc_chain *t = NULL;
  sc_workspace *ws = NULL;
  float *p = NULL, *x = NULL, *y = NULL, *g = NULL;
  double best = 0;
  size_t batch = SC__TW * (c->min_tiles ? c->min_tiles : 1);
  int conv = P->spec.kind == SC_LAYER_CONV2D;
  sc__planning = 1;
  sc_status st = sc__chain_create("sc_chain_create", &t, conv ? P->ic : P->in, conv ? P->ih : 1,
                                  conv ? P->iw : 1, &P->spec, 1);
  sc__planning = 0;
  if (st) return 0;
  t->kf = c->kf, t->kd = c->kd;
  if (conv)
    t->L[0].xconv = xs;
  else
    t->L[0].xfwd = xs;
  t->L[0].tanh_var = (unsigned char)tv;
  t->L[0].dw_dot = (unsigned char)dot;
  t->L[0].conv_fwd = (unsigned char)cf, t->L[0].conv_dw = (unsigned char)cd;
  size_t np = t->nparams;
  p = malloc(np * sizeof *p);
  g = malloc(np * sizeof *g);
  x = malloc(batch * P->in * sizeof *x);
  y = calloc(batch * P->out, sizeof *y);
  if (p && g && x && y && sc_workspace_create(&ws, t, batch) == SC_OK) {
    for (size_t k = 0; k < np; k++) p[k] = (float)((k * 37) % 19) / 19.0f - 0.5f;
    for (size_t k = 0; k < batch * P->in; k++) x[k] = (float)((k * 11) % 23) / 23.0f - 0.5f;
    double r[5] = {0, 0, 0, 0, 0};
    double work = (double)(conv ? P->R : P->in) * (double)P->out * (double)batch * (grad ? 2 : 1);
    int reps = (int)(2e6 / (work + 1e4)) + 1;
    if (reps > 200) reps = 200;
    float loss;
    for (int round = -1; round < 5; round++) { /* round -1 warms up */
      uint64_t t0 = sc__ns();
      for (int k = 0; k < (round < 0 ? 1 : reps); k++)
        if (grad) /* y (zeros) is the target */
          sc_valgrad(t, SC_LOSS_SQUARED, p, x, y, batch, &loss, g, NULL, ws);
        else
          sc_forward(t, p, x, batch, y, ws);
      if (round >= 0) r[round] = (double)(sc__ns() - t0) / reps;
    }
    for (int i = 1; i < 5; i++) /* insertion sort, 5 values */
      for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
        double q = r[j];
        r[j] = r[j - 1], r[j - 1] = q;
      }
    best = r[2];
  }
  sc_workspace_destroy(ws);
  free(p);
  free(g);
  free(x);
  free(y);
  sc_chain_destroy(t);
  return best;
}

/* The rule for the tanh variant where nothing is measured or forced: div. Measured on an
 * AVX2 EPYC (Zen 4 under KVM, make bench-tanh and SC_PLAN=measure on the toy's layers;
 * bench/RESULTS.md) div was faster than rcp; on Zen 5 (AVX-512) too, by an earlier
 * measurement. With SC_TANH_VARIANT=fast (the rational forms allowed): rat, 1.8x faster than
 * div on the AVX2 EPYC (make bench-tanh), ratrcp slower there. The Intel hosts are not
 * measured yet: SC_PLAN=measure decides there. */
#define SC__TANH_RULE SC__TANH_DIV
#define SC__TANH_RULE_FAST SC__TANH_RAT

/* the wisdom entry for layer P (tanh: the tanh variant's, else the dense forward's) */
static size_t sc__wis_find(const sc__wis *w, size_t nw, const sc__lplan *P, int tanh,
                           const char *cpu, const char *isa) {
  const char *act = sc_act_name(P->spec.act);
  for (size_t i = 0; i < nw; i++)
    if (w[i].tanh == tanh && w[i].in == P->in && w[i].out == P->out && w[i].bias == P->spec.bias &&
        (tanh == SC__WIS_TANH || !strcmp(w[i].act, act)) && !strcmp(w[i].isa, isa) &&
        !strcmp(w[i].cpu, cpu))
      return i;
  return nw;
}

/* appends a measured entry; returns it, or NULL (full, or out of memory) */
static sc__wis *sc__wis_add(sc__wis **w, size_t *nw, const sc__lplan *P, int tanh, const char *cpu,
                            const char *isa, const char *pick, double a, double b) {
  if (*nw >= SC__WIS_MAX) return NULL;
  sc__wis *nwp = realloc(*w, (*nw + 1) * sizeof **w);
  if (!nwp) return NULL;
  *w = nwp;
  sc__wis *e = &nwp[(*nw)++];
  memset(e, 0, sizeof *e);
  e->tanh = tanh;
  snprintf(e->cpu, sizeof e->cpu, "%s", cpu);
  snprintf(e->isa, sizeof e->isa, "%s", isa);
  snprintf(e->act, sizeof e->act, "%s", sc_act_name(P->spec.act));
  snprintf(e->pick, sizeof e->pick, "%s", pick);
  e->in = P->in, e->out = P->out, e->bias = P->spec.bias;
  e->ns_a = a, e->ns_b = b;
  return e;
}

/* the wisdom and machine a plan is measured against */
typedef struct sc__wis_ctx {
  sc__wis *w;
  size_t n;
  int ok, added; /* the file was read (so it is written back), an entry was added or completed */
  const char *cpu, *isa;
} sc__wis_ctx;

/* The dW form of dense layer P (SC__WIS_DW), *pick = 0 lane or 1 dot, timed with sc_valgrad:
 * forced (want >= 0), by rule (lane), read from the wisdom, or measured and added to it; *how
 * says which, *ns0 / *ns1 the timings where there are some. */
static void sc__pick_dw(const sc_chain *c, const sc__lplan *P, int want, int measure,
                        sc__wis_ctx *T, unsigned char *pick, unsigned char *how, float *ns0,
                        float *ns1) {
  if (want >= 0) {
    *how = SC__HOW_FORCED, *pick = (unsigned char)want;
  } else if (!measure) {
    *how = SC__HOW_RULE, *pick = 0;
  } else {
    size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_DW, T->cpu, T->isa);
    if (hit < T->n) {
      *how = SC__HOW_WISDOM;
      *ns0 = (float)T->w[hit].ns_a, *ns1 = (float)T->w[hit].ns_b;
      *pick = strcmp(T->w[hit].pick, "dot") == 0;
      return;
    }
    double t0 = sc__time_layer(c, P, NULL, 0, 0, 0, 0, 1),
           t1 = sc__time_layer(c, P, NULL, 0, 1, 0, 0, 1);
    *how = SC__HOW_MEASURED;
    *ns0 = (float)t0, *ns1 = (float)t1;
    *pick = t0 > 0 && t1 > 0 && t1 < t0;
    if (T->ok)
      T->added |= !!sc__wis_add(&T->w, &T->n, P, SC__WIS_DW, T->cpu, T->isa, *pick ? "dot" : "lane",
                                t0, t1);
  }
}

/* The tanh variant of dense tanh layer P on a vector kernel set (P->tanh_var, P->tanh_how,
 * P->ns_tanh): forced (want >= 0), by rule, or the fastest of the candidates (div and rcp; with
 * fast, rat and ratrcp too) by the wisdom's timings, measured where it has none (each timed with
 * sc_forward; the entry is added, or completed in place). */
static void sc__pick_tanh(const sc_chain *c, sc__lplan *P, int want, int fast, int measure,
                          sc__wis_ctx *T) {
  int nc = fast ? SC__TANH_NV : 2; /* the candidates: variants 0 .. nc - 1 */
  if (want >= 0) {
    P->tanh_how = SC__HOW_FORCED, P->tanh_var = (unsigned char)want;
    return;
  }
  if (!measure) {
    P->tanh_how = SC__HOW_RULE, P->tanh_var = fast ? SC__TANH_RULE_FAST : SC__TANH_RULE;
    return;
  }
  size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_TANH, T->cpu, T->isa);
  int timed = 0, best = 0;
  P->tanh_how = hit < T->n ? SC__HOW_WISDOM : SC__HOW_MEASURED;
  for (int v = 0; v < SC__TANH_NV; v++) {
    double t = hit < T->n ? T->w[hit].ns_c[v] : 0;
    if (t <= 0 && v < nc) { /* not in the wisdom (an entry from before rat, or none) */
      t = sc__time_layer(c, P, NULL, v, 0, 0, 0, 0);
      P->tanh_how = SC__HOW_MEASURED, timed = 1;
      if (hit < T->n) T->w[hit].ns_c[v] = t;
    }
    P->ns_tanh[v] = (float)t;
    if (v < nc && t > 0 && (P->ns_tanh[best] <= 0 || t < P->ns_tanh[best])) best = v;
  }
  P->tanh_var = (unsigned char)best;
  if (!timed || !T->ok) return;
  sc__wis *e = hit < T->n ? &T->w[hit]
                          : sc__wis_add(&T->w, &T->n, P, SC__WIS_TANH, T->cpu, T->isa,
                                        sc__tanh_names[best], 0, 0);
  if (!e) return;
  /* (the pick written is the fastest of all the timed variants) */
  int all = 0;
  for (int v = 0; v < SC__TANH_NV; v++) {
    e->ns_c[v] = P->ns_tanh[v];
    if (e->ns_c[v] > 0 && (e->ns_c[all] <= 0 || e->ns_c[v] < e->ns_c[all])) all = v;
  }
  snprintf(e->pick, sizeof e->pick, "%s", sc__tanh_names[all]);
  T->added = 1;
}

/* a forced conv block (SC_CONV_FWD / SC_CONV_DW = value v): its index into names, or -1 when
 * v is unset; an error when v is not a block shape (SC_ERR_ARG) or not one of this kernel
 * set's (SC_ERR_UNSUPPORTED) */
static sc_status sc__conv_force(const char *fn, const char *var, const char *v,
                                const sc__kt_f32 *kf, const char *const *names, int *idx) {
  *idx = -1;
  if (!v || !*v) return SC_OK;
  if (!strcmp(var, "SC_CONV_FWD") && !strcmp(v, "xsmm")) { /* checked per layer */
    *idx = SC__CONV_NV;
    return SC_OK;
  }
  size_t a = strspn(v, "0123456789"), b = a < strlen(v) ? strspn(v + a + 1, "0123456789") : 0;
  if (a == 0 || v[a] != 'x' || b == 0 || v[a + 1 + b])
    return sc__fail(SC_ERR_ARG, fn, "%s='%s' is not a block shape such as 4x2", var, v);
  if (!names)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s', but the %s kernels have one conv block", var,
                    v, kf->name);
  *idx = sc__name_index(names, v, strlen(v));
  if (*idx < 0)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s' is not a block of the %s kernels (%s, %s, %s)",
                    var, v, kf->name, names[0], names[1], names[2]);
  return SC_OK;
}

/* the rule's conv dW block: the kernel set's 6-row one for channels a multiple of 6 but not
 * of 4, else the first */
static int sc__conv_dw_rule(const sc__kt_f32 *kf, const sc__lplan *P) {
  return P->oc % 6 == 0 && P->oc % 4 != 0 ? kf->conv_dw_k6 : 0;
}

/* Chooses every dense layer's forward variant and tanh variant, and every conv layer's
 * register blocks (see above). */
static sc_status sc__variant_plan(const char *fn, sc_chain *c) {
  c->plan_note[0] = 0;
  c->pool_fuse = 1;
  if (sc__planning) return SC_OK;
  const char *pf = getenv("SC_POOL_FUSE"); /* "0": the pool's and the conv's own passes */
  if (pf && *pf && strcmp(pf, "0") != 0 && strcmp(pf, "1") != 0)
    return sc__fail(SC_ERR_ARG, fn, "SC_POOL_FUSE='%s' is not '0' or '1'", pf);
  c->pool_fuse = !(pf && strcmp(pf, "0") == 0);
  const char *mode = getenv("SC_PLAN"), *force = getenv("SC_DENSE_FWD"), *off = getenv("SC_XSMM");
  const char *tforce = getenv("SC_TANH_VARIANT"), *dforce = getenv("SC_DENSE_DW");
  int measure = 0;
  if (mode && *mode && strcmp(mode, "rules") != 0) {
    if (strcmp(mode, "measure") != 0)
      return sc__fail(SC_ERR_ARG, fn, "SC_PLAN='%s' is not one of rules, measure", mode);
    measure = 1;
  }
  int want_x = -1; /* forced: 0 fused, 1 xsmm */
  if (force && *force) {
    if (strcmp(force, "fused") && strcmp(force, "xsmm"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_FWD='%s' is not one of fused, xsmm", force);
    want_x = strcmp(force, "xsmm") == 0;
  }
  int want_d = -1; /* forced: 0 lane, 1 dot */
  if (dforce && *dforce) {
    if (strcmp(dforce, "lane") && strcmp(dforce, "dot"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_DW='%s' is not one of lane, dot", dforce);
    want_d = strcmp(dforce, "dot") == 0;
  }
  int want_r = -1, fast = 0; /* forced: SC__TANH_*; fast: the rational forms allowed */
  if (tforce && *tforce) {
    fast = !strcmp(tforce, "fast");
    want_r = fast ? -1 : sc__name_index(sc__tanh_names, tforce, strlen(tforce));
    if (!fast && want_r < 0)
      return sc__fail(SC_ERR_ARG, fn,
                      "SC_TANH_VARIANT='%s' is not one of div, rcp, rat, ratrcp, fast", tforce);
  }
  int simd = c->kf != &sc__kt_ref_f32; /* the scalar kernels have no xsmm path, no rcp */
  const char *const *cfn = c->kf->conv_fwd_names, *const *cdn = c->kf->conv_dw_names;
  int want_cf, want_cd; /* forced conv blocks, or -1 */
  sc_status cst = sc__conv_force(fn, "SC_CONV_FWD", getenv("SC_CONV_FWD"), c->kf, cfn, &want_cf);
  if (!cst) cst = sc__conv_force(fn, "SC_CONV_DW", getenv("SC_CONV_DW"), c->kf, cdn, &want_cd);
  if (cst) return cst;
  if (want_r > 0 && !simd)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_TANH_VARIANT=%s, but the scalar kernels have the divide form only", tforce);
  int xok = 0;
#if SC__XSMM
  if (simd && !(off && strcmp(off, "0") == 0)) {
    int arch = libxsmm_get_target_archid(); /* (libxsmm initializes itself once) */
    xok = c->kf == &sc__kt_f32_avx512 ? arch >= LIBXSMM_X86_AVX512 : arch >= LIBXSMM_X86_AVX2;
  }
#else
  (void)off;
#endif
  const char *xwhy = !SC__XSMM                        ? "this build has no libxsmm" /* (no xok) */
                     : !simd                          ? "the scalar kernels have no xsmm path"
                     : (off && strcmp(off, "0") == 0) ? "SC_XSMM=0"
                                                      : "libxsmm does not support this CPU";
  if (want_x == 1 && !xok)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_DENSE_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  sc__wis_ctx T = {NULL, 0, 0, 0, NULL, NULL};
  const char *wpath = getenv("SC_WISDOM");
  char cpu[64] = "";
  int any_tanh = 0, any_conv = 0, any_lane = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    any_lane |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].dwl_off != SIZE_MAX;
    any_tanh |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].spec.act == SC_TANH;
    any_conv |= c->L[l].spec.kind == SC_LAYER_CONV2D;
  }
  if (any_conv && want_cf == SC__CONV_NV && !(cfn && cdn && xok))
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_CONV_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  int conv_measure = cfn && cdn && any_conv && want_cf < 0 && want_cd < 0;
  if (measure &&
      ((xok && want_x < 0) || (simd && any_tanh && want_r < 0) || conv_measure ||
       (any_lane && want_d < 0)) &&
      wpath && *wpath) {
    T.ok = sc__wis_read(wpath, &T.w, &T.n, c->plan_note, sizeof c->plan_note) == 0;
  }
  if (measure) sc__cpu_model(cpu, sizeof cpu);
  const char *isa = c->kf->name;
  T.cpu = cpu, T.isa = isa;
  sc_status st = SC_OK;
  for (size_t l = 0; l < c->nlayers && !st; l++) {
    sc__lplan *P = &c->L[l];
    P->xfwd = NULL, P->how = SC__HOW_ONLY, P->ns_fused = P->ns_xsmm = 0;
    P->tanh_var = 0, P->tanh_how = SC__HOW_ONLY;
    memset(P->ns_tanh, 0, sizeof P->ns_tanh);
    P->conv_fwd = P->conv_dw = 0, P->conv_how = SC__HOW_ONLY;
    memset(P->ns_cfwd, 0, sizeof P->ns_cfwd);
    memset(P->ns_cdw, 0, sizeof P->ns_cdw);
    P->xconv = NULL, P->ns_cx = 0;
    P->dw_dot = 0, P->dw_how = SC__HOW_ONLY, P->ns_lane = P->ns_dot = 0;
    if (P->spec.kind == SC_LAYER_CONV2D && cfn && cdn) {
      sc__xsmm_fn xc = NULL; /* libxsmm's row GEMM for this layer, where it can be had */
#if SC__XSMM
      if (xok && P->col_off != SIZE_MAX) xc = sc__xsmm_conv_kernel(P);
#endif
      if (want_cf >= 0 || want_cd >= 0) { /* forced; the other block takes the rule's */
        P->conv_how = SC__HOW_FORCED;
        if (want_cf == SC__CONV_NV) {
          if (!xc) {
            st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                          "SC_CONV_FWD=xsmm: libxsmm has no kernel for layer %zu", l);
            continue;
          }
          P->xconv = xc;
        }
        P->conv_fwd = (unsigned char)(want_cf > 0 && want_cf < SC__CONV_NV ? want_cf : 0);
        /* the dW block not forced: the rule's, not block 0 */
        P->conv_dw = (unsigned char)(want_cd >= 0 ? want_cd : sc__conv_dw_rule(c->kf, P));
        continue;
      }
      P->conv_how = SC__HOW_RULE;
      P->conv_dw = (unsigned char)sc__conv_dw_rule(c->kf, P);
      if (!measure) continue;
      char key[64];
      sc__conv_key(key, sizeof key, P);
      size_t hit = T.n;
      for (size_t i = 0; i < T.n && hit == T.n; i++)
        if (T.w[i].tanh == SC__WIS_CONV && !strcmp(T.w[i].shape, key) && !strcmp(T.w[i].isa, isa) &&
            !strcmp(T.w[i].cpu, cpu))
          hit = i;
      if (hit < T.n) {
        const char *pk = T.w[hit].pick, *colon = strchr(pk, ':');
        int fx = (size_t)(colon - pk) == 4 && !strncmp(pk, "xsmm", 4);
        int f = fx ? 0 : sc__name_index(cfn, pk, (size_t)(colon - pk));
        int d = sc__name_index(cdn, colon + 1, strlen(colon + 1));
        if (f >= 0 && d >= 0 && (!fx || xc)) { /* (else measured anew) */
          P->conv_how = SC__HOW_WISDOM;
          P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
          P->xconv = fx ? xc : NULL;
          P->ns_cx = (float)T.w[hit].ns_c[2 * SC__CONV_NV];
          for (int i = 0; i < SC__CONV_NV; i++)
            P->ns_cfwd[i] = (float)T.w[hit].ns_c[i],
            P->ns_cdw[i] = (float)T.w[hit].ns_c[SC__CONV_NV + i];
          continue;
        }
      }
      int f = 0, d = 0;
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cfwd[i] = (float)sc__time_layer(c, P, NULL, 0, 0, i, 0, 0);
        if (P->ns_cfwd[i] > 0 && (P->ns_cfwd[f] <= 0 || P->ns_cfwd[i] < P->ns_cfwd[f])) f = i;
      }
      if (xc) { /* libxsmm's forward against the fastest block */
        P->ns_cx = (float)sc__time_layer(c, P, xc, 0, 0, f, 0, 0);
        if (P->ns_cx > 0 && P->ns_cfwd[f] > 0 && P->ns_cx < P->ns_cfwd[f]) P->xconv = xc;
      }
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cdw[i] = (float)sc__time_layer(c, P, P->xconv, 0, 0, f, i, 1);
        if (P->ns_cdw[i] > 0 && (P->ns_cdw[d] <= 0 || P->ns_cdw[i] < P->ns_cdw[d])) d = i;
      }
      P->conv_how = SC__HOW_MEASURED;
      P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
      char pick[16];
      snprintf(pick, sizeof pick, "%s:%s", P->xconv ? "xsmm" : cfn[f], cdn[d]);
      sc__wis *e = T.ok ? sc__wis_add(&T.w, &T.n, P, SC__WIS_CONV, cpu, isa, pick, 0, 0) : NULL;
      if (e) {
        snprintf(e->shape, sizeof e->shape, "%s", key);
        for (int i = 0; i < SC__CONV_NV; i++)
          e->ns_c[i] = P->ns_cfwd[i], e->ns_c[SC__CONV_NV + i] = P->ns_cdw[i];
        e->ns_c[2 * SC__CONV_NV] = P->ns_cx;
        T.added = 1;
      }
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    /* the dW form of a layer with lane accumulators (the others have the dot form only) */
    if (P->dwl_off != SIZE_MAX)
      sc__pick_dw(c, P, want_d, measure, &T, &P->dw_dot, &P->dw_how, &P->ns_lane, &P->ns_dot);
    /* the tanh variant first: the GEMM variants below are timed with it */
    if (P->spec.act == SC_TANH && simd) sc__pick_tanh(c, P, want_r, fast, measure, &T);
    if (want_x == 0) { /* fused, forced: whether or not there is another variant */
      P->how = SC__HOW_FORCED;
      continue;
    }
    if (!xok || P->in > INT_MAX || P->out > INT_MAX) continue;
#if SC__XSMM
    sc__xsmm_fn xs = sc__xsmm_kernel(P);
    if (!xs) {
      if (want_x == 1)
        st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                      "SC_DENSE_FWD=xsmm: libxsmm has no kernel for layer "
                      "%zu (%zu -> %zu)",
                      l, P->in, P->out);
      continue;
    }
    if (want_x >= 0) {
      P->how = SC__HOW_FORCED;
      P->xfwd = want_x ? xs : NULL;
      continue;
    }
    if (!measure) {
      P->how = SC__HOW_RULE;
      P->xfwd = c->kf == &sc__kt_f32_avx512 && P->in >= SC__XSMM_MIN_IN ? xs : NULL;
      continue;
    }
    size_t hit = sc__wis_find(T.w, T.n, P, 0, cpu, isa);
    if (hit < T.n) {
      P->how = SC__HOW_WISDOM;
      P->ns_fused = (float)T.w[hit].ns_a, P->ns_xsmm = (float)T.w[hit].ns_b;
      P->xfwd = strcmp(T.w[hit].pick, "xsmm") == 0 ? xs : NULL;
      continue;
    }
    double tf = sc__time_layer(c, P, NULL, P->tanh_var, 0, 0, 0, 0),
           tx = sc__time_layer(c, P, xs, P->tanh_var, 0, 0, 0, 0);
    P->how = SC__HOW_MEASURED;
    P->ns_fused = (float)tf, P->ns_xsmm = (float)tx;
    P->xfwd = tx > 0 && tf > 0 && tx < tf ? xs : NULL;
    if (T.ok)
      T.added |= !!sc__wis_add(&T.w, &T.n, P, 0, cpu, isa, P->xfwd ? "xsmm" : "fused", tf, tx);
#endif
  }
  if (!st && T.ok && T.added && sc__wis_write(fn, wpath, T.w, T.n) != SC_OK) {
    const char *e = sc_last_error(), *pre = "wisdom file not written: ";
    size_t lp = strlen(pre), le = strlen(e), room = sizeof c->plan_note - 1 - lp;
    memcpy(c->plan_note, pre, lp);
    memcpy(c->plan_note + lp, e, le < room ? le : room);
    c->plan_note[lp + (le < room ? le : room)] = 0;
  }
  free(T.w);
  return st;
}

/* The plan as text (see simplechain.h). */
sc_status sc_chain_plan(const sc_chain *chain, char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  if (!buf && cap > 0) return SC__FAIL(SC_ERR_NULL, "buf is NULL but cap is %zu", cap);
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  static const char *hows[] = {"the only variant here", "rule", "measured", "wisdom",
                               "forced by SC_DENSE_FWD"};
  static const char *thows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_TANH_VARIANT"};
  int simd = chain->kf != &sc__kt_ref_f32;
  sc__sprintf(&b, "kernels %s; dense forward variants: fused%s; tanh variants: %s\n",
              chain->kf->name, SC__XSMM ? ", xsmm" : " (no libxsmm in this build)",
              simd ? "div, rcp (rat, ratrcp with SC_TANH_VARIANT=fast)" : "div");
  size_t per = (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1);
  const char *const *cfn = chain->kf->conv_fwd_names, *const *cdn = chain->kf->conv_dw_names;
  static const char *chows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_CONV_FWD / SC_CONV_DW"};
  for (size_t l = 0; l < chain->nlayers; l++) {
    const sc__lplan *P = &chain->L[l];
    if (P->spec.kind == SC_LAYER_CONV2D) {
      sc__sprintf(&b, "layer %zu conv %zux%zux%zu -> %zux%zux%zu: ", l, P->ic, P->ih, P->iw, P->oc,
                  P->oh, P->ow);
      if (!cfn || !cdn) {
        sc__sprintf(&b, "one block (%s)\n", chows[0]);
        continue;
      }
      sc__sprintf(&b, "forward %s %s, dW block %s (%s", P->xconv ? "xsmm" : "block",
                  P->xconv ? "(im2col rows + GEMM)" : cfn[P->conv_fwd], cdn[P->conv_dw],
                  chows[P->conv_how]);
      if (P->conv_how == SC__HOW_MEASURED || P->conv_how == SC__HOW_WISDOM) {
        sc__sprintf(&b, ": forward");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cfn[i], (double)P->ns_cfwd[i]);
        if (P->ns_cx > 0) sc__sprintf(&b, " xsmm %.0f ns", (double)P->ns_cx);
        sc__sprintf(&b, "; forward + dW");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cdn[i], (double)P->ns_cdw[i]);
        sc__sprintf(&b, " per %zu samples",
                    (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1));
      }
      sc__sprintf(
          &b, ")%s\n",
          sc__pool_fold_f32(chain, l)
              ? "; in float precision the forward is the fold's (the 2 x 2 pool above in it)"
              : "");
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    sc__sprintf(&b, "layer %zu dense %zu -> %zu %s: %s (%s", l, P->in, P->out,
                sc_act_name(P->spec.act), P->xfwd ? "xsmm" : "fused", hows[P->how]);
    if (P->how == SC__HOW_MEASURED || P->how == SC__HOW_WISDOM)
      sc__sprintf(&b, ": fused %.0f ns, xsmm %.0f ns per %zu samples", (double)P->ns_fused,
                  (double)P->ns_xsmm, per);
    sc__sprintf(&b, ")");
    if (P->spec.act == SC_TANH) {
      sc__sprintf(&b, "; tanh %s (%s", sc__tanh_names[P->tanh_var], thows[P->tanh_how]);
      if (P->tanh_how == SC__HOW_MEASURED || P->tanh_how == SC__HOW_WISDOM) {
        const char *sep = ": ";
        for (int v = 0; v < SC__TANH_NV; v++)
          if (P->ns_tanh[v] > 0) {
            sc__sprintf(&b, "%s%s %.0f ns", sep, sc__tanh_names[v], (double)P->ns_tanh[v]);
            sep = ", ";
          }
        sc__sprintf(&b, " per %zu samples", per);
      }
      sc__sprintf(&b, ")");
    }
    if (P->dwl_off != SIZE_MAX) {
      static const char *dhows[] = {"the only variant here", "rule", "measured", "wisdom",
                                    "forced by SC_DENSE_DW"};
      sc__sprintf(&b, "; dW %s (%s", P->dw_dot ? "dot" : "lane", dhows[P->dw_how]);
      if (P->dw_how == SC__HOW_MEASURED || P->dw_how == SC__HOW_WISDOM)
        sc__sprintf(&b, ": lane %.0f ns, dot %.0f ns per %zu samples", (double)P->ns_lane,
                    (double)P->ns_dot, per);
      sc__sprintf(&b, ")");
    }
    sc__sprintf(&b, "\n");
  }
  if (chain->plan_note[0]) sc__sprintf(&b, "note: %s\n", chain->plan_note);
  if (needed) *needed = b.len + 1;
  if (b.len + 1 > cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return SC__FAIL(SC_ERR_NOMEM, "buffer of %zu bytes too small for the plan (%zu needed)", cap,
                    b.len + 1);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- IDX files (MNIST) */
/* sc_idx_load_images / sc_idx_load_labels (see simplechain.h). A file is read through a
 * small source: zlib's gzread when built with SC_HAVE_ZLIB (it reads raw files too),
 * stdio otherwise, always in chunks of SC__IDX_CHUNK bytes. src.off counts the bytes of
 * the (decompressed) stream delivered so far: that is the offset error messages give.
 * Nothing is allocated from the header's claims: the header is checked first, then the
 * output grows (doubling) as values actually arrive: memory never exceeds twice what the
 * file really holds (at least SC__IDX_FIRST values), whatever its header claims. */
#define SC__IDX_CHUNK 16384                    /* bytes per read */
#define SC__IDX_MAX_VALUES ((uint64_t)1 << 31) /* headers claiming more are refused */
#define SC__IDX_FIRST ((size_t)1 << 16)        /* first allocation (values), then x2 */

typedef struct sc__idx_src {
  const char *path;
  const char *fn; /* the public function, for messages */
  size_t off;     /* bytes of the decompressed stream delivered so far */
  size_t expect;  /* bytes the whole stream should have (header, then all) */
  char what[96];  /* "a 16-byte header + 10000 x 28 x 28 values", for messages */
#ifdef SC_HAVE_ZLIB
  gzFile gz;
#else
  FILE *f;
#endif
} sc__idx_src;

void sc_free(void *p) { free(p); }

/* " of the decompressed stream" for a gzipped file, "" for a raw one */
static const char *sc__idx_where(const sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  return gzdirect(s->gz) ? "" : " of the decompressed stream";
#else
  (void)s;
  return "";
#endif
}

static sc_status sc__idx_open(sc__idx_src *s, const char *path, const char *fn) {
  s->path = path;
  s->fn = fn;
  s->off = 0;
  s->expect = 0;
  s->what[0] = '\0';
  errno = 0;
#ifdef SC_HAVE_ZLIB
  s->gz = gzopen(path, "rb");
  if (!s->gz) /* gzopen leaves errno 0 when only its own allocation failed */
    return sc__io_fail(fn, errno ? errno : ENOMEM, "cannot open", path);
  gzbuffer(s->gz, 65536); /* before the first read; fewer system calls than the 8 KiB default */
#else
  s->f = fopen(path, "rb");
  if (!s->f) return sc__io_fail(fn, errno ? errno : EIO, "cannot open", path);
#endif
  return SC_OK;
}

static void sc__idx_close(sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  gzclose(s->gz); /* read-only: errors were seen (and reported) by the reads */
#else
  fclose(s->f);
#endif
}

/* Reads up to want bytes into buf; *got < want only where the data ends. A read error
 * or a corrupt / truncated gzip stream fails here, with the message set. */
static sc_status sc__idx_read(sc__idx_src *s, unsigned char *buf, size_t want, size_t *got) {
  size_t have = 0;
  *got = 0;
  while (have < want) {
    size_t ask = want - have < SC__IDX_CHUNK ? want - have : SC__IDX_CHUNK;
#ifdef SC_HAVE_ZLIB
    int r = gzread(s->gz, buf + have, (unsigned)ask);
    int zerr = Z_OK;
    const char *zmsg = gzerror(s->gz, &zerr);
    if (r > 0) {
      have += (size_t)r;
      s->off += (size_t)r;
    }
    *got = have;
    /* Z_BUF_ERROR: the stream stops mid-member ("unexpected end of file"). zlib says so
     * as soon as it decompressed the last bytes there are, which may be well before we
     * read them: keep reading, and fail where the data actually ends (below). */
    if (r < 0 || (zerr != Z_OK && (zerr != Z_BUF_ERROR || (size_t)r < ask))) {
      /* zlib's message starts with "<path>: "; drop that, the path is named anyway */
      size_t plen = strlen(s->path);
      if (!zmsg || !*zmsg) zmsg = "unknown error";
      if (strncmp(zmsg, s->path, plen) == 0 && zmsg[plen] == ':' && zmsg[plen + 1] == ' ')
        zmsg += plen + 2;
      if (zerr == Z_ERRNO) return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s': %s", s->path, zmsg);
      if (zerr == Z_MEM_ERROR)
        return sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory in zlib", s->path);
      if (zerr == Z_BUF_ERROR && s->off < s->expect)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data ends at offset %zu of the "
                        "decompressed stream, expected %zu bytes (zlib: %s)",
                        s->path, s->off, s->expect, zmsg);
      if (zerr == Z_BUF_ERROR)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data is complete (offset %zu of the "
                        "decompressed stream) but the end of the gzip stream (CRC, length) is "
                        "missing (zlib: %s)",
                        s->path, s->off, zmsg);
      /* zlib decompresses ahead, so the damage may lie beyond what was delivered */
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': corrupt gzip stream (zlib: %s), seen after offset %zu of the "
                      "decompressed stream",
                      s->path, zmsg, s->off);
    }
    if ((size_t)r < ask) break; /* the end of the data */
#else
    size_t r = fread(buf + have, 1, ask, s->f);
    have += r;
    s->off += r;
    *got = have;
    if (r < ask) {
      if (ferror(s->f))
        return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s' at offset %zu: %s", s->path, s->off,
                        strerror(errno));
      break;
    }
#endif
  }
  return SC_OK;
}

static const char *sc__idx_type_name(unsigned t) {
  switch (t) {
  case 0x08: return "unsigned byte";
  case 0x09: return "signed byte";
  case 0x0B: return "int16";
  case 0x0C: return "int32";
  case 0x0D: return "float32";
  case 0x0E: return "float64";
  }
  return NULL;
}

/* Reads and checks the header of an IDX file of uint8 values with ndims (1 or 3)
 * dimensions; dims[0..ndims) receive the sizes and *count their product. */
static sc_status sc__idx_header(sc__idx_src *s, unsigned ndims, uint32_t dims[3], size_t *count) {
  static const char *names3[3] = {"the image count", "the row count", "the column count"};
  static const char *names1[1] = {"the label count"};
  const char **names = ndims == 3 ? names3 : names1;
  const char *kind = ndims == 3 ? "images" : "labels";
  const size_t hlen = 4 + 4 * (size_t)ndims;
  unsigned char h[16];
  size_t got;
  s->expect = hlen;
  sc_status st = sc__idx_read(s, h, 4, &got);
  if (st) return st;
#ifndef SC_HAVE_ZLIB
  if (got >= 2 && h[0] == 0x1f && h[1] == 0x8b)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s' is gzip-compressed and this build has no zlib: build with `make` "
                    "(which links zlib when installed), or compile simplechain.c with "
                    "-DSC_HAVE_ZLIB and link -lz, or gunzip the file",
                    s->path);
#endif
  if (got == 0)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': empty file (offset 0), expected a %zu-byte IDX header", s->path, hlen);
  if (got >= 2 && (h[0] != 0 || h[1] != 0))
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': not an IDX file: bytes 0x%02x 0x%02x at offset 0, an IDX file starts "
                    "with two zero bytes%s",
                    s->path, h[0], h[1],
                    h[0] == 0x1f && h[1] == 0x8b ? " (this is gzip data: compressed twice?)" : "");
  if (got < 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header",
                    s->path, s->off, sc__idx_where(s), hlen);
  const char *tname = sc__idx_type_name(h[2]);
  if (!tname)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': unknown IDX data type 0x%02x at offset 2 (magic 0x%02x%02x%02x%02x)",
                    s->path, h[2], h[0], h[1], h[2], h[3]);
  if (h[2] != 0x08)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s': IDX data type 0x%02x (%s) at offset 2 is not supported: %s must be "
                    "0x08 (unsigned byte)",
                    s->path, h[2], tname, kind);
  if (h[3] != ndims)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': %u dimensions (byte 3, magic 0x%02x%02x%02x%02x), %s have %u (magic "
                    "0x000008%02x)%s",
                    s->path, (unsigned)h[3], h[0], h[1], h[2], h[3], kind, ndims, ndims,
                    ndims == 3 && h[3] == 1   ? ": is this a labels file?"
                    : ndims == 1 && h[3] == 3 ? ": is this an images file?"
                                              : "");
  st = sc__idx_read(s, h + 4, hlen - 4, &got);
  if (st) return st;
  if (got < hlen - 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header (%u dimensions)",
                    s->path, s->off, sc__idx_where(s), hlen, ndims);
  for (unsigned d = 0; d < ndims; d++) {
    const unsigned char *b = h + 4 + 4 * d;
    dims[d] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
    if (dims[d] == 0)
      return sc__fail(SC_ERR_FORMAT, s->fn, "'%s': %s (dimension %u, offset %u) is 0", s->path,
                      names[d], d, 4 + 4 * d);
  }
  uint64_t total = 1;
  for (unsigned d = 0; d < ndims; d++) {
    total *= dims[d]; /* no overflow: total <= 2^31 before, dims[d] < 2^32 */
    if (total > SC__IDX_MAX_VALUES) {
      if (ndims == 3)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': the header (offsets 4..15) claims %lu x %lu x %lu images: more "
                        "than 2^31 values, refused",
                        s->path, (unsigned long)dims[0], (unsigned long)dims[1],
                        (unsigned long)dims[2]);
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': the header (offset 4) claims %lu labels: more than 2^31, refused",
                      s->path, (unsigned long)dims[0]);
    }
  }
  int ok = 1;
  *count = (size_t)total;
  s->expect = sc__add(hlen, *count, &ok); /* total <= 2^31: fits even a 32-bit size_t */
  if (ndims == 3)
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu x %lu x %lu pixels", hlen,
             (unsigned long)dims[0], (unsigned long)dims[1], (unsigned long)dims[2]);
  else
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu labels", hlen,
             (unsigned long)dims[0]);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': file size overflows size_t", s->path);
  return SC_OK;
}

/* Reads the count uint8 values after the header, into floats (times scale) or, when
 * labels, into int32_t checked against classes (0: unchecked); then checks that
 * nothing follows. On success *out is the malloc'ed array. */
static sc_status sc__idx_body(sc__idx_src *s, size_t count, int labels, float scale, size_t classes,
                              void **out) {
  unsigned char buf[SC__IDX_CHUNK];
  const size_t esz = labels ? sizeof(int32_t) : sizeof(float);
  void *v = NULL;
  size_t cap = 0, done = 0, got = 0;
  sc_status st = SC_OK;
  *out = NULL;
  while (done < count) {
    size_t want = count - done < SC__IDX_CHUNK ? count - done : SC__IDX_CHUNK;
    if (done + want > cap) {
      size_t ncap = cap ? cap : SC__IDX_FIRST;
      while (ncap < done + want) ncap = ncap > count / 2 ? count : ncap * 2;
      if (ncap > count) ncap = count;
      int ok = 1;
      size_t bytes = sc__mul(ncap, esz, &ok);
      void *nv = ok ? realloc(v, bytes) : NULL;
      if (!nv) {
        st = ok ? sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory for %s (%zu bytes)", s->path,
                           s->what, bytes)
                : sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': %zu values overflow size_t", s->path,
                           ncap);
        goto fail;
      }
      v = nv;
      cap = ncap;
    }
    st = sc__idx_read(s, buf, want, &got);
    if (st) goto fail;
    if (labels) {
      int32_t *lab = (int32_t *)v + done;
      for (size_t i = 0; i < got; i++) {
        if (classes && (size_t)buf[i] >= classes) {
          st = sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': label %u of sample %zu (offset %zu%s) is not < classes = %zu",
                        s->path, (unsigned)buf[i], done + i, s->off - got + i, sc__idx_where(s),
                        classes);
          goto fail;
        }
        lab[i] = (int32_t)buf[i];
      }
    } else {
      float *x = (float *)v + done;
      for (size_t i = 0; i < got; i++) x[i] = (float)buf[i] * scale;
    }
    done += got;
    if (got < want) {
      st = sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated: the data ends at offset %zu%s, expected %zu bytes (%s)",
                    s->path, s->off, sc__idx_where(s), s->expect, s->what);
      goto fail;
    }
  }
  st = sc__idx_read(s, buf, 1, &got); /* must be the end (for gzip: also checks the CRC) */
  if (st) goto fail;
  if (got) {
    st = sc__fail(SC_ERR_FORMAT, s->fn,
                  "'%s': unexpected bytes after the data at offset %zu%s: expected exactly %zu "
                  "bytes (%s)",
                  s->path, s->expect, sc__idx_where(s), s->expect, s->what);
    goto fail;
  }
  *out = v;
  return SC_OK;
fail:
  free(v);
  return st;
}

sc_status sc_idx_load_images(const char *path, float **images, size_t *n, size_t *rows,
                             size_t *cols, float scale) {
  if (images) *images = NULL;
  if (n) *n = 0;
  if (rows) *rows = 0;
  if (cols) *cols = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(images);
  SC__CHECK_NULL(n);
  SC__CHECK_NULL(rows);
  SC__CHECK_NULL(cols);
  if (!isfinite(scale)) return SC__FAIL(SC_ERR_ARG, "scale %g is not finite", (double)scale);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 3, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 0, scale, 0, &v);
  sc__idx_close(&s);
  if (st) return st;
  *images = (float *)v;
  *n = dims[0];
  *rows = dims[1];
  *cols = dims[2];
  return SC_OK;
}

sc_status sc_idx_load_labels(const char *path, int32_t **labels, size_t *n, size_t classes) {
  if (labels) *labels = NULL;
  if (n) *n = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(labels);
  SC__CHECK_NULL(n);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 1, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 1, 0.0f, classes, &v);
  sc__idx_close(&s);
  if (st) return st;
  *labels = (int32_t *)v;
  *n = dims[0];
  return SC_OK;
}

/* ---------------------------------------------------------------- thread pool */
/* A persistent pool: workers wait for a new generation number, run the task, and
 * count down `pending`. Between the steps of a training run the wait is short, so a
 * worker first spins on the atomic counter (no system call, a few microseconds to
 * start a step) and only then sleeps on the condition variable. */
typedef void (*sc__task_fn)(void *arg, int worker, int nworkers);

/* Elementwise work on n elements split over the workers: part w of `parts` (at most
 * SC__OPT_PARTS) is [*k0, *k1), cut at multiples of 64 but for the end, so that every element
 * gets the same operations whatever the split (vector bodies, not tails) */
static size_t sc__parts(int nworkers) {
  return (size_t)nworkers < SC__OPT_PARTS ? (size_t)nworkers : SC__OPT_PARTS;
}
static void sc__part_range(size_t w, size_t parts, size_t n, size_t *k0, size_t *k1) {
  *k0 = (w * n / parts) & ~(size_t)63;
  *k1 = w + 1 < parts ? ((w + 1) * n / parts) & ~(size_t)63 : n;
}

#if SC__THREADS
#include <sched.h>
#include <stdatomic.h>
#define SC__SPIN 20000 /* polls before a waiting thread starts yielding */
/* How long a worker polls for the next run before it sleeps on the condition variable. The
 * serial part of a training step (LeNet5: ADAM on 44,426 parameters, the guard's scan, the
 * slices' reduction) takes tens of microseconds; a worker that had gone to sleep by then
 * needed a futex wake (a system call, and an inter-processor interrupt under a hypervisor)
 * and started each step late: LeNet5 at batch 64 on 2 threads made 3 futex calls and 30
 * sched_yield calls per step (the caller waiting for the late worker). 20,000 polls
 * (about 10 us) was the limit before; now the worker polls that often, then yields between
 * polls until SC__SPIN_NS have passed. */
#define SC__SPIN_NS 1000000u /* 1 ms */
#endif

typedef struct sc__pool {
  int nthreads; /* total workers including the caller */
#if SC__THREADS
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv_go;
  atomic_ulong gen;
  atomic_int pending;
  atomic_int stop;
  atomic_size_t next; /* the next work item to claim (sc__pool_claim), reset per run */
  sc__task_fn fn;
  void *arg;
#if defined(__linux__) && defined(CPU_SET)
  int home;          /* pinned workers: the CPU left for the calling thread, else -1 */
  cpu_set_t wcpus;   /* the CPUs the workers are pinned to */
  uint64_t nudge_ns; /* when the calling thread was last moved home (sc__pool_nudge) */
#endif
#endif
} sc__pool;

#if SC__THREADS
typedef struct sc__worker_arg {
  sc__pool *pool;
  int id;
} sc__worker_arg;

static void *sc__worker_main(void *vp) {
  sc__worker_arg *wa = vp;
  sc__pool *P = wa->pool;
  int id = wa->id;
  unsigned long seen = 0;
  for (;;) {
    unsigned spins = 0;
    uint64_t until = 0;
    while (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
           !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      if (++spins < SC__SPIN) continue;
      /* then yield between polls, so that a thread with work on this CPU (more threads
       * than CPUs) gets it, until the time is up */
      uint64_t now = sc__ns();
      if (!until)
        until = now + SC__SPIN_NS;
      else if (now > until)
        break;
      sched_yield();
    }
    if (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
        !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      pthread_mutex_lock(&P->mu);
      while (atomic_load(&P->gen) == seen && !atomic_load(&P->stop))
        pthread_cond_wait(&P->cv_go, &P->mu);
      pthread_mutex_unlock(&P->mu);
    }
    if (atomic_load_explicit(&P->stop, memory_order_acquire)) return NULL;
    seen = atomic_load_explicit(&P->gen, memory_order_acquire);
    P->fn(P->arg, id, P->nthreads);
    atomic_fetch_sub_explicit(&P->pending, 1, memory_order_acq_rel);
  }
}
#endif

static void sc__pool_destroy(sc__pool *P) {
  if (!P) return;
#if SC__THREADS
  if (P->th) {
    pthread_mutex_lock(&P->mu);
    atomic_store(&P->stop, 1);
    pthread_cond_broadcast(&P->cv_go);
    pthread_mutex_unlock(&P->mu);
    for (int i = 0; i < P->nthreads - 1; i++) pthread_join(P->th[i], NULL);
    pthread_cond_destroy(&P->cv_go);
    pthread_mutex_destroy(&P->mu);
    free(P->th);
  }
#endif
  free(P);
}

#if SC__THREADS
static sc_status sc__pool_create(sc__pool **out, int nthreads) {
  *out = NULL;
  /* worker args live right after the pool struct */
  sc__pool *P = calloc(1, sizeof(sc__pool) + (size_t)nthreads * sizeof(sc__worker_arg));
  if (!P) return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  P->nthreads = nthreads;
  P->th = calloc((size_t)nthreads, sizeof(pthread_t));
  if (!P->th) {
    free(P);
    return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  }
  atomic_init(&P->gen, 0);
  atomic_init(&P->pending, 0);
  atomic_init(&P->stop, 0);
  atomic_init(&P->next, 0);
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv_go, NULL);
  sc__worker_arg *wa = (sc__worker_arg *)(P + 1);
#if defined(__linux__) && defined(CPU_SET)
  P->home = -1;
  CPU_ZERO(&P->wcpus);
#endif
  for (int i = 0; i < nthreads - 1; i++) {
    wa[i].pool = P;
    wa[i].id = i + 1;
    if (pthread_create(&P->th[i], NULL, sc__worker_main, &wa[i]) != 0) {
      P->nthreads = i + 1; /* join the ones that started */
      sc__pool_destroy(P);
      return sc__fail(SC_ERR_THREAD, "sc_workspace_set_threads",
                      "pthread_create failed for worker %d of %d", i + 1, nthreads);
    }
  }
#if defined(__linux__) && defined(CPU_SET)
  /* Pinning: worker k runs on the k-th CPU (cyclically) of the ones this process may use,
   * so workers do not migrate between steps; the calling thread is not pinned, only moved
   * off a worker's CPU when found there (sc__pool_nudge). SC_PIN=0
   * turns it off. A failure to pin is not an error (the threads run unpinned). */
  const char *pin = getenv("SC_PIN");
  if (!(pin && strcmp(pin, "0") == 0)) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      int cpus[CPU_SETSIZE], nc = 0;
      for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &allowed)) cpus[nc++] = k;
      for (int i = 0; nc > 1 && i < nthreads - 1; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[(i + 1) % nc], &one);
        if (pthread_setaffinity_np(P->th[i], sizeof one, &one) == 0)
          CPU_SET(cpus[(i + 1) % nc], &P->wcpus);
      }
      /* the first CPU is the calling thread's when no worker got it */
      if (nc > 1 && nthreads <= nc && !CPU_ISSET(cpus[0], &P->wcpus)) P->home = cpus[0];
    }
  }
#endif
  *out = P;
  return SC_OK;
}
#endif

/* the next work item of the current run, for workers that take items as they go (called
 * only from a task run with nworkers > 1) */
static size_t sc__pool_claim(sc__pool *P) {
#if SC__THREADS
  return atomic_fetch_add_explicit(&P->next, 1, memory_order_relaxed);
#else
  (void)P;
  return SIZE_MAX;
#endif
}

#if SC__THREADS && defined(__linux__) && defined(CPU_SET)
/* The calling thread is not pinned, and the scheduler sometimes runs it on a pinned worker's
 * CPU: that worker then waits for the caller's share of each run before it can do its own
 * (LeNet5, 2 threads, Zen 4 KVM guest: runs of 15-50 consecutive steps, about 3.7 % of the
 * steps of an epoch, each 0.6-1.1 ms longer, until the load balancer moved the caller; 2-7 %
 * of the epoch). When it is found there, it is moved to its own CPU (home) by narrowing its
 * affinity to that CPU, which migrates it at once, and then restoring its affinity as it was.
 * Not when the thread's own affinity excludes home (the user's choice), and at most once a
 * millisecond (a CPU shared by more threads than it can run: the move would not last). */
static void sc__pool_nudge(sc__pool *P) {
  int cpu = P->home < 0 ? -1 : sched_getcpu();
  if (cpu < 0 || cpu == P->home || !CPU_ISSET(cpu, &P->wcpus)) return;
  uint64_t now = sc__ns();
  if (P->nudge_ns && now - P->nudge_ns < 1000000u) return;
  P->nudge_ns = now;
  cpu_set_t mine, one;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_ISSET(P->home, &mine)) return;
  CPU_ZERO(&one);
  CPU_SET(P->home, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) (void)sched_setaffinity(0, sizeof mine, &mine);
}
#endif

/* run fn on every worker (the caller is worker 0) and wait for all */
static void sc__pool_run(sc__pool *P, sc__task_fn fn, void *arg) {
  if (!P || P->nthreads <= 1) {
    fn(arg, 0, 1);
    return;
  }
#if SC__THREADS
#if defined(__linux__) && defined(CPU_SET)
  sc__pool_nudge(P);
#endif
  P->fn = fn;
  P->arg = arg;
  atomic_store_explicit(&P->next, 0, memory_order_relaxed);
  atomic_store_explicit(&P->pending, P->nthreads - 1, memory_order_relaxed);
  pthread_mutex_lock(&P->mu); /* the lock orders gen against a worker going to sleep */
  atomic_fetch_add_explicit(&P->gen, 1, memory_order_release);
  pthread_cond_broadcast(&P->cv_go);
  pthread_mutex_unlock(&P->mu);
  fn(arg, 0, P->nthreads);
  for (unsigned long spins = 0; atomic_load_explicit(&P->pending, memory_order_acquire) > 0;
       spins++)
    if (spins > SC__SPIN) sched_yield();
#endif
}

/* ---------------------------------------------------------------- workspaces */

/* rank r of R's contiguous run [*lo, *hi) of n slices (data-parallel training, sc_dist) */
static inline void sc__rank_slices(size_t n, size_t r, size_t R, size_t *lo, size_t *hi) {
  *lo = r * n / R;
  *hi = (r + 1) * n / R;
}

static size_t sc__slices_for(const sc_chain *c, size_t batch) {
  size_t tiles = (batch + SC__TW - 1) / SC__TW;
  size_t s = (tiles + c->min_tiles - 1) / c->min_tiles;
  if (s > SC__MAX_SLICES) s = SC__MAX_SLICES;
  return s ? s : 1;
}

static sc_status sc__ws_plan(const char *fn, const sc_chain *c, size_t max_batch, size_t *slices,
                             size_t *tile_bytes, size_t *slice_bytes, size_t *total) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (max_batch == 0) return sc__fail(SC_ERR_BATCH, fn, "max_batch is 0");
  int ok = 1;
  *slices = sc__slices_for(c, max_batch);
  /* elements sized for double so one workspace serves both precisions */
  *tile_bytes = sc__roundup(sc__mul(c->tile_elems, sizeof(double), &ok), SC__ALIGN, &ok);
  size_t grad = sc__roundup(sc__mul(c->nparams, sizeof(double), &ok), SC__ALIGN, &ok);
  *slice_bytes = sc__add(*tile_bytes, grad, &ok);
  size_t head = sc__roundup(sizeof(struct sc_workspace), SC__ALIGN, &ok);
  *total = sc__add(sc__add(head, sc__mul(*slices, *slice_bytes, &ok), &ok), SC__ALIGN, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "workspace size overflows size_t");
  return SC_OK;
}

sc_status sc_workspace_bytes(const sc_chain *chain, size_t max_batch, size_t *bytes) {
  size_t s = 0, tb = 0, sb = 0, total = 0;
  SC__CHECK_NULL(bytes);
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  *bytes = total;
  return SC_OK;
}

static sc_workspace *sc__ws_place(void *mem, const sc_chain *c, size_t max_batch, size_t s,
                                  size_t tb, size_t sb) {
  uintptr_t a = ((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
  sc_workspace *ws = (sc_workspace *)a;
  memset(ws, 0, sizeof *ws);
  ws->chain = c;
  ws->max_batch = max_batch;
  ws->max_slices = s;
  ws->tile_bytes = tb;
  ws->slice_bytes = sb;
  size_t head = (sizeof(struct sc_workspace) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  ws->slices = (unsigned char *)a + head;
  return ws;
}

sc_status sc_workspace_create(sc_workspace **out, const sc_chain *chain, size_t max_batch) {
  SC__CHECK_NULL(out);
  *out = NULL;
  size_t s = 0, tb = 0, sb = 0, total = 0;
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  void *mem = malloc(total);
  if (!mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory allocating %zu bytes", total);
  sc_workspace *ws = sc__ws_place(mem, chain, max_batch, s, tb, sb);
  ws->owned = mem;
  *out = ws;
  return SC_OK;
}

sc_status sc_workspace_init(sc_workspace **out, const sc_chain *chain, size_t max_batch, void *mem,
                            size_t bytes) {
  SC__CHECK_NULL(out);
  *out = NULL;
  SC__CHECK_NULL(mem);
  size_t s = 0, tb = 0, sb = 0, total = 0;
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  if (bytes < total)
    return SC__FAIL(SC_ERR_NOMEM, "caller memory of %zu bytes is smaller than the %zu needed",
                    bytes, total);
  *out = sc__ws_place(mem, chain, max_batch, s, tb, sb);
  return SC_OK;
}

/* a thread count's range (sc_workspace_set_threads, sc_train's opts.threads) */
static inline sc_status sc__threads_check(const char *fn, int threads) {
  if (threads < 1 || threads > 1024)
    return sc__fail(SC_ERR_ARG, fn, "threads = %d, must be in [1, 1024]", threads);
  return SC_OK;
}

sc_status sc_workspace_set_threads(sc_workspace *ws, int threads) {
  SC__CHECK_NULL(ws);
  sc_status tst = sc__threads_check(__func__, threads);
  if (tst) return tst;
  if (ws->pool && ws->pool->nthreads == threads) return SC_OK;
  sc__pool_destroy(ws->pool);
  ws->pool = NULL;
  if (threads == 1) return SC_OK;
#if SC__THREADS
  return sc__pool_create(&ws->pool, threads);
#else
  return SC__FAIL(SC_ERR_UNSUPPORTED, "this build has no thread support (SC_NO_THREADS)");
#endif
}

sc_status sc_workspace_set_dropout(sc_workspace *ws, uint64_t seed, uint64_t step) {
  SC__CHECK_NULL(ws);
  ws->drop_seed = seed;
  ws->drop_step = step;
  return SC_OK;
}

void sc_workspace_destroy(sc_workspace *ws) {
  if (!ws) return;
  sc__pool_destroy(ws->pool);
  ws->pool = NULL;
  free(ws->prof_mem);
  ws->prof = ws->prof_mem = NULL;
  free(ws->bf_p);
  free(ws->bf_w);
  free(ws->bf_woff);
  free(ws->bf_scr);
  ws->bf_p = NULL;
  ws->bf_w = ws->bf_scr = NULL;
  ws->bf_woff = NULL;
  ws->bf_on = NULL;
  free(ws->owned);
}

/* ---------------------------------------------------------------- precision */
const char *sc_precision_name(sc_precision precision) {
  switch (precision) {
  case SC_PRECISION_FP32: return "fp32";
  case SC_PRECISION_BF16: return "bf16";
  case SC_PRECISION_BF16_EMULATED: return "bf16-emulated";
  }
  return NULL;
}

/* ---- the bf16 kernels: one GEMM on bf16 pairs (sc__bf16_gemm_fn) serves a dense layer's
 * (and, row by row, a conv layer's) forward (A: the weights paired along the inputs, B: the tile
 * paired along the inputs), dx (A: the weights paired along the outputs, B: dz paired along the
 * outputs) and dW (A: dz paired along the samples, B: the layer input paired along the samples,
 * accumulated into the slice's gradient). The model is portable code computing what vdpbf16ps
 * computes (Intel SDM: per pair, srcdest += hi * hi, then srcdest += lo * lo, "round to nearest
 * even ... when doing each accumulation of the FMA", denormal inputs read as zero and denormal
 * results flushed to zero); it runs on any CPU and is what the tests compare the AVX512_BF16
 * kernel with. Each step is an FMA (sc__bf16_fma: fmaf, one rounding): the product of two bf16 is
 * exact in float unless it overflows (or underflows), and there a product rounded first differs:
 * -3e38 + 3e38 x 2 is 3e38 on an AMD Zen 5's VDPBF16PS and by fmaf, infinite with the product
 * rounded, and 3e38 x 2 + (-3e38 x 2) is infinite against NaN (until session 38 the model rounded
 * each product, and a compiler contracting a * b + c into an FMA, as clang may, gave the other). */
static inline float sc__bf16_lo_f(uint32_t w) { return sc__fof(w << 16); }
static inline float sc__bf16_hi_f(uint32_t w) { return sc__fof(w & 0xffff0000u); }
static inline float sc__ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }
/* one step of the models: c + a b with one rounding, flushed to zero if denormal */
static inline float sc__bf16_fma(float c, float a, float b) { return sc__ftz(fmaf(a, b, c)); }

static void sc__bf16_gemm_model_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     int acc, const size_t *arow, const size_t *crow, size_t grp,
                                     const size_t *brow) {
  (void)grp; /* row by row: one group after the other */
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float *cp = C + (crow ? crow[m] : m) * ldc;
      float c = acc ? sc__ftz(cp[n]) : 0.0f;
      const uint32_t *ar = A + (arow ? arow[m] : m) * lda;
      for (size_t k = 0; k < K2; k++) {
        uint32_t a = ar[k], b = B[(brow ? brow[k] : k) * ldb + n];
        c = sc__bf16_fma(c, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
        c = sc__bf16_fma(c, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
      }
      cp[n] = c;
    }
}
static void sc__bf16_gemm_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                int acc) {
  sc__bf16_gemm_model_rows(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, 0, NULL);
}
/* The dx of a stride-1 conv layer (C input channels, K2 pairs of output channels, kh x kw
 * taps, oh x ow outputs) as a correlation: each element of the (padded) input's gradient xg
 * (C x (oh + kh - 1) x (ow + kw - 1) positions of TW lanes, overwritten) is one sum over the
 * taps (i, j) whose output (y - i, x - j) exists, in the order i, j, then the pairs op, of
 * wt[(c kh + i) kw + j][op] (W^T's pairs, sc__bf16_params) times dzp[op][(y - i) ow + x - j]
 * (dz's channel pairs, sc__bf16_pack_rows over the whole tile). Each sum is made once, in
 * registers on the native kernel, instead of adding each output row's taps into xg (8 pairs
 * at a time for LeNet5's conv2). What vdpbf16ps computes, as sc__bf16_gemm_model. */
static void sc__bf16_dx_corr_model(float *restrict xg, const uint32_t *restrict wt,
                                   const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh,
                                   size_t kw, size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, npos = oh * ow;
  for (size_t c = 0; c < C; c++)
    for (size_t y = 0; y < hp; y++)
      for (size_t x = 0; x < wp; x++)
        for (size_t t = 0; t < SC__TW; t++) {
          float acc = 0.0f;
          for (size_t i = y >= oh ? y - oh + 1 : 0; i <= y && i < kh; i++)
            for (size_t j = x >= ow ? x - ow + 1 : 0; j <= x && j < kw; j++)
              for (size_t op = 0; op < K2; op++) {
                uint32_t a = wt[((c * kh + i) * kw + j) * K2 + op],
                         b = dzp[(op * npos + (y - i) * ow + x - j) * SC__TW + t];
                acc = sc__bf16_fma(acc, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
                acc = sc__bf16_fma(acc, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
              }
          xg[((c * hp + y) * wp + x) * SC__TW + t] = acc;
        }
}
/* sc__bf16_nt_fn's fold of 16 lanes: p[i] + p[i + 8], then + 4, + 2, + 1 (IEEE float adds) */
static float sc__bf16_fold16(const float *p) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; i++) s8[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}
static void sc__bf16_nt_model(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                              const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                              size_t M, size_t N, size_t K2, size_t S) {
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float p[16] = {0};
      for (size_t s = 0; s < S; s++) {
        const uint32_t *a = A + m * lda + s * sa, *b = B + boff[n] * bsc + s * sb;
        for (size_t k = 0; k < K2; k++) {
          float *c = &p[k % 16];
          *c = sc__bf16_fma(*c, sc__bf16_hi_f(a[k]), sc__bf16_hi_f(b[k]));
          *c = sc__bf16_fma(*c, sc__bf16_lo_f(a[k]), sc__bf16_lo_f(b[k]));
        }
      }
      C[m * ldc + n] += sc__bf16_fold16(p);
    }
}

#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 9) ||                        \
                            (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define SC__HAVE_BF16_NATIVE 1
/* GCC at -O2 (the two drop-in files' `cc -O2`) leaves the register blocks' loops over their
 * accumulator arrays rolled, the accumulators on the stack: LeNet5's bf16 epoch (20,000 images,
 * 2 threads, Zen 5) took 0.57 s against the make build's 0.14 (conv2's forward at 84 GFLOP/s a
 * thread against 378). So these kernels are compiled at -O3 there too, as the portable kernels
 * are: 0.23 s, the trained parameters the same bits as at -O2 (and with clang).
 * SC_NO_O3_PRAGMA opts out. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) &&                           \
    !defined(__OPTIMIZE_SIZE__) && !defined(SC_NO_O3_PRAGMA)
#pragma GCC push_options
#pragma GCC optimize("O3")
#define SC__BF16_POP_OPTIONS 1
#endif
/* The AVX512_BF16 GEMM: blocks of up to 4 rows x 32 columns (8 accumulators), the 32-bit
 * pair of A broadcast, 16 pairs of B loaded per vector (masked at the column tail), one
 * vdpbf16ps per accumulator and k. The same sums in the same order as the model. With ep (a
 * forward's epilogue, sc__bf16_ep) each vector gets its bias, relu and rounding before its store:
 * LeNet5's conv1 forward 33.4 -> 30.0 ms over 20,000 images, 1 thread, Zen 4, medians of 5
 * (the two passes after the GEMM read and wrote its 442-KB output). The row loops are unrolled
 * (GCC unroll): with the epilogue in a loop that was not, GCC kept the accumulators on the stack
 * and the forward took twice as long. */
/* row r of the block's A and its place in C (the rows through arow / crow when given) */
#define SC__BF16_AROW(r) (A + (arow ? arow[m + (size_t)(r)] : m + (size_t)(r)) * lda)
#define SC__BF16_CROW(r) (C + (crow ? crow[m + (size_t)(r)] : m + (size_t)(r)) * ldc + n)
#define SC__BF16_ROWS(MB)                                                                          \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB];                                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cr) : _mm512_setzero_ps();                           \
      c1[r] = acc ? _mm512_maskz_loadu_ps(k1, cr + 16) : _mm512_setzero_ps();                      \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, bk);                                               \
      __m512i b1 = _mm512_maskz_loadu_epi32(k1, bk + 16);                                          \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_mask_storeu_ps(cr, k0, c0[r]);                                                        \
      _mm512_mask_storeu_ps(cr + 16, k1, c1[r]);                                                   \
    }                                                                                              \
  }
/* MB rows x 64 whole columns (4 accumulators a row): MB broadcasts and 4 loads feed 4 MB
 * products (2 MB with SC__BF16_ROWS); the same sums in the same order. (One macro for both,
 * over arrays of 2 or 4 accumulators and masks, made conv1's forward 29.0 -> 31-33 ms) */
#define SC__BF16_ROWS4(MB)                                                                         \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_loadu_ps(cr) : _mm512_setzero_ps();                                     \
      c1[r] = acc ? _mm512_loadu_ps(cr + 16) : _mm512_setzero_ps();                                \
      c2[r] = acc ? _mm512_loadu_ps(cr + 32) : _mm512_setzero_ps();                                \
      c3[r] = acc ? _mm512_loadu_ps(cr + 48) : _mm512_setzero_ps();                                \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_loadu_si512(bk), b1 = _mm512_loadu_si512(bk + 16);                       \
      __m512i b2 = _mm512_loadu_si512(bk + 32), b3 = _mm512_loadu_si512(bk + 48);                  \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
        c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)a);                                \
        c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
        c2[r] = sc__bf16_ep_v(c2[r], ep, m + (size_t)r);                                           \
        c3[r] = sc__bf16_ep_v(c3[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_storeu_ps(cr, c0[r]);                                                                 \
      _mm512_storeu_ps(cr + 16, c1[r]);                                                            \
      _mm512_storeu_ps(cr + 32, c2[r]);                                                            \
      _mm512_storeu_ps(cr + 48, c3[r]);                                                            \
    }                                                                                              \
  }
/* the same for a last block of at most 16 columns: one accumulator per row */
#define SC__BF16_ROWS_H(MB)                                                                        \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB];                                                                                 \
    const uint32_t *ar[MB];                                                                        \
    float *cp[MB];                                                                                 \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      cp[r] = SC__BF16_CROW(r);                                                                    \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cp[r]) : _mm512_setzero_ps();                        \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + (brow ? brow[k] : k) * ldb + n);               \
      for (int r = 0; r < MB; r++)                                                                 \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)_mm512_set1_epi32((int)ar[r][k])); \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++)                                           \
        _mm512_mask_storeu_ps(cp[r], k0, ep ? sc__bf16_ep_v(c0[r], ep, m + (size_t)r) : c0[r]);    \
  }
/* ROWS_H's block for A rows that come in runs of KW consecutive taps (a conv's dW^T, A's rows
 * the input's lane pairs at the taps, SC__TW / 2 pairs apart within a kernel row): 15 rows, 15 / KW
 * runs, each row's broadcast at a fixed distance from its run's start, so 15 accumulators need
 * 15 / KW pointers (ROWS_H's 8 rows take 8, and 16 such rows ran out of registers: 1.5x slower);
 * the same sums in the same order. Blocks whose rows are not such runs are left to ROWS_H. */
#define SC__BF16_RUNS_OK(KW)                                                                       \
  (arow && lda == SC__TW / 2 && m + 15 <= M && sc__bf16_runs(arow + m, KW, 15 / KW))
#define SC__BF16_ROWS_G(KW)                                                                        \
  for (; SC__BF16_RUNS_OK(KW); m += 15) {                                                          \
    enum { G_ = 15 / KW };                                                                         \
    __m512 c0[15];                                                                                 \
    const uint32_t *gp[G_];                                                                        \
    for (int g = 0; g < G_; g++) gp[g] = A + arow[m + (size_t)(g * KW)] * lda;                     \
    for (int r = 0; r < 15; r++)                                                                   \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, SC__BF16_CROW(r)) : _mm512_setzero_ps();             \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + k * ldb + n);                                  \
      for (int g = 0; g < G_; g++)                                                                 \
        for (int j = 0; j < KW; j++)                                                               \
          c0[g * KW + j] =                                                                         \
              _mm512_dpbf16_ps(c0[g * KW + j], (__m512bh)b0,                                       \
                               (__m512bh)_mm512_set1_epi32((int)gp[g][j * (SC__TW / 2) + k]));     \
    }                                                                                              \
    _Pragma("GCC unroll 15") for (int r = 0; r < 15; r++)                                          \
        _mm512_mask_storeu_ps(SC__BF16_CROW(r), k0, c0[r]);                                        \
  }
/* whether rows[g KW + j] = rows[g KW] + j for all g < G, j < KW */
static inline int sc__bf16_runs(const size_t *rows, size_t KW, size_t G) {
  for (size_t g = 0; g < G; g++)
    for (size_t j = 1; j < KW; j++)
      if (rows[g * KW + j] != rows[g * KW] + j) return 0;
  return 1;
}
/* sc__bf16_ep's work on a vector of row m's C: the add, max and VCVTNEPS2BF16 of the passes */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline __m512
sc__bf16_ep_v(__m512 v, const sc__bf16_ep *ep, size_t m) {
  v = _mm512_add_ps(v, _mm512_set1_ps(ep->bias ? ep->bias[m] : 0.0f));
  if (ep->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  if (ep->round)
    v = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
  return v;
}
/* sc__bf16_gemm_native_blk on N / 64 blocks of 64 whole columns: rows by 6 with 4 accumulators
 * each, then by 4 with 4 (LeNet5's conv2, 16 outputs: 6 + 6 + 4; its forward 48.3-49.0 ->
 * 44.4-44.7 ms per epoch-thread, Zen 5, against the last 4 by 4 with 2, twice), the last rows
 * (M % 6) by 4 and 1 with 2, twice; the same sums in the same order. Used
 * for the convs' forwards (with ep): LeNet5's conv1 (6 outputs, 13 pairs of taps, 320-column
 * chunks) spent as many loads (6 broadcasts, 2 of B) as products (12) a pair with 6 x 2
 * blocks; with 6 x 4 (10 loads, 24 products) its forward took 29.3 ms instead of 31.5 over
 * 20,000 images (1 thread, Zen 4, median of 3 alternating runs; conv2's 31.3 -> 30.9). Not for
 * the dense dW (acc, N = 256): its backward took 6 % longer */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_gemm_native_blk64(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                           size_t ldb, size_t M, size_t N, size_t K2, int acc, const size_t *arow,
                           const size_t *crow, const size_t *brow, const sc__bf16_ep *ep) {
  const __mmask16 k0 = 0xFFFFu, k1 = 0xFFFFu;
  for (size_t n0 = 0; n0 + 64 <= N; n0 += 64) {
    size_t n = n0, m = 0;
    SC__BF16_ROWS4(6)
    SC__BF16_ROWS4(4)
    size_t m6 = m;
    for (; n < n0 + 64; n += 32) {
      m = m6;
      SC__BF16_ROWS(4)
      SC__BF16_ROWS(1)
    }
  }
}
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_gemm_native_blk(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                         size_t ldb, size_t M, size_t N, size_t K2, int acc, const size_t *arow,
                         const size_t *crow, const size_t *brow, const sc__bf16_ep *ep) {
  size_t n = 0;
  if (ep && N >= 64 && M >= 6) { /* a conv's forward: rows by 6, 64 columns at a time */
    sc__bf16_gemm_native_blk64(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, ep);
    n = N / 64 * 64;
  }
  for (; n < N; n += 32) {
    size_t w = N - n < 32 ? N - n : 32;
    __mmask16 k0 = (__mmask16)(w >= 16 ? 0xFFFFu : (1u << w) - 1u);
    __mmask16 k1 = (__mmask16)(w >= 32 ? 0xFFFFu : w > 16 ? (1u << (w - 16)) - 1u : 0u);
    size_t m = 0;
    if (w <= 16) {
      if (!ep && !brow) {
        SC__BF16_ROWS_G(5)
        SC__BF16_ROWS_G(3)
      }
      SC__BF16_ROWS_H(8)
      SC__BF16_ROWS_H(4)
      SC__BF16_ROWS_H(1)
      continue;
    }
    SC__BF16_ROWS(8)
    SC__BF16_ROWS(6)
    SC__BF16_ROWS(4)
    SC__BF16_ROWS(1)
  }
}
#undef SC__BF16_ROWS
#undef SC__BF16_AROW
#undef SC__BF16_CROW
#undef SC__BF16_ROWS4
#undef SC__BF16_ROWS_H
#undef SC__BF16_ROWS_G
#undef SC__BF16_RUNS_OK
/* sc__bf16_fold16 on a vector, the same adds in the same order */
__attribute__((target("avx512f"))) static inline float sc__bf16_fold16_v(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
/* sc__bf16_nt_fn: blocks of MB rows x NB columns, one accumulator each */
#define SC__BF16_NT(MB, NB)                                                                        \
  for (; n + NB <= N; n += NB) {                                                                   \
    __m512 c[MB][NB];                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++) c[i][j] = _mm512_setzero_ps();                                  \
    for (size_t s = 0; s < S; s++) {                                                               \
      const uint32_t *bp[NB], *ap = A + m * lda + s * sa;                                          \
      for (int j = 0; j < NB; j++) bp[j] = B + boff[n + (size_t)j] * bsc + s * sb;                 \
      for (size_t k = 0; k < K2; k += 16) {                                                        \
        __m512i b[NB];                                                                             \
        for (int j = 0; j < NB; j++) b[j] = _mm512_loadu_si512(bp[j] + k);                         \
        for (int i = 0; i < MB; i++) {                                                             \
          __m512i a = _mm512_loadu_si512(ap + (size_t)i * lda + k);                                \
          for (int j = 0; j < NB; j++)                                                             \
            c[i][j] = _mm512_dpbf16_ps(c[i][j], (__m512bh)a, (__m512bh)b[j]);                      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++)                                                                 \
        C[(m + (size_t)i) * ldc + n + (size_t)j] += sc__bf16_fold16_v(c[i][j]);                    \
  }
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_nt_native(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                   const uint32_t *B, const size_t *boff, size_t bsc, size_t sb, size_t M, size_t N,
                   size_t K2, size_t S) {
  size_t m = 0;
  for (; m + 6 <= M; m += 6) {
    size_t n = 0;
    SC__BF16_NT(6, 4)
    SC__BF16_NT(6, 1)
  }
  for (; m + 2 <= M; m += 2) {
    size_t n = 0;
    SC__BF16_NT(2, 4)
    SC__BF16_NT(2, 1)
  }
  for (; m < M; m++) {
    size_t n = 0;
    SC__BF16_NT(1, 4)
    SC__BF16_NT(1, 1)
  }
}
#undef SC__BF16_NT
/* dW^T (R x K floats, ldc K; R = ic 5 5 taps in roff's order, K <= 16 channels) of a conv with
 * a 5 x 5 kernel, row stride 1 and at least 4 output rows, from the input tile's lane pairs xp
 * (ic x hp x wp positions of SC__TW / 2 pairs; hp = oh + 4) and dz's lane pairs transposed over
 * the whole tile (dzt: oh ow SC__TW / 2 rows of K): the sums of sc__bf16_gemm_native_rows called
 * row by row (dwt[r] += over the output rows u in order, over each row's lane pairs k in
 * order), in the same order: the same bits. Per input row y and lane pair k, the broadcasts of
 * its 5 taps' pairs (j) each feed the tap rows i whose output row y - i exists, from one load
 * of dz per such row (inside: 10 loads for 25 vdpbf16ps, the 25 accumulators held over the
 * whole tile) instead of one load of dz and 15 broadcasts for 15 (SC__BF16_ROWS_G, load-bound:
 * 81 % of twice the FMA peak). LeNet5's conv2 (Zen 5, 1 thread, --profile): its pullback 92-94 ->
 * 89.5 ms an epoch. */
#define SC__BF16_DWT5_K(I0, I1)                                                                    \
  for (size_t k = 0; k < RW2; k++) {                                                               \
    __m512i b[5];                                                                                  \
    _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) b[i] =                                  \
        _mm512_maskz_loadu_epi32(km, dzt + ((y - (size_t)i) * RW2 + k) * K);                       \
    _Pragma("GCC unroll 5") for (int j = 0; j < 5; j++) {                                          \
      __m512i a = _mm512_set1_epi32((int)xr[k + 16 * (size_t)j]);                                  \
      _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) acc[i][j] =                           \
          _mm512_dpbf16_ps(acc[i][j], (__m512bh)b[i], (__m512bh)a);                                \
    }                                                                                              \
  }                                                                                                \
  break;
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dwt5_native(float *restrict dwt, const uint32_t *restrict xp, const uint32_t *restrict dzt,
                     size_t K, size_t ic, size_t hp, size_t wp, size_t oh, size_t ow) {
  const __mmask16 km = (__mmask16)(K >= 16 ? 0xFFFFu : (1u << K) - 1u);
  size_t RW2 = ow * (SC__TW / 2);
  for (size_t ci = 0; ci < ic; ci++) {
    __m512 acc[5][5];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++) acc[i][j] = _mm512_setzero_ps();
    for (size_t y = 0; y < oh + 4; y++) {
      const uint32_t *xr = xp + (ci * hp + y) * wp * (SC__TW / 2);
      int i0 = y >= oh ? (int)(y - oh + 1) : 0, i1 = y < 4 ? (int)y : 4;
      switch (i0 * 8 + i1) { /* the tap rows i whose output row y - i exists */
      case 4: SC__BF16_DWT5_K(0, 4)
      case 0: SC__BF16_DWT5_K(0, 0)
      case 1: SC__BF16_DWT5_K(0, 1)
      case 2: SC__BF16_DWT5_K(0, 2)
      case 3: SC__BF16_DWT5_K(0, 3)
      case 12: SC__BF16_DWT5_K(1, 4)
      case 20: SC__BF16_DWT5_K(2, 4)
      case 28: SC__BF16_DWT5_K(3, 4)
      case 36: SC__BF16_DWT5_K(4, 4)
      default: break; /* (oh < 4 only; not called there) */
      }
    }
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        _mm512_mask_storeu_ps(dwt + ((ci * 5 + (size_t)i) * 5 + (size_t)j) * K, km, acc[i][j]);
  }
}
#undef SC__BF16_DWT5_K
/* sc__bf16_dx_corr_model on AVX512_BF16: blocks of MB channels x one position (its 32 lanes),
 * 2 MB accumulators, then one store; where a row's positions x and x + 1 both take every tap
 * of the kernel's row (kw - 1 <= x <= ow - 2) and MB >= 4, both at once (4 MB accumulators, the
 * broadcasts shared; the 12 of MB = 6 were latency-bound): LeNet5's conv2 pullback 98.9-99.2 ->
 * 96.2-98.1 ms per epoch-thread (bf16, 2 threads, Zen 5). The same sums in the same order */
#define SC__BF16_DXC(MB)                                                                           \
  for (; c + MB <= C; c += MB)                                                                     \
    for (size_t y = 0; y < hp; y++) {                                                              \
      size_t i0 = y >= oh ? y - oh + 1 : 0, i1 = y < kh ? y + 1 : kh;                              \
      for (size_t x = 0; x < wp; x++) {                                                            \
        size_t j0 = x >= ow ? x - ow + 1 : 0, j1 = x < kw ? x + 1 : kw;                            \
        if (MB >= 4 && x + 1 >= kw && x + 2 <= ow) { /* x and x + 1: every tap of the row */       \
          __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                   \
          for (int r = 0; r < MB; r++) c0[r] = c1[r] = c2[r] = c3[r] = _mm512_setzero_ps();        \
          for (size_t i = i0; i < i1; i++)                                                         \
            for (size_t j = 0; j < kw; j++) {                                                      \
              const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                           \
              const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                               \
              for (size_t op = 0; op < K2; op++) {                                                 \
                __m512i b0 = _mm512_loadu_si512(b + op * ps);                                      \
                __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                 \
                __m512i b2 = _mm512_loadu_si512(b + op * ps + SC__TW);                             \
                __m512i b3 = _mm512_loadu_si512(b + op * ps + SC__TW + 16);                        \
                for (int r = 0; r < MB; r++) {                                                     \
                  __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                     \
                  c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                     \
                  c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                     \
                  c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)av);                     \
                  c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)av);                     \
                }                                                                                  \
              }                                                                                    \
            }                                                                                      \
          _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                   \
            float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                        \
            _mm512_storeu_ps(d, c0[r]);                                                            \
            _mm512_storeu_ps(d + 16, c1[r]);                                                       \
            _mm512_storeu_ps(d + SC__TW, c2[r]);                                                   \
            _mm512_storeu_ps(d + SC__TW + 16, c3[r]);                                              \
          }                                                                                        \
          x++;                                                                                     \
          continue;                                                                                \
        }                                                                                          \
        __m512 c0[MB], c1[MB];                                                                     \
        for (int r = 0; r < MB; r++) c0[r] = c1[r] = _mm512_setzero_ps();                          \
        for (size_t i = i0; i < i1; i++)                                                           \
          for (size_t j = j0; j < j1; j++) {                                                       \
            const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                             \
            const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                                 \
            for (size_t op = 0; op < K2; op++) {                                                   \
              __m512i b0 = _mm512_loadu_si512(b + op * ps);                                        \
              __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                   \
              for (int r = 0; r < MB; r++) {                                                       \
                __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                       \
                c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                       \
                c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                       \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                     \
          float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                          \
          _mm512_storeu_ps(d, c0[r]);                                                              \
          _mm512_storeu_ps(d + 16, c1[r]);                                                         \
        }                                                                                          \
      }                                                                                            \
    }
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dx_corr_native(float *restrict xg, const uint32_t *restrict wt,
                        const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh, size_t kw,
                        size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, ps = oh * ow * SC__TW, as = kh * kw * K2, c = 0;
  SC__BF16_DXC(6)
  SC__BF16_DXC(4)
  SC__BF16_DXC(2)
  SC__BF16_DXC(1)
}
#undef SC__BF16_DXC
static void sc__bf16_gemm_native_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                      const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                      int acc, const size_t *arow, const size_t *crow, size_t grp,
                                      const size_t *brow) {
  if (!crow || grp == 0 || grp >= M) {
    sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, NULL);
    return;
  }
  for (size_t g0 = 0; g0 < M; g0 += grp) /* the groups one after the other (the model's order) */
    sc__bf16_gemm_native_blk(C, ldc, arow ? A : A + g0 * lda, lda, B, ldb,
                             M - g0 < grp ? M - g0 : grp, N, K2, acc, arow ? arow + g0 : NULL,
                             crow + g0, brow, NULL);
}
static void sc__bf16_gemm_native(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                 const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                 int acc) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, NULL, NULL);
}
static void sc__bf16_gemm_native_ep(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                    const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                    const size_t *brow, const sc__bf16_ep *ep) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, 0, NULL, NULL, brow, ep);
}
/* x[k] = x[k] rounded to bf16 (kept as a float) by VCVTNEPS2BF16: the bits of sc__bf16_rne
 * (checked on all 2^32 inputs on an AMD Zen 4: denormals to zeros of their sign, a NaN kept
 * quiet), 16 at a time, the tail masked. The SC_PRECISION_BF16 kernels' rounding where the
 * CPU has the instruction (ws->bf_round) */
__attribute__((target("avx512f,avx512bf16"))) static void sc__bf16_round_native(float *restrict x,
                                                                                size_t n) {
  for (size_t k = 0; k < n; k += 16) {
    __mmask16 m = (__mmask16)(n - k >= 16 ? 0xFFFFu : (1u << (n - k)) - 1u);
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k));
    _mm512_mask_storeu_epi32(x + k, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
/* the dz of a conv layer with few channels and no dx (the dot-product form's dW only): relu's
 * (or the identity's) pullback of d (K channels of npos positions of SC__TW lanes; relu: 0 where
 * a <= 0), its bias lanes summed into bl (K rows of SC__TW; NULL: no bias) and its lane pairs,
 * rounded by VCVTNEPS2BF16, in dzp (K rows of npos SC__TW / 2 pairs): in one pass the bits of
 * sc__act_bwd_lane, the rounding and pack_lanes, which each went over LeNet5's 442-KB conv1
 * gradient (d itself is left as it was: nothing reads it after). LeNet5's conv1 backward over
 * 20,000 images, 1 thread, Zen 4: 32.5 -> 25.4 ms */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_lanes_native(uint32_t *restrict dzp, const float *restrict d, float *restrict bl,
                         const float *restrict a, size_t K, size_t npos, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (size_t k = 0; k < K; k++) {
    const float *dk = d + k * npos * SC__TW, *ak = a + k * npos * SC__TW;
    uint32_t *zk = dzp + k * npos * (SC__TW / 2);
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t q = 0; q < npos; q++)
      for (int h = 0; h < SC__TW / 16; h++) {
        size_t e = q * SC__TW + 16 * (size_t)h;
        __m512 v = _mm512_loadu_ps(dk + e);
        if (relu)
          v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(_mm512_loadu_ps(ak + e), zero, _CMP_LE_OQ), v,
                                   zero);
        s[h] = _mm512_add_ps(s[h], v);
        _mm256_storeu_si256((__m256i *)(void *)(zk + e / 2), (__m256i)_mm512_cvtneps_pbh(v));
      }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* a 2 x 2 max-pool's pullback (sc__bf16_dz_pool_native, sc__bf16_dz_pool_hits_native), the end of
 * a step: v0, v1 the dz of a window row's two positions (y, 2 wc), (y, 2 wc + 1), lanes 16 h on;
 * added to the bias lanes' sum s, rounded, stored as floats (dzf) or as lane pairs (zk) */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_dz_pool_put(__m512 v0, __m512 v1, __m512 *s, float *restrict dzf, uint32_t *restrict zk,
                     size_t k, size_t npos, size_t y, size_t OW, size_t wc, int h) {
  *s = _mm512_add_ps(_mm512_add_ps(*s, v0), v1);
  __m256i r0 = (__m256i)_mm512_cvtneps_pbh(v0), r1 = (__m256i)_mm512_cvtneps_pbh(v1);
  if (dzf) {
    float *fq = dzf + k * npos * SC__TW + (y * OW + 2 * wc) * SC__TW + 16 * (size_t)h;
    _mm512_storeu_si512(fq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r0), 16));
    _mm512_storeu_si512(fq + SC__TW, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r1), 16));
    return;
  }
  uint32_t *zq = zk + (y * OW + 2 * wc) * (SC__TW / 2) + 8 * (size_t)h;
  _mm256_storeu_si256((__m256i *)(void *)zq, r0);
  _mm256_storeu_si256((__m256i *)(void *)(zq + SC__TW / 2), r1);
}
/* the same with a 2 x 2 max-pooling layer above the conv folded in: g is the pool's dz (K
 * channels of OH / 2 x OW / 2 windows of SC__TW lanes), pa its output, x its input (the conv's
 * output, K x OH x OW positions, OH and OW even); the pool's pullback gives a position its
 * window's dz where x there is the window's first value equal to pa (in row-major order within
 * the window; NaN equals nothing) and 0 elsewhere, then as sc__bf16_dz_lanes_native:
 * vec_pool_bwd's bits without writing its dx (442 KB a tile in LeNet5). With dzf (dzp NULL) the
 * rounded dz goes there as floats instead (K x OH x OW positions of SC__TW lanes), for a conv
 * whose pullback packs it otherwise (LeNet5's conv2: dx and dW by rows) */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_pool_native(uint32_t *restrict dzp, float *restrict dzf, const float *restrict g,
                        const float *restrict pa, const float *restrict x, float *restrict bl,
                        size_t K, size_t OH, size_t OW, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, npos = OH * OW, RS = OW * SC__TW;
  for (size_t k = 0; k < K; k++) {
    const float *xk = x + k * npos * SC__TW, *gk = g + k * (npos / 4) * SC__TW;
    const float *ak = pa + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      const float *top = xk + (y & ~(size_t)1) * RS; /* the windows' first row */
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          size_t e0 = 2 * wc * SC__TW + 16 * (size_t)h; /* the window's left column */
          __m512 av = _mm512_loadu_ps(ak + ew), dv = _mm512_loadu_ps(gk + ew);
          __mmask16 t0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0), av, _CMP_EQ_OQ);
          __mmask16 t1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0 + SC__TW), av, _CMP_EQ_OQ);
          const float *r = xk + y * RS + e0;
          __m512 x0 = _mm512_loadu_ps(r), x1 = _mm512_loadu_ps(r + SC__TW);
          __mmask16 h0, h1; /* the hits of this row's two positions */
          if (y % 2 == 0) {
            h0 = t0;
            h1 = t1 & (__mmask16)~t0;
          } else {
            __mmask16 taken = t0 | t1;
            __mmask16 b0 = _mm512_cmp_ps_mask(x0, av, _CMP_EQ_OQ);
            h0 = b0 & (__mmask16)~taken;
            h1 = _mm512_cmp_ps_mask(x1, av, _CMP_EQ_OQ) & (__mmask16) ~(taken | b0);
          }
          __m512 v0 = _mm512_maskz_mov_ps(h0, dv), v1 = _mm512_maskz_mov_ps(h1, dv);
          if (relu) {
            v0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x0, zero, _CMP_LE_OQ), v0, zero);
            v1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x1, zero, _CMP_LE_OQ), v1, zero);
          }
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* A conv's forward with the 2 x 2 max-pooling layer above it folded in (bf_on's forward, its
 * epilogue, then this on each pair of output rows, which the GEMM left in a 2-row scratch s2: K
 * channels x 2 rows x 2 PW positions of SC__TW lanes): the windows [w0, w1) of pooled row q of
 * pa (K x PH x PW) as vec_pool_fwd computes them (m = x0, then m = x > m ? x : m over the window
 * in row-major order; VMAXPS(x, m) is that select), and the window's hits: per window and lane
 * a byte (SC__POOL_HITS: 16 bytes per 16 lanes), the window's position (0-3, row-major) whose
 * value is the first equal to the maximum (NaN equals nothing), 4 where none is or where, with
 * relu, the maximum is <= 0 (its relu pullback is 0). The conv's output is then never stored
 * whole (442 KB a tile in LeNet5), the pool's forward pass is skipped and its pullback reads the
 * hits (sc__bf16_dz_pool_hits_native): the same bits. The hits are made by masked moves in
 * vector registers (until session 36 four 16-bit masks per window, made in general registers);
 * with relu since session 38 in 16-bit lanes, a window's 32 lanes at once
 * (sc__bf16_pool_hits32: LeNet5 bf16's conv1 forward 37.4 -> 33.5 ms an epoch, conv2's 38.8 ->
 * 37.7, Zen 5, 1 thread, 2 alternating pairs; the same bits).
 * With relu the GEMM's epilogue adds the bias alone (sc__bf16_ep's relu and round 0: s2 holds
 * the sums plus the bias) and this relu's and rounds the window's maximum M only: r =
 * round(relu(M)), both non-decreasing, so r is the maximum of the relu'd rounded values (and its
 * bits: no sum is -0, a sum starting from +0); position j is then a hit where x_j >= lo, the least
 * float rounding to r (r's bits - 0x8000, + 1 where r's last bf16 bit is odd: ties to even; at
 * least FLT_MIN, VCVTNEPS2BF16 taking denormals to 0; a NaN where r is one, which no compare
 * passes), which are the positions whose rounded value equals r: the same hits. Both changes
 * (session 36, Zen 5, 1 thread, Fashion-MNIST): LeNet5 bf16's conv1 forward 45.7 -> 39.3 ms an
 * epoch, conv2's 43.0 -> 40.7; one tile of conv1 alone, operands hot: 18.9 -> 16.0 us. */
#define SC__POOL_HITS(k, PH, q, PW, wc, h) /* the window's 16 lanes' bytes */                      \
  (((((k) * (PH) + (q)) * (PW) + (wc)) * (SC__TW / 16) + (size_t)(h)) * 16)
/* one window's 16 lanes (h) of sc__bf16_pool_hits_native in float lanes */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits16(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW, size_t wc,
                     int h, int relu) {
  const __m512 zero = _mm512_setzero_ps(), fmin = _mm512_set1_ps(FLT_MIN);
  const __m512i half = _mm512_set1_epi32(0x8000), one = _mm512_set1_epi32(1);
  const __m512i none = _mm512_set1_epi32(4), p3 = _mm512_set1_epi32(3);
  const __m512i p2 = _mm512_set1_epi32(2), p0 = _mm512_setzero_si512();
  size_t e = 2 * wc * SC__TW + 16 * (size_t)h;
  __m512 x0 = _mm512_loadu_ps(r0 + e), x1 = _mm512_loadu_ps(r0 + e + SC__TW);
  __m512 x2 = _mm512_loadu_ps(r1 + e), x3 = _mm512_loadu_ps(r1 + e + SC__TW);
  __m512 m = _mm512_max_ps(x3, _mm512_max_ps(x2, _mm512_max_ps(x1, x0)));
  __mmask16 t0, t1, t2, t3; /* the positions equal to the maximum (rounded) */
  if (relu) {
    __m512i rb = _mm512_slli_epi32(
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_max_ps(zero, m))), 16);
    m = _mm512_castsi512_ps(rb);
    __m512i lb =
        _mm512_ternarylogic_epi32(_mm512_sub_epi32(rb, half), _mm512_srli_epi32(rb, 16), one, 0xF8);
    __m512 lo = _mm512_max_ps(fmin, _mm512_castsi512_ps(lb)); /* lb: (rb - half) | odd */
    __mmask16 live = _mm512_cmp_ps_mask(m, zero, _CMP_NLE_UQ);
    t0 = _mm512_mask_cmp_ps_mask(live, x0, lo, _CMP_GE_OQ);
    t1 = _mm512_mask_cmp_ps_mask(live, x1, lo, _CMP_GE_OQ);
    t2 = _mm512_mask_cmp_ps_mask(live, x2, lo, _CMP_GE_OQ);
    t3 = _mm512_mask_cmp_ps_mask(live, x3, lo, _CMP_GE_OQ);
  } else {
    t0 = _mm512_cmp_ps_mask(x0, m, _CMP_EQ_OQ), t1 = _mm512_cmp_ps_mask(x1, m, _CMP_EQ_OQ);
    t2 = _mm512_cmp_ps_mask(x2, m, _CMP_EQ_OQ), t3 = _mm512_cmp_ps_mask(x3, m, _CMP_EQ_OQ);
  }
  __m512i ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(none, t3, p3), t2, p2);
  ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(ix, t1, one), t0, p0);
  _mm512_storeu_ps(pa + ((k * PH + q) * PW + wc) * SC__TW + 16 * (size_t)h, m);
  _mm_storeu_si128((__m128i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, h)),
                   _mm512_cvtepi32_epi8(ix));
}
/* with relu, a window's 32 lanes at once in 16-bit lanes: each position's sums rounded
 * (VCVTNE2PS2BF16), r = the signed 16-bit maximum of the four and 0 (a bf16 value >= 0 orders as
 * its bits, a negative one below every such: the max is round(relu(max)), rounding being
 * non-decreasing), the hits the first position whose rounded sum equals r where r > 0; the
 * same bits as sc__bf16_pool_hits16 (the rounded values equal to r are those >= its least
 * float). A NaN sum (a positive NaN anywhere makes r one, a negative one counts at position 0)
 * takes that window to the float lanes, whose compares give vec_pool_fwd's result */
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits32(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW,
                     size_t wc) {
  const __m512i z = _mm512_setzero_si512(), none = _mm512_set1_epi16(4);
  size_t e = 2 * wc * SC__TW;
  const float *s[4] = {r0 + e, r0 + e + SC__TW, r1 + e, r1 + e + SC__TW};
  __m512i R[4];
  for (int j = 0; j < 4; j++)
    R[j] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s[j] + 16), _mm512_loadu_ps(s[j]));
  __m512i r = _mm512_max_epi16(_mm512_max_epi16(R[0], R[1]), _mm512_max_epi16(R[2], R[3]));
  r = _mm512_max_epi16(r, z);
  if (_mm512_cmpgt_epi16_mask(r, _mm512_set1_epi16(0x7f80)) |
      _mm512_cmpgt_epu16_mask(R[0], _mm512_set1_epi16((short)0xff80))) {
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 0, 1);
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 1, 1);
    return;
  }
  __mmask32 live = _mm512_cmpgt_epi16_mask(r, z);
  __m512i ix = _mm512_mask_mov_epi16(none, _mm512_mask_cmpeq_epi16_mask(live, R[3], r),
                                     _mm512_set1_epi16(3));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[2], r), _mm512_set1_epi16(2));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[1], r), _mm512_set1_epi16(1));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[0], r), z);
  float *pq = pa + ((k * PH + q) * PW + wc) * SC__TW;
  _mm512_storeu_si512(pq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(r)), 16));
  _mm512_storeu_si512(
      pq + 16, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1)), 16));
  _mm256_storeu_si256((__m256i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, 0)),
                      _mm512_cvtepi16_epi8(ix));
}
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits_body(float *restrict pa, uint8_t *restrict hits, const float *restrict s2,
                        size_t K, size_t q, size_t PH, size_t PW, size_t w0, size_t w1, int relu) {
  size_t RS = 2 * PW * SC__TW; /* a row of s2 */
  for (size_t k = 0; k < K; k++) {
    const float *r0 = s2 + k * 2 * RS, *r1 = r0 + RS;
    for (size_t wc = w0; wc < w1; wc++) {
      if (relu && SC__TW == 32) {
        sc__bf16_pool_hits32(pa, hits, r0, r1, k, q, PH, PW, wc);
        continue;
      }
      for (int h = 0; h < SC__TW / 16; h++)
        sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, h, relu);
    }
  }
}
/* s2 as the GEMM left it: with relu its sums plus the bias, else rounded (the whole epilogue) */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
sc__bf16_pool_hits_native(float *restrict pa, uint8_t *restrict hits, const float *restrict s2,
                          size_t K, size_t q, size_t PH, size_t PW, size_t w0, size_t w1,
                          int relu) {
  if (relu)
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 1);
  else
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 0);
}
/* sc__bf16_dz_pool_native's pullback with the window's hits read from the bytes of
 * sc__bf16_pool_hits_native (relu folded in there): the same adds in the same order, so the same
 * bits, without reading the conv's output and the pool's */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_pool_hits_native(uint32_t *restrict dzp, float *restrict dzf, const float *restrict g,
                             const uint8_t *restrict hits, float *restrict bl, size_t K, size_t OH,
                             size_t OW) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, PH = OH / 2, npos = OH * OW;
  for (size_t k = 0; k < K; k++) {
    const float *gk = g + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      __m512i j0 = _mm512_set1_epi32(y % 2 ? 2 : 0), j1 = _mm512_set1_epi32(y % 2 ? 3 : 1);
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          __m512i ix = _mm512_cvtepu8_epi32(_mm_loadu_si128(
              (const __m128i *)(const void *)(hits + SC__POOL_HITS(k, PH, y / 2, PW, wc, h))));
          __m512 dv = _mm512_loadu_ps(gk + ew);
          __m512 v0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j0), dv);
          __m512 v1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j1), dv);
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* W's 16 (lm) floats at a and at b (NULL: zeros) as pairs (a[k], b[k]): their upper halves, or
 * with rnd the floats rounded first (VCVTNEPS2BF16, the bits of sc__bf16_round_native) */
__attribute__((target("avx512f,avx512vl,avx512bf16"), always_inline)) static inline __m512i
sc__bf16_wd_pairs(const float *a, const float *b, __mmask16 lm, int rnd) {
  if (rnd) {
    __m512i x = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, a)));
    if (!b) return x;
    __m512i y = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, b)));
    return _mm512_or_si512(x, _mm512_slli_epi32(y, 16));
  }
  __m512i x = _mm512_srli_epi32(_mm512_maskz_loadu_epi32(lm, a), 16);
  if (!b) return x;
  __m512i y = _mm512_maskz_loadu_epi32(lm, b);
  return _mm512_or_si512(x, _mm512_and_si512(y, _mm512_set1_epi32((int)0xffff0000u)));
}
/* a dense layer's rows [o0, o1) of W (O x I floats, not rounded) as the forward's pairs along
 * the inputs, wf[o][k] = (W[o][2k], W[o][2k + 1]) rounded (VCVTNEPS2BF16; an odd I's last pair
 * with 0): the bits of rounding W and pairing its upper halves (sc__bf16_params_rows) */
__attribute__((target("avx512f,avx512vl,avx512bf16"))) static void
sc__bf16_wf_native(uint32_t *restrict wf, const float *restrict W, size_t I, size_t o0, size_t o1) {
  size_t I2 = (I + 1) / 2;
  for (size_t o = o0; o < o1; o++)
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, W + o * I + i));
      _mm256_mask_storeu_epi32(wf + o * I2 + i / 2, (__mmask8)((1u << ((ib + 1) / 2)) - 1u), v);
    }
}
/* wd[i][m] = (W[2m][i], W[2m + 1][i]) for the pairs m in [m0, m1) and every input i < I: the
 * transposed pairs of sc__bf16_params_rows, W holding bf16 values (the upper halves of their
 * bits taken as they are; a missing odd row 2m + 1 = O gives 0), or with rnd any floats, rounded
 * as they are loaded. Blocks of 8 pairs (16 rows) x 16 inputs: 8 vectors of pairs along i,
 * transposed in registers into 16 rows of 8 pairs. The same bits as the scalar loop, which took 5
 * of the 10 ms that LeNet5's bf16 weights cost over 20,000 images (1 thread, Zen 4) */
__attribute__((target("avx512f,avx512vl,avx512bf16"))) static void
sc__bf16_wd_native(uint32_t *restrict wd, const float *restrict W, size_t O, size_t I, size_t O2,
                   size_t m0, size_t m1, int rnd) {
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (size_t m = m0; m < m1; m += 8) {
    size_t mb = m1 - m < 8 ? m1 - m : 8;
    __mmask8 sm = (__mmask8)((1u << mb) - 1u);
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m512i P[8];
      for (size_t j = 0; j < 8; j++) {
        size_t r = 2 * (m + j);
        if (j >= mb) {
          P[j] = _mm512_setzero_si512();
          continue;
        }
        P[j] =
            rnd ? sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 1)
                : sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 0);
      }
      /* 128-bit lane L of U[a] holds P0..3 at input 4L + a, of V[a] P4..7 */
      __m512i T[8], U[4], V[4];
      for (int q = 0; q < 4; q++) {
        T[2 * q] = _mm512_unpacklo_epi32(P[2 * q], P[2 * q + 1]);
        T[2 * q + 1] = _mm512_unpackhi_epi32(P[2 * q], P[2 * q + 1]);
      }
      U[0] = _mm512_unpacklo_epi64(T[0], T[2]);
      U[1] = _mm512_unpackhi_epi64(T[0], T[2]);
      U[2] = _mm512_unpacklo_epi64(T[1], T[3]);
      U[3] = _mm512_unpackhi_epi64(T[1], T[3]);
      V[0] = _mm512_unpacklo_epi64(T[4], T[6]);
      V[1] = _mm512_unpackhi_epi64(T[4], T[6]);
      V[2] = _mm512_unpacklo_epi64(T[5], T[7]);
      V[3] = _mm512_unpackhi_epi64(T[5], T[7]);
      for (size_t a = 0; a < 4; a++) { /* inputs a, 4 + a (lo) and 8 + a, 12 + a (hi) */
        __m512i x = _mm512_permutex2var_epi64(U[a], lo, V[a]);
        __m512i y = _mm512_permutex2var_epi64(U[a], hi, V[a]);
        __m256i o[4] = {_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1),
                        _mm512_castsi512_si256(y), _mm512_extracti64x4_epi64(y, 1)};
        for (size_t h = 0; h < 4; h++)
          if (a + 4 * h < ib) _mm256_mask_storeu_epi32(wd + (i + a + 4 * h) * O2 + m, sm, o[h]);
      }
    }
  }
}
#ifdef SC__BF16_POP_OPTIONS
#pragma GCC pop_options
#undef SC__BF16_POP_OPTIONS
#endif
#endif

/* ---- the AMX-BF16 GEMM (Intel: 8 tile registers of up to 16 rows x 64 bytes, each tile's
 * shape set by LDTILECFG; TDPBF16PS C += A B with A rows x kc pairs, B kc x cols pairs, C rows x
 * cols floats). The operand layouts are ours already: a row of A holds pairs along k, a row of
 * B holds the pairs of k for 16 columns (Intel's "VNNI" layout of B). Blocks of 16 x 32 of C in
 * two tiles (tmm0, 1), k in steps of 16 pairs: A in tmm2, B in tmm3 and 4; the last k-step of
 * fewer than 16 pairs in tmm5 (A), tmm6 and 7 (B). The tiles are configured to the block's own
 * shape (rows of C at M's edge, columns at N's, pairs at K's), so an edge is read and written in
 * place, never through a padded copy: measured on an Intel Xeon with AMX (session 17,
 * bench/bf16_gemm.c), a zero-padded copy before a tile load made LeNet5's GEMMs 2.5 to 10 times
 * slower than the same work in whole tiles. A call loads a configuration for each block shape
 * it meets (at most four: the inner blocks, M's edge, N's edge, the corner) and releases the
 * tiles at its end (the tile state is per thread; LDTILECFG + TILERELEASE cost about 120 ns
 * there). Intel's pseudocode of TDPBF16PS (the intrinsics guide) adds the two products of a
 * pair one after the other, the even element first, each step a float FMA with denormals read
 * as and flushed to zero, round to nearest even; the SDM's newer text accumulates the even and
 * odd products apart and adds them at the end. The tests compare the kernel with the double
 * reference on the same operands (tight tolerance), not bit for bit. The body is written once
 * over tile operations (OPS##_LOAD etc.) and compiled twice: with the AMX instructions
 * (sc__bf16_gemm_amx) and with a portable model of the tiles (sc__bf16_gemm_amx_model, the
 * intrinsics guide's order, the shapes checked as TDPBF16PS checks them) that runs on any CPU,
 * so the blocking, the edges and the strides are tested where AMX is not. */
typedef struct {
  uint8_t palette, start_row, reserved0[14];
  uint16_t colsb[8], reserved1[8];
  uint8_t rows[8], reserved2[8];
} sc__amx_cfg; /* LDTILECFG's 64 bytes */
typedef struct {
  uint32_t t[8][16][16];
  unsigned rows[8], cols[8]; /* the configured shape (cols in 32-bit words) */
} sc__amx_tiles;             /* the portable model's tile registers */
/* the configuration of a block of mr rows of C, nc0 + nc1 columns (nc1 = 0: one tile), kf whole
 * 16-pair steps (0 or 1: are there any) and a last step of kr pairs; unused tiles 0 x 0 */
static inline void sc__amx_setcfg(sc__amx_cfg *c, unsigned mr, unsigned nc0, unsigned nc1,
                                  unsigned kf, unsigned kr) {
  memset(c, 0, sizeof *c);
  c->palette = 1;
  const unsigned r[8] = {mr,          nc1 ? mr : 0, kf ? mr : 0, kf ? 16 : 0, kf && nc1 ? 16 : 0,
                         kr ? mr : 0, kr,           nc1 ? kr : 0};
  const unsigned w[8] = {nc0,          nc1, kf ? 16 : 0,  kf ? nc0 : 0,
                         kf ? nc1 : 0, kr,  kr ? nc0 : 0, kr ? nc1 : 0};
  for (int t = 0; t < 8; t++)
    if (r[t] && w[t]) c->rows[t] = (uint8_t)r[t], c->colsb[t] = (uint16_t)(4 * w[t]);
}
/* the model: LDTILECFG (the shapes; every tile zeroed), TILELOADD / TILESTORED (the configured
 * rows and columns; a load zeroes the rest), TILEZERO and TDPBF16PS; a shape TDPBF16PS would
 * refuse (#UD) makes C all NaN, so that a test fails */
static inline void sc__amx_m_cfg(sc__amx_tiles *T, const sc__amx_cfg *c) {
  memset(T->t, 0, sizeof T->t);
  for (int t = 0; t < 8; t++) T->rows[t] = c->rows[t], T->cols[t] = c->colsb[t] / 4u;
}
static inline void sc__amx_m_load(sc__amx_tiles *T, int t, const void *p, size_t stride) {
  memset(T->t[t], 0, sizeof T->t[t]);
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy(T->t[t][r], (const char *)p + (size_t)r * stride, 4 * T->cols[t]);
}
static inline void sc__amx_m_store(const sc__amx_tiles *T, int t, void *p, size_t stride) {
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy((char *)p + (size_t)r * stride, T->t[t][r], 4 * T->cols[t]);
}
static inline void sc__amx_m_dp(sc__amx_tiles *T, int c, int a, int b) {
  if (!T->rows[c] || T->rows[a] != T->rows[c] || T->cols[b] != T->cols[c] ||
      T->rows[b] != T->cols[a] || !T->cols[a]) {
    for (int m = 0; m < 16; m++)
      for (int n = 0; n < 16; n++) T->t[c][m][n] = 0x7FC00000u;
    return;
  }
  for (unsigned m = 0; m < T->rows[c]; m++)
    for (unsigned n = 0; n < T->cols[c]; n++) {
      float acc = sc__ftz(sc__fof(T->t[c][m][n]));
      for (unsigned k = 0; k < T->cols[a]; k++) {
        uint32_t x = T->t[a][m][k], y = T->t[b][k][n];
        acc = sc__bf16_fma(acc, sc__bf16_lo_f(x), sc__bf16_lo_f(y));
        acc = sc__bf16_fma(acc, sc__bf16_hi_f(x), sc__bf16_hi_f(y));
      }
      T->t[c][m][n] = sc__fbits(acc);
    }
}
/* the two bodies' common parts: a block of C at (m0, n0), its shape and (when it changes) its
 * configuration; and its k-steps, C's tiles += A's rows at a0 times B's columns at b0 */
#define SC__AMX_BLOCK_CFG(OPS)                                                                     \
  size_t mr = M - m0 < 16 ? M - m0 : 16, nc0 = N - n0 < 16 ? N - n0 : 16;                          \
  size_t nc1 = N - n0 <= 16 ? 0 : N - n0 - 16 < 16 ? N - n0 - 16 : 16;                             \
  size_t key = mr | nc0 << 5 | nc1 << 10;                                                          \
  if (key != cur) { /* a block of another shape: its configuration */                              \
    sc__amx_setcfg(&cfg, (unsigned)mr, (unsigned)nc0, (unsigned)nc1, K16 > 0, (unsigned)kr);       \
    __asm__ volatile("" : : "r"(&cfg) : "memory"); /* cfg in memory before LDTILECFG */            \
    OPS##_CFG(&cfg);                                                                               \
    cur = key;                                                                                     \
  }
#define SC__AMX_KSTEPS(OPS, a0, b0)                                                                \
  for (size_t k0 = 0; k0 < K16; k0 += 16) {                                                        \
    OPS##_LOAD(2, (a0) + k0, lda * 4);                                                             \
    OPS##_LOAD(3, (b0) + k0 * ldb, ldb * 4);                                                       \
    OPS##_DP(0, 2, 3);                                                                             \
    if (nc1) {                                                                                     \
      OPS##_LOAD(4, (b0) + k0 * ldb + 16, ldb * 4);                                                \
      OPS##_DP(1, 2, 4);                                                                           \
    }                                                                                              \
  }                                                                                                \
  if (kr) { /* the last k-step, of fewer than 16 pairs */                                          \
    OPS##_LOAD(5, (a0) + K16, lda * 4);                                                            \
    OPS##_LOAD(6, (b0) + K16 * ldb, ldb * 4);                                                      \
    OPS##_DP(0, 5, 6);                                                                             \
    if (nc1) {                                                                                     \
      OPS##_LOAD(7, (b0) + K16 * ldb + 16, ldb * 4);                                               \
      OPS##_DP(1, 5, 7);                                                                           \
    }                                                                                              \
  }
#define SC__AMX_GEMM_BODY(OPS)                                                                     \
  {                                                                                                \
    sc__amx_cfg cfg;                                                                               \
    size_t K16 = K2 / 16 * 16, kr = K2 - K16, cur = SIZE_MAX;                                      \
    for (size_t g_ = 0; g_ < G; g_++) { /* the groups: C and A at their offsets */                 \
      float *const C = C0 + (co.off ? co.off[g_ * co.step] * co.scale : g_ * co.stride);           \
      const uint32_t *const A = A0 + (ao.off ? ao.off[g_ * ao.step] * ao.scale : g_ * ao.stride);  \
      for (size_t m0 = 0; m0 < M; m0 += 16)                                                        \
        for (size_t n0 = 0; n0 < N; n0 += 32) {                                                    \
          SC__AMX_BLOCK_CFG(OPS)                                                                   \
          float *c0 = C + m0 * ldc + n0;                                                           \
          if (acc) {                                                                               \
            OPS##_LOAD(0, c0, ldc * 4);                                                            \
            if (nc1) OPS##_LOAD(1, c0 + 16, ldc * 4);                                              \
          } else {                                                                                 \
            OPS##_ZERO(0);                                                                         \
            if (nc1) OPS##_ZERO(1);                                                                \
          }                                                                                        \
          SC__AMX_KSTEPS(OPS, A + m0 * lda, B + n0)                                                \
          OPS##_STORE(0, c0, ldc * 4);                                                             \
          if (nc1) OPS##_STORE(1, c0 + 16, ldc * 4);                                               \
        }                                                                                          \
    }                                                                                              \
    if (cur != SIZE_MAX) OPS##_RELEASE();                                                          \
    __asm__ volatile("" ::: "memory"); /* the tile stores wrote C */                               \
  }

/* the portable model of the AMX GEMM (SC_BF16_KERNELS=amx-model: any CPU, slow) */
#define SC__TM_CFG(c) sc__amx_m_cfg(&T, c)
#define SC__TM_ZERO(i) memset(T.t[i], 0, sizeof T.t[i])
#define SC__TM_LOAD(t, p, s) sc__amx_m_load(&T, t, p, s)
#define SC__TM_STORE(t, p, s) sc__amx_m_store(&T, t, p, s)
#define SC__TM_DP(c, a, b) sc__amx_m_dp(&T, c, a, b)
#define SC__TM_RELEASE() (void)0
/* the grouped form (sc__bf16_gemm_grp_fn): one configuration for all the groups */
static void sc__bf16_gemm_amx_model_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                        size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                        size_t M, size_t N, size_t K2, size_t G, int acc) {
  static _Thread_local sc__amx_tiles T; /* 8 KB: off the stack */
  SC__AMX_GEMM_BODY(SC__TM)
}
/* the summed grouped form (sc__bf16_gemm_sumg_fn): per block of C the groups one after the
 * other into the same accumulator tiles, stored once */
#define SC__AMX_SUMG_BODY(OPS)                                                                     \
  {                                                                                                \
    sc__amx_cfg cfg;                                                                               \
    size_t K16 = K2 / 16 * 16, kr = K2 - K16, cur = SIZE_MAX;                                      \
    for (size_t m0 = 0; m0 < M; m0 += 16)                                                          \
      for (size_t n0 = 0; n0 < N; n0 += 32) {                                                      \
        SC__AMX_BLOCK_CFG(OPS)                                                                     \
        OPS##_ZERO(0);                                                                             \
        if (nc1) OPS##_ZERO(1);                                                                    \
        for (size_t g = 0; g < G; g++) {                                                           \
          SC__AMX_KSTEPS(                                                                          \
              OPS, A0 + (ao.off ? ao.off[g * ao.step] * ao.scale : g * ao.stride) + m0 * lda,      \
              B0 + (bo.off ? bo.off[g * bo.step] * bo.scale : g * bo.stride) + n0)                 \
        }                                                                                          \
        float *c0 = C + m0 * ldc + n0;                                                             \
        OPS##_STORE(0, c0, ldc * 4);                                                               \
        if (nc1) OPS##_STORE(1, c0 + 16, ldc * 4);                                                 \
      }                                                                                            \
    if (cur != SIZE_MAX) OPS##_RELEASE();                                                          \
    __asm__ volatile("" ::: "memory");                                                             \
  }
static void sc__bf16_gemm_amx_model_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                         sc__grp_off ao, const uint32_t *B0, size_t ldb,
                                         sc__grp_off bo, size_t M, size_t N, size_t K2, size_t G) {
  static _Thread_local sc__amx_tiles T;
  SC__AMX_SUMG_BODY(SC__TM)
}
static void sc__bf16_gemm_amx_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                    const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                    int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_model_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}

#if defined(__x86_64__) && defined(__linux__) &&                                                   \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                              \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define SC__HAVE_AMX 1
#include <sys/syscall.h>
/* the AMX GEMM itself (SC_BF16_KERNELS=amx, on a CPU with AMX-BF16); written from Intel's
 * documentation, checked through the model above and run on an Intel Emerald Rapids (session 17) */
#define SC__TH_CFG(c) _tile_loadconfig(c)
#define SC__TH_ZERO(t) _tile_zero(t)
#define SC__TH_LOAD(t, p, s) _tile_loadd(t, p, (long)(s))
#define SC__TH_STORE(t, p, s) _tile_stored(t, p, (long)(s))
#define SC__TH_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define SC__TH_RELEASE() _tile_release()
__attribute__((target("amx-tile,amx-bf16"))) static void
sc__bf16_gemm_amx_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0, size_t lda,
                      sc__grp_off ao, const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                      size_t G, int acc) {
  SC__AMX_GEMM_BODY(SC__TH)
}
__attribute__((target("amx-tile,amx-bf16"))) static void
sc__bf16_gemm_amx_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda, sc__grp_off ao,
                       const uint32_t *B0, size_t ldb, sc__grp_off bo, size_t M, size_t N,
                       size_t K2, size_t G) {
  SC__AMX_SUMG_BODY(SC__TH)
}
static void sc__bf16_gemm_amx(float *C, size_t ldc, const uint32_t *A, size_t lda,
                              const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                              int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}

/* AMX-BF16 usable here: the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7 subleaf 0, EDX bits 24
 * and 22), the OS enables the tile state (XCR0 bits 17 and 18), and Linux grants this process
 * the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; asking again is
 * harmless) */
static int sc__cpu_amx(void) {
  unsigned r[4];
  sc__cpuid(0, 0, r);
  if (r[0] < 7) return 0;
  sc__cpuid(1, 0, r);
  if (!((r[2] >> 27) & 1u)) return 0; /* OSXSAVE: xgetbv usable */
  sc__cpuid(7, 0, r);
  if (!((r[3] >> 24) & 1u) || !((r[3] >> 22) & 1u)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  if ((lo & (3u << 17)) != (3u << 17)) return 0;
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}
#endif
#undef SC__AMX_GEMM_BODY
#undef SC__AMX_SUMG_BODY
#undef SC__AMX_BLOCK_CFG
#undef SC__AMX_KSTEPS

/* AVX512_BF16 usable here: the CPU has it (CPUID leaf 7 subleaf 1, EAX bit 5) and the OS
 * saves the AVX-512 state (what __builtin_cpu_supports("avx512f") checks) */
static int sc__cpu_bf16(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned r[4];
  __builtin_cpu_init(); /* (every CPU with AVX512_BF16 has BW and VL, which its kernels use) */
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl"))
    return 0;
  sc__cpuid(0, 0, r);
  if (r[0] < 7) return 0;
  sc__cpuid(7, 1, r);
  return (r[0] >> 5) & 1u;
#else
  return 0;
#endif
}

/* SC_PRECISION_BF16 runs a conv layer's pullback (dW, dx) on the bf16 GEMM only from this many
 * output channels on (SC_BF16_LAYERS=auto, the default; =all: every conv layer), unless its dW
 * has the dot form (sc__bf16_nt_fn: the AVX512_BF16 kernels and their model, stride 1); its
 * forward always. A conv layer is a GEMM on its taps packed per output row (im2col): each
 * packed pair feeds 2 K multiply-adds, so the packing costs the more, the fewer channels K, and
 * dW's packing (a transpose) the most. Measured on an AMD Zen 4 with AVX512_BF16 (LeNet5,
 * Fashion-MNIST, 12,800 images, batch 64, 1 thread; bench/RESULTS.md, session 16): the first
 * conv (K = 6) took 26.3 ms forward and 35.4 ms backward in float on rounded operands, 21.9
 * and 46.5 ms on the im2col GEMM, and 26.5 ms backward in the dot form. Below K, without the
 * dot form, the float kernels run the pullback, on the same bf16 operands (products exact in
 * float, float sums: the emulation's arithmetic). */
#define SC__BF16_MIN_K 8

/* the bf16 kernels' buffers: the packed dense and conv weights (both pairings) and each
 * slice's packed tile operands (the largest of a layer's forward, dW and dx needs) */
static sc_status sc__bf16_buffers(sc_workspace *ws, const char *fn) {
  const sc_chain *c = ws->chain;
  size_t L = c->nlayers, words = 0, scr = 0;
  int ok = 1;
  size_t *off = malloc((L ? L : 1) * (sizeof *off + 1)); /* and the bf_on flags after them */
  if (!off) return sc__fail(SC_ERR_NOMEM, fn, "out of memory for the bf16 weight offsets");
  for (size_t l = 0; l < L; l++) {
    const sc__lplan *P = &c->L[l];
    off[l] = SIZE_MAX;
    int conv = P->spec.kind == SC_LAYER_CONV2D;
    if (P->spec.kind != SC_LAYER_DENSE && !conv) continue;
    /* a conv layer is a dense one (K outputs, R inputs) over the lanes of an output row */
    size_t I = conv ? P->R : P->in, O = conv ? P->oc : P->out, I2 = (I + 1) / 2, O2 = (O + 1) / 2;
    size_t n = conv ? sc__mul(P->ow, SC__TW, &ok) : SC__TW;
    off[l] = words;
    words = sc__add(words, sc__add(sc__mul(O, I2, &ok), sc__mul(I, O2, &ok), &ok), &ok);
    if (conv) /* and the direct forward's pairs of neighbouring taps: at most R per channel */
      words = sc__add(words, sc__mul(O, I, &ok), &ok);
    if (conv) /* AMX: the dx's permuted rows (I O2) and the channel-pair weights (at most O I) */
      words = sc__add(words, sc__add(sc__mul(I, O2, &ok), sc__mul(O, I, &ok), &ok), &ok);
    size_t f = sc__mul(I2, n, &ok);
    if (conv) { /* the direct forward's column pairs of the input tile, and its single columns */
      size_t q = sc__mul(sc__mul(2 * P->ic, P->hp, &ok), sc__mul(P->wp, SC__TW, &ok), &ok);
      if (q > f) f = q;
    }
    size_t b = sc__add(sc__mul(O, n / 2, &ok), sc__mul(n / 2, I, &ok), &ok);
    size_t d = sc__mul(O2, n, &ok);
    if (conv) d = sc__add(d, sc__mul(I, n, &ok), &ok); /* and the taps' float gradients */
    if (conv) { /* or dz's channel pairs over the whole tile (dx as a correlation) */
      size_t e = sc__mul(sc__mul(O2, P->oh, &ok), n, &ok);
      if (e > d) d = e;
    }
    if (conv) { /* dW^T (R x K floats), dz^T, the tile's lane pairs; or dz's pairs (dot form) */
      size_t xw = sc__mul(sc__mul(P->ic, P->hp, &ok), P->wp * (SC__TW / 2), &ok);
      size_t t = sc__add(sc__mul(I, O, &ok), sc__mul(n / 2, O, &ok), &ok);
      t = sc__add(t, xw, &ok);
      if (t > b) b = t;
      t = sc__add(sc__mul(sc__mul(O, P->oh, &ok), n / 2, &ok), xw, &ok);
      if (t > b) b = t;
      t = sc__add(t, sc__mul(I, O, &ok), &ok); /* dW^T, dz^T of the whole tile, lane pairs */
      if (t > b) b = t;
    }
    size_t m = f > b ? f : b;
    if (d > m) m = d;
    if (m > scr) scr = m;
  }
  scr = (scr + 15) & ~(size_t)15; /* each slice's area on its own cache lines */
  size_t tot = sc__mul(scr, ws->max_slices, &ok);
  if (!ok) {
    free(off);
    return sc__fail(SC_ERR_OVERFLOW, fn, "the bf16 buffers' size overflows size_t");
  }
  uint32_t *w = malloc((words ? words : 1) * sizeof *w);
  uint32_t *sb = malloc((tot ? tot : 1) * sizeof *sb);
  if (!w || !sb) {
    free(off);
    free(w);
    free(sb);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory for the bf16 buffers (%zu + %zu words)", words,
                    tot);
  }
  free(ws->bf_w);
  free(ws->bf_woff);
  free(ws->bf_scr);
  ws->bf_w = w;
  ws->bf_woff = off;
  ws->bf_on = (unsigned char *)(off + (L ? L : 1));
  memset(ws->bf_on, 0, L ? L : 1);
  ws->bf_scr = sb;
  ws->bf_scr_stride = scr;
  return SC_OK;
}

sc_status sc_workspace_set_precision(sc_workspace *ws, sc_precision precision) {
  SC__CHECK_NULL(ws);
  if (!sc_precision_name(precision))
    return SC__FAIL(SC_ERR_ARG,
                    "precision = %d is not SC_PRECISION_FP32, SC_PRECISION_BF16 or "
                    "SC_PRECISION_BF16_EMULATED",
                    (int)precision);
  int kind = 0, all_layers = 0;
  if (precision == SC_PRECISION_BF16) {
    /* SC_BF16_KERNELS=model: the portable model of the kernels, on any CPU (slow: for the
     * tests); =native: the AVX512_BF16 kernels; =amx: the AMX-BF16 GEMM; =amx-model: its
     * portable model (tests); unset: amx where the CPU has AMX-BF16, else native */
    const char *e = getenv("SC_BF16_KERNELS");
    if (e && *e && strcmp(e, "model") != 0 && strcmp(e, "native") != 0 && strcmp(e, "amx") != 0 &&
        strcmp(e, "amx-model") != 0)
      return SC__FAIL(SC_ERR_ARG,
                      "SC_BF16_KERNELS='%s' is not 'model', 'native', 'amx' or 'amx-model'", e);
    const char *lay = getenv("SC_BF16_LAYERS");
    if (lay && *lay && strcmp(lay, "auto") != 0 && strcmp(lay, "all") != 0)
      return SC__FAIL(SC_ERR_ARG, "SC_BF16_LAYERS='%s' is not 'auto' or 'all'", lay);
    all_layers = lay && !strcmp(lay, "all");
    const char *fold = getenv("SC_BF16_POOL_FOLD");
    if (fold && *fold && strcmp(fold, "0") != 0 && strcmp(fold, "1") != 0)
      return SC__FAIL(SC_ERR_ARG, "SC_BF16_POOL_FOLD='%s' is not '0' or '1'", fold);
    if (e && !strcmp(e, "model"))
      kind = SC__BF16K_MODEL;
    else if (e && !strcmp(e, "amx-model"))
      kind = SC__BF16K_AMX_MODEL;
    else if (e && !strcmp(e, "amx")) {
#ifdef SC__HAVE_AMX
      if (!sc__cpu_amx())
        return SC__FAIL(SC_ERR_UNSUPPORTED,
                        "SC_BF16_KERNELS=amx needs AMX-BF16 (Intel Sapphire Rapids or later) and "
                        "Linux's permission for the tile state, which this CPU or system does not "
                        "give; SC_PRECISION_BF16_EMULATED computes the same rounding with the "
                        "float kernels");
      kind = SC__BF16K_AMX;
#else
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "SC_BF16_KERNELS=amx: this build has no AMX kernels (they need x86-64 "
                      "Linux and GCC 11 or clang 12 or later); SC_PRECISION_BF16_EMULATED "
                      "computes the same rounding with the float kernels");
#endif
    }
#ifdef SC__HAVE_AMX
    else if ((!e || !*e) && sc__cpu_amx())
      kind = SC__BF16K_AMX; /* the default where the CPU has AMX-BF16 (bench/RESULTS.md, 17) */
#endif
    else if (!sc__cpu_bf16())
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "bf16 needs AVX512_BF16 (vdpbf16ps), which this CPU does not have; "
                      "SC_PRECISION_BF16_EMULATED computes the same rounding with the float "
                      "kernels");
#ifdef SC__HAVE_BF16_NATIVE
    else
      kind = SC__BF16K_NATIVE; /* the default where the CPU has AVX512_BF16 (or =native) */
#else
    else
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "this CPU has AVX512_BF16, but this build (compiler) has no bf16 kernels; "
                      "SC_PRECISION_BF16_EMULATED computes the same rounding with the float "
                      "kernels");
#endif
  }
  if (precision != SC_PRECISION_FP32 && !ws->bf_p) {
    size_t np = ws->chain->nparams ? ws->chain->nparams : 1;
    ws->bf_p = malloc(np * sizeof *ws->bf_p);
    if (!ws->bf_p)
      return SC__FAIL(SC_ERR_NOMEM, "out of memory for the bf16 copy of %zu parameters", np);
  }
  if (kind && !ws->bf_w) {
    sc_status st = sc__bf16_buffers(ws, __func__);
    if (st) return st;
  }
  if (kind) /* which layers the bf16 GEMM runs (SC__BF16_MIN_K) */
    for (size_t l = 0; l < ws->chain->nlayers; l++) {
      const sc__lplan *P = &ws->chain->L[l];
      /* a small conv's pullback: on the GEMM where its dot form is (its dW: few channels,
       * stride 1), else on the float kernels */
      int nt = (kind == SC__BF16K_MODEL || kind == SC__BF16K_NATIVE) && P->spec.sw == 1;
      int amx = kind == SC__BF16K_AMX || kind == SC__BF16K_AMX_MODEL;
      /* on AMX a small conv's forward too: a tile of 16 rows would hold its few channels */
      ws->bf_on[l] = (unsigned char)(P->spec.kind == SC_LAYER_DENSE                ? 3
                                     : P->spec.kind != SC_LAYER_CONV2D             ? 0
                                     : all_layers || nt || P->oc >= SC__BF16_MIN_K ? 3
                                     : amx                                         ? 0
                                                                                   : 1);
      /* and its forward on the input's column pairs in place (bit 4), without im2col */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && P->oc < SC__BF16_MIN_K) ws->bf_on[l] |= 4;
      /* on AMX a conv's dx is added into its input's tile in place, by the grouped GEMM */
      if (amx && P->spec.kind == SC_LAYER_CONV2D && P->spec.sw == 1 && (ws->bf_on[l] & 2))
        ws->bf_on[l] |= 8;
      /* and its forward on the input's channel pairs in place (the summed grouped form) */
      if (amx && P->spec.kind == SC_LAYER_CONV2D && P->spec.sw == 1 && (ws->bf_on[l] & 1))
        ws->bf_on[l] |= 16;
      /* on AVX512_BF16 (and its model) too where the input has an even number of channels
       * (an odd one would pair its last with zeros): no im2col. LeNet5's conv2 forward,
       * 20,000 images, 1 thread, Zen 4: 35.5 -> 30.3 ms (3 alternating runs) */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && (ws->bf_on[l] & 1) && !(ws->bf_on[l] & 4) &&
          P->ic % 2 == 0)
        ws->bf_on[l] |= 16;
      /* and its dx as a correlation (stride 1: the padded input is oh + kh - 1 rows) */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && (ws->bf_on[l] & 2) && P->spec.sh == 1 &&
          P->hp == P->oh + P->spec.kh - 1 && P->wp == P->ow + P->spec.kw - 1)
        ws->bf_on[l] |= 32;
    }
  ws->bf16k = kind;
  ws->bf_gemm = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model : sc__bf16_gemm_model;
  ws->bf_gemm_rows = kind == SC__BF16K_MODEL ? sc__bf16_gemm_model_rows : NULL;
  ws->bf_nt = kind == SC__BF16K_MODEL ? sc__bf16_nt_model : NULL;
  ws->bf_gemm_ep = NULL;
  ws->bf_dz_lanes = NULL;
  ws->bf_dz_pool = NULL;
  ws->bf_pool_hits = NULL;
  ws->bf_dz_pool_hits = NULL;
  ws->bf_dx_corr = kind == SC__BF16K_MODEL ? sc__bf16_dx_corr_model : NULL;
  ws->bf_gemm_grp = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model_grp : NULL;
  ws->bf_gemm_sumg = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model_sumg : NULL;
  ws->bf_round = NULL;
#ifdef SC__HAVE_BF16_NATIVE
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm_rows = sc__bf16_gemm_native_rows;
  if (kind == SC__BF16K_NATIVE) ws->bf_nt = sc__bf16_nt_native;
  ws->bf_dwt5 = kind == SC__BF16K_NATIVE ? sc__bf16_dwt5_native : NULL;
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm_ep = sc__bf16_gemm_native_ep;
  if (kind == SC__BF16K_NATIVE) ws->bf_dz_lanes = sc__bf16_dz_lanes_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_dz_pool = sc__bf16_dz_pool_native;
  const char *fold = getenv("SC_BF16_POOL_FOLD"); /* "0": the pool's own passes (checked above) */
  if (kind == SC__BF16K_NATIVE && !(fold && strcmp(fold, "0") == 0)) {
    ws->bf_pool_hits = sc__bf16_pool_hits_native;
    ws->bf_dz_pool_hits = sc__bf16_dz_pool_hits_native;
  }
  if (kind == SC__BF16K_NATIVE) ws->bf_dx_corr = sc__bf16_dx_corr_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm = sc__bf16_gemm_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_round = sc__bf16_round_native;
#endif
#ifdef SC__HAVE_AMX
  if (kind == SC__BF16K_AMX) ws->bf_gemm = sc__bf16_gemm_amx;
  if (kind == SC__BF16K_AMX) ws->bf_gemm_grp = sc__bf16_gemm_amx_grp;
  if (kind == SC__BF16K_AMX) ws->bf_gemm_sumg = sc__bf16_gemm_amx_sumg;
#ifdef SC__HAVE_BF16_NATIVE
  if (kind == SC__BF16K_AMX && sc__cpu_bf16()) ws->bf_round = sc__bf16_round_native;
#endif
#endif
  ws->prec = (int)precision;
  return SC_OK;
}

sc_status sc_workspace_precision(const sc_workspace *ws, sc_precision *precision) {
  SC__CHECK_NULL(ws);
  SC__CHECK_NULL(precision);
  *precision = (sc_precision)ws->prec;
  return SC_OK;
}

uint16_t sc_bf16_from_float(float x) { return sc__bf16_bits(x); }

float sc_float_from_bf16(uint16_t b) { return sc__fof((uint32_t)b << 16); }

/* ---------------------------------------------------------------- profiling */
sc_status sc_workspace_profile(sc_workspace *ws, int on) {
  SC__CHECK_NULL(ws);
  if (on != 0 && on != 1) return SC__FAIL(SC_ERR_ARG, "on = %d, must be 0 or 1", on);
  if (!on) {
    ws->prof = NULL;
    return SC_OK;
  }
  size_t per_line = SC__ALIGN / sizeof(sc__pcount);
  size_t stride = ((ws->chain->nlayers + 1) * SC__P_W + per_line - 1) / per_line * per_line;
  size_t n = ws->max_slices * stride;
  if (!ws->prof_mem) {
    ws->prof_mem = malloc((n + per_line) * sizeof *ws->prof_mem);
    if (!ws->prof_mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory for the profile counters");
    uintptr_t a = ((uintptr_t)ws->prof_mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
    ws->prof_base = (sc__pcount *)(void *)a;
    ws->prof_stride = stride;
  }
  for (size_t k = 0; k < n; k++) ws->prof_base[k] = 0;
  ws->prof = ws->prof_base;
  return SC_OK;
}

/* floating-point operations per sample of layer l, forward and backward (2 per multiply-add;
 * the backward pass of a weighted layer computes dW and, above layer 0, dx) */
static void sc__layer_flop(const sc_chain *c, size_t l, double *fwd, double *bwd) {
  const sc__lplan *P = &c->L[l];
  double mac = 0;
  if (P->spec.kind == SC_LAYER_DENSE) mac = (double)P->in * (double)P->out;
  if (P->spec.kind == SC_LAYER_CONV2D) mac = (double)P->R * (double)P->out;
  *fwd = 2 * mac;
  *bwd = 2 * mac * (l > 0 ? 2 : 1);
}

sc_status sc_workspace_profile_read(const sc_workspace *ws, sc_layer_profile *rows, size_t nrows) {
  SC__CHECK_NULL(ws);
  SC__CHECK_NULL(rows);
  const sc_chain *c = ws->chain;
  if (nrows < c->nlayers + 1)
    return SC__FAIL(SC_ERR_SHAPE, "nrows = %zu, needs the chain's %zu layers + 1", nrows,
                    c->nlayers);
  if (!ws->prof_mem)
    return SC__FAIL(SC_ERR_ARG, "profiling was never started on this workspace "
                                "(sc_workspace_profile(ws, 1))");
  memset(rows, 0, nrows * sizeof *rows);
  for (size_t l = 0; l <= c->nlayers; l++) {
    uint64_t v[SC__P_W] = {0};
    for (size_t sl = 0; sl < ws->max_slices; sl++) /* the slices' sets */
      for (int k = 0; k < SC__P_W; k++)
        v[k] += SC__PGET(ws->prof_base[sl * ws->prof_stride + l * SC__P_W + (size_t)k]);
    double ff = 0, bf = 0;
    if (l < c->nlayers) sc__layer_flop(c, l, &ff, &bf);
    rows[l].fwd_seconds = (double)v[SC__P_FNS] * 1e-9;
    rows[l].bwd_seconds = (double)v[SC__P_BNS] * 1e-9;
    rows[l].fwd_flop = ff * (double)v[SC__P_FN];
    rows[l].bwd_flop = bf * (double)v[SC__P_BN];
  }
  return SC_OK;
}

sc_status sc_profile_table(const sc_chain *chain, const sc_layer_profile *rows, size_t nrows,
                           char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(rows);
  if (!buf && cap) return SC__FAIL(SC_ERR_NULL, "argument 'buf' is NULL but cap = %zu", cap);
  if (nrows < chain->nlayers + 1)
    return SC__FAIL(SC_ERR_SHAPE, "nrows = %zu, needs the chain's %zu layers + 1", nrows,
                    chain->nlayers);
  double total = 0;
  for (size_t r = 0; r < nrows; r++) total += rows[r].fwd_seconds + rows[r].bwd_seconds;
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  sc__sprintf(&b, "%-5s %-22s %10s %8s %10s %8s %7s\n", "layer", "", "fwd ms", "GFLOP/s", "bwd ms",
              "GFLOP/s", "share");
  for (size_t r = 0; r < nrows; r++) {
    char name[64], idx[24] = "";
    if (r < chain->nlayers) snprintf(idx, sizeof idx, "%zu", r);
    if (r < chain->nlayers) {
      const sc_layer *sp = &chain->L[r].spec;
      int w = sp->kind == SC_LAYER_DENSE || sp->kind == SC_LAYER_CONV2D;
      snprintf(name, sizeof name, "%s%s%s", sc_layer_name(sp->kind), w ? " " : "",
               w ? sc_act_name(sp->act) : "");
    } else
      snprintf(name, sizeof name, "%s",
               r == chain->nlayers       ? "(batch, loss, reduce)"
               : r == chain->nlayers + 1 ? "(optimizer, guard)"
                                         : "(other)");
    const sc_layer_profile *q = &rows[r];
    double fg = q->fwd_seconds > 0 && q->fwd_flop > 0 ? q->fwd_flop / q->fwd_seconds * 1e-9 : 0;
    double bg = q->bwd_seconds > 0 && q->bwd_flop > 0 ? q->bwd_flop / q->bwd_seconds * 1e-9 : 0;
    char fgs[16] = "-", bgs[16] = "-";
    if (fg > 0) snprintf(fgs, sizeof fgs, "%.1f", fg);
    if (bg > 0) snprintf(bgs, sizeof bgs, "%.1f", bg);
    sc__sprintf(&b, "%-5s %-22s %10.2f %8s %10.2f %8s %6.1f%%\n", idx, name, q->fwd_seconds * 1e3,
                fgs, q->bwd_seconds * 1e3, bgs,
                total > 0 ? 100 * (q->fwd_seconds + q->bwd_seconds) / total : 0.0);
  }
  if (needed) *needed = b.len + 1;
  if (cap && b.len + 1 > cap) /* (a sizing call, cap = 0, is not an error) */
    return SC__FAIL(SC_ERR_NOMEM, "the table needs %zu bytes, the buffer has %zu", b.len + 1, cap);
  return SC_OK;
}

/* ---------------------------------------------------------------- shared checks */
static sc_status sc__compute_check(const char *fn, const sc_chain *c, const void *p, const void *x,
                                   size_t batch, const sc_workspace *ws) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!x) return sc__fail(SC_ERR_NULL, fn, "argument 'x' is NULL");
  if (!ws) return sc__fail(SC_ERR_NULL, fn, "argument 'ws' is NULL");
  if (ws->chain != c)
    return sc__fail(SC_ERR_ARG, fn, "the workspace was created for a different chain");
  if (batch == 0) return sc__fail(SC_ERR_BATCH, fn, "batch is 0");
  if (batch > ws->max_batch)
    return sc__fail(SC_ERR_BATCH, fn, "batch = %zu exceeds the workspace's max_batch = %zu", batch,
                    ws->max_batch);
  return SC_OK;
}

static sc_status sc__loss_check(const char *fn, const sc_chain *c, sc_loss loss,
                                const void *target) {
  if (!target) return sc__fail(SC_ERR_NULL, fn, "argument 'target' is NULL");
  if (loss != SC_LOSS_SQUARED && loss != SC_LOSS_ABSOLUTE && loss != SC_LOSS_LOGIT_CROSSENTROPY)
    return sc__fail(SC_ERR_ARG, fn, "unknown loss %d", (int)loss);
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY && c->out < 2)
    return sc__fail(SC_ERR_SHAPE, fn,
                    "cross-entropy needs at least 2 outputs (logits); the chain has %zu", c->out);
  return SC_OK;
}

static sc_status sc__labels_check(const char *fn, const int32_t *lab, size_t n, size_t classes) {
  for (size_t b = 0; b < n; b++)
    if (lab[b] < 0 || (size_t)lab[b] >= classes)
      return sc__fail(SC_ERR_ARG, fn, "label of sample %zu is %ld, outside [0, %zu)", b,
                      (long)lab[b], classes);
  return SC_OK;
}

static double sc__now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ============================== the portable kernel set and the typed entry points, float and double */
#define SC__T float
#define SC__TN(name) name##_f32
#define SC__TT(name) name##_f32
#define SC__F32 1
#include "typed/begin.h"
#include "typed/math.h"
#include "typed/act.h"
#include "typed/dense.h"
#include "typed/conv.h"
#include "typed/lanes.h"
#include "typed/choice.h"
#include "typed/slice.h"
#include "typed/one.h"
#include "typed/table.h"
#include "typed/exec.h"
#include "typed/end.h"
#define SC__T double
#define SC__TN(name) name##_f64
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "typed/begin.h"
#include "typed/math.h"
#include "typed/act.h"
#include "typed/dense.h"
#include "typed/conv.h"
#include "typed/lanes.h"
#include "typed/choice.h"
#include "typed/slice.h"
#include "typed/one.h"
#include "typed/table.h"
#include "typed/exec.h"
#include "typed/end.h"

/* ---------------------------------------------------------------- optimizers */
sc_optim sc_adam(double lr) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_ADAM;
  o.lr = lr;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  return o;
}
sc_optim sc_adamw(double lr, double weight_decay) {
  sc_optim o = sc_adam(lr);
  o.kind = SC_ADAMW;
  o.weight_decay = weight_decay;
  return o;
}
sc_optim sc_sgd(double lr, double momentum) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_SGD;
  o.lr = lr;
  o.momentum = momentum;
  return o;
}

struct sc_optimizer {
  const sc__kt_f32 *kf; /* for the fused update */
  sc_optim cfg;
  size_t n;
  uint64_t t;
  void *m, *v; /* ADAM moments; SGD uses m as the momentum buffer: n floats, or n doubles
                  once stepped in double (room for doubles is always there) */
  int prec;    /* the type of the steps since creation or reset: 0 none yet, 1 float, 2 double */
  void *owned;
};

static sc_status sc__optim_plan(const char *fn, const sc_optim *cfg, size_t n, size_t *bytes) {
  if (!cfg) return sc__fail(SC_ERR_NULL, fn, "argument 'cfg' is NULL");
  if (n == 0) return sc__fail(SC_ERR_ARG, fn, "n is 0");
  if (cfg->kind != SC_ADAM && cfg->kind != SC_ADAMW && cfg->kind != SC_SGD)
    return sc__fail(SC_ERR_ARG, fn, "unknown optimizer kind %d", (int)cfg->kind);
  if (!(cfg->lr > 0) || !isfinite(cfg->lr))
    return sc__fail(SC_ERR_ARG, fn, "learning rate %g must be finite and > 0", cfg->lr);
  if (!(cfg->weight_decay >= 0) || !isfinite(cfg->weight_decay))
    return sc__fail(SC_ERR_ARG, fn, "weight_decay %g must be finite and >= 0", cfg->weight_decay);
  if (cfg->kind == SC_ADAMW && !(cfg->lr * cfg->weight_decay < 1))
    return sc__fail(SC_ERR_ARG, fn,
                    "AdamW: lr x weight_decay = %g x %g = %g must be < 1 (each step scales p by "
                    "1 - lr x weight_decay, which would be <= 0)",
                    cfg->lr, cfg->weight_decay, cfg->lr * cfg->weight_decay);
  if (cfg->kind == SC_SGD) {
    if (!(cfg->momentum >= 0 && cfg->momentum < 1))
      return sc__fail(SC_ERR_ARG, fn, "SGD momentum %g must be in [0, 1)", cfg->momentum);
  } else {
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
      return sc__fail(SC_ERR_ARG, fn, "ADAM betas (%g, %g) must be in [0, 1)", cfg->beta1,
                      cfg->beta2);
    if (!(cfg->eps > 0) || !isfinite(cfg->eps))
      return sc__fail(SC_ERR_ARG, fn, "ADAM eps %g must be finite and > 0", cfg->eps);
  }
  int ok = 1;
  size_t vec = sc__roundup(sc__mul(n, sizeof(double), &ok), SC__ALIGN, &ok);
  size_t head = sc__roundup(sizeof(struct sc_optimizer), SC__ALIGN, &ok);
  *bytes = sc__add(sc__add(head, sc__mul(vec, 2, &ok), &ok), SC__ALIGN, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "optimizer state size overflows size_t");
  return SC_OK;
}

static sc_optimizer *sc__optim_place(void *mem, const sc_optim *cfg, size_t n) {
  uintptr_t a = ((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
  sc_optimizer *o = (sc_optimizer *)a;
  memset(o, 0, sizeof *o);
  o->cfg = *cfg;
  o->n = n;
  size_t head = (sizeof(struct sc_optimizer) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  size_t vec = (n * sizeof(double) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  o->m = (void *)(a + head);
  o->v = (void *)(a + head + vec);
  memset(o->m, 0, 2 * vec);
  return o;
}

sc_status sc_optimizer_bytes(const sc_optim *cfg, size_t n, size_t *bytes) {
  SC__CHECK_NULL(bytes);
  return sc__optim_plan(__func__, cfg, n, bytes);
}

sc_status sc_optimizer_create(sc_optimizer **out, const sc_optim *cfg, size_t n) {
  SC__CHECK_NULL(out);
  *out = NULL;
  size_t bytes = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &bytes);
  if (st) return st;
  void *mem = malloc(bytes);
  if (!mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) {
    free(mem);
    return st;
  }
  *out = sc__optim_place(mem, cfg, n);
  (*out)->owned = mem;
  (*out)->kf = kf;
  return SC_OK;
}

sc_status sc_optimizer_init(sc_optimizer **out, const sc_optim *cfg, size_t n, void *mem,
                            size_t bytes) {
  SC__CHECK_NULL(out);
  *out = NULL;
  SC__CHECK_NULL(mem);
  size_t need = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &need);
  if (st) return st;
  if (bytes < need)
    return SC__FAIL(SC_ERR_NOMEM, "caller memory of %zu bytes is smaller than the %zu needed",
                    bytes, need);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) return st;
  *out = sc__optim_place(mem, cfg, n);
  (*out)->kf = kf;
  return SC_OK;
}

void sc_optimizer_destroy(sc_optimizer *opt) {
  if (opt) free(opt->owned);
}

sc_status sc_optimizer_reset(sc_optimizer *opt) {
  SC__CHECK_NULL(opt);
  opt->t = 0;
  opt->prec = 0;
  memset(opt->m, 0, opt->n * sizeof(double));
  memset(opt->v, 0, opt->n * sizeof(double));
  return SC_OK;
}

/* the checks both step forms share; locks the optimizer to one element type */
static sc_status sc__optim_step_check(const char *fn, sc_optimizer *opt, const void *p,
                                      const void *g, size_t n, int prec) {
  if (!opt) return sc__fail(SC_ERR_NULL, fn, "argument 'opt' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!g) return sc__fail(SC_ERR_NULL, fn, "argument 'g' is NULL");
  if (n != opt->n)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the optimizer was created for %zu", n, opt->n);
  if (opt->prec && opt->prec != prec)
    return sc__fail(SC_ERR_ARG, fn,
                    "this optimizer has taken %s steps (its moments are %s): one element type "
                    "per optimizer; sc_optimizer_reset() starts afresh in either",
                    opt->prec == 1 ? "float" : "double", opt->prec == 1 ? "float" : "double");
  opt->prec = prec;
  return SC_OK;
}

/* ADAM / AdamW's coefficients for step opt->t (already counted), in torch's form:
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
static void sc__adam_coefs(const sc_optimizer *opt, sc__adam_coef *k) {
  const sc_optim *c = &opt->cfg;
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  /* 1 - beta in double: (1 - 0.999f) in float is off by 1e-5 relative */
  k->b1 = (float)c->beta1, k->b2 = (float)c->beta2, k->eps = (float)c->eps;
  k->omb1 = (float)(1.0 - c->beta1), k->omb2 = (float)(1.0 - c->beta2);
  k->step = (float)(c->lr / bc1), k->isb2 = (float)(1.0 / sqrt(bc2));
  k->decay = c->kind == SC_ADAMW ? (float)(1.0 - c->lr * c->weight_decay) : 1.0f;
  k->l2 = c->kind == SC_ADAM ? (float)c->weight_decay : 0.0f;
}

/* sc_train's float ADAM step and NaN guard, on the workspace's threads for large chains
 * (pool NULL: on the caller alone): each worker copies its part of p (sc__part_range) to
 * pbak, updates it and scans it; the first non-finite index over all parts is kept. Every
 * element gets the same operations as in one pass, so the result does not depend on the
 * thread count. At 2 threads this was LeNet5's serial part: 52 us of ADAM and guard on 44,426
 * parameters per step at batch 64, with the other thread waiting. */
typedef struct sc__optjob {
  const sc__kt_f32 *kf;
  const sc__adam_coef *k;
  float *p, *pbak, *m, *v;
  const float *g;
  size_t n;
  size_t bad[SC__OPT_PARTS]; /* per part: the first non-finite index of p, or n */
} sc__optjob;

static void sc__optjob_task(void *arg, int worker, int nworkers) {
  sc__optjob *J = arg;
  size_t parts = sc__parts(nworkers), k0, k1;
  for (size_t w = (size_t)worker; w < parts; w += (size_t)nworkers) {
    sc__part_range(w, parts, J->n, &k0, &k1);
    /* the backup, the step and the scan block by block, each block's arrays in L1 between
     * them (one pass each over the whole part read p, g, m, v from L2 three times) */
    for (size_t b0 = k0; b0 < k1; b0 += 2048) { /* (all of it: pbak is restored whole) */
      size_t nb = k1 - b0 < 2048 ? k1 - b0 : 2048;
      memcpy(J->pbak + b0, J->p + b0, nb * sizeof(float));
      J->kf->adam(J->p + b0, J->g + b0, J->m + b0, J->v + b0, nb, J->k);
      size_t b = J->kf->find_nonfinite(J->p + b0, nb);
      if (b < nb && J->bad[w] == J->n) J->bad[w] = b0 + b; /* the part's first */
    }
  }
}

/* returns the index of the first non-finite element of the updated p, or n */
static size_t sc__train_adam_f32(sc_optimizer *opt, sc__pool *pool, float *p, float *pbak,
                                 const float *g, size_t n) {
  opt->t++;
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  sc__optjob J;
  J.kf = opt->kf, J.k = &k, J.p = p, J.pbak = pbak, J.m = opt->m, J.v = opt->v, J.g = g, J.n = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++) J.bad[w] = n;
  sc__pool_run(pool, sc__optjob_task, &J);
  size_t bad = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++)
    if (J.bad[w] < bad) bad = J.bad[w];
  return bad;
}

sc_status sc_optimizer_step(sc_optimizer *opt, float *p, const float *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 1);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  float *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  if (c->kind == SC_SGD) {
    float lr = (float)c->lr, mu = (float)c->momentum, wd = (float)c->weight_decay;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      float gk = g[k] + wd * p[k];
      float b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  opt->kf->adam(p, g, m, v, n, &k);
  return SC_OK;
}

/* The same rules in double (a plain loop: the ODE-sized vectors it serves are short). */
sc_status sc_optimizer_step_f64(sc_optimizer *opt, double *p, const double *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 2);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  double *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  double lr = c->lr, wd = c->weight_decay;
  if (c->kind == SC_SGD) {
    double mu = c->momentum;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      double gk = g[k] + wd * p[k];
      double b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  double b1 = c->beta1, b2 = c->beta2, omb1 = 1.0 - b1, omb2 = 1.0 - b2, eps = c->eps;
  double step = lr / bc1, isb2 = 1.0 / sqrt(bc2);
  double decay = c->kind == SC_ADAMW ? 1.0 - lr * wd : 1.0, l2 = c->kind == SC_ADAM ? wd : 0.0;
  for (size_t k = 0; k < n; k++) {
    double gk = g[k] + l2 * p[k];
    double mk = b1 * m[k] + omb1 * gk, vk = b2 * v[k] + omb2 * gk * gk;
    m[k] = mk, v[k] = vk;
    p[k] = p[k] * decay - step * mk / (sqrt(vk) * isb2 + eps);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- checkpoints */
/* A checkpoint file (little-endian, see simplechain.h for the guarantees):
 *   0 magic "SCCHECKP"   8 version (1, u32)      12 flags (u32: 0, or 1 = the arrays are
 *                                                   float64, written by sc_train_f64)
 *  16 nparams           24 chain fingerprint     32 samples     40 batch size    48 seed
 *  56 shuffle (u32)     60 optimizer kind (u32)
 *  64 lr, beta1, beta2, eps, momentum, weight_decay, clip_norm, lr_schedule, lr_min and
 *     the schedule's length in steps (0 for a constant rate) (10 doubles, as bits)
 * 144 step             152 epoch               160 steps into the epoch
 * 168 optimizer t      176 shuffling generator state (4 x u64)
 * 208 loss sum of the epoch so far (double)    216 index count (samples if shuffled, else 0)
 * 224 p, then the optimizer's m and v (nparams float32 or float64 each), then the sample order
 *     (count u64), then an FNV-1a checksum (u64) of every byte before it. */
#define SC__CK_MAGIC "SCCHECKP"
#define SC__CK_HEAD 224
#define SC__CK_NH 10

typedef struct sc__ckpt {
  uint64_t np, fp, nsamples, bs, seed;
  uint32_t shuffle, kind;
  double hyper[SC__CK_NH]; /* see the layout above */
  uint64_t step, epoch, pos, t, rng[4];
  double epoch_sum;
  uint64_t nidx;
  uint32_t f64; /* flags bit 0: the arrays are doubles */
} sc__ckpt;

static void sc__ck_identity(sc__ckpt *k, const sc_chain *chain, size_t n, size_t bs, int shuffle,
                            const sc_train_opts *o, size_t total) {
  memset(k, 0, sizeof *k);
  k->np = chain->nparams, k->fp = sc__fingerprint(chain), k->nsamples = n, k->bs = bs;
  k->seed = o->seed, k->shuffle = (uint32_t)shuffle, k->kind = (uint32_t)o->optim.kind;
  const sc_optim *c = &o->optim;
  int sched = o->lr_schedule != SC_LR_CONSTANT;
  double h[SC__CK_NH] = {c->lr,
                         c->beta1,
                         c->beta2,
                         c->eps,
                         c->momentum,
                         c->weight_decay,
                         o->clip_norm,
                         (double)o->lr_schedule,
                         sched ? o->lr_min : 0,
                         sched ? (double)total : 0};
  memcpy(k->hyper, h, sizeof h);
}

static void sc__ck_encode(unsigned char *h, const sc__ckpt *k) {
  memset(h, 0, SC__CK_HEAD);
  memcpy(h, SC__CK_MAGIC, 8);
  sc__put_le(h + 8, 1, 4);
  sc__put_le(h + 12, k->f64 ? 1 : 0, 4);
  sc__put_le(h + 16, k->np, 8);
  sc__put_le(h + 24, k->fp, 8);
  sc__put_le(h + 32, k->nsamples, 8);
  sc__put_le(h + 40, k->bs, 8);
  sc__put_le(h + 48, k->seed, 8);
  sc__put_le(h + 56, k->shuffle, 4);
  sc__put_le(h + 60, k->kind, 4);
  for (int i = 0; i < SC__CK_NH; i++) sc__put_le(h + 64 + 8 * i, sc__dbits(k->hyper[i]), 8);
  sc__put_le(h + 144, k->step, 8);
  sc__put_le(h + 152, k->epoch, 8);
  sc__put_le(h + 160, k->pos, 8);
  sc__put_le(h + 168, k->t, 8);
  for (int i = 0; i < 4; i++) sc__put_le(h + 176 + 8 * i, k->rng[i], 8);
  sc__put_le(h + 208, sc__dbits(k->epoch_sum), 8);
  sc__put_le(h + 216, k->nidx, 8);
}

static void sc__ck_decode(const unsigned char *h, sc__ckpt *k) {
  k->np = sc__get_le(h + 16, 8), k->fp = sc__get_le(h + 24, 8);
  k->nsamples = sc__get_le(h + 32, 8), k->bs = sc__get_le(h + 40, 8);
  k->seed = sc__get_le(h + 48, 8);
  k->shuffle = (uint32_t)sc__get_le(h + 56, 4), k->kind = (uint32_t)sc__get_le(h + 60, 4);
  for (int i = 0; i < SC__CK_NH; i++) k->hyper[i] = sc__dof(sc__get_le(h + 64 + 8 * i, 8));
  k->step = sc__get_le(h + 144, 8), k->epoch = sc__get_le(h + 152, 8);
  k->pos = sc__get_le(h + 160, 8), k->t = sc__get_le(h + 168, 8);
  for (int i = 0; i < 4; i++) k->rng[i] = sc__get_le(h + 176 + 8 * i, 8);
  k->epoch_sum = sc__dof(sc__get_le(h + 208, 8));
  k->nidx = sc__get_le(h + 216, 8);
}

/* Writes a checkpoint atomically (sc__wopen/sc__wcommit; tmp: strlen(path) + SC__TMP_EXTRA
 * bytes). Allocates nothing where POSIX I/O exists. */
static sc_status sc__ck_write(const char *fn, const char *path, char *tmp, const sc__ckpt *k,
                              const void *p, const void *m, const void *v, const size_t *idx) {
  sc__wfile w;
  sc_status st = sc__wopen(&w, path, tmp, fn);
  if (st) return st;
  unsigned char buf[4096];
  uint64_t sum = SC__FNV_INIT;
  sc__ck_encode(buf, k);
  sum = sc__fnv1a(sum, buf, SC__CK_HEAD);
  sc__wwrite(&w, buf, SC__CK_HEAD);
  const void *arr[3] = {p, m, v};
  size_t es = k->f64 ? 8 : 4;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; !w.err && i < k->np;) {
      size_t b = 0;
      for (; i < k->np && b + es <= sizeof buf; i++, b += es)
        sc__put_le(buf + b,
                   k->f64 ? sc__dbits(((const double *)arr[a])[i])
                          : sc__fbits(((const float *)arr[a])[i]),
                   (int)es);
      sum = sc__fnv1a(sum, buf, b);
      sc__wwrite(&w, buf, b);
    }
  for (size_t i = 0; !w.err && i < k->nidx;) {
    size_t b = 0;
    for (; i < k->nidx && b + 8 <= sizeof buf; i++, b += 8)
      sc__put_le(buf + b, (uint64_t)idx[i], 8);
    sum = sc__fnv1a(sum, buf, b);
    sc__wwrite(&w, buf, b);
  }
  sc__put_le(buf, sum, 8);
  sc__wwrite(&w, buf, 8);
  return sc__wcommit(&w, path, fn);
}

/* sc_train's state after `step` steps, the next of which is step `pos` of epoch `epoch`
 * (sum: the loss sum of that epoch's first pos steps), written as a checkpoint */
static sc_status sc__ck_save(const char *fn, const char *path, char *tmp, sc__ckpt *ck, size_t step,
                             size_t epoch, size_t pos, double sum, const sc__rng *rng,
                             const void *p, const sc_optimizer *opt, const size_t *idx, size_t n) {
  ck->step = step, ck->epoch = epoch, ck->pos = pos, ck->t = step;
  ck->epoch_sum = pos ? sum : 0, ck->nidx = idx ? n : 0;
  memcpy(ck->rng, rng->s, sizeof ck->rng);
  return sc__ck_write(fn, path, tmp, ck, p, opt->m, opt->v, idx);
}

/* The next min(left, cap) bytes of a checkpoint into buf (*got), added to the checksum; a
 * short read is SC_ERR_IO (a read error) or SC_ERR_FORMAT (truncated, naming the offset). */
static sc_status sc__ck_chunk(FILE *f, unsigned char *buf, size_t cap, size_t left, size_t *got,
                              uint64_t *sum, size_t off, const char *path, const char *fn) {
  size_t want = left < cap ? left : cap;
  errno = 0;
  *got = fread(buf, 1, want, f);
  if (*got < want) {
    sc_status st = sc__rerr(f, path, fn);
    return st ? st : sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated at offset %zu", path, off + *got);
  }
  *sum = sc__fnv1a(*sum, buf, *got);
  return SC_OK;
}

/* Reads and checks a whole checkpoint. k receives the header. If want is not NULL, the run's
 * identity (nparams, fingerprint, samples, batch size, seed, shuffle, optimizer and clip
 * settings) must match it (SC_ERR_ARG / SC_ERR_SHAPE naming the field). The arrays go to p,
 * m, v (nparams floats each) and idx (samples entries), each may be NULL; on an error they
 * may hold part of the file, so the caller reads p into scratch memory. */
static sc_status sc__ck_read(const char *fn, const char *path, const sc_chain *chain,
                             const sc__ckpt *want, sc__ckpt *k, void *p, void *m, void *v,
                             size_t *idx) {
  FILE *f;
  sc_status st = sc__ropen(&f, path, fn);
  if (st) return st;
  unsigned char buf[4096];
  unsigned char *seen = NULL;
  errno = 0;
  size_t got = fread(buf, 1, SC__CK_HEAD, f);
  if (got < SC__CK_HEAD && (st = sc__rerr(f, path, fn))) goto out;
  if (got < 8 || memcmp(buf, SC__CK_MAGIC, 8) != 0) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not a simplechain checkpoint (bad magic at offset 0)",
                  path);
    goto out;
  }
  if (got < SC__CK_HEAD) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)", path,
                  got, SC__CK_HEAD);
    goto out;
  }
  uint64_t ver = sc__get_le(buf + 8, 4), flags = sc__get_le(buf + 12, 4);
  if (ver != 1 || flags > 1) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported version %llu / flags %llu at offset 8",
                  path, (unsigned long long)ver, (unsigned long long)flags);
    goto out;
  }
  sc__ck_decode(buf, k);
  k->f64 = (uint32_t)flags;
  uint64_t sum = sc__fnv1a(SC__FNV_INIT, buf, SC__CK_HEAD);
  /* the header's own consistency */
  const char *bad = NULL;
  size_t at = 0;
  int hok = 1;
  for (int i = 0; i < SC__CK_NH; i++) hok &= isfinite(k->hyper[i]) != 0;
  uint64_t spe = k->bs ? (k->nsamples + k->bs - 1) / k->bs : 0;
  if (k->np != chain->nparams) {
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)k->np, chain->nparams);
    goto out;
  }
  if (k->fp != sc__fingerprint(chain)) {
    st =
        sc__fail(SC_ERR_SHAPE, fn,
                 "'%s': written for a chain of a different shape (fingerprint at offset 24)", path);
    goto out;
  }
  if (k->nsamples == 0 || k->nsamples > SIZE_MAX / 16)
    bad = "sample count", at = 32;
  else if (k->bs == 0 || k->bs > k->nsamples)
    bad = "batch size", at = 40;
  else if (k->shuffle > 1)
    bad = "shuffle flag", at = 56;
  else if (k->kind < SC_ADAM || k->kind > SC_SGD)
    bad = "optimizer kind", at = 60;
  else if (!hok || (k->hyper[7] != 0 && k->hyper[7] != 1))
    bad = "optimizer settings", at = 64;
  else if (k->pos >= spe)
    bad = "steps into the epoch", at = 160;
  else if (k->epoch > UINT64_MAX / spe || k->epoch * spe + k->pos != k->step)
    bad = "step", at = 144;
  else if (k->t != k->step)
    bad = "optimizer step count", at = 168;
  else if (!isfinite(k->epoch_sum))
    bad = "epoch loss sum", at = 208;
  else if (k->nidx != (k->shuffle ? k->nsamples : 0))
    bad = "index count", at = 216;
  if (bad) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': inconsistent %s at offset %zu (file corrupted)", path,
                  bad, at);
    goto out;
  }
  if (want && k->f64 != want->f64) {
    st = sc__fail(SC_ERR_ARG, fn,
                  "'%s' was written by sc_train%s (%s parameters): resume it with sc_train%s", path,
                  k->f64 ? "_f64" : "", k->f64 ? "double" : "float", k->f64 ? "_f64" : "");
    goto out;
  }
  if (want) {
    static const char *hn[SC__CK_NH] = {
        "lr",           "beta1",     "beta2",       "eps",    "momentum",
        "weight_decay", "clip_norm", "lr_schedule", "lr_min", "the schedule's length (epochs)"};
    if (k->nsamples != want->nsamples)
      bad = "the sample count";
    else if (k->bs != want->bs)
      bad = "the batch size";
    else if (k->seed != want->seed)
      bad = "the seed";
    else if (k->shuffle != want->shuffle)
      bad = "shuffling";
    else if (k->kind != want->kind)
      bad = "the optimizer";
    for (int i = 0; !bad && i < SC__CK_NH; i++)
      if (sc__dbits(k->hyper[i]) != sc__dbits(want->hyper[i])) bad = hn[i];
    if (bad) {
      st = sc__fail(SC_ERR_ARG, fn,
                    "'%s' was written by a run with different settings (%s differs): resuming "
                    "needs the same data, batch size, seed, shuffling, optimizer, clip_norm and "
                    "learning-rate schedule",
                    path, bad);
      goto out;
    }
  }
  /* the size the header claims, against the file's: nothing is allocated for a lie */
  int ok = 1;
  size_t es = k->f64 ? 8 : 4;
  size_t need = sc__add(sc__add(SC__CK_HEAD, sc__mul((size_t)k->np, 3 * es, &ok), &ok),
                        sc__add(sc__mul((size_t)k->nidx, 8, &ok), 8, &ok), &ok);
  long end = -1;
  if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
  if (!ok || end < 0 || (uint64_t)end != (uint64_t)need || fseek(f, SC__CK_HEAD, SEEK_SET) != 0) {
    if (end < 0)
      st = sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
    else
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s: the file has %ld bytes, its header needs %zu",
                    path, (uint64_t)end < need ? "truncated" : "unexpected bytes at the end", end,
                    need);
    goto out;
  }
  void *arr[3] = {p, m, v};
  size_t off = SC__CK_HEAD;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; i < k->np;) {
      if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->np - i) * es, &got, &sum, off, path, fn)))
        goto out;
      for (size_t b = 0; b + es <= got; b += es, i++, off += es) {
        double x = k->f64 ? sc__dof(sc__get_le(buf + b, 8))
                          : (double)sc__fof((uint32_t)sc__get_le(buf + b, 4));
        if (!isfinite(x) || (a == 2 && x < 0)) {
          static const char *an[3] = {"parameter", "first moment", "second moment"};
          st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s %zu (offset %zu) is %g", path, an[a], i, off,
                        x);
          goto out;
        }
        if (arr[a] && k->f64)
          ((double *)arr[a])[i] = x;
        else if (arr[a])
          ((float *)arr[a])[i] = (float)x;
      }
    }
  if (k->nidx) {
    seen = calloc((size_t)(k->nidx + 7) / 8, 1);
    if (!seen) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto out;
    }
  }
  for (size_t i = 0; i < k->nidx;) {
    if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->nidx - i) * 8, &got, &sum, off, path, fn)))
      goto out;
    for (size_t b = 0; b < got; b += 8, i++, off += 8) {
      uint64_t j = sc__get_le(buf + b, 8);
      if (j >= k->nsamples || (seen[j / 8] >> (j % 8) & 1)) {
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': the sample order is not a permutation (entry %zu at offset %zu)", path,
                      i, off);
        goto out;
      }
      seen[j / 8] |= (unsigned char)(1u << (j % 8));
      if (idx) idx[i] = (size_t)j;
    }
  }
  errno = 0;
  got = fread(buf, 1, 8, f);
  if (got < 8) {
    if (!(st = sc__rerr(f, path, fn)))
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path, off);
  } else if (sc__get_le(buf, 8) != sum)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)", path,
                  off);
out:
  free(seen);
  fclose(f);
  return st;
}

sc_status sc_checkpoint_info(const sc_chain *chain, const char *path, sc_checkpoint_state *info) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(info);
  sc__ckpt k;
  sc_status st = sc__ck_read(__func__, path, chain, NULL, &k, NULL, NULL, NULL, NULL);
  if (st) return st;
  memset(info, 0, sizeof *info);
  info->step = (size_t)k.step;
  info->epoch = (size_t)k.epoch;
  info->epoch_step = (size_t)k.pos;
  info->samples = (size_t)k.nsamples;
  info->batch_size = (size_t)k.bs;
  info->seed = k.seed;
  info->shuffle = (int)k.shuffle;
  info->optim.kind = (sc_optim_kind)k.kind;
  info->optim.lr = k.hyper[0], info->optim.beta1 = k.hyper[1], info->optim.beta2 = k.hyper[2];
  info->optim.eps = k.hyper[3], info->optim.momentum = k.hyper[4];
  info->optim.weight_decay = k.hyper[5];
  info->clip_norm = k.hyper[6];
  info->lr_schedule = (sc_lr_schedule)(int)k.hyper[7];
  info->lr_min = k.hyper[8];
  info->f64 = (int)k.f64;
  return SC_OK;
}

/* ---------------------------------------------------------------- training */
/* The threads sc_train runs on (issue 13: threads never slow training down). A step's work
 * is its batch's slices (one per SC__TW x min_tiles samples, this rank's share of them under
 * dist) and the elementwise passes over the parameters (the slices' sum, the optimizer step,
 * the NaN guard, bf16's weights). A thread beyond both only waits: it is woken for every run
 * of the step, the caller waits for it to check in, and it polls its core between runs. On a
 * 16-core Intel host (bench/RESULTS.md, session 34) LeNet5 at batch 64 (2 slices) took 0.093
 * s per 10,000 images on 2 threads and 0.121-0.133 s on 4, 8 and 16 (after this: 4 and 16 as
 * fast as 2, 0.110-0.114 against 0.115 in a slower run of the VM). So: at most the slices
 * of a batch, or one thread per SC__TRAIN_PARAMS_PER_THREAD parameters where that is more,
 * and never more than asked for. Results do not depend on the thread count either way. */
#define SC__TRAIN_PARAMS_PER_THREAD 65536
static int sc__train_threads_for(const sc_chain *c, size_t bs, const sc_dist *dist, int threads) {
  size_t s = sc__slices_for(c, bs);
  if (dist && dist->ranks > 1) { /* this rank's slices, as sc__execute splits them */
    size_t lo, hi;
    sc__rank_slices(s, (size_t)dist->rank, (size_t)dist->ranks, &lo, &hi);
    s = hi - lo;
  }
  size_t byp = c->nparams / SC__TRAIN_PARAMS_PER_THREAD + 1;
  size_t use = s > byp ? s : byp;
  return (size_t)threads < use ? threads : (int)use;
}

/* a dist's rank and rank count (sc_train, sc_train_threads) */
static sc_status sc__dist_rank_check(const char *fn, const sc_dist *dist) {
  if (dist->ranks < 1 || dist->ranks > 65536)
    return sc__fail(SC_ERR_ARG, fn, "dist->ranks = %d, must be in [1, 65536]", dist->ranks);
  if (dist->rank < 0 || dist->rank >= dist->ranks)
    return sc__fail(SC_ERR_ARG, fn, "dist->rank = %d, must be in [0, %d)", dist->rank, dist->ranks);
  return SC_OK;
}

sc_status sc_train_threads(const sc_chain *chain, const sc_train_opts *opts, size_t n,
                           int *threads) {
  if (threads) *threads = 0;
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(opts);
  SC__CHECK_NULL(threads);
  if (n == 0) return SC__FAIL(SC_ERR_BATCH, "n is 0: no samples");
  sc_status st = sc__threads_check(__func__, opts->threads);
  const sc_dist *dist = opts->dist;
  if (!st && dist) st = sc__dist_rank_check(__func__, dist);
  if (st) return st;
  size_t bs = opts->batch_size && opts->batch_size < n ? opts->batch_size : n;
  *threads = sc__train_threads_for(chain, bs, dist, opts->threads);
  return SC_OK;
}

sc_train_opts sc_train_defaults(void) {
  sc_train_opts o;
  memset(&o, 0, sizeof o);
  o.optim = sc_adam(1e-3);
  o.epochs = 1;
  o.batch_size = 0;
  o.shuffle = 1;
  o.seed = 0;
  o.threads = 1;
  return o;
}

/* Full-batch training (and unshuffled minibatches of whole tiles) reads the same tiles of the
 * data at every step: they are made here once, the inputs transposed to tiles (SC__TW samples a
 * row, zeros past the last sample; with bf16 operands rounded), the targets likewise (not the
 * labels: those are read in place), and the steps read them in place (ws->tiles_x) instead of
 * gathering them again: the same values, so the same bits. The toy (4 -> 32 -> 16 -> 4, 10,000
 * samples): its gathers were 2.4 % of a step, the run 2.0-4.2 % faster (bench/RESULTS.md,
 * session 33). Not for a chain whose first layer is a flatten (a view of the input tile), and
 * not above SC__TILES_MAX bytes (the data set again, in tiles); SC_TRAIN_TILES=0 turns it off.
 * Returns the memory to free (NULL: not made, the steps gather as before). */
#define SC__TILES_MAX ((size_t)64 << 20)
static void *sc__train_tiles(sc_workspace *ws, const sc_chain *c, sc_loss loss, const void *x,
                             const void *target, size_t n, size_t bs, int shuffle, int f64) {
  const char *env = getenv("SC_TRAIN_TILES"); /* (checked by sc__train) */
  if ((env && !strcmp(env, "0")) || shuffle || (bs != n && bs % SC__TW) ||
      c->L[0].spec.kind == SC_LAYER_FLATTEN)
    return NULL;
  int ok = 1;
  size_t es = f64 ? sizeof(double) : sizeof(float), nt = n / SC__TW + (n % SC__TW != 0);
  size_t tcols = loss == SC_LOSS_LOGIT_CROSSENTROPY ? 0 : c->out;
  size_t xb = sc__mul(sc__mul(nt, c->in, &ok), SC__TW * es, &ok);
  size_t tb = sc__mul(sc__mul(nt, tcols, &ok), SC__TW * es, &ok);
  size_t all = sc__add(sc__add(xb, tb, &ok), SC__ALIGN, &ok);
  if (!ok || all > SC__TILES_MAX) return NULL;
  void *mem = malloc(all);
  if (!mem) return NULL; /* (not needed: the steps gather) */
  unsigned char *xt =
      (unsigned char *)(((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1));
  unsigned char *tt = xt + xb; /* (xb a multiple of SC__TW es: 64-byte aligned) */
  if (f64) {
    sc__tiles_fill_f64((double *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f64((double *)(void *)tt, target, tcols, n);
  } else {
    sc__tiles_fill_f32((float *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f32((float *)(void *)tt, target, tcols, n);
  }
  if (!f64 && ws->prec != SC_PRECISION_FP32) /* as the steps round their gathered tiles */
    (ws->bf_round ? ws->bf_round : sc__bf16_round_n)((float *)(void *)xt, nt * c->in * SC__TW);
  ws->tiles_x = xt;
  ws->tiles_t = tcols ? tt : NULL;
  ws->tiles_f64 = f64;
  ws->tiles0 = 0;
  return mem;
}

/* sc_train and sc_train_f64: one body, the element type chosen by f64 (p, the data's x and
 * float targets, the gradient, the optimizer's moments and the checkpoint's arrays are all
 * of that type) */
static sc_status sc__train(const char *fn, const sc_chain *chain, sc_loss loss, void *pv, int f64,
                           const void *xv, const void *target, size_t n, const sc_train_opts *opts,
                           sc_train_report *report) {
  if (!chain) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!pv) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!opts) return sc__fail(SC_ERR_NULL, fn, "argument 'opts' is NULL");
  if (report) memset(report, 0, sizeof *report);
  if (!xv) return sc__fail(SC_ERR_NULL, fn, "data->x is NULL");
  if (n == 0) return sc__fail(SC_ERR_BATCH, fn, "data->n is 0: no samples");
  float *p32 = f64 ? NULL : (float *)pv;
  double *p64 = f64 ? (double *)pv : NULL;
  const size_t es = f64 ? sizeof(double) : sizeof(float);
  if (opts->epochs == 0)
    return sc__fail(SC_ERR_ARG, fn,
                    "epochs is 0 (start from sc_train_defaults() and set what differs)");
  sc_status tst = sc__threads_check(fn, opts->threads);
  if (tst) return tst;
  if (!sc_precision_name(opts->precision))
    return sc__fail(SC_ERR_ARG, fn, "unknown precision %d", (int)opts->precision);
  if (f64 && opts->precision != SC_PRECISION_FP32)
    return sc__fail(SC_ERR_ARG, fn,
                    "precision %s is for float training; sc_train_f64 computes in double "
                    "(leave precision at SC_PRECISION_FP32)",
                    sc_precision_name(opts->precision));
  if (opts->lr_schedule != SC_LR_CONSTANT && opts->lr_schedule != SC_LR_COSINE)
    return sc__fail(SC_ERR_ARG, fn, "unknown lr_schedule %d", (int)opts->lr_schedule);
  if (opts->lr_schedule == SC_LR_COSINE &&
      (!(opts->lr_min >= 0) || !(opts->lr_min <= opts->optim.lr)))
    return sc__fail(SC_ERR_ARG, fn, "lr_min = %g must be in [0, lr = %g]", opts->lr_min,
                    opts->optim.lr);
  if (!(opts->clip_norm >= 0) || !isfinite(opts->clip_norm))
    return sc__fail(SC_ERR_ARG, fn, "clip_norm = %g must be finite and >= 0 (0: off)",
                    opts->clip_norm);
  if (opts->profile && opts->profile_rows < chain->nlayers + 2)
    return sc__fail(SC_ERR_SHAPE, fn, "profile_rows = %zu, needs the chain's %zu layers + 2",
                    opts->profile_rows, chain->nlayers);
  const char *ckpath = opts->checkpoint;
  if (ckpath && !*ckpath) return sc__fail(SC_ERR_ARG, fn, "checkpoint path is empty");
  if (!ckpath && opts->resume)
    return sc__fail(SC_ERR_ARG, fn, "resume is set but checkpoint is NULL");
  if (!ckpath && opts->checkpoint_every)
    return sc__fail(SC_ERR_ARG, fn, "checkpoint_every = %zu but checkpoint is NULL",
                    opts->checkpoint_every);
  const char *tenv = getenv("SC_TRAIN_TILES");
  if (tenv && strcmp(tenv, "0") && strcmp(tenv, "1"))
    return sc__fail(SC_ERR_ARG, fn, "SC_TRAIN_TILES='%s' is not '0' or '1'", tenv);
  sc_status st = sc__loss_check(fn, chain, loss, target);
  if (st) return st;
  size_t obytes = 0;
  if ((st = sc__optim_plan(fn, &opts->optim, chain->nparams, &obytes))) return st;
  int ok = 1;
  size_t bs = opts->batch_size ? opts->batch_size : n, np = chain->nparams;
  if (bs > n) bs = n;
  sc__mul(n, chain->in > chain->out ? chain->in : chain->out, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "data size overflows size_t");
  /* the data set is checked once here, not at every step */
  st = f64 ? sc__finite_check_f64(fn, chain, "input", xv, n, chain->in)
           : sc__finite_check_f32(fn, chain, "input", xv, n, chain->in);
  if (st) return st;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY)
    st = sc__labels_check(fn, (const int32_t *)target, n, chain->out);
  else
    st = f64 ? sc__finite_check_f64(fn, chain, "target", target, n, chain->out)
             : sc__finite_check_f32(fn, chain, "target", target, n, chain->out);
  if (st) return st;
  st = f64 ? sc__finite_check_f64(fn, chain, "parameter", p64, 1, np)
           : sc__finite_check_f32(fn, chain, "parameter", p32, 1, np);
  if (st) return st;

  const sc_dist *dist = opts->dist;
  if (dist) {
    if ((st = sc__dist_rank_check(fn, dist))) return st;
    if (!dist->allgather) return sc__fail(SC_ERR_NULL, fn, "dist->allgather is NULL");
  }

  size_t steps_per_epoch = (n + bs - 1) / bs;
  size_t total = sc__mul(steps_per_epoch, opts->epochs, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "epochs x steps overflows size_t");
  int shuffle = opts->shuffle && bs < n;
  int writer = ckpath && (!dist || dist->rank == 0); /* one rank writes the checkpoints */

  /* everything the steps need, allocated once */
  sc_workspace *ws = NULL;
  sc_optimizer *opt = NULL;
  double t_start = sc__now(), epoch_loss = 0, sum = 0;
  size_t step = 0, epoch = 0, s0 = 0, last_ck = (size_t)-1;
  uint64_t opt_ns = 0;          /* profile: the optimizer step, the guard, the checkpoints */
  void *g = NULL, *pbak = NULL; /* np elements of the type */
  size_t *idx = NULL;
  char *cktmp = NULL;
  void *tiles = NULL; /* the data's tiles made once (sc__train_tiles), or NULL */
  sc__ckpt ck;
  /* data-parallel: one record per slice, nparams elements then the slice's loss (a double) */
  size_t rec_g = sc__roundup(sc__mul(np, es, &ok), sizeof(double), &ok);
  size_t rec = sc__add(rec_g, sizeof(double), &ok);
  unsigned char *xsend = NULL, *xrecv = NULL;
  size_t *xcounts = NULL, *xdispls = NULL;
  double slice_loss[SC__MAX_SLICES];
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "exchange record size overflows size_t");
  if ((st = sc_workspace_create(&ws, chain, bs)) != SC_OK) goto done;
  if ((st = sc_workspace_set_threads(ws, sc__train_threads_for(chain, bs, dist, opts->threads))) !=
      SC_OK)
    goto done;
  if (opts->precision != SC_PRECISION_FP32 &&
      (st = sc_workspace_set_precision(ws, opts->precision)) != SC_OK)
    goto done;
  if ((st = sc_optimizer_create(&opt, &opts->optim, np)) != SC_OK) goto done;
  opt->prec = f64 ? 2 : 1;
  sc_workspace_set_dropout(ws, opts->seed, 0);
  if (opts->profile && (st = sc_workspace_profile(ws, 1)) != SC_OK) goto done;
  tiles = sc__train_tiles(ws, chain, loss, xv, target, n, bs, shuffle, f64);
  g = malloc(np * es);
  pbak = malloc(np * es);
  if (shuffle) idx = malloc(sc__mul(n, sizeof(size_t), &ok));
  if (ckpath) cktmp = malloc(sc__add(strlen(ckpath), SC__TMP_EXTRA, &ok));
  if (!g || !pbak || (shuffle && !idx) || (ckpath && !cktmp)) {
    st = sc__fail(SC_ERR_NOMEM, fn,
                  "out of memory for the gradient, the sample index or a file name");
    goto done;
  }
  if (dist) {
    size_t xb = sc__mul(rec, SC__MAX_SLICES, &ok);
    if (ok) {
      xsend = malloc(xb);
      xrecv = malloc(xb);
      xcounts = malloc((size_t)dist->ranks * sizeof *xcounts);
      xdispls = malloc((size_t)dist->ranks * sizeof *xdispls);
    }
    if (!xsend || !xrecv || !xcounts || !xdispls) {
      st = sc__fail(SC_ERR_NOMEM, fn,
                    "out of memory for the gradient exchange buffers (2 x %zu bytes)", xb);
      goto done;
    }
  }
  if (idx)
    for (size_t k = 0; k < n; k++) idx[k] = k;

  sc__rng rng;
  sc__rng_seed(&rng, opts->seed ^ 0x5C5C5C5C5C5C5C5Cull);
  sc__ck_identity(&ck, chain, n, bs, shuffle, opts, total);
  ck.f64 = (uint32_t)f64;
  if (opts->resume) {
    FILE *probe = fopen(ckpath, "rb");
    int e = errno;
    if (probe) fclose(probe);
    if (probe || e != ENOENT) { /* a missing checkpoint starts from the beginning */
      sc__ckpt got;
      /* p is read into g first: it is overwritten only when the whole file checks out */
      if ((st = sc__ck_read(fn, ckpath, chain, &ck, &got, g, opt->m, opt->v, idx))) goto done;
      if (got.step > total) {
        st = sc__fail(SC_ERR_ARG, fn, "'%s' is at step %llu, beyond the %zu steps of this run",
                      ckpath, (unsigned long long)got.step, total);
        goto done;
      }
      memcpy(pv, g, np * es);
      opt->t = got.t;
      memcpy(rng.s, got.rng, sizeof rng.s);
      step = (size_t)got.step, epoch = (size_t)got.epoch, s0 = (size_t)got.pos;
      sum = got.epoch_sum;
      if (s0) epoch_loss = sum / (double)s0;
      last_ck = step;
      sc_workspace_set_dropout(ws, opts->seed, step);
      if (report) report->resumed_step = step;
    }
  }
  t_start = sc__now();
  for (; epoch < opts->epochs; epoch++, s0 = 0, sum = 0) {
    if (shuffle && s0 == 0)
      for (size_t k = n - 1; k > 0; k--) { /* Fisher-Yates */
        size_t j = (size_t)sc__rng_below(&rng, (uint64_t)k + 1), tmp = idx[k];
        idx[k] = idx[j];
        idx[j] = tmp;
      }
    for (size_t s = s0; s < steps_per_epoch; s++) {
      size_t b0 = s * bs, nb = n - b0 < bs ? n - b0 : bs;
      double lv = 0;
      const unsigned char *xb = xv;
      const void *tb = target;
      const size_t *ib = NULL;
      if (idx)
        ib = idx + b0;
      else {
        xb += b0 * chain->in * es;
        tb = loss == SC_LOSS_LOGIT_CROSSENTROPY
                 ? (const void *)((const int32_t *)tb + b0)
                 : (const void *)((const unsigned char *)tb + b0 * chain->out * es);
      }
      ws->tiles0 = b0 / SC__TW; /* (with tiles: b0 a multiple of SC__TW) */
      if (!dist) {
        if (f64)
          sc__valgrad_run_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, &lv,
                              g, NULL, ws, 1, 0);
        else
          sc__valgrad_run_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, &lv, g,
                              NULL, ws, 1, 0);
      } else { /* this rank's slices, then every slice from every rank, added in order */
        size_t ns, lo, hi;
        if (f64)
          sc__valgrad_own_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        else
          sc__valgrad_own_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        for (size_t q = lo; q < hi; q++) {
          unsigned char *r = xsend + (q - lo) * rec;
          memcpy(r, ws->slices + q * ws->slice_bytes + ws->tile_bytes, np * es);
          memcpy(r + rec_g, &slice_loss[q], sizeof(double));
        }
        for (int r = 0; r < dist->ranks; r++) {
          size_t rlo, rhi;
          sc__rank_slices(ns, (size_t)r, (size_t)dist->ranks, &rlo, &rhi);
          xcounts[r] = (rhi - rlo) * rec;
          xdispls[r] = rlo * rec;
        }
        int rc = dist->allgather(dist->ctx, xsend, xrecv, xcounts, xdispls);
        if (rc != 0) {
          st = sc__fail(SC_ERR_CALLBACK, fn,
                        "the gradient exchange (dist->allgather) returned %d at step %zu (rank %d "
                        "of %d)",
                        rc, step + 1, dist->rank, dist->ranks);
          goto done;
        }
        double lsum = 0;
        for (size_t q = 0; q < ns; q++) {
          const unsigned char *r = xrecv + q * rec;
          double sl;
          memcpy(&sl, r + rec_g, sizeof sl);
          lsum += sl;
          if (q == 0)
            memcpy(g, r, np * es);
          else if (f64)
            for (size_t k = 0; k < np; k++)
              ((double *)g)[k] += ((const double *)(const void *)r)[k];
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] += ((const float *)(const void *)r)[k];
        }
        lv = lsum / (double)nb;
      }
      /* the NaN guard: a poisoned loss, gradient or update never reaches p. A NaN or Inf in
       * g always makes the updated p[k] NaN or Inf (ADAM: m/sqrt(v) is NaN; SGD: p - lr g),
       * so one scan of the new p (and a copy of the old one to fall back on) covers both;
       * g is looked at only to name the culprit */
      size_t bad = np;
      uint64_t t_opt = opts->profile ? sc__ns() : 0;
      if (!isfinite(lv)) {
        st = sc__fail(SC_ERR_NONFINITE, fn,
                      "the loss became %s at step %zu (epoch %zu, minibatch %zu of %zu): p holds "
                      "the parameters after step %zu; learning rate too high?",
                      isnan(lv) ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        goto done;
      }
      if (opts->clip_norm > 0) { /* as torch.nn.utils.clip_grad_norm_ */
        double ss = 0;
        if (f64)
          for (size_t k = 0; k < np; k++) ss += ((double *)g)[k] * ((double *)g)[k];
        else
          for (size_t k = 0; k < np; k++) ss += (double)((float *)g)[k] * (double)((float *)g)[k];
        double norm = sqrt(ss);
        if (norm > opts->clip_norm) {
          double c = opts->clip_norm / (norm + 1e-6);
          if (f64)
            for (size_t k = 0; k < np; k++) ((double *)g)[k] *= c;
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] *= (float)c;
        }
      }
      if (opts->lr_schedule == SC_LR_COSINE) /* a function of the step alone */
        opt->cfg.lr =
            opts->lr_min + (opts->optim.lr - opts->lr_min) * 0.5 *
                               (1 + cos(3.14159265358979323846 * (double)step / (double)total));
      if (!f64 && opts->optim.kind != SC_SGD) /* pbak is saved in it */
        bad = sc__train_adam_f32(opt, np >= SC__OPT_PAR_MIN ? ws->pool : NULL, p32, pbak, g, np);
      else {
        memcpy(pbak, pv, np * es);
        if (f64) {
          sc_optimizer_step_f64(opt, p64, g, np);
          bad = chain->kd->find_nonfinite(p64, np);
        } else {
          sc_optimizer_step(opt, p32, g, np);
          bad = chain->kf->find_nonfinite(p32, np);
        }
      }
      if (bad < np) {
        int nan = f64 ? isnan(p64[bad]) : isnan(p32[bad]);
        memcpy(pv, pbak, np * es);
        size_t gb = f64 ? chain->kd->find_nonfinite(g, np) : chain->kf->find_nonfinite(g, np);
        int gnan = gb < np && (f64 ? isnan(((double *)g)[gb]) : isnan(((float *)g)[gb]));
        if (gb < np)
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the gradient g[%zu] became %s at step %zu (epoch %zu, minibatch %zu of "
                        "%zu): p holds the parameters after step %zu; learning rate too high?",
                        gb, gnan ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        else
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the update of step %zu (epoch %zu, minibatch %zu of %zu) made p[%zu] %s: "
                        "p holds the parameters after step %zu; learning rate too high?",
                        step + 1, epoch, s + 1, steps_per_epoch, bad, nan ? "NaN" : "Inf", step);
        goto done;
      }
      step++;
      sum += lv;
      epoch_loss = sum / (double)(s + 1);
      int end = s + 1 == steps_per_epoch; /* the next step opens the next epoch */
      size_t next_epoch = end ? epoch + 1 : epoch, next_pos = end ? 0 : s + 1;
      if (writer && opts->checkpoint_every && step % opts->checkpoint_every == 0) {
        if ((st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                              opt, idx, n)))
          goto done;
        last_ck = step;
      }
      if (opts->profile) opt_ns += sc__ns() - t_opt;
      if (opts->progress && opts->progress_every && step % opts->progress_every == 0) {
        sc_progress pr = {epoch, step, total, lv, epoch_loss, sc__now() - t_start, p32, p64};
        if (opts->progress(&pr, opts->user)) {
          if (writer && last_ck != step && /* so that the stopped run can be resumed */
              (st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                                opt, idx, n)))
            goto done;
          st = sc__fail(SC_ERR_STOPPED, fn, "stopped by the progress callback at step %zu", step);
          epoch++;
          goto done;
        }
      }
    }
  }
  if (writer && last_ck != step) /* the finished run, so that resuming it does nothing */
    st = sc__ck_save(fn, ckpath, cktmp, &ck, step, epoch, 0, 0, &rng, pv, opt, idx, n);
done:
  if (opts->profile && ws && ws->prof &&
      sc_workspace_profile_read(ws, opts->profile, opts->profile_rows) == SC_OK)
    opts->profile[chain->nlayers + 1].fwd_seconds = (double)opt_ns * 1e-9;
  if (report) {
    report->steps = step;
    report->epochs = epoch;
    report->final_loss = epoch_loss;
    report->seconds = st == SC_OK || st == SC_ERR_STOPPED ? sc__now() - t_start : 0;
  }
  free(idx);
  free(g);
  free(pbak);
  free(cktmp);
  free(xsend);
  free(xrecv);
  free(xcounts);
  free(xdispls);
  free(tiles);
  sc_optimizer_destroy(opt);
  sc_workspace_destroy(ws);
  return st;
}
sc_status sc_train(const sc_chain *chain, sc_loss loss, float *p, const sc_data *data,
                   const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 0, data->x, data->target, data->n, opts, report);
}

sc_status sc_train_f64(const sc_chain *chain, sc_loss loss, double *p, const sc_data_f64 *data,
                       const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 1, data->x, data->target, data->n, opts, report);
}

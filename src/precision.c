/* src/precision.c — the bf16 precision of a workspace: the bf16 kernels it takes (the
 * AVX512_BF16 ones of kernels/bf16/, AMX's of kernels/amx/, their models in src/bf16_model.c)
 * by what the CPU has and SC_BF16_KERNELS, the packed weights' and operands' buffers, and the
 * bf16 conversions. */
#include "internal.h"

/* ---------------------------------------------------------------- precision */
const char *sc_precision_name(sc_precision precision) {
  switch (precision) {
  case SC_PRECISION_FP32: return "fp32";
  case SC_PRECISION_BF16: return "bf16";
  case SC_PRECISION_BF16_EMULATED: return "bf16-emulated";
  }
  return NULL;
}

#ifdef SC__HAVE_AMX
#include <sys/syscall.h>

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
 * Fashion-MNIST, 12,800 images, batch 64, 1 thread, 2026-11-23): the first
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

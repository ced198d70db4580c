/* src/dispatch.c — the kernel sets this build has (the portable one, the kernels/ files, the
 * built-in sets of the two drop-in files) and the one a chain runs on: the fastest this CPU
 * supports, or the one SC_ISA forces. */
#include "internal.h"

/* ---------------------------------------------------------------- chain plan */
/* The kernel tables for this CPU, or the ones SC_ISA forces. */
SC__INT sc_status sc__pick_kernels(const char *fn, const sc__kt_f32 **kf, const sc__kt_f64 **kd) {
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

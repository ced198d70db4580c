/* kernels/x86/vec.h — the float vector kernels' types and operations (GCC/Clang vector
 * extensions and intrinsics), for the x86 kernel sets: one source, compiled per set with its VW.
 *
 * Included by kernels/x86/f32.h in a kernel set's float instantiation (kernels/avx2/avx2.c,
 * kernels/avx512/avx512.c; the built-in sets of the two drop-in files compile the same files).
 * VW is the native vector width in floats (16 for AVX-512, 8 for AVX2); a tile row of SC__TW
 * samples is NV = SC__TW / VW native vectors. VOB output rows are blocked so that their VOB x NV
 * accumulators stay in registers. The sets compile with -ffp-contract=fast (or the pragma), so
 * `acc += w * x` is one FMA.
 *
 * Dimension letters as in src/internal.h: O outputs, I inputs, ld transposed row length.
 */

#ifndef VOB
#error "define VOB (rows per register block) before including vec_f32.h"
#endif

#if defined(__AVX512F__) || defined(SC__ISA_AVX512)
#define VW 16
#else
#define VW 8
#endif
#define NV (SC__TW / VW) /* native vectors per tile row */
#define NC (16 / VW)     /* native vectors per 16-column chunk of the dW block */
/* forward and dx work on column chunks of NVB vectors (AVX-512: the whole 32-sample row;
 * AVX2: 16 samples, so that VOB x NVB accumulators and the operands fit in 16 ymm) */
#define NVB (NV < 2 ? NV : 2)
/* a half tile (a batch's last tile of at most SC__TW / 2 samples): the dense kernels' _h forms
 * compute the first NVH vectors of each row, in chunks of NVBH, and store zeros in the rest */
#define NVH (NV / 2)
#define NVBH (NVB < NVH ? NVB : NVH)
#if SC__TW % VW != 0
#error "the tile width must be a multiple of the vector width"
#endif

typedef float sc_vf __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef float sc_vfu __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int32_t sc_vi __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef uint32_t sc_vu __attribute__((vector_size(VW * 4), aligned(VW * 4)));

/* one float in every lane: set1, not {0} + s, which is an add GCC must keep (-0 + 0
 * is +0) and which stops it from folding the broadcast into the FMA's memory operand */
#if VW == 16
#define V_BCAST(s) ((sc_vf)_mm512_set1_ps((float)(s)))
#else
#define V_BCAST(s) ((sc_vf)_mm256_set1_ps((float)(s)))
#endif
#define V_ROW(ptr, j) (((const sc_vf *)(const void *)(ptr))[j])
#define V_ROWW(ptr, j) (((sc_vf *)(void *)(ptr))[j])

static inline __attribute__((always_inline)) sc_vf v_sel(sc_vi m, sc_vf a, sc_vf b) {
  return (sc_vf)(((sc_vi)a & m) | ((sc_vi)b & ~m)); /* m ? a : b, per lane */
}
/* min / max as single instructions (a select costs a compare and two logic ops) */
/* a * b + c as one FMA whatever the contraction pass would pick (it may fuse either
 * product of a sum of two products, which changes the rounding) */
#if VW == 16
#define V_FMA(a, b, c) ((sc_vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define V_FMA(a, b, c) ((sc_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#endif
/* a reciprocal estimate: relative error <= 2^-14 (AVX-512), 1.5 x 2^-12 (AVX2) */
#if VW == 16
#define V_RCP(a) ((sc_vf)_mm512_rcp14_ps((__m512)(a)))
#else
#define V_RCP(a) ((sc_vf)_mm256_rcp_ps((__m256)(a)))
#endif
#if VW == 16
#define v_min(a, b) ((sc_vf)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define v_max(a, b) ((sc_vf)_mm512_max_ps((__m512)(a), (__m512)(b)))
/* x >= t ? a : b */
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm512_mask_blend_ps(_mm512_cmp_ps_mask((__m512)(x), _mm512_set1_ps(t), _CMP_GE_OQ),     \
                               (__m512)(b), (__m512)(a)))
#else
#define v_min(a, b) ((sc_vf)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define v_max(a, b) ((sc_vf)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm256_blendv_ps((__m256)(b), (__m256)(a),                                               \
                           _mm256_cmp_ps((__m256)(x), _mm256_set1_ps(t), _CMP_GE_OQ)))
#endif
/* relu as max(0, z): MAXPS returns its second operand when either is NaN, so a NaN stays
 * NaN (as in the portable z < 0 ? 0 : z) */
#define v_relu(z) v_max(V_BCAST(0.0f), (z))

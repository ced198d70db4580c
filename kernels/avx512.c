/* kernels/avx512.c — the kernel set for CPUs with AVX512 (built with -mavx512f -mavx512bw
 * -mavx512vl -mavx512dq -mfma).
 *
 * simplechain.c is compiled once more here with SC__KERNELS_ONLY: its whole per-slice
 * pipeline (input gather, fused dense forward + activation, loss, fused pullback) is
 * compiled with this file's -m flags, with the float dense kernels taken from
 * vec_f32.h (explicit vector code) and the double ones auto-vectorized from the
 * portable source. The tables exported below are what the dispatcher in simplechain.c
 * selects when the CPU supports AVX512 (SC_ISA=avx512 forces them).
 */
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "avx512"
#define SC__KT_EXPORT_F32 sc__kt_f32_avx512
#define SC__KT_EXPORT_F64 sc__kt_f64_avx512
#define SC__VEC_F32 1 /* float kernels from kernels/vec_f32.h */
#define SC__VEC_F64 1 /* the double lane fold from kernels/vec_f64.h */
#define VOB 8         /* float rows per register block: 8 accumulators of 16 floats */
#define SC__OB 8      /* the same for the portable (double) kernels */
#include "../simplechain.c"

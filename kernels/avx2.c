/* kernels/avx2.c — the kernel set for CPUs with AVX2 (built with -mavx2 -mfma).
 *
 * simplechain.c is compiled once more here with SC__KERNELS_ONLY: its whole per-slice
 * pipeline (input gather, fused dense forward + activation, loss, fused pullback) is
 * compiled with this file's -m flags, with the float kernels taken from the vector
 * kernels of simplechain.c (explicit vector code) and most double ones auto-vectorized
 * from the portable source. The tables exported below are what the dispatcher in simplechain.c
 * selects when the CPU supports AVX2 (SC_ISA=avx2 forces them).
 */
/* Built without its -m flags (a drop-in build: cc -O2 app.c simplechain.c kernels/avx2.c
 * kernels/avx512.c), the file asks for them itself, for every function in it; the Makefile's flags
 * and these pragmas give the same code (floating-point contraction included, on which the vector
 * kernels' multiply-adds rely; GCC also gets -O3 for this file when optimising at all). */
#if !defined(__AVX2__) || !defined(__FMA__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC target("avx2,fma")
#if defined(__OPTIMIZE__) /* GCC's -O2 vectorises too little of these loops: 2.2x slower */
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#else
#pragma GCC optimize("fp-contract=fast", "no-math-errno")
#endif
#endif
#endif
#define SC__ISA_AVX2 1
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "avx2"
#define SC__KT_EXPORT_F32 sc__kt_f32_avx2
#define SC__KT_EXPORT_F64 sc__kt_f64_avx2
#define SC__VEC_F32 1 /* the float vector kernels */
#define SC__VEC_F64 1 /* the double vector kernels (lane fold, dot-form dW) */
#define VOB 6         /* float rows per register block: 6 x 2 accumulators of 8 floats (NVB) */
#define SC__OB 4      /* the same for the portable (double) kernels */
#include "../simplechain.c"
#if defined(__clang__) && (!defined(__AVX2__) || !defined(__FMA__))
#pragma clang attribute pop
#endif

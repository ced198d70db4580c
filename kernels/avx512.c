/* kernels/avx512.c — the kernel set for CPUs with AVX512 (built with -mavx512f -mavx512bw
 * -mavx512vl -mavx512dq -mfma).
 *
 * simplechain.c is compiled once more here with SC__KERNELS_ONLY: its whole per-slice
 * pipeline (input gather, fused dense forward + activation, loss, fused pullback) is
 * compiled with this file's -m flags, with the float kernels taken from the vector
 * kernels of simplechain.c (explicit vector code) and most double ones auto-vectorized
 * from the portable source. The tables exported below are what the dispatcher in simplechain.c
 * selects when the CPU supports AVX512 (SC_ISA=avx512 forces them).
 */
/* Built without its -m flags (a drop-in build: cc -O2 app.c simplechain.c kernels/avx2.c
 * kernels/avx512.c), the file asks for them itself, for every function in it; the Makefile's flags
 * and these pragmas give the same code (floating-point contraction included, on which the vector
 * kernels' multiply-adds rely; GCC also gets -O3 for this file when optimising at all). */
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) ||                   \
    !defined(__AVX512DQ__)
#if defined(__clang__)
#pragma clang attribute push(                                                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")
#if defined(__OPTIMIZE__) /* GCC's -O2 vectorises too little of these loops: 2.2x slower */
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#else
#pragma GCC optimize("fp-contract=fast", "no-math-errno")
#endif
#endif
#endif
#define SC__ISA_AVX512 1
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "avx512"
#define SC__KT_EXPORT_F32 sc__kt_f32_avx512
#define SC__KT_EXPORT_F64 sc__kt_f64_avx512
#define SC__VEC_F32 1 /* the float vector kernels */
#define SC__VEC_F64 1 /* the double vector kernels (lane fold, dot-form dW) */
#define VOB 8         /* float rows per register block: 8 accumulators of 16 floats */
#define SC__OB 8      /* the same for the portable (double) kernels */
#include "../simplechain.c"
#if defined(__clang__) && (!defined(__AVX512F__) || !defined(__AVX512BW__) ||                      \
                           !defined(__AVX512VL__) || !defined(__AVX512DQ__))
#pragma clang attribute pop
#endif

/* kernels/avx512/begin.h — opens the AVX-512 kernel set (kernels/avx512/avx512.c): its target, its
 * name, its register blocking; kernels/avx512/end.h closes it.
 *
 * The target comes from the compiler's flags where they were given (the Makefile's -mavx512f
 * -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mprefer-vector-width=512 -ffp-contract=fast), else
 * from these pragmas, for every function of the set: a drop-in build (cc -O2 app.c simplechain.c
 * kernels/avx2/avx2.c kernels/avx512/avx512.c) needs no flags. The flags and the pragmas give the
 * same code (floating-point contraction included, on which the vector kernels' multiply-adds rely;
 * GCC also gets -O3 for the set when optimising at all: its -O2 vectorises too little of these
 * loops, 2.2x slower). In the two drop-in files' built-in set (SC__BUILTIN_PASS,
 * src/builtin_sets.h) the pragmas always apply. */
#ifdef SC__BUILTIN_PASS
#if defined(__clang__)
#pragma clang attribute push(                                                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#endif
#define SC__AVX512_POP 1
#define SC__KT_LINKAGE static
#define SC__KT_EXPORT_F32 sc__kt_f32_avx512in
#define SC__KT_EXPORT_F64 sc__kt_f64_avx512in
#include "names.h"
#else
#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) ||                   \
    !defined(__AVX512DQ__)
#if defined(__clang__)
#pragma clang attribute push(                                                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#define SC__AVX512_POP 1
#elif defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")
#if defined(__OPTIMIZE__)
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#else
#pragma GCC optimize("fp-contract=fast", "no-math-errno")
#endif
#endif
#endif
#define SC__KT_EXPORT_F32 sc__kt_f32_avx512
#define SC__KT_EXPORT_F64 sc__kt_f64_avx512
#endif
#define SC__ISA_AVX512 1
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "avx512"
#define SC__VEC_F32 1 /* the float vector kernels (kernels/x86/f32.h) */
#define SC__VEC_F64 1 /* the double vector kernels (kernels/x86/f64.h: lane fold, dot-form dW) */
#define VOB 8         /* float rows per register block: 8 accumulators of 16 floats */
#define SC__OB 8      /* the same for the portable (double) kernels */

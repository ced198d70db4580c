/* src/typed/begin.h — opens one instantiation of the typed code (the files of src/typed/) for the
 * element type SC__T (float or double), named by SC__TN(name) (functions: name_f32, name_f64, with
 * a kernel set's suffix in kernels/) and SC__TT(name) (types, shared by all sets), with SC__F32 1
 * for float. The translation unit defines those four, includes this file, the typed files it
 * compiles, and src/typed/end.h, which undefines what they defined. A kernel set
 * (kernels/avx2/avx2.c, ...) defines SC__KERNELS_ONLY: it compiles the kernels and the slice
 * pipeline, not the entry points. */
/* GCC vectorises these loops at -O3, and too few of them at -O2 (its "very cheap" cost model
 * leaves loops whose trip count is not a known multiple of the vector length: the portable
 * toy ran 3x slower at -O2). So a drop-in build at -O2 gets this section at -O3; the
 * arithmetic is the same (no reassociation, no contraction is asked for), so are the results.
 * Clang vectorises at -O2 already. SC_NO_O3_PRAGMA opts out. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) &&                           \
    !defined(__OPTIMIZE_SIZE__) && !defined(SC_NO_O3_PRAGMA) && !defined(SC__KERNELS_ONLY)
#pragma GCC push_options
#pragma GCC optimize("O3")
#define SC__POP_OPTIONS 1
#endif
#ifndef SC__OB
#define SC__OB 4 /* output rows per register block; ISA files may raise it */
#endif
#define SC__IC 16 /* columns of the dW block */
#ifndef SC__CW
/* samples per column chunk of the portable dense forward and dx: their OB x CW accumulators
 * stay in registers (OB x TW of them spilled: double on AVX2 needs 32 ymm for 4 x 32).
 * Each sum keeps its order, so the chunking changes no bits. */
#define SC__CW 8
#endif
#if SC__TW % SC__CW != 0
#error "SC__CW must divide the tile width"
#endif
#ifndef SC__KSTATIC /* kernels: an ISA file may replace some, so unused is fine there */
#if defined(SC__KERNELS_ONLY) && defined(__GNUC__)
#define SC__KSTATIC static __attribute__((unused))
#else
#define SC__KSTATIC static
#endif
#endif

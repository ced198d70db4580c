/* src/builtin_sets.h — the built-in AVX2 and AVX-512 kernel sets of the two drop-in files: the
 * last part of the generated simplechain.c (scripts/amalgamate.py), never compiled in the tree's
 * build, which compiles kernels/avx2/avx2.c and kernels/avx512/avx512.c on their own. Each set is
 * that file exactly, its target given by pragma (SC__BUILTIN_PASS: kernels/avx2/begin.h), its
 * functions' names ending in _f32_avx2 ..., its tables sc__kt_f32_avx2in ... static. Last in the
 * file, so that the pragmas (and the macros of the vector kernels) reach nothing else.
 * src/dispatch.c decides whether they are compiled (SC__BUILTIN_AVX2, SC__BUILTIN_AVX512). */
#if SC__BUILTIN_AVX2 || SC__BUILTIN_AVX512
#define SC__BUILTIN_PASS 1
/* clang warns of a static inline function left unused in the file it compiles (not in a header,
 * as in the tree's build): a set's vector width leaves some helpers unused */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wunused-function"
#endif
#endif
#if SC__BUILTIN_AVX2
#include "../kernels/avx2/avx2.c"
#endif
#if SC__BUILTIN_AVX512
#include "../kernels/avx512/avx512.c"
#endif
#if (SC__BUILTIN_AVX2 || SC__BUILTIN_AVX512) && defined(__clang__)
#pragma clang diagnostic pop
#endif

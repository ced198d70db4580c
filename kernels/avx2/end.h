/* kernels/avx2/end.h — closes the AVX2 + FMA kernel set opened by kernels/avx2/begin.h. */
#include "../x86/end.h"
#undef SC__ISA_AVX2
#undef SC__KERNELS_ONLY
#undef SC__ISA_NAME
#undef SC__VEC_F32
#undef SC__VEC_F64
#undef VOB
#undef SC__OB
#undef SC__KT_LINKAGE
#undef SC__KT_EXPORT_F32
#undef SC__KT_EXPORT_F64
#ifdef SC__AVX2_POP
#undef SC__AVX2_POP
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

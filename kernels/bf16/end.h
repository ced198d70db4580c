/* kernels/bf16/end.h — closes the AVX512_BF16 kernels opened by kernels/bf16/begin.h. */
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

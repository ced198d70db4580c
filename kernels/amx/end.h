/* kernels/amx/end.h — closes the AMX kernels opened by kernels/amx/begin.h. */
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

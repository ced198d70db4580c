/* kernels/amx/begin.h — opens the AMX kernels (kernels/amx/amx.c): every function after it
 * compiled for AMX-TILE and AMX-BF16, by pragma. kernels/amx/end.h closes it. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
#endif

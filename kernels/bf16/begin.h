/* kernels/bf16/begin.h — opens the AVX512_BF16 kernels (kernels/bf16/bf16.c): every function
 * after it compiled for AVX512F, BW, VL and BF16 (the CPUs with AVX512_BF16 have all four;
 * sc__cpu_bf16 checks them), by pragma: no -m flags. kernels/bf16/end.h closes it.
 * GCC at -O2 (the two drop-in files' `cc -O2`) leaves the register blocks' loops over their
 * accumulator arrays rolled, the accumulators on the stack: LeNet5's bf16 epoch took 4 times the
 * make build's (conv2's forward at 84 GFLOP/s a thread against 378, on an AMD Zen 5). So these
 * kernels are compiled at -O3 there too, as the portable kernels are; the trained parameters
 * are the same bits as at -O2 (and with clang). SC_NO_O3_PRAGMA opts out. */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))),      \
                             apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#if defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__) && !defined(SC_NO_O3_PRAGMA)
#pragma GCC optimize("O3")
#endif
#endif

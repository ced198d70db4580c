/* kernels/avx512.c — the kernel set for CPUs with AVX512, compiled with: -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mavx2
 *
 * The portable kernels of simplechain.c are compiled once more here (through
 * SC__KERNELS_ONLY), so the compiler vectorizes them for this ISA; a kernel may be
 * replaced by a hand-written one where that measures faster. The table below is what
 * the dispatcher in simplechain.c picks when the CPU supports AVX512.
 */
#define SC__KERNELS_ONLY 1
#define SC__OB 8 /* output rows per register block for this register file */
#include "../simplechain.c"

const sc__kt_f32 sc__kt_f32_avx512 = {"avx512", sc__dense_fwd_f32, sc__dense_dw_f32, sc__dense_dx_f32,
                                    sc__act_bwd_f32};
const sc__kt_f64 sc__kt_f64_avx512 = {"avx512", sc__dense_fwd_f64, sc__dense_dw_f64, sc__dense_dx_f64,
                                    sc__act_bwd_f64};

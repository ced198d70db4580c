/* kernels/amx/amx.c — the bf16 precision's GEMM on AMX tiles (Intel Sapphire Rapids and later:
 * TDPBF16PS), for src/precision.c's SC_BF16_KERNELS=amx: the blockings of kernels/amx/blocking.h
 * on the tile instructions. Called only where the CPU has AMX-BF16 and Linux grants the tile
 * state (sc__cpu_amx). */
#include "../../src/internal.h"

#ifdef SC__HAVE_AMX
#include "blocking.h"

#include "begin.h"

/* the AMX GEMM itself (SC_BF16_KERNELS=amx, on a CPU with AMX-BF16); written from Intel's
 * documentation, checked through its model (src/bf16_model.c) and run on an Intel Emerald Rapids
 * (2026-11-24) */
#define SC__TH_CFG(c) _tile_loadconfig(c)
#define SC__TH_ZERO(t) _tile_zero(t)
#define SC__TH_LOAD(t, p, s) _tile_loadd(t, p, (long)(s))
#define SC__TH_STORE(t, p, s) _tile_stored(t, p, (long)(s))
#define SC__TH_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define SC__TH_RELEASE() _tile_release()
SC__INT void sc__bf16_gemm_amx_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                   size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                   size_t M, size_t N, size_t K2, size_t G,
                                   int acc){SC__AMX_GEMM_BODY(SC__TH)} SC__INT
    void sc__bf16_gemm_amx_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                sc__grp_off ao, const uint32_t *B0, size_t ldb, sc__grp_off bo,
                                size_t M, size_t N, size_t K2,
                                size_t G){SC__AMX_SUMG_BODY(SC__TH)} SC__INT
    void sc__bf16_gemm_amx(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                           size_t ldb, size_t M, size_t N, size_t K2, int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}

#include "end.h"
#endif /* SC__HAVE_AMX */

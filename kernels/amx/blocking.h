/* kernels/amx/blocking.h — the AMX GEMM's blocking, written once over tile operations (OPS##_LOAD
 * etc.) and compiled twice: on the AMX tiles (kernels/amx/amx.c) and on a portable model of them
 * (src/bf16_model.c). */
#ifndef SC_AMX_BLOCKING_H
#define SC_AMX_BLOCKING_H

/* ---- the AMX-BF16 GEMM (Intel: 8 tile registers of up to 16 rows x 64 bytes, each tile's
 * shape set by LDTILECFG; TDPBF16PS C += A B with A rows x kc pairs, B kc x cols pairs, C rows x
 * cols floats). The operand layouts are ours already: a row of A holds pairs along k, a row of
 * B holds the pairs of k for 16 columns (Intel's "VNNI" layout of B). Blocks of 16 x 32 of C in
 * two tiles (tmm0, 1), k in steps of 16 pairs: A in tmm2, B in tmm3 and 4; the last k-step of
 * fewer than 16 pairs in tmm5 (A), tmm6 and 7 (B). The tiles are configured to the block's own
 * shape (rows of C at M's edge, columns at N's, pairs at K's), so an edge is read and written in
 * place, never through a padded copy: measured on an Intel Xeon with AMX (2026-11-24,
 * bench/bf16_gemm.c), a zero-padded copy before a tile load made LeNet5's GEMMs 2.5 to 10 times
 * slower than the same work in whole tiles. A call loads a configuration for each block shape
 * it meets (at most four: the inner blocks, M's edge, N's edge, the corner) and releases the
 * tiles at its end (the tile state is per thread; LDTILECFG + TILERELEASE cost about 120 ns
 * there). Intel's pseudocode of TDPBF16PS (the intrinsics guide) adds the two products of a
 * pair one after the other, the even element first, each step a float FMA with denormals read
 * as and flushed to zero, round to nearest even; the SDM's newer text accumulates the even and
 * odd products apart and adds them at the end. The tests compare the kernel with the double
 * reference on the same operands (tight tolerance), not bit for bit. The body is written once
 * over tile operations (OPS##_LOAD etc.) and compiled twice: with the AMX instructions
 * (sc__bf16_gemm_amx) and with a portable model of the tiles (sc__bf16_gemm_amx_model, the
 * intrinsics guide's order, the shapes checked as TDPBF16PS checks them) that runs on any CPU,
 * so the blocking, the edges and the strides are tested where AMX is not. */
typedef struct {
  uint8_t palette, start_row, reserved0[14];
  uint16_t colsb[8], reserved1[8];
  uint8_t rows[8], reserved2[8];
} sc__amx_cfg; /* LDTILECFG's 64 bytes */
/* the configuration of a block of mr rows of C, nc0 + nc1 columns (nc1 = 0: one tile), kf whole
 * 16-pair steps (0 or 1: are there any) and a last step of kr pairs; unused tiles 0 x 0 */
static inline void sc__amx_setcfg(sc__amx_cfg *c, unsigned mr, unsigned nc0, unsigned nc1,
                                  unsigned kf, unsigned kr) {
  memset(c, 0, sizeof *c);
  c->palette = 1;
  const unsigned r[8] = {mr,          nc1 ? mr : 0, kf ? mr : 0, kf ? 16 : 0, kf && nc1 ? 16 : 0,
                         kr ? mr : 0, kr,           nc1 ? kr : 0};
  const unsigned w[8] = {nc0,          nc1, kf ? 16 : 0,  kf ? nc0 : 0,
                         kf ? nc1 : 0, kr,  kr ? nc0 : 0, kr ? nc1 : 0};
  for (int t = 0; t < 8; t++)
    if (r[t] && w[t]) c->rows[t] = (uint8_t)r[t], c->colsb[t] = (uint16_t)(4 * w[t]);
}
/* the two bodies' common parts: a block of C at (m0, n0), its shape and (when it changes) its
 * configuration; and its k-steps, C's tiles += A's rows at a0 times B's columns at b0 */
#define SC__AMX_BLOCK_CFG(OPS)                                                                     \
  size_t mr = M - m0 < 16 ? M - m0 : 16, nc0 = N - n0 < 16 ? N - n0 : 16;                          \
  size_t nc1 = N - n0 <= 16 ? 0 : N - n0 - 16 < 16 ? N - n0 - 16 : 16;                             \
  size_t key = mr | nc0 << 5 | nc1 << 10;                                                          \
  if (key != cur) { /* a block of another shape: its configuration */                              \
    sc__amx_setcfg(&cfg, (unsigned)mr, (unsigned)nc0, (unsigned)nc1, K16 > 0, (unsigned)kr);       \
    __asm__ volatile("" : : "r"(&cfg) : "memory"); /* cfg in memory before LDTILECFG */            \
    OPS##_CFG(&cfg);                                                                               \
    cur = key;                                                                                     \
  }
#define SC__AMX_KSTEPS(OPS, a0, b0)                                                                \
  for (size_t k0 = 0; k0 < K16; k0 += 16) {                                                        \
    OPS##_LOAD(2, (a0) + k0, lda * 4);                                                             \
    OPS##_LOAD(3, (b0) + k0 * ldb, ldb * 4);                                                       \
    OPS##_DP(0, 2, 3);                                                                             \
    if (nc1) {                                                                                     \
      OPS##_LOAD(4, (b0) + k0 * ldb + 16, ldb * 4);                                                \
      OPS##_DP(1, 2, 4);                                                                           \
    }                                                                                              \
  }                                                                                                \
  if (kr) { /* the last k-step, of fewer than 16 pairs */                                          \
    OPS##_LOAD(5, (a0) + K16, lda * 4);                                                            \
    OPS##_LOAD(6, (b0) + K16 * ldb, ldb * 4);                                                      \
    OPS##_DP(0, 5, 6);                                                                             \
    if (nc1) {                                                                                     \
      OPS##_LOAD(7, (b0) + K16 * ldb + 16, ldb * 4);                                               \
      OPS##_DP(1, 5, 7);                                                                           \
    }                                                                                              \
  }
#define SC__AMX_GEMM_BODY(OPS)                                                                     \
  {                                                                                                \
    sc__amx_cfg cfg;                                                                               \
    size_t K16 = K2 / 16 * 16, kr = K2 - K16, cur = SIZE_MAX;                                      \
    for (size_t g_ = 0; g_ < G; g_++) { /* the groups: C and A at their offsets */                 \
      float *const C = C0 + (co.off ? co.off[g_ * co.step] * co.scale : g_ * co.stride);           \
      const uint32_t *const A = A0 + (ao.off ? ao.off[g_ * ao.step] * ao.scale : g_ * ao.stride);  \
      for (size_t m0 = 0; m0 < M; m0 += 16)                                                        \
        for (size_t n0 = 0; n0 < N; n0 += 32) {                                                    \
          SC__AMX_BLOCK_CFG(OPS)                                                                   \
          float *c0 = C + m0 * ldc + n0;                                                           \
          if (acc) {                                                                               \
            OPS##_LOAD(0, c0, ldc * 4);                                                            \
            if (nc1) OPS##_LOAD(1, c0 + 16, ldc * 4);                                              \
          } else {                                                                                 \
            OPS##_ZERO(0);                                                                         \
            if (nc1) OPS##_ZERO(1);                                                                \
          }                                                                                        \
          SC__AMX_KSTEPS(OPS, A + m0 * lda, B + n0)                                                \
          OPS##_STORE(0, c0, ldc * 4);                                                             \
          if (nc1) OPS##_STORE(1, c0 + 16, ldc * 4);                                               \
        }                                                                                          \
    }                                                                                              \
    if (cur != SIZE_MAX) OPS##_RELEASE();                                                          \
    __asm__ volatile("" ::: "memory"); /* the tile stores wrote C */                               \
  }

/* the summed grouped form (sc__bf16_gemm_sumg_fn): per block of C the groups one after the
 * other into the same accumulator tiles, stored once */
#define SC__AMX_SUMG_BODY(OPS)                                                                     \
  {                                                                                                \
    sc__amx_cfg cfg;                                                                               \
    size_t K16 = K2 / 16 * 16, kr = K2 - K16, cur = SIZE_MAX;                                      \
    for (size_t m0 = 0; m0 < M; m0 += 16)                                                          \
      for (size_t n0 = 0; n0 < N; n0 += 32) {                                                      \
        SC__AMX_BLOCK_CFG(OPS)                                                                     \
        OPS##_ZERO(0);                                                                             \
        if (nc1) OPS##_ZERO(1);                                                                    \
        for (size_t g = 0; g < G; g++) {                                                           \
          SC__AMX_KSTEPS(                                                                          \
              OPS, A0 + (ao.off ? ao.off[g * ao.step] * ao.scale : g * ao.stride) + m0 * lda,      \
              B0 + (bo.off ? bo.off[g * bo.step] * bo.scale : g * bo.stride) + n0)                 \
        }                                                                                          \
        float *c0 = C + m0 * ldc + n0;                                                             \
        OPS##_STORE(0, c0, ldc * 4);                                                               \
        if (nc1) OPS##_STORE(1, c0 + 16, ldc * 4);                                                 \
      }                                                                                            \
    if (cur != SIZE_MAX) OPS##_RELEASE();                                                          \
    __asm__ volatile("" ::: "memory");                                                             \
  }
#endif /* SC_AMX_BLOCKING_H */

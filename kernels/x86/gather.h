/* kernels/x86/gather.h — a tile's input gathered from row-major samples (with the NaN / Inf
 * check), and the tile's transpose for the dot-form dW. */
/* The gathers' NaN / Inf check (sc__gather's chk): x * 0 + a stays 0 while x is finite and is
 * NaN from the first NaN or Inf on, one FMA per vector (the FMA pipes are idle in a gather) into
 * 4 accumulators; v_chk_any says whether any lane of them is NaN. The accumulators are indexed
 * by constants only, so that they stay in registers (a[k & 3] with k counted at run time put
 * them in memory: the AVX2 micro-benchmark 3.0 -> 3.4 us). */
static inline __attribute__((always_inline)) void v_chk_acc(sc_vf *a, sc_vf x, int k) {
  a[k & 3] = V_FMA(x, V_BCAST(0.0f), a[k & 3]);
}
/* the check on n vectors at v, v + stride, .. (floats) */
static inline __attribute__((always_inline)) void v_chk_run(sc_vf *a, const float *v, size_t n,
                                                            size_t stride) {
  sc_vf a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], z = V_BCAST(0.0f);
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    a0 = V_FMA(V_ROW(v + k * stride, 0), z, a0);
    a1 = V_FMA(V_ROW(v + (k + 1) * stride, 0), z, a1);
    a2 = V_FMA(V_ROW(v + (k + 2) * stride, 0), z, a2);
    a3 = V_FMA(V_ROW(v + (k + 3) * stride, 0), z, a3);
  }
  for (; k < n; k++) a0 = V_FMA(V_ROW(v + k * stride, 0), z, a0);
  a[0] = a0, a[1] = a1, a[2] = a2, a[3] = a3;
}
static inline __attribute__((always_inline)) int v_chk_any(const sc_vf *a) {
  sc_vf s = (a[0] + a[1]) + (a[2] + a[3]);
#if VW == 16
  return _mm512_cmp_ps_mask((__m512)s, (__m512)s, _CMP_UNORD_Q) != 0;
#else
  return _mm256_movemask_ps(_mm256_cmp_ps((__m256)s, (__m256)s, _CMP_UNORD_Q)) != 0;
#endif
}
/* the check on a gathered tile of cols rows */
static inline __attribute__((always_inline)) int v_tile_bad(const float *tile, size_t cols) {
  sc_vf a[4] = {V_BCAST(0.0f), V_BCAST(0.0f), V_BCAST(0.0f), V_BCAST(0.0f)};
  v_chk_run(a, tile, cols * NV, VW);
  return v_chk_any(a);
}

/* Columns c0..c0 + 3 of 8 rows r[0..7] as 4 vectors of 8 samples, stored at o, o + SC__TW,
 * o + 2 SC__TW, o + 3 SC__TW: the 128-bit pieces of rows k and k + 4 in the two lanes of register
 * k (a load and an insert from memory), then a 4 x 4 transpose within the lanes (2 unpacks and
 * 2 shuffles per 4 outputs). The gathers' fast path (Zen 4, 2026-11-24). */
static inline __attribute__((always_inline)) void v_gather4x8(float *restrict o,
                                                              const float *const *r, size_t c0) {
  __m256 A[4];
  for (int k = 0; k < 4; k++)
    A[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(r[k] + c0)),
                                _mm_loadu_ps(r[k + 4] + c0), 1);
  __m256 t0 = _mm256_unpacklo_ps(A[0], A[1]), t1 = _mm256_unpackhi_ps(A[0], A[1]);
  __m256 t2 = _mm256_unpacklo_ps(A[2], A[3]), t3 = _mm256_unpackhi_ps(A[2], A[3]);
  _mm256_store_ps(o, _mm256_shuffle_ps(t0, t2, 0x44));
  _mm256_store_ps(o + SC__TW, _mm256_shuffle_ps(t0, t2, 0xEE));
  _mm256_store_ps(o + 2 * SC__TW, _mm256_shuffle_ps(t1, t3, 0x44));
  _mm256_store_ps(o + 3 * SC__TW, _mm256_shuffle_ps(t1, t3, 0xEE));
}

/* The gathers' G rows of the tile G j .. G j + G - 1: row[r] sample t = G j + r's row of src
 * (idx[b0 + t] with idx, else b0 + t), NULL from t = n on (the padding); rr[r] the same with
 * row 0 for the padding (read by v_gather4x8, cleared after). Returns 0, the group's columns
 * stored as zeros, when all G are padding */
static inline __attribute__((always_inline)) int
v_gather_rows(const float **row, const float **rr, float *restrict tile, size_t G, size_t j,
              const float *src, const size_t *idx, size_t b0, size_t n, size_t cols) {
  if (G * j >= n) {
    for (size_t k = 0; k < cols; k++) memset(tile + k * SC__TW + G * j, 0, G * sizeof *tile);
    return 0;
  }
  for (size_t r = 0; r < G; r++) {
    size_t t = G * j + r;
    row[r] = t < n ? src + (idx ? idx[b0 + t] : b0 + t) * cols : NULL;
  }
  for (size_t r = 0; r < G; r++) rr[r] = row[r] ? row[r] : row[0];
  return 1;
}

/* The first two stages of an 8 x 8 transpose within each 128-bit lane, on 8 registers r[0..7]
 * of width W (256 or 512): unpack pairs of rows into t, shuffle pairs of those into u (u[k] then
 * holds elements k % 4 .. of rows 0-3 and 4-7 in each lane's halves, as the lane swaps after
 * expect). v_transpose8, v_transpose16 (twice) and v_gather8x16 finish it their own ways. */
#define V_UNPACK_SHUF8(W, r, t, u)                                                                 \
  do {                                                                                             \
    for (int k_ = 0; k_ < 4; k_++) {                                                               \
      (t)[2 * k_] = _mm##W##_unpacklo_ps((r)[2 * k_], (r)[2 * k_ + 1]);                            \
      (t)[2 * k_ + 1] = _mm##W##_unpackhi_ps((r)[2 * k_], (r)[2 * k_ + 1]);                        \
    }                                                                                              \
    for (int k_ = 0; k_ < 2; k_++) {                                                               \
      (u)[4 * k_] = _mm##W##_shuffle_ps((t)[4 * k_], (t)[4 * k_ + 2], 0x44);                       \
      (u)[4 * k_ + 1] = _mm##W##_shuffle_ps((t)[4 * k_], (t)[4 * k_ + 2], 0xEE);                   \
      (u)[4 * k_ + 2] = _mm##W##_shuffle_ps((t)[4 * k_ + 1], (t)[4 * k_ + 3], 0x44);               \
      (u)[4 * k_ + 3] = _mm##W##_shuffle_ps((t)[4 * k_ + 1], (t)[4 * k_ + 3], 0xEE);               \
    }                                                                                              \
  } while (0)

/* In-register transpose of 8 rows of 8 floats: r[k] becomes column k (unpack pairs, shuffle
 * within 128-bit lanes, then swap the lanes) */
static inline __attribute__((always_inline)) void v_transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  V_UNPACK_SHUF8(256, r, t, u);
  for (int k = 0; k < 4; k++) {
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
  }
}

#if defined(__AVX512F__) || defined(SC__ISA_AVX512)
#define SC__VEC_GATHER 1
/* In-register transpose of 16 rows of 16 floats: r[k] becomes column k. Four stages:
 * unpack pairs of rows, shuffle within 128-bit lanes, then two 128-bit lane shuffles. */
static inline __attribute__((always_inline)) void v_transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  V_UNPACK_SHUF8(512, r, t, u);
  V_UNPACK_SHUF8(512, r + 8, t + 8, u + 8);
  for (int m = 0; m < 4; m++) {
    __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88);
    __m512 w0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    __m512 v1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
    __m512 w1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[m + 8] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
    r[m + 4] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[m + 12] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
  }
}
/* xT[t][i] = x[i][t] (t < SC__TW lanes, i < I), xT's rows ld >= I apart, zeros from I to ld:
 * sc__transpose's result (a copy: the same bits), 16 x 16 blocks transposed in registers where
 * that loop went element by element (LeNet5's 256-input dense layer: 2.3 -> 0.46 us a tile) */
static void vec_transpose_f32(float *restrict xT, const float *restrict x, size_t I, size_t ld) {
  size_t i = 0;
  for (; i + 16 <= I; i += 16)
    for (int h = 0; h < SC__TW / 16; h++) {
      __m512 r[16];
      for (int q = 0; q < 16; q++) r[q] = _mm512_loadu_ps(x + (i + (size_t)q) * SC__TW + 16 * h);
      v_transpose16(r);
      for (int q = 0; q < 16; q++) _mm512_storeu_ps(xT + (size_t)(16 * h + q) * ld + i, r[q]);
    }
  for (int t = 0; t < SC__TW; t++) {
    for (size_t k = i; k < I; k++) xT[(size_t)t * ld + k] = x[k * SC__TW + (size_t)t];
    for (size_t k = I; k < ld; k++) xT[(size_t)t * ld + k] = 0;
  }
}

/* Columns c0..c0 + 7 of 16 consecutive rows b, b + cols, .. b + 15 cols as 8 vectors of 16
 * samples, stored at o, o + SC__TW, .., o + 7 SC__TW: register k holds rows k and k + 8 (one
 * 256-bit load each), an 8 x 8 transpose runs in both halves at once (unpacks and in-lane
 * shuffles), and a two-table permute per output joins the halves' 128-bit pieces: an insert
 * and 3 512-bit shuffles per output of 16 samples, the rows addressed from one pointer
 * (v_gather4x8: 2 inserts and 4 256-bit shuffles per 16 samples, from 16 row pointers, which do
 * not fit the integer registers). Alone, 6 tiles of 24 columns from L1 on Zen 5: 190 -> 100
 * ns; the micro-benchmark 2.24 -> 2.08 us (Zen 5, 2026-11-25; not measured on Zen 4 or Intel, whose
 * 512-bit shuffles cost more). */
static inline __attribute__((always_inline)) void v_8x16_store(float *restrict o, __m512 r[8],
                                                               sc_vf *chk) {
  const __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
  const __m512i hi = _mm512_setr_epi32(4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
  __m512 t[8], u[8];
  if (chk) {
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++) v_chk_acc(chk, (sc_vf)r[k], k);
  }
  V_UNPACK_SHUF8(512, r, t, u);
  for (int k = 0; k < 4; k++) {
    _mm512_store_ps(o + k * SC__TW, _mm512_permutex2var_ps(u[k], lo, u[4 + k]));
    _mm512_store_ps(o + (k + 4) * SC__TW, _mm512_permutex2var_ps(u[k], hi, u[4 + k]));
  }
}
static inline __attribute__((always_inline)) void
v_gather8x16(float *restrict o, const float *b, size_t cols, size_t c0, sc_vf *chk, size_t nr) {
  __m512 r[8];
  /* nr rows only (a partial tile's last group, 1 <= nr <= 16): the others read as zeros */
  for (int k = 0; k < 8; k++)
    r[k] = _mm512_insertf32x8(
        _mm512_castps256_ps512((size_t)k < nr ? _mm256_loadu_ps(b + k * cols + c0)
                                              : _mm256_setzero_ps()),
        (size_t)k + 8 < nr ? _mm256_loadu_ps(b + (k + 8) * cols + c0) : _mm256_setzero_ps(), 1);
  v_8x16_store(o, r, chk);
}
/* the same from 16 row pointers rr (gathered rows: LeNet5's minibatches; the pointers are
 * reloaded per block, 16 rows' addresses do not fit the integer registers) */
static inline __attribute__((always_inline)) void
v_gather8x16p(float *restrict o, const float *const *rr, size_t c0, sc_vf *chk) {
  __m512 r[8];
  for (int k = 0; k < 8; k++)
    r[k] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(rr[k] + c0)),
                              _mm256_loadu_ps(rr[k + 8] + c0), 1);
  v_8x16_store(o, r, chk);
}

/* columns 0, 8, .. of nr rows (v_gather8x16) into the tile at o; returns the first column left */
static inline __attribute__((always_inline)) size_t
v_gather_cols8(float *restrict o, const float *b, size_t cols, sc_vf *chk, size_t nr) {
  size_t c0 = 0;
  for (; c0 + 8 <= cols; c0 += 8) v_gather8x16(o + c0 * SC__TW, b, cols, c0, chk, nr);
  return c0;
}

/* tile (cols x SC__TW, feature-major) <- samples b0..b0+n (rows idx[b] or b) of a
 * row-major array: 16 x 16 blocks loaded row by row (masked at the column tail),
 * transposed in registers; padding samples become 0. bad: NULL, or set to whether a value
 * gathered is NaN or Inf (checked as loaded by v_gather8x16, else in the tile after) */
static int vec_gather_f32(float *restrict tile, const float *restrict src, size_t cols,
                          const size_t *idx, size_t b0, size_t n, int *bad) {
  sc_vf chk[4] = {V_BCAST(0.0f), V_BCAST(0.0f), V_BCAST(0.0f), V_BCAST(0.0f)};
  size_t from[SC__TW / 16] = {0}; /* group j's columns from[j].. are checked in the tile */
  if (!idx && n == SC__TW && (cols == 2 || cols == 4)) {
    /* a whole tile of consecutive rows with few columns (the toy's 4 inputs and 4
     * targets): the block is 2 * cols vectors, and column c of 16 samples is picked out
     * of them with two-table permutes (lane s takes element c + cols * s) instead of a
     * 16 x 16 transpose that is mostly padding */
    const float *blk = src + b0 * cols;
    for (size_t j = 0; j < SC__TW / 16; j++) {
      const float *g = blk + 16 * j * cols;
      for (size_t c = 0; c < cols; c++) {
        __m512 out;
        if (cols == 2) {
          __m512i ix = _mm512_add_epi32(
              _mm512_set1_epi32((int)c),
              _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
          out = _mm512_permutex2var_ps(_mm512_loadu_ps(g), ix, _mm512_loadu_ps(g + 16));
        } else { /* lanes 0..7 from the first two vectors, 8..15 from the last two */
          __m512i ix = _mm512_add_epi32(
              _mm512_set1_epi32((int)c),
              _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28));
          __m512 lo = _mm512_permutex2var_ps(_mm512_loadu_ps(g), ix, _mm512_loadu_ps(g + 16));
          __m512 hi = _mm512_permutex2var_ps(_mm512_loadu_ps(g + 32), ix, _mm512_loadu_ps(g + 48));
          out = _mm512_mask_blend_ps((__mmask16)0xFF00u, lo, hi);
        }
        _mm512_store_ps(tile + c * SC__TW + 16 * j, out);
        if (bad) v_chk_acc(chk, (sc_vf)out, 0);
      }
    }
    if (bad) *bad = v_chk_any(chk);
    return 1;
  }
  for (size_t j = 0; j < SC__TW / 16; j++) {
    const float *row[16], *rr[16];
    size_t c0 = 0;
    if (!idx && 16 * j < n && cols >= 8) {
      /* consecutive rows, 8 columns at a time: 16 rows, or fewer (a partial tile's last rows,
       * the rest read as zeros: a batch of 200 ends in 8 rows, which took the micro-benchmark's
       * 4 x 8 path 1.6 times as long as a whole tile's gather); chk or NULL passed as such (with
       * the pointer chosen per call, bad ? chk : NULL, GCC kept chk in memory) */
      const float *b = src + (b0 + 16 * j) * cols;
      float *o = tile + 16 * j;
      size_t nr = n - 16 * j;
      if (nr >= 16)
        c0 = bad ? v_gather_cols8(o, b, cols, chk, 16) : v_gather_cols8(o, b, cols, NULL, 16);
      else
        c0 = bad ? v_gather_cols8(o, b, cols, chk, nr) : v_gather_cols8(o, b, cols, NULL, nr);
      from[j] = c0;
      if (c0 == cols) continue;
    }
    if (!v_gather_rows(row, rr, tile, 16, j, src, idx, b0, n, cols)) continue; /* padding */
    if (cols - c0 >= 8) {
      /* gathered rows (idx), 8 columns at a time as above, checked as loaded (padding rows
       * read row 0, checked with it, and are cleared below) */
      float *o = tile + 16 * j;
      if (bad)
        for (; c0 + 8 <= cols; c0 += 8) v_gather8x16p(o + c0 * SC__TW, rr, c0, chk);
      else
        for (; c0 + 8 <= cols; c0 += 8) v_gather8x16p(o + c0 * SC__TW, rr, c0, NULL);
      from[j] = c0;
    }
    if (cols - c0 >= 4) {
      /* 4 columns at a time, 8 rows per 256-bit half (v_gather4x8): 2 shuffles per 8
       * outputs, where the 16 x 16 transpose takes 4 per 16 (on cores whose 512-bit shuffles
       * take two 256-bit pipes, as Zen 4's, the 256-bit form is 30 % faster). Padding rows
       * read row 0 (rr) and are cleared after. */
      for (; c0 + 4 <= cols; c0 += 4) {
        v_gather4x8(tile + c0 * SC__TW + 16 * j, rr, c0);
        v_gather4x8(tile + c0 * SC__TW + 16 * j + 8, rr + 8, c0);
      }
    }
    if (16 * j + 16 > n) { /* the padding rows of the columns done from rr */
      __mmask16 pad = (__mmask16)(0xFFFFu << (n - 16 * j));
      for (size_t k = 0; k < c0; k++)
        _mm512_mask_store_ps(tile + k * SC__TW + 16 * j, pad, _mm512_setzero_ps());
    }
    for (; c0 < cols; c0 += 16) {
      size_t nc = cols - c0 < 16 ? cols - c0 : 16;
      __mmask16 m = (__mmask16)(nc == 16 ? 0xFFFFu : (1u << nc) - 1u);
      __m512 R[16];
      for (int r = 0; r < 16; r++)
        R[r] = row[r] ? _mm512_maskz_loadu_ps(m, row[r] + c0) : _mm512_setzero_ps();
      v_transpose16(R);
      for (size_t k = 0; k < nc; k++) _mm512_store_ps(tile + (c0 + k) * SC__TW + 16 * j, R[k]);
    }
  }
  if (bad) { /* the columns not checked as loaded, in the tile (padding lanes are 0) */
    for (size_t j = 0; j < SC__TW / 16; j++)
      v_chk_run(chk, tile + from[j] * SC__TW + 16 * j, cols - from[j], SC__TW);
    *bad = v_chk_any(chk);
  }
  return 1;
}
#else
#define SC__VEC_GATHER 1

/* AVX2: a whole tile of consecutive rows with 2 or 4 columns (the toy), 8 samples at a time
 * with in-lane transposes; anything else (any width, gathered rows idx, a partial tile) in
 * 8 x 8 blocks loaded row by row (masked at the column tail) and transposed in registers.
 * Data movement only: the same tile as the portable loop. (It was 27 % of the micro
 * benchmark's 24-column valgrad on the portable loop.) */
static int vec_gather_f32(float *restrict tile, const float *restrict src, size_t cols,
                          const size_t *idx, size_t b0, size_t n, int *bad) {
  if (idx || n != SC__TW || (cols != 2 && cols != 4)) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (size_t j = 0; j < SC__TW / 8; j++) {
      const float *row[8], *rr[8];
      if (!v_gather_rows(row, rr, tile, 8, j, src, idx, b0, n, cols)) continue; /* padding */
      size_t c0 = 0;
      if (cols >= 4) {
        /* 4 columns at a time (v_gather4x8), as in the AVX-512 gather (alone, 1 thread, Zen 4:
         * 6 tiles of 24 columns 300 -> 230 ns, of 12 columns 218 -> 129 ns). Padding rows read
         * row 0 (rr) and are cleared after. */
        for (; c0 + 4 <= cols; c0 += 4) v_gather4x8(tile + c0 * SC__TW + 8 * j, rr, c0);
        if (8 * j + 8 > n) { /* lanes n - 8 j .. 7 */
          __m256i pad = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)(n - 8 * j) - 1));
          for (size_t k = 0; k < c0; k++)
            _mm256_maskstore_ps(tile + k * SC__TW + 8 * j, pad, _mm256_setzero_ps());
        }
      }
      for (; c0 < cols; c0 += 8) {
        size_t nc = cols - c0 < 8 ? cols - c0 : 8;
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nc), lane);
        __m256 R[8];
        for (int r = 0; r < 8; r++)
          R[r] = !row[r] ? _mm256_setzero_ps()
                 : nc == 8 ? _mm256_loadu_ps(row[r] + c0)
                           : _mm256_maskload_ps(row[r] + c0, m);
        v_transpose8(R);
        for (size_t k = 0; k < nc; k++) _mm256_store_ps(tile + (c0 + k) * SC__TW + 8 * j, R[k]);
      }
    }
    if (bad) *bad = v_tile_bad(tile, cols);
    return 1;
  }
  const float *blk = src + b0 * cols;
  for (size_t j = 0; j < SC__TW / 8; j++) {
    const float *g = blk + 8 * j * cols;
    float *o = tile + 8 * j;
    if (cols == 4) { /* Vk = rows k | k + 4; two unpack stages give the columns */
      __m256 V[4], T[4];
      for (int k = 0; k < 4; k++)
        V[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(g + 4 * k)),
                                    _mm_loadu_ps(g + 16 + 4 * k), 1);
      T[0] = _mm256_unpacklo_ps(V[0], V[1]);
      T[1] = _mm256_unpackhi_ps(V[0], V[1]);
      T[2] = _mm256_unpacklo_ps(V[2], V[3]);
      T[3] = _mm256_unpackhi_ps(V[2], V[3]);
      _mm256_store_ps(o, _mm256_shuffle_ps(T[0], T[2], 0x44));
      _mm256_store_ps(o + SC__TW, _mm256_shuffle_ps(T[0], T[2], 0xEE));
      _mm256_store_ps(o + 2 * SC__TW, _mm256_shuffle_ps(T[1], T[3], 0x44));
      _mm256_store_ps(o + 3 * SC__TW, _mm256_shuffle_ps(T[1], T[3], 0xEE));
    } else { /* even / odd elements, then the 64-bit quarters put in order */
      __m256 A = _mm256_loadu_ps(g), B = _mm256_loadu_ps(g + 8);
      __m256 c0 = _mm256_shuffle_ps(A, B, 0x88), c1 = _mm256_shuffle_ps(A, B, 0xDD);
      _mm256_store_ps(o, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(c0), 0xD8)));
      _mm256_store_ps(o + SC__TW,
                      _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(c1), 0xD8)));
    }
  }
  if (bad) *bad = v_tile_bad(tile, cols);
  return 1;
}
#endif
#undef V_UNPACK_SHUF8

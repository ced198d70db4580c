/* kernels/x86/bf16_pack.h — the bf16 precision's operand packers on vectors (the layouts of the
 * portable sc__bf16_pack_* in src/internal.h, the same bits). */
/* ---- the bf16 kernels' packers on vectors (the portable sc__bf16_pack_* in their layouts).
 * Their operands are bf16 values already: the bf16 precision rounds the tile's input, every
 * layer's output and every dz before they are packed (and the weights before they are paired),
 * so the upper halves of their bits are those values exactly and the packers take them without
 * rounding again; the portable packers round all the same (the identity on such values), which
 * is what the tests compare these with, bit for bit. Written with 256-bit integer operations,
 * which both x86 vector sets have. Unaligned loads and stores: rows of pairs are R words apart. */
/* 16 floats -> their 8 pairs, (f[2k], f[2k + 1]) in word k */
static inline __attribute__((always_inline)) __m256i v_bf16_pairs16(const float *p) {
  __m256i a = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p), 16);
  __m256i b = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p + 8)), 16);
  /* packus: a0..3 b0..3 | a4..7 b4..7 (the halves fit in 16 bits: no saturation) */
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);
}
/* 8 floats of row a and 8 of row b -> the 8 pairs (a[t], b[t]); b NULL: zeros */
static inline __attribute__((always_inline)) __m256i v_bf16_pairs_ab(const float *a,
                                                                     const float *b) {
  __m256i lo = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(const void *)a), 16);
  if (!b) return lo;
  __m256i hi = _mm256_loadu_si256((const __m256i *)(const void *)b);
  return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi32((int)0xffff0000u)));
}
/* up to 8 rows of SC__TW floats (rp[j], j < nr) paired along the lanes and transposed:
 * dst[h ldd + j] = (rp[j][2h], rp[j][2h + 1]) for h < SC__TW / 2 */
static inline __attribute__((always_inline)) void
v_bf16_pairs_t8(uint32_t *restrict dst, size_t ldd, const float *const rp[8], size_t nr) {
  for (int hb = 0; hb < SC__TW / 2; hb += 8) {
    __m256 o[8];
    for (size_t j = 0; j < 8; j++)
      o[j] = _mm256_castsi256_ps(j < nr ? v_bf16_pairs16(rp[j] + 2 * hb) : _mm256_setzero_si256());
    v_transpose8(o);
    for (int h = 0; h < 8; h++) {
      uint32_t *d = dst + (size_t)(hb + h) * ldd;
      if (nr == 8)
        _mm256_storeu_ps((float *)(void *)d, o[h]);
      else {
        uint32_t tmp[8] __attribute__((aligned(32)));
        _mm256_store_ps((float *)(void *)tmp, o[h]);
        memcpy(d, tmp, nr * sizeof *d);
      }
    }
  }
}
/* sc__bf16_round_n on vectors: the same bits (round to nearest even; zeros and denormals to a
 * zero of their sign; an infinity stays; a NaN keeps its upper bits with the quiet bit set) */
static void v_bf16_round_n(float *restrict x, size_t n) {
  size_t k = 0;
#if VW == 8 /* AVX2: the selects as blends (GCC makes and-andnot-or of the generic form) */
  const __m256i abs = _mm256_set1_epi32(0x7fffffff), hi = _mm256_set1_epi32((int)0xffff0000u);
  const __m256i one = _mm256_set1_epi32(1), half = _mm256_set1_epi32(0x7fff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000), minn = _mm256_set1_epi32(0x00800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000), sign = _mm256_set1_epi32((int)0x80000000u);
  for (; k + 8 <= n; k += 8) {
    __m256i u = _mm256_loadu_si256((const __m256i *)(const void *)(x + k));
    __m256i a = _mm256_and_si256(u, abs);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, half), lsb), hi);
    __m256i nan = _mm256_and_si256(_mm256_or_si256(u, quiet), hi);
    r = _mm256_blendv_epi8(r, nan, _mm256_cmpgt_epi32(a, inf));
    r = _mm256_blendv_epi8(r, _mm256_and_si256(u, sign), _mm256_cmpgt_epi32(minn, a));
    _mm256_storeu_si256((__m256i *)(void *)(x + k), r);
  }
#else
  for (; k + VW <= n; k += VW) {
    sc_vu u = (sc_vu)((sc_vfu *)(void *)(x + k))[0], a = u & 0x7fffffffu;
    sc_vu r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    sc_vu nan = (sc_vu)((sc_vi)a > 0x7f800000), den = (sc_vu)((sc_vi)a < 0x00800000);
    r = (r & ~nan) | ((u | 0x00400000u) & 0xffff0000u & nan);
    r = (r & ~den) | (u & 0x80000000u & den);
    ((sc_vfu *)(void *)(x + k))[0] = (sc_vf)r;
  }
#endif
  sc__bf16_round_n(x + k, n - k);
}
/* sc__bf16_pack_rows: dst[k][t] = (src[2k][t], src[2k + 1][t]) */
static void v_bf16_pack_rows(uint32_t *restrict dst, const float *restrict src, size_t R, size_t n,
                             size_t lds) {
  if (n % 8) {
    sc__bf16_pack_rows(dst, src, R, n, lds);
    return;
  }
  for (size_t k = 0; 2 * k < R; k++) {
    const float *a = src + 2 * k * lds, *b = 2 * k + 1 < R ? a + lds : NULL;
    for (size_t t = 0; t < n; t += 8)
      _mm256_storeu_si256((__m256i *)(void *)(dst + k * n + t),
                          v_bf16_pairs_ab(a + t, b ? b + t : NULL));
  }
}
/* sc__bf16_pack_lanes: dst[o][k] = (src[o][2k], src[o][2k + 1]) */
static void v_bf16_pack_lanes(uint32_t *restrict dst, const float *restrict src, size_t R, size_t n,
                              size_t lds) {
  if (n % 16) {
    sc__bf16_pack_lanes(dst, src, R, n, lds);
    return;
  }
  size_t n2 = n / 2;
  for (size_t o = 0; o < R; o++)
    for (size_t k = 0; k < n2; k += 8)
      _mm256_storeu_si256((__m256i *)(void *)(dst + o * n2 + k),
                          v_bf16_pairs16(src + o * lds + 2 * k));
}
/* sc__bf16_pack_lanes_t for n = SC__TW: dst[k][i] = (src[i][2k], src[i][2k + 1]) */
static void v_bf16_pack_lanes_t(uint32_t *restrict dst, const float *restrict src, size_t R,
                                size_t n) {
  if (n != SC__TW) {
    sc__bf16_pack_lanes_t(dst, src, R, n);
    return;
  }
  for (size_t i = 0; i < R; i += 8) {
    const float *rp[8];
    size_t nr = R - i < 8 ? R - i : 8;
    for (size_t j = 0; j < nr; j++) rp[j] = src + (i + j) * SC__TW;
    v_bf16_pairs_t8(dst + i, R, rp, nr);
  }
}
/* sc__bf16_pack_lanes_ts for n a multiple of SC__TW: blocks of 8 rows x SC__TW floats
 * transposed in registers (the portable loop's stores were R words apart: 3-5 ms of LeNet5's
 * conv2 pullback over 20,000 images, 1 thread, Zen 4) */
static void v_bf16_pack_lanes_ts(uint32_t *restrict dst, const float *restrict src, size_t R,
                                 size_t n, size_t lds) {
  if (n % SC__TW) {
    sc__bf16_pack_lanes_ts(dst, src, R, n, lds);
    return;
  }
  for (size_t c = 0; c < n; c += SC__TW)
    for (size_t o = 0; o < R; o += 8) {
      const float *rp[8];
      size_t nr = R - o < 8 ? R - o : 8;
      for (size_t j = 0; j < nr; j++) rp[j] = src + (o + j) * lds + c;
      v_bf16_pairs_t8(dst + (c / 2) * R + o, R, rp, nr);
    }
}
/* sc__bf16_pack_taps: dst[k][v TW + t] = (tap 2k, tap 2k + 1) of output position (u, v) */
static void v_bf16_pack_taps(uint32_t *restrict dst, const float *restrict x, const sc__lplan *P,
                             size_t u) {
  size_t R = P->R, OW = P->ow, sw = P->spec.sw, n = OW * SC__TW;
  const float *row = x + u * P->spec.sh * P->wp * SC__TW;
  for (size_t k = 0; 2 * k < R; k++) {
    const float *a = row + P->roff[2 * k] * SC__TW;
    const float *b = 2 * k + 1 < R ? row + P->roff[2 * k + 1] * SC__TW : NULL;
    for (size_t v = 0; v < OW; v++) {
      uint32_t *d = dst + k * n + v * SC__TW;
      const float *av = a + v * sw * SC__TW, *bv = b ? b + v * sw * SC__TW : NULL;
      for (int t = 0; t < SC__TW; t += 8)
        _mm256_storeu_si256((__m256i *)(void *)(d + t),
                            v_bf16_pairs_ab(av + t, bv ? bv + t : NULL));
    }
  }
}
/* sc__bf16_pack_taps_t: dst[v TW / 2 + h][r] = (lane 2h, lane 2h + 1) of tap r at (u, v) */
static void v_bf16_pack_taps_t(uint32_t *restrict dst, const float *restrict x, const sc__lplan *P,
                               size_t u) {
  size_t R = P->R, OW = P->ow, sw = P->spec.sw;
  const float *row = x + u * P->spec.sh * P->wp * SC__TW;
  for (size_t v = 0; v < OW; v++)
    for (size_t r = 0; r < R; r += 8) {
      const float *rp[8];
      size_t nr = R - r < 8 ? R - r : 8;
      for (size_t j = 0; j < nr; j++) rp[j] = row + (P->roff[r + j] + v * sw) * SC__TW;
      v_bf16_pairs_t8(dst + v * (SC__TW / 2) * R + r, R, rp, nr);
    }
}

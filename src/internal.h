/* src/internal.h — what the engine's rooms (the .c files of src/) and every kernel set
 * (src/compute.c, kernels/) share: the kernel tables, a chain's and a workspace's plans, the bit
 * helpers and the bf16 packers. Not an API: everything here may change between versions.
 *
 * Internal layout of a computation. A batch is cut into tiles of SC__TW samples. Inside a tile,
 * activations are stored feature-major: a layer output with O features is an O x SC__TW array,
 * row o holding feature o of the tile's samples, so every kernel's inner loop runs over SC__TW
 * contiguous samples (one or two vector registers) with a broadcast weight. Tiles are grouped
 * into slices; each slice owns its tile buffers and a gradient accumulator, a thread works on
 * whole slices, and slices are reduced in index order, so results do not depend on the thread
 * count. HACKING.md describes the source tree. */
#ifndef SC_INTERNAL_H
#define SC_INTERNAL_H
#if !defined(_POSIX_C_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* pthread_setaffinity_np: pool threads pinned to cores */
#endif

#include "../simplechain.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h> /* for the vector kernels (kernels/ files, the built-in sets) */
#endif

#ifdef SC_HAVE_ZLIB
#include <zlib.h> /* gzipped IDX files */
#endif

#if !defined(SC_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#define SC__THREADS 1
#include <pthread.h>
#else
#define SC__THREADS 0
#endif

#if defined(_MSC_VER)
#define SC__TLS __declspec(thread)
#else
#define SC__TLS _Thread_local
#endif

/* Per-layer profile counters (sc_workspace_profile): per row, forward and backward
 * nanoseconds and samples; one set per slice, on cache lines of its own (slices run on any
 * thread: with one shared set, the threads' adds contended for its lines and doubled some
 * layers' times at 2 threads), summed when read */
#if SC__THREADS
#include <stdatomic.h>
typedef _Atomic uint64_t sc__pcount;
#define SC__PADD(c, v) atomic_fetch_add_explicit(&(c), (uint64_t)(v), memory_order_relaxed)
#define SC__PGET(c) atomic_load_explicit(&(c), memory_order_relaxed)
#else
typedef uint64_t sc__pcount;
#define SC__PADD(c, v) ((c) += (uint64_t)(v))
#define SC__PGET(c) (c)
#endif
enum { SC__P_FNS, SC__P_BNS, SC__P_FN, SC__P_BN, SC__P_W }; /* the counters of one row */
static inline uint64_t sc__ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Samples per tile: two AVX-512 registers of floats, four AVX2 ones. Two vectors per
 * row let the lane-form dW do two FMAs per accumulator load/store. Changing it changes
 * summation order (and therefore low-order bits of results). */
#define SC__TW 32 /* a multiple of 8 (sc__dwl_fold) */
/* Slicing: a slice holds at least the chain's min_tiles tiles (at most SC__MIN_TILES:
 * fewer when one tile is already a lot of work, as in a convnet) and there are at most
 * SC__MAX_SLICES slices. Both depend only on the chain and the batch size, never on
 * the thread count. */
#ifndef SC__MAX_SLICES
#define SC__MAX_SLICES 16
#endif
#ifndef SC__MIN_TILES
#define SC__MIN_TILES 4
#endif
/* sc_train's float ADAM step runs on the workspace's threads from this many parameters on,
 * in at most SC__OPT_PARTS parts */
#define SC__OPT_PAR_MIN 16384
#define SC__OPT_PARTS 64
#define SC__ALIGN 64
/* layers with at most this many weights accumulate dW in lane form (see sc__lplan) */
#define SC__DWL_MAX 1024

/* ---------------------------------------------------------------- kernel tables */
/* A kernel set is the per-slice driver compiled for one ISA: the whole tile pipeline
 * (gather, fused layer kernels, loss, pullback) is compiled with the ISA's flags so
 * that nothing on the hot path runs as baseline code. */
struct sc__job_f32;
struct sc__job_f64;
/* one ADAM/AdamW step's constants (see sc_optimizer_step) */
typedef struct sc__adam_coef {
  float b1, b2, omb1, omb2, step, isb2, eps, decay, l2;
} sc__adam_coef;
typedef struct sc__kt_f32 {
  const char *name;
  /* slice's work, with scratch area (tile memory, bf16 packing) number area */
  void (*run_slice)(struct sc__job_f32 *job, size_t slice, size_t area);
  size_t (*find_nonfinite)(const float *v, size_t n);
  void (*adam)(float *p, const float *g, float *m, float *v, size_t n, const sc__adam_coef *k);
  void (*one)(const struct sc_chain *c, const float *p, const float *u, const float *v,
              const float *w, float *y, float *du, float *dp, float *jw, float *scratch, int fwd);
  /* the conv register-block variants' names (SC__CONV_NV each, index = sc__lplan's
   * conv_fwd / conv_dw), or NULL: one block only (the portable kernels) */
  const char *const *conv_fwd_names, *const *conv_dw_names;
  /* the rule's dW block for a layer whose channels are a multiple of 6 but not of 4, where it
   * is not variant 0 (AVX-512: 6 x 4 against 4 x 4's blocks of 4 + 2), else 0 */
  int conv_dw_k6;
} sc__kt_f32;
typedef struct sc__kt_f64 {
  const char *name;
  void (*run_slice)(struct sc__job_f64 *job, size_t slice, size_t area);
  size_t (*find_nonfinite)(const double *v, size_t n);
  void (*one)(const struct sc_chain *c, const double *p, const double *u, const double *v,
              const double *w, double *y, double *du, double *dp, double *jw, double *scratch,
              int fwd);
} sc__kt_f64;

/* what a driver call computes */
enum { SC__FORWARD = 0, SC__LOSS, SC__VALGRAD, SC__PULLBACK };

/* Dropout: a counter-based hash gives the keep bit of (seed, step, sample, element),
 * so a mask depends on nothing else (not on tiles, slices or threads). */
static inline uint64_t sc__mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* keep bits of samples b0 .. b0+31 for element f: bit t set = kept */
static inline uint32_t sc__drop_word(uint64_t seed, uint64_t step, size_t b0, size_t f,
                                     uint32_t thr) {
  uint64_t base = sc__mix64(seed ^ sc__mix64(step + 0x632BE59BD9B4E019ull)) ^
                  sc__mix64((uint64_t)f * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull);
  uint32_t m = 0;
  for (uint32_t t = 0; t < 32; t++)
    m |= (uint32_t)((uint32_t)(sc__mix64(base + (uint64_t)(b0 + t) * 0xD1B54A32D192ED03ull) >>
                               32) >= thr)
         << t;
  return m;
}

/* ---------------------------------------------------------------- plans (shared with kernels/) */
/* libxsmm 1.17's float GEMM kernel type (libxsmm_smmfunction), declared here so that the
 * plan needs no libxsmm header */
typedef void (*sc__xsmm_fn)(const float *a, const float *b, float *c, ...);

#define SC__CONV_NV 3 /* conv register-block variants per kernel (vector float sets) */

/* the float tanh variants of a dense layer on the vector kernel sets (see the planner): bit 0
 * the reciprocal form of the final quotient, bit 1 the rational form */
enum { SC__TANH_DIV = 0, SC__TANH_RCP, SC__TANH_RAT, SC__TANH_RATRCP, SC__TANH_NV };
typedef struct sc__lplan {
  sc_layer spec;
  size_t ic, ih, iw;           /* input shape */
  size_t oc, oh, ow;           /* output shape */
  size_t in, out;              /* features: ic*ih*iw, oc*oh*ow */
  size_t poff, np;             /* parameter block */
  size_t a_off;                /* output tile (out x TW) in slice tile memory, elements; for
                                  flatten the input's tile (a view) */
  size_t a_off2;               /* the output tile of the second tile of a pair: a second buffer
                                  when the next layer holds its input (hold_off), else a_off */
  size_t z_off;                /* pre-activation tile (gelu only), else SIZE_MAX */
  size_t lane_off;             /* bias lane accumulator (oc x TW), else SIZE_MAX */
  size_t dwl_off;              /* lane accumulators for dW (out x in x TW) of small dense layers
                                  and of every conv, else SIZE_MAX: dW[o][i] += dz[o][t] x[i][t]
                                  lane by lane, summed over the lanes once per slice: no
                                  transposes, no broadcasts */
  size_t hold_off;             /* lane-form dense layers where it pays: dz (out x TW) of the first
                                  tile of a pair (its input stays in the a_off buffers, the second
                                  tile's goes to a_off2), so that the pair's dW runs as one pass
                                  (SC__K_DWL2), else SIZE_MAX */
  size_t pad_off;              /* conv with padding: zero-padded copy of the input, else SIZE_MAX */
  size_t hp, wp;               /* conv: (padded) input height and width */
  size_t R;                    /* conv: taps per output channel, ic*kh*kw */
  const size_t *roff;          /* conv: R tap offsets (ci*hp + i)*wp + j, in tile rows */
  const size_t *cpoff;         /* conv: the bf16 direct forward's rows, ic ceil(kh kw / 2):
                                  per channel its taps in row-major order, paired (2q, 2q + 1);
                                  see sc__bf16_pack_colpairs */
  const size_t *tperm, *troff; /* conv: the taps in (i, j)-major, ci-minor order, and their
                                  offsets (roff[tperm[m]]): groups of ic taps whose rows of
                                  an input tile never overlap (the bf16 dx's rows of C) */
  size_t mask_off;             /* dropout: one 32-bit keep mask per feature (SC__TW == 32) */
  sc__xsmm_fn xfwd;           /* float dense forward GEMM from libxsmm, else NULL (sc__xsmm_plan) */
  unsigned char how;          /* dense forward variant: how it was chosen (SC__HOW_*) */
  float ns_fused, ns_xsmm;    /* measured: ns per forward of a slice-sized batch (0: not) */
  unsigned char tanh_var;     /* float tanh layer on a vector kernel set: its variant
                                 (SC__TANH_DIV .. SC__TANH_RATRCP; planner) */
  unsigned char tanh_how;     /* how that was chosen (SC__HOW_*) */
  float ns_tanh[SC__TANH_NV]; /* measured, as ns_fused (0: not) */
  unsigned char conv_fwd, conv_dw; /* float conv on a vector kernel set: register-block
                                      variants of the forward and of dW (planner) */
  unsigned char conv_how;          /* how they were chosen (SC__HOW_*; forced: either) */
  float ns_cfwd[SC__CONV_NV];      /* measured: ns per forward of a slice-sized batch */
  float ns_cdw[SC__CONV_NV];       /* measured: ns per sc_valgrad of one (forward + dW) */
  sc__xsmm_fn xconv;     /* float conv forward as libxsmm GEMMs, one per output row, over an
                            im2col copy of the row's taps (col_off), else NULL (planner) */
  size_t col_off;        /* conv in builds with libxsmm: R x ow x TW im2col rows, else SIZE_MAX */
  float ns_cx;           /* measured: the xconv forward, as ns_cfwd */
  unsigned char dw_dot;  /* dense layer with lane accumulators (dwl_off): dW in the dot form
                            (transpose + SC__K_DW) instead (planner) */
  unsigned char dw_how;  /* how that was chosen (SC__HOW_*) */
  float ns_lane, ns_dot; /* measured: ns per sc_valgrad of a slice-sized batch */
} sc__lplan;

/* the forward activation code of a float tanh layer run in variant v > 0 (never seen by the
 * portable kernels) */
#define SC__TANH_ACT(v) ((sc_act)(32 + (v)))
#define SC__IS_TANH_ACT(a) ((int)(a) > 32 && (int)(a) < 32 + SC__TANH_NV)

struct sc_chain {
  size_t nlayers, in, out, nparams;
  size_t in_c, in_h, in_w;
  size_t maxw; /* widest feature count, input included */
  size_t ldT;  /* row length of the transposed tile (maxw rounded up to 16) */
  /* slice tile memory, in elements (the same offsets serve float and double) */
  size_t x_off, d0_off, d1_off, xT_off, t_off, lossl_off, tile_elems;
  size_t x_off2;    /* the gathered input of a pair's second tile (see a_off2) */
  size_t min_tiles; /* tiles per slice at least (1..SC__MIN_TILES), from the work per tile */
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  char plan_note[256]; /* what the planner wants said (a wisdom file it ignored), or "" */
  int pool_fuse;       /* a 2 x 2 max-pool's float pullback with the conv's below (SC_POOL_FUSE) */
  sc__lplan L[];
};
/* whether conv layer l's float forward (with float operands, on the AVX2 / AVX-512 sets) takes
 * the 2 x 2 max-pool above it in (vec_conv_pool_fwd_f32; its pullback vec_pool2_hits_bwd_f32) */
static inline int sc__pool_fold_f32(const sc_chain *c, size_t l) {
  const sc__lplan *P = &c->L[l];
  return c->pool_fuse && P->spec.kind == SC_LAYER_CONV2D &&
         (P->spec.act == SC_RELU || P->spec.act == SC_IDENTITY) && P->z_off == SIZE_MAX &&
         !P->xconv && l + 1 < c->nlayers && c->L[l + 1].spec.kind == SC_LAYER_MAXPOOL2D &&
         c->L[l + 1].spec.kh == 2 && c->L[l + 1].spec.kw == 2 && P->oh % 2 == 0 && P->ow % 2 == 0;
}

/* C[m][n] (acc ? += : =) sum over k < K2 of the bf16 pair products A[m][k] . B[k][n]
 * (A: M x K2 pairs, row stride lda; B: K2 x N pairs, row stride ldb; C: M x N floats,
 * row stride ldc), each pair as vdpbf16ps adds it: C += a_hi b_hi, then C += a_lo b_lo, each an
 * FMA in float (one rounding; sc__bf16_fma), in k order. */
typedef void (*sc__bf16_gemm_fn)(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                 const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                 int acc);
/* the same with A's row m at A + arow[m] lda and C's at C + crow[m] ldc where these are not
 * NULL (rows read and written in place: a conv input's taps); with crow, the rows go in groups
 * of grp, one group after the other, the rows of a group never overlapping in memory (rows of
 * different groups may: a conv layer's dx added into its input's tile); B's row k at
 * B + brow[k] ldb where brow is not NULL (a conv input's column pairs, read in place) */
/* where group g of a grouped GEMM has its operand: off[g step] scale elements on where off is
 * not NULL, else g stride */
typedef struct {
  const size_t *off;
  size_t step, scale, stride;
} sc__grp_off;
/* G GEMMs of one shape and one B (the AMX GEMM's grouped form): group g's C (rows ldc apart)
 * and A (rows lda apart) at the offsets co and ao give; in g order, each adding to C (acc)
 * what the groups before it left where their rows overlap */
typedef void (*sc__bf16_gemm_grp_fn)(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                     size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                     size_t M, size_t N, size_t K2, size_t G, int acc);
/* C (M x N, rows ldc apart) = the sum over G groups g of A_g B_g, A_g at A0 + (ao's offset of g)
 * (rows lda apart), B_g at B0 + (bo's) (rows ldb apart): a conv forward's products, each group
 * the taps of one kernel row of a pair of channels read in place (the AMX GEMM's form) */
typedef void (*sc__bf16_gemm_sumg_fn)(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                      sc__grp_off ao, const uint32_t *B0, size_t ldb,
                                      sc__grp_off bo, size_t M, size_t N, size_t K2, size_t G);
typedef void (*sc__bf16_gemm_rows_fn)(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                      const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                      int acc, const size_t *arow, const size_t *crow, size_t grp,
                                      const size_t *brow);
/* the dot-product form (A and B both with pairs along k): C[m ldc + n] += the sum over S
 * segments s and K2 pairs k (K2 a multiple of 16) of A_s[m][k] B_s[n][k], A_s's row m at
 * A + m lda + s sa, B_s's row n at B + boff[n] bsc + s sb. Each (m, n) keeps 16 lanes of
 * partial sums (pair k in lane k % 16), each lane's pairs added as vdpbf16ps adds them, in k
 * then s order; the lanes are then folded (8 + 8, 4 + 4, 2 + 2, 1 + 1) and added to C. A conv
 * layer's dW with few output channels (m: channels, n: taps, k: lane pairs of an output row,
 * s: the rows) */
typedef void (*sc__bf16_nt_fn)(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                               const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                               size_t M, size_t N, size_t K2, size_t S);
/* a forward's epilogue in the GEMM (C = A B, acc 0): C[m][n] = act(C[m][n] + bias[m]), the bias
 * 0 where NULL, act the identity or relu (relu: max(0, v), as the vector kernels compute it),
 * then rounded to bf16 where round is set: elementwise, so the bits of the passes after it */
typedef struct {
  const float *bias;
  int relu, round;
} sc__bf16_ep;
typedef void (*sc__bf16_gemm_ep_fn)(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                    const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                    const size_t *brow, const sc__bf16_ep *ep);
#define SC__BF16K_MODEL 1
#define SC__BF16K_NATIVE 2
#define SC__BF16K_AMX 3
#define SC__BF16K_AMX_MODEL 4

struct sc_workspace {
  const sc_chain *chain;
  size_t max_batch;
  size_t max_slices;
  size_t slice_bytes;    /* one slice: tile memory + gradient accumulator */
  size_t tile_bytes;     /* offset of the gradient accumulator inside a slice */
  unsigned char *slices; /* SC__ALIGN-aligned */
  void *owned;           /* library allocation, or NULL for caller memory */
  struct sc__pool *pool;
  uint64_t drop_seed, drop_step; /* dropout masks of the next sc_valgrad */
  sc__pcount *prof;              /* max_slices sets of (nlayers + 1) x SC__P_W profile
                                    counters, prof_stride apart, or NULL: off */
  size_t prof_stride;            /* counters per slice's set, a multiple of a cache line */
  sc__pcount *prof_mem;          /* their memory (malloc'ed), kept while profiling is off */
  sc__pcount *prof_base;         /* the first set in it, SC__ALIGN-aligned */
  int prec;                      /* sc_precision */
  float *bf_p;                   /* bf16: the parameters with rounded weights (malloc'ed) */
  /* bf16 kernels (SC_PRECISION_BF16): 0 none (the float kernels on rounded operands),
   * SC__BF16K_MODEL (portable code computing what vdpbf16ps computes), SC__BF16K_NATIVE, or
   * the AMX GEMM: SC__BF16K_AMX, SC__BF16K_AMX_MODEL (its portable model) */
  int bf16k;
  sc__bf16_gemm_fn bf_gemm;           /* the GEMM of that kind */
  sc__bf16_gemm_rows_fn bf_gemm_rows; /* and with A's rows at offsets; NULL: AMX */
  sc__bf16_nt_fn bf_nt;               /* the dot-product form; NULL: AMX */
  void (*bf_dwt5)(float *restrict, const uint32_t *restrict, const uint32_t *restrict, size_t,
                  size_t, size_t, size_t, size_t, size_t); /* sc__bf16_dwt5_native, or NULL */
  sc__bf16_gemm_ep_fn bf_gemm_ep; /* with the forward's epilogue: native only */
  void (*bf_dz_lanes)(uint32_t *restrict, const float *restrict, float *restrict,
                      const float *restrict, size_t, size_t, int); /* native only */
  void (*bf_dz_pool)(uint32_t *restrict, float *restrict, const float *restrict,
                     const float *restrict, const float *restrict, float *restrict, size_t, size_t,
                     size_t, int); /* native only */
  /* a conv's forward with a 2 x 2 max-pool folded in, and that pool's pullback from the bytes
   * of the windows' hits it leaves (sc__bf16_pool_hits_native): native only */
  void (*bf_pool_hits)(float *restrict, uint8_t *restrict, const float *restrict, size_t, size_t,
                       size_t, size_t, size_t, size_t, int);
  void (*bf_dz_pool_hits)(uint32_t *restrict, float *restrict, const float *restrict,
                          const uint8_t *restrict, float *restrict, size_t, size_t, size_t);
  /* a stride-1 conv's dx as a correlation (bf_on bit 32): the model's or native, else NULL */
  void (*bf_dx_corr)(float *restrict, const uint32_t *restrict, const uint32_t *restrict, size_t,
                     size_t, size_t, size_t, size_t, size_t);
  sc__bf16_gemm_grp_fn bf_gemm_grp;          /* the grouped form: AMX only, else NULL */
  sc__bf16_gemm_sumg_fn bf_gemm_sumg;        /* the summed grouped form: AMX only */
  void (*bf_round)(float *restrict, size_t); /* VCVTNEPS2BF16's rounding with the native
                                              * kernels, else NULL (the kernel set's) */
  uint32_t *bf_w;       /* dense and conv weights as bf16 pairs: per layer [O][I2] then [I][O2] */
  size_t *bf_woff;      /* per layer: its offset in bf_w (dense and conv layers only) */
  unsigned char *bf_on; /* per layer: bit 1 where the bf16 GEMM runs its forward, bit 2 its
                           pullback; the float kernels run the rest, on the same rounded
                           operands (SC_BF16_LAYERS; in bf_woff's block); conv: bit 4 the
                           direct forward, bit 8 AMX's dx added in place (grouped form),
                           bit 16 the forward on channel pairs in place (AMX: the
                           summed grouped form; AVX512_BF16: rows at roff), bit 32 dx as
                           a correlation (bf_dx_corr) */
  uint32_t *bf_scr;     /* per slice: packed tile operands, bf_scr_stride words apart */
  size_t bf_scr_stride;
  /* sc_train's input tiles (and target tiles, NULL with labels) made once for all its steps
   * when every step reads the same tiles (sc__train_tiles), else NULL; a step reads them from
   * tile tiles0 on. Of type double when tiles_f64, else float */
  const void *tiles_x, *tiles_t;
  size_t tiles0;
  int tiles_f64;
};

/* float and double <-> their IEEE bits (the tanh's bit selects, the parameter files) */
static inline uint32_t sc__fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static inline float sc__fof(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* float -> bfloat16 bits, round to nearest even, as VCVTNEPS2BF16: zeros and denormals give
 * a zero of their sign, an infinity stays, a NaN keeps its upper bits with the quiet bit set.
 * Without branches, so that the loops over it vectorize: an infinity takes the rounding path
 * (0x7f800000 + 0x7fff keeps its upper half), a NaN, whose rounding could carry into the sign,
 * and a denormal are selected apart. */
static inline uint32_t sc__bf16_rne(uint32_t u) {
  uint32_t a = u & 0x7fffffffu, r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  r = a > 0x7f800000u ? (u | 0x00400000u) & 0xffff0000u : r;
  return a < 0x00800000u ? u & 0x80000000u : r;
}
static inline uint16_t sc__bf16_bits(float f) {
  return (uint16_t)(sc__bf16_rne(sc__fbits(f)) >> 16);
}
/* x[0..n) rounded to bfloat16 in place (as floats: their low 16 bits cleared) */
static inline void sc__bf16_round_n(float *restrict x, size_t n) {
  for (size_t k = 0; k < n; k++) x[k] = sc__fof(sc__bf16_rne(sc__fbits(x[k])));
}

/* bf16 pairs, the operand layout of vdpbf16ps: two bfloat16 in a 32-bit word, the element
 * of even index (2k) in the low half, 2k + 1 in the high half. The packers take floats that
 * are already bf16 values (the bf16 precision rounds every matrix operand first), so taking
 * the upper half of their bits is exact; sc__bf16_bits is used all the same (it is the
 * identity on such values) so that a stray unrounded value is rounded, not truncated. */
static inline uint32_t sc__bf16_pair(float lo, float hi) {
  return (uint32_t)sc__bf16_bits(lo) | (uint32_t)sc__bf16_bits(hi) << 16;
}
/* the pair of two floats that hold bf16 values already (rounded): their upper halves */
static inline uint32_t sc__bf16_pair_r(float lo, float hi) {
  return sc__fbits(lo) >> 16 | (sc__fbits(hi) & 0xffff0000u);
}
/* pairs along the rows: dst[k][t] = (src[2k][t], src[2k + 1][t]) for k < ceil(R / 2), t < n,
 * a missing last row as zeros (source rows lds apart). For the forward (pairs of inputs) and
 * dx (pairs of outputs). */
static inline void sc__bf16_pack_rows(uint32_t *restrict dst, const float *restrict src, size_t R,
                                      size_t n, size_t lds) {
  for (size_t k = 0; 2 * k < R; k++) {
    const float *a = src + 2 * k * lds, *b = 2 * k + 1 < R ? a + lds : NULL;
    for (size_t t = 0; t < n; t++) dst[k * n + t] = sc__bf16_pair(a[t], b ? b[t] : 0.0f);
  }
}
/* pairs along the lanes, transposed: dst[k][i] = (src[i][2k], src[i][2k + 1]) for k < n / 2
 * (n even), i < R; dW's reduction over the samples. */
static inline void sc__bf16_pack_lanes_t(uint32_t *restrict dst, const float *restrict src,
                                         size_t R, size_t n) {
  for (size_t k = 0; 2 * k < n; k++)
    for (size_t i = 0; i < R; i++)
      dst[k * R + i] = sc__bf16_pair(src[i * n + 2 * k], src[i * n + 2 * k + 1]);
}
/* pairs along the columns, row by row: dst[o][k] = (src[o][2k], src[o][2k + 1]) for
 * k < ceil(n / 2), a missing last column as zero (source rows lds apart). For dW's dz (pairs of
 * samples) and the forward's weights (pairs of inputs). */
static inline void sc__bf16_pack_lanes(uint32_t *restrict dst, const float *restrict src, size_t R,
                                       size_t n, size_t lds) {
  size_t n2 = (n + 1) / 2;
  for (size_t o = 0; o < R; o++) {
    const float *r = src + o * lds;
    for (size_t k = 0; k < n2; k++)
      dst[o * n2 + k] = sc__bf16_pair(r[2 * k], 2 * k + 1 < n ? r[2 * k + 1] : 0.0f);
  }
}
/* pairs along the columns, transposed: dst[k][o] = (src[o][2k], src[o][2k + 1]) for k < n / 2
 * (n even; source rows lds apart). The sources hold bf16 values (a conv layer's rounded dz):
 * a pair is their upper halves. A conv layer's dz of one output row (dW^T's B). */
static inline void sc__bf16_pack_lanes_ts(uint32_t *restrict dst, const float *restrict src,
                                          size_t R, size_t n, size_t lds) {
  for (size_t o = 0; o < R; o++) {
    const float *r = src + o * lds;
    for (size_t k = 0; k < n / 2; k++) dst[k * R + o] = sc__bf16_pair_r(r[2 * k], r[2 * k + 1]);
  }
}
/* The direct forward's B: the (padded) input tile x (C x Hp x Wp positions of TW lanes) as
 * pairs of neighbouring columns, dst[(c Hp + y) Wp + x][t] = (x[c][y][x][t], x[c][y][x + 1][t])
 * (the last column paired with zero), and after them a second plane: with an odd kernel width
 * kw and kh >= 2 the wrapped pairs (x[c][y][x + kw - 1][t], x[c][y + 1][x][t]) (zeros past the
 * edges), for a 1 x 1 kernel each position paired with zero. A channel's kh kw taps, in
 * row-major order, are paired (2q, 2q + 1): in one row a column pair, across a row's end a
 * wrapped pair; an odd count's last tap is the second half of the column pair (or, kw = 1, the
 * wrapped pair) before it, its first half weighted 0, so the other product is 0 x a value of
 * the same window, never 0 x a neighbour (which could be infinite). LeNet5's 5 x 5 kernel: 13
 * pairs, not the 15 of pairing each row alone. The sources hold bf16 values (rounded inputs,
 * outputs and zero padding): a pair is their upper halves. */
static inline void sc__bf16_pack_colpairs(uint32_t *restrict dst, const float *restrict x,
                                          const sc__lplan *P) {
  size_t rows = P->ic * P->hp, wq = P->wp * SC__TW, n = (P->wp - 1) * SC__TW, all = rows * wq;
  size_t kw = P->spec.kw, sh = (kw - 1) * SC__TW, m = wq - sh; /* wrapped: m lanes have a first */
  for (size_t y = 0; y < rows; y++) {
    const float *s = x + y * wq;
    uint32_t *d = dst + y * wq;
    for (size_t k = 0; k < n; k++) d[k] = sc__bf16_pair_r(s[k], s[k + SC__TW]);
    for (size_t k = n; k < n + SC__TW; k++) d[k] = sc__fbits(s[k]) >> 16;
  }
  if (kw % 2 && P->spec.kh >= 2)
    for (size_t y = 0; y < rows; y++) {
      const float *s = x + y * wq, *b = (y + 1) % P->hp ? s + wq : NULL; /* a channel's last row */
      uint32_t *d = dst + all + y * wq;
      if (b) {
        for (size_t k = 0; k < m; k++) d[k] = sc__bf16_pair_r(s[k + sh], b[k]);
        for (size_t k = m; k < wq; k++) d[k] = sc__fbits(b[k]) & 0xffff0000u;
      } else {
        for (size_t k = 0; k < m; k++) d[k] = sc__fbits(s[k + sh]) >> 16;
        for (size_t k = m; k < wq; k++) d[k] = 0;
      }
    }
  else if (kw == 1 && P->spec.kh == 1)
    for (size_t k = 0; k < all; k++) dst[all + k] = sc__fbits(x[k]) >> 16;
}
/* The (padded) input tile x of a conv layer as pairs of neighbouring channels, for AMX's
 * forward: dst[(cp Hp + y) Wp + x][t] = (x[2 cp][y][x][t], x[2 cp + 1][y][x][t]), an odd
 * count's last channel paired with zero. The sources hold bf16 values: a pair is their upper
 * halves. */
static inline void sc__bf16_pack_chpairs(uint32_t *restrict dst, const float *restrict x,
                                         const sc__lplan *P) {
  size_t hw = P->hp * P->wp * SC__TW;
  for (size_t cp = 0; 2 * cp < P->ic; cp++) {
    const float *a = x + 2 * cp * hw, *b = a + hw;
    uint32_t *d = dst + cp * hw;
    if (2 * cp + 1 < P->ic)
      for (size_t k = 0; k < hw; k++) d[k] = sc__bf16_pair_r(a[k], b[k]);
    else
      for (size_t k = 0; k < hw; k++) d[k] = sc__fbits(a[k]) >> 16;
  }
}
/* A conv layer's output row u as a dense layer (im2col, packed): its input x is the (padded)
 * C x Hp x Wp tile, output position (u, v) reads tap r at row (u sh Wp + v sw + roff[r]); the
 * row's lanes are (v, t), v < OW, t < TW. Taps paired: dst[k][v TW + t] = (tap 2k, tap 2k + 1),
 * a missing last tap as zeros (the forward's B). */
static inline void sc__bf16_pack_taps(uint32_t *restrict dst, const float *restrict x,
                                      const sc__lplan *P, size_t u) {
  size_t R = P->R, OW = P->ow, sw = P->spec.sw, n = OW * SC__TW;
  const float *row = x + u * P->spec.sh * P->wp * SC__TW;
  for (size_t k = 0; 2 * k < R; k++) {
    const float *a = row + P->roff[2 * k] * SC__TW;
    const float *b = 2 * k + 1 < R ? row + P->roff[2 * k + 1] * SC__TW : NULL;
    for (size_t v = 0; v < OW; v++) {
      uint32_t *d = dst + k * n + v * SC__TW;
      const float *av = a + v * sw * SC__TW, *bv = b ? b + v * sw * SC__TW : NULL;
      for (size_t t = 0; t < SC__TW; t++) d[t] = sc__bf16_pair(av[t], bv ? bv[t] : 0.0f);
    }
  }
}
/* the same row's taps with lanes paired, transposed: dst[m][r] = (lane 2m, lane 2m + 1) of tap
 * r (dW's B) */
static inline void sc__bf16_pack_taps_t(uint32_t *restrict dst, const float *restrict x,
                                        const sc__lplan *P, size_t u) {
  size_t R = P->R, OW = P->ow, sw = P->spec.sw;
  const float *row = x + u * P->spec.sh * P->wp * SC__TW;
  for (size_t v = 0; v < OW; v++)
    for (size_t h = 0; h < SC__TW / 2; h++) {
      uint32_t *d = dst + (v * (SC__TW / 2) + h) * R;
      for (size_t r = 0; r < R; r++) {
        const float *xr = row + (P->roff[r] + v * sw) * SC__TW;
        d[r] = sc__bf16_pair(xr[2 * h], xr[2 * h + 1]);
      }
    }
}
/* conv dx of output row u: xg (the padded input's layout) += the taps' gradients
 * dcol[r][v TW + t], tap by tap */
static inline void sc__bf16_col2im(float *restrict xg, const float *restrict dcol,
                                   const sc__lplan *P, size_t u) {
  size_t OW = P->ow, sw = P->spec.sw;
  float *row = xg + u * P->spec.sh * P->wp * SC__TW;
  for (size_t r = 0; r < P->R; r++)
    for (size_t v = 0; v < OW; v++) {
      float *d = row + (P->roff[r] + v * sw) * SC__TW;
      const float *c = dcol + (r * OW + v) * SC__TW;
      for (size_t t = 0; t < SC__TW; t++) d[t] += c[t];
    }
}
/* the unpadded C x H x W tile out of a padded one (sc__pad's inverse) */
static inline void sc__bf16_crop(float *restrict x, const float *restrict xp, const sc__lplan *P) {
  for (size_t c = 0; c < P->ic; c++)
    for (size_t y = 0; y < P->ih; y++)
      memcpy(x + ((c * P->ih + y) * P->iw) * SC__TW,
             xp + ((c * P->hp + y + P->spec.ph) * P->wp + P->spec.pw) * SC__TW,
             P->iw * SC__TW * sizeof(float));
}
static inline uint64_t sc__dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}
static inline double sc__dof(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

/* ---------------------------------------------------------------- what the rooms lend each other
 */
/* The engine's rooms (the .c files of src/) are separate translation units in the tree's build
 * and one in the generated simplechain.c. A function one room defines and others call is
 * declared here with SC__INT: external but hidden in the tree's build (simplechain.map exports
 * the sc_* API only), static in simplechain.c. SC__INT_DATA declares such an object. */
#ifdef SC__AMALGAMATION
#define SC__INT static
#define SC__INT_DATA static
#elif defined(__GNUC__)
#define SC__INT __attribute__((visibility("hidden")))
#define SC__INT_DATA extern __attribute__((visibility("hidden")))
#else
#define SC__INT
#define SC__INT_DATA extern
#endif

/* src/error.c: every failure goes through sc__fail, which formats "fn: message" into the
 * thread's error buffer and returns st; SC__FAIL names the calling function */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
SC__INT sc_status
sc__fail(sc_status st, const char *fn, const char *fmt, ...);
#define SC__FAIL(st, ...) sc__fail((st), __func__, __VA_ARGS__)
#define SC__CHECK_NULL(ptr)                                                                        \
  do {                                                                                             \
    if (!(ptr)) return SC__FAIL(SC_ERR_NULL, "argument '%s' is NULL", #ptr);                       \
  } while (0)
/* appends to a bounded buffer, tracking the length it would have had */
typedef struct sc__sbuf {
  char *buf;
  size_t cap, len;
} sc__sbuf;
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
SC__INT void
sc__sprintf(sc__sbuf *b, const char *fmt, ...);

#include "util.h"

/* src/dispatch.c: the kernel sets (not seen by a kernel set's own translation unit) */
#ifndef SC__KERNELS_ONLY
/* the kernel tables: the portable ones (src/compute.c), the kernel sets' (kernels/, or built in) */
SC__INT_DATA const sc__kt_f32 sc__kt_ref_f32;
SC__INT_DATA const sc__kt_f64 sc__kt_ref_f64;
/* A build without kernels/ files (the two drop-in files, SC_HAVE_KERNELS undefined) on
 * x86-64 with GCC >= 8 or Clang >= 10 compiles the kernel sets at the end of the
 * generated simplechain.c, by target pragma (src/builtin_sets.h): the AVX2 + FMA one (the same
 * code as kernels/avx2/avx2.c: the "avx2" set) and the AVX-512 one (kernels/avx512/avx512.c:
 * "avx512"), picked by CPUID like the kernels/ ones. -DSC_NO_BUILTIN_AVX512 leaves out the second
 * (a faster compile), -DSC_NO_BUILTIN_AVX2 both. */
#if !defined(SC_HAVE_KERNELS) && !defined(SC__KERNELS_ONLY) && !defined(SC_NO_BUILTIN_AVX2) &&     \
    defined(__x86_64__) && defined(__GNUC__) && defined(__OPTIMIZE__)
#if (defined(__clang__) && __clang_major__ >= 10) || (!defined(__clang__) && __GNUC__ >= 8)
#define SC__BUILTIN_AVX2 1
static const sc__kt_f32 sc__kt_f32_avx2in;
static const sc__kt_f64 sc__kt_f64_avx2in;
#ifndef SC_NO_BUILTIN_AVX512
#define SC__BUILTIN_AVX512 1
static const sc__kt_f32 sc__kt_f32_avx512in;
static const sc__kt_f64 sc__kt_f64_avx512in;
#endif
#endif
#endif
#ifndef SC__BUILTIN_AVX2
#define SC__BUILTIN_AVX2 0
#endif
#ifndef SC__BUILTIN_AVX512
#define SC__BUILTIN_AVX512 0
#endif
#ifdef SC_HAVE_KERNELS
extern const sc__kt_f32 sc__kt_f32_avx2, sc__kt_f32_avx512;
extern const sc__kt_f64 sc__kt_f64_avx2, sc__kt_f64_avx512;
#define SC__KERNELS 1
#define SC__HAS_KT(t) 1
#elif defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && defined(__ELF__)
/* A drop-in build that compiles kernels/avx2/avx2.c and kernels/avx512/avx512.c along (no -D
 * needed): weak references, null when those files are not linked in */
extern const sc__kt_f32 sc__kt_f32_avx2 __attribute__((weak));
extern const sc__kt_f32 sc__kt_f32_avx512 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx2 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx512 __attribute__((weak));
#define SC__KERNELS 1
#define SC__HAS_KT(t) (&(t) != NULL)
#else
#define SC__KERNELS 0
#endif
#endif
SC__INT sc_status sc__pick_kernels(const char *fn, const sc__kt_f32 **kf, const sc__kt_f64 **kd);

/* src/chain.c, src/planner.c: a chain's plan, and the variants the planner picks for it */
SC__INT sc_status sc__chain_create(const char *fn, sc_chain **out, size_t ic, size_t ih, size_t iw,
                                   const sc_layer *layers, size_t nlayers);
SC__INT sc_status sc__variant_plan(const char *fn, sc_chain *c);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* r = EAX, EBX, ECX, EDX of CPUID leaf, subleaf */
static inline void sc__cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* src/params.c: the checks of a parameter vector, the chain's fingerprint, little-endian fields */
SC__INT sc_status sc__init_check(const char *fn, const sc_chain *c, const void *p, size_t n);
SC__INT sc_status sc__write_check(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                  size_t n, const char *path, const char *verb);
#define SC__FNV_INIT 0xCBF29CE484222325ull
SC__INT uint64_t sc__fnv1a(uint64_t h, const void *data, size_t n);
SC__INT uint64_t sc__fingerprint(const sc_chain *c);
SC__INT void sc__put_le(unsigned char *b, uint64_t v, int bytes);
SC__INT uint64_t sc__get_le(const unsigned char *b, int bytes);

/* src/fileio.c: atomic writes and reads */
#if defined(__unix__) || defined(__APPLE__)
#define SC__POSIX_IO 1
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define SC__POSIX_IO 0
#endif

#define SC__TMP_EXTRA 64 /* bytes a temporary name needs beyond the path */

typedef struct sc__wfile {
#if SC__POSIX_IO
  int fd;
#else
  FILE *f;
#endif
  char *tmp; /* caller's buffer of strlen(path) + SC__TMP_EXTRA bytes */
  int err;   /* first errno seen (0: none), or -1 for a short write without errno */
} sc__wfile;

SC__INT sc_status sc__io_fail(const char *fn, int e, const char *what, const char *path);
SC__INT sc_status sc__wopen(sc__wfile *w, const char *path, char *tmp, const char *fn);
SC__INT void sc__wwrite(sc__wfile *w, const void *data, size_t n);
SC__INT sc_status sc__wcommit(sc__wfile *w, const char *path, const char *fn);
SC__INT sc_status sc__ropen(FILE **f, const char *path, const char *fn);
SC__INT sc_status sc__rerr(FILE *f, const char *path, const char *fn);

/* src/threads.c: the thread pool */
typedef void (*sc__task_fn)(void *arg, int worker, int nworkers);
typedef struct sc__pool sc__pool;
SC__INT size_t sc__parts(int nworkers);
SC__INT void sc__part_range(size_t w, size_t parts, size_t n, size_t *k0, size_t *k1);
#if SC__THREADS
SC__INT sc_status sc__pool_create(sc__pool **out, int nthreads);
#endif
SC__INT void sc__pool_destroy(sc__pool *P);
SC__INT int sc__pool_threads(const sc__pool *P);
SC__INT size_t sc__pool_claim(sc__pool *P);
SC__INT void sc__pool_run(sc__pool *P, sc__task_fn fn, void *arg);

/* src/workspace.c: slices */
/* rank r of R's contiguous run [*lo, *hi) of n slices (data-parallel training, sc_dist) */
static inline void sc__rank_slices(size_t n, size_t r, size_t R, size_t *lo, size_t *hi) {
  *lo = r * n / R;
  *hi = (r + 1) * n / R;
}
SC__INT size_t sc__slices_for(const sc_chain *c, size_t batch);
/* a thread count's range (sc_workspace_set_threads, sc_train's opts.threads) */
static inline sc_status sc__threads_check(const char *fn, int threads) {
  if (threads < 1 || threads > 1024)
    return sc__fail(SC_ERR_ARG, fn, "threads = %d, must be in [1, 1024]", threads);
  return SC_OK;
}

/* src/bf16_model.c: the portable models of the bf16 kernels (SC_BF16_KERNELS=model, amx-model) */
SC__INT void sc__bf16_gemm_model_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                      const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                      int acc, const size_t *arow, const size_t *crow, size_t grp,
                                      const size_t *brow);
SC__INT void sc__bf16_gemm_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                 const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                 int acc);
SC__INT void sc__bf16_dx_corr_model(float *restrict xg, const uint32_t *restrict wt,
                                    const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh,
                                    size_t kw, size_t oh, size_t ow);
SC__INT void sc__bf16_nt_model(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                               const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                               size_t M, size_t N, size_t K2, size_t S);
SC__INT void sc__bf16_gemm_amx_model_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                         size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                         size_t M, size_t N, size_t K2, size_t G, int acc);
SC__INT void sc__bf16_gemm_amx_model_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                          sc__grp_off ao, const uint32_t *B0, size_t ldb,
                                          sc__grp_off bo, size_t M, size_t N, size_t K2, size_t G);
SC__INT void sc__bf16_gemm_amx_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     int acc);

/* kernels/bf16/bf16.c and kernels/amx/amx.c: the bf16 kernels this compiler builds (AVX512_BF16:
 * GCC >= 10, clang >= 9; AMX: Linux on x86-64, GCC >= 11, clang >= 12), declared with the targets
 * their begin.h gives them. src/precision.c takes them where the CPU has them; the weight
 * packers are also called by the parameters' rounding (src/typed/exec.h). */
#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 9) ||                        \
                            (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define SC__HAVE_BF16_NATIVE 1
#define SC__BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
SC__BF16_TARGET SC__INT void sc__bf16_gemm_native_rows(float *C, size_t ldc, const uint32_t *A,
                                                       size_t lda, const uint32_t *B, size_t ldb,
                                                       size_t M, size_t N, size_t K2, int acc,
                                                       const size_t *arow, const size_t *crow,
                                                       size_t grp, const size_t *brow);
SC__BF16_TARGET SC__INT void sc__bf16_gemm_native(float *C, size_t ldc, const uint32_t *A,
                                                  size_t lda, const uint32_t *B, size_t ldb,
                                                  size_t M, size_t N, size_t K2, int acc);
SC__BF16_TARGET SC__INT void sc__bf16_gemm_native_ep(float *C, size_t ldc, const uint32_t *A,
                                                     size_t lda, const uint32_t *B, size_t ldb,
                                                     size_t M, size_t N, size_t K2,
                                                     const size_t *brow, const sc__bf16_ep *ep);
SC__BF16_TARGET SC__INT void sc__bf16_nt_native(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                                size_t sa, const uint32_t *B, const size_t *boff,
                                                size_t bsc, size_t sb, size_t M, size_t N,
                                                size_t K2, size_t S);
SC__BF16_TARGET SC__INT void sc__bf16_dwt5_native(float *restrict dwt, const uint32_t *restrict xp,
                                                  const uint32_t *restrict dzt, size_t K, size_t ic,
                                                  size_t hp, size_t wp, size_t oh, size_t ow);
SC__BF16_TARGET SC__INT void sc__bf16_dx_corr_native(float *restrict xg,
                                                     const uint32_t *restrict wt,
                                                     const uint32_t *restrict dzp, size_t C,
                                                     size_t K2, size_t kh, size_t kw, size_t oh,
                                                     size_t ow);
SC__BF16_TARGET SC__INT void sc__bf16_round_native(float *restrict x, size_t n);
SC__BF16_TARGET SC__INT void sc__bf16_dz_lanes_native(uint32_t *restrict dzp,
                                                      const float *restrict d, float *restrict bl,
                                                      const float *restrict a, size_t K,
                                                      size_t npos, int relu);
SC__BF16_TARGET SC__INT void sc__bf16_dz_pool_native(uint32_t *restrict dzp, float *restrict dzf,
                                                     const float *restrict g,
                                                     const float *restrict pa,
                                                     const float *restrict x, float *restrict bl,
                                                     size_t K, size_t OH, size_t OW, int relu);
SC__BF16_TARGET SC__INT void sc__bf16_pool_hits_native(float *restrict pa, uint8_t *restrict hits,
                                                       const float *restrict s2, size_t K, size_t q,
                                                       size_t PH, size_t PW, size_t w0, size_t w1,
                                                       int relu);
SC__BF16_TARGET SC__INT void
sc__bf16_dz_pool_hits_native(uint32_t *restrict dzp, float *restrict dzf, const float *restrict g,
                             const uint8_t *restrict hits, float *restrict bl, size_t K, size_t OH,
                             size_t OW);
SC__BF16_TARGET SC__INT void sc__bf16_wf_native(uint32_t *restrict wf, const float *restrict W,
                                                size_t I, size_t o0, size_t o1);
SC__BF16_TARGET SC__INT void sc__bf16_wd_native(uint32_t *restrict wd, const float *restrict W,
                                                size_t O, size_t I, size_t O2, size_t m0, size_t m1,
                                                int rnd);
#endif
#if defined(__x86_64__) && defined(__linux__) &&                                                   \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                              \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define SC__HAVE_AMX 1
#define SC__AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
SC__AMX_TARGET SC__INT void sc__bf16_gemm_amx_grp(float *C0, size_t ldc, sc__grp_off co,
                                                  const uint32_t *A0, size_t lda, sc__grp_off ao,
                                                  const uint32_t *B, size_t ldb, size_t M, size_t N,
                                                  size_t K2, size_t G, int acc);
SC__AMX_TARGET SC__INT void sc__bf16_gemm_amx_sumg(float *C, size_t ldc, const uint32_t *A0,
                                                   size_t lda, sc__grp_off ao, const uint32_t *B0,
                                                   size_t ldb, sc__grp_off bo, size_t M, size_t N,
                                                   size_t K2, size_t G);
SC__AMX_TARGET SC__INT void sc__bf16_gemm_amx(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                              const uint32_t *B, size_t ldb, size_t M, size_t N,
                                              size_t K2, int acc);
#endif

/* src/checks.c: the compute entry points' argument checks */
SC__INT sc_status sc__compute_check(const char *fn, const sc_chain *c, const void *p, const void *x,
                                    size_t batch, const sc_workspace *ws);
SC__INT sc_status sc__loss_check(const char *fn, const sc_chain *c, sc_loss loss,
                                 const void *target);
SC__INT sc_status sc__labels_check(const char *fn, const int32_t *lab, size_t n, size_t classes);

/* src/compute.c: the typed bodies the other rooms call (src/typed/exec.h) */
SC__INT sc_status sc__finite_check_f32(const char *fn, const sc_chain *c, const char *what,
                                       const float *v, size_t rows, size_t cols);
SC__INT sc_status sc__finite_check_f64(const char *fn, const sc_chain *c, const char *what,
                                       const double *v, size_t rows, size_t cols);
SC__INT void sc__tiles_fill_f32(float *restrict dst, const void *src, size_t cols, size_t n);
SC__INT void sc__tiles_fill_f64(double *restrict dst, const void *src, size_t cols, size_t n);
SC__INT int sc__valgrad_run_f32(const sc_chain *chain, sc_loss loss, const float *p, const float *x,
                                const size_t *idx, const void *target, size_t batch, double *lossv,
                                float *g, float *gx, sc_workspace *ws, int train, int chk_x);
SC__INT int sc__valgrad_run_f64(const sc_chain *chain, sc_loss loss, const double *p,
                                const double *x, const size_t *idx, const void *target,
                                size_t batch, double *lossv, double *g, double *gx,
                                sc_workspace *ws, int train, int chk_x);
SC__INT void sc__valgrad_own_f32(const sc_chain *chain, sc_loss loss, const float *p,
                                 const float *x, const size_t *idx, const void *target,
                                 size_t batch, sc_workspace *ws, int rank, int ranks, size_t *ns,
                                 size_t *lo, size_t *hi, double *slice_loss);
SC__INT void sc__valgrad_own_f64(const sc_chain *chain, sc_loss loss, const double *p,
                                 const double *x, const size_t *idx, const void *target,
                                 size_t batch, sc_workspace *ws, int rank, int ranks, size_t *ns,
                                 size_t *lo, size_t *hi, double *slice_loss);

/* src/compute.c: the typed bodies of the public compute calls (src/api.c: the same parameters) */
SC__INT sc_status sc__forward_f32(const sc_chain *chain, const float *p, const float *x,
                                  size_t batch, float *y, sc_workspace *ws);
SC__INT sc_status sc__forward_f64(const sc_chain *chain, const double *p, const double *x,
                                  size_t batch, double *y, sc_workspace *ws);
SC__INT sc_status sc__valgrad_f32(const sc_chain *chain, sc_loss loss, const float *p,
                                  const float *x, const void *target, size_t batch, float *lossv,
                                  float *g, float *gx, sc_workspace *ws);
SC__INT sc_status sc__valgrad_f64(const sc_chain *chain, sc_loss loss, const double *p,
                                  const double *x, const void *target, size_t batch, double *lossv,
                                  double *g, double *gx, sc_workspace *ws);
SC__INT sc_status sc__loss_value_f32(const sc_chain *chain, sc_loss loss, const float *p,
                                     const float *x, const void *target, size_t batch, float *lossv,
                                     sc_workspace *ws);
SC__INT sc_status sc__loss_value_f64(const sc_chain *chain, sc_loss loss, const double *p,
                                     const double *x, const void *target, size_t batch,
                                     double *lossv, sc_workspace *ws);
SC__INT sc_status sc__evaluate_f32(const sc_chain *chain, const float *p, const float *x,
                                   const int32_t *labels, size_t n, double *loss, double *accuracy,
                                   sc_workspace *ws);
SC__INT sc_status sc__evaluate_f64(const sc_chain *chain, const double *p, const double *x,
                                   const int32_t *labels, size_t n, double *loss, double *accuracy,
                                   sc_workspace *ws);
SC__INT sc_status sc__pullback_f32(const sc_chain *chain, const float *p, const float *x,
                                   const float *dy, size_t batch, float *g, float *gx,
                                   sc_workspace *ws);
SC__INT sc_status sc__pullback_f64(const sc_chain *chain, const double *p, const double *x,
                                   const double *dy, size_t batch, double *g, double *gx,
                                   sc_workspace *ws);
SC__INT sc_status sc__apply_f32(const sc_chain *chain, const float *p, const float *u, float *y,
                                sc_workspace *ws);
SC__INT sc_status sc__apply_f64(const sc_chain *chain, const double *p, const double *u, double *y,
                                sc_workspace *ws);
SC__INT sc_status sc__vjp_f32(const sc_chain *chain, const float *p, const float *u, const float *v,
                              float *y, float *du, float *dp, sc_workspace *ws);
SC__INT sc_status sc__vjp_f64(const sc_chain *chain, const double *p, const double *u,
                              const double *v, double *y, double *du, double *dp, sc_workspace *ws);
SC__INT sc_status sc__jvp_f32(const sc_chain *chain, const float *p, const float *u, const float *w,
                              float *y, float *jw, sc_workspace *ws);
SC__INT sc_status sc__jvp_f64(const sc_chain *chain, const double *p, const double *u,
                              const double *w, double *y, double *jw, sc_workspace *ws);

/* src/optim.c: an optimizer's state, its plan, and sc_train's float ADAM step on the threads */
struct sc_optimizer {
  const sc__kt_f32 *kf; /* for the fused update */
  sc_optim cfg;
  size_t n;
  uint64_t t;
  void *m, *v; /* ADAM moments; SGD uses m as the momentum buffer: n floats, or n doubles
                  once stepped in double (room for doubles is always there) */
  int prec;    /* the type of the steps since creation or reset: 0 none yet, 1 float, 2 double */
  void *owned;
};
/* (src/optim.c) the optimizer's plan, and sc_train's float ADAM step on the threads */
SC__INT sc_status sc__optim_plan(const char *fn, const sc_optim *cfg, size_t n, size_t *bytes);
SC__INT size_t sc__train_adam_f32(sc_optimizer *opt, sc__pool *pool, float *p, float *pbak,
                                  const float *g, size_t n);

/* src/checkpoint.c: sc_train's checkpoints */
/* A checkpoint file (little-endian, see simplechain.h for the guarantees):
 *   0 magic "SCCHECKP"   8 version (1, u32)      12 flags (u32: 0, or 1 = the arrays are
 *                                                   float64, written by sc_train_f64)
 *  16 nparams           24 chain fingerprint     32 samples     40 batch size    48 seed
 *  56 shuffle (u32)     60 optimizer kind (u32)
 *  64 lr, beta1, beta2, eps, momentum, weight_decay, clip_norm, lr_schedule, lr_min and
 *     the schedule's length in steps (0 for a constant rate) (10 doubles, as bits)
 * 144 step             152 epoch               160 steps into the epoch
 * 168 optimizer t      176 shuffling generator state (4 x u64)
 * 208 loss sum of the epoch so far (double)    216 index count (samples if shuffled, else 0)
 * 224 p, then the optimizer's m and v (nparams float32 or float64 each), then the sample order
 *     (count u64), then an FNV-1a checksum (u64) of every byte before it. */
#define SC__CK_MAGIC "SCCHECKP"
#define SC__CK_HEAD 224
#define SC__CK_NH 10

typedef struct sc__ckpt {
  uint64_t np, fp, nsamples, bs, seed;
  uint32_t shuffle, kind;
  double hyper[SC__CK_NH]; /* see the layout above */
  uint64_t step, epoch, pos, t, rng[4];
  double epoch_sum;
  uint64_t nidx;
  uint32_t f64; /* flags bit 0: the arrays are doubles */
} sc__ckpt;

SC__INT void sc__ck_identity(sc__ckpt *k, const sc_chain *chain, size_t n, size_t bs, int shuffle,
                             const sc_train_opts *o, size_t total);
SC__INT sc_status sc__ck_save(const char *fn, const char *path, char *tmp, sc__ckpt *ck,
                              size_t step, size_t epoch, size_t pos, double sum, const sc__rng *rng,
                              const void *p, const sc_optimizer *opt, const size_t *idx, size_t n);
SC__INT sc_status sc__ck_read(const char *fn, const char *path, const sc_chain *chain,
                              const sc__ckpt *want, sc__ckpt *k, void *p, void *m, void *v,
                              size_t *idx);

#endif /* SC_INTERNAL_H */

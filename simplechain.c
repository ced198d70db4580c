/* simplechain.c — engine, memory planning, drivers, losses, optimizers, training
 * loop, thread pool and the portable reference kernels. See simplechain.h.
 *
 * How this file is organised. The numeric code (kernels, drivers, losses) is written
 * once, for an element type SC__T, in the "typed section" at the end of the file; the
 * file includes itself twice to instantiate it for float (_f32) and double (_f64).
 * kernels/avx2.c and kernels/avx512.c include this file once more with
 * SC__KERNELS_ONLY defined: they get the same kernels compiled with their own -m
 * flags (and may replace some with intrinsics), and export a kernel table that the
 * dispatcher here picks at sc_chain_create. Compiled alone, this file is a complete,
 * portable library with the kernel set "scalar", and on x86-64 (GCC >= 8, Clang >= 10,
 * optimising) also a built-in "avx2" set: the typed section instantiated once more at the
 * end of the file under an AVX2 + FMA target pragma, the same code as kernels/avx2.c.
 *
 * Internal layout of a computation. A batch is cut into tiles of SC__TW samples.
 * Inside a tile, activations are stored feature-major: a layer output with O
 * features is an O x SC__TW array, row o holding feature o of the tile's samples, so
 * every kernel's inner loop runs over SC__TW contiguous samples (one or two vector
 * registers) with a broadcast weight. Tiles are grouped into slices; each slice owns
 * its tile buffers and a gradient accumulator, a thread works on whole slices, and
 * slices are reduced in index order, so results do not depend on the thread count.
 */
#ifndef SC__TYPED /* ======================================================== main pass */

#if !defined(_POSIX_C_SOURCE) && !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* pthread_setaffinity_np: pool threads pinned to cores */
#endif

#include "simplechain.h"

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

#ifndef SC__KERNELS_ONLY /* ================================ engine (non-typed part) */

/* ---------------------------------------------------------------- errors */
static SC__TLS char sc__errbuf[512];

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static sc_status
sc__fail(sc_status st, const char *fn, const char *fmt, ...) {
  va_list ap;
  int k = snprintf(sc__errbuf, sizeof sc__errbuf, "%s: ", fn);
  if (k < 0) k = 0;
  if ((size_t)k >= sizeof sc__errbuf) k = (int)sizeof sc__errbuf - 1;
  va_start(ap, fmt);
  vsnprintf(sc__errbuf + k, sizeof sc__errbuf - (size_t)k, fmt, ap);
  va_end(ap);
  return st;
}
#define SC__FAIL(st, ...) sc__fail((st), __func__, __VA_ARGS__)
#define SC__CHECK_NULL(ptr)                                                                        \
  do {                                                                                             \
    if (!(ptr)) return SC__FAIL(SC_ERR_NULL, "argument '%s' is NULL", #ptr);                       \
  } while (0)

const char *sc_last_error(void) { return sc__errbuf; }

sc_status sc_set_error(sc_status st, const char *fn, const char *fmt, ...) {
  va_list ap;
  int k = fn ? snprintf(sc__errbuf, sizeof sc__errbuf, "%s: ", fn) : 0;
  if (k < 0) k = 0;
  if ((size_t)k >= sizeof sc__errbuf) k = (int)sizeof sc__errbuf - 1;
  sc__errbuf[k] = 0;
  if (fmt) {
    va_start(ap, fmt);
    vsnprintf(sc__errbuf + k, sizeof sc__errbuf - (size_t)k, fmt, ap);
    va_end(ap);
  }
  return st;
}

const char *sc_status_str(sc_status s) {
  switch (s) {
  case SC_OK: return "SC_OK";
  case SC_ERR_NULL: return "SC_ERR_NULL";
  case SC_ERR_ARG: return "SC_ERR_ARG";
  case SC_ERR_SHAPE: return "SC_ERR_SHAPE";
  case SC_ERR_OVERFLOW: return "SC_ERR_OVERFLOW";
  case SC_ERR_NOMEM: return "SC_ERR_NOMEM";
  case SC_ERR_NONFINITE: return "SC_ERR_NONFINITE";
  case SC_ERR_BATCH: return "SC_ERR_BATCH";
  case SC_ERR_IO: return "SC_ERR_IO";
  case SC_ERR_FORMAT: return "SC_ERR_FORMAT";
  case SC_ERR_UNSUPPORTED: return "SC_ERR_UNSUPPORTED";
  case SC_ERR_THREAD: return "SC_ERR_THREAD";
  case SC_ERR_STOPPED: return "SC_ERR_STOPPED";
  case SC_ERR_CALLBACK: return "SC_ERR_CALLBACK";
  }
  return "SC_ERR_(unknown)";
}

/* ---------------------------------------------------------------- size arithmetic */
/* All size computations go through these; *ok is cleared on overflow. */
static size_t sc__add(size_t a, size_t b, int *ok) {
  if (a > SIZE_MAX - b) {
    *ok = 0;
    return 0;
  }
  return a + b;
}
static size_t sc__mul(size_t a, size_t b, int *ok) {
  if (a != 0 && b > SIZE_MAX / a) {
    *ok = 0;
    return 0;
  }
  return a * b;
}
static size_t sc__roundup(size_t a, size_t m, int *ok) {
  size_t r = sc__add(a, m - 1, ok);
  return r - r % m;
}

/* ---------------------------------------------------------------- PRNG */
/* splitmix64 to seed, xoshiro256** to draw: same numbers on every machine. */
typedef struct sc__rng {
  uint64_t s[4];
} sc__rng;

static uint64_t sc__splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static void sc__rng_seed(sc__rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = sc__splitmix(&seed);
}
static uint64_t sc__rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t sc__rng_next(sc__rng *r) {
  uint64_t *s = r->s;
  uint64_t out = sc__rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = sc__rotl(s[3], 45);
  return out;
}
/* uniform in [0, 1) with 53 random bits */
static double sc__rng_unif(sc__rng *r) { return (double)(sc__rng_next(r) >> 11) * 0x1.0p-53; }
/* uniform integer in [0, n), unbiased (rejection) */
static uint64_t sc__rng_below(sc__rng *r, uint64_t n) {
  uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
  do v = sc__rng_next(r);
  while (v >= lim);
  return v % n;
}

/* ---------------------------------------------------------------- layers */
sc_layer sc_dense(size_t outputs, sc_act act) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_DENSE;
  l.act = act;
  l.outputs = outputs;
  l.bias = 1;
  return l;
}
sc_layer sc_dense_nobias(size_t outputs, sc_act act) {
  sc_layer l = sc_dense(outputs, act);
  l.bias = 0;
  return l;
}

sc_layer sc_conv2d_ex(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                      size_t ph, size_t pw) {
  sc_layer l = sc_dense(channels, act);
  l.kind = SC_LAYER_CONV2D;
  l.kh = kh, l.kw = kw, l.sh = sh, l.sw = sw, l.ph = ph, l.pw = pw;
  return l;
}
sc_layer sc_conv2d(size_t kh, size_t kw, size_t channels, sc_act act) {
  return sc_conv2d_ex(kh, kw, channels, act, 1, 1, 0, 0);
}
sc_layer sc_conv2d_nobias(size_t kh, size_t kw, size_t channels, sc_act act, size_t sh, size_t sw,
                          size_t ph, size_t pw) {
  sc_layer l = sc_conv2d_ex(kh, kw, channels, act, sh, sw, ph, pw);
  l.bias = 0;
  return l;
}
sc_layer sc_maxpool2d(size_t kh, size_t kw) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_MAXPOOL2D;
  l.kh = kh, l.kw = kw, l.sh = kh, l.sw = kw;
  return l;
}
sc_layer sc_flatten(void) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_FLATTEN;
  return l;
}
sc_layer sc_dropout(double rate) {
  sc_layer l;
  memset(&l, 0, sizeof l);
  l.kind = SC_LAYER_DROPOUT;
  l.rate = rate;
  return l;
}

const char *sc_layer_name(sc_layer_kind kind) {
  switch (kind) {
  case SC_LAYER_DENSE: return "dense";
  case SC_LAYER_CONV2D: return "conv2d";
  case SC_LAYER_MAXPOOL2D: return "maxpool2d";
  case SC_LAYER_FLATTEN: return "flatten";
  case SC_LAYER_DROPOUT: return "dropout";
  }
  return "?";
}

const char *sc_act_name(sc_act act) {
  switch (act) {
  case SC_IDENTITY: return "identity";
  case SC_RELU: return "relu";
  case SC_TANH: return "tanh";
  case SC_SIGMOID: return "sigmoid";
  case SC_SOFTPLUS: return "softplus";
  case SC_GELU: return "gelu";
  }
  return "?";
}

/* ---------------------------------------------------------------- chain plan */
/* kernel tables: reference ones from the typed section below, optional ISA ones */
static const sc__kt_f32 sc__kt_ref_f32;
static const sc__kt_f64 sc__kt_ref_f64;
/* A build without kernels/ files (the two drop-in files, SC_HAVE_KERNELS undefined) on
 * x86-64 with GCC >= 8 or Clang >= 10 compiles the typed section twice more at the end of
 * this file, by target pragma: for AVX2 + FMA (the same code as kernels/avx2.c: the "avx2"
 * set) and for AVX-512 (as kernels/avx512.c: "avx512"), picked by CPUID like the kernels/
 * ones. -DSC_NO_BUILTIN_AVX512 leaves out the second (a faster compile), -DSC_NO_BUILTIN_AVX2
 * both. */
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
/* A drop-in build that compiles kernels/avx2.c and kernels/avx512.c along (no -D needed):
 * weak references, null when those files are not linked in */
extern const sc__kt_f32 sc__kt_f32_avx2 __attribute__((weak));
extern const sc__kt_f32 sc__kt_f32_avx512 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx2 __attribute__((weak));
extern const sc__kt_f64 sc__kt_f64_avx512 __attribute__((weak));
#define SC__KERNELS 1
#define SC__HAS_KT(t) (&(t) != NULL)
#else
#define SC__KERNELS 0
#endif

/* The kernel tables for this CPU, or the ones SC_ISA forces. */
static sc_status sc__pick_kernels(const char *fn, const sc__kt_f32 **kf, const sc__kt_f64 **kd) {
  const char *want = getenv("SC_ISA");
  const sc__kt_f32 *f2 = NULL, *f5 = NULL; /* the AVX2 and AVX-512 sets, where usable */
  const sc__kt_f64 *d2 = NULL, *d5 = NULL;
#if (SC__KERNELS || SC__BUILTIN_AVX2) && defined(__GNUC__) &&                                      \
    (defined(__x86_64__) || defined(__i386__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
#if SC__KERNELS
    if (SC__HAS_KT(sc__kt_f32_avx2) && SC__HAS_KT(sc__kt_f64_avx2))
      f2 = &sc__kt_f32_avx2, d2 = &sc__kt_f64_avx2;
#endif
#if SC__BUILTIN_AVX2
    if (!f2) f2 = &sc__kt_f32_avx2in, d2 = &sc__kt_f64_avx2in;
#endif
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
#if SC__KERNELS
    if (SC__HAS_KT(sc__kt_f32_avx512) && SC__HAS_KT(sc__kt_f64_avx512))
      f5 = &sc__kt_f32_avx512, d5 = &sc__kt_f64_avx512;
#endif
#if SC__BUILTIN_AVX512
    if (!f5) f5 = &sc__kt_f32_avx512in, d5 = &sc__kt_f64_avx512in;
#endif
  }
#endif
  *kf = &sc__kt_ref_f32;
  *kd = &sc__kt_ref_f64;
  if (want && *want && strcmp(want, "auto") != 0) {
    if (strcmp(want, "scalar") == 0) return SC_OK;
    if (strcmp(want, "avx2") != 0 && strcmp(want, "avx512") != 0)
      return sc__fail(SC_ERR_ARG, fn, "SC_ISA='%s' is not one of scalar, avx2, avx512, auto", want);
    if ((strcmp(want, "avx2") == 0 && !f2) || (strcmp(want, "avx512") == 0 && !f5))
      return sc__fail(SC_ERR_UNSUPPORTED, fn, "SC_ISA=%s requested, but %s", want,
#if SC__KERNELS
                      "this CPU does not support it, or its kernels/ file was not compiled in"
#elif SC__BUILTIN_AVX2
                      "this CPU does not support it"
#else
                      "this build has no SIMD kernels (build with make, or compile kernels/avx2.c "
                      "and kernels/avx512.c with simplechain.c)"
#endif
      );
  }
  if (f5 && !(want && strcmp(want, "avx2") == 0))
    *kf = f5, *kd = d5;
  else if (f2)
    *kf = f2, *kd = d2;
  return SC_OK;
}

const char *sc_chain_isa(const sc_chain *chain) { return chain ? chain->kf->name : "?"; }

/* the variant planner (after the file helpers it uses; see "variants" below) */
static sc_status sc__variant_plan(const char *fn, sc_chain *c);

static size_t sc__tile_alloc(size_t *cursor, size_t elems, int *ok) {
  size_t at = *cursor;
  *cursor = sc__roundup(sc__add(at, elems, ok), 16, ok);
  return at;
}

#define SC__DIM_MAX ((size_t)1 << 28) /* keeps every per-tile buffer addressable */

/* Fields a layer kind does not use must hold what its constructor sets (0, or for a
 * maxpool's stride the window), so that a hand-built layer means exactly one thing and
 * fingerprints (parameter files) match the constructor-built twin. */
enum {
  SC__F_ACT = 1,
  SC__F_OUT = 2,
  SC__F_BIAS = 4,
  SC__F_K = 8,
  SC__F_S = 16,
  SC__F_P = 32,
  SC__F_RATE = 64
};
static sc_status sc__unused_fields(const char *fn, size_t l, const char *nm, const sc_layer *s,
                                   unsigned must_be_zero) {
  const char *f = NULL;
  size_t v = 0;
  if ((must_be_zero & SC__F_ACT) && s->act != SC_IDENTITY)
    f = "act", v = (size_t)s->act;
  else if ((must_be_zero & SC__F_OUT) && s->outputs)
    f = "outputs", v = s->outputs;
  else if ((must_be_zero & SC__F_BIAS) && s->bias)
    f = "bias", v = (size_t)s->bias;
  else if ((must_be_zero & SC__F_K) && s->kh)
    f = "kh", v = s->kh;
  else if ((must_be_zero & SC__F_K) && s->kw)
    f = "kw", v = s->kw;
  else if ((must_be_zero & SC__F_S) && s->sh)
    f = "sh", v = s->sh;
  else if ((must_be_zero & SC__F_S) && s->sw)
    f = "sw", v = s->sw;
  else if ((must_be_zero & SC__F_P) && s->ph)
    f = "ph", v = s->ph;
  else if ((must_be_zero & SC__F_P) && s->pw)
    f = "pw", v = s->pw;
  if (f)
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (%s): field '%s' = %lld is not used by a %s layer and must be 0", l,
                    nm, f, (long long)v, nm);
  if ((must_be_zero & SC__F_RATE) && s->rate != 0.0)
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (%s): field 'rate' = %g is not used by a %s layer and must be 0", l,
                    nm, s->rate, nm);
  return SC_OK;
}

/* Validates one layer against its input shape and fills its shapes and parameter
 * count. Returns a status with the message already set. */
static sc_status sc__plan_layer(const char *fn, size_t l, sc__lplan *P, int *ok) {
  const sc_layer *s = &P->spec;
  const char *nm = sc_layer_name(s->kind);
  if (strcmp(nm, "?") == 0)
    return sc__fail(SC_ERR_ARG, fn, "layer %zu: unknown layer kind %d", l, (int)s->kind);
  P->in = sc__mul(sc__mul(P->ic, P->ih, ok), P->iw, ok);
  P->roff = NULL;
  P->tperm = P->troff = P->cpoff = NULL;
  static const unsigned unused[] = {
      [SC_LAYER_DENSE] = SC__F_K | SC__F_S | SC__F_P | SC__F_RATE,
      [SC_LAYER_CONV2D] = SC__F_RATE,
      [SC_LAYER_MAXPOOL2D] = SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_P | SC__F_RATE,
      [SC_LAYER_FLATTEN] =
          SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_K | SC__F_S | SC__F_P | SC__F_RATE,
      [SC_LAYER_DROPOUT] = SC__F_ACT | SC__F_OUT | SC__F_BIAS | SC__F_K | SC__F_S | SC__F_P};
  sc_status ust = sc__unused_fields(fn, l, nm, s, unused[s->kind]);
  if (ust) return ust;
  if (s->kind == SC_LAYER_MAXPOOL2D && (s->sh != s->kh || s->sw != s->kw))
    return sc__fail(SC_ERR_ARG, fn,
                    "layer %zu (maxpool2d): stride %zux%zu must equal the window %zux%zu "
                    "(only non-overlapping windows are supported)",
                    l, s->sh, s->sw, s->kh, s->kw);
  switch (s->kind) {
  case SC_LAYER_DENSE:
  case SC_LAYER_CONV2D:
    if ((unsigned)s->act > (unsigned)SC_GELU)
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (%s): unknown activation %d", l, nm, (int)s->act);
    if (s->bias != 0 && s->bias != 1)
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (%s): bias must be 0 or 1, got %d", l, nm,
                      s->bias);
    if (s->outputs == 0)
      return sc__fail(SC_ERR_SHAPE, fn, "layer %zu (%s): %s must be > 0", l, nm,
                      s->kind == SC_LAYER_DENSE ? "outputs" : "channels");
    if (s->outputs > SC__DIM_MAX)
      return sc__fail(SC_ERR_OVERFLOW, fn, "layer %zu (%s): %zu outputs is too large", l, nm,
                      s->outputs);
    break;
  default: break;
  }
  switch (s->kind) {
  case SC_LAYER_DENSE:
    if (P->ih != 1 || P->iw != 1)
      return sc__fail(
          SC_ERR_SHAPE, fn,
          "layer %zu (dense): input is %zux%zux%zu, not a vector: add sc_flatten() before it", l,
          P->ic, P->ih, P->iw);
    P->oc = s->outputs, P->oh = 1, P->ow = 1;
    P->np = sc__add(sc__mul(P->oc, P->in, ok), s->bias ? P->oc : 0, ok);
    break;
  case SC_LAYER_CONV2D: {
    if (s->kh == 0 || s->kw == 0 || s->sh == 0 || s->sw == 0)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): kernel %zux%zu and stride %zux%zu must be > 0", l, s->kh,
                      s->kw, s->sh, s->sw);
    if (s->kh > SC__DIM_MAX || s->kw > SC__DIM_MAX || s->ph > SC__DIM_MAX || s->pw > SC__DIM_MAX ||
        s->sh > SC__DIM_MAX || s->sw > SC__DIM_MAX)
      return sc__fail(SC_ERR_OVERFLOW, fn,
                      "layer %zu (conv2d): kernel, stride or padding too large", l);
    if (s->ph >= s->kh || s->pw >= s->kw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): padding %zux%zu must be smaller than the kernel %zux%zu",
                      l, s->ph, s->pw, s->kh, s->kw);
    P->hp = P->ih + 2 * s->ph;
    P->wp = P->iw + 2 * s->pw;
    if (P->hp < s->kh || P->wp < s->kw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (conv2d): kernel %zux%zu larger than the %s input %zux%zu", l,
                      s->kh, s->kw, (s->ph || s->pw) ? "padded" : "", P->hp, P->wp);
    P->oc = s->outputs;
    P->oh = (P->hp - s->kh) / s->sh + 1;
    P->ow = (P->wp - s->kw) / s->sw + 1;
    P->R = sc__mul(sc__mul(P->ic, s->kh, ok), s->kw, ok);
    P->np = sc__add(sc__mul(P->oc, P->R, ok), s->bias ? P->oc : 0, ok);
    break;
  }
  case SC_LAYER_MAXPOOL2D:
    if (s->kh == 0 || s->kw == 0)
      return sc__fail(SC_ERR_SHAPE, fn, "layer %zu (maxpool2d): window %zux%zu must be > 0", l,
                      s->kh, s->kw);
    if (s->kh > P->ih || s->kw > P->iw)
      return sc__fail(SC_ERR_SHAPE, fn,
                      "layer %zu (maxpool2d): window %zux%zu larger than the input %zux%zu", l,
                      s->kh, s->kw, P->ih, P->iw);
    P->oc = P->ic, P->oh = P->ih / s->kh, P->ow = P->iw / s->kw;
    P->np = 0;
    break;
  case SC_LAYER_FLATTEN:
    P->oc = P->in, P->oh = 1, P->ow = 1;
    P->np = 0;
    break;
  case SC_LAYER_DROPOUT:
    if (!(s->rate >= 0.0 && s->rate < 1.0))
      return sc__fail(SC_ERR_ARG, fn, "layer %zu (dropout): rate %g must be in [0, 1)", l, s->rate);
    P->oc = P->ic, P->oh = P->ih, P->ow = P->iw;
    P->np = 0;
    break;
  }
  P->out = sc__mul(sc__mul(P->oc, P->oh, ok), P->ow, ok);
  if (!*ok || P->out > SC__DIM_MAX)
    return sc__fail(SC_ERR_OVERFLOW, fn, "layer %zu (%s): output of %zux%zux%zu is too large", l,
                    nm, P->oc, P->oh, P->ow);
  return SC_OK;
}

static sc_status sc__chain_create(const char *fn, sc_chain **out, size_t ic, size_t ih, size_t iw,
                                  const sc_layer *layers, size_t nlayers) {
  if (!out) return sc__fail(SC_ERR_NULL, fn, "argument 'out' is NULL");
  *out = NULL;
  if (!layers) return sc__fail(SC_ERR_NULL, fn, "argument 'layers' is NULL");
  if (nlayers == 0)
    return sc__fail(SC_ERR_ARG, fn, "nlayers is 0: a chain needs at least one layer");
  if (ic == 0 || ih == 0 || iw == 0)
    return sc__fail(SC_ERR_SHAPE, fn, "input shape %zux%zux%zu has a zero dimension", ic, ih, iw);
  if (nlayers > 100000)
    return sc__fail(SC_ERR_ARG, fn, "nlayers = %zu is unreasonably large", nlayers);
  int ok = 1;
  size_t in = sc__mul(sc__mul(ic, ih, &ok), iw, &ok);
  if (!ok || in > SC__DIM_MAX)
    return sc__fail(SC_ERR_OVERFLOW, fn, "input of %zux%zux%zu is too large", ic, ih, iw);
  /* conv tap-offset tables live after the layer plans, in the same allocation */
  size_t ntaps = 0;
  {
    size_t c = ic, h = ih, w = iw;
    for (size_t l = 0; l < nlayers; l++) {
      sc__lplan tmp;
      memset(&tmp, 0, sizeof tmp);
      tmp.spec = layers[l];
      tmp.ic = c, tmp.ih = h, tmp.iw = w;
      sc_status st = sc__plan_layer(fn, l, &tmp, &ok);
      if (st) return st;
      if (tmp.spec.kind == SC_LAYER_CONV2D) ntaps = sc__add(ntaps, sc__mul(4, tmp.R, &ok), &ok);
      c = tmp.oc, h = tmp.oh, w = tmp.ow;
    }
  }
  size_t head = sc__add(sizeof(sc_chain), sc__mul(nlayers, sizeof(sc__lplan), &ok), &ok);
  size_t bytes = sc__add(head, sc__mul(ntaps, sizeof(size_t), &ok), &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "chain description size overflows");
  sc_chain *c = calloc(1, bytes);
  if (!c)
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory allocating the chain (%zu bytes)", bytes);
  size_t *taps = (size_t *)(void *)((unsigned char *)c + head);
  c->nlayers = nlayers;
  c->in_c = ic, c->in_h = ih, c->in_w = iw;
  c->in = in;
  size_t np = 0, maxw = in, maxdense = 0;
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    P->spec = layers[l];
    if (l == 0)
      P->ic = ic, P->ih = ih, P->iw = iw;
    else
      P->ic = c->L[l - 1].oc, P->ih = c->L[l - 1].oh, P->iw = c->L[l - 1].ow;
    sc__plan_layer(fn, l, P, &ok); /* validated above */
    if (P->spec.kind == SC_LAYER_CONV2D) {
      size_t r = 0;
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t i = 0; i < P->spec.kh; i++)
          for (size_t j = 0; j < P->spec.kw; j++) taps[r++] = (ci * P->hp + i) * P->wp + j;
      P->roff = taps;
      size_t *perm = taps + P->R, *poff = perm + P->R, m = 0;
      for (size_t i = 0; i < P->spec.kh; i++)
        for (size_t j = 0; j < P->spec.kw; j++)
          for (size_t ci = 0; ci < P->ic; ci++, m++) {
            perm[m] = (ci * P->spec.kh + i) * P->spec.kw + j;
            poff[m] = P->roff[perm[m]];
          }
      P->tperm = perm, P->troff = poff;
      /* the direct forward's pairs of taps (sc__bf16_pack_colpairs), ic ceil(kh kw / 2) <= R */
      size_t *cpo = poff + P->R, kh = P->spec.kh, kw = P->spec.kw, t = kh * kw;
      size_t plane2 = P->ic * P->hp * P->wp; /* the wrapped pairs (or the single copies) */
      m = 0;
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t q = 2; q <= t + 1; q += 2) { /* taps q - 2 and q - 1 */
          size_t i = (q - 2) / kw, j = (q - 2) % kw, row = (ci * P->hp + i) * P->wp;
          if (q <= t) /* a column pair in row i, or a wrapped pair into row i + 1 */
            cpo[m++] = j + 1 < kw ? row + j : plane2 + row;
          else if (kw >= 2) /* the last tap: its column pair's second half */
            cpo[m++] = row + j - 1;
          else /* kw = 1: its wrapped pair's second half; 1 x 1: its single copy */
            cpo[m++] = kh >= 2 ? plane2 + row - P->wp : plane2 + row;
        }
      P->cpoff = cpo;
      taps += 4 * P->R;
    }
    if (P->spec.kind == SC_LAYER_DENSE && P->in > maxdense) maxdense = P->in;
    P->poff = np;
    np = sc__add(np, P->np, &ok);
    if (P->out > maxw) maxw = P->out;
  }
  if (!ok) {
    free(c);
    return sc__fail(SC_ERR_OVERFLOW, fn, "parameter count overflows size_t");
  }
  c->out = c->L[nlayers - 1].out;
  c->nparams = np;
  {
    /* multiply-adds per sample, forward; a slice should hold >= ~2^19 per tile-sample */
    double macs = 0;
    for (size_t l = 0; l < nlayers; l++) {
      const sc__lplan *P = &c->L[l];
      if (P->spec.kind == SC_LAYER_DENSE)
        macs += (double)P->in * (double)P->out;
      else if (P->spec.kind == SC_LAYER_CONV2D)
        macs += (double)P->R * (double)P->out;
      else
        macs += (double)P->in;
    }
    double want = 524288.0 / (macs * SC__TW);
    c->min_tiles = want >= SC__MIN_TILES ? SC__MIN_TILES : (want <= 1 ? 1 : (size_t)ceil(want));
  }
  c->maxw = maxw;
  /* tile plan (elements of one slice's tile memory) */
  size_t cur = 0, TW = SC__TW;
  c->x_off = sc__tile_alloc(&cur, sc__mul(c->in, TW, &ok), &ok);
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    int k = P->spec.kind, has_w = k == SC_LAYER_DENSE || k == SC_LAYER_CONV2D;
    P->a_off = k == SC_LAYER_FLATTEN ? (l ? c->L[l - 1].a_off : c->x_off)
                                     : sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok);
    P->z_off = has_w && P->spec.act == SC_GELU ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok)
                                               : SIZE_MAX;
    P->lane_off =
        has_w && P->spec.bias ? sc__tile_alloc(&cur, sc__mul(P->oc, TW, &ok), &ok) : SIZE_MAX;
    size_t nw = has_w ? P->np - (P->spec.bias ? P->oc : 0) : 0;
    P->dwl_off = (k == SC_LAYER_CONV2D || (k == SC_LAYER_DENSE && nw <= SC__DWL_MAX))
                     ? sc__tile_alloc(&cur, sc__mul(nw, TW, &ok), &ok)
                     : SIZE_MAX;
    /* holding a tile's dz costs out row copies (and its input a second buffer, a_off2)
     * and saves out x in accumulator stores, the lane form's bottleneck: taken from
     * about 2 (in + out) weights up */
    P->hold_off = k == SC_LAYER_DENSE && P->dwl_off != SIZE_MAX && nw >= 2 * (P->in + P->out)
                      ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok)
                      : SIZE_MAX;
    P->pad_off =
        k == SC_LAYER_CONV2D && (P->spec.ph || P->spec.pw)
            ? sc__tile_alloc(&cur, sc__mul(sc__mul(P->ic * P->hp, P->wp, &ok), TW, &ok), &ok)
            : SIZE_MAX;
    P->mask_off = k == SC_LAYER_DROPOUT ? sc__tile_alloc(&cur, P->out, &ok) : SIZE_MAX;
#if defined(SC_HAVE_XSMM) && defined(SC_HAVE_KERNELS)
    P->col_off = k == SC_LAYER_CONV2D
                     ? sc__tile_alloc(&cur, sc__mul(sc__mul(P->R, P->ow, &ok), TW, &ok), &ok)
                     : SIZE_MAX;
#else
    P->col_off = SIZE_MAX;
#endif
  }
  /* second buffers for the inputs of layers that hold a tile (dW in pairs): the first
   * tile's input must survive the second tile's forward. Backwards first: whether the
   * layer reading each output (through flattens, which are views) holds; a_off2 keeps
   * that flag until the forward pass below places the buffers. */
  int reader_holds = 0; /* for the last layer's output: nothing reads it */
  for (size_t l = nlayers; l-- > 0;) {
    sc__lplan *P = &c->L[l];
    P->a_off2 = (size_t)reader_holds;
    reader_holds = P->spec.kind == SC_LAYER_FLATTEN ? reader_holds : P->hold_off != SIZE_MAX;
  }
  c->x_off2 = reader_holds ? sc__tile_alloc(&cur, sc__mul(c->in, TW, &ok), &ok) : c->x_off;
  for (size_t l = 0; l < nlayers; l++) {
    sc__lplan *P = &c->L[l];
    if (P->spec.kind == SC_LAYER_FLATTEN)
      P->a_off2 = l ? c->L[l - 1].a_off2 : c->x_off2;
    else
      P->a_off2 = P->a_off2 ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok) : P->a_off;
  }
  c->d0_off = sc__tile_alloc(&cur, sc__mul(c->maxw, TW, &ok), &ok);
  c->d1_off = sc__tile_alloc(&cur, sc__mul(c->maxw, TW, &ok), &ok);
  c->ldT = sc__roundup(maxdense ? maxdense : 1, 16, &ok);
  c->xT_off = sc__tile_alloc(&cur, sc__mul(c->ldT, TW, &ok), &ok);
  c->t_off = sc__tile_alloc(&cur, sc__mul(c->out, TW, &ok), &ok); /* gathered targets */
  c->lossl_off = sc__tile_alloc(&cur, 2 * TW, &ok);               /* loss, correct lanes */
  c->tile_elems = cur;
  if (!ok) {
    free(c);
    return sc__fail(SC_ERR_OVERFLOW, fn, "tile memory plan overflows size_t");
  }
  sc_status st = sc__pick_kernels(fn, &c->kf, &c->kd);
  if (st != SC_OK) {
    free(c);
    return st;
  }
  if ((st = sc__variant_plan(fn, c)) != SC_OK) {
    free(c);
    return st;
  }
  *out = c;
  return SC_OK;
}

sc_status sc_chain_create(sc_chain **out, size_t input_features, const sc_layer *layers,
                          size_t nlayers) {
  if (out) *out = NULL;
  if (out && layers && nlayers && input_features == 0)
    return SC__FAIL(SC_ERR_SHAPE, "input_features is 0");
  return sc__chain_create(__func__, out, input_features, 1, 1, layers, nlayers);
}
sc_status sc_chain_create_image(sc_chain **out, size_t channels, size_t height, size_t width,
                                const sc_layer *layers, size_t nlayers) {
  return sc__chain_create(__func__, out, channels, height, width, layers, nlayers);
}

void sc_chain_destroy(sc_chain *chain) { free(chain); }

sc_status sc_chain_nparams(const sc_chain *chain, size_t *nparams) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(nparams);
  *nparams = chain->nparams;
  return SC_OK;
}
sc_status sc_chain_input_size(const sc_chain *chain, size_t *features) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(features);
  *features = chain->in;
  return SC_OK;
}
sc_status sc_chain_output_size(const sc_chain *chain, size_t *features) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(features);
  *features = chain->out;
  return SC_OK;
}
sc_status sc_chain_nlayers(const sc_chain *chain, size_t *nlayers) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(nlayers);
  *nlayers = chain->nlayers;
  return SC_OK;
}
sc_status sc_chain_layer_info(const sc_chain *chain, size_t index, sc_layer_info *info) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(info);
  if (index >= chain->nlayers)
    return SC__FAIL(SC_ERR_ARG, "layer index %zu out of range (chain has %zu layers)", index,
                    chain->nlayers);
  const sc__lplan *P = &chain->L[index];
  info->layer = P->spec;
  info->inputs = P->in;
  info->outputs = P->out;
  info->in_shape[0] = P->ic, info->in_shape[1] = P->ih, info->in_shape[2] = P->iw;
  info->out_shape[0] = P->oc, info->out_shape[1] = P->oh, info->out_shape[2] = P->ow;
  info->nparams = P->np;
  info->param_offset = P->poff;
  return SC_OK;
}

/* appends to a bounded buffer, tracking the length it would have had */
typedef struct sc__sbuf {
  char *buf;
  size_t cap, len;
} sc__sbuf;
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sc__sprintf(sc__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = b->len < b->cap ? b->buf + b->len : NULL;
  size_t room = b->len < b->cap ? b->cap - b->len : 0;
  int k = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (k > 0) b->len += (size_t)k;
}

sc_status sc_chain_summary(const sc_chain *chain, char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  if (!buf && cap > 0) return SC__FAIL(SC_ERR_NULL, "buf is NULL but cap is %zu", cap);
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  char shape[64];
  sc__sprintf(&b, "%-6s %-18s %-9s %14s %10s %10s\n", "layer", "type", "act", "output", "params",
              "offset");
  if (chain->in_h == 1 && chain->in_w == 1)
    snprintf(shape, sizeof shape, "%zu", chain->in_c);
  else
    snprintf(shape, sizeof shape, "%zux%zux%zu", chain->in_c, chain->in_h, chain->in_w);
  sc__sprintf(&b, "%-6s %-18s %-9s %14s %10s %10s\n", "-", "input", "-", shape, "-", "-");
  for (size_t l = 0; l < chain->nlayers; l++) {
    const sc__lplan *P = &chain->L[l];
    char type[32];
    const char *act = "-";
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
      snprintf(type, sizeof type, "%s%s", P->spec.bias ? "dense" : "dense (no bias)",
               P->xfwd ? " xsmm" : "");
      act = sc_act_name(P->spec.act);
      break;
    case SC_LAYER_CONV2D:
      snprintf(type, sizeof type, "conv2d %zux%zu%s", P->spec.kh, P->spec.kw,
               P->spec.bias ? "" : " nobias");
      act = sc_act_name(P->spec.act);
      break;
    case SC_LAYER_MAXPOOL2D:
      snprintf(type, sizeof type, "maxpool2d %zux%zu", P->spec.kh, P->spec.kw);
      break;
    case SC_LAYER_DROPOUT: snprintf(type, sizeof type, "dropout %.3g", P->spec.rate); break;
    default: snprintf(type, sizeof type, "%s", sc_layer_name(P->spec.kind));
    }
    if (P->oh == 1 && P->ow == 1)
      snprintf(shape, sizeof shape, "%zu", P->oc);
    else
      snprintf(shape, sizeof shape, "%zux%zux%zu", P->oc, P->oh, P->ow);
    sc__sprintf(&b, "%-6zu %-18s %-9s %14s %10zu %10zu\n", l, type, act, shape, P->np, P->poff);
  }
  sc__sprintf(&b, "total parameters: %zu (%zu bytes as float); kernels: %s\n", chain->nparams,
              chain->nparams * sizeof(float), chain->kf->name);
  if (needed) *needed = b.len + 1;
  if (b.len + 1 > cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return SC__FAIL(SC_ERR_NOMEM, "buffer of %zu bytes too small for the summary (%zu needed)", cap,
                    b.len + 1);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- params init */
static sc_status sc__init_check(const char *fn, const sc_chain *c, const void *p, size_t n) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (n != c->nparams)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the chain has %zu parameters", n, c->nparams);
  return SC_OK;
}

/* Glorot-uniform in double; `put` stores one value at index k */
#define SC__GLOROT_BODY(PUT)                                                                       \
  do {                                                                                             \
    sc__rng r;                                                                                     \
    sc__rng_seed(&r, seed);                                                                        \
    for (size_t l = 0; l < chain->nlayers; l++) {                                                  \
      const sc__lplan *P = &chain->L[l];                                                           \
      if (P->np == 0) continue;                                                                    \
      size_t taps = P->spec.kind == SC_LAYER_CONV2D ? P->spec.kh * P->spec.kw : 1;                 \
      size_t fan_in = P->spec.kind == SC_LAYER_CONV2D ? P->R : P->in;                              \
      double a = sqrt(6.0 / (double)(fan_in + P->oc * taps));                                      \
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);                                              \
      for (size_t k = 0; k < nw; k++) PUT(P->poff + k, a * (2.0 * sc__rng_unif(&r) - 1.0));        \
      for (size_t k = nw; k < P->np; k++) PUT(P->poff + k, 0.0);                                   \
    }                                                                                              \
  } while (0)

sc_status sc_params_init(const sc_chain *chain, float *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTF(k, v) p[(k)] = (float)(v)
  SC__GLOROT_BODY(SC__PUTF);
#undef SC__PUTF
  return SC_OK;
}
sc_status sc_params_init_f64(const sc_chain *chain, double *p, size_t n, uint64_t seed) {
  sc_status st = sc__init_check(__func__, chain, p, n);
  if (st) return st;
#define SC__PUTD(k, v) p[(k)] = (v)
  SC__GLOROT_BODY(SC__PUTD);
#undef SC__PUTD
  return SC_OK;
}

/* ---------------------------------------------------------------- parameter files */
#define SC__PF_MAGIC "SCPARAMS"
#define SC__PF_HEAD 32

static uint64_t sc__fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *b = data;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001B3ull;
  }
  return h;
}
#define SC__FNV_INIT 0xCBF29CE484222325ull

static uint64_t sc__fingerprint(const sc_chain *c) {
  uint64_t h = SC__FNV_INIT, v[10];
  v[0] = (uint64_t)c->in_c, v[1] = (uint64_t)c->in_h, v[2] = (uint64_t)c->in_w;
  h = sc__fnv1a(h, v, 3 * sizeof v[0]);
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc_layer *s = &c->L[l].spec;
    int w = s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D;
    v[0] = (uint64_t)s->kind;
    v[1] = w ? (uint64_t)s->outputs : 0;
    v[2] = w ? (uint64_t)s->act : 0;
    v[3] = w ? (uint64_t)s->bias : 0;
    v[4] = (uint64_t)s->kh, v[5] = (uint64_t)s->kw, v[6] = (uint64_t)s->sh;
    v[7] = (uint64_t)s->sw, v[8] = (uint64_t)s->ph, v[9] = (uint64_t)s->pw;
    h = sc__fnv1a(h, v, sizeof v);
  }
  return h;
}

static void sc__put_le(unsigned char *b, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t sc__get_le(const unsigned char *b, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)b[i] << (8 * i);
  return v;
}

/* ---------------------------------------------------------------- atomic file writes */
/* Files are written under a temporary name no other writer uses, in the directory of the
 * target ("<path>.tmp-<pid>-<counter>-<clock>", created exclusively), flushed to the disk
 * (fsync, where the system has it) and renamed over the target; the directory is then
 * synced so the rename itself survives a power cut. On every error path the temporary file
 * is removed. Where POSIX I/O exists no heap memory is used (the caller gives the name
 * buffer), so a trainer may checkpoint without allocating. */
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

static sc_status sc__io_fail(const char *fn, int e, const char *what, const char *path) {
  if (e == ENOMEM) return sc__fail(SC_ERR_NOMEM, fn, "%s '%s': out of memory", what, path);
  return sc__fail(SC_ERR_IO, fn, "%s '%s': %s", what, path,
                  e > 0 ? strerror(e) : "write error (disk full?)");
}

static sc_status sc__wopen(sc__wfile *w, const char *path, char *tmp, const char *fn) {
  static unsigned long counter; /* a race only costs a retry: creation is exclusive */
  size_t plen = strlen(path);
  int e = 0;
  w->tmp = tmp;
  w->err = 0;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned long k = counter++;
#if SC__POSIX_IO
    unsigned long id = (unsigned long)getpid();
#else
    unsigned long id = (unsigned long)(uintptr_t)&k;
#endif
    snprintf(tmp, plen + SC__TMP_EXTRA, "%s.tmp-%lx-%lx-%lx", path, id, k, (unsigned long)clock());
    errno = 0;
#if SC__POSIX_IO
    w->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0666);
    if (w->fd >= 0) return SC_OK;
#else
    w->f = fopen(tmp, "wbx");
    if (w->f) return SC_OK;
#endif
    e = errno;
    if (e != EEXIST) break;
  }
  if (e == ENOMEM)
    return sc__fail(SC_ERR_NOMEM, fn, "cannot create a file beside '%s': out of memory", path);
  return sc__fail(SC_ERR_IO, fn, "cannot create a temporary file beside '%s': %s", path,
                  e ? strerror(e) : "no unused name");
}

static void sc__wwrite(sc__wfile *w, const void *data, size_t n) {
  const unsigned char *b = data;
  while (n > 0 && !w->err) {
#if SC__POSIX_IO
    ssize_t r = write(w->fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      w->err = r < 0 && errno ? errno : -1;
      break;
    }
    b += r, n -= (size_t)r;
#else
    size_t r = fwrite(b, 1, n, w->f);
    if (r < n) w->err = errno ? errno : -1;
    n = 0;
#endif
  }
}

/* Ends the write: sync, close, rename over path, sync the directory; or, after an error
 * (w->err or fail), removes the temporary file. Returns the status with a message. */
static sc_status sc__wcommit(sc__wfile *w, const char *path, const char *fn) {
  int e = w->err;
#if SC__POSIX_IO
  if (!e && fsync(w->fd) != 0) e = errno;
  if (close(w->fd) != 0 && !e) e = errno;
#else
  if (!e && fflush(w->f) != 0) e = errno ? errno : -1;
  if (fclose(w->f) != 0 && !e) e = errno ? errno : -1;
#endif
  if (!e && rename(w->tmp, path) != 0) e = errno ? errno : -1;
  if (e) {
    remove(w->tmp);
    return sc__io_fail(fn, e, "cannot write", path);
  }
#if SC__POSIX_IO
  /* the directory entry: sync the directory holding path (best effort: some file systems
   * refuse fsync on a directory, and the data itself is already on the disk) */
  const char *slash = strrchr(path, '/');
  char *dir = w->tmp;
  if (!slash)
    strcpy(dir, ".");
  else if (slash == path)
    strcpy(dir, "/");
  else {
    memcpy(dir, path, (size_t)(slash - path));
    dir[slash - path] = '\0';
  }
  int dfd = open(dir, O_RDONLY);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
#endif
  return SC_OK;
}

/* Opens path for reading; a directory or an unreadable path is SC_ERR_IO with the system's
 * reason, an allocation failure SC_ERR_NOMEM. */
static sc_status sc__ropen(FILE **f, const char *path, const char *fn) {
  errno = 0;
  *f = fopen(path, "rb");
  if (!*f) return sc__io_fail(fn, errno, "cannot open", path);
#if SC__POSIX_IO
  struct stat sb;
  if (fstat(fileno(*f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(*f);
    *f = NULL;
    return sc__io_fail(fn, EISDIR, "cannot read", path);
  }
#endif
  return SC_OK;
}

/* After a short fread: a read error (SC_ERR_IO with the system's reason) or end of file (0). */
static sc_status sc__rerr(FILE *f, const char *path, const char *fn) {
  if (!ferror(f)) return SC_OK;
  return sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
}

/* What every parameter writer (files, .npz) checks first: chain, p and n, a usable path, and
 * finite values, float (f64 = 0) or double: a file the loaders would refuse is never written.
 * verb says what did not happen ("saved", "exported"). */
static sc_status sc__write_check(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                 size_t n, const char *path, const char *verb) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  size_t plen = strlen(path);
  if (plen == 0) return sc__fail(SC_ERR_ARG, fn, "path is empty");
  if (plen > SIZE_MAX - SC__TMP_EXTRA) return sc__fail(SC_ERR_OVERFLOW, fn, "path too long");
  for (size_t k = 0; k < n; k++) {
    double v = f64 ? ((const double *)pv)[k] : (double)((const float *)pv)[k];
    if (!isfinite(v))
      return sc__fail(SC_ERR_NONFINITE, fn, "parameter p[%zu] is %s: not %s to '%s'", k,
                      isnan(v) ? "NaN" : "Inf", verb, path);
  }
  return SC_OK;
}

/* element type 1 (float32) from float p, or 2 (float64) from double p */
static sc_status sc__params_save(const char *fn, const sc_chain *chain, const void *pv, int f64,
                                 size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, pv, f64, n, path, "saved");
  if (st) return st;
  const float *p32 = pv;
  const double *p64 = pv;
  size_t es = f64 ? 8 : 4, plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    return st;
  }
  unsigned char head[SC__PF_HEAD], buf[4096];
  memcpy(head, SC__PF_MAGIC, 8);
  sc__put_le(head + 8, 1, 4);
  sc__put_le(head + 12, f64 ? 2 : 1, 4);
  sc__put_le(head + 16, (uint64_t)n, 8);
  sc__put_le(head + 24, sc__fingerprint(chain), 8);
  sc__wwrite(&w, head, sizeof head);
  uint64_t sum = SC__FNV_INIT;
  for (size_t k = 0; !w.err && k < n;) {
    size_t m = 0;
    for (; k < n && m + es <= sizeof buf; k++, m += es)
      sc__put_le(buf + m, f64 ? sc__dbits(p64[k]) : sc__fbits(p32[k]), (int)es);
    sum = sc__fnv1a(sum, buf, m);
    sc__wwrite(&w, buf, m);
  }
  sc__put_le(head, sum, 8);
  sc__wwrite(&w, head, 8);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  return st;
}

/* either element type into float p (f64 = 0; a double beyond float range is
 * SC_ERR_NONFINITE) or double p (f64 = 1) */
static sc_status sc__params_load(const char *fn, const sc_chain *chain, void *pv, int f64, size_t n,
                                 const char *path) {
  sc_status st = sc__init_check(fn, chain, pv, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  FILE *f;
  if ((st = sc__ropen(&f, path, fn))) return st;
  unsigned char head[SC__PF_HEAD], buf[4096];
  errno = 0;
  size_t got = fread(head, 1, sizeof head, f);
  if (got < sizeof head && (st = sc__rerr(f, path, fn))) {
    fclose(f);
    return st;
  }
  if (got < 8 || memcmp(head, SC__PF_MAGIC, 8) != 0) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': not a simplechain parameter file (bad magic at offset 0)", path);
  }
  if (got < sizeof head) {
    fclose(f);
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)",
                    path, got, SC__PF_HEAD);
  }
  uint64_t ver = sc__get_le(head + 8, 4), type = sc__get_le(head + 12, 4);
  uint64_t cnt = sc__get_le(head + 16, 8), fp = sc__get_le(head + 24, 8);
  if (ver != 1)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported format version %llu at offset 8", path,
                  (unsigned long long)ver);
  else if (type != 1 && type != 2)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': unsupported element type %llu at offset 12 (1 = float32, 2 = float64)",
                  path, (unsigned long long)type);
  else if (cnt != (uint64_t)n)
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)cnt, n);
  else if (fp != sc__fingerprint(chain))
    st = sc__fail(SC_ERR_SHAPE, fn,
                  "'%s': saved for a chain of a different shape (fingerprint at offset 24)", path);
  if (st) {
    fclose(f);
    return st;
  }
  /* read into a scratch copy first: p is written only when everything checks out */
  size_t es = type == 2 ? 8 : 4;
  double *tmp = malloc(n * sizeof *tmp);
  if (!tmp) {
    fclose(f);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  uint64_t sum = SC__FNV_INIT;
  size_t k = 0;
  while (k < n) {
    size_t want = (n - k) * es < sizeof buf ? (n - k) * es : sizeof buf;
    errno = 0;
    got = fread(buf, 1, want, f);
    sum = sc__fnv1a(sum, buf, got);
    for (size_t m = 0; m + es <= got; m += es, k++)
      tmp[k] = es == 8 ? sc__dof(sc__get_le(buf + m, 8))
                       : (double)sc__fof((uint32_t)sc__get_le(buf + m, 4));
    if (got < want) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': truncated: file ends at offset %zu, expected %zu bytes of values",
                      path, SC__PF_HEAD + k * es + got % es, SC__PF_HEAD + n * es);
      break;
    }
  }
  if (!st) {
    errno = 0;
    got = fread(head, 1, 8, f);
    if (got < 8) {
      if (!(st = sc__rerr(f, path, fn)))
        st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path,
                      SC__PF_HEAD + n * es + got);
    } else if (sc__get_le(head, 8) != sum)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)",
                    path, SC__PF_HEAD + n * es);
    else if (fgetc(f) != EOF)
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unexpected bytes after offset %zu", path,
                    SC__PF_HEAD + n * es + 8);
  }
  if (!st)
    for (k = 0; k < n; k++) {
      double v = f64 ? tmp[k] : (double)(float)tmp[k];
      if (!isfinite(v)) {
        st = sc__fail(SC_ERR_NONFINITE, fn, "'%s': parameter %zu (offset %zu) is %s%s", path, k,
                      SC__PF_HEAD + k * es, isnan(v) ? "NaN" : "Inf",
                      isfinite(tmp[k]) ? " as a float (beyond float range)" : "");
        break;
      }
    }
  if (!st)
    for (k = 0; k < n; k++) {
      if (f64)
        ((double *)pv)[k] = tmp[k];
      else
        ((float *)pv)[k] = (float)tmp[k];
    }
  free(tmp);
  fclose(f);
  return st;
}

sc_status sc_params_save(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 0, n, path);
}
sc_status sc_params_save_f64(const sc_chain *chain, const double *p, size_t n, const char *path) {
  return sc__params_save(__func__, chain, p, 1, n, path);
}
sc_status sc_params_load(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 0, n, path);
}
sc_status sc_params_load_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__params_load(__func__, chain, p, 1, n, path);
}

/* ---------------------------------------------------------------- NumPy .npz files */
/* An .npz file is a zip archive of .npy files, one per array. The arrays are the
 * parameter blocks, named as the state_dict of the matching torch.nn.Sequential (see the
 * header). Written "stored" (no compression, so zlib is not needed); read stored or
 * deflated (np.savez_compressed; deflate needs zlib). Zip64 end records (archives over
 * 4 GiB or 65535 arrays) are refused; zip64 size fields of single entries are read. */

typedef struct sc__npz_arr {
  char name[48]; /* "3.weight" */
  size_t poff, count;
  int ndim;
  size_t shape[4];
  uint32_t crc;    /* export: of the .npy bytes */
  uint64_t offset; /* export: of its local header */
  size_t hlen;     /* export: .npy header bytes (magic included) */
  int seen;        /* import */
} sc__npz_arr;

/* The arrays of a chain in parameter order, and the Sequential indices they carry: a dense
 * or conv layer is module i (Linear / Conv2d) followed, unless its activation is the
 * identity, by the activation's module i+1; maxpool2d, flatten and dropout are one module
 * each. *out is malloc'ed. */
static sc_status sc__npz_plan(const char *fn, const sc_chain *c, sc__npz_arr **out, size_t *na) {
  sc__npz_arr *a = calloc(2 * c->nlayers + 1, sizeof *a);
  if (!a) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  size_t k = 0, idx = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    const sc__lplan *P = &c->L[l];
    const sc_layer *s = &P->spec;
    if (s->kind == SC_LAYER_DENSE || s->kind == SC_LAYER_CONV2D) {
      size_t nw = P->np - (s->bias ? s->outputs : 0);
      sc__npz_arr *w = &a[k++];
      snprintf(w->name, sizeof w->name, "%zu.weight", idx);
      w->poff = P->poff, w->count = nw;
      w->shape[0] = s->outputs;
      if (s->kind == SC_LAYER_DENSE) {
        w->ndim = 2, w->shape[1] = P->in;
      } else {
        w->ndim = 4, w->shape[1] = P->ic, w->shape[2] = s->kh, w->shape[3] = s->kw;
      }
      if (s->bias) {
        sc__npz_arr *b = &a[k++];
        snprintf(b->name, sizeof b->name, "%zu.bias", idx);
        b->poff = P->poff + nw, b->count = s->outputs, b->ndim = 1, b->shape[0] = s->outputs;
      }
      idx += s->act != SC_IDENTITY ? 2 : 1;
    } else {
      idx++;
    }
  }
  *out = a, *na = k;
  return SC_OK;
}

/* CRC-32 of zip (reflected polynomial 0xEDB88320), bit by bit: a few ms per MB, and no
 * table to initialise */
static uint32_t sc__crc32(uint32_t crc, const unsigned char *b, size_t n) {
  crc = ~crc;
  for (size_t i = 0; i < n; i++) {
    crc ^= b[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/* the .npy header of an array: magic, version 1.0, length, the dict padded with spaces to
 * a multiple of 64 bytes in all, ending in a newline (as numpy writes it) */
static size_t sc__npy_header(unsigned char *h, size_t cap, const sc__npz_arr *a, int f64) {
  char dict[256], shape[128];
  int m = 0;
  shape[0] = 0;
  for (int d = 0; d < a->ndim; d++)
    m += snprintf(shape + m, sizeof shape - (size_t)m, "%s%zu", d ? ", " : "", a->shape[d]);
  snprintf(dict, sizeof dict, "{'descr': '<f%d', 'fortran_order': False, 'shape': (%s%s), }",
           f64 ? 8 : 4, shape, a->ndim == 1 ? "," : "");
  size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
  if (total > cap) return 0;
  memcpy(h, "\x93NUMPY\x01\x00", 8);
  sc__put_le(h + 8, total - 10, 2);
  memcpy(h + 10, dict, dl);
  memset(h + 10 + dl, ' ', total - 10 - dl - 1);
  h[total - 1] = '\n';
  return total;
}

/* the values p[poff .. poff+count) as little-endian bytes, chunk by chunk: crc (w NULL) or
 * write */
static uint32_t sc__npz_values(const void *p, int f64, const sc__npz_arr *a, uint32_t crc,
                               sc__wfile *w) {
  unsigned char buf[4096];
  size_t es = f64 ? 8 : 4;
  for (size_t k = 0; k < a->count;) {
    size_t m = 0;
    for (; k < a->count && m + es <= sizeof buf; k++, m += es) {
      if (f64)
        sc__put_le(buf + m, sc__dbits(((const double *)p)[a->poff + k]), 8);
      else
        sc__put_le(buf + m, sc__fbits(((const float *)p)[a->poff + k]), 4);
    }
    if (w)
      sc__wwrite(w, buf, m);
    else
      crc = sc__crc32(crc, buf, m);
  }
  return crc;
}

#define SC__ZIP_LOCAL 0x04034b50u
#define SC__ZIP_CENTRAL 0x02014b50u
#define SC__ZIP_END 0x06054b50u
#define SC__ZIP_DATE 0x21 /* 1980-01-01, 00:00: the file depends on the values alone */

static sc_status sc__npz_export(const char *fn, const sc_chain *chain, const void *p, int f64,
                                size_t n, const char *path) {
  sc_status st = sc__write_check(fn, chain, p, f64, n, path, "exported");
  if (st) return st;
  size_t plen = strlen(path);
  sc__npz_arr *a;
  size_t na;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  if (na > 0xFFFF) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%zu arrays: more than a zip without zip64 holds", na);
  }
  /* offsets and CRCs first: the local headers carry them */
  unsigned char h[512];
  uint64_t off = 0;
  for (size_t i = 0; i < na; i++) {
    a[i].hlen = sc__npy_header(h, sizeof h, &a[i], f64);
    a[i].crc = sc__npz_values(p, f64, &a[i], sc__crc32(0, h, a[i].hlen), NULL);
    a[i].offset = off;
    off += 30 + strlen(a[i].name) + 4 + a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
  }
  if (off > 0xFFFFFFFFu - 65536u * (na + 1)) {
    free(a);
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "%zu parameters: over the 4 GiB a zip without zip64 holds", n);
  }
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) {
    free(a);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  }
  sc__wfile w;
  if ((st = sc__wopen(&w, path, tmp, fn))) {
    free(tmp);
    free(a);
    return st;
  }
  unsigned char z[64];
  uint64_t cd_size = 0;
  for (int pass = 0; pass < 2; pass++) /* 0: entries, 1: central directory */
    for (size_t i = 0; i < na; i++) {
      size_t nl = strlen(a[i].name) + 4;
      uint64_t size = a[i].hlen + (uint64_t)a[i].count * (f64 ? 8 : 4);
      unsigned char *q = z;
      sc__put_le(q, pass ? SC__ZIP_CENTRAL : SC__ZIP_LOCAL, 4), q += 4;
      if (pass) sc__put_le(q, 20, 2), q += 2; /* made by: version 2.0 */
      sc__put_le(q, 20, 2), q += 2;           /* needed: 2.0 */
      sc__put_le(q, 0, 2), q += 2;            /* flags */
      sc__put_le(q, 0, 2), q += 2;            /* stored */
      sc__put_le(q, 0, 2), q += 2;            /* time */
      sc__put_le(q, SC__ZIP_DATE, 2), q += 2;
      sc__put_le(q, a[i].crc, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, size, 4), q += 4;
      sc__put_le(q, nl, 2), q += 2;
      sc__put_le(q, 0, 2), q += 2; /* extra */
      if (pass) {
        memset(q, 0, 10), q += 10; /* comment, disk, internal and external attributes */
        sc__put_le(q, a[i].offset, 4), q += 4;
        cd_size += (uint64_t)(q - z) + nl;
      }
      sc__wwrite(&w, z, (size_t)(q - z));
      sc__wwrite(&w, a[i].name, nl - 4);
      sc__wwrite(&w, ".npy", 4);
      if (!pass) {
        sc__npy_header(h, sizeof h, &a[i], f64);
        sc__wwrite(&w, h, a[i].hlen);
        sc__npz_values(p, f64, &a[i], 0, &w);
      }
    }
  sc__put_le(z, SC__ZIP_END, 4);
  sc__put_le(z + 4, 0, 4); /* disk numbers */
  sc__put_le(z + 8, na, 2);
  sc__put_le(z + 10, na, 2);
  sc__put_le(z + 12, cd_size, 4);
  sc__put_le(z + 16, off, 4);
  sc__put_le(z + 20, 0, 2);
  sc__wwrite(&w, z, 22);
  st = sc__wcommit(&w, path, fn);
  free(tmp);
  free(a);
  return st;
}

/* --- reading */

/* reads len bytes at offset off; a short read is SC_ERR_FORMAT naming what was read */
static sc_status sc__npz_pread(const char *fn, FILE *f, const char *path, uint64_t off,
                               unsigned char *buf, size_t len, const char *what) {
  if (off > (uint64_t)LONG_MAX || fseek(f, (long)off, SEEK_SET) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': %s at offset %llu lies outside the file", path, what,
                    (unsigned long long)off);
  errno = 0;
  size_t got = fread(buf, 1, len, f);
  if (got < len) {
    sc_status st = sc__rerr(f, path, fn);
    if (st) return st;
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': truncated: %s at offset %llu (file ends %zu bytes in)", path, what,
                    (unsigned long long)off, got);
  }
  return SC_OK;
}

/* The dict of an .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (8, 3), }
 * in any key order. Fills descr, fortran and the shape; 0 or a message in err. */
static int sc__npy_dict(const char *s, size_t len, char *descr, size_t dcap, int *fortran,
                        size_t *shape, int *ndim, char *err, size_t ecap) {
  size_t i = 0;
  int have = 0;
#define SC__WS()                                                                                   \
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++
#define SC__BAD(...)                                                                               \
  do {                                                                                             \
    snprintf(err, ecap, __VA_ARGS__);                                                              \
    return -1;                                                                                     \
  } while (0)
  SC__WS();
  if (i >= len || s[i] != '{') SC__BAD("header does not start with '{'");
  i++;
  for (;;) {
    SC__WS();
    if (i < len && s[i] == '}') break;
    if (i >= len || (s[i] != '\'' && s[i] != '"'))
      SC__BAD("expected a quoted key at header byte %zu", i);
    char q = s[i++], key[16];
    size_t k0 = i;
    while (i < len && s[i] != q) i++;
    if (i >= len || i - k0 >= sizeof key) SC__BAD("bad key at header byte %zu", k0);
    memcpy(key, s + k0, i - k0);
    key[i - k0] = 0;
    i++;
    SC__WS();
    if (i >= len || s[i] != ':') SC__BAD("expected ':' after '%s'", key);
    i++;
    SC__WS();
    if (!strcmp(key, "descr")) {
      if (i >= len || (s[i] != '\'' && s[i] != '"')) SC__BAD("'descr' is not a string");
      char dq = s[i++];
      size_t d0 = i;
      while (i < len && s[i] != dq) i++;
      if (i >= len || i - d0 >= dcap) SC__BAD("bad 'descr'");
      memcpy(descr, s + d0, i - d0);
      descr[i - d0] = 0;
      i++;
      have |= 1;
    } else if (!strcmp(key, "fortran_order")) {
      if (len - i >= 4 && !memcmp(s + i, "True", 4))
        *fortran = 1, i += 4;
      else if (len - i >= 5 && !memcmp(s + i, "False", 5))
        *fortran = 0, i += 5;
      else
        SC__BAD("'fortran_order' is neither True nor False");
      have |= 2;
    } else if (!strcmp(key, "shape")) {
      if (i >= len || s[i] != '(') SC__BAD("'shape' is not a tuple");
      i++;
      *ndim = 0;
      for (;;) {
        SC__WS();
        if (i < len && s[i] == ')') break;
        if (i >= len || s[i] < '0' || s[i] > '9') SC__BAD("bad 'shape' at header byte %zu", i);
        uint64_t v = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
          if (v > (UINT64_MAX - 9) / 10) SC__BAD("a dimension of 'shape' overflows");
          v = v * 10 + (uint64_t)(s[i++] - '0');
        }
        if (*ndim >= 8) SC__BAD("'shape' has more than 8 dimensions");
        if (v > SIZE_MAX) SC__BAD("a dimension of 'shape' overflows");
        shape[(*ndim)++] = (size_t)v;
        SC__WS();
        if (i < len && s[i] == ',') {
          i++;
          continue;
        }
        if (i < len && s[i] == ')') break;
        SC__BAD("bad 'shape' at header byte %zu", i);
      }
      i++;
      have |= 4;
    } else {
      SC__BAD("unknown key '%s'", key);
    }
    SC__WS();
    if (i < len && s[i] == ',') {
      i++;
      continue;
    }
    if (i < len && s[i] == '}') break;
    SC__BAD("expected ',' or '}' at header byte %zu", i);
  }
  i++;
  SC__WS();
  if (i != len) SC__BAD("bytes after the header's '}'");
  if (have != 7)
    SC__BAD("header lacks '%s'", !(have & 1) ? "descr" : !(have & 2) ? "fortran_order" : "shape");
  return 0;
#undef SC__WS
#undef SC__BAD
}

static void sc__shape_str(char *b, size_t cap, const size_t *shape, int ndim) {
  int m = snprintf(b, cap, "(");
  for (int d = 0; d < ndim && m > 0 && (size_t)m < cap; d++)
    m += snprintf(b + m, cap - (size_t)m, "%s%zu", d ? ", " : "", shape[d]);
  if (m > 0 && (size_t)m < cap) snprintf(b + m, cap - (size_t)m, "%s)", ndim == 1 ? "," : "");
}

/* one .npy (bytes u[0..len)) into dst (float or double) at the array's place */
static sc_status sc__npy_read(const char *fn, const char *path, const sc__npz_arr *a,
                              const unsigned char *u, size_t len, void *dst, int f64) {
  if (len < 10 || memcmp(u, "\x93NUMPY", 6) != 0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is not an .npy (bad magic)", path,
                    a->name);
  unsigned major = u[6];
  if (major < 1 || major > 3)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': unsupported .npy version %u.%u", path,
                    a->name, major, u[7]);
  size_t hl = major == 1 ? (size_t)sc__get_le(u + 8, 2)
                         : (len >= 12 ? (size_t)sc__get_le(u + 8, 4) : SIZE_MAX);
  size_t h0 = major == 1 ? 10 : 12;
  if (hl > len - h0 || len < h0)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': truncated .npy header", path, a->name);
  char descr[16], msg[160];
  int fortran = 0, ndim = 0;
  size_t shape[8];
  if (sc__npy_dict((const char *)u + h0, hl, descr, sizeof descr, &fortran, shape, &ndim, msg,
                   sizeof msg))
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': .npy header: %s", path, a->name, msg);
  int big = 0, es = 0;
  if ((descr[0] == '<' || descr[0] == '>' || descr[0] == '=') && descr[1] == 'f' &&
      (descr[2] == '4' || descr[2] == '8') && !descr[3]) {
    big = descr[0] == '>';
    es = descr[2] - '0';
  }
  if (!es)
    return sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' has dtype '%s'; float32 ('<f4') or float64 ('<f8') needed",
                    path, a->name, descr);
  char got[128], want[128];
  sc__shape_str(got, sizeof got, shape, ndim);
  sc__shape_str(want, sizeof want, a->shape, a->ndim);
  if (strcmp(got, want) != 0)
    return sc__fail(SC_ERR_SHAPE, fn, "'%s': array '%s' has shape %s, the chain needs %s", path,
                    a->name, got, want);
  if (fortran) {
    int wide = 0;
    for (int d = 0; d < ndim; d++) wide += shape[d] > 1;
    if (wide > 1)
      return sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': array '%s' is in Fortran order; save C-ordered arrays "
                      "(np.ascontiguousarray)",
                      path, a->name);
  }
  const unsigned char *v = u + h0 + hl;
  size_t nb = len - h0 - hl;
  if (nb != a->count * (size_t)es)
    return sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' holds %zu bytes of values, %zu expected",
                    path, a->name, nb, a->count * (size_t)es);
  for (size_t k = 0; k < a->count; k++, v += es) {
    unsigned char b[8] = {0};
    for (int j = 0; j < es; j++) b[j] = big ? v[es - 1 - j] : v[j];
    double x = es == 8 ? sc__dof(sc__get_le(b, 8)) : (double)sc__fof((uint32_t)sc__get_le(b, 4));
    if (f64)
      ((double *)dst)[a->poff + k] = x;
    else
      ((float *)dst)[a->poff + k] = (float)x;
    double y = f64 ? x : (double)(float)x;
    if (!isfinite(y))
      return sc__fail(SC_ERR_NONFINITE, fn, "'%s': array '%s' element %zu is %s%s", path, a->name,
                      k, isnan(y) ? "NaN" : "Inf", isfinite(x) ? " (beyond float range)" : "");
  }
  return SC_OK;
}

/* the uncompressed bytes of one entry into out (exactly usize bytes) */
static sc_status sc__npz_inflate(const char *fn, const char *path, const char *name,
                                 unsigned char *in, size_t csize, unsigned char *out,
                                 size_t usize) {
#ifdef SC_HAVE_ZLIB
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK)
    return sc__fail(SC_ERR_NOMEM, fn, "zlib's inflateInit2 failed (out of memory)");
  sc_status st = SC_OK;
  size_t done_in = 0, done_out = 0;
  int r = Z_OK, longer = 0;
  unsigned char spill; /* one byte past the stated size: a longer stream (a bomb) shows */
  for (;;) {
    /* zlib counts in uInt: at most 1 GiB at a time */
    size_t ci = csize - done_in, co = usize - done_out;
    zs.next_in = in + done_in;
    zs.avail_in = (uInt)(ci > (1u << 30) ? (1u << 30) : ci);
    zs.next_out = co ? out + done_out : &spill;
    zs.avail_out = co ? (uInt)(co > (1u << 30) ? (1u << 30) : co) : 1;
    uInt ai = zs.avail_in, ao = zs.avail_out;
    r = inflate(&zs, Z_NO_FLUSH);
    done_in += ai - zs.avail_in;
    if (co) {
      done_out += ao - zs.avail_out;
    } else if (zs.avail_out == 0) {
      longer = 1;
      break;
    }
    if (r == Z_STREAM_END || (r != Z_OK && r != Z_BUF_ERROR)) break;
    if (ai == zs.avail_in && ao == zs.avail_out) break; /* no progress: input ends early */
  }
  if (r == Z_MEM_ERROR)
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory in zlib");
  else if (longer)
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': array '%s': the deflated data is longer than its stated %zu bytes "
                  "(a zip bomb?)",
                  path, name, usize);
  else if (r != Z_STREAM_END)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is damaged or truncated",
                  path, name);
  else if (done_out != usize)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': the deflated data is %zu bytes, %zu stated",
                  path, name, done_out, usize);
  inflateEnd(&zs);
  return st;
#else
  (void)in, (void)csize, (void)out, (void)usize;
  return sc__fail(SC_ERR_UNSUPPORTED, fn,
                  "'%s': array '%s' is compressed (np.savez_compressed); reading it needs zlib: "
                  "compile with -DSC_HAVE_ZLIB and link -lz, or save with np.savez",
                  path, name);
#endif
}

static sc_status sc__npz_import(const char *fn, const sc_chain *chain, void *p, int f64, size_t n,
                                const char *path) {
  sc_status st = sc__init_check(fn, chain, p, n);
  if (st) return st;
  if (!path) return sc__fail(SC_ERR_NULL, fn, "argument 'path' is NULL");
  sc__npz_arr *a = NULL;
  size_t na = 0;
  if ((st = sc__npz_plan(fn, chain, &a, &na))) return st;
  FILE *f = NULL;
  unsigned char *tail = NULL, *cd = NULL, *cbuf = NULL, *ubuf = NULL;
  void *tmp = NULL;
  if ((st = sc__ropen(&f, path, fn))) goto done;
  if (fseek(f, 0, SEEK_END) != 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  long fsl = ftell(f);
  if (fsl < 0) {
    st = sc__io_fail(fn, errno ? errno : EIO, "cannot seek in", path);
    goto done;
  }
  uint64_t fsize = (uint64_t)fsl;
  if (fsize < 22) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not an .npz (zip) file: %llu bytes", path,
                  (unsigned long long)fsize);
    goto done;
  }
  /* the end record: the last "PK\5\6" whose comment ends the file */
  size_t tl = fsize < 22 + 65535 ? (size_t)fsize : 22 + 65535;
  tail = malloc(tl);
  tmp = malloc(n * (f64 ? sizeof(double) : sizeof(float)) + 1);
  if (!tail || !tmp) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, fsize - tl, tail, tl, "the end of the file"))) goto done;
  size_t e = tl - 22 + 1;
  while (e-- > 0)
    if (sc__get_le(tail + e, 4) == SC__ZIP_END && e + 22 + sc__get_le(tail + e + 20, 2) == tl)
      break;
  if (e == (size_t)-1) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': not an .npz (zip) file: no end-of-central-directory record", path);
    goto done;
  }
  uint64_t eoff = fsize - tl + e;
  uint64_t nent = sc__get_le(tail + e + 10, 2), cds = sc__get_le(tail + e + 12, 4);
  uint64_t cdo = sc__get_le(tail + e + 16, 4);
  if (sc__get_le(tail + e + 4, 4) != 0 || sc__get_le(tail + e + 8, 2) != nent) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip split over several disks", path);
    goto done;
  }
  if (nent == 0xFFFF || cds == 0xFFFFFFFFu || cdo == 0xFFFFFFFFu) {
    st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': a zip64 archive (over 4 GiB or 65535 entries)",
                  path);
    goto done;
  }
  if (cdo > eoff || cds > eoff - cdo) {
    st = sc__fail(SC_ERR_FORMAT, fn,
                  "'%s': the central directory (offset %llu, %llu bytes) lies outside the file",
                  path, (unsigned long long)cdo, (unsigned long long)cds);
    goto done;
  }
  cd = malloc((size_t)cds + 1);
  if (!cd) {
    st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
    goto done;
  }
  if ((st = sc__npz_pread(fn, f, path, cdo, cd, (size_t)cds, "the central directory"))) goto done;
  size_t at = 0;
  for (uint64_t ent = 0; ent < nent; ent++) {
    if (cds - at < 46 || sc__get_le(cd + at, 4) != SC__ZIP_CENTRAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': bad central directory entry %llu at offset %llu",
                    path, (unsigned long long)ent, (unsigned long long)(cdo + at));
      goto done;
    }
    const unsigned char *c = cd + at;
    unsigned flags = (unsigned)sc__get_le(c + 8, 2), method = (unsigned)sc__get_le(c + 10, 2);
    uint32_t crc = (uint32_t)sc__get_le(c + 16, 4);
    uint64_t csize = sc__get_le(c + 20, 4), usize = sc__get_le(c + 24, 4);
    size_t nl = (size_t)sc__get_le(c + 28, 2), xl = (size_t)sc__get_le(c + 30, 2);
    size_t cl = (size_t)sc__get_le(c + 32, 2);
    uint64_t loff = sc__get_le(c + 42, 4);
    if (cds - at - 46 < (uint64_t)nl + xl + cl) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': central directory entry %llu is truncated", path,
                    (unsigned long long)ent);
      goto done;
    }
    char name[64];
    const char *nm = (const char *)c + 46;
    int named = nl > 4 && nl - 4 < sizeof name && !memcmp(nm + nl - 4, ".npy", 4);
    if (named) {
      memcpy(name, nm, nl - 4);
      name[nl - 4] = 0;
      named = strlen(name) == nl - 4;
    }
    if (!named) {
      char shown[40];
      size_t sl = nl < sizeof shown - 1 ? nl : sizeof shown - 1;
      for (size_t i = 0; i < sl; i++) shown[i] = nm[i] >= 32 && nm[i] < 127 ? nm[i] : '?';
      shown[sl] = 0;
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': entry '%s%s' is not an .npy array of this chain",
                    path, shown, nl > sl ? "..." : "");
      goto done;
    }
    /* zip64 sizes of this entry */
    for (size_t x = 0; x + 4 <= xl;) {
      const unsigned char *xp = c + 46 + nl + x;
      size_t id = (size_t)sc__get_le(xp, 2), len = (size_t)sc__get_le(xp + 2, 2);
      if (len > xl - x - 4) break;
      if (id == 1) {
        const unsigned char *v = xp + 4, *vend = xp + 4 + len;
        if (usize == 0xFFFFFFFFu && vend - v >= 8) usize = sc__get_le(v, 8), v += 8;
        if (csize == 0xFFFFFFFFu && vend - v >= 8) csize = sc__get_le(v, 8), v += 8;
        if (loff == 0xFFFFFFFFu && vend - v >= 8) loff = sc__get_le(v, 8), v += 8;
      }
      x += 4 + len;
    }
    at += 46 + nl + xl + cl;
    sc__npz_arr *A = NULL;
    for (size_t i = 0; i < na && !A; i++)
      if (!strcmp(a[i].name, name)) A = &a[i];
    if (!A) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': unexpected array '%s' (this chain's arrays are %s ... %s, see the "
                    "header)",
                    path, name, na ? a[0].name : "none", na ? a[na - 1].name : "none");
      goto done;
    }
    if (A->seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' appears twice", path, name);
      goto done;
    }
    A->seen = 1;
    if (flags & 1u) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn, "'%s': array '%s' is encrypted", path, name);
      goto done;
    }
    if (method != 0 && method != 8) {
      st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "'%s': array '%s' uses zip compression method %u (stored and deflate only)",
                    path, name, method);
      goto done;
    }
    /* no more than its shape can need: 8 bytes a value and a header of at most 64 KiB */
    uint64_t cap = (uint64_t)A->count * 8 + 65536 + 12;
    if (usize > cap) {
      st = sc__fail(SC_ERR_FORMAT, fn,
                    "'%s': array '%s' claims %llu bytes, more than its shape can need (%llu)", path,
                    name, (unsigned long long)usize, (unsigned long long)cap);
      goto done;
    }
    if ((method == 0 && csize != usize) || loff > eoff || csize > eoff) {
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': inconsistent sizes or offset", path, name);
      goto done;
    }
    unsigned char lh[30];
    if ((st = sc__npz_pread(fn, f, path, loff, lh, 30, "a local header"))) goto done;
    if (sc__get_le(lh, 4) != SC__ZIP_LOCAL) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': no local header at offset %llu", path,
                    name, (unsigned long long)loff);
      goto done;
    }
    uint64_t doff = loff + 30 + sc__get_le(lh + 26, 2) + sc__get_le(lh + 28, 2);
    if (doff > eoff || csize > eoff - doff) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': its data runs past the archive", path,
                    name);
      goto done;
    }
    free(cbuf);
    free(ubuf);
    cbuf = malloc((size_t)csize + 1);
    ubuf = method == 0 ? NULL : malloc((size_t)usize + 1);
    if (!cbuf || (method != 0 && !ubuf)) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto done;
    }
    if ((st = sc__npz_pread(fn, f, path, doff, cbuf, (size_t)csize, "an array's data"))) goto done;
    const unsigned char *u = cbuf;
    if (method == 8) {
      if ((st = sc__npz_inflate(fn, path, name, cbuf, (size_t)csize, ubuf, (size_t)usize)))
        goto done;
      u = ubuf;
    }
    if (sc__crc32(0, u, (size_t)usize) != crc) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s': CRC mismatch (the file is damaged)", path,
                    name);
      goto done;
    }
    if ((st = sc__npy_read(fn, path, A, u, (size_t)usize, tmp, f64))) goto done;
  }
  for (size_t i = 0; i < na; i++)
    if (!a[i].seen) {
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': array '%s' is missing", path, a[i].name);
      goto done;
    }
  memcpy(p, tmp, n * (f64 ? sizeof(double) : sizeof(float)));
done:
  if (f) fclose(f);
  free(tail);
  free(cd);
  free(cbuf);
  free(ubuf);
  free(tmp);
  free(a);
  return st;
}

sc_status sc_params_export_npz(const sc_chain *chain, const float *p, size_t n, const char *path) {
  return sc__npz_export(__func__, chain, p, 0, n, path);
}
sc_status sc_params_export_npz_f64(const sc_chain *chain, const double *p, size_t n,
                                   const char *path) {
  return sc__npz_export(__func__, chain, p, 1, n, path);
}
sc_status sc_params_import_npz(const sc_chain *chain, float *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 0, n, path);
}
sc_status sc_params_import_npz_f64(const sc_chain *chain, double *p, size_t n, const char *path) {
  return sc__npz_import(__func__, chain, p, 1, n, path);
}

/* ---------------------------------------------------------------- variants (the planner) */
/* The dense layers' float forward comes in two variants on the SIMD kernel sets: "fused"
 * (our register-blocked GEMM with bias and activation in the same pass) and "xsmm"
 * (libxsmm's JIT GEMM, then a bias/activation pass), when make finds libxsmm-dev
 * (SC_HAVE_XSMM). Which one a layer runs is decided once, at chain creation:
 *   - by rule (default, SC_PLAN=rules): xsmm on the AVX-512 kernel set for dense layers with
 *     at least SC__XSMM_MIN_IN inputs, where it measured faster (bench/xsmm_dense.c, make
 *     bench-xsmm, Zen 5: faster by 3-7 % from 84 inputs up, slower by 2-34 % at 32 inputs and
 *     below); fused everywhere else;
 *   - by measurement (SC_PLAN=measure): both variants time a forward of one slice-sized
 *     batch on this machine, the faster wins. With SC_WISDOM=path the answers are kept in a
 *     text file keyed by CPU model, kernel set and layer shape, read back on the next
 *     creation instead of timing again (a file that is not a wisdom file is ignored, left
 *     alone, and said so in sc_chain_plan);
 *   - by force (SC_DENSE_FWD=fused|xsmm), for tests and experiments.
 * The float tanh of a dense layer on the vector kernel sets has four variants: "div"
 * (tanh's final quotient E / (E + 2) as a divide) and "rcp" (a reciprocal estimate r, on
 * AVX2 refined by one Newton step, then y0 = E r, y = y0 + r (E - (E + 2) y0): no divide
 * instruction, a longer dependency chain; at most 1.5 ULP like div, test_math), and the
 * rational form (v_tanh_rat: 12 operations instead of 28, at most 6 ULP) with either
 * quotient, "rat" and "ratrcp". The rational ones are less accurate than SLEEF's tanhf u35,
 * so they are opt-in: SC_TANH_VARIANT=fast lets the planner choose among all four, otherwise
 * it chooses between div and rcp. Chosen the same three ways: by rule (div; rat with fast:
 * see SC__TANH_RULE), by measurement (SC_PLAN=measure, the same one-layer timing, kept in the
 * wisdom file with the four timings, 0 for those not timed), or by force (SC_TANH_VARIANT=
 * div|rcp|rat|ratrcp). The scalar kernels and conv layers have the divide form only.
 * Conv layers on the vector float kernel sets have SC__CONV_NV register-block shapes for the
 * forward and for dW (the kernel table names them; all give the same bits): by rule the first
 * of each (measured best on LeNet5), by SC_PLAN=measure the fastest forward (sc_forward on a
 * one-layer twin), then the fastest dW with it (sc_valgrad), kept as "conv" wisdom entries;
 * forced by SC_CONV_FWD / SC_CONV_DW (the other keeps the rule's). With libxsmm the forward
 * has "xsmm" too (im2col rows + sc__xsmm_conv_kernel's GEMM, P->xconv): measured against the
 * fastest block, forced by SC_CONV_FWD=xsmm, never by rule (bench/xsmm_conv.c and the LeNet5
 * profile on the AVX2 host: slower on conv1, within noise to slower on conv2).
 * Dense layers with lane accumulators for dW (dwl_off) have the dot form as a variant
 * (P->dw_dot: transpose + SC__K_DW, as the larger layers): rule lane, SC_PLAN=measure times
 * sc_valgrad of a one-layer twin with each ("dense_dw" wisdom entries), SC_DENSE_DW forces;
 * every kernel set, float and double, runs both.
 * The choice belongs to the chain, so results never depend on the thread count; the
 * variants may differ from each other in the last bits. SC_XSMM=0 keeps libxsmm out. */
#define SC__XSMM_MIN_IN 64
enum { SC__HOW_ONLY = 0, SC__HOW_RULE, SC__HOW_MEASURED, SC__HOW_WISDOM, SC__HOW_FORCED };
static SC__TLS int sc__planning; /* set while timing candidates: their chains plan nothing */

#if defined(SC_HAVE_XSMM) && defined(SC_HAVE_KERNELS)
#include <libxsmm.h>
#define SC__XSMM 1
/* libxsmm's GEMM for layer P, or NULL (no JIT for it) */
static sc__xsmm_fn sc__xsmm_kernel(const sc__lplan *P) {
  /* row-major a (out x TW) = W (out x in) x (in x TW) is the column-major
   * a^T (TW x out) = x^T (TW x in) W^T (in x out): m = TW, n = out, k = in */
  libxsmm_blasint m = SC__TW, n = (libxsmm_blasint)P->out, k = (libxsmm_blasint)P->in;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &m, &alpha, &beta, &flags, NULL);
}
/* libxsmm's GEMM for one output row of conv layer P (every channel), or NULL: row-major
 * a[k][(v,t)] = sum_r W[k][r] col[r][(v,t)] is the column-major a^T ((v,t) x k) = col^T W^T:
 * m = ow TW, n = oc, k = R, lda = m, ldb = R, ldc = oh ow TW (one channel's rows) */
static sc__xsmm_fn sc__xsmm_conv_kernel(const sc__lplan *P) {
  size_t m_ = P->ow * SC__TW, ldc_ = P->oh * P->ow * SC__TW;
  if (m_ > INT_MAX || ldc_ > INT_MAX || P->oc > INT_MAX || P->R > INT_MAX) return NULL;
  libxsmm_blasint m = (libxsmm_blasint)m_, n = (libxsmm_blasint)P->oc, k = (libxsmm_blasint)P->R,
                  ldc = (libxsmm_blasint)ldc_;
  float alpha = 1, beta = 0;
  int flags = LIBXSMM_GEMM_FLAG_NONE;
  return (sc__xsmm_fn)libxsmm_smmdispatch(m, n, k, &m, &k, &ldc, &alpha, &beta, &flags, NULL);
}
#else
#define SC__XSMM 0
#endif

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
/* r = EAX, EBX, ECX, EDX of CPUID leaf, subleaf */
static inline void sc__cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
#endif

/* The CPU's brand string (x86 CPUID), spaces as '_', for wisdom keys */
static void sc__cpu_model(char *buf, size_t cap) {
  snprintf(buf, cap, "unknown");
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned r[12];
  for (unsigned i = 0; i < 3; i++) sc__cpuid(0x80000002u + i, 0, r + 4 * i);
  char s[49];
  memcpy(s, r, 48);
  s[48] = 0;
  size_t k = 0;
  const char *q = s;
  while (*q == ' ') q++;
  for (; *q && k + 1 < cap; q++) buf[k++] = (*q == ' ' || *q == '=' || *q == '\n') ? '_' : *q;
  while (k > 0 && buf[k - 1] == '_') k--;
  if (k) buf[k] = 0;
#endif
}

/* the index of the first n characters of s in names (NULL-terminated), or -1 */
static int sc__name_index(const char *const *names, const char *s, size_t n) {
  for (int i = 0; names && names[i]; i++)
    if (strlen(names[i]) == n && !strncmp(names[i], s, n)) return i;
  return -1;
}
/* the tanh variants' names, by SC__TANH_* */
static const char *const sc__tanh_names[] = {"div", "rcp", "rat", "ratrcp", NULL};

/* one wisdom entry */
enum { SC__WIS_DENSE = 0, SC__WIS_TANH, SC__WIS_CONV, SC__WIS_DW };
typedef struct sc__wis {
  int tanh; /* SC__WIS_DENSE: a dense_fwd entry (fused / xsmm), SC__WIS_TANH: a tanh entry
               (div / rcp / rat / ratrcp), SC__WIS_CONV: a conv entry (forward block : dW block),
               SC__WIS_DW: a dense_dw entry (lane / dot) */
  char cpu[64], isa[16], act[16], pick[16];
  char shape[64]; /* conv: the layer's key (sc__conv_key) */
  size_t in, out;
  int bias;
  double ns_a, ns_b;                /* fused and xsmm, or lane and dot */
  double ns_c[2 * SC__CONV_NV + 1]; /* conv: the forward blocks' times, the dW blocks', then
                                       libxsmm's forward; tanh: the variants' (0: not timed) */
} sc__wis;

/* a conv layer's wisdom key: input shape, channels, kernel, stride, padding, activation, bias */
static void sc__conv_key(char *b, size_t cap, const sc__lplan *P) {
  snprintf(b, cap, "%zux%zux%zu>%zu:k%zux%zu:s%zux%zu:p%zux%zu:%s:b%d", P->ic, P->ih, P->iw, P->oc,
           P->spec.kh, P->spec.kw, P->spec.sh, P->spec.sw, P->spec.ph, P->spec.pw,
           sc_act_name(P->spec.act), P->spec.bias);
}

#define SC__WIS_MAX 4096
/* Reads the wisdom file: entries into *w (malloc'ed), their count into *nw. A missing file is
 * no entries; anything else that is not a wisdom file leaves a note and returns -1. */
static int sc__wis_read(const char *path, sc__wis **w, size_t *nw, char *note, size_t cap) {
  *w = NULL, *nw = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    if (errno == ENOENT) return 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: %s", path, strerror(errno));
    return -1;
  }
  char line[512];
  size_t ln = 0, capw = 0;
  int bad = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    if (!strchr(line, '\n') && !feof(f)) {
      bad = 1;
      break;
    }
    if (ln == 1) {
      if (strcmp(line, "# simplechain wisdom 1\n") != 0) {
        bad = 1;
        break;
      }
      continue;
    }
    sc__wis e;
    memset(&e, 0, sizeof e);
    int used = 0, fields, want;
    e.tanh = !strncmp(line, "tanh ", 5)       ? SC__WIS_TANH
             : !strncmp(line, "conv ", 5)     ? SC__WIS_CONV
             : !strncmp(line, "dense_dw ", 9) ? SC__WIS_DW
                                              : SC__WIS_DENSE;
    want = e.tanh == SC__WIS_TANH ? 8 : e.tanh == SC__WIS_CONV ? 11 : 9; /* each kind's fields */
    char *colon = NULL;
    if (e.tanh == SC__WIS_CONV) {
      fields = sscanf(line,
                      "conv cpu=%63s isa=%15s shape=%63s pick=%15s fwd_ns=%lf,%lf,%lf "
                      "xsmm_ns=%lf dw_ns=%lf,%lf,%lf%n",
                      e.cpu, e.isa, e.shape, e.pick, &e.ns_c[0], &e.ns_c[1], &e.ns_c[2], &e.ns_c[6],
                      &e.ns_c[3], &e.ns_c[4], &e.ns_c[5], &used);
      colon = strchr(e.pick, ':');
    } else if (e.tanh == SC__WIS_DW) {
      fields = sscanf(line,
                      "dense_dw cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "lane_ns=%lf dot_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    } else if (e.tanh == SC__WIS_TANH) { /* (the rat timings are newer: optional) */
      fields = sscanf(line,
                      "tanh cpu=%63s isa=%15s in=%zu out=%zu bias=%d pick=%7s div_ns=%lf "
                      "rcp_ns=%lf%n rat_ns=%lf ratrcp_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, &e.bias, e.pick, &e.ns_c[0], &e.ns_c[1], &used,
                      &e.ns_c[2], &e.ns_c[3], &used);
      if (fields == 10) fields = 8;
    } else
      fields = sscanf(line,
                      "dense_fwd cpu=%63s isa=%15s in=%zu out=%zu act=%15s bias=%d pick=%7s "
                      "fused_ns=%lf xsmm_ns=%lf%n",
                      e.cpu, e.isa, &e.in, &e.out, e.act, &e.bias, e.pick, &e.ns_a, &e.ns_b, &used);
    if (fields != want || (line[used] != '\n' && line[used] != 0) ||
        (e.tanh == SC__WIS_CONV   ? !colon || colon == e.pick || !colon[1]
         : e.tanh == SC__WIS_TANH ? sc__name_index(sc__tanh_names, e.pick, strlen(e.pick)) < 0
         : e.tanh == SC__WIS_DW   ? strcmp(e.pick, "lane") && strcmp(e.pick, "dot")
                                  : strcmp(e.pick, "fused") && strcmp(e.pick, "xsmm")) ||
        *nw >= SC__WIS_MAX) {
      bad = 1;
      break;
    }
    if (*nw == capw) {
      size_t nc = capw ? 2 * capw : 16;
      sc__wis *nwp = realloc(*w, nc * sizeof **w);
      if (!nwp) {
        bad = 1;
        break;
      }
      *w = nwp, capw = nc;
    }
    (*w)[(*nw)++] = e;
  }
  int err = ferror(f);
  fclose(f);
  if (bad || err || ln == 0) {
    free(*w);
    *w = NULL, *nw = 0;
    snprintf(note, cap, "wisdom file '%.150s' ignored: line %zu is not a wisdom entry", path,
             ln ? ln : 1);
    return -1;
  }
  return 0;
}

static sc_status sc__wis_write(const char *fn, const char *path, const sc__wis *w, size_t nw) {
  size_t plen = strlen(path);
  char *tmp = malloc(plen + SC__TMP_EXTRA);
  if (!tmp) return sc__fail(SC_ERR_NOMEM, fn, "out of memory");
  sc__wfile wf;
  sc_status st = sc__wopen(&wf, path, tmp, fn);
  if (!st) {
    char line[512];
    int k = snprintf(line, sizeof line, "# simplechain wisdom 1\n");
    sc__wwrite(&wf, line, (size_t)k);
    for (size_t i = 0; i < nw; i++) {
      if (w[i].tanh == SC__WIS_CONV)
        k = snprintf(line, sizeof line,
                     "conv cpu=%s isa=%s shape=%s pick=%s fwd_ns=%.1f,%.1f,%.1f "
                     "xsmm_ns=%.1f dw_ns=%.1f,%.1f,%.1f\n",
                     w[i].cpu, w[i].isa, w[i].shape, w[i].pick, w[i].ns_c[0], w[i].ns_c[1],
                     w[i].ns_c[2], w[i].ns_c[6], w[i].ns_c[3], w[i].ns_c[4], w[i].ns_c[5]);
      else if (w[i].tanh == SC__WIS_DW)
        k = snprintf(line, sizeof line,
                     "dense_dw cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "lane_ns=%.1f dot_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      else if (w[i].tanh)
        k = snprintf(line, sizeof line,
                     "tanh cpu=%s isa=%s in=%zu out=%zu bias=%d pick=%s div_ns=%.1f rcp_ns=%.1f "
                     "rat_ns=%.1f ratrcp_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].bias, w[i].pick, w[i].ns_c[0],
                     w[i].ns_c[1], w[i].ns_c[2], w[i].ns_c[3]);
      else
        k = snprintf(line, sizeof line,
                     "dense_fwd cpu=%s isa=%s in=%zu out=%zu act=%s bias=%d pick=%s "
                     "fused_ns=%.1f xsmm_ns=%.1f\n",
                     w[i].cpu, w[i].isa, w[i].in, w[i].out, w[i].act, w[i].bias, w[i].pick,
                     w[i].ns_a, w[i].ns_b);
      if (k > 0) sc__wwrite(&wf, line, (size_t)k);
    }
    st = sc__wcommit(&wf, path, fn);
  }
  free(tmp);
  return st;
}

/* ns per forward (grad: per sc_valgrad, squared loss) of a slice-sized batch through a
 * one-layer twin of P, with the variants of P except for: the xsmm GEMM xs or (NULL) our
 * fused kernel, the tanh variant tv, the conv blocks cf and cd; the median of 5 rounds */
static double sc__time_layer(const sc_chain *c, const sc__lplan *P, sc__xsmm_fn xs, int tv, int dot,
                             int cf, int cd, int grad) {
  sc_chain *t = NULL;
  sc_workspace *ws = NULL;
  float *p = NULL, *x = NULL, *y = NULL, *g = NULL;
  double best = 0;
  size_t batch = SC__TW * (c->min_tiles ? c->min_tiles : 1);
  int conv = P->spec.kind == SC_LAYER_CONV2D;
  sc__planning = 1;
  sc_status st = sc__chain_create("sc_chain_create", &t, conv ? P->ic : P->in, conv ? P->ih : 1,
                                  conv ? P->iw : 1, &P->spec, 1);
  sc__planning = 0;
  if (st) return 0;
  t->kf = c->kf, t->kd = c->kd;
  if (conv)
    t->L[0].xconv = xs;
  else
    t->L[0].xfwd = xs;
  t->L[0].tanh_var = (unsigned char)tv;
  t->L[0].dw_dot = (unsigned char)dot;
  t->L[0].conv_fwd = (unsigned char)cf, t->L[0].conv_dw = (unsigned char)cd;
  size_t np = t->nparams;
  p = malloc(np * sizeof *p);
  g = malloc(np * sizeof *g);
  x = malloc(batch * P->in * sizeof *x);
  y = calloc(batch * P->out, sizeof *y);
  if (p && g && x && y && sc_workspace_create(&ws, t, batch) == SC_OK) {
    for (size_t k = 0; k < np; k++) p[k] = (float)((k * 37) % 19) / 19.0f - 0.5f;
    for (size_t k = 0; k < batch * P->in; k++) x[k] = (float)((k * 11) % 23) / 23.0f - 0.5f;
    double r[5] = {0, 0, 0, 0, 0};
    double work = (double)(conv ? P->R : P->in) * (double)P->out * (double)batch * (grad ? 2 : 1);
    int reps = (int)(2e6 / (work + 1e4)) + 1;
    if (reps > 200) reps = 200;
    float loss;
    for (int round = -1; round < 5; round++) { /* round -1 warms up */
      uint64_t t0 = sc__ns();
      for (int k = 0; k < (round < 0 ? 1 : reps); k++)
        if (grad) /* y (zeros) is the target */
          sc_valgrad(t, SC_LOSS_SQUARED, p, x, y, batch, &loss, g, NULL, ws);
        else
          sc_forward(t, p, x, batch, y, ws);
      if (round >= 0) r[round] = (double)(sc__ns() - t0) / reps;
    }
    for (int i = 1; i < 5; i++) /* insertion sort, 5 values */
      for (int j = i; j > 0 && r[j] < r[j - 1]; j--) {
        double q = r[j];
        r[j] = r[j - 1], r[j - 1] = q;
      }
    best = r[2];
  }
  sc_workspace_destroy(ws);
  free(p);
  free(g);
  free(x);
  free(y);
  sc_chain_destroy(t);
  return best;
}

/* The rule for the tanh variant where nothing is measured or forced: div. Measured on an
 * AVX2 EPYC (Zen 4 under KVM, make bench-tanh and SC_PLAN=measure on the toy's layers;
 * bench/RESULTS.md) div was faster than rcp; on Zen 5 (AVX-512) too, by an earlier
 * measurement. With SC_TANH_VARIANT=fast (the rational forms allowed): rat, 1.8x faster than
 * div on the AVX2 EPYC (make bench-tanh), ratrcp slower there. The Intel hosts are not
 * measured yet: SC_PLAN=measure decides there. */
#define SC__TANH_RULE SC__TANH_DIV
#define SC__TANH_RULE_FAST SC__TANH_RAT

/* the wisdom entry for layer P (tanh: the tanh variant's, else the dense forward's) */
static size_t sc__wis_find(const sc__wis *w, size_t nw, const sc__lplan *P, int tanh,
                           const char *cpu, const char *isa) {
  const char *act = sc_act_name(P->spec.act);
  for (size_t i = 0; i < nw; i++)
    if (w[i].tanh == tanh && w[i].in == P->in && w[i].out == P->out && w[i].bias == P->spec.bias &&
        (tanh == SC__WIS_TANH || !strcmp(w[i].act, act)) && !strcmp(w[i].isa, isa) &&
        !strcmp(w[i].cpu, cpu))
      return i;
  return nw;
}

/* appends a measured entry; returns it, or NULL (full, or out of memory) */
static sc__wis *sc__wis_add(sc__wis **w, size_t *nw, const sc__lplan *P, int tanh, const char *cpu,
                            const char *isa, const char *pick, double a, double b) {
  if (*nw >= SC__WIS_MAX) return NULL;
  sc__wis *nwp = realloc(*w, (*nw + 1) * sizeof **w);
  if (!nwp) return NULL;
  *w = nwp;
  sc__wis *e = &nwp[(*nw)++];
  memset(e, 0, sizeof *e);
  e->tanh = tanh;
  snprintf(e->cpu, sizeof e->cpu, "%s", cpu);
  snprintf(e->isa, sizeof e->isa, "%s", isa);
  snprintf(e->act, sizeof e->act, "%s", sc_act_name(P->spec.act));
  snprintf(e->pick, sizeof e->pick, "%s", pick);
  e->in = P->in, e->out = P->out, e->bias = P->spec.bias;
  e->ns_a = a, e->ns_b = b;
  return e;
}

/* the wisdom and machine a plan is measured against */
typedef struct sc__wis_ctx {
  sc__wis *w;
  size_t n;
  int ok, added; /* the file was read (so it is written back), an entry was added or completed */
  const char *cpu, *isa;
} sc__wis_ctx;

/* The dW form of dense layer P (SC__WIS_DW), *pick = 0 lane or 1 dot, timed with sc_valgrad:
 * forced (want >= 0), by rule (lane), read from the wisdom, or measured and added to it; *how
 * says which, *ns0 / *ns1 the timings where there are some. */
static void sc__pick_dw(const sc_chain *c, const sc__lplan *P, int want, int measure,
                        sc__wis_ctx *T, unsigned char *pick, unsigned char *how, float *ns0,
                        float *ns1) {
  if (want >= 0) {
    *how = SC__HOW_FORCED, *pick = (unsigned char)want;
  } else if (!measure) {
    *how = SC__HOW_RULE, *pick = 0;
  } else {
    size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_DW, T->cpu, T->isa);
    if (hit < T->n) {
      *how = SC__HOW_WISDOM;
      *ns0 = (float)T->w[hit].ns_a, *ns1 = (float)T->w[hit].ns_b;
      *pick = strcmp(T->w[hit].pick, "dot") == 0;
      return;
    }
    double t0 = sc__time_layer(c, P, NULL, 0, 0, 0, 0, 1),
           t1 = sc__time_layer(c, P, NULL, 0, 1, 0, 0, 1);
    *how = SC__HOW_MEASURED;
    *ns0 = (float)t0, *ns1 = (float)t1;
    *pick = t0 > 0 && t1 > 0 && t1 < t0;
    if (T->ok)
      T->added |= !!sc__wis_add(&T->w, &T->n, P, SC__WIS_DW, T->cpu, T->isa, *pick ? "dot" : "lane",
                                t0, t1);
  }
}

/* The tanh variant of dense tanh layer P on a vector kernel set (P->tanh_var, P->tanh_how,
 * P->ns_tanh): forced (want >= 0), by rule, or the fastest of the candidates (div and rcp; with
 * fast, rat and ratrcp too) by the wisdom's timings, measured where it has none (each timed with
 * sc_forward; the entry is added, or completed in place). */
static void sc__pick_tanh(const sc_chain *c, sc__lplan *P, int want, int fast, int measure,
                          sc__wis_ctx *T) {
  int nc = fast ? SC__TANH_NV : 2; /* the candidates: variants 0 .. nc - 1 */
  if (want >= 0) {
    P->tanh_how = SC__HOW_FORCED, P->tanh_var = (unsigned char)want;
    return;
  }
  if (!measure) {
    P->tanh_how = SC__HOW_RULE, P->tanh_var = fast ? SC__TANH_RULE_FAST : SC__TANH_RULE;
    return;
  }
  size_t hit = sc__wis_find(T->w, T->n, P, SC__WIS_TANH, T->cpu, T->isa);
  int timed = 0, best = 0;
  P->tanh_how = hit < T->n ? SC__HOW_WISDOM : SC__HOW_MEASURED;
  for (int v = 0; v < SC__TANH_NV; v++) {
    double t = hit < T->n ? T->w[hit].ns_c[v] : 0;
    if (t <= 0 && v < nc) { /* not in the wisdom (an entry from before rat, or none) */
      t = sc__time_layer(c, P, NULL, v, 0, 0, 0, 0);
      P->tanh_how = SC__HOW_MEASURED, timed = 1;
      if (hit < T->n) T->w[hit].ns_c[v] = t;
    }
    P->ns_tanh[v] = (float)t;
    if (v < nc && t > 0 && (P->ns_tanh[best] <= 0 || t < P->ns_tanh[best])) best = v;
  }
  P->tanh_var = (unsigned char)best;
  if (!timed || !T->ok) return;
  sc__wis *e = hit < T->n ? &T->w[hit]
                          : sc__wis_add(&T->w, &T->n, P, SC__WIS_TANH, T->cpu, T->isa,
                                        sc__tanh_names[best], 0, 0);
  if (!e) return;
  /* (the pick written is the fastest of all the timed variants) */
  int all = 0;
  for (int v = 0; v < SC__TANH_NV; v++) {
    e->ns_c[v] = P->ns_tanh[v];
    if (e->ns_c[v] > 0 && (e->ns_c[all] <= 0 || e->ns_c[v] < e->ns_c[all])) all = v;
  }
  snprintf(e->pick, sizeof e->pick, "%s", sc__tanh_names[all]);
  T->added = 1;
}

/* a forced conv block (SC_CONV_FWD / SC_CONV_DW = value v): its index into names, or -1 when
 * v is unset; an error when v is not a block shape (SC_ERR_ARG) or not one of this kernel
 * set's (SC_ERR_UNSUPPORTED) */
static sc_status sc__conv_force(const char *fn, const char *var, const char *v,
                                const sc__kt_f32 *kf, const char *const *names, int *idx) {
  *idx = -1;
  if (!v || !*v) return SC_OK;
  if (!strcmp(var, "SC_CONV_FWD") && !strcmp(v, "xsmm")) { /* checked per layer */
    *idx = SC__CONV_NV;
    return SC_OK;
  }
  size_t a = strspn(v, "0123456789"), b = a < strlen(v) ? strspn(v + a + 1, "0123456789") : 0;
  if (a == 0 || v[a] != 'x' || b == 0 || v[a + 1 + b])
    return sc__fail(SC_ERR_ARG, fn, "%s='%s' is not a block shape such as 4x2", var, v);
  if (!names)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s', but the %s kernels have one conv block", var,
                    v, kf->name);
  *idx = sc__name_index(names, v, strlen(v));
  if (*idx < 0)
    return sc__fail(SC_ERR_UNSUPPORTED, fn, "%s='%s' is not a block of the %s kernels (%s, %s, %s)",
                    var, v, kf->name, names[0], names[1], names[2]);
  return SC_OK;
}

/* the rule's conv dW block: the kernel set's 6-row one for channels a multiple of 6 but not
 * of 4, else the first */
static int sc__conv_dw_rule(const sc__kt_f32 *kf, const sc__lplan *P) {
  return P->oc % 6 == 0 && P->oc % 4 != 0 ? kf->conv_dw_k6 : 0;
}

/* Chooses every dense layer's forward variant and tanh variant, and every conv layer's
 * register blocks (see above). */
static sc_status sc__variant_plan(const char *fn, sc_chain *c) {
  c->plan_note[0] = 0;
  c->pool_fuse = 1;
  if (sc__planning) return SC_OK;
  const char *pf = getenv("SC_POOL_FUSE"); /* "0": the pool's and the conv's own passes */
  if (pf && *pf && strcmp(pf, "0") != 0 && strcmp(pf, "1") != 0)
    return sc__fail(SC_ERR_ARG, fn, "SC_POOL_FUSE='%s' is not '0' or '1'", pf);
  c->pool_fuse = !(pf && strcmp(pf, "0") == 0);
  const char *mode = getenv("SC_PLAN"), *force = getenv("SC_DENSE_FWD"), *off = getenv("SC_XSMM");
  const char *tforce = getenv("SC_TANH_VARIANT"), *dforce = getenv("SC_DENSE_DW");
  int measure = 0;
  if (mode && *mode && strcmp(mode, "rules") != 0) {
    if (strcmp(mode, "measure") != 0)
      return sc__fail(SC_ERR_ARG, fn, "SC_PLAN='%s' is not one of rules, measure", mode);
    measure = 1;
  }
  int want_x = -1; /* forced: 0 fused, 1 xsmm */
  if (force && *force) {
    if (strcmp(force, "fused") && strcmp(force, "xsmm"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_FWD='%s' is not one of fused, xsmm", force);
    want_x = strcmp(force, "xsmm") == 0;
  }
  int want_d = -1; /* forced: 0 lane, 1 dot */
  if (dforce && *dforce) {
    if (strcmp(dforce, "lane") && strcmp(dforce, "dot"))
      return sc__fail(SC_ERR_ARG, fn, "SC_DENSE_DW='%s' is not one of lane, dot", dforce);
    want_d = strcmp(dforce, "dot") == 0;
  }
  int want_r = -1, fast = 0; /* forced: SC__TANH_*; fast: the rational forms allowed */
  if (tforce && *tforce) {
    fast = !strcmp(tforce, "fast");
    want_r = fast ? -1 : sc__name_index(sc__tanh_names, tforce, strlen(tforce));
    if (!fast && want_r < 0)
      return sc__fail(SC_ERR_ARG, fn,
                      "SC_TANH_VARIANT='%s' is not one of div, rcp, rat, ratrcp, fast", tforce);
  }
  int simd = c->kf != &sc__kt_ref_f32; /* the scalar kernels have no xsmm path, no rcp */
  const char *const *cfn = c->kf->conv_fwd_names, *const *cdn = c->kf->conv_dw_names;
  int want_cf, want_cd; /* forced conv blocks, or -1 */
  sc_status cst = sc__conv_force(fn, "SC_CONV_FWD", getenv("SC_CONV_FWD"), c->kf, cfn, &want_cf);
  if (!cst) cst = sc__conv_force(fn, "SC_CONV_DW", getenv("SC_CONV_DW"), c->kf, cdn, &want_cd);
  if (cst) return cst;
  if (want_r > 0 && !simd)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_TANH_VARIANT=%s, but the scalar kernels have the divide form only", tforce);
  int xok = 0;
#if SC__XSMM
  if (simd && !(off && strcmp(off, "0") == 0)) {
    int arch = libxsmm_get_target_archid(); /* (libxsmm initializes itself once) */
    xok = c->kf == &sc__kt_f32_avx512 ? arch >= LIBXSMM_X86_AVX512 : arch >= LIBXSMM_X86_AVX2;
  }
#else
  (void)off;
#endif
  const char *xwhy = !SC__XSMM                        ? "this build has no libxsmm" /* (no xok) */
                     : !simd                          ? "the scalar kernels have no xsmm path"
                     : (off && strcmp(off, "0") == 0) ? "SC_XSMM=0"
                                                      : "libxsmm does not support this CPU";
  if (want_x == 1 && !xok)
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_DENSE_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  sc__wis_ctx T = {NULL, 0, 0, 0, NULL, NULL};
  const char *wpath = getenv("SC_WISDOM");
  char cpu[64] = "";
  int any_tanh = 0, any_conv = 0, any_lane = 0;
  for (size_t l = 0; l < c->nlayers; l++) {
    any_lane |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].dwl_off != SIZE_MAX;
    any_tanh |= c->L[l].spec.kind == SC_LAYER_DENSE && c->L[l].spec.act == SC_TANH;
    any_conv |= c->L[l].spec.kind == SC_LAYER_CONV2D;
  }
  if (any_conv && want_cf == SC__CONV_NV && !(cfn && cdn && xok))
    return sc__fail(SC_ERR_UNSUPPORTED, fn,
                    "SC_CONV_FWD=xsmm, but libxsmm is not available here (%s)", xwhy);
  int conv_measure = cfn && cdn && any_conv && want_cf < 0 && want_cd < 0;
  if (measure &&
      ((xok && want_x < 0) || (simd && any_tanh && want_r < 0) || conv_measure ||
       (any_lane && want_d < 0)) &&
      wpath && *wpath) {
    T.ok = sc__wis_read(wpath, &T.w, &T.n, c->plan_note, sizeof c->plan_note) == 0;
  }
  if (measure) sc__cpu_model(cpu, sizeof cpu);
  const char *isa = c->kf->name;
  T.cpu = cpu, T.isa = isa;
  sc_status st = SC_OK;
  for (size_t l = 0; l < c->nlayers && !st; l++) {
    sc__lplan *P = &c->L[l];
    P->xfwd = NULL, P->how = SC__HOW_ONLY, P->ns_fused = P->ns_xsmm = 0;
    P->tanh_var = 0, P->tanh_how = SC__HOW_ONLY;
    memset(P->ns_tanh, 0, sizeof P->ns_tanh);
    P->conv_fwd = P->conv_dw = 0, P->conv_how = SC__HOW_ONLY;
    memset(P->ns_cfwd, 0, sizeof P->ns_cfwd);
    memset(P->ns_cdw, 0, sizeof P->ns_cdw);
    P->xconv = NULL, P->ns_cx = 0;
    P->dw_dot = 0, P->dw_how = SC__HOW_ONLY, P->ns_lane = P->ns_dot = 0;
    if (P->spec.kind == SC_LAYER_CONV2D && cfn && cdn) {
      sc__xsmm_fn xc = NULL; /* libxsmm's row GEMM for this layer, where it can be had */
#if SC__XSMM
      if (xok && P->col_off != SIZE_MAX) xc = sc__xsmm_conv_kernel(P);
#endif
      if (want_cf >= 0 || want_cd >= 0) { /* forced; the other block takes the rule's */
        P->conv_how = SC__HOW_FORCED;
        if (want_cf == SC__CONV_NV) {
          if (!xc) {
            st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                          "SC_CONV_FWD=xsmm: libxsmm has no kernel for layer %zu", l);
            continue;
          }
          P->xconv = xc;
        }
        P->conv_fwd = (unsigned char)(want_cf > 0 && want_cf < SC__CONV_NV ? want_cf : 0);
        /* the dW block not forced: the rule's, not block 0 */
        P->conv_dw = (unsigned char)(want_cd >= 0 ? want_cd : sc__conv_dw_rule(c->kf, P));
        continue;
      }
      P->conv_how = SC__HOW_RULE;
      P->conv_dw = (unsigned char)sc__conv_dw_rule(c->kf, P);
      if (!measure) continue;
      char key[64];
      sc__conv_key(key, sizeof key, P);
      size_t hit = T.n;
      for (size_t i = 0; i < T.n && hit == T.n; i++)
        if (T.w[i].tanh == SC__WIS_CONV && !strcmp(T.w[i].shape, key) && !strcmp(T.w[i].isa, isa) &&
            !strcmp(T.w[i].cpu, cpu))
          hit = i;
      if (hit < T.n) {
        const char *pk = T.w[hit].pick, *colon = strchr(pk, ':');
        int fx = (size_t)(colon - pk) == 4 && !strncmp(pk, "xsmm", 4);
        int f = fx ? 0 : sc__name_index(cfn, pk, (size_t)(colon - pk));
        int d = sc__name_index(cdn, colon + 1, strlen(colon + 1));
        if (f >= 0 && d >= 0 && (!fx || xc)) { /* (else measured anew) */
          P->conv_how = SC__HOW_WISDOM;
          P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
          P->xconv = fx ? xc : NULL;
          P->ns_cx = (float)T.w[hit].ns_c[2 * SC__CONV_NV];
          for (int i = 0; i < SC__CONV_NV; i++)
            P->ns_cfwd[i] = (float)T.w[hit].ns_c[i],
            P->ns_cdw[i] = (float)T.w[hit].ns_c[SC__CONV_NV + i];
          continue;
        }
      }
      int f = 0, d = 0;
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cfwd[i] = (float)sc__time_layer(c, P, NULL, 0, 0, i, 0, 0);
        if (P->ns_cfwd[i] > 0 && (P->ns_cfwd[f] <= 0 || P->ns_cfwd[i] < P->ns_cfwd[f])) f = i;
      }
      if (xc) { /* libxsmm's forward against the fastest block */
        P->ns_cx = (float)sc__time_layer(c, P, xc, 0, 0, f, 0, 0);
        if (P->ns_cx > 0 && P->ns_cfwd[f] > 0 && P->ns_cx < P->ns_cfwd[f]) P->xconv = xc;
      }
      for (int i = 0; i < SC__CONV_NV; i++) {
        P->ns_cdw[i] = (float)sc__time_layer(c, P, P->xconv, 0, 0, f, i, 1);
        if (P->ns_cdw[i] > 0 && (P->ns_cdw[d] <= 0 || P->ns_cdw[i] < P->ns_cdw[d])) d = i;
      }
      P->conv_how = SC__HOW_MEASURED;
      P->conv_fwd = (unsigned char)f, P->conv_dw = (unsigned char)d;
      char pick[16];
      snprintf(pick, sizeof pick, "%s:%s", P->xconv ? "xsmm" : cfn[f], cdn[d]);
      sc__wis *e = T.ok ? sc__wis_add(&T.w, &T.n, P, SC__WIS_CONV, cpu, isa, pick, 0, 0) : NULL;
      if (e) {
        snprintf(e->shape, sizeof e->shape, "%s", key);
        for (int i = 0; i < SC__CONV_NV; i++)
          e->ns_c[i] = P->ns_cfwd[i], e->ns_c[SC__CONV_NV + i] = P->ns_cdw[i];
        e->ns_c[2 * SC__CONV_NV] = P->ns_cx;
        T.added = 1;
      }
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    /* the dW form of a layer with lane accumulators (the others have the dot form only) */
    if (P->dwl_off != SIZE_MAX)
      sc__pick_dw(c, P, want_d, measure, &T, &P->dw_dot, &P->dw_how, &P->ns_lane, &P->ns_dot);
    /* the tanh variant first: the GEMM variants below are timed with it */
    if (P->spec.act == SC_TANH && simd) sc__pick_tanh(c, P, want_r, fast, measure, &T);
    if (want_x == 0) { /* fused, forced: whether or not there is another variant */
      P->how = SC__HOW_FORCED;
      continue;
    }
    if (!xok || P->in > INT_MAX || P->out > INT_MAX) continue;
#if SC__XSMM
    sc__xsmm_fn xs = sc__xsmm_kernel(P);
    if (!xs) {
      if (want_x == 1)
        st = sc__fail(SC_ERR_UNSUPPORTED, fn,
                      "SC_DENSE_FWD=xsmm: libxsmm has no kernel for layer "
                      "%zu (%zu -> %zu)",
                      l, P->in, P->out);
      continue;
    }
    if (want_x >= 0) {
      P->how = SC__HOW_FORCED;
      P->xfwd = want_x ? xs : NULL;
      continue;
    }
    if (!measure) {
      P->how = SC__HOW_RULE;
      P->xfwd = c->kf == &sc__kt_f32_avx512 && P->in >= SC__XSMM_MIN_IN ? xs : NULL;
      continue;
    }
    size_t hit = sc__wis_find(T.w, T.n, P, 0, cpu, isa);
    if (hit < T.n) {
      P->how = SC__HOW_WISDOM;
      P->ns_fused = (float)T.w[hit].ns_a, P->ns_xsmm = (float)T.w[hit].ns_b;
      P->xfwd = strcmp(T.w[hit].pick, "xsmm") == 0 ? xs : NULL;
      continue;
    }
    double tf = sc__time_layer(c, P, NULL, P->tanh_var, 0, 0, 0, 0),
           tx = sc__time_layer(c, P, xs, P->tanh_var, 0, 0, 0, 0);
    P->how = SC__HOW_MEASURED;
    P->ns_fused = (float)tf, P->ns_xsmm = (float)tx;
    P->xfwd = tx > 0 && tf > 0 && tx < tf ? xs : NULL;
    if (T.ok)
      T.added |= !!sc__wis_add(&T.w, &T.n, P, 0, cpu, isa, P->xfwd ? "xsmm" : "fused", tf, tx);
#endif
  }
  if (!st && T.ok && T.added && sc__wis_write(fn, wpath, T.w, T.n) != SC_OK) {
    const char *e = sc_last_error(), *pre = "wisdom file not written: ";
    size_t lp = strlen(pre), le = strlen(e), room = sizeof c->plan_note - 1 - lp;
    memcpy(c->plan_note, pre, lp);
    memcpy(c->plan_note + lp, e, le < room ? le : room);
    c->plan_note[lp + (le < room ? le : room)] = 0;
  }
  free(T.w);
  return st;
}

/* The plan as text (see simplechain.h). */
sc_status sc_chain_plan(const sc_chain *chain, char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  if (!buf && cap > 0) return SC__FAIL(SC_ERR_NULL, "buf is NULL but cap is %zu", cap);
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  static const char *hows[] = {"the only variant here", "rule", "measured", "wisdom",
                               "forced by SC_DENSE_FWD"};
  static const char *thows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_TANH_VARIANT"};
  int simd = chain->kf != &sc__kt_ref_f32;
  sc__sprintf(&b, "kernels %s; dense forward variants: fused%s; tanh variants: %s\n",
              chain->kf->name, SC__XSMM ? ", xsmm" : " (no libxsmm in this build)",
              simd ? "div, rcp (rat, ratrcp with SC_TANH_VARIANT=fast)" : "div");
  size_t per = (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1);
  const char *const *cfn = chain->kf->conv_fwd_names, *const *cdn = chain->kf->conv_dw_names;
  static const char *chows[] = {"the only variant here", "rule", "measured", "wisdom",
                                "forced by SC_CONV_FWD / SC_CONV_DW"};
  for (size_t l = 0; l < chain->nlayers; l++) {
    const sc__lplan *P = &chain->L[l];
    if (P->spec.kind == SC_LAYER_CONV2D) {
      sc__sprintf(&b, "layer %zu conv %zux%zux%zu -> %zux%zux%zu: ", l, P->ic, P->ih, P->iw, P->oc,
                  P->oh, P->ow);
      if (!cfn || !cdn) {
        sc__sprintf(&b, "one block (%s)\n", chows[0]);
        continue;
      }
      sc__sprintf(&b, "forward %s %s, dW block %s (%s", P->xconv ? "xsmm" : "block",
                  P->xconv ? "(im2col rows + GEMM)" : cfn[P->conv_fwd], cdn[P->conv_dw],
                  chows[P->conv_how]);
      if (P->conv_how == SC__HOW_MEASURED || P->conv_how == SC__HOW_WISDOM) {
        sc__sprintf(&b, ": forward");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cfn[i], (double)P->ns_cfwd[i]);
        if (P->ns_cx > 0) sc__sprintf(&b, " xsmm %.0f ns", (double)P->ns_cx);
        sc__sprintf(&b, "; forward + dW");
        for (int i = 0; i < SC__CONV_NV; i++)
          sc__sprintf(&b, " %s %.0f ns", cdn[i], (double)P->ns_cdw[i]);
        sc__sprintf(&b, " per %zu samples",
                    (size_t)SC__TW * (chain->min_tiles ? chain->min_tiles : 1));
      }
      sc__sprintf(
          &b, ")%s\n",
          sc__pool_fold_f32(chain, l)
              ? "; in float precision the forward is the fold's (the 2 x 2 pool above in it)"
              : "");
      continue;
    }
    if (P->spec.kind != SC_LAYER_DENSE) continue;
    sc__sprintf(&b, "layer %zu dense %zu -> %zu %s: %s (%s", l, P->in, P->out,
                sc_act_name(P->spec.act), P->xfwd ? "xsmm" : "fused", hows[P->how]);
    if (P->how == SC__HOW_MEASURED || P->how == SC__HOW_WISDOM)
      sc__sprintf(&b, ": fused %.0f ns, xsmm %.0f ns per %zu samples", (double)P->ns_fused,
                  (double)P->ns_xsmm, per);
    sc__sprintf(&b, ")");
    if (P->spec.act == SC_TANH) {
      sc__sprintf(&b, "; tanh %s (%s", sc__tanh_names[P->tanh_var], thows[P->tanh_how]);
      if (P->tanh_how == SC__HOW_MEASURED || P->tanh_how == SC__HOW_WISDOM) {
        const char *sep = ": ";
        for (int v = 0; v < SC__TANH_NV; v++)
          if (P->ns_tanh[v] > 0) {
            sc__sprintf(&b, "%s%s %.0f ns", sep, sc__tanh_names[v], (double)P->ns_tanh[v]);
            sep = ", ";
          }
        sc__sprintf(&b, " per %zu samples", per);
      }
      sc__sprintf(&b, ")");
    }
    if (P->dwl_off != SIZE_MAX) {
      static const char *dhows[] = {"the only variant here", "rule", "measured", "wisdom",
                                    "forced by SC_DENSE_DW"};
      sc__sprintf(&b, "; dW %s (%s", P->dw_dot ? "dot" : "lane", dhows[P->dw_how]);
      if (P->dw_how == SC__HOW_MEASURED || P->dw_how == SC__HOW_WISDOM)
        sc__sprintf(&b, ": lane %.0f ns, dot %.0f ns per %zu samples", (double)P->ns_lane,
                    (double)P->ns_dot, per);
      sc__sprintf(&b, ")");
    }
    sc__sprintf(&b, "\n");
  }
  if (chain->plan_note[0]) sc__sprintf(&b, "note: %s\n", chain->plan_note);
  if (needed) *needed = b.len + 1;
  if (b.len + 1 > cap) {
    if (buf && cap) buf[cap - 1] = 0;
    return SC__FAIL(SC_ERR_NOMEM, "buffer of %zu bytes too small for the plan (%zu needed)", cap,
                    b.len + 1);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- IDX files (MNIST) */
/* sc_idx_load_images / sc_idx_load_labels (see simplechain.h). A file is read through a
 * small source: zlib's gzread when built with SC_HAVE_ZLIB (it reads raw files too),
 * stdio otherwise, always in chunks of SC__IDX_CHUNK bytes. src.off counts the bytes of
 * the (decompressed) stream delivered so far: that is the offset error messages give.
 * Nothing is allocated from the header's claims: the header is checked first, then the
 * output grows (doubling) as values actually arrive: memory never exceeds twice what the
 * file really holds (at least SC__IDX_FIRST values), whatever its header claims. */
#define SC__IDX_CHUNK 16384                    /* bytes per read */
#define SC__IDX_MAX_VALUES ((uint64_t)1 << 31) /* headers claiming more are refused */
#define SC__IDX_FIRST ((size_t)1 << 16)        /* first allocation (values), then x2 */

typedef struct sc__idx_src {
  const char *path;
  const char *fn; /* the public function, for messages */
  size_t off;     /* bytes of the decompressed stream delivered so far */
  size_t expect;  /* bytes the whole stream should have (header, then all) */
  char what[96];  /* "a 16-byte header + 10000 x 28 x 28 values", for messages */
#ifdef SC_HAVE_ZLIB
  gzFile gz;
#else
  FILE *f;
#endif
} sc__idx_src;

void sc_free(void *p) { free(p); }

/* " of the decompressed stream" for a gzipped file, "" for a raw one */
static const char *sc__idx_where(const sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  return gzdirect(s->gz) ? "" : " of the decompressed stream";
#else
  (void)s;
  return "";
#endif
}

static sc_status sc__idx_open(sc__idx_src *s, const char *path, const char *fn) {
  s->path = path;
  s->fn = fn;
  s->off = 0;
  s->expect = 0;
  s->what[0] = '\0';
  errno = 0;
#ifdef SC_HAVE_ZLIB
  s->gz = gzopen(path, "rb");
  if (!s->gz) /* gzopen leaves errno 0 when only its own allocation failed */
    return sc__io_fail(fn, errno ? errno : ENOMEM, "cannot open", path);
  gzbuffer(s->gz, 65536); /* before the first read; fewer system calls than the 8 KiB default */
#else
  s->f = fopen(path, "rb");
  if (!s->f) return sc__io_fail(fn, errno ? errno : EIO, "cannot open", path);
#endif
  return SC_OK;
}

static void sc__idx_close(sc__idx_src *s) {
#ifdef SC_HAVE_ZLIB
  gzclose(s->gz); /* read-only: errors were seen (and reported) by the reads */
#else
  fclose(s->f);
#endif
}

/* Reads up to want bytes into buf; *got < want only where the data ends. A read error
 * or a corrupt / truncated gzip stream fails here, with the message set. */
static sc_status sc__idx_read(sc__idx_src *s, unsigned char *buf, size_t want, size_t *got) {
  size_t have = 0;
  *got = 0;
  while (have < want) {
    size_t ask = want - have < SC__IDX_CHUNK ? want - have : SC__IDX_CHUNK;
#ifdef SC_HAVE_ZLIB
    int r = gzread(s->gz, buf + have, (unsigned)ask);
    int zerr = Z_OK;
    const char *zmsg = gzerror(s->gz, &zerr);
    if (r > 0) {
      have += (size_t)r;
      s->off += (size_t)r;
    }
    *got = have;
    /* Z_BUF_ERROR: the stream stops mid-member ("unexpected end of file"). zlib says so
     * as soon as it decompressed the last bytes there are, which may be well before we
     * read them: keep reading, and fail where the data actually ends (below). */
    if (r < 0 || (zerr != Z_OK && (zerr != Z_BUF_ERROR || (size_t)r < ask))) {
      /* zlib's message starts with "<path>: "; drop that, the path is named anyway */
      size_t plen = strlen(s->path);
      if (!zmsg || !*zmsg) zmsg = "unknown error";
      if (strncmp(zmsg, s->path, plen) == 0 && zmsg[plen] == ':' && zmsg[plen + 1] == ' ')
        zmsg += plen + 2;
      if (zerr == Z_ERRNO) return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s': %s", s->path, zmsg);
      if (zerr == Z_MEM_ERROR)
        return sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory in zlib", s->path);
      if (zerr == Z_BUF_ERROR && s->off < s->expect)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data ends at offset %zu of the "
                        "decompressed stream, expected %zu bytes (zlib: %s)",
                        s->path, s->off, s->expect, zmsg);
      if (zerr == Z_BUF_ERROR)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': truncated gzip stream: the data is complete (offset %zu of the "
                        "decompressed stream) but the end of the gzip stream (CRC, length) is "
                        "missing (zlib: %s)",
                        s->path, s->off, zmsg);
      /* zlib decompresses ahead, so the damage may lie beyond what was delivered */
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': corrupt gzip stream (zlib: %s), seen after offset %zu of the "
                      "decompressed stream",
                      s->path, zmsg, s->off);
    }
    if ((size_t)r < ask) break; /* the end of the data */
#else
    size_t r = fread(buf + have, 1, ask, s->f);
    have += r;
    s->off += r;
    *got = have;
    if (r < ask) {
      if (ferror(s->f))
        return sc__fail(SC_ERR_IO, s->fn, "cannot read '%s' at offset %zu: %s", s->path, s->off,
                        strerror(errno));
      break;
    }
#endif
  }
  return SC_OK;
}

static const char *sc__idx_type_name(unsigned t) {
  switch (t) {
  case 0x08: return "unsigned byte";
  case 0x09: return "signed byte";
  case 0x0B: return "int16";
  case 0x0C: return "int32";
  case 0x0D: return "float32";
  case 0x0E: return "float64";
  }
  return NULL;
}

/* Reads and checks the header of an IDX file of uint8 values with ndims (1 or 3)
 * dimensions; dims[0..ndims) receive the sizes and *count their product. */
static sc_status sc__idx_header(sc__idx_src *s, unsigned ndims, uint32_t dims[3], size_t *count) {
  static const char *names3[3] = {"the image count", "the row count", "the column count"};
  static const char *names1[1] = {"the label count"};
  const char **names = ndims == 3 ? names3 : names1;
  const char *kind = ndims == 3 ? "images" : "labels";
  const size_t hlen = 4 + 4 * (size_t)ndims;
  unsigned char h[16];
  size_t got;
  s->expect = hlen;
  sc_status st = sc__idx_read(s, h, 4, &got);
  if (st) return st;
#ifndef SC_HAVE_ZLIB
  if (got >= 2 && h[0] == 0x1f && h[1] == 0x8b)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s' is gzip-compressed and this build has no zlib: build with `make` "
                    "(which links zlib when installed), or compile simplechain.c with "
                    "-DSC_HAVE_ZLIB and link -lz, or gunzip the file",
                    s->path);
#endif
  if (got == 0)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': empty file (offset 0), expected a %zu-byte IDX header", s->path, hlen);
  if (got >= 2 && (h[0] != 0 || h[1] != 0))
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': not an IDX file: bytes 0x%02x 0x%02x at offset 0, an IDX file starts "
                    "with two zero bytes%s",
                    s->path, h[0], h[1],
                    h[0] == 0x1f && h[1] == 0x8b ? " (this is gzip data: compressed twice?)" : "");
  if (got < 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header",
                    s->path, s->off, sc__idx_where(s), hlen);
  const char *tname = sc__idx_type_name(h[2]);
  if (!tname)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': unknown IDX data type 0x%02x at offset 2 (magic 0x%02x%02x%02x%02x)",
                    s->path, h[2], h[0], h[1], h[2], h[3]);
  if (h[2] != 0x08)
    return sc__fail(SC_ERR_UNSUPPORTED, s->fn,
                    "'%s': IDX data type 0x%02x (%s) at offset 2 is not supported: %s must be "
                    "0x08 (unsigned byte)",
                    s->path, h[2], tname, kind);
  if (h[3] != ndims)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': %u dimensions (byte 3, magic 0x%02x%02x%02x%02x), %s have %u (magic "
                    "0x000008%02x)%s",
                    s->path, (unsigned)h[3], h[0], h[1], h[2], h[3], kind, ndims, ndims,
                    ndims == 3 && h[3] == 1   ? ": is this a labels file?"
                    : ndims == 1 && h[3] == 3 ? ": is this an images file?"
                                              : "");
  st = sc__idx_read(s, h + 4, hlen - 4, &got);
  if (st) return st;
  if (got < hlen - 4)
    return sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated header: the data ends at offset %zu%s, expected a %zu-byte "
                    "IDX header (%u dimensions)",
                    s->path, s->off, sc__idx_where(s), hlen, ndims);
  for (unsigned d = 0; d < ndims; d++) {
    const unsigned char *b = h + 4 + 4 * d;
    dims[d] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
    if (dims[d] == 0)
      return sc__fail(SC_ERR_FORMAT, s->fn, "'%s': %s (dimension %u, offset %u) is 0", s->path,
                      names[d], d, 4 + 4 * d);
  }
  uint64_t total = 1;
  for (unsigned d = 0; d < ndims; d++) {
    total *= dims[d]; /* no overflow: total <= 2^31 before, dims[d] < 2^32 */
    if (total > SC__IDX_MAX_VALUES) {
      if (ndims == 3)
        return sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': the header (offsets 4..15) claims %lu x %lu x %lu images: more "
                        "than 2^31 values, refused",
                        s->path, (unsigned long)dims[0], (unsigned long)dims[1],
                        (unsigned long)dims[2]);
      return sc__fail(SC_ERR_FORMAT, s->fn,
                      "'%s': the header (offset 4) claims %lu labels: more than 2^31, refused",
                      s->path, (unsigned long)dims[0]);
    }
  }
  int ok = 1;
  *count = (size_t)total;
  s->expect = sc__add(hlen, *count, &ok); /* total <= 2^31: fits even a 32-bit size_t */
  if (ndims == 3)
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu x %lu x %lu pixels", hlen,
             (unsigned long)dims[0], (unsigned long)dims[1], (unsigned long)dims[2]);
  else
    snprintf(s->what, sizeof s->what, "a %zu-byte header + %lu labels", hlen,
             (unsigned long)dims[0]);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': file size overflows size_t", s->path);
  return SC_OK;
}

/* Reads the count uint8 values after the header, into floats (times scale) or, when
 * labels, into int32_t checked against classes (0: unchecked); then checks that
 * nothing follows. On success *out is the malloc'ed array. */
static sc_status sc__idx_body(sc__idx_src *s, size_t count, int labels, float scale, size_t classes,
                              void **out) {
  unsigned char buf[SC__IDX_CHUNK];
  const size_t esz = labels ? sizeof(int32_t) : sizeof(float);
  void *v = NULL;
  size_t cap = 0, done = 0, got = 0;
  sc_status st = SC_OK;
  *out = NULL;
  while (done < count) {
    size_t want = count - done < SC__IDX_CHUNK ? count - done : SC__IDX_CHUNK;
    if (done + want > cap) {
      size_t ncap = cap ? cap : SC__IDX_FIRST;
      while (ncap < done + want) ncap = ncap > count / 2 ? count : ncap * 2;
      if (ncap > count) ncap = count;
      int ok = 1;
      size_t bytes = sc__mul(ncap, esz, &ok);
      void *nv = ok ? realloc(v, bytes) : NULL;
      if (!nv) {
        st = ok ? sc__fail(SC_ERR_NOMEM, s->fn, "'%s': out of memory for %s (%zu bytes)", s->path,
                           s->what, bytes)
                : sc__fail(SC_ERR_OVERFLOW, s->fn, "'%s': %zu values overflow size_t", s->path,
                           ncap);
        goto fail;
      }
      v = nv;
      cap = ncap;
    }
    st = sc__idx_read(s, buf, want, &got);
    if (st) goto fail;
    if (labels) {
      int32_t *lab = (int32_t *)v + done;
      for (size_t i = 0; i < got; i++) {
        if (classes && (size_t)buf[i] >= classes) {
          st = sc__fail(SC_ERR_FORMAT, s->fn,
                        "'%s': label %u of sample %zu (offset %zu%s) is not < classes = %zu",
                        s->path, (unsigned)buf[i], done + i, s->off - got + i, sc__idx_where(s),
                        classes);
          goto fail;
        }
        lab[i] = (int32_t)buf[i];
      }
    } else {
      float *x = (float *)v + done;
      for (size_t i = 0; i < got; i++) x[i] = (float)buf[i] * scale;
    }
    done += got;
    if (got < want) {
      st = sc__fail(SC_ERR_FORMAT, s->fn,
                    "'%s': truncated: the data ends at offset %zu%s, expected %zu bytes (%s)",
                    s->path, s->off, sc__idx_where(s), s->expect, s->what);
      goto fail;
    }
  }
  st = sc__idx_read(s, buf, 1, &got); /* must be the end (for gzip: also checks the CRC) */
  if (st) goto fail;
  if (got) {
    st = sc__fail(SC_ERR_FORMAT, s->fn,
                  "'%s': unexpected bytes after the data at offset %zu%s: expected exactly %zu "
                  "bytes (%s)",
                  s->path, s->expect, sc__idx_where(s), s->expect, s->what);
    goto fail;
  }
  *out = v;
  return SC_OK;
fail:
  free(v);
  return st;
}

sc_status sc_idx_load_images(const char *path, float **images, size_t *n, size_t *rows,
                             size_t *cols, float scale) {
  if (images) *images = NULL;
  if (n) *n = 0;
  if (rows) *rows = 0;
  if (cols) *cols = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(images);
  SC__CHECK_NULL(n);
  SC__CHECK_NULL(rows);
  SC__CHECK_NULL(cols);
  if (!isfinite(scale)) return SC__FAIL(SC_ERR_ARG, "scale %g is not finite", (double)scale);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 3, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 0, scale, 0, &v);
  sc__idx_close(&s);
  if (st) return st;
  *images = (float *)v;
  *n = dims[0];
  *rows = dims[1];
  *cols = dims[2];
  return SC_OK;
}

sc_status sc_idx_load_labels(const char *path, int32_t **labels, size_t *n, size_t classes) {
  if (labels) *labels = NULL;
  if (n) *n = 0;
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(labels);
  SC__CHECK_NULL(n);
  sc__idx_src s;
  sc_status st = sc__idx_open(&s, path, __func__);
  if (st) return st;
  uint32_t dims[3] = {0, 0, 0};
  size_t count = 0;
  void *v = NULL;
  st = sc__idx_header(&s, 1, dims, &count);
  if (!st) st = sc__idx_body(&s, count, 1, 0.0f, classes, &v);
  sc__idx_close(&s);
  if (st) return st;
  *labels = (int32_t *)v;
  *n = dims[0];
  return SC_OK;
}

/* ---------------------------------------------------------------- thread pool */
/* A persistent pool: workers wait for a new generation number, run the task, and
 * count down `pending`. Between the steps of a training run the wait is short, so a
 * worker first spins on the atomic counter (no system call, a few microseconds to
 * start a step) and only then sleeps on the condition variable. */
typedef void (*sc__task_fn)(void *arg, int worker, int nworkers);

/* Elementwise work on n elements split over the workers: part w of `parts` (at most
 * SC__OPT_PARTS) is [*k0, *k1), cut at multiples of 64 but for the end, so that every element
 * gets the same operations whatever the split (vector bodies, not tails) */
static size_t sc__parts(int nworkers) {
  return (size_t)nworkers < SC__OPT_PARTS ? (size_t)nworkers : SC__OPT_PARTS;
}
static void sc__part_range(size_t w, size_t parts, size_t n, size_t *k0, size_t *k1) {
  *k0 = (w * n / parts) & ~(size_t)63;
  *k1 = w + 1 < parts ? ((w + 1) * n / parts) & ~(size_t)63 : n;
}

#if SC__THREADS
#include <sched.h>
#include <stdatomic.h>
#define SC__SPIN 20000 /* polls before a waiting thread starts yielding */
/* How long a worker polls for the next run before it sleeps on the condition variable. The
 * serial part of a training step (LeNet5: ADAM on 44,426 parameters, the guard's scan, the
 * slices' reduction) takes tens of microseconds; a worker that had gone to sleep by then
 * needed a futex wake (a system call, and an inter-processor interrupt under a hypervisor)
 * and started each step late: LeNet5 at batch 64 on 2 threads made 3 futex calls and 30
 * sched_yield calls per step (the caller waiting for the late worker). 20,000 polls
 * (about 10 us) was the limit before; now the worker polls that often, then yields between
 * polls until SC__SPIN_NS have passed. */
#define SC__SPIN_NS 1000000u /* 1 ms */
#endif

typedef struct sc__pool {
  int nthreads; /* total workers including the caller */
#if SC__THREADS
  pthread_t *th;
  pthread_mutex_t mu;
  pthread_cond_t cv_go;
  atomic_ulong gen;
  atomic_int pending;
  atomic_int stop;
  atomic_size_t next; /* the next work item to claim (sc__pool_claim), reset per run */
  sc__task_fn fn;
  void *arg;
#if defined(__linux__) && defined(CPU_SET)
  int home;          /* pinned workers: the CPU left for the calling thread, else -1 */
  cpu_set_t wcpus;   /* the CPUs the workers are pinned to */
  uint64_t nudge_ns; /* when the calling thread was last moved home (sc__pool_nudge) */
#endif
#endif
} sc__pool;

#if SC__THREADS
typedef struct sc__worker_arg {
  sc__pool *pool;
  int id;
} sc__worker_arg;

static void *sc__worker_main(void *vp) {
  sc__worker_arg *wa = vp;
  sc__pool *P = wa->pool;
  int id = wa->id;
  unsigned long seen = 0;
  for (;;) {
    unsigned spins = 0;
    uint64_t until = 0;
    while (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
           !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      if (++spins < SC__SPIN) continue;
      /* then yield between polls, so that a thread with work on this CPU (more threads
       * than CPUs) gets it, until the time is up */
      uint64_t now = sc__ns();
      if (!until)
        until = now + SC__SPIN_NS;
      else if (now > until)
        break;
      sched_yield();
    }
    if (atomic_load_explicit(&P->gen, memory_order_acquire) == seen &&
        !atomic_load_explicit(&P->stop, memory_order_acquire)) {
      pthread_mutex_lock(&P->mu);
      while (atomic_load(&P->gen) == seen && !atomic_load(&P->stop))
        pthread_cond_wait(&P->cv_go, &P->mu);
      pthread_mutex_unlock(&P->mu);
    }
    if (atomic_load_explicit(&P->stop, memory_order_acquire)) return NULL;
    seen = atomic_load_explicit(&P->gen, memory_order_acquire);
    P->fn(P->arg, id, P->nthreads);
    atomic_fetch_sub_explicit(&P->pending, 1, memory_order_acq_rel);
  }
}
#endif

static void sc__pool_destroy(sc__pool *P) {
  if (!P) return;
#if SC__THREADS
  if (P->th) {
    pthread_mutex_lock(&P->mu);
    atomic_store(&P->stop, 1);
    pthread_cond_broadcast(&P->cv_go);
    pthread_mutex_unlock(&P->mu);
    for (int i = 0; i < P->nthreads - 1; i++) pthread_join(P->th[i], NULL);
    pthread_cond_destroy(&P->cv_go);
    pthread_mutex_destroy(&P->mu);
    free(P->th);
  }
#endif
  free(P);
}

#if SC__THREADS
static sc_status sc__pool_create(sc__pool **out, int nthreads) {
  *out = NULL;
  /* worker args live right after the pool struct */
  sc__pool *P = calloc(1, sizeof(sc__pool) + (size_t)nthreads * sizeof(sc__worker_arg));
  if (!P) return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  P->nthreads = nthreads;
  P->th = calloc((size_t)nthreads, sizeof(pthread_t));
  if (!P->th) {
    free(P);
    return sc__fail(SC_ERR_NOMEM, "sc_workspace_set_threads", "out of memory");
  }
  atomic_init(&P->gen, 0);
  atomic_init(&P->pending, 0);
  atomic_init(&P->stop, 0);
  atomic_init(&P->next, 0);
  pthread_mutex_init(&P->mu, NULL);
  pthread_cond_init(&P->cv_go, NULL);
  sc__worker_arg *wa = (sc__worker_arg *)(P + 1);
#if defined(__linux__) && defined(CPU_SET)
  P->home = -1;
  CPU_ZERO(&P->wcpus);
#endif
  for (int i = 0; i < nthreads - 1; i++) {
    wa[i].pool = P;
    wa[i].id = i + 1;
    if (pthread_create(&P->th[i], NULL, sc__worker_main, &wa[i]) != 0) {
      P->nthreads = i + 1; /* join the ones that started */
      sc__pool_destroy(P);
      return sc__fail(SC_ERR_THREAD, "sc_workspace_set_threads",
                      "pthread_create failed for worker %d of %d", i + 1, nthreads);
    }
  }
#if defined(__linux__) && defined(CPU_SET)
  /* Pinning: worker k runs on the k-th CPU (cyclically) of the ones this process may use,
   * so workers do not migrate between steps; the calling thread is not pinned, only moved
   * off a worker's CPU when found there (sc__pool_nudge). SC_PIN=0
   * turns it off. A failure to pin is not an error (the threads run unpinned). */
  const char *pin = getenv("SC_PIN");
  if (!(pin && strcmp(pin, "0") == 0)) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
      int cpus[CPU_SETSIZE], nc = 0;
      for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &allowed)) cpus[nc++] = k;
      for (int i = 0; nc > 1 && i < nthreads - 1; i++) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[(i + 1) % nc], &one);
        if (pthread_setaffinity_np(P->th[i], sizeof one, &one) == 0)
          CPU_SET(cpus[(i + 1) % nc], &P->wcpus);
      }
      /* the first CPU is the calling thread's when no worker got it */
      if (nc > 1 && nthreads <= nc && !CPU_ISSET(cpus[0], &P->wcpus)) P->home = cpus[0];
    }
  }
#endif
  *out = P;
  return SC_OK;
}
#endif

/* the next work item of the current run, for workers that take items as they go (called
 * only from a task run with nworkers > 1) */
static size_t sc__pool_claim(sc__pool *P) {
#if SC__THREADS
  return atomic_fetch_add_explicit(&P->next, 1, memory_order_relaxed);
#else
  (void)P;
  return SIZE_MAX;
#endif
}

#if SC__THREADS && defined(__linux__) && defined(CPU_SET)
/* The calling thread is not pinned, and the scheduler sometimes runs it on a pinned worker's
 * CPU: that worker then waits for the caller's share of each run before it can do its own
 * (LeNet5, 2 threads, Zen 4 KVM guest: runs of 15-50 consecutive steps, about 3.7 % of the
 * steps of an epoch, each 0.6-1.1 ms longer, until the load balancer moved the caller; 2-7 %
 * of the epoch). When it is found there, it is moved to its own CPU (home) by narrowing its
 * affinity to that CPU, which migrates it at once, and then restoring its affinity as it was.
 * Not when the thread's own affinity excludes home (the user's choice), and at most once a
 * millisecond (a CPU shared by more threads than it can run: the move would not last). */
static void sc__pool_nudge(sc__pool *P) {
  int cpu = P->home < 0 ? -1 : sched_getcpu();
  if (cpu < 0 || cpu == P->home || !CPU_ISSET(cpu, &P->wcpus)) return;
  uint64_t now = sc__ns();
  if (P->nudge_ns && now - P->nudge_ns < 1000000u) return;
  P->nudge_ns = now;
  cpu_set_t mine, one;
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_ISSET(P->home, &mine)) return;
  CPU_ZERO(&one);
  CPU_SET(P->home, &one);
  if (sched_setaffinity(0, sizeof one, &one) == 0) (void)sched_setaffinity(0, sizeof mine, &mine);
}
#endif

/* run fn on every worker (the caller is worker 0) and wait for all */
static void sc__pool_run(sc__pool *P, sc__task_fn fn, void *arg) {
  if (!P || P->nthreads <= 1) {
    fn(arg, 0, 1);
    return;
  }
#if SC__THREADS
#if defined(__linux__) && defined(CPU_SET)
  sc__pool_nudge(P);
#endif
  P->fn = fn;
  P->arg = arg;
  atomic_store_explicit(&P->next, 0, memory_order_relaxed);
  atomic_store_explicit(&P->pending, P->nthreads - 1, memory_order_relaxed);
  pthread_mutex_lock(&P->mu); /* the lock orders gen against a worker going to sleep */
  atomic_fetch_add_explicit(&P->gen, 1, memory_order_release);
  pthread_cond_broadcast(&P->cv_go);
  pthread_mutex_unlock(&P->mu);
  fn(arg, 0, P->nthreads);
  for (unsigned long spins = 0; atomic_load_explicit(&P->pending, memory_order_acquire) > 0;
       spins++)
    if (spins > SC__SPIN) sched_yield();
#endif
}

/* ---------------------------------------------------------------- workspaces */

/* rank r of R's contiguous run [*lo, *hi) of n slices (data-parallel training, sc_dist) */
static inline void sc__rank_slices(size_t n, size_t r, size_t R, size_t *lo, size_t *hi) {
  *lo = r * n / R;
  *hi = (r + 1) * n / R;
}

static size_t sc__slices_for(const sc_chain *c, size_t batch) {
  size_t tiles = (batch + SC__TW - 1) / SC__TW;
  size_t s = (tiles + c->min_tiles - 1) / c->min_tiles;
  if (s > SC__MAX_SLICES) s = SC__MAX_SLICES;
  return s ? s : 1;
}

static sc_status sc__ws_plan(const char *fn, const sc_chain *c, size_t max_batch, size_t *slices,
                             size_t *tile_bytes, size_t *slice_bytes, size_t *total) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (max_batch == 0) return sc__fail(SC_ERR_BATCH, fn, "max_batch is 0");
  int ok = 1;
  *slices = sc__slices_for(c, max_batch);
  /* elements sized for double so one workspace serves both precisions */
  *tile_bytes = sc__roundup(sc__mul(c->tile_elems, sizeof(double), &ok), SC__ALIGN, &ok);
  size_t grad = sc__roundup(sc__mul(c->nparams, sizeof(double), &ok), SC__ALIGN, &ok);
  *slice_bytes = sc__add(*tile_bytes, grad, &ok);
  size_t head = sc__roundup(sizeof(struct sc_workspace), SC__ALIGN, &ok);
  *total = sc__add(sc__add(head, sc__mul(*slices, *slice_bytes, &ok), &ok), SC__ALIGN, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "workspace size overflows size_t");
  return SC_OK;
}

sc_status sc_workspace_bytes(const sc_chain *chain, size_t max_batch, size_t *bytes) {
  size_t s = 0, tb = 0, sb = 0, total = 0;
  SC__CHECK_NULL(bytes);
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  *bytes = total;
  return SC_OK;
}

static sc_workspace *sc__ws_place(void *mem, const sc_chain *c, size_t max_batch, size_t s,
                                  size_t tb, size_t sb) {
  uintptr_t a = ((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
  sc_workspace *ws = (sc_workspace *)a;
  memset(ws, 0, sizeof *ws);
  ws->chain = c;
  ws->max_batch = max_batch;
  ws->max_slices = s;
  ws->tile_bytes = tb;
  ws->slice_bytes = sb;
  size_t head = (sizeof(struct sc_workspace) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  ws->slices = (unsigned char *)a + head;
  return ws;
}

sc_status sc_workspace_create(sc_workspace **out, const sc_chain *chain, size_t max_batch) {
  SC__CHECK_NULL(out);
  *out = NULL;
  size_t s = 0, tb = 0, sb = 0, total = 0;
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  void *mem = malloc(total);
  if (!mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory allocating %zu bytes", total);
  sc_workspace *ws = sc__ws_place(mem, chain, max_batch, s, tb, sb);
  ws->owned = mem;
  *out = ws;
  return SC_OK;
}

sc_status sc_workspace_init(sc_workspace **out, const sc_chain *chain, size_t max_batch, void *mem,
                            size_t bytes) {
  SC__CHECK_NULL(out);
  *out = NULL;
  SC__CHECK_NULL(mem);
  size_t s = 0, tb = 0, sb = 0, total = 0;
  sc_status st = sc__ws_plan(__func__, chain, max_batch, &s, &tb, &sb, &total);
  if (st) return st;
  if (bytes < total)
    return SC__FAIL(SC_ERR_NOMEM, "caller memory of %zu bytes is smaller than the %zu needed",
                    bytes, total);
  *out = sc__ws_place(mem, chain, max_batch, s, tb, sb);
  return SC_OK;
}

/* a thread count's range (sc_workspace_set_threads, sc_train's opts.threads) */
static inline sc_status sc__threads_check(const char *fn, int threads) {
  if (threads < 1 || threads > 1024)
    return sc__fail(SC_ERR_ARG, fn, "threads = %d, must be in [1, 1024]", threads);
  return SC_OK;
}

sc_status sc_workspace_set_threads(sc_workspace *ws, int threads) {
  SC__CHECK_NULL(ws);
  sc_status tst = sc__threads_check(__func__, threads);
  if (tst) return tst;
  if (ws->pool && ws->pool->nthreads == threads) return SC_OK;
  sc__pool_destroy(ws->pool);
  ws->pool = NULL;
  if (threads == 1) return SC_OK;
#if SC__THREADS
  return sc__pool_create(&ws->pool, threads);
#else
  return SC__FAIL(SC_ERR_UNSUPPORTED, "this build has no thread support (SC_NO_THREADS)");
#endif
}

sc_status sc_workspace_set_dropout(sc_workspace *ws, uint64_t seed, uint64_t step) {
  SC__CHECK_NULL(ws);
  ws->drop_seed = seed;
  ws->drop_step = step;
  return SC_OK;
}

void sc_workspace_destroy(sc_workspace *ws) {
  if (!ws) return;
  sc__pool_destroy(ws->pool);
  ws->pool = NULL;
  free(ws->prof_mem);
  ws->prof = ws->prof_mem = NULL;
  free(ws->bf_p);
  free(ws->bf_w);
  free(ws->bf_woff);
  free(ws->bf_scr);
  ws->bf_p = NULL;
  ws->bf_w = ws->bf_scr = NULL;
  ws->bf_woff = NULL;
  ws->bf_on = NULL;
  free(ws->owned);
}

/* ---------------------------------------------------------------- precision */
const char *sc_precision_name(sc_precision precision) {
  switch (precision) {
  case SC_PRECISION_FP32: return "fp32";
  case SC_PRECISION_BF16: return "bf16";
  case SC_PRECISION_BF16_EMULATED: return "bf16-emulated";
  }
  return NULL;
}

/* ---- the bf16 kernels: one GEMM on bf16 pairs (sc__bf16_gemm_fn) serves a dense layer's
 * (and, row by row, a conv layer's) forward (A: the weights paired along the inputs, B: the tile
 * paired along the inputs), dx (A: the weights paired along the outputs, B: dz paired along the
 * outputs) and dW (A: dz paired along the samples, B: the layer input paired along the samples,
 * accumulated into the slice's gradient). The model is portable code computing what vdpbf16ps
 * computes (Intel SDM: per pair, srcdest += hi * hi, then srcdest += lo * lo, "round to nearest
 * even ... when doing each accumulation of the FMA", denormal inputs read as zero and denormal
 * results flushed to zero); it runs on any CPU and is what the tests compare the AVX512_BF16
 * kernel with. Each step is an FMA (sc__bf16_fma: fmaf, one rounding): the product of two bf16 is
 * exact in float unless it overflows (or underflows), and there a product rounded first differs:
 * -3e38 + 3e38 x 2 is 3e38 on an AMD Zen 5's VDPBF16PS and by fmaf, infinite with the product
 * rounded, and 3e38 x 2 + (-3e38 x 2) is infinite against NaN (until session 38 the model rounded
 * each product, and a compiler contracting a * b + c into an FMA, as clang may, gave the other). */
static inline float sc__bf16_lo_f(uint32_t w) { return sc__fof(w << 16); }
static inline float sc__bf16_hi_f(uint32_t w) { return sc__fof(w & 0xffff0000u); }
static inline float sc__ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }
/* one step of the models: c + a b with one rounding, flushed to zero if denormal */
static inline float sc__bf16_fma(float c, float a, float b) { return sc__ftz(fmaf(a, b, c)); }

static void sc__bf16_gemm_model_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                     const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                     int acc, const size_t *arow, const size_t *crow, size_t grp,
                                     const size_t *brow) {
  (void)grp; /* row by row: one group after the other */
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float *cp = C + (crow ? crow[m] : m) * ldc;
      float c = acc ? sc__ftz(cp[n]) : 0.0f;
      const uint32_t *ar = A + (arow ? arow[m] : m) * lda;
      for (size_t k = 0; k < K2; k++) {
        uint32_t a = ar[k], b = B[(brow ? brow[k] : k) * ldb + n];
        c = sc__bf16_fma(c, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
        c = sc__bf16_fma(c, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
      }
      cp[n] = c;
    }
}
static void sc__bf16_gemm_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                int acc) {
  sc__bf16_gemm_model_rows(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, 0, NULL);
}
/* The dx of a stride-1 conv layer (C input channels, K2 pairs of output channels, kh x kw
 * taps, oh x ow outputs) as a correlation: each element of the (padded) input's gradient xg
 * (C x (oh + kh - 1) x (ow + kw - 1) positions of TW lanes, overwritten) is one sum over the
 * taps (i, j) whose output (y - i, x - j) exists, in the order i, j, then the pairs op, of
 * wt[(c kh + i) kw + j][op] (W^T's pairs, sc__bf16_params) times dzp[op][(y - i) ow + x - j]
 * (dz's channel pairs, sc__bf16_pack_rows over the whole tile). Each sum is made once, in
 * registers on the native kernel, instead of adding each output row's taps into xg (8 pairs
 * at a time for LeNet5's conv2). What vdpbf16ps computes, as sc__bf16_gemm_model. */
static void sc__bf16_dx_corr_model(float *restrict xg, const uint32_t *restrict wt,
                                   const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh,
                                   size_t kw, size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, npos = oh * ow;
  for (size_t c = 0; c < C; c++)
    for (size_t y = 0; y < hp; y++)
      for (size_t x = 0; x < wp; x++)
        for (size_t t = 0; t < SC__TW; t++) {
          float acc = 0.0f;
          for (size_t i = y >= oh ? y - oh + 1 : 0; i <= y && i < kh; i++)
            for (size_t j = x >= ow ? x - ow + 1 : 0; j <= x && j < kw; j++)
              for (size_t op = 0; op < K2; op++) {
                uint32_t a = wt[((c * kh + i) * kw + j) * K2 + op],
                         b = dzp[(op * npos + (y - i) * ow + x - j) * SC__TW + t];
                acc = sc__bf16_fma(acc, sc__bf16_hi_f(a), sc__bf16_hi_f(b));
                acc = sc__bf16_fma(acc, sc__bf16_lo_f(a), sc__bf16_lo_f(b));
              }
          xg[((c * hp + y) * wp + x) * SC__TW + t] = acc;
        }
}
/* sc__bf16_nt_fn's fold of 16 lanes: p[i] + p[i + 8], then + 4, + 2, + 1 (IEEE float adds) */
static float sc__bf16_fold16(const float *p) {
  float s8[8], s4[4], s2[2];
  for (int i = 0; i < 8; i++) s8[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; i++) s4[i] = s8[i] + s8[i + 4];
  for (int i = 0; i < 2; i++) s2[i] = s4[i] + s4[i + 2];
  return s2[0] + s2[1];
}
static void sc__bf16_nt_model(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                              const uint32_t *B, const size_t *boff, size_t bsc, size_t sb,
                              size_t M, size_t N, size_t K2, size_t S) {
  for (size_t m = 0; m < M; m++)
    for (size_t n = 0; n < N; n++) {
      float p[16] = {0};
      for (size_t s = 0; s < S; s++) {
        const uint32_t *a = A + m * lda + s * sa, *b = B + boff[n] * bsc + s * sb;
        for (size_t k = 0; k < K2; k++) {
          float *c = &p[k % 16];
          *c = sc__bf16_fma(*c, sc__bf16_hi_f(a[k]), sc__bf16_hi_f(b[k]));
          *c = sc__bf16_fma(*c, sc__bf16_lo_f(a[k]), sc__bf16_lo_f(b[k]));
        }
      }
      C[m * ldc + n] += sc__bf16_fold16(p);
    }
}

#if defined(__x86_64__) && ((defined(__clang__) && __clang_major__ >= 9) ||                        \
                            (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 10))
#define SC__HAVE_BF16_NATIVE 1
/* GCC at -O2 (the two drop-in files' `cc -O2`) leaves the register blocks' loops over their
 * accumulator arrays rolled, the accumulators on the stack: LeNet5's bf16 epoch (20,000 images,
 * 2 threads, Zen 5) took 0.57 s against the make build's 0.14 (conv2's forward at 84 GFLOP/s a
 * thread against 378). So these kernels are compiled at -O3 there too, as the portable kernels
 * are: 0.23 s, the trained parameters the same bits as at -O2 (and with clang).
 * SC_NO_O3_PRAGMA opts out. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) &&                           \
    !defined(__OPTIMIZE_SIZE__) && !defined(SC_NO_O3_PRAGMA)
#pragma GCC push_options
#pragma GCC optimize("O3")
#define SC__BF16_POP_OPTIONS 1
#endif
/* The AVX512_BF16 GEMM: blocks of up to 4 rows x 32 columns (8 accumulators), the 32-bit
 * pair of A broadcast, 16 pairs of B loaded per vector (masked at the column tail), one
 * vdpbf16ps per accumulator and k. The same sums in the same order as the model. With ep (a
 * forward's epilogue, sc__bf16_ep) each vector gets its bias, relu and rounding before its store:
 * LeNet5's conv1 forward 33.4 -> 30.0 ms over 20,000 images, 1 thread, Zen 4, medians of 5
 * (the two passes after the GEMM read and wrote its 442-KB output). The row loops are unrolled
 * (GCC unroll): with the epilogue in a loop that was not, GCC kept the accumulators on the stack
 * and the forward took twice as long. */
/* row r of the block's A and its place in C (the rows through arow / crow when given) */
#define SC__BF16_AROW(r) (A + (arow ? arow[m + (size_t)(r)] : m + (size_t)(r)) * lda)
#define SC__BF16_CROW(r) (C + (crow ? crow[m + (size_t)(r)] : m + (size_t)(r)) * ldc + n)
#define SC__BF16_ROWS(MB)                                                                          \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB];                                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cr) : _mm512_setzero_ps();                           \
      c1[r] = acc ? _mm512_maskz_loadu_ps(k1, cr + 16) : _mm512_setzero_ps();                      \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, bk);                                               \
      __m512i b1 = _mm512_maskz_loadu_epi32(k1, bk + 16);                                          \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_mask_storeu_ps(cr, k0, c0[r]);                                                        \
      _mm512_mask_storeu_ps(cr + 16, k1, c1[r]);                                                   \
    }                                                                                              \
  }
/* MB rows x 64 whole columns (4 accumulators a row): MB broadcasts and 4 loads feed 4 MB
 * products (2 MB with SC__BF16_ROWS); the same sums in the same order. (One macro for both,
 * over arrays of 2 or 4 accumulators and masks, made conv1's forward 29.0 -> 31-33 ms) */
#define SC__BF16_ROWS4(MB)                                                                         \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                         \
    const uint32_t *ar[MB];                                                                        \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      float *cr = SC__BF16_CROW(r);                                                                \
      c0[r] = acc ? _mm512_loadu_ps(cr) : _mm512_setzero_ps();                                     \
      c1[r] = acc ? _mm512_loadu_ps(cr + 16) : _mm512_setzero_ps();                                \
      c2[r] = acc ? _mm512_loadu_ps(cr + 32) : _mm512_setzero_ps();                                \
      c3[r] = acc ? _mm512_loadu_ps(cr + 48) : _mm512_setzero_ps();                                \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      const uint32_t *bk = B + (brow ? brow[k] : k) * ldb + n;                                     \
      __m512i b0 = _mm512_loadu_si512(bk), b1 = _mm512_loadu_si512(bk + 16);                       \
      __m512i b2 = _mm512_loadu_si512(bk + 32), b3 = _mm512_loadu_si512(bk + 48);                  \
      for (int r = 0; r < MB; r++) {                                                               \
        __m512i a = _mm512_set1_epi32((int)ar[r][k]);                                              \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)a);                                \
        c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)a);                                \
        c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)a);                                \
        c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)a);                                \
      }                                                                                            \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                         \
      float *cr = SC__BF16_CROW(r);                                                                \
      if (ep) {                                                                                    \
        c0[r] = sc__bf16_ep_v(c0[r], ep, m + (size_t)r);                                           \
        c1[r] = sc__bf16_ep_v(c1[r], ep, m + (size_t)r);                                           \
        c2[r] = sc__bf16_ep_v(c2[r], ep, m + (size_t)r);                                           \
        c3[r] = sc__bf16_ep_v(c3[r], ep, m + (size_t)r);                                           \
      }                                                                                            \
      _mm512_storeu_ps(cr, c0[r]);                                                                 \
      _mm512_storeu_ps(cr + 16, c1[r]);                                                            \
      _mm512_storeu_ps(cr + 32, c2[r]);                                                            \
      _mm512_storeu_ps(cr + 48, c3[r]);                                                            \
    }                                                                                              \
  }
/* the same for a last block of at most 16 columns: one accumulator per row */
#define SC__BF16_ROWS_H(MB)                                                                        \
  for (; m + MB <= M; m += MB) {                                                                   \
    __m512 c0[MB];                                                                                 \
    const uint32_t *ar[MB];                                                                        \
    float *cp[MB];                                                                                 \
    for (int r = 0; r < MB; r++) {                                                                 \
      ar[r] = SC__BF16_AROW(r);                                                                    \
      cp[r] = SC__BF16_CROW(r);                                                                    \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, cp[r]) : _mm512_setzero_ps();                        \
    }                                                                                              \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + (brow ? brow[k] : k) * ldb + n);               \
      for (int r = 0; r < MB; r++)                                                                 \
        c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)_mm512_set1_epi32((int)ar[r][k])); \
    }                                                                                              \
    _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++)                                           \
        _mm512_mask_storeu_ps(cp[r], k0, ep ? sc__bf16_ep_v(c0[r], ep, m + (size_t)r) : c0[r]);    \
  }
/* ROWS_H's block for A rows that come in runs of KW consecutive taps (a conv's dW^T, A's rows
 * the input's lane pairs at the taps, SC__TW / 2 pairs apart within a kernel row): 15 rows, 15 / KW
 * runs, each row's broadcast at a fixed distance from its run's start, so 15 accumulators need
 * 15 / KW pointers (ROWS_H's 8 rows take 8, and 16 such rows ran out of registers: 1.5x slower);
 * the same sums in the same order. Blocks whose rows are not such runs are left to ROWS_H. */
#define SC__BF16_RUNS_OK(KW)                                                                       \
  (arow && lda == SC__TW / 2 && m + 15 <= M && sc__bf16_runs(arow + m, KW, 15 / KW))
#define SC__BF16_ROWS_G(KW)                                                                        \
  for (; SC__BF16_RUNS_OK(KW); m += 15) {                                                          \
    enum { G_ = 15 / KW };                                                                         \
    __m512 c0[15];                                                                                 \
    const uint32_t *gp[G_];                                                                        \
    for (int g = 0; g < G_; g++) gp[g] = A + arow[m + (size_t)(g * KW)] * lda;                     \
    for (int r = 0; r < 15; r++)                                                                   \
      c0[r] = acc ? _mm512_maskz_loadu_ps(k0, SC__BF16_CROW(r)) : _mm512_setzero_ps();             \
    for (size_t k = 0; k < K2; k++) {                                                              \
      __m512i b0 = _mm512_maskz_loadu_epi32(k0, B + k * ldb + n);                                  \
      for (int g = 0; g < G_; g++)                                                                 \
        for (int j = 0; j < KW; j++)                                                               \
          c0[g * KW + j] =                                                                         \
              _mm512_dpbf16_ps(c0[g * KW + j], (__m512bh)b0,                                       \
                               (__m512bh)_mm512_set1_epi32((int)gp[g][j * (SC__TW / 2) + k]));     \
    }                                                                                              \
    _Pragma("GCC unroll 15") for (int r = 0; r < 15; r++)                                          \
        _mm512_mask_storeu_ps(SC__BF16_CROW(r), k0, c0[r]);                                        \
  }
/* whether rows[g KW + j] = rows[g KW] + j for all g < G, j < KW */
static inline int sc__bf16_runs(const size_t *rows, size_t KW, size_t G) {
  for (size_t g = 0; g < G; g++)
    for (size_t j = 1; j < KW; j++)
      if (rows[g * KW + j] != rows[g * KW] + j) return 0;
  return 1;
}
/* sc__bf16_ep's work on a vector of row m's C: the add, max and VCVTNEPS2BF16 of the passes */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline __m512
sc__bf16_ep_v(__m512 v, const sc__bf16_ep *ep, size_t m) {
  v = _mm512_add_ps(v, _mm512_set1_ps(ep->bias ? ep->bias[m] : 0.0f));
  if (ep->relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
  if (ep->round)
    v = _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v)), 16));
  return v;
}
/* sc__bf16_gemm_native_blk on N / 64 blocks of 64 whole columns: rows by 6 with 4 accumulators
 * each, then by 4 with 4 (LeNet5's conv2, 16 outputs: 6 + 6 + 4; its forward 48.3-49.0 ->
 * 44.4-44.7 ms per epoch-thread, Zen 5, against the last 4 by 4 with 2, twice), the last rows
 * (M % 6) by 4 and 1 with 2, twice; the same sums in the same order. Used
 * for the convs' forwards (with ep): LeNet5's conv1 (6 outputs, 13 pairs of taps, 320-column
 * chunks) spent as many loads (6 broadcasts, 2 of B) as products (12) a pair with 6 x 2
 * blocks; with 6 x 4 (10 loads, 24 products) its forward took 29.3 ms instead of 31.5 over
 * 20,000 images (1 thread, Zen 4, median of 3 alternating runs; conv2's 31.3 -> 30.9). Not for
 * the dense dW (acc, N = 256): its backward took 6 % longer */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_gemm_native_blk64(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                           size_t ldb, size_t M, size_t N, size_t K2, int acc, const size_t *arow,
                           const size_t *crow, const size_t *brow, const sc__bf16_ep *ep) {
  const __mmask16 k0 = 0xFFFFu, k1 = 0xFFFFu;
  for (size_t n0 = 0; n0 + 64 <= N; n0 += 64) {
    size_t n = n0, m = 0;
    SC__BF16_ROWS4(6)
    SC__BF16_ROWS4(4)
    size_t m6 = m;
    for (; n < n0 + 64; n += 32) {
      m = m6;
      SC__BF16_ROWS(4)
      SC__BF16_ROWS(1)
    }
  }
}
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_gemm_native_blk(float *C, size_t ldc, const uint32_t *A, size_t lda, const uint32_t *B,
                         size_t ldb, size_t M, size_t N, size_t K2, int acc, const size_t *arow,
                         const size_t *crow, const size_t *brow, const sc__bf16_ep *ep) {
  size_t n = 0;
  if (ep && N >= 64 && M >= 6) { /* a conv's forward: rows by 6, 64 columns at a time */
    sc__bf16_gemm_native_blk64(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, ep);
    n = N / 64 * 64;
  }
  for (; n < N; n += 32) {
    size_t w = N - n < 32 ? N - n : 32;
    __mmask16 k0 = (__mmask16)(w >= 16 ? 0xFFFFu : (1u << w) - 1u);
    __mmask16 k1 = (__mmask16)(w >= 32 ? 0xFFFFu : w > 16 ? (1u << (w - 16)) - 1u : 0u);
    size_t m = 0;
    if (w <= 16) {
      if (!ep && !brow) {
        SC__BF16_ROWS_G(5)
        SC__BF16_ROWS_G(3)
      }
      SC__BF16_ROWS_H(8)
      SC__BF16_ROWS_H(4)
      SC__BF16_ROWS_H(1)
      continue;
    }
    SC__BF16_ROWS(8)
    SC__BF16_ROWS(6)
    SC__BF16_ROWS(4)
    SC__BF16_ROWS(1)
  }
}
#undef SC__BF16_ROWS
#undef SC__BF16_AROW
#undef SC__BF16_CROW
#undef SC__BF16_ROWS4
#undef SC__BF16_ROWS_H
#undef SC__BF16_ROWS_G
#undef SC__BF16_RUNS_OK
/* sc__bf16_fold16 on a vector, the same adds in the same order */
__attribute__((target("avx512f"))) static inline float sc__bf16_fold16_v(__m512 v) {
  __m256 lo = _mm512_castps512_ps256(v);
  __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}
/* sc__bf16_nt_fn: blocks of MB rows x NB columns, one accumulator each */
#define SC__BF16_NT(MB, NB)                                                                        \
  for (; n + NB <= N; n += NB) {                                                                   \
    __m512 c[MB][NB];                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++) c[i][j] = _mm512_setzero_ps();                                  \
    for (size_t s = 0; s < S; s++) {                                                               \
      const uint32_t *bp[NB], *ap = A + m * lda + s * sa;                                          \
      for (int j = 0; j < NB; j++) bp[j] = B + boff[n + (size_t)j] * bsc + s * sb;                 \
      for (size_t k = 0; k < K2; k += 16) {                                                        \
        __m512i b[NB];                                                                             \
        for (int j = 0; j < NB; j++) b[j] = _mm512_loadu_si512(bp[j] + k);                         \
        for (int i = 0; i < MB; i++) {                                                             \
          __m512i a = _mm512_loadu_si512(ap + (size_t)i * lda + k);                                \
          for (int j = 0; j < NB; j++)                                                             \
            c[i][j] = _mm512_dpbf16_ps(c[i][j], (__m512bh)a, (__m512bh)b[j]);                      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int i = 0; i < MB; i++)                                                                   \
      for (int j = 0; j < NB; j++)                                                                 \
        C[(m + (size_t)i) * ldc + n + (size_t)j] += sc__bf16_fold16_v(c[i][j]);                    \
  }
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_nt_native(float *C, size_t ldc, const uint32_t *A, size_t lda, size_t sa,
                   const uint32_t *B, const size_t *boff, size_t bsc, size_t sb, size_t M, size_t N,
                   size_t K2, size_t S) {
  size_t m = 0;
  for (; m + 6 <= M; m += 6) {
    size_t n = 0;
    SC__BF16_NT(6, 4)
    SC__BF16_NT(6, 1)
  }
  for (; m + 2 <= M; m += 2) {
    size_t n = 0;
    SC__BF16_NT(2, 4)
    SC__BF16_NT(2, 1)
  }
  for (; m < M; m++) {
    size_t n = 0;
    SC__BF16_NT(1, 4)
    SC__BF16_NT(1, 1)
  }
}
#undef SC__BF16_NT
/* dW^T (R x K floats, ldc K; R = ic 5 5 taps in roff's order, K <= 16 channels) of a conv with
 * a 5 x 5 kernel, row stride 1 and at least 4 output rows, from the input tile's lane pairs xp
 * (ic x hp x wp positions of SC__TW / 2 pairs; hp = oh + 4) and dz's lane pairs transposed over
 * the whole tile (dzt: oh ow SC__TW / 2 rows of K): the sums of sc__bf16_gemm_native_rows called
 * row by row (dwt[r] += over the output rows u in order, over each row's lane pairs k in
 * order), in the same order: the same bits. Per input row y and lane pair k, the broadcasts of
 * its 5 taps' pairs (j) each feed the tap rows i whose output row y - i exists, from one load
 * of dz per such row (inside: 10 loads for 25 vdpbf16ps, the 25 accumulators held over the
 * whole tile) instead of one load of dz and 15 broadcasts for 15 (SC__BF16_ROWS_G, load-bound:
 * 81 % of twice the FMA peak). LeNet5's conv2 (Zen 5, 1 thread, --profile): its pullback 92-94 ->
 * 89.5 ms an epoch. */
#define SC__BF16_DWT5_K(I0, I1)                                                                    \
  for (size_t k = 0; k < RW2; k++) {                                                               \
    __m512i b[5];                                                                                  \
    _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) b[i] =                                  \
        _mm512_maskz_loadu_epi32(km, dzt + ((y - (size_t)i) * RW2 + k) * K);                       \
    _Pragma("GCC unroll 5") for (int j = 0; j < 5; j++) {                                          \
      __m512i a = _mm512_set1_epi32((int)xr[k + 16 * (size_t)j]);                                  \
      _Pragma("GCC unroll 5") for (int i = I0; i <= I1; i++) acc[i][j] =                           \
          _mm512_dpbf16_ps(acc[i][j], (__m512bh)b[i], (__m512bh)a);                                \
    }                                                                                              \
  }                                                                                                \
  break;
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dwt5_native(float *restrict dwt, const uint32_t *restrict xp, const uint32_t *restrict dzt,
                     size_t K, size_t ic, size_t hp, size_t wp, size_t oh, size_t ow) {
  const __mmask16 km = (__mmask16)(K >= 16 ? 0xFFFFu : (1u << K) - 1u);
  size_t RW2 = ow * (SC__TW / 2);
  for (size_t ci = 0; ci < ic; ci++) {
    __m512 acc[5][5];
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++) acc[i][j] = _mm512_setzero_ps();
    for (size_t y = 0; y < oh + 4; y++) {
      const uint32_t *xr = xp + (ci * hp + y) * wp * (SC__TW / 2);
      int i0 = y >= oh ? (int)(y - oh + 1) : 0, i1 = y < 4 ? (int)y : 4;
      switch (i0 * 8 + i1) { /* the tap rows i whose output row y - i exists */
      case 4: SC__BF16_DWT5_K(0, 4)
      case 0: SC__BF16_DWT5_K(0, 0)
      case 1: SC__BF16_DWT5_K(0, 1)
      case 2: SC__BF16_DWT5_K(0, 2)
      case 3: SC__BF16_DWT5_K(0, 3)
      case 12: SC__BF16_DWT5_K(1, 4)
      case 20: SC__BF16_DWT5_K(2, 4)
      case 28: SC__BF16_DWT5_K(3, 4)
      case 36: SC__BF16_DWT5_K(4, 4)
      default: break; /* (oh < 4 only; not called there) */
      }
    }
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 5; j++)
        _mm512_mask_storeu_ps(dwt + ((ci * 5 + (size_t)i) * 5 + (size_t)j) * K, km, acc[i][j]);
  }
}
#undef SC__BF16_DWT5_K
/* sc__bf16_dx_corr_model on AVX512_BF16: blocks of MB channels x one position (its 32 lanes),
 * 2 MB accumulators, then one store; where a row's positions x and x + 1 both take every tap
 * of the kernel's row (kw - 1 <= x <= ow - 2) and MB >= 4, both at once (4 MB accumulators, the
 * broadcasts shared; the 12 of MB = 6 were latency-bound): LeNet5's conv2 pullback 98.9-99.2 ->
 * 96.2-98.1 ms per epoch-thread (bf16, 2 threads, Zen 5). The same sums in the same order */
#define SC__BF16_DXC(MB)                                                                           \
  for (; c + MB <= C; c += MB)                                                                     \
    for (size_t y = 0; y < hp; y++) {                                                              \
      size_t i0 = y >= oh ? y - oh + 1 : 0, i1 = y < kh ? y + 1 : kh;                              \
      for (size_t x = 0; x < wp; x++) {                                                            \
        size_t j0 = x >= ow ? x - ow + 1 : 0, j1 = x < kw ? x + 1 : kw;                            \
        if (MB >= 4 && x + 1 >= kw && x + 2 <= ow) { /* x and x + 1: every tap of the row */       \
          __m512 c0[MB], c1[MB], c2[MB], c3[MB];                                                   \
          for (int r = 0; r < MB; r++) c0[r] = c1[r] = c2[r] = c3[r] = _mm512_setzero_ps();        \
          for (size_t i = i0; i < i1; i++)                                                         \
            for (size_t j = 0; j < kw; j++) {                                                      \
              const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                           \
              const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                               \
              for (size_t op = 0; op < K2; op++) {                                                 \
                __m512i b0 = _mm512_loadu_si512(b + op * ps);                                      \
                __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                 \
                __m512i b2 = _mm512_loadu_si512(b + op * ps + SC__TW);                             \
                __m512i b3 = _mm512_loadu_si512(b + op * ps + SC__TW + 16);                        \
                for (int r = 0; r < MB; r++) {                                                     \
                  __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                     \
                  c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                     \
                  c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                     \
                  c2[r] = _mm512_dpbf16_ps(c2[r], (__m512bh)b2, (__m512bh)av);                     \
                  c3[r] = _mm512_dpbf16_ps(c3[r], (__m512bh)b3, (__m512bh)av);                     \
                }                                                                                  \
              }                                                                                    \
            }                                                                                      \
          _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                   \
            float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                        \
            _mm512_storeu_ps(d, c0[r]);                                                            \
            _mm512_storeu_ps(d + 16, c1[r]);                                                       \
            _mm512_storeu_ps(d + SC__TW, c2[r]);                                                   \
            _mm512_storeu_ps(d + SC__TW + 16, c3[r]);                                              \
          }                                                                                        \
          x++;                                                                                     \
          continue;                                                                                \
        }                                                                                          \
        __m512 c0[MB], c1[MB];                                                                     \
        for (int r = 0; r < MB; r++) c0[r] = c1[r] = _mm512_setzero_ps();                          \
        for (size_t i = i0; i < i1; i++)                                                           \
          for (size_t j = j0; j < j1; j++) {                                                       \
            const uint32_t *b = dzp + ((y - i) * ow + x - j) * SC__TW;                             \
            const uint32_t *a = wt + ((c * kh + i) * kw + j) * K2;                                 \
            for (size_t op = 0; op < K2; op++) {                                                   \
              __m512i b0 = _mm512_loadu_si512(b + op * ps);                                        \
              __m512i b1 = _mm512_loadu_si512(b + op * ps + 16);                                   \
              for (int r = 0; r < MB; r++) {                                                       \
                __m512i av = _mm512_set1_epi32((int)a[(size_t)r * as + op]);                       \
                c0[r] = _mm512_dpbf16_ps(c0[r], (__m512bh)b0, (__m512bh)av);                       \
                c1[r] = _mm512_dpbf16_ps(c1[r], (__m512bh)b1, (__m512bh)av);                       \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        _Pragma("GCC unroll 8") for (int r = 0; r < MB; r++) {                                     \
          float *d = xg + (((c + (size_t)r) * hp + y) * wp + x) * SC__TW;                          \
          _mm512_storeu_ps(d, c0[r]);                                                              \
          _mm512_storeu_ps(d + 16, c1[r]);                                                         \
        }                                                                                          \
      }                                                                                            \
    }
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dx_corr_native(float *restrict xg, const uint32_t *restrict wt,
                        const uint32_t *restrict dzp, size_t C, size_t K2, size_t kh, size_t kw,
                        size_t oh, size_t ow) {
  size_t hp = oh + kh - 1, wp = ow + kw - 1, ps = oh * ow * SC__TW, as = kh * kw * K2, c = 0;
  SC__BF16_DXC(6)
  SC__BF16_DXC(4)
  SC__BF16_DXC(2)
  SC__BF16_DXC(1)
}
#undef SC__BF16_DXC
static void sc__bf16_gemm_native_rows(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                      const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                      int acc, const size_t *arow, const size_t *crow, size_t grp,
                                      const size_t *brow) {
  if (!crow || grp == 0 || grp >= M) {
    sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, arow, crow, brow, NULL);
    return;
  }
  for (size_t g0 = 0; g0 < M; g0 += grp) /* the groups one after the other (the model's order) */
    sc__bf16_gemm_native_blk(C, ldc, arow ? A : A + g0 * lda, lda, B, ldb,
                             M - g0 < grp ? M - g0 : grp, N, K2, acc, arow ? arow + g0 : NULL,
                             crow + g0, brow, NULL);
}
static void sc__bf16_gemm_native(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                 const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                 int acc) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, acc, NULL, NULL, NULL, NULL);
}
static void sc__bf16_gemm_native_ep(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                    const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                    const size_t *brow, const sc__bf16_ep *ep) {
  sc__bf16_gemm_native_blk(C, ldc, A, lda, B, ldb, M, N, K2, 0, NULL, NULL, brow, ep);
}
/* x[k] = x[k] rounded to bf16 (kept as a float) by VCVTNEPS2BF16: the bits of sc__bf16_rne
 * (checked on all 2^32 inputs on an AMD Zen 4: denormals to zeros of their sign, a NaN kept
 * quiet), 16 at a time, the tail masked. The SC_PRECISION_BF16 kernels' rounding where the
 * CPU has the instruction (ws->bf_round) */
__attribute__((target("avx512f,avx512bf16"))) static void sc__bf16_round_native(float *restrict x,
                                                                                size_t n) {
  for (size_t k = 0; k < n; k += 16) {
    __mmask16 m = (__mmask16)(n - k >= 16 ? 0xFFFFu : (1u << (n - k)) - 1u);
    __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + k));
    _mm512_mask_storeu_epi32(x + k, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}
/* the dz of a conv layer with few channels and no dx (the dot-product form's dW only): relu's
 * (or the identity's) pullback of d (K channels of npos positions of SC__TW lanes; relu: 0 where
 * a <= 0), its bias lanes summed into bl (K rows of SC__TW; NULL: no bias) and its lane pairs,
 * rounded by VCVTNEPS2BF16, in dzp (K rows of npos SC__TW / 2 pairs): in one pass the bits of
 * sc__act_bwd_lane, the rounding and pack_lanes, which each went over LeNet5's 442-KB conv1
 * gradient (d itself is left as it was: nothing reads it after). LeNet5's conv1 backward over
 * 20,000 images, 1 thread, Zen 4: 32.5 -> 25.4 ms */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_lanes_native(uint32_t *restrict dzp, const float *restrict d, float *restrict bl,
                         const float *restrict a, size_t K, size_t npos, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  for (size_t k = 0; k < K; k++) {
    const float *dk = d + k * npos * SC__TW, *ak = a + k * npos * SC__TW;
    uint32_t *zk = dzp + k * npos * (SC__TW / 2);
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t q = 0; q < npos; q++)
      for (int h = 0; h < SC__TW / 16; h++) {
        size_t e = q * SC__TW + 16 * (size_t)h;
        __m512 v = _mm512_loadu_ps(dk + e);
        if (relu)
          v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(_mm512_loadu_ps(ak + e), zero, _CMP_LE_OQ), v,
                                   zero);
        s[h] = _mm512_add_ps(s[h], v);
        _mm256_storeu_si256((__m256i *)(void *)(zk + e / 2), (__m256i)_mm512_cvtneps_pbh(v));
      }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* a 2 x 2 max-pool's pullback (sc__bf16_dz_pool_native, sc__bf16_dz_pool_hits_native), the end of
 * a step: v0, v1 the dz of a window row's two positions (y, 2 wc), (y, 2 wc + 1), lanes 16 h on;
 * added to the bias lanes' sum s, rounded, stored as floats (dzf) or as lane pairs (zk) */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_dz_pool_put(__m512 v0, __m512 v1, __m512 *s, float *restrict dzf, uint32_t *restrict zk,
                     size_t k, size_t npos, size_t y, size_t OW, size_t wc, int h) {
  *s = _mm512_add_ps(_mm512_add_ps(*s, v0), v1);
  __m256i r0 = (__m256i)_mm512_cvtneps_pbh(v0), r1 = (__m256i)_mm512_cvtneps_pbh(v1);
  if (dzf) {
    float *fq = dzf + k * npos * SC__TW + (y * OW + 2 * wc) * SC__TW + 16 * (size_t)h;
    _mm512_storeu_si512(fq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r0), 16));
    _mm512_storeu_si512(fq + SC__TW, _mm512_slli_epi32(_mm512_cvtepu16_epi32(r1), 16));
    return;
  }
  uint32_t *zq = zk + (y * OW + 2 * wc) * (SC__TW / 2) + 8 * (size_t)h;
  _mm256_storeu_si256((__m256i *)(void *)zq, r0);
  _mm256_storeu_si256((__m256i *)(void *)(zq + SC__TW / 2), r1);
}
/* the same with a 2 x 2 max-pooling layer above the conv folded in: g is the pool's dz (K
 * channels of OH / 2 x OW / 2 windows of SC__TW lanes), pa its output, x its input (the conv's
 * output, K x OH x OW positions, OH and OW even); the pool's pullback gives a position its
 * window's dz where x there is the window's first value equal to pa (in row-major order within
 * the window; NaN equals nothing) and 0 elsewhere, then as sc__bf16_dz_lanes_native:
 * vec_pool_bwd's bits without writing its dx (442 KB a tile in LeNet5). With dzf (dzp NULL) the
 * rounded dz goes there as floats instead (K x OH x OW positions of SC__TW lanes), for a conv
 * whose pullback packs it otherwise (LeNet5's conv2: dx and dW by rows) */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_pool_native(uint32_t *restrict dzp, float *restrict dzf, const float *restrict g,
                        const float *restrict pa, const float *restrict x, float *restrict bl,
                        size_t K, size_t OH, size_t OW, int relu) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, npos = OH * OW, RS = OW * SC__TW;
  for (size_t k = 0; k < K; k++) {
    const float *xk = x + k * npos * SC__TW, *gk = g + k * (npos / 4) * SC__TW;
    const float *ak = pa + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      const float *top = xk + (y & ~(size_t)1) * RS; /* the windows' first row */
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          size_t e0 = 2 * wc * SC__TW + 16 * (size_t)h; /* the window's left column */
          __m512 av = _mm512_loadu_ps(ak + ew), dv = _mm512_loadu_ps(gk + ew);
          __mmask16 t0 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0), av, _CMP_EQ_OQ);
          __mmask16 t1 = _mm512_cmp_ps_mask(_mm512_loadu_ps(top + e0 + SC__TW), av, _CMP_EQ_OQ);
          const float *r = xk + y * RS + e0;
          __m512 x0 = _mm512_loadu_ps(r), x1 = _mm512_loadu_ps(r + SC__TW);
          __mmask16 h0, h1; /* the hits of this row's two positions */
          if (y % 2 == 0) {
            h0 = t0;
            h1 = t1 & (__mmask16)~t0;
          } else {
            __mmask16 taken = t0 | t1;
            __mmask16 b0 = _mm512_cmp_ps_mask(x0, av, _CMP_EQ_OQ);
            h0 = b0 & (__mmask16)~taken;
            h1 = _mm512_cmp_ps_mask(x1, av, _CMP_EQ_OQ) & (__mmask16) ~(taken | b0);
          }
          __m512 v0 = _mm512_maskz_mov_ps(h0, dv), v1 = _mm512_maskz_mov_ps(h1, dv);
          if (relu) {
            v0 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x0, zero, _CMP_LE_OQ), v0, zero);
            v1 = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x1, zero, _CMP_LE_OQ), v1, zero);
          }
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* A conv's forward with the 2 x 2 max-pooling layer above it folded in (bf_on's forward, its
 * epilogue, then this on each pair of output rows, which the GEMM left in a 2-row scratch s2: K
 * channels x 2 rows x 2 PW positions of SC__TW lanes): the windows [w0, w1) of pooled row q of
 * pa (K x PH x PW) as vec_pool_fwd computes them (m = x0, then m = x > m ? x : m over the window
 * in row-major order; VMAXPS(x, m) is that select), and the window's hits: per window and lane
 * a byte (SC__POOL_HITS: 16 bytes per 16 lanes), the window's position (0-3, row-major) whose
 * value is the first equal to the maximum (NaN equals nothing), 4 where none is or where, with
 * relu, the maximum is <= 0 (its relu pullback is 0). The conv's output is then never stored
 * whole (442 KB a tile in LeNet5), the pool's forward pass is skipped and its pullback reads the
 * hits (sc__bf16_dz_pool_hits_native): the same bits. The hits are made by masked moves in
 * vector registers (until session 36 four 16-bit masks per window, made in general registers);
 * with relu since session 38 in 16-bit lanes, a window's 32 lanes at once
 * (sc__bf16_pool_hits32: LeNet5 bf16's conv1 forward 37.4 -> 33.5 ms an epoch, conv2's 38.8 ->
 * 37.7, Zen 5, 1 thread, 2 alternating pairs; the same bits).
 * With relu the GEMM's epilogue adds the bias alone (sc__bf16_ep's relu and round 0: s2 holds
 * the sums plus the bias) and this relu's and rounds the window's maximum M only: r =
 * round(relu(M)), both non-decreasing, so r is the maximum of the relu'd rounded values (and its
 * bits: no sum is -0, a sum starting from +0); position j is then a hit where x_j >= lo, the least
 * float rounding to r (r's bits - 0x8000, + 1 where r's last bf16 bit is odd: ties to even; at
 * least FLT_MIN, VCVTNEPS2BF16 taking denormals to 0; a NaN where r is one, which no compare
 * passes), which are the positions whose rounded value equals r: the same hits. Both changes
 * (session 36, Zen 5, 1 thread, Fashion-MNIST): LeNet5 bf16's conv1 forward 45.7 -> 39.3 ms an
 * epoch, conv2's 43.0 -> 40.7; one tile of conv1 alone, operands hot: 18.9 -> 16.0 us. */
#define SC__POOL_HITS(k, PH, q, PW, wc, h) /* the window's 16 lanes' bytes */                      \
  (((((k) * (PH) + (q)) * (PW) + (wc)) * (SC__TW / 16) + (size_t)(h)) * 16)
/* one window's 16 lanes (h) of sc__bf16_pool_hits_native in float lanes */
__attribute__((target("avx512f,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits16(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW, size_t wc,
                     int h, int relu) {
  const __m512 zero = _mm512_setzero_ps(), fmin = _mm512_set1_ps(FLT_MIN);
  const __m512i half = _mm512_set1_epi32(0x8000), one = _mm512_set1_epi32(1);
  const __m512i none = _mm512_set1_epi32(4), p3 = _mm512_set1_epi32(3);
  const __m512i p2 = _mm512_set1_epi32(2), p0 = _mm512_setzero_si512();
  size_t e = 2 * wc * SC__TW + 16 * (size_t)h;
  __m512 x0 = _mm512_loadu_ps(r0 + e), x1 = _mm512_loadu_ps(r0 + e + SC__TW);
  __m512 x2 = _mm512_loadu_ps(r1 + e), x3 = _mm512_loadu_ps(r1 + e + SC__TW);
  __m512 m = _mm512_max_ps(x3, _mm512_max_ps(x2, _mm512_max_ps(x1, x0)));
  __mmask16 t0, t1, t2, t3; /* the positions equal to the maximum (rounded) */
  if (relu) {
    __m512i rb = _mm512_slli_epi32(
        _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_max_ps(zero, m))), 16);
    m = _mm512_castsi512_ps(rb);
    __m512i lb =
        _mm512_ternarylogic_epi32(_mm512_sub_epi32(rb, half), _mm512_srli_epi32(rb, 16), one, 0xF8);
    __m512 lo = _mm512_max_ps(fmin, _mm512_castsi512_ps(lb)); /* lb: (rb - half) | odd */
    __mmask16 live = _mm512_cmp_ps_mask(m, zero, _CMP_NLE_UQ);
    t0 = _mm512_mask_cmp_ps_mask(live, x0, lo, _CMP_GE_OQ);
    t1 = _mm512_mask_cmp_ps_mask(live, x1, lo, _CMP_GE_OQ);
    t2 = _mm512_mask_cmp_ps_mask(live, x2, lo, _CMP_GE_OQ);
    t3 = _mm512_mask_cmp_ps_mask(live, x3, lo, _CMP_GE_OQ);
  } else {
    t0 = _mm512_cmp_ps_mask(x0, m, _CMP_EQ_OQ), t1 = _mm512_cmp_ps_mask(x1, m, _CMP_EQ_OQ);
    t2 = _mm512_cmp_ps_mask(x2, m, _CMP_EQ_OQ), t3 = _mm512_cmp_ps_mask(x3, m, _CMP_EQ_OQ);
  }
  __m512i ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(none, t3, p3), t2, p2);
  ix = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(ix, t1, one), t0, p0);
  _mm512_storeu_ps(pa + ((k * PH + q) * PW + wc) * SC__TW + 16 * (size_t)h, m);
  _mm_storeu_si128((__m128i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, h)),
                   _mm512_cvtepi32_epi8(ix));
}
/* with relu, a window's 32 lanes at once in 16-bit lanes: each position's sums rounded
 * (VCVTNE2PS2BF16), r = the signed 16-bit maximum of the four and 0 (a bf16 value >= 0 orders as
 * its bits, a negative one below every such: the max is round(relu(max)), rounding being
 * non-decreasing), the hits the first position whose rounded sum equals r where r > 0; the
 * same bits as sc__bf16_pool_hits16 (the rounded values equal to r are those >= its least
 * float). A NaN sum (a positive NaN anywhere makes r one, a negative one counts at position 0)
 * takes that window to the float lanes, whose compares give vec_pool_fwd's result */
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits32(float *restrict pa, uint8_t *restrict hits, const float *restrict r0,
                     const float *restrict r1, size_t k, size_t q, size_t PH, size_t PW,
                     size_t wc) {
  const __m512i z = _mm512_setzero_si512(), none = _mm512_set1_epi16(4);
  size_t e = 2 * wc * SC__TW;
  const float *s[4] = {r0 + e, r0 + e + SC__TW, r1 + e, r1 + e + SC__TW};
  __m512i R[4];
  for (int j = 0; j < 4; j++)
    R[j] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(s[j] + 16), _mm512_loadu_ps(s[j]));
  __m512i r = _mm512_max_epi16(_mm512_max_epi16(R[0], R[1]), _mm512_max_epi16(R[2], R[3]));
  r = _mm512_max_epi16(r, z);
  if (_mm512_cmpgt_epi16_mask(r, _mm512_set1_epi16(0x7f80)) |
      _mm512_cmpgt_epu16_mask(R[0], _mm512_set1_epi16((short)0xff80))) {
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 0, 1);
    sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, 1, 1);
    return;
  }
  __mmask32 live = _mm512_cmpgt_epi16_mask(r, z);
  __m512i ix = _mm512_mask_mov_epi16(none, _mm512_mask_cmpeq_epi16_mask(live, R[3], r),
                                     _mm512_set1_epi16(3));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[2], r), _mm512_set1_epi16(2));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[1], r), _mm512_set1_epi16(1));
  ix = _mm512_mask_mov_epi16(ix, _mm512_mask_cmpeq_epi16_mask(live, R[0], r), z);
  float *pq = pa + ((k * PH + q) * PW + wc) * SC__TW;
  _mm512_storeu_si512(pq, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(r)), 16));
  _mm512_storeu_si512(
      pq + 16, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(r, 1)), 16));
  _mm256_storeu_si256((__m256i *)(void *)(hits + SC__POOL_HITS(k, PH, q, PW, wc, 0)),
                      _mm512_cvtepi16_epi8(ix));
}
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) static inline void
sc__bf16_pool_hits_body(float *restrict pa, uint8_t *restrict hits, const float *restrict s2,
                        size_t K, size_t q, size_t PH, size_t PW, size_t w0, size_t w1, int relu) {
  size_t RS = 2 * PW * SC__TW; /* a row of s2 */
  for (size_t k = 0; k < K; k++) {
    const float *r0 = s2 + k * 2 * RS, *r1 = r0 + RS;
    for (size_t wc = w0; wc < w1; wc++) {
      if (relu && SC__TW == 32) {
        sc__bf16_pool_hits32(pa, hits, r0, r1, k, q, PH, PW, wc);
        continue;
      }
      for (int h = 0; h < SC__TW / 16; h++)
        sc__bf16_pool_hits16(pa, hits, r0, r1, k, q, PH, PW, wc, h, relu);
    }
  }
}
/* s2 as the GEMM left it: with relu its sums plus the bias, else rounded (the whole epilogue) */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void
sc__bf16_pool_hits_native(float *restrict pa, uint8_t *restrict hits, const float *restrict s2,
                          size_t K, size_t q, size_t PH, size_t PW, size_t w0, size_t w1,
                          int relu) {
  if (relu)
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 1);
  else
    sc__bf16_pool_hits_body(pa, hits, s2, K, q, PH, PW, w0, w1, 0);
}
/* sc__bf16_dz_pool_native's pullback with the window's hits read from the bytes of
 * sc__bf16_pool_hits_native (relu folded in there): the same adds in the same order, so the same
 * bits, without reading the conv's output and the pool's */
__attribute__((target("avx512f,avx512bf16"))) static void
sc__bf16_dz_pool_hits_native(uint32_t *restrict dzp, float *restrict dzf, const float *restrict g,
                             const uint8_t *restrict hits, float *restrict bl, size_t K, size_t OH,
                             size_t OW) {
  const __m512 zero = _mm512_setzero_ps();
  size_t PW = OW / 2, PH = OH / 2, npos = OH * OW;
  for (size_t k = 0; k < K; k++) {
    const float *gk = g + k * (npos / 4) * SC__TW;
    uint32_t *zk = dzp ? dzp + k * npos * (SC__TW / 2) : NULL;
    __m512 s[SC__TW / 16];
    for (int h = 0; h < SC__TW / 16; h++)
      s[h] = bl ? _mm512_loadu_ps(bl + k * SC__TW + 16 * h) : zero;
    for (size_t y = 0; y < OH; y++) {
      __m512i j0 = _mm512_set1_epi32(y % 2 ? 2 : 0), j1 = _mm512_set1_epi32(y % 2 ? 3 : 1);
      for (size_t wc = 0; wc < PW; wc++)
        for (int h = 0; h < SC__TW / 16; h++) {
          size_t ew = ((y / 2) * PW + wc) * SC__TW + 16 * (size_t)h;
          __m512i ix = _mm512_cvtepu8_epi32(_mm_loadu_si128(
              (const __m128i *)(const void *)(hits + SC__POOL_HITS(k, PH, y / 2, PW, wc, h))));
          __m512 dv = _mm512_loadu_ps(gk + ew);
          __m512 v0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j0), dv);
          __m512 v1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(ix, j1), dv);
          sc__bf16_dz_pool_put(v0, v1, &s[h], dzf, zk, k, npos, y, OW, wc, h);
        }
    }
    if (bl)
      for (int h = 0; h < SC__TW / 16; h++) _mm512_storeu_ps(bl + k * SC__TW + 16 * h, s[h]);
  }
}
/* W's 16 (lm) floats at a and at b (NULL: zeros) as pairs (a[k], b[k]): their upper halves, or
 * with rnd the floats rounded first (VCVTNEPS2BF16, the bits of sc__bf16_round_native) */
__attribute__((target("avx512f,avx512vl,avx512bf16"), always_inline)) static inline __m512i
sc__bf16_wd_pairs(const float *a, const float *b, __mmask16 lm, int rnd) {
  if (rnd) {
    __m512i x = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, a)));
    if (!b) return x;
    __m512i y = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, b)));
    return _mm512_or_si512(x, _mm512_slli_epi32(y, 16));
  }
  __m512i x = _mm512_srli_epi32(_mm512_maskz_loadu_epi32(lm, a), 16);
  if (!b) return x;
  __m512i y = _mm512_maskz_loadu_epi32(lm, b);
  return _mm512_or_si512(x, _mm512_and_si512(y, _mm512_set1_epi32((int)0xffff0000u)));
}
/* a dense layer's rows [o0, o1) of W (O x I floats, not rounded) as the forward's pairs along
 * the inputs, wf[o][k] = (W[o][2k], W[o][2k + 1]) rounded (VCVTNEPS2BF16; an odd I's last pair
 * with 0): the bits of rounding W and pairing its upper halves (sc__bf16_params_rows) */
__attribute__((target("avx512f,avx512vl,avx512bf16"))) static void
sc__bf16_wf_native(uint32_t *restrict wf, const float *restrict W, size_t I, size_t o0, size_t o1) {
  size_t I2 = (I + 1) / 2;
  for (size_t o = o0; o < o1; o++)
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m256i v = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lm, W + o * I + i));
      _mm256_mask_storeu_epi32(wf + o * I2 + i / 2, (__mmask8)((1u << ((ib + 1) / 2)) - 1u), v);
    }
}
/* wd[i][m] = (W[2m][i], W[2m + 1][i]) for the pairs m in [m0, m1) and every input i < I: the
 * transposed pairs of sc__bf16_params_rows, W holding bf16 values (the upper halves of their
 * bits taken as they are; a missing odd row 2m + 1 = O gives 0), or with rnd any floats, rounded
 * as they are loaded. Blocks of 8 pairs (16 rows) x 16 inputs: 8 vectors of pairs along i,
 * transposed in registers into 16 rows of 8 pairs. The same bits as the scalar loop, which took 5
 * of the 10 ms that LeNet5's bf16 weights cost over 20,000 images (1 thread, Zen 4) */
__attribute__((target("avx512f,avx512vl,avx512bf16"))) static void
sc__bf16_wd_native(uint32_t *restrict wd, const float *restrict W, size_t O, size_t I, size_t O2,
                   size_t m0, size_t m1, int rnd) {
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i hi = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (size_t m = m0; m < m1; m += 8) {
    size_t mb = m1 - m < 8 ? m1 - m : 8;
    __mmask8 sm = (__mmask8)((1u << mb) - 1u);
    for (size_t i = 0; i < I; i += 16) {
      size_t ib = I - i < 16 ? I - i : 16;
      __mmask16 lm = (__mmask16)(ib == 16 ? 0xFFFFu : (1u << ib) - 1u);
      __m512i P[8];
      for (size_t j = 0; j < 8; j++) {
        size_t r = 2 * (m + j);
        if (j >= mb) {
          P[j] = _mm512_setzero_si512();
          continue;
        }
        P[j] =
            rnd ? sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 1)
                : sc__bf16_wd_pairs(W + r * I + i, r + 1 < O ? W + (r + 1) * I + i : NULL, lm, 0);
      }
      /* 128-bit lane L of U[a] holds P0..3 at input 4L + a, of V[a] P4..7 */
      __m512i T[8], U[4], V[4];
      for (int q = 0; q < 4; q++) {
        T[2 * q] = _mm512_unpacklo_epi32(P[2 * q], P[2 * q + 1]);
        T[2 * q + 1] = _mm512_unpackhi_epi32(P[2 * q], P[2 * q + 1]);
      }
      U[0] = _mm512_unpacklo_epi64(T[0], T[2]);
      U[1] = _mm512_unpackhi_epi64(T[0], T[2]);
      U[2] = _mm512_unpacklo_epi64(T[1], T[3]);
      U[3] = _mm512_unpackhi_epi64(T[1], T[3]);
      V[0] = _mm512_unpacklo_epi64(T[4], T[6]);
      V[1] = _mm512_unpackhi_epi64(T[4], T[6]);
      V[2] = _mm512_unpacklo_epi64(T[5], T[7]);
      V[3] = _mm512_unpackhi_epi64(T[5], T[7]);
      for (size_t a = 0; a < 4; a++) { /* inputs a, 4 + a (lo) and 8 + a, 12 + a (hi) */
        __m512i x = _mm512_permutex2var_epi64(U[a], lo, V[a]);
        __m512i y = _mm512_permutex2var_epi64(U[a], hi, V[a]);
        __m256i o[4] = {_mm512_castsi512_si256(x), _mm512_extracti64x4_epi64(x, 1),
                        _mm512_castsi512_si256(y), _mm512_extracti64x4_epi64(y, 1)};
        for (size_t h = 0; h < 4; h++)
          if (a + 4 * h < ib) _mm256_mask_storeu_epi32(wd + (i + a + 4 * h) * O2 + m, sm, o[h]);
      }
    }
  }
}
#ifdef SC__BF16_POP_OPTIONS
#pragma GCC pop_options
#undef SC__BF16_POP_OPTIONS
#endif
#endif

/* ---- the AMX-BF16 GEMM (Intel: 8 tile registers of up to 16 rows x 64 bytes, each tile's
 * shape set by LDTILECFG; TDPBF16PS C += A B with A rows x kc pairs, B kc x cols pairs, C rows x
 * cols floats). The operand layouts are ours already: a row of A holds pairs along k, a row of
 * B holds the pairs of k for 16 columns (Intel's "VNNI" layout of B). Blocks of 16 x 32 of C in
 * two tiles (tmm0, 1), k in steps of 16 pairs: A in tmm2, B in tmm3 and 4; the last k-step of
 * fewer than 16 pairs in tmm5 (A), tmm6 and 7 (B). The tiles are configured to the block's own
 * shape (rows of C at M's edge, columns at N's, pairs at K's), so an edge is read and written in
 * place, never through a padded copy: measured on an Intel Xeon with AMX (session 17,
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
typedef struct {
  uint32_t t[8][16][16];
  unsigned rows[8], cols[8]; /* the configured shape (cols in 32-bit words) */
} sc__amx_tiles;             /* the portable model's tile registers */
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
/* the model: LDTILECFG (the shapes; every tile zeroed), TILELOADD / TILESTORED (the configured
 * rows and columns; a load zeroes the rest), TILEZERO and TDPBF16PS; a shape TDPBF16PS would
 * refuse (#UD) makes C all NaN, so that a test fails */
static inline void sc__amx_m_cfg(sc__amx_tiles *T, const sc__amx_cfg *c) {
  memset(T->t, 0, sizeof T->t);
  for (int t = 0; t < 8; t++) T->rows[t] = c->rows[t], T->cols[t] = c->colsb[t] / 4u;
}
static inline void sc__amx_m_load(sc__amx_tiles *T, int t, const void *p, size_t stride) {
  memset(T->t[t], 0, sizeof T->t[t]);
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy(T->t[t][r], (const char *)p + (size_t)r * stride, 4 * T->cols[t]);
}
static inline void sc__amx_m_store(const sc__amx_tiles *T, int t, void *p, size_t stride) {
  for (unsigned r = 0; r < T->rows[t]; r++)
    memcpy((char *)p + (size_t)r * stride, T->t[t][r], 4 * T->cols[t]);
}
static inline void sc__amx_m_dp(sc__amx_tiles *T, int c, int a, int b) {
  if (!T->rows[c] || T->rows[a] != T->rows[c] || T->cols[b] != T->cols[c] ||
      T->rows[b] != T->cols[a] || !T->cols[a]) {
    for (int m = 0; m < 16; m++)
      for (int n = 0; n < 16; n++) T->t[c][m][n] = 0x7FC00000u;
    return;
  }
  for (unsigned m = 0; m < T->rows[c]; m++)
    for (unsigned n = 0; n < T->cols[c]; n++) {
      float acc = sc__ftz(sc__fof(T->t[c][m][n]));
      for (unsigned k = 0; k < T->cols[a]; k++) {
        uint32_t x = T->t[a][m][k], y = T->t[b][k][n];
        acc = sc__bf16_fma(acc, sc__bf16_lo_f(x), sc__bf16_lo_f(y));
        acc = sc__bf16_fma(acc, sc__bf16_hi_f(x), sc__bf16_hi_f(y));
      }
      T->t[c][m][n] = sc__fbits(acc);
    }
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

/* the portable model of the AMX GEMM (SC_BF16_KERNELS=amx-model: any CPU, slow) */
#define SC__TM_CFG(c) sc__amx_m_cfg(&T, c)
#define SC__TM_ZERO(i) memset(T.t[i], 0, sizeof T.t[i])
#define SC__TM_LOAD(t, p, s) sc__amx_m_load(&T, t, p, s)
#define SC__TM_STORE(t, p, s) sc__amx_m_store(&T, t, p, s)
#define SC__TM_DP(c, a, b) sc__amx_m_dp(&T, c, a, b)
#define SC__TM_RELEASE() (void)0
/* the grouped form (sc__bf16_gemm_grp_fn): one configuration for all the groups */
static void sc__bf16_gemm_amx_model_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0,
                                        size_t lda, sc__grp_off ao, const uint32_t *B, size_t ldb,
                                        size_t M, size_t N, size_t K2, size_t G, int acc) {
  static _Thread_local sc__amx_tiles T; /* 8 KB: off the stack */
  SC__AMX_GEMM_BODY(SC__TM)
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
static void sc__bf16_gemm_amx_model_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda,
                                         sc__grp_off ao, const uint32_t *B0, size_t ldb,
                                         sc__grp_off bo, size_t M, size_t N, size_t K2, size_t G) {
  static _Thread_local sc__amx_tiles T;
  SC__AMX_SUMG_BODY(SC__TM)
}
static void sc__bf16_gemm_amx_model(float *C, size_t ldc, const uint32_t *A, size_t lda,
                                    const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                                    int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_model_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}

#if defined(__x86_64__) && defined(__linux__) &&                                                   \
    ((defined(__clang__) && __clang_major__ >= 12) ||                                              \
     (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#define SC__HAVE_AMX 1
#include <sys/syscall.h>
/* the AMX GEMM itself (SC_BF16_KERNELS=amx, on a CPU with AMX-BF16); written from Intel's
 * documentation, checked through the model above and run on an Intel Emerald Rapids (session 17) */
#define SC__TH_CFG(c) _tile_loadconfig(c)
#define SC__TH_ZERO(t) _tile_zero(t)
#define SC__TH_LOAD(t, p, s) _tile_loadd(t, p, (long)(s))
#define SC__TH_STORE(t, p, s) _tile_stored(t, p, (long)(s))
#define SC__TH_DP(c, a, b) _tile_dpbf16ps(c, a, b)
#define SC__TH_RELEASE() _tile_release()
__attribute__((target("amx-tile,amx-bf16"))) static void
sc__bf16_gemm_amx_grp(float *C0, size_t ldc, sc__grp_off co, const uint32_t *A0, size_t lda,
                      sc__grp_off ao, const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                      size_t G, int acc) {
  SC__AMX_GEMM_BODY(SC__TH)
}
__attribute__((target("amx-tile,amx-bf16"))) static void
sc__bf16_gemm_amx_sumg(float *C, size_t ldc, const uint32_t *A0, size_t lda, sc__grp_off ao,
                       const uint32_t *B0, size_t ldb, sc__grp_off bo, size_t M, size_t N,
                       size_t K2, size_t G) {
  SC__AMX_SUMG_BODY(SC__TH)
}
static void sc__bf16_gemm_amx(float *C, size_t ldc, const uint32_t *A, size_t lda,
                              const uint32_t *B, size_t ldb, size_t M, size_t N, size_t K2,
                              int acc) {
  const sc__grp_off one = {NULL, 0, 0, 0};
  sc__bf16_gemm_amx_grp(C, ldc, one, A, lda, one, B, ldb, M, N, K2, 1, acc);
}

/* AMX-BF16 usable here: the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7 subleaf 0, EDX bits 24
 * and 22), the OS enables the tile state (XCR0 bits 17 and 18), and Linux grants this process
 * the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; asking again is
 * harmless) */
static int sc__cpu_amx(void) {
  unsigned r[4];
  sc__cpuid(0, 0, r);
  if (r[0] < 7) return 0;
  sc__cpuid(1, 0, r);
  if (!((r[2] >> 27) & 1u)) return 0; /* OSXSAVE: xgetbv usable */
  sc__cpuid(7, 0, r);
  if (!((r[3] >> 24) & 1u) || !((r[3] >> 22) & 1u)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
  if ((lo & (3u << 17)) != (3u << 17)) return 0;
  return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
}
#endif
#undef SC__AMX_GEMM_BODY
#undef SC__AMX_SUMG_BODY
#undef SC__AMX_BLOCK_CFG
#undef SC__AMX_KSTEPS

/* AVX512_BF16 usable here: the CPU has it (CPUID leaf 7 subleaf 1, EAX bit 5) and the OS
 * saves the AVX-512 state (what __builtin_cpu_supports("avx512f") checks) */
static int sc__cpu_bf16(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  unsigned r[4];
  __builtin_cpu_init(); /* (every CPU with AVX512_BF16 has BW and VL, which its kernels use) */
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl"))
    return 0;
  sc__cpuid(0, 0, r);
  if (r[0] < 7) return 0;
  sc__cpuid(7, 1, r);
  return (r[0] >> 5) & 1u;
#else
  return 0;
#endif
}

/* SC_PRECISION_BF16 runs a conv layer's pullback (dW, dx) on the bf16 GEMM only from this many
 * output channels on (SC_BF16_LAYERS=auto, the default; =all: every conv layer), unless its dW
 * has the dot form (sc__bf16_nt_fn: the AVX512_BF16 kernels and their model, stride 1); its
 * forward always. A conv layer is a GEMM on its taps packed per output row (im2col): each
 * packed pair feeds 2 K multiply-adds, so the packing costs the more, the fewer channels K, and
 * dW's packing (a transpose) the most. Measured on an AMD Zen 4 with AVX512_BF16 (LeNet5,
 * Fashion-MNIST, 12,800 images, batch 64, 1 thread; bench/RESULTS.md, session 16): the first
 * conv (K = 6) took 26.3 ms forward and 35.4 ms backward in float on rounded operands, 21.9
 * and 46.5 ms on the im2col GEMM, and 26.5 ms backward in the dot form. Below K, without the
 * dot form, the float kernels run the pullback, on the same bf16 operands (products exact in
 * float, float sums: the emulation's arithmetic). */
#define SC__BF16_MIN_K 8

/* the bf16 kernels' buffers: the packed dense and conv weights (both pairings) and each
 * slice's packed tile operands (the largest of a layer's forward, dW and dx needs) */
static sc_status sc__bf16_buffers(sc_workspace *ws, const char *fn) {
  const sc_chain *c = ws->chain;
  size_t L = c->nlayers, words = 0, scr = 0;
  int ok = 1;
  size_t *off = malloc((L ? L : 1) * (sizeof *off + 1)); /* and the bf_on flags after them */
  if (!off) return sc__fail(SC_ERR_NOMEM, fn, "out of memory for the bf16 weight offsets");
  for (size_t l = 0; l < L; l++) {
    const sc__lplan *P = &c->L[l];
    off[l] = SIZE_MAX;
    int conv = P->spec.kind == SC_LAYER_CONV2D;
    if (P->spec.kind != SC_LAYER_DENSE && !conv) continue;
    /* a conv layer is a dense one (K outputs, R inputs) over the lanes of an output row */
    size_t I = conv ? P->R : P->in, O = conv ? P->oc : P->out, I2 = (I + 1) / 2, O2 = (O + 1) / 2;
    size_t n = conv ? sc__mul(P->ow, SC__TW, &ok) : SC__TW;
    off[l] = words;
    words = sc__add(words, sc__add(sc__mul(O, I2, &ok), sc__mul(I, O2, &ok), &ok), &ok);
    if (conv) /* and the direct forward's pairs of neighbouring taps: at most R per channel */
      words = sc__add(words, sc__mul(O, I, &ok), &ok);
    if (conv) /* AMX: the dx's permuted rows (I O2) and the channel-pair weights (at most O I) */
      words = sc__add(words, sc__add(sc__mul(I, O2, &ok), sc__mul(O, I, &ok), &ok), &ok);
    size_t f = sc__mul(I2, n, &ok);
    if (conv) { /* the direct forward's column pairs of the input tile, and its single columns */
      size_t q = sc__mul(sc__mul(2 * P->ic, P->hp, &ok), sc__mul(P->wp, SC__TW, &ok), &ok);
      if (q > f) f = q;
    }
    size_t b = sc__add(sc__mul(O, n / 2, &ok), sc__mul(n / 2, I, &ok), &ok);
    size_t d = sc__mul(O2, n, &ok);
    if (conv) d = sc__add(d, sc__mul(I, n, &ok), &ok); /* and the taps' float gradients */
    if (conv) { /* or dz's channel pairs over the whole tile (dx as a correlation) */
      size_t e = sc__mul(sc__mul(O2, P->oh, &ok), n, &ok);
      if (e > d) d = e;
    }
    if (conv) { /* dW^T (R x K floats), dz^T, the tile's lane pairs; or dz's pairs (dot form) */
      size_t xw = sc__mul(sc__mul(P->ic, P->hp, &ok), P->wp * (SC__TW / 2), &ok);
      size_t t = sc__add(sc__mul(I, O, &ok), sc__mul(n / 2, O, &ok), &ok);
      t = sc__add(t, xw, &ok);
      if (t > b) b = t;
      t = sc__add(sc__mul(sc__mul(O, P->oh, &ok), n / 2, &ok), xw, &ok);
      if (t > b) b = t;
      t = sc__add(t, sc__mul(I, O, &ok), &ok); /* dW^T, dz^T of the whole tile, lane pairs */
      if (t > b) b = t;
    }
    size_t m = f > b ? f : b;
    if (d > m) m = d;
    if (m > scr) scr = m;
  }
  scr = (scr + 15) & ~(size_t)15; /* each slice's area on its own cache lines */
  size_t tot = sc__mul(scr, ws->max_slices, &ok);
  if (!ok) {
    free(off);
    return sc__fail(SC_ERR_OVERFLOW, fn, "the bf16 buffers' size overflows size_t");
  }
  uint32_t *w = malloc((words ? words : 1) * sizeof *w);
  uint32_t *sb = malloc((tot ? tot : 1) * sizeof *sb);
  if (!w || !sb) {
    free(off);
    free(w);
    free(sb);
    return sc__fail(SC_ERR_NOMEM, fn, "out of memory for the bf16 buffers (%zu + %zu words)", words,
                    tot);
  }
  free(ws->bf_w);
  free(ws->bf_woff);
  free(ws->bf_scr);
  ws->bf_w = w;
  ws->bf_woff = off;
  ws->bf_on = (unsigned char *)(off + (L ? L : 1));
  memset(ws->bf_on, 0, L ? L : 1);
  ws->bf_scr = sb;
  ws->bf_scr_stride = scr;
  return SC_OK;
}

sc_status sc_workspace_set_precision(sc_workspace *ws, sc_precision precision) {
  SC__CHECK_NULL(ws);
  if (!sc_precision_name(precision))
    return SC__FAIL(SC_ERR_ARG,
                    "precision = %d is not SC_PRECISION_FP32, SC_PRECISION_BF16 or "
                    "SC_PRECISION_BF16_EMULATED",
                    (int)precision);
  int kind = 0, all_layers = 0;
  if (precision == SC_PRECISION_BF16) {
    /* SC_BF16_KERNELS=model: the portable model of the kernels, on any CPU (slow: for the
     * tests); =native: the AVX512_BF16 kernels; =amx: the AMX-BF16 GEMM; =amx-model: its
     * portable model (tests); unset: amx where the CPU has AMX-BF16, else native */
    const char *e = getenv("SC_BF16_KERNELS");
    if (e && *e && strcmp(e, "model") != 0 && strcmp(e, "native") != 0 && strcmp(e, "amx") != 0 &&
        strcmp(e, "amx-model") != 0)
      return SC__FAIL(SC_ERR_ARG,
                      "SC_BF16_KERNELS='%s' is not 'model', 'native', 'amx' or 'amx-model'", e);
    const char *lay = getenv("SC_BF16_LAYERS");
    if (lay && *lay && strcmp(lay, "auto") != 0 && strcmp(lay, "all") != 0)
      return SC__FAIL(SC_ERR_ARG, "SC_BF16_LAYERS='%s' is not 'auto' or 'all'", lay);
    all_layers = lay && !strcmp(lay, "all");
    const char *fold = getenv("SC_BF16_POOL_FOLD");
    if (fold && *fold && strcmp(fold, "0") != 0 && strcmp(fold, "1") != 0)
      return SC__FAIL(SC_ERR_ARG, "SC_BF16_POOL_FOLD='%s' is not '0' or '1'", fold);
    if (e && !strcmp(e, "model"))
      kind = SC__BF16K_MODEL;
    else if (e && !strcmp(e, "amx-model"))
      kind = SC__BF16K_AMX_MODEL;
    else if (e && !strcmp(e, "amx")) {
#ifdef SC__HAVE_AMX
      if (!sc__cpu_amx())
        return SC__FAIL(SC_ERR_UNSUPPORTED,
                        "SC_BF16_KERNELS=amx needs AMX-BF16 (Intel Sapphire Rapids or later) and "
                        "Linux's permission for the tile state, which this CPU or system does not "
                        "give; SC_PRECISION_BF16_EMULATED computes the same rounding with the "
                        "float kernels");
      kind = SC__BF16K_AMX;
#else
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "SC_BF16_KERNELS=amx: this build has no AMX kernels (they need x86-64 "
                      "Linux and GCC 11 or clang 12 or later); SC_PRECISION_BF16_EMULATED "
                      "computes the same rounding with the float kernels");
#endif
    }
#ifdef SC__HAVE_AMX
    else if ((!e || !*e) && sc__cpu_amx())
      kind = SC__BF16K_AMX; /* the default where the CPU has AMX-BF16 (bench/RESULTS.md, 17) */
#endif
    else if (!sc__cpu_bf16())
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "bf16 needs AVX512_BF16 (vdpbf16ps), which this CPU does not have; "
                      "SC_PRECISION_BF16_EMULATED computes the same rounding with the float "
                      "kernels");
#ifdef SC__HAVE_BF16_NATIVE
    else
      kind = SC__BF16K_NATIVE; /* the default where the CPU has AVX512_BF16 (or =native) */
#else
    else
      return SC__FAIL(SC_ERR_UNSUPPORTED,
                      "this CPU has AVX512_BF16, but this build (compiler) has no bf16 kernels; "
                      "SC_PRECISION_BF16_EMULATED computes the same rounding with the float "
                      "kernels");
#endif
  }
  if (precision != SC_PRECISION_FP32 && !ws->bf_p) {
    size_t np = ws->chain->nparams ? ws->chain->nparams : 1;
    ws->bf_p = malloc(np * sizeof *ws->bf_p);
    if (!ws->bf_p)
      return SC__FAIL(SC_ERR_NOMEM, "out of memory for the bf16 copy of %zu parameters", np);
  }
  if (kind && !ws->bf_w) {
    sc_status st = sc__bf16_buffers(ws, __func__);
    if (st) return st;
  }
  if (kind) /* which layers the bf16 GEMM runs (SC__BF16_MIN_K) */
    for (size_t l = 0; l < ws->chain->nlayers; l++) {
      const sc__lplan *P = &ws->chain->L[l];
      /* a small conv's pullback: on the GEMM where its dot form is (its dW: few channels,
       * stride 1), else on the float kernels */
      int nt = (kind == SC__BF16K_MODEL || kind == SC__BF16K_NATIVE) && P->spec.sw == 1;
      int amx = kind == SC__BF16K_AMX || kind == SC__BF16K_AMX_MODEL;
      /* on AMX a small conv's forward too: a tile of 16 rows would hold its few channels */
      ws->bf_on[l] = (unsigned char)(P->spec.kind == SC_LAYER_DENSE                ? 3
                                     : P->spec.kind != SC_LAYER_CONV2D             ? 0
                                     : all_layers || nt || P->oc >= SC__BF16_MIN_K ? 3
                                     : amx                                         ? 0
                                                                                   : 1);
      /* and its forward on the input's column pairs in place (bit 4), without im2col */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && P->oc < SC__BF16_MIN_K) ws->bf_on[l] |= 4;
      /* on AMX a conv's dx is added into its input's tile in place, by the grouped GEMM */
      if (amx && P->spec.kind == SC_LAYER_CONV2D && P->spec.sw == 1 && (ws->bf_on[l] & 2))
        ws->bf_on[l] |= 8;
      /* and its forward on the input's channel pairs in place (the summed grouped form) */
      if (amx && P->spec.kind == SC_LAYER_CONV2D && P->spec.sw == 1 && (ws->bf_on[l] & 1))
        ws->bf_on[l] |= 16;
      /* on AVX512_BF16 (and its model) too where the input has an even number of channels
       * (an odd one would pair its last with zeros): no im2col. LeNet5's conv2 forward,
       * 20,000 images, 1 thread, Zen 4: 35.5 -> 30.3 ms (3 alternating runs) */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && (ws->bf_on[l] & 1) && !(ws->bf_on[l] & 4) &&
          P->ic % 2 == 0)
        ws->bf_on[l] |= 16;
      /* and its dx as a correlation (stride 1: the padded input is oh + kh - 1 rows) */
      if (nt && P->spec.kind == SC_LAYER_CONV2D && (ws->bf_on[l] & 2) && P->spec.sh == 1 &&
          P->hp == P->oh + P->spec.kh - 1 && P->wp == P->ow + P->spec.kw - 1)
        ws->bf_on[l] |= 32;
    }
  ws->bf16k = kind;
  ws->bf_gemm = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model : sc__bf16_gemm_model;
  ws->bf_gemm_rows = kind == SC__BF16K_MODEL ? sc__bf16_gemm_model_rows : NULL;
  ws->bf_nt = kind == SC__BF16K_MODEL ? sc__bf16_nt_model : NULL;
  ws->bf_gemm_ep = NULL;
  ws->bf_dz_lanes = NULL;
  ws->bf_dz_pool = NULL;
  ws->bf_pool_hits = NULL;
  ws->bf_dz_pool_hits = NULL;
  ws->bf_dx_corr = kind == SC__BF16K_MODEL ? sc__bf16_dx_corr_model : NULL;
  ws->bf_gemm_grp = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model_grp : NULL;
  ws->bf_gemm_sumg = kind == SC__BF16K_AMX_MODEL ? sc__bf16_gemm_amx_model_sumg : NULL;
  ws->bf_round = NULL;
#ifdef SC__HAVE_BF16_NATIVE
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm_rows = sc__bf16_gemm_native_rows;
  if (kind == SC__BF16K_NATIVE) ws->bf_nt = sc__bf16_nt_native;
  ws->bf_dwt5 = kind == SC__BF16K_NATIVE ? sc__bf16_dwt5_native : NULL;
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm_ep = sc__bf16_gemm_native_ep;
  if (kind == SC__BF16K_NATIVE) ws->bf_dz_lanes = sc__bf16_dz_lanes_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_dz_pool = sc__bf16_dz_pool_native;
  const char *fold = getenv("SC_BF16_POOL_FOLD"); /* "0": the pool's own passes (checked above) */
  if (kind == SC__BF16K_NATIVE && !(fold && strcmp(fold, "0") == 0)) {
    ws->bf_pool_hits = sc__bf16_pool_hits_native;
    ws->bf_dz_pool_hits = sc__bf16_dz_pool_hits_native;
  }
  if (kind == SC__BF16K_NATIVE) ws->bf_dx_corr = sc__bf16_dx_corr_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_gemm = sc__bf16_gemm_native;
  if (kind == SC__BF16K_NATIVE) ws->bf_round = sc__bf16_round_native;
#endif
#ifdef SC__HAVE_AMX
  if (kind == SC__BF16K_AMX) ws->bf_gemm = sc__bf16_gemm_amx;
  if (kind == SC__BF16K_AMX) ws->bf_gemm_grp = sc__bf16_gemm_amx_grp;
  if (kind == SC__BF16K_AMX) ws->bf_gemm_sumg = sc__bf16_gemm_amx_sumg;
#ifdef SC__HAVE_BF16_NATIVE
  if (kind == SC__BF16K_AMX && sc__cpu_bf16()) ws->bf_round = sc__bf16_round_native;
#endif
#endif
  ws->prec = (int)precision;
  return SC_OK;
}

sc_status sc_workspace_precision(const sc_workspace *ws, sc_precision *precision) {
  SC__CHECK_NULL(ws);
  SC__CHECK_NULL(precision);
  *precision = (sc_precision)ws->prec;
  return SC_OK;
}

uint16_t sc_bf16_from_float(float x) { return sc__bf16_bits(x); }

float sc_float_from_bf16(uint16_t b) { return sc__fof((uint32_t)b << 16); }

/* ---------------------------------------------------------------- profiling */
sc_status sc_workspace_profile(sc_workspace *ws, int on) {
  SC__CHECK_NULL(ws);
  if (on != 0 && on != 1) return SC__FAIL(SC_ERR_ARG, "on = %d, must be 0 or 1", on);
  if (!on) {
    ws->prof = NULL;
    return SC_OK;
  }
  size_t per_line = SC__ALIGN / sizeof(sc__pcount);
  size_t stride = ((ws->chain->nlayers + 1) * SC__P_W + per_line - 1) / per_line * per_line;
  size_t n = ws->max_slices * stride;
  if (!ws->prof_mem) {
    ws->prof_mem = malloc((n + per_line) * sizeof *ws->prof_mem);
    if (!ws->prof_mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory for the profile counters");
    uintptr_t a = ((uintptr_t)ws->prof_mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
    ws->prof_base = (sc__pcount *)(void *)a;
    ws->prof_stride = stride;
  }
  for (size_t k = 0; k < n; k++) ws->prof_base[k] = 0;
  ws->prof = ws->prof_base;
  return SC_OK;
}

/* floating-point operations per sample of layer l, forward and backward (2 per multiply-add;
 * the backward pass of a weighted layer computes dW and, above layer 0, dx) */
static void sc__layer_flop(const sc_chain *c, size_t l, double *fwd, double *bwd) {
  const sc__lplan *P = &c->L[l];
  double mac = 0;
  if (P->spec.kind == SC_LAYER_DENSE) mac = (double)P->in * (double)P->out;
  if (P->spec.kind == SC_LAYER_CONV2D) mac = (double)P->R * (double)P->out;
  *fwd = 2 * mac;
  *bwd = 2 * mac * (l > 0 ? 2 : 1);
}

sc_status sc_workspace_profile_read(const sc_workspace *ws, sc_layer_profile *rows, size_t nrows) {
  SC__CHECK_NULL(ws);
  SC__CHECK_NULL(rows);
  const sc_chain *c = ws->chain;
  if (nrows < c->nlayers + 1)
    return SC__FAIL(SC_ERR_SHAPE, "nrows = %zu, needs the chain's %zu layers + 1", nrows,
                    c->nlayers);
  if (!ws->prof_mem)
    return SC__FAIL(SC_ERR_ARG, "profiling was never started on this workspace "
                                "(sc_workspace_profile(ws, 1))");
  memset(rows, 0, nrows * sizeof *rows);
  for (size_t l = 0; l <= c->nlayers; l++) {
    uint64_t v[SC__P_W] = {0};
    for (size_t sl = 0; sl < ws->max_slices; sl++) /* the slices' sets */
      for (int k = 0; k < SC__P_W; k++)
        v[k] += SC__PGET(ws->prof_base[sl * ws->prof_stride + l * SC__P_W + (size_t)k]);
    double ff = 0, bf = 0;
    if (l < c->nlayers) sc__layer_flop(c, l, &ff, &bf);
    rows[l].fwd_seconds = (double)v[SC__P_FNS] * 1e-9;
    rows[l].bwd_seconds = (double)v[SC__P_BNS] * 1e-9;
    rows[l].fwd_flop = ff * (double)v[SC__P_FN];
    rows[l].bwd_flop = bf * (double)v[SC__P_BN];
  }
  return SC_OK;
}

sc_status sc_profile_table(const sc_chain *chain, const sc_layer_profile *rows, size_t nrows,
                           char *buf, size_t cap, size_t *needed) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(rows);
  if (!buf && cap) return SC__FAIL(SC_ERR_NULL, "argument 'buf' is NULL but cap = %zu", cap);
  if (nrows < chain->nlayers + 1)
    return SC__FAIL(SC_ERR_SHAPE, "nrows = %zu, needs the chain's %zu layers + 1", nrows,
                    chain->nlayers);
  double total = 0;
  for (size_t r = 0; r < nrows; r++) total += rows[r].fwd_seconds + rows[r].bwd_seconds;
  sc__sbuf b = {buf, cap, 0};
  if (buf && cap) buf[0] = 0;
  sc__sprintf(&b, "%-5s %-22s %10s %8s %10s %8s %7s\n", "layer", "", "fwd ms", "GFLOP/s", "bwd ms",
              "GFLOP/s", "share");
  for (size_t r = 0; r < nrows; r++) {
    char name[64], idx[24] = "";
    if (r < chain->nlayers) snprintf(idx, sizeof idx, "%zu", r);
    if (r < chain->nlayers) {
      const sc_layer *sp = &chain->L[r].spec;
      int w = sp->kind == SC_LAYER_DENSE || sp->kind == SC_LAYER_CONV2D;
      snprintf(name, sizeof name, "%s%s%s", sc_layer_name(sp->kind), w ? " " : "",
               w ? sc_act_name(sp->act) : "");
    } else
      snprintf(name, sizeof name, "%s",
               r == chain->nlayers       ? "(batch, loss, reduce)"
               : r == chain->nlayers + 1 ? "(optimizer, guard)"
                                         : "(other)");
    const sc_layer_profile *q = &rows[r];
    double fg = q->fwd_seconds > 0 && q->fwd_flop > 0 ? q->fwd_flop / q->fwd_seconds * 1e-9 : 0;
    double bg = q->bwd_seconds > 0 && q->bwd_flop > 0 ? q->bwd_flop / q->bwd_seconds * 1e-9 : 0;
    char fgs[16] = "-", bgs[16] = "-";
    if (fg > 0) snprintf(fgs, sizeof fgs, "%.1f", fg);
    if (bg > 0) snprintf(bgs, sizeof bgs, "%.1f", bg);
    sc__sprintf(&b, "%-5s %-22s %10.2f %8s %10.2f %8s %6.1f%%\n", idx, name, q->fwd_seconds * 1e3,
                fgs, q->bwd_seconds * 1e3, bgs,
                total > 0 ? 100 * (q->fwd_seconds + q->bwd_seconds) / total : 0.0);
  }
  if (needed) *needed = b.len + 1;
  if (cap && b.len + 1 > cap) /* (a sizing call, cap = 0, is not an error) */
    return SC__FAIL(SC_ERR_NOMEM, "the table needs %zu bytes, the buffer has %zu", b.len + 1, cap);
  return SC_OK;
}

/* ---------------------------------------------------------------- shared checks */
static sc_status sc__compute_check(const char *fn, const sc_chain *c, const void *p, const void *x,
                                   size_t batch, const sc_workspace *ws) {
  if (!c) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!x) return sc__fail(SC_ERR_NULL, fn, "argument 'x' is NULL");
  if (!ws) return sc__fail(SC_ERR_NULL, fn, "argument 'ws' is NULL");
  if (ws->chain != c)
    return sc__fail(SC_ERR_ARG, fn, "the workspace was created for a different chain");
  if (batch == 0) return sc__fail(SC_ERR_BATCH, fn, "batch is 0");
  if (batch > ws->max_batch)
    return sc__fail(SC_ERR_BATCH, fn, "batch = %zu exceeds the workspace's max_batch = %zu", batch,
                    ws->max_batch);
  return SC_OK;
}

static sc_status sc__loss_check(const char *fn, const sc_chain *c, sc_loss loss,
                                const void *target) {
  if (!target) return sc__fail(SC_ERR_NULL, fn, "argument 'target' is NULL");
  if (loss != SC_LOSS_SQUARED && loss != SC_LOSS_ABSOLUTE && loss != SC_LOSS_LOGIT_CROSSENTROPY)
    return sc__fail(SC_ERR_ARG, fn, "unknown loss %d", (int)loss);
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY && c->out < 2)
    return sc__fail(SC_ERR_SHAPE, fn,
                    "cross-entropy needs at least 2 outputs (logits); the chain has %zu", c->out);
  return SC_OK;
}

static sc_status sc__labels_check(const char *fn, const int32_t *lab, size_t n, size_t classes) {
  for (size_t b = 0; b < n; b++)
    if (lab[b] < 0 || (size_t)lab[b] >= classes)
      return sc__fail(SC_ERR_ARG, fn, "label of sample %zu is %ld, outside [0, %zu)", b,
                      (long)lab[b], classes);
  return SC_OK;
}

static double sc__now(void) {
  struct timespec ts;
  timespec_get(&ts, TIME_UTC);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* !SC__KERNELS_ONLY */

/* ============================================ instantiate the typed section twice */
#define SC__TYPED 1
#define SC__T float
#define SC__TN(name) name##_f32
#define SC__TT(name) name##_f32 /* type names, shared by all passes */
#define SC__F32 1
#include "simplechain.c"
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#define SC__T double
#define SC__TN(name) name##_f64
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "simplechain.c"
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#undef SC__TYPED

#ifndef SC__KERNELS_ONLY /* ================================ engine (typed users) */
/* ---------------------------------------------------------------- optimizers */
sc_optim sc_adam(double lr) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_ADAM;
  o.lr = lr;
  o.beta1 = 0.9;
  o.beta2 = 0.999;
  o.eps = 1e-8;
  return o;
}
sc_optim sc_adamw(double lr, double weight_decay) {
  sc_optim o = sc_adam(lr);
  o.kind = SC_ADAMW;
  o.weight_decay = weight_decay;
  return o;
}
sc_optim sc_sgd(double lr, double momentum) {
  sc_optim o;
  memset(&o, 0, sizeof o);
  o.kind = SC_SGD;
  o.lr = lr;
  o.momentum = momentum;
  return o;
}

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

static sc_status sc__optim_plan(const char *fn, const sc_optim *cfg, size_t n, size_t *bytes) {
  if (!cfg) return sc__fail(SC_ERR_NULL, fn, "argument 'cfg' is NULL");
  if (n == 0) return sc__fail(SC_ERR_ARG, fn, "n is 0");
  if (cfg->kind != SC_ADAM && cfg->kind != SC_ADAMW && cfg->kind != SC_SGD)
    return sc__fail(SC_ERR_ARG, fn, "unknown optimizer kind %d", (int)cfg->kind);
  if (!(cfg->lr > 0) || !isfinite(cfg->lr))
    return sc__fail(SC_ERR_ARG, fn, "learning rate %g must be finite and > 0", cfg->lr);
  if (!(cfg->weight_decay >= 0) || !isfinite(cfg->weight_decay))
    return sc__fail(SC_ERR_ARG, fn, "weight_decay %g must be finite and >= 0", cfg->weight_decay);
  if (cfg->kind == SC_ADAMW && !(cfg->lr * cfg->weight_decay < 1))
    return sc__fail(SC_ERR_ARG, fn,
                    "AdamW: lr x weight_decay = %g x %g = %g must be < 1 (each step scales p by "
                    "1 - lr x weight_decay, which would be <= 0)",
                    cfg->lr, cfg->weight_decay, cfg->lr * cfg->weight_decay);
  if (cfg->kind == SC_SGD) {
    if (!(cfg->momentum >= 0 && cfg->momentum < 1))
      return sc__fail(SC_ERR_ARG, fn, "SGD momentum %g must be in [0, 1)", cfg->momentum);
  } else {
    if (!(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1))
      return sc__fail(SC_ERR_ARG, fn, "ADAM betas (%g, %g) must be in [0, 1)", cfg->beta1,
                      cfg->beta2);
    if (!(cfg->eps > 0) || !isfinite(cfg->eps))
      return sc__fail(SC_ERR_ARG, fn, "ADAM eps %g must be finite and > 0", cfg->eps);
  }
  int ok = 1;
  size_t vec = sc__roundup(sc__mul(n, sizeof(double), &ok), SC__ALIGN, &ok);
  size_t head = sc__roundup(sizeof(struct sc_optimizer), SC__ALIGN, &ok);
  *bytes = sc__add(sc__add(head, sc__mul(vec, 2, &ok), &ok), SC__ALIGN, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "optimizer state size overflows size_t");
  return SC_OK;
}

static sc_optimizer *sc__optim_place(void *mem, const sc_optim *cfg, size_t n) {
  uintptr_t a = ((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1);
  sc_optimizer *o = (sc_optimizer *)a;
  memset(o, 0, sizeof *o);
  o->cfg = *cfg;
  o->n = n;
  size_t head = (sizeof(struct sc_optimizer) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  size_t vec = (n * sizeof(double) + SC__ALIGN - 1) & ~(size_t)(SC__ALIGN - 1);
  o->m = (void *)(a + head);
  o->v = (void *)(a + head + vec);
  memset(o->m, 0, 2 * vec);
  return o;
}

sc_status sc_optimizer_bytes(const sc_optim *cfg, size_t n, size_t *bytes) {
  SC__CHECK_NULL(bytes);
  return sc__optim_plan(__func__, cfg, n, bytes);
}

sc_status sc_optimizer_create(sc_optimizer **out, const sc_optim *cfg, size_t n) {
  SC__CHECK_NULL(out);
  *out = NULL;
  size_t bytes = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &bytes);
  if (st) return st;
  void *mem = malloc(bytes);
  if (!mem) return SC__FAIL(SC_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) {
    free(mem);
    return st;
  }
  *out = sc__optim_place(mem, cfg, n);
  (*out)->owned = mem;
  (*out)->kf = kf;
  return SC_OK;
}

sc_status sc_optimizer_init(sc_optimizer **out, const sc_optim *cfg, size_t n, void *mem,
                            size_t bytes) {
  SC__CHECK_NULL(out);
  *out = NULL;
  SC__CHECK_NULL(mem);
  size_t need = 0;
  sc_status st = sc__optim_plan(__func__, cfg, n, &need);
  if (st) return st;
  if (bytes < need)
    return SC__FAIL(SC_ERR_NOMEM, "caller memory of %zu bytes is smaller than the %zu needed",
                    bytes, need);
  const sc__kt_f32 *kf;
  const sc__kt_f64 *kd;
  if ((st = sc__pick_kernels(__func__, &kf, &kd))) return st;
  *out = sc__optim_place(mem, cfg, n);
  (*out)->kf = kf;
  return SC_OK;
}

void sc_optimizer_destroy(sc_optimizer *opt) {
  if (opt) free(opt->owned);
}

sc_status sc_optimizer_reset(sc_optimizer *opt) {
  SC__CHECK_NULL(opt);
  opt->t = 0;
  opt->prec = 0;
  memset(opt->m, 0, opt->n * sizeof(double));
  memset(opt->v, 0, opt->n * sizeof(double));
  return SC_OK;
}

/* the checks both step forms share; locks the optimizer to one element type */
static sc_status sc__optim_step_check(const char *fn, sc_optimizer *opt, const void *p,
                                      const void *g, size_t n, int prec) {
  if (!opt) return sc__fail(SC_ERR_NULL, fn, "argument 'opt' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!g) return sc__fail(SC_ERR_NULL, fn, "argument 'g' is NULL");
  if (n != opt->n)
    return sc__fail(SC_ERR_SHAPE, fn, "n = %zu but the optimizer was created for %zu", n, opt->n);
  if (opt->prec && opt->prec != prec)
    return sc__fail(SC_ERR_ARG, fn,
                    "this optimizer has taken %s steps (its moments are %s): one element type "
                    "per optimizer; sc_optimizer_reset() starts afresh in either",
                    opt->prec == 1 ? "float" : "double", opt->prec == 1 ? "float" : "double");
  opt->prec = prec;
  return SC_OK;
}

/* ADAM / AdamW's coefficients for step opt->t (already counted), in torch's form:
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps) */
static void sc__adam_coefs(const sc_optimizer *opt, sc__adam_coef *k) {
  const sc_optim *c = &opt->cfg;
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  /* 1 - beta in double: (1 - 0.999f) in float is off by 1e-5 relative */
  k->b1 = (float)c->beta1, k->b2 = (float)c->beta2, k->eps = (float)c->eps;
  k->omb1 = (float)(1.0 - c->beta1), k->omb2 = (float)(1.0 - c->beta2);
  k->step = (float)(c->lr / bc1), k->isb2 = (float)(1.0 / sqrt(bc2));
  k->decay = c->kind == SC_ADAMW ? (float)(1.0 - c->lr * c->weight_decay) : 1.0f;
  k->l2 = c->kind == SC_ADAM ? (float)c->weight_decay : 0.0f;
}

/* sc_train's float ADAM step and NaN guard, on the workspace's threads for large chains
 * (pool NULL: on the caller alone): each worker copies its part of p (sc__part_range) to
 * pbak, updates it and scans it; the first non-finite index over all parts is kept. Every
 * element gets the same operations as in one pass, so the result does not depend on the
 * thread count. At 2 threads this was LeNet5's serial part: 52 us of ADAM and guard on 44,426
 * parameters per step at batch 64, with the other thread waiting. */
typedef struct sc__optjob {
  const sc__kt_f32 *kf;
  const sc__adam_coef *k;
  float *p, *pbak, *m, *v;
  const float *g;
  size_t n;
  size_t bad[SC__OPT_PARTS]; /* per part: the first non-finite index of p, or n */
} sc__optjob;

static void sc__optjob_task(void *arg, int worker, int nworkers) {
  sc__optjob *J = arg;
  size_t parts = sc__parts(nworkers), k0, k1;
  for (size_t w = (size_t)worker; w < parts; w += (size_t)nworkers) {
    sc__part_range(w, parts, J->n, &k0, &k1);
    /* the backup, the step and the scan block by block, each block's arrays in L1 between
     * them (one pass each over the whole part read p, g, m, v from L2 three times) */
    for (size_t b0 = k0; b0 < k1; b0 += 2048) { /* (all of it: pbak is restored whole) */
      size_t nb = k1 - b0 < 2048 ? k1 - b0 : 2048;
      memcpy(J->pbak + b0, J->p + b0, nb * sizeof(float));
      J->kf->adam(J->p + b0, J->g + b0, J->m + b0, J->v + b0, nb, J->k);
      size_t b = J->kf->find_nonfinite(J->p + b0, nb);
      if (b < nb && J->bad[w] == J->n) J->bad[w] = b0 + b; /* the part's first */
    }
  }
}

/* returns the index of the first non-finite element of the updated p, or n */
static size_t sc__train_adam_f32(sc_optimizer *opt, sc__pool *pool, float *p, float *pbak,
                                 const float *g, size_t n) {
  opt->t++;
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  sc__optjob J;
  J.kf = opt->kf, J.k = &k, J.p = p, J.pbak = pbak, J.m = opt->m, J.v = opt->v, J.g = g, J.n = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++) J.bad[w] = n;
  sc__pool_run(pool, sc__optjob_task, &J);
  size_t bad = n;
  for (size_t w = 0; w < SC__OPT_PARTS; w++)
    if (J.bad[w] < bad) bad = J.bad[w];
  return bad;
}

sc_status sc_optimizer_step(sc_optimizer *opt, float *p, const float *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 1);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  float *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  if (c->kind == SC_SGD) {
    float lr = (float)c->lr, mu = (float)c->momentum, wd = (float)c->weight_decay;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      float gk = g[k] + wd * p[k];
      float b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  sc__adam_coef k;
  sc__adam_coefs(opt, &k);
  opt->kf->adam(p, g, m, v, n, &k);
  return SC_OK;
}

/* The same rules in double (a plain loop: the ODE-sized vectors it serves are short). */
sc_status sc_optimizer_step_f64(sc_optimizer *opt, double *p, const double *g, size_t n) {
  sc_status st = sc__optim_step_check(__func__, opt, p, g, n, 2);
  if (st) return st;
  const sc_optim *c = &opt->cfg;
  double *restrict m = opt->m, *restrict v = opt->v;
  opt->t++;
  double lr = c->lr, wd = c->weight_decay;
  if (c->kind == SC_SGD) {
    double mu = c->momentum;
    int first = opt->t == 1;
    for (size_t k = 0; k < n; k++) {
      double gk = g[k] + wd * p[k];
      double b = (mu > 0) ? (first ? gk : mu * m[k] + gk) : gk;
      m[k] = b;
      p[k] -= lr * b;
    }
    return SC_OK;
  }
  double bc1 = 1.0 - pow(c->beta1, (double)opt->t), bc2 = 1.0 - pow(c->beta2, (double)opt->t);
  double b1 = c->beta1, b2 = c->beta2, omb1 = 1.0 - b1, omb2 = 1.0 - b2, eps = c->eps;
  double step = lr / bc1, isb2 = 1.0 / sqrt(bc2);
  double decay = c->kind == SC_ADAMW ? 1.0 - lr * wd : 1.0, l2 = c->kind == SC_ADAM ? wd : 0.0;
  for (size_t k = 0; k < n; k++) {
    double gk = g[k] + l2 * p[k];
    double mk = b1 * m[k] + omb1 * gk, vk = b2 * v[k] + omb2 * gk * gk;
    m[k] = mk, v[k] = vk;
    p[k] = p[k] * decay - step * mk / (sqrt(vk) * isb2 + eps);
  }
  return SC_OK;
}

/* ---------------------------------------------------------------- checkpoints */
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

static void sc__ck_identity(sc__ckpt *k, const sc_chain *chain, size_t n, size_t bs, int shuffle,
                            const sc_train_opts *o, size_t total) {
  memset(k, 0, sizeof *k);
  k->np = chain->nparams, k->fp = sc__fingerprint(chain), k->nsamples = n, k->bs = bs;
  k->seed = o->seed, k->shuffle = (uint32_t)shuffle, k->kind = (uint32_t)o->optim.kind;
  const sc_optim *c = &o->optim;
  int sched = o->lr_schedule != SC_LR_CONSTANT;
  double h[SC__CK_NH] = {c->lr,
                         c->beta1,
                         c->beta2,
                         c->eps,
                         c->momentum,
                         c->weight_decay,
                         o->clip_norm,
                         (double)o->lr_schedule,
                         sched ? o->lr_min : 0,
                         sched ? (double)total : 0};
  memcpy(k->hyper, h, sizeof h);
}

static void sc__ck_encode(unsigned char *h, const sc__ckpt *k) {
  memset(h, 0, SC__CK_HEAD);
  memcpy(h, SC__CK_MAGIC, 8);
  sc__put_le(h + 8, 1, 4);
  sc__put_le(h + 12, k->f64 ? 1 : 0, 4);
  sc__put_le(h + 16, k->np, 8);
  sc__put_le(h + 24, k->fp, 8);
  sc__put_le(h + 32, k->nsamples, 8);
  sc__put_le(h + 40, k->bs, 8);
  sc__put_le(h + 48, k->seed, 8);
  sc__put_le(h + 56, k->shuffle, 4);
  sc__put_le(h + 60, k->kind, 4);
  for (int i = 0; i < SC__CK_NH; i++) sc__put_le(h + 64 + 8 * i, sc__dbits(k->hyper[i]), 8);
  sc__put_le(h + 144, k->step, 8);
  sc__put_le(h + 152, k->epoch, 8);
  sc__put_le(h + 160, k->pos, 8);
  sc__put_le(h + 168, k->t, 8);
  for (int i = 0; i < 4; i++) sc__put_le(h + 176 + 8 * i, k->rng[i], 8);
  sc__put_le(h + 208, sc__dbits(k->epoch_sum), 8);
  sc__put_le(h + 216, k->nidx, 8);
}

static void sc__ck_decode(const unsigned char *h, sc__ckpt *k) {
  k->np = sc__get_le(h + 16, 8), k->fp = sc__get_le(h + 24, 8);
  k->nsamples = sc__get_le(h + 32, 8), k->bs = sc__get_le(h + 40, 8);
  k->seed = sc__get_le(h + 48, 8);
  k->shuffle = (uint32_t)sc__get_le(h + 56, 4), k->kind = (uint32_t)sc__get_le(h + 60, 4);
  for (int i = 0; i < SC__CK_NH; i++) k->hyper[i] = sc__dof(sc__get_le(h + 64 + 8 * i, 8));
  k->step = sc__get_le(h + 144, 8), k->epoch = sc__get_le(h + 152, 8);
  k->pos = sc__get_le(h + 160, 8), k->t = sc__get_le(h + 168, 8);
  for (int i = 0; i < 4; i++) k->rng[i] = sc__get_le(h + 176 + 8 * i, 8);
  k->epoch_sum = sc__dof(sc__get_le(h + 208, 8));
  k->nidx = sc__get_le(h + 216, 8);
}

/* Writes a checkpoint atomically (sc__wopen/sc__wcommit; tmp: strlen(path) + SC__TMP_EXTRA
 * bytes). Allocates nothing where POSIX I/O exists. */
static sc_status sc__ck_write(const char *fn, const char *path, char *tmp, const sc__ckpt *k,
                              const void *p, const void *m, const void *v, const size_t *idx) {
  sc__wfile w;
  sc_status st = sc__wopen(&w, path, tmp, fn);
  if (st) return st;
  unsigned char buf[4096];
  uint64_t sum = SC__FNV_INIT;
  sc__ck_encode(buf, k);
  sum = sc__fnv1a(sum, buf, SC__CK_HEAD);
  sc__wwrite(&w, buf, SC__CK_HEAD);
  const void *arr[3] = {p, m, v};
  size_t es = k->f64 ? 8 : 4;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; !w.err && i < k->np;) {
      size_t b = 0;
      for (; i < k->np && b + es <= sizeof buf; i++, b += es)
        sc__put_le(buf + b,
                   k->f64 ? sc__dbits(((const double *)arr[a])[i])
                          : sc__fbits(((const float *)arr[a])[i]),
                   (int)es);
      sum = sc__fnv1a(sum, buf, b);
      sc__wwrite(&w, buf, b);
    }
  for (size_t i = 0; !w.err && i < k->nidx;) {
    size_t b = 0;
    for (; i < k->nidx && b + 8 <= sizeof buf; i++, b += 8)
      sc__put_le(buf + b, (uint64_t)idx[i], 8);
    sum = sc__fnv1a(sum, buf, b);
    sc__wwrite(&w, buf, b);
  }
  sc__put_le(buf, sum, 8);
  sc__wwrite(&w, buf, 8);
  return sc__wcommit(&w, path, fn);
}

/* sc_train's state after `step` steps, the next of which is step `pos` of epoch `epoch`
 * (sum: the loss sum of that epoch's first pos steps), written as a checkpoint */
static sc_status sc__ck_save(const char *fn, const char *path, char *tmp, sc__ckpt *ck, size_t step,
                             size_t epoch, size_t pos, double sum, const sc__rng *rng,
                             const void *p, const sc_optimizer *opt, const size_t *idx, size_t n) {
  ck->step = step, ck->epoch = epoch, ck->pos = pos, ck->t = step;
  ck->epoch_sum = pos ? sum : 0, ck->nidx = idx ? n : 0;
  memcpy(ck->rng, rng->s, sizeof ck->rng);
  return sc__ck_write(fn, path, tmp, ck, p, opt->m, opt->v, idx);
}

/* The next min(left, cap) bytes of a checkpoint into buf (*got), added to the checksum; a
 * short read is SC_ERR_IO (a read error) or SC_ERR_FORMAT (truncated, naming the offset). */
static sc_status sc__ck_chunk(FILE *f, unsigned char *buf, size_t cap, size_t left, size_t *got,
                              uint64_t *sum, size_t off, const char *path, const char *fn) {
  size_t want = left < cap ? left : cap;
  errno = 0;
  *got = fread(buf, 1, want, f);
  if (*got < want) {
    sc_status st = sc__rerr(f, path, fn);
    return st ? st : sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated at offset %zu", path, off + *got);
  }
  *sum = sc__fnv1a(*sum, buf, *got);
  return SC_OK;
}

/* Reads and checks a whole checkpoint. k receives the header. If want is not NULL, the run's
 * identity (nparams, fingerprint, samples, batch size, seed, shuffle, optimizer and clip
 * settings) must match it (SC_ERR_ARG / SC_ERR_SHAPE naming the field). The arrays go to p,
 * m, v (nparams floats each) and idx (samples entries), each may be NULL; on an error they
 * may hold part of the file, so the caller reads p into scratch memory. */
static sc_status sc__ck_read(const char *fn, const char *path, const sc_chain *chain,
                             const sc__ckpt *want, sc__ckpt *k, void *p, void *m, void *v,
                             size_t *idx) {
  FILE *f;
  sc_status st = sc__ropen(&f, path, fn);
  if (st) return st;
  unsigned char buf[4096];
  unsigned char *seen = NULL;
  errno = 0;
  size_t got = fread(buf, 1, SC__CK_HEAD, f);
  if (got < SC__CK_HEAD && (st = sc__rerr(f, path, fn))) goto out;
  if (got < 8 || memcmp(buf, SC__CK_MAGIC, 8) != 0) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': not a simplechain checkpoint (bad magic at offset 0)",
                  path);
    goto out;
  }
  if (got < SC__CK_HEAD) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated header (file ends at offset %zu of %d)", path,
                  got, SC__CK_HEAD);
    goto out;
  }
  uint64_t ver = sc__get_le(buf + 8, 4), flags = sc__get_le(buf + 12, 4);
  if (ver != 1 || flags > 1) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': unsupported version %llu / flags %llu at offset 8",
                  path, (unsigned long long)ver, (unsigned long long)flags);
    goto out;
  }
  sc__ck_decode(buf, k);
  k->f64 = (uint32_t)flags;
  uint64_t sum = sc__fnv1a(SC__FNV_INIT, buf, SC__CK_HEAD);
  /* the header's own consistency */
  const char *bad = NULL;
  size_t at = 0;
  int hok = 1;
  for (int i = 0; i < SC__CK_NH; i++) hok &= isfinite(k->hyper[i]) != 0;
  uint64_t spe = k->bs ? (k->nsamples + k->bs - 1) / k->bs : 0;
  if (k->np != chain->nparams) {
    st = sc__fail(SC_ERR_SHAPE, fn, "'%s': holds %llu parameters (offset 16), the chain has %zu",
                  path, (unsigned long long)k->np, chain->nparams);
    goto out;
  }
  if (k->fp != sc__fingerprint(chain)) {
    st =
        sc__fail(SC_ERR_SHAPE, fn,
                 "'%s': written for a chain of a different shape (fingerprint at offset 24)", path);
    goto out;
  }
  if (k->nsamples == 0 || k->nsamples > SIZE_MAX / 16)
    bad = "sample count", at = 32;
  else if (k->bs == 0 || k->bs > k->nsamples)
    bad = "batch size", at = 40;
  else if (k->shuffle > 1)
    bad = "shuffle flag", at = 56;
  else if (k->kind < SC_ADAM || k->kind > SC_SGD)
    bad = "optimizer kind", at = 60;
  else if (!hok || (k->hyper[7] != 0 && k->hyper[7] != 1))
    bad = "optimizer settings", at = 64;
  else if (k->pos >= spe)
    bad = "steps into the epoch", at = 160;
  else if (k->epoch > UINT64_MAX / spe || k->epoch * spe + k->pos != k->step)
    bad = "step", at = 144;
  else if (k->t != k->step)
    bad = "optimizer step count", at = 168;
  else if (!isfinite(k->epoch_sum))
    bad = "epoch loss sum", at = 208;
  else if (k->nidx != (k->shuffle ? k->nsamples : 0))
    bad = "index count", at = 216;
  if (bad) {
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': inconsistent %s at offset %zu (file corrupted)", path,
                  bad, at);
    goto out;
  }
  if (want && k->f64 != want->f64) {
    st = sc__fail(SC_ERR_ARG, fn,
                  "'%s' was written by sc_train%s (%s parameters): resume it with sc_train%s", path,
                  k->f64 ? "_f64" : "", k->f64 ? "double" : "float", k->f64 ? "_f64" : "");
    goto out;
  }
  if (want) {
    static const char *hn[SC__CK_NH] = {
        "lr",           "beta1",     "beta2",       "eps",    "momentum",
        "weight_decay", "clip_norm", "lr_schedule", "lr_min", "the schedule's length (epochs)"};
    if (k->nsamples != want->nsamples)
      bad = "the sample count";
    else if (k->bs != want->bs)
      bad = "the batch size";
    else if (k->seed != want->seed)
      bad = "the seed";
    else if (k->shuffle != want->shuffle)
      bad = "shuffling";
    else if (k->kind != want->kind)
      bad = "the optimizer";
    for (int i = 0; !bad && i < SC__CK_NH; i++)
      if (sc__dbits(k->hyper[i]) != sc__dbits(want->hyper[i])) bad = hn[i];
    if (bad) {
      st = sc__fail(SC_ERR_ARG, fn,
                    "'%s' was written by a run with different settings (%s differs): resuming "
                    "needs the same data, batch size, seed, shuffling, optimizer, clip_norm and "
                    "learning-rate schedule",
                    path, bad);
      goto out;
    }
  }
  /* the size the header claims, against the file's: nothing is allocated for a lie */
  int ok = 1;
  size_t es = k->f64 ? 8 : 4;
  size_t need = sc__add(sc__add(SC__CK_HEAD, sc__mul((size_t)k->np, 3 * es, &ok), &ok),
                        sc__add(sc__mul((size_t)k->nidx, 8, &ok), 8, &ok), &ok);
  long end = -1;
  if (fseek(f, 0, SEEK_END) == 0) end = ftell(f);
  if (!ok || end < 0 || (uint64_t)end != (uint64_t)need || fseek(f, SC__CK_HEAD, SEEK_SET) != 0) {
    if (end < 0)
      st = sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
    else
      st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s: the file has %ld bytes, its header needs %zu",
                    path, (uint64_t)end < need ? "truncated" : "unexpected bytes at the end", end,
                    need);
    goto out;
  }
  void *arr[3] = {p, m, v};
  size_t off = SC__CK_HEAD;
  for (int a = 0; a < 3; a++)
    for (size_t i = 0; i < k->np;) {
      if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->np - i) * es, &got, &sum, off, path, fn)))
        goto out;
      for (size_t b = 0; b + es <= got; b += es, i++, off += es) {
        double x = k->f64 ? sc__dof(sc__get_le(buf + b, 8))
                          : (double)sc__fof((uint32_t)sc__get_le(buf + b, 4));
        if (!isfinite(x) || (a == 2 && x < 0)) {
          static const char *an[3] = {"parameter", "first moment", "second moment"};
          st = sc__fail(SC_ERR_FORMAT, fn, "'%s': %s %zu (offset %zu) is %g", path, an[a], i, off,
                        x);
          goto out;
        }
        if (arr[a] && k->f64)
          ((double *)arr[a])[i] = x;
        else if (arr[a])
          ((float *)arr[a])[i] = (float)x;
      }
    }
  if (k->nidx) {
    seen = calloc((size_t)(k->nidx + 7) / 8, 1);
    if (!seen) {
      st = sc__fail(SC_ERR_NOMEM, fn, "out of memory");
      goto out;
    }
  }
  for (size_t i = 0; i < k->nidx;) {
    if ((st = sc__ck_chunk(f, buf, sizeof buf, (k->nidx - i) * 8, &got, &sum, off, path, fn)))
      goto out;
    for (size_t b = 0; b < got; b += 8, i++, off += 8) {
      uint64_t j = sc__get_le(buf + b, 8);
      if (j >= k->nsamples || (seen[j / 8] >> (j % 8) & 1)) {
        st = sc__fail(SC_ERR_FORMAT, fn,
                      "'%s': the sample order is not a permutation (entry %zu at offset %zu)", path,
                      i, off);
        goto out;
      }
      seen[j / 8] |= (unsigned char)(1u << (j % 8));
      if (idx) idx[i] = (size_t)j;
    }
  }
  errno = 0;
  got = fread(buf, 1, 8, f);
  if (got < 8) {
    if (!(st = sc__rerr(f, path, fn)))
      st =
          sc__fail(SC_ERR_FORMAT, fn, "'%s': truncated: checksum missing at offset %zu", path, off);
  } else if (sc__get_le(buf, 8) != sum)
    st = sc__fail(SC_ERR_FORMAT, fn, "'%s': checksum mismatch at offset %zu (file corrupted)", path,
                  off);
out:
  free(seen);
  fclose(f);
  return st;
}

sc_status sc_checkpoint_info(const sc_chain *chain, const char *path, sc_checkpoint_state *info) {
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(path);
  SC__CHECK_NULL(info);
  sc__ckpt k;
  sc_status st = sc__ck_read(__func__, path, chain, NULL, &k, NULL, NULL, NULL, NULL);
  if (st) return st;
  memset(info, 0, sizeof *info);
  info->step = (size_t)k.step;
  info->epoch = (size_t)k.epoch;
  info->epoch_step = (size_t)k.pos;
  info->samples = (size_t)k.nsamples;
  info->batch_size = (size_t)k.bs;
  info->seed = k.seed;
  info->shuffle = (int)k.shuffle;
  info->optim.kind = (sc_optim_kind)k.kind;
  info->optim.lr = k.hyper[0], info->optim.beta1 = k.hyper[1], info->optim.beta2 = k.hyper[2];
  info->optim.eps = k.hyper[3], info->optim.momentum = k.hyper[4];
  info->optim.weight_decay = k.hyper[5];
  info->clip_norm = k.hyper[6];
  info->lr_schedule = (sc_lr_schedule)(int)k.hyper[7];
  info->lr_min = k.hyper[8];
  info->f64 = (int)k.f64;
  return SC_OK;
}

/* ---------------------------------------------------------------- training */
/* The threads sc_train runs on (issue 13: threads never slow training down). A step's work
 * is its batch's slices (one per SC__TW x min_tiles samples, this rank's share of them under
 * dist) and the elementwise passes over the parameters (the slices' sum, the optimizer step,
 * the NaN guard, bf16's weights). A thread beyond both only waits: it is woken for every run
 * of the step, the caller waits for it to check in, and it polls its core between runs. On a
 * 16-core Intel host (bench/RESULTS.md, session 34) LeNet5 at batch 64 (2 slices) took 0.093
 * s per 10,000 images on 2 threads and 0.121-0.133 s on 4, 8 and 16 (after this: 4 and 16 as
 * fast as 2, 0.110-0.114 against 0.115 in a slower run of the VM). So: at most the slices
 * of a batch, or one thread per SC__TRAIN_PARAMS_PER_THREAD parameters where that is more,
 * and never more than asked for. Results do not depend on the thread count either way. */
#define SC__TRAIN_PARAMS_PER_THREAD 65536
static int sc__train_threads_for(const sc_chain *c, size_t bs, const sc_dist *dist, int threads) {
  size_t s = sc__slices_for(c, bs);
  if (dist && dist->ranks > 1) { /* this rank's slices, as sc__execute splits them */
    size_t lo, hi;
    sc__rank_slices(s, (size_t)dist->rank, (size_t)dist->ranks, &lo, &hi);
    s = hi - lo;
  }
  size_t byp = c->nparams / SC__TRAIN_PARAMS_PER_THREAD + 1;
  size_t use = s > byp ? s : byp;
  return (size_t)threads < use ? threads : (int)use;
}

/* a dist's rank and rank count (sc_train, sc_train_threads) */
static sc_status sc__dist_rank_check(const char *fn, const sc_dist *dist) {
  if (dist->ranks < 1 || dist->ranks > 65536)
    return sc__fail(SC_ERR_ARG, fn, "dist->ranks = %d, must be in [1, 65536]", dist->ranks);
  if (dist->rank < 0 || dist->rank >= dist->ranks)
    return sc__fail(SC_ERR_ARG, fn, "dist->rank = %d, must be in [0, %d)", dist->rank, dist->ranks);
  return SC_OK;
}

sc_status sc_train_threads(const sc_chain *chain, const sc_train_opts *opts, size_t n,
                           int *threads) {
  if (threads) *threads = 0;
  SC__CHECK_NULL(chain);
  SC__CHECK_NULL(opts);
  SC__CHECK_NULL(threads);
  if (n == 0) return SC__FAIL(SC_ERR_BATCH, "n is 0: no samples");
  sc_status st = sc__threads_check(__func__, opts->threads);
  const sc_dist *dist = opts->dist;
  if (!st && dist) st = sc__dist_rank_check(__func__, dist);
  if (st) return st;
  size_t bs = opts->batch_size && opts->batch_size < n ? opts->batch_size : n;
  *threads = sc__train_threads_for(chain, bs, dist, opts->threads);
  return SC_OK;
}

sc_train_opts sc_train_defaults(void) {
  sc_train_opts o;
  memset(&o, 0, sizeof o);
  o.optim = sc_adam(1e-3);
  o.epochs = 1;
  o.batch_size = 0;
  o.shuffle = 1;
  o.seed = 0;
  o.threads = 1;
  return o;
}

/* Full-batch training (and unshuffled minibatches of whole tiles) reads the same tiles of the
 * data at every step: they are made here once, the inputs transposed to tiles (SC__TW samples a
 * row, zeros past the last sample; with bf16 operands rounded), the targets likewise (not the
 * labels: those are read in place), and the steps read them in place (ws->tiles_x) instead of
 * gathering them again: the same values, so the same bits. The toy (4 -> 32 -> 16 -> 4, 10,000
 * samples): its gathers were 2.4 % of a step, the run 2.0-4.2 % faster (bench/RESULTS.md,
 * session 33). Not for a chain whose first layer is a flatten (a view of the input tile), and
 * not above SC__TILES_MAX bytes (the data set again, in tiles); SC_TRAIN_TILES=0 turns it off.
 * Returns the memory to free (NULL: not made, the steps gather as before). */
#define SC__TILES_MAX ((size_t)64 << 20)
static void *sc__train_tiles(sc_workspace *ws, const sc_chain *c, sc_loss loss, const void *x,
                             const void *target, size_t n, size_t bs, int shuffle, int f64) {
  const char *env = getenv("SC_TRAIN_TILES"); /* (checked by sc__train) */
  if ((env && !strcmp(env, "0")) || shuffle || (bs != n && bs % SC__TW) ||
      c->L[0].spec.kind == SC_LAYER_FLATTEN)
    return NULL;
  int ok = 1;
  size_t es = f64 ? sizeof(double) : sizeof(float), nt = n / SC__TW + (n % SC__TW != 0);
  size_t tcols = loss == SC_LOSS_LOGIT_CROSSENTROPY ? 0 : c->out;
  size_t xb = sc__mul(sc__mul(nt, c->in, &ok), SC__TW * es, &ok);
  size_t tb = sc__mul(sc__mul(nt, tcols, &ok), SC__TW * es, &ok);
  size_t all = sc__add(sc__add(xb, tb, &ok), SC__ALIGN, &ok);
  if (!ok || all > SC__TILES_MAX) return NULL;
  void *mem = malloc(all);
  if (!mem) return NULL; /* (not needed: the steps gather) */
  unsigned char *xt =
      (unsigned char *)(((uintptr_t)mem + SC__ALIGN - 1) & ~(uintptr_t)(SC__ALIGN - 1));
  unsigned char *tt = xt + xb; /* (xb a multiple of SC__TW es: 64-byte aligned) */
  if (f64) {
    sc__tiles_fill_f64((double *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f64((double *)(void *)tt, target, tcols, n);
  } else {
    sc__tiles_fill_f32((float *)(void *)xt, x, c->in, n);
    if (tcols) sc__tiles_fill_f32((float *)(void *)tt, target, tcols, n);
  }
  if (!f64 && ws->prec != SC_PRECISION_FP32) /* as the steps round their gathered tiles */
    (ws->bf_round ? ws->bf_round : sc__bf16_round_n)((float *)(void *)xt, nt * c->in * SC__TW);
  ws->tiles_x = xt;
  ws->tiles_t = tcols ? tt : NULL;
  ws->tiles_f64 = f64;
  ws->tiles0 = 0;
  return mem;
}

/* sc_train and sc_train_f64: one body, the element type chosen by f64 (p, the data's x and
 * float targets, the gradient, the optimizer's moments and the checkpoint's arrays are all
 * of that type) */
static sc_status sc__train(const char *fn, const sc_chain *chain, sc_loss loss, void *pv, int f64,
                           const void *xv, const void *target, size_t n, const sc_train_opts *opts,
                           sc_train_report *report) {
  if (!chain) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!pv) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!opts) return sc__fail(SC_ERR_NULL, fn, "argument 'opts' is NULL");
  if (report) memset(report, 0, sizeof *report);
  if (!xv) return sc__fail(SC_ERR_NULL, fn, "data->x is NULL");
  if (n == 0) return sc__fail(SC_ERR_BATCH, fn, "data->n is 0: no samples");
  float *p32 = f64 ? NULL : (float *)pv;
  double *p64 = f64 ? (double *)pv : NULL;
  const size_t es = f64 ? sizeof(double) : sizeof(float);
  if (opts->epochs == 0)
    return sc__fail(SC_ERR_ARG, fn,
                    "epochs is 0 (start from sc_train_defaults() and set what differs)");
  sc_status tst = sc__threads_check(fn, opts->threads);
  if (tst) return tst;
  if (!sc_precision_name(opts->precision))
    return sc__fail(SC_ERR_ARG, fn, "unknown precision %d", (int)opts->precision);
  if (f64 && opts->precision != SC_PRECISION_FP32)
    return sc__fail(SC_ERR_ARG, fn,
                    "precision %s is for float training; sc_train_f64 computes in double "
                    "(leave precision at SC_PRECISION_FP32)",
                    sc_precision_name(opts->precision));
  if (opts->lr_schedule != SC_LR_CONSTANT && opts->lr_schedule != SC_LR_COSINE)
    return sc__fail(SC_ERR_ARG, fn, "unknown lr_schedule %d", (int)opts->lr_schedule);
  if (opts->lr_schedule == SC_LR_COSINE &&
      (!(opts->lr_min >= 0) || !(opts->lr_min <= opts->optim.lr)))
    return sc__fail(SC_ERR_ARG, fn, "lr_min = %g must be in [0, lr = %g]", opts->lr_min,
                    opts->optim.lr);
  if (!(opts->clip_norm >= 0) || !isfinite(opts->clip_norm))
    return sc__fail(SC_ERR_ARG, fn, "clip_norm = %g must be finite and >= 0 (0: off)",
                    opts->clip_norm);
  if (opts->profile && opts->profile_rows < chain->nlayers + 2)
    return sc__fail(SC_ERR_SHAPE, fn, "profile_rows = %zu, needs the chain's %zu layers + 2",
                    opts->profile_rows, chain->nlayers);
  const char *ckpath = opts->checkpoint;
  if (ckpath && !*ckpath) return sc__fail(SC_ERR_ARG, fn, "checkpoint path is empty");
  if (!ckpath && opts->resume)
    return sc__fail(SC_ERR_ARG, fn, "resume is set but checkpoint is NULL");
  if (!ckpath && opts->checkpoint_every)
    return sc__fail(SC_ERR_ARG, fn, "checkpoint_every = %zu but checkpoint is NULL",
                    opts->checkpoint_every);
  const char *tenv = getenv("SC_TRAIN_TILES");
  if (tenv && strcmp(tenv, "0") && strcmp(tenv, "1"))
    return sc__fail(SC_ERR_ARG, fn, "SC_TRAIN_TILES='%s' is not '0' or '1'", tenv);
  sc_status st = sc__loss_check(fn, chain, loss, target);
  if (st) return st;
  size_t obytes = 0;
  if ((st = sc__optim_plan(fn, &opts->optim, chain->nparams, &obytes))) return st;
  int ok = 1;
  size_t bs = opts->batch_size ? opts->batch_size : n, np = chain->nparams;
  if (bs > n) bs = n;
  sc__mul(n, chain->in > chain->out ? chain->in : chain->out, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "data size overflows size_t");
  /* the data set is checked once here, not at every step */
  st = f64 ? sc__finite_check_f64(fn, chain, "input", xv, n, chain->in)
           : sc__finite_check_f32(fn, chain, "input", xv, n, chain->in);
  if (st) return st;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY)
    st = sc__labels_check(fn, (const int32_t *)target, n, chain->out);
  else
    st = f64 ? sc__finite_check_f64(fn, chain, "target", target, n, chain->out)
             : sc__finite_check_f32(fn, chain, "target", target, n, chain->out);
  if (st) return st;
  st = f64 ? sc__finite_check_f64(fn, chain, "parameter", p64, 1, np)
           : sc__finite_check_f32(fn, chain, "parameter", p32, 1, np);
  if (st) return st;

  const sc_dist *dist = opts->dist;
  if (dist) {
    if ((st = sc__dist_rank_check(fn, dist))) return st;
    if (!dist->allgather) return sc__fail(SC_ERR_NULL, fn, "dist->allgather is NULL");
  }

  size_t steps_per_epoch = (n + bs - 1) / bs;
  size_t total = sc__mul(steps_per_epoch, opts->epochs, &ok);
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "epochs x steps overflows size_t");
  int shuffle = opts->shuffle && bs < n;
  int writer = ckpath && (!dist || dist->rank == 0); /* one rank writes the checkpoints */

  /* everything the steps need, allocated once */
  sc_workspace *ws = NULL;
  sc_optimizer *opt = NULL;
  double t_start = sc__now(), epoch_loss = 0, sum = 0;
  size_t step = 0, epoch = 0, s0 = 0, last_ck = (size_t)-1;
  uint64_t opt_ns = 0;          /* profile: the optimizer step, the guard, the checkpoints */
  void *g = NULL, *pbak = NULL; /* np elements of the type */
  size_t *idx = NULL;
  char *cktmp = NULL;
  void *tiles = NULL; /* the data's tiles made once (sc__train_tiles), or NULL */
  sc__ckpt ck;
  /* data-parallel: one record per slice, nparams elements then the slice's loss (a double) */
  size_t rec_g = sc__roundup(sc__mul(np, es, &ok), sizeof(double), &ok);
  size_t rec = sc__add(rec_g, sizeof(double), &ok);
  unsigned char *xsend = NULL, *xrecv = NULL;
  size_t *xcounts = NULL, *xdispls = NULL;
  double slice_loss[SC__MAX_SLICES];
  if (!ok) return sc__fail(SC_ERR_OVERFLOW, fn, "exchange record size overflows size_t");
  if ((st = sc_workspace_create(&ws, chain, bs)) != SC_OK) goto done;
  if ((st = sc_workspace_set_threads(ws, sc__train_threads_for(chain, bs, dist, opts->threads))) !=
      SC_OK)
    goto done;
  if (opts->precision != SC_PRECISION_FP32 &&
      (st = sc_workspace_set_precision(ws, opts->precision)) != SC_OK)
    goto done;
  if ((st = sc_optimizer_create(&opt, &opts->optim, np)) != SC_OK) goto done;
  opt->prec = f64 ? 2 : 1;
  sc_workspace_set_dropout(ws, opts->seed, 0);
  if (opts->profile && (st = sc_workspace_profile(ws, 1)) != SC_OK) goto done;
  tiles = sc__train_tiles(ws, chain, loss, xv, target, n, bs, shuffle, f64);
  g = malloc(np * es);
  pbak = malloc(np * es);
  if (shuffle) idx = malloc(sc__mul(n, sizeof(size_t), &ok));
  if (ckpath) cktmp = malloc(sc__add(strlen(ckpath), SC__TMP_EXTRA, &ok));
  if (!g || !pbak || (shuffle && !idx) || (ckpath && !cktmp)) {
    st = sc__fail(SC_ERR_NOMEM, fn,
                  "out of memory for the gradient, the sample index or a file name");
    goto done;
  }
  if (dist) {
    size_t xb = sc__mul(rec, SC__MAX_SLICES, &ok);
    if (ok) {
      xsend = malloc(xb);
      xrecv = malloc(xb);
      xcounts = malloc((size_t)dist->ranks * sizeof *xcounts);
      xdispls = malloc((size_t)dist->ranks * sizeof *xdispls);
    }
    if (!xsend || !xrecv || !xcounts || !xdispls) {
      st = sc__fail(SC_ERR_NOMEM, fn,
                    "out of memory for the gradient exchange buffers (2 x %zu bytes)", xb);
      goto done;
    }
  }
  if (idx)
    for (size_t k = 0; k < n; k++) idx[k] = k;

  sc__rng rng;
  sc__rng_seed(&rng, opts->seed ^ 0x5C5C5C5C5C5C5C5Cull);
  sc__ck_identity(&ck, chain, n, bs, shuffle, opts, total);
  ck.f64 = (uint32_t)f64;
  if (opts->resume) {
    FILE *probe = fopen(ckpath, "rb");
    int e = errno;
    if (probe) fclose(probe);
    if (probe || e != ENOENT) { /* a missing checkpoint starts from the beginning */
      sc__ckpt got;
      /* p is read into g first: it is overwritten only when the whole file checks out */
      if ((st = sc__ck_read(fn, ckpath, chain, &ck, &got, g, opt->m, opt->v, idx))) goto done;
      if (got.step > total) {
        st = sc__fail(SC_ERR_ARG, fn, "'%s' is at step %llu, beyond the %zu steps of this run",
                      ckpath, (unsigned long long)got.step, total);
        goto done;
      }
      memcpy(pv, g, np * es);
      opt->t = got.t;
      memcpy(rng.s, got.rng, sizeof rng.s);
      step = (size_t)got.step, epoch = (size_t)got.epoch, s0 = (size_t)got.pos;
      sum = got.epoch_sum;
      if (s0) epoch_loss = sum / (double)s0;
      last_ck = step;
      sc_workspace_set_dropout(ws, opts->seed, step);
      if (report) report->resumed_step = step;
    }
  }
  t_start = sc__now();
  for (; epoch < opts->epochs; epoch++, s0 = 0, sum = 0) {
    if (shuffle && s0 == 0)
      for (size_t k = n - 1; k > 0; k--) { /* Fisher-Yates */
        size_t j = (size_t)sc__rng_below(&rng, (uint64_t)k + 1), tmp = idx[k];
        idx[k] = idx[j];
        idx[j] = tmp;
      }
    for (size_t s = s0; s < steps_per_epoch; s++) {
      size_t b0 = s * bs, nb = n - b0 < bs ? n - b0 : bs;
      double lv = 0;
      const unsigned char *xb = xv;
      const void *tb = target;
      const size_t *ib = NULL;
      if (idx)
        ib = idx + b0;
      else {
        xb += b0 * chain->in * es;
        tb = loss == SC_LOSS_LOGIT_CROSSENTROPY
                 ? (const void *)((const int32_t *)tb + b0)
                 : (const void *)((const unsigned char *)tb + b0 * chain->out * es);
      }
      ws->tiles0 = b0 / SC__TW; /* (with tiles: b0 a multiple of SC__TW) */
      if (!dist) {
        if (f64)
          sc__valgrad_run_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, &lv,
                              g, NULL, ws, 1, 0);
        else
          sc__valgrad_run_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, &lv, g,
                              NULL, ws, 1, 0);
      } else { /* this rank's slices, then every slice from every rank, added in order */
        size_t ns, lo, hi;
        if (f64)
          sc__valgrad_own_f64(chain, loss, p64, (const double *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        else
          sc__valgrad_own_f32(chain, loss, p32, (const float *)(const void *)xb, ib, tb, nb, ws,
                              dist->rank, dist->ranks, &ns, &lo, &hi, slice_loss);
        for (size_t q = lo; q < hi; q++) {
          unsigned char *r = xsend + (q - lo) * rec;
          memcpy(r, ws->slices + q * ws->slice_bytes + ws->tile_bytes, np * es);
          memcpy(r + rec_g, &slice_loss[q], sizeof(double));
        }
        for (int r = 0; r < dist->ranks; r++) {
          size_t rlo, rhi;
          sc__rank_slices(ns, (size_t)r, (size_t)dist->ranks, &rlo, &rhi);
          xcounts[r] = (rhi - rlo) * rec;
          xdispls[r] = rlo * rec;
        }
        int rc = dist->allgather(dist->ctx, xsend, xrecv, xcounts, xdispls);
        if (rc != 0) {
          st = sc__fail(SC_ERR_CALLBACK, fn,
                        "the gradient exchange (dist->allgather) returned %d at step %zu (rank %d "
                        "of %d)",
                        rc, step + 1, dist->rank, dist->ranks);
          goto done;
        }
        double lsum = 0;
        for (size_t q = 0; q < ns; q++) {
          const unsigned char *r = xrecv + q * rec;
          double sl;
          memcpy(&sl, r + rec_g, sizeof sl);
          lsum += sl;
          if (q == 0)
            memcpy(g, r, np * es);
          else if (f64)
            for (size_t k = 0; k < np; k++)
              ((double *)g)[k] += ((const double *)(const void *)r)[k];
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] += ((const float *)(const void *)r)[k];
        }
        lv = lsum / (double)nb;
      }
      /* the NaN guard: a poisoned loss, gradient or update never reaches p. A NaN or Inf in
       * g always makes the updated p[k] NaN or Inf (ADAM: m/sqrt(v) is NaN; SGD: p - lr g),
       * so one scan of the new p (and a copy of the old one to fall back on) covers both;
       * g is looked at only to name the culprit */
      size_t bad = np;
      uint64_t t_opt = opts->profile ? sc__ns() : 0;
      if (!isfinite(lv)) {
        st = sc__fail(SC_ERR_NONFINITE, fn,
                      "the loss became %s at step %zu (epoch %zu, minibatch %zu of %zu): p holds "
                      "the parameters after step %zu; learning rate too high?",
                      isnan(lv) ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        goto done;
      }
      if (opts->clip_norm > 0) { /* as torch.nn.utils.clip_grad_norm_ */
        double ss = 0;
        if (f64)
          for (size_t k = 0; k < np; k++) ss += ((double *)g)[k] * ((double *)g)[k];
        else
          for (size_t k = 0; k < np; k++) ss += (double)((float *)g)[k] * (double)((float *)g)[k];
        double norm = sqrt(ss);
        if (norm > opts->clip_norm) {
          double c = opts->clip_norm / (norm + 1e-6);
          if (f64)
            for (size_t k = 0; k < np; k++) ((double *)g)[k] *= c;
          else
            for (size_t k = 0; k < np; k++) ((float *)g)[k] *= (float)c;
        }
      }
      if (opts->lr_schedule == SC_LR_COSINE) /* a function of the step alone */
        opt->cfg.lr =
            opts->lr_min + (opts->optim.lr - opts->lr_min) * 0.5 *
                               (1 + cos(3.14159265358979323846 * (double)step / (double)total));
      if (!f64 && opts->optim.kind != SC_SGD) /* pbak is saved in it */
        bad = sc__train_adam_f32(opt, np >= SC__OPT_PAR_MIN ? ws->pool : NULL, p32, pbak, g, np);
      else {
        memcpy(pbak, pv, np * es);
        if (f64) {
          sc_optimizer_step_f64(opt, p64, g, np);
          bad = chain->kd->find_nonfinite(p64, np);
        } else {
          sc_optimizer_step(opt, p32, g, np);
          bad = chain->kf->find_nonfinite(p32, np);
        }
      }
      if (bad < np) {
        int nan = f64 ? isnan(p64[bad]) : isnan(p32[bad]);
        memcpy(pv, pbak, np * es);
        size_t gb = f64 ? chain->kd->find_nonfinite(g, np) : chain->kf->find_nonfinite(g, np);
        int gnan = gb < np && (f64 ? isnan(((double *)g)[gb]) : isnan(((float *)g)[gb]));
        if (gb < np)
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the gradient g[%zu] became %s at step %zu (epoch %zu, minibatch %zu of "
                        "%zu): p holds the parameters after step %zu; learning rate too high?",
                        gb, gnan ? "NaN" : "Inf", step + 1, epoch, s + 1, steps_per_epoch, step);
        else
          st = sc__fail(SC_ERR_NONFINITE, fn,
                        "the update of step %zu (epoch %zu, minibatch %zu of %zu) made p[%zu] %s: "
                        "p holds the parameters after step %zu; learning rate too high?",
                        step + 1, epoch, s + 1, steps_per_epoch, bad, nan ? "NaN" : "Inf", step);
        goto done;
      }
      step++;
      sum += lv;
      epoch_loss = sum / (double)(s + 1);
      int end = s + 1 == steps_per_epoch; /* the next step opens the next epoch */
      size_t next_epoch = end ? epoch + 1 : epoch, next_pos = end ? 0 : s + 1;
      if (writer && opts->checkpoint_every && step % opts->checkpoint_every == 0) {
        if ((st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                              opt, idx, n)))
          goto done;
        last_ck = step;
      }
      if (opts->profile) opt_ns += sc__ns() - t_opt;
      if (opts->progress && opts->progress_every && step % opts->progress_every == 0) {
        sc_progress pr = {epoch, step, total, lv, epoch_loss, sc__now() - t_start, p32, p64};
        if (opts->progress(&pr, opts->user)) {
          if (writer && last_ck != step && /* so that the stopped run can be resumed */
              (st = sc__ck_save(fn, ckpath, cktmp, &ck, step, next_epoch, next_pos, sum, &rng, pv,
                                opt, idx, n)))
            goto done;
          st = sc__fail(SC_ERR_STOPPED, fn, "stopped by the progress callback at step %zu", step);
          epoch++;
          goto done;
        }
      }
    }
  }
  if (writer && last_ck != step) /* the finished run, so that resuming it does nothing */
    st = sc__ck_save(fn, ckpath, cktmp, &ck, step, epoch, 0, 0, &rng, pv, opt, idx, n);
done:
  if (opts->profile && ws && ws->prof &&
      sc_workspace_profile_read(ws, opts->profile, opts->profile_rows) == SC_OK)
    opts->profile[chain->nlayers + 1].fwd_seconds = (double)opt_ns * 1e-9;
  if (report) {
    report->steps = step;
    report->epochs = epoch;
    report->final_loss = epoch_loss;
    report->seconds = st == SC_OK || st == SC_ERR_STOPPED ? sc__now() - t_start : 0;
  }
  free(idx);
  free(g);
  free(pbak);
  free(cktmp);
  free(xsend);
  free(xrecv);
  free(xcounts);
  free(xdispls);
  free(tiles);
  sc_optimizer_destroy(opt);
  sc_workspace_destroy(ws);
  return st;
}
sc_status sc_train(const sc_chain *chain, sc_loss loss, float *p, const sc_data *data,
                   const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 0, data->x, data->target, data->n, opts, report);
}

sc_status sc_train_f64(const sc_chain *chain, sc_loss loss, double *p, const sc_data_f64 *data,
                       const sc_train_opts *opts, sc_train_report *report) {
  SC__CHECK_NULL(data);
  return sc__train(__func__, chain, loss, p, 1, data->x, data->target, data->n, opts, report);
}
#endif /* !SC__KERNELS_ONLY */

/* ========================== the built-in AVX2 and AVX-512 sets of a two-file build */
/* The typed section once more, for AVX2 + FMA, exactly as kernels/avx2.c compiles it
 * (its flags given by pragma, the vector kernels, VOB 6): names end in _f32_avx2 and
 * _f64_avx2, the tables are sc__kt_f32_avx2in and sc__kt_f64_avx2in. Last in the file,
 * so that the pragmas (and the macros of the vector kernels) reach nothing else. */
#if SC__BUILTIN_AVX2
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#endif
#define SC__ISA_AVX2 1
#define SC__KERNELS_ONLY 1
#define SC__ISA_NAME "avx2"
#undef SC__KSTATIC
#define SC__KSTATIC static __attribute__((unused))
#define SC__KT_LINKAGE static
#define SC__KT_EXPORT_F32 sc__kt_f32_avx2in
#define SC__KT_EXPORT_F64 sc__kt_f64_avx2in
#define SC__VEC_F32 1
#define SC__VEC_F64 1
#define VOB 6
#define SC__OB 4
#define SC__TYPED 1
#define SC__BUILTIN_PASS 1
#define SC__T float
#define SC__TN(name) name##_f32_avx2
#define SC__TT(name) name##_f32
#define SC__F32 1
#include "simplechain.c"
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#define SC__T double
#define SC__TN(name) name##_f64_avx2
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "simplechain.c"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* SC__BUILTIN_AVX2 */

/* The same for AVX-512, exactly as kernels/avx512.c compiles it (VOB 8): names end in
 * _f32_avx512 and _f64_avx512, the tables are sc__kt_f32_avx512in and sc__kt_f64_avx512in. */
#if SC__BUILTIN_AVX512
#if defined(__clang__)
#pragma clang attribute push(                                                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))), apply_to = function)
#pragma clang fp contract(fast)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,prefer-vector-width=512")
#pragma GCC optimize("O3", "fp-contract=fast", "no-math-errno")
#endif
#undef SC__ISA_AVX2
#define SC__ISA_AVX512 1
#undef SC__ISA_NAME
#define SC__ISA_NAME "avx512"
#undef SC__KT_EXPORT_F32
#undef SC__KT_EXPORT_F64
#define SC__KT_EXPORT_F32 sc__kt_f32_avx512in
#define SC__KT_EXPORT_F64 sc__kt_f64_avx512in
#undef VOB
#undef SC__OB
#define VOB 8
#define SC__OB 8
#undef SC_KERNELS_VEC_F32_H
#undef SC_KERNELS_VEC_F64_H
#undef SC_KERNELS_VONE_F32_H
/* The vector kernels' own names (types and functions, not made by SC__TN) are taken by the
 * AVX2 pass: here they get a suffix. A name missing here fails the build (redefinition): at
 * once for a name that both passes define, and for an AVX-512-only one when AVX-512 flags
 * (-march=native) make the AVX2 pass define it too (test_dropin_avx512_flags builds that). */
#define sc_vf sc_vf_avx512
#define sc_vfu sc_vfu_avx512
#define sc_vi sc_vi_avx512
#define sc_vu sc_vu_avx512
#define sc_vd sc_vd_avx512
#define sc_vdl sc_vdl_avx512
#define v_act_rows v_act_rows_avx512
#define v_act_store v_act_store_avx512
#define v_bf16_pack_lanes v_bf16_pack_lanes_avx512
#define v_bf16_pack_lanes_t v_bf16_pack_lanes_t_avx512
#define v_bf16_pack_lanes_ts v_bf16_pack_lanes_ts_avx512
#define v_bf16_pack_rows v_bf16_pack_rows_avx512
#define v_bf16_pack_taps v_bf16_pack_taps_avx512
#define v_bf16_pack_taps_t v_bf16_pack_taps_t_avx512
#define v_bf16_pairs16 v_bf16_pairs16_avx512
#define v_bf16_pairs_ab v_bf16_pairs_ab_avx512
#define v_bf16_pairs_t8 v_bf16_pairs_t8_avx512
#define v_bf16_round_n v_bf16_round_n_avx512
#define v_chk_acc v_chk_acc_avx512
#define v_chk_any v_chk_any_avx512
#define v_chk_run v_chk_run_avx512
#define v_gather4x8 v_gather4x8_avx512
#define v_8x16_store v_8x16_store_avx512
#define v_gather8x16 v_gather8x16_avx512
#define v_gather8x16p v_gather8x16p_avx512
#define v_gather_cols8 v_gather_cols8_avx512
#define v_gather_rows v_gather_rows_avx512
#define v_quot v_quot_avx512
#define v_sel v_sel_avx512
#define v_tanh_inplace v_tanh_inplace_avx512
#define v_tanh_q v_tanh_q_avx512
#define v_tanh_rat v_tanh_rat_avx512
#define v_tile_bad v_tile_bad_avx512
#define v_transpose16 v_transpose16_avx512
#define v_cdx_row v_cdx_row_avx512
#define vec_transpose_f32 vec_transpose_f32_avx512
#define v_transpose8 v_transpose8_avx512
#define vec_bias_act_f32 vec_bias_act_f32_avx512
#define vec_conv_bias_act_f32 vec_conv_bias_act_f32_avx512
#define vec_conv_dw_names vec_conv_dw_names_avx512
#define vec_conv_dwl0_f32 vec_conv_dwl0_f32_avx512
#define vec_conv_dwl1_f32 vec_conv_dwl1_f32_avx512
#define vec_conv_dwl2_f32 vec_conv_dwl2_f32_avx512
#define vec_conv_dwl_f32 vec_conv_dwl_f32_avx512
#define vec_conv_dx_f32 vec_conv_dx_f32_avx512
#define vec_conv_fwd0_f32 vec_conv_fwd0_f32_avx512
#define vec_conv_fwd1_f32 vec_conv_fwd1_f32_avx512
#define vec_conv_fwd2_f32 vec_conv_fwd2_f32_avx512
#define vec_conv_fwd_f32 vec_conv_fwd_f32_avx512
#define vec_conv_fwd_names vec_conv_fwd_names_avx512
#define vec_dense_dw_f32 vec_dense_dw_f32_avx512
#define vec_dense_dwd_f64 vec_dense_dwd_f64_avx512
#define vec_dwd_lanes vec_dwd_lanes_avx512
#define vec_dense_dx_act_f64 vec_dense_dx_act_f64_avx512
#define vec_dense_dx_body_f64 vec_dense_dx_body_f64_avx512
#define vec_dense_dx_f64 vec_dense_dx_f64_avx512
#define vec_dense_dwl_f32 vec_dense_dwl_f32_avx512
#define vec_dense_dwl_n vec_dense_dwl_n_avx512
#define vec_dense_dwl_sel vec_dense_dwl_sel_avx512
#define vec_dense_dwl2_f32 vec_dense_dwl2_f32_avx512
#define vec_dense_dx_act_f32 vec_dense_dx_act_f32_avx512
#define vec_dense_dx_body vec_dense_dx_body_avx512
#define vec_dense_dx_f32 vec_dense_dx_f32_avx512
#define vec_dense_fwd_f32 vec_dense_fwd_f32_avx512
#define vec_dense_fwd_body vec_dense_fwd_body_avx512
#define vec_dense_fwd_h_f32 vec_dense_fwd_h_f32_avx512
#define vec_dense_dx_h_f32 vec_dense_dx_h_f32_avx512
#define vec_dense_dx_act_n vec_dense_dx_act_n_avx512
#define vec_dense_dx_act_h_f32 vec_dense_dx_act_h_f32_avx512
#define v_act_rows_h v_act_rows_h_avx512
#define vec_dense_fwd_f64 vec_dense_fwd_f64_avx512
#define vec_dwl_fold_f32 vec_dwl_fold_f32_avx512
#define vec_dwl_fold_f64 vec_dwl_fold_f64_avx512
#define vec_fold8 vec_fold8_avx512
#define vec_fold8x8 vec_fold8x8_avx512
#define vec_gather_f32 vec_gather_f32_avx512
#define vec_pool_bwd_f32 vec_pool_bwd_f32_avx512
#define vec_pool2_act_bwd_f32 vec_pool2_act_bwd_f32_avx512
#define vec_pool2_hits_bwd_f32 vec_pool2_hits_bwd_f32_avx512
#define vec_conv_pool_fwd_f32 vec_conv_pool_fwd_f32_avx512
#define v_pool_hits_store v_pool_hits_store_avx512
#define v_pool2_put v_pool2_put_avx512
#define v_pool2_row2 v_pool2_row2_avx512
#define v_pool2_bwd v_pool2_bwd_avx512
#define vec_pool_fwd_f32 vec_pool_fwd_f32_avx512
#define vone_dw_f64 vone_dw_f64_avx512
#define vone_dx_f64 vone_dx_f64_avx512
#define vone_fwd_f64 vone_fwd_f64_avx512
#define vone_hsum4 vone_hsum4_avx512
#define vone_rowdot vone_rowdot_avx512
#define vone_splat vone_splat_avx512
#define sc_v8f sc_v8f_avx512
#define vonef_dw vonef_dw_avx512
#define vonef_dx vonef_dx_avx512
#define vonef_fwd vonef_fwd_avx512
#define vonef_hsum8 vonef_hsum8_avx512
#define vonef_rowdot vonef_rowdot_avx512
#define vonef_splat vonef_splat_avx512
/* and the vector kernels' macros that differ by vector width are defined anew */
#undef VW
#undef V_BCAST
#undef V_FMA
#undef V_RCP
#undef v_min
#undef v_max
#undef v_ge_sel
#undef V_CONV_FWD_BLOCKS
#undef V_CONV_DW_BLOCKS
#undef V_CONV_DW_K6
#undef CDX_CB
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#define SC__T float
#define SC__TN(name) name##_f32_avx512
#define SC__TT(name) name##_f32
#define SC__F32 1
#include "simplechain.c"
#undef SC__T
#undef SC__TN
#undef SC__TT
#undef SC__F32
#define SC__T double
#define SC__TN(name) name##_f64_avx512
#define SC__TT(name) name##_f64
#define SC__F32 0
#include "simplechain.c"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif /* SC__BUILTIN_AVX512 */

#else /* ================================================ SC__TYPED: the typed section */
/* The typed section: compiled once per element type SC__T (float, double) with names
 * from SC__TN(name), and once more per ISA file in kernels/ (SC__KERNELS_ONLY). */
/* GCC vectorises these loops at -O3, and too few of them at -O2 (its "very cheap" cost model
 * leaves loops whose trip count is not a known multiple of the vector length: the portable
 * toy ran 3x slower at -O2). So a drop-in build at -O2 gets this section at -O3; the
 * arithmetic is the same (no reassociation, no contraction is asked for), so are the results.
 * Clang vectorises at -O2 already. SC_NO_O3_PRAGMA opts out. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__) &&                           \
    !defined(__OPTIMIZE_SIZE__) && !defined(SC_NO_O3_PRAGMA) && !defined(SC__KERNELS_ONLY)
#pragma GCC push_options
#pragma GCC optimize("O3")
#define SC__POP_OPTIONS 1
#endif
#ifndef SC__OB
#define SC__OB 4 /* output rows per register block; ISA files may raise it */
#endif
#define SC__IC 16 /* columns of the dW block */
#ifndef SC__CW
/* samples per column chunk of the portable dense forward and dx: their OB x CW accumulators
 * stay in registers (OB x TW of them spilled: double on AVX2 needs 32 ymm for 4 x 32).
 * Each sum keeps its order, so the chunking changes no bits. */
#define SC__CW 8
#endif
#if SC__TW % SC__CW != 0
#error "SC__CW must divide the tile width"
#endif
#ifndef SC__KSTATIC /* kernels: an ISA file may replace some, so unused is fine there */
#if defined(SC__KERNELS_ONLY) && defined(__GNUC__)
#define SC__KSTATIC static __attribute__((unused))
#else
#define SC__KSTATIC static
#endif
#endif

#if SC__F32
/* The float tanh, our own (vectorizable; kernels/vec_f32.h has the same steps on
 * vectors). With a = 2 min(|x|, 9) and E = expm1(a),
 *     tanh|x| = E / (E + 2)                      for |x| >= 0.35,
 *     tanh|x| = |x| + |x|^3 P(x^2)               for |x| <  0.35,
 * and the sign of x put back (so tanh is odd and +-0 maps to +-0). E is computed as
 * 2^n expm1(r) + (2^n - 1), r = a - n ln2 (|r| <= ln2/2, ln2 split in two so that n ln2hi
 * is exact), expm1(r) = r + r^2 q(r). E / (E + 2) has a relative condition number
 * 2 / (E + 2) <= 1 in E, so the error of E is not amplified; for small |x| the odd
 * polynomial avoids the rounding of E + 2. q and P are minimax-style fits of our own
 * (iteratively reweighted least squares on relative error): q to 1.3e-8, P to 6e-10.
 * Max error 1.5 ULP (tests/test_math.c states the bound and measures it on every path);
 * exactly +-1 from |x| = 9 on (9.125 on the vector paths), never outside [-1, 1].
 * tanh(+-inf) = +-1 and tanh(NaN) is NaN (the NaN propagates, as on the vector paths). */
/* c ? a : b as bit operations: a ternary here keeps GCC from vectorizing the loop */
static inline float SC__TN(sc__fsel)(int c, float a, float b) {
  uint32_t m = (uint32_t)0 - (uint32_t)c;
  return sc__fof((sc__fbits(a) & m) | (sc__fbits(b) & ~m));
}
static inline float SC__TN(sc__tanh)(float x) {
  float ax = sc__fof(sc__fbits(x) & 0x7fffffffu);
  float a = 2.0f * SC__TN(sc__fsel)(ax > 9.0f, 9.0f, ax); /* NaN stays NaN: tanh(NaN) is NaN */
  float t = a * 1.44269504f + 12582912.0f; /* 1.5 2^23: round(a / ln2) lands in the low bits */
  float n = t - 12582912.0f;
  float r = a - n * 0.693145752f; /* ln2 high part: n ln2hi is exact for n <= 26 */
  r = r - n * 1.42860677e-06f;    /* ln2 low part */
  float q =
      (((1.38825155e-3f * r + 8.36654752e-3f) * r + 4.16672006e-2f) * r + 1.66665435e-1f) * r +
      4.99999970e-1f;
  float p = (r * r) * q + r;                             /* expm1(r) */
  float s = sc__fof((sc__fbits(t) << 23) + 0x3f800000u); /* 2^n */
  float E = s * p + (s - 1.0f);                          /* expm1(a) */
  float y = E / (E + 2.0f);
  float z = ax * ax;
  float ys = (ax * z) * (((1.92903522e-02f * z - 5.36949411e-02f) * z + 1.33321747e-01f) * z -
                         3.33333194e-01f) +
             ax;
  y = SC__TN(sc__fsel)(ax < 0.35f, ys, y);
  return sc__fof(sc__fbits(y) | (sc__fbits(x) & 0x80000000u));
}
#define SC__TANH(v) SC__TN(sc__tanh)(v)
#define SC__EXPMAX 80.0f /* exp of this is finite in float */
#define SC__EXP(v) expf(v)
#define SC__EXPM1(v) expm1f(v)
#define SC__LOG1P(v) log1pf(v)
#define SC__LOG(v) logf(v)
#define SC__FABS(v) fabsf(v)
#else
/* The double tanh, our own, the float one's method in double (vectorizable: the loops over
 * it are auto-vectorized in the kernel-set builds). With a = 2 min(|x|, 19.1) and E =
 * expm1(a): tanh|x| = E / (E + 2) for |x| >= 0.35, else x + x^3 P(x^2) (below 0.35 the
 * quotient's roundings would reach 2.15 ULP). E = 2^n expm1(r) + (2^n - 1), r = a - n ln2
 * (Cody-Waite, ln2 in two parts so that n ln2hi is exact), expm1(r) = r + r^2 q(r). q (degree
 * 10 on |r| <= ln2/2, by Estrin's scheme) and P (degree 8 in x^2 on |x| <= 0.35, Horner) are
 * Chebyshev fits (scripts/fit-tanh-f64.py: mpmath, 50 digits, rounded to double): largest error of
 * the rounded coefficients 2.5e-18 in q and 1.9e-17 in P (2.3e-18 after the x^3 factor). They
 * replaced Taylor polynomials of degree 12 and 13 (session 12): 2.54 -> 2.16 ns per element,
 * the same 1.48 ULP. Estrin for q: its short dependency chain took 2.78 to 2.55 ns with the
 * Taylor terms; Estrin for P was slower (more operations, and that chain is not the critical
 * one). Exactly +-1 from |x| = 19.1 on (tanh rounds to 1 from 19.06), odd, never outside
 * [-1, 1]; max error 1.48 ULP measured, 2 bounded by tests/test_math.c (test_tanh_f64_ulp).
 * make bench-tanh (AVX2, Zen 4) before the fits: 2.55 ns per element, against 5.40 for SLEEF's
 * 1-ULP tanhd4_u10 (used here before) and 2.75 for its 3.5-ULP u35. Tried: correcting E / (E +
 * 2) with its exact residual instead of the small-|x| polynomial (2.02 ns) reached 1.96 ULP
 * near 0.2 and 2.8 near 19 (1 - y is inexact there). */
static inline double SC__TN(sc__dsel)(int c, double a, double b) {
  uint64_t m = (uint64_t)0 - (uint64_t)c;
  return sc__dof((sc__dbits(a) & m) | (sc__dbits(b) & ~m));
}
static inline double SC__TN(sc__tanh)(double x) {
  double ax = sc__dof(sc__dbits(x) & 0x7fffffffffffffffu);
  double a = 2.0 * SC__TN(sc__dsel)(ax > 19.1, 19.1, ax); /* NaN stays NaN */
  double t = a * 1.4426950408889634 + 6755399441055744.0; /* 1.5 2^52: round(a / ln2) */
  double n = t - 6755399441055744.0;
  double r = a - n * 0.6931471787393093; /* ln2 high part (28 bits): n ln2hi exact */
  r = r - n * 1.8206359985041462e-09;    /* ln2 low part */
  /* q by Estrin's scheme (a short dependency chain: the loop runs at its latency) */
  double r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  double q01 = 0.1666666666666667 * r + 0.5;
  double q23 = 0.008333333333326084 * r + 0.04166666666666667;
  double q45 = 0.0001984126987500228 * r + 0.0013888888888883711;
  double q67 = 2.755725517000089e-06 * r + 2.480158732567746e-05;
  double q89 = 2.5105312729622103e-08 * r + 2.755727347871858e-07;
  double q0_3 = q23 * r2 + q01, q4_7 = q67 * r2 + q45;
  double q8_10 = 2.09147553258932e-09 * r2 + q89;
  double q = (q8_10 * r8 + q4_7 * r4) + q0_3;
  double pm = r2 * q + r;                                          /* expm1(r) */
  double sc = sc__dof((sc__dbits(t) << 52) + 0x3ff0000000000000u); /* 2^n */
  double E = sc * pm + (sc - 1.0);                                 /* expm1(a) */
  double y = E / (E + 2.0);
  double z = ax * ax;
  double P = -0.00019202753283131075;
  P = P * z + 0.0005796641245845887;
  P = P * z - 0.0014545775399280403;
  P = P * z + 0.003592038401479678;
  P = P * z - 0.00886323175761739;
  P = P * z + 0.02186948844673358;
  P = P * z - 0.053968253967190176;
  P = P * z + 0.13333333333332845;
  P = P * z - 0.33333333333333331;
  double ys = (ax * z) * P + ax;
  y = SC__TN(sc__dsel)(ax < 0.35, ys, y);
  return sc__dof(sc__dbits(y) | (sc__dbits(x) & 0x8000000000000000u));
}
#define SC__TANH(v) SC__TN(sc__tanh)(v)
#define SC__EXPMAX 700.0
#define SC__EXP(v) exp(v)
#define SC__EXPM1(v) expm1(v)
#define SC__LOG1P(v) log1p(v)
#define SC__LOG(v) log(v)
#define SC__FABS(v) fabs(v)
#endif

#define SC__GELU_K0 ((SC__T)0.7978845608028654) /* sqrt(2/pi) */
#define SC__GELU_K1 ((SC__T)0.044715)

/* ---------------------------------------------------------------- activations */
#if defined(SC__KERNELS_ONLY) && defined(SC_HAVE_SLEEF)
#include "kernels/sleef.h" /* vector exp / log1p / double tanh for this ISA */
#define SC__SLEEF 1
#endif

/* a[t] = act(z[t]) for t < n; zs (if not NULL) keeps z for the pullback */
static inline void SC__TN(sc__act_n)(SC__T *restrict a, SC__T *restrict zs, const SC__T *restrict z,
                                     size_t n, sc_act act) {
  size_t t;
  if (zs)
    for (t = 0; t < n; t++) zs[t] = z[t];
  switch (act) {
  case SC_IDENTITY:
    for (t = 0; t < n; t++) a[t] = z[t];
    break;
  case SC_RELU:
    for (t = 0; t < n; t++) a[t] = z[t] < 0 ? 0 : z[t]; /* NaN stays NaN (max(0, z) in SIMD) */
    break;
  case SC_TANH:
    for (t = 0; t < n; t++) a[t] = SC__TANH(z[t]);
    break;
  case SC_SIGMOID:
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -z[t];
    SC__TN(sc__sleef_exp)(a, a, n);
    for (t = 0; t < n; t++) a[t] = 1 / (1 + a[t]);
#else
    for (t = 0; t < n; t++) a[t] = 1 / (1 + SC__EXP(-z[t]));
#endif
    break;
  case SC_SOFTPLUS:
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -SC__FABS(z[t]);
    SC__TN(sc__sleef_exp)(a, a, n);
    SC__TN(sc__sleef_log1p)(a, a, n);
    for (t = 0; t < n; t++) a[t] += z[t] > 0 ? z[t] : 0;
#else
    for (t = 0; t < n; t++) a[t] = (z[t] > 0 ? z[t] : 0) + SC__LOG1P(SC__EXP(-SC__FABS(z[t])));
#endif
    break;
  case SC_GELU: /* 0.5 z (1 + tanh(u)) = z sigmoid(2u): no cancellation in the tail */
#ifdef SC__SLEEF
    for (t = 0; t < n; t++) a[t] = -2 * SC__GELU_K0 * (z[t] + SC__GELU_K1 * z[t] * z[t] * z[t]);
    SC__TN(sc__sleef_exp)(a, a, n);
    for (t = 0; t < n; t++) a[t] = z[t] / (1 + a[t]);
#else
    for (t = 0; t < n; t++) {
      SC__T v = z[t], m2u = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v * v * v);
      a[t] = v / (1 + SC__EXP(m2u)); /* exp overflows to inf in the far tail: -0 */
    }
#endif
    break;
  }
}

/* one tile row */
static inline void SC__TN(sc__act_row)(SC__T *restrict a, SC__T *restrict zs,
                                       const SC__T *restrict z, sc_act act) {
  SC__TN(sc__act_n)(a, zs, z, SC__TW, act);
}

/* d[k] *= act'(.), from the saved output a (or z for gelu). softplus and gelu take their exp
 * (expm1) for SC__ACT_CHUNK elements at a time into a buffer on the stack, by SLEEF's vector
 * functions in the ISA builds: one libm call per element was half of a valgrad of 100 -> 100
 * softplus -> 100 -> 3 (bench/RESULTS.md, session 26) */
#define SC__ACT_CHUNK 64
SC__KSTATIC void SC__TN(sc__act_bwd)(SC__T *restrict d, const SC__T *restrict a,
                                     const SC__T *restrict z, size_t n, sc_act act) {
  size_t k;
  switch (act) {
  case SC_IDENTITY: break;
  case SC_RELU:
    for (k = 0; k < n; k++) d[k] = a[k] <= 0 ? 0 : d[k]; /* a NaN output passes d on */
    break;
  case SC_TANH:
    for (k = 0; k < n; k++) d[k] *= 1 - a[k] * a[k];
    break;
  case SC_SIGMOID:
    for (k = 0; k < n; k++) d[k] *= a[k] * (1 - a[k]);
    break;
  case SC_SOFTPLUS: /* sigmoid(z) = 1 - exp(-softplus(z)) */
#ifdef SC__SLEEF
    for (k = 0; k < n; k += SC__ACT_CHUNK) {
      size_t m = n - k < SC__ACT_CHUNK ? n - k : SC__ACT_CHUNK, j;
      SC__T e[SC__ACT_CHUNK];
      for (j = 0; j < m; j++) e[j] = -a[k + j];
      SC__TN(sc__sleef_expm1)(e, e, m);
      for (j = 0; j < m; j++) d[k + j] *= -e[j];
    }
#else
    for (k = 0; k < n; k++) d[k] *= -SC__EXPM1(-a[k]);
#endif
    break;
  case SC_GELU: /* d/dz z s(2u) = s + z 2u' s (1 - s), with 1 - s = e s, e = exp(-2u) */
    for (k = 0; k < n; k += SC__ACT_CHUNK) {
      size_t m = n - k < SC__ACT_CHUNK ? n - k : SC__ACT_CHUNK, j;
      SC__T e[SC__ACT_CHUNK];
      for (j = 0; j < m; j++) {
        SC__T v = z[k + j], v2 = v * v;
        e[j] = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v2 * v); /* -2u, as below */
      }
#ifdef SC__SLEEF
      SC__TN(sc__sleef_exp)(e, e, m);
#else
      for (j = 0; j < m; j++) e[j] = SC__EXP(e[j]);
#endif
      for (j = 0; j < m; j++) {
        SC__T v = z[k + j], v2 = v * v, m2u = -2 * SC__GELU_K0 * (v + SC__GELU_K1 * v2 * v);
        SC__T sg = 1 / (1 + e[j]);
        SC__T w = m2u < SC__EXPMAX ? e[j] * sg * sg : 0; /* s (1 - s); 0 where exp overflowed */
        SC__T du = SC__GELU_K0 * (1 + 3 * SC__GELU_K1 * v2);
        d[k + j] *= sg + (w == 0 ? 0 : v * 2 * du * w);
      }
    }
    break;
  }
}

/* sc__act_bwd with the bias gradient's lanes (bl: K rows of SC__TW) summed in the same pass
 * over d: K channels of npos positions (a dense layer: K outputs, npos 1); each channel's sums
 * in a local row (in registers; bl and d share the tile, so summed in place they were loaded and
 * stored at every position). The same operations in the same order as act_bwd then the sums:
 * the same bits. LeNet5's conv1, 20,000 images, 1 thread (Zen 4): the in-place sums took 9.5 of
 * its 41-ms backward in bf16 */
SC__KSTATIC void SC__TN(sc__act_bwd_lane)(SC__T *restrict d, SC__T *restrict bl,
                                          const SC__T *restrict a, const SC__T *restrict z,
                                          size_t K, size_t npos, sc_act act) {
  int fused = act == SC_IDENTITY || act == SC_RELU || act == SC_TANH;
  if (!fused) SC__TN(sc__act_bwd)(d, a, z, K * npos * SC__TW, act);
  for (size_t k = 0; k < K; k++) {
    SC__T sum[SC__TW];
    memcpy(sum, bl + k * SC__TW, sizeof sum);
    SC__T *dk = d + k * npos * SC__TW;
    const SC__T *ak = a + k * npos * SC__TW;
    for (size_t q = 0; q < npos * SC__TW; q += SC__TW)
      for (int t = 0; t < SC__TW; t++) {
        SC__T v = dk[q + (size_t)t];
        if (act == SC_RELU)
          v = ak[q + (size_t)t] <= 0 ? 0 : v;
        else if (act == SC_TANH)
          v *= 1 - ak[q + (size_t)t] * ak[q + (size_t)t];
        dk[q + (size_t)t] = v;
        sum[t] += v;
      }
    memcpy(bl + k * SC__TW, sum, sizeof sum);
  }
}

/* ---------------------------------------------------------------- dense kernels */
SC__KSTATIC void SC__TN(sc__dense_fwd)(SC__T *restrict a, SC__T *restrict z,
                                       const SC__T *restrict W, const SC__T *restrict b,
                                       const SC__T *restrict x, size_t O, size_t I, sc_act act) {
  size_t o = 0;
  for (; o + SC__OB <= O; o += SC__OB) {
    SC__T acc[SC__OB][SC__TW];
    const SC__T *w = W + o * I;
    for (int t0 = 0; t0 < SC__TW; t0 += SC__CW) { /* OB x CW accumulators in registers */
      SC__T ac[SC__OB][SC__CW];
      for (int k = 0; k < SC__OB; k++) {
        SC__T bk = b ? b[o + k] : 0;
        for (int t = 0; t < SC__CW; t++) ac[k][t] = bk;
      }
      for (size_t i = 0; i < I; i++) {
        const SC__T *xi = x + i * SC__TW + t0;
        for (int k = 0; k < SC__OB; k++) {
          SC__T wk = w[(size_t)k * I + i];
          for (int t = 0; t < SC__CW; t++) ac[k][t] += wk * xi[t];
        }
      }
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) acc[k][t0 + t] = ac[k][t];
    }
    for (int k = 0; k < SC__OB; k++)
      SC__TN(sc__act_row)(a + (o + k) * SC__TW, z ? z + (o + k) * SC__TW : NULL, acc[k], act);
  }
  for (; o < O; o++) { /* one row: TW accumulators fit, and more chains hide the latency */
    SC__T acc[SC__TW];
    const SC__T *w = W + o * I;
    SC__T bo = b ? b[o] : 0;
    for (int t = 0; t < SC__TW; t++) acc[t] = bo;
    for (size_t i = 0; i < I; i++) {
      const SC__T *xi = x + i * SC__TW;
      SC__T wi = w[i];
      for (int t = 0; t < SC__TW; t++) acc[t] += wi * xi[t];
    }
    SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, act);
  }
}

SC__KSTATIC void SC__TN(sc__dense_dw)(SC__T *restrict gW, const SC__T *restrict dz,
                                      const SC__T *restrict xT, size_t O, size_t I, size_t ld) {
  size_t o = 0;
  for (; o + SC__OB <= O; o += SC__OB) {
    for (size_t i0 = 0; i0 < I; i0 += SC__IC) {
      SC__T acc[SC__OB][SC__IC];
      for (int k = 0; k < SC__OB; k++)
        for (int c = 0; c < SC__IC; c++) acc[k][c] = 0;
      for (int t = 0; t < SC__TW; t++) {
        const SC__T *xr = xT + (size_t)t * ld + i0;
        for (int k = 0; k < SC__OB; k++) {
          SC__T d = dz[(o + k) * SC__TW + (size_t)t];
          for (int c = 0; c < SC__IC; c++) acc[k][c] += d * xr[c];
        }
      }
      size_t nc = I - i0 < SC__IC ? I - i0 : SC__IC;
      for (int k = 0; k < SC__OB; k++) {
        SC__T *gr = gW + (o + k) * I + i0;
        for (size_t c = 0; c < nc; c++) gr[c] += acc[k][c];
      }
    }
  }
  for (; o < O; o++) {
    for (size_t i0 = 0; i0 < I; i0 += SC__IC) {
      SC__T acc[SC__IC];
      for (int c = 0; c < SC__IC; c++) acc[c] = 0;
      for (int t = 0; t < SC__TW; t++) {
        const SC__T *xr = xT + (size_t)t * ld + i0;
        SC__T d = dz[o * SC__TW + (size_t)t];
        for (int c = 0; c < SC__IC; c++) acc[c] += d * xr[c];
      }
      size_t nc = I - i0 < SC__IC ? I - i0 : SC__IC;
      SC__T *gr = gW + o * I + i0;
      for (size_t c = 0; c < nc; c++) gr[c] += acc[c];
    }
  }
}

SC__KSTATIC void SC__TN(sc__dense_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                      const SC__T *restrict dz, size_t O, size_t I) {
  size_t i = 0;
  for (; i + SC__OB <= I; i += SC__OB)
    for (int t0 = 0; t0 < SC__TW; t0 += SC__CW) { /* OB x CW accumulators in registers */
      SC__T acc[SC__OB][SC__CW];
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) acc[k][t] = 0;
      for (size_t o = 0; o < O; o++) {
        const SC__T *d = dz + o * SC__TW + t0;
        const SC__T *w = W + o * I + i;
        for (int k = 0; k < SC__OB; k++) {
          SC__T wk = w[k];
          for (int t = 0; t < SC__CW; t++) acc[k][t] += wk * d[t];
        }
      }
      for (int k = 0; k < SC__OB; k++)
        for (int t = 0; t < SC__CW; t++) dx[(i + k) * SC__TW + (size_t)(t0 + t)] = acc[k][t];
    }
  for (; i < I; i++) { /* one row: TW accumulators */
    SC__T acc[SC__TW];
    for (int t = 0; t < SC__TW; t++) acc[t] = 0;
    for (size_t o = 0; o < O; o++) {
      const SC__T *d = dz + o * SC__TW;
      SC__T wi = W[o * I + i];
      for (int t = 0; t < SC__TW; t++) acc[t] += wi * d[t];
    }
    for (int t = 0; t < SC__TW; t++) dx[i * SC__TW + (size_t)t] = acc[t];
  }
}

/* ---------------------------------------------------------------- conv / pool kernels */
/* Convolutions see their input as a tile of C x Hp x Wp rows (already zero-padded when
 * the layer pads), each row SC__TW samples. Output position (u, v) reads the R taps
 * x + (u*sh*Wp + v*sw + roff[r]) rows: the convolution is a dense layer over windows. */
SC__KSTATIC void SC__TN(sc__conv_fwd)(SC__T *restrict a, SC__T *restrict z, const SC__T *restrict W,
                                      const SC__T *restrict b, const SC__T *restrict x,
                                      const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  const size_t *roff = P->roff;
  for (size_t k = 0; k < P->oc; k++) {
    const SC__T *w = W + k * R;
    SC__T bk = b ? b[k] : 0;
    for (size_t u = 0; u < OH; u++)
      for (size_t v = 0; v < OW; v++) {
        SC__T acc[SC__TW];
        const SC__T *base = x + (u * sh * WP + v * sw) * SC__TW;
        for (int t = 0; t < SC__TW; t++) acc[t] = bk;
        for (size_t r = 0; r < R; r++) {
          const SC__T *xr = base + roff[r] * SC__TW;
          SC__T wr = w[r];
          for (int t = 0; t < SC__TW; t++) acc[t] += wr * xr[t];
        }
        size_t o = (k * OH + u) * OW + v;
        SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, P->spec.act);
      }
  }
}

/* conv dW in lane form: wl[(k*R + r)*TW + t] += sum_{u,v} dz[k][u][v][t] x[tap][t] */
SC__KSTATIC void SC__TN(sc__conv_dwl)(SC__T *restrict wl, const SC__T *restrict dz,
                                      const SC__T *restrict x, const sc__lplan *P) {
  size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;
  for (size_t k = 0; k < P->oc; k++)
    for (size_t r = 0; r < R; r++) {
      SC__T acc[SC__TW];
      SC__T *w = wl + (k * R + r) * SC__TW;
      for (int t = 0; t < SC__TW; t++) acc[t] = w[t];
      const SC__T *xr = x + P->roff[r] * SC__TW;
      for (size_t u = 0; u < OH; u++)
        for (size_t v = 0; v < OW; v++) {
          const SC__T *d = dz + ((k * OH + u) * OW + v) * SC__TW;
          const SC__T *xv = xr + (u * sh * WP + v * sw) * SC__TW;
          for (int t = 0; t < SC__TW; t++) acc[t] += d[t] * xv[t];
        }
      for (int t = 0; t < SC__TW; t++) w[t] = acc[t];
    }
}

/* conv input gradient (unpadded input layout): dx[c][y][x] = sum over the taps (k, i, j)
 * with y + ph = u*sh + i and x + pw = v*sw + j of W[k][c][i][j] dz[k][u][v] */
SC__KSTATIC void SC__TN(sc__conv_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                     const SC__T *restrict dz, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, C = P->ic, R = P->R;
  for (size_t c = 0; c < C; c++)
    for (size_t y = 0; y < P->ih; y++)
      for (size_t xx = 0; xx < P->iw; xx++) {
        SC__T acc[SC__TW];
        for (int t = 0; t < SC__TW; t++) acc[t] = 0;
        for (size_t i = 0; i < KH; i++) {
          size_t yy = y + ph;
          if (yy < i || (yy - i) % sh) continue;
          size_t u = (yy - i) / sh;
          if (u >= OH) continue;
          for (size_t j = 0; j < KW; j++) {
            size_t xp = xx + pw;
            if (xp < j || (xp - j) % sw) continue;
            size_t v = (xp - j) / sw;
            if (v >= OW) continue;
            for (size_t k = 0; k < P->oc; k++) {
              SC__T w = W[k * R + (c * KH + i) * KW + j];
              const SC__T *d = dz + ((k * OH + u) * OW + v) * SC__TW;
              for (int t = 0; t < SC__TW; t++) acc[t] += w * d[t];
            }
          }
        }
        SC__T *o = dx + ((c * P->ih + y) * P->iw + xx) * SC__TW;
        for (int t = 0; t < SC__TW; t++) o[t] = acc[t];
      }
}

/* zero-padded copy of a C x H x W tile into C x Hp x Wp */
static void SC__TN(sc__pad)(SC__T *restrict xp, const SC__T *restrict x, const sc__lplan *P) {
  size_t ph = P->spec.ph, pw = P->spec.pw;
  memset(xp, 0, P->ic * P->hp * P->wp * SC__TW * sizeof(SC__T));
  for (size_t c = 0; c < P->ic; c++)
    for (size_t y = 0; y < P->ih; y++)
      memcpy(xp + ((c * P->hp + y + ph) * P->wp + pw) * SC__TW,
             x + ((c * P->ih + y) * P->iw) * SC__TW, P->iw * SC__TW * sizeof(SC__T));
}

SC__KSTATIC void SC__TN(sc__pool_fwd)(SC__T *restrict a, const SC__T *restrict x,
                                      const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        SC__T m[SC__TW];
        const SC__T *x0 = x + ((c * P->ih + u * KH) * P->iw + v * KW) * SC__TW;
        for (int t = 0; t < SC__TW; t++) m[t] = x0[t];
        for (size_t i = 0; i < KH; i++)
          for (size_t j = 0; j < KW; j++) {
            const SC__T *xi = x0 + (i * P->iw + j) * SC__TW;
            for (int t = 0; t < SC__TW; t++) m[t] = xi[t] > m[t] ? xi[t] : m[t];
          }
        SC__T *o = a + ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int t = 0; t < SC__TW; t++) o[t] = m[t];
      }
}

/* the gradient goes to the first element of each window equal to its max */
SC__KSTATIC void SC__TN(sc__pool_bwd)(SC__T *restrict dx, const SC__T *restrict x,
                                      const SC__T *restrict a, const SC__T *restrict dz,
                                      const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  if (P->oh * KH != P->ih || P->ow * KW != P->iw) /* rows/columns outside every window */
    memset(dx, 0, P->in * SC__TW * sizeof(SC__T));
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        size_t o = ((c * P->oh + u) * P->ow + v) * SC__TW;
        SC__T taken[SC__TW];
        for (int t = 0; t < SC__TW; t++) taken[t] = 0;
        for (size_t i = 0; i < KH; i++)
          for (size_t j = 0; j < KW; j++) {
            size_t q = ((c * P->ih + u * KH + i) * P->iw + v * KW + j) * SC__TW;
            for (int t = 0; t < SC__TW; t++) {
              int hit = x[q + (size_t)t] == a[o + (size_t)t] && taken[t] == 0;
              dx[q + (size_t)t] = hit ? dz[o + (size_t)t] : 0;
              taken[t] = hit ? 1 : taken[t];
            }
          }
      }
}

/* dW in lane form: wl[(o*I + i)*TW + t] += dz[o][t] x[i][t] (= when first) */
SC__KSTATIC void SC__TN(sc__dense_dwl)(SC__T *restrict wl, const SC__T *restrict dz,
                                       const SC__T *restrict x, size_t O, size_t I, int first) {
  for (size_t o = 0; o < O; o++)
    for (size_t i = 0; i < I; i++) {
      SC__T *w = wl + (o * I + i) * SC__TW;
      if (first) /* the slice's first tile writes: no zeroing pass */
        for (int t = 0; t < SC__TW; t++)
          w[t] = dz[o * SC__TW + (size_t)t] * x[i * SC__TW + (size_t)t];
      else
        for (int t = 0; t < SC__TW; t++)
          w[t] += dz[o * SC__TW + (size_t)t] * x[i * SC__TW + (size_t)t];
    }
}

/* gw[k] += the TW lanes of wl[k], in a fixed order: 8 partial sums (lanes t = j mod 8, in
 * lane order), then added pairwise. A single chain of TW dependent additions per weight
 * was the slowest part of a small double-precision valgrad (the BNN of examples/bnn.c). */
SC__KSTATIC void SC__TN(sc__dwl_fold)(SC__T *restrict gw, const SC__T *restrict wl, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const SC__T *w = wl + k * SC__TW;
    SC__T s[8];
    for (int j = 0; j < 8; j++) s[j] = w[j];
    for (int t = 8; t < SC__TW; t += 8)
      for (int j = 0; j < 8; j++) s[j] += w[t + j];
    gw[k] += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
}

/* ---------------------------------------------------------------- kernel choice */
/* An ISA file may bring hand-vectorized kernels for this type; else the portable ones. */
#if SC__F32 && defined(SC__VEC_F32)
/* The vector kernels (float): GCC/Clang vector extensions and intrinsics.
 *
 * Compiled in the typed section when an ISA instantiation (kernels/avx2.c,
 * kernels/avx512.c, or a built-in set at the end of this file) defines SC__VEC_F32: one
 * source, compiled per ISA. VW is the native vector width in floats (16 for AVX-512, 8 for AVX2); a
 * tile row of SC__TW samples is NV = SC__TW / VW native vectors. VOB output rows are blocked so
 * that their VOB x NV accumulators stay in registers. The ISA files compile with
 * -ffp-contract=fast, so `acc += w * x` is one FMA.
 *
 * Dimension letters as in simplechain.c: O outputs, I inputs, ld transposed row length.
 */
#ifndef SC_KERNELS_VEC_F32_H
#define SC_KERNELS_VEC_F32_H

#ifndef VOB
#error "define VOB (rows per register block) before including vec_f32.h"
#endif

#if defined(__AVX512F__) || defined(SC__ISA_AVX512)
#define VW 16
#else
#define VW 8
#endif
#define NV (SC__TW / VW) /* native vectors per tile row */
#define NC (16 / VW)     /* native vectors per 16-column chunk of the dW block */
/* forward and dx work on column chunks of NVB vectors (AVX-512: the whole 32-sample row;
 * AVX2: 16 samples, so that VOB x NVB accumulators and the operands fit in 16 ymm) */
#define NVB (NV < 2 ? NV : 2)
/* a half tile (a batch's last tile of at most SC__TW / 2 samples): the dense kernels' _h forms
 * compute the first NVH vectors of each row, in chunks of NVBH, and store zeros in the rest */
#define NVH (NV / 2)
#define NVBH (NVB < NVH ? NVB : NVH)
#if SC__TW % VW != 0
#error "the tile width must be a multiple of the vector width"
#endif

typedef float sc_vf __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef float sc_vfu __attribute__((vector_size(VW * 4), aligned(4), may_alias));
typedef int32_t sc_vi __attribute__((vector_size(VW * 4), aligned(VW * 4)));
typedef uint32_t sc_vu __attribute__((vector_size(VW * 4), aligned(VW * 4)));

/* one float in every lane: set1, not {0} + s, which is an add GCC must keep (-0 + 0
 * is +0) and which stops it from folding the broadcast into the FMA's memory operand */
#if VW == 16
#define V_BCAST(s) ((sc_vf)_mm512_set1_ps((float)(s)))
#else
#define V_BCAST(s) ((sc_vf)_mm256_set1_ps((float)(s)))
#endif
#define V_ROW(ptr, j) (((const sc_vf *)(const void *)(ptr))[j])
#define V_ROWW(ptr, j) (((sc_vf *)(void *)(ptr))[j])

static inline __attribute__((always_inline)) sc_vf v_sel(sc_vi m, sc_vf a, sc_vf b) {
  return (sc_vf)(((sc_vi)a & m) | ((sc_vi)b & ~m)); /* m ? a : b, per lane */
}
/* min / max as single instructions (a select costs a compare and two logic ops) */
/* a * b + c as one FMA whatever the contraction pass would pick (it may fuse either
 * product of a sum of two products, which changes the rounding) */
#if VW == 16
#define V_FMA(a, b, c) ((sc_vf)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define V_FMA(a, b, c) ((sc_vf)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#endif
/* a reciprocal estimate: relative error <= 2^-14 (AVX-512), 1.5 x 2^-12 (AVX2) */
#if VW == 16
#define V_RCP(a) ((sc_vf)_mm512_rcp14_ps((__m512)(a)))
#else
#define V_RCP(a) ((sc_vf)_mm256_rcp_ps((__m256)(a)))
#endif
#if VW == 16
#define v_min(a, b) ((sc_vf)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define v_max(a, b) ((sc_vf)_mm512_max_ps((__m512)(a), (__m512)(b)))
/* x >= t ? a : b */
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm512_mask_blend_ps(_mm512_cmp_ps_mask((__m512)(x), _mm512_set1_ps(t), _CMP_GE_OQ),     \
                               (__m512)(b), (__m512)(a)))
#else
#define v_min(a, b) ((sc_vf)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define v_max(a, b) ((sc_vf)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define v_ge_sel(x, t, a, b)                                                                       \
  ((sc_vf)_mm256_blendv_ps((__m256)(b), (__m256)(a),                                               \
                           _mm256_cmp_ps((__m256)(x), _mm256_set1_ps(t), _CMP_GE_OQ)))
#endif
/* relu as max(0, z): MAXPS returns its second operand when either is NaN, so a NaN stays
 * NaN (as in the portable z < 0 ? 0 : z) */
#define v_relu(z) v_max(V_BCAST(0.0f), (z))

/* the float tanh of sc__tanh_f32 in simplechain.c, the same method and coefficients on
 * vectors, with the dependency chain shortened: a tile's tanh pass is bound by the
 * latency of each vector's chain of about 20 dependent operations (the scheduler fills
 * with waiting operations), not by operation count. So: the factor 2 is folded into
 * the log2(e) constant (t comes from min(|x|, 9) directly), the reduction r = a - n ln2
 * is one FMA with ln2 rounded to float (its error, n 1.9e-9 absolute in r, stays below
 * 0.03 ULP of tanh, because the condition number 2 / (E + 2) shrinks as n grows), and
 * q(r) is evaluated in Estrin's form. make bench-tanh: 0.165 ns per element, against
 * 0.180 for the plain transcription; the same 1.5-ULP bound (test_math; an exhaustive
 * scan of [0, 9.5] gave 1.499). A reciprocal estimate plus a correction instead of the
 * divide was measured slower: it lengthens the chain.
 * var: the planner's tanh variant (SC__TANH_DIV .. SC__TANH_RATRCP): bit 0 the reciprocal
 * form of the final quotient, bit 1 the rational form instead of expm1 (v_tanh_rat). */
static inline __attribute__((always_inline)) sc_vf v_quot(sc_vf E, sc_vf d, int rcp) {
  if (!rcp) return E / d;
  /* y0 = E r, r ~ 1 / d; y = y0 + r (E - d y0): relative error about (d r - 1)^2 */
  sc_vf r = V_RCP(d);
#if VW != 16 /* AVX2's 12-bit estimate squared is 2^-22: one Newton step on r first */
  r = V_FMA(r, V_FMA(-d, r, V_BCAST(1.0f)), r);
#endif
  sc_vf y0 = E * r;
  return V_FMA(r, V_FMA(-d, y0, E), y0);
}
/* The rational tanh ("rat", opt-in: SC_TANH_VARIANT=rat|ratrcp|fast): with a = x clamped to
 * [-9.125, 9.125] and s = a^2, tanh x ~ a P(s) / Q(s), P and Q of degree 4 with P(0) = Q(0)
 * = 1 (our own fit: iteratively reweighted least squares on the relative error over [0, 9.1],
 * 2.3e-8 before rounding), the result clamped to [-1, 1]. Odd by construction, exactly +-1
 * from |x| = 9.125 on, 12 operations and one quotient against the expm1 form's 28: make
 * bench-tanh 0.31 ns against 0.56 per element (AVX2, Zen 4). Its price is accuracy: the
 * roundings of P, Q, a P and the quotient add up to 5.41 ULP (an exhaustive scan of [0, 9.5];
 * tests/test_math.c bounds it by 6), above SLEEF's tanhf u35 (2.49), which is why it is never
 * chosen unless asked for. */
static inline __attribute__((always_inline)) sc_vf v_tanh_rat(sc_vf x, int rcp) {
  sc_vf a = v_max(V_BCAST(-9.125f), v_min(V_BCAST(9.125f), x)); /* (a NaN stays NaN) */
  sc_vf s = a * a;
  sc_vf p =
      (((1.317753462e-08f * s + 2.048119495e-05f) * s + 3.487811424e-03f) * s + 1.337447613e-01f) *
          s +
      1.0f;
  sc_vf q =
      (((7.704051086e-07f * s + 3.272921022e-04f) * s + 2.584739029e-02f) * s + 4.670778811e-01f) *
          s +
      1.0f;
  sc_vf y = v_quot(a * p, q, rcp);
  return v_max(V_BCAST(-1.0f), v_min(V_BCAST(1.0f), y));
}
static inline __attribute__((always_inline)) sc_vf v_tanh_q(sc_vf x, int var) {
  if (var & 2) return v_tanh_rat(x, var & 1);
  sc_vu sign = (sc_vu)x & 0x80000000u;
  sc_vf ax = (sc_vf)((sc_vu)x & 0x7fffffffu);
  sc_vf m = v_min(V_BCAST(9.125f), ax);    /* 9.125, not 9: tanh(9) must round to 1; NaN stays */
  sc_vf t = m * 2.88539008f + 12582912.0f; /* 2 log2(e) m + 1.5 2^23 */
  sc_vf a = m + m;
  sc_vf n = t - 12582912.0f;
  sc_vf r = a - n * 0.693147182f;
  sc_vf r2 = r * r;
  sc_vf qa = 1.66665435e-1f * r + 4.99999970e-1f;
  sc_vf qb = 8.36654752e-3f * r + 4.16672006e-2f;
  sc_vf q = (1.38825155e-3f * r2 + qb) * r2 + qa;
  sc_vf p = r2 * q + r;
  sc_vf s = (sc_vf)(((sc_vu)t << 23) + 0x3f800000u);
  sc_vf E = s * p + (s - 1.0f);
  sc_vf y = v_quot(E, E + 2.0f, var & 1);
  sc_vf z = ax * ax;
  sc_vf ys = (ax * z) * (((1.92903522e-02f * z - 5.36949411e-02f) * z + 1.33321747e-01f) * z -
                         3.33333194e-01f) +
             ax;
  y = v_ge_sel(ax, 0.35f, y, ys);
  return (sc_vf)((sc_vu)y | sign);
}

#define v_tanh(x) v_tanh_q(x, 0)

#if defined(SC_TANH_SLEEF) && defined(SC__SLEEF)
/* opt-in (make SC_TANH=sleef): SLEEF's 3.5-ULP tanhf instead of ours */
#define V_TANH(v) SC__SLEEF_TANHF(v)
#else
#define V_TANH(v) v_tanh(v)
#endif

/* a[k] = tanh(a[k]) for n native vectors: a tight loop, so that the polynomial's
 * constants stay in registers (applied to a block's 16 accumulators at once, they
 * spilled). var: the tanh variant (SC__TANH_*) */
static void v_tanh_inplace(float *restrict a, size_t n, int var) {
  sc_vf *A = (sc_vf *)(void *)a;
  switch (var) {
  case SC__TANH_RCP:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RCP);
    return;
  case SC__TANH_RAT:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RAT);
    return;
  case SC__TANH_RATRCP:
    for (size_t k = 0; k < n; k++) A[k] = v_tanh_q(A[k], SC__TANH_RATRCP);
    return;
  default:
    for (size_t k = 0; k < n; k++) A[k] = V_TANH(A[k]);
  }
}

/* activation of one accumulated tile row (NV vectors), stored to a (and z if asked) */
static inline __attribute__((always_inline)) void v_act_store(float *restrict a, float *restrict z,
                                                              const sc_vf *acc, sc_act act) {
  int j;
  if (SC__IS_TANH_ACT(act)) {
    for (j = 0; j < NV; j++) V_ROWW(a, j) = acc[j]; /* (then in place, from L1) */
    v_tanh_inplace(a, NV, (int)act - 32);
    return;
  }
  switch (act) {
  case SC_IDENTITY:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = acc[j];
    return;
  case SC_RELU:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = v_relu(acc[j]);
    return;
  case SC_TANH:
    for (j = 0; j < NV; j++) V_ROWW(a, j) = V_TANH(acc[j]);
    return;
  default: { /* not hot: the portable row function */
    float tmp[SC__TW] __attribute__((aligned(64)));
    for (j = 0; j < NV; j++) V_ROWW(tmp, j) = acc[j];
    SC__TN(sc__act_row)(a, z, tmp, act);
    return;
  }
  }
}

/* pre-activations (relu applied: the other activations run afterwards as a pass over
 * whole rows) of exactly NB output rows starting at o, column chunk by column chunk
 * (NB x nvb_ accumulators in registers), the first nv_ vectors of each row (NV, or NVH for a
 * half tile: the rest stored as zeros); o += NB */
#define V_FWD_BODY(NB)                                                                             \
  {                                                                                                \
    const float *w = W + o * I;                                                                    \
    for (int jc = 0; jc < nv_; jc += nvb_) {                                                       \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                       \
        sc_vf bk = V_BCAST(b ? b[o + k] : 0.0f);                                                   \
        for (int j = 0; j < nvb_; j++) acc[k][j] = bk;                                             \
      }                                                                                            \
      for (size_t i = 0; i < I; i++) {                                                             \
        sc_vf xv[NVB];                                                                             \
        for (int j = 0; j < nvb_; j++) xv[j] = V_ROW(x + i * SC__TW, jc + j);                      \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[(size_t)k * I + i]);                                                \
          for (int j = 0; j < nvb_; j++) acc[k][j] += wk * xv[j];                                  \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++)          \
          V_ROWW(a + (o + k) * SC__TW, jc + j) = act == SC_RELU ? v_relu(acc[k][j]) : acc[k][j];   \
    }                                                                                              \
    for (int k = 0; k < NB; k++) /* (a half tile's other half) */                                  \
      for (int j = nv_; j < NV; j++) V_ROWW(a + (o + k) * SC__TW, j) = V_BCAST(0.0f);              \
    o += NB;                                                                                       \
  }

/* the activation pass after the GEMM: tanh in place, the others (not hot) through the
 * portable row function; identity and relu are done */
static void v_act_rows(float *restrict a, float *restrict z, size_t O, sc_act act) {
  if (act == SC_IDENTITY || act == SC_RELU) return;
  if (act == SC_TANH || SC__IS_TANH_ACT(act)) {
    v_tanh_inplace(a, O * NV, act == SC_TANH ? SC__TANH_DIV : (int)act - 32);
    return;
  }
  for (size_t o = 0; o < O; o++) {
    float tmp[SC__TW] __attribute__((aligned(64)));
    for (int j = 0; j < NV; j++) V_ROWW(tmp, j) = V_ROW(a + o * SC__TW, j);
    SC__TN(sc__act_row)(a + o * SC__TW, z ? z + o * SC__TW : NULL, tmp, act);
  }
}

/* the activation pass of a half tile: tanh on the first NVH vectors of each row (the rest
 * are zeros, and tanh 0 = 0), the others as v_act_rows on whole rows */
static void v_act_rows_h(float *restrict a, float *restrict z, size_t O, sc_act act) {
  if (act == SC_TANH || SC__IS_TANH_ACT(act)) {
    int var = act == SC_TANH ? SC__TANH_DIV : (int)act - 32;
    for (size_t o = 0; o < O; o++) v_tanh_inplace(a + o * SC__TW, NVH, var);
    return;
  }
  v_act_rows(a, z, O, act);
}

/* a = act(a + b) in place, row by row (after libxsmm's GEMM wrote a = W x); z as above */
static void vec_bias_act_f32(float *restrict a, float *restrict z, const float *restrict b,
                             size_t O, sc_act act) {
  for (size_t o = 0; o < O; o++) {
    sc_vf acc[NV], bk = V_BCAST(b ? b[o] : 0.0f);
    for (int j = 0; j < NV; j++) acc[j] = V_ROW(a + o * SC__TW, j) + bk;
    v_act_store(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc, act);
  }
}

/* a conv output's bias (per channel, over npos rows) and activation, in place */
static void vec_conv_bias_act_f32(float *restrict a, float *restrict z, const float *restrict b,
                                  size_t K, size_t npos, sc_act act) {
  for (size_t k = 0; k < K; k++) {
    sc_vf bk = V_BCAST(b ? b[k] : 0.0f);
    for (size_t q = k * npos; q < (k + 1) * npos; q++) {
      sc_vf acc[NV];
      for (int j = 0; j < NV; j++) acc[j] = V_ROW(a + q * SC__TW, j) + bk;
      v_act_store(a + q * SC__TW, z ? z + q * SC__TW : NULL, acc, act);
    }
  }
}

/* BODY(NB) for n rows cut into ceil(n / VOB) blocks of nearly equal size (BODY advances its
 * own row counter): whole blocks of VOB rows when they fit exactly, else e.g. 84 rows as
 * 7 x 8 + 4 x 7 and 10 as 2 x 5, so that no block is left with a few accumulators waiting on
 * FMA latency */
#if VOB > 4
#define V_BLOCKS_5_8(BODY)                                                                         \
  case 5: BODY(5) break;                                                                           \
  case 6: BODY(6) break;                                                                           \
  case 7: BODY(7) break;                                                                           \
  case 8:                                                                                          \
    BODY(8) break;
#else
#define V_BLOCKS_5_8(BODY)
#endif
#define V_BLOCKS(n, BODY)                                                                          \
  do {                                                                                             \
    size_t nb_ = ((n) + VOB - 1) / VOB, base_ = (n) / nb_, extra_ = (n) % nb_;                     \
    if (extra_ == 0 && base_ == VOB) {                                                             \
      for (size_t bi_ = 0; bi_ < nb_; bi_++) BODY(VOB)                                             \
      break;                                                                                       \
    }                                                                                              \
    for (size_t bi_ = 0; bi_ < nb_; bi_++) {                                                       \
      switch (base_ + (bi_ < extra_ ? 1 : 0)) {                                                    \
      case 1: BODY(1) break;                                                                       \
      case 2: BODY(2) break;                                                                       \
      case 3: BODY(3) break;                                                                       \
      case 4: BODY(4) break; V_BLOCKS_5_8(BODY)                                                    \
      default: break; /* not reached: blocks hold 1..VOB rows */                                   \
      }                                                                                            \
    }                                                                                              \
  } while (0)

/* a = act(W x + b). The O rows are cut into ceil(O / VOB) blocks of nearly equal size
 * (84 rows: 7 x 8 + 4 x 7, 10 rows: 2 x 5), so no block is left with a few accumulators
 * waiting on FMA latency. Each output's sum runs over i in the same order whatever the
 * blocking, so the results do not depend on it. */
static inline __attribute__((always_inline)) void
vec_dense_fwd_body(float *restrict a, const float *restrict W, const float *restrict b,
                   const float *restrict x, size_t O, size_t I, sc_act act, const int nv_,
                   const int nvb_) {
  size_t o = 0;
  V_BLOCKS(O, V_FWD_BODY);
}
static void vec_dense_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                              const float *restrict b, const float *restrict x, size_t O, size_t I,
                              sc_act act) {
  vec_dense_fwd_body(a, W, b, x, O, I, act, NV, NVB);
  v_act_rows(a, z, O, act);
}
/* the same on a half tile: the first half of each row, the second stored as zeros */
static void vec_dense_fwd_h_f32(float *restrict a, float *restrict z, const float *restrict W,
                                const float *restrict b, const float *restrict x, size_t O,
                                size_t I, sc_act act) {
  vec_dense_fwd_body(a, W, b, x, O, I, act, NVH, NVBH);
  v_act_rows_h(a, z, O, act);
}

/* gW[o][i] += sum_t dz[o][t] xT[t][i]: 16 columns of NB rows per register block, columns from
 * i1 on (used for layers too large for the lane form below) */
#define V_DW_COLS(NB, i1)                                                                          \
  for (size_t i0 = (i1); i0 < I; i0 += 16) {                                                       \
    sc_vf acc[NB][NC];                                                                             \
    _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++) acc[k][j] =  \
        V_BCAST(0.0f);                                                                             \
    const float *d = dz + o * SC__TW;                                                              \
    for (int t = 0; t < SC__TW; t++) {                                                             \
      sc_vf xv[NC];                                                                                \
      for (int j = 0; j < NC; j++) xv[j] = V_ROW(xT + (size_t)t * ld + i0, j);                     \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                       \
        sc_vf dk = V_BCAST(d[k * SC__TW + t]);                                                     \
        for (int j = 0; j < NC; j++) acc[k][j] += dk * xv[j];                                      \
      }                                                                                            \
    }                                                                                              \
    if (i0 + 16 <= I) {                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < NC; j++)(           \
          (sc_vfu *)(void *)(gW + (o + k) * I + i0))[j] += acc[k][j];                              \
    } else {                                                                                       \
      for (int k = 0; k < NB; k++) {                                                               \
        float tmp[16] __attribute__((aligned(64)));                                                \
        for (int j = 0; j < NC; j++) V_ROWW(tmp, j) = acc[k][j];                                   \
        for (size_t c = 0; c < I - i0; c++) gW[(o + k) * I + i0 + c] += tmp[c];                    \
      }                                                                                            \
    }                                                                                              \
  }
#define V_DW_BLOCK(NB)                                                                             \
  for (; o + NB <= O; o += NB) V_DW_COLS(NB, 0)

static void vec_dense_dw_f32(float *restrict gW, const float *restrict dz, const float *restrict xT,
                             size_t O, size_t I, size_t ld) {
  size_t o = 0;
#if VW == 16
  /* 6 rows x 64 columns (24 zmm): per t 4 loads of xT and 6 broadcasts of dz feed 24 FMAs,
   * where 8 x 16 took 1 load and 8 broadcasts for 8 (the loads the bound); the columns past
   * the last 64 by 16 as below. Each gW element's sum runs over t in the same order: the same
   * bits. LeNet5's dense layers alone (one tile, operands hot, Zen 5): 256 -> 120 9.4 -> 7.5 us,
   * 120 -> 84 3.4 -> 3.0 us (session 36) */
  for (size_t i64 = I / 64 * 64; i64 && o + 6 <= O; o += 6) {
    for (size_t i0 = 0; i0 < i64; i0 += 64) {
      sc_vf acc[6][4];
      for (int k = 0; k < 6; k++)
        for (int j = 0; j < 4; j++) acc[k][j] = V_BCAST(0.0f);
      const float *d = dz + o * SC__TW;
      for (int t = 0; t < SC__TW; t++) {
        sc_vf xv[4];
        for (int j = 0; j < 4; j++) xv[j] = V_ROW(xT + (size_t)t * ld + i0, j);
        for (int k = 0; k < 6; k++) {
          sc_vf dk = V_BCAST(d[k * SC__TW + t]);
          for (int j = 0; j < 4; j++) acc[k][j] += dk * xv[j];
        }
      }
      for (int k = 0; k < 6; k++)
        for (int j = 0; j < 4; j++) ((sc_vfu *)(void *)(gW + (o + k) * I + i0))[j] += acc[k][j];
    }
    V_DW_COLS(6, i64)
  }
#endif
  V_DW_BLOCK(VOB)
#if VOB > 4
  V_DW_BLOCK(4)
#endif
  V_DW_BLOCK(1)
}

/* dx[i][t] = sum_o W[o][i] dz[o][t]: exactly NB input rows starting at i, NVB vectors per
 * register block, the first nv_ vectors of each row (NV, or NVH for a half tile: the rest
 * stored as zeros); i += NB */
#define V_DX_BODY(NB)                                                                              \
  {                                                                                                \
    for (int jc = 0; jc < nv_; jc += nvb_) {                                                       \
      sc_vf acc[NB][NVB];                                                                          \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++)          \
          acc[k][j] = V_BCAST(0.0f);                                                               \
      for (size_t o = 0; o < O; o++) {                                                             \
        sc_vf dv[NVB];                                                                             \
        for (int j = 0; j < nvb_; j++) dv[j] = V_ROW(dz + o * SC__TW, jc + j);                     \
        const float *w = W + o * I + i;                                                            \
        _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) {                                     \
          sc_vf wk = V_BCAST(w[k]);                                                                \
          for (int j = 0; j < nvb_; j++) acc[k][j] += wk * dv[j];                                  \
        }                                                                                          \
      }                                                                                            \
      _Pragma("GCC unroll 8") for (int k = 0; k < NB; k++) for (int j = 0; j < nvb_; j++) {        \
        sc_vf v = acc[k][j];                                                                       \
        if (act != SC_IDENTITY) { /* the layer below's derivative, from its output xa */           \
          sc_vf av = V_ROW(xa + (i + k) * SC__TW, jc + j);                                         \
          if (act == SC_RELU)                                                                      \
            v = v_sel((sc_vi)(av <= 0.0f), V_BCAST(0.0f), v);                                      \
          else if (act == SC_TANH)                                                                 \
            v = v * (1.0f - av * av);                                                              \
          else                                                                                     \
            v = v * (av * (1.0f - av));                                                            \
        }                                                                                          \
        V_ROWW(dx + (i + k) * SC__TW, jc + j) = v;                                                 \
        if (bl) V_ROWW(bl + (i + k) * SC__TW, jc + j) = V_ROW(bl + (i + k) * SC__TW, jc + j) + v;  \
      }                                                                                            \
    }                                                                                              \
    for (int k = 0; k < NB; k++) /* (a half tile's other half) */                                  \
      for (int j = nv_; j < NV; j++) V_ROWW(dx + (i + k) * SC__TW, j) = V_BCAST(0.0f);             \
    i += NB;                                                                                       \
  }

/* dx = W^T dz, then, for the dense layer below whose output xa is this layer's input,
 * its activation pullback dx *= act'(xa) (identity, relu, tanh, sigmoid: the same
 * operations as sc__act_bwd) and its bias lanes bl += dx (bl may be NULL): the pullback
 * of one layer and the activation step of the next in one sweep */
static inline __attribute__((always_inline)) void
vec_dense_dx_body(float *restrict dx, const float *restrict W, const float *restrict dz, size_t O,
                  size_t I, sc_act act, const float *restrict xa, float *restrict bl, const int nv_,
                  const int nvb_) {
  /* the I rows in ceil(I / VOB) blocks of nearly equal size, as in vec_dense_fwd_f32 (32
   * rows on AVX2: 6 6 5 5 5 5, not 6 6 6 6 6 1 1, whose one-row blocks wait on FMA latency);
   * each sum runs over o in the same order whatever the blocking: the same bits */
  size_t i = 0;
  V_BLOCKS(I, V_DX_BODY);
}
static void vec_dense_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                             size_t O, size_t I) {
  vec_dense_dx_body(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL, NV, NVB);
}
static void vec_dense_dx_h_f32(float *restrict dx, const float *restrict W,
                               const float *restrict dz, size_t O, size_t I) {
  vec_dense_dx_body(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL, NVH, NVBH);
}
static inline __attribute__((always_inline)) void
vec_dense_dx_act_n(float *restrict dx, const float *restrict W, const float *restrict dz, size_t O,
                   size_t I, sc_act act, const float *restrict xa, float *restrict bl, const int nv,
                   const int nvb) {
  /* tanh and relu with the activation and whether there are bias lanes as constants: with them
   * known only at run time, GCC tested both for every stored vector (the toy's dx 1.5 % slower) */
#define V_DX_ACT_CASE(A)                                                                           \
  case A:                                                                                          \
    if (bl)                                                                                        \
      vec_dense_dx_body(dx, W, dz, O, I, A, xa, bl, nv, nvb);                                      \
    else                                                                                           \
      vec_dense_dx_body(dx, W, dz, O, I, A, xa, NULL, nv, nvb);                                    \
    return;
  switch (act) {
    V_DX_ACT_CASE(SC_TANH)
    V_DX_ACT_CASE(SC_RELU)
  default: vec_dense_dx_body(dx, W, dz, O, I, act, xa, bl, nv, nvb);
  }
#undef V_DX_ACT_CASE
}
static void vec_dense_dx_act_f32(float *restrict dx, const float *restrict W,
                                 const float *restrict dz, size_t O, size_t I, sc_act act,
                                 const float *restrict xa, float *restrict bl) {
  vec_dense_dx_act_n(dx, W, dz, O, I, act, xa, bl, NV, NVB);
}
/* a half tile's (the first NVH vectors of each row; zeros in the rest) */
static void vec_dense_dx_act_h_f32(float *restrict dx, const float *restrict W,
                                   const float *restrict dz, size_t O, size_t I, sc_act act,
                                   const float *restrict xa, float *restrict bl) {
  vec_dense_dx_act_n(dx, W, dz, O, I, act, xa, bl, NVH, NVBH);
}

/* dW in lane form (small layers): wl[(o*I + i)*VW + lane] += sum over the tile's
 * vectors j of dz[o][j*VW + lane] x[i][j*VW + lane]. Each accumulator is one native
 * vector, loaded and stored once per tile for NV FMAs; four rows share each x load. */
/* the lane-form dW over T tiles (1 or 2, a constant after inlining), tile 0 first: each
 * accumulator gets its FMAs in the same order as from T one-tile calls; first: the slice's
 * first write, which stores the products instead of adding them to the accumulator.
 * With bias (a constant), the layer's bias lanes bl[o][t] += dz[o][t] too, tile 0 first:
 * the additions vec_dense_dx_act_f32 would have made as it stored each dz (the same bits),
 * with one load and store of a lane vector per T tiles instead of per tile, and none of
 * the dx pass's (the toy, 1 thread: those loads and stores were 4.7 % of its time) */
static inline __attribute__((always_inline)) void
vec_dense_dwl_n(float *restrict wl, const float *const dz[2], const float *const x[2], int T,
                size_t O, size_t I, int first, const int bias, float *restrict bl, const int nvl) {
  sc_vf *A = (sc_vf *)(void *)wl;
  /* the products: tile 0's NV vectors, then (T = 2) tile 1's; the last tile's first nvl only
   * (NV, or NVH for a half tile, whose other half of dz is zeros: the products left out would
   * add zeros) */
  const int M = (T - 1) * NV + nvl;
  /* R rows from o share each x load (4 at a time, then the last 1-3 as one block: the
   * micro-benchmark's 2-output layer had gone row by row, reloading dz and x for every weight) */
#define V_DWL_ROWS(R)                                                                              \
  {                                                                                                \
    sc_vf d[R][2 * NV];                                                                            \
    for (int k = 0; k < R; k++)                                                                    \
      for (int m = 0; m < M; m++) d[k][m] = V_ROW(dz[m / NV] + (o + k) * SC__TW, m % NV);          \
    if (bias)                                                                                      \
      for (int k = 0; k < R; k++)                                                                  \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf v = V_ROW(bl + (o + k) * SC__TW, j);                                               \
          for (int t = 0; t < T; t++)                                                              \
            if (t * NV + j < M) v += d[k][t * NV + j];                                             \
          V_ROWW(bl + (o + k) * SC__TW, j) = v;                                                    \
        }                                                                                          \
    for (size_t i = 0; i < I; i++) {                                                               \
      sc_vf xv[2 * NV];                                                                            \
      for (int m = 0; m < M; m++) xv[m] = V_ROW(x[m / NV] + i * SC__TW, m % NV);                   \
      for (int k = 0; k < R; k++) {                                                                \
        sc_vf acc = first ? d[k][0] * xv[0] : V_FMA(d[k][0], xv[0], A[(o + k) * I + i]);           \
        for (int m = 1; m < M; m++) acc = V_FMA(d[k][m], xv[m], acc);                              \
        A[(o + k) * I + i] = acc;                                                                  \
      }                                                                                            \
    }                                                                                              \
  }
  size_t o = 0;
  for (; o + 4 <= O; o += 4) V_DWL_ROWS(4)
  switch (O - o) {
  case 3: V_DWL_ROWS(3) break;
  case 2: V_DWL_ROWS(2) break;
  case 1: V_DWL_ROWS(1) break;
  default: break;
  }
#undef V_DWL_ROWS
}

/* vec_dense_dwl_n with whether there are bias lanes and whether the last tile is a half tile
 * as constants (one copy each) */
static inline __attribute__((always_inline)) void
vec_dense_dwl_sel(float *restrict wl, const float *const dz[2], const float *const x[2], int T,
                  size_t O, size_t I, int first, float *restrict bl, int half) {
  if (half) {
    if (bl)
      vec_dense_dwl_n(wl, dz, x, T, O, I, first, 1, bl, NVH);
    else
      vec_dense_dwl_n(wl, dz, x, T, O, I, first, 0, NULL, NVH);
  } else if (bl)
    vec_dense_dwl_n(wl, dz, x, T, O, I, first, 1, bl, NV);
  else
    vec_dense_dwl_n(wl, dz, x, T, O, I, first, 0, NULL, NV);
}

/* bl: the layer's bias lanes, or NULL (see vec_dense_dwl_n); half: a half tile */
static void vec_dense_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                              size_t O, size_t I, int first, float *restrict bl, int half) {
  const float *const dzs[2] = {dz, dz}, *const xs[2] = {x, x};
  vec_dense_dwl_sel(wl, dzs, xs, 1, O, I, first, bl, half);
}

#if VW == 16
#define SC__VEC_DWL2 1
/* two tiles in one pass (A, then B): one accumulator load and store per 4 FMAs instead of
 * 2; the zmm store (one per cycle) is what bounds the one-tile form. Same bits as two
 * vec_dense_dwl_f32 calls. */
static void vec_dense_dwl2_f32(float *restrict wl, const float *restrict dzA,
                               const float *restrict xA, const float *restrict dzB,
                               const float *restrict xB, size_t O, size_t I, int first,
                               float *restrict bl, int half) { /* half: tile B is a half tile */
  const float *const dzs[2] = {dzA, dzB}, *const xs[2] = {xA, xB};
  vec_dense_dwl_sel(wl, dzs, xs, 2, O, I, first, bl, half);
}
#endif

/* gw[k] += the VW lanes of wl[k] (once per slice), summed as a fixed tree: on AVX-512 lane l
 * and lane l + 8 first, then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). Eight weights
 * at a time with horizontal adds (no transposes), the rest one by one with the same sums,
 * so the result does not depend on where a weight falls. The lane-order chain it replaces
 * took 947 ns for the toy's 752 weights on the AVX2 host (16 slices a step: 1.7 % of it). */
static inline float vec_fold8(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
static inline __m256 vec_fold8x8(const __m256 *v) {
  __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}
static void vec_dwl_fold_f32(float *restrict gw, const float *restrict wl, size_t n) {
  size_t k = 0;
#if VW == 16
  /* sixteen weights at a time in 512-bit registers, the same sums in the same tree: lanes
   * l + (l + 8) for two weights per register (two 256-bit halves shuffled together), then
   * three levels of even + odd lanes across register pairs (the micro-benchmark's fold:
   * 48 operations for 16 weights against 72 with the 256-bit hadds) */
  const __m512i ev = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i od = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#define V_EVOD(a, b)                                                                               \
  _mm512_add_ps(_mm512_permutex2var_ps((a), ev, (b)), _mm512_permutex2var_ps((a), od, (b)))
  for (; k + 16 <= n; k += 16) {
    __m512 u[8], v[4], x[2];
    for (int p = 0; p < 8; p++) { /* weights 2p, 2p + 1: their lanes l + (l + 8) */
      __m512 a = _mm512_loadu_ps(wl + (k + 2 * (size_t)p) * VW),
             b = _mm512_loadu_ps(wl + (k + 2 * (size_t)p + 1) * VW);
      u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    for (int q = 0; q < 4; q++) v[q] = V_EVOD(u[2 * q], u[2 * q + 1]); /* 4 pair sums a weight */
    for (int r = 0; r < 2; r++) x[r] = V_EVOD(v[2 * r], v[2 * r + 1]); /* 2 quad sums */
    _mm512_storeu_ps(gw + k, _mm512_add_ps(_mm512_loadu_ps(gw + k), V_EVOD(x[0], x[1])));
  }
#undef V_EVOD
#endif
  for (; k + 8 <= n; k += 8) {
    __m256 v[8];
    for (int j = 0; j < 8; j++) {
      const float *w = wl + (k + (size_t)j) * VW;
#if VW == 16
      __m512 x = _mm512_loadu_ps(w);
      v[j] = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
#else
      v[j] = _mm256_loadu_ps(w);
#endif
    }
    _mm256_storeu_ps(gw + k, _mm256_add_ps(_mm256_loadu_ps(gw + k), vec_fold8x8(v)));
  }
  for (; k < n; k++) {
    const float *w = wl + k * VW;
#if VW == 16
    float u[8];
    for (int l = 0; l < 8; l++) u[l] = w[l] + w[l + 8];
    gw[k] += vec_fold8(u);
#else
    gw[k] += vec_fold8(w);
#endif
  }
}

/* ---------------------------------------------------------------- convolutions */
#define SC__VEC_CONV 1
/* Blocking: CB output channels x XB output columns share each input load and each
 * weight broadcast (AVX-512: 4 x 2 x 2 = 16 zmm accumulators; AVX2: 2 x 1 x 4). The
 * backward: KB channels x RB taps of dW, CDX_CB input channels of dx per register block.
 * AVX2 has 16 registers: 3 x 3 (9 accumulators + 3 dz rows + 1) and 3 x 4 lanes (12 + 4)
 * measured best on LeNet5 (AVX2 EPYC, 1 thread, 3 alternating runs each): conv2's backward
 * 142 -> 96 ms, conv1's 49 -> 30 ms, the epoch 0.33 -> 0.27 s; 2 x 2 and 4 x 4 had spilled
 * (dx) or left the loads the bound (dW). The blocks only group weights and channels: every
 * sum keeps its order, so the results do not change by a bit. */
/* The forward and dW blocks are planner variants (see sc__variant_plan: SC_CONV_FWD,
 * SC_CONV_DW, SC_PLAN=measure): index 0 is the rule's (the shapes measured best above),
 * the others also fit the register file (a one-channel block can take its input rows as
 * memory operands). */
#if VW == 16
#define V_CONV_FWD_BLOCKS(X) X(0, 4, 2) X(1, 6, 2) X(2, 8, 1)
#define V_CONV_DW_BLOCKS(X) X(0, 4, 4) X(1, 6, 4) X(2, 8, 2)
/* 6 x 4 for 6 channels (LeNet5's first conv; Zen 4, 1 thread, 20,000 images: its backward
 * 51.8 -> 47.0 ms, 4 runs; on 16 channels 4 x 4 stays faster: 125.4 against 131 ms) */
#define V_CONV_DW_K6 1
#define CDX_CB 6
#else
#define V_CONV_FWD_BLOCKS(X) X(0, 2, 1) X(1, 1, 3) X(2, 3, 1)
#define V_CONV_DW_BLOCKS(X) X(0, 3, 3) X(1, 2, 4) X(2, 4, 2)
#define V_CONV_DW_K6 0 /* 3 x 3 divides 6 already */
#ifndef CDX_CB
#define CDX_CB 3
#endif
#endif

#define V_CONV_BLOCK(CB, XB)                                                                       \
  for (; v + XB <= OW; v += XB) {                                                                  \
    sc_vf acc[CB][XB][NV];                                                                         \
    for (int cb = 0; cb < CB; cb++) {                                                              \
      sc_vf bk = V_BCAST(b ? b[k + cb] : 0.0f);                                                    \
      for (int xb = 0; xb < XB; xb++)                                                              \
        for (int j = 0; j < NV; j++) acc[cb][xb][j] = bk;                                          \
    }                                                                                              \
    const float *base = x + (u * sh * WP + v * sw) * SC__TW;                                       \
    for (size_t r = 0; r < R; r++) {                                                               \
      const float *xr = base + roff[r] * SC__TW;                                                   \
      sc_vf xv[XB][NV];                                                                            \
      for (int xb = 0; xb < XB; xb++)                                                              \
        for (int j = 0; j < NV; j++) xv[xb][j] = V_ROW(xr + (size_t)xb * sw * SC__TW, j);          \
      for (int cb = 0; cb < CB; cb++) {                                                            \
        sc_vf w = V_BCAST(W[(k + cb) * R + r]);                                                    \
        for (int xb = 0; xb < XB; xb++)                                                            \
          for (int j = 0; j < NV; j++) acc[cb][xb][j] += w * xv[xb][j];                            \
      }                                                                                            \
    }                                                                                              \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int xb = 0; xb < XB; xb++) {                                                            \
        size_t o = ((k + cb) * OH + u) * OW + v + xb;                                              \
        v_act_store(a + o * SC__TW, z ? z + o * SC__TW : NULL, acc[cb][xb], P->spec.act);          \
      }                                                                                            \
  }

#define V_CONV_ROWS(CB, XB)                                                                        \
  for (; k + CB <= K; k += CB)                                                                     \
    for (size_t u = 0; u < OH; u++) {                                                              \
      size_t v = 0;                                                                                \
      V_CONV_BLOCK(CB, XB)                                                                         \
      V_CONV_BLOCK(CB, 1)                                                                          \
    }

/* one forward per block shape: CB channels x XB columns, then 2 and 1 channel(s) */
#define V_CONV_FWD_FN(I, CB, XB)                                                                   \
  static void vec_conv_fwd##I##_f32(float *restrict a, float *restrict z, const float *restrict W, \
                                    const float *restrict b, const float *restrict x,              \
                                    const sc__lplan *P) {                                          \
    size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;         \
    size_t K = P->oc, k = 0;                                                                       \
    const size_t *roff = P->roff;                                                                  \
    V_CONV_ROWS(CB, XB)                                                                            \
    if (CB > 2) {                                                                                  \
      V_CONV_ROWS(2, XB)                                                                           \
    }                                                                                              \
    V_CONV_ROWS(1, XB)                                                                             \
  }
V_CONV_FWD_BLOCKS(V_CONV_FWD_FN)

static void vec_conv_fwd_f32(float *restrict a, float *restrict z, const float *restrict W,
                             const float *restrict b, const float *restrict x, const sc__lplan *P) {
  switch (P->conv_fwd) {
  case 1: vec_conv_fwd1_f32(a, z, W, b, x, P); break;
  case 2: vec_conv_fwd2_f32(a, z, W, b, x, P); break;
  default: vec_conv_fwd0_f32(a, z, W, b, x, P);
  }
}

/* conv dW in lane form: one native-vector accumulator per weight; KB channels x RB taps
 * per register block, the sum running over every output position of the tile */
#define V_CDW_BLOCK(KB, RB)                                                                        \
  for (; r + RB <= R; r += RB) {                                                                   \
    sc_vf acc[KB][RB];                                                                             \
    for (int kb = 0; kb < KB; kb++)                                                                \
      for (int rb = 0; rb < RB; rb++) acc[kb][rb] = A[(k + kb) * R + r + rb];                      \
    for (size_t u = 0; u < OH; u++)                                                                \
      for (size_t v = 0; v < OW; v++) {                                                            \
        const float *xp = x + (u * sh * WP + v * sw) * SC__TW;                                     \
        const float *dp = dz + (u * OW + v) * SC__TW;                                              \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf d[KB];                                                                             \
          for (int kb = 0; kb < KB; kb++) d[kb] = V_ROW(dp + (k + kb) * NPOS * SC__TW, j);         \
          for (int rb = 0; rb < RB; rb++) {                                                        \
            sc_vf xv = V_ROW(xp + roff[r + rb] * SC__TW, j);                                       \
            for (int kb = 0; kb < KB; kb++) acc[kb][rb] += d[kb] * xv;                             \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    for (int kb = 0; kb < KB; kb++)                                                                \
      for (int rb = 0; rb < RB; rb++) A[(k + kb) * R + r + rb] = acc[kb][rb];                      \
  }

#define V_CDW_ROWS(KB, RB)                                                                         \
  for (; k + KB <= K; k += KB) {                                                                   \
    size_t r = 0;                                                                                  \
    V_CDW_BLOCK(KB, RB)                                                                            \
    V_CDW_BLOCK(KB, 1)                                                                             \
  }

/* one dW per block shape: KB channels x RB taps, then 2 and 1 channel(s) */
#define V_CONV_DW_FN(I, KB, RB)                                                                    \
  static void vec_conv_dwl##I##_f32(float *restrict wl, const float *restrict dz,                  \
                                    const float *restrict x, const sc__lplan *P) {                 \
    size_t R = P->R, OH = P->oh, OW = P->ow, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp;         \
    size_t K = P->oc, k = 0, NPOS = OH * OW;                                                       \
    const size_t *roff = P->roff;                                                                  \
    sc_vf *A = (sc_vf *)(void *)wl;                                                                \
    V_CDW_ROWS(KB, RB)                                                                             \
    if (KB > 2) {                                                                                  \
      V_CDW_ROWS(2, RB)                                                                            \
    }                                                                                              \
    V_CDW_ROWS(1, RB)                                                                              \
  }
V_CONV_DW_BLOCKS(V_CONV_DW_FN)

static void vec_conv_dwl_f32(float *restrict wl, const float *restrict dz, const float *restrict x,
                             const sc__lplan *P) {
  switch (P->conv_dw) {
  case 1: vec_conv_dwl1_f32(wl, dz, x, P); break;
  case 2: vec_conv_dwl2_f32(wl, dz, x, P); break;
  default: vec_conv_dwl0_f32(wl, dz, x, P);
  }
}

/* the block names, for the planner (index = variant) */
#define V_CONV_NAME(I, A, B) #A "x" #B,
static const char *const vec_conv_fwd_names[SC__CONV_NV + 1] = {V_CONV_FWD_BLOCKS(V_CONV_NAME)
                                                                    NULL};
static const char *const vec_conv_dw_names[SC__CONV_NV + 1] = {V_CONV_DW_BLOCKS(V_CONV_NAME) NULL};
#undef V_CONV_NAME

/* conv input gradient, gathered per input position: CB input channels share each dz
 * load; the taps that reach position (y, x) depend only on (y, x) */
/* whether kernel row i reaches input row y (padding ph, stride sh), and the output row u */
static inline __attribute__((always_inline)) int v_cdx_row(size_t y, size_t i, size_t ph, size_t sh,
                                                           size_t OH, size_t *u) {
  size_t yy = y + ph;
  if (yy < i || (yy - i) % sh) return 0;
  *u = (yy - i) / sh;
  return *u < OH;
}
#define V_CDX_POS(CB, xx)                                                                          \
  {                                                                                                \
    sc_vf acc[CB][NV];                                                                             \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int j = 0; j < NV; j++) acc[cb][j] = V_BCAST(0.0f);                                     \
    for (size_t i = 0, u; i < KH; i++) {                                                           \
      if (!v_cdx_row(y, i, ph, sh, OH, &u)) continue;                                              \
      for (size_t jj = 0; jj < KW; jj++) {                                                         \
        size_t xp = (xx) + pw;                                                                     \
        if (xp < jj || (xp - jj) % sw) continue;                                                   \
        size_t v = (xp - jj) / sw;                                                                 \
        if (v >= OW) continue;                                                                     \
        const float *dp = dz + (u * OW + v) * SC__TW;                                              \
        const float *wp = W + (c * KH + i) * KW + jj;                                              \
        for (size_t k = 0; k < K; k++) {                                                           \
          sc_vf d[NV];                                                                             \
          for (int j = 0; j < NV; j++) d[j] = V_ROW(dp + k * NPOS * SC__TW, j);                    \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf w = V_BCAST(wp[k * R + (size_t)cb * KH * KW]);                                   \
            for (int j = 0; j < NV; j++) acc[cb][j] += w * d[j];                                   \
          }                                                                                        \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    for (int cb = 0; cb < CB; cb++)                                                                \
      for (int j = 0; j < NV; j++)                                                                 \
        V_ROWW(dx + (((c + cb) * IH + y) * IW + (xx)) * SC__TW, j) = acc[cb][j];                   \
  }
#define V_CDX_ROWS(CB)                                                                             \
  for (; c + CB <= C; c += CB)                                                                     \
    for (size_t y = 0; y < IH; y++)                                                                \
      for (size_t xx = 0; xx < IW; xx++) V_CDX_POS(CB, xx)

#if VW == 16
/* the same sums for XB neighbouring positions of a row at once (stride 1 across) where every
 * tap of the kernel reaches all of them (in LeNet5's conv2, 12 x 12 positions from an 8 x 8
 * output, the middle 4 of each row): CB x XB x NV accumulators (6 x 2 x 2 = 24 zmm), each
 * (tap, k) step's CB weights broadcast once for the XB positions, 10 loads per 24 FMAs against
 * 8 per 12; every other position as V_CDX_POS. Each sum gets the same FMAs in the same order:
 * the same bits. LeNet5's conv2 dx alone (one tile, operands hot, Zen 5): 52.9 -> 40.3 us; its
 * pullback in the epoch (1 thread, Fashion-MNIST, 3 alternating runs) 165.7 -> 146.0 ms. Blocks
 * of 3 channels x 4 positions (the same 24 accumulators, 11 loads per 24 FMAs) took 80 us, and
 * blocks that also took the positions a tap misses (a branch per position in the k loop, or a
 * k loop per position inside the block) 49-76 us (session 36). */
#define V_CDX_XROWS(CB, XB)                                                                        \
  for (; sw == 1 && c + CB <= C; c += CB)                                                          \
    for (size_t y = 0; y < IH; y++)                                                                \
      for (size_t xx = 0; xx < IW; xx++) {                                                         \
        if (xx + pw + 1 < KW || xx + pw + XB > OW || xx + XB > IW) {                               \
          V_CDX_POS(CB, xx) /* a tap of the kernel's misses a position of the block */             \
          continue;                                                                                \
        }                                                                                          \
        sc_vf acc[CB][XB][NV];                                                                     \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int xb = 0; xb < XB; xb++)                                                          \
            for (int j = 0; j < NV; j++) acc[cb][xb][j] = V_BCAST(0.0f);                           \
        for (size_t i = 0, u; i < KH; i++) {                                                       \
          if (!v_cdx_row(y, i, ph, sh, OH, &u)) continue;                                          \
          for (size_t jj = 0; jj < KW; jj++) {                                                     \
            const float *dp = dz + (u * OW + xx + pw - jj) * SC__TW;                               \
            const float *wp = W + (c * KH + i) * KW + jj;                                          \
            for (size_t k = 0; k < K; k++) {                                                       \
              sc_vf w[CB];                                                                         \
              for (int cb = 0; cb < CB; cb++) w[cb] = V_BCAST(wp[k * R + (size_t)cb * KH * KW]);   \
              for (int xb = 0; xb < XB; xb++) {                                                    \
                sc_vf d[NV];                                                                       \
                for (int j = 0; j < NV; j++)                                                       \
                  d[j] = V_ROW(dp + ((size_t)xb + k * NPOS) * SC__TW, j);                          \
                for (int cb = 0; cb < CB; cb++)                                                    \
                  for (int j = 0; j < NV; j++) acc[cb][xb][j] += w[cb] * d[j];                     \
              }                                                                                    \
            }                                                                                      \
          }                                                                                        \
        }                                                                                          \
        for (int cb = 0; cb < CB; cb++)                                                            \
          for (int xb = 0; xb < XB; xb++)                                                          \
            for (int j = 0; j < NV; j++)                                                           \
              V_ROWW(dx + (((c + cb) * IH + y) * IW + xx + (size_t)xb) * SC__TW, j) =              \
                  acc[cb][xb][j];                                                                  \
        xx += XB - 1;                                                                              \
      }
#endif
static void vec_conv_dx_f32(float *restrict dx, const float *restrict W, const float *restrict dz,
                            const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, C = P->ic, R = P->R;
  size_t IH = P->ih, IW = P->iw, K = P->oc, NPOS = OH * OW, c = 0;
#if VW == 16
  V_CDX_XROWS(6, 2)
#endif
#if CDX_CB >= 6
  V_CDX_ROWS(6)
#endif
#if CDX_CB >= 4
  V_CDX_ROWS(4)
#endif
#if CDX_CB >= 3
  V_CDX_ROWS(3)
#endif
  V_CDX_ROWS(2)
  V_CDX_ROWS(1)
}

static void vec_pool_fwd_f32(float *restrict a, const float *restrict x, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        const float *x0 = x + ((c * P->ih + u * KH) * P->iw + v * KW) * SC__TW;
        sc_vf m[NV];
        for (int j = 0; j < NV; j++) m[j] = V_ROW(x0, j);
        for (size_t i = 0; i < KH; i++)
          for (size_t jj = 0; jj < KW; jj++) {
            const float *xi = x0 + (i * P->iw + jj) * SC__TW;
            for (int j = 0; j < NV; j++) {
              sc_vf xv = V_ROW(xi, j);
              m[j] = v_sel(xv > m[j], xv, m[j]);
            }
          }
        float *o = a + ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int j = 0; j < NV; j++) V_ROWW(o, j) = m[j];
      }
}

static void vec_pool_bwd_f32(float *restrict dx, const float *restrict x, const float *restrict a,
                             const float *restrict dz, const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw;
  if (P->oh * KH != P->ih || P->ow * KW != P->iw) memset(dx, 0, P->in * SC__TW * sizeof(float));
  for (size_t c = 0; c < P->oc; c++)
    for (size_t u = 0; u < P->oh; u++)
      for (size_t v = 0; v < P->ow; v++) {
        size_t o = ((c * P->oh + u) * P->ow + v) * SC__TW;
        for (int j = 0; j < NV; j++) {
          sc_vf av = V_ROW(a + o, j), dv = V_ROW(dz + o, j);
          sc_vi taken = (sc_vi){0};
          for (size_t i = 0; i < KH; i++)
            for (size_t jj = 0; jj < KW; jj++) {
              size_t q = ((c * P->ih + u * KH + i) * P->iw + v * KW + jj) * SC__TW;
              sc_vi hit = (V_ROW(x + q, j) == av) & ~taken;
              V_ROWW(dx + q, j) = v_sel(hit, dv, V_BCAST(0.0f));
              taken |= hit;
            }
        }
      }
}

/* the 2 x 2 pool pullbacks' tail (vec_pool2_act_bwd_f32, vec_pool2_hits_bwd_f32): a window's
 * four dx vectors (lanes j of positions e, e + 1 of rows d0, d1) stored, and with bias lanes the
 * first row's two added to s[j] */
static inline __attribute__((always_inline)) void v_pool2_put(float *d0, float *d1, size_t e, int j,
                                                              sc_vf e0, sc_vf e1, sc_vf e2,
                                                              sc_vf e3, sc_vf *s, int bl) {
  V_ROWW(d0 + e, j) = e0, V_ROWW(d0 + e + SC__TW, j) = e1;
  V_ROWW(d1 + e, j) = e2, V_ROWW(d1 + e + SC__TW, j) = e3;
  if (bl) s[j] += e0, s[j] += e1;
}
/* then row 2u + 1's IW stored positions added to s, in order */
static inline __attribute__((always_inline)) void v_pool2_row2(sc_vf *s, const float *d1,
                                                               size_t IW) {
  for (size_t k = 0; k < IW; k++)
    for (int j = 0; j < NV; j++) s[j] += V_ROW(d1 + k * SC__TW, j);
}

/* A 2 x 2 max-pool's pullback (windows tiling the input exactly) with the pullback of the relu or
 * identity conv below it and that conv's bias-gradient lanes, in one pass: dx at the window's
 * first maximum (row-major, as vec_pool_bwd_f32) is dz, elsewhere 0; then, with relu, 0 where
 * the conv's output x <= 0 (sc__act_bwd_lane's rule); and bl (K rows of SC__TW, or NULL) adds
 * dx over each channel's positions in row-major order (row 2u in the window loop, row 2u + 1
 * after it, from the stored rows). The same operations in the same order as vec_pool_bwd_f32
 * then sc__act_bwd_lane: the same bits, without that pass over the conv's output and dz
 * (LeNet5's conv1: 442 KB each a tile). dx may be x (the engine writes dx over the conv's
 * output, read only here: each window's four values are read before its dx is stored) */
/* the body of both (hits NULL: vec_pool2_act_bwd_f32's compares on x and a; else the bytes of
 * vec_conv_pool_fwd_f32), each wrapper's choice a constant once inlined */
static inline __attribute__((always_inline)) void
v_pool2_bwd(float *dx, const float *x, const float *a, const uint8_t *hits,
            const float *restrict dz, float *restrict bl, int relu, const sc__lplan *P) {
  size_t IW = P->iw, OW = P->ow, RW = IW * SC__TW;
  const sc_vf zero = V_BCAST(0.0f);
  for (size_t c = 0; c < P->oc; c++) {
    sc_vf s[NV];
    for (int j = 0; j < NV; j++) s[j] = bl ? V_ROW(bl + c * SC__TW, j) : zero;
    for (size_t u = 0; u < P->oh; u++) {
      size_t r = (c * P->ih + 2 * u) * RW;
      float *d0 = dx + r, *d1 = d0 + RW;
      for (size_t v = 0; v < OW; v++) {
        size_t o = ((c * P->oh + u) * OW + v) * SC__TW, e = 2 * v * SC__TW;
        if (hits) {
          sc_vi ix[NV];
          for (int j = 0; j < NV; j++)
#if VW == 16
            ix[j] = (sc_vi)_mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(hits + o + (size_t)j * VW)));
#else
            ix[j] = (sc_vi)_mm256_cvtepu8_epi32(
                _mm_loadl_epi64((const __m128i *)(const void *)(hits + o + (size_t)j * VW)));
#endif
          for (int j = 0; j < NV; j++) {
            sc_vf dv = V_ROW(dz + o, j);
            sc_vf e0 = v_sel(ix[j] == 0, dv, zero), e1 = v_sel(ix[j] == 1, dv, zero);
            sc_vf e2 = v_sel(ix[j] == 2, dv, zero), e3 = v_sel(ix[j] == 3, dv, zero);
            v_pool2_put(d0, d1, e, j, e0, e1, e2, e3, s, bl != NULL);
          }
          continue;
        }
        const float *x0 = x + r, *x1 = x0 + RW;
        for (int j = 0; j < NV; j++) {
          sc_vf av = V_ROW(a + o, j), dv = V_ROW(dz + o, j);
          sc_vf q0 = V_ROW(x0 + e, j), q1 = V_ROW(x0 + e + SC__TW, j);
          sc_vf q2 = V_ROW(x1 + e, j), q3 = V_ROW(x1 + e + SC__TW, j);
          sc_vi h0 = q0 == av, taken = h0;
          sc_vi h1 = (q1 == av) & ~taken;
          taken |= h1;
          sc_vi h2 = (q2 == av) & ~taken;
          taken |= h2;
          sc_vi h3 = (q3 == av) & ~taken;
          sc_vf e0 = v_sel(h0, dv, zero), e1 = v_sel(h1, dv, zero);
          sc_vf e2 = v_sel(h2, dv, zero), e3 = v_sel(h3, dv, zero);
          if (relu) {
            e0 = v_sel((sc_vi)(q0 <= 0.0f), zero, e0), e1 = v_sel((sc_vi)(q1 <= 0.0f), zero, e1);
            e2 = v_sel((sc_vi)(q2 <= 0.0f), zero, e2), e3 = v_sel((sc_vi)(q3 <= 0.0f), zero, e3);
          }
          v_pool2_put(d0, d1, e, j, e0, e1, e2, e3, s, bl != NULL);
        }
      }
      if (bl) v_pool2_row2(s, d1, IW); /* row 2u + 1, in order */
    }
    if (bl)
      for (int j = 0; j < NV; j++) V_ROWW(bl + c * SC__TW, j) = s[j];
  }
}
static void vec_pool2_act_bwd_f32(float *dx, const float *x, const float *restrict a,
                                  const float *restrict dz, float *restrict bl, int relu,
                                  const sc__lplan *P) {
  if (relu)
    v_pool2_bwd(dx, x, a, NULL, dz, bl, 1, P);
  else
    v_pool2_bwd(dx, x, a, NULL, dz, bl, 0, P);
}

/* A conv's forward (any strides, relu or identity, no z) with the 2 x 2 max-pool above it
 * folded in: blocks of CB channels x one window's four positions x one native vector of lanes
 * (AVX-512: 6 x 4 = 24 accumulators; 4 input loads and CB broadcasts a tap), each sum the same
 * FMAs in the same order as V_CONV_BLOCK (the bias first, then the taps), then the activation,
 * the window's maximum as vec_pool_fwd_f32 takes it, into pa, and per lane a byte (hits: K x PH
 * x PW windows x SC__TW lanes) naming the window's first position equal to it (0-3,
 * row-major; NaN equals nothing), 4 where none is or where, with relu, the maximum is <= 0 (the
 * relu's pullback there is 0: vec_pool2_act_bwd_f32's rule, the hit's value being the
 * maximum). The conv's output is never stored (442 KB a tile for LeNet5's conv1) and the
 * pool's forward pass is skipped; vec_pool2_hits_bwd_f32 reads the bytes: the same bits.
 * LeNet5 fp32, Zen 5 (session 37), --profile at 1 thread: pool1's forward 7.6 ms an epoch
 * -> 0 with conv1's forward unchanged (49-50 ms), pool1's pullback 12.5 -> 9.0 ms, pool2's
 * 2.3 + 3.3 -> 0 + 2.9; epochs 0.450 -> 0.430 s at 1 thread, 0.233 -> 0.223 at 2 (medians
 * of 5 alternating pairs). */
#define V_CPOOL_BLOCK(CB)                                                                          \
  for (; k + CB <= K; k += CB)                                                                     \
    for (size_t q = 0; q < PH; q++)                                                                \
      for (size_t w = 0; w < PW; w++)                                                              \
        for (int j = 0; j < NV; j++) {                                                             \
          sc_vf acc[CB][4];                                                                        \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf bk = V_BCAST(b ? b[k + cb] : 0.0f);                                              \
            for (int e = 0; e < 4; e++) acc[cb][e] = bk;                                           \
          }                                                                                        \
          const float *p0 = x + (2 * q * sh * WP + 2 * w * sw) * SC__TW,                           \
                      *p1 = p0 + sh * WP * SC__TW;                                                 \
          for (size_t r = 0; r < R; r++) {                                                         \
            size_t ro = roff[r] * SC__TW;                                                          \
            sc_vf x0 = V_ROW(p0 + ro, j), x1 = V_ROW(p0 + ro + sw * SC__TW, j);                    \
            sc_vf x2 = V_ROW(p1 + ro, j), x3 = V_ROW(p1 + ro + sw * SC__TW, j);                    \
            for (int cb = 0; cb < CB; cb++) {                                                      \
              sc_vf wv = V_BCAST(W[(k + cb) * R + r]);                                             \
              acc[cb][0] += wv * x0, acc[cb][1] += wv * x1;                                        \
              acc[cb][2] += wv * x2, acc[cb][3] += wv * x3;                                        \
            }                                                                                      \
          }                                                                                        \
          for (int cb = 0; cb < CB; cb++) {                                                        \
            sc_vf q0 = acc[cb][0], q1 = acc[cb][1], q2 = acc[cb][2], q3 = acc[cb][3];              \
            if (relu) q0 = v_relu(q0), q1 = v_relu(q1), q2 = v_relu(q2), q3 = v_relu(q3);          \
            sc_vf m = v_max(q3, v_max(q2, v_max(q1, q0))); /* (x > m ? x : m, in order) */         \
            size_t o = ((k + (size_t)cb) * PH + q) * PW + w;                                       \
            V_ROWW(pa + o * SC__TW, j) = m;                                                        \
            v_pool_hits_store(hits + o * SC__TW + (size_t)j * VW, q0, q1, q2, q3, m, relu);        \
          }                                                                                        \
        }
/* the bytes of a window's hits (see V_CPOOL_BLOCK) */
static inline __attribute__((always_inline)) void
v_pool_hits_store(uint8_t *h, sc_vf q0, sc_vf q1, sc_vf q2, sc_vf q3, sc_vf m, int relu) {
#if VW == 16
  __m512 mm = (__m512)m;
  __m512i ix = _mm512_set1_epi32(4);
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q3, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(3));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q2, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(2));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q1, mm, _CMP_EQ_OQ),
                             _mm512_set1_epi32(1));
  ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask((__m512)q0, mm, _CMP_EQ_OQ),
                             _mm512_setzero_si512());
  if (relu)
    ix = _mm512_mask_mov_epi32(ix, _mm512_cmp_ps_mask(mm, _mm512_setzero_ps(), _CMP_LE_OQ),
                               _mm512_set1_epi32(4));
  _mm_storeu_si128((__m128i *)(void *)h, _mm512_cvtepi32_epi8(ix));
#else
  sc_vi ix = (sc_vi){0} + 4;
  ix = (sc_vi)v_sel(q3 == m, (sc_vf)((sc_vi){0} + 3), (sc_vf)ix);
  ix = (sc_vi)v_sel(q2 == m, (sc_vf)((sc_vi){0} + 2), (sc_vf)ix);
  ix = (sc_vi)v_sel(q1 == m, (sc_vf)((sc_vi){0} + 1), (sc_vf)ix);
  ix = (sc_vi)v_sel(q0 == m, (sc_vf)((sc_vi){0}), (sc_vf)ix);
  if (relu) ix = (sc_vi)v_sel(m <= 0.0f, (sc_vf)((sc_vi){0} + 4), (sc_vf)ix);
  __m128i lo = _mm256_castsi256_si128((__m256i)ix), hi = _mm256_extracti128_si256((__m256i)ix, 1);
  __m128i w16 = _mm_packus_epi32(lo, hi);
  _mm_storel_epi64((__m128i *)(void *)h, _mm_packus_epi16(w16, w16));
#endif
}
static void vec_conv_pool_fwd_f32(float *restrict pa, uint8_t *restrict hits,
                                  const float *restrict W, const float *restrict b,
                                  const float *restrict x, int relu, const sc__lplan *P) {
  size_t R = P->R, sh = P->spec.sh, sw = P->spec.sw, WP = P->wp, K = P->oc, k = 0;
  size_t PH = P->oh / 2, PW = P->ow / 2;
  const size_t *roff = P->roff;
#if VW == 16
  V_CPOOL_BLOCK(6)
  V_CPOOL_BLOCK(4)
#else
  V_CPOOL_BLOCK(2)
#endif
  V_CPOOL_BLOCK(1)
}
#undef V_CPOOL_BLOCK
/* vec_pool2_act_bwd_f32 with the hits of vec_conv_pool_fwd_f32 instead of the conv's output
 * (its dz where the byte names the position, 0 elsewhere; the bias lanes in the same order):
 * the same bits */
static void vec_pool2_hits_bwd_f32(float *restrict dx, const uint8_t *restrict hits,
                                   const float *restrict dz, float *restrict bl,
                                   const sc__lplan *P) {
  v_pool2_bwd(dx, NULL, NULL, hits, dz, bl, 0, P);
}

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
 * 2 shuffles per 4 outputs). The gathers' fast path (bench/RESULTS.md, session 23). */
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
 * ns; the micro-benchmark 2.24 -> 2.08 us (session 29; not measured on Zen 4 or Intel, whose
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

#undef V_FWD_BODY
#undef V_DW_BLOCK
#undef V_DW_COLS
#undef V_DX_BODY
#undef V_BLOCKS
#undef V_BLOCKS_5_8
#undef V_UNPACK_SHUF8
#endif
#define SC__K_FWD vec_dense_fwd_f32
#define SC__BFP(name) v_bf16_##name /* the bf16 packers */
#define SC__K_DW vec_dense_dw_f32
#if VW == 16
#define SC__K_TRANSPOSE vec_transpose_f32
#endif
#define SC__K_DX vec_dense_dx_f32
#define SC__K_DWL vec_dense_dwl_f32
#define SC__DWL_BL 1 /* its dW kernels take the bias lanes (vec_dense_dwl_n) and a half flag */
/* the dense kernels of a half tile (SC__KH in the slice's tile loop) */
#define SC__K_FWD_H vec_dense_fwd_h_f32
#define SC__K_DX_H vec_dense_dx_h_f32
#define SC__K_DX_ACT_H vec_dense_dx_act_h_f32
#define SC__K_DWL_FOLD vec_dwl_fold_f32
#define SC__DWL_LANES VW /* lane-form accumulators hold one native vector */
#if defined(SC__VEC_DWL2)
#define SC__K_DWL2 vec_dense_dwl2_f32
#endif
#define SC__K_DX_ACT vec_dense_dx_act_f32
#define SC__DX_ACT_OK(act)                                                                         \
  ((act) == SC_IDENTITY || (act) == SC_RELU || (act) == SC_TANH || (act) == SC_SIGMOID)
#else
#define SC__K_FWD SC__TN(sc__dense_fwd)
#define SC__BFP(name) sc__bf16_##name
#define SC__K_DW SC__TN(sc__dense_dw)
#define SC__K_DX SC__TN(sc__dense_dx)
#define SC__K_DWL SC__TN(sc__dense_dwl)
#define SC__K_DWL_FOLD SC__K_FOLD_TW
#define SC__DWL_LANES SC__TW
#endif
/* folds SC__TW-lane accumulators (the bias lanes everywhere, dW lanes off the float vector
 * paths) */
/* The one-state dense kernels' parts that do not depend on the vector width, for
 * vone_*_f64 (4 doubles) and vonef_* (8 floats): T the element type, VT the vector type of W
 * lanes, LD / ST its unaligned load and store, SPLAT its broadcast. */
#ifndef SC__VONE_PARTS
#define SC__VONE_PARTS 1
/* dx[i] = sum_o W[o I + i] d[o] for 3 <= I (then dx[I..) padding = 0): column blocks of 2 W
 * and W lanes, rows in pairs (four or two chains), the last columns as one vector */
#define SC__VONE_DX_COLS(T, VT, W_, LD, ST, SPLAT)                                                 \
  do {                                                                                             \
    size_t i = 0;                                                                                  \
    for (; i + 2 * (W_) <= I; i += 2 * (W_)) {                                                     \
      VT a0 = SPLAT(0), a1 = a0, b0 = a0, b1 = a0;                                                 \
      size_t o = 0;                                                                                \
      for (; o + 2 <= O; o += 2) {                                                                 \
        VT d0 = SPLAT(d[o]), d1 = SPLAT(d[o + 1]);                                                 \
        a0 += LD(W + o * I + i) * d0;                                                              \
        a1 += LD(W + o * I + i + (W_)) * d0;                                                       \
        b0 += LD(W + (o + 1) * I + i) * d1;                                                        \
        b1 += LD(W + (o + 1) * I + i + (W_)) * d1;                                                 \
      }                                                                                            \
      if (o < O) {                                                                                 \
        VT d0 = SPLAT(d[o]);                                                                       \
        a0 += LD(W + o * I + i) * d0;                                                              \
        a1 += LD(W + o * I + i + (W_)) * d0;                                                       \
      }                                                                                            \
      ST(dx + i) = a0 + b0;                                                                        \
      ST(dx + i + (W_)) = a1 + b1;                                                                 \
    }                                                                                              \
    for (; i + (W_) <= I; i += (W_)) {                                                             \
      VT a0 = SPLAT(0), b0 = a0;                                                                   \
      size_t o = 0;                                                                                \
      for (; o + 2 <= O; o += 2) {                                                                 \
        a0 += LD(W + o * I + i) * SPLAT(d[o]);                                                     \
        b0 += LD(W + (o + 1) * I + i) * SPLAT(d[o + 1]);                                           \
      }                                                                                            \
      if (o < O) a0 += LD(W + o * I + i) * SPLAT(d[o]);                                            \
      ST(dx + i) = a0 + b0;                                                                        \
    }                                                                                              \
    if (i < I) {                                                                                   \
      VT t = SPLAT(0);                                                                             \
      for (size_t j = 0; i + j < I; j++) {                                                         \
        T s = 0;                                                                                   \
        for (size_t o = 0; o < O; o++) s += W[o * I + i + j] * d[o];                               \
        t[j] = s;                                                                                  \
      }                                                                                            \
      ST(dx + i) = t;                                                                              \
    }                                                                                              \
  } while (0)
/* gW[o I + i] += d[o] x[i] for the rows from o on, then gb[o] += d[o] for all (gb may be
 * NULL); returns from the function */
#define SC__VONE_DW_ROWS(T, VT, W_, LD, ST, SPLAT)                                                 \
  do {                                                                                             \
    for (; o < O; o++) {                                                                           \
      T *restrict g = gW + o * I;                                                                  \
      VT dv = SPLAT(d[o]);                                                                         \
      size_t i = 0;                                                                                \
      for (; i + (W_) <= I; i += (W_)) ST(g + i) = LD(g + i) + dv * LD(x + i);                     \
      for (; i < I; i++) g[i] += d[o] * x[i];                                                      \
    }                                                                                              \
    if (!gb) return;                                                                               \
    for (o = 0; o + (W_) <= O; o += (W_)) ST(gb + o) = LD(gb + o) + LD(d + o);                     \
    for (; o < O; o++) gb[o] += d[o];                                                              \
  } while (0)
#endif

#if !SC__F32 && defined(SC__VEC_F64)
/* The vector kernels (double): those that the ISA instantiations
 * take from explicit vector code instead of the portable source (SC__VEC_F64): only where
 * the compiler's own vectorisation of the portable loop measured badly, or where another
 * form measured faster for double.
 *
 * vec_dwl_fold_f64: gw[k] += the SC__TW lanes of wl[k]. The portable sc__dwl_fold is
 * vectorised by GCC across k, with 4 x 4 transposes and spills (40 % of a batch-32
 * valgrad of 1 -> 32 relu -> 1 on AVX2); here each weight's lanes are added as two 4-wide
 * vectors, in exactly sc__dwl_fold's order (partial sums s_j over the lanes t = j mod 8, in
 * lane order, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))), so the bits are the
 * scalar path's. */
#ifndef SC_KERNELS_VEC_F64_H
#define SC_KERNELS_VEC_F64_H

#if SC__TW % 8 != 0
#error "vec_dwl_fold_f64 needs a tile width that is a multiple of 8"
#endif

typedef double sc_v4d __attribute__((vector_size(32), aligned(8), may_alias));

static inline void vec_dwl_fold_f64(double *restrict gw, const double *restrict wl, size_t n) {
  for (size_t k = 0; k < n; k++) {
    const double *w = wl + k * SC__TW;
    sc_v4d a = *(const sc_v4d *)(const void *)w, b = *(const sc_v4d *)(const void *)(w + 4);
    for (int t = 8; t < SC__TW; t += 8) {
      a += *(const sc_v4d *)(const void *)(w + t);
      b += *(const sc_v4d *)(const void *)(w + t + 4);
    }
    gw[k] += ((a[0] + a[1]) + (a[2] + a[3])) + ((b[0] + b[1]) + (b[2] + b[3]));
  }
}

/* The dense forward and dx of the batch paths in double, as explicit vector code of the ISA's
 * width (8 doubles on AVX-512, 4 on AVX2), register blocks of DOB rows x 2 vectors. GCC's own
 * vectorisation of the portable loops (sc__dense_fwd, sc__dense_dx) on AVX-512 ran across
 * the rows of a register block, with vpermt2pd transposes into and out of it: on Zen 4 the
 * BNN's gradient (1 -> 32 relu -> 1, batch 100) took 6.5 us on AVX-512 against 5.6 on AVX2
 * (bench/RESULTS.md, session 25). Each output's sum is the portable one (the bias or 0, then
 * the products in input order, each a multiply-add): the same bits. vec_dense_dx_act_f64
 * also applies the activation pullback of the dense layer below (identity, relu, tanh,
 * sigmoid: sc__act_bwd's operations) and adds its bias lanes, as vec_dense_dx_act_f32 does,
 * so the pass of sc__act_bwd_lane over that layer is saved. */
#if defined(SC__ISA_AVX512)
#define DVW 8 /* doubles per vector */
#define DOB 8 /* rows per register block: 8 x 2 accumulators */
#else
#define DVW 4
#define DOB 4 /* 4 x 2 accumulators of 16 registers */
#endif
#define DNV (SC__TW / DVW) /* vectors per tile row */
typedef double sc_vd __attribute__((vector_size(DVW * 8), aligned(8), may_alias));
typedef long long sc_vdl __attribute__((vector_size(DVW * 8), aligned(8), may_alias));
#define D_ROW(p, j) (((const sc_vd *)(const void *)(p))[j])
#define D_ROWW(p, j) (((sc_vd *)(void *)(p))[j])
#if DVW == 8
#define D_SPLAT(s) ((sc_vd){(s), (s), (s), (s), (s), (s), (s), (s)})
#else
#define D_SPLAT(s) ((sc_vd){(s), (s), (s), (s)})
#endif
/* v where m is false, else 0 (m: a comparison's lanes, all ones or all zeros) */
#define D_ZERO_IF(m, v) ((sc_vd)((sc_vdl)(v) & ~(sc_vdl)(m)))

/* acc[k][j] (NB rows, NVB vectors from vector jc of a tile row) = INIT(k), then for each of
 * the n steps s in order, += wp[s * ws + k * wk] times vector jc + j of tile row s of src: a
 * dense layer's sums in register blocks (the forward: rows of W against x's rows; dx: columns
 * of W against dz's rows) */
#define D_ACC(NB, NVB, INIT, src, n, wp, ws, wk)                                                   \
  sc_vd acc[NB][NVB];                                                                              \
  _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) {                                          \
    sc_vd ik = INIT(k);                                                                            \
    _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) acc[k][j] = ik;                          \
  }                                                                                                \
  for (size_t s = 0; s < (n); s++) {                                                               \
    sc_vd sv[NVB];                                                                                 \
    _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) sv[j] =                                  \
        D_ROW((src) + s * SC__TW, jc + j);                                                         \
    const double *w = (wp) + s * (ws);                                                             \
    _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) {                                        \
      sc_vd wv = D_SPLAT(w[(size_t)k * (wk)]);                                                     \
      _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) acc[k][j] += wv * sv[j];               \
    }                                                                                              \
  }
#define D_BIAS(k) D_SPLAT(b ? b[o + (size_t)(k)] : 0.0)
#define D_ZERO(k) D_SPLAT(0.0)

/* rows o..o+NB of a = act(W x + b), NVB vectors of the tile at a time; identity and relu are
 * applied as the sums are stored (sc__act_n's operations), the other activations by
 * sc__act_row from tmp */
#define D_FWD_BODY(NB, NVB)                                                                        \
  {                                                                                                \
    _Pragma("GCC unroll 4") for (int jc = 0; jc < DNV; jc += NVB) {                                \
      D_ACC(NB, NVB, D_BIAS, x, I, W + o * I, 1, I)                                                \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++)                                        \
          _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) {                                  \
        sc_vd v = acc[k][j];                                                                       \
        size_t r = (o + (size_t)k) * SC__TW;                                                       \
        if (act == SC_IDENTITY || act == SC_RELU) {                                                \
          if (z) D_ROWW(z + r, jc + j) = v;                                                        \
          D_ROWW(a + r, jc + j) = act == SC_RELU ? D_ZERO_IF(v < 0.0, v) : v;                      \
        } else                                                                                     \
          D_ROWW(tmp + (size_t)k * SC__TW, jc + j) = v;                                            \
      }                                                                                            \
    }                                                                                              \
    if (act != SC_IDENTITY && act != SC_RELU)                                                      \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++) SC__TN(sc__act_row)(                   \
          a + (o + (size_t)k) * SC__TW, z ? z + (o + (size_t)k) * SC__TW : NULL,                   \
          tmp + (size_t)k * SC__TW, act);                                                          \
    o += NB;                                                                                       \
  }

static void vec_dense_fwd_f64(double *restrict a, double *restrict z, const double *restrict W,
                              const double *restrict b, const double *restrict x, size_t O,
                              size_t I, sc_act act) {
  double tmp[DOB * SC__TW] __attribute__((aligned(64)));
  size_t o = 0;
  while (o + DOB <= O) D_FWD_BODY(DOB, 2)
#if DOB > 4
  if (o + 4 <= O) D_FWD_BODY(4, 2)
#endif
  while (o < O) D_FWD_BODY(1, DNV) /* one row: the whole tile's vectors hide the latency */
}

/* rows i..i+NB of dx = W^T dz, then the layer below's pullback and bias lanes */
#define D_DX_BODY(NB, NVB)                                                                         \
  {                                                                                                \
    _Pragma("GCC unroll 4") for (int jc = 0; jc < DNV; jc += NVB) {                                \
      D_ACC(NB, NVB, D_ZERO, dz, O, W + i, I, 1)                                                   \
      _Pragma("GCC unroll 16") for (int k = 0; k < NB; k++)                                        \
          _Pragma("GCC unroll 8") for (int j = 0; j < NVB; j++) {                                  \
        sc_vd v = acc[k][j];                                                                       \
        size_t r = (i + (size_t)k) * SC__TW;                                                       \
        if (act != SC_IDENTITY) { /* the layer below's derivative, from its output xa */           \
          sc_vd av = D_ROW(xa + r, jc + j);                                                        \
          if (act == SC_RELU)                                                                      \
            v = D_ZERO_IF(av <= 0.0, v);                                                           \
          else if (act == SC_TANH)                                                                 \
            v *= 1.0 - av * av;                                                                    \
          else                                                                                     \
            v *= av * (1.0 - av);                                                                  \
        }                                                                                          \
        D_ROWW(dx + r, jc + j) = v;                                                                \
        if (bl) D_ROWW(bl + r, jc + j) = D_ROW(bl + r, jc + j) + v;                                \
      }                                                                                            \
    }                                                                                              \
    i += NB;                                                                                       \
  }

static inline __attribute__((always_inline)) void
vec_dense_dx_body_f64(double *restrict dx, const double *restrict W, const double *restrict dz,
                      size_t O, size_t I, sc_act act, const double *restrict xa,
                      double *restrict bl) {
  size_t i = 0;
  while (i + DOB <= I) D_DX_BODY(DOB, 2)
#if DOB > 4
  if (i + 4 <= I) D_DX_BODY(4, 2)
#endif
  while (i < I) D_DX_BODY(1, DNV)
}
static void vec_dense_dx_f64(double *restrict dx, const double *restrict W,
                             const double *restrict dz, size_t O, size_t I) {
  vec_dense_dx_body_f64(dx, W, dz, O, I, SC_IDENTITY, NULL, NULL);
}
static void vec_dense_dx_act_f64(double *restrict dx, const double *restrict W,
                                 const double *restrict dz, size_t O, size_t I, sc_act act,
                                 const double *restrict xa, double *restrict bl) {
  vec_dense_dx_body_f64(dx, W, dz, O, I, act, xa, bl);
}
#undef D_FWD_BODY
#undef D_DX_BODY
#undef D_ACC
#undef D_BIAS
#undef D_ZERO
#undef D_ZERO_IF
#undef D_SPLAT
#undef D_ROWW
#undef D_ROW
#undef DNV
#undef DOB
#undef DVW

/* The one-state path's dense layers (sc_apply_f64, sc_vjp_f64, sc_jvp_f64: one sample, a
 * neural ODE's right-hand side), as explicit 4-wide code. The portable versions (sc__one_*
 * below) are plain loops the compiler vectorises with a scalar tail, a runtime alias check
 * and, for 2 inputs, strided column sums: for the ODE net 2 -> 50 tanh -> 2 that fixed cost
 * was most of the call (bench/RESULTS.md, session 12). Here W is read in its row-major
 * layout only (no reads past a row's or the matrix's end; a tail of fewer than 4 rows or
 * columns goes element by element) and every output is written up to a multiple of 4, the
 * padding with zeros, so that the activation loops that follow run on whole vectors. The
 * sums are in another order than the portable ones: results agree to the last bits only. */
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SC__SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
typedef long long sc__v4l __attribute__((vector_size(32)));
#define SC__SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (sc__v4l){i0, i1, i2, i3})
#endif
#define SC__LD4(ptr) (*(const sc_v4d *)(const void *)(ptr))
#define SC__ST4(ptr) (*(sc_v4d *)(void *)(ptr))

static inline sc_v4d vone_splat(double v) { return (sc_v4d){v, v, v, v}; }

/* the four sums of r0..r3's lanes: (sum r0, sum r1, sum r2, sum r3) */
static inline sc_v4d vone_hsum4(sc_v4d r0, sc_v4d r1, sc_v4d r2, sc_v4d r3) {
  sc_v4d t0 = SC__SHUF4(r0, r1, 0, 4, 2, 6) + SC__SHUF4(r0, r1, 1, 5, 3, 7);
  sc_v4d t1 = SC__SHUF4(r2, r3, 0, 4, 2, 6) + SC__SHUF4(r2, r3, 1, 5, 3, 7);
  return SC__SHUF4(t0, t1, 0, 1, 4, 5) + SC__SHUF4(t0, t1, 2, 3, 6, 7);
}

/* dW of a small dense layer in dot form: gW[o*I + i] += the sum over the tile's SC__TW
 * samples of dz[o][t] x[i][t], as two 4-wide partial sums (lanes t mod 8 < 4 and >= 4,
 * samples in order), added as ((s0[0] + s1[0]) + (s0[1] + s1[1])) + ((s0[2] + s1[2]) +
 * (s0[3] + s1[3])). On the double paths it replaces the lane form, whose read-modify-write
 * of O x I x SC__TW accumulators per tile (and their fold per slice) was the largest cost
 * of a small double valgrad; for float the lane form stays (twice the lanes per vector).
 * Four weights at a time (consecutive o*I + i): their four lane sums s0 + s1 are reduced
 * together by vone_hsum4's shuffles, which add them in the same pairs (the same bits as one
 * at a time); one at a time, the horizontal sums were a quarter of the BNN's gradient. */
static inline sc_v4d vec_dwd_lanes(const double *restrict d, const double *restrict xi) {
  sc_v4d s0 = SC__LD4(d) * SC__LD4(xi), s1 = SC__LD4(d + 4) * SC__LD4(xi + 4);
  for (int t = 8; t < SC__TW; t += 8) {
    s0 += SC__LD4(d + t) * SC__LD4(xi + t);
    s1 += SC__LD4(d + t + 4) * SC__LD4(xi + t + 4);
  }
  return s0 + s1; /* (s0[j] + s1[j]) */
}
static inline void vec_dense_dwd_f64(double *restrict gW, const double *restrict dz,
                                     const double *restrict x, size_t O, size_t I) {
  size_t n = O * I, f = 0, o = 0, i = 0; /* (o, i): the weight f's row and column */
  for (; f + 4 <= n; f += 4) {
    sc_v4d u[4];
    for (int q = 0; q < 4; q++) {
      u[q] = vec_dwd_lanes(dz + o * SC__TW, x + i * SC__TW);
      if (++i == I) i = 0, o++;
    }
    SC__ST4(gW + f) = SC__LD4(gW + f) + vone_hsum4(u[0], u[1], u[2], u[3]);
  }
  for (; f < n; f++) {
    sc_v4d u = vec_dwd_lanes(dz + o * SC__TW, x + i * SC__TW);
    gW[f] += (u[0] + u[1]) + (u[2] + u[3]);
    if (++i == I) i = 0, o++;
  }
}

/* the sum over the inputs of row r (W + r I) times x, 4 lanes then the tail */
static inline double vone_rowdot(const double *restrict w, const double *restrict x, size_t I) {
  sc_v4d s0 = vone_splat(0), s1 = s0, s2 = s0, s3 = s0; /* four chains: it is latency-bound */
  size_t i = 0;
  for (; i + 16 <= I; i += 16) {
    s0 += SC__LD4(w + i) * SC__LD4(x + i);
    s1 += SC__LD4(w + i + 4) * SC__LD4(x + i + 4);
    s2 += SC__LD4(w + i + 8) * SC__LD4(x + i + 8);
    s3 += SC__LD4(w + i + 12) * SC__LD4(x + i + 12);
  }
  for (; i + 4 <= I; i += 4) s0 += SC__LD4(w + i) * SC__LD4(x + i);
  s0 = (s0 + s1) + (s2 + s3);
  double s = (s0[0] + s0[1]) + (s0[2] + s0[3]);
  for (; i < I; i++) s += w[i] * x[i];
  return s;
}

/* pre[o] = b[o] + sum_i W[o I + i] x[i] for o < O (b may be NULL); pre[O..O4) = 0 */
static void vone_fwd_f64(double *restrict pre, const double *restrict W, const double *restrict b,
                         const double *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v4d xv = vone_splat(x[0]);
    for (; o + 4 <= O; o += 4)
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + SC__LD4(W + o) * xv;
  } else if (I == 2) { /* four rows are two vectors (w00 w01 w10 w11), (w20 w21 w30 w31) */
    sc_v4d xx = {x[0], x[1], x[0], x[1]};
    for (; o + 4 <= O; o += 4) {
      sc_v4d p0 = SC__LD4(W + 2 * o) * xx, p1 = SC__LD4(W + 2 * o + 4) * xx;
      sc_v4d s = SC__SHUF4(p0, p1, 0, 2, 4, 6) + SC__SHUF4(p0, p1, 1, 3, 5, 7);
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + s;
    }
  } else if (I >= 4) {
    for (; o + 4 <= O; o += 4) {
      const double *w0 = W + o * I, *w1 = w0 + I, *w2 = w1 + I, *w3 = w2 + I;
      sc_v4d r0 = vone_splat(0), r1 = r0, r2 = r0, r3 = r0;
      size_t i = 0;
      for (; i + 4 <= I; i += 4) {
        sc_v4d xv = SC__LD4(x + i);
        r0 += SC__LD4(w0 + i) * xv;
        r1 += SC__LD4(w1 + i) * xv;
        r2 += SC__LD4(w2 + i) * xv;
        r3 += SC__LD4(w3 + i) * xv;
      }
      sc_v4d s = vone_hsum4(r0, r1, r2, r3);
      for (; i < I; i++) s += (sc_v4d){w0[i], w1[i], w2[i], w3[i]} * vone_splat(x[i]);
      SC__ST4(pre + o) = (b ? SC__LD4(b + o) : vone_splat(0)) + s;
    }
  }
  /* the rows left (all of them for I = 3), 4 at a time, the last vector with the padding (the
   * loads that follow read it so) */
  for (; o < O; o += 4) {
    sc_v4d t = vone_splat(0);
    for (size_t j = 0; j < 4 && o + j < O; j++)
      t[j] = (b ? b[o + j] : 0) + vone_rowdot(W + (o + j) * I, x, I);
    SC__ST4(pre + o) = t;
  }
}

/* dx[i] = sum_o W[o I + i] d[o] for i < I; dx[I..I4) = 0 */
static void vone_dx_f64(double *restrict dx, const double *restrict W, const double *restrict d,
                        size_t O, size_t I) {
  if (I == 1) {
    SC__ST4(dx) = (sc_v4d){vone_rowdot(W, d, O), 0, 0, 0};
  } else if (I == 2) { /* (w00 w01 w10 w11) (d0 d0 d1 d1): lanes 0, 2 go to dx0, 1, 3 to dx1 */
    sc_v4d a0 = vone_splat(0), a1 = a0, a2 = a0, a3 = a0;
    size_t o = 0;
    for (; o + 8 <= O; o += 8) {
      sc_v4d dv = SC__LD4(d + o), dw = SC__LD4(d + o + 4);
      a0 += SC__LD4(W + 2 * o) * SC__SHUF4(dv, dv, 0, 0, 1, 1);
      a1 += SC__LD4(W + 2 * o + 4) * SC__SHUF4(dv, dv, 2, 2, 3, 3);
      a2 += SC__LD4(W + 2 * o + 8) * SC__SHUF4(dw, dw, 0, 0, 1, 1);
      a3 += SC__LD4(W + 2 * o + 12) * SC__SHUF4(dw, dw, 2, 2, 3, 3);
    }
    if (o + 4 <= O) {
      sc_v4d dv = SC__LD4(d + o);
      a0 += SC__LD4(W + 2 * o) * SC__SHUF4(dv, dv, 0, 0, 1, 1);
      a1 += SC__LD4(W + 2 * o + 4) * SC__SHUF4(dv, dv, 2, 2, 3, 3);
      o += 4;
    }
    a0 = (a0 + a1) + (a2 + a3);
    double s0 = a0[0] + a0[2], s1 = a0[1] + a0[3];
    for (; o < O; o++) s0 += W[2 * o] * d[o], s1 += W[2 * o + 1] * d[o];
    SC__ST4(dx) = (sc_v4d){s0, s1, 0, 0};
  } else
    SC__VONE_DX_COLS(double, sc_v4d, 4, SC__LD4, SC__ST4, vone_splat);
}

/* gW[o I + i] += d[o] x[i], gb[o] += d[o] (gb may be NULL) */
static void vone_dw_f64(double *restrict gW, double *restrict gb, const double *restrict d,
                        const double *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v4d xv = vone_splat(x[0]);
    for (; o + 4 <= O; o += 4) SC__ST4(gW + o) = SC__LD4(gW + o) + SC__LD4(d + o) * xv;
  } else if (I == 2) {
    sc_v4d xx = {x[0], x[1], x[0], x[1]};
    for (; o + 4 <= O; o += 4) {
      sc_v4d dv = SC__LD4(d + o);
      SC__ST4(gW + 2 * o) = SC__LD4(gW + 2 * o) + SC__SHUF4(dv, dv, 0, 0, 1, 1) * xx;
      SC__ST4(gW + 2 * o + 4) = SC__LD4(gW + 2 * o + 4) + SC__SHUF4(dv, dv, 2, 2, 3, 3) * xx;
    }
  }
  SC__VONE_DW_ROWS(double, sc_v4d, 4, SC__LD4, SC__ST4, vone_splat);
}

#endif
#define SC__K_FOLD_TW vec_dwl_fold_f64
#define SC__K_DWD vec_dense_dwd_f64 /* small dense layers: dW in dot form, not lane form */
#undef SC__K_FWD
#undef SC__K_DX
#define SC__K_FWD vec_dense_fwd_f64
#define SC__K_DX vec_dense_dx_f64
#define SC__K_DX_ACT vec_dense_dx_act_f64
#define SC__DX_ACT_OK(act)                                                                         \
  ((act) == SC_IDENTITY || (act) == SC_RELU || (act) == SC_TANH || (act) == SC_SIGMOID)
#define SC__DWD_DENSE 1
#else
#define SC__K_FOLD_TW SC__TN(sc__dwl_fold)
#define SC__DWD_DENSE 0
#endif
#define SC__K_ACTB SC__TN(sc__act_bwd)
#if SC__F32 && defined(SC__VEC_CONV)
#define SC__K_CONV_FWD vec_conv_fwd_f32
#define SC__K_CONV_DWL vec_conv_dwl_f32
#define SC__K_CONV_DX vec_conv_dx_f32
#define SC__K_POOL_FWD vec_pool_fwd_f32
#define SC__K_POOL_BWD vec_pool_bwd_f32
#define SC__K_POOL2_ACT_BWD vec_pool2_act_bwd_f32
#define SC__K_CONV_POOL_FWD vec_conv_pool_fwd_f32
#define SC__K_POOL2_HITS_BWD vec_pool2_hits_bwd_f32
#else
#define SC__K_CONV_FWD SC__TN(sc__conv_fwd)
#define SC__K_CONV_DWL SC__TN(sc__conv_dwl)
#define SC__K_CONV_DX SC__TN(sc__conv_dx)
#define SC__K_POOL_FWD SC__TN(sc__pool_fwd)
#define SC__K_POOL_BWD SC__TN(sc__pool_bwd)
#endif

#ifndef SC__BUILTIN_PASS /* the built-in passes use the types of the first pass */
typedef struct SC__TT(sc__job) {
  const sc_chain *c;
  const SC__TT(sc__kt) * kt;
  sc_workspace *ws;
  int mode;
  sc_loss loss;
  const SC__T *p, *x, *dy;
  const size_t *idx; /* sample order (NULL: 0..batch-1) */
  const void *target;
  size_t batch, ntiles, nslices;
  SC__T *y, *gx;
  int want_g;
  SC__T scale;       /* 1 / batch */
  int train;         /* dropout active (sc_valgrad, sc_train) */
  int count_correct; /* cross-entropy: count argmax == label (sc_evaluate) */
  uint64_t drop_seed, drop_step;
  double slice_loss[SC__MAX_SLICES];
  double slice_correct[SC__MAX_SLICES];
  int own_slices;            /* compute only slices [slice_lo, slice_hi), reduce nothing */
  size_t slice_lo, slice_hi; /* (set by sc__execute from dist_rank / dist_ranks) */
  int dist_rank, dist_ranks;
  int bf16;  /* round the matrix operands to bfloat16 (float only; J->p is then ws->bf_p) */
  int bf16k; /* and the dense and conv layers' products by the bf16 kernels (ws->bf16k) */
  int chk_x; /* the input's NaN / Inf check done by the gathers (sc__gather): a slice that finds
              * one stops and sets slice_bad[s]; sc__execute then writes nothing and sets x_bad */
  int x_bad;
  unsigned char slice_bad[SC__MAX_SLICES];
  /* the batch's input and target tiles made beforehand (ws->tiles_x, ws->tiles_t: tile k at
   * k in SC__TW and k out SC__TW), read in place instead of gathered; NULL: gathered */
  const SC__T *tiles_x, *tiles_t;
} SC__TT(sc__job);
#endif

static inline size_t SC__TN(sc__row)(const SC__TT(sc__job) * J, size_t b) {
  return J->idx ? J->idx[b] : b;
}

/* tile (rows x SC__TW, feature-major) <- samples b0..b0+n of a row-major array. With chk, returns
 * whether any of the rows' values is NaN or Inf (else 0): the vector gathers check what they
 * load, the portable one checks the tile after */
static int SC__TN(sc__gather)(SC__T *restrict tile, const SC__T *restrict src, size_t cols,
                              const SC__TT(sc__job) * J, size_t b0, size_t n, int chk) {
#if SC__F32 && defined(SC__VEC_GATHER)
  int bad = 0;
  if (vec_gather_f32(tile, src, cols, J->idx, b0, n, chk ? &bad : NULL)) return bad;
#endif
  if (cols == 1) /* one feature (a 1-D regression, a scalar target) */
    for (size_t t = 0; t < n; t++) tile[t] = src[SC__TN(sc__row)(J, b0 + t)];
  else
    for (size_t t = 0; t < n; t++) {
      const SC__T *r = src + SC__TN(sc__row)(J, b0 + t) * cols;
      for (size_t i = 0; i < cols; i++) tile[i * SC__TW + t] = r[i];
    }
  for (size_t t = n; t < SC__TW; t++)
    for (size_t i = 0; i < cols; i++) tile[i * SC__TW + t] = 0;
  return chk && J->kt->find_nonfinite(tile, cols * SC__TW) != cols * SC__TW;
}

/* rows b0..b0+n of a row-major array <- tile */
static void SC__TN(sc__scatter)(SC__T *restrict dst, const SC__T *restrict tile, size_t cols,
                                size_t b0, size_t n) {
  for (size_t t = 0; t < n; t++) {
    SC__T *r = dst + (b0 + t) * cols;
    for (size_t i = 0; i < cols; i++) r[i] = tile[i * SC__TW + t];
  }
}

/* xT (SC__TW x ld, sample-major, zero-padded to ld) <- x (I x SC__TW) */
static inline void SC__TN(sc__transpose)(SC__T *restrict xT, const SC__T *restrict x, size_t I,
                                         size_t ld) {
  for (int t = 0; t < SC__TW; t++) {
    SC__T *r = xT + (size_t)t * ld;
    for (size_t i = 0; i < I; i++) r[i] = x[i * SC__TW + (size_t)t];
    for (size_t i = I; i < ld; i++) r[i] = 0;
  }
}

/* the exp and log of a tile row in place, for the logit cross-entropy */
#ifdef SC__SLEEF
#define SC__CE_EXP_ROW(r) SC__TN(sc__sleef_exp)((r), (r), SC__TW)
#define SC__CE_LOG_ROW(r) SC__TN(sc__sleef_log)((r), (r), SC__TW)
#else
#define SC__CE_EXP_ROW(r)                                                                          \
  for (int q_ = 0; q_ < SC__TW; q_++) (r)[q_] = SC__EXP((r)[q_])
#define SC__CE_LOG_ROW(r)                                                                          \
  for (int q_ = 0; q_ < SC__TW; q_++) (r)[q_] = SC__LOG((r)[q_])
#endif
/* loss of one tile into lanes; with d != NULL also dL/dyhat (zero in padded columns) */
static void SC__TN(sc__loss_tile)(const SC__TT(sc__job) * J, SC__T *restrict lanes,
                                  SC__T *restrict d, const SC__T *restrict yhat, SC__T *restrict tg,
                                  size_t b0, size_t n) {
  const sc_chain *c = J->c;
  size_t O = c->out;
  SC__T s = J->scale;
  if (J->loss == SC_LOSS_LOGIT_CROSSENTROPY) {
    /* Row by row across the tile's samples (the lanes), so that the exp and log of a whole
     * row go to SLEEF's vector functions in the ISA builds: one libm call per class and
     * sample took 40 % of a float valgrad of 64 -> 32 relu -> 10 at batch 32 (bench/RESULTS.md,
     * session 26). Per sample the same operations in the same order as one sample at a time
     * (the max's term exp(0) = 1 first, the others in class order; its own place adds +0),
     * on every lane; the padding lanes' results are dropped. */
    const int32_t *lab = J->target;
    SC__T m[SC__TW], se[SC__TW], e[SC__TW];
    int32_t am[SC__TW], y[SC__TW];
    int t;
    for (t = 0; t < SC__TW; t++) {
      y[t] = (size_t)t < n ? lab[SC__TN(sc__row)(J, b0 + (size_t)t)] : -1;
      m[t] = yhat[t], am[t] = 0, se[t] = 1;
    }
    for (size_t o = 1; o < O; o++)
      for (t = 0; t < SC__TW; t++) {
        SC__T v = yhat[o * SC__TW + (size_t)t];
        int gt = v > m[t];
        m[t] = gt ? v : m[t];
        am[t] = gt ? (int32_t)o : am[t];
      }
    for (size_t o = 0; o < O; o++) {
      for (t = 0; t < SC__TW; t++) e[t] = yhat[o * SC__TW + (size_t)t] - m[t];
      SC__CE_EXP_ROW(e);
      for (t = 0; t < SC__TW; t++) se[t] += am[t] == (int32_t)o ? 0 : e[t];
    }
    SC__CE_LOG_ROW(se);                         /* log(se) */
    for (t = 0; t < SC__TW; t++) se[t] += m[t]; /* lse */
    for (t = 0; t < (int)n; t++) {
      lanes[t] += se[t] - yhat[(size_t)y[t] * SC__TW + (size_t)t];
      if (J->count_correct) lanes[SC__TW + t] += am[t] == y[t] ? 1 : 0;
    }
    if (d)
      for (size_t o = 0; o < O; o++) {
        SC__T *dr = d + o * SC__TW;
        for (t = 0; t < SC__TW; t++) e[t] = yhat[o * SC__TW + (size_t)t] - se[t];
        SC__CE_EXP_ROW(e);
        for (t = 0; t < SC__TW; t++)
          dr[t] = (size_t)t < n ? s * (e[t] - (y[t] == (int32_t)o ? 1 : 0)) : 0;
      }
    return;
  }
  const SC__T *tt = tg; /* the targets' tile: made before the step, or gathered here */
  if (J->tiles_t)
    tt = J->tiles_t + b0 * O;
  else
    SC__TN(sc__gather)(tg, (const SC__T *)J->target, O, J, b0, n, 0);
  SC__T mask[SC__TW];
  for (int t = 0; t < SC__TW; t++) mask[t] = (size_t)t < n ? 1 : 0;
  for (size_t o = 0; o < O; o++) {
    const SC__T *yr = yhat + o * SC__TW, *tr = tt + o * SC__TW;
    SC__T *dr = d ? d + o * SC__TW : NULL;
    if (J->loss == SC_LOSS_SQUARED) {
      for (int t = 0; t < SC__TW; t++) {
        SC__T e = (yr[t] - tr[t]) * mask[t];
        lanes[t] += e * e;
        if (dr) dr[t] = 2 * s * e;
      }
    } else { /* absolute */
      for (int t = 0; t < SC__TW; t++) {
        SC__T e = (yr[t] - tr[t]) * mask[t];
        lanes[t] += SC__FABS(e);
        /* sign(e) s, as a product: GCC 12 at -O2 with AVX2 enabled crashes (an internal
         * compiler error in const_vector_mask_from_tree) on e > 0 ? s : (e < 0 ? -s : 0) */
        if (dr) dr[t] = s * (SC__T)((e > 0) - (e < 0));
      }
    }
  }
}

#if SC__F32
/* a = act(a + b) in place after a bf16 GEMM wrote a = W x: K channels of npos tile rows each
 * (a dense layer: npos = 1), channel k's bias b[k]; z as in the forward kernels */
static void SC__TN(sc__bias_act_tile)(float *restrict a, float *restrict z, const float *restrict b,
                                      size_t K, size_t npos, sc_act act) {
#if defined(SC__VEC_F32)
  vec_conv_bias_act_f32(a, z, b, K, npos, act);
#else
  for (size_t k = 0; k < K; k++)
    for (size_t q = k * npos; q < (k + 1) * npos; q++) {
      float tmp[SC__TW];
      for (int t = 0; t < SC__TW; t++) tmp[t] = a[q * SC__TW + (size_t)t] + (b ? b[k] : 0.0f);
      SC__TN(sc__act_row)(a + q * SC__TW, z ? z + q * SC__TW : NULL, tmp, act);
    }
#endif
}
#endif

/* The slice's work, instantiated twice by sc__run_slice: with the profile clock reads
 * (profiling = 1) and without (0: they compile away; read or not, they cost 9 % of a LeNet5
 * epoch when merely present) */
#if defined(__GNUC__)
#define SC__ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define SC__ALWAYS_INLINE inline
#endif
#ifdef SC__K_CONV_POOL_FWD
/* float conv layer l's forward with the 2 x 2 max-pool above it folded in (vec_conv_pool_fwd_f32:
 * the conv's output area holds the pool's hits, a byte a lane), its pullback by
 * vec_pool2_hits_bwd_f32; SC_POOL_FUSE=0 turns it off with the other fusion */
#define SC__F32_POOL_FOLD(l) (!J->bf16 && sc__pool_fold_f32(c, l))
#endif
static SC__ALWAYS_INLINE void SC__TN(sc__run_slice_body)(SC__TT(sc__job) * J, size_t s, size_t area,
                                                         const int profiling) {
  const sc_chain *c = J->c;
  sc_workspace *ws = J->ws;
  /* the tile memory and the bf16 packing area are scratch, used only while the slice runs:
   * those of area (the worker's, see sc__task), so that one thread's slices reuse memory
   * already in its caches; the slice's gradient (gs) is its own */
  SC__T *tm = (SC__T *)(void *)(ws->slices + area * ws->slice_bytes);
  SC__T *gs = (SC__T *)(void *)(ws->slices + s * ws->slice_bytes + ws->tile_bytes);
  size_t t0 = s * J->ntiles / J->nslices, t1 = (s + 1) * J->ntiles / J->nslices;
  size_t L = c->nlayers;
  SC__T *lanes = tm + c->lossl_off;
  int backward = J->mode == SC__VALGRAD || J->mode == SC__PULLBACK;
  int want_g = backward && J->want_g;
#if SC__F32
  /* the bf16 kernels' packed operands (this slice's area) */
  uint32_t *bfs = J->bf16k ? ws->bf_scr + area * ws->bf_scr_stride : NULL;
  /* layer l's products on the bf16 GEMM (else the float kernels, on the same rounded operands) */
#define SC__BFK(l) (J->bf16k && (ws->bf_on[l] & 1))  /* its forward */
#define SC__BFKB(l) (J->bf16k && (ws->bf_on[l] & 2)) /* its pullback */
  /* its dW made whole by each tile (a dense layer's GEMM, a conv's dW^T in dwt), so stored
   * rather than added by a slice's first tile, the slice's gradient not cleared there (LeNet5
   * bf16: 3.5-4 of the 19-20 ms of the batch's row went to clearing 176 KB a slice) */
#define SC__BF_DW_FIRST(l)                                                                         \
  (SC__BFKB(l) && (c->L[l].spec.kind == SC_LAYER_DENSE ||                                          \
                   (c->L[l].spec.kind == SC_LAYER_CONV2D && c->L[l].spec.sw == 1 &&                \
                    !(ws->bf_nt && c->L[l].oc < 16) && (ws->bf_gemm_rows || ws->bf_gemm_grp))))
  /* conv layer l's forward on pairs read in place with its epilogue, with the 2 x 2 max-pool
   * above it folded in (ws->bf_pool_hits; its pullback then by bf_dz_pool_hits): the conv's
   * output area holds the hits (a byte a lane, a sixteenth of it), then a 2-row scratch (room
   * for both: oh >= 4) */
#define SC__POOL_FOLD(l)                                                                           \
  (ws->bf_pool_hits && SC__BFK(l) && SC__BFKB(l) && ws->bf_gemm_ep && ws->bf_dz_pool &&            \
   c->L[l].spec.kind == SC_LAYER_CONV2D &&                                                         \
   (c->L[l].spec.act == SC_RELU || c->L[l].spec.act == SC_IDENTITY) &&                             \
   ((ws->bf_on[l] & 4) || ((ws->bf_on[l] & 16) && !ws->bf_gemm_sumg)) && (l) + 1 < L &&            \
   c->L[(l) + 1].spec.kind == SC_LAYER_MAXPOOL2D && c->L[(l) + 1].spec.kh == 2 &&                  \
   c->L[(l) + 1].spec.kw == 2 && c->L[l].oh % 2 == 0 && c->L[l].ow % 2 == 0 && c->L[l].oh >= 4)
#define SC__HITS_SCR(P) /* the scratch after the hits (oc npos TW / 4 bytes), 64-byte aligned */   \
  (((P)->oc * (P)->oh * (P)->ow * SC__TW / 16 + 15) & ~(size_t)15)
  /* rounding to bf16 in place: VCVTNEPS2BF16 with the native kernels, else the set's code */
#define SC__BFROUND(x, n) (ws->bf_round ? ws->bf_round : SC__BFP(round_n))(x, n)
#else
#define SC__BFK(l) 0
#define SC__BFKB(l) 0
#define SC__BF_DW_FIRST(l) 0
#endif
  /* profiling (sc_workspace_profile): time since tq goes to a layer's row, or to the last
   * row (the batch gather, the loss, the folds) */
  sc__pcount *pf = profiling ? ws->prof + s * ws->prof_stride : NULL; /* this slice's set */
  uint64_t tq = pf ? sc__ns() : 0;
#define SC__PROF(row, dir, samples)                                                                \
  do {                                                                                             \
    if (pf) {                                                                                      \
      uint64_t t_ = sc__ns();                                                                      \
      SC__PADD(pf[(row)*SC__P_W + (dir)], t_ - tq);                                                \
      SC__PADD(pf[(row)*SC__P_W + (dir) + 2], (samples));                                          \
      tq = t_;                                                                                     \
    }                                                                                              \
  } while (0)

  for (int t = 0; t < 2 * SC__TW; t++) lanes[t] = 0;
  if (want_g) {
    for (size_t l = 0; l < L; l++) {
      const sc__lplan *P = &c->L[l];
      size_t nw = SC__BF_DW_FIRST(l) ? P->np - (P->spec.bias ? P->oc : 0) : 0; /* kept */
      memset(gs + P->poff + nw, 0, (P->np - nw) * sizeof(SC__T));
      if (P->lane_off != SIZE_MAX) memset(tm + P->lane_off, 0, P->oc * SC__TW * sizeof(SC__T));
      if (P->dwl_off != SIZE_MAX && P->spec.kind != SC_LAYER_DENSE &&
          !SC__BFKB(l)) /* dense: first */
        memset(tm + P->dwl_off, 0,
               (P->np - (P->spec.bias ? P->oc : 0)) * SC__DWL_LANES * sizeof(SC__T));
    }
  }
  for (size_t tile = t0; tile < t1; tile++) {
    size_t b0 = tile * SC__TW, n = J->batch - b0 < SC__TW ? J->batch - b0 : SC__TW;
#ifdef SC__K_FWD_H
    /* a batch's last tile of at most SC__TW / 2 samples (not with bf16 operands) goes through
     * the dense kernels' half forms (SC__KH): the first half of each row computed, zeros stored
     * in the second. The padding's activations are then zeros where the whole-tile kernels
     * leave act(b); its dz is zeros either way, so the results are the same but for the sign
     * of a sum that is zero. (The micro-benchmark's 200 samples end in a tile of 8.) */
    const int half = n <= SC__TW / 2 && !J->bf16;
#define SC__KH(k) (half ? k##_H : k)
#else
#define SC__KH(k) k
#endif
#ifdef SC__K_DWL2
    /* pairs of consecutive tiles of this slice (a last odd tile goes alone); the second
     * tile of a pair keeps its activations in the a_off2 buffers */
    int pair_first = (tile - t0) % 2 == 0 && tile + 1 < t1, pair_second = (tile - t0) % 2 == 1;
#define SC__AOFF(P) (pair_second ? (P)->a_off2 : (P)->a_off)
    SC__T *Xg = tm + (pair_second ? c->x_off2 : c->x_off);
#else
#define SC__AOFF(P) ((P)->a_off)
    SC__T *Xg = tm + c->x_off;
#endif
    const SC__T *X = Xg;
    if (J->tiles_x) /* made before the step (sc__train_tiles), rounded there with bf16 */
      X = J->tiles_x + tile * c->in * SC__TW;
    else {
      if (SC__TN(sc__gather)(Xg, J->x, c->in, J, b0, n, J->chk_x)) {
        J->slice_bad[s] = 1; /* a NaN or Inf in the input: no result (sc__execute) */
        return;
      }
#if SC__F32
      if (J->bf16) SC__BFROUND(Xg, c->in * SC__TW);
#endif
    }
    SC__PROF(L, SC__P_FNS, 0);
    const SC__T *in = X;
#if SC__F32
    int pooled = 0; /* the layer above (a max-pool) was made by the conv's forward */
#endif
    for (size_t l = 0; l < L; l++) {
      const sc__lplan *P = &c->L[l];
      const SC__T *W = J->p + P->poff;
      SC__T *a = tm + SC__AOFF(P), *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
#if SC__F32
      /* bf16 native kernels: the bias, a relu or identity and the rounding of the layer's
       * output done by the GEMM as it stores (ep: else NULL, and the passes after it) */
      sc__bf16_ep epv = {NULL, P->spec.act == SC_RELU, l + 1 < L}, *ep = NULL;
      if (J->bf16k && ws->bf_gemm_ep && (ws->bf_on[l] & 1) &&
          (P->spec.act == SC_RELU || P->spec.act == SC_IDENTITY) &&
          (P->spec.kind == SC_LAYER_DENSE || P->spec.kind == SC_LAYER_CONV2D)) {
        epv.bias = !P->spec.bias                     ? NULL
                   : P->spec.kind == SC_LAYER_CONV2D ? W + P->oc * P->R
                                                     : W + P->in * P->out;
        ep = &epv;
      }
#endif
      switch (P->spec.kind) {
      case SC_LAYER_DENSE: {
        sc_act fa = P->spec.act;
#if SC__F32 && defined(SC__VEC_F32)
        if (P->tanh_var) fa = SC__TANH_ACT(P->tanh_var); /* the planner's tanh variant */
#endif
#if SC__F32
        if (SC__BFK(l)) { /* bf16 kernels: a = W x on pairs of inputs, then bias and activation */
          size_t I2 = (P->in + 1) / 2;
          SC__BFP(pack_rows)(bfs, in, P->in, SC__TW, SC__TW);
          if (ep) {
            ws->bf_gemm_ep(a, SC__TW, ws->bf_w + ws->bf_woff[l], I2, bfs, SC__TW, P->out, SC__TW,
                           I2, NULL, ep);
            break;
          }
          ws->bf_gemm(a, SC__TW, ws->bf_w + ws->bf_woff[l], I2, bfs, SC__TW, P->out, SC__TW, I2, 0);
          SC__TN(sc__bias_act_tile)(a, z, P->spec.bias ? W + P->in * P->out : NULL, P->out, 1, fa);
          break;
        }
#endif
#if SC__F32 && defined(SC__VEC_F32)
        if (P->xfwd) { /* libxsmm's GEMM, then bias and activation (sc__xsmm_plan) */
          P->xfwd(in, W, a);
          vec_bias_act_f32(a, z, P->spec.bias ? W + P->in * P->out : NULL, P->out, fa);
          break;
        }
#endif
        SC__KH(SC__K_FWD)(a, z, W, P->spec.bias ? W + P->in * P->out : NULL, in, P->out, P->in, fa);
        break;
      }
      case SC_LAYER_CONV2D:
        if (P->pad_off != SIZE_MAX) {
          SC__TN(sc__pad)(tm + P->pad_off, in, P);
          in = tm + P->pad_off;
        }
#if SC__F32
        if (SC__BFK(l) && ((ws->bf_on[l] & 4) || ((ws->bf_on[l] & 16) && !ws->bf_gemm_sumg))) {
          /* the input tile packed once, B's row k read in place at brow[k]: bit 4 its pairs of
           * neighbouring columns (the direct forward, cpoff), else (bit 16, AVX512_BF16 or its
           * model) its channel pairs, the pair cp of tap (i, j) being row k = (cp kh + i) kw + j
           * at roff[k] (roff's formula with cp for ci) */
          int cols = ws->bf_on[l] & 4;
          size_t RW = P->ow * SC__TW, npos = P->oh * P->ow, t = P->spec.kh * P->spec.kw;
          size_t K2 = cols ? P->ic * ((t + 1) / 2) : (P->ic + 1) / 2 * t;
          const uint32_t *wb = ws->bf_w + ws->bf_woff[l] + P->oc * ((P->R + 1) / 2) +
                               (cols ? 1 : 2) * P->R * ((P->oc + 1) / 2); /* wc or wh */
          const size_t *brow = cols ? P->cpoff : P->roff;
          int pc = ep && SC__POOL_FOLD(l);
          float *s2 = pc ? a + SC__HITS_SCR(P) : NULL;
          /* folded, a relu conv's GEMM adds the bias alone: the pool relu's and rounds */
          sc__bf16_ep epr = {ep ? ep->bias : NULL, 0, 0};
          if (cols)
            sc__bf16_pack_colpairs(bfs, in, P);
          else
            sc__bf16_pack_chpairs(bfs, in, P);
          /* the pooled: rows 2 q, 2 q + 1 made by chunks of wn windows (at most about 16 KB of
           * the scratch, in L1), each chunk pooled as soon as it is made */
          size_t PW = P->ow / 2, wn = P->oc >= 32 ? 1 : 32 / P->oc;
          for (size_t q = 0; pc && q < P->oh / 2; q++)
            for (size_t w0 = 0; w0 < PW; w0 += wn) {
              size_t w1 = PW - w0 < wn ? PW : w0 + wn, n0 = 2 * w0 * SC__TW;
              for (size_t u = 2 * q; u < 2 * q + 2; u++)
                ws->bf_gemm_ep(s2 + (u % 2) * RW + n0, 2 * RW, wb, K2,
                               bfs + u * P->spec.sh * P->wp * SC__TW + n0, SC__TW, P->oc,
                               2 * (w1 - w0) * SC__TW, K2, brow, ep->relu ? &epr : ep);
              ws->bf_pool_hits(tm + SC__AOFF(&c->L[l + 1]), (uint8_t *)(void *)a, s2, P->oc, q,
                               P->oh / 2, PW, w0, w1, P->spec.act == SC_RELU);
              pooled = 1;
            }
          for (size_t u = 0; !pc && u < P->oh; u++) {
            const uint32_t *B = bfs + u * P->spec.sh * P->wp * SC__TW;
            if (ep)
              ws->bf_gemm_ep(a + u * RW, npos * SC__TW, wb, K2, B, SC__TW, P->oc, RW, K2, brow, ep);
            else
              ws->bf_gemm_rows(a + u * RW, npos * SC__TW, wb, K2, B, SC__TW, P->oc, RW, K2, 0, NULL,
                               NULL, 0, brow);
          }
          if (ep) break;
          SC__TN(sc__bias_act_tile)
          (a, z, P->spec.bias ? W + P->oc * P->R : NULL, P->oc, npos, P->spec.act);
          break;
        }
        if (SC__BFK(l) && (ws->bf_on[l] & 16)) { /* AMX: the input's channel pairs in place */
          size_t RW = P->ow * SC__TW, npos = P->oh * P->ow, kw = P->spec.kw;
          size_t CP = (P->ic + 1) / 2, KC = CP * P->spec.kh * kw;
          const uint32_t *wh =
              ws->bf_w + ws->bf_woff[l] + P->oc * ((P->R + 1) / 2) + 2 * P->R * ((P->oc + 1) / 2);
          sc__bf16_pack_chpairs(bfs, in, P);
          for (size_t u = 0; u < P->oh; u++) /* group (cp, i): kw taps, B's rows TW apart */
            ws->bf_gemm_sumg(a + u * RW, npos * SC__TW, wh, KC, (sc__grp_off){NULL, 0, 0, kw},
                             bfs + u * P->spec.sh * P->wp * SC__TW, SC__TW,
                             (sc__grp_off){P->roff, kw, SC__TW, 0}, P->oc, RW, kw, CP * P->spec.kh);
          SC__TN(sc__bias_act_tile)
          (a, z, P->spec.bias ? W + P->oc * P->R : NULL, P->oc, npos, P->spec.act);
          break;
        }
        if (SC__BFK(l)) { /* bf16 kernels: each output row a GEMM on pairs of taps (im2col) */
          size_t R2 = (P->R + 1) / 2, RW = P->ow * SC__TW, npos = P->oh * P->ow;
          for (size_t u = 0; u < P->oh; u++) {
            SC__BFP(pack_taps)(bfs, in, P, u);
            if (ep)
              ws->bf_gemm_ep(a + u * RW, npos * SC__TW, ws->bf_w + ws->bf_woff[l], R2, bfs, RW,
                             P->oc, RW, R2, NULL, ep);
            else
              ws->bf_gemm(a + u * RW, npos * SC__TW, ws->bf_w + ws->bf_woff[l], R2, bfs, RW, P->oc,
                          RW, R2, 0);
          }
          if (ep) break;
          SC__TN(sc__bias_act_tile)
          (a, z, P->spec.bias ? W + P->oc * P->R : NULL, P->oc, npos, P->spec.act);
          break;
        }
#endif
#if SC__F32 && defined(SC__VEC_F32)
        if (P->xconv) { /* libxsmm: im2col per output row, one GEMM per row, bias + act */
          size_t OW = P->ow, RW = OW * SC__TW, step = P->spec.sw * SC__TW;
          SC__T *col = tm + P->col_off;
          for (size_t u = 0; u < P->oh; u++) {
            const SC__T *row = in + u * P->spec.sh * P->wp * SC__TW;
            for (size_t r = 0; r < P->R; r++) {
              const SC__T *src = row + P->roff[r] * SC__TW;
              if (P->spec.sw == 1)
                memcpy(col + r * RW, src, RW * sizeof *col);
              else
                for (size_t v = 0; v < OW; v++)
                  memcpy(col + r * RW + v * SC__TW, src + v * step, SC__TW * sizeof *col);
            }
            P->xconv(col, W, a + u * RW);
          }
          vec_conv_bias_act_f32(a, z, P->spec.bias ? W + P->oc * P->R : NULL, P->oc, P->oh * OW,
                                P->spec.act);
          break;
        }
#endif
#ifdef SC__K_CONV_POOL_FWD
        if (SC__F32_POOL_FOLD(l)) {
          SC__K_CONV_POOL_FWD(tm + SC__AOFF(&c->L[l + 1]), (uint8_t *)(void *)a, W,
                              P->spec.bias ? W + P->oc * P->R : NULL, in, P->spec.act == SC_RELU,
                              P);
          pooled = 1;
          break;
        }
#endif
        SC__K_CONV_FWD(a, z, W, P->spec.bias ? W + P->oc * P->R : NULL, in, P);
        break;
      case SC_LAYER_MAXPOOL2D:
#if SC__F32
        if (pooled) { /* by the conv below (SC__POOL_FOLD) */
          pooled = 0;
          break;
        }
#endif
        SC__K_POOL_FWD(a, in, P);
        break;
      case SC_LAYER_FLATTEN: break;
      case SC_LAYER_DROPOUT:
        if (J->train && P->spec.rate > 0) {
          uint32_t *mask = (uint32_t *)(void *)(tm + P->mask_off);
          uint32_t thr = (uint32_t)(P->spec.rate * 4294967296.0);
          SC__T keep = (SC__T)(1.0 / (1.0 - P->spec.rate));
          for (size_t f = 0; f < P->out; f++) {
            uint32_t m = mask[f] = sc__drop_word(J->drop_seed, J->drop_step, b0, f, thr);
            for (int t = 0; t < SC__TW; t++)
              a[f * SC__TW + (size_t)t] = (m >> t & 1u) ? in[f * SC__TW + (size_t)t] * keep : 0;
          }
        } else
          memcpy(a, in, P->out * SC__TW * sizeof(SC__T));
        break;
      }
      in = tm + SC__AOFF(P);
#if SC__F32
      /* bf16: a layer's output is the next matrix product's operand; the last one's is not */
      if (J->bf16 && l + 1 < L && !ep && P->spec.kind != SC_LAYER_FLATTEN &&
          P->spec.kind != SC_LAYER_MAXPOOL2D) /* (those two pick rounded inputs) */
        SC__BFROUND(tm + SC__AOFF(P), P->out * SC__TW);
#endif
      SC__PROF(l, SC__P_FNS, n);
    }
    const SC__T *yhat = in;
    /* dz ping-pongs between two buffers: a layer reads cur and writes the dz of the layer below
     * into nxt, the other one. On the first tile of a pair, a dense layer that holds its dz for
     * the pair's dW (hold_off) gets it written there directly instead (no copy); its dx then
     * goes to a ping-pong buffer again */
    SC__T *const pp0 = tm + c->d0_off, *const pp1 = tm + c->d1_off;
#ifdef SC__K_DWL2
#define SC__HOLDS(Q) (pair_first && (Q)->hold_off != SIZE_MAX)
#else
#define SC__HOLDS(Q) 0
#endif
    SC__T *cur = pp0, *nxt = pp1;
    if (backward && SC__HOLDS(&c->L[L - 1])) cur = tm + c->L[L - 1].hold_off;
    if (J->mode == SC__FORWARD) {
      SC__TN(sc__scatter)(J->y, yhat, c->out, b0, n);
      continue;
    }
    if (J->mode == SC__LOSS || J->mode == SC__VALGRAD) {
      SC__T *dl = J->mode == SC__VALGRAD ? cur : NULL;
      SC__TN(sc__loss_tile)(J, lanes, dl, yhat, tm + c->t_off, b0, n);
    } else { /* pullback: the cotangent is given */
      SC__TN(sc__gather)(cur, J->dy, c->out, J, b0, n, 0);
    }
    SC__PROF(L, SC__P_FNS, 0);
    if (!backward) continue;
    int d_ready = 0; /* cur already holds dz of this layer (fused into the dx above) */
#if SC__F32
    /* bf16 native: conv layer k's dz (k = 0: no dx) made with its dW's packing in one pass
     * (ws->bf_dz_lanes), and with a max-pooling layer above it, that pool's pullback too
     * (ws->bf_dz_pool, pool_fused: the pool left its dz in cur) */
#define SC__DZ_FUSE(k)                                                                             \
  ((k) == 0 && !J->gx && want_g && SC__BFKB(k) && ws->bf_dz_lanes && ws->bf_nt &&                  \
   c->L[k].spec.kind == SC_LAYER_CONV2D && c->L[k].spec.sw == 1 && c->L[k].oc < 16 &&              \
   (c->L[k].spec.act == SC_RELU || c->L[k].spec.act == SC_IDENTITY))
    int pool_fused = 0;
#endif
#ifdef SC__DWL_BL
    /* dense layer k's bias lanes are added by its lane-form dW (SC__DWL_BL, as it reads dz)
     * where the dx pass of the layer above would have added them (d_ready); not with bf16
     * operands, whose dz is rounded after the bias gradient is taken */
#define SC__DWL_BIAS(k)                                                                            \
  (want_g && !J->bf16 && c->L[k].spec.kind == SC_LAYER_DENSE && c->L[k].lane_off != SIZE_MAX &&    \
   c->L[k].dwl_off != SIZE_MAX && !c->L[k].dw_dot && !SC__BFKB(k))
#else
#define SC__DWL_BIAS(k) 0
#endif
    for (size_t l = L; l-- > 0;) {
      const sc__lplan *P = &c->L[l];
      const SC__T *W = J->p + P->poff;
      const SC__T *xin = l ? tm + SC__AOFF(&c->L[l - 1]) : X;
      const SC__T *a = tm + SC__AOFF(P), *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
      int need_dx = l > 0 || J->gx;
      nxt = cur == pp0 ? pp1 : pp0;
      if (l > 0 && SC__HOLDS(&c->L[l - 1])) nxt = tm + c->L[l - 1].hold_off;
      switch (P->spec.kind) {
      case SC_LAYER_DENSE: {
        /* this tile's bias lanes go with the dW below: the dx pass above left them, or the
         * layer is an identity one whose pullback would only have added them */
        SC__T *dwl_bl =
            SC__DWL_BIAS(l) && (d_ready || P->spec.act == SC_IDENTITY) ? tm + P->lane_off : NULL;
        if (d_ready)
          d_ready = 0;
        else if (dwl_bl) {
          /* identity: dz is as given, and the dW below adds the bias lanes */
        } else if (want_g && P->lane_off != SIZE_MAX) /* with the bias gradient, in one pass */
          SC__TN(sc__act_bwd_lane)(cur, tm + P->lane_off, a, z, P->out, 1, P->spec.act);
        else
          SC__K_ACTB(cur, a, z, P->out * SC__TW, P->spec.act);
#if SC__F32
        if (J->bf16) SC__BFROUND(cur, P->out * SC__TW); /* after the bias gradient */
        if (SC__BFKB(l)) { /* bf16 kernels: dW and dx as GEMMs on pairs */
          size_t O = P->out, I = P->in, O2 = (O + 1) / 2;
          if (want_g) { /* gs[o][i] += the sum over the tile's pairs of samples */
            uint32_t *dzb = bfs, *xtp = bfs + O * (SC__TW / 2);
            SC__BFP(pack_lanes)(dzb, cur, O, SC__TW, SC__TW);
            SC__BFP(pack_lanes_t)(xtp, xin, I, SC__TW);
            ws->bf_gemm(gs + P->poff, I, dzb, SC__TW / 2, xtp, I, O, I, SC__TW / 2,
                        tile > t0); /* (SC__BF_DW_FIRST) */
          }
          if (need_dx) { /* pairs of outputs (the packing reuses the area) */
            SC__BFP(pack_rows)(bfs, cur, O, SC__TW, SC__TW);
            ws->bf_gemm(nxt, SC__TW, ws->bf_w + ws->bf_woff[l] + O * ((I + 1) / 2), O2, bfs, SC__TW,
                        I, SC__TW, O2, 0);
          }
          break;
        }
#endif
        if (want_g) {
          if (P->dwl_off != SIZE_MAX && !P->dw_dot) {
            /* the first dW write of this slice for this layer stores instead of adding
             * (every tile writes every accumulator; with pairs the first write is the
             * second tile's, or the first's when the slice has one tile) */
#if defined(SC__K_DWD)
            SC__K_DWD(gs + P->poff, cur, xin, P->out, P->in);
#elif defined(SC__K_DWL2)
            int first = tile == t0 || (P->hold_off != SIZE_MAX && tile == t0 + 1);
            /* tiles in pairs: the first one's dz is held (its input stays in the a_off
             * buffers, x_off for layer 0), the second's pass does both (the same FMAs on
             * each accumulator in the same order: same bits) */
            if (P->hold_off != SIZE_MAX && (pair_first || pair_second)) {
              SC__T *hd = tm + P->hold_off;
              const SC__T *hx = l            ? tm + c->L[l - 1].a_off
                                : J->tiles_x ? J->tiles_x + (tile - 1) * c->in * SC__TW
                                             : tm + c->x_off;
              if (pair_first) {
                if (cur != hd) /* (written there by the layer above, or not) */
                  memcpy(hd, cur, P->out * SC__TW * sizeof(SC__T));
              } else /* (with bias lanes: both tiles', the first tile's dz in hd) */
                SC__K_DWL2(tm + P->dwl_off, hd, hx, cur, xin, P->out, P->in, first, dwl_bl, half);
            } else
              SC__K_DWL(tm + P->dwl_off, cur, xin, P->out, P->in, first, dwl_bl, half);
#elif defined(SC__DWL_BL)
            SC__K_DWL(tm + P->dwl_off, cur, xin, P->out, P->in, tile == t0, dwl_bl, half);
#else
            SC__K_DWL(tm + P->dwl_off, cur, xin, P->out, P->in, tile == t0);
#endif
          } else {
            size_t ld = (P->in + 15) & ~(size_t)15;
            SC__T *xT = tm + c->xT_off;
#ifdef SC__K_TRANSPOSE
            SC__K_TRANSPOSE(xT, xin, P->in, ld);
#else
            SC__TN(sc__transpose)(xT, xin, P->in, ld);
#endif
            SC__K_DW(gs + P->poff, cur, xT, P->out, P->in, ld);
          }
        }
        if (need_dx) {
#ifdef SC__K_DX_ACT
          /* a dense layer below with a cheap derivative: its activation pullback (and
           * bias lanes) is applied as dx is stored, and its own pass is skipped */
          const sc__lplan *Q = l ? &c->L[l - 1] : NULL;
          if (Q && Q->spec.kind == SC_LAYER_DENSE && SC__DX_ACT_OK(Q->spec.act)) {
            SC__KH(SC__K_DX_ACT)
            (nxt, W, cur, P->out, P->in, Q->spec.act, xin,
             want_g && Q->lane_off != SIZE_MAX && !SC__DWL_BIAS(l - 1) ? tm + Q->lane_off : NULL);
            d_ready = 1;
          } else
#endif
            SC__KH(SC__K_DX)(nxt, W, cur, P->out, P->in);
        }
        break;
      }
      case SC_LAYER_CONV2D:
#if SC__F32
        if (SC__DZ_FUSE(l)) {
          /* the dot-product form's dW alone: dz's pullback, bias lanes, rounding and lane
           * pairs in one pass (sc__bf16_dz_lanes_native), then as below */
          const float *xs = P->pad_off != SIZE_MAX ? tm + P->pad_off : xin;
          size_t npos = P->oh * P->ow, ld = npos * SC__TW, hw = P->hp * P->wp * SC__TW;
          uint32_t *dzp = bfs, *xp = bfs + P->oc * (ld / 2);
          float *bl = P->lane_off != SIZE_MAX ? tm + P->lane_off : NULL;
          if (pool_fused && SC__POOL_FOLD(l))
            ws->bf_dz_pool_hits(dzp, NULL, cur, (const uint8_t *)(const void *)a, bl, P->oc, P->oh,
                                P->ow);
          else if (pool_fused) {
            const sc__lplan *Q = &c->L[l + 1];
            ws->bf_dz_pool(dzp, NULL, cur, tm + SC__AOFF(Q), a, bl, P->oc, P->oh, P->ow,
                           P->spec.act == SC_RELU);
          } else
            ws->bf_dz_lanes(dzp, cur, bl, a, P->oc, npos, P->spec.act == SC_RELU);
          SC__BFP(pack_lanes)(xp, xs, P->ic, hw, hw);
          ws->bf_nt(gs + P->poff, P->R, dzp, ld / 2, P->ow * (SC__TW / 2), xp, P->roff, SC__TW / 2,
                    P->spec.sh * P->wp * (SC__TW / 2), P->oc, P->R, P->ow * (SC__TW / 2), P->oh);
          break;
        }
#endif
#if SC__F32
        if (pool_fused) { /* the pool's and the activation's pullback, the lanes, the rounding */
          float *bl = want_g && P->lane_off != SIZE_MAX ? tm + P->lane_off : NULL;
          if (SC__POOL_FOLD(l))
            ws->bf_dz_pool_hits(NULL, nxt, cur, (const uint8_t *)(const void *)a, bl, P->oc, P->oh,
                                P->ow);
          else
            ws->bf_dz_pool(NULL, nxt, cur, tm + SC__AOFF(&c->L[l + 1]), a, bl, P->oc, P->oh, P->ow,
                           P->spec.act == SC_RELU);
          SC__T *tmp = cur;
          cur = nxt;
          nxt = tmp;
          pool_fused = 0;
        } else
#endif
        {
          if (d_ready) /* the max-pool above made dz with this layer's activation and lanes */
            d_ready = 0;
          else if (want_g && P->lane_off != SIZE_MAX) /* with the bias gradient, in one pass */
            SC__TN(sc__act_bwd_lane)
          (cur, tm + P->lane_off, a, z, P->oc, P->oh * P->ow, P->spec.act);
          else SC__K_ACTB(cur, a, z, P->out * SC__TW, P->spec.act);
#if SC__F32
          if (J->bf16) SC__BFROUND(cur, P->out * SC__TW); /* after the bias gradient */
#endif
        }
#if SC__F32
        if (SC__BFKB(l)) { /* bf16 kernels: per output row, dW and the taps' dx as GEMMs */
          const float *xs = P->pad_off != SIZE_MAX ? tm + P->pad_off : xin;
          size_t K = P->oc, R = P->R, RW = P->ow * SC__TW, ld = P->oh * RW, K2 = (K + 1) / 2;
          if (want_g && P->spec.sw == 1 && ws->bf_nt && K < 16) {
            /* few channels: dW = dz (x's taps)^T as dot products along the lane pairs, both
             * read in place (dz packed once, the input tile packed once), over all rows */
            uint32_t *dzp = bfs, *xp = bfs + K * (ld / 2);
            size_t hw = P->hp * P->wp * SC__TW;
            SC__BFP(pack_lanes)(dzp, cur, K, ld, ld);
            SC__BFP(pack_lanes)(xp, xs, P->ic, hw, hw);
            ws->bf_nt(gs + P->poff, R, dzp, ld / 2, RW / 2, xp, P->roff, SC__TW / 2,
                      P->spec.sh * P->wp * (SC__TW / 2), K, R, RW / 2, P->oh);
          } else if (want_g && P->spec.sw == 1 && (ws->bf_gemm_rows || ws->bf_gemm_grp)) {
            /* dW^T = (the taps' lane pairs) dz^T, row u by row u: A's row r is the input's
             * lane pairs at tap r, read in place from the tile packed once (xp); B is dz's
             * lane pairs transposed (dzt); the product accumulates in dwt (R x K). On AMX one
             * group of kw taps (ci, i) is a GEMM of the grouped form (its rows of A one
             * lane-pair row apart, overlapping) */
            float *dwt = (float *)(void *)bfs;
            uint32_t *dzt = bfs + R * K, *xp = dzt + (RW / 2) * K;
            size_t hw = P->hp * P->wp * SC__TW, kw = P->spec.kw;
            /* a 5 x 5 kernel: the whole tile's dz^T, then every tap row from each input row
             * (sc__bf16_dwt5_native: the same sums in the same order) */
            int dwt5 = ws->bf_dwt5 && P->spec.kh == 5 && kw == 5 && P->spec.sh == 1 && K <= 16 &&
                       P->oh >= 4;
            if (dwt5) xp = dzt + P->oh * (RW / 2) * K;
            SC__BFP(pack_lanes)(xp, xs, P->ic, hw, hw);
            if (dwt5) {
              SC__BFP(pack_lanes_ts)(dzt, cur, K, ld, ld);
              ws->bf_dwt5(dwt, xp, dzt, K, P->ic, P->hp, P->wp, P->oh, P->ow);
            }
            for (size_t u = 0; !dwt5 && u < P->oh; u++) {
              const uint32_t *xu = xp + u * P->spec.sh * P->wp * (SC__TW / 2);
              SC__BFP(pack_lanes_ts)(dzt, cur + u * RW, K, RW, ld);
              if (ws->bf_gemm_rows)
                ws->bf_gemm_rows(dwt, K, xu, SC__TW / 2, dzt, K, R, K, RW / 2, u > 0, P->roff, NULL,
                                 0, NULL);
              else
                ws->bf_gemm_grp(dwt, K, (sc__grp_off){NULL, 0, 0, kw * K}, xu, SC__TW / 2,
                                (sc__grp_off){P->roff, kw, SC__TW / 2, 0}, dzt, K, kw, K, RW / 2,
                                P->ic * P->spec.kh, u > 0);
            }
            float *gw = gs + P->poff;
            if (tile == t0) /* (SC__BF_DW_FIRST) 0 + dwt: the bits of adding to a cleared gw */
              for (size_t o = 0; o < K; o++)
                for (size_t r = 0; r < R; r++) gw[o * R + r] = 0.0f + dwt[r * K + o];
            else
              for (size_t o = 0; o < K; o++)
                for (size_t r = 0; r < R; r++) gw[o * R + r] += dwt[r * K + o];
          } else if (want_g)
            for (size_t u = 0; u < P->oh; u++) {
              uint32_t *dzb = bfs, *xt = bfs + K * (RW / 2);
              SC__BFP(pack_lanes)(dzb, cur + u * RW, K, RW, ld);
              SC__BFP(pack_taps_t)(xt, xs, P, u);
              ws->bf_gemm(gs + P->poff, R, dzb, RW / 2, xt, R, K, R, RW / 2, 1);
            }
          if (need_dx && (ws->bf_on[l] & 32)) { /* a correlation, each sum made once */
            float *xg = P->pad_off != SIZE_MAX ? tm + P->pad_off : nxt;
            const uint32_t *wt = ws->bf_w + ws->bf_woff[l] + K * ((R + 1) / 2); /* W^T pairs */
            SC__BFP(pack_rows)(bfs, cur, K, ld, ld);
            ws->bf_dx_corr(xg, wt, bfs, P->ic, K2, P->spec.kh, P->spec.kw, P->oh, P->ow);
            if (P->pad_off != SIZE_MAX) sc__bf16_crop(nxt, xg, P);
          } else if (need_dx) { /* into the padded buffer when there is one (dW is done with it) */
            float *xg = P->pad_off != SIZE_MAX ? tm + P->pad_off : nxt;
            float *dcol = (float *)(void *)(bfs + K2 * RW);
            memset(xg, 0, P->ic * P->hp * P->wp * SC__TW * sizeof(float));
            const uint32_t *wt = ws->bf_w + ws->bf_woff[l] + K * ((R + 1) / 2); /* W^T pairs */
            for (size_t u = 0; u < P->oh; u++) {
              float *xu = xg + u * P->spec.sh * P->wp * SC__TW;
              SC__BFP(pack_rows)(bfs, cur + u * RW, K, RW, ld);
              if (P->spec.sw == 1 && ws->bf_gemm_rows) /* the taps' dx added in place: C's rows
                                                          are the input tile's, by tap groups */
                ws->bf_gemm_rows(xu, SC__TW, wt, K2, bfs, RW, R, RW, K2, 1, P->tperm, P->troff,
                                 P->ic, NULL);
              else if (ws->bf_on[l] & 8) /* AMX: the same, one group of ic taps (rows hp wp TW
                                            apart) a GEMM of the grouped form, A's rows permuted */
                ws->bf_gemm_grp(xu, P->hp * P->wp * SC__TW,
                                (sc__grp_off){P->troff, P->ic, SC__TW, 0}, wt + R * K2, K2,
                                (sc__grp_off){NULL, 0, 0, P->ic * K2}, bfs, RW, P->ic, RW, K2,
                                P->spec.kh * P->spec.kw, 1);
              else { /* im2col: the taps' dx in dcol, then added into the tile */
                ws->bf_gemm(dcol, RW, wt, K2, bfs, RW, R, RW, K2, 0);
                sc__bf16_col2im(xg, dcol, P, u);
              }
            }
            if (P->pad_off != SIZE_MAX) sc__bf16_crop(nxt, xg, P);
          }
          break;
        }
#endif
        if (want_g)
          SC__K_CONV_DWL(tm + P->dwl_off, cur, P->pad_off != SIZE_MAX ? tm + P->pad_off : xin, P);
        if (need_dx) SC__K_CONV_DX(nxt, W, cur, P);
        break;
      case SC_LAYER_MAXPOOL2D:
#if SC__F32
        if (l >= 1 && ws->bf_dz_pool && c->L[l - 1].spec.kind == SC_LAYER_CONV2D &&
            SC__BFKB(l - 1) &&
            (c->L[l - 1].spec.act == SC_RELU || c->L[l - 1].spec.act == SC_IDENTITY) &&
            P->spec.kh == 2 && P->spec.kw == 2 && P->ih % 2 == 0 && P->iw % 2 == 0) {
          /* the conv below does this pullback (with its activation's) */
          pool_fused = 1;
          need_dx = 0; /* cur stays */
          break;
        }
#endif
#ifdef SC__K_POOL2_ACT_BWD
        if (need_dx && l >= 1 && !J->bf16 && c->pool_fuse &&
            c->L[l - 1].spec.kind == SC_LAYER_CONV2D &&
            (c->L[l - 1].spec.act == SC_RELU || c->L[l - 1].spec.act == SC_IDENTITY) &&
            P->spec.kh == 2 && P->spec.kw == 2 && P->ih % 2 == 0 && P->iw % 2 == 0) {
          /* with the conv's activation pullback and bias lanes (d_ready: the conv skips them) */
          const sc__lplan *Q = &c->L[l - 1];
#ifdef SC__K_CONV_POOL_FWD
          if (SC__F32_POOL_FOLD(l - 1)) {
            SC__K_POOL2_HITS_BWD(nxt, (const uint8_t *)(const void *)(tm + SC__AOFF(Q)), cur,
                                 want_g && Q->lane_off != SIZE_MAX ? tm + Q->lane_off : NULL, P);
            d_ready = 1;
            break;
          }
#endif
          /* dx over the conv's output, which nothing reads after this pass: the tile's
           * working set at conv1's pullback 442 KB smaller (LeNet5's pool1 pullback 17.1 ->
           * 12.5 ms per epoch at 1 thread, Zen 5) */
          nxt = tm + SC__AOFF(Q);
          SC__K_POOL2_ACT_BWD(nxt, xin, a, cur,
                              want_g && Q->lane_off != SIZE_MAX ? tm + Q->lane_off : NULL,
                              Q->spec.act == SC_RELU, P);
          d_ready = 1;
          break;
        }
#endif
        if (need_dx) SC__K_POOL_BWD(nxt, xin, a, cur, P);
        break;
      case SC_LAYER_FLATTEN:
        need_dx = 0; /* the same rows: cur stays */
        break;
      case SC_LAYER_DROPOUT:
        if (J->train && P->spec.rate > 0) {
          const uint32_t *mask = (const uint32_t *)(const void *)(tm + P->mask_off);
          SC__T keep = (SC__T)(1.0 / (1.0 - P->spec.rate));
          for (size_t f = 0; f < P->out; f++)
            for (int t = 0; t < SC__TW; t++)
              cur[f * SC__TW + (size_t)t] *= (mask[f] >> t & 1u) ? keep : 0;
        }
        need_dx = 0; /* in place */
        break;
      }
      if (need_dx) cur = nxt;
      SC__PROF(l, SC__P_BNS, n);
    }
    if (J->gx) SC__TN(sc__scatter)(J->gx, cur, c->in, b0, n);
#undef SC__KH
  }
  /* fold the lane accumulators, in a fixed order */
  /* the loss lanes in double, as eight running sums (lanes t = k mod 8) and a tree: one chain
   * of 32 dependent adds at the end of each slice held 1.7 % of the micro-benchmark's samples
   * (5.6 % at batch 32). The order sets the loss's last bits, not the gradient's. The counts
   * only when they are counted. */
  double ls, cs = 0;
  {
    double q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int t = 0; t < SC__TW; t += 8)
      for (int k = 0; k < 8; k++) q[k] += (double)lanes[t + k];
    ls = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
  }
  if (J->count_correct)
    for (int t = 0; t < SC__TW; t++) cs += (double)lanes[SC__TW + t];
  J->slice_loss[s] = ls;
  J->slice_correct[s] = cs;
  if (want_g)
    for (size_t l = 0; l < L; l++) {
      const sc__lplan *P = &c->L[l];
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);
      if (P->dwl_off != SIZE_MAX && !SC__BFKB(l) &&
          !(P->spec.kind == SC_LAYER_DENSE && (SC__DWD_DENSE || P->dw_dot)))
        SC__K_DWL_FOLD(gs + P->poff, tm + P->dwl_off, nw);
      if (P->lane_off == SIZE_MAX) continue;
      SC__T *bl = tm + P->lane_off;
      SC__T *gb = gs + P->poff + nw;
#if SC__F32 && defined(SC__VEC_F32)
      /* each output's NV vectors added in order into one, stored in place as vector o (below
       * every row not yet read), then folded as the dW lanes are. Summing the 32 lanes one
       * after another, as these paths did before 2026-11-24 (the toy: 52 outputs x 32 scalar
       * adds a slice), took the toy 0.5-0.9 % longer (bench/RESULTS.md, session 23). */
      for (size_t o = 0; o < P->oc; o++) {
        sc_vf v = V_ROW(bl + o * SC__TW, 0);
        for (int j = 1; j < NV; j++) v += V_ROW(bl + o * SC__TW, j);
        V_ROWW(bl + o * VW, 0) = v;
      }
      vec_dwl_fold_f32(gb, bl, P->oc);
#else
      SC__K_FOLD_TW(gb, bl, P->oc);
#endif
    }
  SC__PROF(L, SC__P_BNS, 0);
#undef SC__PROF
}
#undef SC__BFK
#undef SC__BFKB
#undef SC__BF_DW_FIRST
#ifdef SC__DZ_FUSE
#undef SC__DZ_FUSE
#endif
#undef SC__BFROUND

static void SC__TN(sc__run_slice)(SC__TT(sc__job) * J, size_t s, size_t area) {
  if (J->ws->prof)
    SC__TN(sc__run_slice_body)(J, s, area, 1);
  else
    SC__TN(sc__run_slice_body)(J, s, area, 0);
}

#undef SC__AOFF
#undef SC__HOLDS
#undef SC__DWL_BIAS

/* index of the first NaN/Inf in v[0..n), or n */
SC__KSTATIC size_t SC__TN(sc__find_nonfinite)(const SC__T *v, size_t n) {
  /* v - v is +0 (all bits clear) exactly when v is finite, NaN when v is NaN or Inf: an OR
   * of those bits is a reduction the compiler vectorises with no dependency chain (an
   * integer OR reassociates), one subtract, one OR per element; 128 bytes of accumulators
   * (four AVX2 vectors, two AVX-512) keep the loads going (64 bytes, one AVX-512 vector: 170 ns
   * for 4,799 floats on Zen 4, 128 bytes: 132 ns; 32 bytes: 30 ns for 252 doubles, 64: 22) */
#if SC__F32
  typedef uint32_t sc__ubits;
#else
  typedef uint64_t sc__ubits;
#endif
  enum { NACC = 128 / sizeof(SC__T) };
  sc__ubits accs[NACC] = {0}, acc = 0;
  size_t k = 0;
  for (; k + NACC <= n; k += NACC)
    for (size_t j = 0; j < NACC; j++) {
      SC__T d = v[k + j] - v[k + j];
      sc__ubits u;
      memcpy(&u, &d, sizeof u);
      accs[j] |= u;
    }
  for (; k < n; k++) {
    SC__T d = v[k] - v[k];
    sc__ubits u;
    memcpy(&u, &d, sizeof u);
    acc |= u;
  }
  for (size_t j = 0; j < NACC; j++) acc |= accs[j];
  if (acc == 0) return n;
  for (size_t k = 0; k < n; k++)
    if (!isfinite(v[k])) return k;
  return n;
}

#if SC__F32
/* one fused pass of ADAM/AdamW over p, m, v */
SC__KSTATIC void SC__TN(sc__adam)(float *restrict p, const float *restrict g, float *restrict m,
                                  float *restrict v, size_t n, const sc__adam_coef *k) {
  const float b1 = k->b1, b2 = k->b2, omb1 = k->omb1, omb2 = k->omb2, step = k->step;
  const float isb2 = k->isb2, eps = k->eps, decay = k->decay, l2 = k->l2;
  for (size_t i = 0; i < n; i++) {
    float gk = g[i] + l2 * p[i];
    float mk = b1 * m[i] + omb1 * gk, vk = b2 * v[i] + omb2 * gk * gk;
    m[i] = mk;
    v[i] = vk;
    p[i] = p[i] * decay - step * mk / (sqrtf(vk) * isb2 + eps);
  }
}
#endif

/* The one-state path's dense layers in float (sc_apply, sc_vjp, sc_jvp), as explicit 8-wide
 * code: vone_*_f64's method with 8 lanes. The portable loops (sc__one_dense_* below), as
 * GCC vectorised them with AVX-512 flags, made sc_apply of 2 -> 50 tanh -> 50 tanh -> 2
 * slower on the AVX-512 set than on the portable one (954 against 711 ns on Zen 4; the
 * dense forward 82 % of it: bench/RESULTS.md, session 26). W is read in its row-major layout
 * only; every output is written up to a multiple of 8, the padding with zeros. The sums are
 * in another order than the portable ones: results agree to the last bits only. */
#if SC__F32 && defined(SC__VEC_F32)
#ifndef SC_KERNELS_VONE_F32_H
#define SC_KERNELS_VONE_F32_H
typedef float sc_v8f __attribute__((vector_size(32), aligned(4), may_alias));
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#define SC__SHUF8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
typedef int sc__v8i __attribute__((vector_size(32)));
#define SC__SHUF8(a, b, ...) __builtin_shuffle(a, b, (sc__v8i){__VA_ARGS__})
#endif
#define SC__LD8(ptr) (*(const sc_v8f *)(const void *)(ptr))
#define SC__ST8(ptr) (*(sc_v8f *)(void *)(ptr))

static inline sc_v8f vonef_splat(float v) { return (sc_v8f){v, v, v, v, v, v, v, v}; }

/* the eight sums of r[0..7]'s lanes, as one vector (lane j: the sum of r[j]) */
static inline sc_v8f vonef_hsum8(const sc_v8f *r) {
  sc_v8f t[4], u[2];
  for (int q = 0; q < 4; q++)
    t[q] = SC__SHUF8(r[2 * q], r[2 * q + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
           SC__SHUF8(r[2 * q], r[2 * q + 1], 1, 9, 3, 11, 5, 13, 7, 15);
  for (int q = 0; q < 2; q++)
    u[q] = SC__SHUF8(t[2 * q], t[2 * q + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
           SC__SHUF8(t[2 * q], t[2 * q + 1], 2, 3, 10, 11, 6, 7, 14, 15);
  return SC__SHUF8(u[0], u[1], 0, 1, 2, 3, 8, 9, 10, 11) +
         SC__SHUF8(u[0], u[1], 4, 5, 6, 7, 12, 13, 14, 15);
}

/* the sum over i < I of w[i] x[i]: 8 lanes in two chains, then the tail */
static inline float vonef_rowdot(const float *restrict w, const float *restrict x, size_t I) {
  sc_v8f s0 = vonef_splat(0), s1 = s0;
  size_t i = 0;
  for (; i + 16 <= I; i += 16) {
    s0 += SC__LD8(w + i) * SC__LD8(x + i);
    s1 += SC__LD8(w + i + 8) * SC__LD8(x + i + 8);
  }
  if (i + 8 <= I) s0 += SC__LD8(w + i) * SC__LD8(x + i), i += 8;
  s0 += s1;
  float s = ((s0[0] + s0[1]) + (s0[2] + s0[3])) + ((s0[4] + s0[5]) + (s0[6] + s0[7]));
  for (; i < I; i++) s += w[i] * x[i];
  return s;
}

/* pre[o] = b[o] + sum_i W[o I + i] x[i] for o < O (b may be NULL); pre[O..O8) = 0 */
static void vonef_fwd(float *restrict pre, const float *restrict W, const float *restrict b,
                      const float *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v8f xv = vonef_splat(x[0]);
    for (; o + 8 <= O; o += 8)
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + SC__LD8(W + o) * xv;
  } else if (I == 2) { /* eight rows are two vectors (w00 w01 ... w31), (w40 ... w71) */
    sc_v8f xx = {x[0], x[1], x[0], x[1], x[0], x[1], x[0], x[1]};
    for (; o + 8 <= O; o += 8) {
      sc_v8f p0 = SC__LD8(W + 2 * o) * xx, p1 = SC__LD8(W + 2 * o + 8) * xx;
      sc_v8f s = SC__SHUF8(p0, p1, 0, 2, 4, 6, 8, 10, 12, 14) +
                 SC__SHUF8(p0, p1, 1, 3, 5, 7, 9, 11, 13, 15);
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + s;
    }
  } else if (I >= 8) {
    for (; o + 8 <= O; o += 8) {
      const float *w0 = W + o * I;
      sc_v8f r[8];
      for (int q = 0; q < 8; q++) r[q] = vonef_splat(0);
      size_t i = 0;
      for (; i + 8 <= I; i += 8) {
        sc_v8f xv = SC__LD8(x + i);
        for (int q = 0; q < 8; q++) r[q] += SC__LD8(w0 + q * I + i) * xv;
      }
      sc_v8f s = vonef_hsum8(r);
      for (; i < I; i++) {
        sc_v8f wc;
        for (int q = 0; q < 8; q++) wc[q] = w0[q * I + i];
        s += wc * vonef_splat(x[i]);
      }
      SC__ST8(pre + o) = (b ? SC__LD8(b + o) : vonef_splat(0)) + s;
    }
  }
  /* the rows left (all of them for I = 3 to 7), 8 at a time, the last vector with the padding */
  for (; o < O; o += 8) {
    sc_v8f t = vonef_splat(0);
    for (size_t j = 0; j < 8 && o + j < O; j++)
      t[j] = (b ? b[o + j] : 0) + vonef_rowdot(W + (o + j) * I, x, I);
    SC__ST8(pre + o) = t;
  }
}

/* dx[i] = sum_o W[o I + i] d[o] for i < I; dx[I..I8) = 0 */
static void vonef_dx(float *restrict dx, const float *restrict W, const float *restrict d, size_t O,
                     size_t I) {
  if (I == 1) {
    SC__ST8(dx) = (sc_v8f){vonef_rowdot(W, d, O), 0, 0, 0, 0, 0, 0, 0};
  } else if (I == 2) { /* (w00 w01 w10 w11 ...) (d0 d0 d1 d1 ...): even lanes dx0, odd dx1 */
    sc_v8f a0 = vonef_splat(0), a1 = a0;
    size_t o = 0;
    for (; o + 8 <= O; o += 8) {
      sc_v8f dv = SC__LD8(d + o);
      a0 += SC__LD8(W + 2 * o) * SC__SHUF8(dv, dv, 0, 0, 1, 1, 2, 2, 3, 3);
      a1 += SC__LD8(W + 2 * o + 8) * SC__SHUF8(dv, dv, 4, 4, 5, 5, 6, 6, 7, 7);
    }
    a0 += a1;
    float s0 = (a0[0] + a0[2]) + (a0[4] + a0[6]), s1 = (a0[1] + a0[3]) + (a0[5] + a0[7]);
    for (; o < O; o++) s0 += W[2 * o] * d[o], s1 += W[2 * o + 1] * d[o];
    SC__ST8(dx) = (sc_v8f){s0, s1, 0, 0, 0, 0, 0, 0};
  } else
    SC__VONE_DX_COLS(float, sc_v8f, 8, SC__LD8, SC__ST8, vonef_splat);
}

/* gW[o I + i] += d[o] x[i], gb[o] += d[o] (gb may be NULL) */
static void vonef_dw(float *restrict gW, float *restrict gb, const float *restrict d,
                     const float *restrict x, size_t O, size_t I) {
  size_t o = 0;
  if (I == 1) {
    sc_v8f xv = vonef_splat(x[0]);
    for (; o + 8 <= O; o += 8) SC__ST8(gW + o) = SC__LD8(gW + o) + SC__LD8(d + o) * xv;
  } else if (I == 2) {
    sc_v8f xx = {x[0], x[1], x[0], x[1], x[0], x[1], x[0], x[1]};
    for (; o + 8 <= O; o += 8) {
      sc_v8f dv = SC__LD8(d + o);
      SC__ST8(gW + 2 * o) = SC__LD8(gW + 2 * o) + SC__SHUF8(dv, dv, 0, 0, 1, 1, 2, 2, 3, 3) * xx;
      SC__ST8(gW + 2 * o + 8) =
          SC__LD8(gW + 2 * o + 8) + SC__SHUF8(dv, dv, 4, 4, 5, 5, 6, 6, 7, 7) * xx;
    }
  }
  SC__VONE_DW_ROWS(float, sc_v8f, 8, SC__LD8, SC__ST8, vonef_splat);
}
#endif
#endif

/* ---------------------------------------------------------------- one state */
/* The single-state path (sc_apply, sc_vjp, sc_jvp): one sample, no tiles, so an ODE
 * right-hand side costs a few matrix-vector products. Activations of layer l live at
 * scratch + a_off (the first `out` elements of its tile area), gelu's pre-activations at
 * z_off, the cotangent in the d0/d1 areas and the tangent in the xT area... all inside
 * slice 0's tile memory, which is far larger than one sample needs.
 *   forward always; with v: du += J_u^T v (du may be NULL), dp += J_p^T v (may be NULL);
 *   with w: jw = J_u w. y (may be NULL) receives f(u). Dropout is the identity here. */
/* y[k] = act'(.) * y[k] for k < n (the pullback's act_bwd, which is also the tangent's) */
#if !SC__F32 && defined(SC__VEC_F64)
#define SC__ONE_VEC 1 /* the dense layers by vone_*_f64 */
#elif SC__F32 && defined(SC__VEC_F32)
#define SC__ONE_VEC 2 /* by vonef_* */
#else
#define SC__ONE_VEC 0
#endif
#define SC__ONE_ACTD(buf, a, z, n, act) SC__TN(sc__act_bwd)((buf), (a), (z), (n), (act))

/* The outputs u (of n_out) that tap i reaches inside an input of n_in with stride s and
 * padding p: 0 <= u s + i - p < n_in for u in [*lo, *hi) */
static inline void SC__TN(sc__one_taprange)(size_t n_out, size_t n_in, size_t s, size_t p, size_t i,
                                            size_t *lo, size_t *hi) {
  size_t l = i >= p ? 0 : (p - i + s - 1) / s;
  size_t h = n_in + p <= i ? 0 : (n_in - 1 + p - i) / s + 1;
  if (h > n_out) h = n_out;
  *lo = l;
  *hi = h > l ? h : l;
}

/* conv over one sample: out[k][u][v] = b[k] + the sum over the taps (ci, i, j) in order of
 * W * in, with zero padding. Tap by tap over whole output rows (contiguous, vectorised), where
 * each output took its taps one by one with two bounds checks each: every output gets the
 * same additions in the same order, so the same bits, and LeNet5's forward on one state ran
 * 3.5-4.5x faster (204-234 -> 51-58 us on Zen 5; bench/RESULTS.md, session 27) */
static void SC__TN(sc__one_conv)(SC__T *restrict out, const SC__T *restrict W,
                                 const SC__T *restrict b, const SC__T *restrict in,
                                 const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, npos = OH * OW;
  for (size_t k = 0; k < P->oc; k++) {
    SC__T *restrict o = out + k * npos, b0 = b ? b[k] : 0;
    for (size_t q = 0; q < npos; q++) o[q] = b0;
    for (size_t ci = 0; ci < P->ic; ci++)
      for (size_t i = 0; i < KH; i++) {
        size_t u0, u1;
        SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
        for (size_t j = 0; j < KW; j++) {
          size_t v0, v1;
          SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
          SC__T w = W[k * P->R + (ci * KH + i) * KW + j];
          for (size_t u = u0; u < u1; u++) {
            const SC__T *restrict r = in + (ci * P->ih + u * sh + i - ph) * P->iw;
            SC__T *restrict d = o + u * OW;
            if (sw == 1)
              for (size_t v = v0; v < v1; v++) d[v] += w * r[v + j - pw];
            else
              for (size_t v = v0; v < v1; v++) d[v] += w * r[v * sw + j - pw];
          }
        }
      }
  }
}

/* The pullback of a conv layer over one sample, for d = dL/d(pre-activation) (oc x npos):
 * dx (nxt, overwritten) and dp's weights and bias (added to). The same additions in the same
 * order as the direct loop over (k, u, v, ci, i, j) it replaces: into dx[ci][y][x], k by k,
 * and for each k the outputs (u, v) in raster order, which is the taps (i, j) in descending
 * order; into each weight and bias, the outputs in raster order. dW goes 16 channels at a
 * time along d transposed into dt (npos x KP, KP = oc rounded up to 16; free scratch). */
static void SC__TN(sc__one_conv_bwd)(SC__T *restrict nxt, SC__T *restrict dpw, SC__T *restrict dpb,
                                     SC__T *restrict dt, const SC__T *restrict d,
                                     const SC__T *restrict W, const SC__T *restrict xin,
                                     const sc__lplan *P) {
  size_t KH = P->spec.kh, KW = P->spec.kw, sh = P->spec.sh, sw = P->spec.sw;
  size_t ph = P->spec.ph, pw = P->spec.pw, OH = P->oh, OW = P->ow, npos = OH * OW, K = P->oc;
  if (dpb)
    for (size_t k = 0; k < K; k++) {
      SC__T s = dpb[k];
      for (size_t q = 0; q < npos; q++) s += d[k * npos + q];
      dpb[k] = s;
    }
  if (dpw) {
    size_t KP = (K + 15) & ~(size_t)15;
    for (size_t q = 0; q < npos; q++)
      for (size_t k = 0; k < KP; k++) dt[q * KP + k] = k < K ? d[k * npos + q] : 0;
    for (size_t k0 = 0; k0 < K; k0 += 16)
      for (size_t ci = 0; ci < P->ic; ci++)
        for (size_t i = 0; i < KH; i++) {
          size_t u0, u1;
          SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
          for (size_t j = 0; j < KW; j++) {
            size_t v0, v1, r = (ci * KH + i) * KW + j;
            SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
            SC__T acc[16];
            for (size_t t = 0; t < 16; t++) acc[t] = k0 + t < K ? dpw[(k0 + t) * P->R + r] : 0;
            for (size_t u = u0; u < u1; u++) {
              const SC__T *restrict xr = xin + (ci * P->ih + u * sh + i - ph) * P->iw;
              for (size_t v = v0; v < v1; v++) {
                SC__T x = xr[v * sw + j - pw];
                const SC__T *restrict dq = dt + (u * OW + v) * KP + k0;
                for (size_t t = 0; t < 16; t++) acc[t] += dq[t] * x;
              }
            }
            for (size_t t = 0; t < 16 && k0 + t < K; t++) dpw[(k0 + t) * P->R + r] = acc[t];
          }
        }
  }
  if (!nxt) return;
  for (size_t e = 0; e < P->in; e++) nxt[e] = 0;
  for (size_t k = 0; k < K; k++)
    for (size_t ci = 0; ci < P->ic; ci++)
      for (size_t i = KH; i-- > 0;) {
        size_t u0, u1;
        SC__TN(sc__one_taprange)(OH, P->ih, sh, ph, i, &u0, &u1);
        for (size_t j = KW; j-- > 0;) {
          size_t v0, v1;
          SC__TN(sc__one_taprange)(OW, P->iw, sw, pw, j, &v0, &v1);
          SC__T w = W[k * P->R + (ci * KH + i) * KW + j];
          for (size_t u = u0; u < u1; u++) {
            SC__T *restrict nr = nxt + (ci * P->ih + u * sh + i - ph) * P->iw;
            const SC__T *restrict dr = d + k * npos + u * OW;
            if (sw == 1)
              for (size_t v = v0; v < v1; v++) nr[v + j - pw] += w * dr[v];
            else
              for (size_t v = v0; v < v1; v++) nr[v * sw + j - pw] += w * dr[v];
          }
        }
      }
}

/* index of the first maximum of each pool window, for one sample */
static size_t SC__TN(sc__one_argmax)(const SC__T *in, const sc__lplan *P, size_t c, size_t u,
                                     size_t v) {
  size_t best = (c * P->ih + u * P->spec.kh) * P->iw + v * P->spec.kw;
  for (size_t i = 0; i < P->spec.kh; i++)
    for (size_t j = 0; j < P->spec.kw; j++) {
      size_t q = (c * P->ih + u * P->spec.kh + i) * P->iw + v * P->spec.kw + j;
      if (in[q] > in[best]) best = q;
    }
  return best;
}

/* dot product with four partial sums (no long dependency chain; order fixed) */
static inline SC__T SC__TN(sc__dot)(const SC__T *restrict a, const SC__T *restrict b, size_t n) {
  SC__T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  if (n < 8) {
    for (; i < n; i++) s0 += a[i] * b[i];
    return s0;
  }
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

#if !SC__ONE_VEC /* else vone_*_f64 */
/* dx = W^T d for a dense layer (W: O x I): narrow inputs column by column (four
 * partial sums over o), wide ones row by row (vectorizable over i) */
static void SC__TN(sc__one_dense_dx)(SC__T *restrict dx, const SC__T *restrict W,
                                     const SC__T *restrict d, size_t O, size_t I) {
  if (I < 16) {
    for (size_t i = 0; i < I; i++) {
      SC__T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t o = 0;
      for (; o + 4 <= O; o += 4) {
        s0 += W[o * I + i] * d[o];
        s1 += W[(o + 1) * I + i] * d[o + 1];
        s2 += W[(o + 2) * I + i] * d[o + 2];
        s3 += W[(o + 3) * I + i] * d[o + 3];
      }
      for (; o < O; o++) s0 += W[o * I + i] * d[o];
      dx[i] = (s0 + s1) + (s2 + s3);
    }
    return;
  }
  for (size_t i = 0; i < I; i++) dx[i] = 0;
  for (size_t o = 0; o < O; o++) {
    const SC__T *restrict wr = W + o * I;
    SC__T dv = d[o];
    for (size_t i = 0; i < I; i++) dx[i] += wr[i] * dv;
  }
}

/* a = b + W x for a dense layer (W: O x I, b may be NULL). Narrow inputs (I < 8, the first
 * layer of an ODE right-hand side) go column by column, vectorizable over the outputs, with
 * I a constant in each case; wide ones are one dot product per output. */
static inline void SC__TN(sc__one_fwd_cols)(SC__T *restrict a, const SC__T *restrict W,
                                            const SC__T *restrict b, const SC__T *restrict x,
                                            size_t O, const size_t I) {
  for (size_t o = 0; o < O; o++) {
    SC__T s = 0; /* the order of sc__dot for n < 8, then the bias */
    for (size_t i = 0; i < I; i++) s += W[o * I + i] * x[i];
    a[o] = (b ? b[o] : 0) + s;
  }
}

static void SC__TN(sc__one_dense_fwd)(SC__T *restrict a, const SC__T *restrict W,
                                      const SC__T *restrict b, const SC__T *restrict x, size_t O,
                                      size_t I) {
  switch (I) {
  case 1: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 1); return;
  case 2: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 2); return;
  case 3: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 3); return;
  case 4: SC__TN(sc__one_fwd_cols)(a, W, b, x, O, 4); return;
  default: break;
  }
  for (size_t o = 0; o < O; o++) a[o] = (b ? b[o] : 0) + SC__TN(sc__dot)(W + o * I, x, I);
}

/* gW += d x^T (gW: O x I); narrow inputs with I a constant, vectorizable over the outputs */
static inline void SC__TN(sc__one_dw_cols)(SC__T *restrict gW, const SC__T *restrict d,
                                           const SC__T *restrict x, size_t O, const size_t I) {
  for (size_t o = 0; o < O; o++)
    for (size_t i = 0; i < I; i++) gW[o * I + i] += d[o] * x[i];
}

/* gW += d x^T and gb += d (gb may be NULL) */
static void SC__TN(sc__one_dense_dwb)(SC__T *restrict gW, SC__T *restrict gb,
                                      const SC__T *restrict d, const SC__T *restrict x, size_t O,
                                      size_t I) {
  if (gb)
    for (size_t o = 0; o < O; o++) gb[o] += d[o];
  switch (I) {
  case 1: SC__TN(sc__one_dw_cols)(gW, d, x, O, 1); return;
  case 2: SC__TN(sc__one_dw_cols)(gW, d, x, O, 2); return;
  case 3: SC__TN(sc__one_dw_cols)(gW, d, x, O, 3); return;
  case 4: SC__TN(sc__one_dw_cols)(gW, d, x, O, 4); return;
  default: break;
  }
  for (size_t o = 0; o < O; o++) {
    SC__T dv = d[o];
    SC__T *restrict gr = gW + o * I;
    for (size_t i = 0; i < I; i++) gr[i] += dv * x[i];
  }
}
#endif           /* the portable dense kernels */

/* the dense layers' kernels of this path, and the length their outputs are written to */
#if SC__ONE_VEC == 1
#define SC__ONE_PAD(n) (((n) + 3) & ~(size_t)3)
#define SC__ONE_FWD vone_fwd_f64
#define SC__ONE_DX vone_dx_f64
#define SC__ONE_DW vone_dw_f64
#elif SC__ONE_VEC == 2
#define SC__ONE_PAD(n) (((n) + 7) & ~(size_t)7)
#define SC__ONE_FWD vonef_fwd
#define SC__ONE_DX vonef_dx
#define SC__ONE_DW vonef_dw
#else
#define SC__ONE_PAD(n) (n)
#define SC__ONE_FWD SC__TN(sc__one_dense_fwd)
#define SC__ONE_DX SC__TN(sc__one_dense_dx)
#define SC__ONE_DW SC__TN(sc__one_dense_dwb)
#endif

static void SC__TN(sc__one)(const sc_chain *c, const SC__T *p, const SC__T *u, const SC__T *v,
                            const SC__T *w, SC__T *y, SC__T *du, SC__T *dp, SC__T *jw,
                            SC__T *scratch, int fwd) {
  size_t L = c->nlayers;
  SC__T *tm = scratch;
  /* the tangent ping-pongs between two areas as large as the widest layer */
  SC__T *ta = tm + c->d0_off, *tb = tm + c->d1_off;
  const SC__T *in = u, *tin = w;
  /* fwd = 0: the activations of this u and p are in scratch from the call before (a forward
   * with v = NULL, w = NULL); only the pullback runs (y and jw must be NULL) */
  for (size_t l = 0; fwd && l < L; l++) {
    const sc__lplan *P = &c->L[l];
    const SC__T *W = p + P->poff;
    SC__T *a = tm + P->a_off, *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
    SC__T *tout = tin ? (tin == ta ? tb : ta) : NULL;
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
    case SC_LAYER_CONV2D: {
      int dense = P->spec.kind == SC_LAYER_DENSE;
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);
      const SC__T *b = P->spec.bias ? W + nw : NULL;
      /* pre-activations go to z (gelu keeps them) or to the unused rest of this layer's tile
       * area (out x SC__TW elements), then are activated into a; with no activation, straight
       * into a. A dense layer's outputs are written up to no = SC__ONE_PAD(out) (zeros) */
      size_t no = dense ? SC__ONE_PAD(P->out) : P->out;
      SC__T *pre = P->spec.act == SC_IDENTITY ? a : z ? z : a + no;
      if (dense)
        SC__ONE_FWD(pre, W, b, in, P->out, P->in);
      else
        SC__TN(sc__one_conv)(pre, W, b, in, P);
      if (pre != a) SC__TN(sc__act_n)(a, NULL, pre, no, P->spec.act);
      if (tout) {
        if (dense)
          SC__ONE_FWD(tout, W, NULL, tin, P->out, P->in);
        else
          SC__TN(sc__one_conv)(tout, W, NULL, tin, P);
        SC__ONE_ACTD(tout, a, z, no, P->spec.act);
      }
      break;
    }
    case SC_LAYER_MAXPOOL2D:
      for (size_t ch = 0; ch < P->oc; ch++)
        for (size_t uu = 0; uu < P->oh; uu++)
          for (size_t vv = 0; vv < P->ow; vv++) {
            size_t q = SC__TN(sc__one_argmax)(in, P, ch, uu, vv),
                   o = (ch * P->oh + uu) * P->ow + vv;
            a[o] = in[q];
            if (tout) tout[o] = tin[q];
          }
      break;
    case SC_LAYER_FLATTEN: /* a view: the same elements */
      a = (SC__T *)in;
      if (tout) memcpy(tout, tin, P->out * sizeof(SC__T));
      break;
    case SC_LAYER_DROPOUT:
      if (a != in) memcpy(a, in, P->out * sizeof(SC__T));
      if (tout) memcpy(tout, tin, P->out * sizeof(SC__T));
      break;
    }
    in = P->spec.kind == SC_LAYER_FLATTEN ? in : a;
    if (tout) tin = tout;
  }
  /* (loops, not memcpy: a few elements, where the library call costs more) */
  if (y)
    for (size_t k = 0; k < c->out; k++) y[k] = in[k];
  if (jw)
    for (size_t k = 0; k < c->out; k++) jw[k] = tin[k];
  if (!v || (!du && !dp)) return;
  /* pullback of v */
  SC__T *cur = tm + c->d0_off, *nxt = tm + c->d1_off;
  for (size_t k = 0; k < c->out; k++) cur[k] = v[k];
  for (size_t l = L; l-- > 0;) {
    const sc__lplan *P = &c->L[l];
    const SC__T *W = p + P->poff;
    const SC__T *xin = u;
    for (size_t q = l; q-- > 0;) /* the input of layer l: the last non-flatten output */
      if (c->L[q].spec.kind != SC_LAYER_FLATTEN) {
        xin = tm + c->L[q].a_off;
        break;
      }
    const SC__T *a = tm + P->a_off, *z = P->z_off != SIZE_MAX ? tm + P->z_off : NULL;
    int need_dx = l > 0 || du;
    switch (P->spec.kind) {
    case SC_LAYER_DENSE:
    case SC_LAYER_CONV2D: {
      size_t nw = P->np - (P->spec.bias ? P->oc : 0);
      if (P->spec.kind == SC_LAYER_DENSE) {
        size_t no = SC__ONE_PAD(P->out);
        for (size_t o = P->out; o < no; o++) cur[o] = 0; /* (from v or a non-dense layer) */
        SC__ONE_ACTD(cur, a, z, no, P->spec.act);
        if (dp)
          SC__ONE_DW(dp + P->poff, P->spec.bias ? dp + P->poff + nw : NULL, cur, xin, P->out,
                     P->in);
        if (need_dx) SC__ONE_DX(nxt, W, cur, P->out, P->in);
      } else {
        SC__ONE_ACTD(cur, a, z, P->out, P->spec.act);
        /* (dt: the free rest of this layer's tile area, out x (SC__TW - 1) elements) */
        SC__TN(sc__one_conv_bwd)
        (need_dx ? nxt : NULL, dp ? dp + P->poff : NULL,
         dp && P->spec.bias ? dp + P->poff + nw : NULL, tm + P->a_off + P->out, cur, W, xin, P);
      }
      break;
    }
    case SC_LAYER_MAXPOOL2D:
      if (need_dx) {
        for (size_t i = 0; i < P->in; i++) nxt[i] = 0;
        for (size_t ch = 0; ch < P->oc; ch++)
          for (size_t uu = 0; uu < P->oh; uu++)
            for (size_t vv = 0; vv < P->ow; vv++)
              nxt[SC__TN(sc__one_argmax)(xin, P, ch, uu, vv)] = cur[(ch * P->oh + uu) * P->ow + vv];
      }
      break;
    case SC_LAYER_FLATTEN:
    case SC_LAYER_DROPOUT:
      need_dx = 0; /* identity: cur stays */
      break;
    }
    if (need_dx) {
      SC__T *t = cur;
      cur = nxt;
      nxt = t;
    }
  }
  if (du)
    for (size_t i = 0; i < c->in; i++) du[i] += cur[i];
}
#undef SC__ONE_ACTD
#undef SC__ONE_VEC
#undef SC__ONE_PAD
#undef SC__ONE_FWD
#undef SC__ONE_DX
#undef SC__ONE_DW

/* ---------------------------------------------------------------- the kernel table */
#ifdef SC__KERNELS_ONLY
#ifndef SC__KT_LINKAGE
#define SC__KT_LINKAGE /* exported from a kernels/ file; static for the built-in set */
#endif
#if SC__F32
SC__KT_LINKAGE const sc__kt_f32 SC__KT_EXPORT_F32 = {SC__ISA_NAME,
                                                     SC__TN(sc__run_slice),
                                                     SC__TN(sc__find_nonfinite),
                                                     SC__TN(sc__adam),
                                                     SC__TN(sc__one),
#ifdef SC__VEC_CONV
                                                     vec_conv_fwd_names,
                                                     vec_conv_dw_names,
                                                     V_CONV_DW_K6
#else
                                                     NULL,
                                                     NULL,
                                                     0
#endif
};
#else
SC__KT_LINKAGE const sc__kt_f64 SC__KT_EXPORT_F64 = {SC__ISA_NAME, SC__TN(sc__run_slice),
                                                     SC__TN(sc__find_nonfinite), SC__TN(sc__one)};
#endif
#else /* the portable set, and the engine's typed entry points */
#if SC__F32
static const sc__kt_f32 sc__kt_ref_f32 = {
    "scalar", sc__run_slice_f32, sc__find_nonfinite_f32, sc__adam_f32, sc__one_f32, NULL, NULL, 0};
#else
static const sc__kt_f64 sc__kt_ref_f64 = {"scalar", sc__run_slice_f64, sc__find_nonfinite_f64,
                                          sc__one_f64};
#endif

#if SC__F32
#define SC__PUB(name) name
#else
#define SC__PUB(name) name##_f64
#endif

static sc_status SC__TN(sc__finite_check)(const char *fn, const sc_chain *c, const char *what,
                                          const SC__T *v, size_t rows, size_t cols) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)c->kf : (const void *)c->kd;
  size_t n = rows * cols, k = 0;
  if (n <= 16) /* a state or a cotangent of a few elements: no call through the table */
    while (k < n && isfinite(v[k])) k++;
  else
    k = kt->find_nonfinite(v, n);
  if (k == n) return SC_OK;
  if (rows == 1)
    return sc__fail(SC_ERR_NONFINITE, fn, "%s: element %zu is %s", what, k,
                    isnan(v[k]) ? "NaN" : "Inf");
  return sc__fail(SC_ERR_NONFINITE, fn, "%s of sample %zu, element %zu is %s", what, k / cols,
                  k % cols, isnan(v[k]) ? "NaN" : "Inf");
}

/* The parameters of a compute call: a NaN or Inf in p is SC_ERR_NONFINITE naming the
 * element (one vectorised pass over p; bench/RESULTS.md gives its cost). */
static sc_status SC__TN(sc__param_check)(const char *fn, const sc_chain *c, const SC__T *p) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)c->kf : (const void *)c->kd;
  size_t k = kt->find_nonfinite(p, c->nparams);
  if (k == c->nparams) return SC_OK;
  return sc__fail(SC_ERR_NONFINITE, fn, "parameter p[%zu] is %s", k, isnan(p[k]) ? "NaN" : "Inf");
}

/* the error for an input the gathers found a NaN or Inf in: the up-front check's message */
static sc_status SC__TN(sc__input_bad)(const char *fn, const sc_chain *c, const SC__T *x,
                                       size_t batch) {
  sc_status st = SC__TN(sc__finite_check)(fn, c, "input", x, batch, c->in);
  return st ? st : sc__fail(SC_ERR_NONFINITE, fn, "input: a NaN or Inf was found");
}

/* Workers take slices as they go (an atomic counter), so a core slowed by the host does
 * not hold the others up. Results do not depend on it: a slice's gradient and loss are its
 * own, and the slices are reduced in index order. A worker runs its slices in its own scratch
 * area (number worker; the slice's number when there are more workers than areas): one
 * thread's consecutive slices then find their tile memory in its L1 / L2 instead of each
 * bringing in its own (the micro-benchmark, 1 thread, 2 slices: 2.4 % faster) */
static void SC__TN(sc__task)(void *arg, int worker, int nworkers) {
  SC__TT(sc__job) *J = arg;
  if (nworkers <= 1) {
    for (size_t s = J->slice_lo; s < J->slice_hi; s++) J->kt->run_slice(J, s, 0);
    return;
  }
  int own = (size_t)nworkers <= J->ws->max_slices;
  for (size_t s; (s = J->slice_lo + sc__pool_claim(J->ws->pool)) < J->slice_hi;)
    J->kt->run_slice(J, s, own ? (size_t)worker : s);
}

/* Runs a validated job; reduces the slices into g (overwrite or accumulate) and loss. */
#if SC__F32
/* bf16 precisions: the parameters with their weights rounded to bfloat16 (biases kept), and the
 * bf16 kernels' weight operands made from them, in units of a layer's rows [o0, o1) (o0 even): a
 * unit rounds its rows and packs the pairs made of them only, so units run on any thread in any
 * order and give the same bits. (One serial pass took 43 us of LeNet5's 550-us bf16 step on
 * 2 threads, the other thread waiting: the rounding, in the portable code, half of it.) */
static void sc__bf16_params_rows(sc_workspace *ws, const float *p, size_t l, size_t o0, size_t o1) {
  const sc__lplan *P = &ws->chain->L[l];
  int conv = P->spec.kind == SC_LAYER_CONV2D;
  if (P->spec.kind != SC_LAYER_DENSE && !conv) {
    memcpy(ws->bf_p + P->poff, p + P->poff, P->np * sizeof *p);
    return;
  }
  /* conv: K x R, as a dense layer's O x I; weights first, then the biases */
  size_t I = conv ? P->R : P->in, O = conv ? P->oc : P->out, I2 = (I + 1) / 2, O2 = (O + 1) / 2;
  float *W = ws->bf_p + P->poff;
#ifdef SC__HAVE_BF16_NATIVE
  if (!conv && ws->bf_round && ws->bf16k && ws->prec == SC_PRECISION_BF16 &&
      (ws->bf_on[l] & 3) == 3) {
    /* a dense layer whose forward and pullback both run on the bf16 kernels reads only their
     * pairs and its biases: the pairs made from p, each float rounded as it is loaded (the same
     * bits), without the rounded copy of the weights (LeNet5's dense layers, 41,600 of its
     * 44,426 parameters) */
    uint32_t *wf = ws->bf_w + ws->bf_woff[l], *wd = wf + O * I2;
    if (P->spec.bias) memcpy(W + O * I + o0, p + P->poff + O * I + o0, (o1 - o0) * sizeof *p);
    sc__bf16_wf_native(wf, p + P->poff, I, o0, o1);
    sc__bf16_wd_native(wd, p + P->poff, O, I, O2, o0 / 2, (o1 + 1) / 2, 1);
    return;
  }
#endif
  memcpy(W + o0 * I, p + P->poff + o0 * I, (o1 - o0) * I * sizeof *p);
  (ws->bf_round ? ws->bf_round : sc__bf16_round_n)(W + o0 * I, (o1 - o0) * I);
  if (P->spec.bias) memcpy(W + O * I + o0, p + P->poff + O * I + o0, (o1 - o0) * sizeof *p);
  if (!ws->bf16k || !ws->bf_on[l]) return;
  /* the bf16 kernels' weight operands: pairs along the inputs and the outputs */
  uint32_t *wf = ws->bf_w + ws->bf_woff[l], *wd = wf + O * I2;
  /* W holds bf16 values (rounded above): a pair is the upper halves of two floats' bits
   * (sc__bf16_pair would round them again, to the same bits: 35 ms of a 0.9-s LeNet5 run) */
  for (size_t o = o0; o < (ws->bf_on[l] & 20 ? o0 : o1); o++) { /* (bits 4, 16: below) */
    const float *r = W + o * I;
    for (size_t k = 0; k < I / 2; k++) wf[o * I2 + k] = sc__bf16_pair_r(r[2 * k], r[2 * k + 1]);
    if (I % 2) wf[o * I2 + I / 2] = sc__fbits(r[I - 1]) >> 16;
  }
  size_t m0 = o0 / 2, m1 = (o1 + 1) / 2;
#ifdef SC__HAVE_BF16_NATIVE
  if (ws->bf_round) /* the CPU has AVX512_BF16, so AVX-512 */
    sc__bf16_wd_native(wd, W, O, I, O2, m0, m1, 0);
  else
#endif
    for (size_t i = 0; i < I; i++) /* wd's rows in order; this unit's pairs m of each */
      for (size_t m = m0; m < m1; m++)
        wd[i * O2 + m] =
            sc__bf16_pair_r(W[2 * m * I + i], 2 * m + 1 < O ? W[(2 * m + 1) * I + i] : 0);
  if (conv && (ws->bf_on[l] & 8)) /* AMX's dx in place: wd's rows in tperm's order */
    for (size_t i = 0; i < I; i++)
      memcpy(wd + I * O2 + i * O2 + m0, wd + P->tperm[i] * O2 + m0, (m1 - m0) * sizeof *wd);
  /* the channel-pair forward's: (w[o][2 cp][i][j], w[o][2 cp + 1][i][j]) */
  if (conv && (ws->bf_on[l] & 16)) {
    uint32_t *wh = wd + 2 * I * O2;
    size_t ic = P->ic, t = P->spec.kh * P->spec.kw, KC = (ic + 1) / 2 * t;
    for (size_t o = o0; o < o1; o++) /* q = cp t + ij (no division: 3 ms an epoch) */
      for (size_t cp = 0; 2 * cp < ic; cp++) {
        const float *r = W + o * I + 2 * cp * t;
        uint32_t *d = wh + o * KC + cp * t;
        if (2 * cp + 1 < ic)
          for (size_t ij = 0; ij < t; ij++) d[ij] = sc__bf16_pair_r(r[ij], r[ij + t]);
        else
          for (size_t ij = 0; ij < t; ij++) d[ij] = sc__fbits(r[ij]) >> 16;
      }
  }
  if (conv && (ws->bf_on[l] & 4)) { /* the direct forward's: a channel's taps (2q, 2q + 1) */
    uint32_t *wc = wd + I * O2;
    size_t t = P->spec.kh * P->spec.kw, TP = (t + 1) / 2, KD = P->ic * TP;
    for (size_t o = o0; o < o1; o++)
      for (size_t ci = 0; ci < P->ic; ci++) {
        const float *r = W + o * I + ci * t;
        uint32_t *d = wc + o * KD + ci * TP;
        for (size_t q = 0; 2 * q + 1 < t; q++) d[q] = sc__bf16_pair_r(r[2 * q], r[2 * q + 1]);
        if (t % 2) /* the last tap: the second half of its pair (a 1 x 1 kernel's: the first) */
          d[TP - 1] = t > 1 ? sc__bf16_pair_r(0.0f, r[t - 1]) : sc__fbits(r[0]) >> 16;
      }
  }
}

/* a layer's rows per unit: an even number, about SC__BFP_UNIT weights (16 KB: in L1) */
#define SC__BFP_UNIT 4096
static size_t sc__bf16_params_chunk(const sc__lplan *P) {
  size_t I = P->spec.kind == SC_LAYER_CONV2D ? P->R : P->in;
  size_t ch = I ? SC__BFP_UNIT / I : 0;
  return ch < 2 ? 2 : ch & ~(size_t)1;
}
/* unit u: its layer and rows; 0 when u is past the last */
static int sc__bf16_params_unit(const sc_chain *c, size_t u, size_t *l, size_t *o0, size_t *o1) {
  for (size_t k = 0; k < c->nlayers; k++) {
    const sc__lplan *P = &c->L[k];
    if (P->np == 0) continue;
    int wl = P->spec.kind == SC_LAYER_DENSE || P->spec.kind == SC_LAYER_CONV2D;
    size_t O = !wl ? 1 : P->spec.kind == SC_LAYER_CONV2D ? P->oc : P->out;
    size_t ch = wl ? sc__bf16_params_chunk(P) : 1, n = (O + ch - 1) / ch;
    if (u < n) {
      *l = k;
      *o0 = u * ch;
      *o1 = O - *o0 < ch ? O : *o0 + ch;
      return 1;
    }
    u -= n;
  }
  return 0;
}
typedef struct {
  sc_workspace *ws;
  const float *p;
} sc__bfp_job;
/* With several workers, a unit goes to the worker whose part of the parameters (sc__part_range,
 * the parts of sc_train's ADAM step, sc__optjob_task) holds the unit's first weight: the worker
 * that has just updated those parameters reads them from its own cache. Taken as they came (any
 * worker, any unit), the units read the other core's freshly written parameters, and the next
 * ADAM step wrote over lines the other core held: on a host whose two vCPUs were 377 ns apart
 * (a ping-pong round trip), LeNet5's bf16 epoch on 2 threads spent 47 ms per 2 epochs in this
 * run and 27 in ADAM; with the units aligned, 32 and 17, the epoch 6 % faster (with the vCPUs 80
 * ns apart: no change; bench/RESULTS.md, session 32). */
static void sc__bf16_params_task(void *arg, int worker, int nworkers) {
  const sc__bfp_job *B = arg;
  const sc_chain *c = B->ws->chain;
  size_t l, o0, o1;
  if (nworkers > 1) {
    size_t parts = sc__parts(nworkers), k0, k1;
    for (size_t u = 0; sc__bf16_params_unit(c, u, &l, &o0, &o1); u++) {
      const sc__lplan *P = &c->L[l];
      size_t I = P->spec.kind == SC_LAYER_CONV2D  ? P->R
                 : P->spec.kind == SC_LAYER_DENSE ? P->in
                                                  : 1;
      size_t e = P->poff + o0 * I, w = 0;
      for (; w + 1 < parts; w++) {
        sc__part_range(w, parts, c->nparams, &k0, &k1);
        if (e < k1) break;
      }
      if (w % (size_t)nworkers == (size_t)worker) sc__bf16_params_rows(B->ws, B->p, l, o0, o1);
    }
    return;
  }
  for (size_t u = 0; sc__bf16_params_unit(c, u, &l, &o0, &o1); u++)
    sc__bf16_params_rows(B->ws, B->p, l, o0, o1);
}
static const float *sc__bf16_params(sc_workspace *ws, const float *p) {
  sc__bfp_job B = {ws, p};
  if (ws->chain->nparams >= SC__OPT_PAR_MIN)
    sc__pool_run(ws->pool, sc__bf16_params_task, &B);
  else /* small: waking the pool would cost more */
    sc__bf16_params_task(&B, 0, 1);
  return ws->bf_p;
}
#endif

/* The slices' gradients summed into g (overwritten, or added to with accumulate): each
 * worker takes a part of the elements (sc__part_range) and adds the slices in index order, in
 * blocks that stay in L1, so every element gets the same additions in the same order on any
 * number of threads. Large chains run it on the workspace's threads (LeNet5's 44,426
 * parameters from 2 slices at batch 64), others on the caller alone. */
typedef struct SC__TT(sc__redjob) {
  sc_workspace *ws;
  SC__T *g;
  size_t np, nslices;
  int accumulate;
} SC__TT(sc__redjob);

static void SC__TN(sc__reduce_task)(void *arg, int worker, int nworkers) {
  const SC__TT(sc__redjob) *R = arg;
  size_t parts = sc__parts(nworkers), k0, k1;
  for (size_t w = (size_t)worker; w < parts; w += (size_t)nworkers) {
    sc__part_range(w, parts, R->np, &k0, &k1);
    for (size_t b0 = k0; b0 < k1; b0 += 1024) {
      size_t b1 = k1 - b0 < 1024 ? k1 : b0 + 1024;
      SC__T *restrict g = R->g;
      for (size_t s = 0; s < R->nslices; s++) {
        const SC__T *restrict gsl =
            (const SC__T *)(const void *)(R->ws->slices + s * R->ws->slice_bytes +
                                          R->ws->tile_bytes);
        if (s == 0 && !R->accumulate)
          for (size_t k = b0; k < b1; k++) g[k] = gsl[k];
        else
          for (size_t k = b0; k < b1; k++) g[k] += gsl[k];
      }
    }
  }
}

static void SC__TN(sc__execute)(SC__TT(sc__job) * J, SC__T *g, int accumulate, double *loss) {
#if SC__F32
  if (J->ws->prec != SC_PRECISION_FP32) {
    J->bf16 = 1;
    J->bf16k = J->ws->prec == SC_PRECISION_BF16 ? J->ws->bf16k : 0;
    J->p = sc__bf16_params(J->ws, J->p);
  }
#endif
  J->ntiles = (J->batch + SC__TW - 1) / SC__TW;
  J->nslices = sc__slices_for(J->c, J->batch);
  J->scale = (SC__T)(1.0 / (double)J->batch);
  J->kt = SC__F32 ? (const void *)J->c->kf : (const void *)J->c->kd;
  J->slice_lo = 0;
  J->slice_hi = J->nslices;
  if (J->own_slices) { /* data-parallel: this rank's contiguous run of slices */
    sc__rank_slices(J->nslices, (size_t)J->dist_rank, (size_t)J->dist_ranks, &J->slice_lo,
                    &J->slice_hi);
  }
  /* one slice (a batch of up to min_tiles tiles) is run here: waking the pool for work only
   * one thread can do costs more than it gives (issue 13: batch 32 on 2 threads was 2-3x
   * slower than on 1); the slice's work is the same whichever thread does it */
  if (J->slice_hi - J->slice_lo == 1)
    SC__TN(sc__task)(J, 0, 1);
  else if (J->slice_hi > J->slice_lo)
    sc__pool_run(J->ws->pool, SC__TN(sc__task), J);
  if (J->own_slices) return; /* the caller exchanges the slices and reduces them */
  if (J->chk_x)
    for (size_t s = 0; s < J->nslices; s++)
      if (J->slice_bad[s]) {
        J->x_bad = 1; /* the caller reports it; no loss, no gradient written */
        return;
      }
  if (loss) {
    double l = 0;
    for (size_t s = 0; s < J->nslices; s++) l += J->slice_loss[s];
    *loss = l / (double)J->batch;
  }
  if (g && J->want_g) {
    sc_workspace *ws = J->ws;
    size_t np = J->c->nparams;
    SC__TT(sc__redjob) R = {ws, g, np, J->nslices, accumulate};
    if (np >= SC__OPT_PAR_MIN && J->nslices > 1)
      sc__pool_run(ws->pool, SC__TN(sc__reduce_task), &R);
    else /* small: waking the pool would cost more */
      SC__TN(sc__reduce_task)(&R, 0, 1);
  }
}

static void SC__TN(sc__job_init)(SC__TT(sc__job) * J, const sc_chain *c, sc_workspace *ws, int mode,
                                 const SC__T *p, const SC__T *x, size_t batch) {
  memset(J, 0, sizeof *J);
  J->c = c;
  J->ws = ws;
  J->mode = mode;
  J->p = p;
  J->x = x;
  J->batch = batch;
}

/* Small batches of dense chains go sample by sample through the one-state path (sc__one: a
 * few matrix-vector products) instead of a tile of SC__TW samples, most of them padding: at
 * batch 1 a forward of 784 -> 128 -> 64 -> 10 relu took 66.5 us as a tile and 8.3 us as one
 * state, a valgrad of 2 -> 50 -> 50 -> 2 tanh 8.6 us against about 1 (AVX-512, Zen 4;
 * bench/RESULTS.md, session 26). Per sample the tile costs the same from 1 to 32 samples and
 * the one state grows with each: the crossing measured at 5 to 10 samples, hence up to
 * SC__SMALL_BATCH. Only chains of dense, flatten and dropout layers (a LeNet5 forward on one
 * state takes 51-58 us, a whole tile 86: the one-state conv would win at batch 1 alone), fp32
 * precision (a bf16 workspace keeps its bf16 GEMMs), and for a loss at most SC__SMALL_OUT outputs
 * (its cotangent is on the stack). The choice depends on the chain and the batch size only, never
 * on threads or profiling; results differ from the tile path's in the last bits, as results may
 * with the batch size. */
#define SC__SMALL_BATCH 4
#define SC__SMALL_OUT 64
static int SC__TN(sc__small_ok)(const sc_chain *c, const sc_workspace *ws, size_t batch,
                                int training) {
  if (batch > SC__SMALL_BATCH) return 0;
#if SC__F32
  if (ws->prec != SC_PRECISION_FP32) return 0;
#else
  (void)ws;
#endif
  for (size_t l = 0; l < c->nlayers; l++) {
    sc_layer_kind k = c->L[l].spec.kind;
    if (k == SC_LAYER_CONV2D || k == SC_LAYER_MAXPOOL2D) return 0;
    if (k == SC_LAYER_DROPOUT && training && c->L[l].spec.rate > 0) return 0; /* masks */
  }
  return 1;
}

/* the loss of one sample's outputs y (see sc__loss_tile: the same formulas), and with v != NULL
 * its gradient times s into v */
static double SC__TN(sc__small_loss)(const sc_chain *c, sc_loss loss, const SC__T *y,
                                     const void *target, size_t b, SC__T s, SC__T *v) {
  size_t O = c->out;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY) {
    size_t lab = (size_t)((const int32_t *)target)[b], am = 0;
    for (size_t o = 1; o < O; o++)
      if (y[o] > y[am]) am = o;
    SC__T m = y[am], se = 1;
    for (size_t o = 0; o < O; o++)
      if (o != am) se += SC__EXP(y[o] - m);
    SC__T lse = m + SC__LOG(se);
    if (v)
      for (size_t o = 0; o < O; o++) v[o] = s * (SC__EXP(y[o] - lse) - (o == lab ? 1 : 0));
    return (double)(lse - y[lab]);
  }
  const SC__T *t = (const SC__T *)target + b * O;
  SC__T acc = 0;
  for (size_t o = 0; o < O; o++) {
    SC__T e = y[o] - t[o];
    if (loss == SC_LOSS_SQUARED) {
      acc += e * e;
      if (v) v[o] = 2 * s * e;
    } else {
      acc += SC__FABS(e);
      if (v) v[o] = s * (SC__T)((e > 0) - (e < 0));
    }
  }
  return (double)acc;
}

static void SC__TN(sc__one_run)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                const SC__T *v, const SC__T *w, SC__T *y, SC__T *du, SC__T *dp,
                                SC__T *jw, sc_workspace *ws, int fwd);

/* sc_valgrad / sc_loss_value / sc_pullback on a small batch, sample by sample (sc__small_ok):
 * with a loss, its value into *lossv and the gradient (g, gx overwritten; g may be NULL, gx
 * too); with dy instead (pullback), g accumulates and gx is overwritten */
static void SC__TN(sc__small_grad)(const sc_chain *c, sc_loss loss, const SC__T *p, const SC__T *x,
                                   const void *target, const SC__T *dy, size_t batch, double *lossv,
                                   SC__T *g, SC__T *gx, sc_workspace *ws) {
  SC__T y[SC__SMALL_OUT], v[SC__SMALL_OUT] = {0}; /* (v: cppcheck's uninitvar) */
  SC__T s = (SC__T)(1.0 / (double)batch);
  double l = 0;
  if (g && !dy) memset(g, 0, c->nparams * sizeof *g);
  if (gx) memset(gx, 0, batch * c->in * sizeof *gx);
  for (size_t b = 0; b < batch; b++) {
    const SC__T *xb = x + b * c->in, *vb = dy ? dy + b * c->out : v;
    if (!dy) {
      SC__TN(sc__one_run)(c, p, xb, NULL, NULL, y, NULL, NULL, NULL, ws, 1);
      l += SC__TN(sc__small_loss)(c, loss, y, target, b, s, (g || gx) ? v : NULL);
    }
    if (g || gx) /* after the loss's forward, the pullback alone (with dy: both) */
      SC__TN(sc__one_run)(c, p, xb, vb, NULL, NULL, gx ? gx + b * c->in : NULL, g, NULL, ws, !!dy);
  }
  if (lossv) *lossv = l / (double)batch;
}

sc_status SC__PUB(sc_forward)(const sc_chain *chain, const SC__T *p, const SC__T *x, size_t batch,
                              SC__T *y, sc_workspace *ws) {
  sc_status st = sc__compute_check(__func__, chain, p, x, batch, ws);
  if (st) return st;
  if (!y) return SC__FAIL(SC_ERR_NULL, "argument 'y' is NULL");
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "input", x, batch, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(__func__, chain, p))) return st;
  if (SC__TN(sc__small_ok)(chain, ws, batch, 0)) {
    for (size_t b = 0; b < batch; b++) SC__TN(sc__one_run)
    (chain, p, x + b * chain->in, NULL, NULL, y + b * chain->out, NULL, NULL, NULL, ws, 1);
    return SC_OK;
  }
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__FORWARD, p, x, batch);
  J.y = y;
  SC__TN(sc__execute)(&J, NULL, 0, NULL);
  return SC_OK;
}

/* tiles <- the n samples of a row-major array, in order (tile k at k cols SC__TW, zeros past
 * the last sample): what the steps' gathers make, made once (sc__train_tiles) */
static void SC__TN(sc__tiles_fill)(SC__T *restrict dst, const void *src, size_t cols, size_t n) {
  SC__TT(sc__job) J;
  memset(&J, 0, sizeof J); /* (no idx, no check) */
  for (size_t b0 = 0; b0 < n; b0 += SC__TW) {
    size_t m = n - b0 < SC__TW ? n - b0 : SC__TW;
    SC__TN(sc__gather)(dst + b0 * cols, (const SC__T *)src, cols, &J, b0, m, 0);
  }
}

/* sc_train's tiles made before its steps (sc__train_tiles), for a step in order (no idx) */
static void SC__TN(sc__job_tiles)(SC__TT(sc__job) * J, const size_t *idx) {
  const sc_workspace *ws = J->ws;
  if (!ws->tiles_x || idx || ws->tiles_f64 != !SC__F32) return;
  J->tiles_x = (const SC__T *)ws->tiles_x + ws->tiles0 * J->c->in * SC__TW;
  if (ws->tiles_t) J->tiles_t = (const SC__T *)ws->tiles_t + ws->tiles0 * J->c->out * SC__TW;
}

/* valgrad core, shared by the public entry points and sc_train (idx, no checks). chk_x: the
 * gathers check x for NaN and Inf (the caller did not); returns 1, with nothing written, when
 * they found one, else 0 */
static int SC__TN(sc__valgrad_run)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                   const SC__T *x, const size_t *idx, const void *target,
                                   size_t batch, double *lossv, SC__T *g, SC__T *gx,
                                   sc_workspace *ws, int train, int chk_x) {
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, (g || gx) ? SC__VALGRAD : SC__LOSS, p, x, batch);
  J.loss = loss;
  J.target = target;
  J.idx = idx;
  J.gx = gx;
  J.want_g = g != NULL;
  J.train = train;
  J.drop_seed = ws->drop_seed;
  J.drop_step = ws->drop_step;
  J.chk_x = chk_x;
  SC__TN(sc__job_tiles)(&J, idx);
  SC__TN(sc__execute)(&J, g, 0, lossv);
  if (J.x_bad) return 1;
  if (train) ws->drop_step++;
  return 0;
}

/* sc_train's data-parallel step: only this rank's slices of the minibatch (see sc_dist). Their
 * gradients stay in the workspace's slice buffers, their losses go to slice_loss[lo..hi). */
static void SC__TN(sc__valgrad_own)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                    const SC__T *x, const size_t *idx, const void *target,
                                    size_t batch, sc_workspace *ws, int rank, int ranks, size_t *ns,
                                    size_t *lo, size_t *hi, double *slice_loss) {
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__VALGRAD, p, x, batch);
  J.loss = loss;
  J.target = target;
  J.idx = idx;
  J.want_g = 1;
  J.train = 1;
  J.drop_seed = ws->drop_seed;
  J.drop_step = ws->drop_step;
  J.own_slices = 1;
  SC__TN(sc__job_tiles)(&J, idx);
  J.dist_rank = rank;
  J.dist_ranks = ranks;
  SC__TN(sc__execute)(&J, NULL, 0, NULL);
  *ns = J.nslices;
  *lo = J.slice_lo;
  *hi = J.slice_hi;
  for (size_t s = J.slice_lo; s < J.slice_hi; s++) slice_loss[s] = J.slice_loss[s];
  ws->drop_step++;
}

static sc_status SC__TN(sc__target_check)(const char *fn, const sc_chain *chain, sc_loss loss,
                                          const void *target, size_t batch) {
  sc_status st = sc__loss_check(fn, chain, loss, target);
  if (st) return st;
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY)
    return sc__labels_check(fn, (const int32_t *)target, batch, chain->out);
  return SC__TN(sc__finite_check)(fn, chain, "target", (const SC__T *)target, batch, chain->out);
}

sc_status SC__PUB(sc_valgrad)(const sc_chain *chain, sc_loss loss, const SC__T *p, const SC__T *x,
                              const void *target, size_t batch, SC__T *lossv, SC__T *g, SC__T *gx,
                              sc_workspace *ws) {
  sc_status st = sc__compute_check(__func__, chain, p, x, batch, ws);
  if (st) return st;
  if ((st = SC__TN(sc__target_check)(__func__, chain, loss, target, batch))) return st;
  /* x is checked for NaN and Inf by the tiles' gathers as they load it (one pass over x less:
   * the micro-benchmark 2.04 -> 1.99 us on Zen 5, bench/RESULTS.md session 29), not up front,
   * unless gx is asked for (it is written tile by tile) or the batch takes the one-state path;
   * either way an error names the first such element and nothing is written */
  int small = chain->out <= SC__SMALL_OUT && SC__TN(sc__small_ok)(chain, ws, batch, 1);
  int chk_x = !small && !gx;
  if (!chk_x && (st = SC__TN(sc__finite_check)(__func__, chain, "input", x, batch, chain->in)))
    return st;
  if ((st = SC__TN(sc__param_check)(__func__, chain, p))) return st;
  double l = 0;
  if (small) {
    SC__TN(sc__small_grad)(chain, loss, p, x, target, NULL, batch, &l, g, gx, ws);
    ws->drop_step++; /* as sc__valgrad_run's: no dropout layer here draws from it */
  } else if (SC__TN(sc__valgrad_run)(chain, loss, p, x, NULL, target, batch, &l, g, gx, ws, 1,
                                     chk_x))
    return SC__TN(sc__input_bad)(__func__, chain, x, batch);
  if (lossv) *lossv = (SC__T)l;
  return SC_OK;
}

sc_status SC__PUB(sc_loss_value)(const sc_chain *chain, sc_loss loss, const SC__T *p,
                                 const SC__T *x, const void *target, size_t batch, SC__T *lossv,
                                 sc_workspace *ws) {
  sc_status st = sc__compute_check(__func__, chain, p, x, batch, ws);
  if (st) return st;
  if (!lossv) return SC__FAIL(SC_ERR_NULL, "argument 'lossv' is NULL");
  if ((st = SC__TN(sc__target_check)(__func__, chain, loss, target, batch))) return st;
  int small = chain->out <= SC__SMALL_OUT && SC__TN(sc__small_ok)(chain, ws, batch, 0);
  if (small && (st = SC__TN(sc__finite_check)(__func__, chain, "input", x, batch, chain->in)))
    return st; /* (else the gathers check x, as in sc_valgrad) */
  if ((st = SC__TN(sc__param_check)(__func__, chain, p))) return st;
  double l = 0;
  if (small)
    SC__TN(sc__small_grad)(chain, loss, p, x, target, NULL, batch, &l, NULL, NULL, ws);
  else if (SC__TN(sc__valgrad_run)(chain, loss, p, x, NULL, target, batch, &l, NULL, NULL, ws, 0,
                                   1))
    return SC__TN(sc__input_bad)(__func__, chain, x, batch);
  *lossv = (SC__T)l;
  return SC_OK;
}

sc_status SC__PUB(sc_evaluate)(const sc_chain *chain, const SC__T *p, const SC__T *x,
                               const int32_t *labels, size_t n, double *loss, double *accuracy,
                               sc_workspace *ws) {
  sc_status st = sc__compute_check(__func__, chain, p, x, 1, ws);
  if (st) return st;
  if (!labels) return SC__FAIL(SC_ERR_NULL, "argument 'labels' is NULL");
  if (n == 0) return SC__FAIL(SC_ERR_BATCH, "n is 0");
  if (chain->out < 2)
    return SC__FAIL(SC_ERR_SHAPE, "a classifier needs at least 2 outputs; the chain has %zu",
                    chain->out);
  if ((st = sc__labels_check(__func__, labels, n, chain->out))) return st;
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "input", x, n, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(__func__, chain, p))) return st;
  double lsum = 0, csum = 0;
  for (size_t b0 = 0; b0 < n; b0 += ws->max_batch) {
    size_t nb = n - b0 < ws->max_batch ? n - b0 : ws->max_batch;
    SC__TT(sc__job) J;
    SC__TN(sc__job_init)(&J, chain, ws, SC__LOSS, p, x + b0 * chain->in, nb);
    J.loss = SC_LOSS_LOGIT_CROSSENTROPY;
    J.target = labels + b0;
    J.count_correct = 1;
    double l = 0;
    SC__TN(sc__execute)(&J, NULL, 0, &l);
    lsum += l * (double)nb;
    for (size_t s = 0; s < J.nslices; s++) csum += J.slice_correct[s];
  }
  if (loss) *loss = lsum / (double)n;
  if (accuracy) *accuracy = csum / (double)n;
  return SC_OK;
}

sc_status SC__PUB(sc_pullback)(const sc_chain *chain, const SC__T *p, const SC__T *x,
                               const SC__T *dy, size_t batch, SC__T *g, SC__T *gx,
                               sc_workspace *ws) {
  sc_status st = sc__compute_check(__func__, chain, p, x, batch, ws);
  if (st) return st;
  if (!dy) return SC__FAIL(SC_ERR_NULL, "argument 'dy' is NULL");
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "input", x, batch, chain->in))) return st;
  if ((st = SC__TN(sc__param_check)(__func__, chain, p))) return st;
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "cotangent dy", dy, batch, chain->out)))
    return st;
  if (!g && !gx) return SC_OK;
  if (SC__TN(sc__small_ok)(chain, ws, batch, 0)) {
    SC__TN(sc__small_grad)(chain, SC_LOSS_SQUARED, p, x, NULL, dy, batch, NULL, g, gx, ws);
    return SC_OK;
  }
  SC__TT(sc__job) J;
  SC__TN(sc__job_init)(&J, chain, ws, SC__PULLBACK, p, x, batch);
  J.dy = dy;
  J.gx = gx;
  J.want_g = g != NULL;
  SC__TN(sc__execute)(&J, g, 1, NULL);
  return SC_OK;
}

/* ---------------------------------------------------------------- one state (API) */
static sc_status SC__TN(sc__one_check)(const char *fn, const sc_chain *chain, const SC__T *p,
                                       const SC__T *u, const sc_workspace *ws) {
  if (!chain) return sc__fail(SC_ERR_NULL, fn, "argument 'chain' is NULL");
  if (!p) return sc__fail(SC_ERR_NULL, fn, "argument 'p' is NULL");
  if (!u) return sc__fail(SC_ERR_NULL, fn, "argument 'u' is NULL");
  if (!ws) return sc__fail(SC_ERR_NULL, fn, "argument 'ws' is NULL");
  if (ws->chain != chain)
    return sc__fail(SC_ERR_ARG, fn, "the workspace was created for a different chain");
  sc_status st = SC__TN(sc__finite_check)(fn, chain, "state u", u, 1, chain->in);
  return st ? st : SC__TN(sc__param_check)(fn, chain, p);
}

static void SC__TN(sc__one_run)(const sc_chain *chain, const SC__T *p, const SC__T *u,
                                const SC__T *v, const SC__T *w, SC__T *y, SC__T *du, SC__T *dp,
                                SC__T *jw, sc_workspace *ws, int fwd) {
  const SC__TT(sc__kt) *kt = SC__F32 ? (const void *)chain->kf : (const void *)chain->kd;
  kt->one(chain, p, u, v, w, y, du, dp, jw, (SC__T *)(void *)ws->slices, fwd);
}

sc_status SC__PUB(sc_apply)(const sc_chain *chain, const SC__T *p, const SC__T *u, SC__T *y,
                            sc_workspace *ws) {
  sc_status st = SC__TN(sc__one_check)(__func__, chain, p, u, ws);
  if (st) return st;
  if (!y) return SC__FAIL(SC_ERR_NULL, "argument 'y' is NULL");
  SC__TN(sc__one_run)(chain, p, u, NULL, NULL, y, NULL, NULL, NULL, ws, 1);
  return SC_OK;
}

sc_status SC__PUB(sc_vjp)(const sc_chain *chain, const SC__T *p, const SC__T *u, const SC__T *v,
                          SC__T *y, SC__T *du, SC__T *dp, sc_workspace *ws) {
  sc_status st = SC__TN(sc__one_check)(__func__, chain, p, u, ws);
  if (st) return st;
  if (!v) return SC__FAIL(SC_ERR_NULL, "argument 'v' is NULL");
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "cotangent v", v, 1, chain->out))) return st;
  SC__TN(sc__one_run)(chain, p, u, v, NULL, y, du, dp, NULL, ws, 1);
  return SC_OK;
}

sc_status SC__PUB(sc_jvp)(const sc_chain *chain, const SC__T *p, const SC__T *u, const SC__T *w,
                          SC__T *y, SC__T *jw, sc_workspace *ws) {
  sc_status st = SC__TN(sc__one_check)(__func__, chain, p, u, ws);
  if (st) return st;
  if (!w) return SC__FAIL(SC_ERR_NULL, "argument 'w' is NULL");
  if (!jw) return SC__FAIL(SC_ERR_NULL, "argument 'jw' is NULL");
  if ((st = SC__TN(sc__finite_check)(__func__, chain, "tangent w", w, 1, chain->in))) return st;
  SC__TN(sc__one_run)(chain, p, u, NULL, w, y, NULL, NULL, jw, ws, 1);
  return SC_OK;
}

#undef SC__PUB
#endif /* !SC__KERNELS_ONLY */
#undef SC__K_FWD
#undef SC__BFP
#undef SC__K_DW
#undef SC__K_TRANSPOSE
#undef SC__K_DX
#undef SC__K_DWL
#undef SC__DWL_BL
#undef SC__K_FWD_H
#undef SC__K_DX_H
#undef SC__K_DX_ACT_H
#undef SC__K_DWL_FOLD
#undef SC__K_FOLD_TW
#undef SC__K_DWD
#undef SC__DWD_DENSE
#undef SC__K_DWL2
#undef SC__K_DX_ACT
#undef SC__DX_ACT_OK
#undef SC__DWL_LANES
#undef SC__K_ACTB
#undef SC__K_CONV_FWD
#undef SC__K_CONV_DWL
#undef SC__K_CONV_DX
#undef SC__K_POOL_FWD
#undef SC__K_POOL_BWD
#undef SC__K_POOL2_ACT_BWD
#undef SC__K_CONV_POOL_FWD
#undef SC__K_POOL2_HITS_BWD
#undef SC__F32_POOL_FOLD

#undef SC__TANH
#undef SC__EXP
#undef SC__EXPM1
#undef SC__LOG1P
#undef SC__LOG
#undef SC__FABS
#undef SC__GELU_K0
#undef SC__GELU_K1
#undef SC__EXPMAX
#ifdef SC__POP_OPTIONS
#pragma GCC pop_options
#undef SC__POP_OPTIONS
#endif
#endif

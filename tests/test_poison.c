/* tests/test_poison.c — no computation may depend on what was in workspace memory.
 *
 * Reference results (sc_forward, sc_valgrad with squared and cross-entropy loss,
 * sc_loss_value, sc_pullback, and the _f64 variants) are computed with a fresh
 * library-allocated workspace. They must come out bit-for-bit identical (memcmp)
 * when the workspace memory is filled with garbage before every single call:
 *
 * Mode "re-init": the whole caller buffer (of sc_workspace_bytes bytes) is filled with
 *   the pattern, then sc_workspace_init is called again on it, then the one call runs.
 *
 * Mode "slices": the workspace is initialized once; before every call only the part of
 *   the buffer that holds no bookkeeping is filled. The layout (simplechain.c,
 *   sc__ws_place): the caller pointer is rounded up to SC__ALIGN (64) bytes; the
 *   struct sc_workspace sits there (that is the pointer sc_workspace_init returns);
 *   the slices (per-slice tile memory + gradient accumulators, all scratch) start
 *   `head` bytes later, head = sizeof(struct sc_workspace) rounded up to 64; the rest
 *   up to the end of the buffer is slices and slack. sc_workspace_bytes() is
 *   head + slices(max_batch) * slice_bytes + 64, where the slice count is 1 for a
 *   small max_batch and grows by one at a time (every SC__MIN_TILES tiles of SC__TW
 *   samples), so slice_bytes is the size of the first jump of sc_workspace_bytes as
 *   max_batch grows (cross-checked against the second jump) and head follows, without
 *   knowing the struct's size or the tile width; if the plan ever changes shape the
 *   test falls back to a conservative head of 256 bytes (the struct is 64 today).
 *   The slack in front of the aligned header is poisoned as well. This mode also runs
 *   with 2 threads (the thread pool pointer lives in the header, which is kept).
 *
 * Patterns: 0x00 (zeros), 0xFF (float and double NaN), 0x7F (huge finite floats that
 * overflow to Inf in any product), 0xA5. Output arrays are also pre-filled with NaN
 * (except the pullback gradient, which accumulates and starts at 0), so that "writes
 * every element" is checked too. Every ISA this CPU and build can run, tanh / relu /
 * gelu chains, batches 1, 9 (one half tile: the vector kernels compute half of each row and
 * store zeros in the rest), 17, 100 and 300 (workspace max_batch 300: several slices).
 */
#include "testutil.h"

#include <stdint.h>

enum { NI = 6, NH1 = 20, NH2 = 9, NO = 3, MAXB = 300 };

typedef struct out {
  float *y, *g_sq, *gx_sq, *g_ce, *g_pb, *gx_pb;
  float l_sq, l_ce, l_val;
  double *yd, *gd_sq, *gxd_sq, *gd_pb, *gxd_pb;
  double ld_sq;
} out;

typedef struct inputs {
  const sc_chain *c;
  size_t np;
  float *p, *x, *t, *dy;
  double *pd, *xd, *td, *dyd;
  int32_t *lab;
} inputs;

/* how a workspace is prepared before each call */
enum { MODE_REF = 0, MODE_REINIT, MODE_SLICES };
typedef struct prep {
  int mode;
  unsigned char pattern;
  const sc_chain *c;
  unsigned char *mem;
  size_t bytes, head;
  sc_workspace *ws;
} prep;

static sc_workspace *before_call(prep *P) {
  if (P->mode == MODE_REINIT) {
    memset(P->mem, P->pattern, P->bytes);
    P->ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_init(&P->ws, P->c, MAXB, P->mem, P->bytes));
  } else if (P->mode == MODE_SLICES) {
    unsigned char *hdr = (unsigned char *)P->ws;
    unsigned char *slices = hdr + P->head, *end = P->mem + P->bytes;
    assert_true(hdr >= P->mem && slices < end);
    memset(P->mem, P->pattern, (size_t)(hdr - P->mem)); /* alignment slack */
    memset(slices, P->pattern, (size_t)(end - slices));
  }
  return P->ws;
}

static void out_alloc(out *o, size_t np) {
  o->y = malloc(MAXB * NO * sizeof(float));
  o->g_sq = malloc(np * sizeof(float));
  o->gx_sq = malloc(MAXB * NI * sizeof(float));
  o->g_ce = malloc(np * sizeof(float));
  o->g_pb = malloc(np * sizeof(float));
  o->gx_pb = malloc(MAXB * NI * sizeof(float));
  o->yd = malloc(MAXB * NO * sizeof(double));
  o->gd_sq = malloc(np * sizeof(double));
  o->gxd_sq = malloc(MAXB * NI * sizeof(double));
  o->gd_pb = malloc(np * sizeof(double));
  o->gxd_pb = malloc(MAXB * NI * sizeof(double));
  assert_true(o->y && o->g_sq && o->gx_sq && o->g_ce && o->g_pb && o->gx_pb && o->yd && o->gd_sq &&
              o->gxd_sq && o->gd_pb && o->gxd_pb);
}
static void out_free(out *o) {
  free(o->y), free(o->g_sq), free(o->gx_sq), free(o->g_ce), free(o->g_pb), free(o->gx_pb);
  free(o->yd), free(o->gd_sq), free(o->gxd_sq), free(o->gd_pb), free(o->gxd_pb);
}

/* every call of the compute API on batch b, each after before_call() */
static void compute_all(prep *P, const inputs *in, size_t b, out *o) {
  const sc_chain *c = in->c;
  size_t np = in->np;
  /* outputs start as NaN (0xFF bytes), the pullback gradients as 0 */
  memset(o->y, 0xFF, MAXB * NO * sizeof(float));
  memset(o->g_sq, 0xFF, np * sizeof(float));
  memset(o->gx_sq, 0xFF, MAXB * NI * sizeof(float));
  memset(o->g_ce, 0xFF, np * sizeof(float));
  memset(o->g_pb, 0, np * sizeof(float));
  memset(o->gx_pb, 0xFF, MAXB * NI * sizeof(float));
  memset(o->yd, 0xFF, MAXB * NO * sizeof(double));
  memset(o->gd_sq, 0xFF, np * sizeof(double));
  memset(o->gxd_sq, 0xFF, MAXB * NI * sizeof(double));
  memset(o->gd_pb, 0, np * sizeof(double));
  memset(o->gxd_pb, 0xFF, MAXB * NI * sizeof(double));
  o->l_sq = o->l_ce = o->l_val = NAN;
  o->ld_sq = NAN;
  SC_OK_OR_FAIL(sc_forward(c, in->p, in->x, b, o->y, before_call(P)));
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_SQUARED, in->p, in->x, in->t, b, &o->l_sq, o->g_sq, o->gx_sq,
                           before_call(P)));
  SC_OK_OR_FAIL(sc_valgrad(c, SC_LOSS_LOGIT_CROSSENTROPY, in->p, in->x, in->lab, b, &o->l_ce,
                           o->g_ce, NULL, before_call(P)));
  SC_OK_OR_FAIL(
      sc_loss_value(c, SC_LOSS_ABSOLUTE, in->p, in->x, in->t, b, &o->l_val, before_call(P)));
  SC_OK_OR_FAIL(sc_pullback(c, in->p, in->x, in->dy, b, o->g_pb, o->gx_pb, before_call(P)));
  SC_OK_OR_FAIL(sc_forward_f64(c, in->pd, in->xd, b, o->yd, before_call(P)));
  SC_OK_OR_FAIL(sc_valgrad_f64(c, SC_LOSS_SQUARED, in->pd, in->xd, in->td, b, &o->ld_sq, o->gd_sq,
                               o->gxd_sq, before_call(P)));
  SC_OK_OR_FAIL(
      sc_pullback_f64(c, in->pd, in->xd, in->dyd, b, o->gd_pb, o->gxd_pb, before_call(P)));
}

static void all_finite_f32(const float *v, size_t n, const char *what) {
  for (size_t k = 0; k < n; k++)
    if (!isfinite(v[k])) fail_msg("reference %s[%zu] is not finite", what, k);
}
static void all_finite_f64(const double *v, size_t n, const char *what) {
  for (size_t k = 0; k < n; k++)
    if (!isfinite(v[k])) fail_msg("reference %s[%zu] is not finite", what, k);
}

typedef struct ctx {
  const char *isa, *act, *mode;
  size_t batch;
  unsigned pattern;
} ctx;

static void same(const ctx *C, const char *what, const void *a, const void *b, size_t bytes) {
  if (memcmp(a, b, bytes) != 0)
    fail_msg("ISA %s, %s chain, batch %zu, mode %s, pattern 0x%02X: %s differs from the "
             "fresh-workspace result",
             C->isa, C->act, C->batch, C->mode, C->pattern, what);
}

static void compare(const ctx *C, const out *r, const out *o, size_t np) {
  size_t b = C->batch;
  same(C, "sc_forward y", r->y, o->y, b * NO * sizeof(float));
  same(C, "sc_valgrad (squared) loss", &r->l_sq, &o->l_sq, sizeof(float));
  same(C, "sc_valgrad (squared) g", r->g_sq, o->g_sq, np * sizeof(float));
  same(C, "sc_valgrad (squared) gx", r->gx_sq, o->gx_sq, b * NI * sizeof(float));
  same(C, "sc_valgrad (cross-entropy) loss", &r->l_ce, &o->l_ce, sizeof(float));
  same(C, "sc_valgrad (cross-entropy) g", r->g_ce, o->g_ce, np * sizeof(float));
  same(C, "sc_loss_value (absolute)", &r->l_val, &o->l_val, sizeof(float));
  same(C, "sc_pullback g", r->g_pb, o->g_pb, np * sizeof(float));
  same(C, "sc_pullback gx", r->gx_pb, o->gx_pb, b * NI * sizeof(float));
  same(C, "sc_forward_f64 y", r->yd, o->yd, b * NO * sizeof(double));
  same(C, "sc_valgrad_f64 loss", &r->ld_sq, &o->ld_sq, sizeof(double));
  same(C, "sc_valgrad_f64 g", r->gd_sq, o->gd_sq, np * sizeof(double));
  same(C, "sc_valgrad_f64 gx", r->gxd_sq, o->gxd_sq, b * NI * sizeof(double));
  same(C, "sc_pullback_f64 g", r->gd_pb, o->gd_pb, np * sizeof(double));
  same(C, "sc_pullback_f64 gx", r->gxd_pb, o->gxd_pb, b * NI * sizeof(double));
}

/* head = offset of the slices from the aligned header; see the file comment */
static size_t slices_offset(const sc_chain *c) {
  /* sc_workspace_bytes(max_batch) = head + slices(max_batch) * slice_bytes + 64, with
   * slices(1) = 1 and the slice count growing one at a time with max_batch: the first
   * two jumps of the total give slice_bytes (twice, as a cross-check) */
  size_t t1 = 0, prev = 0, jumps[2] = {0, 0};
  int nj = 0;
  SC_OK_OR_FAIL(sc_workspace_bytes(c, 1, &t1));
  prev = t1;
  for (size_t mb = 2; mb <= 8192 && nj < 2; mb++) {
    size_t t = 0;
    SC_OK_OR_FAIL(sc_workspace_bytes(c, mb, &t));
    assert_true(t >= prev); /* more samples never need less */
    if (t != prev) jumps[nj++] = t - prev;
    prev = t;
  }
  if (nj == 2 && jumps[0] == jumps[1] && t1 > jumps[0] + 64) {
    size_t head = t1 - jumps[0] - 64;
    if (head % 64 == 0 && head >= 64 && head <= 1024) return head;
  }
  print_message("test_poison: workspace plan differs from the one described; poisoning "
                "from byte 256 after the header on\n");
  return 256;
}

static const sc_act ACTS[] = {SC_TANH, SC_RELU, SC_GELU};
static const unsigned char PATTERNS[] = {0x00, 0xFF, 0x7F, 0xA5};
static const size_t BATCHES[] = {1, 9, 17, 100, 300};

static void run_isa(const char *isa) {
  for (size_t ai = 0; ai < sizeof ACTS / sizeof ACTS[0]; ai++) {
    sc_act act = ACTS[ai];
    sc_layer L[] = {sc_dense(NH1, act), sc_dense_nobias(NH2, act), sc_dense(NO, SC_IDENTITY)};
    sc_chain *c = NULL;
    SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 3));
    assert_string_equal(sc_chain_isa(c), isa);
    inputs in;
    memset(&in, 0, sizeof in);
    in.c = c;
    SC_OK_OR_FAIL(sc_chain_nparams(c, &in.np));
    size_t np = in.np;
    in.p = malloc(np * sizeof(float));
    in.pd = malloc(np * sizeof(double));
    in.x = malloc(MAXB * NI * sizeof(float));
    in.xd = malloc(MAXB * NI * sizeof(double));
    in.t = malloc(MAXB * NO * sizeof(float));
    in.td = malloc(MAXB * NO * sizeof(double));
    in.dy = malloc(MAXB * NO * sizeof(float));
    in.dyd = malloc(MAXB * NO * sizeof(double));
    in.lab = malloc(MAXB * sizeof(int32_t));
    assert_true(in.p && in.pd && in.x && in.xd && in.t && in.td && in.dy && in.dyd && in.lab);
    SC_OK_OR_FAIL(sc_params_init(c, in.p, np, 5));
    SC_OK_OR_FAIL(sc_params_init_f64(c, in.pd, np, 5));
    /* nonzero biases, so that padded lanes of a tile are not all zero either */
    for (size_t k = NI * NH1; k < NI * NH1 + NH1; k++)
      in.pd[k] = in.p[k] = 0.1f * (float)(k % 5) - 0.2f;
    tu_fill_f32(in.x, MAXB * NI, 21, 1.5);
    tu_fill_f64(in.xd, MAXB * NI, 21, 1.5);
    tu_fill_f32(in.t, MAXB * NO, 22, 1.0);
    tu_fill_f64(in.td, MAXB * NO, 22, 1.0);
    tu_fill_f32(in.dy, MAXB * NO, 23, 1.0);
    tu_fill_f64(in.dyd, MAXB * NO, 23, 1.0);
    for (size_t i = 0; i < MAXB; i++) in.lab[i] = (int32_t)((i * 7) % NO);

    size_t bytes = 0;
    SC_OK_OR_FAIL(sc_workspace_bytes(c, MAXB, &bytes));
    size_t head = slices_offset(c);
    unsigned char *mem = malloc(bytes + 8);
    assert_non_null(mem);

    out ref, got;
    out_alloc(&ref, np);
    out_alloc(&got, np);
    for (size_t bi = 0; bi < sizeof BATCHES / sizeof BATCHES[0]; bi++) {
      size_t b = BATCHES[bi];
      /* reference: a fresh library workspace, never poisoned */
      prep R = {MODE_REF, 0, c, NULL, 0, 0, NULL};
      SC_OK_OR_FAIL(sc_workspace_create(&R.ws, c, MAXB));
      compute_all(&R, &in, b, &ref);
      sc_workspace_destroy(R.ws);
      all_finite_f32(ref.y, b * NO, "y");
      all_finite_f32(ref.g_sq, np, "g");
      all_finite_f32(ref.gx_sq, b * NI, "gx");
      all_finite_f32(ref.g_ce, np, "g (cross-entropy)");
      all_finite_f32(ref.g_pb, np, "pullback g");
      all_finite_f32(ref.gx_pb, b * NI, "pullback gx");
      all_finite_f64(ref.gd_sq, np, "g (f64)");
      all_finite_f64(ref.gxd_pb, b * NI, "pullback gx (f64)");
      assert_true(isfinite(ref.l_sq) && ref.l_sq > 0);
      assert_true(isfinite(ref.l_ce) && ref.l_ce > 0);
      assert_true(isfinite(ref.l_val) && ref.l_val > 0);
      assert_true(isfinite(ref.ld_sq) && ref.ld_sq > 0);
      /* the f64 results are the same computation in double: close to the float ones */
      assert_true(fabs(ref.ld_sq - ref.l_sq) <= 1e-4 * ref.ld_sq);

      for (size_t pi = 0; pi < sizeof PATTERNS / sizeof PATTERNS[0]; pi++) {
        /* caller memory at an aligned and at an odd address */
        for (size_t off = 0; off < 2; off++) {
          ctx C = {isa, sc_act_name(act), "re-init", b, PATTERNS[pi]};
          prep P = {MODE_REINIT, PATTERNS[pi], c, mem + off * 3, bytes, head, NULL};
          compute_all(&P, &in, b, &got);
          compare(&C, &ref, &got, np);

          for (int threads = 1; threads <= 2; threads++) {
            ctx C2 = {isa, sc_act_name(act), threads == 1 ? "slices" : "slices, 2 threads", b,
                      PATTERNS[pi]};
            prep S = {MODE_SLICES, PATTERNS[pi], c, mem + off * 3, bytes, head, NULL};
            memset(S.mem, 0x5A, bytes);
            SC_OK_OR_FAIL(sc_workspace_init(&S.ws, c, MAXB, S.mem, bytes));
            if (threads > 1) SC_OK_OR_FAIL(sc_workspace_set_threads(S.ws, threads));
            compute_all(&S, &in, b, &got);
            compare(&C2, &ref, &got, np);
            /* and once more on the same workspace: no state carried between calls */
            compute_all(&S, &in, b, &got);
            compare(&C2, &ref, &got, np);
            sc_workspace_destroy(S.ws); /* stops the threads; mem stays ours */
          }
        }
      }
    }
    out_free(&ref);
    out_free(&got);
    free(mem);
    free(in.p), free(in.pd), free(in.x), free(in.xd), free(in.t), free(in.td);
    free(in.dy), free(in.dyd), free(in.lab);
    sc_chain_destroy(c);
  }
}

static void test_poisoned_workspace(void **state) {
  (void)state;
  const char *isas[3];
  int n = tu_isas(isas);
  assert_true(n >= 1);
  const char *saved = getenv("SC_ISA");
  char keep[32] = {0};
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  for (int i = 0; i < n; i++) {
    setenv("SC_ISA", isas[i], 1);
    run_isa(isas[i]);
  }
  if (saved)
    setenv("SC_ISA", keep, 1);
  else
    unsetenv("SC_ISA");
}

/* the layout the "slices" mode relies on: the returned workspace pointer is the 64-byte
 * aligned start of the caller buffer (within its first 64 bytes), and the slices begin
 * `head` bytes after it, inside the buffer */
static void test_layout_assumption(void **state) {
  (void)state;
  sc_layer L[] = {sc_dense(NH1, SC_TANH), sc_dense(NO, SC_IDENTITY)};
  sc_chain *c = NULL;
  SC_OK_OR_FAIL(sc_chain_create(&c, NI, L, 2));
  size_t bytes = 0, head = slices_offset(c);
  SC_OK_OR_FAIL(sc_workspace_bytes(c, MAXB, &bytes));
  unsigned char *mem = malloc(bytes + 64);
  assert_non_null(mem);
  for (size_t off = 0; off < 64; off += 7) {
    sc_workspace *ws = NULL;
    SC_OK_OR_FAIL(sc_workspace_init(&ws, c, MAXB, mem + off, bytes));
    uintptr_t w = (uintptr_t)ws;
    assert_int_equal(w % 64, 0);
    assert_true(w >= (uintptr_t)(mem + off) && w < (uintptr_t)(mem + off) + 64);
    assert_true(w + head < (uintptr_t)(mem + off) + bytes);
  }
  free(mem);
  sc_chain_destroy(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_assumption),
      cmocka_unit_test(test_poisoned_workspace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

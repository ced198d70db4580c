/* src/profile.c — the per-layer profiler of a workspace (sc_workspace_profile, its report). */
#include "internal.h"

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

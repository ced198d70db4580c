/* src/workspace.c — workspaces: the slices' tile memory and gradient accumulators planned for a
 * maximum batch, in the library's memory or the caller's; threads and dropout settings. */
#include "internal.h"

/* ---------------------------------------------------------------- workspaces */

SC__INT size_t sc__slices_for(const sc_chain *c, size_t batch) {
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

sc_status sc_workspace_set_threads(sc_workspace *ws, int threads) {
  SC__CHECK_NULL(ws);
  sc_status tst = sc__threads_check(__func__, threads);
  if (tst) return tst;
  if (ws->pool && sc__pool_threads(ws->pool) == threads) return SC_OK;
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

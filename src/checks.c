/* src/checks.c — the argument checks the compute entry points share (chain, parameters, input,
 * batch against the workspace; the loss and its targets). */
#include "internal.h"

/* ---------------------------------------------------------------- shared checks */
SC__INT sc_status sc__compute_check(const char *fn, const sc_chain *c, const void *p, const void *x,
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

SC__INT sc_status sc__loss_check(const char *fn, const sc_chain *c, sc_loss loss,
                                 const void *target) {
  if (!target) return sc__fail(SC_ERR_NULL, fn, "argument 'target' is NULL");
  if (loss != SC_LOSS_SQUARED && loss != SC_LOSS_ABSOLUTE && loss != SC_LOSS_LOGIT_CROSSENTROPY)
    return sc__fail(SC_ERR_ARG, fn, "unknown loss %d", (int)loss);
  if (loss == SC_LOSS_LOGIT_CROSSENTROPY && c->out < 2)
    return sc__fail(SC_ERR_SHAPE, fn,
                    "cross-entropy needs at least 2 outputs (logits); the chain has %zu", c->out);
  return SC_OK;
}

SC__INT sc_status sc__labels_check(const char *fn, const int32_t *lab, size_t n, size_t classes) {
  for (size_t b = 0; b < n; b++)
    if (lab[b] < 0 || (size_t)lab[b] >= classes)
      return sc__fail(SC_ERR_ARG, fn, "label of sample %zu is %ld, outside [0, %zu)", b,
                      (long)lab[b], classes);
  return SC_OK;
}

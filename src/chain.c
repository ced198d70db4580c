/* src/chain.c — a chain's plan: every layer checked against its input shape, the parameter
 * layout, the memory plan of a slice's tiles; the chain's accessors and sc_chain_summary. */
#include "internal.h"

SC__INT sc_status sc__variant_plan(const char *fn, sc_chain *c);

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
    if ((unsigned)s->act > (unsigned)SC_SILU)
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

SC__INT sc_status sc__chain_create(const char *fn, sc_chain **out, size_t ic, size_t ih, size_t iw,
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
    P->z_off = has_w && (P->spec.act == SC_GELU || P->spec.act == SC_SILU)
                   ? sc__tile_alloc(&cur, sc__mul(P->out, TW, &ok), &ok)
                   : SIZE_MAX; /* the pre-activations the pullback needs */
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

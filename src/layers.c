/* src/layers.c — the layer descriptions (sc_dense, sc_conv2d, sc_maxpool2d, sc_flatten,
 * sc_dropout, ...) and the names of layers and activations. */
#include "internal.h"

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
  case SC_SILU: return "silu";
  }
  return "?";
}

/* src/api.c — the public compute calls, float and double: each one literal definition here
 * (what simplechain.h declares), over the typed body of src/typed/exec.h (src/compute.c) that
 * does the work, with the same parameters: each compiles to a jump (a call that passed the
 * public name along cost the one-state calls 1.5 %: 9 arguments put 3 on the stack). */
#include "internal.h"

sc_status sc_forward(const sc_chain *chain, const float *p, const float *x, size_t batch, float *y,
                     sc_workspace *ws) {
  return sc__forward_f32(chain, p, x, batch, y, ws);
}
sc_status sc_forward_f64(const sc_chain *chain, const double *p, const double *x, size_t batch,
                         double *y, sc_workspace *ws) {
  return sc__forward_f64(chain, p, x, batch, y, ws);
}
sc_status sc_valgrad(const sc_chain *chain, sc_loss loss, const float *p, const float *x,
                     const void *target, size_t batch, float *lossv, float *g, float *gx,
                     sc_workspace *ws) {
  return sc__valgrad_f32(chain, loss, p, x, target, batch, lossv, g, gx, ws);
}
sc_status sc_valgrad_f64(const sc_chain *chain, sc_loss loss, const double *p, const double *x,
                         const void *target, size_t batch, double *lossv, double *g, double *gx,
                         sc_workspace *ws) {
  return sc__valgrad_f64(chain, loss, p, x, target, batch, lossv, g, gx, ws);
}
sc_status sc_loss_value(const sc_chain *chain, sc_loss loss, const float *p, const float *x,
                        const void *target, size_t batch, float *lossv, sc_workspace *ws) {
  return sc__loss_value_f32(chain, loss, p, x, target, batch, lossv, ws);
}
sc_status sc_loss_value_f64(const sc_chain *chain, sc_loss loss, const double *p, const double *x,
                            const void *target, size_t batch, double *lossv, sc_workspace *ws) {
  return sc__loss_value_f64(chain, loss, p, x, target, batch, lossv, ws);
}
sc_status sc_evaluate(const sc_chain *chain, const float *p, const float *x, const int32_t *labels,
                      size_t n, double *loss, double *accuracy, sc_workspace *ws) {
  return sc__evaluate_f32(chain, p, x, labels, n, loss, accuracy, ws);
}
sc_status sc_evaluate_f64(const sc_chain *chain, const double *p, const double *x,
                          const int32_t *labels, size_t n, double *loss, double *accuracy,
                          sc_workspace *ws) {
  return sc__evaluate_f64(chain, p, x, labels, n, loss, accuracy, ws);
}
sc_status sc_pullback(const sc_chain *chain, const float *p, const float *x, const float *dy,
                      size_t batch, float *g, float *gx, sc_workspace *ws) {
  return sc__pullback_f32(chain, p, x, dy, batch, g, gx, ws);
}
sc_status sc_pullback_f64(const sc_chain *chain, const double *p, const double *x, const double *dy,
                          size_t batch, double *g, double *gx, sc_workspace *ws) {
  return sc__pullback_f64(chain, p, x, dy, batch, g, gx, ws);
}
sc_status sc_apply(const sc_chain *chain, const float *p, const float *u, float *y,
                   sc_workspace *ws) {
  return sc__apply_f32(chain, p, u, y, ws);
}
sc_status sc_apply_f64(const sc_chain *chain, const double *p, const double *u, double *y,
                       sc_workspace *ws) {
  return sc__apply_f64(chain, p, u, y, ws);
}
sc_status sc_vjp(const sc_chain *chain, const float *p, const float *u, const float *v, float *y,
                 float *du, float *dp, sc_workspace *ws) {
  return sc__vjp_f32(chain, p, u, v, y, du, dp, ws);
}
sc_status sc_vjp_f64(const sc_chain *chain, const double *p, const double *u, const double *v,
                     double *y, double *du, double *dp, sc_workspace *ws) {
  return sc__vjp_f64(chain, p, u, v, y, du, dp, ws);
}
sc_status sc_jvp(const sc_chain *chain, const float *p, const float *u, const float *w, float *y,
                 float *jw, sc_workspace *ws) {
  return sc__jvp_f32(chain, p, u, w, y, jw, ws);
}
sc_status sc_jvp_f64(const sc_chain *chain, const double *p, const double *u, const double *w,
                     double *y, double *jw, sc_workspace *ws) {
  return sc__jvp_f64(chain, p, u, w, y, jw, ws);
}

/* src/error.c — errors as values: the message of the thread's last failure (sc_last_error,
 * sc__fail, which every room reports through), the names of the status codes, and a bounded
 * text buffer for the reports (sc_chain_summary, sc_chain_plan, the profile). */
#include "internal.h"

/* ---------------------------------------------------------------- errors */
static SC__TLS char sc__errbuf[512];

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
SC__INT sc_status
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
/* ---------------------------------------------------------------- bounded text */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
SC__INT void
sc__sprintf(sc__sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *dst = b->len < b->cap ? b->buf + b->len : NULL;
  size_t room = b->len < b->cap ? b->cap - b->len : 0;
  int k = vsnprintf(dst, room, fmt, ap);
  va_end(ap);
  if (k > 0) b->len += (size_t)k;
}

/* src/fileio.c — files: atomic writes (a temporary name, fsync, rename, the directory synced)
 * without heap memory, and opening a file for reading with errors that name it. */
#include "internal.h"

/* ---------------------------------------------------------------- atomic file writes */
/* Files are written under a temporary name no other writer uses, in the directory of the
 * target ("<path>.tmp-<pid>-<counter>-<clock>", created exclusively), flushed to the disk
 * (fsync, where the system has it) and renamed over the target; the directory is then
 * synced so the rename itself survives a power cut. On every error path the temporary file
 * is removed. Where POSIX I/O exists no heap memory is used (the caller gives the name
 * buffer), so a trainer may checkpoint without allocating. */

SC__INT sc_status sc__io_fail(const char *fn, int e, const char *what, const char *path) {
  if (e == ENOMEM) return sc__fail(SC_ERR_NOMEM, fn, "%s '%s': out of memory", what, path);
  return sc__fail(SC_ERR_IO, fn, "%s '%s': %s", what, path,
                  e > 0 ? strerror(e) : "write error (disk full?)");
}

SC__INT sc_status sc__wopen(sc__wfile *w, const char *path, char *tmp, const char *fn) {
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

SC__INT void sc__wwrite(sc__wfile *w, const void *data, size_t n) {
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
SC__INT sc_status sc__wcommit(sc__wfile *w, const char *path, const char *fn) {
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
SC__INT sc_status sc__ropen(FILE **f, const char *path, const char *fn) {
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
SC__INT sc_status sc__rerr(FILE *f, const char *path, const char *fn) {
  if (!ferror(f)) return SC_OK;
  return sc__io_fail(fn, errno ? errno : EIO, "cannot read", path);
}

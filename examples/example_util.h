/* example_util.h — what every example shares: refusing an unwritable output path before the
 * work starts (issue 12: --save/--out/--csv targets were only found bad after training). */
#ifndef EXAMPLE_UTIL_H
#define EXAMPLE_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* An output path that cannot be written is refused before the work, not after it: 1 if path
 * (when not NULL) can be opened for writing (a file the probe created is removed again),
 * else 0 with a message naming the path and the system's reason. */
static inline int example_writable(const char *prog, const char *path) {
  if (!path) return 1;
  FILE *t = fopen(path, "r");
  int existed = t != NULL;
  if (t) fclose(t);
  t = fopen(path, "a");
  if (!t) {
    fprintf(stderr, "%s: cannot write '%s': %s\n", prog, path, strerror(errno));
    return 0;
  }
  fclose(t);
  if (!existed) remove(path);
  return 1;
}

#endif

#include "shim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

SHIM_TLS int shim_depth;
SHIM_TLS uint32_t shim_nested;

void shim_say(const char *fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "standin: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0)
    m = 0;
  size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}

void *shim_real_opt(const char *name) {
  return dlsym(RTLD_NEXT, name);
}

void *shim_real(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) {
    shim_say("cannot find the real %s (%s); is the library loaded?", name, dlerror());
    abort();
  }
  return p;
}

void shim_fp_bind(uint8_t fp[16], int api) {
  XXH128_hash_t h = XXH3_128bits_withSeed(fp, 16, (XXH64_hash_t)api);
  memcpy(fp, &h.low64, 8);
  memcpy(fp + 8, &h.high64, 8);
}

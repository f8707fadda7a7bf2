/* lazylibs.c — libunwind and libdeflate, loaded when a process first needs
 * them.
 *
 * Every process of a recorded run loads the record shim: a script's shell
 * and each tool it runs as well as the program. Most of them never make a
 * call standin records. As dependencies of the shim, libunwind (with the
 * liblzma it needs) and libdeflate were mapped and relocated in every one
 * of them, and libunwind initialised (its cache, and a pipe it checks
 * addresses through). So the shim loads them itself, when the process
 * first needs them: libunwind at its first unwind (rt_stack, after the
 * call's clock has stopped), libdeflate when the writer thread creates the
 * trace file. Both happen inside the regions a fork waits for (the
 * unwinders count, writer_work), so no child inherits a half-done load.
 *
 * libdeflate's functions that traces/writer.c calls are defined here,
 * hidden, and forward to the library once it is loaded; the shim is linked
 * without -ldeflate. */
#include <dlfcn.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "lazylibs.h"
#include "shim.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* the name a libunwind macro stands for */

#ifndef __SANITIZE_THREAD__
rt_unw_fns rt_unw;
static pthread_once_t unw_once = PTHREAD_ONCE_INIT;

static void *need(void *h, const char *lib, const char *sym, int *ok) {
  void *p = dlsym(h, sym);
  if (!p) {
    shim_say("%s has no %s (%s)", lib, sym, dlerror());
    *ok = 0;
  }
  return p;
}

static void unw_load(void) {
  const char *lib = "libunwind.so.8";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    shim_say("cannot load %s (%s); call sites come from glibc's backtrace, which may be "
             "slower. Install libunwind8 to record them as usual",
             lib, dlerror());
    return;
  }
  int ok = 1;
  rt_unw_fns f;
  f.getcontext = (int (*)(unw_context_t *))need(h, lib, STR(unw_tdep_getcontext), &ok);
  f.init_local = (int (*)(unw_cursor_t *, unw_context_t *))need(h, lib, STR(unw_init_local), &ok);
  f.step = (int (*)(unw_cursor_t *))need(h, lib, STR(unw_step), &ok);
  f.get_reg = (int (*)(unw_cursor_t *, int, unw_word_t *))need(h, lib, STR(unw_get_reg), &ok);
  f.backtrace = (int (*)(void **, int))need(h, lib, "unw_backtrace", &ok);
  int (*policy)(unw_addr_space_t, unw_caching_policy_t) =
      (int (*)(unw_addr_space_t, unw_caching_policy_t))need(h, lib, STR(unw_set_caching_policy),
                                                            &ok);
  unw_addr_space_t *local = need(h, lib, STR(unw_local_addr_space), &ok);
  if (!ok)
    return; /* the handle stays: nothing of it is used */
  /* a per-thread cache of unwind info: no lock shared between threads on
   * the hot path, and no DWARF parsing once a call site has been seen */
  policy(*local, UNW_CACHE_PER_THREAD);
  rt_unw = f;
}

int rt_unw_ready(void) {
  pthread_once(&unw_once, unw_load);
  return rt_unw.backtrace != NULL;
}
#endif

/* ---- libdeflate, for traces/writer.c ---------------------------------------- */

static struct {
  struct libdeflate_compressor *(*alloc)(int);
  size_t (*zlib)(struct libdeflate_compressor *, const void *, size_t, void *, size_t);
  void (*free)(struct libdeflate_compressor *);
  void (*set_allocator)(void *(*)(size_t), void (*)(void *));
  uint32_t (*crc32)(uint32_t, const void *, size_t);
} dfl;
static void *(*want_malloc)(size_t);
static void (*want_free)(void *);
static pthread_once_t dfl_once = PTHREAD_ONCE_INIT;

static void dfl_load(void) {
  const char *lib = "libdeflate.so.0";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    shim_say("cannot load %s (%s): no trace can be written. Install libdeflate0", lib, dlerror());
    return;
  }
  void *a = dlsym(h, "libdeflate_alloc_compressor");
  void *z = dlsym(h, "libdeflate_zlib_compress");
  void *f = dlsym(h, "libdeflate_free_compressor");
  void *s = dlsym(h, "libdeflate_set_memory_allocator");
  void *c = dlsym(h, "libdeflate_crc32");
  if (!a || !z || !f || !s || !c) {
    shim_say("%s lacks the compressor functions standin calls: no trace can be written", lib);
    return;
  }
  dfl.zlib = (size_t(*)(struct libdeflate_compressor *, const void *, size_t, void *, size_t))z;
  dfl.free = (void (*)(struct libdeflate_compressor *))f;
  dfl.set_allocator = (void (*)(void *(*)(size_t), void (*)(void *)))s;
  dfl.crc32 = (uint32_t(*)(uint32_t, const void *, size_t))c;
  if (want_malloc)
    dfl.set_allocator(want_malloc, want_free);
  dfl.alloc = (struct libdeflate_compressor * (*)(int)) a; /* last: the one callers test */
}

void libdeflate_set_memory_allocator(void *(*malloc_func)(size_t), void (*free_func)(void *)) {
  want_malloc = malloc_func;
  want_free = free_func;
  if (dfl.set_allocator)
    dfl.set_allocator(malloc_func, free_func);
}

struct libdeflate_compressor *libdeflate_alloc_compressor(int level) {
  pthread_once(&dfl_once, dfl_load);
  return dfl.alloc ? dfl.alloc(level) : NULL;
}

size_t libdeflate_zlib_compress(struct libdeflate_compressor *c, const void *in, size_t in_n,
                                void *out, size_t out_avail) {
  return dfl.zlib(c, in, in_n, out, out_avail); /* c came from dfl.alloc */
}

void libdeflate_free_compressor(struct libdeflate_compressor *c) {
  if (c)
    dfl.free(c);
}

/* The writer sums only what it writes to a file, which it creates only
 * once its compressor was allocated: the library is loaded by then. */
uint32_t libdeflate_crc32(uint32_t crc, const void *buf, size_t len) {
  return dfl.crc32(crc, buf, len);
}

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
#include <string.h>

#include "lazylibs.h"

#include "shim.h"

#define STR_(x) #x
#define STR(x) STR_(x) /* the name a libunwind macro stands for */

/* The library: the program's own copy if it has loaded one (*program_has
 * set; standin then leaves its settings alone), else a copy loaded here.
 * NULL, having said why and what follows (`without`) if there is none,
 * and `install` unless the process ran short of descriptors or memory:
 * under ulimit -n or -v it told the user to install a library that was
 * installed. */
static void *load(const char *lib, int *program_has, const char *without, const char *install) {
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  *program_has = h != NULL;
  if (!h)
    h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    why = why ? why : "unknown error";
    int short_of = strstr(why, "Too many open files") || strstr(why, "Cannot allocate memory") ||
                   strstr(why, "failed to map");
    shim_say("cannot load %s (%s): %s%s", lib, why, without, short_of ? "" : install);
  }
  return h;
}

/* The symbol, or NULL with the first one missing kept in *missing. */
static void *need(void *h, const char *sym, const char **missing) {
  void *p = dlsym(h, sym);
  if (!p && !*missing)
    *missing = sym;
  return p;
}

#ifndef __SANITIZE_THREAD__
rt_unw_fns rt_unw;
static pthread_once_t unw_once = PTHREAD_ONCE_INIT;

static void unw_load(void) {
  const char *lib = "libunwind.so.8";
  /* A program's own libunwind keeps its caching policy: changing it while
   * one of the program's threads unwinds could leave that thread holding
   * the global cache's lock, with every signal blocked. */
  int program_has;
  void *h = load(lib, &program_has, "call sites come from glibc's backtrace, which may be slower",
                 ". Install libunwind8 to record them as usual");
  if (!h)
    return;
  const char *missing = NULL;
  rt_unw_fns f;
  f.getcontext = (int (*)(unw_context_t *))need(h, STR(unw_tdep_getcontext), &missing);
  f.init_local = (int (*)(unw_cursor_t *, unw_context_t *))need(h, STR(unw_init_local), &missing);
  f.step = (int (*)(unw_cursor_t *))need(h, STR(unw_step), &missing);
  f.get_reg = (int (*)(unw_cursor_t *, int, unw_word_t *))need(h, STR(unw_get_reg), &missing);
  f.backtrace = (int (*)(void **, int))need(h, "unw_backtrace", &missing);
  int (*policy)(unw_addr_space_t, unw_caching_policy_t) =
      (int (*)(unw_addr_space_t, unw_caching_policy_t))need(h, STR(unw_set_caching_policy),
                                                            &missing);
  unw_addr_space_t *local = need(h, STR(unw_local_addr_space), &missing);
  if (missing) { /* the handle stays: nothing of it is used */
    shim_say("%s has no %s; call sites come from glibc's backtrace", lib, missing);
    return;
  }
  /* a per-thread cache of unwind info: no lock shared between threads on
   * the hot path, and no DWARF parsing once a call site has been seen */
  if (!program_has)
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

/* The program's own libdeflate was loaded before the shim's: its allocator
 * is left as it is. */
static int program_owns;

static void dfl_load(void) {
  const char *lib = "libdeflate.so.0";
  /* A program that loaded libdeflate itself may hold memory from its
   * allocator, which libdeflate frees with whatever allocator is set by
   * then: switching it to the shim's heap now would hand that heap the
   * program's blocks (which stops the program, t034). The writer's
   * compressor then comes from the program's allocator. */
  void *h = load(lib, &program_owns, "the trace is written uncompressed",
                 ". Install libdeflate0 to compress it");
  if (!h)
    return;
  const char *missing = NULL;
  void *a = need(h, "libdeflate_alloc_compressor", &missing);
  void *z = need(h, "libdeflate_zlib_compress", &missing);
  void *f = need(h, "libdeflate_free_compressor", &missing);
  void *s = need(h, "libdeflate_set_memory_allocator", &missing);
  void *c = need(h, "libdeflate_crc32", &missing);
  if (missing) {
    shim_say("%s has no %s: the trace is written uncompressed", lib, missing);
    return;
  }
  dfl.zlib = (size_t(*)(struct libdeflate_compressor *, const void *, size_t, void *, size_t))z;
  dfl.free = (void (*)(struct libdeflate_compressor *))f;
  dfl.set_allocator = (void (*)(void *(*)(size_t), void (*)(void *)))s;
  dfl.crc32 = (uint32_t(*)(uint32_t, const void *, size_t))c;
  if (want_malloc && !program_owns)
    dfl.set_allocator(want_malloc, want_free);
  dfl.alloc = (struct libdeflate_compressor * (*)(int)) a; /* last: the one callers test */
}

void libdeflate_set_memory_allocator(void *(*malloc_func)(size_t), void (*free_func)(void *)) {
  want_malloc = malloc_func;
  want_free = free_func;
  if (dfl.set_allocator && !program_owns)
    dfl.set_allocator(malloc_func, free_func);
}

void rt_deflate_ready(void) {
  pthread_once(&dfl_once, dfl_load);
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

/* Without libdeflate the writer still stores its chunks, and sums them
 * here, a byte at a time (zlib's CRC-32). */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    crc_table[i] = c;
  }
}

/* The writer thread calls it after it has tried to allocate its
 * compressor, which loads the library; a new file's check of the files
 * that hold its pid's name (sink.c, earlier_image) may come before: the
 * table does a header's few hundred bytes. */
uint32_t libdeflate_crc32(uint32_t crc, const void *buf, size_t len) {
  if (dfl.crc32)
    return dfl.crc32(crc, buf, len);
  pthread_once(&crc_once, crc_init);
  const unsigned char *p = buf;
  crc = ~crc;
  while (len--)
    crc = (crc >> 8) ^ crc_table[(crc ^ *p++) & 0xFF];
  return ~crc;
}

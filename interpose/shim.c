#include "shim.h"

#include <link.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "shim_alloc.h"

SHIM_TLS int shim_depth;
SHIM_TLS void *shim_frame;
SHIM_TLS const void *shim_frame_ret;
SHIM_TLS uint32_t shim_nested;
void (*shim_on_left)(void);

/* Frames further apart than this are on different stacks (shim_left_behind):
 * a thread's stack is 8 MiB by default, and a recursion between a hooked
 * call and a nested one that used more is not expected. */
#define SAME_STACK_SPAN ((uintptr_t)64 << 20)
static inline uintptr_t gap(uintptr_t a, uintptr_t b) {
  return a > b ? a - b : b - a;
}

int shim_left_behind(void *frame, const void *lib) {
  uintptr_t f = (uintptr_t)frame, top = (uintptr_t)shim_frame;
  if (top == 0 || gap(f, top) > SAME_STACK_SPAN)
    return 0;
  if (f < top) { /* deeper: nested, if the call counted is still running */
    /* called from inside the library that `lib` is in: its own call; or
     * from the shim itself (the writer's calibration of such a pass,
     * sink.c, which takes this path as they do). The objects' bounds are
     * kept per thread: with the bypass off, every nested message of a
     * call comes here (the library is pinned: shim_real) */
    static SHIM_TLS uintptr_t lib_lo, lib_hi, own_lo, own_hi;
    uintptr_t from = ((const uintptr_t *)frame)[1], at = (uintptr_t)lib;
    struct dl_find_object in;
    if (at && (at < lib_lo || at >= lib_hi) && _dl_find_object((void *)lib, &in) == 0) {
      lib_lo = (uintptr_t)in.dlfo_map_start;
      lib_hi = (uintptr_t)in.dlfo_map_end;
    }
    if (at >= lib_lo && at < lib_hi && from >= lib_lo && from < lib_hi)
      return 0;
    if (!own_hi && _dl_find_object((void *)shim_left_behind, &in) == 0) {
      own_lo = (uintptr_t)in.dlfo_map_start;
      own_hi = (uintptr_t)in.dlfo_map_end;
    }
    if (from >= own_lo && from < own_hi)
      return 0;
    const void *ret = NULL;
    struct iovec here = {&ret, sizeof ret}, there = {(void *)(top + sizeof(void *)), sizeof ret};
    if (process_vm_readv(getpid(), &here, 1, &there, 1, 0) != (ssize_t)sizeof ret ||
        ret == shim_frame_ret)
      return 0; /* or cannot tell: nested, as before */
  }
  shim_depth = 0;
  shim_frame = NULL;
  shim_frame_ret = NULL;
  if (shim_on_left)
    shim_on_left();
#if defined(__SANITIZE_ADDRESS__)
  /* the longjmp was libc's, past instrumented hook frames whose redzones
   * stay poisoned where this call's frames will be (as jpeg_obj.c's error
   * exit) */
  __asan_handle_no_return();
#endif
  return 1;
}

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

/* Keep the object that defines p loaded for good: a hook caches the real
 * function, and a library that the program dlopen'ed and later dlclose'd
 * would otherwise leave the cache pointing at unmapped memory. The object
 * is found with _dl_find_object, not dladdr: dladdr also searches the
 * object's symbols for the nearest one, ~10 us in libc, and recording a
 * small djpeg looked up a dozen functions. */
static void *pin_object(const void *p) {
  static void *libc_map;
  struct dl_find_object fo, lc;
  if (_dl_find_object((void *)p, &fo) != 0 || !fo.dlfo_link_map)
    return NULL;
  if (!libc_map && _dl_find_object((void *)getpid, &lc) == 0)
    libc_map = lc.dlfo_link_map;
  /* libc is never unloaded; and the exec and _exit wrappers, which may run
   * in a vfork child or a signal handler, then never reach dlopen. The
   * program itself (no name) is not unloaded either. */
  const char *name = fo.dlfo_link_map->l_name;
  if (fo.dlfo_link_map == libc_map || !name || !name[0])
    return NULL;
  return dlopen(name, RTLD_NOLOAD | RTLD_LAZY); /* one reference, never dropped */
}

/* `name` in a loaded object outside the global scope: a library the
 * program dlopen'ed with RTLD_LOCAL (often as the dependency of a plugin)
 * still reaches our exported hooks, since the global scope, where
 * LD_PRELOAD puts us, is searched first; RTLD_NEXT cannot see it. This
 * runs once per hook. The objects' names are copied out first: dlopen is
 * not called while dl_iterate_phdr holds the loader's list. */
#define NAMES_BYTES (64u * 1024u) /* the objects' paths, NUL after each */

typedef struct {
  char *buf;
  size_t used;
  uintptr_t self; /* the shim's load address: not listed */
} object_list;

static int list_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  object_list *o = data;
  const char *name = info->dlpi_name;
  size_t n = name ? strlen(name) + 1 : 0;
  /* not the shim itself: a dlopen of it from another thread ran its
   * constructors a second time (glibc 2.36, a preloaded object; the record
   * shim's rt_init again: its configuration read twice, its fork handlers
   * registered twice), and it has none of the functions looked for */
  if ((uintptr_t)info->dlpi_addr == o->self)
    return 0;
  /* as the loader named it (relative if dlopen was given a relative path:
   * dlopen matches that name before it looks at any file) */
  if (n > 1 && strchr(name, '/') && strstr(name, ".so") && n <= NAMES_BYTES - o->used) {
    memcpy(o->buf + o->used, name, n);
    o->used += n;
  }
  return 0;
}

SHIM_TLS int shim_exiting;

static void *find_in_local_objects(const char *name) {
  /* In the loader's _dl_fini an object whose destructors have run counts
   * as not initialised: a dlopen of it, RTLD_NOLOAD or not, runs its
   * constructors again. The record shim's own destructor looked up
   * protobuf-c functions in a program without them (vips, timing its calls
   * for record --retime), and so ran its constructor a second time, which
   * took the argv main had rewritten: the timing run's command line no
   * longer matched, and no call was retimed. */
  if (shim_exiting)
    return NULL;
  Dl_info self;
  /* libc's dlclose, not the record shim's hook, which first waits for the
   * trace writer to drain (rt_before_unload): these handles only drop the
   * reference dlopen just took, and unload nothing */
  int (*close_handle)(void *) = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
  object_list o = {shim_alloc(NAMES_BYTES), 0, 0};
  if (!o.buf || !close_handle || !dladdr((void *)find_in_local_objects, &self)) {
    shim_free(o.buf);
    return NULL;
  }
  o.self = (uintptr_t)self.dli_fbase;
  dl_iterate_phdr(list_object, &o);
  void *found = NULL;
  for (size_t at = 0; at < o.used && !found; at += strlen(o.buf + at) + 1) {
    void *h = dlopen(o.buf + at, RTLD_NOLOAD | RTLD_LAZY);
    void *p = h ? dlsym(h, name) : NULL;
    Dl_info where;
    if (p && dladdr(p, &where) && where.dli_fbase != self.dli_fbase)
      found = p;
    if (h)
      close_handle(h);
  }
  shim_free(o.buf);
  return found;
}

/* The objects outside the global scope in which earlier lookups found a
 * function (their pinned handles): the functions of one library are looked
 * up one hook at a time, and asking each of ~25 loaded objects for every
 * one took ~2.3 M instructions for libjpeg's dozen under an Imlib2 loader
 * (img2txt), inside the first replayed decode's window. The library that
 * had the first one is asked first for the next. */
#define HOMES 4
static _Atomic(void *) homes[HOMES];
static _Atomic uint64_t scans;

uint64_t shim_real_scans(void) {
  return atomic_load_explicit(&scans, memory_order_relaxed);
}

static int is_self(const void *p) {
  struct dl_find_object fo, me;
  return _dl_find_object((void *)p, &fo) == 0 && _dl_find_object((void *)is_self, &me) == 0 &&
         fo.dlfo_link_map == me.dlfo_link_map;
}

static void *find_in_homes(const char *name) {
  for (int i = 0; i < HOMES; i++) {
    void *h = atomic_load_explicit(&homes[i], memory_order_acquire);
    if (!h)
      break;
    void *p = dlsym(h, name);
    if (p && !is_self(p))
      return p;
  }
  return NULL;
}

static void add_home(void *h) {
  for (int i = 0; h && i < HOMES; i++) {
    void *cur = NULL;
    if (atomic_compare_exchange_strong(&homes[i], &cur, h) || cur == h)
      return;
  }
}

void *shim_real_opt(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (p) {
    pin_object(p);
    return p;
  }
  p = find_in_homes(name);
  if (p)
    return p;
  atomic_fetch_add_explicit(&scans, 1, memory_order_relaxed);
  if ((p = find_in_local_objects(name)) != NULL)
    add_home(pin_object(p));
  return p;
}

static int read_counts(struct dl_phdr_info *info, size_t size, void *data) {
  long long *c = data;
  int have = size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs;
  c[0] = have ? (long long)info->dlpi_adds : -1;
  c[1] = have ? (long long)info->dlpi_subs : -1;
  return 1;
}

void shim_loader_counts(long long *adds, long long *subs) {
  long long c[2] = {-1, -1};
  dl_iterate_phdr(read_counts, c);
  *adds = c[0];
  *subs = c[1];
}

static int segment_holds(struct dl_phdr_info *info, size_t size, void *addr) {
  (void)size;
  return shim_phdr_holds(info, (uintptr_t)addr);
}

/* From the loader's list of objects and their segments, which dlclose
 * changes under the same lock as it unmaps: not _dl_find_object, whose
 * table glibc 2.36 updates only after the unmap, so that a page another
 * thread mapped in between was found in the closed library (5-13 of
 * ~13,000 pages mapped at its old base while a thread loaded and unloaded
 * it; t041 replayed types built at run time in 4 runs of ~65). */
int shim_in_object(const void *addr) {
  return dl_iterate_phdr(segment_holds, (void *)addr) != 0;
}

int shim_dladdr(const void *addr, Dl_info *di) {
  struct link_map *lm = NULL;
  if (!dladdr1(addr, di, (void **)&lm, RTLD_DL_LINKMAP))
    return 0;
  return lm && lm->l_name && !lm->l_name[0] ? 2 : 1;
}

void *shim_real(const char *name) {
  void *p = shim_real_opt(name);
  if (!p) {
    shim_say("cannot find the real %s in any loaded object; is its library loaded?", name);
    abort();
  }
  return p;
}

uint64_t shim_tsc_base, shim_mono_base, shim_tsc_mult;

int shim_clock_init(const char *spec) {
  unsigned long long b, m, k;
  char tail;
  if (!spec || sscanf(spec, "%llu:%llu:%llu%c", &b, &m, &k, &tail) != 3 || k == 0 ||
      k > (1ull << 36) || __builtin_ia32_rdtsc() < b)
    return -1;
  shim_tsc_base = b;
  shim_mono_base = m;
  shim_tsc_mult = k;
  return 0;
}

void shim_fp_bind(uint8_t fp[16], int api) {
  XXH128_hash_t h = XXH3_128bits_withSeed(fp, 16, (XXH64_hash_t)api);
  memcpy(fp, &h.low64, 8);
  memcpy(fp + 8, &h.high64, 8);
}

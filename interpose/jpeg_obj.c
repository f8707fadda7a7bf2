/* jpeg_obj.c — following libjpeg decompression objects (see jpeg_obj.h). */
#include "jpeg_obj.h"

#include "api.h"
#include "pb_internal.h" /* pbw__hash64: XXH3-64, with AVX2 when the CPU has it */
#include "shim_alloc.h"

#include <dlfcn.h>
#include <pthread.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static jpg_callbacks cbs;

void jpg_set_callbacks(const jpg_callbacks *cb) {
  cbs = *cb;
}

static uint64_t now(void) {
  return cbs.now ? cbs.now() : shim_now_ns();
}

void *jpg_real(const char *name, const char *lib) {
  void *p = shim_real_opt(name);
  if (!p) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      p = dlsym(h, name);
      dlclose(h); /* the program's own reference keeps it loaded */
    }
  }
  if (!p) {
    shim_say("cannot find the real %s in %s; is the library loaded?", name, lib);
    abort();
  }
  return p;
}

/* ---- buffers ------------------------------------------------------------ */

static int buf_room(jpg_buf *b, size_t n) {
  if (b->failed)
    return -1;
  if (b->len + n <= b->cap) {
    if (b->len + n > b->ready)
      shim_populate_ahead(b->p, &b->ready, b->len + n, b->cap);
    return 0;
  }
  size_t cap = b->cap ? b->cap : 65536;
  while (cap < b->len + n)
    cap *= 2;
  uint8_t *p = shim_realloc(b->p, cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  b->ready = 0; /* the block's own mark says how far it is mapped */
  shim_populate_ahead(b->p, &b->ready, b->len + n, b->cap);
  return 0;
}

/* jpg_buf_put of a piece of a few bytes whose room is ready, without the
 * calls: a source that gives the library a byte a fill (poppler's) had
 * record keep each byte through jpg_buf_put, buf_room and memcpy, inside
 * the decode's timed window. */
/* Whether n more bytes fit in b's mapped room (no call needed to put them). */
static inline int buf_ready(const jpg_buf *b, size_t n) {
  return !b->failed && b->len + n <= b->ready;
}

static inline void buf_put_small(jpg_buf *b, const uint8_t *p, size_t n) {
  if (n > 16 || !buf_ready(b, n)) {
    jpg_buf_put(b, p, n);
    return;
  }
  uint8_t *q = b->p + b->len;
  for (size_t i = 0; i < n; i++)
    q[i] = p[i];
  b->len += n;
}

int jpg_buf_put(jpg_buf *b, const void *p, size_t n) {
  if (n == 0)
    return b->failed ? -1 : 0;
  if (buf_room(b, n) != 0)
    return -1;
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

int jpg_buf_zero(jpg_buf *b, size_t n) {
  if (buf_room(b, n) != 0)
    return -1;
  memset(b->p + b->len, 0, n);
  b->len += n;
  return 0;
}

void jpg_buf_free(jpg_buf *b) {
  shim_free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- object table --------------------------------------------------------- */

/* Open addressing, keys compared and claimed with atomics. A key is only
 * ever looked up by the thread that uses that object, so an entry is
 * complete before anyone can find it. */
#define OBJ_SLOTS 4096u
#define TOMB ((uintptr_t)1)

typedef struct {
  _Atomic uintptr_t key;
  jpg_obj *_Atomic obj;
} obj_slot;

static obj_slot objs[OBJ_SLOTS];

static uint32_t ptr_hash(const void *p) {
  uint64_t x = (uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (uint32_t)x;
}

static obj_slot *find_slot(const void *key) {
  uint32_t h = ptr_hash(key);
  for (uint32_t i = 0; i < OBJ_SLOTS; i++) {
    obj_slot *s = &objs[(h + i) & (OBJ_SLOTS - 1)];
    uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
    if (k == (uintptr_t)key)
      return s;
    if (k == 0)
      return NULL;
  }
  return NULL;
}

jpg_obj *jpg_obj_get(j_decompress_ptr cinfo, int create) {
  obj_slot *s = find_slot(cinfo);
  if (s)
    return atomic_load_explicit(&s->obj, memory_order_acquire);
  if (!create)
    return NULL;
  jpg_obj *o = shim_zalloc(sizeof *o);
  if (!o)
    return NULL;
  o->cinfo = cinfo;
  uint32_t h = ptr_hash(cinfo);
  for (uint32_t i = 0; i < OBJ_SLOTS; i++) {
    obj_slot *t = &objs[(h + i) & (OBJ_SLOTS - 1)];
    uintptr_t k = atomic_load_explicit(&t->key, memory_order_relaxed);
    if ((k == 0 || k == TOMB) && atomic_compare_exchange_strong(&t->key, &k, (uintptr_t)cinfo)) {
      atomic_store_explicit(&t->obj, o, memory_order_release);
      return o;
    }
  }
  shim_free(o);
  return NULL;
}

/* An object other than `self` whose decode left `src` wrapped. */
static jpg_obj *by_src(const struct jpeg_source_mgr *src, const jpg_obj *self) {
  for (uint32_t i = 0; i < OBJ_SLOTS; i++) {
    uintptr_t k = atomic_load_explicit(&objs[i].key, memory_order_acquire);
    if (k == 0 || k == TOMB)
      continue;
    jpg_obj *o = atomic_load_explicit(&objs[i].obj, memory_order_acquire);
    if (o && o != self && o->src_wrapped && o->src == src)
      return o;
  }
  return NULL;
}

/* ---- error-manager registry ---------------------------------------------- */

/* Error managers are often shared (one per program, or one per thread for
 * several objects), and compressors use them too: the program's functions
 * are kept here, by error manager, with a count of the decodes using the
 * wrappers. Only wrap and unwrap (once per decode) and wrappers that find
 * no object take the lock. */
#define ERR_SLOTS 256

typedef struct {
  struct jpeg_error_mgr *err;
  int refs;
  void (*emit)(j_common_ptr, int);
  void (*exit)(j_common_ptr);
} err_slot;

static err_slot errs[ERR_SLOTS];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static void (*std_emit)(j_common_ptr, int);
static void (*std_exit)(j_common_ptr);

static void err_lock_prepare(void) {
  pthread_mutex_lock(&err_lock);
}
static void err_lock_release(void) {
  pthread_mutex_unlock(&err_lock);
}

__attribute__((constructor)) static void jpg_obj_init(void) {
  pthread_atfork(err_lock_prepare, err_lock_release, err_lock_release);
}

static err_slot *err_find(const struct jpeg_error_mgr *err, int create) {
  err_slot *free_slot = NULL;
  for (int i = 0; i < ERR_SLOTS; i++) {
    if (errs[i].err == err)
      return &errs[i];
    if (!errs[i].err && !free_slot)
      free_slot = &errs[i];
  }
  if (create && free_slot) {
    memset(free_slot, 0, sizeof *free_slot);
    free_slot->err = (struct jpeg_error_mgr *)err;
  }
  return create ? free_slot : NULL;
}

static void w_emit(j_common_ptr c, int level);
static void w_exit(j_common_ptr c);

/* The library's own handlers, for the impossible case of a wrapper that
 * finds no record of the program's functions. */
static void load_std_once(void) {
  JPG_REAL(real_std, jpeg_std_error, JPG_LIBJPEG);
  static struct jpeg_error_mgr e;
  real_std(&e);
  std_exit = e.error_exit;
  std_emit = e.emit_message;
}

static void load_std(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, load_std_once);
}

static void registry_get(const struct jpeg_error_mgr *err, void (**emit)(j_common_ptr, int),
                         void (**ex)(j_common_ptr)) {
  pthread_mutex_lock(&err_lock);
  err_slot *s = err_find(err, 0);
  *emit = s ? s->emit : NULL;
  *ex = s ? s->exit : NULL;
  pthread_mutex_unlock(&err_lock);
  if (!*emit || !*ex) {
    load_std();
    if (!*emit)
      *emit = err->emit_message != w_emit ? err->emit_message : std_emit;
    if (!*ex)
      *ex = err->error_exit != w_exit ? err->error_exit : std_exit;
  }
}

static int err_wrap(jpg_obj *o) {
  struct jpeg_error_mgr *err = o->cinfo->err;
  if (!err)
    return -1;
  if (o->err_wrapped && o->err == err && err->error_exit == w_exit && err->emit_message == w_emit)
    return 0;
  pthread_mutex_lock(&err_lock);
  err_slot *s = err_find(err, 1);
  if (!s) {
    pthread_mutex_unlock(&err_lock);
    return -1;
  }
  if (err->error_exit != w_exit) {
    s->exit = err->error_exit;
    err->error_exit = w_exit;
  }
  if (err->emit_message != w_emit) {
    s->emit = err->emit_message;
    err->emit_message = w_emit;
  }
  if (!(o->err_wrapped && o->err == err))
    s->refs++;
  o->orig_exit = s->exit;
  o->orig_emit = s->emit;
  pthread_mutex_unlock(&err_lock);
  if (!o->orig_exit || !o->orig_emit) {
    load_std();
    if (!o->orig_exit)
      o->orig_exit = std_exit;
    if (!o->orig_emit)
      o->orig_emit = std_emit;
  }
  o->err = err;
  o->err_wrapped = 1;
  return 0;
}

static void err_unwrap(jpg_obj *o) {
  if (!o->err_wrapped)
    return;
  struct jpeg_error_mgr *err = o->err;
  pthread_mutex_lock(&err_lock);
  err_slot *s = err_find(err, 0);
  if (s && --s->refs <= 0) {
    if (err->error_exit == w_exit)
      err->error_exit = s->exit;
    if (err->emit_message == w_emit)
      err->emit_message = s->emit;
    memset(s, 0, sizeof *s);
  }
  pthread_mutex_unlock(&err_lock);
  o->err_wrapped = 0;
}

/* ---- source wrapping ------------------------------------------------------ */

static void w_init(j_decompress_ptr cinfo);
static boolean w_fill(j_decompress_ptr cinfo);
static void w_skip(j_decompress_ptr cinfo, long n);

static void src_unwrap(jpg_obj *o) {
  if (!o->src_wrapped)
    return;
  struct jpeg_source_mgr *s = o->src;
  if (s->init_source == w_init)
    s->init_source = o->orig_init;
  if (s->fill_input_buffer == w_fill)
    s->fill_input_buffer = o->orig_fill;
  if (s->skip_input_data == w_skip)
    s->skip_input_data = o->orig_skip;
  o->src_wrapped = 0;
}

/* Take one function pointer of the program's source: from the struct, or
 * from the object that left it wrapped. */
#define TAKE(field, wrapper, orig)                                                                 \
  do {                                                                                             \
    if (s->field != wrapper) {                                                                     \
      o->orig = s->field;                                                                          \
      s->field = wrapper;                                                                          \
    } else if (!mine) {                                                                            \
      if (!other)                                                                                  \
        other = by_src(s, o);                                                                      \
      if (!other)                                                                                  \
        return -1;                                                                                 \
      o->orig = other->orig;                                                                       \
    }                                                                                              \
  } while (0)

static int src_wrap(jpg_obj *o) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  if (!s)
    return -1;
  int mine = o->src_wrapped && o->src == s;
  if (mine && s->init_source == w_init && s->fill_input_buffer == w_fill &&
      s->skip_input_data == w_skip)
    return 0;
  if (o->src_wrapped && o->src != s)
    o->src_wrapped = 0; /* the program moved to another source: leave the old one */
  jpg_obj *other = NULL;
  TAKE(init_source, w_init, orig_init);
  TAKE(fill_input_buffer, w_fill, orig_fill);
  TAKE(skip_input_data, w_skip, orig_skip);
  if (other)
    other->src_wrapped = 0; /* this object restores them now */
  o->src = s;
  o->src_wrapped = 1;
  return 0;
}

void jpg_rewrap(jpg_obj *o) {
  if (o->phase == JPG_IDLE)
    return;
  if (o->src_wrapped && src_wrap(o) != 0)
    src_unwrap(o);
  if (o->err_wrapped && err_wrap(o) != 0)
    err_unwrap(o);
}

/* ---- capture -------------------------------------------------------------- */

static int in_buffer(const jpg_obj *o, const JOCTET *p) {
  return o->last && (uintptr_t)p >= (uintptr_t)o->last && (uintptr_t)p <= (uintptr_t)o->buf_end;
}

static void mark_buffer(jpg_obj *o) {
  const struct jpeg_source_mgr *s = o->cinfo->src;
  o->last = s->next_input_byte;
  /* in integers: once its term_source ran, a program's source may hold
   * anything (ExactImage's: a pointer and a count whose sum overflows,
   * undefined as pointer arithmetic); such a buffer is taken as empty */
  uintptr_t end = (uintptr_t)s->next_input_byte + s->bytes_in_buffer;
  o->buf_end = end >= (uintptr_t)o->last ? (const JOCTET *)end : o->last;
}

/* Keep what the library consumed of the current buffer. */
static void keep_consumed(jpg_obj *o) {
  const JOCTET *nib = o->cinfo->src->next_input_byte;
  if (in_buffer(o, nib))
    jpg_buf_put(&o->cap, o->last, (size_t)(nib - o->last));
  mark_buffer(o);
}

uint64_t jpg_data_consumed(const jpg_obj *o) {
  uint64_t n = o->cap.len > o->header_len ? o->cap.len - o->header_len : 0;
  if (o->capture && !o->overlay && o->cinfo->src && in_buffer(o, o->cinfo->src->next_input_byte))
    n += (uint64_t)(o->cinfo->src->next_input_byte - o->last);
  return n;
}

void jpg_header_done(jpg_obj *o) {
  jpg_probe h;
  int known = !o->cap.failed && jpg_probe_header(o->cap.p, o->cap.len, &h) == 0;
  int arith = known && (h.sof == 0xC9 || h.sof == 0xCA || h.sof == 0xCB || h.sof == 0xCD ||
                        h.sof == 0xCE || h.sof == 0xCF);
  o->own_q = known && h.dqt;
  o->own_h = known && (h.dht || arith);
  o->inherits = (o->image_q && !o->own_q) || (o->image_h && !o->own_h);
  o->image_q |= !known || h.dqt;
  o->image_h |= !known || h.dht;
  o->header_len = o->cap.len;
  o->frame_w = o->cinfo->image_width;
  o->frame_h = o->cinfo->image_height;
}

/* Record: what the program offers first after its source suspended
 * (o->last..buf_end, once there is something): the bytes the library
 * left unread again, as the suspension protocol asks, or others in their
 * place (jpg_drop; the first is kept). */
static void unread_dropped(jpg_obj *o) {
  if (o->unread_len && o->cap.len == o->unread_at) /* nothing used since */
    o->drop = (jpg_drop){o->unread_at, o->unread_len, pbw__hash64(o->unread, o->unread_len)};
  o->unread_len = 0;
}

static void unread_check(jpg_obj *o) {
  if (!o->unread_len || !o->last || (uintptr_t)o->buf_end <= (uintptr_t)o->last)
    return;
  size_t n = (size_t)(o->buf_end - o->last);
  if (n > o->unread_len)
    n = o->unread_len;
  if (!o->drop.len && memcmp(o->last, o->unread, n) != 0)
    unread_dropped(o);
  o->unread_len = 0;
}

void jpg_unread_final(jpg_obj *o) {
  unread_dropped(o);
}

/* Record: the source suspended with the library standing at `at` of the
 * buffer the program offered last: keep what it left unread. */
static void unread_keep(jpg_obj *o, const JOCTET *at) {
  o->unread_len = 0;
  if (o->drop.len || o->phase < JPG_STARTED || !in_buffer(o, at))
    return;
  size_t n = (size_t)(o->buf_end - at);
  if (!n || n > JPG_UNREAD_MAX)
    return;
  uint8_t *p = shim_realloc(o->unread, n);
  if (!p)
    return;
  memcpy(p, at, n);
  o->unread = p;
  o->unread_len = n;
  o->unread_at = o->cap.len;
}

void jpg_sync(jpg_obj *o) {
  if (o && o->capture && !o->overlay && o->cinfo->src)
    keep_consumed(o);
}

/* The object whose decode wrapped cinfo's source, for a wrapper. */
static jpg_obj *src_owner(j_decompress_ptr cinfo) {
  jpg_obj *o = jpg_obj_get(cinfo, 0);
  if (o && o->src_wrapped && o->src == cinfo->src)
    return o;
  o = by_src(cinfo->src, NULL);
  if (o)
    return o;
  shim_say("a JPEG source manager wrapped by standin lost its original functions; stopping");
  abort();
}

/* Record: whether this call of the program's source is timed (jpg_source_ns),
 * and its time. */
#define SRC_TIME_ALL 64
#define SRC_SLOW_NS 1000

/* One in 64 at random, not every 64th: a source whose fills are cheap but
 * for a refill every so many bytes (poppler's one-byte fills from a
 * stream that reads 256 bytes at a time) would be timed at the same phase
 * every time, and its refills never, or always. */
static inline int src_timing(jpg_obj *o) {
  if (!cbs.time_source || !o->in_call || o->phase == JPG_IDLE)
    return 0;
  if (o->src_calls++ < SRC_TIME_ALL || o->src_ns >= (uint64_t)o->src_timed * SRC_SLOW_NS)
    return 1;
  uint32_t x = o->src_rand ? o->src_rand : 0x9E3779B9u; /* xorshift32 */
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  o->src_rand = x;
  return (x & 63) == 0;
}

/* What timing a callback that does nothing measures (the clock reads, the
 * call through a pointer, as in the wrappers) is timed beside the timed
 * callbacks, in the same conditions, and its median taken off them. The
 * reads are fenced (src_clock). jpegdec's one-byte fills of a 4000x3000
 * image (1.8 million; perf: 8.7 ms of c_fill, under load) read 22 ms with one plain
 * read's cost taken off each, 0.4-0.9 ms with an empty call's (the fill
 * ran under the reads' latency), 8.6-9.4 ms fenced. Not beside callbacks
 * of 1 us or more on average, where the difference is lost in their time. */
static void src_nothing(j_decompress_ptr cinfo) {
  __asm__ volatile("" ::"r"(cinfo) : "memory");
}
static void (*volatile src_nothing_ptr)(j_decompress_ptr) = src_nothing;

/* A clock read that the work around it cannot overlap (lfence before and
 * after rdtsc): a callback of a few ns is then timed as it runs alone. In
 * ns; the shim's clock without the TSC. */
static inline uint64_t src_clock(void) {
  if (SHIM_UNLIKELY(shim_tsc_mult == 0))
    return now();
  __builtin_ia32_lfence();
  uint64_t t = __builtin_ia32_rdtsc();
  __builtin_ia32_lfence();
  return (uint64_t)(((unsigned __int128)t * shim_tsc_mult) >> 32);
}

static inline void src_timed(jpg_obj *o, uint64_t t0) {
  uint64_t t1 = src_clock();
  o->src_ns += t1 - t0;
  o->src_group_ns[o->src_timed % SRC_GROUPS] += t1 - t0;
  o->src_timed++;
  if (o->src_ns >= (uint64_t)o->src_timed * SRC_SLOW_NS)
    return;
  if (o->src_zeros == SRC_ZEROS)
    return;
  t1 = src_clock();
  JPG_CALLBACK(src_nothing_ptr(o->cinfo));
  uint64_t z = src_clock() - t1;
  o->src_zero[o->src_zeros++] = (uint16_t)(z < UINT16_MAX ? z : UINT16_MAX);
}

/* The median of the empty callbacks timed (an interrupt in one of them
 * must not count: their mean moved a decode's fills by milliseconds). */
static uint64_t src_zero_median(const jpg_obj *o) {
  uint16_t v[SRC_ZEROS];
  unsigned n = o->src_zeros;
  memcpy(v, o->src_zero, n * sizeof v[0]);
  for (unsigned i = 1; i < n; i++)
    for (unsigned k = i; k > 0 && v[k] < v[k - 1]; k--) {
      uint16_t t = v[k];
      v[k] = v[k - 1];
      v[k - 1] = t;
    }
  return n ? v[n / 2] : 0;
}

uint64_t jpg_source_ns(const jpg_obj *o) {
  if (!o->src_timed)
    return 0;
  double zero = (double)src_zero_median(o);
  if (o->src_timed == o->src_calls) { /* every one timed */
    double all = (double)o->src_ns - zero * o->src_timed;
    return all > 0 ? (uint64_t)all : 0;
  }
  /* A sample, whose mean stands for every call: the median of its groups'
   * means (the timed calls dealt round), as one call that an interrupt or
   * the VM held for 20 us among 6,000 of 15 ns moves the mean by a third
   * (by the mean, a pdftoppm decode's fills read 0.9 to 4.1 ms from run to
   * run; so, 22-31% of the decode in 9 runs, as its time moved); calls
   * that take long in turn (poppler's refill every 256 bytes, 23 of the
   * 6,000) are in every group: with 32 groups, half had none, and the
   * fills read 10% less. */
  double m[SRC_GROUPS];
  int n = 0;
  for (unsigned g = 0; g < SRC_GROUPS; g++) {
    uint32_t k = o->src_timed / SRC_GROUPS + (g < o->src_timed % SRC_GROUPS);
    if (!k)
      continue;
    double v = (double)o->src_group_ns[g] / k;
    int i = n++;
    for (; i > 0 && m[i - 1] > v; i--)
      m[i] = m[i - 1];
    m[i] = v;
  }
  double mean = (n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2) - zero;
  return mean > 0 ? (uint64_t)(mean * o->src_calls) : 0;
}

static void w_init(j_decompress_ptr cinfo) {
  jpg_obj *o = src_owner(cinfo);
  void (*init)(j_decompress_ptr) = o->orig_init;
  int timed = src_timing(o);
  uint64_t t0 = timed ? src_clock() : 0;
  o->in_src++;
  JPG_CALLBACK(init(cinfo));
  o->in_src--;
  if (timed)
    src_timed(o, t0);
  if (o->cinfo == cinfo)
    mark_buffer(o); /* a source may set up its buffer here */
}

static boolean feed_fill(jpg_obj *o);
static void feed_skip(jpg_obj *o, long n);

static boolean w_fill(j_decompress_ptr cinfo) {
  jpg_obj *o = src_owner(cinfo);
  if (o->cinfo != cinfo) { /* another object's leftovers: just pass */
    boolean r;
    boolean (*fill)(j_decompress_ptr) = o->orig_fill;
    JPG_CALLBACK(r = fill(cinfo));
    return r;
  }
  if (o->overlay)
    return feed_fill(o);
  if (o->starve)
    return FALSE;
  /* The library asks for more only when it used up the buffer. The program
   * may refill in place (stdio does), so keep the bytes first. */
  size_t mark = o->cap.len;
  int keep = o->capture && !o->in_skip && o->last;
  if (keep && (uintptr_t)o->buf_end >= (uintptr_t)o->last)
    buf_put_small(&o->cap, o->last, (size_t)(o->buf_end - o->last));
  /* where the library stands: a suspension backs up to it (the decoders
   * write their position back only at a unit they finished) */
  const JOCTET *at = cinfo->src->next_input_byte;
  boolean r;
  int timed = src_timing(o);
  uint64_t t0 = timed ? src_clock() : 0;
  o->in_src++;
  JPG_CALLBACK(r = o->orig_fill(cinfo));
  o->in_src--;
  if (timed)
    src_timed(o, t0);
  if (!r) {
    /* suspended: the bytes up to that position were used, the rest will
     * be read again. Kept now: a source may forget its buffer when it
     * suspends (Chromium's points it at nothing and resumes from an offset
     * of its own), and 388 bytes of scan data went missing from its
     * requests. */
    if (keep && !o->cap.failed) {
      o->cap.len = mark;
      if (in_buffer(o, at)) {
        jpg_buf_put(&o->cap, o->last, (size_t)(at - o->last));
        o->last = at;
        unread_keep(o, at);
      }
    }
    return r;
  }
  mark_buffer(o);
  if (o->capture && o->unread_len)
    unread_check(o);
  return r;
}

static void w_skip(j_decompress_ptr cinfo, long n) {
  jpg_obj *o = src_owner(cinfo);
  if (o->cinfo != cinfo) {
    void (*skip)(j_decompress_ptr, long) = o->orig_skip;
    JPG_CALLBACK(skip(cinfo, n));
    return;
  }
  if (o->overlay) {
    feed_skip(o, n);
    return;
  }
  if (o->capture && n > 0) {
    keep_consumed(o);
    jpg_buf_zero(&o->cap, (size_t)n);
  }
  o->in_skip = 1;
  int timed = src_timing(o);
  uint64_t t0 = timed ? src_clock() : 0;
  o->in_src++;
  JPG_CALLBACK(o->orig_skip(cinfo, n));
  o->in_src--;
  if (timed)
    src_timed(o, t0);
  o->in_skip = 0;
  mark_buffer(o);
}

/* ---- messages ------------------------------------------------------------- */

static void msg_add(jpg_obj *o, const struct jpeg_error_mgr *err, int level, uint32_t row,
                    int phase, uint64_t pos) {
  if (o->nmsgs == o->msg_cap) {
    size_t cap = o->msg_cap ? o->msg_cap * 2 : 16;
    jpg_msg *m = shim_realloc(o->msgs, cap * sizeof *m);
    if (!m)
      return;
    o->msgs = m;
    o->msg_cap = cap;
  }
  jpg_msg *m = &o->msgs[o->nmsgs++];
  memset(m, 0, sizeof *m);
  m->row = row;
  m->phase = (uint16_t)phase;
  m->level = (int16_t)level;
  m->code = err->msg_code;
  memcpy(m->parm, &err->msg_parm, sizeof m->parm);
  m->pos = pos;
}

static void w_emit(j_common_ptr c, int level) {
  jpg_obj *o = c->is_decompressor ? jpg_obj_get((j_decompress_ptr)c, 0) : NULL;
  if (o && o->err_wrapped && o->err == c->err) {
    if (o->draining) { /* replay: held back until the library gets there */
      msg_add(o, c->err, level, 0, 0, o->drained.len);
      return;
    }
    /* Trace messages above trace_level are ignored by convention (the
     * library's own emit_message drops them): only the others are kept. */
    int effect = level < 0 || level <= c->err->trace_level;
    if (o->in_call && o->log_phase && effect)
      msg_add(o, c->err, level, o->cinfo->output_scanline, o->log_phase, jpg_data_consumed(o));
    void (*emit)(j_common_ptr, int) = o->orig_emit;
#if defined(__SANITIZE_ADDRESS__)
    /* A program may make a warning fatal and longjmp from here past every
     * hook frame (GraphicsMagick, jpegdec -strict), with libc's longjmp,
     * as from error_exit (w_exit): the frames' redzones would stay
     * poisoned under the next call's (t718, a replayed decode answered as
     * failed, then jpeg_destroy_decompress). */
    if (level < 0)
      __asan_handle_no_return();
#endif
    JPG_CALLBACK(emit(c, level));
    return;
  }
  void (*emit)(j_common_ptr, int), (*ex)(j_common_ptr);
  registry_get(c->err, &emit, &ex);
  JPG_CALLBACK(emit(c, level));
}

static void w_exit(j_common_ptr c) {
  jpg_obj *o = c->is_decompressor ? jpg_obj_get((j_decompress_ptr)c, 0) : NULL;
  if (o && o->draining && o->drain_jb)
    longjmp(*o->drain_jb, 1); /* replay: the source failed while draining */
  void (*ex)(j_common_ptr);
  if (o && o->err_wrapped && o->err == c->err) {
    ex = o->orig_exit;
  } else {
    void (*emit)(j_common_ptr, int);
    registry_get(c->err, &emit, &ex);
  }
  if (o && o->phase != JPG_IDLE) {
    o->src_error = o->in_src > 0;
    if (cbs.on_error)
      cbs.on_error(o, 0);
    jpg_decode_end(o);
  }
  if (o)
    o->in_call = 0;
  /* The program's handler usually longjmps past every hook frame. */
  shim_depth = 0;
  shim_frame = NULL;
#if defined(__SANITIZE_ADDRESS__)
  /* In a program built without ASan that longjmp is libc's, not the
   * runtime's (libc comes before the runtime the preloaded shim pulls in),
   * so the hook frames it leaves kept their redzones poisoned: a later
   * decode's frames there met them (t712, jpeginfo, a corrupt file then
   * another, once rp_ticket grew by 8 bytes). */
  __asan_handle_no_return();
#endif
  ex(c);
}

void jpg_emit(jpg_obj *o, const jpg_msg *m) {
  struct jpeg_error_mgr *err = o->cinfo->err;
  void (*emit)(j_common_ptr, int) = o->err_wrapped ? o->orig_emit : err->emit_message;
  err->msg_code = m->code;
  memcpy(&err->msg_parm, m->parm, sizeof m->parm);
  JPG_CALLBACK(emit((j_common_ptr)o->cinfo, m->level));
}

/* ---- decode lifecycle ----------------------------------------------------- */

int jpg_decode_begin(jpg_obj *o) {
  o->phase = JPG_HEADER;
  o->passthrough = 0;
  o->reason = JPG_NO_NONE;
  o->t_first = o->busy_ns = 0;
  o->timed = 0;
  o->nwork = 0;
  o->src_calls = o->src_timed = o->src_rand = o->src_zeros = 0;
  o->src_ns = 0;
  memset(o->src_group_ns, 0, sizeof o->src_group_ns);
  o->cap.len = 0;
  o->cap.failed = 0;
  o->nmsgs = o->msg_next = 0;
  o->log_phase = 0;
  o->in_src = 0;
  o->header_len = 0;
  if (err_wrap(o) != 0 || src_wrap(o) != 0) {
    err_unwrap(o);
    o->passthrough = 1;
    o->reason = JPG_NO_UNTRACKED;
    return -1;
  }
  o->capture = 1;
  o->last = o->buf_end = NULL;
  return 0;
}

static void overlay_off(jpg_obj *o);

static void starve_off(jpg_obj *o) {
  o->cinfo->src->next_input_byte = o->starve_nib;
  o->cinfo->src->bytes_in_buffer = o->starve_bib;
  o->starve = 0;
}

boolean jpg_start_starved(jpg_obj *o) {
  JPG_REAL(real_start, jpeg_start_decompress, JPG_LIBJPEG);
  struct jpeg_source_mgr *s = o->cinfo->src;
  o->starve_nib = s->next_input_byte;
  o->starve_bib = s->bytes_in_buffer;
  o->starve = 1;
  s->bytes_in_buffer = 0; /* the library asks for data at once, and gets none */
  boolean r = real_start(o->cinfo);
  starve_off(o);
  return r;
}

void jpg_decode_end(jpg_obj *o) {
  if (o->starve)
    starve_off(o);
  if (o->overlay)
    overlay_off(o);
  src_unwrap(o);
  err_unwrap(o);
  if (cbs.free_ext && o->ext)
    cbs.free_ext(o);
  o->ext = NULL;
  jpg_buf_free(&o->cap);
  jpg_buf_free(&o->drained);
  shim_free(o->unread);
  o->unread = NULL;
  o->unread_len = 0;
  o->drop = (jpg_drop){0, 0, 0};
  shim_free(o->msgs);
  o->msgs = NULL;
  o->nmsgs = o->msg_cap = o->msg_next = 0;
  o->phase = JPG_IDLE;
  o->capture = o->passthrough = o->draining = o->feeding = o->feed_done = 0;
  o->log_phase = 0;
  o->drain_jb = NULL;
  o->last = o->buf_end = NULL;
}

void jpg_obj_forget(j_decompress_ptr cinfo) {
  obj_slot *s = find_slot(cinfo);
  if (!s)
    return;
  jpg_obj *o = atomic_load(&s->obj);
  if (o) {
    jpg_decode_end(o);
    jpg_buf_free(&o->tables);
    shim_free(o);
  }
  atomic_store(&s->obj, NULL);
  atomic_store_explicit(&s->key, TOMB, memory_order_release);
}

/* ---- outermost calls ------------------------------------------------------ */

void jpg_check_stale(jpg_obj *o) {
  if (!o || !o->in_call)
    return;
  o->in_call = 0;
  if (o->phase != JPG_IDLE) {
    o->src_error = 0;
    if (cbs.on_error)
      cbs.on_error(o, 1);
    jpg_decode_end(o);
  }
}

int jpg_outermost(void *frame) {
  if (shim_depth == 0)
    return 1;
  if (shim_frame && (uintptr_t)frame >= (uintptr_t)shim_frame) {
    /* a call was left by a longjmp the shim did not see */
    shim_depth = 0;
    shim_frame = NULL;
    if (shim_on_left)
      shim_on_left();
    return 1;
  }
  return 0;
}

static void overlay_on(jpg_obj *o);

void jpg_enter(jpg_obj *o, void *frame) {
  shim_depth++;
  shim_frame = frame;
  shim_frame_ret = ((const void *const *)frame)[1];
  if (!o)
    return;
  o->in_call = 1;
  o->draining = 0; /* left over only if a callback longjmped out of a drain */
  o->drain_jb = NULL;
  /* the shim's own work first: the clock starts at the library call, or a
   * decode's time holds it once for each of its calls (a row at a time:
   * hundreds) */
  if (o->phase != JPG_IDLE) {
    jpg_rewrap(o);
    if (o->feeding && !o->feed_done)
      overlay_on(o);
    if (o->capture && o->src_wrapped && !o->overlay) {
      mark_buffer(o);
      unread_check(o);
    }
  }
  o->t_in = now();
  if (!o->t_first)
    o->t_first = o->t_in;
}

/* What one clock read adds to the interval it closes (measured once): a
 * decode's time is the sum of its library calls' intervals, each holding
 * one, where record takes one off a call's time (record/sink.c
 * wr_calibrate). The calls after a decode's first give theirs back here:
 * a 333x251 decode a row at a time is ~260 calls. */
static _Atomic uint64_t read_ns = UINT64_MAX;

static uint64_t clock_read_ns(void) {
  uint64_t r = atomic_load_explicit(&read_ns, memory_order_relaxed);
  if (r == UINT64_MAX) {
    uint64_t t = 0;
    r = SHIM_MIN_PER_ITER(200, t += now());
    (void)t;
    atomic_store_explicit(&read_ns, r, memory_order_relaxed);
  }
  return r;
}

void jpg_leave(jpg_obj *o) {
  if (o) {
    o->t_out = now();
    uint64_t ns = o->t_out - o->t_in, read = o->timed++ ? clock_read_ns() : 0;
    jpg_busy(o, ns > read ? ns - read : 0);
    if (o->phase != JPG_IDLE) {
      jpg_sync(o);
      if (o->overlay)
        overlay_off(o);
    }
    o->in_call = 0;
  }
  shim_depth--;
  shim_frame = NULL;
}

void jpg_busy(jpg_obj *o, uint64_t ns) {
  o->busy_ns += ns;
  if (!cbs.thread)
    return;
  uint32_t me = cbs.thread();
  int i = 0;
  while (i < o->nwork && o->work[i].thread != me)
    i++;
  if (i == o->nwork) {
    if (i == JPG_WORK_THREADS)
      return;
    o->work[o->nwork++] = (jpg_work){me, o->t_in, 0, 0};
  }
  o->work[i].ns += ns;
  if (o->phase >= JPG_STARTED && o->log_phase != JPG_PHASE_FINISH)
    o->work[i].image_ns += ns;
}

/* The thread that made the image: the most time in the calls that decode
 * (jpeg_start_decompress, the rows), then in all calls. Not all calls: a
 * thread that only reads the header and finishes is not the decode's
 * even when it was preempted inside those calls for longer than the
 * decode took (t231 under load). */
const jpg_work *jpg_main_work(const jpg_obj *o) {
  const jpg_work *best = NULL;
  for (int i = 0; i < o->nwork; i++) {
    const jpg_work *w = &o->work[i];
    if (!best || w->image_ns > best->image_ns ||
        (w->image_ns == best->image_ns && w->ns > best->ns))
      best = w;
  }
  return best;
}

/* ---- replay: drain ---------------------------------------------------------- */

/* Pieces of at most this many bytes may wait for the scanner. */
#define DRAIN_SMALL 64
/* and this many bytes wait at most */
#define DRAIN_LAG_MAX 4096

/* Take a small piece p[0..n) into the drained bytes alone, when none of
 * it is 0xFF and its room is ready; 0 otherwise (nothing taken). A source
 * that hands the library a byte a fill (poppler's DCTStream) otherwise
 * paid, for every byte, a scanner call, its memchr and two buffer
 * appends: 5.6 ms of pdftoppm's 8 ms drain of a 380 KB image. */
static int drain_small(jpg_buf *d, const uint8_t *p, size_t n) {
  if (n > DRAIN_SMALL || !buf_ready(d, n))
    return 0;
  uint8_t *q = d->p + d->len;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == 0xFF)
      return 0; /* what it wrote past d->len is not taken */
    q[i] = p[i];
  }
  d->len += n;
  return 1;
}

/* Feed the scanner the drained bytes it has not seen: none of them can
 * end the datastream, so it takes them all. */
static void drain_catch_up(jpg_obj *o, jpg_scan *sc) {
  if (o->drain_lag) {
    jpg_scan_feed(sc, o->drained.p + o->drained.len - o->drain_lag, o->drain_lag);
    o->drain_lag = 0;
  }
}

int jpg_drain(jpg_obj *o, jpg_scan *sc) {
  jmp_buf jb;
  int depth = shim_depth;
  void *frame = shim_frame;
  const void *frame_ret = shim_frame_ret;
  struct jpeg_source_mgr *s = o->cinfo->src;
  o->drain_jb = &jb;
  o->draining = 1;
  o->drain_lag = 0;
  if (setjmp(jb)) {
    drain_catch_up(o, sc);
    o->draining = 0;
    o->drain_jb = NULL;
    shim_depth = depth;
    shim_frame = frame;
    shim_frame_ret = frame_ret;
    return JPG_DRAIN_ERROR;
  }
  volatile unsigned empty = 0;
  o->drain_seg = 0;
  o->drain_end = NULL;
  /* the scanner sees a piece later only if it cannot end there: 0 while
   * it may, and fed up to date then */
  int may_wait = !jpg_scan_may_end(sc);
  for (;;) {
    if (s->bytes_in_buffer == 0) {
      boolean r;
      JPG_CALLBACK(r = o->orig_fill(o->cinfo));
      if (!r || ++empty > (1u << 20)) { /* suspended (or a source that never gives) */
        drain_catch_up(o, sc);
        o->draining = 0;
        o->drain_jb = NULL;
        o->drain_end = r ? NULL : s->next_input_byte;
        return JPG_DRAIN_SUSPENDED;
      }
      o->drain_seg = 0;
      continue;
    }
    empty = 0;
    if (may_wait && o->drain_lag < DRAIN_LAG_MAX &&
        drain_small(&o->drained, s->next_input_byte, s->bytes_in_buffer)) {
      size_t n = s->bytes_in_buffer;
      o->drain_lag += n;
      s->next_input_byte += n;
      s->bytes_in_buffer = 0;
      o->drain_seg += n;
      continue;
    }
    drain_catch_up(o, sc);
    size_t n = jpg_scan_feed(sc, s->next_input_byte, s->bytes_in_buffer);
    jpg_buf_put(&o->drained, s->next_input_byte, n);
    s->next_input_byte += n;
    s->bytes_in_buffer -= n;
    o->drain_seg += n;
    if (jpg_scan_done(sc))
      break;
    may_wait = !jpg_scan_may_end(sc);
  }
  o->draining = 0;
  o->drain_jb = NULL;
  return JPG_DRAIN_DONE;
}

int jpg_unread(jpg_obj *o, size_t n) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  /* the suspending fill left the source where the drain did, at the end
   * of a buffer the drained bytes came from */
  if (n > o->drain_seg || n > o->drained.len || o->drained.failed || !o->drain_end ||
      s->next_input_byte != o->drain_end || s->bytes_in_buffer != 0)
    return -1;
  s->next_input_byte -= n;
  s->bytes_in_buffer = n;
  o->drained.len -= n;
  o->drain_seg -= n;
  o->drain_end = NULL;
  return 0;
}

/* ---- replay: feed ----------------------------------------------------------- */

/* End of the overlay segment starting at pos: the next held-back message
 * (it is emitted when the library asks for the bytes after it), or the end. */
static size_t next_boundary(const jpg_obj *o, size_t pos) {
  for (size_t i = o->msg_next; i < o->nmsgs; i++)
    if (o->msgs[i].pos >= pos)
      return o->msgs[i].pos < o->drained.len ? o->msgs[i].pos : o->drained.len;
  return o->drained.len;
}

static void overlay_on(jpg_obj *o) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  o->prog_nib = s->next_input_byte;
  o->prog_bib = s->bytes_in_buffer;
  o->seg_end = next_boundary(o, o->feed_pos);
  s->next_input_byte = o->drained.p + o->feed_pos;
  s->bytes_in_buffer = o->seg_end - o->feed_pos;
  o->overlay = 1;
}

static void overlay_off(jpg_obj *o) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  const JOCTET *nib = s->next_input_byte;
  if ((uintptr_t)nib >= (uintptr_t)o->drained.p &&
      (uintptr_t)nib <= (uintptr_t)(o->drained.p + o->drained.len))
    o->feed_pos = (size_t)(nib - o->drained.p);
  s->next_input_byte = o->prog_nib;
  s->bytes_in_buffer = o->prog_bib;
  o->overlay = 0;
}

void jpg_feed_begin(jpg_obj *o) {
  o->feeding = 1;
  o->feed_done = 0;
  o->feed_pos = 0;
  o->msg_next = 0;
  o->capture = 0;
  if (o->in_call)
    overlay_on(o);
}

/* Emit held-back messages up to input offset pos. */
static void emit_held(jpg_obj *o, size_t pos) {
  while (o->msg_next < o->nmsgs && o->msgs[o->msg_next].pos <= pos) {
    jpg_msg m = o->msgs[o->msg_next++];
    jpg_emit(o, &m);
  }
}

/* The library, fed the drained bytes, suspended standing at `committed`
 * in them, and the program's source is where a suspended drain left it:
 * point the library into the program's buffer there instead, with the
 * drained bytes it did not use unread again, as natively (PIL reports how
 * many a truncated image left; a program may drop them, jpg_drop). Only
 * when they were the last the drain took from that buffer, and are still
 * there. Returns 1 when done. */
static int hand_back(jpg_obj *o, const JOCTET *committed) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  const JOCTET *end = o->drain_end;
  if ((uintptr_t)committed < (uintptr_t)o->drained.p ||
      (uintptr_t)committed > (uintptr_t)(o->drained.p + o->drained.len) || !end ||
      s->next_input_byte != end || s->bytes_in_buffer != 0)
    return 0;
  size_t tail = o->drained.len - (size_t)(committed - o->drained.p);
  if (tail > o->drain_seg || memcmp(end - tail, committed, tail) != 0)
    return 0;
  s->next_input_byte = end - tail;
  s->bytes_in_buffer = tail;
  o->drain_end = NULL;
  return 1;
}

/* The library used up an overlay segment. */
static boolean feed_fill(jpg_obj *o) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  const JOCTET *committed = s->next_input_byte; /* where a suspension backs up to */
  size_t committed_left = s->bytes_in_buffer;
  size_t pos = o->seg_end;
  emit_held(o, pos);
  if (pos < o->drained.len) {
    o->seg_end = next_boundary(o, pos);
    s->next_input_byte = o->drained.p + pos;
    s->bytes_in_buffer = o->seg_end - pos;
    return TRUE;
  }
  /* Used up: the program's source takes over from where the drain left it. */
  o->overlay = 0;
  o->feed_done = 1;
  s->next_input_byte = o->prog_nib;
  s->bytes_in_buffer = o->prog_bib;
  if (s->bytes_in_buffer > 0)
    return TRUE;
  boolean r;
  JPG_CALLBACK(r = o->orig_fill(o->cinfo));
  if (!r && !hand_back(o, committed)) { /* suspended inside the overlay: back to it */
    o->prog_nib = s->next_input_byte;
    o->prog_bib = s->bytes_in_buffer;
    s->next_input_byte = committed;
    s->bytes_in_buffer = committed_left;
    o->overlay = 1;
    o->feed_done = 0;
  }
  return r;
}

static void feed_skip(jpg_obj *o, long n) {
  struct jpeg_source_mgr *s = o->cinfo->src;
  size_t want = (size_t)(n > 0 ? n : 0);
  size_t pos = (size_t)(s->next_input_byte - o->drained.p);
  if (want <= o->drained.len - pos) {
    if (want > 0) /* a message at offset p goes out before byte p is used */
      emit_held(o, pos + want - 1);
    o->seg_end = next_boundary(o, pos + want);
    s->next_input_byte = o->drained.p + pos + want;
    s->bytes_in_buffer = o->seg_end - (pos + want);
    return;
  }
  emit_held(o, o->drained.len);
  o->overlay = 0;
  o->feed_done = 1;
  s->next_input_byte = o->prog_nib;
  s->bytes_in_buffer = o->prog_bib;
  JPG_CALLBACK(o->orig_skip(o->cinfo, (long)(want - (o->drained.len - pos))));
}

/* ---- requests --------------------------------------------------------------- */

/* The options an output pass of buffered-image mode may change (with
 * dct_method): jpeg_start_output takes them anew. */
static uint32_t pass_options(j_decompress_ptr ci) {
  return (ci->do_fancy_upsampling ? JPG_OPT_FANCY_UPSAMPLING : 0) |
         (ci->do_block_smoothing ? JPG_OPT_BLOCK_SMOOTHING : 0) |
         (ci->quantize_colors ? JPG_OPT_QUANTIZE : 0) |
         (ci->two_pass_quantize ? JPG_OPT_TWO_PASS_QUANTIZE : 0);
}

#define PASS_OPTIONS                                                                               \
  (JPG_OPT_FANCY_UPSAMPLING | JPG_OPT_BLOCK_SMOOTHING | JPG_OPT_QUANTIZE |                         \
   JPG_OPT_TWO_PASS_QUANTIZE)

int jpg_buffered_served(j_decompress_ptr ci) {
  JPG_REAL(real_multi, jpeg_has_multiple_scans, JPG_LIBJPEG);
  return ci->buffered_image && !ci->quantize_colors && !ci->raw_data_out && !real_multi(ci);
}

int jpg_pass_same(j_decompress_ptr ci, const jpg_params *p) {
  return ci->dct_method == (J_DCT_METHOD)p->dct_method &&
         ci->dither_mode == (J_DITHER_MODE)p->dither_mode &&
         pass_options(ci) == (p->options & PASS_OPTIONS);
}

void jpg_take_params(const jpg_obj *o, jpg_params *p, uint8_t **cmap) {
  j_decompress_ptr ci = o->cinfo;
  memset(p, 0, sizeof *p);
  *cmap = NULL;
  p->api = ST_API_JPEG_DECODE;
  p->entry = JPG_ENTRY_LIBJPEG;
  p->out_color_space = ci->out_color_space;
  p->jpeg_color_space = ci->jpeg_color_space;
  p->scale_num = ci->scale_num;
  p->scale_denom = ci->scale_denom;
  p->dct_method = ci->dct_method;
  p->options = pass_options(ci) | (ci->enable_1pass_quant ? JPG_OPT_ENABLE_1PASS : 0) |
               (ci->enable_external_quant ? JPG_OPT_ENABLE_EXTERNAL : 0) |
               (ci->enable_2pass_quant ? JPG_OPT_ENABLE_2PASS : 0) |
               (ci->raw_data_out ? JPG_OPT_RAW_DATA : 0) |
               (ci->buffered_image ? JPG_OPT_BUFFERED : 0);
  p->dither_mode = ci->dither_mode;
  p->desired_colors = ci->desired_number_of_colors;
  p->output_gamma = ci->output_gamma;
  if (ci->image_width != o->frame_w || ci->image_height != o->frame_h) {
    p->image_width = ci->image_width;
    p->image_height = ci->image_height;
  }
  if (!ci->quantize_colors || !ci->colormap || ci->actual_number_of_colors <= 0)
    return;
  /* The map has out_color_components rows; computing them is cheap and
   * jpeg_start_decompress does it again. */
  JPG_REAL(real_calc, jpeg_calc_output_dimensions, JPG_LIBJPEG);
  real_calc(ci);
  size_t colors = (size_t)ci->actual_number_of_colors, comps = (size_t)ci->out_color_components;
  if (comps > 4 || !(*cmap = shim_alloc(comps * colors)))
    return;
  for (size_t c = 0; c < comps; c++)
    memcpy(*cmap + c * colors, ci->colormap[c], colors);
  p->cmap_colors = (uint32_t)colors;
  p->cmap_components = (uint32_t)comps;
}

size_t jpg_row_bytes(j_decompress_ptr ci) {
  if (ci->out_color_space == JCS_RGB565 && !ci->quantize_colors)
    return (size_t)ci->output_width * 2; /* packed 5-6-5 */
  return (size_t)ci->output_width * (size_t)ci->output_components;
}

int jpg_raw_layout_of(j_decompress_ptr ci, jpg_raw_layout *L) {
  memset(L, 0, sizeof *L);
  if (ci->num_components < 1 || ci->num_components > JPG_RAW_MAX || ci->max_v_samp_factor < 1 ||
      ci->max_v_samp_factor > 4 || ci->min_DCT_scaled_size < 1 || ci->min_DCT_scaled_size > 16)
    return -1;
  L->n = ci->num_components;
  L->lines = (uint32_t)(ci->max_v_samp_factor * ci->min_DCT_scaled_size);
  L->imcu_rows = (ci->output_height + L->lines - 1) / L->lines;
  for (int c = 0; c < L->n; c++) {
    const jpeg_component_info *k = &ci->comp_info[c];
    if (k->DCT_scaled_size < 1 || k->DCT_scaled_size > 16 || k->v_samp_factor < 1 ||
        k->v_samp_factor > 4)
      return -1;
    L->row_bytes[c] = (uint32_t)k->width_in_blocks * (uint32_t)k->DCT_scaled_size;
    L->rows[c] = (uint32_t)k->height_in_blocks * (uint32_t)k->DCT_scaled_size;
    L->step[c] = (uint32_t)(k->v_samp_factor * k->DCT_scaled_size);
    L->off[c] = L->bytes;
    L->bytes += (size_t)L->row_bytes[c] * L->rows[c];
  }
  return 0;
}

void jpg_request_scan(jpg_obj *o, const jpg_params *p, jpg_scan *sc) {
  jpg_scan_init(sc, jpg_req_header_len(p) + o->tables.len, 1);
}

uint8_t *jpg_request_finish(jpg_obj *o, jpg_params *p, const uint8_t *cmap, jpg_scan *sc,
                            size_t *len, jpg_probe *pr) {
  uint8_t *blob;
  memset(pr, 0, sizeof *pr);
  pr->sof = -1;
  p->tables_len = (uint32_t)o->tables.len;
  if (jpg_scan_finish(sc, &blob, len) != 0)
    return NULL;
  size_t hl = jpg_req_header_len(p);
  jpg_req_write_header(blob, p, cmap);
  if (o->tables.len)
    memcpy(blob + hl, o->tables.p, o->tables.len);
  jpg_probe_header(blob + hl + o->tables.len, *len - hl - o->tables.len, pr);
  return blob;
}

size_t jpg_request_image_bytes(const jpg_obj *o, const jpg_params *p, size_t len) {
  size_t pre = jpg_req_header_len(p) + o->tables.len;
  return len > pre ? len - pre : 0;
}

void jpg_keep_tables(jpg_obj *o) {
  jpg_scan sc;
  uint8_t *t;
  size_t n;
  if (o->cap.failed)
    return;
  jpg_scan_init(&sc, 0, 1);
  jpg_scan_feed(&sc, o->cap.p, o->cap.len);
  if (jpg_scan_finish(&sc, &t, &n) != 0)
    return;
  if (o->tables.len + n <= (1u << 20)) /* a sane program sends a few hundred bytes */
    jpg_buf_put(&o->tables, t, n);
  shim_free(t);
}

/* workload.h — small helpers shared by the bundled workloads: a seeded
 * random generator, a hash, message-size distributions, a clock and a
 * worker pool fed from a queue.
 *
 * Header-only on purpose: the build turns every workloads/NAME/NAME.c into a
 * program of its own, and protogen is also built outside the Makefile by
 * build.sh, so a shared .c file would need rules of its own. Everything here
 * is `static inline`, so a program that uses part of it gets no warning for
 * the rest. Nothing here knows about standin. */
#ifndef WORKLOAD_H
#define WORKLOAD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- random numbers and hashing ----------------------------------------
 * splitmix64: small, fast, and the same sequence on every machine, so a seed
 * names one exact input set (no libm, no rand()). */
static inline uint64_t wl_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n); n > 0. The modulo bias is irrelevant here. */
static inline uint64_t wl_below(uint64_t *s, uint64_t n) {
  return wl_rand(s) % n;
}

/* Uniform in [lo, hi]. */
static inline uint64_t wl_range(uint64_t *s, uint64_t lo, uint64_t hi) {
  return lo + wl_below(s, hi - lo + 1);
}

/* True with probability permille / 1000. */
static inline int wl_chance(uint64_t *s, unsigned permille) {
  return wl_below(s, 1000) < permille;
}

#define WL_FNV_INIT 14695981039346656037ull

/* FNV-1a, 64 bit: order-sensitive, used for checksums that are printed. */
static inline uint64_t wl_fnv(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* A hash that takes 8 bytes per step, for bulk data (payloads, packed
 * messages), where byte-at-a-time FNV would cost more than the protobuf
 * calls around it and drown what the workloads are meant to show. */
static inline uint64_t wl_hash(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 0x9fb21c651e98df25ull;
    h ^= h >> 29;
  }
  return wl_fnv(b + i, n - i, h);
}

/* Bytes a protobuf varint takes for v. */
static inline size_t wl_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 128) {
    v >>= 7;
    n++;
  }
  return n;
}

/* ---- message sizes -----------------------------------------------------
 * A distribution is a list of segments, each taken with a probability and
 * giving a size in [lo, hi], uniformly or log-uniformly. Log-uniform goes by
 * octaves (an octave [lo<<k, (lo<<(k+1))-1] is picked uniformly, then a size
 * within it), which keeps the arithmetic in integers and the sizes the same
 * on every machine; choose hi near lo<<k - 1 so the last octave is whole. */
typedef struct {
  unsigned cum_permille; /* cumulative probability up to this segment */
  uint32_t lo, hi;
  int log;
} wl_size_segment;

typedef struct {
  const char *name;
  const char *what;
  int n;
  wl_size_segment seg[3];
} wl_size_dist;

/* "fleet": reported from Google's fleet (Protoacc, MICRO'21): about 56% of
 * messages at most 32 bytes, about 93% at most 512 bytes, the rest up to
 * tens of KB. "small" is the regime of Optimus Prime (300 B and below);
 * "large" that of Protoacc (4 KB and up). */
static const wl_size_dist wl_size_dists[] = {
    {"fleet",
     "56% <= 32 B, 93% <= 512 B, tail to 32 KiB",
     3,
     {{560, 2, 32, 0}, {930, 33, 512, 1}, {1000, 513, 32768, 1}}},
    {"small", "8 B to 255 B", 1, {{1000, 8, 255, 1}}},
    {"large", "4 KiB to 64 KiB", 1, {{1000, 4096, 65535, 1}}},
};

/* The distribution called name, or NULL. */
static inline const wl_size_dist *wl_size_dist_find(const char *name) {
  for (size_t i = 0; i < sizeof wl_size_dists / sizeof *wl_size_dists; i++)
    if (!strcmp(wl_size_dists[i].name, name))
      return &wl_size_dists[i];
  return NULL;
}

static inline uint32_t wl_log_uniform(uint64_t *s, uint32_t lo, uint32_t hi) {
  uint64_t octaves = 1;
  while ((uint64_t)lo << octaves <= hi)
    octaves++;
  uint64_t a = (uint64_t)lo << wl_below(s, octaves);
  uint64_t b = 2 * a - 1 < hi ? 2 * a - 1 : hi;
  return (uint32_t)wl_range(s, a, b);
}

/* One size drawn from d. */
static inline uint32_t wl_size_draw(const wl_size_dist *d, uint64_t *s) {
  unsigned u = (unsigned)wl_below(s, 1000);
  int i = 0;
  while (i < d->n - 1 && u >= d->seg[i].cum_permille)
    i++;
  const wl_size_segment *g = &d->seg[i];
  return g->log ? wl_log_uniform(s, g->lo, g->hi) : (uint32_t)wl_range(s, g->lo, g->hi);
}

/* Histogram buckets used in every workload's output: <=32, <=512, more. */
static inline int wl_size_bucket(size_t n) {
  return n <= 32 ? 0 : n <= 512 ? 1 : 2;
}

/* ---- time --------------------------------------------------------------- */
static inline uint64_t wl_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- a worker pool fed from a bounded queue ----------------------------- */
typedef void (*wl_task_fn)(void *ctx, size_t i);

#define WL_QUEUE_CAP 256

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t not_empty, not_full;
  size_t items[WL_QUEUE_CAP];
  size_t head, len;
  int closed;
  wl_task_fn fn;
  void *ctx;
} wl_queue;

/* Blocks until an item is available (1) or the queue is closed and empty (0). */
static inline int wl_queue_pop(wl_queue *q, size_t *item) {
  pthread_mutex_lock(&q->mu);
  while (q->len == 0 && !q->closed)
    pthread_cond_wait(&q->not_empty, &q->mu);
  int got = q->len > 0;
  if (got) {
    *item = q->items[q->head];
    q->head = (q->head + 1) % WL_QUEUE_CAP;
    /* wake a producer blocked on a full queue only once it is half empty,
     * not on every pop: one wake-up per WL_QUEUE_CAP / 2 items */
    if (--q->len == WL_QUEUE_CAP / 2)
      pthread_cond_signal(&q->not_full);
  }
  pthread_mutex_unlock(&q->mu);
  return got;
}

static inline void wl_queue_push(wl_queue *q, size_t item) {
  pthread_mutex_lock(&q->mu);
  while (q->len == WL_QUEUE_CAP)
    pthread_cond_wait(&q->not_full, &q->mu);
  q->items[(q->head + q->len++) % WL_QUEUE_CAP] = item;
  pthread_cond_signal(&q->not_empty); /* no system call when nobody waits */
  pthread_mutex_unlock(&q->mu);
}

static inline void wl_queue_close(wl_queue *q) {
  pthread_mutex_lock(&q->mu);
  q->closed = 1;
  pthread_cond_broadcast(&q->not_empty);
  pthread_mutex_unlock(&q->mu);
}

static inline void *wl_worker_main(void *arg) {
  wl_queue *q = arg;
  size_t i;
  while (wl_queue_pop(q, &i))
    q->fn(q->ctx, i);
  return NULL;
}

/* Runs fn(ctx, i) for every i in [0, n). With threads <= 1 the calling
 * thread does it in order; otherwise `threads` workers take the indices from
 * a bounded queue that the calling thread fills in order, the way a server's
 * accept loop feeds its pool, so which worker gets which item varies from
 * run to run. Returns 0, or -1 when no worker thread could be created (then
 * nothing has run). */
static inline int wl_pool_run(int threads, size_t n, wl_task_fn fn, void *ctx) {
  if (threads <= 1) {
    for (size_t i = 0; i < n; i++)
      fn(ctx, i);
    return 0;
  }
  wl_queue q = {.mu = PTHREAD_MUTEX_INITIALIZER,
                .not_empty = PTHREAD_COND_INITIALIZER,
                .not_full = PTHREAD_COND_INITIALIZER,
                .fn = fn,
                .ctx = ctx};
  pthread_t *th = calloc((size_t)threads, sizeof *th);
  int started = 0;
  while (th && started < threads && pthread_create(&th[started], NULL, wl_worker_main, &q) == 0)
    started++;
  if (started > 0)
    for (size_t i = 0; i < n; i++)
      wl_queue_push(&q, i);
  wl_queue_close(&q);
  for (int t = 0; t < started; t++)
    pthread_join(th[t], NULL);
  free(th);
  return started > 0 ? 0 : -1;
}

#endif

/* faults.c — page faults inside a recorded call (faults.h). */
#include "faults.h"

#include "shim_alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static uint64_t process_faults(void) {
  struct rusage u;
  if (getrusage(RUSAGE_SELF, &u) != 0)
    return 0;
  return (uint64_t)u.ru_minflt + (uint64_t)u.ru_majflt;
}

uint64_t rt_thread_faults(void) {
  struct rusage u;
  if (getrusage(RUSAGE_THREAD, &u) != 0)
    return 0;
  return (uint64_t)u.ru_minflt + (uint64_t)u.ru_majflt;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The median time of a first write to each of CAL_PAGES fresh pages of a
 * private anonymous mapping: what a fault costs a call that fills a fresh
 * buffer. ~0.2 ms on the AMD test VM (~10 us a fault), once per process
 * whose calls fault. */
#define CAL_PAGES 16
static _Atomic uint64_t fault_cost;

static uint64_t calibrate(void) {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0)
    page = 4096;
  size_t len = (size_t)page * CAL_PAGES;
  volatile uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return 0;
  madvise((void *)p, len, MADV_NOHUGEPAGE); /* one fault a page, as in a heap */
  uint64_t t[CAL_PAGES];
  for (int i = 0; i < CAL_PAGES; i++) {
    uint64_t t0 = shim_now_ns();
    p[(size_t)i * (size_t)page] = 1;
    t[i] = shim_now_ns() - t0;
  }
  munmap((void *)p, len);
  qsort(t, CAL_PAGES, sizeof t[0], cmp_u64);
  return t[CAL_PAGES / 2] ? t[CAL_PAGES / 2] : 1;
}

uint64_t rt_fault_cost_ns(void) {
  uint64_t c = atomic_load_explicit(&fault_cost, memory_order_relaxed);
  if (c == 0) {
    c = calibrate();
    if (c)
      atomic_store_explicit(&fault_cost, c, memory_order_relaxed);
  }
  return c;
}

uint32_t rt_fault_time(rt_fault_watch *w, int counted, uint64_t f0, uint64_t latency_ns) {
  if (!counted) { /* a long call: count the next ones, unless backing off */
    if (!rt_backoff_pass(&w->off))
      w->left = 1;
    return 0;
  }
  uint64_t f1 = rt_thread_faults();
  uint64_t n = f1 > f0 ? f1 - f0 : 0;
  if (n == 0) {
    if (w->left == 0) { /* the thread's first call, without a fault */
      w->left = RT_FAULT_OFF;
    } else if (++w->left > RT_FAULT_WINDOW) { /* a window without a fault */
      rt_backoff_found(&w->off, 0);
      w->left = RT_FAULT_OFF;
    }
    return 0;
  }
  w->left = 1;
  rt_backoff_found(&w->off, 1); /* skip is 0 while counting */
  uint64_t ns = n * rt_fault_cost_ns();
  if (ns > latency_ns)
    ns = latency_ns;
  return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static uintptr_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (uintptr_t)p : 4096;
}

/* vec for pages [first, first + n) of ps bytes, n <= RT_OUT_WINDOW; 0, or
 * -1 when some page of them is not mapped. */
static int window_at(rt_out_pages *w, uintptr_t ps, uintptr_t first, uintptr_t n) {
  if (mincore((void *)(first * ps), (size_t)(n * ps), w->vec) != 0)
    return -1;
  w->lo = first;
  w->hi = first + n;
  return 0;
}

/* The page at which the thread's last whole window met unmapped memory: a
 * buffer of a few rows the program decodes into again and again, whose
 * next decode then asks for its own pages at once (one system call a
 * decode, not two). A hint only: the window is tried again elsewhere. */
static SHIM_TLS uintptr_t short_at;

void rt_out_pages_note(rt_out_pages *w, const void *p, size_t len) {
  if (w->broken || !p || !len)
    return;
  uintptr_t ps = page_size(), a = (uintptr_t)p / ps, z = ((uintptr_t)p + len - 1) / ps;
  for (uintptr_t pg = a; pg <= z; pg++) {
    if (pg < w->lo || pg >= w->hi) {
      /* the window from here, or as much of it as is mapped: the row's own
       * pages at least */
      uintptr_t own = z - pg + 1 < RT_OUT_WINDOW ? z - pg + 1 : RT_OUT_WINDOW;
      if (pg == short_at || window_at(w, ps, pg, RT_OUT_WINDOW) != 0) {
        short_at = pg;
        if (window_at(w, ps, pg, own) != 0) {
          w->broken = 1;
          return;
        }
      }
    }
    unsigned char *v = &w->vec[pg - w->lo];
    if (!(*v & 1)) {
      if (w->fresh++ == 0)
        w->faults0 = process_faults();
      *v |= 1; /* once: the library's first write brings it in */
    }
  }
}

/* fresh pages, at most the faults taken since faults0, as time */
static uint32_t fresh_ns(uint64_t fresh, uint64_t faults0, uint64_t latency_ns) {
  if (fresh == 0)
    return 0;
  uint64_t now = process_faults(), taken = now > faults0 ? now - faults0 : 0;
  uint64_t n = fresh < taken ? fresh : taken;
  if (n == 0)
    return 0;
  uint64_t ns = n * rt_fault_cost_ns();
  if (ns > latency_ns)
    ns = latency_ns;
  return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

uint32_t rt_out_fault_ns(const rt_out_pages *w, uint64_t latency_ns) {
  return fresh_ns(w->fresh, w->faults0, latency_ns);
}

/* Larger buffers are not looked at (a vec of 256 KiB). */
#define SNAP_MAX_PAGES (256u << 10)

/* Which pages of [p, p + len) are in memory, into s; 0 when nothing is to
 * be counted (s->vec NULL). */
static int snap_pages(rt_page_snap *s, const void *p, size_t len) {
  s->vec = NULL;
  if (!p || !len)
    return 0;
  uintptr_t ps = page_size(), a = (uintptr_t)p / ps, z = ((uintptr_t)p + len - 1) / ps;
  size_t n = (size_t)(z - a + 1);
  if (z < a || n > SNAP_MAX_PAGES || !(s->vec = shim_alloc(n)))
    return 0;
  size_t in = 0;
  int mapped = mincore((void *)(a * ps), n * ps, s->vec) == 0;
  while (mapped && in < n && (s->vec[in] & 1))
    in++;
  if (!mapped || in == n) { /* not all of it mapped, or nothing to count */
    shim_free(s->vec);
    s->vec = NULL;
    return 0;
  }
  s->lo = a;
  s->n = n;
  return 1;
}

void rt_page_snaps_take(rt_page_snap *s, int n, const void *const *p, const size_t *len) {
  int any = 0;
  for (int i = 0; i < n; i++)
    any |= snap_pages(&s[i], p[i], len[i]);
  uint64_t f0 = any ? process_faults() : 0; /* one count for them all */
  for (int i = 0; i < n; i++)
    s[i].faults0 = f0;
}

void rt_page_snap_take(rt_page_snap *s, const void *p, size_t len) {
  rt_page_snaps_take(s, 1, &p, &len);
}

/* The pages of s that were not in memory and [p, p + len) covers; frees s. */
static uint64_t snap_fresh(rt_page_snap *s, const void *p, size_t len) {
  uint64_t fresh = 0;
  if (p && len) {
    uintptr_t ps = page_size(), a = (uintptr_t)p / ps, z = ((uintptr_t)p + len - 1) / ps;
    for (uintptr_t pg = a < s->lo ? s->lo : a; pg <= z && pg - s->lo < s->n; pg++)
      fresh += !(s->vec[pg - s->lo] & 1);
  }
  shim_free(s->vec);
  s->vec = NULL;
  return fresh;
}

uint32_t rt_page_snaps_fault_ns(rt_page_snap *s, int n, const void *const *p, const size_t *len,
                                uint64_t latency_ns) {
  uint64_t fresh = 0, faults0 = 0;
  int any = 0;
  for (int i = 0; i < n; i++) {
    if (!s[i].vec)
      continue;
    any = 1;
    faults0 = s[i].faults0; /* one count, taken with them all */
    fresh += snap_fresh(&s[i], p[i], len[i]);
  }
  return any ? fresh_ns(fresh, faults0, latency_ns) : 0;
}

uint32_t rt_page_snap_fault_ns(rt_page_snap *s, const void *p, size_t len, uint64_t latency_ns) {
  return rt_page_snaps_fault_ns(s, 1, &p, &len, latency_ns);
}

/* faults.c — page faults inside a recorded call (faults.h). */
#include "faults.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

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
    if (w->skip)
      w->skip--;
    else
      w->left = 1;
    return 0;
  }
  uint64_t f1 = rt_thread_faults();
  uint64_t n = f1 > f0 ? f1 - f0 : 0;
  if (n == 0) {
    if (w->left == 0) { /* the thread's first call, without a fault */
      w->left = RT_FAULT_OFF;
    } else if (++w->left > RT_FAULT_WINDOW) { /* a window without a fault */
      if (w->backoff < 10)
        w->backoff++;
      w->skip = (uint16_t)(1u << w->backoff);
      w->left = RT_FAULT_OFF;
    }
    return 0;
  }
  w->left = 1;
  w->backoff = 0;
  uint64_t ns = n * rt_fault_cost_ns();
  if (ns > latency_ns)
    ns = latency_ns;
  return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/* hist.c — log-linear histogram (see hist.h). */
#include "hist.h"

#include <string.h>

void hist_init(hist *h) {
  memset(h, 0, sizeof *h);
  h->min = UINT64_MAX;
}

void hist_bucket_range(unsigned i, uint64_t *lo, uint64_t *hi) {
  if (i < HIST_SUB) {
    *lo = *hi = i;
    return;
  }
  unsigned e = (i - HIST_SUB) / HIST_SUB + HIST_SUB_BITS, sub = (i - HIST_SUB) % HIST_SUB;
  uint64_t width = 1ull << (e - HIST_SUB_BITS);
  *lo = (uint64_t)(HIST_SUB + sub) << (e - HIST_SUB_BITS);
  *hi = i == HIST_NBUCKETS - 1 ? UINT64_MAX : *lo + width - 1;
}

uint64_t hist_quantile(const hist *h, double q) {
  if (h->count == 0)
    return 0;
  if (q >= 1)
    return h->max;
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if ((double)rank < q * (double)h->count)
    rank++;
  if (rank == 0)
    rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < HIST_NBUCKETS; i++) {
    seen += h->b[i];
    if (seen < rank)
      continue;
    uint64_t lo, hi;
    hist_bucket_range(i, &lo, &hi);
    uint64_t mid = i == HIST_NBUCKETS - 1 ? h->max : lo + (hi - lo) / 2;
    return mid < h->min ? h->min : mid > h->max ? h->max : mid;
  }
  return h->max;
}

void hist_merge(hist *dst, const hist *src) {
  for (unsigned i = 0; i < HIST_NBUCKETS; i++)
    dst->b[i] += src->b[i];
  dst->count += src->count;
  dst->sum += src->sum;
  if (src->min < dst->min)
    dst->min = src->min;
  if (src->max > dst->max)
    dst->max = src->max;
}

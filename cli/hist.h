/* hist.h — a fixed-size log-linear latency histogram (HDR-style).
 *
 * Values below 32 have a bucket each; above, every power of two is split
 * into 32 buckets of equal width, so a bucket is at most 1/32 of its lower
 * bound wide and a value reported as its bucket's midpoint is within
 * HIST_REL_ERROR of the true value. Values from 2^44 ns (about 4.9 hours)
 * up share the last bucket. Count, sum, min and max are exact. 10 KiB per
 * histogram, whatever the number of values. */
#ifndef STANDIN_CLI_HIST_H
#define STANDIN_CLI_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_TOP_EXP 44
#define HIST_NBUCKETS (HIST_SUB + (HIST_TOP_EXP - HIST_SUB_BITS) * HIST_SUB)
#define HIST_REL_ERROR (1.0 / (2 * HIST_SUB)) /* 1.6% */

typedef struct {
  uint64_t count, sum, min, max;
  uint64_t b[HIST_NBUCKETS];
} hist;

void hist_init(hist *h);

static inline unsigned hist_bucket(uint64_t v) {
  if (v < HIST_SUB)
    return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v);
  if (e >= HIST_TOP_EXP)
    return HIST_NBUCKETS - 1;
  unsigned sub = (unsigned)(v >> (e - HIST_SUB_BITS)) & (HIST_SUB - 1);
  return HIST_SUB + (e - HIST_SUB_BITS) * HIST_SUB + sub;
}

static inline void hist_add(hist *h, uint64_t v) {
  h->b[hist_bucket(v)]++;
  h->count++;
  h->sum += v;
  if (v < h->min)
    h->min = v;
  if (v > h->max)
    h->max = v;
}

/* Smallest and largest value of bucket i. */
void hist_bucket_range(unsigned i, uint64_t *lo, uint64_t *hi);

/* The q-quantile (0 < q <= 1) by nearest rank: the value at rank
 * ceil(q * count), as its bucket's midpoint clamped to [min, max]; q = 1
 * gives max exactly. 0 when empty. */
uint64_t hist_quantile(const hist *h, double q);

void hist_merge(hist *dst, const hist *src);

#endif

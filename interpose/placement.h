/* placement.h — where a call leaves its output: in the caches or in memory.
 *
 * An implementation may write its output with non-temporal stores, which go
 * to memory and leave the caches without it, as a device's DMA does.
 * libjpeg-turbo's SIMD colour conversion does so for aligned rows: probed
 * after each jpeg_read_scanlines, 22% of thumbnailer's output lines were
 * outside the caches with SIMD and none without. The program then pays the
 * misses in its own code, after the call (its downscaling loop took
 * ~1.7x as long), which a replay that copies the saved rows with ordinary
 * stores does not reproduce. Record measures the share (place_probe), and
 * replay delivers that share of the rows with non-temporal stores
 * (place_copy_to_memory). */
#ifndef STANDIN_PLACEMENT_H
#define STANDIN_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* Lines probed: one in PLACE_PROBE_STRIDE bytes. */
#define PLACE_PROBE_STRIDE 256

/* Time one load from each probed line of [p, p+len) and return how many
 * took longer than any cache level answers here (PLACE_COLD_NS above the
 * fastest load seen); *probed says how many lines were probed (0 where the
 * shim has no calibrated TSC: nothing is measured then). Reading a line
 * brings it into the caches. */
uint32_t place_probe(const void *p, size_t len, uint32_t *probed);

/* cold of probed lines, per mille (rounded); 0 when none was probed. */
static inline uint32_t place_permille(uint64_t cold, uint64_t probed) {
  return probed ? (uint32_t)((cold * 1000 + probed / 2) / probed) : 0;
}

/* One row of a response of which out_cold per mille of the rows go to
 * memory, spread evenly (*acc carries the remainder from row to row; start
 * it at 500): copies with place_copy_to_memory or memcpy, and returns the
 * bytes that went to memory. place_fence after the last row. */
uint64_t place_copy_share(void *dst, const void *src, size_t len, uint32_t out_cold, uint32_t *acc);

/* memcpy whose stores bypass the caches where they can (the 16-byte aligned
 * part of dst). Call place_fence after a series, before the program may
 * read dst from another thread. */
void place_copy_to_memory(void *dst, const void *src, size_t len);
void place_fence(void);

#endif

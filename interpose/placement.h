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

/* memcpy whose stores bypass the caches where they can (the 16-byte aligned
 * part of dst). Call place_fence after a series, before the program may
 * read dst from another thread. */
void place_copy_to_memory(void *dst, const void *src, size_t len);
void place_fence(void);

#endif

/* placement.h — where a call leaves its output: in the caches or in memory.
 *
 * An implementation may write its output with non-temporal stores, which go
 * to memory and leave the caches without it, as a device's DMA does.
 * libjpeg-turbo's SIMD colour conversion does so for aligned rows: probed
 * after each jpeg_read_scanlines, 22% of thumbnailer's output lines were
 * outside the caches with SIMD and none without. The program then pays the
 * misses in its own code, after the call (its downscaling loop took
 * ~1.7x as long), which a replay that copies the saved rows with ordinary
 * stores does not reproduce. Record measures the share (place_sample), and
 * replay delivers that share of the rows with non-temporal stores
 * (place_copy_to_memory). */
#ifndef STANDIN_PLACEMENT_H
#define STANDIN_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

/* Record probes a random sample of the output, one byte in
 * PLACE_SAMPLE_BYTES on average (the line holding it): ~14 lines of a
 * 160x120 decode. Gaps are drawn at
 * random, so no period in row length or alignment (rows at %32 = 0 are
 * the cold ones with libjpeg-turbo's SIMD) can line up with them. Probing
 * every 256 bytes cost 24 us per decode of a 160x120 image (~7%): each
 * probe is two serialising TSC reads, and a cold line's miss is not
 * overlapped with anything. */
#define PLACE_SAMPLE_BYTES 4096

typedef struct {
  uint64_t rng;    /* xorshift64 state, never 0 */
  uint64_t left;   /* bytes before the next probed one */
  uint64_t cold;   /* probed lines found outside the caches */
  uint64_t probed; /* lines probed (0 without a calibrated TSC) */
} place_sampler;

void place_sampler_init(place_sampler *s, uint64_t seed);

/* Where the sample falls in the next len bytes of output: the offsets,
 * increasing and < len, go to off[] (the first max of them); returns how
 * many there were. Gaps are at least 64 bytes, so len <= 64 * max always
 * fits. */
size_t place_sample_offsets(place_sampler *s, size_t len, size_t *off, size_t max);

/* Probe the sampled lines of the next len bytes of output, at p. Reading
 * a line brings it into the caches: call before copying it. */
void place_sample(place_sampler *s, const void *p, size_t len);

/* What reading a line from memory costs over reading it from L1 (ns), as
 * measured when the first sample was probed (a few lines flushed from
 * the caches and read back: the median); 0 before, or without a TSC.
 * Recordings keep it (the note place_miss_ns): whatif bounds with it
 * what the program's reads of rows a model leaves in memory may cost. */
uint64_t place_miss_ns(void);

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

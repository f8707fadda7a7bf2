/* placement.c — see placement.h. */
#include "placement.h"

#include <string.h>

#include "shim.h"

uint64_t place_copy_share(void *dst, const void *src, size_t len, uint32_t out_cold, uint32_t *acc) {
  *acc += out_cold > 1000 ? 1000 : out_cold;
  if (*acc < 1000) {
    memcpy(dst, src, len);
    return 0;
  }
  *acc -= 1000;
  place_copy_to_memory(dst, src, len);
  return len;
}

/* A gap in [64, 2 * PLACE_SAMPLE_BYTES - 64], mean PLACE_SAMPLE_BYTES
 * (xorshift64). */
static uint64_t next_gap(place_sampler *s) {
  uint64_t x = s->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  s->rng = x;
  return 64 + (x >> 32) % (2 * PLACE_SAMPLE_BYTES - 127);
}

void place_sampler_init(place_sampler *s, uint64_t seed) {
  *s = (place_sampler){.rng = seed ? seed : 0x9E3779B97F4A7C15ull};
  s->left = next_gap(s) - 64; /* the first probe anywhere in the first gap */
}

size_t place_sample_offsets(place_sampler *s, size_t len, size_t *off, size_t max) {
  size_t n = 0;
  uint64_t o = s->left;
  for (; o < len; o += next_gap(s), n++)
    if (n < max)
      off[n] = (size_t)o;
  s->left = o - len;
  return n;
}

#if defined(__x86_64__)
#include <emmintrin.h>
#include <x86intrin.h>

/* A load that misses every cache level takes ~80-120 ns on the machines we
 * measured; the slowest cache hit (another core's L3 slice) stays well
 * under 50 ns. */
#define PLACE_COLD_NS 60

/* The cold threshold in TSC ticks: the fastest probe seen (a line in L1)
 * plus PLACE_COLD_NS; 0 until measured. */
static uint64_t cold_ticks;
/* What a line read from memory costs over one in L1, in ns (place_miss_ns);
 * 0 until measured. */
static uint64_t miss_ns;

static inline uint64_t probe_one(const volatile uint8_t *p) {
  unsigned aux;
  _mm_lfence();
  uint64_t a = __rdtscp(&aux);
  (void)*p;
  uint64_t b = __rdtscp(&aux);
  _mm_lfence();
  return b - a;
}

static void calibrate(void) {
  /* ticks per ns from the shim's clock: ns = ticks * mult >> 32 */
  if (!shim_tsc_mult)
    return;
  volatile uint8_t line[64] = {0};
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 32; i++) {
    uint64_t t = probe_one(line);
    best = t < best ? t : best;
  }
  uint64_t ticks_cold = ((uint64_t)PLACE_COLD_NS << 32) / shim_tsc_mult;
  /* a line flushed from every cache level, read back: the median of 9 */
  enum { N = 9 };
  static uint8_t flushed[N * 128] __attribute__((aligned(64)));
  uint64_t t[N];
  for (int i = 0; i < N; i++) {
    volatile uint8_t *q = flushed + i * 128;
    *q = (uint8_t)i;
    _mm_clflush((const void *)q);
    _mm_mfence();
    t[i] = probe_one(q);
  }
  for (int i = 1; i < N; i++) /* insertion sort: 9 values */
    for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
      uint64_t v = t[j];
      t[j] = t[j - 1];
      t[j - 1] = v;
    }
  uint64_t miss = t[N / 2] > best ? t[N / 2] - best : 0;
  __atomic_store_n(&miss_ns, (uint64_t)(((unsigned __int128)miss * shim_tsc_mult) >> 32),
                   __ATOMIC_RELAXED);
  __atomic_store_n(&cold_ticks, best + ticks_cold, __ATOMIC_RELAXED);
}

uint64_t place_miss_ns(void) {
  return __atomic_load_n(&miss_ns, __ATOMIC_RELAXED);
}

void place_sample(place_sampler *s, const void *p, size_t len) {
  enum { MAX = 64, SPAN = MAX * 64 }; /* gaps >= 64 B: SPAN bytes hold <= MAX */
  size_t off[MAX];
  if (SHIM_UNLIKELY(!__atomic_load_n(&cold_ticks, __ATOMIC_RELAXED)))
    calibrate();
  uint64_t limit = __atomic_load_n(&cold_ticks, __ATOMIC_RELAXED);
  const volatile uint8_t *b = p;
  for (size_t done = 0; done < len;) {
    size_t c = len - done < SPAN ? len - done : SPAN;
    size_t n = place_sample_offsets(s, c, off, MAX);
    for (size_t i = 0; limit && i < n; i++)
      s->cold += probe_one(b + done + off[i]) > limit;
    if (limit)
      s->probed += n;
    done += c;
  }
}

void place_copy_to_memory(void *dst, const void *src, size_t len) {
  uint8_t *d = dst;
  const uint8_t *s = src;
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > len)
    head = len;
  memcpy(d, s, head);
  d += head;
  s += head;
  len -= head;
  for (; len >= 64; d += 64, s += 64, len -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)s), b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32)), e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
  }
  for (; len >= 16; d += 16, s += 16, len -= 16)
    _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
  memcpy(d, s, len);
}

void place_fence(void) {
  _mm_sfence();
}

#else /* no non-temporal stores or TSC probe here: everything is in the caches */

void place_sample(place_sampler *s, const void *p, size_t len) {
  (void)s;
  (void)p;
  (void)len;
}

void place_copy_to_memory(void *dst, const void *src, size_t len) {
  memcpy(dst, src, len);
}

void place_fence(void) {
}

uint64_t place_miss_ns(void) {
  return 0;
}

#endif

/* pb_hash.c — XXH3 for long inputs, on the widest vector unit available.
 *
 * Fingerprints and image checksums hash every byte of a message on the
 * replay hot path. The default build targets SSE2; where the CPU and the
 * OS support AVX2 (as the dynamic loader found, no constructor needed), the
 * long-input loop runs about 2.5x faster. XXH3 gives the same result on
 * every vector unit, so the choice never changes a hash. */
#include "pb_internal.h"

#include <sys/platform/x86.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Inputs up to this length never reach XXH3's vector loop. */
#define SHORT_INPUT 240

/* AVX2 usable: the CPU has it and the OS saves the YMM registers. Asked of
 * the features the dynamic loader found at start (<sys/platform/x86.h>),
 * not of cpuid: in a virtual machine each cpuid traps to the hypervisor,
 * and the three this took cost ~23 us of every recorded process. */
static int probe_avx2(void) {
  return CPU_FEATURE_ACTIVE(AVX2);
}

static int probe_popcnt(void) {
  return CPU_FEATURE_ACTIVE(POPCNT);
}

/* A CPU feature, probed on the first call. Threads may race on it; they
 * store the same answer. */
static int cpu_has(int *cached, int (*probe)(void)) {
  int v = __atomic_load_n(cached, __ATOMIC_RELAXED);
  if (v < 0) {
    v = probe();
    __atomic_store_n(cached, v, __ATOMIC_RELAXED);
  }
  return v;
}

static int have_avx2(void) {
  static int cached = -1;
  return cpu_has(&cached, probe_avx2);
}

int pbw__have_popcnt(void) {
  static int cached = -1;
  return cpu_has(&cached, probe_popcnt);
}

uint64_t pbw__hash64(const void *p, size_t n) {
  if (n > SHORT_INPUT && have_avx2())
    return pbw__hash64_avx2(p, n);
  return XXH3_64bits(p, n);
}

pbw__h128 pbw__hash128(const void *p, size_t n) {
  if (n > SHORT_INPUT && have_avx2())
    return pbw__hash128_avx2(p, n);
  XXH128_hash_t h = XXH3_128bits(p, n);
  return (pbw__h128){h.low64, h.high64};
}

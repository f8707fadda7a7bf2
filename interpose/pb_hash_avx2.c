/* pb_hash_avx2.c — XXH3 compiled for AVX2; called by pb_hash.c only after
 * it checked that the CPU supports AVX2. The pragma must come before any
 * include so that xxhash.h selects its AVX2 code. */
#pragma GCC target("avx2")
#define XXH_VECTOR XXH_AVX2
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pb_internal.h"

uint64_t pbw__hash64_avx2(const void *p, size_t n) {
  return XXH3_64bits(p, n);
}

pbw__h128 pbw__hash128_avx2(const void *p, size_t n) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  return (pbw__h128){h.low64, h.high64};
}

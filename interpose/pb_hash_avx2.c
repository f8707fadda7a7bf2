/* pb_hash_avx2.c — XXH3 compiled for AVX2; called by pb_hash.c only after
 * it checked that the CPU supports AVX2. The pragma must come before any
 * include so that xxhash.h selects its AVX2 code. clang ignores GCC's
 * pragma: it takes a target attribute on every function instead, and
 * xxhash.h includes the intrinsics only when __AVX2__ is defined.
 *
 * Each function ends with VZEROUPPER. GCC emits none for code made AVX by a
 * pragma or attribute, and leaving the YMM registers' upper halves dirty
 * slows every SSE instruction the program runs afterwards: each gains a
 * false dependency on those halves. An ImageMagick resize after a replayed
 * decode ran 2.3x as long until this was added. */
#ifdef __clang__
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#include <immintrin.h>
#else
#pragma GCC target("avx2")
#include <immintrin.h>
#endif
#define XXH_VECTOR XXH_AVX2
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pb_internal.h"

uint64_t pbw__hash64_avx2(const void *p, size_t n) {
  uint64_t h = XXH3_64bits(p, n);
  _mm256_zeroupper();
  return h;
}

pbw__h128 pbw__hash128_avx2(const void *p, size_t n) {
  XXH128_hash_t h = XXH3_128bits(p, n);
  _mm256_zeroupper();
  return (pbw__h128){h.low64, h.high64};
}

#ifdef __clang__
#pragma clang attribute pop
#endif

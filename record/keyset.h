/* keyset.h — fixed open-addressing sets of addresses (message descriptors)
 * that program threads read without a lock. Adds are serialised by the
 * caller (one adder, or under a lock); an add whose neighbourhood is full
 * is dropped, so "absent" must always be a safe answer. */
#ifndef STANDIN_KEYSET_H
#define STANDIN_KEYSET_H

#include <stdatomic.h>
#include <stdint.h>

#define KEYSET_PROBES 8

typedef _Atomic(const void *) keyset_slot_t;

static inline unsigned keyset_slot(const void *key, unsigned bits) {
  return (unsigned)(((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
}

static inline int keyset_has(keyset_slot_t *set, unsigned bits, const void *key) {
  unsigned s = keyset_slot(key, bits), mask = (1u << bits) - 1;
  for (unsigned i = 0; key && i < KEYSET_PROBES; i++, s = (s + 1) & mask) {
    const void *k = atomic_load_explicit(&set[s], memory_order_acquire);
    if (k == key)
      return 1;
    if (k == NULL)
      return 0;
  }
  return 0;
}

static inline void keyset_add(keyset_slot_t *set, unsigned bits, const void *key) {
  unsigned s = keyset_slot(key, bits), mask = (1u << bits) - 1;
  for (unsigned i = 0; key && i < KEYSET_PROBES; i++, s = (s + 1) & mask) {
    const void *k = atomic_load_explicit(&set[s], memory_order_relaxed);
    if (k == key)
      return;
    if (k == NULL) {
      atomic_store_explicit(&set[s], key, memory_order_release);
      return;
    }
  }
}

static inline void keyset_clear(keyset_slot_t *set, unsigned bits) {
  for (unsigned s = 0; s < 1u << bits; s++)
    atomic_store_explicit(&set[s], NULL, memory_order_relaxed);
}

#endif

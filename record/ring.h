/* ring.h — single-producer single-consumer byte ring between a recording
 * thread (producer) and the writer thread (consumer).
 *
 * Each application thread owns one ring, so the hot path takes no lock: the
 * producer reserves space, writes a record in place and publishes it with a
 * release store of `head`; the writer reads up to `head` with an acquire load
 * and frees space with a release store of `tail`. Records are contiguous:
 * one that does not fit before the end of the buffer is preceded by a
 * padding record and starts again at offset 0. */
#ifndef STANDIN_RING_H
#define STANDIN_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RING_ALIGN 8u
#define RING_PAD 0xffffu /* kind of a padding record */

typedef struct {
  uint32_t len;  /* whole record including this header, multiple of 8 */
  uint16_t kind; /* RING_PAD or a record kind of the runtime */
  uint16_t spare;
} ring_hdr;

typedef struct ring {
  _Alignas(64) _Atomic uint64_t head; /* bytes ever published (producer) */
  /* the producer's last look at tail: reading tail itself on every record
   * would pull its cache line from the writer's core each time */
  uint64_t tail_seen;
  _Alignas(64) _Atomic uint64_t tail; /* bytes ever consumed (writer) */
  uint64_t head_seen; /* the consumer's last look at head, likewise */
  _Alignas(64) uint8_t *buf;
  uint64_t cap; /* power of two */
} ring;

static inline uint32_t ring_align(uint64_t n) {
  return (uint32_t)((n + RING_ALIGN - 1) & ~(uint64_t)(RING_ALIGN - 1));
}

/* Bytes needed to publish a record of `len` bytes at the current head,
 * counting the padding that a wrap would add. */
static inline uint64_t ring_need(const ring *r, uint64_t head, uint32_t len) {
  uint64_t pos = head & (r->cap - 1);
  return pos + len > r->cap ? (r->cap - pos) + len : len;
}

/* Reserve `len` (aligned) bytes. Returns the address to write the record at,
 * or NULL when the ring lacks space now (the caller waits and retries). */
/* Producer: bytes in use, from its last look at tail unless that says
 * more than `limit`, in which case it looks again. */
static inline uint64_t ring_used(ring *r, uint64_t limit) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  if (head - r->tail_seen > limit)
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
  return head - r->tail_seen;
}

static inline void *ring_reserve(ring *r, uint32_t len) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  uint64_t need = ring_need(r, head, len);
  /* space up to tail_seen was released when it was read (acquire) */
  if (r->cap - ring_used(r, r->cap - need) < need)
    return NULL;
  uint64_t pos = head & (r->cap - 1);
  if (pos + len > r->cap) {
    ring_hdr *pad = (ring_hdr *)(r->buf + pos);
    pad->len = (uint32_t)(r->cap - pos);
    pad->kind = RING_PAD;
    pos = 0;
  }
  return r->buf + pos;
}

/* Publish the record written at the address ring_reserve returned. */
static inline void ring_publish(ring *r, uint32_t len) {
  uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  atomic_store_explicit(&r->head, head + ring_need(r, head, len), memory_order_release);
}

/* Consumer: next record, or NULL if empty. Skips padding. */
static inline ring_hdr *ring_peek(ring *r) {
  for (;;) {
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (tail == r->head_seen) { /* records up to head_seen were published */
      r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
      if (tail == r->head_seen)
        return NULL;
    }
    ring_hdr *h = (ring_hdr *)(r->buf + (tail & (r->cap - 1)));
    if (h->kind != RING_PAD)
      return h;
    atomic_store_explicit(&r->tail, tail + h->len, memory_order_release);
  }
}

/* Consumer: release the record ring_peek returned. */
static inline void ring_consume(ring *r, const ring_hdr *h) {
  uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  atomic_store_explicit(&r->tail, tail + h->len, memory_order_release);
}

static inline int ring_empty(ring *r) {
  return atomic_load_explicit(&r->tail, memory_order_acquire) ==
         atomic_load_explicit(&r->head, memory_order_acquire);
}

#endif

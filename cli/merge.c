/* merge.c — k-way merge of per-thread call streams (see merge.h). */
#include "merge.h"

#include <stdlib.h>
#include <string.h>

#define MAX_STREAMS (1u << 20) /* thread indices beyond this share the last FIFO */

typedef struct {
  uint8_t *buf; /* ring of items, each prefixed by its start time */
  size_t head, n, cap;
  int in_heap;
} fifo;

typedef struct {
  uint64_t key; /* start of the stream's head item */
  uint32_t stream;
} hentry;

struct merge {
  size_t item, slot; /* item size, and slot size (start + item) */
  size_t max_items, buffered;
  uint64_t lag, latest, last_out, late;
  merge_emit_fn emit;
  void *arg;
  fifo *f;
  uint32_t nf;
  hentry *heap; /* streams ordered by the start of their head item */
  uint32_t nheap;
  uint8_t *scratch; /* one slot, for an item that cannot be buffered */
};

static uint64_t head_start(const merge *m, uint32_t s) {
  uint64_t t;
  memcpy(&t, m->f[s].buf + m->f[s].head * m->slot, 8);
  return t;
}

static void sift_up(merge *m, uint32_t i) {
  hentry x = m->heap[i];
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (m->heap[p].key <= x.key)
      break;
    m->heap[i] = m->heap[p];
    i = p;
  }
  m->heap[i] = x;
}

static void sift_down(merge *m, uint32_t i) {
  hentry x = m->heap[i];
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, s = l;
    if (l >= m->nheap)
      break;
    if (r < m->nheap && m->heap[r].key < m->heap[l].key)
      s = r;
    if (m->heap[s].key >= x.key)
      break;
    m->heap[i] = m->heap[s];
    i = s;
  }
  m->heap[i] = x;
}

int merge_open(merge **out, size_t item_size, size_t max_bytes, uint64_t lag_ns, merge_emit_fn emit,
               void *arg) {
  merge *m = calloc(1, sizeof *m);
  *out = m;
  if (!m)
    return -1;
  m->item = item_size;
  m->slot = (8 + item_size + 7) & ~(size_t)7;
  m->max_items = max_bytes / m->slot ? max_bytes / m->slot : 1;
  m->lag = lag_ns;
  m->emit = emit;
  m->arg = arg;
  m->scratch = malloc(m->slot);
  return m->scratch ? 0 : -1;
}

static void emit_slot(merge *m, uint8_t *slot) {
  uint64_t start;
  memcpy(&start, slot, 8);
  if (start < m->last_out)
    m->late++;
  else
    m->last_out = start;
  m->emit(start, slot + 8, m->arg);
}

/* Hand on the earliest head. */
static void pop(merge *m) {
  uint32_t s = m->heap[0].stream;
  fifo *f = &m->f[s];
  emit_slot(m, f->buf + f->head * m->slot);
  f->head = f->head + 1 == f->cap ? 0 : f->head + 1;
  f->n--;
  m->buffered--;
  if (f->n) {
    m->heap[0].key = head_start(m, s);
    sift_down(m, 0);
    return;
  }
  f->in_heap = 0;
  m->heap[0] = m->heap[--m->nheap];
  if (m->nheap)
    sift_down(m, 0);
}

static int grow_streams(merge *m, uint32_t need) {
  uint32_t n = m->nf ? m->nf : 16;
  while (n <= need)
    n *= 2;
  fifo *nf = realloc(m->f, n * sizeof *nf);
  if (!nf)
    return -1;
  memset(nf + m->nf, 0, (n - m->nf) * sizeof *nf);
  m->f = nf;
  hentry *nh = realloc(m->heap, n * sizeof *nh);
  if (!nh)
    return -1;
  m->heap = nh;
  m->nf = n;
  return 0;
}

static int grow_fifo(merge *m, fifo *f) {
  size_t cap = f->cap ? f->cap * 2 : 64;
  uint8_t *nb = malloc(cap * m->slot);
  if (!nb)
    return -1;
  for (size_t i = 0; i < f->n; i++)
    memcpy(nb + i * m->slot, f->buf + ((f->head + i) % f->cap) * m->slot, m->slot);
  free(f->buf);
  f->buf = nb;
  f->head = 0;
  f->cap = cap;
  return 0;
}

int merge_push(merge *m, uint32_t stream, uint64_t start, const void *item) {
  if (stream >= MAX_STREAMS)
    stream = MAX_STREAMS - 1;
  if ((stream >= m->nf && grow_streams(m, stream) != 0) ||
      (m->f[stream].n == m->f[stream].cap && grow_fifo(m, &m->f[stream]) != 0)) {
    memcpy(m->scratch, &start, 8);
    memcpy(m->scratch + 8, item, m->item);
    emit_slot(m, m->scratch);
    return -1;
  }
  fifo *f = &m->f[stream];
  uint8_t *dst = f->buf + ((f->head + f->n) % f->cap) * m->slot;
  memcpy(dst, &start, 8);
  memcpy(dst + 8, item, m->item);
  f->n++;
  m->buffered++;
  if (!f->in_heap) {
    f->in_heap = 1;
    m->heap[m->nheap++] = (hentry){start, stream};
    sift_up(m, m->nheap - 1);
  }
  if (start > m->latest)
    m->latest = start;
  while (m->nheap && (m->buffered > m->max_items || m->heap[0].key + m->lag <= m->latest))
    pop(m);
  return 0;
}

void merge_flush(merge *m) {
  while (m->nheap)
    pop(m);
  m->latest = 0;
  m->last_out = 0;
}

uint64_t merge_late(const merge *m) {
  return m->late;
}

void merge_close(merge *m) {
  if (!m)
    return;
  for (uint32_t i = 0; i < m->nf; i++)
    free(m->f[i].buf);
  free(m->f);
  free(m->heap);
  free(m->scratch);
  free(m);
}

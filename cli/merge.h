/* merge.h — put the calls of one trace file back in start-time order, in
 * bounded memory.
 *
 * A trace file holds each thread's calls in order, but threads interleave
 * in batches (the recorder's writer drains one thread's ring at a time).
 * The merger keeps a FIFO per thread and a heap of the FIFOs' heads, and
 * hands an item on once it can no longer be overtaken: when it started at
 * least `lag_ns` before the latest start seen (the recorder writes a call
 * within milliseconds of its end), or when the buffered items would exceed
 * `max_bytes`, or at merge_flush. An item that arrives after a later one
 * was handed on is still handed on, and counted (merge_late). */
#ifndef STANDIN_CLI_MERGE_H
#define STANDIN_CLI_MERGE_H

#include <stddef.h>
#include <stdint.h>

typedef struct merge merge; /* incomplete type */

/* Called with each item and its start, in start order. */
typedef void (*merge_emit_fn)(uint64_t start, void *item, void *arg);

/* Items of item_size bytes; 0 or -1 when out of memory. */
int merge_open(merge **m, size_t item_size, size_t max_bytes, uint64_t lag_ns, merge_emit_fn emit,
               void *arg);

/* Copy item (of stream `stream`, which must push in non-decreasing start
 * order) in; may hand earlier items on. -1 when out of memory (the item
 * is then handed on at once). */
int merge_push(merge *m, uint32_t stream, uint64_t start, const void *item);

/* Hand every buffered item on, in order (end of a file). */
void merge_flush(merge *m);

/* Items handed on after an item that started later than them. */
uint64_t merge_late(const merge *m);

void merge_close(merge *m); /* accepts NULL */

#endif

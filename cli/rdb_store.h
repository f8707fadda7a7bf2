/* rdb_store.h — the replay database's byte strings and its writing out
 * (cli/replaydb.c builds the rest: entries, samples, tables). Internal to
 * the CLI. */
#ifndef STANDIN_CLI_RDB_STORE_H
#define STANDIN_CLI_RDB_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "replaydb.h"

/* ---- the bytes entries keep -----------------------------------------------
 *
 * Requests, responses (or the images and rows rebuilt from them) and
 * streams are appended to two arenas as the calls are read, each distinct
 * byte string once (a pack's response is often a later unpack's request),
 * and entries keep offsets into them; rdb_publish writes the arenas to
 * the database file as they are, less the strings no entry looks up. Before,
 * each string was a copy of its own, copied again into a private image of
 * the whole database that was then written out: building pbtest basic
 * 20000's 71 MB database held 231 MB (a 100,000-loop recording, 1.12 GB). */
typedef struct {
  uint8_t *m; /* anonymous memory, grown by mremap: keep offsets, not pointers */
  uint64_t len, cap;
  /* the strings stored: offset + 1, length and XXH3-64, open addressing on
   * the hash (kept: growing the set does not hash every string again) */
  uint64_t *set_off, *set_len, *set_hash;
  size_t set_mask, nset;
} rdb_arena;

/* x rounded up to a multiple of 8: where the database's strings start. */
static inline uint64_t rdb_al8(uint64_t x) {
  return (x + 7) & ~7ull;
}

/* The bytes at offset + 1 off1 of a, or NULL for 0. Valid until the next
 * rdb_arena_put on a. */
static inline const uint8_t *rdb_arena_at(const rdb_arena *a, uint64_t off1) {
  return off1 ? a->m + (off1 - 1) : NULL;
}

/* A string of an arena (offset from, len bytes) and where the database
 * has it (to). */
typedef struct {
  uint64_t from, len, to;
} rdb_span;

/* The database as written: the tables (front), then the strings of the
 * two arenas that entries look up. */
typedef struct {
  const uint8_t *front;
  uint64_t front_len, size;
  const rdb_arena *data, *streams;
  const rdb_span *dspan, *sspan;
  size_t ndspan, nsspan;
} rdb_parts;

/* Offset + 1 of len bytes at p in a (p may be NULL when len is 0): of the
 * same bytes stored before, or of a copy. 0: out of memory. p must not
 * point into a. Offsets are multiples of 8 (tree images need it). */
uint64_t rdb_arena_put(rdb_arena *a, const void *p, uint64_t len);

/* a's memory released; a is empty again. */
void rdb_arena_free(rdb_arena *a);

/* Sort and deduplicate the n spans of t, and place them from *pos on, in
 * arena order (strings stay 8-byte aligned). Returns the new count. */
size_t rdb_place_spans(rdb_span *t, size_t n, uint64_t *pos);

/* Where the database has the string at offset + 1 off1 of len bytes
 * (placed by rdb_place_spans). */
uint64_t rdb_span_to(const rdb_span *t, size_t n, uint64_t off1, uint64_t len);

/* Put the database d in an unnamed file every process of the run
 * maps, and map it for the summary. A temporary file on disk comes first:
 * touching every page of a 70 MB database and unmapping it took 0.9 + 0.25
 * ms from such a file, 7.2 + 5.3 ms from a memfd (shared memory, which
 * Debian gives no large folios), and a replayed pbtest basic 20000 exited
 * 1.1 ms sooner (its median start and exit, 7 alternating runs). Where no
 * directory takes a temporary file, or one is full, a memfd. A file whose
 * pages are still dirty after ~30 s (the kernel's default) is written back
 * to disk once: its writable part is in a memfd of its own (publish_rw),
 * so the file is never written again after this. */
int rdb_publish(const rdb_parts *d, uint64_t ro_off, rdb_built *out);

/* One read of every 4 KiB page of the published database b, here, before
 * the program starts. On a VM under shadow paging (an AMD EPYC host under
 * PVM, 2026-12-03), the first access from user space to a page of the
 * page cache cost ~0.8 us, whichever process made it, and ~55 ns in every
 * process after: a 64 MiB file written 2 MiB at a time, read one byte a
 * page in a fresh process, 750-1,130 ns a page, and 53-54 ns after
 * another process had read it so (MAP_POPULATE or MADV_POPULATE_READ in
 * that process, at 8 ns a page, left it at 750-1,130). Inside a replay
 * those first accesses were harness time: a software replay of pbtest
 * basic 20000 (a 62 MiB database) overran 22-29 ms of its calls and took
 * 113-125 ms of wall (102-103 natively) in six of seven alternating
 * rounds (11 ms and 108 ms in the other, whose database may have had the
 * pages of the one before, which come back cheap); with the pages read
 * here first, 12-14 ms and 108-113 ms in all seven. The
 * loop costs what those accesses would have, before the program's clock
 * starts (counted in the build's time, not in its peak memory: the pages
 * are the file's, in memory whether or not this process maps them). */
void rdb_touch(const rdb_built *b);

#endif

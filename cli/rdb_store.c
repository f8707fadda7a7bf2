/* rdb_store.c — the replay database's byte strings (an arena that stores
 * each once) and the writing of the database to the unnamed file every
 * process of the run maps (rdb_store.h). */
#include "rdb_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

#define XXH_INLINE_ALL
#include <xxhash.h>


#define ARENA_MIN (1u << 20)

static int arena_reserve(rdb_arena *a, uint64_t more) {
  if (a->m && more <= a->cap - a->len)
    return 0;
  uint64_t cap = a->cap ? a->cap : ARENA_MIN;
  while (cap - a->len < more)
    cap *= 2;
  void *m = a->m ? mremap(a->m, a->cap, cap, MREMAP_MAYMOVE)
                 : mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return -1;
  /* huge pages where the kernel has them (THP "madvise"): on a
   * shadow-paged VM, where a 4 KiB page's first touch costs ~10 us, the
   * layout's image took 1.05 s against 1.94 that way */
  madvise(m, cap, MADV_HUGEPAGE);
  a->m = m;
  a->cap = cap;
  return 0;
}

static int arena_grow_set(rdb_arena *a) {
  size_t n = a->set_mask ? (a->set_mask + 1) * 2 : 1024;
  uint64_t *off = calloc(n, sizeof *off), *len = calloc(n, sizeof *len),
           *hash = calloc(n, sizeof *hash);
  if (!off || !len || !hash) {
    free(off);
    free(len);
    free(hash);
    return -1;
  }
  for (size_t i = 0; i <= a->set_mask && a->set_off; i++) {
    if (!a->set_off[i])
      continue;
    size_t j = (size_t)a->set_hash[i] & (n - 1);
    while (off[j])
      j = (j + 1) & (n - 1);
    off[j] = a->set_off[i];
    len[j] = a->set_len[i];
    hash[j] = a->set_hash[i];
  }
  free(a->set_off);
  free(a->set_len);
  free(a->set_hash);
  a->set_off = off;
  a->set_len = len;
  a->set_hash = hash;
  a->set_mask = n - 1;
  return 0;
}

/* Offset + 1 of len bytes at p in a (p may be NULL when len is 0): of the
 * same bytes stored before, or of a copy. 0: out of memory. p must not
 * point into a. Offsets are multiples of 8 (tree images need it). */
uint64_t rdb_arena_put(rdb_arena *a, const void *p, uint64_t len) {
  if ((a->nset + 1) * 2 > a->set_mask + 1 && arena_grow_set(a) != 0)
    return 0;
  uint64_t h = XXH3_64bits(p, (size_t)len);
  size_t j = (size_t)h & a->set_mask;
  for (; a->set_off[j]; j = (j + 1) & a->set_mask)
    if (a->set_hash[j] == h && a->set_len[j] == len &&
        (len == 0 || memcmp(a->m + a->set_off[j] - 1, p, (size_t)len) == 0))
      return a->set_off[j];
  if (arena_reserve(a, rdb_al8(len)) != 0)
    return 0;
  uint64_t at = a->len;
  if (len)
    memcpy(a->m + at, p, (size_t)len);
  a->len += rdb_al8(len);
  a->set_off[j] = at + 1;
  a->set_len[j] = len;
  a->set_hash[j] = h;
  a->nset++;
  return at + 1;
}

void rdb_arena_free(rdb_arena *a) {
  if (a->m)
    munmap(a->m, a->cap);
  free(a->set_off);
  free(a->set_len);
  free(a->set_hash);
  memset(a, 0, sizeof *a);
}

static int span_cmp(const void *x, const void *y) {
  const rdb_span *a = x, *b = y;
  if (a->from != b->from)
    return a->from < b->from ? -1 : 1;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* Sort and deduplicate the n spans of t, and place them from *pos on, in
 * arena order (strings stay 8-byte aligned). Returns the new count. */
size_t rdb_place_spans(rdb_span *t, size_t n, uint64_t *pos) {
  if (n > 1)
    qsort(t, n, sizeof *t, span_cmp);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k && t[k - 1].from == t[i].from && t[k - 1].len == t[i].len)
      continue;
    t[k] = t[i];
    t[k].to = *pos;
    *pos += rdb_al8(t[k].len);
    k++;
  }
  return k;
}

/* Where the database has the string at offset + 1 off1 of len bytes
 * (placed by place_spans). */
uint64_t rdb_span_to(const rdb_span *t, size_t n, uint64_t off1, uint64_t len) {
  rdb_span key = {.from = off1 - 1, .len = len};
  const rdb_span *f = bsearch(&key, t, n, sizeof *t, span_cmp);
  return f ? f->to : 0; /* always found: every kept string was placed */
}

/* Writes of this size, at offsets that are multiples of it, let a file
 * system with large folios (ext4 and xfs on recent kernels) cache the
 * database in 2 MiB folios, which a process maps with one page-table entry
 * each (the shim maps the file 2 MiB-aligned: rp.c map_aligned). A call
 * that reads an entry nothing has touched then misses no TLB (with the
 * next call's lines prefetched, rp.c prefetch_next: a new 1 KB pack each
 * call 678 -> 548 ns of harness on an EPYC VM, medians of 12 rounds, when
 * the kernel finds 2 MiB of free memory for a folio; when not, it falls
 * back to smaller ones). Allocating 2 MiB folios costs the
 * build: 65 MB took 730-880 ms against 640-790 there (4 alternating runs),
 * and on a VM that hands free memory back to its host ~2 ms a folio after
 * an idle second (a 70 MB database 150-190 ms instead of 18, 2026-11-28),
 * before the program starts. */
#define PUBLISH_CHUNK (2u << 20)

/* m[0, len) at offset at of fd */
static int write_at(int fd, const uint8_t *m, uint64_t len, uint64_t at) {
  for (uint64_t off = 0; off < len;) {
    size_t n = len - off < PUBLISH_CHUNK ? (size_t)(len - off) : PUBLISH_CHUNK;
    ssize_t w = pwrite(fd, m + off, n, (off_t)(at + off));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    off += (uint64_t)w;
  }
  return 0;
}

/* Writes the database through one PUBLISH_CHUNK buffer, at offsets that
 * are multiples of it. */
typedef struct {
  int fd, err;
  uint8_t *buf;
  uint64_t at; /* file offset of buf[0] */
  size_t n;
} db_writer;

static void w_flush(db_writer *w) {
  if (!w->err && w->n && write_at(w->fd, w->buf, w->n, w->at) != 0)
    w->err = 1;
  w->at += w->n;
  w->n = 0;
}

/* len bytes at p, or zeros for p NULL */
static void w_put(db_writer *w, const uint8_t *p, uint64_t len) {
  while (len && !w->err) {
    size_t k = PUBLISH_CHUNK - w->n < len ? PUBLISH_CHUNK - w->n : (size_t)len;
    if (p) {
      memcpy(w->buf + w->n, p, k);
      p += k;
    } else {
      memset(w->buf + w->n, 0, k);
    }
    w->n += k;
    len -= k;
    if (w->n == PUBLISH_CHUNK)
      w_flush(w);
  }
}

static void w_spans(db_writer *w, const rdb_arena *a, const rdb_span *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    w_put(w, NULL, t[i].to - (w->at + w->n)); /* alignment */
    w_put(w, a->m + t[i].from, t[i].len);
  }
}

static int write_db(int fd, const rdb_parts *d) {
  db_writer w = {.fd = fd, .buf = malloc(PUBLISH_CHUNK)};
  if (!w.buf)
    return -1;
  w_put(&w, d->front, d->front_len);
  w_spans(&w, d->data, d->dspan, d->ndspan);
  w_spans(&w, d->streams, d->sspan, d->nsspan);
  w_put(&w, NULL, d->size - (w.at + w.n));
  w_flush(&w);
  free(w.buf);
  return w.err ? -1 : 0;
}

/* fd holding the database d, mapped shared into *base; -1 (fd closed) if
 * it cannot be. */
static int fill_and_map(int fd, const rdb_parts *d, uint8_t **base) {
  if (fd < 0)
    return -1;
  if (write_db(fd, d) == 0) {
    *base = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (*base != MAP_FAILED)
      return fd;
  }
  int e = errno;
  close(fd); /* full, say: the file goes with its descriptor */
  errno = e;
  return -1;
}

/* The writable part m[0, ro_off) (header, statistics, timelines, occurrence
 * counters) in shared memory of its own, mapped over the file's first
 * ro_off bytes at base (every process does the same: rp.c), so offsets stay
 * the same. In the file, a process's first write to each page took ext4's
 * page_mkwrite (the inode's times, through the journal: ~4 us a page, one
 * page per 512 entries) inside the call that reached it; faulting them all
 * in at start instead cost a software replay of pbtest 1.5% of its wall.
 * A memfd's pages map without that. Returns the memfd, or -1 when there is
 * none (the file's own pages then serve, as before). */
static int publish_rw(const uint8_t *m, uint64_t ro_off, int fd, uint8_t *base) {
  int rw = memfd_create("standin-replay-counters", MFD_CLOEXEC);
  if (rw < 0)
    return -1;
  if (write_at(rw, m, ro_off, 0) == 0 &&
      mmap(base, ro_off, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, rw, 0) != MAP_FAILED)
    return rw;
  close(rw);
  /* a failed MAP_FIXED may have unmapped the range: the file's pages again */
  if (mmap(base, ro_off, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED)
    return -2;
  return -1;
}

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
int rdb_publish(const rdb_parts *d, uint64_t ro_off, rdb_built *out) {
  const uint8_t *m = d->front;
  uint64_t len = d->size;
  const char *dirs[] = {getenv("TMPDIR"), "/var/tmp", "/tmp"};
  uint8_t *base = NULL;
  int fd = -1, rw = -1;
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs && fd < 0; i++)
    if (dirs[i] && *dirs[i])
      fd = fill_and_map(open(dirs[i], O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), d, &base);
  if (fd >= 0 && ro_off > 0 && ro_off < len && (rw = publish_rw(m, ro_off, fd, base)) == -2) {
    cli_err("cannot map the replay database's counters: %s", strerror(errno));
    munmap(base, len);
    close(fd);
    return -1;
  }
  if (fd < 0)
    fd = fill_and_map(memfd_create("standin-replay", MFD_CLOEXEC), d, &base);
  if (fd < 0 && errno == EFBIG) { /* RLIMIT_FSIZE holds for memfds too */
    struct rlimit fl;
    getrlimit(RLIMIT_FSIZE, &fl);
    cli_err("cannot store the replay database (%llu bytes): the file size limit (ulimit -f: "
            "%llu bytes) is below it; raise the limit",
            (unsigned long long)len, (unsigned long long)fl.rlim_cur);
    return -1;
  }
  if (fd < 0) {
    cli_err("cannot store the replay database (%llu bytes) in a temporary file or in memory: "
            "%s; free space in $TMPDIR, /var/tmp or /tmp, or memory",
            (unsigned long long)len, strerror(errno));
    return -1;
  }
  out->fd = fd;
  out->fd_rw = rw;
  out->base = base;
  out->size = len;
  return 0;
}

void rdb_touch(const rdb_built *b) {
  if (!b->base)
    return;
  volatile uint8_t sink = 0;
  for (uint64_t off = 0; off < b->size; off += 4096)
    sink += b->base[off];
  (void)sink;
}

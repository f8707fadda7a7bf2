/* shim_alloc.c — see shim_alloc.h. */
#include "shim_alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- blocks of a thread's own ------------------------------------------- */

typedef struct {
  void **slot;
  void *pad; /* the block after it stays 16-byte aligned */
} thread_block;

static void thread_block_gone(void *p) {
  thread_block *h = p;
  *h->slot = NULL;
  shim_free(h);
}

void *shim_thread_block(shim_thread_key *k, void **slot, size_t n) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  if (!atomic_load_explicit(&k->ready, memory_order_acquire)) {
    pthread_mutex_lock(&lock);
    if (!atomic_load_explicit(&k->ready, memory_order_relaxed) &&
        pthread_key_create(&k->key, thread_block_gone) == 0)
      atomic_store_explicit(&k->ready, 1, memory_order_release);
    pthread_mutex_unlock(&lock);
    if (!atomic_load_explicit(&k->ready, memory_order_acquire))
      return NULL;
  }
  thread_block *h = shim_zalloc(sizeof *h + n);
  if (!h)
    return NULL;
  h->slot = slot;
  pthread_setspecific(k->key, h);
  return *slot = h + 1;
}

/* ---- pages mapped ahead of a filling buffer ------------------------------ */

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#define AHEAD_BYTES (64u << 10)

/* On the 2-core EPYC VM (shadow paging) a 4 KiB page's first touch took
 * ~10 us as a fault and ~4.6 us mapped by MADV_POPULATE_WRITE, 64 KiB or
 * 256 KiB a call alike (1 MiB: 2.5-3.1 ms against 1.2-1.5). Huge pages
 * were tried instead (PERFORMANCE.md): ~0.2 ms for 2 MiB most of the
 * time, but ~5 ms one time in six there, paid for the whole 2 MiB however
 * little of it a buffer used. A kernel without the advice (EINVAL) leaves
 * the pages to fault as before. */
static uint64_t *populated_mark(void *p);

/* How far past upto bytes of a buffer to map: as far as the buffer holds
 * already, a page at least and AHEAD_BYTES at most (a small buffer maps a
 * few pages, not 64 KiB it never uses). */
static size_t ahead_of(size_t upto, size_t page) {
  return upto < page ? page : upto < AHEAD_BYTES ? upto : AHEAD_BYTES;
}

void shim_populate_ahead(void *p, size_t *ready, size_t upto, size_t cap) {
  if (upto <= *ready || !p)
    return;
  uint64_t *mark = populated_mark(p);
  if (mark && *mark > *ready) { /* a kept block: mapped by its last user */
    *ready = *mark < cap ? (size_t)*mark : cap;
    if (upto <= *ready)
      return;
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t ahead = ahead_of(upto, page);
  size_t end = upto > cap || ahead > cap - upto ? cap : upto + ahead;
  /* whole pages inside the buffer (a slab block's neighbours' pages may
   * share its first: mapping them changes nothing) */
  uintptr_t a = ((uintptr_t)p + *ready) & ~(uintptr_t)(page - 1);
  uintptr_t b = ((uintptr_t)p + end) & ~(uintptr_t)(page - 1);
  if (b > a)
    madvise((void *)a, (size_t)(b - a), MADV_POPULATE_WRITE);
  *ready = end;
  if (mark && end > *mark)
    *mark = end;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)

void *shim_alloc(size_t n) {
  return malloc(n ? n : 1);
}
void *shim_zalloc(size_t n) {
  return calloc(1, n ? n : 1);
}
void *shim_realloc(void *p, size_t n) {
  return realloc(p, n ? n : 1);
}
void shim_free(void *p) {
  free(p);
}
void shim_alloc_fork_prepare(void) {}
void shim_alloc_fork_release(void) {}
unsigned long long shim_alloc_kept_bytes(void) {
  return 0;
}
static uint64_t *populated_mark(void *p) {
  (void)p;
  return NULL; /* plain malloc: nothing known */
}

#else

#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "shim.h"

/* Class k holds blocks of 64 << k bytes, the 16-byte header included. */
#define MIN_SHIFT 6
#define NCLASS 40
#define SLAB_BYTES (1u << 20)
#define SLAB_CLASS_MAX (16 - MIN_SHIFT) /* up to 64 KiB from slabs */
#define KEEP_BYTES (64ull << 20)        /* free large blocks kept per class */
/* and in all; but one block of each class up to KEEP_BYTES is always kept
 * (under 128 MiB more), and larger blocks never are */
#define KEEP_TOTAL (256ull << 20)
#define MAGIC 0x53746e41u               /* "Stn" + 'A' */

/* populated: bytes from the block's start that shim_populate_ahead has
 * mapped. A block keeps its pages while it is kept for reuse (only blocks
 * not kept are unmapped), and the mark with them: the next user of a kept
 * block makes no system call to map pages that are in already (a replayed
 * decode's three 64 KiB buffers made three a decode). It lies past the
 * free list's link, so it survives the block's time on the list. */
typedef struct {
  uint32_t magic;
  uint32_t cls;
  uint64_t populated;
} hdr;

typedef struct block {
  struct block *next;
} block;

static struct {
  atomic_flag lock;
  block *free;
  uint64_t nfree;
} cls[NCLASS];

static atomic_flag slab_lock;
static _Atomic uint64_t kept_large; /* bytes in free large blocks */
static uint8_t *slab_at, *slab_end;
/* The slab's pages are mapped ahead of what is carved (slab_ready: as far
 * as they are), as shim_populate_ahead maps a buffer's (ahead_of), with
 * MADV_POPULATE_WRITE: ~4.6 us a page
 * against ~10 us a fault on the shadow-paged EPYC VM. A replay of pbtest
 * basic 20000, whose unpacks keep 256 shapes of up to 4 KiB (pb_image.c),
 * took 165 page faults instead of 414, and its unpacks' harness 18.4-21.4
 * ms instead of 19.5-22.0 (the ten fastest of 12 alternating rounds
 * each). */
static uint8_t *slab_start, *slab_ready;

/* Held for a few instructions; a holder preempted with more threads than
 * cores would leave spinners burning their whole time slice, so after a
 * short spin the waiter yields. */
static void lock(atomic_flag *f) {
  for (unsigned spins = 0; atomic_flag_test_and_set_explicit(f, memory_order_acquire); spins++)
    if (spins < 64)
      __builtin_ia32_pause();
    else
      sched_yield();
}

static void unlock(atomic_flag *f) {
  atomic_flag_clear_explicit(f, memory_order_release);
}

static uint64_t class_bytes(unsigned k) {
  return 64ull << k;
}

static int class_of(size_t n, unsigned *k) {
  if (n > (class_bytes(NCLASS - 1) - sizeof(hdr)))
    return -1;
  uint64_t total = (uint64_t)n + sizeof(hdr);
  unsigned c = 0;
  while (class_bytes(c) < total)
    c++;
  *k = c;
  return 0;
}

static void *map(uint64_t bytes) {
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void *carve(unsigned k) {
  uint64_t size = class_bytes(k);
  lock(&slab_lock);
  if (!slab_at || (uint64_t)(slab_end - slab_at) < size) {
    /* what is left of the old slab is given up: at most 64 KiB a MiB */
    uint8_t *s = map(SLAB_BYTES);
    if (!s) {
      unlock(&slab_lock);
      return NULL;
    }
    slab_at = slab_start = slab_ready = s;
    slab_end = s + SLAB_BYTES;
  }
  void *p = slab_at;
  slab_at += size;
  uint8_t *from = NULL, *to = NULL;
  if (slab_at > slab_ready) {
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t ahead = ahead_of((size_t)(slab_at - slab_start), (size_t)page);
    uint64_t room = (uint64_t)(slab_end - slab_at);
    uint8_t *end = slab_at + (ahead < room ? ahead : room);
    end = slab_start + ((uint64_t)(end - slab_start) + page - 1) / page * page;
    from = slab_ready;
    to = slab_ready = end < slab_end ? end : slab_end;
  }
  unlock(&slab_lock);
  /* outside the lock: another thread's block in that range faults in as
   * before if it is written first, and the advice maps what is left */
  if (to > from)
    madvise(from, (size_t)(to - from), MADV_POPULATE_WRITE);
  return p;
}

/* A free block of class k, or NULL. */
static hdr *take_kept(unsigned k) {
  lock(&cls[k].lock);
  block *b = cls[k].free;
  if (b) {
    cls[k].free = b->next;
    cls[k].nfree--;
    if (k > SLAB_CLASS_MAX)
      atomic_fetch_sub_explicit(&kept_large, class_bytes(k), memory_order_relaxed);
  }
  unlock(&cls[k].lock);
  return (hdr *)b;
}

void *shim_alloc(size_t n) {
  unsigned k;
  if (class_of(n, &k) != 0)
    return NULL;
  hdr *h = take_kept(k);
  if (!h) {
    h = k <= SLAB_CLASS_MAX ? carve(k) : map(class_bytes(k));
    if (h)
      h->populated = 0;
  }
  if (!h)
    return NULL;
  h->magic = MAGIC;
  h->cls = k;
  return h + 1;
}

void *shim_zalloc(size_t n) {
  void *p = shim_alloc(n);
  if (p)
    memset(p, 0, n);
  return p;
}

static hdr *header(void *p) {
  hdr *h = (hdr *)p - 1;
  if (SHIM_UNLIKELY(h->magic != MAGIC || h->cls >= NCLASS)) {
    shim_say("internal error: a buffer at %p was not standin's own (shim_alloc); stopping", p);
    abort();
  }
  return h;
}

static uint64_t *populated_mark(void *p) {
  return &header(p)->populated;
}

void shim_free(void *p) {
  if (!p)
    return;
  hdr *h = header(p);
  unsigned k = h->cls;
  h->magic = 0; /* a second free of it is caught */
  lock(&cls[k].lock);
  uint64_t size = class_bytes(k);
  int keep = k <= SLAB_CLASS_MAX ||
             (size <= KEEP_BYTES &&
              (cls[k].nfree == 0 ||
               ((cls[k].nfree + 1) * size <= KEEP_BYTES &&
                atomic_load_explicit(&kept_large, memory_order_relaxed) + size <= KEEP_TOTAL)));
  if (keep && k > SLAB_CLASS_MAX)
    atomic_fetch_add_explicit(&kept_large, size, memory_order_relaxed);
  if (keep) {
    block *b = (block *)h;
    b->next = cls[k].free;
    cls[k].free = b;
    cls[k].nfree++;
  }
  unlock(&cls[k].lock);
  if (!keep)
    munmap(h, class_bytes(k));
}

void *shim_realloc(void *p, size_t n) {
  if (!p)
    return shim_alloc(n);
  hdr *h = header(p);
  uint64_t room = class_bytes(h->cls) - sizeof(hdr);
  if (n <= room)
    return p;
  unsigned k;
  if (class_of(n, &k) != 0)
    return NULL;
  /* A large block is a mapping of its own: grown by moving its pages, not
   * copying them into a new block whose pages all fault again. A buffer
   * that doubles as it fills (a decode's compressed bytes, read to the
   * end before the request is known) then faults each page once: on a VM
   * whose faults take ~2 us, a 380 KB JPEG's two such buffers took 1.3 ms
   * to fill when grown by copying. */
  if (h->cls > SLAB_CLASS_MAX) {
    /* A kept block of the new size first: its pages are in already, so a
     * buffer that grows the same way for each decode makes no system call
     * once warm. Moving pages costs a TLB shootdown across the process's
     * threads, and the moved block leaves its old class with none kept, so
     * the next decode's first buffer is mapped anew: each decode of a 90 KB
     * JPEG mapped, faulted, moved and unmapped its buffers (INTERNALS.md,
     * "The shims' own memory"). */
    hdr *q = take_kept(k);
    if (q) {
      q->magic = MAGIC;
      q->cls = k;
      memcpy(q + 1, p, room);
      shim_free(p);
      return q + 1;
    }
    void *m = mremap(h, class_bytes(h->cls), class_bytes(k), MREMAP_MAYMOVE);
    if (m != MAP_FAILED) {
      h = m;
      h->cls = k;
      return h + 1;
    }
  }
  void *q = shim_alloc(n);
  if (!q)
    return NULL; /* p stays as it was, as with realloc */
  memcpy(q, p, room);
  shim_free(p);
  return q;
}

unsigned long long shim_alloc_kept_bytes(void) {
  return atomic_load(&kept_large);
}

void shim_alloc_fork_prepare(void) {
  lock(&slab_lock);
  for (unsigned k = 0; k < NCLASS; k++)
    lock(&cls[k].lock);
}

void shim_alloc_fork_release(void) {
  for (unsigned k = 0; k < NCLASS; k++)
    unlock(&cls[k].lock);
  unlock(&slab_lock);
}

#endif

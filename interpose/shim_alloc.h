/* shim_alloc.h — standin's own heap, apart from the program's.
 *
 * The buffers a shim keeps per call (a decode's rows, its request, the
 * decoder's state) used to come from the program's malloc. That moved the
 * program's own blocks: in thumbnailer, adding one field to the shim's
 * per-decode state moved the program's row buffer from %32 = 16 to
 * %32 = 0, and libjpeg-turbo's SIMD then wrote every row with
 * non-temporal stores (placement.h), so the recorded program ran a
 * different memory path than the native one. They also made glibc trim
 * and regrow its heap between decodes: page faults the program then paid.
 *
 * Blocks here come from mmap: small ones carved from 1 MiB slabs, large
 * ones mapped whole and a few kept for reuse. One lock per size class,
 * held for a few instructions; any thread may free what another took.
 * Under a sanitizer these are plain malloc and free, so that the
 * sanitizer keeps checking the shims' own buffers.
 *
 * Only the shims' own buffers belong here: never memory the program
 * frees, or that standin frees on the program's behalf. */
#ifndef STANDIN_SHIM_ALLOC_H
#define STANDIN_SHIM_ALLOC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

void *shim_alloc(size_t n);
void *shim_zalloc(size_t n); /* zeroed */
void *shim_realloc(void *p, size_t n);
void shim_free(void *p);

/* A zeroed block of n bytes of the calling thread's own, on this heap from
 * its first use and freed when the thread ends: for caches too large for
 * static TLS, which glibc carves out of every thread's stack in every
 * process a shim is preloaded into (10 KB of it made a program's threads
 * with 16 KiB stacks, fine natively, fail pthread_create under replay).
 * *slot is the caller's __thread pointer, set here and cleared when the
 * block is freed (a call after, from another key's destructor, makes
 * another). k: one zeroed shim_thread_key per kind of block. NULL when out
 * of memory. */
typedef struct {
  _Atomic int ready;
  pthread_key_t key;
} shim_thread_key;
void *shim_thread_block(shim_thread_key *k, void **slot, size_t n);
/* Bytes held in free large blocks, kept for reuse: at most 64 MiB a size
 * class and 256 MiB in all, except that one block of each class up to
 * 64 MiB is always kept (under 128 MiB more); larger ones never are. For
 * tests. */
unsigned long long shim_alloc_kept_bytes(void);

/* A buffer that fills from the front (a decode's compressed bytes, read
 * to the end before the request is known) maps its pages ahead of the
 * writes: before writing up to offset `upto` of the `cap` bytes at p (a
 * block from shim_alloc or shim_realloc), the pages from *ready on are
 * mapped in one system call, past upto by as much as the buffer holds
 * (a page at least, 64 KiB at most; never past cap), and *ready moves
 * there. A page's first touch then costs no fault of its
 * own. The block remembers how far it was mapped, through frees and
 * reuse: *ready then starts there, and a reused block maps nothing again.
 * *ready is the caller's copy: 0 for a new buffer, and after a realloc
 * (the block may be another). */
void shim_populate_ahead(void *p, size_t *ready, size_t upto, size_t cap);

/* fork: take every lock before (last, after the writer is parked), and
 * release them after, in the parent and in the child. */
void shim_alloc_fork_prepare(void);
void shim_alloc_fork_release(void);

#endif

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

#include <stddef.h>

void *shim_alloc(size_t n);
void *shim_zalloc(size_t n); /* zeroed */
void *shim_realloc(void *p, size_t n);
void shim_free(void *p);

/* Bytes held in free large blocks, kept for reuse: at most 64 MiB a size
 * class and 256 MiB in all, except that one block of each class up to
 * 64 MiB is always kept (under 128 MiB more); larger ones never are. For
 * tests. */
unsigned long long shim_alloc_kept_bytes(void);

/* fork: take every lock before (last, after the writer is parked), and
 * release them after, in the parent and in the child. */
void shim_alloc_fork_prepare(void);
void shim_alloc_fork_release(void);

#endif

/* Unit tests for interpose/shim_alloc.c: the shims' own heap. */
#include "shim_alloc.h"

#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Every size class, both sides of each boundary: the block holds what was
 * asked for, is 16-byte aligned, and keeps what was written while other
 * blocks come and go. */
START_TEST(test_blocks_hold_their_bytes) {
  enum { N = 200 };
  uint8_t *b[N];
  size_t len[N];
  for (int i = 0; i < N; i++) {
    size_t base = (size_t)1 << (i % 24);
    len[i] = base + (size_t)(i % 3) - 1; /* just under, at, just over */
    if (len[i] == 0)
      len[i] = 1;
    b[i] = shim_alloc(len[i]);
    ck_assert_ptr_nonnull(b[i]);
    ck_assert_uint_eq((uintptr_t)b[i] % 16, 0);
    memset(b[i], i & 0xff, len[i]);
  }
  for (int i = 0; i < N; i += 2) /* free half, allocate again over them */
    shim_free(b[i]);
  for (int i = 0; i < N; i += 2) {
    b[i] = shim_alloc(len[i]);
    memset(b[i], i & 0xff, len[i]);
  }
  for (int i = 0; i < N; i++) {
    for (size_t k = 0; k < len[i]; k += 1 + len[i] / 64)
      ck_assert_msg(b[i][k] == (i & 0xff), "block %d (%zu bytes) byte %zu", i, len[i], k);
    ck_assert(b[i][len[i] - 1] == (i & 0xff));
    shim_free(b[i]);
  }
  shim_free(NULL);
  ck_assert_ptr_nonnull(shim_alloc(0));
}
END_TEST

START_TEST(test_zalloc_zeroes_reused_blocks) {
  for (size_t n = 1; n <= (1u << 20); n *= 7) {
    uint8_t *p = shim_alloc(n);
    memset(p, 0xff, n);
    shim_free(p);
    uint8_t *z = shim_zalloc(n);
    for (size_t k = 0; k < n; k++)
      ck_assert_msg(z[k] == 0, "%zu bytes: byte %zu is %d", n, k, z[k]);
    shim_free(z);
  }
}
END_TEST

START_TEST(test_realloc_keeps_the_prefix) {
  uint8_t *p = shim_realloc(NULL, 10);
  for (int i = 0; i < 10; i++)
    p[i] = (uint8_t)i;
  size_t have = 10;
  for (size_t n = 11; n < (3u << 20); n = n * 3 + 1) {
    p = shim_realloc(p, n);
    ck_assert_ptr_nonnull(p);
    for (size_t k = 0; k < have; k++)
      ck_assert_msg(p[k] == (uint8_t)k, "grown to %zu: byte %zu", n, k);
    for (size_t k = have; k < n; k++)
      p[k] = (uint8_t)k;
    have = n;
  }
  uint8_t *q = shim_realloc(p, 5);
  ck_assert_ptr_nonnull(q);
  for (int k = 0; k < 5; k++)
    ck_assert_uint_eq(q[k], (uint8_t)k);
  shim_free(q);
}
END_TEST

/* A large block grows in place or moves (mremap): its bytes stay, and the
 * grown block is freed, kept and handed out again as one of its new class,
 * whole. */
START_TEST(test_realloc_of_a_large_block_keeps_its_class) {
  size_t n = 200u << 10; /* a 256 KiB block */
  uint8_t *p = shim_alloc(n);
  ck_assert_ptr_nonnull(p);
  for (size_t k = 0; k < n; k++)
    p[k] = (uint8_t)(k * 7);
  size_t m = 3u << 20; /* a 4 MiB block */
  p = shim_realloc(p, m);
  ck_assert_ptr_nonnull(p);
  for (size_t k = 0; k < n; k++)
    ck_assert_msg(p[k] == (uint8_t)(k * 7), "byte %zu", k);
  memset(p + n, 0xA5, m - n);
  shim_free(p);
  uint8_t *q = shim_alloc(m);
  ck_assert_ptr_nonnull(q);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ck_assert_ptr_eq(q, p);        /* the kept block of that class */
  memset(q, 1, (4u << 20) - 16); /* all of the class is mapped */
#endif
  shim_free(q);
}
END_TEST

/* A large block grown to a class with a kept block takes that block, whose
 * pages are in already, instead of moving its own (a decode's buffers grew
 * so every time: mapped, faulted, moved, unmapped); its bytes stay. */
START_TEST(test_realloc_takes_a_kept_block_of_the_new_class) {
  uint8_t *kept = shim_alloc(200u << 10); /* a 256 KiB block, then kept */
  ck_assert_ptr_nonnull(kept);
  shim_free(kept);
  size_t n = 100u << 10; /* a 128 KiB block, mapped alone */
  uint8_t *p = shim_alloc(n);
  ck_assert_ptr_nonnull(p);
  for (size_t k = 0; k < n; k++)
    p[k] = (uint8_t)(k * 13);
  uint8_t *q = shim_realloc(p, 200u << 10);
  ck_assert_ptr_nonnull(q);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ck_assert_ptr_eq(q, kept);
#endif
  for (size_t k = 0; k < n; k++)
    ck_assert_msg(q[k] == (uint8_t)(k * 13), "byte %zu", k);
  memset(q + n, 0x5A, (200u << 10) - n);
  /* the block left behind is kept, and handed out whole */
  uint8_t *r = shim_alloc(n);
  ck_assert_ptr_nonnull(r);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  ck_assert_ptr_eq(r, p);
#endif
  memset(r, 3, n);
  for (size_t k = 0; k < n; k++)
    ck_assert_msg(q[k] == (uint8_t)(k * 13), "byte %zu after the old block was reused", k);
  shim_free(r);
  shim_free(q);
}
END_TEST

/* A filling buffer's pages are mapped ahead of its writes, as far as it
 * holds already (a page at least, 64 KiB at most), never past its end, and
 * what it holds stays: the advice maps pages, it does not write them (a
 * slab block's neighbour shares its pages). */
START_TEST(test_populate_ahead_maps_without_writing) {
  size_t cap = 300u << 10;
  uint8_t *before = shim_alloc(100), *p = shim_alloc(cap), *after = shim_alloc(100);
  ck_assert_ptr_nonnull(before);
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_nonnull(after);
  memset(before, 0x11, 100);
  memset(after, 0x22, 100);
  size_t ready = 0;
  for (size_t k = 0; k < 1000; k++)
    p[k] = (uint8_t)(k * 3);
  memset(p + 200000, 0x5A, 1000); /* beyond what is ready */
  shim_populate_ahead(p, &ready, 1000, cap); /* a page ahead */
  ck_assert_uint_eq(ready, 1000 + 4096);
  shim_populate_ahead(p, &ready, 2000, cap); /* within what is ready: nothing */
  ck_assert_uint_eq(ready, 1000 + 4096);
  shim_populate_ahead(p, &ready, 20000, cap); /* as far ahead as it holds */
  ck_assert_uint_eq(ready, 40000);
  shim_populate_ahead(p, &ready, 100000, cap); /* 64 KiB ahead at most */
  ck_assert_uint_eq(ready, 100000 + (64u << 10));
  shim_populate_ahead(p, &ready, cap - 10, cap); /* near the end: to the end */
  ck_assert_uint_eq(ready, cap);
  for (size_t k = 0; k < 1000; k++)
    ck_assert_msg(p[k] == (uint8_t)(k * 3), "byte %zu", k);
  for (size_t k = 200000; k < 201000; k++)
    ck_assert_msg(p[k] == 0x5A, "byte %zu", k);
  for (size_t k = 0; k < 100; k++)
    ck_assert(before[k] == 0x11 && after[k] == 0x22);
  size_t none = 0;
  shim_populate_ahead(NULL, &none, 10, 0);
  ck_assert_uint_eq(none, 0);
  shim_free(before);
  shim_free(p);
  shim_free(after);
}
END_TEST

/* The slab's pages are mapped ahead of what it hands out (one system call
 * for up to 64 KiB instead of a page fault a page): the page holding the
 * last byte of a block just carved is in before anything writes it (the
 * block's header, which shim_alloc writes, is on another page: an 8 KiB
 * block spans at least two). */
START_TEST(test_slab_pages_mapped_ahead) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return; /* shim_alloc is the sanitizer's malloc there: no slab */
#endif
  long page = sysconf(_SC_PAGESIZE);
  for (int i = 0; i < 8; i++) {
    uint8_t *q = shim_alloc(5000); /* an 8 KiB block, its header included */
    ck_assert_ptr_nonnull(q);
    uintptr_t last = (uintptr_t)q - 16 + 8192 - 1;
    void *pg = (void *)(last & ~(uintptr_t)(page - 1));
    unsigned char in = 0;
    ck_assert_int_eq(mincore(pg, (size_t)page, &in), 0);
    ck_assert_msg(in & 1, "block %d: the page of its last byte is not mapped", i);
  }
}
END_TEST

/* A kept block remembers how far its pages were mapped: its next user's
 * first call maps nothing that is in already (each replayed decode's
 * three 64 KiB buffers made a system call apiece, every decode), and a
 * new block starts from nothing. */
START_TEST(test_populate_ahead_remembers_a_kept_blocks_pages) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return; /* shim_alloc is the sanitizer's malloc there: nothing is known */
#endif
  size_t cap = 100u << 10; /* a 128 KiB block, kept when freed */
  uint8_t *p = shim_alloc(cap);
  ck_assert_ptr_nonnull(p);
  size_t ready = 0;
  shim_populate_ahead(p, &ready, 1000, cap);
  ck_assert_uint_eq(ready, 1000 + 4096);
  shim_populate_ahead(p, &ready, cap - 10, cap);
  ck_assert_uint_eq(ready, cap);
  memset(p, 0x33, cap);
  shim_free(p);
  uint8_t *q = shim_alloc(cap);
  ck_assert_ptr_eq(q, p);
  size_t again = 0;
  shim_populate_ahead(q, &again, 10, cap); /* all of it is in: ready to its end */
  ck_assert_uint_eq(again, cap);
  /* a smaller buffer in the same block: no further than its own end */
  size_t part = 0;
  shim_populate_ahead(q, &part, 10, 5000);
  ck_assert_uint_eq(part, 5000);
  /* the same size while the kept one is taken: a new block, from nothing */
  uint8_t *r = shim_alloc(cap);
  ck_assert_ptr_nonnull(r);
  size_t fresh = 0;
  shim_populate_ahead(r, &fresh, 10, cap);
  ck_assert_uint_eq(fresh, 10 + 4096);
  for (size_t k = 0; k < cap; k++)
    ck_assert_msg(q[k] == 0x33, "byte %zu", k);
  shim_free(q);
  shim_free(r);
}
END_TEST

/* Freed large blocks are kept for reuse, within bounds: 64 MiB of blocks
 * of each large class from 128 KiB to 64 MiB (mapped, barely touched),
 * 640 MiB in all, freed at once, leave at most 256 MiB kept plus one
 * block of each class; a 128 MiB block is never kept. */
START_TEST(test_large_blocks_kept_within_bounds) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return; /* shim_alloc is the sanitizer's malloc there: nothing is kept */
#endif
  static void *b[1024];
  unsigned long long before = shim_alloc_kept_bytes();
  int n = 0;
  for (int bits = 17; bits <= 26; bits++)
    for (int i = 0; i < (1 << (26 - bits)); i++)
      ck_assert_ptr_nonnull(b[n++] = shim_alloc(((size_t)1 << bits) - 16));
  void *huge = shim_alloc((size_t)100 << 20);
  for (int i = 0; i < n; i++)
    shim_free(b[i]);
  shim_free(huge);
  unsigned long long kept = shim_alloc_kept_bytes() - before;
  ck_assert_msg(kept <= (256ull + 128) << 20, "kept %llu MiB", kept >> 20);
  ck_assert_msg(kept >= 64ull << 20, "kept only %llu MiB", kept >> 20);
  void *again = shim_alloc((1 << 20) - 16); /* from what was kept */
  ck_assert_uint_lt(shim_alloc_kept_bytes(), before + kept);
  shim_free(again);
}
END_TEST

/* Program threads allocate, the writer frees: blocks cross threads all
 * the time. Each block carries its owner and sequence; a block handed out
 * twice, or freed while in use, shows as a wrong pattern. */
enum { PRODUCERS = 4, PER_THREAD = 20000, QUEUE = 1024 };

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t *q[QUEUE];
  unsigned head, tail, done;
  int bad;
} xq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0, 0, 0};

static void *producer(void *arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg;
  for (uint64_t i = 0; i < PER_THREAD; i++) {
    size_t words = 2 + (size_t)((i * 2654435761u + id) % 700);
    uint64_t *b = shim_alloc(words * 8);
    b[0] = words;
    for (size_t k = 1; k < words; k++)
      b[k] = id << 48 | i << 16 | k;
    pthread_mutex_lock(&xq.mu);
    while (xq.head - xq.tail == QUEUE)
      pthread_cond_wait(&xq.cv, &xq.mu);
    xq.q[xq.head++ % QUEUE] = b;
    pthread_cond_broadcast(&xq.cv);
    pthread_mutex_unlock(&xq.mu);
  }
  pthread_mutex_lock(&xq.mu);
  xq.done++;
  pthread_cond_broadcast(&xq.cv);
  pthread_mutex_unlock(&xq.mu);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&xq.mu);
    while (xq.head == xq.tail && xq.done < PRODUCERS)
      pthread_cond_wait(&xq.cv, &xq.mu);
    if (xq.head == xq.tail) {
      pthread_mutex_unlock(&xq.mu);
      return NULL;
    }
    uint64_t *b = xq.q[xq.tail++ % QUEUE];
    pthread_cond_broadcast(&xq.cv);
    pthread_mutex_unlock(&xq.mu);
    uint64_t tag = b[1] & ~(uint64_t)0xffff;
    for (size_t k = 1; k < b[0]; k++)
      if (b[k] != (tag | k))
        xq.bad++;
    shim_free(b);
  }
}

START_TEST(test_threads_allocate_and_another_frees) {
  pthread_t p[PRODUCERS], c;
  pthread_create(&c, NULL, consumer, NULL);
  for (int i = 0; i < PRODUCERS; i++)
    pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < PRODUCERS; i++)
    pthread_join(p[i], NULL);
  pthread_join(c, NULL);
  ck_assert_int_eq(xq.bad, 0);
}
END_TEST

/* With the locks taken around fork, as the shims do, the child allocates
 * and frees freely. */
START_TEST(test_child_of_fork_allocates) {
  void *keep = shim_alloc(100);
  shim_alloc_fork_prepare();
  pid_t pid = fork();
  shim_alloc_fork_release();
  if (pid == 0) {
    for (int i = 0; i < 1000; i++)
      shim_free(shim_alloc((size_t)i * 37));
    shim_free(keep);
    _exit(0);
  }
  int st = 0;
  ck_assert_int_eq(waitpid(pid, &st, 0), pid);
  ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  shim_free(keep);
}
END_TEST

int main(void) {
  Suite *s = suite_create("shim_alloc");
  TCase *tc = tcase_create("heap");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_blocks_hold_their_bytes);
  tcase_add_test(tc, test_zalloc_zeroes_reused_blocks);
  tcase_add_test(tc, test_realloc_keeps_the_prefix);
  tcase_add_test(tc, test_realloc_of_a_large_block_keeps_its_class);
  tcase_add_test(tc, test_realloc_takes_a_kept_block_of_the_new_class);
  tcase_add_test(tc, test_populate_ahead_maps_without_writing);
  tcase_add_test(tc, test_populate_ahead_remembers_a_kept_blocks_pages);
  tcase_add_test(tc, test_slab_pages_mapped_ahead);
  tcase_add_test(tc, test_large_blocks_kept_within_bounds);
  tcase_add_test(tc, test_threads_allocate_and_another_frees);
  tcase_add_test(tc, test_child_of_fork_allocates);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Unit tests for shim_real_opt (interpose/shim.c): finding the real function
 * in a library the program loaded outside the global scope. libunwind
 * stands in for such a library: nothing here links it, and it is loaded
 * with RTLD_LOCAL, as a plugin's dependency would be. */
#include "shim.h"

#include <check.h>
#include <dlfcn.h>
#include <link.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define LOCAL_LIB "libunwind.so.8"

static void *load_local(void) {
  void *h = dlopen(LOCAL_LIB, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(h != NULL, "%s: %s", LOCAL_LIB, dlerror());
  /* the case under test: the global scope does not have it */
  ck_assert_ptr_null(dlsym(RTLD_DEFAULT, "unw_backtrace"));
  return h;
}

/* The first function of the library asks every loaded object; the next
 * ones are found in the library that had it, and are the same functions
 * the library itself gives. */
START_TEST(test_later_functions_come_from_the_same_library) {
  void *h = load_local();
  uint64_t s0 = shim_real_scans();
  void *p = shim_real_opt("unw_backtrace");
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_eq(p, dlsym(h, "unw_backtrace"));
  ck_assert_uint_eq(shim_real_scans(), s0 + 1);
  static const char *more[] = {"_ULx86_64_init_local", "_ULx86_64_step", "_ULx86_64_get_reg"};
  for (size_t i = 0; i < sizeof more / sizeof *more; i++) {
    void *q = shim_real_opt(more[i]);
    ck_assert_msg(q != NULL && q == dlsym(h, more[i]), "%s", more[i]);
  }
  ck_assert_uint_eq(shim_real_scans(), s0 + 1);
  /* and again: each lookup is answered the same way */
  ck_assert_ptr_eq(shim_real_opt("unw_backtrace"), p);
  ck_assert_uint_eq(shim_real_scans(), s0 + 1);
}
END_TEST

/* A name no library has is still looked for everywhere, and not found. */
START_TEST(test_an_absent_name_is_not_found) {
  void *h = load_local();
  ck_assert_ptr_nonnull(shim_real_opt("unw_backtrace"));
  uint64_t s0 = shim_real_scans();
  ck_assert_ptr_null(shim_real_opt("standin_no_such_function"));
  ck_assert_uint_eq(shim_real_scans(), s0 + 1);
  ck_assert_ptr_null(dlsym(h, "standin_no_such_function"));
}
END_TEST

/* Functions in the global scope are found there, without a scan. */
START_TEST(test_global_functions_need_no_scan) {
  uint64_t s0 = shim_real_scans();
  void *p = shim_real_opt("protobuf_c_message_pack"); /* the test links libprotobuf-c */
  ck_assert_ptr_nonnull(p);
  ck_assert_ptr_eq(p, dlsym(RTLD_DEFAULT, "protobuf_c_message_pack"));
  ck_assert_uint_eq(shim_real_scans(), s0);
}
END_TEST

static int in_object_global;

static void in_object_function(void) {}

/* shim_in_object answers as dladdr's success does (replay's check that a
 * descriptor is in a loaded object before reading it, record's class of a
 * type), for the program, libraries, the heap, the stack and a library
 * unloaded since. */
START_TEST(test_in_object_agrees_with_dladdr) {
  int on_stack = 0;
  void *heap = malloc(64);
  const void *where[] = {&in_object_global,
                         "a literal",
                         (const void *)in_object_function,
                         (const void *)protobuf_c_message_pack,
                         protobuf_c_empty_string,
                         heap,
                         &on_stack,
                         NULL};
  for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
    Dl_info di;
    int want = where[i] != NULL && dladdr(where[i], &di) != 0;
    ck_assert_msg(shim_in_object(where[i]) == want, "address %zu: dladdr says %d", i, want);
  }
  ck_assert_int_eq(shim_in_object(&in_object_global), 1);
  ck_assert_int_eq(shim_in_object(heap), 0);
  ck_assert_int_eq(shim_in_object(&on_stack), 0);
  free(heap);
  void *h = load_local();
  void *p = dlsym(h, "unw_backtrace");
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(shim_in_object(p), 1);
  ck_assert_int_eq(dlclose(h), 0);
  ck_assert_ptr_null(dlopen(LOCAL_LIB, RTLD_NOW | RTLD_NOLOAD)); /* unloaded */
  Dl_info di;
  ck_assert_int_eq(dladdr(p, &di), 0);
  ck_assert_int_eq(shim_in_object(p), 0);
}
END_TEST

static atomic_int unloader_done;
static _Atomic uintptr_t unloaded_base;

static void *load_and_unload(void *arg) {
  while (!atomic_load(&unloader_done)) {
    void *h = dlopen(LOCAL_LIB, RTLD_NOW | RTLD_LOCAL);
    struct link_map *lm = NULL;
    if (h && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
      atomic_store(&unloaded_base, (uintptr_t)lm->l_addr);
    if (h)
      dlclose(h);
  }
  return arg;
}

/* A page mapped while another thread unloads a library may land where the
 * library was. glibc's dlclose unmaps an object before it takes it out of
 * _dl_find_object's table, which then called such a page part of the
 * library (t041 replayed types built at run time, 4 runs of ~65; here 5-13
 * of ~13,000 pages mapped at the library's old base). Pages are mapped at
 * that base while it is free, until 20,000 have been or 3 s have passed. */
START_TEST(test_a_page_where_a_library_was_is_in_no_object) {
  pthread_t t;
  atomic_store(&unloader_done, 0);
  ck_assert_int_eq(pthread_create(&t, NULL, load_and_unload, NULL), 0);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int placed = 0, wrong = 0;
  for (long i = 0; placed < 20000 && !wrong; i++) {
    if (i % 1024 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - t0.tv_sec >= 3)
        break;
    }
    void *at = (void *)atomic_load(&unloaded_base);
    if (at == NULL)
      continue;
    void *p = mmap(at, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
      continue;
    if (p == at) {
      placed++;
      wrong = shim_in_object(p);
    }
    munmap(p, 4096);
  }
  atomic_store(&unloader_done, 1);
  pthread_join(t, NULL);
  /* a library kept loaded leaves nothing to test (with CK_FORK=no, the
   * tests before this one pin it: shim_real_opt) */
  ck_assert_msg(placed > 0, "no page could be mapped where %s was: is it kept loaded?", LOCAL_LIB);
  ck_assert_msg(!wrong, "page %d mapped where the library was was said to be in an object", placed);
}
END_TEST

int main(void) {
  Suite *s = suite_create("shim_real");
  TCase *tc = tcase_create("lookup");
  tcase_add_test(tc, test_later_functions_come_from_the_same_library);
  tcase_add_test(tc, test_an_absent_name_is_not_found);
  tcase_add_test(tc, test_global_functions_need_no_scan);
  tcase_add_test(tc, test_in_object_agrees_with_dladdr);
  tcase_add_test(tc, test_a_page_where_a_library_was_is_in_no_object);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

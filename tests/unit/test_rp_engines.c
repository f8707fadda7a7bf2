/* Unit tests for replay/rp_engines.c: which engine serves a replayed
 * request on the shared virtual timeline. */
#include "replay/rp_engines.h"

#include <check.h>
#include <stdlib.h>

static rdb_accel *accel(uint32_t engines) {
  rdb_accel *a = calloc(1, sizeof *a);
  ck_assert_ptr_nonnull(a);
  a->engines = engines;
  return a;
}

START_TEST(test_queues_behind_the_engines) {
  rdb_accel *a = accel(1);
  ck_assert_uint_eq(rp_engines_book(a, 100, 50), 100); /* busy 100..150 */
  ck_assert_uint_eq(rp_engines_book(a, 120, 50), 150); /* queues 30 */
  ck_assert_uint_eq(rp_engines_book(a, 300, 10), 300);
  ck_assert_uint_eq(rp_engines_book(a, 190, 50), 200); /* the gap 200..300 */
  free(a);
  a = accel(2);
  ck_assert_uint_eq(rp_engines_book(a, 0, 100), 0);
  ck_assert_uint_eq(rp_engines_book(a, 0, 100), 0); /* second engine */
  ck_assert_uint_eq(rp_engines_book(a, 0, 100), 100);
  free(a);
  a = accel(0); /* no engines modelled: never queues */
  ck_assert_uint_eq(rp_engines_book(a, 5, 100), 5);
  ck_assert_uint_eq(rp_engines_book(a, 5, 100), 5);
  free(a);
}
END_TEST

/* A thread behind the others books late: two engines, never more than two
 * requests at once, so none need queue. 380 goes to the engine free since
 * 360, not to the one free since 270 (the lower one, where it used to go),
 * so 350 still finds that one free. */
START_TEST(test_late_booking_finds_its_gap) {
  rdb_accel *a = accel(2);
  ck_assert_uint_eq(rp_engines_book(a, 170, 100), 170);
  ck_assert_uint_eq(rp_engines_book(a, 260, 100), 260);
  ck_assert_uint_eq(rp_engines_book(a, 380, 100), 380);
  ck_assert_uint_eq(rp_engines_book(a, 350, 100), 350);
  free(a);
}
END_TEST

/* A request of 0 ns (get_packed_size with size_free=1) from a thread
 * behind in virtual time books nothing: it took one of the engine's
 * reservation slots, the oldest, [1000, 1100), and the next request at 1000
 * then started at once, on top of it, where offline it queues behind all
 * eight. */
START_TEST(test_zero_service_keeps_the_bookings) {
  rdb_accel *a = accel(1);
  for (uint64_t t = 1000; t < 1800; t += 100)
    ck_assert_uint_eq(rp_engines_book(a, t, 100), t);
  ck_assert_uint_eq(rp_engines_book(a, 50, 0), 50);
  ck_assert_uint_eq(rp_engines_book(a, 1050, 0), 1050); /* nor waits */
  ck_assert_uint_eq(rp_engines_book(a, 1000, 100), 1800);
  free(a);
}
END_TEST

/* Eight threads, eight engines, each thread's requests one after another;
 * the threads book in turn, some behind in virtual time by up to three
 * requests (as catch-up makes threads that owe harness time). At most
 * eight requests are ever in flight, so none queues. */
START_TEST(test_lagging_threads_need_no_ninth_engine) {
  enum { T = 8, N = 40 };
  rdb_accel *a = accel(T);
  uint64_t next[T], lag[T];
  unsigned r = 12345;
  for (int t = 0; t < T; t++) {
    next[t] = (uint64_t)t * 1000;
    lag[t] = 0;
  }
  for (int done = 0; done < T * N; done++) {
    int t = 0; /* the thread whose request comes first in real time */
    for (int u = 1; u < T; u++)
      if (next[u] + lag[u] < next[t] + lag[t])
        t = u;
    uint64_t service = 300000;
    ck_assert_uint_eq(rp_engines_book(a, next[t], service), next[t]);
    r = r * 1103515245u + 12345u;
    next[t] += service + (r >> 16) % 5000; /* the program's own work */
    r = r * 1103515245u + 12345u;
    lag[t] = (r >> 16) % 900000;
  }
  free(a);
}
END_TEST

/* 64 threads, one engine, every request at once: they queue back to back,
 * 64 of them, though an engine keeps 8 reservations. Unmerged, the ninth
 * took the first's slot and the tenth started at 0 on top of it. */
START_TEST(test_a_queue_deeper_than_the_slots) {
  rdb_accel *a = accel(1);
  for (uint64_t i = 0; i < 64; i++)
    ck_assert_uint_eq(rp_engines_book(a, 0, 10), i * 10);
  ck_assert_uint_eq(rp_engines_book(a, 300, 10), 640);
  free(a);
  /* two engines, the requests of a pipeline (engine time 5) in pairs */
  a = accel(2);
  for (uint64_t i = 0; i < 40; i++)
    ck_assert_uint_eq(rp_engines_book(a, 100, 5), 100 + i / 2 * 5);
  free(a);
}
END_TEST

/* Filling the gap between two reservations makes them one: the slot freed
 * keeps a reservation that would have been forgotten. */
START_TEST(test_a_gap_filled_joins_its_neighbours) {
  rdb_accel *a = accel(1);
  ck_assert_uint_eq(rp_engines_book(a, 0, 10), 0);
  ck_assert_uint_eq(rp_engines_book(a, 20, 10), 20);
  ck_assert_uint_eq(rp_engines_book(a, 10, 10), 10); /* 0..30 now */
  for (uint64_t t = 100; t < 800; t += 100)          /* seven more */
    ck_assert_uint_eq(rp_engines_book(a, t, 10), t);
  ck_assert_uint_eq(rp_engines_book(a, 5, 10), 30);
  free(a);
}
END_TEST

int main(void) {
  Suite *s = suite_create("rp_engines");
  TCase *t = tcase_create("book");
  tcase_add_test(t, test_queues_behind_the_engines);
  tcase_add_test(t, test_late_booking_finds_its_gap);
  tcase_add_test(t, test_lagging_threads_need_no_ninth_engine);
  tcase_add_test(t, test_zero_service_keeps_the_bookings);
  tcase_add_test(t, test_a_queue_deeper_than_the_slots);
  tcase_add_test(t, test_a_gap_filled_joins_its_neighbours);
  suite_add_tcase(s, t);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

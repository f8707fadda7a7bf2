/* rp_engines.c — see rp_engines.h. */
#include "rp_engines.h"

/* Earliest start >= arrive at which engine e is free for `service` ns,
 * given its recent reservations; *idle_from: the end of the latest of them
 * that ends by then (0: none). */
static uint64_t engine_fit(const rdb_accel *a, uint32_t e, uint64_t arrive, uint64_t service,
                           uint64_t *idle_from) {
  uint64_t s = arrive;
  for (int moved = 1, rounds = 0; moved && rounds <= RDB_RES_SLOTS; rounds++) {
    moved = 0;
    for (int k = 0; k < RDB_RES_SLOTS; k++) {
      uint64_t rs = a->res_start[e][k], re = a->res_end[e][k];
      if (re > s && rs < s + service) { /* overlaps: start after it */
        s = re;
        moved = 1;
      }
    }
  }
  uint64_t from = 0;
  for (int k = 0; k < RDB_RES_SLOTS; k++)
    if (a->res_end[e][k] <= s && a->res_end[e][k] > from)
      from = a->res_end[e][k];
  *idle_from = from;
  return s;
}

/* A reservation that touches one kept is merged into it, as offline
 * (cli/engines.c): requests queued back to back are one busy interval, so
 * a queue of any depth keeps its slot. Unmerged, the ninth of 64 requests
 * at once took the slot of the first, and the next request then started
 * on top of it (queueing 630 ns of 10 ns requests, not 20160). */
static void engine_book(rdb_accel *a, uint32_t e, uint64_t start, uint64_t end) {
  int left = -1, right = -1, oldest = 0;
  for (int k = 0; k < RDB_RES_SLOTS; k++) {
    if (a->res_end[e][k] < a->res_end[e][oldest])
      oldest = k;
    if (a->res_end[e][k] == start && a->res_end[e][k] > a->res_start[e][k])
      left = k;
    else if (a->res_start[e][k] == end && a->res_end[e][k] > a->res_start[e][k])
      right = k;
  }
  if (left >= 0 && right >= 0) { /* it fills the gap between them */
    a->res_end[e][left] = a->res_end[e][right];
    a->res_start[e][right] = a->res_end[e][right] = 0;
  } else if (left >= 0) {
    a->res_end[e][left] = end;
  } else if (right >= 0) {
    a->res_start[e][right] = start;
  } else {
    a->res_start[e][oldest] = start;
    a->res_end[e][oldest] = end;
  }
}

uint64_t rp_engines_book(rdb_accel *a, uint64_t arrive, uint64_t service) {
  if (a->engines == 0 || service == 0) /* a request of 0 ns makes no one wait, nor waits */
    return arrive;
  uint32_t n = a->engines > RDB_MAX_ENGINES ? RDB_MAX_ENGINES : a->engines;
  uint32_t best = 0;
  uint64_t best_start = UINT64_MAX, best_from = 0;
  for (uint32_t e = 0; e < n && !(best_start == arrive && best_from == arrive); e++) {
    uint64_t from;
    uint64_t s = engine_fit(a, e, arrive, service, &from);
    if (s < best_start || (s == best_start && from > best_from)) {
      best_start = s;
      best_from = from;
      best = e;
    }
  }
  engine_book(a, best, best_start, best_start + service);
  return best_start;
}

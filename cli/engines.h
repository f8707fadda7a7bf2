/* engines.h — an accelerator's engines as busy intervals on a virtual
 * timeline, for offline queueing.
 *
 * Offline, requests reach the timeline in the order of their recorded
 * start, but under a plan each thread's timeline has shifted by its own
 * savings, so a request can arrive before others already booked. Each
 * engine therefore keeps its busy intervals sorted (touching intervals
 * merge, so a saturated engine holds few), and a request takes the
 * earliest gap long enough on the engine that can start it first; among
 * engines that start it as early, the one whose idle gap it fills most
 * tightly (the gap that began last), so that longer gaps stay free for
 * requests that arrive late (the replay shim chooses the same way:
 * replay/rp_engines.h). At most ENG_MAX_INTERVALS are kept per engine; the
 * earliest are forgotten first. */
#ifndef STANDIN_CLI_ENGINES_H
#define STANDIN_CLI_ENGINES_H

#include <stdint.h>

#define ENG_MAX_INTERVALS 4096

typedef struct {
  uint64_t s, e; /* busy from s to e (exclusive) */
} eng_busy;

typedef struct {
  eng_busy *iv;
  uint32_t n, cap;
} eng_engine;

typedef struct {
  eng_engine *e;
  uint32_t n;
} engines;

/* n engines; 0 or -1 when out of memory. */
int engines_init(engines *g, uint32_t n);

/* Book `busy` ns (the request's service time, or its model's initiation
 * interval: how long it keeps the engine from taking the next) for a
 * request that arrives at `arrive`; returns when it starts (busy 0: at
 * arrive, booking nothing). */
uint64_t engines_book(engines *g, uint64_t arrive, uint64_t busy);

/* Forget every booking (a new process). */
void engines_clear(engines *g);

void engines_free(engines *g);

#endif

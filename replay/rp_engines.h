/* rp_engines.h — which engine of a modelled accelerator serves a request, on
 * the replay run's shared virtual timeline (rdb_accel: each engine's recent
 * reservations).
 *
 * Requests reach the timeline in real-time order, which is not the order of
 * their arrival in virtual time: a thread that owes harness time issues its
 * requests at its own lag (catch-up), so it books slots behind other
 * threads' later ones. Any engine that can start a request first is as good
 * for that request, but not for the ones still to come: the choice keeps
 * the engine whose idle gap the request fills most tightly, so longer gaps
 * stay free for late arrivals. Booked in arrival order, that makes no
 * difference to any start time. */
#ifndef STANDIN_RP_ENGINES_H
#define STANDIN_RP_ENGINES_H

#include <stdint.h>

#include "rdb.h"

/* Book `service` ns (the request's engine time: its service time, or its
 * model's initiation interval) on the engine of a that can start a request
 * arriving at `arrive` first (0 ns: none, it starts at arrive) (ties: the tightest fit, then the
 * lowest engine); returns the start. Engines = 0: no queueing (returns arrive). The caller holds
 * a's lock. */
uint64_t rp_engines_book(rdb_accel *a, uint64_t arrive, uint64_t service);

#endif

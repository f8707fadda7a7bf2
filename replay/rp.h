/* rp.h — the replay runtime, as seen by the per-API hooks.
 *
 * A hook takes the time at entry, fingerprints the request and looks it up.
 * For a request served by an accelerator, rp_begin picks the next recorded
 * occurrence and fixes the deadline (entry + link + queueing + service);
 * the hook then copies or materialises the saved response and calls
 * rp_finish, which spins until the deadline. Harness work thus hides inside
 * the modelled latency; when it does not fit, it is an overrun. */
#ifndef STANDIN_REPLAY_RP_H
#define STANDIN_REPLAY_RP_H

#include <stdint.h>

#include "pb_walk.h"
#include "rdb.h"

typedef struct {
  const rdb_entry *e;
  const rdb_sample *s;
  uint64_t t0, deadline;
  uint64_t debt;  /* what the thread owed at entry (catch-up, rp.c) */
  uint64_t shift; /* how much earlier than t0 the request was issued */
  int approx;     /* a miss timed from its nearest recorded calls (rp_near_done) */
  /* Set by the hook between rp_begin (which clears it) and rp_finish: the
   * time to keep back from the spin for the response's later parts (a
   * decode's rows, served in later calls); rp_finish leaves in it the time
   * it kept back, which rp_late_held spends and rp_spin_held spins. */
  uint64_t hold;
} rp_ticket;

/* The replay clock in ns (CLOCK_MONOTONIC scale): the calibrated TSC when
 * the launcher found it invariant, clock_gettime otherwise. */
uint64_t rp_now(void);

/* Nonzero when the replay database is mapped in this process. */
int rp_on(void);

/* Hint that a call of `api` starts: fetches what the entry the thread will
 * most likely match needs, while the hook computes the fingerprint. */
void rp_prefetch(int api);

/* The entry this thread's next call of `api` most likely matches (the one
 * that followed the occurrence it took last: rdb_sample.next), or NULL;
 * with `served`, only an entry the run has served before, whose saved
 * bytes are likely in the caches. Only a guess: the hook must confirm it
 * against the request (the tree's plain stream, an unpack's bytes and type)
 * and report with rp_predicted_was whether it was right. The database must
 * be mapped. */
const rdb_entry *rp_predicted(int api, int served);
void rp_predicted_was(const rdb_entry *e, int right);
/* Counts a lookup answered by a tree found unchanged since the thread's
 * last lookup of it (rep_protobuf.c unchanged_tree). */
void rp_tree_unchanged(void);

/* Whether the run has served an occurrence of e (its bytes are then likely
 * in the caches). */
int rp_served(const rdb_entry *e);

/* Whether e's next occurrence stays in software (the plan or the model
 * keeps it there), without taking it: rp_begin would return 0. */
int rp_next_in_software(const rdb_entry *e);

/* How recorded libjpeg requests begin (rdb_prefix, by length then hash),
 * *n of them; NULL when there are none. */
const rdb_prefix *rp_prefixes(size_t *n);

/* The recorded decodes the program abandoned (rdb_stuck, by length), *n
 * of them; NULL when there are none. */
const rdb_stuck *rp_stuck(size_t *n);

/* Where recorded programs dropped the bytes the library left unread
 * (rdb_drop, by end), *n of them; NULL when there are none. */
const rdb_drop *rp_drops(size_t *n);

/* Entry for a fingerprint (already bound to the API), or NULL. */
const rdb_entry *rp_lookup(const uint8_t fp[16]);

/* Bounds-checked pointer to `len` bytes at `off` in the database, or NULL. */
const void *rp_ptr(uint64_t off, uint64_t len);

/* Take the next occurrence of e. Returns 1 when it is served by an
 * accelerator (deadline set), 0 when the plan keeps it in software (the
 * hook runs the real call and reports with rp_software_done). */
int rp_begin(rp_ticket *t, const rdb_entry *e, uint64_t t0);

/* Spin until the deadline and account the call as replayed. Returns 1
 * when the call overran (counted here), else 0. */
int rp_finish(rp_ticket *t);

/* A call that runs the real library (kept in software, or a miss) spent
 * ns in the harness first (fingerprint, lookup): time no model window
 * hides, counted as an overrun and owed like one (catch-up). */
void rp_unhidden(uint64_t ns, int api);

/* A response served in parts after its deadline (a decode's rows, which
 * the program takes in later calls) cost ns more: harness time no window
 * hid, counted in the overrun (as one overrun of the call when first) and
 * owed like one, so that later calls' slack pays it back. */
void rp_late(uint64_t ns, int first, int api);

/* As rp_late, but *held (rp_ticket.hold after rp_finish) covers ns first:
 * only what it does not cover is an overrun. Returns 1 when one was
 * counted. */
int rp_late_held(uint64_t ns, uint64_t *held, int first, int api);

/* The response's last part is served: what is left of *held beyond keep
 * (for the calls that end it) pays the thread's debt (catch-up) and is
 * spun, so that the call takes its modelled time in all. *held is at most
 * keep after. */
void rp_spin_held(uint64_t *held, uint64_t keep);

/* bytes of a response were delivered to memory (placement.h). */
void rp_to_memory(uint64_t bytes);
/* A served decode the program gave up before its last row (counted). */
void rp_served_given_up(void);
/* A served JPEG decode the real library then took over (replay's
 * RDB_C_SERVED_THEN_REAL). */
void rp_served_then_real(void);
/* A served unpack whose tree could not be built (materialise's reason):
 * counted (RDB_C_UNBUILT); the hook has the library answer inside the
 * call's window. A tree that does not fit the program's type (not the
 * program's allocator running out) stops the program under --on-miss
 * abort, as a miss does. */
void rp_unbuilt(int reason, int api, const char *type, void *caller);
/* A decode of this run that no accelerator would serve (JPG_NO_* why), run
 * for real: counted apart from the calls looked up. */
void rp_not_offloadable(unsigned why);
/* A decode run for real as recorded given up whose program read every row
 * (counted). */
void rp_given_up_read_whole(void);

/* The real call ran (kept in software, or a miss) and took ns. */
void rp_software_done(uint64_t ns);

/* Count a miss of `reason` (RDB_FB_*). Under --on-miss abort, prints what
 * and where and ends the program; otherwise returns and the hook runs the
 * real call. `caller` is the hook's return address. */
void rp_miss(int reason, int api, const char *type, void *caller);

/* rp_miss for a call --on-miss nearest can time (protobuf, or a JPEG
 * decode not in the recording): returns 1
 * (and counts nothing yet) under that policy, when the hook must run the
 * real call and then report with rp_near_done; otherwise as rp_miss, and
 * returns 0. */
int rp_miss_near(int reason, int api, const char *type, void *caller);

/* A miss under --on-miss nearest whose real call started at s (the hook's
 * entry was t0) and has returned: time it from the recorded calls of the
 * same API, type (full name) and variant (rdb_near_variant; 0 for
 * protobuf) whose sizes (encoded bytes; a JPEG's pixels) are nearest to
 * key (interpolated: rp.c nearest), spinning to the deadline that gives
 * from t0 (the real call's time is harness time inside that window). With
 * no recorded call of that API, type and variant, it is a fallback of
 * `reason`; when that call, or the one it takes the time of, runs in
 * software, unhide says whether t0..s counts as harness time no window
 * hides (rp_unhidden), as the hook's own misses count it. */
void rp_near_done(uint64_t t0, uint64_t s, int api, const char *type, uint64_t variant,
                  uint64_t key, int reason, int unhide);

/* This process's memo for materialising e's image, or NULL when images
 * must be checked on every use (pb_walk.h, pbw_image_materialise_memo). */
pbw_image_memo *rp_memo(const rdb_entry *e);

/* Whether replayed unpacks allocate their trees piece by piece, as
 * libprotobuf-c does (replay --unpack-trees pieces). */
int rp_unpack_pieces(void);

/* RDB_UNSERVED_*: the kinds of libjpeg decode the recording holds as not
 * offloadable that replay serves now (rdb_header.jpeg_unserved). */
unsigned rp_jpeg_unserved(void);

/* Nonzero when the plan keeps some message type's calls of some API whole
 * in software (rdb_class). */
int rp_has_kept(void);

/* Bit (1 << api) for each API whose calls of message type `name` (full
 * name) stay whole in software: such calls run the real library at once,
 * without a lookup. Bit (1 << (RP_KEPT_UNSUP + api)) too when that is
 * because the model refused every one of them, not the plan. Not cheap
 * (scans the class table): callers remember the answer per type. */
#define RP_KEPT_UNSUP 8
uint32_t rp_kept_apis(const char *name);

/* Whether the program's message type `name` is to be checked against the
 * recorded schemas of that name (rdb_schema): it is recorded, and each of
 * its recorded schemas is known. Not cheap (scans the table). */
int rp_schema_checked(const char *name);

/* The recorded schema of type `name` whose identity is id (pbw_schema_id of
 * the program's type; 0 if it could not be built): its index + 1 in
 * rdb_schema, with *several when the name has other identities too (then
 * only entries recorded with this one may answer: rdb_entry.schema). 0:
 * none, the type is changed, and is remembered for the run's summary. */
uint32_t rp_schema_row(const char *name, uint64_t id, int *several);

/* dlcloses so far in this process (rep_protobuf.c): caches keyed by the
 * addresses of a library's descriptors and names hold only until then. */
extern _Atomic uint64_t rp_unloads;

/* Remember the type named at name_off (in the database) as changed, if it
 * is the run's first (RDB_C_CHANGED_TYPE). */
void rp_changed_type(uint64_t name_off);

/* Count one call that ran the real library without a lookup (not timed),
 * kept by the plan or, when `unsupported`, refused by the model. */
void rp_direct(int unsupported);

/* Remember / forget trees the replay built, so free_unpacked knows them. */
int rp_own_add(const void *p);
int rp_own_take(const void *p); /* 1 if p was ours (and is now forgotten) */

#endif

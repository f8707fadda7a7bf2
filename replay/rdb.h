/* rdb.h — the replay database: what `standin replay` prepares from a
 * recording before the program starts, and what the replay shim reads.
 *
 * It lives in one unnamed file (a temporary file on disk, else a memfd:
 * cli/replaydb.c publish) mapped by every process of the
 * replay run (forked children inherit the mapping; exec'd programs map it
 * again by path), so that occurrence counters, statistics and accelerator
 * timelines are shared by the whole run. Everything the shim needs per call
 * is precomputed: the response bytes, and per recorded occurrence the
 * predicted service and link time and the accelerator that serves it, so no
 * model code runs inside the program.
 *
 * All offsets are from the start of the mapping and 8-byte aligned. The
 * shim treats the file as untrusted: it checks the header and every offset
 * and length it uses against the mapping size. */
#ifndef STANDIN_RDB_H
#define STANDIN_RDB_H

#include <stdatomic.h>
#include <stdint.h>

#define RDB_MAGIC 0x3142445244535453ull /* "STSDRDB1" little-endian */
#define RDB_VERSION 30
/* rdb_header.jpeg_unserved */
#define RDB_UNSERVED_RAW 1u
#define RDB_UNSERVED_BUFFERED 2u
#define RDB_MAX_ACCEL 16
#define RDB_MAX_ENGINES 64
#define RDB_RES_SLOTS 8 /* recent reservations kept per engine */
#define RDB_SPIN_BINS 512
#define RDB_SPIN_BIN_NS 4
/* A spin loop reads the clock every ~10-150 ns; two reads this far apart
 * around the deadline mean the thread was not running when it passed. */
#define RDB_SPIN_STOP_NS 1000

/* What a call not in the recording gets (replay --on-miss): the real call,
 * counted as a fallback; the end of the program; or the real call, timed
 * as the model timed the recorded call nearest to it (rdb_near). */
enum { RDB_MISS_FALLBACK = 0, RDB_MISS_ABORT = 1, RDB_MISS_NEAREST = 2 };

/* Why a call did not get a replayed response (rdb_stats.fallback[]). */
enum {
  RDB_FB_NOT_IN_TRACE = 0, /* no recorded call with this fingerprint */
  RDB_FB_MISMATCH = 1,     /* fingerprint found but request bytes differ */
  RDB_FB_NO_RESPONSE = 2,  /* the recording could not capture the response */
  RDB_FB_SCHEMA = 3,       /* saved response does not fit the program's type */
  RDB_FB_NOMEM = 4,        /* materialising failed for lack of memory */
  RDB_FB_DISABLED = 5,     /* the DB could not be mapped in this process */
  RDB_FB_CHANGED = 6,      /* the program's message type of that name is not the
                              recorded one (rdb_schema) */
  RDB_FB_UNNAMED = 7,      /* its message type has no name (optimize_for = CODE_SIZE):
                              calls are matched by type name */
  RDB_FB_RUNTIME = 8,      /* its descriptor is not in a loaded object: built at run
                              time, it may be freed and another built at its address */
  RDB_FB_NREASONS = 9
};

/* Calls kept in software on purpose (not misses). */
enum {
  RDB_SW_NOT_SELECTED = 0, /* no plan rule / --iface sent it to an accelerator */
  RDB_SW_UNSUPPORTED = 1,  /* the model said the accelerator cannot take it */
  RDB_SW_ABANDONED = 2,    /* a JPEG decode the recorded program gave up before its
                              last row (JPG_NO_ABANDONED), of an image the recording
                              also holds decoded whole: not offloadable, it runs the
                              real library, which stops at the rows read */
  RDB_SW_NREASONS = 3
};

/* per accelerator; BUSY: the engine time its requests took (rdb_busy),
 * which utilisation is a share of */
enum {
  RDB_A_REQUESTS,
  RDB_A_SERVICE_NS,
  RDB_A_LINK_NS,
  RDB_A_QUEUE_NS,
  RDB_A_BUSY_NS,
  RDB_A_FAULT_NS,  /* the recorded calls' page faults its requests kept (rdb_sample) */
  RDB_A_SOURCE_NS, /* their waits for the program's source callbacks (rdb_header) */
  RDB_A_N
};

typedef struct {
  _Atomic uint64_t c[RDB_A_N];
} rdb_accel_stats;

/* rdb_accel.flags */
enum {
  /* its model's time is a measured one (if_model_time_measured): a wait
   * the machine stopped past its deadline is owed (rp_finish) */
  RDB_ACCEL_MEASURED = 1
};

typedef struct {
  char name[32];
  uint32_t engines;
  uint32_t flags; /* RDB_ACCEL_* */
  /* virtual timeline (replay clock ns): the latest reservations of each
   * engine, touching ones merged (a queue is one), so a request that
   * reaches the timeline late (its thread was preempted after it arrived)
   * still finds the gap it arrived in */
  _Atomic uint32_t lock;
  uint32_t pad2;
  uint64_t res_start[RDB_MAX_ENGINES][RDB_RES_SLOTS];
  uint64_t res_end[RDB_MAX_ENGINES][RDB_RES_SLOTS];
  rdb_accel_stats st;
} rdb_accel;

/* Per API: where the harness could not hide (rdb_stats.c[RDB_API(...)]).
 * CALLS: calls whose harness time is counted (served, or looked up before
 * running in software). */
/* SOURCE_NS: of the served calls' modelled time, the recorded wait for the
 * program's source callbacks (rdb_header.sources_off), which a JPEG
 * drain spends running them, inside HARNESS_NS. MODELLED, MODELLED_NS:
 * the calls timed by a model (served, not kept in software) and the time
 * it gave them (as RDB_C_PREDICTED_NS), to set the harness's time beside. */
enum {
  RDB_API_CALLS,
  RDB_API_OVERRUNS,
  RDB_API_OVERRUN_NS,
  RDB_API_HARNESS_NS,
  RDB_API_SOURCE_NS,
  RDB_API_MODELLED,
  RDB_API_MODELLED_NS,
  RDB_API_N
};
#define RDB_API_SLOTS 32 /* st_api codes are below ST_API_MAX */
/* Slots of the counts by why a call is not offloadable: JPG_NO_* in all
 * but the last, any other reason there (as cli.h CLI_NO_SLOTS). */
#define RDB_NO_SLOTS 15

#define RDB_API(api, k) (RDB_C_API0 + ((unsigned)(api) % RDB_API_SLOTS) * RDB_API_N + (k))

/* Run-wide counters (rdb_stats.c[]). Threads count locally and add their
 * counts here in batches, at thread and process exit, exec and _exit. */
enum {
  RDB_C_INTERCEPTED = 0,                      /* outermost calls seen */
  RDB_C_REPLAYED,                             /* answered from the recording */
  RDB_C_SOFTWARE,                             /* kept in software on purpose (sum of SW_*) */
  RDB_C_FALLBACK,                             /* misses that ran the real call (sum of FB_*) */
  RDB_C_FB0,                                  /* + RDB_FB_* */
  RDB_C_SW0 = RDB_C_FB0 + RDB_FB_NREASONS,    /* + RDB_SW_* */
  RDB_C_REUSED = RDB_C_SW0 + RDB_SW_NREASONS, /* occurrences past the recorded count */
  /* overruns, their time and harness time are counted per API only
   * (RDB_API; rdb_total sums them) */
  RDB_C_PREDICTED_NS,
  RDB_C_RECORDED_NS,
  RDB_C_SPIN_NS,
  RDB_C_SOFTWARE_NS, /* time of real calls (kept in software or misses) */
  RDB_C_PROCESSES,
  RDB_C_REPAID_NS,        /* overrun paid back from later calls' slack (catch-up) */
  RDB_C_DEBT_MAX,         /* largest unpaid overrun of a thread, creators' included */
  RDB_C_SETUP_NS,         /* time the shim took to map the database, all processes */
  RDB_C_TO_MEMORY_BYTES,  /* response bytes delivered to memory, not the caches */
  RDB_C_DIRECT,           /* kept in software without a lookup (rdb_class), untimed */
  RDB_C_PREDICTED,        /* lookups answered by the thread's prediction (rp_predicted),
                             without a fingerprint */
  RDB_C_MISPREDICTED,     /* predictions the request did not confirm */
  RDB_C_OUTSIDE_NS,       /* harness ns per call no window measures (rp.c), largest
                             of the processes' calibrations */
  RDB_C_TAIL_NS,          /* ns a spinning call takes past its deadline (rp.c),
                             largest of the processes' calibrations */
  RDB_C_APPROX,           /* misses answered by the real call and timed as their
                             nearest recorded call (--on-miss nearest) */
  RDB_C_APPROX_KEY_DIFF,  /* sum over them of |size - the nearest's size| */
  RDB_C_APPROX_KEY,       /* sum over them of their size */
  RDB_C_NO_NEAREST,       /* misses under --on-miss nearest with no recorded call of
                             their API, type (and JPEG kind) to be timed as:
                             fallbacks */
  RDB_C_CHANGED_TYPE,     /* name_off of the first type found changed (RDB_FB_CHANGED) */
  RDB_C_NEAR_CHANGED,     /* calls of a changed type timed under --on-miss nearest
                             (not fallbacks: not in RDB_FB_CHANGED) */
  RDB_C_SERVED_GIVEN_UP,  /* served decodes the program gave up before their last row:
                             timed as the whole image, where the library would have
                             stopped early (rep_jpeg.c end_decode): their
                             occurrences were recorded whole (one recorded given up
                             runs for real: RDB_SW_ABANDONED) */
  RDB_C_GIVEN_UP_WHOLE,   /* occurrences recorded given up (RDB_SW_ABANDONED), run
                             for real, whose program read every row: the program
                             decoded the image in another order than recorded */
  RDB_C_UNCHANGED,        /* lookups answered by a tree unchanged since the thread's
                             last lookup of it (pbw_snap), without a walk */
  RDB_C_SERVED_THEN_REAL, /* served decodes the real library took over after (a skip
                             or a crop with no rows at hand, an output pass with other
                             parameters): their modelled time and the real decode
                             both count (rep_jpeg.c pass) */
  RDB_C_LEFT,             /* calls the program left by a longjmp past the hook, found by
                             its thread's next call (shim_left_behind) */
  RDB_C_UNBUILT,          /* served unpacks whose tree could not be built in the
                             program (its allocator ran out, an image that does not
                             build): the library answered in the call's window
                             (rep_protobuf.c) */
  RDB_C_RAN_NO0,          /* + JPG_NO_* (the last slot: any other): decodes of this
                             run that no accelerator would serve (given up, corrupt,
                             coefficients ...), run for real and counted in none of
                             the above (rep_jpeg.c not_offloadable) */
  /* how late the stopped spins (RDB_C_SPIN_STOP0) ended, in all */
  RDB_C_SPIN_STOPPED_NS = RDB_C_RAN_NO0 + RDB_NO_SLOTS,
  /* of that, what the threads owed (RDB_ACCEL_MEASURED): a measured time
   * holds the machine's interruptions already, and one stopping the wait
   * past its deadline counted them twice (rp_finish) */
  RDB_C_SPIN_OWED_NS,
  RDB_C_SPIN_ERR0, /* + bin: how late the spin loop saw the deadline, every spin */
  /* + bin: the same, of the spins whose thread was not running when their
   * deadline passed (its clock reads around it RDB_SPIN_STOP_NS or more
   * apart: another process, an interrupt or the hypervisor had the CPU) */
  RDB_C_SPIN_STOP0 = RDB_C_SPIN_ERR0 + RDB_SPIN_BINS,
  RDB_C_API0 = RDB_C_SPIN_STOP0 + RDB_SPIN_BINS, /* + RDB_API(api, RDB_A_*) */
  RDB_NCOUNTERS = RDB_C_API0 + RDB_API_SLOTS * RDB_API_N
};

typedef struct {
  _Atomic uint64_t c[RDB_NCOUNTERS];
} rdb_stats;

/* The run's total of per-API counter k (RDB_API_*). */
static inline uint64_t rdb_total(const rdb_stats *s, int k) {
  uint64_t t = 0;
  for (int api = 0; api < RDB_API_SLOTS; api++)
    t += atomic_load_explicit(&s->c[RDB_API(api, k)], memory_order_relaxed);
  return t;
}

/* One recorded occurrence of a request. */
typedef struct {
  uint64_t recorded_ns;
  uint64_t service_ns;  /* predicted by the model of `accel` */
  uint32_t link_in_ns;  /* reaching the device, before service */
  uint32_t link_out_ns; /* getting the response back, after service (each at
                           most IF_MAX_LINK_NS, as whatif takes them) */
  uint32_t fault_ns;    /* the recorded call's page faults, which the served
                           call takes too, after the link in and before
                           service (plan_decision.fault_ns): the harness
                           takes them, writing the response, in that wait */
  int8_t accel;         /* index into accels (PLAN_MAX_ACCEL: 16), or -1:
                           stays in software */
  uint8_t sw_reason;    /* RDB_SW_* when accel == -1; RDB_SW_ABANDONED: this
                           occurrence was a decode given up, its request a
                           prefix of the entry's (replaydb.c given_up) */
  uint16_t out_cold;    /* per mille of the response's lines to deliver to memory,
                           not the caches (placement.h) */
  uint32_t next;        /* index + 1 of the entry of the call that followed this
                           occurrence on its thread with the same API, 0: none;
                           the shim tries it first (rp_predicted) */
  uint32_t busy_ns;     /* how long it keeps its engine from taking the next
                           request (the model's initiation interval), when
                           less than service_ns; RDB_BUSY_WHOLE: all of it */
} rdb_sample;
#define RDB_BUSY_WHOLE UINT32_MAX
/* A sample's engine time (rdb_sample.busy_ns). */
static inline uint64_t rdb_busy(const rdb_sample *s) {
  return s->busy_ns == RDB_BUSY_WHOLE ? s->service_ns : s->busy_ns;
}
/* As it is: with 64-bit link times (48 bytes, or 40 with a narrower accel)
 * a replayed 1 KB unpack's harness took 360-580 ns against 185-290 on this
 * VM, with the same instructions; links are bounded instead. */
_Static_assert(sizeof(rdb_sample) == 40, "rdb_sample grew");

/* RDB_ENTRY_SIZE_OK (pack, get_packed_size, pack_to_buffer): the recorded
 * bytes, decoded with the recorded schema, make a tree with this entry's
 * fingerprint, so their length (and the size answered) is the packed size
 * of the program's tree. Without it, the shim checks the length against
 * the real packed size before answering: a trace must never make replay
 * write past a buffer the program sized with get_packed_size. */
/* RDB_ENTRY_MIXED: its occurrences were recorded with two definitions of
 * its type (two programs, or two libraries, built from different versions
 * of a .proto, whose trees of equal values have one fingerprint): which
 * definition a response belongs to is not known, so none is answered
 * (RDB_FB_CHANGED). */
enum {
  RDB_ENTRY_FAILED = 1,
  RDB_ENTRY_NO_RESPONSE = 2,
  RDB_ENTRY_SIZE_OK = 4,
  RDB_ENTRY_MIXED = 8
};

/* One distinct request (fingerprint). */
typedef struct {
  uint8_t fp[16];
  uint8_t api;
  uint8_t flags;   /* RDB_ENTRY_* */
  uint16_t schema; /* index + 1 of the rdb_schema its calls were recorded
                      with, 0: unknown (checked only for a type name
                      recorded with several: rdb_schema) */
  uint32_t nsamples;
  uint64_t samples_off;
  uint64_t req_off, req_len;   /* request bytes (unpack), for verification */
  uint64_t resp_off, resp_len; /* packed bytes or tree image */
  uint64_t result;             /* recorded scalar result */
  uint64_t type_off;           /* NUL-terminated type name, stored once per name */
  /* pack, get_packed_size, pack_to_buffer with RDB_ENTRY_SIZE_OK: the plain
   * stream of the tree (pbw_tree_stream), so that a predicted entry is
   * confirmed with pbw_tree_matches instead of a fingerprint; 0: none. Its
   * references are into ref: the packed bytes of the tree (the response of
   * a pack entry; of the pack it was verified against for a size entry). */
  uint64_t stream_off, stream_len;
  uint64_t ref_off, ref_len;
} rdb_entry;

/* A stream this short is kept for every verified entry and tried even on
 * the entry's first occurrence (its few lines cost less to read than the
 * tree's fingerprint: long strings and bytes are references into the
 * response the hook copies anyway); a longer one, up to RDB_LONG_STREAM,
 * only for an entry recorded more than once, and tried once the run has
 * served it. */
#define RDB_SHORT_STREAM 256

/* No longer stream is kept: reading one the caches no longer hold costs
 * more than the fingerprint of the tree the program has just built, and a
 * run reaches an entry again after any number of other calls. PostGIS's
 * vector tiles (~600 messages, 11 KB packed), sized and packed again in
 * later queries: 19.8-21.5 us of harness a size with their streams,
 * 10.1-14.3 without; a tree of 300 branches (its stream 14 KB) seen 250
 * turns before: 10.5-11.4 us against 7.7-8.4 (constant:ns=0, three
 * alternating pairs each), and the databases shrank from 2.2 to 0.5 MB
 * and from 4.8 to 1.2 MB. The same tree sized and packed again and again,
 * its streams in the caches, pays for the fingerprint: the size -1..+6%
 * in the same pairs. pbtest's trees' streams are ~1.5 KB. */
#define RDB_LONG_STREAM 4096

/* An unpack request up to this long is confirmed by comparing its bytes
 * (prefetched as the call starts); a longer one by its fingerprint, which
 * reads none of the saved bytes (replay/rep_protobuf.c lookup_bytes). */
#define RDB_UNPACK_COMPARE_MAX 256

typedef struct {
  uint64_t magic;
  uint32_t version;
  uint32_t on_miss; /* RDB_MISS_* */
  uint64_t size;    /* bytes of the whole mapping */
  uint64_t nentries, entries_off;
  /* nentries _Atomic u64: occurrences of each entry served so far, whole
   * run (writable, apart from the read-only entries: one page of counters
   * covers 512 entries); entries recorded once are counted at once_off */
  uint64_t next_off;
  uint64_t nslots, slots_off; /* open addressing: u32 entry index + 1 */
  uint32_t naccel;
  uint32_t catch_up; /* 1: pay overruns back from later calls' slack */
  uint64_t accel_off;
  uint64_t stats_off;
  uint64_t trace_start_ns; /* earliest recorded process start */
  /* Replay clock: CLOCK_MONOTONIC ns = mono_base + ((tsc - tsc_base) *
   * tsc_mult >> 32), calibrated by the launcher when the TSC is invariant
   * (tsc_mult = 0: use clock_gettime). Shared so every process of the run
   * reads the same clock. */
  uint64_t tsc_base, mono_base, tsc_mult;
  /* Everything from ro_off (page-aligned) to the end is never written once
   * built: entries, slots, samples, requests, responses, names. The shim
   * maps it read-only, so what it checked once stays checked (image
   * memos). */
  uint64_t ro_off;
  /* 1: replayed unpacks allocate trees as libprotobuf-c does, one
   * allocation per piece, freed by the real free_unpacked; 0: one block */
  uint32_t unpack_pieces;
  /* RDB_UNSERVED_*: the recording holds libjpeg decodes of a kind replay
   * serves now recorded as not offloadable, as every one was before (raw
   * data: JPG_NO_RAW; buffered-image mode: JPG_NO_BUFFERED; both until
   * 2026-11-30): a decode of that kind it does not hold is taken for one
   * of those and runs for real, not counted as a miss */
  uint32_t jpeg_unserved;
  uint64_t nclasses, classes_off; /* rdb_class[], read-only part */
  /* --on-miss nearest: rdb_near_group[], and the rdb_near[] they index */
  uint64_t nnear_groups, near_groups_off;
  uint64_t nnear, near_off;
  /* rdb_stuck[], by length: JPEG decodes the recorded program abandoned */
  uint64_t nstuck, stuck_off;
  /* rdb_schema[]: the recorded protobuf message types' schemas */
  uint64_t nschemas, schemas_off;
  /* rdb_drop[], by where they end: the bytes recorded programs dropped */
  uint64_t ndrops, drops_off;
  /* rdb_prefix[], by length then hash: how recorded libjpeg requests begin */
  uint64_t nprefixes, prefixes_off;
  /* Every entry's samples lie in one run (nsamples from samples_off), and
   * beside it, at sources_off, a u32 per sample in the same order: how long
   * the call waits for the program's callbacks making its request (a JPEG
   * source's fills: plan_decision.source_ns), before the link in. Apart
   * from rdb_sample, which the hot path reads (it grew once, and a 1 KB
   * unpack's harness doubled); 0: no sample has any. */
  uint64_t nsamples, samples_off, sources_off;
  /* (nentries + 63) / 64 _Atomic u64 words in the writable part: bit i is
   * set once entry i, recorded once (nsamples 1), has been served, and
   * such an entry's occurrence counter (next_off) is never touched. A run
   * of new requests, each recorded once, then writes one line of bits per
   * 512 entries instead of a line of counters per 8, and faults in a page
   * of them per 32,768 entries instead of per 512 (~10 us each on a
   * shadow-paged VM, inside the call that reached it). */
  uint64_t once_off;
} rdb_header;

/* A recorded protobuf message type's schema, by its identity
 * (pbw_schema_id: its fields, defaults and C layout, and those of every
 * type it reaches). A program rebuilt from a changed .proto can keep a
 * type's name while its fields change: its trees then have the recorded
 * fingerprints, but not the recorded packed bytes, and the saved trees
 * have the old defaults. The shim builds the schema of each type the
 * program calls with, once per process, and a type whose name is here
 * with no row of its identity is "changed": its calls run the real library
 * (RDB_FB_CHANGED). A name with several identities (two programs, or two
 * libraries of one, with their own versions of a type) is answered only
 * from entries recorded with the program's (rdb_entry.schema;
 * RDB_ENTRY_MIXED). A row of id 0 (a type whose schema was not recorded,
 * or recorded by another version of standin) leaves its name unchecked.
 * Types not here are not checked: none of their calls is in the
 * recording. Sorted by name hash, name and id (the shim searches by the
 * hash). */
typedef struct {
  uint64_t name_hash; /* rdb_name_hash */
  uint64_t name_off;  /* NUL-terminated full name */
  uint64_t id;        /* pbw_schema_id, 0: unknown */
} rdb_schema;

/* A recorded JPEG decode that ended before its last row (JPG_NO_ABANDONED)
 * or failed: its request up to the EOI the normalisation appends, by
 * length and XXH3-64. A replayed decode whose drain suspends with a
 * request that starts so ran out of data where the recorded one did: a
 * program with a suspending source gives up there (or fails), with the
 * rows the library decoded from what was in (replay runs it for real,
 * rep_jpeg.c). fp: the entry a given-up decode's occurrence joined (its
 * image decoded whole, as a truncated file's is a prefix of the whole
 * file's), whose occurrence the replayed one takes, so that a later
 * decode of the whole image does not; zeros: none. exact: the recording
 * knows the bytes the library left unread where the decode stopped
 * (ST_JPF_DROP_*, jpg_unread_final), which replay gives back there
 * (rdb_drop): only a request of exactly len bytes stands there, not a
 * longer one that starts so (the whole file's, suspended further on,
 * which its program reads on). 0: any that starts so (older traces). */
typedef struct {
  uint64_t len;
  uint64_t hash;
  uint8_t fp[16];
  uint64_t exact;
  /* 1: a decode that failed partway through its data (JPG_NO_ERROR_IN_DATA):
   * any request that starts with its len bytes fails there (rep_jpeg.c
   * failed_prefix), not only one that stands there */
  uint64_t in_data;
} rdb_stuck;

/* Where a recorded JPEG decode's program dropped the bytes the library
 * left unread when its source suspended (ST_JPF_DROP_*): they end at
 * datastream byte `end` (from SOI), and are `len` bytes of XXH3-64 `hash`.
 * A replayed decode whose drain suspends there, having taken the same
 * bytes last, gives them back to the program's source (rep_jpeg.c). */
typedef struct {
  uint64_t end;
  uint64_t len;
  uint64_t hash;
} rdb_drop;

/* How a recorded libjpeg decode's request begins: its first len bytes (a
 * power of two from RDB_PREFIX_MIN, before its EOI) are of XXH3-64 hash.
 * Every decode whose request the trace kept has its rows here, offloadable
 * or not, failed or given up; sorted by (len, hash), each once. A replayed
 * drain that suspends holds the start of a request: when no row has the
 * largest such len it holds and its hash, no recorded request starts so,
 * nothing still to come makes it one, and the decode is a miss now
 * (rep_jpeg.c may_grow_into), where it used to wait for the rest. */
#define RDB_PREFIX_MIN 64
typedef struct {
  uint64_t len;
  uint64_t hash;
} rdb_prefix;

/* A message type some of whose APIs stay whole in software: every
 * recorded call of that API and type stays in software for one and the
 * same reason, RDB_SW_NOT_SELECTED (the plan) or RDB_SW_UNSUPPORTED (the
 * model refused every one: protoacc has no get_packed_size). Such calls
 * run the real library straight away, without a fingerprint or a lookup
 * (which cost about what a small call costs, a whole tree walk for a big
 * one, and would be an overrun on every one of them): there is no response
 * to choose, so nothing can be answered wrongly. Not built under --on-miss
 * abort, where every call must be looked up. */
typedef struct {
  uint64_t name_hash; /* rdb_name_hash of the type's full name */
  uint64_t name_off;  /* NUL-terminated full name */
  uint32_t kept;      /* bit (1 << api): that API's calls of this type */
  uint32_t unsup;     /* bit (1 << api) of kept: for RDB_SW_UNSUPPORTED */
} rdb_class;

/* --on-miss nearest. A call that is not in the recording still runs the
 * real library (its response is the real one), but its time comes from the
 * recorded calls of the same API and type nearest in size (rdb_near.key:
 * a protobuf message's encoded size, the request's for unpack, the
 * response's for the others; a JPEG image's width times height): the
 * service, link and accelerator their samples were given, interpolated by
 * size (rp.c nearest), queued on the shared timeline as any other.
 * Items are sorted by (group, key); a group is one API, type and variant:
 * 0 for protobuf; for JPEG, what besides its class a model decides whether
 * it serves a decode by (rdb_near_variant). */
typedef struct {
  uint64_t name_hash; /* rdb_name_hash of the type's full name */
  uint64_t name_off;  /* NUL-terminated full name */
  uint32_t api;
  uint32_t n;       /* its items */
  uint64_t first;   /* index of its first item in rdb_near[] */
  uint64_t variant; /* rdb_near_variant, 0 for protobuf */
} rdb_near_group;

/* A JPEG decode's variant for --on-miss nearest: its scaling (num/den,
 * reduced; unscaled when either is 0), whether the image has restart
 * markers, and whether it gives the component planes (jpg_planar: raw data
 * or YUV, which skip colour conversion and upsampling) instead of pixels. A
 * decode that is not recorded is timed only from decodes of the same class
 * and variant, so it is never given the time of one a model serves when it
 * would not serve it itself, nor a decode's that did other work. */
static inline uint64_t rdb_near_variant(uint64_t num, uint64_t den, uint64_t restart, int planar) {
  if (!num || !den || num == den)
    num = den = 1;
  uint64_t a = num, b = den; /* their greatest common divisor */
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  num /= a;
  den /= a;
  return (uint64_t)(planar != 0) << 49 | (num & 0xffff) << 33 | (den & 0xffff) << 1 |
         (restart != 0);
}

typedef struct {
  uint64_t key;   /* size: encoded bytes, or pixels */
  uint32_t entry; /* index into the entries */
  uint32_t pad;
} rdb_near;

/* Hash of a type name for rdb_class (FNV-1a: names are short and hashed
 * once per thread and type). */
static inline uint64_t rdb_name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++)
    h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
  return h;
}

/* Slot of a fingerprint in the table. */
static inline uint64_t rdb_hash(const uint8_t fp[16]) {
  uint64_t h;
  __builtin_memcpy(&h, fp, 8);
  return h;
}

#endif

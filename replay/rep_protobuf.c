/* rep_protobuf.c — replay hooks for protobuf-c.
 *
 * pack writes the saved bytes, get_packed_size returns the saved size,
 * pack_to_buffer appends the saved bytes, unpack rebuilds the saved tree
 * from its image and the program's bytes (allocations as libprotobuf-c's,
 * or one; copies and fix-ups: no parsing), and free_unpacked frees a tree
 * built as one block. A request that
 * is not in the recording runs the real function (or stops the program
 * under --on-miss abort): a wrong response is never returned. */
#include <dlfcn.h>
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>

#include "bypass.h"
#include "pb_walk.h"
#include "rp.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"

/* What replay makes of a message type (its verdict), found once per
 * process (and kept per thread for the last few types), in one 64-bit word
 * so that it is stored and read whole:
 *   bits 0-15  the APIs whose calls stay whole in software (rp_kept_apis:
 *              they then run the real library at once, uncounted);
 *   bits 16-31 for a name recorded with several definitions, the
 *              rdb_schema row of the program's (only entries recorded with
 *              it answer; 0: any entry of its name);
 *   bit 32     TV_CHANGED: the type is not the recorded one of its name
 *              (rdb_schema): its calls are misses;
 *   bit 33     TV_KNOWN (a verdict is never 0);
 *   bit 34     TV_UNNAMED: the type has no name (protoc-c's optimize_for =
 *              CODE_SIZE): types are told apart by name, so its calls are
 *              misses;
 *   bit 35     TV_RUNTIME: the descriptor is in no loaded object's image
 *              (the program built it at run time): it may be freed and
 *              another type built at its address, which a verdict kept by
 *              address would not see, so its calls are misses;
 *   bits 36-63 the number of unloads (rp_unloads) it holds for: a library
 *              unloaded and another loaded in its place can put another
 *              definition of a type at the same address. */
#define TV_ROW_SHIFT 16
#define TV_ROW_MAX 0xffffu
#define TV_CHANGED (1ull << 32)
#define TV_KNOWN (1ull << 33)
#define TV_UNNAMED (1ull << 34)
#define TV_RUNTIME (1ull << 35)
#define TV_MISS (TV_CHANGED | TV_UNNAMED | TV_RUNTIME)
#define TV_UNLOADS_SHIFT 36

static inline uint64_t tv_unloads(void) {
  return atomic_load_explicit(&rp_unloads, memory_order_relaxed) << TV_UNLOADS_SHIFT;
}

static int miss_reason(uint64_t tv) {
  return tv & TV_RUNTIME ? RDB_FB_RUNTIME : tv & TV_UNNAMED ? RDB_FB_UNNAMED : RDB_FB_CHANGED;
}

static inline uint32_t tv_row(uint64_t tv) {
  return (uint32_t)(tv >> TV_ROW_SHIFT) & TV_ROW_MAX;
}

/* Process-wide, by descriptor: finding a type changed builds its schema
 * (microseconds), once per process and unload count. Slots are claimed
 * with a CAS, and their verdict stored whole after; a verdict of another
 * unload count is worked out again. Forked children inherit the table.
 * Probes are bounded: a type that finds no slot (thousands of types) is
 * worked out again at each of its threads' cache misses. 64 KiB: a
 * process touches at most 16 of its pages. */
#define TYPE_SLOTS 4096
#define TYPE_PROBES 64
static struct {
  _Atomic(const ProtobufCMessageDescriptor *) d;
  _Atomic uint64_t v;
} type_table[TYPE_SLOTS];

static uint64_t verdict_of(const ProtobufCMessageDescriptor *d, uint64_t unloads) {
  if (!shim_in_object(d)) /* before reading it: it may be anything */
    return TV_KNOWN | unloads | TV_RUNTIME;
  uint64_t v = TV_KNOWN | unloads | (rp_has_kept() ? rp_kept_apis(d->name) : 0);
  if (d->name == NULL)
    return v | TV_UNNAMED;
  if (!rp_schema_checked(d->name))
    return v;
  void *sch;
  size_t len;
  uint64_t id = 0;
  if (pbw_schema_build(d, &sch, &len) == PBW_OK) {
    id = pbw_schema_id(sch, len);
    shim_free(sch);
  }
  int several;
  uint32_t row = rp_schema_row(d->name, id, &several);
  if (!row)
    return v | TV_CHANGED;
  /* a row entries cannot name (rdb_entry.schema is 16 bits, and the
   * builder names none past 65534): none answers */
  return several ? v | (uint64_t)(row < TV_ROW_MAX ? row : TV_ROW_MAX) << TV_ROW_SHIFT : v;
}

static uint64_t verdict_slow(const ProtobufCMessageDescriptor *d, uint64_t unloads) {
  unsigned h0 = (unsigned)(((uintptr_t)d >> 4) * 0x9E3779B97F4A7C15ull >> 50) % TYPE_SLOTS, h = h0;
  for (unsigned n = 0; n < TYPE_PROBES; n++, h = (h + 1) % TYPE_SLOTS) {
    const ProtobufCMessageDescriptor *cur =
        atomic_load_explicit(&type_table[h].d, memory_order_acquire);
    if (cur == d) {
      uint64_t v = atomic_load_explicit(&type_table[h].v, memory_order_acquire);
      if (v && (v >> TV_UNLOADS_SHIFT) == (unloads >> TV_UNLOADS_SHIFT))
        return v;
      break;
    }
    if (cur == NULL)
      break;
  }
  uint64_t v = verdict_of(d, unloads);
  h = h0;
  for (unsigned n = 0; n < TYPE_PROBES; n++, h = (h + 1) % TYPE_SLOTS) {
    const ProtobufCMessageDescriptor *cur = NULL;
    if (atomic_compare_exchange_strong(&type_table[h].d, &cur, d) || cur == d) {
      atomic_store_explicit(&type_table[h].v, v, memory_order_release);
      break;
    }
  }
  return v;
}

#define TYPE_CACHE 64
static SHIM_TLS struct {
  const ProtobufCMessageDescriptor *d;
  uint64_t v;
} type_cache[TYPE_CACHE];

/* A thread's cache miss: the verdict from the process's table (0 for a
 * NULL descriptor, whose zeroed slot stops matching after an unload). */
static __attribute__((noinline)) uint64_t verdict_fill(const ProtobufCMessageDescriptor *d,
                                                       unsigned k) {
  if (d == NULL)
    return 0;
  type_cache[k].v = verdict_slow(d, tv_unloads());
  type_cache[k].d = d;
  return type_cache[k].v;
}

/* The verdict on d, asked on every call looked up (0 for NULL), from the
 * thread's cache (callgrind: a replayed 1 KB pack 27 instructions more, a
 * small one 28 to 39 more with 1 to 12 types in turn, 68 with 40; a check
 * of the thread's last type first cost less for one type and more for
 * several). */
static inline uint64_t verdict(const ProtobufCMessageDescriptor *d) {
  unsigned k = (unsigned)((uintptr_t)d >> 6) % TYPE_CACHE;
  uint64_t v = type_cache[k].v;
  if (SHIM_LIKELY(type_cache[k].d == d && !((v ^ tv_unloads()) >> TV_UNLOADS_SHIFT)))
    return v;
  return verdict_fill(d, k);
}

/* Whether d's calls of `api` stay whole in software: 0, or 1 + whether
 * the model refused them (the reason they are counted under). */
static inline int kept(const ProtobufCMessageDescriptor *d, int api) {
  if (SHIM_LIKELY(!rp_has_kept()) || d == NULL)
    return 0;
  uint64_t a = verdict(d);
  return (a >> api & 1) ? 1 + (a >> (RP_KEPT_UNSUP + api) & 1) : 0;
}

/* Whether e may answer a call whose type's verdict is tv: not recorded
 * with two definitions of its type, and with the program's when its name
 * has several. */
static inline int entry_fits(const rdb_entry *e, uint64_t tv) {
  if (SHIM_LIKELY(!(e->flags & RDB_ENTRY_MIXED) && (!tv_row(tv) || e->schema == tv_row(tv))))
    return 1;
  rp_changed_type(e->type_off);
  return 0;
}

static inline const ProtobufCMessageDescriptor *desc_of(const ProtobufCMessage *m) {
  return m ? m->descriptor : NULL;
}

/* Run `call` (the real library) as a call kept without a lookup: nested
 * calls pass through, as in the harness's own software path. */
#define DIRECT(r, call, how)                                                                       \
  do {                                                                                             \
    shim_enter(frame);                                                                             \
    r = call;                                                                                      \
    shim_leave();                                                                                  \
    rp_direct(how > 1);                                                                            \
  } while (0)

/* The real call, for a request replay does not answer: a miss of reason
 * why, or (why < 0) a call the plan keeps in software. What the hook did
 * before (t0 on) is harness time no window hides. Under --on-miss nearest
 * a miss is instead timed from the recorded calls of its API and type
 * nearest to it in size (key: the call's encoded size), the real call's
 * own time then being harness time inside that window. */
#define RUN_REAL(r, call, why, api, type, key)                                                     \
  do {                                                                                             \
    int near_ = (why) >= 0 && rp_miss_near((why), (api), (type), __builtin_return_address(0));    \
    uint64_t s_ = rp_now();                                                                        \
    if (!near_)                                                                                    \
      rp_unhidden(s_ - t0, (api));                                                                 \
    r = call;                                                                                      \
    if (near_)                                                                                     \
      rp_near_done(t0, s_, (api), (type), 0, (key), (why), 1);                                     \
    else                                                                                           \
      rp_software_done(rp_now() - s_);                                                             \
  } while (0)

/* The predicted entry (rp_predicted) when m is the tree it was recorded
 * for: its plain stream is m's (RDB_ENTRY_SIZE_OK entries keep one). A
 * short stream (RDB_SHORT_STREAM) is tried on any entry: its long strings
 * and bytes are references into the response, which a pack copies next
 * anyway, so the compare reads little more than the fingerprint would and
 * hashes nothing. A long one only on an entry served before: reading a
 * stream nothing has touched yet costs more than hashing the tree the
 * program just built (on rpc, whose requests are all different, pack's
 * harness took 233 ns a call against 214 by fingerprint when every entry
 * was tried); and no entry keeps one longer than RDB_LONG_STREAM. An
 * unpack's bytes are read either way (a found entry's are compared too),
 * so its guesses are always tried. */
static const rdb_entry *predicted_tree(const ProtobufCMessage *m, int api) {
  const rdb_entry *e = rp_predicted(api, 0);
  if (!e || !e->stream_len || (e->stream_len > RDB_SHORT_STREAM && !rp_served(e)))
    return NULL;
  const void *stream = rp_ptr(e->stream_off, e->stream_len);
  const void *ref = e->ref_len ? rp_ptr(e->ref_off, e->ref_len) : NULL;
  int right = stream && pbw_tree_matches(m, stream, e->stream_len, ref, ref ? e->ref_len : 0);
  rp_predicted_was(e, right);
  return right ? e : NULL;
}

/* The thread's last sized tree's stream: a program that sizes a tree, then
 * packs it (and packs it to a buffer) walks the same tree two or three
 * times, and each later walk's fingerprint is confirmed by comparing the
 * stream instead of hashing it (pbtest: 1.5 KB streams, XXH3's 128-bit
 * hash of one ~7% of a replay's samples). Kept only by sizes, which pack
 * usually follows, so that other trees pay nothing to keep it. */
/* On the shims' heap from the thread's first size (4 KB: shim_thread_block,
 * not static TLS). */
static __thread __attribute__((tls_model("initial-exec"))) void *sized;
static shim_thread_key sized_key;

static pbw_fp_memo *sized_memo(void) {
  return SHIM_LIKELY(sized != NULL) ? sized
                                    : shim_thread_block(&sized_key, &sized, sizeof(pbw_fp_memo));
}

/* A thread's snapshot of a tree it looked up (pbw_snap), and the entries
 * the tree matched: a tree packed or sized again unchanged (the same
 * message sent again) is confirmed by comparing its bytes with their copy,
 * a few memcmps, where a compare with the entry's stream walks every field
 * (a repeated 1 KB pack: 1,336 instructions of its 2,043). Each API's entry
 * is learned by the walk of its first call on the snapshot's tree. A
 * snapshot is taken when the thread looks up the tree it looked up last,
 * and it pays only when it serves two calls or more: taking one costs
 * about a walk (pbtest's trees, ~25 blocks each: 3,400 instructions against
 * a walk's 4,200, a compare with the snapshot 1,200). One that served
 * fewer makes the thread wait 1, 2, 4 ... 1024 lookups before it takes the
 * next, so a program that edits its tree between packs (a new 1 KB pack
 * each call), or sizes, packs and packs to a buffer each tree once
 * (pbtest), pays a few instructions a call. Answering another API's call
 * from the entry its stream or fingerprint named cost pbtest basic 20000
 * 8% of its replay's wall (the size's snapshot then served the pack and
 * pack_to_buffer, each a lookup in memory nothing had touched). */
enum { SNAP_APIS = 3 };
enum { SNAP_ALONE, SNAP_SIZED };
typedef struct {
  pbw_snap snap;
  const rdb_entry *e[SNAP_APIS]; /* by snap_api: the entry the tree matched */
  uint64_t unloads;              /* tv_unloads() when taken */
  uint32_t served;
  /* how it was taken: SNAP_ALONE (keep_tree) or SNAP_SIZED (with a size's
   * fingerprint, size_snap); each way has its own wait before the next,
   * and failures of one do not hold the other back */
  unsigned kind;
  uint32_t fails[2], wait[2];
  /* SNAP_SIZED: snapshots taken lately, and of them those that served a
   * call (both halved now and then, so that they follow the program) */
  uint32_t sized_taken, sized_paid;
  /* the tree's fingerprint, not bound to an API (have_fp): a call of an
   * API the snapshot has no entry for yet looks it up without a walk */
  int have_fp;
  uint8_t fp[16];
} tree_snap;

static __thread __attribute__((tls_model("initial-exec"))) void *snaps;
static __thread __attribute__((tls_model("initial-exec"))) const ProtobufCMessage *last_tree;
/* last_tree was looked up by a size that chose whether to take a snapshot
 * (size_snap): keep_tree does not choose again for the calls after it */
static __thread __attribute__((tls_model("initial-exec"))) int last_sized;
static shim_thread_key snaps_key;

static inline unsigned snap_api(int api) {
  return api == ST_API_PB_PACK ? 0 : api == ST_API_PB_SIZE ? 1 : 2;
}

/* The thread waits longer before its next snapshot taken as this one
 * was. */
static void snap_backoff(tree_snap *ts) {
  unsigned k = ts->kind;
  ts->wait[k] = 1u << (ts->fails[k] < 10 ? ts->fails[k] : 10);
  ts->fails[k]++;
}

/* A snapshot a size's walk took served calls (0: none, or it could not
 * be taken). It costs a fraction of a walk and saves about one for each
 * call it serves, so sizes keep taking them while one in four serves: a
 * program that edits some trees between their size and their pack (one in
 * three, pbtest sizeedit) still gains. Below that the thread waits, longer
 * each time; the wait is made odd or even by the count, so that a program
 * whose edits come with a period does not keep landing on them. */
static void sized_result(tree_snap *ts, uint32_t served) {
  ts->sized_taken++;
  ts->sized_paid += served > 0;
  if (ts->sized_taken >= 64) {
    ts->sized_taken /= 2;
    ts->sized_paid /= 2;
  }
  if (ts->sized_taken < 8 || ts->sized_paid * 4 >= ts->sized_taken) {
    ts->fails[SNAP_SIZED] = 0;
    return;
  }
  uint32_t f = ts->fails[SNAP_SIZED]++;
  ts->wait[SNAP_SIZED] = (1u << (f < 10 ? f : 10)) + (ts->sized_taken & 1);
}

/* The snapshot is dropped; one that did not pay lengthens the wait: one
 * taken alone costs about a walk and pays from two calls served (a size's:
 * sized_result). */
static void snap_drop(tree_snap *ts) {
  if (ts->snap.m && ts->kind == SNAP_SIZED) {
    sized_result(ts, ts->served);
  } else if (ts->snap.m && ts->served < 2) {
    snap_backoff(ts);
  } else if (ts->snap.m) {
    ts->fails[ts->kind] = 0;
  }
  ts->snap.m = NULL;
}

/* The entry for api of m when m is the thread's snapshot unchanged (*held
 * then 1); NULL when it is not, or when no call of api has matched it. */
static const rdb_entry *unchanged_tree(const ProtobufCMessage *m, int api, int *held) {
  tree_snap *ts = snaps;
  if (SHIM_LIKELY(!ts || ts->snap.m != m))
    return NULL;
  if (ts->unloads != tv_unloads() || !pbw_snap_holds(&ts->snap, m)) {
    snap_drop(ts);
    return NULL;
  }
  *held = 1;
  const rdb_entry *e = ts->e[snap_api(api)];
  if (!e && ts->have_fp) { /* the tree's entry for this API, by its fingerprint */
    uint8_t fp[16];
    memcpy(fp, ts->fp, 16);
    shim_fp_bind(fp, api);
    if ((e = rp_lookup(fp)) != NULL)
      ts->e[snap_api(api)] = e;
  }
  if (e) {
    ts->served++;
    rp_tree_unchanged();
  }
  return e;
}

/* After m was found to be e's tree by a walk: the snapshot's entry for api
 * if the snapshot held, else maybe a new snapshot. fp: the tree's
 * fingerprint, not bound to api (NULL: the walk compared a stream). */
static void keep_tree(const ProtobufCMessage *m, int api, const rdb_entry *e, int held,
                      const uint8_t *fp) {
  tree_snap *ts = snaps;
  int again = m == last_tree && !last_sized;
  last_tree = m;
  last_sized = 0;
  if (held) {
    ts->e[snap_api(api)] = e;
    return;
  }
  if (!again)
    return;
  if (ts && ts->wait[SNAP_ALONE]) {
    ts->wait[SNAP_ALONE]--;
    return;
  }
  if (!ts && !(ts = shim_thread_block(&snaps_key, &snaps, sizeof(tree_snap))))
    return;
  snap_drop(ts);
  if (ts->wait[SNAP_ALONE])
    return;
  memset(ts->e, 0, sizeof ts->e);
  ts->e[snap_api(api)] = e;
  ts->unloads = tv_unloads();
  ts->served = 0;
  ts->kind = SNAP_ALONE;
  ts->have_fp = fp != NULL;
  if (fp)
    memcpy(ts->fp, fp, 16);
  /* snap.m is NULL if it cannot be taken: a tree whose bytes do not fit
   * (PostGIS's vector tiles) cost ~9,400 instructions a pack to find so,
   * every pack, until a failed snapshot counted as one that did not pay */
  if (pbw_snap_take(m, &ts->snap) != PBW_OK)
    snap_backoff(ts);
}

/* The thread's snapshot to take with a size's fingerprint, or NULL. A
 * program sizes a tree to allocate for its pack, so the walk that
 * fingerprints a size also takes the snapshot (pbw_fingerprint_tree_snap:
 * copying the blocks it reads costs a fraction of a walk), and the pack
 * and pack_to_buffer that follow compare it instead of walking the tree
 * again, each a walk saved (pbtest basic: 11,585 -> 9,728 instructions
 * for a tree's size, pack and pack_to_buffer, callgrind). When too few
 * of them serve a call (a size not followed by a pack of its tree, an
 * edit between them, a tree too large to copy), the thread waits before
 * the next (sized_result). */
static tree_snap *size_snap(void) {
  tree_snap *ts = snaps;
  if (ts && ts->wait[SNAP_SIZED]) {
    ts->wait[SNAP_SIZED]--;
    return NULL;
  }
  if (!ts && !(ts = shim_thread_block(&snaps_key, &snaps, sizeof(tree_snap))))
    return NULL;
  snap_drop(ts);
  if (ts->wait[SNAP_SIZED])
    return NULL;
  ts->kind = SNAP_SIZED;
  return ts;
}

/* Result of looking up a tree-side request (pack, size, pack_to_buffer). */
static const rdb_entry *lookup_tree(const ProtobufCMessage *m, int api, int *reason) {
  uint64_t tv = verdict(m ? m->descriptor : NULL);
  if (SHIM_UNLIKELY(tv & TV_MISS)) {
    *reason = miss_reason(tv);
    return NULL;
  }
  int held = 0;
  const rdb_entry *e = unchanged_tree(m, api, &held);
  if (e) {
    *reason = RDB_FB_NOT_IN_TRACE;
    goto found;
  }
  e = predicted_tree(m, api);
  uint8_t fp[16], tree_fp[16];
  int have_fp = 0;
  if (!e) {
    pbw_fp_memo *memo = sized_memo();
    /* a size of a tree no snapshot holds chooses whether to take one */
    int sizing = api == ST_API_PB_SIZE && memo && !held;
    tree_snap *ts = sizing ? size_snap() : NULL;
    int rc = ts     ? pbw_fingerprint_tree_snap(m, fp, memo, &ts->snap)
             : memo ? pbw_fingerprint_tree_memo(m, fp, memo, api == ST_API_PB_SIZE)
                    : pbw_fingerprint_tree(m, fp, NULL);
    if (rc != PBW_OK) {
      if (ts)
        ts->snap.m = NULL;
      *reason = RDB_FB_NOT_IN_TRACE;
      return NULL;
    }
    memcpy(tree_fp, fp, 16);
    have_fp = 1;
    shim_fp_bind(fp, api);
    e = rp_lookup(fp);
    if (sizing) {
      last_tree = m;
      last_sized = 1;
    }
    if (ts) { /* the snapshot the walk took, for this tree's later calls */
      memset(ts->e, 0, sizeof ts->e);
      ts->e[snap_api(api)] = e;
      ts->unloads = tv_unloads();
      ts->served = 0;
      ts->have_fp = 1;
      memcpy(ts->fp, tree_fp, 16);
      if (!ts->snap.m) /* the tree's bytes do not fit */
        sized_result(ts, 0);
      else if (!e)
        ts->snap.m = NULL; /* a miss: nothing to serve later calls from */
      goto kept;
    }
  }
  if (e)
    keep_tree(m, api, e, held, have_fp ? tree_fp : NULL);
kept:
  *reason = RDB_FB_NOT_IN_TRACE;
found:
  if (e && SHIM_UNLIKELY((e->flags & (RDB_ENTRY_NO_RESPONSE | RDB_ENTRY_MIXED)) || tv_row(tv))) {
    if (e->flags & RDB_ENTRY_NO_RESPONSE) {
      *reason = RDB_FB_NO_RESPONSE;
      return NULL;
    }
    if (!entry_fits(e, tv)) {
      *reason = RDB_FB_CHANGED;
      return NULL;
    }
  }
  return e;
}

static const char *type_of(const ProtobufCMessage *m) {
  return m && m->descriptor && m->descriptor->name ? m->descriptor->name : "?";
}

/* Whether len, what e answers for m (bytes written, or the size told), is
 * m's packed size: verified when the database was built, or checked here
 * against the real size. A trace must never make replay write past a
 * buffer that the program sized with get_packed_size (see rdb.h). */
static int size_trusted(const rdb_entry *e, const ProtobufCMessage *m, uint64_t len) {
  if (e->flags & RDB_ENTRY_SIZE_OK)
    return 1;
  SHIM_REAL(real, protobuf_c_message_get_packed_size);
  return real(m) == len; /* nested calls pass through: shim_depth is up */
}

/* A tree-side entry for m whose answer may be used, or NULL with *reason. */
static const rdb_entry *lookup_sized(const ProtobufCMessage *m, int api, int *reason) {
  const rdb_entry *e = lookup_tree(m, api, reason);
  if (e && !size_trusted(e, m, api == ST_API_PB_SIZE ? e->result : e->resp_len)) {
    *reason = RDB_FB_MISMATCH;
    return NULL;
  }
  return e;
}

/* The saved response bytes of e, or NULL if the database is damaged. */
static const uint8_t *resp_of(const rdb_entry *e) {
  return rp_ptr(e->resp_off, e->resp_len);
}

SHIM_EXPORT size_t protobuf_c_message_pack(const ProtobufCMessage *m, uint8_t *out) {
  SHIM_REAL(real, protobuf_c_message_pack);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rp_on())
    return real(m, out);
  int how = kept(desc_of(m), ST_API_PB_PACK);
  if (how) {
    size_t r;
    DIRECT(r, real(m, out), how);
    return r;
  }
  uint64_t t0 = rp_now();
  rp_prefetch(ST_API_PB_PACK);
  shim_enter(frame);
  int reason;
  const rdb_entry *e = lookup_sized(m, ST_API_PB_PACK, &reason);
  const uint8_t *resp = e ? resp_of(e) : NULL;
  rp_ticket tk;
  size_t r;
  if (e && resp && rp_begin(&tk, e, t0)) {
    memcpy(out, resp, e->resp_len);
    r = e->resp_len;
    rp_finish(&tk);
  } else {
    int why = e && resp ? -1 : e ? RDB_FB_NO_RESPONSE : reason;
    RUN_REAL(r, real(m, out), why, ST_API_PB_PACK, type_of(m), r);
  }
  shim_leave();
  return r;
}

SHIM_EXPORT size_t protobuf_c_message_get_packed_size(const ProtobufCMessage *m) {
  SHIM_REAL(real, protobuf_c_message_get_packed_size);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rp_on())
    return real(m);
  int how = kept(desc_of(m), ST_API_PB_SIZE);
  if (how) {
    size_t r;
    DIRECT(r, real(m), how);
    return r;
  }
  uint64_t t0 = rp_now();
  rp_prefetch(ST_API_PB_SIZE);
  shim_enter(frame);
  int reason;
  const rdb_entry *e = lookup_sized(m, ST_API_PB_SIZE, &reason);
  rp_ticket tk;
  size_t r;
  if (e && rp_begin(&tk, e, t0)) {
    r = (size_t)e->result;
    rp_finish(&tk);
  } else {
    RUN_REAL(r, real(m), e ? -1 : reason, ST_API_PB_SIZE, type_of(m), r);
  }
  shim_leave();
  return r;
}

SHIM_EXPORT size_t protobuf_c_message_pack_to_buffer(const ProtobufCMessage *m,
                                                     ProtobufCBuffer *buf) {
  SHIM_REAL(real, protobuf_c_message_pack_to_buffer);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rp_on())
    return real(m, buf);
  int how = kept(desc_of(m), ST_API_PB_PACK_BUF);
  if (how) {
    size_t r;
    DIRECT(r, real(m, buf), how);
    return r;
  }
  uint64_t t0 = rp_now();
  rp_prefetch(ST_API_PB_PACK_BUF);
  shim_enter(frame);
  int reason;
  const rdb_entry *e = lookup_sized(m, ST_API_PB_PACK_BUF, &reason);
  const uint8_t *resp = e ? resp_of(e) : NULL;
  rp_ticket tk;
  size_t r;
  if (e && resp && rp_begin(&tk, e, t0)) {
    if (e->resp_len) /* the library appends nothing for an empty message */
      buf->append(buf, e->resp_len, resp);
    r = e->resp_len;
    rp_finish(&tk);
  } else {
    int why = e && resp ? -1 : e ? RDB_FB_NO_RESPONSE : reason;
    RUN_REAL(r, real(m, buf), why, ST_API_PB_PACK_BUF, type_of(m), r);
  }
  shim_leave();
  return r;
}

/* Find the recorded unpack of exactly these bytes; *reason says why not. */
/* Whether e was recorded for type d: its name is d's. Names are stored once
 * per name in the database, so a thread remembers the last pair it found
 * equal and compares offsets. */
static SHIM_TLS const ProtobufCMessageDescriptor *same_d;
static SHIM_TLS uint64_t same_unloads, same_off;

static int type_is(const rdb_entry *e, const ProtobufCMessageDescriptor *d) {
  if (d == same_d && e->type_off == same_off && same_unloads == tv_unloads())
    return 1;
  const char *name = d && d->name ? d->name : "";
  size_t n = strlen(name) + 1;
  const char *t = rp_ptr(e->type_off, n);
  if (!t || memcmp(t, name, n) != 0)
    return 0;
  same_d = d;
  same_unloads = tv_unloads();
  same_off = e->type_off;
  return 1;
}

/* Whether e's saved request is exactly these bytes. */
static int saved_is(const rdb_entry *e, size_t len, const uint8_t *data) {
  const void *req = rp_ptr(e->req_off, e->req_len);
  return req && e->req_len == len && memcmp(req, data, len) == 0;
}

/* Whether e was recorded for bytes of this length and fingerprint (XXH3-128
 * of the bytes, mixed with the type's name and the length, bound to the
 * API): the trust the trace gives equal payloads (traces/writer.c
 * dedup_find), and the database builder checked the entry's fingerprint
 * against its saved bytes (cli/replaydb.c unpack_image). */
static int saved_fp_is(const rdb_entry *e, size_t len, const uint8_t fp[16]) {
  return e->req_len == len && memcmp(e->fp, fp, 16) == 0;
}

static void unpack_fp(const ProtobufCMessageDescriptor *d, size_t len, const uint8_t *data,
                      uint8_t fp[16]) {
  pbw_fingerprint_bytes(d, data, len, fp);
  shim_fp_bind(fp, ST_API_PB_UNPACK);
}

/* Find the recorded unpack of these bytes; *reason says why not. The
 * thread's guess is confirmed by comparing the bytes when they are short
 * (RDB_UNPACK_COMPARE_MAX) or the run has served it before (they are
 * likely in the caches, and cost less to compare than to fingerprint: a
 * 1 KB message unpacked again and again, 91 ns of harness against 114),
 * else by the fingerprint, which reads none of the entry's saved bytes (a
 * new 1 KB message each call: 186 ns against 204; a new 64 B one, 138
 * against 150 the other way). */
static const rdb_entry *lookup_bytes(const ProtobufCMessageDescriptor *d, size_t len,
                                     const uint8_t *data, int *reason) {
  uint64_t tv = verdict(d);
  if (SHIM_UNLIKELY(tv & TV_MISS)) {
    *reason = miss_reason(tv);
    return NULL;
  }
  uint8_t fp[16];
  int have_fp = 0;
  const rdb_entry *e = rp_predicted(ST_API_PB_UNPACK, 0);
  if (e) {
    int right;
    if (len <= RDB_UNPACK_COMPARE_MAX || rp_served(e)) {
      right = saved_is(e, len, data);
    } else {
      unpack_fp(d, len, data, fp);
      have_fp = 1;
      right = saved_fp_is(e, len, fp);
    }
    right = right && type_is(e, d);
    rp_predicted_was(e, right);
    if (!right)
      e = NULL;
  }
  if (!e) {
    if (!have_fp)
      unpack_fp(d, len, data, fp);
    e = rp_lookup(fp); /* the fingerprint compared: its length is left */
    *reason = RDB_FB_NOT_IN_TRACE;
    if (!e)
      return NULL;
    if (e->req_len != len) {
      *reason = RDB_FB_MISMATCH;
      return NULL;
    }
  }
  if ((e->flags & RDB_ENTRY_NO_RESPONSE) && !(e->flags & RDB_ENTRY_FAILED)) {
    *reason = RDB_FB_NO_RESPONSE;
    return NULL;
  }
  if (!entry_fits(e, tv)) {
    *reason = RDB_FB_CHANGED;
    return NULL;
  }
  return e;
}

/* A rebuilt tree, or NULL and the reason (RDB_FB_*): returned in registers. */
typedef struct {
  ProtobufCMessage *m;
  int reason;
} built;

/* Rebuild the saved tree of the request (len, data), which is the one
 * recorded (lookup_bytes compared them): the image's long strings and
 * bytes are copied from it (pbw_image_refer). Piece by piece (--unpack-trees
 * pieces), which the real free_unpacked frees; else, or when the image does
 * not split, one block, registered for our free_unpacked as it was
 * allocated (pbw_image_block_hook). */
static inline __attribute__((always_inline)) built materialise(const rdb_entry *e,
                                                               const ProtobufCMessageDescriptor *d,
                                                               ProtobufCAllocator *a, size_t len,
                                                               const uint8_t *data) {
  const void *img = rp_ptr(e->resp_off, e->resp_len);
  ProtobufCMessage *m = NULL;
  int rc = img ? PBW_E_UNSUPPORTED : PBW_E_BADIMAGE;
  if (img && rp_unpack_pieces())
    rc = pbw_image_materialise_req(img, e->resp_len, data, len, d, a, &m, rp_memo(e), 1);
  if (rc == PBW_E_UNSUPPORTED) /* one block, as images that do not split */
    rc = img ? pbw_image_materialise_req(img, e->resp_len, data, len, d, a, &m, rp_memo(e), 0)
             : PBW_E_BADIMAGE;
  if (rc == PBW_OK)
    return (built){m, 0};
  return (built){NULL, rc == PBW_E_NOMEM ? RDB_FB_NOMEM : RDB_FB_SCHEMA};
}

/* materialise, for a program's own allocator, which also sees the library's
 * parse-time allocations (pbw_parse_slabs_take). Out of line, with its
 * answer in registers: a repeated 1 KB unpack's harness with the default
 * allocator took 5-10 ns more (110 -> 120 ns, 8 alternating rounds) for 10
 * more instructions when this path shared the hook's frame and its
 * reason's memory. top's slots past n are never read (not cleared). */
static __attribute__((noinline)) built materialise_with_slabs(const rdb_entry *e,
                                                              const ProtobufCMessageDescriptor *d,
                                                              ProtobufCAllocator *a, size_t len,
                                                              const uint8_t *data) {
  pbw_parse_slabs top;
  top.n = 0;
  if (pbw_parse_slabs_take(d, a, data, len, &top) != 0)
    return (built){NULL, RDB_FB_NOMEM};
  built b = materialise(e, d, a, len, data);
  pbw_parse_slabs_free(a, &top);
  return b;
}

SHIM_EXPORT ProtobufCMessage *protobuf_c_message_unpack(const ProtobufCMessageDescriptor *d,
                                                        ProtobufCAllocator *a, size_t len,
                                                        const uint8_t *data) {
  SHIM_REAL(real, protobuf_c_message_unpack);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rp_on())
    return real(d, a, len, data);
  int how = kept(d, ST_API_PB_UNPACK);
  if (how) {
    ProtobufCMessage *r;
    DIRECT(r, real(d, a, len, data), how);
    return r;
  }
  uint64_t t0 = rp_now();
  rp_prefetch(ST_API_PB_UNPACK);
  shim_enter(frame);
  int reason;
  const rdb_entry *e = lookup_bytes(d, len, data, &reason);
  ProtobufCMessage *m = NULL;
  int served = 0;
  if (e && (e->flags & RDB_ENTRY_FAILED)) {
    /* An occurrence failed when recorded: bytes the library refuses, or an
     * allocator that ran out (the same bytes then unpacked once the program
     * gave it room). Which one this is, only the library itself says, with
     * the program's allocator as it is now: it runs, inside the call's
     * window (a replay that failed every later occurrence, or returned a
     * tree where the library failed, answered wrong). */
    rp_ticket tk;
    if ((served = rp_begin(&tk, e, t0)) != 0) {
      m = real(d, a, len, data);
      rp_finish(&tk);
    }
  } else if (e) {
    /* The call is taken before its tree is built: rp_begin's claim of the
     * occurrence is an atomic that would otherwise wait for every store of
     * the tree to reach the cache (a repeated 1 KB unpack's harness: 108
     * -> 100 ns, medians of ten alternating rounds). */
    rp_ticket tk;
    if ((served = rp_begin(&tk, e, t0)) != 0) {
      built b = SHIM_LIKELY(a == NULL) ? materialise(e, d, a, len, data)
                                       : materialise_with_slabs(e, d, a, len, data);
      m = b.m;
      if (!m) { /* the library answers, inside the window, as it would natively */
        rp_unbuilt(b.reason, ST_API_PB_UNPACK, d && d->name ? d->name : "?",
                   __builtin_return_address(0));
        m = real(d, a, len, data);
      }
      rp_finish(&tk);
    } else { /* kept in software: the real call decides */
      e = NULL;
      reason = -1;
    }
  }
  if (!served)
    RUN_REAL(m, real(d, a, len, data), !e && reason >= 0 ? reason : -1, ST_API_PB_UNPACK,
             d && d->name ? d->name : "?", len);
  shim_leave();
  return m;
}

SHIM_EXPORT void protobuf_c_message_free_unpacked(ProtobufCMessage *m, ProtobufCAllocator *a) {
  SHIM_REAL(real, protobuf_c_message_free_unpacked);
  /* asked inside a hook too: a program's allocator called by a replayed
   * unpack may free a cached tree of ours (only roots are ours: the
   * library's own calls for sub-messages are never) */
  if (!m || !rp_own_take(m)) {
    shim_depth++;
    real(m, a);
    shim_depth--;
    return;
  }
  if (a)
    a->free(a->allocator_data, m);
  else
    free(m);
}

/* A library unloaded takes its descriptors with it, and one loaded later
 * may put other definitions of its types at the same addresses: the type
 * verdicts and memos above hold for as many unloads as when they were
 * made. Only a dlclose that unloaded something counts (a dlopen and
 * dlclose of a library in use, for each request, would otherwise build
 * every type's schema again each time). Not covered: another thread that
 * loads a library into the freed addresses and calls with its types
 * between the unload and the count. */
SHIM_EXPORT int dlclose(void *handle) {
  SHIM_REAL(real, dlclose);
  int r = real(handle);
  long long adds, subs;
  shim_loader_counts(&adds, &subs);
  if (subs < 0) { /* no count from the loader: every dlclose counts */
    atomic_fetch_add(&rp_unloads, 1);
    pbw_image_types_changed();
    return r;
  }
  uint64_t seen = atomic_load(&rp_unloads);
  while ((uint64_t)subs > seen && !atomic_compare_exchange_weak(&rp_unloads, &seen, (uint64_t)subs))
    ;
  if ((uint64_t)subs > seen)
    pbw_image_types_changed();
  return r;
}

/* libprotobuf-c's calls to itself skip the hooks (bypass.c): the calls
 * replay runs for real then cost what they cost natively. */
/* A tree's block, registered before it is filled (pbw_image_block_hook):
 * one our free_unpacked must free; one that cannot be tracked is refused
 * (the unpack then has no tree: the library answers). */
static int own_block(void *blk) {
  return rp_own_add(blk);
}

__attribute__((constructor)) static void rep_protobuf_init(void) {
  shim_bypass_protobuf();
  pbw_image_block_hook(own_block);
  pbw_image_allocator(shim_alloc, shim_free);
  pbw_schema_allocator(shim_realloc, shim_free);
}

/* rec_protobuf.c — record hooks for protobuf-c.
 *
 * Each hook times the real call alone, then (outside the timed window)
 * captures what replay will need and the request's fingerprint and
 * features, doing on the program's thread only what cannot be done later:
 *  - unpack saves the request bytes; the writer thread derives the
 *    fingerprint and the features from them, and replay builds the tree
 *    image offline;
 *  - pack and pack_to_buffer save the packed bytes (the response); for a
 *    type whose schema the writer holds, the writer derives the tree's
 *    fingerprint and statistics from those bytes (pbw_fingerprint_packed,
 *    exactly what the walk gives). Only when the bytes are not saved whole
 *    (no memory), the schema is not known yet (first calls of a type, a
 *    type the schema builder rejects) or the writer is behind is the tree
 *    walked here;
 *  - get_packed_size has no bytes: it walks the tree here.
 * Nested calls (libprotobuf-c re-entering its own exported functions for
 * sub-messages) go straight to the real function. */
#include <dlfcn.h>
#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bypass.h"
#include "faults.h"
#include "pb_walk.h"
#include "record_internal.h"
#include "rt.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"

/* The thread's fault watch of each API that writes into the program's
 * memory (get_packed_size writes nothing). */
static SHIM_TLS rt_fault_watch watch_pack, watch_pack_buf, watch_unpack;

/* The features of a call whose statistics the writer derives: the encoded
 * size now, the rest zero until then (and if it cannot). */
static void put_size_only(rt_call *c, uint64_t encoded) {
  memset(c->feat, 0, ST_PBF_NFEAT * sizeof c->feat[0]);
  c->nfeat = ST_PBF_NFEAT;
  c->feat[ST_PBF_ENCODED_SIZE] = encoded;
}

static void put_stats(rt_call *c, const pbw_stats *st, uint64_t encoded) {
  c->nfeat = rec_tree_features(c->feat, st);
  c->feat[ST_PBF_ENCODED_SIZE] = encoded;
}

/* get_packed_size then pack (or pack_to_buffer) of the same message is
 * how protobuf-c programs serialise, and the two calls fingerprint the
 * same tree. A get_packed_size may leave its fingerprint and features to
 * the pack that follows it on this thread with nothing queued between
 * (the writer copies them over, sink.c), saving a walk of the tree here.
 * It does so only from a call site whose last PAIR_CREDIT sizes were so
 * followed: a size that nothing pairs with is written without a
 * fingerprint (replay then runs it for real), and its site starts again. */
#define PAIR_CREDIT 8
#define PAIR_SITES 64
static SHIM_TLS struct {
  const void *site;
  uint8_t credit;
} pair_sites[PAIR_SITES];
static SHIM_TLS struct {
  const ProtobufCMessage *m; /* the size just queued, or NULL */
  size_t size;               /* what it returned */
  uint64_t at;               /* rt_submitted() after it */
  unsigned slot;             /* its pair_sites slot */
  int deferred;              /* it left its fingerprint to the pack */
} pending;

static unsigned pair_slot(const void *site) {
  return (unsigned)(((uintptr_t)site * 0x9E3779B97F4A7C15ull) >> 58) % PAIR_SITES;
}

/* After a hook's real call: whether this call (api on m, which returned
 * r) pairs with the size just queued: a pack of the same message, of the
 * size it said, with nothing queued between. The size's site learns either
 * way (a program that sizes a message, then fills it in, then packs it
 * never pairs). */
static int pairs_with_pending(int api, const ProtobufCMessage *m, size_t r) {
  if (SHIM_LIKELY(pending.m == NULL))
    return 0;
  int pairs = (api == ST_API_PB_PACK || api == ST_API_PB_PACK_BUF) && pending.m == m &&
              pending.size == r && pending.at == rt_submitted();
  uint8_t *cr = &pair_sites[pending.slot].credit;
  *cr = pairs ? (uint8_t)(*cr < PAIR_CREDIT ? *cr + 1 : PAIR_CREDIT) : 0;
  pending.m = NULL;
  return pairs && pending.deferred;
}

/* Common part of the three tree-side (serialising) calls. packed_saved:
 * the call's response holds the packed bytes of m, saved whole. paired: a
 * pack whose size left it its fingerprint (derived from these bytes on the
 * writer whenever it can be: the writer holds the type's schema). */
static void call_head(rt_call *c, int api, const ProtobufCMessage *m, uint64_t t0, uint64_t t1,
                      size_t result) {
  c->api = (uint8_t)api;
  c->start_ns = t0;
  c->latency_ns = t1 - t0;
  c->end_ns = t1;
  c->result = result;
  c->type_key = m->descriptor;
  c->req_len = 0; /* the request is a tree, not bytes */
}

static void tree_call(rt_call *c, int api, const ProtobufCMessage *m, uint64_t t0, uint64_t t1,
                      size_t result, int packed_saved, int paired) {
  pbw_stats st = {0};
  call_head(c, api, m, t0, t1, result);
  c->pairs_size = (uint8_t)paired;
  if (packed_saved && (paired ? rt_schema_known(m->descriptor) : rt_defer_fp(m->descriptor))) {
    c->derive_fp = RT_DERIVE_SELF; /* sink.c pack_features */
    put_size_only(c, result);
    return;
  }
  if (pbw_fingerprint_tree(m, c->fp, &st) != PBW_OK) {
    c->flags |= ST_CALL_NO_RESPONSE;
    c->reason = PB_REASON_DEPTH;
  }
  shim_fp_bind(c->fp, api);
  put_stats(c, &st, result);
}

/* Inlined into every hook, at every optimisation level: rt_stack's return
 * address must be in the hook, whose caller's frame comes next. */
static inline __attribute__((always_inline)) void submit(rt_call *c) {
  void *ips[ST_MAX_FRAMES];
  int n = rt_stack(ips, ST_MAX_FRAMES);
  rt_submit(c, ips, n);
}

SHIM_EXPORT size_t protobuf_c_message_pack(const ProtobufCMessage *m, uint8_t *out) {
  SHIM_REAL(real, protobuf_c_message_pack);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real)) {
    shim_nested++;
    return real(m, out);
  }
  if (!rt_active(ST_FAMILY_PROTOBUF))
    return real(m, out);
  shim_enter(frame);
  uint32_t n0 = shim_nested;
  RT_FAULT_BEGIN(&watch_pack);
  uint64_t t0 = shim_now_ns();
  size_t r = real(m, out);
  uint64_t t1 = shim_now_ns();
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* the timing-only pass: nothing else */
    rt_timing_add(ST_API_PB_PACK, t0, t1 - t0, shim_nested - n0, r);
    shim_leave();
    return r;
  }
  uint32_t fault_ns = RT_FAULT_END(&watch_pack, t1 - t0);
  rt_call c;
  rt_call_init(&c);
  c.fault_ns = fault_ns;
  c.nested = shim_nested - n0;
  c.resp_len = r;
  c.resp = (rt_payload){RT_PAY_COPY, out, r};
  int paired = pairs_with_pending(ST_API_PB_PACK, m, r);
  tree_call(&c, ST_API_PB_PACK, m, t0, t1, r, rt_keep_whole(&c.resp) == 0, paired);
  submit(&c);
  shim_leave();
  return r;
}

SHIM_EXPORT size_t protobuf_c_message_get_packed_size(const ProtobufCMessage *m) {
  SHIM_REAL(real, protobuf_c_message_get_packed_size);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real)) {
    shim_nested++;
    return real(m);
  }
  if (!rt_active(ST_FAMILY_PROTOBUF))
    return real(m);
  shim_enter(frame);
  uint32_t n0 = shim_nested;
  uint64_t t0 = shim_now_ns();
  size_t r = real(m);
  uint64_t t1 = shim_now_ns();
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* the timing-only pass: nothing else */
    rt_timing_add(ST_API_PB_SIZE, t0, t1 - t0, shim_nested - n0, r);
    shim_leave();
    return r;
  }
  pairs_with_pending(ST_API_PB_SIZE, m, r);
  rt_call c;
  rt_call_init(&c);
  c.nested = shim_nested - n0;
  const void *site = __builtin_return_address(0);
  unsigned slot = pair_slot(site);
  if (pair_sites[slot].site != site) {
    pair_sites[slot].site = site;
    pair_sites[slot].credit = 0;
  }
  /* unknown fields a program put in by hand are what may not read back
   * from the packed bytes (pack_features): such a tree walks here. Deeper
   * in the tree they are caught late: the writer, behind the program,
   * stops the type's deferral once a size found no usable pack. */
  int defer = pair_sites[slot].credit >= PAIR_CREDIT && m->n_unknown_fields == 0 &&
              rt_size_may_pair(m->descriptor);
  if (defer) { /* the fingerprint comes with the pack that follows */
    call_head(&c, ST_API_PB_SIZE, m, t0, t1, r);
    c.derive_fp = RT_DERIVE_FROM_NEXT;
    put_size_only(&c, r);
  } else {
    tree_call(&c, ST_API_PB_SIZE, m, t0, t1, r, 0, 0);
  }
  submit(&c);
  pending.m = m;
  pending.size = r;
  pending.at = rt_submitted();
  pending.slot = slot;
  pending.deferred = defer;
  shim_leave();
  return r;
}

/* protobuf_c_buffer_simple_append as the program sees it (the address
 * PROTOBUF_C_BUFFER_SIMPLE_INIT stores), or NULL; set at start. */
static void (*simple_append)(ProtobufCBuffer *, size_t, const uint8_t *);

_Atomic uint64_t rt_pb_buf_read_back;

SHIM_EXPORT size_t protobuf_c_message_pack_to_buffer(const ProtobufCMessage *m,
                                                     ProtobufCBuffer *buf) {
  SHIM_REAL(real, protobuf_c_message_pack_to_buffer);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real)) {
    shim_nested++;
    return real(m, buf);
  }
  if (!rt_active(ST_FAMILY_PROTOBUF))
    return real(m, buf);
  shim_enter(frame);
  /* a ProtobufCBufferSimple (the common sink) keeps what was appended */
  ProtobufCBufferSimple *sb =
      simple_append && buf && buf->append == simple_append ? (ProtobufCBufferSimple *)buf : NULL;
  size_t before = sb ? sb->len : 0;
  uint32_t n0 = shim_nested;
  RT_FAULT_BEGIN(&watch_pack_buf);
  uint64_t t0 = shim_now_ns();
  size_t r = real(m, buf);
  uint64_t t1 = shim_now_ns();
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* the timing-only pass: nothing else */
    rt_timing_add(ST_API_PB_PACK_BUF, t0, t1 - t0, shim_nested - n0, r);
    shim_leave();
    return r;
  }
  uint32_t fault_ns = RT_FAULT_END(&watch_pack_buf, t1 - t0);
  int paired = pairs_with_pending(ST_API_PB_PACK_BUF, m, r);
  rt_call c;
  rt_call_init(&c);
  c.fault_ns = fault_ns;
  c.nested = shim_nested - n0;
  c.resp_len = r;
  /* The bytes appended: taken from a simple buffer as pack's are from its
   * output; any other sink is packed again, untimed, rather than slowing
   * the timed call with a tee (a second pack cost the program's thread as
   * much as the call). */
  int saved = 0;
  if (sb && sb->len == before + r && sb->data) {
    c.resp = (rt_payload){RT_PAY_COPY, sb->data + before, r};
    saved = rt_keep_whole(&c.resp) == 0;
    atomic_fetch_add_explicit(&rt_pb_buf_read_back, 1, memory_order_relaxed);
  } else {
    SHIM_REAL(real_pack, protobuf_c_message_pack);
    uint8_t *copy = shim_alloc(r);
    saved = copy && real_pack(m, copy) == r;
    if (saved)
      c.resp = (rt_payload){RT_PAY_OWN, copy, r};
    else
      shim_free(copy);
  }
  tree_call(&c, ST_API_PB_PACK_BUF, m, t0, t1, r, saved, paired);
  if (!saved) {
    c.flags |= ST_CALL_NO_RESPONSE;
    c.reason = PB_REASON_NOMEM;
  }
  submit(&c);
  shim_leave();
  return r;
}

SHIM_EXPORT ProtobufCMessage *protobuf_c_message_unpack(const ProtobufCMessageDescriptor *d,
                                                        ProtobufCAllocator *a, size_t len,
                                                        const uint8_t *data) {
  SHIM_REAL(real, protobuf_c_message_unpack);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real)) {
    shim_nested++;
    return real(d, a, len, data);
  }
  if (!rt_active(ST_FAMILY_PROTOBUF))
    return real(d, a, len, data);
  shim_enter(frame);
  uint32_t n0 = shim_nested;
  RT_FAULT_BEGIN(&watch_unpack);
  uint64_t t0 = shim_now_ns();
  ProtobufCMessage *m = real(d, a, len, data);
  uint64_t t1 = shim_now_ns();
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* the timing-only pass: nothing else */
    rt_timing_add(ST_API_PB_UNPACK, t0, t1 - t0, shim_nested - n0, len);
    shim_leave();
    return m;
  }
  uint32_t fault_ns = RT_FAULT_END(&watch_unpack, t1 - t0);
  pairs_with_pending(ST_API_PB_UNPACK, NULL, 0);
  rt_call c;
  rt_call_init(&c);
  c.fault_ns = fault_ns;
  c.nested = shim_nested - n0;
  c.api = ST_API_PB_UNPACK;
  c.start_ns = t0;
  c.latency_ns = t1 - t0;
  c.end_ns = t1;
  c.type_key = d;
  c.req_len = len;
  c.req = (rt_payload){RT_PAY_COPY, data, len};
  /* the fingerprint is a hash of the bytes: the writer takes it from the
   * saved copy (sink.c), unless they cannot be saved */
  if (rt_keep_whole(&c.req) == 0) {
    c.derive_fp = RT_DERIVE_SELF;
  } else {
    pbw_fingerprint_bytes(d, data, len, c.fp);
    shim_fp_bind(c.fp, ST_API_PB_UNPACK);
  }
  /* Only the request bytes are saved: features are derived from them by
   * the writer thread, and replay builds the tree image offline from the
   * bytes and the schema, so nothing heavier happens on this thread. */
  if (!m)
    c.flags |= ST_CALL_FAILED;
  put_size_only(&c, len);
  c.result = m != NULL;
  submit(&c);
  shim_leave();
  return m;
}

int rt_pb_bypassed;

/* libprotobuf-c's calls to itself (every sub-message) skip the hooks: they
 * are never recorded, and passing through a hook inside a timed call costs
 * the call time natively spent elsewhere (bypass.c). */
__attribute__((constructor)) static void rec_protobuf_init(void) {
  rt_pb_bypassed = shim_bypass_protobuf();
  pbw_schema_allocator(shim_realloc, shim_free); /* typecap.c builds on program threads */
  simple_append = (void (*)(ProtobufCBuffer *, size_t, const uint8_t *))dlsym(
      RTLD_DEFAULT, "protobuf_c_buffer_simple_append");
}

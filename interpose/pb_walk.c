/* pb_walk.c — fingerprints and statistics of protobuf-c message trees.
 *
 * This runs on every intercepted pack call during replay, so it must cost
 * far less than packing and must not allocate. Values are gathered into a
 * stack buffer that is hashed with one-shot XXH3-128 whenever it fills (the
 * digest of everything so far then opens the next buffer, so 128 bits of
 * state are carried across chunks); long strings and bytes are hashed in
 * place and stand in the stream as their own XXH3-128 digest.
 *
 * The hashed stream, for the root and then recursively:
 *   root:     u64 name length, name bytes, message
 *   message:  field*, [u32 FP_UNKNOWN, u64 n, (u32 tag, u32 wire type,
 *             blob)*], u32 FP_END
 *   field:    u32 number, value               (singular, written by pack)
 *             u32 number, u64 count, value*   (repeated, count > 0)
 *   value:    4 or 8 raw bytes; bool as u32 0/1; string and bytes as blob;
 *             message as above, after u32 FP_TYPE and its type's name as a
 *             blob when its type is not its field's (walk_other_type)
 *   blob:     u64 length, then the content if shorter than FP_DIRECT,
 *             else XXH3-128 of the content
 * Field numbers are >= 1, so FP_END (0) and FP_UNKNOWN cannot be confused
 * with them, and each number fixes the shape of the value that follows.
 * The stream is gathered and chunked by the helpers in pb_fpstream.h, where
 * the reservation sizes (part of the hash) are spelled out; pb_fpbytes.c
 * shares them to derive the same fingerprint from the bytes pack wrote.
 *
 * Statistics describe what pack writes too (pb_json.c derives the same
 * from encoded bytes): `fields` counts each written singular field, each
 * repeated field with at least one element and each unknown field once;
 * `repeated` counts elements (packed or not, map entries included);
 * `submsgs` counts message values below the root (a NULL slot that pack
 * writes as an empty message included); `field_words` sums the presence
 * words of every message written (that empty message too: the bytes cannot
 * tell it from a message without fields set); `var_bytes` sums string lengths
 * (up to the first NUL, as strlen) and bytes lengths of written fields,
 * not unknown fields. */
#include <dlfcn.h>
#include <stddef.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pb_fpstream.h" /* the stream's buffer and writers, shared with pb_fpbytes.c */

const char *pbw_strerror(int err) {
  switch (err) {
  case PBW_OK: return "success";
  case PBW_E_NOMEM: return "out of memory";
  case PBW_E_UNSUPPORTED: return "message tree holds a pointer that cannot be captured";
  case PBW_E_BADIMAGE: return "message image is damaged";
  case PBW_E_SCHEMA: return "message image does not fit the message descriptor";
  case PBW_E_DEPTH: return "message nesting deeper than PBW_MAX_DEPTH";
  case PBW_E_BADSCHEMA: return "schema bytes are damaged";
  case PBW_E_BADDATA: return "encoded message does not parse against the schema";
  default: return "unknown pb_walk error";
  }
}

/* Only a successful lookup is cached: a program may dlopen protobuf-c after
 * our first call. Threads race benignly (they store the same value). */
const char *pbw__empty_string(void) {
  static const char *cached;
  const char *p = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (p == NULL) {
    p = dlsym(RTLD_DEFAULT, "protobuf_c_empty_string");
    __atomic_store_n(&cached, p, __ATOMIC_RELAXED);
  }
  return p;
}

static int walk_msg(walk_ctx *c, const ProtobufCMessage *m, unsigned depth);

/* ---- Snapshots (pbw_snap) -----------------------------------------------
 *
 * A record per block of the tree's memory the walk reads: its address, its
 * length and how to check it, then a copy of its bytes (8-aligned). The
 * records are in the walk's order, a message's struct before anything its
 * pointers lead to, so each record's address is a pointer held by a record
 * before it: once those hold, it is the pointer the walk would follow. */
typedef struct {
  const void *addr;
  uint32_t len;
  uint32_t kind;
} snap_rec;

enum {
  SR_RAW, /* len bytes */
  SR_MSG, /* a message's struct: its descriptor pointer first */
  SR_STR  /* a string and its NUL: its length first */
};

static inline int snap_put(pbw_snap *s, const void *addr, size_t len, unsigned kind) {
  size_t need = sizeof(snap_rec) + ((len + 7) & ~(size_t)7);
  if (len > sizeof s->rec || need > sizeof s->rec - s->n)
    return PBW_E_NOMEM;
  unsigned char *w = s->rec + s->n;
  snap_rec r = {addr, (uint32_t)len, kind};
  memcpy(w, &r, sizeof r);
  if (len <= 32) /* most blocks: short strings, small structs */
    pbw__copy_small(w + sizeof r, addr, len);
  else
    memcpy(w + sizeof r, addr, len);
  s->n += need;
  return PBW_OK;
}

/* Helpers of both walks, inlined where `mode` is a constant (the planned
 * walk is compiled three times: see walk_body). WM_STATS gathers the
 * statistics; WM_SNAP also takes a snapshot of the tree (pbw_snap) into
 * c->snap, the records pbw_snap_take would make, in its order. */
#define WALK_INLINE static inline __attribute__((always_inline))
enum { WM_STATS = 1, WM_SNAP = 2 };

/* WM_SNAP: a block the walk reads; a snapshot that cannot hold it is
 * given up (c->snap_bad), the walk goes on. */
static inline void walk_snap(walk_ctx *c, const void *addr, size_t len, unsigned kind) {
  if (!c->snap_bad && snap_put(c->snap, addr, len, kind) != PBW_OK)
    c->snap_bad = 1;
}

/* A NULL string is written by pack as "" (required fields only). */
WALK_INLINE void walk_string(walk_ctx *c, const char *s, const int mode) {
  size_t n = s ? strlen(s) : 0;
  if (mode & WM_STATS)
    c->st.var_bytes += n;
  if ((mode & WM_SNAP) && s)
    walk_snap(c, s, n + 1, SR_STR);
  fp_blob(c, s, n);
}

/* Bytes with a length but no data would crash pack, and get_packed_size
 * counts the length: they stand in the stream as a length no blob has,
 * then theirs (hashed as empty bytes, a size call took the size of a tree
 * with no bytes there). */
WALK_INLINE void walk_bytes(walk_ctx *c, const ProtobufCBinaryData *bd, const int mode) {
  if (__builtin_expect(bd->data == NULL && bd->len > 0, 0)) {
    fp_u64(c, UINT64_MAX);
    fp_u64(c, bd->len);
    return;
  }
  size_t n = bd->data ? bd->len : 0;
  if (mode & WM_STATS)
    c->st.var_bytes += n;
  if ((mode & WM_SNAP) && n)
    walk_snap(c, bd->data, n, SR_RAW);
  fp_blob(c, bd->data, n);
}

/* Value shapes of scalar fields (and WK_OTHER: strings, bytes, messages;
 * plans tell those three apart as WK_STR, WK_BYTES and WK_MSG). */
enum { WK_S4, WK_S8, WK_BOOL, WK_OTHER, WK_STR, WK_BYTES, WK_MSG };

static int wop_kind(ProtobufCType t) {
  if (t == PROTOBUF_C_TYPE_BOOL)
    return WK_BOOL;
  if (t >= PROTOBUF_C_TYPE_STRING)
    return WK_OTHER;
  return pbw__elt_size(t) == 8 ? WK_S8 : WK_S4;
}

/* Number and value of a written scalar field of shape kind, in one
 * reservation. */
static inline void walk_scalar(walk_ctx *c, uint32_t id, int kind, const void *p) {
  switch (kind) {
  case WK_S8: fp_scalar(c, id, p, 8); break;
  case WK_BOOL: {
    uint32_t b = pbw__ld32(p) != 0; /* pack writes 0 or 1 */
    fp_scalar(c, id, &b, 4);
    break;
  }
  default: fp_scalar(c, id, p, 4); break;
  }
}

/* A NULL message in a required or repeated slot: pack writes an empty
 * message of the field's type, so it counts as one (its presence words
 * included, as the bytes pack wrote would give). */
static int walk_null_msg(walk_ctx *c, const ProtobufCFieldDescriptor *f, unsigned depth) {
  const ProtobufCMessageDescriptor *d = f->descriptor;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  if (depth > c->st.max_depth)
    c->st.max_depth = depth;
  if (d != NULL)
    c->st.field_words += (d->n_fields + 31) / 32;
  fp_u32(c, FP_END);
  return PBW_OK;
}

/* A sub-message whose type is not its field's: pack encodes it with its own
 * descriptor, so the same raw values pack otherwise (an Inner2 whose field
 * is sint32 for an Inner's int32: replay returned the Inner's bytes). Its
 * type's name goes into the stream; the same type through another copy of
 * its descriptor adds nothing. */
static inline void walk_other_type(walk_ctx *c, const ProtobufCFieldDescriptor *f,
                                   const ProtobufCMessage *sub) {
  const ProtobufCMessageDescriptor *d = sub->descriptor, *want = f->descriptor;
  if (__builtin_expect(d == want, 1))
    return;
  const char *n = d && d->name ? d->name : "", *w = want && want->name ? want->name : "";
  if (strcmp(n, w) == 0)
    return;
  fp_u32(c, FP_TYPE);
  fp_blob(c, n, strlen(n));
}

static int walk_value(walk_ctx *c, const ProtobufCFieldDescriptor *f, const void *p,
                      unsigned depth) {
  ProtobufCType t = f->type;
  const ProtobufCMessage *sub;
  switch (t) {
  case PROTOBUF_C_TYPE_STRING: walk_string(c, pbw__ldptr(p), 1); return PBW_OK;
  case PROTOBUF_C_TYPE_BYTES: walk_bytes(c, p, 1); return PBW_OK;
  case PROTOBUF_C_TYPE_MESSAGE:
    c->st.submsgs++;
    sub = pbw__ldptr(p);
    if (sub)
      walk_other_type(c, f, sub);
    return sub ? walk_msg(c, sub, depth + 1) : walk_null_msg(c, f, depth + 1);
  case PROTOBUF_C_TYPE_BOOL: fp_u32(c, pbw__ld32(p) != 0); return PBW_OK;
  default:
    if (pbw__elt_size(t) == 8)
      fp_u64(c, pbw__ld64(p));
    else
      fp_u32(c, pbw__ld32(p));
    return PBW_OK;
  }
}

/* Whether pack writes the array of field f (numbers) as its raw bytes: a
 * packed array of fixed-size numbers. Only such an array can be found in
 * the packed bytes by the plain stream's references; looking for any other
 * searched the whole message each time, and building the replay database
 * of a 1 MB message of small uint32 arrays took 3.7 s. */
static inline int raw_array(const ProtobufCFieldDescriptor *f) {
  if (!(f->flags & PROTOBUF_C_FIELD_FLAG_PACKED))
    return 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 1;
  default: return 0;
  }
}

/* An array of n numbers of field f, as one blob. */
static inline void fp_numbers(walk_ctx *c, const ProtobufCFieldDescriptor *f, const void *arr,
                              size_t bytes) {
  c->noref = !raw_array(f);
  fp_blob(c, arr, bytes);
  c->noref = 0;
}

/* Arrays of plain numbers are hashed as one block; everything else (bools
 * are normalised by pack, pointers are followed) element by element. */
static int walk_repeated(walk_ctx *c, const ProtobufCFieldDescriptor *f, const char *base,
                         unsigned depth) {
  size_t n = pbw__ldsize(base + f->quantifier_offset);
  const char *arr = pbw__ldptr(base + f->offset);
  size_t esz = pbw__elt_size(f->type);
  if (n == 0)
    return PBW_OK;
  c->st.fields++;
  c->st.repeated += n;
  fp_u32(c, f->id);
  fp_u64(c, n);
  if (arr == NULL)
    return PBW_OK;
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
    for (size_t i = 0; i < n; i++)
      walk_string(c, ((char *const *)arr)[i], 1);
    return PBW_OK;
  case PROTOBUF_C_TYPE_BYTES:
    for (size_t i = 0; i < n; i++)
      walk_bytes(c, (const ProtobufCBinaryData *)arr + i, 1);
    return PBW_OK;
  case PROTOBUF_C_TYPE_MESSAGE:
  case PROTOBUF_C_TYPE_BOOL: break;
  default: fp_numbers(c, f, arr, n * esz); return PBW_OK;
  }
  for (size_t i = 0; i < n; i++) {
    int rc = walk_value(c, f, arr + i * esz, depth);
    if (rc != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

static void walk_unknown(walk_ctx *c, const ProtobufCMessage *m) {
  unsigned n = m->n_unknown_fields;
  if (n == 0 || m->unknown_fields == NULL)
    return;
  c->st.fields += n;
  fp_u32(c, FP_UNKNOWN);
  fp_u64(c, n);
  for (unsigned i = 0; i < n; i++) {
    const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
    fp_u32(c, u->tag);
    fp_u32(c, (uint32_t)u->wire_type);
    fp_blob(c, u->data, u->data ? u->len : 0);
  }
}

/* The fields pack writes, in descriptor order. Scalars, the common case,
 * take the short path: one presence test, one reservation. */
static int walk_fields(walk_ctx *c, const ProtobufCMessageDescriptor *d, const char *base,
                       unsigned depth) {
  const ProtobufCFieldDescriptor *f = d->fields, *end = f + d->n_fields;
  for (; f < end; f++) {
    int rc;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      if ((rc = walk_repeated(c, f, base, depth)) != PBW_OK)
        return rc;
      continue;
    }
    if (!pbw__singular_written(f, base))
      continue;
    c->st.fields++;
    if (f->type < PROTOBUF_C_TYPE_STRING) {
      walk_scalar(c, f->id, wop_kind(f->type), base + f->offset);
      continue;
    }
    fp_u32(c, f->id);
    if ((rc = walk_value(c, f, base + f->offset, depth)) != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

/* ---- Walk plans ----------------------------------------------------------
 *
 * Interpreting a descriptor costs about 37 instructions a field on every
 * call: label, flags and type decide presence and the shape of the value
 * again and again. A plan decides them once per message type: one op per
 * field, its presence rule and value kind resolved. Plans are immutable
 * once published, live in a static arena (no allocation, ever) and are found
 * by descriptor address in a lock-free table. When the arena or the table is
 * full, while another thread is publishing the plan, or when plans are
 * switched off, walk_fields interprets the descriptor:
 * both produce the same stream (test_pb_walk checks every tree both ways). */

enum {                /* wop.pres: when pack writes the field */
  WP_ALWAYS,          /* required */
  WP_HAS,             /* optional scalar or bytes: has_ flag */
  WP_PTR,             /* optional string or message: non-NULL, not default */
  WP_ONEOF,           /* oneof member: case equals the field number */
  WP_ONEOF_PTR,       /* oneof string or message: and pointer written */
  WP_ZERO,            /* proto3 without presence: not zeroish */
  WP_REPEATED         /* repeated: count > 0 (walk_repeated) */
};

typedef struct {
  uint32_t id;
  uint8_t pres, kind;
  uint16_t unused;
  uint32_t off, qoff;
  const ProtobufCFieldDescriptor *f;
} wop;

typedef struct {
  size_t n_ops;
  size_t name_len; /* strlen of the type's full name */
  wop ops[];
} wplan;

#define PLAN_SLOTS 1024            /* message types a process can plan */
#define PLAN_ARENA (512u * 1024u)  /* bytes for all plans */

static const ProtobufCMessageDescriptor *plan_keys[PLAN_SLOTS];
static const wplan *plan_vals[PLAN_SLOTS];
static _Alignas(16) unsigned char plan_arena[PLAN_ARENA];
static size_t plan_used;
int pbw__plans_off;
unsigned long pbw__ref_searches;

static unsigned plan_slot(const ProtobufCMessageDescriptor *d) {
  uint64_t h = (uint64_t)(uintptr_t)d * 0x9E3779B97F4A7C15ull;
  return (unsigned)(h >> 54); /* 10 bits: PLAN_SLOTS */
}

static int wop_pres(const ProtobufCFieldDescriptor *f) {
  int ptr_type = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return WP_REPEATED;
  if (f->label == PROTOBUF_C_LABEL_REQUIRED)
    return WP_ALWAYS;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
    return ptr_type ? WP_ONEOF_PTR : WP_ONEOF;
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
    return ptr_type ? WP_PTR : WP_HAS;
  return WP_ZERO;
}

static int plan_kind(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_STRING: return WK_STR;
  case PROTOBUF_C_TYPE_BYTES: return WK_BYTES;
  case PROTOBUF_C_TYPE_MESSAGE: return WK_MSG;
  default: return wop_kind(t);
  }
}

static const wplan *plan_build(const ProtobufCMessageDescriptor *d) {
  size_t need = sizeof(wplan) + (size_t)d->n_fields * sizeof(wop);
  need = (need + 15) & ~(size_t)15;
  size_t at = __atomic_fetch_add(&plan_used, need, __ATOMIC_RELAXED);
  if (at > PLAN_ARENA || need > PLAN_ARENA - at)
    return NULL; /* arena full: this type stays interpreted */
  wplan *p = (wplan *)(plan_arena + at);
  p->n_ops = d->n_fields;
  p->name_len = d->name ? strlen(d->name) : 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    p->ops[i] = (wop){.id = f->id,
                      .pres = (uint8_t)wop_pres(f),
                      .kind = (uint8_t)plan_kind(f->type),
                      .off = f->offset,
                      .qoff = f->quantifier_offset,
                      .f = f};
  }
  return p;
}

/* The plan of d, built on first sight; NULL when none can be had. Threads
 * that race on a new type may both build one; the first to claim the slot
 * publishes it, the others' copies are wasted arena bytes. */
static __attribute__((noinline)) const wplan *plan_find(const ProtobufCMessageDescriptor *d) {
  if (pbw__plans_off)
    return NULL;
  unsigned s = plan_slot(d);
  for (unsigned probe = 0; probe < 8; probe++, s = (s + 1) % PLAN_SLOTS) {
    const ProtobufCMessageDescriptor *k = __atomic_load_n(&plan_keys[s], __ATOMIC_ACQUIRE);
    if (k == d) /* published, or another thread is publishing it */
      return __atomic_load_n(&plan_vals[s], __ATOMIC_ACQUIRE);
    if (k != NULL)
      continue;
    const wplan *p = plan_build(d);
    if (p == NULL)
      return NULL;
    const ProtobufCMessageDescriptor *expect = NULL;
    if (__atomic_compare_exchange_n(&plan_keys[s], &expect, d, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      __atomic_store_n(&plan_vals[s], p, __ATOMIC_RELEASE);
      return p;
    }
    if (expect == d)
      return p; /* same type published meanwhile: ours is as good */
  }
  return NULL; /* neighbourhood full: interpret */
}

/* The common case, a published plan in its home slot, without a call. */
static inline const wplan *plan_of(const ProtobufCMessageDescriptor *d) {
  unsigned s = plan_slot(d);
  if (__atomic_load_n(&plan_keys[s], __ATOMIC_ACQUIRE) == d && !pbw__plans_off) {
    const wplan *p = __atomic_load_n(&plan_vals[s], __ATOMIC_ACQUIRE);
    if (p != NULL)
      return p;
  }
  return plan_find(d);
}

/* WM_SNAP: a message's unknown fields, as pbw_snap_take keeps them (after
 * everything its known fields lead to). */
static void snap_unknown(walk_ctx *c, const ProtobufCMessage *m) {
  unsigned nu = m->n_unknown_fields;
  walk_snap(c, m->unknown_fields, (size_t)nu * sizeof *m->unknown_fields, SR_RAW);
  for (unsigned i = 0; i < nu; i++) {
    const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
    if (u->data && u->len)
      walk_snap(c, u->data, u->len, SR_RAW);
  }
}

/* ---- The planned walk ----------------------------------------------------
 *
 * Compiled three times from one body (`mode` is a constant in each copy):
 * with statistics, for record; without, for replay's lookups, which need
 * the fingerprint alone and run on every replayed pack; and with a
 * snapshot, for a replayed size whose tree the thread will likely pack
 * next. All write the same stream as the interpreted walk. Repeated
 * fields are handled here by the kind the plan resolved, and the elements
 * of a repeated message field look up their plan once, not once each. */

static int walk_msg_st(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p);
static int walk_msg_fp(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p);
static int walk_msg_sn(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p);

WALK_INLINE int walk_sub(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p,
                         const int mode) {
  return mode & WM_STATS  ? walk_msg_st(c, m, depth, p)
         : mode & WM_SNAP ? walk_msg_sn(c, m, depth, p)
                          : walk_msg_fp(c, m, depth, p);
}

/* A message value (field f, at depth), NULL as pack writes it. */
WALK_INLINE int walk_msg_value(walk_ctx *c, const wop *o, const ProtobufCMessage *sub,
                               unsigned depth, const wplan *p, const int mode) {
  if (mode & WM_STATS)
    c->st.submsgs++;
  if (sub == NULL)
    return walk_null_msg(c, o->f, depth);
  walk_other_type(c, o->f, sub);
  return walk_sub(c, sub, depth, p, mode);
}

/* The n > 0 elements of repeated field o (walk_repeated, by plan kind). */
WALK_INLINE int walk_rep(walk_ctx *c, const wop *o, const char *base, size_t n, unsigned depth,
                         const int mode) {
  const char *arr = pbw__ldptr(base + o->off);
  if (mode & WM_STATS) {
    c->st.fields++;
    c->st.repeated += n;
  }
  fp_u32(c, o->id);
  fp_u64(c, n);
  if (arr == NULL)
    return PBW_OK;
  if (mode & WM_SNAP) {
    size_t esz = pbw__elt_size(o->f->type);
    if (n > sizeof c->snap->rec / esz)
      c->snap_bad = 1;
    else
      walk_snap(c, arr, n * esz, SR_RAW);
  }
  switch (o->kind) {
  case WK_S4: fp_numbers(c, o->f, arr, n * 4); return PBW_OK;
  case WK_S8: fp_numbers(c, o->f, arr, n * 8); return PBW_OK;
  case WK_BOOL:
    for (size_t i = 0; i < n; i++)
      fp_u32(c, pbw__ld32(arr + i * sizeof(protobuf_c_boolean)) != 0);
    return PBW_OK;
  case WK_STR:
    for (size_t i = 0; i < n; i++)
      walk_string(c, ((char *const *)arr)[i], mode);
    return PBW_OK;
  case WK_BYTES:
    for (size_t i = 0; i < n; i++)
      walk_bytes(c, (const ProtobufCBinaryData *)arr + i, mode);
    return PBW_OK;
  default: { /* WK_MSG */
    const ProtobufCMessageDescriptor *d = NULL;
    const wplan *p = NULL;
    for (size_t i = 0; i < n; i++) {
      const ProtobufCMessage *sub = ((const ProtobufCMessage *const *)arr)[i];
      if (sub != NULL && sub->descriptor != d) {
        d = sub->descriptor;
        p = plan_of(d);
      }
      int rc = walk_msg_value(c, o, sub, depth + 1, p, mode);
      if (rc != PBW_OK)
        return rc;
    }
    return PBW_OK;
  }
  }
}

/* Whether pack leaves out the singular field of op o in the message at
 * base (not for WP_REPEATED). */
WALK_INLINE int wop_absent(const wop *o, const char *base) {
  const char *mem = base + o->off;
  switch (o->pres) {
  case WP_ALWAYS: return 0;
  case WP_HAS: return pbw__ld32(base + o->qoff) == 0;
  case WP_PTR: {
    const void *v = pbw__ldptr(mem);
    return v == NULL || v == o->f->default_value;
  }
  case WP_ONEOF: return pbw__ld32(base + o->qoff) != o->id;
  case WP_ONEOF_PTR: return pbw__ld32(base + o->qoff) != o->id || !pbw__ptr_written(o->f, mem);
  default: return pbw__zeroish(o->f, mem); /* WP_ZERO */
  }
}

/* walk_fields with the decisions taken from the plan. */
WALK_INLINE int walk_ops(walk_ctx *c, const wplan *p, const char *base, unsigned depth,
                         const int mode) {
  const wop *o = p->ops, *end = o + p->n_ops;
  for (; o < end; o++) {
    const char *mem = base + o->off;
    int rc;
    /* wop_absent's tests, kept in one switch here: 54 instructions fewer
     * a 1 KB tree (its 23 fields) than a test for WP_REPEATED first */
    switch (o->pres) {
    case WP_ALWAYS: break;
    case WP_HAS:
      if (pbw__ld32(base + o->qoff) == 0)
        continue;
      break;
    case WP_PTR: {
      const void *v = pbw__ldptr(mem);
      if (v == NULL || v == o->f->default_value)
        continue;
      break;
    }
    case WP_ONEOF:
      if (pbw__ld32(base + o->qoff) != o->id)
        continue;
      break;
    case WP_ONEOF_PTR:
      if (pbw__ld32(base + o->qoff) != o->id || !pbw__ptr_written(o->f, mem))
        continue;
      break;
    case WP_ZERO:
      if (pbw__zeroish(o->f, mem)) {
        /* a snapshot keeps an empty proto3 string too: its first
         * character is its presence */
        if ((mode & WM_SNAP) && o->kind == WK_STR && pbw__ldptr(mem))
          walk_snap(c, pbw__ldptr(mem), strlen(pbw__ldptr(mem)) + 1, SR_STR);
        continue;
      }
      break;
    default: { /* WP_REPEATED: most repeated fields are empty */
      size_t n = pbw__ldsize(base + o->qoff);
      if (n == 0)
        continue;
      if ((rc = walk_rep(c, o, base, n, depth, mode)) != PBW_OK)
        return rc;
      continue;
    }
    }
    if (mode & WM_STATS)
      c->st.fields++;
    switch (o->kind) {
    case WK_S4:
    case WK_S8:
    case WK_BOOL: walk_scalar(c, o->id, o->kind, mem); continue;
    case WK_STR:
      fp_u32(c, o->id);
      walk_string(c, pbw__ldptr(mem), mode);
      continue;
    case WK_BYTES:
      fp_u32(c, o->id);
      walk_bytes(c, (const ProtobufCBinaryData *)mem, mode);
      continue;
    default: { /* WK_MSG */
      const ProtobufCMessage *sub = pbw__ldptr(mem);
      fp_u32(c, o->id);
      rc = walk_msg_value(c, o, sub, depth + 1, sub ? plan_of(sub->descriptor) : NULL, mode);
      if (rc != PBW_OK)
        return rc;
    }
    }
  }
  return PBW_OK;
}

/* A message m (not NULL: see walk_null_msg) with its plan p, or NULL to
 * interpret its descriptor. */
WALK_INLINE int walk_body(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p,
                          const int mode) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  if (mode & WM_STATS) {
    if (depth > c->st.max_depth)
      c->st.max_depth = depth;
    c->st.field_words += (d->n_fields + 31) / 32;
  }
  if (mode & WM_SNAP) { /* a type without a plan is not snapshotted */
    if (p == NULL || d->sizeof_message < sizeof(ProtobufCMessage))
      c->snap_bad = 1;
    else
      walk_snap(c, m, d->sizeof_message, SR_MSG);
  }
  int rc =
      p ? walk_ops(c, p, (const char *)m, depth, mode) : walk_fields(c, d, (const char *)m, depth);
  if (rc != PBW_OK)
    return rc;
  walk_unknown(c, m);
  if ((mode & WM_SNAP) && m->n_unknown_fields && m->unknown_fields)
    snap_unknown(c, m);
  fp_u32(c, FP_END);
  return PBW_OK;
}

static int walk_msg_st(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p) {
  return walk_body(c, m, depth, p, 1);
}

static int walk_msg_fp(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p) {
  return walk_body(c, m, depth, p, 0);
}

static int walk_msg_sn(walk_ctx *c, const ProtobufCMessage *m, unsigned depth, const wplan *p) {
  return walk_body(c, m, depth, p, WM_SNAP);
}

/* The interpreted walk's sub-messages (with statistics, which it keeps). */
static int walk_msg(walk_ctx *c, const ProtobufCMessage *m, unsigned depth) {
  return walk_msg_st(c, m, depth, plan_of(m->descriptor));
}

static int walk_tree(walk_ctx *c, const ProtobufCMessage *m, int mode) {
  c->n = 0;
  memset(&c->st, 0, sizeof c->st);
  if (m == NULL || m->descriptor == NULL)
    return PBW_E_UNSUPPORTED;
  const char *name = m->descriptor->name ? m->descriptor->name : "";
  const wplan *p = plan_of(m->descriptor);
  fp_blob(c, name, p ? p->name_len : strlen(name));
  return walk_sub(c, m, 1, p, mode);
}

_Static_assert(PBW_FP_MEMO == FP_BUF, "a memo holds one hashing chunk");

/* pbw_fingerprint_tree_memo's walk; with s, pbw_snap_take's in the same
 * walk. */
static int memo_walk(const ProtobufCMessage *m, uint8_t fp[16], pbw_fp_memo *memo, int keep,
                     pbw_snap *s) {
  walk_ctx c;
  c.noref = 0;
  c.hash = FP_HASH;
  c.spilled = 0;
  c.snap = s;
  c.snap_bad = 0;
  if (s) {
    s->m = NULL;
    s->n = 0;
  }
  int rc = walk_tree(&c, m, s ? WM_SNAP : 0);
  if (rc != PBW_OK) {
    memo->m = NULL;
    return rc;
  }
  if (!c.spilled && memo->m == m && memo->n == c.n && memcmp(memo->stream, c.buf, c.n) == 0) {
    memcpy(fp, memo->fp, 16); /* the same stream: the same fingerprint */
  } else {
    fp_digest(&c, fp);
    if (keep && !c.spilled) {
      memo->m = m;
      memo->n = c.n;
      memcpy(memo->stream, c.buf, c.n);
      memcpy(memo->fp, fp, 16);
    }
  }
  if (s && !c.snap_bad)
    s->m = m;
  return PBW_OK;
}

int pbw_fingerprint_tree_memo(const ProtobufCMessage *m, uint8_t fp[16], pbw_fp_memo *memo,
                              int keep) {
  return memo_walk(m, fp, memo, keep, NULL);
}

int pbw_fingerprint_tree_snap(const ProtobufCMessage *m, uint8_t fp[16], pbw_fp_memo *memo,
                              pbw_snap *s) {
  return memo_walk(m, fp, memo, 1, s);
}

int pbw_fingerprint_tree(const ProtobufCMessage *m, uint8_t fp[16], pbw_stats *st) {
  walk_ctx c;
  c.noref = 0;
  c.hash = FP_HASH;
  c.spilled = 0;
  int rc = walk_tree(&c, m, st != NULL);
  if (rc == PBW_OK)
    fp_digest(&c, fp);
  if (st != NULL)
    *st = c.st;
  return rc;
}

int pbw_tree_matches(const ProtobufCMessage *m, const void *stream, size_t len, const void *ref,
                     size_t ref_len) {
  walk_ctx c;
  c.noref = 0;
  c.hash = FP_MATCH;
  c.differs = 0;
  c.exp = stream;
  c.exp_len = len;
  c.pos = 0;
  c.ref = ref;
  c.ref_len = ref ? ref_len : 0;
  if (walk_tree(&c, m, 0) != PBW_OK)
    return 0;
  fp_spill(&c);
  return !c.differs && c.pos == len;
}

int pbw_tree_stream(const ProtobufCMessage *m, const void *ref, size_t ref_len, uint8_t **out,
                    size_t *len) {
  walk_ctx c;
  c.noref = 0;
  c.hash = FP_EMIT;
  c.differs = 0;
  c.out = NULL;
  c.pos = c.cap = 0;
  c.ref = ref;
  c.ref_len = ref ? ref_len : 0;
  c.ref_pos = 0;
  int rc = walk_tree(&c, m, 0);
  if (rc == PBW_OK) {
    fp_spill(&c);
    if (c.differs)
      rc = PBW_E_NOMEM;
  }
  if (rc != PBW_OK) {
    free(c.out);
    return rc;
  }
  *out = c.out;
  *len = c.pos;
  return PBW_OK;
}

static int snap_str(pbw_snap *s, const char *p) {
  return p ? snap_put(s, p, strlen(p) + 1, SR_STR) : PBW_OK;
}

static int snap_bytes(pbw_snap *s, const ProtobufCBinaryData *b) {
  return b->data && b->len ? snap_put(s, b->data, b->len, SR_RAW) : PBW_OK;
}

static int snap_msg(pbw_snap *s, const ProtobufCMessage *m, unsigned depth);

/* The n elements at arr of repeated op o, and what they point to. */
static int snap_rep(pbw_snap *s, const wop *o, const char *arr, size_t n, unsigned depth) {
  size_t esz = pbw__elt_size(o->f->type);
  if (n > sizeof s->rec / esz)
    return PBW_E_NOMEM;
  int rc = snap_put(s, arr, n * esz, SR_RAW);
  for (size_t i = 0; i < n && rc == PBW_OK; i++) {
    const char *el = arr + i * esz;
    if (o->kind == WK_STR) {
      rc = snap_str(s, pbw__ldptr(el));
    } else if (o->kind == WK_BYTES) {
      rc = snap_bytes(s, (const ProtobufCBinaryData *)el);
    } else if (o->kind == WK_MSG) {
      const ProtobufCMessage *sub = pbw__ldptr(el);
      if (sub)
        rc = snap_msg(s, sub, depth + 1);
    }
  }
  return rc;
}

static int snap_msg(pbw_snap *s, const ProtobufCMessage *m, unsigned depth) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  const wplan *p = d ? plan_of(d) : NULL;
  if (p == NULL || d->sizeof_message < sizeof(ProtobufCMessage))
    return PBW_E_UNSUPPORTED;
  int rc = snap_put(s, m, d->sizeof_message, SR_MSG);
  const char *base = (const char *)m;
  for (const wop *o = p->ops, *end = o + p->n_ops; o < end && rc == PBW_OK; o++) {
    const char *mem = base + o->off;
    if (o->pres == WP_REPEATED) {
      size_t n = pbw__ldsize(base + o->qoff);
      const char *arr = pbw__ldptr(mem);
      if (n && arr)
        rc = snap_rep(s, o, arr, n, depth);
      continue;
    }
    /* a proto3 string's presence is its first character: kept either way */
    if (o->kind == WK_STR && (o->pres == WP_ZERO || !wop_absent(o, base)))
      rc = snap_str(s, pbw__ldptr(mem));
    else if (o->kind == WK_BYTES && !wop_absent(o, base))
      rc = snap_bytes(s, (const ProtobufCBinaryData *)mem);
    else if (o->kind == WK_MSG && !wop_absent(o, base) && pbw__ldptr(mem))
      rc = snap_msg(s, pbw__ldptr(mem), depth + 1);
  }
  unsigned nu = m->n_unknown_fields;
  if (rc == PBW_OK && nu && m->unknown_fields) {
    rc = snap_put(s, m->unknown_fields, (size_t)nu * sizeof *m->unknown_fields, SR_RAW);
    for (unsigned i = 0; i < nu && rc == PBW_OK; i++) {
      const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
      if (u->data && u->len)
        rc = snap_put(s, u->data, u->len, SR_RAW);
    }
  }
  return rc;
}

int pbw_snap_take(const ProtobufCMessage *m, pbw_snap *s) {
  s->m = NULL;
  s->n = 0;
  if (m == NULL || m->descriptor == NULL)
    return PBW_E_UNSUPPORTED;
  int rc = snap_msg(s, m, 1);
  if (rc == PBW_OK)
    s->m = m;
  return rc;
}

/* memcmp(a, b, n) == 0 for short runs without a library call: two
 * overlapping compares never read outside [a, a + n). */
static inline int eq_short(const void *a, const void *b, size_t n) {
  const uint8_t *x = a, *y = b;
  if (n > 32)
    return memcmp(x, y, n) == 0;
  if (n >= 16) {
    uint64_t p[2], q[2], r[2], t[2];
    memcpy(p, x, 16), memcpy(q, y, 16), memcpy(r, x + n - 16, 16), memcpy(t, y + n - 16, 16);
    return ((p[0] ^ q[0]) | (p[1] ^ q[1]) | (r[0] ^ t[0]) | (r[1] ^ t[1])) == 0;
  }
  if (n >= 8)
    return pbw__ld64(x) == pbw__ld64(y) && pbw__ld64(x + n - 8) == pbw__ld64(y + n - 8);
  if (n >= 4)
    return pbw__ld32(x) == pbw__ld32(y) && pbw__ld32(x + n - 4) == pbw__ld32(y + n - 4);
  return n == 0 || (x[0] == y[0] && x[n / 2] == y[n / 2] && x[n - 1] == y[n - 1]);
}

int pbw_snap_holds(const pbw_snap *s, const ProtobufCMessage *m) {
  if (m == NULL || s->m != m)
    return 0;
  const unsigned char *r = s->rec, *end = s->rec + s->n;
  while (r < end) {
    snap_rec h;
    memcpy(&h, r, sizeof h);
    r += sizeof h;
    const char *a = h.addr;
    switch (h.kind) {
    case SR_MSG:
      if (pbw__ldptr(a) != pbw__ldptr(r) || !eq_short(a, r, h.len))
        return 0;
      break;
    case SR_STR:
      if (strlen(a) != h.len - 1 || !eq_short(a, r, h.len - 1))
        return 0;
      break;
    default:
      if (!eq_short(a, r, h.len))
        return 0;
    }
    r += (h.len + 7) & ~(size_t)7;
  }
  return 1;
}

int pbw_tree_stats(const ProtobufCMessage *m, pbw_stats *st) {
  walk_ctx c;
  c.noref = 0;
  c.hash = FP_STATS;
  int rc = walk_tree(&c, m, 1);
  *st = c.st;
  return rc;
}

/* XXH3-64 of d's full name, remembered per thread for the last few
 * descriptors (they are static: the same pointer names the same type). */
#define NAME_CACHE 8
static __thread __attribute__((tls_model("initial-exec"))) struct {
  const ProtobufCMessageDescriptor *d;
  uint64_t h;
} name_cache[NAME_CACHE];

uint64_t pbw_name_hash(const char *name) {
  return name ? XXH3_64bits(name, strlen(name)) : XXH3_64bits("", 0);
}

static uint64_t name_hash(const ProtobufCMessageDescriptor *d) {
  unsigned k = (unsigned)((uintptr_t)d >> 4) % NAME_CACHE;
  if (d != NULL && name_cache[k].d == d)
    return name_cache[k].h;
  uint64_t h = pbw_name_hash(d ? d->name : NULL);
  if (d != NULL) {
    name_cache[k].d = d;
    name_cache[k].h = h;
  }
  return h;
}

/* One pass over the data; the type name is mixed in afterwards. */
void pbw_fingerprint_hashed(const ProtobufCMessageDescriptor *d, const uint64_t h[2], size_t len,
                            uint8_t fp[16]) {
  pbw_fingerprint_named(name_hash(d), h, len, fp);
}

void pbw_fingerprint_named(uint64_t name_hash, const uint64_t h[2], size_t len, uint8_t fp[16]) {
  uint64_t mix[4] = {name_hash, h[0], h[1], len};
  XXH128_hash_t r = XXH3_128bits(mix, sizeof mix);
  XXH128_canonicalFromHash((XXH128_canonical_t *)fp, r);
}

void pbw_hash_bytes(const void *data, size_t len, uint64_t h[2]) {
  pbw__h128 r = pbw__hash128(data, len);
  h[0] = r.lo;
  h[1] = r.hi;
}

void pbw_fingerprint_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                           uint8_t fp[16]) {
  uint64_t h[2];
  pbw_hash_bytes(data, len, h);
  pbw_fingerprint_hashed(d, h, len, fp);
}

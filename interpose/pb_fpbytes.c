/* pb_fpbytes.c — the fingerprint and statistics of a message tree, derived
 * from the bytes pack wrote for it and the schema of its type.
 *
 * The record shim saves the bytes of every pack call anyway; deriving the
 * request's fingerprint from them on the writer thread, instead of walking
 * the tree on the program's thread, takes the largest part of recording's
 * per-call cost off that thread. The result must be exactly what
 * pbw_fingerprint_tree gives for the tree, so this produces the same
 * stream (pb_walk.c documents it) through the same writers (pb_fpstream.h),
 * in one pass over the bytes (repeated fields: two), without allocating,
 * from a plan of the schema decoded once per type.
 *
 * What pack writes, and so what the bytes are read as:
 *  - the known fields in descriptor order (by number), then the unknown
 *    fields in the order the tree keeps them. So a record is taken for a
 *    known field only where pack could have written it: at its place in
 *    number order, with the wire type of its values (or as a packed run of
 *    a repeated number field: both encodings are accepted, whatever the
 *    descriptor says), not a second member of a oneof (for the first 64
 *    oneofs of a message), not a value a proto3 field without presence
 *    leaves off, and not a damaged or empty packed run. The first record
 *    that does not fit starts the unknown fields; everything from there on
 *    is hashed as unknown (number, wire type, the bytes after the tag).
 *  - values as the tree holds them: numbers in memory form (sint zigzag-
 *    decoded, int32 and enum truncated to 32 bits, bool as 0/1, fixed and
 *    floating types as their bits), strings up to their first NUL (pack
 *    writes strlen bytes), bytes as they are; a repeated number field is
 *    one blob of count * element size bytes however its records are split.
 *  - an empty sub-message for a message slot that was NULL in memory: its
 *    fingerprint is the same (FP_END alone), and pb_walk counts its presence
 *    words like the bytes do. Of a type with required fields, only a NULL
 *    slot packs to no bytes, without them.
 *  - every required field (but in those empty sub-messages), nesting at
 *    most PBW_MAX_DEPTH deep.
 *
 * Where bytes cannot tell two trees apart, they get the fingerprint of the
 * tree whose fields are known wherever the rules above allow: a tree
 * holding an unknown field with the number and wire type of a known field
 * that pack could have written there (only hand-built trees have those:
 * unpack never makes one) is fingerprinted as if the field were known.
 * The fingerprint then still identifies the response correctly (any tree
 * with it packs to these bytes); only that odd tree would not match it.
 *
 * Malformed input (a record that does not parse, a missing required field,
 * a sub-message that does not parse as its type, groups) gives
 * PBW_E_BADDATA; no byte outside [data, data + len) or the schema is read. */
#include "pb_fpstream.h"

#include <stddef.h>
#include <stdlib.h>

/* The schema as the reader needs it, decoded once (pbw_packed_plan_build):
 * reading a field record of the schema at every step costs more than the
 * rest of the work. */
typedef struct {
  uint32_t number;
  uint32_t ref;   /* message index of a message field */
  uint32_t oneof; /* group in its message, or PBW_NONE32 */
  uint8_t label, type;
  uint8_t wire;     /* wire type of one value */
  uint8_t packable; /* a repeated number field: packed runs too */
  uint8_t zero;     /* proto3 without presence: pack skips zero values */
} pk_field;

typedef struct {
  uint32_t first_field, n_fields;
  uint32_t n_required; /* pack writes every one of them */
  uint32_t words;      /* presence words, ceil(n_fields / 32) */
} pk_msgd;

struct pbw_packed_plan {
  pk_msgd *msgs;
  pk_field *fields;
  size_t name_len; /* the root type's full name, after the arrays */
  const char *name;
};

typedef struct {
  walk_ctx w;
  const pbw_packed_plan *plan;
} pk_ctx;

/* ---- values in memory form ------------------------------------------------ */

static uint32_t mem32(uint8_t t, uint64_t v) {
  uint32_t w = (uint32_t)v;
  if (t == PROTOBUF_C_TYPE_SINT32)
    return (w >> 1) ^ (0u - (w & 1));
  if (t == PROTOBUF_C_TYPE_BOOL)
    return v != 0;
  return w; /* int32 and enum: a negative value came as 10 bytes; its low 32 bits */
}

static uint64_t mem64(uint8_t t, uint64_t v) {
  if (t == PROTOBUF_C_TYPE_SINT64)
    return (v >> 1) ^ (0 - (v & 1));
  return v;
}

/* Value v of type t in memory form at dst; returns its size (4 or 8). */
static size_t put_mem(uint8_t t, uint64_t v, uint8_t *dst) {
  if (pbw__elt_size((ProtobufCType)t) == 8) {
    uint64_t x = mem64(t, v);
    memcpy(dst, &x, 8);
    return 8;
  }
  uint32_t x = mem32(t, v);
  memcpy(dst, &x, 4);
  return 4;
}

/* ---- repeated fields -------------------------------------------------------- */

/* The elements of a run of records of one repeated number field, in order:
 * each record is one element or a packed run of them. */
typedef struct {
  const uint8_t *p, *end;  /* records not yet opened */
  const uint8_t *pk, *pke; /* rest of the packed run being read */
  uint32_t ewt;            /* wire type of one element */
} run_it;

static void run_open(run_it *it, const pk_field *f, const uint8_t *p, const uint8_t *end) {
  it->p = p;
  it->end = end;
  it->pk = it->pke = NULL;
  it->ewt = f->wire;
}

/* 1 and the next element's wire value, or 0 at the end of the run. */
static int run_next(run_it *it, uint64_t *v) {
  pbw__rec r;
  for (;;) {
    if (it->pk < it->pke)
      return pbw__packed_next(&it->pk, it->pke, it->ewt, v) == 1;
    if (it->p >= it->end || !pbw__rec_read(it->p, it->end, &r))
      return 0;
    it->p = r.next;
    if (r.wt == it->ewt) {
      *v = r.v;
      return 1;
    }
    it->pk = r.p;
    it->pke = r.p + r.n;
  }
}

/* The records of repeated field f from first (read at p) on: one record
 * per element (with the wire type of f's values) or, for number fields,
 * packed runs. Stops at the first record that is not one of them; a
 * damaged or empty packed run is not one pack wrote. Returns the end of
 * the run; *count gets its elements. */
static const uint8_t *run_scan(const pk_field *f, const pbw__rec *first, const uint8_t *p,
                               const uint8_t *end, uint64_t *count) {
  uint32_t ewt = f->wire;
  pbw__rec r = *first;
  *count = 0;
  for (;;) {
    if (r.wt == ewt) {
      ++*count;
    } else if (f->packable && r.wt == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED) {
      const uint8_t *q = r.p, *qe = r.p + r.n;
      uint64_t k = 0, v;
      int got;
      while ((got = pbw__packed_next(&q, qe, ewt, &v)) == 1)
        k++;
      if (got < 0 || k == 0)
        break;
      *count += k;
    } else {
      break;
    }
    p = r.next;
    if (p >= end || !pbw__rec_read(p, end, &r) || r.number != f->number)
      break;
  }
  return p;
}

/* XXH3-128 of the memory form of a run of count numbers (count * element
 * size >= FP_DIRECT bytes), in pieces, as one-shot XXH3 of the whole array
 * would give. Apart, so that its state stays off the recursion's frames. */
static __attribute__((noinline)) pbw__h128 hash_numbers(const pk_field *f, run_it *it,
                                                        uint64_t count) {
  XXH3_state_t hs;
  uint8_t piece[1024];
  size_t k = 0;
  uint64_t v;
  XXH3_128bits_reset(&hs);
  for (uint64_t i = 0; i < count && run_next(it, &v); i++) {
    k += put_mem(f->type, v, piece + k);
    if (k == sizeof piece) {
      XXH3_128bits_update(&hs, piece, k);
      k = 0;
    }
  }
  XXH3_128bits_update(&hs, piece, k);
  XXH128_hash_t h = XXH3_128bits_digest(&hs);
  return (pbw__h128){h.low64, h.high64};
}

/* A run of a fixed-width number type in one packed record is already the
 * array in memory form on a little-endian machine. */
static int run_is_memory_form(const pk_field *f, const uint8_t *p, const uint8_t *end, size_t bytes,
                              const uint8_t **arr) {
  pbw__rec r;
  uint32_t ewt = f->wire;
  if (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ || ewt == PROTOBUF_C_WIRE_TYPE_VARINT ||
      !pbw__rec_read(p, end, &r) || r.next != end || r.wt != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED ||
      r.n != bytes)
    return 0;
  *arr = r.p;
  return 1;
}

/* The blob walk_repeated hashes for an array of count plain numbers. */
static void fp_numbers(walk_ctx *w, const pk_field *f, const uint8_t *p, const uint8_t *end,
                       uint64_t count) {
  size_t bytes = (size_t)count * pbw__elt_size((ProtobufCType)f->type);
  const uint8_t *arr;
  run_it it;
  uint64_t v;
  run_open(&it, f, p, end);
  if (bytes < FP_DIRECT) { /* inline: the values go straight into the stream */
    uint8_t *dst = fp_room(w, 8 + bytes);
    memcpy(dst, &bytes, 8);
    dst += 8;
    for (uint64_t i = 0; i < count && run_next(&it, &v); i++)
      dst += put_mem(f->type, v, dst);
    return;
  }
  if (run_is_memory_form(f, p, end, bytes, &arr))
    fp_blob_digest(w, bytes, pbw__hash128(arr, bytes));
  else
    fp_blob_digest(w, bytes, hash_numbers(f, &it, count));
}

static int pk_msg(pk_ctx *c, uint32_t mi, const uint8_t *p, size_t len, unsigned depth);

/* A string as the tree holds it: up to its first NUL. */
static void pk_string(walk_ctx *w, const pbw__rec *r) {
  size_t n = strnlen((const char *)r->p, r->n);
  w->st.var_bytes += n;
  fp_blob(w, r->p, n);
}

static void pk_bytes(walk_ctx *w, const pbw__rec *r) {
  w->st.var_bytes += r->n;
  fp_blob(w, r->p, r->n);
}

/* Repeated field f, whose count elements are the records [p, end). */
static int pk_repeated(pk_ctx *c, const pk_field *f, const uint8_t *p, const uint8_t *end,
                       uint64_t count, unsigned depth) {
  walk_ctx *w = &c->w;
  run_it it;
  uint64_t v;
  pbw__rec r;
  w->st.fields++;
  w->st.repeated += count;
  fp_u32(w, f->number);
  fp_u64(w, count);
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE:
    for (; p < end && pbw__rec_read(p, end, &r); p = r.next) {
      if (f->type == PROTOBUF_C_TYPE_STRING) {
        pk_string(w, &r);
      } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
        pk_bytes(w, &r);
      } else {
        w->st.submsgs++;
        int rc = pk_msg(c, f->ref, r.p, r.n, depth + 1);
        if (rc != PBW_OK)
          return rc;
      }
    }
    return PBW_OK;
  case PROTOBUF_C_TYPE_BOOL: /* pack normalises bools: element by element */
    run_open(&it, f, p, end);
    while (run_next(&it, &v))
      fp_u32(w, v != 0);
    return PBW_OK;
  default: fp_numbers(w, f, p, end, count); return PBW_OK;
  }
}

/* Singular field f, written by pack as record r. */
static int pk_singular(pk_ctx *c, const pk_field *f, const pbw__rec *r, unsigned depth) {
  walk_ctx *w = &c->w;
  uint8_t val[8];
  w->st.fields++;
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
    fp_u32(w, f->number);
    pk_string(w, r);
    return PBW_OK;
  case PROTOBUF_C_TYPE_BYTES:
    fp_u32(w, f->number);
    pk_bytes(w, r);
    return PBW_OK;
  case PROTOBUF_C_TYPE_MESSAGE:
    fp_u32(w, f->number);
    w->st.submsgs++;
    return pk_msg(c, f->ref, r->p, r->n, depth + 1);
  default: fp_scalar(w, f->number, val, put_mem(f->type, r->v, val)); return PBW_OK;
  }
}

/* Whether pack could have written r for field f at f's place in the
 * message (see the top of this file). oneofs: the oneof groups < 64 that
 * already have their member. */
static int fits(const pk_field *f, const pbw__rec *r, uint64_t oneofs) {
  if (r->wt != f->wire && !(f->packable && r->wt == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED))
    return 0;
  if (f->oneof != PBW_NONE32) /* a oneof member is written even when zero */
    return f->oneof >= 64 || !(oneofs >> f->oneof & 1);
  if (f->zero)
    return !pbw__wire_zeroish(f->type, r->v, r->p, r->n);
  return 1;
}

/* The unknown fields: every record of [p, end). */
static int pk_unknown(walk_ctx *w, const uint8_t *p, const uint8_t *end) {
  uint64_t n = 0;
  pbw__rec r;
  for (const uint8_t *q = p; q < end; q = r.next, n++) {
    if (!pbw__rec_read(q, end, &r))
      return PBW_E_BADDATA;
  }
  if (n == 0)
    return PBW_OK;
  w->st.fields += n;
  fp_u32(w, FP_UNKNOWN);
  fp_u64(w, n);
  for (; p < end && pbw__rec_read(p, end, &r); p = r.next) {
    fp_u32(w, r.number);
    fp_u32(w, r.wt);
    fp_blob(w, r.val, (size_t)(r.next - r.val));
  }
  return PBW_OK;
}

/* Message mi of the schema, encoded in [p, p + len), at depth (root 1). */
static int pk_msg(pk_ctx *c, uint32_t mi, const uint8_t *p, size_t len, unsigned depth) {
  pbw_stats *st = &c->w.st;
  const pk_msgd *m = &c->plan->msgs[mi];
  const pk_field *fields = c->plan->fields + m->first_field, *f = NULL;
  const uint8_t *end = p + len;
  uint64_t oneofs = 0, count;
  uint32_t pos = 0, required = 0;
  pbw__rec r;
  int rc;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  if (depth > st->max_depth)
    st->max_depth = depth;
  st->field_words += m->words;
  while (p < end) {
    if (!pbw__rec_read(p, end, &r))
      return PBW_E_BADDATA;
    while (pos < m->n_fields && fields[pos].number < r.number)
      pos++; /* not written */
    if (pos == m->n_fields || (f = &fields[pos])->number != r.number || !fits(f, &r, oneofs))
      break;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      const uint8_t *run_end = run_scan(f, &r, p, end, &count);
      if (count == 0)
        break;
      if ((rc = pk_repeated(c, f, p, run_end, count, depth)) != PBW_OK)
        return rc;
      p = run_end;
    } else {
      required += f->label == PROTOBUF_C_LABEL_REQUIRED;
      if (f->oneof != PBW_NONE32 && f->oneof < 64)
        oneofs |= (uint64_t)1 << f->oneof;
      if ((rc = pk_singular(c, f, &r, depth)) != PBW_OK)
        return rc;
      p = r.next;
    }
    pos++;
  }
  /* pack writes every required field, except in the empty message it
   * writes for a NULL message slot, which the walk hashes as FP_END too */
  if (required != m->n_required && !(len == 0 && depth > 1))
    return PBW_E_BADDATA;
  if ((rc = pk_unknown(&c->w, p, end)) != PBW_OK)
    return rc;
  fp_u32(&c->w, FP_END);
  return PBW_OK;
}

/* ---- plans ------------------------------------------------------------------ */

int pbw_packed_plan_build(const void *schema, size_t schema_len, pbw_packed_plan **out) {
  pbw__schema s;
  pbw__smsg m;
  pbw__sfield sf;
  *out = NULL;
  int rc = pbw__schema_open(&s, schema, schema_len);
  if (rc != PBW_OK)
    return rc;
  pbw__schema_msg(&s, 0, &m);
  const char *name = pbw__schema_str(&s, m.name);
  size_t name_len = strlen(name);
  size_t bytes = sizeof(pbw_packed_plan) + (size_t)s.n_msgs * sizeof(pk_msgd) +
                 (size_t)s.n_fields * sizeof(pk_field) + name_len + 1;
  pbw_packed_plan *p = malloc(bytes);
  if (p == NULL)
    return PBW_E_NOMEM;
  p->msgs = (pk_msgd *)(p + 1);
  p->fields = (pk_field *)(p->msgs + s.n_msgs);
  char *copy = (char *)(p->fields + s.n_fields);
  memcpy(copy, name, name_len + 1);
  p->name = copy;
  p->name_len = name_len;
  for (uint32_t i = 0; i < s.n_msgs; i++) {
    pbw__schema_msg(&s, i, &m);
    pk_msgd *d = &p->msgs[i];
    *d = (pk_msgd){m.first_field, m.n_fields, 0, (m.n_fields + 31) / 32};
    for (uint32_t k = 0; k < m.n_fields; k++) {
      pbw__schema_field(&s, m.first_field + k, &sf);
      d->n_required += sf.label == PROTOBUF_C_LABEL_REQUIRED;
      p->fields[m.first_field + k] = (pk_field){
          .number = sf.number,
          .ref = sf.ref,
          .oneof = sf.oneof,
          .label = sf.label,
          .type = sf.type,
          .wire = (uint8_t)pbw__wire_of(sf.type),
          .packable = (uint8_t)pbw__is_packed_run(&sf, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED),
          .zero = sf.label == PROTOBUF_C_LABEL_NONE && sf.oneof == PBW_NONE32};
    }
  }
  *out = p;
  return PBW_OK;
}

void pbw_packed_plan_free(pbw_packed_plan *p) {
  free(p);
}

int pbw_fingerprint_packed_plan(const pbw_packed_plan *plan, const uint8_t *data, size_t len,
                                uint8_t fp[16], pbw_stats *st) {
  pk_ctx c;
  c.w.n = 0;
  c.w.hash = FP_HASH;
  c.plan = plan;
  memset(&c.w.st, 0, sizeof c.w.st);
  int rc = PBW_E_BADDATA;
  if (data != NULL || len == 0) {
    fp_blob(&c.w, plan->name, plan->name_len);
    rc = pk_msg(&c, 0, data ? data : (const uint8_t *)"", len, 1);
  }
  if (rc == PBW_OK)
    fp_digest(&c.w, fp);
  if (st != NULL)
    *st = c.w.st;
  return rc;
}

int pbw_fingerprint_packed(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                           uint8_t fp[16], pbw_stats *st) {
  pbw_packed_plan *plan;
  int rc = pbw_packed_plan_build(schema, schema_len, &plan);
  if (rc == PBW_OK) {
    rc = pbw_fingerprint_packed_plan(plan, data, len, fp, st);
    pbw_packed_plan_free(plan);
  } else if (st != NULL) {
    memset(st, 0, sizeof *st);
  }
  return rc;
}

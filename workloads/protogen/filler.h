/* filler.h — random protobuf-c messages of any type, built from the
 * descriptors alone (protogen.c; also the fingerprint tests, which check
 * trees of every HyperProtoBench type). Header-only, so that build.sh
 * still compiles protogen.c alone.
 *
 *   arena ar = {0};
 *   filler fl = {seed, &ar, max_depth, wl_size_dist_find("fleet")};
 *   size_t est;
 *   ProtobufCMessage *m = build_message(&fl, d, target_size, 0, &est);
 *   ...
 *   arena_free(&ar);   // frees every message built with it
 *
 * Every field type, nested messages to max_depth, repeated fields, oneofs
 * (at most one member set), enums, maps, strings and bytes; proto3 fields
 * without presence never get their zero value (pack would leave them off). */
#ifndef STANDIN_PROTOGEN_FILLER_H
#define STANDIN_PROTOGEN_FILLER_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/workload.h"

enum { HARD_DEPTH_LIMIT = 64, MAX_REPEAT = 64 };

/* ---- an arena: a message under construction is freed in one go --------- */

typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t used, cap;
  max_align_t data[];
} arena_chunk;

typedef struct {
  arena_chunk *head;
} arena;

static void *arena_alloc(arena *a, size_t n) {
  n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) {
      fprintf(stderr, "protogen: out of memory\n");
      exit(1);
    }
    *c = (arena_chunk){a->head, 0, cap};
    a->head = c;
  }
  void *p = (char *)a->head->data + a->head->used;
  a->head->used += n;
  return memset(p, 0, n);
}

static void arena_free(arena *a) {
  while (a->head) {
    arena_chunk *next = a->head->next;
    free(a->head);
    a->head = next;
  }
}

/* ---- random field values ------------------------------------------------ */

typedef struct {
  uint64_t rng;
  arena *ar;
  int max_depth;
  const wl_size_dist *sizes;
} filler;

/* Integers as they occur in real messages: mostly small, some large, a few
 * negative (which cost ten bytes as int32/int64). */
static int64_t realistic_int(uint64_t *s, int bits, int is_signed) {
  unsigned u = (unsigned)wl_below(s, 100);
  uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
  if (u < 60)
    return (int64_t)wl_below(s, 128);
  if (u < 85)
    return (int64_t)wl_below(s, 1u << 20);
  if (u < 95 || !is_signed)
    return (int64_t)(wl_rand(s) & (mask >> 1));
  return -(int64_t)wl_range(s, 1, 1u << 20);
}

static uint64_t zigzag(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* C storage of one element of field f. */
static size_t element_size(const ProtobufCFieldDescriptor *f) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  default: return 4;
  }
}

/* Encoded size of a varint or fixed-width value v of type t, without tag. */
static size_t wire_size(ProtobufCType t, int64_t v) {
  switch (t) {
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FIXED32: return 4;
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64: return 8;
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SINT64: return wl_varint_size(zigzag(v));
  case PROTOBUF_C_TYPE_UINT32: return wl_varint_size((uint32_t)v);
  default: return wl_varint_size((uint64_t)v); /* negative int32/int64/enum: 10 */
  }
}

static size_t random_text(filler *fl, void *dst, size_t max_len, size_t min_len, int is_string) {
  static const char alphabet[] =
      "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/";
  /* half the time a length from the distribution, half the time a good
   * share of what is left, so large messages reach their size through their
   * strings and bytes, as large messages in the fleet do */
  size_t len = wl_chance(&fl->rng, 500) ? wl_size_draw(fl->sizes, &fl->rng)
                                        : (size_t)wl_range(&fl->rng, max_len / 4, max_len);
  len = len < max_len ? len : max_len;
  len = len > min_len ? len : min_len;
  uint8_t *p = arena_alloc(fl->ar, len + 1);
  for (size_t i = 0; i < len; i++)
    p[i] = is_string ? (uint8_t)alphabet[wl_below(&fl->rng, sizeof alphabet - 1)]
                     : (uint8_t)wl_rand(&fl->rng);
  if (is_string) {
    *(char **)dst = (char *)p;
  } else {
    ProtobufCBinaryData b = {len, len ? p : NULL};
    memcpy(dst, &b, sizeof b);
  }
  return wl_varint_size(len) + len;
}

/* An enum value of e, not 0 when nonzero asks for it and e has another. */
static int random_enum(uint64_t *s, const ProtobufCEnumDescriptor *e, int nonzero) {
  if (!e->n_values)
    return 0;
  unsigned k = (unsigned)wl_below(s, e->n_values);
  for (unsigned tries = 0; nonzero && e->values[k].value == 0 && tries < e->n_values; tries++)
    k = (k + 1) % e->n_values;
  return e->values[k].value;
}

/* Writes one random value of field f's type to dst (C storage of one
 * element) and returns its encoded size without the tag. Strings and bytes
 * are at most max_len long. nonzero: never the type's zero value, which a
 * proto3 field without presence would leave off the wire. */
static size_t random_scalar(filler *fl, const ProtobufCFieldDescriptor *f, void *dst,
                            size_t max_len, int nonzero) {
  uint64_t *s = &fl->rng;
  int64_t v;
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: return random_text(fl, dst, max_len, nonzero != 0, 1);
  case PROTOBUF_C_TYPE_BYTES: return random_text(fl, dst, max_len, nonzero != 0, 0);
  case PROTOBUF_C_TYPE_FLOAT: {
    float x = (float)((int64_t)wl_below(s, 1u << 20) - (1 << 19)) / 256.0f;
    x = nonzero && x == 0 ? 1 : x;
    memcpy(dst, &x, 4);
    return 4;
  }
  case PROTOBUF_C_TYPE_DOUBLE: {
    double x = (double)((int64_t)wl_below(s, 1ull << 40) - (1ll << 39)) / 65536.0;
    x = nonzero && x == 0 ? 1 : x;
    memcpy(dst, &x, 8);
    return 8;
  }
  case PROTOBUF_C_TYPE_BOOL: {
    protobuf_c_boolean x = nonzero ? 1 : (protobuf_c_boolean)wl_below(s, 2);
    memcpy(dst, &x, sizeof x);
    return 1;
  }
  case PROTOBUF_C_TYPE_ENUM: v = random_enum(s, f->descriptor, nonzero); break;
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64: v = (int64_t)wl_rand(s); break;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_UINT32:
    v = (int32_t)realistic_int(s, 32, f->type != PROTOBUF_C_TYPE_UINT32);
    break;
  default: v = realistic_int(s, 64, f->type != PROTOBUF_C_TYPE_UINT64); break;
  }
  v = nonzero && v == 0 ? 1 : v;
  if (element_size(f) == 4) {
    int32_t x = (int32_t)v;
    memcpy(dst, &x, 4);
  } else {
    memcpy(dst, &v, 8);
  }
  return wire_size(f->type, v);
}

/* ---- messages ------------------------------------------------------------ */

static ProtobufCMessage *build_message(filler *fl, const ProtobufCMessageDescriptor *d, long budget,
                                       int depth, size_t *encoded);

/* Sets one element of field f at dst within budget; returns its encoded
 * size including the tag (for a packed repeated field the tag is counted
 * once per element: an estimate is all the budget needs). */
static size_t fill_element(filler *fl, const ProtobufCFieldDescriptor *f, void *dst, long budget,
                           int depth) {
  size_t tag = wl_varint_size((uint64_t)f->id << 3);
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
    long room = budget - (long)tag - 2;
    int nonzero = f->label == PROTOBUF_C_LABEL_NONE && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF);
    return tag + random_scalar(fl, f, dst, room > 0 ? (size_t)room : 0, nonzero);
  }
  size_t sub = 0;
  ProtobufCMessage *m = build_message(fl, f->descriptor, budget - (long)tag - 2, depth + 1, &sub);
  memcpy(dst, &m, sizeof m);
  return tag + wl_varint_size(sub) + sub;
}

/* How many elements a repeated field gets: a few, more when the budget is
 * large, never more than the budget can pay for. */
static size_t repeat_count(filler *fl, const ProtobufCFieldDescriptor *f, long budget) {
  long per = 4; /* rough encoded bytes per element */
  if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    per = 48;
  else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES)
    per = 16;
  long most = budget / per;
  most = most < 1 ? 1 : most > MAX_REPEAT ? MAX_REPEAT : most;
  return 1 + (size_t)wl_below(&fl->rng, (uint64_t)most);
}

static size_t fill_repeated(filler *fl, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                            long budget, int depth) {
  size_t n = repeat_count(fl, f, budget), esz = element_size(f), total = 0;
  char *arr = arena_alloc(fl->ar, n * esz);
  for (size_t k = 0; k < n; k++)
    total += fill_element(fl, f, arr + k * esz, (budget - (long)total) / (long)(n - k), depth);
  *(size_t *)((char *)m + f->quantifier_offset) = n;
  *(void **)((char *)m + f->offset) = arr;
  return total;
}

/* Whether field f is left unset this time. Required fields are always set;
 * others with probability 3/4 while the budget lasts, message fields only
 * while depth is below --depth, and at most one member of a oneof. */
static int skip_field(filler *fl, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                      long budget, int depth) {
  if (f->label == PROTOBUF_C_LABEL_REQUIRED)
    return 0;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t which;
    memcpy(&which, (const char *)m + f->quantifier_offset, sizeof which);
    if (which != 0)
      return 1; /* another member of this oneof is set */
  }
  if (budget <= 0 || (f->type == PROTOBUF_C_TYPE_MESSAGE && depth >= fl->max_depth))
    return 1;
  return !wl_chance(&fl->rng, 750);
}

/* Sets field f of m; returns the encoded bytes added. */
static size_t fill_field(filler *fl, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                         long budget, int depth) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return fill_repeated(fl, m, f, budget, depth);
  long share = budget; /* a sub-message leaves part of the budget to its siblings */
  if (f->type == PROTOBUF_C_TYPE_MESSAGE && budget > 0)
    share = budget / 2 + (long)wl_below(&fl->rng, (uint64_t)budget / 2 + 1);
  size_t n = fill_element(fl, f, (char *)m + f->offset, share, depth);
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t id = f->id;
    memcpy((char *)m + f->quantifier_offset, &id, sizeof id);
  } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
             f->type != PROTOBUF_C_TYPE_STRING) {
    protobuf_c_boolean has = 1;
    memcpy((char *)m + f->quantifier_offset, &has, sizeof has);
  }
  return n;
}

/* A new message of type d (in the arena) aiming at budget encoded bytes;
 * *encoded gets an estimate of its packed size. Fields are visited in a
 * random order so that a small budget does not always favour the first
 * fields of a large message. */
static ProtobufCMessage *build_message(filler *fl, const ProtobufCMessageDescriptor *d, long budget,
                                       int depth, size_t *encoded) {
  if (depth > HARD_DEPTH_LIMIT) {
    fprintf(stderr, "protogen: %s: required message fields nest deeper than %d levels\n", d->name,
            HARD_DEPTH_LIMIT);
    exit(1);
  }
  ProtobufCMessage *m = arena_alloc(fl->ar, d->sizeof_message);
  d->message_init(m);
  unsigned *order = arena_alloc(fl->ar, (d->n_fields + 1) * sizeof *order);
  for (unsigned i = 0; i < d->n_fields; i++) {
    unsigned j = (unsigned)wl_below(&fl->rng, i + 1);
    order[i] = order[j];
    order[j] = i;
  }
  size_t used = 0;
  for (unsigned k = 0; k < d->n_fields; k++) {
    const ProtobufCFieldDescriptor *f = &d->fields[order[k]];
    long left = budget - (long)used;
    if (!skip_field(fl, m, f, left, depth))
      used += fill_field(fl, m, f, left, depth);
  }
  /* A message asked to have content gets some even when every coin came up
   * "unset": the sizes then follow the distribution, whose smallest size is
   * not zero (only a type without fields encodes to nothing). */
  for (unsigned k = 0; used == 0 && budget > 0 && k < d->n_fields; k++) {
    const ProtobufCFieldDescriptor *f = &d->fields[order[k]];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || depth < fl->max_depth)
      used += fill_field(fl, m, f, budget, depth);
  }
  *encoded = used;
  return m;
}

#endif

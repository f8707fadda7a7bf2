/* test_pb_fpbytes.c — pbw_fingerprint_packed: the pack fingerprint and
 * statistics derived from the bytes pack wrote must be exactly those
 * pbw_fingerprint_tree gives for the tree (the record shim takes one for
 * the other), checked on
 *  - hand-built trees at every corner pack handles specially: proto3
 *    zeros, NULL message slots, NUL-truncated strings, bools that are
 *    neither 0 nor 1, oneofs, maps, defaults, unknown fields, both
 *    encodings of repeated numbers, blobs and streams around the hashing
 *    thresholds, the nesting limit;
 *  - random trees of every message type of the project's schemas (the
 *    protogen registry) and of the six HyperProtoBench schemas, built by
 *    protogen's filler and then mutated towards those corners;
 *  - damaged bytes and schemas, which must be rejected without reading out
 *    of bounds (make check-sanitize runs this under ASan).
 * Every tree is also unpacked again by libprotobuf-c: that tree packs to
 * the same bytes, so it must have the same fingerprint. */
#include "pb_internal.h"
#include "pb_walk.h"
#include "pbw_chain.pb-c.h"
#include "pbw_descset.pb-c.h"
#include "pbw_types.pb-c.h"
#include "pbw_types3.pb-c.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"
#include "golden_tree.h"
#include "workloads/protogen/filler.h"

#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef HPB_SOS
#define HPB_SOS "" /* the Makefile lists the HyperProtoBench objects it built */
#endif

/* protogen's registry of every type the build compiles (Makefile) */
extern const ProtobufCMessageDescriptor *const protogen_types[];
extern const size_t protogen_n_types;

/* ---- helpers ------------------------------------------------------------------ */

typedef struct {
  uint8_t *p;
  size_t n;
} buf;

static void put(buf *b, const void *p, size_t n) {
  b->p = realloc(b->p, b->n + n + 1);
  ck_assert_ptr_nonnull(b->p);
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static void put_varint(buf *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  put(b, t, n);
}

static void put_tag(buf *b, uint32_t number, uint32_t wt) {
  put_varint(b, (uint64_t)number << 3 | wt);
}

/* get_packed_size (and pack_to_buffer, which calls it for sub-messages)
 * cannot measure a NULL element of a repeated message or string field,
 * which pack writes as an empty message or string. So such elements are
 * replaced by empty ones while the tree is measured, then put back. The
 * size is then an upper bound: an initialised message of a type with
 * required fields packs them, where pack writes no bytes for NULL. Only
 * fields pack writes are followed (oneof members share storage). */
typedef struct {
  void **slot;
  void *fill;
  int owned; /* fill was calloc'd (a message), not the static "" */
} null_fix;

typedef struct {
  null_fix *v;
  size_t n, cap;
} null_fixes;

static void add_fix(null_fixes *fx, void **slot, void *fill, int owned) {
  if (fx->n == fx->cap) {
    fx->cap = fx->cap ? 2 * fx->cap : 16;
    fx->v = realloc(fx->v, fx->cap * sizeof *fx->v);
    ck_assert_ptr_nonnull(fx->v);
  }
  fx->v[fx->n++] = (null_fix){slot, fill, owned};
  *slot = fill;
}

static void fix_nulls(ProtobufCMessage *m, null_fixes *fx) {
  static char empty_string[1];
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    char *base = (char *)m;
    if (f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
      continue;
    if (f->label != PROTOBUF_C_LABEL_REPEATED) {
      ProtobufCMessage *sub = *(ProtobufCMessage **)(base + f->offset);
      if (f->type == PROTOBUF_C_TYPE_MESSAGE && sub && pbw__singular_written(f, base))
        fix_nulls(sub, fx);
      continue;
    }
    size_t k = *(size_t *)(base + f->quantifier_offset);
    void **arr = *(void ***)(base + f->offset);
    for (size_t j = 0; j < k; j++) {
      if (arr[j] && f->type == PROTOBUF_C_TYPE_MESSAGE)
        fix_nulls(arr[j], fx);
      if (arr[j])
        continue;
      if (f->type == PROTOBUF_C_TYPE_STRING) {
        add_fix(fx, &arr[j], empty_string, 0);
        continue;
      }
      const ProtobufCMessageDescriptor *sd = f->descriptor;
      ProtobufCMessage *e = calloc(1, sd->sizeof_message);
      ck_assert_ptr_nonnull(e);
      sd->message_init(e);
      add_fix(fx, &arr[j], e, 1);
    }
  }
}

static void unfix_nulls(null_fixes *fx) {
  for (size_t i = 0; i < fx->n; i++) {
    *fx->v[i].slot = NULL;
    if (fx->v[i].owned)
      free(fx->v[i].fill);
  }
  free(fx->v);
  *fx = (null_fixes){0};
}

/* What pack writes for m (the test owns the tree; it is left as it was).
 * Where libprotobuf-c can, pack_to_buffer must write the same. */
static buf pack_tree(const ProtobufCMessage *cm) {
  ProtobufCMessage *m = (ProtobufCMessage *)cm;
  null_fixes fx = {0};
  fix_nulls(m, &fx);
  size_t n = protobuf_c_message_get_packed_size(m);
  buf b = {malloc(n + 1), n};
  ck_assert_ptr_nonnull(b.p);
  if (fx.n == 0) {
    uint8_t scratch[256];
    ProtobufCBufferSimple sb = PROTOBUF_C_BUFFER_SIMPLE_INIT(scratch);
    ck_assert_uint_eq(protobuf_c_message_pack_to_buffer(m, &sb.base), n);
    ck_assert_uint_eq(protobuf_c_message_pack(m, b.p), n);
    ck_assert_int_eq(memcmp(b.p, sb.data, n), 0);
    PROTOBUF_C_BUFFER_SIMPLE_CLEAR(&sb);
    return b;
  }
  unfix_nulls(&fx); /* the NULLs back: pack writes at most n bytes */
  b.n = protobuf_c_message_pack(m, b.p);
  ck_assert_uint_le(b.n, n);
  return b;
}

/* A copy of exactly n bytes, so that ASan sees any read past them. */
static uint8_t *exact(const uint8_t *p, size_t n) {
  uint8_t *c = malloc(n ? n : 1);
  ck_assert_ptr_nonnull(c);
  memcpy(c, p, n);
  return c;
}

/* Schemas built once per type (descriptors are never unloaded here), and
 * a plan of each, kept as the record writer keeps them (the plan outlives
 * the schema bytes it was built from: it is built from a copy, freed). */
static struct {
  const ProtobufCMessageDescriptor *d;
  void *s;
  size_t n;
  pbw_packed_plan *plan;
} schemas[4096];
static size_t nschemas;

static size_t schema_index(const ProtobufCMessageDescriptor *d) {
  for (size_t i = 0; i < nschemas; i++)
    if (schemas[i].d == d)
      return i;
  ck_assert_uint_lt(nschemas, sizeof schemas / sizeof *schemas);
  ck_assert_int_eq(pbw_schema_build(d, &schemas[nschemas].s, &schemas[nschemas].n), PBW_OK);
  void *copy = malloc(schemas[nschemas].n);
  ck_assert_ptr_nonnull(copy);
  memcpy(copy, schemas[nschemas].s, schemas[nschemas].n);
  ck_assert_int_eq(pbw_packed_plan_build(copy, schemas[nschemas].n, &schemas[nschemas].plan),
                   PBW_OK);
  memset(copy, 0xa5, schemas[nschemas].n);
  free(copy);
  schemas[nschemas].d = d;
  return nschemas++;
}

static const void *schema_of(const ProtobufCMessageDescriptor *d, size_t *len) {
  size_t i = schema_index(d);
  *len = schemas[i].n;
  return schemas[i].s;
}

static void assert_stats_eq(const pbw_stats *a, const pbw_stats *b, const char *what) {
  ck_assert_msg(a->fields == b->fields && a->submsgs == b->submsgs &&
                    a->max_depth == b->max_depth && a->repeated == b->repeated &&
                    a->var_bytes == b->var_bytes && a->field_words == b->field_words,
                "%s: stats differ: fields %llu/%llu submsgs %llu/%llu depth %llu/%llu repeated "
                "%llu/%llu var_bytes %llu/%llu field_words %llu/%llu",
                what, (unsigned long long)a->fields, (unsigned long long)b->fields,
                (unsigned long long)a->submsgs, (unsigned long long)b->submsgs,
                (unsigned long long)a->max_depth, (unsigned long long)b->max_depth,
                (unsigned long long)a->repeated, (unsigned long long)b->repeated,
                (unsigned long long)a->var_bytes, (unsigned long long)b->var_bytes,
                (unsigned long long)a->field_words, (unsigned long long)b->field_words);
}

/* pbw_fingerprint_packed of bytes for type d, from an exact-size copy;
 * the type's kept plan must give the same. */
static int fp_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, uint8_t fp[16],
                    pbw_stats *st) {
  size_t sl;
  const void *schema = schema_of(d, &sl);
  uint8_t *copy = exact(p, n), fp2[16];
  pbw_stats st2;
  int rc = pbw_fingerprint_packed(schema, sl, copy, n, fp, st);
  int rc2 = pbw_fingerprint_packed_plan(schemas[schema_index(d)].plan, copy, n, fp2, &st2);
  ck_assert_int_eq(rc, rc2);
  if (rc == PBW_OK)
    ck_assert_int_eq(memcmp(fp, fp2, 16), 0);
  if (st != NULL)
    ck_assert_int_eq(memcmp(st, &st2, sizeof st2), 0);
  free(copy);
  return rc;
}

/* The tree's fingerprint, the same with plans off (pb_walk's two paths). */
static int fp_tree(const ProtobufCMessage *m, uint8_t fp[16], pbw_stats *st) {
  uint8_t slow[16];
  pbw_stats s2;
  int rc = pbw_fingerprint_tree(m, fp, st);
  pbw__plans_off = 1;
  ck_assert_int_eq(pbw_fingerprint_tree(m, slow, &s2), rc);
  pbw__plans_off = 0;
  if (rc == PBW_OK)
    ck_assert_int_eq(memcmp(fp, slow, 16), 0);
  assert_stats_eq(st, &s2, "plans on/off");
  return rc;
}

static const char *name_of(const ProtobufCMessage *m) {
  return m->descriptor->name;
}

/* How check_tree2 treats the tree libprotobuf-c unpacks from the bytes. */
enum {
  UNPACK_SKIP,    /* hand-built unknown fields that collide with known
                     numbers read back as another tree */
  UNPACK_MUST,    /* must unpack, and fingerprint as the original */
  UNPACK_MAY_FAIL /* random trees: a NULL element of a type with required
                    fields packs to bytes unpack refuses */
};
static unsigned long unpack_refused;

/* The property under test for tree m: the bytes it packs to give its
 * fingerprint and statistics, and so does the tree unpack makes of them
 * (see above). Returns the tree walk's result (PBW_OK or PBW_E_DEPTH). */
static int check_tree2(const ProtobufCMessage *m, int unpack_too) {
  uint8_t ft[16], fb[16], fu[16];
  pbw_stats st, sb, su;
  buf b = pack_tree(m);
  int rt = fp_tree(m, ft, &st);
  memset(fb, 0, 16);
  int rb = fp_bytes(m->descriptor, b.p, b.n, fb, &sb);
  ck_assert_msg(rb == rt, "%s: tree %d bytes %d (%zu bytes)", name_of(m), rt, rb, b.n);
  assert_stats_eq(&st, &sb, name_of(m));
  if (rt == PBW_OK) {
    ck_assert_msg(memcmp(ft, fb, 16) == 0, "%s: fingerprints differ (%zu bytes)", name_of(m), b.n);
    /* the statistics are optional */
    ck_assert_int_eq(fp_bytes(m->descriptor, b.p, b.n, fb, NULL), PBW_OK);
    ck_assert_int_eq(memcmp(ft, fb, 16), 0);
  }
  ProtobufCMessage *u = NULL;
  if (rt == PBW_OK && unpack_too != UNPACK_SKIP) {
    u = protobuf_c_message_unpack(m->descriptor, NULL, b.n, b.p);
    ck_assert_msg(u != NULL || unpack_too == UNPACK_MAY_FAIL, "%s: pack output does not unpack",
                  name_of(m));
    unpack_refused += u == NULL;
  }
  if (u != NULL) {
    ck_assert_int_eq(fp_tree(u, fu, &su), PBW_OK);
    ck_assert_msg(memcmp(ft, fu, 16) == 0, "%s: unpacked tree differs", name_of(m));
    assert_stats_eq(&st, &su, "unpacked");
    protobuf_c_message_free_unpacked(u, NULL);
  }
  free(b.p);
  return rt;
}

static int check_tree(const ProtobufCMessage *m) {
  return check_tree2(m, UNPACK_MUST);
}

/* fp_bytes of b equals the fingerprint of what unpack makes of b (for
 * encodings pack would not write but accepted). */
static void check_bytes_like_unpack(const ProtobufCMessageDescriptor *d, buf b) {
  uint8_t fb[16], fu[16];
  pbw_stats sb, su;
  ProtobufCMessage *u = protobuf_c_message_unpack(d, NULL, b.n, b.p);
  ck_assert_ptr_nonnull(u);
  ck_assert_int_eq(fp_tree(u, fu, &su), PBW_OK);
  ck_assert_int_eq(fp_bytes(d, b.p, b.n, fb, &sb), PBW_OK);
  ck_assert_int_eq(memcmp(fb, fu, 16), 0);
  assert_stats_eq(&su, &sb, d->name);
  protobuf_c_message_free_unpacked(u, NULL);
}

/* ---- the stream itself is pinned --------------------------------------------- */

/* The golden tree of test_pb_walk (whose fingerprint is pinned there),
 * now from its bytes. */
START_TEST(test_packed_golden_value) {
  golden_tree g;
  golden_tree_init(&g);
  buf b = pack_tree(&g.t.base);
  uint8_t fp[16];
  char hex[33];
  ck_assert_int_eq(fp_bytes(&standin__test__tree__descriptor, b.p, b.n, fp, NULL), PBW_OK);
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", fp[i]);
  ck_assert_str_eq(hex, GOLDEN_TREE_FP);
  check_tree(&g.t.base);
  free(b.p);
}
END_TEST

/* ---- corners of pack ----------------------------------------------------------- */

START_TEST(test_packed_proto3_zeros_and_presence) {
  Standin__Pbw3__All3 a = STANDIN__PBW3__ALL3__INIT, sub = STANDIN__PBW3__ALL3__INIT;
  Standin__Pbw3__All3__MEntry me[2], *mep[2] = {&me[0], &me[1]};
  char nul_first[] = "\0x";
  check_tree(&a.base); /* nothing written: 0 bytes */
  a.fl = -0.0f;        /* == 0: not written */
  a.db = -0.0;
  a.s = nul_first; /* strlen 0: not written */
  a.by = (ProtobufCBinaryData){0, (uint8_t *)"junk"};
  a.b = 0;
  check_tree(&a.base);
  a.o_case = STANDIN__PBW3__ALL3__O_O_I; /* a oneof member is written even when 0 */
  a.o_i = 0;
  a.sub = &sub; /* an empty sub-message is written */
  check_tree(&a.base);
  a.fl = NAN, a.db = -INFINITY, a.i32 = -1, a.tone = (Standin__Pbw3__Tone)-5;
  a.s64 = INT64_MIN, a.s32 = INT32_MIN, a.u64 = UINT64_MAX, a.b = 1;
  for (int i = 0; i < 2; i++)
    standin__pbw3__all3__mentry__init(&me[i]);
  me[1].key = 7, me[1].value = "seven"; /* me[0]: key 0, value "": an empty entry */
  a.n_m = 2, a.m = mep;
  check_tree(&a.base);
  a.o_case = STANDIN__PBW3__ALL3__O_O_S, a.o_s = ""; /* written: oneof */
  check_tree(&a.base);
  a.o_case = STANDIN__PBW3__ALL3__O_O_B, a.o_b = (ProtobufCBinaryData){0, NULL};
  check_tree(&a.base);
}
END_TEST

START_TEST(test_packed_required_null_and_defaults) {
  Standin__Pbw__Required r = STANDIN__PBW__REQUIRED__INIT;
  Standin__Pbw__Node n = STANDIN__PBW__NODE__INIT, empty = STANDIN__PBW__NODE__INIT;
  Standin__Pbw__Node *kids[4] = {NULL, &empty, NULL, &n};
  r.name = NULL; /* pack writes "" */
  r.node = NULL; /* pack writes an empty Node */
  check_tree(&r.base);
  r.name = (char *)standin__pbw__required__descriptor.fields[0].default_value; /* written */
  r.node = &n;
  n.n_kids = 3, n.kids = kids; /* NULL elements: empty Nodes */
  n.has_level = 1;
  check_tree(&r.base);
  kids[3] = &empty;
  n.n_kids = 4;
  check_tree(&r.base);
  /* a NULL element whose type has a required field: pack writes it as no
   * bytes at all, without the required field */
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  Standin__Test__Branch *brs[3] = {NULL, &br, NULL};
  t.title = "t";
  t.n_branches = 3, t.branches = brs;
  check_tree2(&t.base, UNPACK_MAY_FAIL);
  buf b = pack_tree(&t.base); /* libprotobuf-c cannot unpack those bytes */
  ck_assert_ptr_null(protobuf_c_message_unpack(&standin__test__tree__descriptor, NULL, b.n, b.p));
  free(b.p);
  br.n_leaves = 2, br.leaves = (Standin__Test__Leaf *[]){NULL, NULL};
  check_tree2(&t.base, UNPACK_MAY_FAIL);
}
END_TEST

START_TEST(test_packed_optional_presence_and_defaults) {
  Standin__Pbw__Scalars s;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT;
  standin__pbw__scalars__init(&s);
  check_tree(&s.base);             /* defaults everywhere, nothing written */
  s.i32 = 99, s.db = 3.5, s.b = 1; /* values without has_: not written */
  s.str = (char *)standin__pbw__scalars__descriptor.fields[14].default_value;
  ck_assert_str_eq(standin__pbw__scalars__descriptor.fields[14].name, "str");
  check_tree(&s.base);
  s.has_i32 = s.has_db = s.has_b = 1; /* now written, whatever the value */
  s.i32 = 0, s.db = 0, s.b = 0;
  s.str = "";
  check_tree(&s.base);
  s.far = -1, s.has_far = 1;                            /* field 536870911: a 5-byte tag */
  s.choice_case = STANDIN__PBW__SCALARS__CHOICE_O_NODE; /* member NULL: not written */
  check_tree(&s.base);
  s.o_node = &node;
  check_tree(&s.base);
  s.choice_case = 12345; /* no such member */
  check_tree(&s.base);
  s.choice_case = STANDIN__PBW__SCALARS__CHOICE_O_STR;
  ck_assert_str_eq(standin__pbw__scalars__descriptor.fields[23].name, "o_str");
  s.o_str = (char *)standin__pbw__scalars__descriptor.fields[23].default_value;
  check_tree(&s.base); /* the default pointer: not written */
  s.o_str = "o";
  check_tree(&s.base);
}
END_TEST

START_TEST(test_packed_nul_truncated_strings_and_odd_bools) {
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT, *lfp = &lf;
  Standin__Pbw__Scalars s;
  char name[] = "ab\0cd", t0[] = "\0hidden", t1[] = "x\0y";
  char *tags[4] = {t0, t1, NULL, "z"}; /* NULL: written as "" */
  protobuf_c_boolean rb[4] = {2, -1, 0, 1};
  lf.name = name;
  br.n_leaves = 1, br.leaves = &lfp;
  br.n_tags = 4, br.tags = tags;
  check_tree(&br.base);
  standin__pbw__scalars__init(&s);
  s.has_b = 1, s.b = 2; /* pack writes 1 */
  s.n_r_b = 4, s.r_b = rb;
  s.str = name;
  check_tree(&s.base);
  s.b = -1;
  check_tree(&s.base);
  /* bytes keep their NULs */
  s.has_byt = 1, s.byt = (ProtobufCBinaryData){5, (uint8_t *)"a\0b\0c"};
  check_tree(&s.base);
}
END_TEST

/* Repeated numbers, whichever way they are encoded (packed runs, one
 * record per element, both, runs split), hash as one array; around the
 * FP_DIRECT threshold (512 bytes) and far past it. */
static void encode_numbers(buf *b, uint32_t number, uint32_t ewt, const uint64_t *v, size_t n,
                           int how) {
  /* how: 0 one packed run, 1 a record per element, 2 two runs, 3 run,
   * elements, run */
  size_t cut[4] = {0, n / 3, 2 * n / 3, n};
  for (int part = 0; part < 3; part++) {
    size_t lo = how == 0   ? (part ? n : 0)
                : how == 2 ? (part == 0   ? 0
                              : part == 1 ? n / 2
                                          : n)
                           : cut[part];
    size_t hi = how == 0 ? n : how == 2 ? (part == 0 ? n / 2 : n) : cut[part + 1];
    int packed = how == 0 || how == 2 || (how == 3 && part != 1);
    if (lo >= hi)
      continue;
    if (!packed) {
      for (size_t i = lo; i < hi; i++) {
        put_tag(b, number, ewt);
        if (ewt == PROTOBUF_C_WIRE_TYPE_VARINT)
          put_varint(b, v[i]);
        else
          put(b, &v[i], ewt == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4);
      }
      continue;
    }
    buf run = {0};
    for (size_t i = lo; i < hi; i++) {
      if (ewt == PROTOBUF_C_WIRE_TYPE_VARINT)
        put_varint(&run, v[i]);
      else
        put(&run, &v[i], ewt == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4);
    }
    put_tag(b, number, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED);
    put_varint(b, run.n);
    put(b, run.p, run.n);
    free(run.p);
  }
}

START_TEST(test_packed_repeated_numbers_any_encoding) {
  static const size_t sizes[] = {1, 2, 63, 64, 65, 127, 128, 129, 300, 2000};
  for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t n = sizes[k];
    Standin__Pbw__Scalars s;
    int32_t *ri = malloc(n * 4);
    double *rd = malloc(n * 8);
    int64_t *rs = malloc(n * 8);
    Standin__Pbw__Mood *rm = malloc(n * sizeof *rm);
    protobuf_c_boolean *rb = malloc(n * sizeof *rb);
    uint64_t *wi = malloc(n * 8), *wd = malloc(n * 8), *ws = malloc(n * 8), *wm = malloc(n * 8),
             *wb = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
      ri[i] = (int32_t)(i * 2654435761u) >> (i % 31);
      rd[i] = (double)i * -1.5;
      rs[i] = (int64_t)(i * 0x9E3779B97F4A7C15ull);
      rm[i] = i % 3 == 0 ? STANDIN__PBW__MOOD__ANGRY : (Standin__Pbw__Mood)(i % 3);
      rb[i] = (protobuf_c_boolean)(i % 3);
      wi[i] = (uint64_t)(int64_t)ri[i]; /* int32: sign-extended */
      memcpy(&wd[i], &rd[i], 8);
      ws[i] = ((uint64_t)rs[i] << 1) ^ (uint64_t)(rs[i] >> 63); /* zigzag */
      wm[i] = (uint64_t)(int64_t)rm[i];
      wb[i] = rb[i] != 0;
    }
    standin__pbw__scalars__init(&s);
    s.n_r_i32 = n, s.r_i32 = ri;   /* unpacked (17) */
    s.n_r_db = n, s.r_db = rd;     /* packed double (19) */
    s.n_r_s64 = n, s.r_s64 = rs;   /* packed sint64 (18) */
    s.n_r_mood = n, s.r_mood = rm; /* packed enum, negative values (21) */
    s.n_r_b = n, s.r_b = rb;       /* unpacked bool (20) */
    check_tree(&s.base);
    uint8_t ft[16], fb[16];
    pbw_stats st, sb;
    ck_assert_int_eq(fp_tree(&s.base, ft, &st), PBW_OK);
    for (int how = 0; how < 4; how++) {
      buf b = {0};
      encode_numbers(&b, 17, PROTOBUF_C_WIRE_TYPE_VARINT, wi, n, (how + 1) % 4);
      encode_numbers(&b, 18, PROTOBUF_C_WIRE_TYPE_VARINT, ws, n, how);
      encode_numbers(&b, 19, PROTOBUF_C_WIRE_TYPE_64BIT, wd, n, how);
      encode_numbers(&b, 20, PROTOBUF_C_WIRE_TYPE_VARINT, wb, n, (how + 2) % 4);
      encode_numbers(&b, 21, PROTOBUF_C_WIRE_TYPE_VARINT, wm, n, (how + 3) % 4);
      ck_assert_int_eq(fp_bytes(&standin__pbw__scalars__descriptor, b.p, b.n, fb, &sb), PBW_OK);
      ck_assert_msg(memcmp(ft, fb, 16) == 0, "n %zu, encoding %d", n, how);
      assert_stats_eq(&st, &sb, "encodings");
      check_bytes_like_unpack(&standin__pbw__scalars__descriptor, b);
      free(b.p);
    }
    /* one element changed, first or last: another fingerprint */
    for (int end = 0; end < 2; end++) {
      size_t i = end ? n - 1 : 0;
      buf b = {0};
      rd[i] += 1;
      buf c = pack_tree(&s.base);
      ck_assert_int_eq(fp_bytes(&standin__pbw__scalars__descriptor, c.p, c.n, fb, NULL), PBW_OK);
      ck_assert_int_ne(memcmp(ft, fb, 16), 0);
      check_tree(&s.base);
      rd[i] -= 1;
      free(c.p);
      free(b.p);
    }
    free(ri), free(rd), free(rs), free(rm), free(rb);
    free(wi), free(wd), free(ws), free(wm), free(wb);
  }
}
END_TEST

/* Strings and bytes around the inline limit (32) and FP_DIRECT (512), and
 * streams many 4 KiB chunks long. */
START_TEST(test_packed_blobs_and_long_streams) {
  static const size_t lens[] = {0, 1, 31, 32, 33, 511, 512, 513, 4090, 5000, 70000};
  char *text = malloc(70001);
  uint8_t *data = malloc(70000);
  for (size_t i = 0; i < 70000; i++) {
    text[i] = (char)('a' + i % 26);
    data[i] = (uint8_t)(i * 7 + (i >> 9));
  }
  for (unsigned k = 0; k < sizeof lens / sizeof *lens; k++) {
    Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT;
    char save = text[lens[k]];
    text[lens[k]] = 0;
    lf.name = text;
    lf.has_blob = 1;
    lf.blob = (ProtobufCBinaryData){lens[k], data};
    check_tree(&lf.base);
    text[lens[k]] = save;
  }
  /* thousands of small values: the stream crosses many chunk boundaries at
   * every possible offset */
  enum { N = 3000 };
  static char tagtext[N][12];
  static char *tags[N];
  static Standin__Test__Leaf leaves[N], *leafp[N];
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  for (int i = 0; i < N; i++) {
    snprintf(tagtext[i], sizeof tagtext[i], "t%d", i * 7919);
    tags[i] = tagtext[i];
    standin__test__leaf__init(&leaves[i]);
    leaves[i].has_weight = i % 2;
    leaves[i].weight = i;
    leaves[i].name = i % 3 ? tagtext[i] : NULL;
    leafp[i] = &leaves[i];
  }
  for (int n = N - 5; n <= N; n++) {
    br.n_tags = (size_t)n, br.tags = tags;
    br.n_leaves = (size_t)(N - n) * 600, br.leaves = leafp;
    check_tree(&br.base);
  }
  free(text);
  free(data);
}
END_TEST

START_TEST(test_packed_maps_oneofs_and_nesting) {
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Test__Tree__CountersEntry ce[3], *cep[3];
  Standin__Test__Tree__LeafMapEntry le[2], *lep[2];
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT;
  Standin__Test3__Batch b = STANDIN__TEST3__BATCH__INIT;
  Standin__Test3__Batch__ByKeyEntry be[2], *bep[2];
  Standin__Test3__Item it = STANDIN__TEST3__ITEM__INIT;
  for (int i = 0; i < 3; i++) {
    standin__test__tree__counters_entry__init(&ce[i]);
    cep[i] = &ce[i];
  }
  ce[0].key = "a", ce[0].has_value = 1, ce[0].value = -1;
  ce[2].key = NULL; /* optional string NULL: absent */
  for (int i = 0; i < 2; i++) {
    standin__test__tree__leaf_map_entry__init(&le[i]);
    lep[i] = &le[i];
    standin__test3__batch__by_key_entry__init(&be[i]);
    bep[i] = &be[i];
  }
  le[0].has_key = 1, le[0].key = -9, le[0].value = &lf;
  le[1].value = NULL;
  be[0].key = "k", be[0].value = &it;
  be[1].key = "", be[1].value = NULL; /* proto3 entry: nothing written */
  t.title = "maps";
  t.n_counters = 3, t.counters = cep;
  t.n_leaf_map = 2, t.leaf_map = lep;
  for (int pc = 0; pc <= 8; pc++) {
    t.payload_case = (Standin__Test__Tree__PayloadCase)pc;
    t.number = 0, t.text = NULL, t.leaf = NULL;
    check_tree(&t.base); /* members 7 and 8 NULL: not written */
    t.number = -3, t.text = "", t.leaf = &lf;
    check_tree(&t.base);
  }
  b.n_by_key = 2, b.by_key = bep;
  b.pick_case = STANDIN__TEST3__BATCH__PICK_CHOSEN, b.chosen = &it;
  check_tree(&b.base);
  b.pick_case = STANDIN__TEST3__BATCH__PICK_LABEL, b.label = "";
  check_tree(&b.base);
  /* mutual recursion, an empty type, a required enum, far field numbers */
  Standin__Pbwds__Odd odd = STANDIN__PBWDS__ODD__INIT;
  Standin__Pbwds__Ping ping = STANDIN__PBWDS__PING__INIT, ping2 = STANDIN__PBWDS__PING__INIT;
  Standin__Pbwds__Pong pong = STANDIN__PBWDS__PONG__INIT, *pongs[2] = {&pong, NULL};
  Standin__Pbwds__Empty e = STANDIN__PBWDS__EMPTY__INIT;
  check_tree(&e.base);
  odd.ping = &ping;
  ping.pong = &pong;
  ping.n_pongs = 2, ping.pongs = pongs;
  ping.empty = &e;
  pong.ping = &ping2;
  pong.which_case = STANDIN__PBWDS__PONG__WHICH_E, pong.e = &e;
  odd.has_last = 1, odd.last = -1;
  odd.has_big = 1;
  odd.rq = STANDIN__PBWDS__LEVEL__LOW;
  check_tree(&odd.base);
  pong.which_case = STANDIN__PBWDS__PONG__WHICH_LEVEL, pong.level = STANDIN__PBWDS__LEVEL__LOW;
  check_tree(&odd.base);
}
END_TEST

/* ---- unknown fields ------------------------------------------------------------ */

/* Records with numbers no test schema knows: varint 300, fixed64, fixed32
 * and a length-delimited "hello" (fields 100..103). */
static const uint8_t UNKNOWN[] = {0xa0, 0x06, 0xac, 0x02, 0xa9, 0x06, 1,   2,  3, 4,
                                  5,    6,    7,    8,    0xb5, 0x06, 9,   8,  7, 6,
                                  0xba, 0x06, 5,    'h',  'e',  'l',  'l', 'o'};

START_TEST(test_packed_unknown_fields_from_unpack) {
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT, *lfp;
  lf.name = "known";
  buf lb = pack_tree(&lf.base);
  put(&lb, UNKNOWN, sizeof UNKNOWN);
  lfp = (Standin__Test__Leaf *)protobuf_c_message_unpack(&standin__test__leaf__descriptor, NULL,
                                                         lb.n, lb.p);
  ck_assert_ptr_nonnull(lfp);
  ck_assert_uint_eq(lfp->base.n_unknown_fields, 4);
  check_tree(&lfp->base);
  br.id = 3, br.best = lfp, br.n_leaves = 1, br.leaves = &lfp;
  buf bb = pack_tree(&br.base);
  put(&bb, UNKNOWN, sizeof UNKNOWN);
  ProtobufCMessage *u =
      protobuf_c_message_unpack(&standin__test__branch__descriptor, NULL, bb.n, bb.p);
  ck_assert_ptr_nonnull(u);
  check_tree(u);
  protobuf_c_message_free_unpacked(u, NULL);
  protobuf_c_message_free_unpacked(&lfp->base, NULL);
  free(lb.p);
  free(bb.p);
}
END_TEST

/* Unknown fields a program put into a tree by hand. */
static ProtobufCMessageUnknownField unknown(uint32_t tag, ProtobufCWireType wt, const char *data,
                                            size_t len) {
  return (ProtobufCMessageUnknownField){tag, wt, len, (uint8_t *)data};
}

static int same_fp_tree_and_bytes(const ProtobufCMessage *m, int *rc) {
  uint8_t ft[16], fb[16];
  pbw_stats st, sb;
  buf b = pack_tree(m);
  ck_assert_int_eq(fp_tree(m, ft, &st), PBW_OK);
  *rc = fp_bytes(m->descriptor, b.p, b.n, fb, &sb);
  int same = *rc == PBW_OK && memcmp(ft, fb, 16) == 0;
  free(b.p);
  return same;
}

START_TEST(test_packed_hand_built_unknown_fields) {
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT;
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Pbw3__All3 a = STANDIN__PBW3__ALL3__INIT;
  ProtobufCMessageUnknownField u[3];
  int rc;
  lf.name = "n";
  lf.has_weight = 1;
  /* known numbers where pack could not have written the known field: out
   * of order (2 after 4), another wire type (4 as a varint), a second
   * member of a oneof, a proto3 zero: the bytes tell, and agree */
  u[0] = unknown(2, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x01z", 2);
  u[1] = unknown(4, PROTOBUF_C_WIRE_TYPE_VARINT, "\x05", 1);
  u[2] = unknown(1, PROTOBUF_C_WIRE_TYPE_32BIT, "abcd", 4);
  lf.base.n_unknown_fields = 3, lf.base.unknown_fields = u;
  check_tree2(&lf.base, UNPACK_SKIP);
  t.title = "t";
  t.payload_case = STANDIN__TEST__TREE__PAYLOAD_NUMBER, t.number = 1;
  u[0] = unknown(7, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x01x", 2);
  t.base.n_unknown_fields = 1, t.base.unknown_fields = u;
  check_tree2(&t.base, UNPACK_SKIP);
  u[0] = unknown(1, PROTOBUF_C_WIRE_TYPE_VARINT, "\x00", 1);
  a.base.n_unknown_fields = 1, a.base.unknown_fields = u;
  ck_assert(same_fp_tree_and_bytes(&a.base, &rc));
  /* after a packed run, a run pack would not write: empty, or not a whole
   * number of fixed32 values */
  Standin__Test__Tree t2 = STANDIN__TEST__TREE__INIT;
  uint32_t ids[2] = {1, 2};
  t2.title = "t2";
  t2.n_packed_ids = 2, t2.packed_ids = ids;
  u[0] = unknown(9, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x00", 1);
  t2.base.n_unknown_fields = 1, t2.base.unknown_fields = u;
  check_tree2(&t2.base, UNPACK_SKIP);
  u[0] = unknown(9, PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED, "\x03\x01\x02\x03", 4);
  check_tree2(&t2.base, UNPACK_SKIP);
  u[0] = unknown(9, PROTOBUF_C_WIRE_TYPE_32BIT, "\x03\x01\x02\x03", 4); /* one more value */
  ck_assert(!same_fp_tree_and_bytes(&t2.base, &rc));
  /* The one case bytes cannot tell: an unknown field with the number and
   * wire type of a known field that pack could have written there. The
   * bytes then fingerprint as the tree with the field known (which packs
   * to them too), not as this tree. */
  lf.has_weight = 0;
  u[0] = unknown(4, PROTOBUF_C_WIRE_TYPE_64BIT, "\0\0\0\0\0\0\x04@", 8);
  lf.base.n_unknown_fields = 1, lf.base.unknown_fields = u;
  ck_assert(!same_fp_tree_and_bytes(&lf.base, &rc));
  ck_assert_int_eq(rc, PBW_OK);
  buf b = pack_tree(&lf.base);
  check_bytes_like_unpack(&standin__test__leaf__descriptor, b);
  free(b.p);
  /* unpack keeps unknown numbers up to 2^32 - 1, beyond any known one */
  u[0] = unknown(1u << 30, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01", 1);
  check_tree(&lf.base);
  u[0] = unknown(UINT32_MAX, PROTOBUF_C_WIRE_TYPE_32BIT, "\x01\x02\x03\x04", 4);
  check_tree(&lf.base);
  /* Unknown fields whose bytes are not a record pack could read back: a
   * group, data that is not one value of its wire type. Not from unpack;
   * the bytes are rejected, never misread as a fingerprint of this tree. */
  u[0] = unknown(100, (ProtobufCWireType)3 /* start group */, "", 0);
  ck_assert(!same_fp_tree_and_bytes(&lf.base, &rc));
  ck_assert_int_eq(rc, PBW_E_BADDATA);
  u[0] = unknown(100, PROTOBUF_C_WIRE_TYPE_VARINT, "\x01\x02", 2);
  ck_assert(!same_fp_tree_and_bytes(&lf.base, &rc));
  ck_assert_int_eq(rc, PBW_E_BADDATA);
  /* a sub-message of another type than its field's: pack writes the other
   * type's encoding; read as the field's type it is another tree */
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT;
  node.has_level = 1, node.level = 2;
  br.best = (Standin__Test__Leaf *)&node;
  ck_assert(!same_fp_tree_and_bytes(&br.base, &rc));
}
END_TEST

/* Bytes pack does not write but unpack reads (overlong varints, values
 * that do not fit their type, bools other than 0 and 1, NULs inside
 * strings, a proto2 string equal to its default): the fingerprint of the
 * tree unpack makes of them. */
START_TEST(test_packed_reads_values_as_unpack_does) {
  static const struct {
    const ProtobufCMessageDescriptor *d;
    uint8_t b[24];
    size_t n;
  } cases[] = {
      /* Scalars: i32 1 overlong, i32 -1 in 5 bytes, u32 with bit 35 set */
      {&standin__pbw__scalars__descriptor, {0x08, 0x81, 0x00}, 3},
      {&standin__pbw__scalars__descriptor, {0x08, 0xff, 0xff, 0xff, 0xff, 0x0f}, 6},
      {&standin__pbw__scalars__descriptor, {0x18, 0x80, 0x80, 0x80, 0x80, 0x70}, 6},
      /* s32 (sint32) with high bits, mood (enum) 2^32 - 3 */
      {&standin__pbw__scalars__descriptor, {0x28, 0x83, 0x80, 0x80, 0x80, 0x10}, 6},
      {&standin__pbw__scalars__descriptor, {0x70, 0xfd, 0xff, 0xff, 0xff, 0x0f}, 6},
      /* b = 2; r_b unpacked [2, 0, 300]; r_b packed [7, 1] */
      {&standin__pbw__scalars__descriptor, {0x68, 0x02}, 2},
      {&standin__pbw__scalars__descriptor,
       {0xa0, 0x01, 0x02, 0xa0, 0x01, 0x00, 0xa0, 0x01, 0xac, 0x02},
       10},
      {&standin__pbw__scalars__descriptor, {0xa2, 0x01, 0x02, 0x07, 0x01}, 5},
      /* str "a\0b", r_byt ["\0"] */
      {&standin__pbw__scalars__descriptor, {0x7a, 0x03, 'a', 0, 'b', 0xe2, 0x01, 0x01, 0}, 9},
      /* Leaf name equal to its default "leaf", but written */
      {&standin__test__leaf__descriptor, {0x0a, 0x04, 'l', 'e', 'a', 'f'}, 6},
      /* All3 i64 1, s "a\0". (A proto3 value that is zero in memory, such
       * as s "\0x" or i32 2^32, is read as an unknown field instead: pack
       * would not have written the known one; see the unknown field tests.) */
      {&standin__pbw3__all3__descriptor, {0x10, 0x01, 0x7a, 0x02, 'a', 0}, 6},
  };
  for (unsigned i = 0; i < sizeof cases / sizeof *cases; i++) {
    buf b = {(uint8_t *)cases[i].b, cases[i].n};
    check_bytes_like_unpack(cases[i].d, b);
  }
}
END_TEST

/* ---- nesting limit ------------------------------------------------------------- */

static void make_chain(Standin__Pbw__Node *nodes, int n) {
  for (int i = 0; i < n; i++) {
    standin__pbw__node__init(&nodes[i]);
    nodes[i].has_level = 1;
    nodes[i].level = (uint32_t)i;
    if (i > 0)
      nodes[i - 1].child = &nodes[i];
  }
}

START_TEST(test_packed_depth_limit) {
  static Standin__Pbw__Node nodes[PBW_MAX_DEPTH + 2], side[4], *kids[3], *inner[1];
  make_chain(nodes, PBW_MAX_DEPTH);
  ck_assert_int_eq(check_tree(&nodes[0].base), PBW_OK);
  make_chain(nodes, PBW_MAX_DEPTH + 1);
  /* too deep: the same error, and the statistics stop at the same place */
  ck_assert_int_eq(check_tree(&nodes[0].base), PBW_E_DEPTH);
  make_chain(nodes, PBW_MAX_DEPTH + 2);
  ck_assert_int_eq(check_tree(&nodes[0].base), PBW_E_DEPTH);
  /* the deep chain in the middle of a repeated field, with siblings that
   * are walked before it and not after */
  for (int i = 0; i < 4; i++) {
    standin__pbw__node__init(&side[i]);
    side[i].has_level = 1, side[i].level = 7;
  }
  make_chain(nodes, PBW_MAX_DEPTH);
  inner[0] = &side[3];
  side[0].n_kids = 1, side[0].kids = inner;
  kids[0] = &side[0], kids[1] = &nodes[0], kids[2] = &side[1];
  side[2].child = &side[1];
  side[2].n_kids = 3, side[2].kids = kids; /* nodes[0] at depth 2 */
  ck_assert_int_eq(check_tree(&side[2].base), PBW_E_DEPTH);
  make_chain(nodes, PBW_MAX_DEPTH - 1);
  ck_assert_int_eq(check_tree(&side[2].base), PBW_OK);
  /* a NULL slot at depth PBW_MAX_DEPTH + 1 is too deep as well */
  Standin__Pbw__Node *null_kid = NULL;
  make_chain(nodes, PBW_MAX_DEPTH);
  nodes[PBW_MAX_DEPTH - 1].n_kids = 1, nodes[PBW_MAX_DEPTH - 1].kids = &null_kid;
  ck_assert_int_eq(check_tree(&nodes[0].base), PBW_E_DEPTH);
  /* a chain of 40 different types */
  Standin__Pbwchain__C0 c0 = STANDIN__PBWCHAIN__C0__INIT;
  Standin__Pbwchain__C1 c1 = STANDIN__PBWCHAIN__C1__INIT;
  c0.next = &c1, c0.has_v = 1, c1.has_v = 1, c1.v = -1;
  check_tree(&c0.base);
}
END_TEST

/* ---- damaged input --------------------------------------------------------------- */

static unsigned canonical_seen;

/* Bytes anyone could have written: never read out of bounds, a result
 * or an error; and where unpack takes them and pack gives them back, the
 * fingerprint of that tree. */
static void check_any_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n) {
  uint8_t fb[16], fu[16];
  pbw_stats sb, su;
  int rc = fp_bytes(d, p, n, fb, &sb);
  ck_assert(rc == PBW_OK || rc == PBW_E_BADDATA || rc == PBW_E_DEPTH);
  ProtobufCMessage *u = protobuf_c_message_unpack(d, NULL, n, p);
  if (u == NULL)
    return;
  buf again = pack_tree(u);
  if (again.n == n && memcmp(again.p, p, n) == 0 && fp_tree(u, fu, &su) == PBW_OK) {
    canonical_seen++;
    ck_assert_int_eq(rc, PBW_OK);
    ck_assert_int_eq(memcmp(fb, fu, 16), 0);
    assert_stats_eq(&su, &sb, d->name);
  }
  free(again.p);
  protobuf_c_message_free_unpacked(u, NULL);
}

static void damage_everywhere(const ProtobufCMessageDescriptor *d, buf b) {
  static const uint8_t flips[] = {0x01, 0x02, 0x04, 0x08, 0x40, 0x80, 0xff};
  for (size_t n = 0; n <= b.n; n++)
    check_any_bytes(d, b.p, n);
  uint8_t *c = exact(b.p, b.n);
  for (size_t i = 0; i < b.n; i++) {
    for (unsigned k = 0; k < sizeof flips; k++) {
      c[i] ^= flips[k];
      check_any_bytes(d, c, b.n);
      c[i] ^= flips[k];
    }
  }
  free(c);
}

START_TEST(test_packed_damaged_bytes) {
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT, *brp = &br;
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT, *lfp = &lf;
  uint32_t ids[3] = {1, 0x80000000u, 3};
  int32_t vals[3] = {-1, 0, 64};
  lf.name = "leaf";
  lf.n_values = 3, lf.values = vals;
  br.id = -2, br.n_leaves = 1, br.leaves = &lfp, br.best = &lf;
  t.title = "damage";
  t.n_branches = 1, t.branches = &brp;
  t.n_packed_ids = 3, t.packed_ids = ids;
  t.payload_case = STANDIN__TEST__TREE__PAYLOAD_TEXT, t.text = "x";
  buf b = pack_tree(&t.base);
  put(&b, UNKNOWN, sizeof UNKNOWN);
  canonical_seen = 0;
  damage_everywhere(&standin__test__tree__descriptor, b);
  free(b.p);
  Standin__Pbw3__All3 a = STANDIN__PBW3__ALL3__INIT;
  int64_t r[2] = {5, -5};
  a.i32 = 1, a.s = "s", a.fl = 1, a.n_r_i64 = 2, a.r_i64 = r;
  b = pack_tree(&a.base);
  damage_everywhere(&standin__pbw3__all3__descriptor, b);
  free(b.p);
  /* the damage produced many inputs libprotobuf-c reads back as written */
  ck_assert_uint_gt(canonical_seen, 100);
  /* no data, missing required fields, a wrong wire type for a required one */
  uint8_t fp[16];
  size_t sl;
  const void *schema = schema_of(&standin__pbw__required__descriptor, &sl);
  ck_assert_int_eq(pbw_fingerprint_packed(schema, sl, NULL, 3, fp, NULL), PBW_E_BADDATA);
  static const uint8_t req_missing[] = {0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x2a, 0x00};
  ck_assert_int_eq(
      fp_bytes(&standin__pbw__required__descriptor, req_missing, sizeof req_missing, fp, NULL),
      PBW_E_BADDATA);
  static const uint8_t req_wire[] = {0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x21, 0,   0,
                                     0,    0,    0,    0,    0,    0,    0x2a, 0x00};
  ck_assert_int_eq(
      fp_bytes(&standin__pbw__required__descriptor, req_wire, sizeof req_wire, fp, NULL),
      PBW_E_BADDATA);
  static const uint8_t req_ok[] = {0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x20, 0x00, 0x2a, 0x00};
  ck_assert_int_eq(fp_bytes(&standin__pbw__required__descriptor, req_ok, sizeof req_ok, fp, NULL),
                   PBW_OK);
  /* no bytes at all is the empty message */
  uint8_t fe[16], ft[16];
  pbw_stats st;
  Standin__Test__Leaf empty = STANDIN__TEST__LEAF__INIT;
  schema = schema_of(&standin__test__leaf__descriptor, &sl);
  ck_assert_int_eq(pbw_fingerprint_packed(schema, sl, NULL, 0, fe, &st), PBW_OK);
  ck_assert_int_eq(fp_tree(&empty.base, ft, &st), PBW_OK);
  ck_assert_int_eq(memcmp(fe, ft, 16), 0);
}
END_TEST

START_TEST(test_packed_damaged_schema) {
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT;
  lf.name = "x";
  buf b = pack_tree(&lf.base);
  size_t sl;
  const uint8_t *schema = schema_of(&standin__test__leaf__descriptor, &sl);
  uint8_t fp[16];
  pbw_stats st;
  for (size_t n = 0; n < sl; n++) {
    uint8_t *c = exact(schema, n);
    ck_assert_int_eq(pbw_fingerprint_packed(c, n, b.p, b.n, fp, &st), PBW_E_BADSCHEMA);
    ck_assert_uint_eq(st.fields, 0);
    free(c);
  }
  uint8_t *c = exact(schema, sl);
  for (size_t i = 0; i < sl; i += 3) {
    c[i] ^= 0x10;
    ck_assert_int_eq(pbw_fingerprint_packed(c, sl, b.p, b.n, fp, NULL), PBW_E_BADSCHEMA);
    c[i] ^= 0x10;
  }
  ck_assert_int_eq(pbw_fingerprint_packed(NULL, 0, b.p, b.n, fp, NULL), PBW_E_BADSCHEMA);
  pbw_packed_plan *plan = (pbw_packed_plan *)&plan;
  ck_assert_int_eq(pbw_packed_plan_build(schema, sl - 1, &plan), PBW_E_BADSCHEMA);
  ck_assert_ptr_null(plan);
  pbw_packed_plan_free(NULL);
  free(c);
  free(b.p);
}
END_TEST

/* ---- random trees of every type -------------------------------------------------- */

/* What the mutator did: the test asserts that each kind happened. */
enum {
  MU_NULL_REQUIRED, /* required message slot NULL */
  MU_NULL_ELEMENT,  /* repeated message element NULL */
  MU_NULL_STRING,   /* repeated string element NULL */
  MU_ODD_BOOL,      /* bool neither 0 nor 1 */
  MU_NUL_STRING,    /* string with a NUL inside */
  MU_DEFAULT_PTR,   /* optional string pointing at its default */
  MU_HAS_OFF,       /* optional scalar with a value but has_ = 0 */
  MU_ONEOF_BOGUS,   /* oneof case naming no member */
  MU_ONEOF_NULL,    /* oneof case naming a NULL member */
  MU_ZERO3,         /* proto3 member set to zero */
  MU_ODD_FLOAT,     /* NaN, -0.0, infinity */
  MU_NEGATIVE,      /* negative int32, enum, int64 */
  MU_BIG_ARRAY,     /* repeated numbers past FP_DIRECT */
  MU_BIG_BYTES,     /* bytes past FP_DIRECT */
  MU_UNKNOWN,       /* unknown fields added */
  MU_KINDS
};

typedef struct {
  uint64_t rng;
  arena *ar;
  unsigned long n[MU_KINDS];
} mutator;

static int coin(mutator *mu, unsigned permille) {
  return wl_chance(&mu->rng, permille);
}

static void mutate_msg(mutator *mu, ProtobufCMessage *m);

static void add_unknown(mutator *mu, ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  uint32_t top = d->n_fields ? d->fields[d->n_fields - 1].id : 0;
  if (top > PBW_MAX_FIELD_NUMBER - 2000)
    return;
  unsigned k = 1 + (unsigned)wl_below(&mu->rng, 3);
  ProtobufCMessageUnknownField *u = arena_alloc(mu->ar, k * sizeof *u);
  for (unsigned i = 0; i < k; i++) {
    uint32_t number = top + 1 + (uint32_t)wl_below(&mu->rng, 1000);
    buf v = {0};
    ProtobufCWireType wt;
    switch (wl_below(&mu->rng, 4)) {
    case 0:
      wt = PROTOBUF_C_WIRE_TYPE_VARINT;
      put_varint(&v, wl_rand(&mu->rng) >> wl_below(&mu->rng, 64));
      break;
    case 1:
      wt = PROTOBUF_C_WIRE_TYPE_64BIT;
      for (int j = 0; j < 8; j++)
        put(&v, &(uint8_t){(uint8_t)wl_rand(&mu->rng)}, 1);
      break;
    case 2:
      wt = PROTOBUF_C_WIRE_TYPE_32BIT;
      for (int j = 0; j < 4; j++)
        put(&v, &(uint8_t){(uint8_t)wl_rand(&mu->rng)}, 1);
      break;
    default: {
      wt = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
      size_t len = coin(mu, 100) ? 500 + wl_below(&mu->rng, 100) : wl_below(&mu->rng, 40);
      put_varint(&v, len);
      for (size_t j = 0; j < len; j++)
        put(&v, &(uint8_t){(uint8_t)wl_rand(&mu->rng)}, 1);
    }
    }
    uint8_t *data = arena_alloc(mu->ar, v.n);
    memcpy(data, v.p, v.n);
    u[i] = (ProtobufCMessageUnknownField){number, wt, v.n, data};
    free(v.p);
  }
  m->n_unknown_fields = k;
  m->unknown_fields = u;
  mu->n[MU_UNKNOWN]++;
}

/* A random value of number, bool or enum field f at dst. */
static void random_number(mutator *mu, const ProtobufCFieldDescriptor *f, void *dst) {
  uint64_t v = wl_rand(&mu->rng) >> wl_below(&mu->rng, 64);
  ck_assert_uint_le(pbw__elt_size(f->type), sizeof v);
  if (coin(mu, 300))
    v = 0 - (v >> 1); /* negative */
  if (f->type == PROTOBUF_C_TYPE_BOOL)
    v = wl_below(&mu->rng, 4) - 1; /* -1, 0, 1, 2 */
  memcpy(dst, &v, pbw__elt_size(f->type));
}

static void mutate_repeated(mutator *mu, const ProtobufCFieldDescriptor *f, char *base) {
  size_t n;
  void *arr;
  memcpy(&n, base + f->quantifier_offset, sizeof n);
  memcpy(&arr, base + f->offset, sizeof arr);
  size_t esz = pbw__elt_size(f->type);
  switch (f->type) {
  case PROTOBUF_C_TYPE_MESSAGE:
    for (size_t i = 0; i < n; i++) {
      ProtobufCMessage **e = (ProtobufCMessage **)arr + i;
      if (coin(mu, 60)) {
        *e = NULL;
        mu->n[MU_NULL_ELEMENT]++;
      } else if (*e) {
        mutate_msg(mu, *e);
      }
    }
    return;
  case PROTOBUF_C_TYPE_STRING:
    for (size_t i = 0; i < n; i++)
      if (coin(mu, 60)) {
        ((char **)arr)[i] = NULL;
        mu->n[MU_NULL_STRING]++;
      }
    return;
  case PROTOBUF_C_TYPE_BYTES: return;
  case PROTOBUF_C_TYPE_BOOL:
    for (size_t i = 0; i < n; i++)
      if (coin(mu, 250)) {
        ((protobuf_c_boolean *)arr)[i] = coin(mu, 500) ? 2 : -1;
        mu->n[MU_ODD_BOOL]++;
      }
    return;
  default:
    if (!coin(mu, 60))
      return;
    n = 600 / esz + wl_below(&mu->rng, 300); /* past FP_DIRECT, varints of every length */
    arr = arena_alloc(mu->ar, n * esz);
    for (size_t i = 0; i < n; i++)
      random_number(mu, f, (char *)arr + i * esz);
    memcpy(base + f->quantifier_offset, &n, sizeof n);
    memcpy(base + f->offset, &arr, sizeof arr);
    mu->n[MU_BIG_ARRAY]++;
  }
}

static void mutate_singular(mutator *mu, const ProtobufCFieldDescriptor *f, char *base) {
  void *mem = base + f->offset;
  int oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
  int ptr_type = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
  if (oneof) {
    uint32_t c;
    memcpy(&c, base + f->quantifier_offset, sizeof c);
    if (c != f->id)
      return;
    if (coin(mu, 40)) {
      c = 0x40000000u; /* above any field number */
      memcpy(base + f->quantifier_offset, &c, sizeof c);
      mu->n[MU_ONEOF_BOGUS]++;
      return;
    }
    if (ptr_type && coin(mu, 40)) {
      memset(mem, 0, sizeof(void *));
      mu->n[MU_ONEOF_NULL]++;
      return;
    }
  }
  if (f->label == PROTOBUF_C_LABEL_NONE && !oneof && f->type != PROTOBUF_C_TYPE_MESSAGE &&
      coin(mu, 80)) {
    if (f->type == PROTOBUF_C_TYPE_STRING)
      *(const char **)mem = coin(mu, 500) ? "" : "\0after";
    else if (f->type == PROTOBUF_C_TYPE_BYTES)
      ((ProtobufCBinaryData *)mem)->len = 0; /* data may stay: pack tests the length */
    else if (f->type == PROTOBUF_C_TYPE_FLOAT)
      *(float *)mem = -0.0f;
    else if (f->type == PROTOBUF_C_TYPE_DOUBLE)
      *(double *)mem = -0.0;
    else
      memset(mem, 0, pbw__elt_size(f->type));
    mu->n[MU_ZERO3]++;
    return;
  }
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !oneof && !ptr_type && coin(mu, 60)) {
    if (f->type == PROTOBUF_C_TYPE_BYTES) /* a value pack does not write */
      *(ProtobufCBinaryData *)mem = (ProtobufCBinaryData){3, (uint8_t *)"off"};
    else
      random_number(mu, f, mem);
    memset(base + f->quantifier_offset, 0, sizeof(protobuf_c_boolean));
    mu->n[MU_HAS_OFF]++;
    return;
  }
  switch (f->type) {
  case PROTOBUF_C_TYPE_MESSAGE: {
    ProtobufCMessage *sub;
    memcpy(&sub, mem, sizeof sub);
    if (sub && f->label == PROTOBUF_C_LABEL_REQUIRED && coin(mu, 250)) {
      memset(mem, 0, sizeof sub);
      mu->n[MU_NULL_REQUIRED]++;
    } else if (sub) {
      mutate_msg(mu, sub);
    }
    return;
  }
  case PROTOBUF_C_TYPE_STRING: {
    char *s;
    memcpy(&s, mem, sizeof s);
    if (s && s != f->default_value && strlen(s) >= 2 && coin(mu, 100)) {
      size_t len = strlen(s);
      char *t = arena_alloc(mu->ar, len + 1);
      memcpy(t, s, len);
      t[wl_below(&mu->rng, len)] = 0;
      memcpy(mem, &t, sizeof t);
      mu->n[MU_NUL_STRING]++;
    } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !oneof && f->default_value &&
               coin(mu, 60)) {
      memcpy(mem, &f->default_value, sizeof s);
      mu->n[MU_DEFAULT_PTR]++;
    }
    return;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    ProtobufCBinaryData *bd = mem;
    if (bd->len > 0 && coin(mu, 60)) {
      size_t len = 512 + wl_below(&mu->rng, 2000);
      uint8_t *d = arena_alloc(mu->ar, len);
      for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)wl_rand(&mu->rng);
      *bd = (ProtobufCBinaryData){len, d};
      mu->n[MU_BIG_BYTES]++;
    }
    return;
  }
  case PROTOBUF_C_TYPE_BOOL:
    if (coin(mu, 250)) {
      *(protobuf_c_boolean *)mem = coin(mu, 500) ? 2 : -1;
      mu->n[MU_ODD_BOOL]++;
    }
    return;
  case PROTOBUF_C_TYPE_FLOAT:
  case PROTOBUF_C_TYPE_DOUBLE:
    if (coin(mu, 100)) {
      double odd[] = {NAN, -0.0, INFINITY, -INFINITY};
      double v = odd[wl_below(&mu->rng, 4)];
      if (f->type == PROTOBUF_C_TYPE_FLOAT)
        *(float *)mem = (float)v;
      else
        *(double *)mem = v;
      mu->n[MU_ODD_FLOAT]++;
    }
    return;
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_ENUM:
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT32:
  case PROTOBUF_C_TYPE_SINT64:
    if (coin(mu, 100)) {
      int64_t v = -(int64_t)wl_range(&mu->rng, 1, (uint64_t)1 << wl_below(&mu->rng, 62));
      if (pbw__elt_size(f->type) == 4) {
        int32_t w = (int32_t)v;
        memcpy(mem, &w, 4);
      } else {
        memcpy(mem, &v, 8);
      }
      mu->n[MU_NEGATIVE]++;
    }
    return;
  default: return;
  }
}

/* Push tree m towards the corners of pack, in place (arena memory). */
static void mutate_msg(mutator *mu, ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    if (f->label == PROTOBUF_C_LABEL_REPEATED)
      mutate_repeated(mu, f, (char *)m);
    else
      mutate_singular(mu, f, (char *)m);
  }
  if (coin(mu, 100))
    add_unknown(mu, m);
}

typedef struct {
  unsigned long types, trees;
  size_t max_bytes;
  mutator mu;
} rnd_run;

/* STANDIN_TEST_SEED=N runs the random tests on other trees. */
static uint64_t seed_of(uint64_t base) {
  const char *s = getenv("STANDIN_TEST_SEED");
  return base ^ (s ? strtoull(s, NULL, 10) * 0x9e3779b97f4a7c15ull : 0);
}

/* per_type random trees of each type (three size distributions, depths 1
 * to 8), each checked as built and again mutated. */
static void random_trees(const ProtobufCMessageDescriptor *const *types, size_t n,
                         unsigned per_type, uint64_t seed, rnd_run *run) {
  static const char *dists[] = {"fleet", "small", "large"};
  for (size_t t = 0; t < n; t++) {
    const ProtobufCMessageDescriptor *d = types[t];
    run->types++;
    for (unsigned i = 0; i < per_type; i++) {
      arena ar = {0};
      const wl_size_dist *sz = wl_size_dist_find(dists[i % 3]);
      filler fl = {wl_fnv(d->name, strlen(d->name), seed) ^ (i * 0x9e3779b97f4a7c15ull), &ar,
                   1 + (int)(i % 8), sz};
      size_t est;
      long target = (long)wl_size_draw(sz, &fl.rng);
      ProtobufCMessage *m = build_message(&fl, d, target, 0, &est);
      ck_assert_int_eq(check_tree(m), PBW_OK);
      run->mu.ar = &ar;
      run->mu.rng ^= fl.rng;
      mutate_msg(&run->mu, m);
      ck_assert_int_eq(check_tree2(m, UNPACK_MAY_FAIL), PBW_OK);
      buf b = pack_tree(m);
      run->max_bytes = b.n > run->max_bytes ? b.n : run->max_bytes;
      free(b.p);
      run->trees += 2;
      arena_free(&ar);
    }
  }
}

START_TEST(test_packed_random_trees_of_every_project_type) {
  rnd_run run = {0};
  run.mu.rng = seed_of(42);
  random_trees(protogen_types, protogen_n_types, 24, seed_of(1), &run);
  printf("project schemas: %lu types, %lu trees (largest %zu bytes, %lu not unpackable); "
         "mutations:",
         run.types, run.trees, run.max_bytes, unpack_refused);
  for (int k = 0; k < MU_KINDS; k++) {
    printf(" %lu", run.mu.n[k]);
  }
  printf("\n");
  fflush(stdout);
  for (int k = 0; k < MU_KINDS; k++)
    ck_assert_msg(run.mu.n[k] > 0, "mutation %d never happened", k);
  ck_assert_uint_gt(run.types, 30);
  ck_assert_uint_gt(run.max_bytes, 4096);
}
END_TEST

START_TEST(test_packed_random_trees_of_every_hyperprotobench_type) {
  char list[4096];
  rnd_run run = {0};
  unsigned files = 0;
  run.mu.rng = seed_of(7);
  snprintf(list, sizeof list, "%s", HPB_SOS);
  for (char *save = NULL, *path = strtok_r(list, " ", &save); path;
       path = strtok_r(NULL, " ", &save)) {
    /* loaded for good: schemas and walk plans are cached by descriptor */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    const ProtobufCMessageDescriptor *const *types = dlsym(h, "protogen_types");
    const size_t *n = dlsym(h, "protogen_n_types");
    ck_assert_msg(types && n && *n > 0, "%s: no registry", path);
    random_trees(types, *n, 6, seed_of(3), &run);
    files++;
  }
  if (files == 0) {
    printf("HyperProtoBench schemas not found at build time: skipped\n");
    return;
  }
  printf("HyperProtoBench: %u schemas, %lu types, %lu trees (largest %zu bytes); mutations:", files,
         run.types, run.trees, run.max_bytes);
  for (int k = 0; k < MU_KINDS; k++)
    printf(" %lu", run.mu.n[k]);
  printf("\n");
  fflush(stdout);
  ck_assert_uint_eq(files, 6);
  ck_assert_uint_gt(run.types, 400);
  /* proto2 schemas without repeated message fields: no NULL elements and
   * no proto3 zeros, but the rest */
  ck_assert_uint_gt(run.mu.n[MU_NULL_STRING], 0);
  ck_assert_uint_gt(run.mu.n[MU_ODD_BOOL], 0);
  ck_assert_uint_gt(run.mu.n[MU_NUL_STRING], 0);
  ck_assert_uint_gt(run.mu.n[MU_HAS_OFF], 0);
  ck_assert_uint_gt(run.mu.n[MU_NEGATIVE], 0);
  ck_assert_uint_gt(run.mu.n[MU_BIG_ARRAY], 0);
  ck_assert_uint_gt(run.mu.n[MU_BIG_BYTES], 0);
  ck_assert_uint_gt(run.mu.n[MU_UNKNOWN], 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pb_fpbytes");
  TCase *edge = tcase_create("edge"), *bad = tcase_create("damage"), *rnd = tcase_create("random");
  tcase_set_timeout(edge, 600);
  tcase_set_timeout(bad, 600);
  tcase_set_timeout(rnd, 1200); /* under ASan and valgrind */
  tcase_add_test(edge, test_packed_golden_value);
  tcase_add_test(edge, test_packed_proto3_zeros_and_presence);
  tcase_add_test(edge, test_packed_required_null_and_defaults);
  tcase_add_test(edge, test_packed_optional_presence_and_defaults);
  tcase_add_test(edge, test_packed_nul_truncated_strings_and_odd_bools);
  tcase_add_test(edge, test_packed_repeated_numbers_any_encoding);
  tcase_add_test(edge, test_packed_blobs_and_long_streams);
  tcase_add_test(edge, test_packed_maps_oneofs_and_nesting);
  tcase_add_test(edge, test_packed_unknown_fields_from_unpack);
  tcase_add_test(edge, test_packed_hand_built_unknown_fields);
  tcase_add_test(edge, test_packed_reads_values_as_unpack_does);
  tcase_add_test(edge, test_packed_depth_limit);
  tcase_add_test(bad, test_packed_damaged_bytes);
  tcase_add_test(bad, test_packed_damaged_schema);
  tcase_add_test(rnd, test_packed_random_trees_of_every_project_type);
  tcase_add_test(rnd, test_packed_random_trees_of_every_hyperprotobench_type);
  suite_add_tcase(s, edge);
  suite_add_tcase(s, bad);
  suite_add_tcase(s, rnd);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

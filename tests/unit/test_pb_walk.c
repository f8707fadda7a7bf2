/* test_pb_walk.c — unit tests of interpose/pb_walk: fingerprints,
 * statistics, relocatable images, schemas, JSON and descriptors rebuilt from
 * schemas, checked against what the real libprotobuf-c packs and unpacks.
 *
 * Run under valgrind too:
 *   CK_FORK=no valgrind --error-exitcode=1 --leak-check=full ./build/tests/test_pb_walk */
#include "pb_internal.h"
#include "pb_walk.h"
#include "pbw_chain.pb-c.h"
#include "pbw_descset.pb-c.h"
#include "pbw_types.pb-c.h"
#include "pbw_types3.pb-c.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"
#include "golden_tree.h"

#include <check.h>
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- Helpers ----------------------------------------------------------------- */

typedef struct {
  uint8_t *p;
  size_t n;
} buf;

static buf pack(const ProtobufCMessage *m) {
  buf b;
  b.n = protobuf_c_message_get_packed_size(m);
  b.p = malloc(b.n ? b.n : 1);
  ck_assert_ptr_nonnull(b.p);
  ck_assert_uint_eq(protobuf_c_message_pack(m, b.p), b.n);
  return b;
}

/* pack for trees that get_packed_size cannot measure (NULL elements of a
 * repeated message field, which pack and pack_to_buffer write as empty
 * messages); at most cap bytes. */
static buf pack_unsized(const ProtobufCMessage *m, size_t cap) {
  buf b;
  b.p = malloc(cap);
  ck_assert_ptr_nonnull(b.p);
  b.n = protobuf_c_message_pack(m, b.p);
  ck_assert_uint_le(b.n, cap);
  return b;
}

static void append(buf *b, const void *p, size_t n) {
  b->p = realloc(b->p, b->n + n);
  ck_assert_ptr_nonnull(b->p);
  memcpy(b->p + b->n, p, n);
  b->n += n;
}

static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d, buf b) {
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, b.n, b.p);
  ck_assert_ptr_nonnull(m);
  return m;
}

static void assert_packs_to(const ProtobufCMessage *m, buf want) {
  buf got = pack(m);
  ck_assert_uint_eq(got.n, want.n);
  ck_assert_int_eq(memcmp(got.p, want.p, want.n), 0);
  free(got.p);
}



static void assert_stats_eq(const pbw_stats *a, const pbw_stats *b) {
  ck_assert_uint_eq(a->fields, b->fields);
  ck_assert_uint_eq(a->submsgs, b->submsgs);
  ck_assert_uint_eq(a->max_depth, b->max_depth);
  ck_assert_uint_eq(a->repeated, b->repeated);
  ck_assert_uint_eq(a->var_bytes, b->var_bytes);
  ck_assert_uint_eq(a->field_words, b->field_words);
}

/* m's plain stream (pbw_tree_stream); the caller frees *s. */
static size_t stream_of(const ProtobufCMessage *m, uint8_t **s) {
  size_t len;
  ck_assert_int_eq(pbw_tree_stream(m, NULL, 0, s, &len), PBW_OK);
  return len;
}

/* m's plain stream with its long strings and bytes written as references
 * into ref (which holds them: m's plain stream without references does);
 * the caller frees *s. */
static size_t ref_stream_of(const ProtobufCMessage *m, const uint8_t *ref, size_t ref_len,
                            uint8_t **s) {
  size_t len;
  ck_assert_int_eq(pbw_tree_stream(m, ref, ref_len, s, &len), PBW_OK);
  return len;
}

/* m matches its stream with references into ref, but not with ref's bytes
 * changed or missing when the stream refers to any (it does when it is
 * shorter than the one without references, len bytes). */
static void check_ref_stream(const ProtobufCMessage *m, const uint8_t *ref, size_t len) {
  uint8_t *r, *bad = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(bad);
  size_t rlen = ref_stream_of(m, ref, len, &r);
  ck_assert(pbw_tree_matches(m, r, rlen, ref, len));
  for (size_t i = 0; i < len; i++)
    bad[i] = ref[i] ^ 0xFF;
  if (rlen < len) {
    ck_assert(!pbw_tree_matches(m, r, rlen, bad, len));
    ck_assert(!pbw_tree_matches(m, r, rlen, NULL, 0));
    ck_assert(!pbw_tree_matches(m, r, rlen, ref, len / 2));
  } else {
    ck_assert_uint_eq(rlen, len);
    ck_assert(pbw_tree_matches(m, r, rlen, NULL, 0));
  }
  free(bad);
  free(r);
}

/* The plain stream of m, taken with plans and without, is the same, m
 * matches it, and neither a shorter stream, a longer one nor one with any
 * of a few bytes changed matches. */
static void check_stream(const ProtobufCMessage *m) {
  uint8_t *s, *slow;
  size_t len = stream_of(m, &s);
  pbw__plans_off = 1;
  ck_assert_uint_eq(stream_of(m, &slow), len);
  pbw__plans_off = 0;
  ck_assert_int_eq(memcmp(s, slow, len), 0);
  ck_assert(pbw_tree_matches(m, s, len, NULL, 0));
  ck_assert(!pbw_tree_matches(m, s, len - 1, NULL, 0));
  check_ref_stream(m, s, len);
  uint8_t *longer = realloc(slow, len + 1);
  ck_assert_ptr_nonnull(longer);
  memcpy(longer, s, len);
  longer[len] = 0;
  ck_assert(!pbw_tree_matches(m, longer, len + 1, NULL, 0));
  size_t at[] = {0, len / 3, len / 2, len - 1};
  for (int k = 0; k < 4; k++) {
    s[at[k]] ^= 0x10;
    ck_assert_msg(!pbw_tree_matches(m, s, len, NULL, 0), "byte %zu of %zu changed, still matched",
                  at[k], len);
    s[at[k]] ^= 0x10;
  }
  free(longer);
  free(s);
}

/* Every fingerprint a test takes is taken twice: with the compiled walk
 * plans and with the interpreted descriptor walk, which must agree. The
 * plain stream is checked too (check_stream). */
static void fingerprint(const ProtobufCMessage *m, uint8_t fp[16]) {
  uint8_t slow[16];
  pbw_stats a, b;
  ck_assert_int_eq(pbw_fingerprint_tree(m, fp, &a), PBW_OK);
  pbw__plans_off = 1;
  ck_assert_int_eq(pbw_fingerprint_tree(m, slow, &b), PBW_OK);
  pbw__plans_off = 0;
  ck_assert_int_eq(memcmp(fp, slow, 16), 0);
  ck_assert_uint_eq(a.field_words, b.field_words);
  assert_stats_eq(&a, &b);
  check_stream(m);
}

/* Whether a matches b's plain stream: what replay takes for "same
 * fingerprint" when it confirms a predicted entry. */
static int matches(const ProtobufCMessage *a, const ProtobufCMessage *b) {
  uint8_t *s;
  size_t len = stream_of(b, &s);
  int r = pbw_tree_matches(a, s, len, NULL, 0);
  free(s);
  return r;
}

/* Image of m rebuilt with malloc; the caller frees it with free(). */
static ProtobufCMessage *image_roundtrip(const ProtobufCMessage *m) {
  void *img;
  size_t len;
  ProtobufCMessage *out;
  ck_assert_int_eq(pbw_image_build(m, &img, &len), PBW_OK);
  ck_assert_int_eq(pbw_image_materialise(img, len, m->descriptor, NULL, &out), PBW_OK);
  free(img);
  return out;
}

/* Records with numbers no test schema knows: varint 300, fixed64, fixed32
 * and a length-delimited "hello" (fields 100..103). */
static const uint8_t UNKNOWN[] = {0xa0, 0x06, 0xac, 0x02, 0xa9, 0x06, 1,   2,  3, 4,
                                  5,    6,    7,    8,    0xb5, 0x06, 9,   8,  7, 6,
                                  0xba, 0x06, 5,    'h',  'e',  'l',  'l', 'o'};

/* Everything a decoded message owns: freed by free_owned(). */
typedef struct {
  buf bytes;
  ProtobufCMessage *tree; /* unpacked by libprotobuf-c */
  ProtobufCMessage *extra;
} owned;

static void free_owned(owned *o) {
  free(o->bytes.p);
  protobuf_c_message_free_unpacked(o->tree, NULL);
  if (o->extra)
    protobuf_c_message_free_unpacked(o->extra, NULL);
}

/* ---- A rich sample.proto Tree, built by hand -------------------------------- */

typedef struct {
  Standin__Test__Tree tree;
  Standin__Test__Branch trunk, br[3], *brp[3];
  Standin__Test__Leaf leaf[6], *trunk_leaves[2], *br_leaves[1];
  int32_t values[3];
  char *tags[3];
  Standin__Test__Tree__CountersEntry ce[2], *cep[2];
  Standin__Test__Tree__LeafMapEntry le[2], *lep[2];
  uint32_t packed[4];
  uint64_t unpacked[2];
  ProtobufCBinaryData chunks[3];
  uint8_t blob[300];
  uint8_t *big;
  char empty[1];
} tree_store;

static void make_leaves(tree_store *s) {
  for (int i = 0; i < 6; i++)
    standin__test__leaf__init(&s->leaf[i]);
  for (int i = 0; i < 300; i++)
    s->blob[i] = (uint8_t)(i * 7);
  s->values[0] = -1;
  s->values[1] = 2;
  s->values[2] = -3;
  s->leaf[0].name = "a";
  s->leaf[0].has_blob = 1;
  s->leaf[0].blob = (ProtobufCBinaryData){sizeof s->blob, s->blob};
  s->leaf[0].n_values = 3;
  s->leaf[0].values = s->values;
  s->leaf[0].has_weight = 1;
  s->leaf[0].weight = 2.5;
  s->leaf[2].name = "best";
  s->empty[0] = 0;
  s->leaf[3].name = s->empty; /* not the default: written */
  s->leaf[3].has_weight = 1;  /* equal to the default, but present */
  s->leaf[4].name = "oneof";
  s->leaf[5].name = "br";
}

static void make_branches(tree_store *s) {
  standin__test__branch__init(&s->trunk);
  s->trunk.id = 1;
  s->trunk_leaves[0] = &s->leaf[0];
  s->trunk_leaves[1] = &s->leaf[1];
  s->trunk.n_leaves = 2;
  s->trunk.leaves = s->trunk_leaves;
  s->trunk.best = &s->leaf[2];
  s->trunk.has_color = 1;
  s->trunk.color = STANDIN__TEST__COLOR__BLUE;
  s->tags[0] = "x";
  s->tags[1] = "";
  s->tags[2] = "yz";
  s->trunk.n_tags = 3;
  s->trunk.tags = s->tags;
  for (int i = 0; i < 3; i++) {
    standin__test__branch__init(&s->br[i]);
    s->brp[i] = &s->br[i];
  }
  s->br[0].id = -5;
  s->br[1].id = (int64_t)1 << 40;
  s->br_leaves[0] = &s->leaf[5];
  s->br[1].n_leaves = 1;
  s->br[1].leaves = s->br_leaves;
  s->br[2].id = 7;
  s->br[2].has_color = 1;
  s->br[2].color = STANDIN__TEST__COLOR__RED;
}

static void make_maps(tree_store *s) {
  for (int i = 0; i < 2; i++) {
    standin__test__tree__counters_entry__init(&s->ce[i]);
    standin__test__tree__leaf_map_entry__init(&s->le[i]);
    s->cep[i] = &s->ce[i];
    s->lep[i] = &s->le[i];
    s->ce[i].has_value = 1;
    s->le[i].has_key = 1;
  }
  s->ce[0].key = "a";
  s->ce[0].value = 1;
  s->ce[1].key = "b";
  s->ce[1].value = -2;
  s->le[0].key = 7;
  s->le[0].value = &s->leaf[3];
  s->le[1].key = -1;
}

/* payload: 0 (unset) or a Tree payload case; big: bytes in chunks[2]. */
static void make_tree(tree_store *s, int payload, size_t big) {
  Standin__Test__Tree *t = &s->tree;
  make_leaves(s);
  make_branches(s);
  make_maps(s);
  standin__test__tree__init(t);
  t->title = "forest";
  t->trunk = &s->trunk;
  t->n_branches = 3;
  t->branches = s->brp;
  t->n_counters = 2;
  t->counters = s->cep;
  t->n_leaf_map = 2;
  t->leaf_map = s->lep;
  s->packed[0] = 1, s->packed[1] = 2, s->packed[2] = 3, s->packed[3] = 0xffffffffu;
  t->n_packed_ids = 4;
  t->packed_ids = s->packed;
  s->unpacked[0] = 5, s->unpacked[1] = (uint64_t)1 << 63;
  t->n_unpacked_ids = 2;
  t->unpacked_ids = s->unpacked;
  t->has_flag = 1;
  t->flag = 0;
  t->has_ratio = 1;
  t->ratio = 0.5f;
  s->big = calloc(1, big + 1);
  for (size_t i = 0; i < big; i++)
    s->big[i] = (uint8_t)(i ^ (i >> 8));
  s->chunks[0] = (ProtobufCBinaryData){3, (uint8_t *)"abc"};
  s->chunks[1] = (ProtobufCBinaryData){0, NULL};
  s->chunks[2] = (ProtobufCBinaryData){big, s->big};
  t->n_chunks = 3;
  t->chunks = s->chunks;
  t->payload_case = (Standin__Test__Tree__PayloadCase)payload;
  if (payload == STANDIN__TEST__TREE__PAYLOAD_NUMBER)
    t->number = -42;
  else if (payload == STANDIN__TEST__TREE__PAYLOAD_TEXT)
    t->text = "text";
  else if (payload == STANDIN__TEST__TREE__PAYLOAD_LEAF)
    t->leaf = &s->leaf[4];
}

/* The rich tree as libprotobuf-c unpacks it, with unknown fields at the
 * root and inside trunk.best. */
static owned unpacked_tree(int payload, size_t big) {
  tree_store s;
  owned o = {0};
  make_tree(&s, payload, big);
  buf lb = pack(&s.leaf[2].base);
  append(&lb, UNKNOWN, sizeof UNKNOWN);
  o.extra = unpack(&standin__test__leaf__descriptor, lb);
  free(lb.p);
  s.trunk.best = (Standin__Test__Leaf *)o.extra;
  o.bytes = pack(&s.tree.base);
  append(&o.bytes, UNKNOWN, sizeof UNKNOWN);
  o.tree = unpack(&standin__test__tree__descriptor, o.bytes);
  free(s.big);
  return o;
}

/* ---- proto3 sample Batch ---------------------------------------------------- */

static owned unpacked_batch(int pick) {
  Standin__Test3__Batch b = STANDIN__TEST3__BATCH__INIT;
  Standin__Test3__Item it[3], *itp[2];
  Standin__Test3__Batch__ByKeyEntry e[2], *ep[2];
  int32_t scores[3] = {0, -9, 100000};
  owned o = {0};
  for (int i = 0; i < 3; i++)
    standin__test3__item__init(&it[i]);
  it[0].key = "k0";
  it[0].value = (ProtobufCBinaryData){2, (uint8_t *)"v0"};
  it[0].n_scores = 3;
  it[0].scores = scores;
  it[1].key = ""; /* proto3: empty strings are not written */
  it[2].key = "chosen";
  itp[0] = &it[0];
  itp[1] = &it[1];
  for (int i = 0; i < 2; i++) {
    standin__test3__batch__by_key_entry__init(&e[i]);
    ep[i] = &e[i];
  }
  e[0].key = "one";
  e[0].value = &it[0];
  e[1].value = &it[1]; /* empty key */
  b.name = "batch";
  b.n_items = 2;
  b.items = itp;
  b.n_by_key = 2;
  b.by_key = ep;
  b.version = 3;
  b.pick_case = (Standin__Test3__Batch__PickCase)pick;
  if (pick == STANDIN__TEST3__BATCH__PICK_CHOSEN)
    b.chosen = &it[2];
  else if (pick == STANDIN__TEST3__BATCH__PICK_LABEL)
    b.label = "label";
  o.bytes = pack(&b.base);
  append(&o.bytes, UNKNOWN, sizeof UNKNOWN);
  o.tree = unpack(&standin__test3__batch__descriptor, o.bytes);
  return o;
}

/* ---- pbw_types.proto: every scalar type and default -------------------------- */

static void make_scalars(Standin__Pbw__Scalars *s, Standin__Pbw__Node *node, int choice) {
  static int32_t ri[] = {-1, 0, 7};
  static int64_t rs[] = {-5, (int64_t)1 << 50};
  static double rd[] = {0.5, -0.0, 1e300};
  static protobuf_c_boolean rb[] = {1, 0, 1};
  static Standin__Pbw__Mood rm[] = {STANDIN__PBW__MOOD__ANGRY, STANDIN__PBW__MOOD__HAPPY};
  static uint64_t rf[] = {~(uint64_t)0};
  static float rfl[] = {1.25f, -3.0f};
  static ProtobufCBinaryData rby[] = {{3, (uint8_t *)"\0\1\2"}, {0, NULL}};
  standin__pbw__scalars__init(s);
  s->has_i32 = s->has_i64 = s->has_u32 = s->has_u64 = s->has_s32 = s->has_s64 = 1;
  s->has_f32 = s->has_f64 = s->has_sf32 = s->has_sf64 = s->has_fl = s->has_db = 1;
  s->has_b = s->has_mood = s->has_byt = s->has_far = 1;
  s->i32 = -123, s->i64 = -((int64_t)1 << 40), s->u32 = 4000000001u, s->u64 = ~(uint64_t)1;
  s->s32 = -77, s->s64 = (int64_t)1 << 62, s->f32 = 0xdeadbeef, s->f64 = 1;
  s->sf32 = -1, s->sf64 = -2, s->fl = 0.1f, s->db = 0.1;
  s->b = 0, s->mood = STANDIN__PBW__MOOD__HAPPY, s->far = 42;
  s->str = "hi \"json\"\n\t\x01 \xc3\xa9 \xff";
  s->byt = (ProtobufCBinaryData){4, (uint8_t *)"\0\xff\x10z"};
  s->n_r_i32 = 3, s->r_i32 = ri;
  s->n_r_s64 = 2, s->r_s64 = rs;
  s->n_r_db = 3, s->r_db = rd;
  s->n_r_b = 3, s->r_b = rb;
  s->n_r_mood = 2, s->r_mood = rm;
  s->n_r_f64 = 1, s->r_f64 = rf;
  s->n_r_fl = 2, s->r_fl = rfl;
  s->n_r_byt = 2, s->r_byt = rby;
  s->node = node;
  s->choice_case = (Standin__Pbw__Scalars__ChoiceCase)choice;
  if (choice == STANDIN__PBW__SCALARS__CHOICE_O_STR)
    s->o_str = "pick";
  else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_BYT)
    s->o_byt = (ProtobufCBinaryData){2, (uint8_t *)"xy"};
  else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_DB)
    s->o_db = 2.5;
  else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_NODE)
    s->o_node = node;
}

static owned unpacked_scalars(int choice) {
  Standin__Pbw__Scalars s;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT, kid = STANDIN__PBW__NODE__INIT, *kids[1];
  owned o = {0};
  kid.has_level = 1;
  kid.level = 2;
  kids[0] = &kid;
  node.n_kids = 1;
  node.kids = kids;
  make_scalars(&s, &node, choice);
  o.bytes = pack(&s.base);
  o.tree = unpack(&standin__pbw__scalars__descriptor, o.bytes);
  return o;
}

static owned unpacked_all3(int zeros) {
  Standin__Pbw3__All3 a = STANDIN__PBW3__ALL3__INIT, sub = STANDIN__PBW3__ALL3__INIT;
  Standin__Pbw3__All3__MEntry me[2], *mep[2];
  int64_t r[2] = {0, -1};
  char *rs[2] = {"", "s"};
  owned o = {0};
  for (int i = 0; i < 2; i++) {
    standin__pbw3__all3__mentry__init(&me[i]);
    mep[i] = &me[i];
  }
  me[0].key = 1;
  me[0].value = "one";
  if (!zeros) {
    a.i32 = -1, a.i64 = 2, a.u32 = 3, a.u64 = 4, a.s32 = -5, a.s64 = 6, a.f32 = 7, a.f64 = 8;
    a.sf32 = -9, a.sf64 = 10, a.fl = -0.5f, a.db = 1e-300, a.b = 1;
    a.tone = STANDIN__PBW3__TONE__TONE_ONE, a.s = "s";
    a.by = (ProtobufCBinaryData){1, (uint8_t *)"b"};
    a.o_case = STANDIN__PBW3__ALL3__O_O_I, a.o_i = 0; /* a oneof member is written even if 0 */
  } else {
    a.fl = -0.0f; /* proto3 skips -0.0 too: it compares equal to 0 */
    a.o_case = STANDIN__PBW3__ALL3__O_O_S, a.o_s = "";
  }
  a.sub = &sub;
  a.n_r_i64 = 2, a.r_i64 = r;
  a.n_r_s = 2, a.r_s = rs;
  a.n_m = 2, a.m = mep;
  o.bytes = pack(&a.base);
  o.tree = unpack(&standin__pbw3__all3__descriptor, o.bytes);
  return o;
}

/* A chain of n Nodes, root first, in caller storage. */
static void make_chain(Standin__Pbw__Node *nodes, int n) {
  for (int i = 0; i < n; i++) {
    standin__pbw__node__init(&nodes[i]);
    nodes[i].has_level = 1;
    nodes[i].level = (uint32_t)i;
    if (i > 0)
      nodes[i - 1].child = &nodes[i];
  }
}

/* Encoding of C<i> .. C39 of pbw_chain.proto, each with v = i. */
static buf chain_bytes(int i) {
  buf b = {0};
  if (i < 39) {
    buf inner = chain_bytes(i + 1);
    /* field 1 (next), length-delimited, with a 1- or 2-byte length */
    uint8_t hdr[3] = {0x0a, (uint8_t)(inner.n | 0x80), (uint8_t)(inner.n >> 7)};
    ck_assert_uint_lt(inner.n, 1u << 14);
    if (inner.n < 128)
      append(&b, (uint8_t[]){0x0a, (uint8_t)inner.n}, 2);
    else
      append(&b, hdr, 3);
    append(&b, inner.p, inner.n);
    free(inner.p);
  }
  append(&b, (uint8_t[]){0x10, (uint8_t)i}, 2);
  return b;
}

/* ---- Images ------------------------------------------------------------------ */

/* An allocator that knows what it handed out: the pieces test checks that
 * a tree rebuilt piece by piece is exactly what libprotobuf-c allocates and
 * frees. */
#define LIVE_MAX 4096
typedef struct {
  void *live[LIVE_MAX];
  size_t n_live, allocs, frees, bad_frees;
  size_t fail_at; /* 0, or the allocation (1-based) that fails */
} tracking;

static void *track_alloc(void *ad, size_t size) {
  tracking *c = ad;
  if (c->fail_at && c->allocs + 1 == c->fail_at) {
    c->fail_at = 0;
    return NULL;
  }
  void *p = malloc(size ? size : 1);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_lt(c->n_live, LIVE_MAX);
  c->live[c->n_live++] = p;
  c->allocs++;
  return p;
}

static void track_free(void *ad, void *p) {
  tracking *c = ad;
  c->frees++;
  for (size_t i = 0; i < c->n_live; i++)
    if (c->live[i] == p) {
      c->live[i] = c->live[--c->n_live];
      free(p);
      return;
    }
  c->bad_frees++;
}

static void reseal(uint8_t *p, size_t len);

/* Where an image's split section starts (its length when it has none). */
static size_t split_start(const void *img, size_t len) {
  const uint8_t *p = img;
  uint32_t n_types, n_fix, names_len;
  uint64_t block;
  memcpy(&n_types, p + 20, 4);
  memcpy(&n_fix, p + 24, 4);
  memcpy(&names_len, p + 28, 4);
  memcpy(&block, p + 32, 8);
  return 40 + (size_t)n_types * 32 + names_len + (size_t)n_fix * 4 + block;
}

/* The image made to refer to the bytes its tree was unpacked from
 * (pbw_image_refer): every way of building a tree from it, one block or
 * piece by piece, with or without a memo, gives the same message, and the
 * pieces are all freed once; without the bytes (or with none) it is
 * refused. Returns how many bytes the image lost. */
static size_t check_referred_roundtrip(owned *o) {
  const ProtobufCMessageDescriptor *d = o->tree->descriptor;
  void *img;
  size_t len, full;
  ck_assert_int_eq(pbw_image_build(o->tree, &img, &len), PBW_OK);
  full = len;
  ck_assert_int_eq(pbw_image_refer(&img, &len, o->bytes.p, o->bytes.n), PBW_OK);
  ck_assert_uint_le(len, full);
  ProtobufCMessage *m = NULL;
  pbw_image_memo memo = {0};
  for (int k = 0; k < 4; k++) {
    ck_assert_int_eq(pbw_image_materialise_req(img, len, o->bytes.p, o->bytes.n, d, NULL, &m,
                                               k ? &memo : NULL, 0),
                     PBW_OK);
    assert_packs_to(m, o->bytes);
    free(m);
  }
  free((void *)atomic_load(&memo.pieces));
  static tracking t;
  memset(&t, 0, sizeof t);
  ProtobufCAllocator a = {track_alloc, track_free, &t};
  pbw_image_memo memo2 = {0};
  for (int k = 0; k < 4; k++) {
    ck_assert_int_eq(pbw_image_materialise_req(img, len, o->bytes.p, o->bytes.n, d, &a, &m,
                                               k ? &memo2 : NULL, 1),
                     PBW_OK);
    assert_packs_to(m, o->bytes);
    protobuf_c_message_free_unpacked(m, &a);
  }
  /* a kept plan of a block up to 4 KiB holds it with the request's bytes
   * filled in once: later trees are copied from it, as the same message
   * again and again was before refs, and do not read the request (which
   * the caller promises is the recorded one); a larger one keeps its refs,
   * checked for the recorded request's length */
  if (len < full && pbw_image_alloc_size(img, len) <= 4096) {
    uint8_t *other = calloc(1, o->bytes.n);
    for (int pieces = 0; pieces < 2; pieces++) {
      ck_assert_int_eq(
          pbw_image_materialise_req(img, len, other, o->bytes.n, d, &a, &m, &memo2, pieces),
          PBW_OK);
      assert_packs_to(m, o->bytes);
      if (pieces)
        protobuf_c_message_free_unpacked(m, &a);
      else
        a.free(a.allocator_data, m);
    }
    free(other);
  } else if (len < full) {
    for (int pieces = 0; pieces < 2; pieces++)
      ck_assert_int_eq(pbw_image_materialise_req(img, len, o->bytes.p, o->bytes.n - 1, d, &a, &m,
                                                 &memo2, pieces),
                       PBW_E_BADIMAGE);
  }
  free((void *)atomic_load(&memo2.pieces));
  ck_assert_uint_eq(t.bad_frees, 0);
  ck_assert_uint_eq(t.n_live, 0);
  if (len < full) {
    m = (ProtobufCMessage *)&m;
    ck_assert_int_eq(pbw_image_materialise(img, len, d, NULL, &m), PBW_E_BADIMAGE);
    ck_assert_ptr_null(m);
    ck_assert_int_eq(pbw_image_materialise_pieces(img, len, d, &a, &m, NULL), PBW_E_BADIMAGE);
    ck_assert_int_eq(pbw_image_materialise_req(img, len, o->bytes.p, 0, d, &a, &m, NULL, 1),
                     PBW_E_BADIMAGE);
    ck_assert_int_eq(pbw_image_materialise_req(img, len, o->bytes.p, 0, d, NULL, &m, NULL, 0),
                     PBW_E_BADIMAGE);
    ck_assert_ptr_null(m);
    ck_assert_uint_eq(t.n_live, 0);
  }
  free(img);
  return full - len;
}

static void check_image_roundtrip(owned *o) {
  uint8_t fp1[16], fp2[16];
  pbw_stats s1, s2;
  ProtobufCMessage *m = image_roundtrip(o->tree);
  assert_packs_to(o->tree, o->bytes);
  assert_packs_to(m, o->bytes);
  ck_assert_int_eq(pbw_fingerprint_tree(o->tree, fp1, &s1), PBW_OK);
  ck_assert_int_eq(pbw_fingerprint_tree(m, fp2, &s2), PBW_OK);
  ck_assert_int_eq(memcmp(fp1, fp2, 16), 0);
  assert_stats_eq(&s1, &s2);
  free(m);
  /* piece by piece: as many allocations as libprotobuf-c's own unpack
   * makes, the same message, and its free_unpacked frees every piece */
  static tracking nat, pcs;
  memset(&nat, 0, sizeof nat);
  memset(&pcs, 0, sizeof pcs);
  ProtobufCAllocator an = {track_alloc, track_free, &nat}, ap = {track_alloc, track_free, &pcs};
  ProtobufCMessage *n =
      protobuf_c_message_unpack(o->tree->descriptor, &an, o->bytes.n, o->bytes.p);
  ck_assert_ptr_nonnull(n);
  void *img;
  size_t len;
  ck_assert_int_eq(pbw_image_build(o->tree, &img, &len), PBW_OK);
  ProtobufCMessage *p = NULL;
  /* with a memo: the first call builds as without one (most entries are
   * replayed once a process), the second keeps the split plan, with every
   * fix-up that is not an internal pointer resolved; the later ones use it */
  pbw_image_memo memo = {0};
  for (int k = 0; k < 3; k++) {
    ck_assert_int_eq(pbw_image_materialise_pieces(img, len, o->tree->descriptor, &ap, &p, &memo),
                     PBW_OK);
    if (k == 0)
      ck_assert_ptr_null(atomic_load(&memo.pieces));
    else
      ck_assert_ptr_nonnull(atomic_load(&memo.pieces));
    assert_packs_to(p, o->bytes);
    ck_assert_int_eq(pbw_fingerprint_tree(p, fp2, &s2), PBW_OK);
    ck_assert_int_eq(memcmp(fp1, fp2, 16), 0);
    protobuf_c_message_free_unpacked(p, &ap);
  }
  /* out of memory at the last piece, through the memo's plan: what was
   * made is freed, nothing is returned */
  size_t made = pcs.allocs / 3;
  pcs.fail_at = pcs.allocs + made;
  p = (ProtobufCMessage *)&p;
  ck_assert_int_eq(pbw_image_materialise_pieces(img, len, o->tree->descriptor, &ap, &p, &memo),
                   PBW_E_NOMEM);
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(pcs.n_live, 0);
  ck_assert_uint_eq(pcs.frees, pcs.allocs);
  free((void *)atomic_load(&memo.pieces));
  /* without a memo, from the image's split section (checked as it builds):
   * out of memory at its last piece leaves nothing allocated */
  pcs.fail_at = pcs.allocs + made;
  p = (ProtobufCMessage *)&p;
  ck_assert_int_eq(pbw_image_materialise_pieces(img, len, o->tree->descriptor, &ap, &p, NULL),
                   PBW_E_NOMEM);
  ck_assert_ptr_null(p);
  ck_assert_uint_eq(pcs.n_live, 0);
  /* an image without the section (flag and section dropped) is split here */
  size_t bare = split_start(img, len);
  if (bare < len) {
    uint8_t *old = malloc(bare);
    memcpy(old, img, bare);
    memset(old + 16, 0, 4);
    reseal(old, bare);
    ck_assert_int_eq(pbw_image_materialise_pieces(old, bare, o->tree->descriptor, &ap, &p, NULL),
                     PBW_OK);
    assert_packs_to(p, o->bytes);
    protobuf_c_message_free_unpacked(p, &ap);
    free(old);
  }
  size_t before = pcs.allocs;
  ck_assert_int_eq(pbw_image_materialise_pieces(img, len, o->tree->descriptor, &ap, &p, NULL),
                   PBW_OK);
  free(img);
  /* (unpack may also allocate scratch space it frees before returning) */
  ck_assert_uint_eq(pcs.allocs - before, nat.n_live);
  assert_packs_to(p, o->bytes);
  ck_assert_int_eq(pbw_fingerprint_tree(p, fp2, &s2), PBW_OK);
  ck_assert_int_eq(memcmp(fp1, fp2, 16), 0);
  protobuf_c_message_free_unpacked(p, &ap);
  protobuf_c_message_free_unpacked(n, &an);
  ck_assert_uint_eq(pcs.bad_frees, 0);
  ck_assert_uint_eq(pcs.n_live, 0);
  ck_assert_uint_eq(pcs.frees, pcs.allocs);
  ck_assert_uint_eq(nat.n_live, 0);
  check_referred_roundtrip(o);
}

START_TEST(test_image_roundtrip_sample_tree_packs_identically) {
  static const int payloads[] = {0, STANDIN__TEST__TREE__PAYLOAD_NUMBER,
                                 STANDIN__TEST__TREE__PAYLOAD_TEXT,
                                 STANDIN__TEST__TREE__PAYLOAD_LEAF};
  for (int i = 0; i < 4; i++) {
    owned o = unpacked_tree(payloads[i], i == 3 ? 70000 : 10);
    check_image_roundtrip(&o);
    /* the 70,000-byte chunk, and a leaf's 300-byte blob, are held by
     * reference to the unpacked bytes (24 bytes each say where) */
    ck_assert_uint_ge(check_referred_roundtrip(&o), (i == 3 ? 70000 : 0) + 250);
    free_owned(&o);
  }
}
END_TEST

START_TEST(test_image_roundtrip_sample3_batch_packs_identically) {
  static const int picks[] = {0, STANDIN__TEST3__BATCH__PICK_CHOSEN,
                              STANDIN__TEST3__BATCH__PICK_LABEL};
  for (int i = 0; i < 3; i++) {
    owned o = unpacked_batch(picks[i]);
    check_image_roundtrip(&o);
    free_owned(&o);
  }
}
END_TEST

START_TEST(test_image_roundtrip_all_scalar_types) {
  for (int choice = 0; choice <= STANDIN__PBW__SCALARS__CHOICE_O_NODE; choice++) {
    if (choice != 0 && choice < STANDIN__PBW__SCALARS__CHOICE_O_STR)
      continue;
    owned o = unpacked_scalars(choice);
    check_image_roundtrip(&o);
    free_owned(&o);
  }
  for (int zeros = 0; zeros < 2; zeros++) {
    owned o = unpacked_all3(zeros);
    check_image_roundtrip(&o);
    free_owned(&o);
  }
}
END_TEST

START_TEST(test_image_field_by_field_equals_unpacked_tree) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 100);
  const Standin__Test__Tree *u = (const Standin__Test__Tree *)o.tree;
  Standin__Test__Tree *m = (Standin__Test__Tree *)image_roundtrip(o.tree);
  ck_assert_ptr_eq(m->base.descriptor, &standin__test__tree__descriptor);
  ck_assert_ptr_eq(m->trunk->base.descriptor, &standin__test__branch__descriptor);
  ck_assert_str_eq(m->title, "forest");
  ck_assert_uint_eq(m->n_branches, u->n_branches);
  ck_assert_int_eq(m->branches[1]->id, (int64_t)1 << 40);
  ck_assert_int_eq(m->payload_case, STANDIN__TEST__TREE__PAYLOAD_LEAF);
  ck_assert_str_eq(m->leaf->name, "oneof");
  ck_assert_uint_eq(m->base.n_unknown_fields, 4);
  ck_assert_uint_eq(m->base.unknown_fields[3].len, 6);
  ck_assert_int_eq(memcmp(m->base.unknown_fields[3].data, "\5hello", 6), 0);
  ck_assert_uint_eq(m->trunk->best->base.n_unknown_fields, 4);
  ck_assert_ptr_eq(m->motto, standin__test__tree__motto__default_value);
  ck_assert_ptr_eq(m->trunk->leaves[1]->name, standin__test__leaf__name__default_value);
  ck_assert_int_eq(m->trunk->leaves[1]->has_weight, 0);
  ck_assert_ptr_null(m->chunks[1].data);
  ck_assert_int_eq(m->has_flag, 1);
  ck_assert_int_eq(m->flag, 0);
  /* the whole tree lives inside the one block */
  size_t size = 0;
  void *img;
  ck_assert_int_eq(pbw_image_build(o.tree, &img, &size), PBW_OK);
  size_t block = pbw_image_alloc_size(img, size);
  uintptr_t at = (uintptr_t)m->trunk->leaves[0]->blob.data, base = (uintptr_t)m;
  ck_assert(at >= base && at < base + block);
  free(img);
  free(m);
  free_owned(&o);
}
END_TEST

/* Equal trees give equal images, so the trace can de-duplicate them. */
START_TEST(test_image_of_equal_trees_is_identical) {
  owned a = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_TEXT, 700);
  owned b = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_TEXT, 700);
  void *ia, *ib;
  size_t la, lb;
  ck_assert_int_eq(pbw_image_build(a.tree, &ia, &la), PBW_OK);
  ck_assert_int_eq(pbw_image_build(b.tree, &ib, &lb), PBW_OK);
  ck_assert_uint_eq(la, lb);
  ck_assert_int_eq(memcmp(ia, ib, la), 0);
  free(ia);
  free(ib);
  free_owned(&a);
  free_owned(&b);
}
END_TEST

START_TEST(test_image_rebinds_default_pointers) {
  buf none = {0};
  buf req = {0};
  /* Required: node, data and id present; name and tag left to defaults */
  append(&req, (uint8_t[]){0x12, 0x00, 0x1a, 0x00, 0x20, 0x05}, 6);
  Standin__Test__Leaf *leaf = (Standin__Test__Leaf *)unpack(&standin__test__leaf__descriptor, none);
  Standin__Test3__Item *item =
      (Standin__Test3__Item *)unpack(&standin__test3__item__descriptor, none);
  Standin__Pbw__Scalars *sc =
      (Standin__Pbw__Scalars *)unpack(&standin__pbw__scalars__descriptor, none);
  Standin__Pbw__Required *rq =
      (Standin__Pbw__Required *)unpack(&standin__pbw__required__descriptor, req);
  Standin__Test__Leaf *ml = (Standin__Test__Leaf *)image_roundtrip(&leaf->base);
  Standin__Test3__Item *mi = (Standin__Test3__Item *)image_roundtrip(&item->base);
  Standin__Pbw__Scalars *ms = (Standin__Pbw__Scalars *)image_roundtrip(&sc->base);
  Standin__Pbw__Required *mr = (Standin__Pbw__Required *)image_roundtrip(&rq->base);
  ck_assert_ptr_eq(leaf->name, standin__test__leaf__name__default_value);
  ck_assert_ptr_eq(ml->name, standin__test__leaf__name__default_value);
  ck_assert_double_eq(ml->weight, 1.5);
  ck_assert_ptr_eq(mi->key, protobuf_c_empty_string);
  ck_assert_ptr_eq(ms->str, standin__pbw__scalars__str__default_value);
  ck_assert_ptr_eq(ms->byt.data, standin__pbw__scalars__byt__default_value_data);
  ck_assert_uint_eq(ms->byt.len, 3);
  ck_assert_int_eq(ms->has_byt, 0);
  ck_assert_int_eq(ms->mood, STANDIN__PBW__MOOD__ANGRY);
  ck_assert_ptr_eq(mr->name, standin__pbw__required__name__default_value);
  ck_assert_ptr_eq(mr->tag.data, standin__pbw__required__tag__default_value_data);
  ck_assert_ptr_nonnull(mr->node);
  ck_assert_uint_eq(mr->id, 5);
  free(ml), free(mi), free(ms), free(mr);
  protobuf_c_message_free_unpacked(&leaf->base, NULL);
  protobuf_c_message_free_unpacked(&item->base, NULL);
  protobuf_c_message_free_unpacked(&sc->base, NULL);
  protobuf_c_message_free_unpacked(&rq->base, NULL);
  free(req.p);
}
END_TEST

typedef struct {
  int calls;
  size_t size;
} counting;

static void *count_alloc(void *data, size_t size) {
  counting *c = data;
  c->calls++;
  c->size = size;
  return malloc(size);
}

static void count_free(void *data, void *p) {
  (void)data;
  free(p);
}

START_TEST(test_image_uses_one_allocation_of_alloc_size) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_TEXT, 1000);
  counting c = {0};
  ProtobufCAllocator a = {count_alloc, count_free, &c};
  void *img;
  size_t len;
  ProtobufCMessage *m;
  ck_assert_int_eq(pbw_image_build(o.tree, &img, &len), PBW_OK);
  ck_assert_str_eq(pbw_image_type_name(img, len), "standin.test.Tree");
  ck_assert_int_eq(pbw_image_materialise(img, len, o.tree->descriptor, &a, &m), PBW_OK);
  ck_assert_int_eq(c.calls, 1);
  ck_assert_uint_eq(c.size, pbw_image_alloc_size(img, len));
  ck_assert_uint_eq(c.size % 8, 0);
  assert_packs_to(m, o.bytes);
  /* a second call hits the per-thread binding cache and gives the same */
  ProtobufCMessage *m2;
  ck_assert_int_eq(pbw_image_materialise(img, len, o.tree->descriptor, &a, &m2), PBW_OK);
  assert_packs_to(m2, o.bytes);
  a.free(a.allocator_data, m);
  a.free(a.allocator_data, m2);
  free(img);
  free_owned(&o);
}
END_TEST

/* A memo skips the checks only for the image, length and descriptor it
 * was made for: anything else takes the checked path and its errors. */
START_TEST(test_image_memo_only_for_what_it_checked) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_TEXT, 300);
  owned b = unpacked_batch(STANDIN__TEST3__BATCH__PICK_CHOSEN);
  void *img, *bimg;
  size_t len, blen;
  ProtobufCMessage *m = NULL;
  ck_assert_int_eq(pbw_image_build(o.tree, &img, &len), PBW_OK);
  ck_assert_int_eq(pbw_image_build(b.tree, &bimg, &blen), PBW_OK);
  pbw_image_memo memo = {0};
  /* a failed check leaves the memo empty */
  ck_assert_int_eq(pbw_image_materialise_memo(img, len, &standin__test__leaf__descriptor, NULL,
                                              &m, &memo),
                   PBW_E_SCHEMA);
  ck_assert_ptr_null(atomic_load(&memo.root));
  for (int k = 0; k < 3; k++) { /* the first call fills the memo, the others use it */
    ck_assert_int_eq(pbw_image_materialise_memo(img, len, o.tree->descriptor, NULL, &m, &memo),
                     PBW_OK);
    ck_assert_ptr_eq(atomic_load(&memo.root), o.tree->descriptor);
    assert_packs_to(m, o.bytes);
    free(m);
  }
  /* another descriptor, another image or a damaged one is checked again */
  ck_assert_int_eq(pbw_image_materialise_memo(img, len, &standin__test3__batch__descriptor, NULL,
                                              &m, &memo),
                   PBW_E_SCHEMA);
  ck_assert_int_eq(pbw_image_materialise_memo(bimg, blen, o.tree->descriptor, NULL, &m, &memo),
                   PBW_E_SCHEMA);
  /* a structurally damaged image is refused (its checksum is not read) */
  uint8_t *bad = malloc(len);
  memcpy(bad, img, len);
  pbw__st32(bad + 24, 0); /* no fix-ups: not even the root descriptor */
  ck_assert_int_eq(pbw_image_materialise_memo(bad, len, o.tree->descriptor, NULL, &m, &memo),
                   PBW_E_BADIMAGE);
  ck_assert_ptr_null(m);
  /* the memo still serves its own image */
  ck_assert_int_eq(pbw_image_materialise_memo(img, len, o.tree->descriptor, NULL, &m, &memo),
                   PBW_OK);
  assert_packs_to(m, o.bytes);
  free(m);
  free(bad);
  free(img);
  free(bimg);
  free_owned(&o);
  free_owned(&b);
}
END_TEST

START_TEST(test_image_with_many_types_bypasses_cache) {
  buf b = chain_bytes(0);
  ProtobufCMessage *u = unpack(&standin__pbwchain__c0__descriptor, b);
  for (int k = 0; k < 2; k++) {
    ProtobufCMessage *m = image_roundtrip(u);
    assert_packs_to(m, b);
    free(m);
  }
  protobuf_c_message_free_unpacked(u, NULL);
  free(b.p);
}
END_TEST

START_TEST(test_image_wrong_descriptor_is_schema_error) {
  owned o = unpacked_tree(0, 10);
  owned b = unpacked_batch(STANDIN__TEST3__BATCH__PICK_CHOSEN);
  void *img, *bimg;
  size_t len, blen;
  ProtobufCMessage *m = (ProtobufCMessage *)1;
  ck_assert_int_eq(pbw_image_build(o.tree, &img, &len), PBW_OK);
  ck_assert_int_eq(pbw_image_build(b.tree, &bimg, &blen), PBW_OK);
  ck_assert_int_eq(pbw_image_materialise(img, len, &standin__test__leaf__descriptor, NULL, &m),
                   PBW_E_SCHEMA);
  ck_assert_ptr_null(m);
  ck_assert_int_eq(pbw_image_materialise(bimg, blen, &standin__test3__item__descriptor, NULL, &m),
                   PBW_E_SCHEMA);
  /* after a successful (cached) binding, too */
  ck_assert_int_eq(pbw_image_materialise(img, len, &standin__test__tree__descriptor, NULL, &m),
                   PBW_OK);
  free(m);
  ck_assert_int_eq(pbw_image_materialise(img, len, &standin__test3__batch__descriptor, NULL, &m),
                   PBW_E_SCHEMA);
  ck_assert_int_eq(pbw_image_materialise(img, len, NULL, NULL, &m), PBW_E_SCHEMA);
  free(img);
  free(bimg);
  free_owned(&o);
  free_owned(&b);
}
END_TEST

START_TEST(test_image_rejects_uncapturable_trees) {
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT;
  Standin__Test__Leaf wrong = STANDIN__TEST__LEAF__INIT;
  void *img = (void *)1;
  size_t len = 1;
  br.n_tags = 2; /* a count without an array */
  ck_assert_int_eq(pbw_image_build(&br.base, &img, &len), PBW_E_UNSUPPORTED);
  ck_assert_ptr_null(img);
  ck_assert_uint_eq(len, 0);
  br.n_tags = 0;
  wrong.base.descriptor = &standin__test__branch__descriptor; /* not the field's type */
  br.best = &wrong;
  ck_assert_int_eq(pbw_image_build(&br.base, &img, &len), PBW_E_UNSUPPORTED);
  ck_assert_int_eq(pbw_image_build(NULL, &img, &len), PBW_E_UNSUPPORTED);
}
END_TEST

START_TEST(test_image_depth_limit) {
  Standin__Pbw__Node nodes[PBW_MAX_DEPTH + 1];
  void *img;
  size_t len;
  make_chain(nodes, PBW_MAX_DEPTH);
  ck_assert_int_eq(pbw_image_build(&nodes[0].base, &img, &len), PBW_OK);
  free(img);
  make_chain(nodes, PBW_MAX_DEPTH + 1);
  ck_assert_int_eq(pbw_image_build(&nodes[0].base, &img, &len), PBW_E_DEPTH);
}
END_TEST

/* ---- Damaged images ------------------------------------------------------------
 * White-box: these tests know the layout documented in pb_image.c so they
 * can damage a field and re-seal the checksum, reaching the structural
 * checks behind it. */

enum { IMG_HDR = 40, IMG_TYPE_REC = 32 };

typedef struct {
  uint8_t *p;
  size_t len;
  uint32_t n_types, n_fix, names_len;
  uint64_t block;
  size_t types, names, fix, blk;
} img_layout;

static img_layout layout_of(void *img, size_t len) {
  img_layout l = {img, len, 0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(&l.n_types, l.p + 20, 4);
  memcpy(&l.n_fix, l.p + 24, 4);
  memcpy(&l.names_len, l.p + 28, 4);
  memcpy(&l.block, l.p + 32, 8);
  l.types = IMG_HDR;
  l.names = l.types + (size_t)l.n_types * IMG_TYPE_REC;
  l.fix = l.names + l.names_len;
  l.blk = l.fix + (size_t)l.n_fix * 4;
  return l;
}

static void reseal(uint8_t *p, size_t len) {
  uint64_t sum = XXH3_64bits(p + 16, len - 16);
  memcpy(p + 8, &sum, 8);
}

/* materialise must fail with want (or, when want is 0, fail or succeed);
 * a success is freed. */
static int try_image(const void *img, size_t len, int want) {
  ProtobufCMessage *m = (ProtobufCMessage *)1;
  int rc = pbw_image_materialise(img, len, &standin__test__tree__descriptor, NULL, &m);
  if (want != 0)
    ck_assert_int_eq(rc, want);
  if (rc == PBW_OK)
    free(m);
  else
    ck_assert_ptr_null(m);
  return rc;
}

static buf small_image(owned *o) {
  buf b;
  *o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 5);
  ck_assert_int_eq(pbw_image_build(o->tree, (void **)&b.p, &b.n), PBW_OK);
  return b;
}

START_TEST(test_image_truncated_at_every_length_is_bad) {
  owned o;
  buf img = small_image(&o);
  for (size_t n = 0; n < img.n; n++) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size: valgrind sees over-reads */
    memcpy(copy, img.p, n);
    try_image(copy, n, PBW_E_BADIMAGE);
    ck_assert_uint_eq(pbw_image_alloc_size(copy, n), 0);
    ck_assert_ptr_null(pbw_image_type_name(copy, n));
    free(copy);
  }
  ck_assert_int_eq(pbw_image_materialise(NULL, 0, &standin__test__tree__descriptor, NULL,
                                         &(ProtobufCMessage *){NULL}),
                   PBW_E_BADIMAGE);
  free(img.p);
  free_owned(&o);
}
END_TEST

START_TEST(test_image_flipped_bytes_are_rejected_or_valid) {
  static const uint8_t masks[] = {0x01, 0x80, 0xff};
  owned o;
  buf img = small_image(&o);
  uint8_t *copy = malloc(img.n);
  for (size_t i = 0; i < img.n; i++) {
    for (int k = 0; k < 3; k++) {
      memcpy(copy, img.p, img.n);
      copy[i] ^= masks[k];
      /* the checksum catches every single-byte change */
      try_image(copy, img.n, PBW_E_BADIMAGE);
    }
  }
  free(copy);
  free(img.p);
  free_owned(&o);
}
END_TEST

START_TEST(test_image_resealed_damage_never_escapes_the_block) {
  owned o;
  buf img = small_image(&o);
  img_layout l = layout_of(img.p, img.n);
  uint8_t *copy = malloc(img.n);
  /* every byte of the metadata, and a sample of the block, with a valid
   * checksum: only structural checks stand between them and memory */
  for (size_t i = 16; i < img.n; i += i < l.blk ? 1 : 7) {
    for (int bit = 0; bit < 8; bit += 3) {
      memcpy(copy, img.p, img.n);
      copy[i] ^= (uint8_t)(1u << bit);
      reseal(copy, img.n);
      try_image(copy, img.n, 0);
    }
  }
  free(copy);
  free(img.p);
  free_owned(&o);
}
END_TEST

/* A tree from a damaged image, with the request req (NULL: none), piece
 * by piece or one block, through a (tracking t): an error with nothing
 * allocated, or a tree freed here, every piece once. 1 if it was built. */
static int build_damaged(const uint8_t *img, size_t n, const buf *req, int pieces, tracking *t,
                         ProtobufCAllocator *a) {
  memset(t, 0, sizeof *t);
  ProtobufCMessage *m = NULL;
  int rc = pbw_image_materialise_req(img, n, req ? req->p : NULL, req ? req->n : 0,
                                     &standin__test__tree__descriptor, a, &m, NULL, pieces);
  if (rc == PBW_OK && pieces)
    protobuf_c_message_free_unpacked(m, a);
  else if (rc == PBW_OK)
    a->free(a->allocator_data, m);
  else
    ck_assert_ptr_null(m);
  ck_assert_uint_eq(t->bad_frees, 0);
  ck_assert_uint_eq(t->n_live, 0);
  return rc == PBW_OK;
}

/* The same for a tree piece by piece without a memo, which reads the
 * image's split section and checks it as it builds: every byte of the
 * section, and of the fix-up list, damaged and resealed, gives an error
 * with nothing left allocated, or a tree whose every piece the real
 * free_unpacked frees once (what ASan and the allocator's count see). The
 * block's data is not checked by any path (a repeated field's count, say):
 * images are the builder's own. */
START_TEST(test_image_resealed_split_damage_never_escapes_the_pieces) {
  owned o;
  buf img = small_image(&o);
  img_layout l = layout_of(img.p, img.n);
  size_t sec = split_start(img.p, img.n);
  ck_assert_uint_lt(sec, img.n);
  uint8_t *copy = malloc(img.n);
  static tracking t;
  ProtobufCAllocator a = {track_alloc, track_free, &t};
  int ok = 0, bad = 0;
  for (size_t i = l.fix; i < img.n; i = i + 1 == l.blk ? sec : i + 1) {
    for (int bit = 0; bit < 8; bit += 3) {
      memcpy(copy, img.p, img.n);
      copy[i] ^= (uint8_t)(1u << bit);
      reseal(copy, img.n);
      if (build_damaged(copy, img.n, NULL, 1, &t, &a))
        ok++;
      else
        bad++;
    }
  }
  ck_assert_int_gt(bad, 0);
  free(copy);
  free(img.p);
  free_owned(&o);
}
END_TEST

/* Copy of the image with the u32 at off set to v (or the u64 when wide). */
static int damaged(const buf *img, size_t off, uint64_t v, int wide) {
  uint8_t *copy = malloc(img->n);
  memcpy(copy, img->p, img->n);
  if (wide)
    memcpy(copy + off, &v, 8);
  else
    memcpy(copy + off, &(uint32_t){(uint32_t)v}, 4);
  reseal(copy, img->n);
  int rc = try_image(copy, img->n, 0);
  free(copy);
  return rc;
}

static uint32_t fix_word(const buf *img, const img_layout *l, uint32_t j) {
  uint32_t w;
  memcpy(&w, img->p + l->fix + (size_t)j * 4, 4);
  return w;
}

/* Index of the first fix-up whose slot has kind k. */
static uint32_t first_fix_of_kind(const buf *img, const img_layout *l, unsigned k) {
  for (uint32_t j = 0; j < l->n_fix; j++) {
    uint64_t v;
    memcpy(&v, img->p + l->blk + (size_t)fix_word(img, l, j) * 8, 8);
    if (v >> 56 == k)
      return j;
  }
  ck_abort_msg("no fix-up of kind %u", k);
  return 0;
}

static uint32_t ld32_at(const uint8_t *p, size_t off) {
  uint32_t v;
  memcpy(&v, p + off, 4);
  return v;
}

static uint64_t ld64_at(const uint8_t *p, size_t off) {
  uint64_t v;
  memcpy(&v, p + off, 8);
  return v;
}

/* pbw_image_refer's search: a run whose first 64 bytes also start an
 * earlier place is found where the whole run is; a run that is not there,
 * or one a budget too small to reach, is not found; short runs too. */
START_TEST(test_image_refer_finds_runs_past_false_starts) {
  static uint8_t hay[4096], run[300];
  for (size_t i = 0; i < sizeof run; i++)
    run[i] = (uint8_t)(i * 37 + 11);
  memset(hay, 'x', sizeof hay);
  memcpy(hay + 100, run, 200); /* the same first 200 bytes, then 'x' */
  memcpy(hay + 1000, run, 64);
  memcpy(hay + 2000, run, sizeof run);
  uint64_t budget = 1 << 20;
  ck_assert_ptr_eq(pbw__find_run(hay, sizeof hay, run, sizeof run, &budget), hay + 2000);
  ck_assert_uint_lt(budget, 1 << 20);
  budget = 1 << 20;
  ck_assert_ptr_eq(pbw__find_run(hay, sizeof hay, run, 64, &budget), hay + 100);
  budget = 1 << 20;
  ck_assert_ptr_eq(pbw__find_run(hay, 2000 + sizeof run - 1, run, sizeof run, &budget), NULL);
  budget = 1 << 20;
  ck_assert_ptr_eq(pbw__find_run(hay + 101, sizeof hay - 101, run, 10, &budget), hay + 1000);
  run[299] ^= 1;
  budget = 1 << 20;
  ck_assert_ptr_eq(pbw__find_run(hay, sizeof hay, run, sizeof run, &budget), NULL);
  run[299] ^= 1;
  budget = 1500; /* reaches the false starts, not the run */
  ck_assert_ptr_eq(pbw__find_run(hay, sizeof hay, run, sizeof run, &budget), NULL);
  ck_assert_uint_eq(budget, 0);
}
END_TEST

/* The same as the split damage test for an image that refers to its
 * request (IMG_REFS): every byte of the fix-ups, the refs section and the
 * split section damaged and resealed, built one block or piece by piece
 * (the request given is the right one): an error with nothing allocated,
 * or a tree the allocator frees whole. A ref reaching past the request is
 * refused. */
START_TEST(test_image_resealed_refs_damage_never_escapes) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 100);
  buf img;
  ck_assert_int_eq(pbw_image_build(o.tree, (void **)&img.p, &img.n), PBW_OK);
  size_t full = img.n;
  ck_assert_int_eq(pbw_image_refer((void **)&img.p, &img.n, o.bytes.p, o.bytes.n), PBW_OK);
  ck_assert_uint_lt(img.n, full);
  img_layout l = layout_of(img.p, img.n);
  uint32_t nr = ld32_at(img.p, l.blk), stored = ld32_at(img.p, l.blk + 4) * 8;
  ck_assert_uint_eq(nr, 2); /* the 100-byte chunk and a leaf's 300-byte blob */
  size_t refs_end = l.blk + 8 + 16 * (size_t)nr, sec = refs_end + stored;
  /* a ref one byte past the request, or starting past it */
  uint64_t off = ld64_at(img.p, l.blk + 8), n = ld64_at(img.p, l.blk + 16);
  ck_assert_uint_le(off + n, o.bytes.n);
  uint8_t *copy = malloc(img.n);
  for (int k = 0; k < 2; k++) {
    memcpy(copy, img.p, img.n);
    uint64_t v = k ? o.bytes.n + 1 : o.bytes.n - n + 1;
    memcpy(copy + l.blk + 8, &v, 8);
    reseal(copy, img.n);
    ProtobufCMessage *m = (ProtobufCMessage *)&m;
    ck_assert_int_eq(pbw_image_materialise_req(copy, img.n, o.bytes.p, o.bytes.n,
                                               &standin__test__tree__descriptor, NULL, &m, NULL, 0),
                     PBW_E_BADIMAGE);
    ck_assert_ptr_null(m);
  }
  static tracking t;
  ProtobufCAllocator a = {track_alloc, track_free, &t};
  /* the pieces referred to start where the image's bytes end: one a word
   * sooner would be filled over the end of the piece before it */
  uint32_t n_split = ld32_at(img.p, sec), at = sec + 8 + 4 * (n_split - nr);
  ck_assert_uint_eq(ld32_at(img.p, at) * 8, stored);
  for (int pieces = 0; pieces < 2; pieces++) {
    memcpy(copy, img.p, img.n);
    uint32_t moved = stored / 8 - 1;
    memcpy(copy + at, &moved, 4);
    reseal(copy, img.n);
    ProtobufCMessage *m = (ProtobufCMessage *)&m;
    ck_assert_int_eq(pbw_image_materialise_req(copy, img.n, o.bytes.p, o.bytes.n,
                                               &standin__test__tree__descriptor, &a, &m, NULL,
                                               pieces),
                     PBW_E_BADIMAGE);
    ck_assert_ptr_null(m);
  }
  /* a block grown past what the refs fill (the last piece's padding more
   * than 8 bytes) is refused before anything is allocated: a doctored
   * block size cannot make a build allocate more than image and request */
  for (int k = 0; k < 2; k++) {
    for (int pieces = 0; pieces < 2; pieces++) {
      memcpy(copy, img.p, img.n);
      uint64_t grown = l.block + (k ? (uint64_t)1 << 34 : 16);
      memcpy(copy + 32, &grown, 8);
      reseal(copy, img.n);
      ck_assert(!build_damaged(copy, img.n, &o.bytes, pieces, &t, &a));
      ck_assert_uint_eq(t.allocs, 0);
    }
  }
  int ok = 0, bad = 0;
  for (size_t i = l.fix; i < img.n; i = i + 1 == refs_end ? sec : i + 1) {
    for (int bit = 0; bit < 8; bit += 3) {
      for (int pieces = 0; pieces < 2; pieces++) {
        memcpy(copy, img.p, img.n);
        copy[i] ^= (uint8_t)(1u << bit);
        reseal(copy, img.n);
        if (build_damaged(copy, img.n, &o.bytes, pieces, &t, &a))
          ok++;
        else
          bad++;
      }
    }
  }
  ck_assert_int_gt(bad, 0);
  ck_assert_int_gt(ok, 0);
  free(copy);
  free(img.p);
  free_owned(&o);
}
END_TEST

/* pieces from copy (resealed here), which must be refused */
static void pieces_refused(uint8_t *copy, size_t len) {
  static tracking t;
  memset(&t, 0, sizeof t);
  ProtobufCAllocator a = {track_alloc, track_free, &t};
  ProtobufCMessage *m = NULL;
  reseal(copy, len);
  ck_assert_int_eq(
      pbw_image_materialise_pieces(copy, len, &standin__test__tree__descriptor, &a, &m, NULL),
      PBW_E_BADIMAGE);
  ck_assert_ptr_null(m);
  ck_assert_uint_eq(t.n_live, 0);
}

/* Two damages no single byte makes: two internal pointers naming one piece
 * (free_unpacked would free it twice), and a piece boundary moved into a
 * message's struct (the program would read past its allocation). */
START_TEST(test_image_split_section_checks) {
  owned o;
  buf img = small_image(&o);
  img_layout l = layout_of(img.p, img.n);
  size_t sec = split_start(img.p, img.n);
  uint32_t n = ld32_at(img.p, sec);
  size_t starts = sec + 8, targets = starts + (size_t)n * 4;
  uint32_t ints[2], k = 0, t_msg = 0;
  for (uint32_t j = 0; j < l.n_fix && k < 2; j++)
    if (ld64_at(img.p, l.blk + (size_t)fix_word(&img, &l, j) * 8) >> 56 == 1)
      ints[k++] = j;
  ck_assert_uint_eq(k, 2);
  uint8_t *copy = malloc(img.n);
  /* the first internal pointer made a copy of the second */
  memcpy(copy, img.p, img.n);
  size_t s0 = l.blk + (size_t)fix_word(&img, &l, ints[0]) * 8;
  size_t s1 = l.blk + (size_t)fix_word(&img, &l, ints[1]) * 8;
  memcpy(copy + s0, img.p + s1, 8);
  memcpy(copy + targets, img.p + targets + 4, 4);
  pieces_refused(copy, img.n);
  /* a piece that follows a message starts 8 bytes sooner, its pointer too */
  for (uint32_t t = 1; t < n && !t_msg; t++)
    if (ld64_at(img.p, l.blk + (size_t)ld32_at(img.p, starts + (size_t)(t - 1) * 4) * 8) >> 56 == 2)
      t_msg = t;
  ck_assert_uint_gt(t_msg, 0);
  memcpy(copy, img.p, img.n);
  uint32_t w = ld32_at(img.p, starts + (size_t)t_msg * 4) - 1;
  memcpy(copy + starts + (size_t)t_msg * 4, &w, 4);
  for (uint32_t j = 0, i = 0; j < l.n_fix; j++) {
    size_t slot = l.blk + (size_t)fix_word(&img, &l, j) * 8;
    if (ld64_at(img.p, slot) >> 56 != 1)
      continue;
    if (ld32_at(img.p, targets + (size_t)i++ * 4) == t_msg) {
      uint64_t v = (1ull << 56) | (uint64_t)w * 8;
      memcpy(copy + slot, &v, 8);
    }
  }
  pieces_refused(copy, img.n);
  /* without the section (split here): a pointer to a message moved 8
   * bytes into it makes a piece start there, which would cut the
   * message's struct short; refused, with a memo (the kept plan) too */
  uint32_t j_msg = l.n_fix;
  for (uint32_t j = 0; j < l.n_fix && j_msg == l.n_fix; j++) {
    uint64_t v = ld64_at(img.p, l.blk + (size_t)fix_word(&img, &l, j) * 8);
    if (v >> 56 == 1 && ld64_at(img.p, l.blk + (v & 0xffffffffffffffull)) >> 56 == 2)
      j_msg = j;
  }
  ck_assert_uint_lt(j_msg, l.n_fix);
  memcpy(copy, img.p, sec);
  memset(copy + 16, 0, 4);
  size_t slot = l.blk + (size_t)fix_word(&img, &l, j_msg) * 8;
  uint64_t moved = ld64_at(img.p, slot) + 8;
  memcpy(copy + slot, &moved, 8);
  pieces_refused(copy, sec);
  static tracking tr;
  ProtobufCAllocator a = {track_alloc, track_free, &tr};
  pbw_image_memo memo = {0};
  ProtobufCMessage *m = NULL;
  ck_assert_int_eq(
      pbw_image_materialise_pieces(copy, sec, &standin__test__tree__descriptor, &a, &m, &memo),
      PBW_E_BADIMAGE);
  ck_assert_ptr_null(m);
  ck_assert_uint_eq(tr.n_live, 0);
  free(copy);
  free(img.p);
  free_owned(&o);
}
END_TEST

/* Tree variant i of the rich tree: other values in its scalars, a title of
 * another length that fits the same piece, so that its image has the
 * shape of every other variant's (pb_image.c "Shapes") while its bytes,
 * and the places of its long bytes in its request, differ. */
static owned unpacked_variant(int i, size_t big) {
  tree_store s;
  owned o = {0};
  make_tree(&s, STANDIN__TEST__TREE__PAYLOAD_LEAF, big);
  s.tree.title = i % 2 ? "forestA" : "forest";
  s.br[2].id = 100 + i;
  s.values[1] = i;
  s.leaf[0].weight = i / 4.0;
  o.bytes = pack(&s.tree.base);
  o.tree = unpack(&standin__test__tree__descriptor, o.bytes);
  free(s.big);
  return o;
}

/* Variant i's image (referring to its request when refs), built piece by
 * piece without a memo, as replay builds a request seen for the first
 * time: the result code, and how many trees shapes built meanwhile. When
 * the build succeeds the tree must pack to the variant's bytes and free
 * whole. damage 1: the slot of the image's second internal pointer copied
 * over its first (two pointers naming one piece); 2 (without refs): its
 * split section's first two internal pointers' pieces swapped, a section
 * its fix-ups do not agree with; resealed. */
static int build_variant(int i, int refs, int damage, unsigned long *by_shape) {
  owned o = unpacked_variant(i, refs ? 200 : 5);
  buf img;
  ck_assert_int_eq(pbw_image_build(o.tree, (void **)&img.p, &img.n), PBW_OK);
  if (refs)
    ck_assert_int_eq(pbw_image_refer((void **)&img.p, &img.n, o.bytes.p, o.bytes.n), PBW_OK);
  if (damage == 2) {
    size_t targets =
        split_start(img.p, img.n) + 8 + (size_t)ld32_at(img.p, split_start(img.p, img.n)) * 4;
    uint8_t t0[4];
    memcpy(t0, img.p + targets, 4);
    memmove(img.p + targets, img.p + targets + 4, 4);
    memcpy(img.p + targets + 4, t0, 4);
    reseal(img.p, img.n);
  } else if (damage) {
    img_layout l = layout_of(img.p, img.n);
    uint32_t ints[2], k = 0;
    for (uint32_t j = 0; j < l.n_fix && k < 2; j++)
      if (ld64_at(img.p, l.blk + (size_t)fix_word(&img, &l, j) * 8) >> 56 == 1)
        ints[k++] = j;
    ck_assert_uint_eq(k, 2);
    memcpy(img.p + l.blk + (size_t)fix_word(&img, &l, ints[0]) * 8,
           img.p + l.blk + (size_t)fix_word(&img, &l, ints[1]) * 8, 8);
    reseal(img.p, img.n);
  }
  static tracking t;
  memset(&t, 0, sizeof t);
  ProtobufCAllocator a = {track_alloc, track_free, &t};
  ProtobufCMessage *m = NULL;
  unsigned long before = pbw__shape_builds;
  int rc = pbw_image_materialise_req(img.p, img.n, o.bytes.p, o.bytes.n,
                                     &standin__test__tree__descriptor, &a, &m, NULL, 1);
  *by_shape = pbw__shape_builds - before;
  if (rc == PBW_OK) {
    assert_packs_to(m, o.bytes);
    protobuf_c_message_free_unpacked(m, &a);
  } else {
    ck_assert_ptr_null(m);
  }
  ck_assert_uint_eq(t.n_live, 0);
  ck_assert_uint_eq(t.bad_frees, 0);
  free(img.p);
  free_owned(&o);
  return rc;
}

/* A tree from an image seen for the first time is built from the plan of
 * its shape from the third image of that shape on (the first is built
 * alone, the second makes the plan), and is each image's own tree: its
 * values, its strings and the request bytes it refers to. An image whose
 * slots differ from the shape's is not built from it (and is refused, as
 * a damaged image is), a shape whose split section its fix-ups do not
 * agree with makes no plan (refused, every time), and a library unloaded
 * retires every shape. */
START_TEST(test_image_shapes_build_alike_images) {
  unsigned long by_shape;
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(build_variant(i, 0, 2, &by_shape), PBW_E_BADIMAGE);
    ck_assert_uint_eq(by_shape, 0);
  }
  for (int refs = 0; refs < 2; refs++) {
    pbw_image_types_changed(); /* shapes of the tests before, in this process */
    for (int i = 0; i < 6; i++) {
      ck_assert_int_eq(build_variant(i, refs, 0, &by_shape), PBW_OK);
      ck_assert_uint_eq(by_shape, i >= 2);
    }
    ck_assert_int_eq(build_variant(6, refs, 1, &by_shape), PBW_E_BADIMAGE);
    ck_assert_uint_eq(by_shape, 0);
    ck_assert_int_eq(build_variant(7, refs, 0, &by_shape), PBW_OK);
    ck_assert_uint_eq(by_shape, 1);
    pbw_image_types_changed();
    for (int i = 8; i < 11; i++) {
      ck_assert_int_eq(build_variant(i, refs, 0, &by_shape), PBW_OK);
      ck_assert_uint_eq(by_shape, i >= 10);
    }
  }
}
END_TEST

START_TEST(test_image_structural_checks) {
  owned o;
  buf img = small_image(&o);
  img_layout l = layout_of(img.p, img.n);
  uint32_t last = l.n_fix - 1;
  size_t last_fix = l.fix + (size_t)last * 4;
  uint32_t j_int = first_fix_of_kind(&img, &l, 1);
  uint32_t j_str = first_fix_of_kind(&img, &l, 3);
  size_t slot_int = l.blk + (size_t)fix_word(&img, &l, j_int) * 8;
  size_t slot_str = l.blk + (size_t)fix_word(&img, &l, j_str) * 8;
  ck_assert_int_eq(damaged(&img, 4, 2, 0), PBW_E_BADIMAGE);            /* version */
  ck_assert_int_eq(damaged(&img, 16, 2, 0), PBW_E_BADIMAGE);           /* flags */
  ck_assert_int_eq(damaged(&img, 16, 0, 0), PBW_E_BADIMAGE); /* a section not announced */
  ck_assert_int_eq(damaged(&img, 32, l.block + 8, 1), PBW_E_BADIMAGE); /* block size */
  ck_assert_int_eq(damaged(&img, last_fix, (uint32_t)(l.block / 8), 0), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, last_fix, fix_word(&img, &l, last - 1), 0), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, l.fix, 1, 0), PBW_E_BADIMAGE); /* root first */
  ck_assert_int_eq(damaged(&img, slot_int, (1ull << 56) | l.block, 1), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, slot_int, (1ull << 56) | 4, 1), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, slot_int, 9ull << 56, 1), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, slot_int, (2ull << 56) | l.n_types, 1), PBW_E_BADIMAGE);
  ck_assert_int_eq(damaged(&img, slot_int, (5ull << 56) | 1, 1), PBW_E_BADIMAGE);
  /* a string default re-pointed at field 0 of the root type (title: no default) */
  ck_assert_int_eq(damaged(&img, slot_str, 3ull << 56, 1), PBW_E_SCHEMA);
  ck_assert_int_eq(damaged(&img, slot_str, (3ull << 56) | 0xffffff, 1), PBW_E_SCHEMA);
  ck_assert_int_eq(damaged(&img, l.types + IMG_TYPE_REC, 1, 0), PBW_E_BADIMAGE); /* parent */
  ck_assert_int_eq(damaged(&img, l.types + IMG_TYPE_REC + 4, 999, 0), PBW_E_SCHEMA);
  ck_assert_int_eq(damaged(&img, l.types + 12, 1000, 0), PBW_E_BADIMAGE); /* name length */
  ck_assert_int_eq(damaged(&img, l.types + 16, 8, 1), PBW_E_SCHEMA);      /* sizeof */
  ck_assert_int_eq(damaged(&img, l.types + 24, 8, 1), PBW_E_SCHEMA);      /* layout */
  ck_assert_int_eq(damaged(&img, l.names, 0x58585858, 0), PBW_E_SCHEMA);  /* name */
  free(img.p);
  free_owned(&o);
}
END_TEST

/* ---- Fingerprints ---------------------------------------------------------------- */

/* Fingerprints are stored in traces: a change to the hashed stream would
 * make every recorded pack request miss at replay. This pins the stream. */
START_TEST(test_fp_golden_value) {
  golden_tree g;
  golden_tree_init(&g);
  uint8_t fp[16];
  char hex[33];
  fingerprint(&g.t.base, fp);
  for (int i = 0; i < 16; i++)
    snprintf(hex + 2 * i, 3, "%02x", fp[i]);
  ck_assert_str_eq(hex, GOLDEN_TREE_FP);
}
END_TEST

/* The memo gives the fingerprint of the tree as it is now: the same tree
 * again gets the kept one, a tree changed in place (a program that sizes,
 * edits, then packs) its own; only keep stores, and only a stream of one
 * hashing chunk is kept (a tree with a 5,000-byte string is not). */
START_TEST(test_fp_memo_is_the_fingerprint_of_the_tree_now) {
  static pbw_fp_memo memo;
  tree_store a;
  uint8_t want[16], got[16];
  memset(&memo, 0, sizeof memo);
  make_tree(&a, STANDIN__TEST__TREE__PAYLOAD_TEXT, 5000);
  ProtobufCMessage *m = &a.tree.base;
  fingerprint(m, want);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 0), PBW_OK);
  ck_assert_ptr_null(memo.m); /* not kept */
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 1), PBW_OK);
  ck_assert_ptr_eq(memo.m, m);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 0), PBW_OK);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  /* edited in place: a string, then a scalar, each its own fingerprint */
  a.tree.text = "texT";
  fingerprint(m, want);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 0), PBW_OK);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  uint8_t old[16];
  memcpy(old, want, 16);
  a.tree.ratio += 1;
  fingerprint(m, want);
  ck_assert_int_ne(memcmp(old, want, 16), 0);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 1), PBW_OK);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  ck_assert_int_eq(memcmp(memo.fp, want, 16), 0);
  /* another tree at another address never takes the memo's */
  tree_store b;
  make_tree(&b, STANDIN__TEST__TREE__PAYLOAD_TEXT, 5000);
  fingerprint(&b.tree.base, want);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(&b.tree.base, got, &memo, 0), PBW_OK);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  free(a.big);
  free(b.big);
  /* a stream past one chunk is not kept: twelve 400-byte chunks are
   * hashed inline (under 512 bytes each), 4.9 KB of stream */
  static uint8_t bytes[12][400];
  ProtobufCBinaryData chunks[12];
  for (int i = 0; i < 12; i++) {
    memset(bytes[i], 'a' + i, sizeof bytes[i]);
    chunks[i] = (ProtobufCBinaryData){sizeof bytes[i], bytes[i]};
  }
  make_tree(&a, STANDIN__TEST__TREE__PAYLOAD_TEXT, 10);
  a.tree.n_chunks = 12;
  a.tree.chunks = chunks;
  m = &a.tree.base;
  fingerprint(m, want);
  memo.m = NULL;
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, got, &memo, 1), PBW_OK);
  ck_assert_int_eq(memcmp(got, want, 16), 0);
  ck_assert_ptr_null(memo.m);
  free(a.big);
}
END_TEST

START_TEST(test_fp_equal_trees_give_equal_fingerprints) {
  tree_store a, b;
  uint8_t fa[16], fb[16], fu[16];
  make_tree(&a, STANDIN__TEST__TREE__PAYLOAD_LEAF, 5000);
  make_tree(&b, STANDIN__TEST__TREE__PAYLOAD_LEAF, 5000);
  fingerprint(&a.tree.base, fa);
  fingerprint(&b.tree.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  ck_assert(matches(&a.tree.base, &b.tree.base));
  /* unpacking what pack wrote gives a tree that packs the same */
  buf bytes = pack(&a.tree.base);
  ProtobufCMessage *u = unpack(&standin__test__tree__descriptor, bytes);
  fingerprint(u, fu);
  ck_assert_int_eq(memcmp(fa, fu, 16), 0);
  ck_assert(matches(u, &a.tree.base)); /* what the replay database keeps */
  protobuf_c_message_free_unpacked(u, NULL);
  free(bytes.p);
  free(a.big);
  free(b.big);
}
END_TEST

/* Apply (undo = 0) or revert (undo = 1) one small change k to tree t. */
static int mutate(Standin__Test__Tree *t, int k, int undo) {
  static union {
    uint64_t u;
    double d;
    float f;
    void *p;
    size_t n;
  } save;
  Standin__Test__Branch *tr = t->trunk;
  Standin__Test__Leaf *l0 = tr->leaves[0];
  switch (k) {
  case 0: t->title[0] ^= 1; return 1;
  case 1: tr->id += undo ? -1 : 1; return 1;
  case 2: l0->values[1] ^= 1; return 1;
  case 3: tr->n_leaves += undo ? 1 : -1; return 1;
  case 4: l0->blob.data[100] ^= 0x40; return 1;
  case 5: l0->has_weight = undo; return 1;
  case 6: tr->color = undo ? STANDIN__TEST__COLOR__BLUE : STANDIN__TEST__COLOR__GREEN; return 1;
  case 7:
    t->payload_case =
        undo ? STANDIN__TEST__TREE__PAYLOAD_LEAF : STANDIN__TEST__TREE__PAYLOAD__NOT_SET;
    return 1;
  case 8: t->leaf_map[0]->key ^= 1; return 1;
  case 9: t->counters[1]->value ^= 1; return 1;
  case 10: t->packed_ids[3] ^= 1; return 1;
  case 11: t->n_unpacked_ids += undo ? 1 : -1; return 1;
  case 12: t->has_flag = undo; return 1;
  case 13:
    if (!undo)
      save.f = t->ratio;
    t->ratio = undo ? save.f : 0.5000001f;
    return 1;
  case 14: t->chunks[0].data[0] ^= 1; return 1;
  case 15: t->motto = undo ? standin__test__tree__motto__default_value : "grow"; return 1;
  case 16: t->base.unknown_fields[0].data[0] ^= 1; return 1;
  case 17: t->base.n_unknown_fields += undo ? 1 : -1; return 1;
  case 18:
    if (!undo)
      save.p = tr->best->name;
    tr->best->name = undo ? save.p : NULL;
    return 1;
  case 19: tr->tags[0][0] ^= 1; return 1;
  case 20: tr->leaves[1]->has_weight = !undo; return 1; /* the default value, present */
  case 21: t->leaf->name[0] ^= 1; return 1;
  case 22: t->leaf_map[1]->has_key = undo; return 1;
  case 23: t->chunks[2].len += undo ? 1 : -1; return 1;
  default: return 0;
  }
}

START_TEST(test_fp_any_single_change_changes_fingerprint) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 300);
  Standin__Test__Tree *t = (Standin__Test__Tree *)o.tree;
  uint8_t ref[16], fp[16], *rs;
  fingerprint(o.tree, ref);
  size_t rlen = stream_of(o.tree, &rs);
  uint8_t *xs; /* the stream as a replay database keeps it, referring into rs */
  size_t xlen = ref_stream_of(o.tree, rs, rlen, &xs);
  ck_assert_uint_lt(xlen, rlen); /* the payload leaf's bytes are referred to */
  for (int k = 0; k < 24; k++) {
    ck_assert(mutate(t, k, 0));
    fingerprint(o.tree, fp);
    ck_assert_msg(memcmp(ref, fp, 16) != 0, "change %d kept the fingerprint", k);
    ck_assert_msg(!pbw_tree_matches(o.tree, rs, rlen, NULL, 0), "change %d kept the stream", k);
    ck_assert_msg(!pbw_tree_matches(o.tree, xs, xlen, rs, rlen), "change %d kept the stream", k);
    mutate(t, k, 1);
    fingerprint(o.tree, fp);
    ck_assert_msg(memcmp(ref, fp, 16) == 0, "undoing change %d did not restore it", k);
    ck_assert(pbw_tree_matches(o.tree, rs, rlen, NULL, 0));
    ck_assert(pbw_tree_matches(o.tree, xs, xlen, rs, rlen));
  }
  free(xs);
  free(rs);
  free_owned(&o);
}
END_TEST

/* A snapshot holds while the tree is unchanged, and stops holding after
 * any change that changes the fingerprint (every change mutate makes),
 * holding again once the change is undone. */
START_TEST(test_snap_holds_until_any_change) {
  static pbw_snap snap;
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 300);
  Standin__Test__Tree *t = (Standin__Test__Tree *)o.tree;
  ck_assert_int_eq(pbw_snap_take(o.tree, &snap), PBW_OK);
  ck_assert_ptr_eq(snap.m, o.tree);
  ck_assert(pbw_snap_holds(&snap, o.tree));
  for (int k = 0; k < 24; k++) {
    ck_assert(mutate(t, k, 0));
    ck_assert_msg(!pbw_snap_holds(&snap, o.tree), "change %d kept the snapshot", k);
    mutate(t, k, 1);
    ck_assert_msg(pbw_snap_holds(&snap, o.tree), "undoing change %d did not restore it", k);
  }
  /* another tree, even an equal one, is not the snapshot's */
  tree_store b;
  make_tree(&b, STANDIN__TEST__TREE__PAYLOAD_LEAF, 300);
  ck_assert(!pbw_snap_holds(&snap, &b.tree.base));
  ck_assert(!pbw_snap_holds(&snap, NULL));
  /* a string shortened in place is read to its new end only */
  char title[] = "forest";
  b.tree.title = title;
  ck_assert_int_eq(pbw_snap_take(&b.tree.base, &snap), PBW_OK);
  title[3] = '\0';
  ck_assert(!pbw_snap_holds(&snap, &b.tree.base));
  title[3] = 'e';
  ck_assert(pbw_snap_holds(&snap, &b.tree.base));
  /* a sub-message replaced by one of another type at the same address */
  Standin__Test__Leaf *best = b.tree.trunk->best;
  ck_assert_ptr_nonnull(best);
  best->base.descriptor = &standin__test__branch__descriptor;
  ck_assert(!pbw_snap_holds(&snap, &b.tree.base));
  best->base.descriptor = &standin__test__leaf__descriptor;
  ck_assert(pbw_snap_holds(&snap, &b.tree.base));
  /* a tree whose bytes do not fit is not kept */
  free(b.big);
  make_tree(&b, STANDIN__TEST__TREE__PAYLOAD_LEAF, PBW_SNAP_BYTES);
  ck_assert_int_eq(pbw_snap_take(&b.tree.base, &snap), PBW_E_NOMEM);
  ck_assert_ptr_null(snap.m);
  ck_assert(!pbw_snap_holds(&snap, &b.tree.base));
  free(b.big);
  free_owned(&o);
}
END_TEST

/* proto3: an empty string is left out by pack, but filling it in place
 * changes what pack writes, so the snapshot keeps its first byte. */
START_TEST(test_snap_keeps_proto3_strings_pack_leaves_out) {
  static pbw_snap snap;
  Standin__Test3__Item x = STANDIN__TEST3__ITEM__INIT;
  char key[4] = "";
  x.key = key;
  ck_assert_int_eq(pbw_snap_take(&x.base, &snap), PBW_OK);
  ck_assert(pbw_snap_holds(&snap, &x.base));
  key[0] = 'k';
  ck_assert(!pbw_snap_holds(&snap, &x.base));
  key[0] = '\0';
  ck_assert(pbw_snap_holds(&snap, &x.base));
  x.value = (ProtobufCBinaryData){2, (uint8_t *)"ab"};
  ck_assert(!pbw_snap_holds(&snap, &x.base));
}
END_TEST

/* The snapshot a size's walk takes with its fingerprint is pbw_snap_take's,
 * record for record, and the fingerprint is pbw_fingerprint_tree's: on
 * trees with every kind of field, unknown fields, proto3's empty strings
 * (kept though pack leaves them out), and one whose bytes do not fit. */
static void check_snap_walk(const ProtobufCMessage *m, int fits) {
  static pbw_snap alone, walked;
  static pbw_fp_memo memo;
  uint8_t ref[16], fp[16];
  ck_assert_int_eq(pbw_fingerprint_tree(m, ref, NULL), PBW_OK);
  int rc = pbw_snap_take(m, &alone);
  memset(&walked, 0xA5, sizeof walked);
  memo.m = NULL;
  ck_assert_int_eq(pbw_fingerprint_tree_snap(m, fp, &memo, &walked), PBW_OK);
  ck_assert(memcmp(ref, fp, 16) == 0);
  ck_assert_int_eq(rc == PBW_OK, fits);
  if (!fits) {
    ck_assert_ptr_null(walked.m);
    return;
  }
  ck_assert_ptr_eq(walked.m, m);
  ck_assert_uint_eq(walked.n, alone.n);
  /* each record (address, length, kind) and its bytes; not the padding
   * to 8 bytes after them, which neither writes */
  for (size_t o = 0; o < alone.n;) {
    uint32_t len;
    memcpy(&len, alone.rec + o + sizeof(void *), 4);
    ck_assert(memcmp(walked.rec + o, alone.rec + o, sizeof(void *) + 8 + len) == 0);
    o += sizeof(void *) + 8 + ((len + 7) & ~(size_t)7);
  }
  ck_assert(pbw_snap_holds(&walked, m));
  /* the memo holds the stream: the next walk of the same tree gets the
   * fingerprint from it */
  ck_assert_ptr_eq(memo.m, m);
  ck_assert_int_eq(pbw_fingerprint_tree_memo(m, fp, &memo, 0), PBW_OK);
  ck_assert(memcmp(ref, fp, 16) == 0);
}

/* check_snap_walk of an unpacked tree that fits, which is then freed. */
static void check_snap_walk_owned(owned o) {
  check_snap_walk(o.tree, 1);
  free_owned(&o);
}

START_TEST(test_snap_walk_is_snap_take) {
  int payloads[] = {STANDIN__TEST__TREE__PAYLOAD__NOT_SET, STANDIN__TEST__TREE__PAYLOAD_TEXT,
                    STANDIN__TEST__TREE__PAYLOAD_LEAF};
  for (size_t i = 0; i < sizeof payloads / sizeof *payloads; i++) {
    owned o = unpacked_tree(payloads[i], 300); /* unknown fields too */
    ck_assert_uint_gt(o.tree->n_unknown_fields, 0);
    check_snap_walk(o.tree, 1);
    free_owned(&o);
    tree_store b; /* built by hand: NULL and default pointers */
    make_tree(&b, payloads[i], 40);
    check_snap_walk(&b.tree.base, 1);
    free(b.big);
  }
  for (int v = 0; v < 4; v++)
    check_snap_walk_owned(unpacked_variant(v, 5));
  check_snap_walk_owned(unpacked_batch(STANDIN__TEST3__BATCH__PICK__NOT_SET));
  check_snap_walk_owned(unpacked_batch(STANDIN__TEST3__BATCH__PICK_CHOSEN));
  check_snap_walk_owned(unpacked_batch(STANDIN__TEST3__BATCH__PICK_LABEL));
  check_snap_walk_owned(unpacked_scalars(STANDIN__PBW__SCALARS__CHOICE_O_STR));
  check_snap_walk_owned(unpacked_scalars(STANDIN__PBW__SCALARS__CHOICE_O_BYT));
  check_snap_walk_owned(unpacked_scalars(STANDIN__PBW__SCALARS__CHOICE_O_DB));
  check_snap_walk_owned(unpacked_all3(0));
  check_snap_walk_owned(unpacked_all3(1));
  Standin__Test3__Item x = STANDIN__TEST3__ITEM__INIT;
  char key[4] = "";
  x.key = key;
  check_snap_walk(&x.base, 1);
  tree_store big;
  make_tree(&big, STANDIN__TEST__TREE__PAYLOAD_LEAF, PBW_SNAP_BYTES);
  check_snap_walk(&big.tree.base, 0);
  free(big.big);
}
END_TEST

/* Bytes with a length and no data: get_packed_size counts the length (pack
 * would crash). Hashed as empty bytes, a size call was answered with the
 * size of a tree without them. */
START_TEST(test_fp_bytes_without_data_are_not_empty_bytes) {
  Standin__Pbw__Scalars s;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT;
  make_scalars(&s, &node, STANDIN__PBW__SCALARS__CHOICE_O_BYT);
  uint8_t empty[16], five[16], six[16];
  s.byt = (ProtobufCBinaryData){0, NULL};
  fingerprint(&s.base, empty);
  s.byt = (ProtobufCBinaryData){5, NULL};
  ck_assert_int_eq(pbw_fingerprint_tree(&s.base, five, NULL), PBW_OK);
  s.byt = (ProtobufCBinaryData){6, NULL};
  ck_assert_int_eq(pbw_fingerprint_tree(&s.base, six, NULL), PBW_OK);
  ck_assert(memcmp(empty, five, 16) != 0);
  ck_assert(memcmp(five, six, 16) != 0);
}
END_TEST

/* Streams longer than the hash buffer are hashed chunk by chunk: a change
 * in any chunk, first or last, must still show. */
START_TEST(test_fp_long_streams_depend_on_every_chunk) {
  enum { N = 3000 };
  static char text[N][8];
  static char *tags[N];
  Standin__Test__Branch a = STANDIN__TEST__BRANCH__INIT, b = STANDIN__TEST__BRANCH__INIT;
  uint8_t fa[16], fb[16];
  for (int i = 0; i < N; i++) {
    snprintf(text[i], sizeof text[i], "t%d", i);
    tags[i] = text[i];
  }
  a.n_tags = b.n_tags = N;
  a.tags = b.tags = tags;
  fingerprint(&a.base, fa);
  fingerprint(&b.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  static const int at[] = {0, N / 2, N - 1};
  uint8_t *as; /* a's stream as it is now: a and b share their tags */
  size_t alen = stream_of(&a.base, &as);
  for (int k = 0; k < 3; k++) {
    text[at[k]][1] ^= 1;
    fingerprint(&b.base, fb);
    ck_assert_int_ne(memcmp(fa, fb, 16), 0);
    ck_assert(!pbw_tree_matches(&b.base, as, alen, NULL, 0));
    text[at[k]][1] ^= 1;
  }
  free(as);
  b.n_tags = N - 1;
  fingerprint(&b.base, fb);
  ck_assert_int_ne(memcmp(fa, fb, 16), 0);
}
END_TEST

START_TEST(test_fp_follows_what_pack_writes) {
  Standin__Test__Leaf a = STANDIN__TEST__LEAF__INIT, b = STANDIN__TEST__LEAF__INIT;
  Standin__Test3__Item x = STANDIN__TEST3__ITEM__INIT, y = STANDIN__TEST3__ITEM__INIT;
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT, u = STANDIN__TEST__TREE__INIT;
  uint8_t fa[16], fb[16];
  /* the default pointer and NULL both mean "absent" to pack */
  b.name = NULL;
  b.weight = 99; /* has_weight = 0: not written */
  fingerprint(&a.base, fa);
  fingerprint(&b.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  ck_assert(matches(&a.base, &b.base));
  /* proto3: "" from anywhere, and zero, are not written */
  y.key = "";
  y.value.data = (uint8_t *)"junk";
  fingerprint(&x.base, fa);
  fingerprint(&y.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  ck_assert(matches(&y.base, &x.base));
  /* a oneof case without a matching member, or a NULL message member */
  t.title = u.title = "t";
  u.payload_case = STANDIN__TEST__TREE__PAYLOAD_LEAF;
  fingerprint(&t.base, fa);
  fingerprint(&u.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  u.payload_case = 99;
  fingerprint(&u.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  ck_assert(matches(&u.base, &t.base));
  /* the type is part of the fingerprint: two empty messages differ */
  fingerprint(&a.base, fa);
  fingerprint(&x.base, fb);
  ck_assert_int_ne(memcmp(fa, fb, 16), 0);
  ck_assert(!matches(&a.base, &x.base));
}
END_TEST

START_TEST(test_fp_depth_limit) {
  Standin__Pbw__Node nodes[PBW_MAX_DEPTH + 1];
  uint8_t fp[16];
  pbw_stats st;
  make_chain(nodes, PBW_MAX_DEPTH);
  ck_assert_int_eq(pbw_fingerprint_tree(&nodes[0].base, fp, &st), PBW_OK);
  ck_assert_uint_eq(st.max_depth, PBW_MAX_DEPTH);
  make_chain(nodes, PBW_MAX_DEPTH + 1);
  ck_assert_int_eq(pbw_fingerprint_tree(&nodes[0].base, fp, NULL), PBW_E_DEPTH);
  ck_assert_int_eq(pbw_tree_stats(&nodes[0].base, &st), PBW_E_DEPTH);
}
END_TEST

START_TEST(test_fp_bytes_depends_on_type_and_every_byte) {
  uint8_t data[100], a[16], b[16];
  for (int i = 0; i < 100; i++)
    data[i] = (uint8_t)i;
  pbw_fingerprint_bytes(&standin__test__leaf__descriptor, data, 100, a);
  pbw_fingerprint_bytes(&standin__test__leaf__descriptor, data, 100, b);
  ck_assert_int_eq(memcmp(a, b, 16), 0);
  pbw_fingerprint_bytes(&standin__test__branch__descriptor, data, 100, b);
  ck_assert_int_ne(memcmp(a, b, 16), 0);
  pbw_fingerprint_bytes(&standin__test__leaf__descriptor, data, 99, b);
  ck_assert_int_ne(memcmp(a, b, 16), 0);
  data[57] ^= 4;
  pbw_fingerprint_bytes(&standin__test__leaf__descriptor, data, 100, b);
  ck_assert_int_ne(memcmp(a, b, 16), 0);
}
END_TEST

/* The trace writer hashes an unpack's bytes once, for its blob and its
 * fingerprint: pbw_hash_bytes must be XXH3-128 exactly (the blob dedup
 * hash) on both sides of the AVX2 threshold, and the fingerprint from it
 * pbw_fingerprint_bytes exactly. */
START_TEST(test_fp_from_hash_is_fp_bytes) {
  static uint8_t data[5000];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 7 + i / 251);
  static const size_t lens[] = {0, 1, 16, 129, 240, 241, 1000, 4999};
  for (unsigned i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    uint64_t h[2];
    uint8_t a[16], b[16];
    pbw_hash_bytes(data, lens[i], h);
    XXH128_hash_t x = XXH3_128bits(data, lens[i]);
    ck_assert_uint_eq(h[0], x.low64);
    ck_assert_uint_eq(h[1], x.high64);
    pbw_fingerprint_bytes(&standin__test__leaf__descriptor, data, lens[i], a);
    pbw_fingerprint_hashed(&standin__test__leaf__descriptor, h, lens[i], b);
    ck_assert_int_eq(memcmp(a, b, 16), 0);
  }
}
END_TEST

/* The AVX2 hash must hand back the YMM registers' upper halves clean: while
 * they are dirty, every SSE instruction the program runs after it gains a
 * false dependency (an ImageMagick resize after a replayed decode ran 2.3x
 * as long). XGETBV with ECX=1 reads which state components are in use;
 * bit 2 is the upper halves of YMM0-15, bit 6 those of ZMM0-15. */
static int can_read_xinuse(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d))
    return 0;
  return (a & 4) != 0 && __builtin_cpu_supports("avx2");
}

static uint64_t xinuse(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return (uint64_t)hi << 32 | lo;
}

START_TEST(test_hash_leaves_ymm_uppers_clean) {
  if (!can_read_xinuse()) {
    fprintf(stderr,
            "test_hash_leaves_ymm_uppers_clean: no AVX2 or XGETBV(1) here; nothing to check\n");
    return;
  }
  static uint8_t data[4096];
  for (size_t i = 0; i < sizeof data; i++)
    data[i] = (uint8_t)(i * 13 + 1);
  volatile uint64_t sink = 0;
  __asm__ volatile("vzeroupper" ::: "memory");
  ck_assert_uint_eq(xinuse() & 0x44, 0);
  sink += pbw__hash128(data, sizeof data).lo;
  uint64_t after128 = xinuse();
  __asm__ volatile("vzeroupper" ::: "memory");
  sink += pbw__hash64(data, sizeof data);
  uint64_t after64 = xinuse();
  ck_assert_uint_eq(after128 & 0x44, 0);
  ck_assert_uint_eq(after64 & 0x44, 0);
  (void)sink;
}
END_TEST

/* ---- Statistics -------------------------------------------------------------------- */

/* Branch{id, leaves=[{name "ab", values [1,-2,3]}, {blob "xyz"}],
 *        best={weight 0.1}, color BLUE, tags ["t\"1", "é"]} */
typedef struct {
  Standin__Test__Branch br;
  Standin__Test__Leaf l[3], *lp[2];
  int32_t values[3];
  char *tags[2];
} branch_store;

static void make_branch(branch_store *s) {
  standin__test__branch__init(&s->br);
  for (int i = 0; i < 3; i++)
    standin__test__leaf__init(&s->l[i]);
  s->values[0] = 1, s->values[1] = -2, s->values[2] = 3;
  s->l[0].name = "ab";
  s->l[0].n_values = 3;
  s->l[0].values = s->values;
  s->l[1].has_blob = 1;
  s->l[1].blob = (ProtobufCBinaryData){3, (uint8_t *)"xyz"};
  s->l[2].has_weight = 1;
  s->l[2].weight = 0.1;
  s->lp[0] = &s->l[0];
  s->lp[1] = &s->l[1];
  s->tags[0] = "t\"1";
  s->tags[1] = "\xc3\xa9";
  s->br.id = 5;
  s->br.n_leaves = 2;
  s->br.leaves = s->lp;
  s->br.best = &s->l[2];
  s->br.has_color = 1;
  s->br.color = STANDIN__TEST__COLOR__BLUE;
  s->br.n_tags = 2;
  s->br.tags = s->tags;
}

START_TEST(test_stats_of_hand_built_branch) {
  branch_store s;
  pbw_stats st, fst;
  uint8_t fp[16];
  make_branch(&s);
  ck_assert_int_eq(pbw_tree_stats(&s.br.base, &st), PBW_OK);
  /* root: id, leaves, best, color, tags; leaf 0: name, values; leaf 1:
   * blob; best: weight */
  ck_assert_uint_eq(st.fields, 9);
  ck_assert_uint_eq(st.submsgs, 3);
  ck_assert_uint_eq(st.max_depth, 2);
  ck_assert_uint_eq(st.repeated, 2 + 3 + 2);
  ck_assert_uint_eq(st.var_bytes, 2 + 3 + 3 + 2);
  ck_assert_int_eq(pbw_fingerprint_tree(&s.br.base, fp, &fst), PBW_OK);
  assert_stats_eq(&st, &fst);
}
END_TEST

static void check_stats_from_bytes(const ProtobufCMessage *tree, buf bytes) {
  void *schema;
  size_t slen;
  pbw_stats a, b;
  ck_assert_int_eq(pbw_schema_build(tree->descriptor, &schema, &slen), PBW_OK);
  ck_assert_int_eq(pbw_tree_stats(tree, &a), PBW_OK);
  ck_assert_int_eq(pbw_stats_from_bytes(schema, slen, bytes.p, bytes.n, &b), PBW_OK);
  assert_stats_eq(&a, &b);
  /* the writer's path: the schema checked once, then each message */
  pbw_stats_plan *plan;
  ck_assert_int_eq(pbw_stats_plan_build(schema, slen, &plan), PBW_OK);
  for (int k = 0; k < 2; k++) {
    memset(&b, 0xa5, sizeof b);
    ck_assert_int_eq(pbw_stats_from_bytes_plan(plan, bytes.p, bytes.n, &b), PBW_OK);
    assert_stats_eq(&a, &b);
  }
  pbw_stats_plan_free(plan);
  free(schema);
}

START_TEST(test_stats_from_bytes_match_tree_stats) {
  static const int payloads[] = {0, 6, 7, 8};
  for (int i = 0; i < 4; i++) {
    owned o = unpacked_tree(payloads[i], 1000);
    check_stats_from_bytes(o.tree, o.bytes);
    free_owned(&o);
  }
  for (int i = 0; i < 6; i++) {
    owned o = unpacked_batch(i % 3 == 0 ? 0 : 3 + i % 3);
    check_stats_from_bytes(o.tree, o.bytes);
    free_owned(&o);
  }
  for (int c = 24; c <= 27; c++) {
    owned o = unpacked_scalars(c);
    check_stats_from_bytes(o.tree, o.bytes);
    free_owned(&o);
  }
  for (int z = 0; z < 2; z++) {
    owned o = unpacked_all3(z);
    check_stats_from_bytes(o.tree, o.bytes);
    free_owned(&o);
  }
  branch_store s;
  make_branch(&s);
  buf b = pack(&s.br.base);
  ProtobufCMessage *u = unpack(&standin__test__branch__descriptor, b);
  check_stats_from_bytes(u, b);
  protobuf_c_message_free_unpacked(u, NULL);
  free(b.p);
}
END_TEST

/* A NULL message in a required or repeated slot is packed as an empty
 * message: the tree's statistics must say what the bytes say (presence
 * words included), and its fingerprint must be that of the empty message. */
START_TEST(test_stats_null_message_slots_count_as_packed) {
  Standin__Pbw__Required r = STANDIN__PBW__REQUIRED__INIT;
  Standin__Pbw__Node n = STANDIN__PBW__NODE__INIT, empty = STANDIN__PBW__NODE__INIT;
  Standin__Pbw__Node *kids[3] = {NULL, &empty, NULL};
  uint8_t fa[16], fb[16];
  pbw_stats sa, sb;
  n.n_kids = 3;
  n.kids = kids;
  r.node = &n;
  buf b = pack_unsized(&r.base, 256);
  check_stats_from_bytes(&r.base, b);
  ck_assert_int_eq(pbw_tree_stats(&r.base, &sa), PBW_OK);
  ck_assert_uint_eq(sa.field_words, 5); /* Required, Node and its three kids */
  ck_assert_uint_eq(sa.submsgs, 4);
  ck_assert_uint_eq(sa.max_depth, 3);
  fingerprint(&r.base, fa);
  kids[0] = kids[2] = &empty; /* the same bytes from non-NULL slots */
  assert_packs_to(&r.base, b);
  fingerprint(&r.base, fb);
  ck_assert_int_eq(memcmp(fa, fb, 16), 0);
  ck_assert_int_eq(pbw_tree_stats(&r.base, &sb), PBW_OK);
  assert_stats_eq(&sa, &sb);
  free(b.p);
  r.node = NULL; /* the required message itself */
  b = pack(&r.base);
  check_stats_from_bytes(&r.base, b);
  free(b.p);
}
END_TEST

START_TEST(test_stats_from_bytes_follow_unpack_on_odd_encodings) {
  /* Required with name and tag missing (defaults fill them in), a oneof
   * written twice (the last member wins), a message field written twice
   * (merged), a packed field sent unpacked and a proto3 zero sent
   * explicitly: all as libprotobuf-c unpacks them. */
  static const uint8_t req[] = {0x12, 0x00, 0x1a, 0x00, 0x20, 0x05};
  static const uint8_t sc[] = {0xc2, 0x01, 0x02, 'a',  'b',                    /* o_str "ab" */
                               0xd1, 0x01, 0,    0,    0,    0,    0, 0, 0, 0, /* o_db 0.0 wins */
                               0xea, 0x01, 0x02, 0x10, 0x01,                   /* node{level 1} */
                               0xea, 0x01, 0x02, 0x1a, 0x00,                   /* node{kids [{}]} */
                               0x90, 0x01, 0x04, 0x90, 0x01, 0x06,             /* r_s64 unpacked */
                               0xa8, 0x01, 0x01, 0xa8, 0x01, 0x00};            /* r_mood unpacked */
  static const uint8_t a3[] = {0x08, 0x00, 0x7a, 0x00, 0x82, 0x01, 0x00, 0x10, 0x00};
  struct {
    const ProtobufCMessageDescriptor *d;
    const uint8_t *p;
    size_t n;
  } cases[] = {{&standin__pbw__required__descriptor, req, sizeof req},
               {&standin__pbw__scalars__descriptor, sc, sizeof sc},
               {&standin__pbw3__all3__descriptor, a3, sizeof a3}};
  for (unsigned i = 0; i < 3; i++) {
    buf b = {(uint8_t *)cases[i].p, cases[i].n};
    ProtobufCMessage *u = unpack(cases[i].d, b);
    check_stats_from_bytes(u, b);
    protobuf_c_message_free_unpacked(u, NULL);
  }
  /* a required field without default missing: unpack fails, and so do we */
  void *schema;
  size_t slen;
  pbw_stats st;
  ck_assert_int_eq(pbw_schema_build(&standin__pbw__required__descriptor, &schema, &slen), PBW_OK);
  ck_assert_int_eq(pbw_stats_from_bytes(schema, slen, req, 4, &st), PBW_E_BADDATA);
  free(schema);
}
END_TEST

/* ---- Schemas and JSON -------------------------------------------------------------- */

static char *to_json(const ProtobufCMessageDescriptor *d, buf bytes) {
  void *schema;
  size_t slen;
  char *json = NULL;
  ck_assert_int_eq(pbw_schema_build(d, &schema, &slen), PBW_OK);
  ck_assert_int_eq(pbw_decode_json(schema, slen, bytes.p, bytes.n, &json), PBW_OK);
  free(schema);
  return json;
}

START_TEST(test_json_of_known_branch) {
  branch_store s;
  make_branch(&s);
  buf b = pack(&s.br.base);
  char *json = to_json(&standin__test__branch__descriptor, b);
  ck_assert_str_eq(json, "{\"id\":5,\"leaves\":[{\"name\":\"ab\",\"values\":[1,-2,3]},"
                         "{\"blob\":\"eHl6\"}],\"best\":{\"weight\":0.1},\"color\":\"BLUE\","
                         "\"tags\":[\"t\\\"1\",\"\xc3\xa9\"]}");
  free(json);
  free(b.p);
}
END_TEST

START_TEST(test_json_of_every_type_and_unknown_fields) {
  Standin__Pbw__Scalars s;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT;
  make_scalars(&s, &node, STANDIN__PBW__SCALARS__CHOICE_O_BYT);
  buf b = pack(&s.base);
  append(&b, UNKNOWN, sizeof UNKNOWN);
  append(&b, (uint8_t[]){0xa0, 0x06, 0x01}, 3); /* field 100 again */
  char *json = to_json(&standin__pbw__scalars__descriptor, b);
  ck_assert_str_eq(json,
                   "{\"i32\":-123,\"i64\":-1099511627776,\"u32\":4000000001,"
                   "\"u64\":18446744073709551614,\"s32\":-77,\"s64\":4611686018427387904,"
                   "\"f32\":3735928559,\"f64\":1,\"sf32\":-1,\"sf64\":-2,\"fl\":0.1,\"db\":0.1,"
                   "\"b\":false,\"mood\":\"HAPPY\",\"str\":\"hi \\\"json\\\"\\u000a\\u0009\\u0001 "
                   "\xc3\xa9 \\u00ff\",\"byt\":\"AP8Qeg==\",\"r_i32\":[-1,0,7],"
                   "\"r_s64\":[-5,1125899906842624],\"r_db\":[0.5,-0,1e+300],"
                   "\"r_b\":[true,false,true],\"r_mood\":[\"ANGRY\",\"HAPPY\"],"
                   "\"r_f64\":[18446744073709551615],\"r_fl\":[1.25,-3],\"o_byt\":\"eHk=\","
                   "\"r_byt\":[\"AAEC\",\"\"],\"node\":{},\"far\":42,\"100\":[300,1],"
                   "\"101\":578437695752307201,\"102\":101124105,\"103\":\"aGVsbG8=\"}");
  free(json);
  free(b.p);
}
END_TEST

START_TEST(test_json_proto3_and_maps) {
  owned o = unpacked_batch(STANDIN__TEST3__BATCH__PICK_LABEL);
  char *json = to_json(&standin__test3__batch__descriptor, o.bytes);
  ck_assert_str_eq(json, "{\"name\":\"batch\",\"items\":[{\"key\":\"k0\",\"value\":\"djA=\","
                         "\"scores\":[0,-9,100000]},{}],\"by_key\":[{\"key\":\"one\","
                         "\"value\":{\"key\":\"k0\",\"value\":\"djA=\",\"scores\":[0,-9,100000]}},"
                         "{\"value\":{}}],\"label\":\"label\",\"version\":3,\"100\":300,"
                         "\"101\":578437695752307201,\"102\":101124105,\"103\":\"aGVsbG8=\"}");
  free(json);
  free_owned(&o);
}
END_TEST

START_TEST(test_json_follows_unpack_on_odd_encodings) {
  /* the oneof member that came last wins, a message field sent twice is
   * merged, packed fields may arrive unpacked */
  static const uint8_t sc[] = {0xc2, 0x01, 0x02, 'a',  'b',  0xd1, 0x01, 0,    0,    0,    0,
                               0,    0,    0,    0,    0xea, 0x01, 0x02, 0x10, 0x01, 0xea, 0x01,
                               0x02, 0x1a, 0x00, 0x90, 0x01, 0x04, 0x90, 0x01, 0x06, 0xa8, 0x01,
                               0x01, 0xa8, 0x01, 0x00, 0x92, 0x01, 0x02, 0x08, 0x0a};
  buf b = {(uint8_t *)sc, sizeof sc};
  char *json = to_json(&standin__pbw__scalars__descriptor, b);
  ck_assert_str_eq(json, "{\"r_s64\":[2,3,4,5],\"r_mood\":[\"HAPPY\",\"CALM\"],\"o_db\":0,"
                         "\"node\":{\"level\":1,\"kids\":[{}]}}");
  free(json);
}
END_TEST

START_TEST(test_json_depth_limit) {
  Standin__Pbw__Node nodes[PBW_MAX_DEPTH + 1];
  void *schema;
  size_t slen;
  char *json;
  pbw_stats st;
  ck_assert_int_eq(pbw_schema_build(&standin__pbw__node__descriptor, &schema, &slen), PBW_OK);
  make_chain(nodes, PBW_MAX_DEPTH);
  buf ok = pack(&nodes[0].base);
  make_chain(nodes, PBW_MAX_DEPTH + 1);
  buf deep = pack(&nodes[0].base);
  ck_assert_int_eq(pbw_decode_json(schema, slen, ok.p, ok.n, &json), PBW_OK);
  free(json);
  ck_assert_int_eq(pbw_stats_from_bytes(schema, slen, ok.p, ok.n, &st), PBW_OK);
  ck_assert_uint_eq(st.max_depth, PBW_MAX_DEPTH);
  ck_assert_int_eq(pbw_decode_json(schema, slen, deep.p, deep.n, &json), PBW_E_DEPTH);
  ck_assert_ptr_null(json);
  ck_assert_int_eq(pbw_stats_from_bytes(schema, slen, deep.p, deep.n, &st), PBW_E_DEPTH);
  free(ok.p);
  free(deep.p);
  free(schema);
}
END_TEST

/* A schema's identity (pbw_schema_id), which replay checks a program's
 * types by: the same for every build of one type, different when a field's
 * type, a default or a type it reaches changes; 0 for what is not a
 * schema of this version. */
static uint64_t id_of(const ProtobufCMessageDescriptor *d) {
  void *schema;
  size_t slen;
  ck_assert_int_eq(pbw_schema_build(d, &schema, &slen), PBW_OK);
  uint64_t id = pbw_schema_id(schema, slen);
  free(schema);
  return id;
}

static int field_named(const ProtobufCMessageDescriptor *d, const char *name) {
  for (unsigned i = 0; i < d->n_fields; i++)
    if (!strcmp(d->fields[i].name, name))
      return (int)i;
  ck_abort_msg("no field %s", name);
  return -1;
}

static size_t schema_allocs, schema_frees;
static void *counting_realloc(void *p, size_t n) {
  schema_allocs += p == NULL;
  return realloc(p, n);
}
static void counting_free(void *p) {
  schema_frees += p != NULL;
  free(p);
}

START_TEST(test_schema_id_tells_changed_types) {
  const ProtobufCMessageDescriptor *sc = &standin__pbw__scalars__descriptor;
  uint64_t id = id_of(sc);
  ck_assert_uint_ne(id, 0);
  ck_assert_uint_eq(id_of(sc), id);
  ck_assert_uint_ne(id_of(&standin__pbw__node__descriptor), id);

  /* one field's type: int32 to sint32, the same C layout */
  size_t nf = sc->n_fields;
  ProtobufCFieldDescriptor *f = malloc(nf * sizeof *f);
  memcpy(f, sc->fields, nf * sizeof *f);
  ProtobufCMessageDescriptor d = *sc;
  d.fields = f;
  ck_assert_uint_eq(id_of(&d), id); /* a copy is the same type */
  int i32 = field_named(sc, "i32");
  f[i32].type = PROTOBUF_C_TYPE_SINT32;
  ck_assert_uint_ne(id_of(&d), id);
  f[i32].type = sc->fields[i32].type;

  /* one default: -7 to 5 */
  static const int32_t five = 5;
  f[i32].default_value = &five;
  ck_assert_uint_ne(id_of(&d), id);
  f[i32].default_value = sc->fields[i32].default_value;
  ck_assert_uint_eq(id_of(&d), id);

  /* a type it reaches: Node's uint32 level becomes an int32 */
  const ProtobufCMessageDescriptor *nd = &standin__pbw__node__descriptor;
  ProtobufCFieldDescriptor *nf2 = malloc(nd->n_fields * sizeof *nf2);
  memcpy(nf2, nd->fields, nd->n_fields * sizeof *nf2);
  nf2[field_named(nd, "level")].type = PROTOBUF_C_TYPE_INT32;
  ProtobufCMessageDescriptor node = *nd;
  node.fields = nf2;
  f[field_named(sc, "node")].descriptor = &node;
  ck_assert_uint_ne(id_of(&d), id);

  /* the builder's memory comes from the allocator it is given */
  schema_allocs = schema_frees = 0;
  pbw_schema_allocator(counting_realloc, counting_free);
  uint64_t again = id_of(sc); /* id_of frees the schema with libc's free */
  pbw_schema_allocator(NULL, NULL);
  ck_assert_uint_eq(again, id);
  ck_assert_uint_gt(schema_allocs, 2);
  ck_assert_uint_eq(schema_frees + 1, schema_allocs);

  /* not a schema of this version */
  void *schema;
  size_t slen;
  ck_assert_int_eq(pbw_schema_build(sc, &schema, &slen), PBW_OK);
  ck_assert_uint_eq(pbw_schema_id(schema, 47), 0);
  ck_assert_uint_eq(pbw_schema_id(NULL, slen), 0);
  ((uint8_t *)schema)[4] = 1; /* version 1 */
  ck_assert_uint_eq(pbw_schema_id(schema, slen), 0);
  free(schema);
  free(f);
  free(nf2);
}
END_TEST

START_TEST(test_schema_damage_is_detected) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 5);
  void *schema;
  size_t slen;
  char *json;
  pbw_stats st;
  ck_assert_int_eq(pbw_schema_build(o.tree->descriptor, &schema, &slen), PBW_OK);
  uint8_t *copy = malloc(slen);
  for (size_t n = 0; n < slen; n++) {
    memcpy(copy, schema, n);
    ck_assert_int_eq(pbw_decode_json(copy, n, o.bytes.p, o.bytes.n, &json), PBW_E_BADSCHEMA);
    ck_assert_int_eq(pbw_stats_from_bytes(copy, n, o.bytes.p, o.bytes.n, &st), PBW_E_BADSCHEMA);
  }
  for (size_t i = 0; i < slen; i++) {
    memcpy(copy, schema, slen);
    copy[i] ^= 0x10;
    ck_assert_int_eq(pbw_decode_json(copy, slen, o.bytes.p, o.bytes.n, &json), PBW_E_BADSCHEMA);
  }
  /* resealed damage reaches the structural checks: any outcome but a crash */
  for (size_t i = 16; i < slen; i++) {
    for (int bit = 0; bit < 8; bit += 2) {
      memcpy(copy, schema, slen);
      copy[i] ^= (uint8_t)(1u << bit);
      reseal(copy, slen);
      json = NULL;
      if (pbw_decode_json(copy, slen, o.bytes.p, o.bytes.n, &json) == PBW_OK)
        free(json);
      pbw_stats_from_bytes(copy, slen, o.bytes.p, o.bytes.n, &st);
    }
  }
  free(copy);
  free(schema);
  free_owned(&o);
}
END_TEST

START_TEST(test_json_damaged_data_is_rejected_or_decoded) {
  owned o = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 5);
  void *schema;
  size_t slen;
  char *json;
  pbw_stats st;
  uint32_t rnd = 12345;
  ck_assert_int_eq(pbw_schema_build(o.tree->descriptor, &schema, &slen), PBW_OK);
  for (size_t n = 0; n <= o.bytes.n; n++) {
    uint8_t *copy = malloc(n ? n : 1);
    memcpy(copy, o.bytes.p, n);
    int rc = pbw_decode_json(schema, slen, copy, n, &json);
    ck_assert(rc == PBW_OK || rc == PBW_E_BADDATA);
    if (rc == PBW_OK)
      free(json);
    rc = pbw_stats_from_bytes(schema, slen, copy, n, &st);
    ck_assert(rc == PBW_OK || rc == PBW_E_BADDATA);
    free(copy);
  }
  uint8_t *copy = malloc(o.bytes.n);
  for (int k = 0; k < 3000; k++) {
    memcpy(copy, o.bytes.p, o.bytes.n);
    for (int f = 0; f < 1 + k % 4; f++) {
      rnd = rnd * 1103515245u + 12345u;
      copy[(rnd >> 8) % o.bytes.n] ^= (uint8_t)(rnd >> 24 | 1);
    }
    if (pbw_decode_json(schema, slen, copy, o.bytes.n, &json) == PBW_OK)
      free(json);
    pbw_stats_from_bytes(schema, slen, copy, o.bytes.n, &st);
  }
  free(copy);
  free(schema);
  free_owned(&o);
}
END_TEST

START_TEST(test_json_rejects_malformed_records) {
  static const struct {
    uint8_t p[8];
    size_t n;
  } bad[] = {
      {{0x10}, 1},                /* tag without value */
      {{0x13}, 1},                /* group wire type */
      {{0x00, 0x00}, 2},          /* field number 0 */
      {{0x0a, 0x05, 'a'}, 3},     /* length beyond the end */
      {{0x08, 0x01}, 2},          /* title (string) as a varint */
      {{0x4d, 1, 2, 3}, 4},       /* packed_ids fixed32 cut short */
      {{0x4a, 0x03, 1, 2, 3}, 5}, /* packed run not a multiple of 4 */
      {{0x50, 0xff, 0xff}, 3},    /* unterminated varint */
  };
  void *schema;
  size_t slen;
  char *json = (char *)1;
  pbw_stats st;
  ck_assert_int_eq(pbw_schema_build(&standin__test__tree__descriptor, &schema, &slen), PBW_OK);
  for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_int_eq(pbw_decode_json(schema, slen, bad[i].p, bad[i].n, &json), PBW_E_BADDATA);
    ck_assert_ptr_null(json);
    ck_assert_int_eq(pbw_stats_from_bytes(schema, slen, bad[i].p, bad[i].n, &st), PBW_E_BADDATA);
  }
  ck_assert_int_eq(pbw_decode_json(schema, slen, NULL, 0, &json), PBW_OK);
  ck_assert_str_eq(json, "{}");
  free(json);
  free(schema);
}
END_TEST

/* ---- Descriptors rebuilt from schemas ---------------------------------------------
 * The offline path of replay: bytes unpacked by the real libprotobuf-c with
 * descriptors rebuilt from a schema, captured as an image, and the image
 * materialised against the program's generated descriptors. */

static pbw_descset *descset_of(const ProtobufCMessageDescriptor *d) {
  void *schema;
  size_t slen;
  pbw_descset *ds = (pbw_descset *)1;
  ck_assert_int_eq(pbw_schema_build(d, &schema, &slen), PBW_OK);
  ck_assert_int_eq(pbw_descset_from_schema(schema, slen, &ds), PBW_OK);
  ck_assert_ptr_nonnull(ds);
  free(schema);
  return ds;
}

/* Pairs of (rebuilt, generated) descriptors already compared. */
typedef struct {
  const void *r[64], *g[64];
  unsigned n;
} seen_set;

static int seen_before(seen_set *s, const void *r, const void *g) {
  for (unsigned i = 0; i < s->n; i++) {
    if (s->r[i] == r) {
      ck_assert_ptr_eq(s->g[i], g); /* one rebuilt descriptor per generated one */
      return 1;
    }
  }
  ck_assert_uint_lt(s->n, 64);
  s->r[s->n] = r;
  s->g[s->n++] = g;
  return 0;
}

static void assert_name_eq(const char *r, const char *g) {
  if (r == NULL || g == NULL)
    ck_assert_ptr_eq(r, g);
  else
    ck_assert_str_eq(r, g);
}

/* n ranges and the sentinel after them. */
static void assert_ranges_eq(const ProtobufCIntRange *r, const ProtobufCIntRange *g, unsigned n) {
  if (n == 0)
    return;
  for (unsigned i = 0; i <= n; i++) {
    ck_assert_int_eq(r[i].start_value, g[i].start_value);
    ck_assert_uint_eq(r[i].orig_index, g[i].orig_index);
  }
}

static void assert_enum_same(const ProtobufCEnumDescriptor *r, const ProtobufCEnumDescriptor *g,
                             seen_set *s) {
  if (seen_before(s, r, g))
    return;
  ck_assert_ptr_ne(r, g);
  ck_assert_uint_eq(r->magic, PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC);
  assert_name_eq(r->name, g->name);
  assert_name_eq(r->short_name, g->short_name);
  assert_name_eq(r->c_name, g->c_name);
  assert_name_eq(r->package_name, g->package_name);
  ck_assert_uint_eq(r->n_values, g->n_values);
  for (unsigned i = 0; i < g->n_values; i++) {
    assert_name_eq(r->values[i].name, g->values[i].name);
    assert_name_eq(r->values[i].c_name, g->values[i].c_name);
    ck_assert_int_eq(r->values[i].value, g->values[i].value);
  }
  ck_assert_uint_eq(r->n_value_names, g->n_value_names);
  for (unsigned i = 0; i < g->n_value_names; i++) {
    assert_name_eq(r->values_by_name[i].name, g->values_by_name[i].name);
    ck_assert_uint_eq(r->values_by_name[i].index, g->values_by_name[i].index);
  }
  ck_assert_uint_eq(r->n_value_ranges, g->n_value_ranges);
  assert_ranges_eq(r->value_ranges, g->value_ranges, g->n_value_ranges);
}

static size_t scalar_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  default: return 4;
  }
}

/* Equal default contents, in storage of the rebuilt field's own. init is
 * a message of g's type as its generated init left it (NULL: no init). */
static void assert_default_same(const ProtobufCFieldDescriptor *r,
                                const ProtobufCFieldDescriptor *g, const uint8_t *init) {
  if (g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    /* message_init_generic would copy it into the union, generated init
     * leaves the union zero */
    ck_assert_ptr_null(r->default_value);
    return;
  }
  if (g->default_value == NULL && r->default_value != NULL) {
    /* the generated init's value: enums start at their first value */
    size_t n = scalar_size(g->type);
    ck_assert_ptr_nonnull(init);
    ck_assert(g->label == PROTOBUF_C_LABEL_OPTIONAL || g->label == PROTOBUF_C_LABEL_NONE);
    ck_assert_int_eq(memcmp(r->default_value, init + g->offset, n), 0);
    ck_assert_int_ne(memcmp(r->default_value, (uint8_t[8]){0}, n), 0);
    return;
  }
  if (g->default_value == NULL) {
    ck_assert_ptr_null(r->default_value);
    if (init != NULL && g->label != PROTOBUF_C_LABEL_REPEATED &&
        g->type != PROTOBUF_C_TYPE_STRING && g->type != PROTOBUF_C_TYPE_MESSAGE &&
        g->type != PROTOBUF_C_TYPE_BYTES && !(g->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
        g->label != PROTOBUF_C_LABEL_REQUIRED)
      ck_assert_int_eq(memcmp(init + g->offset, (uint8_t[8]){0}, scalar_size(g->type)), 0);
    return;
  }
  ck_assert_ptr_nonnull(r->default_value);
  ck_assert_ptr_ne(r->default_value, g->default_value);
  if (g->type == PROTOBUF_C_TYPE_STRING) {
    ck_assert_str_eq(r->default_value, g->default_value);
  } else if (g->type == PROTOBUF_C_TYPE_BYTES) {
    const ProtobufCBinaryData *a = r->default_value, *b = g->default_value;
    ck_assert_uint_eq(a->len, b->len);
    if (b->data == NULL) {
      ck_assert_ptr_null(a->data);
    } else {
      ck_assert_ptr_nonnull(a->data);
      ck_assert_ptr_ne(a->data, b->data);
      ck_assert_int_eq(memcmp(a->data, b->data, b->len), 0);
    }
  } else {
    ck_assert_int_eq(memcmp(r->default_value, g->default_value, scalar_size(g->type)), 0);
  }
}

static void assert_msg_same(const ProtobufCMessageDescriptor *r,
                            const ProtobufCMessageDescriptor *g, seen_set *s) {
  if (seen_before(s, r, g))
    return;
  ck_assert_ptr_ne(r, g);
  ck_assert_uint_eq(r->magic, PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
  assert_name_eq(r->name, g->name);
  assert_name_eq(r->short_name, g->short_name);
  assert_name_eq(r->c_name, g->c_name);
  assert_name_eq(r->package_name, g->package_name);
  ck_assert_uint_eq(r->sizeof_message, g->sizeof_message);
  ck_assert_uint_eq(r->n_fields, g->n_fields);
  ck_assert_ptr_null(r->message_init);
  ck_assert_uint_eq(r->n_field_ranges, g->n_field_ranges);
  if (g->n_fields == 0) { /* protoc-c: NULL arrays, no ranges */
    ck_assert_ptr_null(g->fields);
    ck_assert_ptr_null(r->fields);
    ck_assert_ptr_null(r->fields_sorted_by_name);
    ck_assert_ptr_null(r->field_ranges);
    return;
  }
  uint8_t *init = NULL;
  if (g->message_init != NULL) {
    init = calloc(1, g->sizeof_message);
    g->message_init((ProtobufCMessage *)init);
  }
  for (unsigned i = 0; i < g->n_fields; i++) {
    const ProtobufCFieldDescriptor *a = &r->fields[i], *b = &g->fields[i];
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->id, b->id);
    ck_assert_int_eq(a->label, b->label);
    ck_assert_int_eq(a->type, b->type);
    ck_assert_uint_eq(a->quantifier_offset, b->quantifier_offset);
    ck_assert_uint_eq(a->offset, b->offset);
    ck_assert_uint_eq(a->flags, b->flags);
    assert_default_same(a, b, init);
    if (b->type == PROTOBUF_C_TYPE_MESSAGE)
      assert_msg_same(a->descriptor, b->descriptor, s);
    else if (b->type == PROTOBUF_C_TYPE_ENUM)
      assert_enum_same(a->descriptor, b->descriptor, s);
    else
      ck_assert_ptr_null(a->descriptor);
    ck_assert_uint_eq(r->fields_sorted_by_name[i], g->fields_sorted_by_name[i]);
  }
  free(init);
  assert_ranges_eq(r->field_ranges, g->field_ranges, g->n_field_ranges);
}

static const ProtobufCMessageDescriptor *const DS_ROOTS[] = {
    &standin__test__tree__descriptor,    &standin__test__branch__descriptor,
    &standin__test3__batch__descriptor,  &standin__pbw__scalars__descriptor,
    &standin__pbw__required__descriptor, &standin__pbw__node__descriptor,
    &standin__pbw3__all3__descriptor,    &standin__pbwchain__c0__descriptor,
    &standin__pbwds__ping__descriptor,   &standin__pbwds__pong__descriptor,
    &standin__pbwds__odd__descriptor,    &standin__pbwds__empty__descriptor};

START_TEST(test_descset_matches_generated_descriptors) {
  for (unsigned i = 0; i < sizeof DS_ROOTS / sizeof DS_ROOTS[0]; i++) {
    seen_set s = {{0}, {0}, 0};
    pbw_descset *ds = descset_of(DS_ROOTS[i]);
    assert_msg_same(pbw_descset_root(ds), DS_ROOTS[i], &s);
    pbw_descset_free(ds);
  }
  pbw_descset_free(NULL);
  ck_assert_ptr_null(pbw_descset_root(NULL));
}
END_TEST

/* Replay's offline path for bytes of type gen: unpack with rebuilt
 * descriptors, image, materialise against gen. The image must be the very
 * image the program's own unpack would have given. Returns the
 * materialised tree (free() it). */
static ProtobufCMessage *offline_replay(const ProtobufCMessageDescriptor *gen, buf bytes) {
  pbw_descset *ds = descset_of(gen);
  const ProtobufCMessageDescriptor *root = pbw_descset_root(ds);
  ProtobufCMessage *u = protobuf_c_message_unpack(root, NULL, bytes.n, bytes.p);
  ProtobufCMessage *g = unpack(gen, bytes), *m = NULL;
  void *img, *gimg;
  size_t len, glen;
  ck_assert_ptr_nonnull(u);
  ck_assert_ptr_eq(u->descriptor, root);
  buf want = pack(g);
  assert_packs_to(u, want); /* pack and get_packed_size work on the rebuilt graph */
  ck_assert_int_eq(pbw_image_build(u, &img, &len), PBW_OK);
  ck_assert_int_eq(pbw_image_build(g, &gimg, &glen), PBW_OK);
  ck_assert_uint_eq(len, glen);
  ck_assert_int_eq(memcmp(img, gimg, len), 0);
  protobuf_c_message_free_unpacked(u, NULL);
  pbw_descset_free(ds); /* the image does not refer to it */
  ck_assert_int_eq(pbw_image_materialise(img, len, gen, NULL, &m), PBW_OK);
  ck_assert_ptr_eq(m->descriptor, gen);
  assert_packs_to(m, want);
  protobuf_c_message_free_unpacked(g, NULL);
  free(want.p);
  free(img);
  free(gimg);
  return m;
}

START_TEST(test_descset_offline_replay_sample_tree) {
  static const int payloads[] = {0, STANDIN__TEST__TREE__PAYLOAD_NUMBER,
                                 STANDIN__TEST__TREE__PAYLOAD_TEXT,
                                 STANDIN__TEST__TREE__PAYLOAD_LEAF};
  for (int i = 0; i < 4; i++) {
    owned o = unpacked_tree(payloads[i], i == 3 ? 70000 : 10);
    Standin__Test__Tree *m =
        (Standin__Test__Tree *)offline_replay(&standin__test__tree__descriptor, o.bytes);
    assert_packs_to(&m->base, o.bytes);
    ck_assert_int_eq(m->payload_case, payloads[i]);
    if (payloads[i] == STANDIN__TEST__TREE__PAYLOAD_NUMBER)
      ck_assert_int_eq(m->number, -42);
    else if (payloads[i] == STANDIN__TEST__TREE__PAYLOAD_TEXT)
      ck_assert_str_eq(m->text, "text");
    else if (payloads[i] == STANDIN__TEST__TREE__PAYLOAD_LEAF)
      ck_assert_str_eq(m->leaf->name, "oneof");
    ck_assert_ptr_eq(m->trunk->base.descriptor, &standin__test__branch__descriptor);
    ck_assert_ptr_eq(m->motto, standin__test__tree__motto__default_value);
    ck_assert_ptr_eq(m->trunk->leaves[1]->name, standin__test__leaf__name__default_value);
    ck_assert_double_eq(m->trunk->leaves[1]->weight, 1.5);
    ck_assert_int_eq(m->trunk->leaves[1]->has_weight, 0);
    ck_assert_str_eq(m->trunk->leaves[0]->name, "a");
    ck_assert_uint_eq(m->trunk->leaves[0]->blob.len, 300);
    ck_assert_str_eq(m->trunk->tags[1], "");
    ck_assert_int_eq(m->branches[2]->color, STANDIN__TEST__COLOR__RED);
    ck_assert_int_eq(m->branches[0]->has_color, 0);
    ck_assert_int_eq(m->branches[0]->color, STANDIN__TEST__COLOR__GREEN);
    ck_assert_ptr_null(m->chunks[1].data);
    ck_assert_uint_eq(m->chunks[2].len, i == 3 ? 70000 : 10);
    ck_assert_int_eq(m->has_flag, 1);
    ck_assert_int_eq(m->flag, 0);
    ck_assert_uint_eq(m->base.n_unknown_fields, 4);
    ck_assert_uint_eq(m->base.unknown_fields[3].len, 6);
    ck_assert_int_eq(memcmp(m->base.unknown_fields[3].data, "\5hello", 6), 0);
    ck_assert_uint_eq(m->trunk->best->base.n_unknown_fields, 4);
    ck_assert_str_eq(m->counters[1]->key, "b");
    ck_assert_int_eq(m->leaf_map[0]->value->has_weight, 1);
    free(m);
    free_owned(&o);
  }
}
END_TEST

START_TEST(test_descset_offline_replay_proto3) {
  static const int picks[] = {0, STANDIN__TEST3__BATCH__PICK_CHOSEN,
                              STANDIN__TEST3__BATCH__PICK_LABEL};
  for (int i = 0; i < 3; i++) {
    owned o = unpacked_batch(picks[i]);
    Standin__Test3__Batch *m =
        (Standin__Test3__Batch *)offline_replay(&standin__test3__batch__descriptor, o.bytes);
    assert_packs_to(&m->base, o.bytes);
    ck_assert_int_eq(m->pick_case, picks[i]);
    if (picks[i] == STANDIN__TEST3__BATCH__PICK_CHOSEN)
      ck_assert_str_eq(m->chosen->key, "chosen");
    else if (picks[i] == STANDIN__TEST3__BATCH__PICK_LABEL)
      ck_assert_str_eq(m->label, "label");
    ck_assert_ptr_eq(m->items[1]->key, protobuf_c_empty_string);
    ck_assert_ptr_eq(m->by_key[1]->key, protobuf_c_empty_string);
    ck_assert_ptr_eq(m->by_key[1]->value->key, protobuf_c_empty_string);
    ck_assert_ptr_null(m->items[1]->value.data);
    ck_assert_str_eq(m->items[0]->key, "k0");
    ck_assert_uint_eq(m->version, 3);
    ck_assert_uint_eq(m->base.n_unknown_fields, 4);
    free(m);
    free_owned(&o);
  }
  for (int zeros = 0; zeros < 2; zeros++) {
    owned o = unpacked_all3(zeros);
    Standin__Pbw3__All3 *m =
        (Standin__Pbw3__All3 *)offline_replay(&standin__pbw3__all3__descriptor, o.bytes);
    assert_packs_to(&m->base, o.bytes);
    ck_assert_ptr_eq(m->sub->s, protobuf_c_empty_string);
    ck_assert_str_eq(m->m[1]->value, "");
    ck_assert_str_eq(m->r_s[0], "");
    if (zeros) {
      ck_assert_ptr_eq(m->s, protobuf_c_empty_string);
      ck_assert_int_eq(m->o_case, STANDIN__PBW3__ALL3__O_O_S);
      ck_assert_str_eq(m->o_s, "");
      ck_assert_int_eq(m->i32, 0);
    } else {
      ck_assert_str_eq(m->s, "s");
      ck_assert_int_eq(m->o_case, STANDIN__PBW3__ALL3__O_O_I);
      ck_assert_int_eq(m->o_i, 0);
      ck_assert_int_eq(m->tone, STANDIN__PBW3__TONE__TONE_ONE);
      ck_assert_double_eq(m->db, 1e-300);
    }
    free(m);
    free_owned(&o);
  }
}
END_TEST

START_TEST(test_descset_offline_replay_every_scalar_type) {
  for (int choice = 0; choice <= STANDIN__PBW__SCALARS__CHOICE_O_NODE; choice++) {
    if (choice != 0 && choice < STANDIN__PBW__SCALARS__CHOICE_O_STR)
      continue;
    owned o = unpacked_scalars(choice);
    Standin__Pbw__Scalars *m =
        (Standin__Pbw__Scalars *)offline_replay(&standin__pbw__scalars__descriptor, o.bytes);
    assert_packs_to(&m->base, o.bytes);
    ck_assert_int_eq(m->choice_case, choice);
    if (choice == STANDIN__PBW__SCALARS__CHOICE_O_STR)
      ck_assert_str_eq(m->o_str, "pick");
    else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_BYT)
      ck_assert_int_eq(memcmp(m->o_byt.data, "xy", 2), 0);
    else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_DB)
      ck_assert_double_eq(m->o_db, 2.5);
    else if (choice == STANDIN__PBW__SCALARS__CHOICE_O_NODE)
      ck_assert_uint_eq(m->o_node->kids[0]->level, 2);
    ck_assert_uint_eq(m->u64, ~(uint64_t)1);
    ck_assert_int_eq(m->b, 0);
    ck_assert_int_eq(m->has_b, 1);
    ck_assert_int_eq(m->r_mood[0], STANDIN__PBW__MOOD__ANGRY);
    ck_assert_uint_eq(m->n_r_byt, 2);
    ck_assert_ptr_null(m->r_byt[1].data);
    ck_assert_int_eq(m->far, 42);
    free(m);
    free_owned(&o);
  }
  /* nothing on the wire: every default as the generated init sets it */
  buf none = {0};
  Standin__Pbw__Scalars *m =
      (Standin__Pbw__Scalars *)offline_replay(&standin__pbw__scalars__descriptor, none);
  ck_assert_ptr_eq(m->str, standin__pbw__scalars__str__default_value);
  ck_assert_ptr_eq(m->byt.data, standin__pbw__scalars__byt__default_value_data);
  ck_assert_uint_eq(m->byt.len, 3);
  ck_assert_int_eq(m->has_byt, 0);
  ck_assert_int_eq(m->i32, -7);
  ck_assert_int_eq(m->i64, -70000000000);
  ck_assert_uint_eq(m->u64, 18000000000000000000ull);
  ck_assert_float_eq(m->fl, 0.25f);
  ck_assert_double_eq(m->db, -2.5);
  ck_assert_int_eq(m->b, 1);
  ck_assert_int_eq(m->mood, STANDIN__PBW__MOOD__ANGRY);
  ck_assert_int_eq(m->choice_case, 0);
  ck_assert_ptr_null(m->node);
  free(m);
}
END_TEST

START_TEST(test_descset_offline_replay_required_and_odd_encodings) {
  static const uint8_t req[] = {0x12, 0x00, 0x1a, 0x00, 0x20, 0x05};
  static const uint8_t sc[] = {0xc2, 0x01, 0x02, 'a',  'b',                    /* o_str "ab" */
                               0xd1, 0x01, 0,    0,    0,    0,    0, 0, 0, 0, /* o_db 0.0 wins */
                               0xea, 0x01, 0x02, 0x10, 0x01,                   /* node{level 1} */
                               0xea, 0x01, 0x02, 0x1a, 0x00,                   /* node{kids [{}]} */
                               0x90, 0x01, 0x04, 0x90, 0x01, 0x06,             /* r_s64 unpacked */
                               0xa8, 0x01, 0x01, 0xa8, 0x01, 0x00,             /* r_mood unpacked */
                               0x08, 0x01, 0x08, 0x02};                        /* i32 twice */
  Standin__Pbw__Required *r = (Standin__Pbw__Required *)offline_replay(
      &standin__pbw__required__descriptor, (buf){(uint8_t *)req, sizeof req});
  ck_assert_ptr_eq(r->name, standin__pbw__required__name__default_value);
  ck_assert_ptr_eq(r->tag.data, standin__pbw__required__tag__default_value_data);
  ck_assert_ptr_nonnull(r->node);
  ck_assert_ptr_null(r->data.data);
  ck_assert_uint_eq(r->id, 5);
  free(r);
  Standin__Pbw__Scalars *s = (Standin__Pbw__Scalars *)offline_replay(
      &standin__pbw__scalars__descriptor, (buf){(uint8_t *)sc, sizeof sc});
  ck_assert_int_eq(s->choice_case, STANDIN__PBW__SCALARS__CHOICE_O_DB);
  ck_assert_double_eq(s->o_db, 0);
  ck_assert_uint_eq(s->node->level, 1);
  ck_assert_uint_eq(s->node->n_kids, 1);
  ck_assert_uint_eq(s->n_r_s64, 2);
  ck_assert_int_eq(s->i32, 2);
  free(s);
  /* a required field without default missing: both unpacks fail */
  pbw_descset *ds = descset_of(&standin__pbw__required__descriptor);
  ck_assert_ptr_null(protobuf_c_message_unpack(pbw_descset_root(ds), NULL, 4, req));
  ck_assert_ptr_null(protobuf_c_message_unpack(&standin__pbw__required__descriptor, NULL, 4, req));
  pbw_descset_free(ds);
}
END_TEST

START_TEST(test_descset_offline_replay_recursive_and_chained_types) {
  Standin__Pbw__Node nodes[PBW_MAX_DEPTH];
  make_chain(nodes, PBW_MAX_DEPTH);
  buf deep = pack(&nodes[0].base);
  Standin__Pbw__Node *n =
      (Standin__Pbw__Node *)offline_replay(&standin__pbw__node__descriptor, deep);
  assert_packs_to(&n->base, deep);
  const Standin__Pbw__Node *at = n;
  for (unsigned i = 1; i < PBW_MAX_DEPTH; i++)
    at = at->child;
  ck_assert_uint_eq(at->level, PBW_MAX_DEPTH - 1);
  ck_assert_ptr_eq(at->base.descriptor, &standin__pbw__node__descriptor);
  free(n);
  free(deep.p);
  buf chain = chain_bytes(0);
  ProtobufCMessage *c = offline_replay(&standin__pbwchain__c0__descriptor, chain);
  assert_packs_to(c, chain);
  free(c);
  free(chain.p);
}
END_TEST

/* Ping <-> Pong, an empty message, enum aliases, odd defaults. */
START_TEST(test_descset_offline_replay_mutual_recursion_and_odd_defaults) {
  Standin__Pbwds__Ping ping = STANDIN__PBWDS__PING__INIT, inner = STANDIN__PBWDS__PING__INIT;
  Standin__Pbwds__Ping p2 = STANDIN__PBWDS__PING__INIT;
  Standin__Pbwds__Pong pong = STANDIN__PBWDS__PONG__INIT, pongs[4], *pongp[4];
  Standin__Pbwds__Empty empty = STANDIN__PBWDS__EMPTY__INIT;
  char *names[2] = {"a", ""};
  for (int i = 0; i < 4; i++) {
    standin__pbwds__pong__init(&pongs[i]);
    pongp[i] = &pongs[i];
  }
  inner.has_n = 1, inner.n = 5;
  p2.has_n = 1, p2.n = 1;
  pong.ping = &inner;
  pong.which_case = STANDIN__PBWDS__PONG__WHICH_P, pong.p = &p2;
  pong.n_names = 2, pong.names = names;
  pongs[0].which_case = STANDIN__PBWDS__PONG__WHICH_LEVEL;
  pongs[0].level = STANDIN__PBWDS__LEVEL__LOW;
  pongs[1].which_case = STANDIN__PBWDS__PONG__WHICH_E;
  pongs[1].e = &empty;
  pongs[2].which_case = STANDIN__PBWDS__PONG__WHICH_S;
  pongs[2].s = -7;
  ping.pong = &pong;
  ping.n_pongs = 4, ping.pongs = pongp;
  ping.empty = &empty;
  ping.has_n = 1, ping.n = -1;
  buf b = pack(&ping.base);
  append(&b, UNKNOWN, sizeof UNKNOWN);
  Standin__Pbwds__Ping *m =
      (Standin__Pbwds__Ping *)offline_replay(&standin__pbwds__ping__descriptor, b);
  assert_packs_to(&m->base, b);
  ck_assert_int_eq(m->pong->ping->n, 5);
  ck_assert_int_eq(m->pong->which_case, STANDIN__PBWDS__PONG__WHICH_P);
  ck_assert_int_eq(m->pong->p->n, 1);
  ck_assert_int_eq(m->pongs[0]->level, STANDIN__PBWDS__LEVEL__LOW);
  ck_assert_ptr_eq(m->pongs[1]->e->base.descriptor, &standin__pbwds__empty__descriptor);
  ck_assert_int_eq(m->pongs[2]->s, -7);
  ck_assert_int_eq(m->pongs[3]->which_case, 0);
  ck_assert_str_eq(m->pong->names[1], "");
  ck_assert_uint_eq(m->base.n_unknown_fields, 4);
  free(m);
  free(b.p);

  /* only the required field: every default */
  Standin__Pbwds__Odd odd = STANDIN__PBWDS__ODD__INIT;
  odd.rq = STANDIN__PBWDS__LEVEL__HIGHER;
  b = pack(&odd.base);
  Standin__Pbwds__Odd *o =
      (Standin__Pbwds__Odd *)offline_replay(&standin__pbwds__odd__descriptor, b);
  ck_assert_ptr_eq(o->es, standin__pbwds__odd__es__default_value);
  ck_assert_ptr_eq(o->eb.data, standin__pbwds__odd__eb__default_value_data);
  ck_assert_uint_eq(o->eb.len, 0);
  ck_assert_int_eq(memcmp(&o->tiny, &odd.tiny, sizeof o->tiny), 0);
  ck_assert_int_eq(memcmp(&o->huge, &odd.huge, sizeof o->huge), 0);
  ck_assert_int_eq(o->lv, STANDIN__PBWDS__LEVEL__TOP);
  ck_assert_int_eq(o->has_nodef, 0);
  ck_assert_int_eq(o->nodef, STANDIN__PBWDS__LEVEL__LOW); /* as the generated init sets it */
  ck_assert_uint_eq(o->big, UINT64_MAX);
  ck_assert_int_eq(o->rq, STANDIN__PBWDS__LEVEL__HIGHER);
  free(o);
  free(b.p);
  /* everything set */
  Standin__Pbwds__Level lvs[3] = {STANDIN__PBWDS__LEVEL__LOW, STANDIN__PBWDS__LEVEL__NORMAL,
                                  STANDIN__PBWDS__LEVEL__TOP};
  odd.es = "es", odd.has_eb = 1, odd.eb = (ProtobufCBinaryData){1, (uint8_t *)"e"};
  odd.has_nz = 1, odd.nz = -0.0f, odd.has_a = 1, odd.a = 0xffffffffu;
  odd.n_lvs = 3, odd.lvs = lvs, odd.ping = &inner;
  odd.has_last = 1, odd.last = INT64_MIN, odd.has_big = 1, odd.big = 0;
  b = pack(&odd.base);
  o = (Standin__Pbwds__Odd *)offline_replay(&standin__pbwds__odd__descriptor, b);
  assert_packs_to(&o->base, b);
  ck_assert_str_eq(o->es, "es");
  ck_assert_uint_eq(o->n_lvs, 3);
  ck_assert_int_eq(o->lvs[2], STANDIN__PBWDS__LEVEL__TOP);
  ck_assert_int_eq(o->last, INT64_MIN);
  ck_assert_int_eq(o->ping->n, 5);
  free(o);
  free(b.p);
  pbw_descset *ds = descset_of(&standin__pbwds__odd__descriptor);
  ck_assert_ptr_null(protobuf_c_message_unpack(pbw_descset_root(ds), NULL, 0, NULL)); /* no rq */
  pbw_descset_free(ds);
}
END_TEST

/* A singular message field sent twice is merged (merge_messages), which
 * reads oneof cases and defaults: the rebuilt graph must merge as the
 * program does. */
START_TEST(test_descset_merges_like_generated_code) {
  /* Ping { pong { level: HIGH } pong { } }: the oneof carries over */
  static const uint8_t lv[] = {0x0a, 0x02, 0x18, 0x01, 0x0a, 0x00};
  /* All3 { sub { o_i: 5, s: "a" } sub { sub { } } } */
  static const uint8_t a3[] = {0x8a, 0x01, 0x06, 0xa0, 0x01, 0x05, 0x7a, 0x01,
                               'a',  0x8a, 0x01, 0x03, 0x8a, 0x01, 0x00};
  Standin__Pbwds__Ping *p = (Standin__Pbwds__Ping *)offline_replay(
      &standin__pbwds__ping__descriptor, (buf){(uint8_t *)lv, sizeof lv});
  ck_assert_int_eq(p->pong->which_case, STANDIN__PBWDS__PONG__WHICH_LEVEL);
  ck_assert_int_eq(p->pong->level, STANDIN__PBWDS__LEVEL__HIGH);
  free(p);
  Standin__Pbw3__All3 *m = (Standin__Pbw3__All3 *)offline_replay(&standin__pbw3__all3__descriptor,
                                                                 (buf){(uint8_t *)a3, sizeof a3});
  ck_assert_int_eq(m->sub->o_case, STANDIN__PBW3__ALL3__O_O_I);
  ck_assert_int_eq(m->sub->o_i, 5);
  ck_assert_str_eq(m->sub->s, "a");
  ck_assert_ptr_nonnull(m->sub->sub);
  free(m);
  /* Ping { pong { } pong { } }: libprotobuf-c 1.4.1 fails to merge two
   * messages whose oneof is unset; so does the rebuilt graph */
  static const uint8_t none[] = {0x0a, 0x00, 0x0a, 0x00};
  pbw_descset *ds = descset_of(&standin__pbwds__ping__descriptor);
  ck_assert_ptr_null(
      protobuf_c_message_unpack(&standin__pbwds__ping__descriptor, NULL, sizeof none, none));
  ck_assert_ptr_null(protobuf_c_message_unpack(pbw_descset_root(ds), NULL, sizeof none, none));
  pbw_descset_free(ds);
  /* The one known difference (see pb_descset.c): the earlier copy selected
   * a oneof string with a default (every proto3 oneof string), the later
   * one nothing. The program's merge drops the string, because its init
   * left the union zero while the member's default is not NULL; the
   * rebuilt member has a NULL default and keeps it. */
  static const uint8_t os[] = {0x8a, 0x01, 0x04, 0xaa, 0x01, 0x01, 'x', 0x8a, 0x01, 0x00};
  ds = descset_of(&standin__pbw3__all3__descriptor);
  Standin__Pbw3__All3 *g = (Standin__Pbw3__All3 *)unpack(&standin__pbw3__all3__descriptor,
                                                         (buf){(uint8_t *)os, sizeof os});
  Standin__Pbw3__All3 *r =
      (Standin__Pbw3__All3 *)unpack(pbw_descset_root(ds), (buf){(uint8_t *)os, sizeof os});
  ck_assert_int_eq(g->sub->o_case, 0);
  ck_assert_int_eq(r->sub->o_case, STANDIN__PBW3__ALL3__O_O_S);
  ck_assert_str_eq(r->sub->o_s, "x");
  protobuf_c_message_free_unpacked(&g->base, NULL);
  protobuf_c_message_free_unpacked(&r->base, NULL);
  pbw_descset_free(ds);
}
END_TEST

/* Every use of a descset that pbw_descset_from_schema accepted: unpack,
 * pack, image and free must stay inside memory (valgrind watches). */
static void exercise_descset(const void *schema, size_t slen, buf bytes) {
  pbw_descset *ds = (pbw_descset *)1;
  int rc = pbw_descset_from_schema(schema, slen, &ds);
  if (rc != PBW_OK) {
    ck_assert_ptr_null(ds);
    ck_assert(rc == PBW_E_BADSCHEMA || rc == PBW_E_UNSUPPORTED);
    return;
  }
  ProtobufCMessage *u = protobuf_c_message_unpack(pbw_descset_root(ds), NULL, bytes.n, bytes.p);
  if (u != NULL) {
    size_t n = protobuf_c_message_get_packed_size(u);
    uint8_t *out = malloc(n ? n : 1);
    ck_assert_uint_eq(protobuf_c_message_pack(u, out), n);
    void *img;
    size_t len;
    if (pbw_image_build(u, &img, &len) == PBW_OK)
      free(img);
    free(out);
    protobuf_c_message_free_unpacked(u, NULL);
  }
  pbw_descset_free(ds);
}

START_TEST(test_descset_damaged_schema_is_rejected_or_safe) {
  static const ProtobufCMessageDescriptor *const roots[] = {&standin__pbw__scalars__descriptor,
                                                            &standin__test__tree__descriptor,
                                                            &standin__pbwds__ping__descriptor};
  owned sc = unpacked_scalars(STANDIN__PBW__SCALARS__CHOICE_O_NODE);
  owned tr = unpacked_tree(STANDIN__TEST__TREE__PAYLOAD_LEAF, 5);
  buf pingb = {0};
  append(&pingb, (uint8_t[]){0x0a, 0x06, 0x0a, 0x02, 0x20, 0x01, 0x18, 0x05, 0x12, 0x00}, 10);
  buf bytes[] = {sc.bytes, tr.bytes, pingb};
  pbw_descset *ds = (pbw_descset *)1;
  ck_assert_int_eq(pbw_descset_from_schema(NULL, 0, &ds), PBW_E_BADSCHEMA);
  ck_assert_ptr_null(ds);
  for (unsigned r = 0; r < 3; r++) {
    void *schema;
    size_t slen;
    ck_assert_int_eq(pbw_schema_build(roots[r], &schema, &slen), PBW_OK);
    uint8_t *copy = malloc(slen);
    for (size_t n = 0; n < slen; n++) { /* exact size: valgrind sees over-reads */
      uint8_t *cut = malloc(n ? n : 1);
      memcpy(cut, schema, n);
      ds = (pbw_descset *)1;
      ck_assert_int_eq(pbw_descset_from_schema(cut, n, &ds), PBW_E_BADSCHEMA);
      ck_assert_ptr_null(ds);
      free(cut);
    }
    for (size_t i = 0; i < slen; i++) { /* the checksum catches any byte */
      memcpy(copy, schema, slen);
      copy[i] ^= 0x21;
      ck_assert_int_eq(pbw_descset_from_schema(copy, slen, &ds), PBW_E_BADSCHEMA);
    }
    /* resealed: only the structural and layout checks stand in the way */
    for (size_t i = 16; i < slen; i++) {
      for (int bit = 0; bit < 8; bit += 3) {
        memcpy(copy, schema, slen);
        copy[i] ^= (uint8_t)(1u << bit);
        reseal(copy, slen);
        exercise_descset(copy, slen, bytes[r]);
      }
    }
    memcpy(copy, schema, slen);
    exercise_descset(copy, slen, bytes[r]);
    free(copy);
    free(schema);
  }
  free(pingb.p);
  free_owned(&sc);
  free_owned(&tr);
}
END_TEST

/* White-box: the v2 layout documented in pb_schema.c. */
enum { SCH_HDR = 48, SCH_MSG = 36, SCH_FIELD = 40, SCH_ENUM = 32, SCH_VALUE = 12 };

typedef struct {
  uint8_t *p;
  size_t n;
  uint32_t n_msgs, n_fields, n_enums;
} sch_buf;

static uint32_t sch_get(const sch_buf *s, size_t off) {
  uint32_t v;
  memcpy(&v, s->p + off, 4);
  return v;
}

static size_t sch_field(const sch_buf *s, uint32_t k) {
  return SCH_HDR + (size_t)s->n_msgs * SCH_MSG + (size_t)k * SCH_FIELD;
}

static size_t sch_value(const sch_buf *s, uint32_t k) {
  return SCH_HDR + (size_t)s->n_msgs * SCH_MSG + (size_t)s->n_fields * SCH_FIELD +
         (size_t)s->n_enums * SCH_ENUM + (size_t)k * SCH_VALUE;
}

/* pbw_descset_from_schema of the schema with the u32 at off set to v. */
static int ds_patched(const sch_buf *s, size_t off, uint32_t v) {
  uint8_t *copy = malloc(s->n);
  pbw_descset *ds = (pbw_descset *)1;
  memcpy(copy, s->p, s->n);
  memcpy(copy + off, &v, 4);
  reseal(copy, s->n);
  int rc = pbw_descset_from_schema(copy, s->n, &ds);
  if (rc == PBW_OK)
    pbw_descset_free(ds);
  else
    ck_assert_ptr_null(ds);
  free(copy);
  return rc;
}

START_TEST(test_descset_layout_checks) {
  sch_buf s;
  void *p;
  ck_assert_int_eq(pbw_schema_build(&standin__pbw__scalars__descriptor, &p, &s.n), PBW_OK);
  s.p = p;
  s.n_msgs = sch_get(&s, 16);
  s.n_fields = sch_get(&s, 20);
  s.n_enums = sch_get(&s, 24);
  ck_assert_uint_eq(sch_get(&s, SCH_HDR + 28), sizeof(Standin__Pbw__Scalars));
  const ProtobufCFieldDescriptor *f = standin__pbw__scalars__descriptor.fields;
  uint32_t size = sizeof(Standin__Pbw__Scalars);
  /* fields 0 (i32), 1 (i64), 23..26 (the oneof), 27 (r_byt) */
  ck_assert_uint_eq(sch_get(&s, sch_field(&s, 0) + 16), f[0].offset);
  ck_assert_int_eq(ds_patched(&s, 0, 0), PBW_E_BADSCHEMA); /* unsealed damage */
  ck_assert_int_eq(ds_patched(&s, 16, sch_get(&s, 16)), PBW_OK);
  ck_assert_int_eq(ds_patched(&s, 4, 1 | 40u << 16), PBW_E_BADSCHEMA);          /* version 1 */
  ck_assert_int_eq(ds_patched(&s, 44, sch_get(&s, 44) ^ 4), PBW_E_UNSUPPORTED); /* abi */
  ck_assert_int_eq(ds_patched(&s, SCH_HDR + 28, 16), PBW_E_BADSCHEMA);          /* sizeof */
  ck_assert_int_eq(ds_patched(&s, SCH_HDR + 28, size - 8), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, SCH_HDR + 28, size + 4), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, SCH_HDR + 28, size + 8), PBW_OK); /* padding: harmless */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 16, size), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 16, size - 4), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 16, f[1].offset), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 16, f[0].offset + 1), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 16, 8), PBW_E_BADSCHEMA); /* header */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 20, 0), PBW_E_BADSCHEMA); /* no has_ */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 20, f[1].quantifier_offset), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 24) + 16, f[23].offset + 8), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 24) + 20, f[0].quantifier_offset), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 23) + 12, 0), PBW_E_BADSCHEMA); /* not ONEOF */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 27) + 12, PROTOBUF_C_FIELD_FLAG_PACKED),
                   PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 12, PROTOBUF_C_FIELD_FLAG_PACKED),
                   PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 12, 0x100), PBW_OK); /* unknown bits kept */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 1), sch_get(&s, sch_field(&s, 0))),
                   PBW_E_BADSCHEMA); /* two fields named i32 */
  /* a label change that moves a member onto another: i32 becomes repeated */
  ck_assert_int_eq(
      ds_patched(&s, sch_field(&s, 0) + 8, PROTOBUF_C_LABEL_REPEATED | PROTOBUF_C_TYPE_INT32 << 8),
      PBW_E_BADSCHEMA);
  /* default flags: an initial value for a string, NULL data for a number */
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 14) + 8,
                              PROTOBUF_C_LABEL_OPTIONAL | PROTOBUF_C_TYPE_STRING << 8 | 2u << 16),
                   PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 8,
                              PROTOBUF_C_LABEL_OPTIONAL | PROTOBUF_C_TYPE_INT32 << 8 | 1u << 16),
                   PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_field(&s, 0) + 8,
                              PROTOBUF_C_LABEL_OPTIONAL | PROTOBUF_C_TYPE_INT32 << 8 | 2u << 16),
                   PBW_OK);
  /* Mood values ANGRY -3, CALM 0, HAPPY 1: out of order */
  ck_assert_uint_eq(s.n_enums, 1);
  ck_assert_int_eq(ds_patched(&s, sch_value(&s, 0) + 8, 5), PBW_E_BADSCHEMA);
  ck_assert_int_eq(ds_patched(&s, sch_value(&s, 0) + 8, (uint32_t)-4), PBW_OK);
  free(p);
}
END_TEST

/* The plain stream refers into the packed bytes for blobs pack writes as
 * they are; arrays of numbers it writes as varints, or with a tag each,
 * are never looked for there (each search scanned the whole message: the
 * replay database of a 1 MB message of small arrays took seconds). The
 * packed fixed32 array is found and referred to, the others are inline. */
START_TEST(test_stream_looks_up_only_arrays_pack_writes_raw) {
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Test__Leaf leaf = STANDIN__TEST__LEAF__INIT;
  uint32_t ids[40];
  uint64_t un[40];
  int32_t vals[40];
  for (int i = 0; i < 40; i++)
    ids[i] = 0x01020304u * (uint32_t)(i + 1), un[i] = (uint64_t)i * 1000003u, vals[i] = -i * 7;
  t.title = "arrays";
  t.n_packed_ids = 40;
  t.packed_ids = ids;
  t.n_unpacked_ids = 40;
  t.unpacked_ids = un;
  leaf.n_values = 40;
  leaf.values = vals;
  t.payload_case = STANDIN__TEST__TREE__PAYLOAD_LEAF;
  t.leaf = &leaf;
  buf b = pack(&t.base);
  uint8_t *plain, *r;
  size_t len = stream_of(&t.base, &plain);
  unsigned long before = pbw__ref_searches;
  size_t rlen = ref_stream_of(&t.base, b.p, b.n, &r);
  ck_assert_uint_eq(pbw__ref_searches - before, 1);
  ck_assert_uint_eq(rlen, len - sizeof ids); /* the fixed32 array only */
  ck_assert(pbw_tree_matches(&t.base, r, rlen, b.p, b.n));
  pbw__plans_off = 1; /* the interpreted walk alike */
  free(r);
  before = pbw__ref_searches;
  ck_assert_uint_eq(ref_stream_of(&t.base, b.p, b.n, &r), rlen);
  ck_assert_uint_eq(pbw__ref_searches - before, 1);
  pbw__plans_off = 0;
  free(r);
  free(plain);
  free(b.p);
}
END_TEST

START_TEST(test_strerror_names_every_code) {
  for (int e = PBW_OK; e <= PBW_E_BADDATA; e++)
    ck_assert_str_ne(pbw_strerror(e), pbw_strerror(-1));
}
END_TEST

static TCase *tcase(const char *name) {
  TCase *tc = tcase_create(name);
  tcase_set_timeout(tc, 600); /* valgrind */
  return tc;
}

int main(void) {
  Suite *s = suite_create("pb_walk");
  TCase *img = tcase("image"), *bad = tcase("image_damage"), *fp = tcase("fingerprint");
  TCase *st = tcase("stats"), *js = tcase("schema_json"), *ds = tcase("descset");
  tcase_add_test(img, test_image_roundtrip_sample_tree_packs_identically);
  tcase_add_test(img, test_stream_looks_up_only_arrays_pack_writes_raw);
  tcase_add_test(img, test_image_roundtrip_sample3_batch_packs_identically);
  tcase_add_test(img, test_image_roundtrip_all_scalar_types);
  tcase_add_test(img, test_image_field_by_field_equals_unpacked_tree);
  tcase_add_test(img, test_image_of_equal_trees_is_identical);
  tcase_add_test(img, test_image_rebinds_default_pointers);
  tcase_add_test(img, test_image_uses_one_allocation_of_alloc_size);
  tcase_add_test(img, test_image_with_many_types_bypasses_cache);
  tcase_add_test(img, test_image_wrong_descriptor_is_schema_error);
  tcase_add_test(img, test_image_memo_only_for_what_it_checked);
  tcase_add_test(img, test_image_rejects_uncapturable_trees);
  tcase_add_test(img, test_image_depth_limit);
  tcase_add_test(bad, test_image_truncated_at_every_length_is_bad);
  tcase_add_test(bad, test_image_flipped_bytes_are_rejected_or_valid);
  tcase_add_test(bad, test_image_resealed_damage_never_escapes_the_block);
  tcase_add_test(bad, test_image_resealed_split_damage_never_escapes_the_pieces);
  tcase_add_test(bad, test_image_resealed_refs_damage_never_escapes);
  tcase_add_test(bad, test_image_refer_finds_runs_past_false_starts);
  tcase_add_test(bad, test_image_split_section_checks);
  tcase_add_test(bad, test_image_structural_checks);
  tcase_add_test(bad, test_image_shapes_build_alike_images);
  tcase_add_test(fp, test_fp_equal_trees_give_equal_fingerprints);
  tcase_add_test(fp, test_fp_golden_value);
  tcase_add_test(fp, test_fp_bytes_without_data_are_not_empty_bytes);
  tcase_add_test(fp, test_fp_memo_is_the_fingerprint_of_the_tree_now);
  tcase_add_test(fp, test_fp_any_single_change_changes_fingerprint);
  tcase_add_test(fp, test_snap_holds_until_any_change);
  tcase_add_test(fp, test_snap_keeps_proto3_strings_pack_leaves_out);
  tcase_add_test(fp, test_snap_walk_is_snap_take);
  tcase_add_test(fp, test_fp_long_streams_depend_on_every_chunk);
  tcase_add_test(fp, test_fp_follows_what_pack_writes);
  tcase_add_test(fp, test_fp_depth_limit);
  tcase_add_test(fp, test_fp_bytes_depends_on_type_and_every_byte);
  tcase_add_test(fp, test_fp_from_hash_is_fp_bytes);
  tcase_add_test(fp, test_hash_leaves_ymm_uppers_clean);
  tcase_add_test(st, test_stats_of_hand_built_branch);
  tcase_add_test(st, test_stats_from_bytes_match_tree_stats);
  tcase_add_test(st, test_stats_null_message_slots_count_as_packed);
  tcase_add_test(st, test_stats_from_bytes_follow_unpack_on_odd_encodings);
  tcase_add_test(js, test_json_of_known_branch);
  tcase_add_test(js, test_json_of_every_type_and_unknown_fields);
  tcase_add_test(js, test_json_proto3_and_maps);
  tcase_add_test(js, test_json_follows_unpack_on_odd_encodings);
  tcase_add_test(js, test_json_depth_limit);
  tcase_add_test(js, test_schema_damage_is_detected);
  tcase_add_test(js, test_schema_id_tells_changed_types);
  tcase_add_test(js, test_json_damaged_data_is_rejected_or_decoded);
  tcase_add_test(js, test_json_rejects_malformed_records);
  tcase_add_test(js, test_strerror_names_every_code);
  tcase_add_test(ds, test_descset_matches_generated_descriptors);
  tcase_add_test(ds, test_descset_offline_replay_sample_tree);
  tcase_add_test(ds, test_descset_offline_replay_proto3);
  tcase_add_test(ds, test_descset_offline_replay_every_scalar_type);
  tcase_add_test(ds, test_descset_offline_replay_required_and_odd_encodings);
  tcase_add_test(ds, test_descset_offline_replay_recursive_and_chained_types);
  tcase_add_test(ds, test_descset_offline_replay_mutual_recursion_and_odd_defaults);
  tcase_add_test(ds, test_descset_merges_like_generated_code);
  tcase_add_test(ds, test_descset_damaged_schema_is_rejected_or_safe);
  tcase_add_test(ds, test_descset_layout_checks);
  suite_add_tcase(s, img);
  suite_add_tcase(s, bad);
  suite_add_tcase(s, fp);
  suite_add_tcase(s, st);
  suite_add_tcase(s, js);
  suite_add_tcase(s, ds);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

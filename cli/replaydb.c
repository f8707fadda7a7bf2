/* replaydb.c — build the replay database: group recorded calls by request
 * fingerprint, order each request's occurrences by time (across every
 * process of the recording), evaluate the plan's model for each occurrence,
 * and lay it all out in one unnamed file the replay shim maps (publish). */
#include "replaydb.h"
#include "rdb_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "jpeg_regen.h"
#include "jpeg_req.h"
#include "pb_walk.h"
#include "scan.h"
#include "shim.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- grouping calls by fingerprint -------------------------------------- */

static int is_protobuf_api(int api) {
  return api == ST_API_PB_PACK || api == ST_API_PB_SIZE || api == ST_API_PB_PACK_BUF ||
         api == ST_API_PB_UNPACK;
}

enum { NEAR_PB = 1, NEAR_JPEG = 2 };

typedef struct {
  uint64_t start_ns;
  rdb_sample s;     /* decided when the call is read: the plan needs its site */
  uint32_t next_id; /* b_entry.id + 1 of the call that followed on its thread
                       with the same API (rdb_sample.next), 0: none */
  uint32_t source;  /* plan_decision.source_ns (rdb_header.sources_off) */
} b_sample;

typedef struct {
  uint8_t fp[16];
  uint8_t api, flags;
  /* --on-miss nearest (near_items): NEAR_PB or NEAR_JPEG when the request
   * has a size to be found by (near_key), and its variant */
  uint8_t near;
  uint64_t near_key, near_variant;
  uint64_t result, req_len, resp_len;
  uint64_t req1, resp1; /* offset + 1 of the bytes in builder.data, 0: none */
  uint8_t tree_fp[16];  /* pack responses: fingerprint of the decoded bytes */
  /* verified tree requests: offset + 1 of the plain stream (rdb_entry) in
   * builder.streams, 0: none */
  uint64_t stream1;
  uint64_t stream_len;
  /* b_entry.id + 1 of the entry whose response the stream's references
   * are into (itself for a pack), 0: none */
  uint32_t ref_id1;
  const ProtobufCMessageDescriptor *desc; /* verified pack responses: their type */
  uint32_t id;      /* order of creation: b_sample.next_id survives sorting */
  const char *type; /* interned: equal names, one pointer (builder.names) */
  uint32_t name;    /* its index in builder.names */
  /* protobuf: pbw_schema_id of its type in the files it was recorded in
   * (0: unknown); mixed: two of them (RDB_ENTRY_MIXED) */
  uint64_t schema_id;
  uint8_t mixed;
  /* pack entries: the file (b->files + 1) and blob id of an occurrence
   * whose bytes are the entry's response (same_answer) */
  uint64_t resp_file, resp_blob;
  /* JPEG entries: XXH3-128 of the first occurrence's response blob (its
   * rows, or their digest); has_resp_h: taken */
  XXH128_hash_t resp_h;
  uint8_t has_resp_h;
  b_sample *s;
  uint32_t n, cap;
  int direct; /* its type and API are kept whole in software (rdb_class) */
  /* JPEG: some call's decision changed with its restart markers toggled
   * (restart_probe), so it may not stand in for decodes of the other
   * restart variant under --on-miss nearest */
  uint8_t restart_bound;
  /* JPEG: only decodes given up have made this request so far (its samples
   * are all RDB_SW_ABANDONED, its response none): given_up_attach moves
   * them to the entry of their image decoded whole, and drops it */
  uint8_t given_up_only;
} b_entry;

/* Type names, once each: entries point at them, and the database stores
 * each once (equal types have equal type_off: rep_protobuf.c). */
typedef struct {
  char **name;
  uint64_t *off; /* in the database, set by layout */
  size_t n, cap;
  uint32_t *slots; /* index + 1, open addressing on rdb_name_hash */
  size_t mask;
} b_names;

static size_t names_slot(const b_names *t, const char *s) {
  size_t j = (size_t)rdb_name_hash(s) & t->mask;
  while (t->slots[j] && strcmp(t->name[t->slots[j] - 1], s) != 0)
    j = (j + 1) & t->mask;
  return j;
}

/* The index of s in t, added if new; -1 out of memory. */
static long names_intern(b_names *t, const char *s) {
  if ((t->n + 1) * 2 > (t->slots ? t->mask + 1 : 0)) {
    size_t n = t->slots ? (t->mask + 1) * 2 : 64;
    uint32_t *sl = calloc(n, sizeof *sl);
    if (!sl)
      return -1;
    free(t->slots);
    t->slots = sl;
    t->mask = n - 1;
    for (size_t i = 0; i < t->n; i++)
      t->slots[names_slot(t, t->name[i])] = (uint32_t)i + 1;
  }
  size_t j = names_slot(t, s);
  if (t->slots[j])
    return (long)t->slots[j] - 1;
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    char **nn = realloc(t->name, cap * sizeof *nn);
    uint64_t *no = nn ? realloc(t->off, cap * sizeof *no) : NULL;
    if (nn)
      t->name = nn;
    if (!no)
      return -1;
    t->off = no;
    t->cap = cap;
  }
  if (!(t->name[t->n] = strdup(s)))
    return -1;
  t->off[t->n] = 0;
  t->slots[j] = (uint32_t)t->n + 1;
  return (long)t->n++;
}

/* Where layout put name s, one of t's. */
static uint64_t names_off_of(const b_names *t, const char *s) {
  uint32_t k = t->slots[names_slot(t, s)];
  return k ? t->off[k - 1] : 0;
}

static void names_free(b_names *t) {
  for (size_t i = 0; i < t->n; i++)
    free(t->name[i]);
  free(t->name);
  free(t->off);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

/* Descriptors rebuilt from a recorded schema, keyed by the schema's hash
 * (type ids differ from file to file, schemas do not). */
typedef struct {
  uint64_t hash;
  pbw_descset *ds; /* NULL: the schema could not be rebuilt */
} b_descset;

typedef struct {
  b_entry *e;
  size_t n, cap;
  /* index + 1 in the low 32 bits, slot_tag of its fingerprint above: a
   * probe compares fingerprints only where the tags agree, so a lookup
   * reads one entry, not every entry its probe passes (a cache miss each:
   * 14% of building protogen -n 2000's database, 340,000 entries) */
  uint64_t *slots;
  size_t nslots;
  uint64_t unusable, files, images_failed, packs_not_canonical, requests_unlike_fp;
  unsigned unserved;      /* rdb_header.jpeg_unserved */
  uint64_t pixels_failed; /* JPEG decodes whose rows could not be rebuilt */
  char pixels_why[160];   /* the first one's reason */
  uint64_t start_ns;
  b_descset *ds;
  size_t nds;
  const plan *plan;
  int probe_restart; /* the plan's models may be asked again (plan_stateful) */
  /* accel[i]'s model predicts from the recorded latency (software, scale) */
  uint8_t as_recorded[PLAN_MAX_ACCEL];
  uint64_t file_as_recorded_calls, file_as_recorded_ns; /* in the file being read */
  rdb_built *out;
  /* the latest call of each thread and API in the file being read:
   * last[thread * ST_API_MAX + api] */
  struct b_last {
    uint32_t id1;    /* its entry's id + 1, 0: none yet */
    uint32_t sample; /* its sample in that entry */
  } * last;
  size_t nlast;
  size_t last_for; /* b->files + 1 of the file they are for */
  rdb_arena data;    /* requests and responses (b_entry.req1, resp1) */
  /* where the file being read had its blobs kept in data, by blob id - 1
   * (emptied before each file: kept_forget): a file stores a payload once,
   * and calls of new entries often name one an earlier call stored chunks
   * before (keep_blob) */
  struct b_kept {
    uint64_t off1, len; /* off1: offset + 1 in data, 0: not kept yet */
  } * kept;
  size_t nkept;
  rdb_arena streams; /* plain streams (b_entry.stream1) */
  b_names names;
  struct b_stuck {
    rdb_stuck s;  /* fp filled at layout */
    uint32_t id1; /* the given-up decode's entry id + 1, 0: none */
  } * stuck;      /* abandoned decodes (rdb.h) */
  size_t nstuck, capstuck;
  rdb_drop *drops; /* bytes programs dropped (rdb.h) */
  size_t ndrops, capdrops;
  rdb_prefix *prefixes; /* how recorded libjpeg requests begin (rdb.h) */
  size_t nprefixes, capprefixes;
  int any_source; /* some sample waits for the program's callbacks (b_sample.source) */
  /* after given_up_attach dropped entries: the ids there were (b_entry.id
   * < nids), and for each the id + 1 of the entry its occurrences joined,
   * 0: none or not dropped; NULL: none dropped */
  uint32_t *redirect;
  size_t nids;
  uint64_t given_up_calls; /* samples given_up added */
  /* the protobuf types of every file, with their schemas' identities
   * (rdb_schema): sorted and made unique by layout */
  struct b_schema {
    uint64_t hash; /* rdb_name_hash of the name: the shim searches by it */
    uint32_t name; /* index in names */
    uint64_t id;   /* pbw_schema_id, 0: unknown */
  } * schemas;
  size_t nschemas, capschemas;
  int oom; /* an arena or the names ran out of memory */
} builder;

static const uint8_t *req_of(const builder *b, const b_entry *e) {
  return rdb_arena_at(&b->data, e->req1);
}

static const uint8_t *resp_of(const builder *b, const b_entry *e) {
  return rdb_arena_at(&b->data, e->resp1);
}

/* Offset + 1 of a copy of p[0, len) in a, or 0 (b->oom set) */
static uint64_t keep_bytes(builder *b, rdb_arena *a, const void *p, uint64_t len) {
  uint64_t o = rdb_arena_put(a, p, len);
  if (!o)
    b->oom = 1;
  return o;
}

/* Fingerprint bits the slot keeps: others than rdb_hash's, which place it. */
static inline uint64_t slot_tag(const uint8_t fp[16]) {
  uint32_t t;
  memcpy(&t, fp + 8, 4);
  return (uint64_t)t << 32;
}

static int grow_slots(builder *b) {
  size_t ns = b->nslots ? b->nslots * 2 : 1024;
  uint64_t *t = calloc(ns, sizeof *t);
  if (!t)
    return -1;
  for (size_t i = 0; i < b->n; i++) {
    size_t j = rdb_hash(b->e[i].fp) & (ns - 1);
    while (t[j])
      j = (j + 1) & (ns - 1);
    t[j] = slot_tag(b->e[i].fp) | ((uint64_t)i + 1);
  }
  free(b->slots);
  b->slots = t;
  b->nslots = ns;
  return 0;
}

/* Index + 1 of the entry in slot j, 0 if it is empty. */
static inline uint32_t slot_entry(const builder *b, size_t j) {
  return (uint32_t)b->slots[j];
}

/* Slot of fp: its entry's, or the empty one where it would go. */
static size_t slot_of(const builder *b, const uint8_t fp[16]) {
  size_t j = rdb_hash(fp) & (b->nslots - 1);
  uint64_t tag = slot_tag(fp);
  for (uint64_t v; (v = b->slots[j]) != 0; j = (j + 1) & (b->nslots - 1))
    if ((v & ~(uint64_t)UINT32_MAX) == tag && memcmp(b->e[(uint32_t)v - 1].fp, fp, 16) == 0)
      break;
  return j;
}

static b_entry *find_entry(const builder *b, const uint8_t fp[16]) {
  if (!b->nslots)
    return NULL;
  size_t j = slot_of(b, fp);
  return slot_entry(b, j) ? &b->e[slot_entry(b, j) - 1] : NULL;
}

static b_entry *find_or_add(builder *b, const uint8_t fp[16], int *created) {
  *created = 0;
  if ((b->n + 1) * 2 > b->nslots && grow_slots(b) != 0)
    return NULL;
  size_t j = slot_of(b, fp);
  if (slot_entry(b, j))
    return &b->e[slot_entry(b, j) - 1];
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap + b->cap / 2 : 256; /* 1.5x: entries are large */
    b_entry *ne = realloc(b->e, cap * sizeof *ne);
    if (!ne)
      return NULL;
    b->e = ne;
    b->cap = cap;
  }
  b_entry *e = &b->e[b->n];
  memset(e, 0, sizeof *e);
  memcpy(e->fp, fp, 16);
  e->id = (uint32_t)b->n;
  b->slots[j] = slot_tag(fp) | (uint64_t)++b->n;
  *created = 1;
  return e;
}

/* *p, an array of *n elements of `size` bytes, grown (doubling, from
 * `first`) to hold `need`, the new elements zeroed; -1 out of memory, *p
 * as it was. */
static int grow_zeroed(void **p, size_t *n, size_t need, size_t size, size_t first) {
  if (need <= *n)
    return 0;
  size_t m = *n ? *n : first;
  while (m < need)
    m *= 2;
  void *q = realloc(*p, m * size);
  if (!q)
    return -1;
  memset((char *)q + *n * size, 0, (m - *n) * size);
  *p = q;
  *n = m;
  return 0;
}

/* Another file is read next: its blob ids name other blobs. */
static void kept_forget(builder *b) {
  if (b->kept)
    memset(b->kept, 0, b->nkept * sizeof *b->kept);
}

/* Remember that blob id (one the reader found) of the file being read was
 * kept at off1 (offset + 1) in b->data; out of memory, it is not. */
static void kept_put(builder *b, uint64_t id, uint64_t off1, uint64_t len) {
  if (grow_zeroed((void **)&b->kept, &b->nkept, id, sizeof *b->kept, 1024) != 0)
    return;
  b->kept[id - 1] = (struct b_kept){off1, len};
}

/* Blob id of f kept in b->data: its offset + 1, or 0 (none, unreadable, or
 * out of memory). A blob kept before is not read again: reading one that
 * lies chunks behind the stream costs inflating its chunk (building
 * protogen -n 2000's database read 328 chunks again so). */
static uint64_t keep_blob(builder *b, scan_file *f, uint64_t id, uint64_t *len) {
  const void *data;
  if (!id)
    return 0;
  if (id <= b->nkept && b->kept[id - 1].off1) {
    *len = b->kept[id - 1].len;
    return b->kept[id - 1].off1;
  }
  if (st_reader_blob(f->r, id, &data, len) != ST_OK)
    return 0;
  uint64_t o = keep_bytes(b, &b->data, data, *len);
  if (o) /* id is one of the file's blobs (the reader checked it) */
    kept_put(b, id, o, *len);
  return o;
}

static const ProtobufCMessageDescriptor *descriptor_of(builder *b, const scan_type *t) {
  uint64_t h = t->schema_hash; /* hashed once per file (a schema is KBs: 9% of a build) */
  for (size_t i = 0; i < b->nds; i++)
    if (b->ds[i].hash == h)
      return b->ds[i].ds ? pbw_descset_root(b->ds[i].ds) : NULL;
  b_descset *n = realloc(b->ds, (b->nds + 1) * sizeof *n);
  if (!n)
    return NULL;
  b->ds = n;
  b_descset *d = &b->ds[b->nds++];
  d->hash = h;
  if (pbw_descset_from_schema(t->schema, t->schema_len, &d->ds) != PBW_OK)
    d->ds = NULL;
  return d->ds ? pbw_descset_root(d->ds) : NULL;
}

/* Whether an unpack entry's fingerprint is that of its saved bytes. The
 * shim answers a request whose fingerprint is the entry's without
 * comparing the bytes (rep_protobuf.c lookup_bytes), so a trace whose
 * fingerprint is not that of its bytes (damaged, or doctored with valid
 * checksums) must give no tree. */
static int unpack_fp_ok(const scan_file *f, const st_call *c, const b_entry *e,
                        const uint8_t *req) {
  uint64_t h[2];
  uint8_t fp[16];
  if (!req)
    return 0;
  pbw_hash_bytes(req, e->req_len, h);
  pbw_fingerprint_named(pbw_name_hash(scan_type_name(f, c->type)), h, e->req_len, fp);
  shim_fp_bind(fp, ST_API_PB_UNPACK);
  return memcmp(fp, e->fp, 16) == 0;
}

/* The recording kept only the bytes an unpack parsed. Parse them here, once,
 * with the real library against descriptors rebuilt from the recorded
 * schema (which carries the program's C layout), and keep the relocatable
 * image that the replayed program will materialise without parsing. */
static uint64_t unpack_image(builder *b, scan_file *f, const st_call *c, const b_entry *e,
                             uint64_t *img_len) {
  const uint8_t *req = req_of(b, e);
  if (!req || c->type >= f->ntypes || !f->types[c->type].schema)
    return 0;
  const ProtobufCMessageDescriptor *d = descriptor_of(b, &f->types[c->type]);
  if (!d)
    return 0;
  ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, e->req_len, req);
  if (!m)
    return 0;
  void *img = NULL;
  size_t il = 0;
  int rc = pbw_image_build(m, &img, &il);
  protobuf_c_message_free_unpacked(m, NULL);
  /* its long strings and bytes are the request's: the shim copies them
   * from the program's bytes, whose fingerprint it found equal */
  size_t full = il;
  if (rc == PBW_OK)
    rc = pbw_image_refer(&img, &il, req, e->req_len);
  if (rc != PBW_OK) {
    free(img);
    return 0;
  }
  b->out->referred_bytes += full - il;
  *img_len = il;
  uint64_t o = keep_bytes(b, &b->data, img, il);
  free(img);
  return o;
}

/* The tree a pack entry's response decodes to with the recorded schema,
 * or NULL; the caller frees it with protobuf_c_message_free_unpacked. */
static ProtobufCMessage *pack_tree(builder *b, scan_file *f, const b_entry *e, const st_call *c) {
  if ((e->api != ST_API_PB_PACK && e->api != ST_API_PB_PACK_BUF) || !e->resp1 ||
      e->resp_len != e->result || c->type >= f->ntypes || !f->types[c->type].schema)
    return NULL;
  const ProtobufCMessageDescriptor *d = descriptor_of(b, &f->types[c->type]);
  return d ? protobuf_c_message_unpack(d, NULL, e->resp_len, resp_of(b, e)) : NULL;
}

/* e's tree's plain stream, its references into e's response (which pack
 * wrote from that tree); one longer than RDB_SHORT_STREAM only with long_ok,
 * and none longer than RDB_LONG_STREAM. */
static void make_stream(builder *b, b_entry *e, const ProtobufCMessage *m, int long_ok) {
  uint8_t *st;
  size_t len;
  if (pbw_tree_stream(m, resp_of(b, e), e->resp_len, &st, &len) != PBW_OK)
    return;
  if (len <= (long_ok ? RDB_LONG_STREAM : RDB_SHORT_STREAM)) {
    e->stream1 = keep_bytes(b, &b->streams, st, len);
    e->stream_len = e->stream1 ? len : 0;
    e->ref_id1 = e->stream1 ? e->id + 1 : 0;
  }
  free(st);
}

/* Whether m packs to exactly the n bytes at p (m: those bytes decoded). */
static int packs_back(const ProtobufCMessage *m, const uint8_t *p, uint64_t n) {
  if (protobuf_c_message_get_packed_size(m) != n)
    return 0;
  uint8_t small[512], *out = n <= sizeof small ? small : malloc(n);
  if (!out)
    return 1; /* no memory to check: as before */
  int same = protobuf_c_message_pack(m, out) == n && memcmp(out, p, n) == 0;
  if (out != small)
    free(out);
  return same;
}

/* A pack response is trusted to be the packed size of the program's tree
 * only if it decodes, with the recorded schema, to a tree that has the
 * request's fingerprint (see RDB_ENTRY_SIZE_OK); the shim checks the others
 * against the real size. A verified entry keeps its tree's plain stream
 * when it is short (RDB_SHORT_STREAM: the usual case when most of a
 * message is long strings or bytes, which the stream refers to in the
 * response); keep_stream gives one to an entry recorded more than once. */
static void verify_pack(builder *b, scan_file *f, b_entry *e, const st_call *c) {
  ProtobufCMessage *m = pack_tree(b, f, e, c);
  uint8_t fp[16];
  if (m && !packs_back(m, resp_of(b, e), e->resp_len)) {
    /* bytes pack never writes (a hand-built unknown field under a known
     * field's number, an overlong varint, a bool of 2): their fingerprint,
     * derived from the bytes, is an ordinary tree's, which packs otherwise */
    e->flags |= RDB_ENTRY_NO_RESPONSE;
    b->packs_not_canonical++;
  } else if (m && pbw_fingerprint_tree(m, fp, NULL) == PBW_OK) {
    memcpy(e->tree_fp, fp, 16);
    shim_fp_bind(fp, e->api);
    if (!memcmp(fp, e->fp, 16)) {
      e->flags |= RDB_ENTRY_SIZE_OK;
      e->desc = m->descriptor; /* rebuilt from the schema: lives as long as b */
      make_stream(b, e, m, 0);
    }
  }
  if (m)
    protobuf_c_message_free_unpacked(m, NULL);
}

/* A verified pack entry recorded more than once keeps its tree's plain
 * stream (rdb_entry.stream_off) whatever its length: replay compares a
 * tree with a long stream only once the run has served the entry, so an
 * entry recorded once would never need it (long streams of requests seen
 * once would add up to their responses' size to the database). */
static void keep_stream(builder *b, b_entry *e) {
  if (!(e->flags & RDB_ENTRY_SIZE_OK) || e->stream1 || !e->desc || !e->resp1)
    return;
  ProtobufCMessage *m = protobuf_c_message_unpack(e->desc, NULL, e->resp_len, resp_of(b, e));
  if (m) {
    make_stream(b, e, m, 1);
    protobuf_c_message_free_unpacked(m, NULL);
  }
}

/* get_packed_size of a tree whose pack response was verified: its answer
 * is trusted when it is that response's length. */
static void verify_sizes(builder *b) {
  for (size_t i = 0; i < b->n; i++) {
    const b_entry *p = &b->e[i];
    if (!(p->flags & RDB_ENTRY_SIZE_OK) || p->api == ST_API_PB_SIZE)
      continue;
    uint8_t fp[16];
    memcpy(fp, p->tree_fp, 16);
    shim_fp_bind(fp, ST_API_PB_SIZE);
    b_entry *s = find_entry(b, fp);
    if (s && s->api == ST_API_PB_SIZE && s->result == p->resp_len) {
      s->flags |= RDB_ENTRY_SIZE_OK;
      if (!s->stream1 && (s->n >= 2 || p->stream1)) {
        if (s->n >= 2)
          keep_stream(b, &b->e[i]); /* the pack may have been recorded once */
        if (p->stream1) { /* the same tree's */
          s->stream1 = p->stream1;
          s->stream_len = p->stream_len;
          s->ref_id1 = p->ref_id1;
        }
      }
    }
  }
}

/* The recording kept a digest of a decode's rows (jpeg_req.h): decode the
 * request again, once, and keep the rows if they are the recorded ones. A
 * decode that does not give them back runs the real library in replay. */
static void rebuild_rows(builder *b, const st_call *c, b_entry *e, const void *digest,
                         uint64_t digest_len) {
  uint8_t *rows = NULL;
  char why[sizeof b->pixels_why];
  int rc = c->api == ST_API_JPEG_DECODE || c->api == ST_API_TJ_DECODE
               ? jpg_regenerate(req_of(b, e), e->req_len, digest, digest_len, c->resp_len, &rows,
                                why, sizeof why)
               : (snprintf(why, sizeof why, "API %d keeps no digests", c->api), -1);
  e->resp1 = rc == 0 ? keep_bytes(b, &b->data, rows, c->resp_len) : 0;
  e->resp_len = e->resp1 ? c->resp_len : 0;
  free(rows);
  if (rc != 0 && b->pixels_failed++ == 0)
    snprintf(b->pixels_why, sizeof b->pixels_why, "%s", why);
}

static void fill_entry(builder *b, scan_file *f, b_entry *e, const st_call *c) {
  e->api = c->api;
  if (is_protobuf_api(c->api) && c->nfeat > ST_PBF_ENCODED_SIZE) {
    e->near = NEAR_PB;
    e->near_key = c->feat[ST_PBF_ENCODED_SIZE];
  } else if (st_api_family(c->api) == ST_FAMILY_JPEG && c->nfeat > ST_JPF_SCALE_DENOM) {
    e->near = NEAR_JPEG;
    e->near_key = c->feat[ST_JPF_WIDTH] * c->feat[ST_JPF_HEIGHT];
  }
  e->result = c->result;
  long name = names_intern(&b->names, scan_type_name(f, c->type));
  if (name < 0) {
    b->oom = 1;
    return;
  }
  e->name = (uint32_t)name;
  e->type = b->names.name[name];
  if (c->flags & ST_CALL_FAILED)
    e->flags |= RDB_ENTRY_FAILED;
  e->req1 = keep_blob(b, f, c->req_blob, &e->req_len);
  const void *digest;
  if ((c->flags & ST_CALL_RESP_DIGEST) && c->resp_blob &&
      st_reader_blob(f->r, c->resp_blob, &digest, &e->resp_len) == ST_OK)
    rebuild_rows(b, c, e, digest, e->resp_len); /* the rows, not the digest */
  else
    e->resp1 = keep_blob(b, f, c->resp_blob, &e->resp_len);
  if (c->api == ST_API_PB_UNPACK && !(c->flags & ST_CALL_FAILED) &&
      !unpack_fp_ok(f, c, e, req_of(b, e))) {
    b->requests_unlike_fp += e->req1 != 0; /* a tree given in the trace too */
    e->resp1 = 0;
  } else if (c->api == ST_API_PB_UNPACK && !e->resp1 && !(c->flags & ST_CALL_FAILED)) {
    e->resp1 = unpack_image(b, f, c, e, &e->resp_len);
    b->images_failed += e->resp1 == 0;
  }
  if (!e->req1)
    e->req_len = 0;
  if (!e->resp1)
    e->resp_len = 0;
  if (e->near == NEAR_JPEG) { /* planes or pixels: what the request asked for */
    jpg_params p;
    const uint8_t *cmap, *jpeg, *req = req_of(b, e);
    size_t jlen;
    int planar =
        req && jpg_req_parse(req, e->req_len, &p, &cmap, &jpeg, &jlen) == 0 && jpg_planar(&p);
    e->near_variant = rdb_near_variant(c->feat[ST_JPF_SCALE_NUM], c->feat[ST_JPF_SCALE_DENOM],
                                       c->feat[ST_JPF_RESTART], planar);
  }
  if ((c->flags & ST_CALL_NO_RESPONSE) || (c->resp_blob && !e->resp1))
    e->flags |= RDB_ENTRY_NO_RESPONSE;
  if (c->api != ST_API_PB_SIZE && !e->resp1 && !(c->flags & ST_CALL_FAILED))
    e->flags |= RDB_ENTRY_NO_RESPONSE;
  verify_pack(b, f, e, c);
}

static void count_why(builder *b, int accel, const char *why) {
  rdb_built *o = b->out;
  for (size_t i = 0; i < o->nwhy; i++)
    if (o->why[i].accel == accel && o->why[i].why == why) {
      o->why[i].n++;
      return;
    }
  struct rdb_why *n = realloc(o->why, (o->nwhy + 1) * sizeof *n);
  if (!n)
    return;
  o->why = n;
  o->why[o->nwhy++] = (struct rdb_why){accel, why, 1};
}

static int same_decision(const plan_decision *x, const plan_decision *y) {
  return x->outcome == y->outcome && x->accel == y->accel && x->service_ns == y->service_ns &&
         x->busy_ns == y->busy_ns && x->link_in_ns == y->link_in_ns &&
         x->link_out_ns == y->link_out_ns && x->fault_ns == y->fault_ns &&
         x->source_ns == y->source_ns && x->out_cold == y->out_cold;
}

/* Whether the plan decides a JPEG decode as it decided it (d) with the
 * image's restart markers toggled: none for an image that has them; for
 * one that has none, an interval of 1 MCU and of 65535 (the largest a DRI
 * marker holds). If so, under --on-miss nearest the decode may stand in
 * for a decode of the other restart variant (rdb_near_variant). */
static int restart_blind(const builder *b, const standin_request *r, const st_site *site,
                         uint64_t size, uint64_t resp_bytes, const plan_decision *d) {
  if (r->nfeat <= ST_JPF_RESTART || r->nfeat > ST_MAX_FEAT)
    return 0;
  uint64_t feat[ST_MAX_FEAT];
  memcpy(feat, r->feat, r->nfeat * sizeof *feat);
  standin_request q = *r;
  q.feat = feat;
  static const uint64_t none[] = {0}, some[] = {1, 65535};
  const uint64_t *probe = r->feat[ST_JPF_RESTART] ? none : some;
  size_t n = r->feat[ST_JPF_RESTART] ? 1 : 2;
  for (size_t i = 0; i < n; i++) {
    feat[ST_JPF_RESTART] = probe[i];
    plan_decision p;
    plan_evaluate(b->plan, &q, site, size, resp_bytes, &p);
    if (!same_decision(&p, d))
      return 0;
  }
  return 1;
}

/* Decide one recorded call (plan_evaluate): which accelerator, its
 * predicted service time and link cost, or why it stays in software. The
 * model sees the entry's saved bytes. */
static void evaluate(builder *b, scan_file *f, b_entry *e, const st_call *c, b_sample *bs) {
  rdb_sample *out = &bs->s;
  memset(out, 0, sizeof *out);
  bs->source = 0;
  out->recorded_ns = c->latency_ns;
  out->accel = -1;
  out->sw_reason = RDB_SW_NOT_SELECTED;
  const st_site *site = c->site && c->site < f->nsites && f->sites[c->site].label
                            ? &f->sites[c->site].site
                            : NULL;
  uint64_t size = plan_request_size(c);
  /* the request the offline commands give the model (analysis.c), so that
   * whatif and replay predict alike: the call's sizes and features (the
   * entry's but for what was measured of this call alone,
   * out_cold_permille), and for a JPEG decode its request bytes. The
   * entry's other bytes (a pack's output, an unpack's tree image, rows)
   * had made linear's replay 15% apart from its whatif. */
  standin_request r;
  plan_request(&r, c, e->type);
  if (st_api_family(e->api) == ST_FAMILY_JPEG && e->req1) {
    r.req = req_of(b, e);
    r.req_len = e->req_len;
  }
  plan_decision d;
  plan_evaluate(b->plan, &r, site, size, c->resp_len, &d);
  if (d.outcome == PLAN_UNSUPPORTED) {
    out->sw_reason = RDB_SW_UNSUPPORTED;
    count_why(b, d.accel, d.why);
  }
  if (st_api_family(e->api) == ST_FAMILY_JPEG && !e->restart_bound &&
      (!b->probe_restart || !restart_blind(b, &r, site, size, c->resp_len, &d)))
    e->restart_bound = 1;
  if (d.outcome != PLAN_OFFLOAD)
    return;
  out->accel = (int8_t)d.accel; /* < PLAN_MAX_ACCEL */
  out->service_ns = d.service_ns;
  out->busy_ns = d.busy_ns < d.service_ns ? (uint32_t)d.busy_ns : RDB_BUSY_WHOLE;
  if (b->as_recorded[d.accel]) { /* the file says at its end whether it was retimed */
    b->file_as_recorded_calls++;
    b->file_as_recorded_ns += c->latency_ns;
  }
  out->link_in_ns = (uint32_t)d.link_in_ns; /* at most IF_MAX_LINK_NS (if_link_cost) */
  out->fault_ns = (uint32_t)d.fault_ns;     /* at most UINT32_MAX (plan_decide) */
  bs->source = (uint32_t)d.source_ns;       /* likewise */
  b->any_source |= bs->source != 0;
  out->link_out_ns = (uint32_t)d.link_out_ns;
  out->out_cold = d.out_cold;
  b->out->faults_over_ns[e->api % RDB_API_SLOTS] += d.faults_over_ns;
}

/* Link the previous call of c's thread and API in this file to e's newest
 * sample (rdb_sample.next). Threads past the first 64 Ki go unlinked. */
static void link_next(builder *b, const st_call *c, const b_entry *e) {
  if (b->last_for != b->files + 1) { /* a new file: another process */
    if (b->nlast)
      memset(b->last, 0, b->nlast * sizeof *b->last);
    b->last_for = b->files + 1;
  }
  if (c->thread >= 65536 || c->api >= ST_API_MAX)
    return;
  size_t k = (size_t)c->thread * ST_API_MAX + c->api;
  if (grow_zeroed((void **)&b->last, &b->nlast, k + 1, sizeof *b->last, 8 * ST_API_MAX) != 0)
    return;
  struct b_last *l = &b->last[k];
  if (l->id1)
    b->e[l->id1 - 1].s[l->sample].next_id = e->id + 1; /* ids are indices until layout */
  l->id1 = e->id + 1;
  l->sample = e->n - 1;
}

/* A decode the program abandoned, or that failed: where its data ended
 * (rdb_stuck). */
static struct b_stuck *keep_stuck(builder *b, scan_file *f, const st_call *c) {
  const void *req;
  uint64_t len;
  int abandoned = (c->flags & ST_CALL_NOT_OFFLOADABLE) && c->reason == JPG_NO_ABANDONED;
  if (c->api != ST_API_JPEG_DECODE || !(abandoned || (c->flags & ST_CALL_FAILED)) || !c->req_blob ||
      st_reader_blob(f->r, c->req_blob, &req, &len) != ST_OK || len <= 2)
    return NULL;
  if (b->nstuck == b->capstuck) {
    size_t cap = b->capstuck ? b->capstuck * 2 : 8;
    struct b_stuck *n = realloc(b->stuck, cap * sizeof *n);
    if (!n) /* such a decode then waits for data, as before: not fatal */
      return NULL;
    b->stuck = n;
    b->capstuck = cap;
  }
  int exact = c->nfeat > ST_JPF_DROP_HASH && c->feat[ST_JPF_DROP_LEN];
  uint64_t in_data = (c->flags & ST_CALL_FAILED) && c->reason == JPG_NO_ERROR_IN_DATA;
  b->stuck[b->nstuck] =
      (struct b_stuck){{len - 2, XXH3_64bits(req, len - 2), {0}, (uint64_t)exact, in_data}, 0};
  return &b->stuck[b->nstuck++];
}

/* A decode whose program dropped the bytes the library left unread
 * (rdb_drop). */
static void keep_drop(builder *b, const st_call *c) {
  if (c->api != ST_API_JPEG_DECODE || c->nfeat <= ST_JPF_DROP_HASH || !c->feat[ST_JPF_DROP_LEN] ||
      c->feat[ST_JPF_DROP_LEN] > UINT64_MAX - c->feat[ST_JPF_DROP_AT])
    return;
  if (b->ndrops == b->capdrops) {
    size_t cap = b->capdrops ? b->capdrops * 2 : 8;
    rdb_drop *n = realloc(b->drops, cap * sizeof *n);
    if (!n) /* such a decode then reads on from the end of the buffer, as before: not fatal */
      return;
    b->drops = n;
    b->capdrops = cap;
  }
  b->drops[b->ndrops++] = (rdb_drop){c->feat[ST_JPF_DROP_AT] + c->feat[ST_JPF_DROP_LEN],
                                     c->feat[ST_JPF_DROP_LEN], c->feat[ST_JPF_DROP_HASH]};
}

/* How c's request begins, if c is a libjpeg decode whose request the
 * trace kept (rdb_prefix): every one, so that replay never takes a decode
 * for a miss that a recorded one may still turn out to be. */
static int keep_prefixes(builder *b, scan_file *f, const st_call *c) {
  const void *req;
  uint64_t len;
  if (c->api != ST_API_JPEG_DECODE || !c->req_blob ||
      st_reader_blob(f->r, c->req_blob, &req, &len) != ST_OK || len < RDB_PREFIX_MIN + 2)
    return 0;
  for (uint64_t at = RDB_PREFIX_MIN; at <= len - 2; at *= 2) {
    if (b->nprefixes == b->capprefixes) {
      size_t cap = b->capprefixes ? b->capprefixes * 2 : 64;
      rdb_prefix *n = realloc(b->prefixes, cap * sizeof *n);
      if (!n)
        return b->oom = 1;
      b->prefixes = n;
      b->capprefixes = cap;
    }
    b->prefixes[b->nprefixes++] = (rdb_prefix){at, XXH3_64bits(req, (size_t)at)};
  }
  return 0;
}

static int prefix_cmp(const void *x, const void *y) {
  const rdb_prefix *a = x, *b = y;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return a->hash < b->hash ? -1 : a->hash > b->hash;
}

/* Sorted, each row once. */
static void prefixes_sort(builder *b) {
  if (b->nprefixes < 2)
    return;
  qsort(b->prefixes, b->nprefixes, sizeof *b->prefixes, prefix_cmp);
  size_t k = 1;
  for (size_t i = 1; i < b->nprefixes; i++)
    if (prefix_cmp(&b->prefixes[i], &b->prefixes[k - 1]) != 0)
      b->prefixes[k++] = b->prefixes[i];
  b->nprefixes = k;
}

/* Whether c, a later occurrence of e, got e's answer. A request whose
 * occurrences were answered differently answers none (RDB_ENTRY_MIXED):
 * a type the program redefined in place, a sub-message of another
 * library's copy of its type, anything that gave one fingerprint two
 * encodings. Sizes compare their result, packs their bytes (a blob of the
 * same file and id is the same bytes: a file stores a payload once). */
/* A JPEG call's response blob hashed, into e (first) or compared with e's:
 * 1 when it is e's (or there is nothing to compare). */
static int same_rows(scan_file *f, b_entry *e, const st_call *c, int first) {
  const void *data;
  uint64_t len;
  if (c->flags & ST_CALL_FAILED) /* ended by an error: rows up to where it failed */
    return 1;
  if (!c->resp_blob || st_reader_blob(f->r, c->resp_blob, &data, &len) != ST_OK)
    return first || !e->has_resp_h; /* an occurrence without rows answers nothing */
  /* a digest's rows, not the messages after it: their input offsets
   * follow the source's buffering (djpeg's stdio source, a memory one) */
  if ((c->flags & ST_CALL_RESP_DIGEST) && len >= JPG_DIG_FIXED)
    len = JPG_DIG_FIXED;
  /* kept rows (--keep-pixels), likewise: the rows and any colour map */
  uint64_t pix = c->nfeat > ST_JPF_OUT_BYTES ? c->feat[ST_JPF_OUT_BYTES] : len;
  jpg_ext ext;
  XXH128_hash_t h;
  if (c->api == ST_API_JPEG_DECODE && !(c->flags & ST_CALL_RESP_DIGEST) && pix < len &&
      jpg_ext_read((const uint8_t *)data + pix, (size_t)(len - pix), &ext) == 0) {
    uint32_t shape[2] = {ext.ncolors, ext.ncomp};
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    XXH3_128bits_update(&st, data, (size_t)pix);
    XXH3_128bits_update(&st, shape, sizeof shape);
    if (ext.cmap)
      XXH3_128bits_update(&st, ext.cmap, (size_t)ext.ncolors * ext.ncomp);
    h = XXH3_128bits_digest(&st);
  } else {
    h = XXH3_128bits(data, (size_t)len);
  }
  if (first || !e->has_resp_h) { /* (the first had none: it answers as it was) */
    e->resp_h = h;
    e->has_resp_h = 1;
    return 1;
  }
  return e->has_resp_h && XXH128_isEqual(h, e->resp_h);
}

static int same_answer(builder *b, scan_file *f, b_entry *e, const st_call *c) {
  if (c->api == ST_API_PB_SIZE)
    return c->result == e->result;
  /* one request, other rows: tables changed between the header and the
   * start, rows dithered by how many the program asked for at a time, a
   * pitch that overlaps rows; whichever the replayed call is like, the
   * rows it needs are not known */
  if (!is_protobuf_api(c->api))
    return (e->resp_file == b->files + 1 && e->resp_blob == c->resp_blob && c->resp_blob) ||
           same_rows(f, e, c, 0);
  if ((c->api != ST_API_PB_PACK && c->api != ST_API_PB_PACK_BUF) || !e->resp1 || !c->resp_blob ||
      (c->flags & (ST_CALL_RESP_DIGEST | ST_CALL_FAILED)))
    return 1;
  if (e->resp_file == b->files + 1 && e->resp_blob == c->resp_blob)
    return 1;
  const void *data;
  uint64_t len;
  if (st_reader_blob(f->r, c->resp_blob, &data, &len) != ST_OK)
    return 1; /* nothing to compare with: the entry's own bytes stand */
  if (len != e->resp_len || memcmp(data, resp_of(b, e), len) != 0)
    return 0;
  e->resp_file = b->files + 1;
  e->resp_blob = c->resp_blob;
  return 1;
}

/* A new occurrence of e, its sample to fill; NULL out of memory. */
static b_sample *add_sample(builder *b, b_entry *e, const st_call *c) {
  if (e->n == e->cap) {
    uint32_t cap = e->cap ? e->cap * 2 : 1; /* most requests are made once */
    b_sample *ns = realloc(e->s, cap * sizeof *ns);
    if (!ns) {
      b->oom = 1;
      return NULL;
    }
    e->s = ns;
    e->cap = cap;
  }
  b_sample *bs = &e->s[e->n++];
  bs->start_ns = c->start_ns;
  bs->next_id = 0;
  return bs;
}

/* A libjpeg decode its program gave up before the last row (mupdf's bands
 * decode a page's images again and stop after the band's rows). Not
 * offloadable, and not looked up by its own request: replay reads a
 * decode's input to its EOI before identifying it, so a decode given up
 * is found, if at all, as its image decoded whole. Which occurrences of
 * that image were given up is kept as theirs (RDB_SW_ABANDONED, the
 * recorded latency: the library's time for the rows read), in its place
 * in the recorded order, and replay runs such an occurrence for real
 * instead of serving it as the whole image. Held for now under its own
 * request (given_up_only), given_up_attach finds the image's. */
static int is_given_up(const st_call *c) {
  return c->api == ST_API_JPEG_DECODE && (c->flags & ST_CALL_NOT_OFFLOADABLE) &&
         !(c->flags & ST_CALL_FAILED) && c->reason == JPG_NO_ABANDONED && c->req_blob;
}

static int given_up(builder *b, scan_file *f, const st_call *c, struct b_stuck *st) {
  int created;
  b_entry *e = find_or_add(b, c->fp, &created);
  if (!e)
    return b->oom = 1;
  if (st)
    st->id1 = e->id + 1;
  if (created) {
    e->api = c->api;
    e->given_up_only = 1;
    e->req1 = keep_blob(b, f, c->req_blob, &e->req_len);
    if (!e->req1)
      e->req_len = 0;
  }
  /* (created or not: a whole decode may have made the same request, one
   * whose input the library had read to its EOI when it was given up) */
  b_sample *bs = add_sample(b, e, c);
  if (!bs)
    return 1;
  bs->s = (rdb_sample){.recorded_ns = c->latency_ns, .accel = -1, .sw_reason = RDB_SW_ABANDONED};
  b->given_up_calls++;
  link_next(b, c, e);
  return b->oom;
}

static int on_call(scan_file *f, const st_call *c, void *arg) {
  builder *b = arg;
  struct b_stuck *st = keep_stuck(b, f, c);
  keep_drop(b, c);
  if (keep_prefixes(b, f, c))
    return 1;
  if (c->flags & ST_CALL_NOT_OFFLOADABLE) {
    b->unusable++;
    b->out->unusable_by[cli_no_slot(c)]++;
    if (c->api == ST_API_JPEG_DECODE && c->reason == JPG_NO_RAW)
      b->unserved |= RDB_UNSERVED_RAW;
    if (c->api == ST_API_JPEG_DECODE && c->reason == JPG_NO_BUFFERED)
      b->unserved |= RDB_UNSERVED_BUFFERED;
    return is_given_up(c) ? given_up(b, f, c, st) : 0;
  }
  int created;
  b_entry *e = find_or_add(b, c->fp, &created);
  if (!e)
    return b->oom = 1;
  /* the definition of its type it was recorded with (rdb_schema) */
  uint64_t id = is_protobuf_api(c->api) && c->type < f->ntypes
                    ? pbw_schema_id(f->types[c->type].schema, f->types[c->type].schema_len)
                    : 0;
  if (e->given_up_only) { /* the first whole decode of a request given up before */
    e->given_up_only = 0;
    created = 1;
  }
  if (created) {
    fill_entry(b, f, e, c);
    e->schema_id = id;
    e->resp_file = b->files + 1;
    e->resp_blob = c->resp_blob;
    if (!is_protobuf_api(c->api))
      same_rows(f, e, c, 1);
  } else if (id != e->schema_id || (!e->mixed && !same_answer(b, f, e, c))) {
    e->mixed = 1;
  }
  if (!created && (c->flags & ST_CALL_FAILED) && c->api == ST_API_PB_UNPACK)
    e->flags |= RDB_ENTRY_FAILED; /* a later occurrence failed: the library decides each */
  if (b->oom)
    return 1;
  b_sample *bs = add_sample(b, e, c);
  if (!bs)
    return 1;
  evaluate(b, f, e, c, bs);
  link_next(b, c, e);
  if (e->n == 2)
    keep_stream(b, e);
  return b->oom;
}

/* The protobuf types of a file read whole, with their schemas' identities:
 * what the shim checks the program's types against (rdb_schema). */
static void keep_schemas(builder *b, const scan_file *f) {
  for (uint32_t t = 1; t < f->ntypes && !b->oom; t++) {
    const scan_type *ty = &f->types[t];
    if (ty->family != ST_FAMILY_PROTOBUF || !ty->name)
      continue;
    long name = names_intern(&b->names, ty->name);
    if (name >= 0 && b->nschemas == b->capschemas) {
      size_t cap = b->capschemas ? b->capschemas * 2 : 16;
      struct b_schema *n = realloc(b->schemas, cap * sizeof *n);
      if (n) {
        b->schemas = n;
        b->capschemas = cap;
      }
    }
    if (name < 0 || b->nschemas == b->capschemas) {
      b->oom = 1;
      break;
    }
    b->schemas[b->nschemas++] = (struct b_schema){rdb_name_hash(ty->name), (uint32_t)name,
                                                  pbw_schema_id(ty->schema, ty->schema_len)};
  }
}

static int schema_cmp(const void *x, const void *y) {
  const struct b_schema *a = x, *b = y;
  if (a->hash != b->hash)
    return a->hash < b->hash ? -1 : 1;
  if (a->name != b->name)
    return a->name < b->name ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Index + 1 of e's schema among the unique sorted ones (rdb_entry.schema),
 * 0: unknown, or beyond 16 bits. */
static uint16_t schema_row(const builder *b, const b_entry *e) {
  if (!e->schema_id || e->mixed || !is_protobuf_api(e->api))
    return 0;
  const struct b_schema key = {rdb_name_hash(e->type), e->name, e->schema_id};
  const struct b_schema *at =
      b->nschemas ? bsearch(&key, b->schemas, b->nschemas, sizeof key, schema_cmp) : NULL;
  size_t row = at ? (size_t)(at - b->schemas) + 1 : 0;
  return row < UINT16_MAX ? (uint16_t)row : 0;
}

/* Sort the kept schemas and drop repeats; their number. */
static size_t unique_schemas(builder *b) {
  if (b->nschemas > 1)
    qsort(b->schemas, b->nschemas, sizeof *b->schemas, schema_cmp);
  size_t m = 0;
  for (size_t i = 0; i < b->nschemas; i++)
    if (!m || schema_cmp(&b->schemas[m - 1], &b->schemas[i]) != 0)
      b->schemas[m++] = b->schemas[i];
  return b->nschemas = m;
}

/* A request's bytes, for given_up_attach's sorted search. */
typedef struct {
  const uint8_t *p;
  uint64_t len;
  size_t i; /* its entry's index */
} req_ref;

static int req_ref_cmp(const void *x, const void *y) {
  const req_ref *a = x, *b = y;
  uint64_t n = a->len < b->len ? a->len : b->len;
  int c = n ? memcmp(a->p, b->p, (size_t)n) : 0;
  if (c)
    return c;
  return a->len < b->len ? -1 : a->len > b->len;
}

/* An entry a given-up decode's occurrences may join: a libjpeg decode
 * recorded whole, with one answer (replay serves it). */
static int joinable(const b_entry *e) {
  return e->api == ST_API_JPEG_DECODE && !e->given_up_only && e->req1 && e->n &&
         !(e->flags & (RDB_ENTRY_FAILED | RDB_ENTRY_NO_RESPONSE)) && !e->mixed;
}

/* The entry whose request starts with p[0, len) and is longer, among the
 * sorted w[0, n); -1 when none is, or more than one (which of them a
 * decode given up in replay is, only its drain will say). */
static long prefixed_by(const req_ref *w, size_t n, const uint8_t *p, uint64_t len) {
  size_t lo = 0, hi = n; /* the first not below p: those starting with p follow */
  req_ref key = {p, len, 0};
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (req_ref_cmp(&w[mid], &key) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  long found = -1;
  for (; lo < n && w[lo].len >= len && (len == 0 || !memcmp(w[lo].p, p, (size_t)len)); lo++) {
    if (w[lo].len == len)
      continue;
    if (found >= 0)
      return -1;
    found = (long)w[lo].i;
  }
  return found;
}

/* The entries only decodes given up made (given_up_only): a decode given
 * up read its image's data up to some point, and its request is that
 * data with the EOI the normalisation appends, so the image's request
 * decoded whole starts with it less that EOI (as rdb_stuck's are found).
 * Their occurrences join the one entry whose request starts so, in their
 * place in the recorded order (layout sorts each entry's samples by
 * start), and the entry is dropped: its calls were never looked up by
 * their own request. With no such entry (an image the program never
 * decoded whole, or two whose requests start so) they are dropped too,
 * and replay runs such a decode for real, as a miss given up, as before.
 * b->slots is stale after it. */
static int given_up_join(builder *b) {
  size_t npend = 0, nwhole = 0;
  for (size_t i = 0; i < b->n; i++) {
    npend += b->e[i].given_up_only;
    nwhole += joinable(&b->e[i]);
  }
  if (!npend)
    return 0;
  req_ref *w = malloc((nwhole ? nwhole : 1) * sizeof *w);
  b->redirect = calloc(b->n, sizeof *b->redirect);
  if (!w || !b->redirect) {
    free(w);
    return -1;
  }
  b->nids = b->n;
  size_t k = 0;
  for (size_t i = 0; i < b->n; i++)
    if (joinable(&b->e[i]))
      w[k++] = (req_ref){req_of(b, &b->e[i]), b->e[i].req_len, i};
  if (k > 1)
    qsort(w, k, sizeof *w, req_ref_cmp);
  for (size_t i = 0; i < b->n; i++) {
    b_entry *p = &b->e[i];
    if (!p->given_up_only)
      continue;
    const uint8_t *req = req_of(b, p);
    long t = -1;
    if (req && p->req_len > 2 && req[p->req_len - 2] == 0xFF && req[p->req_len - 1] == 0xD9)
      t = prefixed_by(w, k, req, p->req_len - 2);
    if (t < 0) {
      b->out->given_up_alone += p->n;
      continue;
    }
    b_entry *e = &b->e[t];
    b_sample *ns = realloc(e->s, ((size_t)e->n + p->n) * sizeof *ns);
    if (!ns) {
      free(w);
      return -1;
    }
    memcpy(ns + e->n, p->s, (size_t)p->n * sizeof *ns);
    e->s = ns;
    e->n += p->n;
    e->cap = e->n;
    b->redirect[p->id] = e->id + 1;
  }
  free(w);
  size_t m = 0; /* drop them */
  for (size_t i = 0; i < b->n; i++) {
    if (b->e[i].given_up_only) {
      free(b->e[i].s);
      continue;
    }
    b->e[m++] = b->e[i];
  }
  b->n = m;
  return 0;
}

/* Before layout, after verify_sizes: the decodes given up join their
 * images' entries (given_up_join), and are counted (rdb_built): every one
 * is kept but those dropped alone. Nothing to do for most recordings. */
static int given_up_attach(builder *b) {
  if (b->given_up_calls == 0)
    return 0;
  int rc = given_up_join(b);
  if (rc == 0)
    b->out->given_up_kept = b->given_up_calls - b->out->given_up_alone;
  return rc;
}

static int sample_cmp(const void *x, const void *y) {
  const b_sample *a = x, *b = y;
  return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

static int stuck_cmp(const void *x, const void *y) {
  const struct b_stuck *a = x, *b = y;
  return a->s.len < b->s.len ? -1 : a->s.len > b->s.len;
}

static int drop_cmp(const void *x, const void *y) {
  const rdb_drop *a = x, *b = y;
  return a->end < b->end ? -1 : a->end > b->end;
}

static void builder_free(builder *b) {
  for (size_t i = 0; i < b->n; i++)
    free(b->e[i].s);
  free(b->e);
  rdb_arena_free(&b->data);
  free(b->kept);
  rdb_arena_free(&b->streams);
  names_free(&b->names);
  free(b->last);
  free(b->stuck);
  free(b->drops);
  free(b->prefixes);
  free(b->redirect);
  free(b->schemas);
  free(b->slots);
  for (size_t i = 0; i < b->nds; i++)
    pbw_descset_free(b->ds[i].ds);
  free(b->ds);
}

/* ---- layout -------------------------------------------------------------- */

/* The replay clock: the calibrated TSC where it is invariant (cli.h). */
static void calibrate_tsc(rdb_header *h) {
  uint64_t base, mono, mult;
  if (cli_tsc_calibrate(&base, &mono, &mult) == 0) {
    h->tsc_base = base;
    h->mono_base = mono;
    h->tsc_mult = mult;
  }
}


/* ---- types kept whole in software (rdb_class) ---------------------------- */

typedef struct {
  const char *name; /* an entry's type string */
  uint64_t hash;
  /* bit per API: some entry's every call kept by the plan / refused by the
   * model / neither; then kept: every entry's calls for one reason */
  uint32_t sel, unsup, mixed, kept;
} b_class;

/* Find the (API, type) pairs whose every recorded call stays in software
 * for one reason, the plan's or the model's (rdb_class): the shim runs
 * those calls straight away. Marks their entries `direct` (with mark; not
 * under --on-miss abort, whose shim looks every call up). Returns the
 * number of classes with a kept API in *out (malloc'd; `unsup` then holds
 * those of the kept APIs the model refused), or -1 out of memory. */
static long find_classes(builder *b, b_class **out, int mark) {
  size_t cap = 16;
  while (cap < b->n * 2)
    cap *= 2;
  b_class *t = calloc(cap, sizeof *t);
  size_t *at = calloc(b->n ? b->n : 1, sizeof *at); /* entry -> its class's slot */
  if (!t || !at) {
    free(t);
    free(at);
    return -1;
  }
  for (size_t i = 0; i < b->n; i++) {
    b_entry *e = &b->e[i];
    if (!is_protobuf_api(e->api))
      continue;
    uint64_t h = rdb_name_hash(e->type);
    size_t j = h & (cap - 1);
    while (t[j].name && (t[j].hash != h || strcmp(t[j].name, e->type) != 0))
      j = (j + 1) & (cap - 1);
    if (!t[j].name)
      t[j] = (b_class){.name = e->type, .hash = h};
    at[i] = j;
    int sel = 1, unsup = 1;
    for (uint32_t k = 0; k < e->n && (sel || unsup); k++) {
      int sw = e->s[k].s.accel < 0;
      sel = sel && sw && e->s[k].s.sw_reason == RDB_SW_NOT_SELECTED;
      unsup = unsup && sw && e->s[k].s.sw_reason == RDB_SW_UNSUPPORTED;
    }
    t[j].sel |= (uint32_t)sel << e->api;
    t[j].unsup |= (uint32_t)unsup << e->api;
    t[j].mixed |= (uint32_t) !(sel || unsup) << e->api;
  }
  for (size_t j = 0; j < cap; j++) {
    /* one reason for every call of the API: kept whole (a class that mixes
     * the two is looked up, so each call is counted under its own) */
    t[j].kept = (t[j].sel ^ t[j].unsup) & ~t[j].mixed;
    t[j].unsup &= t[j].kept;
  }
  for (size_t i = 0; i < b->n && mark; i++)
    if (is_protobuf_api(b->e[i].api))
      b->e[i].direct = t[at[i]].kept >> b->e[i].api & 1;
  free(at);
  size_t m = 0;
  for (size_t j = 0; j < cap; j++)
    if (t[j].name && t[j].kept)
      t[m++] = t[j];
  *out = t;
  return (long)m;
}

/* Entries in the order of their first recorded occurrence: a program that
 * replays its requests in about the recorded order then reads the entries,
 * their samples and their responses front to back, which the shim predicts
 * and prefetches (rp.c). */
static int first_cmp(const void *x, const void *y) {
  const b_entry *a = x, *b = y;
  if (a->direct != b->direct) /* never looked up: out of the predictions' way */
    return a->direct - b->direct;
  uint64_t ta = a->n ? a->s[0].start_ns : UINT64_MAX, tb = b->n ? b->s[0].start_ns : UINT64_MAX;
  return ta < tb ? -1 : ta > tb;
}

/* --on-miss nearest (rdb.h rdb_near): every entry a miss may be timed as,
 * by type, API and size: a protobuf message's encoded size, a JPEG image's
 * pixels (width times height: what its decode's work grows with, whatever
 * the output options). Entries of a type kept whole in software are left
 * out (their calls are never looked up), and so are calls the library
 * refused (their time is a failure's) and decodes not recorded as
 * offloadable. */
typedef struct {
  const char *type;
  uint64_t key;
  uint64_t variant; /* rdb_near_variant, 0 for protobuf */
  uint32_t entry;   /* index in b->e, in its final order */
  uint8_t api;
} near_item;

static int near_cmp(const void *x, const void *y) {
  const near_item *a = x, *b = y;
  int c = strcmp(a->type, b->type);
  if (c)
    return c;
  if (a->api != b->api)
    return a->api < b->api ? -1 : 1;
  if (a->variant != b->variant)
    return a->variant < b->variant ? -1 : 1;
  if (a->key != b->key)
    return a->key < b->key ? -1 : 1;
  return a->entry < b->entry ? -1 : a->entry > b->entry;
}

static int same_group(const near_item *a, const near_item *b) {
  return a->api == b->api && a->variant == b->variant && strcmp(a->type, b->type) == 0;
}

/* The items, sorted, into *out (*n of them, in *ngroups groups). */
static int near_items(const builder *b, near_item **out, size_t *n, size_t *ngroups) {
  /* a JPEG entry may be in two groups (restart_bound) */
  near_item *t = malloc((b->n ? b->n * 2 : 1) * sizeof *t);
  if (!t)
    return -1;
  size_t k = 0;
  for (size_t i = 0; i < b->n; i++) {
    const b_entry *e = &b->e[i];
    if (e->direct || e->n == 0 || (e->flags & RDB_ENTRY_FAILED))
      continue;
    uint64_t key = e->near_key, variant = e->near_variant;
    int both = 0; /* in both restart variants */
    if (e->near == NEAR_JPEG && !(e->flags & RDB_ENTRY_NO_RESPONSE))
      both = !e->restart_bound;
    else if (e->near != NEAR_PB)
      continue;
    t[k++] = (near_item){e->type, key, variant, (uint32_t)i, e->api};
    if (both)
      t[k++] = (near_item){e->type, key, variant ^ 1, (uint32_t)i, e->api};
  }
  if (k > 1)
    qsort(t, k, sizeof *t, near_cmp);
  size_t g = 0;
  for (size_t i = 0; i < k; i++)
    g += i == 0 || !same_group(&t[i - 1], &t[i]);
  *out = t;
  *n = k;
  *ngroups = g;
  return 0;
}

/* Write the items and their groups; ents[] already hold their names. */
static void near_write(uint8_t *m, const rdb_entry *ents, const near_item *t, size_t n,
                       uint64_t groups_off, uint64_t items_off) {
  rdb_near_group *g = (rdb_near_group *)(m + groups_off);
  rdb_near *it = (rdb_near *)(m + items_off);
  size_t ng = 0;
  for (size_t i = 0; i < n; i++) {
    if (i == 0 || !same_group(&t[i - 1], &t[i]))
      g[ng++] = (rdb_near_group){.name_hash = rdb_name_hash(t[i].type),
                                 .name_off = ents[t[i].entry].type_off,
                                 .api = t[i].api,
                                 .first = i,
                                 .variant = t[i].variant};
    g[ng - 1].n++;
    it[i] = (rdb_near){.key = t[i].key, .entry = t[i].entry};
  }
}

/* The strings the database stores: requests and responses (data), then
 * streams, of the entries not kept whole in software; placed from *pos on.
 * Returns 0, or -1 out of memory. */
static int place_strings(builder *b, const uint32_t *index_of, uint64_t *pos, rdb_parts *d) {
  rdb_span *ds = malloc((b->n ? b->n * 2 : 1) * sizeof *ds);
  rdb_span *ss = malloc((b->n ? b->n : 1) * sizeof *ss);
  if (!ds || !ss) {
    free(ds);
    free(ss);
    return -1;
  }
  size_t nd = 0, ns = 0;
  for (size_t i = 0; i < b->n; i++) {
    b_entry *e = &b->e[i];
    if (e->direct) { /* never looked up: its bytes are not needed */
      e->req1 = e->resp1 = e->stream1 = 0;
      e->req_len = e->resp_len = e->stream_len = 0;
      e->flags |= RDB_ENTRY_NO_RESPONSE;
    }
    if (e->req1)
      ds[nd++] = (rdb_span){.from = e->req1 - 1, .len = e->req_len};
    if (e->resp1)
      ds[nd++] = (rdb_span){.from = e->resp1 - 1, .len = e->resp_len};
  }
  for (size_t i = 0; i < b->n; i++) {
    b_entry *e = &b->e[i];
    /* no stream, or the response it refers to is not stored */
    if (e->stream1 && (!e->ref_id1 || !b->e[index_of[e->ref_id1 - 1]].resp1))
      e->stream1 = 0;
    if (e->stream1)
      ss[ns++] = (rdb_span){.from = e->stream1 - 1, .len = e->stream_len};
  }
  /* the streams after every response and request: read only to confirm a
   * guess, they would otherwise spread the bytes every call reads over
   * twice the memory */
  d->ndspan = rdb_place_spans(ds, nd, pos);
  d->nsspan = rdb_place_spans(ss, ns, pos);
  d->dspan = ds;
  d->sspan = ss;
  d->data = &b->data;
  d->streams = &b->streams;
  return 0;
}

static int layout(builder *b, const plan *p, int on_miss, int catch_up, int pieces,
                  rdb_built *out) {
  for (size_t i = 0; i < b->n; i++)
    if (b->e[i].n > 1)
      qsort(b->e[i].s, b->e[i].n, sizeof *b->e[i].s, sample_cmp);
  /* under --on-miss abort every call is looked up, so that none can miss
   * unnoticed: the classes then only say, of a miss, that the plan keeps
   * its kind of call in software */
  b_class *cls = NULL;
  long ncls = find_classes(b, &cls, on_miss != RDB_MISS_ABORT);
  if (ncls < 0) {
    cli_err("out of memory building the replay database");
    return -1;
  }
  if (b->n > 1)
    qsort(b->e, b->n, sizeof *b->e, first_cmp); /* b->slots is stale from here on */
  size_t nids = b->nids > b->n ? b->nids : b->n; /* given_up_attach dropped some */
  uint32_t *index_of = malloc((nids ? nids : 1) * sizeof *index_of); /* id -> index */
  near_item *near = NULL;
  size_t nnear = 0, nnear_groups = 0;
  rdb_parts parts = {0};
  int rc = -1;
  uint8_t *m = MAP_FAILED;
  uint64_t front = 0;
  if (!index_of)
    goto oom;
  for (size_t i = 0; i < nids; i++)
    index_of[i] = UINT32_MAX;
  for (size_t i = 0; i < b->n; i++)
    index_of[b->e[i].id] = (uint32_t)i;
  /* a dropped entry's id: the entry its occurrences joined, or none */
  for (size_t i = 0; i < nids && b->redirect; i++)
    if (index_of[i] == UINT32_MAX && b->redirect[i])
      index_of[i] = index_of[b->redirect[i] - 1];
  if (on_miss == RDB_MISS_NEAREST && near_items(b, &near, &nnear, &nnear_groups) != 0)
    goto oom;
  uint64_t nslots = 16;
  while (nslots < b->n * 2)
    nslots *= 2;
  uint64_t nsamples = 0, name_bytes = 0;
  for (size_t i = 0; i < b->n; i++)
    nsamples += b->e[i].n;
  for (size_t i = 0; i < b->names.n; i++)
    name_bytes += rdb_al8(strlen(b->names.name[i]) + 1);
  uint64_t off = rdb_al8(sizeof(rdb_header));
  uint64_t stats_off = off;
  off = rdb_al8(off + sizeof(rdb_stats));
  uint64_t accel_off = off;
  off = rdb_al8(off + (uint64_t)p->naccel * sizeof(rdb_accel));
  uint64_t next_off = off;
  off = rdb_al8(off + b->n * sizeof(uint64_t));
  uint64_t once_off = off;
  off = rdb_al8(off + (b->n + 63) / 64 * sizeof(uint64_t));
  off = (off + 4095) & ~4095ull; /* the read-only part starts on a page */
  uint64_t ro_off = off;
  uint64_t entries_off = off;
  off = rdb_al8(off + b->n * sizeof(rdb_entry));
  uint64_t slots_off = off;
  off = rdb_al8(off + nslots * 4);
  uint64_t samples_off = off;
  off = rdb_al8(off + nsamples * sizeof(rdb_sample));
  uint64_t classes_off = off;
  off = rdb_al8(off + (uint64_t)ncls * sizeof(rdb_class));
  uint64_t near_groups_off = off;
  off = rdb_al8(off + nnear_groups * sizeof(rdb_near_group));
  uint64_t near_off = off;
  off = rdb_al8(off + nnear * sizeof(rdb_near));
  uint64_t stuck_off = off;
  off = rdb_al8(off + b->nstuck * sizeof(rdb_stuck));
  uint64_t drops_off = off;
  off = rdb_al8(off + b->ndrops * sizeof(rdb_drop));
  prefixes_sort(b);
  uint64_t prefixes_off = off;
  off = rdb_al8(off + b->nprefixes * sizeof(rdb_prefix));
  uint64_t sources_off = b->any_source ? off : 0;
  off = rdb_al8(off + (b->any_source ? nsamples * sizeof(uint32_t) : 0));
  uint64_t nschemas = unique_schemas(b), schemas_off = off;
  off = rdb_al8(off + nschemas * sizeof(rdb_schema));
  uint64_t names_off = off;
  off += name_bytes;
  front = off;
  if (place_strings(b, index_of, &off, &parts) != 0)
    goto oom;
  uint64_t size = off + 8;

  /* the tables in private memory, written out with the strings (publish) */
  m = mmap(NULL, front, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    cli_err("cannot allocate the replay database's tables (%llu bytes): %s",
            (unsigned long long)front, strerror(errno));
    goto out;
  }
  madvise(m, front, MADV_HUGEPAGE);
  rdb_header *h = (rdb_header *)m;
  *h = (rdb_header){.magic = RDB_MAGIC,
                    .version = RDB_VERSION,
                    .on_miss = (uint32_t)on_miss,
                    .catch_up = catch_up != 0,
                    .size = size,
                    .nentries = b->n,
                    .entries_off = entries_off,
                    .next_off = next_off,
                    .nslots = nslots,
                    .slots_off = slots_off,
                    .naccel = (uint32_t)p->naccel,
                    .accel_off = accel_off,
                    .stats_off = stats_off,
                    .trace_start_ns = b->start_ns,
                    .ro_off = ro_off,
                    .unpack_pieces = pieces != 0,
                    .jpeg_unserved = b->unserved,
                    .nclasses = (uint64_t)ncls,
                    .classes_off = classes_off,
                    .nnear_groups = nnear_groups,
                    .near_groups_off = near_groups_off,
                    .nnear = nnear,
                    .near_off = near_off,
                    .nstuck = b->nstuck,
                    .stuck_off = stuck_off,
                    .nschemas = nschemas,
                    .schemas_off = schemas_off,
                    .ndrops = b->ndrops,
                    .drops_off = drops_off,
                    .nprefixes = b->nprefixes,
                    .prefixes_off = prefixes_off,
                    .nsamples = nsamples,
                    .samples_off = samples_off,
                    .sources_off = sources_off,
                    .once_off = once_off};
  calibrate_tsc(h);
  rdb_accel *acc = (rdb_accel *)(m + accel_off);
  for (int i = 0; i < p->naccel; i++) {
    snprintf(acc[i].name, sizeof acc[i].name, "%s", p->accel[i].name);
    acc[i].engines = p->accel[i].engines;
    acc[i].flags = if_model_time_measured(p->accel[i].model) ? RDB_ACCEL_MEASURED : 0;
  }
  /* one copy of each name: equal types have equal type_off (rep_protobuf.c) */
  for (size_t i = 0, no = names_off; i < b->names.n; i++) {
    size_t l = strlen(b->names.name[i]) + 1;
    memcpy(m + no, b->names.name[i], l);
    b->names.off[i] = no;
    no += rdb_al8(l);
  }
  rdb_class *dc = (rdb_class *)(m + classes_off);
  for (long i = 0; i < ncls; i++)
    dc[i] = (rdb_class){.name_hash = cls[i].hash,
                        .name_off = names_off_of(&b->names, cls[i].name),
                        .kept = cls[i].kept,
                        .unsup = cls[i].unsup};
  rdb_schema *dsch = (rdb_schema *)(m + schemas_off);
  for (size_t i = 0; i < nschemas; i++) {
    dsch[i] = (rdb_schema){.name_hash = b->schemas[i].hash,
                           .name_off = b->names.off[b->schemas[i].name],
                           .id = b->schemas[i].id};
  }
  rdb_entry *ents = (rdb_entry *)(m + entries_off);
  uint32_t *slots = (uint32_t *)(m + slots_off);
  rdb_sample *smp = (rdb_sample *)(m + samples_off);
  uint32_t *src = sources_off ? (uint32_t *)(m + sources_off) : NULL;
  uint64_t so = 0;
  for (size_t i = 0; i < b->n; i++) {
    const b_entry *e = &b->e[i];
    rdb_entry *d = &ents[i];
    memcpy(d->fp, e->fp, 16);
    d->api = e->api;
    /* a JPEG request recorded with two answers answers nothing */
    d->flags = e->flags |
               (e->mixed ? is_protobuf_api(e->api) ? RDB_ENTRY_MIXED : RDB_ENTRY_NO_RESPONSE : 0);
    d->schema = schema_row(b, e);
    d->nsamples = e->n;
    d->result = e->result;
    d->samples_off = samples_off + so * sizeof(rdb_sample);
    for (uint32_t k = 0; k < e->n; k++) {
      if (src)
        src[so] = e->s[k].source;
      smp[so] = e->s[k].s;
      uint32_t nx = e->s[k].next_id ? index_of[e->s[k].next_id - 1] : UINT32_MAX;
      smp[so++].next = nx == UINT32_MAX ? 0 : nx + 1;
    }
    if (e->req1) {
      d->req_off = rdb_span_to(parts.dspan, parts.ndspan, e->req1, e->req_len);
      d->req_len = e->req_len;
    }
    if (e->resp1) {
      d->resp_off = rdb_span_to(parts.dspan, parts.ndspan, e->resp1, e->resp_len);
      d->resp_len = e->resp_len;
    }
    d->type_off = b->names.off[e->name];
    uint64_t j = rdb_hash(e->fp) & (nslots - 1);
    while (slots[j])
      j = (j + 1) & (nslots - 1);
    slots[j] = (uint32_t)i + 1;
  }
  for (size_t i = 0; i < b->n; i++) {
    const b_entry *e = &b->e[i];
    if (!e->stream1)
      continue;
    size_t r = index_of[e->ref_id1 - 1];
    ents[i].stream_off = rdb_span_to(parts.sspan, parts.nsspan, e->stream1, e->stream_len);
    ents[i].stream_len = e->stream_len;
    ents[i].ref_off = ents[r].resp_off;
    ents[i].ref_len = ents[r].resp_len;
  }
  near_write(m, ents, near, nnear, near_groups_off, near_off);
  if (b->nstuck) {
    qsort(b->stuck, b->nstuck, sizeof *b->stuck, stuck_cmp);
    rdb_stuck *to = (rdb_stuck *)(m + stuck_off);
    for (size_t i = 0; i < b->nstuck; i++) {
      struct b_stuck *st = &b->stuck[i];
      uint32_t id = st->id1 ? st->id1 - 1 : UINT32_MAX;
      uint32_t at = id < nids ? index_of[id] : UINT32_MAX;
      if (at != UINT32_MAX) /* the entry its occurrence is kept in */
        memcpy(st->s.fp, b->e[at].fp, sizeof st->s.fp);
      to[i] = st->s;
    }
  }
  if (b->ndrops) {
    qsort(b->drops, b->ndrops, sizeof *b->drops, drop_cmp);
    memcpy(m + drops_off, b->drops, b->ndrops * sizeof *b->drops);
  }
  if (b->nprefixes)
    memcpy(m + prefixes_off, b->prefixes, b->nprefixes * sizeof *b->prefixes);
  parts.front = m;
  parts.front_len = front;
  parts.size = size;
  if (rdb_publish(&parts, ro_off, out) != 0)
    goto out;
  out->entries = b->n;
  out->samples = nsamples;
  out->strings = parts.ndspan + parts.nsspan;
  for (size_t i = 0; i < parts.ndspan; i++)
    out->string_bytes += parts.dspan[i].len;
  for (size_t i = 0; i < parts.nsspan; i++)
    out->string_bytes += parts.sspan[i].len;
  rc = 0;
  goto out;
oom:
  cli_err("out of memory building the replay database");
out:
  if (m != MAP_FAILED)
    munmap(m, front);
  free((void *)parts.dspan);
  free((void *)parts.sspan);
  free(cls);
  free(index_of);
  free(near);
  return rc;
}

static int scan_dir(const char *dir, builder *b) {
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return -1;
  if (td.n == 0) {
    cli_err_no_trace(dir, "replay");
    cli_tracedir_free(&td);
    return -1;
  }
  cli_warn_unrecorded(dir);
  int rc = 0;
  size_t skipped = 0;
  plan_reset(b->plan); /* occurrences count from this pass's first */
  for (size_t i = 0; i < td.n && rc == 0; i++) {
    scan_file f;
    kept_forget(b);
    if (scan_run(&f, td.paths[i], on_call, b) != 0) {
      /* said why (a damaged header, not a trace): one process's calls
       * missing, as info and report carry on without them */
      cli_warn("%s cannot be read: replaying without its calls", td.paths[i]);
      b->out->files_cut++;
      skipped++;
      continue;
    }
    keep_schemas(b, &f);
    if (b->oom) {
      cli_err("out of memory building the replay database from %s (%llu distinct requests "
              "so far, %llu MB of their bytes)",
              td.paths[i], (unsigned long long)b->n,
              (unsigned long long)((b->data.len + b->streams.len) >> 20));
      scan_close(&f);
      rc = -1;
      break;
    }
    if (!f.retimed[0]) {
      b->out->as_recorded_calls += b->file_as_recorded_calls;
      b->out->as_recorded_ns += b->file_as_recorded_ns;
    }
    b->file_as_recorded_calls = b->file_as_recorded_ns = 0;
    if (f.status.error) {
      char st[512]; /* scan_status_text: a cut file's is ~300 bytes */
      scan_status_text(&f, st, sizeof st);
      cli_warn("%s: %s%s", td.paths[i], st,
               scan_damaged(&f) ? "; replaying with the calls before the damage"
               : f.created_only ? ""
                                : "; replaying with the calls before that point");
      b->out->files_cut++;
    }
    if (!b->start_ns || f.h.start_mono_ns < b->start_ns)
      b->start_ns = f.h.start_mono_ns;
    b->out->trace_chunks += f.status.chunks;
    b->out->chunk_reloads += f.status.blob_chunk_loads;
    b->files++;
    scan_close(&f);
  }
  if (rc == 0 && skipped == td.n) {
    cli_err("%s: none of its %zu trace files can be read; nothing to replay", dir, td.n);
    rc = -1;
  }
  cli_tracedir_free(&td);
  return rc;
}

static int build(const char *dir, const plan *p, int on_miss, int catch_up, int unpack_pieces,
                 rdb_built *out);

/* Models run here: a plugin's output goes to standard error, not into the
 * program's (if_quiet_stdout). */
int rdb_build(const char *dir, const plan *p, int on_miss, int catch_up, int unpack_pieces,
              rdb_built *out) {
  if_quiet_stdout(1);
  int rc = build(dir, p, on_miss, catch_up, unpack_pieces, out);
  if_quiet_stdout(0);
  return rc;
}

static int build(const char *dir, const plan *p, int on_miss, int catch_up, int unpack_pieces,
                 rdb_built *out) {
  builder b = {.plan = p, .out = out};
  b.probe_restart = on_miss == RDB_MISS_NEAREST && !plan_stateful(p);
  for (int i = 0; i < p->naccel && i < PLAN_MAX_ACCEL; i++) {
    const char *name = if_model_name(p->accel[i].model);
    b.as_recorded[i] = name && (!strcmp(name, "software") || !strcmp(name, "scale"));
  }
  memset(out, 0, sizeof *out);
  out->fd = out->fd_rw = -1;
  uint64_t t0 = shim_now_ns();
  int rc = scan_dir(dir, &b);
  if (rc == 0) {
    verify_sizes(&b);
    if (given_up_attach(&b) != 0) {
      cli_err("out of memory building the replay database");
      rc = -1;
    }
  }
  if (rc == 0)
    rc = layout(&b, p, on_miss, catch_up, unpack_pieces, out);
  out->files = b.files;
  out->calls_unusable = b.unusable;
  if (b.requests_unlike_fp)
    cli_warn("%llu recorded unpack requests do not have the fingerprint their bytes give (a "
             "damaged or altered trace); they will run the real library during replay",
             (unsigned long long)b.requests_unlike_fp);
  if (b.images_failed)
    cli_warn("%llu recorded unpack requests could not be rebuilt from their schema; they will "
             "run the real library during replay",
             (unsigned long long)b.images_failed);
  if (b.packs_not_canonical)
    cli_warn("%llu recorded pack%s wrote bytes the library writes for no message (a tree built "
             "by hand with unknown fields under a known field's number, say); %s the real "
             "library during replay",
             (unsigned long long)b.packs_not_canonical, b.packs_not_canonical == 1 ? "" : "s",
             b.packs_not_canonical == 1 ? "it will run" : "they will run");
  if (b.pixels_failed)
    cli_warn("%llu recorded JPEG decodes could not be rebuilt from their requests (the first: "
             "%s); they will run the real library during replay. Recording with --keep-pixels "
             "saves the rows themselves",
             (unsigned long long)b.pixels_failed, b.pixels_why);
  builder_free(&b);
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    out->build_peak_rss = (uint64_t)ru.ru_maxrss * 1024;
  if (rc == 0)
    rdb_touch(out);
  out->build_ns = shim_now_ns() - t0;
  return rc;
}

void rdb_built_free(rdb_built *b) {
  free(b->why);
  b->why = NULL;
  if (b->base)
    munmap(b->base, b->size);
  if (b->fd >= 0)
    close(b->fd);
  if (b->fd_rw >= 0)
    close(b->fd_rw);
  b->base = NULL;
  b->fd = b->fd_rw = -1;
}

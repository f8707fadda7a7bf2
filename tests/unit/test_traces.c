/* test_traces.c — unit tests of the trace library (traces/).
 *
 * Good files round-trip every record kind and header field; bad files
 * (truncated at every byte, every bit flipped, future versions, crafted
 * lengths and counts) must be rejected with the right error, never crash,
 * and still return every record that precedes the damage. format.h is used
 * to find chunk boundaries and to craft damaged files. */
#include <check.h>
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "format.h"
#include "trace.h"

/* ---- Temporary files ------------------------------------------------------ */

static char tmpdir[64];

static void setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/sttrace-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void) {
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  char p[512];
  while (d && (e = readdir(d))) {
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
      unlink(p);
    }
  }
  if (d)
    closedir(d);
  rmdir(tmpdir);
}

static const char *tpath(const char *name) {
  static char p[8][256];
  static int k;
  char *s = p[k++ % 8];
  snprintf(s, 256, "%s/%s", tmpdir, name);
  return s;
}

static uint8_t *slurp(const char *path, size_t *len) {
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  uint8_t *b = malloc((size_t)sb.st_size + 1);
  int fd = open(path, O_RDONLY);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(read(fd, b, (size_t)sb.st_size), sb.st_size);
  close(fd);
  *len = (size_t)sb.st_size;
  return b;
}

static void spit(const char *path, const void *b, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, b, len), (ssize_t)len);
  close(fd);
}

static uint64_t file_size(const char *path) {
  struct stat sb;
  ck_assert_int_eq(stat(path, &sb), 0);
  return (uint64_t)sb.st_size;
}

/* ---- A deterministic synthetic trace ---------------------------------------- */

static const char *const test_argv[] = {"./app", "--flag", "input file.bin"};

static st_header test_header(void) {
  st_header h = {.pid = 4242,
                 .ppid = 1,
                 .exec_seq = 2,
                 .start_realtime_ns = 1700000000123456789ull,
                 .start_mono_ns = 987654321012ull,
                 .clock = "CLOCK_MONOTONIC",
                 .host = "testhost",
                 .exe = "/usr/bin/app",
                 .tool_version = "0.1.0-test",
                 .argc = 3,
                 .argv = test_argv,
                 .pidns = 4026531836ull,
                 .start_ticks = 123456789012ull};
  return h;
}

/* Record number i of the synthetic trace, with its own string storage. */
typedef struct {
  st_record rec;
  char s[4][48];
  uint8_t data[200];
  size_t data_len;
} gen_rec;

static void gen_call(int i, st_call *c) {
  memset(c, 0, sizeof *c);
  c->api = (uint8_t)(i % 2 ? ST_API_PB_UNPACK : ST_API_TJ_DECODE);
  c->flags = (uint8_t)(i & 7);
  c->reason = (uint16_t)(i * 4099);
  c->thread = (uint32_t)(i % 5);
  c->type = (uint32_t)(i * 3);
  c->site = (uint32_t)(i % 11) * 100000u;
  c->seq = (uint64_t)i;
  /* not monotonic: interleaved threads give negative deltas */
  c->start_ns = 1700000000000000000ull + (uint64_t)i * 1234 - (uint64_t)(i % 3) * 5000;
  c->latency_ns = (uint64_t)i * 1000 + 7;
  for (int k = 0; k < 16; k++)
    c->fp[k] = (uint8_t)(i * 31 + k);
  c->req_blob = (uint64_t)i / 7;
  c->resp_blob = (uint64_t)i / 5;
  c->req_len = (uint64_t)i * 100;
  c->resp_len = UINT64_MAX - (uint64_t)i;
  c->result = (uint64_t)-1;
  c->nfeat = (uint8_t)(i % (ST_MAX_FEAT + 1));
  for (int k = 0; k < c->nfeat; k++)
    c->feat[k] = (uint64_t)i << (k * 4 % 64);
}

static void gen_site(int i, gen_rec *g) {
  st_site *s = &g->rec.u.site;
  s->id = (uint32_t)i + 1;
  s->nframes = (uint32_t)(i % (ST_MAX_FRAMES + 1));
  snprintf(g->s[0], sizeof g->s[0], "/lib/libmod%d.so", i);
  snprintf(g->s[1], sizeof g->s[1], "func_%d", i);
  for (uint32_t k = 0; k < s->nframes; k++) {
    st_frame *f = &s->frames[k];
    f->ip = 0x7f0000000000ull + k * 16 + (uint64_t)i;
    f->offset = 0x1000 + k;
    f->module = k % 2 ? g->s[0] : "";
    f->symbol = k % 3 ? g->s[1] : "";
    f->sym_offset = k * 3;
  }
}

/* *blobs counts the blobs generated so far (ids are assigned in order). */
static void gen(int i, gen_rec *g, uint64_t *blobs) {
  memset(g, 0, sizeof *g);
  switch (i % 7) {
  case 0:
  case 2:
    g->rec.kind = ST_REC_CALL;
    gen_call(i, &g->rec.u.call);
    break;
  case 1:
    g->rec.kind = ST_REC_BLOB;
    g->data_len = (size_t)(i * 13) % sizeof g->data;
    for (size_t k = 0; k < g->data_len; k++)
      g->data[k] = (uint8_t)(k * 7 + (size_t)i);
    g->data[0] = (uint8_t)i; /* distinct contents: no dedup here */
    g->data_len = g->data_len ? g->data_len : 1;
    g->rec.u.blob = (st_blob_ref){.id = ++*blobs, .len = g->data_len};
    break;
  case 3:
    g->rec.kind = ST_REC_TYPE;
    snprintf(g->s[0], sizeof g->s[0], "pkg.Msg%d", i);
    g->data_len = (size_t)i % 40;
    memset(g->data, 'a' + i % 26, g->data_len);
    g->rec.u.type = (st_type){.id = (uint32_t)i,
                              .family = ST_FAMILY_PROTOBUF,
                              .name = g->s[0],
                              .schema = g->data,
                              .schema_len = (uint32_t)g->data_len};
    break;
  case 4:
    g->rec.kind = ST_REC_SITE;
    gen_site(i, g);
    break;
  case 5:
    g->rec.kind = ST_REC_THREAD;
    snprintf(g->s[0], sizeof g->s[0], "worker-%d", i);
    g->rec.u.thread = (st_thread){.index = (uint32_t)i,
                                  .os_tid = 100000u + (uint32_t)i,
                                  .parent = (uint32_t)i / 2,
                                  .name = i % 2 ? g->s[0] : ""};
    break;
  default:
    g->rec.kind = ST_REC_NOTE;
    snprintf(g->s[0], sizeof g->s[0], "key%d", i);
    snprintf(g->s[1], sizeof g->s[1], "value with spaces %d", i * i);
    g->rec.u.note = (st_note){.key = g->s[0], .value = g->s[1]};
  }
}

static void write_rec(st_writer *w, const gen_rec *g) {
  const st_record *r = &g->rec;
  uint64_t id = 0;
  switch (r->kind) {
  case ST_REC_CALL: ck_assert_int_eq(st_writer_add_call(w, &r->u.call), ST_OK); break;
  case ST_REC_BLOB:
    ck_assert_int_eq(st_writer_add_blob(w, g->data, g->data_len, &id), ST_OK);
    ck_assert_uint_eq(id, r->u.blob.id);
    break;
  case ST_REC_TYPE: ck_assert_int_eq(st_writer_add_type(w, &r->u.type), ST_OK); break;
  case ST_REC_SITE: ck_assert_int_eq(st_writer_add_site(w, &r->u.site), ST_OK); break;
  case ST_REC_THREAD: ck_assert_int_eq(st_writer_add_thread(w, &r->u.thread), ST_OK); break;
  case ST_REC_NOTE: ck_assert_int_eq(st_writer_add_note(w, &r->u.note), ST_OK); break;
  }
}

/* Write records 0..n-1; close cleanly, or flush and abandon (a writer killed
 * right after a chunk). */
static void write_trace(const char *path, int n, size_t chunk, int clean) {
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, path, &h), ST_OK);
  st_writer_set_chunk_size(w, chunk);
  uint64_t blobs = 0;
  gen_rec g;
  for (int i = 0; i < n; i++) {
    gen(i, &g, &blobs);
    write_rec(w, &g);
  }
  if (clean) {
    ck_assert_int_eq(st_writer_close(w), ST_OK);
  } else {
    ck_assert_int_eq(st_writer_flush(w), ST_OK);
    st_writer_abandon(w);
  }
}

/* Comparisons return the name of the first field that differs, or NULL.
 * They do not assert: Check reports every assertion to its runner, which
 * is far too slow for the loops over every byte of a file. */
#define DIFF(cond, field)                                                                          \
  do {                                                                                             \
    if (cond)                                                                                      \
      return field;                                                                                \
  } while (0)

static const char *frame_diff(const st_frame *a, const st_frame *b) {
  DIFF(a->ip != b->ip, "frame.ip");
  DIFF(a->offset != b->offset, "frame.offset");
  DIFF(strcmp(a->module, b->module), "frame.module");
  DIFF(strcmp(a->symbol, b->symbol), "frame.symbol");
  DIFF(a->sym_offset != b->sym_offset, "frame.sym_offset");
  return NULL;
}

static const char *call_diff(const st_call *a, const st_call *b) {
  DIFF(a->api != b->api || a->flags != b->flags || a->reason != b->reason, "call.api/flags/reason");
  DIFF(a->thread != b->thread || a->type != b->type || a->site != b->site, "call.thread/type/site");
  DIFF(a->seq != b->seq, "call.seq");
  DIFF(a->start_ns != b->start_ns, "call.start_ns");
  DIFF(a->latency_ns != b->latency_ns, "call.latency_ns");
  DIFF(memcmp(a->fp, b->fp, sizeof a->fp), "call.fp");
  DIFF(a->req_blob != b->req_blob || a->resp_blob != b->resp_blob, "call.req/resp_blob");
  DIFF(a->req_len != b->req_len || a->resp_len != b->resp_len, "call.req/resp_len");
  DIFF(a->result != b->result, "call.result");
  DIFF(a->nfeat != b->nfeat, "call.nfeat");
  for (int k = 0; k < ST_MAX_FEAT; k++) /* unused slots read back as 0 */
    DIFF(b->feat[k] != (k < a->nfeat ? a->feat[k] : 0), "call.feat");
  return NULL;
}

static const char *blob_diff(st_reader *r, const gen_rec *g, const st_blob_ref *got) {
  const void *data;
  uint64_t len;
  DIFF(got->id != g->rec.u.blob.id || got->len != g->rec.u.blob.len, "blob.id/len");
  DIFF(st_reader_blob(r, got->id, &data, &len) != ST_OK, "st_reader_blob");
  DIFF(len != g->data_len || memcmp(data, g->data, len), "blob contents");
  return NULL;
}

static const char *type_diff(const st_type *a, const st_type *b) {
  DIFF(a->id != b->id || a->family != b->family, "type.id/family");
  DIFF(strcmp(a->name, b->name), "type.name");
  DIFF(a->schema_len != b->schema_len, "type.schema_len");
  DIFF(a->schema_len && memcmp(a->schema, b->schema, a->schema_len), "type.schema");
  return NULL;
}

static const char *site_diff(const st_site *a, const st_site *b) {
  DIFF(a->id != b->id || a->nframes != b->nframes, "site.id/nframes");
  for (uint32_t k = 0; k < a->nframes; k++) {
    const char *d = frame_diff(&a->frames[k], &b->frames[k]);
    DIFF(d, d);
  }
  return NULL;
}

/* Does the reader's record equal generated record g (blob contents too)? */
static const char *rec_diff(st_reader *r, const gen_rec *g, const st_record *got) {
  const st_record *want = &g->rec;
  DIFF(got->kind != want->kind, "kind");
  const st_thread *ta = &want->u.thread, *tb = &got->u.thread;
  switch (want->kind) {
  case ST_REC_CALL: return call_diff(&want->u.call, &got->u.call);
  case ST_REC_BLOB: return blob_diff(r, g, &got->u.blob);
  case ST_REC_TYPE: return type_diff(&want->u.type, &got->u.type);
  case ST_REC_SITE: return site_diff(&want->u.site, &got->u.site);
  case ST_REC_THREAD:
    DIFF(ta->index != tb->index || ta->os_tid != tb->os_tid || ta->parent != tb->parent,
         "thread ids");
    DIFF(strcmp(ta->name, tb->name), "thread.name");
    return NULL;
  case ST_REC_NOTE:
    DIFF(strcmp(want->u.note.key, got->u.note.key), "note.key");
    DIFF(strcmp(want->u.note.value, got->u.note.value), "note.value");
    return NULL;
  }
  return "unknown kind";
}

/* What reading a whole file gave. */
typedef struct {
  int open_err;     /* st_reader_open result */
  int err;          /* the st_reader_next result that ended the stream */
  int n;            /* records returned */
  const char *diff; /* first field differing from the generator, or NULL */
  int diff_at;
  int stays_ended; /* later st_reader_next calls return ST_E_END */
  st_read_status st;
} outcome;

/* Stream the file, comparing every record with the generator; no asserts. */
static outcome read_quiet(const char *path) {
  outcome o = {.diff_at = -1};
  st_reader *r = NULL;
  o.open_err = st_reader_open(&r, path);
  if (o.open_err != ST_OK) {
    o.diff = r ? "reader not NULL after failed open" : NULL;
    return o;
  }
  st_record rec;
  gen_rec g;
  uint64_t blobs = 0;
  while ((o.err = st_reader_next(r, &rec)) == ST_OK) {
    gen(o.n, &g, &blobs);
    const char *d = rec_diff(r, &g, &rec);
    if (d && !o.diff) {
      o.diff = d;
      o.diff_at = o.n;
    }
    o.n++;
  }
  o.stays_ended = st_reader_next(r, &rec) == ST_E_END && st_reader_next(r, &rec) == ST_E_END;
  st_reader_status(r, &o.st);
  if (o.st.records != (uint64_t)o.n && !o.diff)
    o.diff = "status.records";
  st_reader_close(r);
  return o;
}

/* read_quiet, asserting that records match and the stream stays stopped. */
static int read_trace(const char *path, st_read_status *st, int *open_err, int *err) {
  outcome o = read_quiet(path);
  ck_assert_msg(!o.diff, "%s: record %d: %s differs", path, o.diff_at, o.diff);
  ck_assert(o.open_err != ST_OK || o.stays_ended);
  *st = o.st;
  *open_err = o.open_err;
  *err = o.err;
  return o.open_err == ST_OK ? o.n : -1;
}

/* ---- Chunk map of a file (read with format.h, independently of reader.c) -- */

typedef struct {
  uint64_t off, end;
  uint8_t type;
  uint32_t nrec, raw_len;
} chunk_desc;

typedef struct {
  uint64_t data_off, size;
  int n;
  chunk_desc c[256];
} file_map;

static void map_file(const uint8_t *b, size_t len, file_map *m) {
  memset(m, 0, sizeof *m);
  m->size = len;
  m->data_off = STF_PREAMBLE_LEN + stf_get_u32(b + 16) + STF_PAYLOAD_CRC_LEN;
  uint64_t off = m->data_off;
  while (off + STF_CHUNK_HDR_LEN <= len && !memcmp(b + off, STF_CHUNK_MAGIC, 4)) {
    ck_assert_int_lt(m->n, 256);
    chunk_desc *c = &m->c[m->n++];
    c->off = off;
    c->type = b[off + 4];
    c->raw_len = stf_get_u32(b + off + 16);
    c->nrec = stf_get_u32(b + off + 20);
    c->end = off + STF_CHUNK_HDR_LEN + stf_get_u32(b + off + 12);
    off = c->end;
  }
}

/* Records in the data chunks that end at or before byte `limit`. */
static int records_before(const file_map *m, uint64_t limit) {
  int n = 0;
  for (int i = 0; i < m->n; i++)
    if (m->c[i].end <= limit && m->c[i].type == STF_CHUNK_DATA)
      n += (int)m->c[i].nrec;
  return n;
}

/* ---- Round trips ------------------------------------------------------------ */

START_TEST(test_trace_round_trip_all_record_kinds) {
  const char *p = tpath("t");
  write_trace(p, 500, 0, 1);
  st_read_status st;
  int oe, e;
  ck_assert_int_eq(read_trace(p, &st, &oe, &e), 500);
  ck_assert_int_eq(e, ST_E_END);
  ck_assert_int_eq(st.error, ST_OK);
  ck_assert_int_eq(st.clean, 1);
  ck_assert_uint_eq(st.chunks, 1);
  ck_assert_uint_eq(st.file_bytes, file_size(p));
  ck_assert_uint_eq(st.good_bytes, file_size(p));
}
END_TEST

START_TEST(test_trace_round_trip_many_small_chunks) {
  const char *p = tpath("t");
  write_trace(p, 300, 200, 1);
  size_t len;
  uint8_t *b = slurp(p, &len);
  file_map m;
  map_file(b, len, &m);
  free(b);
  ck_assert_int_gt(m.n, 10);
  for (int i = 0; i + 1 < m.n; i++) { /* only a lone big record makes a big chunk */
    ck_assert_int_eq(m.c[i].type, STF_CHUNK_DATA);
    ck_assert(m.c[i].raw_len <= 200 || m.c[i].nrec == 1);
  }
  ck_assert_int_eq(m.c[m.n - 1].type, STF_CHUNK_INDEX);
  ck_assert_uint_eq(m.c[m.n - 1].end + STF_TRAILER_LEN, len);
  st_read_status st;
  int oe, e;
  ck_assert_int_eq(read_trace(p, &st, &oe, &e), 300);
  ck_assert_int_eq(e, ST_E_END);
  ck_assert_int_eq(st.clean, 1);
  ck_assert_uint_eq(st.chunks, (uint64_t)m.n - 1);
  uint64_t raw = 0;
  for (int i = 0; i + 1 < m.n; i++)
    raw += m.c[i].raw_len;
  ck_assert_uint_eq(st.raw_bytes, raw);
}
END_TEST

START_TEST(test_trace_header_fields_round_trip) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  st_reader *r;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  const st_header *g = st_reader_header(r);
  ck_assert_uint_eq(g->version, ST_FORMAT_VERSION);
  ck_assert_uint_eq(g->pid, 4242);
  ck_assert_uint_eq(g->ppid, 1);
  ck_assert_uint_eq(g->exec_seq, 2);
  ck_assert_uint_eq(g->start_realtime_ns, h.start_realtime_ns);
  ck_assert_uint_eq(g->start_mono_ns, h.start_mono_ns);
  ck_assert_str_eq(g->clock, "CLOCK_MONOTONIC");
  ck_assert_str_eq(g->host, "testhost");
  ck_assert_str_eq(g->exe, "/usr/bin/app");
  ck_assert_str_eq(g->tool_version, "0.1.0-test");
  ck_assert_uint_eq(g->argc, 3);
  for (int i = 0; i < 3; i++)
    ck_assert_str_eq(g->argv[i], test_argv[i]);
  ck_assert_uint_eq(g->pidns, h.pidns);
  ck_assert_uint_eq(g->start_ticks, h.start_ticks);
  st_record rec;
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  st_read_status st;
  st_reader_status(r, &st);
  ck_assert_int_eq(st.clean, 1);
  ck_assert_int_eq(st.error, ST_OK);
  st_reader_close(r);
}
END_TEST

/* A file holding only a header whose payload is the varints and strings
 * given, in the current preamble (files from before a field was appended). */
static void write_bare_header(const char *p, const uint8_t *payload, uint32_t plen) {
  uint8_t b[256];
  ck_assert_uint_le(plen, sizeof b - STF_PREAMBLE_LEN - 4);
  memcpy(b, STF_MAGIC, STF_MAGIC_LEN);
  stf_put_u16(b + 8, ST_FORMAT_VERSION);
  stf_put_u16(b + 10, ST_FORMAT_MIN_READ);
  stf_put_u32(b + 12, 0);
  stf_put_u32(b + 16, plen);
  stf_put_u32(b + 20, stf_crc(b, 20));
  memcpy(b + STF_PREAMBLE_LEN, payload, plen);
  stf_put_u32(b + STF_PREAMBLE_LEN + plen, stf_crc(payload, plen));
  spit(p, b, STF_PREAMBLE_LEN + plen + 4);
}

static uint32_t bare_payload(uint8_t *b, int with_ids, int with_more) {
  uint8_t *q = b;
  q = stf_put_varint(q, 77);   /* pid */
  q = stf_put_varint(q, 1);    /* ppid */
  q = stf_put_varint(q, 0);    /* exec_seq */
  q = stf_put_varint(q, 1000); /* start realtime, mono */
  q = stf_put_varint(q, 5);
  for (int i = 0; i < 4; i++) { /* clock, host, exe, tool_version */
    *q++ = 1;
    *q++ = 'x';
  }
  q = stf_put_varint(q, 1); /* argc, argv */
  *q++ = 1;
  *q++ = 'a';
  if (with_ids) {
    q = stf_put_varint(q, 4026532245ull);
    q = stf_put_varint(q, 99);
  }
  if (with_more) /* a field a later version appends */
    q = stf_put_varint(q, 12345);
  return (uint32_t)(q - b);
}

/* The process identity (pidns, start_ticks) was appended to the header:
 * files from before read it as 0, and fields after it are skipped; the
 * record shim's st_peek_process reads the same from the header alone. */
START_TEST(test_trace_header_process_identity_old_and_new) {
  const char *p = tpath("bare");
  for (int v = 0; v < 3; v++) {
    uint8_t pl[128];
    write_bare_header(p, pl, bare_payload(pl, v > 0, v > 1));
    st_reader *r;
    ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
    const st_header *g = st_reader_header(r);
    ck_assert_uint_eq(g->pid, 77);
    ck_assert_str_eq(g->argv[0], "a");
    ck_assert_uint_eq(g->pidns, v ? 4026532245ull : 0);
    ck_assert_uint_eq(g->start_ticks, v ? 99 : 0);
    st_reader_close(r);
    int fd = open(p, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    uint32_t pid = 0;
    uint64_t ns = 1, st = 1;
    ck_assert_int_eq(st_peek_process(fd, &pid, &ns, &st), ST_OK);
    ck_assert_uint_eq(pid, 77);
    ck_assert_uint_eq(ns, v ? 4026532245ull : 0);
    ck_assert_uint_eq(st, v ? 99 : 0);
    close(fd);
  }
}
END_TEST

/* st_peek_process on a written trace, and on files that are not one yet:
 * empty (just created by another process), cut inside the header, or with
 * a damaged header. */
START_TEST(test_trace_peek_process) {
  const char *p = tpath("t");
  write_trace(p, 20, 0, 1);
  st_header h = test_header();
  uint32_t pid;
  uint64_t ns, st;
  int fd = open(p, O_RDONLY);
  ck_assert_int_eq(st_peek_process(fd, &pid, &ns, &st), ST_OK);
  close(fd);
  ck_assert_uint_eq(pid, h.pid);
  ck_assert_uint_eq(ns, h.pidns);
  ck_assert_uint_eq(st, h.start_ticks);
  size_t len;
  uint8_t *b = slurp(p, &len);
  const char *q = tpath("cut");
  size_t cuts[] = {0, 5, STF_PREAMBLE_LEN, STF_PREAMBLE_LEN + 10};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    spit(q, b, cuts[i]);
    fd = open(q, O_RDONLY);
    ck_assert_int_eq(st_peek_process(fd, &pid, &ns, &st), ST_E_TRUNCATED);
    close(fd);
  }
  b[STF_PREAMBLE_LEN + 3] ^= 0x40; /* inside the payload: its CRC fails */
  spit(q, b, len);
  fd = open(q, O_RDONLY);
  ck_assert_int_eq(st_peek_process(fd, &pid, &ns, &st), ST_E_HEADER);
  close(fd);
  spit(q, "not a trace at all", 18);
  fd = open(q, O_RDONLY);
  ck_assert_int_eq(st_peek_process(fd, &pid, &ns, &st), ST_E_MAGIC);
  close(fd);
  free(b);
}
END_TEST

START_TEST(test_trace_header_caps_argv_and_strings) {
  const char *p = tpath("t");
  static const char *argv[ST_MAX_ARGS + 44];
  char *longs = malloc(10000);
  memset(longs, 'x', 9999);
  longs[9999] = 0;
  for (int i = 0; i < ST_MAX_ARGS + 44; i++)
    argv[i] = i == 1 ? longs : i == 2 ? NULL : "arg";
  st_header h = {.argc = ST_MAX_ARGS + 44, .argv = argv, .exe = longs}; /* other strings NULL */
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  st_reader *r;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  const st_header *g = st_reader_header(r);
  ck_assert_uint_eq(g->argc, ST_MAX_ARGS);
  ck_assert_uint_eq(strlen(g->argv[1]), STF_HDR_MAX_STR);
  ck_assert_str_eq(g->argv[2], "");
  ck_assert_str_eq(g->argv[ST_MAX_ARGS - 1], "arg");
  ck_assert_uint_eq(strlen(g->exe), STF_HDR_MAX_STR);
  ck_assert_str_eq(g->host, "");
  ck_assert_str_eq(g->clock, "");
  st_reader_close(r);
  free(longs);
}
END_TEST

START_TEST(test_trace_empty_strings_and_schema_round_trip) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_type t = {.id = 7, .family = ST_FAMILY_JPEG}; /* NULL name, no schema */
  st_note n = {.key = "k"};                        /* NULL value */
  st_thread th = {.index = 0};
  ck_assert_int_eq(st_writer_add_type(w, &t), ST_OK);
  ck_assert_int_eq(st_writer_add_note(w, &n), ST_OK);
  ck_assert_int_eq(st_writer_add_thread(w, &th), ST_OK);
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  st_reader *r;
  st_record rec;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_str_eq(rec.u.type.name, "");
  ck_assert_uint_eq(rec.u.type.schema_len, 0);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_str_eq(rec.u.note.value, "");
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_str_eq(rec.u.thread.name, "");
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  st_reader_close(r);
}
END_TEST

/* ---- Blobs ------------------------------------------------------------------ */

START_TEST(test_trace_blob_dedup) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  char a[1000], b[1000];
  memset(a, 'a', sizeof a);
  memset(b, 'a', sizeof b);
  b[999] = 'b';
  uint64_t id1, id2, id3, id4, id5;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, a, sizeof a, &id1), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, b, sizeof b, &id2), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, a, sizeof a, &id3), ST_OK); /* same bytes */
  ck_assert_int_eq(st_writer_add_blob(w, a, 999, &id4), ST_OK);      /* prefix: new */
  ck_assert_int_eq(st_writer_add_blob(w, NULL, 0, &id5), ST_OK);     /* empty blob */
  ck_assert_uint_eq(id1, 1);
  ck_assert_uint_eq(id2, 2);
  ck_assert_uint_eq(id3, id1);
  ck_assert_uint_eq(id4, 3);
  ck_assert_uint_eq(id5, 4);
  ck_assert_int_eq(st_writer_add_blob(w, "", 0, &id5), ST_OK);
  ck_assert_uint_eq(id5, 4);
  /* the caller's hash: XXH3-128 of b finds b's blob, so the two kinds of
   * call share one table */
  XXH128_hash_t xb = XXH3_128bits(b, sizeof b);
  const uint64_t hb[2] = {xb.low64, xb.high64};
  uint64_t id6;
  st_writer_prefetch_blob(w, hb);
  ck_assert_int_eq(st_writer_add_blob_hashed(w, b, sizeof b, hb, &id6), ST_OK);
  ck_assert_uint_eq(id6, id2);
  ck_assert_int_eq(st_writer_add_blob_hashed(w, b, sizeof b, NULL, &id6), ST_E_ARG);
  st_writer_stats s;
  st_writer_get_stats(w, &s);
  ck_assert_uint_eq(s.blobs, 4);
  ck_assert_uint_eq(s.blobs_deduped, 3);
  ck_assert_uint_eq(s.blob_bytes, 2999);
  ck_assert_uint_eq(s.blob_bytes_saved, 2000);
  ck_assert_int_eq(st_writer_close(w), ST_OK);

  st_reader *r;
  st_record rec;
  int nblob = 0;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  while (st_reader_next(r, &rec) == ST_OK)
    nblob += rec.kind == ST_REC_BLOB;
  ck_assert_int_eq(nblob, 4); /* the duplicates were not stored */
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_blob(r, id3, &d, &len), ST_OK);
  ck_assert_uint_eq(len, sizeof a);
  ck_assert_mem_eq(d, a, sizeof a);
  ck_assert_int_eq(st_reader_blob(r, id5, &d, &len), ST_OK);
  ck_assert_uint_eq(len, 0);
  st_reader_close(r);
}
END_TEST

START_TEST(test_trace_blob_dedup_table_grows) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  for (uint32_t round = 0; round < 2; round++) {
    for (uint32_t i = 0; i < 5000; i++) {
      uint64_t id;
      ck_assert_int_eq(st_writer_add_blob(w, &i, sizeof i, &id), ST_OK);
      ck_assert_uint_eq(id, i + 1);
    }
  }
  st_writer_stats s;
  st_writer_get_stats(w, &s);
  ck_assert_uint_eq(s.blobs, 5000);
  ck_assert_uint_eq(s.blobs_deduped, 5000);
  st_writer_abandon(w);
}
END_TEST

/* A file whose writer was killed has no index: blobs are found once their
 * record has been streamed, from any earlier chunk. */
START_TEST(test_trace_blob_lookup_after_stream) {
  const char *p = tpath("t");
  write_trace(p, 400, 256, 0);
  st_reader *r;
  st_record rec;
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_blob(r, 1, &d, &len), ST_E_NOTFOUND);
  uint64_t nblobs = 0;
  while (st_reader_next(r, &rec) == ST_OK)
    if (rec.kind == ST_REC_BLOB)
      nblobs = rec.u.blob.id;
  st_read_status st;
  st_reader_status(r, &st);
  ck_assert_int_eq(st.clean, 0);
  ck_assert_int_eq(st.error, ST_OK);
  ck_assert_uint_gt(st.chunks, 20);
  /* every blob, in an order that keeps switching chunks */
  uint64_t n = 0, b = 0;
  gen_rec g;
  for (int i = 0; i < 400; i++) {
    gen(i, &g, &b);
    if (g.rec.kind != ST_REC_BLOB)
      continue;
    uint64_t id = (g.rec.u.blob.id * 37) % nblobs + 1, bb = 0;
    gen_rec want;
    for (int k = 0; bb < id; k++)
      gen(k, &want, &bb);
    ck_assert_int_eq(st_reader_blob(r, id, &d, &len), ST_OK);
    ck_assert_uint_eq(len, want.data_len);
    ck_assert_mem_eq(d, want.data, len);
    n++;
  }
  ck_assert_uint_eq(n, nblobs);
  ck_assert_int_eq(st_reader_blob(r, 0, &d, &len), ST_E_NOTFOUND);
  ck_assert_int_eq(st_reader_blob(r, nblobs + 1, &d, &len), ST_E_NOTFOUND);
  st_reader_close(r);
}
END_TEST

/* A cleanly closed file lists every blob in its index: lookups work before
 * the stream reaches them. */
START_TEST(test_trace_blob_lookup_via_index) {
  const char *p = tpath("t");
  write_trace(p, 400, 256, 1);
  st_reader *r;
  const void *d;
  uint64_t len, b = 0;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  gen_rec g[400];
  for (int i = 0; i < 400; i++)
    gen(i, &g[i], &b);
  for (int i = 399; i >= 0; i--) {
    if (g[i].rec.kind != ST_REC_BLOB)
      continue;
    ck_assert_int_eq(st_reader_blob(r, g[i].rec.u.blob.id, &d, &len), ST_OK);
    ck_assert_uint_eq(len, g[i].data_len);
    ck_assert_mem_eq(d, g[i].data, len);
  }
  ck_assert_int_eq(st_reader_blob(r, b + 1, &d, &len), ST_E_NOTFOUND);
  st_reader_close(r);
}
END_TEST

/* st_reader_blob data stays valid across st_reader_next even when it points
 * into the chunk being streamed and the stream moves to the next chunk. */
START_TEST(test_trace_blob_pointer_survives_next_chunk) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  uint8_t a[300], c[300];
  memset(a, 0x5a, sizeof a);
  memset(c, 0xa5, sizeof c);
  uint64_t ida, idc;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_writer_set_chunk_size(w, 128);
  ck_assert_int_eq(st_writer_add_blob(w, a, sizeof a, &ida), ST_OK); /* chunk 0 */
  ck_assert_int_eq(st_writer_add_blob(w, c, sizeof c, &idc), ST_OK); /* chunk 1 */
  st_note n = {"k", "v"};
  ck_assert_int_eq(st_writer_add_note(w, &n), ST_OK); /* chunk 2 */
  ck_assert_int_eq(st_writer_close(w), ST_OK);

  st_reader *r;
  st_record rec;
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_int_eq(st_reader_blob(r, ida, &d, &len), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK); /* loads chunk 1 */
  ck_assert_mem_eq(d, a, sizeof a);
  ck_assert_int_eq(st_reader_blob(r, idc, &d, &len), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK); /* loads chunk 2 */
  ck_assert_int_eq(rec.kind, ST_REC_NOTE);
  ck_assert_mem_eq(d, c, sizeof c);
  ck_assert_int_eq(st_reader_blob(r, ida, &d, &len), ST_OK); /* from the file again */
  ck_assert_mem_eq(d, a, sizeof a);
  st_reader_close(r);
}
END_TEST

/* Blobs of several earlier chunks named in turn while the stream moves on
 * (a builder reading what a program packed chunks before) are decoded once
 * each, not once a lookup. */
START_TEST(test_trace_blob_lookups_keep_earlier_chunks) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  enum { NB = 4, NOTES = 6 };
  uint8_t b[NB][300];
  uint64_t id[NB];
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_writer_set_chunk_size(w, 128);
  for (int i = 0; i < NB; i++) { /* chunks 0 .. NB - 1 */
    memset(b[i], 0x11 * (i + 1), sizeof b[i]);
    ck_assert_int_eq(st_writer_add_blob(w, b[i], sizeof b[i], &id[i]), ST_OK);
  }
  st_note n = {"k", "v"};
  for (int i = 0; i < NOTES; i++)
    ck_assert_int_eq(st_writer_add_note(w, &n), ST_OK);
  ck_assert_int_eq(st_writer_close(w), ST_OK);

  st_reader *r;
  st_record rec;
  st_read_status rs;
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  for (int i = 0; i < NB; i++)
    ck_assert_int_eq(st_reader_next(r, &rec), ST_OK); /* past the blobs */
  int lookups = 0;
  while (st_reader_next(r, &rec) == ST_OK) { /* each note: every blob, in turn */
    ck_assert_int_eq(rec.kind, ST_REC_NOTE);
    for (int i = 0; i < NB; i++, lookups++) {
      ck_assert_int_eq(st_reader_blob(r, id[i], &d, &len), ST_OK);
      ck_assert_uint_eq(len, sizeof b[i]);
      ck_assert_mem_eq(d, b[i], sizeof b[i]);
    }
  }
  ck_assert_int_eq(lookups, NB * NOTES);
  st_reader_status(r, &rs);
  /* each blob's chunk decoded once (one slot for them: NB * NOTES) */
  ck_assert_uint_eq(rs.blob_chunk_loads, NB);
  st_reader_close(r);
}
END_TEST

static void fill_random(uint8_t *b, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    b[i] = (uint8_t)seed;
  }
}

/* Bytes that deflate only a few percent smaller (each of 200 values, at
 * random: ~5% by Huffman coding alone) are stored without deflating the
 * chunk, and the chunk after such a chunk is stored without a sample; text
 * in the same file, after that, is still deflated. */
START_TEST(test_trace_barely_compressible_chunk_is_stored) {
  const char *p = tpath("t");
  size_t n = 1u << 20;
  uint8_t *grain = malloc(n), *text = malloc(n);
  fill_random(grain, n, 0x9e3779b97f4a7c15ull);
  for (size_t i = 0; i < n; i++) {
    grain[i] = (uint8_t)(grain[i] % 200);
    text[i] = (uint8_t)("compressible "[i % 13]);
  }
  st_header h = test_header();
  st_writer *w;
  uint64_t id1, id2, id3;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, grain, n, &id1), ST_OK);
  ck_assert_int_eq(st_writer_flush(w), ST_OK);
  st_writer_stats ws;
  st_writer_get_stats(w, &ws);
  ck_assert_uint_eq(ws.chunks_sampled, 1);
  ck_assert_uint_eq(ws.chunks_sampled_out, 1);
  ck_assert_uint_ge(ws.file_bytes, n); /* stored, though deflate would shave a few % */
  grain[0] ^= 1;                       /* another blob: not de-duplicated */
  ck_assert_int_eq(st_writer_add_blob(w, grain, n, &id3), ST_OK);
  ck_assert_int_eq(st_writer_flush(w), ST_OK);
  st_writer_get_stats(w, &ws);
  ck_assert_uint_eq(ws.chunks_sampled, 1); /* stored without a sample */
  ck_assert_uint_eq(ws.chunks_sampled_out, 2);
  ck_assert_uint_ge(ws.file_bytes, 2 * n);
  uint64_t after_grain = ws.file_bytes;
  ck_assert_int_eq(st_writer_add_blob(w, text, n, &id2), ST_OK);
  ck_assert_int_eq(st_writer_flush(w), ST_OK);
  st_writer_get_stats(w, &ws);
  ck_assert_uint_eq(ws.chunks_sampled, 2);
  ck_assert_uint_eq(ws.chunks_sampled_out, 2);
  ck_assert_uint_lt(ws.file_bytes - after_grain, n / 10); /* the text deflated */
  ck_assert_int_eq(st_writer_close(w), ST_OK);

  st_reader *r;
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_blob(r, id3, &d, &len), ST_OK);
  ck_assert_uint_eq(len, n);
  ck_assert_mem_eq(d, grain, n);
  grain[0] ^= 1;
  ck_assert_int_eq(st_reader_blob(r, id1, &d, &len), ST_OK);
  ck_assert_mem_eq(d, grain, n);
  ck_assert_int_eq(st_reader_blob(r, id2, &d, &len), ST_OK);
  ck_assert_mem_eq(d, text, n);
  st_reader_close(r);
  free(grain);
  free(text);
}
END_TEST

START_TEST(test_trace_large_blob_round_trip) {
  const char *p = tpath("t");
  size_t n = 5u << 20;
  uint8_t *noise = malloc(n), *text = malloc(n);
  fill_random(noise, n, 88172645463325252ull);
  for (size_t i = 0; i < n; i++)
    text[i] = (uint8_t)("compressible "[i % 13]);
  st_header h = test_header();
  st_writer *w;
  uint64_t id1, id2;
  st_call c;
  gen_call(1, &c);
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  ck_assert_int_eq(st_writer_add_call(w, &c), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, noise, n, &id1), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(w, text, n, &id2), ST_OK);
  ck_assert_int_eq(st_writer_add_call(w, &c), ST_OK);
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  ck_assert_uint_lt(file_size(p), n + n / 10); /* the text compressed */

  st_reader *r;
  st_record rec;
  const void *d;
  uint64_t len;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_blob(r, id2, &d, &len), ST_OK); /* via index */
  ck_assert_uint_eq(len, n);
  ck_assert_mem_eq(d, text, n);
  int kinds[4] = {ST_REC_CALL, ST_REC_BLOB, ST_REC_BLOB, ST_REC_CALL};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
    ck_assert_int_eq(rec.kind, kinds[i]);
  }
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  ck_assert_int_eq(st_reader_blob(r, id1, &d, &len), ST_OK);
  ck_assert_uint_eq(len, n);
  ck_assert_mem_eq(d, noise, n);
  st_read_status st;
  st_reader_status(r, &st);
  ck_assert_uint_eq(st.chunks, 4); /* call | noise | text | call */
  st_reader_close(r);
  free(noise);
  free(text);
}
END_TEST

/* ---- Writer behaviour --------------------------------------------------------- */

START_TEST(test_trace_writer_refuses_existing_file) {
  const char *p = tpath("t");
  spit(p, "precious", 8);
  st_header h = test_header();
  st_writer *w = (st_writer *)1;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_E_EXISTS);
  ck_assert_ptr_null(w);
  size_t len;
  uint8_t *b = slurp(p, &len);
  ck_assert_uint_eq(len, 8);
  ck_assert_mem_eq(b, "precious", 8);
  free(b);
}
END_TEST

START_TEST(test_trace_writer_open_failure_keeps_errno) {
  st_header h = test_header();
  st_writer *w;
  errno = 0;
  ck_assert_int_eq(st_writer_open(&w, tpath("no/such/dir"), &h), ST_E_IO);
  ck_assert_int_eq(errno, ENOENT);
  ck_assert_ptr_null(w);
  st_reader *r;
  errno = 0;
  ck_assert_int_eq(st_reader_open(&r, tpath("missing")), ST_E_IO);
  ck_assert_int_eq(errno, ENOENT);
  ck_assert_ptr_null(r);
}
END_TEST

START_TEST(test_trace_writer_file_mode_is_0600) {
  mode_t old = umask(022);
  const char *p = tpath("t");
  write_trace(p, 10, 0, 1);
  umask(old);
  struct stat sb;
  ck_assert_int_eq(stat(p, &sb), 0);
  ck_assert_int_eq(sb.st_mode & 07777, 0600);
}
END_TEST

START_TEST(test_trace_writer_rejects_bad_arguments) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, NULL), ST_E_ARG);
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_call c;
  gen_call(1, &c);
  c.nfeat = ST_MAX_FEAT + 1;
  ck_assert_int_eq(st_writer_add_call(w, &c), ST_E_ARG);
  st_site s = {.id = 1, .nframes = ST_MAX_FRAMES + 1};
  ck_assert_int_eq(st_writer_add_site(w, &s), ST_E_ARG);
  uint64_t id;
  char x = 0;
  /* the length is checked before the (too short) buffer is touched */
  ck_assert_int_eq(st_writer_add_blob(w, &x, (1ull << 30) + 1, &id), ST_E_TOOBIG);
  ck_assert_int_eq(st_writer_add_blob(w, NULL, 5, &id), ST_E_ARG);
  ck_assert_int_eq(st_writer_add_blob(w, &x, 1, NULL), ST_E_ARG);
  st_type t = {.id = 1, .schema = NULL, .schema_len = 4};
  ck_assert_int_eq(st_writer_add_type(w, &t), ST_E_ARG);
  st_writer_stats st;
  st_writer_get_stats(w, &st);
  ck_assert_uint_eq(st.calls + st.blobs + st.raw_bytes, 0);
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  ck_assert_int_eq(st_writer_close(NULL), ST_OK);
  st_writer_abandon(NULL);
  st_reader_close(NULL);
  ck_assert_int_eq(st_writer_flush(NULL), ST_E_ARG);
}
END_TEST

START_TEST(test_trace_writer_abandon_writes_nothing) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  uint64_t header_size = file_size(p);
  st_call c;
  gen_call(3, &c);
  for (int i = 0; i < 100; i++)
    ck_assert_int_eq(st_writer_add_call(w, &c), ST_OK);
  st_writer_abandon(w);
  ck_assert_uint_eq(file_size(p), header_size);
  st_read_status st;
  int oe, e;
  ck_assert_int_eq(read_trace(p, &st, &oe, &e), 0);
  ck_assert_int_eq(e, ST_E_END);
  ck_assert_int_eq(st.clean, 0);
  ck_assert_int_eq(st.error, ST_OK);
}
END_TEST

START_TEST(test_trace_writer_stats_match_file) {
  const char *p = tpath("t");
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_writer_set_chunk_size(w, 4096);
  st_call c;
  for (int i = 0; i < 1000; i++) {
    gen_call(i, &c);
    ck_assert_int_eq(st_writer_add_call(w, &c), ST_OK);
  }
  ck_assert_int_eq(st_writer_flush(w), ST_OK);
  ck_assert_int_eq(st_writer_flush(w), ST_OK); /* empty: no-op */
  st_writer_stats s;
  st_writer_get_stats(w, &s);
  ck_assert_uint_eq(s.calls, 1000);
  ck_assert_uint_eq(s.file_bytes, file_size(p));
  ck_assert_uint_gt(s.chunks, 10);
  ck_assert_uint_gt(s.raw_bytes, s.file_bytes); /* compressed */
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  st_read_status st;
  int oe, e;
  st_reader *r;
  st_record rec;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  for (int i = 0; i < 1000; i++) {
    ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
    gen_call(i, &c);
    ck_assert_ptr_null(call_diff(&c, &rec.u.call));
  }
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  st_reader_status(r, &st);
  ck_assert_uint_eq(st.chunks, s.chunks);
  st_reader_close(r);
  (void)oe;
  (void)e;
}
END_TEST

/* ---- Killed writers and damaged files --------------------------------------- */

START_TEST(test_trace_reader_unclean_file_reads_to_last_chunk) {
  const char *p = tpath("t");
  write_trace(p, 200, 300, 0);
  st_read_status st;
  int oe, e;
  ck_assert_int_eq(read_trace(p, &st, &oe, &e), 200);
  ck_assert_int_eq(e, ST_E_END);
  ck_assert_int_eq(st.clean, 0);
  ck_assert_int_eq(st.error, ST_OK);
  ck_assert_uint_eq(st.good_bytes, file_size(p));
}
END_TEST

/* End of the last chunk that fits in the first l bytes (or the header). */
static uint64_t last_boundary(const file_map *m, uint64_t l) {
  uint64_t b = m->data_off;
  for (int i = 0; i < m->n; i++)
    if (m->c[i].end <= l)
      b = m->c[i].end;
  return b;
}

/* What a reader must report for the first l bytes of file m; NULL if o is
 * right, else the expectation it breaks. */
static const char *truncation_diff(const file_map *m, uint64_t l, const outcome *o) {
  if (l < m->data_off)
    return o->open_err == ST_E_TRUNCATED ? NULL : "open: want ST_E_TRUNCATED";
  uint64_t b = last_boundary(m, l);
  int whole = l == m->size, aligned = whole || l == b;
  DIFF(o->open_err != ST_OK, "open failed");
  DIFF(o->diff, o->diff);
  DIFF(!o->stays_ended, "stream restarted after its end");
  DIFF(o->n != records_before(m, l), "record count");
  DIFF(o->st.clean != whole, "clean");
  DIFF(o->st.good_bytes != (whole ? l : b), "good_bytes");
  DIFF(o->err != (aligned ? ST_E_END : ST_E_TRUNCATED), "last st_reader_next result");
  DIFF(o->st.error != (aligned ? ST_OK : ST_E_TRUNCATED), "status.error");
  DIFF(!aligned && o->st.error_offset != b, "status.error_offset");
  return NULL;
}

/* Every prefix of a file is what a writer killed at that byte leaves. */
START_TEST(test_trace_reader_truncated_at_every_offset) {
  const char *full = tpath("full"), *cut = tpath("cut");
  write_trace(full, 60, 160, 1);
  size_t len;
  uint8_t *b = slurp(full, &len);
  file_map m;
  map_file(b, len, &m);
  ck_assert_int_gt(m.n, 5);
  for (size_t l = 0; l <= len; l++) {
    spit(cut, b, l);
    outcome o = read_quiet(cut);
    const char *d = truncation_diff(&m, l, &o);
    ck_assert_msg(!d, "first %zu of %zu bytes: %s (open %d, next %d, %d records)", l, len, d,
                  o.open_err, o.err, o.n);
  }
  free(b);
}
END_TEST

/* Start of the region (header, a chunk, the trailer) holding byte off. */
static uint64_t region_of(const file_map *m, uint64_t off) {
  if (off < m->data_off)
    return 0;
  for (int i = 0; i < m->n; i++)
    if (off < m->c[i].end)
      return m->c[i].off;
  return m->c[m->n - 1].end;
}

/* What a reader must report with a bit flipped at byte off of file m. */
static const char *flip_diff(const file_map *m, uint64_t off, const outcome *o) {
  if (off < m->data_off)
    return o->open_err == ST_E_MAGIC || o->open_err == ST_E_HEADER ? NULL : "open result";
  DIFF(o->open_err != ST_OK, "open failed");
  DIFF(o->diff, o->diff);
  DIFF(!o->stays_ended, "stream restarted after its end");
  DIFF(o->n != records_before(m, off), "record count");
  DIFF(o->st.error == ST_OK || o->err != o->st.error, "error not reported");
  DIFF(o->st.error_offset != region_of(m, off), "status.error_offset");
  /* the end mark stays valid while only data chunks are damaged */
  DIFF(o->st.clean != (off < m->c[m->n - 1].off), "clean");
  return NULL;
}

/* CRCs cover every byte, so any single flipped bit is reported, at the start
 * of the damaged region, after every record before it. */
START_TEST(test_trace_reader_bit_flip) {
  const char *p = tpath("t");
  write_trace(p, 24, 128, 1);
  size_t len;
  uint8_t *b = slurp(p, &len);
  file_map m;
  map_file(b, len, &m);
  ck_assert_int_gt(m.n, 4);
  int fd = open(p, O_WRONLY);
  for (size_t off = 0; off < len; off++) {
    for (int bit = 0; bit < 8; bit++) {
      uint8_t x = (uint8_t)(b[off] ^ (1u << bit));
      if (pwrite(fd, &x, 1, (off_t)off) != 1)
        ck_abort_msg("pwrite: %s", strerror(errno));
      outcome o = read_quiet(p);
      const char *d = flip_diff(&m, off, &o);
      ck_assert_msg(!d, "bit %d of byte %zu/%zu: %s (open %d, next %d, %d records)", bit, off, len,
                    d, o.open_err, o.err, o.n);
    }
    ck_assert_int_eq(pwrite(fd, &b[off], 1, (off_t)off), 1);
  }
  close(fd);
  free(b);
}
END_TEST

START_TEST(test_trace_reader_rejects_bad_magic) {
  const char *p = tpath("t");
  spit(p, "#!/bin/sh\necho this is not a trace\n", 35);
  st_reader *r;
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_MAGIC);
  ck_assert_ptr_null(r);
  spit(p, "STANDIX", 7);
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_MAGIC);
}
END_TEST

START_TEST(test_trace_reader_short_file_is_truncated) {
  const char *p = tpath("t");
  st_reader *r;
  spit(p, "", 0);
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_TRUNCATED);
  spit(p, "STAND", 5);
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_TRUNCATED);
  ck_assert_int_eq(st_reader_open(&r, tmpdir), ST_E_IO); /* a directory */
}
END_TEST

/* Rewrite the preamble's version fields and features, with a valid CRC. */
static int open_patched(const char *src, uint16_t version, uint16_t min_read, uint32_t features) {
  size_t len;
  uint8_t *b = slurp(src, &len);
  stf_put_u16(b + 8, version);
  stf_put_u16(b + 10, min_read);
  stf_put_u32(b + 12, features);
  stf_put_u32(b + 20, stf_crc(b, 20));
  const char *p = tpath("patched");
  spit(p, b, len);
  free(b);
  st_reader *r;
  int e = st_reader_open(&r, p);
  if (e == ST_OK) {
    st_record rec;
    int n = 0;
    while (st_reader_next(r, &rec) == ST_OK)
      n++;
    ck_assert_int_eq(n, 20);
    ck_assert_uint_eq(st_reader_header(r)->version, version);
    st_reader_close(r);
  }
  return e;
}

START_TEST(test_trace_reader_rejects_future_version) {
  const char *p = tpath("t");
  write_trace(p, 20, 0, 1);
  ck_assert_int_eq(open_patched(p, 2, 2, 0), ST_E_VERSION);
  ck_assert_int_eq(open_patched(p, ST_FORMAT_VERSION, ST_FORMAT_VERSION + 1, 0), ST_E_VERSION);
  ck_assert_int_eq(open_patched(p, 7, 1, 0), ST_OK); /* newer, but readable by v1 */
  ck_assert_int_eq(open_patched(p, 1, 0, 0), ST_E_HEADER);
}
END_TEST

START_TEST(test_trace_reader_feature_flags) {
  const char *p = tpath("t");
  write_trace(p, 20, 0, 1);
  ck_assert_int_eq(open_patched(p, 1, 1, STF_FEAT_RESP_DIGEST), ST_OK); /* known required */
  ck_assert_int_eq(open_patched(p, 1, 1, STF_FEAT_MANY_FEATURES), ST_OK); /* known required */
  ck_assert_int_eq(open_patched(p, 1, 1, 1u << 2), ST_E_VERSION);         /* unknown required */
  ck_assert_int_eq(open_patched(p, 1, 1, 1u << 15), ST_E_VERSION); /* unknown required */
  ck_assert_int_eq(open_patched(p, 1, 1, 1u << 16), ST_OK);        /* optional: ignored */
}
END_TEST

START_TEST(test_trace_reader_rejects_bad_header_crc) {
  const char *p = tpath("t");
  write_trace(p, 5, 0, 1);
  size_t len;
  uint8_t *b = slurp(p, &len);
  b[STF_PREAMBLE_LEN + 3] ^= 0x10; /* a payload byte */
  spit(p, b, len);
  st_reader *r;
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_HEADER);
  b[STF_PREAMBLE_LEN + 3] ^= 0x10;
  b[9] ^= 1; /* version, without fixing the preamble CRC */
  spit(p, b, len);
  ck_assert_int_eq(st_reader_open(&r, p), ST_E_HEADER);
  free(b);
}
END_TEST

/* ---- Crafted chunks: valid CRCs, invalid contents ----------------------------- */

/* A file holding only a header (a writer killed before its first chunk). */
static const char *header_only(void) {
  const char *p = tpath("crafted");
  unlink(p);
  st_header h = test_header();
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, p, &h), ST_OK);
  st_writer_abandon(w);
  return p;
}

/* Append a chunk with correct CRCs around the given payload; comp_len and
 * raw_len override the real lengths when non-zero. */
static void append_chunk_ex(const char *p, uint8_t type, uint8_t method, uint32_t seq,
                            const void *payload, uint32_t len, uint32_t nrec, uint32_t raw_len,
                            uint32_t comp_len) {
  stf_chunk_hdr h = {.type = type,
                     .method = method,
                     .seq = seq,
                     .nrec = nrec,
                     .comp_len = comp_len ? comp_len : len,
                     .raw_len = raw_len ? raw_len : len,
                     .data_crc = stf_crc(payload, len)};
  uint8_t hdr[STF_CHUNK_HDR_LEN];
  stf_chunk_hdr_encode(hdr, &h);
  int fd = open(p, O_WRONLY | O_APPEND);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
  ck_assert_int_eq(write(fd, payload, len), (ssize_t)len);
  close(fd);
}

static void append_chunk(const char *p, uint32_t seq, const void *raw, uint32_t len,
                         uint32_t nrec) {
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_STORED, seq, raw, len, nrec, 0, 0);
}

/* A valid chunk 0 with one note record ("a" = "b"). */
static const char *file_with_good_chunk(void) {
  const char *p = header_only();
  static const uint8_t note[] = {ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  append_chunk(p, 0, note, sizeof note, 1);
  return p;
}

/* Open p, expect the good note, then `err` at offset `at`, then END. */
static void expect_note_then(const char *p, int err, uint64_t at) {
  st_reader *r;
  st_record rec;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_int_eq(rec.kind, ST_REC_NOTE);
  ck_assert_str_eq(rec.u.note.key, "a");
  ck_assert_str_eq(rec.u.note.value, "b");
  ck_assert_int_eq(st_reader_next(r, &rec), err);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  st_read_status st;
  st_reader_status(r, &st);
  ck_assert_int_eq(st.error, err == ST_E_END ? ST_OK : err);
  if (err != ST_E_END) {
    ck_assert_uint_eq(st.error_offset, at);
    ck_assert_uint_eq(st.good_bytes, at);
    ck_assert_uint_eq(st.chunks, 1);
    ck_assert_uint_eq(st.raw_bytes, 6); /* the good chunk's note */
  }
  ck_assert_uint_eq(st.records, 1);
  st_reader_close(r);
}

/* Second chunk = the given records; the reader must stop with `err`. */
static void expect_bad_second_chunk(const uint8_t *raw, uint32_t len, uint32_t nrec, int err) {
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  append_chunk(p, 1, raw, len, nrec);
  expect_note_then(p, err, at);
}

/* A call body up to (not including) nfeat, with the record header. */
static uint32_t call_prefix(uint8_t *b, uint32_t body_len) {
  uint8_t *p = b;
  *p++ = ST_REC_CALL;
  *p++ = (uint8_t)body_len;
  *p++ = ST_API_PB_PACK;
  *p++ = 0;
  for (int i = 0; i < 9; i++) /* reason thread type site seq start latency */
    *p++ = 0;                 /* (and two spare zero bytes of the fp) */
  memset(p, 0, 14);
  p += 14;
  for (int i = 0; i < 5; i++) /* blobs, lengths, result */
    *p++ = 0;
  return (uint32_t)(p - b);
}

/* The records b[0..n) (nrec of them) in a chunk after a good one: the one
 * record read back from them, of kind `kind`, into *out; the file ends
 * after it. */
static void read_appended(const uint8_t *b, uint32_t n, uint32_t nrec, int kind, st_record *out) {
  const char *p = file_with_good_chunk();
  append_chunk(p, 1, b, n, nrec);
  st_reader *r;
  st_record rec;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_int_eq(st_reader_next(r, out), ST_OK);
  ck_assert_int_eq(out->kind, kind);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_END);
  st_reader_close(r);
}

static void read_appended_call(const uint8_t *b, uint32_t n, st_call *c) {
  st_record rec;
  read_appended(b, n, 1, ST_REC_CALL, &rec);
  *c = rec.u.call;
}

START_TEST(test_trace_reader_rejects_too_many_features) {
  uint8_t b[128];
  uint32_t n = call_prefix(b, 0);
  b[n++] = STF_MAX_NFEAT + 1;
  for (int i = 0; i < STF_MAX_NFEAT + 1; i++)
    b[n++] = 1;
  b[1] = (uint8_t)(n - 2);
  expect_bad_second_chunk(b, n, 1, ST_E_CORRUPT);
  /* the same record with a legal count reads fine */
  n = call_prefix(b, 0);
  b[n++] = 2;
  b[n++] = 5;
  b[n++] = 6;
  b[n++] = 0xee; /* a field added by a newer writer: ignored */
  b[1] = (uint8_t)(n - 2);
  st_call c;
  read_appended_call(b, n, &c);
  ck_assert_uint_eq(c.nfeat, 2);
  ck_assert_uint_eq(c.feat[1], 6);
}
END_TEST

/* A newer writer's call with more feature slots than this reader knows:
 * the known ones kept, the others skipped, what follows read as before. */
START_TEST(test_trace_reader_skips_features_it_does_not_know) {
  uint8_t b[128];
  uint32_t n = call_prefix(b, 0);
  b[n++] = ST_MAX_FEAT + 3;
  for (int i = 0; i < ST_MAX_FEAT + 3; i++)
    b[n++] = (uint8_t)(i + 1);
  b[n++] = 0xee; /* a field added by a newer writer: ignored */
  b[1] = (uint8_t)(n - 2);
  st_call c;
  read_appended_call(b, n, &c);
  ck_assert_uint_eq(c.nfeat, ST_MAX_FEAT);
  for (int i = 0; i < ST_MAX_FEAT; i++)
    ck_assert_uint_eq(c.feat[i], (uint64_t)i + 1);
}
END_TEST

START_TEST(test_trace_reader_rejects_too_many_frames) {
  uint8_t b[] = {ST_REC_SITE, 2, 1, ST_MAX_FRAMES + 1};
  expect_bad_second_chunk(b, sizeof b, 1, ST_E_CORRUPT);
}
END_TEST

START_TEST(test_trace_reader_rejects_string_outside_record) {
  /* the value claims 50 bytes, the record body has 2 left */
  uint8_t b[] = {ST_REC_NOTE, 5, 1, 'k', 50, 'v', 'v', ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  expect_bad_second_chunk(b, sizeof b, 2, ST_E_CORRUPT);
  /* a huge varint length */
  uint8_t c[] = {ST_REC_NOTE, 12, 1, 'k', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1};
  expect_bad_second_chunk(c, sizeof c, 1, ST_E_CORRUPT);
}
END_TEST

START_TEST(test_trace_reader_rejects_record_outside_chunk) {
  uint8_t b[] = {ST_REC_NOTE, 100, 1, 'a', 1, 'b'};
  expect_bad_second_chunk(b, sizeof b, 1, ST_E_CORRUPT);
}
END_TEST

START_TEST(test_trace_reader_rejects_wrong_record_count) {
  uint8_t b[] = {ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  append_chunk(p, 1, b, sizeof b, 2); /* claims 2, holds 1 */
  st_reader *r;
  st_record rec;
  ck_assert_int_eq(st_reader_open(&r, p), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_OK);
  ck_assert_int_eq(st_reader_next(r, &rec), ST_E_CORRUPT);
  st_read_status st;
  st_reader_status(r, &st);
  ck_assert_uint_eq(st.error_offset, at);
  st_reader_close(r);
  expect_bad_second_chunk(b, sizeof b, 0, ST_E_CORRUPT); /* claims 0: trailing bytes */
}
END_TEST

START_TEST(test_trace_reader_rejects_blob_ids_out_of_order) {
  uint8_t b[] = {ST_REC_BLOB, 3, 2, 1, 'x'}; /* first blob must be id 1 */
  expect_bad_second_chunk(b, sizeof b, 1, ST_E_CORRUPT);
  uint8_t c[] = {ST_REC_BLOB, 3, 1, 5, 'x'}; /* length past the body */
  expect_bad_second_chunk(c, sizeof c, 1, ST_E_CORRUPT);
}
END_TEST

START_TEST(test_trace_reader_skips_unknown_record_kind) {
  uint8_t b[] = {99, 3, 1, 2, 3, ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  st_record rec;
  read_appended(b, sizeof b, 2, ST_REC_NOTE, &rec);
  uint8_t z[] = {0, 0}; /* kind 0 is never valid */
  expect_bad_second_chunk(z, sizeof z, 1, ST_E_CORRUPT);
}
END_TEST

START_TEST(test_trace_reader_rejects_huge_lengths) {
  uint8_t raw[] = {ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  /* compressed length past the end of the file: a cut-off write */
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_ZLIB, 1, raw, sizeof raw, 1, 0, 0xfffffff0u);
  expect_note_then(p, ST_E_TRUNCATED, at);
  /* 100 kB from 6 bytes is more than deflate can produce */
  p = file_with_good_chunk();
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_ZLIB, 1, raw, sizeof raw, 1, 100000, 0);
  expect_note_then(p, ST_E_CORRUPT, at);
  /* 4 GB: over the format's chunk limit */
  p = file_with_good_chunk();
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_ZLIB, 1, raw, sizeof raw, 1, 0xfffffff0u, 0);
  expect_note_then(p, ST_E_CORRUPT, at);
  /* stored chunk whose lengths disagree */
  p = file_with_good_chunk();
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_STORED, 1, raw, sizeof raw, 1, 5000, 0);
  expect_note_then(p, ST_E_CORRUPT, at);
}
END_TEST

START_TEST(test_trace_reader_rejects_bad_zlib_stream) {
  uint8_t raw[64], comp[128];
  memset(raw, 'q', sizeof raw);
  uLongf clen = sizeof comp;
  ck_assert_int_eq(compress2(comp, &clen, raw, sizeof raw, 1), Z_OK);
  comp[clen / 2] ^= 0xff; /* damaged before the CRC was computed */
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  append_chunk_ex(p, STF_CHUNK_DATA, STF_METHOD_ZLIB, 1, comp, (uint32_t)clen, 1, sizeof raw, 0);
  expect_note_then(p, ST_E_CORRUPT, at);
}
END_TEST

START_TEST(test_trace_reader_rejects_chunk_out_of_sequence) {
  uint8_t raw[] = {ST_REC_NOTE, 4, 1, 'a', 1, 'b'};
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  append_chunk(p, 2, raw, sizeof raw, 1); /* chunk 1 is missing */
  expect_note_then(p, ST_E_CORRUPT, at);
  p = file_with_good_chunk();
  append_chunk_ex(p, 7, STF_METHOD_STORED, 1, raw, sizeof raw, 1, 0, 0); /* unknown type */
  expect_note_then(p, ST_E_CORRUPT, at);
}
END_TEST

START_TEST(test_trace_reader_rejects_garbage_after_chunks) {
  const char *p = file_with_good_chunk();
  uint64_t at = file_size(p);
  int fd = open(p, O_WRONLY | O_APPEND);
  uint8_t junk[100];
  memset(junk, 0, sizeof junk);
  ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
  close(fd);
  expect_note_then(p, ST_E_CRC, at);
}
END_TEST

/* ---- Error text ---------------------------------------------------------------- */

START_TEST(test_trace_strerror_covers_every_code) {
  for (int e = ST_OK; e <= ST_E_TOOBIG; e++) {
    const char *s = st_strerror(e);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_gt((int)strlen(s), 5);
    for (int k = ST_OK; k < e; k++)
      ck_assert_str_ne(s, st_strerror(k));
  }
  ck_assert_ptr_nonnull(st_strerror(-1));
  ck_assert_ptr_nonnull(st_strerror(1000));
}
END_TEST

static Suite *trace_suite(void) {
  Suite *s = suite_create("traces");
  TCase *tc = tcase_create("core");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_set_timeout(tc, 600);
  tcase_add_test(tc, test_trace_round_trip_all_record_kinds);
  tcase_add_test(tc, test_trace_round_trip_many_small_chunks);
  tcase_add_test(tc, test_trace_barely_compressible_chunk_is_stored);
  tcase_add_test(tc, test_trace_header_fields_round_trip);
  tcase_add_test(tc, test_trace_header_process_identity_old_and_new);
  tcase_add_test(tc, test_trace_peek_process);
  tcase_add_test(tc, test_trace_header_caps_argv_and_strings);
  tcase_add_test(tc, test_trace_empty_strings_and_schema_round_trip);
  tcase_add_test(tc, test_trace_blob_dedup);
  tcase_add_test(tc, test_trace_blob_dedup_table_grows);
  tcase_add_test(tc, test_trace_blob_lookup_after_stream);
  tcase_add_test(tc, test_trace_blob_lookup_via_index);
  tcase_add_test(tc, test_trace_blob_pointer_survives_next_chunk);
  tcase_add_test(tc, test_trace_blob_lookups_keep_earlier_chunks);
  tcase_add_test(tc, test_trace_large_blob_round_trip);
  tcase_add_test(tc, test_trace_writer_refuses_existing_file);
  tcase_add_test(tc, test_trace_writer_open_failure_keeps_errno);
  tcase_add_test(tc, test_trace_writer_file_mode_is_0600);
  tcase_add_test(tc, test_trace_writer_rejects_bad_arguments);
  tcase_add_test(tc, test_trace_writer_abandon_writes_nothing);
  tcase_add_test(tc, test_trace_writer_stats_match_file);
  tcase_add_test(tc, test_trace_reader_unclean_file_reads_to_last_chunk);
  tcase_add_test(tc, test_trace_reader_truncated_at_every_offset);
  tcase_add_test(tc, test_trace_reader_bit_flip);
  tcase_add_test(tc, test_trace_reader_rejects_bad_magic);
  tcase_add_test(tc, test_trace_reader_short_file_is_truncated);
  tcase_add_test(tc, test_trace_reader_rejects_future_version);
  tcase_add_test(tc, test_trace_reader_feature_flags);
  tcase_add_test(tc, test_trace_reader_rejects_bad_header_crc);
  tcase_add_test(tc, test_trace_reader_rejects_too_many_features);
  tcase_add_test(tc, test_trace_reader_skips_features_it_does_not_know);
  tcase_add_test(tc, test_trace_reader_rejects_too_many_frames);
  tcase_add_test(tc, test_trace_reader_rejects_string_outside_record);
  tcase_add_test(tc, test_trace_reader_rejects_record_outside_chunk);
  tcase_add_test(tc, test_trace_reader_rejects_wrong_record_count);
  tcase_add_test(tc, test_trace_reader_rejects_blob_ids_out_of_order);
  tcase_add_test(tc, test_trace_reader_skips_unknown_record_kind);
  tcase_add_test(tc, test_trace_reader_rejects_huge_lengths);
  tcase_add_test(tc, test_trace_reader_rejects_bad_zlib_stream);
  tcase_add_test(tc, test_trace_reader_rejects_chunk_out_of_sequence);
  tcase_add_test(tc, test_trace_reader_rejects_garbage_after_chunks);
  tcase_add_test(tc, test_trace_strerror_covers_every_code);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(trace_suite());
  srunner_run_all(sr, CK_ENV); /* CK_VERBOSITY=verbose lists every test */
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

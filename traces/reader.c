/* reader.c — st_reader: streams the records of a trace chunk by chunk and
 * resolves blobs on demand.
 *
 * Nothing read from the file is trusted. Lengths are checked against the
 * file size before anything is allocated, decompressed sizes against what
 * deflate can produce, every field against the bounds of its record. The
 * first problem stops the stream with an error code and its file offset;
 * everything before it has been returned. The layout is in FORMAT.md. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>

#include "format.h"
#include "trace.h"

#define NO_CHUNK UINT32_MAX
#define REC_SKIP (-1) /* internal: a record of a kind this reader does not know */

/* A decompressed chunk. The reader keeps the one being streamed and a few
 * that blob lookups needed (BLOB_SLOTS, least recently used first out):
 * calls often name blobs of two or three earlier chunks in turn (protogen
 * unpacks what it packed a few chunks before), and with one slot for them
 * building protogen -n 2000's replay database inflated 5.4 GB for a 45 MB
 * trace, 5,139 chunk loads against 44 chunks. */
typedef struct {
  uint8_t *buf;
  size_t cap, len;
  uint32_t chunk; /* chunk number held, NO_CHUNK if none */
  uint64_t used;  /* blob slots: when a lookup last used it */
} slot;

#define BLOB_SLOTS 8
/* Decoded bytes the blob slots keep at most, beyond the one just loaded
 * (a trace of large blobs, say JPEG rows kept whole, keeps fewer chunks) */
#define BLOB_SLOT_BUDGET (32u << 20)
#define LAST_NONE (-1)
#define LAST_STREAM (-2)

/* Where blob id (position + 1) is: its record's offset in the raw chunk. */
typedef struct {
  uint32_t chunk, off, len;
} blob_loc;

struct st_reader {
  int fd;
  uint64_t size;
  st_header hdr;
  void *hdr_mem;     /* argv array and strings of hdr */
  uint64_t data_off; /* where the first chunk starts */

  /* Streaming state. */
  uint64_t cur_off, next_off; /* current and next chunk */
  uint32_t next_seq;
  int have_chunk;                /* stream slot holds the chunk at cur_off */
  uint32_t left;                 /* records of that chunk not yet returned */
  size_t pos;                    /* next record in stream.buf */
  uint64_t prev_seq, prev_start; /* call delta bases, reset per chunk */
  int done;
  slot stream, blobs_at[BLOB_SLOTS];
  uint64_t blob_tick;
  int last_blob; /* where the last st_reader_blob result points: a blob slot,
                    LAST_STREAM or LAST_NONE */

  uint8_t *comp; /* compressed bytes of the chunk being loaded */
  size_t comp_cap;
  struct libdeflate_decompressor *z; /* zlib streams, 2-3x faster than zlib */
  uint8_t *scratch; /* NUL-terminated strings of the current record */
  size_t scratch_cap, scratch_len;

  uint64_t *chunk_off; /* offsets of data chunks known so far */
  size_t nchunk_off, chunk_off_cap;
  blob_loc *blobs;
  size_t nblobs, blobs_cap;
  uint64_t stream_blobs; /* blob records streamed so far */

  int clean;
  uint64_t index_off;
  uint32_t index_chunks;
  st_read_status st;
};

/* ---- Memory and I/O ------------------------------------------------------ */

static int grow_array(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap)
    return ST_OK;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need)
    n *= 2;
  void *q = realloc(*p, n * size);
  if (!q)
    return ST_E_NOMEM;
  *p = q;
  *cap = n;
  return ST_OK;
}

/* A buffer of at least n bytes whose old contents do not matter. A buffer
 * far larger than needed (left by one huge blob) is given back. */
static int scratch_buf(uint8_t **buf, size_t *cap, size_t n) {
  if (n == 0)
    n = 1;
  if (*cap >= n && *cap <= 4 * n + (8u << 20))
    return ST_OK;
  free(*buf);
  size_t want = n + n / 4;
  *buf = malloc(want);
  *cap = *buf ? want : 0;
  return *buf ? ST_OK : ST_E_NOMEM;
}

/* Read exactly n bytes at off: ST_E_IO (errno kept), or ST_E_TRUNCATED if
 * the file is shorter than it was at open. */
static int read_at(const st_reader *r, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t k = pread(r->fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return ST_E_IO;
    if (k == 0)
      return ST_E_TRUNCATED;
    got += (size_t)k;
  }
  return ST_OK;
}

/* ---- Header ---------------------------------------------------------------- */

static int parse_header(st_reader *r, const uint8_t *p, uint32_t plen) {
  const char **argv = malloc(ST_MAX_ARGS * sizeof *argv + plen + 1);
  if (!argv)
    return ST_E_NOMEM;
  r->hdr_mem = argv;
  char *s = (char *)(argv + ST_MAX_ARGS);
  uint32_t version = r->hdr.version;
  int e = stf_parse_header(p, plen, &r->hdr, &s, argv);
  r->hdr.version = version;
  return e;
}

static int read_header(st_reader *r) {
  uint8_t pre[STF_PREAMBLE_LEN];
  size_t have = r->size < sizeof pre ? (size_t)r->size : sizeof pre;
  int e = read_at(r, pre, have, 0);
  if (e)
    return e;
  /* A short file that starts like a trace is a trace cut short. */
  if (memcmp(pre, STF_MAGIC, have < STF_MAGIC_LEN ? have : STF_MAGIC_LEN) != 0)
    return ST_E_MAGIC;
  if (have < sizeof pre)
    return ST_E_TRUNCATED;
  uint32_t plen;
  if ((e = stf_check_preamble(pre, &r->hdr.version, &plen)))
    return e;
  r->data_off = STF_PREAMBLE_LEN + (uint64_t)plen + STF_PAYLOAD_CRC_LEN;
  if (r->size < r->data_off)
    return ST_E_TRUNCATED;
  uint8_t *buf = malloc((size_t)plen + STF_PAYLOAD_CRC_LEN);
  if (!buf)
    return ST_E_NOMEM;
  e = read_at(r, buf, (size_t)plen + STF_PAYLOAD_CRC_LEN, STF_PREAMBLE_LEN);
  if (!e && stf_crc(buf, plen) != stf_get_u32(buf + plen))
    e = ST_E_HEADER;
  if (!e)
    e = parse_header(r, buf, plen);
  free(buf);
  return e;
}

/* ---- Chunks ---------------------------------------------------------------- */

/* Read and check the header of the chunk at off, and that its payload lies
 * inside the file (a payload running past the end is a cut-off write). */
static int chunk_header_at(const st_reader *r, uint64_t off, stf_chunk_hdr *h) {
  uint8_t b[STF_CHUNK_HDR_LEN];
  if (r->size - off < STF_CHUNK_HDR_LEN)
    return ST_E_TRUNCATED;
  int e = read_at(r, b, sizeof b, off);
  if (!e)
    e = stf_chunk_hdr_decode(b, h);
  if (!e && h->comp_len > r->size - off - STF_CHUNK_HDR_LEN)
    e = ST_E_TRUNCATED;
  return e;
}

/* Read the stored bytes of the chunk at off into dst and check their CRC. */
static int read_payload(const st_reader *r, uint64_t off, const stf_chunk_hdr *h, uint8_t *dst) {
  int e = read_at(r, dst, h->comp_len, off + STF_CHUNK_HDR_LEN);
  if (!e && stf_crc(dst, h->comp_len) != h->data_crc)
    e = ST_E_CRC;
  return e;
}

/* Inflate r->comp into dst: exactly raw_len bytes, the whole input, one
 * complete zlib stream; anything else is a damaged chunk. */
static int inflate_chunk(st_reader *r, const stf_chunk_hdr *h, uint8_t *dst) {
  size_t used = 0, made = 0;
  enum libdeflate_result rc =
      libdeflate_zlib_decompress_ex(r->z, r->comp, h->comp_len, dst, h->raw_len, &used, &made);
  if (rc == LIBDEFLATE_SUCCESS && used == h->comp_len && made == h->raw_len)
    return ST_OK;
  return ST_E_CORRUPT;
}

/* Load the chunk at off (header h already checked) into s. Stored chunks
 * are read straight into the slot: no copy for incompressible payloads. */
static int load_chunk(st_reader *r, uint64_t off, const stf_chunk_hdr *h, slot *s) {
  s->chunk = NO_CHUNK;
  int e = scratch_buf(&s->buf, &s->cap, h->raw_len);
  if (e)
    return e;
  if (h->method == STF_METHOD_STORED) {
    e = read_payload(r, off, h, s->buf);
  } else {
    e = scratch_buf(&r->comp, &r->comp_cap, h->comp_len);
    if (!e)
      e = read_payload(r, off, h, r->comp);
    if (!e)
      e = inflate_chunk(r, h, s->buf);
  }
  if (e)
    return e;
  s->len = h->raw_len;
  s->chunk = h->seq;
  return ST_OK;
}

/* ---- Index ---------------------------------------------------------------- */

static int parse_chunk_table(st_reader *r, stf_cur *c, const stf_trailer *t) {
  uint64_t n = stf_get_varint(c);
  if (n != t->nchunks || n > (t->index_off - r->data_off) / STF_CHUNK_HDR_LEN)
    return ST_E_CORRUPT;
  int e = grow_array((void **)&r->chunk_off, &r->chunk_off_cap, (size_t)n, sizeof(uint64_t));
  if (e)
    return e;
  uint64_t off = 0;
  for (uint64_t i = 0; i < n && !c->bad; i++) {
    uint64_t d = stf_get_varint(c);
    /* chunk 0 starts right after the header; chunks are >= 32 bytes apart */
    if (i == 0 ? d != r->data_off : d < STF_CHUNK_HDR_LEN)
      return ST_E_CORRUPT;
    /* off <= index_off holds throughout, so these cannot wrap */
    if (d > t->index_off - off || t->index_off - off - d < STF_CHUNK_HDR_LEN)
      return ST_E_CORRUPT;
    off += d;
    r->chunk_off[i] = off;
    for (int k = 0; k < 4; k++) /* records, calls, min and max start_ns */
      stf_get_varint(c);
  }
  r->nchunk_off = (size_t)n;
  return c->bad ? ST_E_CORRUPT : ST_OK;
}

static int parse_blob_table(st_reader *r, stf_cur *c) {
  uint64_t n = stf_get_varint(c);
  if (n > (uint64_t)(c->end - c->p) / 3) /* an entry takes at least 3 bytes */
    return ST_E_CORRUPT;
  int e = grow_array((void **)&r->blobs, &r->blobs_cap, (size_t)n, sizeof *r->blobs);
  if (e)
    return e;
  uint64_t chunk = 0;
  for (uint64_t i = 0; i < n && !c->bad; i++) {
    chunk += stf_get_varint_max(c, r->nchunk_off);
    uint64_t off = stf_get_varint_max(c, STF_MAX_CHUNK_RAW);
    uint64_t len = stf_get_varint_max(c, STF_MAX_BLOB);
    if (chunk >= r->nchunk_off)
      return ST_E_CORRUPT;
    r->blobs[i] = (blob_loc){(uint32_t)chunk, (uint32_t)off, (uint32_t)len};
  }
  r->nblobs = (size_t)n;
  return c->bad ? ST_E_CORRUPT : ST_OK;
}

/* The end mark is valid and points at a valid index chunk just before it. */
static int find_index(st_reader *r, stf_trailer *t, stf_chunk_hdr *h) {
  uint8_t b[STF_TRAILER_LEN];
  if (r->size < r->data_off + STF_CHUNK_HDR_LEN + STF_TRAILER_LEN)
    return ST_E_END;
  uint64_t toff = r->size - STF_TRAILER_LEN;
  int e = read_at(r, b, sizeof b, toff);
  if (e)
    return e;
  if (!stf_trailer_decode(b, t) || t->index_off < r->data_off || t->index_off > toff ||
      t->index_len != toff - t->index_off)
    return ST_E_CORRUPT;
  e = chunk_header_at(r, t->index_off, h);
  if (!e && (h->type != STF_CHUNK_INDEX || h->seq != t->nchunks ||
             STF_CHUNK_HDR_LEN + (uint64_t)h->comp_len != t->index_len))
    e = ST_E_CORRUPT;
  return e;
}

/* Load the index of a cleanly closed file. A missing or bad end mark or
 * index only means "not closed cleanly" (the stream still returns every
 * good chunk), so only I/O and memory errors are reported. */
static int read_index(st_reader *r) {
  stf_trailer t;
  stf_chunk_hdr h;
  slot s = {.chunk = NO_CHUNK};
  int e = find_index(r, &t, &h);
  if (!e)
    e = load_chunk(r, t.index_off, &h, &s);
  if (!e) {
    stf_cur c = {s.buf, s.buf + s.len, 0};
    e = parse_chunk_table(r, &c, &t);
    if (!e)
      e = parse_blob_table(r, &c);
  }
  free(s.buf);
  if (!e) {
    r->clean = 1;
    r->index_off = t.index_off;
    r->index_chunks = t.nchunks;
    return ST_OK;
  }
  r->nchunk_off = 0;
  r->nblobs = 0;
  return e == ST_E_IO || e == ST_E_NOMEM ? e : ST_OK;
}

/* ---- Streaming ------------------------------------------------------------- */

/* Stop the stream: every later st_reader_next returns ST_E_END. */
static int fail_at(st_reader *r, int e, uint64_t off) {
  r->done = 1;
  r->st.error = e;
  r->st.error_offset = off;
  return e;
}

/* The current chunk turned out to be bad after it was counted as good. */
static int chunk_failed(st_reader *r, int e) {
  r->st.chunks--;
  r->st.raw_bytes -= r->stream.len;
  r->st.good_bytes = r->cur_off;
  r->have_chunk = 0;
  return fail_at(r, e, r->cur_off);
}

/* Remember where data chunk seq starts, or check it against the index. */
static int note_chunk(st_reader *r, uint32_t seq, uint64_t off) {
  if (seq < r->nchunk_off)
    return r->chunk_off[seq] == off ? ST_OK : ST_E_CORRUPT;
  int e =
      grow_array((void **)&r->chunk_off, &r->chunk_off_cap, r->nchunk_off + 1, sizeof(uint64_t));
  if (!e)
    r->chunk_off[r->nchunk_off++] = off;
  return e;
}

/* An index chunk in a file without a valid end mark: the writer was killed
 * while closing, or the end mark is damaged. */
static int end_without_mark(st_reader *r, uint64_t off, const stf_chunk_hdr *h) {
  int e = scratch_buf(&r->comp, &r->comp_cap, h->comp_len);
  if (!e)
    e = read_payload(r, off, h, r->comp);
  if (e)
    return fail_at(r, e, off);
  uint64_t end = off + STF_CHUNK_HDR_LEN + h->comp_len;
  r->st.good_bytes = end;
  if (end == r->size)
    return ST_E_END;
  return fail_at(r, r->size - end < STF_TRAILER_LEN ? ST_E_TRUNCATED : ST_E_CORRUPT, end);
}

/* The stream reached the index of a cleanly closed file. */
static int end_with_mark(st_reader *r) {
  if (r->next_seq != r->index_chunks)
    return fail_at(r, ST_E_CORRUPT, r->next_off);
  r->st.good_bytes = r->size;
  return ST_E_END;
}

static void blob_slots_trim(st_reader *r, const slot *keep);

/* The blob slot to load a chunk into: an empty one, else the least
 * recently used, never the one the last st_reader_blob result points into. */
static slot *blob_victim(st_reader *r) {
  slot *v = NULL;
  for (int i = 0; i < BLOB_SLOTS; i++) {
    slot *s = &r->blobs_at[i];
    if (i == r->last_blob)
      continue;
    if (s->chunk == NO_CHUNK)
      return s;
    if (!v || s->used < v->used)
      v = s;
  }
  return v;
}

/* Make the chunk at next_off the current one. If the last blob lookup
 * returned data inside the current chunk, that chunk moves to a blob slot
 * so the pointer stays valid, as st_reader_blob promises. */
static int load_next(st_reader *r, uint64_t off, const stf_chunk_hdr *h) {
  if (r->last_blob == LAST_STREAM) {
    slot *v = blob_victim(r);
    slot t = *v;
    *v = r->stream;
    v->used = ++r->blob_tick;
    r->stream = t;
    r->stream.chunk = NO_CHUNK;
    r->last_blob = (int)(v - r->blobs_at);
    blob_slots_trim(r, v);
  }
  int e = load_chunk(r, off, h, &r->stream);
  if (!e)
    e = note_chunk(r, h->seq, off);
  if (e)
    return fail_at(r, e, off);
  r->cur_off = off;
  r->next_off = off + STF_CHUNK_HDR_LEN + h->comp_len;
  r->next_seq++;
  r->have_chunk = 1;
  r->left = h->nrec;
  r->pos = 0;
  r->prev_seq = r->prev_start = 0;
  r->st.chunks++;
  r->st.raw_bytes += h->raw_len;
  r->st.good_bytes = r->next_off;
  return ST_OK;
}

/* Leave the current chunk (it must have been used up exactly) and load the
 * next. Returns ST_OK, ST_E_END at a clean or chunk-aligned end of file, or
 * the error that stopped the stream. */
static int advance(st_reader *r) {
  if (r->have_chunk && r->pos != r->stream.len)
    return chunk_failed(r, ST_E_CORRUPT);
  r->have_chunk = 0;
  uint64_t off = r->next_off;
  if (r->clean && off == r->index_off)
    return end_with_mark(r);
  if (off == r->size)
    return ST_E_END; /* no end mark: killed, or still being written */
  stf_chunk_hdr h;
  int e = chunk_header_at(r, off, &h);
  if (!e && h.seq != r->next_seq)
    e = ST_E_CORRUPT;
  if (!e && h.type == STF_CHUNK_INDEX && !r->clean)
    return end_without_mark(r, off, &h);
  if (!e && h.type != STF_CHUNK_DATA)
    e = ST_E_CORRUPT;
  if (e)
    return fail_at(r, e, off);
  return load_next(r, off, &h);
}

/* ---- Records --------------------------------------------------------------- */

/* Copy a string of the record into scratch with a NUL. Scratch was sized to
 * the record body, which is always enough (see next_record). */
static const char *get_str(st_reader *r, stf_cur *b) {
  uint64_t n = stf_get_varint(b);
  const uint8_t *s = stf_get_raw(b, n);
  if (!s || b->bad) /* a spent cursor yields n = 0 with no byte behind it */
    return "";
  char *d = (char *)r->scratch + r->scratch_len;
  memcpy(d, s, (size_t)n);
  d[n] = '\0';
  r->scratch_len += (size_t)n + 1;
  return d;
}

static uint32_t get_u32(stf_cur *b) {
  return (uint32_t)stf_get_varint_max(b, UINT32_MAX);
}

static void decode_call(st_reader *r, stf_cur *b, st_call *c) {
  c->api = stf_get_byte(b);
  c->flags = stf_get_byte(b);
  c->reason = (uint16_t)stf_get_varint_max(b, UINT16_MAX);
  c->thread = get_u32(b);
  c->type = get_u32(b);
  c->site = get_u32(b);
  c->seq = r->prev_seq += stf_unzigzag(stf_get_varint(b));
  c->start_ns = r->prev_start += stf_unzigzag(stf_get_varint(b));
  c->latency_ns = stf_get_varint(b);
  const uint8_t *fp = stf_get_raw(b, sizeof c->fp);
  if (fp)
    memcpy(c->fp, fp, sizeof c->fp);
  c->req_blob = stf_get_varint(b);
  c->resp_blob = stf_get_varint(b);
  c->req_len = stf_get_varint(b);
  c->resp_len = stf_get_varint(b);
  c->result = stf_get_varint(b);
  unsigned nfeat = stf_get_byte(b);
  if (nfeat > STF_MAX_NFEAT) {
    b->bad = 1;
    nfeat = 0;
  }
  for (unsigned i = 0; i < ST_MAX_FEAT; i++)
    c->feat[i] = i < nfeat ? stf_get_varint(b) : 0;
  for (unsigned i = ST_MAX_FEAT; i < nfeat; i++) /* a newer writer's: skipped */
    (void)stf_get_varint(b);
  c->nfeat = (uint8_t)(nfeat < ST_MAX_FEAT ? nfeat : ST_MAX_FEAT);
}

static void decode_type(st_reader *r, stf_cur *b, st_type *t) {
  t->id = get_u32(b);
  t->family = stf_get_byte(b);
  t->name = get_str(r, b);
  uint64_t n = stf_get_varint_max(b, UINT32_MAX);
  t->schema = stf_get_raw(b, n); /* inside the stream chunk: valid until next */
  t->schema_len = t->schema ? (uint32_t)n : 0;
}

static void decode_site(st_reader *r, stf_cur *b, st_site *s) {
  s->id = get_u32(b);
  s->nframes = (uint32_t)stf_get_varint_max(b, ST_MAX_FRAMES);
  for (uint32_t i = 0; i < s->nframes && !b->bad; i++) {
    st_frame *f = &s->frames[i];
    f->ip = stf_get_varint(b);
    f->offset = stf_get_varint(b);
    f->module = get_str(r, b);
    f->symbol = get_str(r, b);
    f->sym_offset = stf_get_varint(b);
    f->pretty = NULL;
  }
}

static void decode_thread(st_reader *r, stf_cur *b, st_thread *t) {
  t->index = get_u32(b);
  t->os_tid = get_u32(b);
  t->parent = get_u32(b);
  t->name = get_str(r, b);
}

static void decode_note(st_reader *r, stf_cur *b, st_note *n) {
  n->key = get_str(r, b);
  n->value = get_str(r, b);
}

/* Remember where blob `id` is, so st_reader_blob finds it later. */
static int remember_blob(st_reader *r, uint64_t id, blob_loc loc) {
  if (id > r->nblobs) {
    int e = grow_array((void **)&r->blobs, &r->blobs_cap, (size_t)id, sizeof *r->blobs);
    if (e)
      return e;
    for (size_t i = r->nblobs; i < id; i++)
      r->blobs[i].chunk = NO_CHUNK;
    r->nblobs = (size_t)id;
  }
  r->blobs[id - 1] = loc;
  return ST_OK;
}

/* Blob ids are 1, 2, 3... in file order; anything else is damage. */
static int decode_blob(st_reader *r, stf_cur *b, size_t rec_off, st_blob_ref *ref) {
  uint64_t id = stf_get_varint(b);
  uint64_t len = stf_get_varint_max(b, STF_MAX_BLOB);
  stf_get_raw(b, len);
  if (b->bad || id != r->stream_blobs + 1)
    return ST_E_CORRUPT;
  int e = remember_blob(r, id, (blob_loc){r->stream.chunk, (uint32_t)rec_off, (uint32_t)len});
  if (e)
    return e;
  r->stream_blobs = id;
  ref->id = id;
  ref->len = len;
  return ST_OK;
}

static int decode_body(st_reader *r, uint8_t kind, stf_cur *b, size_t rec_off, st_record *rec) {
  switch (kind) {
  case ST_REC_CALL: decode_call(r, b, &rec->u.call); break;
  case ST_REC_BLOB: return decode_blob(r, b, rec_off, &rec->u.blob);
  case ST_REC_TYPE: decode_type(r, b, &rec->u.type); break;
  case ST_REC_SITE: decode_site(r, b, &rec->u.site); break;
  case ST_REC_THREAD: decode_thread(r, b, &rec->u.thread); break;
  case ST_REC_NOTE: decode_note(r, b, &rec->u.note); break;
  case 0: return ST_E_CORRUPT;
  default: return REC_SKIP; /* added by a newer version: skippable by design */
  }
  return b->bad ? ST_E_CORRUPT : ST_OK;
}

/* Decode the record at pos. Bytes after the fields this version knows are
 * ignored: newer writers may append fields to a record. */
static int next_record(st_reader *r, st_record *rec) {
  const uint8_t *base = r->stream.buf;
  stf_cur c = {base + r->pos, base + r->stream.len, 0};
  uint8_t kind = stf_get_byte(&c);
  uint64_t blen = stf_get_varint(&c);
  const uint8_t *body = stf_get_raw(&c, blen);
  if (c.bad)
    return ST_E_CORRUPT;
  size_t rec_off = r->pos;
  r->pos = (size_t)(c.p - base);
  r->left--;
  /* A string of n bytes takes at least n + 1 bytes of the body (length
   * varint included), so body length + 1 bytes of scratch hold them all. */
  r->scratch_len = 0;
  if (kind != ST_REC_CALL && kind != ST_REC_BLOB) {
    int e = scratch_buf(&r->scratch, &r->scratch_cap, (size_t)blen + 1);
    if (e)
      return e;
  }
  stf_cur b = {body, body + blen, 0};
  int e = decode_body(r, kind, &b, rec_off, rec);
  if (e == ST_OK)
    rec->kind = (st_rec_kind)kind;
  return e;
}

int st_reader_next(st_reader *r, st_record *rec) {
  if (!r || !rec)
    return ST_E_ARG;
  while (!r->done) {
    if (r->left == 0) {
      int e = advance(r); /* on error, advance already stopped the stream */
      if (e == ST_E_END)
        r->done = 1;
      if (e)
        return e;
      continue;
    }
    int e = next_record(r, rec);
    if (e == ST_OK) {
      r->st.records++;
      return ST_OK;
    }
    if (e != REC_SKIP)
      return chunk_failed(r, e);
  }
  return ST_E_END;
}

/* ---- Blobs ------------------------------------------------------------------ */

/* Drop the decoded bytes of the least recently used blob slots, but keep,
 * until the blob slots hold at most BLOB_SLOT_BUDGET bytes. */
static void blob_slots_trim(st_reader *r, const slot *keep) {
  for (;;) {
    size_t total = 0;
    slot *lru = NULL;
    for (int i = 0; i < BLOB_SLOTS; i++) {
      slot *s = &r->blobs_at[i];
      total += s == keep ? 0 : s->cap;
      if (s != keep && s->cap && i != r->last_blob && (!lru || s->used < lru->used))
        lru = s;
    }
    if (total <= BLOB_SLOT_BUDGET || !lru)
      return;
    free(lru->buf);
    *lru = (slot){.chunk = NO_CHUNK};
  }
}

/* The decoded chunk `chunk`: the streamed one if it is that, else a blob
 * slot, decoding the chunk into the least recently used one when no slot
 * holds it. */
static int blob_chunk(st_reader *r, uint32_t chunk, const slot **out) {
  if (r->stream.chunk == chunk) {
    r->last_blob = LAST_STREAM;
    *out = &r->stream;
    return ST_OK;
  }
  r->last_blob = LAST_NONE; /* the last result may be overwritten now */
  slot *s = NULL;
  for (int i = 0; i < BLOB_SLOTS && !s; i++)
    if (r->blobs_at[i].chunk == chunk)
      s = &r->blobs_at[i];
  if (!s) {
    if (chunk >= r->nchunk_off)
      return ST_E_NOTFOUND;
    uint64_t off = r->chunk_off[chunk];
    stf_chunk_hdr h;
    int e = chunk_header_at(r, off, &h);
    if (!e && (h.type != STF_CHUNK_DATA || h.seq != chunk))
      e = ST_E_CORRUPT;
    s = blob_victim(r);
    if (!e)
      e = load_chunk(r, off, &h, s);
    if (e)
      return e;
    r->st.blob_chunk_loads++;
    blob_slots_trim(r, s);
  }
  s->used = ++r->blob_tick;
  r->last_blob = (int)(s - r->blobs_at);
  *out = s;
  return ST_OK;
}

/* Re-read the blob record at its recorded place and check it is blob id. */
static int blob_at(const slot *s, const blob_loc *l, uint64_t id, const void **data,
                   uint64_t *len) {
  if (l->off >= s->len)
    return ST_E_CORRUPT;
  stf_cur c = {s->buf + l->off, s->buf + s->len, 0};
  uint8_t kind = stf_get_byte(&c);
  uint64_t blen = stf_get_varint(&c);
  const uint8_t *body = stf_get_raw(&c, blen);
  if (c.bad || kind != ST_REC_BLOB)
    return ST_E_CORRUPT;
  stf_cur b = {body, body + blen, 0};
  uint64_t bid = stf_get_varint(&b), n = stf_get_varint(&b);
  const uint8_t *p = stf_get_raw(&b, n);
  if (b.bad || bid != id || n != l->len)
    return ST_E_CORRUPT;
  *data = p;
  *len = n;
  return ST_OK;
}

int st_reader_blob(st_reader *r, uint64_t id, const void **data, uint64_t *len) {
  if (!r || !data || !len)
    return ST_E_ARG;
  if (id == 0 || id > r->nblobs || r->blobs[id - 1].chunk == NO_CHUNK)
    return ST_E_NOTFOUND;
  blob_loc l = r->blobs[id - 1];
  const slot *s;
  int e = blob_chunk(r, l.chunk, &s);
  if (!e)
    e = blob_at(s, &l, id, data, len);
  return e;
}

/* ---- Lifecycle ------------------------------------------------------------- */

static void reader_free(st_reader *r) {
  int saved = errno;
  if (r->fd >= 0)
    close(r->fd);
  libdeflate_free_decompressor(r->z);
  free(r->hdr_mem);
  free(r->stream.buf);
  for (int i = 0; i < BLOB_SLOTS; i++)
    free(r->blobs_at[i].buf);
  free(r->comp);
  free(r->scratch);
  free(r->chunk_off);
  free(r->blobs);
  free(r);
  errno = saved;
}

static int open_file(st_reader *r, const char *path) {
  struct stat sb;
  /* O_NONBLOCK: a FIFO put in a trace's place blocked every reader in
   * open(2); one is refused below, as any file that is not regular
   * (/dev/zero read forever) */
  r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (r->fd < 0 || fstat(r->fd, &sb) != 0)
    return ST_E_IO;
  if (!S_ISREG(sb.st_mode)) {
    errno = S_ISDIR(sb.st_mode) ? EISDIR : ENODEV;
    return ST_E_IO;
  }
  r->size = (uint64_t)sb.st_size;
  return ST_OK;
}

int st_reader_open(st_reader **rp, const char *path) {
  if (!rp)
    return ST_E_ARG;
  *rp = NULL;
  if (!path)
    return ST_E_ARG;
  st_reader *r = calloc(1, sizeof *r);
  if (!r)
    return ST_E_NOMEM;
  r->fd = -1;
  r->stream.chunk = NO_CHUNK;
  for (int i = 0; i < BLOB_SLOTS; i++)
    r->blobs_at[i].chunk = NO_CHUNK;
  r->last_blob = LAST_NONE;
  r->z = libdeflate_alloc_decompressor();
  int e = r->z ? open_file(r, path) : ST_E_NOMEM;
  if (!e)
    e = read_header(r);
  if (!e)
    e = read_index(r);
  if (e) {
    reader_free(r);
    return e;
  }
  r->next_off = r->cur_off = r->data_off;
  r->st.file_bytes = r->size;
  r->st.good_bytes = r->data_off;
  *rp = r;
  return ST_OK;
}

const st_header *st_reader_header(const st_reader *r) {
  return r ? &r->hdr : NULL;
}

void st_reader_status(const st_reader *r, st_read_status *s) {
  if (!s)
    return;
  if (!r) {
    memset(s, 0, sizeof *s);
    return;
  }
  *s = r->st;
  s->clean = r->clean;
}

void st_reader_close(st_reader *r) {
  if (r)
    reader_free(r);
}

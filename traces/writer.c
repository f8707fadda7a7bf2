/* writer.c — st_writer: encodes records into an in-memory chunk, compresses
 * and appends whole chunks, stores each distinct blob once, and on close
 * writes the index and the end mark.
 *
 * Crash safety comes from appending self-contained chunks only: at any
 * moment the file is a prefix of header, chunk, ..., index, trailer. After a
 * failed write the writer stops writing for good (sticky error) rather than
 * append after a partial chunk. The layout is specified in FORMAT.md. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <errno.h>
#include <fcntl.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zlib.h>

#include "format.h"
#include "trace.h"

/* Kind byte plus the longest body-length varint a record can need. */
#define REC_HDR_MAX 6
/* Longest encoded call: kind and 2-byte length; api, flags, reason (3);
 * thread, type, site (5 each); seq, start, latency (10 each); fingerprint;
 * five u64 varints; nfeat and the features. Checking space once against this
 * bound keeps the per-field encoding free of checks. */
#define CALL_MAX ((1 + 2) + (1 + 1 + 3) + 3 * 5 + 3 * 10 + 16 + 5 * 10 + 1 + ST_MAX_FEAT * 10)
/* Largest record body other than a blob's. */
#define MAX_RECORD ((size_t)STF_MAX_BLOB + 64)

typedef struct {
  uint64_t lo, hi; /* XXH3-128 of the contents */
  uint64_t len;
  uint64_t id; /* 0 = empty slot */
} dedup_slot;

/* Where a blob record sits, for the index (id = position + 1). */
typedef struct {
  uint32_t chunk, off, len;
} blob_loc;

/* Index entry of one data chunk. */
typedef struct {
  uint64_t off;
  uint32_t nrec;
  uint64_t calls, min_ns, max_ns;
} chunk_info;

struct st_writer {
  int fd;
  pthread_mutex_t io; /* held around each use of fd (st_writer_move_fd) */
  int err;      /* sticky: once a chunk write failed, nothing more is written */
  uint64_t off; /* file offset of the next write */
  size_t chunk_size;
  int compress; /* 0: store chunks (the recorder is behind its program) */
  /* After a chunk was sampled out, the next `unsampled` chunks are stored
   * without a sample; the run doubles with each sampled-out chunk
   * (worth_deflating). */
  unsigned unsampled, unsampled_run;

  /* The chunk being filled. */
  uint8_t *buf;
  size_t len, cap;
  uint32_t nrec;
  uint64_t calls, min_ns, max_ns;
  uint64_t prev_seq, prev_start; /* delta bases of call records, per chunk */

  /* libdeflate writes the same zlib streams as zlib, 2-3x faster at level 1;
   * the writer thread is compression-bound, so this is its throughput */
  struct libdeflate_compressor *z;
  uint8_t *out; /* compressed chunk */
  size_t out_cap;

  chunk_info *chunks;
  size_t nchunks, chunks_cap;
  blob_loc *blobs;
  size_t nblobs, blobs_cap;
  dedup_slot *tab;
  size_t tab_mask, tab_used;

  st_writer_stats st;
};

/* ---- Memory ---------------------------------------------------------------- */

/* Grow an array to at least `need` elements, doubling. */
static st_allocator mem = {malloc, realloc, free};

void st_set_allocator(const st_allocator *a) {
  mem = a ? *a : (st_allocator){malloc, realloc, free};
  libdeflate_set_memory_allocator(mem.alloc, mem.free);
}

static int grow_array(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap)
    return ST_OK;
  size_t n = *cap ? *cap * 2 : 64;
  while (n < need)
    n *= 2;
  void *q = mem.realloc(*p, n * size);
  if (!q)
    return ST_E_NOMEM;
  *p = q;
  *cap = n;
  return ST_OK;
}

/* Grow a byte buffer by half again, or exactly to `need` for one huge record
 * (doubling a 1 GiB blob buffer would waste a gigabyte). */
static int grow_bytes(uint8_t **p, size_t *cap, size_t need) {
  if (need <= *cap)
    return ST_OK;
  size_t n = *cap + *cap / 2;
  if (n < need)
    n = need;
  uint8_t *q = mem.realloc(*p, n);
  if (!q)
    return ST_E_NOMEM;
  *p = q;
  *cap = n;
  return ST_OK;
}

/* After a chunk holding one huge blob, give the memory back: the recorder
 * lives inside someone else's process. */
static void trim_buffers(st_writer *w) {
  size_t normal = w->chunk_size + CALL_MAX;
  if (w->cap > 2 * normal) {
    mem.free(w->buf);
    w->buf = mem.alloc(normal);
    w->cap = w->buf ? normal : 0;
  }
  if (w->out_cap > 2 * normal) {
    mem.free(w->out);
    w->out = NULL;
    w->out_cap = 0;
  }
}

/* Free everything; keeps errno so callers can report the failure that led
 * here. */
static void writer_free(st_writer *w) {
  int saved = errno;
  libdeflate_free_compressor(w->z);
  mem.free(w->buf);
  mem.free(w->out);
  mem.free(w->chunks);
  mem.free(w->blobs);
  mem.free(w->tab);
  mem.free(w);
  errno = saved;
}

/* ---- Writing chunks ----------------------------------------------------- */

/* Append the iovecs, retrying short writes and EINTR: a chunk reaches the
 * file completely, or the writer reports ST_E_IO with errno kept. */
static int write_all(st_writer *w, struct iovec *iov, int n) {
  for (;;) {
    while (n > 0 && iov->iov_len == 0) {
      iov++;
      n--;
    }
    if (n == 0)
      return ST_OK;
    pthread_mutex_lock(&w->io);
    ssize_t k = writev(w->fd, iov, n);
    pthread_mutex_unlock(&w->io);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      if (k == 0)
        errno = EIO;
      return ST_E_IO;
    }
    w->off += (uint64_t)k;
    w->st.file_bytes += (uint64_t)k;
    for (; n > 0 && (size_t)k >= iov->iov_len; iov++, n--)
      k -= (ssize_t)iov->iov_len;
    if (n > 0) {
      iov->iov_base = (char *)iov->iov_base + k;
      iov->iov_len -= (size_t)k;
    }
  }
}

/* Deflating data that barely shrinks is the writer's slowest work: a MiB
 * of decoded JPEG pixels took 8.2 ms at level 1 to come out 2.6% smaller,
 * and on a machine whose cores the program keeps busy that time is taken
 * from the program (photo-service, JPEG calls only: 88 ms recorded against
 * 65 ms with both APIs, whose early ring wait had switched deflate off).
 * So a chunk of four slices or more is sampled first: three slices
 * (start, middle, end) are deflated on their own, and unless together they
 * shrink by an eighth the chunk is stored. Slices lack the window the whole
 * chunk would give them, so the test errs towards storing only data that
 * barely shrinks. A sample costs ~5% of deflating the whole, which for
 * incompressible data was still the writer's largest item (15% of its
 * time for rpc's random payloads), and a stream that did not shrink seldom
 * starts to: after a sampled-out chunk the next 1, 2, 4 ... up to
 * SAMPLE_BACKOFF_MAX chunks are stored unsampled (not one over twice the
 * chunk size, a big record: it is sampled on its own); a sample that
 * shrinks ends the run. */
#define SAMPLE_SLICE 16384
#define SAMPLE_BACKOFF_MAX 16

static int worth_deflating(st_writer *w) {
  if (w->len < 4 * SAMPLE_SLICE)
    return 1;
  if (w->unsampled && w->len <= 2 * w->chunk_size) {
    w->unsampled--;
    return 0;
  }
  w->st.chunks_sampled++;
  const size_t at[3] = {0, w->len / 2 - SAMPLE_SLICE / 2, w->len - SAMPLE_SLICE};
  size_t out = 0;
  for (int i = 0; i < 3; i++) {
    size_t c =
        libdeflate_zlib_compress(w->z, w->buf + at[i], SAMPLE_SLICE, w->out, SAMPLE_SLICE - 1);
    out += c ? c : SAMPLE_SLICE;
  }
  if (out * 8 <= 3 * SAMPLE_SLICE * 7) {
    w->unsampled_run = 0;
    return 1;
  }
  w->unsampled_run = w->unsampled_run ? 2 * w->unsampled_run : 1;
  if (w->unsampled_run > SAMPLE_BACKOFF_MAX)
    w->unsampled_run = SAMPLE_BACKOFF_MAX;
  w->unsampled = w->unsampled_run;
  return 0;
}

/* Deflate the chunk into w->out. The output space is one byte less than the
 * input, so data that does not shrink (JPEG payloads) stops early and is
 * stored instead: *clen is 0 then. */
static int try_compress(st_writer *w, size_t *clen) {
  *clen = 0;
  if (w->len < 16 || !w->compress)
    return ST_OK;
  int e = grow_bytes(&w->out, &w->out_cap, w->len - 1);
  if (e)
    return e;
  if (!worth_deflating(w)) {
    w->st.chunks_sampled_out++;
    return ST_OK;
  }
  /* 0 means "does not fit in len - 1 bytes": the chunk is stored */
  *clen = libdeflate_zlib_compress(w->z, w->buf, w->len, w->out, w->len - 1);
  return ST_OK;
}

/* Compress the buffer and append it as one chunk (header and payload in a
 * single writev loop). The chunk number is the count of data chunks so far,
 * so the index chunk gets the number after the last data chunk. */
static int write_chunk(st_writer *w, uint8_t type, uint32_t nrec) {
  size_t clen;
  int e = try_compress(w, &clen);
  if (e)
    return e;
  stf_chunk_hdr h = {
      .type = type, .seq = (uint32_t)w->nchunks, .raw_len = (uint32_t)w->len, .nrec = nrec};
  const uint8_t *data = clen ? w->out : w->buf;
  h.method = clen ? STF_METHOD_ZLIB : STF_METHOD_STORED;
  h.comp_len = (uint32_t)(clen ? clen : w->len);
  h.data_crc = stf_crc(data, h.comp_len);
  uint8_t hdr[STF_CHUNK_HDR_LEN];
  stf_chunk_hdr_encode(hdr, &h);
  struct iovec iov[2] = {{hdr, sizeof hdr}, {(void *)data, h.comp_len}};
  return write_all(w, iov, 2);
}

static void start_chunk(st_writer *w) {
  w->len = 0;
  w->nrec = 0;
  w->calls = 0;
  w->min_ns = UINT64_MAX;
  w->max_ns = 0;
  w->prev_seq = 0;
  w->prev_start = 0;
}

/* Write the current (non-empty) data chunk and remember it for the index.
 * Memory or zlib failures leave the records buffered for another try. */
static int flush_chunk(st_writer *w) {
  int e = grow_array((void **)&w->chunks, &w->chunks_cap, w->nchunks + 1, sizeof *w->chunks);
  if (e)
    return e;
  chunk_info ci = {.off = w->off, .nrec = w->nrec, .calls = w->calls};
  if (w->calls) {
    ci.min_ns = w->min_ns;
    ci.max_ns = w->max_ns;
  }
  e = write_chunk(w, STF_CHUNK_DATA, w->nrec);
  if (e == ST_E_IO)
    w->err = e; /* part of the chunk may be in the file: never append more */
  if (e)
    return e;
  w->chunks[w->nchunks++] = ci;
  w->st.chunks++;
  start_chunk(w);
  trim_buffers(w);
  return ST_OK;
}

/* ---- Records ------------------------------------------------------------- */

/* Make room for a record of at most `max` bytes. The chunk is written first
 * if the record would take it past the chunk size, so records never span
 * chunks and only a record bigger than a chunk makes a bigger chunk. */
static int reserve(st_writer *w, size_t max) {
  if (w->err)
    return w->err;
  if (w->len > 0 && w->len + max > w->chunk_size) {
    int e = flush_chunk(w);
    if (e)
      return e;
  }
  return grow_bytes(&w->buf, &w->cap, w->len + max);
}

/* Records are: kind, varint body length, body. The body is encoded right
 * after a one-byte length guess; the rare long body is shifted afterwards,
 * which is cheaper than sizing every record twice. */
static uint8_t *rec_open(st_writer *w, uint8_t kind) {
  uint8_t *p = w->buf + w->len;
  p[0] = kind;
  return p + 2;
}

static void rec_close(st_writer *w, uint8_t *body, const uint8_t *end) {
  size_t n = (size_t)(end - body);
  size_t ll = stf_varint_len(n);
  if (ll > 1)
    memmove(body + ll - 1, body, n);
  stf_put_varint(body - 1, n);
  w->len = (size_t)(body - 1 - w->buf) + ll + n;
}

/* Account for the record that starts at `start`; write the chunk once it
 * reaches its size, so memory stays bounded by the chunk size. */
static int end_record(st_writer *w, size_t start) {
  w->nrec++;
  w->st.raw_bytes += w->len - start;
  if (w->len >= w->chunk_size)
    return flush_chunk(w);
  return ST_OK;
}

static size_t str_len(const char *s) {
  return s ? strlen(s) : 0;
}

static uint8_t *put_bytes(uint8_t *p, const void *s, size_t n) {
  p = stf_put_varint(p, n);
  if (n)
    memcpy(p, s, n);
  return p + n;
}

static uint8_t *put_str(uint8_t *p, const char *s) {
  return put_bytes(p, s, str_len(s));
}

static uint8_t *put_call_body(st_writer *w, uint8_t *p, const st_call *c) {
  *p++ = c->api;
  *p++ = c->flags;
  p = stf_put_varint(p, c->reason);
  p = stf_put_varint(p, c->thread);
  p = stf_put_varint(p, c->type);
  p = stf_put_varint(p, c->site);
  /* seq and start_ns as deltas from the previous call of the chunk: usually
   * +1 and a few microseconds, so one and two or three bytes. */
  p = stf_put_varint(p, stf_zigzag(c->seq - w->prev_seq));
  p = stf_put_varint(p, stf_zigzag(c->start_ns - w->prev_start));
  w->prev_seq = c->seq;
  w->prev_start = c->start_ns;
  p = stf_put_varint(p, c->latency_ns);
  memcpy(p, c->fp, sizeof c->fp);
  p += sizeof c->fp;
  p = stf_put_varint(p, c->req_blob);
  p = stf_put_varint(p, c->resp_blob);
  p = stf_put_varint(p, c->req_len);
  p = stf_put_varint(p, c->resp_len);
  p = stf_put_varint(p, c->result);
  *p++ = c->nfeat;
  for (unsigned i = 0; i < c->nfeat; i++)
    p = stf_put_varint(p, c->feat[i]);
  return p;
}

int st_writer_add_call(st_writer *w, const st_call *c) {
  if (!w || !c || c->nfeat > ST_MAX_FEAT)
    return ST_E_ARG;
  int e = reserve(w, CALL_MAX);
  if (e)
    return e;
  size_t start = w->len;
  uint8_t *body = rec_open(w, ST_REC_CALL);
  rec_close(w, body, put_call_body(w, body, c));
  w->calls++;
  if (c->start_ns < w->min_ns)
    w->min_ns = c->start_ns;
  if (c->start_ns > w->max_ns)
    w->max_ns = c->start_ns;
  w->st.calls++;
  return end_record(w, start);
}

int st_writer_add_type(st_writer *w, const st_type *t) {
  if (!w || !t || (!t->schema && t->schema_len))
    return ST_E_ARG;
  size_t nlen = str_len(t->name);
  size_t max = REC_HDR_MAX + 5 + 1 + 10 + nlen + 10 + (size_t)t->schema_len;
  if (max > MAX_RECORD)
    return ST_E_TOOBIG;
  int e = reserve(w, max);
  if (e)
    return e;
  size_t start = w->len;
  uint8_t *body = rec_open(w, ST_REC_TYPE), *p = body;
  p = stf_put_varint(p, t->id);
  *p++ = t->family;
  p = put_bytes(p, t->name, nlen);
  p = put_bytes(p, t->schema, t->schema_len);
  rec_close(w, body, p);
  return end_record(w, start);
}

/* Upper bound of an encoded site (frames x (3 varints + 2 strings)). */
static size_t site_max(const st_site *s) {
  size_t n = REC_HDR_MAX + 5 + 5;
  for (uint32_t i = 0; i < s->nframes; i++)
    n += 5 * 10 + str_len(s->frames[i].module) + str_len(s->frames[i].symbol);
  return n;
}

int st_writer_add_site(st_writer *w, const st_site *s) {
  if (!w || !s || s->nframes > ST_MAX_FRAMES)
    return ST_E_ARG;
  size_t max = site_max(s);
  if (max > MAX_RECORD)
    return ST_E_TOOBIG;
  int e = reserve(w, max);
  if (e)
    return e;
  size_t start = w->len;
  uint8_t *body = rec_open(w, ST_REC_SITE), *p = body;
  p = stf_put_varint(p, s->id);
  p = stf_put_varint(p, s->nframes);
  for (uint32_t i = 0; i < s->nframes; i++) {
    const st_frame *f = &s->frames[i];
    p = stf_put_varint(p, f->ip);
    p = stf_put_varint(p, f->offset);
    p = put_str(p, f->module);
    p = put_str(p, f->symbol);
    p = stf_put_varint(p, f->sym_offset);
  }
  rec_close(w, body, p);
  return end_record(w, start);
}

int st_writer_add_thread(st_writer *w, const st_thread *t) {
  if (!w || !t)
    return ST_E_ARG;
  size_t max = REC_HDR_MAX + 3 * 5 + 10 + str_len(t->name);
  if (max > MAX_RECORD)
    return ST_E_TOOBIG;
  int e = reserve(w, max);
  if (e)
    return e;
  size_t start = w->len;
  uint8_t *body = rec_open(w, ST_REC_THREAD), *p = body;
  p = stf_put_varint(p, t->index);
  p = stf_put_varint(p, t->os_tid);
  p = stf_put_varint(p, t->parent);
  p = put_str(p, t->name);
  rec_close(w, body, p);
  return end_record(w, start);
}

int st_writer_add_note(st_writer *w, const st_note *n) {
  if (!w || !n)
    return ST_E_ARG;
  size_t max = REC_HDR_MAX + 20 + str_len(n->key) + str_len(n->value);
  if (max > MAX_RECORD)
    return ST_E_TOOBIG;
  int e = reserve(w, max);
  if (e)
    return e;
  size_t start = w->len;
  uint8_t *body = rec_open(w, ST_REC_NOTE), *p = body;
  p = put_str(p, n->key);
  p = put_str(p, n->value);
  rec_close(w, body, p);
  return end_record(w, start);
}

/* ---- Blobs and de-duplication --------------------------------------------- */

/* Open addressing, linear probing, keyed by the low half of the hash (XXH3
 * output is uniform, so no further mixing). Equal length and 128-bit hash
 * count as equal contents. */
static dedup_slot *dedup_find(const st_writer *w, XXH128_hash_t h, uint64_t len) {
  size_t i = (size_t)h.low64 & w->tab_mask;
  for (;;) {
    dedup_slot *s = &w->tab[i];
    if (!s->id || (s->lo == h.low64 && s->hi == h.high64 && s->len == len))
      return s;
    i = (i + 1) & w->tab_mask;
  }
}

/* Keep the table at most half full so probes stay short. */
static int dedup_reserve(st_writer *w) {
  if (w->tab && (w->tab_used + 1) * 2 <= w->tab_mask + 1)
    return ST_OK;
  size_t n = w->tab ? (w->tab_mask + 1) * 2 : 1024;
  /* malloc and memset, not calloc: calloc leaves a fresh mapping's pages
   * on the shared zero page, and the probe below reads a slot before it
   * writes it, so each page took a copy-on-write fault whose TLB flush
   * interrupts every core running the program (9% of a recorded rpc run's
   * samples). Writing first maps each page once, with no flush. */
  dedup_slot *old = w->tab, *t = mem.alloc(n * sizeof *t);
  if (!t)
    return ST_E_NOMEM;
  memset(t, 0, n * sizeof *t);
  size_t old_n = old ? w->tab_mask + 1 : 0;
  w->tab = t;
  w->tab_mask = n - 1;
  for (size_t i = 0; i < old_n; i++) {
    if (old[i].id) {
      XXH128_hash_t h = {.low64 = old[i].lo, .high64 = old[i].hi};
      *dedup_find(w, h, old[i].len) = old[i];
    }
  }
  mem.free(old);
  return ST_OK;
}

/* Append the blob record for id nblobs + 1; *start is its offset. */
static int store_blob(st_writer *w, const void *data, uint64_t len, size_t *start) {
  uint64_t id = w->nblobs + 1;
  size_t body = stf_varint_len(id) + stf_varint_len(len) + (size_t)len;
  size_t total = 1 + stf_varint_len(body) + body;
  int e = reserve(w, total);
  if (e)
    return e;
  *start = w->len;
  w->blobs[w->nblobs++] = (blob_loc){(uint32_t)w->nchunks, (uint32_t)w->len, (uint32_t)len};
  uint8_t *p = w->buf + w->len;
  *p++ = ST_REC_BLOB;
  p = stf_put_varint(p, body);
  p = stf_put_varint(p, id);
  p = stf_put_varint(p, len);
  if (len)
    memcpy(p, data, (size_t)len);
  w->len += total;
  w->st.blobs++;
  w->st.blob_bytes += len;
  return ST_OK;
}

int st_writer_add_blob(st_writer *w, const void *data, uint64_t len, uint64_t *id) {
  if (!w || !id || (!data && len))
    return ST_E_ARG;
  if (len > STF_MAX_BLOB) /* before the bytes are read */
    return ST_E_TOOBIG;
  XXH128_hash_t h = XXH3_128bits(data, (size_t)len);
  return st_writer_add_blob_hashed(w, data, len, (const uint64_t[2]){h.low64, h.high64}, id);
}

void st_writer_prefetch_blob(const st_writer *w, const uint64_t hash[2]) {
  if (w && w->tab)
    __builtin_prefetch(&w->tab[(size_t)hash[0] & w->tab_mask]);
}

int st_writer_add_blob_hashed(st_writer *w, const void *data, uint64_t len,
                              const uint64_t hash[2], uint64_t *id) {
  if (!w || !id || !hash || (!data && len))
    return ST_E_ARG;
  if (len > STF_MAX_BLOB)
    return ST_E_TOOBIG;
  if (w->err)
    return w->err;
  XXH128_hash_t h = {.low64 = hash[0], .high64 = hash[1]};
  int e = dedup_reserve(w);
  if (!e)
    e = grow_array((void **)&w->blobs, &w->blobs_cap, w->nblobs + 1, sizeof *w->blobs);
  if (e)
    return e;
  dedup_slot *s = dedup_find(w, h, len);
  if (s->id) {
    *id = s->id;
    w->st.blobs_deduped++;
    w->st.blob_bytes_saved += len;
    return ST_OK;
  }
  size_t start;
  e = store_blob(w, data, len, &start);
  if (e)
    return e;
  *s = (dedup_slot){.lo = h.low64, .hi = h.high64, .len = len, .id = w->nblobs};
  w->tab_used++;
  *id = w->nblobs;
  return end_record(w, start);
}

/* ---- Header, index, trailer ------------------------------------------------ */

/* Header strings are capped so that a huge argv cannot make the header (which
 * a reader loads whole) unbounded. */
static size_t hdr_str_len(const char *s) {
  return s ? strnlen(s, STF_HDR_MAX_STR) : 0;
}

static uint8_t *put_hdr_str(uint8_t *p, const char *s) {
  return put_bytes(p, s, hdr_str_len(s));
}

static size_t header_max(const st_header *h, uint32_t argc) {
  size_t n = STF_PREAMBLE_LEN + 6 * 10 + STF_PAYLOAD_CRC_LEN;
  n += 4 * 10 + hdr_str_len(h->clock) + hdr_str_len(h->host) + hdr_str_len(h->exe) +
       hdr_str_len(h->tool_version);
  for (uint32_t i = 0; i < argc; i++)
    n += 10 + hdr_str_len(h->argv[i]);
  return n + 2 * 10; /* pidns, start_ticks */
}

static uint8_t *put_header_payload(uint8_t *p, const st_header *h, uint32_t argc) {
  p = stf_put_varint(p, h->pid);
  p = stf_put_varint(p, h->ppid);
  p = stf_put_varint(p, h->exec_seq);
  p = stf_put_varint(p, h->start_realtime_ns);
  p = stf_put_varint(p, h->start_mono_ns);
  p = put_hdr_str(p, h->clock);
  p = put_hdr_str(p, h->host);
  p = put_hdr_str(p, h->exe);
  p = put_hdr_str(p, h->tool_version);
  p = stf_put_varint(p, argc);
  for (uint32_t i = 0; i < argc; i++)
    p = put_hdr_str(p, h->argv[i]);
  p = stf_put_varint(p, h->pidns);
  p = stf_put_varint(p, h->start_ticks);
  return p;
}

/* Encode the whole header in one buffer and write it with one write. */
static int write_header(st_writer *w, const st_header *h) {
  uint32_t argc = h->argc > ST_MAX_ARGS ? ST_MAX_ARGS : h->argc;
  uint8_t *buf = mem.alloc(header_max(h, argc));
  if (!buf)
    return ST_E_NOMEM;
  uint8_t *payload = buf + STF_PREAMBLE_LEN;
  uint8_t *end = put_header_payload(payload, h, argc);
  uint32_t plen = (uint32_t)(end - payload);
  memcpy(buf, STF_MAGIC, STF_MAGIC_LEN);
  stf_put_u16(buf + 8, ST_FORMAT_VERSION);
  stf_put_u16(buf + 10, ST_FORMAT_MIN_READ);
  stf_put_u32(buf + 12, STF_FEATURES_WRITTEN);
  stf_put_u32(buf + 16, plen);
  stf_put_u32(buf + 20, stf_crc(buf, 20));
  stf_put_u32(end, stf_crc(payload, plen));
  struct iovec iov = {buf, STF_PREAMBLE_LEN + plen + STF_PAYLOAD_CRC_LEN};
  int e = write_all(w, &iov, 1);
  mem.free(buf);
  return e;
}

static int index_room(st_writer *w, size_t n) {
  return grow_bytes(&w->buf, &w->cap, w->len + n);
}

/* Chunk table: count, then per data chunk its offset (delta from the
 * previous one), records, calls, earliest and latest call start. */
static int encode_chunk_table(st_writer *w) {
  int e = index_room(w, STF_VARINT_MAX);
  if (e)
    return e;
  w->len = (size_t)(stf_put_varint(w->buf + w->len, w->nchunks) - w->buf);
  uint64_t prev_off = 0;
  for (size_t i = 0; i < w->nchunks; i++) {
    const chunk_info *c = &w->chunks[i];
    if ((e = index_room(w, 5 * STF_VARINT_MAX)))
      return e;
    uint8_t *p = w->buf + w->len;
    p = stf_put_varint(p, c->off - prev_off);
    p = stf_put_varint(p, c->nrec);
    p = stf_put_varint(p, c->calls);
    p = stf_put_varint(p, c->min_ns);
    p = stf_put_varint(p, c->max_ns);
    w->len = (size_t)(p - w->buf);
    prev_off = c->off;
  }
  return ST_OK;
}

/* Blob table: count, then for ids 1..n the chunk (delta: ids follow file
 * order, so chunks never decrease), record offset in the raw chunk, length. */
static int encode_blob_table(st_writer *w) {
  int e = index_room(w, STF_VARINT_MAX);
  if (e)
    return e;
  w->len = (size_t)(stf_put_varint(w->buf + w->len, w->nblobs) - w->buf);
  uint32_t prev_chunk = 0;
  for (size_t i = 0; i < w->nblobs; i++) {
    const blob_loc *b = &w->blobs[i];
    if ((e = index_room(w, 3 * STF_VARINT_MAX)))
      return e;
    uint8_t *p = w->buf + w->len;
    p = stf_put_varint(p, b->chunk - prev_chunk);
    p = stf_put_varint(p, b->off);
    p = stf_put_varint(p, b->len);
    w->len = (size_t)(p - w->buf);
    prev_chunk = b->chunk;
  }
  return ST_OK;
}

/* Write the index chunk then the fixed-size end mark pointing at it. */
static int write_index_and_trailer(st_writer *w) {
  int e = encode_chunk_table(w);
  if (!e)
    e = encode_blob_table(w);
  if (!e && w->len > STF_MAX_CHUNK_RAW)
    e = ST_E_TOOBIG;
  stf_trailer t = {.index_off = w->off, .nchunks = (uint32_t)w->nchunks};
  if (!e)
    e = write_chunk(w, STF_CHUNK_INDEX, 0);
  w->len = 0;
  if (e)
    return e;
  t.index_len = w->off - t.index_off;
  uint8_t buf[STF_TRAILER_LEN];
  stf_trailer_encode(buf, &t);
  struct iovec iov = {buf, sizeof buf};
  return write_all(w, &iov, 1);
}

/* ---- Lifecycle ------------------------------------------------------------ */

static int writer_new(st_writer **out) {
  st_writer *w = mem.alloc(sizeof *w);
  if (!w)
    return ST_E_NOMEM;
  memset(w, 0, sizeof *w);
  w->fd = -1;
  pthread_mutex_init(&w->io, NULL);
  w->chunk_size = STF_DEFAULT_CHUNK;
  w->cap = w->chunk_size + CALL_MAX;
  w->buf = mem.alloc(w->cap);
  if (!w->buf) {
    writer_free(w);
    return ST_E_NOMEM;
  }
  /* Without a compressor (none could be allocated, or the record shim
   * could not load libdeflate: record/lazylibs.c) every chunk is stored:
   * a larger file, the same trace. */
  w->z = libdeflate_alloc_compressor(STF_ZLIB_LEVEL);
  w->compress = w->z != NULL;
  start_chunk(w);
  *out = w;
  return ST_OK;
}

/* ---- The file descriptor --------------------------------------------------- */

/* fd, moved to a high descriptor when asked (st_set_high_fd). */
static int move_high(int fd) {
  return stf_high_fd_on() ? st_fd_to_high(fd) : fd;
}

/* The trace file's close goes to the kernel, not through close(): a host
 * that hooks close() to keep the file from its program (the record shim)
 * must not keep it from the writer. */
static int close_file(int fd) {
  return (int)syscall(SYS_close, fd);
}

int st_writer_fd(st_writer *w) {
  pthread_mutex_lock(&w->io);
  int fd = w->fd;
  pthread_mutex_unlock(&w->io);
  return fd;
}

int st_writer_move_fd(st_writer *w) {
  pthread_mutex_lock(&w->io);
  int fd = fcntl(w->fd, F_DUPFD_CLOEXEC, st_high_floor());
  if (fd < 0)
    fd = fcntl(w->fd, F_DUPFD_CLOEXEC, 3);
  w->fd = fd; /* -1: every later write fails (EBADF), none lands elsewhere */
  pthread_mutex_unlock(&w->io);
  return fd;
}

int st_writer_open(st_writer **wp, const char *path, const st_header *h) {
  return st_writer_openat(wp, AT_FDCWD, path, h);
}

int st_writer_openat(st_writer **wp, int dirfd, const char *path, const st_header *h) {
  if (!wp)
    return ST_E_ARG;
  *wp = NULL;
  if (!path || !h || (h->argc && !h->argv))
    return ST_E_ARG;
  st_writer *w;
  int e = writer_new(&w); /* allocate first: no stray file on ENOMEM */
  if (e)
    return e;
  w->fd = openat(dirfd, path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (w->fd < 0) {
    e = errno == EEXIST ? ST_E_EXISTS : ST_E_IO;
    writer_free(w);
    return e;
  }
  w->fd = move_high(w->fd);
  e = write_header(w, h);
  if (e) {
    int saved = errno;
    close_file(w->fd);
    unlinkat(dirfd, path, 0); /* O_EXCL: the file is ours, and holds no data */
    errno = saved;
    writer_free(w);
    return e;
  }
  *wp = w;
  return ST_OK;
}

void st_writer_set_compress(st_writer *w, int on) {
  w->compress = on && w->z;
}

void st_writer_set_chunk_size(st_writer *w, size_t bytes) {
  if (!w)
    return;
  if (bytes == 0)
    bytes = STF_DEFAULT_CHUNK;
  if (bytes < STF_MIN_CHUNK)
    bytes = STF_MIN_CHUNK;
  if (bytes > STF_MAX_CHUNK)
    bytes = STF_MAX_CHUNK;
  w->chunk_size = bytes;
}

int st_writer_flush(st_writer *w) {
  if (!w)
    return ST_E_ARG;
  if (w->err)
    return w->err;
  return w->len ? flush_chunk(w) : ST_OK;
}

int st_writer_close(st_writer *w) {
  if (!w)
    return ST_OK;
  int e = st_writer_flush(w);
  if (!e)
    e = write_index_and_trailer(w);
  int saved = errno;
  /* On Linux the descriptor is gone even when close reports EINTR. */
  pthread_mutex_lock(&w->io);
  int rc = w->fd < 0 ? 0 : close_file(w->fd);
  pthread_mutex_unlock(&w->io);
  if (rc != 0 && errno != EINTR && !e) {
    e = ST_E_IO;
    saved = errno;
  }
  writer_free(w);
  errno = saved;
  return e;
}

void st_writer_abandon(st_writer *w) {
  if (!w)
    return;
  /* Closing our copy of the descriptor writes nothing and cannot affect the
   * parent's copy; keeping it would leak one fd per fork. */
  int saved = errno;
  if (w->fd >= 0)
    close_file(w->fd);
  errno = saved;
  writer_free(w);
}

void st_writer_get_stats(const st_writer *w, st_writer_stats *s) {
  if (!s)
    return;
  if (!w) {
    memset(s, 0, sizeof *s);
    return;
  }
  *s = w->st;
}

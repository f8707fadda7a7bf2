/* fuzz_common.h — helpers shared by the fuzz harnesses (header-only: each
 * harness is one translation unit plus this).
 *
 * The trace reader checks a CRC over every chunk, which a mutating fuzzer
 * almost never gets right, so most inputs would stop at the first chunk.
 * fz_trace_file therefore offers a second way in: when the first byte of
 * the input has bit 0 set, the rest is taken as record bytes and wrapped
 * into a well-formed file (valid header, chunks with correct checksums,
 * optionally compressed, optionally closed with an index and end mark), so
 * that the fuzzer reaches the record, blob, schema and index decoders.
 * Otherwise the input (after the first byte) is the file as is. */
#ifndef STANDIN_FUZZ_COMMON_H
#define STANDIN_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <protobuf-c/protobuf-c.h>
#include <zlib.h>

#include "format.h"
#include "trace.h"

/* A private directory for the harness's files, removed at exit. */
static char fz_dir[64];

static inline void fz_cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fz_dir);
  if (fz_dir[0] && system(cmd) != 0)
    fprintf(stderr, "fuzz: could not remove %s\n", fz_dir);
}

static inline const char *fz_tmpdir(void) {
  if (!fz_dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(fz_dir, sizeof fz_dir, "%s/standin-fuzz.XXXXXX", t && *t && strlen(t) < 32 ? t : "/tmp");
    if (!mkdtemp(fz_dir))
      abort();
    atexit(fz_cleanup);
  }
  return fz_dir;
}

/* dir/name, in static storage that lives as long as the process */
static inline const char *fz_path(const char *name) {
  static char paths[8][128];
  static int next;
  char *p = paths[next++ % 8];
  snprintf(p, sizeof paths[0], "%s/%s", fz_tmpdir(), name);
  return p;
}

static inline void fz_write(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f || (n && fwrite(d, 1, n, f) != n) || fclose(f) != 0)
    abort();
}

/* Plugins are never loaded while fuzzing: a spec naming a path would
 * otherwise dlopen any shared object on the machine. Linked with
 * -Wl,--wrap=dlopen. */
void *__wrap_dlopen(const char *file, int mode);
void *__wrap_dlopen(const char *file, int mode) {
  (void)file;
  (void)mode;
  return NULL;
}

/* ---- building a well-formed trace around fuzzed records ---------------- */

typedef struct {
  uint8_t *p;
  size_t n, cap;
} fz_buf;

static inline void fz_put(fz_buf *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p)
      abort();
  }
  memcpy(b->p + b->n, d, n);
  b->n += n;
}

static inline void fz_put_varint(fz_buf *b, uint64_t v) {
  uint8_t tmp[STF_VARINT_MAX];
  fz_put(b, tmp, (size_t)(stf_put_varint(tmp, v) - tmp));
}

static inline void fz_put_str(fz_buf *b, const char *s) {
  fz_put_varint(b, strlen(s));
  fz_put(b, s, strlen(s));
}

static inline void fz_header(fz_buf *b) {
  fz_buf pl = {0};
  fz_put_varint(&pl, 4242); /* pid, ppid, exec_seq, start realtime, start mono */
  fz_put_varint(&pl, 1);
  fz_put_varint(&pl, 0);
  fz_put_varint(&pl, 1700000000000000000ull);
  fz_put_varint(&pl, 5000);
  fz_put_str(&pl, "CLOCK_MONOTONIC");
  fz_put_str(&pl, "fuzz");
  fz_put_str(&pl, "/bin/app");
  fz_put_str(&pl, "0.1.0");
  fz_put_varint(&pl, 1);
  fz_put_str(&pl, "./app");
  uint8_t pre[STF_PREAMBLE_LEN];
  memcpy(pre, STF_MAGIC, STF_MAGIC_LEN);
  stf_put_u16(pre + 8, ST_FORMAT_VERSION);
  stf_put_u16(pre + 10, ST_FORMAT_MIN_READ);
  stf_put_u32(pre + 12, 0);
  stf_put_u32(pre + 16, (uint32_t)pl.n);
  stf_put_u32(pre + 20, stf_crc(pre, 20));
  fz_put(b, pre, sizeof pre);
  fz_put(b, pl.p, pl.n);
  uint8_t crc[4];
  stf_put_u32(crc, stf_crc(pl.p, pl.n));
  fz_put(b, crc, 4);
  free(pl.p);
}

/* Records in d[0..n): kind byte, varint length, body; counts up to the
 * first one that does not fit (plus one, so the reader meets it). */
static inline uint32_t fz_count_records(const uint8_t *d, size_t n) {
  stf_cur c = {d, d + n, 0};
  uint32_t k = 0;
  while (c.p < c.end) {
    stf_get_byte(&c);
    uint64_t len = stf_get_varint(&c);
    stf_get_raw(&c, len);
    k++;
    if (c.bad)
      break;
  }
  return k;
}

static inline void fz_chunk(fz_buf *b, uint8_t type, uint32_t seq, const uint8_t *d, size_t n, int zip) {
  stf_chunk_hdr h = {.type = type, .method = STF_METHOD_STORED, .seq = seq,
                     .comp_len = (uint32_t)n, .raw_len = (uint32_t)n,
                     .nrec = type == STF_CHUNK_DATA ? fz_count_records(d, n) : 0};
  uint8_t *z = NULL;
  uLongf zn = compressBound(n);
  if (zip && n > 0 && (z = malloc(zn)) != NULL && compress2(z, &zn, d, n, 1) == Z_OK) {
    h.method = STF_METHOD_ZLIB;
    h.comp_len = (uint32_t)zn;
    d = z;
    n = zn;
  }
  h.data_crc = stf_crc(d, n);
  uint8_t hb[STF_CHUNK_HDR_LEN];
  stf_chunk_hdr_encode(hb, &h);
  fz_put(b, hb, sizeof hb);
  fz_put(b, d, n);
  free(z);
}

#define FZ_SEP "\xfe\xed" \
               "CK"

/* The trace file for an input, written to dir/name. Input byte 0: bit 0 =
 * wrap the rest as records (segments separated by FZ_SEP, one chunk each),
 * bit 1 = the last segment is an index chunk followed by a valid end mark,
 * bit 2 = compress the chunks. */
static inline const char *fz_trace_file(const uint8_t *d, size_t n, const char *name) {
  const char *path = fz_path(name);
  if (n == 0 || !(d[0] & 1)) {
    fz_write(path, n ? d + 1 : d, n ? n - 1 : 0);
    return path;
  }
  int index = d[0] & 2, zip = d[0] & 4;
  d++;
  n--;
  fz_buf b = {0};
  fz_header(&b);
  uint32_t seq = 0;
  uint64_t index_off = 0;
  for (;;) {
    const uint8_t *sep = memmem(d, n, FZ_SEP, 4);
    size_t len = sep ? (size_t)(sep - d) : n;
    int last = sep == NULL;
    if (last && index) {
      index_off = b.n;
      fz_chunk(&b, STF_CHUNK_INDEX, seq, d, len, zip);
    } else {
      fz_chunk(&b, STF_CHUNK_DATA, seq++, d, len, zip);
    }
    if (last)
      break;
    d = sep + 4;
    n -= len + 4;
  }
  if (index) {
    stf_trailer t = {.index_off = index_off, .index_len = b.n - index_off, .nchunks = seq};
    uint8_t tb[STF_TRAILER_LEN];
    stf_trailer_encode(tb, &t);
    fz_put(&b, tb, sizeof tb);
  }
  fz_write(path, b.p, b.n);
  free(b.p);
  return path;
}

/* fuzz_schema's input, which fuzz_parse_slabs shares: u16 little-endian
 * schema length, the schema, then the message. Both parts as copies (freed
 * by the caller), so that a read past either is caught; 0 when n < 2. */
static inline int fz_schema_input(const uint8_t *d, size_t n, uint8_t **schema, size_t *sl,
                                  uint8_t **msg, size_t *ml) {
  if (n < 2)
    return 0;
  *sl = (size_t)d[0] | (size_t)d[1] << 8;
  if (*sl > n - 2)
    *sl = n - 2;
  *ml = n - 2 - *sl;
  *schema = malloc(*sl ? *sl : 1);
  *msg = malloc(*ml ? *ml : 1);
  if (!*schema || !*msg)
    abort();
  memcpy(*schema, d + 2, *sl);
  memcpy(*msg, d + 2 + *sl, *ml);
  return 1;
}

/* Read every byte of p[0..n) so that the sanitizers see a bad pointer. */
static inline void fz_touch(const void *p, size_t n) {
  const uint8_t *b = p;
  uint8_t x = 0;
  for (size_t i = 0; i < n; i++)
    x ^= b[i];
  __asm__ volatile("" : : "r"(x)); /* keep the reads */
}

/* Use a tree built by replay as the program would: size it, pack it into
 * a buffer of that size (both must agree), free the single block. */
static inline void fz_use_tree(ProtobufCMessage *m) {
  size_t sz = protobuf_c_message_get_packed_size(m);
  uint8_t *out = malloc(sz ? sz : 1);
  if (out && protobuf_c_message_pack(m, out) != sz)
    abort();
  free(out);
  free(m);
}

#endif

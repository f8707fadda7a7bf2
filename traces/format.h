/* format.h — byte-level layout of standin trace files, shared by writer.c,
 * reader.c and the unit tests (which craft damaged files with it).
 *
 * Internal: nothing here is part of the public API. Every constant and
 * encoding below is specified in traces/FORMAT.md; change both together.
 * Everything is little-endian and encoded byte by byte, never by copying
 * structs, so the layout does not depend on the compiler or the CPU. */
#ifndef STANDIN_TRACE_FORMAT_H
#define STANDIN_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <libdeflate.h>
#include <zlib.h>

#include "trace.h"

/* ---- File header --------------------------------------------------------- */

/* "STANDIN" then 0x89: readable with `head -c 7`; the high-bit byte catches
 * transfers that strip the 8th bit. */
#define STF_MAGIC "STANDIN\x89"
#define STF_MAGIC_LEN 8
/* magic(8) version(2) min_read(2) features(4) payload_len(4) crc(4). The
 * preamble layout is frozen for every format version. */
#define STF_PREAMBLE_LEN 24
#define STF_PAYLOAD_CRC_LEN 4
/* Low 16 feature bits are required (a reader that does not know one must
 * refuse the file); high 16 bits are optional (ignored when unknown). */
#define STF_FEAT_REQUIRED 0x0000ffffu
/* Required bit 0: calls may carry ST_CALL_RESP_DIGEST (their response blob
 * is a digest, not the bytes). Every file this code writes sets it. */
#define STF_FEAT_RESP_DIGEST 0x00000001u
/* Required bit 1: a call may carry more than 16 features (at most
 * STF_MAX_NFEAT; a reader keeps the slots it knows and skips the rest).
 * Every file this code writes sets it: readers before it took a 17th
 * feature for damage. */
#define STF_FEAT_MANY_FEATURES 0x00000002u
#define STF_MAX_NFEAT 64
#define STF_FEATURES_KNOWN (STF_FEAT_RESP_DIGEST | STF_FEAT_MANY_FEATURES)
#define STF_FEATURES_WRITTEN (STF_FEAT_RESP_DIGEST | STF_FEAT_MANY_FEATURES)
/* The writer truncates each header string to this many bytes. */
#define STF_HDR_MAX_STR 4096u
/* A reader refuses a header payload larger than this (ST_E_HEADER). */
#define STF_HDR_MAX_PAYLOAD (16u << 20)

/* ---- Chunks -------------------------------------------------------------- */

#define STF_CHUNK_MAGIC "STCK"
#define STF_CHUNK_HDR_LEN 32
#define STF_CHUNK_DATA 1  /* records */
#define STF_CHUNK_INDEX 2 /* the index, written once by close */
#define STF_METHOD_STORED 0
#define STF_METHOD_ZLIB 1
/* Level 1: compression runs on the recorder's writer thread, where speed
 * matters more than the last few percent of ratio. */
#define STF_ZLIB_LEVEL 1
/* deflate cannot expand data more than about 1032:1; a header that claims
 * more is damaged, and this keeps a reader from allocating on its word. */
#define STF_ZLIB_MAX_RATIO 1032u

#define STF_MAX_BLOB (1u << 30)
/* A chunk holds at most one record larger than the chunk size. */
#define STF_MAX_CHUNK_RAW (STF_MAX_BLOB + (1u << 20))
#define STF_DEFAULT_CHUNK (1u << 20)
#define STF_MIN_CHUNK 64u
#define STF_MAX_CHUNK (256u << 20)

/* ---- Trailer (end mark) -------------------------------------------------- */

#define STF_TRAILER_MAGIC "STANDEND"
#define STF_TRAILER_LEN 32

/* ---- Little-endian fixed-size fields -------------------------------------- */

static inline void stf_put_u16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

static inline void stf_put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline void stf_put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t stf_get_u16(const uint8_t *p) {
  return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t stf_get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t stf_get_u64(const uint8_t *p) {
  return (uint64_t)stf_get_u32(p) | (uint64_t)stf_get_u32(p + 4) << 32;
}

/* The CRC-32 of zlib's crc32, from libdeflate: it folds with carry-less
 * multiplies where the CPU has them, zlib 1.2.13 does not (crc32_z was
 * 3% of a recorded rpc run's samples, on the writer). */
static inline uint32_t stf_crc(const void *p, size_t n) {
  return libdeflate_crc32(0, p, n);
}

/* ---- Varints (unsigned LEB128, at most 10 bytes) ------------------------- */

#define STF_VARINT_MAX 10

static inline uint8_t *stf_put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline size_t stf_varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Signed deltas (timestamps of interleaved threads can go backwards) are
 * zigzag-mapped so small negative values stay short. */
static inline uint64_t stf_zigzag(uint64_t delta) {
  return (delta << 1) ^ (uint64_t)((int64_t)delta >> 63);
}

static inline uint64_t stf_unzigzag(uint64_t v) {
  return (v >> 1) ^ (0 - (v & 1));
}

/* Bounds-checked decoding cursor. Reads past `end` or malformed varints set
 * `bad` and return zeros, so a record decoder checks `bad` once at the end
 * instead of after every field. */
typedef struct {
  const uint8_t *p, *end;
  int bad;
} stf_cur;

static inline uint64_t stf_get_varint_slow(stf_cur *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && c->p < c->end; shift += 7) {
    uint8_t b = *c->p++;
    if (shift == 63 && b > 1)
      break; /* more than 64 bits */
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80))
      return v;
  }
  c->bad = 1;
  c->p = c->end;
  return 0;
}

static inline uint64_t stf_get_varint(stf_cur *c) {
  if (c->p < c->end && *c->p < 0x80) /* most fields fit in one byte */
    return *c->p++;
  return stf_get_varint_slow(c);
}

/* A varint that must fit `max` (a u32 or u16 field). */
static inline uint64_t stf_get_varint_max(stf_cur *c, uint64_t max) {
  uint64_t v = stf_get_varint(c);
  if (v > max) {
    c->bad = 1;
    return 0;
  }
  return v;
}

static inline uint8_t stf_get_byte(stf_cur *c) {
  if (c->p >= c->end) {
    c->bad = 1;
    return 0;
  }
  return *c->p++;
}

/* `n` raw bytes inside the cursor, or NULL (and bad) if they are not. */
static inline const uint8_t *stf_get_raw(stf_cur *c, uint64_t n) {
  if (n > (uint64_t)(c->end - c->p)) {
    c->bad = 1;
    c->p = c->end;
    return NULL;
  }
  const uint8_t *s = c->p;
  c->p += n;
  return s;
}

/* ---- Chunk header --------------------------------------------------------- */

typedef struct {
  uint8_t type;      /* STF_CHUNK_* */
  uint8_t method;    /* STF_METHOD_* */
  uint32_t seq;      /* chunk number, from 0 */
  uint32_t comp_len; /* stored bytes after the header */
  uint32_t raw_len;  /* bytes after decompression */
  uint32_t nrec;     /* records in the chunk (0 for the index) */
  uint32_t data_crc; /* CRC32 of the stored bytes */
} stf_chunk_hdr;

static inline void stf_chunk_hdr_encode(uint8_t out[STF_CHUNK_HDR_LEN], const stf_chunk_hdr *h) {
  memcpy(out, STF_CHUNK_MAGIC, 4);
  out[4] = h->type;
  out[5] = h->method;
  stf_put_u16(out + 6, 0);
  stf_put_u32(out + 8, h->seq);
  stf_put_u32(out + 12, h->comp_len);
  stf_put_u32(out + 16, h->raw_len);
  stf_put_u32(out + 20, h->nrec);
  stf_put_u32(out + 24, h->data_crc);
  stf_put_u32(out + 28, stf_crc(out, 28));
}

/* Decode and check one chunk header on its own: returns ST_OK, ST_E_CRC
 * (header checksum) or ST_E_CORRUPT (checksum good, fields impossible).
 * Lengths against the file size are the caller's business. */
static inline int stf_chunk_hdr_decode(const uint8_t in[STF_CHUNK_HDR_LEN], stf_chunk_hdr *h) {
  if (stf_crc(in, 28) != stf_get_u32(in + 28))
    return ST_E_CRC;
  if (memcmp(in, STF_CHUNK_MAGIC, 4) != 0 || stf_get_u16(in + 6) != 0)
    return ST_E_CORRUPT;
  h->type = in[4];
  h->method = in[5];
  h->seq = stf_get_u32(in + 8);
  h->comp_len = stf_get_u32(in + 12);
  h->raw_len = stf_get_u32(in + 16);
  h->nrec = stf_get_u32(in + 20);
  h->data_crc = stf_get_u32(in + 24);
  if (h->type != STF_CHUNK_DATA && h->type != STF_CHUNK_INDEX)
    return ST_E_CORRUPT;
  if (h->raw_len > STF_MAX_CHUNK_RAW)
    return ST_E_CORRUPT;
  if (h->method == STF_METHOD_STORED)
    return h->comp_len == h->raw_len ? ST_OK : ST_E_CORRUPT;
  if (h->method != STF_METHOD_ZLIB)
    return ST_E_CORRUPT;
  if ((uint64_t)h->raw_len > (uint64_t)h->comp_len * STF_ZLIB_MAX_RATIO + 64)
    return ST_E_CORRUPT;
  return ST_OK;
}

/* ---- Trailer -------------------------------------------------------------- */

typedef struct {
  uint64_t index_off; /* file offset of the index chunk */
  uint64_t index_len; /* its size, header included */
  uint32_t nchunks;   /* data chunks before the index */
} stf_trailer;

static inline void stf_trailer_encode(uint8_t out[STF_TRAILER_LEN], const stf_trailer *t) {
  memcpy(out, STF_TRAILER_MAGIC, 8);
  stf_put_u64(out + 8, t->index_off);
  stf_put_u64(out + 16, t->index_len);
  stf_put_u32(out + 24, t->nchunks);
  stf_put_u32(out + 28, stf_crc(out, 28));
}

/* 1 if `in` is a valid end mark. */
static inline int stf_trailer_decode(const uint8_t in[STF_TRAILER_LEN], stf_trailer *t) {
  if (memcmp(in, STF_TRAILER_MAGIC, 8) != 0 || stf_crc(in, 28) != stf_get_u32(in + 28))
    return 0;
  t->index_off = stf_get_u64(in + 8);
  t->index_len = stf_get_u64(in + 16);
  t->nchunks = stf_get_u32(in + 24);
  return 1;
}

/* Whether st_set_high_fd is on (highfd.c): the writer then opens its
 * files on high descriptors. */
int stf_high_fd_on(void);

/* ---- File header (header.c) ------------------------------------------------ */

/* Check a file's STF_PREAMBLE_LEN-byte preamble: its version and the length
 * of the payload that follows. The version fields are looked at only after
 * the preamble's checksum, so a flipped bit reads as damage, not as "too
 * new". ST_OK, ST_E_HEADER or ST_E_VERSION. */
int stf_check_preamble(const uint8_t *pre, uint32_t *version, uint32_t *plen);

/* Decode a header payload (its checksum already checked) into h; the
 * version is left as it was. Strings are copied to *s, which has room for
 * plen + 1 bytes (each string takes at least its length plus one byte in
 * the payload), or skipped when s is NULL; argv (ST_MAX_ARGS entries) gets
 * the arguments, unless NULL. Bytes after the known fields are ignored
 * (added by newer versions); the fields added last are 0 in files written
 * before them. ST_OK or ST_E_HEADER. */
int stf_parse_header(const uint8_t *p, uint32_t plen, st_header *h, char **s, const char **argv);

#endif

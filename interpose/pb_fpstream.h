/* pb_fpstream.h — the hashed stream of protobuf fingerprints, shared by the
 * two sources that produce it: pb_walk.c from a message tree and
 * pb_fpbytes.c from the bytes pack wrote for it. Not part of the public API.
 *
 * The stream itself (what is written, in which order) is documented at the
 * top of pb_walk.c. Here is how it is hashed, which is part of the
 * fingerprint too: bytes are gathered into a FP_BUF-byte buffer; a write
 * that does not fit in what is left of the buffer first replaces the
 * buffer's content by its XXH3-128 digest (which then opens the next
 * chunk). So the size of every reservation matters, not only the bytes:
 * a singular scalar is one reservation of number and value (fp_scalar), a
 * repeated field's number and count are two (fp_u32, fp_u64), a blob is
 * one (length and content, or length and digest). Both producers must make
 * the same reservations in the same order; keeping them here makes that
 * hard to get wrong. Nothing here allocates. */
#ifndef STANDIN_PB_FPSTREAM_H
#define STANDIN_PB_FPSTREAM_H

#include "pb_internal.h"

#include <stdlib.h>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL /* xxHash is used header-only */
#endif
#include <xxhash.h>

#define FP_BUF 4096   /* stream bytes per one-shot XXH3 call */
#define FP_DIRECT 512 /* blobs at least this long are hashed in place */
#define FP_REF_MIN 64 /* plain streams: blobs at least this long may be references */
#define FP_END 0u
#define FP_UNKNOWN 0xFFFFFFFFu
#define FP_TYPE 0xFFFFFFFEu /* a sub-message of a type not its field's (pb_walk.c) */

/* What a walk does with the stream (walk_ctx.hash). FP_MATCH and FP_EMIT
 * work on the plain stream: the same writes, but no chunk digests, and
 * every blob whole: a blob shorter than FP_REF_MIN as u64 length and
 * content, a longer one as u64 length, then u64 0 and the content, or u64
 * k + 1 when the content is ref[k .. k + length) (see ref below). So two
 * trees have the same plain stream (the references read as the bytes they
 * name) exactly when they write the same stream, and then the same
 * fingerprint. */
enum {
  FP_STATS = 0, /* statistics only: buf contents are dropped */
  FP_HASH = 1,  /* the fingerprint */
  FP_MATCH = 2, /* compare the plain stream with an expected one */
  FP_EMIT = 3   /* write the plain stream out (allocates) */
};

typedef struct {
  size_t n;    /* bytes pending in buf */
  int hash;    /* FP_* */
  int differs; /* FP_MATCH: the stream left the expected one; FP_EMIT: out of memory */
  int spilled; /* FP_HASH: buf's first bytes are the digest of an earlier chunk */
  pbw_stats st;
  const uint8_t *exp; /* FP_MATCH: expected stream, exp_len bytes, pos matched */
  uint8_t *out;       /* FP_EMIT: the stream so far, pos bytes of cap */
  size_t exp_len, pos, cap;
  /* FP_EMIT: bytes a long blob's content is looked for in, to write a
   * reference instead; FP_MATCH: the bytes the expected stream's references
   * name (a pack's saved response: reading it there instead of from a copy
   * in the stream spares the memory a second copy would take, and warms the
   * response the hook then copies). NULL: none. */
  const uint8_t *ref;
  size_t ref_len;
  size_t ref_pos; /* FP_EMIT: where the last reference ended in ref */
  /* FP_EMIT: the blob being written cannot occur in ref (an array of
   * numbers pack writes as varints, or with a tag each): not looked for */
  int noref;
  /* pb_walk.c's snapshot walk (WM_SNAP) only: the snapshot it takes, and
   * whether it was given up (a block did not fit, a type without a plan) */
  pbw_snap *snap;
  int snap_bad;
  uint8_t buf[FP_BUF];
} walk_ctx;

/* FP_MATCH, FP_EMIT: the next n bytes of the plain stream. */
static __attribute__((unused)) void fp_plain(walk_ctx *c, const void *p, size_t n) {
  if (c->differs || n == 0)
    return;
  if (c->hash == FP_MATCH) {
    if (n > c->exp_len - c->pos || memcmp(c->exp + c->pos, p, n) != 0)
      c->differs = 1;
    else
      c->pos += n;
    return;
  }
  if (n > c->cap - c->pos) {
    size_t cap = c->cap ? c->cap : 256;
    while (cap - c->pos < n)
      cap *= 2;
    uint8_t *o = realloc(c->out, cap);
    if (o == NULL) {
      c->differs = 1;
      return;
    }
    c->out = o;
    c->cap = cap;
  }
  memcpy(c->out + c->pos, p, n);
  c->pos += n;
}

/* Replace the pending bytes by their digest, which chains them to what
 * follows. Chunk boundaries depend only on the stream, so equal trees
 * still hash equally. The other modes just pass the pending bytes on. */
static __attribute__((unused)) void fp_spill(walk_ctx *c) {
  if (c->hash == FP_HASH) {
    c->spilled = 1;
    pbw__h128 h = pbw__hash128(c->buf, c->n);
    memcpy(c->buf, &h, sizeof h);
    c->n = sizeof h;
    return;
  }
  if (c->hash != FP_STATS)
    fp_plain(c, c->buf, c->n);
  c->n = 0;
}

/* Room for n <= FP_BUF - 16 bytes at the end of buf. */
static inline uint8_t *fp_room(walk_ctx *c, size_t n) {
  if (n > FP_BUF - c->n)
    fp_spill(c);
  uint8_t *w = c->buf + c->n;
  c->n += n;
  return w;
}

static inline void fp_u32(walk_ctx *c, uint32_t v) {
  memcpy(fp_room(c, 4), &v, 4);
}

static inline void fp_u64(walk_ctx *c, uint64_t v) {
  memcpy(fp_room(c, 8), &v, 8);
}

/* Number and value (n = 4 or 8 bytes, in memory order) of a written
 * singular scalar field, in one reservation. */
static inline void fp_scalar(walk_ctx *c, uint32_t id, const void *v, size_t n) {
  uint8_t *w = fp_room(c, 4 + n);
  memcpy(w, &id, 4);
  memcpy(w + 4, v, n);
}

/* A blob of n >= FP_DIRECT bytes whose XXH3-128 the caller computed. */
static inline void fp_blob_digest(walk_ctx *c, size_t n, pbw__h128 h) {
  uint8_t *w = fp_room(c, 8 + sizeof h);
  memcpy(w, &n, 8);
  memcpy(w + 8, &h, sizeof h);
}

/* Where the n >= FP_REF_MIN bytes at p occur in c->ref, or NULL. A pack
 * writes strings and bytes in the order the walk visits them, a few tag
 * and length bytes apart: the occurrences of their first 8 bytes are
 * tried from where the last reference ended, a few of them, before a
 * search of the whole of ref (glibc's search for long needles
 * preprocesses the needle: 12% of building rpc's replay database when it
 * was the only search). */
static __attribute__((unused)) const uint8_t *fp_ref_find(const walk_ctx *c, const uint8_t *p,
                                                          size_t n) {
  const uint8_t *r = c->ref, *end = r + c->ref_len, *q = r + c->ref_pos;
  pbw__ref_searches++;
  for (int tries = 0; tries < 8 && q <= end - n; tries++, q++) {
    q = memmem(q, (size_t)(end - q), p, 8);
    if (q == NULL || q > end - n)
      break;
    if (memcmp(q, p, n) == 0)
      return q;
  }
  return memmem(r, c->ref_len, p, n);
}

/* A blob of n >= FP_REF_MIN bytes in the plain stream, after its length:
 * a reference into c->ref where its content is found there, else 0 and the
 * content. */
static __attribute__((unused)) void fp_plain_ref(walk_ctx *c, const void *p, size_t n) {
  uint64_t tag = 0;
  if (c->differs)
    return;
  if (c->hash == FP_MATCH) {
    if (8 > c->exp_len - c->pos) {
      c->differs = 1;
      return;
    }
    memcpy(&tag, c->exp + c->pos, 8);
    c->pos += 8;
    if (tag == 0) {
      fp_plain(c, p, n);
      return;
    }
    uint64_t k = tag - 1;
    if (c->ref == NULL || k > c->ref_len || n > c->ref_len - k || memcmp(c->ref + k, p, n) != 0)
      c->differs = 1;
    return;
  }
  const uint8_t *at = c->ref && !c->noref && n <= c->ref_len ? fp_ref_find(c, p, n) : NULL;
  if (at != NULL) {
    tag = (uint64_t)(at - c->ref) + 1;
    c->ref_pos = (size_t)(at - c->ref) + n;
  }
  fp_plain(c, &tag, 8);
  if (at == NULL)
    fp_plain(c, p, n);
}

static __attribute__((unused)) void fp_blob_slow(walk_ctx *c, const void *p, size_t n) {
  uint8_t *w;
  if (n >= FP_REF_MIN && c->hash >= FP_MATCH) { /* plain stream: see fp_plain_ref */
    uint64_t len = n;
    memcpy(fp_room(c, 8), &len, 8); /* passed on with what is pending: one compare */
    fp_spill(c);
    fp_plain_ref(c, p, n);
    return;
  }
  if (n >= FP_DIRECT) {
    fp_blob_digest(c, n, pbw__hash128(p, n));
    return;
  }
  w = fp_room(c, 8 + n);
  memcpy(w, &n, 8);
  if (n > 0) /* p may be NULL then (a NULL string, bytes without data) */
    memcpy(w + 8, p, n);
}

/* Most strings and bytes are short: copy them inline, no library call. */
static inline void fp_blob(walk_ctx *c, const void *p, size_t n) {
  if (!c->hash) {
    c->n = 0;
    return;
  }
  if (n > 32 || 8 + 32 > FP_BUF - c->n) {
    fp_blob_slow(c, p, n);
    return;
  }
  uint8_t *w = c->buf + c->n;
  c->n += 8 + n;
  memcpy(w, &n, 8);
  pbw__copy_small(w + 8, p, n);
}

static __attribute__((unused)) void fp_digest(walk_ctx *c, uint8_t fp[16]) {
  pbw__h128 h = pbw__hash128(c->buf, c->n);
  XXH128_canonicalFromHash((XXH128_canonical_t *)fp, (XXH128_hash_t){h.lo, h.hi});
}

#endif

/* fuzz_jpeg_scan — the JPEG marker scanner and frame-header probe
 * (interpose/jpeg_scan.c), which both shims run inside the program on
 * whatever bytes its source hands the library, and the request header
 * written in front of the scanner's output (interpose/jpeg_req.c).
 *
 * Input: byte 0 picks the colour map of the request header (and so the
 * room the scanner reserves in front), byte 1 the number k (0-15) of chunk
 * sizes that follow, bytes 2..k+1 the sizes (1-240 bytes, or 1-16 KiB),
 * taken in turn; the rest is the datastream.
 *
 * Beyond crashes, it checks what replay relies on:
 * - the normalised request does not depend on how the bytes were cut:
 *   the whole stream in one piece, in the chunks, and in the chunks as
 *   replay's drain feeds them (pieces without an 0xFF held back while the
 *   scanner says none can end the datastream, jpg_scan_may_end, then fed
 *   in one piece) give the same request, end and state;
 * - what jpg_scan_kept says is kept stays in the request, whatever comes;
 * - a scanner without output ends where one with output does;
 * - scanning a request again gives the same request;
 * - the header written in front parses back to the same parameters. */
#include "fuzz_common.h"
#include "jpeg_req.h"
#include "jpeg_scan.h"
#include "shim_alloc.h"

#define FZ_CHECK(c)                                                                                \
  do {                                                                                             \
    if (!(c)) {                                                                                    \
      fprintf(stderr, "fuzz_jpeg_scan: %s:%d: %s\n", __FILE__, __LINE__, #c);                      \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Drain lag as replay's drain bounds it (jpeg_obj.c DRAIN_LAG_MAX). */
enum { LAG_MAX = 4096 };

typedef struct {
  const uint8_t *sizes;
  size_t nsizes, next;
} cutter;

static size_t next_cut(cutter *c, size_t left) {
  size_t n = left;
  if (c->nsizes) {
    uint8_t b = c->sizes[c->next++ % c->nsizes];
    n = b < 240 ? (size_t)b + 1 : (size_t)(b - 239) * 1024;
  }
  return n < left ? n : left;
}

/* The state every way of feeding must end in. */
static void same_state(const jpg_scan *a, const jpg_scan *b) {
  FZ_CHECK(a->consumed == b->consumed);
  FZ_CHECK(jpg_scan_done(a) == jpg_scan_done(b));
  FZ_CHECK(a->bad_marker == b->bad_marker);
  FZ_CHECK(a->restart == b->restart);
  FZ_CHECK(a->seen_soi == b->seen_soi && a->seen_sof == b->seen_sof && a->seen_sos == b->seen_sos);
  FZ_CHECK(a->first_end == b->first_end);
  FZ_CHECK(jpg_scan_kept(a) == jpg_scan_kept(b));
}

typedef struct {
  uint8_t *buf;
  size_t len;
} request;

static request finish(jpg_scan *s) {
  request r = {NULL, 0};
  FZ_CHECK(jpg_scan_finish(s, &r.buf, &r.len) == 0); /* fuzz inputs are small: no OOM */
  return r;
}

static void same_request(request a, request b, size_t reserve) {
  FZ_CHECK(a.len == b.len);
  FZ_CHECK(a.len >= reserve + 2);
  FZ_CHECK(memcmp(a.buf + reserve, b.buf + reserve, a.len - reserve) == 0);
}

/* The chunks, as they come; what is kept is checked against the request
 * of the whole stream (ref) as it grows. */
static void by_chunks(const uint8_t *d, size_t n, cutter cut, size_t reserve, request ref,
                      jpg_scan *s) {
  jpg_scan_init(s, reserve, 1);
  size_t kept = jpg_scan_kept(s), ref_end = ref.len - 2; /* before its EOI */
  FZ_CHECK(kept == reserve);
  for (size_t i = 0; i < n && !jpg_scan_done(s);) {
    size_t k = next_cut(&cut, n - i);
    size_t used = jpg_scan_feed(s, d + i, k);
    FZ_CHECK(used <= k);
    FZ_CHECK(used == k || jpg_scan_done(s)); /* only an end stops it short */
    i += used;
    size_t now = jpg_scan_kept(s);
    FZ_CHECK(now >= kept && now <= s->out_len && now <= ref_end);
    if (now > kept)
      FZ_CHECK(memcmp(s->out + kept, ref.buf + kept, now - kept) == 0);
    kept = now;
  }
}

/* The chunks as replay's drain feeds them (jpeg_obj.c jpg_drain). */
static void by_drain(const uint8_t *d, size_t n, cutter cut, size_t reserve, jpg_scan *s) {
  jpg_scan_init(s, reserve, 1);
  size_t i = 0, lag_at = 0, lag = 0; /* held back: d[lag_at, lag_at + lag) */
  while (i < n && !jpg_scan_done(s)) {
    size_t k = next_cut(&cut, n - i);
    if (!jpg_scan_may_end(s) && lag + k <= LAG_MAX && !memchr(d + i, 0xFF, k)) {
      if (!lag)
        lag_at = i;
      lag += k;
      i += k;
      continue;
    }
    if (lag) { /* the scanner said none of them can end it */
      FZ_CHECK(jpg_scan_feed(s, d + lag_at, lag) == lag);
      FZ_CHECK(!jpg_scan_done(s));
      lag = 0;
    }
    i += jpg_scan_feed(s, d + i, k);
  }
  if (lag) {
    FZ_CHECK(jpg_scan_feed(s, d + lag_at, lag) == lag);
    FZ_CHECK(!jpg_scan_done(s));
  }
}

/* The probe and the features record computes from it, on any bytes. */
static void probe(const uint8_t *d, size_t n) {
  jpg_probe p;
  int rc = jpg_probe_header(d, n, &p);
  FZ_CHECK((rc == 0) == (p.sof >= 0));
  uint64_t feat[ST_JPF_NFEAT];
  jpg_features(feat, &p, n, p.width, p.height, (uint64_t)p.width * p.height * 3, 1, 1);
  int sub = jpg_subsamp(p.ncomp, p.h, p.v);
  fz_touch(jpg_class_name(p.sof, sub), 1);
}

/* A request header with a colour map of `colors` 3-byte entries taken from
 * the input, written in front of the request and parsed back. */
static void header_round_trip(request r, const jpg_params *p, const uint8_t *cmap) {
  size_t hl = jpg_req_header_len(p);
  jpg_req_write_header(r.buf, p, cmap);
  jpg_params q;
  const uint8_t *qmap, *jpeg;
  size_t jlen;
  FZ_CHECK(jpg_req_parse(r.buf, r.len, &q, &qmap, &jpeg, &jlen) == 0);
  FZ_CHECK(q.api == p->api && q.entry == p->entry && q.out_color_space == p->out_color_space);
  FZ_CHECK(q.scale_num == p->scale_num && q.scale_denom == p->scale_denom);
  FZ_CHECK(q.options == p->options && q.tables_len == p->tables_len);
  FZ_CHECK(q.cmap_colors == p->cmap_colors && q.cmap_components == p->cmap_components);
  FZ_CHECK(memcmp(&q.output_gamma, &p->output_gamma, sizeof q.output_gamma) == 0);
  FZ_CHECK(jpeg == r.buf + hl && jlen == r.len - hl);
  if (p->cmap_colors)
    FZ_CHECK(qmap && memcmp(qmap, cmap, hl - JPG_REQ_FIXED) == 0);
  uint8_t fa[16], fb[16];
  jpg_req_fingerprint(r.buf, r.len, ST_API_JPEG_DECODE, fa);
  jpg_req_fingerprint(r.buf, r.len, ST_API_TJ_DECODE, fb);
  FZ_CHECK(memcmp(fa, fb, 16) != 0); /* bound to the API */
}

/* The readers of recorded blobs, on any bytes: they must refuse or fit. */
static void blob_readers(const uint8_t *d, size_t n) {
  jpg_params p;
  const uint8_t *cmap, *jpeg;
  size_t jlen;
  if (jpg_req_parse(d, n, &p, &cmap, &jpeg, &jlen) == 0) {
    FZ_CHECK(jpeg >= d && jpeg + jlen == d + n);
    if (cmap)
      fz_touch(cmap, (size_t)p.cmap_colors * p.cmap_components);
  }
  jpg_ext x;
  if (jpg_ext_read(d, n, &x) == 0) {
    if (x.cmap)
      fz_touch(x.cmap, (size_t)x.ncolors * x.ncomp);
    for (uint32_t i = 0; i < x.nmsgs; i++) {
      jpg_msg m;
      jpg_ext_msg(&x, i, &m);
      fz_touch(&m, sizeof m);
    }
  }
  jpg_digest g;
  const uint8_t *ext;
  size_t elen;
  if (jpg_dig_read(d, n, &g, &ext, &elen) == 0 && ext) {
    FZ_CHECK(ext + elen == d + n);
    if (jpg_ext_read(ext, elen, &x) == 0)
      fz_touch(x.msgs, (size_t)x.nmsgs * JPG_MSG_BYTES);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  blob_readers(d, n);
  if (n < 2)
    return 0;
  jpg_params par;
  memset(&par, 0, sizeof par);
  par.api = ST_API_JPEG_DECODE;
  par.scale_num = par.scale_denom = 1;
  par.output_gamma = 1.0;
  par.cmap_colors = d[0] % 8;
  par.cmap_components = par.cmap_colors ? 3 : 0;
  size_t k = d[1] % 16;
  if (n < 2 + k)
    return 0;
  cutter cut = {d + 2, k, 0};
  const uint8_t *s = d + 2 + k;
  size_t len = n - 2 - k;
  size_t reserve = jpg_req_header_len(&par);
  uint8_t cmap[7 * 3];
  for (size_t i = 0; i < sizeof cmap; i++)
    cmap[i] = len ? s[i % len] : (uint8_t)i;

  jpg_scan whole, chunks, drain, bare;
  jpg_scan_init(&whole, reserve, 1);
  size_t used = jpg_scan_feed(&whole, s, len);
  FZ_CHECK(used == len || jpg_scan_done(&whole));
  FZ_CHECK(whole.consumed == used);
  jpg_scan_init(&bare, 0, 0); /* finds the end only */
  for (size_t i = 0; i < len && !jpg_scan_done(&bare);)
    i += jpg_scan_feed(&bare, s + i, next_cut(&cut, len - i));
  FZ_CHECK(bare.consumed == whole.consumed && jpg_scan_done(&bare) == jpg_scan_done(&whole));
  FZ_CHECK(bare.out == NULL);
  jpg_scan_free(&bare);

  jpg_scan ws = whole; /* finish empties it: its state, kept for the others */
  request ref = finish(&whole);
  cut.next = 0;
  by_chunks(s, len, cut, reserve, ref, &chunks);
  by_drain(s, len, cut, reserve, &drain);
  same_state(&ws, &chunks);
  same_state(&ws, &drain);
  request rc = finish(&chunks), rd = finish(&drain);
  same_request(ref, rc, reserve);
  same_request(ref, rd, reserve);

  /* the request scanned again is itself */
  jpg_scan again;
  jpg_scan_init(&again, reserve, 1);
  jpg_scan_feed(&again, ref.buf + reserve, ref.len - reserve);
  request rr = finish(&again);
  same_request(ref, rr, reserve);

  probe(s, len);
  probe(ref.buf + reserve, ref.len - reserve);
  header_round_trip(ref, &par, cmap);

  shim_free(ref.buf);
  shim_free(rc.buf);
  shim_free(rd.buf);
  shim_free(rr.buf);
  return 0;
}

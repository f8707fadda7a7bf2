/* test_jpeg.c — unit tests of interpose/jpeg_scan and jpeg_req: the
 * normalised request datastream (what fingerprints a decode), the frame
 * header probe, request headers and response extensions. Streams are built
 * by hand, marker by marker, so every rule is checked on its own. */
#include "api.h"
#include "jpeg_obj.h"
#include "jpeg_regen.h"
#include "jpeg_req.h"
#include "jpeg_scan.h"
#include "placement.h"
#include "shim.h"
#include "shim_alloc.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

/* ---- building streams ------------------------------------------------------ */

typedef struct {
  uint8_t b[4096];
  size_t n;
} stream;

static void put(stream *s, const void *p, size_t n) {
  ck_assert_uint_le(s->n + n, sizeof s->b);
  memcpy(s->b + s->n, p, n);
  s->n += n;
}

static void marker(stream *s, int m) {
  uint8_t two[2] = {0xFF, (uint8_t)m};
  put(s, two, 2);
}

/* A marker segment with `len` payload bytes of value `fill`. */
static void segment(stream *s, int m, size_t len, int fill) {
  marker(s, m);
  uint8_t l[2] = {(uint8_t)((len + 2) >> 8), (uint8_t)(len + 2)};
  put(s, l, 2);
  for (size_t i = 0; i < len; i++)
    put(s, &(uint8_t){(uint8_t)fill}, 1);
}

/* A baseline frame header: 1 or 3 components with sampling h0 x v0. */
static void sof(stream *s, int m, int w, int h, int ncomp, int h0, int v0) {
  uint8_t p[6 + 9] = {8,          (uint8_t)(h >> 8), (uint8_t)h, (uint8_t)(w >> 8),
                      (uint8_t)w, (uint8_t)ncomp};
  for (int c = 0; c < ncomp; c++) {
    p[6 + 3 * c] = (uint8_t)(c + 1);
    p[7 + 3 * c] = c == 0 ? (uint8_t)(h0 << 4 | v0) : 0x11;
    p[8 + 3 * c] = c ? 1 : 0;
  }
  marker(s, m);
  size_t len = 6 + 3 * (size_t)ncomp;
  uint8_t l[2] = {0, (uint8_t)(len + 2)};
  put(s, l, 2);
  put(s, p, len);
}

static const uint8_t entropy[] = {0x12, 0x34, 0xFF, 0x00, 0x56, 0xFF, 0xD0, 0x78, 0x9A};

/* A restart interval of 1 MCU (DRI): entropy's FF D0 is a restart marker. */
static void dri1(stream *s) {
  marker(s, 0xDD);
  put(s, "\x00\x04\x00\x01", 4);
}

/* SOI APP0 COM APP1 DQT DRI SOF0 DHT SOS <entropy> [tail] */
static void image(stream *s) {
  marker(s, 0xD8);
  segment(s, 0xE0, 14, 'J');
  segment(s, 0xFE, 5, 'c');
  segment(s, 0xE1, 20, 'x');
  segment(s, 0xDB, 65, 1);
  dri1(s);
  sof(s, 0xC0, 64, 32, 3, 2, 2);
  segment(s, 0xC4, 20, 2);
  segment(s, 0xDA, 10, 3);
  put(s, entropy, sizeof entropy);
}

/* What image() normalises to, before the closing EOI. */
static void image_normalised(stream *s) {
  marker(s, 0xD8);
  segment(s, 0xE0, 14, 'J');
  segment(s, 0xDB, 65, 1);
  dri1(s);
  sof(s, 0xC0, 64, 32, 3, 2, 2);
  segment(s, 0xC4, 20, 2);
  segment(s, 0xDA, 10, 3);
  put(s, entropy, sizeof entropy);
}

/* Normalise `in` fed in pieces of `piece` bytes (0 = at once). */
static stream normalise(const stream *in, size_t piece, size_t *consumed) {
  jpg_scan sc;
  jpg_scan_init(&sc, 7, 1);
  size_t used = 0;
  for (size_t i = 0; i < in->n && !jpg_scan_done(&sc);) {
    size_t n = piece && in->n - i > piece ? piece : in->n - i;
    size_t u = jpg_scan_feed(&sc, in->b + i, n);
    used += u;
    if (u < n)
      break;
    i += n;
  }
  if (consumed)
    *consumed = used;
  uint8_t *buf;
  size_t len;
  ck_assert_int_eq(jpg_scan_finish(&sc, &buf, &len), 0);
  ck_assert_uint_ge(len, 7);
  stream out = {.n = 0};
  put(&out, buf + 7, len - 7);
  shim_free(buf);
  return out;
}

static void assert_same(const stream *a, const stream *b) {
  ck_assert_uint_eq(a->n, b->n);
  ck_assert_int_eq(memcmp(a->b, b->b, a->n), 0);
}

/* ---- the normalised datastream ---------------------------------------------- */

START_TEST(test_scan_keeps_decoding_segments_and_drops_the_rest) {
  stream in = {.n = 0}, want = {.n = 0};
  image(&in);
  segment(&in, 0xFE, 3, 'z'); /* a comment after the scan */
  marker(&in, 0xD9);
  image_normalised(&want);
  marker(&want, 0xD9);
  size_t used;
  stream got = normalise(&in, 0, &used);
  assert_same(&got, &want);
  ck_assert_uint_eq(used, in.n);
}
END_TEST

START_TEST(test_scan_stops_after_eoi) {
  stream in = {.n = 0};
  image(&in);
  marker(&in, 0xD9);
  size_t end = in.n;
  put(&in, "next image", 10);
  size_t used;
  normalise(&in, 0, &used);
  ck_assert_uint_eq(used, end);
}
END_TEST

START_TEST(test_scan_any_split_gives_the_same_result) {
  stream in = {.n = 0};
  image(&in);
  marker(&in, 0xD9);
  stream whole = normalise(&in, 0, NULL);
  for (size_t piece = 1; piece < 40; piece++) {
    stream got = normalise(&in, piece, NULL);
    assert_same(&got, &whole);
  }
}
END_TEST

/* A program that never calls jpeg_finish_decompress leaves the trailing
 * markers unread; replay drains to EOI. Both must give the same request. */
START_TEST(test_scan_request_does_not_depend_on_how_far_the_end_was_read) {
  stream full = {.n = 0};
  image(&full);
  size_t data_end = full.n;
  segment(&full, 0xC4, 4, 9); /* tables after the last scan change nothing */
  segment(&full, 0xFE, 3, 'z');
  marker(&full, 0xFF); /* a fill byte, then EOI */
  marker(&full, 0xD9);
  stream want = normalise(&full, 0, NULL);
  for (size_t cut = data_end; cut <= full.n; cut++) {
    stream part = full;
    part.n = cut;
    stream got = normalise(&part, 0, NULL);
    assert_same(&got, &want);
  }
}
END_TEST

START_TEST(test_scan_keeps_every_scan_and_drops_stray_bytes) {
  stream in = {.n = 0}, want = {.n = 0};
  put(&in, "garbage", 7); /* before SOI */
  image(&in);
  segment(&in, 0xC4, 6, 4);
  put(&in, "\x01\x02", 2); /* stray bytes between segments */
  segment(&in, 0xFE, 2, 'c');
  segment(&in, 0xDA, 8, 5);
  put(&in, "\xAA\xFF\x00\xBB", 4);
  marker(&in, 0xD9);
  image_normalised(&want);
  segment(&want, 0xC4, 6, 4);
  segment(&want, 0xDA, 8, 5);
  put(&want, "\xAA\xFF\x00\xBB", 4);
  marker(&want, 0xD9);
  stream got = normalise(&in, 3, NULL);
  assert_same(&got, &want);
}
END_TEST

START_TEST(test_scan_tables_only_datastream) {
  stream in = {.n = 0}, want = {.n = 0};
  marker(&in, 0xD8);
  segment(&in, 0xDB, 65, 1);
  segment(&in, 0xFE, 4, 'c');
  segment(&in, 0xC4, 30, 2);
  marker(&in, 0xD9);
  marker(&want, 0xD8);
  segment(&want, 0xDB, 65, 1);
  segment(&want, 0xC4, 30, 2);
  marker(&want, 0xD9);
  stream got = normalise(&in, 0, NULL);
  assert_same(&got, &want);
}
END_TEST

START_TEST(test_scan_truncated_segment_is_left_out) {
  stream in = {.n = 0}, want = {.n = 0};
  marker(&in, 0xD8);
  segment(&in, 0xDB, 65, 1);
  size_t keep = in.n;
  segment(&in, 0xC4, 30, 2);
  in.n -= 10; /* ends inside the DHT segment */
  put(&want, in.b, keep);
  marker(&want, 0xD9);
  stream got = normalise(&in, 0, NULL);
  assert_same(&got, &want);
}
END_TEST

/* Corrupt data: a marker libjpeg's marker reader refuses ends the stream
 * there (the real library fails at it), consumed, the request cut before
 * it. Markers it accepts between scans do not. */
START_TEST(test_scan_stops_at_a_marker_libjpeg_refuses) {
  static const int refused[] = {0x28, 0x02, 0xBF, 0xC3, 0xC8, 0xCF, 0xDE,
                                0xDF, 0xF0, 0xFD, 0xC0, 0xC2, 0xD8};
  for (size_t k = 0; k < sizeof refused / sizeof *refused; k++) {
    stream in = {.n = 0}, want = {.n = 0};
    image(&in);
    marker(&in, refused[k]);
    size_t end = in.n;
    put(&in, "\x92\x37 more data", 11); /* read as a length before: past EOI */
    marker(&in, 0xD9);
    image_normalised(&want);
    marker(&want, 0xD9);
    jpg_scan sc;
    jpg_scan_init(&sc, 0, 1);
    ck_assert_uint_eq(jpg_scan_feed(&sc, in.b, in.n), end);
    ck_assert(jpg_scan_done(&sc));
    ck_assert_int_eq(sc.bad_marker, refused[k]);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(jpg_scan_finish(&sc, &buf, &len), 0);
    ck_assert_uint_eq(len, want.n);
    ck_assert_int_eq(memcmp(buf, want.b, len), 0);
    shim_free(buf);
    for (size_t piece = 1; piece < 9; piece++) { /* wherever the pieces end */
      size_t used;
      stream got = normalise(&in, piece, &used);
      assert_same(&got, &want);
      ck_assert_uint_eq(used, end);
    }
  }
  static const int accepted[] = {0xC4, 0xCC, 0xDB, 0xDC, 0xDD, 0xE5, 0xFE, 0x01};
  for (size_t k = 0; k < sizeof accepted / sizeof *accepted; k++) {
    stream in = {.n = 0};
    image(&in);
    if (accepted[k] == 0x01)
      marker(&in, 0x01);
    else
      segment(&in, accepted[k], 4, 7);
    marker(&in, 0xD9);
    jpg_scan sc;
    jpg_scan_init(&sc, 0, 0);
    ck_assert_uint_eq(jpg_scan_feed(&sc, in.b, in.n), in.n);
    ck_assert(jpg_scan_done(&sc));
    ck_assert_int_eq(sc.bad_marker, 0);
    jpg_scan_free(&sc);
  }
}
END_TEST

/* Corrupt data: a restart marker in a scan without a restart interval
 * ends the scan's data (libjpeg's decoder stops at it; its marker reader
 * skips the rest up to the next marker, which only jpeg_finish_decompress
 * reads). The request is cut before it, whether the rest was read (a
 * program that finishes, replay's drain) or not (one that aborts after
 * the last row). A DRI of 0 is no restart interval. */
START_TEST(test_scan_restart_marker_without_interval_ends_the_data) {
  for (int dri0 = 0; dri0 < 2; dri0++) {
    stream in = {.n = 0}, want = {.n = 0};
    marker(&in, 0xD8);
    segment(&in, 0xDB, 65, 1);
    if (dri0) {
      marker(&in, 0xDD);
      put(&in, "\x00\x04\x00\x00", 4);
    }
    sof(&in, 0xC0, 64, 32, 3, 2, 2);
    segment(&in, 0xC4, 20, 2);
    segment(&in, 0xDA, 10, 3);
    put(&in, "\x12\x34\xFF\x00\x56", 5);
    size_t data_end = in.n;
    marker(&in, 0xD4);
    size_t marker_end = in.n;
    put(&in, "\x78\xFF\x00\x9A\xFF\xD5\xBC", 7); /* the rest of the scan */
    segment(&in, 0xFE, 3, 'z');
    marker(&in, 0xD9);
    put(&want, in.b, data_end);
    marker(&want, 0xD9);
    size_t used;
    stream got = normalise(&in, 0, &used);
    assert_same(&got, &want);
    ck_assert_uint_eq(used, in.n);
    /* read up to the marker only (the library stopped there), or anywhere
     * after it, in any pieces: the same request */
    for (size_t cut = marker_end; cut <= in.n; cut++) {
      stream part = in;
      part.n = cut;
      for (size_t piece = 0; piece < 4; piece++) {
        got = normalise(&part, piece, NULL);
        assert_same(&got, &want);
      }
    }
  }
  /* with a restart interval it is a restart marker: kept, with the rest */
  stream in = {.n = 0};
  marker(&in, 0xD8);
  dri1(&in);
  segment(&in, 0xDB, 65, 1);
  sof(&in, 0xC0, 64, 32, 3, 2, 2);
  segment(&in, 0xDA, 10, 3);
  put(&in, "\x12\xFF\xD4\x34", 4);
  marker(&in, 0xD9);
  stream got = normalise(&in, 0, NULL);
  assert_same(&got, &in);
}
END_TEST

/* Where the first scan's data ended at a marker (first_end): at EOI for a
 * whole image; at a marker inside the data (corrupt) even when the scanner
 * then reads it as a segment whose length runs past what is in, where a
 * decode that stopped there is found by its request cut (rep_jpeg.c). */
START_TEST(test_scan_first_end_is_where_the_first_scan_data_ended) {
  stream in = {.n = 0};
  image(&in);
  size_t data_end = in.n;
  marker(&in, 0xD9);
  jpg_scan sc;
  jpg_scan_init(&sc, 7, 1);
  jpg_scan_feed(&sc, in.b, in.n);
  stream want = {.n = 0};
  image_normalised(&want);
  ck_assert_uint_eq(sc.first_end, 7 + want.n);
  ck_assert_uint_eq(sc.first_end, sc.entropy_end);
  jpg_scan_free(&sc);
  stream bad = {.n = 0};
  put(&bad, in.b, data_end);
  static const char com[] = "\xFF\xFE\x7F\x00 and then some"; /* a COM 'segment' of 32 KiB */
  put(&bad, com, sizeof com - 1);
  jpg_scan_init(&sc, 7, 1);
  ck_assert_uint_eq(jpg_scan_feed(&sc, bad.b, bad.n), bad.n);
  ck_assert(!jpg_scan_done(&sc));
  ck_assert_uint_eq(sc.first_end, 7 + want.n);
  jpg_scan_free(&sc);
}
END_TEST

/* Replay's drain, suspended anywhere in a datastream, asks how much of
 * the output every datastream starting so keeps in its request
 * (jpg_scan_kept): that much must be the start of the whole stream's
 * request, wherever it was cut. And bytes that hold no 0xFF may wait for
 * the scanner while jpg_scan_may_end says no: such a byte never ends it. */
START_TEST(test_scan_kept_part_begins_the_request_and_waiting_bytes_never_end_it) {
  stream in = {.n = 0};
  image(&in);
  segment(&in, 0xC4, 6, 4); /* a second scan, with its table */
  segment(&in, 0xDA, 8, 5);
  put(&in, "\xAA\xFF\x00\xBB\xCC", 5);
  segment(&in, 0xC4, 4, 9); /* a table and a comment after the last scan */
  segment(&in, 0xFE, 3, 'z');
  marker(&in, 0xD9);
  stream want = normalise(&in, 0, NULL); /* the request, less the 7 reserved */
  int waited = 0, kept_some = 0;
  for (size_t cut = 0; cut <= in.n; cut++) {
    jpg_scan sc;
    jpg_scan_init(&sc, 7, 1);
    jpg_scan_feed(&sc, in.b, cut);
    size_t kept = jpg_scan_kept(&sc);
    ck_assert_uint_ge(kept, 7);
    ck_assert_uint_le(kept, sc.out_len);
    ck_assert_uint_le(kept - 7, want.n);
    if (kept > 7)
      ck_assert_int_eq(memcmp(sc.out + 7, want.b, kept - 7), 0);
    kept_some += kept > 7 && kept < sc.out_len;
    if (cut < in.n && in.b[cut] != 0xFF && !jpg_scan_may_end(&sc)) {
      jpg_scan_feed(&sc, in.b + cut, 1);
      ck_assert(!jpg_scan_done(&sc));
      waited++;
    }
    jpg_scan_free(&sc);
  }
  ck_assert_int_gt(waited, 100);
  ck_assert_int_gt(kept_some, 0); /* some cuts hold output the request may cut */
}
END_TEST

START_TEST(test_scan_without_output_still_finds_eoi) {
  stream in = {.n = 0};
  image(&in);
  marker(&in, 0xD9);
  jpg_scan sc;
  jpg_scan_init(&sc, 0, 0);
  ck_assert_uint_eq(jpg_scan_feed(&sc, in.b, in.n), in.n);
  ck_assert(jpg_scan_done(&sc));
  jpg_scan_free(&sc);
}
END_TEST

/* ---- frame header ------------------------------------------------------------- */

START_TEST(test_probe_reads_frame_and_restart_interval) {
  stream in = {.n = 0};
  marker(&in, 0xD8);
  segment(&in, 0xE0, 14, 'J');
  uint8_t dri[2] = {0, 20};
  marker(&in, 0xDD);
  put(&in, "\x00\x04", 2);
  put(&in, dri, 2);
  sof(&in, 0xC2, 333, 177, 3, 2, 1);
  segment(&in, 0xDA, 10, 3);
  jpg_probe p;
  ck_assert_int_eq(jpg_probe_header(in.b, in.n, &p), 0);
  ck_assert_int_eq(p.sof, 0xC2);
  ck_assert_uint_eq(p.width, 333);
  ck_assert_uint_eq(p.height, 177);
  ck_assert_int_eq(p.ncomp, 3);
  ck_assert_int_eq(p.h[0], 2);
  ck_assert_int_eq(p.v[0], 1);
  ck_assert_int_eq(p.h[1], 1);
  ck_assert_uint_eq(p.restart, 20);
  ck_assert_int_eq(jpg_subsamp(p.ncomp, p.h, p.v), ST_SUBSAMP_422);
  ck_assert(!p.dqt && !p.dht);                          /* abbreviated: no tables of its own */
  ck_assert_int_eq(jpg_probe_header(in.b, 20, &p), -1); /* no frame in the first bytes */
  ck_assert_int_eq(p.sof, -1);
  /* tables before the first scan count; after it they do not */
  stream full = {.n = 0};
  image(&full);
  ck_assert_int_eq(jpg_probe_header(full.b, full.n, &p), 0);
  ck_assert(p.dqt && p.dht);
  stream late = {.n = 0};
  marker(&late, 0xD8);
  sof(&late, 0xC0, 64, 32, 3, 2, 2);
  segment(&late, 0xDA, 10, 3);
  put(&late, entropy, sizeof entropy);
  segment(&late, 0xDB, 65, 1);
  ck_assert_int_eq(jpg_probe_header(late.b, late.n, &p), 0);
  ck_assert(!p.dqt && !p.dht);
}
END_TEST

START_TEST(test_subsampling_and_class_names) {
  int h[4] = {2, 1, 1}, v[4] = {2, 1, 1};
  ck_assert_int_eq(jpg_subsamp(3, h, v), ST_SUBSAMP_420);
  ck_assert_int_eq(jpg_subsamp(1, h, v), ST_SUBSAMP_GRAY);
  v[0] = 1;
  ck_assert_int_eq(jpg_subsamp(3, h, v), ST_SUBSAMP_422);
  h[0] = 1;
  ck_assert_int_eq(jpg_subsamp(3, h, v), ST_SUBSAMP_444);
  h[0] = 3;
  ck_assert_int_eq(jpg_subsamp(3, h, v), ST_SUBSAMP_OTHER);
  ck_assert_str_eq(jpg_class_name(0xC0, ST_SUBSAMP_420), "baseline 4:2:0");
  ck_assert_str_eq(jpg_class_name(0xC2, ST_SUBSAMP_GRAY), "progressive gray");
  ck_assert_str_eq(jpg_class_name(0xC9, ST_SUBSAMP_444), "arithmetic 4:4:4");
  ck_assert_str_eq(jpg_class_name(-1, 99), "hierarchical ?");
  /* the trace's type key is the pointer: one class, one pointer */
  ck_assert_ptr_eq(jpg_class_name(0xC0, ST_SUBSAMP_420), jpg_class_name(0xC0, ST_SUBSAMP_420));
}
END_TEST

/* ---- request header and response extension ----------------------------------- */

START_TEST(test_request_header_round_trip) {
  jpg_params p = {.api = ST_API_JPEG_DECODE,
                  .out_color_space = 2,
                  .jpeg_color_space = 3,
                  .scale_num = 3,
                  .scale_denom = 8,
                  .dct_method = 2,
                  .options = JPG_OPT_QUANTIZE | JPG_OPT_FANCY_UPSAMPLING,
                  .dither_mode = 1,
                  .desired_colors = 16,
                  .output_gamma = 1.5,
                  .tables_len = 4,
                  .cmap_colors = 2,
                  .cmap_components = 3};
  uint8_t cmap[6] = {1, 2, 3, 4, 5, 6};
  size_t hl = jpg_req_header_len(&p);
  ck_assert_uint_eq(hl, JPG_REQ_FIXED + 6);
  uint8_t blob[200];
  jpg_req_write_header(blob, &p, cmap);
  memcpy(blob + hl, "TTTTJPEG", 8);
  jpg_params q;
  const uint8_t *m, *jpeg;
  size_t jl;
  ck_assert_int_eq(jpg_req_parse(blob, hl + 8, &q, &m, &jpeg, &jl), 0);
  ck_assert_int_eq(memcmp(&p, &q, sizeof p), 0);
  ck_assert_int_eq(memcmp(m, cmap, 6), 0);
  ck_assert_ptr_eq(jpeg, blob + hl);
  ck_assert_uint_eq(jl, 8);
  ck_assert_int_eq(jpg_req_parse(blob, hl + 3, &q, NULL, NULL, NULL), -1); /* tables past end */
  blob[0] = 'X';
  ck_assert_int_eq(jpg_req_parse(blob, hl + 8, &q, NULL, NULL, NULL), -1);
}
END_TEST

START_TEST(test_fingerprint_depends_on_api_and_every_byte) {
  uint8_t blob[300];
  for (size_t i = 0; i < sizeof blob; i++)
    blob[i] = (uint8_t)i;
  uint8_t a[16], b[16], c[16];
  jpg_req_fingerprint(blob, sizeof blob, ST_API_JPEG_DECODE, a);
  jpg_req_fingerprint(blob, sizeof blob, ST_API_TJ_DECODE, b);
  ck_assert_int_ne(memcmp(a, b, 16), 0);
  for (size_t i = 0; i < sizeof blob; i += 37) {
    blob[i] ^= 1;
    jpg_req_fingerprint(blob, sizeof blob, ST_API_JPEG_DECODE, c);
    ck_assert_int_ne(memcmp(a, c, 16), 0);
    blob[i] ^= 1;
  }
  jpg_req_fingerprint(blob, sizeof blob, ST_API_JPEG_DECODE, c);
  ck_assert_int_eq(memcmp(a, c, 16), 0);
}
END_TEST

/* A request's fingerprint is XXH3-128 of its bytes, bound to the API,
 * whichever vector unit computes it: a recording made on one machine
 * replays on another. */
START_TEST(test_fingerprint_is_xxh3_128_of_the_request) {
  size_t n = 100000;
  uint8_t *blob = malloc(n);
  ck_assert_ptr_nonnull(blob);
  for (size_t i = 0; i < n; i++)
    blob[i] = (uint8_t)(i * 131 + (i >> 9));
  size_t lens[] = {0, 17, 240, 241, 1000, n};
  for (size_t k = 0; k < sizeof lens / sizeof *lens; k++) {
    uint8_t got[16], want[16];
    jpg_req_fingerprint(blob, lens[k], ST_API_JPEG_DECODE, got);
    XXH128_hash_t h = XXH3_128bits(blob, lens[k]);
    memcpy(want, &h.low64, 8);
    memcpy(want + 8, &h.high64, 8);
    shim_fp_bind(want, ST_API_JPEG_DECODE);
    ck_assert_msg(memcmp(got, want, 16) == 0, "%zu bytes", lens[k]);
  }
  free(blob);
}
END_TEST

START_TEST(test_response_extension_round_trip_and_damage) {
  uint8_t cmap[2 * 3] = {9, 8, 7, 6, 5, 4};
  jpg_msg msgs[2] = {{.row = 7, .phase = JPG_PHASE_ROWS, .level = -1, .code = 123, .pos = 99},
                     {.row = 0, .phase = JPG_PHASE_FINISH, .level = 1, .code = 5}};
  strcpy((char *)msgs[0].parm, "parameter");
  ck_assert_uint_eq(jpg_ext_len(0, 0, 0), 0);
  size_t n = jpg_ext_len(2, 3, 2);
  ck_assert_uint_eq(n, 16 + 6 + 2 * JPG_MSG_BYTES);
  uint8_t *e = malloc(n);
  jpg_ext_write(e, 2, 3, cmap, msgs, 2);
  jpg_ext x;
  ck_assert_int_eq(jpg_ext_read(e, n, &x), 0);
  ck_assert_uint_eq(x.ncolors, 2);
  ck_assert_uint_eq(x.ncomp, 3);
  ck_assert_int_eq(memcmp(x.cmap, cmap, 6), 0);
  ck_assert_uint_eq(x.nmsgs, 2);
  jpg_msg m;
  jpg_ext_msg(&x, 0, &m);
  ck_assert_uint_eq(m.row, 7);
  ck_assert_int_eq(m.level, -1);
  ck_assert_int_eq(m.code, 123);
  ck_assert_uint_eq(m.pos, 99);
  ck_assert_str_eq((char *)m.parm, "parameter");
  jpg_ext_msg(&x, 1, &m);
  ck_assert_int_eq(m.phase, JPG_PHASE_FINISH);
  ck_assert_int_eq(jpg_ext_read(e, n - 1, &x), -1);
  e[12] = 200; /* more messages than bytes */
  ck_assert_int_eq(jpg_ext_read(e, n, &x), -1);
  free(e);
}
END_TEST

/* Delivering to memory copies exactly what memcpy would, at every
 * alignment of source and destination and every length, and writes
 * nothing outside the destination. */
START_TEST(test_copy_to_memory_is_memcpy) {
  enum { MAX = 300, PAD = 48 };
  static uint8_t src[MAX + 64], dst[MAX + 64 + 2 * PAD], want[MAX + 64 + 2 * PAD];
  for (size_t i = 0; i < sizeof src; i++)
    src[i] = (uint8_t)(i * 131 + 7);
  for (size_t so = 0; so < 16; so++)
    for (size_t dof = 0; dof < 16; dof++)
      for (size_t len = 0; len <= MAX; len += len < 80 ? 1 : 37) {
        memset(dst, 0xA5, sizeof dst);
        memset(want, 0xA5, sizeof want);
        memcpy(want + PAD + dof, src + so, len);
        place_copy_to_memory(dst + PAD + dof, src + so, len);
        place_fence();
        ck_assert_msg(!memcmp(dst, want, sizeof dst), "src+%zu dst+%zu len %zu", so, dof, len);
      }
}
END_TEST

/* The probe reads the sampled lines and counts no more cold lines than it
 * probed (how many are cold is the machine's timing); with no calibrated
 * clock it measures nothing. */
START_TEST(test_probe_counts_lines) {
  static uint8_t buf[4096];
  uint64_t saved = shim_tsc_mult;
  place_sampler s, same;
  shim_tsc_mult = 0; /* no calibrated clock: nothing is measured */
  place_sampler_init(&s, 7);
  place_sample(&s, buf, sizeof buf);
  ck_assert_uint_eq(s.probed, 0);
  ck_assert_uint_eq(s.cold, 0);
  shim_tsc_mult = 1ull << 32; /* one tick a ns */
  place_sampler_init(&s, 7);
  place_sampler_init(&same, 7);
  size_t off[64], want = 0;
  for (size_t len = 0; len <= sizeof buf; len += 97) {
    place_sample(&s, buf, len);
    want += place_sample_offsets(&same, len, off, 64);
    ck_assert_uint_eq(s.probed, want);
    ck_assert_uint_le(s.cold, s.probed);
  }
  shim_tsc_mult = saved;
}
END_TEST

/* The sample lands on one byte in PLACE_SAMPLE_BYTES, inside the region,
 * and equally on rows of every phase: libjpeg-turbo leaves rows of one
 * alignment in memory, so a sample that lined up with a row pattern would
 * report 0% or 100% where the truth is 50%. */
START_TEST(test_sample_does_not_line_up_with_rows) {
  static const size_t row_len[] = {480, 512, 1024, 2048, 4096, 1000, 64};
  for (size_t k = 0; k < sizeof row_len / sizeof *row_len; k++) {
    place_sampler s;
    place_sampler_init(&s, 12345 + k);
    size_t rows = 8000000 / row_len[k], total = 0, phase[4] = {0};
    for (size_t r = 0; r < rows; r++) {
      size_t off[64];
      size_t n = place_sample_offsets(&s, row_len[k], off, 64);
      ck_assert_uint_le(n, 64);
      for (size_t i = 0; i < n; i++) {
        ck_assert_uint_lt(off[i], row_len[k]);
        ck_assert(i == 0 || off[i] >= off[i - 1] + 64);
      }
      total += n;
      phase[r % 4] += n;
    }
    double want = (double)rows * row_len[k] / PLACE_SAMPLE_BYTES;
    ck_assert_msg(total > 0.95 * want && total < 1.05 * want, "rows of %zu: %zu probes, want ~%.0f",
                  row_len[k], total, want);
    for (int p = 0; p < 4; p++)
      ck_assert_msg(phase[p] > 0.22 * total && phase[p] < 0.28 * total,
                    "rows of %zu: %zu of %zu probes on rows %d mod 4", row_len[k], phase[p], total, p);
  }
}
END_TEST

/* ---- responses kept as digests (jpeg_regen.c) -------------------------------- */

/* A real 4:2:0 JPEG of a w x h gradient, encoded with libjpeg. */
static unsigned char *encode(int w, int h, unsigned long *len) {
  struct jpeg_compress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char *out = NULL;
  jpeg_mem_dest(&c, &out, len);
  c.image_width = (JDIMENSION)w;
  c.image_height = (JDIMENSION)h;
  c.input_components = 3;
  c.in_color_space = JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 80, TRUE);
  jpeg_start_compress(&c, TRUE);
  uint8_t row[3 * 256];
  while (c.next_scanline < c.image_height) {
    for (int x = 0; x < w; x++) {
      row[3 * x] = (uint8_t)(x * 7 + c.next_scanline);
      row[3 * x + 1] = (uint8_t)(c.next_scanline * 5);
      row[3 * x + 2] = (uint8_t)((x ^ c.next_scanline) * 3);
    }
    JSAMPROW r = row;
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  return out;
}

/* Decode jpeg as a program would, with p's output parameters: the rows
 * (malloc'ed, *n bytes) and their digest. */
static uint8_t *decode_rows(const unsigned char *jpeg, unsigned long len, const jpg_params *p,
                            size_t *n, jpg_digest *g) {
  struct jpeg_decompress_struct d;
  struct jpeg_error_mgr err;
  d.err = jpeg_std_error(&err);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg, len);
  ck_assert_int_eq(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
  d.out_color_space = (J_COLOR_SPACE)p->out_color_space;
  d.scale_num = p->scale_num;
  d.scale_denom = p->scale_denom;
  d.dct_method = (J_DCT_METHOD)p->dct_method;
  d.do_fancy_upsampling = (p->options & JPG_OPT_FANCY_UPSAMPLING) != 0;
  jpeg_start_decompress(&d);
  size_t rb = (size_t)d.output_width * (size_t)d.output_components;
  *n = rb * d.output_height;
  uint8_t *rows = malloc(*n);
  *g = (jpg_digest){(uint32_t)rb, d.output_height, 0};
  while (d.output_scanline < d.output_height) { /* two rows at a time, as a program may */
    JSAMPROW r[2] = {rows + d.output_scanline * rb, rows + (d.output_scanline + 1) * rb};
    jpeg_read_scanlines(&d, r, d.output_height - d.output_scanline > 1 ? 2 : 1);
  }
  for (uint32_t i = 0; i < g->rows; i++)
    g->digest = jpg_digest_row(g->digest, rows + i * rb, rb);
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return rows;
}

/* A request blob for jpeg with parameters p. */
static uint8_t *request(const jpg_params *p, const unsigned char *jpeg, unsigned long len,
                        size_t *n) {
  size_t hl = jpg_req_header_len(p);
  uint8_t *b = malloc(hl + len);
  jpg_req_write_header(b, p, NULL);
  memcpy(b + hl, jpeg, len);
  *n = hl + len;
  return b;
}

/* Raw data output: the planes jpeg_read_raw_data writes, their layout,
 * and a digest of them in call order that the request rebuilds. */
START_TEST(test_raw_planes_laid_out_and_rebuilt) {
  unsigned long jl;
  unsigned char *jpeg = encode(120, 70, &jl); /* 4:2:0 */
  jpg_params p = {.api = ST_API_JPEG_DECODE,
                  .entry = JPG_ENTRY_LIBJPEG,
                  .out_color_space = JCS_YCbCr,
                  .jpeg_color_space = JCS_YCbCr,
                  .scale_num = 1,
                  .scale_denom = 1,
                  .dct_method = JDCT_ISLOW,
                  .options = JPG_OPT_RAW_DATA,
                  .output_gamma = 1.0};
  struct jpeg_decompress_struct d;
  struct jpeg_error_mgr err;
  d.err = jpeg_std_error(&err);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpeg, jl);
  ck_assert_int_eq(jpeg_read_header(&d, TRUE), JPEG_HEADER_OK);
  d.raw_data_out = TRUE;
  d.do_fancy_upsampling = FALSE;
  jpeg_start_decompress(&d);
  jpg_raw_layout L;
  ck_assert_int_eq(jpg_raw_layout_of(&d, &L), 0);
  ck_assert_int_eq(L.n, 3);
  ck_assert_uint_eq(L.lines, 16);
  ck_assert_uint_eq(L.imcu_rows, 5); /* 70 lines */
  ck_assert_uint_eq(L.row_bytes[0], 120);
  ck_assert_uint_eq(L.rows[0], 72); /* 9 block rows */
  ck_assert_uint_eq(L.step[0], 16);
  ck_assert_uint_eq(L.row_bytes[1], 64); /* 60 samples: 8 blocks */
  ck_assert_uint_eq(L.rows[2], 40);      /* 35 rows: 5 block rows */
  ck_assert_uint_eq(L.step[2], 8);
  ck_assert_uint_eq(L.off[1], 120 * 72);
  ck_assert_uint_eq(L.bytes, 120 * 72 + 2 * 64 * 40);
  /* the last iMCU row writes one block row of luma (dummy rows left alone) */
  ck_assert_uint_eq(jpg_raw_rows(&L, 0, 4), 8);
  ck_assert_uint_eq(jpg_raw_rows(&L, 1, 4), 8);
  ck_assert_uint_eq(jpg_raw_rows(&L, 0, 5), 0);
  /* decoded as a program does, into rows of 16 and 8 per call */
  uint8_t *planes = calloc(L.bytes, 1), junk[120];
  uint64_t dg = 0;
  for (uint32_t i = 0; d.output_scanline < d.output_height; i++) {
    JSAMPROW rows[3][16];
    JSAMPARRAY arr[3];
    for (int c = 0; c < 3; c++) {
      for (uint32_t r = 0; r < L.step[c]; r++)
        rows[c][r] = r < jpg_raw_rows(&L, c, i) ? planes + jpg_raw_at(&L, c, i, r) : junk;
      arr[c] = rows[c];
    }
    ck_assert_uint_eq(jpeg_read_raw_data(&d, arr, 16), 16);
    for (int c = 0; c < 3; c++)
      for (uint32_t r = 0; r < jpg_raw_rows(&L, c, i); r++)
        dg = jpg_digest_row(dg, rows[c][r], L.row_bytes[c]);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  size_t rl;
  uint8_t *req = request(&p, jpeg, jl, &rl);
  jpg_digest g = {L.row_bytes[0], L.rows[0], dg};
  uint8_t dig[JPG_DIG_FIXED], *out;
  char why[200] = "";
  jpg_dig_write(dig, &g);
  ck_assert_int_eq(jpg_regenerate(req, rl, dig, sizeof dig, L.bytes, &out, why, sizeof why), 0);
  ck_assert_int_eq(memcmp(out, planes, L.bytes), 0);
  free(out);
  /* other planes, another length: refused, saying why */
  g.digest ^= 1;
  jpg_dig_write(dig, &g);
  ck_assert_int_eq(jpg_regenerate(req, rl, dig, sizeof dig, L.bytes, &out, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "planes decoded here"), "%s", why);
  g.digest ^= 1;
  jpg_dig_write(dig, &g);
  ck_assert_int_eq(jpg_regenerate(req, rl, dig, sizeof dig, L.bytes + 1, &out, why, sizeof why),
                   -1);
  ck_assert_ptr_null(out);
  ck_assert_msg(strstr(why, "planes"), "%s", why);
  free(req);
  free(planes);
  free(jpeg);
}
END_TEST

START_TEST(test_digest_rebuilds_the_rows_and_checks_them) {
  unsigned long jl;
  unsigned char *jpeg = encode(120, 70, &jl);
  jpg_params p = {.api = ST_API_JPEG_DECODE,
                  .entry = JPG_ENTRY_LIBJPEG,
                  .out_color_space = JCS_RGB,
                  .jpeg_color_space = JCS_YCbCr,
                  .scale_num = 1,
                  .scale_denom = 2,
                  .dct_method = JDCT_ISLOW,
                  .options = JPG_OPT_FANCY_UPSAMPLING,
                  .dither_mode = JDITHER_FS,
                  .desired_colors = 256,
                  .output_gamma = 1.0};
  size_t rl, pix;
  uint8_t *req = request(&p, jpeg, jl, &rl);
  jpg_digest g;
  uint8_t *rows = decode_rows(jpeg, jl, &p, &pix, &g);
  ck_assert_uint_eq(g.rows, 35); /* scaled by 1/2 */
  ck_assert_uint_eq(g.row_bytes, 60 * 3);
  /* the digest, then an extension with one message */
  jpg_msg m = {.row = 3, .phase = JPG_PHASE_ROWS, .level = -1, .code = 42};
  size_t el = jpg_ext_len(0, 0, 1);
  uint8_t *dig = malloc(JPG_DIG_FIXED + el);
  jpg_dig_write(dig, &g);
  jpg_ext_write(dig + JPG_DIG_FIXED, 0, 0, NULL, &m, 1);
  uint8_t *out;
  char why[200] = "";
  ck_assert_int_eq(
      jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), 0);
  ck_assert_int_eq(memcmp(out, rows, pix), 0);
  ck_assert_int_eq(memcmp(out + pix, dig + JPG_DIG_FIXED, el), 0);
  free(out);

  /* rows that are not the recorded ones */
  jpg_digest bad = g;
  bad.digest ^= 1;
  jpg_dig_write(dig, &bad);
  ck_assert_int_eq(
      jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  ck_assert_ptr_null(out);
  ck_assert_msg(strstr(why, "differ"), "%s", why);
  /* other output parameters give other rows: the request decides them */
  jpg_params q = p;
  q.dct_method = JDCT_IFAST;
  size_t rl2;
  uint8_t *req2 = request(&q, jpeg, jl, &rl2);
  jpg_dig_write(dig, &g);
  ck_assert_int_eq(
      jpg_regenerate(req2, rl2, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "differ"), "%s", why);
  /* a length that is not the digest's rows' */
  ck_assert_int_eq(jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix, &out, why, sizeof why),
                   -1);
  ck_assert_msg(strstr(why, "length"), "%s", why);
  /* rows of another geometry */
  bad = g;
  bad.rows++;
  jpg_dig_write(dig, &bad);
  ck_assert_int_eq(jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix + g.row_bytes + el, &out,
                                  why, sizeof why),
                   -1);
  ck_assert_msg(strstr(why, "decodes it to 60x35"), "%s", why);
  /* a response no decode is rebuilt for */
  ck_assert_int_eq(
      jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, (2ull << 30) + el, &out, why, sizeof why),
      -1);
  ck_assert_msg(strstr(why, "larger than standin rebuilds"), "%s", why);
  /* damaged blobs, and parameters no digest is kept for */
  jpg_dig_write(dig, &g);
  dig[0] = 'X';
  ck_assert_int_eq(
      jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "digest is damaged"), "%s", why);
  jpg_dig_write(dig, &g);
  ck_assert_int_eq(
      jpg_regenerate(req, 20, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  ck_assert_msg(strstr(why, "request is damaged"), "%s", why);
  q = p;
  q.options |= JPG_OPT_QUANTIZE;
  free(req2);
  req2 = request(&q, jpeg, jl, &rl2);
  ck_assert_int_eq(
      jpg_regenerate(req2, rl2, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  /* JPEG data that is not an image: an error, not a crash */
  size_t hl = jpg_req_header_len(&p);
  memset(req + hl + 2, 0xFF, 40);
  ck_assert_int_eq(
      jpg_regenerate(req, rl, dig, JPG_DIG_FIXED + el, pix + el, &out, why, sizeof why), -1);
  ck_assert_ptr_null(out);
  free(req);
  free(req2);
  free(dig);
  free(rows);
  free(jpeg);
}
END_TEST

/* A decode belongs to the thread that made its image, even when another
 * thread spent longer in its header and finish calls (preempted there
 * under load: t231). */
static uint32_t work_me;
static uint32_t work_thread(void) {
  return work_me;
}

static void work_call(jpg_obj *o, uint32_t thread, int phase, int log_phase, uint64_t ns) {
  work_me = thread;
  o->phase = phase;
  o->log_phase = log_phase;
  o->t_in += 1000;
  jpg_busy(o, ns);
}

/* The time of a decode's source callbacks from a sample of them: one
 * call an interrupt held among a thousand, and empty calls timed beside
 * them with an outlier of their own, do not move it; every call timed is
 * counted whole. */
START_TEST(test_source_time_from_a_sample_ignores_an_interrupted_call) {
  jpg_obj o;
  memset(&o, 0, sizeof o);
  o.src_calls = 64000;
  o.src_timed = 1000; /* 125 in each group, 20 ns each */
  for (int g = 0; g < SRC_GROUPS; g++)
    o.src_group_ns[g] = 125 * 20;
  o.src_group_ns[3] += 20000; /* one held for 20 us */
  for (int g = 0; g < SRC_GROUPS; g++)
    o.src_ns += o.src_group_ns[g];
  o.src_zeros = SRC_ZEROS;
  for (int i = 0; i < SRC_ZEROS; i++)
    o.src_zero[i] = i == 7 || i == 40 ? 5000 : 10;
  ck_assert_uint_eq(jpg_source_ns(&o), (20 - 10) * 64000);
  /* the mean would have made it 1.3 ms more */
  o.src_calls = o.src_timed = 10; /* every one timed: their sum, less the empty calls */
  o.src_ns = 10 * 1000;
  ck_assert_uint_eq(jpg_source_ns(&o), 10 * (1000 - 10));
  o.src_zeros = 0;
  ck_assert_uint_eq(jpg_source_ns(&o), 10 * 1000);
  o.src_timed = 0;
  ck_assert_uint_eq(jpg_source_ns(&o), 0);
}
END_TEST

START_TEST(test_decode_is_the_thread_that_made_the_image) {
  jpg_set_callbacks(&(jpg_callbacks){.thread = work_thread});
  jpg_obj *o = calloc(1, sizeof *o);
  ck_assert_ptr_nonnull(o);
  work_call(o, 0, JPG_HEADER, 0, 9000000);                 /* main: a long header */
  work_call(o, 1, JPG_STARTED, JPG_PHASE_START, 100000);   /* worker: start */
  work_call(o, 1, JPG_STARTED, JPG_PHASE_ROWS, 4000000);   /* worker: the rows */
  work_call(o, 0, JPG_STARTED, JPG_PHASE_FINISH, 5000000); /* main: a long finish */
  ck_assert_uint_eq(o->busy_ns, 18100000);
  const jpg_work *w = jpg_main_work(o);
  ck_assert_ptr_nonnull(w);
  ck_assert_uint_eq(w->thread, 1);
  ck_assert_uint_eq(w->ns, 4100000);
  ck_assert_uint_eq(w->first_ns, 2000);

  /* rows on two threads: the one with more time in them */
  memset(o, 0, sizeof *o);
  work_call(o, 0, JPG_STARTED, JPG_PHASE_START, 3000000);
  work_call(o, 2, JPG_STARTED, JPG_PHASE_ROWS, 2000000);
  work_call(o, 2, JPG_STARTED, JPG_PHASE_FINISH, 9000000);
  ck_assert_uint_eq(jpg_main_work(o)->thread, 0);

  /* no image made (the header failed): all calls count */
  memset(o, 0, sizeof *o);
  work_call(o, 0, JPG_HEADER, 0, 1000);
  work_call(o, 3, JPG_HEADER, 0, 5000);
  ck_assert_uint_eq(jpg_main_work(o)->thread, 3);
  free(o);
  jpg_set_callbacks(&(jpg_callbacks){0});
}
END_TEST

int main(void) {
  Suite *s = suite_create("jpeg");
  TCase *scan = tcase_create("scan"), *req = tcase_create("request");
  tcase_add_test(scan, test_scan_keeps_decoding_segments_and_drops_the_rest);
  tcase_add_test(scan, test_scan_stops_after_eoi);
  tcase_add_test(scan, test_scan_any_split_gives_the_same_result);
  tcase_add_test(scan, test_scan_request_does_not_depend_on_how_far_the_end_was_read);
  tcase_add_test(scan, test_scan_keeps_every_scan_and_drops_stray_bytes);
  tcase_add_test(scan, test_scan_tables_only_datastream);
  tcase_add_test(scan, test_scan_truncated_segment_is_left_out);
  tcase_add_test(scan, test_scan_without_output_still_finds_eoi);
  tcase_add_test(scan, test_scan_stops_at_a_marker_libjpeg_refuses);
  tcase_add_test(scan, test_scan_restart_marker_without_interval_ends_the_data);
  tcase_add_test(scan, test_scan_first_end_is_where_the_first_scan_data_ended);
  tcase_add_test(scan, test_scan_kept_part_begins_the_request_and_waiting_bytes_never_end_it);
  tcase_add_test(scan, test_probe_reads_frame_and_restart_interval);
  tcase_add_test(req, test_subsampling_and_class_names);
  tcase_add_test(req, test_request_header_round_trip);
  tcase_add_test(req, test_fingerprint_depends_on_api_and_every_byte);
  tcase_add_test(req, test_fingerprint_is_xxh3_128_of_the_request);
  tcase_add_test(req, test_response_extension_round_trip_and_damage);
  tcase_add_test(req, test_copy_to_memory_is_memcpy);
  tcase_add_test(req, test_probe_counts_lines);
  tcase_add_test(req, test_sample_does_not_line_up_with_rows);
  tcase_add_test(req, test_digest_rebuilds_the_rows_and_checks_them);
  tcase_add_test(req, test_raw_planes_laid_out_and_rebuilt);
  tcase_add_test(req, test_decode_is_the_thread_that_made_the_image);
  tcase_add_test(req, test_source_time_from_a_sample_ignores_an_interrupted_call);
  suite_add_tcase(s, scan);
  suite_add_tcase(s, req);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

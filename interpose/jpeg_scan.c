/* jpeg_scan.c — streaming marker scanner and frame-header probe. */
#include "jpeg_scan.h"
#include "shim_alloc.h"

#include <stdlib.h>
#include <string.h>

enum {
  S_MARK,    /* between segments: expect 0xFF, stray bytes are dropped */
  S_MARK_FF, /* saw 0xFF between segments */
  S_LEN1,    /* first byte of a segment length */
  S_LEN2,    /* second byte */
  S_SEG,     /* segment payload */
  S_ENT,     /* entropy-coded data */
  S_ENT_FF,  /* saw 0xFF in entropy-coded data */
  S_DONE     /* EOI consumed */
};

enum { M_SOI = 0xD8, M_EOI = 0xD9, M_SOS = 0xDA, M_TEM = 0x01 };

/* Segments that change what the decoder produces. APP0 (JFIF) and APP14
 * (Adobe) decide libjpeg's guess of the colour space; the other APPn, COM
 * and the reserved markers do not. */
static int kept(int m) {
  if (m >= 0xC0 && m <= 0xCF)
    return m != 0xC8; /* SOFn, DHT (C4), DAC (CC); C8 is reserved */
  return m == 0xDA || m == 0xDB || m == 0xDC || m == 0xDD || m == 0xE0 || m == 0xEE;
}

void jpg_scan_init(jpg_scan *s, size_t reserve, int want_output) {
  memset(s, 0, sizeof *s);
  s->st = S_MARK;
  s->reserve = reserve;
  s->out_len = reserve;
  s->entropy_end = s->complete_end = reserve;
  if (!want_output)
    s->oom = -1; /* -1: no output wanted (not an error) */
}

static void put(jpg_scan *s, const uint8_t *p, size_t n) {
  if (s->oom || n == 0)
    return;
  if (s->out_len + n + 2 > s->out_cap) {
    size_t cap = s->out_cap ? s->out_cap : s->reserve + 65536;
    while (cap < s->out_len + n + 2)
      cap *= 2;
    uint8_t *o = shim_realloc(s->out, cap);
    if (!o) {
      s->oom = 1;
      return;
    }
    s->out = o;
    s->out_cap = cap;
  }
  if (s->out_len + n > s->out_ready)
    shim_populate_ahead(s->out, &s->out_ready, s->out_len + n, s->out_cap);
  memcpy(s->out + s->out_len, p, n);
  s->out_len += n;
}

static void put2(jpg_scan *s, int a, int b) {
  uint8_t two[2] = {(uint8_t)a, (uint8_t)b};
  put(s, two, 2);
}

static void segment_done(jpg_scan *s) {
  s->complete_end = s->out_len;
  if (s->marker == 0xDD)
    s->restart = s->dri & 0xFFFF;
  if (s->marker == M_SOS) {
    s->seen_sos = 1;
    s->st = S_ENT;
  } else {
    s->st = S_MARK;
  }
}

/* Whether libjpeg's marker reader (jdmarker.c, read_markers) stops at
 * marker m with an error: an unknown or reserved code (RESn, JPGn, DHP,
 * EXP), a frame type it does not decode, a second frame header, a second
 * SOI. */
static int refused(const jpg_scan *s, int m) {
  switch (m) {
  case 0x01: /* TEM */
  case 0xC4:
  case 0xCC: /* DHT, DAC */
  case 0xD9:
  case 0xDA:
  case 0xDB: /* EOI, SOS, DQT */
  case 0xDC:
  case 0xDD:
  case 0xFE: /* DNL, DRI, COM */ return 0;
  case 0xC0:
  case 0xC1:
  case 0xC2:
  case 0xC9:
  case 0xCA: /* the SOFn it decodes */ return s->seen_sof;
  case M_SOI: return s->seen_soi;
  default: return !((m >= 0xD0 && m <= 0xD7) || (m >= 0xE0 && m <= 0xEF));
  }
}

/* A marker was read (its 0xFF and code consumed). */
static void on_marker(jpg_scan *s, int m, int in_entropy) {
  if (in_entropy) {
    s->entropy_end = s->out_len;
    if (!s->first_end)
      s->first_end = s->out_len;
  }
  s->marker = m;
  if (m == M_EOI) {
    s->st = S_DONE;
    return;
  }
  if (refused(s, m)) {
    s->bad_marker = m;
    s->st = S_DONE;
    return;
  }
  if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xCC)
    s->seen_sof = 1;
  if (m == M_SOI || m == M_TEM || (m >= 0xD0 && m <= 0xD7)) {
    if (m == M_SOI) {
      s->seen_soi = 1;
      s->restart = 0; /* libjpeg's get_soi */
      put2(s, 0xFF, m);
      s->complete_end = s->out_len;
    }
    s->st = S_MARK;
    return;
  }
  s->keep = kept(m);
  if (s->keep)
    put2(s, 0xFF, m);
  s->st = S_LEN1;
}

/* Entropy-coded data: copy runs up to the next 0xFF at memory speed. */
static size_t feed_entropy(jpg_scan *s, const uint8_t *p, size_t n) {
  const uint8_t *ff = memchr(p, 0xFF, n);
  size_t run = ff ? (size_t)(ff - p) : n;
  put(s, p, run);
  if (!ff)
    return n;
  s->st = S_ENT_FF;
  return run + 1;
}

static size_t feed_segment(jpg_scan *s, const uint8_t *p, size_t n) {
  size_t k = n < s->seg_left ? n : s->seg_left;
  if (s->keep)
    put(s, p, k);
  for (size_t i = 0; s->marker == 0xDD && i < k && s->seg_len - s->seg_left + i < 2; i++)
    s->dri = (s->dri << 8) | p[i];
  s->seg_left -= (uint32_t)k;
  if (s->seg_left == 0)
    segment_done(s);
  return k;
}

/* One byte in a state that looks at single bytes. */
static void feed_byte(jpg_scan *s, int b) {
  switch (s->st) {
  case S_MARK:
    if (b == 0xFF)
      s->st = S_MARK_FF;
    break;
  case S_MARK_FF:
    if (b == 0x00)
      s->st = S_MARK;
    else if (b != 0xFF)
      on_marker(s, b, 0);
    break;
  case S_LEN1:
    s->len_hi = (uint8_t)b;
    if (s->keep)
      put(s, &s->len_hi, 1);
    s->st = S_LEN2;
    break;
  case S_LEN2: {
    uint8_t lo = (uint8_t)b;
    uint32_t len = ((uint32_t)s->len_hi << 8) | lo;
    if (s->keep)
      put(s, &lo, 1);
    s->seg_left = len >= 2 ? len - 2 : 0;
    s->seg_len = s->seg_left;
    s->dri = 0;
    if (s->seg_left == 0)
      segment_done(s);
    else
      s->st = S_SEG;
    break;
  }
  case S_ENT_FF:
    /* A restart marker in a scan without a restart interval (corrupt data)
     * ends the scan's data as any other marker does: libjpeg's decoder
     * stops there, and its marker reader takes it as a marker without
     * parameters and skips the rest of the data up to the next marker.
     * That rest is dropped like stray bytes between segments, so the
     * request is the same whether or not the program let the library read
     * past it (jpeg_finish_decompress). */
    if (b == 0x00 || (b >= 0xD0 && b <= 0xD7 && s->restart)) {
      put2(s, 0xFF, b); /* stuffed 0xFF, or a restart marker */
      s->st = S_ENT;
    } else if (b != 0xFF) { /* 0xFF 0xFF: fill byte, dropped */
      on_marker(s, b, 1);
    }
    break;
  }
}

size_t jpg_scan_feed(jpg_scan *s, const uint8_t *p, size_t n) {
  size_t i = 0;
  while (i < n && s->st != S_DONE) {
    if (s->st == S_ENT)
      i += feed_entropy(s, p + i, n - i);
    else if (s->st == S_SEG)
      i += feed_segment(s, p + i, n - i);
    else
      feed_byte(s, p[i++]);
  }
  s->consumed += i;
  return i;
}

int jpg_scan_done(const jpg_scan *s) {
  return s->st == S_DONE;
}

/* A marker is read only after a 0xFF (feed_byte's S_MARK_FF and S_ENT_FF),
 * and only a marker ends the datastream (on_marker). */
int jpg_scan_may_end(const jpg_scan *s) {
  return s->st == S_MARK_FF || s->st == S_ENT_FF || s->st == S_DONE;
}

size_t jpg_scan_kept(const jpg_scan *s) {
  if (s->st == S_ENT || s->st == S_ENT_FF)
    return s->out_len; /* an 0xFF waiting for the next byte is not in out yet */
  return s->seen_sos ? s->entropy_end : s->complete_end;
}

int jpg_scan_finish(jpg_scan *s, uint8_t **buf, size_t *len) {
  if (s->st == S_ENT || s->st == S_ENT_FF)
    s->entropy_end = s->out_len; /* the data stops inside a scan */
  size_t cut = s->seen_sos ? s->entropy_end : s->complete_end;
  if (s->oom == 0) {
    s->out_len = cut;
    put2(s, 0xFF, M_EOI);
    if (!s->out) /* nothing was ever written: still hand over a buffer */
      put(s, (const uint8_t *)"", 0);
  }
  if (s->oom || !s->out) {
    jpg_scan_free(s);
    return -1;
  }
  *buf = s->out;
  *len = s->out_len;
  s->out = NULL;
  jpg_scan_free(s);
  return 0;
}

void jpg_scan_free(jpg_scan *s) {
  shim_free(s->out);
  memset(s, 0, sizeof *s);
}

/* ---- frame header ---------------------------------------------------- */

static int is_sof(int m) {
  return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC;
}

static void read_sof(const uint8_t *q, size_t len, int m, jpg_probe *p) {
  if (len < 6)
    return;
  p->sof = m;
  p->height = ((uint32_t)q[1] << 8) | q[2];
  p->width = ((uint32_t)q[3] << 8) | q[4];
  p->ncomp = q[5];
  for (int c = 0; c < p->ncomp && c < 4 && 6 + 3 * (size_t)c + 2 < len; c++) {
    p->h[c] = q[6 + 3 * c + 1] >> 4;
    p->v[c] = q[6 + 3 * c + 1] & 15;
  }
}

int jpg_probe_header(const uint8_t *d, size_t n, jpg_probe *p) {
  memset(p, 0, sizeof *p);
  p->sof = -1;
  size_t i = 0;
  while (i + 1 < n) {
    if (d[i] != 0xFF) {
      i++;
      continue;
    }
    int m = d[i + 1];
    i += 2;
    if (m == 0xFF) {
      i--; /* fill byte: look again from the second 0xFF */
      continue;
    }
    if (m == M_SOI || m == M_TEM || (m >= 0xD0 && m <= 0xD7) || m == 0x00)
      continue;
    if (m == M_EOI || i + 2 > n)
      break;
    size_t len = ((size_t)d[i] << 8) | d[i + 1];
    if (len < 2 || i + len > n)
      break;
    if (is_sof(m))
      read_sof(d + i + 2, len - 2, m, p);
    else if (m == 0xDD && len >= 4)
      p->restart = ((uint32_t)d[i + 2] << 8) | d[i + 3];
    else if (m == 0xDB)
      p->dqt = 1;
    else if (m == 0xC4)
      p->dht = 1;
    if (m == M_SOS)
      break;
    i += len;
  }
  return p->sof >= 0 ? 0 : -1;
}

/* jpeg_req.c — JPEG request and response layouts (see jpeg_req.h). */
#include "jpeg_req.h"

#include <stdio.h>
#include <string.h>

#include "api.h"
#include "pb_internal.h" /* pbw__hash64: XXH3-64 with AVX2 when the CPU has it */
#include "shim.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

static void w32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t r32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void w64(uint8_t *p, uint64_t v) {
  w32(p, (uint32_t)v);
  w32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t r64(const uint8_t *p) {
  return (uint64_t)r32(p) | (uint64_t)r32(p + 4) << 32;
}

size_t jpg_req_header_len(const jpg_params *p) {
  return JPG_REQ_FIXED + (size_t)p->cmap_colors * p->cmap_components;
}

void jpg_req_write_header(uint8_t *d, const jpg_params *p, const uint8_t *cmap) {
  size_t hl = jpg_req_header_len(p);
  memset(d, 0, JPG_REQ_FIXED);
  memcpy(d, JPG_REQ_MAGIC, 4);
  w32(d + 4, (uint32_t)hl);
  d[8] = p->api;
  d[9] = p->entry;
  w32(d + 12, (uint32_t)p->out_color_space);
  w32(d + 16, (uint32_t)p->jpeg_color_space);
  w32(d + 20, p->scale_num);
  w32(d + 24, p->scale_denom);
  w32(d + 28, (uint32_t)p->dct_method);
  w32(d + 32, p->options);
  w32(d + 36, (uint32_t)p->dither_mode);
  w32(d + 40, (uint32_t)p->desired_colors);
  uint64_t g;
  memcpy(&g, &p->output_gamma, 8);
  w64(d + 48, g);
  w32(d + 56, p->tables_len);
  w32(d + 60, p->cmap_colors);
  w32(d + 64, p->cmap_components);
  w32(d + 68, p->image_width);
  w32(d + 72, p->image_height);
  if (hl > JPG_REQ_FIXED && cmap)
    memcpy(d + JPG_REQ_FIXED, cmap, hl - JPG_REQ_FIXED);
}

int jpg_req_parse(const uint8_t *b, size_t len, jpg_params *p, const uint8_t **cmap,
                  const uint8_t **jpeg, size_t *jpeg_len) {
  if (len < JPG_REQ_FIXED || memcmp(b, JPG_REQ_MAGIC, 4) != 0)
    return -1;
  memset(p, 0, sizeof *p);
  uint32_t hl = r32(b + 4);
  p->api = b[8];
  p->entry = b[9];
  p->out_color_space = (int32_t)r32(b + 12);
  p->jpeg_color_space = (int32_t)r32(b + 16);
  p->scale_num = r32(b + 20);
  p->scale_denom = r32(b + 24);
  p->dct_method = (int32_t)r32(b + 28);
  p->options = r32(b + 32);
  p->dither_mode = (int32_t)r32(b + 36);
  p->desired_colors = (int32_t)r32(b + 40);
  uint64_t g = r64(b + 48);
  memcpy(&p->output_gamma, &g, 8);
  p->tables_len = r32(b + 56);
  p->cmap_colors = r32(b + 60);
  p->cmap_components = r32(b + 64);
  p->image_width = r32(b + 68);
  p->image_height = r32(b + 72);
  if (p->cmap_components > 4 || p->cmap_colors > 65536 || hl != jpg_req_header_len(p) || hl > len ||
      p->tables_len > len - hl)
    return -1;
  if (cmap)
    *cmap = p->cmap_colors ? b + JPG_REQ_FIXED : NULL;
  if (jpeg)
    *jpeg = b + hl;
  if (jpeg_len)
    *jpeg_len = len - hl;
  return 0;
}

/* XXH3-128 on AVX2 where the CPU has it (pbw__hash128; the same hash as
 * the SSE2 code's, so recordings made either way match): a 380 KB
 * request took 8 us against 23 on the EPYC VM. */
void jpg_req_fingerprint(const uint8_t *blob, size_t len, int api, uint8_t fp[16]) {
  pbw__h128 h = pbw__hash128(blob, len);
  memcpy(fp, &h.lo, 8);
  memcpy(fp + 8, &h.hi, 8);
  shim_fp_bind(fp, api);
}

int jpg_subsamp(int ncomp, const int *h, const int *v) {
  if (ncomp == 1)
    return ST_SUBSAMP_GRAY;
  if (ncomp < 1 || ncomp > 4)
    return ST_SUBSAMP_OTHER;
  int same = 1;
  for (int c = 1; c < ncomp; c++)
    same &= h[c] == h[0] && v[c] == v[0];
  if (same)
    return ST_SUBSAMP_444;
  for (int c = 2; c < ncomp; c++)
    if (h[c] != h[1] || v[c] != v[1])
      return ST_SUBSAMP_OTHER;
  if (h[1] == 0 || v[1] == 0 || h[0] % h[1] || v[0] % v[1])
    return ST_SUBSAMP_OTHER;
  int rh = h[0] / h[1], rv = v[0] / v[1];
  if (rh == 2 && rv == 1)
    return ST_SUBSAMP_422;
  if (rh == 2 && rv == 2)
    return ST_SUBSAMP_420;
  if (rh == 1 && rv == 2)
    return ST_SUBSAMP_440;
  if (rh == 4 && rv == 1)
    return ST_SUBSAMP_411;
  return ST_SUBSAMP_OTHER;
}

#define CLASS_ROW(mode)                                                                            \
  {                                                                                                \
    mode " ?", mode " gray", mode " 4:4:4", mode " 4:2:2", mode " 4:2:0", mode " 4:4:0",           \
        mode " 4:1:1", mode " other"                                                               \
  }
static const char *const class_names[7][8] = {
    CLASS_ROW("baseline"),    CLASS_ROW("extended"),   CLASS_ROW("progressive"),
    CLASS_ROW("lossless"),    CLASS_ROW("arithmetic"), CLASS_ROW("arith-progressive"),
    CLASS_ROW("hierarchical")};

const char *jpg_class_name(int sof, int subsamp) {
  int mode;
  switch (sof) {
  case 0xC0: mode = 0; break;
  case 0xC1: mode = 1; break;
  case 0xC2: mode = 2; break;
  case 0xC3: mode = 3; break;
  case 0xC9: mode = 4; break;
  case 0xCA: mode = 5; break;
  default: mode = 6; break;
  }
  if (subsamp < 0 || subsamp > ST_SUBSAMP_OTHER)
    subsamp = ST_SUBSAMP_UNKNOWN;
  return class_names[mode][subsamp];
}

int jpg_features(uint64_t *f, const jpg_probe *pr, uint64_t input_bytes, uint32_t out_w,
                 uint32_t out_h, uint64_t out_bytes, uint32_t scale_num, uint32_t scale_denom) {
  memset(f, 0, ST_JPF_NFEAT * sizeof *f);
  f[ST_JPF_INPUT_BYTES] = input_bytes;
  f[ST_JPF_WIDTH] = pr->width;
  f[ST_JPF_HEIGHT] = pr->height;
  f[ST_JPF_COMPONENTS] = (uint64_t)pr->ncomp;
  f[ST_JPF_SUBSAMPLING] = (uint64_t)jpg_subsamp(pr->ncomp, pr->h, pr->v);
  f[ST_JPF_PROGRESSIVE] = pr->sof != 0xC0;
  f[ST_JPF_RESTART] = pr->restart;
  f[ST_JPF_OUT_PIXELS] = (uint64_t)out_w * out_h;
  f[ST_JPF_OUT_BYTES] = out_bytes;
  f[ST_JPF_SCALE_NUM] = scale_num;
  f[ST_JPF_SCALE_DENOM] = scale_denom;
  return ST_JPF_DROP_AT; /* the drop slots are stored only when set (rec_jpeg.c) */
}

/* ---- response extension ---------------------------------------------- */

size_t jpg_ext_len(uint32_t ncolors, uint32_t ncomp, size_t nmsgs) {
  if (ncolors == 0 && nmsgs == 0)
    return 0;
  return 16 + (size_t)ncolors * ncomp + nmsgs * JPG_MSG_BYTES;
}

void jpg_ext_write(uint8_t *d, uint32_t ncolors, uint32_t ncomp, const uint8_t *cmap,
                   const jpg_msg *msgs, size_t nmsgs) {
  memcpy(d, JPG_EXT_MAGIC, 4);
  w32(d + 4, ncolors);
  w32(d + 8, ncolors ? ncomp : 0);
  w32(d + 12, (uint32_t)nmsgs);
  d += 16;
  if (ncolors) {
    memcpy(d, cmap, (size_t)ncolors * ncomp);
    d += (size_t)ncolors * ncomp;
  }
  for (size_t i = 0; i < nmsgs; i++, d += JPG_MSG_BYTES) {
    memset(d, 0, JPG_MSG_BYTES);
    w32(d, msgs[i].row);
    d[4] = (uint8_t)msgs[i].phase;
    d[5] = (uint8_t)(msgs[i].phase >> 8);
    d[6] = (uint8_t)msgs[i].level;
    d[7] = (uint8_t)((uint16_t)msgs[i].level >> 8);
    w32(d + 8, (uint32_t)msgs[i].code);
    w32(d + 12, msgs[i].pos > UINT32_MAX ? UINT32_MAX : (uint32_t)msgs[i].pos);
    memcpy(d + 16, msgs[i].parm, 80);
  }
}

int jpg_ext_read(const uint8_t *e, size_t len, jpg_ext *x) {
  memset(x, 0, sizeof *x);
  if (len < 16 || memcmp(e, JPG_EXT_MAGIC, 4) != 0)
    return -1;
  x->ncolors = r32(e + 4);
  x->ncomp = r32(e + 8);
  x->nmsgs = r32(e + 12);
  if (x->ncolors > 65536 || x->ncomp > 4 || x->nmsgs > (len - 16) / JPG_MSG_BYTES ||
      jpg_ext_len(x->ncolors, x->ncomp, x->nmsgs) != len)
    return -1;
  x->cmap = x->ncolors ? e + 16 : NULL;
  x->msgs = e + 16 + (size_t)x->ncolors * x->ncomp;
  return 0;
}

void jpg_ext_msg(const jpg_ext *x, uint32_t i, jpg_msg *m) {
  const uint8_t *d = x->msgs + (size_t)i * JPG_MSG_BYTES;
  memset(m, 0, sizeof *m);
  m->row = r32(d);
  m->phase = (uint16_t)(d[4] | d[5] << 8);
  m->level = (int16_t)(uint16_t)(d[6] | d[7] << 8);
  m->code = (int32_t)r32(d + 8);
  m->pos = r32(d + 12);
  memcpy(m->parm, d + 16, 80);
}

/* ---- why a decode is not offloadable ----------------------------------- */

const char *jpg_no_name(unsigned reason, char *buf, size_t len) {
  static const char *const names[JPG_NO_COUNT] = {
      [JPG_NO_NONE] = "no reason recorded",
      [JPG_NO_BUFFERED] = "buffered-image mode",
      [JPG_NO_RAW] = "raw data output (jpeg_read_raw_data)",
      [JPG_NO_COEF] = "jpeg_read_coefficients",
      [JPG_NO_SKIP] = "jpeg_skip_scanlines",
      [JPG_NO_CROP] = "jpeg_crop_scanline",
      [JPG_NO_ABANDONED] = "ended before its last row",
      [JPG_NO_ERROR] = "ended by the library's error_exit",
      [JPG_NO_NOMEM] = "the recorder ran out of memory",
      [JPG_NO_TJ_ERROR] = "TurboJPEG error or warning",
      [JPG_NO_UNTRACKED] = "a source or error manager standin cannot follow",
      [JPG_NO_BAD_MARKER] = "corrupt data: an invalid marker",
      [JPG_NO_INHERITED] = "tables left by an earlier image",
      [JPG_NO_ERROR_IN_DATA] = "ended by an error partway through its data",
  };
  if (reason < JPG_NO_COUNT)
    return names[reason];
  snprintf(buf, len, "reason %u", reason);
  return buf;
}

/* ---- responses kept as digests ------------------------------------------ */

uint64_t jpg_digest_row(uint64_t d, const void *row, size_t len) {
  uint8_t h[8];
  w64(h, pbw__hash64(row, len));
  return XXH3_64bits_withSeed(h, sizeof h, d);
}

void jpg_dig_write(uint8_t *d, const jpg_digest *g) {
  memset(d, 0, JPG_DIG_FIXED);
  memcpy(d, JPG_DIG_MAGIC, 4);
  w32(d + 4, g->row_bytes);
  w32(d + 8, g->rows);
  w64(d + 16, g->digest);
}

int jpg_dig_read(const uint8_t *b, size_t len, jpg_digest *g, const uint8_t **ext,
                 size_t *ext_len) {
  memset(g, 0, sizeof *g);
  *ext = NULL;
  *ext_len = 0;
  if (len < JPG_DIG_FIXED || memcmp(b, JPG_DIG_MAGIC, 4) != 0 || r32(b + 12) != 0)
    return -1;
  g->row_bytes = r32(b + 4);
  g->rows = r32(b + 8);
  g->digest = r64(b + 16);
  if (len > JPG_DIG_FIXED) {
    *ext = b + JPG_DIG_FIXED;
    *ext_len = len - JPG_DIG_FIXED;
  }
  return 0;
}

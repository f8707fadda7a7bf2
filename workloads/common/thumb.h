/* thumb.h — decode a JPEG through the libjpeg API and box-filter it down to
 * a thumbnail while the scanlines arrive, as image services do: the full
 * image is never held in memory, and libjpeg's own DCT scaling is not used,
 * so the decoder does the whole job an accelerator would be asked to do.
 *
 * Shared by the thumbnailer (stdio source) and photo-service (memory
 * source). Header-only for the reason given in workload.h. */
#ifndef THUMB_H
#define THUMB_H

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "workload.h"

typedef struct {
  unsigned src_w, src_h;   /* decoded image */
  unsigned w, h, channels; /* thumbnail */
  int progressive;
  int restart_interval; /* in MCUs; 0: no restart markers */
  char sampling[8];     /* "444", "422", "420", "grey" or "other" */
  uint8_t *pixels;      /* w * h * channels, row-major; free() it */
} thumb;

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
} thumb_error;

static inline void thumb_error_exit(j_common_ptr cinfo) {
  thumb_error *e = (thumb_error *)cinfo->err;
  cinfo->err->format_message(cinfo, e->message);
  longjmp(e->jump, 1);
}

/* Largest size that fits in max_edge x max_edge with the same aspect ratio;
 * never enlarges. */
static inline void thumb_fit(unsigned w, unsigned h, unsigned max_edge, unsigned *tw,
                             unsigned *th) {
  if (w <= max_edge && h <= max_edge) {
    *tw = w;
    *th = h;
  } else if (w >= h) {
    *tw = max_edge;
    *th = (unsigned)(((uint64_t)h * max_edge + w / 2) / w);
  } else {
    *th = max_edge;
    *tw = (unsigned)(((uint64_t)w * max_edge + h / 2) / h);
  }
  *tw = *tw ? *tw : 1;
  *th = *th ? *th : 1;
}

static inline void thumb_describe(const struct jpeg_decompress_struct *ci, thumb *t) {
  t->progressive = ci->progressive_mode;
  t->restart_interval = (int)ci->restart_interval;
  const char *s = "other";
  if (ci->num_components == 1) {
    s = "grey";
  } else if (ci->num_components == 3 && ci->comp_info[1].h_samp_factor == 1 &&
             ci->comp_info[1].v_samp_factor == 1 && ci->comp_info[2].h_samp_factor == 1 &&
             ci->comp_info[2].v_samp_factor == 1) {
    int h = ci->comp_info[0].h_samp_factor, v = ci->comp_info[0].v_samp_factor;
    s = h == 1 && v == 1 ? "444" : h == 2 && v == 1 ? "422" : h == 2 && v == 2 ? "420" : "other";
  }
  snprintf(t->sampling, sizeof t->sampling, "%s", s);
}

/* Box filter state: every source pixel adds to exactly one thumbnail pixel
 * (column x goes to x * tw / w, row y to y * th / h), so each thumbnail
 * pixel is the mean of its source rectangle. */
typedef struct {
  unsigned *col_of; /* source column -> thumbnail column */
  uint64_t *sum;    /* one thumbnail row of channel sums */
  unsigned *n_cols; /* source columns per thumbnail column */
  unsigned rows_in; /* source rows summed into the current thumbnail row */
  JSAMPROW row;     /* one decoded scanline */
} box_filter;

static inline void box_free(box_filter *b) {
  free(b->col_of);
  free(b->sum);
  free(b->n_cols);
  free(b->row);
  free(b);
}

static inline void box_init(box_filter *b, const thumb *t) {
  b->col_of = malloc(t->src_w * sizeof *b->col_of);
  b->sum = calloc((size_t)t->w * t->channels, sizeof *b->sum);
  b->n_cols = calloc(t->w, sizeof *b->n_cols);
  b->row = malloc((size_t)t->src_w * t->channels);
  for (unsigned x = 0; x < t->src_w; x++) {
    b->col_of[x] = (unsigned)((uint64_t)x * t->w / t->src_w);
    b->n_cols[b->col_of[x]]++;
  }
}

static inline void box_emit(box_filter *b, const thumb *t, unsigned ty) {
  uint8_t *out = t->pixels + (size_t)ty * t->w * t->channels;
  for (unsigned x = 0; x < t->w; x++) {
    uint64_t n = (uint64_t)b->n_cols[x] * b->rows_in;
    for (unsigned c = 0; c < t->channels; c++) {
      uint64_t *s = &b->sum[x * t->channels + c];
      out[x * t->channels + c] = (uint8_t)((*s + n / 2) / (n ? n : 1));
      *s = 0;
    }
  }
  b->rows_in = 0;
}

static inline void box_add_row(box_filter *b, const thumb *t, const uint8_t *row) {
  for (unsigned x = 0; x < t->src_w; x++) {
    uint64_t *s = &b->sum[b->col_of[x] * t->channels];
    for (unsigned c = 0; c < t->channels; c++)
      s[c] += row[x * t->channels + c];
  }
  b->rows_in++;
}

/* Reads every scanline of a started decompression into t->pixels. */
static inline void thumb_scan(struct jpeg_decompress_struct *ci, thumb *t, box_filter *b) {
  unsigned cur = 0;
  while (ci->output_scanline < ci->output_height) {
    unsigned y = ci->output_scanline;
    jpeg_read_scanlines(ci, &b->row, 1);
    unsigned ty = (unsigned)((uint64_t)y * t->h / t->src_h);
    if (ty != cur) {
      box_emit(b, t, cur);
      cur = ty;
    }
    box_add_row(b, t, b->row);
  }
  box_emit(b, t, cur);
}

/* Decodes the JPEG in mem[0..len) (mem != NULL, through jpeg_mem_src) or in
 * file (through jpeg_stdio_src) into a thumbnail that fits max_edge
 * (at least 8). Returns 0 and fills *t (free t->pixels), or -1 with a
 * message in err; nothing to free then. */
static inline int thumb_decode(const uint8_t *mem, size_t len, FILE *file, unsigned max_edge,
                               thumb *t, char *err, size_t errcap) {
  struct jpeg_decompress_struct ci;
  thumb_error je;
  /* on the heap: locals changed after setjmp are indeterminate after longjmp */
  box_filter *b = calloc(1, sizeof *b);
  memset(t, 0, sizeof *t);
  ci.err = jpeg_std_error(&je.pub);
  je.pub.error_exit = thumb_error_exit;
  if (setjmp(je.jump)) {
    snprintf(err, errcap, "%s", je.message);
    jpeg_destroy_decompress(&ci);
    box_free(b);
    free(t->pixels);
    t->pixels = NULL;
    return -1;
  }
  jpeg_create_decompress(&ci);
  if (mem)
    jpeg_mem_src(&ci, mem, (unsigned long)len);
  else
    jpeg_stdio_src(&ci, file);
  jpeg_read_header(&ci, TRUE);
  thumb_describe(&ci, t);
  jpeg_start_decompress(&ci);
  t->src_w = ci.output_width;
  t->src_h = ci.output_height;
  t->channels = (unsigned)ci.output_components;
  thumb_fit(t->src_w, t->src_h, max_edge < 8 ? 8 : max_edge, &t->w, &t->h);
  t->pixels = malloc((size_t)t->w * t->h * t->channels);
  box_init(b, t);
  thumb_scan(&ci, t, b);
  jpeg_finish_decompress(&ci);
  jpeg_destroy_decompress(&ci);
  box_free(b);
  return 0;
}

/* A hash of the thumbnail's size and pixels. */
static inline uint64_t thumb_checksum(const thumb *t) {
  uint32_t dims[3] = {t->w, t->h, t->channels};
  uint64_t h = wl_fnv(dims, sizeof dims, WL_FNV_INIT);
  return wl_hash(t->pixels, (size_t)t->w * t->h * t->channels, h);
}

#endif

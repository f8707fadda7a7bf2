/* jpeg_regen.c — see jpeg_regen.h. */
#include "jpeg_regen.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <turbojpeg.h>

#include "api.h"
#include "jpeg_obj.h"
#include "jpeg_req.h"
#include "jpeg_tj.h"

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char msg[JMSG_LENGTH_MAX];
} regen_err;

static void regen_error_exit(j_common_ptr ci) {
  regen_err *e = (regen_err *)ci->err;
  ci->err->format_message(ci, e->msg);
  longjmp(e->jb, 1);
}

/* The recording kept the messages the program saw; these stay quiet. */
static void regen_output_message(j_common_ptr ci) {
  (void)ci;
}

/* The most bytes of rows rebuilt for one call: a 16384x16384 RGB decode is
 * 768 MiB; a damaged trace must not make the build decode (and allocate
 * for) an image of 65500x65500. */
#define JPG_REGEN_MAX (1ull << 30)

static int fail(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return -1;
}

static void set_params(j_decompress_ptr ci, const jpg_params *p) {
  ci->out_color_space = (J_COLOR_SPACE)p->out_color_space;
  ci->jpeg_color_space = (J_COLOR_SPACE)p->jpeg_color_space;
  ci->scale_num = p->scale_num;
  ci->scale_denom = p->scale_denom;
  ci->dct_method = (J_DCT_METHOD)p->dct_method;
  ci->do_fancy_upsampling = (p->options & JPG_OPT_FANCY_UPSAMPLING) != 0;
  ci->do_block_smoothing = (p->options & JPG_OPT_BLOCK_SMOOTHING) != 0;
  ci->dither_mode = (J_DITHER_MODE)p->dither_mode;
  ci->desired_number_of_colors = p->desired_colors;
  ci->output_gamma = p->output_gamma;
  ci->quantize_colors = FALSE;
  ci->raw_data_out = FALSE;
  /* a buffered-image decode with a digest is one output pass over an
   * image of one scan (jpg_buffered_served): the rows of a plain decode */
  ci->buffered_image = FALSE;
  if (p->image_width && p->image_height) {
    ci->image_width = p->image_width;
    ci->image_height = p->image_height;
  }
}

/* A TurboJPEG call: the same function, the same arguments, written packed
 * (pitch and strides of exactly the bytes written; tjDecompressToYUV2 is
 * tjDecompressToYUVPlanes with strides from its pad, so the rows are the
 * same). */
static int regen_tj(const jpg_params *p, const uint8_t *jpeg, size_t jpeg_len, const jpg_digest *g,
                    uint64_t resp_len, uint8_t **out, char *why, size_t whylen) {
  int width = (int)p->scale_num, height = (int)p->scale_denom, flags = p->dct_method;
  jpg_tj_layout L;
  if (jpg_tj_layout_of(jpeg, jpeg_len, p->entry, width, height, p->out_color_space, &L) != 0)
    return fail(why, whylen, "TurboJPEG here cannot read its header");
  if ((uint32_t)L.row_bytes[0] != g->row_bytes || (uint32_t)L.rows[0] != g->rows ||
      L.bytes != resp_len)
    return fail(why, whylen, "TurboJPEG here decodes it to %dx%d, not to %u rows of %u bytes",
                L.out_w, L.out_h, g->rows, g->row_bytes);
  uint8_t *buf = malloc(L.bytes ? L.bytes : 1);
  tjhandle h = tjInitDecompress();
  if (!buf || !h) {
    free(buf);
    if (h)
      tjDestroy(h);
    return fail(why, whylen, "out of memory for %zu bytes", L.bytes);
  }
  /* the planes packed one after another, each row exactly its bytes */
  unsigned char *planes[3] = {buf, NULL, NULL};
  int strides[3] = {L.row_bytes[0], L.row_bytes[1], L.row_bytes[2]};
  for (int i = 1; i < L.nplanes; i++)
    planes[i] = planes[i - 1] + (size_t)L.row_bytes[i - 1] * (size_t)L.rows[i - 1];
  jpg_tj_dest d;
  jpg_tj_dest_planes(&L, planes, strides, &d);
  int rc = p->entry == JPG_ENTRY_TJ_RGB
               ? tjDecompress2(h, jpeg, (unsigned long)jpeg_len, buf, width, strides[0], height,
                               p->out_color_space, flags)
               : tjDecompressToYUVPlanes(h, jpeg, (unsigned long)jpeg_len, planes, width, strides,
                                         height, flags);
  char msg[JMSG_LENGTH_MAX];
  snprintf(msg, sizeof msg, "%s", rc ? tjGetErrorStr2(h) : "");
  tjDestroy(h);
  if (rc != 0) {
    free(buf);
    return fail(why, whylen, "TurboJPEG here cannot decode it again (%s)", msg);
  }
  if (jpg_tj_digest(&L, &d) != g->digest) {
    free(buf);
    return fail(why, whylen,
                "the rows decoded here differ from the recorded ones (another "
                "libjpeg-turbo build?)");
  }
  *out = buf;
  return 0;
}

/* A raw data decode, started: its planes (jpg_raw_layout) into *buf,
 * hashed in the order the calls write them, as record did. The caller's
 * setjmp catches the library's errors (*buf is its to free then). */
static int regen_raw(j_decompress_ptr ci, const jpg_digest *g, uint64_t resp_len, size_t ext_len,
                     uint8_t *volatile *buf, char *why, size_t whylen) {
  jpg_raw_layout L;
  if (jpg_raw_layout_of(ci, &L) != 0 || L.row_bytes[0] != g->row_bytes || L.rows[0] != g->rows ||
      resp_len != L.bytes + ext_len)
    return fail(why, whylen,
                "libjpeg here decodes it to %u planes, not to the recorded first plane of %u "
                "rows of %u bytes and its length",
                (unsigned)ci->num_components, g->rows, g->row_bytes);
  uint32_t most = 0;
  for (int c = 0; c < L.n; c++)
    most = L.row_bytes[c] > most ? L.row_bytes[c] : most;
  /* the rows a call may not write (the last iMCU row's dummy blocks) go
   * to scratch after the planes, in the one block a longjmp frees */
  *buf = malloc((size_t)resp_len + most + 1);
  if (!*buf)
    return fail(why, whylen, "out of memory for %llu bytes of planes",
                (unsigned long long)resp_len);
  uint8_t *spare = *buf + resp_len;
  JSAMPROW rows[JPG_RAW_MAX][64];
  JSAMPARRAY planes[JPG_RAW_MAX];
  uint64_t d = 0;
  for (uint32_t i = 0; i < L.imcu_rows && ci->output_scanline < ci->output_height; i++) {
    for (int c = 0; c < L.n; c++) {
      uint32_t n = jpg_raw_rows(&L, c, i);
      for (uint32_t r = 0; r < L.step[c] && r < 64; r++)
        rows[c][r] = r < n ? *buf + jpg_raw_at(&L, c, i, r) : spare;
      planes[c] = rows[c];
    }
    if (jpeg_read_raw_data(ci, planes, L.lines) != L.lines)
      break;
    for (int c = 0; c < L.n; c++)
      for (uint32_t r = 0, n = jpg_raw_rows(&L, c, i); r < n; r++)
        d = jpg_digest_row(d, rows[c][r], L.row_bytes[c]);
  }
  int complete = ci->output_scanline >= ci->output_height;
  if (!complete || d != g->digest)
    return fail(why, whylen,
                "the planes decoded here from one buffer differ from the recorded ones "
                "(damaged data that libjpeg-turbo decodes differently in other pieces, or "
                "another libjpeg build)");
  return 0;
}

/* A decode to rows, started: every row into *buf, hashed in order, as
 * record did. The caller's setjmp catches the library's errors (*buf is
 * its to free then). */
static int regen_rows(j_decompress_ptr ci, const jpg_digest *g, uint64_t resp_len,
                      uint8_t *volatile *buf, char *why, size_t whylen) {
  if (jpg_row_bytes(ci) != g->row_bytes || ci->output_height != g->rows)
    return fail(why, whylen, "libjpeg here decodes it to %ux%u, not to %u rows of %u bytes",
                (unsigned)ci->output_width, (unsigned)ci->output_height, g->rows, g->row_bytes);
  *buf = malloc(resp_len ? resp_len : 1);
  if (!*buf)
    return fail(why, whylen, "out of memory for %llu bytes of rows", (unsigned long long)resp_len);
  uint64_t d = 0;
  while (ci->output_scanline < ci->output_height) {
    JSAMPROW row = *buf + (size_t)ci->output_scanline * g->row_bytes;
    if (jpeg_read_scanlines(ci, &row, 1) != 1)
      break;
    d = jpg_digest_row(d, row, g->row_bytes);
  }
  /* libjpeg-turbo may decode damaged entropy-coded data (fill bytes where
   * they do not belong) differently from one buffer than from the
   * program's pieces: its fast Huffman path runs only with enough bytes in
   * the buffer */
  if (ci->output_scanline != ci->output_height || d != g->digest)
    return fail(why, whylen,
                "the rows decoded here from one buffer differ from the recorded ones "
                "(damaged data that libjpeg-turbo decodes differently in other pieces, or "
                "another libjpeg build)");
  return 0;
}

int jpg_regenerate(const uint8_t *req, size_t req_len, const uint8_t *dig, size_t dig_len,
                   uint64_t resp_len, uint8_t **out, char *why, size_t whylen) {
  *out = NULL;
  jpg_params p;
  const uint8_t *jpeg, *ext;
  size_t jpeg_len, ext_len;
  jpg_digest g;
  if (!req || jpg_req_parse(req, req_len, &p, NULL, &jpeg, &jpeg_len) != 0)
    return fail(why, whylen, "its request is damaged");
  if (!dig || jpg_dig_read(dig, dig_len, &g, &ext, &ext_len) != 0)
    return fail(why, whylen, "its response digest is damaged");
  if (resp_len > JPG_REGEN_MAX)
    return fail(why, whylen, "its response (%llu bytes) is larger than standin rebuilds",
                (unsigned long long)resp_len);
  if (p.api == ST_API_TJ_DECODE && p.entry >= JPG_ENTRY_TJ_RGB && p.entry <= JPG_ENTRY_TJ_YUV &&
      !ext_len)
    return regen_tj(&p, jpeg, jpeg_len, &g, resp_len, out, why, whylen);
  if (p.api != ST_API_JPEG_DECODE || p.entry != JPG_ENTRY_LIBJPEG || p.cmap_colors ||
      p.tables_len || (p.options & JPG_OPT_QUANTIZE))
    return fail(why, whylen, "its parameters are not ones a digest is kept for");
  int raw = (p.options & JPG_OPT_RAW_DATA) != 0;
  uint64_t pix = (uint64_t)g.row_bytes * g.rows;
  if (!raw && resp_len != pix + ext_len)
    return fail(why, whylen, "its response length (%llu bytes) is not that of its digest's rows",
                (unsigned long long)resp_len);

  struct jpeg_decompress_struct ci;
  regen_err e;
  uint8_t *volatile buf = NULL;
  ci.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = regen_error_exit;
  e.pub.output_message = regen_output_message;
  e.msg[0] = 0;
  if (setjmp(e.jb)) {
    jpeg_destroy_decompress(&ci);
    free(buf);
    return fail(why, whylen, "libjpeg here cannot decode it again (%s)", e.msg);
  }
  jpeg_create_decompress(&ci);
  jpeg_mem_src(&ci, (unsigned char *)jpeg, (unsigned long)jpeg_len);
  if (jpeg_read_header(&ci, TRUE) != JPEG_HEADER_OK) {
    jpeg_destroy_decompress(&ci);
    return fail(why, whylen, "its JPEG data holds no image");
  }
  /* An image size set past the frame's (a program may set its own after
   * jpeg_read_header, as openslide does for a tile) asks for rows the
   * frame's iMCU rows do not hold: a multi-scan decode then waits at the
   * end of the data for an iMCU row that never comes (a fuzzed trace did
   * that), and a huge width takes libjpeg seconds to start. A program
   * that asked for them hung so too, so no recording holds one. */
  if (p.image_width > ci.image_width || p.image_height > ci.image_height) {
    unsigned fw = ci.image_width, fh = ci.image_height;
    jpeg_destroy_decompress(&ci);
    return fail(why, whylen, "it asks for an image of %ux%u, larger than its frame's %ux%u",
                (unsigned)p.image_width, (unsigned)p.image_height, fw, fh);
  }
  set_params(&ci, &p);
  ci.raw_data_out = (boolean)raw;
  jpeg_start_decompress(&ci);
  int rc = raw ? regen_raw(&ci, &g, resp_len, ext_len, &buf, why, whylen)
               : regen_rows(&ci, &g, resp_len, &buf, why, whylen);
  jpeg_destroy_decompress(&ci);
  if (rc != 0) {
    free(buf);
    return -1;
  }
  if (ext_len)
    memcpy(buf + (resp_len - ext_len), ext, ext_len);
  *out = buf;
  return 0;
}

/* jpegdec — decodes JPEG files through libjpeg in the ways programs do, and
 * prints one line per image with a checksum of the rows it received, so
 * that record and replay runs can be compared with the native one.
 *
 *   jpegdec [options] FILE...
 *     -src stdio|mem|custom|suspend   source manager (default stdio); custom
 *                     reads through a 1000-byte buffer of its own (-readsize
 *                     N bytes a fill, 1 to 1000: poppler's DCTStream hands
 *                     libjpeg one byte a call); suspend
 *                     returns FALSE from fill_input_buffer and is fed
 *                     -chunk bytes at a time (default 777), like an
 *                     incremental decoder (PIL, browsers); forget is
 *                     suspend as Chromium's does it: a suspending fill
 *                     points the buffer at nothing, and the next chunk
 *                     resumes from the offset where the library stood;
 *                     drop is suspend, and when the data has run out it
 *                     drops the bytes the library left unread and offers a
 *                     fake EOI instead, as gdk-pixbuf's loader does when it
 *                     is closed on a truncated image
 *     -scale N/D -cs gray|rgb|bgrx|ycc|565 -dct int|fast|float
 *     -nofancy -nosmooth -quant N -onepass     output parameters
 *     -raw           raw data output: an iMCU row of each component's rows a
 *                    call (jpeg_read_raw_data; -lines N asks for N lines)
 *     -rawplanes     -raw into whole planes of the visible rows, the rows past
 *                    a plane's last pointing at its last, as GStreamer's
 *                    jpegdec decodes to I420 (the library writes the bottom
 *                    iMCU row's dummy block rows over that row)
 *     -buffered      buffered-image mode: jpeg_consume_input until it suspends
 *                    or reaches EOI, then an output pass over the scans in,
 *                    until jpeg_input_complete (a progressive display's loop)
 *     -bufsimple     -buffered without the jpeg_consume_input loop (ExactImage)
 *     -passes N      -buffered: at least N output passes
 *     -passdct int|fast|float   -buffered: the dct_method of every output pass
 *     -laterdct int|fast|float  -buffered: of every output pass after the first
 *     -emptypass     -buffered: a first output pass that reads no row (at
 *                    least two passes)
 *     -coef -skip N -crop X,W   modes an accelerator would not serve
 *     -latecrop      jpeg_crop_scanline after the first rows (the library refuses)
 *     -untilcomplete after the last row, jpeg_consume_input until
 *                    jpeg_input_complete (at most a million calls, counted)
 *     -lines N       rows per jpeg_read_scanlines call (default rec_outbuf_height)
 *     -whole         rows into one buffer for the image, mapped for each decode
 *                    (pages nothing has touched), asking for every row left
 *     -height N      set image_height to N after jpeg_read_header (as openslide
 *                    does to decode one band of an image with restart markers)
 *     -nofinish      jpeg_abort_decompress after the last row, no finish
 *     -stop N        give up after N rows (jpeg_abort_decompress)
 *     -stops N,M,... the k-th decode of each thread gives up after the k-th
 *                    number of rows (cycling through the list; 0: decodes
 *                    whole), instead of -stop
 *     -pair N        files two at a time on two objects: the first file's
 *                    decode starts and reads N rows (0: none), the second's
 *                    runs from its header to its end, then the first's reads
 *                    on (its line comes second)
 *     -one           one decompression object for every file
 *     -strict        warnings are fatal (emit_message longjmps)
 *     -eoferr        the custom source raises an error at end of file
 *     -fillwork US   the custom source works US microseconds (a busy wait)
 *                    before each fill, as a program that makes its bytes as
 *                    the library asks (poppler inflating a PDF stream)
 *     -threads N     N threads each decode every file (own objects)
 *     -repeat N      decode the file list N times
 *     -concat        a file holds several JPEGs back to back (one source)
 *     -tables FILE   read a tables-only datastream first (abbreviated images)
 *     -unread        a decode's error line adds how many bytes its source still
 *                    held unread (PIL reports so a truncated image's)
 *     -giveup        a suspending source's program whose data has run out gives
 *                    the decode up (PIL), where it raises an error otherwise
 *     -errno         set errno to 0 before each library call of the decode
 *                    sequence, and add to each line the first errno one left
 *                    (libjpeg reading a whole file leaves none: neither may
 *                    a shim)
 */
#include <errno.h>
#include <jerror.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <jpeglib.h>

typedef struct {
  const char *src;
  int scale_num, scale_denom, cs, dct, nofancy, nosmooth, quant, onepass;
  int buffered, bufsimple, passes, passdct, laterdct, emptypass, raw, coef, skip, crop_x, crop_w,
      lines, nofinish, one, strict, eoferr, fillwork;
  int latecrop, untilcomplete, whole, rawplanes;
  int threads, repeat, concat, chunk, readsize, stop, errno_w, height, pair, unread, giveup;
  const char *tables;
  int stops[64], nstops;
} opts;

static opts O = {.src = "stdio",
                 .scale_num = 1,
                 .scale_denom = 1,
                 .cs = -1,
                 .dct = -1,
                 .passdct = -1,
                 .laterdct = -1,
                 .threads = 0,
                 .repeat = 1,
                 .pair = -1,
                 .chunk = 777,
                 .readsize = 1000};

/* Output of one thread, printed in order at the end. */
typedef struct {
  char *buf;
  size_t len, cap;
} out_t;

static void outf(out_t *o, const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (o->len + (size_t)n + 1 > o->cap) {
    o->cap = (o->cap + (size_t)n + 1) * 2;
    o->buf = realloc(o->buf, o->cap);
  }
  memcpy(o->buf + o->len, line, (size_t)n + 1);
  o->len += (size_t)n;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* ---- error manager ------------------------------------------------------ */

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jb;
  char last[JMSG_LENGTH_MAX];
  int warnings;
} err_t;

static void on_error(j_common_ptr c) {
  err_t *e = (err_t *)c->err;
  (*c->err->format_message)(c, e->last);
  longjmp(e->jb, 1);
}

static void on_emit(j_common_ptr c, int level) {
  err_t *e = (err_t *)c->err;
  if (level < 0) {
    e->warnings++;
    (*c->err->format_message)(c, e->last);
    if (O.strict)
      longjmp(e->jb, 2);
  }
}

/* ---- sources -------------------------------------------------------------- */

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
  *len = fread(b, 1, (size_t)n, f);
  fclose(f);
  return b;
}

/* A program's own non-suspending source: 1000-byte reads from a FILE,
 * handed to the library -readsize bytes a fill. */
typedef struct {
  struct jpeg_source_mgr pub;
  FILE *f;
  JOCTET buf[1000];
  size_t have, at; /* bytes in buf, and handed over */
} custom_src;

static void c_init(j_decompress_ptr c) {
  (void)c;
}
static void busy_us(int us) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do
    clock_gettime(CLOCK_MONOTONIC, &b);
  while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < us * 1000L);
}

static boolean c_fill(j_decompress_ptr c) {
  custom_src *s = (custom_src *)c->src;
  if (O.fillwork)
    busy_us(O.fillwork);
  if (s->at == s->have) {
    s->have = fread(s->buf, 1, sizeof s->buf, s->f);
    s->at = 0;
  }
  if (s->have == 0) {
    if (O.eoferr)
      ERREXIT(c, JERR_INPUT_EOF);
    WARNMS(c, JWRN_JPEG_EOF);
    static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
    s->pub.next_input_byte = eoi;
    s->pub.bytes_in_buffer = sizeof eoi;
    return TRUE;
  }
  size_t n = s->have - s->at < (size_t)O.readsize ? s->have - s->at : (size_t)O.readsize;
  s->pub.next_input_byte = s->buf + s->at;
  s->pub.bytes_in_buffer = n;
  s->at += n;
  return TRUE;
}
static void c_skip(j_decompress_ptr c, long n) {
  custom_src *s = (custom_src *)c->src;
  while (n > (long)s->pub.bytes_in_buffer) {
    n -= (long)s->pub.bytes_in_buffer;
    c_fill(c);
  }
  s->pub.next_input_byte += n;
  s->pub.bytes_in_buffer -= (size_t)n;
}
static void c_term(j_decompress_ptr c) {
  (void)c;
}

/* A suspending source: the data arrives in chunks from the caller. */
typedef struct {
  struct jpeg_source_mgr pub;
  const unsigned char *data;
  size_t len, avail, skip;
  size_t at;   /* -src forget: where to resume */
  int dropped; /* -src drop: the fake EOI was offered */
} susp_src;

static boolean s_fill(j_decompress_ptr c) {
  susp_src *s = (susp_src *)c->src;
  if (!strcmp(O.src, "forget")) {
    if (s->pub.next_input_byte)
      s->at = (size_t)(s->pub.next_input_byte - s->data);
    s->pub.next_input_byte = NULL;
    s->pub.bytes_in_buffer = 0;
  }
  return FALSE;
}
static void s_skip(j_decompress_ptr c, long n) {
  susp_src *s = (susp_src *)c->src;
  if ((size_t)n > s->pub.bytes_in_buffer) {
    s->skip = (size_t)n - s->pub.bytes_in_buffer;
    s->pub.next_input_byte += s->pub.bytes_in_buffer;
    s->pub.bytes_in_buffer = 0;
  } else {
    s->pub.next_input_byte += n;
    s->pub.bytes_in_buffer -= (size_t)n;
  }
}

/* Make `chunk` more bytes available; returns 0 when there were none. */
static int s_more(susp_src *s) {
  static const unsigned char eoi[2] = {0xFF, 0xD9};
  if (s->avail >= s->len && !strcmp(O.src, "drop") && !s->dropped) {
    s->dropped = 1;
    s->pub.next_input_byte = eoi;
    s->pub.bytes_in_buffer = sizeof eoi;
    return 1;
  }
  if (s->avail >= s->len)
    return 0;
  size_t used = s->pub.next_input_byte ? (size_t)(s->pub.next_input_byte - s->data) : s->at;
  s->avail = s->avail + (size_t)O.chunk < s->len ? s->avail + (size_t)O.chunk : s->len;
  size_t skip = s->skip < s->avail - used ? s->skip : s->avail - used;
  used += skip;
  s->skip -= skip;
  s->pub.next_input_byte = s->data + used;
  s->pub.bytes_in_buffer = s->avail - used;
  return 1;
}

/* ---- one decode -------------------------------------------------------------- */

typedef struct {
  struct jpeg_decompress_struct ci;
  err_t err;
  int created;
  FILE *f;
  unsigned char *data;
  size_t len;
  custom_src csrc;
  susp_src ssrc;
  unsigned rows; /* rows received by the current decode (kept across a longjmp) */
  long until_complete; /* -untilcomplete: jpeg_consume_input calls */
  unsigned stop;       /* the current decode gives up after this many rows, 0: never */
  unsigned pause;      /* read_rows returns once this many rows are in, 0: never */
} dec_t;

/* The rows the thread's next decode gives up after (-stops, -stop). */
static _Thread_local unsigned decodes;
static unsigned next_stop(void) {
  if (!O.nstops)
    return (unsigned)O.stop;
  return (unsigned)O.stops[decodes++ % (unsigned)O.nstops];
}

static int suspending(void) {
  return !strcmp(O.src, "suspend") || !strcmp(O.src, "forget") || !strcmp(O.src, "drop");
}

/* Run a libjpeg step, feeding the suspending source until it stops
 * suspending. `step` returns nonzero when done. */
static _Thread_local int errno_left; /* -errno: the first errno a call left */

#define PUMP(d, done_expr)                                                                         \
  for (;;) {                                                                                       \
    errno = 0;                                                                                     \
    int done_ = (done_expr);                                                                       \
    if (errno && !errno_left)                                                                      \
      errno_left = errno;                                                                          \
    if (done_)                                                                                     \
      break;                                                                                       \
    if (!suspending() || !s_more(&(d)->ssrc)) {                                                    \
      if (O.giveup && suspending())                                                                \
        longjmp((d)->err.jb, 3);                                                                   \
      ERREXIT(&(d)->ci, JERR_INPUT_EMPTY);                                                         \
    }                                                                                              \
  }

static void set_params(j_decompress_ptr c) {
  c->scale_num = (unsigned)O.scale_num;
  c->scale_denom = (unsigned)O.scale_denom;
  if (O.cs >= 0)
    c->out_color_space = (J_COLOR_SPACE)O.cs;
  if (O.dct >= 0)
    c->dct_method = (J_DCT_METHOD)O.dct;
  if (O.nofancy)
    c->do_fancy_upsampling = FALSE;
  if (O.nosmooth)
    c->do_block_smoothing = FALSE;
  if (O.quant) {
    c->quantize_colors = TRUE;
    c->desired_number_of_colors = O.quant;
    c->two_pass_quantize = !O.onepass;
  }
  c->buffered_image = (boolean)O.buffered;
  c->raw_data_out = (boolean)O.raw;
}

static size_t row_bytes(j_decompress_ptr c) {
  if (c->out_color_space == JCS_RGB565 && !c->quantize_colors)
    return c->output_width * 2;
  return (size_t)c->output_width * (size_t)c->output_components;
}

/* Rows of the image (or of the last output pass). */
static uint64_t read_rows(dec_t *d, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  int lines = O.lines ? O.lines : c->rec_outbuf_height;
  size_t rb = row_bytes(c);
  JSAMPARRAY buf =
      (*c->mem->alloc_sarray)((j_common_ptr)c, JPOOL_IMAGE, (JDIMENSION)rb, (JDIMENSION)lines);
  /* -whole: every row at once into pages nothing has touched (a buffer the
   * program maps for the image, as cwebp's), asking for all rows left */
  size_t whole_len = O.whole ? rb * c->output_height : 0;
  unsigned char *img = NULL;
  JSAMPARRAY at = NULL;
  if (whole_len) {
    img = mmap(NULL, whole_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    at = (*c->mem->alloc_small)((j_common_ptr)c, JPOOL_IMAGE, c->output_height * sizeof(JSAMPROW));
    if (img == MAP_FAILED)
      ERREXIT(c, JERR_OUT_OF_MEMORY);
    for (JDIMENSION r = 0; r < c->output_height; r++)
      at[r] = img + (size_t)r * rb;
  }
  while (c->output_scanline < c->output_height && !(d->stop && d->rows >= d->stop) &&
         !(d->pause && d->rows >= d->pause)) {
    JDIMENSION first = c->output_scanline, n;
    if (img) {
      PUMP(d, (n = jpeg_read_scanlines(c, at + first, c->output_height - first)) != 0);
      buf = at + first;
    } else {
      PUMP(d, (n = jpeg_read_scanlines(c, buf, (JDIMENSION)lines)) != 0);
    }
    if (c->output_scanline != first + n)
      ERREXIT(c, JERR_BAD_STATE);
    for (JDIMENSION i = 0; i < n; i++)
      h = fnv(h, buf[i], rb);
    d->rows += n;
    if (O.skip && first == 0 && c->output_height > (unsigned)O.skip * 2)
      d->rows += jpeg_skip_scanlines(c, (JDIMENSION)O.skip);
    if (O.latecrop && first == 0) {
      JDIMENSION x = 0, w = c->output_width / 2;
      jpeg_crop_scanline(c, &x, &w);
    }
  }
  if (img)
    munmap(img, whole_len);
  if (d->pause && c->output_scanline < c->output_height)
    return h; /* (-pair) read on later */
  if (O.untilcomplete) {
    long k = 0;
    while (!jpeg_input_complete(c) && k < 1000000)
      jpeg_consume_input(c), k++;
    d->until_complete = k;
  }
  return h;
}

/* -rawplanes: each component's visible rows, one plane each. */
static uint64_t read_raw_planes(dec_t *d, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  int n = c->num_components, maxv = c->max_v_samp_factor;
  int lines = maxv * c->min_DCT_scaled_size;
  unsigned char *plane[MAX_COMPONENTS];
  size_t stride[MAX_COMPONENTS], prows[MAX_COMPONENTS];
  JSAMPROW rowp[MAX_COMPONENTS][4 * DCTSIZE * 2];
  JSAMPARRAY planes[MAX_COMPONENTS];
  for (int i = 0; i < n; i++) {
    jpeg_component_info *k = &c->comp_info[i];
    stride[i] = (size_t)k->width_in_blocks * k->DCT_scaled_size;
    prows[i] = ((size_t)c->output_height * k->v_samp_factor + maxv - 1) / maxv;
    plane[i] = calloc(stride[i] * prows[i] + 1, 1);
    planes[i] = rowp[i];
  }
  while (c->output_scanline < c->output_height) {
    JDIMENSION got;
    size_t imcu = c->output_scanline / lines;
    for (int i = 0; i < n; i++) {
      jpeg_component_info *k = &c->comp_info[i];
      size_t step = (size_t)k->v_samp_factor * k->DCT_scaled_size;
      for (size_t r = 0; r < step && r < sizeof rowp[i] / sizeof rowp[i][0]; r++) {
        size_t at = imcu * step + r;
        rowp[i][r] = plane[i] + (at < prows[i] ? at : prows[i] - 1) * stride[i];
      }
    }
    PUMP(d, (got = jpeg_read_raw_data(c, planes, O.lines ? O.lines : lines)) != 0);
    d->rows += got;
  }
  for (int i = 0; i < n; i++) {
    h = fnv(h, plane[i], stride[i] * prows[i]);
    free(plane[i]);
  }
  return h;
}

static uint64_t read_raw(dec_t *d, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  if (O.rawplanes)
    return read_raw_planes(d, h);
  int rg = O.lines ? O.lines : c->max_v_samp_factor * DCTSIZE;
  JSAMPARRAY planes[MAX_COMPONENTS];
  for (int i = 0; i < c->num_components; i++)
    planes[i] = (*c->mem->alloc_sarray)((j_common_ptr)c, JPOOL_IMAGE,
                                        c->comp_info[i].width_in_blocks * DCTSIZE,
                                        (JDIMENSION)(c->comp_info[i].v_samp_factor * DCTSIZE));
  while (c->output_scanline < c->output_height) {
    JDIMENSION n;
    PUMP(d, (n = jpeg_read_raw_data(c, planes, (JDIMENSION)rg)) != 0);
    /* the rows an iMCU row has, each as wide as the library writes (a
     * scaled decode writes less than the buffer holds, which stays as
     * the memory manager left it); the last one's dummy rows keep the
     * previous iMCU row's */
    for (int i = 0; i < c->num_components; i++) {
      jpeg_component_info *k = &c->comp_info[i];
      for (int r = 0; r < k->v_samp_factor * k->DCT_scaled_size; r++)
        h = fnv(h, planes[i][r], k->width_in_blocks * k->DCT_scaled_size);
    }
    d->rows += n;
  }
  return h;
}

static uint64_t read_coef(dec_t *d, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  jvirt_barray_ptr *coef = jpeg_read_coefficients(c);
  for (int ci = 0; ci < c->num_components; ci++) {
    jpeg_component_info *comp = &c->comp_info[ci];
    for (JDIMENSION r = 0; r < comp->height_in_blocks; r++) {
      JBLOCKARRAY b = (*c->mem->access_virt_barray)((j_common_ptr)c, coef[ci], r, 1, FALSE);
      h = fnv(h, b[0], comp->width_in_blocks * sizeof(JBLOCK));
    }
  }
  return h;
}

static uint64_t read_buffered(dec_t *d, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  for (int pass = 0; !jpeg_input_complete(c) || pass < O.passes; pass++) {
    int status;
    if (!O.bufsimple)
      do
        status = jpeg_consume_input(c);
      while (status != JPEG_SUSPENDED && status != JPEG_REACHED_EOI);
    if (O.passdct >= 0)
      c->dct_method = (J_DCT_METHOD)O.passdct;
    if (O.laterdct >= 0 && pass > 0)
      c->dct_method = (J_DCT_METHOD)O.laterdct;
    PUMP(d, jpeg_start_output(c, c->input_scan_number));
    if (!(O.emptypass && pass == 0))
      h = read_rows(d, h);
    PUMP(d, jpeg_finish_output(c));
  }
  return h;
}

/* The start of a decode of the next image of d's source: header,
 * parameters, jpeg_start_decompress; then its rows (read_body). Errors
 * longjmp to d->err.jb. */
static void begin(dec_t *d) {
  j_decompress_ptr c = &d->ci;
  d->rows = 0;
  d->stop = next_stop();
  int hr;
  PUMP(d, (hr = jpeg_read_header(c, TRUE)) != JPEG_SUSPENDED);
  set_params(c);
  if (O.height > 0 && (JDIMENSION)O.height < c->image_height)
    c->image_height = (JDIMENSION)O.height;
  if (O.coef)
    return;
  PUMP(d, jpeg_start_decompress(c));
  if (O.crop_w) {
    JDIMENSION x = (JDIMENSION)O.crop_x, w = (JDIMENSION)O.crop_w;
    if (x + w <= c->output_width)
      jpeg_crop_scanline(c, &x, &w);
  }
}

static uint64_t read_body(dec_t *d, uint64_t h) {
  if (O.coef)
    return read_coef(d, h);
  if (O.buffered)
    return read_buffered(d, h);
  if (O.raw)
    return read_raw(d, h);
  return read_rows(d, h);
}

static void finish(dec_t *d, const char *name, out_t *out, uint64_t h);

/* Decode the next image of d's source and print its line. Returns 0 when
 * the source holds no more images (-concat). */
static int decode_one(dec_t *d, const char *name, out_t *out) {
  j_decompress_ptr c = &d->ci;
  int code;
  d->rows = 0;
  if ((code = setjmp(d->err.jb)) != 0) {
    char left[48] = "";
    if (O.unread)
      snprintf(left, sizeof left, ", %zu bytes unread", c->src ? c->src->bytes_in_buffer : 0);
    if (code == 3)
      outf(out, "%s: gave up after %u rows, %d warnings%s\n", name, d->rows, d->err.warnings, left);
    else
      outf(out, "%s: %s '%s' after %u rows, %d warnings%s\n", name,
           code == 2 ? "fatal warning" : "error", d->err.last, d->rows, d->err.warnings, left);
    jpeg_abort_decompress(c);
    return -1;
  }
  begin(d);
  finish(d, name, out, read_body(d, 1469598103934665603ull));
  return 1;
}

/* Print the decode's line, then end it: jpeg_finish_decompress, or
 * jpeg_abort_decompress for a decode given up. */
static void finish(dec_t *d, const char *name, out_t *out, uint64_t h) {
  j_decompress_ptr c = &d->ci;
  if (c->quantize_colors && c->colormap)
    for (int i = 0; i < c->out_color_components; i++)
      h = fnv(h, c->colormap[i], (size_t)c->actual_number_of_colors);
  char en[64] = "";
  if (O.errno_w)
    snprintf(en, sizeof en, " errno=%d", errno_left);
  if (O.untilcomplete)
    snprintf(en + strlen(en), sizeof en - strlen(en), " consumed=%ld", d->until_complete);
  errno_left = 0;
  outf(out, "%s: %ux%u c=%d rows=%u sum=%016llx warnings=%d%s\n", name, c->output_width,
       c->output_height, c->output_components, d->rows, (unsigned long long)h, d->err.warnings, en);
  if ((O.nofinish || d->stop) && !O.concat)
    jpeg_abort_decompress(c);
  else
    PUMP(d, jpeg_finish_decompress(c));
}

/* Set up d's source for a file. */
static int open_src(dec_t *d, const char *path) {
  j_decompress_ptr c = &d->ci;
  if (!strcmp(O.src, "stdio") || !strcmp(O.src, "custom")) {
    d->f = fopen(path, "rb");
    if (!d->f)
      return -1;
    if (!strcmp(O.src, "stdio")) {
      jpeg_stdio_src(c, d->f);
    } else {
      d->csrc.pub =
          (struct jpeg_source_mgr){NULL, 0, c_init, c_fill, c_skip, jpeg_resync_to_restart, c_term};
      d->csrc.f = d->f;
      d->csrc.have = d->csrc.at = 0;
      c->src = &d->csrc.pub;
    }
    return 0;
  }
  d->data = slurp(path, &d->len);
  if (!d->data)
    return -1;
  if (!strcmp(O.src, "mem")) {
    jpeg_mem_src(c, d->data, (unsigned long)d->len);
  } else {
    d->ssrc.pub = (struct jpeg_source_mgr){
        d->data, 0, c_init, s_fill, s_skip, jpeg_resync_to_restart, c_term};
    d->ssrc.data = d->data;
    d->ssrc.len = d->len;
    d->ssrc.avail = 0;
    d->ssrc.skip = 0;
    d->ssrc.at = 0;
    d->ssrc.dropped = 0;
    c->src = &d->ssrc.pub;
  }
  return 0;
}

static void close_src(dec_t *d) {
  if (d->f)
    fclose(d->f);
  free(d->data);
  d->f = NULL;
  d->data = NULL;
}

static void create(dec_t *d) {
  if (!d->created) {
    d->ci.err = jpeg_std_error(&d->err.pub);
    d->err.pub.error_exit = on_error;
    d->err.pub.emit_message = on_emit;
    jpeg_create_decompress(&d->ci);
    d->created = 1;
  }
}

static void decode_file(dec_t *d, const char *path, out_t *out) {
  create(d);
  d->err.warnings = 0;
  if (O.tables && !setjmp(d->err.jb)) { /* tables for the abbreviated images */
    size_t n;
    unsigned char *t = slurp(O.tables, &n);
    d->ci.src = NULL;
    jpeg_mem_src(&d->ci, t, (unsigned long)n);
    int r = jpeg_read_header(&d->ci, FALSE);
    outf(out, "%s: tables %s\n", O.tables, r == JPEG_HEADER_TABLES_ONLY ? "read" : "missing");
    free(t);
  }
  d->ci.src = NULL; /* a new source for every file */
  if (open_src(d, path) != 0) {
    outf(out, "%s: cannot open\n", path);
    return;
  }
  if (O.concat) {
    for (int k = 0; decode_one(d, path, out) > 0 && k < 1000; k++)
      if (d->ci.src->bytes_in_buffer == 0 && (d->f ? feof(d->f) : 1) &&
          d->csrc.at == d->csrc.have) /* -src custom: none left in its buffer */
        break;
  } else {
    decode_one(d, path, out);
  }
  close_src(d);
  if (!O.one) {
    jpeg_destroy_decompress(&d->ci);
    d->created = 0;
  }
}

/* -pair N: a's decode starts and reads N rows, b's runs from its
 * header to its end, then a's reads on: two objects' decodes interleaved
 * (each on an object and a source of its own). */
static void decode_pair(dec_t *a, dec_t *b, const char *na, const char *nb, out_t *out) {
  dec_t *ds[2] = {a, b};
  const char *ns[2] = {na, nb};
  volatile int opened = 0, failed = 1;
  for (; opened < 2; opened++) {
    create(ds[opened]);
    ds[opened]->err.warnings = 0;
    ds[opened]->ci.src = NULL;
    if (open_src(ds[opened], ns[opened]) != 0) {
      outf(out, "%s: cannot open\n", ns[opened]);
      goto done;
    }
  }
  if (setjmp(a->err.jb)) {
    outf(out, "%s: error '%s' after %u rows\n", na, a->err.last, a->rows);
    goto done;
  }
  if (setjmp(b->err.jb)) {
    outf(out, "%s: error '%s' after %u rows\n", nb, b->err.last, b->rows);
    goto done;
  }
  begin(a);
  uint64_t ha = 1469598103934665603ull;
  if (O.pair > 0) {
    a->pause = (unsigned)O.pair;
    ha = read_body(a, ha);
    a->pause = 0;
  }
  begin(b);
  finish(b, nb, out, read_body(b, 1469598103934665603ull));
  finish(a, na, out, read_body(a, ha));
  failed = 0;
done:
  for (int i = 0; i < opened; i++) {
    if (failed)
      jpeg_abort_decompress(&ds[i]->ci);
    close_src(ds[i]);
    if (!O.one) {
      jpeg_destroy_decompress(&ds[i]->ci);
      ds[i]->created = 0;
    }
  }
}

typedef struct {
  int argc;
  char **argv;
  out_t out;
} job_t;

static void *run(void *p) {
  job_t *j = p;
  dec_t *d = calloc(1, sizeof *d), *d2 = calloc(1, sizeof *d2);
  for (int r = 0; r < O.repeat; r++)
    for (int i = 0; i < j->argc; i++) {
      if (O.pair >= 0 && i + 1 < j->argc) {
        decode_pair(d, d2, j->argv[i], j->argv[i + 1], &j->out);
        i++;
      } else {
        decode_file(d, j->argv[i], &j->out);
      }
    }
  if (d->created)
    jpeg_destroy_decompress(&d->ci);
  if (d2->created)
    jpeg_destroy_decompress(&d2->ci);
  free(d);
  free(d2);
  return NULL;
}

static int cs_of(const char *s) {
  static const struct {
    const char *n;
    int cs;
  } t[] = {{"gray", JCS_GRAYSCALE},
           {"rgb", JCS_RGB},
           {"bgrx", JCS_EXT_BGRX},
           {"ycc", JCS_YCbCr},
           {"565", JCS_RGB565}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(s, t[i].n))
      return t[i].cs;
  fprintf(stderr, "jpegdec: unknown colour space %s\n", s);
  exit(2);
}

static int dct_named(const char *v) {
  return !strcmp(v, "fast") ? JDCT_IFAST : !strcmp(v, "float") ? JDCT_FLOAT : JDCT_ISLOW;
}

static int parse(int argc, char **argv) {
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(a, "-src"))
      O.src = v, i++;
    else if (!strcmp(a, "-scale"))
      sscanf(v, "%d/%d", &O.scale_num, &O.scale_denom), i++;
    else if (!strcmp(a, "-cs"))
      O.cs = cs_of(v), i++;
    else if (!strcmp(a, "-dct"))
      O.dct = dct_named(v), i++;
    else if (!strcmp(a, "-quant"))
      O.quant = atoi(v), i++;
    else if (!strcmp(a, "-skip"))
      O.skip = atoi(v), i++;
    else if (!strcmp(a, "-latecrop"))
      O.latecrop = 1;
    else if (!strcmp(a, "-untilcomplete"))
      O.untilcomplete = 1;
    else if (!strcmp(a, "-whole"))
      O.whole = 1;
    else if (!strcmp(a, "-crop"))
      sscanf(v, "%d,%d", &O.crop_x, &O.crop_w), i++;
    else if (!strcmp(a, "-lines"))
      O.lines = atoi(v), i++;
    else if (!strcmp(a, "-height"))
      O.height = atoi(v), i++;
    else if (!strcmp(a, "-threads"))
      O.threads = atoi(v), i++;
    else if (!strcmp(a, "-repeat"))
      O.repeat = atoi(v), i++;
    else if (!strcmp(a, "-stop"))
      O.stop = atoi(v), i++;
    else if (!strcmp(a, "-stops")) {
      for (const char *p = v; *p && O.nstops < 64; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        O.stops[O.nstops++] = atoi(p);
      i++;
    } else if (!strcmp(a, "-pair"))
      O.pair = atoi(v), i++;
    else if (!strcmp(a, "-tables"))
      O.tables = v, i++;
    else if (!strcmp(a, "-chunk"))
      O.chunk = atoi(v), i++;
    else if (!strcmp(a, "-readsize"))
      O.readsize = atoi(v), i++;
    else if (!strcmp(a, "-nofancy"))
      O.nofancy = 1;
    else if (!strcmp(a, "-nosmooth"))
      O.nosmooth = 1;
    else if (!strcmp(a, "-onepass"))
      O.onepass = 1;
    else if (!strcmp(a, "-buffered"))
      O.buffered = 1;
    else if (!strcmp(a, "-emptypass"))
      O.buffered = O.emptypass = 1, O.passes = O.passes > 2 ? O.passes : 2;
    else if (!strcmp(a, "-bufsimple"))
      O.buffered = O.bufsimple = 1;
    else if (!strcmp(a, "-passes"))
      O.buffered = 1, O.passes = atoi(v), i++;
    else if (!strcmp(a, "-passdct") || !strcmp(a, "-laterdct"))
      O.buffered = 1, *(a[1] == 'p' ? &O.passdct : &O.laterdct) = dct_named(v), i++;
    else if (!strcmp(a, "-raw"))
      O.raw = 1;
    else if (!strcmp(a, "-rawplanes"))
      O.raw = O.rawplanes = 1;
    else if (!strcmp(a, "-coef"))
      O.coef = 1;
    else if (!strcmp(a, "-nofinish"))
      O.nofinish = 1;
    else if (!strcmp(a, "-one"))
      O.one = 1;
    else if (!strcmp(a, "-unread"))
      O.unread = 1;
    else if (!strcmp(a, "-giveup"))
      O.giveup = 1;
    else if (!strcmp(a, "-errno"))
      O.errno_w = 1;
    else if (!strcmp(a, "-strict"))
      O.strict = 1;
    else if (!strcmp(a, "-eoferr"))
      O.eoferr = 1;
    else if (!strcmp(a, "-fillwork"))
      O.fillwork = atoi(v), i++;
    else if (!strcmp(a, "-concat"))
      O.concat = 1;
    else {
      fprintf(stderr, "jpegdec: unknown option %s\n", a);
      exit(2);
    }
  }
  return i;
}

int main(int argc, char **argv) {
  int first = parse(argc, argv);
  if (O.readsize < 1 || O.readsize > 1000) {
    fprintf(stderr, "jpegdec: -readsize must be 1 to 1000 bytes, not %d\n", O.readsize);
    return 2;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: jpegdec [options] FILE...\n");
    return 2;
  }
  int nt = O.threads > 0 ? O.threads : 1;
  job_t *jobs = calloc((size_t)nt, sizeof *jobs);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  for (int t = 0; t < nt; t++) {
    jobs[t].argc = argc - first;
    jobs[t].argv = argv + first;
  }
  if (O.threads > 0) {
    for (int t = 0; t < nt; t++)
      pthread_create(&th[t], NULL, run, &jobs[t]);
    for (int t = 0; t < nt; t++)
      pthread_join(th[t], NULL);
  } else {
    run(&jobs[0]);
  }
  for (int t = 0; t < nt; t++) {
    if (O.threads > 0)
      printf("thread %d:\n", t);
    fwrite(jobs[t].out.buf ? jobs[t].out.buf : "", 1, jobs[t].out.len, stdout);
    free(jobs[t].out.buf);
  }
  free(jobs);
  free(th);
  return 0;
}

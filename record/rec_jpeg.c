/* rec_jpeg.c — record hooks for libjpeg and TurboJPEG decoding.
 *
 * libjpeg: one invocation is one image, from the first jpeg_read_header to
 * jpeg_finish_decompress (or the abort / destroy / error that ends it). Its
 * latency is the time spent inside the library calls of that decode,
 * summed: the program's own work between scanline calls is not part of it.
 * The request is the decode parameters (taken at jpeg_start_decompress)
 * plus the compressed bytes the library consumed (jpeg_obj.c follows the
 * program's source manager); the response is every row as
 * jpeg_read_scanlines returned it (or every plane jpeg_read_raw_data
 * wrote: jpg_raw_layout), plus the messages the library emitted
 * while decoding (so replay can emit them again at the same rows) and the
 * colour map it made when quantising. Unless colours are quantised, or the
 * image uses tables an earlier datastream gave (own_tables), the rows are
 * not copied: they are hashed as the program receives them, and the trace
 * keeps that digest, from which offline tools decode the request again
 * (jpeg_req.h).
 * Modes an accelerator would not serve run as usual and are recorded as
 * not offloadable, with the reason.
 *
 * TurboJPEG: one invocation is one tjDecompress2 / tjDecompressToYUV2 /
 * tjDecompressToYUVPlanes call (tjDecompress and tjDecompressToYUV reach
 * them inside libturbojpeg); a tjDecompressHeader3 on the same handle and
 * buffer just before counts towards it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <turbojpeg.h>

#include "faults.h"
#include "jpeg_obj.h"
#include "jpeg_req.h"
#include "jpeg_tj.h"
#include "placement.h"
#include "record_internal.h"
#include "rt.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"

#define FRAME __builtin_frame_address(0)

/* What the record shim keeps per decode (jpg_obj.ext). */
typedef struct {
  jpg_params par;
  uint8_t *cmap_in; /* the program's own colour map, if it gave one */
  int started;      /* jpeg_start_decompress returned TRUE */
  size_t row_bytes;
  uint32_t out_w, out_h;
  uint8_t *pix; /* rows as returned, then room for the extension */
  size_t pix_len;    /* bytes of every row */
  int pix_lost;      /* a row could not be kept */
  int bad_marker;    /* the data holds a marker libjpeg stops at (jpeg_scan.h) */
  int err_in_data;   /* an error ended it outside its source, bytes still unread */
  int as_digest;     /* the rows are hashed, not kept (pix stays NULL) */
  int raw;           /* raw data output: pix holds the planes (jpg_raw_layout) */
  int buffered;      /* buffered-image mode as replay serves it (jpg_buffered_served) */
  int rows_done;     /* an output pass read every row: the later ones give
                        the same rows, not taken again */
  jpg_raw_layout rl;
  uint8_t *raw_spare; /* one iMCU row of every plane, for rows that alias (raw_aliased) */
  uint32_t rows_seen; /* rows (raw: iMCU rows) hashed so far, in order */
  uint64_t digest;    /* jpg_digest_row over those rows */
  uint8_t *cmap_out; /* the colour map the library made */
  uint32_t cmap_colors, cmap_comps;
  void *ips[ST_MAX_FRAMES];
  int nips;
  uint64_t own_ns; /* standin's own work between the decode's calls (row copies) */
  place_sampler placement; /* output lines probed, found outside the caches */
  uint32_t noted_to;       /* rows up to here looked at for fresh pages */
  int note;                /* 0: not decided yet, 1: looking (note_rows), -1: not */
  rt_out_pages out_pages;  /* the program's pages the rows land in (faults.h) */
} rec_dec;

/* A decode's rows are looked at for pages not in memory yet (note_rows):
 * that costs a system call or more a decode (~2 us each on the AMD test
 * VM: 2% of a 160x120 decode), and a program that decodes into the same
 * buffer again and again finds none. After a decode without a fresh page
 * the thread lets 2, 4, ... 1024 decodes pass unlooked at, as the protobuf
 * hooks do (faults.h); one with fresh pages looks at every decode again. */
static SHIM_TLS rt_backoff note_watch;

static void free_dec(jpg_obj *o) {
  rec_dec *x = o->ext;
  shim_free(x->cmap_in);
  shim_free(x->pix);
  shim_free(x->cmap_out);
  shim_free(x->raw_spare);
  shim_free(x);
}

/* ---- building the call ------------------------------------------------ */

/* The request blob (see jpeg_req.h); NULL when memory ran out. */
static uint8_t *build_request(jpg_obj *o, rec_dec *x, size_t *len, jpg_probe *pr) {
  if (o->cap.failed) {
    memset(pr, 0, sizeof *pr);
    pr->sof = -1;
    return NULL;
  }
  jpg_scan sc;
  jpg_request_scan(o, &x->par, &sc);
  jpg_scan_feed(&sc, o->cap.p, o->cap.len);
  x->bad_marker = sc.bad_marker;
  return jpg_request_finish(o, &x->par, x->cmap_in, &sc, len, pr);
}

/* Append the extension (colour map, messages) to the pixels; returns the
 * response length, or 0 when it cannot be built. A digest response becomes
 * its fixed part and the extension in x->pix, and the length returned is
 * still that of the rows and the extension (st_call.resp_len). */
static size_t finish_response(jpg_obj *o, rec_dec *x) {
  size_t ext = jpg_ext_len(x->cmap_colors, x->cmap_comps, o->nmsgs);
  if (x->as_digest) {
    uint8_t *p = shim_alloc(JPG_DIG_FIXED + ext);
    if (!p)
      return 0;
    /* raw: the first plane's geometry; the digest is over the rows in the
     * order the calls wrote them (iMCU row by iMCU row, component by
     * component) */
    jpg_digest g = {(uint32_t)x->row_bytes, x->raw ? x->rl.rows[0] : x->out_h, x->digest};
    jpg_dig_write(p, &g);
    if (ext)
      jpg_ext_write(p + JPG_DIG_FIXED, x->cmap_colors, x->cmap_comps, x->cmap_out, o->msgs,
                    o->nmsgs);
    x->pix = p;
    return x->pix_len + ext;
  }
  if (ext) {
    uint8_t *p = shim_realloc(x->pix, x->pix_len + ext);
    if (!p)
      return 0;
    x->pix = p;
    jpg_ext_write(p + x->pix_len, x->cmap_colors, x->cmap_comps, x->cmap_out, o->msgs, o->nmsgs);
  }
  return x->pix_len + ext;
}

/* Queue the decode. complete: every row was read; failed: error_exit. */
static void submit(jpg_obj *o, int failed) {
  rec_dec *x = o->ext;
  if (!x || !x->par.api)
    return; /* never reached jpeg_start_decompress: not an image decode */
  j_decompress_ptr ci = o->cinfo;
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* record --retime's second run: the latency only */
    rt_timing_add(ST_API_JPEG_DECODE, o->t_first, o->busy_ns, 0,
                  st_jpeg_timing_size(ci->output_scanline,
                                      (uint64_t)ci->output_width * ci->output_height,
                                      (uint64_t)ci->num_components));
    x->par.api = 0;
    return;
  }
  int complete = x->started && ci->output_scanline >= ci->output_height;
  rt_call c = {0};
  c.api = ST_API_JPEG_DECODE;
  c.start_ns = o->t_first;
  c.latency_ns = o->busy_ns;
  /* The decode belongs to the thread that spent the most time making its
   * image (jpg_main_work), from that thread's first call: libvips reads
   * the rows on its pool's threads and finishes or destroys the objects
   * from the main thread, later. */
  const jpg_work *w = jpg_main_work(o);
  if (w && w->thread != rt_thread_index()) {
    c.work_thread = w->thread + 1;
    c.start_ns = w->first_ns;
  }
  c.end_ns = shim_now_ns() - x->own_ns; /* so that the runtime counts all our own time */
  c.result = ci->output_scanline;
  jpg_probe pr;
  size_t req_len = 0;
  uint8_t *req = build_request(o, x, &req_len, &pr);
  if (req) {
    jpg_req_fingerprint(req, req_len, ST_API_JPEG_DECODE, c.fp);
    c.req = (rt_payload){RT_PAY_OWN, req, req_len};
    c.req_len = req_len;
  }
  size_t in_bytes = req ? jpg_request_image_bytes(o, &x->par, req_len) : 0;
  c.nfeat = (uint8_t)jpg_features(c.feat, &pr, in_bytes, x->out_w, x->out_h, x->pix_len,
                                  x->par.scale_num, x->par.scale_denom);
  c.feat[ST_JPF_OUT_COLD] = place_permille(x->placement.cold, x->placement.probed);
  if ((c.feat[ST_JPF_FAULT_NS] = rt_out_fault_ns(&x->out_pages, c.latency_ns)) != 0)
    c.nfeat = ST_JPF_NFEAT;
  /* the program's source callbacks: their time stays with the program */
  uint64_t src = jpg_source_ns(o), room = c.latency_ns - c.feat[ST_JPF_FAULT_NS];
  if ((c.feat[ST_JPF_SOURCE_NS] = src < room ? src : room) != 0)
    c.nfeat = ST_JPF_NFEAT;
  if (x->note > 0)
    rt_backoff_found(&note_watch, x->out_pages.fresh != 0);
  if (failed || !complete)
    jpg_unread_final(o);
  if (o->drop.len) {
    c.feat[ST_JPF_DROP_AT] = o->drop.at;
    c.feat[ST_JPF_DROP_LEN] = o->drop.len;
    c.feat[ST_JPF_DROP_HASH] = o->drop.hash;
    c.nfeat = ST_JPF_NFEAT;
  }
  c.type_key = jpg_class_name(pr.sof, jpg_subsamp(pr.ncomp, pr.h, pr.v));
  if (failed) {
    c.flags = ST_CALL_FAILED | ST_CALL_NO_RESPONSE;
    c.reason = o->passthrough   ? o->reason
               : x->bad_marker  ? JPG_NO_BAD_MARKER
               : x->err_in_data ? JPG_NO_ERROR_IN_DATA
                                : JPG_NO_ERROR;
    if (o->passthrough || x->bad_marker) /* replay runs these for real, unlooked-up */
      c.flags |= ST_CALL_NOT_OFFLOADABLE;
  } else if (o->passthrough) {
    c.flags = ST_CALL_NOT_OFFLOADABLE | ST_CALL_NO_RESPONSE;
    c.reason = o->reason;
  } else if (x->bad_marker) {
    /* corrupt data: the library decoded up to a marker it refuses, and
     * fails there when the program reads on (jpeg_finish_decompress) or
     * resynchronises at the next restart marker; replay runs such a
     * decode for real, as it could do neither */
    c.flags = ST_CALL_NOT_OFFLOADABLE | ST_CALL_NO_RESPONSE;
    c.reason = JPG_NO_BAD_MARKER;
  } else if (!complete) {
    c.flags = ST_CALL_NOT_OFFLOADABLE | ST_CALL_NO_RESPONSE;
    c.reason = JPG_NO_ABANDONED;
  } else if (!req || x->pix_lost || (!x->pix && !x->as_digest)) {
    c.flags = ST_CALL_NO_RESPONSE;
    c.reason = JPG_NO_NOMEM;
  } else {
    size_t n = finish_response(o, x);
    if (n) {
      size_t kept = x->as_digest ? n - x->pix_len + JPG_DIG_FIXED : n;
      c.resp = (rt_payload){RT_PAY_OWN, x->pix, kept};
      c.resp_len = n;
      if (x->as_digest)
        c.flags = ST_CALL_RESP_DIGEST;
      x->pix = NULL; /* the runtime owns it now */
    } else {
      c.flags = ST_CALL_NO_RESPONSE;
      c.reason = JPG_NO_NOMEM;
    }
  }
  rt_submit(&c, x->ips, x->nips);
  x->par.api = 0; /* submitted */
}

/* The library's error_exit ends a decode (jpeg_obj.c calls this first). */
static void on_error(jpg_obj *o, int stale) {
  rec_dec *x = o->ext;
  if (!x || !x->par.api || !rt_active(ST_FAMILY_JPEG))
    return;
  if (!stale && o->in_call)
    jpg_busy(o, shim_now_ns() - o->t_in);
  if (o->src_error) /* replay tells this apart: its drain meets the same error */
    x->par.options |= JPG_OPT_SOURCE_ERROR;
  /* Raised by the library itself (not inside the program's source, which
   * a longjmp from a fatal warning leaves counted in: in_src) while the
   * source still held bytes it had not read: where it failed depends on
   * the bytes read so far only, not on where the data ended, and replay
   * answers a decode whose input starts with them as this one (a
   * suspending source's arithmetic decode that ran dry fails with none). */
  const struct jpeg_source_mgr *src = o->cinfo ? o->cinfo->src : NULL;
  x->err_in_data = !o->in_src && src && src->bytes_in_buffer > 0;
  /* Failing before any image data was read (jpeg_start_decompress refusing
   * the parameters) is not a decode: replay fails the same way without
   * looking anything up. */
  if (!x->started && jpg_data_consumed(o) == 0 && !o->passthrough) {
    o->passthrough = 1;
    o->reason = JPG_NO_ERROR;
  }
  submit(o, 1);
}

__attribute__((constructor)) static void rec_jpeg_init(void) {
  jpg_callbacks cb = {on_error, free_dec, NULL, rt_thread_index, 1};
  jpg_set_callbacks(&cb);
}

/* ---- decode parameters ---------------------------------------------------- */

static void take_params(jpg_obj *o, rec_dec *x) {
  shim_free(x->cmap_in);
  jpg_take_params(o, &x->par, &x->cmap_in);
}

static void not_offloadable(jpg_obj *o, int reason) {
  if (o->passthrough)
    return;
  o->passthrough = 1;
  o->reason = (uint16_t)reason;
  rec_dec *x = o->ext;
  if (x) {
    shim_free(x->pix);
    x->pix = NULL;
  }
}

/* The image datastream defines the tables it is decoded with: no
 * tables-only datastream came before it, and its header (read by now)
 * holds quantisation tables and, unless arithmetic-coded, Huffman tables.
 * An abbreviated image decoded after a complete one on the same object
 * uses the tables that one left (libjpeg keeps them across images), which
 * its request does not hold. */
static int own_tables(const jpg_obj *o) {
  return !o->tables.len && !o->cap.failed && o->own_q && o->own_h; /* jpg_header_done */
}

/* jpeg_start_decompress returned TRUE: output geometry is known. */
static void started(jpg_obj *o, rec_dec *x) {
  j_decompress_ptr ci = o->cinfo;
  x->started = 1;
  x->out_w = ci->output_width;
  x->out_h = ci->output_height;
  x->row_bytes = jpg_row_bytes(ci);
  if (ci->raw_data_out) { /* the component planes, as sampled */
    if (jpg_raw_layout_of(ci, &x->rl) != 0)
      not_offloadable(o, JPG_NO_RAW); /* more components than replay serves */
    x->raw = 1;
    x->row_bytes = x->rl.row_bytes[0];
  }
  if (!o->passthrough && !rt_cfg.timing) { /* the timing run keeps no rows */
    x->pix_len = x->raw ? x->rl.bytes : x->row_bytes * x->out_h;
    /* the request alone gives these rows again: no colour map of the
     * program's or the library's, no tables from an earlier datastream,
     * and no dithered RGB565, whose pattern follows output_scanline as the
     * library converts rows, so how many rows the program asked for at a
     * time (djpeg -rgb565 of a progressive 4:2:2 image came out otherwise
     * when decoded again a row at a time) */
    x->as_digest = !rt_cfg.jpeg_pixels && !ci->quantize_colors && own_tables(o) &&
                   !(ci->out_color_space == JCS_RGB565 && ci->dither_mode != JDITHER_NONE);
    if (!x->as_digest) {
      x->pix = shim_alloc(x->pix_len);
      x->pix_lost = x->pix == NULL;
    }
  }
  if (ci->quantize_colors && ci->colormap && ci->actual_number_of_colors > 0 && !x->cmap_in) {
    uint32_t comps = (uint32_t)ci->out_color_components;
    x->cmap_out = shim_alloc((size_t)comps * (size_t)ci->actual_number_of_colors);
    if (x->cmap_out) {
      for (uint32_t c = 0; c < comps; c++)
        memcpy(x->cmap_out + (size_t)c * ci->actual_number_of_colors, ci->colormap[c],
               (size_t)ci->actual_number_of_colors);
      x->cmap_colors = (uint32_t)ci->actual_number_of_colors;
      x->cmap_comps = comps;
    } else {
      x->pix_lost = 1;
    }
  }
}

/* The rows a jpeg_read_scanlines call may write (rows[i] is row first + i),
 * looked at for pages not in memory before the library writes them: each
 * row once a decode, and no more ahead than a call writes (an iMCU row, at
 * most 16 rows with the library's scaling), so that a program that passes
 * every row left at each call is not looked at again and again. */
#define NOTE_AHEAD 16

static void note_rows(rec_dec *x, JSAMPARRAY rows, JDIMENSION first, JDIMENSION max_lines) {
  if (x->note == 0)
    x->note = rt_backoff_pass(&note_watch) ? -1 : 1;
  if (x->note < 0)
    return;
  uint64_t t0 = shim_now_ns();
  uint32_t from = first > x->noted_to ? first : x->noted_to;
  uint64_t to = (uint64_t)first + (max_lines < NOTE_AHEAD ? max_lines : NOTE_AHEAD);
  if (to > x->out_h)
    to = x->out_h;
  for (uint32_t r = from; r < to; r++)
    rt_out_pages_note(&x->out_pages, rows[r - first], x->row_bytes);
  if (to > x->noted_to)
    x->noted_to = (uint32_t)to;
  x->own_ns += shim_now_ns() - t0; /* not the program's: as the row copies */
}

/* ---- hooks: the decode sequence ------------------------------------------------ */

/* The followed decode of cinfo, if any and if recording. */
static jpg_obj *decode_of(j_decompress_ptr cinfo, int min_phase) {
  if (!rt_active(ST_FAMILY_JPEG))
    return NULL;
  jpg_obj *o = jpg_obj_get(cinfo, 0);
  jpg_check_stale(o);
  return o && o->phase >= min_phase && o->ext ? o : NULL;
}

/* A decode that was not finished: submit what it was, then end it. */
static void end_decode(jpg_obj *o) {
  if (o->phase >= JPG_STARTED && rt_active(ST_FAMILY_JPEG))
    submit(o, 0);
  jpg_decode_end(o);
}

SHIM_EXPORT void jpeg_CreateDecompress(j_decompress_ptr cinfo, int version, size_t size) {
  JPG_REAL(real, jpeg_CreateDecompress, JPG_LIBJPEG);
  if (jpg_outermost(FRAME))
    jpg_obj_forget(cinfo); /* the same memory may hold an object never destroyed */
  real(cinfo, version, size);
}

SHIM_EXPORT int jpeg_read_header(j_decompress_ptr cinfo, boolean require_image) {
  JPG_REAL(real, jpeg_read_header, JPG_LIBJPEG);
  if (!jpg_outermost(FRAME) || !rt_active(ST_FAMILY_JPEG))
    return real(cinfo, require_image);
  jpg_obj *o = jpg_obj_get(cinfo, 1);
  if (!o)
    return real(cinfo, require_image);
  jpg_check_stale(o);
  if (o->phase >= JPG_READY)
    end_decode(o); /* the program moved on without finishing */
  if (o->phase == JPG_IDLE) {
    rec_dec *x = shim_zalloc(sizeof *x);
    if (!x)
      return real(cinfo, require_image);
    jpg_decode_begin(o);
    o->ext = x;
    place_sampler_init(&x->placement, shim_now_ns() ^ (uintptr_t)x);
    x->nips = rt_stack(x->ips, ST_MAX_FRAMES);
  }
  jpg_enter(o, FRAME);
  int r = real(cinfo, require_image);
  jpg_leave(o);
  if (r == JPEG_HEADER_OK) {
    o->phase = JPG_READY;
    jpg_header_done(o);
  } else if (r == JPEG_HEADER_TABLES_ONLY) {
    jpg_keep_tables(o);
    jpg_decode_end(o);
  }
  return r;
}

SHIM_EXPORT int jpeg_consume_input(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_consume_input, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_HEADER) : NULL;
  if (!o)
    return real(cinfo);
  jpg_enter(o, FRAME);
  int r = real(cinfo);
  jpg_leave(o);
  if (o->phase == JPG_HEADER && r == JPEG_REACHED_SOS) {
    o->phase = JPG_READY;
    jpg_header_done(o);
  }
  return r;
}

SHIM_EXPORT boolean jpeg_start_decompress(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_start_decompress, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_READY) : NULL;
  if (!o)
    return real(cinfo);
  rec_dec *x = o->ext;
  if (o->phase == JPG_READY) {
    take_params(o, x);
    if (cinfo->buffered_image && !(x->buffered = jpg_buffered_served(cinfo)))
      not_offloadable(o, JPG_NO_BUFFERED);
    else if (o->inherits)
      not_offloadable(o, JPG_NO_INHERITED);
    o->phase = JPG_STARTED;
  }
  o->log_phase = JPG_PHASE_START;
  jpg_enter(o, FRAME);
  boolean r = real(cinfo);
  jpg_leave(o);
  if (r && !x->started)
    started(o, x);
  return r;
}

/* One row the library wrote: where it left it sampled (before the hash or
 * the copy reads it), then hashed, or copied to `at` of the kept pixels. */
static void take_row(rec_dec *x, const uint8_t *row, size_t len, size_t at) {
  place_sample(&x->placement, row, len);
  if (x->as_digest)
    x->digest = jpg_digest_row(x->digest, row, len);
  else
    memcpy(x->pix + at, row, len);
}

SHIM_EXPORT JDIMENSION jpeg_read_scanlines(j_decompress_ptr cinfo, JSAMPARRAY rows,
                                           JDIMENSION max_lines) {
  JPG_REAL(real, jpeg_read_scanlines, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, rows, max_lines);
  rec_dec *x = o->ext;
  JDIMENSION first = cinfo->output_scanline;
  if (x->started && !o->passthrough && !rt_cfg.timing && rows)
    note_rows(x, rows, first, max_lines);
  o->log_phase = JPG_PHASE_ROWS;
  jpg_enter(o, FRAME);
  JDIMENSION n = real(cinfo, rows, max_lines);
  jpg_leave(o);
  if ((x->pix || x->as_digest) && !o->passthrough && !x->pix_lost && !x->rows_done) {
    uint64_t t0 = o->t_out;
    for (JDIMENSION i = 0; i < n; i++) {
      if (first + i >= x->out_h || !rows[i] || (x->as_digest && first + i != x->rows_seen)) {
        x->pix_lost = 1;
        break;
      }
      take_row(x, rows[i], x->row_bytes, (size_t)(first + i) * x->row_bytes);
      x->rows_seen += x->as_digest;
    }
    x->rows_done = x->buffered && !x->pix_lost && first + n >= x->out_h;
    x->own_ns += shim_now_ns() - t0;
  }
  return n;
}

SHIM_EXPORT boolean jpeg_finish_decompress(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_finish_decompress, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo);
  o->log_phase = JPG_PHASE_FINISH;
  jpg_enter(o, FRAME);
  boolean r = real(cinfo);
  jpg_leave(o);
  if (r) {
    submit(o, 0);
    jpg_decode_end(o);
  }
  return r;
}

/* Abort and destroy end a decode (submitting it if it had started); they
 * are not part of its latency. */
static void ending(j_common_ptr cinfo, int destroy) {
  if (!cinfo->is_decompressor || !jpg_outermost(FRAME))
    return;
  j_decompress_ptr d = (j_decompress_ptr)cinfo;
  jpg_obj *o = jpg_obj_get(d, 0);
  if (!o)
    return;
  jpg_check_stale(o);
  if (o->phase != JPG_IDLE && o->ext)
    end_decode(o);
  if (destroy)
    jpg_obj_forget(d);
  else
    jpg_decode_end(o);
}

SHIM_EXPORT void jpeg_abort_decompress(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_abort_decompress, JPG_LIBJPEG);
  ending((j_common_ptr)cinfo, 0);
  real(cinfo);
}

SHIM_EXPORT void jpeg_destroy_decompress(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_destroy_decompress, JPG_LIBJPEG);
  ending((j_common_ptr)cinfo, 1);
  real(cinfo);
}

SHIM_EXPORT void jpeg_abort(j_common_ptr cinfo) {
  JPG_REAL(real, jpeg_abort, JPG_LIBJPEG);
  ending(cinfo, 0);
  real(cinfo);
}

SHIM_EXPORT void jpeg_destroy(j_common_ptr cinfo) {
  JPG_REAL(real, jpeg_destroy, JPG_LIBJPEG);
  ending(cinfo, 1);
  real(cinfo);
}

/* ---- hooks: modes an accelerator would not serve ------------------------------ */

/* Run a call that belongs to the decode's time. */
#define TIMED(o, expr)                                                                             \
  do {                                                                                             \
    jpg_enter(o, FRAME);                                                                           \
    expr;                                                                                          \
    jpg_leave(o);                                                                                  \
  } while (0)

SHIM_EXPORT jvirt_barray_ptr *jpeg_read_coefficients(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_read_coefficients, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_READY) : NULL;
  if (!o)
    return real(cinfo);
  if (o->phase == JPG_READY) {
    take_params(o, o->ext);
    o->phase = JPG_STARTED;
  }
  not_offloadable(o, JPG_NO_COEF);
  jvirt_barray_ptr *r;
  TIMED(o, r = real(cinfo));
  return r;
}

SHIM_EXPORT JDIMENSION jpeg_skip_scanlines(j_decompress_ptr cinfo, JDIMENSION n) {
  JPG_REAL(real, jpeg_skip_scanlines, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, n);
  not_offloadable(o, JPG_NO_SKIP);
  JDIMENSION r;
  TIMED(o, r = real(cinfo, n));
  return r;
}

SHIM_EXPORT void jpeg_crop_scanline(j_decompress_ptr cinfo, JDIMENSION *xoff, JDIMENSION *width) {
  JPG_REAL(real, jpeg_crop_scanline, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o) {
    real(cinfo, xoff, width);
    return;
  }
  not_offloadable(o, JPG_NO_CROP);
  TIMED(o, real(cinfo, xoff, width));
}

/* Raw data output: each call writes one iMCU row of every component's
 * plane (jpg_raw_layout), hashed or kept as jpeg_read_scanlines's rows are. */
static void note_raw(rec_dec *x, JSAMPIMAGE data, uint32_t i) {
  if (x->note == 0)
    x->note = rt_backoff_pass(&note_watch) ? -1 : 1;
  if (x->note < 0 || i < x->noted_to)
    return;
  uint64_t t0 = shim_now_ns();
  for (int c = 0; c < x->rl.n; c++)
    for (uint32_t r = 0, n = jpg_raw_rows(&x->rl, c, i); r < n && data[c]; r++)
      rt_out_pages_note(&x->out_pages, data[c][r], x->rl.row_bytes[c]);
  x->noted_to = i + 1;
  x->own_ns += shim_now_ns() - t0;
}

/* Whether the rows of iMCU row i the library will write overlap: GStreamer's
 * jpegdec points the rows past a plane's last at its last row, so the
 * bottom iMCU row's dummy rows are written over it, and what the program
 * keeps there is not what the library decoded for that row. Rows that go
 * one way by at least a row each, and planes apart, do not. */
static int raw_aliased(const rec_dec *x, JSAMPIMAGE data, uint32_t i) {
  uintptr_t lo[JPG_RAW_MAX] = {0}, hi[JPG_RAW_MAX] = {0};
  for (int c = 0; c < x->rl.n; c++) {
    uint32_t n = jpg_raw_rows(&x->rl, c, i);
    uintptr_t len = x->rl.row_bytes[c];
    if (!n || !data[c])
      continue;
    int dir = 0;
    for (uint32_t r = 1; r < n; r++) {
      uintptr_t a = (uintptr_t)data[c][r - 1], b = (uintptr_t)data[c][r];
      dir |= b >= a + len ? 1 : a >= b + len ? 2 : 3;
      if (dir == 3)
        return 1;
    }
    uintptr_t first = (uintptr_t)data[c][0], last = (uintptr_t)data[c][n - 1];
    lo[c] = first < last ? first : last;
    hi[c] = (first < last ? last : first) + len;
    for (int k = 0; k < c; k++)
      if (hi[k] && lo[c] < hi[k] && lo[k] < hi[c])
        return 1;
  }
  return 0;
}

static void keep_raw(jpg_obj *o, rec_dec *x, JSAMPIMAGE data, uint32_t i) {
  uint64_t t0 = o->t_out;
  if (i >= x->rl.imcu_rows || (x->as_digest && i != x->rows_seen)) {
    x->pix_lost = 1;
    return;
  }
  for (int c = 0; c < x->rl.n; c++) {
    uint32_t n = jpg_raw_rows(&x->rl, c, i);
    size_t len = x->rl.row_bytes[c];
    for (uint32_t r = 0; r < n; r++) {
      const uint8_t *row = data[c] ? data[c][r] : NULL;
      if (!row) {
        x->pix_lost = 1;
        return;
      }
      take_row(x, row, len, jpg_raw_at(&x->rl, c, i, r));
    }
  }
  x->rows_seen++;
  x->own_ns += shim_now_ns() - t0;
}

SHIM_EXPORT JDIMENSION jpeg_read_raw_data(j_decompress_ptr cinfo, JSAMPIMAGE data,
                                          JDIMENSION max_lines) {
  JPG_REAL(real, jpeg_read_raw_data, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, data, max_lines);
  rec_dec *x = o->ext;
  JDIMENSION first = cinfo->output_scanline;
  int keep =
      x->started && x->raw && !o->passthrough && !rt_cfg.timing && data && first % x->rl.lines == 0;
  uint32_t imcu = keep ? first / x->rl.lines : 0;
  if (keep && max_lines >= x->rl.lines)
    note_raw(x, data, imcu);
  /* rows that overlap: the library decodes into rows of standin's, copied
   * to the program's in order after (what the program ends up with is the
   * same), so that what is kept is what it decoded */
  JSAMPROW spare[JPG_RAW_MAX][64];
  JSAMPARRAY spare_planes[JPG_RAW_MAX];
  JSAMPIMAGE lib = data;
  if (keep && max_lines >= x->rl.lines && (x->pix || x->as_digest) && !x->pix_lost &&
      raw_aliased(x, data, imcu)) {
    size_t need = 0;
    for (int c = 0; c < x->rl.n; c++)
      need += (size_t)x->rl.step[c] * x->rl.row_bytes[c];
    if (!x->raw_spare)
      x->raw_spare = shim_alloc(need ? need : 1);
    if (x->raw_spare) {
      uint8_t *at = x->raw_spare;
      for (int c = 0; c < x->rl.n; c++) {
        for (uint32_t r = 0; r < x->rl.step[c] && r < 64; r++, at += x->rl.row_bytes[c])
          spare[c][r] = at;
        spare_planes[c] = spare[c];
      }
      lib = spare_planes;
    } else {
      x->pix_lost = 1;
    }
  }
  o->log_phase = JPG_PHASE_ROWS;
  jpg_enter(o, FRAME);
  JDIMENSION n = real(cinfo, lib, max_lines);
  jpg_leave(o);
  if (lib != data && n) {
    uint64_t t0 = shim_now_ns();
    for (int c = 0; c < x->rl.n; c++)
      for (uint32_t r = 0, k = jpg_raw_rows(&x->rl, c, imcu); r < k; r++)
        memcpy(data[c][r], lib[c][r], x->rl.row_bytes[c]);
    x->own_ns += shim_now_ns() - t0;
  }
  if (n && (x->pix || x->as_digest) && !o->passthrough && !x->pix_lost) {
    if (keep)
      keep_raw(o, x, lib, imcu);
    else
      x->pix_lost = 1;
  }
  return n;
}

SHIM_EXPORT boolean jpeg_start_output(j_decompress_ptr cinfo, int scan) {
  JPG_REAL(real, jpeg_start_output, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, scan);
  rec_dec *x = o->ext;
  /* an output pass over an image of one scan gives a plain decode's rows
   * (its rows wait for their data), again in a later pass; one with other
   * output parameters does not */
  if (!x || !x->buffered || !jpg_pass_same(cinfo, &x->par)) {
    not_offloadable(o, JPG_NO_BUFFERED);
  } else if (!x->rows_done) {
    /* the rows of the first pass that reads them all: a pass given up
     * before (none read, or some) starts them over */
    x->digest = 0;
    x->rows_seen = 0;
    x->pix_lost = !x->as_digest && !x->pix;
  }
  boolean r;
  TIMED(o, r = real(cinfo, scan));
  return r;
}

SHIM_EXPORT boolean jpeg_finish_output(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_finish_output, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo);
  const rec_dec *x = o->ext;
  if (!x || !x->buffered)
    not_offloadable(o, JPG_NO_BUFFERED);
  else if (cinfo->output_scanline >= cinfo->output_height)
    o->log_phase = JPG_PHASE_FINISH; /* it reads on to EOI: as jpeg_finish_decompress would */
  boolean r;
  TIMED(o, r = real(cinfo));
  return r;
}

/* ---- TurboJPEG -------------------------------------------------------------------- */

/* A header read just before a decode of the same buffer on the same handle
 * is part of that decode. */
static SHIM_TLS struct {
  tjhandle h;
  const unsigned char *buf;
  unsigned long size;
  uint64_t t0, ns;
} tj_header;

SHIM_EXPORT int tjDecompressHeader3(tjhandle h, const unsigned char *buf, unsigned long size,
                                    int *width, int *height, int *subsamp, int *colorspace) {
  JPG_REAL(real, tjDecompressHeader3, JPG_LIBTJ);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rt_active(ST_FAMILY_JPEG))
    return real(h, buf, size, width, height, subsamp, colorspace);
  shim_enter(frame);
  uint64_t t0 = shim_now_ns();
  int r = real(h, buf, size, width, height, subsamp, colorspace);
  uint64_t t1 = shim_now_ns();
  shim_leave();
  tj_header.h = h;
  tj_header.buf = buf;
  tj_header.size = size;
  tj_header.t0 = t0;
  tj_header.ns = t1 - t0;
  return r;
}

/* Everything of a TurboJPEG call but the destination buffers. */
typedef struct {
  tjhandle h;
  const unsigned char *jpeg;
  unsigned long size;
  jpg_params par;
  int width, height, pixfmt, pad;
  uint64_t t0, t1;
  int ret;
} tj_call;

/* Request blob of a TurboJPEG call: header, then the caller's bytes. */
static uint8_t *tj_request(const tj_call *t, size_t *len) {
  size_t hl = jpg_req_header_len(&t->par);
  *len = hl + t->size;
  uint8_t *b = shim_alloc(*len);
  if (!b)
    return NULL;
  jpg_req_write_header(b, &t->par, NULL);
  memcpy(b + hl, t->jpeg, t->size);
  return b;
}

/* Before a tjDecompress2 call: which pages of the buffer the caller's
 * arguments describe are in memory (the output may be smaller, scaled:
 * only the pages its rows cover are counted, after the call). */
static void tj_snap(rt_page_snap *s, const unsigned char *jpeg, unsigned long size,
                    const unsigned char *dst, int width, int pitch, int height, int pixfmt) {
  s->vec = NULL;
  if (rt_cfg.timing || pixfmt < 0 || pixfmt >= TJ_NUMPF || width < 0 || pitch < 0 || height < 0)
    return;
  uint64_t w = (uint64_t)width, h = (uint64_t)height;
  if (!w || !h) { /* the image's own size: our scanner, not the library's */
    jpg_probe pr;
    jpg_probe_header(jpeg, size, &pr);
    w = w ? w : pr.width;
    h = h ? h : pr.height;
  }
  uint64_t stride = pitch ? (uint64_t)pitch : w * (uint64_t)tjPixelSize[pixfmt];
  if (h && stride && stride <= SIZE_MAX / h)
    rt_page_snap_take(s, dst, (size_t)(stride * h));
}

/* The bytes a decode writes in plane i of d: its rows, strides between. */
static size_t plane_span(const jpg_tj_layout *L, const jpg_tj_dest *d, int i) {
  return L->rows[i] > 0 ? d->stride[i] * (size_t)(L->rows[i] - 1) + (size_t)L->row_bytes[i] : 0;
}

/* From plane 0's start to the end of the plane that ends last: the planes
 * of tjDecompressToYUV2, which lie in one buffer. */
static size_t planes_span(const jpg_tj_layout *L, const jpg_tj_dest *d) {
  uintptr_t end = 0;
  for (int i = 0; i < L->nplanes; i++) {
    size_t n = plane_span(L, d, i);
    if (n && (uintptr_t)d->plane[i] + n > end)
      end = (uintptr_t)d->plane[i] + n;
  }
  return end > (uintptr_t)d->plane[0] ? (size_t)(end - (uintptr_t)d->plane[0]) : 0;
}

/* A TurboJPEG decode's snapshots of the pages it writes (n of them, 0-3)
 * and the spans whose fresh pages its fault time counts. */
typedef struct {
  rt_page_snap s[3];
  const void *at[3];
  size_t span[3];
  int n;
} tj_pages;

/* Before a YUV decode: which pages of its planes are in memory (one
 * snapshot over tjDecompressToYUV2's buffer, one a plane for
 * tjDecompressToYUVPlanes). */
static void yuv_snap(tj_pages *pg, const jpg_tj_layout *L, const jpg_tj_dest *d, int one_buffer) {
  pg->n = 0;
  if (rt_cfg.timing)
    return;
  pg->n = one_buffer ? 1 : L->nplanes < 3 ? L->nplanes : 3;
  for (int i = 0; i < pg->n; i++) {
    pg->at[i] = d->plane[i];
    pg->span[i] = one_buffer ? planes_span(L, d) : plane_span(L, d, i);
  }
  rt_page_snaps_take(pg->s, pg->n, pg->at, pg->span);
}

static void tj_submit(tj_call *t, void *const *ips, int nips, const jpg_tj_layout *L,
                      const jpg_tj_dest *d, tj_pages *pg) {
  rt_call c = {0};
  c.api = ST_API_TJ_DECODE;
  c.start_ns = t->t0;
  c.latency_ns = t->t1 - t->t0;
  c.end_ns = t->t1;
  if (tj_header.h == t->h && tj_header.buf == t->jpeg && tj_header.size == t->size) {
    c.start_ns = tj_header.t0;
    c.latency_ns += tj_header.ns;
  }
  tj_header.h = NULL;
  if (SHIM_UNLIKELY(rt_cfg.timing)) { /* record --retime's second run: the latency only */
    rt_timing_add(ST_API_TJ_DECODE, c.start_ns, c.latency_ns, 0,
                  st_tj_timing_size(t->size, (uint64_t)(int64_t)t->ret));
    return;
  }
  c.result = (uint64_t)(int64_t)t->ret;
  jpg_probe pr;
  jpg_probe_header(t->jpeg, t->size, &pr);
  size_t req_len;
  uint8_t *req = tj_request(t, &req_len);
  if (req) {
    jpg_req_fingerprint(req, req_len, ST_API_TJ_DECODE, c.fp);
    c.req = (rt_payload){RT_PAY_OWN, req, req_len};
  }
  c.req_len = req_len;
  c.type_key = jpg_class_name(pr.sof, jpg_subsamp(pr.ncomp, pr.h, pr.v));
  c.nfeat = (uint8_t)jpg_features(c.feat, &pr, t->size, L ? (uint32_t)L->out_w : 0,
                                  L ? (uint32_t)L->out_h : 0, L ? L->bytes : 0,
                                  L ? (uint32_t)L->scale_num : 1, L ? (uint32_t)L->scale_denom : 1);
  if (pg->n && (c.feat[ST_JPF_FAULT_NS] =
                    rt_page_snaps_fault_ns(pg->s, pg->n, pg->at, pg->span, c.latency_ns)) != 0)
    c.nfeat = ST_JPF_NFEAT;
  /* the written bytes, or a digest of them (as for libjpeg, see above) */
  int as_digest = !rt_cfg.jpeg_pixels;
  uint8_t *resp =
      t->ret == 0 && L && d && req ? shim_alloc(as_digest ? JPG_DIG_FIXED : L->bytes) : NULL;
  if (t->ret != 0) {
    c.flags = ST_CALL_FAILED | ST_CALL_NO_RESPONSE;
    c.reason = JPG_NO_TJ_ERROR;
  } else if (!resp) {
    c.flags = ST_CALL_NO_RESPONSE;
    c.reason = JPG_NO_NOMEM;
  } else {
    /* before the copy or the hash reads them */
    c.feat[ST_JPF_OUT_COLD] = jpg_tj_out_cold(L, d, c.start_ns ^ (uintptr_t)resp);
    if (as_digest) {
      jpg_digest g = {(uint32_t)L->row_bytes[0], (uint32_t)L->rows[0], jpg_tj_digest(L, d)};
      jpg_dig_write(resp, &g);
      c.flags = ST_CALL_RESP_DIGEST;
      c.resp = (rt_payload){RT_PAY_OWN, resp, JPG_DIG_FIXED};
    } else {
      jpg_tj_pack(L, d, resp);
      c.resp = (rt_payload){RT_PAY_OWN, resp, L->bytes};
    }
    c.resp_len = L->bytes;
  }
  rt_submit(&c, ips, nips);
}

/* frame: the hook's; lib: the real function (shim_outermost) */
static int tj_skip(void *frame, const void *lib, tjhandle h, const unsigned char *jpeg,
                   unsigned long size, const void *dst) {
  return !shim_outermost(frame, lib) || !rt_active(ST_FAMILY_JPEG) || !h || !jpeg || !size || !dst;
}

SHIM_EXPORT int tjDecompress2(tjhandle h, const unsigned char *jpeg, unsigned long size,
                              unsigned char *dst, int width, int pitch, int height, int pixfmt,
                              int flags) {
  JPG_REAL(real, tjDecompress2, JPG_LIBTJ);
  void *frame = __builtin_frame_address(0);
  if (tj_skip(frame, (const void *)real, h, jpeg, size, dst))
    return real(h, jpeg, size, dst, width, pitch, height, pixfmt, flags);
  tj_call t = {h, jpeg, size, {0}, width, height, pixfmt, 0, 0, 0, 0};
  shim_enter(frame);
  tj_pages pg = {.n = 1};
  tj_snap(&pg.s[0], jpeg, size, dst, width, pitch, height, pixfmt);
  t.t0 = shim_now_ns();
  t.ret = real(h, jpeg, size, dst, width, pitch, height, pixfmt, flags);
  t.t1 = shim_now_ns();
  t.par = (jpg_params){.api = ST_API_TJ_DECODE,
                       .entry = JPG_ENTRY_TJ_RGB,
                       .out_color_space = pixfmt,
                       .scale_num = (uint32_t)width,
                       .scale_denom = (uint32_t)height,
                       .dct_method = flags};
  void *ips[ST_MAX_FRAMES];
  int nips = rt_stack(ips, ST_MAX_FRAMES);
  jpg_tj_layout L;
  jpg_tj_dest d;
  int ok = jpg_tj_layout_of(jpeg, size, JPG_ENTRY_TJ_RGB, width, height, pixfmt, &L) == 0;
  if (ok) { /* the packed rows' span, known now */
    jpg_tj_dest_rgb(&L, dst, pitch, &d);
    pg.at[0] = d.plane[0];
    pg.span[0] = plane_span(&L, &d, 0);
  }
  tj_submit(&t, ips, nips, ok ? &L : NULL, ok ? &d : NULL, &pg);
  shim_leave();
  return t.ret;
}

SHIM_EXPORT int tjDecompressToYUVPlanes(tjhandle h, const unsigned char *jpeg, unsigned long size,
                                        unsigned char **planes, int width, int *strides, int height,
                                        int flags) {
  JPG_REAL(real, tjDecompressToYUVPlanes, JPG_LIBTJ);
  void *frame = __builtin_frame_address(0);
  if (tj_skip(frame, (const void *)real, h, jpeg, size, planes) || !planes[0])
    return real(h, jpeg, size, planes, width, strides, height, flags);
  tj_call t = {h, jpeg, size, {0}, width, height, -1, 0, 0, 0, 0};
  shim_enter(frame);
  /* the layout first (the header only), for the planes' snapshots */
  jpg_tj_layout L;
  jpg_tj_dest d;
  int ok = jpg_tj_layout_of(jpeg, size, JPG_ENTRY_TJ_YUV_PLANES, width, height, -1, &L) == 0;
  if (ok)
    jpg_tj_dest_planes(&L, planes, strides, &d);
  tj_pages pg = {.n = 0};
  if (ok)
    yuv_snap(&pg, &L, &d, 0);
  t.t0 = shim_now_ns();
  t.ret = real(h, jpeg, size, planes, width, strides, height, flags);
  t.t1 = shim_now_ns();
  t.par = (jpg_params){.api = ST_API_TJ_DECODE,
                       .entry = JPG_ENTRY_TJ_YUV_PLANES,
                       .out_color_space = -1,
                       .scale_num = (uint32_t)width,
                       .scale_denom = (uint32_t)height,
                       .dct_method = flags};
  void *ips[ST_MAX_FRAMES];
  int nips = rt_stack(ips, ST_MAX_FRAMES);
  tj_submit(&t, ips, nips, ok ? &L : NULL, ok ? &d : NULL, &pg);
  shim_leave();
  return t.ret;
}

SHIM_EXPORT int tjDecompressToYUV2(tjhandle h, const unsigned char *jpeg, unsigned long size,
                                   unsigned char *dst, int width, int pad, int height, int flags) {
  JPG_REAL(real, tjDecompressToYUV2, JPG_LIBTJ);
  void *frame = __builtin_frame_address(0);
  if (tj_skip(frame, (const void *)real, h, jpeg, size, dst))
    return real(h, jpeg, size, dst, width, pad, height, flags);
  tj_call t = {h, jpeg, size, {0}, width, height, -1, pad, 0, 0, 0};
  shim_enter(frame);
  /* the layout first (the header only), for the buffer's snapshot */
  jpg_tj_layout L;
  jpg_tj_dest d;
  int ok = jpg_tj_layout_of(jpeg, size, JPG_ENTRY_TJ_YUV, width, height, -1, &L) == 0 &&
           jpg_tj_dest_yuv(&L, dst, width, pad, height, &d) == 0;
  tj_pages pg = {.n = 0};
  if (ok)
    yuv_snap(&pg, &L, &d, 1);
  t.t0 = shim_now_ns();
  t.ret = real(h, jpeg, size, dst, width, pad, height, flags);
  t.t1 = shim_now_ns();
  t.par = (jpg_params){.api = ST_API_TJ_DECODE,
                       .entry = JPG_ENTRY_TJ_YUV,
                       .out_color_space = -1,
                       .scale_num = (uint32_t)width,
                       .scale_denom = (uint32_t)height,
                       .dct_method = flags,
                       .options = (uint32_t)pad};
  void *ips[ST_MAX_FRAMES];
  int nips = rt_stack(ips, ST_MAX_FRAMES);
  tj_submit(&t, ips, nips, ok ? &L : NULL, ok ? &d : NULL, &pg);
  shim_leave();
  return t.ret;
}

/* rep_jpeg.c — replay hooks for libjpeg and TurboJPEG decoding.
 *
 * libjpeg. jpeg_read_header runs for real (it is cheap, and it leaves the
 * object exactly as the program expects: image size, colour space, saved
 * markers), and its consumed bytes are kept. jpeg_start_decompress computes
 * the output size with the real jpeg_calc_output_dimensions but does not
 * start the real decompressor. The decode is identified by content, which
 * needs all its compressed bytes: the shim drains the program's source up
 * to EOI (the real decompressor would consume them anyway), normalises
 * them like the recording did and looks the request up.
 *
 * Where replay spins: once per image, when the request is identified —
 * in jpeg_start_decompress for images the real library would read whole
 * there (several scans, e.g. progressive; or colour quantisation, whose
 * map the program reads right after), and in the first jpeg_read_scanlines
 * otherwise. Those are the calls in which the real library could suspend
 * (return FALSE or 0 rows) for lack of input, so a program with a
 * suspending source sees suspension exactly where it handles it: while the
 * drain waits for data, the call returns FALSE / 0 rows. The deadline is
 * the decode's first library call plus the predicted latency, with the time
 * the program spent between its library calls added (the recorded latency
 * does not contain that time either). Rows are then copied from the saved
 * pixels; the messages the library emitted while decoding are emitted
 * again through the program's error manager at the same rows.
 *
 * The real object stays in the state jpeg_read_header left it in:
 * jpeg_finish_decompress calls the source's term_source and the real
 * jpeg_abort (which is what the real finish ends with), jpeg_abort and
 * jpeg_destroy run for real. A request that is not in the recording, a
 * recorded failure, or a mode an accelerator would not serve (buffered
 * image over several scans, coefficients, skip, crop) runs the real
 * decompressor:
 * the drained bytes are fed back first (jpeg_obj.c), then the program's
 * source, so the program sees the same rows, messages and errors as
 * without standin.
 *
 * TurboJPEG: a call is answered from the recording by copying the saved
 * rows or planes into the caller's buffers (honouring pitch and strides). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
/* after jpeglib.h: the input controller, whose eoi_reached jpeg_input_complete reads */
#include <jpegint.h>
#include <turbojpeg.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "jpeg_obj.h"
#include "jpeg_req.h"
#include "jpeg_tj.h"
#include "pb_internal.h" /* pbw__hash64 */
#include "placement.h"
#include "rp.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"

#define FRAME __builtin_frame_address(0)

/* What replay does with a decode after jpeg_start_decompress. */
enum {
  R_PENDING = 0, /* not identified yet */
  R_SERVE = 1,   /* answered from the recording */
  R_REAL = 2,    /* the real decompressor runs it */
};

typedef struct {
  jpg_params par;
  uint8_t *cmap_in;
  int state;
  int pass;         /* not offloadable: real, never identified */
  unsigned no_why;  /* pass: JPG_NO_* + 1 of why, 0: told by how it ends */
  int no_counted;   /* pass: counted (rp_not_offloadable), or served before */
  int real_started; /* the real jpeg_start_decompress returned TRUE */
  int multi_scan;   /* identified in jpeg_start_decompress */
  int buffered;     /* buffered-image mode, served (jpg_buffered_served): the
                       real jpeg_start_output and jpeg_finish_output keep the
                       library's state; the rows are served */
  int setup_ran;    /* the real jpeg_start_decompress set up the decompressor */
  jpg_scan scan;
  int scan_on;
  size_t stuck_upto; /* request bytes compared with abandoned decodes so far */
  size_t grow_ok;    /* the request so far may grow into a recorded one: its
                        first this many bytes begin one (may_grow_into) */
  int drop_hit;      /* the drain stopped where a recorded program dropped
                        bytes (dropped_here) */
  size_t kept_tail;  /* which the source did not let it give back (one that
                        forgets its buffer, Chromium's): how many */
  size_t early_upto; /* jpg_scan.first_end looked up while suspended (ended_early) */
  int early;         /* served so, before its EOI was in: finish drains the rest */
  /* served */
  const uint8_t *pix;
  size_t row_bytes;
  size_t out_bytes; /* of every row (raw: every plane) */
  int raw;          /* raw data output: pix holds the planes */
  jpg_raw_layout rl;
  uint32_t out_cold; /* per mille of the rows to deliver to memory */
  uint32_t cold_acc; /* error diffusion over the rows */
  int late;          /* the call's overrun is counted (rp_finish, rp_late) */
  uint64_t held;     /* of the modelled time, kept back for serving the rows
                        (rp_ticket.hold): spent by the later calls, the rest
                        spun after the last row and as the decode ends */
  pthread_t held_by; /* the thread whose spin kept it back */
  uint64_t late_ns;  /* the calls after the spin took, so far (rows_learn) */
  uint64_t fault_ns; /* of which the recorded decode's page faults, expected */
  int learned;       /* the last row was served: rows_learn ran */
  jpg_ext ext;
  uint32_t next_msg;
  /* real */
  int miss; /* RDB_FB_* + 1 of a miss to report at the end, 0 = none */
  void *miss_caller;
  const char *type;
  uint64_t pixels;  /* the image's, for --on-miss nearest */
  uint64_t variant; /* rdb_near_variant, likewise */
  int count_sw;     /* report its time as software at the end */
  uint64_t sw_from; /* busy_ns when the real library took over */
  int eoi_set;      /* input_complete set the input controller's eoi_reached */
  int given_up;     /* runs for real as an occurrence recorded given up */
} rep_dec;

static void free_dec(jpg_obj *o) {
  rep_dec *x = o->ext;
  shim_free(x->cmap_in);
  if (x->scan_on)
    jpg_scan_free(&x->scan);
  shim_free(x);
}

/* --on-miss nearest, at the end of a decode that was not recorded: the
 * real library decoded it, over the program's calls; it is timed from the
 * recorded decodes of its class nearest in pixels, from its first call
 * with the program's time between calls left out (as a served decode's
 * deadline is), the real library's time being harness time inside that
 * window. Spins in the call that ends the decode. */
static void near_done(jpg_obj *o, rep_dec *x, int reason) {
  uint64_t now = rp_now();
  uint64_t busy = o->busy_ns + (o->in_call ? now - o->t_in : 0);
  uint64_t t0 = now > busy ? now - busy : 0;
  uint64_t before_real = x->sw_from < busy ? x->sw_from : busy;
  /* like a decode that runs in software, its time before the real library
   * took over (the header, the drain) is not counted apart */
  rp_near_done(t0, t0 + before_real, ST_API_JPEG_DECODE, x->type, x->variant, x->pixels, reason,
               0);
}

/* A decode's miss of `reason`: counted at once, or, when --on-miss nearest
 * may time it (a request not recorded), 1 and counted by rp_near_done. */
static int miss_or_near(int reason, int api, const char *type, void *caller) {
  if (reason == RDB_FB_NOT_IN_TRACE)
    return rp_miss_near(reason, api, type, caller);
  rp_miss(reason, api, type, caller);
  return 0;
}

/* The decode is one no accelerator would serve (JPG_NO_* why): the real
 * library runs it, and it is counted as such when it ends (account). */
static void not_offloadable(rep_dec *x, unsigned why) {
  x->pass = 1;
  if (!x->no_why)
    x->no_why = why + 1;
}

/* A decode that ran for real as not offloadable, counted once as it ends:
 * why it is, or else how it ended, as the recorder tells it (a decode of
 * an image the recording does not hold given up before its last row was
 * counted nowhere: a replay of pdftoppm on a PDF with a truncated image
 * said "0 calls"). */
static void count_pass(jpg_obj *o, rep_dec *x, int ok) {
  if (!x->pass || x->no_counted)
    return;
  x->no_counted = 1;
  unsigned why = x->no_why                                             ? x->no_why - 1
                 : !ok                                                 ? JPG_NO_ERROR
                 : o->cinfo->output_scanline < o->cinfo->output_height ? JPG_NO_ABANDONED
                                                                       : JPG_NO_NONE;
  rp_not_offloadable(why);
}

/* The decode ends (finish, abort, destroy: ok; or an error). A miss is
 * reported only now: a decode may turn out to be one an accelerator would
 * not serve (skip, crop) after it was looked up, and the recording kept no
 * response for those on purpose. Then the time of the real library is
 * reported. Under --on-miss nearest a decode that was not recorded and
 * ended well is timed as its nearest recorded ones instead. */
static void account(jpg_obj *o, int ok) {
  rep_dec *x = o->ext;
  if (!x)
    return;
  if (x->miss && !x->pass) {
    int reason = x->miss - 1;
    x->miss = 0;
    if (!ok) {
      rp_miss(reason, ST_API_JPEG_DECODE, x->type, x->miss_caller);
    } else if (miss_or_near(reason, ST_API_JPEG_DECODE, x->type, x->miss_caller)) {
      near_done(o, x, reason);
      x->count_sw = 0; /* reported by rp_near_done */
    }
  }
  x->miss = 0;
  count_pass(o, x, ok);
  if (x->count_sw && o->busy_ns > x->sw_from)
    rp_software_done(o->busy_ns - x->sw_from);
  x->count_sw = 0;
}

static void on_error(jpg_obj *o, int stale) {
  if (o->in_call && !stale)
    o->busy_ns += rp_now() - o->t_in;
  account(o, 0);
}

__attribute__((constructor)) static void rep_jpeg_init(void) {
  jpg_callbacks cb = {on_error, free_dec, rp_now, NULL, 0};
  jpg_set_callbacks(&cb);
}

static jpg_obj *decode_of(j_decompress_ptr cinfo, int min_phase) {
  if (!rp_on())
    return NULL;
  jpg_obj *o = jpg_obj_get(cinfo, 0);
  jpg_check_stale(o);
  return o && o->phase >= min_phase && o->ext ? o : NULL;
}

static void end_decode(jpg_obj *o) {
  rep_dec *x = o->ext;
  /* Ended before its last row: the recording kept it as not offloadable
   * (abandoned), which is why it was not found. */
  if (x && x->state == R_REAL && o->cinfo->output_scanline < o->cinfo->output_height)
    x->pass = 1;
  /* Served, then given up: it was timed as the whole image (as an
   * accelerator decodes it), where the library stops at the last row read.
   * An occurrence the recording holds given up (mupdf's bands decode a
   * page's images again and stop after the band's rows) is not served: its
   * sample is RDB_SW_ABANDONED, kept in software, and the real library
   * runs it (identify). This one was recorded whole, or the program gives
   * up more often than it did. Said, not hidden (cmd_replay.c). */
  if (x && x->state == R_SERVE && o->cinfo->output_scanline < o->cinfo->output_height)
    rp_served_given_up();
  /* the modelled time the rows and the end did not use, spun by the thread
   * that served them: another one (libvips's main thread destroys what its
   * pool decoded) would wait where the program did not */
  if (x && x->held && pthread_equal(x->held_by, pthread_self()))
    rp_spin_held(&x->held, 0);
  if (x)
    x->held = 0;
  /* Recorded given up at this point of the sequence, run for real, and
   * read whole: the program decodes the image in another order than it
   * did (two objects' decodes that start in one order and read their
   * first rows in the other), so some decode of it was or will be served
   * and given up. Counted, as that one is. */
  if (x && x->given_up && o->cinfo->output_scanline >= o->cinfo->output_height)
    rp_given_up_read_whole();
  if (x)
    x->given_up = 0;
  account(o, 1);
  jpg_decode_end(o);
}

/* ---- running for real ------------------------------------------------------- */

/* From now on the real library does the work, reading the drained bytes
 * first. count_sw: its time is reported as software when the decode ends. */
static void to_real(jpg_obj *o, rep_dec *x, int count_sw) {
  if (x->state == R_REAL)
    return;
  x->state = R_REAL;
  x->count_sw = count_sw;
  if (x->eoi_set) { /* the real library reads the input itself */
    o->cinfo->inputctl->eoi_reached = FALSE;
    x->eoi_set = 0;
  }
  x->sw_from = o->busy_ns + (rp_now() - o->t_in);
  if (x->scan_on) {
    jpg_scan_free(&x->scan);
    x->scan_on = 0;
  }
  if (o->drained.len)
    jpg_feed_begin(o);
}

/* Run the real jpeg_start_decompress once (it may have to be called again
 * after a suspension). Returns whether it completed. */
static boolean go_real(jpg_obj *o, rep_dec *x, int count_sw) {
  JPG_REAL(real_start, jpeg_start_decompress, JPG_LIBJPEG);
  to_real(o, x, count_sw);
  if (!x->real_started)
    x->real_started = real_start(o->cinfo);
  return (boolean)x->real_started;
}

/* ---- identification ---------------------------------------------------------- */

/* The saved response fits this decode: pixels for every row, and a valid
 * extension after them. */
static int take_response(jpg_obj *o, rep_dec *x, const rdb_entry *e) {
  j_decompress_ptr ci = o->cinfo;
  x->row_bytes = jpg_row_bytes(ci);
  size_t pix = x->row_bytes * ci->output_height;
  x->raw = ci->raw_data_out != 0;
  if (x->raw) {
    if (jpg_raw_layout_of(ci, &x->rl) != 0)
      return -1;
    pix = x->rl.bytes;
  }
  x->out_bytes = pix;
  const uint8_t *r = rp_ptr(e->resp_off, e->resp_len);
  if (!r || e->resp_len < pix)
    return -1;
  memset(&x->ext, 0, sizeof x->ext);
  if (e->resp_len > pix && jpg_ext_read(r + pix, e->resp_len - pix, &x->ext) != 0)
    return -1;
  if (ci->quantize_colors && !x->cmap_in &&
      (x->ext.ncolors == 0 || x->ext.ncomp != (uint32_t)ci->out_color_components))
    return -1;
  x->pix = r;
  x->next_msg = 0;
  return 0;
}

/* The colour map the library made when recorded, in the image pool (freed
 * by jpeg_abort, like the real one). */
static void put_colormap(jpg_obj *o, rep_dec *x) {
  j_decompress_ptr ci = o->cinfo;
  if (!ci->quantize_colors || x->cmap_in || ci->colormap) /* made by the real setup */
    return;
  JSAMPARRAY map =
      (*ci->mem->alloc_sarray)((j_common_ptr)ci, JPOOL_IMAGE, x->ext.ncolors, x->ext.ncomp);
  for (uint32_t c = 0; c < x->ext.ncomp; c++)
    memcpy(map[c], x->ext.cmap + (size_t)c * x->ext.ncolors, x->ext.ncolors);
  ci->colormap = map;
  ci->actual_number_of_colors = (int)x->ext.ncolors;
}

/* Emit the recorded messages of `phase` up to output row `row`. */
static void emit_due(jpg_obj *o, rep_dec *x, int phase, uint32_t row) {
  while (x->next_msg < x->ext.nmsgs) {
    jpg_msg m;
    jpg_ext_msg(&x->ext, x->next_msg, &m);
    if (m.phase > phase || (m.phase == phase && phase == JPG_PHASE_ROWS && m.row > row))
      return;
    x->next_msg++;
    if (m.phase == JPG_PHASE_START && m.pos == 0 && x->setup_ran)
      continue; /* the real setup emitted it already */
    jpg_emit(o, &m);
  }
}

/* Whether e's saved request is these bytes (head, then body). */
static int saved_is(const rdb_entry *e, const void *head, size_t hlen, const void *body,
                    size_t blen) {
  const uint8_t *saved = rp_ptr(e->req_off, e->req_len);
  return saved && e->req_len == hlen + blen && memcmp(saved, head, hlen) == 0 &&
         (blen == 0 || memcmp(saved + hlen, body, blen) == 0);
}

/* The entry the recorded order says this thread decodes next (rp.c), if
 * its saved request is these bytes: found without hashing a JPEG whose
 * bytes the lookup compares anyway. */
static const rdb_entry *predicted(int api, const void *head, size_t hlen, const void *body,
                                  size_t blen) {
  const rdb_entry *e = rp_predicted(api, 0);
  if (!e)
    return NULL;
  int right = saved_is(e, head, hlen, body, blen);
  rp_predicted_was(e, right);
  return right ? e : NULL;
}

/* The request in the recording, or NULL with *reason (RDB_FB_*). */
static const rdb_entry *find(const uint8_t *req, size_t len, int *reason) {
  const rdb_entry *p = predicted(ST_API_JPEG_DECODE, req, len, NULL, 0);
  if (p)
    return p;
  uint8_t fp[16];
  jpg_req_fingerprint(req, len, ST_API_JPEG_DECODE, fp);
  const rdb_entry *e = rp_lookup(fp);
  *reason = RDB_FB_NOT_IN_TRACE;
  if (!e)
    return NULL;
  if (!saved_is(e, req, len, NULL, 0)) {
    *reason = RDB_FB_MISMATCH; /* a fingerprint collision: never answer it */
    return NULL;
  }
  return e;
}

/* The first of st[0, n) longer than len. */
static size_t stuck_after(const rdb_stuck *st, size_t n, uint64_t len) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st[mid].len <= len)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* At most this many distinct recorded lengths are compared a decode
 * (failed_prefix): a recording with more decodes that failed partway
 * leaves the rest as misses. */
#define FAILED_PREFIX_LENGTHS 64

/* A recorded decode that failed partway through its data whose request is
 * a prefix of this one's (req, len bytes, EOI last; written over while it
 * looks, and put back): its program ended the
 * decode at an error the library raised there (GraphicsMagick makes
 * libjpeg's "Corrupt JPEG data" warnings fatal), so the recording holds
 * only the bytes that library had read. The real library, reading the
 * same bytes first, fails at the same place. Compared by hash
 * (rdb_stuck), each distinct recorded length once, and confirmed by
 * looking the prefix up; NULL when none is. */
static const rdb_entry *failed_prefix(uint8_t *req, size_t len) {
  size_t n;
  const rdb_stuck *st = rp_stuck(&n);
  if (!st)
    return NULL;
  uint64_t at = UINT64_MAX, h = 0;
  unsigned lengths = 0;
  for (size_t i = 0; i < n && st[i].len + 2 < len; i++) {
    if (!st[i].in_data)
      continue;
    if (st[i].len != at) {
      if (++lengths > FAILED_PREFIX_LENGTHS)
        return NULL;
      at = st[i].len;
      h = pbw__hash64(req, (size_t)at);
    }
    if (h != st[i].hash)
      continue;
    /* the prefix and an EOI, written over the request and put back */
    uint8_t keep[2] = {req[at], req[at + 1]};
    req[at] = 0xFF;
    req[at + 1] = 0xD9;
    int reason;
    const rdb_entry *e = find(req, (size_t)at + 2, &reason);
    req[at] = keep[0];
    req[at + 1] = keep[1];
    if (e && (e->flags & RDB_ENTRY_FAILED))
      return e;
  }
  return NULL;
}

enum { ID_SUSPENDED, ID_SERVED, ID_REAL };

/* A decode the recording says failed (e): its recorded time is spun, then
 * the real library fails the same way from the drained bytes. */
static int answer_failed(jpg_obj *o, rep_dec *x, const rdb_entry *e) {
  rp_ticket tk;
  int served = rp_begin(&tk, e, o->t_in - o->busy_ns);
  if (served)
    rp_finish(&tk);
  go_real(o, x, !served);
  return ID_REAL;
}

/* The request's header and tables, written into the scanner's reserved
 * front as jpg_request_finish will (the caller checked that they fit). */
static void write_front(jpg_obj *o, rep_dec *x) {
  jpg_req_write_header(x->scan.out, &x->par, x->cmap_in);
  if (o->tables.len)
    memcpy(x->scan.out + jpg_req_header_len(&x->par), o->tables.p, o->tables.len);
}

/* Whether the request so far starts with st's (the front written first,
 * once: *wrote). */
static int stuck_is(jpg_obj *o, rep_dec *x, const rdb_stuck *st, int *wrote) {
  jpg_scan *sc = &x->scan;
  if (st->len < sc->reserve)
    return 0;
  if (!*wrote) {
    write_front(o, x);
    *wrote = 1;
  }
  return pbw__hash64(sc->out, st->len) == st->hash;
}

/* Whether the drain, suspended, stands where a recorded decode ran out of
 * data and its program gave up (rdb_stuck): the request so far starts with
 * that decode's. A program whose suspending source is at the end of a
 * truncated image takes the rows the library could decode and stops;
 * served, it got none (poppler rendered the page blank). Each recorded
 * length is compared once a decode, when the request grows past it; the
 * header and tables are written into the scanner's reserved front, as
 * jpg_request_finish will. */
static const rdb_stuck *stuck_here(jpg_obj *o, rep_dec *x) {
  size_t n;
  const rdb_stuck *st = rp_stuck(&n);
  jpg_scan *sc = &x->scan;
  if (!st || !sc->out || sc->oom)
    return NULL;
  x->par.tables_len = (uint32_t)o->tables.len;
  size_t hl = jpg_req_header_len(&x->par);
  if (sc->reserve != hl + o->tables.len)
    return NULL;
  /* an exact one (its unread bytes known) stands only where its drop was
   * found (dropped_here) and its request is the drain's, less any bytes
   * the source kept; any other, once, when the request grows past it: of
   * those it has grown past, the longest, nearest to where the drain
   * stands (two arithmetic decodes whose sources suspended every 500 and
   * every 300 bytes failed at 582 and 382: the first took the second's
   * failure, whose one sample was then taken twice, t241) */
  size_t at = x->drop_hit && sc->out_len > x->kept_tail ? sc->out_len - x->kept_tail : 0;
  int wrote = 0;
  const rdb_stuck *found = NULL;
  for (size_t i = at ? stuck_after(st, n, at - 1) : n; i < n && st[i].len == at && !found; i++)
    if (st[i].exact && stuck_is(o, x, &st[i], &wrote))
      found = &st[i];
  if (sc->out_len > x->stuck_upto) {
    const rdb_stuck *last = NULL;
    for (size_t i = stuck_after(st, n, x->stuck_upto); i < n && st[i].len <= sc->out_len && !found;
         i++)
      if (!st[i].exact && stuck_is(o, x, &st[i], &wrote))
        last = &st[i];
    if (last)
      found = last;
    x->stuck_upto = sc->out_len;
  }
  return found;
}

/* Whether the request so far (jpg_scan_kept of it, the front written) may
 * be the start of a recorded decode's request, so that bytes still to come
 * may make it one the recording holds: replay then waits for them, as an
 * accelerator decodes whole images. When no recorded request starts so
 * (no rdb_prefix row has the largest power of two it holds and its hash),
 * nothing to come makes it one: the decode is a miss now, and the real
 * library returns the rows the bytes so far decode, as natively. Replay
 * used to wait all the same, and a program whose source suspends at the
 * end of a truncated image the recording does not hold got no row
 * (jpegdec 0 rows against 270; pdftoppm drew nothing of an image whose
 * top it draws natively). A length found once is not hashed again. Where
 * it cannot tell (bytes given back to the program, a front that does not
 * fit, under RDB_PREFIX_MIN bytes), it says yes, as before. */
static int may_grow_into(jpg_obj *o, rep_dec *x) {
  jpg_scan *sc = &x->scan;
  x->par.tables_len = (uint32_t)o->tables.len;
  if (!sc->out || sc->oom || x->drop_hit ||
      sc->reserve != jpg_req_header_len(&x->par) + o->tables.len)
    return 1;
  size_t len = jpg_scan_kept(sc);
  if (len < RDB_PREFIX_MIN || len < sc->reserve || len > sc->out_len)
    return 1;
  size_t at = RDB_PREFIX_MIN;
  while (at <= len / 2)
    at *= 2;
  if (at == x->grow_ok)
    return 1;
  write_front(o, x);
  rdb_prefix key = {at, pbw__hash64(sc->out, at)};
  size_t n;
  const rdb_prefix *p = rp_prefixes(&n);
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p[mid].len < key.len || (p[mid].len == key.len && p[mid].hash < key.hash))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < n && p[lo].len == key.len && p[lo].hash == key.hash) {
    x->grow_ok = at;
    return 1;
  }
  return 0;
}

/* Where the recorded program dropped the bytes the library left unread at
 * a suspension (rdb_drop): the drain, suspended, ends there, and the
 * bytes it took last are those. The real library would have left them in
 * the program's source, not having used them; the drain gives them back,
 * so the program drops them again (gdk-pixbuf's loader closed on a
 * truncated image offers a fake EOI in their place), and the request is
 * the recorded one. Without it the request held them, was not found, and
 * the real library, reading them, made other rows. */
static void dropped_here(jpg_obj *o, rep_dec *x) {
  size_t n;
  const rdb_drop *dr = rp_drops(&n);
  uint64_t end = (uint64_t)o->cap.len + o->drained.len;
  x->kept_tail = 0;
  x->drop_hit = 0;
  if (!dr || o->cap.failed || o->drained.failed)
    return;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (dr[mid].end < end)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < n && dr[lo].end == end; lo++) {
    uint64_t len = dr[lo].len;
    if (len > o->drain_seg ||
        pbw__hash64(o->drained.p + o->drained.len - len, (size_t)len) != dr[lo].hash)
      continue;
    x->drop_hit = 1;
    if (jpg_unread(o, (size_t)len) != 0) {
      x->kept_tail = (size_t)len; /* still where it stopped (stuck_here) */
      return;
    }
    /* the scanner read them too: it reads the rest again */
    jpg_scan_free(&x->scan);
    jpg_request_scan(o, &x->par, &x->scan);
    jpg_scan_feed(&x->scan, o->cap.p, o->cap.len);
    jpg_scan_feed(&x->scan, o->drained.p, o->drained.len);
    return;
  }
}

/* The recorded decode that ran out of data where this one stands (its
 * first len request bytes, stuck_here), if it failed there rather than
 * being given up: its request is those bytes and the EOI the
 * normalisation appends. NULL for one its program gave up (abandoned:
 * recorded as not offloadable and counted so). */
static const rdb_entry *stuck_failed(const rep_dec *x, size_t len) {
  uint8_t *req = shim_alloc(len + 2);
  if (!req)
    return NULL;
  memcpy(req, x->scan.out, len);
  req[len] = 0xFF;
  req[len + 1] = 0xD9;
  int reason;
  const rdb_entry *e = find(req, len + 2, &reason);
  shim_free(req);
  return e && (e->flags & RDB_ENTRY_FAILED) ? e : NULL;
}

/* The request of an image with one scan whose data ended at a marker
 * (jpg_scan.first_end) before its EOI, as a decode that read every row
 * and stopped there recorded it: the drained bytes up to that marker, then
 * EOI (the header and tables written into the scanner's reserved front,
 * as jpg_request_finish does). libjpeg decodes nothing after the marker
 * (corrupt data: an APPn, COM or table marker inside the scan), and a
 * program that does not call jpeg_finish_decompress never has it read
 * further; the scanner, which reads such a marker as the start of a
 * segment, may wait for bytes that never come. NULL when there is no such
 * place, or it was looked up already (a suspended drain asks once). */
static uint8_t *ended_early(jpg_obj *o, rep_dec *x, size_t *len) {
  jpg_scan *sc = &x->scan;
  if (x->multi_scan || !sc->out || sc->oom || sc->first_end <= sc->reserve ||
      sc->first_end == x->early_upto)
    return NULL;
  x->early_upto = sc->first_end;
  x->par.tables_len = (uint32_t)o->tables.len;
  size_t hl = jpg_req_header_len(&x->par);
  if (sc->reserve != hl + o->tables.len)
    return NULL;
  uint8_t *req = shim_alloc(sc->first_end + 2);
  if (!req)
    return NULL;
  jpg_req_write_header(req, &x->par, x->cmap_in);
  if (o->tables.len)
    memcpy(req + hl, o->tables.p, o->tables.len);
  memcpy(req + sc->reserve, sc->out + sc->reserve, sc->first_end - sc->reserve);
  req[sc->first_end] = 0xFF;
  req[sc->first_end + 1] = 0xD9;
  *len = sc->first_end + 2;
  return req;
}

/* A recorded decode that read every row (not failed, with rows): one that
 * can answer a decode found by its request cut at ended_early's place. */
static int whole(const rdb_entry *e) {
  return e && !(e->flags & (RDB_ENTRY_FAILED | RDB_ENTRY_NO_RESPONSE));
}

/* Decide what the recording says about this decode (inside an outermost
 * call). Spins once when it is served. */
/* A served decode's input is read to its EOI (drained), as the real one's
 * is by then: jpeg_input_complete says so (undone if the real library
 * takes over: to_real). */
static void input_complete(jpg_obj *o, rep_dec *x) {
  if (o->cinfo->inputctl && !o->cinfo->inputctl->eoi_reached) {
    o->cinfo->inputctl->eoi_reached = TRUE;
    x->eoi_set = 1;
  }
}

/* What serving the rows in later calls will take, kept back from the spin
 * (rp_ticket.hold) so that a decode's calls take its modelled time in all.
 * The rows are copied after the spin, one call or more each: djpeg of a
 * 1920x1080 image spent ~2.2 ms so (1,080 calls, 6.2 MB; 0.35 ns a byte
 * and ~100 ns a call on the 2-core AMD VM, 2026-11-30), past a 8.6 ms
 * deadline where no later slack could pay it back, so a `software` replay
 * ran 2 ms long. Generous: what the rows do not use is spun as the decode
 * ends (end_decode); too little, and the rest is an overrun, as before.
 * 200 ns a row and 0.5 ns a byte at first; then 1.25 times what the
 * process's served decodes took a byte, when more (a slower machine, or a
 * sanitizer's build: ~4x under ASan). */
static _Atomic uint64_t rows_ps_per_byte; /* learned, picoseconds; 0: none yet */

static uint64_t rows_estimate(const jpg_obj *o, const rep_dec *x) {
  j_decompress_ptr ci = o->cinfo;
  uint64_t rows =
      ci->output_height > ci->output_scanline ? ci->output_height - ci->output_scanline : 0;
  uint64_t bytes = ci->output_height ? x->out_bytes / ci->output_height * rows : 0;
  uint64_t guess = rows * 200 + bytes / 2;
  uint64_t ps = atomic_load_explicit(&rows_ps_per_byte, memory_order_relaxed);
  uint64_t learned = ps && bytes < UINT64_MAX / ps ? bytes * ps / 1000 * 5 / 4 : 0;
  return learned > guess ? learned : guess;
}

/* Of the time kept back, what the last row's call leaves for the calls that
 * end the decode (a served jpeg_finish_decompress takes a few us). */
#define END_KEEP_NS 20000

/* The last row is served: what the rows took a byte, for the next
 * decodes' estimates (half the last one and half this). */
static void rows_learn(const jpg_obj *o, const rep_dec *x) {
  uint64_t bytes = x->out_bytes;
  /* less the faults the rows were expected to take: a later decode's
   * into pages in memory takes none */
  uint64_t late = x->late_ns > x->fault_ns ? x->late_ns - x->fault_ns : 0;
  if (!bytes || late > UINT64_MAX / 1000)
    return;
  uint64_t ps = late * 1000 / bytes;
  uint64_t old = atomic_load_explicit(&rows_ps_per_byte, memory_order_relaxed);
  atomic_store_explicit(&rows_ps_per_byte, old ? (old + ps) / 2 : ps, memory_order_relaxed);
}

static int identify(jpg_obj *o, rep_dec *x, void *caller) {
  if (!x->scan_on) {
    jpg_request_scan(o, &x->par, &x->scan);
    jpg_scan_feed(&x->scan, o->cap.p, o->cap.len);
    x->scan_on = 1;
  }
  int d = jpg_drain(o, &x->scan);
  if (d == JPG_DRAIN_SUSPENDED)
    dropped_here(o, x);
  const rdb_stuck *stuck = d == JPG_DRAIN_SUSPENDED ? stuck_here(o, x) : NULL;
  const rdb_entry *failed = stuck ? stuck_failed(x, (size_t)stuck->len) : NULL;
  if (failed) {
    /* where a recorded decode failed for want of data (a source that
     * suspends at the end of a truncated image, then an error; the
     * arithmetic decoder, which cannot suspend): the real library fails
     * the same way from the drained bytes, answered as a failed decode is
     * below. It was not counted at all (OpenCV's imdecode), where whatif
     * counts it offloaded. */
    return answer_failed(o, x, failed);
  }
  if (d == JPG_DRAIN_SUSPENDED && o->cinfo->arith_code) {
    /* libjpeg's arithmetic decoder cannot suspend: it fails where the data
     * ran out. Only the real library, fed exactly the data that was there,
     * fails (or not) at the same row. */
    x->pass = 1;
    go_real(o, x, 1);
    return ID_REAL;
  }
  if (stuck) {
    /* where a recorded decode's program gave up: the real library reads
     * the drained bytes and returns the rows it can decode from them. Its
     * occurrence was kept in its image's entry when the recording holds
     * the image decoded whole (a file cut short, then the whole file):
     * it is taken, so that the whole image's decode gets its own */
    static const uint8_t none[16];
    const rdb_entry *e = memcmp(stuck->fp, none, sizeof none) ? rp_lookup(stuck->fp) : NULL;
    rp_ticket tk = {0};
    if (e && rp_next_in_software(e) && !rp_begin(&tk, e, o->t_in - o->busy_ns)) {
      x->given_up = tk.s && tk.s->accel < 0 && tk.s->sw_reason == RDB_SW_ABANDONED;
      go_real(o, x, 1);
      return ID_REAL;
    }
    x->pass = 1;
    go_real(o, x, 1);
    return ID_REAL;
  }
  size_t len = 0;
  jpg_probe pr = {0};
  int reason = RDB_FB_NOMEM;
  const rdb_entry *e = NULL;
  uint8_t *req;
  if (d == JPG_DRAIN_SUSPENDED) {
    /* still waiting for bytes, unless the recording holds the decode of
     * what is in, its one scan ended at a marker (ended_early), or none
     * of its decodes can be what is in (may_grow_into): a miss now */
    req = ended_early(o, x, &len);
    e = req ? find(req, len, &reason) : NULL;
    if (!whole(e)) {
      shim_free(req);
      req = NULL;
      e = NULL;
      if (may_grow_into(o, x))
        return ID_SUSPENDED;
      reason = RDB_FB_NOT_IN_TRACE;
      len = jpg_scan_kept(&x->scan); /* the frame header is in, for the miss's class */
    } else {
      x->early = 1; /* the scanner stays: jpeg_finish_decompress reads on to EOI */
    }
    size_t pre = x->scan.reserve;
    jpg_probe_header((req ? req : x->scan.out) + pre, len - pre, &pr);
  } else {
    if (x->scan.bad_marker) {
      /* Corrupt data: the real library decodes up to a marker it refuses,
       * then fails there if the program reads on, or resynchronises at a
       * restart marker; recorded as not offloadable. It reads the drained
       * bytes, the marker included, then the program's. A recorded decode
       * that failed before that marker, partway through its data, is
       * answered as that failed decode (the request is cut before the
       * marker): its program gave up at an earlier warning. */
      size_t nstuck;
      if (rp_stuck(&nstuck)) {
        uint8_t *cut = jpg_request_finish(o, &x->par, x->cmap_in, &x->scan, &len, &pr);
        x->scan_on = 0;
        const rdb_entry *f = cut ? failed_prefix(cut, len) : NULL;
        shim_free(cut);
        if (f)
          return answer_failed(o, x, f);
      }
      not_offloadable(x, JPG_NO_BAD_MARKER);
      go_real(o, x, 1);
      return ID_REAL;
    }
    if (d == JPG_DRAIN_ERROR)
      x->par.options |= JPG_OPT_SOURCE_ERROR;
    size_t first_end = x->multi_scan ? 0 : x->scan.first_end;
    req = jpg_request_finish(o, &x->par, x->cmap_in, &x->scan, &len, &pr);
    x->scan_on = 0;
    e = req ? find(req, len, &reason) : NULL;
    if (!e && reason == RDB_FB_NOT_IN_TRACE && req && first_end && first_end + 2 < len) {
      /* recorded by a program that stopped after the last row, before the
       * rest (ended_early), or by one whose library failed in that rest
       * (jpeg_finish_decompress reading a bogus segment there), which the
       * real library then does again, as for any failed decode below */
      int r2;
      req[first_end] = 0xFF;
      req[first_end + 1] = 0xD9;
      const rdb_entry *e2 = find(req, first_end + 2, &r2);
      if (e2)
        e = e2;
    }
    if (!e && reason == RDB_FB_NOT_IN_TRACE && req) {
      const rdb_entry *f = failed_prefix(req, len);
      if (f)
        e = f; /* answered as a failed decode, below */
    }
  }
  shim_free(req);
  const char *type = jpg_class_name(pr.sof, jpg_subsamp(pr.ncomp, pr.h, pr.v));
  uint64_t t0 = o->t_in - o->busy_ns; /* first call, plus the program's gaps */
  rp_ticket tk;
  if (e && (e->flags & RDB_ENTRY_FAILED)) /* the real library fails the same way */
    return answer_failed(o, x, e);
  if (e && (e->flags & RDB_ENTRY_NO_RESPONSE) && rp_next_in_software(e)) {
    /* no response to serve, and none wanted: the plan or the model keeps
     * it in software (jpeg-core and restart markers), counted so, not as
     * a miss */
    int served = rp_begin(&tk, e, t0); /* another thread may have taken that one */
    if (served)
      rp_finish(&tk);
    go_real(o, x, !served);
    return ID_REAL;
  }
  if (e && (e->flags & RDB_ENTRY_NO_RESPONSE))
    reason = RDB_FB_NO_RESPONSE, e = NULL;
  if (e && take_response(o, x, e) != 0)
    reason = RDB_FB_SCHEMA, e = NULL;
  if (!e && reason == RDB_FB_NOT_IN_TRACE &&
      ((o->cinfo->raw_data_out && (rp_jpeg_unserved() & RDB_UNSERVED_RAW)) ||
       (x->buffered && (rp_jpeg_unserved() & RDB_UNSERVED_BUFFERED)))) {
    /* a recording made before raw data decodes or buffered-image ones
     * were served (both 2026-11-30) holds them as not offloadable: run
     * for real, as they were then */
    not_offloadable(x, o->cinfo->raw_data_out ? JPG_NO_RAW : JPG_NO_BUFFERED);
    go_real(o, x, 1);
    return ID_REAL;
  }
  if (!e) {
    x->miss = reason + 1;
    x->miss_caller = caller;
    x->type = type;
    x->pixels = (uint64_t)o->cinfo->image_width * o->cinfo->image_height;
    x->variant =
        rdb_near_variant(x->par.scale_num, x->par.scale_denom, pr.restart, jpg_planar(&x->par));
    go_real(o, x, 1);
    return ID_REAL;
  }
  tk.s = NULL;
  if (!rp_begin(&tk, e, t0)) {
    /* the plan keeps it in software, or the recording holds this
     * occurrence of the image given up (RDB_SW_ABANDONED: not offloadable;
     * the library decodes the rows the program reads, from the drained
     * bytes) */
    x->given_up = tk.s && tk.s->accel < 0 && tk.s->sw_reason == RDB_SW_ABANDONED;
    go_real(o, x, 1);
    return ID_REAL;
  }
  x->state = R_SERVE;
  x->out_cold = tk.s->out_cold;
  x->cold_acc = 500;
  put_colormap(o, x);
  if (!x->real_started) { /* what the output pass setup of a real start sets */
    o->cinfo->output_scanline = 0;
    if (o->cinfo->progress && o->cinfo->progress->total_passes > 0)
      o->cinfo->progress->completed_passes = o->cinfo->progress->total_passes - 1;
  }
  /* the rows land in pages the recorded decode faulted in: their faults
   * come with the copies (the model's time holds them: fault_ns) */
  x->fault_ns = tk.s->fault_ns;
  tk.hold = rows_estimate(o, x) + x->fault_ns;
  x->late = rp_finish(&tk); /* an overrun already counted for this call */
  x->held = tk.hold;
  x->held_by = pthread_self();
  if (x->multi_scan)        /* the real start reads a multi-scan image whole */
    input_complete(o, x);
  emit_due(o, x, JPG_PHASE_START, 0);
  return ID_SERVED;
}

/* ---- serving rows ----------------------------------------------------------------- */

/* What the library does before a call's rows: past the last one, the
 * warning (returns 0: none to serve); then the progress monitor. */
static int rows_left(jpg_obj *o, rep_dec *x) {
  j_decompress_ptr ci = o->cinfo;
  if (ci->output_scanline >= ci->output_height) {
    emit_due(o, x, JPG_PHASE_ROWS, ci->output_scanline); /* JWRN_TOO_MUCH_DATA, recorded */
    return 0;
  }
  if (ci->progress) {
    ci->progress->pass_counter = (long)ci->output_scanline;
    ci->progress->pass_limit = (long)ci->output_height;
    JPG_CALLBACK((*ci->progress->progress_monitor)((j_common_ptr)ci));
  }
  return 1;
}

static JDIMENSION serve_rows(jpg_obj *o, rep_dec *x, JSAMPARRAY rows, JDIMENSION max) {
  j_decompress_ptr ci = o->cinfo;
  if (!rows_left(o, x))
    return 0;
  emit_due(o, x, JPG_PHASE_ROWS, ci->output_scanline);
  JDIMENSION n = ci->output_height - ci->output_scanline;
  if (max < n)
    n = max;
  if (x->next_msg < x->ext.nmsgs) { /* stop where the recording emitted the next one */
    jpg_msg m;
    jpg_ext_msg(&x->ext, x->next_msg, &m);
    if (m.phase == JPG_PHASE_ROWS && m.row > ci->output_scanline && m.row - ci->output_scanline < n)
      n = m.row - ci->output_scanline;
  }
  const uint8_t *src = x->pix + (size_t)ci->output_scanline * x->row_bytes;
  uint64_t to_memory = 0;
  for (JDIMENSION i = 0; i < n; i++) /* that share where the implementation left it */
    to_memory += place_copy_share(rows[i], src + (size_t)i * x->row_bytes, x->row_bytes,
                                  x->out_cold, &x->cold_acc);
  if (to_memory) {
    place_fence();
    rp_to_memory(to_memory);
  }
  ci->output_scanline += n;
  return n;
}

/* jpeg_read_raw_data, served: the next iMCU row of every plane, as the
 * library writes it (the last one's dummy block rows left alone). */
static JDIMENSION serve_raw(jpg_obj *o, rep_dec *x, JSAMPIMAGE data, JDIMENSION max) {
  j_decompress_ptr ci = o->cinfo;
  if (!rows_left(o, x))
    return 0;
  if (max < x->rl.lines)
    ERREXIT(ci, JERR_BUFFER_SIZE);
  emit_due(o, x, JPG_PHASE_ROWS, ci->output_scanline);
  uint32_t i = ci->output_scanline / x->rl.lines;
  uint64_t to_memory = 0;
  for (int c = 0; c < x->rl.n; c++)
    for (uint32_t r = 0, n = jpg_raw_rows(&x->rl, c, i); r < n; r++)
      to_memory += place_copy_share(data[c][r], x->pix + jpg_raw_at(&x->rl, c, i, r),
                                    x->rl.row_bytes[c], x->out_cold, &x->cold_acc);
  if (to_memory) {
    place_fence();
    rp_to_memory(to_memory);
  }
  ci->output_scanline += x->rl.lines;
  return x->rl.lines;
}

/* The real library's calls after the one that spun are part of the recorded
 * latency: the whole of such a call (from the hook's entry, `since`, to
 * here), not only its row copies, is harness time. The time the spin kept
 * back for them (rows_estimate) covers it; past that it is an overrun,
 * owed and paid back from later slack (rp_late). At one call per row the
 * hook's own work is ~45 ns, 1% of thumbnailer's run. */
static void served_late(rep_dec *x, uint64_t since) {
  uint64_t ns = rp_now() - since;
  x->late_ns += ns;
  if (rp_late_held(ns, &x->held, !x->late, ST_API_JPEG_DECODE))
    x->late = 1;
}

/* After a call that served rows (since: its entry, or the end of its spin). */
static void rows_served(jpg_obj *o, rep_dec *x, uint64_t since) {
  served_late(x, since);
  if (o->cinfo->output_scanline >= o->cinfo->output_height && !x->learned) {
    rows_learn(o, x);
    x->learned = 1;
    rp_spin_held(&x->held, END_KEEP_NS); /* on the thread that read the rows */
  }
}

/* ---- hooks: the decode sequence ----------------------------------------------------- */

SHIM_EXPORT void jpeg_CreateDecompress(j_decompress_ptr cinfo, int version, size_t size) {
  JPG_REAL(real, jpeg_CreateDecompress, JPG_LIBJPEG);
  if (jpg_outermost(FRAME))
    jpg_obj_forget(cinfo);
  real(cinfo, version, size);
}

SHIM_EXPORT int jpeg_read_header(j_decompress_ptr cinfo, boolean require_image) {
  JPG_REAL(real, jpeg_read_header, JPG_LIBJPEG);
  if (!jpg_outermost(FRAME) || !rp_on())
    return real(cinfo, require_image);
  jpg_obj *o = jpg_obj_get(cinfo, 1);
  if (!o)
    return real(cinfo, require_image);
  jpg_check_stale(o);
  if (o->phase >= JPG_READY)
    end_decode(o);
  if (o->phase == JPG_IDLE) {
    rep_dec *x = shim_zalloc(sizeof *x);
    if (!x)
      return real(cinfo, require_image);
    jpg_decode_begin(o);
    o->ext = x;
  }
  jpg_enter(o, FRAME);
  int r = real(cinfo, require_image);
  jpg_leave(o);
  if (r == JPEG_HEADER_OK) {
    o->phase = JPG_READY;
    jpg_header_done(o);
    o->capture = 0; /* the header is all replay keeps */
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
  rep_dec *x = o->ext;
  if (o->phase == JPG_STARTED && x->state != R_REAL) {
    /* what the real one says then: a single scan's input goes with its
     * output, up to the last row, after which the EOI is read (a program
     * that loops until jpeg_input_complete hung here) */
    j_decompress_ptr ci = o->cinfo;
    if (x->buffered && x->state == R_PENDING) {
      /* a buffered-image program reads its input ahead of the output
       * passes: the decode is identified here, and its input is then
       * complete (or not in yet, as the real one would say) */
      jpg_enter(o, FRAME);
      int id = identify(o, x, __builtin_return_address(0));
      jpg_leave(o);
      if (id == ID_SUSPENDED)
        return JPEG_SUSPENDED;
    } else if (!x->multi_scan && !x->buffered && ci->output_scanline < ci->output_height) {
      return JPEG_SUSPENDED;
    }
    if (x->state != R_REAL) { /* else identified just now, run for real: below */
      input_complete(o, x);
      return JPEG_REACHED_EOI;
    }
  }
  jpg_enter(o, FRAME);
  int r = real(cinfo);
  jpg_leave(o);
  if (o->phase == JPG_HEADER && r == JPEG_REACHED_SOS) {
    o->phase = JPG_READY;
    jpg_header_done(o);
    o->capture = 0;
  }
  return r;
}

/* First jpeg_start_decompress of a decode. The real one runs, starved of
 * data: it checks the parameters (raising the same errors), allocates, and
 * either completes (an image it starts without reading: identified at the
 * first jpeg_read_scanlines) or suspends where it would read image data
 * (several scans, two-pass quantisation: identified now). Arithmetic
 * coding with several scans cannot be starved (that decoder cannot
 * suspend): only the output size is computed then. Returns what the
 * program gets. */
static boolean start_first(jpg_obj *o, rep_dec *x, void *caller) {
  JPG_REAL(real_calc, jpeg_calc_output_dimensions, JPG_LIBJPEG);
  JPG_REAL(real_multi, jpeg_has_multiple_scans, JPG_LIBJPEG);
  j_decompress_ptr ci = o->cinfo;
  jpg_take_params(o, &x->par, &x->cmap_in);
  o->phase = JPG_STARTED;
  if ((ci->buffered_image && !jpg_buffered_served(ci)) || o->inherits ||
      (ci->raw_data_out && ci->num_components > JPG_RAW_MAX)) { /* not offloadable */
    not_offloadable(x, o->inherits        ? JPG_NO_INHERITED
                       : ci->raw_data_out ? JPG_NO_RAW
                                          : JPG_NO_BUFFERED);
    return go_real(o, x, 1);
  }
  /* buffered: the real start reads nothing and returns TRUE (below); the
   * program's jpeg_start_output then sets up the output pass */
  x->buffered = ci->buffered_image != 0;
  if (ci->arith_code && (real_multi(ci) || (ci->quantize_colors && ci->two_pass_quantize))) {
    real_calc(ci);
    ci->output_scanline = 0;
    (*ci->mem->realize_virt_arrays)((j_common_ptr)ci); /* the program's arrays */
    x->multi_scan = 1;
  } else {
    x->real_started = jpg_start_starved(o);
    x->setup_ran = 1;
    x->multi_scan = !x->real_started;
  }
  if (!x->multi_scan)
    return TRUE;
  return identify(o, x, caller) != ID_SUSPENDED && (x->state != R_REAL || x->real_started);
}

SHIM_EXPORT boolean jpeg_start_decompress(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_start_decompress, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_READY) : NULL;
  if (!o)
    return real(cinfo);
  rep_dec *x = o->ext;
  boolean r = TRUE;
  jpg_enter(o, FRAME);
  if (o->phase == JPG_READY)
    r = start_first(o, x, __builtin_return_address(0));
  else if (x->state == R_REAL)
    r = go_real(o, x, x->count_sw);
  else if (x->state == R_PENDING && x->multi_scan) /* again, after a suspension */
    r = identify(o, x, __builtin_return_address(0)) != ID_SUSPENDED &&
        (x->state != R_REAL || x->real_started);
  jpg_leave(o);
  return r;
}

/* jpeg_read_scanlines (out: JSAMPARRAY) and jpeg_read_raw_data (raw, out:
 * JSAMPIMAGE) of a followed decode: it is identified at the first such
 * call, then served or run for real. frame: the hook's. */
static JDIMENSION read_call(jpg_obj *o, rep_dec *x, int raw, void *out, JDIMENSION max,
                            uint64_t t_in, void *caller, void *frame) {
  JPG_REAL(real_rows, jpeg_read_scanlines, JPG_LIBJPEG);
  JPG_REAL(real_raw, jpeg_read_raw_data, JPG_LIBJPEG);
  j_decompress_ptr ci = o->cinfo;
  JDIMENSION n = 0;
  int served = 0;
  jpg_enter(o, frame);
  if (x->buffered && x->state != R_REAL && ci->global_state != DSTATE_SCANNING)
    ERREXIT1(ci, JERR_BAD_STATE, ci->global_state); /* no output pass started */
  if (x->state == R_PENDING && (!raw || ci->raw_data_out)) {
    if (identify(o, x, caller) == ID_SUSPENDED)
      goto out;      /* waiting for input, as the real library would */
    t_in = rp_now(); /* this call spun: what follows is late */
  }
  if (x->state == R_SERVE) {
    if (x->raw != raw) /* as the library refuses the other kind of output */
      ERREXIT1(ci, JERR_BAD_STATE, raw ? DSTATE_SCANNING : DSTATE_RAW_OK);
    n = raw ? serve_raw(o, x, out, max) : serve_rows(o, x, out, max);
    served = 1;
  } else if (go_real(o, x, x->count_sw)) {
    n = raw ? real_raw(ci, out, max) : real_rows(ci, out, max);
  }
out:
  jpg_leave(o);
  if (served)
    rows_served(o, x, t_in);
  return n;
}

SHIM_EXPORT JDIMENSION jpeg_read_scanlines(j_decompress_ptr cinfo, JSAMPARRAY rows,
                                           JDIMENSION max_lines) {
  uint64_t t_in = rp_now();
  JPG_REAL(real, jpeg_read_scanlines, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, rows, max_lines);
  return read_call(o, o->ext, 0, rows, max_lines, t_in, __builtin_return_address(0), FRAME);
}

SHIM_EXPORT boolean jpeg_finish_decompress(j_decompress_ptr cinfo) {
  uint64_t t_in = rp_now();
  JPG_REAL(real, jpeg_finish_decompress, JPG_LIBJPEG);
  JPG_REAL(real_abort, jpeg_abort, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo);
  rep_dec *x = o->ext;
  boolean r;
  jpg_enter(o, FRAME);
  if (x->buffered && x->state == R_PENDING && cinfo->global_state == DSTATE_BUFIMAGE &&
      identify(o, x, __builtin_return_address(0)) == ID_SUSPENDED) {
    /* no output pass read a row: the real one reads the image's input to
     * its EOI, as the decode was recorded (given up, most often: ExactImage
     * decodes each image so once before it reads its rows) */
    jpg_leave(o);
    return FALSE;
  }
  if (x->state == R_SERVE) {
    if (x->buffered && cinfo->global_state != DSTATE_BUFIMAGE) /* an output pass not finished */
      ERREXIT1(cinfo, JERR_BAD_STATE, cinfo->global_state);
    if (!x->buffered && cinfo->output_scanline < cinfo->output_height) {
      cinfo->err->msg_code = JERR_TOO_LITTLE_DATA; /* as the real one: an error exit */
      (*cinfo->err->error_exit)((j_common_ptr)cinfo);
    }
    if (x->early) {
      /* served before the rest of its input was in (ended_early): the
       * real finish reads the markers after the scan up to EOI, waiting
       * for them as the source makes it, and meets the source's errors */
      int d = jpg_drain(o, &x->scan);
      if (d == JPG_DRAIN_SUSPENDED) {
        jpg_leave(o);
        return FALSE;
      }
      x->early = 0;
      jpg_scan_free(&x->scan);
      x->scan_on = 0;
      if (d == JPG_DRAIN_ERROR) /* the source's, as it raised it (msg_code kept) */
        (*cinfo->err->error_exit)((j_common_ptr)cinfo);
    }
    emit_due(o, x, JPG_PHASE_FINISH, cinfo->output_height);
    JPG_CALLBACK((*cinfo->src->term_source)(cinfo));
    real_abort((j_common_ptr)cinfo); /* how the real finish ends */
    served_late(x, t_in);
    r = TRUE;
  } else {
    go_real(o, x, x->count_sw);
    r = real(cinfo);
  }
  jpg_leave(o);
  if (r)
    end_decode(o);
  return r;
}

static void ending(j_common_ptr cinfo, int destroy) {
  if (!cinfo->is_decompressor || !jpg_outermost(FRAME))
    return;
  j_decompress_ptr d = (j_decompress_ptr)cinfo;
  jpg_obj *o = jpg_obj_get(d, 0);
  if (!o)
    return;
  jpg_check_stale(o);
  end_decode(o);
  if (destroy)
    jpg_obj_forget(d);
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

/* ---- hooks: modes an accelerator would not serve ---------------------------------------- */

/* A mode an accelerator would not serve: the decode leaves replay and the
 * real library runs it from the start (the drained bytes are kept for
 * that until the decode ends). */
static void pass(jpg_obj *o, rep_dec *x, unsigned why) {
  not_offloadable(x, why);
  if (x->state == R_SERVE) {
    /* already counted as replayed, its time spun: the real decode comes
     * on top (the recording holds such a decode not offloadable, so this
     * one either decodes otherwise or is another occurrence of an image
     * recorded whole) */
    x->state = R_PENDING;
    x->no_counted = 1;
    rp_served_then_real();
  }
  to_real(o, x, 1);
}

SHIM_EXPORT jvirt_barray_ptr *jpeg_read_coefficients(j_decompress_ptr cinfo) {
  JPG_REAL(real, jpeg_read_coefficients, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_READY) : NULL;
  if (!o)
    return real(cinfo);
  rep_dec *x = o->ext;
  if (o->phase == JPG_READY) {
    o->phase = JPG_STARTED;
    not_offloadable(x, JPG_NO_COEF);
    x->state = R_REAL;
    x->real_started = 1; /* no jpeg_start_decompress in this mode */
    x->count_sw = 1;
  }
  jvirt_barray_ptr *r;
  jpg_enter(o, FRAME);
  r = real(cinfo);
  jpg_leave(o);
  return r;
}

SHIM_EXPORT JDIMENSION jpeg_skip_scanlines(j_decompress_ptr cinfo, JDIMENSION n) {
  JPG_REAL(real, jpeg_skip_scanlines, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, n);
  rep_dec *x = o->ext;
  JDIMENSION r = 0;
  jpg_enter(o, FRAME);
  /* rows quantised, dithered or from the merged upsampler come out of a
   * skip otherwise than the whole decode's (and two-pass quantisation
   * refuses it): before any row the real library skips, unseen */
  int plain = !cinfo->quantize_colors && cinfo->do_fancy_upsampling &&
              !(cinfo->out_color_space == JCS_RGB565 && cinfo->dither_mode != JDITHER_NONE);
  if (x->state == R_SERVE && cinfo->quantize_colors && cinfo->two_pass_quantize)
    ERREXIT(cinfo, JERR_NOTIMPL); /* as the library refuses it */
  if (x->state == R_SERVE && (plain || cinfo->output_scanline > 0)) { /* the rows are at hand */
    r = cinfo->output_height - cinfo->output_scanline;
    if (n < r)
      r = n;
    cinfo->output_scanline += r;
  } else {
    pass(o, x, JPG_NO_SKIP);
    if (go_real(o, x, x->count_sw))
      r = real(cinfo, n);
  }
  jpg_leave(o);
  return r;
}

SHIM_EXPORT void jpeg_crop_scanline(j_decompress_ptr cinfo, JDIMENSION *xoff, JDIMENSION *width) {
  JPG_REAL(real, jpeg_crop_scanline, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o) {
    real(cinfo, xoff, width);
    return;
  }
  rep_dec *x = o->ext;
  jpg_enter(o, FRAME);
  /* after rows, the library refuses, in the state it is in while rows are
   * read (a real decode started over would take the crop; the starved one
   * of a multi-scan image is in another state) */
  if (x->state == R_SERVE && cinfo->output_scanline > 0)
    ERREXIT1(cinfo, JERR_BAD_STATE, DSTATE_SCANNING);
  pass(o, x, JPG_NO_CROP);
  go_real(o, x, x->count_sw);
  real(cinfo, xoff, width);
  jpg_leave(o);
}

/* Calls that only exist in modes that already run for real. */
#define REAL_ONLY(o, x, expr)                                                                      \
  do {                                                                                             \
    jpg_enter(o, FRAME);                                                                           \
    go_real(o, x, x->count_sw);                                                                    \
    expr;                                                                                          \
    jpg_leave(o);                                                                                  \
  } while (0)

/* Raw data output: served as jpeg_read_scanlines is, an iMCU row a call. */
SHIM_EXPORT JDIMENSION jpeg_read_raw_data(j_decompress_ptr cinfo, JSAMPIMAGE data,
                                          JDIMENSION max_lines) {
  uint64_t t_in = rp_now();
  JPG_REAL(real, jpeg_read_raw_data, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, data, max_lines);
  return read_call(o, o->ext, 1, data, max_lines, t_in, __builtin_return_address(0), FRAME);
}

/* Buffered-image mode, served (x->buffered): the real jpeg_start_output
 * and jpeg_finish_output run, as they read no image data once the input
 * is complete (input_complete), so the library's state (global_state,
 * output_scanline, the progress monitor's passes, its errors) is its own.
 * An output pass with other parameters than the decode's (dct_method,
 * dither_mode, upsampling, smoothing, quantisation) is the real library's
 * from then on: the recording holds it as not offloadable. A pass
 * again over a served image gives the same rows. */
SHIM_EXPORT boolean jpeg_start_output(j_decompress_ptr cinfo, int scan) {
  JPG_REAL(real, jpeg_start_output, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo, scan);
  rep_dec *x = o->ext;
  boolean r;
  jpg_enter(o, FRAME);
  if (x->buffered && !jpg_pass_same(cinfo, &x->par))
    pass(o, x, JPG_NO_BUFFERED); /* not offloadable (a miss found before it is not one) */
  if (!x->buffered || x->state == R_REAL)
    go_real(o, x, x->count_sw);
  r = real(cinfo, scan);
  jpg_leave(o);
  return r;
}

SHIM_EXPORT boolean jpeg_finish_output(j_decompress_ptr cinfo) {
  uint64_t t_in = rp_now();
  JPG_REAL(real, jpeg_finish_output, JPG_LIBJPEG);
  jpg_obj *o = jpg_outermost(FRAME) ? decode_of(cinfo, JPG_STARTED) : NULL;
  if (!o)
    return real(cinfo);
  rep_dec *x = o->ext;
  boolean r;
  if (!x->buffered || x->state == R_REAL) {
    REAL_ONLY(o, x, r = real(cinfo));
    return r;
  }
  jpg_enter(o, FRAME);
  if (x->state == R_PENDING) {
    /* a pass that read no row: the real one reads the scan's input here */
    if (identify(o, x, __builtin_return_address(0)) == ID_SUSPENDED) {
      jpg_leave(o);
      return FALSE;
    }
    t_in = rp_now(); /* this call spun: what follows is late */
  }
  if (x->state == R_SERVE)
    input_complete(o, x); /* the real one reads no further */
  else
    go_real(o, x, x->count_sw);
  r = real(cinfo);
  int served = x->state == R_SERVE;
  if (served && r && cinfo->output_scanline >= cinfo->output_height)
    emit_due(o, x, JPG_PHASE_FINISH, cinfo->output_height); /* it read on to EOI */
  jpg_leave(o);
  if (served)
    served_late(x, t_in);
  return r;
}

/* ---- TurboJPEG ------------------------------------------------------------------------- */

static SHIM_TLS struct {
  tjhandle h;
  const unsigned char *buf;
  unsigned long size;
  uint64_t ns;
} tj_header;

SHIM_EXPORT int tjDecompressHeader3(tjhandle h, const unsigned char *buf, unsigned long size,
                                    int *width, int *height, int *subsamp, int *colorspace) {
  JPG_REAL(real, tjDecompressHeader3, JPG_LIBTJ);
  void *frame = __builtin_frame_address(0);
  if (!shim_outermost(frame, (const void *)real) || !rp_on())
    return real(h, buf, size, width, height, subsamp, colorspace);
  shim_enter(frame);
  uint64_t t0 = rp_now();
  int r = real(h, buf, size, width, height, subsamp, colorspace);
  tj_header.ns = rp_now() - t0;
  shim_leave();
  tj_header.h = h;
  tj_header.buf = buf;
  tj_header.size = size;
  return r;
}

/* The recorded TurboJPEG call with these parameters and bytes, or NULL. */
static const rdb_entry *tj_lookup(const uint8_t *hdr, size_t hlen, const unsigned char *jpeg,
                                  unsigned long size, int *reason) {
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  XXH3_128bits_update(&st, hdr, hlen);
  XXH3_128bits_update(&st, jpeg, size);
  XXH128_hash_t h = XXH3_128bits_digest(&st);
  uint8_t fp[16];
  memcpy(fp, &h.low64, 8);
  memcpy(fp + 8, &h.high64, 8);
  shim_fp_bind(fp, ST_API_TJ_DECODE);
  const rdb_entry *e = rp_lookup(fp);
  *reason = RDB_FB_NOT_IN_TRACE;
  if (!e)
    return NULL;
  if (!saved_is(e, hdr, hlen, jpeg, size)) {
    *reason = RDB_FB_MISMATCH;
    return NULL;
  }
  return e;
}

static const rdb_entry *tj_find(const jpg_params *p, const unsigned char *jpeg, unsigned long size,
                                int *reason) {
  uint8_t hdr[JPG_REQ_FIXED];
  jpg_req_write_header(hdr, p, NULL);
  const rdb_entry *e = predicted(ST_API_TJ_DECODE, hdr, sizeof hdr, jpeg, size);
  if (!e)
    e = tj_lookup(hdr, sizeof hdr, jpeg, size, reason);
  if (e && (e->flags & RDB_ENTRY_NO_RESPONSE) && !(e->flags & RDB_ENTRY_FAILED)) {
    *reason = RDB_FB_NO_RESPONSE;
    return NULL;
  }
  return e;
}

/* One TurboJPEG call. `real` runs the real function; dest fills the
 * caller's buffer layout once the output size is known. */
typedef struct {
  tjhandle h;
  const unsigned char *jpeg;
  unsigned long size;
  jpg_params par;
  int width, height, pixfmt;
  void *caller;
} tj_req;

typedef int (*tj_real_fn)(void *args);
typedef int (*tj_dest_fn)(const jpg_tj_layout *L, void *args, jpg_tj_dest *d);

static int tj_replay(const tj_req *q, tj_real_fn real, tj_dest_fn dest, void *args) {
  uint64_t t0 = rp_now();
  /* its own frame: below the hook's, live as long as the call */
  shim_enter(__builtin_frame_address(0));
  if (tj_header.h == q->h && tj_header.buf == q->jpeg && tj_header.size == q->size)
    t0 -= tj_header.ns; /* the header read belongs to this decode */
  tj_header.h = NULL;
  int reason, ret;
  const rdb_entry *e = tj_find(&q->par, q->jpeg, q->size, &reason);
  jpg_tj_layout L;
  jpg_tj_dest d;
  rp_ticket tk;
  const uint8_t *resp = NULL;
  if (e && !(e->flags & RDB_ENTRY_FAILED)) {
    resp = rp_ptr(e->resp_off, e->resp_len);
    if (!resp ||
        jpg_tj_layout_of(q->jpeg, q->size, q->par.entry, q->width, q->height, q->pixfmt, &L) ||
        L.bytes != e->resp_len || dest(&L, args, &d) != 0) {
      e = NULL;
      reason = RDB_FB_SCHEMA;
    }
  }
  int served = e ? rp_begin(&tk, e, t0) : 0;
  const char *type = NULL;
  int near = 0; /* --on-miss nearest times it, if it decodes */
  jpg_probe pr = {0};
  if (!e) {
    jpg_probe_header(q->jpeg, q->size, &pr);
    type = jpg_class_name(pr.sof, jpg_subsamp(pr.ncomp, pr.h, pr.v));
    near = miss_or_near(reason, ST_API_TJ_DECODE, type, q->caller);
  }
  if (served && !(e->flags & RDB_ENTRY_FAILED)) {
    uint64_t to_memory = jpg_tj_unpack_placed(&L, resp, &d, tk.s->out_cold);
    if (to_memory)
      rp_to_memory(to_memory);
    ret = (int)(int64_t)e->result;
  } else { /* not recorded, failed when recorded, or kept in software */
    uint64_t s = rp_now();
    ret = real(args);
    if (near && ret == 0) {
      jpg_tj_layout lay; /* the scaling TurboJPEG chose */
      int known = jpg_tj_layout_of(q->jpeg, q->size, q->par.entry, q->width, q->height,
                                   q->pixfmt, &lay) == 0;
      uint64_t variant =
          rdb_near_variant(known ? (uint64_t)lay.scale_num : 1,
                           known ? (uint64_t)lay.scale_denom : 1, pr.restart, jpg_planar(&q->par));
      rp_near_done(t0, s, ST_API_TJ_DECODE, type, variant, (uint64_t)pr.width * pr.height, reason,
                   0);
    } else {
      if (near) /* it failed: its time is a failure's, not a decode's */
        rp_miss(reason, ST_API_TJ_DECODE, type, q->caller);
      if (!served)
        rp_software_done(rp_now() - s);
    }
  }
  if (served)
    rp_finish(&tk);
  shim_leave();
  return ret;
}

typedef struct {
  tjhandle h;
  const unsigned char *jpeg;
  unsigned long size;
  unsigned char *dst, **planes;
  int width, pitch, height, pixfmt, flags, pad, *strides;
} tj_args;

static int real_rgb(void *a) {
  JPG_REAL(real, tjDecompress2, JPG_LIBTJ);
  tj_args *t = a;
  return real(t->h, t->jpeg, t->size, t->dst, t->width, t->pitch, t->height, t->pixfmt, t->flags);
}
static int dest_rgb(const jpg_tj_layout *L, void *a, jpg_tj_dest *d) {
  tj_args *t = a;
  jpg_tj_dest_rgb(L, t->dst, t->pitch, d);
  return 0;
}
static int real_planes(void *a) {
  JPG_REAL(real, tjDecompressToYUVPlanes, JPG_LIBTJ);
  tj_args *t = a;
  return real(t->h, t->jpeg, t->size, t->planes, t->width, t->strides, t->height, t->flags);
}
static int dest_planes(const jpg_tj_layout *L, void *a, jpg_tj_dest *d) {
  tj_args *t = a;
  for (int i = 0; i < L->nplanes; i++)
    if (!t->planes[i])
      return -1;
  jpg_tj_dest_planes(L, t->planes, t->strides, d);
  return 0;
}
static int real_yuv(void *a) {
  JPG_REAL(real, tjDecompressToYUV2, JPG_LIBTJ);
  tj_args *t = a;
  return real(t->h, t->jpeg, t->size, t->dst, t->width, t->pad, t->height, t->flags);
}
static int dest_yuv(const jpg_tj_layout *L, void *a, jpg_tj_dest *d) {
  tj_args *t = a;
  return jpg_tj_dest_yuv(L, t->dst, t->width, t->pad, t->height, d);
}

/* frame: the hook's (shim_outermost; libturbojpeg never calls these hooks
 * from inside, so no library address is given) */
static int tj_skip(void *frame, tjhandle h, const unsigned char *jpeg, unsigned long size,
                   const void *dst) {
  return !shim_outermost(frame, NULL) || !rp_on() || !h || !jpeg || !size || !dst;
}

SHIM_EXPORT int tjDecompress2(tjhandle h, const unsigned char *jpeg, unsigned long size,
                              unsigned char *dst, int width, int pitch, int height, int pixfmt,
                              int flags) {
  tj_args a = {h, jpeg, size, dst, NULL, width, pitch, height, pixfmt, flags, 0, NULL};
  if (tj_skip(__builtin_frame_address(0), h, jpeg, size, dst))
    return real_rgb(&a);
  tj_req q = {h,
              jpeg,
              size,
              {.api = ST_API_TJ_DECODE,
               .entry = JPG_ENTRY_TJ_RGB,
               .out_color_space = pixfmt,
               .scale_num = (uint32_t)width,
               .scale_denom = (uint32_t)height,
               .dct_method = flags},
              width,
              height,
              pixfmt,
              __builtin_return_address(0)};
  return tj_replay(&q, real_rgb, dest_rgb, &a);
}

SHIM_EXPORT int tjDecompressToYUVPlanes(tjhandle h, const unsigned char *jpeg, unsigned long size,
                                        unsigned char **planes, int width, int *strides, int height,
                                        int flags) {
  tj_args a = {h, jpeg, size, NULL, planes, width, 0, height, -1, flags, 0, strides};
  if (tj_skip(__builtin_frame_address(0), h, jpeg, size, planes) || !planes[0])
    return real_planes(&a);
  tj_req q = {h,
              jpeg,
              size,
              {.api = ST_API_TJ_DECODE,
               .entry = JPG_ENTRY_TJ_YUV_PLANES,
               .out_color_space = -1,
               .scale_num = (uint32_t)width,
               .scale_denom = (uint32_t)height,
               .dct_method = flags},
              width,
              height,
              -1,
              __builtin_return_address(0)};
  return tj_replay(&q, real_planes, dest_planes, &a);
}

SHIM_EXPORT int tjDecompressToYUV2(tjhandle h, const unsigned char *jpeg, unsigned long size,
                                   unsigned char *dst, int width, int pad, int height, int flags) {
  tj_args a = {h, jpeg, size, dst, NULL, width, 0, height, -1, flags, pad, NULL};
  if (tj_skip(__builtin_frame_address(0), h, jpeg, size, dst))
    return real_yuv(&a);
  tj_req q = {h,
              jpeg,
              size,
              {.api = ST_API_TJ_DECODE,
               .entry = JPG_ENTRY_TJ_YUV,
               .out_color_space = -1,
               .scale_num = (uint32_t)width,
               .scale_denom = (uint32_t)height,
               .dct_method = flags,
               .options = (uint32_t)pad},
              width,
              height,
              -1,
              __builtin_return_address(0)};
  return tj_replay(&q, real_yuv, dest_yuv, &a);
}

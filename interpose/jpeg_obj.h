/* jpeg_obj.h — the libjpeg decompression objects a shim follows.
 *
 * libjpeg is driven through a sequence of calls on one object
 * (jpeg_read_header .. jpeg_finish_decompress), pulls its input through a
 * source manager the program provides, and reports trouble through an error
 * manager the program provides, which usually longjmps out of the library.
 * A shim therefore needs, per object:
 *
 * - State, kept in a table keyed by the j_decompress_ptr (lock-free; one
 *   object is only used by one thread at a time, as libjpeg requires).
 *
 * - The bytes the library consumed. While a decode is followed, the
 *   function pointers of the program's own source manager are replaced
 *   (init_source, fill_input_buffer, skip_input_data; cinfo->src is not
 *   touched because programs cast it to their own bigger struct). Bytes are
 *   taken when the library finished with them: the rest of a buffer when
 *   the library asks for the next one, what it consumed of the current
 *   buffer when a call returns. Bytes the library skips (skip_input_data,
 *   for marker segments it does not keep) are stored as zeros: they may not
 *   be visible at all (a suspending source skips them later, out of sight).
 *   The program's pointers are restored when the decode ends.
 *
 * - The messages and errors. error_exit and emit_message of the program's
 *   error manager are replaced the same way (several objects may share one
 *   error manager: a small registry keeps the program's functions). An
 *   error exit ends the decode cleanly (the shim's on_error callback, then
 *   the program's pointers back, then the program's handler), so a longjmp
 *   never leaves shim_depth or an object's state behind. Messages emitted
 *   inside the library after the header can be logged (record) or held back
 *   (replay, while draining the source).
 *
 * - For replay: draining the source to EOI before the library reads it, and
 *   feeding the drained bytes back to the real library (an overlay on the
 *   program's source) when a decode has to run for real after all. */
#ifndef STANDIN_JPEG_OBJ_H
#define STANDIN_JPEG_OBJ_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

#include "jpeg_req.h"
#include "jpeg_scan.h"
#include "shim.h"

/* Resolve a real libjpeg / TurboJPEG function. dlsym(RTLD_NEXT) first; a
 * library loaded with RTLD_LOCAL (a Python extension's dependency) is not
 * in that scope, so then the already-loaded library itself is asked.
 * Aborts with a message if neither has it. */
void *jpg_real(const char *name, const char *lib);
#define JPG_LIBJPEG "libjpeg.so.62"
#define JPG_LIBTJ "libturbojpeg.so.0"
#define JPG_REAL(var, fn, lib)                                                                     \
  static __typeof__(&fn) var##_cache;                                                              \
  __typeof__(&fn) var = __atomic_load_n(&var##_cache, __ATOMIC_RELAXED);                           \
  if (SHIM_UNLIKELY(!var)) {                                                                       \
    var = (__typeof__(&fn))jpg_real(#fn, lib);                                                     \
    __atomic_store_n(&var##_cache, var, __ATOMIC_RELAXED);                                         \
  }

/* A growable byte buffer. put/zero return 0, or -1 when memory ran out
 * (the buffer is then marked failed and stays failed). */
typedef struct {
  uint8_t *p;
  size_t len, cap;
  size_t ready; /* bytes whose pages are mapped (shim_populate_ahead) */
  int failed;
} jpg_buf;
int jpg_buf_put(jpg_buf *b, const void *p, size_t n);
int jpg_buf_zero(jpg_buf *b, size_t n);
void jpg_buf_free(jpg_buf *b);

/* A program that did not offer again the bytes the library left unread
 * when its source suspended, but others in their place: gdk-pixbuf's
 * loader, closed on a truncated image, offers a fake EOI instead. The
 * library decodes on from where it stood, so what it used depends on
 * where the suspension found it, which replay, draining whole buffers,
 * cannot know; the recording tells it (rep_jpeg.c). len 0: none. */
typedef struct {
  uint64_t at;   /* datastream bytes the library had used (from SOI) */
  uint64_t len;  /* bytes it left unread, which the program dropped */
  uint64_t hash; /* their XXH3-64 */
} jpg_drop;
#define JPG_UNREAD_MAX 65536 /* unread bytes looked after; more: not followed */

/* Where a followed decode is. */
enum {
  JPG_IDLE = 0,    /* no decode */
  JPG_HEADER = 1,  /* jpeg_read_header called, not complete yet */
  JPG_READY = 2,   /* header read (JPEG_HEADER_OK) */
  JPG_STARTED = 3, /* jpeg_start_decompress called */
};

/* A thread's part of a decode's library time (jpg_callbacks.thread). */
typedef struct {
  uint32_t thread;   /* as jpg_callbacks.thread names it */
  uint64_t first_ns; /* when its first call of the decode began */
  uint64_t ns;       /* its time inside the decode's calls */
  uint64_t image_ns; /* of which in calls that make the image (from
                        jpeg_start_decompress on, not the finish) */
} jpg_work;
#define JPG_WORK_THREADS 4 /* threads followed per decode; later ones are not */

/* Record, timing a decode's source callbacks (jpg_source_ns): the empty
 * callbacks timed beside them, and the groups whose means' median is
 * taken. */
#define SRC_ZEROS 63
#define SRC_GROUPS 8

typedef struct jpg_obj jpg_obj;
struct jpg_obj {
  j_decompress_ptr cinfo;
  int phase;       /* JPG_IDLE.. */
  int in_call;     /* inside an outermost hook on this object */
  int passthrough; /* not offloadable: nothing is captured or served */
  uint16_t reason; /* JPG_NO_* */

  /* source manager */
  struct jpeg_source_mgr *src;
  void (*orig_init)(j_decompress_ptr);
  boolean (*orig_fill)(j_decompress_ptr);
  void (*orig_skip)(j_decompress_ptr, long);
  int src_wrapped;
  int capture;                  /* keep consumed bytes in cap */
  jpg_buf cap;                  /* bytes of the current datastream the library consumed */
  const JOCTET *last, *buf_end; /* not yet kept part of the current buffer */
  int in_skip;
  int in_src;        /* inside the program's fill / skip / init */
  int src_error;     /* the error exit came from inside the program's source */
  size_t header_len; /* cap.len when the header was complete */
  uint32_t frame_w, frame_h; /* the image size jpeg_read_header read */
  jpg_buf tables;    /* tables-only datastreams read on this object */
  /* an image's header put quantisation (q) or Huffman (h) tables in the
   * library's state, which libjpeg keeps from image to image; inherits:
   * the image being decoded lacks such tables of its own, so it is decoded
   * with tables its request does not hold, which the image before it left
   * (another may come before it in a replay): not offloadable. Tables no
   * image defined are a tables-only datastream's (in the request) or the
   * library's standard Huffman tables. */
  uint8_t image_q, image_h, inherits;
  /* the image's own header defines quantisation (q) and, unless it is
   * arithmetic-coded, Huffman (h) tables: read at jpg_header_done */
  uint8_t own_q, own_h;
  /* record: the bytes the library left unread at the source's last
   * suspension (a copy), pending a look at what the program offers next,
   * and where; then the first place it offered others (jpg_drop) */
  uint8_t *unread;
  size_t unread_len;
  uint64_t unread_at;
  jpg_drop drop;

  /* error manager */
  struct jpeg_error_mgr *err;
  void (*orig_emit)(j_common_ptr, int);
  void (*orig_exit)(j_common_ptr);
  int err_wrapped;
  int log_phase; /* record: JPG_PHASE_* of messages to keep, 0 = none */
  jpg_msg *msgs; /* record: kept messages; replay: held back while draining */
  size_t nmsgs, msg_cap, msg_next;

  /* replay: drain and feed */
  int draining;
  jmp_buf *drain_jb;
  jpg_buf drained; /* bytes taken from the source after the header */
  size_t drain_seg;        /* of them, taken from the program's buffer since it was
                              last filled (or the drain began): jpg_unread */
  const JOCTET *drain_end; /* where a drain that suspended left the source */
  size_t drain_lag;        /* the last of them, not yet fed to the scanner
                              (jpg_drain: small pieces without a 0xFF) */
  int starve;      /* the library gets no data (fill_input_buffer says FALSE) */
  const JOCTET *starve_nib;
  size_t starve_bib;
  int feeding;   /* the real library reads `drained` first */
  int overlay;   /* src currently points into `drained` */
  int feed_done; /* `drained` is used up */
  size_t feed_pos, seg_end;
  const JOCTET *prog_nib; /* the program's view of its source */
  size_t prog_bib;

  /* time inside the library for this decode (trace clock) */
  uint64_t t_first, t_in, t_out, busy_ns; /* t_out: when the last call left */
  uint32_t timed;                         /* library calls of the decode timed so far (jpg_leave) */
  /* busy_ns by thread, when the shim names threads: a program may read a
   * decode's rows on one thread and finish or destroy the object on
   * another (libvips), and the decode's work is where its time went */
  jpg_work work[JPG_WORK_THREADS];
  int nwork;
  /* record: the program's source callbacks inside the decode's calls
   * (jpg_callbacks.time_source): how many, how many timed, their time as
   * timed; and an empty callback timed beside them (jpg_source_ns) */
  uint32_t src_calls, src_timed, src_rand, src_zeros;
  uint64_t src_ns;
  uint16_t src_zero[SRC_ZEROS];      /* ns, the first SRC_ZEROS */
  uint64_t src_group_ns[SRC_GROUPS]; /* src_ns of the timed calls dealt round */

  void *ext; /* the shim's own per-decode data */
};

/* What a shim does when an error ends a followed decode (record: submit
 * the call as failed; replay: account for it); the decode is ended
 * afterwards. Either the library's error_exit was called (stale = 0; the
 * program's handler runs next, o->src_error says whether the program's
 * source raised it), or a program callback longjmped out of the library
 * and the next call on the object found it (stale = 1). */
typedef struct {
  void (*on_error)(jpg_obj *o, int stale);
  void (*free_ext)(jpg_obj *o); /* free o->ext (decode end, object forgotten) */
  uint64_t (*now)(void);        /* the shim's clock (default shim_now_ns) */
  uint32_t (*thread)(void);     /* the calling thread's index (record); NULL:
                                   o->work is not kept */
  int time_source;              /* time the program's source callbacks (record:
                                   jpg_source_ns) */
} jpg_callbacks;
void jpg_set_callbacks(const jpg_callbacks *cb);

/* The object's state, created on demand (create = 1). NULL when absent, or
 * when the table is full (the object is then not followed). */
jpg_obj *jpg_obj_get(j_decompress_ptr cinfo, int create);

/* Forget an object (jpeg_destroy, a new jpeg_create on the same memory):
 * end its decode and free everything. */
void jpg_obj_forget(j_decompress_ptr cinfo);

/* Start following a decode: wrap the source and the error manager, keep
 * consumed bytes. Returns 0, or -1 if they cannot be followed (the decode is
 * then passthrough with reason JPG_NO_UNTRACKED). */
int jpg_decode_begin(jpg_obj *o);

/* End the decode: the program's pointers back, buffers freed (tables-only
 * datastreams are kept), free_ext called, phase JPG_IDLE. */
void jpg_decode_end(jpg_obj *o);

/* Call first in every hook that found o: a previous call on o that never
 * returned (a program callback longjmped past the library) ends its decode
 * as failed. */
void jpg_check_stale(jpg_obj *o);

/* Re-wrap if the program replaced its source or error functions. */
void jpg_rewrap(jpg_obj *o);

/* Outermost-call guard. jpg_outermost tells whether the calling hook is the
 * outermost intercepted call on this thread (libjpeg calls its own exported
 * functions: jpeg_read_header calls jpeg_consume_input, jpeg_finish_decompress
 * calls jpeg_abort, ...). Pass __builtin_frame_address(0) of the hook: a
 * JPEG hook left by a longjmp the shim did not see is recognised because the
 * new call's frame is not deeper than the stale one. */
int jpg_outermost(void *frame);
/* Enter / leave an outermost call on o (o may be NULL): shim_depth, timing,
 * source synchronisation (and the replay overlay). */
void jpg_enter(jpg_obj *o, void *frame);
void jpg_leave(jpg_obj *o);

/* A call on o that began at o->t_in took ns: count it towards the
 * decode's time, and the calling thread's. */
void jpg_busy(jpg_obj *o, uint64_t ns);

/* Of the decode's time so far, the part its calls spent in the program's
 * source callbacks (with jpg_callbacks.time_source): every callback is
 * timed while they are few (64) or take 1 us or more on average, then one
 * in 64 at random (poppler's one-byte fills: two clock reads each would
 * cost a third of its decode); every call is counted at the mean of those
 * timed, less the mean of an empty callback timed beside them. */
uint64_t jpg_source_ns(const jpg_obj *o);

/* The thread that spent the most of the decode's library time (the first
 * of them on a tie), or NULL when threads are not named or no call was
 * made. */
const jpg_work *jpg_main_work(const jpg_obj *o);

/* Keep the consumed bytes of the current call now (used before the shim
 * looks at o->cap inside a call). */
void jpg_sync(jpg_obj *o);

/* jpeg_read_header completed: what was consumed so far is the header. */
void jpg_header_done(jpg_obj *o);

/* Bytes of image data (after the header) the library consumed so far. */
uint64_t jpg_data_consumed(const jpg_obj *o);

/* Run the real jpeg_start_decompress with no data available: it sets up
 * the decompressor (checking the parameters, raising the same errors) and
 * returns TRUE for an image it can start without input, FALSE where it
 * would read image data (several scans, two-pass quantisation). Not for
 * arithmetic coding with several scans: that decoder cannot suspend. */
boolean jpg_start_starved(jpg_obj *o);

/* Call a program callback with shim_depth as outside the library, so a
 * longjmp out of it leaves the counter right; the hooked calls it makes
 * leave shim_frame to their own, which is put back. */
#define JPG_CALLBACK(expr)                                                                         \
  do {                                                                                             \
    int saved_depth_ = shim_depth;                                                                 \
    void *saved_frame_ = shim_frame;                                                               \
    const void *saved_ret_ = shim_frame_ret;                                                       \
    shim_depth = 0;                                                                                \
    expr;                                                                                          \
    shim_depth = saved_depth_;                                                                     \
    shim_frame = saved_frame_;                                                                     \
    shim_frame_ret = saved_ret_;                                                                   \
  } while (0)

/* Re-emit a message through the program's error manager. */
void jpg_emit(jpg_obj *o, const jpg_msg *m);

/* ---- requests -------------------------------------------------------------- */

/* The decode parameters as they are when jpeg_start_decompress is called.
 * A colour map the program gave for quantising is copied to *cmap (malloc'd,
 * caller frees; NULL when none). */
void jpg_take_params(const jpg_obj *o, jpg_params *p, uint8_t **cmap);

/* Buffered-image mode (buffered_image) as replay serves it: an image of
 * one scan, without colour quantisation or raw data output, every output
 * pass of which gives the rows a plain decode gives (each row waits for
 * its data). Call after jpeg_read_header, before jpeg_start_decompress. */
int jpg_buffered_served(j_decompress_ptr cinfo);

/* Whether the output parameters a buffered-image output pass may change
 * (jpeg_start_output: dct_method, dither_mode, upsampling, smoothing,
 * quantisation) are still those of p. */
int jpg_pass_same(j_decompress_ptr cinfo, const jpg_params *p);

/* Bytes per output row as jpeg_read_scanlines returns them. */
size_t jpg_row_bytes(j_decompress_ptr cinfo);

/* Raw data output (raw_data_out): what jpeg_read_raw_data writes. Each
 * call decodes one iMCU row (`lines` output lines) straight into the
 * program's per-component row buffers: for component c, step[c] rows of
 * row_bytes[c] samples (its blocks across, each DCT_scaled_size wide),
 * fewer in the last iMCU row, whose dummy block rows it leaves alone. Over
 * the image a component's rows make one plane of rows[c] rows; a response
 * holds the planes one after another (off[c]). */
#define JPG_RAW_MAX 4 /* components served (more: not offloadable) */
typedef struct {
  int n;
  uint32_t lines, imcu_rows;
  uint32_t row_bytes[JPG_RAW_MAX], rows[JPG_RAW_MAX], step[JPG_RAW_MAX];
  size_t off[JPG_RAW_MAX];
  size_t bytes;
} jpg_raw_layout;

/* The layout of a raw decode after jpeg_start_decompress (or
 * jpeg_calc_output_dimensions) set its scaled sizes. Returns 0, or -1 for
 * more than JPG_RAW_MAX components or sizes libjpeg does not make. */
int jpg_raw_layout_of(j_decompress_ptr cinfo, jpg_raw_layout *L);

/* Rows of plane c that iMCU row i writes. */
static inline uint32_t jpg_raw_rows(const jpg_raw_layout *L, int c, uint32_t i) {
  uint64_t at = (uint64_t)i * L->step[c];
  if (at >= L->rows[c])
    return 0;
  return L->rows[c] - at < L->step[c] ? (uint32_t)(L->rows[c] - at) : L->step[c];
}

/* Where row r of plane c's iMCU row i sits in a response. */
static inline size_t jpg_raw_at(const jpg_raw_layout *L, int c, uint32_t i, uint32_t r) {
  return L->off[c] + ((size_t)i * L->step[c] + r) * L->row_bytes[c];
}

/* Start the scanner that builds o's request: room for the request header
 * and the tables-only datastreams kept on o, then the image datastream. */
void jpg_request_scan(jpg_obj *o, const jpg_params *p, jpg_scan *sc);

/* Finish the request from a scanner started with jpg_request_scan and fed
 * the image datastream. Returns the blob (malloc'd) and fills *pr from the
 * image datastream's header, or NULL when memory ran out. */
uint8_t *jpg_request_finish(jpg_obj *o, jpg_params *p, const uint8_t *cmap, jpg_scan *sc,
                            size_t *len, jpg_probe *pr);

/* Bytes of the image datastream inside a request blob. */
size_t jpg_request_image_bytes(const jpg_obj *o, const jpg_params *p, size_t len);

/* jpeg_read_header returned JPEG_HEADER_TABLES_ONLY: keep the consumed
 * tables-only datastream (normalised) for the images that follow. */
void jpg_keep_tables(jpg_obj *o);

/* ---- replay: drain and feed -------------------------------------------- */

enum { JPG_DRAIN_DONE = 0, JPG_DRAIN_SUSPENDED = 1, JPG_DRAIN_ERROR = 2 };

/* Take bytes from the program's source into o->drained, passing them to the
 * scanner, until the scanner sees EOI (DONE), the source suspends
 * (SUSPENDED: every byte offered so far was taken; call again later), or
 * the source raises an error (ERROR: the program's error handler was not
 * run; it will run when the real library reaches that point). Messages
 * emitted meanwhile are held back in o->msgs with their input offset. */
int jpg_drain(jpg_obj *o, jpg_scan *sc);

/* Record: the decode ends before its last row (given up, or failed)
 * with the bytes the library left unread at the source's last suspension
 * not offered again: the program dropped them there, and that is the
 * decode's drop (replacing an earlier one). Replay gives them back where
 * its drain stops there, so the real library, running from that place,
 * leaves them unread in the program's source, as natively (PIL reports
 * how many), and only a decode stopped exactly there is taken for it. */
void jpg_unread_final(jpg_obj *o);

/* Give the last n drained bytes back to the program's source, as the
 * library leaves unread what it could not use when its source suspends.
 * Returns 0, or -1 when they are not all in the buffer the program
 * offered last (o->drain_seg). */
int jpg_unread(jpg_obj *o, size_t n);

/* From now on the real library reads o->drained first, then the program's
 * source; held-back messages are emitted when the library reaches their
 * offset. Call inside an outermost hook. */
void jpg_feed_begin(jpg_obj *o);

#endif

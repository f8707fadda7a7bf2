/* jpeg_req.h — what a JPEG decode request and response look like in a
 * trace, shared by the record and replay shims and by offline tools.
 *
 * A request blob is a small versioned parameter header followed by the
 * JPEG data (normalised, see jpeg_scan.h); its XXH3-128, bound to the API,
 * is the request fingerprint. A response blob is the decoded pixels exactly
 * as the program received them, optionally followed by an extension that
 * carries the colour map and the library's messages. traces/FORMAT.md
 * ("JPEG decode requests") specifies both byte by byte. */
#ifndef STANDIN_JPEG_REQ_H
#define STANDIN_JPEG_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"
#include "jpeg_scan.h"

#define JPG_REQ_MAGIC "SJR1"
#define JPG_REQ_FIXED 80 /* bytes of the fixed part of the header */
#define JPG_EXT_MAGIC "SJX1"
#define JPG_MSG_BYTES 96 /* one message record in the response extension */

/* Why a decode is not offloadable (st_call.reason of jpeg.decode calls
 * flagged ST_CALL_NOT_OFFLOADABLE, FAILED or NO_RESPONSE). Part of the
 * trace format: append only. */
enum {
  JPG_NO_NONE = 0,
  JPG_NO_BUFFERED = 1,       /* buffered-image mode over several scans, with colour
                                quantisation or raw data output, or an output pass
                                with other parameters than the decode's (until
                                2026-11-30: any buffered-image decode) */
  JPG_NO_RAW = 2,            /* raw data output of more than JPG_RAW_MAX components
                                (before 2026-11-30: any raw data output) */
  JPG_NO_COEF = 3,           /* jpeg_read_coefficients */
  JPG_NO_SKIP = 4,           /* jpeg_skip_scanlines */
  JPG_NO_CROP = 5,           /* jpeg_crop_scanline */
  JPG_NO_ABANDONED = 6,      /* ended before the last row was read */
  JPG_NO_ERROR = 7,          /* the library's error_exit ended it */
  JPG_NO_NOMEM = 8,          /* the shim could not keep request or response */
  JPG_NO_TJ_ERROR = 9,       /* TurboJPEG returned -1 (error or warning) */
  JPG_NO_UNTRACKED = 10,     /* source or error manager could not be followed */
  JPG_NO_BAD_MARKER = 11,    /* corrupt data: an invalid marker */
  JPG_NO_INHERITED = 12,     /* an abbreviated image decoded with tables an earlier image
                                left on its object (jpg_obj.inherits) */
  JPG_NO_ERROR_IN_DATA = 13, /* an error (or a warning the program made fatal) ended it
                                while its source still held bytes the library had not
                                read: it fails so on any input that starts so */
  JPG_NO_COUNT
};

/* What a JPG_NO_* reason means, in a few words ("reason N" beyond the
 * known ones, for traces from a newer standin). */
const char *jpg_no_name(unsigned reason, char *buf, size_t len);

/* Which TurboJPEG function a request went to (jpg_params.entry). */
enum {
  JPG_ENTRY_LIBJPEG = 0,
  JPG_ENTRY_TJ_RGB = 1,
  JPG_ENTRY_TJ_YUV_PLANES = 2,
  JPG_ENTRY_TJ_YUV = 3
};

/* libjpeg decompression options (jpg_params.options bits). */
enum {
  JPG_OPT_FANCY_UPSAMPLING = 1u << 0,
  JPG_OPT_BLOCK_SMOOTHING = 1u << 1,
  JPG_OPT_QUANTIZE = 1u << 2,
  JPG_OPT_TWO_PASS_QUANTIZE = 1u << 3,
  JPG_OPT_ENABLE_1PASS = 1u << 4,
  JPG_OPT_ENABLE_EXTERNAL = 1u << 5,
  JPG_OPT_ENABLE_2PASS = 1u << 6,
  JPG_OPT_RAW_DATA = 1u << 7,
  JPG_OPT_BUFFERED = 1u << 8,
  JPG_OPT_SOURCE_ERROR = 1u << 9 /* the program's source raised an error after these bytes */
};

/* The decode parameters: everything besides the JPEG bytes that changes
 * the pixels. libjpeg uses every field; TurboJPEG uses the second names. */
typedef struct {
  uint8_t api;             /* ST_API_JPEG_DECODE or ST_API_TJ_DECODE */
  uint8_t entry;           /* JPG_ENTRY_* */
  int32_t out_color_space; /* J_COLOR_SPACE  | TJ pixel format, -1 for YUV */
  int32_t jpeg_color_space;
  uint32_t scale_num;   /* | TJ requested width (0 = the image's) */
  uint32_t scale_denom; /* | TJ requested height */
  int32_t dct_method;   /* J_DCT_METHOD    | TJ flags */
  uint32_t options;     /* JPG_OPT_*       | TJ YUV row padding (tjDecompressToYUV2) */
  int32_t dither_mode;
  int32_t desired_colors;
  double output_gamma;
  uint32_t tables_len;  /* bytes of tables-only datastreams before the image */
  uint32_t cmap_colors; /* colour map given by the program, 0 = none */
  uint32_t cmap_components;
  /* the image size the program set after jpeg_read_header, when not the
   * frame header's (openslide decodes one tile of an image with restart
   * markers so); 0 = the frame's */
  uint32_t image_width, image_height;
} jpg_params;

/* Whether the decode gives the component planes as sampled (libjpeg's raw
 * data output, TurboJPEG's YUV functions) instead of converted pixels. */
static inline int jpg_planar(const jpg_params *p) {
  return p->api == ST_API_TJ_DECODE
             ? p->entry == JPG_ENTRY_TJ_YUV_PLANES || p->entry == JPG_ENTRY_TJ_YUV
             : (p->options & JPG_OPT_RAW_DATA) != 0;
}

/* Bytes of the request header for these parameters (fixed part and map). */
size_t jpg_req_header_len(const jpg_params *p);

/* Write the header (jpg_req_header_len bytes) at dst; cmap holds
 * cmap_components rows of cmap_colors bytes (or NULL when there is none). */
void jpg_req_write_header(uint8_t *dst, const jpg_params *p, const uint8_t *cmap);

/* Split a request blob. Returns 0, or -1 when it is not a valid request
 * (bad magic, lengths past the end). */
int jpg_req_parse(const uint8_t *blob, size_t len, jpg_params *p, const uint8_t **cmap,
                  const uint8_t **jpeg, size_t *jpeg_len);

/* Request fingerprint: XXH3-128 of the whole blob, bound to the API. */
void jpg_req_fingerprint(const uint8_t *blob, size_t len, int api, uint8_t fp[16]);

/* st_jpeg_subsamp of a component layout (sampling factors of up to 4
 * components; more than 4 gives ST_SUBSAMP_OTHER). */
int jpg_subsamp(int ncomp, const int *h, const int *v);

/* Static name of a request class, "baseline 4:2:0", "progressive gray",
 * for a SOF marker and an st_jpeg_subsamp. The pointer is the trace's type
 * key: the same class always gives the same pointer. */
const char *jpg_class_name(int sof, int subsamp);

/* Fill the ST_JPF_* features; returns how many slots to store: all but
 * the drop slots, which a decode that had one sets (rec_jpeg.c). */
int jpg_features(uint64_t *feat, const jpg_probe *pr, uint64_t input_bytes, uint32_t out_w,
                 uint32_t out_h, uint64_t out_bytes, uint32_t scale_num, uint32_t scale_denom);

/* A message the library emitted while decoding (warning or trace). */
enum { JPG_PHASE_START = 1, JPG_PHASE_ROWS = 2, JPG_PHASE_FINISH = 3 };
typedef struct {
  uint32_t row;     /* output_scanline when it was emitted */
  uint16_t phase;   /* JPG_PHASE_* */
  int16_t level;    /* emit_message level: -1 warning, >= 0 trace */
  int32_t code;     /* msg_code */
  uint8_t parm[80]; /* msg_parm */
  uint64_t pos;     /* image data bytes (after the header) the library had
                       consumed; replay also uses it for held-back messages */
} jpg_msg;

/* Bytes of the response extension for a colour map and messages (0 when
 * there is neither: the response is then the pixels alone). */
size_t jpg_ext_len(uint32_t ncolors, uint32_t ncomp, size_t nmsgs);

/* Write the extension at dst. cmap: ncomp rows of ncolors bytes. */
void jpg_ext_write(uint8_t *dst, uint32_t ncolors, uint32_t ncomp, const uint8_t *cmap,
                   const jpg_msg *msgs, size_t nmsgs);

/* Read an extension of `len` bytes. Returns 0, or -1 if it is damaged.
 * *cmap and the message records point into ext; jpg_ext_msg decodes one. */
typedef struct {
  uint32_t ncolors, ncomp, nmsgs;
  const uint8_t *cmap, *msgs;
} jpg_ext;
int jpg_ext_read(const uint8_t *ext, size_t len, jpg_ext *x);
void jpg_ext_msg(const jpg_ext *x, uint32_t i, jpg_msg *m);

/* ---- a libjpeg response kept as a digest of its rows ----------------------
 *
 * Copying a decode's rows cost the recorded program more than anything
 * else standin does (a 640x480 decode: ~920 KB), and the pixels were most
 * of every JPEG trace. The request holds all a decoder needs to make them
 * again (see the request blob), so record hashes the rows as the program
 * receives them, and the offline tools decode the request again and check
 * the rows against the digest (jpeg_regen.h). A call whose response blob
 * is a digest is flagged ST_CALL_RESP_DIGEST; its resp_len stays the size
 * of the rows and extension the program got. */
#define JPG_DIG_MAGIC "SJD1"
#define JPG_DIG_FIXED 24 /* bytes before the optional extension */

typedef struct {
  uint32_t row_bytes, rows;
  uint64_t digest; /* jpg_digest_row over every row in order, from 0 */
} jpg_digest;

/* Fold one row into a digest: XXH3-64 of the row, then XXH3-64 of that
 * (8 bytes, little-endian) seeded with the digest so far. */
uint64_t jpg_digest_row(uint64_t d, const void *row, size_t len);

/* Write the fixed part (JPG_DIG_FIXED bytes) at dst. */
void jpg_dig_write(uint8_t *dst, const jpg_digest *g);

/* Read a digest blob of `len` bytes; *ext and *ext_len are the extension
 * after it (NULL, 0 when there is none). Returns 0, or -1 if damaged. */
int jpg_dig_read(const uint8_t *blob, size_t len, jpg_digest *g, const uint8_t **ext,
                 size_t *ext_len);

#endif

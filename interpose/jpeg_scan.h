/* jpeg_scan.h — reading JPEG datastreams without decoding them.
 *
 * Two jobs, both on raw bytes and free of libjpeg:
 *
 * - jpg_scan is a streaming marker scanner. It finds where an image ends
 *   (EOI) without looking inside entropy-coded data, and it builds the
 *   *normalised* datastream that identifies a decode request (the bytes
 *   that fingerprint a decode and that the trace keeps as the request):
 *   SOI, frame, tables, scans and their entropy-coded data, APP0 (JFIF)
 *   and APP14 (Adobe, which decides the colour transform); without
 *   comments, other APPn segments, fill bytes and stray bytes between
 *   segments (and a scan's data after a restart marker where the scan has
 *   no restart interval: libjpeg stops there and skips the rest), and cut
 *   right after the entropy-coded data of the last scan,
 *   followed by EOI. Cutting there makes the request the same whether or
 *   not the program let the library read the trailing markers (a program
 *   that never calls jpeg_finish_decompress leaves them unread).
 *   traces/FORMAT.md gives the rule in full.
 *
 * - jpg_probe reads the frame header: size, components, sampling, SOF
 *   type, restart interval. */
#ifndef STANDIN_JPEG_SCAN_H
#define STANDIN_JPEG_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int st;            /* scanner state (jpeg_scan.c) */
  int marker;        /* marker of the segment being read */
  uint32_t seg_left; /* payload bytes of that segment still to come */
  int keep;          /* the segment goes to the output */
  int seen_sos;      /* a scan started */
  int seen_soi;      /* SOI was read */
  int seen_sof;      /* a frame header was read */
  int bad_marker;    /* the marker libjpeg stops at with an error (0: none) */
  uint32_t restart;  /* restart interval (DRI) in force, 0 after SOI as in libjpeg */
  uint32_t seg_len;  /* payload bytes of the segment being read */
  uint32_t dri;      /* a DRI segment's payload so far */
  int oom;           /* output could not grow: the result is unusable */
  uint8_t len_hi;
  /* Output: `reserve` bytes left free at the front for the caller (a
   * request header), then the normalised stream. */
  uint8_t *out;
  size_t out_len, out_cap, reserve;
  size_t out_ready;    /* bytes of out whose pages are mapped (shim_populate_ahead) */
  size_t entropy_end;  /* out_len where the last scan's data ended */
  size_t first_end;    /* out_len where the first scan's data ended at a marker
                          (0: not yet). Of an image with one scan, libjpeg
                          decodes nothing after it: the request cut there and
                          closed with EOI is the whole of a decode that read
                          every row and stopped (rep_jpeg.c) */
  size_t complete_end; /* out_len after the last complete segment */
  uint64_t consumed;   /* input bytes consumed so far */
} jpg_scan;

/* Start scanning a datastream at its first byte. `reserve` bytes are kept
 * free at the start of the output buffer; want_output = 0 only finds EOI. */
void jpg_scan_init(jpg_scan *s, size_t reserve, int want_output);

/* Feed n bytes. Returns how many were consumed: all of them, or fewer when
 * EOI ends the datastream (the EOI marker itself is consumed). */
size_t jpg_scan_feed(jpg_scan *s, const uint8_t *p, size_t n);

/* 1 once EOI has been consumed, or a marker libjpeg refuses (bad_marker:
 * an unknown or reserved marker, a second SOI or frame header, a frame
 * type it does not decode): corrupt data, where the real library fails,
 * or, in data with restart markers, skips to the next one. Its two bytes
 * are consumed, and the normalised stream is cut as if the data ended
 * just before it. */
int jpg_scan_done(const jpg_scan *s);

/* Whether bytes fed next could end the datastream (jpg_scan_done) even if
 * none of them is 0xFF: it has ended, or the last byte fed was a 0xFF, so
 * the next may be a marker's code. When this is 0, bytes without a 0xFF
 * may be fed later in one piece: none of them can end it. */
int jpg_scan_may_end(const jpg_scan *s);

/* How much of the output every datastream that starts with the bytes fed
 * so far keeps in its request, whatever comes next: all of it inside a
 * scan's data; after a scan's data, up to where that ended (a segment
 * after it may follow the last scan, which the request cuts); before the
 * first scan, the complete segments. The reserved front included. */
size_t jpg_scan_kept(const jpg_scan *s);

/* End the datastream here (EOI seen or not), append EOI to the output and
 * hand the buffer over: *buf (the caller frees it with shim_free) holds
 * `reserve` free bytes then the normalised stream, *len counts both.
 * Returns 0, or -1 if memory ran out (nothing is handed over). The scanner
 * is empty afterwards. */
int jpg_scan_finish(jpg_scan *s, uint8_t **buf, size_t *len);

/* Free the output of an unfinished scan. */
void jpg_scan_free(jpg_scan *s);

/* What the frame header says. */
typedef struct {
  int sof; /* SOF marker (0xC0 baseline, 0xC2 progressive, ...), -1 if none */
  uint32_t width, height;
  int ncomp;
  int h[4], v[4];   /* sampling factors of the first 4 components */
  uint32_t restart; /* restart interval in MCUs (DRI before the first scan) */
  int dqt, dht;     /* the datastream defines quantisation / Huffman tables
                       before its first scan (an abbreviated one may not,
                       and use what an earlier one left on the object) */
} jpg_probe;

/* Parse markers from SOI up to the first SOS. Returns 0 when a frame
 * header was found, -1 otherwise (*p is still filled as far as known). */
int jpg_probe_header(const uint8_t *data, size_t len, jpg_probe *p);

#endif

/* jpeg_tj.h — TurboJPEG decode requests: which bytes a call writes.
 *
 * A TurboJPEG call gets the whole JPEG in memory and writes into the
 * caller's buffers with a pitch (packed pixels) or per-plane strides (YUV).
 * The trace keeps the written bytes packed, row after row (plane after
 * plane); these helpers compute that layout exactly as libturbojpeg 2.1
 * does, and move bytes between the caller's buffers and the packed form. */
#ifndef STANDIN_JPEG_TJ_H
#define STANDIN_JPEG_TJ_H

#include <stddef.h>
#include <stdint.h>

#include "jpeg_req.h"

typedef struct {
  int jpeg_w, jpeg_h, subsamp; /* from the JPEG header (TJSAMP_*) */
  int scale_num, scale_denom;  /* scaling factor TurboJPEG chooses */
  int out_w, out_h;            /* decoded size */
  int nplanes;                 /* 1 for packed pixels, 1 or 3 for YUV */
  int row_bytes[3], rows[3];   /* bytes written per row, rows per plane */
  size_t bytes;                /* all of them, packed */
} jpg_tj_layout;

/* Layout of a call: entry JPG_ENTRY_TJ_*; width and height as passed (0 =
 * the image's); pixel_format for JPG_ENTRY_TJ_RGB. The JPEG header is read
 * with a private TurboJPEG handle of the calling thread (the program's
 * handle and its error state are not touched). Returns 0, or -1 when the
 * header cannot be read or the call would fail anyway. */
int jpg_tj_layout_of(const unsigned char *jpeg, unsigned long size, int entry, int width,
                     int height, int pixel_format, jpg_tj_layout *L);

/* Where each plane starts and its stride in the caller's buffers. */
typedef struct {
  unsigned char *plane[3];
  size_t stride[3];
} jpg_tj_dest;

/* tjDecompress2(dstBuf, pitch) */
void jpg_tj_dest_rgb(const jpg_tj_layout *L, unsigned char *dst, int pitch, jpg_tj_dest *d);
/* tjDecompressToYUVPlanes(dstPlanes, strides) */
void jpg_tj_dest_planes(const jpg_tj_layout *L, unsigned char **planes, const int *strides,
                        jpg_tj_dest *d);
/* tjDecompressToYUV2(dstBuf, width, pad, height): planes laid out in one
 * buffer from the requested (unscaled) size, as libturbojpeg does. */
int jpg_tj_dest_yuv(const jpg_tj_layout *L, unsigned char *dst, int width, int pad, int height,
                    jpg_tj_dest *d);

/* Copy the written bytes from the caller's buffers to packed form. */
void jpg_tj_pack(const jpg_tj_layout *L, const jpg_tj_dest *d, uint8_t *out);

/* Digest of the written bytes, row after row (jpg_digest_row), as a
 * response kept as a digest carries it (jpeg_req.h). */
uint64_t jpg_tj_digest(const jpg_tj_layout *L, const jpg_tj_dest *d);

/* Of a sample of d's rows (placement.h; seed draws it), per mille, how
 * much a probe found outside the caches; 0 when nothing could be probed. */
uint32_t jpg_tj_out_cold(const jpg_tj_layout *L, const jpg_tj_dest *d, uint64_t seed);

/* Copy packed bytes back into the caller's buffers, writing out_cold per
 * mille of the rows to memory (non-temporal stores, spread evenly);
 * returns those rows' bytes. */
uint64_t jpg_tj_unpack_placed(const jpg_tj_layout *L, const uint8_t *in, const jpg_tj_dest *d,
                              uint32_t out_cold);

#endif

/* jpeg_tj.c — layouts of TurboJPEG decode calls (see jpeg_tj.h). */
#include "jpeg_tj.h"

#include <pthread.h>
#include <string.h>
#include <turbojpeg.h>

#include "jpeg_obj.h"
#include "placement.h"

/* One private decompressor per thread, to read headers without touching
 * the program's handle (a header read would reset its error state). */
static pthread_key_t info_key;
static pthread_once_t info_once = PTHREAD_ONCE_INIT;
static SHIM_TLS tjhandle info;

static void info_free(void *h) {
  JPG_REAL(real_destroy, tjDestroy, JPG_LIBTJ);
  if (h)
    real_destroy(h);
}

static void info_key_make(void) {
  pthread_key_create(&info_key, info_free);
}

static tjhandle info_handle(void) {
  if (info)
    return info;
  JPG_REAL(real_init, tjInitDecompress, JPG_LIBTJ);
  pthread_once(&info_once, info_key_make);
  info = real_init();
  if (info)
    pthread_setspecific(info_key, info);
  return info;
}

static int scale(jpg_tj_layout *L, int width, int height) {
  JPG_REAL(real_sf, tjGetScalingFactors, JPG_LIBTJ);
  int n = 0;
  tjscalingfactor *sf = real_sf(&n);
  int w = width ? width : L->jpeg_w, h = height ? height : L->jpeg_h;
  for (int i = 0; sf && i < n; i++) {
    int sw = TJSCALED(L->jpeg_w, sf[i]), sh = TJSCALED(L->jpeg_h, sf[i]);
    if (sw <= w && sh <= h) {
      L->out_w = sw;
      L->out_h = sh;
      L->scale_num = sf[i].num;
      L->scale_denom = sf[i].denom;
      return 0;
    }
  }
  return -1;
}

int jpg_tj_layout_of(const unsigned char *jpeg, unsigned long size, int entry, int width,
                     int height, int pixel_format, jpg_tj_layout *L) {
  JPG_REAL(real_header, tjDecompressHeader3, JPG_LIBTJ);
  JPG_REAL(real_pw, tjPlaneWidth, JPG_LIBTJ);
  JPG_REAL(real_ph, tjPlaneHeight, JPG_LIBTJ);
  memset(L, 0, sizeof *L);
  tjhandle h = info_handle();
  int cs = 0;
  if (!h || width < 0 || height < 0 ||
      real_header(h, jpeg, size, &L->jpeg_w, &L->jpeg_h, &L->subsamp, &cs) != 0 ||
      scale(L, width, height) != 0)
    return -1;
  if (entry == JPG_ENTRY_TJ_RGB) {
    if (pixel_format < 0 || pixel_format >= TJ_NUMPF)
      return -1;
    L->nplanes = 1;
    L->row_bytes[0] = L->out_w * tjPixelSize[pixel_format];
    L->rows[0] = L->out_h;
  } else {
    if (L->subsamp < 0 || cs == TJCS_CMYK || cs == TJCS_YCCK)
      return -1;
    L->nplanes = L->subsamp == TJSAMP_GRAY ? 1 : 3;
    for (int i = 0; i < L->nplanes; i++) {
      L->row_bytes[i] = real_pw(i, L->out_w, L->subsamp);
      L->rows[i] = real_ph(i, L->out_h, L->subsamp);
      if (L->row_bytes[i] < 0 || L->rows[i] < 0)
        return -1;
    }
  }
  for (int i = 0; i < L->nplanes; i++)
    L->bytes += (size_t)L->row_bytes[i] * (size_t)L->rows[i];
  return 0;
}

void jpg_tj_dest_rgb(const jpg_tj_layout *L, unsigned char *dst, int pitch, jpg_tj_dest *d) {
  memset(d, 0, sizeof *d);
  d->plane[0] = dst;
  d->stride[0] = pitch ? (size_t)pitch : (size_t)L->row_bytes[0];
}

void jpg_tj_dest_planes(const jpg_tj_layout *L, unsigned char **planes, const int *strides,
                        jpg_tj_dest *d) {
  memset(d, 0, sizeof *d);
  for (int i = 0; i < L->nplanes; i++) {
    d->plane[i] = planes[i];
    d->stride[i] = strides && strides[i] ? (size_t)(ptrdiff_t)strides[i] : (size_t)L->row_bytes[i];
  }
}

static size_t pad_to(size_t v, int pad) {
  return (v + (size_t)pad - 1) & ~((size_t)pad - 1);
}

int jpg_tj_dest_yuv(const jpg_tj_layout *L, unsigned char *dst, int width, int pad, int height,
                    jpg_tj_dest *d) {
  JPG_REAL(real_pw, tjPlaneWidth, JPG_LIBTJ);
  JPG_REAL(real_ph, tjPlaneHeight, JPG_LIBTJ);
  memset(d, 0, sizeof *d);
  if (pad < 1 || (pad & (pad - 1)))
    return -1;
  int w = width ? width : L->jpeg_w, h = height ? height : L->jpeg_h;
  d->plane[0] = dst;
  d->stride[0] = pad_to((size_t)real_pw(0, w, L->subsamp), pad);
  if (L->nplanes == 3) {
    d->stride[1] = d->stride[2] = pad_to((size_t)real_pw(1, w, L->subsamp), pad);
    d->plane[1] = d->plane[0] + d->stride[0] * (size_t)real_ph(0, h, L->subsamp);
    d->plane[2] = d->plane[1] + d->stride[1] * (size_t)real_ph(1, h, L->subsamp);
  }
  return 0;
}

void jpg_tj_pack(const jpg_tj_layout *L, const jpg_tj_dest *d, uint8_t *out) {
  for (int i = 0; i < L->nplanes; i++)
    for (int r = 0; r < L->rows[i]; r++) {
      memcpy(out, d->plane[i] + (size_t)r * d->stride[i], (size_t)L->row_bytes[i]);
      out += L->row_bytes[i];
    }
}

uint64_t jpg_tj_digest(const jpg_tj_layout *L, const jpg_tj_dest *d) {
  uint64_t g = 0;
  for (int i = 0; i < L->nplanes; i++)
    for (int r = 0; r < L->rows[i]; r++)
      g = jpg_digest_row(g, d->plane[i] + (size_t)r * d->stride[i], (size_t)L->row_bytes[i]);
  return g;
}

uint32_t jpg_tj_out_cold(const jpg_tj_layout *L, const jpg_tj_dest *d, uint64_t seed) {
  place_sampler s;
  place_sampler_init(&s, seed);
  for (int i = 0; i < L->nplanes; i++)
    for (int r = 0; r < L->rows[i]; r++)
      place_sample(&s, d->plane[i] + (size_t)r * d->stride[i], (size_t)L->row_bytes[i]);
  return place_permille(s.cold, s.probed);
}

uint64_t jpg_tj_unpack_placed(const jpg_tj_layout *L, const uint8_t *in, const jpg_tj_dest *d,
                              uint32_t out_cold) {
  uint64_t to_memory = 0;
  uint32_t acc = 500;
  for (int i = 0; i < L->nplanes; i++)
    for (int r = 0; r < L->rows[i]; r++) {
      to_memory += place_copy_share(d->plane[i] + (size_t)r * d->stride[i], in,
                                    (size_t)L->row_bytes[i], out_cold, &acc);
      in += L->row_bytes[i];
    }
  if (to_memory)
    place_fence();
  return to_memory;
}

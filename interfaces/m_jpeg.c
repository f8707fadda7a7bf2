/* m_jpeg.c — JPEG decoder accelerators.
 *
 * jpeg-core: the open-source core_jpeg decoder (ultraembedded/core_jpeg).
 *   It decodes baseline JPEG only: progressive images, restart markers and
 *   4:2:2 (and any other subsampling than grey, 4:2:0 and 4:4:4) are
 *   unsupported and stay in software; it has no scaled IDCT, so scaled
 *   decodes stay in software too. Latency from the HotOS'23 performance
 *   interface (Figure 2), in cycles, with blocks = image pixels / 64 and
 *   compress_rate = output bytes / input bytes:
 *     max(blocks * cpb, blocks / 64 * ((5 / compress_rate) * 3 + 6) * 1.5)
 *   where cpb is the per-block cost by subsampling from the core's README
 *   (66 grey, 137 for 4:2:0 — HotOS uses 136.5 — and 198 for 4:4:4).
 *   Reported error 2.1% average, 10.3% max. Meets timing at 75 MHz or more
 *   on a Xilinx 7-series FPGA (the default clock); an ASIC would clock
 *   higher. */
#include <stdio.h>
#include <stdlib.h>

#include "builtin.h"

enum { JC_CLOCK, JC_GRAY, JC_420, JC_444 };
static const ifb_param jc_p[] = {
    {"clock_mhz", 75}, {"cpb_gray", 66}, {"cpb_420", 137}, {"cpb_444", 198}, {0}};

static void *jc_create(int n, const char *const *k, const char *const *v, char *err, size_t cap) {
  ifb_numbers *x = ifb_numbers_create("jpeg-core", jc_p, n, k, v, err, cap);
  if (x && x->p[JC_CLOCK] <= 0) {
    snprintf(err, cap, "model jpeg-core: clock_mhz must be above 0");
    free(x);
    return NULL;
  }
  return x;
}

/* Per-block cost for the image's subsampling, or 0 when unsupported. */
static double cycles_per_block(const double *p, uint64_t subsamp) {
  switch (subsamp) {
  case 1: return p[JC_GRAY];
  case 4: return p[JC_420];
  case 2: return p[JC_444];
  case 3: ifb_unsupported("4:2:2 subsampling (core_jpeg: grey, 4:2:0, 4:4:4 only)"); return 0;
  default: ifb_unsupported("subsampling other than grey, 4:2:0, 4:4:4"); return 0;
  }
}

static int jc_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (r->api != STANDIN_API_JPEG_DECODE && r->api != STANDIN_API_TJ_DECODE) {
    ifb_unsupported("jpeg-core serves JPEG decodes only");
    return STANDIN_UNSUPPORTED;
  }
  if (ifb_feat(r, STANDIN_JPEG_PROGRESSIVE)) {
    ifb_unsupported("progressive JPEG (core_jpeg decodes baseline only)");
    return STANDIN_UNSUPPORTED;
  }
  if (ifb_feat(r, STANDIN_JPEG_RESTART)) {
    ifb_unsupported("restart markers (core_jpeg does not support them)");
    return STANDIN_UNSUPPORTED;
  }
  uint64_t num = ifb_feat(r, STANDIN_JPEG_SCALE_NUM), den = ifb_feat(r, STANDIN_JPEG_SCALE_DENOM);
  if (num && den && num != den) {
    ifb_unsupported("scaled decode (core_jpeg has no scaled IDCT)");
    return STANDIN_UNSUPPORTED;
  }
  double cpb = cycles_per_block(p, ifb_feat(r, STANDIN_JPEG_SUBSAMPLING));
  double in = (double)ifb_feat(r, STANDIN_JPEG_INPUT_BYTES);
  double out = (double)ifb_feat(r, STANDIN_JPEG_OUT_BYTES);
  if (cpb == 0)
    return STANDIN_UNSUPPORTED;
  if (in <= 0 || out <= 0) {
    ifb_unsupported("request lacks input or output size");
    return STANDIN_UNSUPPORTED;
  }
  double blocks = (double)ifb_feat(r, STANDIN_JPEG_WIDTH) *
                  (double)ifb_feat(r, STANDIN_JPEG_HEIGHT) / 64.0;
  double rate = out / in;
  double pixel_bound = blocks * cpb;
  double entropy_bound = blocks / 64.0 * ((5.0 / rate) * 3 + 6) * 1.5;
  double cycles = pixel_bound > entropy_bound ? pixel_bound : entropy_bound;
  *ns = ifb_ns(cycles * 1000.0 / p[JC_CLOCK]);
  return STANDIN_SUPPORTED;
}

static void numbers_free(void *inst) {
  free(inst);
}

const standin_iface ifb_jpeg_core = {
    STANDIN_IFACE_ABI, "jpeg-core", "clock_mhz=75,cpb_gray=66,cpb_420=137,cpb_444=198",
    "core_jpeg baseline decoder (HotOS'23 Fig. 2; ultraembedded/core_jpeg per-block costs)",
    jc_create,         jc_predict,  numbers_free};

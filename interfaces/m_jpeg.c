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
 *   higher.
 * jpeg-lpn: the Petri-net model of the same core (OSDI'24 "Performance
 *   Interfaces for Hardware Accelerators", dslab-epfl/lpn): the Huffman stage
 *   costs about 3 * nnz + 6 cycles per 8x8 block (nnz = non-zero DCT
 *   coefficients of the block), IDCT and output a nearly constant 65-68; the
 *   stages are pipelined, so a block costs the larger of the two, and a chunk
 *   of 12 blocks costs at least about 1000 cycles. Reported error 0.09%
 *   average, 0.5% max. The coefficients are counted by entropy-decoding the
 *   recorded request with libjpeg (jpeg_read_coefficients), in the standin
 *   command, never in the program. standin's simplification: blocks are taken
 *   in component raster order, not MCU order, when forming chunks. Same
 *   unsupported requests as jpeg-core. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "jpeg_req.h"

#include "builtin.h"

enum { JC_CLOCK, JC_GRAY, JC_420, JC_444 };
static const ifb_param jc_p[] = {
    {"clock_mhz", 75}, {"cpb_gray", 66}, {"cpb_420", 137}, {"cpb_444", 198}, {0}};

/* (a clock of 0 is refused for every model: ifb_parse) */
static void *jc_create(int n, const char *const *k, const char *const *v, char *err, size_t cap) {
  return ifb_numbers_create("jpeg-core", jc_p, n, k, v, err, cap);
}

/* Per-block cost for the image's subsampling: grey, 4:4:4 or 4:2:0, the
 * only ones core_cannot lets through. A cost of 0 is a parameter like any
 * other (the entropy term alone); it was once also "unsupported", which
 * refused every call of that subsampling with no reason. */
static double cycles_per_block(const double *p, uint64_t subsamp) {
  return subsamp == 1 ? p[JC_GRAY] : subsamp == 4 ? p[JC_420] : p[JC_444];
}

/* What core_jpeg cannot decode, shared by both models; 0 when it can. */
static int core_cannot(const standin_request *r) {
  if (r->api != STANDIN_API_JPEG_DECODE && r->api != STANDIN_API_TJ_DECODE) {
    ifb_unsupported("the core serves JPEG decodes only");
    return 1;
  }
  if (ifb_feat(r, STANDIN_JPEG_PROGRESSIVE)) {
    ifb_unsupported("progressive JPEG (core_jpeg decodes baseline only)");
    return 1;
  }
  if (ifb_feat(r, STANDIN_JPEG_RESTART)) {
    ifb_unsupported("restart markers (core_jpeg does not support them)");
    return 1;
  }
  uint64_t num = ifb_feat(r, STANDIN_JPEG_SCALE_NUM), den = ifb_feat(r, STANDIN_JPEG_SCALE_DENOM);
  if (num && den && num != den) {
    ifb_unsupported("scaled decode (core_jpeg has no scaled IDCT)");
    return 1;
  }
  uint64_t nc = ifb_feat(r, STANDIN_JPEG_COMPONENTS);
  if (nc && nc != 1 && nc != 3) { /* CMYK is labelled 4:4:4 by its sampling factors */
    ifb_unsupported("neither 1 nor 3 components (core_jpeg decodes grey or YCbCr; CMYK stays "
                    "in software)");
    return 1;
  }
  uint64_t sub = ifb_feat(r, STANDIN_JPEG_SUBSAMPLING);
  if (sub == 3) {
    ifb_unsupported("4:2:2 subsampling (core_jpeg: grey, 4:2:0, 4:4:4 only)");
    return 1;
  }
  if (sub != 1 && sub != 2 && sub != 4) {
    ifb_unsupported("subsampling other than grey, 4:2:0, 4:4:4");
    return 1;
  }
  return 0;
}

static int jc_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (core_cannot(r))
    return STANDIN_UNSUPPORTED;
  double cpb = cycles_per_block(p, ifb_feat(r, STANDIN_JPEG_SUBSAMPLING));
  double in = (double)ifb_feat(r, STANDIN_JPEG_INPUT_BYTES);
  double out = (double)ifb_feat(r, STANDIN_JPEG_OUT_BYTES);
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

/* ---- jpeg-lpn -------------------------------------------------------------- */

enum { JL_CLOCK, JL_NNZ, JL_BASE, JL_IDCT, JL_CHUNK, JL_CHUNK_MIN };
static const ifb_param jl_p[] = {{"clock_mhz", 75}, {"huff_per_nnz", 3}, {"huff_base", 6},
                                 {"idct", 66.5},    {"chunk_blocks", 12}, {"chunk_min", 1000},
                                 {0}};

static void *jl_create(int n, const char *const *k, const char *const *v, char *err, size_t cap) {
  ifb_numbers *x = ifb_numbers_create("jpeg-lpn", jl_p, n, k, v, err, cap);
  if (x && x->p[JL_CHUNK] < 1) {
    snprintf(err, cap, "model jpeg-lpn: chunk_blocks must be at least 1");
    free(x);
    return NULL;
  }
  return x;
}

typedef struct {
  struct jpeg_error_mgr pub;
  jmp_buf jump;
} lpn_err;

static void lpn_error_exit(j_common_ptr c) {
  longjmp(((lpn_err *)c->err)->jump, 1);
}

static void lpn_quiet(j_common_ptr c, int level) {
  (void)c;
  (void)level;
}

/* Cycles of one block and the running chunk. */
typedef struct {
  const double *p;
  double cycles, chunk;
  unsigned in_chunk;
} lpn_acc;

static void lpn_block(lpn_acc *a, const JCOEF *coef) {
  unsigned nnz = 0;
  for (int i = 0; i < DCTSIZE2; i++)
    nnz += coef[i] != 0;
  double huff = a->p[JL_NNZ] * nnz + a->p[JL_BASE];
  a->chunk += huff > a->p[JL_IDCT] ? huff : a->p[JL_IDCT];
  if (++a->in_chunk == (unsigned)a->p[JL_CHUNK]) {
    a->cycles += a->chunk > a->p[JL_CHUNK_MIN] ? a->chunk : a->p[JL_CHUNK_MIN];
    a->chunk = 0;
    a->in_chunk = 0;
  }
}

/* Entropy-decode the image and cost its blocks; -1 if it does not decode. */
static int lpn_cycles(const double *p, const uint8_t *jpeg, size_t len, double *cycles) {
  struct jpeg_decompress_struct c;
  lpn_err e;
  lpn_acc a = {.p = p};
  c.err = jpeg_std_error(&e.pub);
  e.pub.error_exit = lpn_error_exit;
  e.pub.emit_message = lpn_quiet;
  if (setjmp(e.jump)) {
    jpeg_destroy_decompress(&c);
    return -1;
  }
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, jpeg, (unsigned long)len);
  while (jpeg_read_header(&c, FALSE) == JPEG_HEADER_TABLES_ONLY)
    ; /* tables-only datastreams recorded before the image */
  jvirt_barray_ptr *coefs = jpeg_read_coefficients(&c);
  for (int ci = 0; ci < c.num_components; ci++) {
    jpeg_component_info *comp = &c.comp_info[ci];
    for (JDIMENSION by = 0; by < comp->height_in_blocks; by++) {
      JBLOCKARRAY row = (*c.mem->access_virt_barray)((j_common_ptr)&c, coefs[ci], by, 1, FALSE);
      for (JDIMENSION bx = 0; bx < comp->width_in_blocks; bx++)
        lpn_block(&a, row[0][bx]);
    }
  }
  if (a.in_chunk) /* the last, partial chunk */
    a.cycles += a.chunk > p[JL_CHUNK_MIN] ? a.chunk : p[JL_CHUNK_MIN];
  jpeg_destroy_decompress(&c);
  *cycles = a.cycles;
  return 0;
}

static int jl_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (core_cannot(r))
    return STANDIN_UNSUPPORTED;
  jpg_params prm;
  const uint8_t *cmap, *jpeg;
  size_t jlen;
  double cycles;
  if (!r->req || jpg_req_parse(r->req, r->req_len, &prm, &cmap, &jpeg, &jlen) != 0) {
    ifb_unsupported("jpeg-lpn needs the recorded request bytes (the JPEG itself)");
    return STANDIN_UNSUPPORTED;
  }
  if (lpn_cycles(p, jpeg, jlen, &cycles) != 0) {
    ifb_unsupported("the recorded JPEG does not entropy-decode");
    return STANDIN_UNSUPPORTED;
  }
  *ns = ifb_ns(cycles * 1000.0 / p[JL_CLOCK]);
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_jpeg_lpn = {
    STANDIN_IFACE_ABI,
    "jpeg-lpn",
    "clock_mhz=75,huff_per_nnz=3,huff_base=6,idct=66.5,chunk_blocks=12,chunk_min=1000",
    "core_jpeg, Petri-net form: per block max(3 nnz + 6, 66.5) cycles, chunks of 12 >= 1000 "
    "(OSDI'24, dslab-epfl/lpn)",
    jl_create,
    jl_predict,
    numbers_free};

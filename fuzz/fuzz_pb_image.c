/* fuzz_pb_image — pbw_image_materialise, the one decoder the replay shim
 * runs inside the program, on any bytes, against the test programs'
 * descriptors. The image checksum is set right first (the fuzzer would
 * never get it right), so every other check is exercised. On success the
 * tree is freed as the program would: one block. pbw_image_materialise_pieces
 * runs on the same bytes with an allocator that keeps what it handed out.
 * Images that refer to their request (IMG_REFS) get a fixed 64 KiB one:
 * the seeds' refs (fuzz/seeds.c) lie inside it, so their pieces are
 * filled, and any ref past it must be refused. An image first seen is
 * built as it is with shapes (pb_image.c: the plan of an image of the same
 * shape seen before) and without: both must give the same verdict and
 * allocate the same pieces. */
#include <stdatomic.h>

#include "fuzz_common.h"
#include "pb_internal.h"
#include "pb_walk.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"

static const ProtobufCMessageDescriptor *const descs[] = {
    &standin__test__tree__descriptor, &standin__test__leaf__descriptor,
    &standin__test3__batch__descriptor, &standin__test3__item__descriptor};

/* Allocations of one pieces build; freed by the harness. */
static struct {
  void *p[1 << 16];
  size_t size[1 << 16];
  size_t n;
  int lost; /* more pieces than that: the build fails with PBW_E_NOMEM */
} pieces;

static void *piece_alloc(void *ad, size_t size) {
  (void)ad;
  if (pieces.n == sizeof pieces.p / sizeof pieces.p[0]) {
    pieces.lost = 1;
    return NULL;
  }
  void *p = malloc(size ? size : 1);
  if (p) {
    pieces.size[pieces.n] = size;
    pieces.p[pieces.n++] = p;
  }
  return p;
}

static void piece_free(void *ad, void *p) { /* only on failure: forget it */
  (void)ad;
  for (size_t k = 0; k < pieces.n; k++)
    if (pieces.p[k] == p) {
      pieces.p[k] = pieces.p[--pieces.n];
      free(p);
      return;
    }
  abort(); /* freed something it did not allocate */
}

static uint8_t req[1 << 16];

/* The sizes of the last build's pieces, when built without shapes. */
static size_t alone[1 << 16], n_alone;
static int lost_alone;

/* One build piece by piece without a memo, its pieces freed: the result. */
static int pieces_build(const uint8_t *img, size_t n, const ProtobufCMessageDescriptor *d,
                        ProtobufCAllocator *a) {
  ProtobufCMessage *m = NULL;
  pieces.n = 0;
  pieces.lost = 0;
  int rc = pbw_image_materialise_req(img, n, req, sizeof req, d, a, &m, NULL, 1);
  if (rc != PBW_OK && (m || pieces.n))
    abort(); /* failure must leave nothing allocated */
  for (size_t k = 0; k < pieces.n; k++)
    free(pieces.p[k]);
  return rc;
}

static int pieces_alone(const uint8_t *img, size_t n, const ProtobufCMessageDescriptor *d,
                        ProtobufCAllocator *a) {
  pbw__shapes_off = 1;
  int rc = pieces_build(img, n, d, a);
  pbw__shapes_off = 0;
  n_alone = pieces.n;
  memcpy(alone, pieces.size, pieces.n * sizeof alone[0]);
  lost_alone = pieces.lost;
  return rc;
}

/* A build with shapes: its result, -1 when either build ran out of room
 * for pieces; a tree must be allocated as the build without them did. */
static int pieces_shaped(const uint8_t *img, size_t n, const ProtobufCMessageDescriptor *d,
                         ProtobufCAllocator *a) {
  int rc = pieces_build(img, n, d, a);
  if (rc == PBW_OK && !pieces.lost && !lost_alone &&
      (pieces.n != n_alone || memcmp(pieces.size, alone, n_alone * sizeof alone[0]) != 0))
    abort();
  return pieces.lost || lost_alone ? -1 : rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (req[1] == 0)
    for (size_t i = 0; i < sizeof req; i++)
      req[i] = (uint8_t)(i * 131 + 7);
  uint8_t *img = malloc(n ? n : 1);
  if (!img)
    return 0;
  memcpy(img, d, n);
  if (n >= 16) {
    uint64_t h = pbw__hash64(img + 16, n - 16);
    memcpy(img + 8, &h, 8);
  }
  pbw_image_alloc_size(img, n);
  const char *name = pbw_image_type_name(img, n);
  if (name)
    fz_touch(name, strlen(name));
  for (size_t i = 0; i < sizeof descs / sizeof descs[0]; i++) {
    ProtobufCMessage *m = NULL;
    if (pbw_image_materialise(img, n, descs[i], NULL, &m) == PBW_OK)
      free(m);
    else if (m)
      abort(); /* failure must leave nothing allocated */
    /* piece by piece: every allocation freed here (a damaged image's slots
     * need not make a tree that free_unpacked could walk) */
    ProtobufCAllocator a = {piece_alloc, piece_free, &pieces};
    int rc = pieces_alone(img, n, descs[i], &a);
    /* with shapes: the first build records the shape, the second makes its
     * plan, the third builds from it (when nothing else took its slot).
     * Which check refuses an image first may differ (a damaged default or
     * a damaged piece), not whether one does */
    for (int k = 0; k < 3; k++) {
      int rs = pieces_shaped(img, n, descs[i], &a);
      if (rs != -1 && (rs == PBW_OK) != (rc == PBW_OK))
        abort();
    }
    pieces.n = 0;
    /* an image that passed, again through a memo, as the replay shim does:
     * the first call builds as without one, the second keeps a split plan
     * with its other fix-ups resolved, the third builds from that plan alone */
    pbw_image_memo memo;
    memset(&memo, 0, sizeof memo);
    for (int k = 0; rc == PBW_OK && k < 3; k++) {
      pieces.n = 0;
      int rk = pbw_image_materialise_req(img, n, req, sizeof req, descs[i], &a, &m, &memo, 1);
      if (rk != PBW_OK && (m || pieces.n))
        abort();
      for (size_t j = 0; j < pieces.n; j++)
        free(pieces.p[j]);
      pieces.lost = 0;
    }
    /* and as one block from the same memo (--unpack-trees block): from the
     * kept plan when there is one, else from the image itself */
    for (int k = 0; rc == PBW_OK && k < 2; k++) {
      if (pbw_image_materialise_req(img, n, req, sizeof req, descs[i], NULL, &m, &memo, 0) ==
          PBW_OK)
        free(m);
      else if (m)
        abort();
    }
    free((void *)atomic_load(&memo.pieces));
  }
  free(img);
  return 0;
}

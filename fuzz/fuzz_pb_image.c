/* fuzz_pb_image — pbw_image_materialise, the one decoder the replay shim
 * runs inside the program, on any bytes, against the test programs'
 * descriptors. The image checksum is set right first (the fuzzer would
 * never get it right), so every other check is exercised. On success the
 * tree is freed as the program would: one block. */
#include "fuzz_common.h"
#include "pb_internal.h"
#include "pb_walk.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"

static const ProtobufCMessageDescriptor *const descs[] = {
    &standin__test__tree__descriptor, &standin__test__leaf__descriptor,
    &standin__test3__batch__descriptor, &standin__test3__item__descriptor};

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
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
  }
  free(img);
  return 0;
}

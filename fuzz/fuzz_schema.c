/* fuzz_schema — what the standin command does with a schema and message
 * bytes taken from a trace: rebuild descriptors (pbw_descset_from_schema),
 * let libprotobuf-c unpack the bytes with them, capture the tree as an
 * image and materialise it again (what replay serves), pack the copy and
 * compare fingerprints; and decode the bytes to JSON and statistics
 * without descriptors (dump --payload, info).
 *
 * Input: u16 little-endian schema length, the schema, then the message. */
#include "fuzz_common.h"
#include "pb_walk.h"

static void roundtrip(const ProtobufCMessageDescriptor *root, const uint8_t *msg, size_t len) {
  ProtobufCMessage *m = protobuf_c_message_unpack(root, NULL, len, msg);
  if (!m)
    return;
  void *img = NULL;
  size_t il = 0;
  if (pbw_image_build(m, &img, &il) == PBW_OK) {
    ProtobufCMessage *copy = NULL;
    if (pbw_image_materialise(img, il, root, NULL, &copy) != PBW_OK)
      abort(); /* an image we built must bind to the descriptors it came from */
    uint8_t fa[16], fb[16];
    int ra = pbw_fingerprint_tree(m, fa, NULL), rb = pbw_fingerprint_tree(copy, fb, NULL);
    if (ra != rb || (ra == PBW_OK && memcmp(fa, fb, 16) != 0))
      abort(); /* the replayed tree must be the recorded one */
    fz_use_tree(copy);
    free(img);
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 2)
    return 0;
  size_t sl = (size_t)d[0] | (size_t)d[1] << 8;
  if (sl > n - 2)
    sl = n - 2;
  /* copies, so that reads past either part are caught */
  uint8_t *schema = malloc(sl ? sl : 1), *msg = malloc(n - 2 - sl ? n - 2 - sl : 1);
  size_t ml = n - 2 - sl;
  memcpy(schema, d + 2, sl);
  memcpy(msg, d + 2 + sl, ml);
  pbw_descset *ds = NULL;
  if (pbw_descset_from_schema(schema, sl, &ds) == PBW_OK) {
    roundtrip(pbw_descset_root(ds), msg, ml);
    pbw_descset_free(ds);
  }
  char *json = NULL;
  if (pbw_decode_json(schema, sl, msg, ml, &json) == PBW_OK)
    fz_touch(json, strlen(json));
  free(json);
  pbw_stats st;
  pbw_stats_from_bytes(schema, sl, msg, ml, &st);
  free(schema);
  free(msg);
  return 0;
}

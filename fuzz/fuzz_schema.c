/* fuzz_schema — what the standin command does with a schema and message
 * bytes taken from a trace: rebuild descriptors (pbw_descset_from_schema),
 * let libprotobuf-c unpack the bytes with them, capture the tree as an
 * image and materialise it again (what replay serves), pack the copy and
 * compare fingerprints; and decode the bytes to JSON and statistics
 * without descriptors (dump --payload, info). The record shim derives pack
 * fingerprints from saved bytes (pbw_fingerprint_packed): on any bytes it
 * must not misbehave, and on bytes that are exactly what pack writes for
 * the tree libprotobuf-c unpacks from them, it must give that tree's
 * fingerprint and statistics.
 *
 * Input: u16 little-endian schema length, the schema, then the message. */
#include "fuzz_common.h"
#include "pb_internal.h"
#include "pb_walk.h"

static int same_stats(const pbw_stats *a, const pbw_stats *b) {
  return a->fields == b->fields && a->submsgs == b->submsgs && a->max_depth == b->max_depth &&
         a->repeated == b->repeated && a->var_bytes == b->var_bytes &&
         a->field_words == b->field_words;
}

/* m was unpacked from msg: if pack writes msg back, the fingerprint from
 * the bytes is m's. */
static void check_packed(const void *schema, size_t sl, const ProtobufCMessage *m,
                         const uint8_t *msg, size_t len) {
  size_t sz = protobuf_c_message_get_packed_size(m);
  uint8_t *out = malloc(sz ? sz : 1);
  if (!out || protobuf_c_message_pack(m, out) != sz)
    abort();
  if (sz == len && memcmp(out, msg, len) == 0) {
    uint8_t ft[16], fb[16];
    pbw_stats st, sb;
    int rt = pbw_fingerprint_tree(m, ft, &st);
    int rb = pbw_fingerprint_packed(schema, sl, msg, len, fb, &sb);
    if (rt != rb || !same_stats(&st, &sb) || (rt == PBW_OK && memcmp(ft, fb, 16) != 0))
      abort(); /* the writer thread would record another fingerprint than the walk */
  }
  free(out);
}

static void roundtrip(const void *schema, size_t sl, const ProtobufCMessageDescriptor *root,
                      const uint8_t *msg, size_t len) {
  ProtobufCMessage *m = protobuf_c_message_unpack(root, NULL, len, msg);
  if (!m)
    return;
  check_packed(schema, sl, m, msg, len);
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
  /* Tree walks interpret the descriptors: pb_walk caches a compiled plan
   * per descriptor address for good, which suits a program's static
   * descriptors, but each input here frees its rebuilt descriptors, and the
   * next input's may come back at the same address as other types (a stale
   * plan then reads the wrong members). */
  pbw__plans_off = 1;
  uint8_t *schema, *msg;
  size_t sl, ml;
  if (!fz_schema_input(d, n, &schema, &sl, &msg, &ml))
    return 0;
  pbw_descset *ds = NULL;
  if (pbw_descset_from_schema(schema, sl, &ds) == PBW_OK) {
    roundtrip(schema, sl, pbw_descset_root(ds), msg, ml);
    pbw_descset_free(ds);
  }
  char *json = NULL;
  if (pbw_decode_json(schema, sl, msg, ml, &json) == PBW_OK)
    fz_touch(json, strlen(json));
  free(json);
  pbw_stats st;
  pbw_stats_from_bytes(schema, sl, msg, ml, &st);
  uint8_t fp[16];
  int rc = pbw_fingerprint_packed(schema, sl, msg, ml, fp, &st);
  if (rc != PBW_OK && rc != PBW_E_BADSCHEMA && rc != PBW_E_BADDATA && rc != PBW_E_DEPTH)
    abort();
  free(schema);
  free(msg);
  return 0;
}

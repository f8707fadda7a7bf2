/* fuzz_parse_slabs — pbw_parse_slabs_take, which a replayed unpack runs on
 * the program's own bytes when the program passes its own allocator: the
 * scratch lists ("slabs") libprotobuf-c allocates while it parses a message
 * of more than 16 members, taken from that allocator and given back as the
 * library would (interpose/pb_image.c). On any bytes and any descriptors
 * (rebuilt from a schema, as fuzz_schema does) it must not misbehave; it
 * must give back everything it took, refuse only when the allocator does
 * (and then hold nothing); and where libprotobuf-c parses the bytes, the
 * sizes it asked for must come, in order, among the library's own.
 *
 * Input: u16 little-endian schema length, the schema, then the message
 * (fuzz_schema's format: the two share seeds). */
#include "fuzz_common.h"
#include "pb_internal.h"
#include "pb_walk.h"

#define LOG_MAX 4096

/* An allocator that logs the sizes asked for, counts what is outstanding,
 * and refuses the fail_at-th allocation (0: none). */
typedef struct {
  size_t sizes[LOG_MAX];
  size_t n, outstanding, calls, fail_at;
} alloc_log;

static void *log_alloc(void *ad, size_t size) {
  alloc_log *l = ad;
  if (++l->calls == l->fail_at)
    return NULL;
  void *p = malloc(size ? size : 1);
  if (p == NULL)
    abort();
  if (l->n < LOG_MAX)
    l->sizes[l->n] = size;
  l->n++;
  l->outstanding++;
  return p;
}

static void log_free(void *ad, void *p) {
  alloc_log *l = ad;
  if (p == NULL)
    return;
  if (l->outstanding == 0)
    abort(); /* freed more than was allocated */
  l->outstanding--;
  free(p);
}

static alloc_log lib, ours;

/* Whether a[0, an) appears in order within b[0, bn). */
static int subsequence(const size_t *a, size_t an, const size_t *b, size_t bn) {
  size_t j = 0;
  for (size_t i = 0; i < bn && j < an; i++)
    if (b[i] == a[j])
      j++;
  return j == an;
}

/* Take and give back the slabs with l; checks the bookkeeping. Returns
 * pbw_parse_slabs_take's result. */
static int take_and_free(const ProtobufCMessageDescriptor *d, alloc_log *l, size_t fail_at,
                         const uint8_t *msg, size_t ml) {
  memset(l, 0, sizeof *l);
  l->fail_at = fail_at;
  ProtobufCAllocator a = {log_alloc, log_free, l};
  pbw_parse_slabs top;
  top.n = 0;
  int rc = pbw_parse_slabs_take(d, &a, msg, ml, &top);
  if (rc != 0 && rc != -1)
    abort();
  if (rc == -1 && (fail_at == 0 || l->outstanding != 0))
    abort(); /* refused without a refusal, or kept some of what it took */
  if (rc == 0 && (top.n < 0 || top.n >= PBW_PARSE_SLABS || l->outstanding != (size_t)top.n))
    abort(); /* the nested messages' slabs must be back, the top level's held */
  if (rc == 0) {
    pbw_parse_slabs_free(&a, &top);
    if (l->outstanding != 0 || top.n != 0)
      abort();
  }
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  pbw__plans_off = 1; /* descriptors are freed after each input (fuzz_schema) */
  uint8_t *schema, *msg;
  size_t sl, ml;
  if (!fz_schema_input(d, n, &schema, &sl, &msg, &ml))
    return 0;
  pbw_descset *ds = NULL;
  const ProtobufCMessageDescriptor *root = NULL;
  if (pbw_descset_from_schema(schema, sl, &ds) == PBW_OK)
    root = pbw_descset_root(ds);

  /* root is NULL when the schema does not build: the top level only */
  if (take_and_free(root, &ours, 0, msg, ml) != 0)
    abort(); /* an allocator that never refuses was refused */
  size_t taken = ours.n;
  for (size_t k = 1; k <= taken && k <= 3; k++)
    if (take_and_free(root, &ours, k, msg, ml) != -1)
      abort(); /* its k-th allocation was refused: so must the whole */

  if (root != NULL && taken <= LOG_MAX) {
    take_and_free(root, &ours, 0, msg, ml);
    memset(&lib, 0, sizeof lib);
    ProtobufCAllocator la = {log_alloc, log_free, &lib};
    ProtobufCMessage *m = protobuf_c_message_unpack(root, &la, ml, msg);
    if (m != NULL) {
      if (lib.n <= LOG_MAX && !subsequence(ours.sizes, ours.n, lib.sizes, lib.n))
        abort(); /* took a slab the library would not have */
      protobuf_c_message_free_unpacked(m, &la);
    }
  }
  if (ds)
    pbw_descset_free(ds);
  free(schema);
  free(msg);
  return 0;
}

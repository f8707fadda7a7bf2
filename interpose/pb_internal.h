/* pb_internal.h — helpers shared by the pb_walk sources (pb_walk.c,
 * pb_image.c, pb_schema.c, pb_json.c, pb_descset.c, pb_fpbytes.c). Not part of the
 * public API.
 *
 * The presence rules below mirror protobuf-c 1.4.1's pack
 * (required_field_pack, oneof_field_pack, optional_field_pack,
 * unlabeled_field_pack, repeated_field_pack): a fingerprint or a statistic
 * must describe what pack would write, not what the struct happens to hold. */
#ifndef STANDIN_PB_INTERNAL_H
#define STANDIN_PB_INTERNAL_H

#include "pb_walk.h"

#include <string.h>

#define PBW_NONE32 0xFFFFFFFFu
#define PBW_MAX_FIELD_NUMBER 536870911u /* 2^29 - 1 */

/* Unaligned native-order loads and stores: images and schemas are byte
 * buffers of unknown alignment, and message members are read through
 * their descriptor's offsets. memcpy compiles to a single move. */
static inline uint32_t pbw__ld32(const void *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline uint64_t pbw__ld64(const void *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline const void *pbw__ldptr(const void *p) {
  const void *v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline size_t pbw__ldsize(const void *p) {
  size_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
static inline void pbw__st32(void *p, uint32_t v) {
  memcpy(p, &v, sizeof v);
}
static inline void pbw__st64(void *p, uint64_t v) {
  memcpy(p, &v, sizeof v);
}

/* Bytes of one member of type t, and of one element of a repeated field of
 * that type (protobuf-c uses the same sizes for both). */
static inline size_t pbw__elt_size(ProtobufCType t) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return 8;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_MESSAGE: return sizeof(void *);
  case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
  case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
  default: return 4;
  }
}

/* String and message members are pointers whose presence pack decides by
 * the pointer itself: NULL or the field's default means "not written". */
static inline int pbw__ptr_written(const ProtobufCFieldDescriptor *f, const void *member) {
  const void *p = pbw__ldptr(member);
  return p != NULL && p != f->default_value;
}

/* unlabeled_field_pack (proto3) skips "zeroish" members. Note that bytes
 * test their length (pack reads the first word of ProtobufCBinaryData) and
 * strings test their first character. */
static inline int pbw__zeroish(const ProtobufCFieldDescriptor *f, const void *member) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64: return pbw__ld64(member) == 0;
  case PROTOBUF_C_TYPE_FLOAT: {
    float v;
    memcpy(&v, member, sizeof v);
    return v == 0;
  }
  case PROTOBUF_C_TYPE_DOUBLE: {
    double v;
    memcpy(&v, member, sizeof v);
    return v == 0;
  }
  case PROTOBUF_C_TYPE_STRING: {
    const char *s = pbw__ldptr(member);
    return s == NULL || *s == '\0';
  }
  case PROTOBUF_C_TYPE_BYTES: return pbw__ldsize(member) == 0;
  case PROTOBUF_C_TYPE_MESSAGE: return pbw__ldptr(member) == NULL;
  default: return pbw__ld32(member) == 0;
  }
}

/* Whether pack writes the non-repeated field f of the message at base. */
static inline int pbw__singular_written(const ProtobufCFieldDescriptor *f, const char *base) {
  int ptr_type = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE;
  if (f->label == PROTOBUF_C_LABEL_REQUIRED)
    return 1;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    if (pbw__ld32(base + f->quantifier_offset) != f->id)
      return 0;
    return !ptr_type || pbw__ptr_written(f, base + f->offset);
  }
  if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
    if (ptr_type)
      return pbw__ptr_written(f, base + f->offset);
    return pbw__ld32(base + f->quantifier_offset) != 0;
  }
  return !pbw__zeroish(f, base + f->offset);
}

/* XXH3-64 and XXH3-128 of p[0..n) (pb_hash.c): the same values as the
 * xxhash.h functions, computed with AVX2 when the CPU has it. */
typedef struct {
  uint64_t lo, hi;
} pbw__h128;
uint64_t pbw__hash64(const void *p, size_t n);
/* The CPU has POPCNT (checked once; pb_hash.c keeps the CPU probes). */
int pbw__have_popcnt(void);
pbw__h128 pbw__hash128(const void *p, size_t n);
uint64_t pbw__hash64_avx2(const void *p, size_t n);
pbw__h128 pbw__hash128_avx2(const void *p, size_t n);

/* The first place in hay[0, n) holding the L bytes at c, or NULL, each
 * byte read charged to *budget (NULL once it runs out): how
 * pbw_image_refer finds a tree's strings and bytes in its request. */
const uint8_t *pbw__find_run(const uint8_t *hay, size_t n, const uint8_t *c, size_t L,
                             uint64_t *budget);

/* protobuf_c_empty_string of this process (looked up lazily, because the
 * shim must not link libprotobuf-c), or NULL while it is not loaded. */
const char *pbw__empty_string(void);

/* Nonzero: fingerprints interpret every descriptor instead of using the
 * compiled walk plans (pb_walk.c). Tests set it to compare the two. */
extern int pbw__plans_off;

/* Searches of a blob in the packed bytes the plain stream refers into
 * (fp_ref_find), counted for tests. */
extern unsigned long pbw__ref_searches;

/* Trees the calling thread built from a shape's plan (pb_image.c: images
 * first seen, of a shape seen before), counted for tests. */
extern __thread __attribute__((tls_model("initial-exec"))) unsigned long pbw__shape_builds;

/* Nonzero: images first seen are built alone (build_split), never from a
 * shape's plan. The image fuzzer sets it to compare the two. */
extern int pbw__shapes_off;

/* ---- Schemas (pb_schema.c), read by pb_json.c and pb_descset.c ---------- */

/* Schema record fields are u32 offsets into the blob (names) or indices;
 * PBW_NONE32 marks an absent optional name (a NULL pointer). */
typedef struct {
  uint32_t name, short_name, c_name, package_name;
  uint32_t first_field, n_fields, n_oneofs;
  uint32_t sizeof_message;
  uint32_t flags; /* PBW__SMSG_* */
} pbw__smsg;

/* pbw__smsg.flags */
#define PBW__SMSG_INIT 1u /* the descriptor had a message_init (generated code) */

/* pbw__sfield.dflags. PBW__SDEF_INIT: the field's default_value is NULL, but
 * the generated message_init starts the member at a value other than 0
 * (protoc-c starts enums without a default at their first declared value):
 * the stored "default" is that value. Only optional and proto3 fields of
 * number, bool and enum types outside oneofs have it. */
#define PBW__SDEF_NULL_DATA 1u /* bytes default {0, NULL}: no data pointer */
#define PBW__SDEF_INIT 2u

typedef struct {
  uint32_t name, number;
  uint8_t label, type; /* ProtobufCLabel, ProtobufCType */
  uint8_t dflags;      /* PBW__SDEF_* */
  uint32_t flags;      /* ProtobufCFieldDescriptor.flags, all bits */
  uint32_t offset, quantifier_offset;
  uint32_t ref;     /* message or enum index, PBW_NONE32 otherwise */
  uint32_t oneof;   /* oneof group within the message, or PBW_NONE32 */
  uint32_t def_off; /* default value in the blob, or PBW_NONE32 (no default) */
  uint32_t def_len;
} pbw__sfield;

typedef struct {
  uint32_t name, short_name, c_name, package_name;
  uint32_t first_value, n_values; /* ProtobufCEnumDescriptor.values */
  uint32_t first_vname, n_vnames; /* ProtobufCEnumDescriptor.values_by_name */
} pbw__senum;

typedef struct {
  uint32_t name, c_name; /* PBW_NONE32 when NULL */
  int32_t number;
} pbw__svalue;

/* A validated schema: every index, string and default is known to be in
 * bounds, each message's fields are sorted by number, and the message,
 * enum, value and value-name records each lie end to end in the order of
 * their owners. Nothing is known about the C layout (offsets and sizes):
 * pbw_descset_from_schema checks that itself. */
typedef struct {
  const uint8_t *msgs, *fields, *enums, *values, *vnames, *blob;
  uint32_t n_msgs, n_fields, n_enums, n_values, n_vnames, blob_len;
  uint32_t abi; /* PBW__SCHEMA_ABI of the recording process */
} pbw__schema;

/* What the C layout in a schema depends on: pointer and size_t widths and
 * byte order. Offsets recorded on one ABI mean nothing on another. */
#define PBW__SCHEMA_ABI                                                                            \
  ((uint32_t)sizeof(void *) | (uint32_t)sizeof(size_t) << 8 |                                      \
   (uint32_t)(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 1 : 2) << 16)

/* Validate schema bytes. PBW_E_BADSCHEMA on any inconsistency. */
int pbw__schema_open(pbw__schema *s, const void *buf, size_t len);
void pbw__schema_msg(const pbw__schema *s, uint32_t i, pbw__smsg *m);
void pbw__schema_field(const pbw__schema *s, uint32_t i, pbw__sfield *f);
/* Only the label of field i (a ProtobufCLabel): all a field without
 * records needs. */
uint8_t pbw__schema_field_label(const pbw__schema *s, uint32_t i);
/* Only the number of field i. */
uint32_t pbw__schema_field_number(const pbw__schema *s, uint32_t i);
void pbw__schema_enum(const pbw__schema *s, uint32_t i, pbw__senum *e);
void pbw__schema_value_rec(const pbw__schema *s, uint32_t i, pbw__svalue *v);
/* Value i of the schema's value table: its name (NULL if it has none) and
 * number. */
const char *pbw__schema_value(const pbw__schema *s, uint32_t i, int32_t *number);
/* Entry i of the value-name table: a name and an index into the owning
 * enum's values. */
const char *pbw__schema_vname(const pbw__schema *s, uint32_t i, uint32_t *index);
/* NUL-terminated string at blob offset off (validated). */
static inline const char *pbw__schema_str(const pbw__schema *s, uint32_t off) {
  return (const char *)s->blob + off;
}
/* The same for optional names: NULL for PBW_NONE32. */
static inline const char *pbw__schema_ostr(const pbw__schema *s, uint32_t off) {
  return off == PBW_NONE32 ? NULL : (const char *)s->blob + off;
}

/* ---- Wire format: what pb_json.c, pb_fpbytes.c and pb_image.c read ----- */

/* A varint of at most 10 bytes at *p (bits beyond 64 are dropped, as
 * libprotobuf-c drops them); advances *p. 0 if unterminated. */
static inline int pbw__get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (unsigned i = 0; i < 10 && *p < end; i++) {
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = r;
      return 1;
    }
  }
  return 0;
}

/* n little-endian bytes (4 or 8). */
static inline uint64_t pbw__get_le(const uint8_t *p, unsigned n) {
  uint64_t v = 0;
  for (unsigned i = 0; i < n; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Copy n <= 64 bytes without a call: two overlapping moves of the widest
 * size that fits (a walk's short strings into its stream, pb_fpstream.h;
 * a tree's small pieces, pb_image.c). d and s do not overlap. */
static inline void pbw__copy_small(uint8_t *d, const uint8_t *s, size_t n) {
  if (n > 16) {
    if (n > 32) {
      memcpy(d, s, 32);
      memcpy(d + n - 32, s + n - 32, 32);
    } else {
      memcpy(d, s, 16);
      memcpy(d + n - 16, s + n - 16, 16);
    }
  } else if (n >= 8) {
    memcpy(d, s, 8);
    memcpy(d + n - 8, s + n - 8, 8);
  } else if (n >= 4) {
    memcpy(d, s, 4);
    memcpy(d + n - 4, s + n - 4, 4);
  } else if (n > 0) {
    d[0] = s[0];
    d[n / 2] = s[n / 2];
    d[n - 1] = s[n - 1];
  }
}

/* One wire record (pb_fpbytes.c, and pb_image.c's scan of a program's
 * bytes for the library's parse-time slabs). */
typedef struct {
  uint32_t number, wt;
  const uint8_t *val;  /* first byte after the tag */
  const uint8_t *next; /* first byte after the record */
  uint64_t v;          /* varint or fixed-width value */
  const uint8_t *p;    /* length-delimited payload */
  size_t n;
} pbw__rec;

/* The record at p (< end); 0 if it does not parse. Numbers up to 2^32 - 1:
 * known fields stop at 2^29 - 1, but unpack keeps unknown fields with any
 * number that fits their u32 tag, and pack writes them back. */
static inline __attribute__((always_inline)) int pbw__rec_read(const uint8_t *p, const uint8_t *end,
                                                               pbw__rec *r) {
  uint64_t tag, n;
  r->v = 0;
  r->p = NULL;
  r->n = 0;
  if (!pbw__get_varint(&p, end, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
    return 0;
  r->number = (uint32_t)(tag >> 3);
  r->wt = (uint32_t)(tag & 7);
  r->val = p;
  switch (r->wt) {
  case PROTOBUF_C_WIRE_TYPE_VARINT:
    if (!pbw__get_varint(&p, end, &r->v))
      return 0;
    break;
  case PROTOBUF_C_WIRE_TYPE_64BIT:
  case PROTOBUF_C_WIRE_TYPE_32BIT:
    n = r->wt == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
    if ((uint64_t)(end - p) < n)
      return 0;
    r->v = pbw__get_le(p, (unsigned)n);
    p += n;
    break;
  case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
    if (!pbw__get_varint(&p, end, &n) || n > (uint64_t)(end - p))
      return 0;
    r->p = p;
    r->n = (size_t)n;
    p += n;
    break;
  default: return 0; /* groups: libprotobuf-c neither writes nor reads them */
  }
  r->next = p;
  return 1;
}

/* Wire type a value of type t is written with. */
static inline uint32_t pbw__wire_of(uint8_t t) {
  switch (t) {
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_DOUBLE: return PROTOBUF_C_WIRE_TYPE_64BIT;
  case PROTOBUF_C_TYPE_SFIXED32:
  case PROTOBUF_C_TYPE_FIXED32:
  case PROTOBUF_C_TYPE_FLOAT: return PROTOBUF_C_WIRE_TYPE_32BIT;
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE: return PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
  default: return PROTOBUF_C_WIRE_TYPE_VARINT;
  }
}

/* A length-delimited record of a repeated number field is a packed run. */
static inline int pbw__is_packed_run(const pbw__sfield *f, uint32_t wt) {
  return f->label == PROTOBUF_C_LABEL_REPEATED && wt == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED &&
         pbw__wire_of(f->type) != PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
}

/* Next element of a packed run whose elements have wire type wt: 1 = got
 * one, 0 = end, -1 = damaged. */
static inline int pbw__packed_next(const uint8_t **p, const uint8_t *end, uint32_t wt,
                                   uint64_t *v) {
  unsigned w = wt == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
  if (*p == end)
    return 0;
  if (wt == PROTOBUF_C_WIRE_TYPE_VARINT)
    return pbw__get_varint(p, end, v) ? 1 : -1;
  if ((size_t)(end - *p) < w)
    return -1;
  *v = pbw__get_le(*p, w);
  *p += w;
  return 1;
}

/* What unlabeled_field_pack (proto3) would consider zero in the member that
 * unpack makes of a value of type t read from the wire: v for numbers, p
 * and n for strings and bytes (a string stops at its first NUL). A message
 * is never zero (its pointer is not NULL). */
static inline int pbw__wire_zeroish(uint8_t t, uint64_t v, const uint8_t *p, size_t n) {
  switch (t) {
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_BOOL: return v == 0;
  case PROTOBUF_C_TYPE_DOUBLE: {
    double d;
    memcpy(&d, &v, sizeof d);
    return d == 0;
  }
  case PROTOBUF_C_TYPE_FLOAT: {
    uint32_t w = (uint32_t)v;
    float x;
    memcpy(&x, &w, sizeof x);
    return x == 0;
  }
  case PROTOBUF_C_TYPE_STRING: return n == 0 || p[0] == 0;
  case PROTOBUF_C_TYPE_BYTES: return n == 0;
  case PROTOBUF_C_TYPE_MESSAGE: return 0;
  default: return (uint32_t)v == 0;
  }
}

#endif

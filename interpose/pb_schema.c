/* pb_schema.c — self-contained schemas of protobuf-c message types.
 *
 * A trace stores one schema per message type so that offline tools can
 * decode saved payloads without the program's generated code, and so that
 * `standin replay` can rebuild descriptors with the program's exact C
 * layout (pbw_descset_from_schema, pb_descset.c) to unpack recorded bytes
 * with the real libprotobuf-c. Layout (all integers little-endian, except
 * numeric defaults, see below):
 *
 *   0   u32 magic "PBWS"   4 u16 version (2)   6 u16 header size (48)
 *   8   u64 checksum: XXH3-64 of bytes [16, len)
 *   16  u32 n_msgs   20 u32 n_fields   24 u32 n_enums   28 u32 n_values
 *   32  u32 n_vnames 36 u32 blob_len   40 u32 flags (0)
 *   44  u32 abi: sizeof(void *) | sizeof(size_t) << 8 | byte order << 16
 *       (1 little, 2 big endian) of the recording process
 *   48  messages, 36 bytes each (message 0 is the root):
 *         u32 name, u32 short_name, u32 c_name, u32 package_name,
 *         u32 first field, u32 field count, u32 oneof count,
 *         u32 sizeof_message, u32 flags (1: message_init was not NULL)
 *   ..  fields, 40 bytes each, sorted by number within a message, each
 *       message's fields following the previous message's:
 *         u32 name, u32 number, u8 label, u8 type (ProtobufCLabel/Type),
 *         u8 default flags (1: bytes default with a NULL data pointer;
 *         2: no default, but message_init starts the member at the value
 *         stored as default, see below),
 *         u8 0, u32 flags (ProtobufCFieldDescriptor.flags, every bit),
 *         u32 offset, u32 quantifier_offset, u32 ref (message index for
 *         MESSAGE, enum index for ENUM, else 0xFFFFFFFF), u32 oneof group
 *         in the message (or 0xFFFFFFFF), u32 default offset in the blob
 *         (0xFFFFFFFF: default_value is NULL), u32 default length
 *   ..  enums, 32 bytes each: u32 name, u32 short_name, u32 c_name,
 *         u32 package_name, u32 first value, u32 value count, u32 first
 *         value name, u32 value name count
 *   ..  values (ProtobufCEnumDescriptor.values, in order), 12 bytes each:
 *         u32 name, u32 c_name, i32 number
 *   ..  value names (values_by_name, in order), 8 bytes each: u32 name,
 *         u32 index into the enum's values
 *   ..  blob: NUL-terminated names (referenced by offset) and defaults
 *
 * Names are blob offsets; 0xFFFFFFFF stands for a NULL name where the
 * descriptor may have one (short, C and package names, value names).
 * Defaults are stored raw, as the bits default_value points to in the
 * recording process: 4 bytes for 32-bit numbers, floats, bools and enums,
 * 8 bytes for 64-bit numbers and doubles (both in that process's byte
 * order), the text (without NUL) for strings and the content for bytes.
 * A string default equal to protobuf_c_empty_string (proto3) is stored as
 * an empty text. Generated init functions start enums without a default at
 * their first declared value, which no descriptor records: the schema
 * builder runs message_init on scratch memory and stores, for optional and
 * proto3 number, bool and enum fields outside oneofs without a default, a
 * non-zero initial value with default flag 2. Oneof groups are numbered in
 * field order; protobuf-c keeps no oneof names, only the shared case
 * member. Version 1 schemas (no C layout) are rejected.
 *
 * pbw__schema_open checks the structure (every record, index, name and
 * default in bounds, records contiguous, fields sorted by number); the C
 * layout is checked by pbw_descset_from_schema, which alone relies on it. */
#include "pb_internal.h"

#include <stdlib.h>

#define SCH_MAGIC 0x53574250u /* "PBWS" */
#define SCH_VERSION 2
#define SCH_HDR 48
#define SCH_MSG 36
#define SCH_FIELD 40
#define SCH_ENUM 32
#define SCH_VALUE 12
#define SCH_VNAME 8

/* The builder's memory (pbw_schema_allocator): the replay shim builds a
 * program's schemas inside its calls, on its own heap. */
static void *(*sch_realloc)(void *, size_t) = realloc;
static void (*sch_free)(void *) = free;

void pbw_schema_allocator(void *(*realloc_fn)(void *, size_t), void (*free_fn)(void *)) {
  sch_realloc = realloc_fn ? realloc_fn : realloc;
  sch_free = free_fn ? free_fn : free;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ---- Growable byte buffer ------------------------------------------------ */

typedef struct {
  uint8_t *p;
  size_t n, cap;
  int err;
} bbuf;

static void bb_put(bbuf *b, const void *src, size_t n) {
  if (b->err || n == 0)
    return;
  if (n > UINT32_MAX - b->n) {
    b->err = PBW_E_UNSUPPORTED; /* offsets are u32 */
    return;
  }
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n)
      cap *= 2;
    uint8_t *p = sch_realloc(b->p, cap);
    if (p == NULL) {
      b->err = PBW_E_NOMEM;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, src, n);
  b->n += n;
}

static void bb_u32(bbuf *b, uint32_t v) {
  uint8_t w[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  bb_put(b, w, 4);
}

static void bb_u64(bbuf *b, uint64_t v) {
  bb_u32(b, (uint32_t)v);
  bb_u32(b, (uint32_t)(v >> 32));
}

/* Offset of a copy of n bytes (plus a NUL when str) in the blob. */
static uint32_t bb_blob(bbuf *b, const void *src, size_t n, int str) {
  uint32_t at = (uint32_t)b->n;
  bb_put(b, src, n);
  if (str)
    bb_put(b, "", 1);
  return at;
}

/* ---- Building ------------------------------------------------------------ */

typedef struct {
  const void **v;
  uint32_t n, cap;
} plist;

/* Index of p in l, appending it when new. */
static int plist_index(plist *l, const void *p, uint32_t *idx) {
  for (uint32_t i = 0; i < l->n; i++) {
    if (l->v[i] == p) {
      *idx = i;
      return PBW_OK;
    }
  }
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? 2 * l->cap : 16;
    const void **v = sch_realloc(l->v, cap * sizeof *v);
    if (v == NULL)
      return PBW_E_NOMEM;
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n] = p;
  *idx = l->n++;
  return PBW_OK;
}

typedef struct {
  plist msgs, enums;
  bbuf mrec, frec, erec, vrec, nrec, blob;
  uint32_t n_fields, n_values, n_vnames;
} sch_ctx;

/* Blob offset of a name, PBW_NONE32 for NULL. */
static uint32_t put_name(sch_ctx *c, const char *name) {
  return name == NULL ? PBW_NONE32 : bb_blob(&c->blob, name, strlen(name), 1);
}

static int ref_of(sch_ctx *c, const ProtobufCFieldDescriptor *f, uint32_t *ref) {
  *ref = PBW_NONE32;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    const ProtobufCMessageDescriptor *d = f->descriptor;
    if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
      return PBW_E_UNSUPPORTED;
    return plist_index(&c->msgs, d, ref);
  }
  if (f->type == PROTOBUF_C_TYPE_ENUM) {
    const ProtobufCEnumDescriptor *e = f->descriptor;
    if (e == NULL || e->magic != PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC)
      return PBW_E_UNSUPPORTED;
    return plist_index(&c->enums, e, ref);
  }
  return PBW_OK;
}

/* Oneof group of every field of d (PBW_NONE32 outside oneofs): members of
 * one oneof share their case member, i.e. their quantifier_offset. Returns
 * the number of groups. */
static uint32_t oneof_groups(const ProtobufCMessageDescriptor *d, uint32_t *group) {
  uint32_t n = 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    group[i] = PBW_NONE32;
    if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
      continue;
    for (unsigned k = 0; k < i && group[i] == PBW_NONE32; k++) {
      if (group[k] != PBW_NONE32 && d->fields[k].quantifier_offset == f->quantifier_offset)
        group[i] = group[k];
    }
    if (group[i] == PBW_NONE32)
      group[i] = n++;
  }
  return n;
}

/* Whether message_init gives f's member an initial value that the
 * descriptor does not record (see PBW__SDEF_INIT). */
static int init_only(const ProtobufCFieldDescriptor *f, const uint8_t *init, size_t size) {
  static const uint8_t zero[8];
  if (init == NULL || f->default_value != NULL || (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
      (f->label != PROTOBUF_C_LABEL_OPTIONAL && f->label != PROTOBUF_C_LABEL_NONE) ||
      f->offset > size || size - f->offset < pbw__elt_size(f->type))
    return 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE: return 0;
  default: return memcmp(init + f->offset, zero, pbw__elt_size(f->type)) != 0;
  }
}

/* Default flags, offset and length of f's default (see the layout). init
 * is the message (of size bytes) as message_init leaves it, or NULL. */
static void put_default(sch_ctx *c, const ProtobufCFieldDescriptor *f, const uint8_t *init,
                        size_t size, uint8_t *dflags, uint32_t *off, uint32_t *len) {
  const void *dv = f->default_value;
  size_t n = 0;
  *dflags = 0;
  *off = PBW_NONE32;
  *len = 0;
  if (init_only(f, init, size)) {
    *dflags = PBW__SDEF_INIT;
    dv = init + f->offset;
  }
  if (dv == NULL || f->type == PROTOBUF_C_TYPE_MESSAGE)
    return;
  if (f->type == PROTOBUF_C_TYPE_STRING) {
    n = strlen(dv);
  } else if (f->type == PROTOBUF_C_TYPE_BYTES) {
    n = ((const ProtobufCBinaryData *)dv)->len;
    dv = ((const ProtobufCBinaryData *)dv)->data;
    if (dv == NULL && n == 0)
      *dflags = PBW__SDEF_NULL_DATA;
  } else {
    n = pbw__elt_size(f->type);
  }
  if (n > UINT32_MAX || (dv == NULL && n > 0)) {
    c->blob.err = PBW_E_UNSUPPORTED;
    return;
  }
  *off = bb_blob(&c->blob, dv, n, 0);
  *len = (uint32_t)n;
}

static int put_field(sch_ctx *c, const ProtobufCMessageDescriptor *d, unsigned fi, uint32_t group,
                     const uint8_t *init) {
  const ProtobufCFieldDescriptor *f = &d->fields[fi];
  uint32_t ref, def_off, def_len;
  uint8_t dflags;
  int rc = ref_of(c, f, &ref);
  if (rc != PBW_OK)
    return rc;
  if (f->name == NULL || f->id == 0 || f->id > PBW_MAX_FIELD_NUMBER ||
      (fi > 0 && d->fields[fi - 1].id >= f->id) || (unsigned)f->label > PROTOBUF_C_LABEL_NONE ||
      (unsigned)f->type > PROTOBUF_C_TYPE_MESSAGE)
    return PBW_E_UNSUPPORTED;
  put_default(c, f, init, d->sizeof_message, &dflags, &def_off, &def_len);
  uint8_t lt[4] = {(uint8_t)f->label, (uint8_t)f->type, dflags, 0};
  bb_u32(&c->frec, put_name(c, f->name));
  bb_u32(&c->frec, f->id);
  bb_put(&c->frec, lt, 4);
  bb_u32(&c->frec, f->flags);
  bb_u32(&c->frec, f->offset);
  bb_u32(&c->frec, f->quantifier_offset);
  bb_u32(&c->frec, ref);
  bb_u32(&c->frec, group);
  bb_u32(&c->frec, def_off);
  bb_u32(&c->frec, def_len);
  c->n_fields++;
  return PBW_OK;
}

static int put_msg(sch_ctx *c, const ProtobufCMessageDescriptor *d) {
  int rc = PBW_OK;
  if (d->name == NULL || d->n_fields > UINT32_MAX - c->n_fields || d->sizeof_message > UINT32_MAX ||
      (d->n_fields > 0 && d->fields == NULL))
    return PBW_E_UNSUPPORTED;
  uint32_t *group = sch_realloc(NULL, (d->n_fields + 1) * sizeof *group);
  /* the program's own initial values, as its unpack starts from them */
  uint8_t *init = d->message_init != NULL ? sch_realloc(NULL, d->sizeof_message + 1) : NULL;
  if (group == NULL || (d->message_init != NULL && init == NULL)) {
    sch_free(group);
    sch_free(init);
    return PBW_E_NOMEM;
  }
  if (init != NULL) {
    memset(init, 0, d->sizeof_message + 1);
    d->message_init((ProtobufCMessage *)init);
  }
  bb_u32(&c->mrec, put_name(c, d->name));
  bb_u32(&c->mrec, put_name(c, d->short_name));
  bb_u32(&c->mrec, put_name(c, d->c_name));
  bb_u32(&c->mrec, put_name(c, d->package_name));
  bb_u32(&c->mrec, c->n_fields);
  bb_u32(&c->mrec, d->n_fields);
  bb_u32(&c->mrec, oneof_groups(d, group));
  bb_u32(&c->mrec, (uint32_t)d->sizeof_message);
  bb_u32(&c->mrec, init != NULL ? PBW__SMSG_INIT : 0);
  for (unsigned i = 0; i < d->n_fields && rc == PBW_OK; i++)
    rc = put_field(c, d, i, group[i], init);
  sch_free(group);
  sch_free(init);
  return rc;
}

static int put_enum(sch_ctx *c, const ProtobufCEnumDescriptor *e) {
  if (e->name == NULL || (e->n_values > 0 && e->values == NULL) ||
      (e->n_value_names > 0 && e->values_by_name == NULL) ||
      e->n_values > UINT32_MAX - c->n_values || e->n_value_names > UINT32_MAX - c->n_vnames)
    return PBW_E_UNSUPPORTED;
  bb_u32(&c->erec, put_name(c, e->name));
  bb_u32(&c->erec, put_name(c, e->short_name));
  bb_u32(&c->erec, put_name(c, e->c_name));
  bb_u32(&c->erec, put_name(c, e->package_name));
  bb_u32(&c->erec, c->n_values);
  bb_u32(&c->erec, e->n_values);
  bb_u32(&c->erec, c->n_vnames);
  bb_u32(&c->erec, e->n_value_names);
  for (unsigned i = 0; i < e->n_values; i++) {
    bb_u32(&c->vrec, put_name(c, e->values[i].name));
    bb_u32(&c->vrec, put_name(c, e->values[i].c_name));
    bb_u32(&c->vrec, (uint32_t)e->values[i].value);
    c->n_values++;
  }
  for (unsigned i = 0; i < e->n_value_names; i++) {
    const ProtobufCEnumValueIndex *vi = &e->values_by_name[i];
    if (vi->name == NULL || vi->index >= e->n_values)
      return PBW_E_UNSUPPORTED;
    bb_u32(&c->nrec, put_name(c, vi->name));
    bb_u32(&c->nrec, vi->index);
    c->n_vnames++;
  }
  return PBW_OK;
}

static int first_err(const sch_ctx *c) {
  const bbuf *all[6] = {&c->mrec, &c->frec, &c->erec, &c->vrec, &c->nrec, &c->blob};
  for (int i = 0; i < 6; i++) {
    if (all[i]->err)
      return all[i]->err;
  }
  return PBW_OK;
}

/* Messages are numbered breadth-first; the list grows while it is walked. */
static int collect(sch_ctx *c, const ProtobufCMessageDescriptor *root) {
  uint32_t idx;
  int rc = plist_index(&c->msgs, root, &idx);
  for (uint32_t i = 0; rc == PBW_OK && i < c->msgs.n; i++)
    rc = put_msg(c, c->msgs.v[i]);
  for (uint32_t i = 0; rc == PBW_OK && i < c->enums.n; i++)
    rc = put_enum(c, c->enums.v[i]);
  return rc != PBW_OK ? rc : first_err(c);
}

static int assemble(const sch_ctx *c, void **buf, size_t *len) {
  bbuf out = {0};
  bb_u32(&out, SCH_MAGIC);
  bb_u32(&out, SCH_VERSION | (uint32_t)SCH_HDR << 16);
  bb_u64(&out, 0); /* checksum, below */
  bb_u32(&out, c->msgs.n);
  bb_u32(&out, c->n_fields);
  bb_u32(&out, c->enums.n);
  bb_u32(&out, c->n_values);
  bb_u32(&out, c->n_vnames);
  bb_u32(&out, (uint32_t)c->blob.n);
  bb_u32(&out, 0);
  bb_u32(&out, PBW__SCHEMA_ABI);
  bb_put(&out, c->mrec.p, c->mrec.n);
  bb_put(&out, c->frec.p, c->frec.n);
  bb_put(&out, c->erec.p, c->erec.n);
  bb_put(&out, c->vrec.p, c->vrec.n);
  bb_put(&out, c->nrec.p, c->nrec.n);
  bb_put(&out, c->blob.p, c->blob.n);
  if (out.err) {
    sch_free(out.p);
    return out.err;
  }
  uint64_t sum = pbw__hash64(out.p + 16, out.n - 16);
  for (int i = 0; i < 8; i++)
    out.p[8 + i] = (uint8_t)(sum >> (8 * i));
  *buf = out.p;
  *len = out.n;
  return PBW_OK;
}

int pbw_schema_build(const ProtobufCMessageDescriptor *d, void **buf, size_t *len) {
  sch_ctx c = {0};
  *buf = NULL;
  *len = 0;
  if (d == NULL || d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC)
    return PBW_E_UNSUPPORTED;
  int rc = collect(&c, d);
  if (rc == PBW_OK)
    rc = assemble(&c, buf, len);
  sch_free(c.msgs.v);
  sch_free(c.enums.v);
  sch_free(c.mrec.p);
  sch_free(c.frec.p);
  sch_free(c.erec.p);
  sch_free(c.vrec.p);
  sch_free(c.nrec.p);
  sch_free(c.blob.p);
  return rc;
}

uint64_t pbw_schema_id(const void *schema, size_t len) {
  const uint8_t *p = schema;
  if (p == NULL || len < SCH_HDR || le32(p) != SCH_MAGIC ||
      le32(p + 4) != (SCH_VERSION | (uint32_t)SCH_HDR << 16))
    return 0;
  uint64_t id = le64(p + 8);
  return id ? id : 1;
}

/* ---- Reading ------------------------------------------------------------- */

void pbw__schema_msg(const pbw__schema *s, uint32_t i, pbw__smsg *m) {
  const uint8_t *r = s->msgs + (size_t)i * SCH_MSG;
  m->name = le32(r);
  m->short_name = le32(r + 4);
  m->c_name = le32(r + 8);
  m->package_name = le32(r + 12);
  m->first_field = le32(r + 16);
  m->n_fields = le32(r + 20);
  m->n_oneofs = le32(r + 24);
  m->sizeof_message = le32(r + 28);
  m->flags = le32(r + 32);
}

void pbw__schema_field(const pbw__schema *s, uint32_t i, pbw__sfield *f) {
  const uint8_t *r = s->fields + (size_t)i * SCH_FIELD;
  f->name = le32(r);
  f->number = le32(r + 4);
  f->label = r[8];
  f->type = r[9];
  f->dflags = r[10];
  f->flags = le32(r + 12);
  f->offset = le32(r + 16);
  f->quantifier_offset = le32(r + 20);
  f->ref = le32(r + 24);
  f->oneof = le32(r + 28);
  f->def_off = le32(r + 32);
  f->def_len = le32(r + 36);
}

uint8_t pbw__schema_field_label(const pbw__schema *s, uint32_t i) {
  return s->fields[(size_t)i * SCH_FIELD + 8];
}

uint32_t pbw__schema_field_number(const pbw__schema *s, uint32_t i) {
  return le32(s->fields + (size_t)i * SCH_FIELD + 4);
}

void pbw__schema_enum(const pbw__schema *s, uint32_t i, pbw__senum *e) {
  const uint8_t *r = s->enums + (size_t)i * SCH_ENUM;
  e->name = le32(r);
  e->short_name = le32(r + 4);
  e->c_name = le32(r + 8);
  e->package_name = le32(r + 12);
  e->first_value = le32(r + 16);
  e->n_values = le32(r + 20);
  e->first_vname = le32(r + 24);
  e->n_vnames = le32(r + 28);
}

void pbw__schema_value_rec(const pbw__schema *s, uint32_t i, pbw__svalue *v) {
  const uint8_t *r = s->values + (size_t)i * SCH_VALUE;
  v->name = le32(r);
  v->c_name = le32(r + 4);
  v->number = (int32_t)le32(r + 8);
}

const char *pbw__schema_value(const pbw__schema *s, uint32_t i, int32_t *number) {
  pbw__svalue v;
  pbw__schema_value_rec(s, i, &v);
  *number = v.number;
  return pbw__schema_ostr(s, v.name);
}

const char *pbw__schema_vname(const pbw__schema *s, uint32_t i, uint32_t *index) {
  const uint8_t *r = s->vnames + (size_t)i * SCH_VNAME;
  *index = le32(r + 4);
  return pbw__schema_str(s, le32(r));
}

static int str_ok(const pbw__schema *s, uint32_t off) {
  return off < s->blob_len && memchr(s->blob + off, 0, s->blob_len - off) != NULL;
}

/* An optional name: absent, or a valid string. */
static int ostr_ok(const pbw__schema *s, uint32_t off) {
  return off == PBW_NONE32 || str_ok(s, off);
}

static int range_ok(uint32_t first, uint32_t n, uint32_t total) {
  return (uint64_t)first + n <= total;
}

static int default_ok(const pbw__schema *s, const pbw__smsg *m, const pbw__sfield *f) {
  if (f->def_off == PBW_NONE32)
    return f->def_len == 0 && f->dflags == 0;
  if (!range_ok(f->def_off, f->def_len, s->blob_len))
    return 0;
  switch (f->dflags) {
  case 0: break;
  case PBW__SDEF_NULL_DATA:
    if (f->type != PROTOBUF_C_TYPE_BYTES || f->def_len != 0)
      return 0;
    break;
  case PBW__SDEF_INIT:
    if (!(m->flags & PBW__SMSG_INIT) || f->oneof != PBW_NONE32 ||
        (f->label != PROTOBUF_C_LABEL_OPTIONAL && f->label != PROTOBUF_C_LABEL_NONE) ||
        f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES)
      return 0;
    break;
  default: return 0;
  }
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: /* the text of a C string */
    return memchr(s->blob + f->def_off, 0, f->def_len) == NULL;
  case PROTOBUF_C_TYPE_BYTES: return 1;
  case PROTOBUF_C_TYPE_MESSAGE: return 0;
  default: return f->def_len == pbw__elt_size((ProtobufCType)f->type);
  }
}

static int field_ok(const pbw__schema *s, const pbw__smsg *m, const uint8_t *rec,
                    const pbw__sfield *f) {
  if (!str_ok(s, f->name) || f->number == 0 || f->number > PBW_MAX_FIELD_NUMBER ||
      f->label > PROTOBUF_C_LABEL_NONE || f->type > PROTOBUF_C_TYPE_MESSAGE || rec[11] != 0 ||
      !default_ok(s, m, f))
    return 0;
  if (f->oneof != PBW_NONE32 && f->oneof >= m->n_oneofs)
    return 0;
  if (f->type == PROTOBUF_C_TYPE_MESSAGE)
    return f->ref < s->n_msgs;
  if (f->type == PROTOBUF_C_TYPE_ENUM)
    return f->ref < s->n_enums;
  return f->ref == PBW_NONE32;
}

/* Message i, whose fields must start at *next_field. */
static int msg_ok(const pbw__schema *s, uint32_t i, uint32_t *next_field) {
  pbw__smsg m;
  pbw__sfield f;
  uint32_t prev = 0;
  pbw__schema_msg(s, i, &m);
  if (!str_ok(s, m.name) || !ostr_ok(s, m.short_name) || !ostr_ok(s, m.c_name) ||
      !ostr_ok(s, m.package_name) || (m.flags & ~PBW__SMSG_INIT) || m.first_field != *next_field ||
      !range_ok(m.first_field, m.n_fields, s->n_fields) || m.n_oneofs > m.n_fields)
    return 0;
  for (uint32_t k = 0; k < m.n_fields; k++) {
    pbw__schema_field(s, m.first_field + k, &f);
    if (!field_ok(s, &m, s->fields + (size_t)(m.first_field + k) * SCH_FIELD, &f) ||
        f.number <= prev)
      return 0;
    prev = f.number;
  }
  *next_field += m.n_fields;
  return 1;
}

/* Enum i, whose values and value names must start at *next_value and
 * *next_vname. */
static int enum_ok(const pbw__schema *s, uint32_t i, uint32_t *next_value, uint32_t *next_vname) {
  pbw__senum e;
  pbw__svalue v;
  uint32_t index;
  pbw__schema_enum(s, i, &e);
  if (!str_ok(s, e.name) || !ostr_ok(s, e.short_name) || !ostr_ok(s, e.c_name) ||
      !ostr_ok(s, e.package_name) || e.first_value != *next_value ||
      !range_ok(e.first_value, e.n_values, s->n_values) || e.first_vname != *next_vname ||
      !range_ok(e.first_vname, e.n_vnames, s->n_vnames))
    return 0;
  for (uint32_t k = 0; k < e.n_values; k++) {
    pbw__schema_value_rec(s, e.first_value + k, &v);
    if (!ostr_ok(s, v.name) || !ostr_ok(s, v.c_name))
      return 0;
  }
  for (uint32_t k = 0; k < e.n_vnames; k++) {
    const uint8_t *r = s->vnames + (size_t)(e.first_vname + k) * SCH_VNAME;
    if (!str_ok(s, le32(r)))
      return 0;
    pbw__schema_vname(s, e.first_vname + k, &index);
    if (index >= e.n_values)
      return 0;
  }
  *next_value += e.n_values;
  *next_vname += e.n_vnames;
  return 1;
}

static int header_ok(pbw__schema *s, const uint8_t *p, size_t len) {
  if (p == NULL || len < SCH_HDR || le32(p) != SCH_MAGIC ||
      le32(p + 4) != (SCH_VERSION | (uint32_t)SCH_HDR << 16) || le32(p + 40) != 0)
    return 0;
  s->n_msgs = le32(p + 16);
  s->n_fields = le32(p + 20);
  s->n_enums = le32(p + 24);
  s->n_values = le32(p + 28);
  s->n_vnames = le32(p + 32);
  s->blob_len = le32(p + 36);
  s->abi = le32(p + 44);
  uint64_t total = SCH_HDR + (uint64_t)s->n_msgs * SCH_MSG + (uint64_t)s->n_fields * SCH_FIELD +
                   (uint64_t)s->n_enums * SCH_ENUM + (uint64_t)s->n_values * SCH_VALUE +
                   (uint64_t)s->n_vnames * SCH_VNAME + s->blob_len;
  if (s->n_msgs == 0 || total != len || le64(p + 8) != pbw__hash64(p + 16, len - 16))
    return 0;
  s->msgs = p + SCH_HDR;
  s->fields = s->msgs + (size_t)s->n_msgs * SCH_MSG;
  s->enums = s->fields + (size_t)s->n_fields * SCH_FIELD;
  s->values = s->enums + (size_t)s->n_enums * SCH_ENUM;
  s->vnames = s->values + (size_t)s->n_values * SCH_VALUE;
  s->blob = s->vnames + (size_t)s->n_vnames * SCH_VNAME;
  return 1;
}

/* Offline tools decode many payloads against the same schema: the last
 * schema that passed (known by its length and checksum) is not walked
 * again by the same thread. Initial-exec, as the shims' own: this file is
 * in the replay shim too (pbw_schema_build), which must not need the
 * dynamic loader's TLS calls. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  size_t len;
  uint64_t sum;
} tl_valid;

int pbw__schema_open(pbw__schema *s, const void *buf, size_t len) {
  uint32_t next_field = 0, next_value = 0, next_vname = 0;
  if (!header_ok(s, buf, len))
    return PBW_E_BADSCHEMA;
  uint64_t sum = le64((const uint8_t *)buf + 8);
  if (tl_valid.len == len && tl_valid.sum == sum)
    return PBW_OK;
  for (uint32_t i = 0; i < s->n_msgs; i++) {
    if (!msg_ok(s, i, &next_field))
      return PBW_E_BADSCHEMA;
  }
  for (uint32_t i = 0; i < s->n_enums; i++) {
    if (!enum_ok(s, i, &next_value, &next_vname))
      return PBW_E_BADSCHEMA;
  }
  if (next_field != s->n_fields || next_value != s->n_values || next_vname != s->n_vnames)
    return PBW_E_BADSCHEMA;
  tl_valid.len = len;
  tl_valid.sum = sum;
  return PBW_OK;
}

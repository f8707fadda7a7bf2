/* pb_descset.c — real protobuf-c descriptors rebuilt from a schema.
 *
 * `standin replay` turns the request bytes recorded for an unpack into a
 * relocatable image offline: it rebuilds the program's descriptors from the
 * schema (this file), lets libprotobuf-c unpack the bytes with them, and
 * captures the tree with pbw_image_build. The replayed process then
 * materialises that image against its own generated descriptors, which
 * checks names, sizes and a hash of every field's number, label, type,
 * offsets and flags: so the rebuilt descriptors must reproduce the
 * program's C layout exactly, and lay out their arrays as protoc-c 1.4.1
 * does, because that is what libprotobuf-c 1.4.1 relies on:
 *
 *   - fields sorted by number (the schema keeps protoc-c's order, which the
 *     image's type table refers to by index);
 *   - fields_sorted_by_name: indices into fields, by strcmp of the names;
 *   - field_ranges: one { first number, first index } entry per run of
 *     consecutive field numbers, then a sentinel { 0, n_fields } that
 *     int_range_lookup reads as the end of the last run; n_field_ranges
 *     excludes the sentinel. A message without fields has NULL arrays and
 *     no ranges (unpack starts from desc->fields + 0 and reads its id
 *     unless that is NULL);
 *   - enum values sorted by number, value_ranges likewise with a sentinel
 *     { 0, n_values }, values_by_name as recorded;
 *   - default_value: the field's own copy of the recorded default (a char
 *     array for strings, a ProtobufCBinaryData whose data points to its own
 *     copy for bytes, the raw bits for numbers), so pointer comparisons
 *     with the default work as they do with generated code;
 *   - message_init NULL: a descriptor has no room for the closure a
 *     generic init function would need. protobuf_c_message_unpack then
 *     calls its own message_init_generic: memset 0, the descriptor, and a
 *     copy of every non-repeated field's default. Generated init functions
 *     (STRUCT__INIT) differ in two ways, both made up for here so that
 *     unpack starts from what the program's init gives:
 *       . they leave oneof unions zero, while message_init_generic copies
 *         the defaults of oneof members into the union (where, as another
 *         member's pointer, they would be freed or merged as such): oneof
 *         members are rebuilt with a NULL default_value. libprotobuf-c
 *         compares their default only with pointers it allocated itself,
 *         except in merge_messages (one singular message field arriving
 *         twice): when the earlier copy selected a string member that has
 *         a default (every proto3 oneof string) and the later one selected
 *         nothing, the program drops the string and this graph keeps it.
 *         That is the one known difference;
 *       . they start enums without a default at their first declared value
 *         (not recorded in any descriptor): the schema stores that initial
 *         value (PBW__SDEF_INIT) and it is rebuilt as the default_value of
 *         those optional fields, which only init functions read.
 *     A program whose own descriptor has no message_init unpacks with
 *     message_init_generic itself, oneof defaults and all, which can make
 *     libprotobuf-c free a default as if it were another member's string
 *     or message: the rebuilt graph does not follow it there.
 *
 * This code never calls libprotobuf-c: the caller does. It must therefore
 * reject every schema whose layout could make libprotobuf-c write outside
 * a message or confuse two members: each member and each has_/n_/case
 * member the library touches must lie inside sizeof_message, after the
 * ProtobufCMessage header, aligned, and apart from every other one, except
 * that the members of one oneof share one union and one case member. */
#include "pb_internal.h"

#include <stdlib.h>

struct pbw_descset {
  const ProtobufCMessageDescriptor *root;
  size_t size; /* bytes of the one allocation this header starts */
};

#define HDR_SIZE ((sizeof(struct pbw_descset) + 7) & ~(size_t)7)

static inline uint64_t round8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* ---- Layout validation --------------------------------------------------- */

typedef struct {
  uint64_t start, end;
} region;

typedef struct {
  const char *name;
  unsigned index;
} name_ix;

typedef struct {
  const pbw__schema *s;
  region *reg;    /* scratch: 2 per field of the largest message */
  name_ix *names; /* scratch: 1 per field of the largest message */
  uint32_t *grp;  /* scratch: first field of each oneof group, or PBW_NONE32 */
} vctx;

static int cmp_region(const void *a, const void *b) {
  const region *x = a, *y = b;
  return (x->start > y->start) - (x->start < y->start);
}

static int cmp_name(const void *a, const void *b) {
  const name_ix *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c != 0 ? c : (x->index > y->index) - (x->index < y->index);
}

static int is_ptr_type(uint8_t t) {
  return t == PROTOBUF_C_TYPE_STRING || t == PROTOBUF_C_TYPE_MESSAGE;
}

static int is_packable(uint8_t t) {
  return !is_ptr_type(t) && t != PROTOBUF_C_TYPE_BYTES;
}

/* Size and alignment of field f's member. */
static void member_shape(const pbw__sfield *f, uint64_t *size, uint64_t *align) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    *size = sizeof(void *);
    *align = _Alignof(void *);
    return;
  }
  *size = pbw__elt_size((ProtobufCType)f->type);
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_MESSAGE: *align = _Alignof(void *); break;
  case PROTOBUF_C_TYPE_BYTES: *align = _Alignof(ProtobufCBinaryData); break;
  case PROTOBUF_C_TYPE_BOOL: *align = _Alignof(protobuf_c_boolean); break;
  case PROTOBUF_C_TYPE_DOUBLE: *align = _Alignof(double); break;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SINT64:
  case PROTOBUF_C_TYPE_SFIXED64:
  case PROTOBUF_C_TYPE_UINT64:
  case PROTOBUF_C_TYPE_FIXED64: *align = _Alignof(uint64_t); break;
  default: *align = _Alignof(uint32_t); break;
  }
}

/* Size of the member at quantifier_offset that libprotobuf-c (and pack,
 * unpack, free_unpacked, merge) reads or writes for f, 0 when none:
 * repeated fields have a size_t count, oneof members a uint32_t case,
 * optional (and proto3 unlabeled) fields a protobuf_c_boolean has_ member
 * whenever quantifier_offset is not 0. Optional numbers and bytes must
 * have one (protoc-c always generates it). Returns -1 when f breaks that. */
static int quantifier_size(const pbw__sfield *f, uint64_t *size, uint64_t *align) {
  *size = 0;
  *align = 1;
  if (f->label == PROTOBUF_C_LABEL_REQUIRED)
    return 0;
  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    *size = sizeof(size_t);
    *align = _Alignof(size_t);
  } else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    *size = sizeof(uint32_t);
    *align = _Alignof(uint32_t);
  } else if (f->quantifier_offset != 0) {
    *size = sizeof(protobuf_c_boolean);
    *align = _Alignof(protobuf_c_boolean);
  } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !is_ptr_type(f->type)) {
    return -1;
  }
  return 0;
}

/* [at, at + size) is a properly aligned member inside a message of size S. */
static int member_fits(uint64_t at, uint64_t size, uint64_t align, uint64_t S) {
  return at >= sizeof(ProtobufCMessage) && at % align == 0 && size <= S && at <= S - size;
}

static int field_layout_ok(const pbw__sfield *f, uint64_t S) {
  uint64_t size, align, qsize, qalign;
  int oneof = (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
  member_shape(f, &size, &align);
  if (!member_fits(f->offset, size, align, S))
    return 0;
  if (quantifier_size(f, &qsize, &qalign) != 0)
    return 0;
  if (qsize != 0 && !member_fits(f->quantifier_offset, qsize, qalign, S))
    return 0;
  if (oneof != (f->oneof != PBW_NONE32))
    return 0;
  if (oneof && f->label != PROTOBUF_C_LABEL_OPTIONAL && f->label != PROTOBUF_C_LABEL_NONE)
    return 0;
  if ((f->flags & PROTOBUF_C_FIELD_FLAG_PACKED) &&
      (f->label != PROTOBUF_C_LABEL_REPEATED || !is_packable(f->type)))
    return 0;
  return 1;
}

/* Message i: every member and quantifier in place and apart. */
static int msg_layout_ok(vctx *v, uint32_t mi) {
  const pbw__schema *s = v->s;
  pbw__smsg m;
  pbw__sfield f, g;
  uint32_t n_reg = 0;
  pbw__schema_msg(s, mi, &m);
  uint64_t S = m.sizeof_message;
  if (S < sizeof(ProtobufCMessage) || S % _Alignof(ProtobufCMessage) != 0 ||
      S > sizeof(ProtobufCMessage) + 48 * (uint64_t)m.n_fields + 8)
    return 0;
  for (uint32_t k = 0; k < m.n_oneofs; k++)
    v->grp[k] = PBW_NONE32;
  for (uint32_t k = 0; k < m.n_fields; k++) {
    uint64_t size, align, qsize, qalign;
    pbw__schema_field(s, m.first_field + k, &f);
    if (!field_layout_ok(&f, S))
      return 0;
    member_shape(&f, &size, &align);
    quantifier_size(&f, &qsize, &qalign);
    v->names[k] = (name_ix){pbw__schema_str(s, f.name), k};
    if (f.oneof != PBW_NONE32) {
      uint32_t first = v->grp[f.oneof];
      if (first != PBW_NONE32) { /* a later member: same union, same case */
        pbw__schema_field(s, m.first_field + first, &g);
        if (g.offset != f.offset || g.quantifier_offset != f.quantifier_offset)
          return 0;
        region *r = &v->reg[first]; /* widen the union's region */
        if (r->end < f.offset + size)
          r->end = f.offset + size;
        continue;
      }
      v->grp[f.oneof] = k;
    }
    /* the member's region sits at index k until sorting, so that a later
     * oneof member can find its union's */
    v->reg[k] = (region){f.offset, f.offset + size};
    if (qsize != 0)
      v->reg[m.n_fields + n_reg++] = (region){f.quantifier_offset, f.quantifier_offset + qsize};
  }
  /* pack the member regions (oneof followers left holes) before sorting */
  uint32_t n = 0;
  for (uint32_t k = 0; k < m.n_fields; k++) {
    pbw__schema_field(s, m.first_field + k, &f);
    if (f.oneof == PBW_NONE32 || v->grp[f.oneof] == k)
      v->reg[n++] = v->reg[k];
  }
  memmove(v->reg + n, v->reg + m.n_fields, n_reg * sizeof *v->reg);
  n += n_reg;
  qsort(v->reg, n, sizeof *v->reg, cmp_region);
  for (uint32_t k = 1; k < n; k++) {
    if (v->reg[k].start < v->reg[k - 1].end)
      return 0;
  }
  /* field names are unique (fields_sorted_by_name is searched by name) */
  qsort(v->names, m.n_fields, sizeof *v->names, cmp_name);
  for (uint32_t k = 1; k < m.n_fields; k++) {
    if (strcmp(v->names[k - 1].name, v->names[k].name) == 0)
      return 0;
  }
  return 1;
}

/* Enum values strictly increasing by number, as protoc-c emits them (the
 * value ranges are computed from that order). */
static int enum_layout_ok(const pbw__schema *s, uint32_t ei) {
  pbw__senum e;
  pbw__svalue a, b;
  pbw__schema_enum(s, ei, &e);
  for (uint32_t k = 1; k < e.n_values; k++) {
    pbw__schema_value_rec(s, e.first_value + k - 1, &a);
    pbw__schema_value_rec(s, e.first_value + k, &b);
    if (a.number >= b.number)
      return 0;
  }
  return 1;
}

static int layout_ok(const pbw__schema *s) {
  uint32_t max_fields = 0;
  uint64_t def_bytes = 0;
  pbw__smsg m;
  pbw__sfield f;
  for (uint32_t i = 0; i < s->n_msgs; i++) {
    pbw__schema_msg(s, i, &m);
    if (m.n_fields > max_fields)
      max_fields = m.n_fields;
  }
  /* defaults do not share blob bytes: their copies fit the blob's size */
  for (uint32_t i = 0; i < s->n_fields; i++) {
    pbw__schema_field(s, i, &f);
    def_bytes += f.def_off != PBW_NONE32 ? f.def_len : 0;
  }
  if (def_bytes > s->blob_len)
    return PBW_E_BADSCHEMA;
  vctx v = {s, malloc((2 * (size_t)max_fields + 1) * sizeof(region)),
            malloc(((size_t)max_fields + 1) * sizeof(name_ix)),
            malloc(((size_t)max_fields + 1) * sizeof(uint32_t))};
  int rc = v.reg && v.names && v.grp ? PBW_OK : PBW_E_NOMEM;
  for (uint32_t i = 0; rc == PBW_OK && i < s->n_msgs; i++) {
    if (!msg_layout_ok(&v, i))
      rc = PBW_E_BADSCHEMA;
  }
  for (uint32_t i = 0; rc == PBW_OK && i < s->n_enums; i++) {
    if (!enum_layout_ok(s, i))
      rc = PBW_E_BADSCHEMA;
  }
  free(v.reg);
  free(v.names);
  free(v.grp);
  return rc;
}

/* ---- Building ------------------------------------------------------------- */

/* Where each part of the one allocation starts. */
typedef struct {
  uint64_t msgs, enums, fields, byname, franges, values, vnames, vranges, defs, blob, total;
} plan;

/* Bytes of field f's default storage. */
static uint64_t default_size(const pbw__sfield *f) {
  if (f->def_off == PBW_NONE32)
    return 0;
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: return round8((uint64_t)f->def_len + 1);
  case PROTOBUF_C_TYPE_BYTES:
    if (f->dflags & PBW__SDEF_NULL_DATA)
      return round8(sizeof(ProtobufCBinaryData));
    /* data gets an address of its own even when empty */
    return round8(sizeof(ProtobufCBinaryData)) + round8(f->def_len ? f->def_len : 1);
  default: return 8;
  }
}

static int make_plan(const pbw__schema *s, plan *p) {
  pbw__sfield f;
  uint64_t at = HDR_SIZE, defs = 0;
#define PART(name, bytes)                                                                          \
  do {                                                                                             \
    p->name = at;                                                                                  \
    at += round8(bytes);                                                                           \
  } while (0)
  PART(msgs, (uint64_t)s->n_msgs * sizeof(ProtobufCMessageDescriptor));
  PART(enums, (uint64_t)s->n_enums * sizeof(ProtobufCEnumDescriptor));
  PART(fields, (uint64_t)s->n_fields * sizeof(ProtobufCFieldDescriptor));
  PART(byname, (uint64_t)s->n_fields * sizeof(unsigned));
  PART(franges, ((uint64_t)s->n_fields + s->n_msgs) * sizeof(ProtobufCIntRange));
  PART(values, (uint64_t)s->n_values * sizeof(ProtobufCEnumValue));
  PART(vnames, (uint64_t)s->n_vnames * sizeof(ProtobufCEnumValueIndex));
  PART(vranges, ((uint64_t)s->n_values + s->n_enums) * sizeof(ProtobufCIntRange));
  for (uint32_t i = 0; i < s->n_fields; i++) {
    pbw__schema_field(s, i, &f);
    defs += default_size(&f);
  }
  PART(defs, defs);
  PART(blob, s->blob_len);
#undef PART
  p->total = at;
  return at <= SIZE_MAX ? PBW_OK : PBW_E_NOMEM;
}

typedef struct {
  const pbw__schema *s;
  uint8_t *base;
  const plan *p;
  uint64_t def_at; /* next free byte of the default storage */
  name_ix *names;  /* scratch for fields_sorted_by_name */
} bctx;

#define AT(c, part, type) ((type *)((c)->base + (c)->p->part))

static const char *name_at(const bctx *c, uint32_t off) {
  return off == PBW_NONE32 ? NULL : (const char *)c->base + c->p->blob + off;
}

/* The default storage of field f, filled; NULL when it gets none (see the
 * top of the file for oneof members). */
static const void *build_default(bctx *c, const pbw__sfield *f) {
  const uint8_t *src = c->s->blob + (f->def_off == PBW_NONE32 ? 0 : f->def_off);
  uint8_t *at = c->base + c->p->defs + c->def_at;
  if (f->def_off == PBW_NONE32)
    return NULL;
  c->def_at += default_size(f);
  if (f->oneof != PBW_NONE32)
    return NULL;
  if (f->type == PROTOBUF_C_TYPE_BYTES) {
    ProtobufCBinaryData *bd = (ProtobufCBinaryData *)at;
    bd->len = f->def_len;
    if (!(f->dflags & PBW__SDEF_NULL_DATA)) {
      bd->data = at + round8(sizeof *bd);
      memcpy(bd->data, src, f->def_len);
    }
    return bd;
  }
  memcpy(at, src, f->def_len); /* text (NUL from calloc) or number bits */
  return at;
}

/* protoc-c's WriteIntRanges: a { start, index } entry per run of
 * consecutive numbers, then the sentinel { 0, n }. Returns the number of
 * runs. */
static unsigned int_ranges(ProtobufCIntRange *r, const int32_t *num, unsigned n) {
  unsigned runs = 0, start = 0;
  for (unsigned i = 1; i <= n; i++) {
    if (i == n || (int64_t)num[i - 1] + 1 != num[i]) {
      r[runs++] = (ProtobufCIntRange){num[start], start};
      start = i;
    }
  }
  r[runs] = (ProtobufCIntRange){0, n};
  return runs;
}

static void build_msg(bctx *c, uint32_t mi, int32_t *nums) {
  const pbw__schema *s = c->s;
  ProtobufCMessageDescriptor *md = AT(c, msgs, ProtobufCMessageDescriptor) + mi;
  ProtobufCFieldDescriptor *fd = AT(c, fields, ProtobufCFieldDescriptor);
  unsigned *byname = AT(c, byname, unsigned);
  pbw__smsg m;
  pbw__sfield f;
  pbw__schema_msg(s, mi, &m);
  md->magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC;
  md->name = name_at(c, m.name);
  md->short_name = name_at(c, m.short_name);
  md->c_name = name_at(c, m.c_name);
  md->package_name = name_at(c, m.package_name);
  md->sizeof_message = m.sizeof_message;
  md->n_fields = m.n_fields;
  md->message_init = NULL; /* unpack then uses message_init_generic */
  if (m.n_fields == 0)
    return; /* fields, fields_sorted_by_name and field_ranges stay NULL */
  fd += m.first_field;
  byname += m.first_field;
  for (uint32_t k = 0; k < m.n_fields; k++) {
    pbw__schema_field(s, m.first_field + k, &f);
    fd[k].name = name_at(c, f.name);
    fd[k].id = f.number;
    fd[k].label = (ProtobufCLabel)f.label;
    fd[k].type = (ProtobufCType)f.type;
    fd[k].quantifier_offset = f.quantifier_offset;
    fd[k].offset = f.offset;
    if (f.type == PROTOBUF_C_TYPE_MESSAGE)
      fd[k].descriptor = AT(c, msgs, ProtobufCMessageDescriptor) + f.ref;
    else if (f.type == PROTOBUF_C_TYPE_ENUM)
      fd[k].descriptor = AT(c, enums, ProtobufCEnumDescriptor) + f.ref;
    fd[k].default_value = build_default(c, &f);
    fd[k].flags = f.flags;
    c->names[k] = (name_ix){fd[k].name, k};
    nums[k] = (int32_t)f.number;
  }
  qsort(c->names, m.n_fields, sizeof *c->names, cmp_name);
  for (uint32_t k = 0; k < m.n_fields; k++)
    byname[k] = c->names[k].index;
  ProtobufCIntRange *r = AT(c, franges, ProtobufCIntRange) + m.first_field + mi;
  md->fields = fd;
  md->fields_sorted_by_name = byname;
  md->n_field_ranges = int_ranges(r, nums, m.n_fields);
  md->field_ranges = r;
}

static void build_enum(bctx *c, uint32_t ei, int32_t *nums) {
  const pbw__schema *s = c->s;
  ProtobufCEnumDescriptor *ed = AT(c, enums, ProtobufCEnumDescriptor) + ei;
  ProtobufCEnumValue *val = AT(c, values, ProtobufCEnumValue);
  ProtobufCEnumValueIndex *vn = AT(c, vnames, ProtobufCEnumValueIndex);
  pbw__senum e;
  pbw__svalue v;
  uint32_t index;
  pbw__schema_enum(s, ei, &e);
  ed->magic = PROTOBUF_C__ENUM_DESCRIPTOR_MAGIC;
  ed->name = name_at(c, e.name);
  ed->short_name = name_at(c, e.short_name);
  ed->c_name = name_at(c, e.c_name);
  ed->package_name = name_at(c, e.package_name);
  ed->n_values = e.n_values;
  ed->n_value_names = e.n_vnames;
  if (e.n_values > 0) {
    val += e.first_value;
    for (uint32_t k = 0; k < e.n_values; k++) {
      pbw__schema_value_rec(s, e.first_value + k, &v);
      val[k] = (ProtobufCEnumValue){name_at(c, v.name), name_at(c, v.c_name), v.number};
      nums[k] = v.number;
    }
    ProtobufCIntRange *r = AT(c, vranges, ProtobufCIntRange) + e.first_value + ei;
    ed->values = val;
    ed->n_value_ranges = int_ranges(r, nums, e.n_values);
    ed->value_ranges = r;
  }
  if (e.n_vnames > 0) {
    vn += e.first_vname;
    for (uint32_t k = 0; k < e.n_vnames; k++) {
      const char *name = pbw__schema_vname(s, e.first_vname + k, &index);
      vn[k] =
          (ProtobufCEnumValueIndex){name_at(c, (uint32_t)(name - (const char *)s->blob)), index};
    }
    ed->values_by_name = vn;
  }
}

int pbw_descset_from_schema(const void *schema, size_t len, pbw_descset **out) {
  pbw__schema s;
  plan p;
  pbw__smsg m;
  pbw__senum e;
  uint32_t max_n = 1;
  *out = NULL;
  int rc = pbw__schema_open(&s, schema, len);
  if (rc != PBW_OK)
    return rc;
  if (s.abi != PBW__SCHEMA_ABI)
    return PBW_E_UNSUPPORTED; /* recorded on another kind of machine */
  if ((rc = layout_ok(&s)) != PBW_OK || (rc = make_plan(&s, &p)) != PBW_OK)
    return rc;
  for (uint32_t i = 0; i < s.n_msgs; i++) {
    pbw__schema_msg(&s, i, &m);
    max_n = m.n_fields > max_n ? m.n_fields : max_n;
  }
  for (uint32_t i = 0; i < s.n_enums; i++) {
    pbw__schema_enum(&s, i, &e);
    max_n = e.n_values > max_n ? e.n_values : max_n;
  }
  uint8_t *base = calloc(1, (size_t)p.total);
  name_ix *names = malloc((size_t)max_n * sizeof *names);
  int32_t *nums = malloc((size_t)max_n * sizeof *nums);
  if (base == NULL || names == NULL || nums == NULL) {
    free(base);
    free(names);
    free(nums);
    return PBW_E_NOMEM;
  }
  bctx c = {&s, base, &p, 0, names};
  memcpy(base + p.blob, s.blob, s.blob_len);
  for (uint32_t i = 0; i < s.n_msgs; i++)
    build_msg(&c, i, nums);
  for (uint32_t i = 0; i < s.n_enums; i++)
    build_enum(&c, i, nums);
  free(names);
  free(nums);
  pbw_descset *ds = (pbw_descset *)base;
  ds->root = AT(&c, msgs, ProtobufCMessageDescriptor);
  ds->size = (size_t)p.total;
  *out = ds;
  return PBW_OK;
}

const ProtobufCMessageDescriptor *pbw_descset_root(const pbw_descset *s) {
  return s != NULL ? s->root : NULL;
}

void pbw_descset_free(pbw_descset *s) {
  free(s);
}

/* pb_image.c — relocatable images of unpacked protobuf-c message trees.
 *
 * Replay answers protobuf_c_message_unpack without parsing: the tree saved
 * at record time is rebuilt with one allocation, one memcpy (and one more
 * per long string or bytes datum taken from the request, IMG_REFS) and a
 * pass over the pointer slots. Image layout (native byte order and struct layout; an
 * image is only meaningful on the machine type that recorded it):
 *
 *   0   u32 magic "PBWI"          4   u16 version (1)   6  u16 header size (40)
 *   8   u64 checksum: XXH3-64 of bytes [16, len)
 *   16  u32 flags (0)             20  u32 n_types       24 u32 n_fixups
 *   28  u32 names_len (multiple of 8)                   32 u64 block_size
 *   40  type table, n_types records of 32 bytes:
 *         u32 parent type (root: 0xFFFFFFFF), u32 field index in the parent,
 *         u32 name offset in names, u32 name length, u64 sizeof_message,
 *         u64 layout hash (field numbers, labels, types, offsets, flags)
 *   ..  names: NUL-terminated full type names, zero-padded to 8 bytes
 *   ..  fix-ups: n_fixups u32 word indices into the block, increasing
 *   ..  block: block_size bytes, the tree's allocations laid out 8-aligned,
 *       root message first
 *   ..  with flag IMG_SPLIT, how the block splits into the allocations
 *       unpack made (see "Trees as libprotobuf-c allocates them"):
 *       u32 n_pieces, u32 n_int (= n_pieces - 1: internal pointers),
 *       n_pieces u32 piece starts (word indices, increasing, the first 0),
 *       n_int u32 pieces, the one each internal pointer names in fix-up
 *       order; zero-padded to 8 bytes
 *   With flag IMG_REFS (which needs IMG_SPLIT), set only by
 *   pbw_image_refer: the last n_refs pieces are not in the image but are
 *   bytes of the request the tree was unpacked from. A section between the
 *   fix-ups and the block says where: u32 n_refs, u32 stored (the block's
 *   words the image holds: the last n_refs pieces start there), then per
 *   piece, in order, u64 offset and u64 length in the request; the rest of
 *   the piece is zeros. The image holds only the block's first stored
 *   words.
 *
 * Every pointer slot of the tree is either NULL (stored as 0) or listed in
 * the fix-ups; such a slot holds kind << 56 | argument:
 *   FX_INTERNAL   offset of the target inside the block
 *   FX_DESC       type table index (the message's descriptor)
 *   FX_STR_DEF    type << 24 | field: that field's default_value
 *   FX_BYTES_DEF  type << 24 | field: that field's default bytes data
 *   FX_EMPTY      protobuf_c_empty_string
 * Type i > 0 is reached from the root descriptor as
 * desc(parent)->fields[field].descriptor, so replay re-binds descriptors
 * without any name lookup; names, sizes and layout hashes verify the
 * result. */
#include "pb_internal.h"
#include "shim_alloc.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define IMG_MAGIC 0x49574250u /* "PBWI" read as a little-endian u32 */
#define IMG_VERSION 1
#define IMG_HDR 40
#define IMG_TYPE_REC 32
#define IMG_MAX_BLOCK ((uint64_t)UINT32_MAX * 8) /* fix-ups are u32 word indices */
#define FX_SHIFT 56
#define FX_ARG_MASK ((UINT64_C(1) << FX_SHIFT) - 1)
#define FX_FIELD_BITS 24
#define FX_FIELD_MASK ((UINT64_C(1) << FX_FIELD_BITS) - 1)

enum { FX_INTERNAL = 1, FX_DESC = 2, FX_STR_DEF = 3, FX_BYTES_DEF = 4, FX_EMPTY = 5 };
#define IMG_SPLIT 1u /* header flag: the split section follows the block */
#define IMG_REFS 2u  /* header flag: the last pieces are the request's bytes */
#define REF_PAD 8    /* most zero bytes after a piece's bytes from the request */

/* Re-bound type tables are cached per thread (16: a pbtest run rebinds
 * 3,679 times in 2,000 unpacks with 4, 22 times with 16): descriptors are static, so
 * (root descriptor, hash of type table and names) always binds the same
 * way, and verified names need not be compared again on every call. */
#define CACHE_SLOTS 16
#define CACHE_TYPES 32

static inline uint64_t round8(uint64_t n) {
  return (n + 7) & ~(uint64_t)7;
}

/* Hash of what the image's bytes depend on in a message's C layout. */
static uint64_t layout_hash(const ProtobufCMessageDescriptor *d) {
  uint64_t h = XXH3_64bits(&d->sizeof_message, sizeof d->sizeof_message);
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    uint32_t w[6] = {
        f->id, (uint32_t)f->label, (uint32_t)f->type, f->quantifier_offset, f->offset, f->flags};
    h = XXH3_64bits_withSeed(w, sizeof w, h);
  }
  return h;
}

/* ---- Building ------------------------------------------------------------ */

typedef struct {
  const ProtobufCMessageDescriptor *d;
  uint32_t parent, field;
} img_type;

/* The tree is walked twice in the same order: first to measure (blk ==
 * NULL), then to copy into the block and record fix-ups. */
typedef struct {
  img_type *types;
  uint32_t n_types, cap_types, last_type;
  uint64_t size;  /* bytes of the block reserved so far */
  uint64_t n_fix; /* fix-ups recorded so far */
  uint8_t *blk;   /* NULL while measuring */
  uint32_t *fix;
  uint64_t max_size, max_fix; /* what the first pass measured */
  int overflow;               /* the second pass found more: the tree changed */
  const char *empty;
} img_ctx;

static int reserve(img_ctx *c, uint64_t n, uint64_t *off) {
  if (n == 0)
    n = 1; /* every allocation gets an address of its own */
  if (n > IMG_MAX_BLOCK || round8(n) > IMG_MAX_BLOCK - c->size)
    return PBW_E_UNSUPPORTED;
  if (c->blk != NULL && round8(n) > c->max_size - c->size)
    return PBW_E_UNSUPPORTED; /* the tree grew between the passes */
  *off = c->size;
  c->size += round8(n);
  return PBW_OK;
}

static int copy_new(img_ctx *c, const void *src, uint64_t n, uint64_t *off) {
  int rc = reserve(c, n, off);
  if (rc == PBW_OK && c->blk != NULL && n > 0)
    memcpy(c->blk + *off, src, n);
  return rc;
}

static int set_fix(img_ctx *c, uint64_t slot, unsigned kind, uint64_t arg) {
  if (c->blk != NULL && c->n_fix >= c->max_fix) {
    c->overflow = 1;
    return PBW_E_UNSUPPORTED;
  }
  if (c->blk != NULL) {
    pbw__st64(c->blk + slot, (uint64_t)kind << FX_SHIFT | arg);
    c->fix[c->n_fix] = (uint32_t)(slot / 8);
  }
  c->n_fix++;
  return PBW_OK;
}

static int field_arg(uint32_t type, unsigned field, uint64_t *arg) {
  if (field > FX_FIELD_MASK)
    return PBW_E_UNSUPPORTED;
  *arg = (uint64_t)type << FX_FIELD_BITS | field;
  return PBW_OK;
}

/* Index of descriptor d in the type table, reached as parent's field. */
static int type_of(img_ctx *c, const ProtobufCMessageDescriptor *d, uint32_t parent, uint32_t field,
                   uint32_t *idx) {
  if (c->last_type < c->n_types && c->types[c->last_type].d == d) {
    *idx = c->last_type;
    return PBW_OK;
  }
  for (uint32_t i = 0; i < c->n_types; i++) {
    if (c->types[i].d == d) {
      *idx = c->last_type = i;
      return PBW_OK;
    }
  }
  if (d->magic != PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC || d->name == NULL ||
      d->sizeof_message < sizeof(ProtobufCMessage))
    return PBW_E_UNSUPPORTED;
  if (c->n_types == c->cap_types) {
    uint32_t cap = c->cap_types ? 2 * c->cap_types : 16;
    img_type *t = realloc(c->types, cap * sizeof *t);
    if (t == NULL)
      return PBW_E_NOMEM;
    c->types = t;
    c->cap_types = cap;
  }
  c->types[c->n_types] = (img_type){d, parent, field};
  *idx = c->last_type = c->n_types++;
  return PBW_OK;
}

static int cap_msg(img_ctx *c, const ProtobufCMessage *m, uint32_t ti, unsigned depth,
                   uint64_t *off);

static int cap_string(img_ctx *c, uint64_t slot, const char *s, const ProtobufCFieldDescriptor *f,
                      uint32_t ti, unsigned fi) {
  uint64_t arg, off;
  int rc;
  if (s == NULL)
    return PBW_OK;
  if (s == f->default_value) {
    if ((rc = field_arg(ti, fi, &arg)) != PBW_OK)
      return rc;
    return set_fix(c, slot, FX_STR_DEF, arg);
  }
  if (s == c->empty)
    return set_fix(c, slot, FX_EMPTY, 0);
  if ((rc = copy_new(c, s, strlen(s) + 1, &off)) != PBW_OK)
    return rc;
  return set_fix(c, slot, FX_INTERNAL, off);
}

/* slot is the offset of bd->data inside the block. */
static int cap_bytes(img_ctx *c, uint64_t slot, const ProtobufCBinaryData *bd,
                     const ProtobufCFieldDescriptor *f, uint32_t ti, unsigned fi) {
  const ProtobufCBinaryData *def = f->default_value;
  uint64_t arg, off;
  int rc;
  if (bd->data == NULL)
    return PBW_OK;
  if (def != NULL && bd->data == def->data) {
    if ((rc = field_arg(ti, fi, &arg)) != PBW_OK)
      return rc;
    return set_fix(c, slot, FX_BYTES_DEF, arg);
  }
  if ((rc = copy_new(c, bd->data, bd->len, &off)) != PBW_OK)
    return rc;
  return set_fix(c, slot, FX_INTERNAL, off);
}

static int cap_submsg(img_ctx *c, uint64_t slot, const ProtobufCMessage *sub,
                      const ProtobufCFieldDescriptor *f, uint32_t ti, unsigned fi, unsigned depth) {
  uint32_t child;
  uint64_t off;
  int rc;
  if (sub == NULL)
    return PBW_OK;
  if (sub->descriptor != f->descriptor || f->descriptor == NULL)
    return PBW_E_UNSUPPORTED; /* replay could not re-bind it from the field */
  if ((rc = type_of(c, f->descriptor, ti, fi, &child)) != PBW_OK)
    return rc;
  if ((rc = cap_msg(c, sub, child, depth + 1, &off)) != PBW_OK)
    return rc;
  return set_fix(c, slot, FX_INTERNAL, off);
}

/* The value of type f->type at src, whose copy sits at block offset slot. */
static int cap_value(img_ctx *c, uint64_t slot, const char *src, const ProtobufCFieldDescriptor *f,
                     uint32_t ti, unsigned fi, unsigned depth) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: return cap_string(c, slot, pbw__ldptr(src), f, ti, fi);
  case PROTOBUF_C_TYPE_BYTES:
    return cap_bytes(c, slot + offsetof(ProtobufCBinaryData, data),
                     (const ProtobufCBinaryData *)src, f, ti, fi);
  case PROTOBUF_C_TYPE_MESSAGE: return cap_submsg(c, slot, pbw__ldptr(src), f, ti, fi, depth);
  default: return PBW_OK;
  }
}

static int cap_repeated(img_ctx *c, const char *base, uint64_t moff,
                        const ProtobufCFieldDescriptor *f, uint32_t ti, unsigned fi,
                        unsigned depth) {
  size_t n = pbw__ldsize(base + f->quantifier_offset);
  const char *arr = pbw__ldptr(base + f->offset);
  uint64_t esz = pbw__elt_size(f->type), aoff;
  int rc;
  if (n == 0)
    return PBW_OK; /* a stray pointer with no elements stays NULL */
  if (arr == NULL || n > IMG_MAX_BLOCK / esz)
    return PBW_E_UNSUPPORTED;
  if ((rc = copy_new(c, arr, n * esz, &aoff)) != PBW_OK)
    return rc;
  set_fix(c, moff + f->offset, FX_INTERNAL, aoff);
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING:
  case PROTOBUF_C_TYPE_BYTES:
  case PROTOBUF_C_TYPE_MESSAGE: break;
  default: return PBW_OK;
  }
  for (size_t i = 0; i < n; i++) {
    if ((rc = cap_value(c, aoff + i * esz, arr + i * esz, f, ti, fi, depth)) != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

static int cap_field(img_ctx *c, const char *base, uint64_t moff, uint32_t ti, unsigned fi,
                     unsigned depth) {
  const ProtobufCFieldDescriptor *f = &c->types[ti].d->fields[fi];
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return cap_repeated(c, base, moff, f, ti, fi, depth);
  /* Oneof members share storage: only the live one may be read. */
  if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && pbw__ld32(base + f->quantifier_offset) != f->id)
    return PBW_OK;
  return cap_value(c, moff + f->offset, base + f->offset, f, ti, fi, depth);
}

static int cap_unknown(img_ctx *c, const ProtobufCMessage *m, uint64_t moff) {
  const uint64_t slot = moff + offsetof(ProtobufCMessage, unknown_fields);
  const uint64_t usz = sizeof(ProtobufCMessageUnknownField);
  unsigned n = m->n_unknown_fields;
  uint64_t aoff, doff;
  int rc;
  if (n == 0)
    return PBW_OK;
  if (m->unknown_fields == NULL)
    return PBW_E_UNSUPPORTED;
  if ((rc = copy_new(c, m->unknown_fields, n * usz, &aoff)) != PBW_OK)
    return rc;
  set_fix(c, slot, FX_INTERNAL, aoff);
  for (unsigned i = 0; i < n; i++) {
    const ProtobufCMessageUnknownField *u = &m->unknown_fields[i];
    if (u->data == NULL)
      continue;
    if ((rc = copy_new(c, u->data, u->len, &doff)) != PBW_OK)
      return rc;
    set_fix(c, aoff + i * usz + offsetof(ProtobufCMessageUnknownField, data), FX_INTERNAL, doff);
  }
  return PBW_OK;
}

/* Whether f has a has_, n_ or case member at quantifier_offset. */
static int has_quantifier(const ProtobufCFieldDescriptor *f) {
  if (f->label == PROTOBUF_C_LABEL_REPEATED || (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
    return 1;
  return f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
         f->type != PROTOBUF_C_TYPE_MESSAGE;
}

/* Copy what the descriptor describes, except pointers (set by fix-ups):
 * padding and dead oneof members stay zero, so equal trees give equal
 * images (the trace de-duplicates payloads) and no uninitialised byte of
 * the program's heap reaches the image. */
static void copy_members(const ProtobufCMessageDescriptor *d, const uint8_t *src, uint8_t *dst) {
  const size_t n_unknown = offsetof(ProtobufCMessage, n_unknown_fields);
  memcpy(dst + n_unknown, src + n_unknown, sizeof(unsigned));
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const unsigned q = f->quantifier_offset;
    if (has_quantifier(f))
      memcpy(dst + q, src + q, f->label == PROTOBUF_C_LABEL_REPEATED ? sizeof(size_t) : 4);
    if (f->label == PROTOBUF_C_LABEL_REPEATED || f->type == PROTOBUF_C_TYPE_STRING ||
        f->type == PROTOBUF_C_TYPE_MESSAGE)
      continue;
    if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && pbw__ld32(src + q) != f->id)
      continue;
    if (f->type == PROTOBUF_C_TYPE_BYTES)
      memcpy(dst + f->offset, src + f->offset, sizeof(size_t)); /* len; data is a pointer */
    else
      memcpy(dst + f->offset, src + f->offset, pbw__elt_size(f->type));
  }
}

static int cap_msg(img_ctx *c, const ProtobufCMessage *m, uint32_t ti, unsigned depth,
                   uint64_t *off) {
  const ProtobufCMessageDescriptor *d = c->types[ti].d;
  int rc;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  if ((rc = reserve(c, d->sizeof_message, off)) != PBW_OK)
    return rc;
  if (c->blk != NULL)
    copy_members(d, (const uint8_t *)m, c->blk + *off);
  set_fix(c, *off + offsetof(ProtobufCMessage, descriptor), FX_DESC, ti);
  if ((rc = cap_unknown(c, m, *off)) != PBW_OK)
    return rc;
  for (unsigned i = 0; i < d->n_fields; i++) {
    if ((rc = cap_field(c, (const char *)m, *off, ti, i, depth)) != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The fix-ups in increasing order. The walk records them nearly in order
 * (a message's slots, then its children's, further on), and most trees
 * have a few dozen: an insertion sort does those in a few hundred
 * instructions where qsort took ~4,000 (a quarter of building a 1 KB
 * message's image, and of building the replay database from unpacks). */
static void sort_fixups(uint32_t *fix, uint64_t n) {
  if (n > 64) {
    qsort(fix, n, sizeof *fix, cmp_u32);
    return;
  }
  for (uint64_t i = 1; i < n; i++) {
    uint32_t x = fix[i];
    uint64_t j = i;
    for (; j > 0 && fix[j - 1] > x; j--)
      fix[j] = fix[j - 1];
    fix[j] = x;
  }
}

static uint64_t names_size(const img_ctx *c) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < c->n_types; i++)
    n += strlen(c->types[i].d->name) + 1;
  return round8(n);
}

static void write_types(const img_ctx *c, uint8_t *tab, uint8_t *names) {
  uint32_t at = 0;
  for (uint32_t i = 0; i < c->n_types; i++) {
    const img_type *t = &c->types[i];
    uint8_t *r = tab + (size_t)i * IMG_TYPE_REC;
    uint32_t nl = (uint32_t)strlen(t->d->name);
    pbw__st32(r, t->parent);
    pbw__st32(r + 4, t->field);
    pbw__st32(r + 8, at);
    pbw__st32(r + 12, nl);
    pbw__st64(r + 16, t->d->sizeof_message);
    pbw__st64(r + 24, layout_hash(t->d));
    memcpy(names + at, t->d->name, nl + 1);
    at += nl + 1;
  }
}

/* The header but its checksum, which pbw_image_build writes last. */
static void write_header(uint8_t *img, const img_ctx *c, uint32_t names_len) {
  pbw__st32(img, IMG_MAGIC);
  uint16_t v[2] = {IMG_VERSION, IMG_HDR};
  memcpy(img + 4, v, sizeof v);
  pbw__st32(img + 16, 0);
  pbw__st32(img + 20, c->n_types);
  pbw__st32(img + 24, (uint32_t)c->n_fix);
  pbw__st32(img + 28, names_len);
  pbw__st64(img + 32, c->size);
}

/* Second pass into a zeroed image of the size the first pass measured. */
static int build_into(img_ctx *c, const ProtobufCMessage *m, uint64_t block, uint64_t n_fix,
                      uint8_t *img, size_t len, uint32_t names_len) {
  uint8_t *tab = img + IMG_HDR;
  uint8_t *names = tab + (size_t)c->n_types * IMG_TYPE_REC;
  uint32_t n_types = c->n_types;
  uint64_t off;
  c->fix = (uint32_t *)(names + names_len); /* 8-aligned in a malloc'd image */
  c->blk = (uint8_t *)c->fix + n_fix * 4;
  c->max_size = block;
  c->max_fix = n_fix;
  c->size = 0;
  c->n_fix = 0;
  int rc = cap_msg(c, m, 0, 1, &off);
  if (rc != PBW_OK)
    return rc;
  if (c->overflow || c->size != block || c->n_fix != n_fix || c->n_types != n_types)
    return PBW_E_UNSUPPORTED; /* the tree changed under us */
  sort_fixups(c->fix, n_fix);
  write_types(c, tab, names);
  write_header(img, c, names_len);
  return PBW_OK;
}

static int add_split(uint8_t **img, size_t *len);

int pbw_image_build(const ProtobufCMessage *m, void **img, size_t *len) {
  img_ctx c = {0};
  uint32_t root;
  uint64_t off;
  *img = NULL;
  *len = 0;
  if (m == NULL || m->descriptor == NULL)
    return PBW_E_UNSUPPORTED;
  c.empty = pbw__empty_string();
  int rc = type_of(&c, m->descriptor, PBW_NONE32, PBW_NONE32, &root);
  if (rc == PBW_OK)
    rc = cap_msg(&c, m, root, 1, &off);
  uint64_t names_len = rc == PBW_OK ? names_size(&c) : 0;
  uint64_t total = IMG_HDR + (uint64_t)c.n_types * IMG_TYPE_REC + names_len + c.n_fix * 4 + c.size;
  if (rc == PBW_OK && (c.n_fix > UINT32_MAX || names_len > UINT32_MAX || total > SIZE_MAX))
    rc = PBW_E_UNSUPPORTED;
  uint8_t *buf = rc == PBW_OK ? calloc(1, total) : NULL;
  if (rc == PBW_OK && buf == NULL)
    rc = PBW_E_NOMEM;
  if (rc == PBW_OK)
    rc = build_into(&c, m, c.size, c.n_fix, buf, total, (uint32_t)names_len);
  free(c.types);
  if (rc == PBW_OK)
    rc = add_split(&buf, &total);
  if (rc != PBW_OK) {
    free(buf);
    return rc;
  }
  pbw__st64(buf + 8, pbw__hash64(buf + 16, total - 16));
  *img = buf;
  *len = total;
  return PBW_OK;
}

/* ---- Reading ------------------------------------------------------------- */

typedef struct {
  const uint8_t *img, *types, *names, *fix, *blk;
  size_t len;
  uint32_t n_types, n_fix, names_len;
  uint64_t block_size;
  const uint8_t *split; /* IMG_SPLIT: n_split piece starts, then n_split - 1 targets */
  uint32_t n_split;
  const uint8_t *refs; /* IMG_REFS: n_refs (offset, length) pairs */
  uint32_t n_refs;
  uint64_t stored; /* bytes of the block the image holds (block_size without refs) */
} img_view;

/* Header checks only (no checksum): enough to size and name the image. */
static int view_open(img_view *v, const void *img, size_t len) {
  const uint8_t *p = img;
  uint16_t ver[2];
  if (p == NULL || len < IMG_HDR || pbw__ld32(p) != IMG_MAGIC)
    return PBW_E_BADIMAGE;
  memcpy(ver, p + 4, sizeof ver);
  v->n_types = pbw__ld32(p + 20);
  v->n_fix = pbw__ld32(p + 24);
  v->names_len = pbw__ld32(p + 28);
  v->block_size = pbw__ld64(p + 32);
  uint32_t flags = pbw__ld32(p + 16);
  if (ver[0] != IMG_VERSION || ver[1] != IMG_HDR || (flags & ~(IMG_SPLIT | IMG_REFS)) != 0 ||
      ((flags & IMG_REFS) && !(flags & IMG_SPLIT)) || v->n_types == 0 || v->names_len % 8 != 0 ||
      v->block_size % 8 != 0 || v->block_size > IMG_MAX_BLOCK ||
      v->block_size < sizeof(ProtobufCMessage) || v->n_fix == 0)
    return PBW_E_BADIMAGE;
  uint64_t meta =
      IMG_HDR + (uint64_t)v->n_types * IMG_TYPE_REC + v->names_len + (uint64_t)v->n_fix * 4;
  if (meta > len)
    return PBW_E_BADIMAGE;
  v->img = p;
  v->len = len;
  v->types = p + IMG_HDR;
  v->names = v->types + (size_t)v->n_types * IMG_TYPE_REC;
  v->fix = v->names + v->names_len;
  v->refs = NULL;
  v->n_refs = 0;
  v->stored = v->block_size;
  if (flags & IMG_REFS) { /* the pieces referred to follow those held */
    const uint8_t *r = p + meta;
    uint64_t nr = len - meta >= 8 ? pbw__ld32(r) : 0, sw = nr ? pbw__ld32(r + 4) : 0;
    if (nr == 0 || nr >= v->block_size / 8 || (len - meta - 8) / 16 < nr || sw == 0 ||
        sw * 8 >= v->block_size || sw * 8 < sizeof(ProtobufCMessage))
      return PBW_E_BADIMAGE;
    v->refs = r + 8;
    v->n_refs = (uint32_t)nr;
    v->stored = sw * 8;
    meta += 8 + 16 * nr;
  }
  if (len - meta < v->stored)
    return PBW_E_BADIMAGE;
  uint64_t rest = len - meta - v->stored;
  v->blk = p + meta;
  v->split = NULL;
  v->n_split = 0;
  if (!(flags & IMG_SPLIT))
    return rest == 0 ? PBW_OK : PBW_E_BADIMAGE;
  /* the section's size follows from its counts: one piece per internal
   * pointer and the root, no more pieces than words or fix-ups allow; the
   * root is never referred to */
  const uint8_t *sp = v->blk + v->stored;
  if (rest < 8)
    return PBW_E_BADIMAGE;
  uint64_t n = pbw__ld32(sp), n_int = pbw__ld32(sp + 4);
  if (n == 0 || n_int != n - 1 || n_int > v->n_fix || n > v->block_size / 8 ||
      rest != round8(8 + 4 * n + 4 * n_int) || v->n_refs >= n)
    return PBW_E_BADIMAGE;
  v->split = sp + 8;
  v->n_split = (uint32_t)n;
  return PBW_OK;
}

/* ---- The request's bytes in the tree (IMG_REFS) ----------------------------
 *
 * The program's bytes (req, req_len) are those recorded, compared before
 * the tree is built: the pieces referred to are copied from them. */
typedef struct {
  const uint8_t *p;
  size_t len;
} img_req;

/* Start (bytes) of piece i by the split section; the pieces after it. */
static inline uint64_t split_start(const img_view *v, uint32_t i) {
  return (uint64_t)pbw__ld32(v->split + (size_t)i * 4) * 8;
}

static inline uint64_t split_end(const img_view *v, uint32_t i) {
  return i + 1 < v->n_split ? split_start(v, i + 1) : v->block_size;
}

/* The pieces referred to fit: they start where the image's bytes end, in
 * increasing order inside the block; each one's bytes lie inside the
 * request and fill it but for its padding (8 bytes at most: a string's
 * terminator and padding); all their bytes add up to no more than the
 * request (they are distinct parts of it). So the block a tree needs is
 * bounded by the image and request given, as it is by the image alone
 * without refs: a doctored block size cannot make a build allocate more. */
static int refs_fit(const img_view *v, const img_req *rq) {
  if (v->n_refs == 0)
    return PBW_OK;
  uint32_t first = v->n_split - v->n_refs;
  if (rq == NULL || rq->p == NULL || split_start(v, first) != v->stored)
    return PBW_E_BADIMAGE;
  uint64_t total = 0;
  for (uint32_t k = 0; k < v->n_refs; k++) {
    uint64_t at = split_start(v, first + k), end = split_end(v, first + k);
    uint64_t off = pbw__ld64(v->refs + (size_t)k * 16), n = pbw__ld64(v->refs + (size_t)k * 16 + 8);
    if (end <= at || end > v->block_size || n > end - at || end - at - n > REF_PAD ||
        off > rq->len || n > rq->len - off || n > rq->len - total)
      return PBW_E_BADIMAGE;
    total += n;
  }
  return PBW_OK;
}

/* Piece first + k, referred to, into dst (its size bytes). */
static inline void fill_ref(const img_view *v, const img_req *rq, uint32_t k, uint8_t *dst,
                            uint64_t size) {
  uint64_t off = pbw__ld64(v->refs + (size_t)k * 16), n = pbw__ld64(v->refs + (size_t)k * 16 + 8);
  /* the zeros after the run are its last word's at most (REF_PAD; pieces
   * are whole words): zero that word, then copy the run over it */
  pbw__st64(dst + size - 8, 0);
  memcpy(dst, rq->p + off, n);
}

/* The whole block into dst (refs_fit checked). */
static inline void fill_block(const img_view *v, const img_req *rq, uint8_t *dst) {
  memcpy(dst, v->blk, v->stored);
  for (uint32_t k = 0, i = v->n_split - v->n_refs; k < v->n_refs; k++, i++)
    fill_ref(v, rq, k, dst + split_start(v, i), split_end(v, i) - split_start(v, i));
}

/* Piece i (at bytes at, size bytes) into dst: from the image, or from the
 * request when it is one of the last n_refs. */
static inline void fill_piece(const img_view *v, const img_req *rq, uint32_t i, uint64_t at,
                              uint64_t size, uint8_t *dst) {
  uint32_t first = v->n_split - v->n_refs;
  if (v->n_refs == 0 || i < first)
    memcpy(dst, v->blk + at, size);
  else
    fill_ref(v, rq, i - first, dst, size);
}

static uint32_t type_parent(const img_view *v, uint32_t i) {
  return pbw__ld32(v->types + (size_t)i * IMG_TYPE_REC);
}

static uint32_t type_field(const img_view *v, uint32_t i) {
  return pbw__ld32(v->types + (size_t)i * IMG_TYPE_REC + 4);
}

/* Name of type i, or NULL unless it is NUL-terminated inside names. */
static const char *type_name(const img_view *v, uint32_t i) {
  const uint8_t *r = v->types + (size_t)i * IMG_TYPE_REC;
  uint64_t at = pbw__ld32(r + 8), nl = pbw__ld32(r + 12);
  if (at + nl >= v->names_len || v->names[at + nl] != 0 || memchr(v->names + at, 0, nl) != NULL)
    return NULL;
  return (const char *)v->names + at;
}

static int check_types(const img_view *v) {
  for (uint32_t i = 0; i < v->n_types; i++) {
    uint32_t parent = type_parent(v, i);
    if (type_name(v, i) == NULL)
      return PBW_E_BADIMAGE;
    if (i == 0 ? parent != PBW_NONE32 : parent >= i)
      return PBW_E_BADIMAGE;
  }
  return PBW_OK;
}

/* Follow type i's parent chain down from the root descriptor. NULL when
 * the chain is too long or the descriptors do not have the fields the
 * image names. */
static const ProtobufCMessageDescriptor *
resolve_type(const img_view *v, const ProtobufCMessageDescriptor *root, uint32_t i) {
  uint32_t path[PBW_MAX_DEPTH + 1];
  unsigned k = 0;
  const ProtobufCMessageDescriptor *d = root;
  for (; i != 0; i = type_parent(v, i)) {
    if (k == PBW_MAX_DEPTH + 1)
      return NULL;
    path[k++] = i;
  }
  while (k-- > 0) {
    uint32_t fi = type_field(v, path[k]);
    if (fi >= d->n_fields)
      return NULL;
    const ProtobufCFieldDescriptor *f = &d->fields[fi];
    if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor == NULL)
      return NULL;
    d = f->descriptor;
  }
  return d;
}

static int type_matches(const img_view *v, uint32_t i, const ProtobufCMessageDescriptor *d) {
  const uint8_t *r = v->types + (size_t)i * IMG_TYPE_REC;
  return d != NULL && d->name != NULL && pbw__ld64(r + 16) == d->sizeof_message &&
         strcmp(type_name(v, i), d->name) == 0 && pbw__ld64(r + 24) == layout_hash(d);
}

typedef struct {
  const ProtobufCMessageDescriptor *root;
  uint64_t key;
  uint32_t n;
  const ProtobufCMessageDescriptor *tab[CACHE_TYPES];
} bind_cache;

/* The thread's caches (4.4 KB), CACHE_SLOTS of them, on the shims' heap
 * from its first bind (shim_thread_block: not in static TLS). */
static __thread __attribute__((tls_model("initial-exec"))) void *tl_cache;
static __thread __attribute__((tls_model("initial-exec"))) unsigned tl_next;
static shim_thread_key tl_cache_key;

/* NULL when out of memory: binding then resolves each type every time. */
static bind_cache *tl_caches(void) {
  return tl_cache ? tl_cache
                  : shim_thread_block(&tl_cache_key, &tl_cache, CACHE_SLOTS * sizeof(bind_cache));
}

/* Descriptors of the image's types in this process. */
typedef struct {
  const img_view *v;
  const ProtobufCMessageDescriptor *root;
  const ProtobufCMessageDescriptor *const *tab; /* NULL: resolve each time */
} binder;

static const ProtobufCMessageDescriptor *bound(const binder *b, uint32_t i) {
  return b->tab ? b->tab[i] : resolve_type(b->v, b->root, i);
}

static int bind_types(binder *b, const img_view *v, const ProtobufCMessageDescriptor *root) {
  uint64_t key = pbw__hash64(v->types, (size_t)v->n_types * IMG_TYPE_REC + v->names_len);
  b->v = v;
  b->root = root;
  b->tab = NULL;
  bind_cache *cache = tl_caches();
  for (unsigned s = 0; cache && s < CACHE_SLOTS; s++) {
    const bind_cache *e = &cache[s];
    if (e->root == root && e->key == key && e->n == v->n_types) {
      b->tab = e->tab;
      return PBW_OK;
    }
  }
  int rc = check_types(v); /* a cache hit means this content passed before */
  if (rc != PBW_OK)
    return rc;
  bind_cache *e = cache && v->n_types <= CACHE_TYPES ? &cache[tl_next++ % CACHE_SLOTS] : NULL;
  if (e != NULL)
    e->root = NULL; /* invalid until every entry is verified */
  for (uint32_t i = 0; i < v->n_types; i++) {
    const ProtobufCMessageDescriptor *d = resolve_type(v, root, i);
    if (!type_matches(v, i, d))
      return PBW_E_SCHEMA;
    if (e != NULL)
      e->tab[i] = d;
  }
  if (e != NULL) {
    e->key = key;
    e->n = v->n_types;
    e->root = root;
    b->tab = e->tab;
  }
  return PBW_OK;
}

/* Target of a default-value slot argument, or an error code. */
static int default_target(const binder *b, unsigned kind, uint64_t arg, const void **out) {
  uint64_t ti = arg >> FX_FIELD_BITS, fi = arg & FX_FIELD_MASK;
  if (ti >= b->v->n_types)
    return PBW_E_BADIMAGE;
  const ProtobufCMessageDescriptor *d = bound(b, (uint32_t)ti);
  if (fi >= d->n_fields)
    return PBW_E_SCHEMA;
  const ProtobufCFieldDescriptor *f = &d->fields[fi];
  if (f->default_value == NULL)
    return PBW_E_SCHEMA;
  if (kind == FX_STR_DEF && f->type == PROTOBUF_C_TYPE_STRING) {
    *out = f->default_value;
    return PBW_OK;
  }
  if (kind == FX_BYTES_DEF && f->type == PROTOBUF_C_TYPE_BYTES) {
    *out = ((const ProtobufCBinaryData *)f->default_value)->data;
    return *out != NULL ? PBW_OK : PBW_E_SCHEMA;
  }
  return PBW_E_SCHEMA;
}

/* What the slot value v stands for in this process. */
static int slot_target(const binder *b, uint64_t v, const uint8_t *blk, const void **out) {
  uint64_t arg = v & FX_ARG_MASK;
  unsigned kind = (unsigned)(v >> FX_SHIFT);
  switch (kind) {
  case FX_INTERNAL:
    if (arg >= b->v->block_size || arg % 8 != 0)
      return PBW_E_BADIMAGE;
    *out = blk + arg;
    return PBW_OK;
  case FX_DESC:
    if (arg >= b->v->n_types)
      return PBW_E_BADIMAGE;
    *out = bound(b, (uint32_t)arg);
    return PBW_OK;
  case FX_STR_DEF:
  case FX_BYTES_DEF: return default_target(b, kind, arg, out);
  case FX_EMPTY:
    if (arg != 0)
      return PBW_E_BADIMAGE;
    *out = pbw__empty_string();
    return *out != NULL ? PBW_OK : PBW_E_SCHEMA;
  default: return PBW_E_BADIMAGE;
  }
}

/* A descriptor slot of type ti starts a message: its whole struct must fit
 * in the room (bytes) after the slot. */
static int msg_fits_in(const img_view *v, uint64_t ti, uint64_t room) {
  return ti < v->n_types && pbw__ld64(v->types + (size_t)ti * IMG_TYPE_REC + 16) <= room;
}

/* ... in the bytes of the block the image holds, from word w on. */
static int msg_fits(const img_view *v, uint32_t w, uint64_t ti) {
  return msg_fits_in(v, ti, v->stored - (uint64_t)w * 8);
}

/* Every fix-up names a whole word inside the bytes of the block the image
 * holds, in increasing order, and every slot resolves; the first one binds
 * the root's descriptor. Internal pointers, by far the most common, take
 * the short path. */
static int check_fixups(const binder *b) {
  const img_view *v = b->v;
  const uint64_t words = v->stored / 8;
  const void *target;
  uint32_t prev = 0;
  if (pbw__ld32(v->fix) != 0 || pbw__ld64(v->blk) != ((uint64_t)FX_DESC << FX_SHIFT))
    return PBW_E_BADIMAGE;
  for (uint32_t j = 0; j < v->n_fix; j++) {
    uint32_t w = pbw__ld32(v->fix + (size_t)j * 4);
    if (w >= words || (j > 0 && w <= prev))
      return PBW_E_BADIMAGE;
    prev = w;
    uint64_t slot = pbw__ld64(v->blk + (size_t)w * 8);
    if (slot >> FX_SHIFT == FX_INTERNAL) {
      if ((slot & FX_ARG_MASK) >= v->block_size || slot % 8 != 0)
        return PBW_E_BADIMAGE;
      continue;
    }
    if (slot >> FX_SHIFT == FX_DESC && !msg_fits(v, w, slot & FX_ARG_MASK))
      return PBW_E_BADIMAGE;
    int rc = slot_target(b, slot, v->blk, &target);
    if (rc != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

static void apply_fixups(const binder *b, uint8_t *blk) {
  const img_view *v = b->v;
  const void *target = NULL;
  for (uint32_t j = 0; j < v->n_fix; j++) {
    uint8_t *slot = blk + (size_t)pbw__ld32(v->fix + (size_t)j * 4) * 8;
    uint64_t val = pbw__ld64(slot);
    if (val >> FX_SHIFT == FX_INTERNAL)
      target = blk + (val & FX_ARG_MASK);
    else
      slot_target(b, val, blk, &target); /* cannot fail: checked */
    memcpy(slot, &target, sizeof target);
  }
}

size_t pbw_image_alloc_size(const void *img, size_t len) {
  img_view v;
  return view_open(&v, img, len) == PBW_OK ? (size_t)v.block_size : 0;
}

const char *pbw_image_type_name(const void *img, size_t len) {
  img_view v;
  if (view_open(&v, img, len) != PBW_OK || type_parent(&v, 0) != PBW_NONE32)
    return NULL;
  return type_name(&v, 0);
}

/* Bound type tables that memos point to: immutable once published, kept
 * for the life of the process (one per distinct root and type table, so
 * few), found by a walk of a lock-free list. */
typedef struct bound_tab {
  const ProtobufCMessageDescriptor *root;
  uint64_t key;
  uint32_t n;
  struct bound_tab *next;
  const ProtobufCMessageDescriptor *tab[];
} bound_tab;

static _Atomic(bound_tab *) bound_tabs;

static const ProtobufCMessageDescriptor *const *
publish_tab(const ProtobufCMessageDescriptor *root, uint64_t key, uint32_t n,
            const ProtobufCMessageDescriptor *const *tab) {
  for (bound_tab *t = atomic_load_explicit(&bound_tabs, memory_order_acquire); t; t = t->next)
    if (t->root == root && t->key == key && t->n == n)
      return t->tab;
  bound_tab *t = malloc(sizeof *t + (size_t)n * sizeof t->tab[0]);
  if (t == NULL)
    return NULL;
  t->root = root;
  t->key = key;
  t->n = n;
  memcpy(t->tab, tab, (size_t)n * sizeof t->tab[0]);
  bound_tab *head = atomic_load_explicit(&bound_tabs, memory_order_relaxed);
  do
    t->next = head;
  while (!atomic_compare_exchange_weak_explicit(&bound_tabs, &head, t, memory_order_release,
                                                memory_order_relaxed));
  return t->tab;
}

static int (*block_hook)(void *blk);

void pbw_image_block_hook(int (*fn)(void *blk)) {
  block_hook = fn;
}

/* A tree's one block, offered to the block hook before it is written. */
static uint8_t *alloc_block(ProtobufCAllocator *alloc, size_t size) {
  uint8_t *blk = alloc ? alloc->alloc(alloc->allocator_data, size) : malloc(size);
  if (blk != NULL && block_hook != NULL && block_hook(blk) != 0) {
    if (alloc)
      alloc->free(alloc->allocator_data, blk);
    else
      free(blk);
    return NULL;
  }
  return blk;
}

/* ---- the library's parse-time allocations (pbw_parse_slabs_take) -------- */

#define SCAN_STACK 16 /* members on the library's stack */
#define SCAN_ENTRY 32 /* bytes a member */
#define SCAN_DEPTH 64

void pbw_parse_slabs_free(ProtobufCAllocator *a, pbw_parse_slabs *s) {
  for (int i = 0; i < s->n; i++)
    a->free(a->allocator_data, s->p[i]);
  s->n = 0;
}

/* The slabs that list the members of (p, n), into *s; -1 when a refuses
 * one (those taken are given back). */
static int slabs_of(ProtobufCAllocator *a, const uint8_t *p, size_t n, pbw_parse_slabs *s) {
  const uint8_t *end = p + n;
  uint64_t members = 0;
  pbw__rec r;
  s->n = 0;
  for (; p < end; members++, p = r.next)
    if (!pbw__rec_read(p, end, &r))
      return 0;
  /* slab k holds 16 << k members: room for 16, 48, 112, ... */
  for (uint64_t room = SCAN_STACK, more = 2 * SCAN_STACK;
       members > room && s->n + 1 < PBW_PARSE_SLABS; room += more, more += more) {
    void *slab = a->alloc(a->allocator_data, (size_t)SCAN_ENTRY * more);
    if (slab == NULL) {
      pbw_parse_slabs_free(a, s);
      return -1;
    }
    s->p[s->n++] = slab;
  }
  return 0;
}

/* d's field number id, or NULL: protoc-c lists a message's fields by
 * number, as libprotobuf-c's own lookup and pb_schema.c's check assume. */
static const ProtobufCFieldDescriptor *field_by_id(const ProtobufCMessageDescriptor *d,
                                                   uint64_t id) {
  unsigned n = d->fields != NULL ? d->n_fields : 0, lo = 0, hi = n;
  while (lo < hi) {
    unsigned mid = lo + (hi - lo) / 2;
    if (d->fields[mid].id < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < n && d->fields[lo].id == id ? &d->fields[lo] : NULL;
}

/* The nested messages' slabs of (p, n), of type d, each taken and given
 * back in turn; -1 when a refuses one. */
static int nested_slabs(const ProtobufCMessageDescriptor *d, ProtobufCAllocator *a,
                        const uint8_t *p, size_t n, int depth) {
  const uint8_t *end = p + n;
  pbw__rec r;
  for (; p < end; p = r.next) {
    if (!pbw__rec_read(p, end, &r))
      return 0;
    const ProtobufCFieldDescriptor *f = r.p && depth < SCAN_DEPTH ? field_by_id(d, r.number) : NULL;
    if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor == NULL)
      continue;
    pbw_parse_slabs s;
    if (slabs_of(a, r.p, r.n, &s) != 0)
      return -1;
    int rc = nested_slabs(f->descriptor, a, r.p, r.n, depth + 1);
    pbw_parse_slabs_free(a, &s);
    if (rc != 0)
      return -1;
  }
  return 0;
}

int pbw_parse_slabs_take(const ProtobufCMessageDescriptor *d, ProtobufCAllocator *a,
                         const uint8_t *data, size_t len, pbw_parse_slabs *top) {
  if (slabs_of(a, data, len, top) != 0)
    return -1;
  if (d != NULL && nested_slabs(d, a, data, len, 0) != 0) {
    pbw_parse_slabs_free(a, top);
    return -1;
  }
  return 0;
}

/* The one allocation, the copy and the fix-ups, for a checked image. */
static int build_tree(const img_view *v, const binder *b, const img_req *rq,
                      ProtobufCAllocator *alloc, ProtobufCMessage **out) {
  uint8_t *blk = alloc_block(alloc, v->block_size);
  if (blk == NULL)
    return PBW_E_NOMEM;
  fill_block(v, rq, blk);
  apply_fixups(b, blk);
  *out = (ProtobufCMessage *)blk;
  return PBW_OK;
}

/* pbw_image_trust: images cannot change after they were built here. */
static int images_trusted;

void pbw_image_trust(int on) {
  images_trusted = on != 0;
}

/* The checksum finds images damaged at rest; a caller with a memo, or one
 * that said so (pbw_image_trust), holds images that cannot change (it
 * built them, and maps them read-only), so it is spared hashing every
 * image once. The structural checks, which keep every write inside the
 * block, always run. */
static int open_checked(const void *img, size_t len, const pbw_image_memo *memo, img_view *v) {
  int rc = view_open(v, img, len);
  if (rc == PBW_OK && memo == NULL && !images_trusted &&
      pbw__ld64(v->img + 8) != pbw__hash64(v->img + 16, len - 16))
    rc = PBW_E_BADIMAGE;
  return rc;
}

/* Check img for d (or trust the memo) and bind its types: *v and *b ready
 * for build_tree or build_pieces. */
static int prepare(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                   pbw_image_memo *memo, img_view *v, binder *b) {
  if (memo != NULL && d != NULL &&
      atomic_load_explicit(&memo->root, memory_order_acquire) == d && memo->img == img &&
      memo->len == len) {
    /* checked before and unchanged since (the caller's promise): the
     * header alone places the parts */
    if (view_open(v, img, len) != PBW_OK)
      return PBW_E_BADIMAGE;
    *b = (binder){v, d, memo->tab};
    return PBW_OK;
  }
  int rc = open_checked(img, len, memo, v);
  if (rc == PBW_OK)
    rc = d != NULL ? bind_types(b, v, d) : PBW_E_SCHEMA;
  if (rc == PBW_OK)
    rc = check_fixups(b);
  if (rc != PBW_OK)
    return rc;
  if (memo != NULL && b->tab != NULL) {
    uint64_t key = pbw__hash64(v->types, (size_t)v->n_types * IMG_TYPE_REC + v->names_len);
    const ProtobufCMessageDescriptor *const *tab = publish_tab(d, key, v->n_types, b->tab);
    /* published once, by the thread that claims the empty memo: threads
     * that checked the same image at the same time do not write it again
     * under a reader that has already seen it (a claimed memo matches no
     * descriptor until its fields are in) */
    static const char claimed;
    const ProtobufCMessageDescriptor *empty = NULL;
    if (tab != NULL &&
        atomic_compare_exchange_strong(&memo->root, &empty,
                                       (const ProtobufCMessageDescriptor *)(const void *)&claimed)) {
      memo->img = img;
      memo->len = len;
      memo->tab = tab;
      atomic_store_explicit(&memo->root, d, memory_order_release);
    }
  }
  return PBW_OK;
}

int pbw_image_materialise_memo(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                               ProtobufCAllocator *alloc, ProtobufCMessage **out,
                               pbw_image_memo *memo) {
  /* with a memo, the kept split plan (below) builds the block without the
   * header parsed or the outside pointers resolved again */
  return pbw_image_materialise_req(img, len, NULL, 0, d, alloc, out, memo, 0);
}

/* ---- Trees as libprotobuf-c allocates them -------------------------------
 *
 * The block holds one piece per allocation unpack made (pbw_image_build
 * copies each at its own offset, 8-aligned): the root message at 0, and
 * each sub-message, string, bytes datum, repeated array, unknown-field array
 * and datum at the offset its one internal pointer names. Allocating each
 * piece apart gives a tree the real free_unpacked frees piece by piece, at
 * the cost the program pays natively. A piece runs to the next piece's
 * start (it keeps its padding). Two pointers naming one offset would mean a
 * zero-length piece, which the builder never makes from a real tree
 * (libprotobuf-c leaves empty bytes NULL): such an image is refused. */

/* How an image splits: pieces (start, size) by increasing start, and its
 * fix-ups, the internal pointers first (n_int of them: each names the
 * piece its target starts), then the others: for each, the piece its slot
 * lies in and the slot's offset there. Built once per image and kept in its
 * memo when there is one; a kept plan also holds the image's view (its
 * header parsed) and what every other fix-up resolves to in this process
 * for the root descriptor it was made with (descriptors, defaults, the
 * empty string), which slot_target would otherwise work out again on every
 * unpack (~5 ns of a 1 KB unpack's ~100). */
typedef struct {
  uint32_t piece;  /* the piece the slot lies in */
  uint32_t target; /* an internal pointer's: the piece it names */
  uint64_t rel;    /* the slot's offset in its piece */
} split_fix;

typedef struct {
  const uint8_t *img;                     /* the image it was made for */
  const ProtobufCMessageDescriptor *root; /* with ext: the descriptor bound */
  img_view view;                          /* with ext: the image's, checked */
  uint32_t n, n_fix, n_int;
  uint64_t *start, *size;
  split_fix *fix;
  const void **ext; /* NULL, or per fix-up from n_int on, its target */
  /* a kept plan of an image with refs (IMG_REFS) of up to PLAN_BLOCK_MAX
   * bytes: room for the whole block, filled from the request once, which
   * its view then points to, so that a request served again and again is
   * copied from one place, as before refs (see materialise_kept). Larger
   * blocks keep their refs: a second copy costs them little, and a private
   * copy of each would cost the process what the database's shared pages
   * hold. refs_len: the request length the refs were checked for. */
  uint8_t *block;
  uint64_t refs_len;
} split_plan;

#define PLAN_BLOCK_MAX 4096

/* Piece starts as a bitmap over the block's words, with the count of
 * starts before each 64-word group: the piece holding a word is then a rank
 * query, and the starts come out sorted, in time linear in the fix-ups
 * (sorting the starts and searching them per fix-up cost ~2,000
 * instructions per unpack of a 25-piece tree). */
typedef struct {
  uint64_t *bits;
  uint32_t *before; /* starts in the groups before this one */
  size_t groups;
} start_map;

/* Index of the piece holding word w: starts at or before w, less one. */
static inline uint32_t piece_at(const start_map *m, uint64_t w) {
  uint64_t g = w >> 6, mask = (2ull << (w & 63)) - 1; /* bits 0..w&63 */
  return m->before[g] + (uint32_t)__builtin_popcountll(m->bits[g] & mask) - 1;
}

/* Where split plans are allocated: a memo keeps its plan for the life of
 * the process, in memory the program's leak checker does not scan (the
 * replay database), so a plan from the program's heap was reported leaked
 * (an ASan-built program exited 1 under replay). The replay shim gives its
 * own heap (pbw_image_allocator). */
static void *(*plan_alloc)(size_t) = malloc;
static void (*plan_free)(void *) = free;

void pbw_image_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *)) {
  plan_alloc = alloc_fn;
  plan_free = free_fn;
}

/* The plan and its arrays in one piece of memory: buf if it has room
 * (cap bytes), else malloc'd (*heap = 1). */
static inline __attribute__((always_inline)) int plan_split_body(const img_view *v, void *buf,
                                                                 size_t cap, int want_ext,
                                                                 split_plan **out, int *heap) {
  uint64_t words = v->block_size / 8;
  start_map m = {.groups = (size_t)(words + 63) / 64};
  uint64_t st_bits[32];
  uint32_t st_before[32];
  int map_heap = m.groups > 32;
  m.bits = map_heap ? calloc(m.groups, sizeof *m.bits) : st_bits;
  m.before = map_heap ? malloc(m.groups * sizeof *m.before) : st_before;
  if (m.bits == NULL || m.before == NULL) {
    if (map_heap) {
      free(m.bits);
      free(m.before);
    }
    return PBW_E_NOMEM;
  }
  if (!map_heap)
    memset(m.bits, 0, m.groups * sizeof *m.bits);
  /* the root at 0, and every internal pointer's target (checked: inside
   * the block, 8-aligned); two pointers naming one offset are refused */
  int rc = PBW_OK;
  uint32_t n = 1;
  m.bits[0] = 1;
  for (uint32_t j = 0; j < v->n_fix && rc == PBW_OK; j++) {
    uint64_t val = pbw__ld64(v->blk + (size_t)pbw__ld32(v->fix + (size_t)j * 4) * 8);
    if (val >> FX_SHIFT != FX_INTERNAL)
      continue;
    uint64_t w = (val & FX_ARG_MASK) / 8, bit = 1ull << (w & 63);
    if (m.bits[w >> 6] & bit)
      rc = PBW_E_UNSUPPORTED;
    m.bits[w >> 6] |= bit;
    n++;
  }
  split_plan *sp = NULL;
  uint32_t n_int = n - 1, n_ext = v->n_fix - n_int;
  int own_block = want_ext && v->n_refs != 0 && v->block_size <= PLAN_BLOCK_MAX;
  size_t bytes = sizeof(split_plan) + (size_t)n * 16 + (size_t)v->n_fix * sizeof(split_fix) +
                 (want_ext ? (size_t)n_ext * sizeof(void *) : 0) +
                 (own_block ? (size_t)v->block_size : 0);
  *heap = bytes > cap;
  if (rc == PBW_OK && (sp = *heap ? plan_alloc(bytes) : buf) == NULL)
    rc = PBW_E_NOMEM;
  if (rc == PBW_OK) {
    sp->img = v->img;
    sp->root = NULL;
    if (want_ext) /* only a kept plan builds trees without the image parsed again */
      sp->view = *v;
    sp->n = n;
    sp->n_fix = v->n_fix;
    sp->n_int = n_int;
    sp->start = (uint64_t *)(sp + 1);
    sp->size = sp->start + n;
    sp->fix = (split_fix *)(sp->size + n);
    sp->ext = want_ext ? (const void **)(sp->fix + v->n_fix) : NULL;
    sp->block = own_block ? (uint8_t *)(sp->ext + n_ext) : NULL;
    sp->refs_len = 0;
    uint32_t k = 0;
    for (size_t g = 0; g < m.groups; g++) {
      m.before[g] = k;
      for (uint64_t x = m.bits[g]; x; x &= x - 1)
        sp->start[k++] = ((uint64_t)g * 64 + (uint64_t)__builtin_ctzll(x)) * 8;
    }
    for (uint32_t i = 0; i < n; i++)
      sp->size[i] = (i + 1 < n ? sp->start[i + 1] : v->block_size) - sp->start[i];
    /* the internal pointers from the front, the others after them */
    uint32_t fi = 0, fe = n_int;
    for (uint32_t j = 0; j < v->n_fix; j++) {
      uint64_t off = (uint64_t)pbw__ld32(v->fix + (size_t)j * 4) * 8;
      uint64_t val = pbw__ld64(v->blk + off);
      int internal = val >> FX_SHIFT == FX_INTERNAL;
      split_fix *f = &sp->fix[internal ? fi++ : fe++];
      f->piece = piece_at(&m, off / 8);
      f->rel = off - sp->start[f->piece];
      f->target = internal ? piece_at(&m, (val & FX_ARG_MASK) / 8) : UINT32_MAX;
      /* a message's struct fits in its piece, not only in the block: a
       * pointer into a message would otherwise cut its allocation short */
      if (val >> FX_SHIFT == FX_DESC &&
          !msg_fits_in(v, val & FX_ARG_MASK, sp->size[f->piece] - f->rel))
        rc = PBW_E_BADIMAGE;
    }
    /* the pieces referred to (IMG_REFS) are the split section's last ones,
     * which refs_fit checked: the plan's must be those */
    if (v->n_refs != 0 && n != v->n_split)
      rc = PBW_E_BADIMAGE;
    for (uint32_t i = n - v->n_refs; rc == PBW_OK && v->n_refs != 0 && i < n; i++)
      if (sp->start[i] != split_start(v, i))
        rc = PBW_E_BADIMAGE;
    if (rc == PBW_OK)
      *out = sp;
    else if (*heap)
      plan_free(sp);
  }
  if (map_heap) {
    free(m.bits);
    free(m.before);
  }
  return rc;
}

/* plan_split runs for every unpack of an image seen once: a 25-piece tree
 * asks piece_at ~60 times, and without the POPCNT instruction (not in the
 * x86-64 baseline Debian builds for) each popcount is a ~20-instruction
 * libgcc call, 10% of the unpack. So the body is compiled twice and the
 * CPU picks, checked once (not with an ifunc: its resolver would run before
 * a sanitizer's runtime is up). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("popcnt"))) static int plan_split_popcnt(const img_view *v, void *buf,
                                                               size_t cap, int want_ext,
                                                               split_plan **out, int *heap) {
  return plan_split_body(v, buf, cap, want_ext, out, heap);
}
#endif

static int plan_split(const img_view *v, void *buf, size_t cap, int want_ext, split_plan **out,
                      int *heap) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (pbw__have_popcnt())
    return plan_split_popcnt(v, buf, cap, want_ext, out, heap);
#endif
  return plan_split_body(v, buf, cap, want_ext, out, heap);
}

/* The image offset of fix-up f's slot. */
static inline uint64_t fix_off(const split_plan *sp, const split_fix *f) {
  return sp->start[f->piece] + f->rel;
}

/* Resolve a kept plan's other fix-ups once, for b's root descriptor
 * (check_fixups has checked that each one resolves). */
static void plan_bind(split_plan *sp, const img_view *v, const binder *b) {
  for (uint32_t j = sp->n_int; j < sp->n_fix; j++) {
    const void **t = &sp->ext[j - sp->n_int];
    *t = NULL;
    slot_target(b, pbw__ld64(v->blk + fix_off(sp, &sp->fix[j])), v->blk, t);
  }
  sp->root = b->root;
}

#define PIECES_ON_STACK 64

/* The first n pieces of a build that failed, freed as they were allocated. */
static void free_pieces(uint8_t **base, uint32_t n, ProtobufCAllocator *alloc) {
  for (uint32_t i = 0; i < n; i++) {
    if (alloc)
      alloc->free(alloc->allocator_data, base[i]);
    else
      free(base[i]);
  }
}

/* Copy a piece of n bytes. Most pieces are a message's struct, a string or
 * an array of pointers, a few dozen bytes: copied without a call. */
static inline void copy_piece(uint8_t *d, const uint8_t *s, size_t n) {
  if (n <= 64)
    pbw__copy_small(d, s, n);
  else
    memcpy(d, s, n);
}

static int build_pieces(const img_view *v, const binder *b, const split_plan *sp, const img_req *rq,
                        ProtobufCAllocator *alloc, ProtobufCMessage **out) {
  uint8_t *st_base[PIECES_ON_STACK];
  uint8_t **base = sp->n > PIECES_ON_STACK ? malloc((size_t)sp->n * sizeof *base) : st_base;
  if (base == NULL)
    return PBW_E_NOMEM;
  uint32_t made = 0, held = sp->n - v->n_refs; /* the pieces the image holds come first */
  if (alloc == NULL) {
    for (; made < held; made++) {
      if ((base[made] = malloc(sp->size[made])) == NULL)
        break;
      copy_piece(base[made], v->blk + sp->start[made], sp->size[made]);
    }
  } else {
    for (; made < held; made++) {
      if ((base[made] = alloc->alloc(alloc->allocator_data, sp->size[made])) == NULL)
        break;
      copy_piece(base[made], v->blk + sp->start[made], sp->size[made]);
    }
  }
  if (made == held) /* then those referred to (the plan's pieces are the split's) */
    for (; made < sp->n; made++) {
      uint8_t *p =
          alloc ? alloc->alloc(alloc->allocator_data, sp->size[made]) : malloc(sp->size[made]);
      if ((base[made] = p) == NULL)
        break;
      fill_ref(v, rq, made - held, p, sp->size[made]);
    }
  if (made < sp->n) {
    free_pieces(base, made, alloc);
    if (base != st_base)
      free(base);
    return PBW_E_NOMEM;
  }
  const split_fix *f = sp->fix;
  for (uint32_t j = 0; j < sp->n_int; j++, f++)
    memcpy(base[f->piece] + f->rel, &base[f->target], sizeof(void *));
  if (sp->ext != NULL) {
    for (uint32_t j = 0; j < sp->n_fix - sp->n_int; j++, f++)
      memcpy(base[f->piece] + f->rel, &sp->ext[j], sizeof(void *));
  } else {
    for (uint32_t j = sp->n_int; j < sp->n_fix; j++, f++) {
      const void *target = NULL;
      slot_target(b, pbw__ld64(v->blk + fix_off(sp, f)), v->blk, &target); /* checked */
      memcpy(base[f->piece] + f->rel, &target, sizeof target);
    }
  }
  *out = (ProtobufCMessage *)base[0];
  if (base != st_base)
    free(base);
  return PBW_OK;
}

/* The split section (IMG_SPLIT) for the image img[0, *len), which
 * pbw_image_build just made: the pieces plan_split finds, worked out once
 * here instead of in every process that unpacks a request seen for the
 * first time (~3,000 instructions of the ~10,000 a pbtest unpack took, and
 * the check of every fix-up, which build_split does as it goes). An image
 * that does not split is left as it is. */
static int add_split(uint8_t **img, size_t *len) {
  img_view v;
  split_plan *sp = NULL;
  int heap = 0;
  int rc = view_open(&v, *img, *len);
  if (rc == PBW_OK)
    rc = plan_split(&v, NULL, 0, 0, &sp, &heap);
  if (rc == PBW_E_UNSUPPORTED)
    return PBW_OK; /* two pointers name one piece: no split */
  if (rc != PBW_OK)
    return rc;
  size_t extra = (size_t)round8(8 + 4 * (uint64_t)sp->n + 4 * (uint64_t)sp->n_int);
  uint8_t *p = realloc(*img, *len + extra);
  if (p == NULL) {
    plan_free(sp);
    return PBW_E_NOMEM;
  }
  uint8_t *w = p + *len;
  memset(w, 0, extra);
  pbw__st32(w, sp->n);
  pbw__st32(w + 4, sp->n_int);
  for (uint32_t i = 0; i < sp->n; i++)
    pbw__st32(w + 8 + (size_t)i * 4, (uint32_t)(sp->start[i] / 8));
  for (uint32_t j = 0; j < sp->n_int; j++) /* internal pointers, in fix-up order */
    pbw__st32(w + 8 + (size_t)sp->n * 4 + (size_t)j * 4, sp->fix[j].target);
  plan_free(sp);
  *len += extra;
  pbw__st32(p + 16, IMG_SPLIT); /* the caller sums the image up */
  *img = p;
  return PBW_OK;
}

/* A tree piece by piece from an image's split section, checking as it
 * builds what check_fixups and plan_split would: fix-ups in order inside
 * the block, each in its piece; every internal pointer names the start of
 * a piece no other pointer names (the root's neither), so the program's
 * free_unpacked frees each piece once; a message's struct fits in its
 * piece; every other slot resolves. On any failure nothing is left
 * allocated. */
static inline __attribute__((always_inline)) int
build_split_body(const img_view *v, const binder *b, const img_req *rq, ProtobufCAllocator *alloc,
                 ProtobufCMessage **out, split_plan *rec) {
  const uint32_t n = v->n_split, words = (uint32_t)(v->block_size / 8),
                 held = (uint32_t)(v->stored / 8); /* fix-ups lie in the image's bytes */
  const uint8_t *starts = v->split, *targets = v->split + (size_t)n * 4;
  if (pbw__ld32(v->fix) != 0 || pbw__ld64(v->blk) != ((uint64_t)FX_DESC << FX_SHIFT) ||
      pbw__ld32(starts) != 0)
    return PBW_E_BADIMAGE;
  for (uint32_t i = 1; i < n; i++)
    if (pbw__ld32(starts + (size_t)i * 4) <= pbw__ld32(starts + (size_t)(i - 1) * 4) ||
        pbw__ld32(starts + (size_t)i * 4) >= words)
      return PBW_E_BADIMAGE;
  uint8_t *st_base[PIECES_ON_STACK];
  uint64_t st_seen[PIECES_ON_STACK / 64];
  int big = n > PIECES_ON_STACK;
  uint8_t **base = big ? malloc((size_t)n * sizeof *base) : st_base;
  uint64_t *seen = big ? calloc((n + 63) / 64, sizeof *seen) : st_seen;
  if (base == NULL || seen == NULL) {
    if (big) {
      free(base);
      free(seen);
    }
    return PBW_E_NOMEM;
  }
  if (!big)
    memset(st_seen, 0, sizeof st_seen);
  int rc = PBW_OK;
  uint32_t made = 0;
  for (; made < n; made++) {
    uint64_t at = (uint64_t)pbw__ld32(starts + (size_t)made * 4) * 8;
    uint64_t end =
        made + 1 < n ? (uint64_t)pbw__ld32(starts + (size_t)(made + 1) * 4) * 8 : v->block_size;
    base[made] = alloc ? alloc->alloc(alloc->allocator_data, end - at) : malloc(end - at);
    if (base[made] == NULL) {
      rc = PBW_E_NOMEM;
      break;
    }
    fill_piece(v, rq, made, at, end - at, base[made]);
    if (rec != NULL) {
      rec->start[made] = at;
      rec->size[made] = end - at;
    }
  }
  uint32_t p = 0, next = n > 1 ? pbw__ld32(starts + 4) : words, k = 0, prev = 0, e = n - 1;
  for (uint32_t j = 0; j < v->n_fix && rc == PBW_OK; j++) {
    uint32_t w = pbw__ld32(v->fix + (size_t)j * 4);
    if (w >= held || (j > 0 && w <= prev)) {
      rc = PBW_E_BADIMAGE;
      break;
    }
    prev = w;
    while (w >= next) { /* the piece holding word w: pieces and fix-ups both rise */
      p++;
      next = p + 1 < n ? pbw__ld32(starts + (size_t)(p + 1) * 4) : words;
    }
    uint32_t first = pbw__ld32(starts + (size_t)p * 4);
    uint64_t val = pbw__ld64(v->blk + (size_t)w * 8);
    const void *target = NULL;
    if (val >> FX_SHIFT == FX_INTERNAL) {
      uint32_t t = k < n - 1 ? pbw__ld32(targets + (size_t)k * 4) : 0;
      k++;
      if (t == 0 || t >= n || (seen[t / 64] >> (t % 64) & 1) ||
          (val & FX_ARG_MASK) != (uint64_t)pbw__ld32(starts + (size_t)t * 4) * 8) {
        rc = PBW_E_BADIMAGE;
        break;
      }
      seen[t / 64] |= 1ull << (t % 64);
      target = base[t];
      if (rec != NULL)
        rec->fix[k - 1] = (split_fix){p, t, (uint64_t)(w - first) * 8};
    } else {
      if (val >> FX_SHIFT == FX_DESC && /* the message's struct fits in its piece */
          !msg_fits_in(v, val & FX_ARG_MASK, (uint64_t)(next - w) * 8)) {
        rc = PBW_E_BADIMAGE;
        break;
      }
      if ((rc = slot_target(b, val, v->blk, &target)) != PBW_OK)
        break;
      if (rec != NULL && e < v->n_fix) {
        rec->ext[e - (n - 1)] = target;
        rec->fix[e++] = (split_fix){p, UINT32_MAX, (uint64_t)(w - first) * 8};
      }
    }
    memcpy(base[p] + (size_t)(w - first) * 8, &target, sizeof target);
  }
  if (rc == PBW_OK && k != n - 1)
    rc = PBW_E_BADIMAGE;
  if (rc == PBW_OK) {
    *out = (ProtobufCMessage *)base[0];
  } else {
    free_pieces(base, made, alloc);
  }
  if (big) {
    free(base);
    free(seen);
  }
  return rc;
}

/* build_split_body as a build on its own, and (rec) as one that records
 * what it found into a shape's plan: compiled apart, so that the common
 * build pays nothing for the recording (pbtest: ~3 instructions a piece
 * and a fix-up). */
static int build_split(const img_view *v, const binder *b, const img_req *rq,
                       ProtobufCAllocator *alloc, ProtobufCMessage **out) {
  return build_split_body(v, b, rq, alloc, out, NULL);
}

static __attribute__((noinline)) int build_split_rec(const img_view *v, const binder *b,
                                                     const img_req *rq, ProtobufCAllocator *alloc,
                                                     ProtobufCMessage **out, split_plan *rec) {
  return build_split_body(v, b, rq, alloc, out, rec);
}

/* The block from a kept plan (one that split the image into pieces): the
 * block copied whole, its internal pointers set to their pieces' starts in
 * the copy, the others to what the plan resolved them to. */
static int build_block(const split_plan *sp, const img_req *rq, ProtobufCAllocator *alloc,
                       ProtobufCMessage **out) {
  uint8_t *blk = alloc_block(alloc, sp->view.block_size);
  if (blk == NULL)
    return PBW_E_NOMEM;
  fill_block(&sp->view, rq, blk);
  const split_fix *f = sp->fix;
  for (uint32_t j = 0; j < sp->n_int; j++, f++) {
    uint8_t *target = blk + sp->start[f->target];
    memcpy(blk + fix_off(sp, f), &target, sizeof target);
  }
  for (uint32_t j = 0; j < sp->n_fix - sp->n_int; j++, f++)
    memcpy(blk + fix_off(sp, f), &sp->ext[j], sizeof(void *));
  *out = (ProtobufCMessage *)blk;
  return PBW_OK;
}

/* ---- Shapes: a new image built from the plan of one alike ---------------
 *
 * A request seen for the first time is built by build_split, which checks
 * every piece and fix-up as it goes and resolves each outside pointer: of
 * a new 1 KB unpack's ~3,900 instructions (pbbench unpacknew, 9 pieces, 14
 * fix-ups, callgrind), ~1,900. Yet many such images have the shape of one
 * built before: the same types, pieces and fix-ups, holding other values
 * (rpc: 446 shapes in 4,000 new requests; protogen: 2,536 in 11,201). An
 * image's shape is its header's counts, its type table and names, its
 * fix-ups' places (its bytes from 16 up to its refs' places), its split
 * section and the values of its fix-up slots. Every check build_split
 * makes, and every target it resolves, follows from these, the descriptor
 * and the process: so what one build of a shape found (the pieces, the
 * fix-ups and their targets: a split plan, recorded as build_split goes)
 * builds every later image of the shape, once its shape has been compared
 * whole. Each image's refs are its own (refs_fit), and its data is copied
 * from it.
 *
 * Shapes are kept process-wide, at most SHAPE_SLOTS, immutable once
 * published and never freed (keys of up to SHAPE_KEY_MAX bytes). A shape
 * is recorded the second time its hash is seen, so that a program whose
 * every tree has a shape of its own (pbtest, random lengths: 1,449 shapes
 * in 2,000) pays the hash and a probe a call, not a copy of the shape. A
 * library unloaded (pbw_image_types_changed) retires every shape made
 * before: descriptors, defaults or the empty string may have gone with
 * it. */
#define SHAPE_SLOTS 256 /* a power of two */
#define SHAPE_PROBE 4
#define SHAPE_KEY_MAX 4096

typedef struct {
  uint64_t h, gen;
  const ProtobufCMessageDescriptor *root;
  size_t head_len, split_len; /* key: those bytes of the image, then the fix-up slots' values */
  uint32_t n_fix;
  split_plan *sp; /* in the same allocation, after the key */
  const uint8_t *key;
} img_shape;

static _Atomic(img_shape *) shapes[SHAPE_SLOTS];
/* Each slot's shape's hash, stored once it is published: a probe reads a
 * shape only where its hash agrees. A program whose every tree has a shape
 * of its own (pbtest) passed four shapes a call, each a line nothing had
 * read since it was made: a third of its unpacks' rebuild time (perf). A
 * slot whose hash is not stored yet is passed by; one whose shape differs
 * (never: published shapes stay) is told apart by the compare. */
static _Atomic uint64_t shapes_h[SHAPE_SLOTS];
static _Atomic uint64_t shapes_seen[SHAPE_SLOTS]; /* hashes seen once */
static _Atomic uint64_t shape_gen;
__thread __attribute__((tls_model("initial-exec"))) unsigned long pbw__shape_builds;
int pbw__shapes_off;

void pbw_image_types_changed(void) {
  atomic_fetch_add_explicit(&shape_gen, 1, memory_order_relaxed);
}

/* The image's shape bytes but for its fix-up slots' values: [16, head
 * end) and the split section. */
static inline size_t shape_head(const img_view *v) {
  const uint8_t *end = v->refs ? v->refs : v->fix + (size_t)v->n_fix * 4;
  return (size_t)(end - (v->img + 16));
}

static inline const uint8_t *shape_split(const img_view *v, size_t *len) {
  const uint8_t *p = v->blk + v->stored;
  *len = v->len - (size_t)(p - v->img);
  return p;
}

static inline uint64_t slot_value(const img_view *v, uint32_t j) {
  return pbw__ld64(v->blk + (size_t)pbw__ld32(v->fix + (size_t)j * 4) * 8);
}

/* Whether v has shape s (whose hash, root and generation matched). Its
 * slots are read once its head is s's: their places, which were checked
 * to lie in the block when s was recorded. */
static int shape_is(const img_shape *s, const img_view *v) {
  size_t head = shape_head(v), split_len;
  const uint8_t *split = shape_split(v, &split_len);
  if (s->head_len != head || s->split_len != split_len || s->n_fix != v->n_fix ||
      memcmp(s->key, v->img + 16, head) != 0 || memcmp(s->key + head, split, split_len) != 0)
    return 0;
  const uint8_t *vals = s->key + head + split_len;
  for (uint32_t j = 0; j < v->n_fix; j++)
    if (slot_value(v, j) != pbw__ld64(vals + (size_t)j * 8))
      return 0;
  return 1;
}

/* The hash of v's shape for root d, or 0 when the shape is too large to
 * keep. Of its counts and sizes only: hashing its split section too cost
 * pbtest, whose every tree has a shape of its own, ~170 instructions a
 * call; shapes alike in these are told apart by the compare. */
static uint64_t shape_hash(const img_view *v, const ProtobufCMessageDescriptor *d, uint64_t gen) {
  size_t head = shape_head(v), split_len;
  shape_split(v, &split_len);
  if (head + split_len + (size_t)v->n_fix * 8 > SHAPE_KEY_MAX)
    return 0;
  uint64_t h = (uint64_t)(uintptr_t)d ^ gen << 48;
  h = (h ^ v->block_size) * 0x9E3779B97F4A7C15ull;
  h = (h ^ v->stored ^ (uint64_t)v->n_split << 32) * 0xC2B2AE3D27D4EB4Full;
  h = (h ^ v->n_fix ^ (uint64_t)v->n_types << 32 ^ head << 40) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return h ? h : 1;
}

/* A tree of the image v (view_open checked it; its split section is not
 * checked yet) seen for the first time, from the plan of its shape when
 * one is published (*done = 1, the result). Else *done = 0, and *rec is a
 * shape to record when v's shape is seen the second time and there is a
 * slot for it (else NULL): build_split then fills its plan, and
 * shape_publish publishes it. */
static int shape_build(const img_view *v, const ProtobufCMessageDescriptor *d, const img_req *rq,
                       ProtobufCAllocator *alloc, ProtobufCMessage **out, int *done,
                       img_shape **rec) {
  *done = 0;
  *rec = NULL;
  if (pbw__shapes_off || d == NULL)
    return PBW_OK;
  uint64_t gen = atomic_load_explicit(&shape_gen, memory_order_relaxed);
  uint64_t h = shape_hash(v, d, gen);
  if (h == 0)
    return PBW_OK;
  int room = 0;
  for (unsigned k = 0; k < SHAPE_PROBE; k++) {
    const img_shape *s =
        atomic_load_explicit(&shapes[(h + k) & (SHAPE_SLOTS - 1)], memory_order_acquire);
    if (s == NULL) {
      room = 1;
      break;
    }
    if (atomic_load_explicit(&shapes_h[(h + k) & (SHAPE_SLOTS - 1)], memory_order_relaxed) != h)
      continue;
    if (s->h == h && s->root == d && s->gen == gen && shape_is(s, v)) {
      *done = 1;
      pbw__shape_builds++;
      int rc = refs_fit(v, rq);
      return rc == PBW_OK ? build_pieces(v, NULL, s->sp, rq, alloc, out) : rc;
    }
  }
  _Atomic uint64_t *seen = &shapes_seen[h & (SHAPE_SLOTS - 1)];
  if (!room || atomic_load_explicit(seen, memory_order_relaxed) != h) {
    atomic_store_explicit(seen, h, memory_order_relaxed);
    return PBW_OK;
  }
  /* the second sighting: the shape, its key, and room for the plan that
   * build_split fills (n pieces, n - 1 of the fix-ups internal) */
  size_t head = shape_head(v), split_len;
  const uint8_t *split = shape_split(v, &split_len);
  size_t key_len = head + split_len + (size_t)v->n_fix * 8, n = v->n_split;
  if (n - 1 > v->n_fix)
    return PBW_OK; /* build_split refuses it */
  size_t n_ext = v->n_fix - (n - 1);
  size_t bytes = sizeof(img_shape) + ((key_len + 7) & ~(size_t)7) + sizeof(split_plan) + n * 16 +
                 (size_t)v->n_fix * sizeof(split_fix) + n_ext * sizeof(void *);
  img_shape *s = plan_alloc(bytes);
  if (s == NULL)
    return PBW_OK;
  uint8_t *key = (uint8_t *)(s + 1);
  memcpy(key, v->img + 16, head);
  memcpy(key + head, split, split_len); /* the slots' values once build_split checked them */
  split_plan *sp = (split_plan *)(key + ((key_len + 7) & ~(size_t)7));
  memset(sp, 0, sizeof *sp); /* no image: a shape's plan builds with the image given */
  sp->root = d;
  sp->n = (uint32_t)n;
  sp->n_fix = v->n_fix;
  sp->n_int = (uint32_t)(n - 1);
  sp->start = (uint64_t *)(sp + 1);
  sp->size = sp->start + n;
  sp->fix = (split_fix *)(sp->size + n);
  sp->ext = (const void **)(sp->fix + v->n_fix);
  *s = (img_shape){.h = h,
                   .gen = gen,
                   .root = d,
                   .head_len = head,
                   .split_len = split_len,
                   .n_fix = v->n_fix,
                   .sp = sp,
                   .key = key};
  *rec = s;
  return PBW_OK;
}

/* Shape s of image v, its plan filled by a build that gave rc: published
 * when the build succeeded (its fix-ups lie in the block) and one of its
 * slots is still free, else freed. */
static void shape_publish(img_shape *s, const img_view *v, int rc) {
  uint8_t *vals = (uint8_t *)(s + 1) + s->head_len + s->split_len;
  for (uint32_t j = 0; rc == PBW_OK && j < v->n_fix; j++)
    pbw__st64(vals + (size_t)j * 8, slot_value(v, j));
  for (unsigned k = 0; rc == PBW_OK && k < SHAPE_PROBE; k++) {
    img_shape *expect = NULL;
    if (atomic_compare_exchange_strong(&shapes[(s->h + k) & (SHAPE_SLOTS - 1)], &expect, s)) {
      atomic_store_explicit(&shapes_h[(s->h + k) & (SHAPE_SLOTS - 1)], s->h, memory_order_relaxed);
      return; /* the table's now */
    }
  }
  plan_free(s);
}

/* A tree from memo's kept split plan, piece by piece or (pieces = 0) as one
 * block; the plan is made and kept on first use. A block without a kept
 * plan (none can be kept, or the image does not split) is built from the
 * image checked here (build_tree), so its header is read once. rq: the
 * request, for an image that refers to it (IMG_REFS). */
static int materialise_kept(const void *img, size_t len, const img_req *rq,
                            const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                            ProtobufCMessage **out, pbw_image_memo *memo, int pieces) {
  img_view v;
  binder b;
  *out = NULL;
  /* a memo's plan, made once and kept for the life of the process, holds
   * all a build needs (a memo reused for another image or descriptor has
   * one that is not ours); else the image is checked or its memo trusted,
   * and a plan made now, on the stack when it fits */
  const split_plan *sp = memo ? atomic_load_explicit(&memo->pieces, memory_order_acquire) : NULL;
  if (sp != NULL && sp->img == img && sp->root == d && sp->view.len == len && sp->ext != NULL) {
    if (sp->view.n_refs != 0 && (rq == NULL || rq->p == NULL || rq->len != sp->refs_len))
      return PBW_E_BADIMAGE; /* not the request its refs were checked for */
    return pieces ? build_pieces(&sp->view, NULL, sp, rq, alloc, out)
                  : build_block(sp, rq, alloc, out);
  }
  /* pieces for a plan not kept: from the image's split section, checked
   * as it builds (a request seen for the first time, the common case). A
   * memo is filled, and its plan made, at the second tree it builds:
   * checking, binding and planning for a memo took ~1,000 instructions
   * more than this, and an entry recorded twice is often replayed once a
   * process (dnstap-read over two recorded runs: 0.9 us a call of harness
   * against 0.35 for a recording of one run) */
  if (pieces && memo != NULL && sp == NULL &&
      atomic_load_explicit(&memo->root, memory_order_acquire) == NULL &&
      atomic_fetch_add_explicit(&memo->built, 1, memory_order_relaxed) == 0)
    memo = NULL;
  if (pieces && memo == NULL && open_checked(img, len, NULL, &v) == PBW_OK && v.split != NULL) {
    img_shape *rec;
    int done, rc = shape_build(&v, d, rq, alloc, out, &done, &rec);
    if (done)
      return rc;
    rc = d != NULL ? bind_types(&b, &v, d) : PBW_E_SCHEMA;
    if (rc == PBW_OK)
      rc = refs_fit(&v, rq);
    if (rc == PBW_OK)
      rc = rec ? build_split_rec(&v, &b, rq, alloc, out, rec->sp)
               : build_split(&v, &b, rq, alloc, out);
    if (rec)
      shape_publish(rec, &v, rc);
    return rc;
  }
  int rc = prepare(img, len, d, memo, &v, &b);
  if (rc == PBW_OK)
    rc = refs_fit(&v, rq);
  if (rc != PBW_OK)
    return rc;
  if (sp != NULL && (sp->img != v.img || sp->root != d || sp->view.len != v.len))
    sp = NULL; /* another image's: its pieces are not this one's */
  split_plan *mine = NULL;
  int heap = 0;
  if (sp == NULL) {
    _Alignas(16) unsigned char stack[4096];
    int keep = memo != NULL && atomic_load_explicit(&memo->root, memory_order_acquire) == d;
    if (!keep && !pieces)
      return build_tree(&v, &b, rq, alloc, out);
    rc = plan_split(&v, keep ? NULL : stack, keep ? 0 : sizeof stack, keep, &mine, &heap);
    if (rc == PBW_E_UNSUPPORTED && !pieces) /* it does not split */
      return build_tree(&v, &b, rq, alloc, out);
    if (rc != PBW_OK)
      return rc;
    if (keep) {
      plan_bind(mine, &v, &b);
      mine->refs_len = rq != NULL ? rq->len : 0;
    }
    if (keep && mine->block != NULL) { /* the refs filled in once (checked above) */
      fill_block(&v, rq, mine->block);
      mine->view.blk = mine->block;
      mine->view.stored = v.block_size;
      mine->view.refs = NULL;
      mine->view.n_refs = 0;
    }
    const void *expect = NULL;
    if (keep && atomic_compare_exchange_strong(&memo->pieces, &expect, (const void *)mine))
      heap = 0; /* the memo's now */
    rc = pieces ? build_pieces(&v, &b, mine, rq, alloc, out) : build_block(mine, rq, alloc, out);
    if (heap)
      plan_free(mine);
    return rc;
  }
  if (!pieces) /* a kept plan for another length of this image: not ours */
    return build_tree(&v, &b, rq, alloc, out);
  return build_pieces(&v, &b, sp, rq, alloc, out);
}

int pbw_image_materialise_req(const void *img, size_t len, const void *req, size_t req_len,
                              const ProtobufCMessageDescriptor *d, ProtobufCAllocator *alloc,
                              ProtobufCMessage **out, pbw_image_memo *memo, int pieces) {
  img_req rq = {req, req_len};
  return materialise_kept(img, len, &rq, d, alloc, out, memo, pieces);
}

int pbw_image_materialise_pieces(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                                 ProtobufCAllocator *alloc, ProtobufCMessage **out,
                                 pbw_image_memo *memo) {
  return pbw_image_materialise_req(img, len, NULL, 0, d, alloc, out, memo, 1);
}

int pbw_image_materialise(const void *img, size_t len, const ProtobufCMessageDescriptor *d,
                          ProtobufCAllocator *alloc, ProtobufCMessage **out) {
  return pbw_image_materialise_memo(img, len, d, alloc, out, NULL);
}

/* ---- Pieces held by reference to the request ------------------------------
 *
 * An unpacked tree's long strings and bytes are copies of the bytes it was
 * unpacked from, and replay answers an unpack only after comparing the
 * program's bytes with the recorded ones: such a piece can be copied from
 * the program's bytes instead of being held in the image a second time.
 * pbw_image_refer moves those pieces to the end of the block and drops
 * them from the image (flag IMG_REFS); the image then keeps, for each, the
 * offset and length of its bytes in the request (the rest of the piece is
 * zeros). A 1 KB pbbench message's image shrinks from ~1.4 KB to ~0.4 KB. */

#define REF_MIN 64 /* bytes: a shorter piece is copied with the block */

/* pbw__find_run (pb_internal.h). memmem looks
 * for a prefix of at most 64 bytes, which its short-needle search finds
 * fast, and the rest is compared at each place found: memmem's search for
 * a long needle took ~36 instructions a byte, half of building the
 * database of a program unpacking 24 KB JPEGs. */
const uint8_t *pbw__find_run(const uint8_t *hay, size_t n, const uint8_t *c, size_t L,
                             uint64_t *budget) {
  const size_t k = L < 64 ? L : 64;
  const uint8_t *p = hay, *end = hay + n;
  while ((size_t)(end - p) >= L) {
    const uint8_t *h = memmem(p, (size_t)(end - p) - (L - k), c, k);
    uint64_t cost = h ? (uint64_t)(h - p) + L : (uint64_t)(end - p);
    if (cost > *budget) {
      *budget = 0;
      return NULL;
    }
    *budget -= cost;
    if (h == NULL || memcmp(h + k, c + k, L - k) == 0)
      return h;
    p = h + 1;
  }
  return NULL;
}

/* Where the L bytes at c are in req (from *cur on first, then before it),
 * within what is left of the search budget: 1 and *at, or 0. */
static int find_ref(const uint8_t *req, size_t req_len, const uint8_t *c, size_t L, size_t *cur,
                    uint64_t *budget, size_t *at) {
  if (L > req_len)
    return 0;
  size_t from = *cur <= req_len ? *cur : req_len;
  const uint8_t *hit = pbw__find_run(req + from, req_len - from, c, L, budget);
  if (hit == NULL) /* the runs before the cursor, up to one that ends past it */
    hit = pbw__find_run(req, from + L - 1 < req_len ? from + L - 1 : req_len, c, L, budget);
  if (hit == NULL)
    return 0;
  *at = (size_t)(hit - req);
  *cur = *at + L;
  return 1;
}

typedef struct {
  uint64_t start, size;      /* bytes */
  uint64_t ref_off, ref_len; /* ref_len > 0: held by reference */
  uint64_t to;               /* its start in the new block */
  uint32_t idx;              /* its index in the new split */
  uint8_t has_fix;
} refer_piece;

int pbw_image_refer(void **img, size_t *len, const void *req, size_t req_len) {
  img_view v;
  if (req == NULL || req_len < REF_MIN || view_open(&v, *img, *len) != PBW_OK || v.split == NULL ||
      v.n_refs != 0)
    return PBW_OK;
  const uint32_t n = v.n_split, n_int = n - 1;
  const uint8_t *starts = v.split, *targets = v.split + (size_t)n * 4;
  refer_piece *pc = calloc(n, sizeof *pc);
  if (pc == NULL)
    return PBW_E_NOMEM;
  int ok = pbw__ld32(starts) == 0;
  for (uint32_t i = 0; i < n && ok; i++) {
    pc[i].start = (uint64_t)pbw__ld32(starts + (size_t)i * 4) * 8;
    uint64_t end = i + 1 < n ? (uint64_t)pbw__ld32(starts + (size_t)(i + 1) * 4) * 8 : v.block_size;
    ok = end > pc[i].start && end <= v.block_size;
    pc[i].size = ok ? end - pc[i].start : 0;
  }
  /* the pieces that hold a fix-up (messages, pointer arrays) stay; every
   * internal pointer names the start of its piece */
  uint32_t p = 0, k = 0;
  for (uint32_t j = 0; j < v.n_fix && ok; j++) {
    uint64_t w = (uint64_t)pbw__ld32(v.fix + (size_t)j * 4) * 8;
    while (p + 1 < n && w >= pc[p + 1].start)
      p++;
    ok = w < v.block_size && w >= pc[p].start;
    pc[p].has_fix = 1;
    uint64_t val = pbw__ld64(v.blk + w);
    if (ok && val >> FX_SHIFT == FX_INTERNAL) {
      uint32_t t = k < n_int ? pbw__ld32(targets + (size_t)k * 4) : 0;
      ok = t > 0 && t < n && (val & FX_ARG_MASK) == pc[t].start;
      k++;
    }
  }
  ok = ok && k == n_int;
  uint32_t n_refs = 0;
  size_t cur = 0;
  uint64_t budget = 4 * (uint64_t)req_len + 4096, referred = 0;
  for (uint32_t i = 1; i < n && ok; i++) {
    const uint8_t *c = v.blk + pc[i].start;
    uint64_t L = pc[i].size;
    while (L > 0 && c[L - 1] == 0)
      L--;
    size_t at;
    if (pc[i].has_fix || L < REF_MIN || !find_ref(req, req_len, c, L, &cur, &budget, &at))
      continue;
    /* a datum's own trailing zeros are in the request too: only the
     * padding is left for the piece's zeros (refs_fit) */
    while (L < pc[i].size && at + L < req_len && ((const uint8_t *)req)[at + L] == 0)
      L++;
    if (pc[i].size - L > REF_PAD || L > req_len - referred)
      continue;
    cur = at + L;
    referred += L;
    pc[i].ref_off = at;
    pc[i].ref_len = L;
    n_refs++;
  }
  if (!ok || n_refs == 0) {
    free(pc);
    return PBW_OK;
  }
  /* the new block: the pieces kept, in order, then those referred to */
  uint64_t pos = 0, kept = 0;
  uint32_t idx = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (uint32_t i = 0; i < n; i++)
      if ((pc[i].ref_len != 0) == pass) {
        pc[i].to = pos;
        pc[i].idx = idx++;
        pos += pc[i].size;
      }
    if (pass == 0)
      kept = pos; /* the bytes the image holds */
  }
  uint64_t meta = (uint64_t)(v.fix - v.img) + (uint64_t)v.n_fix * 4;
  uint64_t split_len = round8(8 + 4 * (uint64_t)n + 4 * (uint64_t)n_int);
  uint64_t refs_len = 8 + 16 * (uint64_t)n_refs;
  uint64_t total = meta + refs_len + kept + split_len;
  uint8_t *out = calloc(1, total);
  if (out == NULL) {
    free(pc);
    return PBW_E_NOMEM;
  }
  memcpy(out, v.img, meta);
  uint8_t *fix = out + (v.fix - v.img), *refs = out + meta, *blk = refs + refs_len,
          *split = blk + kept;
  pbw__st32(refs, n_refs);
  pbw__st32(refs + 4, (uint32_t)(kept / 8));
  for (uint32_t i = 0, r = 0; i < n; i++) {
    if (pc[i].ref_len) {
      pbw__st64(refs + 8 + (size_t)r * 16, pc[i].ref_off);
      pbw__st64(refs + 16 + (size_t)r * 16, pc[i].ref_len);
      r++;
    } else {
      memcpy(blk + pc[i].to, v.blk + pc[i].start, pc[i].size);
    }
  }
  /* fix-ups move with their pieces (which keep their order), internal
   * pointers name their targets' new starts, and the split its new order */
  p = 0;
  k = 0;
  for (uint32_t j = 0; j < v.n_fix; j++) {
    uint64_t w = (uint64_t)pbw__ld32(v.fix + (size_t)j * 4) * 8;
    while (p + 1 < n && w >= pc[p + 1].start)
      p++;
    uint64_t nw = pc[p].to + (w - pc[p].start);
    pbw__st32(fix + (size_t)j * 4, (uint32_t)(nw / 8));
    uint64_t val = pbw__ld64(v.blk + w);
    if (val >> FX_SHIFT == FX_INTERNAL) {
      uint32_t t = pbw__ld32(targets + (size_t)k * 4);
      pbw__st64(blk + nw, ((uint64_t)FX_INTERNAL << FX_SHIFT) | pc[t].to);
      pbw__st32(split + 8 + (size_t)n * 4 + (size_t)k * 4, pc[t].idx);
      k++;
    }
  }
  pbw__st32(split, n);
  pbw__st32(split + 4, n_int);
  for (uint32_t i = 0; i < n; i++)
    pbw__st32(split + 8 + (size_t)pc[i].idx * 4, (uint32_t)(pc[i].to / 8));
  pbw__st32(out + 16, IMG_SPLIT | IMG_REFS);
  pbw__st64(out + 8, pbw__hash64(out + 16, total - 16));
  free(pc);
  free(*img);
  *img = out;
  *len = total;
  return PBW_OK;
}

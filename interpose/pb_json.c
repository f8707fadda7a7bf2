/* pb_json.c — offline decoding of encoded messages against a schema: JSON
 * text and the statistics pbw_tree_stats would give for the unpacked tree.
 *
 * Each message is scanned once into a list of occurrences (one per wire
 * record), sorted by schema field and arrival order, so that repeated
 * fields come out as one array even when their records are interleaved.
 * The decoder then applies what protobuf_c_message_unpack does with the
 * same bytes: the last record of a singular field wins, records of a
 * singular message field are merged (which is parsing their concatenation),
 * and of the members of a oneof only the last one to arrive survives.
 *
 * Damaged input must not be read out of bounds: every length is checked
 * against the bytes left, the schema is validated before use, and nesting
 * is bounded by PBW_MAX_DEPTH. Working memory is malloc'd; this is for
 * offline tools, not for the replay hot path. */
#include "pb_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
  uint64_t key;     /* field position in the message, or n_fields + number */
  uint64_t v;       /* varint or fixed value */
  const uint8_t *p; /* length-delimited payload */
  size_t n;
  uint32_t seq, number, wt;
  uint32_t oneof; /* the field's oneof group, PBW_NONE32 if none or unknown */
} occ;

/* Records and oneof winners of most messages fit in the scan itself: no
 * allocation per message (the trace writer scans every unpack request). */
#define SCAN_INLINE_OCC 8
#define SCAN_INLINE_WIN 4

typedef struct {
  const pbw__schema *s;
  pbw__smsg m;
  occ *o;        /* inl, or the heap once more records came */
  size_t n;      /* occurrences */
  size_t cap;    /* room at o */
  size_t cur;    /* first occurrence not yet handed out */
  uint32_t *win; /* per oneof group: seq of the record that survives */
  occ inl[SCAN_INLINE_OCC];
  uint32_t win_inl[SCAN_INLINE_WIN];
} msg_scan;

/* ---- Wire format (primitives in pb_internal.h) ------------------------------ */

/* One wire record at *p: tag, then the value its wire type announces. */
static int read_record(const uint8_t **p, const uint8_t *end, occ *o) {
  uint64_t tag, n;
  if (!pbw__get_varint(p, end, &tag) || tag >> 3 == 0 || tag >> 3 > PBW_MAX_FIELD_NUMBER)
    return PBW_E_BADDATA;
  o->number = (uint32_t)(tag >> 3);
  o->wt = (uint32_t)(tag & 7);
  switch (o->wt) {
  case PROTOBUF_C_WIRE_TYPE_VARINT: return pbw__get_varint(p, end, &o->v) ? PBW_OK : PBW_E_BADDATA;
  case PROTOBUF_C_WIRE_TYPE_64BIT:
  case PROTOBUF_C_WIRE_TYPE_32BIT:
    n = o->wt == PROTOBUF_C_WIRE_TYPE_64BIT ? 8 : 4;
    if ((uint64_t)(end - *p) < n)
      return PBW_E_BADDATA;
    o->v = pbw__get_le(*p, (unsigned)n);
    *p += n;
    return PBW_OK;
  case PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED:
    if (!pbw__get_varint(p, end, &n) || n > (uint64_t)(end - *p))
      return PBW_E_BADDATA;
    o->p = *p;
    o->n = (size_t)n;
    *p += n;
    return PBW_OK;
  default: return PBW_E_BADDATA; /* groups are not supported by protobuf-c */
  }
}

/* ---- Scanning a message ---------------------------------------------------- */

/* Position of field `number` in message m, or PBW_NONE32; *f is filled
 * when found. `hint`, the position of the last field found, and the one
 * after it are tried first: a serialiser writes fields in number order, so
 * a record is mostly of the same (repeated) field or of the next one. The
 * search compares numbers only and decodes the one field it finds. */
static uint32_t find_field(const pbw__schema *s, const pbw__smsg *m, uint32_t number, uint32_t hint,
                           pbw__sfield *f) {
  uint32_t lo = 0, hi = m->n_fields, at = PBW_NONE32;
  for (uint32_t k = hint; k < hint + 2 && k < m->n_fields; k++) {
    uint32_t x = pbw__schema_field_number(s, m->first_field + k);
    if (x == number) {
      at = k;
      break;
    }
    if (x > number) { /* before the hint: search below it */
      hi = k;
      break;
    }
    lo = k + 1;
  }
  while (at == PBW_NONE32 && lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    uint32_t x = pbw__schema_field_number(s, m->first_field + mid);
    if (x == number)
      at = mid;
    else if (x < number)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (at != PBW_NONE32)
    pbw__schema_field(s, m->first_field + at, f);
  return at;
}

static int cmp_occ(const void *a, const void *b) {
  const occ *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Records come in their order (seq increasing), so they are sorted
 * already when their keys never decrease: what a serialiser writes, fields
 * in number order. A sort of sorted input still costs n log n compares. */
static int occ_sorted(const occ *o, size_t n) {
  for (size_t i = 1; i < n; i++)
    if (o[i].key < o[i - 1].key)
      return 0;
  return 1;
}

static int push_occ(msg_scan *ms, const occ *o) {
  if (ms->n == ms->cap) {
    size_t c = 2 * ms->cap;
    occ *g = ms->o == ms->inl ? malloc(c * sizeof *g) : realloc(ms->o, c * sizeof *g);
    if (g == NULL)
      return PBW_E_NOMEM;
    if (ms->o == ms->inl)
      memcpy(g, ms->inl, sizeof ms->inl);
    ms->o = g;
    ms->cap = c;
  }
  ms->o[ms->n++] = *o;
  return PBW_OK;
}

/* Which record of each oneof survives: the one that arrived last. */
static int find_winners(msg_scan *ms) {
  if (ms->m.n_oneofs == 0)
    return PBW_OK;
  ms->win = ms->m.n_oneofs <= SCAN_INLINE_WIN ? ms->win_inl
                                              : malloc(ms->m.n_oneofs * sizeof *ms->win);
  if (ms->win == NULL)
    return PBW_E_NOMEM;
  memset(ms->win, 0xff, ms->m.n_oneofs * sizeof *ms->win);
  for (size_t i = 0; i < ms->n && ms->o[i].key < ms->m.n_fields; i++) {
    uint32_t *w = ms->o[i].oneof != PBW_NONE32 ? &ms->win[ms->o[i].oneof] : NULL;
    if (w != NULL && (*w == PBW_NONE32 || ms->o[i].seq > *w))
      *w = ms->o[i].seq;
  }
  return PBW_OK;
}

static int scan_records(msg_scan *ms, const uint8_t *p, const uint8_t *end) {
  pbw__sfield f;
  uint32_t hint = 0;
  for (uint32_t seq = 0; p < end; seq++) {
    occ o = {0};
    int rc = read_record(&p, end, &o);
    if (rc != PBW_OK)
      return rc;
    uint32_t pos = find_field(ms->s, &ms->m, o.number, hint, &f);
    if (pos != PBW_NONE32)
      hint = pos; /* the next record: this field again (repeated) or a later one */
    if (pos != PBW_NONE32 && o.wt != pbw__wire_of(f.type) && !pbw__is_packed_run(&f, o.wt))
      return PBW_E_BADDATA; /* unpack rejects a known field with another wire type */
    o.key = pos != PBW_NONE32 ? pos : (uint64_t)ms->m.n_fields + o.number;
    o.oneof = pos != PBW_NONE32 ? f.oneof : PBW_NONE32;
    o.seq = seq;
    if ((rc = push_occ(ms, &o)) != PBW_OK)
      return rc;
  }
  return PBW_OK;
}

static void scan_close(msg_scan *ms) {
  if (ms->o != ms->inl)
    free(ms->o);
  if (ms->win != ms->win_inl)
    free(ms->win);
}

static int scan_open(msg_scan *ms, const pbw__schema *s, uint32_t mi, const uint8_t *p, size_t n) {
  ms->o = ms->inl; /* the inline arrays are not cleared: only [0, n) is read */
  ms->n = ms->cur = 0;
  ms->cap = SCAN_INLINE_OCC;
  ms->win = NULL;
  ms->s = s;
  pbw__schema_msg(s, mi, &ms->m);
  int rc = scan_records(ms, p, p + n);
  if (rc == PBW_OK && !occ_sorted(ms->o, ms->n))
    qsort(ms->o, ms->n, sizeof *ms->o, cmp_occ);
  if (rc == PBW_OK)
    rc = find_winners(ms);
  if (rc != PBW_OK)
    scan_close(ms);
  return rc;
}

/* Records [*i, *j) of the field at position pos; call with pos increasing. */
static void scan_field(msg_scan *ms, uint32_t pos, size_t *i, size_t *j) {
  *i = *j = ms->cur;
  while (*j < ms->n && ms->o[*j].key == pos)
    (*j)++;
  ms->cur = *j;
}

/* Records [*i, *j) of the next unknown field number; 0 when none is left. */
static int scan_unknown(msg_scan *ms, size_t *i, size_t *j) {
  if (ms->cur >= ms->n)
    return 0;
  *i = *j = ms->cur;
  while (*j < ms->n && ms->o[*j].key == ms->o[*i].key)
    (*j)++;
  ms->cur = *j;
  return 1;
}

/* A field with records is lost when another member of its oneof came later. */
static int field_live(const msg_scan *ms, const pbw__sfield *f, size_t j) {
  return f->oneof == PBW_NONE32 || ms->win[f->oneof] == ms->o[j - 1].seq;
}

/* Payload of a singular message field: records of a plain field merge
 * (parse their concatenation); a oneof member keeps its last record.
 * *tmp is set when a concatenation had to be allocated. */
static int msg_payload(const msg_scan *ms, const pbw__sfield *f, size_t i, size_t j, uint8_t **tmp,
                       const uint8_t **p, size_t *n) {
  size_t total = 0, at = 0;
  *tmp = NULL;
  if (j - i == 1 || f->oneof != PBW_NONE32) {
    *p = ms->o[j - 1].p;
    *n = ms->o[j - 1].n;
    return PBW_OK;
  }
  for (size_t k = i; k < j; k++)
    total += ms->o[k].n; /* each is inside the input: no overflow */
  *tmp = malloc(total ? total : 1);
  if (*tmp == NULL)
    return PBW_E_NOMEM;
  for (size_t k = i; k < j; k++) {
    memcpy(*tmp + at, ms->o[k].p, ms->o[k].n);
    at += ms->o[k].n;
  }
  *p = *tmp;
  *n = total;
  return PBW_OK;
}

/* ---- Statistics -------------------------------------------------------------- */

static int stats_msg(const pbw__schema *s, uint32_t mi, const uint8_t *p, size_t n, unsigned depth,
                     pbw_stats *st);

/* Strings count up to their first NUL, as strlen does on the tree. */
static void add_var(const pbw__sfield *f, const uint8_t *p, size_t n, pbw_stats *st) {
  if (f->type == PROTOBUF_C_TYPE_STRING)
    st->var_bytes += strnlen((const char *)p, n);
  else if (f->type == PROTOBUF_C_TYPE_BYTES)
    st->var_bytes += n;
}

static int stats_elem(const pbw__schema *s, const pbw__sfield *f, const occ *o, unsigned depth,
                      pbw_stats *st) {
  add_var(f, o->p, o->n, st);
  if (f->type != PROTOBUF_C_TYPE_MESSAGE)
    return PBW_OK;
  st->submsgs++;
  return stats_msg(s, f->ref, o->p, o->n, depth + 1, st);
}

static int stats_repeated(const msg_scan *ms, const pbw__sfield *f, size_t i, size_t j,
                          unsigned depth, pbw_stats *st) {
  uint64_t count = 0, v;
  for (size_t k = i; k < j; k++) {
    const occ *o = &ms->o[k];
    if (pbw__is_packed_run(f, o->wt)) {
      const uint8_t *p = o->p, *end = o->p + o->n;
      int r;
      while ((r = pbw__packed_next(&p, end, pbw__wire_of(f->type), &v)) == 1)
        count++;
      if (r < 0)
        return PBW_E_BADDATA;
      continue;
    }
    count++;
    int rc = stats_elem(ms->s, f, o, depth, st);
    if (rc != PBW_OK)
      return rc;
  }
  if (count > 0) {
    st->fields++;
    st->repeated += count;
  }
  return PBW_OK;
}

/* unpack leaves a missing required field at its default (and fails when
 * there is none); pack then writes that default. */
static int stats_missing_required(const pbw__schema *s, const pbw__sfield *f, pbw_stats *st) {
  if (f->def_off == PBW_NONE32)
    return PBW_E_BADDATA;
  st->fields++;
  add_var(f, s->blob + f->def_off, f->def_len, st);
  return PBW_OK;
}

static int stats_field(msg_scan *ms, const pbw__sfield *f, size_t i, size_t j, unsigned depth,
                       pbw_stats *st) {
  const uint8_t *p;
  uint8_t *tmp;
  size_t n;
  if (i == j)
    return f->label == PROTOBUF_C_LABEL_REQUIRED ? stats_missing_required(ms->s, f, st) : PBW_OK;
  if (!field_live(ms, f, j))
    return PBW_OK;
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return stats_repeated(ms, f, i, j, depth, st);
  if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
    int rc = msg_payload(ms, f, i, j, &tmp, &p, &n);
    if (rc == PBW_OK) {
      st->fields++;
      st->submsgs++;
      rc = stats_msg(ms->s, f->ref, p, n, depth + 1, st);
    }
    free(tmp);
    return rc;
  }
  if (f->label == PROTOBUF_C_LABEL_NONE && f->oneof == PBW_NONE32 &&
      pbw__wire_zeroish(f->type, ms->o[j - 1].v, ms->o[j - 1].p, ms->o[j - 1].n))
    return PBW_OK;
  st->fields++;
  add_var(f, ms->o[j - 1].p, ms->o[j - 1].n, st);
  return PBW_OK;
}

static int stats_msg(const pbw__schema *s, uint32_t mi, const uint8_t *p, size_t n, unsigned depth,
                     pbw_stats *st) {
  msg_scan ms;
  pbw__sfield f;
  size_t i, j;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  if (depth > st->max_depth)
    st->max_depth = depth;
  int rc = scan_open(&ms, s, mi, p, n);
  if (rc != PBW_OK)
    return rc;
  st->field_words += (ms.m.n_fields + 31) / 32;
  for (uint32_t pos = 0; rc == PBW_OK && pos < ms.m.n_fields; pos++) {
    scan_field(&ms, pos, &i, &j);
    /* most fields of a big schema are absent: decode only those present
     * and the required (whose defaults unpack fills in) */
    if (i == j && pbw__schema_field_label(s, ms.m.first_field + pos) != PROTOBUF_C_LABEL_REQUIRED)
      continue;
    pbw__schema_field(s, ms.m.first_field + pos, &f);
    rc = stats_field(&ms, &f, i, j, depth, st);
  }
  while (rc == PBW_OK && scan_unknown(&ms, &i, &j))
    st->fields += j - i;
  scan_close(&ms);
  return rc;
}

struct pbw_stats_plan {
  pbw__schema s; /* points into the caller's schema bytes */
};

int pbw_stats_from_bytes(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                         pbw_stats *st) {
  pbw_stats_plan p;
  memset(st, 0, sizeof *st);
  int rc = pbw__schema_open(&p.s, schema, schema_len);
  return rc != PBW_OK ? rc : pbw_stats_from_bytes_plan(&p, data, len, st);
}

int pbw_stats_plan_build(const void *schema, size_t schema_len, pbw_stats_plan **out) {
  *out = NULL;
  pbw_stats_plan *p = malloc(sizeof *p);
  if (p == NULL)
    return PBW_E_NOMEM;
  int rc = pbw__schema_open(&p->s, schema, schema_len);
  if (rc != PBW_OK) {
    free(p);
    return rc;
  }
  *out = p;
  return PBW_OK;
}

int pbw_stats_from_bytes_plan(const pbw_stats_plan *p, const uint8_t *data, size_t len,
                              pbw_stats *st) {
  memset(st, 0, sizeof *st);
  if (data == NULL && len > 0)
    return PBW_E_BADDATA;
  return stats_msg(&p->s, 0, data ? data : (const uint8_t *)"", len, 1, st);
}

void pbw_stats_plan_free(pbw_stats_plan *p) {
  free(p);
}

/* ---- JSON text --------------------------------------------------------------- */

typedef struct {
  char *p;
  size_t n, cap;
  int err;
} jbuf;

static void jb_put(jbuf *b, const void *src, size_t n) {
  if (b->err)
    return;
  if (n > b->cap - b->n) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < n) {
      if (cap > SIZE_MAX / 2) {
        b->err = PBW_E_NOMEM;
        return;
      }
      cap *= 2;
    }
    char *p = realloc(b->p, cap);
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

static void jb_str(jbuf *b, const char *s) {
  jb_put(b, s, strlen(s));
}

static void jb_fmt_u64(jbuf *b, uint64_t v) {
  char t[24];
  jb_put(b, t, (size_t)snprintf(t, sizeof t, "%" PRIu64, v));
}

static void jb_fmt_i64(jbuf *b, int64_t v) {
  char t[24];
  jb_put(b, t, (size_t)snprintf(t, sizeof t, "%" PRId64, v));
}

/* Shortest %g that reads back to the same value; the locale's decimal
 * separator is replaced by '.', as JSON requires. */
static void jb_real(jbuf *b, double d, int is_float) {
  char t[40];
  int lo = is_float ? 6 : 15, hi = is_float ? 9 : 17;
  if (isnan(d)) {
    jb_str(b, "\"NaN\"");
    return;
  }
  if (isinf(d)) {
    jb_str(b, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  for (int prec = lo; prec <= hi; prec++) {
    snprintf(t, sizeof t, "%.*g", prec, d);
    if (is_float ? strtof(t, NULL) == (float)d : strtod(t, NULL) == d)
      break;
  }
  for (char *c = t; *c; c++) {
    if (!(*c >= '0' && *c <= '9') && *c != '-' && *c != '+' && *c != 'e')
      *c = '.';
  }
  jb_str(b, t);
}

/* Length of the valid UTF-8 sequence at p, or 0. */
static size_t utf8_len(const uint8_t *p, size_t n) {
  size_t k;
  uint8_t lo = 0x80, hi = 0xbf;
  if (p[0] >= 0xc2 && p[0] <= 0xdf)
    k = 2;
  else if (p[0] >= 0xe0 && p[0] <= 0xef)
    k = 3;
  else if (p[0] >= 0xf0 && p[0] <= 0xf4)
    k = 4;
  else
    return 0;
  if (p[0] == 0xe0)
    lo = 0xa0; /* overlong */
  else if (p[0] == 0xed)
    hi = 0x9f; /* surrogates */
  else if (p[0] == 0xf0)
    lo = 0x90;
  else if (p[0] == 0xf4)
    hi = 0x8f;
  if (n < k || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 2; i < k; i++) {
    if (p[i] < 0x80 || p[i] > 0xbf)
      return 0;
  }
  return k;
}

/* JSON string; bytes that are not valid UTF-8 become \u00XX (Latin-1). */
static void jb_string(jbuf *b, const uint8_t *p, size_t n) {
  static const char hex[] = "0123456789abcdef";
  jb_put(b, "\"", 1);
  for (size_t i = 0; i < n;) {
    uint8_t c = p[i];
    size_t k = c >= 0x80 ? utf8_len(p + i, n - i) : 1;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      jb_put(b, e, 2);
    } else if (c >= 0x20 && k > 0) {
      jb_put(b, p + i, k);
      i += k;
      continue;
    } else {
      char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      jb_put(b, e, 6);
    }
    i++;
  }
  jb_put(b, "\"", 1);
}

static void jb_base64(jbuf *b, const uint8_t *p, size_t n) {
  static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  jb_put(b, "\"", 1);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t w = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      w |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      w |= p[i + 2];
    char q[4] = {tab[w >> 18], tab[(w >> 12) & 63], i + 1 < n ? tab[(w >> 6) & 63] : '=',
                 i + 2 < n ? tab[w & 63] : '='};
    jb_put(b, q, 4);
  }
  jb_put(b, "\"", 1);
}

static void jb_enum(jbuf *b, const pbw__schema *s, uint32_t ei, int32_t v) {
  pbw__senum e;
  int32_t number;
  pbw__schema_enum(s, ei, &e);
  for (uint32_t k = 0; k < e.n_values; k++) {
    const char *name = pbw__schema_value(s, e.first_value + k, &number);
    if (number == v && name != NULL) { /* values have no names in CODE_SIZE builds */
      jb_string(b, (const uint8_t *)name, strlen(name));
      return;
    }
  }
  jb_fmt_i64(b, v);
}

static int64_t zigzag(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A number-like value of field f, as read from the wire (v). */
static void jb_number(jbuf *b, const pbw__schema *s, const pbw__sfield *f, uint64_t v) {
  uint32_t w = (uint32_t)v;
  float x;
  double d;
  switch (f->type) {
  case PROTOBUF_C_TYPE_INT32:
  case PROTOBUF_C_TYPE_SFIXED32: jb_fmt_i64(b, (int32_t)w); return;
  case PROTOBUF_C_TYPE_SINT32: jb_fmt_i64(b, zigzag(w)); return;
  case PROTOBUF_C_TYPE_UINT32:
  case PROTOBUF_C_TYPE_FIXED32: jb_fmt_u64(b, w); return;
  case PROTOBUF_C_TYPE_INT64:
  case PROTOBUF_C_TYPE_SFIXED64: jb_fmt_i64(b, (int64_t)v); return;
  case PROTOBUF_C_TYPE_SINT64: jb_fmt_i64(b, zigzag(v)); return;
  case PROTOBUF_C_TYPE_BOOL: jb_str(b, v ? "true" : "false"); return;
  case PROTOBUF_C_TYPE_ENUM: jb_enum(b, s, f->ref, (int32_t)w); return;
  case PROTOBUF_C_TYPE_FLOAT:
    memcpy(&x, &w, sizeof x);
    jb_real(b, x, 1);
    return;
  case PROTOBUF_C_TYPE_DOUBLE:
    memcpy(&d, &v, sizeof d);
    jb_real(b, d, 0);
    return;
  default: jb_fmt_u64(b, v); return; /* UINT64, FIXED64 */
  }
}

static int json_msg(const pbw__schema *s, uint32_t mi, const uint8_t *p, size_t n, unsigned depth,
                    jbuf *b);

/* The values of f in record o (a packed run holds several), each preceded
 * by a comma unless it is the first of its array or field. */
static int json_values(const msg_scan *ms, const pbw__sfield *f, const occ *o, unsigned depth,
                       int *first, jbuf *b) {
  const uint8_t *p = o->p, *end;
  uint64_t v;
  int r;
  if (!pbw__is_packed_run(f, o->wt)) {
    if (!*first)
      jb_put(b, ",", 1);
    *first = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: jb_string(b, o->p, o->n); return PBW_OK;
    case PROTOBUF_C_TYPE_BYTES: jb_base64(b, o->p, o->n); return PBW_OK;
    case PROTOBUF_C_TYPE_MESSAGE: return json_msg(ms->s, f->ref, o->p, o->n, depth + 1, b);
    default: jb_number(b, ms->s, f, o->v); return PBW_OK;
    }
  }
  end = p + o->n; /* a packed run always has its bytes (p is NULL for varints) */
  while ((r = pbw__packed_next(&p, end, pbw__wire_of(f->type), &v)) == 1) {
    if (!*first)
      jb_put(b, ",", 1);
    *first = 0;
    jb_number(b, ms->s, f, v);
  }
  return r < 0 ? PBW_E_BADDATA : PBW_OK;
}

static int json_repeated(const msg_scan *ms, const pbw__sfield *f, size_t i, size_t j,
                         unsigned depth, jbuf *b) {
  int rc = PBW_OK, first = 1;
  jb_put(b, "[", 1);
  for (size_t k = i; k < j && rc == PBW_OK; k++)
    rc = json_values(ms, f, &ms->o[k], depth, &first, b);
  jb_put(b, "]", 1);
  return rc;
}

static int json_field(const msg_scan *ms, const pbw__sfield *f, size_t i, size_t j, unsigned depth,
                      jbuf *b) {
  const uint8_t *p;
  uint8_t *tmp;
  size_t n;
  const char *name = pbw__schema_str(ms->s, f->name);
  jb_string(b, (const uint8_t *)name, strlen(name));
  jb_put(b, ":", 1);
  if (f->label == PROTOBUF_C_LABEL_REPEATED)
    return json_repeated(ms, f, i, j, depth, b);
  if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
    int first = 1;
    return json_values(ms, f, &ms->o[j - 1], depth, &first, b);
  }
  int rc = msg_payload(ms, f, i, j, &tmp, &p, &n);
  if (rc == PBW_OK)
    rc = json_msg(ms->s, f->ref, p, n, depth + 1, b);
  free(tmp);
  return rc;
}

static void json_unknown_value(const occ *o, jbuf *b) {
  if (o->wt == PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED)
    jb_base64(b, o->p, o->n);
  else
    jb_fmt_u64(b, o->v);
}

/* Unknown fields are keyed by number; repeated numbers become arrays. */
static void json_unknown(const msg_scan *ms, size_t i, size_t j, jbuf *b) {
  char key[16];
  snprintf(key, sizeof key, "\"%" PRIu32 "\":", ms->o[i].number);
  jb_str(b, key);
  if (j - i > 1)
    jb_put(b, "[", 1);
  for (size_t k = i; k < j; k++) {
    if (k > i)
      jb_put(b, ",", 1);
    json_unknown_value(&ms->o[k], b);
  }
  if (j - i > 1)
    jb_put(b, "]", 1);
}

static int json_msg(const pbw__schema *s, uint32_t mi, const uint8_t *p, size_t n, unsigned depth,
                    jbuf *b) {
  msg_scan ms;
  pbw__sfield f;
  size_t i, j;
  int first = 1;
  if (depth > PBW_MAX_DEPTH)
    return PBW_E_DEPTH;
  int rc = scan_open(&ms, s, mi, p, n);
  if (rc != PBW_OK)
    return rc;
  jb_put(b, "{", 1);
  for (uint32_t pos = 0; rc == PBW_OK && pos < ms.m.n_fields; pos++) {
    pbw__schema_field(s, ms.m.first_field + pos, &f);
    scan_field(&ms, pos, &i, &j);
    if (i == j || !field_live(&ms, &f, j))
      continue;
    if (!first)
      jb_put(b, ",", 1);
    first = 0;
    rc = json_field(&ms, &f, i, j, depth, b);
  }
  while (rc == PBW_OK && scan_unknown(&ms, &i, &j)) {
    if (!first)
      jb_put(b, ",", 1);
    first = 0;
    json_unknown(&ms, i, j, b);
  }
  jb_put(b, "}", 1);
  scan_close(&ms);
  return rc;
}

int pbw_decode_json(const void *schema, size_t schema_len, const uint8_t *data, size_t len,
                    char **json) {
  pbw__schema s;
  jbuf b = {0};
  *json = NULL;
  int rc = pbw__schema_open(&s, schema, schema_len);
  if (rc != PBW_OK)
    return rc;
  if (data == NULL && len > 0)
    return PBW_E_BADDATA;
  rc = json_msg(&s, 0, data ? data : (const uint8_t *)"", len, 1, &b);
  jb_put(&b, "", 1);
  if (rc == PBW_OK && b.err)
    rc = b.err;
  if (rc != PBW_OK) {
    free(b.p);
    return rc;
  }
  *json = b.p;
  return PBW_OK;
}

/* json.c — JSON strings out, small documents in (see json.h). */
#include "json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_DEPTH 64

void json_write_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- parser ---------------------------------------------------------------- */

typedef struct {
  const char *s, *start;
  char *err;
  size_t cap;
  int failed;
} parser;

static void fail(parser *p, const char *what) {
  if (!p->failed)
    snprintf(p->err, p->cap, "%s at byte %zu", what, (size_t)(p->s - p->start));
  p->failed = 1;
}

static void skip_ws(parser *p) {
  while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r')
    p->s++;
}

static int parse_value(parser *p, json *v, int depth);

/* A string literal; \u escapes above 0x7f become '?': the documents read
 * here are standin's own, whose names are ASCII. */
static char *parse_string(parser *p) {
  if (*p->s != '"') {
    fail(p, "expected a string");
    return NULL;
  }
  const char *q = ++p->s;
  size_t n = 0;
  char *out = malloc(strlen(q) + 1);
  while (out && *q && *q != '"') {
    if (*q != '\\') {
      out[n++] = *q++;
      continue;
    }
    q++;
    switch (*q) {
    case 'n': out[n++] = '\n'; break;
    case 't': out[n++] = '\t'; break;
    case 'r': out[n++] = '\r'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'u': {
      char hex[5] = {0};
      for (int i = 0; i < 4 && q[1]; i++)
        hex[i] = *++q;
      unsigned long c = strtoul(hex, NULL, 16);
      out[n++] = c < 0x80 ? (char)c : '?';
      break;
    }
    default:
      if (!*q)
        break;
      out[n++] = *q;
    }
    if (*q)
      q++;
  }
  if (!out || *q != '"') {
    free(out);
    fail(p, out ? "unterminated string" : "out of memory");
    return NULL;
  }
  out[n] = 0;
  p->s = q + 1;
  return out;
}

/* Append a value (and its key) to an array or object. */
static json *add_item(parser *p, json *v, char *key) {
  json *ni = realloc(v->items, (v->n + 1) * sizeof *ni);
  char **nk = v->kind == JSON_OBJ ? realloc(v->keys, (v->n + 1) * sizeof *nk) : NULL;
  if (ni)
    v->items = ni;
  if (nk)
    v->keys = nk;
  if (!ni || (v->kind == JSON_OBJ && !nk)) {
    fail(p, "out of memory");
    return NULL;
  }
  if (nk)
    v->keys[v->n] = key;
  memset(&v->items[v->n], 0, sizeof *v->items);
  return &v->items[v->n++];
}

static int parse_members(parser *p, json *v, int depth) {
  char close = v->kind == JSON_OBJ ? '}' : ']';
  p->s++;
  skip_ws(p);
  if (*p->s == close) {
    p->s++;
    return 0;
  }
  for (;;) {
    char *key = NULL;
    skip_ws(p);
    if (v->kind == JSON_OBJ) {
      if (!(key = parse_string(p)))
        return -1;
      skip_ws(p);
      if (*p->s != ':') {
        free(key);
        fail(p, "expected ':'");
        return -1;
      }
      p->s++;
    }
    json *item = add_item(p, v, key);
    if (!item) {
      free(key);
      return -1;
    }
    if (parse_value(p, item, depth + 1) != 0)
      return -1;
    skip_ws(p);
    if (*p->s == close) {
      p->s++;
      return 0;
    }
    if (*p->s != ',') {
      fail(p, "expected ',' or a closing bracket");
      return -1;
    }
    p->s++;
  }
}

static int parse_word(parser *p, json *v, const char *w, json_kind kind, double num) {
  size_t n = strlen(w);
  if (strncmp(p->s, w, n) != 0) {
    fail(p, "unexpected character");
    return -1;
  }
  p->s += n;
  v->kind = kind;
  v->num = num;
  return 0;
}

/* Length of the JSON number at s (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?
 * ([eE][+-]?[0-9]+)?), 0 if none: strtod alone takes NaN, Infinity, hex. */
static size_t number_len(const char *s) {
  const char *p = s;
  p += *p == '-';
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (*p >= '0' && *p <= '9')
      p++;
  else
    return 0;
  if (*p == '.') {
    if (!(p[1] >= '0' && p[1] <= '9'))
      return 0;
    for (p++; *p >= '0' && *p <= '9'; p++)
      ;
  }
  if (*p == 'e' || *p == 'E') {
    const char *q = p + 1;
    q += *q == '+' || *q == '-';
    if (!(*q >= '0' && *q <= '9'))
      return 0;
    while (*q >= '0' && *q <= '9')
      q++;
    p = q;
  }
  return (size_t)(p - s);
}

static int parse_value(parser *p, json *v, int depth) {
  skip_ws(p);
  if (depth > MAX_DEPTH) {
    fail(p, "nested too deep");
    return -1;
  }
  switch (*p->s) {
  case '{': v->kind = JSON_OBJ; return parse_members(p, v, depth);
  case '[': v->kind = JSON_ARR; return parse_members(p, v, depth);
  case '"': v->kind = JSON_STR; return (v->str = parse_string(p)) ? 0 : -1;
  case 't': return parse_word(p, v, "true", JSON_BOOL, 1);
  case 'f': return parse_word(p, v, "false", JSON_BOOL, 0);
  case 'n': return parse_word(p, v, "null", JSON_NULL, 0);
  default: {
    size_t n = number_len(p->s);
    if (n == 0) {
      fail(p, "unexpected character");
      return -1;
    }
    char *end;
    errno = 0;
    v->num = strtod(p->s, &end);
    if (end != p->s + n || (errno == ERANGE && (v->num > 1 || v->num < -1))) {
      fail(p, "number out of range");
      return -1;
    }
    v->kind = JSON_NUM;
    p->s = end;
    return 0;
  }
  }
}

static void free_members(json *v) {
  for (size_t i = 0; i < v->n; i++) {
    free_members(&v->items[i]);
    if (v->keys)
      free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->str);
}

int json_parse(json **out, const char *text, char *err, size_t cap) {
  parser p = {.s = text, .start = text, .err = err, .cap = cap};
  json *v = calloc(1, sizeof *v);
  *out = NULL;
  if (!v) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  if (parse_value(&p, v, 0) == 0) {
    skip_ws(&p);
    if (*p.s)
      fail(&p, "text after the document");
  }
  if (p.failed) {
    json_free(v);
    return -1;
  }
  *out = v;
  return 0;
}

int json_load(json **out, const char *path) {
  FILE *f = fopen(path, "r");
  *out = NULL;
  if (!f) {
    cli_err("cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap), err[128];
  errno = 0;
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1)
      break;
    char *nb = realloc(buf, cap *= 2);
    if (!nb)
      free(buf);
    buf = nb;
  }
  int bad = ferror(f), e = errno; /* a directory: EISDIR, said as such, not "read error" */
  fclose(f);
  if (!buf || bad) {
    cli_err("cannot read %s: %s", path, !bad ? "out of memory" : e ? strerror(e) : "read error");
    free(buf);
    return -1;
  }
  buf[n] = 0;
  int rc = json_parse(out, buf, err, sizeof err);
  if (rc != 0)
    cli_err("%s is not valid JSON: %s", path, err);
  free(buf);
  return rc;
}

const json *json_get(const json *v, const char *key) {
  if (!v || v->kind != JSON_OBJ)
    return NULL;
  for (size_t i = 0; i < v->n; i++)
    if (!strcmp(v->keys[i], key))
      return &v->items[i];
  return NULL;
}

double json_num(const json *v, double dflt) {
  return v && (v->kind == JSON_NUM || v->kind == JSON_BOOL) ? v->num : dflt;
}

int json_count(const json *v, uint64_t *out) {
  if (!v || v->kind != JSON_NUM || !(v->num >= 0) || !(v->num < 9223372036854775808.0) ||
      v->num != (double)(uint64_t)v->num)
    return -1;
  *out = (uint64_t)v->num;
  return 0;
}

void json_free(json *v) {
  if (!v)
    return;
  free_members(v);
  free(v);
}

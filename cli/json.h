/* json.h — the little JSON the offline commands need: writing strings, and
 * reading back small documents such as `standin replay --summary` files. */
#ifndef STANDIN_CLI_JSON_H
#define STANDIN_CLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A string as a JSON string literal (quotes, escapes). */
void json_write_str(FILE *f, const char *s);

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_kind;

typedef struct json json;
struct json {
  json_kind kind;
  double num;  /* JSON_NUM, JSON_BOOL (0 or 1) */
  char *str;   /* JSON_STR */
  json *items; /* JSON_ARR, JSON_OBJ: n values */
  char **keys; /* JSON_OBJ: n keys */
  size_t n;
};

/* Parse a whole document; 0, or -1 with the reason and offset in err. */
int json_parse(json **out, const char *text, char *err, size_t cap);

/* Read and parse a file; prints why and returns -1 on failure. */
int json_load(json **out, const char *path);

/* Member of an object (NULL when absent or v is not an object). */
const json *json_get(const json *v, const char *key);

/* The number of v, or dflt when v is NULL or not a number. */
double json_num(const json *v, double dflt);
/* v as a count or a time in ns: a whole number in [0, 2^63). 0 and *out
 * set when it is one, else -1 (missing, not a number, negative, too big). */
int json_count(const json *v, uint64_t *out);

void json_free(json *v); /* accepts NULL */

#endif

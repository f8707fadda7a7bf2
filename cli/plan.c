/* plan.c — reading plan files and matching calls against their rules. */
#include "plan.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define MAX_WORDS 64

static const struct {
  const char *name;
  uint64_t mask;
} api_names[] = {
    {"protobuf", (1ull << ST_API_PB_PACK) | (1ull << ST_API_PB_SIZE) |
                     (1ull << ST_API_PB_PACK_BUF) | (1ull << ST_API_PB_UNPACK)},
    {"jpeg", (1ull << ST_API_JPEG_DECODE) | (1ull << ST_API_TJ_DECODE)},
    {"pb.pack", 1ull << ST_API_PB_PACK},
    {"pb.size", 1ull << ST_API_PB_SIZE},
    {"pb.pack_to_buffer", 1ull << ST_API_PB_PACK_BUF},
    {"pb.unpack", 1ull << ST_API_PB_UNPACK},
    {"jpeg.decode", 1ull << ST_API_JPEG_DECODE},
    {"tj.decode", 1ull << ST_API_TJ_DECODE},
};

#define API_HELP                                                                                   \
  "protobuf, jpeg, pb.pack, pb.size, pb.pack_to_buffer, pb.unpack, jpeg.decode, tj.decode"

/* "pb.pack,pb.unpack" -> mask; -1 names the bad word in err. */
static int parse_apis(const char *list, uint64_t *mask, char *err, size_t cap) {
  char *copy = strdup(list), *save = NULL;
  *mask = 0;
  int rc = copy ? 0 : -1;
  for (char *w = copy ? strtok_r(copy, ",", &save) : NULL; w && rc == 0;
       w = strtok_r(NULL, ",", &save)) {
    size_t i = 0, n = sizeof api_names / sizeof api_names[0];
    while (i < n && strcmp(api_names[i].name, w))
      i++;
    if (i == n) {
      snprintf(err, cap, "'%s' is not an API; use " API_HELP, w);
      rc = -1;
    } else {
      *mask |= api_names[i].mask;
    }
  }
  free(copy);
  if (rc == 0 && *mask == 0) { /* "" or ",": a rule for every API, never what was meant */
    snprintf(err, cap, "no API named; use " API_HELP " (or leave the API out for all of them)");
    rc = -1;
  }
  return rc;
}

/* Bytes with an optional K, M or G suffix (powers of 1024); -2 when that
 * is more than 64 bits hold. */
static int parse_bytes(const char *s, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || errno)
    return -1;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1024, end++;
  else if (*end == 'M' || *end == 'm')
    mul = 1024 * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    mul = 1024ull * 1024 * 1024, end++;
  if (*end)
    return -1;
  if (v > UINT64_MAX / mul) /* 99999999999G wrapped to a small size */
    return -2;
  *out = v * mul;
  return 0;
}

/* "MIN-MAX", "MIN-" or "-MAX"; -2 for an end too large (parse_bytes). */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi) {
  const char *dash = strchr(s, '-');
  char a[64], b[64];
  int rc;
  if (!dash || (size_t)(dash - s) >= sizeof a || strlen(dash + 1) >= sizeof b)
    return -1;
  snprintf(a, sizeof a, "%.*s", (int)(dash - s), s);
  snprintf(b, sizeof b, "%s", dash + 1);
  *lo = 0;
  *hi = UINT64_MAX;
  if (a[0] && (rc = parse_bytes(a, lo)) != 0)
    return rc;
  if (b[0] && (rc = parse_bytes(b, hi)) != 0)
    return rc;
  return *lo <= *hi ? 0 : -1;
}

/* ---- accelerators --------------------------------------------------------- */

/* Take an accelerator key (engines=, deliver=, link=, link_*=) into a; 1 if
 * it was one, 0 if not, -1 on a bad value. */
static int accel_key(plan_accel *a, const char *key, const char *v, char *err, size_t cap) {
  if (!strcmp(key, "deliver")) {
    static const char *const names[] = {"cache", "memory", "recorded"};
    for (int i = 0; i < 3; i++)
      if (!strcmp(v, names[i])) {
        a->deliver = PLAN_DELIVER_CACHE + i;
        return 1;
      }
    snprintf(err, cap, "deliver=%s: say cache, memory or recorded", v);
    return -1;
  }
  if (!strcmp(key, "engines")) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > PLAN_MAX_ENGINES) {
      snprintf(err, cap, "engines=%s is not a number from 0 (unlimited) to %d", v,
               PLAN_MAX_ENGINES);
      return -1;
    }
    a->engines = (uint32_t)n;
    return 1;
  }
  return if_link_set(&a->link, key, v, err, cap);
}

static plan_accel *new_accel(plan *p, const char *name, char *err, size_t cap) {
  if (p->naccel == PLAN_MAX_ACCEL) {
    snprintf(err, cap, "at most %d accelerators", PLAN_MAX_ACCEL);
    return NULL;
  }
  for (int i = 0; i < p->naccel; i++)
    if (!strcmp(p->accel[i].name, name)) {
      snprintf(err, cap, "accelerator '%s' is declared twice", name);
      return NULL;
    }
  plan_accel *a = &p->accel[p->naccel];
  memset(a, 0, sizeof *a);
  snprintf(a->name, sizeof a->name, "%s", name);
  if_link_init(&a->link, IF_LINK_NONE);
  return a;
}

/* Whether key= starts one of the comma-separated items of s[0..n). */
static int has_key(const char *s, size_t n, const char *key, size_t kl) {
  for (size_t i = 0; i < n;) {
    size_t len = strcspn(s + i, ",");
    if (len > kl && s[i + kl] == '=' && !strncmp(s + i, key, kl) && i + kl < n)
      return 1;
    i += len + 1;
  }
  return 0;
}

/* A key given twice in the "k=v,k=v" list s: the last one won, without a
 * word (constant:ns=1,ns=1000000). -1 naming it. */
static int key_twice(const char *s, char *err, size_t cap) {
  for (const char *kv = s; *kv;) {
    size_t len = strcspn(kv, ","), kl = strcspn(kv, "=,");
    if (kl < len && has_key(s, (size_t)(kv - s), kv, kl)) {
      snprintf(err, cap, "%.*s= is given twice; give it once", (int)kl, kv);
      return -1;
    }
    kv += len + (kv[len] == ',');
  }
  return 0;
}

/* Parse a model spec whose key=value list may carry accelerator keys. */
static int accel_model(plan_accel *a, const char *spec, char *err, size_t cap) {
  size_t len = strlen(spec);
  if (len > IF_SPEC_MAX) {
    snprintf(err, cap, "the model spec '%.40s...' is %zu characters long; at most %d are taken",
             spec, len, IF_SPEC_MAX);
    return -1;
  }
  const char *params = strchr(spec, ':');
  if (params && key_twice(params + 1, err, cap) != 0)
    return -1;
  char *model = strdup(spec), *rest = calloc(1, len + 1), *colon;
  free(a->spec);
  a->spec = strdup(spec);
  int rc = model && rest && a->spec ? 0 : -1;
  if (rc != 0)
    snprintf(err, cap, "out of memory");
  if (rc == 0 && (colon = strchr(model, ':')) != NULL) {
    char *save = NULL;
    for (char *kv = strtok_r(colon + 1, ",", &save); kv && rc == 0;
         kv = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(kv, '=');
      int k = 0;
      if (eq) {
        *eq = 0;
        k = accel_key(a, kv, eq + 1, err, cap);
        *eq = '=';
      }
      if (k < 0)
        rc = -1;
      else if (k == 0) /* rest is as long as the spec: it fits */
        sprintf(rest + strlen(rest), "%s%s", rest[0] ? "," : "", kv);
    }
    if (rest[0])
      strcpy(colon + 1, rest);
    else
      *colon = 0;
  }
  if (rc == 0 && if_model_parse(&a->model, model, err, cap) != IF_OK)
    rc = -1;
  free(model);
  free(rest);
  return rc;
}

/* An accelerator that is not kept (a->model may be NULL). */
static void accel_drop(plan_accel *a) {
  if_model_free(a->model);
  free(a->spec);
  a->model = NULL;
  a->spec = NULL;
}

/* ---- rules ---------------------------------------------------------------- */

static plan_rule *new_rule(plan *p) {
  plan_rule *nr = realloc(p->rules, (size_t)(p->nrules + 1) * sizeof *nr);
  if (!nr)
    return NULL;
  p->rules = nr;
  plan_rule *r = &p->rules[p->nrules++];
  memset(r, 0, sizeof *r);
  r->size_max = UINT64_MAX;
  r->accel = -1;
  return r;
}

static int rule_selector(plan_rule *r, const char *w, char *err, size_t cap) {
  const char *eq = strchr(w, '=');
  if (!eq) {
    snprintf(err, cap, "'%s' is not a selector: use api=, type=, site=, module=, size=", w);
    return -1;
  }
  size_t kl = (size_t)(eq - w);
  const char *v = eq + 1;
  /* A second one replaced the first without a word, where a reader takes
   * every selector to be required. */
  int twice = kl == 3 && !strncmp(w, "api", 3)      ? r->api_mask != 0
              : kl == 4 && !strncmp(w, "type", 4)   ? r->type_glob != NULL
              : kl == 4 && !strncmp(w, "site", 4)   ? r->site_glob != NULL
              : kl == 6 && !strncmp(w, "module", 6) ? r->module_glob != NULL
              : kl == 4 && !strncmp(w, "size", 4)   ? r->size_min || r->size_max != UINT64_MAX
                                                    : 0;
  if (twice) {
    snprintf(err, cap, "%.*s= is given twice in this rule: %s", (int)kl, w,
             kl == 3 ? "list the APIs in one (api=pb.pack,pb.unpack)"
                     : "give one; for calls matching either, write a rule for each");
    return -1;
  }
  if (kl == 3 && !strncmp(w, "api", 3))
    return parse_apis(v, &r->api_mask, err, cap);
  if (kl == 4 && !strncmp(w, "type", 4))
    return (r->type_glob = strdup(v)) ? 0 : -1;
  if (kl == 4 && !strncmp(w, "site", 4))
    return (r->site_glob = strdup(v)) ? 0 : -1;
  if (kl == 6 && !strncmp(w, "module", 6))
    return (r->module_glob = strdup(v)) ? 0 : -1;
  if (kl == 4 && !strncmp(w, "size", 4)) {
    int rc = parse_range(v, &r->size_min, &r->size_max);
    if (rc == 0)
      return 0;
    if (rc == -2)
      snprintf(err, cap,
               "size=%s: an end is past 16 EiB, more than any request; leave the end "
               "out for no bound (size=64K-)",
               v);
    else if (r->size_min > r->size_max && r->size_max != 0) /* parsed, in the wrong order */
      snprintf(err, cap, "size=%s: its first end is above its second; write the smaller first", v);
    else
      snprintf(err, cap, "size=%s is not a byte range like 0-4096, 64K- or -1M", v);
    return -1;
  }
  snprintf(err, cap, "unknown selector '%.*s': use api=, type=, site=, module=, size=", (int)kl, w);
  return -1;
}

static int find_accel(const plan *p, const char *name) {
  for (int i = 0; i < p->naccel; i++)
    if (!strcmp(p->accel[i].name, name))
      return i;
  return -1;
}

/* offload SELECTOR... to NAME  |  keep SELECTOR... */
static int parse_rule(plan *p, char **w, int n, int line, char *err, size_t cap) {
  plan_rule *r = new_rule(p);
  if (!r) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  r->line = line;
  r->keep = !strcmp(w[0], "keep");
  int end = n;
  if (r->keep && n >= 3 && !strcmp(w[n - 2], "to")) {
    snprintf(err, cap, "a keep rule names no accelerator: take 'to %s' away", w[n - 1]);
    return -1;
  }
  if (!r->keep) {
    if (n < 3 || strcmp(w[n - 2], "to")) {
      snprintf(err, cap, "offload rules end with 'to ACCELERATOR'");
      return -1;
    }
    if ((r->accel = find_accel(p, w[n - 1])) < 0) {
      snprintf(err, cap, "no accelerator named '%s' is declared above", w[n - 1]);
      return -1;
    }
    end = n - 2;
  }
  for (int i = 1; i < end; i++)
    if (rule_selector(r, w[i], err, cap) != 0)
      return -1;
  return 0;
}

/* accel NAME MODEL[:k=v,...] [engines=N] [link=KIND] [link_*=V]... */
static int parse_accel(plan *p, char **w, int n, char *err, size_t cap) {
  if (n < 3) {
    snprintf(err, cap, "write: accel NAME MODEL[:key=value,...] [engines=N] [link=KIND]");
    return -1;
  }
  plan_accel *a = new_accel(p, w[1], err, cap);
  if (!a)
    return -1;
  if (accel_model(a, w[2], err, cap) != 0) {
    accel_drop(a);
    return -1;
  }
  const char *params = strchr(w[2], ':');
  for (int i = 3; i < n; i++) {
    char *eq = strchr(w[i], '=');
    int rc = -1;
    size_t kl = eq ? (size_t)(eq - w[i]) : 0;
    int twice = eq && params && has_key(params + 1, strlen(params + 1), w[i], kl);
    for (int j = 3; j < i && eq && !twice; j++)
      twice = has_key(w[j], strlen(w[j]), w[i], kl);
    if (twice)
      snprintf(err, cap, "%.*s= is given twice for accelerator %s; give it once", (int)kl, w[i],
               w[1]);
    else if (eq) {
      *eq = 0;
      rc = accel_key(a, w[i], eq + 1, err, cap);
      *eq = '=';
    }
    if (!twice && (rc == 0 || !eq))
      snprintf(err, cap, "'%s' is not an accelerator setting (engines=, link=, link_rtt_ns=, "
                         "link_gbps=, link_poll_ns=, link_onchip_ns=)",
               w[i]);
    if (twice || rc <= 0) {
      accel_drop(a);
      return -1;
    }
  }
  if (if_link_check(&a->link, err, cap) != 0) {
    accel_drop(a);
    return -1;
  }
  p->naccel++;
  return 0;
}

/* Words split at blanks; double quotes keep blanks in a word (a JPEG class
 * is "baseline 4:2:0": type="baseline 4:2:0") and are taken out. -1 for a
 * quote left open. */
static int split_words(char *line, char **w) {
  int n = 0;
  for (char *s = line; *s && n < MAX_WORDS;) {
    while (isspace((unsigned char)*s))
      s++;
    if (!*s || *s == '#')
      break;
    char *d = s;
    w[n++] = d;
    int quoted = 0;
    for (; *s && (quoted || !isspace((unsigned char)*s)); s++)
      if (*s == '"')
        quoted = !quoted;
      else
        *d++ = *s;
    if (quoted)
      return -1;
    if (*s)
      s++;
    *d = 0;
  }
  return n;
}

static int parse_line(plan *p, char *line, int lineno, char *err, size_t cap) {
  char *w[MAX_WORDS];
  int n = split_words(line, w);
  if (n < 0) {
    snprintf(err, cap, "a double quote is not closed");
    return -1;
  }
  if (n == 0)
    return 0;
  if (!strcmp(w[0], "accel"))
    return parse_accel(p, w, n, err, cap);
  if (!strcmp(w[0], "offload") || !strcmp(w[0], "keep"))
    return parse_rule(p, w, n, lineno, err, cap);
  snprintf(err, cap, "'%s' starts no known line: use accel, offload or keep", w[0]);
  return -1;
}

/* Whether selector glob a selects every call glob b does (NULL: any):
 * the same text, or b a plain name that a matches (a call's type, symbol
 * or module is then b itself, so a matches it too). */
static int glob_covers(const char *a, const char *b) {
  if (!a)
    return 1;
  if (!b)
    return 0;
  return !strcmp(a, b) || (!strpbrk(b, "*?[\\") && fnmatch(a, b, 0) == 0);
}

/* Whether rule a selects every call rule b does. */
static int rule_covers(const plan_rule *a, const plan_rule *b) {
  return (a->api_mask == 0 || (b->api_mask != 0 && (b->api_mask & ~a->api_mask) == 0)) &&
         glob_covers(a->type_glob, b->type_glob) && glob_covers(a->site_glob, b->site_glob) &&
         glob_covers(a->module_glob, b->module_glob) && a->size_min <= b->size_min &&
         a->size_max >= b->size_max;
}

/* A rule an earlier one always wins over (the first that matches decides)
 * never applies: a `keep api=pb.pack` after `offload api=protobuf to a`
 * changed nothing, without a word; so did a `keep type=app.Req` after
 * `offload type=app.* to a`. Told where every selector of the earlier rule
 * takes all the later one's calls (rule_covers). */
static void warn_shadowed(const plan *p, const char *path) {
  for (int j = 1; j < p->nrules; j++) {
    const plan_rule *b = &p->rules[j];
    for (int i = 0; i < j; i++) {
      const plan_rule *a = &p->rules[i];
      if (rule_covers(a, b)) {
        cli_warn("%s:%d: this rule never applies: the rule on line %d takes every call it "
                 "selects (the first rule that matches decides); put it first",
                 path, b->line, a->line);
        break;
      }
    }
  }
}

/* Why no call came to rule r, given the selectors some call met: the
 * first selector none met, with where to find the recording's own names;
 * else the selectors together, or earlier rules. */
static void warn_unused_rule(const plan *p, const plan_rule *r, unsigned met) {
  static const char what[] = "no call of this recording comes to this rule";
  if (!(met & PLAN_SEL_API))
    cli_warn("%s:%d: %s: the recording has no call of any of its APIs; 'standin report --by "
             "api' lists the APIs it has",
             p->source, r->line, what);
  else if (!(met & PLAN_SEL_TYPE))
    cli_warn("%s:%d: %s: no recorded call's type matches type=%s; 'standin report --by type' "
             "lists the recorded types",
             p->source, r->line, what, r->type_glob);
  else if (!(met & PLAN_SEL_SITE))
    cli_warn("%s:%d: %s: no recorded call site matches site=%s; 'standin report --by site' "
             "lists the call sites",
             p->source, r->line, what, r->site_glob);
  else if (!(met & PLAN_SEL_MODULE))
    cli_warn("%s:%d: %s: no recorded call site is in an object matching module=%s; 'standin "
             "dump --format json' shows each call's frames and their objects",
             p->source, r->line, what, r->module_glob);
  else
    cli_warn("%s:%d: %s: no call matches all of its selectors at once%s, or rules above it "
             "take them",
             p->source, r->line, what,
             r->size_min || r->size_max != UINT64_MAX
                 ? " (size= included: 'standin export' gives each call's request_size)"
                 : "");
}

void plan_warn_unused(const plan *p, const uint64_t *calls, const uint8_t *met) {
  if (!strcmp(p->source, "--iface"))
    return;
  for (int j = 0; j < p->nrules; j++) {
    int shadowed = 0;
    for (int i = 0; i < j && !shadowed; i++)
      shadowed = rule_covers(&p->rules[i], &p->rules[j]);
    if (calls[j] || shadowed)
      continue;
    if (met)
      warn_unused_rule(p, &p->rules[j], met[j]);
    else
      cli_warn("%s:%d: no call of this recording comes to this rule: none matches its "
               "selectors (a misspelt type or site?), or rules above it take them",
               p->source, p->rules[j].line);
  }
}

/* Editors on Windows start a UTF-8 file with a byte order mark; as part of
 * the first word it was an unknown line that printed as "accel". */
#define UTF8_BOM "\xef\xbb\xbf"

int plan_load(plan *p, const char *path) {
  FILE *f = fopen(path, "r");
  struct stat st;
  if (!f) {
    cli_err("cannot read plan %s: %s", path, strerror(errno));
    return -1;
  }
  /* a directory opens, and reads as an empty plan */
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    cli_err("plan %s is a directory; give a plan file (docs/PLANS.md)", path);
    fclose(f);
    return -1;
  }
  snprintf(p->source, sizeof p->source, "%s", path);
  /* room for a model spec of IF_SPEC_MAX and the settings plan_save writes */
  char line[IF_SPEC_MAX + 1024], err[512];
  int lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    lineno++;
    if (!strchr(line, '\n') && !feof(f)) {
      cli_err("%s:%d: line longer than %zu characters", path, lineno, sizeof line - 1);
      rc = -1;
    } else if (parse_line(p, line + (lineno == 1 && !strncmp(line, UTF8_BOM, 3) ? 3 : 0), lineno,
                          err, sizeof err) != 0) {
      cli_err("%s:%d: %s", path, lineno, err);
      rc = -1;
    }
  }
  if (rc == 0 && ferror(f)) { /* not the end: the rest of the plan is missing */
    cli_err("cannot read plan %s: %s", path, strerror(errno));
    rc = -1;
  }
  fclose(f);
  if (rc == 0 && p->nrules == 0)
    cli_warn("%s offloads nothing: it has no offload rule, so every call stays in software",
             path);
  if (rc == 0)
    warn_shadowed(p, path);
  return rc;
}

/* A plugin's name as an accelerator's: one word that reports, --vary
 * and a saved plan can hold. An empty name left a blank column and
 * '--vary .ns', a newline split report rows, a blank split sweep's plan. */
static void one_word(char *name) {
  for (char *c = name; *c; c++)
    if ((unsigned char)*c <= ' ' || *c == 0x7f || *c == '"' || (c == name && *c == '#'))
      *c = '_';
  if (!name[0])
    strcpy(name, "plugin");
}

int plan_add_iface(plan *p, const char *spec) {
  char err[512], name[32];
  const char *colon = strchr(spec, ':'), *eq = strchr(spec, '=');
  const char *model = spec;
  uint64_t mask = 0;
  snprintf(p->source, sizeof p->source, "--iface");
  if (eq && (!colon || eq < colon)) {
    char api[64];
    snprintf(api, sizeof api, "%.*s", (int)(eq - spec), spec);
    if (parse_apis(api, &mask, err, sizeof err) != 0) {
      cli_err("--iface %s: %s", spec, err);
      return -1;
    }
    model = eq + 1;
  }
  plan_accel *a = new_accel(p, "", err, sizeof err);
  if (!a || accel_model(a, model, err, sizeof err) != 0 ||
      if_link_check(&a->link, err, sizeof err) != 0) {
    if (a)
      accel_drop(a);
    cli_err("--iface %.200s%s: %s", spec, strlen(spec) > 200 ? "..." : "", err);
    return -1;
  }
  /* --iface options form one plan, first match wins: one whose APIs an
   * earlier one already takes (all of them, or a superset) gets no call,
   * which is never what was meant (most often: two models to compare) */
  for (int i = 0; i < p->nrules; i++)
    if (p->rules[i].api_mask == 0 || (mask != 0 && (mask & ~p->rules[i].api_mask) == 0)) {
      cli_warn("--iface %s takes no call: the --iface options form one plan, and an earlier "
               "one takes every call it would (the first that matches wins); to compare "
               "models, give each its own --plan file, or vary a parameter with 'standin sweep'",
               spec);
      break;
    }
  /* name the accelerator after its model; the same model twice is numbered */
  snprintf(name, sizeof name, "%s", if_model_name(a->model));
  one_word(name);
  if (find_accel(p, name) >= 0) {
    char numbered[48];
    snprintf(numbered, sizeof numbered, "%.24s#%d", name, p->naccel % 100);
    numbered[sizeof name - 1] = 0;
    memcpy(name, numbered, sizeof name);
  }
  memcpy(a->name, name, sizeof a->name);
  p->naccel++;
  plan_rule *r = new_rule(p);
  if (!r)
    return -1;
  r->api_mask = mask;
  r->accel = p->naccel - 1;
  return 0;
}

void plan_free(plan *p) {
  for (int i = 0; i < p->naccel; i++)
    accel_drop(&p->accel[i]);
  for (int i = 0; i < p->nrules; i++) {
    free(p->rules[i].type_glob);
    free(p->rules[i].site_glob);
    free(p->rules[i].module_glob);
  }
  free(p->rules);
  memset(p, 0, sizeof *p);
}

/* ---- matching ------------------------------------------------------------- */

/* A frame as "NAME+0xOFFSET", the way report labels it; a glob that names
 * an offset matches its hex digits in either case. */
static int at_matches(const char *glob, const char *name, uint64_t off, int offsets) {
  char at[PATH_MAX + 24];
  snprintf(at, sizeof at, "%s+0x%llx", name, (unsigned long long)off);
  return fnmatch(glob, at, offsets ? FNM_CASEFOLD : 0) == 0;
}

static int site_matches(const char *glob, const st_site *s, int modules) {
  if (!s)
    return 0;
  int offsets = !modules && strstr(glob, "+0") != NULL; /* "+0x90b6", "+0X90B6" */
  for (uint32_t i = 0; i < s->nframes; i++) {
    const st_frame *fr = &s->frames[i];
    const char *v = modules ? fr->module : fr->symbol;
    /* a frame also by its object and offset, as replay's --on-miss abort
     * and a stripped program's labels name it ("rpc+0x90b6"), or by its
     * function and the offset in it, as report's labels do
     * ("serve_one+0x36", "SplashOutputDev::drawImage+0x10d") */
    const char *m = fr->module, *mb = m ? strrchr(m, '/') : NULL;
    if (!modules && m && *m && at_matches(glob, mb ? mb + 1 : m, fr->offset, offsets))
      return 1;
    if (offsets && v && *v &&
        (at_matches(glob, v, fr->sym_offset, 1) ||
         (fr->pretty && at_matches(glob, fr->pretty, fr->sym_offset, 1))))
      return 1;
    if (!v || !*v)
      continue;
    if (fnmatch(glob, v, 0) == 0)
      return 1;
    /* a C++ symbol also as report shows it ("ns::Cls::fn") */
    if (!modules && s->frames[i].pretty && fnmatch(glob, s->frames[i].pretty, 0) == 0)
      return 1;
    const char *base = strrchr(v, '/');
    if (modules && base && fnmatch(glob, base + 1, 0) == 0)
      return 1;
  }
  return 0;
}

/* Every selector but size=. */
static int rule_matches_unsized(const plan_rule *r, int api, const char *type,
                                const st_site *site) {
  if (r->api_mask && !(r->api_mask & (1ull << (api & 63))))
    return 0;
  if (r->type_glob && fnmatch(r->type_glob, type ? type : "", 0) != 0)
    return 0;
  if (r->site_glob && !site_matches(r->site_glob, site, 0))
    return 0;
  return !r->module_glob || site_matches(r->module_glob, site, 1);
}

static int size_matches(const plan_rule *r, uint64_t size) {
  return size >= r->size_min && size <= r->size_max;
}

int plan_match(const plan *p, int api, const char *type, const st_site *site, uint64_t size) {
  for (int i = 0; i < p->nrules; i++)
    if (size_matches(&p->rules[i], size) && rule_matches_unsized(&p->rules[i], api, type, site))
      return i;
  return -1;
}

uint64_t plan_match_mask(const plan *p, int api, const char *type, const st_site *site) {
  uint64_t mask = 0;
  for (int i = 0; i < p->nrules && i < 64; i++)
    if (rule_matches_unsized(&p->rules[i], api, type, site))
      mask |= 1ull << i;
  return mask;
}

void plan_selectors_met(const plan *p, int api, const char *type, const st_site *site,
                        uint8_t *met) {
  for (int i = 0; i < p->nrules; i++) {
    const plan_rule *r = &p->rules[i];
    if (!r->api_mask || (r->api_mask & (1ull << (api & 63))))
      met[i] |= PLAN_SEL_API;
    if (!r->type_glob || fnmatch(r->type_glob, type ? type : "", 0) == 0)
      met[i] |= PLAN_SEL_TYPE;
    if (!r->site_glob || site_matches(r->site_glob, site, 0))
      met[i] |= PLAN_SEL_SITE;
    if (!r->module_glob || site_matches(r->module_glob, site, 1))
      met[i] |= PLAN_SEL_MODULE;
  }
}

int plan_first_sized(const plan *p, uint64_t mask, uint64_t size) {
  for (; mask; mask &= mask - 1) {
    int i = __builtin_ctzll(mask);
    if (size_matches(&p->rules[i], size))
      return i;
  }
  return -1;
}

uint64_t plan_request_size(const st_call *c) {
  if (st_api_family(c->api) == ST_FAMILY_PROTOBUF && c->api != ST_API_PB_UNPACK)
    return c->nfeat > ST_PBF_ENCODED_SIZE ? c->feat[ST_PBF_ENCODED_SIZE] : 0;
  return c->req_len;
}

/* ---- deciding a call ------------------------------------------------------ */

void plan_request(standin_request *r, const st_call *c, const char *type) {
  *r = (standin_request){.api = c->api, .nfeat = c->nfeat, .feat = c->feat, .type = type,
                         .recorded_ns = c->latency_ns, .req_len = plan_request_size(c),
                         .resp_len = c->resp_len, .fp = c->fp};
}

void plan_decide(const plan *p, int rule, const standin_request *r, uint64_t resp_bytes,
                 plan_decision *d) {
  *d = (plan_decision){.outcome = PLAN_NOT_SELECTED, .rule = rule, .accel = -1};
  if (rule < 0)
    return;
  if (p->rules[rule].keep) {
    d->outcome = PLAN_KEPT;
    return;
  }
  d->accel = p->rules[rule].accel;
  const plan_accel *a = &p->accel[d->accel];
  if (if_model_predict(a->model, r, &d->service_ns) != IF_OK) {
    d->outcome = PLAN_UNSUPPORTED;
    d->why = if_model_why();
    d->service_ns = 0;
    return;
  }
  /* kept in 32 bits (rdb_sample, whatif's ev_plan), where UINT32_MAX says
   * "all of the service time": a longer interval than 4.29 s counts as
   * 4.29 s (cut to its low 32 bits, one of 5 s held the engine 0.7 s) */
  d->busy_ns = if_model_busy();
  if (d->busy_ns < d->service_ns && d->busy_ns >= UINT32_MAX)
    d->busy_ns = UINT32_MAX - 1;
  if (if_link_cost(&a->link, r->req_len, resp_bytes, &d->link_in_ns, &d->link_out_ns) != 0) {
    d->outcome = PLAN_UNSUPPORTED;
    d->why = "its link would take more than 4.29 s each way (is link_gbps in GB/s?): not taken";
    d->service_ns = 0;
    return;
  }
  d->outcome = PLAN_OFFLOAD;
  /* kept in 32 bits too (rdb_sample, ev_plan): longer counts as 4.29 s */
  d->fault_ns = if_model_fault_ns(a->model, r);
  if (d->fault_ns > UINT32_MAX)
    d->fault_ns = UINT32_MAX;
  d->source_ns = if_model_source_ns(a->model, r);
  if (d->source_ns > UINT32_MAX)
    d->source_ns = UINT32_MAX;
  uint64_t recorded_fault = if_recorded_fault_ns(r),
           whole = d->service_ns + d->link_in_ns + d->link_out_ns + d->fault_ns + d->source_ns;
  d->faults_over_ns = recorded_fault > whole ? recorded_fault - whole : 0;
  int cold = 0;
  switch (a->deliver) {
  case PLAN_DELIVER_MEMORY: cold = 1000; break;
  case PLAN_DELIVER_RECORDED:
    cold = if_model_out_cold(a->model, r);
    cold = cold >= 0 ? cold : if_recorded_out_cold(r);
    break;
  case PLAN_DELIVER_DEFAULT: cold = if_model_out_cold(a->model, r); break;
  }
  d->out_cold = (uint16_t)(cold > 0 ? cold : 0);
}

void plan_reset(const plan *p) {
  for (int i = 0; i < p->naccel; i++)
    if (p->accel[i].model)
      if_model_reset(p->accel[i].model);
}

int plan_stateful(const plan *p) {
  for (int i = 0; i < p->naccel; i++)
    if (p->accel[i].model && if_model_stateful(p->accel[i].model))
      return 1;
  return 0;
}

void plan_evaluate(const plan *p, const standin_request *r, const st_site *site, uint64_t size,
                   uint64_t resp_bytes, plan_decision *d) {
  plan_decide(p, plan_match(p, (int)r->api, r->type, site, size), r, resp_bytes, d);
}

/* ---- variants ------------------------------------------------------------- */

/* Exactly these: a plugin's own "links=4" was taken for one, and dropped
 * from the model of every value of a sweep. */
static int is_accel_key(const char *key) {
  static const char *const keys[] = {"engines",     "deliver",   "link",        "link_onchip_ns",
                                     "link_rtt_ns", "link_gbps", "link_poll_ns"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    if (!strcmp(key, keys[i]))
      return 1;
  return 0;
}

int plan_is_setting(const char *key) {
  return is_accel_key(key);
}

/* The model part of an accelerator's spec ("MODEL:k=v,..." without the
 * accelerator keys), with key=value set when key is not NULL; allocated,
 * NULL when out of memory. */
static char *model_spec(const char *spec, const char *key, const char *value) {
  size_t cap = strlen(spec) + (key ? strlen(key) + strlen(value) + 2 : 0) + 1, o;
  char *copy = strdup(spec), *out = malloc(cap), *save = NULL;
  if (!copy || !out) {
    free(copy);
    free(out);
    return NULL;
  }
  char *colon = strchr(copy, ':');
  if (colon)
    *colon = 0;
  o = (size_t)sprintf(out, "%s", copy);
  int sep = ':', done = key == NULL;
  for (char *kv = colon ? strtok_r(colon + 1, ",", &save) : NULL; kv;
       kv = strtok_r(NULL, ",", &save)) {
    size_t kl = strcspn(kv, "=");
    char k[64];
    snprintf(k, sizeof k, "%.*s", (int)kl, kv);
    if (kl < sizeof k && is_accel_key(k))
      continue;
    if (key && kl == strlen(key) && !strncmp(kv, key, kl)) {
      o += (size_t)sprintf(out + o, "%c%s=%s", sep, key, value);
      done = 1;
    } else {
      o += (size_t)sprintf(out + o, "%c%s", sep, kv);
    }
    sep = ',';
  }
  if (!done)
    sprintf(out + o, "%c%s=%s", sep, key, value);
  free(copy);
  return out;
}

static int new_model(if_model **m, const char *spec, char *err, size_t cap) {
  char *ms = model_spec(spec, NULL, NULL);
  if (!ms) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  int rc = if_model_parse(m, ms, err, cap) == IF_OK ? 0 : -1;
  free(ms);
  return rc;
}

int plan_copy(plan *dst, const plan *src) {
  memset(dst, 0, sizeof *dst);
  memcpy(dst->accel, src->accel, sizeof src->accel);
  dst->naccel = src->naccel;
  memcpy(dst->source, src->source, sizeof dst->source);
  char err[512];
  int rc = 0;
  for (int i = 0; i < src->naccel; i++) {
    dst->accel[i].model = NULL;
    dst->accel[i].spec = strdup(src->accel[i].spec);
    if (!dst->accel[i].spec && rc == 0) {
      cli_err("out of memory");
      rc = -1;
    }
  }
  for (int i = 0; i < src->naccel && rc == 0; i++)
    if ((rc = new_model(&dst->accel[i].model, src->accel[i].spec, err, sizeof err)))
      cli_err("accelerator %s: %s", src->accel[i].name, err);
  dst->rules = calloc((size_t)src->nrules + 1, sizeof *dst->rules);
  if (rc == 0 && !dst->rules)
    rc = -1;
  for (int i = 0; rc == 0 && i < src->nrules; i++) {
    const plan_rule *s = &src->rules[i];
    plan_rule *d = &dst->rules[dst->nrules++];
    *d = *s;
    d->type_glob = s->type_glob ? strdup(s->type_glob) : NULL;
    d->site_glob = s->site_glob ? strdup(s->site_glob) : NULL;
    d->module_glob = s->module_glob ? strdup(s->module_glob) : NULL;
    /* a glob lost to a failed copy would make the rule match every call */
    if ((s->type_glob && !d->type_glob) || (s->site_glob && !d->site_glob) ||
        (s->module_glob && !d->module_glob)) {
      cli_err("out of memory");
      rc = -1;
    }
  }
  if (rc != 0)
    plan_free(dst);
  return rc;
}

int plan_set_param(plan *p, const char *accel, const char *key, const char *value, char *err,
                   size_t cap) {
  int ai = find_accel(p, accel);
  if (ai < 0) {
    size_t o = (size_t)snprintf(err, cap, "no accelerator named '%s'; the plan has", accel);
    for (int i = 0; i < p->naccel && o < cap; i++)
      o += (size_t)snprintf(err + o, cap - o, " %s", p->accel[i].name);
    return -1;
  }
  plan_accel *a = &p->accel[ai];
  if (is_accel_key(key))
    return accel_key(a, key, value, err, cap) == 1 && if_link_check(&a->link, err, cap) == 0 ? 0
                                                                                             : -1;
  if_model *m;
  char *ms = model_spec(a->spec, key, value);
  if (!ms) {
    snprintf(err, cap, "out of memory");
    return -1;
  }
  if (new_model(&m, ms, err, cap) != 0) {
    free(ms);
    return -1;
  }
  if_model_free(a->model);
  a->model = m;
  free(a->spec);
  a->spec = ms;
  return 0;
}

/* A glob as one plan word: blanks would split it. */
static void put_glob(FILE *f, const char *sel, const char *g) {
  if (!g)
    return;
  fprintf(f, " %s=", sel);
  for (; *g; g++)
    fputc(isspace((unsigned char)*g) ? '?' : *g, f);
}

static void put_rule(FILE *f, const plan *p, const plan_rule *r) {
  fputs(r->keep ? "keep" : "offload", f);
  if (r->api_mask) {
    const char *sep = " api=";
    for (size_t i = 0; i < sizeof api_names / sizeof api_names[0]; i++) {
      uint64_t m = api_names[i].mask;
      if ((m & (m - 1)) == 0 && (r->api_mask & m)) {
        fprintf(f, "%s%s", sep, api_names[i].name);
        sep = ",";
      }
    }
  }
  put_glob(f, "type", r->type_glob);
  put_glob(f, "site", r->site_glob);
  put_glob(f, "module", r->module_glob);
  if (r->size_min || r->size_max != UINT64_MAX) {
    fprintf(f, " size=%llu-", (unsigned long long)r->size_min);
    if (r->size_max != UINT64_MAX)
      fprintf(f, "%llu", (unsigned long long)r->size_max);
  }
  if (!r->keep)
    fprintf(f, " to %s", p->accel[r->accel].name);
  fputc('\n', f);
}

int plan_save(const plan *p, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f)
    return -1;
  fprintf(f, "# written by standin from %s\n", p->source);
  for (int i = 0; i < p->naccel; i++) {
    const plan_accel *a = &p->accel[i];
    char *ms = model_spec(a->spec, NULL, NULL);
    if (!ms) {
      fclose(f);
      errno = ENOMEM;
      return -1;
    }
    /* a plugin path may hold blanks: quoted, it stays one word */
    int q = ms[strcspn(ms, " \t\n\v\f\r")] != 0;
    fprintf(f, "accel %s %s%s%s engines=%u link=%s", a->name, q ? "\"" : "", ms, q ? "\"" : "",
            a->engines, if_link_name(&a->link));
    free(ms);
    static const char *const deliver[] = {NULL, "cache", "memory", "recorded"};
    if (a->deliver > PLAN_DELIVER_DEFAULT && a->deliver <= PLAN_DELIVER_RECORDED)
      fprintf(f, " deliver=%s", deliver[a->deliver]);
    if (a->link.kind == IF_LINK_ONCHIP)
      fprintf(f, " link_onchip_ns=%.17g", a->link.onchip_ns);
    if (a->link.kind == IF_LINK_PCIE)
      fprintf(f, " link_rtt_ns=%.17g link_gbps=%.17g link_poll_ns=%.17g", a->link.rtt_ns,
              a->link.gbps, a->link.poll_ns);
    fputc('\n', f);
  }
  for (int i = 0; i < p->nrules; i++)
    put_rule(f, p, &p->rules[i]);
  return fclose(f);
}

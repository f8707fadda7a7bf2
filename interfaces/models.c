/* models.c — parsing model specs and the generic built-in models.
 *
 * Every model is a row in `models[]`: its parameters with defaults, and a
 * predict function over the parsed parameter values. Accelerator models
 * (core_jpeg, Protoacc, ...) are rows too. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface.h"

#define MAX_PARAMS 12

typedef struct {
  const char *key;
  double def;
} param_def;

typedef struct {
  const char *name;
  const char *summary;
  param_def params[MAX_PARAMS];
  int (*predict)(const double *p, const if_request *r, uint64_t *ns);
} model_def;

struct if_model {
  const model_def *def;
  double p[MAX_PARAMS];
  char desc[256];
};

static uint64_t to_ns(double v) {
  return v <= 0 || !isfinite(v) ? 0 : (uint64_t)llround(v);
}

/* ---- generic models ------------------------------------------------------ */

static int p_software(const double *p, const if_request *r, uint64_t *ns) {
  (void)p;
  *ns = r->recorded_ns;
  return IF_OK;
}

static int p_scale(const double *p, const if_request *r, uint64_t *ns) {
  *ns = to_ns(p[0] * (double)r->recorded_ns);
  return IF_OK;
}

static int p_constant(const double *p, const if_request *r, uint64_t *ns) {
  (void)r;
  *ns = to_ns(p[0]);
  return IF_OK;
}

static int p_linear(const double *p, const if_request *r, uint64_t *ns) {
  *ns = to_ns(p[0] + p[1] * (double)(r->req_len + r->resp_len));
  return IF_OK;
}

static const model_def models[] = {
    {"software", "the recorded latency of the matching call (replay reproduces the recording)",
     {{0}}, p_software},
    {"scale", "recorded latency times factor: 'what if this code were factor times as slow'",
     {{"factor", 1.0}}, p_scale},
    {"constant", "the same service time for every request", {{"ns", 0}}, p_constant},
    {"linear", "base_ns + ns_per_byte * (request + response bytes)",
     {{"base_ns", 0}, {"ns_per_byte", 0}}, p_linear},
};

#define NMODELS (sizeof models / sizeof models[0])

/* ---- parsing ------------------------------------------------------------- */

static int nparams(const model_def *d) {
  int n = 0;
  while (n < MAX_PARAMS && d->params[n].key)
    n++;
  return n;
}

static int set_param(if_model *m, const char *kv, char *err, size_t cap) {
  const char *eq = strchr(kv, '=');
  if (!eq || eq == kv) {
    snprintf(err, cap, "model %s: '%s' is not key=value", m->def->name, kv);
    return IF_E_SPEC;
  }
  size_t kl = (size_t)(eq - kv);
  for (int i = 0; i < nparams(m->def); i++) {
    if (strlen(m->def->params[i].key) != kl || strncmp(m->def->params[i].key, kv, kl))
      continue;
    char *end;
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (!eq[1] || *end || errno || !isfinite(v) || v < 0) {
      snprintf(err, cap, "model %s: %.*s=%s is not a non-negative number", m->def->name, (int)kl,
               kv, eq + 1);
      return IF_E_SPEC;
    }
    m->p[i] = v;
    return IF_OK;
  }
  char known[256] = "";
  for (int i = 0; i < nparams(m->def); i++)
    snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
             m->def->params[i].key);
  snprintf(err, cap, "model %s has no parameter '%.*s' (it takes: %s)", m->def->name, (int)kl, kv,
           known[0] ? known : "none");
  return IF_E_SPEC;
}

static void describe(if_model *m) {
  size_t o = (size_t)snprintf(m->desc, sizeof m->desc, "%s", m->def->name);
  for (int i = 0; i < nparams(m->def) && o < sizeof m->desc; i++)
    o += (size_t)snprintf(m->desc + o, sizeof m->desc - o, "%c%s=%g", i ? ',' : ':',
                          m->def->params[i].key, m->p[i]);
}

int if_model_parse(if_model **out, const char *spec, char *err, size_t cap) {
  *out = NULL;
  size_t nl = strcspn(spec, ":");
  const model_def *d = NULL;
  for (size_t i = 0; i < NMODELS; i++)
    if (strlen(models[i].name) == nl && !strncmp(models[i].name, spec, nl))
      d = &models[i];
  if (!d) {
    snprintf(err, cap, "unknown model '%.*s'; 'standin models' lists them", (int)nl, spec);
    return IF_E_SPEC;
  }
  if_model *m = calloc(1, sizeof *m);
  if (!m)
    return IF_E_NOMEM;
  m->def = d;
  for (int i = 0; i < nparams(d); i++)
    m->p[i] = d->params[i].def;
  if (spec[nl] == ':') {
    char *copy = strdup(spec + nl + 1), *save = NULL;
    int rc = copy ? IF_OK : IF_E_NOMEM;
    for (char *kv = copy ? strtok_r(copy, ",", &save) : NULL; kv && rc == IF_OK;
         kv = strtok_r(NULL, ",", &save))
      rc = set_param(m, kv, err, cap);
    free(copy);
    if (rc != IF_OK) {
      free(m);
      return rc;
    }
  }
  describe(m);
  *out = m;
  return IF_OK;
}

int if_model_predict(const if_model *m, const if_request *r, uint64_t *ns) {
  return m->def->predict(m->p, r, ns);
}

const char *if_model_describe(const if_model *m) {
  return m->desc;
}

void if_model_free(if_model *m) {
  free(m);
}

const if_model_info *if_models(size_t *n) {
  static if_model_info info[NMODELS];
  static char params[NMODELS][160];
  for (size_t i = 0; i < NMODELS; i++) {
    size_t o = 0;
    params[i][0] = 0;
    for (int k = 0; k < nparams(&models[i]); k++)
      o += (size_t)snprintf(params[i] + o, sizeof params[i] - o, "%s%s=%g", k ? "," : "",
                            models[i].params[k].key, models[i].params[k].def);
    info[i] = (if_model_info){models[i].name, params[i], models[i].summary};
  }
  *n = NMODELS;
  return info;
}

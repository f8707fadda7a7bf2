/* planset.c — plans from --plan and --iface options (see planset.h). */
#include "planset.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"

void planset_init(planset *s) {
  memset(s, 0, sizeof *s);
  s->iface = -1;
}

static plan *new_plan(planset *s, const char *name) {
  if (s->n == PLANSET_MAX) {
    cli_err("at most %d plans at a time", PLANSET_MAX);
    return NULL;
  }
  plan *p = calloc(1, sizeof *p);
  char *n = strdup(name);
  if (!p || !n) {
    free(p);
    free(n);
    cli_err("out of memory");
    return NULL;
  }
  s->p[s->n] = p;
  s->name[s->n++] = n;
  return p;
}

int planset_add_file(planset *s, const char *path) {
  plan *p = new_plan(s, path);
  return p && plan_load(p, path) == 0 ? 0 : -1;
}

int planset_add_iface(planset *s, const char *spec) {
  if (s->iface < 0) {
    if (!new_plan(s, "--iface"))
      return -1;
    s->iface = s->n - 1;
  }
  char **name = &s->name[s->iface];
  size_t len = strlen(*name) + strlen(spec) + 16;
  char *nn = malloc(len);
  if (!nn)
    return -1;
  snprintf(nn, len, strcmp(*name, "--iface") ? "%s --iface %s" : "%s %s", *name, spec);
  free(*name);
  *name = nn;
  return plan_add_iface(s->p[s->iface], spec);
}

int planset_add_variant(planset *s, int i, const char *accel, const char *key, const char *value,
                        const char *name) {
  char err[512];
  plan *p = new_plan(s, name);
  if (!p)
    return -1;
  if (plan_copy(p, s->p[i]) != 0)
    return -1;
  if (plan_set_param(p, accel, key, value, err, sizeof err) != 0) {
    cli_err("%s.%s=%s: %s", accel, key, value, err);
    return -1;
  }
  return 0;
}

void planset_free(planset *s) {
  for (int i = 0; i < s->n; i++) {
    if (s->p[i])
      plan_free(s->p[i]);
    free(s->p[i]);
    free(s->name[i]);
  }
  planset_init(s);
}

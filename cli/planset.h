/* planset.h — the plans an offline command evaluates, from its command
 * line: every --iface SPEC together forms one plan (as for `standin
 * replay`), and every --plan FILE is one more plan. */
#ifndef STANDIN_CLI_PLANSET_H
#define STANDIN_CLI_PLANSET_H

#include "plan.h"

#define PLANSET_MAX 64

typedef struct {
  plan *p[PLANSET_MAX];
  char *name[PLANSET_MAX]; /* the file, or "--iface SPEC[ --iface SPEC]" */
  int n;
  int iface; /* index of the --iface plan, -1 if none */
} planset;

void planset_init(planset *s);

/* Add a plan file, or a --iface spec to the --iface plan. Print why and
 * return -1 on error. */
int planset_add_file(planset *s, const char *path);
int planset_add_iface(planset *s, const char *spec);

/* Add a copy of plan i with one parameter changed (standin sweep), named
 * name; -1 with a message on error. */
int planset_add_variant(planset *s, int i, const char *accel, const char *key, const char *value,
                        const char *name);

void planset_free(planset *s);

#endif

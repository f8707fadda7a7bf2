/* plan.h — offload plans: which calls go to which accelerator.
 *
 * A plan declares accelerators (a model, its device link, its number of
 * engines) and rules; the first rule that matches a call decides, and a
 * call no rule matches stays in software. `--iface SPEC` is the shorthand
 * for a one-accelerator plan. The file format is in docs/PLANS.md. */
#ifndef STANDIN_CLI_PLAN_H
#define STANDIN_CLI_PLAN_H

#include <stdint.h>

#include "iface.h"
#include "link.h"
#include "trace.h"

#define PLAN_MAX_ACCEL 16
#define PLAN_MAX_ENGINES 64

typedef struct {
  char name[32];
  char spec[256]; /* model spec as written */
  if_model *model;
  if_link link;
  uint32_t engines; /* 0 = unlimited: no queueing */
} plan_accel;

typedef struct {
  int keep;           /* 1: keep in software */
  uint64_t api_mask;  /* bit per st_api; 0 = any */
  char *type_glob;    /* message type / JPEG class, NULL = any */
  char *site_glob;    /* any call-site frame's symbol */
  char *module_glob;  /* any call-site frame's module (path or file name) */
  uint64_t size_min, size_max; /* request bytes, inclusive */
  int accel;          /* index into accel[] when !keep */
  int line;           /* where it was written (0: from --iface) */
} plan_rule;

typedef struct {
  plan_accel accel[PLAN_MAX_ACCEL];
  int naccel;
  plan_rule *rules;
  int nrules;
  char source[512]; /* file name, or "--iface" */
} plan;

/* Read a plan file. Errors are printed as FILE:LINE: what; returns -1. */
int plan_load(plan *p, const char *path);

/* Add "[API=]MODEL[:key=value,...]" as an accelerator with a rule sending
 * that API (or every API) to it. Accelerator keys engines=, link=, link_*
 * are taken out of the model's parameters. Prints why and returns -1 on
 * error. */
int plan_add_iface(plan *p, const char *spec);

void plan_free(plan *p);

/* The rule deciding a call: its index, or -1 when none matches (software).
 * `site` may be NULL when the call has no recorded site. */
int plan_match(const plan *p, int api, const char *type, const st_site *site, uint64_t size);

/* Request size a rule's size= compares: encoded bytes for message trees,
 * request bytes otherwise. */
uint64_t plan_request_size(const st_call *c);

#endif

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
#include "iface_link.h"
#include "trace.h"

#define PLAN_MAX_ACCEL 16
#define PLAN_MAX_ENGINES 64

typedef struct {
  char name[32];
  char *spec; /* model spec as written (allocated; at most IF_SPEC_MAX) */
  if_model *model;
  if_link link;
  uint32_t engines; /* 0 = unlimited: no queueing */
  int deliver;      /* PLAN_DELIVER_* */
} plan_accel;

/* Where an accelerator leaves its responses (deliver=): as its model's
 * recording measured it (software, scale, table; the caches for the other
 * models), in the caches, or in memory as a device's DMA would. */
enum { PLAN_DELIVER_DEFAULT = 0, PLAN_DELIVER_CACHE, PLAN_DELIVER_MEMORY, PLAN_DELIVER_RECORDED };

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
 * that API (or every API) to it. Accelerator keys engines=, deliver=, link=,
 * link_* are taken out of the model's parameters. Prints why and returns -1 on
 * error. */
int plan_add_iface(plan *p, const char *spec);

void plan_free(plan *p);

/* Selectors of a rule, as bits of plan_selectors_met's `met`. */
enum { PLAN_SEL_API = 1, PLAN_SEL_TYPE = 2, PLAN_SEL_SITE = 4, PLAN_SEL_MODULE = 8 };

/* OR into met[i], for every rule i, the bit of each of its selectors but
 * size= that a call of this API, type and site meets on its own (a rule
 * without that selector: met). Cheap enough per distinct API, type and
 * site; not per call. */
void plan_selectors_met(const plan *p, int api, const char *type, const st_site *site,
                        uint8_t *met);

/* Whether key is an accelerator setting (engines=, deliver=, link=,
 * link_*), not a parameter of its model. */
int plan_is_setting(const char *key);

/* After a pass over a recording in which calls[i] calls came to rule i: a
 * warning for each rule of a plan file that no call came to (a typo in a
 * type or site matches nothing, without a word), unless loading the plan
 * already said that an earlier rule takes its calls. With met (from
 * plan_selectors_met; NULL: not known) it names the selector that no
 * recorded call meets, and where to find the names that are there. */
void plan_warn_unused(const plan *p, const uint64_t *calls, const uint8_t *met);

/* The rule deciding a call: its index, or -1 when none matches (software).
 * `site` may be NULL when the call has no recorded site. */
int plan_match(const plan *p, int api, const char *type, const st_site *site, uint64_t size);

/* Request size a rule's size= compares: encoded bytes for message trees,
 * request bytes otherwise. */
uint64_t plan_request_size(const st_call *c);

/* ---- deciding one recorded call -------------------------------------------
 * Replay (cli/replaydb.c) and the offline analyses (cli/analysis.c) decide a
 * call the same way: first matching rule, the model's prediction, then the
 * link cost. */

enum {
  PLAN_OFFLOAD = 0,      /* served by accel */
  PLAN_NOT_SELECTED = 1, /* no rule matched */
  PLAN_KEPT = 2,         /* a keep rule matched */
  PLAN_UNSUPPORTED = 3   /* the model cannot serve it; why says so */
};

typedef struct {
  int outcome;          /* PLAN_* */
  int rule;             /* deciding rule, -1 when none matched */
  int accel;            /* accelerator serving (PLAN_OFFLOAD) or refusing
                           (PLAN_UNSUPPORTED) the call, -1 otherwise */
  const char *why;      /* PLAN_UNSUPPORTED: the model's reason (static text) */
  uint64_t service_ns;  /* predicted by the model */
  uint64_t busy_ns;     /* of it, how long the request keeps its engine from
                           taking the next (if_model_busy) */
  uint64_t link_in_ns;  /* reaching the device, before service */
  uint64_t link_out_ns; /* getting the response back, after service */
  uint64_t fault_ns;    /* the recorded call's page faults in the program's
                           memory, which the served call takes too, before
                           service (if_model_fault_ns; 0 for models whose
                           time is a recorded one); at most UINT32_MAX */
  uint64_t source_ns;   /* the recorded call's time in the program's callbacks
                           making its request (a JPEG source's fills), which
                           the served call spends too, before the link in
                           (if_model_source_ns); at most UINT32_MAX */
  uint64_t faults_over_ns; /* of the recorded call's page faults
                              (if_recorded_fault_ns), the part beyond all of
                              the predicted time above: a replay writes the
                              same fresh memory and takes them, so no run
                              reaches that prediction (scale, constant) */
  uint16_t out_cold;    /* per mille of the response's lines delivered to memory */
} plan_decision;

/* The request a model sees for a recorded call: its API, type, features,
 * fingerprint, recorded latency and sizes (req_len = plan_request_size,
 * resp_len = the recorded response size), without payload bytes. A caller
 * that has the bytes sets req/resp itself. */
void plan_request(standin_request *r, const st_call *c, const char *type);

/* Decide a request for which rule `rule` (-1: none) matched: keep, not
 * selected, unsupported by the accelerator's model, or offloaded with the
 * predicted service time and the link cost for r->req_len bytes in and
 * resp_bytes out. */
void plan_decide(const plan *p, int rule, const standin_request *r, uint64_t resp_bytes,
                 plan_decision *d);

/* Before a pass over a recording: models that tell a request's occurrences
 * apart (table) count them from the first again. */
void plan_reset(const plan *p);
/* Whether any of the plan's models is stateful (if_model_stateful). */
int plan_stateful(const plan *p);

/* plan_match on (r->api, r->type, site, size), then plan_decide. */
void plan_evaluate(const plan *p, const standin_request *r, const st_site *site, uint64_t size,
                   uint64_t resp_bytes, plan_decision *d);

/* For callers that see many calls from the same API, type and site: the
 * rules whose api/type/site/module selectors match (bit i = rule i; only
 * for plans of at most 64 rules), then the first of them whose size range
 * holds `size` (-1: none). plan_first_sized(p, plan_match_mask(...), size)
 * equals plan_match(...). */
uint64_t plan_match_mask(const plan *p, int api, const char *type, const st_site *site);
int plan_first_sized(const plan *p, uint64_t mask, uint64_t size);

/* ---- variants (standin sweep) --------------------------------------------- */

/* A deep copy of src in dst; -1 (with a message) when out of memory or a
 * model cannot be created again. */
int plan_copy(plan *dst, const plan *src);

/* Set one parameter of accelerator `accel` (its name): an accelerator key
 * (engines, link, link_*) or a parameter of its model, whose model is then
 * created again from its spec with key=value. Returns -1 with the reason
 * in err. */
int plan_set_param(plan *p, const char *accel, const char *key, const char *value, char *err,
                   size_t cap);

/* Write p as a plan file that plan_load reads back to the same decisions
 * (type/site/module globs with blanks are written with '?' there).
 * 0, or -1 with errno. */
int plan_save(const plan *p, const char *path);

#endif

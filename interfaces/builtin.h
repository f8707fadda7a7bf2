/* builtin.h — helpers for built-in models (not part of the plugin ABI). */
#ifndef STANDIN_BUILTIN_H
#define STANDIN_BUILTIN_H

#include <stddef.h>
#include <stdint.h>

#include "standin_iface.h"

#define IFB_MAX_PARAMS 12

typedef struct {
  const char *key;
  double def;
} ifb_param;

/* Bounds every numeric parameter is held to (besides >= 0; clock_mhz > 0). */
#define IFB_CLOCK_MAX_MHZ 1e6
#define IFB_PARAM_MAX 1e12

/* Parse numeric key=value pairs against defs (NULL-key terminated) into
 * out[] (defaults first). Returns 0, or -1 with a message in err. */
int ifb_parse(const char *model, const ifb_param *defs, double *out, int n,
              const char *const *keys, const char *const *values, char *err, size_t errcap);

/* Instance holding parsed numbers (for models whose parameters are all
 * numbers): create/destroy for such models. */
typedef struct {
  double p[IFB_MAX_PARAMS];
} ifb_numbers;

void *ifb_numbers_create(const char *model, const ifb_param *defs, int n,
                         const char *const *keys, const char *const *values, char *err,
                         size_t errcap);

/* Why the last prediction on this thread was unsupported (static text). */
void ifb_unsupported(const char *why);

/* The initiation interval of the prediction being made on this thread
 * (standin_iface_interval): ns its request keeps an engine from taking the
 * next. Not called: the whole service time. */
void ifb_interval(uint64_t ns);

/* Feature slot, or 0 when the request carries fewer. */
static inline uint64_t ifb_feat(const standin_request *r, unsigned slot) {
  return slot < r->nfeat ? r->feat[slot] : 0;
}

/* A prediction in whole ns. Absurd parameters (ns=1e50, clock=1e-300) give
 * values no integer holds: converting those is undefined, so they stop at
 * 2^62 ns (146 years), which still leaves room to add link costs. */
#define IFB_MAX_NS 4611686018427387904.0

static inline uint64_t ifb_ns(double v) {
  if (!(v > 0)) /* also NaN */
    return 0;
  return v >= IFB_MAX_NS ? (uint64_t)IFB_MAX_NS : (uint64_t)(v + 0.5);
}

/* Of the response's cache lines, per mille, how many the table's recording
 * found its implementation leaving outside the caches (placement.h). */
int ifb_table_out_cold(void *inst, const standin_request *r);
/* Count occurrences from the first again (a new pass over a recording). */
void ifb_table_reset(void *inst);

/* The built-in models, in the order `standin models` lists them. */
extern const standin_iface ifb_software, ifb_scale, ifb_constant, ifb_linear, ifb_table;
extern const standin_iface ifb_protoacc, ifb_protoacc_lpn, ifb_optimus_prime;
extern const standin_iface ifb_jpeg_core, ifb_jpeg_lpn;

#endif

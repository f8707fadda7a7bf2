/* iface.h — performance interfaces as the standin command uses them: a
 * model chosen by a spec "MODEL[:key=value,...]" (a built-in name, or the
 * path of a plugin implementing standin_iface.h), evaluated per request. */
#ifndef STANDIN_IFACE_H
#define STANDIN_IFACE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "standin_iface.h"

enum {
  IF_OK = 0,
  IF_UNSUPPORTED = 1, /* the accelerator cannot take this request: software */
  IF_E_SPEC = 2,      /* bad spec, unknown model or parameter (message in err) */
  IF_E_PLUGIN = 3,    /* plugin missing, without entry point, or wrong ABI */
  IF_E_NOMEM = 4
};

typedef struct if_model if_model; /* incomplete type */

/* A service or link time over an hour is no accelerator's: a unit error (ps
 * or cycles for ns) or a negative that wrapped. A call predicted to take
 * longer is not taken (unsupported), offline and in replay alike. */
#define IF_MAX_NS 3600000000000ull
/* A link's time each way, in or out: replay keeps it in 32 bits (rdb.h). */
#define IF_MAX_LINK_NS 4294967295ull

/* The longest spec taken: a path and parameters besides (table:trace=DIR).
 * A longer one is refused, never cut. */
#define IF_SPEC_MAX (PATH_MAX + 1024)

/* Parse "MODEL[:key=value,...]". MODEL containing '/' or ending in ".so" is
 * a plugin path. A key given twice is refused. Errors name the bad part in
 * err. */
int if_model_parse(if_model **m, const char *spec, char *err, size_t errcap);

/* IF_OK with the predicted service time, or IF_UNSUPPORTED; then
 * if_model_why() says why (static text). */
int if_model_predict(const if_model *m, const standin_request *r, uint64_t *ns);
/* on: standard output goes to standard error until the matching off
 * (nested), for the stretches in which models run (a plugin may print). */
void if_quiet_stdout(int on);
const char *if_model_why(void);
/* Of the last prediction if_model_predict said yes to on this thread: ns
 * its request keeps one of the accelerator's engines from taking the next
 * (the model's initiation interval, at most its service time; the whole
 * service time for a model that says nothing of it). */
uint64_t if_model_busy(void);

/* A new pass over a recording begins: a model that tells occurrences of a
 * request apart (table) counts them from the first again. */
void if_model_reset(if_model *m);
/* Whether a prediction changes the model's state (table counts each
 * request's occurrences): a prediction made only to compare answers
 * (replaydb's restart probe) must not be asked of such a model. */
int if_model_stateful(const if_model *m);

/* Where the model's implementation leaves a response: of its cache lines,
 * per mille, how many outside the caches. software and scale: as recorded
 * (if_recorded_out_cold); table: as in the table's recording; -1 for the
 * other models, which say nothing about it. */
int if_model_out_cold(const if_model *m, const standin_request *r);
int if_recorded_out_cold(const standin_request *r);

/* The time of the page faults the recorded call took in the program's
 * memory (ST_PBF_FAULT_NS: a pack into a fresh buffer, an unpack's tree in
 * fresh pages) that a call the model serves pays too: the kernel gives and
 * clears those pages before the device, or the CPU, can write there. Added
 * for the built-in models of devices (protoacc, protoacc-lpn,
 * optimus-prime); 0 for those whose time is a recorded one, which holds it
 * already (software, scale, table), for constant and linear, whose time is
 * the whole call's by definition, for plugins (they are given the feature,
 * and may add it), and for calls recorded without it. */
uint64_t if_model_fault_ns(const if_model *m, const standin_request *r);

/* Whether the model's time is a time measured on a machine (software and
 * scale: the recorded call's; table: its recording's): one that holds
 * that machine's interruptions (an interrupt, the hypervisor, another
 * process taking the CPU) at the rate they came, already. */
int if_model_time_measured(const if_model *m);

/* The recorded call's page-fault time (ST_PBF_FAULT_NS), at most its
 * latency (a trace from elsewhere may claim more); 0 but for protobuf
 * calls. */
uint64_t if_recorded_fault_ns(const standin_request *r);

/* The time the recorded call spent in the program's own callbacks making
 * its request's bytes (ST_JPF_SOURCE_NS: a JPEG source manager's fills),
 * which a device fed those bytes waits for: added, before the link in, by
 * the models if_model_fault_ns adds faults for (the JPEG ones: jpeg-core,
 * jpeg-lpn), 0 for the others, as there. At most the call's latency less
 * its fault time. */
uint64_t if_model_source_ns(const if_model *m, const standin_request *r);
uint64_t if_recorded_source_ns(const standin_request *r);

/* Edits (insert, delete, replace, swap of neighbours) from a to b's first
 * n bytes, capped at 9: for "did you mean" hints ("replya", "optimus_prime"). */
int if_name_distance(const char *a, const char *b, size_t n);

/* Whether two specs name the same model with the same parameters: in any
 * order, a built-in model's defaults filled in, numbers compared as
 * numbers ("protoacc" and "protoacc:mem_lat=20,clock_mhz=2000.0" are one). */
int if_spec_same(const char *a, const char *b);

/* "scale:factor=0.25": the model with every parameter it was given. */
const char *if_model_describe(const if_model *m);
const char *if_model_name(const if_model *m);
/* The model's own description: its summary line and parameters. */
const standin_iface *if_model_iface(const if_model *m);

void if_model_free(if_model *m); /* accepts NULL */

typedef struct {
  const char *name;
  const char *params;  /* "factor=1" */
  const char *summary; /* what it predicts, and its source */
} if_model_info;

/* Every built-in model. */
const if_model_info *if_models(size_t *n);

#endif

/* analysis.h — one streaming pass over a recording for the offline
 * commands (report, whatif, sweep, compare, plots).
 *
 * Every call is read once, in bounded memory: per group (API, message type,
 * call site or thread) counters and a log-linear latency histogram; per
 * plan the decision of every call (plan_decide, as replay takes it), the
 * accelerators' queueing on a virtual timeline, and two end-to-end
 * estimates. Memory grows with the number of groups, threads, plans and
 * accelerators, never with the number of calls. docs/ANALYSIS.md explains
 * the estimates and their approximations. */
#ifndef STANDIN_CLI_ANALYSIS_H
#define STANDIN_CLI_ANALYSIS_H

#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "hist.h"
#include "plan.h"

typedef enum { AN_BY_API, AN_BY_TYPE, AN_BY_SITE, AN_BY_THREAD } an_by;

/* Why a call stays in software under a plan. */
enum {
  AN_SW_NOT_SELECTED = 0,    /* no rule sends it anywhere */
  AN_SW_KEPT = 1,            /* a keep rule */
  AN_SW_UNSUPPORTED = 2,     /* the accelerator's model cannot serve it */
  AN_SW_NO_RESPONSE = 3,     /* the recording cannot answer it: replay runs the real call */
  AN_SW_NOT_OFFLOADABLE = 4, /* a use of the API no accelerator takes (ST_CALL_NOT_OFFLOADABLE):
                              * replay runs the real call */
  AN_SW_N = 5
};
extern const char *const an_sw_names[AN_SW_N]; /* "not_selected", ... */

#define AN_SIZE_BINS 48 /* request size bins: 0, then [2^(i-1), 2^i) */

/* One group's calls under one plan. */
typedef struct {
  uint64_t offloaded, sw[AN_SW_N];
  uint64_t offloaded_rec_ns; /* recorded (software) time of the offloaded calls */
  uint64_t service_ns, link_ns, queue_ns;
  uint64_t fault_ns;  /* page faults the offloaded calls take still (plan_decision) */
  uint64_t source_ns; /* time in the program's callbacks making their requests */
} an_gplan;

typedef struct {
  int api;                        /* -1 unless grouped by API or type */
  char *type;                     /* by type: message type */
  char *site;                     /* by site: call-site label */
  uint32_t pid, exec_seq, thread; /* by thread */
  uint64_t pidns;                 /* by thread: its PID namespace, 0 for the launcher's */
  uint32_t nth; /* by thread: its process among those with its pid (cli_procs_nth) */
  char *key;                      /* unique name of the group */
  uint64_t calls, ns, req_bytes, resp_bytes;
  unsigned byte_sides; /* st_call_byte_sides of its calls, or'ed */
  uint64_t run_ns;     /* run time the share is taken of */
  hist *h;
  an_gplan *plan; /* [nplans] */
} an_group;

typedef struct {
  uint64_t requests, service_ns, link_ns, queue_ns, rec_ns;
  uint64_t fault_ns;  /* page faults its calls take still (plan_decision) */
  uint64_t source_ns; /* its calls' time in the program's callbacks making their
                         requests, which they wait for still (plan_decision) */
  uint64_t busy_ns; /* engine time: service, or the model's initiation interval */
} an_accel;

typedef struct {
  int accel;
  const char *why; /* static text from the model */
  uint64_t n;
} an_why;

typedef struct {
  uint64_t n, rec_ns, pred_ns; /* calls, recorded time, predicted time (offloaded only) */
} an_bin;

typedef struct {
  const plan *p;
  an_accel accel[PLAN_MAX_ACCEL];
  an_why *why;
  size_t nwhy;
  uint64_t offloaded, sw[AN_SW_N];
  uint64_t offloaded_rec_ns;             /* recorded time of the offloaded calls */
  uint64_t predicted_ns;                 /* source + link + faults + queue + service of
                                            those calls */
  uint64_t faults_over_ns;               /* their recorded page faults beyond all the model
                                            predicts (plan_decision): no replay reaches it */
  uint64_t rows_to_memory;               /* decoded bytes the offloaded calls' models leave
                                            in memory (plan_decision out_cold) */
  uint64_t rows_rec_memory;              /* of the same calls, as recorded (out_cold_permille) */
  double rows_crit_more, rows_crit_less; /* per process, the thread's rows_to_memory -
                                            rows_rec_memory that is largest (>= 0) and
                                            smallest (<= 0), summed */
  int64_t saving_sum;                    /* sum of (recorded - predicted) over calls */
  int64_t saving_cpu;                    /* the same without queueing (CPU time saved) */
  int64_t saving_crit;                   /* the per-thread critical path's saving */
  an_bin bins[ST_API_MAX][AN_SIZE_BINS]; /* offloaded calls by API and request size */
  uint64_t *rule_calls;                  /* [p->nrules]: calls each rule decided */
  uint8_t *met;                          /* [p->nrules]: selectors some call met (plan.h) */
} an_plan;

typedef struct {
  uint64_t files, processes, chains; /* chains: threads that made calls */
  uint64_t calls, call_ns;
  /* recorded calls not offloadable (their sw[] slot is AN_SW_NOT_OFFLOADABLE),
   * by why (cli_no_slot) */
  uint64_t not_offloadable_by[CLI_NO_SLOTS];
  uint64_t run_ns;         /* sum of the processes' run times */
  uint64_t rec_overhead_ns; /* standin's own time on the program's threads, summed */
  uint64_t miss_ns;         /* a cache line read from memory over one from the caches, as
                               record measured it (the largest of the processes'); 0:
                               not measured */
  int run_approx;          /* a process's end is its last call's (writer killed) */
  int busy;                /* a `standin record` was still writing into the recording */
  int cut;                 /* a trace ends inside a chunk (killed, a full disk): not damage */
  uint64_t span_ns;        /* earliest process start to latest end */
  uint64_t wall_ns;        /* run.info wall_ns of `standin record`, else span_ns */
  int wall_recorded;       /* 1: wall_ns is from run.info, 2: --native-wall */
  double dilation;         /* native / recorded wall with --native-wall, else 1 */
  uint64_t late;           /* calls met out of start order (see merge.h) */
  int overlap;             /* processes ran at the same time */
  uint32_t cpus;           /* CPUs the threads were assumed to share */
  uint64_t thread_span_ns; /* sum over threads of first call start to last call end */
  char other_host[64];     /* a trace's host, when it is not this machine */
  int root_traced;         /* the program's first process made calls: 1, 0, -1 unknown */
  int damaged;             /* a file could not be read to its end */
  an_group *groups;
  size_t ngroups;
  hist all;
  an_bin bins[ST_API_MAX][AN_SIZE_BINS]; /* every call by API and request size */
  an_plan *plans;
  int nplans;
} an_result;

typedef struct {
  an_by by;
  const plan *const *plans;
  int nplans;
  const char *what; /* command name for the progress line; NULL: no progress */
  uint32_t cpus;    /* CPUs of the recording machine; 0: this machine's */
  uint64_t native_wall_ns; /* the program's wall time without standin; 0: unknown */
} an_opts;

/* Analyse every trace of dir. Prints why and returns -1 when the
 * directory or a file cannot be opened or memory runs out; a damaged file
 * is read up to the damage (warned, r->damaged set). */
int an_run(an_result *r, const char *dir, const an_opts *o);

/* Whether r (an_run's result for dir) has calls to estimate: 0, or -1
 * after saying why (no trace; every trace damaged before its first call),
 * with `what` the command's verb ("estimate", "sweep"). */
int an_estimable(const an_result *r, const char *dir, const char *what);

/* The same before reading dir whole (a sweep that replays first): 0 when
 * one of its traces holds a call, else -1 said as above. */
int an_estimable_quick(const char *dir, const char *what);
void an_free(an_result *r);

typedef struct scan_file scan_file;

/* The rule of plan p that decides recorded call c of f (plan_match), -1
 * when none. */
int an_rule(const plan *p, const scan_file *f, const st_call *c);

/* Plan p's decision for recorded call c of f (type: its type name) with
 * its deciding rule, as whatif and replay take it: -1 when offloaded (*d
 * holds the prediction), else why it stays in software (AN_SW_*; *d's why
 * names the model's reason for AN_SW_UNSUPPORTED). */
int an_decide(const plan *p, scan_file *f, const st_call *c, const char *type, int rule,
              plan_decision *d);

/* End-to-end estimates of plan k (ns), on the recorded wall time:
 *  - critical path: wall minus the saving of the per-thread critical path
 *    (one thread: minus every offloaded call's saving, Amdahl);
 *  - CPU capacity: the work can go no faster than the CPUs allow: threads
 *    busy from their first call to their last (at most every CPU for the
 *    whole span), minus every call's saving (a thread waiting for the
 *    accelerator polls, but while queued it waits for the engine, not a
 *    CPU), over the CPUs, plus the wall time outside the traces' span;
 *  - the estimate: the larger of the two (one thread: Amdahl);
 *  - naive: wall minus every call's saving, summed over threads.
 * an_method names the one the estimate took: "single-thread Amdahl",
 * "per-thread critical path" or "CPU capacity". */
uint64_t an_estimate(const an_result *r, int plan);
uint64_t an_estimate_cp(const an_result *r, int plan);
uint64_t an_estimate_cpu(const an_result *r, int plan);
uint64_t an_estimate_naive(const an_result *r, int plan);
/* Whether the naive sum means anything: the savings, summed over threads
 * that ran at once, can pass the wall time (photo-service's calls took
 * 190 ms of an 84 ms run), and the sum then stops at 0. */
int an_naive_means(const an_result *r, int plan);
/* The naive sum as text, "-" where it means nothing. */
char *an_fmt_naive(char *buf, size_t cap, const an_result *r, int plan);
const char *an_method(const an_result *r, int plan);

/* Decoded rows plan k's models leave in memory, less those the recording
 * found there (an_plan rows_to_memory - rows_rec_memory, in cache lines),
 * times what record measured a line read from memory to cost (miss_ns):
 * the most the program's reads of those rows can add to the estimate, or
 * (below 0) take from it, were each line's miss paid in full; no estimate
 * includes it (replay measures it). With several threads, as the estimates
 * take them: the one thread whose rows moved most, or all of them over the
 * CPUs, whichever is more (never more than all). 0 when record measured no
 * miss cost. */
int64_t an_rows_bound_ns(const an_result *r, int plan);

/* Bin of a request size, and the smallest size in a bin. */
unsigned an_size_bin(uint64_t size);
uint64_t an_bin_low(unsigned bin);

#endif

/* retime.h — replace recorded latencies by those of timing-only runs
 * (`standin record --retime[=N]`; the shim side is record/timing.c): each
 * call gets its latency in one of the N runs, the fastest or the median
 * one by time in calls (pick_run in retime.c).
 *
 * Processes are paired by command line and exec number, and among those by
 * what they did: a timing file whose threads made exactly the trace's calls
 * (APIs and sizes, in order) first, else the one at the same rank in pid
 * order. Within a process, threads pair by their stable index, and a
 * thread's calls are retimed only when both runs made exactly the same
 * sequence of calls on it (same APIs and sizes, same count); the calls of
 * threads that do not pair are paired as a pool (see pool_pair in
 * retime.c). This is done
 * for each timing run on its own; a call gets its latency in the chosen
 * run, or where its thread did not match there, the median over the runs
 * in which it matched. Everything else in a trace is copied as it is. */
#ifndef STANDIN_CLI_RETIME_H
#define STANDIN_CLI_RETIME_H

#include <stdint.h>

#define RETIME_MAX_PASSES 15

/* Which timing run's latencies the calls take (--retime-run). */
enum { RETIME_FASTEST, RETIME_MEDIAN };
const char *retime_pick_name(int pick);

typedef struct {
  unsigned passes;         /* timing runs */
  uint64_t calls;          /* calls in the recording */
  uint64_t retimed;        /* of which given the timing runs' latency */
  uint64_t pooled;         /* of those, paired only as a thread pool's */
  uint64_t before_ns;      /* their recorded latencies, summed */
  uint64_t after_ns;       /* their timing-run latencies, summed */
  unsigned processes;      /* trace files */
  unsigned unmatched_proc; /* trace files with no timing file to pair */
  unsigned threads_differ; /* threads whose calls differ in every timing run */
  /* Over the calls matched in every timing run: their sum in the chosen
   * run, and each run's own sum (how much the runs disagree) */
  uint64_t common_ns;
  uint64_t pass_ns[RETIME_MAX_PASSES];
} retime_stats;

/* How far each of n runs' times in calls (sum[]) lie from the one used
 * (mid), in percent: the lowest and highest. */
void retime_spread(const uint64_t *sum, unsigned n, uint64_t mid, double *lo, double *hi);

/* Retime the traces in dir from the *.timing files in tdirs[0..npass-1],
 * one directory per timing run (npass from 1 to RETIME_MAX_PASSES), with
 * the latencies of the run pick chooses. 0 on
 * success (some calls may be left as they were: see st), -1 after printing
 * why a trace could not be rewritten (it is then left as it was). */
int cli_retime(const char *dir, const char *const *tdirs, unsigned npass, int pick,
               retime_stats *st);

#endif

/* retime.h — replace recorded latencies by those of a timing-only
 * second run (`standin record --retime`; the shim side is record/timing.c).
 *
 * Processes are paired by command line and exec number, and among those by
 * what they did: a timing file whose threads made exactly the trace's calls
 * (APIs and sizes, in order) first, else the one at the same rank in pid
 * order. Within a process, threads pair by their stable index, and a
 * thread's calls are retimed only when both runs made exactly the same
 * sequence of calls on it (same APIs and sizes, same count). Everything else
 * in a trace is copied as it is. */
#ifndef STANDIN_CLI_RETIME_H
#define STANDIN_CLI_RETIME_H

#include <stdint.h>

typedef struct {
  uint64_t calls;          /* calls in the recording */
  uint64_t retimed;        /* of which given the timing run's latency */
  uint64_t before_ns;      /* their recorded latencies, summed */
  uint64_t after_ns;       /* their timing-run latencies, summed */
  unsigned processes;      /* trace files */
  unsigned unmatched_proc; /* trace files with no timing file to pair */
  unsigned threads_differ; /* threads whose calls differ between the runs */
} retime_stats;

/* Retime the traces in dir from the *.timing files in tdir. 0 on success
 * (some calls may be left as they were: see st), -1 after printing why a
 * trace could not be rewritten (it is then left as it was). */
int cli_retime(const char *dir, const char *tdir, retime_stats *st);

#endif

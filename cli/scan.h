/* scan.h — stream the calls of a trace file with the context needed to
 * name them (message types, call sites, threads). Shared by info, dump and
 * the analysis commands. Memory stays bounded by the number of distinct
 * types, sites and threads, not by the number of calls. */
#ifndef STANDIN_CLI_SCAN_H
#define STANDIN_CLI_SCAN_H

#include <stdint.h>

#include "trace.h"

typedef struct {
  char *name;
  void *schema;
  uint32_t schema_len;
  uint64_t schema_hash; /* XXH3-64 of schema: types of two files compare by it */
  uint8_t family;
} scan_type;

typedef struct {
  char *label; /* "symbol+0x12 (module)" of the first frame with a symbol */
  st_site site;
  char *strings; /* storage for the frames' module and symbol strings */
} scan_site;

typedef struct scan_file {
  const char *path;
  st_reader *r;
  st_header h; /* copy; strings owned by the reader until scan_close */
  scan_type *types;
  uint32_t ntypes; /* types[id] valid for id < ntypes */
  scan_site *sites;
  uint32_t nsites;
  uint32_t nthreads;
  uint64_t calls, blobs, blob_bytes;
  uint64_t end_mono_ns; /* from the end note, 0 if the writer did not close */
  uint64_t corr_timer_ns, corr_nested_ns; /* latency corrections applied */
  uint64_t overhead_ns; /* standin's own time on the program's threads */
  uint64_t writer_cpu_ns; /* CPU time of the trace writer thread (0: not noted) */
  uint64_t stacks_unwound; /* call stacks not found in a thread's memo */
  int has_stacks_unwound;  /* noted (recordings since 2026-11-28) */
  int writer_normal;    /* the trace writer could not yield to the program */
  uint64_t ring_waits, ring_wait_ns, ring_bytes; /* threads waited for the writer */
  uint64_t backlog_peak, backlog_max;            /* heap payload bytes waiting for the
                                                    writer: the most at once, the bound */
  char retimed[192];    /* "N of M calls, ..." (record --retime), or "" */
  uint64_t last_call_end_ns;
  st_read_status status;
  int stopped_seccomp; /* recording stopped when the process installed a seccomp filter */
  uint64_t calls_no_ring; /* calls not recorded: their thread's ring could not be mapped */
  uint64_t calls_left;    /* calls the program left by a longjmp past the hook: not recorded */
  uint64_t place_miss_ns; /* a cache line read from memory over one from L1 (placement.h);
                             0: not measured */
  int end_signal;   /* the writer closed because the program got this signal */
  int created_only; /* the file ends inside its header: r is NULL */
} scan_file;

/* Called for each call; return nonzero to stop early. */
typedef int (*scan_call_fn)(scan_file *f, const st_call *c, void *arg);

/* Open `path` (printing a clear message on failure: returns -1), stream
 * every record, call fn for each call. Stops at the first unreadable chunk
 * (status says what happened). The scan_file stays usable until
 * scan_close. */
int scan_run(scan_file *f, const char *path, scan_call_fn fn, void *arg);
void scan_close(scan_file *f);

/* Helpers for naming. */
const char *scan_type_name(const scan_file *f, uint32_t id);
const char *scan_site_label(const scan_file *f, uint32_t id);

/* Run time of the process: end note - start, or the end of its last call
 * when the writer did not close (approx = 1 then). */
uint64_t scan_run_ns(const scan_file *f, int *approx);

/* One line saying whether the file was complete, killed, or damaged. */
void scan_status_text(const scan_file *f, char *buf, size_t cap);

/* Nonzero when reading stopped at damage, not at the end a killed writer
 * leaves (no end mark, or a last chunk cut short). */
int scan_damaged(const scan_file *f);

#endif

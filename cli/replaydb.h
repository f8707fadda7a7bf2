/* replaydb.h — building the replay database (replay/rdb.h) from a
 * recording and an offload plan, before the program starts. */
#ifndef STANDIN_CLI_REPLAYDB_H
#define STANDIN_CLI_REPLAYDB_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "plan.h"
#include "rdb.h"

typedef struct {
  int fd;        /* the unnamed file holding the database (publish) */
  int fd_rw;     /* shared memory holding its writable part, or -1 (publish_rw) */
  uint8_t *base; /* our own mapping of it (for the summary) */
  size_t size;
  uint64_t entries, samples, files;
  /* trace files read only up to damage or an unfinished end: the calls
   * after it are missing (cmd_replay's misfit warning says so) */
  uint64_t files_cut;
  /* the distinct byte strings stored (requests, responses, tree images,
   * streams), each once, and their bytes */
  uint64_t strings, string_bytes;
  /* bytes tree images do not hold: their long strings and bytes are the
   * request's (pbw_image_refer) */
  uint64_t referred_bytes;
  /* building it: its time, and the CLI's peak resident memory then */
  uint64_t build_ns, build_peak_rss;
  /* the trace chunks it read, and those it decoded again to look up blobs
   * of calls (st_read_status.blob_chunk_loads): far more of those than
   * chunks makes a slow build */
  uint64_t trace_chunks, chunk_reloads;
  /* recorded calls flagged not offloadable: replay does not intercept
   * them. By why (cli_no_slot). */
  uint64_t calls_unusable;
  uint64_t unusable_by[CLI_NO_SLOTS];
  /* of those, libjpeg decodes given up before their last row whose image
   * the recording also holds decoded whole: kept as occurrences of that
   * image (RDB_SW_ABANDONED), which replay intercepts and runs for real;
   * and those of images it holds no whole decode of (given_up_attach) */
  uint64_t given_up_kept, given_up_alone;
  /* why calls stay in software, per accelerator: (accel, reason) -> count */
  struct rdb_why {
    int accel;
    const char *why;
    uint64_t n;
  } * why;
  size_t nwhy;
  /* calls an accelerator whose model takes the recorded latency (software,
   * scale) serves, from processes not retimed (record --retime), and their
   * recorded latencies summed: short ones were timed slow (cmd_replay) */
  uint64_t as_recorded_calls, as_recorded_ns;
  /* per API (RDB_API slot): the recorded calls' page-fault time (fault_ns)
   * beyond the whole time the model predicts for them, summed over the
   * offloaded calls. The harness writes the memory those faults were in
   * too, and takes them: that much must overrun (cmd_replay). */
  uint64_t faults_over_ns[RDB_API_SLOTS];
} rdb_built;

/* Read every trace of `dir` and build the database for plan p. Prints why
 * on error and returns -1. */
int rdb_build(const char *dir, const plan *p, int on_miss, int catch_up, int unpack_pieces,
              rdb_built *out);
void rdb_built_free(rdb_built *b);

#endif

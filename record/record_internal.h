/* record_internal.h — pieces of the record runtime shared between rt.c (the
 * calling side) and sink.c (the writer thread's side). */
#ifndef STANDIN_RECORD_INTERNAL_H
#define STANDIN_RECORD_INTERNAL_H

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pb_walk.h"
#include "ring.h"
#include "trace.h"
#include "shim.h"

typedef struct {
  char dir[PATH_MAX];
  unsigned apis; /* bit (1 << st_family) per recorded family */
  int stack_depth;
  uint64_t ring_bytes;
  uint64_t start_mono_ns, start_real_ns;
  uint32_t pid; /* process the current state belongs to */
  int stack_memo;   /* rt_stack may reuse a remembered stack (STANDIN_STACK_MEMO=0: never) */
  int pack_fp_walk; /* STANDIN_PACK_FP=walk: pack hooks never leave the
                       fingerprint to the writer (for comparison) */
  int timing;       /* STANDIN_TIMING=1: the timing-only pass (timing.c) */
  int no_follow;    /* STANDIN_NO_FOLLOW=1: the programs it starts are not recorded */
  int jpeg_pixels;  /* STANDIN_JPEG_PIXELS=keep (record --keep-pixels): a libjpeg
                       decode's rows are saved, never a digest of them */
  uint64_t writer_stall_ns; /* STANDIN_WRITER_STALL_US: for tests, a writer that
                               sleeps this long before each round falls behind */
  uint64_t writer_stop_stall_ns; /* STANDIN_WRITER_STOP_STALL_US: for tests, a writer
                                    that sleeps this long once when told to stop */
} rt_config;

extern rt_config rt_cfg;

/* Stable index of the calling thread (creation order) and of its creator;
 * set by the pthread_create trampoline, UINT32_MAX until known. */
extern SHIM_TLS uint32_t rt_my_index;
extern SHIM_TLS uint32_t rt_my_parent;

/* The calling thread's stack is [lo, hi) (no slot outside it is read):
 * set by the main thread's constructor, and by other threads when their
 * ring is made (their first call). Within
 * STACK_MARGIN of the low end, calls just unwind (guard pages, TLS). */
#define STACK_MARGIN (64u << 10)
void rt_stack_bounds(uintptr_t lo, uintptr_t hi);

typedef struct rt_thread {
  ring r;
  uint32_t index, parent, os_tid;
  char name[17];
  _Atomic int dead; /* thread exited; the writer frees the ring once empty */
  int announced;    /* writer wrote its ST_REC_THREAD */
  int populated;    /* writer mapped the whole ring (rt.c populate_ring) */
  uint64_t lost;    /* calls dropped because recording had stopped */
  _Atomic uint64_t overhead_ns; /* standin's own time on this thread (owner writes) */
  struct rt_thread *next;
  /* writer only: a get_packed_size whose fingerprint comes from the next
   * record (RT_DERIVE_FROM_NEXT), kept until that record (sink.c) */
  int has_held;
  uint64_t held[64]; /* its raw_call, features and stack */
} rt_thread;

enum { RAW_CALL = 1, RAW_NOTE = 2 };

/* A call as it sits in a ring; followed by feat[nfeat] (u64), ips[nips]
 * (u64), then the inline request and response bytes. */
typedef struct {
  ring_hdr h;
  uint8_t api, flags;
  uint16_t reason;
  uint8_t nfeat, nips, req_kind, resp_kind;
  uint32_t nested;
  uint8_t derive_fp;  /* rt_call.derive_fp: the writer fills fp and features */
  uint8_t pairs_size; /* rt_call.pairs_size */
  uint32_t work_thread; /* rt_call.work_thread */
  uint32_t fault_ns;    /* rt_call.fault_ns */
  uint64_t start_ns, latency_ns, result;
  uint8_t fp[16];
  const void *type_key;
  uint64_t req_len, resp_len;     /* sizes of the request and response */
  uint64_t req_saved, resp_saved; /* bytes carried (0 = not saved) */
  const void *req_ptr, *resp_ptr; /* heap payloads (RT_PAY_OWN) */
} raw_call;

/* Why a protobuf call carries no response (st_call.reason with
 * ST_CALL_NO_RESPONSE; traces/FORMAT.md). */
enum {
  PB_REASON_NONE = 0,
  PB_REASON_DEPTH = 2, /* nested deeper than PBW_MAX_DEPTH: no fingerprint */
  PB_REASON_NOMEM = 3, /* the shim could not copy the response */
  PB_REASON_NOFP = 4   /* the writer could not derive the fingerprint from the
                          packed bytes (a hand-built tree pack wrote bytes for
                          that do not read back; see pb_fpbytes.c) */
};

/* Message types the writer holds a schema for (rt_defer_fp): only the
 * writer thread adds and forgets them. */
void rt_schema_ready(const void *type_key);

void rt_schema_forget_all(void);
/* Writer: a size of this type found no pack to pair with. */
void rt_size_walk(const void *type_key);

/* Writer: write t's held get_packed_size, if any, with no fingerprint
 * (nothing pairs with it: the thread ended, or the file is closing). */
void wr_flush_held(rt_thread *t);

/* Writer-thread side (sink.c). */
int wr_open(const rt_config *cfg);  /* create the file; 0 or -1 (said why) */
/* Read what names the process in its trace header (its executable), which
 * a chroot takes away; wr_open reads it again, keeping this on failure. */
void wr_read_identity(void);
/* This process's PID namespace and start time (st_header), as
 * wr_read_identity last read them; 0 when it could not. */
void wr_process_id(uint64_t *pidns, uint64_t *start_ticks);
void wr_record(rt_thread *t, const ring_hdr *h);
void wr_flush(void);
void wr_set_compress(int on); /* store chunks uncompressed while behind */
void wr_close(void);
void wr_forget(void); /* forked child: drop the parent's writer, no I/O */
/* The trace file's descriptor, which the program must not close or reuse
 * (fdguard.c): -1 when there is none. wr_release_fd moves the file off fd
 * before the program makes fd its own (dup2 onto it). */
int wr_trace_fd(void);
void wr_release_fd(int fd);
/* Set while rt_stack runs libunwind: the pipe it opens to check addresses
 * is then standin's, kept from the program like the trace file. */
extern SHIM_TLS int rt_in_unwind;
void wr_calibrate(void); /* on the writer thread, before the first record */
/* What wr_calibrate measured: the clock read and a nested pass-through. */
void wr_calibration(uint64_t *timer_ns, uint64_t *pass_ns);
void wr_note(const char *key, const char *value);
void wr_forget_types(void); /* descriptors may be unloaded: start a new table */

/* Standin's own time on the program's threads so far (writer thread). */
uint64_t rt_overhead_ns(void);
uint64_t rt_stacks_unwound(void); /* call stacks not found in a memo */
uint64_t rt_calls_without_ring(void); /* calls not recorded: no ring for their thread */
/* CPU time the trace writer thread has used so far (0 if unknown). */
uint64_t rt_writer_cpu_ns(void);

/* GOT slots through which libprotobuf-c called itself, pointed past our
 * hooks at start (bypass.h). */
extern int rt_pb_bypassed;

/* Calls the program left by a longjmp past the hook, found by the thread's
 * next call (shim_left_behind): not recorded. */
extern _Atomic uint64_t rt_calls_left;

/* pack_to_buffer calls whose bytes were read back from the program's
 * ProtobufCBufferSimple instead of packed again. */
extern _Atomic uint64_t rt_pb_buf_read_back;
/* Times a program thread waited for the writer (its ring full, or the
 * payloads waiting on the heap at their bound), and (*ns) how long the
 * threads waited in all. */
uint64_t rt_ring_waits(uint64_t *ns);
/* On the writer: heap payloads of this many bytes are written and freed. */
void rt_backlog_written(uint64_t bytes);
/* The most bytes of heap payloads that waited for the writer at once, and
 * the bound on them. */
uint64_t rt_backlog_peak(void);
uint64_t rt_backlog_max(void);

/* Index for a thread not created through pthread_create. */
uint32_t rt_next_thread_index(void);

/* exec wrappers call this before replacing the process image. */
void rt_before_exec(void);

/* _exit and _Exit call this: flush and close, since no exit handler runs. */
void rt_before_exit(void);

/* pthread_exit calls this on the main thread: the process goes on until
 * its last thread leaves, which the writer must not outlive (rt.c). */
void rt_leader_exits(void);

/* dlclose calls this before the library goes away (see rt.c). */
void rt_before_unload(void);

/* chroot calls this before the process's root changes (rt.c). */
void rt_before_chroot(void);
/* prctl and syscall call this before the thread installs a seccomp filter:
 * recording of this process stops there (rt.c). */
void rt_before_seccomp(void);
/* Set by rt_before_seccomp: recording has stopped for good in this process
 * (and its children, which inherit the filter), and no hook makes a
 * system call any more. */
extern int rt_sealed;
/* The trace directory opened by rt_before_chroot, which files are then
 * created in (openat), or -1: they are created by path. fdguard keeps it
 * from the program, and moves it away from a dup2 (rt_release_dir_fd). */
int rt_dir_fd(void);
void rt_release_dir_fd(int fd);
/* Where to create dir/name (a path under rt_cfg.dir): the directory kept
 * open, with *rel the name relative to it, or AT_FDCWD with *rel = path.
 * One load of the descriptor, which a dup2 may move meanwhile. */
int rt_dir_at(const char *path, const char **rel);

/* The names a process's files take in the recording directory, tried in
 * order until one is free (O_EXCL): DIR/PID.EXT, then PID.1.EXT, PID.2.EXT
 * ... for the later images (execs) of the process that made PID.EXT; any
 * other process with that pid (another PID namespace's pid 1, a pid used
 * again) takes PID-START.EXT, PID-START.1.EXT ..., START being its start
 * time in clock ticks, so it never reads the first process's files, and a
 * recording of thousands of sandboxes does not run out of names. Without
 * a start time, every file of the pid is one sequence. `earlier` counts
 * the names tried that hold an earlier image of this process: the new
 * file's exec_seq. */
typedef struct {
  uint64_t start;  /* the process's start time, 0 when unknown */
  uint64_t family; /* 0: PID.K.EXT; else START: PID-START.K.EXT */
  unsigned seq;
  unsigned earlier;
} rt_names;

void rt_names_init(rt_names *n, uint64_t start_ticks);
/* The current name. */
void rt_names_path(const rt_names *n, char *buf, size_t cap, const char *dir, uint32_t pid,
                   const char *ext);
/* The current name exists; mine: it holds an earlier image of this
 * process. Returns 0 to try the next name, -1 when there is none left. */
int rt_names_next(rt_names *n, int mine);

/* The writer could not write the file (disk full, ...): it said so once;
 * recording stops and the hooks pass every call straight through. */
void rt_writer_failed(void);

/* Fatal signals (signals.c). rt_signals_install puts a handler on every
 * terminating signal whose disposition is still SIG_DFL. From that handler,
 * rt_close_for_signal asks the writer to drain the rings, note `sig` and
 * close the file, and waits for it at most wait_ns (polling every poll_ns);
 * async-signal-safe, returns at once when this process records nothing. */
void rt_signals_install(void);
void rt_close_for_signal(int sig, uint64_t wait_ns, uint64_t poll_ns);

/* Tree statistics into protobuf feature slots (api.h), for the hook
 * (rt_call) and the writer (st_call) alike; the encoded size, slot 0, is
 * set apart. Returns the number of slots used. */
static inline uint8_t rec_tree_features(uint64_t *feat, const pbw_stats *st) {
  feat[ST_PBF_FIELDS] = st->fields;
  feat[ST_PBF_SUBMSGS] = st->submsgs;
  feat[ST_PBF_MAX_DEPTH] = st->max_depth;
  feat[ST_PBF_REPEATED] = st->repeated;
  feat[ST_PBF_VAR_BYTES] = st->var_bytes;
  feat[ST_PBF_FIELD_WORDS] = st->field_words;
  feat[ST_PBF_FAULT_NS] = 0; /* the call's, not the tree's: set by the writer */
  return ST_PBF_NFEAT;
}

#endif

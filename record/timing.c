/* timing.c — the timing-only pass of `standin record --retime`.
 *
 * Recording perturbs the calls it measures. Copying each call's payload into
 * the ring for the writer on the other core leaves the program's next calls
 * slower than they are without standin: on pbtest's ~1 KB messages the
 * recorded time in calls was a median 8-22% above what a shim that only
 * reads the clock measures, and software replay inherits that. Timing alone
 * measures within 2% of such a shim. So `--retime` runs the program a second
 * time with STANDIN_TIMING=1: the hooks then time each outermost call (a
 * JPEG decode: its library calls, summed, with no row copied) and keep its
 * latency, its size (to check the runs made the same calls), its start (to
 * pair thread pools' calls) and its nested pass-through count (for the
 * correction the writer applies) in per-thread chunks — no payload, no
 * fingerprint, no call site, no writer thread. At exit, or before exec, the
 * process writes DIR/PID.timing (PID.N.timing after its Nth exec), which the
 * CLI matches call by call against the full recording (cli/retime.c).
 *
 * File layout (native byte order; the CLI reads it on the same machine):
 *   "STTIME04", u32 pid, ppid, exec_seq, nthreads, u64 start_mono_ns,
 *   timer_ns, pass_ns, pidns, start_ticks (as in a trace's header), u32
 *   argv_bytes, argv (NUL-separated), then per thread: u32 index, u32 0,
 *   u64 n, n x tm_ent. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "record_internal.h"
#include "rt.h"
#include "shim_alloc.h"

typedef struct {
  uint64_t latency_ns; /* raw: clock reads and nested passes not taken off */
  uint64_t size;       /* unpack: bytes read; the others: what they returned */
  uint64_t start_ns;   /* to pair calls across threads (thread pools) */
  uint32_t nested;
  uint8_t api;
  uint8_t pad[3];
} tm_ent;

/* Each thread appends to its own list of chunks, which never move: the
 * thread that writes the file at exit may read them while other threads
 * still append (it takes what each chunk's count says). */
#define TM_CHUNK 4096
typedef struct tm_chunk {
  _Atomic(struct tm_chunk *) next;
  _Atomic uint32_t n; /* entries written: the owner stores, the file writer loads */
  tm_ent e[TM_CHUNK];
} tm_chunk;

typedef struct tm_thread {
  uint32_t index;
  _Atomic int lost; /* an allocation failed: its timings are incomplete */
  _Atomic(tm_chunk *) first;
  tm_chunk *last; /* the owner's */
  struct tm_thread *next;
} tm_thread;

static _Atomic(tm_thread *) tm_threads;
static SHIM_TLS tm_thread *tm_self;

static tm_thread *tm_thread_self(void) {
  if (SHIM_LIKELY(tm_self != NULL))
    return tm_self;
  /* the shims' own heap: the timed run's program must lay out its memory
   * as it does natively (shim_alloc.h) */
  tm_thread *t = shim_zalloc(sizeof *t);
  if (!t)
    return NULL;
  t->index = rt_thread_index();
  tm_thread *head = atomic_load(&tm_threads);
  do
    t->next = head;
  while (!atomic_compare_exchange_weak(&tm_threads, &head, t));
  tm_self = t;
  return t;
}

void rt_timing_add(int api, uint64_t start_ns, uint64_t latency_ns, uint32_t nested,
                   uint64_t size) {
  tm_thread *t = tm_thread_self();
  if (!t || atomic_load_explicit(&t->lost, memory_order_relaxed))
    return;
  tm_chunk *c = t->last;
  if (c == NULL || atomic_load_explicit(&c->n, memory_order_relaxed) == TM_CHUNK) {
    tm_chunk *nc = shim_alloc(sizeof *nc);
    if (!nc) { /* a thread whose count is short does not match: nothing wrong is written */
      atomic_store(&t->lost, 1);
      return;
    }
    atomic_init(&nc->next, NULL);
    atomic_init(&nc->n, 0);
    if (c)
      atomic_store_explicit(&c->next, nc, memory_order_release);
    else
      atomic_store_explicit(&t->first, nc, memory_order_release);
    t->last = c = nc;
  }
  uint32_t k = atomic_load_explicit(&c->n, memory_order_relaxed);
  c->e[k] = (tm_ent){.latency_ns = latency_ns,
                     .size = size,
                     .start_ns = start_ns,
                     .nested = nested,
                     .api = (uint8_t)api};
  atomic_store_explicit(&c->n, k + 1, memory_order_release);
}

static void free_chunks(tm_thread *t) {
  tm_chunk *c = atomic_load(&t->first);
  while (c) {
    tm_chunk *next = atomic_load(&c->next);
    shim_free(c);
    c = next;
  }
  atomic_store(&t->first, NULL);
  t->last = NULL;
}

static int put(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

#define TM_ID_OFF 48 /* pidns and start_ticks */

/* Whether the timing file at rel (relative to at) was written by an earlier
 * image of this process, as sink.c's earlier_image tells for traces. */
static int earlier_image(int at, const char *rel, uint64_t pidns, uint64_t start) {
  if (pidns == 0)
    return 1;
  int fd = openat(at, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  uint32_t pid = 0;
  uint64_t id[2] = {0, 0};
  int ok = pread(fd, &pid, 4, 8) == 4 && pread(fd, id, sizeof id, TM_ID_OFF) == sizeof id;
  close(fd);
  return ok && pid == (uint32_t)getpid() && id[0] == pidns && id[1] == start;
}

/* The first free name of this process's (rt_names, as sink.c names trace
 * files), PID.timing first; *seq_out counts the earlier images of this
 * process. -1 with errno on failure. */
static int open_file(char *path, size_t cap, unsigned *seq_out, uint64_t pidns, uint64_t start) {
  rt_names nm;
  rt_names_init(&nm, pidns ? start : 0);
  for (;;) {
    rt_names_path(&nm, path, cap, rt_cfg.dir, (uint32_t)getpid(), "timing");
    const char *rel; /* after a chroot: relative to the directory kept open */
    int at = rt_dir_at(path, &rel);
    int fd = openat(at, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) {
      *seq_out = nm.earlier;
      return fd;
    }
    if (rt_names_next(&nm, earlier_image(at, rel, pidns, start)) != 0)
      break;
  }
  errno = EEXIST;
  return -1;
}

/* Held while a process writes its timings: a child forked meanwhile by
 * another thread gets it locked, and rt_timing_forget unlocks it there
 * (its own exit would wait for it for good). */
static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;

/* Write this process's timings; once per process image. */
void rt_timing_write(void) {
  static uint32_t written_pid;
  pthread_mutex_lock(&once);
  if (written_pid == (uint32_t)getpid() || atomic_load(&tm_threads) == NULL) {
    pthread_mutex_unlock(&once);
    return;
  }
  written_pid = (uint32_t)getpid();
  uint64_t timer_ns, pass_ns;
  wr_calibrate();
  wr_calibration(&timer_ns, &pass_ns);
  char path[PATH_MAX + 32];
  unsigned exec_seq = 0;
  uint64_t id[2];
  wr_read_identity();
  wr_process_id(&id[0], &id[1]);
  int fd = open_file(path, sizeof path, &exec_seq, id[0], id[1]);
  if (fd < 0) {
    shim_say("cannot write %s: %s; this process's calls keep their recorded latencies", path,
             strerror(errno));
    pthread_mutex_unlock(&once);
    return;
  }
  char argv[8192];
  uint32_t alen = rt_cmdline(argv, sizeof argv); /* as the recording's header has it */
  /* threads that start now push themselves in front of h0: not in the file */
  tm_thread *h0 = atomic_load(&tm_threads);
  uint32_t nthreads = 0;
  for (tm_thread *t = h0; t; t = t->next)
    nthreads++;
  uint32_t head[4] = {(uint32_t)getpid(), (uint32_t)getppid(), exec_seq, nthreads};
  uint64_t head2[3] = {rt_cfg.start_mono_ns, timer_ns, pass_ns};
  int rc = put(fd, "STTIME04", 8) | put(fd, head, sizeof head) | put(fd, head2, sizeof head2) |
           put(fd, id, sizeof id) | put(fd, &alen, 4) | put(fd, argv, alen);
  for (tm_thread *t = h0; t && rc == 0; t = t->next) {
    /* the count goes before the entries, and is known after them: a thread
     * that still calls adds entries this loop does not see */
    uint32_t idx[2] = {t->index, 0};
    uint64_t n = 0;
    off_t at = lseek(fd, 0, SEEK_CUR);
    rc = at < 0 || put(fd, idx, sizeof idx) || put(fd, &n, 8);
    for (tm_chunk *c = atomic_load_explicit(&t->first, memory_order_acquire);
         c && rc == 0 && !atomic_load(&t->lost);
         c = atomic_load_explicit(&c->next, memory_order_acquire)) {
      uint32_t k = atomic_load_explicit(&c->n, memory_order_acquire);
      rc = put(fd, c->e, (size_t)k * sizeof(tm_ent));
      n += k;
    }
    if (rc == 0 && atomic_load(&t->lost)) { /* incomplete: say it made no call */
      rc = lseek(fd, at + 16, SEEK_SET) < 0 || ftruncate(fd, at + 16) != 0;
      n = 0;
    }
    if (rc == 0)
      rc = pwrite(fd, &n, 8, at + 8) != 8 || lseek(fd, 0, SEEK_END) < 0;
  }
  if (close(fd) != 0 || rc != 0) {
    shim_say("cannot write %s: %s; this process's calls keep their recorded latencies", path,
             strerror(errno));
    unlink(path);
  }
  pthread_mutex_unlock(&once);
}

/* A forked child times its own calls only: the parent's belong to the
 * parent's file. Its own thread goes on with no entries. */
void rt_timing_forget(void) {
  pthread_mutex_init(&once, NULL); /* the only thread: no one else holds it */
  tm_thread *t = atomic_load(&tm_threads);
  while (t) {
    tm_thread *next = t->next;
    free_chunks(t);
    if (t != tm_self)
      shim_free(t);
    t = next;
  }
  if (tm_self) {
    atomic_store(&tm_self->lost, 0);
    tm_self->next = NULL;
  }
  atomic_store(&tm_threads, tm_self);
}

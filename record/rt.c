/* rt.c — record runtime: configuration, per-thread rings, the writer thread,
 * and the process events (fork, exec, exit) that decide which file a call
 * goes to. See rt.h for the contract with the hooks. */
#include "rt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <execinfo.h>

#include "fatal.h"
#include "keyset.h"
#include "lazylibs.h"
#include "record_internal.h"
#include "ring.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"
#include "typecap.h"

/* Writer pacing: poll the rings this often when idle, and write a partial
 * chunk at least this often so that a killed program loses little. After
 * WRITER_DEEP_AFTER_NS with nothing to write it polls every
 * WRITER_DEEP_NAP_NS: a server waiting for work between calls kept the
 * writer waking 2,000 times a second (collectd idle 20 s: 358 ms of CPU;
 * a program waiting 3 s after its calls, 49 ms on the test VM, now 6). A call is
 * then drained within WRITER_DEEP_NAP_NS, below FLUSH_EVERY_NS, so a
 * killed program still loses at most its last ~100 ms; whatever waits for
 * the writer (ring space, exit, exec, a fatal signal, dlclose) wakes it. */
#define WRITER_IDLE_NS 500000ull
#define WRITER_DEEP_AFTER_NS 20000000ull
#define WRITER_DEEP_NAP_NS 20000000ull
#define FLUSH_EVERY_NS 100000000ull
/* Bytes of a new ring mapped when it is made, on the program's thread;
 * the writer maps the rest (MADV_POPULATE_WRITE) once the thread has
 * published half of that, so a process that makes a call or two does not
 * pay for a whole ring (populating 1 MiB took ~0.5 ms: most of what
 * recording added to a djpeg of a 64x64 image), and a busy thread does not
 * fault its ring in page by page. */
#define RING_POPULATE (64u << 10)

enum { RUN_IDLE = 0, RUN_ACTIVE = 1, RUN_OFF = 2 };

/* The writer naps (up to WRITER_IDLE_NS) when the rings are empty. A busy
 * thread can fill its ring in less than that (1 MiB at 1 KiB per ~400 ns
 * call: ~0.4 ms), and then waited for ring space while the writer, with
 * most of a core to spare, slept: so a thread whose ring passes a quarter
 * full while the writer naps wakes it (a futex; one wake per nap). */
static _Atomic uint32_t writer_napping;

static long futex(_Atomic uint32_t *w, int op, uint32_t v, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)w, op, v, ts, NULL, 0);
}

static void writer_nap(uint64_t ns) {
  struct timespec ts = {0, (long)ns};
  atomic_store(&writer_napping, 1);
  futex(&writer_napping, FUTEX_WAIT_PRIVATE, 1, &ts); /* returns at once if woken first */
  atomic_store(&writer_napping, 0);
}

static void wake_writer(void) {
  if (atomic_exchange(&writer_napping, 0))
    futex(&writer_napping, FUTEX_WAKE_PRIVATE, 1, NULL);
}

/* On a program thread, after publishing a record: its ring, or the heap
 * payloads waiting for the writer (backlog_wait), past a quarter full. */
static inline void wake_writer_if_filling(rt_thread *t, uint64_t backlog, uint64_t bmax) {
  if (SHIM_LIKELY(!atomic_load_explicit(&writer_napping, memory_order_relaxed)))
    return;
  if (ring_used(&t->r, t->r.cap / 4) > t->r.cap / 4 || backlog > bmax / 4)
    wake_writer();
}

rt_config rt_cfg;
static _Atomic int run_state = RUN_IDLE; /* RUN_IDLE: no writer yet */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
/* Held by the writer while it works (not while it sleeps), and by fork: the
 * writer takes locks the child inherits as they are (malloc's under ASan,
 * the loader's in dladdr, which glibc does not reset at fork), so it must
 * not be in the middle of anything when another thread forks. */
static pthread_mutex_t writer_work = PTHREAD_MUTEX_INITIALIZER;
static pthread_t writer_thread;
static _Atomic int writer_running; /* writer_thread exists; set under start_lock, read
                                    * without it (rt_before_unload, signals) */
/* The writer has reached writer_main: the sanitizer runtimes' own thread
 * start (which allocates, under allocator locks that fork does not take)
 * is over. */
static atomic_int writer_entered;
static _Atomic int writer_stop;
/* A fatal signal asked the writer to close the file now (signals.c). */
static _Atomic int close_signal;
static _Atomic int closed_for_signal;
/* The writer has returned (or never opened its file): nobody to wait for. */
static _Atomic int writer_exited;
static SHIM_TLS int in_writer;
/* dlclose asked the writer to drain the rings (rt_before_unload). */
static _Atomic uint64_t unload_req, unload_done;
static _Atomic(rt_thread *) threads; /* pushed by producers, pruned by the writer */
static pthread_key_t thread_key;

static SHIM_TLS rt_thread *self;
SHIM_TLS uint32_t rt_my_index = UINT32_MAX;
SHIM_TLS uint32_t rt_my_parent;

/* ---- configuration ------------------------------------------------------- */

static unsigned parse_apis(const char *s) {
  if (!s || !*s)
    return (1u << ST_FAMILY_PROTOBUF) | (1u << ST_FAMILY_JPEG);
  unsigned m = 0;
  if (strstr(s, "protobuf"))
    m |= 1u << ST_FAMILY_PROTOBUF;
  if (strstr(s, "jpeg"))
    m |= 1u << ST_FAMILY_JPEG;
  return m;
}

/* Remove our shim from LD_PRELOAD so that programs this one execs run
 * without it (--no-follow). */
static void drop_self_from_preload(void) {
  const char *pre = getenv("LD_PRELOAD");
  if (!pre)
    return;
  /* what is kept is never longer than what was there: a fixed 4 KiB buffer
   * dropped the program's own preloads past it */
  size_t n = strlen(pre);
  char *copy = strdup(pre), *keep = calloc(1, n + 1);
  if (!copy || !keep) {
    free(copy);
    free(keep);
    return;
  }
  size_t used = 0;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
    if (strstr(tok, "libstandin-record.so"))
      continue;
    size_t tl = strlen(tok);
    if (used)
      keep[used++] = ':';
    memcpy(keep + used, tok, tl);
    used += tl;
  }
  keep[used] = 0;
  free(copy);
  if (used)
    setenv("LD_PRELOAD", keep, 1);
  else
    unsetenv("LD_PRELOAD");
  free(keep);
}

/* A number from the environment within [min, max]; anything else is
 * reported and replaced by the default, so a typo cannot make every thread
 * map a huge ring. */
static uint64_t env_number(const char *name, uint64_t min, uint64_t max, uint64_t def) {
  const char *s = getenv(name);
  if (!s || !*s)
    return def;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (*s == '-' || *end || errno || v < min || v > max) {
    shim_say("%s=%s is not a number from %llu to %llu; using %llu", name, s,
             (unsigned long long)min, (unsigned long long)max, (unsigned long long)def);
    return def;
  }
  return v;
}

/* The trace directory: STANDIN_DIR as `standin record` sets it (an absolute
 * path, so a program that changes directory still writes there), or
 * ./standin.data of the starting directory when the shim is preloaded by
 * hand. Whether it exists and is writable is found out when the first call
 * creates the file, which says so. Returns -1 (said why) to turn recording
 * off. */
static int config_dir(void) {
  const char *dir = getenv("STANDIN_DIR");
  /* room for "/<pid>-<start>.<exec>.timing" after the directory (rt_names);
   * standin record refuses a longer one (SHIM_DIR_MAX, cli/cmd_record.c) */
  size_t room = sizeof rt_cfg.dir - 48;
  if (dir && *dir) {
    if (dir[0] != '/') {
      shim_say("STANDIN_DIR=%s is not an absolute path; recording is off for pid %d", dir,
               (int)getpid());
      return -1;
    }
    if (strlen(dir) >= room) {
      shim_say("STANDIN_DIR is longer than %zu bytes; recording is off for pid %d", room,
               (int)getpid());
      return -1;
    }
    strcpy(rt_cfg.dir, dir);
    return 0;
  }
  char cwd[PATH_MAX];
  int n = getcwd(cwd, sizeof cwd) ? snprintf(rt_cfg.dir, room, "%s/standin.data",
                                              strcmp(cwd, "/") ? cwd : "")
                                   : -1;
  if (n < 0 || (size_t)n >= room) {
    shim_say("cannot tell the current directory for standin.data (set STANDIN_DIR); recording "
             "is off for pid %d",
             (int)getpid());
    return -1;
  }
  return 0;
}

static void load_config(void) {
  const char *tsc = getenv("STANDIN_TSC");
  if (tsc && *tsc && shim_clock_init(tsc) != 0)
    shim_say("STANDIN_TSC=%s is not a TSC calibration this machine can use; timing with "
             "clock_gettime",
             tsc);
  const char *apis = getenv("STANDIN_APIS");
  rt_cfg.apis = parse_apis(apis);
  if (rt_cfg.apis == 0)
    shim_say("STANDIN_APIS=%s names no API (protobuf, jpeg); recording is off for pid %d", apis,
             (int)getpid());
  if (config_dir() != 0)
    rt_cfg.apis = 0;
  rt_cfg.stack_depth = (int)env_number("STANDIN_STACK_DEPTH", 0, ST_MAX_FRAMES, 3);
  /* 1 MiB. A tight loop packing 1 KiB messages fills it while the writer
   * compresses a chunk and then waits (pbbench pack 1024: 515-656 ns a call
   * recorded, 201-288 with 4 MiB), but every ring page a thread touches
   * once is a page fault, and with 4 MiB photo-service's five threads took
   * 13,900 faults instead of 6,500 and ran 2x slower recorded. */
  uint64_t cap = env_number("STANDIN_RING_KB", 64, 1u << 20, 1024) * 1024;
  rt_cfg.ring_bytes = 64 * 1024;
  while (rt_cfg.ring_bytes < cap)
    rt_cfg.ring_bytes <<= 1;
  const char *nf = getenv("STANDIN_NO_FOLLOW");
  rt_cfg.no_follow = nf && *nf == '1';
  if (rt_cfg.no_follow)
    drop_self_from_preload();
  /* Where pack fingerprints are computed: from the saved bytes on the
   * writer thread (default), or by walking the tree on the calling thread
   * (walk: what standin did before; the trace is the same either way, which
   * tests check with it). */
  const char *pf = getenv("STANDIN_PACK_FP");
  rt_cfg.pack_fp_walk = pf && !strcmp(pf, "walk");
  const char *sm = getenv("STANDIN_STACK_MEMO");
  rt_cfg.stack_memo = !(sm && *sm == '0');
  const char *tm = getenv("STANDIN_TIMING");
  rt_cfg.timing = tm && *tm == '1';
  const char *jp = getenv("STANDIN_JPEG_PIXELS");
  rt_cfg.jpeg_pixels = jp && !strcmp(jp, "keep");
  const char *ws = getenv("STANDIN_WRITER_STALL_US");
  rt_cfg.writer_stall_ns = ws ? strtoull(ws, NULL, 10) * 1000 : 0;
  const char *wss = getenv("STANDIN_WRITER_STOP_STALL_US");
  rt_cfg.writer_stop_stall_ns = wss ? strtoull(wss, NULL, 10) * 1000 : 0;
  if (pf && *pf && strcmp(pf, "walk") && strcmp(pf, "bytes"))
    shim_say("STANDIN_PACK_FP=%s is not 'bytes' or 'walk'; using bytes", pf);
}

int rt_active(st_family fam) {
  if (!(rt_cfg.apis & (1u << fam)))
    return 0;

  return atomic_load_explicit(&run_state, memory_order_relaxed) != RUN_OFF;
}

/* ---- per-thread rings ---------------------------------------------------- */

static void thread_exit(void *p) {
  rt_thread *t = p;
  atomic_store_explicit(&t->dead, 1, memory_order_release);
}

/* ---- per-thread call-stack memo (rt_stack) ----------------------------- */

#define MEMO_FRAMES 8 /* deeper --stack-depth: always unwound */
#define MEMO_SETS 32  /* per thread; each set holds MEMO_WAYS stacks */
#define MEMO_WAYS 4   /* stacks of one (hook, call site) kept at once */
#define MEMO_HOOKS 16 /* call sites of rt_stack in the hooks */
/* Learning where the return addresses are (unw_step) costs more than a
 * plain unwind (unw_backtrace); a thread learns on a miss only while it has
 * credit, earned by hits, so a call site reached along more stacks than
 * the memo holds costs what it did before the memo. */
#define MEMO_CREDIT 64

typedef struct {
  uintptr_t hook, ra[MEMO_FRAMES]; /* key: hook, ra[0] */
  uint32_t off[MEMO_FRAMES];       /* slot of ra[k], above the anchor */
  uint32_t n;
  uint32_t ended; /* the stack ends after n frames (ra[n - 1] is in the
                   * outermost function: _start's, a thread's clone3) */
} stack_memo;

/* A thread's memo (14 KB) sits in its rt_thread's mapping (memo_of), not
 * in TLS: static TLS is cleared in every thread the program starts, and in
 * every process, recording or not, which on the test VM cost each its
 * first touches of four pages. */
typedef struct memo_tab {
  stack_memo set[MEMO_SETS][MEMO_WAYS];
  unsigned next[MEMO_SETS]; /* way to replace next */
  struct {
    uintptr_t hook;
    uint32_t off; /* slot of the program's return address */
  } hook[MEMO_HOOKS];
  int spent; /* credit used: MEMO_CREDIT - spent is left */
} memo_tab;

/* A thread's mapping: its rt_thread, then its stack memo (unused by TSan
 * builds, which always unwind). */
#define THREAD_HEAD (((sizeof(rt_thread) + 63) / 64) * 64)
#define THREAD_MAP (THREAD_HEAD + sizeof(memo_tab))

static rt_thread *thread_new(void) {
  /* Mapped, not from the program's malloc: a shim's allocations move the
   * program's own (the struct's size moved thumbnailer's row buffers to
   * another alignment, and with them which rows libjpeg-turbo writes with
   * non-temporal stores). A mapping is page-aligned, as the ring's
   * cache-line-aligned indices need, and zeroed. */
  rt_thread *t = mmap(NULL, THREAD_MAP, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED)
    return NULL;
  /* The first RING_POPULATE bytes are populated now: a page fault per
   * fresh ring page on the hot path costs more than the rest of the hook.
   * The writer populates the rest (populate_ring). */
  void *buf = mmap(NULL, rt_cfg.ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
  if (buf == MAP_FAILED) {
    munmap(t, THREAD_MAP);
    return NULL;
  }
  size_t pop = rt_cfg.ring_bytes < RING_POPULATE ? rt_cfg.ring_bytes : RING_POPULATE;
  if (mmap(buf, pop, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE,
           -1, 0) == MAP_FAILED) {
    munmap(buf, rt_cfg.ring_bytes);
    munmap(t, THREAD_MAP);
    return NULL;
  }
  t->r.buf = buf;
  t->r.cap = rt_cfg.ring_bytes;
  t->index = rt_thread_index();
  t->parent = rt_my_parent;
  t->os_tid = (uint32_t)syscall(SYS_gettid);
  prctl(PR_GET_NAME, t->name, 0, 0, 0);
  return t;
}

static _Atomic uint64_t overhead_gone; /* of threads whose ring was freed */

/* Times a program thread found its ring full: the writer reads it to stop
 * compressing while it is behind (see pace_compression). */
static _Atomic uint64_t ring_waits;
static _Atomic uint64_t ring_wait_ns; /* how long they waited, in all */

uint64_t rt_ring_waits(uint64_t *ns) {
  *ns = atomic_load_explicit(&ring_wait_ns, memory_order_relaxed);
  return atomic_load_explicit(&ring_waits, memory_order_relaxed);
}

static void thread_free(rt_thread *t) {
  atomic_fetch_add(&overhead_gone, atomic_load_explicit(&t->overhead_ns, memory_order_relaxed));
  munmap(t->r.buf, t->r.cap);
  munmap(t, THREAD_MAP);
}

uint64_t rt_overhead_ns(void) {
  uint64_t sum = atomic_load(&overhead_gone);
  for (rt_thread *t = atomic_load(&threads); t; t = t->next)
    sum += atomic_load_explicit(&t->overhead_ns, memory_order_relaxed);
  return sum;
}

uint64_t rt_writer_cpu_ns(void) {
  clockid_t id;
  struct timespec ts;
  if (!writer_running || pthread_getcpuclockid(writer_thread, &id) != 0 ||
      clock_gettime(id, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's stack, for rt_stack's memo (below). */
static SHIM_TLS uintptr_t rt_stack_lo, rt_stack_hi;

void rt_stack_bounds(uintptr_t lo, uintptr_t hi) {
  if (lo >= hi)
    lo = hi;
  rt_stack_lo = lo;
  rt_stack_hi = hi;
}

/* A thread other than the main one (whose stack the constructor knows:
 * glibc would read /proc/self/maps for it) asks glibc where its stack is
 * when its ring is made, at its first call, after the call's clock has
 * stopped. The whole block, up to glibc's thread descriptor at its top, is
 * mapped: the frame of the function the thread started in is not the top,
 * since the trampoline of pthread_create (proc.c) may tail-call it. */
static void own_stack_bounds(void) {
  pthread_attr_t a;
  void *addr;
  size_t size;
  uintptr_t lo = 1, hi = 1; /* asked, and unknown: an empty range */
  if (pthread_getattr_np(pthread_self(), &a) == 0) {
    if (pthread_attr_getstack(&a, &addr, &size) == 0 && size > STACK_MARGIN) {
      lo = (uintptr_t)addr + STACK_MARGIN;
      hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&a);
  }
  rt_stack_bounds(lo, hi);
}

/* The calling thread's ring, made and registered at its first call. The
 * program's errno is kept: mapping the ring, reading the stack's bounds. */
static __attribute__((noinline, cold)) rt_thread *thread_register(void) {
  int saved_errno = errno;
  rt_thread *t = thread_new();
  if (!t) {
    errno = saved_errno;
    return NULL;
  }
  if (!rt_stack_hi)
    own_stack_bounds();
  rt_thread *head = atomic_load(&threads);
  do
    t->next = head;
  while (!atomic_compare_exchange_weak(&threads, &head, t));
  pthread_setspecific(thread_key, t);
  self = t;
  errno = saved_errno;
  return t;
}

/* Ring of the calling thread, registered on first use. */
static inline rt_thread *thread_self(void) {
  return SHIM_LIKELY(self != NULL) ? self : thread_register();
}

/* ---- writer lifecycle ---------------------------------------------------- */

static void *writer_main(void *arg);

/* Fatal-signal handlers go in when there is a trace to save, not at load
 * time: by then the program's runtime has installed the handlers it wants
 * (some install theirs only where the disposition is still SIG_DFL), and
 * before the first call there is nothing to write. Once per process. */
/* ---- the writer's priority ------------------------------------------------
 *
 * A writer that takes a core from one of the program's threads in the
 * middle of a timed call makes that call look slower. With two busy decode
 * threads on two cores, software replay of such a recording ran 12-44%
 * slower than the program itself; with the writer at SCHED_IDLE, -14..+23%
 * (median +3%). So the writer runs at SCHED_IDLE: the kernel gives it a core
 * only when nothing else wants one. Wherever that could starve it (a thread
 * waiting for ring space, exit, exec, a fatal signal, dlclose, fork) it is
 * raised to SCHED_OTHER, and goes back to SCHED_IDLE once no thread has
 * waited for it for WRITER_REIDLE_NS. Linux lets a thread leave SCHED_IDLE
 * only within RLIMIT_NICE, so the writer yields only when the process may
 * raise it again (root, CAP_SYS_NICE, or RLIMIT_NICE of 20 or more); else it
 * stays at normal priority, and the trace notes which it was. */
#define WRITER_REIDLE_NS 20000000ull

static int writer_may_yield;    /* decided before the writer starts */
static _Atomic int writer_tid;  /* its kernel thread id, 0 before it runs */
static _Atomic int writer_idle; /* it is at SCHED_IDLE now */

static int has_cap_sys_nice(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long eff = 0;
  int found = 0;
  if (!f)
    return 0;
  while (!found && fgets(line, sizeof line, f))
    found = sscanf(line, "CapEff: %llx", &eff) == 1;
  fclose(f);
  return found && (eff >> 23 & 1); /* CAP_SYS_NICE */
}

static int may_leave_idle(void) {
  const char *e = getenv("STANDIN_WRITER_PRIORITY");
  if (e && !strcmp(e, "normal"))
    return 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_NICE, &rl) == 0 && (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= 20))
    return 1;
  return geteuid() == 0 || has_cap_sys_nice();
}

/* From any thread, and async-signal-safe (one system call): give the writer
 * its share of the CPU back. */
static void writer_boost(void) {
  int tid = atomic_load(&writer_tid);
  if (tid == 0 || !atomic_exchange(&writer_idle, 0))
    return;
  struct sched_param sp = {0};
  if (sched_setscheduler(tid, SCHED_OTHER, &sp) != 0)
    writer_may_yield = 0; /* not allowed after all: never yield again */
}

/* On the writer thread. */
static void writer_yield(void) {
  struct sched_param sp = {0};
  if (!writer_may_yield || atomic_load(&writer_idle))
    return;
  if (sched_setscheduler(0, SCHED_IDLE, &sp) != 0) {
    writer_may_yield = 0; /* not allowed: stay at normal priority, and say so */
    return;
  }
  atomic_store(&writer_idle, 1);
  /* a thread that asked for the writer's attention just before it yielded
   * saw it not idle and did not raise it: look again */
  if (atomic_load(&writer_stop) || atomic_load(&close_signal) ||
      atomic_load(&unload_req) != atomic_load(&unload_done))
    writer_boost();
}


static void install_signal_handlers(void) {
  static int done;
  if (!done) {
    done = 1;
    rt_signals_install();
  }
}

/* Start the writer, which creates this process's trace file. Called at the
 * first intercepted call of the process (and again after a failed exec).
 * The file is the writer's to create: opening it, allocating its buffers
 * and the compressor, and writing its header took ~100 us of the first
 * call's ~250 (bind9's dnstap-read; the thread's start ~40, its ring ~30,
 * the first unwind ~25), time that a forking server's every child paid
 * on its first request. The calls made meanwhile wait in the ring; if the
 * file cannot be created, the writer says so and recording stops. */
static int start_writer(void) {
  int saved_errno = errno; /* the program's: creating the writer is standin's */
  pthread_mutex_lock(&start_lock);
  int st = atomic_load(&run_state);
  if (st == RUN_IDLE) {
    atomic_store(&writer_stop, 0);
    atomic_store(&writer_tid, 0);
    atomic_store(&writer_idle, 0);
    atomic_store(&writer_exited, 0);
    writer_may_yield = may_leave_idle();
    atomic_store(&writer_entered, 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to the program's threads */
    /* the real pthread_create: the writer must not take a thread index */
    SHIM_REAL(real_create, pthread_create);
    int rc = real_create(&writer_thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
      shim_say("cannot start the trace writer thread (%s); recording is off", strerror(rc));
      atomic_store(&run_state, RUN_OFF);
    } else {
      writer_running = 1;
      /* the handlers before any other thread may go on: until RUN_ACTIVE
       * their calls wait here for start_lock (a thread that raced ahead
       * could die before the handler that closes its trace was in, t603).
       * A writer whose file failed already has set RUN_OFF: it stays. */
      install_signal_handlers();
      int idle = RUN_IDLE;
      atomic_compare_exchange_strong(&run_state, &idle, RUN_ACTIVE);
    }
  }
  st = atomic_load(&run_state);
  pthread_mutex_unlock(&start_lock);
  errno = saved_errno;
  return st == RUN_ACTIVE ? 0 : -1;
}

/* Stop the writer after it drained every ring; the file is closed with its
 * index. `next` is the state afterwards: RUN_IDLE lets a later call open a
 * new file (exec failed), RUN_OFF ends recording (exit). New calls pass
 * straight through while the writer drains: threads that keep calling would
 * otherwise keep it busy, and exit would never return. */
static void stop_writer(int next) {
  pthread_mutex_lock(&start_lock);
  if (writer_running) {
    atomic_store(&run_state, RUN_OFF);
    atomic_store(&writer_stop, 1);
    writer_boost();
    wake_writer(); /* not the rest of its nap: the program is waiting to exit */
    pthread_join(writer_thread, NULL);
    writer_running = 0;
  }
  atomic_store(&run_state, next);
  pthread_mutex_unlock(&start_lock);
}

/* On the writer: map the rest of a ring whose thread has started to use
 * it. Without MADV_POPULATE_WRITE (Linux < 5.14) its pages fault in as
 * the thread first writes them. */
static void populate_ring(rt_thread *t) {
  if (t->populated || atomic_load_explicit(&t->r.head, memory_order_relaxed) < RING_POPULATE / 2)
    return;
  t->populated = 1;
#ifdef MADV_POPULATE_WRITE
  if (t->r.cap > RING_POPULATE)
    madvise(t->r.buf + RING_POPULATE, t->r.cap - RING_POPULATE, MADV_POPULATE_WRITE);
#endif
}

/* Compression must never slow the program down: when a program thread had
 * to wait for ring space since the last look, chunks are stored as they are
 * until the writer has kept up for COMPRESS_AGAIN_NS; and once the program
 * waits for its trace (exit, exec) what is left is stored. Checked before
 * every record: one drain of a ring whose calls hold large payloads can
 * write dozens of chunks (photo-service's exit waited 15 ms for 4 MiB of
 * pixels being deflated after the program had asked the writer to stop). */
#define COMPRESS_AGAIN_NS 1000000000ull

static uint64_t pace_waits_seen, pace_behind_since;
static int pace_storing, pace_stopping;

static void pace_compression(uint64_t now) {
  uint64_t w = atomic_load_explicit(&ring_waits, memory_order_relaxed);
  if (w != pace_waits_seen) {
    pace_waits_seen = w;
    pace_behind_since = now;
    if (!pace_storing)
      wr_set_compress(0);
    pace_storing = 1;
  } else if (pace_storing && !pace_stopping && now - pace_behind_since >= COMPRESS_AGAIN_NS) {
    wr_set_compress(1);
    pace_storing = 0;
  }
}

/* On the writer, before each record: two relaxed loads unless something
 * changed. */
static inline void pace_check(void) {
  if (SHIM_UNLIKELY(!pace_stopping && atomic_load_explicit(&writer_stop, memory_order_relaxed))) {
    pace_stopping = 1;
    pace_storing = 1;
    wr_set_compress(0);
  }
  if (SHIM_UNLIKELY(atomic_load_explicit(&ring_waits, memory_order_relaxed) != pace_waits_seen))
    pace_compression(shim_now_ns());
}

/* Process every record of one ring; returns how many. */
static size_t drain_ring(rt_thread *t) {
  size_t n = 0;
  populate_ring(t);
  ring_hdr *h;
  /* Only what was published when we looked: a thread that publishes as
   * fast as we write must not keep the writer here, away from its flush,
   * stop and signal checks. */
  uint64_t end = atomic_load_explicit(&t->r.head, memory_order_acquire);
  while (atomic_load_explicit(&t->r.tail, memory_order_relaxed) < end &&
         (h = ring_peek(&t->r)) != NULL) {
    pace_check();
    wr_record(t, h);
    ring_consume(&t->r, h);
    n++;
  }
  return n;
}

/* Before the file closes or the types go: sizes still waiting for a pack
 * are written without one. */
static void flush_held_all(void) {
  for (rt_thread *t = atomic_load(&threads); t; t = t->next)
    wr_flush_held(t);
}

/* Drain all rings once; free the rings of threads that exited. */
static size_t drain_all(void) {
  size_t n = 0;
  rt_thread *prev = NULL;
  rt_thread *t = atomic_load(&threads);
  while (t) {
    n += drain_ring(t);
    rt_thread *next = t->next;
    if (atomic_load_explicit(&t->dead, memory_order_acquire) && ring_empty(&t->r)) {
      wr_flush_held(t); /* nothing more will come from it */
      /* Only the writer unlinks; the head may be replaced by a concurrent
       * push, in which case the node is unlinked on a later round. */
      if (prev) {
        prev->next = next;
        thread_free(t);
        t = next;
        continue;
      }
      rt_thread *expect = t;
      if (atomic_compare_exchange_strong(&threads, &expect, next)) {
        thread_free(t);
        t = next;
        continue;
      }
    }
    prev = t;
    t = next;
  }
  return n;
}

/* A fatal signal is ending the process: stop taking calls, write what the
 * rings hold (a few passes: other threads may still be finishing a call),
 * note the signal and close the file. */
static void close_for_signal(int sig) {
  atomic_store(&run_state, RUN_OFF);
  /* the program is dying and waits (a bounded time) for its trace: what is
   * left in the rings is stored as it is, not compressed */
  wr_set_compress(0);
  for (int pass = 0; pass < 8 && drain_all() > 0; pass++)
    ;
  flush_held_all();
  char v[16];
  snprintf(v, sizeof v, "%d", sig);
  wr_note("ended_by_signal", v);
  wr_close();
  atomic_store(&closed_for_signal, 1);
}

/* The main thread may leave with pthread_exit while others go on: the
 * process then ends with its last thread, where glibc calls exit(0). The
 * writer is a thread of the process too, one that blocks every signal: the
 * program's last thread left it running, so the process never ended, and
 * only SIGKILL did. Once the main thread has left, the writer looks at
 * each nap whether any thread but that dead one and itself is left (the
 * count in /proc/self/stat), and if none is, ends the process as its last
 * thread would have. */
static _Atomic int leader_left;
static int stat_fd = -1; /* the writer's, near the top of the table */
static uint64_t alone_checked_ns;

void rt_leader_exits(void) {
  if ((uint32_t)getpid() != rt_cfg.pid)
    return; /* a vfork child */
  atomic_store(&leader_left, 1);
  wake_writer();
}

/* /proc/self/stat says the main thread is dead (state Z: the process's
 * state is its leader's) and the process holds two threads (it, and the
 * writer). 0 when it cannot be read: the writer then waits, as before. */
static int writer_alone(void) {
  char buf[1024];
  if (stat_fd < 0) {
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return 0;
    stat_fd = st_fd_to_high(fd);
  }
  ssize_t n = pread(stat_fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  /* "PID (NAME) STATE ...": the pid as the /proc mounted sees it, which
   * in a PID namespace of the process's own is not getpid()'s; the name
   * may hold ')' */
  char *e, *p = strrchr(buf, ')');
  if (!p || strtoul(buf, &e, 10) == 0 || strncmp(e, " (", 2) != 0 || p[1] != ' ' || p[2] != 'Z')
    return 0;
  p += 2; /* field 3; the thread count is field 20 */
  for (int f = 3; f < 20 && p; f++)
    p = strchr(p + 1, ' ');
  return p && strtol(p + 1, NULL, 10) <= 2;
}

static int orphaned(uint64_t now) {
  if (!atomic_load(&leader_left) || now - alone_checked_ns < WRITER_DEEP_NAP_NS)
    return 0;
  alone_checked_ns = now;
  return writer_alone();
}

/* On the writer, its file closed: the exit the program's last thread
 * would have made (exit handlers, stdio, status 0). */
static void exit_as_last_thread(void) {
  pthread_mutex_lock(&start_lock);
  atomic_store(&run_state, RUN_OFF);
  writer_running = 0; /* nothing to join: this is the writer */
  pthread_mutex_unlock(&start_lock);
  exit(0);
}

static void *writer_main(void *arg) {
  (void)arg;
  in_writer = 1;
  atomic_store(&writer_entered, 1);
  prctl(PR_SET_NAME, "standin-writer", 0, 0, 0);
  /* under writer_work like every round: a fork waits for it, so no child
   * inherits an allocator lock taken here (the note allocates) */
  pthread_mutex_lock(&writer_work);
  if (wr_open(&rt_cfg) != 0) { /* it said why; calls now pass straight through */
    atomic_store(&run_state, RUN_OFF);
    atomic_store(&writer_exited, 1);
    pthread_mutex_unlock(&writer_work);
    return NULL;
  }
  wr_calibrate();
  atomic_store(&writer_tid, (int)syscall(SYS_gettid));
  writer_yield();
  /* what the writer may do, not where it is now: a program that is already
   * exiting has raised it back (writer_stop) without any lack of privilege */
  wr_note("writer_priority", writer_may_yield ? "idle" : "normal");
  pthread_mutex_unlock(&writer_work);
  uint64_t last_flush = shim_now_ns(), last_busy = last_flush;
  uint64_t waits_seen = atomic_load(&ring_waits), calm_since = last_flush;
  /* a new file (after a failed exec) starts compressing, as st_writer_open */
  pace_waits_seen = waits_seen;
  pace_storing = pace_stopping = 0;
  int stop_stalled = 0, alone = 0;
  for (;;) {
    pthread_mutex_lock(&writer_work);
    int sig = atomic_load(&close_signal);
    if (sig) {
      close_for_signal(sig);
      atomic_store(&writer_exited, 1);
      pthread_mutex_unlock(&writer_work);
      return NULL;
    }
    uint64_t req = atomic_load(&unload_req);
    if (req != atomic_load(&unload_done)) {
      for (int pass = 0; pass < 8 && drain_all() > 0; pass++)
        ;
      flush_held_all(); /* their types are about to go */
      wr_forget_types();
      atomic_store(&unload_done, req);
    }
    int stopping = atomic_load(&writer_stop);
    if (SHIM_UNLIKELY(rt_cfg.writer_stop_stall_ns) && stopping && !stop_stalled) {
      stop_stalled = 1; /* then a round again: a signal may have come meanwhile */
      struct timespec st = {(time_t)(rt_cfg.writer_stop_stall_ns / 1000000000ull),
                            (long)(rt_cfg.writer_stop_stall_ns % 1000000000ull)};
      pthread_mutex_unlock(&writer_work);
      nanosleep(&st, NULL);
      continue;
    }
    /* the program waits for its trace to exit (or exec): what is left then
     * is stored as it is. Deflating a 640x480 decode's pixels took 8 ms of
     * a 14 ms djpeg-like run; stored, the trace is ~20% larger */
    pace_check();
    if (SHIM_UNLIKELY(rt_cfg.writer_stall_ns) && !stopping) {
      struct timespec st = {0, (long)(rt_cfg.writer_stall_ns % 1000000000ull)};
      nanosleep(&st, NULL);
    }
    size_t n = drain_all();
    uint64_t now = shim_now_ns();
    pace_compression(now); /* compress again after a calm second */
    uint64_t w = atomic_load_explicit(&ring_waits, memory_order_relaxed);
    if (w != waits_seen) {
      waits_seen = w;
      calm_since = now;
    } else if (!stopping && now - calm_since >= WRITER_REIDLE_NS) {
      writer_yield();
    }
    if (now - last_flush >= FLUSH_EVERY_NS) {
      wr_flush();
      last_flush = now;
    }
    if (stopping && n == 0)
      break;
    if (n == 0 && !stopping && orphaned(now)) {
      /* the program's last thread may have made calls after the drain
       * above and left before the count was read (t680 lost its 60 calls
       * once, under load): no thread but this one writes now, so what is
       * in the rings is all there is */
      while (drain_all() != 0)
        ;
      alone = 1;
      break;
    }
    pthread_mutex_unlock(&writer_work);
    if (n)
      last_busy = now;
    else
      writer_nap(now - last_busy >= WRITER_DEEP_AFTER_NS ? WRITER_DEEP_NAP_NS : WRITER_IDLE_NS);
  }
  flush_held_all();
  wr_close();
  atomic_store(&writer_exited, 1);
  pthread_mutex_unlock(&writer_work);
  if (alone)
    exit_as_last_thread();
  return NULL;
}

/* Wait, a bounded time, until the writer has closed the file (or ended).
 * Async-signal-safe. */
static void wait_writer_done(uint64_t wait_ns, uint64_t poll_ns) {
  struct timespec ts = {0, (long)poll_ns};
  for (uint64_t waited = 0;
       waited < wait_ns && !atomic_load(&closed_for_signal) && !atomic_load(&writer_exited);
       waited += poll_ns)
    nanosleep(&ts, NULL);
}

/* Async-signal-safe: no lock, no allocation. writer_running is read without
 * start_lock; a stale value only means we skip the wait (the writer was
 * starting) or wait for nothing (it was stopping) until the timeout.
 *
 * A process that is already exiting has its writer closing the file
 * (stop_writer: recording off, the writer told to stop): the signal waits
 * for that too, and the writer notes it if it has not closed yet. Chromium
 * sends its renderers SIGTERM as they exit: one that came while the
 * renderer's exit waited for its writer killed it there, and 6 of 8
 * renderer traces were left unclosed. */
void rt_close_for_signal(int sig, uint64_t wait_ns, uint64_t poll_ns) {
  /* the writer itself (SIGABRT from inside it), a vfork child sharing our
   * memory, or nothing recorded yet, or recording stopped for good (the
   * file closed, or a seccomp filter that may refuse the writer's calls) */
  int stopping = atomic_load(&writer_stop) && atomic_load(&run_state) == RUN_OFF;
  if (rt_sealed || in_writer || (uint32_t)getpid() != rt_cfg.pid || !writer_running ||
      (atomic_load(&run_state) != RUN_ACTIVE && !stopping))
    return;
  int none = 0;
  atomic_compare_exchange_strong(&close_signal, &none, sig);
  writer_boost();
  wake_writer();
  wait_writer_done(wait_ns, poll_ns);
}

/* Records in the rings point at message descriptors that the writer reads
 * later (those in an object's image: typecap.h); a library unloaded in
 * between would take them away, and a library loaded in its place may put
 * another type at the same address. So before dlclose, wait (bounded)
 * until the writer has written every queued call and forgotten the types
 * it knows. */
void rt_before_unload(void) {
  if (rt_sealed || in_writer || (uint32_t)getpid() != rt_cfg.pid || !writer_running ||
      atomic_load(&run_state) != RUN_ACTIVE)
    return;
  uint64_t want = atomic_fetch_add(&unload_req, 1) + 1;
  writer_boost();
  wake_writer();
  struct timespec ts = {0, 100000};
  for (int i = 0; i < 20000 && atomic_load(&unload_done) < want && !atomic_load(&writer_exited);
       i++)
    nanosleep(&ts, NULL);
}

void rt_writer_failed(void) {
  atomic_store(&run_state, RUN_OFF); /* the hooks pass calls straight through */
}

/* ---- submitting calls ---------------------------------------------------- */

/* ---- call stacks ----------------------------------------------------------
 *
 * A full unwind costs ~720 instructions a call (callgrind, 3 frames: most
 * of what the pack hook adds). Most calls come again from the same stack,
 * so each thread remembers, per (hook, program call site), where on the
 * stack the unwind found each return address and what it was. The next
 * call from that site reads those slots; when every one holds the same
 * return address, the stack is the one unwound before: unwinding is a
 * function of the code addresses and the stack pointer, and the slots
 * are read relative to this function's frame. Any mismatch unwinds again.
 * (A frame whose size varies, alloca, could in principle leave the old
 * slot holding the same return address by chance: stale stack memory.)
 * Slots are read only between our frame and the top of the thread's own
 * stack (rt_stack_bounds), so a program on a stack of its own (coroutines)
 * just unwinds every time. */

SHIM_TLS int rt_in_unwind;

/* Unwinds (memo misses), for the trace's notes: a relaxed add on the slow
 * path only. */
static _Atomic uint64_t stacks_unwound;

uint64_t rt_stacks_unwound(void) {
  return atomic_load_explicit(&stacks_unwound, memory_order_relaxed);
}

/* The stack above the hook without the memo: libunwind's unw_backtrace,
 * or glibc's backtrace under TSan (libunwind keeps a per-thread cache whose
 * thread-key destructor runs after ThreadSanitizer has torn the thread
 * down, and crashes in TSan's mutex interceptor) and where libunwind could
 * not be loaded (lazylibs.c). Inlined into rt_stack, so frame 0 is
 * rt_stack and frame 1 the hook (`hook`, the address rt_stack returns to),
 * unless the unwinder adds frames of its own (a sanitizer's interceptor of
 * backtrace does): the program's frames start after the hook's. */
#define PLAIN_SLACK 3 /* frames an unwinder may add before rt_stack's */
static inline __attribute__((always_inline)) int plain_unwind(void **ips, int max, uintptr_t hook) {
  void *buf[ST_MAX_FRAMES + 2 + PLAIN_SLACK];
#ifdef __SANITIZE_THREAD__
  int n = backtrace(buf, max + 2 + PLAIN_SLACK);
#else
  int n = rt_unw.backtrace ? rt_unw.backtrace(buf, max + 2 + PLAIN_SLACK)
                           : backtrace(buf, max + 2 + PLAIN_SLACK);
#endif
  int from = 2;
  for (int i = 0; i < n && i < 2 + PLAIN_SLACK; i++)
    if ((uintptr_t)buf[i] == hook) {
      from = i + 1;
      break;
    }
  int k = 0;
  for (int i = from; i < n && k < max; i++)
    ips[k++] = buf[i];
  return k;
}

#ifndef __SANITIZE_THREAD__ /* TSan: plain_unwind, no memo */

static memo_tab *memo_of(rt_thread *t) {
  return t ? (memo_tab *)((char *)t + THREAD_HEAD) : NULL;
}

static unsigned memo_set(uintptr_t hook, uintptr_t ra) {
  uint64_t h = ((uint64_t)hook ^ ((uint64_t)ra * 0x9E3779B97F4A7C15ull)) >> 29;
  return (unsigned)(h % MEMO_SETS);
}

static int memo_hook_find(const memo_tab *mt, uintptr_t hook) {
  for (int i = 0; i < MEMO_HOOKS && mt->hook[i].hook; i++)
    if (mt->hook[i].hook == hook)
      return i;
  return -1;
}

/* The remembered stack, or 0 when there is none that still holds. */
static int memo_find(memo_tab *mt, uintptr_t anchor, uintptr_t hook, void **ips, int max) {
  if (anchor < rt_stack_lo || anchor >= rt_stack_hi)
    return 0;
  int h = memo_hook_find(mt, hook);
  if (h < 0 || anchor + mt->hook[h].off + 8 > rt_stack_hi)
    return 0;
  uintptr_t ra0 = *(const uintptr_t *)(anchor + mt->hook[h].off);
  const stack_memo *set = mt->set[memo_set(hook, ra0)];
  for (int w = 0; w < MEMO_WAYS; w++) {
    const stack_memo *m = &set[w];
    /* a stack shallower than max holds only if it ended there */
    int n = (int)m->n < max ? (int)m->n : max;
    if (m->hook != hook || m->ra[0] != ra0 || (n < max && !m->ended))
      continue;
    int k = 1;
    while (k < n && anchor + m->off[k] + 8 <= rt_stack_hi &&
           *(const uintptr_t *)(anchor + m->off[k]) == m->ra[k])
      k++;
    if (k < n)
      continue;
    for (k = 0; k < n; k++)
      ips[k] = (void *)m->ra[k];
    if (mt->spent > 0)
      mt->spent--;
    return n;
  }
  return 0;
}

static void memo_keep(memo_tab *mt, const stack_memo *m) {
  int h = memo_hook_find(mt, m->hook);
  if (h < 0) {
    for (h = 0; h < MEMO_HOOKS && mt->hook[h].hook; h++)
      ;
    if (h == MEMO_HOOKS)
      return; /* more call sites of rt_stack than there are */
    mt->hook[h].hook = m->hook;
  }
  mt->hook[h].off = m->off[0];
  unsigned s = memo_set(m->hook, m->ra[0]);
  mt->set[s][mt->next[s]] = *m;
  mt->next[s] = (mt->next[s] + 1) % MEMO_WAYS;
}

/* Unwind, and remember where each return address was when every one is
 * a plain return address on this stack (not a signal frame's). */
static inline __attribute__((always_inline)) int unwind(memo_tab *mt, uintptr_t anchor,
                                                       uintptr_t hook, void **ips, int max) {
  int keep = mt && rt_unw.getcontext && max <= MEMO_FRAMES && anchor >= rt_stack_lo &&
             anchor < rt_stack_hi && mt->spent < MEMO_CREDIT;
  if (!keep)
    return plain_unwind(ips, max, hook);
  mt->spent++;
  unw_context_t uc;
  unw_cursor_t cur;
  if (rt_unw.getcontext(&uc) != 0 || rt_unw.init_local(&cur, &uc) != 0)
    return 0;
  stack_memo m = {.hook = hook};
  int k = 0, step = 1;
  for (int frame = 1; k < max && (step = rt_unw.step(&cur)) > 0; frame++) {
    unw_word_t ip, sp;
    if (rt_unw.get_reg(&cur, UNW_REG_IP, &ip) != 0 || rt_unw.get_reg(&cur, UNW_REG_SP, &sp) != 0)
      break;
    if (frame == 1) {
      keep &= ip == hook;
      continue;
    }
    ips[k] = (void *)ip;
    uintptr_t slot = (uintptr_t)sp - 8; /* where the call put it */
    if (keep && slot > anchor && slot + 8 <= rt_stack_hi && slot - anchor < UINT32_MAX &&
        *(const uintptr_t *)slot == (uintptr_t)ip) {
      m.ra[k] = (uintptr_t)ip;
      m.off[k] = (uint32_t)(slot - anchor);
    } else {
      keep = 0;
    }
    k++;
  }
  /* a stack that ended before max frames (step 0: the outermost frame's
   * return address is undefined) is kept as it is: the same return
   * addresses in the same slots lead to the same outermost function */
  if (keep && k > 0 && (k == max || step == 0)) {
    m.n = (uint32_t)k;
    m.ended = k < max;
    memo_keep(mt, &m);
  }
  return k;
}

#endif

/* Threads inside libunwind now (rt_stack). libunwind takes mutexes of its
 * own while it unwinds, and a fork while another thread holds one leaves
 * it locked for good in the child, whose first unwind then hangs: t608's
 * forked child hung so about once in 60 to 150 runs. atfork_prepare waits
 * for every unwind to end and keeps new ones out until the fork is done. */
static _Atomic uint32_t unwinders;
static _Atomic uint32_t forking;

#ifndef __SANITIZE_THREAD__ /* TSan: glibc's backtrace, not libunwind */
static void unwind_enter(void) {
  for (;;) {
    atomic_fetch_add(&unwinders, 1); /* then read forking: both seq_cst */
    if (!atomic_load(&forking))
      return;
    atomic_fetch_sub(&unwinders, 1);
    while (atomic_load_explicit(&forking, memory_order_relaxed))
      sched_yield();
  }
}

static void unwind_leave(void) {
  atomic_fetch_sub_explicit(&unwinders, 1, memory_order_release);
}
#endif

__attribute__((noinline)) int rt_stack(void **ips, int max) {
  if (max > rt_cfg.stack_depth)
    max = rt_cfg.stack_depth;
  if (max <= 0 || rt_cfg.timing) /* a timing run keeps no stacks (nor rings) */
    return 0;
  uintptr_t hook = (uintptr_t)__builtin_return_address(0);
#ifdef __SANITIZE_THREAD__
  atomic_fetch_add_explicit(&stacks_unwound, 1, memory_order_relaxed);
  return plain_unwind(ips, max, hook);
#else
  uintptr_t anchor = (uintptr_t)__builtin_frame_address(0);
  /* the thread's ring, with its memo, is made here at its first call: a
   * first unwind without the memo would be libunwind's unw_backtrace,
   * whose per-thread cache clears 256 KiB */
  memo_tab *mt = rt_cfg.stack_memo ? memo_of(thread_self()) : NULL;
  int n = mt ? memo_find(mt, anchor, hook, ips, max) : 0; /* 0: plain unwind */
  if (n)
    return n;
  /* the program's errno is left as its call left it: the first unwind
   * loads libunwind, whose address check reads a non-blocking pipe (EAGAIN) */
  int saved_errno = errno;
  atomic_fetch_add_explicit(&stacks_unwound, 1, memory_order_relaxed);
  /* libunwind's descriptors are standin's (fdguard.c) */
  unwind_enter();
  rt_in_unwind = 1;
  rt_unw_ready(); /* loaded at the process's first unwind; a fork waits for it */
  n = unwind(mt, anchor, hook, ips, max);
  rt_in_unwind = 0;
  unwind_leave();
  errno = saved_errno;
  return n;
#endif
}

static void drop_payloads(const rt_call *c) {
  if (c->req.kind == RT_PAY_OWN)
    shim_free((void *)c->req.data);
  if (c->resp.kind == RT_PAY_OWN)
    shim_free((void *)c->resp.data);
}

/* One turn of a wait for the writer (ring space, payload backlog): the
 * first turn counts the wait and raises the writer's priority. 0 once the
 * writer stopped: the caller gives up. */
typedef struct {
  unsigned spins;
  uint64_t t0;
} writer_wait;

static int wait_turn(writer_wait *w) {
  int saved_errno = errno; /* the program's: the wait is standin's */
  if (w->spins == 0) {
    atomic_fetch_add_explicit(&ring_waits, 1, memory_order_relaxed);
    w->t0 = shim_now_ns();
    writer_boost();
    wake_writer();
  }
  if (atomic_load(&run_state) != RUN_ACTIVE)
    return 0;
  if (++w->spins < 64) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
  errno = saved_errno;
  return 1;
}

static void wait_done(const writer_wait *w) {
  if (w->spins)
    atomic_fetch_add_explicit(&ring_wait_ns, shim_now_ns() - w->t0, memory_order_relaxed);
}

/* Wait for ring space while the writer is running; 0 if it stopped. */
static void *reserve_wait(rt_thread *t, uint32_t len) {
  void *p;
  writer_wait w = {0, 0};
  while ((p = ring_reserve(&t->r, len)) == NULL && wait_turn(&w))
    ;
  wait_done(&w);
  return p;
}

/* Payloads too large for a ring (stage_payload) and those a hook built on
 * the heap (JPEG rows) wait there until the writer has written them. Their
 * bytes are bounded as the rings are: a call that would take them past
 * BACKLOG_RINGS rings' worth waits, as for ring space (one payload is always
 * let through). Unbounded, a writer starved of CPU (SCHED_IDLE, under a
 * program that keeps every core busy) let them pile up for the exit to
 * write: photo-service -n 300 recorded took 2x its native page faults, 46%
 * of them the hook's row copies into fresh pages, and waited for the
 * backlog at exit. */
#define BACKLOG_RINGS 8
static _Atomic uint64_t backlog_bytes;

static _Atomic uint64_t backlog_peak;

uint64_t rt_backlog_max(void) {
  return rt_cfg.ring_bytes * BACKLOG_RINGS;
}

uint64_t rt_backlog_peak(void) {
  return atomic_load_explicit(&backlog_peak, memory_order_relaxed);
}

void rt_backlog_written(uint64_t bytes) {
  atomic_fetch_sub_explicit(&backlog_bytes, bytes, memory_order_relaxed);
}

static void backlog_wait(uint64_t len) {
  uint64_t max = rt_backlog_max();
  uint64_t cur = atomic_load_explicit(&backlog_bytes, memory_order_relaxed);
  if (SHIM_LIKELY(cur == 0 || cur + len <= max))
    return;
  writer_wait w = {0, 0};
  do {
    if (!wait_turn(&w))
      break;
    cur = atomic_load_explicit(&backlog_bytes, memory_order_relaxed);
  } while (cur != 0 && cur + len > max);
  wait_done(&w);
}

/* Payloads larger than this move to the heap instead of through the ring
 * (every thread's ring has rt_cfg.ring_bytes). */
static uint64_t inline_limit(void) {
  return rt_cfg.ring_bytes / 8;
}

static void stage_payload(rt_payload *p) {
  if (p->kind == RT_PAY_COPY && p->len > inline_limit()) {
    void *copy = shim_alloc(p->len);
    if (copy) {
      memcpy(copy, p->data, p->len);
      p->data = copy;
      p->kind = RT_PAY_OWN;
    } else {
      p->kind = RT_PAY_NONE;
    }
  }
}

int rt_keep_whole(rt_payload *p) {
  stage_payload(p);
  return p->kind == RT_PAY_NONE ? -1 : 0;
}

/* ---- message types the writer holds a schema for --------------------------
 *
 * A hook may leave a pack call's fingerprint to the writer only if the
 * writer will have the type's schema when it gets to the call: it has once
 * it wrote the type with one (sink.c write_type), until it forgets its
 * types. A fixed open-addressing set of descriptor addresses: the writer
 * stores, program threads load, no lock. Full neighbourhoods just mean
 * those types are walked on the calling thread. A program thread may see a
 * type that was just forgotten; the writer then builds the schema again
 * when the call comes (and flags the call PB_REASON_NOFP if it cannot). */
#define SCHEMA_BITS 10
static keyset_slot_t schema_keys[1u << SCHEMA_BITS];

/* The writer keeps up with the calling thread: its ring is less than half
 * full. */
static int writer_keeps_up(void) {
  rt_thread *t = self;
  if (t == NULL)
    return 0;
  return ring_used(&t->r, t->r.cap / 2 - 1) < t->r.cap / 2;
}

/* Types whose get_packed_size calls did not find a pack to pair with
 * (written without a fingerprint): their sizes walk the tree again. The
 * writer adds, program threads look, forgotten with the schemas. */
static keyset_slot_t size_walk_keys[1u << SCHEMA_BITS];

void rt_size_walk(const void *key) {
  keyset_add(size_walk_keys, SCHEMA_BITS, key);
}

int rt_size_may_pair(const void *key) {
  return !keyset_has(size_walk_keys, SCHEMA_BITS, key) && rt_defer_fp(key);
}

int rt_schema_known(const void *key) {
  return keyset_has(schema_keys, SCHEMA_BITS, key);
}

int rt_defer_fp(const void *key) {
  if (rt_cfg.pack_fp_walk || !writer_keeps_up())
    return 0;
  return rt_schema_known(key);
}

static SHIM_TLS uint64_t submitted;

uint32_t rt_thread_index(void) {
  if (rt_my_index == UINT32_MAX)
    rt_my_index = rt_next_thread_index();
  return rt_my_index;
}

uint64_t rt_submitted(void) {
  return submitted;
}

void rt_schema_ready(const void *key) {
  keyset_add(schema_keys, SCHEMA_BITS, key);
}

void rt_schema_forget_all(void) {
  keyset_clear(schema_keys, SCHEMA_BITS);
  keyset_clear(size_walk_keys, SCHEMA_BITS);
}

/* Calls of threads whose ring could not be mapped (an address-space limit,
 * ulimit -v, with many threads): not recorded, but counted (the trace's
 * calls_without_ring, which info reports) and said once a process. */
static _Atomic uint64_t calls_no_ring;

uint64_t rt_calls_without_ring(void) {
  return atomic_load_explicit(&calls_no_ring, memory_order_relaxed);
}

static __attribute__((noinline, cold)) void no_ring(rt_call *c) {
  int saved_errno = errno;
  drop_payloads(c);
  if (atomic_fetch_add(&calls_no_ring, 1) == 0)
    shim_say("cannot map a %zu KiB ring for a thread of pid %d: its calls are not recorded "
             "(counted; the program goes on). The address space is short (ulimit -v?): a "
             "smaller STANDIN_RING_KB helps",
             rt_cfg.ring_bytes >> 10, (int)getpid());
  errno = saved_errno;
}

/* The program's errno is kept where standin makes system calls of its own
 * (thread_register, start_writer, wait_turn): not on every call. */
void rt_submit(rt_call *c, void *const *ips, int nips) {
  if (SHIM_UNLIKELY(atomic_load_explicit(&run_state, memory_order_acquire) != RUN_ACTIVE) &&
      start_writer() != 0) {
    drop_payloads(c);
    return;
  }
  rt_thread *t = thread_self();
  if (!t) {
    no_ring(c);
    return;
  }
  submitted++;
  if (c->type_key && c->api >= ST_API_PB_PACK && c->api <= ST_API_PB_UNPACK)
    rt_type_capture(c->type_key); /* before the writer can see the call */
  stage_payload(&c->req);
  stage_payload(&c->resp);
  uint64_t inl = (c->req.kind == RT_PAY_COPY ? c->req.len : 0) +
                 (c->resp.kind == RT_PAY_COPY ? c->resp.len : 0);
  uint64_t own =
      (c->req.kind == RT_PAY_OWN ? c->req.len : 0) + (c->resp.kind == RT_PAY_OWN ? c->resp.len : 0);
  if (own)
    backlog_wait(own);
  uint32_t len = ring_align(sizeof(raw_call) + (uint64_t)c->nfeat * 8 + (uint64_t)nips * 8 + inl);
  raw_call *rc = reserve_wait(t, len);
  if (!rc) {
    t->lost++;
    drop_payloads(c);
    return;
  }
  uint64_t backlog = 0; /* the writer takes it off when it frees them (rt_backlog_written) */
  if (own) {
    backlog = atomic_fetch_add_explicit(&backlog_bytes, own, memory_order_relaxed) + own;
    uint64_t peak = atomic_load_explicit(&backlog_peak, memory_order_relaxed);
    while (backlog > peak &&
           !atomic_compare_exchange_weak_explicit(&backlog_peak, &peak, backlog,
                                                  memory_order_relaxed, memory_order_relaxed))
      ;
  }
  rc->h.len = len;
  rc->h.kind = RAW_CALL;
  rc->api = c->api;
  rc->flags = c->flags;
  rc->reason = c->reason;
  rc->nfeat = c->nfeat;
  rc->nips = (uint8_t)nips;
  rc->nested = c->nested;
  rc->derive_fp = c->derive_fp;
  rc->pairs_size = c->pairs_size;
  rc->work_thread = c->work_thread;
  rc->fault_ns = c->fault_ns;
  rc->req_kind = (uint8_t)c->req.kind;
  rc->resp_kind = (uint8_t)c->resp.kind;
  rc->start_ns = c->start_ns;
  rc->latency_ns = c->latency_ns;
  rc->result = c->result;
  memcpy(rc->fp, c->fp, 16);
  rc->type_key = c->type_key;
  rc->req_len = c->req_len;
  rc->resp_len = c->resp_len;
  rc->req_saved = c->req.kind == RT_PAY_NONE ? 0 : c->req.len;
  rc->resp_saved = c->resp.kind == RT_PAY_NONE ? 0 : c->resp.len;
  rc->req_ptr = c->req.kind == RT_PAY_OWN ? c->req.data : NULL;
  rc->resp_ptr = c->resp.kind == RT_PAY_OWN ? c->resp.data : NULL;
  uint8_t *p = (uint8_t *)(rc + 1);
  memcpy(p, c->feat, (size_t)c->nfeat * 8);
  p += (size_t)c->nfeat * 8;
  memcpy(p, ips, (size_t)nips * 8);
  p += (size_t)nips * 8;
  if (c->req.kind == RT_PAY_COPY) {
    memcpy(p, c->req.data, c->req.len);
    p += c->req.len;
  }
  if (c->resp.kind == RT_PAY_COPY)
    memcpy(p, c->resp.data, c->resp.len);
  ring_publish(&t->r, len);
  wake_writer_if_filling(t, backlog, own ? rt_backlog_max() : UINT64_MAX);
  /* The hook's work is finished here, before the program goes on: still
   * in flight when its next call starts, it slows that call, whose latency
   * is what is recorded. On the AMD EPYC VM of 2026-11-28 a recorded 64 B
   * pack in a loop measured 129-184 ns without a fence, 138-182 with a
   * locked instruction (a store barrier) and 47-134 with MFENCE (45-50
   * retimed, record --retime; the native loop takes 57-60 ns an
   * iteration). The wait is the hook's time, counted below. */
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_mfence();
#else
  atomic_thread_fence(memory_order_seq_cst);
#endif
  if (c->end_ns) { /* single writer: a relaxed load and store, no lock prefix */
    uint64_t mine = shim_now_ns() - c->end_ns;
    atomic_store_explicit(&t->overhead_ns,
                          atomic_load_explicit(&t->overhead_ns, memory_order_relaxed) + mine,
                          memory_order_relaxed);
  }
}

void rt_note(const char *key, const char *value) {
  if (atomic_load(&run_state) != RUN_ACTIVE && start_writer() != 0)
    return;
  rt_thread *t = thread_self();
  if (!t)
    return;
  submitted++;
  size_t kl = strnlen(key, 255), vl = strnlen(value, 4000);
  uint32_t len = ring_align(sizeof(ring_hdr) + 2 + kl + vl + 2);
  uint8_t *p = reserve_wait(t, len);
  if (!p)
    return;
  ring_hdr *h = (ring_hdr *)p;
  h->len = len;
  h->kind = RAW_NOTE;
  uint8_t *q = p + sizeof(ring_hdr);
  memcpy(q, key, kl);
  q[kl] = 0;
  memcpy(q + kl + 1, value, vl);
  q[kl + 1 + vl] = 0;
  ring_publish(&t->r, len);
}

/* ---- process events ------------------------------------------------------ */

void rt_before_exec(void) {
  if (rt_sealed)
    return;
  if (rt_cfg.timing)
    rt_timing_write();
  stop_writer(RUN_IDLE);
}

/* A seccomp filter may refuse any system call recording makes after it is
 * installed (the trace file, the writer thread, a ring, libunwind's pipe,
 * the libraries loaded late), or kill the process for one (SIGSYS): an
 * allowlist that knows only the program's own needs killed it under record
 * while it ran natively. Which calls a filter allows cannot be known
 * beforehand, so recording of the process stops before it is installed:
 * the rings are drained and the file closed, as at exec, and its calls
 * (and its children's, which inherit the filter) run untouched from then on. */
int rt_sealed;

void rt_before_seccomp(void) {
  if (rt_sealed || (uint32_t)getpid() != rt_cfg.pid)
    return; /* done, or a vfork child in its parent's memory */
  /* a process whose recording is off already (no API, no file) is sealed
   * too: its exit hooks would still ask for its pid */
  int had = writer_running, on = rt_cfg.apis != 0 && atomic_load(&run_state) != RUN_OFF;
  if (on && rt_cfg.timing)
    rt_timing_write();
  else if (on) /* info says why the trace ends early (or holds no call) */
    rt_note("recording_stopped", "seccomp");
  if (on)
    stop_writer(RUN_OFF);
  shim_fatal_uninstall(); /* nothing left to save at a fatal signal */
  rt_sealed = 1;          /* from now on no hook of ours makes a system call */
  if (on && !rt_cfg.timing)
    shim_say("pid %u installs a seccomp filter, which may refuse what recording needs: "
             "recording stops for it here (%s); the calls it makes from now on run "
             "unrecorded, and so do its children's",
             rt_cfg.pid, had ? "its trace keeps the calls before" : "it had made no call");
}

/* How long an _exit waits for a trace another thread's exit is closing (as
 * long as a dying program waits for it: signals.c). */
#define EXIT_WAIT_NS 2000000000ull

void rt_before_exit(void) {
  if (rt_sealed)
    return;
  if (rt_cfg.timing)
    rt_timing_write();
  /* _exit may come from a signal handler that interrupted start or stop:
   * never wait for the lock there. But when the writer is already stopping
   * (the process's exit, on this thread or another, holds the lock while it
   * waits), wait for the file as that exit does: a renderer's IO thread
   * calls _exit when Chromium's browser goes away, and its _exit cut the
   * main thread's exit short, the trace half written (4 of 16 runs). The
   * writer takes no lock the stop holds. */
  if (pthread_mutex_trylock(&start_lock) != 0) {
    if (atomic_load(&writer_stop) && writer_running)
      wait_writer_done(EXIT_WAIT_NS, 1000000);
    return;
  }
  pthread_mutex_unlock(&start_lock);
  stop_writer(RUN_OFF);
}

static void atfork_child(void) {
  shim_alloc_fork_release();
  rt_type_fork_unlock();
  atomic_store(&unwinders, 0); /* none: the threads that could were left behind */
  atomic_store(&forking, 0);
  atomic_store(&overhead_gone, 0);
  atomic_store(&backlog_bytes, 0); /* the parent's payloads are lost here, below */
  atomic_store(&backlog_peak, 0);
  atomic_store(&stacks_unwound, 0); /* the parent's */
  if (rt_cfg.timing)
    rt_timing_forget();
  /* The child's writer learns its types afresh: until it has, calls walk. */
  rt_schema_forget_all();
  /* The writer thread does not exist here, and every ring but ours holds
   * records of the parent's threads: the child starts a file of its own and
   * never writes the parent's unflushed records. The parent's writer state
   * is left as it is (it may be mid-update), only its memory is lost. */
  wr_forget();
  rt_thread *t = atomic_load(&threads);
  while (t) {
    rt_thread *next = t->next;
    if (t != self)
      thread_free(t);
    t = next;
  }
  if (self) {
    atomic_store(&self->r.head, 0);
    atomic_store(&self->r.tail, 0);
    self->r.tail_seen = 0;
    self->r.head_seen = 0;
    self->next = NULL;
    self->lost = 0;
    self->has_held = 0; /* the parent's call */
    atomic_store(&self->overhead_ns, 0); /* the parent's time is the parent's */
    self->announced = 0;
    self->populated = 0; /* its pages are the parent's until written: copy them now */
    self->os_tid = (uint32_t)syscall(SYS_gettid);
  }
  atomic_store(&threads, self);
  /* this thread is the child's main thread; the parent's /proc entry is not its */
  atomic_store(&leader_left, 0);
  if (stat_fd >= 0)
    close(stat_fd);
  stat_fd = -1;
  writer_running = 0;
  atomic_store(&writer_tid, 0); /* the parent's writer, not ours */
  atomic_store(&writer_idle, 0);
  /* this thread took both in atfork_prepare, and is the one that goes on */
  pthread_mutex_unlock(&writer_work);
  pthread_mutex_unlock(&start_lock);
  int st = atomic_load(&run_state);
  atomic_store(&run_state, st == RUN_OFF && rt_cfg.apis ? RUN_OFF : RUN_IDLE);
  rt_cfg.start_mono_ns = shim_now_ns();
  rt_cfg.pid = (uint32_t)getpid();
}

static void atfork_prepare(void) {
  /* first, holding nothing an unwinding thread could wait for */
  atomic_store(&forking, 1);
  while (atomic_load(&unwinders))
    sched_yield();
  pthread_mutex_lock(&start_lock);
  /* A writer still being born may be inside the C library or a sanitizer
   * runtime, holding a lock of theirs (ASan's allocator takes one in its
   * thread start); a child forked then would block on it forever. Its
   * birth is short and cannot wait for us. */
  while (writer_running && !atomic_load(&writer_entered))
    sched_yield();
  writer_boost(); /* it may hold writer_work */
  pthread_mutex_lock(&writer_work); /* the writer finishes its round first */
  rt_type_fork_lock();
  shim_alloc_fork_prepare();        /* last: the writer frees only inside its round */
}

static void atfork_parent(void) {
  shim_alloc_fork_release();
  rt_type_fork_unlock();
  pthread_mutex_unlock(&writer_work);
  pthread_mutex_unlock(&start_lock);
  atomic_store(&forking, 0);
}

/* The argv the process started with (rt_cmdline): copied by rt_init,
 * which glibc calls with main's arguments, before main can change them. */
static char start_cmd[8192];
static uint32_t start_cmd_len;
static pid_t start_cmd_pid;

static void keep_start_cmd(int argc, char **argv) {
  uint32_t n = 0;
  for (int i = 0; argv && i < argc && argv[i]; i++) {
    size_t l = strlen(argv[i]) + 1;
    if (n + l >= sizeof start_cmd)
      break;
    memcpy(start_cmd + n, argv[i], l);
    n += (uint32_t)l;
  }
  start_cmd_len = n;
  start_cmd_pid = getpid();
}

uint32_t rt_cmdline(char *buf, size_t cap) {
  if (cap == 0)
    return 0;
  uint32_t n = 0;
  if (start_cmd_len && getpid() == start_cmd_pid) {
    n = start_cmd_len < cap - 1 ? start_cmd_len : (uint32_t)(cap - 1);
    memcpy(buf, start_cmd, n);
  } else {
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t r = read(fd, buf, cap - 1);
      n = r > 0 ? (uint32_t)r : 0;
      close(fd);
    }
    /* no /proc (a child forked in a chroot): the argv its parent started
     * with, which a fork keeps */
    if (n == 0 && start_cmd_len) {
      n = start_cmd_len < cap - 1 ? start_cmd_len : (uint32_t)(cap - 1);
      memcpy(buf, start_cmd, n);
    }
  }
  buf[n] = 0;
  return n;
}

/* ---- chroot ---------------------------------------------------------------
 * A server that confines itself before its first call (named -t, unbound,
 * nsd with chroot set) would make its calls, and fork its workers, where
 * the trace directory, /proc and the libraries standin loads late cannot
 * be reached: recording said "cannot create trace file" and left it out.
 * Before the root changes, the process keeps the directory open (files are
 * then created relative to it, by this process and the children it
 * forks), reads its executable's name, and loads libunwind and libdeflate.
 * A program exec'ed inside the chroot cannot load the shim at all. */
static _Atomic int dir_fd = -1;

int rt_dir_fd(void) {
  return atomic_load_explicit(&dir_fd, memory_order_acquire);
}

void rt_names_init(rt_names *n, uint64_t start_ticks) {
  *n = (rt_names){.start = start_ticks};
}

void rt_names_path(const rt_names *n, char *buf, size_t cap, const char *dir, uint32_t pid,
                   const char *ext) {
  if (n->family && n->seq)
    snprintf(buf, cap, "%s/%u-%llu.%u.%s", dir, pid, (unsigned long long)n->family, n->seq, ext);
  else if (n->family)
    snprintf(buf, cap, "%s/%u-%llu.%s", dir, pid, (unsigned long long)n->family, ext);
  else if (n->seq)
    snprintf(buf, cap, "%s/%u.%u.%s", dir, pid, n->seq, ext);
  else
    snprintf(buf, cap, "%s/%u.%s", dir, pid, ext);
}

int rt_names_next(rt_names *n, int mine) {
  if (!n->family && n->seq == 0 && !mine && n->start) {
    n->family = n->start; /* PID.EXT is another process's: our own names */
    return 0;
  }
  n->earlier += mine != 0;
  return ++n->seq < 1000 ? 0 : -1;
}

int rt_dir_at(const char *path, const char **rel) {
  int fd = rt_dir_fd();
  size_t n = strlen(rt_cfg.dir);
  *rel = path;
  if (fd < 0 || strncmp(path, rt_cfg.dir, n) != 0 || path[n] != '/')
    return AT_FDCWD;
  *rel = path + n + 1;
  return fd;
}

void rt_release_dir_fd(int fd) {
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved >= 0)
    moved = st_fd_to_high(moved);
  /* -1: files are created by path again, as before the chroot */
  atomic_compare_exchange_strong(&dir_fd, &fd, moved);
}

void rt_before_chroot(void) {
  if (rt_sealed || rt_cfg.apis == 0 || (uint32_t)getpid() != rt_cfg.pid)
    return; /* recording is off, or a vfork child in its parent's memory */
  if (rt_dir_fd() < 0) {
    int fd = open(rt_cfg.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
      atomic_store_explicit(&dir_fd, st_fd_to_high(fd), memory_order_release);
  }
  wr_read_identity();
  if (rt_cfg.timing)
    return; /* a timing run writes its file at exit, and nothing else */
  rt_deflate_ready();
#ifndef __SANITIZE_THREAD__
  if (rt_cfg.stack_depth > 0) {
    unwind_enter();
    rt_unw_ready();
    unwind_leave();
  }
#else
  void *ip[2];
  if (rt_cfg.stack_depth > 0)
    backtrace(ip, 2); /* glibc loads libgcc_s at its first */
#endif
}

_Atomic uint64_t rt_calls_left;

static void count_left(void) {
  atomic_fetch_add_explicit(&rt_calls_left, 1, memory_order_relaxed);
}

__attribute__((constructor)) static void rt_init(int argc, char **argv, char **envp) {
  (void)envp;
  shim_on_left = count_left;
  keep_start_cmd(argc, argv);
  rt_my_index = 0; /* the thread running constructors is the main thread */
  rt_my_parent = 0;
  /* the main thread's stack, for rt_stack: from where the kernel started
   * it down as far as it may grow (at most 8 MiB; deeper calls unwind) */
  extern void *__libc_stack_end;
  struct rlimit rl;
  uint64_t grow = 8u << 20;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < grow)
    grow = rl.rlim_cur;
  uintptr_t top = (uintptr_t)__libc_stack_end;
  rt_stack_bounds(top - grow + STACK_MARGIN, top);
  /* the trace writer's buffers stay off the program's heap (shim_alloc.h) */
  st_set_allocator(&(st_allocator){shim_alloc, shim_realloc, shim_free});
  /* and its file out of the way of the program's descriptors (fdguard.c) */
  st_set_high_fd(1);
  load_config();
  rt_cfg.pid = (uint32_t)getpid();
  rt_cfg.start_mono_ns = shim_now_ns();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rt_cfg.start_real_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  pthread_key_create(&thread_key, thread_exit);
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  /* libunwind and libdeflate load when first needed (lazylibs.c) */
}

__attribute__((destructor)) static void rt_fini(void) {
  if (rt_sealed)
    return;
  shim_exiting = 1;
  if (rt_cfg.timing)
    rt_timing_write();
  stop_writer(RUN_OFF);
  shim_exiting = 0;
}

/* rp.c — replay runtime: maps the replay database, serves occurrences,
 * keeps the shared accelerator timelines and the run's statistics. */
#include "rp.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fatal.h"
#include "rp_engines.h"
#include "shim.h"
#include "shim_alloc.h"
#include "trace.h"

static const uint8_t *db; /* the mapping, NULL when off */
static uint64_t db_size;
static const rdb_header *hdr;
static rdb_stats *stats;
static rdb_accel *accels;

/* Counters of one thread, added to the shared ones in batches: shared
 * atomics on every call would bounce cache lines between cores (and the
 * processes of the run) and slow the harness down. Blocks are kept on a
 * list so exit, _exit and exec can flush the other threads' counts too. */
#define FLUSH_EVERY 256

#define BIN_WORDS (2 * RDB_SPIN_BINS / 64) /* every spin's bins, then the stopped ones' */
_Static_assert(RDB_SPIN_BINS % 64 == 0, "spin bins fill whole bitmap words");

typedef struct local {
  uint64_t c[RDB_NCOUNTERS];
  uint64_t bins[BIN_WORDS]; /* bit b: counter RDB_C_SPIN_ERR0 + b was counted */
  uint64_t a[RDB_MAX_ACCEL][RDB_A_N];
  uint32_t pending; /* calls counted since the last flush */
  uint32_t dirty;
  /* The last spin, counted by the next call (count_spin): after its
   * deadline a call only stores these and returns. */
  uint64_t spin_from, spin_end, spin_deadline;
  uint32_t spun;
  uint32_t spin_stopped;      /* the thread was not running when that deadline passed */
  volatile uint32_t flushing; /* flush() is adding this block's counts */
  /* Harness overrun this thread has not paid back yet, starting from what
   * its creator owed when it was created: the run is late by that much on
   * this thread's path (see rp_finish). */
  uint64_t debt;
  /* Of that debt, what is a copy of its creator's (a thread's creator, a
   * forked child's parent): the creator pays it back and counts it, this
   * thread's paying it is not counted again (photo-service's two workers
   * each paid the main thread's debt: 40.49 ms paid back of 40.05 ms
   * overrun). Paid first. */
  uint64_t inherited;
  struct local *next;
} local;

static _Atomic(local *) locals;
static pthread_key_t local_key;
static SHIM_TLS local *me;
static SHIM_TLS uint64_t inherited_debt; /* set by tramp_main */

static void flush_before_death(int sig);

static local *local_self(void) {
  if (SHIM_LIKELY(me != NULL))
    return me;
  local *l = shim_zalloc(sizeof *l); /* not from the program's heap */
  if (!l)
    return NULL;
  /* at the process's first counted call, as record does at its first
   * recorded one: a runtime that sets its handlers at start where none is
   * set still does */
  static atomic_int fatal_installed;
  if (!atomic_exchange(&fatal_installed, 1))
    shim_fatal_install(flush_before_death);
  l->debt = l->inherited = inherited_debt;
  local *head = atomic_load(&locals);
  do
    l->next = head;
  while (!atomic_compare_exchange_weak(&locals, &head, l));
  pthread_setspecific(local_key, l);
  me = l;
  return l;
}

/* stats->c[i] = max(itself, v) */
static void publish_max(int i, uint64_t v) {
  _Atomic uint64_t *m = &stats->c[i];
  uint64_t cur = atomic_load_explicit(m, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak_explicit(m, &cur, v, memory_order_relaxed,
                                                           memory_order_relaxed))
    ;
}

static void count_spin(local *l);

/* l's count i into the shared counter. */
static inline void publish_counter(local *l, int i) {
  if (l->c[i]) {
    atomic_fetch_add_explicit(&stats->c[i], l->c[i], memory_order_relaxed);
    l->c[i] = 0;
  }
}

/* l's counts into the shared ones; and, unless the thread goes on (a
 * batch, call_done), what it owes: a debt is "unpaid" only when the
 * thread ends with it. Taken at a batch, it was often an overrun or stop
 * that the very next call paid back (DEBT_MAX then held more than was
 * ever left unpaid). */
static void flush_counts(local *l, int going_on) {
  count_spin(l);
  if (!going_on) /* a maximum: publishing it twice is harmless */
    publish_max(RDB_C_DEBT_MAX, l->debt);
  if (!l->dirty)
    return;
  l->flushing = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  /* every counter but the two histograms of spin errors (1,024 bins), and of
   * those only the ones counted */
  for (int i = 0; i < RDB_C_SPIN_ERR0; i++)
    publish_counter(l, i);
  for (int w = 0; w < BIN_WORDS; w++)
    for (uint64_t m = l->bins[w]; m; m &= m - 1)
      publish_counter(l, RDB_C_SPIN_ERR0 + w * 64 + __builtin_ctzll(m));
  memset(l->bins, 0, sizeof l->bins);
  for (int i = RDB_C_API0; i < RDB_NCOUNTERS; i++)
    publish_counter(l, i);
  for (uint32_t k = 0; k < hdr->naccel; k++)
    for (int i = 0; i < RDB_A_N; i++)
      if (l->a[k][i]) {
        atomic_fetch_add_explicit(&accels[k].st.c[i], l->a[k][i], memory_order_relaxed);
        l->a[k][i] = 0;
      }
  l->pending = 0;
  l->dirty = 0;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  l->flushing = 0;
}

static void flush(local *l) {
  flush_counts(l, 0);
}

static void flush_all(void) {
  if (!db)
    return;
  for (local *l = atomic_load(&locals); l; l = l->next)
    flush(l);
}

/* The program is dying of a signal: no exit handler will run, so add every
 * thread's counts now (lock-free, allocation-free: safe in the handler).
 * A block whose own thread was interrupted while adding it is left alone,
 * so that no count is added twice; another thread's block may lose the one
 * call it was counting. */
static void flush_before_death(int sig) {
  (void)sig;
  if (!db)
    return;
  for (local *l = atomic_load(&locals); l; l = l->next)
    if (!l->flushing)
      flush(l);
}

static inline void local_add(local *l, int i, uint64_t v) {
  l->c[i] += v;
  l->dirty = 1;
}

/* Count one event in this thread's block (falls back to the shared counter
 * if the block cannot be allocated). */
static inline void count(int i, uint64_t v) {
  local *l = local_self();
  if (SHIM_UNLIKELY(!l)) {
    atomic_fetch_add_explicit(&stats->c[i], v, memory_order_relaxed);
    return;
  }
  local_add(l, i, v);
}

/* l's last spin (rp_finish) into l's counters: by its next call, or a
 * flush. */
static void count_spin(local *l) {
  if (!l->spun)
    return;
  l->spun = 0;
  uint64_t late = l->spin_end - l->spin_deadline, bin = late / RDB_SPIN_BIN_NS;
  bin = bin < RDB_SPIN_BINS ? bin : RDB_SPIN_BINS - 1;
  local_add(l, RDB_C_SPIN_NS, l->spin_end - l->spin_from);
  local_add(l, RDB_C_SPIN_ERR0 + (int)bin, 1);
  l->bins[bin / 64] |= 1ull << (bin % 64);
  if (l->spin_stopped) {
    bin += RDB_SPIN_BINS;
    local_add(l, RDB_C_SPIN_ERR0 + (int)bin, 1);
    l->bins[bin / 64] |= 1ull << (bin % 64);
    local_add(l, RDB_C_SPIN_STOPPED_NS, late);
  }
}

/* End of one call's accounting: flush every FLUSH_EVERY calls. */
static inline void call_done(void) {
  local *l = me;
  if (l && ++l->pending >= FLUSH_EVERY)
    flush_counts(l, 1);
}

/* New threads start owing what their creator owes: work the creator did
 * late (a client encoding requests before it starts its workers, say)
 * delays everything the workers do after. */
struct tramp {
  void *(*fn)(void *);
  void *arg;
  uint64_t debt;
};

static void *tramp_main(void *p) {
  struct tramp t = *(struct tramp *)p;
  shim_free(p);
  inherited_debt = t.debt;
  return t.fn(t.arg);
}

SHIM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                               void *arg) {
  SHIM_REAL(real, pthread_create);
  uint64_t debt = me ? me->debt : inherited_debt;
  struct tramp *t = debt && db ? shim_alloc(sizeof *t) : NULL;
  if (!t)
    return real(th, attr, fn, arg);
  *t = (struct tramp){fn, arg, debt};
  int rc = real(th, attr, tramp_main, t);
  if (rc != 0)
    shim_free(t);
  return rc;
}

static void thread_gone(void *p) {
  if (db)
    flush(p);
}

static void pass_on(int on);

void shim_on_exec(void) {
  flush_all();
  pass_on(1);
}

/* Threads inside a posix_spawn now: the descriptors stay inheritable
 * until the last one is done (a flag is the process's, not a thread's). */
static _Atomic int spawning;

void shim_on_exec_failed(void) {
  if (atomic_load(&spawning) == 0)
    pass_on(0);
}

void shim_on_spawn(int starting) {
  if (starting ? atomic_fetch_add(&spawning, 1) == 0 : atomic_fetch_sub(&spawning, 1) == 1)
    pass_on(starting);
}

void shim_on_exit(void) {
  flush_all();
}

/* A process that has not mapped the database yet (no hooked library was
 * loaded at its start) maps it before its root changes: it is reached
 * through /proc, which a chroot seldom has. */
void shim_on_chroot(void) {
  (void)rp_on();
}

/* A seccomp filter may refuse the system calls of a late setup (the
 * database is opened through /proc) or of the calling thread's first call
 * (its counters): both are done first. */
void shim_on_seccomp(void) {
  if (rp_on())
    (void)local_self();
  shim_fatal_uninstall(); /* its sigaction and tgkill could be refused */
}

__attribute__((destructor)) static void rp_fini(void) {
  shim_exiting = 1;
  flush_all();
  shim_exiting = 0;
}

#define ADD(i, v) count(i, v)

static uint64_t tsc_base, mono_base, tsc_mult;

/* Harness time of a call that no [t0, now] window sees: the parts of its
 * first and last clock reads outside the window, one read in all (~10 ns
 * here). Calibrated at start, as record calibrates the read it takes off
 * latencies, and added to every served or looked-up call's harness time:
 * otherwise each such call ends that much later than its model says,
 * unseen by overruns and catch-up. The hook's own entry and exit (~1-2 ns
 * beyond a direct call, record's pass-through calibration) is not
 * included. */
static uint64_t outside_ns;

/* Past its deadline a spinning call still takes the clock read that saw it
 * pass and the way out of the loop (9-12 ns here): every replayed call that
 * has slack would end that much later than its model says. Calibrated at
 * start as the excess of a loop of short waits over what it waits, and
 * taken off each deadline (never before the call's own start). */
static uint64_t tail_ns;
#define TAIL_WAIT_NS 200

/* Replay clock ns of a TSC reading. */
static inline uint64_t tsc_ns(uint64_t tick) {
  unsigned __int128 d = (unsigned __int128)(tick - tsc_base) * tsc_mult;
  return mono_base + (uint64_t)(d >> 32);
}

uint64_t rp_now(void) {
  if (SHIM_LIKELY(tsc_mult != 0))
    return tsc_ns(__builtin_ia32_rdtsc());
  return shim_now_ns();
}

/* The clock read that ends a call's window: once the harness's work is
 * done. rdtsc waits for nothing before it, so a plain read ran ahead of
 * loads still in flight (a response copied from database lines nothing
 * had touched, a tree's pieces built from them) and the window missed
 * them. pbtest basic's calls under constant:ns=0, by the program's own
 * clock less its harness: 49 ns a call on average with a plain read
 * (pack 60, unpack 85), 23 with this one (~9 of either the program's
 * clock itself; 3 runs each). An overrun that short was neither counted
 * nor paid back. lfence waits for every earlier instruction to
 * complete. */
static inline uint64_t now_done(void) {
  if (SHIM_LIKELY(tsc_mult != 0)) {
    __builtin_ia32_lfence();
    return tsc_ns(__builtin_ia32_rdtsc());
  }
  return shim_now_ns();
}

/* Spin until rp_now() >= deadline. With the TSC the loop compares raw
 * ticks (no conversion per turn) and stops pausing in the last 256 ns:
 * PAUSE takes ~30 ns on current cores, and a turn that long would make the
 * loop see the deadline that much late on average. */
#define SPIN_QUIET_NS 256

static uint64_t tsc_inv;    /* ticks per ns << 32, rounded up (rp_init) */
static uint64_t spin_quiet; /* SPIN_QUIET_NS in ticks */

/* Returns the time at which the loop saw the deadline pass, and in *gap
 * (when not NULL) how long before that the loop had read the clock last
 * (0: its first read saw it). A long gap there means the thread was not
 * running when its deadline passed (rp_finish). */
static uint64_t spin_until(uint64_t deadline, uint64_t *gap) {
  uint64_t end, g = 0;
  if (tsc_mult == 0) {
    /* clock_gettime: a clock that stands still (a faked one, frozen) would
     * hold the program here for ever; given up after ~2^22 turns (~0.1 s)
     * without a tick */
    uint64_t now, last = 0;
    unsigned still = 0;
    while ((now = shim_now_ns()) < deadline && still < (1u << 22)) {
      still = now == last ? still + 1 : 0;
      last = now;
      __builtin_ia32_pause();
    }
    end = now;
    g = last && now > last ? now - last : 0;
  } else if (deadline <= mono_base) {
    end = rp_now();
  } else {
    /* a tick at which rp_now() reads >= deadline, at most ~1 ns after the
     * first such tick (tsc_inv is rounded up, and one tick added) */
    uint64_t target =
        tsc_base + (uint64_t)(((unsigned __int128)(deadline - mono_base) * tsc_inv) >> 32) + 1;
    uint64_t tick = __builtin_ia32_rdtsc(), prev = tick;
    while (tick + spin_quiet < target) {
      __builtin_ia32_pause();
      prev = tick;
      tick = __builtin_ia32_rdtsc();
    }
    while (tick < target) {
      prev = tick;
      tick = __builtin_ia32_rdtsc();
    }
    end = tsc_ns(tick);
    g = end - tsc_ns(prev);
  }
  if (gap)
    *gap = g;
  return end;
}

/* Per-entry memos of materialised images, process-local (they hold this
 * process's descriptor addresses), used only when the images are mapped
 * read-only. Allocated on first use; untouched pages cost nothing. */
static int ro_sealed;
static _Atomic(pbw_image_memo *) memos;

pbw_image_memo *rp_memo(const rdb_entry *e) {
  /* a request recorded once is most likely replayed once: a memo would
   * only cost it a page of zeros now and then */
  if (!ro_sealed || e->nsamples < 2)
    return NULL;
  pbw_image_memo *t = atomic_load_explicit(&memos, memory_order_acquire);
  if (SHIM_UNLIKELY(t == NULL)) {
    size_t bytes = (size_t)hdr->nentries * sizeof *t;
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      return NULL;
    pbw_image_memo *expect = NULL;
    if (!atomic_compare_exchange_strong(&memos, &expect, p)) {
      munmap(p, bytes ? bytes : 1);
      t = expect;
    } else {
      t = p;
    }
  }
  const rdb_entry *ents = (const rdb_entry *)(db + hdr->entries_off);
  size_t i = (size_t)(e - ents);
  return i < hdr->nentries ? &t[i] : NULL;
}

int rp_unpack_pieces(void) {
  return hdr != NULL && hdr->unpack_pieces;
}

unsigned rp_jpeg_unserved(void) {
  return hdr != NULL ? hdr->jpeg_unserved : 0;
}

static atomic_int setup_deferred; /* rp_init: mapped at the first hooked call */
static atomic_int ready;          /* rp_setup has mapped and checked everything */
static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static void rp_setup(void);

/* A process that had none of the hooked libraries loaded at start maps the
 * database when one of its calls first reaches a hook, before that call's
 * clock starts (so it counts as setup, as at start). Other threads may be
 * calling then: they wait in pthread_once, and no thread goes on before
 * `ready` says setup is complete (db is set part way through it). */
static void setup_late(void) {
  rp_setup();
  atomic_store_explicit(&setup_deferred, 0, memory_order_release);
}

int rp_on(void) {
  if (SHIM_LIKELY(atomic_load_explicit(&ready, memory_order_acquire)))
    return 1;
  if (!atomic_load_explicit(&setup_deferred, memory_order_acquire))
    return 0;
  pthread_once(&setup_once, setup_late);
  return atomic_load_explicit(&ready, memory_order_acquire);
}

const void *rp_ptr(uint64_t off, uint64_t len) {
  if (off > db_size || len > db_size - off)
    return NULL;
  return db + off;
}

/* Check that the tables the hot path indexes lie inside the mapping. */
static int validate(void) {
  if (db_size < sizeof(rdb_header) || hdr->magic != RDB_MAGIC || hdr->version != RDB_VERSION ||
      hdr->size != db_size)
    return -1;
  if (!rp_ptr(hdr->entries_off, hdr->nentries * sizeof(rdb_entry)) ||
      hdr->nentries > db_size / sizeof(rdb_entry))
    return -1;
  if (!hdr->nslots || (hdr->nslots & (hdr->nslots - 1)) || hdr->nslots > db_size / 4 ||
      !rp_ptr(hdr->slots_off, hdr->nslots * 4))
    return -1;
  if (hdr->naccel > RDB_MAX_ACCEL || !rp_ptr(hdr->accel_off, hdr->naccel * sizeof(rdb_accel)))
    return -1;
  if (!rp_ptr(hdr->stats_off, sizeof(rdb_stats)))
    return -1;
  if (!rp_ptr(hdr->next_off, hdr->nentries * sizeof(uint64_t)) ||
      !rp_ptr(hdr->once_off, (hdr->nentries + 63) / 64 * sizeof(uint64_t)))
    return -1;
  if (hdr->nclasses > db_size / sizeof(rdb_class) ||
      !rp_ptr(hdr->classes_off, hdr->nclasses * sizeof(rdb_class)))
    return -1;
  if (hdr->nnear_groups > db_size / sizeof(rdb_near_group) ||
      !rp_ptr(hdr->near_groups_off, hdr->nnear_groups * sizeof(rdb_near_group)) ||
      hdr->nnear > db_size / sizeof(rdb_near) ||
      !rp_ptr(hdr->near_off, hdr->nnear * sizeof(rdb_near)))
    return -1;
  if (hdr->nstuck > db_size / sizeof(rdb_stuck) ||
      !rp_ptr(hdr->stuck_off, hdr->nstuck * sizeof(rdb_stuck)) ||
      (hdr->nstuck && (hdr->stuck_off < hdr->ro_off || (hdr->stuck_off & 7))))
    return -1;
  if (hdr->ndrops > db_size / sizeof(rdb_drop) ||
      !rp_ptr(hdr->drops_off, hdr->ndrops * sizeof(rdb_drop)) ||
      (hdr->ndrops && (hdr->drops_off < hdr->ro_off || (hdr->drops_off & 7))))
    return -1;
  if (hdr->nprefixes > db_size / sizeof(rdb_prefix) ||
      !rp_ptr(hdr->prefixes_off, hdr->nprefixes * sizeof(rdb_prefix)) ||
      (hdr->nprefixes && (hdr->prefixes_off < hdr->ro_off || (hdr->prefixes_off & 7))))
    return -1;
  if (hdr->sources_off &&
      (hdr->nsamples > db_size / sizeof(rdb_sample) ||
       !rp_ptr(hdr->samples_off, hdr->nsamples * sizeof(rdb_sample)) ||
       !rp_ptr(hdr->sources_off, hdr->nsamples * sizeof(uint32_t)) ||
       hdr->sources_off < hdr->ro_off || (hdr->sources_off & 3) || (hdr->samples_off & 7)))
    return -1;
  if (hdr->nschemas > db_size / sizeof(rdb_schema) ||
      !rp_ptr(hdr->schemas_off, hdr->nschemas * sizeof(rdb_schema)) ||
      (hdr->nschemas && hdr->schemas_off < hdr->ro_off))
    return -1;
  if ((hdr->entries_off | hdr->slots_off | hdr->accel_off | hdr->stats_off | hdr->next_off |
       hdr->once_off | hdr->classes_off | hdr->near_groups_off | hdr->near_off | hdr->schemas_off) &
      7)
    return -1;
  /* the writable part (header, stats, timelines, occurrence counters) lies
   * before it, the tables the hot path reads after it */
  if ((hdr->ro_off & 4095) || hdr->ro_off > db_size ||
      hdr->next_off + hdr->nentries * sizeof(uint64_t) > hdr->ro_off ||
      hdr->once_off + (hdr->nentries + 63) / 64 * sizeof(uint64_t) > hdr->ro_off ||
      hdr->stats_off + sizeof(rdb_stats) > hdr->ro_off ||
      hdr->accel_off + hdr->naccel * sizeof(rdb_accel) > hdr->ro_off ||
      hdr->slots_off < hdr->ro_off || hdr->entries_off < hdr->ro_off ||
      (hdr->nclasses && hdr->classes_off < hdr->ro_off) ||
      (hdr->nnear_groups && hdr->near_groups_off < hdr->ro_off) ||
      (hdr->nnear && hdr->near_off < hdr->ro_off))
    return -1;
  return 0;
}

/* A forked child keeps the shared mapping: counters, timelines and
 * occurrences stay shared with the whole run. The blocks it inherited hold
 * its parent's unflushed counts, which the parent will flush itself. */
static void count_child(void) {
  for (local *l = atomic_load(&locals); l; l = l->next) {
    memset(l->c, 0, sizeof l->c);
    memset(l->bins, 0, sizeof l->bins);
    memset(l->a, 0, sizeof l->a);
    l->pending = l->dirty = l->spun = 0;
    l->inherited = l->debt; /* the parent's, paid and counted by the parent */
  }
  atomic_fetch_add_explicit(&stats->c[RDB_C_PROCESSES], 1, memory_order_relaxed);
}

/* A process that maps the database late (rp_on) may have given up its
 * privileges by then: php-fpm's workers, forked by a master running as
 * root, make their first call as nobody, and the launcher's /proc/PID/fd/N
 * is no longer theirs to open. A process running as root opens both files
 * at start instead, and keeps them at high descriptors (close-on-exec,
 * inherited by its children) until it maps them. A descriptor the program
 * closed, or reused for a file of its own, is not used: the path is opened
 * again then. */
typedef struct {
  int fd;
  dev_t dev;
  ino_t ino;
} kept_file;
static kept_file kept_db = {-1, 0, 0}, kept_rw = {-1, 0, 0};

static void keep_open(kept_file *k, const char *path) {
  struct stat st;
  int fd = path[0] == '/' ? open(path, O_RDWR | O_CLOEXEC) : -1;
  if (fd < 0)
    return;
  fd = st_fd_to_high(fd);
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  *k = (kept_file){fd, st.st_dev, st.st_ino};
}

/* The same files handed down as descriptors (STANDIN_REPLAY_DB_FD and
 * STANDIN_REPLAY_DB_RW_FD), for a process that cannot reach the
 * launcher's /proc entry: one in a PID namespace with a /proc of its own
 * (unshare --mount-proc, bwrap) found no database there and ran without
 * replay. Kept close-on-exec, and made inheritable only for the exec
 * calls and posix_spawns the shim wraps (shim_on_exec, shim_on_spawn;
 * glibc's system() and popen() spawn through an internal entry, unseen). */
static kept_file passed_db = {-1, 0, 0}, passed_rw = {-1, 0, 0};

static int still_holds(const kept_file *k) {
  struct stat st;
  return k->fd >= 0 && fstat(k->fd, &st) == 0 && st.st_dev == k->dev && st.st_ino == k->ino;
}

/* NAME=N:DEV:INO:PATH, taken when PATH is the one this process was given
 * (a variable changed since stands for another file). */
static void take_passed(kept_file *k, const char *name, const char *path) {
  const char *v = getenv(name);
  unsigned long long dev, ino;
  int fd, at = -1;
  if (!v || sscanf(v, "%d:%llu:%llu:%n", &fd, &dev, &ino, &at) != 3 || at < 0 || fd < 0 ||
      strcmp(v + at, path) != 0)
    return;
  kept_file f = {fd, (dev_t)dev, (ino_t)ino};
  if (!still_holds(&f)) /* closed, or another file there: not ours */
    return;
  fcntl(fd, F_SETFD, FD_CLOEXEC);
  *k = f;
}

/* Before an exec (on = 1) the passed descriptors go on to the new image;
 * after one that failed (on = 0) they are close-on-exec again. */
static void pass_on(int on) {
  kept_file *ks[] = {&passed_db, &passed_rw};
  for (int i = 0; i < 2; i++)
    if (still_holds(ks[i]))
      fcntl(ks[i]->fd, F_SETFD, on ? 0 : FD_CLOEXEC);
}

/* The kept descriptor if it still holds the file opened at start (it is
 * the caller's to close), else path opened now, else a copy of the one
 * handed down. */
static int open_kept(kept_file *k, const char *path, const kept_file *passed) {
  if (still_holds(k)) {
    int fd = k->fd;
    k->fd = -1;
    return fd;
  }
  k->fd = -1;
  int fd = path[0] == '/' ? open(path, O_RDWR | O_CLOEXEC) : -1;
  if (fd < 0 && still_holds(passed))
    fd = fcntl(passed->fd, F_DUPFD_CLOEXEC, 0);
  return fd;
}

/* Map the shared memory at `path` over the database's writable part
 * [0, ro_off), and check the header it then holds. */
static int map_rw(const char *path) {
  uint64_t ro = hdr->ro_off;
  int fd = open_kept(&kept_rw, path, &passed_rw);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != ro ||
      mmap((void *)db, (size_t)ro, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
          MAP_FAILED) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  close(fd);
  return hdr->ro_off == ro && validate() == 0 ? 0 : -1;
}

/* The environment as it was at start: a program may change its own before
 * its first call (rp_setup then runs late). */
static char db_path[PATH_MAX], rw_path[PATH_MAX];

/* A program started with an environment that lacks the replay shim in
 * LD_PRELOAD, or STANDIN_REPLAY_DB (env -i, a program that clears
 * LD_PRELOAD or sets its own), runs its calls for real, and so do the
 * programs it starts, none of them counted: said once per process. */
void shim_on_exec_env(const char *prog, char *const envp[]) {
  static _Atomic int said;
  if (!db_path[0] || !prog || shim_env_follows(envp, "libstandin-replay.so", "STANDIN_REPLAY_DB") ||
      atomic_exchange(&said, 1))
    return;
  int saved = errno;
  shim_say("pid %d starts %s with an environment without the replay shim in LD_PRELOAD or "
           "without STANDIN_REPLAY_DB (env -i, or a program that clears or sets LD_PRELOAD): "
           "it and the programs it starts are not replayed, and their calls are not in the "
           "counts",
           (int)getpid(), prog);
  errno = saved;
}

/* Whether a library whose calls the shim hooks is loaded (by file name:
 * libprotobuf-c.so.1, libjpeg.so.62, libturbojpeg.so.0 and their kin). */
static int hooked_lib(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
  return !strncmp(base, "libprotobuf-c.so", 16) || !strncmp(base, "libjpeg.so", 10) ||
         !strncmp(base, "libturbojpeg.so", 15);
}

/* Every process of a replay loads the shim: the shell running a script,
 * and the tools it runs beside the program, too. Those that have no hooked
 * library at start do not map the database unless they load one and call
 * it (rp_on): mapping it and calibrating cost ~0.2 ms a process on the
 * test VM, most of it system calls. */
static void count_left(void) {
  ADD(RDB_C_LEFT, 1);
}

__attribute__((constructor)) static void rp_init(void) {
  shim_on_left = count_left;
  const char *path = getenv("STANDIN_REPLAY_DB");
  if (!path || !*path)
    return;
  /* standin replay passes /proc/PID/fd/N: an absolute path to a regular
   * file (a temporary file or a memfd); anything else did not come from it */
  if (path[0] != '/' || strlen(path) >= sizeof db_path) {
    shim_say("STANDIN_REPLAY_DB=%s is not an absolute path; this process runs without replay",
             path);
    return;
  }
  const char *rw = getenv("STANDIN_REPLAY_DB_RW");
  if (rw && strlen(rw) >= sizeof rw_path) {
    shim_say("cannot map the replay counters %s; this process runs without replay", rw);
    return;
  }
  memcpy(db_path, path, strlen(path) + 1);
  if (rw)
    memcpy(rw_path, rw, strlen(rw) + 1);
  take_passed(&passed_db, "STANDIN_REPLAY_DB_FD", db_path);
  if (*rw_path)
    take_passed(&passed_rw, "STANDIN_REPLAY_DB_RW_FD", rw_path);
  if (!dl_iterate_phdr(hooked_lib, NULL)) {
    if (geteuid() == 0) { /* it may drop its privileges before its first call */
      keep_open(&kept_db, db_path);
      if (*rw_path)
        keep_open(&kept_rw, rw_path);
    }
    atomic_store_explicit(&setup_deferred, 1, memory_order_release);
    return;
  }
  pthread_once(&setup_once, rp_setup);
}

/* fd's size bytes mapped shared at an address aligned to 2 MiB, so that
 * the file's 2 MiB folios (cli/rdb_store.c PUBLISH_CHUNK) map whole; any
 * address when no room for the alignment can be had. */
static void *map_aligned(int fd, size_t size) {
  const size_t huge = 2u << 20;
  void *p = MAP_FAILED;
  if (size <= SIZE_MAX - huge) {
    uint8_t *r = mmap(NULL, size + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r != MAP_FAILED) {
      uint8_t *a = (uint8_t *)(((uintptr_t)r + huge - 1) & ~(uintptr_t)(huge - 1));
      p = mmap(a, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
      if (p == MAP_FAILED) {
        munmap(r, size + huge);
      } else {
        if (a > r)
          munmap(r, (size_t)(a - r));
        /* the reservation's pages past the file's last one (the
         * mapping's end rounds up to a page; unmapping from an address
         * inside that page failed with EINVAL and left them reserved) */
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t mapped = (size + page - 1) & ~(page - 1);
        size_t tail = (size_t)(r + huge - a);
        if (tail)
          munmap(a + mapped, tail);
      }
    }
  }
  if (p == MAP_FAILED)
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p;
}

static void rp_setup(void) {
  const char *path = db_path;
  uint64_t setup_t0 = shim_now_ns();
  int fd = open_kept(&kept_db, path, &passed_db);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    shim_say("cannot open the replay database %s; this process runs without replay", path);
    if (fd >= 0)
      close(fd);
    return;
  }
  /* Not populated: page tables for all of it would cost at start what the
   * pages a run never touches cost. The read-only part faults in as it is
   * read, a large folio (cli/replaydb.c publish) or 64 KiB of a memfd at a
   * time, mostly front to back as entries are laid out in recorded order.
   * A fault inside a call's window is harness time, which later calls'
   * slack pays back (catch-up) where there is any. */
  void *p = map_aligned(fd, (size_t)st.st_size);
  close(fd);
  if (p == MAP_FAILED) {
    shim_say("cannot map the replay database %s; this process runs without replay", path);
    return;
  }
  db_size = (uint64_t)st.st_size;
  hdr = p;
  db = p;
  if (validate() != 0) {
    shim_say("the replay database %s is damaged; this process runs without replay", path);
    munmap(p, db_size);
    db = NULL;
    return;
  }
  /* The writable part has shared memory of its own, laid over the file's
   * copy (cli/replaydb.c publish_rw): the counters every process of the
   * run shares are there. */
  const char *rw = rw_path;
  if (*rw && map_rw(rw) != 0) {
    shim_say("cannot map the replay counters %s; this process runs without replay", rw);
    munmap(p, db_size);
    db = NULL;
    return;
  }
  /* what the shim checks once (response images) must not change after:
   * nothing writes this part, so protect it from stray writes too */
  ro_sealed = hdr->ro_off == db_size ||
              mprotect((void *)(db + hdr->ro_off), db_size - hdr->ro_off, PROT_READ) == 0;
  /* the launcher built every image in this run, and none can change now */
  pbw_image_trust(ro_sealed);
  stats = (rdb_stats *)(db + hdr->stats_off);
  accels = (rdb_accel *)(db + hdr->accel_off);
  tsc_base = hdr->tsc_base;
  mono_base = hdr->mono_base;
  tsc_mult = hdr->tsc_mult;
  /* spin_until converts deadlines to ticks with a multiply, not a 128-bit
   * division per call; a rate below 1 tick per 2^32 ns is no TSC */
  if (tsc_mult > 1) {
    tsc_inv = (uint64_t)((((unsigned __int128)1 << 64) + tsc_mult - 1) / tsc_mult);
    spin_quiet = (uint64_t)(((unsigned __int128)SPIN_QUIET_NS * tsc_inv) >> 32);
  } else {
    tsc_mult = 0;
  }
  uint64_t t = 0;
  outside_ns = SHIM_MIN_PER_ITER(100, t += rp_now());
  (void)t;
  uint64_t w = SHIM_MIN_PER_ITER(16, spin_until(rp_now() - outside_ns + TAIL_WAIT_NS, NULL));
  tail_ns = w > TAIL_WAIT_NS ? w - TAIL_WAIT_NS : 0;
  publish_max(RDB_C_OUTSIDE_NS, outside_ns);
  publish_max(RDB_C_TAIL_NS, tail_ns);
  atomic_fetch_add_explicit(&stats->c[RDB_C_PROCESSES], 1, memory_order_relaxed);
  /* mapping the database and calibrating are the harness's cost, not the
   * program's: counted apart, like overruns */
  atomic_fetch_add_explicit(&stats->c[RDB_C_SETUP_NS], shim_now_ns() - setup_t0,
                            memory_order_relaxed);
  pthread_key_create(&local_key, thread_gone);
  pthread_atfork(NULL, NULL, count_child);
  pthread_atfork(shim_alloc_fork_prepare, shim_alloc_fork_release, shim_alloc_fork_release);
  atomic_store_explicit(&ready, 1, memory_order_release);
}

/* Entries are laid out in the order of their first recorded occurrence
 * (replaydb.c), so the request a thread makes next is most often the entry
 * after the one it matched last. That entry is prefetched when the last
 * one is found, its sample, request and response when the next call starts
 * (rp_prefetch, before the fingerprint walk hides the wait), and it is
 * tried before the hash table. A prediction is only a shortcut to the same
 * entry: it is taken only when its fingerprint is the request's. */
static SHIM_TLS uint64_t next_hint; /* entry index expected next */

/* Better than the next entry: each recorded occurrence knows the entry of
 * the call its thread made next with the same API (rdb_sample.next), so a
 * program that repeats its recorded sequence names its next request before
 * making it. The hook confirms that entry against the request itself (the
 * tree's plain stream, or the saved bytes of an unpack or a JPEG decode),
 * which costs a compare
 * instead of a fingerprint: the same entry the fingerprint would find, or
 * the hook looks it up as usual. A thread whose predictions keep failing
 * (a pool that deals requests out differently) tries one call in eight. */
static SHIM_TLS uint32_t pred[RDB_API_SLOTS]; /* entry index + 1, 0: none */
static SHIM_TLS uint32_t pred_fails, pred_skip;
static SHIM_TLS uint64_t last_used = UINT64_MAX; /* entry the thread served last */

/* Where entry i (e) counts the occurrences served so far, whole run: its
 * counter (rdb_header.next_off), or for an entry recorded once the word
 * holding its bit (once_off), set at its first occurrence. */
static inline _Atomic uint64_t *occurrence_word(const rdb_entry *e, uint64_t i) {
  if (e->nsamples == 1)
    return (_Atomic uint64_t *)(db + hdr->once_off) + i / 64;
  return (_Atomic uint64_t *)(db + hdr->next_off) + i;
}

static inline void prefetch_lines(const void *p, int lines) {
  for (int i = 0; i < lines; i++)
    __builtin_prefetch((const char *)p + 64 * i);
}

/* The lines [p, p + len) spans, at most max of them: no line the hook
 * will not read is brought in (each would push out one of the program's). */
static inline void prefetch_span(const void *p, uint64_t len, uint64_t max) {
  if (len == 0)
    return;
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, z = ((uintptr_t)p + len - 1) & ~(uintptr_t)63;
  uint64_t n = (z - a) / 64 + 1;
  prefetch_lines((const void *)a, (int)(n < max ? n : max));
}

/* Entry i's lines the hook reads (its occurrence counter, sample,
 * response, request and stream), prefetched. */
static void prefetch_entry(uint64_t i) {
  const rdb_entry *e = (const rdb_entry *)(db + hdr->entries_off) + i;
  /* its occurrence counter, which rp_begin's atomic add would otherwise
   * wait for (an entry first served: a line nothing has touched) */
  __builtin_prefetch(occurrence_word(e, i), 1);
  /* prefetches never fault: a wild offset costs nothing but the hint. A
   * request seen for the first time is memory nothing has touched: all of
   * a response up to 2 KiB is fetched while the hook fingerprints (a new
   * 1 KB pack each call: 247 -> 186 ns a call with constant:ns=0, against
   * its first 256 bytes) */
  __builtin_prefetch(db + e->samples_off);
  prefetch_span(db + e->resp_off, e->resp_len, 32);
  if (e->api != ST_API_PB_UNPACK || e->req_len <= RDB_UNPACK_COMPARE_MAX)
    prefetch_span(db + e->req_off, e->req_len, (RDB_UNPACK_COMPARE_MAX + 63) / 64);
  if (e->stream_len && e->stream_len <= RDB_SHORT_STREAM) { /* the guess's compare */
    prefetch_span(db + e->stream_off, e->stream_len, RDB_SHORT_STREAM / 64 + 1);
    if (e->ref_off != e->resp_off) /* a size's: the pack's response */
      prefetch_span(db + e->ref_off, e->ref_len, 32);
  }
}

/* Index + 1 of the entry whose lines the thread's last call prefetched
 * as it ended (prefetch_next), 0: none. */
static SHIM_TLS uint64_t ahead;

void rp_prefetch(int api) {
  if (!db)
    return;
  uint64_t i = pred[(unsigned)api % RDB_API_SLOTS];
  i = i ? i - 1 : next_hint;
  if (i >= hdr->nentries)
    return;
  /* the same request again (its bytes are in the caches), or fetched as
   * the last call ended */
  if (i == last_used || i + 1 == ahead)
    return;
  prefetch_entry(i);
}

/* As a call ends, the lines of the call its sample names next, and the
 * entry line after that one: a prefetch at the next call's start is late
 * for memory nothing has touched, where loads take ~190 ns (an EPYC VM).
 * Entries are laid out in recorded order, so the one after the next is
 * most often the call after that, whose entry line is then in the caches
 * when this runs for it. A new 1 KB pack each call there: harness
 * 658-709 ns a call (median 678) before this and the database's 2 MiB
 * pages (cli/rdb_store.c PUBLISH_CHUNK), 289-637 (548) after, 12 rounds
 * in random order; the two apart could not be told from the VM's noise.
 * It also takes 125 instructions off such a call (callgrind: 2,187 ->
 * 2,062), as the next call's start then prefetches nothing. */
static inline void prefetch_next(unsigned api) {
  uint64_t p = pred[api % RDB_API_SLOTS];
  if (p == 0 || p > hdr->nentries || p - 1 == last_used)
    return;
  if (p < hdr->nentries)
    __builtin_prefetch((const rdb_entry *)(db + hdr->entries_off) + p);
  prefetch_entry(p - 1);
  /* and the bytes after its response, the next entry's response most
   * often (the database lays them out in the entries' order): two calls
   * ahead, ~240 ns before they are read where one call ahead leaves ~120
   * and a load from memory takes ~190 (a new 1 KB pack each call, harness
   * alone, 16 rounds side by side: median 123.8 -> 118.4 ns; a cycle of
   * 100 messages, whose bytes are in the caches, 103.4 and 103.0) */
  const rdb_entry *e = (const rdb_entry *)(db + hdr->entries_off) + (p - 1);
  int lines = (int)((e->resp_len + 63) / 64);
  prefetch_lines(db + e->resp_off + e->resp_len, lines < 32 ? lines : 32);
  ahead = p;
}

/* Entry i (e) served before in this run. */
static inline int served_index(const rdb_entry *e, uint64_t i) {
  uint64_t v = atomic_load_explicit(occurrence_word(e, i), memory_order_relaxed);
  return e->nsamples == 1 ? (int)(v >> (i % 64) & 1) : v != 0;
}

int rp_served(const rdb_entry *e) {
  return served_index(e, (uint64_t)(e - (const rdb_entry *)(db + hdr->entries_off)));
}

const rdb_entry *rp_predicted(int api, int served) {
  uint32_t p = pred[(unsigned)api % RDB_API_SLOTS];
  if (p == 0 || p > hdr->nentries)
    return NULL;
  if (pred_fails >= 4 && (++pred_skip & 7) != 0)
    return NULL;
  const rdb_entry *e = (const rdb_entry *)(db + hdr->entries_off) + (p - 1);
  if (served && !served_index(e, p - 1))
    return NULL;
  return e->api == api ? e : NULL;
}

void rp_predicted_was(const rdb_entry *e, int right) {
  if (!right) {
    pred_fails++;
    ADD(RDB_C_MISPREDICTED, 1);
    return;
  }
  pred_fails = 0;
  next_hint = (uint64_t)(e - (const rdb_entry *)(db + hdr->entries_off)) + 1;
  ADD(RDB_C_PREDICTED, 1);
}

void rp_tree_unchanged(void) {
  ADD(RDB_C_UNCHANGED, 1);
}

static inline const rdb_entry *found(const rdb_entry *ents, uint64_t i) {
  next_hint = i + 1;
  if (i + 1 < hdr->nentries)
    prefetch_lines(&ents[i + 1], 2);
  return &ents[i];
}

/* e's recorded occurrences, or NULL */
static inline const rdb_sample *samples_of(const rdb_entry *e) {
  if (e->nsamples == 0)
    return NULL;
  return rp_ptr(e->samples_off, (uint64_t)e->nsamples * sizeof(rdb_sample));
}

/* The plan or the model keeps this occurrence in software. */
static inline int in_software(const rdb_sample *s) {
  return s->accel < 0 || (uint32_t)s->accel >= hdr->naccel;
}

int rp_next_in_software(const rdb_entry *e) {
  const rdb_sample *samples = samples_of(e);
  if (!samples)
    return 0;
  uint64_t i = (uint64_t)(e - (const rdb_entry *)(db + hdr->entries_off));
  uint64_t k =
      e->nsamples == 1
          ? 0
          : atomic_load_explicit(occurrence_word(e, i), memory_order_relaxed) % e->nsamples;
  return in_software(&samples[k]);
}

const rdb_prefix *rp_prefixes(size_t *n) {
  *n = db ? hdr->nprefixes : 0;
  return *n ? (const rdb_prefix *)(db + hdr->prefixes_off) : NULL;
}

const rdb_stuck *rp_stuck(size_t *n) {
  *n = db ? hdr->nstuck : 0;
  return *n ? (const rdb_stuck *)(db + hdr->stuck_off) : NULL;
}

const rdb_drop *rp_drops(size_t *n) {
  *n = db ? hdr->ndrops : 0;
  return *n ? (const rdb_drop *)(db + hdr->drops_off) : NULL;
}

const rdb_entry *rp_lookup(const uint8_t fp[16]) {
  const uint32_t *slots = (const uint32_t *)(db + hdr->slots_off);
  const rdb_entry *ents = (const rdb_entry *)(db + hdr->entries_off);
  uint64_t h = next_hint;
  if (h < hdr->nentries && memcmp(ents[h].fp, fp, 16) == 0)
    return found(ents, h);
  uint64_t mask = hdr->nslots - 1;
  for (uint64_t i = rdb_hash(fp) & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
    uint32_t s = slots[i];
    if (s == 0 || s > hdr->nentries)
      return NULL;
    if (memcmp(ents[s - 1].fp, fp, 16) == 0)
      return found(ents, s - 1);
  }
  return NULL;
}

/* Whether the NUL-terminated name stored at off is name (len bytes). */
static int stored_name_is(uint64_t off, const char *name, size_t len) {
  const char *n = rp_ptr(off, len + 1);
  return n && memcmp(n, name, len + 1) == 0;
}

int rp_has_kept(void) {
  return db != NULL && hdr->nclasses != 0 && hdr->on_miss != RDB_MISS_ABORT;
}

uint32_t rp_kept_apis(const char *name) {
  if (!db || !name || hdr->nclasses == 0)
    return 0;
  const rdb_class *c = (const rdb_class *)(db + hdr->classes_off);
  uint64_t h = rdb_name_hash(name);
  size_t len = strlen(name);
  for (uint64_t i = 0; i < hdr->nclasses; i++) {
    if (c[i].name_hash != h)
      continue;
    if (stored_name_is(c[i].name_off, name, len))
      return c[i].kept | (c[i].unsup & c[i].kept) << RP_KEPT_UNSUP;
  }
  return 0;
}

/* The rows of rdb_schema for type `name` (sorted by name hash), in one
 * pass: how many, whether one is of unknown identity, the index + 1 of the
 * one of identity id (0: none), and the name's offset. */
typedef struct {
  uint32_t n, unknown, row;
  uint64_t name_off;
} schema_rows_of;

static schema_rows_of schema_rows(const char *name, uint64_t id) {
  schema_rows_of o = {0};
  if (!db || !name || hdr->nschemas == 0)
    return o;
  const rdb_schema *r = (const rdb_schema *)(db + hdr->schemas_off);
  uint64_t h = rdb_name_hash(name), lo = 0, hi = hdr->nschemas;
  while (lo < hi) { /* the first row of hash h */
    uint64_t mid = lo + (hi - lo) / 2;
    if (r[mid].name_hash < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t len = strlen(name);
  for (uint64_t i = lo; i < hdr->nschemas && r[i].name_hash == h; i++) {
    if (!stored_name_is(r[i].name_off, name, len))
      continue;
    o.n++;
    o.unknown |= r[i].id == 0;
    if (id && r[i].id == id && !o.row)
      o.row = (uint32_t)(i + 1);
    o.name_off = r[i].name_off;
  }
  return o;
}

int rp_schema_checked(const char *name) {
  schema_rows_of o = schema_rows(name, 0);
  return o.n && !o.unknown;
}

uint32_t rp_schema_row(const char *name, uint64_t id, int *several) {
  schema_rows_of o = schema_rows(name, id);
  *several = o.row && o.n > 1;
  if (!o.row && o.n)
    rp_changed_type(o.name_off);
  return o.row;
}

_Atomic uint64_t rp_unloads;

void rp_changed_type(uint64_t name_off) {
  uint64_t none = 0;
  if (db)
    atomic_compare_exchange_strong(&stats->c[RDB_C_CHANGED_TYPE], &none, name_off);
}

void rp_direct(int unsupported) {
  ADD(RDB_C_INTERCEPTED, 1);
  ADD(RDB_C_SOFTWARE, 1);
  ADD(RDB_C_SW0 + (unsupported ? RDB_SW_UNSUPPORTED : RDB_SW_NOT_SELECTED), 1);
  ADD(RDB_C_DIRECT, 1);
  call_done();
}

static void lock_accel(rdb_accel *a) {
  uint32_t z = 0;
  while (!atomic_compare_exchange_weak_explicit(&a->lock, &z, 1, memory_order_acquire,
                                                memory_order_relaxed)) {
    z = 0;
    __builtin_ia32_pause();
  }
}

static void unlock_accel(rdb_accel *a) {
  atomic_store_explicit(&a->lock, 0, memory_order_release);
}

/* Book the accelerator's engine that can start the request first
 * (rp_engines.h); returns the start. Engine time is counted with
 * unlimited engines too, as whatif counts it (busy_ns); their utilisation
 * is the service time's share instead (write_accels). */
static uint64_t reserve(rdb_accel *a, uint32_t k, uint64_t arrive, const rdb_sample *s) {
  uint64_t busy = rdb_busy(s), start = arrive;
  if (busy == 0) /* a 0 ns request neither waits nor holds an engine: nothing to count */
    return arrive;
  if (a->engines) {
    lock_accel(a);
    start = rp_engines_book(a, arrive, busy);
    unlock_accel(a);
  }
  local *l = local_self();
  if (SHIM_LIKELY(l != NULL))
    l->a[k][RDB_A_BUSY_NS] += busy;
  else
    atomic_fetch_add_explicit(&accels[k].st.c[RDB_A_BUSY_NS], busy, memory_order_relaxed);
  return start;
}

/* How long the call of sample s waits for the program's callbacks making
 * its request (rdb_header.sources_off): 0 for a sample outside the run. */
static inline uint32_t source_of(const rdb_sample *s) {
  if (SHIM_LIKELY(!hdr->sources_off))
    return 0;
  uintptr_t d = (uintptr_t)s - (uintptr_t)(db + hdr->samples_off);
  if (d % sizeof(rdb_sample) || d / sizeof(rdb_sample) >= hdr->nsamples)
    return 0;
  return ((const uint32_t *)(db + hdr->sources_off))[d / sizeof(rdb_sample)];
}

static void account_accel(uint32_t k, const rdb_sample *s, uint32_t source, uint64_t queue) {
  local *l = local_self();
  if (SHIM_UNLIKELY(!l)) { /* no memory for the thread's counters */
    _Atomic uint64_t *c = accels[k].st.c;
    atomic_fetch_add_explicit(&c[RDB_A_REQUESTS], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[RDB_A_SERVICE_NS], s->service_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[RDB_A_LINK_NS], (uint64_t)s->link_in_ns + s->link_out_ns,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&c[RDB_A_QUEUE_NS], queue, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[RDB_A_FAULT_NS], s->fault_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&c[RDB_A_SOURCE_NS], source, memory_order_relaxed);
    return;
  }
  l->a[k][RDB_A_REQUESTS]++;
  l->a[k][RDB_A_SERVICE_NS] += s->service_ns;
  l->a[k][RDB_A_LINK_NS] += (uint64_t)s->link_in_ns + s->link_out_ns;
  l->a[k][RDB_A_QUEUE_NS] += queue;
  l->a[k][RDB_A_FAULT_NS] += s->fault_ns;
  l->a[k][RDB_A_SOURCE_NS] += source;
  l->dirty = 1;
}

static int begin_sample(rp_ticket *t, const rdb_entry *e, const rdb_sample *s, uint32_t source,
                        uint64_t t0);

int rp_begin(rp_ticket *t, const rdb_entry *e, uint64_t t0) {
  ADD(RDB_C_INTERCEPTED, 1);
  const rdb_entry *ents = (const rdb_entry *)(db + hdr->entries_off);
  uint64_t i = (uint64_t)(e - ents), k;
  if (e->nsamples == 1) { /* its first occurrence, or one past the recorded count */
    uint64_t bit = 1ull << (i % 64);
    k = (atomic_fetch_or_explicit(occurrence_word(e, i), bit, memory_order_relaxed) & bit) != 0;
  } else {
    k = atomic_fetch_add_explicit(occurrence_word(e, i), 1, memory_order_relaxed);
  }
  last_used = i;
  const rdb_sample *samples = samples_of(e);
  if (!samples)
    return 0;
  if (k >= e->nsamples) {
    ADD(RDB_C_REUSED, 1);
    k %= e->nsamples;
  }
  const rdb_sample *s = &samples[k];
  pred[e->api % RDB_API_SLOTS] = s->next;
  /* Only its entry line: the counter it takes comes with the entry's other
   * lines as this call ends (prefetch_next), once the entry says which
   * word it is. Prefetched here, the counter of an entry recorded once
   * (most of a run's that make new messages) lay on a page of counters no
   * call writes, which the process has never mapped: each such prefetch
   * walked the page tables to a missing entry, every time (on an EPYC VM
   * under shadow paging, a software replay of pbtest basic 20000 spent
   * 40.8-42.1 ms of harness without it against 45.6-46.4, five alternating
   * rounds; a new 1 KB pack each call 205-226 ns against 230-267, a new 1 KB
   * unpack 192-202 against 222-226 (and 894 in one round of four); a cycle
   * of 100 such messages and a repeated one unchanged). */
  if (s->next != 0 && s->next <= hdr->nentries)
    __builtin_prefetch(ents + (s->next - 1));
  return begin_sample(t, e, s, source_of(s), t0);
}

/* The deadline of a call of e given sample s (rp_begin), on the shared
 * timeline; 0 when s stays in software. */
static int begin_sample(rp_ticket *t, const rdb_entry *e, const rdb_sample *s, uint32_t source,
                        uint64_t t0) {
  t0 = t0 > outside_ns ? t0 - outside_ns : 0;
  t->e = e;
  t->s = s;
  t->t0 = t0;
  t->approx = 0;
  t->hold = 0;
  if (in_software(s)) {
    ADD(RDB_C_SOFTWARE, 1);
    ADD(RDB_C_SW0 + (s->sw_reason < RDB_SW_NREASONS ? s->sw_reason : 0), 1);
    return 0;
  }
  rdb_accel *a = &accels[s->accel];
  /* Catch-up: a thread that owes harness time issues the request at the
   * time it would have had without that harness time (never before the
   * start of the clock), so its later calls' slack absorbs the debt while
   * its requests stay in order on the shared timeline. */
  local *l = me;
  t->debt = l ? l->debt : 0;
  t->shift = hdr->catch_up ? (t0 > t->debt ? t->debt : t0) : 0;
  uint64_t v0 = t0 - t->shift;
  uint64_t arrive = v0 + source + s->link_in_ns + s->fault_ns;
  uint64_t start = reserve(a, (uint32_t)s->accel, arrive, s);
  uint64_t end = start + s->service_ns + s->link_out_ns;
  t->deadline = end - v0 > tail_ns ? end - tail_ns : v0;
  account_accel((uint32_t)s->accel, s, source, start - arrive);
  if (source)
    ADD(RDB_API(e->api, RDB_API_SOURCE_NS), source);
  ADD(RDB_C_PREDICTED_NS, end - v0);
  ADD(RDB_API(e->api, RDB_API_MODELLED), 1);
  ADD(RDB_API(e->api, RDB_API_MODELLED_NS), end - v0);
  ADD(RDB_C_RECORDED_NS, s->recorded_ns);
  return 1;
}

/* paid of the thread's debt was paid back: counted, less the part it
 * inherited from its creator or parent, which they count. */
static inline void repaid(local *l, uint64_t paid) {
  uint64_t copy = paid < l->inherited ? paid : l->inherited;
  l->inherited -= copy;
  if (paid > copy)
    ADD(RDB_C_REPAID_NS, paid - copy);
}

/* A wait of sample s that the machine stopped past its deadline by late
 * (an interrupt, the hypervisor or another process had the CPU), owed like
 * an overrun when its model's time is a measured one: that time holds the
 * machine's stops at the rate they came when it was measured, and a replay
 * that takes its own on top, as the program does, counts such a stop
 * twice. On the 2-core test VM stops took ~1.3% of any loop's time, 12-30
 * us each; a loop of 300 ns waits lost 4.9 ns a wait to them. A modelled
 * time (a device, constant, linear) holds none: the program waits as late
 * as the machine makes it. */
static void owe_stopped(local *l, const rdb_sample *s, uint64_t late) {
  if (s->accel < 0 || !(accels[s->accel].flags & RDB_ACCEL_MEASURED))
    return;
  l->debt += late;
  local_add(l, RDB_C_SPIN_OWED_NS, late);
}

int rp_finish(rp_ticket *t) {
  /* everything but the spin happens before the clock read: inside the
   * window, as harness time (the thread's previous spin is counted here) */
  if (me)
    count_spin(me);
  call_done();
  unsigned api = t->e->api;
  prefetch_next(api);
  uint64_t now = now_done();
  ADD(t->approx ? RDB_C_APPROX : RDB_C_REPLAYED, 1);
  ADD(RDB_API(api, RDB_API_CALLS), 1);
  ADD(RDB_API(api, RDB_API_HARNESS_NS), now - t->t0);
  /* With catch-up the deadline was moved earlier by what the thread owed
   * (rp_begin); without, shift is 0 and the debt only grows. Either way
   * overrun (this call's own) + what it owed = repaid + what it owes now. */
  local *l = me;
  uint64_t plain = t->deadline + t->shift;
  uint64_t over = now > plain ? now - plain : 0;
  uint64_t owed = hdr->catch_up ? (now > t->deadline ? now - t->deadline : 0) : t->debt + over;
  if (l) {
    l->debt = owed;
    repaid(l, t->debt + over > owed ? t->debt + over - owed : 0);
  }
  if (over) {
    ADD(RDB_API(api, RDB_API_OVERRUNS), 1);
    ADD(RDB_API(api, RDB_API_OVERRUN_NS), over);
  }
  if (now >= t->deadline) {
    t->hold = 0;
    return over != 0;
  }
  uint64_t deadline = t->deadline;
  if (SHIM_UNLIKELY(t->hold)) { /* kept back for the later parts: spun less now */
    uint64_t room = deadline - now;
    t->hold = t->hold < room ? t->hold : room;
    deadline -= t->hold;
    if (deadline <= now)
      return 0;
  }
  uint64_t gap;
  uint64_t end = spin_until(deadline, &gap);
  /* past the deadline: a few stores, counted by the thread's next call */
  if (l) {
    l->spin_from = now;
    l->spin_end = end;
    l->spin_deadline = deadline;
    l->spun = 1;
    l->spin_stopped = gap >= RDB_SPIN_STOP_NS;
    if (SHIM_UNLIKELY(l->spin_stopped) && end > deadline)
      owe_stopped(l, t->s, end - deadline);
  } else {
    ADD(RDB_C_SPIN_NS, end - now);
  }
  return 0;
}

void rp_unhidden(uint64_t ns, int api) {
  ns += outside_ns;
  ADD(RDB_API(api, RDB_API_CALLS), 1);
  ADD(RDB_API(api, RDB_API_HARNESS_NS), ns);
  ADD(RDB_API(api, RDB_API_OVERRUNS), 1);
  ADD(RDB_API(api, RDB_API_OVERRUN_NS), ns);
  local *l = me;
  if (l)
    l->debt += ns; /* paid back, like any overrun, from later calls' slack */
}

void rp_late(uint64_t ns, int first, int api) {
  ADD(RDB_API(api, RDB_API_HARNESS_NS), ns);
  ADD(RDB_API(api, RDB_API_OVERRUNS), first != 0);
  ADD(RDB_API(api, RDB_API_OVERRUN_NS), ns);
  local *l = me;
  if (l)
    l->debt += ns;
}

int rp_late_held(uint64_t ns, uint64_t *held, int first, int api) {
  uint64_t covered = ns < *held ? ns : *held;
  *held -= covered;
  ADD(RDB_API(api, RDB_API_HARNESS_NS), covered);
  if (ns == covered)
    return 0;
  rp_late(ns - covered, first, api);
  return 1;
}

void rp_spin_held(uint64_t *held, uint64_t keep) {
  if (*held <= keep)
    return;
  uint64_t left = *held - keep;
  *held = keep;
  local *l = me;
  if (l && hdr && hdr->catch_up && l->debt) { /* slack pays what the thread owes first */
    uint64_t pay = l->debt < left ? l->debt : left;
    l->debt -= pay;
    left -= pay;
    repaid(l, pay);
  }
  if (!left)
    return;
  uint64_t now = rp_now();
  uint64_t end = spin_until(now + left, NULL);
  ADD(RDB_C_SPIN_NS, end - now);
}

void rp_to_memory(uint64_t bytes) {
  ADD(RDB_C_TO_MEMORY_BYTES, bytes);
}

void rp_served_given_up(void) {
  ADD(RDB_C_SERVED_GIVEN_UP, 1);
}

void rp_given_up_read_whole(void) {
  ADD(RDB_C_GIVEN_UP_WHOLE, 1);
}

void rp_unbuilt(int reason, int api, const char *type, void *caller) {
  ADD(RDB_C_UNBUILT, 1);
  if (db && hdr->on_miss == RDB_MISS_ABORT && reason != RDB_FB_NOMEM)
    rp_miss(reason, api, type, caller);
}

void rp_served_then_real(void) {
  ADD(RDB_C_SERVED_THEN_REAL, 1);
}

void rp_not_offloadable(unsigned why) {
  ADD(RDB_C_RAN_NO0 + (why < RDB_NO_SLOTS - 1 ? why : RDB_NO_SLOTS - 1), 1);
}

void rp_software_done(uint64_t ns) {
  ADD(RDB_C_SOFTWARE_NS, ns);
  call_done();
}

void rp_miss(int reason, int api, const char *type, void *caller) {
  if (!db)
    return;
  ADD(RDB_C_INTERCEPTED, 1);
  ADD(RDB_C_FALLBACK, 1);
  ADD(RDB_C_FB0 + (reason < RDB_FB_NREASONS ? reason : 0), 1);
  if (hdr->on_miss != RDB_MISS_ABORT)
    return;
  flush_all();
  static const char *why[] = {"the request is not in the recording",
                              "the request bytes differ from the recorded ones",
                              "the recording has no response for it",
                              "the saved response does not fit the program's message type",
                              "out of memory",
                              "replay is off in this process",
                              "its message type's definition is not the recording's (the "
                              "program was built from a changed .proto, or the recording holds "
                              "two definitions of the type); record the program again",
                              "its message type has no name (generated with optimize_for = "
                              "CODE_SIZE), and replay tells types apart by name",
                              "its message type was built at run time (its descriptor is in no "
                              "loaded library), which replay does not answer"};
  _Static_assert(sizeof why / sizeof why[0] == RDB_FB_NREASONS, "a reason without words");
  Dl_info di;
  int in;
  const char *sym = "?", *mod = "?";
  char at[96]; /* a stripped or static caller: its object and offset, as report names sites */
  char exe[512];
  if (caller && (in = shim_dladdr((char *)caller - 1, &di)) != 0) {
    mod = di.dli_fname && di.dli_fname[0] ? di.dli_fname : "?";
    ssize_t n; /* the program itself by its file */
    if (in == 2 && (n = readlink("/proc/self/exe", exe, sizeof exe - 1)) > 0) {
      exe[n] = 0;
      mod = exe;
    }
    sym = di.dli_sname;
    if (!sym) {
      const char *base = strrchr(mod, '/');
      snprintf(at, sizeof at, "%.60s+0x%lx", base ? base + 1 : mod,
               (unsigned long)((uintptr_t)caller - (uintptr_t)di.dli_fbase));
      sym = at;
    }
  }
  /* a call the plan would not offload anyway: abort checks every call
   * against the recording, which may surprise (rdb_class) */
  int kept = type && (rp_kept_apis(type) >> api & 1);
  shim_say("replay miss in %s for %s (called from %s in %s): %s; stopping because of "
           "--on-miss abort%s",
           st_api_name(api), type ? type : "?", sym, mod,
           why[reason < RDB_FB_NREASONS ? reason : 0],
           kept ? ", which checks every call against the recording, also this one that the "
                  "plan keeps in software (--on-miss fallback runs such calls)"
                : "");
  _exit(125);
}

int rp_miss_near(int reason, int api, const char *type, void *caller) {
  if (db && hdr->on_miss == RDB_MISS_NEAREST)
    return 1;
  rp_miss(reason, api, type, caller);
  return 0;
}

/* The group of (api, type) in the nearest table, remembered per thread for
 * the last few pairs (the table is scanned: it has one group per type and
 * API recorded). */
#define NEAR_CACHE 8
static SHIM_TLS struct {
  const char *type;
  int api;
  uint64_t variant;
  uint64_t unloads;        /* rp_unloads then: a protobuf type's name may go with its library */
  const rdb_near_group *g; /* NULL: none */
} near_cache[NEAR_CACHE];
static SHIM_TLS uint32_t near_turn; /* spreads misses over equally near calls */

static const rdb_near_group *near_group(int api, const char *type, uint64_t variant) {
  unsigned k = (unsigned)(((uintptr_t)type >> 4) + (unsigned)api + (unsigned)variant) % NEAR_CACHE;
  uint64_t unloads = atomic_load_explicit(&rp_unloads, memory_order_relaxed);
  if (near_cache[k].type == type && near_cache[k].api == api && near_cache[k].variant == variant &&
      near_cache[k].unloads == unloads)
    return near_cache[k].g;
  const rdb_near_group *groups = (const rdb_near_group *)(db + hdr->near_groups_off);
  const rdb_near_group *found = NULL;
  uint64_t h = rdb_name_hash(type);
  size_t len = strlen(type);
  for (uint64_t i = 0; i < hdr->nnear_groups && !found; i++) {
    if (groups[i].name_hash != h || groups[i].api != (uint32_t)api || groups[i].variant != variant)
      continue;
    if (stored_name_is(groups[i].name_off, type, len) && groups[i].first <= hdr->nnear &&
        groups[i].n <= hdr->nnear - groups[i].first && groups[i].n > 0)
      found = &groups[i];
  }
  near_cache[k].type = type;
  near_cache[k].api = api;
  near_cache[k].variant = variant;
  near_cache[k].unloads = unloads;
  near_cache[k].g = found;
  return found;
}

/* First index in it[0, n) whose key is >= key (n: none). */
static uint64_t near_lower(const rdb_near *it, uint64_t n, uint64_t key) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (it[mid].key < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A sample of the run it[lo, hi) of items of one key (*ep its entry), or
 * NULL: among equally near calls, and among a call's occurrences,
 * successive misses take turns. */
static const rdb_sample *run_sample(const rdb_near *it, uint64_t lo, uint64_t hi, uint32_t turn,
                                    int api, const rdb_entry **ep) {
  if (hi <= lo)
    return NULL;
  uint32_t idx = it[lo + turn % (hi - lo)].entry;
  if (idx >= hdr->nentries)
    return NULL;
  const rdb_entry *e = (const rdb_entry *)(db + hdr->entries_off) + idx;
  const rdb_sample *samples = rp_ptr(e->samples_off, (uint64_t)e->nsamples * sizeof(rdb_sample));
  if (!samples || e->nsamples == 0 || e->api != api)
    return NULL;
  *ep = e;
  /* not an occurrence given up (RDB_SW_ABANDONED: the library's time for
   * some rows), unless all are */
  uint32_t k = (turn / (hi - lo)) % e->nsamples;
  for (uint32_t i = 0; i < e->nsamples; i++) {
    const rdb_sample *s = &samples[(k + i) % e->nsamples];
    if (s->accel >= 0 || s->sw_reason != RDB_SW_ABANDONED)
      return s;
  }
  return &samples[k];
}

/* x + (y - x) * num / den, den > 0, kept within 0 .. UINT64_MAX (the
 * sizes and times come from the recording: no product may overflow) */
static uint64_t lerp(uint64_t x, uint64_t y, uint64_t num, uint64_t den) {
  unsigned __int128 d = (unsigned __int128)(y > x ? y - x : x - y) * num / den;
  if (y >= x)
    return d > UINT64_MAX - x ? UINT64_MAX : x + (uint64_t)d;
  return d > x ? 0 : x - (uint64_t)d;
}

/* Beyond the recorded sizes: the line through (kn, vn), the recorded size
 * nearest key, and (kf, vf), the next one, at key, kept between vn as it is
 * (none of the time grows with size) and vn in proportion to key / kn (all
 * of it does). */
static uint64_t extrapolate(uint64_t kn, uint64_t vn, uint64_t kf, uint64_t vf, uint64_t key) {
  if ((kn | vn | kf | vf | key) >> 62 || kn == 0 || kn == kf)
    return vn; /* no product below may overflow */
  __int128 line = (__int128)vn + ((__int128)vf - (__int128)vn) * ((__int128)key - (__int128)kn) /
                                     ((__int128)kf - (__int128)kn);
  __int128 prop = (__int128)vn * key / kn;
  __int128 lo = prop < vn ? prop : vn, hi = prop < vn ? vn : prop;
  return (uint64_t)(line < lo ? lo : line > hi ? hi : line);
}

/* An extrapolated link time, as a sample holds it (a miss beyond the
 * recorded sizes is an approximation anyway). */
static uint32_t link32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* The sample a miss of api, type and variant, of size key, is timed with,
 * into *out (*ep: the entry of the recorded call nearest in size, whose
 * key goes to *near_key); 0 when nothing of that API, type and variant was
 * recorded. Between two recorded sizes served the same way (the same
 * accelerator, or both in software), service, link and recorded times are
 * interpolated by size. Beyond the recorded sizes, where the two nearest
 * were served the same way, the line through them is extended, within
 * bounds (extrapolate); where only one size was recorded (or the two were
 * served differently), above it the call's service and recorded times grow
 * in proportion to the size (its link time as it is), and below it its
 * sample is taken as it is. Between calls served differently, the nearest
 * call's sample is taken as it is. */
static int nearest(int api, const char *type, uint64_t variant, uint64_t key, rdb_sample *out,
                   uint32_t *source, const rdb_entry **ep, uint64_t *near_key) {
  const rdb_near_group *g = near_group(api, type, variant);
  if (!g)
    return 0;
  const rdb_near *it = (const rdb_near *)(db + hdr->near_off) + g->first;
  uint64_t n = g->n, i = near_lower(it, n, key);
  uint32_t turn = near_turn++;
  if (i == n || i == 0 || it[i].key == key) { /* beyond the ends, or the same size */
    uint64_t at = i == n ? n - 1 : i, k = it[at].key;
    uint64_t lo = i == n ? near_lower(it, n, k) : i;
    uint64_t hi = i == n ? n : k == UINT64_MAX ? n : near_lower(it, n, k + 1);
    const rdb_sample *s = run_sample(it, lo, hi, turn, api, ep);
    if (!s)
      return 0;
    *out = *s;
    *source = source_of(s);
    *near_key = k;
    if ((i != 0 && i != n) || k == key || k == 0)
      return 1;
    /* beyond the ends: the next recorded size, on the same side */
    const rdb_entry *ef = NULL;
    const rdb_sample *f = NULL;
    uint64_t kf = 0;
    if (i == 0 && hi < n) {
      kf = it[hi].key;
      f = run_sample(it, hi, kf == UINT64_MAX ? n : near_lower(it, n, kf + 1), turn, api, &ef);
    } else if (i == n && lo > 0) {
      kf = it[lo - 1].key;
      f = run_sample(it, near_lower(it, lo, kf), lo, turn, api, &ef);
    }
    if (f && f->accel == s->accel) {
      out->service_ns = extrapolate(k, s->service_ns, kf, f->service_ns, key);
      out->recorded_ns = extrapolate(k, s->recorded_ns, kf, f->recorded_ns, key);
      out->link_in_ns = link32(extrapolate(k, s->link_in_ns, kf, f->link_in_ns, key));
      out->link_out_ns = link32(extrapolate(k, s->link_out_ns, kf, f->link_out_ns, key));
      out->fault_ns = link32(extrapolate(k, s->fault_ns, kf, f->fault_ns, key));
      *source = link32(extrapolate(k, source_of(s), kf, source_of(f), key));
    } else if (i == n) { /* larger than any recorded: in proportion */
      out->service_ns = lerp(0, s->service_ns, key, k);
      out->recorded_ns = lerp(0, s->recorded_ns, key, k);
    }
    return 1;
  }
  /* ka < key < kb: ka's run ends at i, where kb's starts */
  uint64_t ka = it[i - 1].key, kb = it[i].key;
  uint64_t b_end = kb == UINT64_MAX ? n : near_lower(it, n, kb + 1);
  const rdb_entry *ea = NULL, *eb = NULL;
  const rdb_sample *a = run_sample(it, near_lower(it, i, ka), i, turn, api, &ea);
  const rdb_sample *b = run_sample(it, i, b_end, turn, api, &eb);
  int lower = key - ka <= kb - key;
  const rdb_sample *s = lower ? a : b;
  if (!s)
    return 0;
  *out = *s;
  *source = source_of(s);
  *ep = lower ? ea : eb;
  *near_key = lower ? ka : kb;
  if (a && b && a->accel == b->accel) {
    uint64_t num = key - ka, den = kb - ka;
    out->service_ns = lerp(a->service_ns, b->service_ns, num, den);
    out->recorded_ns = lerp(a->recorded_ns, b->recorded_ns, num, den);
    out->link_in_ns = (uint32_t)lerp(a->link_in_ns, b->link_in_ns, num, den);
    out->link_out_ns = (uint32_t)lerp(a->link_out_ns, b->link_out_ns, num, den);
    out->fault_ns = (uint32_t)lerp(a->fault_ns, b->fault_ns, num, den);
    *source = (uint32_t)lerp(source_of(a), source_of(b), num, den);
  }
  return 1;
}

void rp_near_done(uint64_t t0, uint64_t s, int api, const char *type, uint64_t variant,
                  uint64_t key, int reason, int unhide) {
  const rdb_entry *e = NULL;
  uint64_t nk = 0;
  rdb_sample smp;
  uint32_t src = 0;
  int found = db && nearest(api, type ? type : "", variant, key, &smp, &src, &e, &nk);
  uint64_t now = rp_now();
  if (!found) { /* nothing of this API and type was recorded: a fallback */
    ADD(RDB_C_INTERCEPTED, 1);
    ADD(RDB_C_FALLBACK, 1);
    ADD(RDB_C_NO_NEAREST, 1);
    ADD(RDB_C_FB0 + (reason >= 0 && reason < RDB_FB_NREASONS ? reason : 0), 1);
    if (unhide)
      rp_unhidden(s - t0, api);
    rp_software_done(now - s);
    return;
  }
  ADD(RDB_C_INTERCEPTED, 1);
  if (reason == RDB_FB_CHANGED)
    ADD(RDB_C_NEAR_CHANGED, 1);
  rp_ticket tk;
  if (!begin_sample(&tk, e, &smp, src, t0)) { /* the nearest call stays in software */
    if (unhide)
      rp_unhidden(s - t0, api);
    rp_software_done(now - s);
    return;
  }
  tk.approx = 1;
  ADD(RDB_C_APPROX_KEY, key);
  ADD(RDB_C_APPROX_KEY_DIFF, key > nk ? key - nk : nk - key);
  rp_finish(&tk);
}

/* ---- trees built by replay ---------------------------------------------- */

/* A process-local open-addressing set of pointers; insert and remove are
 * lock-free (CAS), removal leaves a tombstone. */
#define OWN_SLOTS (1u << 20)
#define OWN_TOMB ((uintptr_t)1)
static _Atomic uintptr_t *own;
static _Atomic uint32_t own_used;

static _Atomic uintptr_t *own_table(void) {
  _Atomic uintptr_t *t = atomic_load(&own);
  if (t)
    return t;
  void *p = mmap(NULL, OWN_SLOTS * sizeof(uintptr_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  _Atomic uintptr_t *expect = NULL;
  if (!atomic_compare_exchange_strong(&own, &expect, p)) {
    munmap(p, OWN_SLOTS * sizeof(uintptr_t));
    return expect;
  }
  return p;
}

/* Neighbouring blocks get neighbouring slots: the allocator hands the
 * block a program just freed to its next unpack, so the slots in use stay
 * few and cached instead of one cache miss each in an 8 MiB table. */
static uint32_t own_hash(const void *p) {
  uint64_t x = (uintptr_t)p >> 4;
  return (uint32_t)(x ^ (x >> 20)) & (OWN_SLOTS - 1);
}

int rp_own_add(const void *p) {
  _Atomic uintptr_t *t = own_table();
  if (!t || atomic_fetch_add(&own_used, 1) > OWN_SLOTS / 2) {
    atomic_fetch_sub(&own_used, 1);
    return -1;
  }
  for (uint32_t i = own_hash(p), n = 0; n < OWN_SLOTS; i = (i + 1) & (OWN_SLOTS - 1), n++) {
    uintptr_t cur = atomic_load_explicit(&t[i], memory_order_relaxed);
    if ((cur == 0 || cur == OWN_TOMB) && atomic_compare_exchange_strong(&t[i], &cur, (uintptr_t)p))
      return 0;
  }
  return -1;
}

int rp_own_take(const void *p) {
  _Atomic uintptr_t *t = atomic_load(&own);
  if (!t || !p)
    return 0;
  for (uint32_t i = own_hash(p), n = 0; n < OWN_SLOTS; i = (i + 1) & (OWN_SLOTS - 1), n++) {
    uintptr_t cur = atomic_load_explicit(&t[i], memory_order_relaxed);
    if (cur == 0)
      return 0;
    if (cur == (uintptr_t)p && atomic_compare_exchange_strong(&t[i], &cur, OWN_TOMB)) {
      atomic_fetch_sub(&own_used, 1);
      return 1;
    }
  }
  return 0;
}

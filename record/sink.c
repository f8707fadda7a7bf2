/* sink.c — the writer thread's side of the record runtime: turns ring
 * records into trace records (call sites, message types, threads, blobs)
 * and owns the trace file of the process. Only the writer thread calls
 * these functions, except wr_open/wr_close which the starting and stopping
 * thread call while the writer is not running. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "pb_walk.h"
#include "placement.h"
#include "record_internal.h"
#include "rt.h"
#include "shim_alloc.h"
#include "trace.h"
#include "typecap.h"

#define SITE_SLOTS_MIN 256
#define TYPE_SLOTS_MIN 64

typedef struct {
  uint64_t hash;
  uint32_t id, nips;
  uint64_t ips[ST_MAX_FRAMES];
} site_slot;

typedef struct {
  const void *key;
  uint32_t id;
  void *schema; /* for deriving unpack features from request bytes */
  size_t schema_len;
  pbw_packed_plan *plan; /* the schema decoded for deriving pack fingerprints */
  pbw_stats_plan *stats; /* the schema checked once for unpack features */
  uint64_t name_hash;    /* pbw_name_hash of a protobuf type's name */
} type_slot;

static struct {
  st_writer *w;
  char path[PATH_MAX + 64];
  uint64_t seq;
  int failed; /* a write failed: stop writing, say it once */
  site_slot *sites;
  uint32_t nsites, site_cap;
  type_slot *types;
  uint32_t ntypes, type_cap;
  uint32_t max_thread_seen;
  uint64_t timer_ns; /* cost of one clock read inside a timed interval */
  uint64_t pass_ns;  /* cost of one nested call passing through a hook */
  uint64_t stored_mode_switches; /* times the writer fell behind */
  uint64_t fp_derived, fp_underived; /* pack fingerprints from bytes: done, failed */
  uint64_t size_fp_paired, size_fp_unpaired; /* held sizes: given their pack's, or not */
} S;

static void free_types(void);
static void forget_derived(void);

/* ---- file ---------------------------------------------------------------- */

static int read_cmdline(char *buf, size_t cap, const char **argv, uint32_t *argc) {
  ssize_t n = rt_cmdline(buf, cap);
  if (n <= 0)
    return -1;
  uint32_t k = 0;
  for (ssize_t i = 0; i < n && k < ST_MAX_ARGS; i += (ssize_t)strlen(buf + i) + 1)
    argv[k++] = buf + i;
  *argc = k;
  return 0;
}

/* ---- the trace file's descriptor, kept from the program ----------------- */

/* A daemon that closes every descriptor, then opens files of its own,
 * would get the trace file's number back, and the writer would append its
 * chunks to the program's file. So the file sits near the top of the
 * descriptor table (st_set_high_fd), the hooks in fdguard.c keep the
 * program from closing it, and a dup2 onto it first moves it elsewhere. */
static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER; /* S.w for wr_release_fd */
static _Atomic int own_fd = -1;
static pid_t own_pid; /* the process whose descriptor table holds own_fd */

static void publish_fd(int fd) {
  own_pid = getpid();
  atomic_store_explicit(&own_fd, fd, memory_order_release);
}

int wr_trace_fd(void) {
  return atomic_load_explicit(&own_fd, memory_order_acquire);
}

void wr_release_fd(int fd) {
  pthread_mutex_lock(&fd_lock);
  /* a vfork child shares our memory, not our descriptors: its dup2 changes
   * only its own table, and it moves nothing */
  if (S.w && fd == wr_trace_fd() && getpid() == own_pid) {
    int moved = st_writer_move_fd(S.w);
    publish_fd(moved);
    if (moved < 0)
      shim_say("the program took over the trace file's descriptor %d and no other was free; "
               "recording stops here for pid %d (the trace keeps the calls written before)",
               fd, (int)own_pid);
  }
  pthread_mutex_unlock(&fd_lock);
}

/* Whether the trace file at rel (relative to at) that holds h's pid in its
 * name was written by an earlier image of this process (before an exec):
 * the same pid, PID namespace and start time. Not when it names another
 * process (the same pid in another namespace, or a pid used again), or
 * cannot be read (being created by another process right now: an earlier
 * image's file had its header before the exec). Without this process's
 * identity (no /proc), every such file counts as an earlier image. */
static int earlier_image(int at, const char *rel, const st_header *h) {
  if (h->pidns == 0)
    return 1;
  int fd = openat(at, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  uint32_t pid;
  uint64_t ns, start;
  int rc = st_peek_process(fd, &pid, &ns, &start);
  close(fd);
  if (rc != ST_OK)
    return 0;
  return ns == 0 || (pid == h->pid && ns == h->pidns && start == h->start_ticks);
}

/* The first free name of this process's (rt_names). The file's exec_seq
 * counts the earlier images of this process, which a process with the
 * same pid in another PID namespace is not. */
/* A process that could not create its trace says why where the record
 * command finds it: a symbolic link PID.unrecorded whose target is the
 * reason. Making one takes no descriptor (a program run with `ulimit -n 5`
 * has none to spare) and no data block for a short target; the command
 * reads it instead of saying that no intercepted call was made. */
static void note_unrecorded(const rt_config *cfg, const rt_names *nm, uint32_t pid,
                            const char *why) {
  char p[sizeof S.path];
  const char *rel;
  rt_names_path(nm, p, sizeof p, cfg->dir, pid, "unrecorded");
  int at = rt_dir_at(p, &rel);
  unlinkat(at, rel, 0); /* a note left by an earlier process of this pid */
  if (symlinkat(why, at, rel) != 0) {
    /* nothing more can be said: the error above stands alone */
  }
}

static int create_file(const rt_config *cfg, const st_header *h, uint32_t *exec_seq) {
  rt_names nm;
  rt_names_init(&nm, h->pidns ? h->start_ticks : 0);
  for (;;) {
    rt_names_path(&nm, S.path, sizeof S.path, cfg->dir, h->pid, "trace");
    st_header hh = *h;
    hh.exec_seq = nm.earlier;
    const char *rel; /* after a chroot: relative to the directory kept open */
    int at = rt_dir_at(S.path, &rel);
    int rc = st_writer_openat(&S.w, at, rel, &hh);
    if (rc == ST_OK) {
      publish_fd(st_writer_fd(S.w));
      *exec_seq = nm.earlier;
      return 0;
    }
    if (rc == ST_E_EXISTS) {
      if (rt_names_next(&nm, earlier_image(at, rel, h)) == 0)
        continue;
      break;
    }
    int e = errno;
    struct stat d;
    /* a server that gave up root before its first call (php-fpm's
     * workers run as nobody) cannot write into standin's 0700 directory */
    if (rc == ST_E_IO && (e == EACCES || e == EPERM) &&
        (stat(cfg->dir, &d) != 0 || d.st_uid != geteuid())) {
      shim_say("cannot create trace file %s: %s; recording is off for pid %u, which runs as "
               "uid %u, not the directory's owner (the program goes on). To record processes "
               "that change user, make the directory first, writable for them (mkdir -m 1777 "
               "%s), and record into it with -o",
               S.path, strerror(e), h->pid, (unsigned)geteuid(), cfg->dir);
      return -1;
    }
    const char *why = rc == ST_E_IO ? strerror(e) : st_strerror(rc);
    shim_say("cannot create trace file %s: %s; recording is off for pid %u (the program goes "
             "on)",
             S.path, why, h->pid);
    note_unrecorded(cfg, &nm, h->pid, why);
    return -1;
  }
  shim_say("too many trace files for pid %u in %s; recording is off", h->pid, cfg->dir);
  return -1;
}

static char exe[PATH_MAX];
static struct {
  uint32_t pid; /* whose: a forked child inside a chroot knows nothing */
  uint64_t pidns, start_ticks;
} me_id;

/* The process's start time, in clock ticks since boot: field 22 of
 * /proc/self/stat, after the command name (which may hold spaces and
 * parentheses: the last ')' ends it). 0 when it cannot be read. */
static uint64_t read_start_ticks(void) {
  char buf[1024];
  int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  /* fields 3 (state) to 21 follow the name; 22 is the start time */
  for (int field = 2; p && field < 22; field++)
    p = strchr(p + 1, ' ');
  return p ? strtoull(p + 1, NULL, 10) : 0;
}

void wr_read_identity(void) {
  char buf[PATH_MAX];
  uint32_t pid = (uint32_t)getpid();
  struct stat ns;
  uint64_t start = read_start_ticks();
  if (start && stat("/proc/self/ns/pid", &ns) == 0) {
    me_id.pid = pid;
    me_id.pidns = (uint64_t)ns.st_ino;
    me_id.start_ticks = start;
  } else if (me_id.pid != pid) {
    me_id.pid = pid;
    me_id.pidns = me_id.start_ticks = 0;
  }
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return; /* no /proc (a chroot): what was read before it, or nothing */
  buf[n] = 0;
  if (strcmp(exe, buf) != 0) /* the writer may be naming frames by it (resolve_frame) */
    memcpy(exe, buf, (size_t)n + 1);
}

void wr_process_id(uint64_t *pidns, uint64_t *start_ticks) {
  int mine = me_id.pid == (uint32_t)getpid();
  *pidns = mine ? me_id.pidns : 0;
  *start_ticks = mine ? me_id.start_ticks : 0;
}

int wr_open(const rt_config *cfg) {
  static char cmd[8192], host[256];
  static const char *argv[ST_MAX_ARGS];
  st_header h = {0};
  h.pid = (uint32_t)getpid();
  h.ppid = (uint32_t)getppid();
  h.start_mono_ns = cfg->start_mono_ns;
  h.start_realtime_ns = cfg->start_real_ns;
  h.clock = "CLOCK_MONOTONIC";
  if (gethostname(host, sizeof host) != 0)
    strcpy(host, "?");
  host[sizeof host - 1] = 0;
  h.host = host;
  wr_read_identity();
  h.exe = exe;
  wr_process_id(&h.pidns, &h.start_ticks);
  h.tool_version = STANDIN_VERSION;
  if (read_cmdline(cmd, sizeof cmd, argv, &h.argc) == 0)
    h.argv = argv;
  S.w = NULL;
  S.seq = 0;
  S.failed = 0;
  S.nsites = S.ntypes = 0;
  S.fp_derived = S.fp_underived = 0;
  forget_derived();
  uint32_t seq;
  /* This runs on the program's thread: a file size limit must not send it
   * SIGXFSZ (the write fails with EFBIG, and we say so). */
  sigset_t xfsz, old, pending;
  sigemptyset(&xfsz);
  sigaddset(&xfsz, SIGXFSZ);
  pthread_sigmask(SIG_BLOCK, &xfsz, &old);
  int was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ);
  int rc = create_file(cfg, &h, &seq);
  if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGXFSZ)) {
    struct timespec now = {0, 0};
    sigtimedwait(&xfsz, NULL, &now);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* The first failure to write (disk full, file size limit, I/O error) is
 * reported once, with the file; recording stops, the program goes on, and
 * the file keeps every chunk written before (see wr_close). */
static void check(int rc) {
  if (rc == ST_OK || S.failed)
    return;
  S.failed = 1;
  shim_say("writing %s failed: %s; calls after this point are not recorded (the program goes "
           "on, the trace keeps the calls written before)",
           S.path, rc == ST_E_IO ? strerror(errno) : st_strerror(rc));
  rt_writer_failed();
}

void wr_set_compress(int on) {
  if (S.w)
    st_writer_set_compress(S.w, on);
  S.stored_mode_switches += !on;
}

void wr_flush(void) {
  if (S.w && !S.failed)
    check(st_writer_flush(S.w));
}

static void note_u64(const char *key, uint64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
  st_note n = {key, buf};
  check(st_writer_add_note(S.w, &n));
}

void wr_note(const char *key, const char *value) {
  if (!S.w || S.failed)
    return;
  st_note n = {key, value};
  check(st_writer_add_note(S.w, &n));
}

void wr_close(void) {
  if (!S.w)
    return;
  if (!S.failed) {
    note_u64("end_mono_ns", shim_now_ns());
    note_u64("calls", S.seq);
    note_u64("latency_correction_timer_ns", S.timer_ns);
    note_u64("latency_correction_nested_ns", S.pass_ns);
    note_u64("pb_own_calls_bypassed", (uint64_t)rt_pb_bypassed);
    note_u64("pack_to_buffer_read_back", atomic_load(&rt_pb_buf_read_back));
    note_u64("calls_left_by_longjmp", atomic_load(&rt_calls_left));
    if (place_miss_ns()) /* a JPEG decode's output was probed */
      note_u64("place_miss_ns", place_miss_ns());
    note_u64("record_overhead_ns", rt_overhead_ns());
    note_u64("writer_cpu_ns", rt_writer_cpu_ns());
    note_u64("stacks_unwound", rt_stacks_unwound());
    note_u64("calls_without_ring", rt_calls_without_ring());
    note_u64("writer_fell_behind", S.stored_mode_switches);
    uint64_t wait_ns, waits = rt_ring_waits(&wait_ns);
    note_u64("ring_waits", waits);
    note_u64("ring_wait_ns", wait_ns);
    note_u64("ring_bytes", rt_cfg.ring_bytes);
    note_u64("payload_backlog_peak_bytes", rt_backlog_peak());
    note_u64("payload_backlog_max_bytes", rt_backlog_max());
    note_u64("pack_fp_from_bytes", S.fp_derived);
    note_u64("pack_fp_not_derived", S.fp_underived);
    note_u64("size_fp_from_pack", S.size_fp_paired);
    note_u64("size_fp_unpaired", S.size_fp_unpaired);
  }
  pthread_mutex_lock(&fd_lock);
  int rc = st_writer_close(S.w);
  publish_fd(-1);
  S.w = NULL;
  pthread_mutex_unlock(&fd_lock);
  if (!S.failed)
    check(rc);
  shim_free(S.sites);
  S.sites = NULL;
  S.site_cap = 0;
  free_types();
}

void wr_forget(void) {
  S.w = NULL; /* the parent's writer; its state may be mid-update */
  /* our copy of the parent's trace file: closing it leaves the parent's */
  int fd = wr_trace_fd();
  publish_fd(-1);
  pthread_mutex_init(&fd_lock, NULL);
  if (fd >= 0)
    syscall(SYS_close, fd);
  S.sites = NULL;
  S.types = NULL;
  S.site_cap = S.type_cap = 0;
}

/* ---- latency correction -------------------------------------------------- */

static const ProtobufCMessageDescriptor calib_desc = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "standin.calibration",
    .sizeof_message = sizeof(ProtobufCMessage),
};

/* The timed interval of a call includes one clock read, and every nested
 * call libprotobuf-c makes passes through our hook. Both are measured here,
 * on the writer thread, and subtracted from recorded latencies, so replay
 * does not reproduce costs the program never pays without standin. */
void wr_calibrate(void) {
  uint64_t t = 0;
  S.timer_ns = SHIM_MIN_PER_ITER(500, t += shim_now_ns());
  __typeof__(&protobuf_c_message_get_packed_size) real =
      (__typeof__(real))shim_real_opt("protobuf_c_message_get_packed_size");
  S.pass_ns = 0;
  if (real && (rt_cfg.apis & (1u << ST_FAMILY_PROTOBUF))) {
    ProtobufCMessage m = {.descriptor = &calib_desc};
    volatile size_t sink = 0;
    uint64_t direct = SHIM_MIN_PER_ITER(500, sink += real(&m));
    /* our own exported hook, as libprotobuf-c reaches it inside a call
     * (the check shim_left_behind makes included) */
    shim_enter(__builtin_frame_address(0));
    uint64_t hooked = SHIM_MIN_PER_ITER(500, sink += protobuf_c_message_get_packed_size(&m));
    shim_leave();
    S.pass_ns = hooked > direct ? hooked - direct : 0;
    (void)sink;
  }
  (void)t;
}

void wr_calibration(uint64_t *timer_ns, uint64_t *pass_ns) {
  *timer_ns = S.timer_ns;
  *pass_ns = S.pass_ns;
}

static uint64_t corrected(const raw_call *rc) {
  uint64_t cut = S.timer_ns + (uint64_t)rc->nested * S.pass_ns;
  return rc->latency_ns > cut ? rc->latency_ns - cut : 0;
}

/* ---- call sites ---------------------------------------------------------- */

static void resolve_frame(uint64_t ip, st_frame *f) {
  Dl_info info;
  int in;
  memset(f, 0, sizeof *f);
  f->ip = ip;
  f->module = "";
  f->symbol = "";
  /* a return address points after the call: look up the call itself */
  if (ip && (in = shim_dladdr((void *)(uintptr_t)(ip - 1), &info)) != 0) {
    /* the program itself by its file (Chromium's renderers' call sites
     * were named by a piece of their command line) */
    f->module = in == 2 && exe[0] ? exe : info.dli_fname ? info.dli_fname : "";
    f->offset = ip - (uint64_t)(uintptr_t)info.dli_fbase;
    if (info.dli_sname) {
      f->symbol = info.dli_sname;
      f->sym_offset = ip - (uint64_t)(uintptr_t)info.dli_saddr;
    }
  }
}

static int grow_sites(void) {
  uint32_t cap = S.site_cap ? S.site_cap * 2 : SITE_SLOTS_MIN;
  site_slot *ns = shim_zalloc(cap * sizeof *ns);
  if (!ns)
    return -1;
  for (uint32_t i = 0; i < S.site_cap; i++) {
    if (!S.sites[i].id)
      continue;
    uint32_t j = (uint32_t)S.sites[i].hash & (cap - 1);
    while (ns[j].id)
      j = (j + 1) & (cap - 1);
    ns[j] = S.sites[i];
  }
  shim_free(S.sites);
  S.sites = ns;
  S.site_cap = cap;
  return 0;
}

/* Site id of a stack, writing the site record the first time. */
static uint32_t site_id(const uint64_t *ips, uint32_t nips) {
  if (nips == 0)
    return 0;
  if ((S.nsites + 1) * 2 > S.site_cap && grow_sites() != 0)
    return 0;
  uint64_t h = XXH3_64bits(ips, nips * 8);
  uint32_t j = (uint32_t)h & (S.site_cap - 1);
  for (; S.sites[j].id; j = (j + 1) & (S.site_cap - 1)) {
    site_slot *s = &S.sites[j];
    if (s->hash == h && s->nips == nips && memcmp(s->ips, ips, nips * 8) == 0)
      return s->id;
  }
  site_slot *s = &S.sites[j];
  s->hash = h;
  s->nips = nips;
  memcpy(s->ips, ips, nips * 8);
  s->id = ++S.nsites;
  st_site site = {.id = s->id, .nframes = nips};
  for (uint32_t i = 0; i < nips; i++)
    resolve_frame(ips[i], &site.frames[i]);
  check(st_writer_add_site(S.w, &site));
  return s->id;
}

/* ---- message types ------------------------------------------------------- */

static int grow_types(void) {
  uint32_t cap = S.type_cap ? S.type_cap * 2 : TYPE_SLOTS_MIN;
  type_slot *nt = shim_zalloc(cap * sizeof *nt);
  if (!nt)
    return -1;
  for (uint32_t i = 0; i < S.type_cap; i++) {
    if (!S.types[i].id)
      continue;
    uint32_t j = (uint32_t)((uintptr_t)S.types[i].key >> 4) & (cap - 1);
    while (nt[j].id)
      j = (j + 1) & (cap - 1);
    nt[j] = S.types[i];
  }
  shim_free(S.types);
  S.types = nt;
  S.type_cap = cap;
  return 0;
}

static void write_type(type_slot *ts, int api) {
  st_type t = {.id = ts->id, .family = (uint8_t)st_api_family(api), .name = "?"};
  if (t.family == ST_FAMILY_PROTOBUF) {
    /* built at run time: captured on the calling thread, as the program
     * may have freed it since; generated (in an object's image): read here
     * (typecap.h) */
    const char *name = NULL;
    int built;
    if (rt_type_captured(ts->key, &name, &ts->schema, &ts->schema_len)) {
      built = ts->schema != NULL;
    } else {
      const ProtobufCMessageDescriptor *d = ts->key;
      name = d->name;
      built = pbw_schema_build(d, &ts->schema, &ts->schema_len) == PBW_OK;
    }
    t.name = name ? name : "?";
    ts->name_hash = pbw_name_hash(name);
    if (built) {
      t.schema = ts->schema;
      t.schema_len = (uint32_t)ts->schema_len;
      if (pbw_packed_plan_build(ts->schema, ts->schema_len, &ts->plan) == PBW_OK)
        rt_schema_ready(ts->key); /* pack hooks may leave fingerprints to us now */
      (void)pbw_stats_plan_build(ts->schema, ts->schema_len, &ts->stats);
    }
  } else if (t.family == ST_FAMILY_JPEG) {
    t.name = ts->key; /* JPEG hooks pass a static string naming the image class */
  }
  check(st_writer_add_type(S.w, &t));
}

static void free_types(void) {
  rt_schema_forget_all();
  forget_derived();
  for (uint32_t i = 0; i < S.type_cap; i++) {
    shim_free(S.types[i].schema); /* pbw_schema_allocator: the shim's heap */
    pbw_packed_plan_free(S.types[i].plan);
    pbw_stats_plan_free(S.types[i].stats);
  }
  shim_free(S.types);
  S.types = NULL;
  S.type_cap = 0;
}

/* Type ids keep counting: a type seen again gets a new id and record. */
void wr_forget_types(void) {
  free_types();
}

/* Slot of a request type (protobuf descriptor), writing the type once. */
static type_slot *type_of(int api, const void *key) {
  if (!key)
    return NULL;
  if ((S.ntypes + 1) * 2 > S.type_cap && grow_types() != 0)
    return 0;
  uint32_t j = (uint32_t)((uintptr_t)key >> 4) & (S.type_cap - 1);
  for (; S.types[j].id; j = (j + 1) & (S.type_cap - 1))
    if (S.types[j].key == key)
      return &S.types[j];
  S.types[j].key = key;
  S.types[j].id = ++S.ntypes;
  write_type(&S.types[j], api);
  return &S.types[j];
}

/* Derivations remembered by response blob: a blob id stands for its bytes
 * (the trace writer stores identical payloads once, by XXH3-128, as the
 * format does for every payload), and the result is a function of the
 * type's schema and the bytes alone, so a program that packs the same
 * message again costs no second derivation. Emptied with the file and the
 * types (ids start again). */
#define DERIVED_SLOTS 256
enum { DERIVED_PACK = 1, DERIVED_UNPACK = 2 }; /* what was derived from the bytes */
static struct {
  uint64_t blob;
  uint32_t type;
  uint8_t kind;
  int rc;
  uint8_t fp[16];
  pbw_stats st;
} derived[DERIVED_SLOTS];

static void forget_derived(void) {
  memset(derived, 0, sizeof derived);
}

static unsigned derived_slot(uint64_t blob) {
  return (unsigned)(blob * 0x9E3779B97F4A7C15ull >> 56) % DERIVED_SLOTS;
}

static int derived_hit(unsigned slot, uint64_t blob, const type_slot *ts, uint8_t kind) {
  return blob && derived[slot].blob == blob && derived[slot].type == ts->id &&
         derived[slot].kind == kind;
}

static void derived_put(unsigned slot, uint64_t blob, const type_slot *ts, uint8_t kind, int rc,
                        const uint8_t *fp, const pbw_stats *st) {
  if (!blob)
    return;
  derived[slot].blob = blob;
  derived[slot].type = ts->id;
  derived[slot].kind = kind;
  derived[slot].rc = rc;
  if (fp)
    memcpy(derived[slot].fp, fp, sizeof derived[slot].fp);
  derived[slot].st = *st;
}

/* Features of an unpack request, from its bytes (the hook saved no tree),
 * remembered by request blob like a pack's. */
static void unpack_features(st_call *c, const type_slot *ts, const void *req, uint64_t len) {
  pbw_stats st;
  int rc;
  if (!ts || !ts->stats || !req)
    return;
  unsigned slot = derived_slot(c->req_blob);
  if (derived_hit(slot, c->req_blob, ts, DERIVED_UNPACK)) {
    rc = derived[slot].rc;
    st = derived[slot].st;
  } else {
    rc = pbw_stats_from_bytes_plan(ts->stats, req, len, &st);
    derived_put(slot, c->req_blob, ts, DERIVED_UNPACK, rc, NULL, &st);
  }
  if (rc == PBW_OK)
    c->nfeat = rec_tree_features(c->feat, &st);
}

/* Fingerprint and features of a pack request whose hook left them to us
 * (raw_call.derive_fp): derived from the packed bytes it saved whole, they
 * are what its walk of the tree would have given, the outcome of a tree
 * nested too deep included (no fingerprint, statistics up to where the
 * walk stops). Bytes that do not derive (a hand-built tree whose unknown
 * fields pack wrote as something else, a type whose schema could not be
 * rebuilt after dlclose) leave the call without a fingerprint and flagged,
 * so replay runs it for real. */
static int pack_features(st_call *c, const type_slot *ts, const void *resp, uint64_t len,
                         int whole, uint8_t tree_fp[16]) {
  pbw_stats st = {0};
  int rc = PBW_E_BADSCHEMA;
  unsigned slot = derived_slot(c->resp_blob);
  if (ts && ts->plan && whole) {
    if (derived_hit(slot, c->resp_blob, ts, DERIVED_PACK)) {
      rc = derived[slot].rc;
      memcpy(c->fp, derived[slot].fp, sizeof c->fp);
      st = derived[slot].st;
    } else {
      rc = pbw_fingerprint_packed_plan(ts->plan, resp, len, c->fp, &st);
      derived_put(slot, c->resp_blob, ts, DERIVED_PACK, rc, c->fp, &st);
    }
  }
  if (rc != PBW_OK) {
    memset(c->fp, 0, sizeof c->fp);
    c->flags |= ST_CALL_NO_RESPONSE;
    c->reason = rc == PBW_E_DEPTH ? PB_REASON_DEPTH : PB_REASON_NOFP;
  }
  S.fp_derived += rc == PBW_OK || rc == PBW_E_DEPTH;
  S.fp_underived += rc != PBW_OK && rc != PBW_E_DEPTH;
  memcpy(tree_fp, c->fp, 16);
  shim_fp_bind(c->fp, c->api);
  c->nfeat = rec_tree_features(c->feat, &st);
  return rc;
}

/* ---- records ------------------------------------------------------------- */

static void announce_thread(rt_thread *t) {
  st_thread th = {.index = t->index, .os_tid = t->os_tid, .parent = t->parent, .name = t->name};
  check(st_writer_add_thread(S.w, &th));
  t->announced = 1;
}

/* A payload of a call: its bytes and, once hashed, their XXH3-128. */
typedef struct {
  const void *data;
  uint64_t len;
  uint64_t h[2];
  int has; /* carried in the record (not RT_PAY_NONE) */
} payload;

/* Hash a payload and start loading its dedup slot: the probe, a likely
 * cache miss on a table of every payload so far, then overlaps the rest of
 * the call's work. The hash is the fingerprint's too (unpack). */
static void payload_hash(payload *pl) {
  if (!pl->has)
    return;
  pbw_hash_bytes(pl->data, (size_t)pl->len, pl->h);
  st_writer_prefetch_blob(S.w, pl->h);
}

static uint64_t store_blob(const payload *pl) {
  uint64_t id = 0;
  if (!pl->has || (pl->len == 0 && pl->data == NULL))
    return 0;
  check(st_writer_add_blob_hashed(S.w, pl->data, pl->len, pl->h, &id));
  return id;
}

/* What the pack that follows a held get_packed_size (RT_DERIVE_FROM_NEXT)
 * gave it: rc PBW_OK (fp, the tree's before binding to an API, and the
 * pack's features), PBW_E_DEPTH (too deep: no fingerprint, the features up
 * to where the walk stops, as a walk of the size's tree gives), anything
 * else when nothing paired with it (written without a fingerprint, so
 * replay runs it for real). */
typedef struct {
  int rc;
  uint8_t fp[16];
  const st_call *pack;
} size_pair;

static void write_call(rt_thread *t, const raw_call *rc, const size_pair *pair);

static void hold_size(rt_thread *t, const raw_call *rc) {
  size_t n = sizeof *rc + ((size_t)rc->nfeat + rc->nips) * 8;
  _Static_assert(sizeof(raw_call) + (ST_MAX_FEAT + ST_MAX_FRAMES) * 8 <=
                     sizeof ((rt_thread *)0)->held,
                 "rt_thread.held holds a get_packed_size record");
  wr_flush_held(t); /* a size after a size: nothing paired with the first */
  memcpy(t->held, rc, n);
  t->has_held = 1;
}

void wr_flush_held(rt_thread *t) {
  if (!t->has_held)
    return;
  t->has_held = 0;
  if (S.failed || !S.w)
    return;
  size_pair none = {.rc = PBW_E_BADDATA};
  write_call(t, (const raw_call *)t->held, &none);
}

/* The payloads the call kept on the heap, written (or not): freed, and off
 * the program's backlog (rt.c backlog_wait). */
static void free_own_payloads(const raw_call *rc) {
  uint64_t n = 0;
  if (rc->req_kind == RT_PAY_OWN) {
    shim_free((void *)rc->req_ptr);
    n += rc->req_saved;
  }
  if (rc->resp_kind == RT_PAY_OWN) {
    shim_free((void *)rc->resp_ptr);
    n += rc->resp_saved;
  }
  if (n)
    rt_backlog_written(n);
}

static void write_call(rt_thread *t, const raw_call *rc, const size_pair *pair) {
  if (rc->derive_fp == RT_DERIVE_FROM_NEXT && !pair && rc->nfeat <= ST_MAX_FEAT &&
      rc->nips <= ST_MAX_FRAMES && rc->req_kind == RT_PAY_NONE && rc->resp_kind == RT_PAY_NONE) {
    hold_size(t, rc);
    return;
  }
  const uint8_t *p = (const uint8_t *)(rc + 1);
  st_call c = {0};
  c.api = rc->api;
  c.flags = rc->flags;
  c.reason = rc->reason;
  c.thread = rc->work_thread ? rc->work_thread - 1 : t->index;
  c.start_ns = rc->start_ns;
  c.latency_ns = corrected(rc);
  c.result = rc->result;
  memcpy(c.fp, rc->fp, 16);
  c.req_len = rc->req_len;
  c.resp_len = rc->resp_len;
  c.nfeat = rc->nfeat > ST_MAX_FEAT ? ST_MAX_FEAT : rc->nfeat;
  memcpy(c.feat, p, (size_t)c.nfeat * 8);
  p += (size_t)rc->nfeat * 8;
  uint64_t ips[ST_MAX_FRAMES];
  uint32_t nips = rc->nips > ST_MAX_FRAMES ? ST_MAX_FRAMES : rc->nips;
  memcpy(ips, p, nips * 8);
  p += (size_t)rc->nips * 8;
  const void *req = rc->req_kind == RT_PAY_OWN ? rc->req_ptr : p;
  if (rc->req_kind == RT_PAY_COPY)
    p += rc->req_saved;
  const void *resp = rc->resp_kind == RT_PAY_OWN ? rc->resp_ptr : p;
  payload rq = {req, rc->req_saved, {0, 0}, rc->req_kind != RT_PAY_NONE};
  payload rs = {resp, rc->resp_saved, {0, 0}, rc->resp_kind != RT_PAY_NONE};
  payload_hash(&rq);
  payload_hash(&rs);
  c.site = site_id(ips, nips);
  type_slot *ts = type_of(c.api, rc->type_key);
  c.type = ts ? ts->id : 0;
  c.req_blob = store_blob(&rq);
  c.resp_blob = store_blob(&rs);
  if (c.api == ST_API_PB_UNPACK && rq.has) /* after the blob: its id may spare the work */
    unpack_features(&c, ts, req, rc->req_saved);
  int pack_rc = PBW_E_BADDATA;
  uint8_t tree_fp[16] = {0};
  if (pair) { /* a held get_packed_size: what its pack gave */
    int given = pair->rc == PBW_OK || pair->rc == PBW_E_DEPTH; /* as a walk would */
    if (pair->rc == PBW_OK) {
      memcpy(c.fp, pair->fp, 16);
    } else { /* bound like any call without a fingerprint (pack_features) */
      memset(c.fp, 0, 16);
      c.flags |= ST_CALL_NO_RESPONSE;
      c.reason = pair->rc == PBW_E_DEPTH ? PB_REASON_DEPTH : PB_REASON_NOFP;
    }
    shim_fp_bind(c.fp, c.api);
    if (!given)
      rt_size_walk(rc->type_key); /* this type's sizes walk from now on */
    if (given && pair->pack) {
      c.nfeat = pair->pack->nfeat;
      memcpy(c.feat, pair->pack->feat, sizeof c.feat);
    }
    S.size_fp_paired += given;
    S.size_fp_unpaired += !given;
  } else if (rc->derive_fp && c.api == ST_API_PB_UNPACK) { /* the bytes were saved whole */
    if (ts) { /* by the type's name as written: the descriptor may be gone */
      pbw_fingerprint_named(ts->name_hash, rq.h, (size_t)rc->req_saved, c.fp);
      shim_fp_bind(c.fp, c.api);
    } else { /* no memory for the type: never answered */
      c.flags |= ST_CALL_NO_RESPONSE;
      c.reason = PB_REASON_NOFP;
    }
  } else if (rc->derive_fp) { /* after the blob: its id may spare the derivation */
    pack_rc = pack_features(&c, ts, resp, rc->resp_saved,
                            rc->resp_kind != RT_PAY_NONE && rc->resp_saved == rc->resp_len,
                            tree_fp);
  }
  if (t->has_held) { /* this record decides the held size's fingerprint; it goes first */
    const raw_call *h = (const raw_call *)t->held;
    size_pair sp = {.rc = PBW_E_BADDATA};
    if (rc->pairs_size && rc->derive_fp == RT_DERIVE_SELF && rc->type_key == h->type_key &&
        rc->resp_len == h->result && (pack_rc == PBW_OK || pack_rc == PBW_E_DEPTH)) {
      sp.rc = pack_rc;
      memcpy(sp.fp, tree_fp, 16);
      sp.pack = &c;
    }
    t->has_held = 0;
    write_call(t, h, &sp);
  }
  if (st_api_family(c.api) == ST_FAMILY_PROTOBUF) { /* this call's own, after the derivations */
    for (unsigned k = c.nfeat; k < ST_PBF_NFEAT; k++)
      c.feat[k] = 0;
    c.nfeat = c.nfeat > ST_PBF_NFEAT ? c.nfeat : ST_PBF_NFEAT;
    /* at most the latency as corrected (for the clock's reads) */
    c.feat[ST_PBF_FAULT_NS] = rc->fault_ns < c.latency_ns ? rc->fault_ns : c.latency_ns;
  } else if (st_api_family(c.api) == ST_FAMILY_JPEG && c.nfeat > ST_JPF_FAULT_NS &&
             c.feat[ST_JPF_FAULT_NS] > c.latency_ns) {
    /* the decode's, capped at its latency before the clock's read came off */
    c.feat[ST_JPF_FAULT_NS] = c.latency_ns;
  }
  c.seq = S.seq++;
  check(st_writer_add_call(S.w, &c));
  free_own_payloads(rc);
}

void wr_record(rt_thread *t, const ring_hdr *h) {
  if (S.failed || !S.w) {
    if (h->kind == RAW_CALL)
      free_own_payloads((const raw_call *)h);
    return;
  }
  if (!t->announced)
    announce_thread(t);
  if (h->kind == RAW_CALL) {
    write_call(t, (const raw_call *)h, NULL);
  } else if (h->kind == RAW_NOTE) {
    wr_flush_held(t);
    const char *k = (const char *)(h + 1);
    st_note n = {k, k + strlen(k) + 1};
    check(st_writer_add_note(S.w, &n));
  }
}

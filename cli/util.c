/* util.c — helpers shared by the subcommands: messages, finding the
 * runtime libraries, listing trace files, running the program. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "jpeg_req.h"
#include "json.h"

extern char **environ;

static void vsay(const char *prefix, const char *fmt, va_list ap) {
  fprintf(stderr, "standin: %s", prefix);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void cli_err(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsay("", fmt, ap);
  va_end(ap);
}

void cli_warn(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsay("warning: ", fmt, ap);
  va_end(ap);
}

int cli_self_exe(char *exe, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", exe, cap - 1);
  if (n > 0) {
    exe[n] = 0;
    return 0;
  }
  int e = errno;
  const char *fn = (const char *)getauxval(AT_EXECFN);
  char real[PATH_MAX];
  if (fn && strchr(fn, '/') && realpath(fn, real) && strlen(real) < cap) {
    strcpy(exe, real);
    return 0;
  }
  cli_err("cannot find my own path: /proc/self/exe: %s, and I was started as %s; mount /proc, "
          "or run standin by its path",
          strerror(e), fn ? fn : "(unknown)");
  return -1;
}

const char *cli_runtime_lib(const char *name) {
  static char path[PATH_MAX + 64];
  char exe[PATH_MAX];
  if (cli_self_exe(exe, sizeof exe) != 0)
    return NULL;
  char *slash = strrchr(exe, '/');
  *slash = 0;
  const char *rel[] = {"lib/standin", "../lib/standin"};
  for (int i = 0; i < 2; i++) {
    snprintf(path, sizeof path, "%s/%s/%s", exe, rel[i], name);
    if (access(path, R_OK) == 0)
      return path;
  }
  cli_err("runtime library %s not found in %s/lib/standin or %s/../lib/standin; "
          "rebuild with 'make' or reinstall",
          name, exe, exe);
  return NULL;
}

/* ---- trace directories --------------------------------------------------- */

/* The parts of a trace file's name (record/rt.c, rt_names): PID.trace,
 * PID.K.trace, PID-START.trace, PID-START.K.trace. */
static void trace_key(const char *name, unsigned long long k[3]) {
  char *e;
  k[0] = strtoull(name, &e, 10);
  k[1] = *e == '-' ? strtoull(e + 1, &e, 10) : 0;
  k[2] = *e == '.' ? strtoull(e + 1, NULL, 10) : 0;
}

/* By pid, then by process (the one that made PID.trace first, the others
 * by start time), then in the order the files were created (an exec's
 * image after the one before it) */
static int trace_cmp(const void *a, const void *b) {
  const char *x = strrchr(*(char *const *)a, '/') + 1, *y = strrchr(*(char *const *)b, '/') + 1;
  unsigned long long kx[3], ky[3];
  trace_key(x, kx);
  trace_key(y, ky);
  for (int i = 0; i < 3; i++)
    if (kx[i] != ky[i])
      return kx[i] < ky[i] ? -1 : 1;
  return strcmp(x, y);
}

static int is_trace_name(const char *s) {
  size_t n = strlen(s);
  return n > 6 && !strcmp(s + n - 6, ".trace") && s[0] >= '0' && s[0] <= '9';
}

int cli_trace_dir(const char *cmd, const char *trace, int argc, char **argv, const char **dir) {
  *dir = trace ? trace : optind < argc ? argv[optind++] : "standin.data";
  if (optind < argc) {
    if (trace)
      cli_err("%s: the recording is %s (-t); '%s' is extra", cmd, trace, argv[optind]);
    else
      cli_err("%s: one directory at a time ('%s' is extra)", cmd, argv[optind]);
    return -1;
  }
  return 0;
}

/* Whether path's last component is a trace's name (PID.trace). */
static int is_trace_file_name(const char *path) {
  const char *b = strrchr(path, '/');
  return is_trace_name(b ? b + 1 : path);
}

/* Length of path's directory part: of "/" for a file at the root, of
 * "." (1) for a bare name. */
static size_t dir_part_len(const char *path) {
  const char *b = strrchr(path, '/');
  return b ? (size_t)(b > path ? b - path : 1) : 1;
}

int cli_tracedir_open(cli_tracedir *td, const char *dir) {
  td->paths = NULL;
  td->n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT && !strcmp(dir, "standin.data")) /* the default: -t forgotten? */
      cli_err("%s: no such recording directory (the default); give the recording with -t DIR, "
              "or record one with 'standin record -- PROGRAM'",
              dir);
    else if (errno == ENOENT)
      cli_err("%s: no such recording directory; record one with 'standin record -o %s -- "
              "PROGRAM'",
              dir, dir);
    else if (errno == ENOTDIR && is_trace_file_name(dir))
      cli_err("%s is one process's trace; give the recording, the directory that holds it "
              "(%.*s)",
              dir, (int)dir_part_len(dir), strchr(dir, '/') ? dir : ".");
    else if (errno == ENOTDIR)
      cli_err("%s is a file, not a recording; give the directory 'standin record -o DIR' wrote",
              dir);
    else
      cli_err("cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  size_t cap = 0;
  struct dirent *e;
  static int said, said_name; /* commands list a directory more than once */
  while ((e = readdir(d)) != NULL) {
    if (!is_trace_name(e->d_name)) {
      size_t n = strlen(e->d_name);
      /* a trace renamed by hand (cut.trace): read by nothing, said once */
      if (n > 6 && !strcmp(e->d_name + n - 6, ".trace") && !said_name++)
        cli_warn("%s/%s is not read: the recorder names its traces PID.trace; give it a name "
                 "that starts with a digit to read it with the others",
                 dir, e->d_name);
      continue;
    }
    /* only regular files, not links followed: a directory, FIFO, socket or
     * link in a trace's place was counted as a recorded process, and a
     * FIFO blocked its readers */
    unsigned char t = e->d_type;
    if (t == DT_UNKNOWN) {
      char p[PATH_MAX];
      struct stat st;
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      t = lstat(p, &st) == 0 && S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (t != DT_REG) {
      if (!said++)
        cli_warn("%s/%s is not a regular file (a directory, FIFO, socket or link in a trace's "
                 "place): left out",
                 dir, e->d_name);
      continue;
    }
    if (td->n == cap) {
      cap = cap ? cap * 2 : 16;
      char **np = realloc(td->paths, cap * sizeof *np);
      if (!np)
        break;
      td->paths = np;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    char *p = malloc(len);
    if (!p)
      break;
    snprintf(p, len, "%s/%s", dir, e->d_name);
    td->paths[td->n++] = p;
  }
  closedir(d);
  if (td->n)
    qsort(td->paths, td->n, sizeof *td->paths, trace_cmp);
  return 0;
}

void cli_tracedir_free(cli_tracedir *td) {
  for (size_t i = 0; i < td->n; i++)
    free(td->paths[i]);
  free(td->paths);
  td->paths = NULL;
  td->n = 0;
}

size_t cli_unrecorded(const char *dir, char *pid, size_t pcap, char *why, size_t wcap) {
  return cli_notes(dir, ".unrecorded", pid, pcap, why, wcap);
}

int cli_is_note(const char *name, const char *ext) {
  size_t len = strlen(name), el = strlen(ext);
  return len > el && !strcmp(name + len - el, ext) && name[0] >= '0' && name[0] <= '9';
}

int cli_note_fd_limit(const char *why) {
  return !strcmp(why, strerror(EMFILE)) || !strcmp(why, strerror(ENFILE));
}

size_t cli_notes(const char *dir, const char *ext, char *pid, size_t pcap, char *why, size_t wcap) {
  size_t n = 0, el = strlen(ext);
  DIR *d = opendir(dir);
  struct dirent *e;
  if (pcap)
    pid[0] = 0;
  if (wcap)
    why[0] = 0;
  while (d && (e = readdir(d)) != NULL) {
    if (!cli_is_note(e->d_name, ext))
      continue;
    size_t len = strlen(e->d_name);
    if (n++ == 0) {
      char p[PATH_MAX];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      ssize_t w = wcap ? readlink(p, why, wcap - 1) : -1;
      if (w >= 0)
        why[w] = 0;
      snprintf(pid, pcap, "%.*s", (int)(len - el), e->d_name);
    }
  }
  if (d)
    closedir(d);
  return n;
}

void cli_warn_unrecorded(const char *dir) {
  static int said;
  char pid[64], why[256];
  size_t n;
  if (said || (n = cli_unrecorded(dir, pid, sizeof pid, why, sizeof why)) == 0)
    return;
  said = 1;
  cli_warn("%s lacks the calls of %zu process%s (pid %s%s): %s trace could not be created when "
           "recorded (%s); what follows leaves them out ('standin info %s' says more)",
           dir, n, n == 1 ? "" : "es", pid, n == 1 ? "" : ", ...",
           n == 1 ? "its" : "the first one's", why, dir);
}

/* The recording's lock: an flock on the directory itself, held by `standin
 * record` for its whole run (the descriptor is close-on-exec: the program
 * does not hold it). */
int cli_recording_lock(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    cli_err("cannot open recording directory %s: %s", dir, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      cli_err("%s is being recorded into by another 'standin record' that is still running; "
              "wait for it to end, or record into another directory with -o",
              dir);
    else
      cli_err("cannot lock recording directory %s: %s", dir, strerror(errno));
    close(fd);
    return -1;
  }
  return 0; /* kept open, and locked, until standin exits */
}

int cli_recording_busy(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  int busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  close(fd);
  return busy;
}

/* The first few subdirectories of dir that are recordings (a run.info in
 * them), comma-separated in buf: a folder of recordings given for one. */
static size_t sub_recordings(const char *dir, char *buf, size_t cap) {
  DIR *d = opendir(dir);
  size_t n = 0, o = 0;
  buf[0] = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char p[PATH_MAX];
    struct stat st;
    if (e->d_name[0] == '.' ||
        snprintf(p, sizeof p, "%s/%s/run.info", dir, e->d_name) >= (int)sizeof p ||
        stat(p, &st) != 0)
      continue;
    if (n++ < 3 && o < cap)
      o += (size_t)snprintf(buf + o, cap - o, "%s%s/%s", n > 1 ? ", " : "", dir, e->d_name);
  }
  if (d)
    closedir(d);
  if (n > 3 && o < cap)
    snprintf(buf + o, cap - o, ", ...");
  return n;
}

static void no_trace(const char *dir, const char *what, void (*say)(const char *, ...),
                     const char *lead) {
  char subs[1024], upid[64], why[256];
  cli_tracedir td = {0};
  size_t empty = 0, unreadable = 0, newer = 0, n = 0;
  struct stat st;
  if (cli_tracedir_open(&td, dir) == 0) {
    for (size_t i = 0; i < td.n; i++) {
      st_reader *r;
      int rc = st_reader_open(&r, td.paths[i]);
      if (rc == ST_OK)
        st_reader_close(r);
      else if (rc == ST_E_TRUNCATED || (stat(td.paths[i], &st) == 0 && st.st_size == 0))
        empty++; /* cut inside its header: killed while creating it */
      else {
        unreadable++;
        newer += rc == ST_E_VERSION;
      }
    }
    n = td.n;
    cli_tracedir_free(&td);
  }
  if (empty && empty == n) /* not a program without calls: a recorder stopped at once */
    say("%s: %s %s: its %zu trace file%s %s empty, as a recorder killed while creating it "
        "leaves one ('standin info %s' says more)",
        dir, lead, what, n, n == 1 ? "" : "s", n == 1 ? "is" : "are", dir);
  else if (unreadable && unreadable + empty == n) /* not a program without calls either */
    say("%s: %s %s: %s %zu trace file%s be read (said above); %s", dir, lead, what,
        n == 1 ? "its" : "none of its", n, n == 1 ? " cannot" : "s can",
        !newer   ? "record the program again"
        : n == 1 ? "a newer standin wrote it: upgrade standin to read it"
                 : "a newer standin wrote them: upgrade standin to read them");
  else if (n == 0 && cli_recording_busy(dir))
    say("%s: %s %s yet: a 'standin record' is still running there, and no process of it has "
        "made an intercepted call so far",
        dir, lead, what);
  else if (cli_unrecorded(dir, upid, sizeof upid, why, sizeof why))
    say("%s: %s %s: the program's calls were not recorded: pid %s could not create its trace "
        "(%s); record it again ('standin info %s' says more)",
        dir, lead, what, upid, why, dir);
  else if (cli_runinfo_get(dir, "command"))
    say("%s: %s %s: the program recorded there made no protobuf-c or JPEG call that standin "
        "intercepts ('standin info %s' says more)",
        dir, lead, what, dir);
  else if (sub_recordings(dir, subs, sizeof subs))
    say("%s holds no trace itself, but recordings in it do: %s; give one of them", dir, subs);
  else
    say("%s holds no trace; record one with 'standin record -o %s -- PROGRAM'", dir, dir);
}

void cli_err_no_trace(const char *dir, const char *what) {
  no_trace(dir, what, cli_err, "nothing to");
}

void cli_warn_no_trace(const char *dir, const char *what) {
  no_trace(dir, what, cli_warn, "no calls to");
}

int cli_reader_open(st_reader **r, const char *path) {
  int rc = st_reader_open(r, path);
  if (rc == ST_OK)
    return 0;
  /* ten such lines say it: 10,000 empty traces printed 10,000 */
  static unsigned said;
  if (++said > 10) {
    if (said == 11)
      cli_err("(more traces that cannot be read: not listed)");
    return -1;
  }
  if (rc == ST_E_IO && errno == ENODEV)
    cli_err("cannot read %s: not a regular file (a FIFO, device or socket in a trace's place); "
            "a recording holds regular files only",
            path);
  else if (rc == ST_E_IO)
    cli_err("cannot read %s: %s", path, strerror(errno));
  else if (rc == ST_E_TRUNCATED) /* inside its header: as info says it */
    cli_warn("%s: not closed (killed while creating the file): no calls", path);
  else
    cli_err("%s: %s", path, st_strerror(rc));
  return -1;
}

FILE *cli_fopen_regular(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO would block here */
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    errno = ENODEV;
    return NULL;
  }
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f && fd >= 0)
    close(fd);
  return f;
}

const char *cli_runinfo_get(const char *dir, const char *key) {
  static char line[4096];
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/run.info", dir);
  FILE *f = cli_fopen_regular(path);
  if (!f)
    return NULL;
  size_t kl = strlen(key);
  /* The keys after the command line are written after it: their last
   * line is theirs. A recording made before the command line was one line
   * holds an argument's own lines there (a shell script's "wall_ns=..."
   * or "status=..." line), which were read for the run's. */
  int last = strcmp(key, "tool") && strcmp(key, "command");
  static char keep[sizeof line];
  const char *found = NULL;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, key, kl) && line[kl] == '=') {
      line[strcspn(line, "\n")] = 0;
      snprintf(keep, sizeof keep, "%s", line + kl + 1);
      found = keep;
      if (!last)
        break;
    }
  }
  fclose(f);
  return found;
}

uint64_t cli_launcher_pidns(const char *dir) {
  static char cached[PATH_MAX];
  static uint64_t ns;
  if (strcmp(cached, dir) != 0) {
    const char *v = cli_runinfo_get(dir, "launcher_pidns"); /* since 2026-11-28 */
    ns = v ? strtoull(v, NULL, 10) : 0;
    snprintf(cached, sizeof cached, "%s", dir);
  }
  return ns;
}

uint32_t cli_procs_nth(cli_procs *t, uint32_t pid, uint64_t pidns, uint64_t start_ticks) {
  if (start_ticks == 0)
    return 1;
  uint32_t same_pid = 0;
  for (size_t i = 0; i < t->n; i++) {
    const struct cli_proc *p = &t->v[i];
    if (p->pid != pid)
      continue;
    if (p->pidns == pidns && p->start == start_ticks)
      return p->nth;
    same_pid++;
  }
  if (t->n == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    struct cli_proc *v = realloc(t->v, cap * sizeof *v);
    if (!v)
      return same_pid + 1;
    t->v = v;
    t->cap = cap;
  }
  t->v[t->n++] = (struct cli_proc){pid, same_pid + 1, pidns, start_ticks};
  return same_pid + 1;
}

void cli_procs_free(cli_procs *t) {
  free(t->v);
  memset(t, 0, sizeof *t);
}

const char *cli_nth_note(uint32_t nth, char *buf, size_t cap) {
  if (nth <= 1)
    return "";
  snprintf(buf, cap, " #%u", nth);
  return buf;
}

int cli_pidns_other(uint64_t launcher, uint64_t pidns) {
  return launcher && pidns && pidns != launcher;
}

const char *cli_pidns_name(uint64_t pidns, char *buf, size_t cap) {
  if (!pidns)
    return "";
  snprintf(buf, cap, " in pid:[%llu]", (unsigned long long)pidns);
  return buf;
}

const char *cli_pidns_note(uint64_t launcher, uint64_t pidns, char *buf, size_t cap) {
  return cli_pidns_other(launcher, pidns) ? cli_pidns_name(pidns, buf, cap) : "";
}

/* ---- formatting ---------------------------------------------------------- */

static int u64_cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

uint64_t cli_median_u64(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, u64_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

char *cli_fmt_ns(char *buf, size_t cap, double ns) {
  if (ns < 1e3)
    snprintf(buf, cap, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, cap, "%.2f us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, cap, "%.2f ms", ns / 1e6);
  else
    snprintf(buf, cap, "%.3f s", ns / 1e9);
  return buf;
}

char *cli_fmt_bytes(char *buf, size_t cap, double b) {
  if (b < 1024)
    snprintf(buf, cap, "%.0f B", b);
  else if (b < 1024.0 * 1024)
    snprintf(buf, cap, "%.1f KiB", b / 1024);
  else if (b < 1024.0 * 1024 * 1024)
    snprintf(buf, cap, "%.1f MiB", b / 1024 / 1024);
  else
    snprintf(buf, cap, "%.2f GiB", b / 1024 / 1024 / 1024);
  return buf;
}

char *cli_fmt_side(char *buf, size_t cap, unsigned is_bytes, uint64_t bytes) {
  if (!is_bytes) {
    snprintf(buf, cap, "-");
    return buf;
  }
  return cli_fmt_bytes(buf, cap, (double)bytes);
}

char *cli_fmt_count(char *buf, size_t cap, uint64_t n) {
  char tmp[32];
  int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)n);
  size_t o = 0;
  for (int i = 0; i < len && o + 2 < cap; i++) {
    buf[o++] = tmp[i];
    if ((len - i - 1) % 3 == 0 && i != len - 1)
      buf[o++] = ',';
  }
  buf[o] = 0;
  return buf;
}

/* ---- running the program ------------------------------------------------- */

int cli_find_program(const char *prog, char *out, size_t cap) {
  if (strchr(prog, '/')) {
    if (access(prog, F_OK) != 0)
      return -1;
    snprintf(out, cap, "%s", prog);
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path || !*path)
    path = "/usr/local/bin:/usr/bin:/bin";
  const char *p = path;
  while (*p) {
    size_t n = strcspn(p, ":");
    snprintf(out, cap, "%.*s/%s", (int)n, n ? p : ".", prog);
    struct stat st;
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return 0;
    p += n + (p[n] == ':');
  }
  errno = ENOENT;
  return -1;
}

static uint64_t ts_ns(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* CLOCK_MONOTONIC from the kernel itself: a library preloaded into standin
 * (faketime) cannot change it. */
static uint64_t kernel_mono_ns(void) {
  struct timespec ts;
  if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0)
    return 0;
  return ts_ns(&ts);
}

/* Whether libc's clock_gettime reads the kernel's CLOCK_MONOTONIC (through
 * the vDSO, much faster than a system call). A faked one (libfaketime
 * preloaded into standin, frozen or scaled) made the TSC calibration fail,
 * the shims time with the fake clock, every recorded latency 0 ns or ten
 * times too long, and a replay spin forever. Decided once. */
static int libc_clock_true(void) {
  static int ok = -1;
  if (ok < 0) {
    struct timespec ts;
    uint64_t a = kernel_mono_ns();
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t b = ts_ns(&ts), c = kernel_mono_ns();
    ok = a && b >= a && b <= c;
  }
  return ok;
}

uint64_t cli_mono_ns(void) {
  if (libc_clock_true()) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts_ns(&ts);
  }
  return kernel_mono_ns();
}

/* A TSC reading and the CLOCK_MONOTONIC time at its midpoint, from the
 * tightest-bracketed of eight tries. */
static void tsc_mono_pair(uint64_t *tsc, uint64_t *mono) {
  uint64_t best = UINT64_MAX;
  *tsc = *mono = 0;
  for (int i = 0; i < 8; i++) {
    uint64_t a = __builtin_ia32_rdtsc();
    uint64_t m = cli_mono_ns();
    uint64_t b = __builtin_ia32_rdtsc();
    if (b - a < best) {
      best = b - a;
      *tsc = a + (b - a) / 2;
      *mono = m;
    }
  }
}

/* The TSC rate is fixed for a boot, so the first calibration of a boot is
 * kept in a small cache file (cli.h: cli_tsc_cache_path), and later runs
 * measure the rate from that pair to now instead of sleeping 2 ms, which
 * every `standin record` and `replay` otherwise paid before the program
 * started (4.3 ms in all for record of /bin/true, against 1.7 ms with the
 * shim preloaded by hand). The interval is then seconds to days, so the
 * rate is better, not worse; a rate that disagrees with the cached one by
 * more than 0.1% (a new TSC, a moved VM) means calibrating afresh. */
#define TSC_CACHE_MAGIC "standin-tsc-1"
#define TSC_CACHE_MIN_NS 20000000ull /* shorter: use the cached rate itself */

int cli_tsc_cache_path(char *buf, size_t len) {
  const char *over = getenv("STANDIN_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n;
  if (over && *over)
    n = snprintf(buf, len, "%s/tsc", over);
  else if (xdg && *xdg == '/')
    n = snprintf(buf, len, "%s/standin/tsc", xdg);
  else if (home && *home == '/')
    n = snprintf(buf, len, "%s/.cache/standin/tsc", home);
  else
    return -1;
  return n > 0 && (size_t)n < len ? 0 : -1;
}

static int boot_id(char *buf, size_t len) {
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f)
    return -1;
  int ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok)
    return -1;
  buf[strcspn(buf, " \n")] = 0;
  return *buf ? 0 : -1;
}

/* The cached pair and rate of this boot, or -1. */
static int tsc_cache_read(const char *path, const char *boot, uint64_t *t, uint64_t *m,
                          uint64_t *mult) {
  FILE *f = cli_fopen_regular(path); /* a FIFO there blocked record before the program */
  if (!f)
    return -1;
  char magic[32], id[64];
  unsigned long long a, b, c;
  int n = fscanf(f, "%31s %63s %llu %llu %llu", magic, id, &a, &b, &c);
  fclose(f);
  if (n != 5 || strcmp(magic, TSC_CACHE_MAGIC) || strcmp(id, boot) || !c)
    return -1;
  *t = a;
  *m = b;
  *mult = c;
  return 0;
}

/* Best effort: a cache that cannot be written only costs the next run 2 ms. */
static void tsc_cache_write(const char *path, const char *boot, uint64_t t, uint64_t m,
                            uint64_t mult) {
  char dir[PATH_MAX], tmp[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", path);
  /* the cache's own directories, two at most (.cache/standin): a missing
   * $HOME is not made (HOME=/nonexistent made /nonexistent as root) */
  char *slash = strrchr(dir, '/'), *up = NULL;
  if (slash && slash != dir) {
    *slash = 0;
    up = strrchr(dir, '/');
    if (up && up != dir) {
      *up = 0;
      mkdir(dir, 0700);
      *up = '/';
    }
    mkdir(dir, 0700);
  }
  snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0)
      close(fd), unlink(tmp);
    return;
  }
  int ok = fprintf(f, "%s %s %llu %llu %llu\n", TSC_CACHE_MAGIC, boot, (unsigned long long)t,
                   (unsigned long long)m, (unsigned long long)mult) > 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0)
    unlink(tmp);
}

static uint64_t rate_of(uint64_t t1, uint64_t m1, uint64_t t2, uint64_t m2) {
  return (uint64_t)(((unsigned __int128)(m2 - m1) << 32) / (t2 - t1));
}

int cli_tsc_calibrate(uint64_t *base, uint64_t *mono, uint64_t *mult) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  static char line[4096]; /* the CLI is one thread; its stack may be small (ulimit -s) */
  int constant = 0, nonstop = 0;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "flags", 5)) {
      constant = strstr(line, " constant_tsc") != NULL;
      nonstop = strstr(line, " nonstop_tsc") != NULL;
      break;
    }
  if (f)
    fclose(f);
  if (!constant || !nonstop)
    return -1;
  char path[PATH_MAX], boot[64];
  int cache = cli_tsc_cache_path(path, sizeof path) == 0 && boot_id(boot, sizeof boot) == 0;
  uint64_t t1, m1, t2, m2, k;
  tsc_mono_pair(&t2, &m2);
  if (cache && tsc_cache_read(path, boot, &t1, &m1, &k) == 0 && t2 > t1 && m2 > m1) {
    uint64_t r = m2 - m1 >= TSC_CACHE_MIN_NS ? rate_of(t1, m1, t2, m2) : k;
    if (r >= k - k / 1000 && r <= k + k / 1000) {
      *mult = r;
      *base = t2;
      *mono = m2;
      return 0;
    }
  }
  /* Two (TSC, CLOCK_MONOTONIC) pairs 2 ms apart, each the tightest of a
   * few tries: the pair is off by at most half its bracket (~15 ns), so the
   * rate is good to ~1e-5. A 20 ms sleep was a fixed cost on every record
   * and replay that a short program's wall time then included. */
  t1 = t2;
  m1 = m2;
  struct timespec nap = {0, 2000000};
  nanosleep(&nap, NULL);
  tsc_mono_pair(&t2, &m2);
  *mult = rate_of(t1, m1, t2, m2);
  *base = t2;
  *mono = m2;
  if (cache)
    tsc_cache_write(path, boot, t1, m1, *mult);
  return 0;
}

static volatile pid_t child_pid;

/* A parent that signals standin's whole process group, the program in it
 * too: coreutils' timeout (unless --foreground) leads the group it runs
 * standin in and sends its signal to standin, then to the group. Passed
 * on as well, the program got two (gst-launch stops gracefully on the
 * first SIGINT and dies on the second). 0: none known. A group signal
 * from anyone else (kill -- -PGID) cannot be told from one sent to
 * standin alone, and reaches the program twice (docs/GUARANTEES.md). */
static pid_t group_sender;

static pid_t find_group_sender(void) {
  pid_t pp = getppid();
  char path[64], comm[32] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pp);
  FILE *f = pp > 1 && getpgrp() == pp ? fopen(path, "re") : NULL;
  if (f) {
    if (!fgets(comm, sizeof comm, f))
      comm[0] = 0;
    fclose(f);
  }
  return !strcmp(comm, "timeout\n") ? pp : 0;
}

/* Whether the program has this signal already: sent by kill(2) from the
 * parent that signals the whole group. */
static int sent_to_group(const siginfo_t *si) {
  return si && si->si_code <= 0 && group_sender > 0 && si->si_pid == group_sender;
}

static void forward(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (child_pid > 0 && !sent_to_group(si))
    kill(child_pid, sig);
}

/* SIGTSTP sent to standin: the program stops too, then standin, as it
 * would have by default (a terminal's Ctrl-Z reaches both anyway). */
static void forward_stop(int sig) {
  int e = errno;
  if (child_pid > 0)
    kill(child_pid, sig);
  raise(SIGSTOP);
  errno = e;
}

/* Signals standin passes on while the program runs: those a supervisor or
 * a script sends to the pid it started (stop, reload, reopen logs,
 * timeouts). Default-fatal ones (USR1, USR2, ALRM) had ended standin and
 * left the program running, recording, with no parent. */
static const int passed_on[] = {SIGINT,  SIGQUIT, SIGTERM, SIGHUP, SIGUSR1,
                                SIGUSR2, SIGALRM, SIGTSTP, SIGCONT};
#define NPASSED (int)(sizeof passed_on / sizeof *passed_on)

/* SIGINT and SIGQUIT: the terminal sends them to the whole foreground
 * process group, the program included, so one from it (si_code > 0) is left
 * to the program alone: forwarded, a program that stops gracefully on the
 * first Ctrl-C and at once on the second would see two. One sent to
 * standin by kill(2) or sigqueue (a script stopping a recorded server) is
 * passed on, and the program decides, as if it had been sent to it. */
static void forward_sent(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  if (si && si->si_code <= 0 && child_pid > 0 && !sent_to_group(si))
    kill(child_pid, sig);
}

static uint64_t mono_ns(void) {
  return cli_mono_ns();
}

/* environ with extra_env's NAME=value entries replacing or added to it;
 * the strings are shared, only the array is allocated. */
static char **merged_env(char *const extra_env[]) {
  size_t n = 0, k = 0;
  while (environ && environ[n])
    n++;
  while (extra_env && extra_env[k])
    k++;
  char **env = calloc(n + k + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t j = 0; j < k && !replaced; j++) {
      const char *eq = strchr(extra_env[j], '=');
      size_t len = eq ? (size_t)(eq - extra_env[j]) + 1 : strlen(extra_env[j]);
      replaced = strncmp(environ[i], extra_env[j], len) == 0;
    }
    if (!replaced)
      env[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++)
    env[m++] = extra_env[j];
  return env;
}

/* SIGPIPE and SIGXFSZ as standin was started with: each program gets them
 * so. record, replay and sweep ignore them (the offline commands die of
 * SIGPIPE as other tools do: `standin export | head`): its last words go to a stderr that may
 * be a pipe the reader closed (`standin replay ... 2>&1 | head`), and dying
 * of it lost the --summary file and the program's exit status; under
 * `ulimit -f` the replay database's first write past the limit killed
 * standin before the program ever ran. Ignored, a write fails with EPIPE or
 * EFBIG, said like any other. */
static const int calm[] = {SIGPIPE, SIGXFSZ};
#define NCALM (sizeof calm / sizeof calm[0])
static struct sigaction calm_given[NCALM];
static int calm_saved;

char *cli_escape_ctl(char *buf, size_t cap, const char *s) {
  size_t o = 0;
  if (!cap)
    return buf;
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[8];
    int n = c >= 0x20 && c != 0x7f ? snprintf(e, sizeof e, "%c", c)
            : c == '\n'            ? snprintf(e, sizeof e, "\\n")
            : c == '\t'            ? snprintf(e, sizeof e, "\\t")
            : c == '\r'            ? snprintf(e, sizeof e, "\\r")
                                   : snprintf(e, sizeof e, "\\x%02x", c);
    if (o + (size_t)n >= cap)
      break;
    memcpy(buf + o, e, (size_t)n);
    o += (size_t)n;
  }
  buf[o] = 0;
  return buf;
}

char *cli_shell_word(char *buf, size_t cap, const char *s) {
  if (!cap)
    return buf;
  int plain = *s != 0, ctl = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p < 0x20 || *p == 0x7f)
      ctl = 1;
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          strchr("_@%+=:,./-", *p) || *p >= 0x80))
      plain = 0;
  }
  if (plain) {
    snprintf(buf, cap, "%s", s);
    return buf;
  }
  /* room for the closing quote is kept all along */
  size_t o = 0;
  const char *open = ctl ? "$'" : "'";
  if (cap < strlen(open) + 2) {
    buf[0] = 0;
    return buf;
  }
  memcpy(buf, open, strlen(open));
  o = strlen(open);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    char e[8];
    int n;
    if (!ctl)
      n = c == '\'' ? snprintf(e, sizeof e, "'\\''") : snprintf(e, sizeof e, "%c", c);
    else if (c == '\'' || c == '\\')
      n = snprintf(e, sizeof e, "\\%c", c);
    else if (c >= 0x20 && c != 0x7f)
      n = snprintf(e, sizeof e, "%c", c);
    else {
      char one[2] = {(char)c, 0};
      cli_escape_ctl(e, sizeof e, one);
      n = (int)strlen(e);
    }
    if (o + (size_t)n + 2 > cap)
      break;
    memcpy(buf + o, e, (size_t)n);
    o += (size_t)n;
  }
  buf[o++] = '\'';
  buf[o] = 0;
  return buf;
}

void cli_put_shell_word(FILE *f, const char *s) {
  size_t cap = 4 * strlen(s) + 4; /* every byte escaped, quotes and NUL */
  char *w = malloc(cap);
  fputs(w ? cli_shell_word(w, cap, s) : "?", f);
  free(w);
}

char *cli_fit(char *s, int w) {
  int n = (int)strlen(s);
  if (n > w && w > 9) {
    int head = (w - 3) / 2, tail = w - 3 - head;
    memmove(s + head + 3, s + n - tail, (size_t)tail + 1);
    memcpy(s + head, "...", 3);
  }
  return s;
}

void cli_calm_signals(void) {
  struct sigaction ign = {.sa_handler = SIG_IGN};
  for (size_t i = 0; i < NCALM; i++)
    sigaction(calm[i], &ign, calm_saved ? NULL : &calm_given[i]);
  calm_saved = 1;
}

void cli_signals_as_given(void) {
  for (size_t i = 0; calm_saved && i < NCALM; i++)
    sigaction(calm[i], &calm_given[i], NULL);
}

/* ---- waiting for a CPU ------------------------------------------------------
 *
 * /proc/PID/schedstat gives a task's time on a CPU and its time runnable
 * but waiting for one (the scheduler's run_delay, in ns). Read for the
 * program's first process as it ends (a zombie not yet reaped), it says
 * whether its main thread had a CPU whenever it could run: other
 * processes, or more runnable threads than CPUs, make it wait, and times
 * taken then are not the program's own. Other threads and processes are
 * not seen (gone by then): a program whose work is elsewhere reads low. */
static uint64_t last_wait_ns, last_oncpu_ns;
static int last_wait_known;

static int read_schedstat(pid_t pid, uint64_t *oncpu, uint64_t *wait) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%ld/schedstat", (long)pid);
  FILE *f = fopen(p, "re");
  if (!f)
    return -1;
  unsigned long long a, b;
  int ok = fscanf(f, "%llu %llu", &a, &b) == 2;
  fclose(f);
  if (!ok)
    return -1;
  *oncpu = a;
  *wait = b;
  return 0;
}

uint32_t cli_cpus_here(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return (uint32_t)CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint32_t)n : 1;
}

int cli_run_cpu_wait(uint64_t *wait_ns, uint64_t *oncpu_ns) {
  if (!last_wait_known)
    return -1;
  *wait_ns = last_wait_ns;
  *oncpu_ns = last_oncpu_ns;
  return 0;
}

void cli_json_cpu_wait(FILE *f) {
  uint64_t w, c;
  if (cli_run_cpu_wait(&w, &c) == 0)
    fprintf(f, "  \"main_thread_cpu_wait_ns\": %llu,\n  \"main_thread_cpu_ns\": %llu,\n",
            (unsigned long long)w, (unsigned long long)c);
  else
    fprintf(f, "  \"main_thread_cpu_wait_ns\": null,\n  \"main_thread_cpu_ns\": null,\n");
}

int cli_cpu_wait_matters(uint64_t wait_ns, uint64_t oncpu_ns) {
  return wait_ns >= 2000000 && wait_ns * 10 >= wait_ns + oncpu_ns;
}

int cli_cpu_wait_say(char *buf, size_t cap, uint64_t wait_ns, uint64_t oncpu_ns, uint32_t cpus) {
  const char *quiet = getenv("STANDIN_QUIET_WAITS"); /* docs/INTERNALS.md */
  if (!cli_cpu_wait_matters(wait_ns, oncpu_ns) || (quiet && *quiet && strcmp(quiet, "0") != 0)) {
    if (cap)
      buf[0] = 0;
    return 0;
  }
  char t[32], r[32], n[48] = "CPUs";
  if (cpus == 1)
    snprintf(n, sizeof n, "the one CPU it had");
  else if (cpus)
    snprintf(n, sizeof n, "the %u CPUs it had", cpus);
  snprintf(buf, cap,
           "the program's main thread waited for a CPU %.0f%% of the time it could run (%s of "
           "%s): other processes, or more runnable threads than %s",
           100.0 * (double)wait_ns / (double)(wait_ns + oncpu_ns),
           cli_fmt_ns(t, sizeof t, (double)wait_ns),
           cli_fmt_ns(r, sizeof r, (double)(wait_ns + oncpu_ns)), n);
  return 1;
}

int cli_run_cpu_wait_said(char *buf, size_t cap) {
  uint64_t wait, oncpu;
  if (cli_run_cpu_wait(&wait, &oncpu) != 0) {
    if (cap)
      buf[0] = 0;
    return 0;
  }
  return cli_cpu_wait_say(buf, cap, wait, oncpu, cli_cpus_here());
}

int cli_cpu_wait_of_summary(const struct json *doc, char *buf, size_t cap) {
  const json *w = json_get(doc, "main_thread_cpu_wait_ns"),
             *c = json_get(doc, "main_thread_cpu_ns");
  uint64_t wait, oncpu;
  if (!w || !c || json_count(w, &wait) != 0 || json_count(c, &oncpu) != 0) {
    if (cap)
      buf[0] = 0;
    return 0; /* a summary from before 2026-12-01, or without scheduler statistics */
  }
  return cli_cpu_wait_say(buf, cap, wait, oncpu, 0);
}

/* The program is started with posix_spawn (a vfork, not a fork): the
 * launcher may hold hundreds of MiB (the replay database it just built),
 * and copying its page tables into a child that execs at once took
 * milliseconds that the measured wall time then included. */
static int run(char *const argv[], char *const extra_env[], uint64_t *wall_ns, int quiet,
               const int (*pass)[2], int npass) {
  fflush(NULL);
  char **env = merged_env(extra_env);
  if (!env) {
    cli_err("cannot start %s: out of memory", argv[0]);
    return EXIT_NOEXEC;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  struct stat in;
  int again = -1; /* standard input, a regular file, opened anew: from its start */
  if (quiet == 2 && fstat(0, &in) == 0 && S_ISREG(in.st_mode))
    again = open("/proc/self/fd/0", O_RDONLY | O_CLOEXEC);
  if (again >= 0)
    posix_spawn_file_actions_adddup2(&fa, again, 0);
  else if (quiet)
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (quiet) {
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  }
  for (int i = 0; i < npass; i++) /* a dup2 onto itself clears close-on-exec too */
    posix_spawn_file_actions_adddup2(&fa, pass[i][0], pass[i][1]);
  /* The signals standin passes on are blocked from before the program
   * starts until their handlers are set: one that came in between (a
   * Ctrl-C as soon as the program prints) would otherwise end standin
   * itself. The program starts with the mask and dispositions standin
   * was given. */
  sigset_t passed, mask;
  sigemptyset(&passed);
  for (int i = 0; i < NPASSED; i++)
    sigaddset(&passed, passed_on[i]);
  sigprocmask(SIG_BLOCK, &passed, &mask);
  cli_signals_as_given();
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  posix_spawnattr_setsigmask(&at, &mask);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
  last_wait_known = 0;
  uint64_t t0 = mono_ns();
  pid_t pid;
  int e = posix_spawnp(&pid, argv[0], &fa, &at, argv, env);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  if (again >= 0)
    close(again);
  cli_calm_signals();
  if (e != 0) {
    sigprocmask(SIG_SETMASK, &mask, NULL);
    fprintf(stderr, "standin: cannot run %s: %s\n", argv[0], strerror(e));
    return e == ENOENT ? EXIT_NOTFOUND : EXIT_NOEXEC;
  }
  child_pid = pid;
  group_sender = find_group_sender();
  struct sigaction sent = {.sa_sigaction = forward_sent, .sa_flags = SA_SIGINFO},
                   fwd = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO},
                   stop = {.sa_handler = forward_stop}, old[NPASSED];
  for (int i = 0; i < NPASSED; i++) {
    int s = passed_on[i];
    sigaction(s, s == SIGINT || s == SIGQUIT ? &sent : s == SIGTSTP ? &stop : &fwd, &old[i]);
  }
  sigprocmask(SIG_SETMASK, &mask, NULL);
  int status = 0;
  /* ended but not reaped: its schedstat is still there to read */
  siginfo_t si;
  int waited;
  while ((waited = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT)) < 0 && errno == EINTR)
    ;
  *wall_ns = mono_ns() - t0;
  if (waited == 0)
    last_wait_known = read_schedstat(pid, &last_oncpu_ns, &last_wait_ns) == 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  for (int i = 0; i < NPASSED; i++)
    sigaction(passed_on[i], &old[i], NULL);
  child_pid = 0;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    cli_warn("%s was killed by signal %d (%s)%s", argv[0], sig, strsignal(sig),
             WCOREDUMP(status) ? ", core dumped" : "");
    return 128 + sig;
  }
  return 1;
}

int cli_run(char *const argv[], char *const extra_env[], uint64_t *wall_ns) {
  return run(argv, extra_env, wall_ns, 0, NULL, 0);
}

int cli_run_quiet(char *const argv[], char *const extra_env[], uint64_t *wall_ns) {
  return run(argv, extra_env, wall_ns, 1, NULL, 0);
}

int cli_run_again(char *const argv[], char *const extra_env[], uint64_t *wall_ns) {
  return run(argv, extra_env, wall_ns, 2, NULL, 0);
}

int cli_run_passing(char *const argv[], char *const extra_env[], uint64_t *wall_ns,
                    const int (*pass)[2], int n) {
  return run(argv, extra_env, wall_ns, 0, pass, n);
}

/* Scanning every process's environment is not free (~0.3 ms for 65
 * processes here): record asks only when its directory holds no trace,
 * replay after the program's wall time has been taken. */
size_t cli_procs_with_env(const char *entry, long *first) {
  size_t wl = strlen(entry) + 1; /* with its NUL */
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  static char env[1 << 16];
  size_t n = 0;
  uid_t me = getuid();
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid <= 0 || pid == (long)getpid())
      continue;
    char p[64];
    struct stat st;
    snprintf(p, sizeof p, "/proc/%ld/environ", pid);
    if (stat(p, &st) != 0 || (me != 0 && st.st_uid != me))
      continue;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t len = read(fd, env, sizeof env);
    close(fd);
    for (ssize_t i = 0; i + (ssize_t)wl <= len;
         i += (ssize_t)strnlen(env + i, (size_t)(len - i)) + 1)
      if (memcmp(env + i, entry, wl) == 0) {
        if (n++ == 0)
          *first = pid;
        break;
      }
  }
  closedir(d);
  return n;
}

_Static_assert(CLI_NO_SLOTS == JPG_NO_COUNT + 1, "a slot per JPEG reason and one more");

unsigned cli_no_slot(const st_call *c) {
  int jpeg = st_api_family(c->api) == ST_FAMILY_JPEG;
  return jpeg && c->reason < JPG_NO_COUNT ? c->reason : JPG_NO_COUNT;
}

const char *cli_no_name(unsigned slot, char *buf, size_t len) {
  return slot < JPG_NO_COUNT ? jpg_no_name(slot, buf, len) : "other";
}

void cli_no_json(FILE *f, const uint64_t by[CLI_NO_SLOTS]) {
  fputc('{', f);
  for (unsigned k = 0, first = 1; k < CLI_NO_SLOTS; k++) {
    char buf[32];
    if (!by[k])
      continue;
    fputs(first ? "" : ", ", f);
    json_write_str(f, cli_no_name(k, buf, sizeof buf));
    fprintf(f, ": %llu", (unsigned long long)by[k]);
    first = 0;
  }
  fputc('}', f);
}

void cli_no_list(const uint64_t by[CLI_NO_SLOTS], char *out, size_t len) {
  size_t at = 0;
  out[0] = 0;
  for (unsigned k = 0; k < CLI_NO_SLOTS && at < len; k++) {
    char buf[32];
    if (by[k])
      at += (size_t)snprintf(out + at, len - at, "%s%llu %s", at ? ", " : "",
                             (unsigned long long)by[k], cli_no_name(k, buf, sizeof buf));
  }
}

/* ---- C++ symbols ------------------------------------------------------------ */

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

/* libstdc++'s __cxa_demangle, loaded the first time a C++ symbol is met, so
 * that the CLI of a C program's recording never loads it; NULL without it
 * (labels then keep the mangled names). */
static demangle_fn demangler(void) {
  static int tried;
  static demangle_fn fn;
  if (!tried) {
    tried = 1;
    fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!fn) {
      void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
      fn = h ? (demangle_fn)dlsym(h, "__cxa_demangle") : NULL;
    }
  }
  return fn;
}

/* The end of the name in d: its parameter list's '(' at the top level,
 * skipping "(anonymous namespace)", template arguments, lambdas' braces,
 * operator names ("operator()", "operator<<") and a function's own
 * parameters where a local name follows them ("f()::{lambda()#1}"). */
static size_t name_end(const char *d) {
  int angle = 0, brace = 0;
  for (size_t i = 0; d[i]; i++) {
    if (!strncmp(d + i, "operator", 8)) {
      i += 8;
      if (d[i] == '(' && d[i + 1] == ')')
        i++;
      else
        while (d[i] && strchr("<>=!+-*/%^&|~[],", d[i]))
          i++;
      i--;
      continue;
    }
    if (!strncmp(d + i, "(anonymous namespace)", 21)) {
      i += 20;
      continue;
    }
    switch (d[i]) {
    case '<': angle++; break;
    case '>': angle -= angle > 0; break;
    case '{': brace++; break;
    case '}': brace -= brace > 0; break;
    case '(':
      if (!angle && !brace) {
        size_t j = i;
        for (int paren = 0; d[j]; j++) { /* its matching ')' */
          paren += d[j] == '(';
          paren -= d[j] == ')';
          if (!paren)
            break;
        }
        if (d[j] && !strncmp(d + j + 1, "::", 2)) {
          i = j;
          continue;
        }
        return i;
      }
      break;
    }
  }
  return strlen(d);
}

int cli_demangle(const char *sym, char *out, size_t cap) {
  if (cap)
    out[0] = 0;
  /* the demangler recurses: long names (none real) are left alone */
  if (!sym || strncmp(sym, "_Z", 2) != 0 || strlen(sym) > 4096 || cap == 0)
    return 0;
  demangle_fn fn = demangler();
  int status = -1;
  char *d = fn ? fn(sym, NULL, NULL, &status) : NULL;
  if (!d || status != 0) {
    free(d);
    return 0;
  }
  size_t n = name_end(d);
  if (n == 0)
    n = strlen(d);
  snprintf(out, cap, "%.*s", (int)n, d);
  free(d);
  return 1;
}

/* ---- output files ---------------------------------------------------------- */

int cli_out_check(const char *path, const char *dir) {
  struct stat po, ds;
  if (!path || !strcmp(path, "-") || !dir || stat(path, &po) != 0 || !S_ISREG(po.st_mode))
    return 0;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int clash = 0;
  for (struct dirent *e; !clash && (e = readdir(d));)
    clash = fstatat(dirfd(d), e->d_name, &ds, 0) == 0 && ds.st_dev == po.st_dev &&
            ds.st_ino == po.st_ino;
  closedir(d);
  if (clash) {
    cli_err("%s is a file of the recording %s: writing it would destroy it; choose another "
            "output file",
            path, dir);
    return -1;
  }
  return 0;
}

int cli_out_open(cli_out *o, const char *path, const char *dir) {
  memset(o, 0, sizeof *o);
  if (!path || !strcmp(path, "-")) {
    o->f = stdout;
    return 0;
  }
  if (cli_out_check(path, dir) != 0)
    return -1;
  o->path = path;
  /* a symbolic link (/dev/stdout), a device or a FIFO is written in place:
   * a rename would replace the link or the node itself */
  struct stat st;
  int exists = lstat(path, &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    if (!(o->f = fopen(path, "w"))) {
      cli_err("cannot write %s: %s", path, strerror(errno));
      return -1;
    }
    return 0;
  }
  size_t n = strlen(path) + 32;
  if (!(o->tmp = malloc(n))) {
    cli_err("cannot write %s: out of memory", path);
    return -1;
  }
  snprintf(o->tmp, n, "%s.tmp%d", path, (int)getpid());
  /* unnamed until whole: an export killed midway left PATH.tmpPID */
  char at[PATH_MAX];
  const char *slash = strrchr(path, '/');
  snprintf(at, sizeof at, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1,
           slash ? path : ".");
  int fd =
      access("/proc/self/fd", X_OK) == 0 ? open(at, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666) : -1;
  o->unnamed = fd >= 0;
  if (fd < 0)
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd >= 0 && exists)
    (void)fchmod(fd, st.st_mode & 07777); /* the file it replaces keeps its mode */
  if (fd < 0 || !(o->f = fdopen(fd, "w"))) {
    /* errno of the open: the directory is missing or not writable */
    cli_err("cannot write %s: %s", path, strerror(errno));
    if (fd >= 0) {
      close(fd);
      if (!o->unnamed)
        unlink(o->tmp);
    }
    free(o->tmp);
    o->tmp = NULL;
    return -1;
  }
  return 0;
}

/* Give the unnamed file of o its temporary name (cli_out_open). */
static int name_unnamed(cli_out *o) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(o->f));
  (void)unlink(o->tmp); /* one a killed run of this pid left */
  if (linkat(AT_FDCWD, proc, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0)
    return 0;
  cli_err("cannot put %s in place: %s", o->path, strerror(errno));
  return -1;
}

int cli_out_close(cli_out *o, int ok) {
  int rc = 0;
  if (!o->f)
    return -1;
  const char *name = o->path ? o->path : "standard output";
  int bad = ferror(o->f);
  int named = 0; /* the unnamed file has its temporary name */
  if (o->f == stdout) {
    bad = fflush(stdout) != 0 || bad;
  } else {
    bad = fflush(o->f) != 0 || bad;
    if (!bad && ok && o->unnamed)
      named = name_unnamed(o) == 0;
    bad = fclose(o->f) != 0 || bad;
  }
  if (bad && ok)
    cli_err("writing %s failed: %s", name, errno ? strerror(errno) : "write error");
  if (o->f == stdout)
    clearerr(stdout); /* said here, or the command failed anyway: main says it once */
  if (bad || !ok || (o->unnamed && !named))
    rc = -1;
  if (o->tmp) {
    if (rc == 0 && rename(o->tmp, o->path) != 0) {
      cli_err("cannot put %s in place: %s", o->path, strerror(errno));
      rc = -1;
    }
    if (rc != 0 && (!o->unnamed || named))
      unlink(o->tmp);
    free(o->tmp);
  }
  memset(o, 0, sizeof *o);
  return rc;
}

/* A summary that cannot be written is said before the program runs, not
 * after a long run whose statistics would then be lost. A file made only to
 * find that out is removed again. */
int cli_out_writable(const char *path) {
  if (!path || !strcmp(path, "-"))
    return 0;
  int existed = access(path, F_OK) == 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    cli_err("cannot write summary %s: %s; nothing was run", path, strerror(errno));
    return -1;
  }
  close(fd);
  if (!existed)
    unlink(path);
  return 0;
}

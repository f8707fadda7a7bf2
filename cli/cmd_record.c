/* cmd_record.c — `standin record`: run a program with the record shim
 * preloaded and leave one trace file per process in the output directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_elf.h"
#include "retime.h"

static const char usage_text[] =
    "usage: standin record [-o DIR] [--api protobuf,jpeg] [--stack-depth N] [--no-follow]\n"
    "                      [--keep-pixels] [--retime[=N]] [--retime-run fastest|median] [-f]\n"
    "                      -- PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with the record shim preloaded. Every protobuf-c and JPEG decode\n"
    "call runs for real; its request, response, latency, call site and thread are\n"
    "saved in DIR (default standin.data), one trace file per process. Exits with\n"
    "PROGRAM's exit status.\n"
    "\n"
    "  -o, --output DIR     recording directory (created, mode 0700); -t DIR, as\n"
    "                       replay names it, is the same\n"
    "      --api LIST       APIs to record: protobuf, jpeg (default both)\n"
    "      --stack-depth N  call-site frames to keep, 0-16 (default 3)\n"
    "      --no-follow      do not record programs that PROGRAM starts with exec\n"
    "      --keep-pixels    save the rows of every libjpeg decode; by default most\n"
    "                       are saved as a digest, and replay decodes the request\n"
    "                       again to rebuild them (the same libjpeg build must be\n"
    "                       installed where you replay)\n"
    "      --retime[=N]     run PROGRAM N more times (default 3), timing its calls\n"
    "                       and nothing else (no payload copies; output on\n"
    "                       /dev/null, input too unless it is a file, which each\n"
    "                       run reads from its start), and give each call its\n"
    "                       latency in the run whose time in calls was the\n"
    "                       lowest: recording makes small calls look slower\n"
    "                       (pbtest's ~500 ns calls by 1-16% on two test VMs),\n"
    "                       and a noisy machine (another tenant, a busy sibling\n"
    "                       core) only ever adds time to a run. Calls are paired\n"
    "                       by process, thread and order, a thread pool's by API,\n"
    "                       size and start order; calls that differ keep the\n"
    "                       latencies recorded. The program's other effects\n"
    "                       (files, requests) happen N+1 times\n"
    "      --retime-run fastest|median\n"
    "                       which timing run gives the latencies (default fastest;\n"
    "                       median: the run in the middle by time in calls)\n"
    "  -f, --force          replace the traces already in DIR\n";

typedef struct {
  const char *dir;
  const char *apis;
  int depth;
  int no_follow, force;
  int keep_pixels; /* STANDIN_JPEG_PIXELS=keep */
  int retime;      /* timing-only runs; 0: none */
  int retime_pick; /* RETIME_FASTEST or RETIME_MEDIAN */
} rec_opts;

#define RETIME_DEFAULT_PASSES 3

static int check_apis(const char *list) {
  char *copy = strdup(list), *save = NULL;
  int ok = copy != NULL;
  for (char *t = strtok_r(copy, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
    if (strcmp(t, "protobuf") && strcmp(t, "jpeg")) {
      cli_err("--api: unknown API '%s'; choose from protobuf, jpeg", t);
      ok = 0;
    }
  free(copy);
  return ok ? 0 : -1;
}

static int parse(int argc, char **argv, rec_opts *o, int *first) {
  static const struct option lo[] = {{"output", required_argument, 0, 'o'},
                                     {"api", required_argument, 0, 'a'},
                                     {"stack-depth", required_argument, 0, 's'},
                                     {"no-follow", no_argument, 0, 'n'},
                                     {"keep-pixels", no_argument, 0, 'k'},
                                     {"force", no_argument, 0, 'f'},
                                     {"retime", optional_argument, 0, 'r'},
                                     {"retime-run", required_argument, 0, 'R'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  *o = (rec_opts){.dir = "standin.data", .apis = "protobuf,jpeg", .depth = 3};
  int pick_given = 0;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+o:t:fh", lo, NULL)) != -1) {
    char *end;
    switch (c) {
    case 'o':
    case 't': o->dir = optarg; break;
    case 'a':
      if (check_apis(optarg))
        return -1;
      o->apis = optarg;
      break;
    case 's':
      o->depth = (int)strtol(optarg, &end, 10);
      if (*end || o->depth < 0 || o->depth > 16) {
        cli_err("--stack-depth: '%s' is not a number from 0 to 16", optarg);
        return -1;
      }
      break;
    case 'n': o->no_follow = 1; break;
    case 'k': o->keep_pixels = 1; break;
    case 'f': o->force = 1; break;
    case 'r':
      o->retime = RETIME_DEFAULT_PASSES;
      if (optarg) {
        o->retime = (int)strtol(optarg, &end, 10);
        if (*end || end == optarg || o->retime < 1 || o->retime > RETIME_MAX_PASSES) {
          cli_err("--retime: '%s' is not a number of runs from 1 to %d", optarg,
                  RETIME_MAX_PASSES);
          return -1;
        }
      }
      break;
    case 'R':
      if (!strcmp(optarg, "fastest")) {
        o->retime_pick = RETIME_FASTEST;
      } else if (!strcmp(optarg, "median")) {
        o->retime_pick = RETIME_MEDIAN;
      } else {
        cli_err("--retime-run: '%s' is neither 'fastest' nor 'median'", optarg);
        return -1;
      }
      pick_given = 1;
      break;
    case 'h': fputs(usage_text, stdout); exit(0);
    default: fputs(usage_text, stderr); return -1;
    }
  }
  if (pick_given && !o->retime) {
    cli_err("--retime-run chooses among --retime's runs: give --retime too");
    return -1;
  }
  if (optind >= argc) {
    cli_err("record: no program given");
    fputs(usage_text, stderr);
    return -1;
  }
  *first = optind;
  return 0;
}

/* Whether the file system holding dir has no block left for a trace (root's
 * reserve counted: the program may run as root). */
static int disk_full(const char *dir) {
  struct statvfs v;
  return statvfs(dir, &v) == 0 && (unsigned long long)v.f_bfree * v.f_frsize < 4096;
}

/* Remove the files a previous recording left (only ours: *.trace, run.info). */
static int clear_dir(const char *dir, int force) {
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return -1;
  if (td.n && !force) {
    cli_err("%s already holds a recording (%zu trace file%s); use -f to replace it or -o to "
            "choose another directory",
            dir, td.n, td.n == 1 ? "" : "s");
    cli_tracedir_free(&td);
    return -1;
  }
  for (size_t i = 0; i < td.n; i++)
    unlink(td.paths[i]);
  cli_tracedir_free(&td);
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/run.info", dir);
  unlink(p);
  /* the notes of processes that could not create their traces, and what
   * an interrupted --retime left: a new recording would report them */
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (cli_is_note(e->d_name, ".unrecorded") || cli_is_note(e->d_name, ".unfollowed") ||
        cli_is_note(e->d_name, ".trace.retime")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  }
  if (d)
    closedir(d);
  return 0;
}

/* Processes that made calls but could not create their traces: each said
 * so as it happened, among the program's own output; said here again as
 * what the recording lacks. */
static size_t say_unrecorded(const char *dir) {
  char pid[64], why[256];
  size_t n = cli_unrecorded(dir, pid, sizeof pid, why, sizeof why);
  if (n == 0)
    return 0;
  int fds = cli_note_fd_limit(why);
  fprintf(stderr,
          "standin: %zu process%s (pid %s%s) made intercepted calls that are not in %s: %s "
          "trace could not be created (%s)%s\n",
          n, n == 1 ? "" : "es", pid, n == 1 ? "" : ", ...", dir,
          n == 1 ? "its" : "the first one's", why[0] ? why : "reason unknown",
          fds ? "; the recorder needs a file descriptor of its own in each process: raise the "
                "limit (ulimit -n) and record again"
              : "");
  return n;
}

/* Create DIR (mode 0700) and prove we can write there before the program
 * starts, so that a bad -o fails in a second and not after an hour. */
static int prepare_dir(const char *dir, int force) {
  /* the directories above it too, as mkdir -p (they get the umask's mode) */
  char up[PATH_MAX];
  snprintf(up, sizeof up, "%s", dir);
  for (char *s = strchr(up + 1, '/'); s; s = strchr(s + 1, '/')) {
    *s = 0;
    if (mkdir(up, 0777) != 0 && errno != EEXIST)
      break; /* said below, for dir itself */
    *s = '/';
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
    cli_err("cannot create recording directory %s: %s", dir, strerror(errno));
    return -1;
  }
  struct stat st;
  if (stat(dir, &st) != 0) { /* a symbolic link that loops or leads nowhere */
    cli_err("cannot use %s as the recording directory: %s; choose another with -o", dir,
            strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    cli_err("%s exists and is not a directory; choose another with -o", dir);
    return -1;
  }
  /* one record at a time into a directory: two at once merged their traces
   * (both found it empty), and -f deleted a running record's */
  if (cli_recording_lock(dir) != 0)
    return -1;
  /* the lock dies with its standin: an earlier record's program still
   * writing here after its standin was killed lost its trace to -f */
  char abs[PATH_MAX], want[PATH_MAX + 16];
  long pid = 0;
  size_t live = 0;
  if (realpath(dir, abs)) {
    snprintf(want, sizeof want, "STANDIN_DIR=%s", abs);
    live = cli_procs_with_env(want, &pid);
  }
  if (live) {
    cli_err("%s is still recorded into by %zu process%s of an earlier record (pid %ld), whose "
            "standin is gone: stop %s, or record into another directory with -o",
            dir, live, live == 1 ? "" : "es", pid, live == 1 ? "it" : "them");
    return -1;
  }
  if (clear_dir(dir, force) != 0)
    return -1;
  char probe[PATH_MAX];
  snprintf(probe, sizeof probe, "%s/.standin-probe-%d", dir, (int)getpid());
  int fd = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    cli_err("cannot write in %s: %s; choose another directory with -o", dir, strerror(errno));
    return -1;
  }
  close(fd);
  unlink(probe);
  /* an empty file is made on a full disk too: the traces are not (the
   * program ran, each process said so, and the run ended without one) */
  if (disk_full(dir)) {
    cli_err("cannot record into %s: the disk it is on is full; free space there, or choose "
            "another directory with -o",
            dir);
    return -1;
  }
  return 0;
}

/* run.info, written when the program starts and again when it ends. The
 * second write overwrites the first in place and then cuts the file to its
 * length: with O_TRUNC it freed the file's block first, so on a disk the
 * program's traces had filled (another writer taking that block) the run
 * lost its command line, status and wall time, and either failure went
 * unsaid (an empty run.info: "holds no trace; record one"). */
static void write_runinfo(const char *dir, char **argv, const char *path, int dynamic,
                          const char *status, uint64_t wall_ns) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/run.info", dir);
  /* private like the traces: it holds the command line */
  int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    cli_warn("cannot write %s: %s; 'standin info' will not know the command, its exit "
             "status or its wall time",
             p, strerror(errno));
    if (fd >= 0)
      close(fd);
    return;
  }
  fprintf(f, "tool=standin %s\ncommand=", STANDIN_VERSION);
  /* one line: an argument's newlines written as they are (a shell script,
   * sh -c 'x=1<newline>wall_ns=...') made lines of their own that the
   * readers took for run.info's keys: a script's "wall_ns=" or
   * "launcher_pid=" line replaced the run's. Each argument is one shell
   * word, so that the command info and replay show can be pasted back
   * (sh -c 'for f in *.jpg; do ...'): $'...' keeps the line one line. */
  for (int i = 0; argv[i]; i++) {
    if (i)
      fputc(' ', f);
    cli_put_shell_word(f, argv[i]);
  }
  /* launcher_pid: the program's first process is the one whose parent
   * this is (analysis tells a server whose calls are all in its children);
   * launcher_pidns: processes in other PID namespaces are named with theirs */
  struct stat ns;
  fprintf(f,
          "\nprogram=%s\ndynamic=%d\nstatus=%s\nwall_ns=%llu\ntime=%lld\nlauncher_pid=%ld\n"
          "launcher_pidns=%llu\n",
          path, dynamic, status, (unsigned long long)wall_ns, (long long)time(NULL), (long)getpid(),
          stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0ull);
  /* how long the main thread waited for a CPU during the run (cli_run_cpu_wait):
   * info says when the recorded latencies may include such waits */
  uint64_t waited, oncpu;
  if (wall_ns && cli_run_cpu_wait(&waited, &oncpu) == 0)
    fprintf(f, "main_cpu_wait_ns=%llu\nmain_cpu_ns=%llu\ncpus=%u\n", (unsigned long long)waited,
            (unsigned long long)oncpu, cli_cpus_here());
  errno = 0;
  int bad = fflush(f) != 0 || ferror(f);
  long len = ftell(f);
  if (!bad && (len < 0 || ftruncate(fd, len) != 0))
    bad = 1;
  int e = errno;
  if (fclose(f) != 0 && !bad)
    bad = 1, e = errno;
  if (bad)
    cli_warn("cannot write %s: %s; 'standin info' may not know the command, its exit status or "
             "its wall time",
             p, e ? strerror(e) : "write error");
}

/* Warn about programs the loader will not preload into, or whose calls
 * never reach a shim (*builtin: a hooked library linked in). */
static int inspect_program(const char *prog, char *path, size_t cap, int *builtin) {
  *builtin = 0;
  if (cli_find_program(prog, path, cap) != 0) {
    cli_err("%s: command not found", prog);
    return -1;
  }
  struct stat st;
  if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) && geteuid() != st.st_uid)
    cli_warn("%s is set-user-ID or set-group-ID: the loader ignores LD_PRELOAD for it, so its "
             "calls will not be recorded",
             path);
  int dyn = cli_elf_is_dynamic(path);
  const char *fn, *lib;
  if (dyn == 0)
    cli_warn("%s is statically linked: no shim can be preloaded into it, so no calls will be "
             "recorded (link it dynamically against libprotobuf-c / libjpeg)",
             path);
  else if (dyn == 1 && (lib = cli_elf_builtin_lib(path, &fn)) != NULL) {
    *builtin = 1;
    cli_warn("%s has %s linked into it (it defines %s itself): its calls never reach the "
             "shared library, where standin intercepts them, so they will not be recorded "
             "(link it against %s.so)",
             path, lib, fn, lib);
  }
  return dyn;
}

static char *env_pair(const char *k, const char *v) {
  size_t n = strlen(k) + strlen(v) + 2;
  char *s = malloc(n);
  if (s)
    snprintf(s, n, "%s=%s", k, v);
  return s;
}

/* The recording directory as the program started (device, inode). */
static struct stat dir_at_start;

/* Processes that started a program in an environment without the record
 * shim (record/proc.c): said after the recording, or as why it holds no
 * trace. */
static size_t say_unfollowed(const char *dir, int none) {
  char pid[64], prog[PATH_MAX];
  size_t n = cli_notes(dir, ".unfollowed", pid, sizeof pid, prog, sizeof prog);
  if (n == 0)
    return 0;
  char more[64] = "";
  if (n > 1)
    snprintf(more, sizeof more, " (and %zu more processes did so)", n - 1);
  fprintf(stderr,
          "standin: %s%spid %s started %s with an environment that drops standin (no record "
          "shim in LD_PRELOAD, or no STANDIN_DIR: env -i, or a program that clears or sets "
          "LD_PRELOAD)%s: it ran unrecorded, and so did the programs it started; to record "
          "it, run it under 'standin record' itself\n",
          none ? dir : "", none ? " holds no trace: " : "", pid, prog[0] ? prog : "a program",
          more);
  return n;
}

static void summary(const char *dir, const char *absdir, const char *prog, int builtin, int rc,
                    int no_follow) {
  struct stat dst;
  if (stat(dir, &dst) != 0) {
    cli_warn("the recording directory %s was removed or renamed while the program ran: its "
             "traces are gone with it (if it was renamed, they are where it went)",
             dir);
    return;
  }
  /* removed and made again (rm -rf, mkdir): the traces of the processes
   * that had created theirs went with the first, and the summary counted
   * what the second holds as the recording, without a word */
  if (dir_at_start.st_ino &&
      (dst.st_dev != dir_at_start.st_dev || dst.st_ino != dir_at_start.st_ino))
    cli_warn("the recording directory %s was replaced while the program ran (removed or renamed, "
             "and made again): the traces written into the first are gone with it (if it was "
             "renamed, they are where it went); %s holds only those of processes that created "
             "theirs after",
             dir, dir);
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return;
  uint64_t bytes = 0;
  for (size_t i = 0; i < td.n; i++) {
    struct stat st;
    if (stat(td.paths[i], &st) == 0)
      bytes += (uint64_t)st.st_size;
  }
  char b[32];
  long pid = 0;
  char want[PATH_MAX + 16];
  snprintf(want, sizeof want, "STANDIN_DIR=%s", absdir);
  size_t live = cli_procs_with_env(want, &pid);
  if (td.n) {
    fprintf(stderr, "standin: recorded %zu process%s into %s (%s); see 'standin info %s'\n", td.n,
            td.n == 1 ? "" : "es", dir, cli_fmt_bytes(b, sizeof b, (double)bytes), dir);
    say_unrecorded(dir);
    say_unfollowed(dir, 0);
    /* a daemon, a background job or a server's helper outlived the program */
    if (live == 1)
      fprintf(stderr,
              "standin: 1 process it started still runs under the recorder (pid %ld): %s adds "
              "its trace as it makes calls, closed when it exits; 'standin info' shows it as "
              "not closed until then\n",
              pid, dir);
    else if (live)
      fprintf(stderr,
              "standin: %zu processes it started still run under the recorder (pid %ld, ...): "
              "%s adds their traces as they make calls, closed when they exit; 'standin info' "
              "shows them as not closed until then\n",
              live, pid, dir);
  } else {
    if (live)
      fprintf(stderr,
              "standin: %s exited before any intercepted call, but %zu process%s it started "
              "still run%s under the recorder (pid %ld%s): %s gets a trace for each one that "
              "makes a call, closed when it exits\n",
              prog, live, live == 1 ? "" : "es", live == 1 ? "s" : "", pid,
              live == 1 ? "" : ", ...", dir);
    else if (disk_full(dir))
      /* each process said it could not create its trace: not a program
       * that made no call, nor workers that gave up root */
      fprintf(stderr,
              "standin: %s holds no trace: the disk it is on is full, so the recorder could "
              "not create the traces (said above); free space there, or record elsewhere with "
              "-o\n",
              dir);
    else if (say_unrecorded(dir))
      ; /* not a program that made no call */
    else if (say_unfollowed(dir, 1))
      ; /* the program that would have made them ran unrecorded */
    else {
      char st[64] = "";
      int sig = rc > 128 ? rc - 128 : 0; /* as the status standin exits with says it */
      if (rc != 0 && !sig) /* a client whose server was down, a bad argument: the likely why
                            * (a signal was said as the program ended) */
        snprintf(st, sizeof st, " (%s exited with status %d)", prog, rc);
      /* a server is stopped by one of these; other signals are its own end */
      int stopped =
          sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT || sig == SIGKILL;
      if (sig && (sig == SIGKILL || !stopped))
        /* the writer creates the file after the first call: one that
         * nothing can catch (SIGKILL, a stack overflow, a fault while the
         * program blocks the signal) may come first */
        fprintf(stderr,
                "standin: %s holds no trace: %s was killed by signal %d before any trace file "
                "was written, and the calls it made, if any, were lost with it ('standin info "
                "%s' says more)\n",
                dir, prog, sig, dir);
      else
        fprintf(stderr,
                "standin: no intercepted call was made%s, so %s holds no trace; "
                "'standin info %s' says more\n",
                st, dir, dir);
      if (no_follow) /* sh -c 'djpeg ...' under --no-follow: the shell itself decodes nothing */
        fprintf(stderr,
                "standin: with --no-follow only %s itself was recorded, not the "
                "programs it started\n",
                prog);
      /* processes that gave up root before their first call (a server's
       * workers) could not create their traces here: their own messages
       * may have gone to a log the daemon keeps */
      struct stat ds;
      /* (a program with a library linked in was warned about before it ran) */
      /* (not after a failure status: that is the likelier why; a server
       * stopped by a signal still gets it) */
      if (!builtin && !no_follow && (rc == 0 || stopped) && geteuid() == 0 && stat(dir, &ds) == 0 &&
          !(ds.st_mode & S_IWOTH))
        fprintf(stderr,
                "standin: if the program's processes give up root before their first call (a "
                "server's workers), they cannot write into %s: make the directory first, "
                "writable for them (mkdir -m 1777 DIR), and record into it with -o DIR\n",
                dir);
    }
  }
  cli_tracedir_free(&td);
}

/* Remove what dir holds (an interrupted run's timings, one directory per
 * timing run); -1 if no dir. */
static int empty_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d)
    return -1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (de->d_name[0] != '.') {
      char p[PATH_MAX + 256];
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      if (unlink(p) != 0 && errno == EISDIR && empty_dir(p) == 0) /* a run's own */
        rmdir(p);
    }
  closedir(d);
  return 0;
}

/* How far the timing runs' own times in the same calls lie from the
 * chosen run's, which the traces took. */
static void pass_spread(char *out, size_t cap, const retime_stats *st) {
  *out = 0;
  if (st->passes < 2 || st->common_ns == 0)
    return;
  double lo, hi;
  retime_spread(st->pass_ns, st->passes, st->common_ns, &lo, &hi);
  snprintf(out, cap, "; the %u runs' times ranged %+.1f%%..%+.1f%% around it", st->passes, lo, hi);
}

/* The timing-only runs of --retime (record/timing.c), then the rewrite of
 * the traces with the chosen run's latencies (retime.c). Failures leave
 * the recording as the first run made it, and say so. */
static void retime(const rec_opts *o, const char *absdir, char **argv, char **env) {
  cli_tracedir td;
  size_t traces = 0;
  if (cli_tracedir_open(&td, o->dir) == 0) {
    traces = td.n;
    cli_tracedir_free(&td);
  }
  if (!traces) { /* do not run the program again for nothing */
    fprintf(stderr, "standin: --retime: no trace to retime; the program was not run again\n");
    return;
  }
  char tdir[PATH_MAX + 16];
  snprintf(tdir, sizeof tdir, "%s/.timing", absdir);
  if (empty_dir(tdir) != 0 && mkdir(tdir, 0700) != 0) {
    cli_warn("--retime: cannot create %s: %s; the recording keeps its own latencies", tdir,
             strerror(errno));
    return;
  }
  size_t n = 0;
  while (env[n])
    n++;
  char **env2 = calloc(n + 3, sizeof *env2);
  if (!env2)
    return;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(env[i], "STANDIN_DIR=", 12))
      env2[k++] = env[i];
  char dirpair[PATH_MAX + 48];
  env2[k++] = dirpair;
  env2[k++] = "STANDIN_TIMING=1";
  env2[k] = NULL;
  static char pdirs[RETIME_MAX_PASSES][PATH_MAX + 32];
  const char *pdir[RETIME_MAX_PASSES];
  unsigned done = 0;
  for (unsigned p = 0; p < (unsigned)o->retime; p++) {
    snprintf(pdirs[p], sizeof pdirs[p], "%s/%u", tdir, p + 1);
    if (mkdir(pdirs[p], 0700) != 0) {
      cli_warn("--retime: cannot create %s: %s", pdirs[p], strerror(errno));
      break;
    }
    snprintf(dirpair, sizeof dirpair, "STANDIN_DIR=%.*s", PATH_MAX + 31, pdirs[p]);
    /* the first message says what runs again: output to standard output is
     * discarded, but files the program writes are written again (a program
     * that rewrites its input in place, as jpegoptim does, cannot be retimed) */
    if (o->retime == 1)
      fprintf(stderr, "standin: --retime: running the program again, timing its calls only "
                      "(its standard output discarded, files it writes written again; a "
                      "server must be stopped again)\n");
    else
      fprintf(stderr,
              "standin: --retime: timing-only run %u of %d (the program again, its "
              "standard output discarded%s)\n",
              p + 1, o->retime,
              p == 0 ? ", files it writes written again; a server must be stopped again" : "");
    uint64_t wall;
    int rc = cli_run_again(argv, env2, &wall);
    if (rc != 0)
      cli_warn("--retime: timing-only run %u exited with status %d", p + 1, rc);
    char said[512];
    if (cli_run_cpu_wait_said(said, sizeof said))
      fprintf(stderr,
              "standin: --retime: timing-only run %u: %s; its latencies include those "
              "waits\n",
              p + 1, said);
    pdir[done++] = pdirs[p];
  }
  free(env2);
  retime_stats st;
  if (done && cli_retime(o->dir, pdir, done, o->retime_pick, &st) == 0) {
    char a[32], b[32], c[32], d[32], sp[96], which[32];
    snprintf(which, sizeof which, ", the %s run's", retime_pick_name(o->retime_pick));
    pass_spread(sp, sizeof sp, &st);
    if (st.calls == 0)
      fprintf(stderr, "standin: --retime: no call to retime\n");
    else if (st.retimed == 0)
      fprintf(stderr, "standin: --retime: none of the %s calls could be retimed\n",
              cli_fmt_count(b, sizeof b, st.calls));
    else
      fprintf(stderr,
              "standin: --retime: %s of %s calls retimed (their time %s -> %s%s%s)%s\n",
              cli_fmt_count(a, sizeof a, st.retimed), cli_fmt_count(b, sizeof b, st.calls),
              cli_fmt_ns(c, sizeof c, (double)st.before_ns),
              cli_fmt_ns(d, sizeof d, (double)st.after_ns), done > 1 ? which : "", sp,
              st.retimed < st.calls ? "; the rest keep their recorded latencies" : "");
    if (st.pooled)
      fprintf(stderr,
              "standin: --retime: %s of them on threads whose work differed between the runs "
              "(a pool's): paired by API, size and start order\n",
              cli_fmt_count(a, sizeof a, st.pooled));
    struct stat in;
    int piped = fstat(0, &in) == 0 && !S_ISREG(in.st_mode) && !S_ISCHR(in.st_mode);
    if (st.threads_differ || st.unmatched_proc)
      fprintf(stderr,
              "standin: --retime: %u thread%s made different calls in the timing run%s and %u "
              "process%s had no counterpart (a program that is not deterministic cannot be "
              "retimed there%s)\n",
              st.threads_differ, st.threads_differ == 1 ? "" : "s", done > 1 ? "s" : "",
              st.unmatched_proc, st.unmatched_proc == 1 ? "" : "es",
              piped ? "; nor one that reads its standard input, a pipe here: the timing runs "
                      "read none. Give it a file (< FILE), which each run reads again"
                    : "");
  }
  if (getenv("STANDIN_RETIME_KEEP")) /* for checking the retime against the runs */
    fprintf(stderr, "standin: --retime: the timing runs' files are kept in %s\n", tdir);
  else {
    empty_dir(tdir);
    rmdir(tdir);
  }
}

/* The longest STANDIN_DIR the record shim takes, plus one (config_dir in
 * record/rt.c: PATH_MAX less room for a file's name). */
#define SHIM_DIR_MAX (PATH_MAX - 48)

int cmd_record(int argc, char **argv) {
  cli_calm_signals(); /* the commands that run programs (util.c) */
  static rec_opts o;  /* ~20 KiB: off the stack (a small ulimit -s) */
  int first;
  if (parse(argc, argv, &o, &first) != 0)
    return EXIT_USAGE;
  char path[PATH_MAX];
  int builtin;
  int dyn = inspect_program(argv[first], path, sizeof path, &builtin);
  if (dyn == -1 && access(path, F_OK) != 0)
    return EXIT_NOTFOUND;
  const char *shim = cli_runtime_lib("libstandin-record.so");
  if (!shim || prepare_dir(o.dir, o.force) != 0)
    return shim ? 1 : EXIT_NOEXEC;
  if (stat(o.dir, &dir_at_start) != 0)
    memset(&dir_at_start, 0, sizeof dir_at_start);
  char absdir[PATH_MAX];
  if (!realpath(o.dir, absdir)) {
    cli_err("cannot resolve %s: %s", o.dir, strerror(errno));
    return 1;
  }
  /* the shim takes a shorter path than PATH_MAX, room for its files'
   * names (record/rt.c); --retime's runs record into DIR/.timing/N */
  size_t longest = strlen(absdir) + (o.retime ? sizeof "/.timing/15" - 1 : 0);
  if (longest >= SHIM_DIR_MAX) {
    cli_err("cannot record into %s: its path is %zu bytes long%s, and the recorder takes "
            "fewer than %d; choose a shorter one with -o",
            o.dir, strlen(absdir), o.retime ? " (and --retime's runs record under it)" : "",
            SHIM_DIR_MAX);
    return 1;
  }
  const char *old = getenv("LD_PRELOAD");
  char preload[PATH_MAX * 2];
  snprintf(preload, sizeof preload, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "");
  char depth[16], tsc[80] = "";
  snprintf(depth, sizeof depth, "%d", o.depth);
  uint64_t tb, tm, tk;
  if (cli_tsc_calibrate(&tb, &tm, &tk) == 0) /* the shim's clock (shim.h) */
    snprintf(tsc, sizeof tsc, "%llu:%llu:%llu", (unsigned long long)tb, (unsigned long long)tm,
             (unsigned long long)tk);
  char *env[] = {env_pair("LD_PRELOAD", preload),
                 env_pair("STANDIN_DIR", absdir),
                 env_pair("STANDIN_APIS", o.apis),
                 env_pair("STANDIN_STACK_DEPTH", depth),
                 env_pair("STANDIN_NO_FOLLOW", o.no_follow ? "1" : "0"),
                 env_pair("STANDIN_JPEG_PIXELS", o.keep_pixels ? "keep" : "digest"),
                 env_pair("STANDIN_TSC", tsc),
                 NULL};
  write_runinfo(o.dir, argv + first, path, dyn, "running", 0);
  uint64_t wall = 0;
  int rc = cli_run(argv + first, env, &wall);
  char status[32];
  snprintf(status, sizeof status, "exit %d", rc);
  write_runinfo(o.dir, argv + first, path, dyn, status, wall);
  const char *slash = strrchr(argv[first], '/');
  summary(o.dir, absdir, slash ? slash + 1 : argv[first], builtin, rc, o.no_follow);
  char said[512];
  if (!o.retime && cli_run_cpu_wait_said(said, sizeof said))
    fprintf(stderr,
            "standin: record: %s (the trace writer's among them); the latencies recorded "
            "include those waits: record on a quiet machine, or add --retime (its timing runs "
            "have no writer)\n",
            said);
  if (o.retime)
    retime(&o, absdir, argv + first, env);
  for (int i = 0; env[i]; i++)
    free(env[i]);
  return rc;
}

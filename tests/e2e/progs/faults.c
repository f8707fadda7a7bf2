/* faults — a protobuf-c program that ends badly, for the reliability tests
 * (tests/e2e/reliability_tests.sh).
 *
 *   faults crash KIND N     N messages, then die: segv, abort, fpe, ill, trap,
 *                           bus, term, int, quit, hup, pipe, stackoverflow
 *   faults crash-thread N   4 threads call; after N messages one dies (SIGSEGV)
 *   faults own-handler N    install a SIGSEGV handler, N messages, fault: the
 *                           handler prints and exits 3
 *   faults reraise HOW N    install a SIGTERM handler, N messages, SIGTERM to
 *                           itself: the handler puts the default back (with
 *                           SA_SIGINFO still set, as PHP does) and sends it
 *                           again with HOW: kill, raise or pthread_kill;
 *                           HOW=sigkill: N messages, then SIGKILL to itself
 *   faults busy-exit T      T threads call without end; main exits after 200 ms
 *   faults retitle N        write a title over its argv strings, as
 *                           setproctitle does (Chromium's renderers), then
 *                           N messages
 *   faults exit-race HOW N MS  N messages, then a thread that ends the
 *                           process MS ms later, while main calls exit(0)
 *                           at once: HOW=term sends it SIGTERM (the system
 *                           call itself; Chromium's browser does so to its
 *                           exiting renderers), _exit calls _exit(0) (a
 *                           renderer's IO thread does when the browser's
 *                           channel closes)
 *   faults thread-exit T    T threads call; thread 1 calls exit(5) mid-run
 *   faults forkmt T N       T threads call while main forks a child that does
 *                           N messages and leaves with _exit
 *   faults forkstorm T F    T threads call, every other call from a new
 *                           stack depth (the recorder then learns where its
 *                           frames are: libunwind's slow path), while main
 *                           forks F children that make one call each; a
 *                           child that has not exited 10 s later is killed
 *                           and reported ("child N hung"), exit 1
 *   faults vfork PROG N     vfork + execv "PROG basic N", then N messages
 *   faults spawn PROG N     posix_spawn "PROG basic N", then N messages
 *   faults wait FILE N      N messages, wait for FILE to exist, fork a child
 *                           doing N messages, then N more
 *   faults loop MS          messages for MS milliseconds (0: forever)
 *   faults paced US         one message every US microseconds, forever
 *   faults errno N          N messages, each call with errno set to 0 before
 *                           it; then which calls left errno set (libprotobuf-c
 *                           sets it on none: neither may a shim)
 *   faults detach N         fork and exit at once; the child (a daemon left
 *                           running) waits 1 s, writes N messages to
 *                           detach.out and exits
 *   faults chroot DIR N     chroot into DIR and close every descriptor
 *                           above 2 (named -t, unbound and nsd confine
 *                           themselves before their first message), then
 *                           N messages, a forked child's N, and N more
 *   faults seccomp HOW N    N messages, then a seccomp filter that allows
 *                           only the system calls the program itself needs
 *                           (others: HOW=kill kills it with SIGSYS, errno
 *                           fails them with EPERM), then N more messages,
 *                           and _exit
 *   faults leader-exit N    N messages, then the main thread leaves with
 *                           pthread_exit while a thread it started makes N
 *                           more 100 ms later and returns: the process ends
 *                           with it (exit handlers run, status 0)
 *   faults daemon HOW N     N messages, then as a daemon: close every
 *                           descriptor above 2 (HOW: loop, closefrom, range;
 *                           dup2: dup a file of its own onto a trace file's
 *                           descriptor, then close it), open 8 files
 *                           daemon.0-7 and write a line
 *                           to one of them per message, N more messages
 *
 * Every message goes through get_packed_size, pack and unpack (3 calls).
 * Output lines are deterministic for a given mode, so a recorded or
 * replayed run must print exactly what a native run prints. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sample.pb-c.h"

extern char **environ;

typedef Standin__Test__Tree Tree;

/* faults errno: the first call of each kind that left errno set */
static int watch_errno;
static int errno_left[4];
static const char *const errno_call[4] = {"get_packed_size", "pack", "unpack", "free_unpacked"};

static void errno_before(void) {
  if (watch_errno)
    errno = 0;
}

static void errno_after(int call) {
  if (watch_errno && errno && !errno_left[call])
    errno_left[call] = errno;
}

/* One message through size, pack and unpack; returns a hash of the result
 * so that a wrong response changes the output. */
static uint64_t one(int i) {
  char title[32];
  int32_t vals[8];
  Standin__Test__Leaf leaf = STANDIN__TEST__LEAF__INIT, *leafp = &leaf;
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT, *brp = &br;
  Tree t = STANDIN__TEST__TREE__INIT;
  snprintf(title, sizeof title, "fault-%d", i);
  t.title = title;
  for (int k = 0; k < 8; k++)
    vals[k] = i * 31 + k;
  leaf.n_values = (size_t)(i % 8);
  leaf.values = vals;
  br.id = i;
  br.n_leaves = 1;
  br.leaves = &leafp;
  t.n_branches = (size_t)(i % 2);
  t.branches = &brp;
  errno_before();
  size_t n = standin__test__tree__get_packed_size(&t);
  errno_after(0);
  uint8_t *buf = malloc(n ? n : 1);
  errno_before();
  size_t w = standin__test__tree__pack(&t, buf);
  errno_after(1);
  errno_before();
  Tree *u = standin__test__tree__unpack(NULL, w, buf);
  errno_after(2);
  uint64_t h = 1469598103934665603ull ^ w;
  if (u) {
    for (const char *p = u->title; *p; p++)
      h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ u->n_branches) * 1099511628211ull;
  }
  errno_before();
  standin__test__tree__free_unpacked(u, NULL);
  errno_after(3);
  free(buf);
  return h;
}

static void messages(int base, int n) {
  for (int i = 0; i < n; i++)
    printf("msg %d %016llx\n", base + i, (unsigned long long)one(base + i));
  fflush(stdout);
}

static int (*volatile recurse_p)(int);
__attribute__((no_sanitize("undefined", "address"))) static int recurse(int d) {
  volatile char pad[4096];
  pad[0] = (char)d;
  return recurse_p(d + 1) + pad[0];
}

/* The faults are meant: under the sanitizers (make check-sanitize) they
 * must reach the kernel as signals, not be reported as bugs. */
__attribute__((no_sanitize("undefined", "address"))) static void die(const char *kind) {
  volatile int zero = 0;
  if (!strcmp(kind, "segv"))
    *(volatile int *)(uintptr_t)zero = 1;
  else if (!strcmp(kind, "abort"))
    abort();
  else if (!strcmp(kind, "fpe"))
    printf("%d\n", 7 / zero);
  else if (!strcmp(kind, "ill"))
    __builtin_trap();
  else if (!strcmp(kind, "trap"))
    __asm__ volatile("int3");
  else if (!strcmp(kind, "bus")) {
    FILE *f = tmpfile();
    char *p = f ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0) : MAP_FAILED;
    if (p != MAP_FAILED)
      p[0] = 1; /* the file is empty: SIGBUS */
  } else if (!strcmp(kind, "term"))
    kill(getpid(), SIGTERM);
  else if (!strcmp(kind, "int"))
    raise(SIGINT);
  else if (!strcmp(kind, "quit"))
    raise(SIGQUIT);
  else if (!strcmp(kind, "hup"))
    kill(getpid(), SIGHUP);
  else if (!strcmp(kind, "pipe")) {
    int fd[2];
    if (pipe(fd) == 0) {
      close(fd[0]);
      if (write(fd[1], "x", 1) < 0)
        perror("write");
    }
  } else if (!strcmp(kind, "stackoverflow")) {
    recurse_p = recurse;
    recurse(0);
  }
  fprintf(stderr, "faults: still alive after %s\n", kind);
  exit(99);
}

/* ---- threads that call until told to stop ------------------------------- */

static _Atomic int stop_threads;
static _Atomic long thread_calls;

typedef struct {
  int id, exit_after, crash_after;
} worker_arg;

static void *worker(void *p) {
  worker_arg *a = p;
  for (int i = 0; !atomic_load(&stop_threads); i++) {
    one(a->id * 1000000 + i);
    atomic_fetch_add(&thread_calls, 1);
    if (a->exit_after && i == a->exit_after) {
      printf("thread %d calls exit\n", a->id);
      fflush(stdout);
      exit(5);
    }
    if (a->crash_after && i == a->crash_after)
      die("segv");
  }
  return NULL;
}

static pthread_t *start_workers(int n, worker_arg *args) {
  pthread_t *th = calloc((size_t)n, sizeof *th);
  for (int i = 0; i < n; i++) {
    args[i].id = i + 1;
    pthread_create(&th[i], NULL, worker, &args[i]);
  }
  return th;
}

static void stop_workers(pthread_t *th, int n) {
  atomic_store(&stop_threads, 1);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  free(th);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* Wait until at least n calls were made by the workers. */
static void wait_calls(long n) {
  while (atomic_load(&thread_calls) < n)
    sleep_ms(1);
}

/* ---- modes -------------------------------------------------------------- */

static int leader_n;

static void *outlive_main(void *p) {
  (void)p;
  sleep_ms(100); /* the main thread is gone by then */
  messages(leader_n, leader_n);
  return NULL; /* the last thread: glibc calls exit(0) */
}

static void say_exit(void) {
  printf("exit handlers ran\n");
}

static int run_leader_exit(int n) {
  pthread_t t;
  leader_n = n;
  atexit(say_exit);
  messages(0, n);
  pthread_create(&t, NULL, outlive_main, NULL);
  pthread_exit(NULL);
}

static void on_segv(int sig) {
  static const char msg[] = "own handler ran\n";
  ssize_t w = write(1, msg, sizeof msg - 1);
  (void)w;
  (void)sig;
  _exit(3);
}

static int child_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int run_forkmt(int t, int n) {
  worker_arg args[16] = {{0}};
  pthread_t *th = start_workers(t, args);
  wait_calls(50);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    messages(0, n);
    _exit(0);
  }
  int st = child_status(pid);
  stop_workers(th, t);
  printf("child exited %d\n", st);
  return 0;
}

/* one() from d frames deeper */
static int (*volatile deep_p)(int);
static __attribute__((noinline)) int deep(int d) {
  volatile int frame = d;
  if (d > 0)
    return deep_p(d - 1) + frame;
  return (int)(one(frame) & 1);
}

/* A worker rests 1 ms after every 16 calls: eight that never rest keep a
 * 2-core machine busy, and main and its children then wait for the CPU
 * while the workers record for as long as that takes (93-173 s and 2.3 GiB
 * of trace on a slow VM). Resting, a worker is inside a call some 10-30%
 * of the time, so most forks still find one there. */
static void *storm_worker(void *p) {
  worker_arg *a = p;
  unsigned seed = (unsigned)a->id;
  for (int i = 0; !atomic_load(&stop_threads); i++) {
    if (i % 2)
      deep_p(1 + (int)(rand_r(&seed) % 48));
    else
      one(a->id);
    atomic_fetch_add(&thread_calls, 1);
    if (i % 16 == 15)
      sleep_ms(1);
  }
  return NULL;
}

static int run_forkstorm(int t, int forks) {
  deep_p = deep;
  worker_arg args[16] = {{0}};
  pthread_t th[16];
  for (int i = 0; i < t; i++) {
    args[i].id = i + 1;
    pthread_create(&th[i], NULL, storm_worker, &args[i]);
  }
  wait_calls(20);
  fflush(stdout);
  int hung = 0;
  for (int f = 0; f < forks && !hung; f++) {
    pid_t pid = fork();
    if (pid == 0) {
      one(f);
      _exit(0);
    }
    int st = 0, waited = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && waited < 10000) {
      sleep_ms(1);
      waited++;
    }
    if (r == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      printf("child %d hung\n", f);
      hung = 1;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      printf("child %d ended with status %d\n", f, st);
      hung = 1;
    }
  }
  atomic_store(&stop_threads, 1);
  for (int i = 0; i < t; i++)
    pthread_join(th[i], NULL);
  if (!hung)
    printf("%d children exited 0\n", forks);
  return hung;
}

static int run_exec_child(const char *how, const char *prog, int n) {
  char num[16];
  snprintf(num, sizeof num, "%d", n);
  char *argv[] = {(char *)prog, "basic", num, NULL};
  fflush(stdout);
  pid_t pid;
  if (!strcmp(how, "vfork")) {
    pid = vfork();
    if (pid == 0) {
      execv(prog, argv);
      _exit(127);
    }
  } else if (posix_spawn(&pid, prog, NULL, NULL, argv, environ) != 0) {
    return 1;
  }
  int st = child_status(pid);
  messages(0, n);
  printf("child exited %d\n", st);
  return 0;
}

static int run_wait(const char *file, int n) {
  messages(0, n);
  struct stat st;
  for (int i = 0; i < 20000 && stat(file, &st) != 0; i++)
    sleep_ms(1);
  pid_t pid = fork();
  if (pid == 0) {
    messages(1000, n);
    exit(0);
  }
  printf("child exited %d\n", child_status(pid));
  messages(2000, n);
  return 0;
}

static int run_chroot(const char *dir, int n) {
  if (chroot(dir) != 0 || chdir("/") != 0) {
    fprintf(stderr, "faults: chroot %s: %s\n", dir, strerror(errno));
    return 1;
  }
  closefrom(3);
  messages(0, n);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    messages(1000, n);
    fflush(stdout);
    _exit(0);
  }
  printf("child exited %d\n", child_status(pid));
  messages(2000, n);
  return 0;
}

#define ALLOW(nr)                                                                                  \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

static int run_seccomp(const char *how, int n) {
  messages(0, n);
  fflush(stdout);
  /* what messages() and exit need: memory, stdout, a lock */
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      ALLOW(SYS_read),
      ALLOW(SYS_write),
      ALLOW(SYS_brk),
      ALLOW(SYS_mmap),
      ALLOW(SYS_munmap),
      ALLOW(SYS_futex),
      ALLOW(SYS_newfstatat),
      ALLOW(SYS_fstat),
      ALLOW(SYS_clock_gettime),
      ALLOW(SYS_rt_sigreturn),
      ALLOW(SYS_exit),
      ALLOW(SYS_exit_group),
      BPF_STMT(BPF_RET | BPF_K,
               !strcmp(how, "kill") ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    fprintf(stderr, "faults: seccomp: %s\n", strerror(errno));
    return 1;
  }
  messages(1000, n);
  fflush(stdout);
  _exit(0); /* as servers' workers leave: through the shims' _exit hook */
}

static int run_loop(int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0;; i++) {
    one(i);
    if (ms && i % 64 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
        return 0;
    }
  }
}

static int run_retitle(int argc, char **argv, int n) {
  /* the argv strings lie end to end: one title over all of them */
  char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]);
  const char *title = "faults: a worker with a new title";
  size_t room = (size_t)(end - start);
  memset(start, 0, room);
  memcpy(start, title, strlen(title) < room ? strlen(title) : room);
  messages(0, n);
  return 0;
}

static int race_after_ms;
static const char *race_how;

static void *race_exit(void *p) {
  (void)p;
  sleep_ms(race_after_ms);
  if (!strcmp(race_how, "_exit"))
    _exit(0);
  syscall(SYS_kill, (long)getpid(), (long)SIGTERM);
  return NULL;
}

static int run_exit_race(const char *how, int n, int ms) {
  messages(0, n);
  race_how = how;
  race_after_ms = ms;
  pthread_t th;
  pthread_create(&th, NULL, race_exit, NULL);
  printf("main exits\n");
  fflush(stdout); /* before the other thread may end the exit */
  exit(0);
}

static int run_detach(int n) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0)
    return perror("fork"), 1;
  if (pid > 0)
    return 0; /* the program's own process ends here */
  setsid();
  sleep_ms(1000); /* long past its parent's exit and standin's report of it */
  if (!freopen("detach.out", "w", stdout))
    _exit(1);
  messages(0, n);
  fflush(stdout);
  exit(0);
}

static int usage(void);

static const char *reraise_how;

static void on_term_reraise(int sig) {
  static const char msg[] = "cleaning up\n";
  ssize_t w = write(1, msg, sizeof msg - 1);
  (void)w;
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_flags = SA_SIGINFO; /* a null handler all the same: the default */
  sigaction(sig, &dfl, NULL);
  if (!strcmp(reraise_how, "raise"))
    raise(sig);
  else if (!strcmp(reraise_how, "pthread_kill"))
    pthread_kill(pthread_self(), sig);
  else
    kill(getpid(), sig);
}

static int run_reraise(const char *how, int n) {
  reraise_how = how;
  signal(SIGTERM, on_term_reraise);
  messages(0, n);
  kill(getpid(), strcmp(how, "sigkill") ? SIGTERM : SIGKILL);
  sleep_ms(1000); /* pending until the handler returns */
  printf("still alive\n");
  return 1;
}

static int run_daemon(const char *how, int n) {
  messages(0, n);
  fflush(stdout);
  sleep_ms(50); /* the writer has the trace file open and written to */
  long max = sysconf(_SC_OPEN_MAX);
  if (max <= 0 || max > 1024)
    max = 1024;
  int fds[8];
  if (!strcmp(how, "loop")) {
    int closed = 0; /* as many as without standin: its own are not the program's */
    for (long fd = max - 1; fd >= 3; fd--)
      closed += close((int)fd) == 0;
    printf("closed %d\n", closed);
  } else if (!strcmp(how, "closefrom")) {
    closefrom(3);
  } else if (!strcmp(how, "range")) {
    if (close_range(3, ~0u, 0) != 0)
      return perror("close_range"), 1;
  } else if (strcmp(how, "dup2") != 0) {
    return usage();
  }
  for (int k = 0; k < 8; k++) {
    char name[32];
    snprintf(name, sizeof name, "daemon.%d", k);
    fds[k] = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fds[k] < 0)
      return perror(name), 1;
  }
  if (!strcmp(how, "dup2")) { /* onto any descriptor of a trace file, then closed */
    for (long fd = 3; fd < max; fd++) {
      char link[64], target[256];
      snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
      ssize_t len = readlink(link, target, sizeof target - 1);
      if (len < 6 || memcmp(target + len - 6, ".trace", 6) != 0)
        continue;
      if (dup2(fds[0], (int)fd) < 0)
        return perror("dup2"), 1;
      close((int)fd);
    }
  }
  for (int i = n; i < 2 * n; i++) {
    char line[64];
    int len = snprintf(line, sizeof line, "msg %d %016llx\n", i, (unsigned long long)one(i));
    if (write(fds[i % 8], line, (size_t)len) != len)
      return perror("write"), 1;
  }
  for (int k = 0; k < 8; k++)
    close(fds[k]);
  printf("daemon done\n");
  return 0;
}

static int usage(void) {
  fprintf(stderr, "usage: faults MODE ARGS (see the comment in faults.c)\n");
  return 2;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOFBF, 1 << 16);
  if (argc < 3)
    return usage();
  const char *mode = argv[1];
  int a = atoi(argv[2]), b = argc > 3 ? atoi(argv[3]) : 0;
  if (!strcmp(mode, "crash") && argc > 3) {
    messages(0, b);
    die(argv[2]);
  }
  if (!strcmp(mode, "crash-thread")) {
    worker_arg args[4] = {{0}};
    args[2].crash_after = a;
    start_workers(4, args);
    for (;;)
      sleep_ms(1000);
  }
  if (!strcmp(mode, "reraise") && argc > 3)
    return run_reraise(argv[2], b);
  if (!strcmp(mode, "own-handler")) {
    signal(SIGSEGV, on_segv);
    messages(0, a);
    die("segv");
  }
  if (!strcmp(mode, "retitle"))
    return run_retitle(argc, argv, a);
  if (!strcmp(mode, "exit-race") && argc > 4)
    return run_exit_race(argv[2], b, atoi(argv[4]));
  if (!strcmp(mode, "busy-exit") || !strcmp(mode, "thread-exit")) {
    worker_arg args[16] = {{0}};
    int t = a < 1 ? 1 : a > 16 ? 16 : a;
    if (!strcmp(mode, "thread-exit"))
      args[0].exit_after = 200;
    start_workers(t, args);
    wait_calls(100);
    if (!strcmp(mode, "thread-exit"))
      for (;;) /* the worker's exit ends the process, however slow it is */
        sleep_ms(1000);
    sleep_ms(200);
    printf("main exits\n");
    exit(0);
  }
  if (!strcmp(mode, "forkmt") && argc > 3)
    return run_forkmt(a < 1 ? 1 : a > 16 ? 16 : a, b);
  if (!strcmp(mode, "forkstorm") && argc > 3)
    return run_forkstorm(a < 1 ? 1 : a > 16 ? 16 : a, b);
  if ((!strcmp(mode, "vfork") || !strcmp(mode, "spawn")) && argc > 3)
    return run_exec_child(mode, argv[2], b);
  if (!strcmp(mode, "wait") && argc > 3)
    return run_wait(argv[2], b);
  if (!strcmp(mode, "seccomp") && argc > 3)
    return run_seccomp(argv[2], b);
  if (!strcmp(mode, "chroot") && argc > 3)
    return run_chroot(argv[2], b);
  if (!strcmp(mode, "loop"))
    return run_loop(a);
  if (!strcmp(mode, "detach"))
    return run_detach(a);
  if (!strcmp(mode, "leader-exit"))
    return run_leader_exit(a);
  if (!strcmp(mode, "daemon") && argc > 3)
    return run_daemon(argv[2], b);
  if (!strcmp(mode, "errno") && argc > 2) {
    watch_errno = 1;
    messages(0, atoi(argv[2]));
    int any = 0;
    for (int k = 0; k < 4; k++)
      if (errno_left[k])
        any = printf("%s left errno %d (%s)\n", errno_call[k], errno_left[k],
                     strerror(errno_left[k]));
    if (!any)
      printf("no call left errno set\n");
    return 0;
  }
  if (!strcmp(mode, "paced"))
    for (int i = 0;; i++) {
      one(i);
      struct timespec ts = {a / 1000000, (long)(a % 1000000) * 1000};
      nanosleep(&ts, NULL);
    }
  return usage();
}

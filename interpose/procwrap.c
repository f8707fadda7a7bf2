/* procwrap.c — exec* and _exit wrappers shared by the preload runtimes.
 *
 * Both end the process image without running exit handlers or
 * destructors, so each runtime gets a last chance to flush: the runtime
 * defines shim_on_exec() and shim_on_exit() (see shim.h). A vfork child
 * runs these in its parent's memory: the callbacks must check that they run
 * in the process they belong to.
 *
 * chroot: a server that confines itself (named -t, unbound, nsd) makes its
 * calls, and forks its workers, where standin's paths no longer lead; the
 * runtime gets what it needs from outside first (shim_on_chroot).
 *
 * seccomp: a filter may refuse, or kill the process for, any system call
 * the runtime makes after it (creating a file, starting a thread, loading
 * a library). Installed through prctl or seccomp(2) (libseccomp calls the
 * latter with syscall()); the runtime acts first (shim_on_seccomp). */
#include <alloca.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fatal.h"
#include "shim.h"

extern char **environ;

int shim_env_follows(char *const envp[], const char *lib, const char *var) {
  int pre = 0, set = 0;
  size_t vl = strlen(var);
  for (size_t i = 0; envp && envp[i]; i++) {
    if (!strncmp(envp[i], "LD_PRELOAD=", 11) && strstr(envp[i] + 11, lib))
      pre = 1;
    else if (!strncmp(envp[i], var, vl) && envp[i][vl] == '=')
      set = 1;
  }
  return pre && set;
}

/* prctl and syscall are called from other libraries' constructors (libcap's
 * calls prctl), which may run before the shim's and, in a sanitizer build,
 * before the ASan runtime is set up: they touch nothing instrumented, and
 * find the real function with EARLY_REAL. */
SHIM_UNINSTRUMENTED SHIM_EXPORT int prctl(int option, ...) {
  EARLY_REAL(real, prctl);
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long),
                a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  if (option == PR_SET_SECCOMP && (a2 == SECCOMP_MODE_STRICT || a2 == SECCOMP_MODE_FILTER))
    shim_on_seccomp();
  return real(option, a2, a3, a4, a5);
}

/* glibc's syscall() takes the number and six arguments, and passes on all
 * six whatever the call has; so does this. On x86-64 the sixth comes from
 * the caller's stack, a slot of its frame that a call with fewer arguments
 * did not write: ASan would call reading it an underflow. */
SHIM_UNINSTRUMENTED SHIM_EXPORT long syscall(long number, ...) {
  EARLY_REAL(real, syscall);
  va_list ap;
  va_start(ap, number);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long), a4 = va_arg(ap, long),
       a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_seccomp && (a1 == SECCOMP_SET_MODE_STRICT || a1 == SECCOMP_SET_MODE_FILTER))
    shim_on_seccomp();
  return real(number, a1, a2, a3, a4, a5, a6);
}

SHIM_EXPORT int chroot(const char *path) {
  SHIM_REAL(real, chroot);
  shim_on_chroot();
  return real(path);
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, execve);
  shim_on_exec_env(path, envp);
  shim_on_exec();
  int rc = real(path, argv, envp);
  shim_on_exec_failed();
  return rc;
}

SHIM_EXPORT int execv(const char *path, char *const argv[]) {
  SHIM_REAL(real, execv);
  shim_on_exec_env(path, environ);
  shim_on_exec();
  int rc = real(path, argv);
  shim_on_exec_failed();
  return rc;
}

SHIM_EXPORT int execvp(const char *file, char *const argv[]) {
  SHIM_REAL(real, execvp);
  shim_on_exec_env(file, environ);
  shim_on_exec();
  int rc = real(file, argv);
  shim_on_exec_failed();
  return rc;
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, execvpe);
  shim_on_exec_env(file, envp);
  shim_on_exec();
  int rc = real(file, argv, envp);
  shim_on_exec_failed();
  return rc;
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, fexecve);
  shim_on_exec_env(argv[0], envp);
  shim_on_exec();
  int rc = real(fd, argv, envp);
  shim_on_exec_failed();
  return rc;
}

/* posix_spawn starts a program without passing through the exec calls
 * above: a runtime that has descriptors to hand on (replay's, for a PID
 * namespace with its own /proc) makes them inheritable around it. glibc's
 * own system() and popen() spawn through an internal entry, unseen. */
SHIM_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, posix_spawn);
  shim_on_exec_env(path, envp);
  shim_on_spawn(1);
  int rc = real(pid, path, fa, attr, argv, envp);
  shim_on_spawn(0);
  return rc;
}

SHIM_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                             const posix_spawnattr_t *attr, char *const argv[],
                             char *const envp[]) {
  SHIM_REAL(real, posix_spawnp);
  shim_on_exec_env(file, envp);
  shim_on_spawn(1);
  int rc = real(pid, file, fa, attr, argv, envp);
  shim_on_spawn(0);
  return rc;
}

/* _exit skips exit handlers, and forked children often leave with it: flush
 * first. (exit() reaches _exit inside libc without passing through here.) */
SHIM_EXPORT void _exit(int status) {
  SHIM_REAL(real, _exit);
  shim_on_exit();
  real(status);
  __builtin_unreachable();
}

/* glibc's daemon() forks, and its parent leaves by an _exit inside libc,
 * past the hook above: the parent's calls since its trace last flushed, and
 * its replay counts, were lost (1,000 packs, then daemon(): a trace of no
 * call). The same steps as glibc's, the parent leaving through the hook. */
SHIM_EXPORT int daemon(int nochdir, int noclose) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid > 0)
    _exit(0);
  if (setsid() < 0)
    return -1;
  if (!nochdir)
    (void)!chdir("/");
  if (noclose)
    return 0;
  int fd = open("/dev/null", O_RDWR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) { /* not /dev/null */
    close(fd);
    errno = ENODEV;
    return -1;
  }
  dup2(fd, 0);
  dup2(fd, 1);
  dup2(fd, 2);
  if (fd > 2)
    close(fd);
  return 0;
}

SHIM_EXPORT void _Exit(int status) {
  SHIM_REAL(real, _Exit);
  shim_on_exit();
  real(status);
  __builtin_unreachable();
}

/* A program that handles a fatal signal often ends by putting its default
 * action back and sending the signal to itself (php-fpm's workers, told to
 * stop, die so of SIGTERM): its handler had replaced the shim's, and the
 * runtime's last data (a trace's unflushed calls, a replay's counts) died
 * with it. Before a signal is sent to this process, the shim's handler goes
 * back on it where the program left the default (fatal.h). These run in
 * signal handlers: the real functions are found at load, not at the call. */
static int (*real_kill)(pid_t, int);
static int (*real_raise)(int);
static int (*real_pthread_kill)(pthread_t, int);

__attribute__((constructor)) static void find_signal_senders(void) {
  real_kill = (int (*)(pid_t, int))shim_real("kill");
  real_raise = (int (*)(int))shim_real("raise");
  real_pthread_kill = (int (*)(pthread_t, int))shim_real("pthread_kill");
}

SHIM_EXPORT int kill(pid_t pid, int sig) {
  if (!real_kill)
    find_signal_senders(); /* a call before our constructor ran */
  /* 0 and -(our group) reach us too; -1 does not (Linux spares the
   * sender), but a handler put back there costs nothing */
  if (shim_fatal_watches(sig) && (pid <= 0 || pid == getpid()))
    shim_fatal_before_send(sig, pid > 0 || pid == 0 || pid == -getpgrp());
  return real_kill(pid, sig);
}

SHIM_EXPORT int raise(int sig) {
  if (!real_raise)
    find_signal_senders();
  if (shim_fatal_watches(sig))
    shim_fatal_before_send(sig, 1);
  return real_raise(sig);
}

/* Any thread of the process: a fatal signal's default action ends all of
 * them. */
SHIM_EXPORT int pthread_kill(pthread_t thread, int sig) {
  if (!real_pthread_kill)
    find_signal_senders();
  if (shim_fatal_watches(sig))
    shim_fatal_before_send(sig, 1);
  return real_pthread_kill(thread, sig);
}

/* The execl family takes a NULL-terminated list; collect it into argv. */
#define COLLECT_ARGS(first, ap, argv, envp_out)                                                    \
  do {                                                                                             \
    size_t n_ = 1;                                                                                 \
    va_list c_;                                                                                    \
    va_copy(c_, ap);                                                                               \
    while (va_arg(c_, char *))                                                                     \
      n_++;                                                                                        \
    va_end(c_);                                                                                    \
    argv = alloca((n_ + 1) * sizeof(char *));                                                      \
    argv[0] = (char *)(first);                                                                     \
    for (size_t i_ = 1; i_ <= n_; i_++)                                                            \
      argv[i_] = va_arg(ap, char *);                                                               \
    char ***want_env_ = (envp_out);                                                                \
    if (want_env_)                                                                                 \
      *want_env_ = va_arg(ap, char **);                                                            \
  } while (0)

SHIM_EXPORT int execl(const char *path, const char *arg, ...) {
  char **argv;
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, (char ***)NULL);
  va_end(ap);
  return execv(path, argv);
}

SHIM_EXPORT int execlp(const char *file, const char *arg, ...) {
  char **argv;
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, (char ***)NULL);
  va_end(ap);
  return execvp(file, argv);
}

SHIM_EXPORT int execle(const char *path, const char *arg, ...) {
  char **argv, **envp = NULL;
  va_list ap;
  va_start(ap, arg);
  COLLECT_ARGS(arg, ap, argv, &envp);
  va_end(ap);
  return execve(path, argv, envp);
}

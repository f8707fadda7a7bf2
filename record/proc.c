/* proc.c — process and thread events seen by the record shim.
 *
 * pthread_create: gives every thread a stable index (creation order), which
 * the trace uses instead of kernel tids that change from run to run.
 * exec*: the process image is about to be replaced, so the writer drains
 * every ring and closes the file first (exit handlers will not run). If the
 * exec fails, the next call opens a new file. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "record_internal.h"
#include "shim.h"

struct tramp {
  void *(*fn)(void *);
  void *arg;
  uint32_t index, parent;
};

static _Atomic uint32_t thread_counter = 1; /* main thread is 0 */

static void *tramp_main(void *p) {
  struct tramp t = *(struct tramp *)p;
  free(p);
  rt_my_index = t.index;
  rt_my_parent = t.parent;
  return t.fn(t.arg);
}

SHIM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                               void *arg) {
  SHIM_REAL(real, pthread_create);
  struct tramp *t = malloc(sizeof *t);
  if (!t)
    return real(th, attr, fn, arg);
  t->fn = fn;
  t->arg = arg;
  t->index = atomic_fetch_add(&thread_counter, 1);
  t->parent = rt_my_index == UINT32_MAX ? 0 : rt_my_index;
  int rc = real(th, attr, tramp_main, t);
  if (rc != 0)
    free(t);
  return rc;
}

/* Threads not created through pthread_create take the next index. */
uint32_t rt_next_thread_index(void) {
  return atomic_fetch_add(&thread_counter, 1);
}

/* A vfork child shares our memory and must not touch the writer. */
static void before_exec(void) {
  if ((uint32_t)getpid() == rt_cfg.pid)
    rt_before_exec();
}

SHIM_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, execve);
  before_exec();
  return real(path, argv, envp);
}

SHIM_EXPORT int execv(const char *path, char *const argv[]) {
  SHIM_REAL(real, execv);
  before_exec();
  return real(path, argv);
}

SHIM_EXPORT int execvp(const char *file, char *const argv[]) {
  SHIM_REAL(real, execvp);
  before_exec();
  return real(file, argv);
}

SHIM_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, execvpe);
  before_exec();
  return real(file, argv, envp);
}

SHIM_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  SHIM_REAL(real, fexecve);
  before_exec();
  return real(fd, argv, envp);
}

/* _exit skips exit handlers, and forked children often leave with it: flush
 * first. (exit() reaches _exit inside libc without passing through here.) */
SHIM_EXPORT void _exit(int status) {
  SHIM_REAL(real, _exit);
  if ((uint32_t)getpid() == rt_cfg.pid)
    rt_before_exit();
  real(status);
  __builtin_unreachable();
}

SHIM_EXPORT void _Exit(int status) {
  SHIM_REAL(real, _Exit);
  if ((uint32_t)getpid() == rt_cfg.pid)
    rt_before_exit();
  real(status);
  __builtin_unreachable();
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

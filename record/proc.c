/* proc.c — process and thread events seen by the record shim.
 *
 * pthread_create: gives every thread a stable index (creation order), which
 * the trace uses instead of kernel tids that change from run to run.
 * exec* and _exit (wrapped in interpose/procwrap.c): the process image ends
 * without exit handlers, so the writer drains every ring and closes the
 * file first. If an exec fails, the next call opens a new file.
 * dlclose: the writer reads message descriptors after the call, so it
 * drains the rings before a library can take them away. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record_internal.h"
#include "shim.h"
#include "shim_alloc.h"
#include "typecap.h"

struct tramp {
  void *(*fn)(void *);
  void *arg;
  uint32_t index, parent;
};

static _Atomic uint32_t thread_counter = 1; /* main thread is 0 */

static void *tramp_main(void *p) {
  struct tramp t = *(struct tramp *)p;
  shim_free(p);
  rt_my_index = t.index;
  rt_my_parent = t.parent;
  /* the stack's bounds are asked for at the thread's first call
   * (thread_self): not this frame's address, which t.fn's frames are not
   * all below once the call to it is a tail call */
  return t.fn(t.arg);
}

SHIM_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                               void *arg) {
  SHIM_REAL(real, pthread_create);
  struct tramp *t = shim_alloc(sizeof *t); /* not from the program's heap */
  if (!t)
    return real(th, attr, fn, arg);
  t->fn = fn;
  t->arg = arg;
  t->index = atomic_fetch_add(&thread_counter, 1);
  t->parent = rt_my_index == UINT32_MAX ? 0 : rt_my_index;
  int rc = real(th, attr, tramp_main, t);
  if (rc != 0)
    shim_free(t);
  return rc;
}

/* The main thread leaving while other threads go on (rt_leader_exits). */
SHIM_EXPORT void pthread_exit(void *ret) {
  SHIM_REAL(real, pthread_exit);
  if (syscall(SYS_gettid) == getpid())
    rt_leader_exits();
  real(ret);
  __builtin_unreachable();
}

/* Threads not created through pthread_create take the next index. */
uint32_t rt_next_thread_index(void) {
  return atomic_fetch_add(&thread_counter, 1);
}

/* The shared exec/_exit wrappers (interpose/procwrap.c) call these. A vfork
 * child shares our memory and must not touch the writer. */
void shim_on_exec(void) {
  if (!rt_sealed && (uint32_t)getpid() == rt_cfg.pid)
    rt_before_exec();
}

/* A program started with an environment that lacks the record shim in
 * LD_PRELOAD, or STANDIN_DIR (env -i, a program that clears LD_PRELOAD or
 * sets its own), runs unrecorded, and so do the programs it starts: the
 * process leaves a note for standin record, as one that could not create
 * its trace does (sink.c), a symbolic link PID.unfollowed to the program.
 * Its first such program only. A vfork child, in its parent's memory,
 * makes only system calls and writes only `noted`, which is then not the
 * parent's pid. */
static _Atomic pid_t noted; /* the process whose exec made the note */

static void note_path(char *p, size_t cap, pid_t pid) {
  snprintf(p, cap, "%s/%d.unfollowed", rt_cfg.dir, (int)pid);
}

void shim_on_exec_env(const char *prog, char *const envp[]) {
  if (rt_sealed || rt_cfg.apis == 0 || rt_cfg.timing || rt_cfg.no_follow || !prog ||
      shim_env_follows(envp, "libstandin-record.so", "STANDIN_DIR"))
    return;
  int saved = errno;
  char p[PATH_MAX + 32];
  const char *rel;
  pid_t pid = getpid();
  note_path(p, sizeof p, pid);
  int at = rt_dir_at(p, &rel);
  if (symlinkat(prog, at, rel) == 0)
    atomic_store(&noted, pid);
  errno = saved;
}

void shim_on_exec_failed(void) {
  /* a later call opens the next file (rt_before_exec left recording idle);
   * the program whose environment was noted did not start */
  pid_t pid = getpid(), me = pid;
  if (atomic_compare_exchange_strong(&noted, &me, 0)) {
    int saved = errno;
    char p[PATH_MAX + 32];
    const char *rel;
    note_path(p, sizeof p, pid);
    int at = rt_dir_at(p, &rel);
    unlinkat(at, rel, 0);
    errno = saved;
  }
}

void shim_on_spawn(int starting) {
  (void)starting; /* the spawned program loads its own shim from LD_PRELOAD */
}

void shim_on_exit(void) {
  if (!rt_sealed && (uint32_t)getpid() == rt_cfg.pid)
    rt_before_exit();
}

void shim_on_chroot(void) {
  rt_before_chroot();
}

void shim_on_seccomp(void) {
  rt_before_seccomp();
}

/* A library with generated message descriptors (a plugin) may be unloaded:
 * the writer must be done with its descriptors first. */
SHIM_EXPORT int dlclose(void *handle) {
  SHIM_REAL(real, dlclose);
  rt_type_unloaded(); /* before and after: a class taken between goes stale */
  rt_before_unload();
  int r = real(handle);
  rt_type_unloaded();
  return r;
}

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
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "record_internal.h"
#include "shim.h"
#include "shim_alloc.h"

struct tramp {
  void *(*fn)(void *);
  void *arg;
  uint32_t index, parent;
  size_t stack; /* the thread's stack size; 0 if unknown */
};

static _Atomic uint32_t thread_counter = 1; /* main thread is 0 */

static void *tramp_main(void *p) {
  struct tramp t = *(struct tramp *)p;
  shim_free(p);
  rt_my_index = t.index;
  rt_my_parent = t.parent;
  /* every frame of the program's thread is below this one */
  uintptr_t hi = (uintptr_t)__builtin_frame_address(0);
  if (t.stack > STACK_MARGIN)
    rt_stack_bounds(hi - t.stack + STACK_MARGIN, hi);
  return t.fn(t.arg);
}

/* The stack size a thread created with attr gets (0: cannot tell). */
static size_t stack_size(const pthread_attr_t *attr) {
  pthread_attr_t def;
  size_t size = 0;
  if (attr)
    return pthread_attr_getstacksize(attr, &size) == 0 ? size : 0;
  if (pthread_getattr_default_np(&def) != 0)
    return 0;
  if (pthread_attr_getstacksize(&def, &size) != 0)
    size = 0;
  pthread_attr_destroy(&def);
  return size;
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
  t->stack = stack_size(attr);
  int rc = real(th, attr, tramp_main, t);
  if (rc != 0)
    shim_free(t);
  return rc;
}

/* Threads not created through pthread_create take the next index. */
uint32_t rt_next_thread_index(void) {
  return atomic_fetch_add(&thread_counter, 1);
}

/* The shared exec/_exit wrappers (interpose/procwrap.c) call these. A vfork
 * child shares our memory and must not touch the writer. */
void shim_on_exec(void) {
  if ((uint32_t)getpid() == rt_cfg.pid)
    rt_before_exec();
}

void shim_on_exit(void) {
  if ((uint32_t)getpid() == rt_cfg.pid)
    rt_before_exit();
}

/* A library with generated message descriptors (a plugin) may be unloaded:
 * the writer must be done with its descriptors first. */
SHIM_EXPORT int dlclose(void *handle) {
  SHIM_REAL(real, dlclose);
  rt_before_unload();
  return real(handle);
}

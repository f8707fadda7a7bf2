/* lazylibs.h — libunwind, loaded at a process's first unwind (lazylibs.c).
 * libdeflate needs no declarations here: its functions keep their names. */
#ifndef STANDIN_LAZYLIBS_H
#define STANDIN_LAZYLIBS_H

#ifndef __SANITIZE_THREAD__ /* TSan builds unwind with glibc's backtrace */
#ifndef UNW_LOCAL_ONLY
#define UNW_LOCAL_ONLY /* the names of the local-only unwinder (_UL...) */
#endif
#include <libunwind.h>

typedef struct {
  int (*getcontext)(unw_context_t *);
  int (*init_local)(unw_cursor_t *, unw_context_t *);
  int (*step)(unw_cursor_t *);
  int (*get_reg)(unw_cursor_t *, int, unw_word_t *);
  int (*backtrace)(void **, int);
} rt_unw_fns;

/* Set once rt_unw_ready has loaded libunwind; all NULL when it could not. */
extern rt_unw_fns rt_unw;
/* Load libunwind if no thread has yet (once a process, said if it fails);
 * 1 when rt_unw can be called. */
int rt_unw_ready(void);
#endif

/* Load libdeflate now if no thread has yet (the writer loads it when it
 * creates the trace file; a chroot cannot wait for that). */
void rt_deflate_ready(void);

#endif

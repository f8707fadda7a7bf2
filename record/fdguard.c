/* fdguard.c — keeping standin's descriptors from the program.
 *
 * Daemons close every descriptor they did not open (a loop over close, or
 * closefrom / close_range) and then open files of their own, which take
 * the lowest free numbers. Had one of standin's been closed and its number
 * handed out again, standin would write into the program's file: the
 * trace writer its chunks, and libunwind the byte it writes to a pipe of
 * its own to check that an address is readable (it also reads from that
 * pipe, and closes it to open a new one when a read fails). Both are
 * standin's: the trace file sits near the top of the table
 * (st_set_high_fd), libunwind's pipe is moved there when it is made, and
 * these hooks keep them open. To the program a close of one fails with
 * EBADF, as it would without standin, where that number is not open; a
 * range skips them, and a dup2 onto the trace file first moves it to
 * another number (wr_release_fd). A dup2 onto libunwind's pipe cannot be
 * undone that way (libunwind keeps the numbers), but nothing but a guess
 * would reach those two numbers near 1024. None of these descriptors is
 * inherited by a program that is exec'ed (close-on-exec). */
#include <errno.h>
#include <limits.h>
#include <linux/close_range.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "record_internal.h"
#include "shim.h"

/* libunwind's pipe: made once per process when libunwind initialises
 * (the process's first unwind), again only when a check finds it broken.
 * The child of a fork keeps it. */
static _Atomic int unw_pipe[2] = {-1, -1};

static int is_unw_pipe(int fd) {
  return fd >= 0 && (fd == atomic_load_explicit(&unw_pipe[0], memory_order_acquire) ||
                     fd == atomic_load_explicit(&unw_pipe[1], memory_order_acquire));
}

/* One of standin's, which the program must not close. */
static int is_ours(int fd) {
  return fd >= 0 && (fd == wr_trace_fd() || is_unw_pipe(fd) || fd == rt_dir_fd());
}

static void take_pipe(int *fds) {
  fds[0] = st_fd_to_high(fds[0]);
  fds[1] = st_fd_to_high(fds[1]);
  atomic_store_explicit(&unw_pipe[0], fds[0], memory_order_release);
  atomic_store_explicit(&unw_pipe[1], fds[1], memory_order_release);
}

SHIM_EXPORT int pipe2(int fds[2], int flags) {
  SHIM_REAL(real, pipe2);
  int rc = real(fds, flags);
  if (rc == 0 && rt_in_unwind)
    take_pipe(fds);
  return rc;
}

SHIM_EXPORT int pipe(int fds[2]) {
  SHIM_REAL(real, pipe);
  int rc = real(fds);
  if (rc == 0 && rt_in_unwind)
    take_pipe(fds);
  return rc;
}

static __attribute__((noinline)) int guarded_close(int fd) {
  SHIM_REAL(real, close);
  if (rt_in_unwind) { /* libunwind closing its pipe, to open another */
    for (int k = 0; k < 2; k++) {
      int want = fd;
      atomic_compare_exchange_strong(&unw_pipe[k], &want, -1);
    }
    return real(fd);
  }
  if (is_ours(fd)) { /* as without standin, where nothing is open there */
    errno = EBADF;
    return -1;
  }
  return real(fd);
}

/* Other libraries' constructors close descriptors, and may run before the
 * shim's (rt_init, which sets rt_cfg.pid) and, in a sanitizer build, before
 * the ASan runtime is set up, when nothing instrumented may run: libcap-ng's,
 * in every PostgreSQL server process. None of standin's descriptors exists
 * before rt_init. */
SHIM_UNINSTRUMENTED SHIM_EXPORT int close(int fd) {
  if (SHIM_UNLIKELY(rt_cfg.pid == 0)) {
    EARLY_REAL(early, close);
    return early(fd);
  }
  return guarded_close(fd);
}

SHIM_EXPORT int dup2(int oldfd, int newfd) {
  SHIM_REAL(real, dup2);
  if (oldfd != newfd && newfd >= 0 && newfd == wr_trace_fd())
    wr_release_fd(newfd);
  if (oldfd != newfd && newfd >= 0 && newfd == rt_dir_fd())
    rt_release_dir_fd(newfd);
  return real(oldfd, newfd);
}

SHIM_EXPORT int dup3(int oldfd, int newfd, int flags) {
  SHIM_REAL(real, dup3);
  if (oldfd != newfd && newfd >= 0 && newfd == wr_trace_fd())
    wr_release_fd(newfd);
  if (oldfd != newfd && newfd >= 0 && newfd == rt_dir_fd())
    rt_release_dir_fd(newfd);
  return real(oldfd, newfd, flags);
}

/* standin's descriptors, ascending (-1 for none first). */
#define OURS 4

static void ours_sorted(int keep[OURS]) {
  keep[0] = wr_trace_fd();
  keep[1] = atomic_load(&unw_pipe[0]);
  keep[2] = atomic_load(&unw_pipe[1]);
  keep[3] = rt_dir_fd();
  for (int i = 0; i < OURS; i++)
    for (int j = i + 1; j < OURS; j++)
      if (keep[j] < keep[i]) {
        int t = keep[i];
        keep[i] = keep[j];
        keep[j] = t;
      }
}

/* close_range over [first, last] but standin's descriptors in it: the
 * gaps between them, in order. */
static int close_around(unsigned first, unsigned last, int flags) {
  int keep[OURS];
  ours_sorted(keep);
  unsigned from = first;
  for (int i = 0; i < OURS; i++) {
    if (keep[i] < 0 || (unsigned)keep[i] < from || (unsigned)keep[i] > last)
      continue;
    if ((unsigned)keep[i] > from &&
        syscall(SYS_close_range, from, (unsigned)keep[i] - 1, flags) != 0)
      return -1;
    flags &= ~CLOSE_RANGE_UNSHARE; /* done by the first call */
    from = (unsigned)keep[i] + 1;
    if (from == 0) /* past UINT_MAX */
      return 0;
  }
  return from <= last ? (int)syscall(SYS_close_range, from, last, flags) : 0;
}

static int any_ours_in(unsigned first, unsigned last) {
  int keep[OURS];
  ours_sorted(keep);
  for (int i = 0; i < OURS; i++)
    if (keep[i] >= 0 && (unsigned)keep[i] >= first && (unsigned)keep[i] <= last)
      return 1;
  return 0;
}

SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags) {
  SHIM_REAL(real, close_range);
  /* marking close-on-exec leaves them open: they are marked already */
  if ((flags & CLOSE_RANGE_CLOEXEC) || !any_ours_in(first, last))
    return real(first, last, flags);
  return close_around(first, last, flags);
}

SHIM_EXPORT void closefrom(int lowfd) {
  SHIM_REAL(real, closefrom);
  if (lowfd < 0 || !any_ours_in((unsigned)lowfd, UINT_MAX)) {
    real(lowfd);
    return;
  }
  int saved = errno;
  if (close_around((unsigned)lowfd, UINT_MAX, 0) != 0) {
    /* no close_range in this kernel: one by one, through the hook above */
    long max = sysconf(_SC_OPEN_MAX);
    for (long i = lowfd; i < (max > 0 ? max : 1024); i++)
      close((int)i);
  }
  errno = saved;
}

/* highfd.c — the high descriptors a writer inside another program keeps
 * its files on (st_set_high_fd, trace.h). Apart from the writer so that the
 * replay shim, which keeps its database there too, links them without the
 * writer and its compressor (libdeflate). */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "format.h"
#include "trace.h"

static int fd_high; /* st_set_high_fd */

int stf_high_fd_on(void) {
  return fd_high;
}

/* The lowest descriptor to move a trace file to: near the top of the
 * soft limit, but below 1024 (a descriptor table is as large as its
 * highest descriptor, and select() cannot see past 1023). */
int st_high_floor(void) {
  struct rlimit rl;
  rlim_t top = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < top)
    top = rl.rlim_cur;
  return (int)(top - top / 16);
}

/* Grow the descriptor table to hold the high descriptors now. The kernel
 * grows it when a descriptor past its end is made, and in a process that
 * has other threads it first waits for an RCU grace period
 * (expand_fdtable): kresd, which starts a thread before its first query,
 * stalled 24 ms in its first recorded call when libunwind's pipe was moved
 * up. At the shim's start the process has one thread, and the growth costs
 * two system calls. The table never shrinks; a fork's copy keeps its size. */
static void grow_fd_table(void) {
  int floor = st_high_floor(), own = -1;
  int from = fcntl(2, F_GETFD) >= 0 ? 2 : (own = open("/", O_PATH | O_CLOEXEC));
  int hi = from >= 0 ? fcntl(from, F_DUPFD_CLOEXEC, floor) : -1;
  if (hi >= 0)
    syscall(SYS_close, hi);
  if (own >= 0)
    syscall(SYS_close, own);
}

void st_set_high_fd(int on) {
  fd_high = on != 0;
  if (fd_high)
    grow_fd_table();
}

int st_fd_to_high(int fd) {
  int floor = st_high_floor();
  if (fd < 0 || fd >= floor)
    return fd;
  int hi = fcntl(fd, F_DUPFD_CLOEXEC, floor);
  if (hi < 0)
    return fd;
  close(fd);
  return hi;
}

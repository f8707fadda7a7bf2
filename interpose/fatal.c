/* fatal.c — see fatal.h. */
#include "fatal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Signals whose default action terminates the process. SIGKILL and SIGSTOP
 * cannot be caught; SIGCHLD, SIGCONT, SIGURG and SIGWINCH do not end it. */
static const int fatal_signals[] = {
    SIGSEGV, SIGBUS, SIGFPE, SIGILL,  SIGABRT, SIGTRAP, SIGSYS,  SIGQUIT,   SIGXCPU, SIGXFSZ,
    SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGVTALRM, SIGPROF,
};

static void (*before)(int);
static struct sigaction ours; /* the handler, as shim_fatal_install puts it */

/* The default action: a null handler, whatever the flags say (PHP puts
 * SIG_DFL back with SA_SIGINFO still set; the kernel goes by the handler). */
static int at_default(const struct sigaction *sa) {
  return sa->sa_handler == SIG_DFL;
}

static void set_default(int sig) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
}

static int ends_by_default(int sig) {
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
    if (fatal_signals[i] == sig)
      return 1;
  return 0;
}

/* Whether returning from the handler re-executes a faulting instruction. */
static int refaults(int sig, const siginfo_t *si) {
  if (si == NULL || si->si_code <= 0) /* SI_USER, SI_TKILL, SI_QUEUE...: sent */
    return 0;
  switch (sig) {
  case SIGSEGV:
  case SIGILL:
  case SIGFPE: return 1;
  case SIGBUS: return si->si_code != BUS_MCEERR_AO; /* AO: asynchronous report */
  default: return 0;                                /* SIGTRAP, SIGSYS: execution goes on */
  }
}

static void on_fatal_signal(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  int saved = errno;
  if (before)
    before(sig);
  set_default(sig);
  /* pending until we return: sig is blocked in its handler. Not raise():
   * that is the shim's own hook (procwrap.c), which would put this handler
   * back on the signal. */
  if (!refaults(sig, si))
    syscall(SYS_tgkill, (long)getpid(), (long)syscall(SYS_gettid), (long)sig);
  errno = saved;
}

void shim_fatal_install(void (*before_death)(int sig)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
    sigaddset(&sa.sa_mask, fatal_signals[i]);
  ours = sa;
  before = before_death;
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
    struct sigaction old;
    if (sigaction(fatal_signals[i], NULL, &old) != 0)
      continue;
    if (at_default(&old))
      sigaction(fatal_signals[i], &sa, NULL);
  }
}

void shim_fatal_uninstall(void) {
  if (before == NULL)
    return;
  before = NULL;
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
    struct sigaction old;
    if (sigaction(fatal_signals[i], NULL, &old) != 0 || !(old.sa_flags & SA_SIGINFO) ||
        old.sa_sigaction != on_fatal_signal)
      continue;
    set_default(fatal_signals[i]);
  }
}

int shim_fatal_watches(int sig) {
  return before != NULL && (sig == SIGKILL || ends_by_default(sig));
}

void shim_fatal_before_send(int sig, int to_self) {
  void (*b)(int) = before;
  if (!b)
    return; /* not installed: nothing held yet */
  if (sig == SIGKILL) {
    if (to_self)
      b(sig);
    return;
  }
  struct sigaction old;
  if (!ends_by_default(sig) || sigaction(sig, NULL, &old) != 0 || !at_default(&old))
    return;
  sigaction(sig, &ours, NULL);
}

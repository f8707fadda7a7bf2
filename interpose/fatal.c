/* fatal.c — see fatal.h. */
#include "fatal.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

/* Signals whose default action terminates the process. SIGKILL and SIGSTOP
 * cannot be caught; SIGCHLD, SIGCONT, SIGURG and SIGWINCH do not end it. */
static const int fatal_signals[] = {
    SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT, SIGTRAP,   SIGSYS,  SIGQUIT, SIGXCPU, SIGXFSZ,
    SIGTERM, SIGINT,  SIGHUP,  SIGPIPE, SIGALRM, SIGUSR1,   SIGUSR2, SIGVTALRM, SIGPROF,
};

static void (*before)(int);

/* Whether returning from the handler re-executes a faulting instruction. */
static int refaults(int sig, const siginfo_t *si) {
  if (si == NULL || si->si_code <= 0) /* SI_USER, SI_TKILL, SI_QUEUE...: sent */
    return 0;
  switch (sig) {
  case SIGSEGV:
  case SIGILL:
  case SIGFPE: return 1;
  case SIGBUS: return si->si_code != BUS_MCEERR_AO; /* AO: asynchronous report */
  default: return 0;                                 /* SIGTRAP, SIGSYS: execution goes on */
  }
}

static void on_fatal_signal(int sig, siginfo_t *si, void *ctx) {
  (void)ctx;
  int saved = errno;
  if (before)
    before(sig);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (!refaults(sig, si))
    raise(sig); /* pending until we return: sig is blocked in its handler */
  errno = saved;
}

void shim_fatal_install(void (*before_death)(int sig)) {
  before = before_death;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
    sigaddset(&sa.sa_mask, fatal_signals[i]);
  for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
    struct sigaction old;
    if (sigaction(fatal_signals[i], NULL, &old) != 0)
      continue;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      sigaction(fatal_signals[i], &sa, NULL);
  }
}

/* signals.c — when the program dies of a signal, write the trace first.
 *
 * When a process starts its trace (its first intercepted call), the record
 * shim installs a handler for every signal whose default action ends the
 * process (with or without a core dump), but only where the disposition is
 * still SIG_DFL: a signal the program ignores stays ignored, a runtime that
 * installs its handlers at startup only where none is set still does, and
 * a handler the program installs later replaces ours (the program then
 * decides; if it dies anyway, the trace keeps what the writer had flushed:
 * at most the last ~100 ms are missing).
 *
 * The handler may run on any thread at any moment, possibly inside malloc
 * or with a lock of ours held: it takes no lock and allocates nothing. It
 * asks the writer thread to drain the rings and close the file, waits a
 * bounded time (nanosleep) for it, restores SIG_DFL and lets the signal
 * take its default action, so the program ends with the same signal and
 * the same core-dump behaviour as without standin:
 *   - a fault the kernel raised for an instruction (SIGSEGV, SIGBUS,
 *     SIGILL, SIGFPE with si_code > 0) is not raised again: returning
 *     re-executes the instruction, which faults again with the default
 *     action, so the core shows the original fault;
 *   - every other signal (sent by kill, raise or abort, and SIGTRAP and
 *     SIGSYS, after which execution would continue) is raised again; it is
 *     blocked while the handler runs and is delivered as soon as it returns.
 *
 * What this cannot cover: a stack overflow (the kernel cannot push the
 * handler's frame on the exhausted stack and kills the program directly),
 * SIGKILL, and a fault on the writer thread itself (it blocks every signal,
 * so the kernel kills the process at once; a SIGABRT there skips the wait). */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "record_internal.h"

/* How long a dying program waits for its trace: the writer normally
 * finishes in a few ms; it can only take longer when the thread that
 * faulted holds a lock the writer needs (malloc's, after heap corruption),
 * and then it never finishes. */
#define SIGNAL_WAIT_NS 2000000000ull
#define SIGNAL_POLL_NS 1000000ull

/* Signals whose default action terminates the process. SIGKILL and SIGSTOP
 * cannot be caught; SIGCHLD, SIGCONT, SIGURG and SIGWINCH do not end it. */
static const int fatal_signals[] = {
    SIGSEGV, SIGBUS,  SIGFPE,  SIGILL,  SIGABRT, SIGTRAP,   SIGSYS,  SIGQUIT, SIGXCPU, SIGXFSZ,
    SIGTERM, SIGINT,  SIGHUP,  SIGPIPE, SIGALRM, SIGUSR1,   SIGUSR2, SIGVTALRM, SIGPROF,
};

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
  rt_close_for_signal(sig, SIGNAL_WAIT_NS, SIGNAL_POLL_NS);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  if (!refaults(sig, si))
    raise(sig); /* pending until we return: sig is blocked in its handler */
  errno = saved;
}

void rt_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  /* keep other fatal signals out while we wait: the first one decides */
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

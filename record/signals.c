/* signals.c — when the program dies of a signal, write the trace first.
 *
 * When a process starts its trace (its first intercepted call), the record
 * shim puts a handler on the fatal signals still at their default
 * (interpose/fatal.h says which, and how the program still dies of the
 * same signal). If the program installs a handler of its own later and
 * dies anyway, the trace keeps what the writer had flushed: at most the
 * last ~100 ms are missing.
 *
 * The handler asks the writer thread to drain the rings and close the
 * file, and waits a bounded time (nanosleep) for it. A fault on the writer
 * thread itself is not covered (it blocks every signal, so the kernel
 * kills the process at once; a SIGABRT there skips the wait). */
#include "fatal.h"
#include "record_internal.h"

/* How long a dying program waits for its trace: the writer normally
 * finishes in a few ms; it can only take longer when the thread that
 * faulted holds a lock the writer needs (malloc's, after heap corruption),
 * and then it never finishes. */
#define SIGNAL_WAIT_NS 2000000000ull
#define SIGNAL_POLL_NS 1000000ull

static void close_trace(int sig) {
  rt_close_for_signal(sig, SIGNAL_WAIT_NS, SIGNAL_POLL_NS);
}

void rt_signals_install(void) {
  shim_fatal_install(close_trace);
}

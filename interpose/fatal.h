/* fatal.h — let a shim save what it holds when the program dies of a
 * signal, then let the signal end the program as it would have without us.
 *
 * Both shims keep state in the dying process that must reach the launcher:
 * record its trace (the writer drains the rings and closes the file),
 * replay its counters (each thread adds to the shared ones in batches).
 * A program killed by a signal runs no exit handler, so without this the
 * last calls' data is lost: a replay of a program that crashed after 69
 * calls reported that it saw none. */
#ifndef STANDIN_FATAL_H
#define STANDIN_FATAL_H

/* Put a handler on every signal whose default action ends the process
 * (with or without a core dump), but only where the disposition is still
 * SIG_DFL: a signal the program ignores stays ignored, a runtime that
 * installs its handlers only where none is set still does, and a handler
 * the program installs later replaces ours (the program then decides).
 *
 * The handler calls before_death(sig), restores SIG_DFL and lets the
 * signal take its default action, so the program ends with the same
 * signal and the same core-dump behaviour as without standin:
 *   - a fault the kernel raised for an instruction (SIGSEGV, SIGBUS,
 *     SIGILL, SIGFPE with si_code > 0) is not raised again: returning
 *     re-executes the instruction, which faults again with the default
 *     action, so the core shows the original fault;
 *   - every other signal (sent by kill, raise or abort, and SIGTRAP and
 *     SIGSYS, after which execution would continue) is raised again; it is
 *     blocked while the handler runs and is delivered as soon as it returns.
 *
 * before_death runs on any thread at any moment, possibly inside malloc or
 * with one of the shim's own locks held: it must take no lock and allocate
 * nothing. Other fatal signals are blocked while it runs: the first one
 * decides. Not covered: a stack overflow (the kernel cannot push the
 * handler's frame and kills the program directly), SIGKILL, and a thread
 * that blocks the signal. Call once per process (a forked child inherits
 * the handlers). */
void shim_fatal_install(void (*before_death)(int sig));

/* The program is about to send itself sig (kill, raise, pthread_kill: the
 * hooks in procwrap.c; to_self when it surely reaches this process). A
 * program whose own handler replaced ours often ends by putting the
 * default action back and sending the signal again: ours goes back on a
 * signal that ends the process by default and is at SIG_DFL now, so its
 * delivery (at once, or when the program's handler returns) saves what
 * before_death saves and ends the process as it would have. SIGKILL
 * cannot be handled: before_death runs now. Async-signal-safe; nothing
 * happens before shim_fatal_install. */
void shim_fatal_before_send(int sig, int to_self);

/* Take the handlers off again (where they are still ours) and forget
 * before_death: a process about to install a seccomp filter, which could
 * refuse the handler's system calls (sigaction, tgkill) and kill it with
 * SIGSYS instead of the signal it was dying of. */
void shim_fatal_uninstall(void);

/* Whether shim_fatal_before_send would look at sig at all: installed, and
 * SIGKILL or a signal that ends the process by default. Lets the hooks
 * skip their other system calls for every other signal. */
int shim_fatal_watches(int sig);

#endif

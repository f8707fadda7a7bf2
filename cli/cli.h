/* cli.h — shared pieces of the standin command line. Only the CLI prints
 * and chooses exit codes; libraries return error codes. */
#ifndef STANDIN_CLI_H
#define STANDIN_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "trace.h"

/* Exit codes besides the program's own status. */
enum { EXIT_USAGE = 2, EXIT_NOTFOUND = 127, EXIT_NOEXEC = 126 };

void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Path of a runtime library (e.g. "libstandin-record.so") next to the
 * standin binary: <bindir>/lib/standin/ (build tree) or
 * <bindir>/../lib/standin/ (installed). NULL with a message if missing. */
const char *cli_runtime_lib(const char *name);

/* Trace files of a recording directory, sorted by pid then exec number. */
typedef struct {
  char **paths;
  size_t n;
} cli_tracedir;

/* 0 on success; on failure prints why (naming dir) and returns -1. A
 * directory with no trace file is not an error: n = 0. */
int cli_tracedir_open(cli_tracedir *td, const char *dir);

/* The recording an offline command reads: `trace` (its -t/--trace DIR, as
 * replay takes it; NULL when not given) or the one operand left at optind,
 * else standin.data. -1 with a message naming cmd when there are two. */
int cli_trace_dir(const char *cmd, const char *trace, int argc, char **argv, const char **dir);

/* Recorded calls flagged not offloadable, counted by why: the JPEG APIs'
 * JPG_NO_* reasons (jpeg_req.h) in the first CLI_NO_SLOTS - 1 slots, any
 * other reason or API in the last. */
#define CLI_NO_SLOTS 15

/* Recorded calls this many and this short on average were timed slow by
 * the recorder's own work between them (docs/INTERNALS.md, record
 * --retime): info and replay say so. */
#define CLI_SHORT_CALLS_MIN 1000
#define CLI_SHORT_CALL_NS 2000
unsigned cli_no_slot(const st_call *c);
const char *cli_no_name(unsigned slot, char *buf, size_t len);
/* "3 jpeg_read_coefficients, 1 other" for the non-zero slots of by[]. */
void cli_no_list(const uint64_t by[CLI_NO_SLOTS], char *out, size_t len);

/* The same as a JSON object: {"jpeg_read_coefficients": 3, "other": 1}. */
void cli_no_json(FILE *f, const uint64_t by[CLI_NO_SLOTS]);

/* A C++ symbol (Itanium ABI, "_Z...") demangled without its parameter
 * list ("SplashOutputDev::drawImage"), in out; 0 if sym is not one or does
 * not demangle (out is then ""). */
int cli_demangle(const char *sym, char *out, size_t cap);

/* Processes (of this user; not this one) whose environment started with
 * `entry` ("NAME=value"): those a recorded or replayed program left
 * running, a daemon. *first is one of their pids. */
size_t cli_procs_with_env(const char *entry, long *first);
void cli_tracedir_free(cli_tracedir *td);

/* This program's path into exe: /proc/self/exe, or where /proc is not
 * mounted (a container, a mount namespace) the path it was started by,
 * which a shell that searched PATH gives whole. -1 (said why) when
 * neither. */
int cli_self_exe(char *exe, size_t cap);

/* Processes of the recording in dir that made calls but could not create
 * their traces (the PID.unrecorded notes record/sink.c leaves): how many;
 * the first one's file name stem (its pid) in pid and reason in why. */
size_t cli_unrecorded(const char *dir, char *pid, size_t pcap, char *why, size_t wcap);
/* The notes of extension ext (".unrecorded", ".unfollowed": a process
 * that started a program in an environment without the record shim,
 * record/proc.c), as cli_unrecorded: how many, the first one's pid and
 * what it says. */
size_t cli_notes(const char *dir, const char *ext, char *pid, size_t pcap, char *why, size_t wcap);

/* Whether a directory entry is such a note, PID.EXT (ext with its dot). */
int cli_is_note(const char *name, const char *ext);

/* Whether a note's reason is a descriptor limit (EMFILE, ENFILE), for
 * which raising `ulimit -n` is the remedy. */
int cli_note_fd_limit(const char *why);

/* A warning, once a process, that dir lacks the calls of such processes
 * (for the commands that read a recording with traces in it). */
void cli_warn_unrecorded(const char *dir);

/* Say that dir holds no trace for `what` (replay, report, ...): a recording
 * whose program made no intercepted call (run.info is there), or not a
 * recording at all. */
void cli_err_no_trace(const char *dir, const char *what);
/* Lock dir for `standin record`'s run; -1 (said why) when another record
 * holds it. */
int cli_recording_lock(const char *dir);
/* Whether a `standin record` is writing into dir right now. */
int cli_recording_busy(const char *dir);
/* The same as a warning, for commands whose empty output is still an
 * answer (dump, export). */
void cli_warn_no_trace(const char *dir, const char *what);

/* Open one trace with a clear message on failure (names the file). */
int cli_reader_open(st_reader **r, const char *path);

/* The median of n > 0 values, sorted in place (the mean of the middle two
 * for an even n). */
uint64_t cli_median_u64(uint64_t *v, size_t n);

/* Human formats: "1.23 ms", "4.5 KiB", "1,234,567". Return buf. */
char *cli_fmt_ns(char *buf, size_t cap, double ns);
char *cli_fmt_bytes(char *buf, size_t cap, double bytes);
char *cli_fmt_count(char *buf, size_t cap, uint64_t n);
/* The REQ or RESP cell of a group: its bytes, or "-" when no call in it
 * has that side as bytes (is_bytes 0: a message tree, a size). */
char *cli_fmt_side(char *buf, size_t cap, unsigned is_bytes, uint64_t bytes);

/* Lines of DIR/run.info (written by `standin record`): value for key, or
 * NULL. Returned string is static storage, valid until the next call. */
const char *cli_runinfo_get(const char *dir, const char *key);

/* The PID namespace standin record ran in (run.info; 0 when not known). A
 * process whose trace names another (st_header.pidns; cli_pidns_other) is
 * named with it: cli_pidns_name gives " in pid:[N]" (as /proc/PID/ns/pid
 * links show it; "" for 0), cli_pidns_note that for a process in another
 * namespace and "" for the launcher's own or an unknown one. */
uint64_t cli_launcher_pidns(const char *dir);

/* Processes of a recording by what names them (st_header: pid, pidns,
 * start_ticks), for telling apart processes that have the same pid: in
 * sandboxes run one after the other the kernel gives the next sandbox's
 * namespace the inode number the last one had, so only the start time
 * tells their first processes apart. cli_procs_nth gives a process's
 * ordinal among those with its pid, from 1, in the order they are first
 * asked for; an exec's images share theirs, and so do files without
 * start_ticks (older recordings), as before. */
typedef struct {
  struct cli_proc {
    uint32_t pid, nth;
    uint64_t pidns, start;
  } * v;
  size_t n, cap;
} cli_procs;
uint32_t cli_procs_nth(cli_procs *t, uint32_t pid, uint64_t pidns, uint64_t start_ticks);
void cli_procs_free(cli_procs *t);
/* " #N" for N > 1, else "" */
const char *cli_nth_note(uint32_t nth, char *buf, size_t cap);

int cli_pidns_other(uint64_t launcher, uint64_t pidns);
const char *cli_pidns_name(uint64_t pidns, char *buf, size_t cap);
const char *cli_pidns_note(uint64_t launcher, uint64_t pidns, char *buf, size_t cap);

/* A program resolved on PATH like execvp would; 0 or -1 with errno. */
int cli_find_program(const char *prog, char *out, size_t cap);

/* Run argv with extra environment (NAME=VALUE strings, NULL-terminated) and
 * wait for it; forwards TERM, HUP, USR1, USR2, ALRM, TSTP and CONT, and INT/QUIT sent by kill,
 * while the program runs. Returns the exit code standin should use (the program's status, or
 * 128+signal), and the wall time in *wall_ns. */
int cli_run(char *const argv[], char *const extra_env[], uint64_t *wall_ns);

/* CPUs this process may run on. */
uint32_t cli_cpus_here(void);

/* The last program run (cli_run and the like): how long its first
 * process's main thread waited for a CPU while it could run, and how long
 * it ran on one (/proc/PID/schedstat as it ended). 0, or -1 where that
 * is not known (no /proc, a kernel without scheduler statistics). */
int cli_run_cpu_wait(uint64_t *wait_ns, uint64_t *oncpu_ns);
/* `  "main_thread_cpu_wait_ns": N,` and `"main_thread_cpu_ns"` (null
 * where not known): --summary lines. */
void cli_json_cpu_wait(FILE *f);
/* Whether such a wait is worth a warning: 2 ms and 10% of the time the
 * thread could run, or more. cli_cpu_wait_say writes what it was into buf
 * when it is (returns 1), else "" (returns 0; also with
 * STANDIN_QUIET_WAITS=1); cpus: the CPUs the run had (0: not known). */
int cli_cpu_wait_matters(uint64_t wait_ns, uint64_t oncpu_ns);
int cli_cpu_wait_say(char *buf, size_t cap, uint64_t wait_ns, uint64_t oncpu_ns, uint32_t cpus);
/* The same of the last program run, on this machine's CPUs. */
int cli_run_cpu_wait_said(char *buf, size_t cap);
/* The same of a replay or native --summary document (0: nothing to say,
 * or figures it does not have). */
struct json;
int cli_cpu_wait_of_summary(const struct json *doc, char *buf, size_t cap);
/* CLOCK_MONOTONIC in ns, as the kernel has it even when a library
 * preloaded into standin fakes clock_gettime (faketime). */
uint64_t cli_mono_ns(void);
/* cli_run with stdin, stdout and stderr on /dev/null. */
int cli_run_quiet(char *const argv[], char *const extra_env[], uint64_t *wall_ns);
/* standin ignores SIGPIPE and SIGXFSZ (writes fail instead: said, no data
 * lost); the programs it runs get them as standin was given them. */
void cli_calm_signals(void);
/* s in buf with its control characters as C escapes (\n, \t, \r, \x1b), so
 * that a name from a trace (a module path holding a newline) stays on its
 * row of text output; cut at cap - 1 bytes (4 * strlen(s) + 1 always fit).
 * Returns buf. */
char *cli_escape_ctl(char *buf, size_t cap, const char *s);
/* s as one word a POSIX shell (bash, for control characters) reads back
 * as s: as it is when it holds only letters, digits and _@%+=:,./-; else in
 * single quotes; with control characters, $'...' with cli_escape_ctl's
 * escapes. Cut short (still quoted) where cap is too small. */
char *cli_shell_word(char *buf, size_t cap, const char *s);
/* Writes cli_shell_word(s) to f ("?" where there is no memory for it). */
void cli_put_shell_word(FILE *f, const char *s);
/* s cut to w columns in its middle, marked "..." (in place; s returned):
 * cut at its end, a call site's "+0x10d" read as a valid-looking "+0x10",
 * and summaries in one directory all read the same. */
char *cli_fit(char *s, int w);
/* fopen(path, "r") of a regular file only, without blocking on a FIFO;
 * NULL with errno ENODEV for anything else. */
FILE *cli_fopen_regular(const char *path);
void cli_signals_as_given(void); /* in a child, before it execs */
/* cli_run_quiet, but a standard input that is a regular file is given to
 * the program again from its start (record --retime's timing runs). */
int cli_run_again(char *const argv[], char *const extra_env[], uint64_t *wall_ns);
/* cli_run that also hands the program n descriptors: pass[i][0] as
 * pass[i][1], inheritable. */
int cli_run_passing(char *const argv[], char *const extra_env[], uint64_t *wall_ns,
                    const int (*pass)[2], int n);

/* Calibrate the TSC against CLOCK_MONOTONIC (20 ms of sleep: a rate good
 * to about 1e-6), for the shims' clocks: MONOTONIC ns = *mono + ((tsc -
 * *base) * *mult >> 32). -1 when the CPU does not say its TSC is invariant
 * (constant rate, running in every C-state): the shims then use
 * clock_gettime. */
int cli_tsc_calibrate(uint64_t *base, uint64_t *mono, uint64_t *mult);

/* Where the calibration of this boot is kept: $STANDIN_CACHE_DIR/tsc, else
 * $XDG_CACHE_HOME/standin/tsc, else ~/.cache/standin/tsc; -1 if none. */
int cli_tsc_cache_path(char *buf, size_t len);

/* Subcommands. */
int cmd_record(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_whatif(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_native(int argc, char **argv);

/* An output file (export -o, replay --summary). Written into an unnamed
 * file in path's directory (O_TMPFILE), named and renamed over path when
 * whole, so a failed or killed run leaves what was there and nothing more
 * (where the file system has no unnamed files, or /proc is missing, under
 * a temporary name beside path, which a kill leaves behind); written in place when path exists and
 * is not a regular file (a symbolic link such as /dev/stdout, a device, a FIFO). A path that is one
 * of recording dir's files (a trace, run.info) is refused: cli_out_check says so (names both) and
 * returns -1; cli_out_open checks too. NULL or "-": standard output. */
typedef struct {
  FILE *f;
  const char *path; /* NULL: standard output */
  char *tmp;        /* NULL: written in place */
  int unnamed;      /* tmp is the name the unnamed file gets when whole */
} cli_out;
int cli_out_check(const char *path, const char *dir);
int cli_out_open(cli_out *o, const char *path, const char *dir);
/* Flush and close; ok == 0 (or a write error) discards the temporary.
 * 0 when the output is complete in its place, else -1 (said why, unless
 * ok was 0). */
int cli_out_close(cli_out *o, int ok);
/* Before running a program whose summary goes to path: 0 when it can be
 * written (a file made only to find out is removed), else -1, said. */
int cli_out_writable(const char *path);

#endif

/* cmd_native.c — `standin native`: run a program without standin and time it
 * as replay times its own runs.
 *
 * A replay's wall_ns runs from the posix_spawn of the program to its exit,
 * seen by the standin process. A native time taken by a shell (bash's
 * `time`, or $EPOCHREALTIME around the command) also holds the shell's
 * fork of itself, and with `env VAR=...` a second exec: on the AMD test VM
 * that was 5-7 ms more than the spawn-to-exit time of an 80 ms program
 * (thumbnailer, five runs), so a replay compared with it looked 7-8% fast.
 * This command measures a native run the replay's way, for --native-wall
 * and for comparisons side by side. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static const char usage_text[] =
    "usage: standin native [--summary FILE] [--quiet] -- PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM without standin (no shim is preloaded) and measures its wall time\n"
    "as `standin replay` measures its own runs (wall_ns: from starting the program to\n"
    "its exit), so that the two can be compared: a time taken by the shell (`time`,\n"
    "$EPOCHREALTIME) also holds the shell's fork, which on a slow VM can be several\n"
    "ms. Prints the time on standard error and exits with PROGRAM's exit status. Give\n"
    "the time to whatif, report, compare or sweep with --native-wall, as a duration or\n"
    "as the --summary file itself (--native-wall native.json).\n"
    "\n"
    "When its main thread waited for a CPU for 10% or more of the time it could run, it\n"
    "says so: the time then includes those waits.\n"
    "\n"
    "  -S, --summary FILE  also write {\"exit_status\", \"wall_ns\", \"command\",\n"
    "                      \"main_thread_cpu_wait_ns\", \"main_thread_cpu_ns\"} as JSON to\n"
    "                      FILE (- is standard output, after the program's)\n"
    "  -q, --quiet         do not print the time\n";

int cmd_native(int argc, char **argv) {
  static const struct option lo[] = {{"summary", required_argument, 0, 'S'},
                                     {"quiet", no_argument, 0, 'q'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  const char *summary = NULL;
  int quiet = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+S:qh", lo, NULL)) != -1) {
    switch (c) {
    case 'S': summary = optarg; break;
    case 'q': quiet = 1; break;
    case 'h': fputs(usage_text, stdout); return 0;
    default: fputs(usage_text, stderr); return EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    cli_err("native: no program to run (standin native [--summary FILE] -- PROGRAM [ARGS...])");
    return EXIT_USAGE;
  }
  /* said before the program runs, as replay does: not after a long run */
  if (summary && (cli_out_check(summary, NULL) != 0 || cli_out_writable(summary) != 0))
    return EXIT_USAGE;
  uint64_t wall = 0;
  fflush(NULL);
  int rc = cli_run(argv + optind, NULL, &wall);
  if (wall == 0) /* it never ran (cli_run said why): nothing was timed */
    return rc;
  if (!quiet) {
    char t[32];
    fprintf(stderr, "standin: native: %s ran %s (%llu ns), exit status %d\n", argv[optind],
            cli_fmt_ns(t, sizeof t, (double)wall), (unsigned long long)wall, rc);
  }
  char said[512];
  if (cli_run_cpu_wait_said(said, sizeof said))
    fprintf(stderr, "standin: native: %s; its time includes those waits\n", said);
  if (summary) {
    cli_out o;
    if (cli_out_open(&o, summary, NULL) != 0)
      return rc ? rc : 1;
    fprintf(o.f, "{\n  \"exit_status\": %d,\n  \"wall_ns\": %llu,\n", rc, (unsigned long long)wall);
    cli_json_cpu_wait(o.f);
    fprintf(o.f, "  \"command\": [");
    for (int i = optind; i < argc; i++) {
      fputs(i > optind ? ", " : "", o.f);
      json_write_str(o.f, argv[i]);
    }
    fprintf(o.f, "]\n}\n");
    if (cli_out_close(&o, 1) != 0 && rc == 0)
      rc = 1;
  }
  return rc;
}

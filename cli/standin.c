/* standin — what would an accelerator do to this program's end-to-end time?
 * One command, perf-style subcommands: record, replay, info, dump, ... */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "iface.h"

struct subcmd {
  const char *name;
  int (*fn)(int, char **);
  const char *help;
};

static const struct subcmd cmds[] = {
    {"record", cmd_record, "run a program and record its protobuf-c / JPEG calls"},
    {"info", cmd_info, "summarise a recording: processes, threads, calls, time, sizes"},
    {"dump", cmd_dump, "print the recorded calls, one per line (text or JSON)"},
    {"replay", cmd_replay, "rerun a program against a performance interface and measure it"},
    {"models", cmd_models, "list the performance interfaces (models) and their parameters"},
    {"report", cmd_report, "where the time goes, per API/type/site/thread; what a plan offloads"},
    {"whatif", cmd_whatif, "offline end-to-end estimate of one or more offload plans"},
    {"sweep", cmd_sweep, "vary an accelerator parameter: offline estimates, optionally replayed"},
    {"compare", cmd_compare, "offline estimate beside measured replay summaries"},
    {"export", cmd_export, "write the calls as CSV, JSON or a Chrome/Perfetto trace"},
    {"native", cmd_native, "run a program without standin, timed as replay times its runs"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: standin <command> [options]\n\ncommands:\n");
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
  fprintf(f, "\n'standin <command> --help' describes a command. standin %s\n", STANDIN_VERSION);
}

/* A command's status with its standard output's fate: info, dump, report,
 * whatif, sweep, compare and models printed into a full disk (`standin dump
 * rec >calls.txt`) or /dev/full, lost every line and exited 0. (export and
 * replay --summary - said it already: cli_out_close clears the error.) */
static int with_stdout(int rc) {
  int bad = ferror(stdout);
  errno = 0;
  if (fflush(stdout) != 0)
    bad = 1;
  if (!bad)
    return rc;
  cli_err("writing standard output failed: %s", errno ? strerror(errno) : "write error");
  return rc ? rc : 1;
}

static int dispatch(int argc, char **argv);

int main(int argc, char **argv) {
  return with_stdout(dispatch(argc, argv));
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return EXIT_USAGE;
  }
  const char *c = argv[1];
  if (!strcmp(c, "-h") || !strcmp(c, "--help") || (!strcmp(c, "help") && argc == 2)) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(c, "--version") || !strcmp(c, "version")) {
    printf("standin %s (trace format %d)\n", STANDIN_VERSION, ST_FORMAT_VERSION);
    return 0;
  }
  if (!strcmp(c, "help") && argc == 3) { /* standin help record */
    char *hargv[] = {argv[2], "--help", NULL};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
      if (!strcmp(argv[2], cmds[i].name))
        return cmds[i].fn(2, hargv);
    c = argv[2];
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(c, cmds[i].name))
      return cmds[i].fn(argc - 1, argv + 1);
  const char *near = NULL;
  int best = 3;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    int d = if_name_distance(cmds[i].name, c, strlen(c));
    if (d < best)
      best = d, near = cmds[i].name;
  }
  if (!strcmp(c, "plot"))
    cli_err("there is no plot command: report and sweep write plots with --plot DIR");
  else if (near)
    cli_err("'%s' is not a standin command; did you mean '%s'? (see 'standin --help')", c, near);
  else
    cli_err("'%s' is not a standin command; see 'standin --help'", c);
  return EXIT_USAGE;
}

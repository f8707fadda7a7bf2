/* anopt.h — the options the offline commands share: the plans (--plan,
 * --iface), --format text|json and --cpus, and the recording directory. */
#ifndef STANDIN_CLI_ANOPT_H
#define STANDIN_CLI_ANOPT_H

#include <getopt.h>
#include <stdint.h>

#include "planset.h"

/* Entries for a getopt_long table; the short codes are p, i, t, F and c. */
// clang-format off
#define ANOPT_LONG                                                              \
  {"plan", required_argument, 0, 'p'}, {"iface", required_argument, 0, 'i'},  \
  {"format", required_argument, 0, 'F'}, {"cpus", required_argument, 0, 'c'}, \
  {"native-wall", required_argument, 0, 'N'}, {"trace", required_argument, 0, 't'}
// clang-format on

typedef struct {
  planset ps;
  int json;
  uint32_t cpus; /* 0: this machine's */
  uint64_t native_wall_ns; /* --native-wall: measured without standin, 0 = not given */
  int one_plan;  /* the command evaluates one plan */
  const char *trace; /* -t/--trace DIR, or NULL */
  const char *cmd;
} anopt;

void anopt_init(anopt *o, const char *cmd, int one_plan);

/* Take option c with its argument: 1 if it was one of ANOPT_LONG, 0 if
 * not, -1 (with a message) if its value is bad. */
int anopt_take(anopt *o, int c, const char *arg);

/* getopt_long over lo (which holds ANOPT_LONG; short options p:i:t:h) that
 * takes the shared options itself: the next other option, -1 at the end,
 * or 0 after a bad value of a shared option (message printed). */
int anopt_next(anopt *o, int argc, char **argv, const struct option *lo);

/* For a command with no other option: parse them all (--help prints
 * usage and exits); 0, or -1 when an option is unknown or bad. Operands
 * start at optind. */
int anopt_parse(anopt *o, int argc, char **argv, const char *usage);

/* The recording directory: -t DIR, or the one operand left at optind, or
 * standin.data; -1 with a message when there are two (cli_trace_dir). */
int anopt_dir(int argc, char **argv, const anopt *o, const char **dir);

void anopt_free(anopt *o);

#endif

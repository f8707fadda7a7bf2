/* anopt.c — options shared by the offline commands (see anopt.h). */
#include "anopt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void anopt_init(anopt *o, const char *cmd, int one_plan) {
  memset(o, 0, sizeof *o);
  planset_init(&o->ps);
  o->cmd = cmd;
  o->one_plan = one_plan;
}

static int take_plan(anopt *o, int c, const char *arg) {
  if (o->one_plan && o->ps.n && (c == 'p' || o->ps.iface < 0)) {
    cli_err("%s evaluates one plan (one --plan, or --iface options)%s", o->cmd,
            strcmp(o->cmd, "whatif") ? "; compare plans with 'standin whatif'" : "");
    return -1;
  }
  return (c == 'p' ? planset_add_file(&o->ps, arg) : planset_add_iface(&o->ps, arg)) == 0 ? 1 : -1;
}

int anopt_take(anopt *o, int c, const char *arg) {
  char *end;
  switch (c) {
  case 'p':
  case 'i': return take_plan(o, c, arg);
  case 't': o->trace = arg; return 1;
  case 'F':
    if (strcmp(arg, "text") && strcmp(arg, "json")) {
      cli_err("--format: '%s' is not text or json", arg);
      return -1;
    }
    o->json = !strcmp(arg, "json");
    return 1;
  case 'N': {
    double v = strtod(arg, &end);
    double unit = !strcmp(end, "s")    ? 1e9
                  : !strcmp(end, "ms") ? 1e6
                  : !strcmp(end, "us") ? 1e3
                  : !strcmp(end, "ns") ? 1
                                       : 0;
    /* a bare number has no unit: "80" meant 80 ms, and was taken as 80 ns */
    if (end != arg && !*end && v > 0) {
      cli_err("--native-wall: '%s' has no unit; give it as %sms, %ss or %sns", arg, arg, arg, arg);
      return -1;
    }
    if (end == arg || unit == 0 || !(v * unit >= 1) || v * unit > 1e18) { /* 0.0001ns: 0 */
      cli_err("--native-wall: '%s' is not a duration like 188ms, 0.5s or 1200000ns", arg);
      return -1;
    }
    o->native_wall_ns = (uint64_t)(v * unit);
    return 1;
  }
  case 'c':
    o->cpus = (uint32_t)strtoul(arg, &end, 10);
    if (!*arg || *end || !o->cpus || o->cpus > (1u << 20)) {
      cli_err("--cpus: '%s' is not a number of CPUs", arg);
      return -1;
    }
    return 1;
  default: return 0;
  }
}

int anopt_next(anopt *o, int argc, char **argv, const struct option *lo) {
  int c, rc;
  while ((c = getopt_long(argc, argv, "p:i:t:h", lo, NULL)) != -1)
    if ((rc = anopt_take(o, c, optarg)) <= 0)
      return rc < 0 ? 0 : c;
  return -1;
}

int anopt_parse(anopt *o, int argc, char **argv, const char *usage) {
  static const struct option lo[] = {ANOPT_LONG, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  optind = 1;
  int c = anopt_next(o, argc, argv, lo);
  if (c == 'h') {
    fputs(usage, stdout);
    exit(0);
  }
  return c == -1 ? 0 : -1;
}

int anopt_dir(int argc, char **argv, const anopt *o, const char **dir) {
  return cli_trace_dir(o->cmd, o->trace, argc, argv, dir);
}

void anopt_free(anopt *o) {
  planset_free(&o->ps);
}

/* anopt.c — options shared by the offline commands (see anopt.h). */
#include "anopt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

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

/* --native-wall FILE.json: the time of a `standin native --summary` file
 * (wall_ns), so that a script need not take it out itself. A replay's
 * summary holds a wall_ns too, of a replay: refused. */
static int native_from_summary(anopt *o, const char *path) {
  json *d = NULL;
  if (json_load(&d, path) != 0)
    return -1;
  uint64_t ns = 0;
  const json *st = json_get(d, "exit_status");
  int rc = -1;
  if (json_get(d, "recording") || json_get(d, "calls_intercepted"))
    cli_err("--native-wall: %s is a replay's summary, not a native run's: time the program "
            "with 'standin native --summary FILE -- PROGRAM'",
            path);
  else if (json_count(json_get(d, "wall_ns"), &ns) != 0 || ns == 0)
    cli_err("--native-wall: %s has no wall_ns (a 'standin native --summary' file has one)", path);
  else
    rc = 1;
  if (rc == 1 && st && json_num(st, 0) != 0)
    cli_warn("--native-wall: the native run in %s exited with status %.0f; its time is used as "
             "it is",
             path, json_num(st, 0));
  if (rc == 1)
    o->native_wall_ns = ns;
  json_free(d);
  return rc;
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
    size_t len = strlen(arg);
    if (len > 5 && !strcmp(arg + len - 5, ".json"))
      return native_from_summary(o, arg);
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
      cli_err("--native-wall: '%s' is not a duration like 188ms, 0.5s or 1200000ns, nor a "
              "'standin native --summary' file (FILE.json)",
              arg);
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

/* cmd_sweep.c — `standin sweep`: one accelerator parameter over a list of
 * values; offline estimates in one pass, and optionally measured replays. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "anopt.h"
#include "anprint.h"
#include "cli.h"
#include "json.h"
#include "plot.h"

static const char usage_text[] =
    "usage: standin sweep [DIR] (--plan FILE | --iface SPEC...) --vary ACCEL.PARAM=V1,V2,...\n"
    "                     [--runs N] [--format text|json] [--plot DIR]\n"
    "                     [--replay -- PROGRAM [ARGS...]]\n"
    "\n"
    "Estimates the recording (default standin.data) offline, as `standin whatif`\n"
    "does, once per value of one parameter of one accelerator of the plan: a model\n"
    "parameter (ns, factor, clock_mhz, ...: see 'standin models') or an accelerator\n"
    "setting (engines, link, link_rtt_ns, link_gbps, link_poll_ns, link_onchip_ns).\n"
    "ACCEL is the accelerator's name in the plan (with --iface: the model's name);\n"
    "it may be left out when the plan has one accelerator. Every value is\n"
    "evaluated in the same single pass over the trace.\n"
    "\n"
    "With --replay, each value is also measured: `standin replay --summary` of\n"
    "PROGRAM, --runs times per value (default 3; runs of the values interleaved, so\n"
    "that drift of the machine spreads evenly), and the median wall time is printed\n"
    "with the spread (min..max) beside the estimate. The program's output is\n"
    "discarded. Unless --native-wall is given, PROGRAM also runs without standin\n"
    "as often, in the same rounds, and the estimates start from its median wall\n"
    "time (a recorded run's wall includes what recording cost). Where the replays\n"
    "could not hide their own time (wall_ns - wall_adjusted_ns: setup and overruns\n"
    "no later slack paid back), a note gives it and the median less it.\n"
    "\n"
    "  -t, --trace DIR        the recording, as for replay (or DIR)\n"
    "  -p, --plan FILE        the plan to vary\n"
    "  -i, --iface SPEC       [API=]MODEL[:key=value,...], as for replay; repeatable\n"
    "      --vary A.P=V,...   the parameter and its values (at most 48)\n"
    "      --runs N           replays per value (default 3)\n"
    "      --format F         text (default) or json\n"
    "      --plot DIR         write DIR/sweep.{dat,gp} (estimate, naive sum and measured\n"
    "                         median with min..max per value; SVG when gnuplot is\n"
    "                         installed)\n"
    "      --cpus N           CPUs of the recording machine (default: this one's)\n"
    "      --native-wall T    the program's native wall time (e.g. 188ms, or a\n"
    "                         'standin native --summary' FILE.json), for the\n"
    "                         estimates to start from; without --replay, the default\n"
    "                         is the recorded run's\n";

#define MAX_VALUES 48

typedef struct {
  const char *dir, *plot, *vary;
  char accel[128], key[128];
  char *values[MAX_VALUES];
  int nvalues, runs;
  char **prog; /* after --replay -- */
  anopt a;     /* a.ps: [0] the plan as given, then one variant per value */
} sw_opts;

typedef struct {
  uint64_t *wall;     /* [runs] measured, 0 = failed */
  uint64_t *unhidden; /* [runs] of wall, the harness's own time (anp_replay_unhidden);
                         NULL for native runs */
  int ok, said;       /* said: why a replay of it failed */
  uint64_t median, min, max;
  uint64_t median_less_unhidden; /* median of wall - unhidden */
  uint64_t replayed, fallback; /* calls, over the runs that finished */
} measured;

/* ---- options ------------------------------------------------------------------ */

/* ACCEL.PARAM=V1,V2,... (ACCEL optional when the plan has one). */
static int parse_vary(sw_opts *o) {
  const char *eq = strchr(o->vary, '=');
  if (!eq || eq == o->vary || !eq[1]) {
    cli_err("--vary %s: write ACCEL.PARAM=V1,V2,...", o->vary);
    return -1;
  }
  char lhs[128];
  snprintf(lhs, sizeof lhs, "%.*s", (int)(eq - o->vary), o->vary);
  char *dot = strrchr(lhs, '.'); /* parameters have no dot; a plugin's name may (my.model) */
  const plan *p = o->a.ps.p[0];
  if (!dot && p->naccel != 1) {
    cli_err("--vary %s: the plan has %d accelerators; name one as ACCEL.%s", o->vary, p->naccel,
            lhs);
    return -1;
  }
  snprintf(o->accel, sizeof o->accel, "%.*s", dot ? (int)(dot - lhs) : 127,
           dot ? lhs : p->accel[0].name);
  snprintf(o->key, sizeof o->key, "%s", dot ? dot + 1 : lhs);
  /* "ns=,," exited 2 without a word, and "ns=1,,2" dropped the empty value */
  for (const char *v = eq + 1;; v++) {
    size_t len = strcspn(v, ",");
    if (!len) {
      cli_err("--vary %s: an empty value (a comma at an end or two in a row); write "
              "%s=V1,V2,...",
              o->vary, lhs);
      return -1;
    }
    if (o->nvalues == MAX_VALUES) {
      cli_err("--vary: at most %d values", MAX_VALUES);
      return -1;
    }
    if (!(o->values[o->nvalues++] = strndup(v, len))) {
      cli_err("out of memory");
      return -1;
    }
    v += len;
    if (!*v)
      break;
  }
  for (int i = 0; i < o->nvalues; i++) {
    size_t len = strlen(o->accel) + strlen(o->key) + strlen(o->values[i]) + 3;
    char *name = malloc(len);
    if (!name) {
      cli_err("out of memory");
      return -1;
    }
    snprintf(name, len, "%s.%s=%s", o->accel, o->key, o->values[i]);
    int rc = planset_add_variant(&o->a.ps, 0, o->accel, o->key, o->values[i], name);
    free(name);
    if (rc != 0)
      return -1;
  }
  return 0;
}

static int number_arg(const char *opt, const char *v, long lo, long hi, long *out) {
  char *end;
  long n = strtol(v, &end, 10);
  if (!*v || *end || n < lo || n > hi) {
    cli_err("%s: '%s' is not a number from %ld to %ld", opt, v, lo, hi);
    return -1;
  }
  *out = n;
  return 0;
}

/* Everything after --replay (and an optional --) is the program; the
 * options before it may come in any order around DIR. */
static int split_replay(int argc, char **argv, sw_opts *o) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--replay")) {
      int dashes = i + 1 < argc && !strcmp(argv[i + 1], "--");
      int p = i + 1 + dashes;
      if (p >= argc) {
        cli_err("sweep: --replay needs the program: --replay -- PROGRAM [ARGS...]");
        return -1;
      }
      if (!dashes && argv[p][0] == '-') { /* --replay --runs 2 -- PROG ran "--runs" */
        cli_err("sweep: everything after --replay is the program, and '%s' is not one: put "
                "sweep's options before --replay (--replay -- PROGRAM [ARGS...])",
                argv[p]);
        return -1;
      }
      o->prog = argv + p;
      return i;
    }
  return argc;
}

static int parse(int argc, char **argv, sw_opts *o) {
  static const struct option lo[] = {ANOPT_LONG,
                                     {"vary", required_argument, 0, 'V'},
                                     {"runs", required_argument, 0, 'n'},
                                     {"plot", required_argument, 0, 'P'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  int c;
  long n;
  if ((argc = split_replay(argc, argv, o)) < 0)
    return -1;
  optind = 1;
  while ((c = anopt_next(&o->a, argc, argv, lo)) != -1) {
    switch (c) {
    case 'V':
      if (o->vary) { /* the first one was dropped without a word */
        cli_err("--vary is given twice (%s, %s): sweep varies one parameter; give its values "
                "in one --vary ACCEL.PARAM=V1,V2,...",
                o->vary, optarg);
        return -1;
      }
      o->vary = optarg;
      break;
    case 'n':
      if (number_arg("--runs", optarg, 1, 1000, &n) != 0)
        return -1;
      o->runs = (int)n;
      break;
    case 'P': o->plot = optarg; break;
    case 'h': fputs(usage_text, stdout); exit(0);
    case 0: return -1; /* said why */
    default: fputs(usage_text, stderr); return -1;
    }
  }
  if (anopt_dir(argc, argv, &o->a, &o->dir) != 0)
    return -1;
  if (!o->a.ps.n || !o->vary) {
    cli_err("sweep: give a plan (--plan or --iface) and --vary ACCEL.PARAM=V1,V2,...");
    return -1;
  }
  return parse_vary(o);
}

/* ---- replays ------------------------------------------------------------------ */

/* A replay that wrote no summary stopped before its program ran, or
 * could not count: what it said (its first line from standin, in errpath),
 * once per value. Only "failed" was shown (a plugin path with a blank once
 * made every replay of a sweep fail so). */
static void say_why_failed(const sw_opts *o, int v, measured *m, const char *errpath, int st) {
  char line[1024] = "";
  FILE *f = fopen(errpath, "r");
  while (f && fgets(line, sizeof line, f) && strncmp(line, "standin: ", 9))
    line[0] = 0;
  if (f)
    fclose(f);
  line[strcspn(line, "\n")] = 0;
  if (m->said++)
    return;
  if (line[0])
    cli_warn("the replay of %s=%s failed: %s", o->key, o->values[v], line + 9);
  else
    cli_warn("the replay of %s=%s failed (%s %d) without a word; run it alone with 'standin "
             "replay' to see why",
             o->key, o->values[v], WIFSIGNALED(st) ? "signal" : "exit status",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
}

/* standin replay of one plan file, quietly; the wall time from its summary,
 * 0 when the run failed, and in *unhidden the harness's time it could not
 * hide; its calls replayed and fallen back added to m. */
static uint64_t replay_once(const sw_opts *o, int v, const char *plan_path, const char *summary,
                            measured *m, uint64_t *unhidden) {
  *unhidden = 0;
  char *args[256];
  int n = 0;
  const char *fixed[] = {"standin", "replay",    "-t",    o->dir, "--plan",
                         plan_path, "--summary", summary, "--"};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
    args[n++] = (char *)fixed[i];
  for (char **p = o->prog; *p && n < 255; p++)
    args[n++] = *p;
  args[n] = NULL;
  char errpath[PATH_MAX + 8], self[PATH_MAX];
  if (cli_self_exe(self, sizeof self) != 0)
    return 0;
  snprintf(errpath, sizeof errpath, "%s.err", summary);
  fflush(NULL);
  unlink(summary);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    int err = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(err >= 0 ? err : null, 2);
    }
    cli_signals_as_given(); /* the replay passes them on to the program as given */
    execv(self, args);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0)
    return 0;
  json *j = NULL;
  if (access(summary, R_OK) != 0 || json_load(&j, summary) != 0) {
    say_why_failed(o, v, m, errpath, st);
    unlink(errpath);
    return 0;
  }
  unlink(errpath);
  uint64_t wall = (uint64_t)json_num(json_get(j, "wall_ns"), 0);
  *unhidden = anp_replay_unhidden(j);
  char said[512]; /* the replay said it on the standard error we drop */
  if (cli_cpu_wait_of_summary(j, said, sizeof said))
    cli_warn("replay with %s: %s: its wall time includes those waits", plan_path, said);
  int status = (int)json_num(json_get(j, "exit_status"), -1);
  if (status == 0) {
    m->replayed += (uint64_t)json_num(json_get(j, "calls_replayed"), 0);
    m->fallback += (uint64_t)json_num(json_get(j, "calls_fallback"), 0);
  }
  json_free(j);
  if (!WIFEXITED(st) || WEXITSTATUS(st) || status != 0)
    cli_warn("replay with %s: the program exited with status %d; its time is left out", plan_path,
             status);
  return status == 0 ? wall : 0;
}

static void summarise(measured *m, int runs) {
  uint64_t v[1000], a[1000];
  int n = 0;
  for (int r = 0; r < runs; r++)
    if (m->wall[r]) {
      a[n] = m->wall[r] - (m->unhidden ? m->unhidden[r] : 0); /* at most wall_ns */
      v[n++] = m->wall[r];
    }
  m->ok = n;
  if (!n)
    return;
  m->median = cli_median_u64(v, (size_t)n); /* sorts v */
  m->min = v[0];
  m->max = v[n - 1];
  m->median_less_unhidden = cli_median_u64(a, (size_t)n);
}

/* PROGRAM without standin, quietly: its wall time, 0 when it failed. */
static uint64_t native_once(const sw_opts *o) {
  uint64_t wall = 0;
  fflush(NULL);
  int status = cli_run_quiet(o->prog, NULL, &wall);
  if (status != 0) {
    cli_warn("the native run of %s exited with status %d; its time is left out", o->prog[0],
             status);
    return 0;
  }
  return wall;
}

/* Every value, --runs times, run-major so the values see the same drift;
 * with nat, a native run opens every round. */
static int replay_all(const sw_opts *o, measured *m, measured *nat) {
  char tmp[] = "/tmp/standin-sweep.XXXXXX", path[PATH_MAX], sum[PATH_MAX];
  if (!mkdtemp(tmp)) {
    cli_err("cannot create a temporary directory: %s", strerror(errno));
    return -1;
  }
  int tty = isatty(2), rc = 0;
  for (int v = 0; v < o->nvalues && rc == 0; v++) {
    snprintf(path, sizeof path, "%s/%d.plan", tmp, v);
    if (plan_save(o->a.ps.p[v + 1], path) != 0) {
      cli_err("cannot write %s: %s", path, strerror(errno));
      rc = -1;
    }
  }
  for (int r = 0; r < o->runs && rc == 0; r++) {
    if (nat) {
      if (tty)
        fprintf(stderr, "\rstandin sweep: native run %d of %d\033[K", r + 1, o->runs);
      nat->wall[r] = native_once(o);
    }
    for (int v = 0; v < o->nvalues; v++) {
      if (tty)
        fprintf(stderr, "\rstandin sweep: replay %d of %d (%s)\033[K", r * o->nvalues + v + 1,
                o->runs * o->nvalues, o->a.ps.name[v + 1]);
      snprintf(path, sizeof path, "%s/%d.plan", tmp, v);
      snprintf(sum, sizeof sum, "%s/%d.%d.json", tmp, v, r);
      m[v].wall[r] = replay_once(o, v, path, sum, &m[v], &m[v].unhidden[r]);
      unlink(sum);
    }
  }
  if (tty)
    fputs("\r\033[K", stderr);
  for (int v = 0; v < o->nvalues; v++) {
    snprintf(path, sizeof path, "%s/%d.plan", tmp, v);
    unlink(path);
    summarise(&m[v], o->runs);
  }
  if (nat)
    summarise(nat, o->runs);
  rmdir(tmp);
  for (int v = 0; v < o->nvalues; v++) { /* what compare says of such a summary */
    char nf[32];
    if (m[v].ok && !m[v].replayed)
      cli_warn("the replays of %s=%s answered no call from the recording (%s fallback%s): "
               "their wall time is the program's own, not the plan's; does PROGRAM run as "
               "it did when recorded (same arguments and input)?",
               o->key, o->values[v], cli_fmt_count(nf, sizeof nf, m[v].fallback),
               m[v].fallback == 1 ? "" : "s");
    else if (m[v].fallback)
      cli_warn("the replays of %s=%s fell back to the real library for %s calls (of %llu "
               "answered): those ran at software speed",
               o->key, o->values[v], cli_fmt_count(nf, sizeof nf, m[v].fallback),
               (unsigned long long)(m[v].replayed + m[v].fallback));
  }
  return rc;
}

/* ---- output ------------------------------------------------------------------- */

static double change(uint64_t now, uint64_t before) {
  return before ? 100.0 * ((double)now - (double)before) / (double)before : 0.0;
}

/* Values whose replays measured their own cost beside the plan's (the
 * harness took longer than the model's calls and later slack could not pay
 * it back, or a long setup): said, with their medians less it. A model
 * faster than the harness flattens MEASURED there, not the program. */
static int unhidden_counts(const measured *x) {
  return x->ok &&
         (double)(x->median - x->median_less_unhidden) >= ANP_UNHIDDEN_SHARE * (double)x->median;
}

static void note_unhidden(const an_result *r, const sw_opts *o, const measured *m) {
  int any = 0;
  for (int v = 0; v < o->nvalues; v++) {
    const measured *x = &m[v];
    if (!unhidden_counts(x))
      continue;
    char u[32], a[32];
    if (!any++)
      printf("\nnote: where the replays could not hide their own time (their setup, and "
             "overruns, calls whose harness took longer than the model's latency, that no "
             "later call's slack paid back: wall_ns - wall_adjusted_ns of their summaries), "
             "MEASURED includes it where the plan's run would not. Less it:\n");
    printf("  %s=%s: %s of its own, median %s, EST-MEAS %+.1f%%\n", o->key, o->values[v],
           cli_fmt_ns(u, sizeof u, (double)(x->median - x->median_less_unhidden)),
           cli_fmt_ns(a, sizeof a, (double)x->median_less_unhidden),
           change(an_estimate(r, v + 1), x->median_less_unhidden));
  }
}

static void print_text(const an_result *r, const sw_opts *o, const measured *m,
                       const measured *nat) {
  char a[32], nlo[32], nhi[32], natbuf[160];
  if (nat)
    snprintf(natbuf, sizeof natbuf, " native wall (median of %d runs beside the replays, %s..%s)",
             nat->ok, cli_fmt_ns(nlo, sizeof nlo, (double)nat->min),
             cli_fmt_ns(nhi, sizeof nhi, (double)nat->max));
  printf("recording %s: %s%s; plan %s; %u CPUs\n", o->dir,
         cli_fmt_ns(a, sizeof a, (double)r->wall_ns),
         nat                     ? natbuf
         : r->wall_recorded == 2 ? " native wall (--native-wall)"
         : r->wall_recorded      ? " wall (run.info)"
                                 : " (trace span)",
         o->a.ps.name[0], r->cpus);
  printf("varying %s.%s%s\n\n", o->accel, o->key,
         m ? "; measured: median of the replays (min..max)" : "");
  printf("%-16s %10s %11s %8s %11s", "VALUE", "OFFLOADED", "ESTIMATE", "CHANGE", "NAIVE SUM");
  if (m)
    printf(" %11s %-25s %8s", "MEASURED", "MIN..MAX", "EST-MEAS");
  printf("  %s\n", "ESTIMATE BY");
  for (int v = 0; v < o->nvalues; v++) {
    char n[32], e[32], nv[32], md[32], lo[32], hi[32], sp[64];
    uint64_t est = an_estimate(r, v + 1);
    printf("%-16.16s %10s %11s %+7.1f%% %11s", o->values[v],
           cli_fmt_count(n, sizeof n, r->plans[v + 1].offloaded),
           cli_fmt_ns(e, sizeof e, (double)est), change(est, r->wall_ns),
           an_fmt_naive(nv, sizeof nv, r, v + 1));
    if (m && m[v].ok) {
      snprintf(sp, sizeof sp, "%s..%s", cli_fmt_ns(lo, sizeof lo, (double)m[v].min),
               cli_fmt_ns(hi, sizeof hi, (double)m[v].max));
      printf(" %11s %-25s %+7.1f%%", cli_fmt_ns(md, sizeof md, (double)m[v].median), sp,
             change(est, m[v].median));
    } else if (m) {
      printf(" %11s %-25s %8s", "failed", "", "");
    }
    printf("  %s\n", an_method(r, v + 1));
  }
  /* decoded rows a value's models leave elsewhere than the recording did:
   * the program's reads of them, which the estimates leave out */
  int rows = 0;
  for (int v = 0; v < o->nvalues; v++) {
    if (!anp_rows_note_due(r, v + 1))
      continue;
    char l[512];
    snprintf(l, sizeof l, "%s.%s=%s", o->accel, o->key, o->values[v]);
    printf("%s", rows++ ? "" : "\n");
    anp_rows_note_text(stdout, r, v + 1, l);
  }
  if (m)
    note_unhidden(r, o, m);
  anp_notes_text(stdout, r);
}

/* {"runs", "ok", "wall_ns": [...], "median_ns", "min_ns", "max_ns"}, and for
 * replays the calls replayed and fallen back over the runs that finished */
static void measured_json(const measured *m, int runs, int replays) {
  printf("{\"runs\": %d, \"ok\": %d, \"wall_ns\": [", runs, m->ok);
  for (int k = 0; k < runs; k++)
    printf("%s%llu", k ? ", " : "", (unsigned long long)m->wall[k]);
  printf("], \"median_ns\": %llu, \"min_ns\": %llu, \"max_ns\": %llu",
         (unsigned long long)m->median, (unsigned long long)m->min, (unsigned long long)m->max);
  if (replays) {
    printf(", \"calls_replayed\": %llu, \"calls_fallback\": %llu", (unsigned long long)m->replayed,
           (unsigned long long)m->fallback);
    printf(", \"unhidden_ns\": [");
    for (int k = 0; k < runs; k++)
      printf("%s%llu", k ? ", " : "", (unsigned long long)(m->unhidden ? m->unhidden[k] : 0));
    printf("], \"median_less_unhidden_ns\": %llu", (unsigned long long)m->median_less_unhidden);
  }
  printf("}");
}

static void print_json(const an_result *r, const sw_opts *o, const measured *m,
                       const measured *nat) {
  printf("{");
  anp_recording_json(stdout, r, o->dir);
  if (nat) {
    printf(",\n  \"native\": ");
    measured_json(nat, o->runs, 0);
  }
  printf(",\n  \"plan\": ");
  json_write_str(stdout, o->a.ps.name[0]);
  printf(", \"accelerator\": ");
  json_write_str(stdout, o->accel);
  printf(", \"parameter\": ");
  json_write_str(stdout, o->key);
  printf(",\n  \"values\": [");
  for (int v = 0; v < o->nvalues; v++) {
    printf("%s\n   {\"value\": ", v ? "," : "");
    json_write_str(stdout, o->values[v]);
    printf(", \"estimate\": ");
    anp_plan_json(stdout, r, v + 1, o->a.ps.name[v + 1]);
    if (m) {
      printf(",\n    \"replay\": ");
      measured_json(&m[v], o->runs, 1);
    }
    printf("}");
  }
  printf("\n  ]\n}\n");
}

typedef struct {
  const sw_opts *o;
  int measured;
  int unhidden;       /* some value's replays could not hide their own time */
  const an_result *r; /* its wall_ns: the run the estimates start from */
} sweep_plot;

static void sweep_script(FILE *gp, void *arg) {
  const sweep_plot *sp = arg;
  char x[sizeof sp->o->accel + sizeof sp->o->key + 2];
  snprintf(x, sizeof x, "%s.%s", sp->o->accel, sp->o->key);
  fprintf(gp, "set xlabel ");
  plot_str(gp, x);
  /* the key sat inside, over the first values' points; the run the
   * estimates start from is drawn, as the text's CHANGE column is of it */
  fprintf(gp,
          "\nset datafile missing '?'\nset key below height 1\nset ylabel 'end-to-end "
          "time (ms)'\nset yrange [0:*]\nset "
          "offsets 0.3, 0.3, 0, 0\n"
          "plot 'sweep.dat' using 0:($2/1e6):xtic(1) with linespoints lw 2 pt 7 title "
          "'offline estimate', \\\n"
          "  'sweep.dat' using 0:($3/1e6) with linespoints lw 1 dt 2 title 'naive sum', "
          "\\\n  'sweep.dat' using 0:(%.6f) with lines lw 1 dt 3 lc 'black' title '%s'",
          (double)sp->r->wall_ns / 1e6,
          sp->r->wall_recorded == 2 ? "native run (--native-wall)"
          : sp->r->wall_recorded    ? "recorded run (baseline of the estimates)"
                                    : "trace span (baseline of the estimates)");
  if (sp->measured)
    fprintf(gp, ", \\\n  'sweep.dat' using 0:($4/1e6):($5/1e6):($6/1e6) with yerrorlines lw 2 "
                "title 'replay, median (min..max)'");
  if (sp->unhidden) /* as the text's note */
    fprintf(gp, ", \\\n  'sweep.dat' using 0:($7/1e6) with linespoints lw 1 dt 4 pt 6 "
                "title 'replay less its own unhidden time'");
  fprintf(gp, "\n");
}

static int write_plot(const an_result *r, const sw_opts *o, const measured *m) {
  plot p;
  if (plot_open(&p, o->plot, "sweep") != 0)
    return -1;
  fprintf(p.dat, "# value estimate_ns naive_ns replay_median_ns replay_min_ns replay_max_ns "
                 "replay_median_less_unhidden_ns\n");
  int unhidden = 0;
  for (int v = 0; v < o->nvalues; v++) {
    fprintf(p.dat, "\"%s\" %llu ", o->values[v], (unsigned long long)an_estimate(r, v + 1));
    if (an_naive_means(r, v + 1)) /* else missing, as the text's "-" */
      fprintf(p.dat, "%llu", (unsigned long long)an_estimate_naive(r, v + 1));
    else
      fprintf(p.dat, "?");
    if (m && m[v].ok) {
      fprintf(p.dat, " %llu %llu %llu %llu\n", (unsigned long long)m[v].median,
              (unsigned long long)m[v].min, (unsigned long long)m[v].max,
              (unsigned long long)m[v].median_less_unhidden);
      unhidden |= unhidden_counts(&m[v]);
    } else {
      fprintf(p.dat, " ? ? ? ?\n");
    }
  }
  char title[512];
  snprintf(title, sizeof title, "%s: end-to-end time vs %s.%s", o->dir, o->accel, o->key);
  sweep_plot sp = {o, m != NULL, unhidden, r};
  int rc = plot_close(&p, title, sweep_script, &sp);
  if (rc >= 0)
    fprintf(stderr, "standin: sweep: plot in %s/sweep (.dat, .gp%s)\n", o->plot,
            rc ? ", .svg" : "; install gnuplot for .svg");
  return rc < 0 ? -1 : 0;
}

/* A plugin that keeps its parameters in globals, not in its instance,
 * gives every value the last one's answers (a sweep makes every instance
 * before it reads the trace): a flat sweep, and nothing said. Said now when
 * every value of a plugin's own parameter gave the same predictions. */
static void warn_flat_plugin(const an_result *r, const sw_opts *o) {
  const plan *p = o->a.ps.p[0];
  int ai = 0;
  while (ai < p->naccel && strcmp(p->accel[ai].name, o->accel))
    ai++;
  if (ai == p->naccel || o->nvalues < 2 || plan_is_setting(o->key))
    return;
  const char *spec = p->accel[ai].spec;
  size_t nl = strcspn(spec, ":");
  if (!memchr(spec, '/', nl) && !(nl > 3 && !strncmp(spec + nl - 3, ".so", 3)))
    return;
  for (int v = 2; v <= o->nvalues; v++) {
    const an_plan *a = &r->plans[1], *b = &r->plans[v];
    if (a->offloaded != b->offloaded || a->predicted_ns != b->predicted_ns ||
        memcmp(a->sw, b->sw, sizeof a->sw) || a->accel[ai].busy_ns != b->accel[ai].busy_ns)
      return;
  }
  cli_warn("every value of %s.%s gave the same predictions: the parameter changes nothing for "
           "this recording's calls, or the plugin keeps it in a global, which all its instances "
           "share (keep it in the instance create returns: standin_iface.h)",
           o->accel, o->key);
}

int cmd_sweep(int argc, char **argv) {
  cli_calm_signals(); /* the commands that run programs (util.c) */
  static sw_opts o = {.runs = 3}; /* these ~15 KiB: off the stack (a small ulimit -s) */
  anopt_init(&o.a, "sweep", 1);
  static measured m[MAX_VALUES];
  measured nat = {0};
  int rc = parse(argc, argv, &o) == 0 ? 0 : EXIT_USAGE;
  /* with --replay and no --native-wall, the program's native runs are the
   * estimates' baseline: measured first, then the trace is read once; a
   * recording without trace stops the sweep before anything runs */
  int time_native = rc == 0 && o.prog && !o.a.native_wall_ns;
  if (rc == 0 && an_estimable_quick(o.dir, "sweep") != 0)
    rc = 1;
  for (int v = 0; rc == 0 && o.prog && v < o.nvalues; v++)
    if (!(m[v].wall = calloc((size_t)o.runs, sizeof *m[v].wall)) ||
        !(m[v].unhidden = calloc((size_t)o.runs, sizeof *m[v].unhidden)))
      rc = 1;
  if (rc == 0 && time_native && !(nat.wall = calloc((size_t)o.runs, sizeof *nat.wall)))
    rc = 1;
  if (rc == 0 && o.prog && replay_all(&o, m, time_native ? &nat : NULL) != 0)
    rc = 1;
  if (rc == 0 && time_native && nat.ok == 0) {
    cli_err("no native run of %s succeeded: nothing to start the estimates from; give the "
            "program's native time with --native-wall",
            o.prog[0]);
    rc = 1;
  }
  static an_result r; /* ~48 KiB: off the stack (a small ulimit -s) */
  memset(&r, 0, sizeof r);
  if (rc == 0) {
    /* the plan as given is evaluated too: it is the sweep's reference */
    an_opts ao = {.by = AN_BY_API,
                  .plans = (const plan *const *)o.a.ps.p,
                  .nplans = o.a.ps.n,
                  .what = "sweep",
                  .cpus = o.a.cpus,
                  .native_wall_ns = time_native ? nat.median : o.a.native_wall_ns};
    rc = an_run(&r, o.dir, &ao) == 0 && an_estimable(&r, o.dir, "sweep") == 0 ? 0 : 1;
  }
  if (rc == 0) {
    const measured *mp = o.prog ? m : NULL, *np = time_native ? &nat : NULL;
    (o.a.json ? print_json : print_text)(&r, &o, mp, np);
    warn_flat_plugin(&r, &o);
    if (o.plot && write_plot(&r, &o, mp) != 0)
      rc = 1;
  }
  if (rc == 0 && r.damaged)
    rc = 1; /* estimates of the calls before the damage: said, and the status says it */
  for (int v = 0; v < MAX_VALUES; v++) {
    free(m[v].wall);
    free(m[v].unhidden);
  }
  free(nat.wall);
  for (int v = 0; v < o.nvalues; v++)
    free(o.values[v]);
  an_free(&r);
  anopt_free(&o.a);
  return rc;
}

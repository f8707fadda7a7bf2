/* cmd_compare.c — `standin compare`: the offline estimate of a plan beside
 * the wall time that replays of the same plan measured. */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anopt.h"
#include "anprint.h"
#include "cli.h"
#include "json.h"

static const char usage_text[] =
    "usage: standin compare [DIR] (--plan FILE | --iface SPEC...) SUMMARY.json...\n"
    "                       [--format text|json] [--cpus N] [--native-wall T]\n"
    "\n"
    "Estimates the plan offline (as `standin whatif`) on the recording DIR (default\n"
    "standin.data) and prints, for each `standin replay --summary` file measured with\n"
    "the same plan, the measured wall time beside the estimate and the naive sum, with\n"
    "their differences in % of the measured time (positive: the estimate is longer),\n"
    "the calls replayed beside the calls the plan offloads offline, and per\n"
    "accelerator the measured and estimated requests and queueing. The last row is the\n"
    "median over the summaries, less those of another recording, plan or model. Where\n"
    "the replays could not hide their own time (wall_ns - wall_adjusted_ns: setup and\n"
    "overruns no later slack paid back), a note gives it and the median less it.\n"
    "\n"
    "  -t, --trace DIR   the recording, as for replay (or DIR)\n"
    "  -p, --plan FILE   the plan the replays used\n"
    "  -i, --iface SPEC  or its --iface options, repeated as they were given to replay\n"
    "      --format F    text (default) or json\n"
    "      --cpus N      CPUs of the recording machine (default: this one's)\n"
    "      --native-wall T  the program's wall time measured without standin (188ms,\n"
    "                    0.5s, 1200000ns), the estimate's baseline, as for whatif;\n"
    "                    `standin native -- PROGRAM` times it as replay times its runs\n"
    "                    (its --summary FILE.json may be given as T)\n";

#define MAX_SUMMARIES 256

typedef struct {
  const char *dir;
  const char *files[MAX_SUMMARIES];
  int nfiles;
  anopt a;
} cmp_opts;

typedef struct {
  uint64_t wall, replayed, approx, fallback;
  uint64_t unhidden; /* of wall: the harness's own time (anp_replay_unhidden) */
  json *doc;
  const char *apart; /* why it is left out of the median (warned), or NULL */
} summary;

static int parse(int argc, char **argv, cmp_opts *o) {
  if (anopt_parse(&o->a, argc, argv, usage_text) != 0)
    return -1;
  /* the recording is -t DIR, or the one argument that is not a .json */
  o->dir = o->a.trace;
  for (; optind < argc; optind++) {
    size_t n = strlen(argv[optind]);
    if (n > 5 && !strcmp(argv[optind] + n - 5, ".json")) {
      if (o->nfiles == MAX_SUMMARIES) {
        cli_err("compare: at most %d summaries", MAX_SUMMARIES);
        return -1;
      }
      o->files[o->nfiles++] = argv[optind];
    } else if (!o->dir) {
      o->dir = argv[optind];
    } else if (o->a.trace) {
      cli_err("compare: the recording is %s (-t); '%s' is not a .json summary", o->a.trace,
              argv[optind]);
      return -1;
    } else {
      cli_err("compare: '%s' is neither the recording nor a .json summary", argv[optind]);
      return -1;
    }
  }
  if (!o->dir)
    o->dir = "standin.data";
  if (!o->a.ps.n || !o->nfiles) {
    cli_err("compare: give the plan (--plan or --iface) and one or more replay summaries");
    fputs(usage_text, stderr);
    return -1;
  }
  return 0;
}

static int load(const cmp_opts *o, summary *s) {
  for (int i = 0; i < o->nfiles; i++) {
    if (json_load(&s[i].doc, o->files[i]) != 0)
      return -1;
    const json *w = json_get(s[i].doc, "wall_ns");
    if (!w || w->kind != JSON_NUM) {
      cli_err("%s has no wall_ns: is it a 'standin replay --summary' file?", o->files[i]);
      return -1;
    }
    if (json_count(w, &s[i].wall) != 0 || s[i].wall == 0) {
      cli_err("%s: wall_ns is %g, not a time a replay measured (a whole number of ns above 0); "
              "give summaries that 'standin replay --summary' wrote",
              o->files[i], w->num);
      return -1;
    }
    s[i].unhidden = anp_replay_unhidden(s[i].doc);
    static const char *const counts[] = {"calls_replayed", "calls_approximated", "calls_fallback"};
    uint64_t *dst[] = {&s[i].replayed, &s[i].approx, &s[i].fallback};
    for (int k = 0; k < 3; k++) {
      const json *c = json_get(s[i].doc, counts[k]);
      *dst[k] = 0;
      if (c && json_count(c, dst[k]) != 0) {
        cli_err("%s: %s is not a count of calls; give summaries that 'standin replay "
                "--summary' wrote",
                o->files[i], counts[k]);
        return -1;
      }
    }
    /* whatif's and report's JSON have a wall_ns too (the recording's): one
     * was taken for a measured replay (build/demo/both.whatif.json) */
    if (!json_get(s[i].doc, "calls_intercepted")) {
      cli_err("%s is not a 'standin replay --summary' file (it has no calls_intercepted: "
              "whatif's or report's JSON?); give compare replay summaries only",
              o->files[i]);
      return -1;
    }
    char said[512];
    if (cli_cpu_wait_of_summary(s[i].doc, said, sizeof said))
      cli_warn("%s: %s: its wall time includes those waits", o->files[i], said);
    /* a replay whose calls all missed ran the program for real: its wall
     * time says nothing of the plan */
    if (s[i].replayed + s[i].approx == 0 && s[i].fallback > 0) {
      char n[32];
      cli_warn("%s answered no call from the recording (%s fallback%s): its wall time is the "
               "program's own, not the plan's; see its fallback_reasons, and --on-miss nearest "
               "for programs whose requests change from run to run",
               o->files[i], cli_fmt_count(n, sizeof n, s[i].fallback),
               s[i].fallback == 1 ? "" : "s");
    }
    /* a replay of another recording measures another program (summaries
     * since 2026-11-29 say which; older ones cannot be checked) */
    const json *rec = json_get(s[i].doc, "recording");
    char want[PATH_MAX], got[PATH_MAX];
    if (rec && rec->kind == JSON_STR && realpath(o->dir, want) &&
        strcmp(realpath(rec->str, got) ? got : rec->str, want) != 0) {
      cli_warn("%s is a replay of %s, not of %s: its wall time is not this recording's to "
               "compare with; it is left out of the median",
               o->files[i], rec->str, want);
      s[i].apart = "another recording";
    }
  }
  return 0;
}

/* A summary whose replay had none of the plan's accelerators ran another
 * plan: its times are not this plan's. */
static void check_accelerators(const cmp_opts *o, summary *s, const plan *p) {
  for (int i = 0; i < o->nfiles; i++) {
    const json *arr = json_get(s[i].doc, "accelerators");
    if (!arr || arr->kind != JSON_ARR)
      continue;
    int shared = 0;
    for (int k = 0; k < p->naccel; k++)
      for (size_t j = 0; j < arr->n; j++) {
        const json *n = json_get(&arr->items[j], "name");
        if (!n || n->kind != JSON_STR || strcmp(n->str, p->accel[k].name))
          continue;
        shared = 1;
        /* the same accelerator with other parameters is another model */
        const json *m = json_get(&arr->items[j], "model");
        const char *want = if_model_describe(p->accel[k].model);
        if (m && m->kind == JSON_STR && !if_spec_same(m->str, want)) {
          cli_warn("%s replayed %s as %s, not %s: its times are another model's; it is left "
                   "out of the median",
                   o->files[i], p->accel[k].name, m->str, want);
          s[i].apart = s[i].apart ? s[i].apart : "another model";
        }
      }
    if (!shared && p->naccel) {
      cli_warn("%s was replayed with none of the plan's accelerators (%s%s): give compare the "
               "plan or --iface the replay ran with; it is left out of the median",
               o->files[i], p->accel[0].name, p->naccel > 1 ? ", ..." : "");
      s[i].apart = s[i].apart ? s[i].apart : "another plan";
    }
  }
}

/* A summary's accelerator figure as shown: 0 when it is not a count. */
static uint64_t shown(const json *v) {
  uint64_t x = 0;
  return json_count(v, &x) == 0 ? x : 0;
}

static double diff(uint64_t est, uint64_t meas) {
  return meas ? 100.0 * ((double)est - (double)meas) / (double)meas : 0.0;
}

/* Summaries the median is taken over: those of this recording and plan,
 * or every one when none is (the rows say which). */
static int in_median(const summary *s, int n, int i) {
  for (int j = 0; j < n; j++)
    if (!s[j].apart)
      return !s[i].apart;
  return 1;
}

/* The median of the measured wall times, or with less_unhidden of those
 * less the harness's unhidden time. */
static uint64_t median_wall(const summary *s, int n, int less_unhidden) {
  uint64_t v[MAX_SUMMARIES];
  int m = 0;
  for (int i = 0; i < n; i++)
    if (in_median(s, n, i))
      v[m++] = s[i].wall - (less_unhidden ? s[i].unhidden : 0);
  return cli_median_u64(v, (size_t)m);
}

/* Accelerator `name` of a summary, or NULL. */
static const json *summary_accel(const summary *s, const char *name) {
  const json *arr = json_get(s->doc, "accelerators");
  for (size_t i = 0; arr && arr->kind == JSON_ARR && i < arr->n; i++) {
    const json *n = json_get(&arr->items[i], "name");
    if (n && n->kind == JSON_STR && !strcmp(n->str, name))
      return &arr->items[i];
  }
  return NULL;
}

/* Where the harness took longer than the model's calls and later slack
 * could not pay it back (or its setup was long), the replay measured its
 * own cost beside the plan's: said, with the median less it. */
static void note_unhidden(const summary *s, int n, uint64_t est, uint64_t med) {
  uint64_t adj = median_wall(s, n, 1), most = 0;
  for (int i = 0; i < n; i++)
    if (in_median(s, n, i) && s[i].unhidden > most)
      most = s[i].unhidden;
  if (med == 0 || (double)(med - adj) < ANP_UNHIDDEN_SHARE * (double)med)
    return;
  char u[32], x[32], a[32];
  printf("\nnote: the replays could not hide %s of their own time (median; up to %s): their "
         "setup, and overruns (calls whose harness took longer than the model's latency) that "
         "no later call's slack paid back (wall_ns - wall_adjusted_ns of the summaries). "
         "MEASURED includes it where the plan's run would not; less it, the median is %s and "
         "the estimate differs by %+.1f%%. 'standin replay' prints its harness's time a call "
         "by API.\n",
         cli_fmt_ns(u, sizeof u, (double)(med - adj)), cli_fmt_ns(x, sizeof x, (double)most),
         cli_fmt_ns(a, sizeof a, (double)adj), diff(est, adj));
}

static void print_text(const an_result *r, const cmp_opts *o, const summary *s) {
  char a[32], b[32], c[32], nc[32];
  uint64_t est = an_estimate(r, 0), naive = an_estimate_naive(r, 0);
  printf("recording %s: %s%s; plan %s\n", o->dir, cli_fmt_ns(a, sizeof a, (double)r->wall_ns),
         r->wall_recorded == 2 ? " native wall (--native-wall)" : r->wall_recorded ? " wall (run.info)" : " (trace span)", o->a.ps.name[0]);
  printf("offline: estimate %s by %s (%u CPUs), naive sum %s; %s call%s offloaded\n\n",
         cli_fmt_ns(b, sizeof b, (double)est), an_method(r, 0), r->cpus,
         an_fmt_naive(c, sizeof c, r, 0), cli_fmt_count(nc, sizeof nc, r->plans[0].offloaded),
         r->plans[0].offloaded == 1 ? "" : "s");
  int near = 0;
  for (int i = 0; i < o->nfiles; i++)
    near |= s[i].approx != 0;
  printf("%-32s %11s %11s %9s %11s %9s %10s%s\n", "SUMMARY", "MEASURED", "ESTIMATE", "DIFF",
         "NAIVE SUM", "DIFF", "REPLAYED", near ? " APPROXIMATED" : "");
  int nm = an_naive_means(r, 0);
  for (int i = 0; i < o->nfiles; i++) {
    char m[32], e[32], n[32], rp[32], ap[32], nd[16];
    snprintf(nd, sizeof nd, nm ? "%+.1f%%" : "-", diff(naive, s[i].wall));
    char fn[PATH_MAX];
    snprintf(fn, sizeof fn, "%s", o->files[i]);
    printf("%-32.32s %11s %11s %+8.1f%% %11s %9s %10s", cli_fit(fn, 32),
           cli_fmt_ns(m, sizeof m, (double)s[i].wall), cli_fmt_ns(e, sizeof e, (double)est),
           diff(est, s[i].wall), an_fmt_naive(n, sizeof n, r, 0), nd,
           cli_fmt_count(rp, sizeof rp, s[i].replayed));
    if (near)
      printf(" %12s", cli_fmt_count(ap, sizeof ap, s[i].approx));
    if (s[i].apart)
      printf("  (%s%s)", s[i].apart, in_median(s, o->nfiles, i) ? "" : ": not in the median");
    putchar('\n');
  }
  uint64_t med = median_wall(s, o->nfiles, 0);
  char m[32], e[32], n[32], nd[16], label[32];
  int nmed = 0;
  for (int i = 0; i < o->nfiles; i++)
    nmed += in_median(s, o->nfiles, i);
  snprintf(label, sizeof label, nmed < o->nfiles ? "median of %d" : "median", nmed);
  snprintf(nd, sizeof nd, nm ? "%+.1f%%" : "-", diff(naive, med));
  printf("%-32s %11s %11s %+8.1f%% %11s %9s\n", label, cli_fmt_ns(m, sizeof m, (double)med),
         cli_fmt_ns(e, sizeof e, (double)est), diff(est, med), an_fmt_naive(n, sizeof n, r, 0), nd);
  note_unhidden(s, o->nfiles, est, med);
  const an_plan *pr = &r->plans[0];
  printf("\n%-14s %-32s %10s %11s\n", "ACCELERATOR", "FROM", "REQUESTS", "QUEUE");
  for (int k = 0; k < pr->p->naccel; k++) {
    char q[32], rq[32];
    printf("%-14s %-32s %10s %11s\n", pr->p->accel[k].name, "offline estimate",
           cli_fmt_count(rq, sizeof rq, pr->accel[k].requests),
           cli_fmt_ns(q, sizeof q, (double)pr->accel[k].queue_ns));
    for (int i = 0; i < o->nfiles; i++) {
      const json *ac = summary_accel(&s[i], pr->p->accel[k].name);
      char fn[PATH_MAX];
      snprintf(fn, sizeof fn, "%s", o->files[i]);
      if (!ac) { /* this replay had no such accelerator: nothing measured */
        printf("%-14s %-32.32s %10s %11s\n", "", cli_fit(fn, 32), "-", "-");
        continue;
      }
      printf("%-14s %-32.32s %10s %11s\n", "", cli_fit(fn, 32),
             cli_fmt_count(rq, sizeof rq, shown(json_get(ac, "requests"))),
             cli_fmt_ns(q, sizeof q, (double)shown(json_get(ac, "queue_ns"))));
    }
  }
  anp_notes_text(stdout, r);
}

static void print_json(const an_result *r, const cmp_opts *o, const summary *s) {
  uint64_t est = an_estimate(r, 0), naive = an_estimate_naive(r, 0);
  uint64_t med = median_wall(s, o->nfiles, 0), adj = median_wall(s, o->nfiles, 1);
  printf("{");
  anp_recording_json(stdout, r, o->dir);
  printf(",\n  \"plan\": ");
  anp_plan_json(stdout, r, 0, o->a.ps.name[0]);
  printf(",\n  \"summaries\": [");
  for (int i = 0; i < o->nfiles; i++) {
    printf("%s\n    {\"file\": ", i ? "," : "");
    json_write_str(stdout, o->files[i]);
    printf(", \"wall_ns\": %llu, \"calls_replayed\": %llu, \"calls_approximated\": %llu, "
           "\"estimate_difference\": %.4f, \"naive_difference\": %.4f",
           (unsigned long long)s[i].wall, (unsigned long long)s[i].replayed,
           (unsigned long long)s[i].approx, diff(est, s[i].wall) / 100,
           diff(naive, s[i].wall) / 100);
    printf(", \"unhidden_ns\": %llu", (unsigned long long)s[i].unhidden);
    printf(", \"in_median\": %s, \"apart\": ", in_median(s, o->nfiles, i) ? "true" : "false");
    if (s[i].apart)
      json_write_str(stdout, s[i].apart);
    else
      printf("null");
    /* what the text's ACCELERATOR table shows: the plan's accelerators as
     * measured by this replay (null: it had no such accelerator) */
    const plan *p = r->plans[0].p;
    printf(", \"accelerators\": {");
    for (int k = 0; k < p->naccel; k++) {
      const json *ac = summary_accel(&s[i], p->accel[k].name);
      printf("%s", k ? ", " : "");
      json_write_str(stdout, p->accel[k].name);
      if (ac)
        printf(": {\"requests\": %llu, \"queue_ns\": %llu}",
               (unsigned long long)shown(json_get(ac, "requests")),
               (unsigned long long)shown(json_get(ac, "queue_ns")));
      else
        printf(": null");
    }
    printf("}}");
  }
  printf("\n  ],\n  \"median_wall_ns\": %llu, \"estimate_ns\": %llu, \"naive_ns\": %llu, "
         "\"estimate_difference\": %.4f, \"naive_difference\": %.4f,\n"
         "  \"median_wall_less_unhidden_ns\": %llu, \"estimate_difference_less_unhidden\": "
         "%.4f\n}\n",
         (unsigned long long)med, (unsigned long long)est, (unsigned long long)naive,
         diff(est, med) / 100, diff(naive, med) / 100, (unsigned long long)adj,
         diff(est, adj) / 100);
}

int cmd_compare(int argc, char **argv) {
  cmp_opts o = {0};
  anopt_init(&o.a, "compare", 1);
  static summary s[MAX_SUMMARIES]; /* ~20 KiB: off the stack (a small ulimit -s) */
  int rc = parse(argc, argv, &o) == 0 ? 0 : EXIT_USAGE;
  if (rc == 0 && load(&o, s) != 0)
    rc = 1;
  static an_result r; /* ~48 KiB: off the stack (a small ulimit -s) */
  memset(&r, 0, sizeof r);
  if (rc == 0) {
    an_opts ao = {.by = AN_BY_API,
                  .plans = (const plan *const *)o.a.ps.p,
                  .nplans = 1,
                  .what = "compare",
                  .cpus = o.a.cpus,
                  .native_wall_ns = o.a.native_wall_ns};
    rc = an_run(&r, o.dir, &ao) == 0 && an_estimable(&r, o.dir, "compare") == 0 ? 0 : 1;
  }
  if (rc == 0) {
    check_accelerators(&o, s, o.a.ps.p[0]);
    (o.a.json ? print_json : print_text)(&r, &o, s);
    if (r.damaged)
      rc = 1; /* the estimate is of the calls before the damage (said) */
  }
  for (int i = 0; i < o.nfiles; i++)
    json_free(s[i].doc);
  an_free(&r);
  anopt_free(&o.a);
  return rc;
}

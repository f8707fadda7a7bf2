/* cmd_whatif.c — `standin whatif`: offline end-to-end estimate per plan. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anopt.h"
#include "anprint.h"
#include "cli.h"
#include "json.h"

static const char usage_text[] =
    "usage: standin whatif [DIR] (--plan FILE | --iface SPEC)... [--format text|json]\n"
    "                      [--native-wall T] [--cpus N]\n"
    "\n"
    "Estimates, without running the program, the end-to-end time of the recording\n"
    "(default standin.data) under each plan: every call a plan offloads takes its\n"
    "predicted time (link + queueing + service) instead of its recorded time.\n"
    "\n"
    "  One thread made every call: single-thread Amdahl, recorded time minus the\n"
    "  offloaded calls' recorded time plus their predicted time.\n"
    "  Several threads or processes: per-thread critical path. Each thread's own\n"
    "  timeline shifts by its calls' savings; a thread that starts after others\n"
    "  finished inherits their shift; the run ends when the latest-ending thread's\n"
    "  last call ends under the plan, plus the recorded time after the last call.\n"
    "  It assumes a CPU per thread; the estimate is never below the CPU capacity\n"
    "  bound: threads busy from their first call to their last (CPU-bound; a\n"
    "  thread waiting for the accelerator polls), at most every CPU, minus the\n"
    "  savings, over the CPUs. The column ESTIMATE BY says which one decided.\n"
    "  Subtracting every call's saving (the naive sum) is printed beside it.\n"
    "\n"
    "The recorded time is the wall time `standin record` measured (run.info), as\n"
    "`standin replay --summary` measures wall_ns, or else the trace's span.\n"
    "docs/ANALYSIS.md explains the model and its approximations.\n"
    "\n"
    "  -t, --trace DIR   the recording, as for replay (or DIR)\n"
    "  -p, --plan FILE   a plan to estimate (repeatable: one row each)\n"
    "  -i, --iface SPEC  [API=]MODEL[:key=value,...]; all --iface options together\n"
    "                    form one plan, as for replay\n"
    "      --format F    text (default) or json\n"
    "      --cpus N      CPUs of the recording machine (default: this one's)\n"
    "      --native-wall T  the program's wall time measured without standin (188ms,\n"
    "                    0.5s, 1200000ns): recording slows a program down, so\n"
    "                    estimates taken from the recorded run start too high;\n"
    "                    `standin native -- PROGRAM` times it as replay times its\n"
    "                    runs (a shell's `time` adds its fork); its --summary FILE.json\n"
    "                    may be given as T\n";

typedef struct {
  const char *dir;
  anopt a;
} wi_opts;

static int parse(int argc, char **argv, wi_opts *o) {
  if (anopt_parse(&o->a, argc, argv, usage_text) != 0)
    return -1;
  if (anopt_dir(argc, argv, &o->a, &o->dir) != 0)
    return -1;
  if (o->a.ps.n == 0) {
    cli_err("whatif: give a plan (--plan FILE) or an interface (--iface SPEC)");
    fputs(usage_text, stderr);
    return -1;
  }
  return 0;
}

/* A plan file by its base name (an --iface plan by its options), or by
 * its path when another plan's file has the same base name. */
static const char *base_label(const char *name) {
  const char *slash = strrchr(name, '/');
  return slash && name[0] != '-' ? slash + 1 : name;
}

static const char *plan_label(const planset *ps, int k) {
  const char *b = base_label(ps->name[k]);
  for (int j = 0; j < ps->n; j++)
    if (j != k && strcmp(ps->name[j], ps->name[k]) != 0 && !strcmp(base_label(ps->name[j]), b))
      return ps->name[k];
  return b;
}

/* The plan with the shortest estimate (the first of equals). */
static int best_plan(const an_result *r) {
  int b = 0;
  for (int k = 1; k < r->nplans; k++)
    if (an_estimate(r, k) < an_estimate(r, b))
      b = k;
  return b;
}

/* Plans whose estimates differ by less than this share of the recorded
 * time are not told apart: estimates have landed within a few percent of
 * measured runs (docs/VALIDATION.md), up to -13..+7% in earlier series. */
#define WI_CLOSE 0.05

/* The answer to "which plan, and what does it buy": the best plan against
 * the run the estimates start from and against the next best, and whether
 * either gap is smaller than what estimates are known to be off by. */
static void print_verdict(const an_result *r, const wi_opts *o) {
  char a[32], b[32], c[32];
  int best = best_plan(r), next = -1;
  uint64_t est = an_estimate(r, best);
  double wall = (double)r->wall_ns, gain = wall - (double)est, gap = 0;
  const char *base = r->wall_recorded == 2 ? "the native run" : "the recorded run";
  for (int k = 0; k < r->nplans; k++)
    if (k != best && (next < 0 || an_estimate(r, k) < an_estimate(r, next)))
      next = k;
  printf("\n%s%s: %s, ", r->nplans > 1 ? "best: " : "", plan_label(&o->a.ps, best),
         cli_fmt_ns(a, sizeof a, (double)est));
  if (gain > 0)
    printf("%s (%.1f%%) less than %s\n", cli_fmt_ns(b, sizeof b, gain),
           wall ? 100.0 * gain / wall : 0.0, base);
  else if (gain == 0) /* nothing offloaded, or savings that cancel out */
    printf("the same as %s: %s\n", base,
           r->nplans > 1 ? "no plan shortens the run" : "the plan does not shorten the run");
  else
    printf("%s (%.1f%%) more than %s: %s\n", cli_fmt_ns(b, sizeof b, -gain),
           wall ? -100.0 * gain / wall : 0.0, base,
           r->nplans > 1 ? "no plan shortens the run" : "the plan does not shorten the run");
  if (next >= 0) {
    gap = (double)an_estimate(r, next) - (double)est;
    if (gap > 0)
      printf("  %s (%.1f%%) ahead of the next, %s\n", cli_fmt_ns(c, sizeof c, gap),
             wall ? 100.0 * gap / wall : 0.0, plan_label(&o->a.ps, next));
    else
      printf("  the same as %s\n", plan_label(&o->a.ps, next));
  }
  /* threads that wait on each other's calls gain what whatif cannot see:
   * vipsthumbnail with a 4x decoder measured ~37% faster where the
   * critical path said 25%; the naive sum bounds it from below */
  uint64_t naive = an_estimate_naive(r, best);
  if (r->chains > 1 && an_naive_means(r, best) && wall &&
      (double)est - (double)naive > WI_CLOSE * wall)
    printf("  its calls are on %llu threads, and whatif takes each thread's calls alone: where "
           "threads wait on each other (a pool's work, a join), the run can end as early as %s "
           "(every call's saving subtracted); measure with 'standin replay --plan FILE "
           "--summary S.json' and 'standin compare'\n",
           (unsigned long long)r->chains, cli_fmt_ns(c, sizeof c, (double)naive));
  if (wall && ((gain && fabs(gain) < WI_CLOSE * wall) || (gap > 0 && gap < WI_CLOSE * wall)))
    printf("  a difference under %.0f%% of the run is within what estimates can be off by "
           "(docs/VALIDATION.md): measure with 'standin replay --plan FILE --summary S.json' "
           "and 'standin compare'%s\n",
           100 * WI_CLOSE, next >= 0 ? ", or 'standin sweep --replay'" : "");
}

static void print_text(const an_result *r, const wi_opts *o) {
  char a[32], b[32], c[32];
  printf("recording %s: %s%s, %llu process%s, %llu thread%s with calls, %s call%s, %s in calls\n",
         o->dir, cli_fmt_ns(a, sizeof a, (double)r->wall_ns),
         r->wall_recorded == 2 ? " native wall (--native-wall)" : r->wall_recorded ? " wall (run.info)" : " (trace span)", (unsigned long long)r->processes,
         r->processes == 1 ? "" : "es", (unsigned long long)r->chains, r->chains == 1 ? "" : "s",
         cli_fmt_count(b, sizeof b, r->calls), r->calls == 1 ? "" : "s",
         cli_fmt_ns(c, sizeof c, (double)r->call_ns));
  if (r->processes > 1 || r->chains > 1)
    printf("estimate: the later of the per-thread critical path and the CPU capacity bound "
           "(%u CPUs)\n",
           r->cpus);
  printf("\n%-28s %10s %11s %11s %11s %11s %8s %11s  %s\n", "PLAN", "OFFLOADED", "RECORDED",
         "PREDICTED", "QUEUE", "ESTIMATE", "CHANGE", "NAIVE SUM", "ESTIMATE BY");
  for (int k = 0; k < r->nplans; k++) {
    const an_plan *pr = &r->plans[k];
    uint64_t q = 0, est = an_estimate(r, k);
    for (int i = 0; i < pr->p->naccel; i++)
      q += pr->accel[i].queue_ns;
    char n[32], rec[32], pred[32], qs[32], e[32], nv[32];
    /* cut at the front, where two plans' names are most alike
     * (exp_variant_A.plan, exp_variant_B.plan); the full name follows */
    const char *nm = plan_label(&o->a.ps, k);
    char cut[32];
    if (strlen(nm) > 28) {
      snprintf(cut, sizeof cut, "...%s", nm + strlen(nm) - 25);
      nm = cut;
    }
    printf("%-28.28s %10s %11s %11s %11s %11s %+7.1f%% %11s  %s\n", nm,
           cli_fmt_count(n, sizeof n, pr->offloaded),
           cli_fmt_ns(rec, sizeof rec, (double)pr->offloaded_rec_ns),
           cli_fmt_ns(pred, sizeof pred, (double)pr->predicted_ns),
           cli_fmt_ns(qs, sizeof qs, (double)q), cli_fmt_ns(e, sizeof e, (double)est),
           r->wall_ns ? 100.0 * ((double)est - (double)r->wall_ns) / (double)r->wall_ns : 0.0,
           an_fmt_naive(nv, sizeof nv, r, k), an_method(r, k));
  }
  for (int k = 0; k < r->nplans; k++) {
    if (strlen(plan_label(&o->a.ps, k)) > 28)
      printf("  (%s)\n", o->a.ps.name[k]);
  }
  print_verdict(r, o);
  /* a model faster than the page faults its calls took: the estimate
   * counts a saving no run can have (replay says so of its overruns) */
  for (int k = 0; k < r->nplans; k++) {
    const an_plan *pr = &r->plans[k];
    if (!r->wall_ns || pr->faults_over_ns * 100 < r->wall_ns)
      continue;
    char fo[32];
    printf("  under %s, the model predicts calls faster than the page faults they took "
           "(fault_ns: memory the program had not touched), by %s in all (%.1f%% of the "
           "run): a replay writes that memory too and takes them, so the run cannot be "
           "that fast; models of devices keep that time\n",
           plan_label(&o->a.ps, k), cli_fmt_ns(fo, sizeof fo, (double)pr->faults_over_ns),
           100.0 * (double)pr->faults_over_ns / (double)r->wall_ns);
  }
  /* rows a model leaves in memory, or in the caches, unlike the recorded
   * decodes: the program's own reads of them change, which no estimate
   * includes and replay measures (placement.h) */
  for (int k = 0; k < r->nplans; k++)
    anp_rows_note_text(stdout, r, k, plan_label(&o->a.ps, k));
  /* what each plan leaves in software, and why (as report prints it) */
  for (int k = 0; k < r->nplans; k++) {
    const an_plan *pr = &r->plans[k];
    uint64_t sw = 0;
    for (int i = 0; i < AN_SW_N; i++)
      sw += pr->sw[i];
    if (sw == 0)
      continue;
    printf("\nin software under %s:\n", plan_label(&o->a.ps, k));
    anp_software_text(stdout, r, k);
  }
  anp_notes_text(stdout, r);
}

static void print_json(const an_result *r, const wi_opts *o) {
  printf("{");
  anp_recording_json(stdout, r, o->dir);
  printf(",\n  \"plans\": [");
  for (int k = 0; k < r->nplans; k++) {
    printf("%s\n   ", k ? "," : "");
    anp_plan_json(stdout, r, k, o->a.ps.name[k]);
  }
  printf("\n  ],\n  \"best\": ");
  json_write_str(stdout, o->a.ps.name[best_plan(r)]);
  printf("\n}\n");
}

int cmd_whatif(int argc, char **argv) {
  wi_opts o = {0};
  anopt_init(&o.a, "whatif", 0);
  if (parse(argc, argv, &o) != 0) {
    anopt_free(&o.a);
    return EXIT_USAGE;
  }
  an_opts ao = {.by = AN_BY_API,
                .plans = (const plan *const *)o.a.ps.p,
                .nplans = o.a.ps.n,
                .what = "whatif",
                .cpus = o.a.cpus,
                  .native_wall_ns = o.a.native_wall_ns};
  static an_result r; /* ~48 KiB: off the stack (a small ulimit -s) */
  int rc = an_run(&r, o.dir, &ao);
  if (rc == 0 && an_estimable(&r, o.dir, "estimate") != 0)
    rc = -1;
  if (rc == 0)
    (o.a.json ? print_json : print_text)(&r, &o);
  int damaged = rc == 0 && r.damaged;
  an_free(&r);
  anopt_free(&o.a);
  return rc != 0 || damaged ? 1 : 0;
}

/* cmd_report.c — `standin report`: where the time goes, and what a plan
 * would offload. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "anopt.h"
#include "anprint.h"
#include "cli.h"
#include "json.h"
#include "plot.h"

static const char usage_text[] =
    "usage: standin report [DIR] [--by api|type|site|thread] [--plan FILE | --iface SPEC...]\n"
    "                      [--format text|json] [--plot DIR] [--cpus N] [--native-wall T]\n"
    "\n"
    "Reads a recording (default standin.data) once, in bounded memory, and prints per\n"
    "group: calls, time in the calls and its share of the run time (%RUN; of the thread's\n"
    "process for --by thread, else of all processes together: with several threads\n"
    "it can pass 100%), latency percentiles p50/p90/p99 from a log-linear histogram\n"
    "(within 1.6%; max exact), request and response bytes.\n"
    "\n"
    "With a plan: per group how many calls would be offloaded and how many stay in\n"
    "software and why (not selected, kept, unsupported by the model, no recorded\n"
    "response), the recorded time of the offloaded calls and their predicted service,\n"
    "link and queueing time (accelerator engines as a timeline over the recorded\n"
    "start times, per process); per accelerator the totals; and the end-to-end\n"
    "estimate of `standin whatif`.\n"
    "\n"
    "  -t, --trace DIR   the recording, as for replay (or DIR)\n"
    "  --by G            group by api, type (API and message type; default), site\n"
    "                    (call-site label) or thread (process and thread index)\n"
    "  -p, --plan FILE   an offload plan (docs/PLANS.md)\n"
    "  -i, --iface SPEC  [API=]MODEL[:key=value,...], as for replay; repeatable\n"
    "      --format F    text (default) or json\n"
    "      --cpus N      CPUs of the recording machine, for the estimate (default:\n"
    "                    this one's)\n"
    "      --native-wall T  the program's wall time measured without standin (188ms,\n"
    "                    0.5s, 1200000ns): with a plan, the estimate's baseline, as\n"
    "                    for whatif (shares stay of the recorded run); `standin\n"
    "                    native -- PROGRAM` times it as replay times its runs (its\n"
    "                    --summary FILE.json may be given as T)\n"
    "      --plot DIR    also write DIR/latency.{dat,gp} (latency distribution per\n"
    "                    group, the 12 groups with the most time) and DIR/size.{dat,gp}\n"
    "                    (mean recorded and, with a plan, predicted time per request\n"
    "                    size, per API); gnuplot, when installed, renders them as SVG\n"
    "\n"
    "docs/ANALYSIS.md explains the figures and their approximations.\n";

typedef struct {
  const char *dir, *plot;
  an_by by;
  anopt a;
} rep_opts;

static int parse(int argc, char **argv, rep_opts *o) {
  static const struct option lo[] = {ANOPT_LONG,
                                     {"by", required_argument, 0, 'b'},
                                     {"plot", required_argument, 0, 'P'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  int c;
  const char *by = NULL;
  optind = 1;
  while ((c = anopt_next(&o->a, argc, argv, lo)) != -1) {
    switch (c) {
    case 'b':
      if (by) { /* the last one was taken, without a word */
        cli_err("--by is given twice (%s, %s): a report groups one way; give one", by, optarg);
        return -1;
      }
      by = optarg;
      if (anp_parse_by(optarg, &o->by) != 0) {
        cli_err("--by: '%s' is not api, type, site or thread", optarg);
        return -1;
      }
      break;
    case 'P': o->plot = optarg; break;
    case 'h': fputs(usage_text, stdout); exit(0);
    case 0: return -1; /* said why */
    default: fputs(usage_text, stderr); return -1;
    }
  }
  return anopt_dir(argc, argv, &o->a, &o->dir);
}

/* ---- text ---------------------------------------------------------------- */

static int label_width(const an_result *r, an_by by) {
  int w = 5;
  for (size_t i = 0; i < r->ngroups; i++) {
    char l[1024];
    anp_group_label(&r->groups[i], by, l, sizeof l);
    int n = (int)strlen(l);
    w = n > w ? n : w;
  }
  return w > 60 ? 60 : w;
}

static void print_calls(const an_result *r, const size_t *ix, an_by by, int w) {
  printf("%-*s %10s %11s %6s %10s %10s %10s %10s %10s %10s\n", w, "GROUP", "CALLS", "TIME", "%RUN",
         "P50", "P90", "P99", "MAX", "REQ", "RESP");
  for (size_t i = 0; i < r->ngroups; i++) {
    const an_group *g = &r->groups[ix[i]];
    char l[1024], c[32], t[32], p5[32], p9[32], p99[32], mx[32], q[32], s[32];
    anp_group_label(g, by, l, sizeof l);
    printf("%-*.*s %10s %11s %5.1f%% %10s %10s %10s %10s %10s %10s\n", w, w, cli_fit(l, w),
           cli_fmt_count(c, sizeof c, g->calls), cli_fmt_ns(t, sizeof t, (double)g->ns),
           100.0 * anp_share(r, g), cli_fmt_ns(p5, sizeof p5, (double)hist_quantile(g->h, 0.5)),
           cli_fmt_ns(p9, sizeof p9, (double)hist_quantile(g->h, 0.9)),
           cli_fmt_ns(p99, sizeof p99, (double)hist_quantile(g->h, 0.99)),
           cli_fmt_ns(mx, sizeof mx, (double)g->h->max),
           cli_fmt_side(q, sizeof q, g->byte_sides & ST_SIDE_REQ, g->req_bytes),
           cli_fmt_side(s, sizeof s, g->byte_sides & ST_SIDE_RESP, g->resp_bytes));
  }
}

/* "not-selected 3, unsupported 9" */
/* A group's offloaded calls' predicted time (queueing included). */
static uint64_t gplan_predicted(const an_gplan *gp) {
  return gp->source_ns + gp->service_ns + gp->link_ns + gp->fault_ns + gp->queue_ns;
}

static void why_cell(const an_gplan *gp, char *buf, size_t cap) {
  static const char *const shortn[AN_SW_N] = {"not-selected", "kept", "unsupported", "no-response",
                                              "not-offloadable"};
  size_t o = 0;
  char n[32];
  buf[0] = 0;
  for (int i = 0; i < AN_SW_N && o < cap; i++)
    if (gp->sw[i])
      o += (size_t)snprintf(buf + o, cap - o, "%s%s %s", o ? ", " : "", shortn[i],
                            cli_fmt_count(n, sizeof n, gp->sw[i]));
}

static void print_plan(const an_result *r, const size_t *ix, an_by by, int w, const char *name) {
  const an_plan *pr = &r->plans[0];
  uint64_t sw = 0;
  for (int i = 0; i < AN_SW_N; i++)
    sw += pr->sw[i];
  char a[32], b[32], c[32];
  printf("\nplan %s: %s of %s calls offloaded (%.1f%%), %s stay in software\n", name,
         cli_fmt_count(a, sizeof a, pr->offloaded), cli_fmt_count(b, sizeof b, r->calls),
         r->calls ? 100.0 * (double)pr->offloaded / (double)r->calls : 0.0,
         cli_fmt_count(c, sizeof c, sw));
  int ww = 12; /* the WHY SOFTWARE column: as wide as its widest cell */
  for (size_t i = 0; i < r->ngroups; i++) {
    char why[128];
    why_cell(&r->groups[i].plan[0], why, sizeof why);
    ww = (int)strlen(why) > ww ? (int)strlen(why) : ww;
  }
  printf("%-*s %9s %9s %-*s %11s %11s %11s %11s %11s %11s\n", w, "GROUP", "OFFLOADED", "SOFTWARE",
         ww, "WHY SOFTWARE", "RECORDED", "SERVICE", "LINK", "FAULTS", "QUEUE", "PREDICTED");
  for (size_t i = 0; i < r->ngroups; i++) {
    const an_group *g = &r->groups[ix[i]];
    const an_gplan *gp = &g->plan[0];
    char l[1024], why[128], rec[32], s[32], lk[32], fl[32], q[32], p[32];
    anp_group_label(g, by, l, sizeof l);
    why_cell(gp, why, sizeof why);
    printf("%-*.*s %9llu %9llu %-*s %11s %11s %11s %11s %11s %11s\n", w, w, cli_fit(l, w),
           (unsigned long long)gp->offloaded, (unsigned long long)(g->calls - gp->offloaded), ww,
           why, cli_fmt_ns(rec, sizeof rec, (double)gp->offloaded_rec_ns),
           cli_fmt_ns(s, sizeof s, (double)gp->service_ns),
           cli_fmt_ns(lk, sizeof lk, (double)gp->link_ns),
           cli_fmt_ns(fl, sizeof fl, (double)gp->fault_ns),
           cli_fmt_ns(q, sizeof q, (double)gp->queue_ns),
           cli_fmt_ns(p, sizeof p, (double)gplan_predicted(gp)));
  }
  printf("\n");
  anp_accels_text(stdout, r, 0);
  if (sw)
    printf("\nin software:\n");
  anp_software_text(stdout, r, 0);
  printf("\n");
  anp_estimate_text(stdout, r, 0);
  /* decoded rows the models leave elsewhere than the recorded decodes did:
   * the program's reads of them, which the estimate leaves out */
  anp_rows_note_text(stdout, r, 0, name);
}

static void print_text(const an_result *r, const rep_opts *o, const size_t *ix) {
  char a[32], b[32], c[32];
  double share = r->run_ns ? 100.0 * (double)r->call_ns / (double)r->run_ns : 0.0;
  printf("recording %s: %llu process%s, %llu thread%s with calls, %s call%s, %s in calls = "
         "%.1f%% of %s%s run time%s\n",
         o->dir, (unsigned long long)r->processes, r->processes == 1 ? "" : "es",
         (unsigned long long)r->chains, r->chains == 1 ? "" : "s",
         cli_fmt_count(a, sizeof a, r->calls), r->calls == 1 ? "" : "s",
         cli_fmt_ns(b, sizeof b, (double)r->call_ns), share, r->run_approx ? ">= " : "",
         cli_fmt_ns(c, sizeof c, (double)r->run_ns),
         share > 100.0 ? " (threads call at the same time: their times add up)" : "");
  printf("percentiles from a log-linear histogram: within %.1f%%; max exact\n\n",
         100.0 * HIST_REL_ERROR);
  int w = label_width(r, o->by);
  print_calls(r, ix, o->by, w);
  if (r->nplans)
    print_plan(r, ix, o->by, w, o->a.ps.name[0]);
  anp_notes_text(stdout, r);
}

/* ---- JSON ------------------------------------------------------------------ */

static void group_json(const an_result *r, const an_group *g, int with_plan) {
  unsigned long long n = g->calls;
  printf("    {\"key\": ");
  json_write_str(stdout, g->key);
  if (g->api >= 0)
    printf(", \"api\": \"%s\"", st_api_name(g->api));
  if (g->type) {
    printf(", \"type\": ");
    json_write_str(stdout, g->type);
  }
  if (g->site) {
    printf(", \"site\": ");
    json_write_str(stdout, g->site);
  }
  if (!g->type && !g->site && g->api < 0)
    printf(", \"pid\": %u, \"exec\": %u, \"thread\": %u", g->pid, g->exec_seq, g->thread);
  if (!g->type && !g->site && g->api < 0 && g->pidns)
    printf(", \"pidns\": %llu", (unsigned long long)g->pidns);
  if (!g->type && !g->site && g->api < 0 && g->nth > 1)
    printf(", \"nth\": %u", g->nth);
  printf(",\n     \"calls\": %llu, \"time_ns\": %llu, \"share\": %.6f, \"mean_ns\": %.1f, "
         "\"min_ns\": %llu, \"p50_ns\": %llu, \"p90_ns\": %llu, \"p99_ns\": %llu, "
         "\"max_ns\": %llu, \"req_bytes\": %llu, \"resp_bytes\": %llu",
         n, (unsigned long long)g->ns, anp_share(r, g), n ? (double)g->ns / (double)n : 0.0,
         (unsigned long long)(n ? g->h->min : 0), (unsigned long long)hist_quantile(g->h, 0.5),
         (unsigned long long)hist_quantile(g->h, 0.9),
         (unsigned long long)hist_quantile(g->h, 0.99), (unsigned long long)g->h->max,
         (unsigned long long)g->req_bytes, (unsigned long long)g->resp_bytes);
  if (with_plan) {
    const an_gplan *gp = &g->plan[0];
    printf(",\n     \"plan\": {\"offloaded\": %llu, \"software\": {",
           (unsigned long long)gp->offloaded);
    for (int i = 0; i < AN_SW_N; i++)
      printf("%s\"%s\": %llu", i ? ", " : "", an_sw_names[i], (unsigned long long)gp->sw[i]);
    printf("}, \"offloaded_recorded_ns\": %llu, \"service_ns\": %llu, \"link_ns\": %llu, "
           "\"fault_ns\": %llu, \"source_ns\": %llu, \"queue_ns\": %llu, \"predicted_ns\": %llu}",
           (unsigned long long)gp->offloaded_rec_ns, (unsigned long long)gp->service_ns,
           (unsigned long long)gp->link_ns, (unsigned long long)gp->fault_ns,
           (unsigned long long)gp->source_ns, (unsigned long long)gp->queue_ns,
           (unsigned long long)gplan_predicted(gp));
  }
  printf("}");
}

static void print_json(const an_result *r, const rep_opts *o, const size_t *ix) {
  printf("{");
  anp_recording_json(stdout, r, o->dir);
  printf(",\n  \"by\": \"%s\", \"percentile_relative_error\": %.4f,\n  \"groups\": [\n",
         anp_by_name(o->by), HIST_REL_ERROR);
  for (size_t i = 0; i < r->ngroups; i++) {
    group_json(r, &r->groups[ix[i]], r->nplans > 0);
    printf("%s\n", i + 1 < r->ngroups ? "," : "");
  }
  printf("  ]");
  if (r->nplans) {
    printf(",\n  \"plan\": ");
    anp_plan_json(stdout, r, 0, o->a.ps.name[0]);
  }
  printf("\n}\n");
}

/* ---- plots ------------------------------------------------------------------ */

#define PLOT_GROUPS 12

typedef struct {
  const an_result *r;
  const size_t *ix;
  an_by by;
  size_t n;
  int apis[ST_API_MAX], predicted[ST_API_MAX], napis;
} plot_ctx;

/* One block per group: bucket upper edge, fraction of calls at or below. */
static void latency_data(FILE *f, const plot_ctx *pc) {
  fprintf(f, "# latency_ns fraction_at_or_below; one block per group\n");
  for (size_t i = 0; i < pc->n; i++) {
    const an_group *g = &pc->r->groups[pc->ix[i]];
    char l[1024];
    anp_group_label(g, pc->by, l, sizeof l);
    fprintf(f, "# %s\n", l);
    uint64_t seen = 0;
    for (unsigned b = 0; b < HIST_NBUCKETS; b++) {
      if (!g->h->b[b])
        continue;
      uint64_t lo, hi;
      hist_bucket_range(b, &lo, &hi);
      seen += g->h->b[b];
      fprintf(f, "%llu %.6f\n", (unsigned long long)(hi < g->h->max ? hi : g->h->max),
              (double)seen / (double)g->h->count);
    }
    fprintf(f, "\n\n");
  }
}

/* Times as "100ns", "20us", "4ms": the data is in ns, the axis in s, so
 * that gnuplot's SI prefixes give the unit (1e+06 ns was read as a count). */
#define PLOT_TIME_FORMAT "'%%.0s%%cs'"

/* gnuplot's default colours repeat after 8 and its key sat inside, over
 * the slowest groups' curves: the 9th group onwards is dashed, and the key
 * goes below the plot. */
static void latency_script(FILE *gp, void *arg) {
  const plot_ctx *pc = arg;
  fprintf(gp, "set key below height 1\nset logscale x\nset format x " PLOT_TIME_FORMAT "\n"
              "set xlabel 'latency (log scale)'\n"
              "set ylabel 'fraction of calls at or below'\nset yrange [0:1.02]\nplot ");
  for (size_t i = 0; i < pc->n; i++) {
    char l[1024];
    anp_group_label(&pc->r->groups[pc->ix[i]], pc->by, l, sizeof l);
    fprintf(gp, "%s'latency.dat' index %zu using ($1*1e-9):2 with steps lw 2 dt %zu title ",
            i ? ", \\\n  " : "", i, i / 8 + 1);
    plot_str(gp, l);
  }
  fprintf(gp, "\n");
}

/* One block per API: size bin, mean recorded ns, mean predicted ns (of the
 * offloaded calls of the bin; '?' when none), calls. */
static void size_data(FILE *f, plot_ctx *pc) {
  const an_result *r = pc->r;
  fprintf(f, "# request_bytes(bin low) mean_recorded_ns mean_predicted_ns calls; a block per "
             "API\n");
  for (int api = 0; api < ST_API_MAX; api++) {
    int any = 0;
    for (unsigned b = 0; b < AN_SIZE_BINS; b++)
      any |= r->bins[api][b].n != 0;
    if (!any)
      continue;
    pc->apis[pc->napis] = api;
    pc->predicted[pc->napis++] = 0;
    fprintf(f, "# %s\n", st_api_name(api));
    for (unsigned b = 0; b < AN_SIZE_BINS; b++) {
      const an_bin *all = &r->bins[api][b];
      if (!all->n)
        continue;
      const an_bin *off = r->nplans ? &r->plans[0].bins[api][b] : NULL;
      fprintf(f, "%llu %.1f ", (unsigned long long)an_bin_low(b),
              (double)all->rec_ns / (double)all->n);
      if (off && off->n) {
        fprintf(f, "%.1f %llu\n", (double)off->pred_ns / (double)off->n,
                (unsigned long long)all->n);
        pc->predicted[pc->napis - 1] = 1;
      } else
        fprintf(f, "? %llu\n", (unsigned long long)all->n);
    }
    fprintf(f, "\n\n");
  }
}

/* Size tics at powers of 4 in binary units ("64 B", "16 KiB"); gnuplot's
 * own SI prefixes wrote 65536 as "66kB". */
static void size_tics(FILE *gp) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  fprintf(gp, "set xtics (");
  for (unsigned k = 0; k < 42; k += 2)
    fprintf(gp, "%s\"%llu %s\" %llu", k ? ", " : "", 1ull << (k % 10), unit[k / 10], 1ull << k);
  fprintf(gp, ")\n");
}

static void size_script(FILE *gp, void *arg) {
  const plot_ctx *pc = arg;
  fprintf(gp, "set key below height 1\nset logscale x 2\nset logscale y 10\n"
              "set format y " PLOT_TIME_FORMAT "\n");
  size_tics(gp);
  fprintf(gp, "set xlabel 'request size (bin lower bound, log scale)'\n"
              "set ylabel 'mean time per call (log scale)'\nset datafile missing '?'\nplot ");
  for (int i = 0; i < pc->napis; i++) {
    const char *api = st_api_name(pc->apis[i]);
    fprintf(gp,
            "%s'size.dat' index %d using ($1 > 0 ? $1 : 0.5):($2*1e-9) with linespoints lw 2 "
            "title '%s software (recorded)'",
            i ? ", \\\n  " : "", i, api);
    if (pc->predicted[i])
      fprintf(gp,
              ", \\\n  'size.dat' index %d using ($1 > 0 ? $1 : 0.5):($3*1e-9) with "
              "linespoints lw 2 dt 2 title '%s predicted (offloaded calls)'",
              i, api);
  }
  fprintf(gp, "\n");
}

static int write_plots(const an_result *r, const rep_opts *o, const size_t *ix) {
  plot_ctx pc = {
      .r = r, .ix = ix, .by = o->by, .n = r->ngroups < PLOT_GROUPS ? r->ngroups : PLOT_GROUPS};
  plot p;
  int made = 0, rc;
  char title[512];
  if (plot_open(&p, o->plot, "latency") != 0)
    return -1;
  latency_data(p.dat, &pc);
  snprintf(title, sizeof title, "latency distribution per %s, %s", anp_by_name(o->by), o->dir);
  if ((rc = plot_close(&p, title, latency_script, &pc)) < 0)
    return -1;
  made += rc;
  if (plot_open(&p, o->plot, "size") != 0)
    return -1;
  size_data(p.dat, &pc);
  snprintf(title, sizeof title, "time per call by request size, %s%s%s", o->dir,
           r->nplans ? ", plan " : "", r->nplans ? o->a.ps.name[0] : "");
  if ((rc = plot_close(&p, title, size_script, &pc)) < 0)
    return -1;
  made += rc;
  fprintf(stderr, "standin: report: plots in %s: latency and size (.dat, .gp%s)\n", o->plot,
          made ? ", .svg" : "; install gnuplot for .svg");
  return 0;
}

int cmd_report(int argc, char **argv) {
  rep_opts o = {.by = AN_BY_TYPE};
  anopt_init(&o.a, "report", 1);
  if (parse(argc, argv, &o) != 0) {
    anopt_free(&o.a);
    return EXIT_USAGE;
  }
  an_opts ao = {.by = o.by,
                .plans = (const plan *const *)o.a.ps.p,
                .nplans = o.a.ps.n,
                .what = "report",
                .cpus = o.a.cpus,
                .native_wall_ns = o.a.native_wall_ns};
  static an_result r; /* ~48 KiB: off the stack (a small ulimit -s) */
  int rc = an_run(&r, o.dir, &ao);
  size_t *ix = rc == 0 ? anp_groups_by_time(&r) : NULL;
  if (rc == 0 && ix) {
    if (r.processes == 0) {
      cli_err_no_trace(o.dir, "report");
      rc = -1;
    } else if (o.a.json)
      print_json(&r, &o, ix);
    else
      print_text(&r, &o, ix);
    if (o.plot && r.processes && write_plots(&r, &o, ix) != 0)
      rc = -1;
  }
  free(ix);
  int damaged = rc == 0 && r.damaged;
  an_free(&r);
  anopt_free(&o.a);
  return rc != 0 || damaged ? 1 : 0;
}

/* anprint.c — text and JSON for analysis results (see anprint.h). */
#include "anprint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

static const char *const by_names[] = {"api", "type", "site", "thread"};

int anp_parse_by(const char *s, an_by *by) {
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, by_names[i])) {
      *by = (an_by)i;
      return 0;
    }
  return -1;
}

const char *anp_by_name(an_by by) {
  return by_names[by];
}

void anp_group_label(const an_group *g, an_by by, char *buf, size_t cap) {
  switch (by) {
  case AN_BY_API: snprintf(buf, cap, "%s", st_api_name(g->api)); break;
  case AN_BY_TYPE: { /* names from the trace: a newline in one split its row */
    int n = snprintf(buf, cap, "%s ", st_api_name(g->api));
    if (n >= 0 && (size_t)n < cap)
      cli_escape_ctl(buf + n, cap - (size_t)n, g->type);
    break;
  }
  case AN_BY_SITE: cli_escape_ctl(buf, cap, g->site); break;
  case AN_BY_THREAD: {
    char ns[48], ex[32] = "", n[16];
    if (g->exec_seq)
      snprintf(ex, sizeof ex, " (exec %u)", g->exec_seq);
    snprintf(buf, cap, "pid %u%s%s%s thread %u", g->pid, cli_nth_note(g->nth, n, sizeof n),
             cli_pidns_name(g->pidns, ns, sizeof ns), ex, g->thread);
    break;
  }
  }
}

double anp_share(const an_result *r, const an_group *g) {
  uint64_t run = g->run_ns ? g->run_ns : r->run_ns;
  return run ? (double)g->ns / (double)run : 0.0;
}

static const an_result *sort_r;

static int by_time(const void *a, const void *b) {
  const an_group *x = &sort_r->groups[*(const size_t *)a], *y = &sort_r->groups[*(const size_t *)b];
  if (x->ns != y->ns)
    return x->ns < y->ns ? 1 : -1;
  return strcmp(x->key, y->key);
}

size_t *anp_groups_by_time(const an_result *r) {
  size_t *ix = malloc((r->ngroups + 1) * sizeof *ix);
  if (!ix)
    return NULL;
  for (size_t i = 0; i < r->ngroups; i++)
    ix[i] = i;
  sort_r = r;
  qsort(ix, r->ngroups, sizeof *ix, by_time);
  return ix;
}

/* ---- text ------------------------------------------------------------------- */

static double utilisation(const an_result *r, int k, int a) {
  uint32_t engines = r->plans[k].p->accel[a].engines;
  double cap = (double)an_estimate(r, k) * (engines ? engines : 1);
  /* engine time; unlimited engines: the service time over the run's */
  const an_accel *ac = &r->plans[k].accel[a];
  return cap > 0 ? (double)(engines ? ac->busy_ns : ac->service_ns) / cap : 0.0;
}

void anp_accels_text(FILE *f, const an_result *r, int k) {
  const an_plan *pr = &r->plans[k];
  fprintf(f, "%-14s %-28s %-6s %7s %10s %11s %11s %11s %11s %6s\n", "ACCELERATOR", "MODEL", "LINK",
          "ENGINES", "REQUESTS", "SERVICE", "LINK TIME", "FAULTS", "QUEUE", "UTIL");
  for (int a = 0; a < pr->p->naccel; a++) {
    const plan_accel *pa = &pr->p->accel[a];
    const an_accel *ac = &pr->accel[a];
    char e[16], n[32], s[32], l[32], fl[32], q[32], u[16] = "-";
    snprintf(e, sizeof e, pa->engines ? "%u" : "unlim.", pa->engines);
    if (pa->engines) /* unlimited engines have no capacity to be a share of (178.6%) */
      snprintf(u, sizeof u, "%.1f%%", 100.0 * utilisation(r, k, a));
    char md[512]; /* a long spec pushed the columns after it out of line */
    snprintf(md, sizeof md, "%s", if_model_describe(pa->model));
    fprintf(f, "%-14s %-28.28s %-6s %7s %10s %11s %11s %11s %11s %6s\n", pa->name, cli_fit(md, 28),
            if_link_name(&pa->link), e, cli_fmt_count(n, sizeof n, ac->requests),
            cli_fmt_ns(s, sizeof s, (double)ac->service_ns),
            cli_fmt_ns(l, sizeof l, (double)ac->link_ns),
            cli_fmt_ns(fl, sizeof fl, (double)ac->fault_ns),
            cli_fmt_ns(q, sizeof q, (double)ac->queue_ns), u);
  }
  for (int a = 0; a < pr->p->naccel; a++) { /* not a column: JPEG sources only */
    const an_accel *ac = &pr->accel[a];
    char s[32];
    if (ac->source_ns)
      fprintf(f,
              "%s: its requests also waited %s for the program's source callbacks that made "
              "them (source_ns), before the link\n",
              pr->p->accel[a].name, cli_fmt_ns(s, sizeof s, (double)ac->source_ns));
  }
}

void anp_software_text(FILE *f, const an_result *r, int k) {
  const an_plan *pr = &r->plans[k];
  static const char *const what[AN_SW_N] = {
      "not selected by any rule", "kept in software by a keep rule",
      "unsupported by the accelerator's model", "without a recorded response (replay runs them)",
      "not offloadable (replay runs them)"};
  for (int i = 0; i < AN_SW_N; i++) {
    if (!pr->sw[i])
      continue;
    char n[32];
    fprintf(f, "  %s call%s %s", cli_fmt_count(n, sizeof n, pr->sw[i]), pr->sw[i] == 1 ? "" : "s",
            what[i]);
    if (i == AN_SW_NOT_OFFLOADABLE) { /* why no plan could offload them */
      char list[256];
      cli_no_list(r->not_offloadable_by, list, sizeof list);
      fprintf(f, ": %s", list);
    }
    fprintf(f, "\n");
    if (i == AN_SW_UNSUPPORTED) /* what each model said */
      for (size_t w = 0; w < pr->nwhy; w++)
        fprintf(f, "    %s on %s: %s\n", cli_fmt_count(n, sizeof n, pr->why[w].n),
                pr->p->accel[pr->why[w].accel].name, pr->why[w].why);
  }
}

static double pct(uint64_t now, uint64_t before) {
  return before ? 100.0 * ((double)now - (double)before) / (double)before : 0.0;
}

void anp_estimate_text(FILE *f, const an_result *r, int k) {
  char a[32], b[32], c[32];
  uint64_t est = an_estimate(r, k), naive = an_estimate_naive(r, k);
  /* the baseline is the program's native time when --native-wall gave it */
  fprintf(f, "end to end: %s %s%s; estimate %s (%+.1f%%) by %s",
          r->wall_recorded == 2 ? "native" : "recorded",
          cli_fmt_ns(a, sizeof a, (double)r->wall_ns),
          r->wall_recorded == 2 ? " (--native-wall)"
          : r->wall_recorded    ? ""
                                : " (trace span)",
          cli_fmt_ns(b, sizeof b, (double)est), pct(est, r->wall_ns), an_method(r, k));
  if (naive != est && an_naive_means(r, k))
    fprintf(f, "; subtracting every call's saving would give %s (%+.1f%%)",
            cli_fmt_ns(c, sizeof c, (double)naive), pct(naive, r->wall_ns));
  fputc('\n', f);
}

int anp_rows_note_due(const an_result *r, int k) {
  const an_plan *pr = &r->plans[k];
  double more = (double)pr->rows_to_memory - (double)pr->rows_rec_memory;
  return r->wall_ns &&
         (r->miss_ns ? (double)llabs(an_rows_bound_ns(r, k)) * 100 >= (double)r->wall_ns
                     : fabs(more) >= 1024.0 * 1024);
}

void anp_rows_note_text(FILE *f, const an_result *r, int k, const char *label) {
  if (!anp_rows_note_due(r, k))
    return;
  const an_plan *pr = &r->plans[k];
  int64_t bound = an_rows_bound_ns(r, k);
  double more = (double)pr->rows_to_memory - (double)pr->rows_rec_memory;
  char a[32], b[32], c[32], d[32];
  cli_fmt_bytes(a, sizeof a, (double)pr->rows_to_memory);
  cli_fmt_bytes(b, sizeof b, (double)pr->rows_rec_memory);
  fprintf(f,
          "  under %s, the models leave %s of the decoded rows in memory, where the recorded "
          "decodes left %s%s: the program's own reads of them, after the calls, %s, which this "
          "estimate leaves out",
          label, a, b,
          more > 0 ? "" : " (libjpeg-turbo's SIMD colour conversion leaves aligned rows there)",
          more > 0 ? "miss the caches more" : "miss the caches less");
  if (r->miss_ns)
    fprintf(f,
            ": up to %s (%.1f%%) %s, were each of the %s cache lines a miss (%s a line, as "
            "record measured on its host)",
            cli_fmt_ns(c, sizeof c, fabs((double)bound)),
            100.0 * fabs((double)bound) / (double)r->wall_ns, bound > 0 ? "more" : "less",
            cli_fmt_count(d, sizeof d, (uint64_t)(fabs(more) / 64)),
            cli_fmt_ns(b, sizeof b, (double)r->miss_ns));
  fprintf(f, "; replay runs them (deliver= says where a model's rows land)\n");
}

void anp_notes_text(FILE *f, const an_result *r) {
  int engines = 0;
  for (int k = 0; k < r->nplans; k++)
    for (int a = 0; a < r->plans[k].p->naccel; a++)
      engines |= r->plans[k].p->accel[a].engines != 0;
  if (r->late)
    fprintf(f,
            "note: %s call%s met out of start order (a thread's records came late); "
            "%s queueing is approximate\n",
            cli_fmt_count((char[32]){0}, 32, r->late), r->late == 1 ? " was" : "s were",
            r->late == 1 ? "its" : "their");
  if (r->overlap && engines)
    fprintf(f, "note: processes ran at the same time and share the accelerators; a child "
               "does not follow what its parent saved or lost before the fork, so their "
               "queueing is approximate\n");
  /* a recording read while `standin record` still writes into it: its
   * processes are open and its wall time not measured yet (not "killed?") */
  if (r->busy)
    fprintf(f, "note: the recording is still being written (a 'standin record' is running): "
               "these figures cover the calls flushed so far, over the trace's span so far; "
               "run this again when the recording has ended\n");
  else if (r->run_approx)
    fprintf(f, "note: a process was not closed (killed?): its run ends at its last call\n");
  if ((r->damaged || r->cut) && r->nplans) /* said on stderr as it was read; the estimate too */
    fprintf(f, "note: a trace ends early (damaged or cut off, as warned): the estimates hold "
               "only the calls before that point, from the whole run's wall time, so they "
               "understate the change\n");
  /* recording slowed the run the estimates start from: say by how much.
   * Outside the processes' runs (which start when the shim does): standin's
   * start-up and final flush, but also the program's own start before the
   * shim's, its dynamic loading first (dnstap-read: ~5 of the 6.5 ms),
   * which the trace cannot tell apart. */
  uint64_t outside = r->wall_recorded == 1 && r->wall_ns > r->span_ns ? r->wall_ns - r->span_ns : 0;
  if (r->nplans && r->wall_recorded != 2 && r->wall_ns && r->root_traced == 0 && outside) {
    /* a server whose workers made the calls: the time outside their runs
     * is mostly the first process's own (waiting for requests) */
    char a[32], b[32], c[32];
    fprintf(f,
            "note: the %s the estimates start from is the recorded run's wall time, and the "
            "program's first process made no intercepted call (its calls came from processes "
            "it started: a server's workers, a script's commands): %s of it passed outside the "
            "processes that made calls, the program's own time as much as standin's, and recording "
            "cost the program's threads %s; the estimate is for that whole run: to ask about the "
            "processes alone, time them natively (standin native -- PROGRAM) and give it with "
            "--native-wall\n",
            cli_fmt_ns(a, sizeof a, (double)r->wall_ns), cli_fmt_ns(b, sizeof b, (double)outside),
            cli_fmt_ns(c, sizeof c, (double)r->rec_overhead_ns));
  } else if (r->nplans && r->wall_recorded != 2 && r->wall_ns &&
             (r->rec_overhead_ns + outside) * 50 >= r->wall_ns) {
    char a[32], b[32], c[32], th[96] = "";
    /* the cost is each thread's time in the hooks: summed over threads that
     * ran at once, it is more than the wall time it took (photo-service: 62
     * ms summed over 5 threads, ~13 ms of wall time) */
    if (r->chains > 1)
      snprintf(th, sizeof th,
               " (summed over its %llu threads: less of the wall time where they "
               "ran at once)",
               (unsigned long long)r->chains);
    fprintf(f,
            "note: the %s the estimates start from is the recorded run's wall time: it "
            "includes %s%s that recording cost the program's threads%s, and %s before the shim "
            "started or after the program ended "
            "(standin's start-up and final flush, and the program's own loading, not told "
            "apart); time the program natively (standin native -- PROGRAM) and give it with "
            "--native-wall\n",
            cli_fmt_ns(a, sizeof a, (double)r->wall_ns), r->chains > 1 ? "up to " : "",
            cli_fmt_ns(b, sizeof b, (double)r->rec_overhead_ns), th,
            cli_fmt_ns(c, sizeof c, (double)outside));
  }
  if (r->nplans && r->other_host[0])
    fprintf(f,
            "note: recorded on %s, not this machine: the estimate assumes %u CPUs; give the "
            "recording machine's with --cpus\n",
            r->other_host, r->cpus);
}

/* ---- JSON ------------------------------------------------------------------- */

static unsigned long long U(uint64_t v) {
  return (unsigned long long)v;
}

void anp_recording_json(FILE *f, const an_result *r, const char *dir) {
  fprintf(f, "\"recording\": ");
  json_write_str(f, dir);
  fprintf(f,
          ", \"processes\": %llu, \"threads\": %llu, \"calls\": %llu, \"call_ns\": %llu, "
          "\"run_ns\": %llu, \"run_approx\": %s, \"wall_ns\": %llu, \"wall_source\": \"%s\", "
          "\"late_calls\": %llu, \"processes_overlap\": %s, \"damaged\": %s, \"cut_off\": %s, "
          "\"cpus\": %u, "
          "\"span_ns\": %llu, \"thread_span_ns\": %llu, \"record_overhead_ns\": %llu, "
          "\"still_recording\": %s, \"first_process_made_calls\": %s, \"cache_miss_ns\": %llu",
          U(r->processes), U(r->chains), U(r->calls), U(r->call_ns), U(r->run_ns),
          r->run_approx ? "true" : "false", U(r->wall_ns),
          r->wall_recorded == 2 ? "native-wall"
          : r->wall_recorded    ? "run.info"
                                : "trace",
          U(r->late), r->overlap ? "true" : "false", r->damaged ? "true" : "false",
          r->cut ? "true" : "false", r->cpus, U(r->span_ns), U(r->thread_span_ns),
          U(r->rec_overhead_ns), r->busy ? "true" : "false",
          r->root_traced < 0 ? "null"
          : r->root_traced   ? "true"
                             : "false",
          U(r->miss_ns));
  fprintf(f, ", \"not_offloadable_reasons\": ");
  cli_no_json(f, r->not_offloadable_by);
}

static void sw_json(FILE *f, const uint64_t *sw) {
  fprintf(f, "{");
  for (int i = 0; i < AN_SW_N; i++)
    fprintf(f, "%s\"%s\": %llu", i ? ", " : "", an_sw_names[i], U(sw[i]));
  fprintf(f, "}");
}

static void accels_json(FILE *f, const an_result *r, int k) {
  const an_plan *pr = &r->plans[k];
  fprintf(f, "\"accelerators\": [");
  for (int a = 0; a < pr->p->naccel; a++) {
    const plan_accel *pa = &pr->p->accel[a];
    const an_accel *ac = &pr->accel[a];
    fprintf(f, "%s\n      {\"name\": ", a ? "," : "");
    json_write_str(f, pa->name);
    fprintf(f, ", \"model\": ");
    json_write_str(f, if_model_describe(pa->model));
    fprintf(f,
            ", \"link\": \"%s\", \"engines\": %u, \"requests\": %llu, \"service_ns\": %llu, "
            "\"link_ns\": %llu, \"fault_ns\": %llu, \"source_ns\": %llu, \"queue_ns\": %llu, "
            "\"busy_ns\": %llu, \"recorded_ns\": %llu, \"utilisation\": %.4f, \"unsupported\": {",
            if_link_name(&pa->link), pa->engines, U(ac->requests), U(ac->service_ns),
            U(ac->link_ns), U(ac->fault_ns), U(ac->source_ns), U(ac->queue_ns), U(ac->busy_ns),
            U(ac->rec_ns), utilisation(r, k, a));
    int first = 1;
    for (size_t i = 0; i < pr->nwhy; i++)
      if (pr->why[i].accel == a) {
        fprintf(f, "%s", first ? "" : ", ");
        json_write_str(f, pr->why[i].why);
        fprintf(f, ": %llu", U(pr->why[i].n));
        first = 0;
      }
    fprintf(f, "}}");
  }
  fprintf(f, "\n    ]");
}

void anp_plan_json(FILE *f, const an_result *r, int k, const char *name) {
  const an_plan *pr = &r->plans[k];
  fprintf(f, "{\"plan\": ");
  json_write_str(f, name);
  fprintf(f, ", \"offloaded\": %llu, \"software\": ", U(pr->offloaded));
  sw_json(f, pr->sw);
  fprintf(f,
          ",\n    \"offloaded_recorded_ns\": %llu, \"predicted_ns\": %llu, "
          "\"faults_over_model_ns\": %llu, \"saving_sum_ns\": %lld, "
          "\"saving_critical_path_ns\": %lld,\n    \"method\": ",
          U(pr->offloaded_rec_ns), U(pr->predicted_ns), U(pr->faults_over_ns),
          (long long)pr->saving_sum, (long long)pr->saving_crit);
  json_write_str(f, an_method(r, k));
  fprintf(f,
          ", \"estimate_ns\": %llu, \"estimate_critical_path_ns\": %llu, "
          "\"estimate_cpu_ns\": %llu, \"estimate_naive_ns\": ",
          U(an_estimate(r, k)), U(an_estimate_cp(r, k)), U(an_estimate_cpu(r, k)));
  /* null where the text shows "-": the savings passed the wall time */
  if (an_naive_means(r, k))
    fprintf(f, "%llu", U(an_estimate_naive(r, k)));
  else
    fprintf(f, "null");
  fprintf(f, ", \"wall_ns\": %llu,\n    ", U(r->wall_ns));
  /* where the models leave decoded rows, against the recording: what the
   * estimate leaves out (an_rows_bound_ns) */
  fprintf(f,
          "\"rows_to_memory_bytes\": %llu, \"recorded_rows_to_memory_bytes\": %llu, "
          "\"rows_miss_bound_ns\": ",
          U(pr->rows_to_memory), U(pr->rows_rec_memory));
  if (r->miss_ns)
    fprintf(f, "%lld,\n    ", (long long)an_rows_bound_ns(r, k));
  else
    fprintf(f, "null,\n    ");
  accels_json(f, r, k);
  fprintf(f, "}");
}

uint64_t anp_replay_unhidden(const json *summary) {
  uint64_t wall = 0, adjusted = 0;
  if (json_count(json_get(summary, "wall_ns"), &wall) != 0 ||
      json_count(json_get(summary, "wall_adjusted_ns"), &adjusted) != 0 || adjusted > wall)
    return 0;
  return wall - adjusted;
}

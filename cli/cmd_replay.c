/* cmd_replay.c — `standin replay`: rerun the program, answering each
 * recorded call after the latency a performance interface predicts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "json.h"
#include "replaydb.h"
#include "trace.h"

static const char usage_text[] =
    "usage: standin replay [-t DIR] [--iface SPEC]... | [--plan FILE] [--summary FILE]\n"
    "                      [--on-miss fallback|abort|nearest] [--unpack-trees pieces|block]\n"
    "                      [--no-catch-up] -- PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with the replay shim preloaded. Each protobuf-c / JPEG call that\n"
    "was recorded in DIR (default standin.data) waits for the latency the chosen\n"
    "performance interface predicts, then returns the saved response; the rest of\n"
    "the program runs for real, so the end-to-end effect is measured. Exits with\n"
    "PROGRAM's exit status (125 when --on-miss abort stopped it).\n"
    "\n"
    "  -t, --trace DIR       recording to replay\n"
    "  -i, --iface SPEC      [API=]MODEL[:key=value,...]; repeatable, first match wins.\n"
    "                        API: protobuf, jpeg, pb.pack, pb.unpack, pb.size,\n"
    "                        pb.pack_to_buffer, jpeg.decode, tj.decode. Calls no\n"
    "                        --iface selects run the real library. Default: software.\n"
    "                        Accelerator keys mixed in: engines=N (0 = unlimited),\n"
    "                        deliver=cache|memory|recorded (where decoded rows land),\n"
    "                        link=none|onchip|pcie, link_rtt_ns=, link_gbps=, ...\n"
    "                        'standin models' lists the models.\n"
    "  -p, --plan FILE       an offload plan: accelerators and rules (docs/PLANS.md)\n"
    "      --summary FILE    write the run's statistics as JSON (- for standard output)\n"
    "      --on-miss POLICY  a call not in the recording: fallback (run the real\n"
    "                        call, counted; default), abort (stop the program) or\n"
    "                        nearest (run the real call for its response, but\n"
    "                        take the time the model gave the recorded calls of\n"
    "                        the same API and type nearest in size, interpolated:\n"
    "                        a protobuf message's bytes; a JPEG's pixels, among\n"
    "                        decodes of its kind, scaling and, where the model\n"
    "                        tells them apart, restart markers)\n"
    "      --unpack-trees HOW  pieces (default): a replayed unpack allocates its tree\n"
    "                        as libprotobuf-c does, one allocation per message,\n"
    "                        string, bytes and array, so the program's free_unpacked\n"
    "                        costs what it does natively; block: one allocation\n"
    "                        (a cheaper harness, but a cheaper free than native)\n"
    "      --no-catch-up     do not pay harness overruns back from later calls'\n"
    "                        slack (by default a thread whose call overran spins\n"
    "                        that much less in its next calls that have room)\n";

typedef struct {
  const char *dir, *summary, *plan_file;
  int on_miss, ifaces, no_catch_up, block_trees;
  plan plan;
} rep_opts;

static int parse(int argc, char **argv, rep_opts *o, int *first) {
  static const struct option lo[] = {{"trace", required_argument, 0, 't'},
                                     {"iface", required_argument, 0, 'i'},
                                     {"summary", required_argument, 0, 'S'},
                                     {"on-miss", required_argument, 0, 'M'},
                                     {"plan", required_argument, 0, 'p'},
                                     {"no-catch-up", no_argument, 0, 'C'},
                                     {"unpack-trees", required_argument, 0, 'U'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "+t:i:p:h", lo, NULL)) != -1) {
    switch (c) {
    case 't': o->dir = optarg; break;
    case 'i':
      if (o->plan_file) {
        cli_err("--iface and --plan do not mix: write the accelerator into the plan");
        return -1;
      }
      if (plan_add_iface(&o->plan, optarg) != 0)
        return -1;
      o->ifaces++;
      break;
    case 'p':
      if (o->ifaces || o->plan_file) {
        cli_err(o->ifaces ? "--iface and --plan do not mix: write the accelerator into the plan"
                          : "one --plan at a time");
        return -1;
      }
      o->plan_file = optarg;
      if (plan_load(&o->plan, optarg) != 0)
        return -1;
      break;
    case 'S': o->summary = optarg; break;
    case 'C': o->no_catch_up = 1; break;
    case 'U':
      if (strcmp(optarg, "pieces") && strcmp(optarg, "block")) {
        cli_err("--unpack-trees: '%s' is not pieces or block", optarg);
        return -1;
      }
      o->block_trees = !strcmp(optarg, "block");
      break;
    case 'M':
      if (!strcmp(optarg, "fallback"))
        o->on_miss = RDB_MISS_FALLBACK;
      else if (!strcmp(optarg, "abort"))
        o->on_miss = RDB_MISS_ABORT;
      else if (!strcmp(optarg, "nearest"))
        o->on_miss = RDB_MISS_NEAREST;
      else {
        cli_err("--on-miss: '%s' is not fallback, abort or nearest", optarg);
        return -1;
      }
      break;
    case 'h': fputs(usage_text, stdout); exit(0);
    default: fputs(usage_text, stderr); return -1;
    }
  }
  if (optind >= argc) {
    /* the usual slip: the recording knows what it ran, so say that rather
     * than the whole usage (running it unasked could repeat its effects) */
    const char *cmd = cli_runinfo_get(o->dir, "command");
    if (cmd) {
      cli_err("replay: no program given; %s was recorded from: %s\n"
              "  replay it with: standin replay -t %s [--iface SPEC | --plan FILE] -- %s",
              o->dir, cmd, o->dir, cmd);
      return -1;
    }
    cli_err("replay: no program given");
    fputs(usage_text, stderr);
    return -1;
  }
  if (!o->plan_file && o->plan.naccel == 0 && plan_add_iface(&o->plan, "software") != 0)
    return -1;
  if (o->summary && (cli_out_check(o->summary, o->dir) != 0 || cli_out_writable(o->summary) != 0))
    return -1;
  *first = optind;
  return 0;
}

static const char *fb_names[RDB_FB_NREASONS] = {
    "not_in_trace", "request_mismatch", "no_response",  "schema_mismatch", "out_of_memory",
    "replay_off",   "type_changed",     "unnamed_type", "runtime_type"};
static const char *sw_names[RDB_SW_NREASONS] = {"not_selected", "unsupported", "abandoned"};

#define LD(x) ((unsigned long long)atomic_load(&(x)))
#define C(s, i) LD((s)->c[i])
#define T(s, k) ((unsigned long long)rdb_total((s), (k))) /* summed over APIs */

/* The wall time less the harness's own time that the run could not hide:
 * the time each process took to map the replay database before the
 * program started (sequential for exec chains; forked children inherit
 * the mapping), and the harness overrun that later calls could not pay
 * back: the largest a thread owed at its end, counting what its creators
 * owed when they created it (rp.c). Exact for one thread; for threads that
 * share work it assumes the most indebted thread set the pace. */
static uint64_t harness_unhidden(const rdb_stats *s) {
  return C(s, RDB_C_DEBT_MAX) + C(s, RDB_C_SETUP_NS);
}

static uint64_t wall_adjusted(const rdb_stats *s, uint64_t wall) {
  uint64_t h = harness_unhidden(s);
  return h < wall ? wall - h : 0;
}

/* Mean harness time of api's calls whose harness time is counted. */
static double per_call(const rdb_stats *s, int api) {
  unsigned long long n = C(s, RDB_API(api, RDB_API_CALLS));
  return n ? (double)C(s, RDB_API(api, RDB_API_HARNESS_NS)) / (double)n : 0;
}

/* --on-miss nearest: how far apart in size the approximated calls and the
 * recorded ones they were timed from were, over their sizes (rdb.h). */
static double approx_gap(const rdb_stats *s) {
  return C(s, RDB_C_APPROX_KEY)
             ? (double)C(s, RDB_C_APPROX_KEY_DIFF) / (double)C(s, RDB_C_APPROX_KEY)
             : 0.0;
}

/* Spins in spin-error bin i: all of them, or (running) those whose thread
 * was running when their deadline passed. */
static uint64_t spin_bin(const rdb_stats *s, int i, int running) {
  uint64_t all = C(s, RDB_C_SPIN_ERR0 + i), stopped = C(s, RDB_C_SPIN_STOP0 + i);
  return running ? (all > stopped ? all - stopped : 0) : all;
}

/* Spins counted: all of them, or only the stopped ones. */
static uint64_t spins(const rdb_stats *s, int stopped) {
  uint64_t n = 0;
  for (int i = 0; i < RDB_SPIN_BINS; i++)
    n += C(s, (stopped ? RDB_C_SPIN_STOP0 : RDB_C_SPIN_ERR0) + i);
  return n;
}

/* Percentile of the spin error histogram, in ns (upper edge of the bin). */
static uint64_t spin_pct(const rdb_stats *s, double q, int running) {
  uint64_t total = 0, seen = 0;
  for (int i = 0; i < RDB_SPIN_BINS; i++)
    total += spin_bin(s, i, running);
  if (!total)
    return 0;
  for (int i = 0; i < RDB_SPIN_BINS; i++) {
    seen += spin_bin(s, i, running);
    if ((double)seen >= q * (double)total)
      return (uint64_t)(i + 1) * RDB_SPIN_BIN_NS;
  }
  return (uint64_t)RDB_SPIN_BINS * RDB_SPIN_BIN_NS;
}

/* "standin: replay: N replayed decode(s) was/were WHAT[ its/their MID] it
 * took/each took TOOK": what befell decodes replay served. */
static void served_note(unsigned long long n, const char *noun, const char *what, const char *mid,
                        const char *took) {
  char n0[32];
  if (!n)
    return;
  fprintf(stderr, "standin: replay: %s replayed %s%s %s%s%s %s%s\n",
          cli_fmt_count(n0, sizeof n0, n), noun, n == 1 ? " was" : "s were", what,
          mid ? (n == 1 ? " its" : " their") : "", mid ? mid : "", n == 1 ? "it took" : "each took",
          took);
}

static void print_line(const rdb_stats *s, const rdb_built *built, uint64_t wall) {
  char a[32], b[32], c[32], d[32], e[32], g[32], direct[64] = "";
  char n0[32], n1[32], n2[32], n3[32], n4[32];
  unsigned long long calls = C(s, RDB_C_INTERCEPTED), over = T(s, RDB_API_OVERRUNS);
  unsigned long long over_ns = T(s, RDB_API_OVERRUN_NS);
  char approx[64] = "";
  if (C(s, RDB_C_DIRECT))
    snprintf(direct, sizeof direct, " (%s without a lookup)",
             cli_fmt_count(n0, sizeof n0, C(s, RDB_C_DIRECT)));
  if (C(s, RDB_C_APPROX))
    snprintf(approx, sizeof approx, ", %s approximated",
             cli_fmt_count(n0, sizeof n0, C(s, RDB_C_APPROX)));
  fprintf(stderr,
          "standin: replay: %s call%s, %s replayed, %s kept in software%s, %s "
          "fallback%s; predicted %s (recorded %s); %s overrun%s (%s",
          cli_fmt_count(n1, sizeof n1, calls), calls == 1 ? "" : "s",
          cli_fmt_count(n2, sizeof n2, C(s, RDB_C_REPLAYED)),
          cli_fmt_count(n3, sizeof n3, C(s, RDB_C_SOFTWARE)), direct,
          cli_fmt_count(n4, sizeof n4, C(s, RDB_C_FALLBACK)), approx,
          cli_fmt_ns(a, sizeof a, (double)C(s, RDB_C_PREDICTED_NS)),
          cli_fmt_ns(b, sizeof b, (double)C(s, RDB_C_RECORDED_NS)),
          cli_fmt_count(n0, sizeof n0, over), over == 1 ? "" : "s",
          cli_fmt_ns(c, sizeof c, (double)over_ns));
  /* waits the machine stopped past their deadlines, owed under measured
   * models (rp.c owe_stopped): what was paid back may be theirs too */
  if (C(s, RDB_C_SPIN_OWED_NS)) {
    char w[32];
    fprintf(stderr, ", and %s owed by waits the machine stopped",
            cli_fmt_ns(w, sizeof w, (double)C(s, RDB_C_SPIN_OWED_NS)));
  }
  if (C(s, RDB_C_REPAID_NS))
    fprintf(stderr, "%s %s paid back", C(s, RDB_C_SPIN_OWED_NS) ? ";" : ",",
            cli_fmt_ns(e, sizeof e, (double)C(s, RDB_C_REPAID_NS)));
  fprintf(stderr, "); wall %s", cli_fmt_ns(d, sizeof d, (double)wall));
  if (harness_unhidden(s))
    fprintf(stderr, ", %s less the harness's setup and unpaid time",
            cli_fmt_ns(g, sizeof g, (double)wall_adjusted(s, wall)));
  fputc('\n', stderr);
  /* where the harness could not hide: the API with the most overrun time */
  int top = -1;
  for (int api = 0; api < RDB_API_SLOTS; api++)
    if (C(s, RDB_API(api, RDB_API_OVERRUN_NS)) &&
        (top < 0 || C(s, RDB_API(api, RDB_API_OVERRUN_NS)) > C(s, RDB_API(top, RDB_API_OVERRUN_NS))))
      top = api;
  if (top >= 0 && over_ns * 100 >= wall) { /* 1% of the run or more */
    char h[32];
    unsigned long long n = C(s, RDB_API(top, RDB_API_OVERRUNS));
    /* a JPEG drain runs the program's source callbacks, whose recorded
     * time the model keeps: said, as they are not standin's own work */
    char src[96] = "", sn[32];
    uint64_t ncalls = C(s, RDB_API(top, RDB_API_CALLS)),
             sns = C(s, RDB_API(top, RDB_API_SOURCE_NS));
    if (sns && ncalls)
      snprintf(src, sizeof src, ", of which the program's source callbacks ~%s as recorded",
               cli_fmt_ns(sn, sizeof sn, (double)sns / (double)ncalls));
    /* the model's time for the same calls: a harness slower than it
     * overruns on every call, and no slack pays that back */
    char mod[96] = "", mn[32];
    uint64_t nmod = C(s, RDB_API(top, RDB_API_MODELLED));
    if (nmod)
      snprintf(mod, sizeof mod, ", the model %s",
               cli_fmt_ns(mn, sizeof mn,
                          (double)C(s, RDB_API(top, RDB_API_MODELLED_NS)) / (double)nmod));
    fprintf(stderr,
            "standin: replay: most overrun time in %s: %s overrun%s, %s (%.0f%% of it); its "
            "harness took %s a call%s%s (--summary: by_api)\n",
            st_api_name(top), cli_fmt_count(n0, sizeof n0, n), n == 1 ? "" : "s",
            cli_fmt_ns(h, sizeof h, (double)C(s, RDB_API(top, RDB_API_OVERRUN_NS))),
            100.0 * (double)C(s, RDB_API(top, RDB_API_OVERRUN_NS)) / (double)over_ns,
            cli_fmt_ns(g, sizeof g, per_call(s, top)), src, mod);
    /* a model faster than the recorded call's page faults: the harness
     * writes the same fresh memory (a tree, a buffer) and takes them */
    uint64_t over_top = C(s, RDB_API(top, RDB_API_OVERRUN_NS)), beyond = built->faults_over_ns[top];
    if (beyond * 10 >= over_top)
      fprintf(stderr,
              "standin: replay: the recorded %s calls took %s more in page faults (fault_ns: "
              "memory the program had not touched) than the model predicts for them; the "
              "harness writes that memory too and takes them as the program did (models of "
              "devices keep that time)\n",
              st_api_name(top), cli_fmt_ns(h, sizeof h, (double)beyond));
  }
  /* waits the machine made late: the thread was not running when its
   * deadline passed; said when they add up to 1% of the run or more */
  if (C(s, RDB_C_SPIN_STOPPED_NS) * 100 >= wall && spins(s, 1)) {
    char h[32], o[32], what[200];
    unsigned long long n = spins(s, 1);
    /* a measured model's time holds such stops already: those were owed
     * like overruns (rp.c owe_stopped) */
    if (C(s, RDB_C_SPIN_OWED_NS))
      snprintf(what, sizeof what,
               "; %s of it was owed, as the recorded times hold the machine's stops already, "
               "and paid back from later calls' slack where they had some",
               cli_fmt_ns(o, sizeof o, (double)C(s, RDB_C_SPIN_OWED_NS)));
    else
      snprintf(what, sizeof what, ", which the wall time includes");
    fprintf(stderr,
            "standin: replay: %s of %s wait%s ended late because %s thread was not running "
            "when %s deadline passed (another process, an interrupt or the hypervisor had the "
            "CPU): %s late in all%s (--summary: spins_stopped); replay on a quieter machine, "
            "or compare several replays\n",
            cli_fmt_count(n0, sizeof n0, n), cli_fmt_count(n1, sizeof n1, spins(s, 0)),
            spins(s, 0) == 1 ? "" : "s", n == 1 ? "its" : "their", n == 1 ? "its" : "their",
            cli_fmt_ns(h, sizeof h, (double)C(s, RDB_C_SPIN_STOPPED_NS)), what);
  }
  if (C(s, RDB_C_FALLBACK)) {
    fprintf(stderr, "standin: replay: fallback reasons:");
    for (int i = 0; i < RDB_FB_NREASONS; i++)
      if (C(s, RDB_C_FB0 + i))
        fprintf(stderr, " %s %s", fb_names[i], cli_fmt_count(n0, sizeof n0, C(s, RDB_C_FB0 + i)));
    fprintf(stderr, "\n");
  }
  if (C(s, RDB_C_APPROX)) {
    unsigned long long n = C(s, RDB_C_APPROX);
    fprintf(
        stderr,
        "standin: replay: %s call%s not answered from the recording ran for real, timed from the "
        "recorded calls of %s API and type nearest in size (%.1f%% apart in all; "
        "--on-miss nearest: calls_approximated)\n",
        cli_fmt_count(n0, sizeof n0, n), n == 1 ? "" : "s", n == 1 ? "its" : "their",
        100.0 * approx_gap(s));
  }
  if (C(s, RDB_C_NO_NEAREST)) {
    unsigned long long n = C(s, RDB_C_NO_NEAREST);
    fprintf(stderr,
            "standin: replay: %s call%s not in the recording had no recorded call of %s API "
            "and type (for JPEG, of %s kind, scaling and output: pixels or planes) to be timed "
            "as: counted as "
            "fallback%s (--on-miss nearest: calls_without_nearest)\n",
            cli_fmt_count(n0, sizeof n0, n), n == 1 ? "" : "s", n == 1 ? "its" : "their",
            n == 1 ? "its" : "their", n == 1 ? "" : "s");
  }
  /* decodes the recording holds given up at that point of the sequence
   * (mupdf's bands): not offloadable, the library decodes the rows read */
  if (C(s, RDB_C_SW0 + RDB_SW_ABANDONED)) {
    unsigned long long n = C(s, RDB_C_SW0 + RDB_SW_ABANDONED);
    fprintf(stderr,
            "standin: replay: %s decode%s of an image the recording holds decoded whole ran "
            "for real, as %s given up at that point when recorded (software_reasons: "
            "abandoned)\n",
            cli_fmt_count(n0, sizeof n0, n), n == 1 ? "" : "s", n == 1 ? "it was" : "they were");
  }
  if (C(s, RDB_C_GIVEN_UP_WHOLE)) {
    unsigned long long n = C(s, RDB_C_GIVEN_UP_WHOLE);
    fprintf(stderr,
            "standin: replay: %s of them read every row: the program decoded %s image%s in "
            "another order than recorded, and %s the library's time for the whole image "
            "(calls_given_up_read_whole)\n",
            cli_fmt_count(n0, sizeof n0, n), n == 1 ? "its" : "their", n == 1 ? "" : "s",
            n == 1 ? "it took" : "each took");
  }
  /* a served decode the program gave up (mupdf's bands): an accelerator
   * decodes whole images, the library only the rows read */
  served_note(C(s, RDB_C_SERVED_GIVEN_UP), "decode", "given up by the program before", " last row;",
              " the whole image's time, where the library would have stopped at the last row "
              "read (calls_served_given_up)");
  /* a served decode the program then asked of the library what it alone
   * does (a skip or crop before the rows, an output pass with another
   * IDCT): the recording held such a decode not offloadable */
  served_note(C(s, RDB_C_SERVED_THEN_REAL), "decode",
              "then run for real, the program asking for what only the library does (a skip, a "
              "crop, an output pass with other parameters);",
              NULL, " the modelled time and the library's (calls_served_then_real)");
  /* a program that jumps out of a call (a timeout's handler, a callback's
   * error path): found by its thread's next call, which is replayed */
  unsigned long long left = C(s, RDB_C_LEFT);
  if (left)
    fprintf(stderr,
            "standin: replay: the program left %s call%s by a longjmp past the hook (a signal "
            "handler or a callback jumping out), not counted as replayed; the calls after "
            "were replayed (calls_left_by_longjmp)\n",
            cli_fmt_count(n0, sizeof n0, left), left == 1 ? "" : "s");
  /* a served unpack whose tree could not be built in the program (its
   * allocator ran out): the library answered in the modelled time */
  served_note(C(s, RDB_C_UNBUILT), "unpack", "left without",
              " tree in the program (its allocator ran out, or a saved tree that does not build "
              "there);",
              " the modelled time, libprotobuf-c answering (calls_served_unbuilt)");
  /* a program that repeats a request more often than when recorded (a
   * timed benchmark loop that runs faster, a longer run) gets answers, but
   * its later occurrences' latencies are the recorded ones again */
  if (C(s, RDB_C_REUSED)) {
    unsigned long long n = C(s, RDB_C_REUSED);
    fprintf(stderr,
            "standin: replay: %s call%s repeated a request more often than the recording "
            "did; %s the recorded samples again, in order (reused_samples)\n",
            cli_fmt_count(n0, sizeof n0, n), n == 1 ? "" : "s", n == 1 ? "it took" : "they took");
  }
}

/* Recorded calls replay does not intercept (not offloadable when recorded:
 * exiftran's coefficient read, a decode the program abandoned): they run
 * for real and none of the counts above includes them. But for decodes
 * given up of images the recording also holds decoded whole: replay finds
 * those as the whole image, and runs them for real in software, counted
 * (RDB_SW_ABANDONED). */
_Static_assert(CLI_NO_SLOTS == RDB_NO_SLOTS, "the run's counts by why, as the recording's");

/* This run's decodes no accelerator would serve (rep_jpeg.c
 * not_offloadable), by why; returns how many. */
static uint64_t ran_unusable(const rdb_stats *s, uint64_t by[CLI_NO_SLOTS]) {
  uint64_t n = 0;
  for (unsigned k = 0; k < CLI_NO_SLOTS; k++)
    n += by[k] = C(s, RDB_C_RAN_NO0 + k);
  return n;
}

/* The calls not offloadable that this run made, and the recording's when
 * they differ (a run of other input than the recorded, or one that gave
 * up elsewhere): neither is in the counts of the summary line. */
static void print_unusable(const rdb_built *b, const rdb_stats *s) {
  uint64_t ran[CLI_NO_SLOTS];
  uint64_t nran = ran_unusable(s, ran);
  unsigned long long n = b->calls_unusable, k = b->given_up_kept;
  char why[512], nb[32], kb[32], but[160] = "";
  if (nran) {
    cli_no_list(ran, why, sizeof why);
    fprintf(stderr,
            "standin: replay: %s call%s not offloadable (%s) ran for real, outside the counts "
            "above\n",
            cli_fmt_count(nb, sizeof nb, nran), nran == 1 ? "" : "s", why);
  }
  if (!n)
    return;
  /* said once when this run's are the recording's (the recorded given up
   * of images also decoded whole, served as software, make them differ) */
  if (nran && !k && !memcmp(b->unusable_by, ran, sizeof ran))
    return;
  cli_no_list(b->unusable_by, why, sizeof why);
  if (k)
    snprintf(but, sizeof but,
             ", but for %s decode%s given up of images also decoded whole, counted in software "
             "(abandoned)",
             cli_fmt_count(kb, sizeof kb, k), k == 1 ? "" : "s");
  if (nran)
    fprintf(stderr, "standin: replay: the recording holds %s call%s not offloadable (%s)%s\n",
            cli_fmt_count(nb, sizeof nb, n), n == 1 ? "" : "s", why, but);
  else
    fprintf(stderr,
            "standin: replay: %s recorded call%s not offloadable (%s); such calls run for "
            "real, outside the counts above%s\n",
            cli_fmt_count(nb, sizeof nb, n), n == 1 ? " was" : "s were", why, but);
}

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

static void write_accels(FILE *f, const rdb_built *b, const plan *p, uint64_t wall) {
  const rdb_header *h = (const rdb_header *)b->base;
  const rdb_accel *a = (const rdb_accel *)(b->base + h->accel_off);
  fprintf(f, "  \"accelerators\": [");
  for (uint32_t i = 0; i < h->naccel; i++) {
    /* unlimited engines: the service time over the run's */
    double busy = (double)LD(a[i].st.c[a[i].engines ? RDB_A_BUSY_NS : RDB_A_SERVICE_NS]);
    double cap = (double)wall * (a[i].engines ? a[i].engines : 1);
    fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
    json_str(f, a[i].name);
    fprintf(f, ", \"model\": ");
    json_str(f, if_model_describe(p->accel[i].model));
    fprintf(f,
            ", \"link\": \"%s\", \"engines\": %u, \"requests\": %llu, \"service_ns\": %llu, "
            "\"link_ns\": %llu, \"fault_ns\": %llu, \"source_ns\": %llu, \"queue_ns\": %llu, "
            "\"busy_ns\": %llu, \"utilisation\": %.4f, \"unsupported\": {",
            if_link_name(&p->accel[i].link), a[i].engines, LD(a[i].st.c[RDB_A_REQUESTS]),
            LD(a[i].st.c[RDB_A_SERVICE_NS]), LD(a[i].st.c[RDB_A_LINK_NS]),
            LD(a[i].st.c[RDB_A_FAULT_NS]), LD(a[i].st.c[RDB_A_SOURCE_NS]),
            LD(a[i].st.c[RDB_A_QUEUE_NS]), LD(a[i].st.c[RDB_A_BUSY_NS]),
            cap > 0 ? busy / cap : 0.0);
    int first = 1;
    for (size_t k = 0; k < b->nwhy; k++)
      if (b->why[k].accel == (int)i) {
        fprintf(f, "%s", first ? "" : ", ");
        json_str(f, b->why[k].why);
        fprintf(f, ": %llu", (unsigned long long)b->why[k].n);
        first = 0;
      }
    fprintf(f, "}}");
  }
  fprintf(f, "\n  ],\n");
}

static int write_summary(const char *path, const char *dir, const rdb_built *b, const plan *p,
                         uint64_t wall, int rc) {
  const rdb_header *h = (const rdb_header *)b->base;
  const rdb_stats *s = (const rdb_stats *)(b->base + h->stats_off);
  cli_out o; /* "-": standard output, after the program's */
  if (cli_out_open(&o, path, dir) != 0)
    return -1;
  FILE *f = o.f;
  /* which recording it replayed: compare checks it is the one it is given */
  char real[PATH_MAX];
  fprintf(f, "{\n  \"recording\": ");
  json_write_str(f, realpath(dir, real) ? real : dir);
  fprintf(f, ",\n  \"exit_status\": %d,\n  \"wall_ns\": %llu,\n", rc, (unsigned long long)wall);
  cli_json_cpu_wait(f);
  fprintf(f, "  \"calls_intercepted\": %llu,\n  \"calls_replayed\": %llu,\n", C(s, RDB_C_INTERCEPTED),
          C(s, RDB_C_REPLAYED));
  fprintf(f, "  \"calls_software\": %llu,\n  \"software_reasons\": {", C(s, RDB_C_SOFTWARE));
  for (int i = 0; i < RDB_SW_NREASONS; i++)
    fprintf(f, "%s\"%s\": %llu", i ? ", " : "", sw_names[i], C(s, RDB_C_SW0 + i));
  /* calls of types the plan keeps whole: run at once, not looked up (rdb.h) */
  fprintf(f, "},\n  \"calls_software_direct\": %llu", C(s, RDB_C_DIRECT));
  fprintf(f, ",\n  \"calls_fallback\": %llu,\n  \"fallback_reasons\": {", C(s, RDB_C_FALLBACK));
  for (int i = 0; i < RDB_FB_NREASONS; i++)
    fprintf(f, "%s\"%s\": %llu", i ? ", " : "", fb_names[i], C(s, RDB_C_FB0 + i));
  /* --on-miss nearest: misses timed from their nearest recorded calls, and
   * how far apart in size, summed over them (rdb.h) */
  fprintf(f, "},\n  \"calls_approximated\": %llu,\n  \"approximated_size_gap\": %.4f",
          C(s, RDB_C_APPROX), approx_gap(s));
  fprintf(f, ",\n  \"calls_without_nearest\": %llu", C(s, RDB_C_NO_NEAREST));
  fprintf(f, ",\n  \"calls_approximated_type_changed\": %llu", C(s, RDB_C_NEAR_CHANGED));
  /* found by following the recorded order, without a fingerprint (rp.c) */
  fprintf(f,
          ",\n  \"lookups_predicted\": %llu,\n  \"lookups_mispredicted\": %llu,\n  "
          "\"lookups_unchanged\": %llu",
          C(s, RDB_C_PREDICTED), C(s, RDB_C_MISPREDICTED), C(s, RDB_C_UNCHANGED));
  fprintf(f, ",\n  \"reused_samples\": %llu,\n  \"overruns\": %llu,\n  \"overrun_ns\": %llu,\n",
          C(s, RDB_C_REUSED), T(s, RDB_API_OVERRUNS), T(s, RDB_API_OVERRUN_NS));
  fprintf(f, "  \"repaid_ns\": %llu,\n  \"debt_ns\": %llu,\n  \"setup_ns\": %llu,\n",
          C(s, RDB_C_REPAID_NS), C(s, RDB_C_DEBT_MAX), C(s, RDB_C_SETUP_NS));
  fprintf(f, "  \"wall_adjusted_ns\": %llu,\n", (unsigned long long)wall_adjusted(s, wall));
  fprintf(f, "  \"calls_served_given_up\": %llu,\n", C(s, RDB_C_SERVED_GIVEN_UP));
  fprintf(f, "  \"calls_given_up_read_whole\": %llu,\n", C(s, RDB_C_GIVEN_UP_WHOLE));
  fprintf(f, "  \"calls_served_then_real\": %llu,\n", C(s, RDB_C_SERVED_THEN_REAL));
  fprintf(f, "  \"calls_left_by_longjmp\": %llu,\n", C(s, RDB_C_LEFT));
  fprintf(f, "  \"calls_served_unbuilt\": %llu,\n", C(s, RDB_C_UNBUILT));
  /* recorded calls not intercepted at all (print_unusable) */
  fprintf(f, "  \"calls_not_offloadable\": %llu,\n  \"not_offloadable_reasons\": ",
          (unsigned long long)b->calls_unusable);
  cli_no_json(f, b->unusable_by);
  /* of them, decodes given up whose image the recording also holds decoded
   * whole (replay runs their occurrences for real: software_reasons
   * abandoned), and those of images it does not */
  fprintf(f, ",\n  \"given_up_recorded\": {\"of_whole_images\": %llu, \"alone\": %llu}",
          (unsigned long long)b->given_up_kept, (unsigned long long)b->given_up_alone);
  /* this run's, run for real outside the counts (print_unusable) */
  uint64_t ran[CLI_NO_SLOTS];
  fprintf(f, ",\n  \"calls_not_offloadable_ran\": %llu,\n  \"not_offloadable_ran_reasons\": ",
          (unsigned long long)ran_unusable(s, ran));
  cli_no_json(f, ran);
  fprintf(f, ",\n");
  fprintf(f, "  \"bytes_to_memory\": %llu,\n", C(s, RDB_C_TO_MEMORY_BYTES));
  fprintf(f, "  \"predicted_ns\": %llu,\n  \"recorded_ns\": %llu,\n  \"spin_ns\": %llu,\n",
          C(s, RDB_C_PREDICTED_NS), C(s, RDB_C_RECORDED_NS), C(s, RDB_C_SPIN_NS));
  fprintf(f, "  \"harness_ns\": %llu,\n  \"harness_outside_ns\": %llu,\n", T(s, RDB_API_HARNESS_NS),
          C(s, RDB_C_OUTSIDE_NS));
  fprintf(f, "  \"spin_tail_ns\": %llu,\n", C(s, RDB_C_TAIL_NS));
  fprintf(f, "  \"software_ns\": %llu,\n  \"processes\": %llu,\n", C(s, RDB_C_SOFTWARE_NS),
          C(s, RDB_C_PROCESSES));
  fprintf(f, "  \"by_api\": {");
  for (int api = 0, first = 1; api < RDB_API_SLOTS; api++) {
    if (!C(s, RDB_API(api, RDB_API_CALLS)) && !C(s, RDB_API(api, RDB_API_HARNESS_NS)))
      continue;
    fprintf(f,
            "%s\n    \"%s\": {\"calls\": %llu, \"harness_ns\": %llu, \"overruns\": %llu, "
            "\"overrun_ns\": %llu, \"faults_over_model_ns\": %llu, \"source_ns\": %llu, "
            "\"modelled\": %llu, \"modelled_ns\": %llu}",
            first ? "" : ",", st_api_name(api), C(s, RDB_API(api, RDB_API_CALLS)),
            C(s, RDB_API(api, RDB_API_HARNESS_NS)), C(s, RDB_API(api, RDB_API_OVERRUNS)),
            C(s, RDB_API(api, RDB_API_OVERRUN_NS)), (unsigned long long)b->faults_over_ns[api],
            C(s, RDB_API(api, RDB_API_SOURCE_NS)), C(s, RDB_API(api, RDB_API_MODELLED)),
            C(s, RDB_API(api, RDB_API_MODELLED_NS)));
    first = 0;
  }
  fprintf(f, "},\n");
  /* every spin's error; then the spins whose thread was not running when
   * their deadline passed (the machine's doing, not the loop's), and the
   * error of the others */
  fprintf(f, "  \"spin_error_p50_ns\": %llu,\n  \"spin_error_p99_ns\": %llu,\n",
          (unsigned long long)spin_pct(s, 0.5, 0), (unsigned long long)spin_pct(s, 0.99, 0));
  fprintf(f,
          "  \"spins\": %llu,\n  \"spins_stopped\": %llu,\n  \"spin_stopped_ns\": %llu,\n"
          "  \"spin_stopped_owed_ns\": %llu,\n"
          "  \"spin_error_running_p50_ns\": %llu,\n  \"spin_error_running_p99_ns\": %llu,\n",
          (unsigned long long)spins(s, 0), (unsigned long long)spins(s, 1),
          C(s, RDB_C_SPIN_STOPPED_NS), C(s, RDB_C_SPIN_OWED_NS),
          (unsigned long long)spin_pct(s, 0.5, 1), (unsigned long long)spin_pct(s, 0.99, 1));
  write_accels(f, b, p, wall);
  /* built before the program started: its size, the distinct byte strings
   * it stores once each, and what building it took (replaydb.c) */
  fprintf(f,
          "  \"database\": {\"bytes\": %llu, \"strings\": %llu, \"string_bytes\": %llu, "
          "\"referred_bytes\": %llu, \"build_ns\": %llu, \"build_peak_rss_bytes\": %llu, "
          "\"trace_chunks\": %llu, \"trace_chunks_decoded_again\": %llu},\n",
          (unsigned long long)b->size, (unsigned long long)b->strings,
          (unsigned long long)b->string_bytes, (unsigned long long)b->referred_bytes,
          (unsigned long long)b->build_ns, (unsigned long long)b->build_peak_rss,
          (unsigned long long)b->trace_chunks, (unsigned long long)b->chunk_reloads);
  fprintf(f, "  \"trace_entries\": %llu,\n  \"trace_samples\": %llu\n}\n",
          (unsigned long long)b->entries, (unsigned long long)b->samples);
  /* a summary cut short is not put where a later compare would take it */
  return cli_out_close(&o, 1);
}

static int same_base(const char *p, const char *base) {
  const char *s = strrchr(p, '/');
  return *base && !strcmp(s ? s + 1 : p, base);
}

/* Replaying another program than the recorded one is allowed (its calls
 * that are not in the recording run the real library), but most likely a
 * mistake: say so before it starts. Interpreters record their own exe, so
 * the script's name in argv counts too; and the program record started
 * (run.info) counts, which has no trace of its own when only its children
 * made calls (a shell script running a decoder). A program started
 * through a wrapper (valgrind, taskset, env) is named by one of the words
 * after it: those that are not options count too. */
#define WRAPPED_WORDS 8

static int wrapped_is(char *const *args, int nargs, const char *exe) {
  const char *s = strrchr(exe, '/');
  for (int k = 0; k < nargs && k < WRAPPED_WORDS; k++)
    if (args[k][0] != '-' && same_base(args[k], s ? s + 1 : exe))
      return 1;
  return 0;
}

static void warn_other_program(const char *dir, const char *path, char *const *args, int nargs,
                               int on_miss) {
  /* the database is built: a recording removed since (during the build)
   * is not this replay's error ("no such recording directory; record
   * one", said while the replay went on from its database) */
  DIR *d = opendir(dir);
  if (!d)
    return;
  closedir(d);
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return;
  char want[PATH_MAX], first[PATH_MAX] = "";
  if (!realpath(path, want))
    snprintf(want, sizeof want, "%s", path);
  const char *base = strrchr(want, '/') ? strrchr(want, '/') + 1 : want;
  const char *started = cli_runinfo_get(dir, "program");
  char rp[PATH_MAX];
  int match = started && ((realpath(started, rp) && !strcmp(rp, want)) ||
                          wrapped_is(args, nargs, started));
  for (size_t i = 0; i < td.n && !match; i++) {
    st_reader *r;
    if (st_reader_open(&r, td.paths[i]) != ST_OK)
      continue;
    const st_header *h = st_reader_header(r);
    if (!first[0])
      snprintf(first, sizeof first, "%s", h->exe);
    match = !strcmp(h->exe, want) || same_base(h->exe, base) || wrapped_is(args, nargs, h->exe);
    for (uint32_t a = 0; a < h->argc && a < 2 && !match; a++)
      match = same_base(h->argv[a], base);
    st_reader_close(r);
  }
  /* the program record started, when its calls came from another (the
   * shell running a script's commands) */
  char also[PATH_MAX + 64] = "";
  const char *sb = started ? strrchr(started, '/') : NULL;
  if (started && !same_base(first, sb ? sb + 1 : started))
    snprintf(also, sizeof also, " (started as %s)", started);
  const char *then =
      on_miss == RDB_MISS_ABORT     ? "the first call that is not in the recording stops it"
      : on_miss == RDB_MISS_NEAREST ? "calls that are not in the recording run the real library, "
                                      "timed from the recorded calls nearest in size"
                                    : "calls that are not in the recording run the real library "
                                      "(counted as fallbacks)";
  if (!match && first[0])
    cli_warn("%s was recorded from %s%s, not %s: %s", dir, first, also, want, then);
  cli_tracedir_free(&td);
}

/* After the run: fallbacks that say the recording does not fit the program. */
static void warn_misfit(const rdb_built *b, const rdb_stats *s, int on_miss) {
  /* of the calls looked up: those a plan or model keeps in software without
   * a lookup (RDB_C_DIRECT) were never asked for (a replay on protoacc,
   * whose get_packed_size has no device counterpart, missed all its other
   * calls and said nothing, as half of its calls were sizes) */
  unsigned long long all = C(s, RDB_C_INTERCEPTED) - C(s, RDB_C_DIRECT),
                     missing = C(s, RDB_C_FB0 + RDB_FB_NOT_IN_TRACE);
  char nm[32], na[32];
  if (C(s, RDB_C_FB0 + RDB_FB_SCHEMA))
    cli_warn("%s unpack calls did not fit the program's message types: its .proto changed "
             "since the recording, or the recording comes from another program; they ran the "
             "real library",
             cli_fmt_count(nm, sizeof nm, C(s, RDB_C_FB0 + RDB_FB_SCHEMA)));
  unsigned long long near_changed = C(s, RDB_C_NEAR_CHANGED),
                     changed = C(s, RDB_C_FB0 + RDB_FB_CHANGED) + near_changed,
                     at = C(s, RDB_C_CHANGED_TYPE);
  if (changed && on_miss != RDB_MISS_ABORT) { /* abort's message named it */
    /* the first type the shims found changed, by its name in the database:
     * the type called with, whose definition or that of a type it reaches
     * differs */
    const char *name = at && at < b->size ? (const char *)b->base + at : NULL;
    int len = name ? (int)strnlen(name, b->size - at < 200 ? b->size - at : 200) : 0;
    char nn[32];
    cli_warn(
        "%s call%s the real library%s%s%s: %s message type's definition is not the "
        "recording's (%s%.*s%s): the program was built from a changed .proto, or the "
        "recording holds two definitions of the type. Record the program as it is now to "
        "replay %s",
        cli_fmt_count(nm, sizeof nm, changed), changed == 1 ? " ran" : "s ran",
        near_changed ? " (" : "", near_changed ? cli_fmt_count(nn, sizeof nn, near_changed) : "",
        near_changed ? " of them timed from the nearest recorded calls, --on-miss nearest)" : "",
        changed == 1 ? "its" : "their", name ? "the first found: " : "", len, name ? name : "",
        name ? ", or a type it reaches" : "type not named", changed == 1 ? "it" : "them");
  }
  unsigned long long unnamed = C(s, RDB_C_FB0 + RDB_FB_UNNAMED);
  if (unnamed && on_miss != RDB_MISS_ABORT)
    cli_warn("%s call%s the real library: %s message type%s no name (generated with option "
             "optimize_for = CODE_SIZE), and replay tells types apart by name. Generate the "
             "code without that option to replay %s",
             cli_fmt_count(nm, sizeof nm, unnamed), unnamed == 1 ? " ran" : "s ran",
             unnamed == 1 ? "its" : "their", unnamed == 1 ? " has" : "s have",
             unnamed == 1 ? "it" : "them");
  unsigned long long runtime = C(s, RDB_C_FB0 + RDB_FB_RUNTIME);
  if (runtime && on_miss != RDB_MISS_ABORT)
    cli_warn("%s call%s the real library: %s message type%s built at run time (%s "
             "descriptor%s in no loaded library), and a program may free one and build another "
             "at its address, which replay could not tell apart; calls of generated types "
             "replay",
             cli_fmt_count(nm, sizeof nm, runtime), runtime == 1 ? " ran" : "s ran",
             runtime == 1 ? "its" : "their", runtime == 1 ? " was" : "s were",
             runtime == 1 ? "its" : "their", runtime == 1 ? " is" : "s are");
  if (C(s, RDB_C_FB0 + RDB_FB_MISMATCH))
    cli_warn("%s call%s a recorded request whose bytes or packed size differ from "
             "%s (a damaged or doctored recording); %s the real library",
             cli_fmt_count(nm, sizeof nm, C(s, RDB_C_FB0 + RDB_FB_MISMATCH)),
             C(s, RDB_C_FB0 + RDB_FB_MISMATCH) == 1 ? " found" : "s found",
             C(s, RDB_C_FB0 + RDB_FB_MISMATCH) == 1 ? "its own" : "theirs",
             C(s, RDB_C_FB0 + RDB_FB_MISMATCH) == 1 ? "it ran" : "they ran");
  /* a protobuf miss counts its lookup as harness time (rp_unhidden): the
   * misses were JPEG decodes when no protobuf call was counted */
  int pb = 0;
  for (int api = 0; api < ST_API_MAX && !pb; api++)
    pb = st_api_family(api) == ST_FAMILY_PROTOBUF && C(s, RDB_API(api, RDB_API_CALLS)) != 0;
  int most_missing = missing && ((all >= 10 && missing * 2 > all) || missing == all);
  cli_fmt_count(nm, sizeof nm, missing);
  cli_fmt_count(na, sizeof na, all);
  if (most_missing && b->files_cut)
    cli_warn("%s of %s calls looked up were not in the recording: %llu of its trace files ended "
             "early (see above), and the calls recorded after that are lost; record the "
             "program again to replay them",
             nm, na, (unsigned long long)b->files_cut);
  else if (most_missing)
    cli_warn("%s of %s calls looked up were not in the recording: is it from another program, "
             "version or input?%s",
             nm, na,
             on_miss != RDB_MISS_FALLBACK ? ""
             : pb ? " If the program puts a time or an id in its messages, --on-miss nearest "
                    "times its protobuf calls as the recorded ones nearest in size"
                  : " If it decodes other images, --on-miss nearest times its decodes as the "
                    "recorded ones of their kind nearest in pixels");
}

/* The recorder slows the calls it times when they are short (info says so
 * of the recording): a model that takes their recorded latency (software,
 * scale) then makes the replay that much slow. Not said of a run that
 * replayed no call (a program that failed first, or whose every call
 * missed: knotd's timestamped dnstap messages): it is then only noise. */
static void warn_short_calls(const rdb_built *b, const rdb_stats *s) {
  uint64_t n = b->as_recorded_calls;
  if (n < CLI_SHORT_CALLS_MIN || b->as_recorded_ns >= CLI_SHORT_CALL_NS * n ||
      C(s, RDB_C_REPLAYED) == 0)
    return;
  char m[32], nb[32], nr[48] = "";
  /* a run that stopped early (a truncated input) answered fewer: say how
   * many, or the recording's count reads as this run's */
  uint64_t replayed = C(s, RDB_C_REPLAYED);
  if (replayed < n) {
    char c[32];
    snprintf(nr, sizeof nr, " (%s answered)", cli_fmt_count(c, sizeof c, replayed));
  }
  fprintf(stderr,
          "standin: replay: the recording's %s calls that the model times by their recorded "
          "latency (%s on average) were timed while recording, which makes calls this short "
          "slower (pbtest's ~500 ns calls by 1-16%% on the test VMs), and this replay%s with "
          "them; 'standin record --retime' times them again without the recorder\n",
          cli_fmt_count(nb, sizeof nb, n),
          cli_fmt_ns(m, sizeof m, (double)b->as_recorded_ns / (double)n), nr);
}

/* Hand fd to the program at a fixed number near the top of its descriptor
 * table (below the record shim's, below 1024), and say so in the variable
 * NAME=N:DEV:INO:PATH, PATH being the one it stands in for (empty when
 * there is none: a replay inside another one must not take the outer
 * one's). */
static void pass_fd(int fd, int k, int pass[2][2], int *n, char *env, size_t cap,
                    const char *name) {
  struct stat st;
  int to = st_high_floor() - 8 + k; /* the program inherits our limit */
  if (fd < 0 || to <= 2 || fstat(fd, &st) != 0) {
    snprintf(env, cap, "%s=", name);
    return;
  }
  pass[*n][0] = fd;
  pass[*n][1] = to;
  (*n)++;
  snprintf(env, cap, "%s=%d:%llu:%llu:/proc/%d/fd/%d", name, to, (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino, (int)getpid(), fd);
}

int cmd_replay(int argc, char **argv) {
  cli_calm_signals(); /* the commands that run programs (util.c) */
  static rep_opts o = {.dir = "standin.data"}; /* its plan is ~20 KiB: off the stack */
  int first;
  if (parse(argc, argv, &o, &first) != 0) {
    plan_free(&o.plan);
    return EXIT_USAGE;
  }
  char path[PATH_MAX];
  if (cli_find_program(argv[first], path, sizeof path) != 0) {
    cli_err("%s: command not found", argv[first]);
    plan_free(&o.plan);
    return EXIT_NOTFOUND;
  }
  const char *shim = cli_runtime_lib("libstandin-replay.so");
  if (cli_recording_busy(o.dir))
    cli_warn("%s is still being recorded into (a 'standin record' is running): replaying the "
             "calls written so far",
             o.dir);
  rdb_built b;
  if (!shim || rdb_build(o.dir, &o.plan, o.on_miss, !o.no_catch_up, !o.block_trees, &b) != 0) {
    plan_free(&o.plan);
    return 1;
  }
  warn_other_program(o.dir, path, argv + first + 1, argc - first - 1, o.on_miss);
  if (b.build_ns >= 1000000000ull) { /* a script waiting for a server to come up */
    char t[32], sz[32], n[32];
    fprintf(stderr,
            "standin: replay: building the replay database of %s calls (%s) took %s, before "
            "the program starts (--summary: database)\n",
            cli_fmt_count(n, sizeof n, b.samples), cli_fmt_bytes(sz, sizeof sz, (double)b.size),
            cli_fmt_ns(t, sizeof t, (double)b.build_ns));
  }
  const char *old = getenv("LD_PRELOAD");
  char preload[PATH_MAX * 2], dbpath[64], env1[PATH_MAX * 2 + 16], env2[96], env3[96];
  snprintf(preload, sizeof preload, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "");
  snprintf(dbpath, sizeof dbpath, "/proc/%d/fd/%d", (int)getpid(), b.fd);
  snprintf(env1, sizeof env1, "LD_PRELOAD=%s", preload);
  snprintf(env2, sizeof env2, "STANDIN_REPLAY_DB=%s", dbpath);
  /* the writable part's own shared memory (replaydb.c publish_rw); an empty
   * value for a program that inherited one from an outer replay */
  if (b.fd_rw >= 0)
    snprintf(env3, sizeof env3, "STANDIN_REPLAY_DB_RW=/proc/%d/fd/%d", (int)getpid(), b.fd_rw);
  else
    snprintf(env3, sizeof env3, "STANDIN_REPLAY_DB_RW=");
  /* The same files as inherited descriptors, for processes that cannot
   * reach this process's /proc entry: a PID namespace with a /proc of its
   * own (unshare --mount-proc, bwrap). The shim keeps them close-on-exec
   * and hands them on through the exec calls it wraps. */
  int pass[2][2], npass = 0;
  char env4[160], env5[160];
  pass_fd(b.fd, 0, pass, &npass, env4, sizeof env4, "STANDIN_REPLAY_DB_FD");
  pass_fd(b.fd_rw, 1, pass, &npass, env5, sizeof env5, "STANDIN_REPLAY_DB_RW_FD");
  char *env[] = {env1, env2, env3, env4, env5, NULL};
  uint64_t wall = 0;
  int rc = cli_run_passing(argv + first, env, &wall, (const int(*)[2])pass, npass);
  const rdb_header *h = (const rdb_header *)b.base;
  const rdb_stats *s = (const rdb_stats *)(b.base + h->stats_off);
  print_line(s, &b, wall);
  if (h->on_miss == RDB_MISS_ABORT && rc == 125 && C(s, RDB_C_FALLBACK))
    fprintf(stderr, "standin: replay: the program was stopped at a miss (--on-miss abort, "
                    "above): the fallback counted is that call, which did not run\n");
  else if (rc == 128 + SIGKILL) /* its threads add their counts as they end */
    fprintf(stderr, "standin: replay: the program was killed by SIGKILL, which leaves no "
                    "time to count: these counts may miss up to 256 calls of each thread "
                    "it had running\n");
  else if (h->on_miss == RDB_MISS_ABORT && C(s, RDB_C_FALLBACK))
    /* a script or server whose child missed: the child alone was stopped */
    fprintf(stderr,
            "standin: replay: a process of the program was stopped at a miss (--on-miss "
            "abort, above), and the program went on without it (exit status %d): this run "
            "is not the recorded one\n",
            rc);
  print_unusable(&b, s);
  long pid = 0;
  size_t live = cli_procs_with_env(env2, &pid);
  if (live)
    fprintf(stderr,
            "standin: replay: %zu process%s it started still run%s under the replay shim (pid "
            "%ld%s): %s calls are not in these counts; run the program in the foreground to "
            "measure them\n",
            live, live == 1 ? "" : "es", live == 1 ? "s" : "", pid, live == 1 ? "" : ", ...",
            live == 1 ? "its" : "their");
  warn_misfit(&b, s, (int)h->on_miss);
  warn_short_calls(&b, s);
  char said[512];
  if (cli_run_cpu_wait_said(said, sizeof said))
    fprintf(stderr,
            "standin: replay: %s. A replayed call spins on its CPU where the program would "
            "wait for the device and leave it to another thread, so these times are less "
            "reliable: replay on a quiet machine, with no more busy threads than CPUs\n",
            said);
  /* decided when the database was built: about the recording's calls, which
   * this run may not all have made */
  char nb[32];
  for (size_t k = 0; k < b.nwhy; k++)
    fprintf(stderr, "standin: replay: of the recording's calls, %s %s in software on %s: %s\n",
            cli_fmt_count(nb, sizeof nb, b.why[k].n), b.why[k].n == 1 ? "stays" : "stay",
            o.plan.accel[b.why[k].accel].name, b.why[k].why);
  if (o.summary && write_summary(o.summary, o.dir, &b, &o.plan, wall, rc) != 0 && rc == 0)
    rc = 1;
  rdb_built_free(&b);
  plan_free(&o.plan);
  return rc;
}

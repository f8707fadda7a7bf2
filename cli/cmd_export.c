/* cmd_export.c — `standin export`: the calls as CSV, one JSON document, or
 * a Chrome trace-event file for Perfetto / chrome://tracing. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "cli.h"
#include "json.h"
#include "plan.h"
#include "planset.h"
#include "scan.h"

static const char usage_text[] =
    "usage: standin export [DIR] --format csv|json|chrome [-o FILE] [--plan FILE | --iface "
    "SPEC...]\n"
    "\n"
    "Writes every recorded call of DIR (default standin.data), streaming, to FILE\n"
    "(default standard output). Times are in ns since the first process of the\n"
    "recording started (Chrome: microseconds).\n"
    "\n"
    "  csv     a header row, then one row per call. Columns, in this order: pid, exec,\n"
    "          thread, seq, start_ns, latency_ns, api, type, site, req_bytes,\n"
    "          resp_bytes, request_size, result, failed, not_offloadable, no_response,\n"
    "          reason, fingerprint, then one column per request feature (protobuf,\n"
    "          then JPEG: encoded_size ... dropped_hash, source_ns; fault_ns, which both\n"
    "          have, is one column), empty where the API has none.\n"
    "  json    one object: {\"format\": \"standin-export\", \"version\": 1, \"recording\",\n"
    "          \"time_base\", \"calls\": [...the same fields and pidns, features as an\n"
    "          object...],\n"
    "          \"processes\": [{pid, pidns, start_ticks, ppid, exec, argv, start_ns, run_ns,\n"
    "          threads, calls, status}]}; pidns: the PID namespace's inode, start_ticks\n"
    "          the process's start (/proc/PID/stat), 0 when unknown: with pid they name it.\n"
    "  chrome  the Trace Event Format: {\"traceEvents\": [...]} with a complete event\n"
    "          (ph \"X\") per call — name \"API type\", pid, tid = thread index, ts and\n"
    "          dur in us, args with sizes, site and features — and metadata events\n"
    "          (ph \"M\") naming processes and threads. Open it in ui.perfetto.dev.\n"
    "\n"
    "With a plan (--plan FILE, or --iface SPEC repeated as for replay), each call also\n"
    "gets the plan's decision, as whatif and replay take it: CSV columns decision,\n"
    "accel, predicted_ns, service_ns, link_ns, why after the features (JSON and Chrome:\n"
    "an object \"plan\" with those fields). decision is offload, not_selected, kept,\n"
    "unsupported, no_response or not_offloadable; predicted_ns = service_ns + link_ns\n"
    "(+ the call's fault_ns and source_ns features, for models whose time is not a\n"
    "recorded one),\n"
    "for offloaded calls only: queueing for an engine depends on the other calls\n"
    "(standin whatif adds it).\n"
    "\n"
    "  -t, --trace DIR  the recording, as for replay (or DIR)\n"
    "  -F, --format F   csv, json or chrome (required)\n"
    "  -o, --output F   write to F instead of standard output (- is standard output)\n"
    "  -p, --plan FILE  add each call's decision under this plan\n"
    "  -i, --iface SPEC the same for a one-accelerator plan ([API=]MODEL[:k=v,...])\n";

enum { FMT_CSV, FMT_JSON, FMT_CHROME };

#define MAX_FEAT_COLS (ST_PBF_NFEAT + ST_JPF_NFEAT)

typedef struct {
  const char *dir, *out_path;
  int fmt;
  FILE *out;
  uint64_t base;  /* earliest process start */
  uint64_t calls; /* written so far */
  uint64_t file_calls;
  const char *feat[MAX_FEAT_COLS];
  int nfeat;
  uint8_t *thread_named; /* chrome: per thread index of the current file */
  uint32_t nthread_named;
  /* chrome: the pid of the current file's events. The n-th process with a
   * pid (cli_procs_nth: the same pid in another PID namespace, or given
   * again) gets pid + (n - 1) << 22, above any pid_max, so that it does
   * not share a track with the others. */
  uint64_t cpid, launcher_ns;
  cli_procs procs;
  planset ps;      /* --plan or --iface: at most one plan */
  const plan *pl;  /* ps.p[0], or NULL */
  plan_decision d; /* of the call being written, under pl */
  int reason;      /* -1: offloaded; else AN_SW_* */
} ex_ctx;

/* The decision of plan x->pl for call c (x->d, x->reason). */
static void decide(ex_ctx *x, scan_file *f, const st_call *c) {
  x->reason = an_decide(x->pl, f, c, scan_type_name(f, c->type), an_rule(x->pl, f, c), &x->d);
}

static const char *decision_name(const ex_ctx *x) {
  return x->reason < 0 ? "offload" : an_sw_names[x->reason];
}

/* The deciding or refusing accelerator's name, or "". */
static const char *decision_accel(const ex_ctx *x) {
  int a = x->d.accel;
  return a >= 0 && a < x->pl->naccel ? x->pl->accel[a].name : "";
}

/* The decision's three times, in the format fmt takes them (predicted,
 * service, link), or `none` when the call is not offloaded; then its why. */
static void decision_times(const ex_ctx *x, FILE *o, const char *fmt, const char *none) {
  if (x->reason < 0)
    fprintf(o, fmt,
            (unsigned long long)(x->d.source_ns + x->d.service_ns + x->d.link_in_ns +
                                 x->d.fault_ns + x->d.link_out_ns),
            (unsigned long long)x->d.service_ns,
            (unsigned long long)(x->d.link_in_ns + x->d.link_out_ns));
  else
    fputs(none, o);
}

static const char *decision_why(const ex_ctx *x) {
  return x->reason == AN_SW_UNSUPPORTED && x->d.why ? x->d.why : "";
}

/* The decision as a JSON object (the CSV's columns). */
static void json_decision(const ex_ctx *x, FILE *o) {
  fprintf(o, "{\"decision\": \"%s\", \"accel\": ", decision_name(x));
  json_write_str(o, decision_accel(x));
  decision_times(x, o, ", \"predicted_ns\": %llu, \"service_ns\": %llu, \"link_ns\": %llu",
                 ", \"predicted_ns\": null, \"service_ns\": null, \"link_ns\": null");
  fputs(", \"why\": ", o);
  json_write_str(o, decision_why(x));
  fputc('}', o);
}

/* Feature names of every API, each once, in API order. */
static void feature_columns(ex_ctx *x) {
  static const int apis[] = {ST_API_PB_PACK, ST_API_JPEG_DECODE};
  for (size_t a = 0; a < sizeof apis / sizeof apis[0]; a++)
    for (int s = 0; s < ST_MAX_FEAT; s++) {
      const char *n = st_feature_name(apis[a], s);
      int dup = 0;
      for (int i = 0; n && i < x->nfeat; i++)
        dup |= !strcmp(x->feat[i], n);
      if (n && !dup && x->nfeat < MAX_FEAT_COLS)
        x->feat[x->nfeat++] = n;
    }
}

static void hex16(const uint8_t *fp, char *out) {
  for (int i = 0; i < 16; i++)
    sprintf(out + 2 * i, "%02x", fp[i]);
}

/* RFC 4180: quote when the field holds a comma, quote or line break. */
static void csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static uint64_t rel(const ex_ctx *x, uint64_t t) {
  return t > x->base ? t - x->base : 0;
}

/* ---- CSV ------------------------------------------------------------------- */

static void csv_header(ex_ctx *x) {
  fputs("pid,exec,thread,seq,start_ns,latency_ns,api,type,site,req_bytes,resp_bytes,"
        "request_size,result,failed,not_offloadable,no_response,reason,fingerprint",
        x->out);
  for (int i = 0; i < x->nfeat; i++)
    fprintf(x->out, ",%s", x->feat[i]);
  if (x->pl)
    fputs(",decision,accel,predicted_ns,service_ns,link_ns,why", x->out);
  fputc('\n', x->out);
}

/* Slot of feature column i for an API, or -1. */
static int feat_slot(const ex_ctx *x, int api, int col) {
  for (int s = 0; s < ST_MAX_FEAT; s++) {
    const char *n = st_feature_name(api, s);
    if (!n)
      return -1;
    if (!strcmp(n, x->feat[col]))
      return s;
  }
  return -1;
}

static void csv_call(ex_ctx *x, scan_file *f, const st_call *c) {
  FILE *o = x->out;
  char fp[33];
  hex16(c->fp, fp);
  fprintf(o, "%u,%u,%u,%llu,%llu,%llu,%s,", f->h.pid, f->h.exec_seq, c->thread,
          (unsigned long long)c->seq, (unsigned long long)rel(x, c->start_ns),
          (unsigned long long)c->latency_ns, st_api_name(c->api));
  csv_field(o, scan_type_name(f, c->type));
  fputc(',', o);
  csv_field(o, scan_site_label(f, c->site));
  fprintf(o, ",%llu,%llu,%llu,%llu,%d,%d,%d,%u,%s", (unsigned long long)c->req_len,
          (unsigned long long)c->resp_len, (unsigned long long)plan_request_size(c),
          (unsigned long long)c->result, !!(c->flags & ST_CALL_FAILED),
          !!(c->flags & ST_CALL_NOT_OFFLOADABLE), !!(c->flags & ST_CALL_NO_RESPONSE), c->reason,
          fp);
  for (int i = 0; i < x->nfeat; i++) {
    int s = feat_slot(x, c->api, i);
    if (s >= 0 && s < c->nfeat)
      fprintf(o, ",%llu", (unsigned long long)c->feat[s]);
    else
      fputc(',', o);
  }
  if (x->pl) {
    fprintf(o, ",%s,", decision_name(x));
    csv_field(o, decision_accel(x));
    decision_times(x, o, ",%llu,%llu,%llu,", ",,,,");
    csv_field(o, decision_why(x));
  }
  fputc('\n', o);
}

/* ---- JSON ------------------------------------------------------------------ */

static void json_features(FILE *o, const st_call *c) {
  fputc('{', o);
  for (int i = 0; i < c->nfeat; i++) {
    const char *n = st_feature_name(c->api, i);
    fprintf(o, "%s\"%s\": %llu", i ? ", " : "", n ? n : "?", (unsigned long long)c->feat[i]);
  }
  fputc('}', o);
}

static void json_call(ex_ctx *x, scan_file *f, const st_call *c) {
  FILE *o = x->out;
  char fp[33];
  hex16(c->fp, fp);
  fprintf(o,
          "%s\n  {\"pid\": %u, \"pidns\": %llu, \"exec\": %u, \"thread\": %u, \"seq\": %llu, "
          "\"start_ns\": %llu, \"latency_ns\": %llu, \"api\": \"%s\", \"type\": ",
          x->calls ? "," : "", f->h.pid, (unsigned long long)f->h.pidns, f->h.exec_seq, c->thread,
          (unsigned long long)c->seq, (unsigned long long)rel(x, c->start_ns),
          (unsigned long long)c->latency_ns, st_api_name(c->api));
  json_write_str(o, scan_type_name(f, c->type));
  fprintf(o, ", \"site\": ");
  json_write_str(o, scan_site_label(f, c->site));
  fprintf(o,
          ", \"req_bytes\": %llu, \"resp_bytes\": %llu, \"request_size\": %llu, \"result\": "
          "%llu, \"failed\": %s, \"not_offloadable\": %s, \"no_response\": %s, \"reason\": %u, "
          "\"fingerprint\": \"%s\", \"features\": ",
          (unsigned long long)c->req_len, (unsigned long long)c->resp_len,
          (unsigned long long)plan_request_size(c), (unsigned long long)c->result,
          c->flags & ST_CALL_FAILED ? "true" : "false",
          c->flags & ST_CALL_NOT_OFFLOADABLE ? "true" : "false",
          c->flags & ST_CALL_NO_RESPONSE ? "true" : "false", c->reason, fp);
  json_features(o, c);
  if (x->pl) {
    fputs(", \"plan\": ", o);
    json_decision(x, o);
  }
  fputc('}', o);
}

/* A process, after its file was read (run time and status known). */
static void json_process(ex_ctx *x, scan_file *f, int first) {
  FILE *o = x->out;
  int approx;
  char st[512]; /* scan_status_text: a cut file's is ~300 bytes */
  scan_status_text(f, st, sizeof st);
  fprintf(o,
          "%s\n    {\"pid\": %u, \"pidns\": %llu, \"start_ticks\": %llu, \"ppid\": %u, "
          "\"exec\": %u, \"argv\": [",
          first ? "" : ",", f->h.pid, (unsigned long long)f->h.pidns,
          (unsigned long long)f->h.start_ticks, f->h.ppid, f->h.exec_seq);
  for (uint32_t i = 0; i < f->h.argc; i++) {
    fputs(i ? ", " : "", o);
    json_write_str(o, f->h.argv[i]);
  }
  fprintf(o,
          "], \"start_ns\": %llu, \"run_ns\": %llu, \"threads\": %u, \"calls\": %llu, "
          "\"status\": ",
          (unsigned long long)rel(x, f->h.start_mono_ns),
          (unsigned long long)scan_run_ns(f, &approx), f->nthreads, (unsigned long long)f->calls);
  json_write_str(o, st);
  fputc('}', o);
}

/* ---- Chrome trace events ------------------------------------------------------ */

static void chrome_meta(ex_ctx *x, const char *what, uint64_t pid, uint32_t tid, const char *name) {
  fprintf(x->out,
          "%s\n{\"ph\": \"M\", \"name\": \"%s\", \"pid\": %llu, \"tid\": %u, "
          "\"args\": {\"name\": ",
          x->calls ? "," : "", what, (unsigned long long)pid, tid);
  json_write_str(x->out, name);
  fputs("}}", x->out);
  x->calls++;
}

static void chrome_process(ex_ctx *x, scan_file *f) {
  char name[512], ns[48], nth[16];
  size_t o = 0;
  uint32_t n = cli_procs_nth(&x->procs, f->h.pid, f->h.pidns, f->h.start_ticks);
  x->cpid = f->h.pid + ((uint64_t)(n - 1) << 22);
  for (uint32_t i = 0; i < f->h.argc && i < 4 && o < 200; i++) {
    const char *a = f->h.argv[i], *s = i ? NULL : strrchr(a, '/');
    o += (size_t)snprintf(name + o, sizeof name - o, "%s%s", i ? " " : "", s ? s + 1 : a);
  }
  snprintf(name + o, sizeof name - o, "%s (pid %u%s%s%s)", f->h.argc > 4 ? " ..." : "", f->h.pid,
           cli_nth_note(n, nth, sizeof nth),
           cli_pidns_note(x->launcher_ns, f->h.pidns, ns, sizeof ns),
           f->h.exec_seq ? ", after exec" : "");
  chrome_meta(x, "process_name", x->cpid, 0, name);
}

static void chrome_thread(ex_ctx *x, scan_file *f, uint32_t t) {
  if (t >= x->nthread_named) {
    uint32_t n = x->nthread_named ? x->nthread_named : 64;
    while (n <= t)
      n *= 2;
    uint8_t *nn = realloc(x->thread_named, n);
    if (!nn)
      return;
    memset(nn + x->nthread_named, 0, n - x->nthread_named);
    x->thread_named = nn;
    x->nthread_named = n;
  }
  if (x->thread_named[t])
    return;
  x->thread_named[t] = 1;
  char name[64];
  snprintf(name, sizeof name, t ? "thread %u" : "main (thread 0)", t);
  chrome_meta(x, "thread_name", x->cpid, t, name);
}

static void chrome_call(ex_ctx *x, scan_file *f, const st_call *c) {
  FILE *o = x->out;
  if (c->thread < (1u << 20))
    chrome_thread(x, f, c->thread);
  uint64_t ts = rel(x, c->start_ns);
  char name[600];
  snprintf(name, sizeof name, "%s %s", st_api_name(c->api), scan_type_name(f, c->type));
  fprintf(o, ",\n{\"ph\": \"X\", \"name\": ");
  json_write_str(o, name);
  fprintf(o,
          ", \"cat\": \"%s\", \"pid\": %llu, \"tid\": %u, \"ts\": %llu.%03llu, \"dur\": "
          "%llu.%03llu, \"args\": {\"seq\": %llu, \"req_bytes\": %llu, \"resp_bytes\": %llu, "
          "\"site\": ",
          st_api_family(c->api) == ST_FAMILY_JPEG ? "jpeg" : "protobuf",
          (unsigned long long)x->cpid, c->thread, (unsigned long long)(ts / 1000),
          (unsigned long long)(ts % 1000), (unsigned long long)(c->latency_ns / 1000),
          (unsigned long long)(c->latency_ns % 1000), (unsigned long long)c->seq,
          (unsigned long long)c->req_len, (unsigned long long)c->resp_len);
  json_write_str(o, scan_site_label(f, c->site));
  fprintf(o, ", \"features\": ");
  json_features(o, c);
  if (x->pl) {
    fputs(", \"plan\": ", o);
    json_decision(x, o);
  }
  fputs("}}", o);
  x->calls++;
}

/* ---- driving ------------------------------------------------------------------ */

static int on_call(scan_file *f, const st_call *c, void *arg) {
  ex_ctx *x = arg;
  if (x->fmt == FMT_CHROME && x->file_calls == 0)
    chrome_process(x, f);
  x->file_calls++;
  if (x->pl)
    decide(x, f, c);
  switch (x->fmt) {
  case FMT_CSV: csv_call(x, f, c); break;
  case FMT_JSON: json_call(x, f, c); break;
  case FMT_CHROME: chrome_call(x, f, c); break;
  }
  if (!(x->calls & 0xfff) && ferror(x->out))
    return 1;
  x->calls += x->fmt != FMT_CHROME;
  return 0;
}

static void begin_doc(ex_ctx *x) {
  switch (x->fmt) {
  case FMT_CSV: csv_header(x); break;
  case FMT_JSON:
    fprintf(x->out, "{\"format\": \"standin-export\", \"version\": 1, \"recording\": ");
    json_write_str(x->out, x->dir);
    fprintf(x->out, ", \"time_base\": \"ns since the first process started\"");
    if (x->pl) {
      fputs(", \"plan\": ", x->out);
      json_write_str(x->out, x->ps.name[0]);
    }
    fprintf(x->out, ",\n\"calls\": [");
    break;
  case FMT_CHROME:
    fprintf(x->out, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"recording\": ");
    json_write_str(x->out, x->dir);
    fprintf(x->out, ", \"tool\": \"standin %s\"},\n\"traceEvents\": [", STANDIN_VERSION);
    break;
  }
}

/* Earliest process start: the time base of the export. */
static uint64_t time_base(const cli_tracedir *td) {
  uint64_t base = 0;
  for (size_t i = 0; i < td->n; i++) {
    st_reader *r;
    if (st_reader_open(&r, td->paths[i]) != ST_OK)
      continue;
    uint64_t s = st_reader_header(r)->start_mono_ns;
    if (!base || s < base)
      base = s;
    st_reader_close(r);
  }
  return base;
}

/* Stream every file; JSON collects the processes in a second array after
 * the calls (their run time is known at the end of each file), which
 * needs the files read twice only for their headers, not their calls. */
static int export_files(ex_ctx *x, const cli_tracedir *td) {
  int bad = 0, nproc = 0;
  char **proc_json = calloc(td->n + 1, sizeof *proc_json);
  size_t *proc_len = calloc(td->n + 1, sizeof *proc_len);
  for (size_t i = 0; proc_json && proc_len && i < td->n; i++) {
    scan_file f;
    x->file_calls = 0;
    if (x->nthread_named)
      memset(x->thread_named, 0, x->nthread_named);
    if (scan_run(&f, td->paths[i], on_call, x) != 0) {
      bad = 1;
      continue;
    }
    if (f.status.error) { /* a cut file (killed, a full disk) is not damage: info, dump */
      char st[512];       /* scan_status_text: a cut file's is ~300 bytes */
      scan_status_text(&f, st, sizeof st);
      cli_warn("%s: %s", td->paths[i], st);
      bad |= scan_damaged(&f);
    }
    if (x->fmt == FMT_JSON) {
      FILE *mem = open_memstream(&proc_json[i], &proc_len[i]);
      FILE *keep = x->out;
      x->out = mem;
      if (mem) {
        json_process(x, &f, nproc++ == 0);
        fclose(mem);
      }
      x->out = keep;
    }
    scan_close(&f);
  }
  if (x->fmt == FMT_JSON) {
    fprintf(x->out, "\n],\n\"processes\": [");
    for (size_t i = 0; proc_json && i < td->n; i++)
      if (proc_json[i])
        fputs(proc_json[i], x->out);
    fprintf(x->out, "\n]}\n");
  } else if (x->fmt == FMT_CHROME) {
    fprintf(x->out, "\n]}\n");
  }
  for (size_t i = 0; proc_json && i < td->n; i++)
    free(proc_json[i]);
  free(proc_json);
  free(proc_len);
  return bad;
}

static int parse(int argc, char **argv, ex_ctx *x) {
  static const struct option lo[] = {{"format", required_argument, 0, 'F'},
                                     {"output", required_argument, 0, 'o'},
                                     {"trace", required_argument, 0, 't'},
                                     {"plan", required_argument, 0, 'p'},
                                     {"iface", required_argument, 0, 'i'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  const char *trace = NULL;
  int c;
  x->fmt = -1;
  optind = 1;
  while ((c = getopt_long(argc, argv, "F:o:t:p:i:h", lo, NULL)) != -1) {
    switch (c) {
    case 'F':
      x->fmt = !strcmp(optarg, "csv")      ? FMT_CSV
               : !strcmp(optarg, "json")   ? FMT_JSON
               : !strcmp(optarg, "chrome") ? FMT_CHROME
                                           : -2;
      if (x->fmt == -2) {
        cli_err("--format: '%s' is not csv, json or chrome", optarg);
        return -1;
      }
      break;
    case 'o': x->out_path = optarg; break;
    case 'p':
      if (planset_add_file(&x->ps, optarg) != 0)
        return -1;
      break;
    case 'i':
      if (planset_add_iface(&x->ps, optarg) != 0)
        return -1;
      break;
    case 't': trace = optarg; break;
    case 'h': fputs(usage_text, stdout); exit(0);
    default: fputs(usage_text, stderr); return -1;
    }
  }
  if (cli_trace_dir("export", trace, argc, argv, &x->dir) != 0)
    return -1;
  if (x->fmt < 0) {
    cli_err("export: choose --format csv, json or chrome");
    return -1;
  }
  if (x->ps.n > 1) {
    cli_err("export: one plan at a time (%s and %s given): each call gets one decision; compare "
            "plans with 'standin whatif'",
            x->ps.name[0], x->ps.name[1]);
    return -1;
  }
  x->pl = x->ps.n ? x->ps.p[0] : NULL;
  if (x->pl)
    plan_reset(x->pl); /* models that count a request's occurrences: from the first */
  return 0;
}

int cmd_export(int argc, char **argv) {
  ex_ctx x = {0};
  planset_init(&x.ps);
  if (parse(argc, argv, &x) != 0) {
    planset_free(&x.ps);
    return EXIT_USAGE;
  }
  cli_tracedir td;
  if (cli_tracedir_open(&td, x.dir) != 0) {
    planset_free(&x.ps);
    return 1;
  }
  if (td.n == 0)
    cli_warn_no_trace(x.dir, "export");
  else
    cli_warn_unrecorded(x.dir);
  cli_out out; /* standard output without -o or with "-" */
  if (cli_out_open(&out, x.out_path, x.dir) != 0) {
    cli_tracedir_free(&td);
    planset_free(&x.ps);
    return 1;
  }
  x.out = out.f;
  feature_columns(&x);
  x.launcher_ns = cli_launcher_pidns(x.dir);
  x.base = time_base(&td);
  begin_doc(&x);
  int bad = export_files(&x, &td);
  /* a damaged recording's readable calls are kept (exit 1 says it) */
  if (cli_out_close(&out, 1) != 0)
    bad = 1;
  free(x.thread_named);
  cli_procs_free(&x.procs);
  cli_tracedir_free(&td);
  planset_free(&x.ps);
  return bad;
}

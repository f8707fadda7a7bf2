/* cmd_info.c — `standin info DIR`: what a recording holds. */
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "cli_elf.h"
#include "pb_walk.h"
#include "scan.h"

typedef struct {
  int api;
  char *type;
  uint64_t calls, ns, req_bytes, resp_bytes, failed, not_offloadable, no_response;
  unsigned byte_sides;           /* st_call_byte_sides of its calls, or'ed */
  uint64_t no_why[CLI_NO_SLOTS]; /* not offloadable, by why (cli_no_slot) */
} info_row;

typedef struct {
  info_row *rows;
  size_t n, cap;
  int32_t *slot; /* per file: (type id * ST_API_MAX + api) -> row + 1 */
  uint32_t nslot;
  uint64_t file_ns; /* time in calls of the file being scanned */
  /* its decoded output, and the part of it probed outside the caches */
  double file_out, file_cold;
  /* calls whose response the trace keeps as a digest, and their size */
  uint64_t file_digests, file_digest_bytes;
  /* JPEG decodes whose rows the trace keeps, and their size */
  uint64_t file_rows_kept, file_rows_kept_bytes;
  /* calls that took page faults (fault_ns), their time in them,
   * and those calls' whole time */
  uint64_t file_fault_calls, file_fault_ns, file_faulting_ns;
  /* calls timed in the program's source callbacks (source_ns), their time
   * there, and those calls' whole time */
  uint64_t file_source_calls, file_source_ns, file_sourcing_ns;
} info_agg;

/* The protobuf types' definitions met in the recording, one per (name,
 * schema identity): a name with two is replayed apart (rdb_schema). */
typedef struct {
  struct info_def {
    char *name;
    uint64_t id;
  } * d;
  size_t n, cap;
  int unnamed; /* a type without a name (written as "?") */
} info_defs;

static void defs_add(info_defs *s, const scan_file *f) {
  for (uint32_t t = 1; t < f->ntypes; t++) {
    const scan_type *ty = &f->types[t];
    if (ty->family != ST_FAMILY_PROTOBUF || !ty->name)
      continue;
    if (!strcmp(ty->name, "?")) {
      s->unnamed = 1;
      continue;
    }
    uint64_t id = pbw_schema_id(ty->schema, ty->schema_len);
    size_t i = 0;
    while (i < s->n && !(s->d[i].id == id && !strcmp(s->d[i].name, ty->name)))
      i++;
    if (i < s->n || !id)
      continue;
    if (s->n == s->cap) {
      size_t cap = s->cap ? s->cap * 2 : 16;
      struct info_def *nd = realloc(s->d, cap * sizeof *nd);
      if (!nd)
        return;
      s->d = nd;
      s->cap = cap;
    }
    if ((s->d[s->n].name = strdup(ty->name)) != NULL)
      s->d[s->n++].id = id;
  }
}

static int def_cmp(const void *x, const void *y) {
  return strcmp(((const struct info_def *)x)->name, ((const struct info_def *)y)->name);
}

/* What replay will not answer because of how the types were recorded. */
static void print_defs(info_defs *s) {
  if (s->n > 1)
    qsort(s->d, s->n, sizeof *s->d, def_cmp);
  int first = 1;
  for (size_t i = 0, j; i < s->n; i = j) {
    for (j = i + 1; j < s->n && !strcmp(s->d[j].name, s->d[i].name); j++)
      ;
    if (j - i > 1)
      printf("%snote: message type %s was recorded with %zu definitions (programs or libraries "
             "built from different versions of its .proto): replay answers a call only from "
             "requests recorded with the program's own, and none recorded with two\n",
             first ? "\n" : "", s->d[i].name, j - i);
    first &= j - i == 1;
  }
  if (s->unnamed)
    printf("%snote: message types without names ('?': generated with option optimize_for = "
           "CODE_SIZE) cannot be told apart: replay runs their calls for real\n",
           first ? "\n" : "");
  for (size_t i = 0; i < s->n; i++)
    free(s->d[i].name);
  free(s->d);
}

static info_row *find_row(info_agg *a, int api, const char *type) {
  for (size_t i = 0; i < a->n; i++)
    if (a->rows[i].api == api && !strcmp(a->rows[i].type, type))
      return &a->rows[i];
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 16;
    info_row *nr = realloc(a->rows, cap * sizeof *nr);
    if (!nr)
      return NULL;
    a->rows = nr;
    a->cap = cap;
  }
  info_row *r = &a->rows[a->n++];
  memset(r, 0, sizeof *r);
  r->api = api;
  r->type = strdup(type);
  return r;
}

/* Row of a call, cached per (type id, api) so a long trace does not
 * compare strings per call. */
static info_row *row_of(info_agg *a, scan_file *f, const st_call *c) {
  uint32_t key = c->type * ST_API_MAX + (c->api % ST_API_MAX);
  /* only types the file declared: a damaged call's type id must not size
   * the cache */
  if (c->type < f->ntypes && key >= a->nslot) {
    uint32_t n = a->nslot ? a->nslot : 256;
    while (n <= key)
      n *= 2;
    int32_t *ns = realloc(a->slot, n * sizeof *ns);
    if (ns) {
      memset(ns + a->nslot, 0, (n - a->nslot) * sizeof *ns);
      a->slot = ns;
      a->nslot = n;
    }
  }
  if (key < a->nslot && a->slot[key])
    return &a->rows[a->slot[key] - 1];
  info_row *r = find_row(a, c->api, scan_type_name(f, c->type));
  if (r && key < a->nslot)
    a->slot[key] = (int32_t)(r - a->rows) + 1;
  return r;
}

/* A call's time in something a device keeps (feature slot, -1: none), at
 * most its latency (a trace from elsewhere may claim more): the calls that
 * had some, their time in it, and those calls' whole time. */
static void add_kept(const st_call *c, int slot, uint64_t *calls, uint64_t *ns, uint64_t *whole) {
  if (slot < 0 || c->nfeat <= slot || !c->feat[slot])
    return;
  (*calls)++;
  *ns += c->feat[slot] < c->latency_ns ? c->feat[slot] : c->latency_ns;
  *whole += c->latency_ns;
}

static int on_call(scan_file *f, const st_call *c, void *arg) {
  info_agg *a = arg;
  a->file_ns += c->latency_ns;
  add_kept(c, st_fault_slot(c->api), &a->file_fault_calls, &a->file_fault_ns, &a->file_faulting_ns);
  add_kept(c, st_source_slot(c->api), &a->file_source_calls, &a->file_source_ns,
           &a->file_sourcing_ns);
  if (c->flags & ST_CALL_RESP_DIGEST) {
    a->file_digests++;
    a->file_digest_bytes += c->resp_len;
  } else if (st_api_family(c->api) == ST_FAMILY_JPEG && c->resp_len &&
             !(c->flags & (ST_CALL_NO_RESPONSE | ST_CALL_FAILED))) {
    a->file_rows_kept++;
    a->file_rows_kept_bytes += c->resp_len;
  }
  if (st_api_family(c->api) == ST_FAMILY_JPEG && c->nfeat > ST_JPF_OUT_COLD) {
    double out = (double)c->feat[ST_JPF_OUT_BYTES];
    uint64_t cold = c->feat[ST_JPF_OUT_COLD];
    a->file_out += out;
    a->file_cold += out * (double)(cold > 1000 ? 1000 : cold) / 1000.0;
  }
  info_row *r = row_of(a, f, c);
  if (!r)
    return 0;
  r->calls++;
  r->ns += c->latency_ns;
  r->req_bytes += c->req_len;
  r->resp_bytes += c->resp_len;
  r->byte_sides |= st_call_byte_sides(c->api, c->resp_len);
  r->failed += !!(c->flags & ST_CALL_FAILED);
  if (c->flags & ST_CALL_NOT_OFFLOADABLE) {
    r->not_offloadable++;
    r->no_why[cli_no_slot(c)]++;
  }
  r->no_response += !!(c->flags & ST_CALL_NO_RESPONSE);
  return 0;
}

static int row_cmp(const void *x, const void *y) {
  const info_row *a = x, *b = y;
  return a->ns < b->ns ? 1 : a->ns > b->ns ? -1 : 0;
}

/* Processes that made calls the recording lacks (their traces could not
 * be created): said, with what to do; 0 when there are none. */
static size_t unrecorded_note(const char *dir, const char *indent) {
  char pid[64], why[256];
  size_t n = cli_unrecorded(dir, pid, sizeof pid, why, sizeof why);
  if (n)
    printf("%s%zu process%s (pid %s%s) made intercepted calls that are not recorded:\n"
           "%s%s trace could not be created (%s).\n%s",
           indent, n, n == 1 ? "" : "es", pid, n == 1 ? "" : ", ...", indent,
           n == 1 ? "its" : "the first one's", why,
           cli_note_fd_limit(why)
               ? "  The recorder needs a file descriptor of its own in each process:\n"
                 "  raise the limit (ulimit -n) and record again.\n"
               : "");
  return n;
}

/* Programs started with an environment that dropped standin (the
 * PID.unfollowed notes, record/proc.c): said, as record says them; 0 when
 * there are none. */
static size_t unfollowed_note(const char *dir, const char *indent) {
  char pid[64], prog[PATH_MAX];
  size_t n = cli_notes(dir, ".unfollowed", pid, sizeof pid, prog, sizeof prog);
  if (n)
    printf("%spid %s started %s with an environment that drops standin%s:\n"
           "%sit ran unrecorded, and so did the programs it started.\n",
           indent, pid, prog[0] ? prog : "a program", n > 1 ? " (and more processes did so)" : "",
           indent);
  return n;
}

/* A recording whose main thread waited for a CPU (run.info, since
 * 2026-12-01): the calls timed then may include the waits. */
static void cpu_wait_note(const char *dir) {
  const char *v = cli_runinfo_get(dir, "main_cpu_wait_ns");
  unsigned long long waited, oncpu;
  unsigned cpus = 0;
  if (!v || sscanf(v, "%llu", &waited) != 1 || !(v = cli_runinfo_get(dir, "main_cpu_ns")) ||
      sscanf(v, "%llu", &oncpu) != 1)
    return;
  if ((v = cli_runinfo_get(dir, "cpus")) != NULL && sscanf(v, "%u", &cpus) != 1)
    cpus = 0;
  char said[512];
  if (cli_cpu_wait_say(said, sizeof said, waited, oncpu, cpus))
    printf("  while recording, %s: calls timed then may include those waits\n", said);
}

/* Returns 1 when dir is not a recording at all (said on stderr). */
static int explain_empty(const char *dir) {
  if (!cli_runinfo_get(dir, "command")) {
    cli_err_no_trace(dir, "describe");
    return 1;
  }
  const char *prog = cli_runinfo_get(dir, "program");
  char p[4096];
  snprintf(p, sizeof p, "%s", prog ? prog : "the program");
  const char *status = cli_runinfo_get(dir, "status"); /* read before the next get */
  int code = 0,
      killed = status && sscanf(status, "exit %d", &code) == 1 && code > 128 && code < 128 + NSIG;
  const char *dyn = cli_runinfo_get(dir, "dynamic");
  const char *lib, *fn;
  printf("%s: 0 processes, 0 calls.\n", dir);
  if (cli_recording_busy(dir)) { /* not a program that made no call: not yet */
    printf("  still being recorded into: a 'standin record' is running, and no process\n"
           "  of %s has made an intercepted call yet.\n",
           p);
    return 0;
  }
  if (killed)
    /* killed before its writer thread had created the trace file (t605) */
    printf("  %s was killed by signal %d (%s) before any trace file was\n"
           "  written: calls made before a signal nothing can catch (SIGKILL, a stack\n"
           "  overflow, a fault while the program blocks its signal) are lost.\n",
           p, code - 128, strsignal(code - 128));
  else if (dyn && !strcmp(dyn, "0"))
    printf("  %s is statically linked: the shim cannot be preloaded into it.\n", p);
  else if ((lib = cli_elf_builtin_lib(p, &fn)) != NULL)
    printf("  %s has %s linked into it\n"
           "  (it defines %s itself): its calls never reach the shared\n"
           "  library, where standin intercepts them. Link it against %s.so\n"
           "  to record it.\n",
           p, lib, fn, lib);
  else if (unrecorded_note(dir, "  ") + unfollowed_note(dir, "  "))
    ;
  else
    printf("  %s made no protobuf-c or libjpeg/TurboJPEG call that standin intercepts:\n"
           "  it may load the libraries without calling them for this input (pdfimages -j\n"
           "  copies JPEG data as it is), or not use them (is it dynamically linked\n"
           "  against libprotobuf-c, libjpeg or libturbojpeg? a set-user-ID program also\n"
           "  ignores LD_PRELOAD).\n",
           p);
  return 0;
}

static void print_header(const scan_file *f, uint32_t nth, uint64_t launcher_ns) {
  char ns[48], n[16];
  printf("process %u%s%s", f->h.pid, cli_nth_note(nth, n, sizeof n),
         cli_pidns_note(launcher_ns, f->h.pidns, ns, sizeof ns));
  if (f->h.exec_seq)
    printf(" (exec %u)", f->h.exec_seq);
  if (f->h.ppid == 0) /* the first process of a PID namespace: its parent is outside */
    printf(", parent outside its PID namespace:");
  else
    printf(", parent %u:", f->h.ppid);
  for (uint32_t i = 0; i < f->h.argc && i < 8; i++) { /* as a shell reads it back */
    putchar(' ');
    cli_put_shell_word(stdout, f->h.argv[i]);
  }
  if (f->h.argc > 8)
    printf(" ...");
  printf("\n");
}

static void print_process(const scan_file *f, uint32_t nth, uint64_t launcher_ns, uint64_t call_ns,
                          uint64_t file_bytes, const info_agg *agg) {
  char a[32], b[32], c[32], d[32], e[32], st[512];
  int approx;
  uint64_t run = scan_run_ns(f, &approx);
  print_header(f, nth, launcher_ns);
  printf("  threads %u, calls %s, time in calls %s = %.1f%% of %s%s run%s\n", f->nthreads,
         cli_fmt_count(a, sizeof a, f->calls), cli_fmt_ns(b, sizeof b, (double)call_ns),
         run ? 100.0 * (double)call_ns / (double)run : 0.0, approx ? ">= " : "",
         cli_fmt_ns(c, sizeof c, (double)run),
         call_ns > run && f->nthreads > 1 ? " (threads call at the same time: their times add up)"
                                          : "");
  double ratio = file_bytes ? (double)f->status.raw_bytes / (double)file_bytes : 0;
  printf("  trace %s, %s uncompressed (%.1fx), payloads stored %s in %s blobs\n",
         cli_fmt_bytes(d, sizeof d, (double)file_bytes),
         cli_fmt_bytes(e, sizeof e, (double)f->status.raw_bytes), ratio,
         cli_fmt_bytes(a, sizeof a, (double)f->blob_bytes), cli_fmt_count(b, sizeof b, f->blobs));
  if (agg->file_digests) {
    char n[32], by[32];
    printf("  %s decode%s kept a digest of %s output (%s in all), not the output: replay\n"
           "  decodes each distinct image again before the program starts\n",
           cli_fmt_count(n, sizeof n, agg->file_digests), agg->file_digests == 1 ? "" : "s",
           agg->file_digests == 1 ? "its" : "their",
           cli_fmt_bytes(by, sizeof by, (double)agg->file_digest_bytes));
  }
  if (agg->file_rows_kept) {
    char n[32], by[32];
    printf("  %s decode%s kept %s output rows (%s in all): replay cannot rebuild\n"
           "  them from the request alone (tables from an earlier datastream, colour\n"
           "  quantisation, dithered RGB565), or record ran with --keep-pixels\n",
           cli_fmt_count(n, sizeof n, agg->file_rows_kept), agg->file_rows_kept == 1 ? "" : "s",
           agg->file_rows_kept == 1 ? "its" : "their",
           cli_fmt_bytes(by, sizeof by, (double)agg->file_rows_kept_bytes));
  }
  if (agg->file_fault_calls) {
    char nc[32], n[40], t[32], w[32];
    if (agg->file_fault_calls == 1)
      snprintf(n, sizeof n, "a");
    else
      snprintf(n, sizeof n, "the %s", cli_fmt_count(nc, sizeof nc, agg->file_fault_calls));
    printf("  page faults took %s of the %s of %s call%s that wrote into memory\n"
           "  the program had not touched yet (a fresh buffer to pack or decode into,\n"
           "  fresh pages for an unpacked tree): models of devices keep that time\n"
           "  (fault_ns), as a device writing there takes them too\n",
           cli_fmt_ns(t, sizeof t, (double)agg->file_fault_ns),
           cli_fmt_ns(w, sizeof w, (double)agg->file_faulting_ns), n,
           agg->file_fault_calls == 1 ? "" : "s");
  }
  if (agg->file_source_calls) {
    char nc[32], t[32], w[32];
    printf("  the program's source callbacks took %s of the %s of %s decode%s that\n"
           "  read through them (source_ns): models of devices keep that time, as a device\n"
           "  fed those bytes waits for them too\n",
           cli_fmt_ns(t, sizeof t, (double)agg->file_source_ns),
           cli_fmt_ns(w, sizeof w, (double)agg->file_sourcing_ns),
           cli_fmt_count(nc, sizeof nc, agg->file_source_calls),
           agg->file_source_calls == 1 ? "" : "s");
  }
  scan_status_text(f, st, sizeof st);
  printf("  status: %s\n", st);
  if (f->overhead_ns) {
    char o[32];
    printf("  recording cost the program's threads %s (%.1f%% of the recorded run): shares "
           "above are of the slowed-down run\n",
           cli_fmt_ns(o, sizeof o, (double)f->overhead_ns),
           run ? 100.0 * (double)f->overhead_ns / (double)run : 0.0);
    /* the cost is each thread's time in the hooks, by the clock: summed
     * over threads that outnumber the cores, it holds their waits for one */
    if (run && f->overhead_ns > run)
      printf("  (summed over its %u threads; where they outnumber the cores, a thread's time in "
             "the hooks includes waiting for one)\n",
             f->nthreads);
  }
  if (f->writer_cpu_ns) {
    /* its start is in the total (~0.5 ms of CPU recording a one-decode
     * djpeg): a share per call means something only over many calls */
    char o[32], pc[32];
    printf("  the trace writer thread used %s of CPU",
           cli_fmt_ns(o, sizeof o, (double)f->writer_cpu_ns));
    if (f->calls >= 1000)
      printf(" (%s a call)",
             cli_fmt_ns(pc, sizeof pc, (double)f->writer_cpu_ns / (double)f->calls));
    printf("\n");
  }
  if (f->has_stacks_unwound && f->stacks_unwound) {
    /* each thread remembers where the return addresses of the stacks it
     * has seen were, and checks them instead of unwinding (rt_stack) */
    char u[32];
    printf("  call stacks unwound: %s%s\n", cli_fmt_count(u, sizeof u, f->stacks_unwound),
           f->stacks_unwound < f->calls ? "; the other calls' came from the thread's memo of stacks"
                                        : "; none came from the thread's memo of stacks");
  }
  if (f->calls_left) {
    /* shim_left_behind: found by the thread's next call, recorded again */
    char l[32];
    printf("  the program left %s call%s by a longjmp past the hook (a signal handler or a\n"
           "  callback jumping out): not recorded; its thread's later calls were\n",
           cli_fmt_count(l, sizeof l, f->calls_left), f->calls_left == 1 ? "" : "s");
  }
  if (f->ring_waits) {
    char w[32], r[32], rb[32], pk[32], mx[32];
    printf("  the program's threads waited %s time%s for ring space (%s in all): the writer\n"
           "  fell behind; latencies are unaffected, wall time is not. STANDIN_RING_KB gives each\n"
           "  thread a larger ring (this run: %s)",
           cli_fmt_count(w, sizeof w, f->ring_waits), f->ring_waits == 1 ? "" : "s",
           cli_fmt_ns(r, sizeof r, (double)f->ring_wait_ns),
           cli_fmt_bytes(rb, sizeof rb, (double)f->ring_bytes));
    if (f->backlog_peak && f->backlog_max && f->ring_bytes) /* bounded, on the heap */
      printf(", and with it a larger bound on the\n  payloads too large for a ring that "
             "wait on the heap (%llu rings, %s; at most %s waited)",
             (unsigned long long)(f->backlog_max / f->ring_bytes),
             cli_fmt_bytes(mx, sizeof mx, (double)f->backlog_max),
             cli_fmt_bytes(pk, sizeof pk, (double)f->backlog_peak));
    printf("\n");
  }
  if (f->writer_normal)
    printf("  the trace writer ran at normal priority (lowering it needs root, CAP_SYS_NICE or\n"
           "  ulimit -e 20 to raise it again): where the program kept every core busy, latencies\n"
           "  include time the writer took from it\n");
  if (f->retimed[0])
    printf(strstr(f->retimed, "timing-only") ? "  latencies of %s (record --retime)\n"
                                              : "  latencies of %s from a timing-only second run "
                                                "(record --retime)\n",
           f->retimed);
  else if (f->calls >= CLI_SHORT_CALLS_MIN && call_ns < CLI_SHORT_CALL_NS * f->calls) {
    /* the recorder's own work between calls slows the next ones
     * (INTERNALS.md, record --retime: payload copies and the hook) */
    char m[32];
    printf("  calls this short (%s on average) were timed with the recorder running, which\n"
           "  slows them (pbtest's ~500 ns calls: 1-9%% on one test VM, 8-16%% on another);\n"
           "  'standin record --retime' times them again without it\n",
           cli_fmt_ns(m, sizeof m, (double)call_ns / (double)f->calls));
  }
  if (agg->file_out > 0 && agg->file_cold >= 0.01 * agg->file_out) { /* below: probe noise */
    char o[32];
    printf("  the decoder left %.0f%% of its %s of output outside the caches (non-temporal\n"
           "  stores): the program's first reads of it miss; replay delivers it alike\n",
           100.0 * agg->file_cold / agg->file_out, cli_fmt_bytes(o, sizeof o, agg->file_out));
  }
  if (f->corr_timer_ns && f->corr_nested_ns)
    printf("  latencies corrected by -%llu ns (clock read) and -%llu ns per nested call\n",
           (unsigned long long)f->corr_timer_ns, (unsigned long long)f->corr_nested_ns);
  else if (f->corr_timer_ns || f->corr_nested_ns)
    printf("  latencies corrected by -%llu ns %s\n",
           (unsigned long long)(f->corr_timer_ns ? f->corr_timer_ns : f->corr_nested_ns),
           f->corr_timer_ns ? "(clock read)" : "per nested call");
}

static void print_rows(info_agg *a, uint64_t total_ns) {
  if (a->n)
    qsort(a->rows, a->n, sizeof *a->rows, row_cmp);
  printf("\n%-18s %-32s %10s %11s %6s %10s %10s %10s\n", "API", "TYPE", "CALLS", "TIME", "%CALLS",
         "MEAN", "REQ", "RESP");
  for (size_t i = 0; i < a->n; i++) {
    const info_row *r = &a->rows[i];
    char c[32], t[32], m[32], q[32], s[32];
    printf("%-18s %-32s %10s %11s %5.1f%% %10s %10s %10s\n", st_api_name(r->api), r->type,
           cli_fmt_count(c, sizeof c, r->calls), cli_fmt_ns(t, sizeof t, (double)r->ns),
           total_ns ? 100.0 * (double)r->ns / (double)total_ns : 0.0,
           cli_fmt_ns(m, sizeof m, r->calls ? (double)r->ns / (double)r->calls : 0),
           cli_fmt_side(q, sizeof q, r->byte_sides & ST_SIDE_REQ, r->req_bytes),
           cli_fmt_side(s, sizeof s, r->byte_sides & ST_SIDE_RESP, r->resp_bytes));
    if (r->failed || r->not_offloadable || r->no_response) {
      char list[256], why[264] = "", n1[32], n2[32], n3[32];
      cli_no_list(r->no_why, list, sizeof list);
      if (*list)
        snprintf(why, sizeof why, " (%s)", list);
      printf("%-18s   %s failed in the library, %s not offloadable%s, %s without a saved "
             "response\n",
             "", cli_fmt_count(n1, sizeof n1, r->failed),
             cli_fmt_count(n2, sizeof n2, r->not_offloadable), why,
             cli_fmt_count(n3, sizeof n3, r->no_response));
    }
  }
}

int cmd_info(int argc, char **argv) {
  static const char usage[] = "usage: standin info [DIR]\n\n"
                              "Summarises a recording (default standin.data): per process\n"
                              "its threads, calls and trace status; then per API and\n"
                              "message type the calls, the time in them and its share of\n"
                              "all the time in calls (%CALLS; 'standin report' gives shares\n"
                              "of the run), the mean, request and response bytes.\n\n"
                              "  -t, --trace DIR   the recording, as for replay (or DIR)\n";
  static const struct option lo[] = {
      {"trace", required_argument, 0, 't'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  const char *trace = NULL, *dir;
  int opt;
  optind = 1;
  while ((opt = getopt_long(argc, argv, "t:h", lo, NULL)) != -1) {
    if (opt == 'h') {
      fputs(usage, stdout);
      return 0;
    }
    if (opt != 't') {
      fputs(usage, stderr);
      return EXIT_USAGE;
    }
    trace = optarg;
  }
  if (cli_trace_dir("info", trace, argc, argv, &dir) != 0)
    return EXIT_USAGE;
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return 1;
  if (td.n == 0) {
    int rc = explain_empty(dir);
    cli_tracedir_free(&td);
    return rc;
  }
  const char *cmd = cli_runinfo_get(dir, "command");
  /* a long command line (a program given hundreds of names) is cut at a
   * word, as the per-process lines cut argv */
  int shown = cmd ? (int)strlen(cmd) : 0;
  if (shown > 160) {
    shown = 160;
    while (shown > 80 && cmd[shown] != ' ')
      shown--;
  }
  printf("recording %s%s%.*s%s\n", dir, cmd ? ": " : "", shown, cmd ? cmd : "",
         cmd && cmd[shown] ? " ..." : "");
  if (cli_recording_busy(dir))
    printf("  still being recorded into: a 'standin record' is running, and its processes' "
           "traces are not closed yet\n");
  cpu_wait_note(dir);
  putchar('\n');
  info_agg agg = {0};
  info_defs defs = {0};
  cli_procs procs = {0};
  uint64_t total_ns = 0, total_calls = 0, total_bytes = 0;
  int damaged = 0;
  for (size_t i = 0; i < td.n; i++) {
    scan_file f;
    agg.nslot = 0;
    free(agg.slot);
    agg.slot = NULL;
    agg.file_ns = 0;
    agg.file_out = agg.file_cold = 0;
    agg.file_digests = agg.file_digest_bytes = 0;
    agg.file_rows_kept = agg.file_rows_kept_bytes = 0;
    agg.file_fault_calls = agg.file_fault_ns = agg.file_faulting_ns = 0;
    agg.file_source_calls = agg.file_source_ns = agg.file_sourcing_ns = 0;
    if (scan_run(&f, td.paths[i], on_call, &agg) != 0) {
      damaged = 1;
      continue;
    }
    struct stat st;
    uint64_t fb = stat(td.paths[i], &st) == 0 ? (uint64_t)st.st_size : 0;
    print_process(&f, cli_procs_nth(&procs, f.h.pid, f.h.pidns, f.h.start_ticks),
                  cli_launcher_pidns(dir), agg.file_ns, fb, &agg);
    total_ns += agg.file_ns;
    total_calls += f.calls;
    total_bytes += fb;
    damaged |= scan_damaged(&f);
    defs_add(&defs, &f);
    scan_close(&f);
  }
  char a[32], b[32], c[32];
  printf("\ntotal: %zu process%s, %s call%s, %s in calls, trace %s\n", td.n, td.n == 1 ? "" : "es",
         cli_fmt_count(a, sizeof a, total_calls), total_calls == 1 ? "" : "s",
         cli_fmt_ns(b, sizeof b, (double)total_ns),
         cli_fmt_bytes(c, sizeof c, (double)total_bytes));
  unrecorded_note(dir, "  ");
  unfollowed_note(dir, "  ");
  print_rows(&agg, total_ns);
  print_defs(&defs);
  for (size_t k = 0; k < agg.n; k++)
    free(agg.rows[k].type);
  free(agg.rows);
  free(agg.slot);
  cli_procs_free(&procs);
  cli_tracedir_free(&td);
  return damaged ? 1 : 0;
}

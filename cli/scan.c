/* scan.c — streaming a trace file for the CLI (see scan.h). */
#include "scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_elf.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define MAX_TABLE_ID (1u << 24) /* ids beyond this are treated as damage */

/* Type and site tables are indexed by id. Writers number them 1, 2, 3...,
 * so an id far beyond the records read so far is damage (or an attempt to
 * make a 50-byte file cost gigabytes): such a type or site is ignored. */
static int id_plausible(const scan_file *f, uint32_t id) {
  st_read_status s;
  st_reader_status(f->r, &s);
  return id < MAX_TABLE_ID && id <= 2 * s.records + 64;
}

static int grow(void **arr, uint32_t *n, uint32_t need, size_t elem) {
  if (need < *n)
    return 0;
  uint32_t cap = *n ? *n : 16;
  while (cap <= need)
    cap *= 2;
  void *p = realloc(*arr, (size_t)cap * elem);
  if (!p)
    return -1;
  memset((char *)p + (size_t)*n * elem, 0, (size_t)(cap - *n) * elem);
  *arr = p;
  *n = cap;
  return 0;
}

static void add_type(scan_file *f, const st_type *t) {
  if (!id_plausible(f, t->id) || grow((void **)&f->types, &f->ntypes, t->id, sizeof *f->types))
    return;
  scan_type *s = &f->types[t->id];
  free(s->name);
  free(s->schema);
  s->name = strdup(t->name ? t->name : "?");
  s->family = t->family;
  s->schema = NULL;
  s->schema_len = 0;
  if (t->schema_len && (s->schema = malloc(t->schema_len)) != NULL) {
    memcpy(s->schema, t->schema, t->schema_len);
    s->schema_len = t->schema_len;
  }
  s->schema_hash = XXH3_64bits(s->schema, s->schema_len);
}

static const char *basename_of(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* Copy a site with its strings into one allocation, C++ symbols demangled
 * beside them (st_frame.pretty), and make a label from the innermost frame
 * that has a symbol (the hook's caller is often generated code, so show the
 * first two), demangled. */
static void add_site(scan_file *f, const st_site *st) {
  if (!id_plausible(f, st->id) || grow((void **)&f->sites, &f->nsites, st->id, sizeof *f->sites))
    return;
  scan_site *s = &f->sites[st->id];
  free(s->strings);
  free(s->label);
  size_t need = 1;
  uint32_t nf = st->nframes > ST_MAX_FRAMES ? ST_MAX_FRAMES : st->nframes;
  char pretty[ST_MAX_FRAMES][256], named[ST_MAX_FRAMES][256];
  const char *sym[ST_MAX_FRAMES];
  uint64_t sym_off[ST_MAX_FRAMES];
  for (uint32_t i = 0; i < nf; i++) {
    /* a frame dladdr left unnamed (the program's own functions, which it
     * does not export) is named from the file's symbol table, if it has
     * one and has not changed since the recording */
    sym[i] = st->frames[i].symbol;
    sym_off[i] = st->frames[i].sym_offset;
    if (!sym[i][0] &&
        cli_elf_name_frame(st->frames[i].module, f->h.start_realtime_ns / 1000000000ull,
                           st->frames[i].offset, named[i], sizeof named[i], &sym_off[i]))
      sym[i] = named[i];
    cli_demangle(sym[i], pretty[i], sizeof pretty[i]);
    need += strlen(st->frames[i].module) + strlen(sym[i]) + strlen(pretty[i]) + 3;
  }
  s->strings = malloc(need);
  s->site = *st;
  s->site.nframes = nf;
  char *p = s->strings;
  for (uint32_t i = 0; p && i < nf; i++) {
    size_t a = strlen(st->frames[i].module) + 1, b = strlen(sym[i]) + 1;
    size_t c = strlen(pretty[i]) + 1;
    memcpy(p, st->frames[i].module, a);
    s->site.frames[i].module = p;
    p += a;
    memcpy(p, sym[i], b);
    s->site.frames[i].symbol = p;
    s->site.frames[i].sym_offset = sym_off[i];
    p += b;
    memcpy(p, pretty[i], c);
    s->site.frames[i].pretty = c > 1 ? p : NULL;
    p += c;
  }
  char label[512] = "";
  size_t o = 0;
  for (uint32_t i = 0; i < nf && i < 2 && o < sizeof label; i++) {
    const st_frame *fr = &s->site.frames[i];
    if (fr->symbol[0])
      o += (size_t)snprintf(label + o, sizeof label - o, "%s%s+0x%llx", i ? " < " : "",
                            fr->pretty ? fr->pretty : fr->symbol,
                            (unsigned long long)fr->sym_offset);
    else
      o += (size_t)snprintf(label + o, sizeof label - o, "%s%s+0x%llx", i ? " < " : "",
                            basename_of(fr->module[0] ? fr->module : "?"),
                            (unsigned long long)fr->offset);
  }
  s->label = strdup(label);
}

static void on_note(scan_file *f, const st_note *n) {
  if (!strcmp(n->key, "end_mono_ns"))
    f->end_mono_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "place_miss_ns")) {
    /* a trace is untrusted: no line takes a millisecond */
    uint64_t v = strtoull(n->value, NULL, 10);
    f->place_miss_ns = v <= 1000000 ? v : 0;
  } else if (!strcmp(n->key, "calls_left_by_longjmp"))
    f->calls_left = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "calls_without_ring"))
    f->calls_no_ring = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "recording_stopped"))
    f->stopped_seccomp = !strcmp(n->value, "seccomp");
  else if (!strcmp(n->key, "ended_by_signal"))
    f->end_signal = (int)strtol(n->value, NULL, 10);
  else if (!strcmp(n->key, "latency_correction_timer_ns"))
    f->corr_timer_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "latency_correction_nested_ns"))
    f->corr_nested_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "retimed"))
    snprintf(f->retimed, sizeof f->retimed, "%s", n->value);
  else if (!strcmp(n->key, "writer_priority"))
    f->writer_normal = !strcmp(n->value, "normal");
  else if (!strcmp(n->key, "record_overhead_ns"))
    f->overhead_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "writer_cpu_ns"))
    f->writer_cpu_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "stacks_unwound")) {
    f->stacks_unwound = strtoull(n->value, NULL, 10);
    f->has_stacks_unwound = 1;
  } else if (!strcmp(n->key, "ring_waits"))
    f->ring_waits = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "ring_wait_ns"))
    f->ring_wait_ns = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "ring_bytes"))
    f->ring_bytes = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "payload_backlog_peak_bytes"))
    f->backlog_peak = strtoull(n->value, NULL, 10);
  else if (!strcmp(n->key, "payload_backlog_max_bytes"))
    f->backlog_max = strtoull(n->value, NULL, 10);
}

/* A process killed between creating its file and writing the header (one
 * write) leaves a file shorter than its header: no calls, and no damage. */
static void killed_at_creation(scan_file *f, const char *path) {
  const char *base = strrchr(path, '/');
  f->h.pid = (uint32_t)strtoul(base ? base + 1 : path, NULL, 10);
  f->h.clock = f->h.host = f->h.exe = f->h.tool_version = "";
  f->status.error = ST_E_TRUNCATED;
  f->created_only = 1;
}

/* A trace whose process started before the recording did (run.info: the
 * time record wrote it, less the run's wall time) is not of this
 * recording: a file copied in from another one, whose calls were analysed
 * with these, span and overlap included, without a word. Said once a
 * file, whichever command reads it how many times. */
/* When the recorded run began (realtime ns), from dir's run.info: the time
 * record wrote it less the run's wall time; 0 when it does not say. Read
 * once a directory, not once a trace file and pass. */
static unsigned long long run_began(const char *dir) {
  static char cached[4096];
  static unsigned long long began;
  if (cached[0] && !strcmp(cached, dir))
    return began;
  snprintf(cached, sizeof cached, "%s", dir);
  const char *t = cli_runinfo_get(dir, "time");
  long long end_s = t ? strtoll(t, NULL, 10) : 0;
  const char *w = cli_runinfo_get(dir, "wall_ns");
  unsigned long long wall = w ? strtoull(w, NULL, 10) : 0;
  /* time is whole seconds, and a clock may be stepped: a second of slack
   * each way, and a run longer than a day's wall is not trusted */
  began = end_s > 0 ? (unsigned long long)end_s * 1000000000ull : 0;
  began = began && wall <= 86400ull * 1000000000ull && wall < began ? began - wall : 0;
  return began;
}

static void check_of_this_run(const scan_file *f, const char *path) {
  const char *slash = strrchr(path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  unsigned long long began = run_began(dir);
  if (!began || !f->h.start_realtime_ns || f->h.start_realtime_ns + 2000000000ull >= began)
    return;
  static uint64_t said[64];
  static unsigned nsaid;
  uint64_t key = XXH3_64bits(path, strlen(path));
  for (unsigned i = 0; i < nsaid && i < 64; i++)
    if (said[i] == key)
      return;
  if (nsaid < 64)
    said[nsaid] = key;
  if (nsaid++ >= 10) {
    if (nsaid == 12)
      cli_warn("(more traces of other recordings: not listed)");
    return;
  }
  cli_warn("%s is not of this recording: its process started %.0f s before 'standin record' "
           "ran the program (run.info), so it was copied in from another; its calls are "
           "counted with this recording's: move it out",
           path, (double)(began - f->h.start_realtime_ns) / 1e9);
}

int scan_run(scan_file *f, const char *path, scan_call_fn fn, void *arg) {
  memset(f, 0, sizeof *f);
  f->path = path;
  int rc = st_reader_open(&f->r, path);
  if (rc == ST_E_TRUNCATED) {
    killed_at_creation(f, path);
    return 0;
  }
  if (rc != ST_OK && cli_reader_open(&f->r, path) != 0) /* reopens to say why */
    return -1;
  f->h = *st_reader_header(f->r);
  check_of_this_run(f, path);
  st_record rec;
  while ((rc = st_reader_next(f->r, &rec)) == ST_OK) {
    switch (rec.kind) {
    case ST_REC_CALL: {
      const st_call *c = &rec.u.call;
      f->calls++;
      if (c->start_ns + c->latency_ns > f->last_call_end_ns)
        f->last_call_end_ns = c->start_ns + c->latency_ns;
      if (fn && fn(f, c, arg)) {
        st_reader_status(f->r, &f->status);
        return 0;
      }
      break;
    }
    case ST_REC_TYPE: add_type(f, &rec.u.type); break;
    case ST_REC_SITE: add_site(f, &rec.u.site); break;
    case ST_REC_THREAD: f->nthreads++; break;
    case ST_REC_BLOB:
      f->blobs++;
      f->blob_bytes += rec.u.blob.len;
      break;
    case ST_REC_NOTE: on_note(f, &rec.u.note); break;
    }
  }
  st_reader_status(f->r, &f->status);
  return 0;
}

void scan_close(scan_file *f) {
  for (uint32_t i = 0; i < f->ntypes; i++) {
    free(f->types[i].name);
    free(f->types[i].schema);
  }
  for (uint32_t i = 0; i < f->nsites; i++) {
    free(f->sites[i].label);
    free(f->sites[i].strings);
  }
  free(f->types);
  free(f->sites);
  st_reader_close(f->r);
  memset(f, 0, sizeof *f);
}

const char *scan_type_name(const scan_file *f, uint32_t id) {
  if (id == 0)
    return "-";
  return id < f->ntypes && f->types[id].name ? f->types[id].name : "?";
}

const char *scan_site_label(const scan_file *f, uint32_t id) {
  if (id == 0)
    return "-";
  return id < f->nsites && f->sites[id].label ? f->sites[id].label : "?";
}

uint64_t scan_run_ns(const scan_file *f, int *approx) {
  *approx = 0;
  if (f->end_mono_ns > f->h.start_mono_ns)
    return f->end_mono_ns - f->h.start_mono_ns;
  *approx = 1;
  return f->last_call_end_ns > f->h.start_mono_ns ? f->last_call_end_ns - f->h.start_mono_ns : 0;
}

static const char *chunks_read(char *buf, size_t cap, uint64_t n) {
  if (n == 0)
    return "no chunk was complete";
  snprintf(buf, cap, "%llu complete chunk%s read", (unsigned long long)n, n == 1 ? "" : "s");
  return buf;
}

/* A killed writer leaves the file without its end mark, or ends it inside
 * the chunk it was writing: both lose the calls not yet flushed (the
 * writer flushes at least every 100 ms), neither is damage. A writer that
 * stopped at a full disk or ulimit -f also ends inside a chunk, and loses
 * every call after it: "at most the last ~100 ms" said of such a file
 * understated the loss. */
void scan_status_text(const scan_file *f, char *buf, size_t cap) {
  const st_read_status *s = &f->status;
  char b[32], n[48];
  if (f->created_only)
    snprintf(buf, cap, "not closed (killed while creating the file): no calls");
  else if (s->error == ST_E_TRUNCATED)
    snprintf(
        buf, cap,
        "not closed (killed while writing, a full disk or ulimit -f): %s; the unfinished chunk "
        "(%s) is lost, and the calls after it: the last ~100 ms if the recorder was killed, "
        "every later one if the disk filled up or the file size limit was hit (the recorder "
        "said so when it happened)",
        chunks_read(n, sizeof n, s->chunks),
        cli_fmt_bytes(b, sizeof b, (double)(s->file_bytes - s->good_bytes)));
  else if (s->error)
    /* checksums are per chunk: the damage is somewhere in the chunk that
     * starts there */
    snprintf(buf, cap, "damaged in the chunk at byte %llu (%s): %s, %s after it lost",
             (unsigned long long)s->error_offset, st_strerror(s->error),
             chunks_read(n, sizeof n, s->chunks),
             cli_fmt_bytes(b, sizeof b, (double)(s->file_bytes - s->good_bytes)));
  else if (!s->clean)
    snprintf(buf, cap,
             "not closed (killed, or still running): %s; the calls not yet flushed (at most the "
             "last ~100 ms) are lost",
             chunks_read(n, sizeof n, s->chunks));
  else if (f->calls_no_ring)
    snprintf(buf, cap,
             "closed, but %s call%s of threads whose ring could not be mapped (an "
             "address-space limit) %s not recorded",
             cli_fmt_count(n, sizeof n, f->calls_no_ring), f->calls_no_ring == 1 ? "" : "s",
             f->calls_no_ring == 1 ? "was" : "were");
  else if (f->stopped_seccomp)
    snprintf(buf, cap,
             "complete up to the seccomp filter the process installed: the calls it made "
             "after that were not recorded");
  else if (f->end_signal > 0 && f->end_signal < 65)
    snprintf(buf, cap, "complete; the program then died of signal %d (%s)", f->end_signal,
             strsignal(f->end_signal));
  else
    snprintf(buf, cap, "complete");
}

int scan_damaged(const scan_file *f) {
  return f->status.error != ST_OK && f->status.error != ST_E_TRUNCATED;
}

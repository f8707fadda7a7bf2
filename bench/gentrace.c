/* gentrace — write standin traces without running a program, through the
 * trace library's writer: large synthetic ones for `make bench`, small
 * exact ones for the analysis tests.
 *
 *   gentrace -o DIR -n CALLS [-t THREADS] [--seed S]
 *       DIR/1000.trace: CALLS protobuf calls over THREADS threads (default
 *       4), 8 message types, 16 call sites, request sizes 16 B..64 KiB,
 *       latencies 200 ns..50 us; each thread's calls written in batches of
 *       1000, as the recorder's writer drains one thread at a time.
 *
 *   gentrace -o DIR --spec FILE
 *       exactly the processes, threads, types, sites and calls FILE lists:
 *
 *       process PID [ppid=N] [exec=N] [start=NS] [end=NS] [overhead=NS]
 *               [miss=NS]               (a new file; end= writes the
 *                                       end_mono_ns note, overhead= the
 *                                       record_overhead_ns one, miss= the
 *                                       place_miss_ns one)
 *       thread INDEX [parent=N]
 *       type ID NAME
 *       site ID SYMBOL [MODULE]
 *       call thread=T api=API type=ID site=ID start=NS lat=NS [req=B]
 *            [resp=B] [size=B] [fault=NS] [out=B] [cold=PERMILLE]
 *            [flags=failed|not_offloadable|no_response]
 *       runinfo wall_ns=NS               (DIR/run.info, as `standin record`)
 *
 *       API is pb.pack, pb.size, pb.pack_to_buffer, pb.unpack, jpeg.decode
 *       or tj.decode; size= is the encoded_size feature (the request size a
 *       plan's size= selector compares for message trees), fault= a protobuf
 *       call's fault_ns (its page faults' time), out= and cold= a JPEG
 *       decode's out_bytes and out_cold_permille. '#' starts a
 *       comment. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trace.h"

static const char *const argv0[] = {"gentrace"};

static int die(const char *what, int rc) {
  fprintf(stderr, "gentrace: %s: %s\n", what, rc ? st_strerror(rc) : strerror(errno));
  exit(1);
}

static st_writer *open_trace(const char *dir, uint32_t pid, uint32_t ppid, uint32_t exec_seq,
                             uint64_t start) {
  char path[4096];
  if (exec_seq)
    snprintf(path, sizeof path, "%s/%u.%u.trace", dir, pid, exec_seq);
  else
    snprintf(path, sizeof path, "%s/%u.trace", dir, pid);
  st_header h = {.pid = pid,
                 .ppid = ppid,
                 .exec_seq = exec_seq,
                 .start_realtime_ns = start,
                 .start_mono_ns = start,
                 .clock = "CLOCK_MONOTONIC",
                 .host = "gentrace",
                 .exe = "/gentrace",
                 .tool_version = "gentrace",
                 .argc = 1,
                 .argv = argv0};
  st_writer *w;
  int rc = st_writer_open(&w, path, &h);
  if (rc)
    die(path, rc);
  return w;
}

static void add_note_u64(st_writer *w, const char *key, uint64_t v) {
  char s[32];
  snprintf(s, sizeof s, "%llu", (unsigned long long)v);
  st_note n = {key, s};
  st_writer_add_note(w, &n);
}

static void close_trace(st_writer *w, uint64_t end, uint64_t overhead, uint64_t miss) {
  if (end)
    add_note_u64(w, "end_mono_ns", end);
  if (overhead)
    add_note_u64(w, "record_overhead_ns", overhead);
  if (miss)
    add_note_u64(w, "place_miss_ns", miss);
  int rc = st_writer_close(w);
  if (rc)
    die("close", rc);
}

/* ---- synthetic ------------------------------------------------------------- */

static uint64_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

/* Log-uniform in [lo, hi). */
static uint64_t log_uniform(uint64_t *s, double lo, double hi) {
  double u = (double)(rnd(s) & 0xffffff) / 16777216.0;
  double v = lo * exp(u * log(hi / lo));
  return (uint64_t)v;
}

static void declare(st_writer *w, int threads) {
  for (uint32_t i = 1; i <= 8; i++) {
    char name[32];
    snprintf(name, sizeof name, "bench.Msg%u", i);
    st_type t = {.id = i, .family = ST_FAMILY_PROTOBUF, .name = name};
    st_writer_add_type(w, &t);
  }
  for (uint32_t i = 1; i <= 16; i++) {
    char sym[32];
    snprintf(sym, sizeof sym, "handler_%u", i);
    st_site s = {.id = i, .nframes = 1};
    s.frames[0] = (st_frame){.ip = 0x1000 + i,
                             .offset = 0x1000 + i,
                             .module = "/bench/app",
                             .symbol = sym,
                             .sym_offset = i};
    st_writer_add_site(w, &s);
  }
  for (int t = 0; t < threads; t++) {
    st_thread th = {.index = (uint32_t)t, .os_tid = 1000 + (uint32_t)t, .parent = 0, .name = ""};
    st_writer_add_thread(w, &th);
  }
}

static int synthetic(const char *dir, uint64_t n, int threads, uint64_t seed) {
  const uint64_t base = 1000000000ull;
  st_writer *w = open_trace(dir, 1000, 1, 0, base);
  declare(w, threads);
  uint64_t *now = calloc((size_t)threads, sizeof *now), *seq = calloc((size_t)threads, 8);
  uint64_t s = seed * 2654435761u + 1, written = 0, last_end = base;
  static const uint8_t apis[] = {ST_API_PB_PACK, ST_API_PB_UNPACK, ST_API_PB_SIZE,
                                 ST_API_PB_PACK_BUF};
  for (int t = 0; t < threads; t++)
    now[t] = base + 1000 * (uint64_t)t;
  while (written < n) {
    for (int t = 0; t < threads && written < n; t++)
      for (int b = 0; b < 1000 && written < n; b++, written++) {
        st_call c = {.api = apis[rnd(&s) % 4],
                     .thread = (uint32_t)t,
                     .type = 1 + (uint32_t)(rnd(&s) % 8),
                     .site = 1 + (uint32_t)(rnd(&s) % 16),
                     .seq = written,
                     .nfeat = ST_PBF_NFEAT};
        uint64_t size = log_uniform(&s, 16, 65536);
        now[t] += rnd(&s) % 2000;
        c.start_ns = now[t];
        c.latency_ns = log_uniform(&s, 200, 50000);
        now[t] += c.latency_ns;
        uint64_t fpk = rnd(&s) % 1024;
        memcpy(c.fp, &fpk, 8);
        c.feat[ST_PBF_ENCODED_SIZE] = size;
        c.feat[ST_PBF_FIELDS] = 1 + size / 64;
        c.feat[ST_PBF_SUBMSGS] = size / 512;
        c.feat[ST_PBF_MAX_DEPTH] = 1 + size / 8192;
        c.feat[ST_PBF_VAR_BYTES] = size / 2;
        c.feat[ST_PBF_FIELD_WORDS] = 1 + size / 512;
        c.req_len = c.api == ST_API_PB_UNPACK ? size : 0;
        c.resp_len = c.api == ST_API_PB_PACK || c.api == ST_API_PB_PACK_BUF ? size : 0;
        c.result = size;
        int rc = st_writer_add_call(w, &c);
        if (rc)
          die("add call", rc);
        if (now[t] > last_end)
          last_end = now[t];
        seq[t]++;
      }
  }
  close_trace(w, last_end + 1000, 0, 0);
  free(now);
  free(seq);
  return 0;
}

/* ---- from a spec ----------------------------------------------------------- */

static int api_code(const char *s) {
  static const struct {
    const char *n;
    int api;
  } t[] = {{"pb.pack", ST_API_PB_PACK},
           {"pb.size", ST_API_PB_SIZE},
           {"pb.pack_to_buffer", ST_API_PB_PACK_BUF},
           {"pb.unpack", ST_API_PB_UNPACK},
           {"jpeg.decode", ST_API_JPEG_DECODE},
           {"tj.decode", ST_API_TJ_DECODE}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(s, t[i].n))
      return t[i].api;
  return -1;
}

/* Value of key=... among the words, or dflt. */
static const char *kv(char **w, int n, const char *key, const char *dflt) {
  size_t kl = strlen(key);
  for (int i = 0; i < n; i++)
    if (!strncmp(w[i], key, kl) && w[i][kl] == '=')
      return w[i] + kl + 1;
  return dflt;
}

static uint64_t num(char **w, int n, const char *key, uint64_t dflt) {
  const char *v = kv(w, n, key, NULL);
  return v ? strtoull(v, NULL, 10) : dflt;
}

typedef struct {
  const char *dir;
  st_writer *w;
  uint64_t end, overhead, miss, seq;
  int line;
} spec_state;

static void spec_call(spec_state *st, char **w, int n) {
  st_call c = {0};
  int api = api_code(kv(w, n, "api", ""));
  if (api < 0) {
    fprintf(stderr, "gentrace: line %d: bad api\n", st->line);
    exit(1);
  }
  c.api = (uint8_t)api;
  c.thread = (uint32_t)num(w, n, "thread", 0);
  c.type = (uint32_t)num(w, n, "type", 0);
  c.site = (uint32_t)num(w, n, "site", 0);
  c.seq = st->seq++;
  c.start_ns = num(w, n, "start", 0);
  c.latency_ns = num(w, n, "lat", 0);
  c.req_len = num(w, n, "req", 0);
  c.resp_len = num(w, n, "resp", 0);
  c.nfeat = st_api_family(api) == ST_FAMILY_PROTOBUF ? ST_PBF_NFEAT : ST_JPF_NFEAT;
  c.feat[0] = num(w, n, "size", c.req_len);
  if (st_api_family(api) == ST_FAMILY_PROTOBUF) {
    c.feat[ST_PBF_FAULT_NS] = num(w, n, "fault", 0);
  } else {
    c.feat[ST_JPF_OUT_BYTES] = num(w, n, "out", 0);
    c.feat[ST_JPF_OUT_COLD] = num(w, n, "cold", 0);
  }
  const char *fl = kv(w, n, "flags", "");
  c.flags = (uint8_t)((strstr(fl, "failed") ? ST_CALL_FAILED : 0) |
                      (strstr(fl, "not_offloadable") ? ST_CALL_NOT_OFFLOADABLE : 0) |
                      (strstr(fl, "no_response") ? ST_CALL_NO_RESPONSE : 0));
  memcpy(c.fp, &c.seq, sizeof c.seq);
  int rc = st_writer_add_call(st->w, &c);
  if (rc)
    die("add call", rc);
}

static void spec_line(spec_state *st, char **w, int n) {
  if (!strcmp(w[0], "process")) {
    if (st->w)
      close_trace(st->w, st->end, st->overhead, st->miss);
    uint32_t pid = (uint32_t)strtoul(w[1], NULL, 10);
    st->w = open_trace(st->dir, pid, (uint32_t)num(w, n, "ppid", 1), (uint32_t)num(w, n, "exec", 0),
                       num(w, n, "start", 1000000000ull));
    st->end = num(w, n, "end", 0);
    st->overhead = num(w, n, "overhead", 0);
    st->miss = num(w, n, "miss", 0);
    st->seq = 0;
  } else if (!strcmp(w[0], "thread") && st->w) {
    st_thread t = {.index = (uint32_t)strtoul(w[1], NULL, 10),
                   .os_tid = 1,
                   .parent = (uint32_t)num(w, n, "parent", 0),
                   .name = ""};
    st_writer_add_thread(st->w, &t);
  } else if (!strcmp(w[0], "type") && st->w && n >= 3) {
    st_type t = {
        .id = (uint32_t)strtoul(w[1], NULL, 10), .family = ST_FAMILY_PROTOBUF, .name = w[2]};
    st_writer_add_type(st->w, &t);
  } else if (!strcmp(w[0], "site") && st->w && n >= 3) {
    st_site s = {.id = (uint32_t)strtoul(w[1], NULL, 10), .nframes = 1};
    s.frames[0] = (st_frame){.ip = 0x1000,
                             .offset = 0x1000,
                             .module = n > 3 ? w[3] : "/app",
                             .symbol = w[2],
                             .sym_offset = 0x10};
    st_writer_add_site(st->w, &s);
  } else if (!strcmp(w[0], "call") && st->w) {
    spec_call(st, w, n);
  } else if (!strcmp(w[0], "runinfo")) {
    char path[4096];
    snprintf(path, sizeof path, "%s/run.info", st->dir);
    FILE *f = fopen(path, "w");
    if (!f)
      die(path, 0);
    fprintf(f, "tool=gentrace\nwall_ns=%s\n", kv(w, n, "wall_ns", "0"));
    fclose(f);
  } else {
    fprintf(stderr, "gentrace: line %d: cannot use '%s' here\n", st->line, w[0]);
    exit(1);
  }
}

static int from_spec(const char *dir, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    die(path, 0);
  spec_state st = {.dir = dir};
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    st.line++;
    char *hash = strchr(line, '#'), *w[64], *save = NULL;
    int n = 0;
    if (hash)
      *hash = 0;
    for (char *t = strtok_r(line, " \t\r\n", &save); t && n < 64;
         t = strtok_r(NULL, " \t\r\n", &save))
      w[n++] = t;
    if (n)
      spec_line(&st, w, n);
  }
  fclose(f);
  if (st.w)
    close_trace(st.w, st.end, st.overhead, st.miss);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *spec = NULL;
  uint64_t n = 1000000, seed = 1;
  int threads = 4;
  for (int i = 1; i < argc; i++) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "-o") && next)
      dir = argv[++i];
    else if (!strcmp(argv[i], "-n") && next)
      n = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "-t") && next)
      threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && next)
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--spec") && next)
      spec = argv[++i];
    else
      dir = NULL, i = argc;
  }
  if (!dir || threads < 1 || threads > 1024) {
    fprintf(stderr, "usage: gentrace -o DIR [-n CALLS] [-t THREADS] [--seed S] | "
                    "gentrace -o DIR --spec FILE\n");
    return 2;
  }
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    die(dir, 0);
  return spec ? from_spec(dir, spec) : synthetic(dir, n, threads, seed);
}

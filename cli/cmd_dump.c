/* cmd_dump.c — `standin dump`: one line per recorded call. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pb_walk.h"
#include "scan.h"

static const char usage_text[] =
    "usage: standin dump [DIR] [--limit N] [--format text|json] [--payload]\n"
    "\n"
    "Prints every recorded call (default directory standin.data), one per line, in\n"
    "file order (by process, then as written). JSON lines carry every field,\n"
    "features by name and the call site's frames, under the trace's own names\n"
    "(req_len, resp_len, fp, flags); 'standin export --format json' is the\n"
    "versioned format for other tools.\n"
    "\n"
    "  -t, --trace DIR      the recording, as for replay (or DIR)\n"
    "  -n, --limit N        stop after N calls (0: no limit, the default)\n"
    "      --format F       text (default) or json\n"
    "      --payload        decode the protobuf message of each call whose message\n"
    "                       was kept: pack, pack_to_buffer and unpack, not\n"
    "                       get_packed_size (JSON lines; implies --format json)\n";

typedef struct {
  int json, payload;
  uint64_t limit, printed;
} dump_opts;

static void hex16(const uint8_t *fp, char *out) {
  for (int i = 0; i < 16; i++)
    sprintf(out + 2 * i, "%02x", fp[i]);
}

/* JSON string escaping for names that come from the trace. */
static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

/* s, or when it holds a control character (a module path with a newline
 * split the call's line) its escaped copy, allocated in *tmp. */
static const char *one_line(const char *s, char **tmp) {
  *tmp = NULL;
  const unsigned char *u = (const unsigned char *)s;
  while (*u >= 0x20 && *u != 0x7f)
    u++;
  if (!*u)
    return s;
  size_t cap = 4 * strlen(s) + 1;
  if (!(*tmp = malloc(cap)))
    return "?";
  return cli_escape_ctl(*tmp, cap, s);
}

static void print_text(scan_file *f, const st_call *c) {
  char fp[33], *t1, *t2;
  hex16(c->fp, fp);
  const char *type = one_line(scan_type_name(f, c->type), &t1);
  const char *site = one_line(scan_site_label(f, c->site), &t2);
  printf("%u %llu +%.6f t%u %s %s %lluns req=%llu resp=%llu site=%s fp=%.16s%s%s\n", f->h.pid,
         (unsigned long long)c->seq, (double)(c->start_ns - f->h.start_mono_ns) / 1e9, c->thread,
         st_api_name(c->api), type, (unsigned long long)c->latency_ns,
         (unsigned long long)c->req_len, (unsigned long long)c->resp_len, site, fp,
         c->flags & ST_CALL_FAILED ? " FAILED" : "",
         c->flags & ST_CALL_NOT_OFFLOADABLE ? " NOT-OFFLOADABLE" : "");
  free(t1);
  free(t2);
}

static void print_frames(const scan_file *f, uint32_t site) {
  printf(",\"frames\":[");
  if (site && site < f->nsites && f->sites[site].label) {
    const st_site *s = &f->sites[site].site;
    for (uint32_t i = 0; i < s->nframes; i++) {
      printf("%s{\"module\":", i ? "," : "");
      json_str(s->frames[i].module);
      printf(",\"offset\":%llu,\"symbol\":", (unsigned long long)s->frames[i].offset);
      json_str(s->frames[i].symbol);
      if (s->frames[i].pretty) {
        printf(",\"demangled\":");
        json_str(s->frames[i].pretty);
      }
      printf("}");
    }
  }
  printf("]");
}

/* The encoded message of a protobuf call: the response of pack, the
 * request of unpack. */
static void print_payload(scan_file *f, const st_call *c) {
  uint64_t blob = c->api == ST_API_PB_UNPACK ? c->req_blob
                  : (c->api == ST_API_PB_PACK || c->api == ST_API_PB_PACK_BUF) ? c->resp_blob
                                                                               : 0;
  if (!blob || c->type >= f->ntypes || !f->types[c->type].schema)
    return;
  const void *data;
  uint64_t len;
  if (st_reader_blob(f->r, blob, &data, &len) != ST_OK)
    return;
  char *json = NULL;
  const scan_type *t = &f->types[c->type];
  if (pbw_decode_json(t->schema, t->schema_len, data, len, &json) == PBW_OK)
    printf(",\"message\":%s", json);
  free(json);
}

static void print_json(scan_file *f, const st_call *c, const dump_opts *o) {
  char fp[33];
  hex16(c->fp, fp);
  printf("{\"pid\":%u,\"exec\":%u,\"seq\":%llu,\"start_ns\":%llu,\"thread\":%u,\"api\":\"%s\","
         "\"type\":",
         f->h.pid, f->h.exec_seq, (unsigned long long)c->seq,
         (unsigned long long)(c->start_ns - f->h.start_mono_ns), c->thread, st_api_name(c->api));
  json_str(scan_type_name(f, c->type));
  printf(",\"latency_ns\":%llu,\"req_len\":%llu,\"resp_len\":%llu,\"result\":%llu,\"flags\":%u,"
         "\"reason\":%u,\"fp\":\"%s\",\"features\":{",
         (unsigned long long)c->latency_ns, (unsigned long long)c->req_len,
         (unsigned long long)c->resp_len, (unsigned long long)c->result, c->flags, c->reason, fp);
  for (int i = 0; i < c->nfeat; i++) {
    const char *n = st_feature_name(c->api, i);
    printf("%s\"%s\":%llu", i ? "," : "", n ? n : "?", (unsigned long long)c->feat[i]);
  }
  printf("},\"site\":");
  json_str(scan_site_label(f, c->site));
  print_frames(f, c->site);
  if (o->payload)
    print_payload(f, c);
  printf("}\n");
}

static int on_call(scan_file *f, const st_call *c, void *arg) {
  dump_opts *o = arg;
  if (o->json)
    print_json(f, c, o);
  else
    print_text(f, c);
  return o->limit && ++o->printed >= o->limit;
}

static int parse(int argc, char **argv, dump_opts *o, const char **dir) {
  static const struct option lo[] = {{"limit", required_argument, 0, 'n'},
                                     {"format", required_argument, 0, 'F'},
                                     {"payload", no_argument, 0, 'p'},
                                     {"trace", required_argument, 0, 't'},
                                     {"help", no_argument, 0, 'h'},
                                     {0, 0, 0, 0}};
  const char *trace = NULL, *fmt = NULL;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "n:t:h", lo, NULL)) != -1) {
    char *end;
    switch (c) {
    case 'n':
      /* strtoull takes "-1" as 2^64 - 1: every call */
      errno = 0;
      o->limit = strtoull(optarg, &end, 10);
      if (*end || !*optarg || errno || strchr(optarg, '-')) {
        cli_err("--limit: '%s' is not a number of calls (0 or more; 0: no limit)", optarg);
        return -1;
      }
      break;
    case 'F':
      if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
        cli_err("--format: '%s' is not text or json", optarg);
        return -1;
      }
      o->json = !strcmp(optarg, "json");
      fmt = optarg;
      break;
    case 'p': o->payload = 1; break;
    case 't': trace = optarg; break;
    case 'h': fputs(usage_text, stdout); exit(0);
    default: fputs(usage_text, stderr); return -1;
    }
  }
  /* the decoded message is a JSON value: --payload alone means JSON lines */
  if (o->payload && fmt && !o->json) {
    cli_err("dump: --payload decodes each message into the JSON lines; use --format json "
            "(or leave --format out)");
    return -1;
  }
  if (o->payload)
    o->json = 1;
  return cli_trace_dir("dump", trace, argc, argv, dir);
}

int cmd_dump(int argc, char **argv) {
  dump_opts o = {0};
  const char *dir;
  if (parse(argc, argv, &o, &dir) != 0)
    return EXIT_USAGE;
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return 1;
  if (td.n == 0)
    cli_warn_no_trace(dir, "dump");
  int bad = 0;
  for (size_t i = 0; i < td.n && !(o.limit && o.printed >= o.limit); i++) {
    scan_file f;
    if (scan_run(&f, td.paths[i], on_call, &o) != 0) {
      bad = 1;
      continue;
    }
    if (f.status.error) {
      char st[512]; /* scan_status_text: a cut file's is ~300 bytes */
      scan_status_text(&f, st, sizeof st);
      cli_warn("%s: %s", td.paths[i], st);
      bad |= scan_damaged(&f);
    }
    scan_close(&f);
  }
  cli_tracedir_free(&td);
  return bad;
}

/* rpc — an RPC-style service loop over protobuf-c.
 *
 *   rpc [-n REQUESTS] [-t THREADS] [-w WORK] [-s SEED] [--sizes fleet|small|large] [-v]
 *
 * A client (the main thread, before the clock starts) encodes REQUESTS
 * requests whose sizes follow a realistic spread (--sizes, default the
 * reported fleet distribution: most messages tiny, a tail of large ones).
 * The server then hands them to THREADS workers through a queue
 * (THREADS = 1: the main thread serves them itself). A worker unpacks the
 * request, does WORK rounds of hashing over its payload (so the share of
 * time spent in protobuf can be turned down), builds a response and packs it
 * (get_packed_size + pack, every fourth with pack_to_buffer), then frees both.
 *
 * stdout is the same for a given seed whatever the thread count and
 * scheduling: counts, size histograms and an order-independent digest of the
 * packed responses (-v adds one line per request, in request order). The
 * wall time of the serving phase goes to stderr. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/pbwire.h"
#include "../common/workload.h"
#include "rpcsvc.pb-c.h"

typedef Workload__Rpc__Request Request;
typedef Workload__Rpc__Response Response;
typedef Workload__Rpc__Attr Attr;

enum { N_METHODS = 4, N_STATUS = 3, MAX_ATTRS = 8 };
static const char *const method_names[N_METHODS] = {"GET", "PUT", "SCAN", "ECHO"};
static const char *const status_names[N_STATUS] = {"OK", "NOT_FOUND", "INVALID"};

typedef struct {
  uint8_t *data;
  size_t len;
} wire;

/* What a worker leaves for request i; printed in request order. */
typedef struct {
  uint64_t hash; /* of the packed response */
  uint32_t len;
  uint8_t method, status, ok;
} result;

typedef struct {
  const wire *requests;
  result *results;
  unsigned work;
} server;

/* ---- client: deterministic requests -------------------------------------- */

static void random_text(uint64_t *s, char *out, size_t n) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789-_:/";
  for (size_t i = 0; i < n; i++)
    out[i] = alphabet[wl_below(s, sizeof alphabet - 1)];
  out[n] = 0;
}

static void random_bytes(uint64_t *s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n; i++)
    out[i] = (uint8_t)wl_rand(s);
}

/* Payloads and bodies look like what services carry (serialized records,
 * JSON, text), not incompressible noise: slices of a pool of words and
 * numbers, written once before any thread starts, so that making a
 * document costs a copy and no snprintf. */
enum { DOC_POOL = 1 << 16 };
static char doc_pool[DOC_POOL];

static void doc_pool_init(uint64_t seed) {
  static const char *const words[] = {"user",  "id",    "name",   "value",   "status", "ok",
                                      "items", "count", "price",  "region",  "eu-1",   "us-2",
                                      "true",  "false", "null",   "session", "cart",   "token",
                                      "query", "limit", "offset", "order",   "ts",     "score"};
  uint64_t s = seed;
  size_t i = 0;
  while (i < DOC_POOL) {
    char piece[24];
    int len = wl_chance(&s, 300)
                  ? snprintf(piece, sizeof piece, "%u", (unsigned)wl_below(&s, 100000))
                  : snprintf(piece, sizeof piece, "%s", words[wl_below(&s, 24)]);
    piece[len++] = " :,\"{}"[wl_below(&s, 6)];
    for (int k = 0; k < len && i < DOC_POOL; k++)
      doc_pool[i++] = piece[k];
  }
}

static void random_document(uint64_t *s, uint8_t *out, size_t n) {
  for (size_t i = 0; i < n;) {
    size_t len = (size_t)wl_range(s, 16, 256), at = (size_t)wl_below(s, DOC_POOL - 256);
    len = len < n - i ? len : n - i;
    memcpy(out + i, doc_pool + at, len);
    i += len;
  }
}

/* Storage for one request while it is being built. */
typedef struct {
  Request rq;
  Workload__Rpc__TraceContext trace;
  Attr attrs[MAX_ATTRS], *attrp[MAX_ATTRS];
  char key[32], attr_keys[MAX_ATTRS][16];
  uint8_t attr_values[MAX_ATTRS][16];
  uint8_t *payload;
} request_store;

static int pick_method(uint64_t *s) {
  unsigned u = (unsigned)wl_below(s, 100);
  return u < 50   ? WORKLOAD__RPC__METHOD__GET
         : u < 75 ? WORKLOAD__RPC__METHOD__PUT
         : u < 85 ? WORKLOAD__RPC__METHOD__SCAN
                  : WORKLOAD__RPC__METHOD__ECHO;
}

/* Every field but the payload; how many fields a request carries grows with
 * its target size, as in real traffic (a tiny GET has an id, a method and a
 * short key; a large PUT carries tracing and attributes too). */
static void fill_header(request_store *m, uint64_t *s, size_t i, uint32_t target,
                        const wl_size_dist *sizes) {
  Request *rq = &m->rq;
  workload__rpc__request__init(rq);
  rq->id = i + 1;
  rq->method = pick_method(s);
  size_t klen = target / 4 < 3 ? 3 : target / 4 > 24 ? 24 : target / 4;
  random_text(s, m->key, klen);
  rq->key = m->key;
  if (rq->method != WORKLOAD__RPC__METHOD__PUT) {
    uint32_t want = wl_size_draw(sizes, s);
    rq->reply_bytes = want > 16 ? want - 16 : 0;
  }
  if (target >= 48) {
    workload__rpc__trace_context__init(&m->trace);
    m->trace.trace_id = wl_rand(s);
    m->trace.span_id = wl_rand(s);
    m->trace.sampled = wl_chance(s, 100);
    rq->trace = &m->trace;
    rq->deadline_ms = (uint32_t)wl_range(s, 1, 1000);
  }
  if (target >= 128) {
    rq->n_attrs = target / 256 + 1 > MAX_ATTRS ? MAX_ATTRS : target / 256 + 1;
    for (size_t a = 0; a < rq->n_attrs; a++) {
      workload__rpc__attr__init(&m->attrs[a]);
      snprintf(m->attr_keys[a], sizeof m->attr_keys[a], "x-attr-%zu", a);
      m->attrs[a].key = m->attr_keys[a];
      m->attrs[a].value.len = (size_t)wl_range(s, 4, sizeof m->attr_values[a]);
      random_bytes(s, m->attr_values[a], m->attrs[a].value.len);
      m->attrs[a].value.data = m->attr_values[a];
      m->attrp[a] = &m->attrs[a];
    }
    rq->attrs = m->attrp;
  }
}

/* Encodes request i: the header fields, then a payload that brings the
 * encoded size to the drawn target (a tiny target may end up a few bytes
 * over: the header alone is that large). */
static wire make_request(uint64_t seed, size_t i, const wl_size_dist *sizes) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xd1b54a32d192ed03ull;
  uint32_t target = wl_size_draw(sizes, &s);
  request_store m;
  fill_header(&m, &s, i, target, sizes);
  size_t base = workload__rpc__request__get_packed_size(&m.rq);
  size_t room = target > base + 2 ? target - base - 1 : 0; /* 1: the tag */
  size_t plen = room > 0 ? room - wl_varint_size(room) : 0;
  m.payload = malloc(plen + 1);
  random_document(&s, m.payload, plen);
  m.rq.payload.data = plen ? m.payload : NULL;
  m.rq.payload.len = plen;
  wire w = {malloc(base + plen + 8), 0};
  w.len = workload__rpc__request__pack(&m.rq, w.data);
  free(m.payload);
  return w;
}

/* ---- server ---------------------------------------------------------------- */

/* The "business logic": one pass over everything the client sent, then WORK
 * more rounds over the payload, each with a fixed amount of mixing so even
 * an empty payload costs something. */
static uint64_t compute(const Request *rq, unsigned work) {
  uint64_t h = wl_hash(rq->key, strlen(rq->key), WL_FNV_INIT ^ rq->id);
  h = wl_hash(rq->payload.data, rq->payload.len, h);
  for (size_t a = 0; a < rq->n_attrs; a++)
    h = wl_hash(rq->attrs[a]->value.data, rq->attrs[a]->value.len, h);
  for (unsigned r = 0; r < work; r++) {
    h = wl_fnv(rq->payload.data, rq->payload.len, h);
    for (int k = 0; k < 64; k++)
      h = wl_rand(&h);
  }
  return h;
}

/* A few GETs miss; a deadline too short to meet is refused. */
static int pick_status(const Request *rq, uint64_t h) {
  if (rq->deadline_ms != 0 && rq->deadline_ms < 10)
    return WORKLOAD__RPC__STATUS__INVALID;
  if (rq->method == WORKLOAD__RPC__METHOD__GET && h % 16 == 0)
    return WORKLOAD__RPC__STATUS__NOT_FOUND;
  return WORKLOAD__RPC__STATUS__OK;
}

/* ECHO sends the payload back; the others make up a body from the digest. */
static void fill_body(const Request *rq, uint64_t h, uint8_t *body, size_t n) {
  size_t copied = 0;
  if (rq->method == WORKLOAD__RPC__METHOD__ECHO) {
    copied = rq->payload.len < n ? rq->payload.len : n;
    if (copied) /* an empty payload may have no data pointer */
      memcpy(body, rq->payload.data, copied);
  }
  random_document(&h, body + copied, n - copied);
}

static void serve_one(void *ctx, size_t i) {
  server *sv = ctx;
  const wire *w = &sv->requests[i];
  Request *rq = workload__rpc__request__unpack(NULL, w->len, w->data);
  if (!rq) {
    sv->results[i] = (result){0};
    return;
  }
  uint64_t h = compute(rq, sv->work);
  Response rs = WORKLOAD__RPC__RESPONSE__INIT;
  rs.id = rq->id;
  rs.status = pick_status(rq, h);
  rs.digest = h;
  rs.served_by_shard = (uint32_t)(h >> 58);
  rs.body.len = rs.status == WORKLOAD__RPC__STATUS__OK ? rq->reply_bytes : 0;
  rs.body.data = malloc(rs.body.len + 1);
  fill_body(rq, h, rs.body.data, rs.body.len);
  rs.n_attrs = rq->n_attrs < 2 ? rq->n_attrs : 2; /* echo the first attributes */
  rs.attrs = rq->attrs;
  /* every fourth response goes through pack_to_buffer */
  result r = {0};
  r.hash = pbwire_send(&rs.base, i % 4 == 3, &r.len);
  r.method = (uint8_t)rq->method;
  r.status = (uint8_t)rs.status;
  r.ok = 1;
  free(rs.body.data);
  workload__rpc__request__free_unpacked(rq, NULL);
  sv->results[i] = r;
}

/* ---- report ----------------------------------------------------------------- */

static void print_histogram(const char *what, const size_t *sizes, size_t n) {
  size_t bucket[3] = {0}, total = 0, max = 0;
  for (size_t i = 0; i < n; i++) {
    bucket[wl_size_bucket(sizes[i])]++;
    total += sizes[i];
    max = sizes[i] > max ? sizes[i] : max;
  }
  double pct = n ? 100.0 / (double)n : 0;
  printf("%-10s bytes %zu  <=32 %zu (%.1f%%)  <=512 %zu (%.1f%%)  >512 %zu  max %zu\n", what, total,
         bucket[0], bucket[0] * pct, bucket[0] + bucket[1], (bucket[0] + bucket[1]) * pct,
         bucket[2], max);
}

/* Returns the number of requests that failed to decode. */
static size_t report(const wire *rq, const result *res, size_t n, int verbose) {
  size_t *sizes = calloc(n ? n : 1, sizeof *sizes);
  size_t methods[N_METHODS] = {0}, status[N_STATUS] = {0}, failed = 0;
  uint64_t digest = 0;
  for (size_t i = 0; i < n; i++)
    sizes[i] = rq[i].len;
  print_histogram("requests", sizes, n);
  for (size_t i = 0; i < n; i++) {
    sizes[i] = res[i].len;
    failed += !res[i].ok;
    methods[res[i].method % N_METHODS] += res[i].ok;
    status[res[i].status % N_STATUS] += res[i].ok;
    uint64_t mixed = res[i].hash ^ i;
    digest += wl_rand(&mixed); /* a sum: independent of completion order */
  }
  print_histogram("responses", sizes, n);
  printf("methods   ");
  for (int m = 0; m < N_METHODS; m++)
    printf(" %s %zu", method_names[m], methods[m]);
  printf("\nstatus    ");
  for (int st = 0; st < N_STATUS; st++)
    printf(" %s %zu", status_names[st], status[st]);
  printf("\nfailed     %zu\ndigest     %016" PRIx64 "\n", failed, digest);
  for (size_t i = 0; verbose && i < n; i++)
    printf("req %zu %s size %zu -> %u %016" PRIx64 "\n", i, method_names[res[i].method % N_METHODS],
           rq[i].len, res[i].len, res[i].hash);
  free(sizes);
  return failed;
}

/* ---- main ------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: rpc [-n REQUESTS] [-t THREADS] [-w WORK] [-s SEED] [--sizes fleet|small|large] "
          "[-v]\n"
          "  -n, --requests N   requests to serve (default 100000)\n"
          "  -t, --threads N    worker threads; 1 serves on the main thread (default 4)\n"
          "  -w, --work N       extra hashing rounds over each payload (default 2)\n"
          "  -s, --seed N       request set (default 1)\n"
          "      --sizes NAME   request/response size distribution (default fleet)\n"
          "  -v, --verbose      one line per request, in request order\n");
}

typedef struct {
  size_t n;
  int threads, verbose;
  unsigned work;
  uint64_t seed;
  const wl_size_dist *sizes;
} options;

static int parse_options(int argc, char **argv, options *o) {
  static const struct option longopts[] = {
      {"requests", 1, 0, 'n'}, {"threads", 1, 0, 't'}, {"work", 1, 0, 'w'}, {"seed", 1, 0, 's'},
      {"sizes", 1, 0, 'z'},    {"verbose", 0, 0, 'v'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  *o = (options){100000, 4, 0, 2, 1, wl_size_dist_find("fleet")};
  int c;
  while ((c = getopt_long(argc, argv, "n:t:w:s:vh", longopts, NULL)) != -1) {
    switch (c) {
    case 'n': o->n = strtoul(optarg, NULL, 0); break;
    case 't': o->threads = atoi(optarg); break;
    case 'w': o->work = (unsigned)strtoul(optarg, NULL, 0); break;
    case 's': o->seed = strtoull(optarg, NULL, 0); break;
    case 'v': o->verbose = 1; break;
    case 'z':
      if (!(o->sizes = wl_size_dist_find(optarg))) {
        fprintf(stderr, "rpc: unknown size distribution '%s' (fleet, small, large)\n", optarg);
        return -1;
      }
      break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (optind < argc || o->threads < 1) {
    usage(stderr);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  options o;
  if (parse_options(argc, argv, &o) != 0)
    return 2;
  wire *rq = calloc(o.n ? o.n : 1, sizeof *rq);
  result *res = calloc(o.n ? o.n : 1, sizeof *res);
  uint64_t t0 = wl_now_ns();
  doc_pool_init(o.seed);
  for (size_t i = 0; i < o.n; i++)
    rq[i] = make_request(o.seed, i, o.sizes);
  uint64_t t1 = wl_now_ns();
  server sv = {rq, res, o.work};
  if (wl_pool_run(o.threads, o.n, serve_one, &sv) != 0) {
    fprintf(stderr, "rpc: cannot start worker threads\n");
    return 1;
  }
  uint64_t t2 = wl_now_ns();
  printf("rpc: %zu requests, seed %" PRIu64 ", sizes %s, work %u\n", o.n, o.seed, o.sizes->name,
         o.work);
  size_t failed = report(rq, res, o.n, o.verbose);
  fprintf(stderr,
          "rpc: served %zu requests on %d thread%s in %.3f s (%.0f req/s); generated in %.3f s\n",
          o.n, o.threads, o.threads > 1 ? "s" : "", (double)(t2 - t1) / 1e9,
          (double)o.n / ((double)(t2 - t1) / 1e9 + 1e-12), (double)(t1 - t0) / 1e9);
  for (size_t i = 0; i < o.n; i++)
    free(rq[i].data);
  free(rq);
  free(res);
  return failed ? 1 : 0;
}

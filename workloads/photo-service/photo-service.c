/* photo-service — a thumbnail service: protobuf-c and libjpeg in one program.
 *
 *   photo-service [-n REQUESTS] [-t THREADS] [-s SEED] [-e EDGE] DIR|FILE...
 *
 * A client (the main thread, before the clock starts) reads the JPEG files
 * (*.jpg / *.jpeg of each DIR, sorted) and encodes REQUESTS
 * ThumbnailRequest messages (photosvc.proto), each carrying one of the
 * files, picked by SEED, with a requested thumbnail edge (EDGE, or one of
 * 64..256 picked by SEED) and a reply kind (pixels or only a checksum).
 * THREADS workers (1: the main thread) take the requests from a queue,
 * unpack them, decode the JPEG from memory (jpeg_mem_src), box-filter it to
 * the requested size, and pack a ThumbnailResponse (get_packed_size + pack,
 * every fourth with pack_to_buffer).
 *
 * stdout: one line per request, in request order, then totals and a digest
 * of every packed response; the same whatever the thread count. Timing goes
 * to stderr. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/jpeg_files.h"
#include "../common/pbwire.h"
#include "../common/thumb.h"
#include "../common/workload.h"
#include "photosvc.pb-c.h"

typedef Workload__Photo__ThumbnailRequest Request;
typedef Workload__Photo__ThumbnailResponse Response;

typedef struct {
  uint8_t *data;
  size_t len;
} blob;

/* What a worker leaves for request i; printed in request order. */
typedef struct {
  uint64_t hash; /* of the packed response */
  uint32_t len, src_w, src_h, w, h;
  int ok, status;
} result;

typedef struct {
  const blob *requests;
  result *results;
} server;

/* ---- client ------------------------------------------------------------- */

/* Reads a whole file; returns 0, or -1 (and says why). */
static int read_file(const char *path, blob *out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  size_t cap = 1 << 16, n = 0, got;
  uint8_t *buf = malloc(cap);
  while ((got = fread(buf + n, 1, cap - n, f)) > 0)
    if ((n += got) == cap)
      buf = realloc(buf, cap *= 2);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    perror(path);
    free(buf);
    return -1;
  }
  *out = (blob){buf, n};
  return 0;
}

static blob make_request(const jpeg_files *files, const blob *jpegs, uint64_t seed, size_t i,
                         unsigned edge) {
  static const unsigned edges[] = {64, 96, 128, 160, 256};
  uint64_t s = seed * 0x9e3779b97f4a7c15ull ^ (i + 1) * 0xd1b54a32d192ed03ull;
  size_t f = (size_t)wl_below(&s, files->n);
  char client[32];
  Request rq = WORKLOAD__PHOTO__THUMBNAIL_REQUEST__INIT;
  rq.id = 1000 + i;
  rq.jpeg.data = jpegs[f].data;
  rq.jpeg.len = jpegs[f].len;
  rq.has_max_edge = 1;
  rq.max_edge = edge ? edge : edges[wl_below(&s, sizeof edges / sizeof *edges)];
  if (wl_chance(&s, 333)) {
    rq.has_reply = 1;
    rq.reply = WORKLOAD__PHOTO__REPLY__CHECKSUM;
  }
  rq.name = (char *)jpeg_files_base(files->paths[f]);
  snprintf(client, sizeof client, "client-%u", (unsigned)wl_below(&s, 16));
  rq.client = client;
  blob b = {malloc(workload__photo__thumbnail_request__get_packed_size(&rq)), 0};
  b.len = workload__photo__thumbnail_request__pack(&rq, b.data);
  return b;
}

/* ---- server ------------------------------------------------------------- */

static void fill_ok(Response *rs, const Request *rq, const thumb *t) {
  rs->status = WORKLOAD__PHOTO__STATUS__OK;
  rs->has_width = rs->has_height = rs->has_channels = 1;
  rs->width = t->w;
  rs->height = t->h;
  rs->channels = t->channels;
  rs->has_source_width = rs->has_source_height = 1;
  rs->source_width = t->src_w;
  rs->source_height = t->src_h;
  if (rq->reply == WORKLOAD__PHOTO__REPLY__PIXELS) {
    rs->has_pixels = 1;
    rs->pixels.data = t->pixels;
    rs->pixels.len = (size_t)t->w * t->h * t->channels;
  } else {
    rs->has_checksum = 1;
    rs->checksum = thumb_checksum(t);
  }
}

static void serve_one(void *ctx, size_t i) {
  server *sv = ctx;
  Request *rq =
      workload__photo__thumbnail_request__unpack(NULL, sv->requests[i].len, sv->requests[i].data);
  if (!rq) {
    sv->results[i] = (result){0};
    return;
  }
  Response rs = WORKLOAD__PHOTO__THUMBNAIL_RESPONSE__INIT;
  rs.id = rq->id;
  thumb t;
  char err[JMSG_LENGTH_MAX];
  if (thumb_decode(rq->jpeg.data, rq->jpeg.len, NULL, rq->max_edge, &t, err, sizeof err) == 0) {
    fill_ok(&rs, rq, &t);
  } else {
    rs.status = WORKLOAD__PHOTO__STATUS__BAD_IMAGE;
    rs.error = err;
  }
  result r = {0};
  r.hash = pbwire_send(&rs.base, i % 4 == 3, &r.len);
  r.ok = 1;
  r.status = rs.status;
  r.src_w = rs.source_width;
  r.src_h = rs.source_height;
  r.w = rs.width;
  r.h = rs.height;
  free(t.pixels);
  workload__photo__thumbnail_request__free_unpacked(rq, NULL);
  sv->results[i] = r;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f, "usage: photo-service [-n REQUESTS] [-t THREADS] [-s SEED] [-e EDGE] DIR|FILE...\n"
             "  -n, --requests N  requests to serve (default 200)\n"
             "  -t, --threads N   worker threads; 1 serves on the main thread (default 4)\n"
             "  -s, --seed N      which files, sizes and reply kinds are asked for (default 1)\n"
             "  -e, --edge N      thumbnail edge for every request (default: 64..256 by seed)\n");
}

typedef struct {
  size_t n;
  int threads;
  unsigned edge;
  uint64_t seed;
} options;

static int parse_options(int argc, char **argv, options *o) {
  static const struct option longopts[] = {{"requests", 1, 0, 'n'}, {"threads", 1, 0, 't'},
                                           {"seed", 1, 0, 's'},     {"edge", 1, 0, 'e'},
                                           {"help", 0, 0, 'h'},     {0, 0, 0, 0}};
  *o = (options){200, 4, 0, 1};
  int c;
  while ((c = getopt_long(argc, argv, "n:t:s:e:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'n': o->n = strtoul(optarg, NULL, 0); break;
    case 't': o->threads = atoi(optarg); break;
    case 's': o->seed = strtoull(optarg, NULL, 0); break;
    case 'e': o->edge = (unsigned)strtoul(optarg, NULL, 0); break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (optind >= argc || o->threads < 1 || (o->edge && o->edge < 8)) {
    usage(stderr);
    return -1;
  }
  return 0;
}

/* Prints one line per request and the totals; returns the failures. */
static size_t report(const blob *rq, const result *res, size_t n) {
  size_t failed = 0, bad_images = 0, bytes_in = 0, bytes_out = 0;
  uint64_t digest = WL_FNV_INIT;
  for (size_t i = 0; i < n; i++) {
    const result *r = &res[i];
    printf("req %zu size %zu: %ux%u -> %ux%u status %d resp %u %016" PRIx64 "\n", i, rq[i].len,
           r->src_w, r->src_h, r->w, r->h, r->status, r->len, r->hash);
    failed += !r->ok;
    bad_images += r->ok && r->status != WORKLOAD__PHOTO__STATUS__OK;
    bytes_in += rq[i].len;
    bytes_out += r->len;
    digest = wl_fnv(&r->hash, sizeof r->hash, digest);
  }
  printf("requests %zu bytes %zu; responses bytes %zu; bad images %zu; failed %zu\n"
         "digest %016" PRIx64 "\n",
         n, bytes_in, bytes_out, bad_images, failed, digest);
  return failed;
}

int main(int argc, char **argv) {
  options o;
  jpeg_files files = {0};
  if (parse_options(argc, argv, &o) != 0)
    return 2;
  if (jpeg_files_collect(&files, argc - optind, argv + optind, "photo-service") != 0)
    return 1;
  blob *jpegs = calloc(files.n, sizeof *jpegs);
  for (size_t f = 0; f < files.n; f++)
    if (read_file(files.paths[f], &jpegs[f]) != 0)
      return 1;
  blob *rq = calloc(o.n ? o.n : 1, sizeof *rq);
  result *res = calloc(o.n ? o.n : 1, sizeof *res);
  for (size_t i = 0; i < o.n; i++)
    rq[i] = make_request(&files, jpegs, o.seed, i, o.edge);
  server sv = {rq, res};
  uint64_t t0 = wl_now_ns();
  if (wl_pool_run(o.threads, o.n, serve_one, &sv) != 0) {
    fprintf(stderr, "photo-service: cannot start worker threads\n");
    return 1;
  }
  double secs = (double)(wl_now_ns() - t0) / 1e9;
  size_t failed = report(rq, res, o.n);
  fprintf(stderr, "photo-service: served %zu requests on %d thread%s in %.3f s (%.0f req/s)\n", o.n,
          o.threads, o.threads > 1 ? "s" : "", secs, (double)o.n / (secs + 1e-12));
  for (size_t i = 0; i < o.n; i++)
    free(rq[i].data);
  for (size_t f = 0; f < files.n; f++)
    free(jpegs[f].data);
  free(jpegs);
  free(rq);
  free(res);
  jpeg_files_free(&files);
  return failed ? 1 : 0;
}

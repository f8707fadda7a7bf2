/* thumbnailer — make thumbnails of a set of JPEG files with libjpeg.
 *
 *   thumbnailer [-j THREADS] [-s EDGE] [-o OUTDIR] [-r PASSES] DIR|FILE...
 *
 * Every *.jpg / *.jpeg in each DIR (and every FILE) is decoded with the
 * libjpeg API from a stdio source (jpeg_read_header, jpeg_start_decompress,
 * jpeg_read_scanlines, jpeg_finish_decompress) and box-filtered, scanline by
 * scanline, down to fit EDGE x EDGE (default 128). With -o the thumbnails
 * are written there as PPM (colour) or PGM (grey). -j THREADS decoder
 * threads take files from a queue (1, the default: the main thread decodes
 * them in order). -r decodes the whole set PASSES times (for timing).
 *
 * stdout has one line per file in sorted path order: size, sampling,
 * progressive or baseline, restart interval (in MCUs), thumbnail size and a
 * checksum of its pixels; the same whatever the thread count. A file that does not
 * decode gets an error line and the exit status is 1. Timing goes to
 * stderr. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/jpeg_files.h"
#include "../common/thumb.h"
#include "../common/workload.h"

typedef struct {
  const jpeg_files *files;
  unsigned edge;
  const char *outdir;
  char **lines;     /* per task */
  uint64_t *pixels; /* source pixels decoded, per task */
} job;

/* Writes t as binary PPM/PGM to OUTDIR/NAME.ppm or .pgm. Returns 0 or -1. */
static int write_thumb(const char *outdir, const char *name, const thumb *t) {
  if (t->channels != 1 && t->channels != 3)
    return 0; /* CMYK and the like: checksummed only */
  const char *dot = strrchr(name, '.');
  int stem = dot ? (int)(dot - name) : (int)strlen(name);
  char path[4096];
  snprintf(path, sizeof path, "%s/%.*s.%s", outdir, stem, name, t->channels == 1 ? "pgm" : "ppm");
  FILE *f = fopen(path, "wb");
  if (!f)
    return -1;
  fprintf(f, "P%d\n%u %u\n255\n", t->channels == 1 ? 5 : 6, t->w, t->h);
  size_t rows = fwrite(t->pixels, (size_t)t->w * t->channels, t->h, f);
  return fclose(f) == 0 && rows == t->h ? 0 : -1;
}

static void thumbnail_one(void *ctx, size_t task) {
  job *jb = ctx;
  const char *path = jb->files->paths[task % jb->files->n];
  const char *name = jpeg_files_base(path);
  char line[512], err[JMSG_LENGTH_MAX + 64];
  thumb t;
  FILE *f = fopen(path, "rb");
  int rc = -1;
  if (!f)
    snprintf(err, sizeof err, "cannot open: %s", strerror(errno));
  else {
    rc = thumb_decode(NULL, 0, f, jb->edge, &t, err, sizeof err);
    fclose(f);
  }
  if (rc == 0 && jb->outdir && write_thumb(jb->outdir, name, &t) != 0) {
    snprintf(err, sizeof err, "cannot write thumbnail to %s: %s", jb->outdir, strerror(errno));
    rc = -1;
    free(t.pixels);
  }
  if (rc != 0) {
    snprintf(line, sizeof line, "%s error: %s\n", name, err);
  } else {
    snprintf(line, sizeof line, "%s %ux%u %s %s rst%d -> %ux%u %016" PRIx64 "\n", name, t.src_w,
             t.src_h, t.sampling, t.progressive ? "prog" : "base", t.restart_interval, t.w, t.h,
             thumb_checksum(&t));
    jb->pixels[task] = (uint64_t)t.src_w * t.src_h;
    free(t.pixels);
  }
  jb->lines[task] = strdup(line);
}

static void usage(FILE *f) {
  fprintf(f, "usage: thumbnailer [-j THREADS] [-s EDGE] [-o OUTDIR] [-r PASSES] DIR|FILE...\n"
             "  -j, --threads N   decoder threads taking files from a queue (default 1)\n"
             "  -s, --size N      thumbnail fits N x N pixels (default 128, at least 8)\n"
             "  -o, --output DIR  write thumbnails there as PPM/PGM\n"
             "  -r, --passes N    decode the whole set N times (default 1)\n");
}

typedef struct {
  int threads;
  unsigned edge, passes;
  const char *outdir;
} options;

static int parse_options(int argc, char **argv, options *o) {
  static const struct option longopts[] = {{"threads", 1, 0, 'j'}, {"size", 1, 0, 's'},
                                           {"output", 1, 0, 'o'},  {"passes", 1, 0, 'r'},
                                           {"help", 0, 0, 'h'},    {0, 0, 0, 0}};
  *o = (options){1, 128, 1, NULL};
  int c;
  while ((c = getopt_long(argc, argv, "j:s:o:r:h", longopts, NULL)) != -1) {
    switch (c) {
    case 'j': o->threads = atoi(optarg); break;
    case 's': o->edge = (unsigned)strtoul(optarg, NULL, 0); break;
    case 'o': o->outdir = optarg; break;
    case 'r': o->passes = (unsigned)strtoul(optarg, NULL, 0); break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); return -1;
    }
  }
  if (optind >= argc || o->threads < 1 || o->edge < 8 || o->passes < 1) {
    usage(stderr);
    return -1;
  }
  return 0;
}

/* Prints the first pass's lines; a later pass that disagrees is an error. */
static int report(const job *jb, size_t n_files, unsigned passes) {
  int bad = 0;
  for (size_t i = 0; i < n_files; i++) {
    fputs(jb->lines[i], stdout);
    bad |= strstr(jb->lines[i], " error: ") != NULL;
    for (unsigned p = 1; p < passes; p++)
      if (strcmp(jb->lines[i], jb->lines[p * n_files + i]) != 0) {
        printf("%s: pass %u differs: %s", jb->files->paths[i], p, jb->lines[p * n_files + i]);
        bad = 1;
      }
  }
  return bad;
}

int main(int argc, char **argv) {
  options o;
  if (parse_options(argc, argv, &o) != 0)
    return 2;
  jpeg_files files = {0};
  if (jpeg_files_collect(&files, argc - optind, argv + optind, "thumbnailer") != 0)
    return 1;
  size_t tasks = files.n * o.passes;
  job jb = {&files, o.edge, o.outdir, calloc(tasks, sizeof(char *)),
            calloc(tasks, sizeof(uint64_t))};
  uint64_t t0 = wl_now_ns();
  if (wl_pool_run(o.threads, tasks, thumbnail_one, &jb) != 0) {
    fprintf(stderr, "thumbnailer: cannot start decoder threads\n");
    return 1;
  }
  double secs = (double)(wl_now_ns() - t0) / 1e9;
  int bad = report(&jb, files.n, o.passes);
  uint64_t pixels = 0;
  for (size_t i = 0; i < tasks; i++) {
    pixels += jb.pixels[i];
    free(jb.lines[i]);
  }
  fprintf(
      stderr,
      "thumbnailer: %zu files x %u pass%s, %.1f Mpixel in %.3f s (%.0f Mpixel/s) on %d thread%s\n",
      files.n, o.passes, o.passes > 1 ? "es" : "", (double)pixels / 1e6, secs,
      (double)pixels / 1e6 / (secs + 1e-12), o.threads, o.threads > 1 ? "s" : "");
  jpeg_files_free(&files);
  free(jb.lines);
  free(jb.pixels);
  return bad;
}

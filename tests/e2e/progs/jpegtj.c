/* jpegtj — decodes JPEG files through the TurboJPEG API in several ways
 * and prints a checksum of every output buffer (padding included, so a
 * write outside the image would show), the return codes and error texts.
 *
 *   jpegtj [-threads N] [-fresh] FILE...
 *
 * -fresh: each file's first decode, and its first of each YUV entry point,
 * is into buffers mapped for it (pages nothing has touched), as a program
 * that allocates them per image. */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <turbojpeg.h>

static int fresh;

static uint64_t fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

typedef struct {
  char *buf;
  size_t len, cap;
} out_t;

static void outf(out_t *o, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (o->len + (size_t)n + 1 > o->cap) {
    o->cap = (o->cap + (size_t)n + 1) * 2;
    o->buf = realloc(o->buf, o->cap);
  }
  memcpy(o->buf + o->len, line, (size_t)n + 1);
  o->len += (size_t)n;
}

/* A buffer filled with a pattern first, so unwritten bytes are checked too. */
static unsigned char *pattern(size_t n) {
  unsigned char *b = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)(i * 31 + 7);
  return b;
}

static void report(out_t *o, tjhandle h, const char *what, int rc, const void *buf, size_t n) {
  outf(o, "  %s rc=%d sum=%016llx", what, rc, (unsigned long long)fnv(buf, n));
  if (rc != 0)
    outf(o, " err=%d '%s'", tjGetErrorCode(h), tjGetErrorStr2(h));
  outf(o, "\n");
}

static void decode(out_t *o, tjhandle h, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    outf(o, "%s: cannot open\n", path);
    return;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *jpeg = malloc((size_t)size);
  size_t got = fread(jpeg, 1, (size_t)size, f);
  fclose(f);
  int w = 0, ht = 0, ss = -1, cs = -1;
  int rc = tjDecompressHeader3(h, jpeg, got, &w, &ht, &ss, &cs);
  outf(o, "%s: header rc=%d %dx%d subsamp=%d colorspace=%d\n", path, rc, w, ht, ss, cs);
  if (rc != 0 || w <= 0 || ht <= 0) {
    free(jpeg);
    return;
  }
  /* full size RGB, no pitch */
  size_t n = (size_t)w * ht * 3;
  unsigned char *b;
  if (fresh) {
    b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b != MAP_FAILED) {
      rc = tjDecompress2(h, jpeg, got, b, w, 0, ht, TJPF_RGB, 0);
      report(o, h, "rgb fresh", rc, b, n);
      munmap(b, n);
    }
  }
  b = pattern(n);
  rc = tjDecompress2(h, jpeg, got, b, w, 0, ht, TJPF_RGB, 0);
  report(o, h, "rgb", rc, b, n);
  free(b);
  /* half size BGRX, padded rows, bottom-up, fast DCT */
  int sw = (w + 1) / 2, sh = (ht + 1) / 2, pitch = sw * 4 + 13;
  n = (size_t)pitch * sh;
  b = pattern(n);
  rc = tjDecompress2(h, jpeg, got, b, w / 2 + 1, pitch, 0, TJPF_BGRX,
                     TJFLAG_BOTTOMUP | TJFLAG_FASTDCT);
  report(o, h, "bgrx/2", rc, b, n);
  free(b);
  /* quarter-size grey with the TurboJPEG 1.0 entry point */
  n = (size_t)w * ht;
  b = pattern(n);
  rc = tjDecompress(h, jpeg, got, b, w / 4 + 1, 0, ht / 4 + 1, 1, 0);
  report(o, h, "gray/4 (tjDecompress)", rc, b, n);
  free(b);
  /* YUV in one buffer, and in planes with strides */
  if (ss >= 0 && cs != TJCS_CMYK && cs != TJCS_YCCK) {
    n = tjBufSizeYUV2(w, 4, ht, ss);
    if (fresh) {
      b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (b != MAP_FAILED) {
        rc = tjDecompressToYUV2(h, jpeg, got, b, 0, 4, 0, 0);
        report(o, h, "yuv fresh", rc, b, n);
        munmap(b, n);
      }
    }
    b = pattern(n);
    rc = tjDecompressToYUV2(h, jpeg, got, b, 0, 4, 0, 0);
    report(o, h, "yuv", rc, b, n);
    free(b);
    int strides[3], np = ss == TJSAMP_GRAY ? 1 : 3;
    unsigned char *planes[3] = {NULL, NULL, NULL};
    size_t psz[3] = {0, 0, 0};
    for (int i = 0; i < np; i++) {
      strides[i] = tjPlaneWidth(i, w, ss) + 5;
      psz[i] = (size_t)strides[i] * tjPlaneHeight(i, ht, ss);
    }
    if (fresh) { /* each plane mapped apart */
      int mapped = 1;
      for (int i = 0; i < np; i++) {
        planes[i] = mmap(NULL, psz[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        mapped &= planes[i] != MAP_FAILED;
      }
      if (mapped) {
        rc = tjDecompressToYUVPlanes(h, jpeg, got, planes, 0, strides, 0, 0);
        for (int i = 0; i < np; i++)
          report(o, h, "yuv plane fresh", rc, planes[i], psz[i]);
      }
      for (int i = 0; i < np; i++)
        if (planes[i] != MAP_FAILED)
          munmap(planes[i], psz[i]);
    }
    for (int i = 0; i < np; i++)
      planes[i] = pattern(psz[i]);
    rc = tjDecompressToYUVPlanes(h, jpeg, got, planes, 0, strides, 0, TJFLAG_FASTUPSAMPLE);
    for (int i = 0; i < np; i++) {
      report(o, h, "yuv plane", rc, planes[i], psz[i]);
      free(planes[i]);
    }
  }
  /* a size TurboJPEG cannot scale to: an error, not a decode */
  b = pattern(16);
  rc = tjDecompress2(h, jpeg, got, b, 1, 0, 1, TJPF_RGB, 0);
  report(o, h, "too small", rc, b, 16);
  free(b);
  free(jpeg);
}

typedef struct {
  int argc;
  char **argv;
  out_t out;
} job_t;

static void *run(void *p) {
  job_t *j = p;
  tjhandle h = tjInitDecompress();
  for (int i = 0; i < j->argc; i++)
    decode(&j->out, h, j->argv[i]);
  tjDestroy(h);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = 0, first = 1;
  if (argc > 2 && !strcmp(argv[1], "-threads")) {
    threads = atoi(argv[2]);
    first = 3;
  }
  if (first < argc && !strcmp(argv[first], "-fresh")) {
    fresh = 1;
    first++;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: jpegtj [-threads N] [-fresh] FILE...\n");
    return 2;
  }
  int nt = threads > 0 ? threads : 1;
  job_t *jobs = calloc((size_t)nt, sizeof *jobs);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  for (int t = 0; t < nt; t++) {
    jobs[t].argc = argc - first;
    jobs[t].argv = argv + first;
    if (threads)
      pthread_create(&th[t], NULL, run, &jobs[t]);
    else
      run(&jobs[t]);
  }
  for (int t = 0; t < nt; t++) {
    if (threads) {
      pthread_join(th[t], NULL);
      printf("thread %d:\n", t);
    }
    fwrite(jobs[t].out.buf ? jobs[t].out.buf : "", 1, jobs[t].out.len, stdout);
    free(jobs[t].out.buf);
  }
  free(jobs);
  free(th);
  return 0;
}

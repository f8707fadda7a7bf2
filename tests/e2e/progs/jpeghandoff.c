/* jpeghandoff — decodes JPEG files on worker threads and leaves the
 * decompression objects to the main thread, which ends them after joining
 * the workers, as libvips does with its decoders (a pool's threads read
 * the rows, the main thread destroys the objects later).
 *
 *   jpeghandoff [-threads N] [-finish] [-header] FILE...
 *     -threads N  N worker threads (default 1), each decodes every file
 *                 on objects of its own, up to the last row
 *     -finish     main calls jpeg_finish_decompress before destroying
 *                 (else the object is destroyed unfinished)
 *     -header     main reads each header before the workers start
 *                 (jpeg_read_header on main, the rows on a worker)
 *
 * Prints one line per decode, in order: worker, file, rows, a checksum
 * of the rows. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

typedef struct {
  struct jpeg_decompress_struct ci;
  struct jpeg_error_mgr err;
  FILE *f;
  uint64_t sum;
  unsigned rows;
} dec_t;

typedef struct {
  dec_t *decs;
  int nfiles;
} job_t;

static int finish_on_main, header_on_main;

static void read_header(dec_t *d) {
  jpeg_read_header(&d->ci, TRUE);
}

static void read_rows(dec_t *d) {
  jpeg_start_decompress(&d->ci);
  size_t n = (size_t)d->ci.output_width * (size_t)d->ci.output_components;
  JSAMPLE *row = malloc(n);
  uint64_t h = 1469598103934665603ull;
  while (d->ci.output_scanline < d->ci.output_height) {
    jpeg_read_scanlines(&d->ci, &row, 1);
    for (size_t i = 0; i < n; i++)
      h = (h ^ row[i]) * 1099511628211ull;
  }
  free(row);
  d->sum = h;
  d->rows = d->ci.output_scanline;
}

static void *work(void *p) {
  job_t *j = p;
  for (int i = 0; i < j->nfiles; i++) {
    if (!header_on_main)
      read_header(&j->decs[i]);
    read_rows(&j->decs[i]);
  }
  return NULL;
}

int main(int argc, char **argv) {
  int nt = 1, a = 1;
  for (; a < argc && argv[a][0] == '-'; a++) {
    if (!strcmp(argv[a], "-threads") && a + 1 < argc)
      nt = atoi(argv[++a]);
    else if (!strcmp(argv[a], "-finish"))
      finish_on_main = 1;
    else if (!strcmp(argv[a], "-header"))
      header_on_main = 1;
    else
      break;
  }
  int nf = argc - a;
  if (nt < 1 || nf < 1) {
    fprintf(stderr, "usage: jpeghandoff [-threads N] [-finish] [-header] FILE...\n");
    return 2;
  }
  job_t *jobs = calloc((size_t)nt, sizeof *jobs);
  pthread_t *th = calloc((size_t)nt, sizeof *th);
  for (int t = 0; t < nt; t++) {
    jobs[t].nfiles = nf;
    jobs[t].decs = calloc((size_t)nf, sizeof(dec_t));
    for (int i = 0; i < nf; i++) {
      dec_t *d = &jobs[t].decs[i];
      d->f = fopen(argv[a + i], "rb");
      if (!d->f) {
        perror(argv[a + i]);
        return 1;
      }
      d->ci.err = jpeg_std_error(&d->err);
      jpeg_create_decompress(&d->ci);
      jpeg_stdio_src(&d->ci, d->f);
      if (header_on_main)
        read_header(d);
    }
  }
  for (int t = 0; t < nt; t++)
    pthread_create(&th[t], NULL, work, &jobs[t]);
  for (int t = 0; t < nt; t++)
    pthread_join(th[t], NULL);
  for (int t = 0; t < nt; t++) {
    for (int i = 0; i < nf; i++) {
      dec_t *d = &jobs[t].decs[i];
      if (finish_on_main)
        jpeg_finish_decompress(&d->ci);
      jpeg_destroy_decompress(&d->ci);
      fclose(d->f);
      printf("worker %d %s rows %u sum %016llx\n", t, argv[a + i], d->rows,
             (unsigned long long)d->sum);
    }
    free(jobs[t].decs);
  }
  free(jobs);
  free(th);
  return 0;
}

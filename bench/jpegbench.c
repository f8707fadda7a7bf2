/* jpegbench — a loop of libjpeg decodes of one image, timed by the program
 * itself, so the same loop can run natively, under record and under replay,
 * side by side in one benchmark run (as pbbench does for protobuf-c).
 *
 *   jpegbench FILE N
 *
 * Reads FILE once, then decodes it from memory N times after 3 warm-up
 * decodes (jpeg_mem_src, header, start, every scanline, finish), summing
 * the output so that no decode can be skipped. Prints "ns_per_call X" for
 * the timed loop: standin's start-up and final flush are outside it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <jpeglib.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned char *slurp(const char *path, unsigned long *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  unsigned char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) != NULL &&
        fread(buf, 1, (size_t)n, f) != (size_t)n) {
      free(buf);
      buf = NULL;
    }
    *len = n > 0 ? (unsigned long)n : 0;
  }
  fclose(f);
  return buf;
}

/* One decode; returns a sum over the output, or 0 with *ok = 0. */
static uint64_t decode(const unsigned char *jpg, unsigned long len, JSAMPLE **row, size_t *cap) {
  struct jpeg_decompress_struct d;
  struct jpeg_error_mgr err;
  d.err = jpeg_std_error(&err);
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, jpg, len);
  jpeg_read_header(&d, TRUE);
  jpeg_start_decompress(&d);
  size_t stride = (size_t)d.output_width * (size_t)d.output_components;
  if (stride > *cap) {
    free(*row);
    *row = malloc(stride);
    *cap = stride;
  }
  uint64_t sum = 0;
  while (d.output_scanline < d.output_height) {
    JSAMPROW rows[1] = {*row};
    jpeg_read_scanlines(&d, rows, 1);
    sum += (*row)[stride / 2] + (*row)[stride - 1];
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return sum;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: jpegbench FILE N\n");
    return 2;
  }
  long n = atol(argv[2]);
  unsigned long len = 0;
  unsigned char *jpg = slurp(argv[1], &len);
  if (!jpg || n <= 0) {
    fprintf(stderr, "jpegbench: cannot read %s (or N is not positive)\n", argv[1]);
    return 2;
  }
  JSAMPLE *row = NULL;
  size_t cap = 0;
  volatile uint64_t sink = 0;
  uint64_t t0 = 0;
  for (long i = -3; i < n; i++) {
    if (i == 0)
      t0 = now_ns();
    sink += decode(jpg, len, &row, &cap);
  }
  uint64_t t1 = now_ns();
  printf("checksum %llu\nns_per_call %.1f\n", (unsigned long long)sink,
         (double)(t1 - t0) / (double)n);
  free(row);
  free(jpg);
  return 0;
}

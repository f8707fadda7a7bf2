/* jpegmkppm — writes a deterministic test picture as PPM (or PGM with
 * "gray") to stdout, for cjpeg to turn into the JPEG test corpus: smooth
 * gradients, edges and some noise, so that it compresses like a photo
 * rather than like a flat colour.
 *
 *   jpegmkppm WIDTH HEIGHT [gray] [SEED] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t lcg(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 24;
}

static unsigned char clamp(double v) {
  return (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: jpegmkppm WIDTH HEIGHT [gray] [SEED]\n");
    return 2;
  }
  int w = atoi(argv[1]), h = atoi(argv[2]);
  int gray = argc > 3 && !strcmp(argv[3], "gray");
  uint32_t seed = argc > 4 ? (uint32_t)atoi(argv[4]) : (uint32_t)(w * 7919 + h);
  int nc = gray ? 1 : 3;
  unsigned char *row = malloc((size_t)w * nc);
  printf("P%d\n%d %d\n255\n", gray ? 5 : 6, w, h);
  for (int y = 0; y < h; y++) {
    for (int x = 0; x < w; x++) {
      double fx = (double)x / w, fy = (double)y / h;
      double ring = 60 * sin(hypot(fx - 0.4, fy - 0.5) * 40);
      int block = ((x / 37) + (y / 23)) % 5 == 0 ? 50 : 0;
      double n = (double)lcg(&seed) / 255.0 * 24 - 12;
      double v[3] = {200 * fx + ring + n + block, 200 * fy - ring / 2 + n,
                     128 + 100 * sin(fx * 9 + fy * 5) + n - block};
      for (int c = 0; c < nc; c++)
        row[x * nc + c] = clamp(gray ? (v[0] + v[1] + v[2]) / 3 : v[c]);
    }
    fwrite(row, 1, (size_t)w * nc, stdout);
  }
  free(row);
  return 0;
}

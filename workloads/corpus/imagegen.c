/* imagegen — write a procedural photo-like image as binary PPM or PGM.
 *
 *   imagegen WIDTH HEIGHT SEED [grey] >image.ppm
 *
 * The picture is a smooth colour gradient, soft-edged blobs, hard-edged
 * boxes, value noise at three scales (colour patches, then texture and fine
 * detail shared by all channels, as luminance detail is in photographs) and
 * a little per-pixel sensor noise. That mix gives JPEG compression ratios close to those of
 * real photographs (roughly 1-3 bits per pixel at quality 75-90), which
 * matters because decode time depends on the entropy-coded data, not only on
 * the pixel count. The same arguments always give the same bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/workload.h"

enum { MAX_C = 3, N_BLOBS = 7, N_BOXES = 5, N_OCTAVES = 3 };

typedef struct {
  int cell;         /* lattice spacing in pixels */
  int amp;          /* amplitude in grey levels */
  int gw, gh;       /* lattice size */
  int channels;     /* 1: the same value for every colour channel */
  int16_t *lattice; /* gw * gh * channels values in [-amp, amp] */
} octave;

typedef struct {
  int cx, cy, r;
  int colour[MAX_C];
} blob;

typedef struct {
  int x0, y0, x1, y1;
  int colour[MAX_C];
} box;

typedef struct {
  int w, h, channels;
  int base[MAX_C], dx[MAX_C], dy[MAX_C]; /* gradient */
  blob blobs[N_BLOBS];
  box boxes[N_BOXES];
  octave oct[N_OCTAVES];
  uint64_t rng;
} scene;

static void octave_init(octave *o, const scene *sc, int cell, int amp, int channels, uint64_t *s) {
  o->cell = cell;
  o->amp = amp;
  o->channels = channels;
  o->gw = sc->w / cell + 2;
  o->gh = sc->h / cell + 2;
  size_t n = (size_t)o->gw * (size_t)o->gh * (size_t)channels;
  o->lattice = malloc(n * sizeof *o->lattice);
  for (size_t i = 0; i < n; i++)
    o->lattice[i] = (int16_t)((int)wl_below(s, (uint64_t)(2 * amp + 1)) - amp);
}

/* Bilinear value noise at (x, y) for channel c, in fixed point. */
static int octave_at(const octave *o, int x, int y, int c) {
  int channels = o->channels;
  c = c < channels ? c : 0;
  int gx = x / o->cell, gy = y / o->cell;
  int fx = (x % o->cell) * 256 / o->cell, fy = (y % o->cell) * 256 / o->cell;
  const int16_t *row0 = o->lattice + ((size_t)gy * (size_t)o->gw) * (size_t)channels;
  const int16_t *row1 = row0 + (size_t)o->gw * (size_t)channels;
  int a = row0[gx * channels + c], b = row0[(gx + 1) * channels + c];
  int d = row1[gx * channels + c], e = row1[(gx + 1) * channels + c];
  int top = a * (256 - fx) + b * fx, bottom = d * (256 - fx) + e * fx;
  return (top * (256 - fy) + bottom * fy) >> 16;
}

static void scene_init(scene *sc, int w, int h, int channels, uint64_t seed) {
  memset(sc, 0, sizeof *sc);
  sc->w = w;
  sc->h = h;
  sc->channels = channels;
  sc->rng = seed;
  uint64_t *s = &sc->rng;
  for (int c = 0; c < channels; c++) {
    sc->base[c] = (int)wl_range(s, 40, 200);
    sc->dx[c] = (int)wl_range(s, 0, 120) - 60;
    sc->dy[c] = (int)wl_range(s, 0, 120) - 60;
  }
  int big = w > h ? w : h;
  for (int b = 0; b < N_BLOBS; b++) {
    blob *bl = &sc->blobs[b];
    bl->cx = (int)wl_below(s, (uint64_t)w);
    bl->cy = (int)wl_below(s, (uint64_t)h);
    bl->r = (int)wl_range(s, (uint64_t)big / 20 + 1, (uint64_t)big / 4 + 2);
    for (int c = 0; c < channels; c++)
      bl->colour[c] = (int)wl_range(s, 0, 255);
  }
  for (int b = 0; b < N_BOXES; b++) {
    box *bx = &sc->boxes[b];
    bx->x0 = (int)wl_below(s, (uint64_t)w);
    bx->y0 = (int)wl_below(s, (uint64_t)h);
    bx->x1 = bx->x0 + (int)wl_range(s, 1, (uint64_t)w / 3 + 1);
    bx->y1 = bx->y0 + (int)wl_range(s, 1, (uint64_t)h / 3 + 1);
    for (int c = 0; c < channels; c++)
      bx->colour[c] = (int)wl_range(s, 0, 255);
  }
  int cells[N_OCTAVES] = {big / 6 + 1, big / 50 + 2, 3}, amps[N_OCTAVES] = {45, 30, 14};
  for (int o = 0; o < N_OCTAVES; o++)
    octave_init(&sc->oct[o], sc, cells[o], amps[o], o == 0 ? channels : 1, s);
}

/* How strongly each blob covers (x, y), out of 256: 192 at its centre, 32
 * at its rim, 0 outside. */
static void blob_weights(const scene *sc, int x, int y, int *wgt) {
  for (int b = 0; b < N_BLOBS; b++) {
    const blob *bl = &sc->blobs[b];
    int64_t ddx = x - bl->cx, ddy = y - bl->cy;
    int64_t d2 = ddx * ddx + ddy * ddy, r2 = (int64_t)bl->r * bl->r;
    wgt[b] = d2 >= r2 ? 0 : (int)(192 - 160 * d2 / r2);
  }
}

static void render_row(scene *sc, int y, uint8_t *out) {
  int wgt[N_BLOBS];
  for (int x = 0; x < sc->w; x++) {
    uint64_t grain = wl_rand(&sc->rng);
    blob_weights(sc, x, y, wgt);
    for (int c = 0; c < sc->channels; c++) {
      int v = sc->base[c] + sc->dx[c] * x / sc->w + sc->dy[c] * y / sc->h;
      for (int b = 0; b < N_BLOBS; b++)
        v = (v * (256 - wgt[b]) + sc->blobs[b].colour[c] * wgt[b]) >> 8;
      for (int b = 0; b < N_BOXES; b++) {
        const box *bx = &sc->boxes[b];
        if (x >= bx->x0 && x < bx->x1 && y >= bx->y0 && y < bx->y1)
          v = (v + 3 * bx->colour[c]) / 4;
      }
      for (int o = 0; o < N_OCTAVES; o++)
        v += octave_at(&sc->oct[o], x, y, c);
      v += (int)(grain & 7) - 3 + (int)((grain >> (8 + 8 * c)) & 3) - 1;
      out[x * sc->channels + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4 || (argc == 5 && strcmp(argv[4], "grey") != 0) || argc > 5) {
    fprintf(stderr, "usage: imagegen WIDTH HEIGHT SEED [grey] >image.ppm\n");
    return 2;
  }
  int w = atoi(argv[1]), h = atoi(argv[2]), channels = argc == 5 ? 1 : 3;
  if (w < 1 || h < 1 || w > 65500 || h > 65500) {
    fprintf(stderr, "imagegen: size %sx%s out of range (1..65500)\n", argv[1], argv[2]);
    return 2;
  }
  scene sc;
  scene_init(&sc, w, h, channels, strtoull(argv[3], NULL, 0));
  uint8_t *row = malloc((size_t)w * (size_t)channels);
  printf("P%d\n%d %d\n255\n", channels == 1 ? 5 : 6, w, h);
  for (int y = 0; y < h; y++) {
    render_row(&sc, y, row);
    fwrite(row, (size_t)channels, (size_t)w, stdout);
  }
  free(row);
  for (int o = 0; o < N_OCTAVES; o++)
    free(sc.oct[o].lattice);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    perror("imagegen: write");
    return 1;
  }
  return 0;
}

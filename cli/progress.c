/* progress.c — progress line for long analyses (see progress.h). */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static uint64_t now_ns(void) {
  return cli_mono_ns();
}

void progress_start(progress *p, const char *what, size_t nfiles, uint64_t total) {
  *p = (progress){
      .on = what && isatty(2), .what = what, .total = total, .nfiles = nfiles, .last_ns = now_ns()};
}

void progress_file(progress *p, size_t i, uint64_t before) {
  p->file = i;
  p->before = before;
}

void progress_update(progress *p, uint64_t bytes) {
  if (!p->on)
    return;
  uint64_t t = now_ns();
  if (t - p->last_ns < 100000000ull)
    return;
  p->last_ns = t;
  char a[32], b[32];
  double done = (double)(p->before + bytes);
  fprintf(stderr, "\rstandin %s: file %zu of %zu, %s of %s (%.0f%%)\033[K", p->what, p->file + 1,
          p->nfiles, cli_fmt_bytes(a, sizeof a, done), cli_fmt_bytes(b, sizeof b, (double)p->total),
          p->total ? 100.0 * done / (double)p->total : 100.0);
  p->drawn = 1;
}

void progress_end(progress *p) {
  if (p->drawn)
    fputs("\r\033[K", stderr);
  p->drawn = 0;
}

/* plot.h — plots as data + gnuplot script, rendered to SVG when gnuplot
 * is installed.
 *
 * plot_open creates DIR/NAME.dat for the caller to fill; plot_close writes
 * DIR/NAME.gp (the caller's plot commands after a common preamble that
 * sets the SVG terminal and DIR/NAME.svg as output) and runs gnuplot in
 * DIR. The data and the script stay, so a plot can be restyled and rerun
 * by hand. */
#ifndef STANDIN_CLI_PLOT_H
#define STANDIN_CLI_PLOT_H

#include <stdio.h>

typedef struct {
  char dir[4096];
  char name[64];
  FILE *dat;
} plot;

/* Create DIR (if needed) and DIR/NAME.dat; prints why and returns -1. */
int plot_open(plot *p, const char *dir, const char *name);

/* Write a gnuplot string literal (single quotes) for a title. */
void plot_str(FILE *f, const char *s);

/* Close the data, write the script: `title` on top, then what body()
 * writes (plot commands reading NAME.dat). Runs gnuplot when it is on
 * PATH. Returns 1 if an SVG was made, 0 if only data and script were
 * written, -1 on a write error (printed). */
int plot_close(plot *p, const char *title, void (*body)(FILE *gp, void *arg), void *arg);

#endif

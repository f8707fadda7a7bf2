/* plot.c — data, gnuplot script and SVG (see plot.h). */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

int plot_open(plot *p, const char *dir, const char *name) {
  char path[sizeof p->dir + 80];
  snprintf(p->dir, sizeof p->dir, "%s", dir);
  snprintf(p->name, sizeof p->name, "%s", name);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    cli_err("cannot create plot directory %s: %s", dir, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/%s.dat", dir, name);
  if (!(p->dat = fopen(path, "w"))) {
    cli_err("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  fprintf(p->dat, "# standin %s: data for %s.gp\n", STANDIN_VERSION, name);
  return 0;
}

void plot_str(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'')
      fputc('\'', f);
    fputc(*s == '\n' ? ' ' : *s, f);
  }
  fputc('\'', f);
}

/* gnuplot NAME.gp in the plot directory, quietly; 1 if it made the SVG. */
static int run_gnuplot(const plot *p) {
  char exe[PATH_MAX], script[80], svg[sizeof p->dir + 80];
  if (cli_find_program("gnuplot", exe, sizeof exe) != 0)
    return 0;
  snprintf(script, sizeof script, "%s.gp", p->name);
  snprintf(svg, sizeof svg, "%s/%s.svg", p->dir, p->name);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
      dup2(null, 1);
    if (chdir(p->dir) == 0)
      execl(exe, "gnuplot", script, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
    cli_warn("gnuplot failed on %s/%s; the data and script are there to rerun", p->dir, script);
    return 0;
  }
  return access(svg, R_OK) == 0;
}

int plot_close(plot *p, const char *title, void (*body)(FILE *gp, void *arg), void *arg) {
  char path[sizeof p->dir + 80];
  int bad = fclose(p->dat) != 0;
  snprintf(path, sizeof path, "%s/%s.gp", p->dir, p->name);
  FILE *gp = fopen(path, "w");
  if (bad || !gp) {
    cli_err("cannot write the plot %s in %s: %s", p->name, p->dir, strerror(errno));
    if (gp)
      fclose(gp);
    return -1;
  }
  fprintf(gp, "# standin %s; run in this directory: gnuplot %s.gp\n", STANDIN_VERSION, p->name);
  fprintf(gp, "set terminal svg size 960,600 dynamic background rgb 'white' font 'sans,12'\n");
  fprintf(gp, "set output '%s.svg'\nset termoption noenhanced\nset title ", p->name);
  plot_str(gp, title);
  fprintf(gp, "\nset grid\n");
  body(gp, arg);
  if (fclose(gp) != 0) {
    cli_err("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return run_gnuplot(p);
}

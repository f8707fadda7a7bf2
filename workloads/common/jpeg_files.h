/* jpeg_files.h — the list of JPEG files a workload was asked to process:
 * each argument is a file, or a directory whose *.jpg / *.jpeg entries are
 * taken; the list is sorted so output order never depends on readdir.
 * Header-only for the reason given in workload.h. */
#ifndef JPEG_FILES_H
#define JPEG_FILES_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

typedef struct {
  char **paths;
  size_t n, cap;
} jpeg_files;

static inline void jpeg_files_add(jpeg_files *l, const char *path) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 64;
    l->paths = realloc(l->paths, l->cap * sizeof *l->paths);
  }
  l->paths[l->n++] = strdup(path);
}

static inline int jpeg_files_is_jpeg(const char *name) {
  const char *dot = strrchr(name, '.');
  return name[0] != '.' && dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* Adds FILE, or the JPEG files directly inside DIR. Returns -1 (and says
 * why on stderr) when arg cannot be read. */
static inline int jpeg_files_add_arg(jpeg_files *l, const char *arg) {
  struct stat st;
  if (stat(arg, &st) != 0) {
    perror(arg);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    jpeg_files_add(l, arg);
    return 0;
  }
  DIR *d = opendir(arg);
  if (!d) {
    perror(arg);
    return -1;
  }
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d)))
    if (jpeg_files_is_jpeg(e->d_name)) {
      snprintf(path, sizeof path, "%s/%s", arg, e->d_name);
      jpeg_files_add(l, path);
    }
  closedir(d);
  return 0;
}

static inline int jpeg_files_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Collects argv[0..argc) and sorts. Returns 0, or -1 when an argument
 * cannot be read or no JPEG file was found (both said on stderr). */
static inline int jpeg_files_collect(jpeg_files *l, int argc, char **argv, const char *prog) {
  for (int i = 0; i < argc; i++)
    if (jpeg_files_add_arg(l, argv[i]) != 0)
      return -1;
  if (l->n == 0) {
    fprintf(stderr, "%s: no JPEG files (*.jpg, *.jpeg) found\n", prog);
    return -1;
  }
  qsort(l->paths, l->n, sizeof *l->paths, jpeg_files_cmp);
  return 0;
}

static inline void jpeg_files_free(jpeg_files *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->paths[i]);
  free(l->paths);
}

/* The last component of path. */
static inline const char *jpeg_files_base(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

#endif

/* driver.c — runs a fuzz harness on files, for builds without libFuzzer
 * (gcc): `fuzz_NAME FILE|DIR...` feeds every file once to
 * LLVMFuzzerTestOneInput, so the seed corpus and the saved crashing inputs
 * are still run under the sanitizers. Exits 0 when every input ran. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return -1;
  }
  uint8_t *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 4096;
      uint8_t *nb = realloc(buf, cap);
      if (!nb)
        abort();
      buf = nb;
    }
    size_t k = fread(buf + n, 1, cap - n, f);
    if (k == 0)
      break;
    n += k;
  }
  fclose(f);
  /* an exact-size copy, so that a read past the input is caught */
  uint8_t *in = malloc(n ? n : 1);
  memcpy(in, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(in, n);
  free(in);
  return 0;
}

static int run_path(const char *path, int *count) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    (*count)++;
    return run_file(path);
  }
  DIR *dir = opendir(path);
  struct dirent *e;
  int rc = 0;
  while (dir && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", path, e->d_name);
    rc |= run_path(p, count);
  }
  if (dir)
    closedir(dir);
  return rc;
}

int main(int argc, char **argv) {
  int rc = 0, count = 0;
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-')
      rc |= run_path(argv[i], &count);
  fprintf(stderr, "%s: %d inputs run\n", argv[0], count);
  return rc ? 1 : 0;
}

/* progress.h — a one-line progress indicator on stderr for long analyses:
 * shown only when stderr is a terminal, redrawn at most 10 times a second,
 * erased at the end so that it never mixes with the results. */
#ifndef STANDIN_CLI_PROGRESS_H
#define STANDIN_CLI_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int on;
  const char *what;
  uint64_t total, before; /* bytes of every file, of the files already read */
  uint64_t last_ns;
  size_t nfiles, file;
  int drawn;
} progress;

/* Start for `nfiles` files of `total` bytes; off when what is NULL or
 * stderr is not a terminal. */
void progress_start(progress *p, const char *what, size_t nfiles, uint64_t total);

/* Now reading file i (from 0), which starts `before` bytes into the total. */
void progress_file(progress *p, size_t i, uint64_t before);

/* `bytes` of the current file read; cheap when called often. */
void progress_update(progress *p, uint64_t bytes);

/* Erase the line. */
void progress_end(progress *p);

#endif

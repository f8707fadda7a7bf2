/* replaydb.h — building the replay database (replay/rdb.h) from a
 * recording and an offload plan, before the program starts. */
#ifndef STANDIN_CLI_REPLAYDB_H
#define STANDIN_CLI_REPLAYDB_H

#include <stddef.h>
#include <stdint.h>

#include "iface.h"
#include "rdb.h"

/* Which calls an accelerator takes: an API family or a single API. */
typedef struct {
  int family; /* st_family, 0 = any */
  int api;    /* st_api, 0 = any of the family */
} rdb_select;

typedef struct {
  char name[32];
  char spec[256]; /* as the user wrote it */
  rdb_select sel;
  if_model *model;
  uint32_t engines; /* 0 = unlimited (no queueing) */
} rdb_accel_def;

typedef struct {
  rdb_accel_def accel[RDB_MAX_ACCEL];
  int naccel;
  int on_miss; /* RDB_MISS_* */
} rdb_plan;

/* Parse one --iface "[API=]MODEL[:key=value,...]" into the plan; prints a
 * clear message and returns -1 on error. `engines=N` is taken by the
 * accelerator, the other keys by the model. */
int rdb_plan_add_iface(rdb_plan *p, const char *spec);
void rdb_plan_free(rdb_plan *p);

typedef struct {
  int fd;        /* memfd holding the database */
  uint8_t *base; /* our own mapping of it (for the summary) */
  size_t size;
  uint64_t entries, samples, files;
  uint64_t calls_unusable; /* calls that carry no fingerprint'able request */
} rdb_built;

/* Read every trace of `dir` and build the database. Prints why on error and
 * returns -1. */
int rdb_build(const char *dir, const rdb_plan *plan, rdb_built *out);
void rdb_built_free(rdb_built *b);

#endif

/* pbbench — a tight loop of protobuf-c calls on one message, timed by the
 * program itself, so the same loop can run natively, under record and under
 * replay, side by side in one benchmark run.
 *
 *   pbbench pack|unpack|size|packnew|sizenew|unpacknew|treenew SIZE N [CYCLE]
 *
 * SIZE is the encoded size to aim for (bytes); the message is a Tree with a
 * few fields and one bytes chunk that makes up the size. packnew packs a
 * new message each call (the branch id counts up), as most programs do: a
 * replay must then confirm every one by reading it whole; sizenew sizes a
 * new message and then packs it, two calls a turn, as programs size the
 * buffer they pack into; unpacknew unpacks a new message each
 * call (all packed before the loop), so a replay builds every tree from an
 * image no call of the process has used; treenew sizes and packs, as
 * sizenew, a new tree of many small messages (SIZE bytes of branches, each
 * with a leaf: ~15 bytes and two messages a branch, as vector tiles hold
 * hundreds of small features), so a replay walks hundreds of messages to
 * confirm each. With CYCLE, the new-message modes
 * go round CYCLE different messages (the same CYCLE each round): every call
 * is still a different message from the call before, but a replay finds
 * its saved bytes in memory the run has used, which tells the harness's
 * own work from the first touch of its database. Prints "ns_per_call X"
 * for the timed loop (N calls after 100 warm-up calls).
 *
 * PBBENCH_BETWEEN_KB=K in the environment: before each turn the loop
 * writes one byte in every 64 of a K KiB buffer, as a program's own work
 * between its calls evicts the caches; that time is left out of
 * ns_per_call, and printed as between_ns_per_turn (the program's own
 * work, to compare natively and under replay). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.pb-c.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr,
            "usage: pbbench pack|unpack|size|packnew|sizenew|unpacknew|treenew SIZE N [CYCLE]\n");
    return 2;
  }
  long cycle = argc == 5 ? atol(argv[4]) : 0;
  if (argc == 5 && cycle <= 0) {
    fprintf(stderr, "pbbench: CYCLE must be a positive number of messages, not '%s'\n", argv[4]);
    return 2;
  }
  const char *mode = argv[1];
  size_t size = (size_t)atol(argv[2]);
  long n = atol(argv[3]);
  Standin__Test__Tree t = STANDIN__TEST__TREE__INIT;
  Standin__Test__Branch br = STANDIN__TEST__BRANCH__INIT, *brp = &br;
  Standin__Test__Leaf lf = STANDIN__TEST__LEAF__INIT, *lfp = &lf;
  t.title = "bench";
  br.id = 42;
  br.n_leaves = 1;
  br.leaves = &lfp;
  lf.name = "leaf";
  t.n_branches = 1;
  t.branches = &brp;
  size_t pad = size > 40 ? size - 40 : 1;
  uint8_t *blob = malloc(pad);
  for (size_t i = 0; i < pad; i++)
    blob[i] = (uint8_t)(i * 131 + 7);
  ProtobufCBinaryData chunk = {pad, blob};
  t.n_chunks = 1;
  t.chunks = &chunk;
  enum { NEW_ID0 = 1 << 28 };
  if (!strcmp(mode, "packnew") || !strcmp(mode, "sizenew") || !strcmp(mode, "unpacknew"))
    br.id = NEW_ID0;
  /* treenew: branches of one leaf each, added until the tree packs to SIZE
   * bytes, and no chunk */
  Standin__Test__Branch *tb = NULL, **tbp = NULL;
  Standin__Test__Leaf *tl = NULL, **tlp = NULL;
  char(*tnames)[16] = NULL;
  if (!strcmp(mode, "treenew")) {
    size_t cap = size / 8 + 1;
    tb = calloc(cap, sizeof *tb);
    tbp = calloc(cap, sizeof *tbp);
    tl = calloc(cap, sizeof *tl);
    tlp = calloc(cap, sizeof *tlp);
    tnames = calloc(cap, sizeof *tnames);
    if (!tb || !tbp || !tl || !tlp || !tnames) {
      fprintf(stderr, "pbbench: out of memory for a tree of %zu bytes\n", size);
      return 1;
    }
    t.n_chunks = 0;
    t.branches = tbp;
    t.n_branches = 0;
    while (t.n_branches < cap && standin__test__tree__get_packed_size(&t) < size) {
      size_t k = t.n_branches++;
      standin__test__branch__init(&tb[k]);
      standin__test__leaf__init(&tl[k]);
      snprintf(tnames[k], sizeof tnames[k], "leaf%zu", k);
      tl[k].name = tnames[k];
      tlp[k] = &tl[k];
      tb[k].id = k == 0 ? NEW_ID0 : k;
      tb[k].n_leaves = 1;
      tb[k].leaves = &tlp[k];
      tbp[k] = &tb[k];
    }
  }
  size_t len = standin__test__tree__get_packed_size(&t);
  uint8_t *buf = malloc(len);
  standin__test__tree__pack(&t, buf);
  /* the new-message modes' turn i (from -100) uses message nth(i): its
   * branch id is NEW_ID0 + 1 + nth(i), never the id of the message packed
   * before the loop (5-byte varints all: the size stays) */
#define nth(i) (cycle ? ((i) + 100) % cycle : (i) + 100)
  uint8_t *news = NULL; /* unpacknew: message k at news + k * len */
  if (!strcmp(mode, "unpacknew")) {
    long msgs = cycle ? cycle : n + 100;
    news = malloc((size_t)msgs * len);
    if (!news) {
      fprintf(stderr, "pbbench: out of memory for %ld messages of %zu bytes\n", msgs, len);
      return 1;
    }
    for (long k = 0; k < msgs; k++) {
      br.id = NEW_ID0 + 1 + k;
      standin__test__tree__pack(&t, news + (size_t)k * len);
    }
  }
  const char *between_env = getenv("PBBENCH_BETWEEN_KB");
  char *between_end = NULL;
  unsigned long between_kb = between_env ? strtoul(between_env, &between_end, 10) : 0;
  if (between_env && (between_end == between_env || *between_end || between_kb > (1ul << 22))) {
    fprintf(stderr, "pbbench: PBBENCH_BETWEEN_KB must be a number of KiB up to 4194304, not '%s'\n",
            between_env);
    return 2;
  }
  size_t between = (size_t)between_kb * 1024;
  volatile uint8_t *evict = between ? calloc(between, 1) : NULL;
  if (between && !evict) {
    fprintf(stderr, "pbbench: out of memory for PBBENCH_BETWEEN_KB=%s\n", between_env);
    return 1;
  }
  uint64_t between_ns = 0; /* the timed turns' eviction time */
  volatile size_t sink = 0;
  uint64_t t0 = 0;
  /* decided once: the loop must make exactly one library call per turn
   * (sizenew two), so that tracers that see every PLT call are compared on
   * the same work */
  int op = !strcmp(mode, "pack")        ? 0
           : !strcmp(mode, "size")      ? 1
           : !strcmp(mode, "packnew")   ? 3
           : !strcmp(mode, "unpacknew") ? 4
           : !strcmp(mode, "sizenew")   ? 5
           : !strcmp(mode, "treenew")   ? 6
           : !strcmp(mode, "unpack")    ? 2
                                        : -1;
  if (op < 0) {
    fprintf(stderr,
            "pbbench: unknown mode '%s' (pack, unpack, size, packnew, sizenew, "
            "unpacknew or treenew)\n",
            mode);
    return 2;
  }
  for (long i = -100; i < n; i++) {
    if (i == 0)
      t0 = now_ns();
    if (evict) {
      uint64_t e0 = now_ns();
      for (size_t j = 0; j < between; j += 64)
        evict[j]++;
      if (i >= 0)
        between_ns += now_ns() - e0;
    }
    if (op == 0) {
      sink += standin__test__tree__pack(&t, buf);
    } else if (op == 3) {
      br.id = NEW_ID0 + 1 + nth(i);
      sink += standin__test__tree__pack(&t, buf);
    } else if (op == 5) { /* sized, then packed into a buffer of that size */
      br.id = NEW_ID0 + 1 + nth(i);
      sink += standin__test__tree__get_packed_size(&t);
      sink += standin__test__tree__pack(&t, buf);
    } else if (op == 6) { /* a new tree of many messages, sized and packed */
      tb[0].id = NEW_ID0 + 1 + nth(i);
      sink += standin__test__tree__get_packed_size(&t);
      sink += standin__test__tree__pack(&t, buf);
    } else if (op == 1) {
      sink += standin__test__tree__get_packed_size(&t);
    } else if (op == 4) {
      Standin__Test__Tree *u = standin__test__tree__unpack(NULL, len, news + (size_t)nth(i) * len);
      sink += u->n_chunks;
      standin__test__tree__free_unpacked(u, NULL);
    } else {
      Standin__Test__Tree *u = standin__test__tree__unpack(NULL, len, buf);
      sink += u->n_chunks;
      standin__test__tree__free_unpacked(u, NULL);
    }
  }
  uint64_t t1 = now_ns();
  printf("encoded_bytes %zu\nns_per_call %.1f\n", len, (double)(t1 - t0 - between_ns) / (double)n);
  if (evict)
    printf("between_ns_per_turn %.1f\n", (double)between_ns / (double)n);
  free(blob);
  free(buf);
  free(news);
  free(tb);
  free(tbp);
  free(tl);
  free(tlp);
  free(tnames);
  free((void *)evict);
  return sink == 0;
}

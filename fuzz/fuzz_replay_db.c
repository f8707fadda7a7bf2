/* fuzz_replay_db — `standin replay` building its database from a fuzzed
 * trace (cli/replaydb.c: reader, schemas, descriptors rebuilt from them,
 * libprotobuf-c unpacking recorded bytes, images, models), then what the
 * replay shim does with each unpack entry in a program whose schema is
 * sample.proto: materialise the image against the program's descriptor,
 * and use the tree as the program would (size, pack, free). Whatever the
 * trace says, that tree must be sound. See fuzz_common.h for the input. */
#include "fuzz_common.h"
#include "pb_walk.h"
#include "plan.h"
#include "replaydb.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"
#include "shim.h"

/* The replay database calibrates the TSC with a 20 ms sleep when
 * /proc/cpuinfo says it may: not here (linked with --wrap=fopen). */
FILE *__real_fopen(const char *path, const char *mode);
FILE *__wrap_fopen(const char *path, const char *mode);
FILE *__wrap_fopen(const char *path, const char *mode) {
  if (!strcmp(path, "/proc/cpuinfo"))
    return NULL;
  return __real_fopen(path, mode);
}

static const ProtobufCMessageDescriptor *const program[] = {&standin__test__tree__descriptor,
                                                            &standin__test3__batch__descriptor};

static void serve(const rdb_built *b) {
  const rdb_header *h = (const rdb_header *)b->base;
  const rdb_entry *e = (const rdb_entry *)(b->base + h->entries_off);
  const rdb_entry *streamed = NULL; /* a tree-side entry with a plain stream */
  /* the counters and the bits of entries recorded once: apart, writable */
  if (h->next_off + h->nentries * 8 > h->once_off ||
      h->once_off + (h->nentries + 63) / 64 * 8 > h->ro_off)
    abort();
  for (uint64_t i = 0; i < h->nentries; i++)
    if (e[i].stream_len) {
      if (e[i].stream_off > h->size || e[i].stream_len > h->size - e[i].stream_off ||
          e[i].ref_off > h->size || e[i].ref_len > h->size - e[i].ref_off)
        abort(); /* the builder laid out a stream outside the database */
      streamed = &e[i];
    }
  /* every entry's samples lie in the one run the sources array stands
   * beside (rdb_header.sources_off), in entry order */
  uint64_t run = h->samples_off;
  for (uint64_t i = 0; i < h->nentries; i++) {
    if (e[i].samples_off != run)
      abort();
    run += (uint64_t)e[i].nsamples * sizeof(rdb_sample);
  }
  if (run != h->samples_off + h->nsamples * sizeof(rdb_sample) ||
      (h->sources_off && (h->sources_off < h->ro_off || h->sources_off > h->size ||
                          h->nsamples * sizeof(uint32_t) > h->size - h->sources_off)))
    abort();
  /* --on-miss nearest's table (rdb.h): groups tile the items, keys rise
   * within a group, every item names an entry of its group's API and type */
  const rdb_near_group *g = (const rdb_near_group *)(b->base + h->near_groups_off);
  const rdb_near *it = (const rdb_near *)(b->base + h->near_off);
  uint64_t covered = 0;
  for (uint64_t k = 0; k < h->nnear_groups; k++) {
    if (g[k].first != covered || g[k].n == 0 || g[k].n > h->nnear - covered)
      abort();
    for (uint64_t j = g[k].first; j < g[k].first + g[k].n; j++) {
      if (it[j].entry >= h->nentries || e[it[j].entry].api != g[k].api ||
          e[it[j].entry].type_off != g[k].name_off || e[it[j].entry].nsamples == 0 ||
          (j > g[k].first && it[j].key < it[j - 1].key))
        abort();
    }
    covered += g[k].n;
  }
  if (covered != h->nnear)
    abort();
  /* the recorded schemas (rdb_schema): in the read-only part, sorted and
   * unique by (name, identity), each name a string of the database with
   * its hash */
  const rdb_schema *sc = (const rdb_schema *)(b->base + h->schemas_off);
  if (h->nschemas && (h->schemas_off < h->ro_off || h->schemas_off > h->size ||
                      h->nschemas > (h->size - h->schemas_off) / sizeof *sc))
    abort();
  for (uint64_t k = 0; k < h->nschemas; k++) {
    if (sc[k].name_off >= h->size ||
        !memchr(b->base + sc[k].name_off, 0, h->size - sc[k].name_off) ||
        sc[k].name_hash != rdb_name_hash((const char *)b->base + sc[k].name_off))
      abort();
    if (k && (sc[k].name_hash < sc[k - 1].name_hash ||
              (sc[k].name_off == sc[k - 1].name_off && sc[k].id == sc[k - 1].id)))
      abort();
  }
  /* how recorded JPEG requests begin (rdb_prefix): in the read-only part,
   * powers of two from RDB_PREFIX_MIN, sorted by (len, hash), each once
   * (the shim's binary search relies on it) */
  const rdb_prefix *px = (const rdb_prefix *)(b->base + h->prefixes_off);
  if (h->nprefixes && (h->prefixes_off < h->ro_off || h->prefixes_off > h->size ||
                       h->nprefixes > (h->size - h->prefixes_off) / sizeof *px))
    abort();
  for (uint64_t k = 0; k < h->nprefixes; k++) {
    if (px[k].len < RDB_PREFIX_MIN || (px[k].len & (px[k].len - 1)))
      abort();
    if (k &&
        (px[k].len < px[k - 1].len || (px[k].len == px[k - 1].len && px[k].hash <= px[k - 1].hash)))
      abort();
  }
  for (uint64_t i = 0; i < h->nentries; i++) /* an entry's definition is of its type */
    if (e[i].schema && (e[i].schema > h->nschemas || sc[e[i].schema - 1].name_off != e[i].type_off))
      abort();
  for (uint64_t i = 0; i < h->nentries; i++) {
    if (e[i].api != ST_API_PB_UNPACK || !e[i].resp_len)
      continue;
    /* the shim answers an unpack on its fingerprint (rep_protobuf.c
     * lookup_bytes): an entry it answers with a tree (one neither failed
     * nor without a response) must have the fingerprint of the bytes the
     * tree was built from, whatever the trace said */
    const char *name = (const char *)b->base + e[i].type_off;
    uint64_t hb[2];
    uint8_t fp[16];
    if (e[i].type_off >= h->size || !memchr(name, 0, h->size - e[i].type_off) ||
        e[i].req_off > h->size || e[i].req_len > h->size - e[i].req_off)
      abort();
    pbw_hash_bytes(b->base + e[i].req_off, e[i].req_len, hb);
    pbw_fingerprint_named(pbw_name_hash(name), hb, e[i].req_len, fp);
    shim_fp_bind(fp, ST_API_PB_UNPACK);
    if (!(e[i].flags & (RDB_ENTRY_FAILED | RDB_ENTRY_NO_RESPONSE)) && memcmp(fp, e[i].fp, 16) != 0)
      abort();
    for (size_t k = 0; k < sizeof program / sizeof program[0]; k++) {
      ProtobufCMessage *m = NULL;
      /* with the recorded request, which the shim has compared with the
       * program's bytes: the image may refer to it (pbw_image_refer) */
      if (pbw_image_materialise_req(b->base + e[i].resp_off, e[i].resp_len, b->base + e[i].req_off,
                                    e[i].req_len, program[k], NULL, &m, NULL, 0) == PBW_OK) {
        /* confirming a prediction (rep_protobuf.c) compares any tree with
         * any stream: it must only read inside both */
        if (streamed)
          (void)pbw_tree_matches(m, b->base + streamed->stream_off, streamed->stream_len,
                                 streamed->ref_len ? b->base + streamed->ref_off : NULL,
                                 streamed->ref_len);
        fz_use_tree(m);
      }
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  static plan p;
  static int once;
  if (!once) {
    once = 1;
    /* JPEG decodes on software: rows rebuilt, --on-miss nearest's groups
     * and its restart probes (cli/replaydb.c) */
    if (plan_add_iface(&p, "jpeg=software") != 0 || plan_add_iface(&p, "protoacc") != 0)
      abort();
  }
  fz_trace_file(d, n, "1.trace");
  rdb_built b;
  /* nearest: the database fallback builds, and its nearest table */
  if (rdb_build(fz_tmpdir(), &p, RDB_MISS_NEAREST, 1, 1, &b) == 0)
    serve(&b);
  rdb_built_free(&b);
  return 0;
}

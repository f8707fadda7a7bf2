/* seeds.c — seed inputs for fuzz_schema and fuzz_pb_image from a real
 * trace: for each distinct unpack request, the recorded schema and bytes,
 * and the image replay would serve (built as cli/replaydb.c builds it):
 * seed-NNN holds all its pieces, seed-1NN (when it differs) refers to the
 * request for its long strings and bytes (pbw_image_refer).
 *
 *   seeds TRACE OUTDIR    writes OUTDIR/schema/NAME and OUTDIR/pb_image/NAME
 * Used by fuzz/make_corpus.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pb_walk.h"
#include "trace.h"

#define MAX_TYPES 64

static void put(const char *dir, const char *kind, int i, const void *a, size_t al, const void *b,
                size_t bl) {
  char p[4096];
  snprintf(p, sizeof p, "%s/%s", dir, kind);
  mkdir(p, 0755);
  snprintf(p, sizeof p, "%s/%s/seed-%03d", dir, kind, i);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(a, 1, al, f) != al || (bl && fwrite(b, 1, bl, f) != bl) || fclose(f)) {
    perror(p);
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: seeds TRACE OUTDIR\n");
    return 2;
  }
  st_reader *r;
  if (st_reader_open(&r, argv[1]) != ST_OK)
    return 1;
  void *schema[MAX_TYPES] = {0};
  size_t slen[MAX_TYPES] = {0};
  st_record rec;
  int n = 0;
  while (n < 12 && st_reader_next(r, &rec) == ST_OK) {
    if (rec.kind == ST_REC_TYPE && rec.u.type.id < MAX_TYPES && rec.u.type.schema) {
      schema[rec.u.type.id] = malloc(rec.u.type.schema_len);
      memcpy(schema[rec.u.type.id], rec.u.type.schema, rec.u.type.schema_len);
      slen[rec.u.type.id] = rec.u.type.schema_len;
    }
    const st_call *c = &rec.u.call;
    const void *bytes;
    uint64_t blen;
    if (rec.kind != ST_REC_CALL || c->api != ST_API_PB_UNPACK || c->type >= MAX_TYPES ||
        !schema[c->type] || st_reader_blob(r, c->req_blob, &bytes, &blen) != ST_OK)
      continue;
    uint8_t l16[2] = {(uint8_t)slen[c->type], (uint8_t)(slen[c->type] >> 8)};
    uint8_t *s = malloc(2 + slen[c->type]);
    memcpy(s, l16, 2);
    memcpy(s + 2, schema[c->type], slen[c->type]);
    put(argv[2], "schema", n, s, 2 + slen[c->type], bytes, blen);
    free(s);
    pbw_descset *ds;
    if (pbw_descset_from_schema(schema[c->type], slen[c->type], &ds) == PBW_OK) {
      ProtobufCMessage *m = protobuf_c_message_unpack(pbw_descset_root(ds), NULL, blen, bytes);
      void *img;
      size_t il;
      if (m && pbw_image_build(m, &img, &il) == PBW_OK) {
        put(argv[2], "pb_image", n, img, il, NULL, 0);
        size_t full = il;
        if (pbw_image_refer(&img, &il, bytes, blen) == PBW_OK && il < full)
          put(argv[2], "pb_image", 100 + n, img, il, NULL, 0);
        free(img);
      }
      if (m)
        protobuf_c_message_free_unpacked(m, NULL);
      pbw_descset_free(ds);
    }
    n++;
  }
  st_reader_close(r);
  for (int i = 0; i < MAX_TYPES; i++)
    free(schema[i]);
  return 0;
}

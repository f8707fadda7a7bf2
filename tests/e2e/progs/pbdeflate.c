/* pbdeflate — a program that uses libdeflate itself around its protobuf-c
 * calls: it allocates a compressor and a decompressor before its first
 * call, and uses and frees them after its last (t034). The recorder loads
 * libdeflate only at the first call it records, and must not change the
 * allocator of memory the program's libdeflate already handed out. It
 * waits 100 ms before freeing, so that the recorder's writer, started by
 * the first call, has loaded libdeflate by then.
 *
 * usage: pbdeflate N — packs N leaves, deflates the packed bytes, inflates
 * them back, and prints one line per leaf and a summary. */
#include <libdeflate.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sample.pb-c.h"

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 10;
  struct libdeflate_compressor *c = libdeflate_alloc_compressor(6);
  struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
  if (!c || !d) {
    fprintf(stderr, "pbdeflate: cannot allocate a libdeflate (de)compressor\n");
    return 1;
  }
  uint8_t *all = NULL;
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    Standin__Test__Leaf leaf = STANDIN__TEST__LEAF__INIT;
    char name[32];
    snprintf(name, sizeof name, "leaf %d", i);
    leaf.name = name;
    leaf.has_weight = 1;
    leaf.weight = i * 0.5;
    size_t sz = standin__test__leaf__get_packed_size(&leaf);
    uint8_t *p = realloc(all, len + sz);
    if (!p)
      return 1;
    all = p;
    standin__test__leaf__pack(&leaf, all + len);
    Standin__Test__Leaf *back = standin__test__leaf__unpack(NULL, sz, all + len);
    printf("%s %g %zu\n", back ? back->name : "?", back ? back->weight : 0.0, sz);
    standin__test__leaf__free_unpacked(back, NULL);
    len += sz;
  }
  size_t cap = libdeflate_deflate_compress_bound(c, len);
  uint8_t *z = malloc(cap), *out = malloc(len + 1);
  size_t zlen = libdeflate_deflate_compress(c, all, len, z, cap), got = 0;
  int ok = libdeflate_deflate_decompress(d, z, zlen, out, len, &got) == LIBDEFLATE_SUCCESS &&
           got == len && memcmp(out, all, len) == 0;
  printf("packed %zu bytes, deflated to %zu, inflated back %s\n", len, zlen,
         ok ? "equal" : "DIFFERENT");
  fflush(stdout);
  usleep(100000);
  libdeflate_free_compressor(c);
  libdeflate_free_decompressor(d);
  free(all);
  free(z);
  free(out);
  return ok ? 0 : 1;
}

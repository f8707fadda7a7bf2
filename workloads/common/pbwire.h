/* pbwire.h — how the bundled services put a protobuf-c message on the wire.
 * Header-only for the reason given in workload.h. */
#ifndef PBWIRE_H
#define PBWIRE_H

#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <stdlib.h>

#include "workload.h"

/* Packs m the two ways servers do: into a buffer of exactly
 * get_packed_size bytes, or (via_buffer) with pack_to_buffer into a stack
 * buffer that grows on the heap when the message does not fit. Stores the
 * packed size in *len and returns a hash of the packed bytes (what would
 * have been sent). */
static inline uint64_t pbwire_send(const ProtobufCMessage *m, int via_buffer, uint32_t *len) {
  uint64_t h;
  if (via_buffer) {
    uint8_t scratch[256];
    ProtobufCBufferSimple sb = PROTOBUF_C_BUFFER_SIMPLE_INIT(scratch);
    *len = (uint32_t)protobuf_c_message_pack_to_buffer(m, &sb.base);
    h = wl_hash(sb.data, sb.len, WL_FNV_INIT);
    PROTOBUF_C_BUFFER_SIMPLE_CLEAR(&sb);
  } else {
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    *len = (uint32_t)protobuf_c_message_pack(m, buf);
    h = wl_hash(buf, *len, WL_FNV_INIT);
    free(buf);
  }
  return h;
}

#endif

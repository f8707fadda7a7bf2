/* fastpb.c — a faster implementation of the same protobuf-c calls, for
 * ground-truth validation (make validate).
 *
 * Preloaded into the rpc workload, it answers protobuf_c_message_pack,
 * get_packed_size and pack_to_buffer for workload.rpc.Request and Response
 * with hand-written code specialised to those messages (straight-line field
 * encoding instead of libprotobuf-c's table-driven loop) and passes every
 * other call to libprotobuf-c. Its output is byte-for-byte the library's: the
 * validation checks the program's digest of the packed responses. It plays the
 * "accelerator" whose real end-to-end effect standin must predict. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <protobuf-c/protobuf-c.h>
#include <stdint.h>
#include <string.h>

#include "rpcsvc.pb-c.h"

#define EXPORT __attribute__((visibility("default")))

typedef Workload__Rpc__Response Response;
typedef Workload__Rpc__Request Request;
typedef Workload__Rpc__TraceContext TraceContext;
typedef Workload__Rpc__Attr Attr;

enum { OTHER = 0, RESPONSE = 1, REQUEST = 2 };

static const ProtobufCMessageDescriptor *response_desc, *request_desc;

/* Which message m is; names are compared once per descriptor address. */
static int kind_of(const ProtobufCMessage *m) {
  const ProtobufCMessageDescriptor *d = m->descriptor;
  if (d == response_desc)
    return RESPONSE;
  if (d == request_desc)
    return REQUEST;
  if (!d || !d->name || m->n_unknown_fields)
    return OTHER;
  if (!response_desc && !strcmp(d->name, "workload.rpc.Response")) {
    response_desc = d;
    return RESPONSE;
  }
  if (!request_desc && !strcmp(d->name, "workload.rpc.Request")) {
    request_desc = d;
    return REQUEST;
  }
  return OTHER;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static size_t ld_size(size_t len) { /* tag (one byte here) + length + data */
  return 1 + varint_size(len) + len;
}

static size_t attr_size(const Attr *a) {
  size_t kl = a->key ? strlen(a->key) : 0, n = 0;
  if (kl)
    n += ld_size(kl);
  if (a->value.len)
    n += ld_size(a->value.len);
  return n;
}

static size_t response_size(const Response *r) {
  size_t n = 0;
  if (r->id)
    n += 1 + varint_size(r->id);
  if (r->status)
    n += 1 + varint_size((uint64_t)(int64_t)r->status);
  if (r->digest)
    n += 1 + 8;
  if (r->body.len)
    n += ld_size(r->body.len);
  for (size_t i = 0; i < r->n_attrs; i++)
    n += ld_size(attr_size(r->attrs[i]));
  if (r->served_by_shard)
    n += 1 + varint_size(r->served_by_shard);
  return n;
}

static uint8_t *put_ld(uint8_t *p, uint8_t tag, const void *data, size_t len) {
  *p++ = tag;
  p = put_varint(p, len);
  memcpy(p, data, len);
  return p + len;
}

static size_t trace_size(const TraceContext *t) {
  return (t->trace_id ? 9 : 0) + (t->span_id ? 9 : 0) + (t->sampled ? 2 : 0);
}

static size_t request_size(const Request *r) {
  size_t n = 0, kl = r->key ? strlen(r->key) : 0;
  if (r->id)
    n += 1 + varint_size(r->id);
  if (r->method)
    n += 1 + varint_size((uint64_t)(int64_t)r->method);
  if (kl)
    n += ld_size(kl);
  if (r->payload.len)
    n += ld_size(r->payload.len);
  if (r->reply_bytes)
    n += 1 + varint_size(r->reply_bytes);
  if (r->trace)
    n += ld_size(trace_size(r->trace));
  for (size_t i = 0; i < r->n_attrs; i++)
    n += ld_size(attr_size(r->attrs[i]));
  if (r->deadline_ms)
    n += 1 + varint_size(r->deadline_ms);
  return n;
}

static uint8_t *put_attr(uint8_t *p, uint8_t tag, const Attr *a) {
  *p++ = tag;
  p = put_varint(p, attr_size(a));
  size_t kl = a->key ? strlen(a->key) : 0;
  if (kl)
    p = put_ld(p, 0x0a, a->key, kl);
  if (a->value.len)
    p = put_ld(p, 0x12, a->value.data, a->value.len);
  return p;
}

static size_t request_pack(const Request *r, uint8_t *out) {
  uint8_t *p = out;
  size_t kl = r->key ? strlen(r->key) : 0;
  if (r->id) {
    *p++ = 0x08;
    p = put_varint(p, r->id);
  }
  if (r->method) {
    *p++ = 0x10;
    p = put_varint(p, (uint64_t)(int64_t)r->method);
  }
  if (kl)
    p = put_ld(p, 0x1a, r->key, kl);
  if (r->payload.len)
    p = put_ld(p, 0x22, r->payload.data, r->payload.len);
  if (r->reply_bytes) {
    *p++ = 0x28;
    p = put_varint(p, r->reply_bytes);
  }
  if (r->trace) {
    const TraceContext *t = r->trace;
    *p++ = 0x32;
    p = put_varint(p, trace_size(t));
    if (t->trace_id) {
      *p++ = 0x09;
      memcpy(p, &t->trace_id, 8);
      p += 8;
    }
    if (t->span_id) {
      *p++ = 0x11;
      memcpy(p, &t->span_id, 8);
      p += 8;
    }
    if (t->sampled) {
      *p++ = 0x18;
      *p++ = 1;
    }
  }
  for (size_t i = 0; i < r->n_attrs; i++)
    p = put_attr(p, 0x3a, r->attrs[i]);
  if (r->deadline_ms) {
    *p++ = 0x40;
    p = put_varint(p, r->deadline_ms);
  }
  return (size_t)(p - out);
}

static size_t response_pack(const Response *r, uint8_t *out) {
  uint8_t *p = out;
  if (r->id) {
    *p++ = 0x08;
    p = put_varint(p, r->id);
  }
  if (r->status) {
    *p++ = 0x10;
    p = put_varint(p, (uint64_t)(int64_t)r->status);
  }
  if (r->digest) {
    *p++ = 0x19;
    memcpy(p, &r->digest, 8); /* little-endian, like the wire */
    p += 8;
  }
  if (r->body.len)
    p = put_ld(p, 0x22, r->body.data, r->body.len);
  for (size_t i = 0; i < r->n_attrs; i++)
    p = put_attr(p, 0x2a, r->attrs[i]);
  if (r->served_by_shard) {
    *p++ = 0x30;
    p = put_varint(p, r->served_by_shard);
  }
  return (size_t)(p - out);
}

static size_t fast_size(int k, const ProtobufCMessage *m) {
  return k == RESPONSE ? response_size((const Response *)m) : request_size((const Request *)m);
}

static size_t fast_pack(int k, const ProtobufCMessage *m, uint8_t *out) {
  return k == RESPONSE ? response_pack((const Response *)m, out)
                       : request_pack((const Request *)m, out);
}

#define REAL(var, fn)                                                                              \
  static __typeof__(&fn) var;                                                                      \
  if (!var)                                                                                        \
    var = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn);

EXPORT size_t protobuf_c_message_get_packed_size(const ProtobufCMessage *m) {
  REAL(real, protobuf_c_message_get_packed_size);
  int k = kind_of(m); /* unknown fields would need the library: kind OTHER */
  return k ? fast_size(k, m) : real(m);
}

EXPORT size_t protobuf_c_message_pack(const ProtobufCMessage *m, uint8_t *out) {
  REAL(real, protobuf_c_message_pack);
  int k = kind_of(m);
  return k ? fast_pack(k, m, out) : real(m, out);
}

EXPORT size_t protobuf_c_message_pack_to_buffer(const ProtobufCMessage *m, ProtobufCBuffer *b) {
  REAL(real, protobuf_c_message_pack_to_buffer);
  int k = kind_of(m);
  uint8_t small[4096];
  size_t n = k ? fast_size(k, m) : 0;
  if (!k || n > sizeof small)
    return real(m, b);
  fast_pack(k, m, small);
  b->append(b, n, small);
  return n;
}

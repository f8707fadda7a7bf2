/* standin_iface.h — the performance-interface ABI of standin.
 *
 * A performance interface predicts how long an accelerator takes to serve
 * one request, or says it cannot serve it. standin's built-in models and
 * user plugins implement the same structure. A plugin is a shared object
 * that exports
 *
 *     const standin_iface *standin_iface_entry(void);
 *
 * and is used with `standin replay --iface ./model.so:key=value,...` (or in
 * a plan file). Build one with
 *
 *     cc -shared -fPIC -o model.so model.c $(pkg-config --cflags standin)
 *
 * Models run in the standin command before and after the program (never
 * inside it), once per recorded call, so they may take their time; they
 * must be deterministic for a given request.
 *
 * Versioning: STANDIN_IFACE_ABI changes only when this structure or the
 * request changes incompatibly; standin refuses a plugin whose `abi` it
 * does not know, with a message naming both versions. */
#ifndef STANDIN_IFACE_ABI_H
#define STANDIN_IFACE_ABI_H

#include <stddef.h>
#include <stdint.h>

#define STANDIN_IFACE_ABI 1

/* API codes (same values as the trace format). */
enum {
  STANDIN_API_PB_PACK = 1,     /* protobuf_c_message_pack */
  STANDIN_API_PB_SIZE = 2,     /* protobuf_c_message_get_packed_size */
  STANDIN_API_PB_PACK_BUF = 3, /* protobuf_c_message_pack_to_buffer */
  STANDIN_API_PB_UNPACK = 4,   /* protobuf_c_message_unpack */
  STANDIN_API_JPEG_DECODE = 16, /* libjpeg: one image */
  STANDIN_API_TJ_DECODE = 17    /* TurboJPEG: one image */
};

/* Feature slots (standin_request.feat). protobuf: */
enum {
  STANDIN_PB_ENCODED_SIZE = 0, /* bytes of the encoded message */
  STANDIN_PB_FIELDS = 1,       /* fields present, all levels */
  STANDIN_PB_SUBMSGS = 2,      /* sub-messages, root excluded */
  STANDIN_PB_MAX_DEPTH = 3,    /* nesting depth, root = 1 */
  STANDIN_PB_REPEATED = 4,     /* repeated elements, all levels */
  STANDIN_PB_VAR_BYTES = 5,    /* bytes of string/bytes fields */
  STANDIN_PB_FIELD_WORDS = 6   /* sum over messages of ceil(type fields / 32) */
};

/* JPEG: */
enum {
  STANDIN_JPEG_INPUT_BYTES = 0,
  STANDIN_JPEG_WIDTH = 1,
  STANDIN_JPEG_HEIGHT = 2,
  STANDIN_JPEG_COMPONENTS = 3,
  STANDIN_JPEG_SUBSAMPLING = 4, /* 1 gray, 2 4:4:4, 3 4:2:2, 4 4:2:0, 5 4:4:0, 6 4:1:1, 7 other */
  STANDIN_JPEG_PROGRESSIVE = 5, /* 1 if not baseline sequential */
  STANDIN_JPEG_RESTART = 6,     /* restart interval in MCUs, 0 = none */
  STANDIN_JPEG_OUT_PIXELS = 7,
  STANDIN_JPEG_OUT_BYTES = 8,
  STANDIN_JPEG_SCALE_NUM = 9,
  STANDIN_JPEG_SCALE_DENOM = 10
};

/* One request. Pointers are valid during the predict call only. */
typedef struct {
  uint32_t api;          /* STANDIN_API_* */
  uint32_t nfeat;        /* valid slots in feat */
  const uint64_t *feat;  /* features, slots above */
  const char *type;      /* message type full name ("foo.Bar"), JPEG class, or "" */
  uint64_t recorded_ns;  /* software latency of this call when recorded */
  const uint8_t *req;    /* request bytes (unpack: the encoded message; JPEG:
                            see traces/FORMAT.md), NULL for message trees */
  uint64_t req_len;      /* request bytes, or the encoded size for trees */
  const uint8_t *resp;   /* response bytes (pack: the encoded message), or NULL */
  uint64_t resp_len;
  const uint8_t *fp;     /* 16-byte request fingerprint */
} standin_request;

enum { STANDIN_SUPPORTED = 0, STANDIN_UNSUPPORTED = 1 };

typedef struct {
  uint32_t abi;        /* STANDIN_IFACE_ABI */
  const char *name;    /* short name, shown in reports */
  const char *params;  /* documentation: "key=default,..." */
  const char *summary; /* one line: what it models, and its source */
  /* Make an instance from the user's key=value parameters. On error return
   * NULL with a message in err (at most errcap bytes) that names the bad
   * key or value. */
  void *(*create)(int n, const char *const *keys, const char *const *values, char *err,
                  size_t errcap);
  /* STANDIN_SUPPORTED and *service_ns, or STANDIN_UNSUPPORTED: the call then
   * stays in software. */
  int (*predict)(void *inst, const standin_request *r, uint64_t *service_ns);
  void (*destroy)(void *inst); /* may be NULL */
} standin_iface;

typedef const standin_iface *(*standin_iface_entry_fn)(void);

#endif

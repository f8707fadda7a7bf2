/* standin_iface.h — the performance-interface ABI of standin.
 *
 * A performance interface predicts how long an accelerator takes to serve
 * one request, or says it cannot serve it. standin's built-in models and
 * user plugins implement the same structure. A plugin is a shared object
 * that exports
 *
 *     const standin_iface *standin_iface_entry(void);
 *
 * and is used with `--iface ./model.so:key=value,...` (report, whatif,
 * sweep, compare, replay) or in a plan file; `standin models ./model.so`
 * shows what it says of itself. Build one with
 *
 *     cc -shared -fPIC -o model.so model.c $(pkg-config --cflags standin)
 *
 * (with standin installed under a PREFIX pkg-config does not search, set
 * PKG_CONFIG_PATH=PREFIX/lib/pkgconfig first, or give -IPREFIX/include/standin).
 *
 * Models run in the standin command before and after the program (never
 * inside it), once per recorded call (and again for each value a sweep
 * tries), so they may take their time; they must be deterministic for a
 * given request. What a plugin must know:
 *
 *   - predict is called from one thread at a time, but several instances
 *     of one plugin live at once (a sweep makes one per value, a plan may
 *     name the plugin twice, with other parameters): keep every parameter
 *     and all state in the instance create returns, none in globals (a
 *     sweep whose values all predict the same warns of it).
 *   - standard output is the report's or the program's: anything a plugin
 *     prints there (constructors and destructors included) goes to standard
 *     error; print diagnostics to stderr.
 *   - predict returns STANDIN_SUPPORTED with *service_ns in nanoseconds
 *     (0 if not set), or anything else for "unsupported" (the call stays in
 *     software). A time over an hour is taken as unsupported, with a word:
 *     it is a unit error (ps, cycles) or a negative that wrapped.
 *   - to say why a call stays in software (report, whatif and replay show
 *     the reason and count the calls per reason), return your own nonzero
 *     code from predict and also export
 *
 *         const char *standin_iface_why(int code);
 *
 *     which gives the reason for a code: one short line of UTF-8
 *     ("messages over 4 KiB"; up to 200 bytes are kept, control characters
 *     become blanks and bytes that are no UTF-8 '?'), or NULL for the
 *     generic "the model does not support this request". It is optional,
 *     called on the thread that called predict, right after predict
 *     refused; standin copies the text. A model's first 256 different
 *     texts are counted apart, any more together under one reason.
 *   - a device that takes a new request before the last one is done (a
 *     pipeline) may say how long each request keeps one of its engines
 *     from taking the next, its initiation interval, by exporting
 *
 *         uint64_t standin_iface_interval(void *inst,
 *                                         const standin_request *r,
 *                                         uint64_t service_ns);
 *
 *     called right after predict said yes, with the time it gave. It is
 *     optional: without it, and when it returns service_ns or more, a
 *     request holds its engine for its whole service time (one request at
 *     a time per engine, `engines=N` in a plan). Its request still takes
 *     service_ns to complete; only the next one's queueing changes. 0: the
 *     request never makes another wait.
 *   - create refuses an unknown or bad key itself (standin does not check
 *     keys against `params`), with a message in err; a typo a plugin
 *     ignores is invisible. create never sees the accelerator settings
 *     standin takes for itself: engines, deliver, link, link_onchip_ns,
 *     link_rtt_ns, link_gbps and link_poll_ns; any other key is the
 *     plugin's.
 *   - a crash inside the plugin (its constructors and destructors too)
 *     ends standin, which names the plugin and the function first; so does
 *     exit() there, with status 1, whatever status it was given: to refuse,
 *     return NULL from create or a nonzero code from predict.
 *
 * Versioning: STANDIN_IFACE_ABI changes only when this structure or the
 * request changes incompatibly; standin refuses a plugin whose `abi` it
 * does not know, with a message naming both versions. */
#ifndef STANDIN_IFACE_ABI_H
#define STANDIN_IFACE_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
  STANDIN_PB_FIELD_WORDS = 6,  /* sum over messages of ceil(type fields / 32) */
  /* Not of the message but of the recorded call (nfeat > 7 only): the time
   * of the page faults it took writing into memory the program had not
   * touched (a pack into a fresh buffer), 0 when none or not counted. A
   * device writing there takes them too: standin adds it to the built-in
   * device models' time; a plugin's predict is the whole call's time, and
   * may add it itself. */
  STANDIN_PB_FAULT_NS = 7
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
  STANDIN_JPEG_SCALE_DENOM = 10,
  STANDIN_JPEG_OUT_COLD = 11, /* per mille of the output the library left in memory, not
                                 the caches (measured for each decode when recorded) */
  /* Not of the image but of the recorded decode (nfeat > 15 only), as
   * STANDIN_PB_FAULT_NS: the time of the page faults it took writing its
   * rows into memory the program had not touched (a buffer allocated for
   * the image), 0 when none. Added to the built-in device models' time. */
  STANDIN_JPEG_FAULT_NS = 15,
  /* Likewise (nfeat > 16 only): the time the decode's calls spent in the
   * program's own source manager making the bytes the library read (a
   * program that hands them one at a time out of a PDF stream), 0 when
   * none was timed. A device fed the same bytes waits for them: added to
   * the built-in device models' time, before the link in. */
  STANDIN_JPEG_SOURCE_NS = 16
};

/* One request. Pointers are valid during the predict call only, and point to
 * read-only data: a plugin is given copies, and a request it wrote into is
 * not taken (it stays in software, with that reason). */
typedef struct {
  uint32_t api;          /* STANDIN_API_* */
  uint32_t nfeat;        /* valid slots in feat */
  const uint64_t *feat;  /* features, slots above */
  const char *type;      /* message type full name ("foo.Bar"), JPEG class, or "" */
  uint64_t recorded_ns;  /* software latency of this call when recorded */
  /* The same in every command (whatif, report, sweep, compare and replay): */
  const uint8_t *req;    /* JPEG decodes: the request, a header with the decode's
                            parameters, then the JPEG datastream (traces/FORMAT.md
                            in standin's sources, "Request blob"); NULL for
                            protobuf calls, which the features describe */
  uint64_t req_len;      /* JPEG: bytes of req; unpack: bytes of the encoded
                            message; pack, size, pack_to_buffer: the encoded size */
  const uint8_t *resp;   /* NULL: the response is what the accelerator makes */
  uint64_t resp_len;     /* response bytes as recorded: pack and pack_to_buffer
                            the encoded size, JPEG the rows' bytes, else 0 */
  const uint8_t *fp;     /* 16-byte request fingerprint */
} standin_request;

enum { STANDIN_SUPPORTED = 0, STANDIN_UNSUPPORTED = 1 };

typedef struct {
  uint32_t abi;        /* STANDIN_IFACE_ABI */
  const char *name;    /* short name, one word: it names the accelerator of an
                          --iface in reports and --vary NAME.PARAM (blanks and
                          control characters become '_', "" "plugin") */
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

#ifdef __cplusplus
}
#endif

#endif

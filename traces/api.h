/* api.h — the intercepted APIs and the request features recorded for each.
 *
 * Shared by every module: the trace stores these codes, interpose/ fills
 * them, interfaces/ reads them. Codes are part of the trace format: never
 * renumber, only append. */
#ifndef STANDIN_API_H
#define STANDIN_API_H

#include <stdint.h>

/* One code per intercepted entry point. */
typedef enum {
  ST_API_NONE = 0,
  ST_API_PB_PACK = 1,        /* protobuf_c_message_pack */
  ST_API_PB_SIZE = 2,        /* protobuf_c_message_get_packed_size */
  ST_API_PB_PACK_BUF = 3,    /* protobuf_c_message_pack_to_buffer */
  ST_API_PB_UNPACK = 4,      /* protobuf_c_message_unpack */
  ST_API_JPEG_DECODE = 16,   /* libjpeg: one image, header to finish */
  ST_API_TJ_DECODE = 17,     /* TurboJPEG: tjDecompress* */
  ST_API_MAX = 32
} st_api;

/* The API family an accelerator serves ("protobuf" or "jpeg"). */
typedef enum { ST_FAMILY_NONE = 0, ST_FAMILY_PROTOBUF = 1, ST_FAMILY_JPEG = 2 } st_family;

/* Feature slots a call carries (st_call.feat); a trace may hold more
 * (STF_MAX_NFEAT), which a reader that does not know them ignores. */
#define ST_MAX_FEAT 17

/* Feature slots of protobuf calls (st_call.feat[]). The request is the
 * message tree for pack/size/pack_to_buffer and the encoded bytes for
 * unpack; features describe the message either way. */
enum {
  ST_PBF_ENCODED_SIZE = 0, /* bytes of the encoded message */
  ST_PBF_FIELDS = 1,       /* fields present, all levels */
  ST_PBF_SUBMSGS = 2,      /* sub-messages, all levels (root excluded) */
  ST_PBF_MAX_DEPTH = 3,    /* nesting depth, root = 1 */
  ST_PBF_REPEATED = 4,     /* elements in repeated fields, all levels */
  ST_PBF_VAR_BYTES = 5,    /* bytes in string and bytes fields, all levels */
  ST_PBF_FIELD_WORDS = 6,  /* sum over messages of ceil(fields in type / 32) */
  /* Not a property of the message, but of the call: the time of the page
   * faults its thread took inside it (first touches of the program's
   * memory: a pack into a fresh buffer), estimated as their number times
   * the process's measured cost of one (record/faults.h); 0: none, or not
   * counted (calls under 2 us mostly are not; traces before 2026-11-30
   * have 7 slots). Models of devices add it to their time (plan.c). */
  ST_PBF_FAULT_NS = 7,
  ST_PBF_NFEAT = 8
};

/* Feature slots of JPEG decodes. */
enum {
  ST_JPF_INPUT_BYTES = 0, /* compressed size */
  ST_JPF_WIDTH = 1,       /* image width */
  ST_JPF_HEIGHT = 2,
  ST_JPF_COMPONENTS = 3,
  ST_JPF_SUBSAMPLING = 4, /* st_jpeg_subsamp */
  ST_JPF_PROGRESSIVE = 5, /* 1 if progressive (or any non-baseline) */
  ST_JPF_RESTART = 6,     /* restart interval in MCUs, 0 = none */
  ST_JPF_OUT_PIXELS = 7,  /* output width * height */
  ST_JPF_OUT_BYTES = 8,   /* decoded bytes returned to the program */
  ST_JPF_SCALE_NUM = 9,
  ST_JPF_SCALE_DENOM = 10,
  /* of the output's cache lines, per mille, how many the decoder left in
   * memory rather than in the caches (non-temporal stores; placement.h):
   * measured at record time, delivered that way by replay. Not a property
   * of the request, but of the implementation that served it. */
  ST_JPF_OUT_COLD = 11,
  /* Where the program dropped the bytes the library left unread when its
   * source suspended, and offered others in their place (gdk-pixbuf's
   * loader closed on a truncated image offers a fake EOI): the datastream
   * bytes the library had used by then (from SOI), how many it left
   * unread, and their XXH3-64. 0, 0, 0: it did not. Not a property of the
   * image, but of how the program delivered it; replay gives those bytes
   * back at that place (jpeg_obj.h, jpg_drop). */
  ST_JPF_DROP_AT = 12,
  ST_JPF_DROP_LEN = 13,
  ST_JPF_DROP_HASH = 14,
  /* Not of the image, but of the call, as ST_PBF_FAULT_NS: the time of the
   * page faults the decode took writing its rows into memory the program
   * had not touched (a buffer it has just allocated for the image), the
   * pages found absent before the library wrote them, times the process's
   * measured cost of one (record/faults.h); 0 when none (traces before
   * 2026-11-30 have no such slot). Models of devices add it to their time. */
  ST_JPF_FAULT_NS = 15,
  /* Not of the image either: the time the decode's calls spent in the
   * program's own source manager (fill_input_buffer, skip_input_data,
   * init_source) producing the bytes (poppler's DCTStream hands them one
   * at a time out of a PDF stream: ~a fifth of its decode); estimated from
   * a sample of the callbacks when they are many and short (record/
   * rec_jpeg.c); 0 when none was timed (traces before 2026-12-01). A
   * device fed the same bytes waits for them: models of devices add it. */
  ST_JPF_SOURCE_NS = 16,
  ST_JPF_NFEAT = 17
};

typedef enum {
  ST_SUBSAMP_UNKNOWN = 0,
  ST_SUBSAMP_GRAY = 1,
  ST_SUBSAMP_444 = 2,
  ST_SUBSAMP_422 = 3,
  ST_SUBSAMP_420 = 4,
  ST_SUBSAMP_440 = 5,
  ST_SUBSAMP_411 = 6,
  ST_SUBSAMP_OTHER = 7
} st_jpeg_subsamp;

/* What record --retime's timing runs note as a decode's size, to pair it
 * with the recorded decode (cli/retime.c): rows read, output pixels and
 * components for libjpeg (two 4000x3000 images, one grey, were paired by
 * their rows alone); the compressed size and the result for TurboJPEG. */
static inline uint64_t st_jpeg_timing_size(uint64_t rows, uint64_t out_pixels, uint64_t ncomp) {
  return (rows * 0x9E3779B97F4A7C15ull ^ out_pixels * 0xC2B2AE3D27D4EB4Full) + ncomp;
}
static inline uint64_t st_tj_timing_size(uint64_t input_bytes, uint64_t result) {
  return input_bytes * 0x9E3779B97F4A7C15ull ^ result;
}

/* Short lower-case name of an API ("pb.pack", "jpeg.decode"), or "?". */
const char *st_api_name(int api);
/* Family an API belongs to. */
st_family st_api_family(int api);

/* Which sides of a call of api are bytes: ST_SIDE_REQ when its request is
 * (unpack's encoded message, a JPEG image; pack's and get_packed_size's is a
 * message tree), ST_SIDE_RESP when its response is (get_packed_size's is a
 * number, unpack's a message tree). */
enum { ST_SIDE_REQ = 1, ST_SIDE_RESP = 2 };
unsigned st_api_byte_sides(int api);
/* The sides of one call that are bytes: its API's, and its response when
 * the trace holds response bytes for it (record saves none for an unpack,
 * whose tree replay rebuilds from the request; a trace from elsewhere
 * may). */
unsigned st_call_byte_sides(int api, uint64_t resp_len);
/* Name of a feature slot of an API ("encoded_size"), or NULL past the end. */
const char *st_feature_name(int api, int slot);
/* The slot of an API's calls that holds their page-fault time
 * (ST_PBF_FAULT_NS, ST_JPF_FAULT_NS), or -1. */
int st_fault_slot(int api);
/* The slot of an API's calls that holds their time in the program's own
 * callbacks feeding the request (ST_JPF_SOURCE_NS), or -1. */
int st_source_slot(int api);

#endif

#include "api.h"

#include <stddef.h>

const char *st_api_name(int api) {
  switch (api) {
  case ST_API_PB_PACK: return "pb.pack";
  case ST_API_PB_SIZE: return "pb.size";
  case ST_API_PB_PACK_BUF: return "pb.pack_to_buffer";
  case ST_API_PB_UNPACK: return "pb.unpack";
  case ST_API_JPEG_DECODE: return "jpeg.decode";
  case ST_API_TJ_DECODE: return "tj.decode";
  default: return "?";
  }
}

st_family st_api_family(int api) {
  if (api >= ST_API_PB_PACK && api <= ST_API_PB_UNPACK)
    return ST_FAMILY_PROTOBUF;
  if (api == ST_API_JPEG_DECODE || api == ST_API_TJ_DECODE)
    return ST_FAMILY_JPEG;
  return ST_FAMILY_NONE;
}

static const char *const pb_feat[ST_PBF_NFEAT] = {"encoded_size", "fields",   "submsgs",
                                                  "max_depth",    "repeated", "var_bytes",
                                                  "field_words",  "fault_ns"};
static const char *const jpeg_feat[ST_JPF_NFEAT] = {
    "input_bytes", "width",         "height",       "components",
    "subsampling", "progressive",   "restart",      "out_pixels",
    "out_bytes",   "scale_num",     "scale_denom",  "out_cold_permille",
    "dropped_at",  "dropped_bytes", "dropped_hash", "fault_ns",
    "source_ns"};

int st_fault_slot(int api) {
  switch (st_api_family(api)) {
  case ST_FAMILY_PROTOBUF: return ST_PBF_FAULT_NS;
  case ST_FAMILY_JPEG: return ST_JPF_FAULT_NS;
  default: return -1;
  }
}

int st_source_slot(int api) {
  return st_api_family(api) == ST_FAMILY_JPEG ? ST_JPF_SOURCE_NS : -1;
}

const char *st_feature_name(int api, int slot) {
  if (slot < 0)
    return NULL;
  switch (st_api_family(api)) {
  case ST_FAMILY_PROTOBUF: return slot < ST_PBF_NFEAT ? pb_feat[slot] : NULL;
  case ST_FAMILY_JPEG: return slot < ST_JPF_NFEAT ? jpeg_feat[slot] : NULL;
  default: return NULL;
  }
}

unsigned st_api_byte_sides(int api) {
  switch (api) {
  case ST_API_PB_PACK:
  case ST_API_PB_PACK_BUF: return ST_SIDE_RESP;
  case ST_API_PB_SIZE: return 0;
  case ST_API_PB_UNPACK: return ST_SIDE_REQ;
  default: return ST_SIDE_REQ | ST_SIDE_RESP;
  }
}

unsigned st_call_byte_sides(int api, uint64_t resp_len) {
  return st_api_byte_sides(api) | (resp_len ? ST_SIDE_RESP : 0);
}

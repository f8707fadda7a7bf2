/* strerror.c — text for every st_err code. */
#include "trace.h"

/* The switch has no default so that -Wswitch flags a code added to st_err
 * without a message here. */
const char *st_strerror(int err) {
  switch ((st_err)err) {
  case ST_OK: return "success";
  case ST_E_END: return "no more records";
  case ST_E_IO: return "input/output error";
  case ST_E_NOMEM: return "out of memory";
  case ST_E_ARG: return "invalid argument";
  case ST_E_MAGIC: return "not a standin trace file (bad magic number)";
  case ST_E_VERSION: return "trace written by a newer standin: upgrade standin to read it";
  case ST_E_HEADER: return "trace file header is damaged";
  case ST_E_CRC: return "checksum mismatch: the trace is damaged from this point on";
  case ST_E_TRUNCATED: return "trace ends in the middle of a chunk: the rest was never written";
  case ST_E_CORRUPT: return "trace contents are invalid although the checksum matches";
  case ST_E_ZLIB: return "compression library error";
  case ST_E_NOTFOUND: return "no such blob in the trace";
  case ST_E_EXISTS: return "output file already exists";
  case ST_E_TOOBIG: return "record or payload too large for the trace format (limit 1 GiB)";
  }
  return "unknown error";
}

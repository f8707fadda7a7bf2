/* header.c — a trace file's header: checking its preamble and decoding its
 * payload (FORMAT.md, "File header"), for the reader and for
 * st_peek_process, which the record shim links without the rest of the
 * reader (and its decompressor). */
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "trace.h"

int stf_check_preamble(const uint8_t *pre, uint32_t *version_out, uint32_t *plen) {
  if (stf_crc(pre, 20) != stf_get_u32(pre + 20))
    return ST_E_HEADER;
  uint16_t version = stf_get_u16(pre + 8), min_read = stf_get_u16(pre + 10);
  uint32_t features = stf_get_u32(pre + 12);
  if (min_read > ST_FORMAT_VERSION || (features & STF_FEAT_REQUIRED & ~STF_FEATURES_KNOWN))
    return ST_E_VERSION;
  if (min_read == 0 || min_read > version)
    return ST_E_HEADER;
  if (version < ST_FORMAT_MIN_READ)
    return ST_E_VERSION;
  *plen = stf_get_u32(pre + 16);
  if (*plen > STF_HDR_MAX_PAYLOAD)
    return ST_E_HEADER;
  *version_out = version;
  return ST_OK;
}

/* Copy a length-prefixed string to *dst with a NUL; "" when out of bounds
 * (the cursor is then marked bad). dst NULL: skip it ("" too). */
static const char *take_str(stf_cur *c, char **dst) {
  uint64_t n = stf_get_varint(c);
  const uint8_t *s = stf_get_raw(c, n);
  if (!s || c->bad || !dst) /* a spent cursor yields n = 0 with no byte behind it */
    return "";
  char *d = *dst;
  memcpy(d, s, (size_t)n);
  d[n] = '\0';
  *dst += n + 1;
  return d;
}

int stf_parse_header(const uint8_t *p, uint32_t plen, st_header *h, char **s, const char **argv) {
  stf_cur c = {p, p + plen, 0};
  h->pid = (uint32_t)stf_get_varint_max(&c, UINT32_MAX);
  h->ppid = (uint32_t)stf_get_varint_max(&c, UINT32_MAX);
  h->exec_seq = (uint32_t)stf_get_varint_max(&c, UINT32_MAX);
  h->start_realtime_ns = stf_get_varint(&c);
  h->start_mono_ns = stf_get_varint(&c);
  h->clock = take_str(&c, s);
  h->host = take_str(&c, s);
  h->exe = take_str(&c, s);
  h->tool_version = take_str(&c, s);
  h->argc = (uint32_t)stf_get_varint_max(&c, ST_MAX_ARGS);
  for (uint32_t i = 0; i < h->argc; i++) {
    const char *a = take_str(&c, s);
    if (argv)
      argv[i] = a;
  }
  h->argv = argv;
  h->pidns = h->start_ticks = 0;
  if (!c.bad && c.p < c.end) {
    h->pidns = stf_get_varint(&c);
    h->start_ticks = stf_get_varint(&c);
  }
  return c.bad ? ST_E_HEADER : ST_OK;
}

int st_peek_process(int fd, uint32_t *pid, uint64_t *pidns, uint64_t *start_ticks) {
  uint8_t pre[STF_PREAMBLE_LEN];
  struct stat st;
  if (fstat(fd, &st) != 0)
    return ST_E_IO;
  ssize_t got = pread(fd, pre, sizeof pre, 0);
  if (got < 0)
    return ST_E_IO;
  if (memcmp(pre, STF_MAGIC, (size_t)got < STF_MAGIC_LEN ? (size_t)got : STF_MAGIC_LEN) != 0)
    return ST_E_MAGIC;
  if ((size_t)got < sizeof pre)
    return ST_E_TRUNCATED;
  uint32_t version, plen;
  int e = stf_check_preamble(pre, &version, &plen);
  if (e)
    return e;
  uint64_t end = STF_PREAMBLE_LEN + (uint64_t)plen + STF_PAYLOAD_CRC_LEN;
  if ((uint64_t)st.st_size < end)
    return ST_E_TRUNCATED;
  uint8_t *m = mmap(NULL, (size_t)end, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m == MAP_FAILED)
    return ST_E_IO;
  const uint8_t *payload = m + STF_PREAMBLE_LEN;
  st_header h;
  e = stf_crc(payload, plen) != stf_get_u32(payload + plen)
          ? ST_E_HEADER
          : stf_parse_header(payload, plen, &h, NULL, NULL);
  munmap(m, (size_t)end);
  if (e)
    return e;
  *pid = h.pid;
  *pidns = h.pidns;
  *start_ticks = h.start_ticks;
  return ST_OK;
}

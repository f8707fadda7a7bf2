/* fuzz_trace_reader — the trace reader on any file: open it, stream every
 * record, and fetch every blob a record names (st_reader_blob), touching
 * every byte the reader returns; and the record shim's st_peek_process,
 * which must read a header exactly as the reader does. See fuzz_common.h
 * for the input layout. */
#include <fcntl.h>

#include "fuzz_common.h"

static void touch_str(const char *s) {
  fz_touch(s, strlen(s) + 1);
}

static void read_blob(st_reader *r, uint64_t id) {
  const void *data;
  uint64_t len;
  if (id && st_reader_blob(r, id, &data, &len) == ST_OK)
    fz_touch(data, (size_t)len);
}

static void touch_header(const st_header *h) {
  touch_str(h->clock);
  touch_str(h->host);
  touch_str(h->exe);
  touch_str(h->tool_version);
  for (uint32_t i = 0; i < h->argc; i++)
    touch_str(h->argv[i]);
}

static void touch_record(st_reader *r, const st_record *rec) {
  switch (rec->kind) {
  case ST_REC_CALL:
    read_blob(r, rec->u.call.req_blob);
    read_blob(r, rec->u.call.resp_blob);
    read_blob(r, rec->u.call.req_blob); /* again: the blob slot may have moved */
    break;
  case ST_REC_BLOB: read_blob(r, rec->u.blob.id); break;
  case ST_REC_TYPE:
    touch_str(rec->u.type.name);
    fz_touch(rec->u.type.schema, rec->u.type.schema_len);
    break;
  case ST_REC_SITE:
    for (uint32_t i = 0; i < rec->u.site.nframes; i++) {
      touch_str(rec->u.site.frames[i].module);
      touch_str(rec->u.site.frames[i].symbol);
    }
    break;
  case ST_REC_THREAD: touch_str(rec->u.thread.name); break;
  case ST_REC_NOTE:
    touch_str(rec->u.note.key);
    touch_str(rec->u.note.value);
    break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  const char *path = fz_trace_file(d, n, "in.trace");
  uint32_t pid = 0;
  uint64_t ns = 0, start = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  int peek = fd >= 0 ? st_peek_process(fd, &pid, &ns, &start) : ST_E_IO;
  if (fd >= 0)
    close(fd);
  st_reader *r;
  int opened = st_reader_open(&r, path);
  if ((peek == ST_OK) != (opened == ST_OK))
    abort();
  if (opened != ST_OK)
    return 0;
  const st_header *h = st_reader_header(r);
  if (pid != h->pid || ns != h->pidns || start != h->start_ticks)
    abort();
  touch_header(h);
  st_record rec;
  int rc;
  while ((rc = st_reader_next(r, &rec)) == ST_OK)
    touch_record(r, &rec);
  if (st_reader_next(r, &rec) != ST_E_END) /* the stream stays ended */
    abort();
  st_read_status s;
  st_reader_status(r, &s);
  if (s.good_bytes > s.file_bytes || (rc == ST_E_END) != (s.error == ST_OK))
    abort();
  read_blob(r, 1); /* blobs of a closed file, through the index */
  read_blob(r, UINT64_MAX);
  st_reader_close(r);
  return 0;
}

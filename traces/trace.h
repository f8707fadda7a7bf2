/* trace.h — standin trace files: a writer and a streaming reader.
 *
 * One trace file holds the intercepted calls of one process image (a forked
 * child or an exec'd program gets its own file). The file is a header
 * followed by zlib-compressed chunks, each with its own CRC, so a reader can
 * return every complete chunk of a file whose writer was killed. The byte
 * layout is specified in traces/FORMAT.md.
 *
 * This library knows nothing about preloading or about the APIs: it stores
 * calls, payload blobs (de-duplicated by content), message types with their
 * schemas, call sites, threads and notes. Functions return an st_err code and
 * never print or exit. */
#ifndef STANDIN_TRACE_H
#define STANDIN_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

#define ST_FORMAT_VERSION 1  /* version this code writes */
#define ST_FORMAT_MIN_READ 1 /* oldest version this code reads */

typedef enum {
  ST_OK = 0,
  ST_E_END,       /* no more records (not an error) */
  ST_E_IO,        /* read/write/open failed; errno is preserved */
  ST_E_NOMEM,     /* out of memory */
  ST_E_ARG,       /* invalid argument */
  ST_E_MAGIC,     /* not a standin trace file */
  ST_E_VERSION,   /* written by a newer standin this one cannot read */
  ST_E_HEADER,    /* file header damaged (bad checksum or fields) */
  ST_E_CRC,       /* a chunk checksum does not match: data after it dropped */
  ST_E_TRUNCATED, /* file ends inside a chunk: the tail was not written */
  ST_E_CORRUPT,   /* checksum good but contents invalid */
  ST_E_ZLIB,      /* (de)compression failed */
  ST_E_NOTFOUND,  /* unknown blob id */
  ST_E_EXISTS,    /* output file already exists */
  ST_E_TOOBIG     /* a record or blob exceeds the format limits */
} st_err;

/* Human-readable text for an st_err (static, never NULL). */
const char *st_strerror(int err);

/* ---- Data model ---------------------------------------------------------- */

#define ST_MAX_FRAMES 16
#define ST_MAX_ARGS 256

/* Process-level facts, written once at the start of the file. Strings are
 * NUL-terminated; argv holds argc entries (at most ST_MAX_ARGS kept). */
typedef struct {
  uint32_t version;            /* format version of the file (reader fills) */
  uint32_t pid, ppid;
  uint32_t exec_seq;           /* how many execs this pid went through before */
  uint64_t start_realtime_ns;  /* CLOCK_REALTIME at shim start */
  uint64_t start_mono_ns;      /* the trace clock at shim start */
  const char *clock;           /* name of the trace clock: "CLOCK_MONOTONIC" */
  const char *host;            /* hostname */
  const char *exe;             /* /proc/self/exe target */
  const char *tool_version;    /* standin version that wrote the file */
  uint32_t argc;
  const char *const *argv;
  /* Which process this is, beyond its pid (0: not known, as in files
   * written before them): the inode of its PID namespace
   * (/proc/self/ns/pid) and its start time in clock ticks since boot
   * (/proc/self/stat). An exec keeps both; a process with the same pid in
   * another namespace, or a later one that reused the pid, has others. */
  uint64_t pidns;
  uint64_t start_ticks;
} st_header;

/* Call flags. */
enum {
  ST_CALL_NOT_OFFLOADABLE = 1u << 0, /* a mode an accelerator would not serve; see reason */
  ST_CALL_FAILED = 1u << 1,          /* the real call returned an error */
  ST_CALL_NO_RESPONSE = 1u << 2,     /* response could not be captured; see reason */
  ST_CALL_RESP_DIGEST = 1u << 3,     /* the response blob is a digest of the response, which
                                        offline tools rebuild from the request (the API's
                                        section of FORMAT.md); resp_len is still its size */
};

/* One intercepted invocation (outermost call only). */
typedef struct {
  uint8_t api;         /* st_api */
  uint8_t flags;       /* ST_CALL_* */
  uint16_t reason;     /* API-specific reason code for the flags, 0 = none */
  uint32_t thread;     /* stable thread index: creation order, main thread 0 */
  uint32_t type;       /* message type id (see st_type), 0 = none */
  uint32_t site;       /* call site id (see st_site), 0 = unknown */
  uint64_t seq;        /* per-file sequence number of the call, from 0 */
  uint64_t start_ns;   /* trace clock at entry */
  uint64_t latency_ns; /* duration of the real call alone */
  uint8_t fp[16];      /* request fingerprint */
  uint64_t req_blob;   /* blob id of the saved request, 0 = none */
  uint64_t resp_blob;  /* blob id of the saved response, 0 = none */
  uint64_t req_len;    /* request size in bytes (even if not saved) */
  uint64_t resp_len;   /* response size in bytes (even if not saved) */
  uint64_t result;     /* scalar return value (packed size, ...) */
  uint8_t nfeat;       /* used slots of feat[] */
  uint64_t feat[ST_MAX_FEAT]; /* request features, slots in api.h */
} st_call;

/* A message type (or other request type) and its schema, stored once. */
typedef struct {
  uint32_t id;           /* > 0, unique in the file */
  uint8_t family;        /* st_family */
  const char *name;      /* full name, e.g. "foo.Bar" */
  const void *schema;    /* opaque schema bytes (interpose/ defines them) */
  uint32_t schema_len;
} st_type;

typedef struct {
  uint64_t ip;         /* absolute address in the recorded process */
  uint64_t offset;     /* ip - module load base */
  const char *module;  /* path of the object, "" if unknown */
  const char *symbol;  /* nearest symbol, "" if unknown */
  uint64_t sym_offset; /* ip - symbol start */
  /* a C++ symbol demangled, without its parameters ("ns::Cls::fn"); NULL
   * when not set (the trace does not hold it: the CLI's scan sets it) */
  const char *pretty;
} st_frame;

/* A call site: the stack above the intercepted call, innermost first. */
typedef struct {
  uint32_t id; /* > 0, unique in the file */
  uint32_t nframes;
  st_frame frames[ST_MAX_FRAMES];
} st_site;

typedef struct {
  uint32_t index;   /* stable index used by st_call.thread */
  uint32_t os_tid;  /* kernel tid in the recorded run */
  uint32_t parent;  /* index of the creating thread (0 for main) */
  const char *name; /* thread name if known, "" otherwise */
} st_thread;

/* Free-form fact about the run: ("warning", "..."), ("lost_calls", "12"). */
typedef struct {
  const char *key;
  const char *value;
} st_note;

/* A blob record as seen by the reader (contents via st_reader_blob). */
typedef struct {
  uint64_t id;
  uint64_t len;
} st_blob_ref;

typedef enum {
  ST_REC_CALL = 1,
  ST_REC_BLOB = 2,
  ST_REC_TYPE = 3,
  ST_REC_SITE = 4,
  ST_REC_THREAD = 5,
  ST_REC_NOTE = 6
} st_rec_kind;

/* One record returned by st_reader_next. Pointers inside stay valid until
 * the next st_reader_next or st_reader_close on the same reader. */
typedef struct {
  st_rec_kind kind;
  union {
    st_call call;
    st_blob_ref blob;
    st_type type;
    st_site site;
    st_thread thread;
    st_note note;
  } u;
} st_record;

/* ---- Writer -------------------------------------------------------------- */

typedef struct st_writer st_writer; /* incomplete type */

/* Where writers take their memory, and libdeflate its compressors: malloc,
 * realloc and free unless set. A recorder preloaded into a program points
 * it at a heap of its own, so that the program's heap (block placement,
 * and glibc's mmap threshold, which freeing a large block raises) stays
 * as it would be without standin. Set it before any writer is opened. */
typedef struct {
  void *(*alloc)(size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
} st_allocator;
void st_set_allocator(const st_allocator *a);

/* Create `path` (O_EXCL, mode 0600) and write the header. On error nothing
 * is left open and *w is NULL; an existing file gives ST_E_EXISTS. */
int st_writer_open(st_writer **w, const char *path, const st_header *h);
/* The same, with path relative to the directory dirfd (openat; AT_FDCWD
 * for st_writer_open's), as a process in a chroot reaches its trace
 * directory. */
int st_writer_openat(st_writer **w, int dirfd, const char *path, const st_header *h);

/* For a writer inside another program (the record shim): files opened
 * from now on get a descriptor near the top of the soft limit (below
 * 1024), out of the way of the program's own, which take the lowest free
 * number; and a writer's descriptor may be moved (st_writer_move_fd) while
 * its thread writes. The file is closed with the close system call itself,
 * so a hooked close() cannot keep it open. Turning it on grows the
 * process's descriptor table to that height at once (call it while the
 * process has one thread: growing it later stalls a threaded process). */
void st_set_high_fd(int on);
/* fd moved there (close-on-exec; the old number closed), or fd itself
 * when none is free. */
int st_fd_to_high(int fd);
/* The lowest of those high descriptors: near the top of the soft limit,
 * below 1024. */
int st_high_floor(void);
int st_writer_fd(st_writer *w);
/* Move w's file to another descriptor (a high one if free) before the
 * caller lets its old number be reused; returns it, or -1 when none could
 * be had: w's later writes then fail (EBADF) and none lands elsewhere. Safe
 * while another thread writes with w. */
int st_writer_move_fd(st_writer *w);

/* Append records to the current chunk. A chunk is compressed and written
 * when it reaches the chunk size (st_writer_set_chunk_size), on
 * st_writer_flush, and on close. Not thread-safe: one thread per writer. */
int st_writer_add_call(st_writer *w, const st_call *c);
int st_writer_add_type(st_writer *w, const st_type *t);
int st_writer_add_site(st_writer *w, const st_site *s);
int st_writer_add_thread(st_writer *w, const st_thread *t);
int st_writer_add_note(st_writer *w, const st_note *n);

/* Store a payload once: if identical bytes (same length and XXH3-128 hash)
 * were stored before in this file, *id is that blob's id and nothing is
 * written. Ids start at 1. Blobs larger than 1 GiB give ST_E_TOOBIG. */
int st_writer_add_blob(st_writer *w, const void *data, uint64_t len, uint64_t *id);

/* The same with the caller's XXH3-128 of the bytes (hash[0] the low half,
 * hash[1] the high half: XXH3_128bits with the default secret and seed 0),
 * for a caller that needs the hash itself and would otherwise have the
 * bytes hashed twice. A wrong hash makes wrong blobs share ids. */
int st_writer_add_blob_hashed(st_writer *w, const void *data, uint64_t len,
                              const uint64_t hash[2], uint64_t *id);

/* Start loading the dedup slot of a blob with this hash, so that a later
 * st_writer_add_blob_hashed finds it in the cache. Only a hint. */
void st_writer_prefetch_blob(const st_writer *w, const uint64_t hash[2]);

/* Uncompressed bytes per chunk before it is written (default 1 MiB). */
void st_writer_set_chunk_size(st_writer *w, size_t bytes);

/* Compress chunks (1, the default) or store them as they are (0). Storing
 * costs a copy instead of deflate; a recorder falling behind its program
 * switches to it. Takes effect from the next chunk written. Even with 1, a
 * chunk whose deflated sample shrinks by less than an eighth is stored
 * (st_writer_stats.chunks_sampled_out). */
void st_writer_set_compress(st_writer *w, int on);

/* Compress and write the current chunk now (no-op when empty). */
int st_writer_flush(st_writer *w);

/* Flush, write the index and the end mark, close. Accepts NULL. After a
 * failure the file still reads back up to its last complete chunk. */
int st_writer_close(st_writer *w);

/* Stop using the writer without writing anything more (for a forked child
 * that must not touch its parent's file): frees memory and closes this
 * process's descriptor, never writes. Accepts NULL. */
void st_writer_abandon(st_writer *w);

typedef struct {
  uint64_t calls, blobs, blobs_deduped, chunks;
  uint64_t raw_bytes;        /* uncompressed record bytes */
  uint64_t file_bytes;       /* bytes written to the file */
  uint64_t blob_bytes;       /* payload bytes actually stored */
  uint64_t blob_bytes_saved; /* payload bytes not stored thanks to dedup */
  uint64_t chunks_sampled;   /* chunks whose sample was deflated */
  uint64_t chunks_sampled_out; /* stored: a deflated sample barely shrank (of
                                  this chunk, or of one just before) */
} st_writer_stats;

void st_writer_get_stats(const st_writer *w, st_writer_stats *s);

/* ---- Reader -------------------------------------------------------------- */

typedef struct st_reader st_reader; /* incomplete type */

/* Open a trace and read its header. Fails with ST_E_MAGIC, ST_E_VERSION,
 * ST_E_HEADER, ST_E_TRUNCATED (file shorter than its header) or ST_E_IO. */
int st_reader_open(st_reader **r, const char *path);

/* The pid, pidns and start_ticks of the trace open on fd, read from its
 * header alone: the file is mapped, nothing is allocated (the record shim
 * asks this of a file that holds its pid's name). ST_OK, ST_E_MAGIC,
 * ST_E_VERSION, ST_E_HEADER, ST_E_TRUNCATED or ST_E_IO. */
int st_peek_process(int fd, uint32_t *pid, uint64_t *pidns, uint64_t *start_ticks);

/* Header of the file (valid until close). */
const st_header *st_reader_header(const st_reader *r);

/* Next record in file order. Returns ST_OK, ST_E_END after the last record
 * of a cleanly closed file or of the last complete chunk, or an error
 * (ST_E_TRUNCATED, ST_E_CRC, ST_E_CORRUPT, ST_E_ZLIB) when the next chunk
 * cannot be used; every record before it was returned, and every later call
 * returns ST_E_END. */
int st_reader_next(st_reader *r, st_record *rec);

/* Contents of a blob already announced by an ST_REC_BLOB record (or listed
 * in the index of a cleanly closed file). *data stays valid until the next
 * st_reader_blob or st_reader_close. */
int st_reader_blob(st_reader *r, uint64_t id, const void **data, uint64_t *len);

typedef struct {
  uint64_t file_bytes;     /* size of the file */
  uint64_t good_bytes;     /* bytes up to the end of the last good chunk */
  uint64_t chunks;         /* good chunks read so far */
  uint64_t raw_bytes;      /* uncompressed bytes of those chunks */
  uint64_t records;        /* records returned so far */
  uint64_t blob_chunk_loads; /* chunks decoded (again) for st_reader_blob */
  int clean;               /* 1 if the end mark was found (writer closed) */
  int error;               /* st_err that stopped reading, ST_OK if none */
  uint64_t error_offset;   /* file offset where that error was found */
} st_read_status;

void st_reader_status(const st_reader *r, st_read_status *s);

/* Accepts NULL. */
void st_reader_close(st_reader *r);

#endif

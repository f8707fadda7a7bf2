/* rt.h — the record runtime, as seen by the per-API hooks.
 *
 * A hook measures the real call, then hands the runtime one rt_call. The
 * runtime copies it into the calling thread's ring (no lock, no stdio); a
 * background writer thread drains the rings, resolves call sites and message
 * types, de-duplicates payloads and writes compressed chunks. The trace file
 * of a process is created at its first intercepted call. */
#ifndef STANDIN_RECORD_RT_H
#define STANDIN_RECORD_RT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api.h"

/* How a payload reaches the runtime. */
typedef enum {
  RT_PAY_NONE = 0, /* not saved */
  RT_PAY_COPY = 1, /* copy `data` now (the program owns it) */
  RT_PAY_OWN = 2   /* from shim_alloc, by the hook; the runtime frees it */
} rt_pay_kind;

typedef struct {
  rt_pay_kind kind;
  const void *data;
  uint64_t len;
} rt_payload;

typedef struct {
  uint8_t api;
  uint8_t flags;   /* ST_CALL_* */
  uint16_t reason; /* API-specific reason code */
  uint64_t start_ns, latency_ns, result;
  uint8_t fp[16];
  /* protobuf: the message descriptor; JPEG: a static NUL-terminated string
   * naming the request class ("baseline 4:2:0"); NULL: no type */
  const void *type_key;
  uint8_t nfeat;
  uint64_t req_len, resp_len; /* sizes, even when not saved */
  uint32_t nested;            /* hook pass-throughs inside the timed call */
  uint64_t end_ns;            /* end of the real call: from here to the end
                                 of rt_submit is standin's own time, counted
                                 so info can show what recording cost */
  rt_payload req, resp;
  /* protobuf pack calls: fp and the features other than the encoded size
   * are left to the writer thread, which derives them from the response
   * (saved whole: see rt_keep_whole) with the type's schema (see
   * rt_defer_fp); unpack calls: fp is left to the writer, which hashes the
   * request bytes (saved whole) */
  uint8_t derive_fp; /* RT_DERIVE_* */
  /* a pack or pack_to_buffer of the message whose get_packed_size this
   * thread submitted just before (RT_DERIVE_FROM_NEXT): the writer gives
   * that call this one's fingerprint and features */
  uint8_t pairs_size;
  /* the index + 1 of the thread whose work the call was, when that is not
   * the calling thread (a libjpeg decode finished or destroyed by another
   * thread than the one that read its rows); 0: the calling thread's */
  uint32_t work_thread;
  /* protobuf: the time of the page faults the thread took inside the call
   * (faults.h), 0: none or not counted; the writer puts it in the features
   * (ST_PBF_FAULT_NS) after it derives the others */
  uint32_t fault_ns;
  /* last: rt_call_init leaves it as it is, only feat[0..nfeat) is read */
  uint64_t feat[ST_MAX_FEAT];
} rt_call;
_Static_assert(offsetof(rt_call, feat) + sizeof(uint64_t) * ST_MAX_FEAT == sizeof(rt_call),
               "rt_call.feat must be the last member");

enum {
  RT_DERIVE_NONE = 0,
  RT_DERIVE_SELF = 1,     /* from this call's own saved bytes */
  RT_DERIVE_FROM_NEXT = 2 /* get_packed_size: from the pack that pairs with it */
};

/* A call with every member zero but the features (the hooks fill those
 * they declare with nfeat): cheaper than zeroing all of it on every call. */
static inline void rt_call_init(rt_call *c) {
  memset(c, 0, offsetof(rt_call, feat));
}

/* Nonzero when calls of this API family are recorded in this process. The
 * answer is cheap and may change (after exit begins, recording stops). */
int rt_active(st_family fam);

/* Stack above the hook, innermost first; returns the number of frames (at
 * most the configured --stack-depth). */
int rt_stack(void **ips, int max);

/* Make sure payload p reaches the writer whole: an RT_PAY_COPY payload too
 * large to travel inline in the ring is copied to the heap now (rt_submit
 * would do it later). 0 if it will be saved whole; -1 if it cannot be
 * saved (no memory: p is then RT_PAY_NONE). */
int rt_keep_whole(rt_payload *p);

/* Nonzero when a call of message type type_key (a protobuf descriptor)
 * may leave its fingerprint to the writer thread: the writer holds the
 * type's schema (from soon after the type's first call was written until
 * descriptors may go away: dlclose, fork), and it keeps up with this
 * thread (the thread's ring is less than half full; when it is not,
 * more work for the writer would only make the program wait for ring
 * space). Cheap, no lock. */
int rt_defer_fp(const void *type_key);

/* Nonzero when the writer holds type_key's schema (rt_defer_fp without
 * the question of keeping up). */
int rt_schema_known(const void *type_key);

/* Nonzero when a get_packed_size of type_key may leave its fingerprint
 * to the pack that follows it (rt_defer_fp, and no size of the type has
 * failed to pair: rt_size_walk). */
int rt_size_may_pair(const void *type_key);

/* The calling thread's index in the trace (given now if it had none). */
uint32_t rt_thread_index(void);

/* Records this thread has queued so far (calls and notes): two calls are
 * adjacent in the trace when nothing was queued between them. */
uint64_t rt_submitted(void);

/* Queue one call. Takes ownership of RT_PAY_OWN payloads in every case,
 * and may change *c's payloads (staging them): c is the hook's own. */
void rt_submit(rt_call *c, void *const *ips, int nips);

/* The timing-only pass (`record --retime`, timing.c): one outermost
 * call's raw latency, nested pass-throughs and size (unpack: bytes read;
 * the others: what they returned). */
void rt_timing_add(int api, uint64_t start_ns, uint64_t latency_ns, uint32_t nested,
                   uint64_t size);
void rt_timing_write(void); /* at exit and before exec */
void rt_timing_forget(void); /* in a forked child */

/* The process's command line, NUL-separated, into buf (at most cap - 1
 * bytes, NUL-terminated); returns its length, 0 if unknown. The argv the
 * process was started with (copied before main), not what the program has
 * written over it since (tjbench cuts its file name at the dot); a forked
 * child has no start of its own, and gives its current title (a postgres
 * backend's "postgres: user db [local] SELECT"). */
uint32_t rt_cmdline(char *buf, size_t cap);

/* Hooks for non-offloadable modes etc. may attach a note to the trace. */
void rt_note(const char *key, const char *value);

#endif

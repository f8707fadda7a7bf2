/* faults.h — page faults inside a recorded call.
 *
 * A call that writes into memory its program has not touched yet (a pack
 * into a fresh buffer, an unpack whose allocations grow the heap) takes
 * page faults, and their time is in its recorded latency: photo-service's
 * request packs spend 93% of theirs so (1,194 faults in 420 packs, ~10 us
 * each on the AMD test VM). An accelerator's writes into those pages take
 * them too (the kernel must give and clear them before a device or the CPU
 * can write there), so the device models keep that time (cli/plan.c
 * plan_decide) instead of taking it for the library's work that the device
 * takes over.
 *
 * Counting a thread's faults takes a system call (getrusage: ~1 us on the
 * VM, two per call), so a thread counts them only around calls of an API
 * that may fault: its first (a process that packs one message, as a
 * mapserv tile request does, packs it into a fresh buffer), and the next
 * RT_FAULT_WINDOW calls after a call of 2 us or more, for as long as they
 * keep faulting. A window without a fault makes the thread skip 2, 4, ...
 * 1024 such long calls before it counts again. Other calls (the common
 * case) pay one compare. The counts are outside the timed window. */
#ifndef STANDIN_RECORD_FAULTS_H
#define STANDIN_RECORD_FAULTS_H

#include <stdint.h>

#include "shim.h"

#define RT_FAULT_WINDOW 16
#define RT_FAULT_LONG_NS 2000

/* Backing off from a count that keeps finding nothing: after each empty
 * look, 2, 4, ... 1024 chances pass unlooked at; a look that finds
 * something starts over. Zeroed: look at once. */
typedef struct {
  uint16_t skip; /* chances to let pass before looking again */
  uint8_t backoff;
} rt_backoff;

/* A chance to look: 1 when it is let pass (counted down). */
static inline int rt_backoff_pass(rt_backoff *b) {
  if (!b->skip)
    return 0;
  b->skip--;
  return 1;
}

/* What the look found. */
static inline void rt_backoff_found(rt_backoff *b, int found) {
  if (found) {
    b->backoff = 0;
    b->skip = 0;
    return;
  }
  if (b->backoff < 10)
    b->backoff++;
  b->skip = (uint16_t)(1u << b->backoff);
}

/* Zeroed (TLS) before the thread's first call of the API. */
typedef struct {
  uint16_t left;  /* RT_FAULT_OFF: not counting; else the calls counted in
                     this window so far (0: the thread's first call) */
  rt_backoff off; /* long calls to let pass before counting again */
} rt_fault_watch;
#define RT_FAULT_OFF UINT16_MAX

/* The calling thread's page faults so far (minor and major). */
uint64_t rt_thread_faults(void);

/* After a call that took latency_ns: its fault time (its faults times the
 * process's measured cost of one, at most the call's latency), 0 when it
 * took none or was not counted (counted: f0 from rt_thread_faults before
 * it). Updates the watch. */
uint32_t rt_fault_time(rt_fault_watch *w, int counted, uint64_t f0, uint64_t latency_ns);

/* The cost of one page fault of this process (measured once, at the first
 * call that faulted), ns. */
uint64_t rt_fault_cost_ns(void);

/* Around a hook's real call: FAULT_BEGIN before t0, FAULT_END after t1.
 * record --retime's timing-only runs count nothing: their hooks return
 * before FAULT_END, which would have stopped a first call's count (every
 * call of theirs then took two getrusage calls: protogen 2.2x native, not
 * 1.3x). */
#define RT_FAULT_BEGIN(w)                                                                          \
  int fw_counted_ = SHIM_UNLIKELY((w)->left != RT_FAULT_OFF) && !rt_cfg.timing;                    \
  uint64_t fw_f0_ = fw_counted_ ? rt_thread_faults() : 0
#define RT_FAULT_END(w, latency)                                                                   \
  (SHIM_LIKELY(!fw_counted_) && (latency) < RT_FAULT_LONG_NS                                       \
       ? 0                                                                                         \
       : rt_fault_time((w), fw_counted_, fw_f0_, (latency)))

/* ---- Decodes: first writes into the program's output ------------------
 *
 * A JPEG decode writes its rows into the program's buffers; a program that
 * decodes each image into a buffer it has just allocated (cwebp, jpegoptim,
 * a TurboJPEG caller with a fresh tjAlloc) takes a fault on each of its
 * pages inside the decode, and a device writing the rows there would take
 * them too. Counting the thread's faults (above) would count the library's
 * own buffers as well (a progressive decode's coefficients: megabytes a
 * device never needs), so a decode asks instead which of the pages its
 * rows land in are not in memory yet (mincore), before the library writes
 * them, each page once. Rows are looked at RT_OUT_WINDOW pages at a time:
 * one system call per such window of a buffer the rows fill in order, one
 * a decode for a buffer of a few rows used again and again, and none while
 * the thread backs off after decodes that found nothing (rec_jpeg.c
 * note_watch). A page found
 * absent whose fault never comes (a huge page faulted in whole, with
 * transparent huge pages always on) is bounded by the caller with the
 * process's own fault count. */
#define RT_OUT_WINDOW 128

/* Zeroed before a decode's first row. */
typedef struct {
  uintptr_t lo, hi; /* page numbers [lo, hi) that vec answers for */
  uint64_t fresh;   /* pages found absent, each counted once */
  uint64_t faults0; /* the process's faults before the first of them */
  int broken;       /* mincore refused a row's own pages: nothing more is counted */
  unsigned char vec[RT_OUT_WINDOW];
} rt_out_pages;

/* Note the len bytes at p that the next library call will write. */
void rt_out_pages_note(rt_out_pages *w, const void *p, size_t len);

/* After the decode's last row, taking latency_ns: its fault time, the
 * pages it found fresh, at most the faults the process took since the
 * first of them (every thread's: the rows may be read on several), times
 * the process's cost of one, at most latency_ns. 0 without a fresh page
 * (and no system call). */
uint32_t rt_out_fault_ns(const rt_out_pages *w, uint64_t latency_ns);

/* A call that writes a whole image at once (TurboJPEG): which pages of the
 * buffer the program says it passed were in memory before the call
 * (rt_page_snap_take), and after it, the fault time of those of them that
 * its rows, now known, covered (rt_page_snap_fault_ns, which frees it). */
typedef struct {
  uintptr_t lo;       /* first page */
  size_t n;           /* pages in vec */
  unsigned char *vec; /* NULL: nothing to count */
  uint64_t faults0;   /* the process's faults at the snapshot */
} rt_page_snap;

void rt_page_snap_take(rt_page_snap *s, const void *p, size_t len);
uint32_t rt_page_snap_fault_ns(rt_page_snap *s, const void *p, size_t len, uint64_t latency_ns);
/* The same over n snapshots (a YUV decode's planes, each in a buffer of
 * its own), with one count of the process's faults for them all: their
 * fresh pages that the n spans covered, together. */
void rt_page_snaps_take(rt_page_snap *s, int n, const void *const *p, const size_t *len);
uint32_t rt_page_snaps_fault_ns(rt_page_snap *s, int n, const void *const *p, const size_t *len,
                                uint64_t latency_ns);

#endif

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

/* Zeroed (TLS) before the thread's first call of the API. */
typedef struct {
  uint16_t left; /* RT_FAULT_OFF: not counting; else the calls counted in
                    this window so far (0: the thread's first call) */
  uint16_t skip; /* long calls to let pass before counting again */
  uint8_t backoff;
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

#endif

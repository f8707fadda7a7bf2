/* iface_link.h — the cost of reaching an accelerator, composable with any model.
 *
 * none:   no cost.
 * onchip: a co-processor invoked by a few instructions that shares the cache
 *         hierarchy (RoCC-style, as Protoacc): onchip_ns in all, half on the
 *         way in and half on the way out; no DMA.
 * pcie:   a descriptor-based device (Enso / Nagare thesis proposal): the CPU
 *         writes a descriptor and rings a doorbell (half a round trip), the
 *         device reads the descriptor (one round trip) and the input (one),
 *         then writes the output (half) and a completion: 3 round trips in
 *         all, plus request and response bytes at the link bandwidth, plus
 *         poll_ns for the CPU to notice completion. Defaults: one-way
 *         intra-host PCIe latency 379 ns (reported there), so rtt_ns = 758;
 *         PCIe 3.0 x16 moves about 15.75 GB/s. */
#ifndef STANDIN_LINK_H
#define STANDIN_LINK_H

#include <stddef.h>
#include <stdint.h>

typedef enum { IF_LINK_NONE = 0, IF_LINK_ONCHIP = 1, IF_LINK_PCIE = 2 } if_link_kind;

typedef struct {
  if_link_kind kind;
  double onchip_ns; /* onchip: total */
  double rtt_ns;    /* pcie: round trip */
  double gbps;      /* pcie: GB/s (bytes per ns) */
  double poll_ns;   /* pcie: completion noticed after */
  unsigned set;     /* IF_LINK_SET_*: the settings given (if_link_check) */
} if_link;

enum { IF_LINK_SET_ONCHIP = 1, IF_LINK_SET_PCIE = 2 };

/* Defaults for a kind. */
void if_link_init(if_link *l, if_link_kind kind);

/* Set the link from "link=KIND" and its parameters: returns 1 if key was a
 * link key (link, link_onchip_ns, link_rtt_ns, link_gbps, link_poll_ns) and
 * was applied, 0 if it is not a link key, -1 with a message in err if the
 * value is bad. Set kind before its parameters. */
int if_link_set(if_link *l, const char *key, const char *value, char *err, size_t errcap);
/* After every setting: -1 with err when one was given for another kind of
 * link than the one chosen (link_rtt_ns without link=pcie did nothing,
 * silently), else 0. */
int if_link_check(const if_link *l, char *err, size_t errcap);

/* Cost on the way in (before service) and out (after), in ns: 0, or -1
 * (both 0) when either would take more than IF_MAX_LINK_NS (4.29 s: the
 * call is then not taken, as a service time over an hour is not). Its
 * settings are at most that (if_link_set), but bytes at link_gbps are not
 * bounded. */
int if_link_cost(const if_link *l, uint64_t req_bytes, uint64_t resp_bytes, uint64_t *in_ns,
                 uint64_t *out_ns);

const char *if_link_name(const if_link *l);

#endif

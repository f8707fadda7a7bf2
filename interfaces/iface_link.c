/* iface_link.c — device link costs (see iface_link.h for the model and its sources). */
#include "iface_link.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iface.h"

void if_link_init(if_link *l, if_link_kind kind) {
  l->kind = kind;
  l->onchip_ns = 20; /* tens of cycles: 40 cycles at 2 GHz */
  l->rtt_ns = 758;
  l->gbps = 15.75;
  l->poll_ns = 0;
  l->set = 0;
}

static int number(const char *key, const char *v, double *out, char *err, size_t cap) {
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (!*v || *end || errno || !isfinite(d) || d < 0) {
    snprintf(err, cap, "%s=%s is not a non-negative number", key, v);
    return -1;
  }
  *out = d;
  return 1;
}

/* A time: at most an hour, as a call's whole link cost (if_link_cost). */
static int time_ns(const char *key, const char *v, double *out, char *err, size_t cap) {
  double d;
  if (number(key, v, &d, err, cap) != 1)
    return -1;
  if (d > (double)IF_MAX_LINK_NS) {
    snprintf(err, cap,
             "%s=%s is more than 4.29 s (2^32 - 1 ns), the most a link takes; give it "
             "in nanoseconds",
             key, v);
    return -1;
  }
  *out = d;
  return 1;
}

int if_link_set(if_link *l, const char *key, const char *v, char *err, size_t cap) {
  if (!strcmp(key, "link")) {
    /* the kind only: settings given before it stay (link_rtt_ns=5000
     * link=pcie kept the default round trip when this reset them) */
    if (!strcmp(v, "none"))
      l->kind = IF_LINK_NONE;
    else if (!strcmp(v, "onchip"))
      l->kind = IF_LINK_ONCHIP;
    else if (!strcmp(v, "pcie"))
      l->kind = IF_LINK_PCIE;
    else {
      snprintf(err, cap, "link=%s: choose none, onchip or pcie", v);
      return -1;
    }
    return 1;
  }
  if (!strcmp(key, "link_onchip_ns")) {
    l->set |= IF_LINK_SET_ONCHIP;
    return time_ns(key, v, &l->onchip_ns, err, cap);
  }
  if (!strcmp(key, "link_rtt_ns") || !strcmp(key, "link_poll_ns") || !strcmp(key, "link_gbps"))
    l->set |= IF_LINK_SET_PCIE; /* another link_ key is the model's own */
  if (!strcmp(key, "link_rtt_ns"))
    return time_ns(key, v, &l->rtt_ns, err, cap);
  if (!strcmp(key, "link_poll_ns"))
    return time_ns(key, v, &l->poll_ns, err, cap);
  if (!strcmp(key, "link_gbps")) {
    int rc = number(key, v, &l->gbps, err, cap);
    if (rc == 1 && l->gbps <= 0) {
      snprintf(err, cap, "link_gbps must be above 0");
      return -1;
    }
    return rc;
  }
  return 0;
}

int if_link_cost(const if_link *l, uint64_t req, uint64_t resp, uint64_t *in_ns, uint64_t *out_ns) {
  double in = 0, out = 0;
  switch (l->kind) {
  case IF_LINK_NONE: break;
  case IF_LINK_ONCHIP:
    in = l->onchip_ns / 2;
    out = l->onchip_ns - in;
    break;
  case IF_LINK_PCIE:
    /* doorbell 0.5 + descriptor 1 + input 1 round trips, then the data */
    in = 2.5 * l->rtt_ns + (double)req / l->gbps;
    out = 0.5 * l->rtt_ns + (double)resp / l->gbps + l->poll_ns;
    break;
  }
  *in_ns = *out_ns = 0;
  /* NaN too; llround only sees what fits */
  if (!(in <= (double)IF_MAX_LINK_NS && out <= (double)IF_MAX_LINK_NS))
    return -1;
  *in_ns = (uint64_t)llround(in);
  *out_ns = (uint64_t)llround(out);
  return 0;
}

const char *if_link_name(const if_link *l) {
  return l->kind == IF_LINK_ONCHIP ? "onchip" : l->kind == IF_LINK_PCIE ? "pcie" : "none";
}

int if_link_check(const if_link *l, char *err, size_t cap) {
  if ((l->set & IF_LINK_SET_PCIE) && l->kind != IF_LINK_PCIE) {
    snprintf(err, cap,
             "link_rtt_ns, link_gbps and link_poll_ns set a PCIe link: give link=pcie "
             "too");
    return -1;
  }
  if ((l->set & IF_LINK_SET_ONCHIP) && l->kind != IF_LINK_ONCHIP) {
    snprintf(err, cap, "link_onchip_ns sets an on-chip link: give link=onchip too");
    return -1;
  }
  return 0;
}

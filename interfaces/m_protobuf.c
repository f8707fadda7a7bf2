/* m_protobuf.c — serialization accelerators.
 *
 * protoacc: Protoacc (Karandikar et al., MICRO'21, ucb-bar/protoacc), a
 *   RoCC co-processor next to a RISC-V core. Serializer latency from the
 *   HotOS'23 performance interface ("The Case for Performance Interfaces
 *   for Hardware Accelerators", Figure 3), in cycles, mem_lat = average
 *   memory latency in cycles:
 *     read_cost(m) = sum(read_cost(sub)) + 6 + 2*mem_lat
 *                    + (4 + mem_lat) * ceil(m.num_fields / 32)
 *     lower = (5 + num_writes) * mem_lat
 *     upper = lower + (4 + mem_lat) * ceil(root.num_fields / 32)
 *                   + sum over the root's sub-messages of read_cost
 *   Unrolled over the tree: upper - lower = submsgs * (6 + 2*mem_lat)
 *   + (4 + mem_lat) * field_words, with field_words = sum over every message
 *   of ceil(fields of its type / 32) (a recorded feature).
 *   Its throughput (same figure) is min(1 / (upper - lower), 1 / (5 +
 *   num_writes)): the serializer is a pipeline that takes the next message
 *   after max(upper - lower, 5 + num_writes) cycles, its initiation
 *   interval, not after the whole latency; that is how long a pack holds an
 *   engine (`engines=N`) and makes the next one queue.
 *   standin's reading, stated as assumptions: num_fields is the number of
 *   fields of the message's type (the presence bitmap scanned 32 at a time);
 *   num_writes = fields present + elements of repeated fields
 *   + ceil(string/bytes payload / write_bytes) (one write per field and per
 *   element: Protoacc's field handlers take a repeated field, packed or
 *   not, an element at a time; payload copied write_bytes at a time). The
 *   paper gives no deserializer formula: standin's deserializer is the same
 *   per-message and per-word costs plus field_cycles per field present and
 *   per element, and the payload at write_bytes per cycle, holding its
 *   engine for the whole of it (no published throughput). (Elements were
 *   left out until 2026-11-29: an OSM PrimitiveBlock of 72,751 packed
 *   varints took 250 ns, 360 GB/s.) Reported: 6.2-11.2x average
 *   speedup over its RISC-V SoC, 3.8x over a Xeon; slower than a Xeon for
 *   small objects. get_packed_size has no counterpart on the device: it
 *   stays in software unless size_free=1 (counted as free).
 * protoacc-lpn: the Petri-net-derived interface of the same device
 *   (dslab-epfl/lpn, OSDI'24), reduced per message class to
 *   cycles = max(c0, k * var_bytes + c1), about 16 payload bytes per cycle
 *   (k = 0.063), c0 between about 900 and 14,000 cycles by message class.
 *   The reduced form counts string/bytes payload only: a message of large
 *   packed numeric arrays costs it c0 (use protoacc for those).
 * optimus-prime: Optimus Prime (Pourhabibi et al., ASPLOS'20), a
 *   data-transformation accelerator best for small objects: 33 Gbit/s at
 *   most, 14 Gbit/s on realistic workloads (reported). Modelled as
 *   fixed_ns + encoded bytes at gbps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"

static void numbers_free(void *inst) {
  free(inst);
}

static double cycles_to_ns(double cycles, double mhz) {
  return mhz > 0 ? cycles * 1000.0 / mhz : 0;
}

static int is_pack(uint32_t api) {
  return api == STANDIN_API_PB_PACK || api == STANDIN_API_PB_PACK_BUF;
}

/* get_packed_size: free when size_free, otherwise software. */
static int size_call(double size_free, uint64_t *ns) {
  if (size_free > 0) {
    *ns = 0;
    return STANDIN_SUPPORTED;
  }
  ifb_unsupported("get_packed_size has no device counterpart (size_free=1 makes it free)");
  return STANDIN_UNSUPPORTED;
}

/* ---- protoacc --------------------------------------------------------------- */

enum { PA_CLOCK, PA_MEMLAT, PA_BOUND, PA_WRITE_BYTES, PA_FIELD_CYCLES, PA_SIZE_FREE };
static const ifb_param protoacc_p[] = {{"clock_mhz", 2000}, {"mem_lat", 20},    {"bound", 0.5},
                                       {"write_bytes", 16}, {"field_cycles", 4}, {"size_free", 0},
                                       {0}};

/* bound takes lower, upper, mid or a fraction between them. */
static void *protoacc_create(int n, const char *const *k, const char *const *v, char *err,
                             size_t cap) {
  const char *vals[32];
  for (int i = 0; i < n && i < 32; i++) {
    vals[i] = v[i];
    if (strcmp(k[i], "bound") != 0)
      continue;
    vals[i] = !strcmp(v[i], "lower")   ? "0"
              : !strcmp(v[i], "upper") ? "1"
              : !strcmp(v[i], "mid")   ? "0.5"
                                       : v[i];
    char *end;
    double b = strtod(vals[i], &end);
    if (!*vals[i] || *end || !(b >= 0 && b <= 1)) {
      snprintf(err, cap,
               "model protoacc: bound=%s is not lower, upper, mid or a number from 0 to 1", v[i]);
      return NULL;
    }
  }
  ifb_numbers *x = ifb_numbers_create("protoacc", protoacc_p, n, k, vals, err, cap);
  if (x && x->p[PA_WRITE_BYTES] < 1) {
    snprintf(err, cap, "model protoacc: write_bytes must be at least 1");
    free(x);
    return NULL;
  }
  return x;
}

static int protoacc_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (r->api == STANDIN_API_PB_SIZE)
    return size_call(p[PA_SIZE_FREE], ns);
  if (!is_pack(r->api) && r->api != STANDIN_API_PB_UNPACK) {
    ifb_unsupported("protoacc serves protobuf calls only");
    return STANDIN_UNSUPPORTED;
  }
  double ml = p[PA_MEMLAT];
  double fields = (double)ifb_feat(r, STANDIN_PB_FIELDS);
  double var = (double)ifb_feat(r, STANDIN_PB_VAR_BYTES);
  double subs = (double)ifb_feat(r, STANDIN_PB_SUBMSGS);
  double words = (double)ifb_feat(r, STANDIN_PB_FIELD_WORDS);
  double elems = (double)ifb_feat(r, STANDIN_PB_REPEATED);
  double tree = subs * (6 + 2 * ml) + (4 + ml) * words;
  double cycles;
  if (is_pack(r->api)) {
    double writes = fields + elems + ceil(var / p[PA_WRITE_BYTES]);
    double lower = (5 + writes) * ml;
    cycles = lower + p[PA_BOUND] * tree;
    ifb_interval(ifb_ns(cycles_to_ns(fmax(tree, 5 + writes), p[PA_CLOCK])));
  } else {
    cycles = tree + 6 + 2 * ml + (fields + elems) * p[PA_FIELD_CYCLES] + var / p[PA_WRITE_BYTES];
  }
  *ns = ifb_ns(cycles_to_ns(cycles, p[PA_CLOCK]));
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_protoacc = {
    STANDIN_IFACE_ABI,
    "protoacc",
    "clock_mhz=2000,mem_lat=20,bound=mid,write_bytes=16,field_cycles=4,size_free=0",
    "Protoacc serializer (HotOS'23 Fig. 3 bounds, pipelined at its throughput; MICRO'21) and a "
    "deserializer by analogy",
    protoacc_create,
    protoacc_predict,
    numbers_free};

/* ---- protoacc-lpn ---------------------------------------------------------- */

enum { PL_CLOCK, PL_C0, PL_C1, PL_K, PL_SIZE_FREE };
static const ifb_param lpn_p[] = {
    {"clock_mhz", 2000}, {"c0", 900}, {"c1", 0}, {"k", 0.063}, {"size_free", 0}, {0}};

static void *lpn_create(int n, const char *const *k, const char *const *v, char *err, size_t cap) {
  return ifb_numbers_create("protoacc-lpn", lpn_p, n, k, v, err, cap);
}

static int lpn_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (r->api == STANDIN_API_PB_SIZE)
    return size_call(p[PL_SIZE_FREE], ns);
  if (!is_pack(r->api) && r->api != STANDIN_API_PB_UNPACK) {
    ifb_unsupported("protoacc-lpn serves protobuf calls only");
    return STANDIN_UNSUPPORTED;
  }
  double var = (double)ifb_feat(r, STANDIN_PB_VAR_BYTES);
  double cycles = fmax(p[PL_C0], p[PL_K] * var + p[PL_C1]);
  *ns = ifb_ns(cycles_to_ns(cycles, p[PL_CLOCK]));
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_protoacc_lpn = {
    STANDIN_IFACE_ABI, "protoacc-lpn", "clock_mhz=2000,c0=900,c1=0,k=0.063,size_free=0",
    "Protoacc, Petri-net-derived form: max(c0, k x payload bytes + c1) cycles (dslab-epfl/lpn)",
    lpn_create,        lpn_predict,    numbers_free};

/* ---- optimus-prime --------------------------------------------------------- */

enum { OP_GBPS, OP_FIXED, OP_MAX_BYTES, OP_SIZE_FREE };
static const ifb_param op_p[] = {
    {"gbps", 14}, {"fixed_ns", 50}, {"max_bytes", 0}, {"size_free", 0}, {0}};

static void *op_create(int n, const char *const *k, const char *const *v, char *err, size_t cap) {
  ifb_numbers *x = ifb_numbers_create("optimus-prime", op_p, n, k, v, err, cap);
  if (x && x->p[OP_GBPS] <= 0) {
    snprintf(err, cap, "model optimus-prime: gbps must be above 0");
    free(x);
    return NULL;
  }
  return x;
}

static int op_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  if (r->api == STANDIN_API_PB_SIZE)
    return size_call(p[OP_SIZE_FREE], ns);
  if (!is_pack(r->api) && r->api != STANDIN_API_PB_UNPACK) {
    ifb_unsupported("optimus-prime serves protobuf calls only");
    return STANDIN_UNSUPPORTED;
  }
  double bytes = (double)ifb_feat(r, STANDIN_PB_ENCODED_SIZE);
  if (p[OP_MAX_BYTES] > 0 && bytes > p[OP_MAX_BYTES]) {
    ifb_unsupported("message larger than max_bytes");
    return STANDIN_UNSUPPORTED;
  }
  *ns = ifb_ns(p[OP_FIXED] + bytes * 8 / p[OP_GBPS]);
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_optimus_prime = {
    STANDIN_IFACE_ABI, "optimus-prime", "gbps=14,fixed_ns=50,max_bytes=0,size_free=0",
    "Optimus Prime (ASPLOS'20) small-object serializer: fixed_ns + encoded bytes at gbps",
    op_create,         op_predict,      numbers_free};

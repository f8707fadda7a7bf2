/* m_generic.c — models that need no accelerator description: software,
 * scale, constant, linear. */
#include <stdlib.h>

#include "builtin.h"

static void numbers_free(void *inst) {
  free(inst);
}

/* ---- software: the recorded latency -------------------------------------- */

static const ifb_param none[] = {{0}};

static void *software_create(int n, const char *const *k, const char *const *v, char *err,
                             size_t cap) {
  return ifb_numbers_create("software", none, n, k, v, err, cap);
}

static int software_predict(void *inst, const standin_request *r, uint64_t *ns) {
  (void)inst;
  *ns = r->recorded_ns;
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_software = {
    STANDIN_IFACE_ABI, "software", "",
    "the recorded latency of the matching call: replay reproduces the recording",
    software_create, software_predict, numbers_free};

/* ---- scale: factor x recorded latency ------------------------------------ */

static const ifb_param scale_p[] = {{"factor", 1.0}, {0}};

static void *scale_create(int n, const char *const *k, const char *const *v, char *err,
                          size_t cap) {
  return ifb_numbers_create("scale", scale_p, n, k, v, err, cap);
}

static int scale_predict(void *inst, const standin_request *r, uint64_t *ns) {
  *ns = ifb_ns(((ifb_numbers *)inst)->p[0] * (double)r->recorded_ns);
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_scale = {
    STANDIN_IFACE_ABI, "scale", "factor=1",
    "recorded latency x factor: 'what if this code were factor times as slow'", scale_create,
    scale_predict, numbers_free};

/* ---- constant ------------------------------------------------------------ */

static const ifb_param constant_p[] = {{"ns", 0}, {0}};

static void *constant_create(int n, const char *const *k, const char *const *v, char *err,
                             size_t cap) {
  return ifb_numbers_create("constant", constant_p, n, k, v, err, cap);
}

static int constant_predict(void *inst, const standin_request *r, uint64_t *ns) {
  (void)r;
  *ns = ifb_ns(((ifb_numbers *)inst)->p[0]);
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_constant = {STANDIN_IFACE_ABI,  "constant",
                                    "ns=0",             "the same service time for every request",
                                    constant_create,    constant_predict,
                                    numbers_free};

/* ---- linear over request + response bytes --------------------------------- */

static const ifb_param linear_p[] = {{"base_ns", 0}, {"ns_per_byte", 0}, {0}};

static void *linear_create(int n, const char *const *k, const char *const *v, char *err,
                           size_t cap) {
  return ifb_numbers_create("linear", linear_p, n, k, v, err, cap);
}

static int linear_predict(void *inst, const standin_request *r, uint64_t *ns) {
  const double *p = ((ifb_numbers *)inst)->p;
  *ns = ifb_ns(p[0] + p[1] * (double)(r->req_len + r->resp_len));
  return STANDIN_SUPPORTED;
}

const standin_iface ifb_linear = {
    STANDIN_IFACE_ABI, "linear", "base_ns=0,ns_per_byte=0",
    "base_ns + ns_per_byte x (request + response bytes; a message tree counts its encoded size)",
    linear_create, linear_predict, numbers_free};

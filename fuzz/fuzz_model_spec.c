/* fuzz_model_spec — performance interface specs: if_model_parse on any
 * "MODEL[:key=value,...]" and plan_add_iface on "[API=]MODEL[:...]" (the
 * --iface argument), then a prediction for a few requests. Plugins are
 * never loaded (fuzz_common.h). */
#include "fuzz_common.h"
#include "iface.h"
#include "plan.h"

static void predict_some(const if_model *m) {
  uint64_t feat[ST_MAX_FEAT] = {100, 3, 2, 4, 50, 1};
  uint8_t fp[16] = {0};
  for (int api = 0; api < ST_API_MAX; api++) {
    standin_request r = {.api = (uint8_t)api, .nfeat = ST_MAX_FEAT, .feat = feat,
                         .type = "foo.Bar", .recorded_ns = 12345, .req_len = 100,
                         .resp_len = 200, .fp = fp};
    uint64_t ns;
    if_model_predict(m, &r, &ns);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  char *spec = malloc(n + 1);
  if (!spec)
    return 0;
  memcpy(spec, d, n);
  spec[n] = 0;
  char err[512];
  if_model *m;
  if (if_model_parse(&m, spec, err, sizeof err) == IF_OK) {
    predict_some(m);
    fz_touch(if_model_describe(m), strlen(if_model_describe(m)));
    if_model_free(m);
  }
  plan p;
  memset(&p, 0, sizeof p);
  if (plan_add_iface(&p, spec) == 0)
    for (int i = 0; i < p.naccel; i++)
      predict_some(p.accel[i].model);
  plan_free(&p);
  free(spec);
  return 0;
}

/* fuzz_plan — the plan file parser (cli/plan.c) on any text, then rule
 * matching against a few calls. Plugins are never loaded (fuzz_common.h). */
#include "fuzz_common.h"
#include "plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  const char *path = fz_path("plan.txt");
  fz_write(path, d, n);
  plan p;
  memset(&p, 0, sizeof p);
  if (plan_load(&p, path) == 0) {
    st_site site = {.id = 1, .nframes = 2};
    site.frames[0] = (st_frame){.module = "/usr/lib/libapp.so", .symbol = "handle_request"};
    site.frames[1] = (st_frame){.module = "", .symbol = ""};
    for (int api = 0; api < ST_API_MAX; api++) {
      plan_match(&p, api, "foo.Bar", &site, (uint64_t)api * 1000);
      plan_match(&p, api, NULL, NULL, UINT64_MAX);
    }
  }
  plan_free(&p);
  return 0;
}

/* fuzz_trace_cli — `standin info` and `standin dump` (text, and JSON with
 * decoded payloads) on a recording made of one fuzzed trace file. See
 * fuzz_common.h for the input layout. Output goes to /dev/null. */
#include "cli.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  static int once;
  if (!once) {
    once = 1;
    if (!freopen("/dev/null", "w", stdout))
      abort();
  }
  fz_trace_file(d, n, "1.trace");
  const char *dir = fz_tmpdir();
  char *info[] = {"info", (char *)dir, NULL};
  char *text[] = {"dump", (char *)dir, NULL};
  char *json[] = {"dump", "--format", "json", "--payload", (char *)dir, NULL};
  cmd_info(2, info);
  cmd_dump(2, text);
  cmd_dump(5, json);
  fflush(stdout);
  return 0;
}

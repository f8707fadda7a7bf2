/* fuzz_elf — the ELF reading `standin record` does on the program it is
 * given (cli/elf.c): whether it is dynamic, and whether it has a hooked
 * library linked in. A user's program is not hostile, but a damaged or
 * truncated one must not crash the launcher before it runs. */
#include "cli_elf.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  const char *path = fz_path("prog");
  fz_write(path, d, n);
  (void)cli_elf_is_dynamic(path);
  const char *fn = NULL;
  const char *lib = cli_elf_builtin_lib(path, &fn);
  if (lib != NULL && (fn == NULL || strlen(fn) == 0))
    abort(); /* a library is always named with its function */
  return 0;
}

/* fuzz_elf — the ELF reading `standin record` does on the program it is
 * given (cli/elf.c): whether it is dynamic, and whether it has a hooked
 * library linked in; and the symbol tables the analysis names call-site
 * frames from. A user's program is not hostile, but a damaged or
 * truncated one must not crash the launcher before it runs, nor a report. */
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
  char abs[4096], name[64];
  if (!realpath(path, abs))
    return 0;
  cli_elf_forget(); /* the same path holds another file each time */
  uint64_t offs[] = {1, 0x40, 0x1000, 0x9680, n > 8 ? (uint64_t)d[n - 1] << 8 | d[n - 2] : 2};
  for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
    uint64_t at = 0;
    if (cli_elf_name_frame(abs, UINT64_MAX, offs[i], name, sizeof name, &at) && !name[0])
      abort(); /* a name is never empty */
  }
  return 0;
}

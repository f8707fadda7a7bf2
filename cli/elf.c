/* elf.c — just enough ELF reading to tell a user why preloading cannot
 * work: a static executable has no PT_INTERP, so no dynamic loader runs and
 * LD_PRELOAD is never looked at. */
#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cli_elf.h"

int cli_elf_is_dynamic(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  Elf64_Ehdr eh;
  int result = -1;
  if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
    goto out;
  result = 0;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph)) != (ssize_t)sizeof ph) {
      result = -1;
      break;
    }
    if (ph.p_type == PT_INTERP) {
      result = 1;
      break;
    }
  }
out:
  close(fd);
  return result;
}

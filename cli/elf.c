/* elf.c — just enough ELF reading to tell a user why preloading cannot
 * work: a static executable has no PT_INTERP, so no dynamic loader runs and
 * LD_PRELOAD is never looked at; and a dynamic one that has libprotobuf-c
 * or libjpeg linked in from their static archives calls its own copy,
 * which no preloaded shim stands in front of. */
#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* The functions the shims hook, by the library they come from. */
static const struct {
  const char *fn, *lib;
} hooked[] = {
    {"protobuf_c_message_unpack", "libprotobuf-c"},
    {"protobuf_c_message_pack", "libprotobuf-c"},
    {"protobuf_c_message_get_packed_size", "libprotobuf-c"},
    {"protobuf_c_message_pack_to_buffer", "libprotobuf-c"},
    {"jpeg_read_header", "libjpeg"},
    {"jpeg_start_decompress", "libjpeg"},
    {"jpeg_read_scanlines", "libjpeg"},
    {"tjDecompress2", "libturbojpeg"},
    {"tjDecompressHeader3", "libturbojpeg"},
};

/* Every size and offset comes from the file: each is checked against the
 * mapping before it is used. */
static const char *scan_symtab(const uint8_t *m, size_t len, const Elf64_Shdr *sh,
                               const Elf64_Shdr *str, const char **fn) {
  if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_offset > len ||
      sh->sh_size > len - sh->sh_offset || str->sh_offset > len ||
      str->sh_size > len - str->sh_offset || str->sh_size == 0)
    return NULL;
  const char *names = (const char *)m + str->sh_offset;
  size_t n = sh->sh_size / sizeof(Elf64_Sym);
  for (size_t i = 0; i < n; i++) {
    Elf64_Sym sym;
    memcpy(&sym, m + sh->sh_offset + i * sizeof sym, sizeof sym);
    if (sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) != STT_FUNC ||
        sym.st_name >= str->sh_size)
      continue;
    const char *name = names + sym.st_name;
    size_t room = str->sh_size - sym.st_name;
    if (strnlen(name, room) == room)
      continue; /* not terminated inside its table */
    for (size_t k = 0; k < sizeof hooked / sizeof hooked[0]; k++)
      if (!strcmp(name, hooked[k].fn)) {
        *fn = hooked[k].fn;
        return hooked[k].lib;
      }
  }
  return NULL;
}

const char *cli_elf_builtin_lib(const char *path, const char **fn) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat st;
  void *map = MAP_FAILED;
  if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return NULL;
  const uint8_t *m = map;
  size_t len = (size_t)st.st_size;
  const char *lib = NULL;
  Elf64_Ehdr eh;
  memcpy(&eh, m, sizeof eh);
  if (!memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
      eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shoff <= len &&
      (len - eh.e_shoff) / sizeof(Elf64_Shdr) >= eh.e_shnum) {
    /* .symtab (gone when stripped) and .dynsym (what it exports) */
    for (unsigned i = 0; i < eh.e_shnum && !lib; i++) {
      Elf64_Shdr sh, str;
      memcpy(&sh, m + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
      if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_link >= eh.e_shnum)
        continue;
      memcpy(&str, m + eh.e_shoff + (size_t)sh.sh_link * sizeof str, sizeof str);
      lib = scan_symtab(m, len, &sh, &str, fn);
    }
  }
  munmap(map, len);
  return lib;
}

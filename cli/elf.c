/* elf.c — just enough ELF reading to tell a user why preloading cannot
 * work: a static executable has no PT_INTERP, so no dynamic loader runs and
 * LD_PRELOAD is never looked at; and a dynamic one that has libprotobuf-c
 * or libjpeg linked in from their static archives calls its own copy,
 * which no preloaded shim stands in front of. And to name call-site frames
 * that dladdr could not: functions the program does not export. */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Call fn(ctx, name, value, size) for each function symbol of the mapped
 * ELF file m of len bytes, in .symtab (gone when stripped) and .dynsym
 * (what it exports), until fn returns nonzero; returns that, or 0. Every
 * size and offset comes from the file: each is checked against the mapping
 * before it is used. */
typedef int (*func_sym_fn)(void *ctx, const char *name, size_t len, uint64_t value, uint64_t size);

static int each_func_sym(const uint8_t *m, size_t len, func_sym_fn fn, void *ctx) {
  Elf64_Ehdr eh;
  memcpy(&eh, m, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > len ||
      (len - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
    return 0;
  for (unsigned i = 0; i < eh.e_shnum; i++) {
    Elf64_Shdr sh, str;
    memcpy(&sh, m + eh.e_shoff + (size_t)i * sizeof sh, sizeof sh);
    if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || sh.sh_link >= eh.e_shnum)
      continue;
    memcpy(&str, m + eh.e_shoff + (size_t)sh.sh_link * sizeof str, sizeof str);
    if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_offset > len ||
        sh.sh_size > len - sh.sh_offset || str.sh_offset > len ||
        str.sh_size > len - str.sh_offset || str.sh_size == 0)
      continue;
    const char *names = (const char *)m + str.sh_offset;
    for (size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
      Elf64_Sym sym;
      memcpy(&sym, m + sh.sh_offset + k * sizeof sym, sizeof sym);
      int type = ELF64_ST_TYPE(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
          sym.st_name >= str.sh_size)
        continue;
      size_t room = str.sh_size - sym.st_name, l = strnlen(names + sym.st_name, room);
      if (l == room || l == 0)
        continue; /* not terminated inside its table, or no name */
      int r = fn(ctx, names + sym.st_name, l, sym.st_value, sym.st_size);
      if (r)
        return r;
    }
  }
  return 0;
}

typedef struct {
  const char *fn, *lib;
} builtin_found;

static int find_hooked(void *ctx, const char *name, size_t len, uint64_t value, uint64_t size) {
  builtin_found *f = ctx;
  for (size_t k = 0; k < sizeof hooked / sizeof hooked[0]; k++)
    if (!strcmp(name, hooked[k].fn)) {
      f->fn = hooked[k].fn;
      f->lib = hooked[k].lib;
      return 1;
    }
  return 0;
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
  builtin_found f = {NULL, NULL};
  each_func_sym(map, (size_t)st.st_size, find_hooked, &f);
  munmap(map, (size_t)st.st_size);
  if (f.lib)
    *fn = f.fn;
  return f.lib;
}

/* ---- naming frames --------------------------------------------------------- */

/* A file's functions, sorted by address: .symtab (the program's own
 * functions, static ones too, unless stripped) and .dynsym. */
typedef struct {
  uint64_t start, size;
  uint32_t name; /* into names */
} fn_sym;

typedef struct {
  char path[PATH_MAX];
  int ok;        /* read, and not changed since the recording */
  uint64_t bias; /* lowest PT_LOAD address: what dladdr's base stands for */
  fn_sym *syms;
  size_t n, cap;
  char *names;
  size_t nlen, ncap;
} elf_syms;

static int sym_cmp(const void *a, const void *b) {
  const fn_sym *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

static int add_sym(void *ctx, const char *name, size_t l, uint64_t value, uint64_t size) {
  elf_syms *e = ctx;
  if (size == 0)
    return 0; /* no extent to find a frame in */
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 256;
    fn_sym *ns = realloc(e->syms, cap * sizeof *ns);
    if (!ns)
      return -1;
    e->syms = ns;
    e->cap = cap;
  }
  if (e->nlen + l + 1 > e->ncap) {
    size_t ncap = (e->ncap ? e->ncap * 2 : 4096) + l + 1;
    char *nn = realloc(e->names, ncap);
    if (!nn)
      return -1;
    e->names = nn;
    e->ncap = ncap;
  }
  memcpy(e->names + e->nlen, name, l + 1);
  e->syms[e->n++] = (fn_sym){value, size, (uint32_t)e->nlen};
  e->nlen += l + 1;
  return 0;
}

/* The load bias (program headers checked against the mapping) and the
 * function symbols, sorted. */
static void load_syms(elf_syms *e, const uint8_t *m, size_t len) {
  Elf64_Ehdr eh;
  memcpy(&eh, m, sizeof eh);
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phoff > len ||
      (len - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum)
    return;
  e->bias = UINT64_MAX;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, m + eh.e_phoff + (size_t)i * sizeof ph, sizeof ph);
    if (ph.p_type == PT_LOAD && ph.p_vaddr < e->bias)
      e->bias = ph.p_vaddr & ~(uint64_t)4095;
  }
  if (e->bias == UINT64_MAX || each_func_sym(m, len, add_sym, e) != 0)
    return; /* out of memory: no names rather than some */
  if (e->n)
    qsort(e->syms, e->n, sizeof *e->syms, sym_cmp);
  e->ok = e->n > 0;
}

/* files named in a run's frames: the program, its libraries, plugins */
enum { NCACHE = 32 };
static elf_syms cache[NCACHE];
static unsigned next;

void cli_elf_forget(void) {
  for (unsigned i = 0; i < NCACHE; i++) {
    free(cache[i].syms);
    free(cache[i].names);
    memset(&cache[i], 0, sizeof cache[i]);
  }
}

/* The symbols of path, read once per CLI run. */
static elf_syms *syms_of(const char *path, uint64_t recorded_at_s) {
  for (unsigned i = 0; i < NCACHE; i++)
    if (cache[i].path[0] && !strcmp(cache[i].path, path))
      return &cache[i];
  elf_syms *e = &cache[next++ % NCACHE];
  free(e->syms);
  free(e->names);
  memset(e, 0, sizeof *e);
  snprintf(e->path, sizeof e->path, "%s", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return e;
  struct stat st;
  void *map = MAP_FAILED;
  /* a file changed after the recording may have its functions elsewhere:
   * its names would be wrong ones, so it names nothing */
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Elf64_Ehdr) &&
      (uint64_t)st.st_mtime <= recorded_at_s)
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED)
    return e;
  load_syms(e, map, (size_t)st.st_size);
  munmap(map, (size_t)st.st_size);
  return e;
}

int cli_elf_name_frame(const char *path, uint64_t recorded_at_s, uint64_t offset, char *name,
                       size_t cap, uint64_t *sym_offset) {
  if (!path || path[0] != '/' || offset == 0)
    return 0;
  elf_syms *e = syms_of(path, recorded_at_s);
  if (!e->ok)
    return 0;
  /* the call before the return address the frame holds */
  uint64_t at = offset - 1 + e->bias;
  size_t lo = 0, hi = e->n;
  while (lo < hi) { /* the last symbol starting at or before `at` */
    size_t mid = lo + (hi - lo) / 2;
    if (e->syms[mid].start <= at)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return 0;
  const fn_sym *f = &e->syms[lo - 1];
  if (at - f->start >= f->size)
    return 0;
  snprintf(name, cap, "%s", e->names + f->name);
  *sym_offset = offset + e->bias - f->start;
  return 1;
}

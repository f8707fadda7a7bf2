/* bypass.c — let a library's calls to its own exported functions skip our
 * hooks (bypass.h).
 *
 * libprotobuf-c packs, sizes and parses every sub-message by calling its own
 * exported protobuf_c_message_* functions through its PLT, and LD_PRELOAD
 * puts our hooks first: ~11 nested calls per outer call in pbtest, each
 * passing through a hook (~3 ns each in place, against the ~1 ns a hot
 * calibration loop measures, so recorded latencies kept ~20 ns a call of
 * hook time). Rewriting the library's own GOT slots for those names to its
 * own definitions sends them where an unhooked process sends them; calls
 * from the program and from other libraries still reach the hooks. */
#include "bypass.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__LP64__)

typedef struct {
  const char *object; /* substring of the object's path */
  const char *const *names;
  size_t n;
  int patched;
} job;

/* A pointer from the dynamic section: glibc relocates these in place on
 * x86-64; add the load address where it did not. */
static uintptr_t dyn_ptr(Elf64_Addr base, Elf64_Addr v) {
  return v < base ? (uintptr_t)(base + v) : (uintptr_t)v;
}

static int wanted(const job *j, const char *name) {
  for (size_t i = 0; i < j->n; i++)
    if (strcmp(j->names[i], name) == 0)
      return 1;
  return 0;
}

/* Point the slot at target, through a read-only (RELRO) page if need be. */
static int write_slot(uintptr_t slot, uintptr_t target, int relro) {
  uintptr_t page = slot & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1);
  size_t len = (size_t)sysconf(_SC_PAGESIZE);
  if (relro && mprotect((void *)page, len, PROT_READ | PROT_WRITE) != 0)
    return -1;
  __atomic_store_n((uintptr_t *)slot, target, __ATOMIC_RELEASE);
  if (relro)
    mprotect((void *)page, len, PROT_READ);
  return 0;
}

static void patch_relocs(job *j, Elf64_Addr base, const Elf64_Rela *r, size_t n,
                         const Elf64_Sym *sym, const char *str, uintptr_t ro_lo, uintptr_t ro_hi) {
  for (size_t i = 0; i < n; i++) {
    uint32_t type = ELF64_R_TYPE(r[i].r_info), si = ELF64_R_SYM(r[i].r_info);
    if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || si == 0 || r[i].r_addend)
      continue;
    const Elf64_Sym *s = &sym[si];
    /* the object's own definition of a wanted function, not an import */
    if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 ||
        !wanted(j, str + s->st_name))
      continue;
    uintptr_t slot = (uintptr_t)(base + r[i].r_offset);
    uintptr_t target = (uintptr_t)(base + s->st_value);
    if (*(const uintptr_t *)slot == target)
      continue;
    if (write_slot(slot, target, slot >= ro_lo && slot < ro_hi) == 0)
      j->patched++;
  }
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
  job *j = arg;
  (void)size;
  if (!info->dlpi_name || !strstr(info->dlpi_name, j->object))
    return 0;
  Elf64_Addr base = info->dlpi_addr;
  const Elf64_Dyn *dyn = NULL;
  uintptr_t ro_lo = 0, ro_hi = 0;
  for (Elf64_Half i = 0; i < info->dlpi_phnum; i++) {
    const Elf64_Phdr *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_DYNAMIC)
      dyn = (const Elf64_Dyn *)(base + p->p_vaddr);
    else if (p->p_type == PT_GNU_RELRO) {
      /* the pages ld.so made read-only: it rounds both ends down, so a
       * partial last page stays writable (and must stay so) */
      uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
      ro_lo = (uintptr_t)(base + p->p_vaddr) & ~(page - 1);
      ro_hi = (uintptr_t)(base + p->p_vaddr + p->p_memsz) & ~(page - 1);
    }
  }
  if (!dyn)
    return 0;
  const Elf64_Sym *sym = NULL;
  const char *str = NULL;
  const Elf64_Rela *jmprel = NULL, *rela = NULL;
  size_t jmpsz = 0, relasz = 0;
  int pltrel_rela = 1;
  for (const Elf64_Dyn *d = dyn; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_SYMTAB: sym = (const Elf64_Sym *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_STRTAB: str = (const char *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_JMPREL: jmprel = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
    case DT_PLTREL: pltrel_rela = d->d_un.d_val == DT_RELA; break;
    case DT_RELA: rela = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_RELASZ: relasz = d->d_un.d_val; break;
    default: break;
    }
  }
  if (!sym || !str || !pltrel_rela)
    return 0;
  if (jmprel)
    patch_relocs(j, base, jmprel, jmpsz / sizeof *jmprel, sym, str, ro_lo, ro_hi);
  if (rela)
    patch_relocs(j, base, rela, relasz / sizeof *rela, sym, str, ro_lo, ro_hi);
  return 0;
}

int shim_bypass_own_calls(const char *object, const char *const *names, size_t n) {
  job j = {object, names, n, 0};
  dl_iterate_phdr(visit, &j);
  return j.patched;
}

#else

int shim_bypass_own_calls(const char *object, const char *const *names, size_t n) {
  (void)object;
  (void)names;
  (void)n;
  return 0;
}

#endif

int shim_bypass_protobuf(void) {
  static const char *const names[] = {
      "protobuf_c_message_pack", "protobuf_c_message_get_packed_size",
      "protobuf_c_message_pack_to_buffer", "protobuf_c_message_unpack"};
  const char *e = getenv("STANDIN_BYPASS_OWN_CALLS");
  if (e && strcmp(e, "0") == 0)
    return 0;
  return shim_bypass_own_calls("libprotobuf-c.so", names, sizeof names / sizeof *names);
}

/* bypass.c — rewrite GOT slots of loaded objects (bypass.h): a library's
 * calls to its own exported functions skip our hooks, and objects loaded
 * with RTLD_DEEPBIND reach them (shim_rebind_to_shim, for deepbind.c).
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
#include "shim.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__LP64__)

typedef struct job job;
struct job {
  /* the objects: those whose path contains `object`, or (object NULL) those
   * loaded at `bases` */
  const char *object;
  const uintptr_t *bases;
  size_t nbases;
  /* where a slot for symbol s (named name) of the object loaded at base
   * should point; 0: leave it */
  uintptr_t (*target)(const job *j, Elf64_Addr base, const Elf64_Sym *s, const char *name);
  const char *const *names;
  size_t n;
  int data_too; /* R_X86_64_64 slots (pointers in data) as well */
  int patched;
};

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

/* bypass: the object's own definition of a wanted function, not an import */
static uintptr_t own_definition(const job *j, Elf64_Addr base, const Elf64_Sym *s,
                                const char *name) {
  if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_value == 0 ||
      !wanted(j, name))
    return 0;
  return (uintptr_t)(base + s->st_value);
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

static int defined_at(uintptr_t addr, const char *name);

static void patch_relocs(job *j, Elf64_Addr base, const Elf64_Rela *r, size_t n,
                         const Elf64_Sym *sym, const char *str, uintptr_t ro_lo, uintptr_t ro_hi) {
  for (size_t i = 0; i < n; i++) {
    uint32_t type = ELF64_R_TYPE(r[i].r_info), si = ELF64_R_SYM(r[i].r_info);
    if (si == 0)
      continue;
    if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
      if (r[i].r_addend)
        continue;
    } else if (type != R_X86_64_64 || !j->data_too) {
      continue;
    }
    const Elf64_Sym *s = &sym[si];
    uintptr_t target = j->target(j, base, s, str + s->st_name);
    if (target == 0)
      continue;
    uintptr_t slot = (uintptr_t)(base + r[i].r_offset);
    if (type == R_X86_64_64) {
      /* a pointer in data: the object's constructors (run inside dlopen)
       * may have set it since; changed only while it still points at a
       * function of this name */
      uintptr_t now = *(const uintptr_t *)slot - (uintptr_t)r[i].r_addend;
      if (!defined_at(now, str + s->st_name))
        continue;
      target += (uintptr_t)r[i].r_addend;
    }
    if (*(const uintptr_t *)slot == target)
      continue;
    if (write_slot(slot, target, slot >= ro_lo && slot < ro_hi) == 0)
      j->patched++;
  }
}

static int chosen(const job *j, const struct dl_phdr_info *info) {
  if (j->object)
    return info->dlpi_name && strstr(info->dlpi_name, j->object);
  for (size_t i = 0; i < j->nbases; i++)
    if (j->bases[i] == (uintptr_t)info->dlpi_addr)
      return 1;
  return 0;
}

/* The object's dynamic symbol and string tables, from its dynamic section. */
typedef struct {
  const Elf64_Sym *sym;
  const char *str;
  const Elf64_Rela *jmprel, *rela;
  size_t jmpsz, relasz;
  const uint32_t *gnu_hash, *hash;
  int pltrel_rela;
} dyn_tables;

static int read_dynamic(const struct dl_phdr_info *info, dyn_tables *t, uintptr_t *ro_lo,
                        uintptr_t *ro_hi) {
  Elf64_Addr base = info->dlpi_addr;
  const Elf64_Dyn *dyn = NULL;
  *ro_lo = *ro_hi = 0;
  for (Elf64_Half i = 0; i < info->dlpi_phnum; i++) {
    const Elf64_Phdr *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_DYNAMIC)
      dyn = (const Elf64_Dyn *)(base + p->p_vaddr);
    else if (p->p_type == PT_GNU_RELRO) {
      /* the pages ld.so made read-only: it rounds both ends down, so a
       * partial last page stays writable (and must stay so) */
      uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
      *ro_lo = (uintptr_t)(base + p->p_vaddr) & ~(page - 1);
      *ro_hi = (uintptr_t)(base + p->p_vaddr + p->p_memsz) & ~(page - 1);
    }
  }
  if (!dyn)
    return -1;
  memset(t, 0, sizeof *t);
  t->pltrel_rela = 1;
  for (const Elf64_Dyn *d = dyn; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
    case DT_SYMTAB: t->sym = (const Elf64_Sym *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_STRTAB: t->str = (const char *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_JMPREL: t->jmprel = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_PLTRELSZ: t->jmpsz = d->d_un.d_val; break;
    case DT_PLTREL: t->pltrel_rela = d->d_un.d_val == DT_RELA; break;
    case DT_RELA: t->rela = (const Elf64_Rela *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_RELASZ: t->relasz = d->d_un.d_val; break;
    case DT_GNU_HASH: t->gnu_hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr); break;
    case DT_HASH: t->hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr); break;
    default: break;
    }
  }
  return t->sym && t->str && t->pltrel_rela ? 0 : -1;
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
  job *j = arg;
  (void)size;
  dyn_tables t;
  uintptr_t ro_lo, ro_hi;
  if (!chosen(j, info) || read_dynamic(info, &t, &ro_lo, &ro_hi) != 0)
    return 0;
  if (t.jmprel)
    patch_relocs(j, info->dlpi_addr, t.jmprel, t.jmpsz / sizeof *t.jmprel, t.sym, t.str, ro_lo,
                 ro_hi);
  if (t.rela)
    patch_relocs(j, info->dlpi_addr, t.rela, t.relasz / sizeof *t.rela, t.sym, t.str, ro_lo, ro_hi);
  return 0;
}

/* ---- rebinding objects loaded with RTLD_DEEPBIND (deepbind.c) ---------- */

/* The number of symbols in a dynamic symbol table, from its hash table. */
static size_t count_symbols(const dyn_tables *t) {
  if (t->hash)
    return t->hash[1]; /* nchain */
  if (!t->gnu_hash)
    return 0;
  const uint32_t *g = t->gnu_hash;
  uint32_t nbuckets = g[0], symoffset = g[1], bloom_words = g[2];
  const uint32_t *buckets = (const uint32_t *)((const uint64_t *)(g + 4) + bloom_words);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; b++)
    if (buckets[b] > last)
      last = buckets[b];
  if (last < symoffset)
    return symoffset;
  while (!(chain[last - symoffset] & 1))
    last++;
  return (size_t)last + 1;
}

/* Whether the object holding addr defines a symbol called name there: what
 * dladdr tells, without dladdr. This runs inside dl_iterate_phdr, which
 * holds the loader's list lock; dladdr takes the loader's main lock, which
 * a dlopen on another thread holds while it waits for the list lock to add
 * its object: each thread then waited for the other for good (glibc 2.36,
 * seen with a dladdr in a dl_iterate_phdr callback against dlopen in a
 * loop). A nested dl_iterate_phdr takes only the list lock, again, which
 * this thread holds. */
typedef struct {
  uintptr_t addr;
  const char *name;
  int found;
} def_query;

static int find_definition(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  def_query *q = arg;
  dyn_tables t;
  uintptr_t ro_lo, ro_hi;
  if (!shim_phdr_holds(info, q->addr))
    return 0;
  if (read_dynamic(info, &t, &ro_lo, &ro_hi) != 0)
    return 1;
  size_t n = count_symbols(&t);
  for (size_t i = 1; i < n && !q->found; i++) {
    const Elf64_Sym *s = &t.sym[i];
    q->found = s->st_shndx != SHN_UNDEF && info->dlpi_addr + s->st_value == q->addr &&
               strcmp(t.str + s->st_name, q->name) == 0;
  }
  return 1;
}

static int defined_at(uintptr_t addr, const char *name) {
  def_query q = {addr, name, 0};
  dl_iterate_phdr(find_definition, &q);
  return q.found;
}

/* The functions the shim exports (its hooks), found once in its own
 * dynamic symbol table: names and addresses. */
#define MAX_EXPORTS 128
typedef struct {
  const char *name;
  uintptr_t addr;
} export_fn;
static export_fn exports[MAX_EXPORTS];
static size_t nexports;

static int list_exports(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  if ((uintptr_t)info->dlpi_addr != *(const uintptr_t *)arg)
    return 0;
  dyn_tables t;
  uintptr_t ro_lo, ro_hi;
  if (read_dynamic(info, &t, &ro_lo, &ro_hi) != 0)
    return 1;
  size_t n = count_symbols(&t);
  for (size_t i = 1; i < n && nexports < MAX_EXPORTS; i++) {
    const Elf64_Sym *s = &t.sym[i];
    int bind = ELF64_ST_BIND(s->st_info);
    if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
        (bind != STB_GLOBAL && bind != STB_WEAK) || ELF64_ST_VISIBILITY(s->st_other) != STV_DEFAULT)
      continue;
    exports[nexports].name = t.str + s->st_name;
    exports[nexports].addr = (uintptr_t)(info->dlpi_addr + s->st_value);
    nexports++;
  }
  return 1;
}

static uintptr_t shim_definition(const job *j, Elf64_Addr base, const Elf64_Sym *s,
                                 const char *name) {
  (void)j;
  (void)base;
  if (s->st_shndx != SHN_UNDEF) /* the object's own: DEEPBIND or not */
    return 0;
  for (size_t i = 0; i < nexports; i++)
    if (exports[i].name[0] == name[0] && strcmp(exports[i].name, name) == 0)
      return exports[i].addr;
  return 0;
}

/* The load addresses of lm and the objects after it, read while
 * dl_iterate_phdr holds the loader's lock. */
#define MAX_NEW 256
typedef struct {
  struct link_map *first;
  uintptr_t bases[MAX_NEW];
  size_t n;
} new_objects;

static int collect_new(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)info;
  (void)size;
  new_objects *o = arg;
  for (struct link_map *m = o->first; m && o->n < MAX_NEW; m = m->l_next)
    o->bases[o->n++] = (uintptr_t)m->l_addr;
  return 1;
}

int shim_rebind_to_shim(struct link_map *lm) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  if (nexports == 0) {
    struct dl_find_object self;
    if (_dl_find_object((void *)shim_rebind_to_shim, &self) == 0 && self.dlfo_link_map) {
      uintptr_t base = (uintptr_t)self.dlfo_link_map->l_addr;
      dl_iterate_phdr(list_exports, &base);
    }
  }
  int patched = 0;
  if (nexports > 0) {
    new_objects o = {lm, {0}, 0};
    dl_iterate_phdr(collect_new, &o);
    job j = {NULL, o.bases, o.n, shim_definition, NULL, 0, 1, 0};
    dl_iterate_phdr(visit, &j);
    patched = j.patched;
  }
  pthread_mutex_unlock(&lock);
  return patched;
}

int shim_bypass_own_calls(const char *object, const char *const *names, size_t n) {
  job j = {object, NULL, 0, own_definition, names, n, 0, 0};
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

int shim_rebind_to_shim(struct link_map *lm) {
  (void)lm;
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

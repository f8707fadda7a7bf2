/* deepbind.c — objects dlopen'ed with RTLD_DEEPBIND reach the hooks too.
 *
 * LD_PRELOAD puts the shim first in the global scope, so every object's
 * reference to a hooked function binds to the hook. An object dlopen'ed with
 * RTLD_DEEPBIND (and the dependencies that dlopen loads with it) looks in its
 * own scope first: its calls go straight to libprotobuf-c or libjpeg, and
 * standin never sees them. PHP loads every extension so (pinba's protobuf-c
 * packs, GD's libjpeg decodes). After such a dlopen, the slots through which
 * the newly loaded objects reach a function the shim exports are pointed at
 * the shim's definition: what they would have bound to without DEEPBIND, for
 * those names only. Everything else keeps DEEPBIND's binding.
 *
 * The shim's `dlopen` jumps to libc's (a tail jump: libc reads its caller's
 * address to choose the namespace and the caller's DT_RPATH) unless the mode
 * has RTLD_DEEPBIND; that path calls libc's from here, so it searches as if
 * called by the shim (no DT_RPATH of the caller's; an absolute path, as PHP
 * passes, is unaffected). x86-64 and glibc only; elsewhere nothing changes.
 * Linked into the shims directly, like procwrap.c: the exported `dlopen`
 * must not come from an archive that --exclude-libs hides. */
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>

#include "bypass.h"
#include "shim.h"

#if defined(__x86_64__) && defined(__LP64__) && defined(__GLIBC__)

/* libc's dlopen; set at load (the constructor below), or by the slow path
 * for a dlopen that comes first (another preloaded object's constructor). */
__attribute__((visibility("hidden"))) void *(*shim_libc_dlopen)(const char *, int);
__attribute__((visibility("hidden"))) void *shim_dlopen_slow(const char *file, int mode);

/* Not C: only a jump keeps the caller's return address for libc's dlopen.
 * $8 is RTLD_DEEPBIND (checked here). */
_Static_assert(RTLD_DEEPBIND == 8, "the jump tests RTLD_DEEPBIND as $8");
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        "  .cfi_startproc\n"
        "  testl $8, %esi\n"
        "  jnz 1f\n"
        "  movq shim_libc_dlopen(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 1f\n"
        "  jmp *%rax\n"
        "1:\n"
        "  jmp shim_dlopen_slow\n"
        "  .cfi_endproc\n"
        ".size dlopen, .-dlopen\n");

__attribute__((constructor)) static void find_libc_dlopen(void) {
  if (!shim_libc_dlopen)
    shim_libc_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
}

/* How many objects the process has loaded so far (glibc's counter). */
static long long loads_so_far(void) {
  long long adds, subs;
  shim_loader_counts(&adds, &subs);
  return adds;
}

void *shim_dlopen_slow(const char *file, int mode) {
  find_libc_dlopen();
  if (!shim_libc_dlopen)
    return NULL; /* no libc dlopen: nothing to call */
  if (!(mode & RTLD_DEEPBIND))
    return shim_libc_dlopen(file, mode);
  long long before = loads_so_far();
  void *h = shim_libc_dlopen(file, mode);
  if (h && loads_so_far() != before) {
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
      shim_rebind_to_shim(lm);
  }
  return h;
}

#endif

/* handles.c — calls reached through dlsym on a library's handle reach the
 * hooks too.
 *
 * A program that loads a library itself and looks its functions up on the
 * handle (Python's ctypes and cffi in ABI mode do so for every foreign
 * call: PyTurboJPEG decodes through libturbojpeg that way) gets the
 * library's own definitions: dlsym on a handle searches that object and
 * its dependencies, not the global scope where LD_PRELOAD puts the shim.
 * standin then never saw those calls. The shim's `dlsym` answers such a
 * lookup of a function it hooks with its hook, when what the handle
 * found is the very function the hook stands in front of (shim_real_opt),
 * as a direct call would have bound. Every other lookup is the library's.
 *
 * RTLD_DEFAULT and RTLD_NEXT lookups depend on who calls (glibc reads the
 * caller's address to start the search after it, or in its namespace):
 * those jump to libc's dlsym with the caller's return address untouched,
 * as deepbind.c does for dlopen. A lookup on a handle does not use the
 * caller's identity (glibc, "dlsym: Do not determine caller link map if
 * not needed", 2019), so it is answered from C. Lookups made by the shim
 * itself (shim_real_opt, looking for the function it stands in front of)
 * are always the library's. x86-64 and glibc only. Linked into the shims
 * directly, like procwrap.c and deepbind.c.
 *
 * This runs in other libraries' constructors, possibly before the shim's
 * and before a sanitizer's runtime is up: nothing here is instrumented,
 * and libc's dlsym is found with dlvsym, which the shim does not hook. */
#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "shim.h"

#if defined(__x86_64__) && defined(__LP64__) && defined(__GLIBC__)

typedef void *(*dlsym_fn)(void *, const char *);

__attribute__((visibility("hidden"))) dlsym_fn shim_libc_dlsym;
__attribute__((visibility("hidden"))) dlsym_fn shim_dlsym_init(void);
__attribute__((visibility("hidden"))) void *shim_dlsym_handle(void *handle, const char *name);

/* Not C: only a jump keeps the caller's return address for libc's dlsym.
 * RTLD_DEFAULT is 0 and RTLD_NEXT -1 (checked here). The first lookup may
 * come before the constructor below: the caller's registers are kept
 * across shim_dlsym_init, and the stack is as the caller left it when
 * libc's dlsym is jumped to. */
_Static_assert((long)RTLD_NEXT == -1 && RTLD_DEFAULT == 0,
               "the jump tests RTLD_NEXT, RTLD_DEFAULT");
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "  .cfi_startproc\n"
        "  cmpq $-1, %rdi\n"
        "  je 1f\n"
        "  testq %rdi, %rdi\n"
        "  jne shim_dlsym_handle\n"
        "1:\n"
        "  movq shim_libc_dlsym(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 2f\n"
        "  jmp *%rax\n"
        "2:\n"
        "  pushq %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call shim_dlsym_init\n"
        "  addq $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  jmp *%rax\n"
        "  .cfi_endproc\n"
        ".size dlsym, .-dlsym\n");

SHIM_UNINSTRUMENTED dlsym_fn shim_dlsym_init(void) {
  dlsym_fn f = __atomic_load_n(&shim_libc_dlsym, __ATOMIC_ACQUIRE);
  if (f)
    return f;
  f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!f)
    f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  __atomic_store_n(&shim_libc_dlsym, f, __ATOMIC_RELEASE);
  return f;
}

__attribute__((constructor)) static void find_libc_dlsym(void) {
  (void)shim_dlsym_init();
}

/* The names of the APIs the shims hook (the process hooks, exec and the
 * like, are never looked up on a library's handle to be called). */
SHIM_UNINSTRUMENTED static int api_name(const char *name) {
  return !strncmp(name, "protobuf_c_message_", 19) || !strncmp(name, "jpeg_", 5) ||
         !strncmp(name, "tj", 2);
}

/* Whether p lies in the object that holds this code. */
SHIM_UNINSTRUMENTED static int in_shim(const void *p) {
  static const void *self_map;
  struct dl_find_object fo;
  const void *me = __atomic_load_n(&self_map, __ATOMIC_RELAXED);
  if (!me) {
    if (_dl_find_object((void *)in_shim, &fo) != 0)
      return 0;
    me = fo.dlfo_link_map;
    __atomic_store_n(&self_map, me, __ATOMIC_RELAXED);
  }
  return _dl_find_object((void *)p, &fo) == 0 && fo.dlfo_link_map == me;
}

/* The shim's own definition of name, or NULL when it has none. */
SHIM_UNINSTRUMENTED static void *own_definition(dlsym_fn real, const char *name) {
  static void *self;
  void *h = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
  if (!h) {
    Dl_info di;
    if (!dladdr((void *)own_definition, &di) || !di.dli_fname)
      return NULL;
    h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY); /* a reference, kept */
    if (!h)
      return NULL;
    __atomic_store_n(&self, h, __ATOMIC_RELEASE);
  }
  void *p = real(h, name); /* the shim's scope: itself first, then its dependencies */
  return p && in_shim(p) ? p : NULL;
}

SHIM_UNINSTRUMENTED void *shim_dlsym_handle(void *handle, const char *name) {
  const void *caller = __builtin_return_address(0); /* reached by a jump: the program's */
  dlsym_fn real = shim_dlsym_init();
  if (!real)
    return NULL;
  void *p = real(handle, name);
  if (!p || !name || !api_name(name) || in_shim(caller) || in_shim(p))
    return p;
  void *hook = own_definition(real, name);
  void *r = hook && shim_real_opt(name) == p ? hook : p;
  /* the lookup succeeded: a failure of ours (a name the shim does not
   * define) must not be what the program's dlerror() reports next */
  (void)dlerror();
  return r;
}

#endif

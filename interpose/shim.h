/* shim.h — helpers shared by the preload runtimes (record/ and replay/).
 *
 * Real functions are resolved lazily with dlsym(RTLD_NEXT) into static
 * pointers. A per-thread depth counter marks the outermost intercepted call:
 * libprotobuf-c calls its own exported functions for nested messages (through
 * its PLT, so they reach our hooks again), and only the outermost call is an
 * accelerator invocation. */
#ifndef STANDIN_SHIM_H
#define STANDIN_SHIM_H

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <time.h>

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_TLS __thread __attribute__((tls_model("initial-exec")))
#define SHIM_LIKELY(x) __builtin_expect(!!(x), 1)
#define SHIM_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Depth of intercepted calls on this thread (all APIs share it: a JPEG
 * decoder that used protobuf-c internally would still count once). */
extern SHIM_TLS int shim_depth;

/* The outermost hooked call running on this thread: its hook's frame,
 * __builtin_frame_address(0), and the return address that frame held when
 * the call began; NULL when none runs, or shim_depth was raised without
 * one (a nested call then passes through whatever its frame). */
extern SHIM_TLS void *shim_frame;
extern SHIM_TLS const void *shim_frame_ret;

/* A call the program left by a longjmp past the hook (a signal handler's
 * timeout, an allocator or buffer callback that jumps out on error) never
 * lowers shim_depth: without a check, every later call on the thread
 * would pass through as nested. shim_left_behind is that check, for a hook
 * with frame `frame`, calling into the library at `lib` (its real
 * function), that finds shim_depth up. The counted call was left when, on
 * the same stack (frames far apart are a signal handler's alternate stack
 * or a coroutine's: nested, as before):
 *   - this frame is not deeper than its frame; or
 *   - this call does not come from the library itself (its return address
 *     is not in the object `lib` is in; lib may be NULL), and that frame
 *     no longer holds its return address (read with process_vm_readv, so
 *     a stack unmapped since cannot fault).
 * It then resets shim_depth and returns 1. x86-64 only, as the
 * library-side bypass (bypass.c). */
int shim_left_behind(void *frame, const void *lib);
/* Called on the thread when shim_left_behind finds a call left, if set (the
 * runtimes count them). */
extern void (*shim_on_left)(void);

/* Whether a hook whose frame is `frame` makes the outermost hooked call on
 * its thread. */
static inline int shim_outermost(void *frame, const void *lib) {
#if defined(__x86_64__)
  return __builtin_expect(shim_depth == 0, 1) || shim_left_behind(frame, lib);
#else
  (void)frame, (void)lib;
  return shim_depth == 0;
#endif
}

/* Enter the outermost hooked call, at frame `frame` (its hook's
 * __builtin_frame_address(0)); shim_leave when it returns. Code that runs a
 * program callback with shim_depth at 0 inside a call (JPG_CALLBACK) puts
 * shim_frame and shim_frame_ret back with it. */
static inline void shim_enter(void *frame) {
  shim_depth++;
  shim_frame = frame;
  shim_frame_ret = ((const void *const *)frame)[1];
}

static inline void shim_leave(void) {
  /* 0 already if a call inside reset it, from an alternate stack */
  if (shim_depth > 0 && --shim_depth == 0)
    shim_frame = NULL; /* code that raises shim_depth by hand (sink.c's
                          calibration) then counts as no call left */
}

/* Nested calls that passed through a record hook on this thread. Each adds a
 * few ns to the measured latency of the outermost call that the program
 * would not pay natively; the writer subtracts a calibrated cost per pass. */
extern SHIM_TLS uint32_t shim_nested;

/* Resolve `name` in the objects loaded after the shim; aborts the process
 * with a clear message if the symbol cannot be found, because a hook whose
 * real function is missing cannot do anything correct. */
void *shim_real(const char *name);

/* Like shim_real, but returns NULL when absent. */
void *shim_real_opt(const char *name);

/* Set on its thread while a shim's destructor runs: the loader is
 * finalising objects, and a lookup must not dlopen any (shim.c). Only
 * there: another library's destructor, run later, still finds what it
 * calls (shim_real would abort). */
extern SHIM_TLS int shim_exiting;

/* Whether addr lies in one of the loadable segments of the object info
 * describes (a dl_iterate_phdr callback's argument). */
static inline int shim_phdr_holds(const struct dl_phdr_info *info, uintptr_t addr) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && addr - ((uintptr_t)info->dlpi_addr + ph->p_vaddr) < ph->p_memsz)
      return 1;
  }
  return 0;
}

/* Whether addr lies in a segment of a loaded object (the program or a
 * library): what dladdr's success tells, without its search of the
 * object's symbols for the nearest one, which in a large library (bind9's
 * libdns) took ~60,000 instructions. Consistent with a dlclose on another
 * thread (shim.c). */
int shim_in_object(const void *addr);

/* dladdr: 0 when addr is in no object, 2 when it is in the program itself
 * (whose name dladdr takes from argv[0], which a program may have written
 * its title over: setproctitle, Chromium's renderers), else 1. */
int shim_dladdr(const void *addr, Dl_info *di);

/* The loader's counts of objects loaded and unloaded so far (glibc's
 * dlpi_adds and dlpi_subs); -1 each where the loader keeps none. */
void shim_loader_counts(long long *adds, long long *subs);

/* How many lookups have asked every loaded object (a library outside the
 * global scope, whose other functions are then looked for there first). */
uint64_t shim_real_scans(void);

/* Defined by each runtime; called by the exec* and _exit wrappers of
 * procwrap.c just before the process image ends. */
void shim_on_exec(void);
/* ... and after an exec that failed (the process goes on). */
void shim_on_exec_failed(void);
/* Around a posix_spawn: starting = 1 before it, 0 after. */
void shim_on_spawn(int starting);
void shim_on_exit(void);
/* Defined by each runtime; called by procwrap.c's exec and posix_spawn
 * wrappers before shim_on_exec or shim_on_spawn, with the program and the
 * environment it is given: one without the runtime's variables starts a
 * program that the runtime does not follow (env -i, a program that clears
 * LD_PRELOAD or sets its own). */
void shim_on_exec_env(const char *prog, char *const envp[]);
/* 1 when envp preloads a library whose name holds `lib` and sets `var`. */
int shim_env_follows(char *const envp[], const char *lib, const char *var);
/* Defined by each runtime; called by procwrap.c's chroot wrapper before
 * the process's root changes: the last moment it can reach files by the
 * paths it was given (its directory, /proc, the libraries it loads late). */
void shim_on_chroot(void);
/* Defined by each runtime; called by procwrap.c's prctl and syscall
 * wrappers before the calling thread installs a seccomp filter (strict or
 * BPF), which may refuse any system call from then on. */
void shim_on_seccomp(void);

/* Write a message to stderr with write(2): "standin: " + text + "\n".
 * Safe in hooks, signal handlers and after fork. */
void shim_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Bind a request fingerprint to the API that received it, so that pack and
 * get_packed_size of the same tree are different requests. */
void shim_fp_bind(uint8_t fp[16], int api);

/* The shims' clock, in CLOCK_MONOTONIC ns: the TSC, scaled, when the
 * launcher calibrated it and said so (shim_clock_init), else clock_gettime.
 * A TSC read costs ~11 ns here against ~25 ns for clock_gettime, twice per
 * recorded call. */
extern uint64_t shim_tsc_base, shim_mono_base, shim_tsc_mult;

static inline uint64_t shim_now_ns(void) {
  if (__builtin_expect(shim_tsc_mult != 0, 1)) {
    unsigned __int128 d = (unsigned __int128)(__builtin_ia32_rdtsc() - shim_tsc_base) * shim_tsc_mult;
    return shim_mono_base + (uint64_t)(d >> 32);
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Smallest per-iteration time (shim_now_ns) of `iters` runs of body, over
 * 5 batches: the minimum is the cost without interference from the rest of
 * the machine. Calibrates the clock read (record and replay) and the
 * hooks' own cost (record). */
#define SHIM_MIN_PER_ITER(iters, body)                                                             \
  ({                                                                                               \
    uint64_t best_ = UINT64_MAX;                                                                   \
    for (int b_ = 0; b_ < 5; b_++) {                                                               \
      uint64_t t0_ = shim_now_ns();                                                                \
      for (int i_ = 0; i_ < (iters); i_++) {                                                       \
        body;                                                                                      \
      }                                                                                            \
      uint64_t d_ = (shim_now_ns() - t0_) / (uint64_t)(iters);                                     \
      best_ = d_ < best_ ? d_ : best_;                                                             \
    }                                                                                              \
    best_;                                                                                         \
  })

/* Use the TSC calibration "TSC_BASE:MONO_BASE:MULT" (decimal; MONOTONIC
 * ns = MONO_BASE + ((tsc - TSC_BASE) * MULT >> 32)), as the launcher puts
 * it in STANDIN_TSC. Returns -1, keeping clock_gettime, if spec is not
 * one, or if the TSC it describes reads earlier than its base here. */
int shim_clock_init(const char *spec);

/* Code that may run before a sanitizer's runtime is set up (other
 * libraries' constructors call dlsym and prctl): not instrumented. */
#define SHIM_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread")))

/* SHIM_REAL for SHIM_UNINSTRUMENTED code: the real `fn` from dlsym itself,
 * touching nothing instrumented. */
#define EARLY_REAL(var, fn)                                                                        \
  static __typeof__(&fn) var##_cache;                                                              \
  __typeof__(&fn) var = __atomic_load_n(&var##_cache, __ATOMIC_RELAXED);                           \
  if (SHIM_UNLIKELY(!var)) {                                                                       \
    var = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn);                                                  \
    __atomic_store_n(&var##_cache, var, __ATOMIC_RELAXED);                                         \
  }

/* Declare `var` as the real `fn`, resolved on first use:
 *   SHIM_REAL(real, protobuf_c_message_pack);
 * The cache is read and written with relaxed atomics: racing threads store
 * the same value. */
#define SHIM_REAL(var, fn)                                                                         \
  static __typeof__(&fn) var##_cache;                                                              \
  __typeof__(&fn) var = __atomic_load_n(&var##_cache, __ATOMIC_RELAXED);                           \
  if (SHIM_UNLIKELY(!var)) {                                                                       \
    var = (__typeof__(&fn))shim_real(#fn);                                                         \
    __atomic_store_n(&var##_cache, var, __ATOMIC_RELAXED);                                         \
  }

#endif

/* bypass.h — a library's calls to its own exported functions, straight to
 * them instead of through our hooks.
 *
 * A preloaded hook sees every call through a PLT, the library's calls to
 * itself included (libprotobuf-c re-enters its exported functions for every
 * sub-message). Those are never what standin records or replays, and
 * passing them through a hook costs time inside the calls it measures. */
#ifndef STANDIN_BYPASS_H
#define STANDIN_BYPASS_H

#include <stddef.h>

/* In every loaded object whose path contains `object`, point its own GOT
 * slots for `names` (functions it defines) at its own definitions. Returns
 * the number of slots changed (0 on other architectures, or when the
 * object is not loaded or already bypassed). Calls from the program and
 * from other objects still reach the hooks. */
int shim_bypass_own_calls(const char *object, const char *const *names, size_t n);

/* shim_bypass_own_calls for libprotobuf-c's pack, get_packed_size,
 * pack_to_buffer and unpack; STANDIN_BYPASS_OWN_CALLS=0 leaves them to the
 * hooks (which pass them through). */
int shim_bypass_protobuf(void);

/* Point the slots through which lm and the objects loaded after it reach
 * a function this shim exports (imports of those names) at the shim's
 * definitions: what they bind to when not loaded with RTLD_DEEPBIND
 * (deepbind.c). Returns the number of slots changed (0 on other
 * architectures). */
struct link_map;
int shim_rebind_to_shim(struct link_map *lm);

#endif

/* typecap.c — message descriptors by where they live (see typecap.h).
 *
 * The writer thread writes a protobuf type (its name and schema) when it
 * reaches the type's first call, after the call returned. A program that
 * builds a descriptor at run time and frees it after its calls took the
 * writer to freed memory (SIGSEGV, t041). Such descriptors are captured on
 * the calling thread; generated ones, in an object's image, are left to the
 * writer, as building the schema of a type that reaches a thousand others
 * on the program's thread took 1.9 ms a type.
 *
 * The map grows under a lock and is read without one; a grown map replaces
 * the old one, which stays allocated (a reader may be in it): all the maps
 * together take at most twice the last one. Captured entries are never
 * freed, so the writer always finds the entry a queued call was checked
 * against, whatever dlcloses came between. */
#include "typecap.h"

#include <dlfcn.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <string.h>

#include "pb_walk.h"
#include "shim.h"
#include "shim_alloc.h"

typedef struct {
  char *name;   /* NULL: the descriptor had none */
  void *schema; /* NULL: the builder rejected it (or no memory) */
  size_t schema_len;
} cap_entry;

_Atomic(cap_map *) rt_type_map;
_Atomic uint64_t rt_type_gen = 1;
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t cap_used; /* slots with a key, under cap_lock */

/* Under cap_lock: a map with room for one more key (NULL: no memory). */
static cap_map *room(void) {
  cap_map *m = atomic_load_explicit(&rt_type_map, memory_order_relaxed);
  if (m && (cap_used + 1) * 2 <= m->cap)
    return m;
  size_t cap = m ? m->cap * 2 : 256;
  cap_map *n = shim_zalloc(sizeof *n + cap * sizeof n->s[0]);
  if (!n)
    return NULL;
  n->cap = cap;
  for (size_t i = 0; m && i < m->cap; i++) {
    const void *k = atomic_load_explicit(&m->s[i].key, memory_order_relaxed);
    if (!k)
      continue;
    int in_map;
    size_t j = rt_type_slot(n, k, &in_map);
    atomic_store_explicit(&n->s[j].val, atomic_load_explicit(&m->s[i].val, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&n->s[j].key, k, memory_order_relaxed);
  }
  atomic_store_explicit(&rt_type_map, n, memory_order_release); /* the old one stays */
  return n;
}

static char *copy_name(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = shim_alloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

/* The name and schema of d, read now; NULL without memory. */
static cap_entry *capture(const ProtobufCMessageDescriptor *d) {
  cap_entry *e = shim_zalloc(sizeof *e);
  if (!e)
    return NULL;
  if (d->name && !(e->name = copy_name(d->name))) {
    shim_free(e);
    return NULL;
  }
  if (pbw_schema_build(d, &e->schema, &e->schema_len) != PBW_OK) {
    e->schema = NULL;
    e->schema_len = 0;
  }
  return e;
}

void rt_type_classify(const void *key) {
  if (!key)
    return;
  /* before our lock: shim_in_object takes the loader's list lock (as
   * dladdr, used before, took its main lock, which a library's
   * constructor calling protobuf-c inside dlopen holds). A dlclose
   * meanwhile makes the class stale. */
  uint64_t gen = atomic_load_explicit(&rt_type_gen, memory_order_relaxed);
  int in_image = shim_in_object(key);
  pthread_mutex_lock(&cap_lock);
  cap_map *m = room();
  if (!m) { /* no memory: the writer reads the descriptor, as before */
    pthread_mutex_unlock(&cap_lock);
    return;
  }
  int in_map; /* or the slot it goes in */
  size_t j = rt_type_slot(m, key, &in_map);
  uint64_t v = atomic_load_explicit(&m->s[j].val, memory_order_relaxed);
  if (!(v & 1) && !(v && v >> 1 == gen)) {
    if (in_image) {
      v = gen << 1;
    } else {
      cap_entry *e = capture(key);
      v = e ? (uint64_t)(uintptr_t)e | 1 : 0;
    }
    if (v) {
      atomic_store_explicit(&m->s[j].val, v, memory_order_release);
      if (!atomic_load_explicit(&m->s[j].key, memory_order_relaxed)) {
        atomic_store_explicit(&m->s[j].key, key, memory_order_release);
        cap_used++;
      }
    }
  }
  pthread_mutex_unlock(&cap_lock);
}

int rt_type_captured(const void *key, const char **name, void **schema, size_t *schema_len) {
  int found = 0;
  pthread_mutex_lock(&cap_lock);
  cap_map *m = atomic_load_explicit(&rt_type_map, memory_order_relaxed);
  if (m) {
    int in_map;
    uint64_t v =
        atomic_load_explicit(&m->s[rt_type_slot(m, key, &in_map)].val, memory_order_relaxed);
    const cap_entry *e = (v & 1) ? (const cap_entry *)(uintptr_t)(v & ~1ull) : NULL;
    if (e) {
      found = 1;
      *name = e->name;
      *schema = NULL;
      *schema_len = 0;
      if (e->schema && (*schema = shim_alloc(e->schema_len))) {
        memcpy(*schema, e->schema, e->schema_len);
        *schema_len = e->schema_len;
      }
    }
  }
  pthread_mutex_unlock(&cap_lock);
  return found;
}

void rt_type_unloaded(void) {
  atomic_fetch_add_explicit(&rt_type_gen, 1, memory_order_relaxed);
}

/* Around fork (rt.c's handlers, after the writer's round, before the
 * allocator's lock): the child gets the map whole. */
void rt_type_fork_lock(void) {
  pthread_mutex_lock(&cap_lock);
}

void rt_type_fork_unlock(void) {
  pthread_mutex_unlock(&cap_lock);
}

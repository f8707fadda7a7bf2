/* typecap.c — message types captured on the program's thread.
 *
 * The writer thread writes a protobuf type (its name and schema) when it
 * reaches the type's first call, after the call has returned, and the
 * program may have freed the descriptor by then: one built at run time on
 * the heap or in a mapping, freed after its calls, took the writer to
 * freed memory and killed the program with SIGSEGV. So the first call of
 * each descriptor captures it on the calling thread, outside the timed
 * window, while the program still holds it: name and schema, copied onto
 * standin's heap. The writer takes its copy from here and never reads a
 * descriptor that was captured.
 *
 * A lock-free set of captured addresses answers "already captured" for
 * every later call; the entries themselves sit in a table under a lock,
 * taken only by a capture and by the writer once per type per file.
 * Forgotten when the writer forgets its types (dlclose), as a library
 * loaded in an unloaded one's place may put another type at the same
 * address. */
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "keyset.h"
#include "pb_walk.h"
#include "record_internal.h"
#include "shim.h"
#include "shim_alloc.h"

#define CAP_BITS 12 /* the lock-free set; a full neighbourhood takes the lock */

typedef struct {
  const void *key;
  char *name;   /* NULL: the descriptor had none */
  void *schema; /* NULL: the builder rejected it (or no memory) */
  size_t schema_len;
} cap_entry;

static keyset_slot_t cap_keys[1u << CAP_BITS];
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static cap_entry *cap_tab; /* open addressing, under cap_lock */
static size_t cap_cap, cap_n;

/* Under cap_lock: key's entry, or the empty slot where it goes. */
static cap_entry *tab_find(const void *key) {
  size_t j = ((uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull >> 20) & (cap_cap - 1);
  while (cap_tab[j].key && cap_tab[j].key != key)
    j = (j + 1) & (cap_cap - 1);
  return &cap_tab[j];
}

static int tab_grow(void) {
  size_t ncap = cap_cap ? cap_cap * 2 : 64;
  cap_entry *old = cap_tab, *nt = shim_zalloc(ncap * sizeof *nt);
  size_t ocap = cap_cap;
  if (!nt)
    return -1;
  cap_tab = nt;
  cap_cap = ncap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].key)
      *tab_find(old[i].key) = old[i];
  shim_free(old);
  return 0;
}

static char *copy_name(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = shim_alloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

void rt_type_capture(const void *key) {
  if (SHIM_LIKELY(keyset_has(cap_keys, CAP_BITS, key)))
    return;
  const ProtobufCMessageDescriptor *d = key;
  pthread_mutex_lock(&cap_lock);
  if ((cap_n + 1) * 2 > cap_cap && tab_grow() != 0) {
    pthread_mutex_unlock(&cap_lock); /* the writer reads the descriptor, as before */
    return;
  }
  cap_entry *e = tab_find(key);
  if (!e->key) {
    cap_entry n = {.key = key};
    if (d->name && !(n.name = copy_name(d->name))) {
      pthread_mutex_unlock(&cap_lock);
      return;
    }
    if (pbw_schema_build(d, &n.schema, &n.schema_len) != PBW_OK) {
      n.schema = NULL;
      n.schema_len = 0;
    }
    *e = n;
    cap_n++;
  }
  keyset_add(cap_keys, CAP_BITS, key);
  pthread_mutex_unlock(&cap_lock);
}

int rt_type_captured(const void *key, const char **name, void **schema, size_t *schema_len) {
  int found = 0;
  pthread_mutex_lock(&cap_lock);
  if (cap_cap) {
    cap_entry *e = tab_find(key);
    if (e->key) {
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

/* The name rt_type_captured gives stays valid until this. */
void rt_type_forget_all(void) {
  pthread_mutex_lock(&cap_lock);
  keyset_clear(cap_keys, CAP_BITS);
  for (size_t i = 0; i < cap_cap; i++) {
    shim_free(cap_tab[i].name);
    shim_free(cap_tab[i].schema);
  }
  shim_free(cap_tab);
  cap_tab = NULL;
  cap_cap = cap_n = 0;
  pthread_mutex_unlock(&cap_lock);
}

/* Around fork (rt.c's handlers, after the writer's round, before the
 * allocator's lock): the child gets the table whole. */
void rt_type_fork_lock(void) {
  pthread_mutex_lock(&cap_lock);
}

void rt_type_fork_unlock(void) {
  pthread_mutex_unlock(&cap_lock);
}

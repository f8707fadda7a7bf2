/* pbtest — a protobuf-c program for end-to-end tests of record and replay.
 *
 *   pbtest basic N        build, pack (3 ways) and unpack N messages
 *   pbtest timed N        basic, its four calls timed by the program's own
 *                         clock: says on stderr how long the program saw
 *                         itself in them and outside them (run_timed)
 *   pbtest threads T N    T threads, each doing `basic N` on its own messages
 *   pbtest minstack T N   threads, on the smallest stacks pthread_create
 *                         takes (PTHREAD_STACK_MIN)
 *   pbtest pool T N       T workers take N messages from a shared queue
 *   pbtest rotpool T N    T workers, worker t takes the messages i with
 *                         (i + R) % T == t, R read from standard input (0
 *                         when it holds none): which thread makes which
 *                         calls changes with the input, the calls do not
 *   pbtest fork C N       C forked children each do `basic N`, one at a time
 *   pbtest forkpar C N    C forked children each do `basic N`, all at once
 *   pbtest exec N         exec `pbtest basic N` (after one call of its own)
 *   pbtest p3 N           proto3 messages
 *   pbtest bad            unpack damaged bytes (the library returns NULL)
 *   pbtest deep D N       N rounds of size, pack, pack_to_buffer of chains
 *                         of D and D - 1 nested messages
 *   pbtest oddunknown N   N rounds of packing a message holding a
 *                         hand-built unknown field that is a group
 *   pbtest same N         N rounds of packing the same messages: a Tree,
 *                         and an empty Leaf and an empty Node (two types,
 *                         the same 0 bytes)
 *   pbtest lonesize N     N rounds of get_packed_size then pack of a
 *                         Tree, but every 16th size is followed by the
 *                         size of another Tree and no pack (a lone size)
 *   pbtest sizeedit N     N rounds of get_packed_size then pack of a
 *                         Tree, every third edited in between
 *   pbtest escape N       basic's work on N messages, with calls the
 *                         program leaves by siglongjmp from a buffer's
 *                         append and from an allocator (run_escape)
 *
 * Output is deterministic (independent of thread scheduling), so a replayed
 * run must print exactly what the recorded run printed. */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pbw_types.pb-c.h"
#include "sample.pb-c.h"
#include "sample3.pb-c.h"

typedef Standin__Test__Tree Tree;
typedef Standin__Test__Branch Branch;
typedef Standin__Test__Leaf Leaf;

static uint64_t fnv(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Deterministic pseudo-random numbers per message. */
static uint32_t rnd(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

typedef struct {
  Tree tree;
  Branch trunk, branches[4];
  Leaf leaves[16], best, oneof_leaf, map_leaf;
  Leaf *leafp[16];
  Branch *branchp[4];
  int32_t values[32];
  uint32_t packed[16];
  uint64_t unpacked[8];
  char *tags[3];
  ProtobufCBinaryData chunks[2];
  Standin__Test__Tree__CountersEntry ce[3], *cep[3];
  Standin__Test__Tree__LeafMapEntry le[1], *lep[1];
  char title[32], text[32], names[16][16];
  uint8_t blob[2048];
} msg_store;

/* Fill a message; i selects sizes and which oneof member is set, so the
 * message set covers small, medium and large messages and every field. */
static void build(msg_store *m, int i) {
  uint64_t s = (uint64_t)i * 7919 + 1;
  memset(m, 0, sizeof *m);
  standin__test__tree__init(&m->tree);
  snprintf(m->title, sizeof m->title, "tree-%d", i);
  m->tree.title = m->title;
  int nb = i % 4, nl = 1 + i % 3;
  for (int b = 0; b < nb; b++) {
    Branch *br = &m->branches[b];
    standin__test__branch__init(br);
    br->id = (int64_t)rnd(&s) - 100000;
    br->n_leaves = (size_t)nl;
    br->leaves = &m->leafp[b * 4];
    for (int l = 0; l < nl; l++) {
      Leaf *lf = &m->leaves[b * 4 + l];
      standin__test__leaf__init(lf);
      if ((i + l) % 2) {
        snprintf(m->names[b * 4 + l], 16, "n%d.%d", b, l);
        lf->name = m->names[b * 4 + l];
      }
      lf->n_values = (size_t)(rnd(&s) % 8);
      lf->values = m->values;
      for (size_t v = 0; v < lf->n_values; v++)
        m->values[v] = (int32_t)rnd(&s) - (int32_t)(1u << 30);
      if (l == 0) {
        size_t bl = (i % 5 == 4) ? sizeof m->blob : (size_t)(rnd(&s) % 64);
        for (size_t k = 0; k < bl; k++)
          m->blob[k] = (uint8_t)rnd(&s);
        lf->has_blob = 1;
        lf->blob.len = bl;
        lf->blob.data = m->blob;
      }
      m->leafp[b * 4 + l] = lf;
    }
    if (b == 1) {
      br->has_color = 1;
      br->color = STANDIN__TEST__COLOR__BLUE;
      m->tags[0] = "alpha";
      m->tags[1] = "";
      br->n_tags = 2;
      br->tags = m->tags;
    }
    m->branchp[b] = br;
  }
  m->tree.n_branches = (size_t)nb;
  m->tree.branches = m->branchp;
  if (i % 3 == 0) {
    standin__test__branch__init(&m->trunk);
    m->trunk.id = i;
    standin__test__leaf__init(&m->best);
    m->best.has_weight = 1;
    m->best.weight = i * 0.25;
    m->trunk.best = &m->best;
    m->tree.trunk = &m->trunk;
  }
  for (int k = 0; k < 3; k++) {
    standin__test__tree__counters_entry__init(&m->ce[k]);
    m->ce[k].key = k == 0 ? "a" : k == 1 ? "b" : "c";
    m->ce[k].has_value = 1;
    m->ce[k].value = i * 1000 + k;
    m->cep[k] = &m->ce[k];
  }
  m->tree.n_counters = (size_t)(i % 4);
  m->tree.counters = m->cep;
  if (i % 2) {
    standin__test__tree__leaf_map_entry__init(&m->le[0]);
    standin__test__leaf__init(&m->map_leaf);
    m->le[0].has_key = 1;
    m->le[0].key = i;
    m->le[0].value = &m->map_leaf;
    m->lep[0] = &m->le[0];
    m->tree.n_leaf_map = 1;
    m->tree.leaf_map = m->lep;
  }
  switch (i % 4) {
  case 0: break;
  case 1:
    m->tree.payload_case = STANDIN__TEST__TREE__PAYLOAD_NUMBER;
    m->tree.number = -i;
    break;
  case 2:
    snprintf(m->text, sizeof m->text, "text %d", i);
    m->tree.payload_case = STANDIN__TEST__TREE__PAYLOAD_TEXT;
    m->tree.text = m->text;
    break;
  case 3:
    standin__test__leaf__init(&m->oneof_leaf);
    m->oneof_leaf.name = "in-oneof";
    m->tree.payload_case = STANDIN__TEST__TREE__PAYLOAD_LEAF;
    m->tree.leaf = &m->oneof_leaf;
    break;
  }
  m->tree.n_packed_ids = (size_t)(i % 16);
  for (size_t k = 0; k < m->tree.n_packed_ids; k++)
    m->packed[k] = rnd(&s);
  m->tree.packed_ids = m->packed;
  m->tree.n_unpacked_ids = (size_t)(i % 8);
  for (size_t k = 0; k < m->tree.n_unpacked_ids; k++)
    m->unpacked[k] = (uint64_t)rnd(&s) << 20;
  m->tree.unpacked_ids = m->unpacked;
  if (i % 5 == 1) {
    m->tree.has_flag = 1;
    m->tree.flag = 0;
  }
  if (i % 7 == 2) {
    m->tree.has_ratio = 1;
    m->tree.ratio = (float)i / 3.0f;
  }
  m->chunks[0].data = m->blob;
  m->chunks[0].len = 5;
  m->tree.n_chunks = (size_t)(i % 2);
  m->tree.chunks = m->chunks;
}

/* Fold what the program can see of an unpacked tree into a hash, so that a
 * wrong replayed tree changes the output. */
static uint64_t leaf_hash(const Leaf *l, uint64_t h) {
  h = fnv(l->name, strlen(l->name), h);
  h = fnv(&l->has_blob, sizeof l->has_blob, h);
  if (l->has_blob)
    h = fnv(l->blob.data, l->blob.len, h);
  h = fnv(l->values, l->n_values * sizeof *l->values, h);
  return fnv(&l->weight, sizeof l->weight, h);
}

static uint64_t tree_hash(const Tree *t) {
  uint64_t h = fnv(t->title, strlen(t->title), 14695981039346656037ull);
  for (size_t b = 0; b < t->n_branches; b++) {
    const Branch *br = t->branches[b];
    h = fnv(&br->id, sizeof br->id, h);
    h = fnv(&br->color, sizeof br->color, h);
    for (size_t l = 0; l < br->n_leaves; l++)
      h = leaf_hash(br->leaves[l], h);
    for (size_t k = 0; k < br->n_tags; k++)
      h = fnv(br->tags[k], strlen(br->tags[k]) + 1, h);
  }
  if (t->trunk && t->trunk->best)
    h = leaf_hash(t->trunk->best, h);
  for (size_t k = 0; k < t->n_counters; k++) {
    h = fnv(t->counters[k]->key, strlen(t->counters[k]->key), h);
    h = fnv(&t->counters[k]->value, 8, h);
  }
  for (size_t k = 0; k < t->n_leaf_map; k++)
    h = leaf_hash(t->leaf_map[k]->value, fnv(&t->leaf_map[k]->key, 4, h));
  h = fnv(&t->payload_case, sizeof t->payload_case, h);
  if (t->payload_case == STANDIN__TEST__TREE__PAYLOAD_TEXT)
    h = fnv(t->text, strlen(t->text), h);
  if (t->payload_case == STANDIN__TEST__TREE__PAYLOAD_LEAF)
    h = leaf_hash(t->leaf, h);
  h = fnv(t->packed_ids, t->n_packed_ids * 4, h);
  h = fnv(t->unpacked_ids, t->n_unpacked_ids * 8, h);
  h = fnv(&t->flag, sizeof t->flag, h);
  h = fnv(t->motto, strlen(t->motto), h);
  for (size_t k = 0; k < t->n_chunks; k++)
    h = fnv(t->chunks[k].data, t->chunks[k].len, h);
  return h;
}

/* pbtest timed: the ticks basic's calls took by the program's clock (the
 * TSC where there is one: a read costs ~9 ns, against ~20 for
 * clock_gettime). */
static int timing;
static uint64_t timed_ticks;

static inline uint64_t ticks(void) {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

#define TIMED(expr)                                                                                \
  __extension__({                                                                                  \
    uint64_t a_ = timing ? ticks() : 0;                                                            \
    __auto_type r_ = (expr);                                                                       \
    if (timing)                                                                                    \
      timed_ticks += ticks() - a_;                                                                 \
    r_;                                                                                            \
  })

/* One message through every API; returns a line of output. */
static void one(int i, char *out, size_t cap) {
  msg_store *m = malloc(sizeof *m);
  build(m, i);
  size_t n = TIMED(standin__test__tree__get_packed_size(&m->tree));
  uint8_t *buf = malloc(n);
  size_t w = TIMED(standin__test__tree__pack(&m->tree, buf));
  uint8_t tmp[256];
  ProtobufCBufferSimple sb = PROTOBUF_C_BUFFER_SIMPLE_INIT(tmp);
  size_t w2 = TIMED(standin__test__tree__pack_to_buffer(&m->tree, &sb.base));
  int same = w2 == w && memcmp(sb.data, buf, w) == 0;
  PROTOBUF_C_BUFFER_SIMPLE_CLEAR(&sb);
  Tree *t = TIMED(standin__test__tree__unpack(NULL, w, buf));
  uint64_t h = t ? tree_hash(t) : 0;
  snprintf(out, cap, "msg %d size %zu packed %zu buffer-same %d hash %016llx\n", i, n, w, same,
           (unsigned long long)h);
  standin__test__tree__free_unpacked(t, NULL);
  free(buf);
  free(m);
}

/* Unpack, then change the tree the way programs do, freeing and replacing
 * parts with malloc (libprotobuf-c's default allocator) before
 * free_unpacked: a new title, the last branch dropped, a chunk replaced. */
static int run_surgery(int n) {
  for (int i = 0; i < n; i++) {
    msg_store *m = malloc(sizeof *m);
    build(m, i);
    size_t len = standin__test__tree__get_packed_size(&m->tree);
    uint8_t *buf = malloc(len);
    standin__test__tree__pack(&m->tree, buf);
    Tree *t = standin__test__tree__unpack(NULL, len, buf);
    if (!t)
      return 1;
    free(t->title);
    t->title = strdup("renamed");
    if (t->n_branches > 0) {
      standin__test__branch__free_unpacked(t->branches[t->n_branches - 1], NULL);
      t->n_branches--;
    }
    if (t->n_chunks > 0) {
      free(t->chunks[0].data);
      t->chunks[0].data = malloc(3);
      memcpy(t->chunks[0].data, "new", 3);
      t->chunks[0].len = 3;
    }
    printf("surgery %d hash %016llx\n", i, (unsigned long long)tree_hash(t));
    standin__test__tree__free_unpacked(t, NULL);
    free(buf);
    free(m);
  }
  return 0;
}

/* Calls left by a longjmp, as a program's timeout handler or error path
 * leaves them: every other message's pack_to_buffer goes to a buffer whose
 * append jumps out of the library, and every fourth message's unpack to an
 * allocator that jumps out at its second allocation. Every hooked call
 * after one that was left is made from a deeper frame than it. Every
 * fourth message is also packed to a buffer whose append makes a nested
 * call. */
static sigjmp_buf escape_jb;

static void escape_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  (void)b, (void)len, (void)data;
  siglongjmp(escape_jb, 1);
}

/* An append that sizes the tree from inside the call, as a program
 * callback may: a nested call, which passes through. */
typedef struct {
  ProtobufCBuffer base;
  const Tree *tree;
  size_t len, nested;
} nesting_buffer;

static void nesting_append(ProtobufCBuffer *b, size_t len, const uint8_t *data) {
  nesting_buffer *nb = (nesting_buffer *)b;
  (void)data;
  nb->len += len;
  nb->nested = standin__test__tree__get_packed_size(nb->tree);
}

static int escape_allocs;

static void *escape_alloc(void *data, size_t size) {
  (void)data;
  if (++escape_allocs == 2)
    siglongjmp(escape_jb, 1);
  return malloc(size);
}

static void escape_free(void *data, void *p) {
  (void)data;
  free(p);
}

static __attribute__((noinline)) uint8_t *escape_packed(const Tree *t, size_t *len) {
  *len = standin__test__tree__get_packed_size(t);
  uint8_t *buf = malloc(*len);
  standin__test__tree__pack(t, buf);
  return buf;
}

static int run_escape(int n) {
  char line[160];
  for (volatile int i = 0; i < n; i++) {
    one(i, line, sizeof line);
    fputs(line, stdout);
    msg_store *volatile m = malloc(sizeof *m);
    build(m, i);
    size_t len;
    uint8_t *volatile buf = escape_packed(&m->tree, &len);
    ProtobufCAllocator a = {escape_alloc, escape_free, NULL};
    escape_allocs = 0;
    if (i % 4 == 3 && sigsetjmp(escape_jb, 0) == 0) {
      Tree *t = standin__test__tree__unpack(&a, len, buf);
      printf("escape %d: unpack returned %s\n", i, t ? "a tree" : "NULL");
      standin__test__tree__free_unpacked(t, &a);
    } else if (i % 4 == 3) {
      printf("escape %d: left unpack\n", i);
    }
    if (i % 4 == 0) {
      nesting_buffer nb = {{nesting_append}, &m->tree, 0, 0};
      standin__test__tree__pack_to_buffer(&m->tree, &nb.base);
      printf("nesting %d: %zu bytes appended, %zu sized inside\n", (int)i, nb.len, nb.nested);
    }
    if (i % 2 == 1 && sigsetjmp(escape_jb, 0) == 0) {
      ProtobufCBuffer b = {escape_append};
      standin__test__tree__pack_to_buffer(&m->tree, &b);
      printf("escape %d: pack_to_buffer returned\n", i);
    } else if (i % 2 == 1) {
      printf("escape %d: left pack_to_buffer\n", i);
    }
    free(buf);
    free(m);
  }
  return 0;
}

static void basic(int base, int n) {
  char line[160];
  for (int i = 0; i < n; i++) {
    one(base + i, line, sizeof line);
    fputs(line, stdout);
  }
}

static __attribute__((noinline)) size_t nothing(const void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
  return 0;
}

/* basic's work with its calls timed, to set the program's own view of its
 * calls beside what a replay's summary counts (make bench): the clock's
 * own cost, timed around an empty call, is taken off each call. */
static void run_timed(int n) {
  timing = 1;
  enum { EMPTY = 1000000 };
  volatile size_t sink = 0;
  for (int i = 0; i < EMPTY; i++)
    sink += TIMED(nothing(&i));
  double empty = (double)timed_ticks / EMPTY;
  timed_ticks = 0;
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  uint64_t t0 = ticks();
  basic(0, n);
  uint64_t t1 = ticks();
  clock_gettime(CLOCK_MONOTONIC, &b);
  double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
  double per_tick = t1 > t0 ? ns / (double)(t1 - t0) : 0;
  double calls = ((double)timed_ticks - 4.0 * n * empty) * per_tick;
  fprintf(stderr,
          "pbtest: timed %d messages: calls_ns %.0f own_ns %.0f clock_ns %.1f "
          "(the calls by the program's clock, less the clock's own cost a call; the rest)\n",
          n, calls, ns - calls, empty * per_tick);
}

typedef struct {
  int base, n;
  char *out;
} job;

static void *thread_main(void *p) {
  job *j = p;
  size_t o = 0;
  for (int i = 0; i < j->n; i++) {
    one(j->base + i, j->out + o, 160);
    o += strlen(j->out + o);
  }
  return NULL;
}

/* Threads doing basic's work; with user_stack 1, on stacks the program
 * allocated itself (pthread_attr_setstack), as some servers do; 2, on
 * stacks of PTHREAD_STACK_MIN (16 KiB on x86-64). */
static int run_threads(int nt, int n, int user_stack) {
  pthread_t th[64];
  job jobs[64];
  void *stacks[64] = {0};
  const size_t stack_size = 512 << 10;
  for (int t = 0; t < nt && t < 64; t++) {
    jobs[t] = (job){t * 1000, n, calloc((size_t)n, 160)};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (user_stack == 2)
      pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
    else if (user_stack) {
      if (posix_memalign(&stacks[t], 4096, stack_size) != 0)
        return 1;
      pthread_attr_setstack(&attr, stacks[t], stack_size);
    }
    if (pthread_create(&th[t], &attr, thread_main, &jobs[t]) != 0)
      return 1;
    pthread_attr_destroy(&attr);
  }
  for (int t = 0; t < nt && t < 64; t++) {
    pthread_join(th[t], NULL);
    fputs(jobs[t].out, stdout);
    free(jobs[t].out);
    free(stacks[t]);
  }
  return 0;
}

/* A pool: workers take message numbers from a shared counter, so which
 * thread handles which message changes from run to run. */
static _Atomic int pool_next;
static int pool_n;
static char (*pool_out)[160];

static void *pool_main(void *p) {
  (void)p;
  int i;
  while ((i = atomic_fetch_add(&pool_next, 1)) < pool_n)
    one(i, pool_out[i], 160);
  return NULL;
}

static int rot_r, rot_t;

static void *rot_main(void *p) {
  int t = (int)(intptr_t)p;
  for (int i = 0; i < pool_n; i++)
    if ((i + rot_r) % rot_t == t)
      one(i, pool_out[i], 160);
  return NULL;
}

static int run_rotpool(int nt, int n) {
  pthread_t th[64];
  if (scanf("%d", &rot_r) != 1 || rot_r < 0)
    rot_r = 0;
  rot_t = nt < 1 ? 1 : nt > 64 ? 64 : nt;
  pool_n = n;
  pool_out = calloc((size_t)n, 160);
  for (int t = 0; t < rot_t; t++)
    pthread_create(&th[t], NULL, rot_main, (void *)(intptr_t)t);
  for (int t = 0; t < rot_t; t++)
    pthread_join(th[t], NULL);
  for (int i = 0; i < n; i++)
    fputs(pool_out[i], stdout);
  free(pool_out);
  return 0;
}

static int run_pool(int nt, int n) {
  pthread_t th[64];
  pool_n = n;
  pool_out = calloc((size_t)n, 160);
  for (int t = 0; t < nt && t < 64; t++)
    pthread_create(&th[t], NULL, pool_main, NULL);
  for (int t = 0; t < nt && t < 64; t++)
    pthread_join(th[t], NULL);
  for (int i = 0; i < n; i++)
    fputs(pool_out[i], stdout);
  free(pool_out);
  return 0;
}

static int run_fork(int nc, int n) {
  basic(0, 1);
  fflush(stdout);
  for (int c = 0; c < nc; c++) {
    pid_t pid = fork();
    if (pid == 0) {
      basic((c + 1) * 100, n);
      fflush(stdout);
      _exit(0);
    }
    int st;
    waitpid(pid, &st, 0); /* one at a time keeps the output ordered */
    if (!WIFEXITED(st) || WEXITSTATUS(st))
      return 1;
  }
  return 0;
}

/* Children run at the same time; each writes its lines to a pipe and the
 * parent prints them in child order, so the output stays deterministic. */
static int run_forkpar(int nc, int n) {
  int fds[64][2];
  pid_t pids[64];
  for (int c = 0; c < nc && c < 64; c++) {
    if (pipe(fds[c]) != 0)
      return 1;
    pids[c] = fork();
    if (pids[c] == 0) {
      close(fds[c][0]);
      FILE *out = fdopen(fds[c][1], "w");
      char line[160];
      for (int i = 0; i < n; i++) {
        one((c + 1) * 100 + i, line, sizeof line);
        fputs(line, out);
      }
      fclose(out);
      _exit(0);
    }
    close(fds[c][1]);
  }
  int rc = 0;
  for (int c = 0; c < nc && c < 64; c++) {
    FILE *in = fdopen(fds[c][0], "r");
    char line[160];
    while (fgets(line, sizeof line, in))
      fputs(line, stdout);
    fclose(in);
    int st;
    waitpid(pids[c], &st, 0);
    rc |= !WIFEXITED(st) || WEXITSTATUS(st);
  }
  return rc;
}

static int run_p3(int n) {
  for (int i = 0; i < n; i++) {
    Standin__Test3__Item items[3], *ip[3];
    Standin__Test3__Batch b = STANDIN__TEST3__BATCH__INIT;
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    for (int k = 0; k < 3; k++) {
      standin__test3__item__init(&items[k]);
      items[k].key = k == 1 ? "" : key;
      ip[k] = &items[k];
    }
    b.name = i % 2 ? "batch" : "";
    b.n_items = (size_t)(i % 4);
    b.items = ip;
    b.version = (uint32_t)i;
    if (i % 3 == 1) {
      b.pick_case = STANDIN__TEST3__BATCH__PICK_LABEL;
      b.label = "lbl";
    }
    size_t len = standin__test3__batch__get_packed_size(&b);
    uint8_t *buf = malloc(len + 1);
    standin__test3__batch__pack(&b, buf);
    Standin__Test3__Batch *u = standin__test3__batch__unpack(NULL, len, buf);
    uint64_t h = fnv(u->name, strlen(u->name), 1);
    for (size_t k = 0; k < u->n_items; k++)
      h = fnv(u->items[k]->key, strlen(u->items[k]->key) + 1, h);
    h = fnv(&u->version, 4, h);
    printf("p3 %d len %zu hash %016llx\n", i, len, (unsigned long long)h);
    standin__test3__batch__free_unpacked(u, NULL);
    free(buf);
  }
  return 0;
}

static int run_bad(void) {
  static const uint8_t bad[] = {0x0a, 0x50, 'x'}; /* string length past the end */
  Tree *t = standin__test__tree__unpack(NULL, sizeof bad, bad);
  printf("bad unpack -> %s\n", t ? "message" : "NULL");
  basic(5, 1);
  return 0;
}

/* get_packed_size, pack and pack_to_buffer of one message; prints a digest
 * of the bytes. */
static void pack_three_ways(const char *what, int i, const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t *buf = malloc(len + 1);
  size_t got = protobuf_c_message_pack(m, buf);
  uint8_t scratch[64];
  ProtobufCBufferSimple sb = PROTOBUF_C_BUFFER_SIMPLE_INIT(scratch);
  size_t got2 = protobuf_c_message_pack_to_buffer(m, &sb.base);
  int same = got == len && got2 == len && !memcmp(sb.data, buf, len);
  printf("%s %d len %zu hash %016llx %s\n", what, i, len, (unsigned long long)fnv(buf, len, 1),
         same ? "same" : "DIFFERENT");
  PROTOBUF_C_BUFFER_SIMPLE_CLEAR(&sb);
  free(buf);
}

/* Chains of d and d - 1 Nodes: past PBW_MAX_DEPTH (100), standin records
 * the call without a fingerprint. */
static int run_deep(int d, int n) {
  Standin__Pbw__Node *nodes = calloc((size_t)d, sizeof *nodes);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < 2; k++) {
      int depth = d - k;
      for (int j = 0; j < depth; j++) {
        standin__pbw__node__init(&nodes[j]);
        nodes[j].has_level = 1;
        nodes[j].level = (uint32_t)(i + j);
        nodes[j].child = j + 1 < depth ? &nodes[j + 1] : NULL;
      }
      pack_three_ways("deep", depth, &nodes[0].base);
    }
  }
  free(nodes);
  return 0;
}

/* A message with an unknown field a program put in by hand, of the group
 * wire type, which libprotobuf-c writes out but could not read back. */
static int run_oddunknown(int n) {
  for (int i = 0; i < n; i++) {
    Leaf lf = STANDIN__TEST__LEAF__INIT;
    char name[16];
    snprintf(name, sizeof name, "odd%d", i % 3);
    ProtobufCMessageUnknownField u = {100, (ProtobufCWireType)3, 0, NULL};
    lf.name = name;
    lf.base.n_unknown_fields = 1;
    lf.base.unknown_fields = &u;
    pack_three_ways("oddunknown", i, &lf.base);
    if (i == 0) { /* a recorder's writer thread has time to see the type */
      struct timespec ts = {0, 50000000};
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

static int run_same(int n) {
  msg_store *st = calloc(1, sizeof *st);
  Leaf lf = STANDIN__TEST__LEAF__INIT;
  Standin__Pbw__Node node = STANDIN__PBW__NODE__INIT;
  build(st, 7);
  for (int i = 0; i < n; i++) {
    pack_three_ways("same-tree", i, &st->tree.base);
    pack_three_ways("same-leaf", i, &lf.base);
    pack_three_ways("same-node", i, &node.base);
  }
  free(st);
  return 0;
}

/* One tree packed three ways again and again, edited in place now and
 * then where a snapshot of it must notice (replay keeps one of a tree
 * looked up again: rep_protobuf.c unchanged_tree): a byte of a deep bytes
 * field, its title cut short, a deep scalar, a leaf swapped for an equal
 * copy; each edit is undone later, so every tree recurs. */
static int run_edits(int n) {
  msg_store *st = calloc(1, sizeof *st);
  build(st, 7);
  Leaf *l0 = st->branches[0].leaves[0], copy = *l0;
  l0->blob.len = 40;
  copy.blob.len = 40;
  for (int i = 0; i < n; i++) {
    switch (i % 10) {
    case 3: st->blob[1] ^= 1; break;
    case 4: st->title[4] = '\0'; break;
    case 5: st->title[4] = '-'; break;
    case 6: st->blob[1] ^= 1; break;
    case 7: st->branches[0].id++; break;
    case 8:
      st->branches[0].id--;
      st->branches[0].leaves[0] = &copy;
      break;
    case 9: st->branches[0].leaves[0] = l0; break;
    }
    pack_three_ways("edits", i, &st->tree.base);
  }
  free(st);
  return 0;
}

/* t: a tree of about `size` bytes, its one chunk (*chunk) a new buffer
 * of pattern bytes, which the caller frees. */
static uint8_t *fresh_tree(Tree *t, ProtobufCBinaryData *chunk, const char *title, int size) {
  size_t pad = size > 64 ? (size_t)size - 64 : 1;
  uint8_t *blob = malloc(pad);
  for (size_t i = 0; i < pad; i++)
    blob[i] = (uint8_t)(i * 131 + 7);
  *t = (Tree)STANDIN__TEST__TREE__INIT;
  *chunk = (ProtobufCBinaryData){pad, blob};
  t->title = (char *)title;
  t->n_chunks = 1;
  t->chunks = chunk;
  return blob;
}

/* A tree of `size` bytes packed n times into one buffer, then n times into
 * a fresh mapping each (its pages faulted in by the pack: record counts
 * those faults, faults.h). */
static int run_fresh(int n, int size) {
  Tree t;
  ProtobufCBinaryData chunk;
  uint8_t *blob = fresh_tree(&t, &chunk, "fresh", size);
  size_t len = protobuf_c_message_get_packed_size(&t.base);
  uint8_t *reused = malloc(len);
  for (int i = 0; i < 2 * n; i++) {
    blob[0] = (uint8_t)i; /* a new message each time */
    uint8_t *out = reused;
    if (i >= n && (out = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                              0)) == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    size_t got = protobuf_c_message_pack(&t.base, out);
    printf("%s %d len %zu hash %016llx\n", i < n ? "reused" : "fresh", i, got,
           (unsigned long long)fnv(out, got, 1));
    if (out != reused)
      munmap(out, len);
  }
  free(reused);
  free(blob);
  return 0;
}

/* n trees of one length (size bytes), each its own, packed and unpacked:
 * what the program sees of each unpacked tree is printed. */
static int run_unpackfresh(int n, int size) {
  Tree t;
  ProtobufCBinaryData chunk;
  char title[32] = "unpackfresh-00000"; /* short: held in the tree's image */
  uint8_t *blob = fresh_tree(&t, &chunk, title, size);
  size_t pad = chunk.len, len = protobuf_c_message_get_packed_size(&t.base);
  uint8_t *buf = malloc(len);
  for (int i = 0; i < n; i++) {
    snprintf(title, sizeof title, "unpackfresh-%05d", i % 100000);
    blob[0] = (uint8_t)i;
    blob[pad / 2] = (uint8_t)(i >> 8);
    size_t got = protobuf_c_message_pack(&t.base, buf);
    Tree *u = standin__test__tree__unpack(NULL, got, buf);
    uint64_t h = u ? tree_hash(u) : 0;
    for (size_t k = 0; u && k < u->n_chunks; k++)
      h = fnv(u->chunks[k].data, u->chunks[k].len, h);
    printf("unpacked %d len %zu hash %016llx\n", i, got, (unsigned long long)h);
    standin__test__tree__free_unpacked(u, NULL);
  }
  free(buf);
  free(blob);
  return 0;
}

/* Sizes from one call site that a pack of the same message mostly
 * follows (record then leaves their fingerprints to the pack), and
 * sometimes does not. */
static int run_lonesize(int n) {
  msg_store *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  for (int i = 0; i < n; i++) {
    build(a, i);
    size_t len = protobuf_c_message_get_packed_size(&a->tree.base);
    if (i % 16 == 15) {
      build(b, i + n);
      printf("lone %d len %zu other %zu\n", i, len,
             protobuf_c_message_get_packed_size(&b->tree.base));
      continue;
    }
    uint8_t *buf = malloc(len);
    size_t got = protobuf_c_message_pack(&a->tree.base, buf);
    printf("pair %d len %zu hash %016llx %s\n", i, len, (unsigned long long)fnv(buf, got, 1),
           got == len ? "same" : "DIFFERENT");
    free(buf);
  }
  free(a);
  free(b);
  return 0;
}

/* get_packed_size then pack of a Tree, every third one edited in between
 * (its title made longer, into a buffer with room for it): replay must
 * pack the tree as it is at the pack, not as it was sized. (An edit that
 * kept the size would pair the size with the pack when recording, which
 * then takes the size's fingerprint from the pack: docs/INTERNALS.md.) */
static int run_sizeedit(int n) {
  msg_store *a = calloc(1, sizeof *a);
  for (int i = 0; i < n; i++) {
    build(a, i);
    size_t len = protobuf_c_message_get_packed_size(&a->tree.base);
    if (i % 3 == 2)
      a->tree.title = "a title edited after the message was sized";
    uint8_t *buf = malloc(len + 64);
    size_t got = protobuf_c_message_pack(&a->tree.base, buf);
    printf("sizeedit %d len %zu hash %016llx\n", i, got, (unsigned long long)fnv(buf, got, 1));
    free(buf);
  }
  free(a);
  return 0;
}

/* Packs from one call site reached along different stacks: two parents,
 * recursion of varying depth, and a frame whose size varies (alloca), so
 * that where the return addresses sit changes from call to call. */
static uint64_t stacks_sum;
__attribute__((noinline)) static void stacks_pack(const ProtobufCMessage *m) {
  uint8_t buf[512];
  stacks_sum += protobuf_c_message_pack(m, buf);
}
__attribute__((noinline)) static void stacks_deeper(const ProtobufCMessage *m, int d) {
  if (d > 0)
    stacks_deeper(m, d - 1);
  else
    stacks_pack(m);
  __asm__ volatile("" ::: "memory"); /* no tail call */
}
__attribute__((noinline)) static void stacks_varying(const ProtobufCMessage *m, int i) {
  volatile char *pad = __builtin_alloca(16 + 16 * (size_t)(i % 5));
  pad[0] = (char)i;
  stacks_deeper(m, i % 3);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void stacks_left(const ProtobufCMessage *m, int i) {
  stacks_deeper(m, i % 4);
  __asm__ volatile("" ::: "memory");
}
__attribute__((noinline)) static void stacks_right(const ProtobufCMessage *m, int i) {
  if (i % 2)
    stacks_varying(m, i);
  else
    stacks_pack(m);
  __asm__ volatile("" ::: "memory");
}
static int run_stacks(int n) {
  msg_store *st = calloc(1, sizeof *st);
  build(st, 3);
  for (int i = 0; i < n; i++) {
    if (i % 3)
      stacks_left(&st->tree.base, i);
    else
      stacks_right(&st->tree.base, i);
  }
  printf("stacks %d %llu\n", n, (unsigned long long)stacks_sum);
  free(st);
  return 0;
}

/* After the calls: the files this process maps, by name, once each (what
 * the record shim loaded for them). */
static int run_maps(int n) {
  basic(0, n);
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) {
    perror("/proc/self/maps");
    return 1;
  }
  char line[4096], last[4096] = "";
  while (fgets(line, sizeof line, f)) {
    char *path = strchr(line, '/');
    if (!path)
      continue;
    path[strcspn(path, "\n")] = 0;
    const char *base = strrchr(path, '/') + 1;
    if (strcmp(base, last)) /* an object's mappings are adjacent */
      printf("maps %s\n", base);
    snprintf(last, sizeof last, "%s", base);
  }
  fclose(f);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(
        stderr,
        "usage: pbtest "
        "basic|timed|reverse|threads|pool|rotpool|fork|forkpar|exec|p3|bad|deep|oddunknown|same|"
        "lonesize|sizeedit|edits|stacks|linger|surgery|escape|maps|userstack|fresh|unpackfresh "
        "[args]\n");
    return 2;
  }
  const char *mode = argv[1];
  int a = argc > 2 ? atoi(argv[2]) : 10, b = argc > 3 ? atoi(argv[3]) : 10;
  int rc = 0;
  if (!strcmp(mode, "basic"))
    basic(0, a);
  else if (!strcmp(mode, "timed"))
    run_timed(a);
  else if (!strcmp(mode, "reverse")) /* basic's messages, last first */
    for (int i = a - 1; i >= 0; i--)
      basic(i, 1);
  else if (!strcmp(mode, "back")) { /* basic, then its messages again last first */
    basic(0, a);
    for (int i = a - 1; i >= 0; i--)
      basic(i, 1);
  } else if (!strcmp(mode, "twice")) { /* basic twice */
    basic(0, a);
    basic(0, a);
  } else if (!strcmp(mode, "threads"))
    rc = run_threads(a, b, 0);
  else if (!strcmp(mode, "userstack")) /* threads, on stacks of the program's */
    rc = run_threads(a, b, 1);
  else if (!strcmp(mode, "minstack"))
    rc = run_threads(a, b, 2);
  else if (!strcmp(mode, "pool"))
    rc = run_pool(a, b);
  else if (!strcmp(mode, "rotpool"))
    rc = run_rotpool(a, b);
  else if (!strcmp(mode, "fork"))
    rc = run_fork(a, b);
  else if (!strcmp(mode, "forkpar"))
    rc = run_forkpar(a, b);
  else if (!strcmp(mode, "p3"))
    rc = run_p3(a);
  else if (!strcmp(mode, "bad"))
    rc = run_bad();
  else if (!strcmp(mode, "deep"))
    rc = run_deep(a < 2 ? 2 : a, b);
  else if (!strcmp(mode, "oddunknown"))
    rc = run_oddunknown(a);
  else if (!strcmp(mode, "stacks"))
    rc = run_stacks(a);
  else if (!strcmp(mode, "same"))
    rc = run_same(a);
  else if (!strcmp(mode, "fresh")) /* A packs of a B-byte tree, reused buffer, then fresh ones */
    rc = run_fresh(a, argc > 3 ? b : 65536);
  else if (!strcmp(mode, "unpackfresh")) /* A unpacks of B-byte trees, each its own */
    rc = run_unpackfresh(a, b);
  else if (!strcmp(mode, "lonesize"))
    rc = run_lonesize(a);
  else if (!strcmp(mode, "edits"))
    rc = run_edits(a);
  else if (!strcmp(mode, "sizeedit"))
    rc = run_sizeedit(a);
  else if (!strcmp(mode, "escape"))
    rc = run_escape(a);
  else if (!strcmp(mode, "surgery"))
    rc = run_surgery(a);
  else if (!strcmp(mode, "maps"))
    rc = run_maps(a);
  else if (!strcmp(mode, "linger")) { /* one message, then A ms of nothing */
    basic(0, 1);
    fflush(stdout);
    usleep((useconds_t)a * 1000);
  }
  else if (!strcmp(mode, "exec")) {
    basic(900, 1);
    fflush(stdout);
    char n[16];
    snprintf(n, sizeof n, "%d", a);
    execl("/proc/self/exe", argv[0], "basic", n, (char *)NULL);
    perror("exec");
    return 1;
  } else {
    fprintf(stderr, "pbtest: unknown mode %s\n", mode);
    return 2;
  }
  return rc;
}

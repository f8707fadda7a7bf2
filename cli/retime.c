/* retime.c — see retime.h. */
#include "retime.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "trace.h"

/* ---- timing files (record/timing.c writes them) -------------------------- */

typedef struct { /* as record/timing.c writes it */
  uint64_t latency_ns;
  uint64_t size;
  uint64_t start_ns;
  uint32_t nested;
  uint8_t api;
  uint8_t pad[3];
} tm_ent;

typedef struct {
  uint32_t index;
  uint64_t n;
  const tm_ent *e;
} tm_thread;

typedef struct {
  char *path;
  uint8_t *buf;
  uint32_t pid, exec_seq, nthreads;
  uint64_t start_mono_ns, timer_ns, pass_ns;
  const char *argv; /* NUL-separated */
  uint32_t alen;
  tm_thread *th;
  uint64_t sig; /* of every thread's calls: see sig_thread */
  int used;
} tm_file;

#define TM_MAGIC "STTIME04"

/* Signatures, to pair processes by what they did: a thread's is a hash of
 * its calls' APIs and sizes in order; a process's combines its threads'
 * (index, count, hash) in any order. */
static uint64_t sig_step(uint64_t h, uint8_t api, uint64_t size) {
  return (h ^ (size << 8 | api)) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull;
}

static uint64_t sig_thread(uint32_t index, uint64_t n, uint64_t h) {
  uint64_t x = (h ^ (n * 0xBF58476D1CE4E5B9ull)) + index * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x * 0xD6E8FEB86659FD93ull;
}

/* What the timing run recorded as a call's size, from the trace's call. */
static uint64_t call_size(const st_call *c) {
  uint64_t f[ST_JPF_NFEAT] = {0};
  for (int i = 0; i < c->nfeat && i < ST_JPF_NFEAT; i++)
    f[i] = c->feat[i];
  switch (c->api) {
  case ST_API_PB_UNPACK: return c->req_len;
  case ST_API_JPEG_DECODE:
    return st_jpeg_timing_size(c->result, f[ST_JPF_OUT_PIXELS], f[ST_JPF_COMPONENTS]);
  case ST_API_TJ_DECODE: return st_tj_timing_size(f[ST_JPF_INPUT_BYTES], c->result);
  default: return c->result;
  }
}

static int load_timing(tm_file *f, const char *path) {
  memset(f, 0, sizeof *f);
  FILE *in = fopen(path, "rb");
  if (!in)
    return -1;
  struct stat st;
  size_t len = fstat(fileno(in), &st) == 0 ? (size_t)st.st_size : 0;
  f->buf = len ? malloc(len) : NULL;
  int ok = f->buf && fread(f->buf, 1, len, in) == len;
  fclose(in);
  size_t off = 8 + 16 + 24 + 16 + 4;
  ok = ok && len >= off && memcmp(f->buf, TM_MAGIC, 8) == 0;
  if (ok) {
    uint32_t h[4];
    uint64_t h2[3];
    memcpy(h, f->buf + 8, sizeof h);
    memcpy(h2, f->buf + 24, sizeof h2);
    memcpy(&f->alen, f->buf + 64, 4);
    f->pid = h[0];
    f->exec_seq = h[2];
    f->nthreads = h[3];
    f->start_mono_ns = h2[0];
    f->timer_ns = h2[1];
    f->pass_ns = h2[2];
    ok = f->alen <= len - off && f->nthreads <= 1u << 20;
  }
  if (ok) {
    f->argv = (const char *)f->buf + off;
    off += f->alen;
    f->th = calloc(f->nthreads ? f->nthreads : 1, sizeof *f->th);
    ok = f->th != NULL;
  }
  for (uint32_t i = 0; ok && i < f->nthreads; i++) {
    uint32_t idx[2];
    uint64_t n;
    ok = len - off >= 16;
    if (!ok)
      break;
    memcpy(idx, f->buf + off, 8);
    memcpy(&n, f->buf + off + 8, 8);
    off += 16;
    ok = n <= (len - off) / sizeof(tm_ent);
    if (!ok)
      break;
    /* entries follow the command line, at any alignment: copy them */
    tm_ent *e = malloc(n ? n * sizeof *e : 1);
    ok = e != NULL;
    if (!ok)
      break;
    memcpy(e, f->buf + off, n * sizeof *e);
    f->th[i] = (tm_thread){idx[0], n, e};
    off += n * sizeof(tm_ent);
    uint64_t h = 0;
    for (uint64_t k = 0; k < n; k++)
      h = sig_step(h, e[k].api, e[k].size);
    if (n)
      f->sig += sig_thread(idx[0], n, h);
  }
  if (!ok) {
    for (uint32_t i = 0; f->th && i < f->nthreads; i++)
      free((void *)f->th[i].e);
    free(f->buf);
    free(f->th);
    memset(f, 0, sizeof *f);
    errno = EINVAL;
    return -1;
  }
  f->path = strdup(path);
  return 0;
}

static void free_timing(tm_file *f) {
  for (uint32_t i = 0; f->th && i < f->nthreads; i++)
    free((void *)f->th[i].e);
  free(f->path);
  free(f->buf);
  free(f->th);
}

static int load_dir(const char *tdir, tm_file **out, size_t *n) {
  *out = NULL;
  *n = 0;
  DIR *d = opendir(tdir);
  if (!d)
    return -1;
  size_t cap = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l < 8 || strcmp(de->d_name + l - 7, ".timing") != 0)
      continue;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", tdir, de->d_name);
    if (*n == cap) {
      cap = cap ? cap * 2 : 8;
      tm_file *g = realloc(*out, cap * sizeof *g);
      if (!g)
        break;
      *out = g;
    }
    if (load_timing(&(*out)[*n], p) == 0)
      (*n)++;
    else
      cli_warn("%s is not a timing file standin can read; its process keeps its recorded "
               "latencies",
               p);
  }
  closedir(d);
  return 0;
}

/* ---- pairing --------------------------------------------------------------- */

static int same_argv(const st_header *h, const tm_file *f) {
  size_t off = 0;
  for (uint32_t i = 0; i < h->argc; i++) {
    size_t l = strlen(h->argv[i]) + 1;
    if (off + l > f->alen || memcmp(f->argv + off, h->argv[i], l) != 0)
      return 0;
    off += l;
  }
  return off == f->alen;
}

static int same_process(const st_header *h, const tm_file *f) {
  return !f->used && f->exec_seq == h->exec_seq && same_argv(h, f);
}

/* For a trace no timing file matched call for call: among the processes of
 * both runs with its command line and exec number that are still unpaired,
 * the one at the same rank in pid order (forked children: fork order). */
static tm_file *pair_by_rank(size_t me, const st_header *const *hd, tm_file *const *pair,
                             size_t nall, tm_file *tf, size_t ntf) {
  const st_header *h = hd[me];
  size_t rank = 0, same = 0;
  for (size_t i = 0; i < nall; i++) {
    const st_header *o = hd[i];
    if (!o || pair[i] || o->exec_seq != h->exec_seq || o->argc != h->argc)
      continue;
    int eq = 1;
    for (uint32_t k = 0; eq && k < h->argc; k++)
      eq = strcmp(o->argv[k], h->argv[k]) == 0;
    if (!eq)
      continue;
    same++;
    rank += o->pid < h->pid;
  }
  size_t nc = 0;
  for (size_t i = 0; i < ntf; i++)
    nc += same_process(h, &tf[i]);
  if (nc != same)
    return NULL;
  for (size_t i = 0; i < ntf; i++) {
    if (!same_process(h, &tf[i]))
      continue;
    size_t r = 0;
    for (size_t j = 0; j < ntf; j++)
      r += same_process(h, &tf[j]) && tf[j].pid < tf[i].pid;
    if (r == rank)
      return &tf[i];
  }
  return NULL;
}

/* ---- one trace ----------------------------------------------------------- */

/* The calls the timing run times: every API standin records. */
static int is_timed(uint8_t api) {
  return api == ST_API_PB_PACK || api == ST_API_PB_SIZE || api == ST_API_PB_PACK_BUF ||
         api == ST_API_PB_UNPACK || api == ST_API_JPEG_DECODE || api == ST_API_TJ_DECODE;
}

typedef struct {
  const tm_thread *t; /* NULL: no timings for this thread */
  uint64_t k;         /* calls seen */
  int differ;
} th_state;

static uint64_t corrected(const tm_file *f, const tm_ent *e) {
  uint64_t cut = f->timer_ns + (uint64_t)e->nested * f->pass_ns;
  return e->latency_ns > cut ? e->latency_ns - cut : 0;
}

/* Per-thread state for index i (grown on demand); NULL if out of memory. */
static th_state *state_of(th_state **ts, uint32_t *n, uint32_t i, const tm_file *f) {
  if (i >= (1u << 20))
    return NULL;
  if (i >= *n) {
    uint32_t m = i + 16;
    th_state *g = realloc(*ts, m * sizeof *g);
    if (!g)
      return NULL;
    memset(g + *n, 0, (m - *n) * sizeof *g);
    for (uint32_t j = *n; j < m; j++)
      for (uint32_t k = 0; k < f->nthreads; k++)
        if (f->th[k].index == j)
          g[j].t = &f->th[k];
    *ts = g;
    *n = m;
  }
  return &(*ts)[i];
}

/* One trace against its counterpart in each timing pass (f[p], NULL where
 * that pass had none): per pass, the state of every thread. */
typedef struct {
  unsigned npass;
  int pick; /* RETIME_FASTEST or RETIME_MEDIAN */
  tm_file *f[RETIME_MAX_PASSES];
  th_state *ts[RETIME_MAX_PASSES];
  uint32_t nts[RETIME_MAX_PASSES];
  /* Calls of the threads that did not match in pass p, in file order, and
   * their latencies in that pass when pool_pair paired them (else NULL) */
  uint64_t *pool[RETIME_MAX_PASSES];
  uint64_t pool_k[RETIME_MAX_PASSES];
} pass_set;

/* Whether thread i's calls in pass p are exactly the trace's. */
static int thread_ok(const pass_set *ps, unsigned p, uint32_t i) {
  return ps->f[p] && i < ps->nts[p] && ps->ts[p][i].t && !ps->ts[p][i].differ;
}

/* Sort a few values (at most RETIME_MAX_PASSES) in place. */
static void sort_few(uint64_t *v, unsigned n) {
  for (unsigned i = 1; i < n; i++)
    for (unsigned j = i; j > 0 && v[j - 1] > v[j]; j--) {
      uint64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
}

/* Median of n values (sorted in place); the mean of the middle two for an
 * even count. */
static uint64_t median_of(uint64_t *v, unsigned n) {
  sort_few(v, n);
  return n % 2 ? v[n / 2] : v[n / 2 - 1] / 2 + v[n / 2] / 2 + (v[n / 2 - 1] % 2 + v[n / 2] % 2) / 2;
}

static int copy_record(st_reader *r, st_writer *w, st_record *rec, uint64_t **map, uint64_t *nmap) {
  switch (rec->kind) {
  case ST_REC_BLOB: {
    const void *data;
    uint64_t len, nid;
    int e = st_reader_blob(r, rec->u.blob.id, &data, &len);
    if (e == ST_OK)
      e = st_writer_add_blob(w, data, len, &nid);
    if (e != ST_OK)
      return e;
    if (rec->u.blob.id >= *nmap) {
      uint64_t m = rec->u.blob.id * 2 + 16;
      uint64_t *g = realloc(*map, m * sizeof *g);
      if (!g)
        return ST_E_NOMEM;
      memset(g + *nmap, 0, (m - *nmap) * sizeof *g);
      *map = g;
      *nmap = m;
    }
    (*map)[rec->u.blob.id] = nid;
    return ST_OK;
  }
  case ST_REC_CALL: {
    st_call *c = &rec->u.call;
    c->req_blob = c->req_blob < *nmap ? (*map)[c->req_blob] : 0;
    c->resp_blob = c->resp_blob < *nmap ? (*map)[c->resp_blob] : 0;
    return st_writer_add_call(w, c);
  }
  case ST_REC_TYPE: return st_writer_add_type(w, &rec->u.type);
  case ST_REC_SITE: return st_writer_add_site(w, &rec->u.site);
  case ST_REC_THREAD: return st_writer_add_thread(w, &rec->u.thread);
  case ST_REC_NOTE: return st_writer_add_note(w, &rec->u.note);
  }
  return ST_E_CORRUPT;
}

/* ---- thread pools ---------------------------------------------------------
 *
 * A pool hands work to its threads differently in each run, so their calls
 * do not pair thread by thread. The calls of the threads that did not pair
 * still pair as a whole when both runs made the same multiset of calls
 * (API, size): the k-th call of each (API, size), in start order, gets the
 * k-th one's latency. Calls of equal API and size whose start order differs
 * between the runs can swap latencies; their sum is unchanged. */

typedef struct {
  uint64_t start, size, val; /* val: file-order index (trace) or latency (timing) */
  uint8_t api;
} pool_ent;

static int pool_cmp(const void *a, const void *b) {
  const pool_ent *x = a, *y = b;
  if (x->api != y->api)
    return x->api < y->api ? -1 : 1;
  if (x->size != y->size)
    return x->size < y->size ? -1 : 1;
  if (x->start != y->start)
    return x->start < y->start ? -1 : 1;
  return x->val < y->val ? -1 : x->val > y->val;
}

/* Pair pass p's unpaired calls as a pool (see above): fills ps->pool[p] and
 * returns how many calls it paired; 0 when the two sides differ. -1 when
 * memory or the trace fails. */
static int64_t pool_pair(const char *path, pass_set *ps, unsigned p) {
  const tm_file *f = ps->f[p];
  size_t nu = 0;
  /* a timing thread is taken when the trace's thread of its index paired */
  for (uint32_t k = 0; k < f->nthreads; k++)
    if (!thread_ok(ps, p, f->th[k].index))
      nu += f->th[k].n;
  if (nu == 0)
    return 0;
  pool_ent *u = malloc(nu * sizeof *u), *t = NULL;
  if (!u)
    return -1;
  size_t j = 0;
  for (uint32_t k = 0; k < f->nthreads; k++)
    if (!thread_ok(ps, p, f->th[k].index))
      for (uint64_t c = 0; c < f->th[k].n; c++) {
        const tm_ent *e = &f->th[k].e[c];
        u[j++] = (pool_ent){e->start_ns, e->size, corrected(f, e), e->api};
      }
  /* the trace's calls on threads that did not pair, in file order */
  st_reader *r;
  int64_t rc = -1;
  if (cli_reader_open(&r, path) != 0)
    goto out;
  t = malloc(nu * sizeof *t);
  size_t nt = 0;
  st_record rec;
  while (t && st_reader_next(r, &rec) == ST_OK) {
    const st_call *c = &rec.u.call;
    if (rec.kind != ST_REC_CALL || !is_timed(c->api) || thread_ok(ps, p, c->thread))
      continue;
    if (nt == nu) { /* more calls than the timing run made */
      nt++;
      break;
    }
    t[nt] = (pool_ent){c->start_ns, call_size(c), nt, c->api};
    nt++;
  }
  st_reader_close(r);
  rc = 0;
  if (!t)
    rc = -1;
  if (rc || nt != nu)
    goto out;
  qsort(t, nt, sizeof *t, pool_cmp);
  qsort(u, nu, sizeof *u, pool_cmp);
  for (j = 0; j < nt; j++)
    if (t[j].api != u[j].api || t[j].size != u[j].size)
      goto out; /* not the same calls */
  ps->pool[p] = malloc(nt * sizeof(uint64_t));
  if (!ps->pool[p]) {
    rc = -1;
    goto out;
  }
  for (j = 0; j < nt; j++)
    ps->pool[p][t[j].val] = u[j].val;
  rc = (int64_t)nt;
out:
  free(t);
  free(u);
  return rc;
}

void retime_spread(const uint64_t *sum, unsigned n, uint64_t mid, double *lo, double *hi) {
  *lo = *hi = 0;
  for (unsigned p = 0; mid && p < n; p++) {
    double d = 100.0 * ((double)sum[p] - (double)mid) / (double)mid;
    *lo = d < *lo ? d : *lo;
    *hi = d > *hi ? d : *hi;
  }
}

/* Restart the walk over the trace's calls (gather below). */
static void gather_reset(pass_set *ps) {
  for (unsigned p = 0; p < ps->npass; p++)
    for (uint32_t i = 0; i < ps->nts[p]; i++)
      ps->ts[p][i].k = 0;
  memset(ps->pool_k, 0, sizeof ps->pool_k);
}

/* The next call of thread i, in file order: v[p] its latency in pass p when
 * has[p]; returns how many passes have one. *paired: some pass paired its
 * thread thread by thread (not as a pool's). */
static unsigned gather(pass_set *ps, uint32_t i, uint64_t *v, int *has, int *paired) {
  unsigned n = 0;
  *paired = 0;
  for (unsigned p = 0; p < ps->npass; p++) {
    th_state *s = thread_ok(ps, p, i) ? &ps->ts[p][i] : NULL;
    has[p] = 0;
    if (s && s->k < s->t->n) { /* (the first scan saw the same calls) */
      v[p] = corrected(ps->f[p], &s->t->e[s->k++]);
      has[p] = *paired = 1;
    } else if (!s && ps->pool[p]) {
      v[p] = ps->pool[p][ps->pool_k[p]++];
      has[p] = 1;
    } else if (!s && ps->f[p]) {
      ps->pool_k[p]++;
    }
    n += has[p];
  }
  return n;
}

/* Which run's latencies a trace takes: the run whose time in the calls
 * every run made is the lowest (RETIME_FASTEST) or the median, the lower
 * middle one for an even count (RETIME_MEDIAN).
 * Not a per-call minimum or median: the calls' own spread (a page fault, an
 * interrupt) is part of how long they take, and a per-call statistic
 * would drop it, making the time in calls shorter than any run's. A run
 * slowed as a whole by the machine (another tenant, a busy sibling core)
 * is what the choice leaves out: such noise only ever adds time, which is
 * why the fastest run is the default. -1 when no call was in every run. */
static int pick_run(const char *path, pass_set *ps, uint64_t *sum) {
  st_reader *r;
  if (st_reader_open(&r, path) != ST_OK)
    return -1;
  gather_reset(ps);
  uint64_t common = 0;
  st_record rec;
  while (st_reader_next(r, &rec) == ST_OK) {
    if (rec.kind != ST_REC_CALL || !is_timed(rec.u.call.api))
      continue;
    uint64_t v[RETIME_MAX_PASSES];
    int has[RETIME_MAX_PASSES], paired;
    if (gather(ps, rec.u.call.thread, v, has, &paired) != ps->npass)
      continue;
    common++;
    for (unsigned p = 0; p < ps->npass; p++)
      sum[p] += v[p];
  }
  st_reader_close(r);
  if (!common)
    return -1;
  uint64_t sorted[RETIME_MAX_PASSES];
  memcpy(sorted, sum, ps->npass * sizeof *sum);
  sort_few(sorted, ps->npass);
  uint64_t want = ps->pick == RETIME_FASTEST ? sorted[0] : sorted[(ps->npass - 1) / 2];
  for (unsigned p = 0; p < ps->npass; p++)
    if (sum[p] == want)
      return (int)p;
  return -1;
}

/* Rewrite path: each call of a thread that made the same calls in at least
 * one run gets the latency of the run pick_run chose, or where that run
 * lacks it, the median of the runs that have it. */
static int rewrite(const char *path, pass_set *ps, uint64_t calls, retime_stats *st) {
  uint64_t pass_sum[RETIME_MAX_PASSES] = {0};
  int pick = ps->npass > 1 ? pick_run(path, ps, pass_sum) : 0;
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.retime", path);
  unlink(tmp);
  st_reader *r = NULL;
  st_writer *w = NULL;
  uint64_t *map = NULL, nmap = 0, before = 0, after = 0, matched = 0, pooled = 0;
  int e = st_reader_open(&r, path);
  if (e == ST_OK)
    e = st_writer_open(&w, tmp, st_reader_header(r));
  gather_reset(ps);
  st_record rec;
  while (e == ST_OK && (e = st_reader_next(r, &rec)) == ST_OK) {
    if (rec.kind == ST_REC_CALL && is_timed(rec.u.call.api)) {
      uint64_t v[RETIME_MAX_PASSES], ns;
      int has[RETIME_MAX_PASSES], paired;
      unsigned n = gather(ps, rec.u.call.thread, v, has, &paired);
      if (n) {
        if (pick >= 0 && has[pick]) {
          ns = v[pick];
        } else {
          unsigned k = 0;
          for (unsigned p = 0; p < ps->npass; p++)
            if (has[p])
              v[k++] = v[p];
          ns = median_of(v, k);
        }
        matched++;
        pooled += !paired;
        before += rec.u.call.latency_ns;
        after += ns;
        rec.u.call.latency_ns = ns;
      }
    }
    e = copy_record(r, w, &rec, &map, &nmap);
  }
  if (e == ST_E_END) {
    char v[192];
    if (ps->npass > 1 && pick >= 0 && pass_sum[pick] > 0) {
      double lo, hi;
      retime_spread(pass_sum, ps->npass, pass_sum[pick], &lo, &hi);
      snprintf(v, sizeof v,
               "%llu of %llu calls, from the %s of %u timing-only runs; their times in "
               "calls ranged %+.1f%%..%+.1f%% around it",
               (unsigned long long)matched, (unsigned long long)calls, retime_pick_name(ps->pick),
               ps->npass, lo, hi);
    } else if (ps->npass > 1)
      snprintf(v, sizeof v, "%llu of %llu calls, from the %s of %u timing-only runs",
               (unsigned long long)matched, (unsigned long long)calls, retime_pick_name(ps->pick),
               ps->npass);
    else
      snprintf(v, sizeof v, "%llu of %llu calls, from a timing-only run",
               (unsigned long long)matched, (unsigned long long)calls);
    st_note n = {"retimed", v};
    e = st_writer_add_note(w, &n);
  }
  free(map);
  st_reader_close(r);
  int ce = w ? st_writer_close(w) : ST_OK;
  if (e == ST_OK)
    e = ce;
  if (e == ST_OK && rename(tmp, path) != 0)
    e = ST_E_IO;
  if (e != ST_OK) {
    cli_err("cannot retime %s: %s; it keeps its recorded latencies", path,
            e == ST_E_IO ? strerror(errno) : st_strerror(e));
    unlink(tmp);
    return -1;
  }
  st->retimed += matched;
  st->pooled += pooled;
  st->before_ns += before;
  st->after_ns += after;
  if (pick >= 0 && ps->npass > 1) {
    st->common_ns += pass_sum[pick];
    for (unsigned p = 0; p < ps->npass; p++)
      st->pass_ns[p] += pass_sum[p];
  }
  return 0;
}

static int retime_one(const char *path, pass_set *ps, retime_stats *st) {
  st_reader *r;
  if (cli_reader_open(&r, path) != 0)
    return -1;
  uint64_t calls = 0;
  int e, oom = 0;
  st_record rec;
  uint32_t nthreads = 0; /* 1 + the highest thread index with calls */
  uint8_t *called = NULL; /* [thread]: made calls */
  while ((e = st_reader_next(r, &rec)) == ST_OK) {
    if (rec.kind != ST_REC_CALL || !is_timed(rec.u.call.api))
      continue;
    calls++;
    const st_call *c = &rec.u.call;
    if (c->thread >= (1u << 20)) {
      oom = 1;
      break;
    }
    if (c->thread >= nthreads) {
      uint8_t *g = realloc(called, c->thread + 1);
      if (!g) {
        oom = 1;
        break;
      }
      memset(g + nthreads, 0, c->thread + 1 - nthreads);
      called = g;
      nthreads = c->thread + 1;
    }
    called[c->thread] = 1;
    for (unsigned p = 0; p < ps->npass && !oom; p++) {
      if (!ps->f[p])
        continue;
      th_state *s = state_of(&ps->ts[p], &ps->nts[p], c->thread, ps->f[p]);
      if (!s) {
        oom = 1;
        break;
      }
      if (!s->t || s->differ)
        continue;
      if (s->k >= s->t->n || s->t->e[s->k].api != c->api || s->t->e[s->k].size != call_size(c))
        s->differ = 1;
      s->k++;
    }
    if (oom)
      break;
  }
  st_read_status rs;
  st_reader_status(r, &rs);
  st_reader_close(r);
  st->calls += calls;
  for (unsigned p = 0; p < ps->npass; p++)
    for (uint32_t i = 0; i < ps->nts[p]; i++) {
      th_state *s = &ps->ts[p][i];
      if (s->t && !s->differ && s->k != s->t->n)
        s->differ = 1;
    }
  int rc = 0;
  if (oom || e != ST_E_END || !rs.clean) {
    cli_warn("%s is %s: it keeps its recorded latencies", path,
             oom ? "too large to retime" : "not complete");
  } else {
    /* threads that did not pair in a pass may still pair there as a pool */
    int pooled_any = 0;
    for (unsigned p = 0; p < ps->npass && rc == 0; p++) {
      if (!ps->f[p])
        continue;
      int64_t n = pool_pair(path, ps, p);
      if (n < 0) {
        cli_warn("%s: out of memory pairing thread pools; some calls keep their recorded "
                 "latencies",
                 path);
        break;
      }
      pooled_any |= n > 0;
    }
    int any = pooled_any;
    for (uint32_t i = 0; i < nthreads; i++) {
      int ok = 0;
      for (unsigned p = 0; p < ps->npass; p++)
        ok |= thread_ok(ps, p, i);
      any |= ok;
      if (!ok && !pooled_any && called[i])
        st->threads_differ++;
    }
    if (any)
      rc = rewrite(path, ps, calls, st);
  }
  for (unsigned p = 0; p < ps->npass; p++) {
    free(ps->ts[p]);
    free(ps->pool[p]);
  }
  free(called);
  return rc;
}

const char *retime_pick_name(int pick) {
  return pick == RETIME_FASTEST ? "fastest" : "median";
}

int cli_retime(const char *dir, const char *const *tdirs, unsigned npass, int pick,
               retime_stats *st) {
  memset(st, 0, sizeof *st);
  if (npass < 1 || npass > RETIME_MAX_PASSES)
    return -1;
  st->passes = npass;
  tm_file *tf[RETIME_MAX_PASSES] = {0};
  size_t ntf[RETIME_MAX_PASSES] = {0};
  int rc = 0;
  for (unsigned p = 0; p < npass && rc == 0; p++)
    if (load_dir(tdirs[p], &tf[p], &ntf[p]) != 0) {
      cli_err("cannot read the timing run's directory %s: %s", tdirs[p], strerror(errno));
      rc = -1;
    }
  cli_tracedir td = {0};
  if (rc == 0 && cli_tracedir_open(&td, dir) != 0)
    rc = -1;
  size_t nt = rc == 0 && td.n ? td.n : 1;
  /* headers of every trace, for pairing */
  st_reader **rd = calloc(nt, sizeof *rd);
  const st_header **hd = calloc(nt, sizeof *hd);
  tm_file **pair = calloc(nt * npass, sizeof *pair); /* pair[p * nt + i] */
  uint64_t *sig = calloc(nt, sizeof *sig), *ncalls = calloc(nt, 8);
  if (!rd || !hd || !pair || !sig || !ncalls)
    rc = -1;
  for (size_t i = 0; rc == 0 && i < td.n; i++)
    if (st_reader_open(&rd[i], td.paths[i]) == ST_OK)
      hd[i] = st_reader_header(rd[i]);
  /* each trace's signature (thread states as in retime_one, hashes here) */
  for (size_t i = 0; rc == 0 && i < td.n; i++) {
    st->processes++;
    uint64_t *h = NULL, *n = NULL;
    uint32_t nth = 0;
    st_record rec;
    while (rd[i] && st_reader_next(rd[i], &rec) == ST_OK) {
      const st_call *c = &rec.u.call;
      if (rec.kind != ST_REC_CALL || !is_timed(c->api))
        continue;
      ncalls[i]++;
      if (c->thread >= nth) {
        uint32_t m = c->thread + 16;
        uint64_t *nh = c->thread < (1u << 20) ? realloc(h, m * 8) : NULL;
        if (nh)
          h = nh;
        uint64_t *nn = nh ? realloc(n, m * 8) : NULL;
        if (nn)
          n = nn;
        if (!nn) {
          ncalls[i] = 0; /* cannot be paired by content; by rank it still can */
          break;
        }
        memset(h + nth, 0, (m - nth) * 8);
        memset(n + nth, 0, (m - nth) * 8);
        nth = m;
      }
      h[c->thread] = sig_step(h[c->thread], c->api, call_size(c));
      n[c->thread]++;
    }
    for (uint32_t t = 0; t < nth; t++)
      if (n[t])
        sig[i] += sig_thread(t, n[t], h[t]);
    free(h);
    free(n);
  }
  /* in each pass, pair by content first: a timing file whose every thread
   * made exactly the calls the trace's made; then, for the rest, by rank */
  for (unsigned p = 0; rc == 0 && p < npass; p++) {
    tm_file **pp = pair + (size_t)p * nt;
    for (size_t i = 0; i < td.n; i++)
      for (size_t k = 0; hd[i] && ncalls[i] && !pp[i] && k < ntf[p]; k++)
        if (same_process(hd[i], &tf[p][k]) && tf[p][k].sig == sig[i])
          (pp[i] = &tf[p][k])->used = 1;
    for (size_t i = 0; i < td.n; i++)
      if (hd[i] && !pp[i] && (pp[i] = pair_by_rank(i, hd, pp, td.n, tf[p], ntf[p])) != NULL)
        pp[i]->used = 1;
  }
  for (size_t i = 0; rc == 0 && i < td.n; i++) {
    pass_set ps = {.npass = npass, .pick = pick};
    int any = 0;
    for (unsigned p = 0; p < npass; p++)
      any |= (ps.f[p] = pair[(size_t)p * nt + i]) != NULL;
    if (!any) { /* a process left unpaired matters only if it made calls */
      st->calls += ncalls[i];
      st->unmatched_proc += ncalls[i] > 0;
    }
    st_reader_close(rd[i]);
    rd[i] = NULL;
    if (any && retime_one(td.paths[i], &ps, st) != 0)
      rc = -1;
  }
  for (size_t i = 0; rd && i < td.n; i++)
    st_reader_close(rd[i]);
  free(pair);
  free(sig);
  free(ncalls);
  free(hd);
  free(rd);
  cli_tracedir_free(&td);
  for (unsigned p = 0; p < npass; p++) {
    for (size_t i = 0; i < ntf[p]; i++)
      free_timing(&tf[p][i]);
    free(tf[p]);
  }
  return rc;
}

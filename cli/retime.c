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

#define TM_MAGIC "STTIME02"

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
  return c->api == ST_API_PB_UNPACK ? c->req_len : c->result;
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
  size_t off = 8 + 16 + 24 + 4;
  ok = ok && len >= off && memcmp(f->buf, TM_MAGIC, 8) == 0;
  if (ok) {
    uint32_t h[4];
    uint64_t h2[3];
    memcpy(h, f->buf + 8, sizeof h);
    memcpy(h2, f->buf + 24, sizeof h2);
    memcpy(&f->alen, f->buf + 48, 4);
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

/* Rewrite path with the timings of thread states ts[] that match. */
static int rewrite(const char *path, tm_file *f, th_state *ts, uint32_t nts, uint64_t matched,
                   uint64_t calls, retime_stats *st) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.retime", path);
  unlink(tmp);
  st_reader *r = NULL;
  st_writer *w = NULL;
  uint64_t *map = NULL, nmap = 0, before = 0, after = 0;
  int e = st_reader_open(&r, path);
  if (e == ST_OK)
    e = st_writer_open(&w, tmp, st_reader_header(r));
  for (uint32_t i = 0; i < nts; i++)
    ts[i].k = 0;
  st_record rec;
  while (e == ST_OK && (e = st_reader_next(r, &rec)) == ST_OK) {
    if (rec.kind == ST_REC_CALL && is_timed(rec.u.call.api) && rec.u.call.thread < nts) {
      th_state *s = &ts[rec.u.call.thread];
      if (s->t && !s->differ && s->k < s->t->n) { /* (the first pass saw the same calls) */
        uint64_t ns = corrected(f, &s->t->e[s->k++]);
        before += rec.u.call.latency_ns;
        after += ns;
        rec.u.call.latency_ns = ns;
      }
    }
    e = copy_record(r, w, &rec, &map, &nmap);
  }
  if (e == ST_E_END) {
    char v[96];
    snprintf(v, sizeof v, "%llu of %llu calls", (unsigned long long)matched,
             (unsigned long long)calls);
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
  st->before_ns += before;
  st->after_ns += after;
  return 0;
}

static int retime_one(const char *path, tm_file *f, retime_stats *st) {
  st_reader *r;
  if (cli_reader_open(&r, path) != 0)
    return -1;
  th_state *ts = NULL;
  uint32_t nts = 0;
  uint64_t calls = 0;
  int e, oom = 0;
  st_record rec;
  while ((e = st_reader_next(r, &rec)) == ST_OK) {
    if (rec.kind != ST_REC_CALL || !is_timed(rec.u.call.api))
      continue;
    calls++;
    th_state *s = state_of(&ts, &nts, rec.u.call.thread, f);
    if (!s) {
      oom = 1;
      break;
    }
    if (!s->t || s->differ)
      continue;
    const st_call *c = &rec.u.call;
    if (s->k >= s->t->n || s->t->e[s->k].api != c->api || s->t->e[s->k].size != call_size(c))
      s->differ = 1;
    s->k++;
  }
  st_read_status rs;
  st_reader_status(r, &rs);
  st_reader_close(r);
  st->calls += calls;
  uint64_t matched = 0;
  for (uint32_t i = 0; i < nts; i++) {
    if (!ts[i].t)
      continue;
    if (!ts[i].differ && ts[i].k != ts[i].t->n)
      ts[i].differ = 1;
    if (ts[i].differ)
      st->threads_differ++;
    else
      matched += ts[i].k;
  }
  int rc = 0;
  if (oom || e != ST_E_END || !rs.clean)
    cli_warn("%s is %s: it keeps its recorded latencies", path,
             oom ? "too large to retime" : "not complete");
  else if (matched)
    rc = rewrite(path, f, ts, nts, matched, calls, st);
  free(ts);
  return rc;
}

int cli_retime(const char *dir, const char *tdir, retime_stats *st) {
  memset(st, 0, sizeof *st);
  tm_file *tf;
  size_t ntf;
  if (load_dir(tdir, &tf, &ntf) != 0) {
    cli_err("cannot read the timing run's directory %s: %s", tdir, strerror(errno));
    return -1;
  }
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0) {
    for (size_t i = 0; i < ntf; i++)
      free_timing(&tf[i]);
    free(tf);
    return -1;
  }
  /* headers of every trace, for pairing */
  st_reader **rd = calloc(td.n ? td.n : 1, sizeof *rd);
  const st_header **hd = calloc(td.n ? td.n : 1, sizeof *hd);
  int rc = rd && hd ? 0 : -1;
  for (size_t i = 0; rc == 0 && i < td.n; i++)
    if (st_reader_open(&rd[i], td.paths[i]) == ST_OK)
      hd[i] = st_reader_header(rd[i]);
  tm_file **pair = calloc(td.n ? td.n : 1, sizeof *pair);
  uint64_t *sig = calloc(td.n ? td.n : 1, sizeof *sig), *ncalls = calloc(td.n ? td.n : 1, 8);
  if (!pair || !sig || !ncalls)
    rc = -1;
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
        if (c->thread >= (1u << 20) || !(h = realloc(h, m * 8)) || !(n = realloc(n, m * 8))) {
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
  /* pair by content first: a timing file whose every thread made exactly
   * the calls the trace's made; then, for the rest, by rank */
  for (size_t i = 0; rc == 0 && i < td.n; i++)
    for (size_t k = 0; hd[i] && ncalls[i] && !pair[i] && k < ntf; k++)
      if (same_process(hd[i], &tf[k]) && tf[k].sig == sig[i])
        (pair[i] = &tf[k])->used = 1;
  for (size_t i = 0; rc == 0 && i < td.n; i++)
    if (hd[i] && !pair[i] && (pair[i] = pair_by_rank(i, hd, pair, td.n, tf, ntf)) != NULL)
      pair[i]->used = 1;
  for (size_t i = 0; i < td.n; i++) {
    /* a process left unpaired matters only if it made calls */
    if (pair && !pair[i] && ncalls) {
      st->calls += ncalls[i];
      st->unmatched_proc += ncalls[i] > 0;
    }
    st_reader_close(rd[i]);
  }
  for (size_t i = 0; rc == 0 && pair && i < td.n; i++)
    if (pair[i] && retime_one(td.paths[i], pair[i], st) != 0)
      rc = -1;
  free(pair);
  free(sig);
  free(ncalls);
  free(hd);
  free(rd);
  cli_tracedir_free(&td);
  for (size_t i = 0; i < ntf; i++)
    free_timing(&tf[i]);
  free(tf);
  return rc;
}

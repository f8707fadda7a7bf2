/* analysis.c — the streaming pass behind report, whatif, sweep and compare
 * (see analysis.h; the model is explained in docs/ANALYSIS.md).
 *
 * Per call, in file order: group counters and histogram, and every plan's
 * decision. The decisions then go through a per-thread merge (merge.h) so
 * that the timeline part — accelerator queueing and the per-thread shifts
 * of the end-to-end estimate — sees calls in start order. */
#include "analysis.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "engines.h"
#include "merge.h"
#include "progress.h"
#include "scan.h"

#define MERGE_BYTES (16u << 20)    /* calls held back to restore start order */
#define MERGE_LAG_NS 1000000000ull /* a call is in the file within 1 s of its start */
#define MAX_THREADS (1u << 20)

const char *const an_sw_names[AN_SW_N] = {"not_selected", "kept", "unsupported", "no_response",
                                          "not_offloadable"};

/* ---- small hash maps --------------------------------------------------------- */

/* u64 key -> u32 value; per file (ids are per file). */
typedef struct {
  uint64_t *keys;
  uint32_t *vals; /* value + 1, 0 = empty */
  size_t cap, n;
} idmap;

static uint64_t mix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

static uint32_t *idmap_slot(idmap *m, uint64_t key) {
  size_t i = mix64(key) & (m->cap - 1);
  while (m->vals[i] && m->keys[i] != key)
    i = (i + 1) & (m->cap - 1);
  m->keys[i] = key;
  return &m->vals[i];
}

static int idmap_grow(idmap *m) {
  idmap n = {.cap = m->cap ? m->cap * 2 : 256};
  n.keys = malloc(n.cap * sizeof *n.keys);
  n.vals = calloc(n.cap, sizeof *n.vals);
  if (!n.keys || !n.vals) {
    free(n.keys);
    free(n.vals);
    return -1;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->vals[i])
      *idmap_slot(&n, m->keys[i]) = m->vals[i];
  n.n = m->n;
  free(m->keys);
  free(m->vals);
  *m = n;
  return 0;
}

/* The value of key, or UINT32_MAX when absent. */
static uint32_t idmap_get(const idmap *m, uint64_t key) {
  if (!m->cap)
    return UINT32_MAX;
  size_t i = mix64(key) & (m->cap - 1);
  for (; m->vals[i]; i = (i + 1) & (m->cap - 1))
    if (m->keys[i] == key)
      return m->vals[i] - 1;
  return UINT32_MAX;
}

static int idmap_put(idmap *m, uint64_t key, uint32_t val) {
  if ((m->n + 1) * 2 > m->cap && idmap_grow(m) != 0)
    return -1;
  uint32_t *v = idmap_slot(m, key);
  m->n += *v == 0;
  *v = val + 1;
  return 0;
}

static void idmap_clear(idmap *m) {
  if (m->cap)
    memset(m->vals, 0, m->cap * sizeof *m->vals);
  m->n = 0;
}

static void idmap_free(idmap *m) {
  free(m->keys);
  free(m->vals);
}

static uint64_t str_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* ---- state --------------------------------------------------------------------- */

typedef struct {
  int64_t shift;      /* how much earlier the thread runs under the plan */
  int64_t prev_shift; /* before its latest call */
  uint64_t last_end;  /* recorded end of its latest call */
  uint64_t max_end;   /* the latest recorded end of its calls so far */
  double rows_delta;  /* bytes of decoded rows its offloaded calls' models leave in
                         memory less those recorded there (an_rows_bound_ns) */
  int started;
} chain;

/* One plan's timeline state: the process being read, and the recording. */
typedef struct {
  engines eng[PLAN_MAX_ACCEL]; /* accelerators with a number of engines */
  int64_t base;                /* shift inherited from processes that ended before */
  int any;                     /* a call of this process was placed */
  uint64_t M;                  /* latest recorded end of a call placed so far */
  int64_t Lp;                  /* latest end of those calls under the plan */
  int gany;
  uint64_t gM;
  int64_t gLp;
} plan_state;

/* A finished process, for the processes that start after it ended. */
typedef struct {
  uint64_t end, M;
  int any;
  int64_t *Lp; /* per plan */
} proc_done;

/* A thread of the file being read. */
typedef struct {
  uint64_t first, last; /* first call start, last call end (0: no call) */
} thread_info;

/* What goes through the merge: the call, then one decision per plan. */
typedef struct {
  uint64_t lat;
  uint32_t thread, group;
  uint8_t api, bin;
} ev_call;

typedef struct {
  uint64_t service;
  uint64_t link_in, link_out; /* at most an hour together (if_link_cost) */
  int32_t accel;              /* -1: software */
  uint32_t busy;              /* engine time, when less than service; else EV_BUSY_WHOLE */
  uint32_t fault;             /* plan_decision.fault_ns (record keeps it in 32 bits) */
  uint32_t source;            /* plan_decision.source_ns, likewise */
} ev_plan;
#define EV_BUSY_WHOLE UINT32_MAX

typedef struct {
  an_result *r;
  const an_opts *o;
  int np;
  idmap gcache; /* per file: group key -> group */
  idmap gindex; /* string hash -> first group with that hash (chained by probe) */
  int32_t api_group[ST_API_MAX];
  idmap rcache; /* per file: (api, type, site) -> index into masks */
  uint64_t *masks;
  size_t nmasks, capmasks;
  chain *chains; /* [thread * np + plan] */
  uint32_t nthreads;
  uint8_t *seen;   /* per thread of the file: made a call */
  thread_info *th; /* per thread of the file */
  plan_state *ps;
  proc_done *done;
  size_t ndone;
  merge *mg;
  uint8_t *ev;
  size_t evsize;
  progress prog;
  uint64_t tick;
  int failed;
  uint32_t launcher_pid; /* run.info: the program's first process's parent, 0 unknown */
  uint64_t launcher_pidns; /* run.info: its PID namespace, 0 unknown */
  cli_procs procs;         /* by thread: processes that share a pid told apart */
} ctx;

/* ---- groups -------------------------------------------------------------------- */

static an_group *new_group(ctx *x, const char *key) {
  an_result *r = x->r;
  if ((r->ngroups & (r->ngroups - 1)) == 0) {
    an_group *ng = realloc(r->groups, (r->ngroups ? r->ngroups * 2 : 1) * sizeof *ng);
    if (!ng)
      return NULL;
    r->groups = ng;
  }
  an_group *g = &r->groups[r->ngroups];
  memset(g, 0, sizeof *g);
  g->api = -1;
  g->key = strdup(key);
  g->h = malloc(sizeof *g->h);
  g->plan = calloc((size_t)x->np + 1, sizeof *g->plan);
  if (!g->key || !g->h || !g->plan) {
    free(g->key);
    free(g->h);
    free(g->plan);
    return NULL;
  }
  hist_init(g->h);
  r->ngroups++;
  return g;
}

/* The group named key, created with fill() when new. Groups with the same
 * name hash sit at consecutive probe positions of gindex. */
static int32_t find_group(ctx *x, const char *key, scan_file *f, const st_call *c,
                          void (*fill)(an_group *, scan_file *, const st_call *)) {
  uint64_t h = str_hash(key);
  for (uint64_t k = h;; k++) {
    uint32_t gi = idmap_get(&x->gindex, k);
    if (gi == UINT32_MAX)
      break;
    if (!strcmp(x->r->groups[gi].key, key))
      return (int32_t)gi;
  }
  an_group *g = new_group(x, key);
  if (!g)
    return -1;
  fill(g, f, c);
  uint64_t k = h;
  while (idmap_get(&x->gindex, k) != UINT32_MAX)
    k++;
  if (idmap_put(&x->gindex, k, (uint32_t)(g - x->r->groups)) != 0)
    return -1;
  return (int32_t)(g - x->r->groups);
}

static void fill_api(an_group *g, scan_file *f, const st_call *c) {
  g->api = c->api;
}

static void fill_type(an_group *g, scan_file *f, const st_call *c) {
  g->api = c->api;
  g->type = strdup(scan_type_name(f, c->type));
}

static void fill_site(an_group *g, scan_file *f, const st_call *c) {
  g->site = strdup(scan_site_label(f, c->site));
}

/* A PID namespace other than the launcher's, else 0. */
static uint64_t other_pidns(const ctx *x, const scan_file *f) {
  return cli_pidns_other(x->launcher_pidns, f->h.pidns) ? f->h.pidns : 0;
}

static void fill_thread(an_group *g, scan_file *f, const st_call *c) {
  g->pid = f->h.pid;
  g->exec_seq = f->h.exec_seq;
  g->thread = c->thread;
}

/* Group of a call: cached per file by (type id, API), site id or thread. */
static int32_t group_of(ctx *x, scan_file *f, const st_call *c) {
  int api = c->api % ST_API_MAX;
  if (x->o->by == AN_BY_API && x->api_group[api] >= 0)
    return x->api_group[api];
  uint64_t key = x->o->by == AN_BY_TYPE   ? ((uint64_t)c->type << 8 | (uint64_t)api)
                 : x->o->by == AN_BY_SITE ? c->site
                                          : c->thread;
  uint32_t gi = idmap_get(&x->gcache, key);
  if (gi != UINT32_MAX)
    return (int32_t)gi;
  char name[1024];
  int32_t g = -1;
  switch (x->o->by) {
  case AN_BY_API:
    g = find_group(x, st_api_name(api), f, c, fill_api);
    x->api_group[api] = g;
    return g;
  case AN_BY_TYPE:
    snprintf(name, sizeof name, "%s %s", st_api_name(api), scan_type_name(f, c->type));
    g = find_group(x, name, f, c, fill_type);
    break;
  case AN_BY_SITE: g = find_group(x, scan_site_label(f, c->site), f, c, fill_site); break;
  case AN_BY_THREAD: {
    /* PID.EXEC/THREAD, or PID#N.EXEC/THREAD for the N-th process with that pid */
    uint32_t n = cli_procs_nth(&x->procs, f->h.pid, f->h.pidns, f->h.start_ticks);
    if (n > 1)
      snprintf(name, sizeof name, "%u#%u.%u/%u", f->h.pid, n, f->h.exec_seq, c->thread);
    else
      snprintf(name, sizeof name, "%u.%u/%u", f->h.pid, f->h.exec_seq, c->thread);
    g = find_group(x, name, f, c, fill_thread);
    if (g >= 0) {
      x->r->groups[g].pidns = other_pidns(x, f);
      x->r->groups[g].nth = n;
    }
    break;
  }
  }
  if (g >= 0 && idmap_put(&x->gcache, key, (uint32_t)g) != 0)
    return -1;
  return g;
}

/* ---- deciding calls -------------------------------------------------------------- */

unsigned an_size_bin(uint64_t size) {
  unsigned b = size ? 64u - (unsigned)__builtin_clzll(size) : 0;
  return b < AN_SIZE_BINS ? b : AN_SIZE_BINS - 1;
}

uint64_t an_bin_low(unsigned bin) {
  return bin ? 1ull << (bin - 1) : 0;
}

static const st_site *site_of(const scan_file *f, uint32_t id) {
  return id && id < f->nsites && f->sites[id].label ? &f->sites[id].site : NULL;
}

/* Matching rules of every plan for this call's API, type and site, cached
 * per file: fnmatch per call would cost more than the rest together. */
static const uint64_t *rule_masks(ctx *x, scan_file *f, const st_call *c) {
  uint64_t key =
      (uint64_t)(c->api & 0xff) | (uint64_t)(c->type & 0xffffff) << 8 | (uint64_t)c->site << 32;
  uint32_t i = idmap_get(&x->rcache, key);
  if (i != UINT32_MAX)
    return &x->masks[(size_t)i * x->np];
  if (x->nmasks == x->capmasks) {
    size_t cap = x->capmasks ? x->capmasks * 2 : 64;
    uint64_t *nm = realloc(x->masks, cap * x->np * sizeof *nm);
    if (!nm)
      return NULL;
    x->masks = nm;
    x->capmasks = cap;
  }
  uint64_t *m = &x->masks[x->nmasks * x->np];
  for (int k = 0; k < x->np; k++) {
    const char *type = scan_type_name(f, c->type);
    m[k] = plan_match_mask(x->o->plans[k], c->api, type, site_of(f, c->site));
    plan_selectors_met(x->o->plans[k], c->api, type, site_of(f, c->site), x->r->plans[k].met);
  }
  if (idmap_put(&x->rcache, key, (uint32_t)x->nmasks) != 0)
    return NULL;
  x->nmasks++;
  return m;
}

static void count_why(an_plan *pr, int accel, const char *why) {
  for (size_t i = 0; i < pr->nwhy; i++)
    if (pr->why[i].accel == accel && pr->why[i].why == why) {
      pr->why[i].n++;
      return;
    }
  an_why *n = realloc(pr->why, (pr->nwhy + 1) * sizeof *n);
  if (!n)
    return;
  pr->why = n;
  pr->why[pr->nwhy++] = (an_why){accel, why, 1};
}

static int sw_reason(int outcome) {
  return outcome == PLAN_KEPT          ? AN_SW_KEPT
         : outcome == PLAN_UNSUPPORTED ? AN_SW_UNSUPPORTED
                                       : AN_SW_NOT_SELECTED;
}

int an_decide(const plan *p, scan_file *f, const st_call *c, const char *type, int rule,
              plan_decision *d) {
  *d = (plan_decision){.outcome = PLAN_NOT_SELECTED, .rule = rule, .accel = -1};
  if (c->flags & ST_CALL_NOT_OFFLOADABLE)
    return AN_SW_NOT_OFFLOADABLE;
  if ((c->flags & ST_CALL_NO_RESPONSE) && !(c->flags & ST_CALL_FAILED))
    return AN_SW_NO_RESPONSE;
  standin_request r;
  plan_request(&r, c, type);
  /* JPEG models may read the image itself (jpeg-lpn counts coefficients);
   * decodes are few and large, so fetching their request is cheap */
  const void *blob;
  uint64_t blen;
  if (st_api_family(c->api) == ST_FAMILY_JPEG && c->req_blob &&
      st_reader_blob(f->r, c->req_blob, &blob, &blen) == ST_OK) {
    r.req = blob;
    r.req_len = blen;
  }
  plan_decide(p, rule, &r, c->resp_len, d);
  return d->outcome == PLAN_OFFLOAD ? -1 : sw_reason(d->outcome);
}

int an_rule(const plan *p, const scan_file *f, const st_call *c) {
  return plan_match(p, c->api, scan_type_name(f, c->type), site_of(f, c->site),
                    plan_request_size(c));
}

/* Plan k's decision for a call, counted in the plan and the group. */
static chain *chain_of(ctx *x, uint32_t thread, int k);

static void decide(ctx *x, int k, scan_file *f, const st_call *c, uint32_t t, const uint64_t *masks,
                   an_group *g, ev_plan *out) {
  const plan *p = x->o->plans[k];
  an_plan *pr = &x->r->plans[k];
  an_gplan *gp = &g->plan[k];
  out->accel = -1;
  int reason;
  uint64_t size = plan_request_size(c);
  const char *type = scan_type_name(f, c->type);
  int rule = p->nrules <= 64 && masks ? plan_first_sized(p, masks[k], size)
                                      : plan_match(p, c->api, type, site_of(f, c->site), size);
  if (rule >= 0) /* whether any call comes to each rule (plan_warn_unused) */
    pr->rule_calls[rule]++;
  plan_decision d;
  reason = an_decide(p, f, c, type, rule, &d);
  if (reason < 0) {
    pr->offloaded++;
    pr->offloaded_rec_ns += c->latency_ns;
    gp->offloaded++;
    gp->offloaded_rec_ns += c->latency_ns;
    gp->service_ns += d.service_ns;
    gp->link_ns += d.link_in_ns + d.link_out_ns;
    gp->fault_ns += d.fault_ns;
    gp->source_ns += d.source_ns;
    pr->faults_over_ns += d.faults_over_ns;
    if (st_api_family(c->api) == ST_FAMILY_JPEG && c->nfeat > ST_JPF_OUT_COLD) {
      /* where the rows land: the model's placement against the recording's */
      uint64_t rows = c->feat[ST_JPF_OUT_BYTES], rec = c->feat[ST_JPF_OUT_COLD], add;
      rec = rec > 1000 ? 1000 : rec;
      /* saturating: out_bytes come from the trace */
      add = rows / 1000 * d.out_cold + rows % 1000 * d.out_cold / 1000;
      pr->rows_to_memory =
          add > UINT64_MAX - pr->rows_to_memory ? UINT64_MAX : pr->rows_to_memory + add;
      uint64_t to = add;
      add = rows / 1000 * rec + rows % 1000 * rec / 1000;
      pr->rows_rec_memory =
          add > UINT64_MAX - pr->rows_rec_memory ? UINT64_MAX : pr->rows_rec_memory + add;
      chain_of(x, t, k)->rows_delta += (double)to - (double)add;
    }
    *out = (ev_plan){d.service_ns,
                     d.link_in_ns,
                     d.link_out_ns,
                     d.accel,
                     d.busy_ns < d.service_ns ? (uint32_t)d.busy_ns : EV_BUSY_WHOLE,
                     (uint32_t)d.fault_ns, /* plan_decide bounds them */
                     (uint32_t)d.source_ns};
    return;
  }
  if (reason == AN_SW_UNSUPPORTED)
    count_why(pr, d.accel, d.why);
  pr->sw[reason]++;
  gp->sw[reason]++;
}

/* ---- the timeline ---------------------------------------------------------------- */

static chain *chain_of(ctx *x, uint32_t thread, int k) {
  return &x->chains[(size_t)(thread < x->nthreads ? thread : x->nthreads - 1) * x->np + k];
}

/* A call under plan k: its time (queueing included), and the shift of its
 * thread. A thread's first call inherits the shift the main thread had
 * reached by then (threads are taken to be created by the main thread,
 * just before their first call; a main thread that made no call has no
 * shift); the main thread's first call inherits the shift of the processes
 * that ended before this one started. */
static void place(ctx *x, int k, uint64_t start, const ev_call *e, const ev_plan *d) {
  plan_state *ps = &x->ps[k];
  an_plan *pr = &x->r->plans[k];
  chain *ch = chain_of(x, e->thread, k);
  if (!ch->started) {
    const chain *main = e->thread ? chain_of(x, 0, k) : NULL;
    ch->started = 1;
    ch->shift = !main || !main->started   ? ps->base
                : main->last_end <= start ? main->shift
                                          : main->prev_shift; /* its call was under way */
  }
  uint64_t pred = e->lat, queue = 0;
  if (d->accel >= 0) {
    const plan_accel *a = &pr->p->accel[d->accel];
    uint64_t arrive = (uint64_t)((int64_t)start - ch->shift) + d->source + d->link_in + d->fault;
    uint64_t busy = d->busy == EV_BUSY_WHOLE ? d->service : d->busy;
    uint64_t begin =
        a->engines && ps->eng[d->accel].n ? engines_book(&ps->eng[d->accel], arrive, busy) : arrive;
    queue = begin - arrive;
    pred = d->source + d->link_in + d->fault + queue + d->service + d->link_out;
    an_accel *ac = &pr->accel[d->accel];
    ac->requests++;
    ac->service_ns += d->service;
    ac->busy_ns += busy;
    ac->link_ns += d->link_in + d->link_out;
    ac->fault_ns += d->fault;
    ac->source_ns += d->source;
    ac->queue_ns += queue;
    ac->rec_ns += e->lat;
    pr->predicted_ns += pred;
    x->r->groups[e->group].plan[k].queue_ns += queue;
    an_bin *b = &pr->bins[e->api][e->bin];
    b->n++;
    b->rec_ns += e->lat;
    b->pred_ns += pred;
  }
  uint64_t end = start + e->lat;
  ch->prev_shift = ch->shift;
  ch->last_end = end;
  if (end > ch->max_end)
    ch->max_end = end;
  ch->shift += (int64_t)e->lat - (int64_t)pred;
  pr->saving_sum += (int64_t)e->lat - (int64_t)pred;
  pr->saving_cpu += (int64_t)e->lat - (int64_t)(pred - queue); /* queued: the engine is busy */
  if (end > ps->M)
    ps->M = end;
  ps->any = 1;
}

/* The latest end under plan k of the threads of the process being read:
 * each thread's latest recorded end, earlier by all of its calls' savings.
 * Taken once the process is read, not call by call: a thread's calls can
 * come out of start order (a JPEG decode is written when its object is
 * finished or destroyed, which a program may do long after, and on another
 * thread), and a saving that comes after the thread's latest call still
 * moves it. For calls in start order it is the end of the last one. */
static int64_t chains_latest_end(ctx *x, int k) {
  int64_t lp = 0;
  int any = 0;
  for (uint32_t t = 0; t < x->nthreads; t++) {
    const chain *ch = chain_of(x, t, k);
    int64_t end = (int64_t)ch->max_end - ch->shift;
    if (ch->started && (!any || end > lp))
      lp = end;
    any |= ch->started;
  }
  return lp;
}

static void on_emit(uint64_t start, void *item, void *arg) {
  ctx *x = arg;
  const ev_call *e = item;
  const ev_plan *d = (const ev_plan *)((const uint8_t *)item + sizeof *e);
  for (int k = 0; k < x->np; k++)
    place(x, k, start, e, &d[k]);
}

/* ---- per call ---------------------------------------------------------------------- */

static int grow_threads(ctx *x, uint32_t t) {
  uint32_t n = x->nthreads ? x->nthreads : 16;
  while (n <= t)
    n *= 2;
  chain *nc = realloc(x->chains, (size_t)n * (x->np ? x->np : 1) * sizeof *nc);
  uint8_t *ns = nc ? realloc(x->seen, n) : NULL;
  thread_info *np = ns ? realloc(x->th, n * sizeof *np) : NULL;
  if (nc)
    x->chains = nc;
  if (ns)
    x->seen = ns;
  if (!np)
    return -1;
  x->th = np;
  memset(nc + (size_t)x->nthreads * x->np, 0, (size_t)(n - x->nthreads) * x->np * sizeof *nc);
  memset(ns + x->nthreads, 0, n - x->nthreads);
  memset(np + x->nthreads, 0, (n - x->nthreads) * sizeof *np);
  x->nthreads = n;
  return 0;
}

static void tick(ctx *x, scan_file *f) {
  if ((++x->tick & 0xffff) || !x->prog.on)
    return;
  st_read_status st;
  st_reader_status(f->r, &st);
  progress_update(&x->prog, st.good_bytes);
}

static int on_call(scan_file *f, const st_call *c, void *arg) {
  ctx *x = arg;
  an_result *r = x->r;
  uint32_t t = c->thread < MAX_THREADS ? c->thread : MAX_THREADS - 1;
  int32_t gi = group_of(x, f, c);
  if (gi < 0 || (t >= x->nthreads && grow_threads(x, t) != 0)) {
    x->failed = 1;
    return 1;
  }
  an_group *g = &r->groups[gi];
  g->calls++;
  g->ns += c->latency_ns;
  g->req_bytes += c->req_len;
  g->resp_bytes += c->resp_len;
  g->byte_sides |= st_call_byte_sides(c->api, c->resp_len);
  hist_add(g->h, c->latency_ns);
  hist_add(&r->all, c->latency_ns);
  r->calls++;
  r->call_ns += c->latency_ns;
  if (c->flags & ST_CALL_NOT_OFFLOADABLE)
    r->not_offloadable_by[cli_no_slot(c)]++;
  r->chains += !x->seen[t];
  x->seen[t] = 1;
  thread_info *ti = &x->th[t];
  if (!ti->last || c->start_ns < ti->first)
    ti->first = c->start_ns;
  if (c->start_ns + c->latency_ns >= ti->last)
    ti->last = c->start_ns + c->latency_ns ? c->start_ns + c->latency_ns : 1;
  unsigned api = c->api % ST_API_MAX, bin = an_size_bin(plan_request_size(c));
  r->bins[api][bin].n++;
  r->bins[api][bin].rec_ns += c->latency_ns;
  if (x->np) {
    ev_call *e = (ev_call *)x->ev;
    *e = (ev_call){c->latency_ns, t, (uint32_t)gi, (uint8_t)api, (uint8_t)bin};
    ev_plan *d = (ev_plan *)(x->ev + sizeof *e);
    const uint64_t *masks = rule_masks(x, f, c);
    for (int k = 0; k < x->np; k++)
      decide(x, k, f, c, t, masks, g, &d[k]);
    merge_push(x->mg, t, c->start_ns, x->ev);
  }
  tick(x, f);
  return 0;
}

/* ---- per file ---------------------------------------------------------------------- */

typedef struct {
  char *path;
  uint64_t start, bytes;
} tfile;

static int tfile_cmp(const void *a, const void *b) {
  const tfile *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Trace files of dir in order of process start (parents before children). */
static tfile *list_files(const char *dir, size_t *n, uint64_t *total) {
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return NULL;
  if (td.n)
    cli_warn_unrecorded(dir);
  tfile *t = calloc(td.n + 1, sizeof *t);
  *n = 0;
  *total = 0;
  for (size_t i = 0; t && i < td.n; i++) {
    st_reader *r;
    struct stat st;
    if (cli_reader_open(&r, td.paths[i]) != 0)
      continue;
    t[*n].start = st_reader_header(r)->start_mono_ns;
    st_reader_close(r);
    t[*n].bytes = stat(td.paths[i], &st) == 0 ? (uint64_t)st.st_size : 0;
    *total += t[*n].bytes;
    t[(*n)++].path = td.paths[i];
    td.paths[i] = NULL;
  }
  cli_tracedir_free(&td);
  if (t)
    qsort(t, *n, sizeof *t, tfile_cmp);
  return t;
}

/* Before a process: inherit from the processes that ended before it
 * started (their latest recorded end minus their latest end under the
 * plan), forget the previous process's threads. Engine bookings stay: the
 * processes of a run share the accelerators, as in replay (a process
 * books among those read before it, engines.c takes bookings in any
 * order). Cleared, four children of pbtest forkpar each had one engine to
 * itself: no queueing, and 136% of it in use. */
static void begin_process(ctx *x, uint64_t start) {
  for (int k = 0; k < x->np; k++) {
    plan_state *ps = &x->ps[k];
    uint64_t M = 0;
    int64_t Lp = 0;
    int any = 0;
    for (size_t i = 0; i < x->ndone; i++) {
      const proc_done *d = &x->done[i];
      if (!d->any || d->end > start)
        continue;
      M = d->M > M ? d->M : M;
      Lp = !any || d->Lp[k] > Lp ? d->Lp[k] : Lp;
      any = 1;
    }
    ps->base = any ? (int64_t)M - Lp : 0;
    ps->any = 0;
    ps->M = 0;
    ps->Lp = 0;
  }
  if (x->nthreads) {
    memset(x->chains, 0, (size_t)x->nthreads * x->np * sizeof *x->chains);
    memset(x->seen, 0, x->nthreads);
    memset(x->th, 0, x->nthreads * sizeof *x->th);
  }
  idmap_clear(&x->gcache);
  idmap_clear(&x->rcache);
  x->nmasks = 0;
}

static void end_process(ctx *x, uint64_t end) {
  proc_done *nd = realloc(x->done, (x->ndone + 1) * sizeof *nd);
  int64_t *lp = calloc((size_t)x->np + 1, sizeof *lp);
  if (!nd || !lp) {
    free(lp);
    if (nd)
      x->done = nd;
    return;
  }
  x->done = nd;
  proc_done *d = &x->done[x->ndone++];
  *d = (proc_done){.end = end, .Lp = lp};
  for (int k = 0; k < x->np; k++) {
    plan_state *ps = &x->ps[k];
    /* the thread of this process whose rows moved most, each way: under
     * the per-thread critical path, the most its reads can move the run */
    double hi = 0, lo = 0;
    for (uint32_t t = 0; t < x->nthreads; t++) {
      double v = chain_of(x, t, k)->rows_delta;
      hi = v > hi ? v : hi;
      lo = v < lo ? v : lo;
    }
    x->r->plans[k].rows_crit_more += hi;
    x->r->plans[k].rows_crit_less += lo;
    if (!ps->any)
      continue;
    ps->Lp = chains_latest_end(x, k);
    d->any = 1;
    d->M = ps->M;
    lp[k] = ps->Lp;
    if (ps->M > ps->gM)
      ps->gM = ps->M;
    if (!ps->gany || ps->Lp > ps->gLp)
      ps->gLp = ps->Lp;
    ps->gany = 1;
  }
}

/* Thread groups take their process's run time for their share. */
static void set_thread_runs(ctx *x, size_t first_group, uint64_t run) {
  if (x->o->by != AN_BY_THREAD)
    return;
  for (size_t i = first_group; i < x->r->ngroups; i++)
    x->r->groups[i].run_ns = run;
}

/* Threads' spans, for the CPU capacity bound. */
static void add_spans(ctx *x) {
  for (uint32_t t = 0; t < x->nthreads; t++)
    if (x->th[t].last)
      x->r->thread_span_ns += x->th[t].last - x->th[t].first;
}

static int read_file(ctx *x, const tfile *tf, uint64_t *first, uint64_t *last) {
  scan_file f;
  size_t groups_before = x->r->ngroups;
  begin_process(x, tf->start);
  if (scan_run(&f, tf->path, on_call, x) != 0)
    return -1;
  if (x->np)
    merge_flush(x->mg);
  add_spans(x);
  int approx;
  uint64_t run = scan_run_ns(&f, &approx);
  uint64_t end = f.h.start_mono_ns + run;
  end_process(x, end);
  set_thread_runs(x, groups_before, run);
  x->r->processes++;
  x->r->run_ns += run;
  x->r->rec_overhead_ns += f.overhead_ns;
  if (f.place_miss_ns > x->r->miss_ns)
    x->r->miss_ns = f.place_miss_ns;
  x->r->run_approx |= approx;
  if (x->launcher_pid && f.h.ppid == x->launcher_pid)
    x->r->root_traced = 1;
  if (*last > f.h.start_mono_ns && *first)
    x->r->overlap = 1;
  if (!*first || f.h.start_mono_ns < *first)
    *first = f.h.start_mono_ns;
  if (end > *last)
    *last = end;
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  if (f.h.host && *f.h.host && strcmp(f.h.host, host))
    snprintf(x->r->other_host, sizeof x->r->other_host, "%s", f.h.host);
  if (f.status.error) {
    /* a file cut inside a chunk (a writer killed while writing, a full
     * disk) is a killed recording, not damage, as info and dump say: its
     * calls are analysed and the status stays 0 (one cut at a chunk's end
     * was, one cut inside it failed report, whatif, sweep and compare) */
    char st[512]; /* scan_status_text: a cut file's is ~300 bytes */
    scan_status_text(&f, st, sizeof st);
    int damage = scan_damaged(&f);
    cli_warn("%s: %s%s", tf->path, st,
             damage           ? "; analysing the calls before the damage"
             : f.created_only ? ""
                              : "; analysing the calls before that point");
    if (damage)
      x->r->damaged = 1;
    else
      x->r->cut = 1;
  }
  scan_close(&f);
  return x->failed ? -1 : 0;
}

/* ---- setup ------------------------------------------------------------------------- */

static int setup(ctx *x, an_result *r, const an_opts *o) {
  memset(r, 0, sizeof *r);
  memset(x, 0, sizeof *x);
  x->r = r;
  x->o = o;
  x->np = o->nplans;
  for (int i = 0; i < ST_API_MAX; i++)
    x->api_group[i] = -1;
  hist_init(&r->all);
  r->cpus = o->cpus ? o->cpus : cli_cpus_here();
  r->nplans = o->nplans;
  r->plans = calloc((size_t)o->nplans + 1, sizeof *r->plans);
  x->ps = calloc((size_t)o->nplans + 1, sizeof *x->ps);
  if (!r->plans || !x->ps)
    return -1;
  for (int k = 0; k < o->nplans; k++) {
    r->plans[k].p = o->plans[k];
    r->plans[k].rule_calls = calloc((size_t)o->plans[k]->nrules + 1, sizeof(uint64_t));
    r->plans[k].met = calloc((size_t)o->plans[k]->nrules + 1, 1);
    if (!r->plans[k].rule_calls || !r->plans[k].met)
      return -1;
    for (int a = 0; a < o->plans[k]->naccel; a++) {
      uint32_t n = o->plans[k]->accel[a].engines;
      if (n && engines_init(&x->ps[k].eng[a], n) != 0)
        return -1;
    }
  }
  if (!x->np)
    return 0;
  x->evsize = sizeof(ev_call) + (size_t)x->np * sizeof(ev_plan);
  x->ev = calloc(1, x->evsize);
  if (!x->ev)
    return -1;
  return merge_open(&x->mg, x->evsize, MERGE_BYTES, MERGE_LAG_NS, on_emit, x);
}

static void teardown(ctx *x) {
  cli_procs_free(&x->procs);
  idmap_free(&x->gcache);
  idmap_free(&x->gindex);
  idmap_free(&x->rcache);
  free(x->masks);
  free(x->chains);
  free(x->seen);
  free(x->th);
  for (int k = 0; x->ps && k < x->np; k++)
    for (int a = 0; a < PLAN_MAX_ACCEL; a++)
      engines_free(&x->ps[k].eng[a]);
  free(x->ps);
  for (size_t i = 0; i < x->ndone; i++)
    free(x->done[i].Lp);
  free(x->done);
  merge_close(x->mg);
  free(x->ev);
}

static int single_thread(const an_result *r) {
  return r->processes <= 1 && r->chains <= 1;
}

/* The baseline the estimates subtract savings from: the program's own wall
 * time when the user measured it (the recorded run is slower: recording
 * costs the program's threads time), else the recorded wall, else the span. */
static void set_wall(an_result *r, const char *dir, uint64_t first, uint64_t last,
                     uint64_t native) {
  r->span_ns = last > first ? last - first : 0;
  r->wall_ns = r->span_ns;
  r->dilation = 1;
  const char *w = cli_runinfo_get(dir, "wall_ns");
  uint64_t rec = w ? strtoull(w, NULL, 10) : 0;
  /* a run.info written by hand or damaged: "-5" read as 2^64 - 5 made every
   * estimate 0 ns, -100% (the processes' own span covers most of a run) */
  if (rec && r->span_ns && rec / 1000 > r->span_ns) {
    char b[32];
    cli_warn("%s/run.info: wall_ns %s is more than 1000 times the processes' span (%s); "
             "ignored: the estimates start from the span",
             dir, w, cli_fmt_ns(b, sizeof b, (double)r->span_ns));
    rec = 0;
  }
  /* half of it, not all: recording slows calls, and a busy recording
   * machine more (photo-service's 495 ms in calls on 2 CPUs, natively run
   * in 233 ms); a unit error is off a thousandfold. One thread made every
   * call: they ran one after the other, on one CPU however many there are */
  uint32_t cpus = single_thread(r) ? 1 : r->cpus;
  if (native && cpus && native < r->call_ns / cpus / 2) {
    char a[32], b[32];
    cli_warn("the native wall time %s is less than half what the recorded calls alone take "
             "on %u CPU%s (%s in calls%s): the estimates below start from an impossible time (is "
             "--native-wall's unit right? was the machine busy when recording?)",
             cli_fmt_ns(a, sizeof a, (double)native), cpus, cpus == 1 ? "" : "s",
             cli_fmt_ns(b, sizeof b, (double)r->call_ns),
             single_thread(r) ? ", one after the other on one thread" : "");
  }
  if (native) {
    /* the recorded timelines are taken as uniformly slowed down */
    uint64_t recorded = rec >= r->span_ns && rec ? rec : r->span_ns;
    r->dilation = recorded ? (double)native / (double)recorded : 1;
    r->wall_ns = native;
    r->wall_recorded = 2;
    return;
  }
  if (rec >= r->span_ns && rec) {
    r->wall_ns = rec;
    r->wall_recorded = 1;
  }
}

/* An estimate that minus() stopped at 0 ns (-100%) was printed without a
 * word: the savings reached the wall time they are taken from, which is
 * then too short (mostly a --native-wall below the time in calls). */
static void warn_floored(const an_result *r) {
  int n = 0, first = -1;
  for (int k = 0; k < r->nplans; k++)
    if (r->wall_ns && an_estimate(r, k) == 0 && n++ == 0)
      first = k;
  if (!n)
    return;
  const an_plan *pr = &r->plans[first];
  int64_t saving = single_thread(r) ? pr->saving_sum : pr->saving_crit;
  char a[32], b[32], name[600];
  if (strcmp(pr->p->source, "--iface"))
    snprintf(name, sizeof name, "plan %s", pr->p->source);
  else
    snprintf(name, sizeof name, "the --iface plan");
  char many[48] = "";
  if (n > 1)
    snprintf(many, sizeof many, " (and %d more plans)", n - 1);
  cli_warn("estimate 0 ns (-100%%) under %s%s, floored: its offloaded calls save %s, as much as "
           "the %s %s wall time it starts from; that wall time is too short%s",
           name, many, cli_fmt_ns(a, sizeof a, (double)saving),
           cli_fmt_ns(b, sizeof b, (double)r->wall_ns),
           r->wall_recorded == 2 ? "native" : "recorded",
           r->wall_recorded == 2 ? " (is --native-wall's unit right? was the machine busy when "
                                   "recording?)"
                                 : "");
}

static int run(an_result *r, const char *dir, const an_opts *o);

/* Models run here: a plugin's output goes to standard error, not into the
 * report (if_quiet_stdout). */
int an_run(an_result *r, const char *dir, const an_opts *o) {
  if_quiet_stdout(1);
  int rc = run(r, dir, o);
  if_quiet_stdout(0);
  return rc;
}

static int run(an_result *r, const char *dir, const an_opts *o) {
  ctx x;
  size_t n = 0;
  uint64_t total = 0, first = 0, last = 0;
  int rc = setup(&x, r, o);
  const char *lp = cli_runinfo_get(dir, "launcher_pid"); /* recordings since 2026-11-27 */
  x.launcher_pid = lp ? (uint32_t)strtoul(lp, NULL, 10) : 0;
  x.launcher_pidns = cli_launcher_pidns(dir);
  r->root_traced = x.launcher_pid ? 0 : -1;
  r->busy = cli_recording_busy(dir);
  tfile *files = rc == 0 ? list_files(dir, &n, &total) : NULL;
  if (rc != 0)
    cli_err("out of memory");
  if (!files)
    rc = -1;
  progress_start(&x.prog, o->what, n, total);
  uint64_t before = 0;
  for (int k = 0; rc == 0 && k < x.np; k++) /* occurrences count from this pass's first */
    plan_reset(o->plans[k]);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    progress_file(&x.prog, i, before);
    if ((rc = read_file(&x, &files[i], &first, &last)) != 0 && x.failed)
      cli_err("%s: out of memory", files[i].path);
    before += files[i].bytes;
    r->files++;
  }
  progress_end(&x.prog);
  for (int k = 0; k < x.np; k++)
    r->plans[k].saving_crit = x.ps[k].gany ? (int64_t)x.ps[k].gM - x.ps[k].gLp : 0;
  r->late = x.mg ? merge_late(x.mg) : 0;
  set_wall(r, dir, first, last, o->native_wall_ns);
  if (rc == 0)
    warn_floored(r);
  for (int k = 0; rc == 0 && r->calls && k < x.np; k++) { /* once a file: a sweep's variants */
    int again = 0;
    for (int j = 0; j < k && !again; j++)
      again = !strcmp(o->plans[j]->source, o->plans[k]->source);
    if (!again)
      plan_warn_unused(o->plans[k], r->plans[k].rule_calls, r->plans[k].met);
  }
  for (size_t i = 0; files && i < n; i++)
    free(files[i].path);
  free(files);
  teardown(&x);
  return rc;
}

void an_free(an_result *r) {
  for (size_t i = 0; i < r->ngroups; i++) {
    an_group *g = &r->groups[i];
    free(g->type);
    free(g->site);
    free(g->key);
    free(g->h);
    free(g->plan);
  }
  free(r->groups);
  for (int k = 0; k < r->nplans; k++) {
    free(r->plans[k].why);
    free(r->plans[k].rule_calls);
    free(r->plans[k].met);
  }
  free(r->plans);
  memset(r, 0, sizeof *r);
}

/* ---- estimates --------------------------------------------------------------------- */

static uint64_t minus(uint64_t wall, int64_t saving) {
  return saving >= (int64_t)wall ? 0 : (uint64_t)((int64_t)wall - saving);
}

uint64_t an_estimate_cp(const an_result *r, int k) {
  return minus(r->wall_ns, single_thread(r) ? r->plans[k].saving_sum : r->plans[k].saving_crit);
}

uint64_t an_estimate_cpu(const an_result *r, int k) {
  double cpus = r->cpus ? r->cpus : 1;
  double dil = r->dilation > 0 ? r->dilation : 1;
  double used = dil * (double)r->thread_span_ns, most = cpus * dil * (double)r->span_ns;
  double work = (used < most ? used : most) - (double)r->plans[k].saving_cpu;
  double outside = (double)r->wall_ns - dil * (double)r->span_ns;
  double est = (work > 0 ? work / cpus : 0) + (outside > 0 ? outside : 0);
  return (uint64_t)est;
}

uint64_t an_estimate(const an_result *r, int k) {
  uint64_t cp = an_estimate_cp(r, k), cpu = an_estimate_cpu(r, k);
  return single_thread(r) || cp >= cpu ? cp : cpu;
}

const char *an_method(const an_result *r, int k) {
  if (single_thread(r))
    return "single-thread Amdahl";
  return an_estimate_cp(r, k) >= an_estimate_cpu(r, k) ? "per-thread critical path"
                                                       : "CPU capacity";
}

int64_t an_rows_bound_ns(const an_result *r, int k) {
  const an_plan *pr = &r->plans[k];
  double bytes = (double)pr->rows_to_memory - (double)pr->rows_rec_memory;
  if (!single_thread(r)) {
    /* as the estimates take threads: the most one thread's reads move its
     * path (summed over processes, as if one after another), or all of
     * them spread over the CPUs; never more than all of them */
    double crit = bytes >= 0 ? pr->rows_crit_more : -pr->rows_crit_less;
    double spread = fabs(bytes) / (r->cpus ? r->cpus : 1);
    double most = crit > spread ? crit : spread;
    most = most < fabs(bytes) ? most : fabs(bytes);
    bytes = bytes >= 0 ? most : -most;
  }
  double lines = bytes / 64;
  double ns = lines * (double)r->miss_ns, cap = 9e18; /* out_bytes come from the trace */
  return (int64_t)(ns > cap ? cap : ns < -cap ? -cap : ns);
}

uint64_t an_estimate_naive(const an_result *r, int k) {
  return minus(r->wall_ns, r->plans[k].saving_sum);
}

int an_naive_means(const an_result *r, int k) {
  return r->plans[k].saving_sum < (int64_t)r->wall_ns;
}

char *an_fmt_naive(char *buf, size_t cap, const an_result *r, int k) {
  if (!an_naive_means(r, k)) {
    snprintf(buf, cap, "-");
    return buf;
  }
  return cli_fmt_ns(buf, cap, (double)an_estimate_naive(r, k));
}

static void say_damaged(const char *dir, const char *what, int damaged) {
  cli_err("%s: nothing to %s: its traces %s before their first call (see above); "
          "record the program again",
          dir, what, damaged ? "are damaged" : "end (killed, or the disk filled up)");
}

int an_estimable(const an_result *r, const char *dir, const char *what) {
  if (r->processes == 0) {
    cli_err_no_trace(dir, what);
    return -1;
  }
  if (r->calls == 0 && (r->damaged || r->cut)) { /* (a table of zeros read as an estimate) */
    say_damaged(dir, what, r->damaged);
    return -1;
  }
  return 0;
}

int an_estimable_quick(const char *dir, const char *what) {
  cli_tracedir td;
  if (cli_tracedir_open(&td, dir) != 0)
    return -1;
  int calls = 0, read = 0;
  char *damaged = NULL; /* the first trace damaged before a call */
  for (size_t i = 0; i < td.n && !calls; i++) {
    st_reader *rd;
    if (cli_reader_open(&rd, td.paths[i]) != 0) { /* said, naming it */
      damaged = damaged ? damaged : td.paths[i];
      continue;
    }
    read = 1;
    st_record rec;
    int rc;
    while (!calls && (rc = st_reader_next(rd, &rec)) == ST_OK)
      calls = rec.kind == ST_REC_CALL;
    if (!calls && rc != ST_E_END && !damaged)
      damaged = td.paths[i];
    st_reader_close(rd);
  }
  int ok = calls || (read && !damaged); /* no call, no damage: as an_run reads it */
  if (!ok && !damaged)
    cli_err_no_trace(dir, what);
  else if (!ok)
    cli_err("%s: nothing to %s: no trace holds a readable call (%s is damaged before its "
            "first); record the program again",
            dir, what, damaged);
  cli_tracedir_free(&td);
  return ok ? 0 : -1;
}

/* test_analysis.c — the offline analysis (cli/analysis.c and its parts)
 * against small traces written here, with every expected figure worked
 * out by hand in the comments. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/analysis.h"
#include "cli/cli.h"
#include "cli/engines.h"
#include "cli/hist.h"
#include "cli/json.h"
#include "cli/merge.h"
#include "cli/plan.h"
#include "cli/rdb_store.h"
#include "cli/replaydb.h"
#include "replay/rdb.h"
#include "trace.h"

#define T0 1000000000ull /* process start in every trace below */

/* ---- temporary recordings ------------------------------------------------------ */

static char dir[64];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/stanalysis-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  char p[512];
  while (d && (e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
  if (d)
    closedir(d);
  rmdir(dir);
}

typedef struct {
  st_writer *w;
  uint64_t seq;
} tw;

static void tw_open(tw *t, uint32_t pid, uint64_t start) {
  static const char *const argv[] = {"app"};
  char path[128];
  snprintf(path, sizeof path, "%s/%u.trace", dir, pid);
  st_header h = {.pid = pid,
                 .ppid = 1,
                 .start_mono_ns = start,
                 .clock = "CLOCK_MONOTONIC",
                 .host = "test",
                 .exe = "/app",
                 .tool_version = "test",
                 .argc = 1,
                 .argv = argv};
  ck_assert_int_eq(st_writer_open(&t->w, path, &h), ST_OK);
  t->seq = 0;
  st_type ty = {.id = 1, .family = ST_FAMILY_PROTOBUF, .name = "app.Req"};
  st_type ty2 = {.id = 2, .family = ST_FAMILY_PROTOBUF, .name = "app.Resp"};
  ck_assert_int_eq(st_writer_add_type(t->w, &ty), ST_OK);
  ck_assert_int_eq(st_writer_add_type(t->w, &ty2), ST_OK);
}

/* A call at T0 + at ns of `lat` ns; size is the encoded size (and the
 * request bytes of an unpack). */
static void tw_call(tw *t, uint32_t thread, int api, uint32_t type, uint64_t at, uint64_t lat,
                    uint64_t size) {
  st_call c = {.api = (uint8_t)api,
               .thread = thread,
               .type = type,
               .seq = t->seq++,
               .start_ns = T0 + at,
               .latency_ns = lat,
               .nfeat = ST_PBF_NFEAT};
  c.feat[ST_PBF_ENCODED_SIZE] = size;
  c.req_len = api == ST_API_PB_UNPACK ? size : 0;
  c.resp_len = api == ST_API_PB_PACK ? size : 0;
  memcpy(c.fp, &c.seq, 8);
  ck_assert_int_eq(st_writer_add_call(t->w, &c), ST_OK);
}

static void tw_close(tw *t, uint64_t end) {
  char v[32];
  snprintf(v, sizeof v, "%llu", (unsigned long long)(T0 + end));
  st_note n = {"end_mono_ns", v};
  ck_assert_int_eq(st_writer_add_note(t->w, &n), ST_OK);
  ck_assert_int_eq(st_writer_close(t->w), ST_OK);
}

static void load_plan(plan *p, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/plan.txt", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
  memset(p, 0, sizeof *p);
  ck_assert_int_eq(plan_load(p, path), 0);
  unlink(path);
}

static void run(an_result *r, an_by by, plan **plans, int n, uint32_t cpus) {
  an_opts o = {.by = by, .plans = (const plan *const *)plans, .nplans = n, .cpus = cpus};
  ck_assert_int_eq(an_run(r, dir, &o), 0);
}

static const an_group *group(const an_result *r, const char *key) {
  for (size_t i = 0; i < r->ngroups; i++)
    if (!strcmp(r->groups[i].key, key))
      return &r->groups[i];
  ck_abort_msg("no group %s", key);
  return NULL;
}

/* Within the histogram's stated error of the exact value. */
static void near(uint64_t got, uint64_t want) {
  double err = (double)(got > want ? got - want : want - got);
  ck_assert_msg(err <= HIST_REL_ERROR * (double)want + 0.5, "%llu is not within %.1f%% of %llu",
                (unsigned long long)got, 100 * HIST_REL_ERROR, (unsigned long long)want);
}

/* ---- histogram -------------------------------------------------------------------- */

START_TEST(test_hist_small_values_are_exact) {
  hist h;
  hist_init(&h);
  for (uint64_t v = 1; v <= 31; v++)
    hist_add(&h, v);
  ck_assert_uint_eq(hist_quantile(&h, 0.5), 16); /* rank 16 of 31 */
  ck_assert_uint_eq(hist_quantile(&h, 0.01), 1);
  ck_assert_uint_eq(hist_quantile(&h, 1), 31);
  ck_assert_uint_eq(h.count, 31);
  ck_assert_uint_eq(h.sum, 31 * 32 / 2);
}
END_TEST

/* Nearest-rank quantiles of 10,000 spread values stay within the error. */
START_TEST(test_hist_quantiles_within_stated_error) {
  hist h;
  hist_init(&h);
  uint64_t v[10000], s = 7;
  for (int i = 0; i < 10000; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = 50 + (s >> 40) % 5000000;
    hist_add(&h, v[i]);
  }
  for (int i = 1; i < 10000; i++) /* insertion sort is fine at this size */
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      uint64_t t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  double qs[] = {0.01, 0.25, 0.5, 0.9, 0.99, 0.999};
  for (size_t i = 0; i < sizeof qs / sizeof qs[0]; i++) {
    uint64_t rank = (uint64_t)(qs[i] * 10000 + 0.999999);
    near(hist_quantile(&h, qs[i]), v[rank - 1]);
  }
  ck_assert_uint_eq(hist_quantile(&h, 1.0), v[9999]);
}
END_TEST

START_TEST(test_hist_huge_values_share_the_last_bucket) {
  hist h, g;
  hist_init(&h);
  hist_init(&g);
  hist_add(&h, UINT64_MAX / 2);
  hist_add(&g, 100);
  hist_merge(&h, &g);
  ck_assert_uint_eq(hist_bucket(UINT64_MAX), HIST_NBUCKETS - 1);
  ck_assert_uint_eq(hist_quantile(&h, 1), UINT64_MAX / 2);
  ck_assert_uint_eq(hist_quantile(&h, 0.5), 100);
  ck_assert_uint_eq(h.count, 2);
}
END_TEST

/* ---- merge ------------------------------------------------------------------------ */

typedef struct {
  uint64_t out[64];
  int n;
} sink;

static void collect(uint64_t start, void *item, void *arg) {
  sink *s = arg;
  ck_assert_uint_eq(*(uint64_t *)item, start);
  s->out[s->n++] = start;
}

START_TEST(test_merge_restores_start_order_across_streams) {
  merge *m;
  sink s = {.n = 0};
  ck_assert_int_eq(merge_open(&m, sizeof(uint64_t), 1 << 20, 1000, collect, &s), 0);
  /* two threads written in batches, as the recorder's writer drains them */
  uint64_t a[] = {10, 20, 30, 40}, b[] = {15, 25, 35};
  for (int i = 0; i < 4; i++)
    merge_push(m, 0, a[i], &a[i]);
  for (int i = 0; i < 3; i++)
    merge_push(m, 1, b[i], &b[i]);
  merge_flush(m);
  ck_assert_int_eq(s.n, 7);
  for (int i = 1; i < s.n; i++)
    ck_assert_uint_le(s.out[i - 1], s.out[i]);
  ck_assert_uint_eq(merge_late(m), 0);
  merge_close(m);
}
END_TEST

/* Items older than the lag go out at once; one coming later is counted. */
START_TEST(test_merge_lag_bounds_the_wait_and_counts_late_items) {
  merge *m;
  sink s = {.n = 0};
  ck_assert_int_eq(merge_open(&m, sizeof(uint64_t), 1 << 20, 100, collect, &s), 0);
  uint64_t v[] = {10, 50, 200, 30};
  merge_push(m, 0, v[0], &v[0]);
  merge_push(m, 0, v[1], &v[1]);
  ck_assert_int_eq(s.n, 0);
  merge_push(m, 0, v[2], &v[2]); /* 10 and 50 are now 100 behind */
  ck_assert_int_eq(s.n, 2);
  merge_push(m, 1, v[3], &v[3]); /* 30 arrives after 50 went out */
  merge_flush(m);
  ck_assert_int_eq(s.n, 4);
  ck_assert_uint_eq(merge_late(m), 1);
  merge_close(m);
}
END_TEST

START_TEST(test_merge_memory_cap_hands_items_on) {
  merge *m;
  sink s = {.n = 0};
  /* room for 4 slots of 16 bytes */
  ck_assert_int_eq(merge_open(&m, sizeof(uint64_t), 64, UINT64_MAX / 4, collect, &s), 0);
  uint64_t v[8];
  for (int i = 0; i < 8; i++) {
    v[i] = (uint64_t)i;
    merge_push(m, 0, v[i], &v[i]);
  }
  ck_assert_int_eq(s.n, 4);
  merge_flush(m);
  ck_assert_int_eq(s.n, 8);
  merge_close(m);
}
END_TEST

/* ---- engines ---------------------------------------------------------------------- */

START_TEST(test_engines_queue_and_fill_gaps) {
  engines g;
  ck_assert_int_eq(engines_init(&g, 1), 0);
  ck_assert_uint_eq(engines_book(&g, 100, 50), 100); /* busy 100..150 */
  ck_assert_uint_eq(engines_book(&g, 120, 50), 150); /* queues 30: 150..200 */
  ck_assert_uint_eq(engines_book(&g, 300, 10), 300); /* 300..310 */
  /* arrives before the last booking, fits the gap 200..300 */
  ck_assert_uint_eq(engines_book(&g, 190, 50), 200);
  /* no gap of 80 before 310 */
  ck_assert_uint_eq(engines_book(&g, 0, 80), 0);
  ck_assert_uint_eq(engines_book(&g, 0, 80), 310);
  /* a request that keeps the engine 0 ns neither waits nor books */
  ck_assert_uint_eq(engines_book(&g, 120, 0), 120);
  ck_assert_uint_eq(engines_book(&g, 390, 0), 390);
  ck_assert_uint_eq(engines_book(&g, 390, 10), 390);
  engines_free(&g);
  ck_assert_int_eq(engines_init(&g, 2), 0);
  ck_assert_uint_eq(engines_book(&g, 0, 100), 0);
  ck_assert_uint_eq(engines_book(&g, 0, 100), 0); /* second engine */
  ck_assert_uint_eq(engines_book(&g, 0, 100), 100);
  engines_free(&g);
}
END_TEST

/* Requests booked out of arrival order (a thread behind the others books
 * late). Two engines and never more than two requests at once, so none need
 * queue; 380 goes to the engine free since 360, not to the one free since
 * 270 (the lower one, where it used to go), so 350 still finds that one
 * free. */
START_TEST(test_engines_late_booking_finds_its_gap) {
  engines g;
  ck_assert_int_eq(engines_init(&g, 2), 0);
  ck_assert_uint_eq(engines_book(&g, 170, 100), 170);
  ck_assert_uint_eq(engines_book(&g, 260, 100), 260);
  ck_assert_uint_eq(engines_book(&g, 380, 100), 380);
  ck_assert_uint_eq(engines_book(&g, 350, 100), 350);
  engines_free(&g);
  /* booked in arrival order, a busy run of requests on 3 engines queues as
   * a first-come-first-served queue would: each starts when the earliest
   * engine frees */
  ck_assert_int_eq(engines_init(&g, 3), 0);
  uint64_t free_at[3] = {0, 0, 0};
  for (uint64_t i = 0; i < 40; i++) {
    uint64_t arrive = i * 37, service = 60 + (i * 7919) % 90;
    int k = 0;
    for (int j = 1; j < 3; j++)
      if (free_at[j] < free_at[k])
        k = j;
    uint64_t want = free_at[k] > arrive ? free_at[k] : arrive;
    free_at[k] = want + service;
    ck_assert_uint_eq(engines_book(&g, arrive, service), want);
  }
  engines_free(&g);
}
END_TEST

/* ---- plans ------------------------------------------------------------------------ */

static plan_decision decide(const plan *p, int api, const char *type, uint64_t size, uint64_t lat) {
  st_call c = {.api = (uint8_t)api, .latency_ns = lat, .nfeat = ST_PBF_NFEAT};
  c.feat[ST_PBF_ENCODED_SIZE] = size;
  c.req_len = api == ST_API_PB_UNPACK ? size : 0;
  standin_request r;
  plan_decision d;
  plan_request(&r, &c, type);
  plan_evaluate(p, &r, NULL, size, 0, &d);
  uint64_t mask = plan_match_mask(p, api, type, NULL);
  ck_assert_int_eq(plan_first_sized(p, mask, size), plan_match(p, api, type, NULL, size));
  return d;
}

/* A recorded pack or size call of request fp whose answer is `blob` (a
 * pack's bytes) or `result`. */
static void tw_answer(tw *t, int api, uint8_t fp, uint64_t blob, uint64_t result) {
  st_call c = {.api = (uint8_t)api,
               .type = 1,
               .seq = t->seq++,
               .start_ns = T0 + 1000 * t->seq,
               .latency_ns = 100,
               .result = result,
               .resp_blob = blob,
               .resp_len = blob ? 2 : 0};
  c.fp[0] = fp;
  ck_assert_int_eq(st_writer_add_call(t->w, &c), ST_OK);
}

static uint8_t entry_flags(const rdb_built *b, uint8_t fp) {
  const rdb_header *h = (const rdb_header *)b->base;
  const rdb_entry *e = (const rdb_entry *)(b->base + h->entries_off);
  for (uint64_t i = 0; i < h->nentries; i++)
    if (e[i].fp[0] == fp)
      return e[i].flags;
  ck_abort_msg("no entry %u", fp);
  return 0;
}

/* A request answered two ways in a recording (one fingerprint, two
 * encodings: a type redefined in place, another library's copy of a
 * sub-message's type) answers none: replay runs it for real. The same
 * bytes twice, in one blob or two, and a size told twice alike, answer. */
START_TEST(test_replaydb_request_answered_two_ways_answers_none) {
  static const uint8_t x0a[] = {0x08, 0x0a}, x05[] = {0x08, 0x05};
  tw t;
  tw_open(&t, 700, T0);
  uint64_t b0a, b05, b0a2;
  ck_assert_int_eq(st_writer_add_blob(t.w, x0a, 2, &b0a), ST_OK);
  ck_assert_int_eq(st_writer_add_blob(t.w, x05, 2, &b05), ST_OK);
  tw_answer(&t, ST_API_PB_PACK, 1, b0a, 2);
  tw_answer(&t, ST_API_PB_PACK, 1, b05, 2); /* two encodings */
  tw_answer(&t, ST_API_PB_PACK, 2, b0a, 2);
  tw_answer(&t, ST_API_PB_PACK, 2, b0a, 2); /* the same blob */
  ck_assert_int_eq(st_writer_add_blob(t.w, x0a, 2, &b0a2), ST_OK);
  tw_answer(&t, ST_API_PB_PACK, 2, b0a2, 2); /* the same bytes, another blob */
  tw_answer(&t, ST_API_PB_SIZE, 3, 0, 2);
  tw_answer(&t, ST_API_PB_SIZE, 3, 0, 3); /* two sizes */
  tw_answer(&t, ST_API_PB_SIZE, 4, 0, 2);
  tw_answer(&t, ST_API_PB_SIZE, 4, 0, 2);
  tw_close(&t, 100000);
  plan p;
  load_plan(&p, "accel dev constant:ns=500\noffload api=pb.pack,pb.size to dev\n");
  rdb_built b;
  ck_assert_int_eq(rdb_build(dir, &p, RDB_MISS_FALLBACK, 1, 1, &b), 0);
  ck_assert(entry_flags(&b, 1) & RDB_ENTRY_MIXED);
  ck_assert(!(entry_flags(&b, 2) & RDB_ENTRY_MIXED));
  ck_assert(entry_flags(&b, 3) & RDB_ENTRY_MIXED);
  ck_assert(!(entry_flags(&b, 4) & RDB_ENTRY_MIXED));
  rdb_built_free(&b);
  plan_free(&p);
}
END_TEST

START_TEST(test_plan_decide_outcomes_and_link_cost) {
  plan p;
  load_plan(&p, "accel dev constant:ns=500 link=pcie link_rtt_ns=100 link_gbps=1\n"
                "accel pa protoacc\n"
                "keep type=app.Secret\n"
                "offload api=pb.unpack size=-250 to dev\n"
                "offload api=pb.size to pa\n");
  plan_decision d = decide(&p, ST_API_PB_UNPACK, "app.Req", 100, 1000);
  ck_assert_int_eq(d.outcome, PLAN_OFFLOAD);
  ck_assert_uint_eq(d.service_ns, 500);
  ck_assert_uint_eq(d.link_in_ns, 250 + 100); /* 2.5 round trips + 100 B at 1 B/ns */
  ck_assert_uint_eq(d.link_out_ns, 50);       /* half a round trip, no response bytes */
  ck_assert_int_eq(decide(&p, ST_API_PB_UNPACK, "app.Req", 300, 1000).outcome, PLAN_NOT_SELECTED);
  ck_assert_int_eq(decide(&p, ST_API_PB_UNPACK, "app.Secret", 100, 1000).outcome, PLAN_KEPT);
  d = decide(&p, ST_API_PB_SIZE, "app.Req", 100, 1000);
  ck_assert_int_eq(d.outcome, PLAN_UNSUPPORTED);
  ck_assert_int_eq(d.accel, 1);
  ck_assert_ptr_nonnull(strstr(d.why, "get_packed_size"));
  plan_free(&p);
}
END_TEST

/* A recorded call's page faults (ST_PBF_FAULT_NS) are kept by the models
 * of devices, apart from their service time; software and scale, whose
 * time holds them, add nothing, nor do constant and linear (a call's whole
 * time by definition), nor a trace without the slot. */
START_TEST(test_plan_keeps_recorded_page_faults) {
  const char *specs[] = {
      "accel a constant:ns=500\noffload to a\n", "accel a protoacc\noffload to a\n",
      "accel a linear:base_ns=10,ns_per_byte=1\noffload to a\n", "accel a software\noffload to a\n",
      "accel a scale:factor=0.5\noffload to a\n"};
  uint64_t want[] = {0, 7000, 0, 0, 0};
  for (int i = 0; i < 5; i++) {
    plan p;
    load_plan(&p, specs[i]);
    st_call c = {.api = ST_API_PB_PACK, .latency_ns = 9000, .nfeat = ST_PBF_NFEAT};
    c.feat[ST_PBF_ENCODED_SIZE] = 64;
    c.feat[ST_PBF_FAULT_NS] = 7000;
    standin_request r;
    plan_decision d;
    plan_request(&r, &c, "app.Req");
    plan_evaluate(&p, &r, NULL, 64, 64, &d);
    ck_assert_int_eq(d.outcome, PLAN_OFFLOAD);
    ck_assert_uint_eq(d.fault_ns, want[i]);
    if (i == 0)
      ck_assert_uint_eq(d.service_ns, 500); /* the whole call's time, by definition */
    /* the faults beyond all of the prediction: none where the model keeps
     * them (protoacc) or its time holds them (software); scale's 4.5 us
     * leave 2.5 of the 7 */
    uint64_t over[] = {6500, 0, 7000 - d.service_ns - d.link_in_ns - d.link_out_ns, 0, 2500};
    ck_assert_uint_eq(d.faults_over_ns, over[i]);
    c.feat[ST_PBF_FAULT_NS] = 20000;        /* more than the call took: a trace from elsewhere */
    plan_request(&r, &c, "app.Req");
    plan_evaluate(&p, &r, NULL, 64, 64, &d);
    ck_assert_uint_eq(d.fault_ns, (want[i] ? 9000 : 0));
    c.nfeat = ST_PBF_FAULT_NS;              /* recorded before the slot */
    plan_request(&r, &c, "app.Req");
    plan_evaluate(&p, &r, NULL, 64, 64, &d);
    ck_assert_uint_eq(d.fault_ns, 0);
    ck_assert_uint_eq(d.faults_over_ns, 0);
    plan_free(&p);
  }
}
END_TEST

/* A recorded 5 ms decode of an 800x450 4:2:0 baseline image. */
static void decode_800x450(st_call *c) {
  *c = (st_call){.api = ST_API_JPEG_DECODE, .latency_ns = 5000000, .nfeat = ST_JPF_NFEAT};
  c->feat[ST_JPF_INPUT_BYTES] = 90000;
  c->feat[ST_JPF_WIDTH] = 800;
  c->feat[ST_JPF_HEIGHT] = 450;
  c->feat[ST_JPF_COMPONENTS] = 3;
  c->feat[ST_JPF_SUBSAMPLING] = ST_SUBSAMP_420;
  c->feat[ST_JPF_OUT_PIXELS] = 800 * 450;
  c->feat[ST_JPF_OUT_BYTES] = 800 * 450 * 3;
  c->feat[ST_JPF_SCALE_NUM] = c->feat[ST_JPF_SCALE_DENOM] = 1;
}

/* p's decision for c as an 800x450 decode's request (decode_800x450). */
static void decide_800x450(const plan *p, const st_call *c, plan_decision *d) {
  standin_request r;
  plan_request(&r, c, "baseline 4:2:0");
  plan_evaluate(p, &r, NULL, 90000, 1080000, d);
}

/* The models the recorded-time tests below go through: a device model
 * (which keeps recorded faults and source time), then two that hold them
 * in the recorded time they scale or repeat. */
#define KEEP_SPECS 3
static const char *const keep_specs[KEEP_SPECS] = {"accel a jpeg-core\noffload to a\n",
                                                   "accel a scale:factor=0.5\noffload to a\n",
                                                   "accel a software\noffload to a\n"};

/* c's decision under keep_specs[i], offloaded. */
static void decide_kept(int i, const st_call *c, plan_decision *d) {
  plan p;
  load_plan(&p, keep_specs[i]);
  decide_800x450(&p, c, d);
  ck_assert_msg(d->outcome == PLAN_OFFLOAD, "%d: %d %s", i, d->outcome, d->why ? d->why : "");
  plan_free(&p);
}

/* A decode's page faults (ST_JPF_FAULT_NS: rows written into a buffer the
 * program had just allocated) are kept by the JPEG device models as the
 * protobuf ones are (jpeg-lpn, which needs the image's bytes, by the same
 * test of the model); software's and scale's time holds them; a trace
 * without the slot has none. */
START_TEST(test_plan_keeps_recorded_decode_faults) {
  uint64_t want[KEEP_SPECS] = {2000000, 0, 0};
  for (int i = 0; i < KEEP_SPECS; i++) {
    st_call c;
    decode_800x450(&c);
    c.feat[ST_JPF_FAULT_NS] = 2000000;
    plan_decision d;
    decide_kept(i, &c, &d);
    ck_assert_uint_eq(d.fault_ns, want[i]);
    c.nfeat = ST_JPF_FAULT_NS; /* recorded before the slot */
    decide_kept(i, &c, &d);
    ck_assert_uint_eq(d.fault_ns, 0);
  }
}
END_TEST

/* A decode's time in the program's source callbacks (ST_JPF_SOURCE_NS) is
 * kept by the JPEG device models as its page faults are, within what the
 * call took beside them; software's and scale's time holds it; a trace
 * without the slot has none. */
START_TEST(test_plan_keeps_recorded_source_time) {
  uint64_t want[KEEP_SPECS] = {1500000, 0, 0};
  for (int i = 0; i < KEEP_SPECS; i++) {
    st_call c;
    decode_800x450(&c);
    c.feat[ST_JPF_SOURCE_NS] = 1500000;
    plan_decision d;
    decide_kept(i, &c, &d);
    ck_assert_uint_eq(d.source_ns, want[i]);
    ck_assert_uint_eq(d.fault_ns, 0);
    /* with 4 ms of faults, 1 ms is left of the call for its source */
    c.feat[ST_JPF_FAULT_NS] = 4000000;
    decide_kept(i, &c, &d);
    ck_assert_uint_eq(d.source_ns, want[i] ? 1000000 : 0);
    ck_assert_uint_eq(d.fault_ns, want[i] ? 4000000 : 0);
    c.nfeat = ST_JPF_SOURCE_NS; /* recorded before the slot */
    decide_kept(i, &c, &d);
    ck_assert_uint_eq(d.source_ns, 0);
  }
}
END_TEST

/* A saved plan reads back to the same decisions; a variant changes one
 * parameter only. */
START_TEST(test_plan_save_and_variants) {
  plan p, q, v;
  char path[128];
  load_plan(&p, "accel dev constant:ns=500,engines=2 link=onchip link_onchip_ns=30 "
                "deliver=memory\n"
                "keep api=pb.size type=\"app.Req\"\n"
                "offload api=pb.pack,pb.unpack type=app.* size=10-2K to dev\n");
  snprintf(path, sizeof path, "%s/saved.txt", dir);
  ck_assert_int_eq(plan_save(&p, path), 0);
  memset(&q, 0, sizeof q);
  ck_assert_int_eq(plan_load(&q, path), 0);
  unlink(path);
  ck_assert_uint_eq(q.accel[0].engines, 2);
  ck_assert_int_eq(q.accel[0].link.kind, IF_LINK_ONCHIP);
  ck_assert_int_eq(q.accel[0].deliver, PLAN_DELIVER_MEMORY); /* sweep --replay lost it */
  ck_assert_str_eq(q.rules[0].type_glob, "app.Req");         /* quotes taken out */
  int apis[] = {ST_API_PB_PACK, ST_API_PB_SIZE, ST_API_PB_UNPACK};
  uint64_t sizes[] = {5, 10, 2048, 2049};
  for (int a = 0; a < 3; a++)
    for (int s = 0; s < 4; s++) {
      plan_decision x = decide(&p, apis[a], "app.Req", sizes[s], 1000);
      plan_decision y = decide(&q, apis[a], "app.Req", sizes[s], 1000);
      ck_assert_int_eq(x.outcome, y.outcome);
      ck_assert_uint_eq(x.service_ns + x.link_in_ns + x.link_out_ns,
                        y.service_ns + y.link_in_ns + y.link_out_ns);
    }
  char err[256];
  ck_assert_int_eq(plan_copy(&v, &p), 0);
  ck_assert_int_eq(plan_set_param(&v, "dev", "ns", "900", err, sizeof err), 0);
  ck_assert_int_eq(plan_set_param(&v, "dev", "engines", "4", err, sizeof err), 0);
  ck_assert_uint_eq(decide(&v, ST_API_PB_PACK, "app.Req", 100, 1000).service_ns, 900);
  ck_assert_uint_eq(decide(&p, ST_API_PB_PACK, "app.Req", 100, 1000).service_ns, 500);
  ck_assert_uint_eq(v.accel[0].engines, 4);
  ck_assert_uint_eq(p.accel[0].engines, 2);
  ck_assert_int_eq(plan_set_param(&v, "dev", "nosuch", "1", err, sizeof err), -1);
  ck_assert_int_eq(plan_set_param(&v, "nodev", "ns", "1", err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "dev"));
  plan_free(&p);
  plan_free(&q);
  plan_free(&v);
}
END_TEST

/* ---- report figures ------------------------------------------------------------------ */

/* One thread, run 100 us: four unpacks (1, 2, 3, 4 us), a pack (10 us), a
 * get_packed_size (0.5 us). */
static void write_single(void) {
  tw t;
  tw_open(&t, 100, T0);
  tw_call(&t, 0, ST_API_PB_UNPACK, 1, 1000, 1000, 100);
  tw_call(&t, 0, ST_API_PB_UNPACK, 1, 10000, 2000, 200);
  tw_call(&t, 0, ST_API_PB_UNPACK, 1, 20000, 3000, 300);
  tw_call(&t, 0, ST_API_PB_UNPACK, 1, 30000, 4000, 400);
  tw_call(&t, 0, ST_API_PB_PACK, 2, 40000, 10000, 1000);
  tw_call(&t, 0, ST_API_PB_SIZE, 2, 60000, 500, 1000);
  tw_close(&t, 100000);
}

START_TEST(test_report_counts_times_shares_and_percentiles) {
  an_result r;
  write_single();
  run(&r, AN_BY_TYPE, NULL, 0, 1);
  ck_assert_uint_eq(r.processes, 1);
  ck_assert_uint_eq(r.calls, 6);
  ck_assert_uint_eq(r.call_ns, 20500);
  ck_assert_uint_eq(r.run_ns, 100000);
  const an_group *g = group(&r, "pb.unpack app.Req");
  ck_assert_uint_eq(g->calls, 4);
  ck_assert_uint_eq(g->ns, 10000);
  ck_assert_uint_eq(g->req_bytes, 1000);
  near(hist_quantile(g->h, 0.5), 2000); /* rank 2 of 4 */
  near(hist_quantile(g->h, 0.9), 4000); /* rank 4 */
  ck_assert_uint_eq(g->h->max, 4000);
  ck_assert_uint_eq(g->h->min, 1000);
  g = group(&r, "pb.pack app.Resp");
  ck_assert_uint_eq(g->ns, 10000);
  ck_assert_uint_eq(g->resp_bytes, 1000);
  an_free(&r);
  run(&r, AN_BY_API, NULL, 0, 1);
  ck_assert_uint_eq(r.ngroups, 3);
  ck_assert_uint_eq(group(&r, "pb.size")->ns, 500);
  an_free(&r);
}
END_TEST

/* The plan of test_plan_decide_outcomes_and_link_cost on write_single():
 * unpacks of 100 and 200 B go to dev: 500 service + 250 + size in + 50 out
 * = 900 and 1000 ns, saving 100 + 1000; 300 and 400 B match no rule; the
 * pack matches none either; get_packed_size is unsupported on pa. */
START_TEST(test_report_plan_offload_decisions_and_predictions) {
  plan p, *pp = &p;
  an_result r;
  write_single();
  load_plan(&p, "accel dev constant:ns=500 link=pcie link_rtt_ns=100 link_gbps=1\n"
                "accel pa protoacc\n"
                "offload api=pb.unpack size=-250 to dev\n"
                "offload api=pb.size to pa\n");
  run(&r, AN_BY_TYPE, &pp, 1, 1);
  const an_plan *pr = &r.plans[0];
  ck_assert_uint_eq(pr->offloaded, 2);
  ck_assert_uint_eq(pr->sw[AN_SW_NOT_SELECTED], 3);
  ck_assert_uint_eq(pr->sw[AN_SW_UNSUPPORTED], 1);
  ck_assert_uint_eq(pr->accel[0].requests, 2);
  ck_assert_uint_eq(pr->accel[0].service_ns, 1000);
  ck_assert_uint_eq(pr->accel[0].link_ns, 350 + 50 + 450 + 50);
  ck_assert_uint_eq(pr->predicted_ns, 900 + 1000);
  ck_assert_uint_eq(pr->offloaded_rec_ns, 3000);
  ck_assert_int_eq(pr->saving_sum, 1100);
  const an_group *g = group(&r, "pb.unpack app.Req");
  ck_assert_uint_eq(g->plan[0].offloaded, 2);
  ck_assert_uint_eq(g->plan[0].sw[AN_SW_NOT_SELECTED], 2);
  ck_assert_uint_eq(pr->nwhy, 1);
  ck_assert_int_eq(pr->why[0].accel, 1);
  /* one thread: Amdahl, on the trace span (no run.info) */
  ck_assert_str_eq(an_method(&r, 0), "single-thread Amdahl");
  ck_assert_uint_eq(r.wall_ns, 100000);
  ck_assert_uint_eq(an_estimate(&r, 0), 100000 - 1100);
  an_free(&r);
  plan_free(&p);
}
END_TEST

/* ---- whatif ------------------------------------------------------------------------ */

/* main: one call 1..11 us; thread 1: 20..40 and 50..70 us; thread 2:
 * 20..25 and 30..35 us; the process ends at 100 us. */
static void write_threads(void) {
  tw t;
  tw_open(&t, 200, T0);
  tw_call(&t, 0, ST_API_PB_UNPACK, 1, 1000, 10000, 10);
  tw_call(&t, 1, ST_API_PB_UNPACK, 1, 20000, 20000, 10);
  tw_call(&t, 2, ST_API_PB_UNPACK, 1, 20000, 5000, 10);
  tw_call(&t, 2, ST_API_PB_UNPACK, 1, 30000, 5000, 10);
  tw_call(&t, 1, ST_API_PB_UNPACK, 1, 50000, 20000, 10);
  tw_close(&t, 100000);
}

/* constant:ns=0 saves every call: main 10, thread 1 40, thread 2 10 us.
 * Threads 1 and 2 inherit main's 10. Ends under the plan: main 11 - 10 = 1,
 * thread 1 70 - 50 = 20, thread 2 35 - 20 = 15 us: the last call ends at 20
 * instead of 70 us, so the run saves 50 us (the naive sum says 60). */
START_TEST(test_whatif_threads_follow_the_critical_path) {
  plan p, *pp = &p;
  an_result r;
  write_threads();
  load_plan(&p, "accel a constant:ns=0\noffload to a\n");
  run(&r, AN_BY_API, &pp, 1, 4);
  ck_assert_int_eq(r.plans[0].saving_sum, 60000);
  ck_assert_int_eq(r.plans[0].saving_crit, 50000);
  ck_assert_uint_eq(an_estimate(&r, 0), 50000);
  ck_assert_uint_eq(an_estimate_naive(&r, 0), 40000);
  ck_assert_str_eq(an_method(&r, 0), "per-thread critical path");
  ck_assert_uint_eq(r.chains, 3);
  ck_assert_uint_eq(r.thread_span_ns, 10000 + 50000 + 15000);
  an_free(&r);
  plan_free(&p);
}
END_TEST

/* constant:ns=30000 makes calls slower: main -20, thread 1 -20, thread 2
 * -50 us. Critical path: thread 1 ends at 70 + 20 + 20 = 110, thread 2 at
 * 35 + 20 + 50 = 105 us: 140 us in all. CPU capacity on 1 CPU: threads were
 * busy 75 us and now need 90 us more: 165 us, which decides; on 2 CPUs
 * 82.5 us, so the critical path decides. */
START_TEST(test_whatif_cpu_capacity_bounds_the_estimate) {
  plan p, *pp = &p;
  an_result r;
  write_threads();
  load_plan(&p, "accel a constant:ns=30000\noffload to a\n");
  run(&r, AN_BY_API, &pp, 1, 1);
  ck_assert_uint_eq(an_estimate_cp(&r, 0), 140000);
  ck_assert_uint_eq(an_estimate_cpu(&r, 0), 165000);
  ck_assert_uint_eq(an_estimate(&r, 0), 165000);
  ck_assert_str_eq(an_method(&r, 0), "CPU capacity");
  ck_assert_uint_eq(an_estimate_naive(&r, 0), 190000);
  an_free(&r);
  run(&r, AN_BY_API, &pp, 1, 2);
  ck_assert_uint_eq(an_estimate_cpu(&r, 0), 82500);
  ck_assert_uint_eq(an_estimate(&r, 0), 140000);
  an_free(&r);
  plan_free(&p);
}
END_TEST

/* Two threads call at the same instant; one engine of 1 us: one of them
 * queues 1 us. Unlimited engines: no queueing. */
START_TEST(test_whatif_queueing_on_shared_engines) {
  plan p, q, *pp[2] = {&p, &q};
  an_result r;
  tw t;
  tw_open(&t, 300, T0);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 1000, 5000, 10);
  tw_call(&t, 1, ST_API_PB_PACK, 1, 1000, 5000, 10);
  tw_close(&t, 20000);
  load_plan(&p, "accel a constant:ns=1000 engines=1\noffload to a\n");
  load_plan(&q, "accel a constant:ns=1000\noffload to a\n");
  run(&r, AN_BY_API, pp, 2, 4);
  ck_assert_uint_eq(r.plans[0].accel[0].queue_ns, 1000);
  ck_assert_uint_eq(r.plans[0].predicted_ns, 3000);
  ck_assert_uint_eq(r.plans[1].accel[0].queue_ns, 0);
  ck_assert_uint_eq(group(&r, "pb.pack")->plan[0].queue_ns, 1000);
  /* the queued call ends at 3 us instead of 6: the run saves 3 us */
  ck_assert_uint_eq(an_estimate(&r, 0), 20000 - 3000);
  ck_assert_uint_eq(an_estimate(&r, 1), 20000 - 4000);
  an_free(&r);
  plan_free(&p);
  plan_free(&q);
}
END_TEST

/* Protoacc's serializer is a pipeline (HotOS'23 Figure 3's throughput): two
 * packs at one instant on one engine, each with nothing in its tree
 * (features 0): latency (5 + 0) * mem_lat 20 = 100 cycles, 50 ns at 2 GHz;
 * the engine takes the second after max(0, 5 + 0) = 5 cycles (3 ns,
 * rounded), not after 50. A get_packed_size made free (0 ns) waits for
 * nothing. */
START_TEST(test_whatif_pipelined_engine_queues_its_interval) {
  plan p, *pp = &p;
  an_result r;
  tw t;
  tw_open(&t, 300, T0);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 1000, 5000, 10);
  tw_call(&t, 1, ST_API_PB_PACK, 1, 1000, 5000, 10);
  tw_call(&t, 2, ST_API_PB_SIZE, 1, 1000, 5000, 10);
  tw_close(&t, 20000);
  load_plan(&p, "accel a protoacc:size_free=1 engines=1\noffload to a\n");
  run(&r, AN_BY_API, &pp, 1, 4);
  ck_assert_uint_eq(r.plans[0].accel[0].requests, 3);
  ck_assert_uint_eq(r.plans[0].accel[0].service_ns, 100);
  ck_assert_uint_eq(r.plans[0].accel[0].queue_ns, 3);
  ck_assert_uint_eq(r.plans[0].accel[0].busy_ns, 3 + 3); /* utilisation's share */
  ck_assert_uint_eq(group(&r, "pb.size")->plan[0].queue_ns, 0);
  an_free(&r);
  plan_free(&p);
}
END_TEST

/* A process that starts after another ended inherits its saving; one that
 * overlaps it does not. */
START_TEST(test_whatif_processes_in_sequence_add_up) {
  plan p, *pp = &p;
  an_result r;
  tw t;
  tw_open(&t, 400, T0);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 1000, 4000, 10);
  tw_close(&t, 10000);
  tw_open(&t, 401, T0 + 20000);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 21000, 6000, 10);
  tw_close(&t, 30000);
  load_plan(&p, "accel a constant:ns=0\noffload to a\n");
  run(&r, AN_BY_API, &pp, 1, 4);
  ck_assert_uint_eq(r.processes, 2);
  ck_assert_uint_eq(r.wall_ns, 30000);
  ck_assert_int_eq(r.plans[0].saving_crit, 10000);
  ck_assert_uint_eq(an_estimate(&r, 0), 20000);
  ck_assert_int_eq(r.overlap, 0);
  an_free(&r);
  teardown();
  setup();
  tw_open(&t, 500, T0);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 1000, 4000, 10);
  tw_close(&t, 30000);
  tw_open(&t, 501, T0 + 2000);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 21000, 6000, 10);
  tw_close(&t, 28000);
  run(&r, AN_BY_API, &pp, 1, 4);
  ck_assert_int_eq(r.overlap, 1);
  /* the child's last call ends at 27 - 6 = 21 us, the parent's at 1: the
   * latest end moves from 27 to 21 us */
  ck_assert_int_eq(r.plans[0].saving_crit, 6000);
  an_free(&r);
  plan_free(&p);
}
END_TEST

/* Processes share the accelerators, as in replay: the second, running at
 * the same time, queues behind the first's request (1..6 us) from 2 us to
 * 6; the third, after both ended, inherits that 4 us and queues for
 * nothing. Each process had the engine to itself: no queueing at all. */
START_TEST(test_whatif_processes_share_the_engines) {
  plan p, *pp = &p;
  an_result r;
  tw t;
  tw_open(&t, 700, T0);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 1000, 5000, 10);
  tw_close(&t, 20000);
  tw_open(&t, 701, T0 + 500);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 2000, 5000, 10);
  tw_close(&t, 20000);
  tw_open(&t, 702, T0 + 30000);
  tw_call(&t, 0, ST_API_PB_PACK, 1, 31000, 5000, 10);
  tw_close(&t, 40000);
  load_plan(&p, "accel a constant:ns=5000 engines=1\noffload to a\n");
  run(&r, AN_BY_API, &pp, 1, 4);
  ck_assert_int_eq(r.overlap, 1);
  ck_assert_uint_eq(r.plans[0].accel[0].requests, 3);
  ck_assert_uint_eq(r.plans[0].accel[0].queue_ns, 4000);
  /* the third's call ends at 31 + 4 + 5 = 40 us, recorded 36 */
  ck_assert_uint_eq(an_estimate(&r, 0), 40000 + 4000);
  an_free(&r);
  plan_free(&p);
}
END_TEST

START_TEST(test_report_groups_by_thread_and_site) {
  an_result r;
  write_threads();
  run(&r, AN_BY_THREAD, NULL, 0, 1);
  ck_assert_uint_eq(r.ngroups, 3);
  const an_group *g = group(&r, "200.0/1");
  ck_assert_uint_eq(g->ns, 40000);
  ck_assert_uint_eq(g->run_ns, 100000);
  an_free(&r);
  run(&r, AN_BY_SITE, NULL, 0, 1);
  ck_assert_uint_eq(r.ngroups, 1);
  ck_assert_uint_eq(r.groups[0].calls, 5);
  an_free(&r);
}
END_TEST

/* ---- JSON --------------------------------------------------------------------------- */

START_TEST(test_json_reads_summaries_and_rejects_bad_input) {
  json *j;
  char err[128];
  ck_assert_int_eq(
      json_parse(&j,
                 "{\"wall_ns\": 123456789, \"ok\": true, \"s\": \"a\\\"b\\u0041\", "
                 "\"accelerators\": [{\"name\": \"x\", \"queue_ns\": 5}], \"n\": null}",
                 err, sizeof err),
      0);
  ck_assert(json_num(json_get(j, "wall_ns"), 0) == 123456789.0);
  ck_assert(json_num(json_get(j, "ok"), 0) == 1);
  ck_assert_str_eq(json_get(j, "s")->str, "a\"bA");
  const json *a = json_get(j, "accelerators");
  ck_assert_int_eq(a->kind, JSON_ARR);
  ck_assert(json_num(json_get(&a->items[0], "queue_ns"), 0) == 5);
  ck_assert_ptr_null(json_get(j, "missing"));
  json_free(j);
  /* numbers as RFC 8259 has them: strtod alone took NaN, Infinity, hex,
   * a leading '+' or '.', and compare then cast them to counts */
  const char *bad[] = {"{",    "{\"a\" 1}", "[1,]",        "{\"a\": tru}", "\"open", "{} x",
                       "",     "[NaN]",     "[-Infinity]", "[0x1p24]",     "[+1]",   "[.5]",
                       "[1.]", "[1e]",      "[01]",        "[1e999]"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ck_assert_msg(json_parse(&j, bad[i], err, sizeof err) == -1, "%s parsed", bad[i]);
    ck_assert_ptr_nonnull(strstr(err, "at byte"));
  }
  ck_assert_int_eq(
      json_parse(&j, "[0, -0.5e-3, 1E+2, 12.25, 1e-999, 9007199254740993]", err, sizeof err), 0);
  uint64_t c = 7;
  ck_assert(json_num(&j->items[2], 0) == 100.0);
  ck_assert_int_eq(json_count(&j->items[0], &c), 0);
  ck_assert_uint_eq(c, 0);
  ck_assert_int_eq(json_count(&j->items[1], &c), -1); /* negative */
  ck_assert_int_eq(json_count(&j->items[3], &c), -1); /* not whole */
  ck_assert_int_eq(json_count(&j->items[5], &c), 0);
  ck_assert_uint_eq(c, 9007199254740992ull); /* as a double holds it */
  ck_assert_int_eq(json_count(NULL, &c), -1);
  json_free(j);
  ck_assert_int_eq(json_parse(&j, "[1e300]", err, sizeof err), 0);
  ck_assert_int_eq(json_count(&j->items[0], &c), -1); /* too big for a count */
  json_free(j);
}
END_TEST

/* ---- the TSC calibration cache (cli/util.c) ---------------------------- */

static int read_cache(const char *path, char *magic, char *boot, unsigned long long v[3]) {
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  int n = fscanf(f, "%31s %63s %llu %llu %llu", magic, boot, &v[0], &v[1], &v[2]);
  fclose(f);
  return n == 5 ? 0 : -1;
}

static void write_cache(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(text, f);
  fclose(f);
}

START_TEST(test_tsc_calibration_is_cached_per_boot) {
  char tdir[] = "/tmp/standin-tsc.XXXXXX", path[512], magic[32], boot[64], real_boot[64];
  ck_assert_ptr_nonnull(mkdtemp(tdir));
  snprintf(path, sizeof path, "%s/sub/dir", tdir); /* created on first use */
  setenv("STANDIN_CACHE_DIR", path, 1);
  char cpath[600];
  ck_assert_int_eq(cli_tsc_cache_path(cpath, sizeof cpath), 0);
  ck_assert_str_eq(cpath + strlen(path), "/tsc");
  uint64_t b1, m1, k1, b2, m2, k2;
  if (cli_tsc_calibrate(&b1, &m1, &k1) != 0) { /* no invariant TSC: no cache either */
    ck_assert_int_ne(access(cpath, F_OK), 0);
    return;
  }
  unsigned long long v[3], w[3];
  ck_assert_int_eq(read_cache(cpath, magic, real_boot, v), 0);
  ck_assert_uint_eq(v[2], k1);
  /* the next run measures from the cached pair: no new calibration */
  ck_assert_int_eq(cli_tsc_calibrate(&b2, &m2, &k2), 0);
  ck_assert_int_eq(read_cache(cpath, magic, boot, w), 0);
  ck_assert(w[0] == v[0] && w[1] == v[1] && w[2] == v[2]);
  ck_assert_uint_gt(b2, b1);
  ck_assert_uint_gt(m2, m1);
  ck_assert_uint_le(k2 > k1 ? k2 - k1 : k1 - k2, k1 / 1000);
  /* another boot, a rate 1% off, or garbage: calibrated afresh, rewritten */
  char text[256];
  const char *bad[3];
  snprintf(text, sizeof text, "standin-tsc-1 another-boot %llu %llu %llu\n", v[0], v[1], v[2]);
  bad[0] = text;
  char off[256];
  snprintf(off, sizeof off, "standin-tsc-1 %s 1 1 %llu\n", real_boot, v[2] + v[2] / 100);
  bad[1] = off;
  bad[2] = "not a cache\n";
  for (int i = 0; i < 3; i++) {
    write_cache(cpath, bad[i]);
    uint64_t b, m, k;
    ck_assert_int_eq(cli_tsc_calibrate(&b, &m, &k), 0);
    ck_assert_int_eq(read_cache(cpath, magic, boot, w), 0);
    ck_assert_str_eq(boot, real_boot);
    ck_assert_uint_eq(w[2], k);
    ck_assert_uint_le(k > k1 ? k - k1 : k1 - k, k1 / 1000);
  }
  /* a cache that cannot be written costs only the calibration */
  snprintf(path, sizeof path, "%s/sub/dir/tsc/x", tdir); /* under a file */
  setenv("STANDIN_CACHE_DIR", path, 1);
  ck_assert_int_eq(cli_tsc_calibrate(&b2, &m2, &k2), 0);
  ck_assert_uint_le(k2 > k1 ? k2 - k1 : k1 - k2, k1 / 1000);
  unsetenv("STANDIN_CACHE_DIR");
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tdir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* C++ call-site symbols read as report shows them: the name without its
 * parameters, whatever brackets the name itself holds. */
START_TEST(test_demangle_keeps_the_name_without_parameters) {
  static const char *const cases[][2] = {
      {"_ZN15SplashOutputDev9drawImageEP8GfxStateP6ObjectP6StreamiiP16GfxImageColorMapbPKib",
       "SplashOutputDev::drawImage"},
      {"_ZN3FooclEi", "Foo::operator()"},
      {"_ZlsRSoRK3Foo", "operator<<"},
      {"_ZN3FooltERKS_", "Foo::operator<"},
      {"_ZN3FooptEv", "Foo::operator->"},
      {"_ZN3BarIiE3runEv", "Bar<int>::run"},
      {"_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo"},
      {"_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()"},
      {"_ZZ3fooiENKUlvE_clEv", "foo(int)::{lambda()#1}::operator()"},
      {"_ZN3Foo3barEv.cold", "Foo::bar"},
  };
  char out[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ck_assert_msg(cli_demangle(cases[i][0], out, sizeof out), "%s did not demangle", cases[i][0]);
    ck_assert_str_eq(out, cases[i][1]);
  }
  /* not C++, or not a valid name: left alone */
  ck_assert_int_eq(cli_demangle("handle_request", out, sizeof out), 0);
  ck_assert_str_eq(out, "");
  ck_assert_int_eq(cli_demangle("_Zzzz", out, sizeof out), 0);
  ck_assert_int_eq(cli_demangle("", out, sizeof out), 0);
  /* a small buffer truncates, never overflows */
  char small[8];
  ck_assert(cli_demangle("_ZN3BarIiE3runEv", small, sizeof small));
  ck_assert_str_eq(small, "Bar<int");
}
END_TEST

/* The replay database's string arena keeps one copy of each string, across
 * the growths of its set (which reuse the kept hashes), and gives back the
 * offset of the first copy for every later one. */
START_TEST(test_arena_stores_each_string_once_across_growth) {
  rdb_arena a = {0};
  enum { N = 5000 };
  static uint64_t off[N];
  char s[64];
  for (int i = 0; i < N; i++) {
    int n = snprintf(s, sizeof s, "string %d %.*s", i, i % 40,
                     "........................................");
    off[i] = rdb_arena_put(&a, s, (uint64_t)n);
    ck_assert_uint_ne(off[i], 0);
    ck_assert_uint_eq((off[i] - 1) % 8, 0);
  }
  uint64_t len = a.len;
  ck_assert_uint_eq(a.nset, N);
  ck_assert_uint_ge(a.set_mask + 1, 2 * N); /* it grew */
  for (int i = N - 1; i >= 0; i--) {
    int n = snprintf(s, sizeof s, "string %d %.*s", i, i % 40,
                     "........................................");
    ck_assert_uint_eq(rdb_arena_put(&a, s, (uint64_t)n), off[i]);
    ck_assert_mem_eq(rdb_arena_at(&a, off[i]), s, (size_t)n);
  }
  ck_assert_uint_eq(a.len, len); /* nothing stored twice */
  /* the same bytes at another length are another string */
  uint64_t o = rdb_arena_put(&a, "string 1", 7);
  ck_assert_uint_ne(o, off[1]);
  ck_assert_uint_eq(rdb_arena_put(&a, "string 1", 7), o);
  ck_assert_uint_ne(rdb_arena_put(&a, NULL, 0), 0);
  rdb_arena_free(&a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("analysis");
  TCase *t = tcase_create("core");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_hist_small_values_are_exact);
  tcase_add_test(t, test_hist_quantiles_within_stated_error);
  tcase_add_test(t, test_hist_huge_values_share_the_last_bucket);
  tcase_add_test(t, test_merge_restores_start_order_across_streams);
  tcase_add_test(t, test_merge_lag_bounds_the_wait_and_counts_late_items);
  tcase_add_test(t, test_merge_memory_cap_hands_items_on);
  tcase_add_test(t, test_engines_queue_and_fill_gaps);
  tcase_add_test(t, test_engines_late_booking_finds_its_gap);
  tcase_add_test(t, test_plan_decide_outcomes_and_link_cost);
  tcase_add_test(t, test_plan_keeps_recorded_page_faults);
  tcase_add_test(t, test_plan_keeps_recorded_decode_faults);
  tcase_add_test(t, test_plan_keeps_recorded_source_time);
  tcase_add_test(t, test_plan_save_and_variants);
  tcase_add_test(t, test_report_counts_times_shares_and_percentiles);
  tcase_add_test(t, test_report_plan_offload_decisions_and_predictions);
  tcase_add_test(t, test_whatif_threads_follow_the_critical_path);
  tcase_add_test(t, test_whatif_cpu_capacity_bounds_the_estimate);
  tcase_add_test(t, test_whatif_queueing_on_shared_engines);
  tcase_add_test(t, test_whatif_pipelined_engine_queues_its_interval);
  tcase_add_test(t, test_whatif_processes_in_sequence_add_up);
  tcase_add_test(t, test_whatif_processes_share_the_engines);
  tcase_add_test(t, test_report_groups_by_thread_and_site);
  tcase_add_test(t, test_json_reads_summaries_and_rejects_bad_input);
  tcase_add_test(t, test_tsc_calibration_is_cached_per_boot);
  tcase_add_test(t, test_demangle_keeps_the_name_without_parameters);
  tcase_add_test(t, test_arena_stores_each_string_once_across_growth);
  tcase_add_test(t, test_replaydb_request_answered_two_ways_answers_none);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}

/* test_models.c — built-in performance interfaces and links against values
 * computed by hand from the published formulas (interfaces/m_*.c). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iface.h"
#include "iface_link.h"
#include "trace.h"

static if_model *model(const char *spec) {
  if_model *m = NULL;
  char err[256] = "";
  int rc = if_model_parse(&m, spec, err, sizeof err);
  ck_assert_msg(rc == IF_OK, "%s: %s", spec, err);
  return m;
}

static int predict(const char *spec, standin_request *r, uint64_t *ns) {
  if_model *m = model(spec);
  int rc = if_model_predict(m, r, ns);
  if_model_free(m);
  return rc;
}

static const uint8_t zero_fp[16];

static standin_request pb_req(uint32_t api, uint64_t *feat) {
  standin_request r = {.api = api, .nfeat = 7, .feat = feat, .type = "t.M", .fp = zero_fp};
  return r;
}

/* A file dlopen refuses is described by what it is: dlopen said "No such
 * file or directory" of a plugin built for another machine and "file too
 * short" of a text file. */
START_TEST(test_plugin_file_that_cannot_load_is_described) {
  char dir[] = "/tmp/test_models.XXXXXX", path[128], err[1024], cwd[4096];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
  ck_assert_int_eq(chdir(dir), 0);
  if_model *m = NULL;
  FILE *f = fopen("text.so", "w");
  fputs("not a plugin, but long enough to hold an ELF header's worth of bytes\n", f);
  fclose(f);
  ck_assert_int_eq(if_model_parse(&m, "text.so", err, sizeof err), IF_E_PLUGIN);
  ck_assert_msg(strstr(err, "./text.so: it is not a shared object (no ELF header)"), "%s", err);
  /* a 64-bit ELF header of an s390 object */
  unsigned char h[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  h[16] = 3;  /* ET_DYN */
  h[18] = 22; /* EM_S390 */
  f = fopen("s390.so", "wb");
  fwrite(h, 1, sizeof h, f);
  fclose(f);
  ck_assert_int_eq(if_model_parse(&m, "./s390.so", err, sizeof err), IF_E_PLUGIN);
  ck_assert_msg(strstr(err, "it is built for another machine (64-bit, ELF machine 22)"), "%s", err);
  ck_assert_int_eq(mkdir("dir.so", 0700), 0);
  ck_assert_int_eq(if_model_parse(&m, "dir.so", err, sizeof err), IF_E_PLUGIN);
  ck_assert_msg(strstr(err, "./dir.so: it is a directory"), "%s", err);
  ck_assert_int_eq(if_model_parse(&m, "gone.so", err, sizeof err), IF_E_PLUGIN);
  snprintf(path, sizeof path, "taken from the directory standin runs in, %s)", dir);
  ck_assert_msg(strstr(err, path), "%s", err);
  ck_assert_ptr_null(m);
  unlink("text.so");
  unlink("s390.so");
  rmdir("dir.so");
  ck_assert_int_eq(chdir(cwd), 0);
  rmdir(dir);
}
END_TEST

/* compare told a replay of "protoacc:clock_mhz=2000" its times were another
 * model's than "protoacc": the same model, defaults and order aside */
START_TEST(test_spec_same) {
  ck_assert(if_spec_same("protoacc", "protoacc:clock_mhz=2000"));
  ck_assert(if_spec_same("protoacc:mem_lat=20,clock_mhz=2000.0", "protoacc:clock_mhz=2e3"));
  ck_assert(if_spec_same("scale:factor=0.25", "scale:factor=.25"));
  ck_assert(!if_spec_same("protoacc", "protoacc:clock_mhz=1000"));
  ck_assert(!if_spec_same("protoacc:bound=mid", "protoacc:bound=low"));
  ck_assert(!if_spec_same("protoacc", "protoacc-lpn"));
  ck_assert(!if_spec_same("./m.so:a=1", "./m.so:a=1,b=2"));
  ck_assert(if_spec_same("./m.so:b=2,a=1", "./m.so:a=1,b=2"));
  ck_assert(!if_spec_same("constant:ns", "constant"));
}
END_TEST

START_TEST(test_model_generic_models) {
  uint64_t f[7] = {0}, ns;
  standin_request r = pb_req(STANDIN_API_PB_PACK, f);
  r.recorded_ns = 1000;
  r.req_len = 100;
  r.resp_len = 300;
  ck_assert_int_eq(predict("software", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 1000);
  ck_assert_int_eq(predict("scale:factor=0.25", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 250);
  ck_assert_int_eq(predict("constant:ns=77", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 77);
  ck_assert_int_eq(predict("linear:base_ns=10,ns_per_byte=0.5", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 210);
}
END_TEST

/* Which models' times were measured on a machine (a replay owes the stops
 * that machine makes it past their deadlines: rp.c owe_stopped), and
 * which are modelled. */
static int measured(const char *spec) {
  if_model *m = model(spec);
  int r = if_model_time_measured(m);
  if_model_free(m);
  return r;
}

START_TEST(test_model_time_measured_or_modelled) {
  ck_assert(measured("software"));
  ck_assert(measured("scale:factor=0.5"));
  ck_assert(!measured("constant:ns=5"));
  ck_assert(!measured("linear:base_ns=10,ns_per_byte=0.5"));
  ck_assert(!measured("protoacc"));
  ck_assert(!measured("jpeg-core"));
}
END_TEST

/* fields 10, payload 100 B, 2 sub-messages, 3 bitmap words, mem_lat 20:
 * num_writes = 10 + ceil(100/16) = 17, lower = (5+17)*20 = 440 cycles,
 * tree = 2*(6+40) + (4+20)*3 = 164, upper = 604, mid = 522; at 2 GHz.
 * Its initiation interval (Figure 3's throughput) is max(tree, 5 +
 * num_writes) = 164 cycles: an engine takes the next pack after 82 ns. */
START_TEST(test_model_protoacc_serializer_bounds) {
  uint64_t f[7] = {200, 10, 2, 3, 0, 100, 3}, ns;
  standin_request r = pb_req(STANDIN_API_PB_PACK, f);
  ck_assert_int_eq(predict("protoacc:bound=lower", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 220);
  ck_assert_int_eq(predict("protoacc:bound=upper", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 302);
  ck_assert_int_eq(predict("protoacc", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 261);
  ck_assert_uint_eq(if_model_busy(), 82);
  ck_assert_int_eq(predict("protoacc:bound=lower,clock_mhz=1000,mem_lat=10", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, (5 + 17) * 10); /* cycles = ns at 1 GHz */
  /* tree = 2*(6+20) + (4+10)*3 = 94 cycles */
  ck_assert_uint_eq(if_model_busy(), 94);
  /* 1,000 elements of repeated fields are 1,000 writes more: (5+1017)*20
   * + 164/2 = 20,522 cycles (a packed array cost nothing: 360 GB/s) */
  f[4] = 1000;
  ck_assert_int_eq(predict("protoacc", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 10261);
  ck_assert_uint_eq(if_model_busy(), 511); /* 5 + 1,017 writes: 1,022 cycles */
  /* an interval longer than the latency is the latency: a tree of many
   * empty sub-messages, little to write */
  uint64_t g[7] = {200, 1, 100, 100, 0, 0, 100};
  r.feat = g;
  ck_assert_int_eq(predict("protoacc:bound=lower", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, (5 + 1) * 20 / 2);
  ck_assert_uint_eq(if_model_busy(), ns);
}
END_TEST

/* deserializer: tree 164 + 6 + 2*20 + 10*4 + 100/16 = 256.25 cycles */
START_TEST(test_model_protoacc_deserializer_and_size) {
  uint64_t f[7] = {200, 10, 2, 3, 0, 100, 3}, ns;
  standin_request r = pb_req(STANDIN_API_PB_UNPACK, f);
  ck_assert_int_eq(predict("protoacc", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 128);
  ck_assert_uint_eq(if_model_busy(), 128); /* no published throughput: all of it */
  r.api = STANDIN_API_PB_SIZE;
  ck_assert_int_eq(predict("protoacc", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "get_packed_size"));
  ck_assert_int_eq(predict("protoacc:size_free=1", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 0);
  /* and 1,000 elements, 4 cycles each: 256.25 + 4,000 cycles */
  f[4] = 1000;
  r.api = STANDIN_API_PB_UNPACK;
  ck_assert_int_eq(predict("protoacc", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 2128);
}
END_TEST

START_TEST(test_model_protoacc_lpn_and_optimus) {
  uint64_t f[7] = {1000, 10, 0, 1, 0, 100, 1}, ns;
  standin_request r = pb_req(STANDIN_API_PB_PACK, f);
  ck_assert_int_eq(predict("protoacc-lpn", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 450); /* max(900, 6.3) cycles at 2 GHz */
  f[5] = 100000;
  ck_assert_int_eq(predict("protoacc-lpn", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 3150); /* 0.063 * 100000 = 6300 cycles */
  ck_assert_int_eq(predict("optimus-prime", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 621); /* 50 + 1000 * 8 / 14 */
  ck_assert_int_eq(predict("optimus-prime:max_bytes=500", &r, &ns), IF_UNSUPPORTED);
}
END_TEST

static standin_request jpeg_req(uint64_t *f) {
  standin_request r = {.api = STANDIN_API_JPEG_DECODE, .nfeat = 11, .feat = f, .type = "",
                       .fp = zero_fp};
  return r;
}

/* 800x450 4:2:0, 50,000 B in, RGB out: blocks 5625, 5625*137 = 770,625
 * cycles (the entropy term, 882.6, is smaller); at 75 MHz 10.275 ms — the
 * "about 10 ms" of ACCELERATORS.md. */
START_TEST(test_model_jpeg_core_baseline) {
  uint64_t f[11] = {50000, 800, 450, 3, 4, 0, 0, 360000, 1080000, 1, 1}, ns;
  standin_request r = jpeg_req(f);
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 10275000);
  ck_assert_int_eq(predict("jpeg-core:clock_mhz=2000", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 385313); /* 770625 / 2 GHz */
  f[4] = 1;                       /* grey: 66 cycles per block */
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 4950000);
  /* a per-block cost of 0 leaves the entropy term (it was refused, with
   * the generic reason, as if the subsampling were unsupported). Grey out,
   * 360,000 B: rate 7.2, 5625 / 64 * (5 / 7.2 * 3 + 6) * 1.5 = 1065.7
   * cycles, at 75 MHz 14,209 ns */
  f[8] = 360000;
  ck_assert_int_eq(predict("jpeg-core:cpb_gray=0", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 14209);
  /* 4:2:0, RGB out: rate 21.6, 882.6 cycles, 11,768 ns */
  f[4] = 4;
  f[8] = 1080000;
  ck_assert_int_eq(predict("jpeg-core:cpb_420=0", &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 11768);
}
END_TEST

START_TEST(test_model_jpeg_core_unsupported) {
  uint64_t f[11] = {50000, 800, 450, 3, 4, 0, 0, 360000, 1080000, 1, 1}, ns;
  standin_request r = jpeg_req(f);
  f[5] = 1;
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "progressive"));
  f[5] = 0;
  f[6] = 4;
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "restart"));
  f[6] = 0;
  f[4] = 3;
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "4:2:2"));
  f[4] = 4;
  f[9] = 1;
  f[10] = 2;
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "scaled"));
  /* CMYK: four components, all 1x1, which its sampling calls 4:4:4 */
  f[9] = f[10] = 1;
  f[3] = 4;
  f[4] = 2;
  ck_assert_int_eq(predict("jpeg-core", &r, &ns), IF_UNSUPPORTED);
  ck_assert_ptr_nonnull(strstr(if_model_why(), "CMYK"));
  ck_assert_int_eq(predict("jpeg-lpn", &r, &ns), IF_UNSUPPORTED);
}
END_TEST

START_TEST(test_model_spec_errors_name_the_bad_part) {
  if_model *m = NULL;
  char err[256];
  ck_assert_int_eq(if_model_parse(&m, "warp", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "unknown model 'warp'"));
  ck_assert_int_eq(if_model_parse(&m, "scale:factr=2", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "no parameter 'factr'"));
  ck_assert_int_eq(if_model_parse(&m, "constant:ns=-4", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "ns=-4"));
  ck_assert_int_eq(if_model_parse(&m, "protoacc:bound=middle", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(
      strstr(err, "bound=middle is not lower, upper, mid or a number from 0 to 1"));
  ck_assert_int_eq(if_model_parse(&m, "protoacc:bound=1.5", err, sizeof err), IF_E_SPEC);
  /* a clock of 0 MHz is refused by every model that has one (protoacc and
   * protoacc-lpn predicted 0 ns for every call) */
  static const char *const clocked[] = {"protoacc", "protoacc-lpn", "jpeg-core", "jpeg-lpn"};
  for (size_t i = 0; i < sizeof clocked / sizeof clocked[0]; i++) {
    char spec[64];
    snprintf(spec, sizeof spec, "%s:clock_mhz=0", clocked[i]);
    ck_assert_int_eq(if_model_parse(&m, spec, err, sizeof err), IF_E_SPEC);
    ck_assert_msg(strstr(err, "clock_mhz must be above 0"), "%s: %s", spec, err);
    /* nor one so fast every prediction is 0 ns */
    snprintf(spec, sizeof spec, "%s:clock_mhz=1e300", clocked[i]);
    ck_assert_int_eq(if_model_parse(&m, spec, err, sizeof err), IF_E_SPEC);
    ck_assert_msg(strstr(err, "clock_mhz=1e300 is above 1000000 (1 THz)"), "%s: %s", spec, err);
    snprintf(spec, sizeof spec, "%s:clock_mhz=1000000", clocked[i]);
    ck_assert_int_eq(if_model_parse(&m, spec, err, sizeof err), IF_OK);
    if_model_free(m);
    m = NULL;
  }
  ck_assert_int_eq(if_model_parse(&m, "constant:ns=1e300", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "ns=1e300 is above 1e+12"));
  ck_assert_int_eq(if_model_parse(&m, "scale:factor=2e12", err, sizeof err), IF_E_SPEC);
  ck_assert_int_eq(if_model_parse(&m, "./no-such-model.so", err, sizeof err), IF_E_PLUGIN);
  ck_assert_ptr_nonnull(strstr(err, "cannot load plugin ./no-such-model.so"));
  ck_assert_int_eq(if_model_parse(&m, "table", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "trace=DIR"));
  ck_assert_ptr_null(m);
  /* the last of two values won, without a word */
  ck_assert_int_eq(if_model_parse(&m, "constant:ns=1,ns=2", err, sizeof err), IF_E_SPEC);
  ck_assert_ptr_nonnull(strstr(err, "ns= is given twice"));
}
END_TEST

/* PCIe: in = 2.5 round trips + request at 15.75 GB/s, out = 0.5 + response */
START_TEST(test_link_costs) {
  if_link l;
  uint64_t in, out;
  char err[128];
  if_link_init(&l, IF_LINK_PCIE);
  if_link_cost(&l, 1000, 2000, &in, &out);
  ck_assert_uint_eq(in, 1958);
  ck_assert_uint_eq(out, 506);
  if_link_init(&l, IF_LINK_NONE);
  ck_assert_int_eq(if_link_set(&l, "link", "onchip", err, sizeof err), 1);
  ck_assert_int_eq(if_link_set(&l, "link_onchip_ns", "30", err, sizeof err), 1);
  if_link_cost(&l, 1000, 2000, &in, &out);
  ck_assert_uint_eq(in + out, 30);
  ck_assert_int_eq(if_link_check(&l, err, sizeof err), 0);
  ck_assert_int_eq(if_link_set(&l, "link", "warp", err, sizeof err), -1);
  /* a setting for another kind of link did nothing, silently: refused;
   * and one given before link= is kept (link= reset it) */
  if_link_init(&l, IF_LINK_NONE);
  ck_assert_int_eq(if_link_set(&l, "link_rtt_ns", "5000", err, sizeof err), 1);
  ck_assert_int_eq(if_link_check(&l, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "give link=pcie too"));
  ck_assert_int_eq(if_link_set(&l, "link", "pcie", err, sizeof err), 1);
  ck_assert_int_eq(if_link_check(&l, err, sizeof err), 0);
  if_link_cost(&l, 0, 0, &in, &out);
  ck_assert_uint_eq(in + out, 3 * 5000);
  ck_assert_int_eq(if_link_set(&l, "link_onchip_ns", "9", err, sizeof err), 1);
  ck_assert_int_eq(if_link_check(&l, err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "give link=onchip too"));
  ck_assert_int_eq(if_link_set(&l, "engines", "2", err, sizeof err), 0);
  /* 4.29 s at most each way (IF_MAX_LINK_NS, replay's 32 bits): a setting
   * past it is refused, and a call whose bytes would take longer is not
   * taken; llround never sees more */
  if_link_init(&l, IF_LINK_PCIE);
  ck_assert_int_eq(if_link_set(&l, "link_rtt_ns", "4294967296", err, sizeof err), -1);
  ck_assert_ptr_nonnull(strstr(err, "more than 4.29 s"));
  ck_assert_int_eq(if_link_set(&l, "link_rtt_ns", "1e9", err, sizeof err), 1);
  ck_assert_int_eq(if_link_cost(&l, 0, 0, &in, &out), 0); /* 2.5e9 in, 0.5e9 out */
  ck_assert_uint_eq(in, 2500000000u);
  ck_assert_int_eq(if_link_set(&l, "link_rtt_ns", "2e9", err, sizeof err), 1);
  ck_assert_int_eq(if_link_cost(&l, 0, 0, &in, &out), -1); /* 5e9 in */
  ck_assert_int_eq(if_link_set(&l, "link_rtt_ns", "0", err, sizeof err), 1);
  ck_assert_int_eq(if_link_set(&l, "link_gbps", "1e-300", err, sizeof err), 1);
  ck_assert_int_eq(if_link_cost(&l, 1000, 0, &in, &out), -1);
  ck_assert_uint_eq(in + out, 0);
  ck_assert_int_eq(if_link_cost(&l, 0, 0, &in, &out), 0);
}
END_TEST

/* table: the same request's latencies in another recording, occurrence by
 * occurrence, then their median; a new pass starts from the first again */
START_TEST(test_model_table_takes_occurrences_then_median) {
  char dir[] = "/tmp/standin-table-XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128], spec[160], cmd[256];
  snprintf(path, sizeof path, "%s/1.trace", dir);
  st_header h = {.pid = 1, .clock = "CLOCK_MONOTONIC", .host = "h", .exe = "e",
                 .tool_version = "t"};
  st_writer *w;
  ck_assert_int_eq(st_writer_open(&w, path, &h), ST_OK);
  uint64_t lat[] = {300, 100, 200};
  for (int i = 0; i < 3; i++) {
    st_call c = {.api = ST_API_PB_UNPACK, .latency_ns = lat[i], .seq = (uint64_t)i};
    c.fp[0] = 7;
    ck_assert_int_eq(st_writer_add_call(w, &c), ST_OK);
  }
  ck_assert_int_eq(st_writer_close(w), ST_OK);
  snprintf(spec, sizeof spec, "table:trace=%s", dir);
  uint8_t fp[16] = {7};
  uint64_t f[7] = {0}, ns;
  standin_request r = pb_req(STANDIN_API_PB_UNPACK, f);
  r.fp = fp;
  if_model *m = model(spec);
  ck_assert(if_model_time_measured(m)); /* a recording's times */
  uint64_t want[] = {300, 100, 200, 200, 200};
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < 5; k++) {
      ck_assert_int_eq(if_model_predict(m, &r, &ns), IF_OK);
      ck_assert_uint_eq(ns, want[k]);
    }
    if_model_reset(m);
  }
  fp[0] = 8;
  ck_assert_int_eq(if_model_predict(m, &r, &ns), IF_UNSUPPORTED);
  fp[0] = 7; /* a miss does not count as an occurrence */
  ck_assert_int_eq(if_model_predict(m, &r, &ns), IF_OK);
  ck_assert_uint_eq(ns, 300);
  if_model_free(m);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("models");
  TCase *tc = tcase_create("models");
  tcase_add_test(tc, test_model_generic_models);
  tcase_add_test(tc, test_model_time_measured_or_modelled);
  tcase_add_test(tc, test_model_protoacc_serializer_bounds);
  tcase_add_test(tc, test_model_protoacc_deserializer_and_size);
  tcase_add_test(tc, test_model_protoacc_lpn_and_optimus);
  tcase_add_test(tc, test_model_jpeg_core_baseline);
  tcase_add_test(tc, test_model_jpeg_core_unsupported);
  tcase_add_test(tc, test_model_spec_errors_name_the_bad_part);
  tcase_add_test(tc, test_link_costs);
  tcase_add_test(tc, test_model_table_takes_occurrences_then_median);
  tcase_add_test(tc, test_spec_same);
  tcase_add_test(tc, test_plugin_file_that_cannot_load_is_described);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}

/* m_table.c — table:trace=DIR: service times measured elsewhere.
 *
 * Another recording (a real device's, another implementation's, the same
 * program with other settings) becomes a performance interface: a request
 * is looked up by fingerprint in that recording and served in the latency
 * of its occurrence there (the k-th takes the k-th; then the median). A request that recording does not hold
 * is unsupported: it stays in software and the replay summary counts it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin.h"
#include "trace.h"

typedef struct {
  uint8_t fp[16];
  uint64_t *ns;  /* in the recording's order */
  uint64_t *med; /* sorted, for the median */
  uint32_t n, cap;
  uint32_t next;     /* occurrences predicted since ifb_table_reset */
  uint64_t cold_sum; /* out_cold_permille of its calls, summed */
} tab_entry;

typedef struct {
  tab_entry *e;
  size_t n, cap;
  uint32_t *slot; /* index + 1 */
  size_t nslot;
} table;

static uint64_t fp_hash(const uint8_t *fp) {
  uint64_t h;
  memcpy(&h, fp, 8);
  return h;
}

static int grow_slots(table *t) {
  size_t ns = t->nslot ? t->nslot * 2 : 1024;
  uint32_t *s = calloc(ns, sizeof *s);
  if (!s)
    return -1;
  for (size_t i = 0; i < t->n; i++) {
    size_t j = fp_hash(t->e[i].fp) & (ns - 1);
    while (s[j])
      j = (j + 1) & (ns - 1);
    s[j] = (uint32_t)i + 1;
  }
  free(t->slot);
  t->slot = s;
  t->nslot = ns;
  return 0;
}

static tab_entry *find(const table *t, const uint8_t *fp) {
  if (!t->nslot)
    return NULL;
  for (size_t j = fp_hash(fp) & (t->nslot - 1); t->slot[j]; j = (j + 1) & (t->nslot - 1))
    if (!memcmp(t->e[t->slot[j] - 1].fp, fp, 16))
      return &t->e[t->slot[j] - 1];
  return NULL;
}

static int add(table *t, const uint8_t *fp, uint64_t ns, uint64_t cold) {
  tab_entry *e = find(t, fp);
  if (!e) {
    if ((t->n + 1) * 2 > t->nslot && grow_slots(t) != 0)
      return -1;
    if (t->n == t->cap) {
      size_t cap = t->cap ? t->cap * 2 : 256;
      tab_entry *ne = realloc(t->e, cap * sizeof *ne);
      if (!ne)
        return -1;
      t->e = ne;
      t->cap = cap;
    }
    e = &t->e[t->n];
    memset(e, 0, sizeof *e);
    memcpy(e->fp, fp, 16);
    size_t j = fp_hash(fp) & (t->nslot - 1);
    while (t->slot[j])
      j = (j + 1) & (t->nslot - 1);
    t->slot[j] = (uint32_t)++t->n;
  }
  if (e->n == e->cap) {
    uint32_t cap = e->cap ? e->cap * 2 : 4;
    uint64_t *nn = realloc(e->ns, cap * sizeof *nn);
    if (!nn)
      return -1;
    e->ns = nn;
    e->cap = cap;
  }
  e->ns[e->n++] = ns;
  e->cold_sum += cold > 1000 ? 1000 : cold;
  return 0;
}

static int load_file(table *t, const char *path, char *err, size_t cap) {
  st_reader *r;
  int rc = st_reader_open(&r, path);
  if (rc != ST_OK) {
    snprintf(err, cap, "model table: %s: %s", path,
             rc == ST_E_IO ? strerror(errno) : st_strerror(rc));
    return -1;
  }
  st_record rec;
  while ((rc = st_reader_next(r, &rec)) == ST_OK)
    if (rec.kind == ST_REC_CALL &&
        add(t, rec.u.call.fp, rec.u.call.latency_ns,
            st_api_family(rec.u.call.api) == ST_FAMILY_JPEG && rec.u.call.nfeat > ST_JPF_OUT_COLD
                ? rec.u.call.feat[ST_JPF_OUT_COLD]
                : 0) != 0) {
      snprintf(err, cap, "model table: out of memory reading %s", path);
      st_reader_close(r);
      return -1;
    }
  st_reader_close(r);
  return 0; /* a damaged tail still leaves the calls before it usable */
}

static int load_dir(table *t, const char *dir, char *err, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) {
    snprintf(err, cap, "model table: cannot open trace directory %s: %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *de;
  int files = 0, rc = 0;
  while (rc == 0 && (de = readdir(d)) != NULL) {
    size_t l = strlen(de->d_name);
    if (l < 7 || strcmp(de->d_name + l - 6, ".trace"))
      continue;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= sizeof path) {
      snprintf(err, cap, "model table: the path of %s in %.40s... is longer than PATH_MAX",
               de->d_name, dir);
      rc = -1;
      break;
    }
    rc = load_file(t, path, err, cap);
    files++;
  }
  closedir(d);
  if (rc == 0 && files == 0) {
    snprintf(err, cap, "model table: %s holds no trace file", dir);
    rc = -1;
  }
  return rc;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void table_free(void *inst) {
  table *t = inst;
  if (!t)
    return;
  for (size_t i = 0; i < t->n; i++) {
    free(t->e[i].ns);
    free(t->e[i].med);
  }
  free(t->e);
  free(t->slot);
  free(t);
}

static void *table_create(int n, const char *const *k, const char *const *v, char *err,
                          size_t cap) {
  const char *dir = NULL;
  for (int i = 0; i < n; i++) {
    if (strcmp(k[i], "trace")) {
      snprintf(err, cap, "model table has no parameter '%s' (it takes: trace)", k[i]);
      return NULL;
    }
    dir = v[i];
  }
  if (!dir || !*dir) {
    snprintf(err, cap, "model table needs trace=DIR, the recording to take service times from");
    return NULL;
  }
  table *t = calloc(1, sizeof *t);
  if (!t || load_dir(t, dir, err, cap) != 0) {
    table_free(t);
    return NULL;
  }
  for (size_t i = 0; i < t->n; i++) { /* medians are read per request */
    tab_entry *e = &t->e[i];
    e->med = malloc(e->n * sizeof *e->med);
    if (!e->med) {
      snprintf(err, cap, "model table: out of memory");
      table_free(t);
      return NULL;
    }
    memcpy(e->med, e->ns, e->n * sizeof *e->med);
    qsort(e->med, e->n, sizeof *e->med, cmp_u64);
  }
  return t;
}

/* The k-th occurrence of a request (since the last ifb_table_reset) takes
 * the k-th latency the table's recording has for it, as replay matches
 * occurrences: the first decode of an image, cold, against the first. Past
 * those, the median. (A median for every occurrence overstated thumbnailer's
 * four passes by 3%: the upper middle of four samples.) */
static int table_predict(void *inst, const standin_request *r, uint64_t *ns) {
  tab_entry *e = find(inst, r->fp);
  if (!e) {
    ifb_unsupported("request not in the table's recording");
    return STANDIN_UNSUPPORTED;
  }
  uint32_t k = e->next;
  e->next = k + (k < UINT32_MAX);
  *ns = k < e->n ? e->ns[k] : e->med[e->n / 2];
  return STANDIN_SUPPORTED;
}

void ifb_table_reset(void *inst) {
  table *t = inst;
  for (size_t i = 0; i < t->n; i++)
    t->e[i].next = 0;
}

int ifb_table_out_cold(void *inst, const standin_request *r) {
  const tab_entry *e = find(inst, r->fp);
  return e && e->n ? (int)(e->cold_sum / e->n) : 0;
}

const standin_iface ifb_table = {
    STANDIN_IFACE_ABI, "table", "trace=DIR",
    "latency of the same request (by fingerprint) in another recording: the k-th occurrence "
    "its k-th, then the median",
    table_create,
    table_predict, table_free};

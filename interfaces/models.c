/* models.c — the model registry: parsing specs, loading plugins, and the
 * parameter helpers shared by the built-in models. Built-ins implement the
 * same standin_iface structure as plugins, so both are used the same way. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builtin.h"
#include "iface.h"
#include "trace.h"

#define MAX_KV 32
#define WHY_PER_MODEL 256 /* a plugin's reasons kept apart (plugin_why) */

static const standin_iface *const builtins[] = {
    &ifb_software,      &ifb_scale,         &ifb_constant,  &ifb_linear,    &ifb_table,
    &ifb_protoacc,      &ifb_protoacc_lpn,  &ifb_optimus_prime, &ifb_jpeg_core,
    &ifb_jpeg_lpn,
};
#define NBUILTIN (sizeof builtins / sizeof builtins[0])

struct if_model {
  const standin_iface *iface;
  void *inst;
  void *dl; /* plugin handle, NULL for built-ins */
  const char *(*why)(int code); /* a plugin's standin_iface_why, if it has one */
  /* a plugin's standin_iface_interval, if it has one */
  uint64_t (*interval)(void *inst, const standin_request *r, uint64_t service_ns);
  const char *why_last;         /* its last reason, interned (plugin_why) */
  char *why_raw;                /* and as the plugin gave it */
  const char **whys;            /* the texts it gave, interned: WHY_PER_MODEL */
  int nwhy;
  char *desc;    /* the spec */
  uint8_t *copy; /* a plugin's copy of the request (plugin_view) */
  size_t copy_cap;
};

static __thread const char *why_unsupported;
static __thread uint64_t busy_last; /* UINT64_MAX: the whole service time */

void ifb_unsupported(const char *why) {
  why_unsupported = why;
}

void ifb_interval(uint64_t ns) {
  busy_last = ns;
}

uint64_t if_model_busy(void) {
  return busy_last;
}

const char *if_model_why(void) {
  return why_unsupported ? why_unsupported : "the model does not support this request";
}

/* ---- numeric parameters --------------------------------------------------- */

int ifb_parse(const char *model, const ifb_param *defs, double *out, int n,
              const char *const *keys, const char *const *values, char *err, size_t errcap) {
  int nd = 0;
  while (nd < IFB_MAX_PARAMS && defs[nd].key) {
    out[nd] = defs[nd].def;
    nd++;
  }
  for (int i = 0; i < n; i++) {
    int k = 0;
    while (k < nd && strcmp(defs[k].key, keys[i]))
      k++;
    if (k == nd) {
      char known[256] = "";
      for (int j = 0; j < nd; j++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "",
                 defs[j].key);
      snprintf(err, errcap, "model %s has no parameter '%s' (it takes: %s)", model, keys[i],
               nd ? known : "none");
      return -1;
    }
    char *end;
    errno = 0;
    double v = strtod(values[i], &end);
    if (!values[i][0] || *end || errno || !isfinite(v) || v < 0) {
      snprintf(err, errcap, "model %s: %s=%s is not a non-negative number", model, keys[i],
               values[i]);
      return -1;
    }
    /* a clock divides every cycle count: at 0 MHz the model would predict
     * 0 ns for everything (or infinity), never what anyone means */
    if (v == 0 && !strcmp(keys[i], "clock_mhz")) {
      snprintf(err, errcap, "model %s: clock_mhz must be above 0", model);
      return -1;
    }
    /* nor a clock so fast that every prediction rounds to 0 ns (1e300 was
     * taken), nor any other number past what a latency in ns can hold
     * with room (1e12 ns is over 16 minutes a call) */
    if (v > IFB_CLOCK_MAX_MHZ && !strcmp(keys[i], "clock_mhz")) {
      snprintf(err, errcap,
               "model %s: clock_mhz=%s is above %.0f (1 THz): the clock is in MHz (2 GHz is "
               "clock_mhz=2000)",
               model, values[i], IFB_CLOCK_MAX_MHZ);
      return -1;
    }
    if (v > IFB_PARAM_MAX) {
      snprintf(err, errcap, "model %s: %s=%s is above %g, more than any parameter of it can mean",
               model, keys[i], values[i], IFB_PARAM_MAX);
      return -1;
    }
    out[k] = v;
  }
  return 0;
}

void *ifb_numbers_create(const char *model, const ifb_param *defs, int n,
                         const char *const *keys, const char *const *values, char *err,
                         size_t errcap) {
  ifb_numbers *x = calloc(1, sizeof *x);
  if (!x) {
    snprintf(err, errcap, "out of memory");
    return NULL;
  }
  if (ifb_parse(model, defs, x->p, n, keys, values, err, errcap) != 0) {
    free(x);
    return NULL;
  }
  return x;
}

/* ---- specs ---------------------------------------------------------------- */

static int is_plugin(const char *name, size_t n) {
  return memchr(name, '/', n) || (n > 3 && !strncmp(name + n - 3, ".so", 3));
}

/* ---- a plugin that crashes -------------------------------------------------- */

/* Which plugin function runs (NULL: none), for a crash inside it: standin
 * died of the signal without a word, and after a replay with the signal's
 * status instead of the program's. */
static const char *volatile plugin_fn;
static const char *volatile plugin_name; /* its spec, as the user wrote it */
static const int crash_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NCRASH (sizeof crash_sigs / sizeof *crash_sigs)
static struct sigaction crash_old[NCRASH];

static void put_err(const char *s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

static void on_crash(int sig) {
  if (plugin_fn) {
    char num[4], *p = num + sizeof num; /* the number, without printf */
    *--p = 0;
    for (int n = sig; n && p > num; n /= 10)
      *--p = (char)('0' + n % 10);
    put_err("standin: the model plugin ");
    put_err(plugin_name ? plugin_name : "?");
    put_err(" crashed in its ");
    put_err(plugin_fn);
    put_err(" (signal ");
    put_err(p);
    put_err("); run the command under gdb to see where\n");
  }
  for (size_t i = 0; i < NCRASH; i++)
    if (crash_sigs[i] == sig)
      sigaction(sig, &crash_old[i], NULL);
  raise(sig);
}

/* A plugin that calls exit() ended standin without a word, with the
 * plugin's status: a replay that never ran its program, or a report with
 * half its JSON, exited 0. Not for the plugin's forked children. */
static pid_t watch_pid;

static void on_exit_in_plugin(void) {
  if (!plugin_fn || getpid() != watch_pid)
    return;
  put_err("standin: the model plugin ");
  put_err(plugin_name ? plugin_name : "?");
  put_err(" called exit() in its ");
  put_err(plugin_fn);
  put_err("; standin stops (a plugin must return instead: create NULL with a message, predict "
          "a nonzero code)\n");
  _exit(1);
}

static void watch_crashes(void) {
  static int on;
  if (on++)
    return;
  struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_NODEFER | SA_RESETHAND};
  for (size_t i = 0; i < NCRASH; i++)
    sigaction(crash_sigs[i], &sa, &crash_old[i]);
  watch_pid = getpid();
  atexit(on_exit_in_plugin);
}

/* Around a plugin's own code (built-in models need neither): its name and
 * function for a crash, and with quiet (create, destroy: once each)
 * standard output on standard error. */
static void plugin_in(const if_model *m, const char *fn, const char *name, int quiet) {
  if (!m->dl)
    return;
  if (quiet)
    if_quiet_stdout(1);
  plugin_name = name;
  plugin_fn = fn;
}

static void plugin_out(const if_model *m, int quiet) {
  if (!m->dl)
    return;
  plugin_fn = NULL;
  if (quiet)
    if_quiet_stdout(0);
}

/* dlopen and dlclose run the plugin's constructors and destructors: its
 * code too, watched and quiet as create is. */
static void *plugin_open(const char *path) {
  if_quiet_stdout(1);
  plugin_name = path;
  plugin_fn = "constructor";
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  plugin_fn = NULL;
  if_quiet_stdout(0);
  return dl;
}

static void plugin_close(void *dl, const char *name) {
  if_quiet_stdout(1);
  plugin_name = name;
  plugin_fn = "destructor";
  dlclose(dl);
  plugin_fn = NULL;
  if_quiet_stdout(0);
}

#if defined(__x86_64__)
#define OWN_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define OWN_MACHINE EM_AARCH64
#else
#define OWN_MACHINE EM_NONE /* not checked */
#endif

/* What is wrong with the file at path that dlopen refused, or NULL when
 * nothing is seen (dlerror says it then). dlopen said "No such file" of a
 * plugin built for another machine, and "file too short" of a text file. */
static const char *plugin_file_problem(const char *path, char *buf, size_t cap) {
  struct stat st;
  unsigned char h[EI_NIDENT + 4];
  if (stat(path, &st) != 0) {
    char cwd[PATH_MAX];
    if (path[0] == '/' || !getcwd(cwd, sizeof cwd))
      return strerror(errno);
    snprintf(buf, cap, "%s (a relative path is taken from the directory standin runs in, %s)",
             strerror(errno), cwd);
    return buf;
  }
  if (S_ISDIR(st.st_mode))
    return "it is a directory";
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return strerror(errno);
  ssize_t n = read(fd, h, sizeof h);
  close(fd);
  if (n < (ssize_t)sizeof h || memcmp(h, ELFMAG, SELFMAG))
    return "it is not a shared object (no ELF header): build one with cc -shared -fPIC, as "
           "standin_iface.h shows";
  uint16_t type, machine;
  memcpy(&type, h + EI_NIDENT, 2);
  memcpy(&machine, h + EI_NIDENT + 2, 2);
  if (h[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) || h[EI_DATA] != ELFDATA2LSB ||
      (OWN_MACHINE != EM_NONE && machine != OWN_MACHINE)) {
    snprintf(buf, cap,
             "it is built for another machine (%d-bit, ELF machine %u); build it for "
             "this one, with the compiler standin was built with",
             h[EI_CLASS] == ELFCLASS32 ? 32 : 64, machine);
    return buf;
  }
  if (type != ET_DYN)
    return "it is a program, not a shared object: build it with cc -shared -fPIC";
  return NULL;
}

/* dlopen refused path: why, in err, with what to do. */
static void plugin_load_error(const char *path, char *err, size_t errcap) {
  const char *dle = dlerror(), *own;
  char buf[PATH_MAX + 128];
  size_t pl = strlen(path);
  if (!dle)
    dle = "dlopen failed";
  if (!strncmp(dle, path, pl) && !strncmp(dle + pl, ": ", 2)) /* it names the file again */
    dle += pl + 2;
  if ((own = plugin_file_problem(path, buf, sizeof buf)))
    snprintf(err, errcap, "cannot load plugin %s: %s", path, own);
  else
    snprintf(err, errcap, "cannot load plugin %s: %s%s", path, dle,
             strstr(dle, "undefined symbol") ? " (link the libraries it uses into it: "
                                               "cc -shared ... -lm)"
                                             : "");
}

static int load_plugin(if_model *m, const char *path, char *err, size_t errcap) {
  watch_crashes();
  m->dl = plugin_open(path);
  if (!m->dl) {
    plugin_load_error(path, err, errcap);
    return IF_E_PLUGIN;
  }
  standin_iface_entry_fn entry = (standin_iface_entry_fn)dlsym(m->dl, "standin_iface_entry");
  if (!entry) {
    snprintf(err, errcap,
             "plugin %s has no standin_iface_entry function (in C++, declare it extern \"C\"); "
             "see interfaces/standin_iface.h",
             path);
    return IF_E_PLUGIN;
  }
  plugin_fn = "standin_iface_entry";
  plugin_name = path;
  m->iface = entry();
  plugin_fn = NULL;
  if (!m->iface) {
    snprintf(err, errcap, "plugin %s: standin_iface_entry returned NULL", path);
    return IF_E_PLUGIN;
  }
  if (m->iface->abi != STANDIN_IFACE_ABI) {
    snprintf(err, errcap,
             "plugin %s is built for interface ABI %u; this standin uses ABI %d: build it again "
             "against this standin's standin_iface.h (pkg-config --cflags standin)",
             path, m->iface->abi, STANDIN_IFACE_ABI);
    return IF_E_PLUGIN;
  }
  if (!m->iface->create || !m->iface->predict || !m->iface->name) {
    snprintf(err, errcap, "plugin %s: standin_iface lacks name, create or predict", path);
    return IF_E_PLUGIN;
  }
  m->why = (const char *(*)(int))dlsym(m->dl, "standin_iface_why");
  *(void **)&m->interval = dlsym(m->dl, "standin_iface_interval");
  if (m->why && !(m->whys = calloc(WHY_PER_MODEL, sizeof *m->whys))) {
    snprintf(err, errcap, "out of memory");
    return IF_E_NOMEM;
  }
  return IF_OK;
}

/* ---- a plugin's reasons ------------------------------------------------------ */

/* The reasons plugins gave (standin_iface_why), copied: reports count
 * reasons by their address, and print them after the plugin is unloaded.
 * One copy per distinct text, kept for the life of the process; each model
 * keeps WHY_PER_MODEL texts apart, and counts the rest under one reason
 * that says so (one plugin cannot crowd out another's). */
#define WHY_ALL 16384
#define WHY_LEN 200
static char *why_texts[WHY_ALL];
static int why_n;
static const char why_more[] = "one of the model's reasons past the first 256, which standin "
                               "counts together";

/* Length of the valid UTF-8 sequence at s (of at most n bytes), 0 if none:
 * overlong forms, surrogates and code points past U+10FFFF are not. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len = c < 0x80                 ? 1
               : c >= 0xC2 && c <= 0xDF ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
  if (!len || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((s[i] & 0xC0) != 0x80)
      return 0;
  if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] > 0x9F) || (c == 0xF0 && s[1] < 0x90) ||
      (c == 0xF4 && s[1] > 0x8F))
    return 0;
  return len;
}

/* A plugin's text as one line of valid UTF-8 (JSON carries it): control
 * characters are blanks, bytes that are no character '?', and a character
 * is never cut at the WHY_LEN bytes kept. */
static void why_clean(char *t, const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  size_t n = strlen(s), o = 0;
  for (size_t i = 0; i < n;) {
    size_t l = utf8_seq(u + i, n - i);
    if (o + (l ? l : 1) > WHY_LEN)
      break;
    if (l == 1 && (u[i] < 0x20 || u[i] == 0x7F))
      t[o++] = ' ';
    else if (l)
      memcpy(t + o, s + i, l), o += l;
    else
      t[o++] = '?';
    i += l ? l : 1;
  }
  t[o] = 0;
}

static const char *why_intern(if_model *m, const char *s) {
  char t[WHY_LEN + 1];
  why_clean(t, s);
  const char *copy = NULL;
  for (int i = 0; i < why_n && !copy; i++)
    if (!strcmp(why_texts[i], t))
      copy = why_texts[i];
  for (int i = 0; copy && i < m->nwhy; i++)
    if (m->whys[i] == copy)
      return copy;
  if (m->nwhy == WHY_PER_MODEL)
    return why_more;
  if (!copy && (why_n == WHY_ALL || !(copy = why_texts[why_n] = strdup(t))))
    return why_more;
  if (copy == why_texts[why_n])
    why_n++;
  m->whys[m->nwhy++] = copy;
  return copy;
}

/* Why the plugin refused with code rc, or NULL (the generic reason). */
static const char *plugin_why(if_model *m, int rc) {
  if (!m->why)
    return NULL;
  plugin_in(m, "standin_iface_why", m->desc, 0);
  const char *s = m->why(rc);
  plugin_out(m, 0);
  if (!s || !*s)
    return NULL;
  if (m->why_last && m->why_raw && !strncmp(s, m->why_raw, WHY_LEN)) /* the usual case */
    return m->why_last;
  free(m->why_raw);
  m->why_raw = strndup(s, WHY_LEN);
  return m->why_last = why_intern(m, s);
}

/* Split "k=v,k=v" in place into keys/values. */
static int split_kv(char *s, const char *model, const char **keys, const char **values, int *n,
                    char *err, size_t errcap) {
  char *save = NULL;
  *n = 0;
  for (char *kv = strtok_r(s, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
      snprintf(err, errcap, "model %s: '%s' is not key=value", model, kv);
      return IF_E_SPEC;
    }
    if (*n == MAX_KV) {
      snprintf(err, errcap, "model %s: more than %d parameters", model, MAX_KV);
      return IF_E_SPEC;
    }
    *eq = 0;
    for (int i = 0; i < *n; i++)
      if (!strcmp(keys[i], kv)) { /* the last one won, without a word */
        snprintf(err, errcap, "model %s: %s= is given twice; give it once", model, kv);
        return IF_E_SPEC;
      }
    keys[*n] = kv;
    values[(*n)++] = eq + 1;
  }
  return IF_OK;
}

int if_name_distance(const char *a, const char *b, size_t n) {
  size_t la = strlen(a), lb = strnlen(b, n);
  if (la > 30 || lb > 30)
    return 9;
  int d[32][32];
  for (size_t i = 0; i <= la; i++)
    for (size_t j = 0; j <= lb; j++) {
      if (!i || !j) {
        d[i][j] = (int)(i + j);
        continue;
      }
      int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      c = d[i - 1][j] + 1 < c ? d[i - 1][j] + 1 : c;
      c = d[i][j - 1] + 1 < c ? d[i][j - 1] + 1 : c;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
        c = d[i - 2][j - 2] + 1;
      d[i][j] = c;
    }
  return d[la][lb] < 9 ? d[la][lb] : 9;
}

static int find_model(if_model *m, const char *spec, size_t nl, char *err, size_t errcap) {
  if (is_plugin(spec, nl)) {
    /* only the file the user named: dlopen would look a bare "x.so" up in
     * LD_LIBRARY_PATH and the system's library directories */
    char path[PATH_MAX];
    if (nl + 3 > sizeof path) {
      snprintf(err, errcap, "plugin path '%.40s...' is longer than PATH_MAX (%zu)", spec,
               sizeof path - 1);
      return IF_E_PLUGIN;
    }
    snprintf(path, sizeof path, "%s%.*s", memchr(spec, '/', nl) ? "" : "./", (int)nl, spec);
    return load_plugin(m, path, err, errcap);
  }
  for (size_t i = 0; i < NBUILTIN; i++)
    if (strlen(builtins[i]->name) == nl && !strncmp(builtins[i]->name, spec, nl)) {
      m->iface = builtins[i];
      return IF_OK;
    }
  const char *near = NULL; /* optimus_prime, protoac, core_jpeg */
  int best = 3;
  for (size_t i = 0; i < NBUILTIN; i++) {
    int d = if_name_distance(builtins[i]->name, spec, nl);
    if (d < best)
      best = d, near = builtins[i]->name;
  }
  if (!near && nl == 9 && !strncmp(spec, "core_jpeg", 9))
    near = "jpeg-core";
  char hint[64] = "";
  if (near)
    snprintf(hint, sizeof hint, "did you mean '%s'? ", near);
  snprintf(err, errcap,
           "unknown model '%.*s'; %s'standin models' lists them (a plugin path must "
           "contain '/' or end in .so)",
           (int)nl, spec, hint);
  return IF_E_SPEC;
}

int if_model_parse(if_model **out, const char *spec, char *err, size_t errcap) {
  *out = NULL;
  size_t len = strlen(spec);
  if (len > IF_SPEC_MAX) {
    snprintf(err, errcap, "the model spec '%.40s...' is %zu characters long; at most %d are taken",
             spec, len, IF_SPEC_MAX);
    return IF_E_SPEC;
  }
  if_model *m = calloc(1, sizeof *m);
  if (!m || !(m->desc = strdup(spec))) {
    free(m);
    return IF_E_NOMEM;
  }
  size_t nl = strcspn(spec, ":");
  int rc = find_model(m, spec, nl, err, errcap);
  char *params = strdup(spec[nl] == ':' ? spec + nl + 1 : "");
  const char *keys[MAX_KV], *values[MAX_KV];
  int n = 0;
  if (rc == IF_OK && !params)
    rc = IF_E_NOMEM;
  if (rc == IF_OK)
    rc = split_kv(params, m->iface->name, keys, values, &n, err, errcap);
  if (rc == IF_OK) {
    plugin_in(m, "create", spec, 1);
    if (errcap)
      err[0] = 0;
    m->inst = m->iface->create(n, keys, values, err, errcap);
    plugin_out(m, 1);
    if (!m->inst) {
      rc = IF_E_SPEC;
      if (errcap && !err[0]) /* a plugin that said nothing */
        snprintf(err, errcap, "%s refused its parameters without saying why", m->iface->name);
    }
  }
  free(params);
  if (rc != IF_OK) {
    if (m->dl)
      plugin_close(m->dl, spec);
    free(m->desc);
    free(m);
    return rc;
  }
  *out = m;
  return IF_OK;
}

/* While models run, standard output is standard error: a plugin that
 * prints (printf in predict) wrote into the replayed program's output and
 * into whatif's JSON. Nested; flushed at each switch. */
static int quiet_depth, quiet_saved = -1;

void if_quiet_stdout(int on) {
  fflush(stdout);
  if (on && quiet_depth++ == 0) {
    quiet_saved = dup(1);
    if (quiet_saved >= 0)
      dup2(2, 1);
  } else if (!on && quiet_depth > 0 && --quiet_depth == 0 && quiet_saved >= 0) {
    dup2(quiet_saved, 1);
    close(quiet_saved);
    quiet_saved = -1;
  }
}

/* What a plugin is given of r: copies of its features, fingerprint, type
 * and bytes in m->copy (r itself when there is no memory). A plugin that
 * wrote into its request (a const cast away) changed what standin went on
 * using: replay then ran every decode for real, blaming the recording. */
static standin_request plugin_view(if_model *m, const standin_request *r) {
  size_t nf = r->nfeat * sizeof *r->feat, nt = r->type ? strlen(r->type) + 1 : 0;
  size_t nq = r->req ? r->req_len : 0, ns = r->resp ? r->resp_len : 0;
  size_t need = nf + 16 + nt + nq + ns;
  if (need > m->copy_cap) {
    uint8_t *c = realloc(m->copy, need);
    if (!c)
      return *r;
    m->copy = c;
    m->copy_cap = need;
  }
  standin_request v = *r;
  uint8_t *o = m->copy;
  if (o == NULL) /* nothing to copy (need 16 at least: never) */
    return *r;
  /* (memcpy from NULL is undefined even for 0 bytes: no features) */
  v.feat = nf ? memcpy(o, r->feat, nf) : (const uint64_t *)o, o += nf;
  v.fp = r->fp ? memcpy(o, r->fp, 16) : NULL, o += 16;
  v.type = r->type ? memcpy(o, r->type, nt) : NULL, o += nt;
  v.req = r->req ? memcpy(o, r->req, nq) : NULL, o += nq;
  v.resp = r->resp ? memcpy(o, r->resp, ns) : NULL;
  return v;
}

/* Whether the plugin wrote into its view v of r. */
static int plugin_wrote(const standin_request *v, const standin_request *r) {
  return v->feat != r->feat &&
         ((r->nfeat && memcmp(v->feat, r->feat, r->nfeat * sizeof *r->feat)) ||
          (r->fp && memcmp(v->fp, r->fp, 16)) || (r->type && strcmp(v->type, r->type)) ||
          (r->req && memcmp(v->req, r->req, r->req_len)) ||
          (r->resp && memcmp(v->resp, r->resp, r->resp_len)));
}

static const char why_wrote[] = "the plugin wrote into the request it was given (standin_request "
                                "is read-only): not taken";

int if_model_predict(const if_model *m, const standin_request *r, uint64_t *ns) {
  why_unsupported = NULL;
  busy_last = UINT64_MAX;
  *ns = 0; /* a model that says yes without a time: 0 ns */
  standin_request view = m->dl ? plugin_view((if_model *)m, r) : *r;
  plugin_in(m, "predict", m->desc, 0); /* quiet for the whole run: an_run, rdb_build */
  int rc = m->iface->predict(m->inst, &view, ns);
  plugin_out(m, 0);
  if (rc != STANDIN_SUPPORTED) { /* anything but 0 */
    if (m->dl)
      why_unsupported = plugin_wrote(&view, r) ? why_wrote : plugin_why((if_model *)m, rc);
    return IF_UNSUPPORTED;
  }
  /* (taken, it made replay spin for days and whatif add up past 2^64) */
  if (*ns > IF_MAX_NS) {
    why_unsupported = "the model predicted more than an hour for it (is its unit "
                      "nanoseconds? a negative that wrapped?): not taken";
    *ns = 0;
    return IF_UNSUPPORTED;
  }
  if (m->interval) {
    plugin_in(m, "standin_iface_interval", m->desc, 0);
    busy_last = m->interval(m->inst, &view, *ns);
    plugin_out(m, 0);
  }
  if (m->dl && plugin_wrote(&view, r)) {
    why_unsupported = why_wrote;
    *ns = 0;
    busy_last = UINT64_MAX;
    return IF_UNSUPPORTED;
  }
  if (busy_last > *ns)
    busy_last = *ns;
  return IF_OK;
}

void if_model_reset(if_model *m) {
  if (m->iface == &ifb_table)
    ifb_table_reset(m->inst);
}

int if_model_stateful(const if_model *m) {
  return m->iface == &ifb_table;
}

int if_model_out_cold(const if_model *m, const standin_request *r) {
  if (m->iface == &ifb_table)
    return ifb_table_out_cold(m->inst, r);
  if (m->iface == &ifb_software || m->iface == &ifb_scale)
    return if_recorded_out_cold(r);
  return -1;
}

_Static_assert((int)STANDIN_JPEG_FAULT_NS == (int)ST_JPF_FAULT_NS &&
                   (int)STANDIN_JPEG_SOURCE_NS == (int)ST_JPF_SOURCE_NS &&
                   (int)STANDIN_PB_FAULT_NS == (int)ST_PBF_FAULT_NS,
               "the plugin interface's feature slots are the trace's");

/* A built-in model of a device, whose time is the device's alone. */
static int is_device(const if_model *m) {
  return m->iface == &ifb_protoacc || m->iface == &ifb_protoacc_lpn ||
         m->iface == &ifb_optimus_prime || m->iface == &ifb_jpeg_core || m->iface == &ifb_jpeg_lpn;
}

int if_model_time_measured(const if_model *m) {
  return m->iface == &ifb_software || m->iface == &ifb_scale || m->iface == &ifb_table;
}

uint64_t if_model_fault_ns(const if_model *m, const standin_request *r) {
  return is_device(m) ? if_recorded_fault_ns(r) : 0;
}

uint64_t if_model_source_ns(const if_model *m, const standin_request *r) {
  return is_device(m) ? if_recorded_source_ns(r) : 0;
}

uint64_t if_recorded_source_ns(const standin_request *r) {
  int slot = st_source_slot((uint8_t)r->api);
  if (slot < 0)
    return 0;
  uint64_t s = ifb_feat(r, (unsigned)slot), fault = if_recorded_fault_ns(r);
  uint64_t room = r->recorded_ns - fault; /* fault is at most recorded_ns */
  return s < room ? s : room;
}

uint64_t if_recorded_fault_ns(const standin_request *r) {
  int slot = st_fault_slot((uint8_t)r->api);
  if (slot < 0)
    return 0;
  /* at most the call's time: record keeps it so, a trace from elsewhere
   * might not */
  uint64_t f = ifb_feat(r, (unsigned)slot);
  return f < r->recorded_ns ? f : r->recorded_ns;
}

int if_recorded_out_cold(const standin_request *r) {
  if (st_api_family((uint8_t)r->api) != ST_FAMILY_JPEG)
    return 0;
  uint64_t v = ifb_feat(r, ST_JPF_OUT_COLD);
  return v > 1000 ? 1000 : (int)v;
}

/* ---- comparing specs --------------------------------------------------------- */

#define SPEC_MAX_KV 48

/* Keys and values point into the specs compared (no length to cut them). */
typedef struct {
  int n;
  const char *k[SPEC_MAX_KV], *v[SPEC_MAX_KV];
  size_t kl[SPEC_MAX_KV], vl[SPEC_MAX_KV];
} spec_kv;

/* Set key=value in kv (a later value replaces an earlier one). */
static int kv_set(spec_kv *kv, const char *k, size_t kl, const char *v, size_t vl) {
  int i = 0;
  while (i < kv->n && (kv->kl[i] != kl || strncmp(kv->k[i], k, kl)))
    i++;
  if (i == kv->n && kv->n++ == SPEC_MAX_KV)
    return -1;
  kv->k[i] = k;
  kv->kl[i] = kl;
  kv->v[i] = v;
  kv->vl[i] = vl;
  return 0;
}

/* "k=v,k=v" into kv; -1 if it is not that. */
static int kv_add(spec_kv *kv, const char *s) {
  while (s && *s) {
    size_t len = strcspn(s, ",");
    const char *eq = memchr(s, '=', len);
    if (!eq || kv_set(kv, s, (size_t)(eq - s), eq + 1, len - (size_t)(eq - s) - 1) != 0)
      return -1;
    s += len + (s[len] == ',');
  }
  return 0;
}

/* A spec's name (its first *nl bytes) and its parameters, a built-in's
 * defaults first. */
static int spec_parse(const char *spec, size_t *nl, spec_kv *kv) {
  *nl = strcspn(spec, ":");
  kv->n = 0;
  for (size_t i = 0; i < NBUILTIN; i++)
    if (strlen(builtins[i]->name) == *nl && !strncmp(builtins[i]->name, spec, *nl) &&
        kv_add(kv, builtins[i]->params) != 0)
      kv->n = 0;
  return kv_add(kv, spec[*nl] == ':' ? spec + *nl + 1 : "");
}

static int value_same(const char *a, size_t al, const char *b, size_t bl) {
  char *ea, *eb;
  double x = strtod(a, &ea), y = strtod(b, &eb);
  if (al && ea == a + al && bl && eb == b + bl)
    return x == y;
  return al == bl && !strncmp(a, b, al);
}

int if_spec_same(const char *a, const char *b) {
  if (!strcmp(a, b))
    return 1;
  static spec_kv ka, kb;
  size_t na, nb;
  if (spec_parse(a, &na, &ka) != 0 || spec_parse(b, &nb, &kb) != 0 || na != nb ||
      strncmp(a, b, na) || ka.n != kb.n)
    return 0;
  for (int i = 0; i < ka.n; i++) {
    int j = 0;
    while (j < kb.n && (ka.kl[i] != kb.kl[j] || strncmp(ka.k[i], kb.k[j], ka.kl[i])))
      j++;
    if (j == kb.n || !value_same(ka.v[i], ka.vl[i], kb.v[j], kb.vl[j]))
      return 0;
  }
  return 1;
}

const char *if_model_describe(const if_model *m) {
  return m->desc;
}

const standin_iface *if_model_iface(const if_model *m) {
  return m ? m->iface : NULL;
}

const char *if_model_name(const if_model *m) {
  return m->iface->name;
}

void if_model_free(if_model *m) {
  if (!m)
    return;
  if (m->iface->destroy) {
    plugin_in(m, "destroy", m->desc, 1);
    m->iface->destroy(m->inst);
    plugin_out(m, 1);
  }
  if (m->dl)
    plugin_close(m->dl, m->desc);
  free(m->why_raw);
  free(m->whys);
  free(m->copy);
  free(m->desc);
  free(m);
}

const if_model_info *if_models(size_t *n) {
  static if_model_info info[NBUILTIN];
  for (size_t i = 0; i < NBUILTIN; i++)
    info[i] = (if_model_info){builtins[i]->name, builtins[i]->params, builtins[i]->summary};
  *n = NBUILTIN;
  return info;
}

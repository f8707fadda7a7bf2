/* iface.h — performance interfaces: models that predict how long a request
 * takes on an accelerator, or say that the accelerator cannot take it.
 *
 * A model is chosen by a spec string "MODEL[:key=value,...]", e.g.
 * "scale:factor=0.25" or "constant:ns=0". Models are evaluated offline (by
 * `standin replay` before the program starts, and by the analysis
 * commands), never inside the replayed program, so they may be as slow as
 * they need to be. */
#ifndef STANDIN_IFACE_H
#define STANDIN_IFACE_H

#include <stddef.h>
#include <stdint.h>

enum {
  IF_OK = 0,
  IF_UNSUPPORTED = 1, /* the accelerator cannot take this request: software */
  IF_E_SPEC = 2,      /* bad model spec (message in err) */
  IF_E_NOMEM = 3
};

/* What a model sees of one request. */
typedef struct {
  int api;               /* st_api */
  const char *type;      /* message type full name, "" if none */
  const uint64_t *feat;  /* features, slots in traces/api.h */
  int nfeat;
  uint64_t recorded_ns;  /* software latency of this call in the recording */
  uint64_t req_len;      /* request bytes (0 for a message tree) */
  uint64_t resp_len;     /* response bytes */
  const void *req;       /* raw request bytes if saved, else NULL */
  const void *resp;      /* raw response bytes if saved, else NULL */
} if_request;

typedef struct if_model if_model; /* incomplete type */

/* Parse "MODEL[:key=value,...]". On failure returns IF_E_SPEC with a
 * message naming the bad part in err (NUL-terminated, at most errcap). */
int if_model_parse(if_model **m, const char *spec, char *err, size_t errcap);

/* Predicted service time in ns (IF_OK), or IF_UNSUPPORTED. */
int if_model_predict(const if_model *m, const if_request *r, uint64_t *ns);

/* The spec with defaults filled in, e.g. "scale:factor=0.25". */
const char *if_model_describe(const if_model *m);

/* Accepts NULL. */
void if_model_free(if_model *m);

/* One line per built-in model: name, parameters with defaults, source. */
typedef struct {
  const char *name;
  const char *params; /* "factor=1.0" */
  const char *summary;
} if_model_info;

const if_model_info *if_models(size_t *n);

#endif

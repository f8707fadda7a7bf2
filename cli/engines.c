/* engines.c — busy intervals per engine (see engines.h). */
#include "engines.h"

#include <stdlib.h>
#include <string.h>

int engines_init(engines *g, uint32_t n) {
  g->e = calloc(n ? n : 1, sizeof *g->e);
  g->n = n;
  return g->e ? 0 : -1;
}

/* First interval that ends after t. Requests arrive nearly in order, so
 * gallop back from the last interval, then bisect. */
static uint32_t after(const eng_engine *en, uint64_t t) {
  uint32_t lo = 0, hi = en->n, step = 1;
  while (step <= hi && en->iv[hi - step].e > t) {
    hi -= step;
    step *= 2;
  }
  if (step <= hi)
    lo = hi - step + 1;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (en->iv[mid].e <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Earliest start >= t of a gap of `service` ns; *idle_from: where that gap
 * begins (the end of the interval before it, 0: none). Most requests come
 * after every booking: that needs no search. */
static uint64_t fit(const eng_engine *en, uint64_t t, uint64_t service, uint64_t *idle_from) {
  if (!en->n || en->iv[en->n - 1].e <= t) {
    *idle_from = en->n ? en->iv[en->n - 1].e : 0;
    return t;
  }
  uint32_t i = after(en, t);
  for (; i < en->n && en->iv[i].s < t + service; i++)
    if (en->iv[i].e > t)
      t = en->iv[i].e;
  *idle_from = i > 0 && en->iv[i - 1].e <= t ? en->iv[i - 1].e : 0;
  return t;
}

/* Insert [s, e) (free by construction), merging with touching neighbours. */
static void insert(eng_engine *en, uint64_t s, uint64_t e) {
  uint32_t i = !en->n || en->iv[en->n - 1].e <= s ? en->n : after(en, s);
  int left = i > 0 && en->iv[i - 1].e == s, right = i < en->n && en->iv[i].s == e;
  if (left && right) {
    en->iv[i - 1].e = en->iv[i].e;
    memmove(&en->iv[i], &en->iv[i + 1], (en->n - i - 1) * sizeof *en->iv);
    en->n--;
    return;
  }
  if (left || right) {
    if (left)
      en->iv[i - 1].e = e;
    else
      en->iv[i].s = s;
    return;
  }
  if (en->n == ENG_MAX_INTERVALS) { /* forget the earliest quarter */
    uint32_t drop = ENG_MAX_INTERVALS / 4;
    memmove(en->iv, en->iv + drop, (en->n - drop) * sizeof *en->iv);
    en->n -= drop;
    i = i > drop ? i - drop : 0;
  }
  if (en->n == en->cap) {
    uint32_t cap = en->cap ? en->cap * 2 : 16;
    eng_busy *ni = realloc(en->iv, cap * sizeof *ni);
    if (!ni)
      return; /* the booking is lost: later requests queue less */
    en->iv = ni;
    en->cap = cap;
  }
  memmove(&en->iv[i + 1], &en->iv[i], (en->n - i) * sizeof *en->iv);
  en->iv[i] = (eng_busy){s, e};
  en->n++;
}

uint64_t engines_book(engines *g, uint64_t arrive, uint64_t service) {
  if (service == 0) /* it keeps no engine from anything: no wait either */
    return arrive;
  uint32_t best = 0;
  uint64_t start = UINT64_MAX, best_from = 0;
  for (uint32_t k = 0; k < g->n && !(start == arrive && best_from == arrive); k++) {
    uint64_t from, s = fit(&g->e[k], arrive, service, &from);
    if (s < start || (s == start && from > best_from)) {
      start = s;
      best_from = from;
      best = k;
    }
  }
  insert(&g->e[best], start, start + service);
  return start;
}

void engines_clear(engines *g) {
  for (uint32_t k = 0; k < g->n; k++)
    g->e[k].n = 0;
}

void engines_free(engines *g) {
  for (uint32_t k = 0; g->e && k < g->n; k++)
    free(g->e[k].iv);
  free(g->e);
  g->e = NULL;
  g->n = 0;
}

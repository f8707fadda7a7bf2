/* cmd_models.c — `standin models`: the performance interfaces on offer. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "iface.h"
#include "plan.h"

/* `standin models ./plugin.so[:key=value,...]`: what the plugin says of
 * itself, after loading it and making an instance as replay would (with
 * the accelerator settings --iface takes: engines= was "no parameter"). */
static int show_plugins(int n, char **specs) {
  for (int i = 0; i < n; i++) {
    plan p;
    memset(&p, 0, sizeof p);
    if (plan_add_iface(&p, specs[i]) != 0) {
      plan_free(&p);
      return EXIT_USAGE;
    }
    const standin_iface *f = if_model_iface(p.accel[0].model);
    printf("%-14s %s\n%-14s parameters: %s\n%-14s loaded from %s, interface ABI %u\n", f->name,
           f->summary ? f->summary : "(no summary)", "",
           f->params && f->params[0] ? f->params : "none", "", specs[i], f->abi);
    plan_free(&p);
  }
  return 0;
}

int cmd_models(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    printf("usage: standin models [PLUGIN.so[:key=value,...]]...\n\nLists every built-in "
           "model with its parameters (defaults) and what it predicts; given plugins, loads "
           "each (with those parameters) and shows what it says of itself.\n");
    return 0;
  }
  if (argc > 1)
    return show_plugins(argc - 1, argv + 1);
  size_t n;
  const if_model_info *m = if_models(&n);
  for (size_t i = 0; i < n; i++)
    printf("%-14s %s\n%-14s parameters: %s\n", m[i].name, m[i].summary, "",
           m[i].params[0] ? m[i].params : "none");
  printf("\nEvery model also takes the accelerator settings engines=N (0 = unlimited),\n"
         "deliver=cache|memory|recorded (where decoded rows land) and\n"
         "link=none|onchip|pcie with link_onchip_ns=20, link_rtt_ns=758, link_gbps=15.75,\n"
         "link_poll_ns=0. A plugin is any shared object implementing\n"
         "interfaces/standin_iface.h: --iface ./model.so:key=value ('standin models\n"
         "./model.so' shows what it says of itself).\n"
         "\nUse with: standin replay --iface [API=]MODEL[:key=value,...] -- PROGRAM\n"
         "      or: standin replay --plan FILE -- PROGRAM\n");
  return 0;
}

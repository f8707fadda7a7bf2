/* cmd_models.c — `standin models`: the performance interfaces on offer. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "iface.h"

int cmd_models(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    printf("usage: standin models\n\nLists every built-in model with its parameters "
           "(defaults) and what it predicts.\n");
    return 0;
  }
  size_t n;
  const if_model_info *m = if_models(&n);
  for (size_t i = 0; i < n; i++)
    printf("%-14s %s\n%-14s parameters: %s\n", m[i].name, m[i].summary, "",
           m[i].params[0] ? m[i].params : "none");
  printf("\nEvery model also takes the accelerator settings engines=N (0 = unlimited) and\n"
         "link=none|onchip|pcie with link_onchip_ns=20, link_rtt_ns=758, link_gbps=15.75,\n"
         "link_poll_ns=0. A plugin is any shared object implementing\n"
         "interfaces/standin_iface.h: --iface ./model.so:key=value.\n"
         "\nUse with: standin replay --iface [API=]MODEL[:key=value,...] -- PROGRAM\n"
         "      or: standin replay --plan FILE -- PROGRAM\n");
  return 0;
}

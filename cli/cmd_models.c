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
  printf("%-14s %-40s %s\n", "MODEL", "PARAMETERS (defaults)", "PREDICTS");
  for (size_t i = 0; i < n; i++)
    printf("%-14s %-40s %s\n", m[i].name, m[i].params[0] ? m[i].params : "-", m[i].summary);
  printf("\nUse with: standin replay --iface [API=]MODEL[:key=value,...] -- PROGRAM\n");
  return 0;
}

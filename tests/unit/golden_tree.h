/* golden_tree.h — the tree whose fingerprint the unit tests pin
 * (test_pb_walk from the tree, test_pb_fpbytes from its packed bytes): one
 * definition, so both pin the same thing. */
#ifndef STANDIN_TEST_GOLDEN_TREE_H
#define STANDIN_TEST_GOLDEN_TREE_H

#include <stdint.h>

#include "sample.pb-c.h"

/* Everything the tree points to lives in here. */
typedef struct {
  Standin__Test__Tree t;
  Standin__Test__Branch br, *brp;
  Standin__Test__Leaf lf, *lfp;
  int32_t vals[3];
  uint8_t blob[600];
  ProtobufCBinaryData chunks[2];
} golden_tree;

/* Its fingerprint, as lowercase hex of the 16 bytes. */
#define GOLDEN_TREE_FP "1d56a2e243887fb1ebcbe1a1790f52a7"

static void golden_tree_init(golden_tree *g) {
  *g = (golden_tree){.t = STANDIN__TEST__TREE__INIT,
                     .br = STANDIN__TEST__BRANCH__INIT,
                     .lf = STANDIN__TEST__LEAF__INIT,
                     .vals = {1, -2, 300}};
  g->brp = &g->br;
  g->lfp = &g->lf;
  g->t.title = "golden";
  g->br.id = -42, g->br.n_leaves = 1, g->br.leaves = &g->lfp;
  g->lf.name = "leaf1";
  g->lf.n_values = 3, g->lf.values = g->vals, g->lf.has_weight = 1, g->lf.weight = 2.25;
  g->t.n_branches = 1, g->t.branches = &g->brp, g->t.has_flag = 1, g->t.flag = 0;
  g->t.payload_case = STANDIN__TEST__TREE__PAYLOAD_NUMBER, g->t.number = 7;
  for (int i = 0; i < 600; i++)
    g->blob[i] = (uint8_t)(i * 131 + 7);
  g->chunks[0] = (ProtobufCBinaryData){600, g->blob};
  g->chunks[1] = (ProtobufCBinaryData){5, g->blob};
  g->t.n_chunks = 2, g->t.chunks = g->chunks;
}

#endif

/* anprint.h — printing analysis results, shared by report, whatif, sweep
 * and compare so that a figure reads the same wherever it appears. */
#ifndef STANDIN_CLI_ANPRINT_H
#define STANDIN_CLI_ANPRINT_H

#include <stdio.h>

#include "analysis.h"
#include "json.h"

/* --by names: api, type, site, thread. -1 for an unknown name. */
int anp_parse_by(const char *s, an_by *by);
const char *anp_by_name(an_by by);

/* "pb.pack standin.test.Tree", "handle+0x1c (app)", "pid 123 thread 2". */
void anp_group_label(const an_group *g, an_by by, char *buf, size_t cap);

/* Share of the run time the group's calls took (g->run_ns, else the
 * recording's). */
double anp_share(const an_result *r, const an_group *g);

/* Group indices sorted by time in calls, longest first (caller frees). */
size_t *anp_groups_by_time(const an_result *r);

/* Text: the accelerators of plan k; why calls stay in software; the
 * end-to-end estimate; approximations worth knowing about. */
void anp_accels_text(FILE *f, const an_result *r, int k);
void anp_software_text(FILE *f, const an_result *r, int k);
void anp_estimate_text(FILE *f, const an_result *r, int k);
void anp_notes_text(FILE *f, const an_result *r);
/* Plan k's note on decoded rows its models leave elsewhere than the
 * recording did (an_rows_bound_ns), as "  under LABEL, ..."; nothing when
 * it would move the run by under 1% (or, with no measured miss cost, when
 * under 1 MiB moves). */
int anp_rows_note_due(const an_result *r, int k);
void anp_rows_note_text(FILE *f, const an_result *r, int k, const char *label);

/* JSON: the recording's top-level members (no braces), and one plan as an
 * object with its accelerators and estimates. */
void anp_recording_json(FILE *f, const an_result *r, const char *dir);
void anp_plan_json(FILE *f, const an_result *r, int k, const char *name);

/* Of a `standin replay --summary` document: the time its harness could not
 * hide (wall_ns - wall_adjusted_ns: overruns no later call's slack paid
 * back, and setup), 0 when the summary does not say (older ones). */
uint64_t anp_replay_unhidden(const json *summary);
/* Replay's unhidden time counts when it is this share of a measured wall
 * time or more: below it the run-to-run noise is larger. */
#define ANP_UNHIDDEN_SHARE 0.01

#endif

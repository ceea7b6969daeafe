/* SPDX-License-Identifier: MIT */
/*
 * test_life.c - a QP's life cycle: the transition table, every state x
 * every event, against the table in migrate/README.md (the document is
 * the specification: it cannot drift from the code); and the one change
 * function's bookkeeping (QPs moving, QPs away, refusals).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "mig_int.h"

#define NO R2CC_LIFE_N

/* A state's name, "-" (refused: NO), or -1. */
static int life_of(const char *name)
{
	int s;

	for (s = 0; s < R2CC_LIFE_N; s++)
		if (!strcmp(name, r2cc_mig_life_name(s)))
			return s;
	return strcmp(name, "-") ? -1 : NO;
}

/* The next cell of a table row (words between '|'), or NULL. */
static char *cell(char **p)
{
	char *c;
	size_t n;

	while (**p == ' ' || **p == '|')
		(*p)++;
	if (!**p || **p == '\n')
		return NULL;
	c = *p;
	n = strcspn(c, " |\n");
	*p = c + n + (c[n] != 0);
	c[n] = 0;
	return c;
}

/* README.md's table: the header names the events in enum order, each
 * row a state and the state each event leads to. */
static void readme_table(int want[R2CC_LIFE_N][R2CC_MEV_N])
{
	char line[512], *p, *c;
	bool seen[R2CC_LIFE_N] = { 0 };
	int s, ev, rows = 0;
	FILE *f = fopen(MIGRATE_README, "r");

	cr_assert(f, "%s", MIGRATE_README);
	while (fgets(line, sizeof(line), f) && strncmp(line, "| state ", 8))
		;
	p = line;
	cr_assert_str_eq(cell(&p), "state", "the life table in README.md");
	for (ev = 0; ev < R2CC_MEV_N; ev++)
		cr_assert_str_eq(cell(&p), r2cc_mig_ev_name(ev),
				 "column %d of the life table", ev + 1);
	cr_assert_null(cell(&p), "a column for an event the code lacks");
	cr_assert(fgets(line, sizeof(line), f)); /* |---|---| */
	while (fgets(line, sizeof(line), f) && line[0] == '|') {
		p = line;
		s = life_of(cell(&p));
		cr_assert(s >= 0 && s < NO && !seen[s], "row %s", line);
		seen[s] = true;
		for (ev = 0; ev < R2CC_MEV_N; ev++) {
			c = cell(&p);
			cr_assert(c && life_of(c) >= 0, "cell %d of %s", ev,
				  r2cc_mig_life_name(s));
			want[s][ev] = life_of(c);
		}
		cr_assert_null(cell(&p), "a cell too many in %s",
			       r2cc_mig_life_name(s));
		rows++;
	}
	fclose(f);
	cr_assert_eq(rows, R2CC_LIFE_N, "a row per state");
}

Test(life, every_state_and_event_as_the_readme_says)
{
	int want[R2CC_LIFE_N][R2CC_MEV_N], s, ev;

	readme_table(want);
	for (s = 0; s < R2CC_LIFE_N; s++)
		for (ev = 0; ev < R2CC_MEV_N; ev++)
			cr_expect_eq(
				(int)r2cc_mig_life_next(s, ev), want[s][ev],
				"%s on %s: %s, README.md says %s",
				r2cc_mig_ev_name(ev), r2cc_mig_life_name(s),
				r2cc_mig_life_name(r2cc_mig_life_next(s, ev)),
				r2cc_mig_life_name(want[s][ev]));
}

Test(life, out_of_range_is_refused_and_named)
{
	cr_assert_eq(r2cc_mig_life_next(R2CC_LIFE_N, R2CC_MEV_FENCE), NO);
	cr_assert_eq(r2cc_mig_life_next(R2CC_LIFE_RUN, R2CC_MEV_N), NO);
	cr_assert_eq(r2cc_mig_life_next((enum r2cc_mig_life) - 1,
					R2CC_MEV_FENCE),
		     NO);
	cr_assert_str_eq(r2cc_mig_life_name(R2CC_LIFE_N), "?");
	cr_assert_str_eq(r2cc_mig_ev_name(R2CC_MEV_N), "?");
	for (int s = 0; s < R2CC_LIFE_N; s++)
		cr_assert_str_neq(r2cc_mig_life_name(s), "?");
	for (int ev = 0; ev < R2CC_MEV_N; ev++)
		cr_assert_str_neq(r2cc_mig_ev_name(ev), "?");
}

static struct r2cc_mig_qp q;

static void fresh(void)
{
	memset(&q, 0, sizeof(q));
	q.qpn = 0x42;
	q.life = R2CC_LIFE_RUN;
	atomic_store(&ps.waiting, 0);
	atomic_store(&ps.away, 0);
	atomic_store(&ps.refused, 0);
}

Test(life, a_move_out_and_back_counts_and_flips_the_path, .init = fresh)
{
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_FENCE));
	cr_assert_eq(atomic_load(&ps.waiting), 1);
	cr_assert(r2cc_mig_moving(&q) && !r2cc_mig_back(&q));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPLAYED));
	cr_assert_eq(q.life, R2CC_LIFE_SENDS);
	cr_assert(!q.on_backup, "the path flips when both directions moved");
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPOSTED));
	cr_assert_eq(q.life, R2CC_LIFE_RUN);
	cr_assert(q.on_backup);
	cr_assert_eq(atomic_load(&ps.waiting), 0);
	cr_assert_eq(atomic_load(&ps.away), 1);
	/* and back, receives first this time */
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_FENCE));
	cr_assert(r2cc_mig_back(&q));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPOSTED));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPLAYED));
	cr_assert(!q.on_backup);
	cr_assert_eq(atomic_load(&ps.away), 0);
	cr_assert_eq(atomic_load(&ps.refused), 0);
}

Test(life, an_illegal_event_changes_nothing_and_is_counted, .init = fresh)
{
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_FENCE));
	cr_assert(!r2cc_mig_step(&q, R2CC_MEV_FENCE), "fenced twice");
	cr_assert(!r2cc_mig_step(&q, R2CC_MEV_STOP), "stopped mid-move");
	cr_assert_eq(q.life, R2CC_LIFE_FENCED);
	cr_assert_eq(atomic_load(&ps.waiting), 1);
	cr_assert_eq(atomic_load(&ps.refused), 2);
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_ABANDON));
	cr_assert_eq(q.life, R2CC_LIFE_OFF);
	cr_assert(!r2cc_mig_logs(&q));
	cr_assert_eq(atomic_load(&ps.waiting), 0);
}

Test(life, a_release_away_or_mid_move_settles_the_counts, .init = fresh)
{
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_FENCE));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPLAYED));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_REPOSTED));
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_FENCE));
	cr_assert_eq(atomic_load(&ps.waiting), 1);
	cr_assert_eq(atomic_load(&ps.away), 1);
	cr_assert(r2cc_mig_step(&q, R2CC_MEV_RELEASE));
	cr_assert_eq(q.life, R2CC_LIFE_OFF);
	cr_assert_eq(atomic_load(&ps.waiting), 0);
	cr_assert_eq(atomic_load(&ps.away), 0);
	cr_assert(!q.on_backup);
}

/* SPDX-License-Identifier: MIT */
/*
 * test_ctrl_replay.c - the control channel's replay window (every seq
 * accepted once, old ones refused, the window's slides and its top) and
 * the counters a refused frame goes to.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdint.h>

#include "ctrl_msg.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Replay window: a script of seqs and what each gets */
struct replay_step {
	uint64_t seq;
	int want;
};

struct replay_case {
	char what[24];
	struct replay_step s[10];
};

#define TOP UINT64_MAX
#define W R2CC_CTRL_REPLAY_WINDOW

ParameterizedTestParameters(ctrl_msg, replay)
{
	static struct replay_case cases[] = {
		{ "duplicate",
		  { { 1, 0 },
		    { 1, -EALREADY },
		    { 2, 0 },
		    { 2, -EALREADY },
		    { 1, -EALREADY } } },
		{ "reordered",
		  { { 5, 0 },
		    { 3, 0 },
		    { 4, 0 },
		    { 3, -EALREADY },
		    { 1, 0 },
		    { 2, 0 },
		    { 5, -EALREADY } } },
		{ "old",
		  { { W + 100, 0 },
		    { 101, 0 },
		    { 100, -ESTALE },
		    { 1, -ESTALE },
		    { 101, -EALREADY },
		    { W + 101, 0 },
		    { 101, -ESTALE },
		    { 102, 0 } } },
		{ "far future",
		  { { 1, 0 },
		    { 1000000, 0 },
		    { 2, -ESTALE },
		    { 1000000 - W + 1, 0 },
		    { 1000000 - W, -ESTALE },
		    { 1000000, -EALREADY },
		    { 1000001, 0 } } },
		/* a slide by less than a word, by words and bits, by all */
		{ "slide by 1, 63, 64, 65",
		  { { 10, 0 },
		    { 11, 0 },
		    { 74, 0 },
		    { 10, -EALREADY },
		    { 138, 0 },
		    { 11, -EALREADY },
		    { 203, 0 },
		    { 74, -EALREADY },
		    { 12, 0 },
		    { 12, -EALREADY } } },
		{ "slide by W - 1, W",
		  { { 10, 0 },
		    { W + 9, 0 },
		    { 10, -EALREADY },
		    { 2 * W + 9, 0 },
		    { W + 9, -ESTALE },
		    { W + 10, 0 },
		    { W + 10, -EALREADY } } },
		{ "first is huge",
		  { { TOP - 1, 0 }, { 5, -ESTALE }, { TOP - 2, 0 } } },
		/* seqs are 64-bit and never wrap: UINT64_MAX is the last */
		{ "wrap",
		  { { TOP - W, 0 },
		    { TOP, 0 },
		    { TOP, -EALREADY },
		    { TOP - W + 1, 0 },
		    { TOP - W, -ESTALE },
		    { 0, -EINVAL },
		    { 1, -ESTALE } } },
		{ "seq 0", { { 0, -EINVAL }, { 1, 0 }, { 0, -EINVAL } } },
	};

	return cr_make_param_array(struct replay_case, cases,
				   ARRAY_SIZE(cases));
}

ParameterizedTest(struct replay_case *c, ctrl_msg, replay, .timeout = 5)
{
	struct r2cc_ctrl_replay w = { 0 };

	for (size_t i = 0;
	     i < ARRAY_SIZE(c->s) && (c->s[i].seq || c->s[i].want); i++)
		cr_assert_eq(r2cc_ctrl_replay_accept(&w, c->s[i].seq),
			     c->s[i].want, "%s: step %zu seq %#llx", c->what, i,
			     (unsigned long long)c->s[i].seq);
}

Test(ctrl_msg, replay_every_seq_once, .timeout = 5)
{
	struct r2cc_ctrl_replay w = { 0 };

	/* in blocks of 100 (not a word's multiple), each in reverse: all
	 * accepted, then none; the window then slides one at a time */
	for (uint64_t b = 0; b < W / 100; b++)
		for (uint64_t s = 100; s >= 1; s--)
			cr_assert_eq(r2cc_ctrl_replay_accept(&w, b * 100 + s),
				     0, "seq %llu",
				     (unsigned long long)(b * 100 + s));
	for (uint64_t s = 1; s <= W / 100 * 100; s++)
		cr_assert_eq(r2cc_ctrl_replay_accept(&w, s), -EALREADY,
			     "seq %llu", (unsigned long long)s);
	for (uint64_t s = W / 100 * 100 + 1; s <= 3 * W; s++) {
		cr_assert_eq(r2cc_ctrl_replay_accept(&w, s), 0);
		if (s <= W)
			continue;
		cr_assert_eq(r2cc_ctrl_replay_accept(&w, s - W + 1), -EALREADY,
			     "seq %llu, top %llu",
			     (unsigned long long)(s - W + 1),
			     (unsigned long long)s);
		cr_assert_eq(r2cc_ctrl_replay_accept(&w, s - W), -ESTALE);
	}
}

Test(ctrl_msg, count, .timeout = 5)
{
	static const int rcs[] = { 0,	    0,	     -EBADMSG,	-EPROTO,
				   -EACCES, -EACCES, -EMSGSIZE, -EALREADY,
				   -ESTALE, -EIO };
	struct r2cc_ctrl_stats st = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(rcs); i++)
		r2cc_ctrl_count(&st, rcs[i]);
	cr_assert_eq(st.accepted, 2);
	cr_assert_eq(st.malformed, 1);
	cr_assert_eq(st.unsupported, 1);
	cr_assert_eq(st.unauthentic, 2);
	cr_assert_eq(st.oversize, 1);
	cr_assert_eq(st.replayed, 1);
	cr_assert_eq(st.stale, 1);
	cr_assert_eq(st.other, 1);
}

/* SPDX-License-Identifier: MIT */
/*
 * test_paths.c - the paths of the protected QPs (paths.c): counted in one
 * pass, each QP's found by hash among a thousand, their completions
 * summed over READY QPs only, and a path none counts any more dropped.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* before fo_fixture.h: its global mq would shadow their parameters */
#include "mig_int.h"
#include "paths.h"

#include "fo_fixture.h"

#define NQ 1000 /* 500 paths of 2 QPs each */

static struct fake_qp *fq;
static struct r2cc_status_qp *slots;
static struct r2cc_mig_qp **q;

static void count(void)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_paths_count();
	pthread_mutex_unlock(&ps.lock);
}

static void paths_setup(void)
{
	struct ibv_qp_cap cap = { .max_send_wr = 4, .max_recv_wr = 4 };
	int i;

	setup();
	fq = calloc(NQ, sizeof(*fq));
	slots = calloc(NQ, sizeof(*slots));
	q = calloc(NQ, sizeof(*q));
	cr_assert(fq && slots && q);
	for (i = 0; i < NQ; i++) {
		fq[i].qp.context = &ctx;
		fq[i].qp.qp_num = 0x4000 + i;
		q[i] = r2cc_mig_qp_new(&fq[i].qp, &cap, false, mc, mc, NULL,
				       NULL);
		cr_assert(q[i]);
		r2cc_mig_test_bound(q[i], NULL, NULL, PEER, 0x8000 + i, 0x100);
		r2cc_qlock_lock(&q[i]->lock);
		q[i]->gid[15] = 1;
		/* paths 0..499: QPs 2k and 2k+1 */
		q[i]->dest_gid[14] = (uint8_t)((i / 2) >> 8);
		q[i]->dest_gid[15] = (uint8_t)(i / 2);
		q[i]->rail = (i / 2) % 4;
		slots[i].st.polled = 10 + (uint64_t)i;
		slots[i].st.polled_err = 1;
		q[i]->slot = &slots[i];
		r2cc_qlock_unlock(&q[i]->lock);
	}
}

static void paths_teardown(void)
{
	int i;

	pthread_mutex_lock(&ps.lock);
	r2cc_mig_paths_clear();
	pthread_mutex_unlock(&ps.lock);
	for (i = 0; i < NQ; i++) {
		q[i]->slot = NULL;
		r2cc_mig_release(q[i]);
		r2cc_mig_test_free(q[i]);
	}
	free(fq);
	free(slots);
	free(q);
	teardown();
}

TestSuite(paths, .init = paths_setup, .fini = paths_teardown, .timeout = 30);

Test(paths, every_qp_finds_its_path_and_its_sums)
{
	struct r2cc_mig_path *p;
	int i, n;

	count();
	for (n = 0; r2cc_mig_path_at((unsigned int)n); n++)
		;
	cr_assert_eq(n, NQ / 2, "%d paths", n);
	pthread_mutex_lock(&ps.lock);
	for (i = 0; i < NQ; i++) {
		p = r2cc_mig_path_of(q[i]);
		cr_assert(p, "QP %d has no path", i);
		cr_assert_eq(p, r2cc_mig_path_of(q[i ^ 1]));
		cr_assert_eq(p->nready, 2);
		/* (10 + i - 1) + (10 + (i ^ 1) - 1) */
		cr_assert_eq(p->ok, (uint64_t)(18 + i + (i ^ 1)));
	}
	pthread_mutex_unlock(&ps.lock);
}

Test(paths, a_path_counts_only_ready_qps_and_goes_with_them)
{
	struct r2cc_mig_path *p;

	r2cc_mig_test_state(q[6], R2CC_PROT_MIGRATED);
	count();
	pthread_mutex_lock(&ps.lock);
	p = r2cc_mig_path_of(q[7]);
	cr_assert(p);
	cr_assert_eq(p->nready, 1);
	cr_assert_eq(p->ok, 16u);
	pthread_mutex_unlock(&ps.lock);
	r2cc_mig_test_state(q[7], R2CC_PROT_NONE);
	slots[8].st.polled += 5; /* the next path's QPs go on */
	count();
	pthread_mutex_lock(&ps.lock);
	cr_assert_null(r2cc_mig_path_of(q[7]), "an empty path is kept");
	p = r2cc_mig_path_of(q[8]);
	cr_assert(p);
	cr_assert_eq(p->ok, (uint64_t)(17 + 5 + 18));
	pthread_mutex_unlock(&ps.lock);
}

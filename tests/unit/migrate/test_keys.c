/* SPDX-License-Identifier: MIT */
/*
 * test_keys.c - the memory keys (keys.c): ours announced once per (PD,
 * peer, rail) in as many MR_KEYS as they take; the peer's kept past any
 * old table size, translated per rail, forgotten on MR_INVALIDATE, and a
 * peer past its budget dropped and counted.
 */
#include <criterion/criterion.h>

/* before fo_fixture.h: its global mq would shadow their parameters */
#include "keys.h"
#include "mig_int.h"

#include "fo_fixture.h"

static int announce(uint64_t peer, const void *pd, int rail)
{
	int ret;

	pthread_mutex_lock(&ps.lock);
	ret = r2cc_mig_keys_announce(peer, pd, rail);
	pthread_mutex_unlock(&ps.lock);
	return ret;
}

static int xlate(uint64_t peer, int rail, uint32_t rkey, uint32_t *out)
{
	struct r2cc_mig_qp q = { .peer = peer, .backup_rail = rail };

	return r2cc_mig_rkey_xlate(&q, rkey, out);
}

static void put(uint64_t peer, int rail, uint32_t rkey, uint32_t xkey)
{
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_keys_put(peer, rail, rkey, xkey);
	pthread_mutex_unlock(&ps.lock);
}

static void fini(void)
{
	fo_capture = false;
	fo_nmrs = 0;
	r2cc_mig_stop();
}

static void init(void)
{
	start();
	fo_capture = true;
	fo_nsent = 0;
}

TestSuite(keys, .init = init, .fini = fini, .timeout = 30);

Test(keys, a_pd_is_announced_whole_and_once)
{
	static const int pd;
	int f, i, n;

	fo_nmrs = 600; /* past one frame's R2CC_CTRL_MAX_MRS */
	cr_assert_eq(announce(PEER, &pd, 2), 0);
	cr_assert_eq(fo_nsent, 3, "%d frames", fo_nsent);
	for (f = 0, i = 0; f < 3; f++) {
		cr_assert_eq(fo_sent[f].hdr.type, R2CC_CTRL_MR_KEYS);
		cr_assert_eq(fo_sent[f].mr_keys.rail, 2);
		for (n = 0; n < fo_sent[f].mr_keys.n; n++, i++) {
			cr_assert_eq(fo_sent[f].mr_keys.mr[n].rkey, FO_RKEY(i));
			cr_assert_eq(fo_sent[f].mr_keys.mr[n].backup_rkey,
				     FO_BACKUP_RKEY(2, i));
		}
	}
	cr_assert_eq(i, 600);
	/* The next QP of that PD bound to that peer on that rail: nothing */
	cr_assert_eq(announce(PEER, &pd, 2), 0);
	cr_assert_eq(fo_nsent, 3);
	/* Another rail is announced, as another peer would be */
	cr_assert_eq(announce(PEER, &pd, 3), 0);
	cr_assert_eq(fo_nsent, 6);
	cr_assert_eq(fo_sent[5].mr_keys.rail, 3);
	/* Messages to the peer were lost: told again at the next bind */
	r2cc_mig_keys_lost(PEER);
	cr_assert_eq(announce(PEER, &pd, 2), 0);
	cr_assert_eq(fo_nsent, 9);
	cr_assert_eq(announce(PEER, &pd, 2), 0);
	cr_assert_eq(fo_nsent, 9);
}

Test(keys, an_mr_after_a_loss_tells_its_pd_again)
{
	static const int pd;
	int mr = 2, i;

	fo_nmrs = 3;
	cr_assert_eq(announce(PEER, &pd, 1), 0);
	cr_assert_eq(announce(PEER, &pd, 3), 0);
	cr_assert_eq(fo_nsent, 2);
	/* Kept: one MR_KEYS per rail, of that MR alone */
	r2cc_mig_mr_new(&pd, &mr);
	cr_assert_eq(fo_nsent, 4);
	cr_assert_eq(fo_sent[3].mr_keys.n, 1);
	cr_assert_eq(fo_sent[3].mr_keys.mr[0].rkey, FO_RKEY(2));
	cr_assert_eq(fo_sent[3].mr_keys.mr[0].backup_rkey,
		     FO_BACKUP_RKEY(3, 2));
	/* Lost (an MR_INVALIDATE among them, say): the next MR of the PD
	 * tells the whole PD again on each rail, then one MR again */
	r2cc_mig_keys_lost(PEER);
	r2cc_mig_mr_new(&pd, &mr);
	cr_assert_eq(fo_nsent, 6);
	for (i = 4; i < 6; i++) {
		cr_assert_eq(fo_sent[i].hdr.type, R2CC_CTRL_MR_KEYS);
		cr_assert_eq(fo_sent[i].mr_keys.n, 3);
		cr_assert_eq(fo_sent[i].mr_keys.rail, i == 4 ? 1 : 3);
	}
	r2cc_mig_mr_new(&pd, &mr);
	cr_assert_eq(fo_nsent, 8);
	cr_assert_eq(fo_sent[7].mr_keys.n, 1);
}

Test(keys, a_peer_keeps_more_keys_than_the_old_table)
{
	uint32_t out;
	int i;

	for (i = 0; i < 10000; i++)
		put(0x777, 1, FO_RKEY(i), FO_BACKUP_RKEY(1, i));
	for (i = 0; i < 10000; i++) {
		cr_assert_eq(xlate(0x777, 1, FO_RKEY(i), &out), 0, "key %d", i);
		cr_assert_eq(out, FO_BACKUP_RKEY(1, i));
	}
	/* per rail and per peer */
	cr_assert_eq(xlate(0x777, 2, FO_RKEY(5), &out), -ENOENT);
	cr_assert_eq(xlate(0x778, 1, FO_RKEY(5), &out), -ENOENT);
	/* a newer announcement of a key replaces it */
	put(0x777, 1, FO_RKEY(5), 0xabc);
	cr_assert_eq(xlate(0x777, 1, FO_RKEY(5), &out), 0);
	cr_assert_eq(out, 0xabc);
}

Test(keys, invalidate_forgets_a_key_on_every_rail)
{
	struct r2cc_ctrl_msg m = { .hdr.type = R2CC_CTRL_MR_INVALIDATE };
	uint32_t out;

	put(0x779, 1, 0x42, 0x142);
	put(0x779, 3, 0x42, 0x342);
	put(0x779, 3, 0x43, 0x343);
	m.mr_inval.n = 1;
	m.mr_inval.rkey[0] = 0x42;
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_got_mr_inval(0x779, &m);
	pthread_mutex_unlock(&ps.lock);
	cr_assert_eq(xlate(0x779, 1, 0x42, &out), -ENOENT);
	cr_assert_eq(xlate(0x779, 3, 0x42, &out), -ENOENT);
	cr_assert_eq(xlate(0x779, 3, 0x43, &out), 0);
	cr_assert_eq(out, 0x343);
}

Test(keys, a_peer_past_its_budget_is_dropped_and_counted)
{
	unsigned long before = atomic_load(&ps.keys_dropped);
	uint32_t out;
	int i;

	for (i = 0; i < MIG_PEER_KEYS_MAX + 10; i++)
		put(0x77a, 0, (uint32_t)i, (uint32_t)i + 1);
	cr_assert_eq(atomic_load(&ps.keys_dropped) - before, 10);
	cr_assert_eq(xlate(0x77a, 0, MIG_PEER_KEYS_MAX - 1, &out), 0);
	cr_assert_eq(xlate(0x77a, 0, MIG_PEER_KEYS_MAX, &out), -ENOENT);
	/* a key it has may still change; another peer is not affected */
	put(0x77a, 0, 7, 0x99);
	cr_assert_eq(xlate(0x77a, 0, 7, &out), 0);
	cr_assert_eq(out, 0x99);
	put(0x77b, 0, 7, 0x98);
	cr_assert_eq(xlate(0x77b, 0, 7, &out), 0);
	cr_assert_eq(atomic_load(&ps.keys_dropped) - before, 10);
}

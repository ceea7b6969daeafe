/* SPDX-License-Identifier: MIT */
/*
 * keys.c - the peer's memory keys: its MR_KEYS and MR_INVAL (each MR's
 * R_Key on the rails of its backups), ours announced to the bound peers
 * as the program registers and deregisters, and an R_Key translated for
 * a standby's rail.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chan.h"
#include "keys.h"
#include "mig_int.h"

void r2cc_mig_got_mr_keys(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	int i, j;

	for (i = 0; i < m->mr_keys.n; i++) {
		for (j = 0; j < ps.nmrs; j++)
			if (ps.mrs[j].peer == peer &&
			    ps.mrs[j].rail == m->mr_keys.rail &&
			    ps.mrs[j].mr.rkey == m->mr_keys.mr[i].rkey)
				break;
		if (j == ps.nmrs && ps.nmrs == MAX_PEER_MRS) {
			r2cc_warn("peer MR table full: rkey %#x not kept",
				  m->mr_keys.mr[i].rkey);
			continue;
		}
		if (j == ps.nmrs)
			ps.nmrs++;
		ps.mrs[j].peer = peer;
		ps.mrs[j].rail = m->mr_keys.rail;
		ps.mrs[j].mr = m->mr_keys.mr[i];
	}
}

void r2cc_mig_got_mr_inval(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	int i, j;

	for (i = 0; i < m->mr_inval.n; i++)
		for (j = 0; j < ps.nmrs; j++)
			if (ps.mrs[j].peer == peer &&
			    ps.mrs[j].mr.rkey == m->mr_inval.rkey[i])
				ps.mrs[j--] = ps.mrs[--ps.nmrs];
}

/* Send @m to every peer bound to a QP of @pd (on its backup rail when
 * @mr is set: MR_KEYS of that MR), each (peer, rail) once. */
static void announce(const void *pd, const void *mr, struct r2cc_ctrl_msg *m)
{
	struct {
		uint64_t peer;
		int rail;
	} done[64];
	struct r2cc_mig_qp *mq;
	int n = 0, i, ret;

	pthread_mutex_lock(&ps.lock);
	for (mq = ps.qps; mq; mq = mq->next) {
		if (mq->pd != pd || !mq->peer || !mq->bind_sent)
			continue;
		for (i = 0; i < n; i++)
			if (done[i].peer == mq->peer &&
			    done[i].rail == mq->backup_rail)
				break;
		if (i < n)
			continue;
		if (n < (int)(sizeof(done) / sizeof(done[0]))) {
			done[n].peer = mq->peer;
			done[n++].rail = mq->backup_rail;
		}
		if (mr && ps.env.mr_key(mr, mq->backup_rail, &m->mr_keys.mr[0]))
			continue; /* no shadow there: nothing to translate */
		if (mr)
			m->mr_keys.rail = (uint8_t)mq->backup_rail;
		ret = r2cc_chan_send(mq->peer, m);
		if (ret)
			r2cc_warn("QP %#x: memory key change not sent (%s)",
				  mq->qpn, strerror(-ret));
	}
	pthread_mutex_unlock(&ps.lock);
}

void r2cc_mig_mr_new(const void *pd, const void *mr)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !ps.env.mr_key || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_KEYS;
	m->mr_keys.n = 1;
	announce(pd, mr, m);
	free(m);
}

void r2cc_mig_mr_gone(const void *pd, uint32_t rkey)
{
	struct r2cc_ctrl_msg *m;

	if (!ps.on || !(m = calloc(1, sizeof(*m))))
		return;
	m->hdr.type = R2CC_CTRL_MR_INVALIDATE;
	m->mr_inval.n = 1;
	m->mr_inval.rkey[0] = rkey;
	announce(pd, NULL, m);
	free(m);
}

int r2cc_mig_rkey_xlate(const struct r2cc_mig_qp *mq, uint32_t rkey,
			uint32_t *out)
{
	int i, ret = -ENOENT;

	pthread_rwlock_rdlock(&ps.mr_lock);
	for (i = 0; i < ps.nmrs; i++)
		if (ps.mrs[i].peer == mq->peer && ps.mrs[i].mr.rkey == rkey &&
		    ps.mrs[i].rail == mq->backup_rail) {
			*out = ps.mrs[i].mr.backup_rkey;
			ret = 0;
			break;
		}
	pthread_rwlock_unlock(&ps.mr_lock);
	return ret;
}

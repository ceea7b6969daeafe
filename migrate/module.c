/* SPDX-License-Identifier: MIT */
/*
 * module.c - migrate/'s one state (ps), its start and stop, and the
 * control messages of the protection, each handed to the file of its
 * concern; a QP's protection state as r2cc-ctl shows it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "chan.h"
#include "early.h"
#include "failback.h"
#include "inbox.h"
#include "keepalive.h"
#include "keys.h"
#include "mig_int.h"
#include "module.h"
#include "move.h"
#include "probe.h"
#include "tick.h"
#include "untune.h"

struct r2cc_mig_state ps = { .lock = PTHREAD_MUTEX_INITIALIZER,
			     .peer_cv = PTHREAD_COND_INITIALIZER,
			     .placed_cv = PTHREAD_COND_INITIALIZER };

void r2cc_mig_set_state(struct r2cc_mig_qp *mq, uint32_t st)
{
	atomic_store_explicit(&mq->state, st, memory_order_release);
	if (mq->slot)
		atomic_store_explicit(&mq->slot->prot, st,
				      memory_order_relaxed);
}

void r2cc_mig_set_none(struct r2cc_mig_qp *mq, enum r2cc_unprot why)
{
	r2cc_status_qp_unprot(mq->slot, why);
	r2cc_mig_set_state(mq, R2CC_PROT_NONE);
	r2cc_mig_untune_due(mq);
}

uint32_t r2cc_mig_state(const struct r2cc_mig_qp *mq)
{
	return mq ? atomic_load(&mq->state) : R2CC_PROT_NONE;
}

/* A peer's message, on the inbox thread (inbox.c) */
static void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m)
{
	pthread_mutex_lock(&ps.lock);
	switch (m->hdr.type) {
	case R2CC_CTRL_MR_KEYS:
		r2cc_mig_got_mr_keys(peer, m);
		break;
	case R2CC_CTRL_MR_INVALIDATE:
		r2cc_mig_got_mr_inval(peer, m);
		break;
	case R2CC_CTRL_FAILOVER:
	case R2CC_CTRL_FAILOVER_ACK:
		r2cc_mig_got_failover(peer, m);
		break;
	case R2CC_CTRL_QP_BIND:
		r2cc_mig_got_bind(peer, m);
		break;
	case R2CC_CTRL_FAILBACK:
		r2cc_mig_got_failback(peer, m);
		break;
	case R2CC_CTRL_KEEPALIVE:
		break; /* (the channel noted that the peer lives) */
	default:
		r2cc_status_ctrl_add(R2CC_CTRL_MSGS_DROPPED, 1);
		r2cc_dbg("control message %u not handled yet", m->hdr.type);
	}
	pthread_mutex_unlock(&ps.lock);
}

static void lookup(const struct r2cc_ctrl_qp_ref *q,
		   struct r2cc_ctrl_lookup_reply *r)
{
	char dev[R2CC_DEVNAME_MAX];
	uint16_t port;
	int n;

	r->found = 0;
	if (ps.env.dev_of_gid(q->gid, dev, sizeof(dev))) {
		r2cc_dbg("lookup of QP %#x: no device here has its GID",
			 q->qpn);
		return;
	}
	n = r2cc_status_find_qp(dev, q->qpn, &r->owner, &port, &r->pid);
	if (n) {
		r2cc_dbg("lookup of QP %#x on %s: no live owner (%s)", q->qpn,
			 dev, strerror(-n));
		return;
	}
	n = r2cc_chan_addrs(r->addr, R2CC_CTRL_MAX_ADDRS, port);
	if (n <= 0) {
		r2cc_dbg("lookup of QP %#x: no address to give (%s)", q->qpn,
			 strerror(n ? -n : ENOENT));
		return;
	}
	r->naddr = (uint8_t)n;
	r->found = 1;
}

int r2cc_mig_start(const struct r2cc_config *cfg,
		   const struct r2cc_mig_verbs *v,
		   const struct r2cc_mig_env *env, const char *const *rail_if,
		   int nrail)
{
	/* What asks for ps.lock or verbs calls runs on the inbox thread;
	 * lookups read the status records, on the channel's. */
	static const struct r2cc_chan_hooks hooks = {
		.on_msg = r2cc_mig_inbox_msg,
		.on_resolved = r2cc_mig_inbox_resolved,
		.lookup = lookup,
		.on_tick = r2cc_mig_inbox_tick,
		.on_lost = r2cc_mig_keys_lost,
		.busy_since = r2cc_mig_inbox_busy_since,
	};
	static const struct r2cc_mig_inbox_ops ops = {
		.msg = on_msg,
		.resolved = r2cc_mig_on_resolved,
		.tick = r2cc_mig_inbox_tick_quietly,
	};
	struct r2cc_chan_cfg cc = {
		.port = (uint16_t)cfg->ctrl_port,
		.pref_if = cfg->ctrl_if,
		.rail_if = rail_if,
		.nrail = nrail,
		.peers = cfg->peers[0] ? cfg->peers :
					 getenv("SLURM_JOB_NODELIST"),
		.peer_by_gid = cfg->peer_by_gid,
		.node_map = cfg->node_map,
	};
	struct r2cc_ctrl_key key;
	int ret;

	if (!cfg->secret_file[0]) {
		r2cc_info("no R2CC_SECRET_FILE: no control channel, "
			  "connections run unprotected");
		return -ENOKEY;
	}
	ret = r2cc_ctrl_key_load(&key, cfg->secret_file, 0);
	if (ret) {
		r2cc_err("no usable job secret: connections run unprotected");
		return ret;
	}
	pthread_mutex_lock(&ps.lock);
	ps.v = *v;
	ps.env = *env;
	ps.failback = cfg->failback;
	ps.failback_hold_ms = cfg->failback_hold_ms;
	ps.detect_ms = cfg->detect_ms;
	ps.keepalive_ms = cfg->keepalive ? cfg->keepalive_ms : 0;
	ps.lazy = cfg->backup == R2CC_BACKUP_LAZY;
	pthread_mutex_unlock(&ps.lock);
	r2cc_mig_inbox_start(&ops); /* (without: the channel's thread) */
	ret = r2cc_chan_start(&cc, &key, &hooks);
	r2cc_ctrl_key_wipe(&key);
	if (ret) {
		r2cc_mig_inbox_stop();
		r2cc_err("control channel: %s: connections run unprotected",
			 strerror(-ret));
		return ret;
	}
	r2cc_status_ctrl(r2cc_chan_self(), r2cc_chan_port());
	ps.on = true;
	r2cc_info("control channel on port %u (rendezvous %u), id %016llx",
		  r2cc_chan_port(), cfg->ctrl_port,
		  (unsigned long long)r2cc_chan_self());
	return 0;
}

void r2cc_mig_stop(void)
{
	ps.on = false;
	r2cc_chan_stop();
	r2cc_mig_inbox_stop(); /* after the channel: no call comes now */
	pthread_mutex_lock(&ps.lock);
	r2cc_mig_ka_reset();
	r2cc_probe_reset();
	r2cc_mig_early_clear();
	free(ps.nodes);
	ps.nodes = NULL;
	ps.nnodes = ps.nodes_cap = 0;
	pthread_mutex_unlock(&ps.lock);
}

bool r2cc_mig_on(void)
{
	return ps.on && r2cc_chan_running();
}

/* SPDX-License-Identifier: MIT */
/*
 * mkseeds.c - writes the seed corpora of the fuzz targets that take
 * binary input: DIR/ctrl_msg/ (one valid frame of each message type and
 * phase, and a BATCH, sealed with fuzz_ctrl_msg's key) and DIR/status/
 * (a small valid status record). tests/fuzz/corpus/ holds its output; run
 * it again when a format changes: build/tests/fuzz/mkseeds tests/fuzz/corpus
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_msg.h"
#include "policy.h"

#define JOB 0x1122334455667788ULL /* fuzz_ctrl_msg.c's */

static void put(const char *dir, const char *name, const void *b, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void frame(const char *dir, const struct r2cc_ctrl_key *key,
		  struct r2cc_ctrl_msg *m, const char *name)
{
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	int n;

	m->hdr.sender = 0x5e4d;
	m->hdr.seq = 7;
	n = r2cc_ctrl_encode(key, m, buf, sizeof(buf));
	if (n < 0) {
		fprintf(stderr, "mkseeds: %s does not encode\n", name);
		exit(1);
	}
	put(dir, name, buf, (size_t)n);
}

static void addr(struct r2cc_ctrl_addr *a, uint8_t rail)
{
	a->family = 4;
	a->rail = rail;
	a->port = 18650;
	memcpy(a->addr, "\x0a\x00\x00\x01", 4);
}

static void ref(struct r2cc_ctrl_qp_ref *q, uint32_t qpn)
{
	q->qpn = qpn;
	q->gid[10] = q->gid[11] = 0xff;
	memcpy(q->gid + 12, "\x0a\x00\x00\x01", 4);
}

/* A BATCH of a FAILOVER, a QP_BIND and a FAILBACK */
static void batch_seed(const char *dir, const struct r2cc_ctrl_key *key)
{
	struct r2cc_ctrl_batch b = { 0 };
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILOVER;
	m.failover.qpn = 0x11;
	m.failover.reason = R2CC_CTRL_WHY_PEER;
	m.failover.flags = R2CC_CTRL_FO_PSN_VALID;
	m.failover.rq_psn = 0x1234;
	if (r2cc_ctrl_batch_add(&b, &m))
		exit(1);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_QP_BIND;
	ref(&m.qp_bind.local, 0x12);
	ref(&m.qp_bind.peer, 0x13);
	ref(&m.qp_bind.backup, 0x14);
	m.qp_bind.rail = 2;
	m.qp_bind.mtu = 3;
	if (r2cc_ctrl_batch_add(&b, &m))
		exit(1);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_FAILBACK;
	m.failback.qpn = 0x11;
	m.failback.phase = R2CC_CTRL_FB_READY;
	if (r2cc_ctrl_batch_add(&b, &m))
		exit(1);
	memset(&m, 0, sizeof(m));
	r2cc_ctrl_batch_msg(&b, &m);
	frame(dir, key, &m, "batch");
	r2cc_ctrl_batch_free(&b);
}

static void ctrl_seeds(const char *dir)
{
	static const uint8_t secret[32] = "fuzz secret, 32 bytes long.....";
	static const char *const fb[] = { "propose", "ready", "rearm",
					  "abort" };
	struct r2cc_ctrl_key key;
	struct r2cc_ctrl_msg m;
	char name[64];
	int i;

	if (r2cc_ctrl_key_derive(&key, secret, 32, JOB))
		exit(1);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_HELLO;
	m.hello.ver_min = m.hello.ver_max = R2CC_CTRL_VERSION;
	m.hello.pid = 4242;
	m.hello.naddr = 2;
	addr(&m.hello.addr[0], R2CC_CTRL_RAIL_MGMT);
	addr(&m.hello.addr[1], 1);
	frame(dir, &key, &m, "hello");
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_LOOKUP;
	ref(&m.lookup, 0x11);
	frame(dir, &key, &m, "lookup");
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_LOOKUP_REPLY;
	ref(&m.lookup_reply.what, 0x11);
	m.lookup_reply.found = 1;
	m.lookup_reply.pid = 4242;
	m.lookup_reply.owner = 0x5e4e;
	m.lookup_reply.naddr = 1;
	addr(&m.lookup_reply.addr[0], R2CC_CTRL_RAIL_MGMT);
	frame(dir, &key, &m, "lookup_reply");
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_QP_BIND;
	ref(&m.qp_bind.local, 0x11);
	ref(&m.qp_bind.peer, 0x12);
	ref(&m.qp_bind.backup, 0x13);
	m.qp_bind.psn = 0x123456;
	m.qp_bind.rail = 1;
	m.qp_bind.mtu = 3;
	m.qp_bind.flags = R2CC_CTRL_BIND_PINNED;
	frame(dir, &key, &m, "qp_bind");
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_KEYS;
	m.mr_keys.rail = 2;
	m.mr_keys.n = 3;
	for (i = 0; i < 3; i++) {
		m.mr_keys.mr[i].rkey = 0x100u + (uint32_t)i;
		m.mr_keys.mr[i].backup_rkey = 0x200u + (uint32_t)i;
		m.mr_keys.mr[i].addr = 0x7f0000000000ULL + (uint64_t)i * 4096;
		m.mr_keys.mr[i].len = 4096;
	}
	frame(dir, &key, &m, "mr_keys");
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_MR_INVALIDATE;
	m.mr_inval.n = 2;
	m.mr_inval.rkey[0] = 0x100;
	m.mr_inval.rkey[1] = 0x101;
	frame(dir, &key, &m, "mr_invalidate");
	for (i = 0; i < 2; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = i ? R2CC_CTRL_FAILOVER_ACK : R2CC_CTRL_FAILOVER;
		m.failover.qpn = 0x11;
		m.failover.reason = R2CC_CTRL_WHY_CARRIER;
		m.failover.flags =
			R2CC_CTRL_FO_PSN_VALID |
			(i ? R2CC_CTRL_FO_RECV_TAKEN : R2CC_CTRL_FO_BACKUP);
		m.failover.rq_psn = 0xabcdef;
		m.failover.recvs = 16;
		m.failover.bqpn = i ? 0 : 0x14;
		m.failover.bpsn = i ? 0 : 0x777;
		frame(dir, &key, &m, i ? "failover_ack" : "failover");
	}
	for (i = 0; i < 4; i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.type = R2CC_CTRL_FAILBACK;
		m.failback.qpn = 0x11;
		m.failback.phase = (uint8_t)i;
		m.failback.psn = 0x424242;
		snprintf(name, sizeof(name), "failback_%s", fb[i]);
		frame(dir, &key, &m, name);
	}
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_KEEPALIVE;
	m.keepalive_ns = 123456789;
	frame(dir, &key, &m, "keepalive");
	batch_seed(dir, &key);
	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_PEER_DOWN;
	m.peer_down.rail = 1;
	m.peer_down.reason = R2CC_CTRL_WHY_CARRIER;
	frame(dir, &key, &m, "peer_down");
}

/* A record with 2 rails, 2 QP slots (one used) and a ring of 4 events. */
static void status_seed(const char *dir)
{
	const size_t nrails = 2, nqps = 2, nev = 4;
	struct r2cc_status_hdr *h;
	struct r2cc_status_rail *r;
	struct r2cc_status_qp *q;
	size_t size;
	char *b;

	size = sizeof(*h) + nrails * sizeof(*r) + nqps * sizeof(*q) +
	       nev * sizeof(struct r2cc_status_event);
	b = calloc(1, size);
	if (!b)
		exit(1);
	h = (void *)b;
	h->sz = sizeof(*h);
	h->version = R2CC_STATUS_VERSION;
	memcpy(h->magic, R2CC_STATUS_MAGIC, sizeof(h->magic));
	snprintf(h->comm, sizeof(h->comm), "seed");
	h->nrails = (uint32_t)nrails;
	h->rail_off = sizeof(*h);
	h->rail_sz = sizeof(*r);
	h->qp_off = h->rail_off + (uint32_t)(nrails * sizeof(*r));
	h->qp_sz = sizeof(*q);
	h->nqps = (uint32_t)nqps;
	h->qp_hwm = (uint32_t)nqps;
	h->ev_off = h->qp_off + (uint32_t)(nqps * sizeof(*q));
	h->ev_sz = sizeof(struct r2cc_status_event);
	h->nev = (uint32_t)nev;
	h->events = 2;
	r = (void *)(b + h->rail_off);
	snprintf(r[0].dev, sizeof(r[0].dev), "mlx5_0");
	snprintf(r[0].netdev, sizeof(r[0].netdev), "ens1f0");
	snprintf(r[1].dev, sizeof(r[1].dev), "mlx5_1");
	q = (void *)(b + h->qp_off);
	q[0].used = 1;
	q[0].qpn = 0x11;
	q[0].type = 2;
	snprintf(q[0].dev, sizeof(q[0].dev), "mlx5_0");
	put(dir, "record", b, size);
	free(b);
}

int main(int argc, char **argv)
{
	char dir[400];

	if (argc != 2) {
		fprintf(stderr, "usage: mkseeds DIR (its ctrl_msg/ and "
				"status/ must exist)\n");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/ctrl_msg", argv[1]);
	ctrl_seeds(dir);
	snprintf(dir, sizeof(dir), "%s/status", argv[1]);
	status_seed(dir);
	return 0;
}

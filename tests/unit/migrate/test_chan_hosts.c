/* SPDX-License-Identifier: MIT */
/*
 * test_chan_hosts.c - resolves through the job's nodes (chan_hosts.c):
 * a GID that carries no IPv4 address (InfiniBand, RoCE over IPv6) is
 * asked of R2CC_PEERS' nodes in turn, a node that knows no owner passed
 * over, and the node that answered is asked first for the GID's next
 * QP; the node R2CC_NODE_MAP names (by GID, or by LID for a QP routed
 * by LID) is asked before them; with
 * R2CC_PEER_BY_GID off an IPv4 GID goes the same way; with no
 * node list, or no node knowing the owner, the resolve ends at once.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "chan.h"
#include "chan_fixture.h"
#include "chan_hosts.h"
#include "chan_int.h"
#include "lid.h"

/* A node's rendezvous on 127.0.0.2 that knows no owner: it answers each
 * LOOKUP (its seq kept) with found 0, counting them. */
struct ownerless {
	int lfd;
	int asked;
	pthread_t t;
};

static void *ownerless_node(void *arg)
{
	struct ownerless *o = arg;
	struct pollfd p = { .fd = o->lfd, .events = POLLIN };
	struct r2cc_ctrl_key key = job_key();
	static uint8_t buf[R2CC_CTRL_FRAME_MAX];
	struct r2cc_ctrl_msg m, rep;
	int cfd, len;

	while (poll(&p, 1, 10000) == 1) {
		cfd = accept(o->lfd, NULL, NULL);
		if (cfd < 0)
			break;
		if (!get_frame(cfd, &key, &m) &&
		    m.hdr.type == R2CC_CTRL_LOOKUP) {
			__atomic_add_fetch(&o->asked, 1, __ATOMIC_SEQ_CST);
			memset(&rep, 0, sizeof(rep));
			rep.hdr.type = R2CC_CTRL_LOOKUP_REPLY;
			rep.hdr.sender = 0x0de0000000000002ULL;
			rep.hdr.receiver = m.hdr.sender;
			rep.hdr.seq = m.hdr.seq;
			rep.lookup_reply.what = m.lookup;
			len = r2cc_ctrl_encode(&key, &rep, buf, sizeof(buf));
			if (len > 0 && write(cfd, buf, (size_t)len) != len)
				len = -1;
		}
		close(cfd);
	}
	return NULL;
}

static void ownerless_start(struct ownerless *o)
{
	o->lfd = other_rendezvous(16);
	o->asked = 0;
	cr_assert_eq(pthread_create(&o->t, NULL, ownerless_node, o), 0);
}

static void ownerless_stop(struct ownerless *o)
{
	shutdown(o->lfd, SHUT_RDWR);
	pthread_join(o->t, NULL);
	close(o->lfd);
}

/* An InfiniBand-like GID (subnet prefix, port GUID: no IPv4 in it) for
 * QP 7 (the fixture's own), one whose sweep of two nodes starts at the
 * first when @first, else at the second */
static struct r2cc_ctrl_qp_ref ib_ref(bool first)
{
	struct r2cc_ctrl_qp_ref q = { .qpn = 7 };
	uint8_t g;

	memcpy(q.gid, "\xfe\x80\0\0\0\0\0\0\x0c\x42\xa1\x03\0\x6e\x2a", 15);
	for (g = 0;; g++) {
		q.gid[15] = g;
		if ((chan_gid_hash(q.gid) % 2 == 0) == first)
			return q;
	}
}

Test(chan_hosts, a_gid_without_ipv4_is_found_through_the_nodes, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = ib_ref(true);
	struct ownerless o;

	ownerless_start(&o);
	/* 127.0.0.2: the ownerless node; 127.0.0.1: ours, the owner */
	start_nodes(&hooks, "127.0.0.2, 127.0.0.1", NULL, true);
	cr_assert_eq(r2cc_chan_resolve(&q, 1), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	cr_assert_eq(got_peer, r2cc_chan_self(), "how %d", got_how);
	cr_assert_eq(o.asked, 1, "the first node not asked: %d", o.asked);
	/* The GID's node is known now: straight there */
	cr_assert_eq(r2cc_chan_resolve(&q, 2), 0);
	cr_assert(wait_for(&resolved, 2), "no second resolve within 10 s");
	cr_assert_eq(got_cookie, 2);
	cr_assert_eq(got_peer, r2cc_chan_self());
	cr_assert_eq(o.asked, 1, "the ownerless node asked again");
	r2cc_chan_stop();
	ownerless_stop(&o);
}

Test(chan_hosts, many_resolves_of_one_gid_sweep_once, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = ib_ref(true);
	struct ownerless o;
	int i;

	ownerless_start(&o);
	start_nodes(&hooks, "127.0.0.2,127.0.0.1", NULL, true);
	for (i = 1; i <= 16; i++)
		cr_assert_eq(r2cc_chan_resolve(&q, (uint64_t)i), 0);
	cr_assert(wait_for(&resolved, 16), "not all resolved within 10 s");
	cr_assert_eq(got_peer, r2cc_chan_self());
	cr_assert_eq(o.asked, 1, "the ownerless node asked %d times", o.asked);
	r2cc_chan_stop();
	ownerless_stop(&o);
}

/* @q resolved with @map naming its node: that node (ours, 127.0.0.1)
 * answers, the ownerless one the sweep would ask first is not asked */
static void map_asked_first(const struct r2cc_ctrl_qp_ref *q, const char *map)
{
	struct ownerless o;

	ownerless_start(&o);
	start_nodes(&hooks, "127.0.0.2,127.0.0.1", map, true);
	cr_assert_eq(r2cc_chan_resolve(q, 1), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	cr_assert_eq(got_peer, r2cc_chan_self(), "how %d", got_how);
	cr_assert_eq(o.asked, 0, "a node asked before the map's");
	r2cc_chan_stop();
	ownerless_stop(&o);
}

Test(chan_hosts, the_node_map_is_asked_first, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = ib_ref(true);
	char map[96];

	/* the sweep alone would ask the ownerless node first */
	snprintf(map, sizeof(map), "fe80::c42:a103:6e:2a%02x=localhost",
		 q.gid[15]);
	map_asked_first(&q, map);
}

/* A QP routed by LID (lid.h's key): the map's "lid:" entry names its
 * node, asked before the sweep's first (the ownerless node) */
Test(chan_hosts, the_node_map_names_a_port_by_its_lid, .timeout = 30)
{
	static const uint8_t g0[16] = { 0xfe, 0x80 };
	struct r2cc_ctrl_qp_ref q = { .qpn = 7 };
	uint16_t lid;
	char map[64];

	for (lid = 1;; lid++) {
		cr_assert_eq(r2cc_lid_key(g0, lid, 0, q.gid), 0);
		if (chan_gid_hash(q.gid) % 2 == 0)
			break;
	}
	snprintf(map, sizeof(map), "lid:%#x=localhost", lid);
	map_asked_first(&q, map);
}

Test(chan_hosts, no_node_knowing_the_owner_ends_the_resolve, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = ib_ref(false);
	struct ownerless o;

	ownerless_start(&o);
	start_nodes(&hooks, "127.0.0.2", NULL, true);
	cr_assert_eq(r2cc_chan_resolve(&q, 3), 0);
	cr_assert(wait_for(&resolved, 1), "unbounded resolve");
	cr_assert_eq(got_peer, 0);
	cr_assert_eq(got_how, R2CC_RES_NO_OWNER, "%d", got_how);
	cr_assert_eq(o.asked, 1);
	r2cc_chan_stop();
	ownerless_stop(&o);
}

Test(chan_hosts, without_a_node_list_such_a_gid_ends_at_once)
{
	struct r2cc_ctrl_qp_ref q = ib_ref(true);

	start_nodes(&hooks, NULL, NULL, true);
	cr_assert_eq(r2cc_chan_resolve(&q, 4), 0);
	cr_assert(wait_for(&resolved, 1), "unbounded resolve");
	cr_assert_eq(got_peer, 0);
	cr_assert_eq(got_how, R2CC_RES_NO_R2CC, "%d", got_how);
	cr_assert_eq(lookups, 0, "a node asked");
	r2cc_chan_stop();
}

/* R2CC_PEER_BY_GID off: the GID's address (TEST-NET-1, where nothing
 * answers) is not dialled, the nodes are, and a name is resolved */
Test(chan_hosts, peer_by_gid_off_asks_the_nodes, .timeout = 30)
{
	struct r2cc_ctrl_qp_ref q = loopback_ref(7);
	struct r2cc_chan_stats st;

	memcpy(q.gid + 12, "\xc0\x00\x02\x01", 4);
	start_nodes(&hooks, "localhost", NULL, false);
	cr_assert_eq(r2cc_chan_resolve(&q, 5), 0);
	cr_assert(wait_for(&resolved, 1), "no resolve within 10 s");
	cr_assert_eq(got_peer, r2cc_chan_self(), "how %d", got_how);
	r2cc_chan_get_stats(&st);
	cr_assert_eq(st.conn_fail, 0);
	r2cc_chan_stop();
}

/* SPDX-License-Identifier: MIT */
/*
 * test_lid.c - InfiniBand QPs routed by LID, no GRH (lid.c, standby.c,
 * bind.c): the LID keys both ends name their ports by, the standby's
 * address vector, and a LID-routed QP protected, bound and moved with a
 * scripted verbs table whose ports answer as a ConnectX-6 HCA's do on a
 * Quantum HDR switch (ibv_devinfo -v: link_layer InfiniBand, state
 * PORT_ACTIVE, max_mtu and active_mtu 4096, sm_lid 1, port_lmc 0x00,
 * active_width 4X (2), active_speed 50.0 Gbps (64); GID 0 the subnet's
 * default prefix fe80::/64 and the port GUID).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "lid.h"
#include "protect.h"
#include "tick.h"

#include "fo_fixture.h"

/* Our program's port (rail 0), our standby's (rail 1), the peer's
 * primary and standby ports: GUIDs of Mellanox's OUI 0c:42:a1 */
#define OUR_LID 0x1a
#define OUR_BLID 0x2a
#define PEER_LID 0x1b
#define PEER_BLID 0x2c
#define PEER_BQPN 0x77

static const uint8_t our_gid[16] = { 0xfe, 0x80, 0,    0,    0,	   0,
				     0,	   0,	 0x0c, 0x42, 0xa1, 0x03,
				     0x00, 0xb5, 0x7c, 0x30 };
static const uint8_t our_bgid[16] = { 0xfe, 0x80, 0,	0,    0,    0,
				      0,    0,	  0x0c, 0x42, 0xa1, 0x03,
				      0x00, 0xb5, 0x9e, 0x18 };
static const uint8_t peer_bgid[16] = { 0xfe, 0x80, 0,	 0,    0,    0,
				       0,    0,	   0x0c, 0x42, 0xa1, 0x03,
				       0x00, 0xc1, 0x22, 0x04 };

static struct ibv_context pctx; /* the program's HCA */
static struct ibv_pd bpd;
static struct ibv_qp_attr attr; /* what the program set, at RTR */

static struct ibv_port_attr hdr_port(uint16_t lid, uint8_t lmc)
{
	struct ibv_port_attr pa;

	memset(&pa, 0, sizeof(pa));
	pa.state = IBV_PORT_ACTIVE;
	pa.max_mtu = pa.active_mtu = IBV_MTU_4096;
	pa.lid = lid;
	pa.sm_lid = 1;
	pa.lmc = lmc;
	pa.link_layer = IBV_LINK_LAYER_INFINIBAND;
	pa.active_width = 2;
	pa.active_speed = 64;
	pa.gid_tbl_len = 128;
	pa.pkey_tbl_len = 128;
	return pa;
}

static void key_of(uint16_t lid, uint8_t key[16])
{
	cr_assert_eq(r2cc_lid_key(our_gid, lid, 0, key), 0);
}

/* The module on, our two ports known; the program's QP made (on pctx),
 * not at RTR yet. */
static void lid_setup(void)
{
	struct ibv_qp_cap cap = { .max_send_wr = 8,
				  .max_recv_wr = 8,
				  .max_send_sge = 1,
				  .max_recv_sge = 1 };

	start();
	fo_rails();
	fo_ports[0].ctx = &pctx;
	fo_ports[0].attr = hdr_port(OUR_LID, 0);
	memcpy(fo_ports[0].gid0, our_gid, 16);
	fo_ports[1].ctx = &ctx;
	fo_ports[1].attr = hdr_port(OUR_BLID, 0);
	memcpy(fo_ports[1].gid0, our_bgid, 16);
	ctx.ops.post_send = f_post_send;
	ctx.ops.post_recv = f_post_recv;
	ctx.ops.poll_cq = f_poll_cq;
	ctx.ops.req_notify_cq = f_req_notify;
	pctx.ops = ctx.ops;
	memset(&prim, 0, sizeof(prim));
	memset(&back, 0, sizeof(back));
	memset(&bcq, 0, sizeof(bcq));
	prim.qp.context = &pctx;
	back.qp.context = bcq.cq.context = &ctx;
	prim.qp.qp_num = 0x11;
	back.qp.qp_num = 0x51;
	mc = r2cc_mig_cq_new(NULL, 16);
	cr_assert(mc);
	mq = r2cc_mig_qp_new(&prim.qp, &cap, false, mc, mc, NULL, NULL);
	cr_assert(mq);
	/* the program's RTR: a path by LID, as NCCL's and UCX's on IB */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	attr.path_mtu = IBV_MTU_4096;
	attr.dest_qp_num = PEER_QPN;
	attr.rq_psn = 0x100;
	attr.max_dest_rd_atomic = 16;
	attr.min_rnr_timer = 12;
	attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	attr.ah_attr.dlid = PEER_LID;
	attr.ah_attr.sl = 3;
	attr.ah_attr.static_rate = IBV_RATE_200_GBPS;
	attr.ah_attr.port_num = 1;
}

/* The peer's QP_BIND (@flags): its primary's and standby's ports, its
 * standby's LID @blid */
static void peer_binds_with(uint16_t blid, uint8_t flags)
{
	struct r2cc_ctrl_msg m;

	memset(&m, 0, sizeof(m));
	m.hdr.type = R2CC_CTRL_QP_BIND;
	m.qp_bind.local.qpn = PEER_QPN;
	key_of(PEER_LID, m.qp_bind.local.gid);
	m.qp_bind.peer.qpn = 0x11;
	key_of(OUR_LID, m.qp_bind.peer.gid);
	m.qp_bind.backup.qpn = PEER_BQPN;
	memcpy(m.qp_bind.backup.gid, peer_bgid, 16);
	m.qp_bind.psn = 0x300;
	m.qp_bind.rail = 1;
	m.qp_bind.mtu = IBV_MTU_4096;
	m.qp_bind.lid = blid;
	m.qp_bind.flags = flags;
	r2cc_mig_test_peer_binds(PEER, &m);
}

static void peer_binds(uint16_t blid)
{
	peer_binds_with(blid, 0);
}

/* The program's QP to RTR (its standby on rail 1), then RTS */
static void protect_and_run(void)
{
	struct r2cc_mig_desc d;

	memset(&d, 0, sizeof(d));
	d.attr = &attr;
	d.rail = 0;
	d.backup_rail = 1;
	d.backup_ctx = &ctx;
	d.backup_pd = &bpd;
	r2cc_mig_protect(mq, &d);
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0x500;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 16;
	cr_assert_eq(r2cc_mig_rts(mq, &attr), 0);
}

TestSuite(lid, .timeout = 20);

Test(lid, a_key_is_the_subnet_prefix_a_tag_and_the_lid)
{
	static const uint8_t roce[16] = { 0, 0, 0,    0,    0,	0,  0, 0,
					  0, 0, 0xff, 0xff, 10, 10, 0, 1 };
	uint8_t k[16], again[16];
	uint16_t lid = 0;

	cr_assert_eq(r2cc_lid_key(our_gid, OUR_LID, 0, k), 0);
	cr_assert_arr_eq(k, our_gid, 8, "the subnet prefix first");
	cr_assert_eq(k[14], 0);
	cr_assert_eq(k[15], OUR_LID);
	cr_assert(r2cc_lid_of_key(k, &lid));
	cr_assert_eq(lid, OUR_LID);
	cr_assert_not(r2cc_lid_of_key(our_gid, NULL), "a port GID is no key");
	cr_assert_not(r2cc_lid_of_key(roce, NULL), "a RoCE GID is no key");
	cr_assert_eq(r2cc_lid_key(our_bgid, OUR_LID, 0, again), 0);
	cr_assert_arr_eq(k, again, 16, "the GUID is not in it: one subnet");
	cr_assert(r2cc_lid_key_is_port(k, our_gid, OUR_LID, 0));
	cr_assert_not(r2cc_lid_key_is_port(k, our_gid, OUR_LID + 1, 0));
	cr_assert_not(r2cc_lid_key_is_port(k, peer_bgid + 0, OUR_LID, 8),
		      "LMC 8 does not exist");
}

Test(lid, what_is_no_unicast_lid_has_no_key)
{
	uint8_t k[16];

	memset(k, 0x5a, sizeof(k));
	cr_assert_eq(r2cc_lid_key(our_gid, 0, 0, k), -EINVAL, "unassigned");
	cr_assert_eq(r2cc_lid_key(our_gid, 0xc000, 0, k), -EINVAL, "multicast");
	cr_assert_eq(r2cc_lid_key(our_gid, 0xffff, 0, k), -EINVAL,
		     "permissive");
	cr_assert_eq(r2cc_lid_key(our_gid, 0x20, 8, k), -EINVAL, "LMC 8");
	cr_assert_eq(r2cc_lid_key(our_gid, 3, 2, k), -EINVAL,
		     "its base LID would be 0");
	cr_assert_eq(k[0], 0x5a, "left untouched");
	cr_assert_eq(r2cc_lid_key(our_gid, R2CC_LID_UNICAST_MAX, 0, k), 0);
}

/* An LMC of 2: a port answers to 4 LIDs, a peer's DLID may carry path
 * bits; both ends name the port by its base LID. */
Test(lid, path_bits_name_the_same_port)
{
	uint8_t base[16], k[16];
	uint16_t l;

	cr_assert_eq(r2cc_lid_key(our_gid, 0x20, 2, base), 0);
	for (l = 0x20; l < 0x24; l++) {
		cr_assert_eq(r2cc_lid_key(our_gid, l, 2, k), 0);
		cr_assert_arr_eq(k, base, 16, "LID %#x", l);
		cr_assert(r2cc_lid_key_is_port(k, our_gid, l, 2));
	}
	cr_assert_eq(r2cc_lid_key(our_gid, 0x24, 2, k), 0);
	cr_assert_not(r2cc_lid_key_is_port(k, our_gid, 0x20, 2),
		      "the next port's LIDs");
	cr_assert_eq(r2cc_lid_key(our_gid, 0x21, 0, k), 0);
	cr_assert(r2cc_lid_key_is_port(k, our_gid, 0x20, 2),
		  "an unmasked DLID still finds its port");
	k[7] ^= 1;
	cr_assert_not(r2cc_lid_key_is_port(k, our_gid, 0x20, 2),
		      "another subnet's");
}

/* Both ends' names from our port: its base LID, the DLID masked with
 * its LMC; none on RoCE, or before the subnet manager gave a LID. */
Test(lid, the_ends_are_named_from_our_port)
{
	struct ibv_port_attr pa = hdr_port(0x40, 2);
	uint8_t src[16], dst[16], k[16];

	cr_assert_eq(r2cc_lid_ends(our_gid, &pa, 0x83, src, dst), 0);
	cr_assert_eq(r2cc_lid_key(our_gid, 0x40, 0, k), 0);
	cr_assert_arr_eq(src, k, 16);
	cr_assert_eq(r2cc_lid_key(our_gid, 0x80, 0, k), 0);
	cr_assert_arr_eq(dst, k, 16, "the peer's base LID");
	cr_assert_eq(r2cc_lid_ends(our_gid, &pa, 0, src, dst), -EINVAL,
		     "no DLID");
	pa.lid = 0;
	cr_assert_eq(r2cc_lid_ends(our_gid, &pa, 0x83, src, dst), -EINVAL,
		     "no LID from the SM yet");
	pa = hdr_port(0x40, 0);
	pa.link_layer = IBV_LINK_LAYER_ETHERNET;
	cr_assert_eq(r2cc_lid_ends(our_gid, &pa, 0x83, src, dst), -EINVAL,
		     "RoCE routes by GID");
}

Test(lid, the_standby_path_by_lid_keeps_the_programs_level_and_rate)
{
	const struct r2cc_lid_peer p = { .gid = peer_bgid, .lid = PEER_BLID };
	struct ibv_ah_attr prog, ah;

	memset(&prog, 0, sizeof(prog));
	prog.dlid = PEER_LID;
	prog.sl = 3;
	prog.src_path_bits = 1;
	prog.static_rate = IBV_RATE_200_GBPS;
	prog.port_num = 2;
	r2cc_lid_standby_av(&ah, &prog, our_bgid, &p);
	cr_assert_eq(ah.dlid, PEER_BLID, "to the peer's standby port");
	cr_assert_not(ah.is_global, "one subnet: no GRH");
	cr_assert_eq(ah.sl, 3);
	cr_assert_eq(ah.static_rate, IBV_RATE_200_GBPS);
	cr_assert_eq(ah.src_path_bits, 0, "the standby port's base LID");
	cr_assert_eq(ah.port_num, 1, "r2cc's context has one port per rail");
}

Test(lid, a_grh_where_the_program_used_one_or_the_subnets_differ)
{
	const struct r2cc_lid_peer p = { .gid = peer_bgid, .lid = PEER_BLID };
	uint8_t other[16];
	struct ibv_ah_attr prog, ah;

	memset(&prog, 0, sizeof(prog));
	prog.dlid = PEER_LID;
	prog.is_global = 1;
	prog.grh.sgid_index = 3;
	prog.grh.hop_limit = 2;
	prog.grh.traffic_class = 96;
	r2cc_lid_standby_av(&ah, &prog, our_bgid, &p);
	cr_assert(ah.is_global);
	cr_assert_eq(ah.dlid, PEER_BLID, "IB routes by DLID, GRH or not");
	cr_assert_arr_eq(ah.grh.dgid.raw, peer_bgid, 16);
	cr_assert_eq(ah.grh.sgid_index, 3, "the program's index");
	cr_assert_eq(ah.grh.hop_limit, 2);
	cr_assert_eq(ah.grh.traffic_class, 96);
	/* no GRH of the program's, the peer's standby on another subnet */
	memcpy(other, our_bgid, 16);
	other[1] = 0x81;
	memset(&prog, 0, sizeof(prog));
	prog.dlid = PEER_LID;
	r2cc_lid_standby_av(&ah, &prog, other, &p);
	cr_assert(ah.is_global, "a GRH to cross subnets");
	cr_assert_arr_eq(ah.grh.dgid.raw, peer_bgid, 16);
	cr_assert_eq(ah.grh.sgid_index, 0, "r2cc's own: GID 0");
	cr_assert_eq(ah.grh.hop_limit, 64);
}

Test(lid, roce_keeps_its_grh_and_the_programs_dlid)
{
	static const uint8_t g[16] = { 0, 0, 0,	   0,	 0,  0,	 0, 0,
				       0, 0, 0xff, 0xff, 10, 10, 1, 2 };
	const struct r2cc_lid_peer p = { .gid = g, .lid = 0 };
	struct ibv_ah_attr prog, ah;

	memset(&prog, 0, sizeof(prog));
	prog.is_global = 1;
	prog.grh.sgid_index = 1;
	prog.dlid = 0;
	r2cc_lid_standby_av(&ah, &prog, g, &p);
	cr_assert(ah.is_global);
	cr_assert_eq(ah.dlid, 0);
	cr_assert_arr_eq(ah.grh.dgid.raw, g, 16);
	cr_assert_eq(ah.grh.sgid_index, 1);
	cr_assert_eq(ah.grh.hop_limit, 64, "none set: r2cc's");
}

Test(lid, a_qp_routed_by_lid_is_bound_by_its_ports_lids, .init = lid_setup,
     .fini = teardown)
{
	const struct r2cc_ctrl_msg *b;
	uint8_t ours[16], theirs[16];

	peer_binds(PEER_BLID); /* before our RTR: kept for it */
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY, "protected");
	b = fo_last(R2CC_CTRL_QP_BIND);
	cr_assert(b, "our half sent");
	key_of(OUR_LID, ours);
	key_of(PEER_LID, theirs);
	cr_assert_arr_eq(b->qp_bind.local.gid, ours, 16);
	cr_assert_arr_eq(b->qp_bind.peer.gid, theirs, 16);
	cr_assert_eq(b->qp_bind.lid, OUR_BLID, "our standby port's LID");
	cr_assert_arr_eq(b->qp_bind.backup.gid, our_bgid, 16);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.dest_qpn, PEER_BQPN);
	cr_assert_eq(back.ah.dlid, PEER_BLID, "to the peer's standby");
	cr_assert_not(back.ah.is_global);
	cr_assert_eq(back.ah.sl, 3);
	cr_assert_eq(back.ah.static_rate, IBV_RATE_200_GBPS);
	cr_assert_eq(back.ah.port_num, 1);
}

Test(lid, a_qp_routed_by_lid_moves_and_replays, .init = lid_setup,
     .fini = teardown)
{
	peer_binds(PEER_BLID);
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	post(1); /* PSN 0x500 */
	post(2);
	fo_rail_down(0);
	cr_assert_eq(prim.state, IBV_QPS_ERR, "fenced");
	cr_assert(fo_last(R2CC_CTRL_FAILOVER), "the peer told");
	peer_moves(PEER_QPN, 0x501, 0, false); /* WR 1 landed */
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_MIGRATED);
	cr_assert_eq(back.nsent, 1, "only what did not land");
	cr_assert_eq(back.sent[0], 2);
}

Test(lid, a_peer_standby_without_a_lid_leaves_it_unprotected, .init = lid_setup,
     .fini = teardown)
{
	peer_binds(0);
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE,
		     "no path to its standby");
}

Test(lid, a_port_that_answers_no_query_leaves_it_unprotected, .init = lid_setup,
     .fini = teardown)
{
	fo_ports[1].ctx = NULL; /* the standby's HCA answers nothing */
	peer_binds(PEER_BLID);
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
	cr_assert_eq(nmade, 0, "no standby made");
}

/* The subnet manager gives our standby's port another LID: the peer's
 * path to it is stale. The standby is remade there and bound again with
 * the new LID; the peer's answer connects it. An event that changes
 * nothing does nothing. */
Test(lid, a_new_lid_on_the_standbys_port_binds_it_again, .init = lid_setup,
     .fini = teardown)
{
	const struct r2cc_ctrl_msg *b;
	int made, sent;

	peer_binds(PEER_BLID);
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	made = nmade;
	sent = fo_nsent;
	r2cc_mig_rail_lid(1, OUR_BLID); /* CLIENT_REREGISTER: the same LID */
	r2cc_mig_tick();
	cr_assert_eq(nmade, made, "nothing changed");
	cr_assert_eq(fo_nsent, sent);
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	fo_ports[1].attr.lid = OUR_BLID + 0x100; /* LID_CHANGE */
	r2cc_mig_rail_lid(1, OUR_BLID + 0x100);
	r2cc_mig_tick();
	cr_assert_eq(nmade, made + 1, "remade");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_BINDING);
	b = fo_last(R2CC_CTRL_QP_BIND);
	cr_assert(b);
	cr_assert(b->qp_bind.flags & R2CC_CTRL_BIND_AGAIN);
	cr_assert_eq(b->qp_bind.lid, OUR_BLID + 0x100, "its new LID");
	cr_assert_eq(b->qp_bind.rail, 1, "on its rail");
	peer_binds(PEER_BLID); /* the peer's standby, remade for ours */
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.ah.dlid, PEER_BLID);
	made = nmade;
	r2cc_mig_tick();
	cr_assert_eq(nmade, made, "once");
}

/* The peer's standby port got a new LID: its bind again; ours is remade
 * and connected to it by the new LID. */
Test(lid, the_peers_new_lid_makes_ours_follow, .init = lid_setup,
     .fini = teardown)
{
	int made;

	peer_binds(PEER_BLID);
	protect_and_run();
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	made = nmade;
	peer_binds_with(PEER_BLID + 0x100, R2CC_CTRL_BIND_AGAIN);
	cr_assert_eq(nmade, made + 1, "ours remade");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_READY);
	cr_assert_eq(back.state, IBV_QPS_RTS);
	cr_assert_eq(back.ah.dlid, PEER_BLID + 0x100, "by its new LID");
}

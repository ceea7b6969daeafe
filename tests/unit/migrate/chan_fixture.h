/* SPDX-License-Identifier: MIT */
/*
 * chan_fixture.h - what the control channel's tests share (chan_fixture.c):
 * the hooks and what they saw, this process's channel started on a port of
 * its own, and fake peers over loopback TCP.
 */
#ifndef R2CC_TEST_CHAN_FIXTURE_H
#define R2CC_TEST_CHAN_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "chan.h"

/* What the hooks saw, under lock (cond broadcast at each) */
extern pthread_mutex_t lock;
extern pthread_cond_t cond;
extern int resolved, msgs, lookups;
extern uint64_t got_peer, got_cookie;
extern enum r2cc_chan_res_end got_how;
extern struct r2cc_ctrl_msg got_msg;
/* This process owns QPN 7; OWNER_QPN another process (OWNER_ID, its
 * direct port owner_port, the test's listener) */
#define OWNER_QPN 9
#define OWNER_ID 0x0a11ce0000000009ULL
extern uint16_t owner_port;
/* The hooks: they count and keep what they saw; lookup() answers for
 * QPN 7 (this process) and OWNER_QPN */
void on_msg(uint64_t peer, const struct r2cc_ctrl_msg *m);
void on_resolved(uint64_t cookie, uint64_t peer, enum r2cc_chan_res_end how);
void lookup(const struct r2cc_ctrl_qp_ref *q, struct r2cc_ctrl_lookup_reply *r);
extern const struct r2cc_chan_hooks hooks;

/* Wait until *@v reaches @n, at most 10 s. */
bool wait_for(int *v, int n);
/* This test process's rendezvous port */
uint16_t port(void);
/* The job key every test process shares (self 0: frames to anyone). */
struct r2cc_ctrl_key job_key(void);
/* The channel started with @h (start(): the hooks above) */
void start_with(const struct r2cc_chan_hooks *h);
/* ... with the job's nodes @peers (R2CC_PEERS), R2CC_NODE_MAP @map and
 * R2CC_PEER_BY_GID */
void start_nodes(const struct r2cc_chan_hooks *h, const char *peers,
		 const char *map, bool by_gid);
void start(void);
/* (GID of 127.0.0.1, @qpn) */
struct r2cc_ctrl_qp_ref loopback_ref(uint32_t qpn);
/* A listener on 127.0.0.2's rendezvous port, taking its connections
 * before the channel's own (wildcard) one. */
int other_rendezvous(int backlog);
/* One whole frame from @fd within 10 s, decoded into @m: 0 or -1 (no
 * assertion: test threads use it too). */
int get_frame(int fd, const struct r2cc_ctrl_key *key, struct r2cc_ctrl_msg *m);
/* ... asserted */
void read_frame(int fd, const struct r2cc_ctrl_key *key,
		struct r2cc_ctrl_msg *m);
/* @id's HELLO (seq @seq, naming @naddr addresses) written on @fd */
void say_hello(int fd, const struct r2cc_ctrl_key *key, uint64_t id,
	       uint64_t seq, const struct r2cc_ctrl_addr *addr, int naddr);
/* The same with R2CC_CTRL_HELLO_* @flags */
void say_hello_flags(int fd, const struct r2cc_ctrl_key *key, uint64_t id,
		     uint64_t seq, const struct r2cc_ctrl_addr *addr, int naddr,
		     uint8_t flags);
/* A peer (@id) dialling our direct port: its HELLO, then our answer;
 * @rcvbuf: its receive buffer (0: the default). */
int fake_peer_buf(const struct r2cc_ctrl_key *key, uint64_t id, uint64_t seq,
		  int rcvbuf);
int fake_peer(const struct r2cc_ctrl_key *key, uint64_t id, uint64_t seq);
/* RLIMIT_NOFILE's soft limit set (the test skipped if the hard one is
 * lower) */
void nofile(rlim_t soft);

#endif /* R2CC_TEST_CHAN_FIXTURE_H */

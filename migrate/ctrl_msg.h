/* SPDX-License-Identifier: MIT */
/*
 * ctrl_msg.h - the shim-to-shim control message codec (DESIGN §5): framing,
 * typed bodies, HMAC-SHA-256 with the per-job key (ctrl_key.h, with the
 * replay window). Pure logic, no I/O. Locks: none (caller's).
 */
#ifndef R2CC_CTRL_MSG_H
#define R2CC_CTRL_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "ctrl_key.h"

/*
 * Wire format, version 1. Integers are little-endian; GIDs and IP
 * addresses are byte strings in network order; "rsv" bytes must be 0.
 *   header (44): "R2CC" | version u8 | type u8 | flags u16 (0) | body len
 *                u32 | job id u64 | sender id u64 | receiver id u64 |
 *                seq u64 (>= 1)
 *   The receiver id binds a frame to one process: a frame captured on its
 *   way to one peer is refused by every other. Only HELLO and LOOKUP, the
 *   first contact, may go to R2CC_CTRL_ANY.
 *   body (len, at most 64 KiB) | HMAC-SHA-256 (32) of header and body
 * addr (20): family u8 (4, 6) | rail u8 (< 16, 0xff mgmt) | port u16 (> 0) |
 *            address 16 (IPv4: 4 bytes, then 12 zero bytes)
 * Bodies, by type:
 *  1 HELLO:         ver_min u8 | ver_max u8 | naddr u8 | rsv u8 | pid u32 |
 *                   naddr x addr (naddr <= 16)
 *  2 LOOKUP:        qpn u32 | gid 16
 *  3 LOOKUP_REPLY:  qpn u32 | gid 16 | found u8 | naddr u8 | rsv u16 |
 *                   pid u32 | owner id u64 | naddr x addr (none if !found)
 *  4 QP_BIND:       qpn u32 | gid 16 (local primary) | qpn u32 | gid 16
 *                   (peer primary) | qpn u32 | gid 16 (backup) | psn u32 |
 *                   rail u8 | mtu u8 (1..5, enum ibv_mtu) | flags u8
 *                   (bit 0: the rail is pinned, bit 1: lazy: the backup
 *                   is made at a failover, its qpn and psn are 0) | rsv u8
 *                   | lid u16 (the backup's port's, InfiniBand: a unicast
 *                   LID; RoCE: 0)
 *  5 MR_KEYS:       n u16 (<= 256) | rail u8 (< 16: the shadows') | rsv u8 |
 *                   n x (rkey u32 | backup rkey u32 | addr u64 | len u64),
 *                   addr + len no overflow
 *  6 MR_INVALIDATE: n u16 (<= 256) | rsv u16 | n x rkey u32
 *  7 FAILOVER,
 *  8 FAILOVER_ACK:  qpn u32 | reason u8 | flags u8 (bit 0: rq_psn valid,
 *                   bit 1: ACK only: a receive is taken, see below) |
 *                   bit 2: a backup made at this failover, below,
 *                   bit 3: with bit 2: that backup is connected to the
 *                   receiver's) |
 *                   rsv u16 | rq_psn u32 (0 unless valid) | recvs u64 |
 *                   backup qpn u32 | backup psn u32 (both 0 unless bit 2:
 *                   a lazy QP's backup, made now, to connect to)
 *  9 FAILBACK:      qpn u32 | phase u8 | flags u8 (bit 0: recovered,
 *                   bit 1: urgent) | rsv u16 | psn u32 (PROPOSE, READY:
 *                   the sender's round; ABORT: the round it ends, the
 *                   sender's or the receiver's; REARM: the backup's)
 * 10 KEEPALIVE:     timestamp u64
 * 11 PEER_DOWN:     rail u8 | reason u8 | rsv u16
 * 12 BATCH:         n u16 (>= 1) | rsv u16 | n x (type u8 | rsv u8 |
 *                   len u16 | the body of a message of that type, len
 *                   bytes): many messages about QPs to one peer in one
 *                   frame (one MAC, one seq, one write). Types: QP_BIND,
 *                   MR_KEYS, MR_INVALIDATE, FAILOVER, FAILOVER_ACK,
 *                   FAILBACK.
 * QPNs and PSNs are 24-bit. Decoding is strict, so encode(decode(f)) == f.
 */
#define R2CC_CTRL_VERSION 1
#define R2CC_CTRL_HDR_LEN 44
#define R2CC_CTRL_ANY 0 /* receiver id of a first contact */
#define R2CC_CTRL_MAC_LEN 32
#define R2CC_CTRL_BODY_MAX 65536
#define R2CC_CTRL_FRAME_MAX \
	(R2CC_CTRL_HDR_LEN + R2CC_CTRL_BODY_MAX + R2CC_CTRL_MAC_LEN)
#define R2CC_CTRL_MAX_ADDRS 16
#define R2CC_CTRL_MAX_MRS 256
#define R2CC_CTRL_RAIL_MAX 16 /* rail indices 0..15 */
#define R2CC_CTRL_RAIL_MGMT 0xff /* the management interface */

enum r2cc_ctrl_type {
	R2CC_CTRL_HELLO = 1,
	R2CC_CTRL_LOOKUP,
	R2CC_CTRL_LOOKUP_REPLY,
	R2CC_CTRL_QP_BIND,
	R2CC_CTRL_MR_KEYS,
	R2CC_CTRL_MR_INVALIDATE,
	R2CC_CTRL_FAILOVER,
	R2CC_CTRL_FAILOVER_ACK,
	R2CC_CTRL_FAILBACK,
	R2CC_CTRL_KEEPALIVE,
	R2CC_CTRL_PEER_DOWN,
	R2CC_CTRL_BATCH,
	R2CC_CTRL_NTYPES,
};

/* Why a rail or QP was failed away from (FAILOVER*, PEER_DOWN) */
enum r2cc_ctrl_reason {
	R2CC_CTRL_WHY_PORT_EVENT, /* port/device async event */
	R2CC_CTRL_WHY_CARRIER, /* netdev carrier down */
	R2CC_CTRL_WHY_CQ_ERROR, /* IBV_WC_RETRY_EXC_ERR and the like */
	R2CC_CTRL_WHY_KEEPALIVE, /* keepalive probes unanswered */
	R2CC_CTRL_WHY_PEER, /* told by the peer */
	R2CC_CTRL_WHY_ADMIN, /* r2cc-ctl or a fault injection */
	R2CC_CTRL_WHY_FAILBACK, /* FAILOVER*: the planned move back */
	R2CC_CTRL_WHY_SRQ, /* a QP sharing its SRQ failed over */
	R2CC_CTRL_NREASONS,
};

enum r2cc_ctrl_fb_phase {
	/* The primary's rail is healthy past the hold: psn is the first
	 * send PSN of the sender's recycled primary. Both sides' proposals
	 * make each recycle its primary. */
	R2CC_CTRL_FB_PROPOSE,
	/* The sender's primary is recycled and connected to ours: once both
	 * are, each fences its backup (the move). */
	R2CC_CTRL_FB_READY,
	/* Moved back: the backup is re-armed; psn is its new first PSN
	 * (R2CC_CTRL_FB_NOARM: it cannot be now). */
	R2CC_CTRL_FB_REARM,
	R2CC_CTRL_FB_ABORT, /* not now (the rail went down again, or busy) */
	/* Moving back: the sender's receives are re-posted on its primary
	 * (after our FAILOVER_ACK); psn is its round's (PROPOSE). Our
	 * replay goes into it only then: a SEND ahead of them is RNR
	 * NAKed, and rxe counts its ACK timer through RNR waits. */
	R2CC_CTRL_FB_POSTED,
	R2CC_CTRL_FB_NPHASES,
};

#define R2CC_CTRL_FO_PSN_VALID (1U << 0)
/* FAILOVER_ACK: the first message not executed was partly received and
 * is a SEND: the receiver took an SRQ receive for it (SRQ accounting). */
#define R2CC_CTRL_FO_RECV_TAKEN (1U << 1)
/* FAILOVER: a lazy QP's backup was made at this failover: bqpn, bpsn */
#define R2CC_CTRL_FO_BACKUP (1U << 2)
/* FAILOVER with _BACKUP: and it is connected to the receiver's (RTR): the
 * receiver may replay into it. Sent again with it when the sender's
 * backup is connected after its first FAILOVER went out. */
#define R2CC_CTRL_FO_CONNECTED (1U << 3)
/* QP_BIND: the sender cannot move its backup to another rail (its QP
 * shares an SRQ whose backup sits on this rail): the peer's follows. */
#define R2CC_CTRL_BIND_PINNED (1U << 0)
/* QP_BIND: the sender makes its backup only at a failover (R2CC_BACKUP=
 * lazy): no backup QPN or PSN yet. A peer that makes its backup eagerly
 * gets one from it at once (both ends lazy, or neither). */
#define R2CC_CTRL_BIND_LAZY (1U << 1)
/* QP_BIND: the sender's standby moved to this rail (its old one's rail
 * went down) while both ends run on their own QPs: a bound receiver
 * makes a new standby there and binds again. */
#define R2CC_CTRL_BIND_AGAIN (1U << 2)
/* QP_BIND: an answer to the peer's bind heard again (the peer never got
 * ours): never answered itself, or two bound ends would echo each
 * other's binds for ever. */
#define R2CC_CTRL_BIND_ECHO (1U << 3)
/* HELLO: the sender's channel to the receiver stalled or its rail went
 * down: this call replaces it, the receiver's frames follow (and the
 * frames it may not have delivered are sent again on it). */
#define R2CC_CTRL_HELLO_REPLACES (1U << 0)
/* FAILBACK PROPOSE: the sender saw its rail go down and come back since
 * the failover (a rail without that evidence, e.g. after a black hole,
 * does not start a move back by itself). */
#define R2CC_CTRL_FB_RECOVERED (1U << 0)
/* FAILBACK PROPOSE: the sender's backup failed; move back now. */
#define R2CC_CTRL_FB_URGENT (1U << 1)
/* FAILBACK REARM: the sender's standby is not re-armed (its rail is down
 * there, or its verbs failed): the receiver's stands down too, and both
 * re-arm once each sends a REARM without it. */
#define R2CC_CTRL_FB_NOARM (1U << 2)

struct r2cc_ctrl_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t rail; /* 0..R2CC_CTRL_RAIL_MAX - 1 or R2CC_CTRL_RAIL_MGMT */
	uint16_t port; /* host order */
	uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes */
};

struct r2cc_ctrl_hdr {
	uint8_t version; /* decode: as received; encode: ignored */
	uint8_t type; /* enum r2cc_ctrl_type */
	uint16_t flags; /* none defined: 0 */
	uint32_t len; /* body bytes; decode only */
	uint64_t job; /* decode only: encode writes the key's */
	uint64_t sender;
	uint64_t receiver; /* the peer's id, or R2CC_CTRL_ANY */
	uint64_t seq;
};

struct r2cc_ctrl_qp_ref {
	uint32_t qpn;
	uint8_t gid[16];
};

struct r2cc_ctrl_mr {
	uint32_t rkey, backup_rkey;
	uint64_t addr, len;
};

struct r2cc_ctrl_failover { /* FAILOVER and FAILOVER_ACK */
	uint32_t qpn; /* the sender's primary QPN */
	uint8_t reason; /* enum r2cc_ctrl_reason */
	uint8_t flags; /* R2CC_CTRL_FO_PSN_VALID */
	uint32_t rq_psn; /* the sender's responder rq_psn */
	uint64_t recvs; /* receives consumed on the QP (or its SRQ share) */
	uint32_t bqpn, bpsn; /* R2CC_CTRL_FO_BACKUP: the backup made now */
};

struct r2cc_ctrl_msg {
	struct r2cc_ctrl_hdr hdr;
	union {
		struct {
			uint8_t ver_min, ver_max, naddr;
			uint8_t flags; /* R2CC_CTRL_HELLO_REPLACES */
			uint32_t pid;
			struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
		} hello;
		struct r2cc_ctrl_qp_ref lookup;
		struct r2cc_ctrl_lookup_reply {
			struct r2cc_ctrl_qp_ref what; /* as asked */
			uint8_t found, naddr;
			uint32_t pid;
			uint64_t owner; /* the owner's sender id */
			struct r2cc_ctrl_addr addr[R2CC_CTRL_MAX_ADDRS];
		} lookup_reply;
		struct r2cc_ctrl_qp_bind {
			struct r2cc_ctrl_qp_ref local, peer, backup;
			uint32_t psn; /* the backup QP's first PSN */
			uint16_t lid; /* the backup's port's (0: RoCE) */
			uint8_t rail, mtu;
			uint8_t flags; /* R2CC_CTRL_BIND_PINNED, _LAZY, _AGAIN,
					* _ECHO */
		} qp_bind;
		struct {
			uint16_t n;
			uint8_t rail; /* where the backup rkeys live */
			struct r2cc_ctrl_mr mr[R2CC_CTRL_MAX_MRS];
		} mr_keys;
		struct {
			uint16_t n;
			uint32_t rkey[R2CC_CTRL_MAX_MRS];
		} mr_inval;
		struct r2cc_ctrl_failover failover;
		struct {
			uint32_t qpn;
			uint8_t phase; /* enum r2cc_ctrl_fb_phase */
			uint8_t flags; /* R2CC_CTRL_FB_RECOVERED */
			uint32_t psn; /* the round's (see above), REARM's */
		} failback;
		uint64_t keepalive_ns;
		struct {
			uint8_t rail, reason;
		} peer_down;
		/* Its messages' encoded entries (r2cc_ctrl_batch_next()):
		 * decoded, they point into the frame decoded */
		struct {
			uint16_t n;
			uint32_t len;
			const uint8_t *body;
		} batch;
	};
};

/* A BATCH being gathered (r2cc_ctrl_batch_add()); zero-initialised
 * empty, its body freed by r2cc_ctrl_batch_free(). */
struct r2cc_ctrl_batch {
	uint16_t n;
	uint32_t len, cap;
	uint8_t *body;
};
/**
 * r2cc_ctrl_batch_add() - @m's body appended to @b
 * Return: 0; -EINVAL (a type a BATCH does not carry, or a field out of
 * range), -ENOSPC (@b is full: send it and start another), -ENOMEM.
 */
int r2cc_ctrl_batch_add(struct r2cc_ctrl_batch *b,
			const struct r2cc_ctrl_msg *m);
/* @b as a BATCH message (its body borrowed from @b) into @m. */
void r2cc_ctrl_batch_msg(const struct r2cc_ctrl_batch *b,
			 struct r2cc_ctrl_msg *m);
void r2cc_ctrl_batch_free(struct r2cc_ctrl_batch *b);
/**
 * r2cc_ctrl_batch_next() - the next message of a decoded BATCH
 * @b: the BATCH (its frame still in memory)
 * @off: 0 at first, moved past the message taken
 * @out: the message, its header @b's but for its type
 * Return: 1, or 0 past the last.
 */
int r2cc_ctrl_batch_next(const struct r2cc_ctrl_msg *b, uint32_t *off,
			 struct r2cc_ctrl_msg *out);

/**
 * r2cc_ctrl_encode() - one authenticated frame
 * @key: the job key; its job id goes in the header
 * @m: the message; hdr.type, flags, sender, receiver, seq and the body
 *     are used
 * @buf: where the frame goes
 * @size: room in @buf (R2CC_CTRL_FRAME_MAX always suffices)
 * Return: the frame length, -EINVAL (a field out of range) or -ENOSPC.
 */
int r2cc_ctrl_encode(const struct r2cc_ctrl_key *key,
		     const struct r2cc_ctrl_msg *m, uint8_t *buf, size_t size);
/**
 * r2cc_ctrl_decode() - check and parse one whole frame
 * @key: the job key
 * @buf: the frame
 * @len: its length, exactly r2cc_ctrl_frame_len()
 * @out: the message (undefined on error)
 * The magic, version and length are checked first, then the job id and
 * MAC, and only an authenticated frame has its body parsed; then the
 * receiver: @key->self, or R2CC_CTRL_ANY for HELLO and LOOKUP. Sequence
 * numbers are the caller's: see r2cc_ctrl_replay_accept().
 * Return: 0; -EBADMSG (malformed, truncated or trailing bytes), -EPROTO
 * (version, type or flags unsupported), -EACCES (other job, bad MAC or
 * another receiver), -EMSGSIZE (body over 64 KiB) or -EIO.
 */
int r2cc_ctrl_decode(const struct r2cc_ctrl_key *key, const uint8_t *buf,
		     size_t len, struct r2cc_ctrl_msg *out);
/**
 * r2cc_ctrl_frame_len() - frame a byte stream from its first @len bytes
 * @buf: the bytes received so far
 * @len: how many
 * Return: the whole frame's length once R2CC_CTRL_HDR_LEN bytes are in,
 * -EAGAIN if more are needed, -EBADMSG (bad magic), -EPROTO (version) or
 * -EMSGSIZE (body over 64 KiB) as soon as the bytes show it.
 */
int r2cc_ctrl_frame_len(const uint8_t *buf, size_t len);

#endif /* R2CC_CTRL_MSG_H */

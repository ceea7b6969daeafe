/* SPDX-License-Identifier: MIT */
/*
 * status.h - part of policy.h: the node-local status each process running
 * r2cc publishes for r2cc-ctl, a versioned shared-memory record readable
 * by its owner (and root) only. The shim writes it; r2cc-ctl reads it.
 */
#ifndef R2CC_POLICY_STATUS_H
#define R2CC_POLICY_STATUS_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define R2CC_STATUS_VERSION 7
#define R2CC_STATUS_MAGIC "r2ccstat"
#define R2CC_STATUS_RAILS 16
/* QP slots per process: room in a sparse file, pages taken as slots are
 * first used; readers look only below qp_hwm */
#define R2CC_STATUS_QPS 65536
#define R2CC_STATUS_EVENTS 64 /* the last events kept, a ring */
#define R2CC_STATUS_DIR "/dev/shm" /* R2CC_STATUS_DIR overrides (tests) */

/* Per-QP counters, updated in place by the data path (relaxed). */
enum r2cc_op_stat {
	R2CC_ST_SEND,
	R2CC_ST_SEND_IMM,
	R2CC_ST_WRITE,
	R2CC_ST_WRITE_IMM,
	R2CC_ST_READ,
	R2CC_ST_ATOMIC,
	R2CC_ST_OTHER,
	R2CC_ST_NR
};
struct r2cc_qp_stats {
	_Atomic uint64_t posted[R2CC_ST_NR];
	_Atomic uint64_t posted_recv;
	_Atomic uint64_t bytes_posted; /* sum of send-side SGE lengths */
	_Atomic uint64_t polled; /* completions of this QP */
	_Atomic uint64_t polled_err;
	_Atomic uint64_t bytes_polled; /* byte_len of receive completions */
};

/* @n more on @c: a relaxed load and store, no locked read-modify-write on
 * the data path. */
static inline void r2cc_stat_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c,
			      atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* One send-queue WR of @op posted, @bytes long (its SGEs' lengths). */
static inline void r2cc_stat_posted(struct r2cc_qp_stats *st, unsigned int op,
				    uint64_t bytes)
{
	static const uint8_t idx[] = {
		[IBV_WR_RDMA_WRITE] = R2CC_ST_WRITE,
		[IBV_WR_RDMA_WRITE_WITH_IMM] = R2CC_ST_WRITE_IMM,
		[IBV_WR_SEND] = R2CC_ST_SEND,
		[IBV_WR_SEND_WITH_IMM] = R2CC_ST_SEND_IMM,
		[IBV_WR_RDMA_READ] = R2CC_ST_READ,
		[IBV_WR_ATOMIC_CMP_AND_SWP] = R2CC_ST_ATOMIC,
		[IBV_WR_ATOMIC_FETCH_AND_ADD] = R2CC_ST_ATOMIC,
		[IBV_WR_LOCAL_INV] = R2CC_ST_OTHER,
		[IBV_WR_BIND_MW] = R2CC_ST_OTHER,
		[IBV_WR_SEND_WITH_INV] = R2CC_ST_SEND,
		[IBV_WR_TSO] = R2CC_ST_OTHER,
		[IBV_WR_DRIVER1] = R2CC_ST_OTHER,
	};

	r2cc_stat_add(&st->posted[op < sizeof(idx) ? idx[op] : R2CC_ST_OTHER],
		      1);
	r2cc_stat_add(&st->bytes_posted, bytes);
}

struct r2cc_status_rail {
	char dev[64];
	char netdev[16];
	uint32_t state; /* enum r2cc_rail_state */
	uint32_t cause; /* enum r2cc_health_cause of the last change */
	uint64_t since_ns, downs, ups;
};

/* What an event is about. */
enum r2cc_status_ev_kind {
	R2CC_EV_RAIL, /* a rail's state changed */
	R2CC_EV_FAILOVER, /* a QP moved to its backup */
	R2CC_EV_FAILBACK, /* a QP moved back to its repaired rail */
	R2CC_EV_FAILOVER_FAILED, /* no failover: the native error shown */
	R2CC_EV_STANDBY, /* a QP's standby moved (its rail went down) */
	R2CC_EV_NKINDS
};
const char *r2cc_status_ev_kind_name(uint32_t kind);

/* Something that happened to a rail or to a QP, in the event ring. */
struct r2cc_status_event {
	uint64_t realtime_ns; /* CLOCK_REALTIME, set by the writer */
	uint32_t kind; /* enum r2cc_status_ev_kind */
	int32_t rail; /* the rail; a QP's: the one it left */
	uint32_t state; /* R2CC_EV_RAIL: enum r2cc_rail_state */
	uint32_t cause; /* enum r2cc_health_cause */
	/* QP events only (0 or -1 otherwise): */
	uint32_t qpn;
	int32_t to_rail; /* the rail it moved to, -1 none */
	uint64_t wrs; /* R2CC_EV_FAILOVER: WRs replayed on the backup */
	uint64_t bytes; /* and the bytes they re-sent */
};

/* How far r2cc protects a QP (failover issue): */
enum r2cc_prot_state {
	R2CC_PROT_NONE, /* passthrough: not RC, no backup rail, no peer */
	R2CC_PROT_BINDING, /* backup made, waiting for the peer's */
	R2CC_PROT_READY, /* backup connected: a failover can happen */
	R2CC_PROT_MIGRATED, /* running on its backup */
	R2CC_PROT_FAILED, /* failover impossible: the native error shown */
	R2CC_PROT_NSTATES
};
const char *r2cc_prot_state_name(uint32_t s);

/* Why a QP runs unprotected (R2CC_PROT_NONE): the last reason r2cc gave
 * up on it for. r2cc-ctl stats and metrics count QPs by it. */
enum r2cc_unprot {
	R2CC_UNPROT_PENDING, /* none given: not connected yet */
	R2CC_UNPROT_NOT_RC, /* UD, UC, raw packet: only RC moves */
	R2CC_UNPROT_OFF, /* r2cc protects nothing: no job secret or channel */
	/* What it uses r2cc cannot follow: memory windows, an SRQ or a CQ
	 * r2cc cannot read, ibv_wr_* operations it cannot replay */
	R2CC_UNPROT_UNSUPPORTED,
	R2CC_UNPROT_NO_RAIL, /* not on a rail, no GRH, no other rail up */
	R2CC_UNPROT_NO_PEER, /* the peer runs no r2cc (or knows no owner) */
	R2CC_UNPROT_UNREACHABLE, /* the peer's r2cc not reached in time */
	R2CC_UNPROT_BIND, /* the ends agreed no standby (rails, MTU, bind) */
	R2CC_UNPROT_BUDGET, /* a budget, the memory or a standby ran out */
	R2CC_UNPROT_LOG_FULL, /* a post or completion r2cc could not log */
	R2CC_UNPROT_ENDED, /* the program ended it, or a move lost it */
	R2CC_UNPROT_N
};
/* "not_rc", ...: the JSON key and metric label of @why; NULL past the
 * last. */
const char *r2cc_unprot_name(uint32_t why);

struct r2cc_status_qp {
	_Atomic uint32_t used; /* 0 free, 1 in use: set last, cleared first */
	uint32_t qpn;
	uint32_t type; /* enum ibv_qp_type */
	int32_t rail; /* index into rails, -1 unknown */
	char dev[64];
	struct r2cc_qp_stats st;
	/* Protection, written by the control thread (relaxed). */
	_Atomic uint32_t prot; /* enum r2cc_prot_state */
	_Atomic int32_t backup_rail; /* -1: none */
	_Atomic uint32_t backup_qpn;
	uint32_t peer_qpn; /* the program's remote QP (RTR) */
	_Atomic uint64_t failovers, replayed_wrs, replayed_bytes;
	/* Moves done: failovers and moves back */
	_Atomic uint64_t moves;
	_Atomic uint32_t unprot; /* enum r2cc_unprot, when prot is NONE */
	uint32_t rsv;
};

/*
 * What r2cc refused past one of its budgets (each also said once in the
 * log): a protection it could not give, or a peer's request it did not
 * keep. r2cc-ctl stats and metrics show them by name.
 */
enum r2cc_refusal {
	R2CC_REFUSE_EARLY_BIND, /* a peer's QP_BIND before our RTR */
	R2CC_REFUSE_PEER_KEYS, /* a peer's memory keys past its budget */
	R2CC_REFUSE_CTRL_CONN, /* a control connection (RLIMIT_NOFILE / 4) */
	R2CC_REFUSE_CTRL_PEER, /* a peer process past those remembered */
	R2CC_REFUSE_RESOLVE, /* a QP's resolve past those under way */
	R2CC_REFUSE_N
};
#define R2CC_REFUSE_SLOTS 8 /* room in the record, >= R2CC_REFUSE_N */

/* The control channel's traffic: frames (one MAC each) and the messages
 * they carried (a BATCH carries many), each way. */
enum r2cc_ctrl_count {
	R2CC_CTRL_FRAMES_OUT,
	R2CC_CTRL_MSGS_OUT,
	R2CC_CTRL_BYTES_OUT,
	R2CC_CTRL_FRAMES_IN,
	R2CC_CTRL_MSGS_IN,
	R2CC_CTRL_BYTES_IN,
	/* Frames refused, their connection closed: malformed, another
	 * job's, a bad MAC, another receiver's, an answer to no lookup, a
	 * sender past the peers' budget */
	R2CC_CTRL_FRAMES_REFUSED,
	/* Peers' messages about QPs this process does not share with them,
	 * and messages it does not act on */
	R2CC_CTRL_MSGS_DROPPED,
	R2CC_CTRL_CNT_N
};
#define R2CC_CTRL_CNT_SLOTS 8 /* room in the record, >= R2CC_CTRL_CNT_N */
/* "frames_out", ...: the JSON key of @what; NULL past the last. */
const char *r2cc_ctrl_count_name(unsigned int what);
/* "early_binds", ...: the JSON key and metric label of @why; NULL past
 * the last. */
const char *r2cc_refusal_name(unsigned int why);

/* The record: a header, then the rails, then the QP slots. Every size and
 * offset is in the header, so a reader can check it before using it. */
struct r2cc_status_hdr {
	uint32_t sz; /* sizeof(struct r2cc_status_hdr) */
	uint32_t version;
	char magic[8];
	int32_t pid;
	uint32_t uid;
	uint64_t starttime; /* /proc/PID/stat field 22: tells pid reuse */
	char comm[16];
	/* Odd while the writer changes a rail or adds an event; readers
	 * retry (seqlock). */
	_Atomic uint32_t gen;
	uint32_t nrails;
	uint32_t rail_off, rail_sz;
	uint32_t qp_off, qp_sz, nqps;
	_Atomic uint64_t qp_overflow; /* QPs that found no free slot */
	uint32_t ev_off, ev_sz, nev; /* the event ring, after the QP slots */
	/* Slots ever used are below it (readers look no further) */
	_Atomic uint32_t qp_hwm;
	uint64_t events; /* events ever added; the last nev are in the ring */
	/* The control channel (0: none): its id and direct TCP port. */
	_Atomic uint64_t ctrl_id;
	_Atomic uint32_t ctrl_port;
	uint32_t rsv2;
	/* What r2cc refused past a budget, by enum r2cc_refusal */
	_Atomic uint64_t refused[R2CC_REFUSE_SLOTS];
	/* The control channel's traffic, by enum r2cc_ctrl_count */
	_Atomic uint64_t ctrl[R2CC_CTRL_CNT_SLOTS];
};

/* Writer (the shim). All return 0 or -errno unless said otherwise. */
int r2cc_status_open(void);
/* Remove the record (at exit); the mapping stays for threads still
 * counting into it. Safe if not open. */
void r2cc_status_close(void);
void r2cc_status_rail(int rail, const char *dev, const char *netdev,
		      uint32_t state, uint32_t cause, uint64_t since_ns,
		      uint64_t downs, uint64_t ups);
/* A slot for a new QP, or NULL (not open, or all in use: counted). */
struct r2cc_status_qp *r2cc_status_qp_add(uint32_t qpn, uint32_t type, int rail,
					  const char *dev);
void r2cc_status_qp_del(struct r2cc_status_qp *slot);
/* Why @slot's QP runs unprotected (any thread; NULL: a no-op). */
void r2cc_status_qp_unprot(struct r2cc_status_qp *slot, enum r2cc_unprot why);
void r2cc_status_event(int rail, uint32_t state, uint32_t cause);
/**
 * r2cc_status_qp_event() - add a QP event (failover, failback, ...)
 * @ev: kind, qpn, rail, to_rail, cause, wrs and bytes; its realtime_ns
 *      and state are set here
 * Any thread; a no-op when the record is not open.
 */
void r2cc_status_qp_event(const struct r2cc_status_event *ev);
/* One more of @why refused (any thread; a no-op when not open). */
void r2cc_status_refused(enum r2cc_refusal why);
/* @n more of @what (any thread; a no-op when not open). */
void r2cc_status_ctrl_add(enum r2cc_ctrl_count what, uint64_t n);
/* This process's control endpoint, for the node's rendezvous. */
void r2cc_status_ctrl(uint64_t id, uint16_t port);
/**
 * r2cc_status_find_qp() - which live r2cc process of this user owns QP
 * @qpn of device @dev (the node rendezvous, DESIGN §5)
 * @id, @port, @pid: its control id and port, and pid
 * Reads every record of the user's in the status directory.
 * Return: 0, -ENOENT (none, or it has no control channel) or -errno.
 */
int r2cc_status_find_qp(const char *dev, uint32_t qpn, uint64_t *id,
			uint16_t *port, uint32_t *pid);

/* Add to @n[r], for each of this node's rails r < @nrail, the backups on
 * it of the user's other live r2cc processes (one pass over their
 * records): the node-wide load placement weighs. */
void r2cc_status_rail_loads(uint32_t *n, int nrail);

/* Reader (r2cc-ctl): one process's record, copied consistently. */
struct r2cc_status_snap {
	struct r2cc_status_hdr hdr;
	struct r2cc_status_rail rails[R2CC_STATUS_RAILS];
	struct r2cc_status_event ev[R2CC_STATUS_EVENTS]; /* oldest first */
	uint32_t nev;
	struct r2cc_status_qp *qps; /* owned: nqps copies, used ones only */
	uint32_t nqps;
};
/**
 * r2cc_status_read() - read the record at @path
 * @path: a file in the status directory
 * @snap: filled; free with r2cc_status_snap_free()
 * Refuses what another user owns (unless root), what fails any check of
 * the header, and a record whose process is gone or whose pid now names
 * another process (-ESRCH: stale; the caller may remove it).
 * Return: 0, -ESRCH, -EPERM, -EBADMSG, -EAGAIN (torn: writer mid-update
 * for 100 tries) or -errno from open/mmap.
 */
int r2cc_status_read(const char *path, struct r2cc_status_snap *snap);
void r2cc_status_snap_free(struct r2cc_status_snap *snap);
/* /proc/PID/stat field 22 (start time in clock ticks), 0 if unknown */
uint64_t r2cc_proc_starttime(pid_t pid);
/* Where the records are: R2CC_STATUS_DIR, or the environment's when it
 * is an absolute path (tests) */
const char *r2cc_status_dir(void);

#endif /* R2CC_POLICY_STATUS_H */

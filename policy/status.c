/* SPDX-License-Identifier: MIT */
/*
 * status.c - the node-local status record, the writer's side: the shim
 * creates it (mode 0600, O_EXCL) and updates it in place. Removed at
 * exit; a record left by a crash is recognised by its pid and start time
 * (status_read.c, the readers' side).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy.h"

#define REC_SIZE                                               \
	(sizeof(struct r2cc_status_hdr) +                      \
	 R2CC_STATUS_RAILS * sizeof(struct r2cc_status_rail) + \
	 R2CC_STATUS_QPS * sizeof(struct r2cc_status_qp) +     \
	 R2CC_STATUS_EVENTS * sizeof(struct r2cc_status_event))

/* The writer's record. Only the opening thread sets these; slots are
 * claimed with atomics, rails are written under lock. */
static struct {
	pthread_mutex_t lock; /* rails and the seqlock */
	struct r2cc_status_hdr *hdr; /* mapped */
	char path[128];
	pid_t pid; /* the process that created it (not a forked child) */
	_Atomic uint32_t free_from; /* no free slot below it, as a rule */
	atomic_flag full_said;
} ws = { .lock = PTHREAD_MUTEX_INITIALIZER };

uint64_t r2cc_proc_starttime(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long st = 0;
	ssize_t n;
	int fd, i;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* The command may hold spaces and parentheses: count from the last
	 * ')'. Field 3 follows it; the start time is field 22. */
	p = strrchr(buf, ')');
	for (i = 2; p && i < 22; i++)
		p = strchr(p + 1, ' ');
	if (p)
		sscanf(p + 1, "%llu", &st);
	return st;
}

static void read_comm(char *buf, size_t size)
{
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, size - 1) : 0;

	if (fd >= 0)
		close(fd);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[n - 1] = '\0';
}

const char *r2cc_status_dir(void)
{
	const char *d = getenv("R2CC_STATUS_DIR");

	return d && d[0] == '/' ? d : R2CC_STATUS_DIR;
}

static void fill_hdr(struct r2cc_status_hdr *h)
{
	h->sz = sizeof(*h);
	h->version = R2CC_STATUS_VERSION;
	memcpy(h->magic, R2CC_STATUS_MAGIC, sizeof(h->magic));
	h->pid = (int32_t)getpid();
	h->uid = (uint32_t)getuid();
	h->starttime = r2cc_proc_starttime(getpid());
	read_comm(h->comm, sizeof(h->comm));
	h->nrails = R2CC_STATUS_RAILS;
	h->rail_off = sizeof(*h);
	h->rail_sz = sizeof(struct r2cc_status_rail);
	h->qp_off = h->rail_off + R2CC_STATUS_RAILS * h->rail_sz;
	h->qp_sz = sizeof(struct r2cc_status_qp);
	h->nqps = R2CC_STATUS_QPS;
	h->ev_off = h->qp_off + R2CC_STATUS_QPS * h->qp_sz;
	h->ev_sz = sizeof(struct r2cc_status_event);
	h->nev = R2CC_STATUS_EVENTS;
}

int r2cc_status_open(void)
{
	void *p;
	int fd, err;

	if (ws.hdr)
		return -EBUSY;
	snprintf(ws.path, sizeof(ws.path), "%s/r2cc.%u.%d", r2cc_status_dir(),
		 (unsigned int)getuid(), (int)getpid());
	/* A record left by an earlier process with our pid is stale. */
	unlink(ws.path);
	fd = open(ws.path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) || ftruncate(fd, (off_t)REC_SIZE)) {
		err = -errno;
		goto fail;
	}
	p = mmap(NULL, REC_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	close(fd);
	fill_hdr(p);
	ws.hdr = p;
	ws.pid = getpid();
	return 0;
fail:
	close(fd);
	unlink(ws.path);
	return err;
}

void r2cc_status_close(void)
{
	if (!ws.hdr || !ws.path[0])
		return;
	/* A forked child leaves its parent's record alone. The mapping
	 * stays: at exit other threads may still be counting into it. */
	if (getpid() == ws.pid)
		unlink(ws.path);
	ws.path[0] = '\0';
}

static struct r2cc_status_rail *rail_at(struct r2cc_status_hdr *h, int i)
{
	return (struct r2cc_status_rail *)((char *)h + h->rail_off +
					   (size_t)i * h->rail_sz);
}

static struct r2cc_status_qp *qp_at(struct r2cc_status_hdr *h, uint32_t i)
{
	return (struct r2cc_status_qp *)((char *)h + h->qp_off +
					 (size_t)i * h->qp_sz);
}

void r2cc_status_rail(int rail, const char *dev, const char *netdev,
		      uint32_t state, uint32_t cause, uint64_t since_ns,
		      uint64_t downs, uint64_t ups)
{
	struct r2cc_status_rail *r;

	if (!ws.hdr || rail < 0 || rail >= R2CC_STATUS_RAILS)
		return;
	pthread_mutex_lock(&ws.lock);
	atomic_fetch_add_explicit(&ws.hdr->gen, 1, memory_order_acq_rel);
	r = rail_at(ws.hdr, rail);
	snprintf(r->dev, sizeof(r->dev), "%s", dev ? dev : "");
	snprintf(r->netdev, sizeof(r->netdev), "%s", netdev ? netdev : "");
	r->state = state;
	r->cause = cause;
	r->since_ns = since_ns;
	r->downs = downs;
	r->ups = ups;
	atomic_fetch_add_explicit(&ws.hdr->gen, 1, memory_order_release);
	pthread_mutex_unlock(&ws.lock);
}

static struct r2cc_status_event *ev_at(struct r2cc_status_hdr *h, uint64_t i)
{
	return (struct r2cc_status_event *)((char *)h + h->ev_off +
					    (size_t)(i % h->nev) * h->ev_sz);
}

/* Add @ev to the ring, stamped now, under the seqlock. */
static void ev_add(const struct r2cc_status_event *ev)
{
	struct r2cc_status_event *e;
	struct timespec ts;

	if (!ws.hdr)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&ws.lock);
	atomic_fetch_add_explicit(&ws.hdr->gen, 1, memory_order_acq_rel);
	e = ev_at(ws.hdr, ws.hdr->events);
	*e = *ev;
	e->realtime_ns =
		(uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	ws.hdr->events++;
	atomic_fetch_add_explicit(&ws.hdr->gen, 1, memory_order_release);
	pthread_mutex_unlock(&ws.lock);
}

void r2cc_status_event(int rail, uint32_t state, uint32_t cause)
{
	struct r2cc_status_event e = { .kind = R2CC_EV_RAIL,
				       .rail = rail,
				       .state = state,
				       .cause = cause,
				       .to_rail = -1 };

	ev_add(&e);
}

void r2cc_status_qp_event(const struct r2cc_status_event *ev)
{
	struct r2cc_status_event e = *ev;

	e.state = 0;
	ev_add(&e);
}

const char *r2cc_status_ev_kind_name(uint32_t kind)
{
	static const char *const n[] = { "rail", "failover", "failback",
					 "failover_failed", "standby" };

	return kind < R2CC_EV_NKINDS ? n[kind] : "?";
}

/* Slot @i claimed: filled in, published (with the high-water mark). */
static struct r2cc_status_qp *claimed(uint32_t i, uint32_t qpn, uint32_t type,
				      int rail, const char *dev)
{
	struct r2cc_status_qp *q = qp_at(ws.hdr, i);
	uint32_t hwm = atomic_load(&ws.hdr->qp_hwm);

	memset(&q->st, 0, sizeof(q->st));
	atomic_store(&q->prot, R2CC_PROT_NONE);
	atomic_store(&q->backup_rail, -1);
	atomic_store(&q->backup_qpn, 0);
	q->peer_qpn = 0;
	atomic_store(&q->failovers, 0);
	atomic_store(&q->moves, 0);
	atomic_store(&q->replayed_wrs, 0);
	atomic_store(&q->replayed_bytes, 0);
	atomic_store(&q->unprot, R2CC_UNPROT_PENDING);
	q->qpn = qpn;
	q->type = type;
	q->rail = rail;
	snprintf(q->dev, sizeof(q->dev), "%s", dev ? dev : "");
	while (hwm < i + 1 &&
	       !atomic_compare_exchange_weak(&ws.hdr->qp_hwm, &hwm, i + 1))
		;
	atomic_store_explicit(&q->used, 1, memory_order_release);
	return q;
}

/* The first slot from @from to @to that this thread claims, or NULL. */
static struct r2cc_status_qp *claim(uint32_t from, uint32_t to, uint32_t qpn,
				    uint32_t type, int rail, const char *dev)
{
	uint32_t i, zero;

	for (i = from; i < to; i++) {
		zero = 0;
		/* Claim with 2 (being filled), publish with 1. */
		if (atomic_compare_exchange_strong(&qp_at(ws.hdr, i)->used,
						   &zero, 2)) {
			atomic_store(&ws.free_from, i + 1);
			return claimed(i, qpn, type, rail, dev);
		}
	}
	return NULL;
}

struct r2cc_status_qp *r2cc_status_qp_add(uint32_t qpn, uint32_t type, int rail,
					  const char *dev)
{
	struct r2cc_status_qp *q;
	uint32_t from;

	if (!ws.hdr)
		return NULL;
	/* From the lowest slot freed, as a rule; all of them (a racing
	 * free may have been passed over) before it says full */
	from = atomic_load(&ws.free_from);
	if (from > ws.hdr->nqps)
		from = 0;
	q = claim(from, ws.hdr->nqps, qpn, type, rail, dev);
	if (!q && from)
		q = claim(0, from, qpn, type, rail, dev);
	if (q)
		return q;
	atomic_fetch_add(&ws.hdr->qp_overflow, 1);
	if (!atomic_flag_test_and_set(&ws.full_said))
		r2cc_warn("QP %#x: more than %u QPs at once, no status slot: "
			  "r2cc-ctl does not show it, and its peers cannot "
			  "find it (it runs unprotected, as every one past "
			  "this many: counted as overflow in r2cc-ctl stats)",
			  qpn, ws.hdr->nqps);
	return NULL;
}

_Static_assert(R2CC_REFUSE_N <= R2CC_REFUSE_SLOTS, "refusals' room");

const char *r2cc_refusal_name(unsigned int why)
{
	static const char *const n[R2CC_REFUSE_N] = {
		[R2CC_REFUSE_EARLY_BIND] = "early_binds",
		[R2CC_REFUSE_PEER_KEYS] = "peer_keys",
		[R2CC_REFUSE_CTRL_CONN] = "ctrl_conns",
		[R2CC_REFUSE_CTRL_PEER] = "ctrl_peers",
		[R2CC_REFUSE_RESOLVE] = "resolves",
	};

	return why < R2CC_REFUSE_N ? n[why] : NULL;
}

const char *r2cc_unprot_name(uint32_t why)
{
	static const char *const n[R2CC_UNPROT_N] = {
		[R2CC_UNPROT_PENDING] = "pending",
		[R2CC_UNPROT_NOT_RC] = "not_rc",
		[R2CC_UNPROT_OFF] = "off",
		[R2CC_UNPROT_UNSUPPORTED] = "unsupported",
		[R2CC_UNPROT_NO_RAIL] = "no_rail",
		[R2CC_UNPROT_NO_PEER] = "no_peer",
		[R2CC_UNPROT_UNREACHABLE] = "unreachable",
		[R2CC_UNPROT_BIND] = "bind",
		[R2CC_UNPROT_BUDGET] = "budget",
		[R2CC_UNPROT_LOG_FULL] = "log_full",
		[R2CC_UNPROT_ENDED] = "ended",
	};

	return why < R2CC_UNPROT_N ? n[why] : NULL;
}

void r2cc_status_qp_unprot(struct r2cc_status_qp *slot, enum r2cc_unprot why)
{
	if (slot)
		atomic_store_explicit(&slot->unprot, why, memory_order_relaxed);
}

void r2cc_status_refused(enum r2cc_refusal why)
{
	if (ws.hdr && (unsigned int)why < R2CC_REFUSE_N)
		atomic_fetch_add(&ws.hdr->refused[why], 1);
}

_Static_assert(R2CC_CTRL_CNT_N <= R2CC_CTRL_CNT_SLOTS, "counters' room");

const char *r2cc_ctrl_count_name(unsigned int what)
{
	static const char *const n[R2CC_CTRL_CNT_N] = {
		[R2CC_CTRL_FRAMES_OUT] = "frames_out",
		[R2CC_CTRL_MSGS_OUT] = "messages_out",
		[R2CC_CTRL_BYTES_OUT] = "bytes_out",
		[R2CC_CTRL_FRAMES_IN] = "frames_in",
		[R2CC_CTRL_MSGS_IN] = "messages_in",
		[R2CC_CTRL_BYTES_IN] = "bytes_in",
		[R2CC_CTRL_FRAMES_REFUSED] = "frames_refused",
		[R2CC_CTRL_MSGS_DROPPED] = "messages_dropped",
	};

	return what < R2CC_CTRL_CNT_N ? n[what] : NULL;
}

void r2cc_status_ctrl_add(enum r2cc_ctrl_count what, uint64_t n)
{
	if (ws.hdr && (unsigned int)what < R2CC_CTRL_CNT_N)
		atomic_fetch_add_explicit(&ws.hdr->ctrl[what], n,
					  memory_order_relaxed);
}

void r2cc_status_ctrl(uint64_t id, uint16_t port)
{
	if (!ws.hdr)
		return;
	atomic_store(&ws.hdr->ctrl_port, port);
	atomic_store(&ws.hdr->ctrl_id, id);
}

const char *r2cc_prot_state_name(uint32_t s)
{
	static const char *const n[] = { "none", "binding", "ready", "migrated",
					 "failed" };

	return s < R2CC_PROT_NSTATES ? n[s] : "?";
}

void r2cc_status_qp_del(struct r2cc_status_qp *slot)
{
	uint32_t i, from;

	if (!slot || !ws.hdr)
		return;
	i = (uint32_t)(((const char *)slot -
			((const char *)ws.hdr + ws.hdr->qp_off)) /
		       ws.hdr->qp_sz);
	atomic_store_explicit(&slot->used, 0, memory_order_release);
	from = atomic_load(&ws.free_from);
	while (i < from &&
	       !atomic_compare_exchange_weak(&ws.free_from, &from, i))
		;
}

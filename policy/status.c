/* SPDX-License-Identifier: MIT */
/*
 * status.c - the node-local status record: the shim creates it (mode 0600,
 * O_EXCL) and updates it in place; r2cc-ctl maps it read-only, checks it,
 * and copies it out under the writer's seqlock. Removed at exit; a record
 * left by a crash is recognised by its pid and start time.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
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

static const char *status_dir(void)
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
	snprintf(ws.path, sizeof(ws.path), "%s/r2cc.%u.%d", status_dir(),
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

/* Every size and offset of @h checked against what this reader knows and
 * against @fsize, the file's size. */
static bool hdr_ok(const struct r2cc_status_hdr *h, size_t fsize)
{
	return fsize >= sizeof(*h) && h->sz == sizeof(*h) &&
	       h->version == R2CC_STATUS_VERSION &&
	       !memcmp(h->magic, R2CC_STATUS_MAGIC, sizeof(h->magic)) &&
	       h->nrails <= R2CC_STATUS_RAILS &&
	       h->rail_sz == sizeof(struct r2cc_status_rail) &&
	       h->qp_sz == sizeof(struct r2cc_status_qp) &&
	       h->nqps <= R2CC_STATUS_QPS && h->rail_off == sizeof(*h) &&
	       h->qp_off == h->rail_off + (uint64_t)h->nrails * h->rail_sz &&
	       h->ev_sz == sizeof(struct r2cc_status_event) && h->nev >= 1 &&
	       h->nev <= R2CC_STATUS_EVENTS &&
	       h->ev_off == h->qp_off + (uint64_t)h->nqps * h->qp_sz &&
	       (uint64_t)h->ev_off + (uint64_t)h->nev * h->ev_sz <= fsize;
}

/* The slots of @h worth reading (ever used), at most its checked
 * copy @hc's count. */
static uint32_t used_slots(const struct r2cc_status_hdr *h,
			   const struct r2cc_status_hdr *hc)
{
	uint32_t n = atomic_load_explicit(&h->qp_hwm, memory_order_acquire);

	return n < hc->nqps ? n : hc->nqps;
}

/* Is the writer of @h still the process that made it? */
static bool alive(const struct r2cc_status_hdr *h)
{
	if (h->pid <= 0 || (kill(h->pid, 0) && errno != EPERM))
		return false;
	return r2cc_proc_starttime(h->pid) == h->starttime;
}

/* The ring's events, oldest first (caller holds the seqlock read). */
/* The ring's events, oldest first (caller holds the seqlock read): the
 * sizes and offsets from @hc, the checked copy of @h's header. */
static void copy_events(const struct r2cc_status_hdr *h,
			const struct r2cc_status_hdr *hc,
			struct r2cc_status_snap *snap)
{
	uint64_t total = h->events, first, i;

	first = total > hc->nev ? total - hc->nev : 0;
	snap->nev = 0;
	for (i = first; i < total; i++)
		memcpy(&snap->ev[snap->nev++],
		       (const char *)h + hc->ev_off +
			       (size_t)(i % hc->nev) * hc->ev_sz,
		       sizeof(snap->ev[0]));
}

/*
 * @h's record copied out. Every size, count and offset comes from @hc,
 * the header copied once and checked (hdr_ok()): the mapping is shared,
 * and what it says may change while it is read.
 */
static int copy_out(const struct r2cc_status_hdr *h,
		    const struct r2cc_status_hdr *hc,
		    struct r2cc_status_snap *snap)
{
	uint32_t i, n, g1, g2, tries;

	for (tries = 0; tries < 100; tries++) {
		g1 = atomic_load_explicit(&h->gen, memory_order_acquire);
		if (g1 & 1) {
			usleep(1000);
			continue;
		}
		memcpy(snap->rails, (const char *)h + hc->rail_off,
		       (size_t)hc->nrails * hc->rail_sz);
		copy_events(h, hc, snap);
		atomic_thread_fence(memory_order_acquire);
		g2 = atomic_load_explicit(&h->gen, memory_order_relaxed);
		if (g1 == g2)
			break;
	}
	if (tries == 100)
		return -EAGAIN;
	/* the counters as they are now, the layout as checked */
	memcpy(&snap->hdr, h, sizeof(snap->hdr));
	snap->hdr.nrails = hc->nrails;
	snap->hdr.nqps = hc->nqps;
	snap->hdr.nev = hc->nev;
	/* What r2cc-ctl prints as strings ends in the field, whatever the
	 * record (another program of the user's may have written it). */
	snap->hdr.comm[sizeof(snap->hdr.comm) - 1] = '\0';
	for (i = 0; i < hc->nrails; i++) {
		snap->rails[i].dev[sizeof(snap->rails[i].dev) - 1] = '\0';
		snap->rails[i].netdev[sizeof(snap->rails[i].netdev) - 1] = '\0';
	}
	n = used_slots(h, hc);
	snap->qps = calloc(n ? n : 1, sizeof(*snap->qps));
	if (!snap->qps)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		const struct r2cc_status_qp *q =
			(const void *)((const char *)h + hc->qp_off +
				       (size_t)i * hc->qp_sz);

		if (atomic_load_explicit(&q->used, memory_order_acquire) != 1)
			continue;
		memcpy(&snap->qps[snap->nqps], q, sizeof(*q));
		snap->qps[snap->nqps].dev[sizeof(q->dev) - 1] = '\0';
		/* Freed while copied: drop it rather than show a mix. */
		if (atomic_load_explicit(&q->used, memory_order_acquire) == 1)
			snap->nqps++;
	}
	return 0;
}

int r2cc_status_read(const char *path, struct r2cc_status_snap *snap)
{
	struct r2cc_status_hdr hc;
	struct stat sb;
	void *p;
	int fd, ret;

	memset(snap, 0, sizeof(*snap));
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    (sb.st_uid != getuid() && getuid() != 0) || (sb.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	if ((size_t)sb.st_size < sizeof(struct r2cc_status_hdr)) {
		close(fd);
		return -EBADMSG;
	}
	p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	/* checked once, in a copy of ours: the writer's may change */
	memcpy(&hc, p, sizeof(hc));
	if (!hdr_ok(&hc, (size_t)sb.st_size))
		ret = -EBADMSG;
	else if (hc.uid != sb.st_uid)
		ret = -EBADMSG;
	else if (!alive(&hc))
		ret = -ESRCH;
	else
		ret = copy_out(p, &hc, snap);
	munmap(p, (size_t)sb.st_size);
	if (ret)
		r2cc_status_snap_free(snap);
	return ret;
}

void r2cc_status_snap_free(struct r2cc_status_snap *snap)
{
	free(snap->qps);
	snap->qps = NULL;
	snap->nqps = 0;
}

/* Does the record at @path own QP @qpn of @dev? Fills the answer. */
/* Map the record at @path if it is ours, sane and its process alive:
 * 0 with *@h (munmap(*@h, *@len) after), or -errno. */
static int map_live(const char *path, const struct r2cc_status_hdr **h,
		    struct r2cc_status_hdr *hc, size_t *len)
{
	struct stat sb;
	void *p;
	int fd;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) || sb.st_uid != getuid() ||
	    (sb.st_mode & 077) ||
	    (size_t)sb.st_size < sizeof(struct r2cc_status_hdr)) {
		close(fd);
		return -EPERM;
	}
	p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	*h = p;
	*len = (size_t)sb.st_size;
	memcpy(hc, p, sizeof(*hc)); /* checked once, in a copy of ours */
	if (!hdr_ok(hc, *len) || hc->uid != sb.st_uid || !alive(hc)) {
		munmap(p, *len);
		return -ESRCH;
	}
	return 0;
}

/* QP slot @i of the record at @h, laid out as its checked header @hc */
static const struct r2cc_status_qp *slot_at(const struct r2cc_status_hdr *h,
					    const struct r2cc_status_hdr *hc,
					    uint32_t i)
{
	return (const void *)((const char *)h + hc->qp_off +
			      (size_t)i * hc->qp_sz);
}

/* Call @fn on every live record of this user's (its mapping, and its
 * header as checked: sizes and counts come from that): until it returns
 * 0. */
static int for_each_live(int (*fn)(const struct r2cc_status_hdr *h,
				   const struct r2cc_status_hdr *hc, void *arg),
			 void *arg)
{
	const struct r2cc_status_hdr *h = NULL;
	struct r2cc_status_hdr hc;
	char path[512], prefix[32];
	struct dirent *de;
	int ret = -ENOENT;
	size_t len = 0;
	DIR *d;

	d = opendir(status_dir());
	if (!d)
		return -errno;
	snprintf(prefix, sizeof(prefix), "r2cc.%u.", (unsigned int)getuid());
	while (ret && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", status_dir(), de->d_name);
		if (map_live(path, &h, &hc, &len))
			continue;
		ret = fn(h, &hc, arg);
		munmap((void *)h, len);
	}
	closedir(d);
	return ret;
}

struct find_arg {
	const char *dev;
	uint32_t qpn;
	uint64_t *id;
	uint16_t *port;
	uint32_t *pid;
};

static int find_in(const struct r2cc_status_hdr *h,
		   const struct r2cc_status_hdr *hc, void *arg)
{
	struct find_arg *f = arg;
	uint32_t i, n;

	if (!atomic_load(&h->ctrl_id))
		return -ENOENT;
	for (i = 0, n = used_slots(h, hc); i < n; i++) {
		const struct r2cc_status_qp *q = slot_at(h, hc, i);

		if (atomic_load_explicit(&q->used, memory_order_acquire) != 1 ||
		    q->qpn != f->qpn || strncmp(q->dev, f->dev, sizeof(q->dev)))
			continue;
		*f->id = atomic_load(&h->ctrl_id);
		*f->port = (uint16_t)atomic_load(&h->ctrl_port);
		*f->pid = (uint32_t)hc->pid;
		return 0;
	}
	return -ENOENT;
}

int r2cc_status_find_qp(const char *dev, uint32_t qpn, uint64_t *id,
			uint16_t *port, uint32_t *pid)
{
	struct find_arg f = { dev, qpn, id, port, pid };

	return for_each_live(find_in, &f);
}

struct load_arg {
	uint32_t *n;
	int nrail;
};

static int load_in(const struct r2cc_status_hdr *h,
		   const struct r2cc_status_hdr *hc, void *arg)
{
	struct load_arg *l = arg;
	uint32_t i, n, st;
	int rail;

	if (hc->pid == getpid())
		return -ENOENT; /* the caller counts its own */
	for (i = 0, n = used_slots(h, hc); i < n; i++) {
		const struct r2cc_status_qp *q = slot_at(h, hc, i);

		if (atomic_load_explicit(&q->used, memory_order_acquire) != 1)
			continue;
		rail = atomic_load(&q->backup_rail);
		st = atomic_load(&q->prot);
		if (rail >= 0 && rail < l->nrail &&
		    (st == R2CC_PROT_BINDING || st == R2CC_PROT_READY ||
		     st == R2CC_PROT_MIGRATED))
			l->n[rail]++;
	}
	return -ENOENT; /* on to the next record */
}

void r2cc_status_rail_loads(uint32_t *n, int nrail)
{
	struct load_arg l = { n, nrail };

	for_each_live(load_in, &l);
}

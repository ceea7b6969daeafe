/* SPDX-License-Identifier: MIT */
/*
 * status_read.c - the node-local status records, the readers' side:
 * r2cc-ctl, the channel's LOOKUP answers and placement map other
 * processes' records read-only, check every size and offset, and copy
 * them out under the writer's seqlock; a record whose process is gone
 * (its pid and start time) is skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"

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

	d = opendir(r2cc_status_dir());
	if (!d)
		return -errno;
	snprintf(prefix, sizeof(prefix), "r2cc.%u.", (unsigned int)getuid());
	while (ret && (de = readdir(d))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)))
			continue;
		snprintf(path, sizeof(path), "%s/%s", r2cc_status_dir(),
			 de->d_name);
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

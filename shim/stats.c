/* SPDX-License-Identifier: MIT */
/*
 * stats.c - per-QP statistics: what the program posted and polled through
 * r2cc, written at exit to R2CC_STATS ("%p" in the path becomes the pid,
 * "%h" the host name) as one "qp key=value ..." line per QP.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim_int.h"

/*
 * Destroyed QPs are kept until exit (their counters are reported then,
 * and a poller that looked one up just before it went may still touch
 * it). Past RETIRED_MAX the oldest are folded into one sum and freed.
 */
#define RETIRED_MAX 65536

static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
/* retired_lock protects: retired, nretired, folded. */
static struct r2cc_qp *retired[RETIRED_MAX];
static unsigned int nretired, oldest;
static struct r2cc_qp_stats folded;
static uint64_t nfolded;

static void fold(struct r2cc_qp_stats *dst, const struct r2cc_qp_stats *src)
{
	int i;

	for (i = 0; i < R2CC_ST_NR; i++)
		r2cc_stat_add(&dst->posted[i], src->posted[i]);
	r2cc_stat_add(&dst->posted_recv, src->posted_recv);
	r2cc_stat_add(&dst->bytes_posted, src->bytes_posted);
	r2cc_stat_add(&dst->polled, src->polled);
	r2cc_stat_add(&dst->polled_err, src->polled_err);
	r2cc_stat_add(&dst->bytes_polled, src->bytes_polled);
}

void r2cc_stats_retire(struct r2cc_qp *q)
{
	r2cc_wr_rec_free(q->rec);
	q->rec = NULL;
	/* Keep the final counters, give the status slot back. */
	if (q->slot) {
		q->st_own = *q->st;
		q->st = &q->st_own;
		r2cc_status_qp_del(q->slot);
		q->slot = NULL;
	}
	pthread_mutex_lock(&retired_lock);
	if (nretired == RETIRED_MAX) {
		struct r2cc_qp *old = retired[oldest];

		fold(&folded, old->st);
		nfolded++;
		free(old);
		retired[oldest] = q;
		oldest = (oldest + 1) % RETIRED_MAX;
	} else {
		retired[nretired++] = q;
	}
	pthread_mutex_unlock(&retired_lock);
}

static void put_stats(int fd, const char *what, const struct r2cc_qp_stats *s)
{
	dprintf(fd,
		"%s send=%lu send_imm=%lu write=%lu write_imm=%lu read=%lu "
		"atomic=%lu other=%lu recv=%lu bytes_posted=%lu polled=%lu "
		"polled_err=%lu bytes_polled=%lu\n",
		what, s->posted[R2CC_ST_SEND], s->posted[R2CC_ST_SEND_IMM],
		s->posted[R2CC_ST_WRITE], s->posted[R2CC_ST_WRITE_IMM],
		s->posted[R2CC_ST_READ], s->posted[R2CC_ST_ATOMIC],
		s->posted[R2CC_ST_OTHER], s->posted_recv, s->bytes_posted,
		s->polled, s->polled_err, s->bytes_polled);
}

static void put_qp(const struct r2cc_qp *q, int fd, bool live)
{
	static const char *const types[] = {
		[IBV_QPT_RC] = "RC", [IBV_QPT_UC] = "UC", [IBV_QPT_UD] = "UD"
	};
	const char *t = (size_t)q->qp_type < sizeof(types) / sizeof(types[0]) &&
					types[q->qp_type] ?
				types[q->qp_type] :
				"other";
	char what[160];

	snprintf(what, sizeof(what), "qp dev=%s qpn=%u type=%s state=%s",
		 q->dev, q->qpn, t, live ? "live" : "destroyed");
	put_stats(fd, what, q->st);
}

static void put_live(void *val, void *arg)
{
	const struct r2cc_qp *q = val;

	if (q->type == R2CC_OBJ_QP)
		put_qp(q, *(int *)arg, true);
}

/* The R2CC_STATS path with "%p" replaced by the pid, "%h" by the host
 * name (ranks of one job on a shared file system). */
static int stats_path(char *buf, size_t size)
{
	const char *s = r2cc_shim.cfg.stats_file;
	char host[64] = "unknown";
	size_t n = 0;

	gethostname(host, sizeof(host) - 1);
	for (; *s && n + 1 < size; s++) {
		if (s[0] == '%' && (s[1] == 'p' || s[1] == 'h')) {
			if (s[1] == 'p')
				n += (size_t)snprintf(buf + n, size - n, "%d",
						      (int)getpid());
			else
				n += (size_t)snprintf(buf + n, size - n, "%s",
						      host);
			s++;
		} else {
			buf[n++] = *s;
		}
	}
	if (n + 1 >= size)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return 0;
}

void r2cc_stats_write(void)
{
	char path[PATH_MAX];
	unsigned int i;
	int fd;

	if (stats_path(path, sizeof(path))) {
		r2cc_err("R2CC_STATS path too long");
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		r2cc_err("cannot write R2CC_STATS %s: %m", path);
		return;
	}
	dprintf(fd, "r2cc-stats 1 pid=%d\n", (int)getpid());
	for (i = 0; i < (unsigned int)r2cc_shim.nrail; i++) {
		struct r2cc_health_info h = r2cc_health_get((int)i);

		dprintf(fd, "rail %u dev=%s ll=%s state=%s downs=%lu ups=%lu\n",
			i, ibv_get_device_name(r2cc_shim.dev[i].dev),
			r2cc_link_layer_name(r2cc_shim.dev[i].ll),
			r2cc_rail_state_name(h.state), h.downs, h.ups);
	}
	dprintf(fd, "mirror pds=%lu mrs=%lu failed=%lu\n",
		atomic_load(&r2cc_shim.shadow_pds),
		atomic_load(&r2cc_shim.shadow_mrs),
		atomic_load(&r2cc_shim.shadow_failed));
	r2cc_map_for_each(&r2cc_shim.reg, put_live, &fd);
	pthread_mutex_lock(&retired_lock);
	for (i = 0; i < nretired; i++)
		put_qp(retired[i], fd, false);
	if (nfolded) {
		char what[64];

		snprintf(what, sizeof(what), "folded qps=%lu", nfolded);
		put_stats(fd, what, &folded);
	}
	pthread_mutex_unlock(&retired_lock);
	close(fd);
}

/* SPDX-License-Identifier: MIT */
/*
 * chan_hosts.c - the job's nodes (R2CC_PEERS, else SLURM_JOB_NODELIST),
 * asked in turn by a resolve whose peer's GID carries no IPv4 address
 * (InfiniBand, RoCE over IPv6) or when R2CC_PEER_BY_GID is off, after
 * the node R2CC_NODE_MAP names for the GID; and, per GID, the node that
 * answered for it or the sweep under way.
 *
 * The names are resolved once, when a resolve first needs them, by a
 * thread of their own (a name server may take its time: nothing of the
 * channel waits on it; its resolves wait their bounded turn). What it
 * found outlives the channel: a restarted channel takes it as it is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "chan_hosts.h"
#include "gidmap.h"
#include "hostlist.h"
#include "lid.h"

#define GID_NODES_MAX 65536 /* GIDs remembered; past it, not kept */

enum hosts_st {
	HOSTS_NONE, /* no list */
	HOSTS_IDLE, /* a list, its names not resolved yet */
	HOSTS_RESOLVING,
	HOSTS_READY,
};

static struct {
	pthread_mutex_t lock; /* this struct; never held with another */
	enum hosts_st st;
	pid_t pid; /* the process whose thread resolves (a fork's child
		    * has no such thread: it starts its own) */
	/* owned: the list and the map, each its text or a file's path */
	char *spec, *map_spec;
	unsigned int n; /* addresses, once READY */
	uint8_t (*addr)[4];
	unsigned int nmap; /* the map's GIDs with an address, once READY */
	struct mapped {
		struct r2cc_gidmap_port port;
		uint8_t addr[4];
	} * map;
} hs = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* What the thread works on: copies of the specs; what it found */
struct hosts_job {
	char *spec, *map_spec;
	uint8_t (*addr)[4];
	struct mapped *map;
	unsigned int n, nmap;
};

static char *dup_set(const char *s)
{
	return s && s[0] ? strdup(s) : NULL;
}

void chan_hosts_set(const char *spec, const char *map)
{
	pthread_mutex_lock(&hs.lock);
	if (hs.st == HOSTS_NONE) {
		hs.spec = dup_set(spec);
		hs.map_spec = dup_set(map);
		if (hs.spec || hs.map_spec)
			hs.st = HOSTS_IDLE;
	}
	pthread_mutex_unlock(&hs.lock);
}

/* An IPv4 address of @name, from a literal or the resolver: 0 or -1 */
static int host_addr(const char *name, uint8_t out[4])
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM },
			*res = NULL;
	struct in_addr a;

	if (inet_pton(AF_INET, name, &a) == 1) {
		memcpy(out, &a, 4);
		return 0;
	}
	if (getaddrinfo(name, NULL, &hints, &res) || !res)
		return -1;
	memcpy(out, &((struct sockaddr_in *)res->ai_addr)->sin_addr, 4);
	freeaddrinfo(res);
	return 0;
}

/* The job's nodes' addresses (hostlist.h) */
static void resolve_list(struct hosts_job *j)
{
	struct r2cc_hostlist h = { 0 };
	unsigned int i, bad = 0;
	int ret;

	ret = j->spec[0] == '/' ?
		      r2cc_hostlist_read(j->spec, &h) :
		      r2cc_hostlist_parse(j->spec, strlen(j->spec), &h);
	if (ret < 0) {
		r2cc_warn("the job's nodes (%.64s): %s: not asked", j->spec,
			  strerror(-ret));
		return;
	}
	j->addr = calloc(h.n, sizeof(*j->addr));
	for (i = 0; j->addr && i < h.n; i++) {
		if (!host_addr(h.v[i], j->addr[j->n])) {
			j->n++;
			continue;
		}
		if (!bad++)
			r2cc_warn("the job's node `%s' has no IPv4 address: "
				  "not asked (further ones counted)",
				  h.v[i]);
	}
	r2cc_info("the job's nodes: %u of %u with an address%s", j->n, h.n,
		  j->addr ? "" : " (no memory)");
	r2cc_hostlist_free(&h);
}

/* R2CC_NODE_MAP's GIDs and their nodes' addresses (gidmap.h) */
static void resolve_map(struct hosts_job *j)
{
	struct r2cc_gidmap m = { 0 };
	unsigned int i, bad = 0;
	int ret;

	ret = j->map_spec[0] == '/' ?
		      r2cc_gidmap_read(j->map_spec, &m) :
		      r2cc_gidmap_parse(j->map_spec, strlen(j->map_spec), &m);
	if (ret < 0) {
		r2cc_warn("R2CC_NODE_MAP (%.64s): %s: not used", j->map_spec,
			  strerror(-ret));
		return;
	}
	j->map = calloc(m.n, sizeof(*j->map));
	for (i = 0; j->map && i < m.n; i++) {
		/* (the last entry of a GID says: looked up from the end) */
		if (!host_addr(m.v[i].host, j->map[j->nmap].addr)) {
			j->map[j->nmap++].port = m.v[i].port;
			continue;
		}
		if (!bad++)
			r2cc_warn("R2CC_NODE_MAP: `%s' has no IPv4 address "
				  "(further ones counted)",
				  m.v[i].host);
	}
	r2cc_info("R2CC_NODE_MAP: %u of %u GIDs' nodes with an address%s",
		  j->nmap, m.n, j->map ? "" : " (no memory)");
	r2cc_gidmap_free(&m);
}

static void *resolver(void *arg)
{
	struct hosts_job *j = arg;

	if (j->spec)
		resolve_list(j);
	if (j->map_spec)
		resolve_map(j);
	free(j->spec);
	free(j->map_spec);
	pthread_mutex_lock(&hs.lock);
	hs.addr = j->addr;
	hs.n = j->addr ? j->n : 0;
	hs.map = j->map;
	hs.nmap = j->map ? j->nmap : 0;
	hs.st = HOSTS_READY;
	pthread_mutex_unlock(&hs.lock);
	free(j);
	return NULL;
}

int chan_hosts_count(void)
{
	sigset_t all, old;
	struct hosts_job *j;
	pthread_attr_t at;
	pthread_t t;
	int ret;

	pthread_mutex_lock(&hs.lock);
	if (hs.st == HOSTS_RESOLVING && hs.pid != getpid())
		hs.st = HOSTS_IDLE; /* a fork's child */
	if (hs.st != HOSTS_IDLE) {
		ret = hs.st == HOSTS_RESOLVING	       ? -EAGAIN :
		      hs.st == HOSTS_READY && hs.n > 0 ? (int)hs.n :
							 -ENOENT;
		pthread_mutex_unlock(&hs.lock);
		return ret;
	}
	/* Its own thread, detached, every signal blocked in it */
	j = calloc(1, sizeof(*j));
	if (j) {
		j->spec = dup_set(hs.spec);
		j->map_spec = dup_set(hs.map_spec);
	}
	ret = !j || (hs.spec && !j->spec) || (hs.map_spec && !j->map_spec) ?
		      ENOMEM :
		      pthread_attr_init(&at);
	if (!ret) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		ret = pthread_create(&t, &at, resolver, j);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&at);
	}
	if (ret) {
		if (j) {
			free(j->spec);
			free(j->map_spec);
		}
		free(j);
		pthread_mutex_unlock(&hs.lock);
		return -ret;
	}
	hs.st = HOSTS_RESOLVING;
	hs.pid = getpid();
	pthread_mutex_unlock(&hs.lock);
	return -EAGAIN;
}

void chan_hosts_addr(unsigned int i, uint8_t out[4])
{
	pthread_mutex_lock(&hs.lock);
	if (hs.st == HOSTS_READY && i < hs.n)
		memcpy(out, hs.addr[i], 4);
	else
		memset(out, 0, 4);
	pthread_mutex_unlock(&hs.lock);
}

int chan_hosts_mapped(const uint8_t gid[16], uint8_t out[4])
{
	uint16_t lid = 0;
	unsigned int i;
	int ret;

	r2cc_lid_of_key(gid, &lid);
	pthread_mutex_lock(&hs.lock);
	ret = hs.st == HOSTS_READY ? -ENOENT : hs.map_spec ? -EAGAIN : -ENOENT;
	for (i = hs.nmap; hs.st == HOSTS_READY && i-- > 0;)
		if (r2cc_gidmap_match(&hs.map[i].port, gid, lid)) {
			memcpy(out, hs.map[i].addr, 4);
			ret = 0;
			break;
		}
	pthread_mutex_unlock(&hs.lock);
	return ret;
}

/* The GIDs' nodes: open addressing, never removed (an entry's state
 * changes), under cs.lock */
static struct {
	struct chan_gid_node *v;
	unsigned int cap, n;
	bool said;
} gn;

uint32_t chan_gid_hash(const uint8_t gid[16])
{
	uint32_t h = 2166136261u;
	int i;

	for (i = 0; i < 16; i++)
		h = (h ^ gid[i]) * 16777619u;
	return h;
}

static struct chan_gid_node *slot(struct chan_gid_node *v, unsigned int cap,
				  const uint8_t gid[16])
{
	unsigned int i = chan_gid_hash(gid) & (cap - 1);

	while (v[i].st != GN_FREE && memcmp(v[i].gid, gid, 16))
		i = (i + 1) & (cap - 1);
	return &v[i];
}

static int grow(void)
{
	unsigned int cap = gn.cap ? 2 * gn.cap : 64, i;
	struct chan_gid_node *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (i = 0; i < gn.cap; i++)
		if (gn.v[i].st != GN_FREE)
			*slot(v, cap, gn.v[i].gid) = gn.v[i];
	free(gn.v);
	gn.v = v;
	gn.cap = cap;
	return 0;
}

struct chan_gid_node *chan_gid_node(const uint8_t gid[16], bool make)
{
	struct chan_gid_node *g = gn.cap ? slot(gn.v, gn.cap, gid) : NULL;

	if ((g && g->st != GN_FREE) || !make)
		return g && g->st != GN_FREE ? g : NULL;
	if (gn.n >= GID_NODES_MAX || (2 * (gn.n + 1) > gn.cap && grow())) {
		if (!gn.said)
			r2cc_info("%u GIDs' nodes known: more are not kept "
				  "(each of their resolves asks the nodes)",
				  gn.n);
		gn.said = true;
		return NULL;
	}
	g = slot(gn.v, gn.cap, gid);
	memset(g, 0, sizeof(*g));
	memcpy(g->gid, gid, 16);
	g->st = GN_NEW;
	gn.n++;
	return g;
}

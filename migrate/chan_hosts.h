/* SPDX-License-Identifier: MIT */
/*
 * chan_hosts.h - the job's nodes and the node found for each GID
 * (chan_hosts.c), for the resolves of chan_res.c.
 */
#ifndef R2CC_MIG_CHAN_HOSTS_H
#define R2CC_MIG_CHAN_HOSTS_H

#include "chan_int.h"

/* The job's nodes, a host list or a file's path (hostlist.h), and
 * R2CC_NODE_MAP's GIDs and nodes, a map or a file's path (gidmap.h);
 * NULL or "": none. The first ones set in a process stay. Any thread. */
void chan_hosts_set(const char *spec, const char *map);
/* How many nodes have an address: > 0; -EAGAIN while their names are
 * resolved (the first call starts that); -ENOENT: no list, or no node
 * with an address. Any thread. */
int chan_hosts_count(void);
/* The address of node @i (< chan_hosts_count()) into @out */
void chan_hosts_addr(unsigned int i, uint8_t out[4]);
/* The address of @gid's node in R2CC_NODE_MAP into @out: 0; -EAGAIN
 * while the map's names are resolved (chan_hosts_count() starts that);
 * -ENOENT: not in it. Any thread. */
int chan_hosts_mapped(const uint8_t gid[16], uint8_t out[4]);

/* What is known of the node of a GID (cs.lock) */
struct chan_gid_node {
	uint8_t gid[16];
	enum chan_gid_st {
		GN_FREE, /* (an empty slot) */
		GN_NEW, /* nothing yet */
		GN_SEARCH, /* a resolve asks the nodes in turn */
		GN_FOUND, /* the node at addr answered with an owner */
		GN_FAILED, /* the last sweep found none (how, at ns) */
	} st;
	int res; /* GN_SEARCH: the resolve sweeping, its cookie */
	uint64_t cookie;
	uint8_t addr[4];
	enum r2cc_chan_res_end how;
	uint64_t ns;
};
/* @gid's entry, made (GN_NEW) if @make and there is room; NULL if none.
 * Valid until the next call with @make. */
struct chan_gid_node *chan_gid_node(const uint8_t gid[16], bool make);
/* The hash sweeps start from: spread over the nodes */
uint32_t chan_gid_hash(const uint8_t gid[16]);

#endif /* R2CC_MIG_CHAN_HOSTS_H */

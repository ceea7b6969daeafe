/* SPDX-License-Identifier: MIT */
/*
 * gidmap.c - R2CC_NODE_MAP: the node of each peer GID, written down by
 * the operator ("fe80::c42:a103:6e:2a10=gpu017", or by a LID-routed
 * peer's LID "lid:0x1b=gpu017"; entries separated by commas or white
 * space, or a file of them), for fabrics where neither the GID nor the
 * IPoIB neighbours name the peer's node. Outside input: every entry
 * checked.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gidmap.h"

/* A unicast LID, decimal or 0x hex, the whole of @s */
static int lid_of(const char *s, uint16_t *lid)
{
	unsigned long v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || !v || v > R2CC_GIDMAP_LID_MAX)
		return -EINVAL;
	*lid = (uint16_t)v;
	return 0;
}

/* One "GID=HOST" or "lid:LID=HOST" of @len bytes into @e */
static int entry(const char *s, size_t len, struct r2cc_gidmap_entry *e)
{
	const char *eq = memchr(s, '=', len);
	size_t glen = eq ? (size_t)(eq - s) : 0, hlen, i;
	char g[INET6_ADDRSTRLEN];

	if (!glen || glen >= sizeof(g))
		return -EINVAL;
	memcpy(g, s, glen);
	g[glen] = '\0';
	memset(e, 0, sizeof(*e));
	if (!strncasecmp(g, "lid:", 4)) {
		if (lid_of(g + 4, &e->port.lid))
			return -EINVAL;
	} else if (inet_pton(AF_INET6, g, e->port.gid) != 1) {
		return -EINVAL;
	}
	hlen = len - glen - 1;
	if (!hlen || hlen > R2CC_HOST_LEN)
		return hlen ? -ENAMETOOLONG : -EINVAL;
	for (i = 0; i < hlen; i++)
		if (!r2cc_host_namechar(eq[1 + i]))
			return -EINVAL;
	memcpy(e->host, eq + 1, hlen);
	e->host[hlen] = '\0';
	return 0;
}

void r2cc_gidmap_free(struct r2cc_gidmap *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

int r2cc_gidmap_parse(const char *s, size_t len, struct r2cc_gidmap *out)
{
	const char *end = s + len, *p = s, *t;
	struct r2cc_gidmap_entry e;
	unsigned int n = 0, cap = 0;
	int ret = 0;

	if (out)
		*out = (struct r2cc_gidmap){ 0 };
	while (!ret) {
		while (p < end && r2cc_host_sep(*p))
			p++;
		for (t = p; p < end && !r2cc_host_sep(*p); p++)
			;
		if (p == t)
			break;
		ret = entry(t, (size_t)(p - t), &e);
		if (!ret && n == R2CC_GIDMAP_MAX)
			ret = -E2BIG;
		if (!ret && out && n == cap) {
			struct r2cc_gidmap_entry *v;

			cap = cap ? 2 * cap : 16;
			v = reallocarray(out->v, cap, sizeof(*v));
			if (v)
				out->v = v;
			else
				ret = -ENOMEM;
		}
		if (!ret && out)
			out->v[n] = e;
		n += !ret;
	}
	if (!ret && !n)
		ret = -ENOENT;
	if (ret && out)
		r2cc_gidmap_free(out);
	if (!ret && out)
		out->n = n;
	return ret ? ret : (int)n;
}

int r2cc_gidmap_read(const char *path, struct r2cc_gidmap *out)
{
	size_t len;
	int ret;
	char *buf = r2cc_listfile_read(path, &len, &ret);

	if (!buf)
		return ret;
	ret = r2cc_gidmap_parse(buf, len, out);
	free(buf);
	return ret;
}

bool r2cc_gidmap_match(const struct r2cc_gidmap_port *p, const uint8_t gid[16],
		       uint16_t lid)
{
	return p->lid ? p->lid == lid : !memcmp(p->gid, gid, 16);
}

const char *r2cc_gidmap_find(const struct r2cc_gidmap *m, const uint8_t gid[16],
			     uint16_t lid)
{
	unsigned int i;

	for (i = m->n; i-- > 0;) /* the last entry for a GID says */
		if (r2cc_gidmap_match(&m->v[i].port, gid, lid))
			return m->v[i].host;
	return NULL;
}

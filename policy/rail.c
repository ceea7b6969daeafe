/* SPDX-License-Identifier: MIT */
/*
 * rail.c - the rail inventory: every RDMA device and port, read from sysfs
 * (class/infiniband under a given root) and never through libibverbs.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

#define ATTR_MAX 128 /* longest sysfs value read; longer ones are bad */
#define PORT_MAX 255 /* ports are a u8 in ibv_port_attr, 1-based */
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Indexed by enum ib_port_state; 0 is IB_PORT_NOP, our "unknown" */
static const char *const state_names[] = {
	"unknown", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"
};

const char *r2cc_link_layer_name(enum r2cc_link_layer ll)
{
	switch (ll) {
	case R2CC_LL_IB:
		return "InfiniBand";
	case R2CC_LL_ETH:
		return "Ethernet";
	default:
		return "unknown";
	}
}

/*
 * Read at most ATTR_MAX - 1 bytes of @name under @dirfd into @buf, without
 * the trailing newline. Never trusts st_size: a value that does not fit is
 * -EFBIG, and O_NONBLOCK keeps a FIFO in a fixture from hanging the scan.
 * Return: its length, or -errno.
 */
static int read_attr(int dirfd, const char *name, char buf[ATTR_MAX])
{
	size_t len = 0;
	ssize_t n;
	char extra;
	int fd, ret = 0;

	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	while (len < ATTR_MAX - 1) {
		n = read(fd, buf + len, ATTR_MAX - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : 0;
			break;
		}
		len += (size_t)n;
	}
	if (!ret && len == ATTR_MAX - 1 && read(fd, &extra, 1) > 0)
		ret = -EFBIG;
	close(fd);
	if (ret)
		return ret;
	buf[len] = '\0';
	if (memchr(buf, '\0', len))
		return -EINVAL;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	return (int)len;
}

/* Decimal digits at *@s into *@out, stopping at the first non-digit. */
static int parse_dec(const char **s, uint32_t *out)
{
	const char *p = *s;
	uint64_t n = 0;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		n = n * 10 + (uint64_t)(*p - '0');
		if (n > UINT32_MAX)
			return -ERANGE;
	}
	*s = p;
	*out = (uint32_t)n;
	return 0;
}

/* "4: ACTIVE" -> 4 (enum ib_port_state); 0 if unreadable */
static uint8_t parse_state(const char *s)
{
	uint32_t n;

	if (parse_dec(&s, &n) || n > UINT8_MAX || *s != ':')
		return 0;
	return (uint8_t)n;
}

/*
 * The kernel's rate_show(): "%d[.5] Gb/sec (%dX%s)". "2.5 Gb/sec (1X SDR)"
 * -> 2500 Mb/s, width 1. Fractions beyond Mb/s are dropped.
 */
static void parse_rate(const char *s, uint32_t *mbps, uint8_t *width)
{
	uint32_t gb, frac = 0, w, scale = 100;
	uint64_t m;

	*mbps = 0;
	*width = 0;
	if (parse_dec(&s, &gb))
		return;
	if (*s == '.') {
		if (!isdigit((unsigned char)*++s))
			return;
		for (; isdigit((unsigned char)*s); s++, scale /= 10)
			frac += (uint32_t)(*s - '0') * scale;
	}
	if (strncmp(s, " Gb/sec", 7))
		return;
	m = (uint64_t)gb * 1000 + frac;
	if (m > UINT32_MAX)
		return;
	*mbps = (uint32_t)m;
	s += 7;
	if (s[0] == ' ' && s[1] == '(') {
		s += 2;
		if (!parse_dec(&s, &w) && *s == 'X' && w && w <= UINT8_MAX)
			*width = (uint8_t)w;
	}
}

/* "-1", "0", "1": anything else is -1 (unknown) */
static int parse_numa(const char *s)
{
	uint32_t n;

	if (!strcmp(s, "-1") || parse_dec(&s, &n) || *s || n > INT16_MAX)
		return -1;
	return (int)n;
}

static bool hex2(const char *s)
{
	return isxdigit((unsigned char)s[0]) && isxdigit((unsigned char)s[1]);
}

/* "0000:3b:00.0" or "10000:00:02.0" (VMD): HEX+:HH:HH.F, F 0..7 */
static bool is_pci_name(const char *s)
{
	size_t dom = strspn(s, "0123456789abcdef");

	if (!dom || dom > 8 || strlen(s) != dom + 8)
		return false;
	s += dom;
	return s[0] == ':' && hex2(s + 1) && s[3] == ':' && hex2(s + 4) &&
	       s[6] == '.' && s[7] >= '0' && s[7] <= '7';
}

/* The kernel's dev_valid_name(), for what gid_attrs and parent hold */
static bool is_ifname(const char *s)
{
	size_t len = strlen(s), i;

	if (!len || len >= R2CC_IFNAMSIZ || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (i = 0; i < len; i++)
		if (s[i] == '/' || s[i] == ':' ||
		    isspace((unsigned char)s[i]) ||
		    !isprint((unsigned char)s[i]))
			return false;
	return true;
}

/* The PCI function behind @devfd ("" if not PCI) and its NUMA node */
static void read_device(int devfd, struct r2cc_rail_info *r)
{
	char buf[ATTR_MAX], link[256], *base;
	ssize_t n;

	r->numa_node = -1;
	r->pci[0] = '\0';
	if (read_attr(devfd, "device/numa_node", buf) > 0)
		r->numa_node = parse_numa(buf);
	n = readlinkat(devfd, "device", link, sizeof(link) - 1);
	if (n <= 0)
		return;
	link[n] = '\0';
	base = strrchr(link, '/');
	base = base ? base + 1 : link;
	if (is_pci_name(base) && strlen(base) < sizeof(r->pci))
		memcpy(r->pci, base, strlen(base) + 1);
}

/* A LID as sysfs writes it, "0x1b": 0 if garbled */
static uint16_t parse_lid(const char *s)
{
	uint32_t v = 0;
	int i;

	if (s[0] != '0' || s[1] != 'x' || !s[2])
		return 0;
	for (i = 2; s[i]; i++) {
		int h = isdigit((unsigned char)s[i]) ? s[i] - '0' :
			s[i] >= 'a' && s[i] <= 'f'   ? s[i] - 'a' + 10 :
						       -1;

		if (h < 0 || i > 5)
			return 0;
		v = v * 16 + (uint32_t)h;
	}
	return (uint16_t)v;
}

/* Fill the per-port fields of @r from ports/<r->port> under @devfd. */
static void read_port(int devfd, struct r2cc_rail_info *r)
{
	char path[64], buf[ATTR_MAX], err[64];
	int pfd;

	r->link_layer = R2CC_LL_UNKNOWN;
	r->state = 0;
	r->rate_mbps = 0;
	r->width = 0;
	r->lid = r->sm_lid = 0;
	r->netdev[0] = '\0';
	snprintf(path, sizeof(path), "ports/%u", r->port);
	pfd = openat(devfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		r2cc_dbg("%s/%u: %s", r->dev, r->port,
			 strerror_r(errno, err, sizeof(err)));
		return;
	}
	if (read_attr(pfd, "link_layer", buf) > 0) {
		if (!strcmp(buf, "InfiniBand"))
			r->link_layer = R2CC_LL_IB;
		else if (!strcmp(buf, "Ethernet"))
			r->link_layer = R2CC_LL_ETH;
	}
	if (read_attr(pfd, "state", buf) > 0)
		r->state = parse_state(buf);
	if (read_attr(pfd, "rate", buf) > 0)
		parse_rate(buf, &r->rate_mbps, &r->width);
	if (read_attr(pfd, "lid", buf) > 0)
		r->lid = parse_lid(buf);
	if (read_attr(pfd, "sm_lid", buf) > 0)
		r->sm_lid = parse_lid(buf);
	/* RoCE: the netdev of GID 0; rxe also names it in parent */
	if (read_attr(pfd, "gid_attrs/ndevs/0", buf) > 0 ||
	    read_attr(devfd, "parent", buf) > 0) {
		if (is_ifname(buf))
			memcpy(r->netdev, buf, strlen(buf) + 1);
		else
			r2cc_dbg("%s/%u: skipping netdev %.32s: not a name",
				 r->dev, r->port, buf);
	}
	close(pfd);
}

/* Strictly 1..255 without leading zeros, as the kernel names them */
static int port_number(const char *name)
{
	uint32_t n;

	if (name[0] == '0' || parse_dec(&name, &n) || *name || !n ||
	    n > PORT_MAX)
		return -EINVAL;
	return (int)n;
}

/* Natural order, so that mlx5_2 sorts before mlx5_10 */
static int name_cmp(const void *a, const void *b)
{
	const char *x = a, *y = b;
	size_t nx, ny;

	while (*x && *y) {
		if (isdigit((unsigned char)*x) && isdigit((unsigned char)*y)) {
			while (*x == '0' && isdigit((unsigned char)x[1]))
				x++;
			while (*y == '0' && isdigit((unsigned char)y[1]))
				y++;
			nx = strspn(x, "0123456789");
			ny = strspn(y, "0123456789");
			if (nx != ny)
				return nx < ny ? -1 : 1;
			if (memcmp(x, y, nx))
				return memcmp(x, y, nx);
			x += nx;
			y += nx;
		} else if (*x != *y) {
			return (unsigned char)*x - (unsigned char)*y;
		} else {
			x++;
			y++;
		}
	}
	if (*x || *y)
		return *x ? 1 : -1;
	return strcmp(a, b); /* "a01" vs "a1": still a total order */
}

struct devname {
	char s[R2CC_DEVNAME_MAX]; /* first: name_cmp() sorts these */
};

/* Names of the entries of @dirfd into *@names, unsorted. Return: count. */
static int list_devices(int dirfd, struct devname **names)
{
	struct devname *v = NULL, *nv;
	size_t n = 0, cap = 0, len;
	struct dirent *de;
	DIR *d;

	d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		len = strlen(de->d_name);
		if (len >= R2CC_DEVNAME_MAX) {
			r2cc_dbg("skipping device %.*s...: name over %d bytes",
				 32, de->d_name, R2CC_DEVNAME_MAX - 1);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = cap <= INT_MAX ? realloc(v, cap * sizeof(*v)) :
					      NULL;
			if (!nv) {
				free(v);
				closedir(d);
				return -ENOMEM;
			}
			v = nv;
		}
		memcpy(v[n++].s, de->d_name, len + 1);
	}
	closedir(d);
	*names = v;
	return (int)n;
}

/* The ports of @devfd as a bitmap. Return: 0, or -errno. */
static int list_ports(int devfd, const char *dev, uint8_t map[32])
{
	struct dirent *de;
	int fd, p;
	DIR *d;

	memset(map, 0, 32);
	fd = openat(devfd, "ports", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		p = port_number(de->d_name);
		if (p < 0)
			r2cc_dbg("%s: skipping port %.16s", dev, de->d_name);
		else
			map[p / 8] |= (uint8_t)(1U << (p % 8));
	}
	closedir(d);
	return 0;
}

/* Whether R2CC_RAILS lets @dev/@port through; marks the specs it meets. */
static bool wanted(const struct r2cc_rails *rails, const char *dev,
		   unsigned int port, bool *hit)
{
	bool ok = !rails->n;
	unsigned int i;

	for (i = 0; i < rails->n && i < R2CC_RAILS_MAX; i++) {
		if (strcmp(rails->v[i].dev, dev) ||
		    (rails->v[i].port && rails->v[i].port != port))
			continue;
		hit[i] = ok = true;
	}
	return ok;
}

/* Every port of device @dev: into @out while there is room. Return: count */
static int scan_device(int classfd, const char *dev,
		       const struct r2cc_rails *rails, bool *hit,
		       struct r2cc_rail_info *out, int room)
{
	struct r2cc_rail_info r;
	char msg[64];
	uint8_t map[32];
	int devfd, err, found = 0;
	unsigned int p;

	devfd = openat(classfd, dev, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	err = devfd < 0 ? -errno : list_ports(devfd, dev, map);
	if (err) {
		r2cc_dbg("skipping device %s: %s", dev,
			 strerror_r(-err, msg, sizeof(msg)));
		if (devfd >= 0)
			close(devfd);
		return 0;
	}
	memset(&r, 0, sizeof(r));
	memcpy(r.dev, dev, strlen(dev) + 1);
	read_device(devfd, &r);
	for (p = 1; p <= PORT_MAX; p++) {
		if (!(map[p / 8] & (1U << (p % 8))))
			continue;
		if (!wanted(rails, dev, p, hit)) {
			r2cc_dbg("%s/%u: not in R2CC_RAILS", dev, p);
			continue;
		}
		if (found < room) {
			r.port = (uint8_t)p;
			read_port(devfd, &r);
			out[found] = r;
		}
		found++;
	}
	close(devfd);
	return found;
}

int r2cc_rail_scan(const char *sysfs_root, const struct r2cc_config *cfg,
		   struct r2cc_rail_info *out, int max)
{
	static const struct r2cc_rails all;
	const struct r2cc_rails *rails = cfg ? &cfg->rails : &all;
	bool hit[R2CC_RAILS_MAX] = { false };
	struct devname *names = NULL;
	int rootfd, classfd, n, i, found = 0;
	unsigned int s;

	if (!sysfs_root || max < 0 || (max && !out))
		return -EINVAL;
	rootfd = open(sysfs_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return -errno;
	classfd = openat(rootfd, "class/infiniband",
			 O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(rootfd);
	if (classfd < 0)
		return -errno;
	/* list_devices() closes a dup: readdir() owns the one it gets */
	n = dup(classfd);
	n = n < 0 ? -errno : list_devices(n, &names);
	if (n < 0) {
		close(classfd);
		return n;
	}
	qsort(names, (size_t)n, sizeof(*names), name_cmp);
	for (i = 0; i < n && found < INT_MAX - PORT_MAX; i++)
		found += scan_device(classfd, names[i].s, rails, hit,
				     out + (found < max ? found : max),
				     found < max ? max - found : 0);
	close(classfd);
	free(names);
	for (s = 0; s < rails->n && s < R2CC_RAILS_MAX; s++) {
		if (hit[s])
			continue;
		if (rails->v[s].port)
			r2cc_warn("R2CC_RAILS: no rail %s/%u", rails->v[s].dev,
				  rails->v[s].port);
		else
			r2cc_warn("R2CC_RAILS: no device %s", rails->v[s].dev);
	}
	return found;
}

int r2cc_rail_format(const struct r2cc_rail_info *r, char *buf, size_t size)
{
	char num[4];
	const char *state = num;
	int n;

	if (!r || !buf)
		return -EINVAL;
	if (r->state < ARRAY_SIZE(state_names))
		state = state_names[r->state];
	else
		snprintf(num, sizeof(num), "%u", r->state);
	n = snprintf(buf, size,
		     "%s/%u %s %s %u Mb/s x%u numa %d pci %s netdev %s", r->dev,
		     r->port, r2cc_link_layer_name(r->link_layer), state,
		     r->rate_mbps, r->width, r->numa_node,
		     r->pci[0] ? r->pci : "-", r->netdev[0] ? r->netdev : "-");
	if (n < 0)
		return -EINVAL;
	return (size_t)n < size ? 0 : -ENOSPC;
}

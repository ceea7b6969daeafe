/* SPDX-License-Identifier: MIT */
/*
 * test_neigh.c - a peer's node from the IPoIB neighbours
 * (r2cc_neigh_find()): a complete InfiniBand entry whose hardware
 * address carries the GID gives its address; Ethernet entries,
 * incomplete ones and malformed lines are passed over.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "neigh.h"

/* As a node of an mlx5 fabric shows it: ib0 and ib1 (subnet prefix
 * fe80::, the peers' port GUIDs), an Ethernet neighbour, an entry still
 * resolving (flags 0x0), and lines no kernel writes */
static const char table[] =
	"IP address       HW type     Flags       HW address            "
	"Mask     Device\n"
	"192.168.1.1      0x1         0x2         52:54:00:12:35:02     *"
	"        eno1\n"
	"10.12.0.7        0x20        0x2         "
	"00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6e:2a:10     *"
	"        ib0\n"
	"10.13.0.9        0x20        0x0         "
	"00:00:10:4a:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:6e:2a:11     *"
	"        ib1\n"
	"10.12.0.8        0x20        0x6         "
	"80:00:02:08:fe:80:00:00:00:00:00:00:b8:ce:f6:03:00:9a:51:c4     *"
	"        ib0\n"
	"10.12.0.300      0x20        0x2         "
	"00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:00:00:01     *"
	"        ib0\n"
	"10.12.0.5        0x20        0x2         "
	"00:00:10:49:fe:80:00:00:00:00:00:00:0c:42:a1:03:00:00:00     *"
	"        ib0\n"
	"10.12.0.6 0x20\n";

static void gid_of(const char *guid, uint8_t gid[16])
{
	memcpy(gid, "\xfe\x80\0\0\0\0\0\0", 8);
	memcpy(gid + 8, guid, 8);
}

Test(neigh, a_complete_infiniband_entry_names_the_node)
{
	uint8_t gid[16], ip[4];

	gid_of("\x0c\x42\xa1\x03\x00\x6e\x2a\x10", gid);
	cr_assert_eq(r2cc_neigh_find(table, strlen(table), gid, ip), 0);
	cr_assert_eq(memcmp(ip, "\x0a\x0c\x00\x07", 4), 0);
	/* flags with more than ATF_COM (0x6: ATF_PERM too) */
	gid_of("\xb8\xce\xf6\x03\x00\x9a\x51\xc4", gid);
	cr_assert_eq(r2cc_neigh_find(table, strlen(table), gid, ip), 0);
	cr_assert_eq(memcmp(ip, "\x0a\x0c\x00\x08", 4), 0);
}

Test(neigh, incomplete_malformed_and_unknown_entries_give_nothing)
{
	uint8_t gid[16], ip[4] = { 9, 9, 9, 9 };

	/* incomplete (flags 0x0) */
	gid_of("\x0c\x42\xa1\x03\x00\x6e\x2a\x11", gid);
	cr_assert_eq(r2cc_neigh_find(table, strlen(table), gid, ip), -ENOENT);
	/* its address is no IPv4 address */
	gid_of("\x0c\x42\xa1\x03\x00\x00\x00\x01", gid);
	cr_assert_eq(r2cc_neigh_find(table, strlen(table), gid, ip), -ENOENT);
	/* nobody's */
	gid_of("\x01\x02\x03\x04\x05\x06\x07\x08", gid);
	cr_assert_eq(r2cc_neigh_find(table, strlen(table), gid, ip), -ENOENT);
	cr_assert_eq(memcmp(ip, "\x09\x09\x09\x09", 4), 0, "ip written");
	/* a table cut short in its first entry's address */
	gid_of("\x0c\x42\xa1\x03\x00\x6e\x2a\x10", gid);
	cr_assert_eq(r2cc_neigh_find(table, 150, gid, ip), -ENOENT);
	cr_assert_eq(r2cc_neigh_find(table, 0, gid, ip), -ENOENT);
}

Test(neigh, this_hosts_table_reads)
{
	uint8_t gid[16] = { 0 }, ip[4];
	int r = r2cc_neigh_lookup(gid, ip);

	/* read to its end: no InfiniBand neighbour has an all-zero GID */
	cr_assert_eq(r, -ENOENT, "%d", r);
}

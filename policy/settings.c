/* SPDX-License-Identifier: MIT */
/*
 * settings.c - the table of r2cc settings: name, kind, accepted values,
 * default, the field it fills, and its documentation. The one source of
 * every setting: r2cc.conf(5)'s OPTIONS and the README's table are
 * generated from it (r2cc-ctl config list --man, --markdown), and the lint
 * suite fails when they differ. In .brief and .doc, *word* is set in bold.
 */
#include <stddef.h>

#include "config_int.h"

static const char *const bool_words[] = { "1",	   "0",	 "yes", "no", "true",
					  "false", "on", "off", NULL };
static const char *const level_words[] = { "off",  "err",   "warn",
					   "info", "debug", NULL };
static const char *const backup_words[] = { "eager", "lazy", NULL };

#define FIELD(f)                                \
	.off = offsetof(struct r2cc_config, f), \
	.size = sizeof(((struct r2cc_config *)0)->f)

#define ACCEPT_ABSPATH "an absolute path shorter than 4096 bytes"

/* A unit test checks that names are unique and every default parses. */
const struct r2cc_setting r2cc_settings[R2CC_CONF_NR] = {
	[R2CC_CONF_DISABLE] = {
		"R2CC_DISABLE", R2CC_KIND_BOOL, .words = bool_words,
		.def = "0", FIELD(disable), .common = true,
		.brief = "pass every call through, untouched",
		.doc = "Pass every call through to libibverbs untouched: no "
		       "mirroring, no protection, no status record.",
	},
	[R2CC_CONF_LOG] = {
		"R2CC_LOG", R2CC_KIND_ENUM, .words = level_words,
		.def = "err", FIELD(log_level), .common = true,
		.brief = "how much r2cc logs",
		.doc = "How much r2cc logs: *info* adds rail changes, moves "
		       "and their figures (what an operator wants in a job's "
		       "log), *debug* every step of a move. A line reads "
		       "`r2cc[PID]: HH:MM:SS.uuuuuu MODULE: FUNCTION:LINE: "
		       "message', the time of day in UTC.",
	},
	[R2CC_CONF_LOG_FILE] = {
		"R2CC_LOG_FILE", R2CC_KIND_ABSPATH,
		.accepted = ACCEPT_ABSPATH, FIELD(log_file), .common = true,
		.brief = "where the log goes (standard error if unset)",
		.doc = "Where the log goes, appended to (created with "
		       "mode 0600); standard error otherwise.",
	},
	[R2CC_CONF_RAILS] = {
		"R2CC_RAILS", R2CC_KIND_RAILS,
		.accepted = "all, or up to 16 comma-separated DEV[/PORT] "
			    "without duplicates; DEV is 1-63 of "
			    "[A-Za-z0-9_.-], PORT 1..255",
		.def = "all", FIELD(rails), .common = true,
		.brief = "the devices r2cc may use as rails",
		.doc = "The RDMA devices (and ports) r2cc may use as rails: "
		       "they get the job's memory registrations mirrored and "
		       "carry standby connections. Rails are numbered in "
		       "libibverbs' device order, which must match across the "
		       "nodes of a job.",
	},
	[R2CC_CONF_BACKUP] = {
		"R2CC_BACKUP", R2CC_KIND_ENUM, .words = backup_words,
		.def = "eager", FIELD(backup), .common = true,
		.brief = "standby QPs made at connection time, or at a move",
		.doc = "*eager*: a standby connection is made when a "
		       "connection reaches RTR. *lazy*: made at the first "
		       "failover and parked in RESET after the move back, "
		       "for the next (half the queue pairs on the NICs until "
		       "then, a few milliseconds more at a failover). Both "
		       "ends must say *lazy*; an end bound to an eager one "
		       "makes its standby at once. Queue pairs on a shared "
		       "receive queue are always eager.",
	},
	[R2CC_CONF_DETECT_MS] = {
		"R2CC_DETECT_MS", R2CC_KIND_UINT, .lo = 10, .hi = 60000,
		.def = "500", FIELD(detect_ms), .common = true,
		.brief = "bound on detecting a black hole, in ms",
		.doc = "The bound, in milliseconds, on detecting a black "
		       "hole. A protected connection's local ACK timeout is "
		       "lowered, when longer, so that its tries (retry count "
		       "capped at 6, so 7 tries) end within it: 500 gives "
		       "exponent 14 (67 ms a try, 0.47 s in all). A "
		       "connection whose peer runs no r2cc keeps the values "
		       "its program set.",
	},
	[R2CC_CONF_FAILBACK] = {
		"R2CC_FAILBACK", R2CC_KIND_BOOL, .words = bool_words,
		.def = "1", FIELD(failback),
		.brief = "move connections back to a repaired rail",
		.doc = "Move connections back to their own rail once it is "
		       "repaired (see r2cc(7)). A connection whose standby's "
		       "rail fails while its own is up again moves back at "
		       "once, whatever this says.",
	},
	[R2CC_CONF_FAILBACK_HOLD_MS] = {
		"R2CC_FAILBACK_HOLD_MS", R2CC_KIND_UINT, .lo = 0,
		.hi = 3600000, .def = "5000", FIELD(failback_hold_ms),
		.common = true,
		.brief = "how long a repaired rail must stay healthy, in ms",
		.doc = "How long a repaired rail must stay healthy before "
		       "connections move back; after a black hole (no rail "
		       "event), how long after the failover the path is "
		       "first probed, and the first wait between probes "
		       "while it stays dark (doubling, up to a minute).",
	},
	[R2CC_CONF_KEEPALIVE] = {
		"R2CC_KEEPALIVE", R2CC_KIND_BOOL, .words = bool_words,
		.def = "0", FIELD(keepalive),
		.brief = "probe quiet paths; move idle QPs off a black hole",
		.doc = "Probe quiet paths: a TCP handshake from the rail's "
		       "address to the peer's, one every *keepalive_ms* once "
		       "nothing completed on the path for that long. When 3 "
		       "in a row go unanswered and still nothing completed, "
		       "the path's idle connections fail over before they "
		       "send into the black hole. A path is judged only after "
		       "one of its probes got through.",
	},
	[R2CC_CONF_KEEPALIVE_MS] = {
		"R2CC_KEEPALIVE_MS", R2CC_KIND_UINT, .lo = 100, .hi = 60000,
		.def = "1000", FIELD(keepalive_ms),
		.brief = "quiet time before a probe, and the probes' period",
		.doc = "How long, in milliseconds, a path must be quiet "
		       "before it is probed, and the period of its probes "
		       "(each waits up to 2 seconds).",
	},
	[R2CC_CONF_CTRL_PORT] = {
		"R2CC_CTRL_PORT", R2CC_KIND_UINT, .lo = 1, .hi = 65535,
		.def = "18650", FIELD(ctrl_port),
		.brief = "per-node TCP rendezvous port of the control channel",
		.doc = "The per-node TCP rendezvous port of the control "
		       "channel, bound by every r2cc process of the user "
		       "with SO_REUSEPORT; the same on every node of a job.",
	},
	[R2CC_CONF_CTRL_IF] = {
		"R2CC_CTRL_IF", R2CC_KIND_IFNAME,
		.accepted = "a network interface name of 1-15 characters "
			    "without '/', ':' or white space",
		FIELD(ctrl_if), .common = true,
		.brief = "interface offered first for the control channel",
		.doc = "The interface whose addresses a process offers first "
		       "to its peers for the direct control channel (the "
		       "management network); the rails' addresses follow, "
		       "for reconnection. The listeners accept on every "
		       "address, because peers first reach a node through "
		       "the address of the remote GID they see. Unset: any "
		       "interface.",
	},
	[R2CC_CONF_PEERS] = {
		"R2CC_PEERS", R2CC_KIND_HOSTS,
		.accepted = "names or IPv4 addresses separated by commas or "
			    "white space, with Slurm's ranges (gpu[001-128]), "
			    "at most 65536, 4095 bytes in all; or the absolute "
			    "path of a file of them",
		FIELD(peers),
		.brief = "the job's nodes, to find peers by",
		.doc = "The job's nodes, asked in turn which of their "
		       "processes owns a peer's queue pair when the peer's "
		       "GID carries no IPv4 address (InfiniBand, RoCE over "
		       "IPv6) or *peer_by_gid* is off, and neither "
		       "*node_map* nor the IPoIB neighbours name its node: "
		       "names or IPv4 addresses separated by commas or white space, with "
		       "Slurm's ranges (`gpu[001-128]-mgmt'), or the absolute "
		       "path of a file of them ('#' starts a comment). The "
		       "node that answered is kept for the GID. Unset: "
		       "SLURM_JOB_NODELIST when the job runs under Slurm. "
		       "Names are resolved once, when first needed, by a "
		       "thread of their own.",
	},
	[R2CC_CONF_PEER_BY_GID] = {
		"R2CC_PEER_BY_GID", R2CC_KIND_BOOL, .words = bool_words,
		.def = "1", FIELD(peer_by_gid),
		.brief = "find a peer's node by the address in its GID",
		.doc = "Find a peer's node by the IPv4 address its RoCE GID "
		       "carries, on the rendezvous port there. Off: as for a "
		       "GID without one (*node_map*, the IPoIB neighbours, "
		       "the job's nodes: *peers*), for fabrics where that "
		       "address does not reach the node's r2cc.",
	},
	[R2CC_CONF_NODE_MAP] = {
		"R2CC_NODE_MAP", R2CC_KIND_GIDMAP,
		.accepted = "GID=HOST or lid:LID=HOST entries (the GID as "
			    "IPv6 text, the LID a unicast one, HOST a name or "
			    "IPv4 address) separated by commas or white space, "
			    "at most 65536, 4095 bytes in all; or the absolute "
			    "path of a file of them",
		FIELD(node_map),
		.brief = "the node of each peer GID, written down",
		.doc = "The node of each peer GID, for a peer whose GID "
		       "carries no IPv4 address (or with *peer_by_gid* off): "
		       "`GID=HOST' entries (`fe80::c42:a103:6e:2a10=gpu017'; "
		       "HOST a name or an IPv4 address), and for peers "
		       "routed by LID (InfiniBand, no GRH) `lid:LID=HOST' "
		       "entries (`lid:0x1b=gpu017'), separated by commas "
		       "or white space, or the absolute path of a file of "
		       "them ('#' starts a comment). The node it names is "
		       "asked first, before the IPoIB neighbours' and the "
		       "job's nodes (*peers*).",
	},
	[R2CC_CONF_SECRET_FILE] = {
		"R2CC_SECRET_FILE", R2CC_KIND_ABSPATH,
		.accepted = ACCEPT_ABSPATH, FIELD(secret_file),
		.common = true,
		.brief = "the job secret; without it nothing is protected",
		.doc = "The per-job secret that authenticates control "
		       "messages: a regular file (not a symbolic link) owned "
		       "by the user, mode 0600 or stricter, of 32 to 1024 "
		       "bytes, the same on every node of the job (*r2cc-ctl "
		       "secret new* makes one). Without it there is no "
		       "control channel and every connection runs "
		       "unprotected.",
	},
	[R2CC_CONF_STATS] = {
		"R2CC_STATS", R2CC_KIND_ABSPATH, .accepted = ACCEPT_ABSPATH,
		FIELD(stats_file),
		.brief = "per-QP statistics written at exit",
		.doc = "Where the rails, the mirroring counts and one line "
		       "per queue pair (work requests by opcode, receives, "
		       "completions, bytes) are written when the program "
		       "exits; %p becomes the process id, %h the host name.",
	},
	[R2CC_CONF_CONFIG] = {
		"R2CC_CONFIG", R2CC_KIND_PATH, .env_only = true,
		.accepted = "a file path shorter than 4096 bytes",
		FIELD(config_file), .common = true,
		.brief = "a configuration file (environment only)",
		.doc = "The configuration file to read, in the format "
		       "described here. It can only be set in the "
		       "environment.",
	},
};

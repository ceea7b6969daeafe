/* SPDX-License-Identifier: MIT */
/*
 * policy.h - the policy module's one public header: logging, the
 * configuration (built-in defaults < r2cc.conf < R2CC_* environment), rails.
 * Locks: logging is lock-free and the config calls reentrant; rail health
 * (health.h) and the status record (status.h) each take a lock of their
 * own.
 */
#ifndef R2CC_POLICY_H
#define R2CC_POLICY_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "r2cc_config.h"

enum r2cc_log_level {
	R2CC_LOG_OFF,
	R2CC_LOG_ERR,
	R2CC_LOG_WARN,
	R2CC_LOG_INFO,
	R2CC_LOG_DEBUG,
};

/* Longest line r2cc_log() writes; longer ones are cut to end in "...\n" */
#define R2CC_LOG_LINE_MAX 1024
/* A log hook gets one whole line: prefix, '\n' and NUL included */
typedef void (*r2cc_log_fn)(enum r2cc_log_level level, const char *line,
			    size_t len);
/**
 * r2cc_log() - emit "r2cc[pid]: mod: func:line: message\n" in one write(2)
 * @level: R2CC_LOG_ERR..R2CC_LOG_DEBUG; dropped if above the current level
 * @mod: module name
 * @func: calling function
 * @line: calling line
 * @fmt: printf format; a missing trailing newline is added
 * Goes to the r2cc_log_set_fn() hook if set, else the r2cc_log_open_file()
 * file, else stderr; never stdout. Preserves errno. Thread-safe.
 */
void r2cc_log(enum r2cc_log_level level, const char *mod, const char *func,
	      int line, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Each library names itself with -DR2CC_LOG_MOD="..." in its c_args */
#ifndef R2CC_LOG_MOD
#define R2CC_LOG_MOD "r2cc"
#endif
#define r2cc_log_at(lvl, fmt, ...) \
	r2cc_log(lvl, R2CC_LOG_MOD, __func__, __LINE__, fmt, ##__VA_ARGS__)
#define r2cc_err(fmt, ...) r2cc_log_at(R2CC_LOG_ERR, fmt, ##__VA_ARGS__)
#define r2cc_warn(fmt, ...) r2cc_log_at(R2CC_LOG_WARN, fmt, ##__VA_ARGS__)
#define r2cc_info(fmt, ...) r2cc_log_at(R2CC_LOG_INFO, fmt, ##__VA_ARGS__)
#define r2cc_dbg(fmt, ...) r2cc_log_at(R2CC_LOG_DEBUG, fmt, ##__VA_ARGS__)
/* Data path: compiled out unless -Ddatapath_debug=true; format checked */
#define r2cc_dbg_dp(fmt, ...) \
	((void)(R2CC_DATAPATH_DEBUG && (r2cc_dbg(fmt, ##__VA_ARGS__), 0)))
/**
 * r2cc_log_set_fn() - send log lines to @fn (NULL: back to file/stderr)
 * @fn: the hook
 * One atomic exchange: a racing message goes wholly to the old or the new
 * sink, and the old hook may still be running when this returns.
 * Return: the previous hook.
 */
r2cc_log_fn r2cc_log_set_fn(r2cc_log_fn fn);
/**
 * r2cc_log_set_level() - set the most verbose level emitted
 * @level: R2CC_LOG_OFF..R2CC_LOG_DEBUG (clamped)
 * Until set it is R2CC_LOG_WARN, so what r2cc_config_load() reports is
 * seen; callers then apply cfg->log_level. Return: the previous level.
 */
enum r2cc_log_level r2cc_log_set_level(enum r2cc_log_level level);
enum r2cc_log_level r2cc_log_get_level(void);
/**
 * r2cc_log_open_file() - log to @path (NULL or "": back to stderr)
 * @path: opened O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC, mode 0600
 * Later files are dup3()ed over the first descriptor, so a racing writer
 * never uses a closed or recycled fd. Return: 0, or -errno (sink kept).
 */
int r2cc_log_open_file(const char *path);

/* A bound on one kind of log line that a peer or a program can make
 * come at any rate (zero-initialised, static): at most R2CC_LOG_BURST
 * lines in each R2CC_LOG_WINDOW_S seconds; the next one let through
 * says how many were held back. Any thread; approximate under races. */
#define R2CC_LOG_BURST 10
#define R2CC_LOG_WINDOW_S 10
struct r2cc_log_limit {
	_Atomic uint64_t window; /* the window counted in, 0: none yet */
	_Atomic uint32_t n; /* lines let through in it */
	_Atomic uint64_t held; /* held back since the last let through */
};
/* Whether to say a limited line: hold it back (counted), say it, or say
 * it as the window's last, after which its kind is held back until the
 * next window (so a reader learns that before the window ends). */
enum r2cc_log_say {
	R2CC_LOG_HOLD = 0,
	R2CC_LOG_SAY,
	R2CC_LOG_SAY_LAST,
};
/* What to say now (@held: the lines held back before it). At debug
 * level every line goes. */
enum r2cc_log_say r2cc_log_limit_pass(struct r2cc_log_limit *l, uint64_t *held);
/* The words a limited line ends with when @say is its window's last */
const char *r2cc_log_limit_tail(enum r2cc_log_say say);

/* Settings: indexes into the table in config.c. CONFIG is env-only. */
enum r2cc_conf_key {
	R2CC_CONF_DISABLE,
	R2CC_CONF_LOG,
	R2CC_CONF_LOG_FILE,
	R2CC_CONF_RAILS,
	R2CC_CONF_BACKUP,
	R2CC_CONF_DETECT_MS,
	R2CC_CONF_FAILBACK,
	R2CC_CONF_FAILBACK_HOLD_MS,
	R2CC_CONF_KEEPALIVE,
	R2CC_CONF_KEEPALIVE_MS,
	R2CC_CONF_CTRL_PORT,
	R2CC_CONF_CTRL_IF,
	R2CC_CONF_PEERS,
	R2CC_CONF_PEER_BY_GID,
	R2CC_CONF_NODE_MAP,
	R2CC_CONF_SECRET_FILE,
	R2CC_CONF_STATS,
	R2CC_CONF_CONFIG,
	R2CC_CONF_NR
};
enum r2cc_conf_src { R2CC_SRC_DEFAULT, R2CC_SRC_FILE, R2CC_SRC_ENV };
enum r2cc_backup { R2CC_BACKUP_EAGER, R2CC_BACKUP_LAZY };

#define R2CC_RAILS_MAX 16
#define R2CC_DEVNAME_MAX 64 /* 63 characters and the NUL */
#define R2CC_IFNAMSIZ 16 /* IFNAMSIZ: 15 characters and the NUL */
#define R2CC_CONF_LINE_MAX 4096 /* longer r2cc.conf lines are skipped */

struct r2cc_rails {
	unsigned int n; /* 0 = all rails */
	struct r2cc_rail_spec {
		char dev[R2CC_DEVNAME_MAX];
		uint8_t port; /* 1..255; 0 = every port of dev */
	} v[R2CC_RAILS_MAX];
};

/* The effective settings; strings are "" when unset. No pointers. */
struct r2cc_config {
	bool disable;
	enum r2cc_log_level log_level;
	char log_file[PATH_MAX]; /* "" = stderr */
	struct r2cc_rails rails;
	enum r2cc_backup backup;
	uint32_t detect_ms;
	bool failback;
	uint32_t failback_hold_ms;
	bool keepalive;
	uint32_t keepalive_ms;
	uint32_t ctrl_port;
	char ctrl_if[R2CC_IFNAMSIZ]; /* "" = any interface */
	/* The job's nodes: a host list, or a file's absolute path; "" =
	 * SLURM_JOB_NODELIST's, if any */
	char peers[R2CC_CONF_LINE_MAX];
	bool peer_by_gid;
	/* GIDs' nodes: a map, or a file's absolute path; "" = none */
	char node_map[R2CC_CONF_LINE_MAX];
	char secret_file[PATH_MAX];
	char stats_file[PATH_MAX];
	char config_file[PATH_MAX];
	uint8_t src[R2CC_CONF_NR]; /* enum r2cc_conf_src */
	uint32_t src_line[R2CC_CONF_NR]; /* r2cc.conf line if src is FILE */
};

/* Gets each problem message, without the r2cc_log() prefix */
typedef void (*r2cc_conf_report_fn)(void *arg, const char *msg);
/* Streaming r2cc.conf parser (init, line..., finish); fuzzers drive it */
struct r2cc_conf_parser {
	struct r2cc_config *cfg; /* borrowed */
	const char *origin; /* borrowed: file name for messages */
	r2cc_conf_report_fn report; /* optional; set after init */
	void *report_arg; /* borrowed */
	unsigned int line, problems;
	uint32_t seen[R2CC_CONF_NR]; /* line that last set each key */
};
/**
 * r2cc_config_load() - defaults, then $R2CC_CONFIG, then the environment
 * @cfg: filled in; always usable afterwards
 * @envp: "NAME=value" array ending in NULL (callers pass environ), or NULL
 *
 * Each problem is one r2cc_log() warning (and one @fn call, for _report).
 * A bad value keeps the value of the layer below: the file's if it set
 * one, else the default. Unknown keys and R2CC_* variables are reported,
 * ignored. r2cc_config_init() only fills in the defaults.
 * Return: the number of problems (0 = clean).
 */
int r2cc_config_load(struct r2cc_config *cfg, char **envp);
int r2cc_config_load_report(struct r2cc_config *cfg, char **envp,
			    r2cc_conf_report_fn fn, void *arg);
void r2cc_config_init(struct r2cc_config *cfg);
/**
 * r2cc_conf_parse_line() - parse one r2cc.conf line into p->cfg
 * @p: from r2cc_conf_parse_init(p, cfg, origin): cfg is not reset, and
 *     origin names the file in messages ("path:line: key")
 * @line: its bytes, not NUL-terminated, a trailing '\n' optional
 * @len: its length; a line over R2CC_CONF_LINE_MAX is reported, skipped
 * Return: 0, or -errno after reporting a problem. r2cc_conf_parse_finish()
 * returns the number of problems since init.
 */
void r2cc_conf_parse_init(struct r2cc_conf_parser *p, struct r2cc_config *cfg,
			  const char *origin);
int r2cc_conf_parse_line(struct r2cc_conf_parser *p, const char *line,
			 size_t len);
int r2cc_conf_parse_finish(struct r2cc_conf_parser *p);
/**
 * r2cc_config_lookup() - find a setting by name
 * @name: "R2CC_LOG", "log", "LOG"...: case-insensitive, prefix optional
 * Return: its enum r2cc_conf_key, or -ENOENT. r2cc_config_key_name() is
 * the reverse ("R2CC_LOG"; NULL if out of range).
 */
int r2cc_config_lookup(const char *name);
const char *r2cc_config_key_name(int key);
/**
 * r2cc_config_format() - the value of setting @key as text ("" if unset)
 * @cfg: settings
 * @key: enum r2cc_conf_key
 * @buf: output
 * @size: its size
 * Return: 0, -EINVAL for a bad key, -ENOSPC if @buf is too small.
 */
int r2cc_config_format(const struct r2cc_config *cfg, int key, char *buf,
		       size_t size);
/**
 * r2cc_config_dump() - print "key = value   # source" lines to @f
 * @cfg: settings
 * @f: output stream; it reads back as r2cc.conf (unset: commented out)
 * Return: 0, or -EIO if writing failed.
 */
int r2cc_config_dump(const struct r2cc_config *cfg, FILE *f);

enum r2cc_list_fmt {
	R2CC_LIST_TEXT, /* for operators: r2cc-ctl config list */
	R2CC_LIST_MAN, /* r2cc.conf(5)'s OPTIONS, roff */
	R2CC_LIST_MARKDOWN, /* the README's table of the common settings */
	R2CC_LIST_NAMES, /* one environment name per line */
};

/**
 * r2cc_config_list() - document every setting from the settings table
 * @f: output stream
 * @fmt: enum r2cc_list_fmt
 * Return: 0, -EINVAL for a bad @fmt, or -EIO if writing failed.
 */
int r2cc_config_list(FILE *f, enum r2cc_list_fmt fmt);

/* The rail inventory (rail.c): one per RDMA device port, read from sysfs */
enum r2cc_link_layer { R2CC_LL_UNKNOWN, R2CC_LL_IB, R2CC_LL_ETH };
struct r2cc_rail_info {
	char dev[R2CC_DEVNAME_MAX]; /* "mlx5_0", "rxe0" */
	uint8_t port; /* 1-based */
	enum r2cc_link_layer link_layer;
	uint8_t state; /* enum ibv_port_state: 4 = ACTIVE; 0 = unknown */
	uint32_t rate_mbps; /* "2.5 Gb/sec (1X SDR)" -> 2500; 0 = unknown */
	uint8_t width; /* the 1X in that -> 1; 0 = unknown */
	int numa_node; /* -1 = unknown or none */
	char pci[32]; /* "0000:3b:00.0"; "" if not PCI (rxe) */
	char netdev[R2CC_IFNAMSIZ]; /* RoCE; "" if none (InfiniBand) */
	/* InfiniBand: the port's LID and its subnet manager's; 0 = none
	 * (RoCE) or unknown */
	uint16_t lid, sm_lid;
};
/**
 * r2cc_rail_scan() - list the RDMA device ports under @sysfs_root
 * @sysfs_root: "/sys", or a fixture tree; class/infiniband is read
 * @cfg: its R2CC_RAILS keeps only the rails named (and each name that
 *       matches none is one warning); NULL = all rails
 * @out: filled in order of device name (mlx5_2 before mlx5_10), then port
 * @max: its size; rails past it are counted, not stored
 * A file that is missing, unreadable or garbled leaves its field unknown;
 * names too long for the fields are skipped (debug message). Reentrant.
 * Return: the number of rails (may exceed @max), or -errno: -ENOENT if
 * there is no class/infiniband (no RDMA driver loaded).
 */
int r2cc_rail_scan(const char *sysfs_root, const struct r2cc_config *cfg,
		   struct r2cc_rail_info *out, int max);
/* "InfiniBand", "Ethernet" or "unknown" */
const char *r2cc_link_layer_name(enum r2cc_link_layer ll);
/**
 * r2cc_rail_format() - @r as one log line, unknowns as 0, -1 or "-":
 * "rxe0/1 Ethernet ACTIVE 2500 Mb/s x1 numa -1 pci - netdev eth0"
 * Return: 0, -EINVAL, or -ENOSPC if @buf is too small (then cut short).
 */
int r2cc_rail_format(const struct r2cc_rail_info *r, char *buf, size_t size);

/* Rail health (health.c), the status record r2cc-ctl reads (status.c),
 * backup placement with memory locality (placement.c, locality.c, gpu.c)
 * and the job secret file (secret.c), in headers of their own to keep
 * this one short. */
#include "health.h"
#include "status.h"
#include "placement.h"
#include "secret.h"

#endif /* R2CC_POLICY_H */

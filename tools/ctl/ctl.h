/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - what r2cc-ctl's files share: options, exit codes, the command
 * table walker and the one printer that writes both text and JSON.
 */
#ifndef R2CC_CTL_H
#define R2CC_CTL_H

#include <stdbool.h>
#include <stdint.h>

/* Exit codes (r2cc-ctl(8), EXIT STATUS). */
enum {
	CTL_OK = 0,
	CTL_ERR = 1, /* usage or failure */
	CTL_NODEV = 2, /* no RDMA devices on this machine */
	CTL_DOWN = 3, /* not healthy: a rail down, a bad configuration */
	CTL_NONE = 4, /* no process on this node runs r2cc */
	CTL_UNSUPP = 5, /* this build or kernel cannot do it (fault) */
};

struct ctl_opts {
	bool json;
	bool pretty;
};
extern struct ctl_opts ctl;

struct ctl_cmd {
	const char *name; /* NULL: the default when no word is given */
	int (*fn)(int argc, char **argv);
	const char *help;
};
/* Run the row of @cmds that argv[0] names (exact or unique prefix). */
int ctl_exec(const char *object, const struct ctl_cmd *cmds, int argc,
	     char **argv);
int ctl_usage_of(const char *object, const struct ctl_cmd *cmds);

/* JSON or text from the same calls: objects and arrays nest. */
void pr_begin_list(void);
void pr_begin_list_key(const char *key); /* a list as an object's member */
void pr_end_list(void);
void pr_begin_obj(void);
void pr_end_obj(void);
/* @val NULL: "-" in text, null in JSON */
void pr_str(const char *key, const char *fmt_text, const char *val);
void pr_int(const char *key, const char *fmt_text, long long val);
void pr_float(const char *key, const char *fmt_text, double val);
void pr_secs(const char *key, const char *fmt_text, double val); /* %.3f */
void pr_newline(void);

/* records.c: the live status records (of @pid only if > 0) in *@out;
 * returns how many or -errno. ctl_none() reports "none" (or the error)
 * and returns the exit code. */
struct r2cc_status_snap;
const char *ctl_status_dir(void);
int ctl_collect(long pid, struct r2cc_status_snap **out);
void ctl_release(struct r2cc_status_snap *v, int n);
int ctl_none(int n, long pid);
long ctl_parse_pid(int argc, char **argv); /* [pid PID]: 0 none, -1 bad */

int rail_main(int argc, char **argv);
int config_main(int argc, char **argv);
int conn_main(int argc, char **argv);
int metrics_main(int argc, char **argv);
int events_main(int argc, char **argv);
int fault_main(int argc, char **argv);
int stats_main(int argc, char **argv);
int watch_main(int argc, char **argv);
int secret_main(int argc, char **argv);

/*
 * The fault injector's kernel side (r2cc-ctl(8), fault): fault_tc.c with
 * libbpf, or fault_none.c in a build without it (every call -ENOTSUP).
 * Each returns 0 or -errno and points *@step at what failed.
 * ctl_fault_install() attaches the tc program to cfg->ifindex's netdev,
 * on the hooks cfg->flags name, and pins its maps under
 * CTL_FAULT_PIN_DIR/@netdev; -EEXIST if one is there already.
 */
#define CTL_FAULT_PIN_DIR "/sys/fs/bpf/r2cc"
struct r2cc_fault_cfg;
struct r2cc_fault_stats;
int ctl_fault_install(const char *netdev, struct r2cc_fault_cfg *cfg,
		      const char **step);
int ctl_fault_remove(const char *netdev, const char **step);
int ctl_fault_read(const char *netdev, struct r2cc_fault_cfg *cfg,
		   struct r2cc_fault_stats *st, const char **step);
/* The netdevs that have a fault pinned, sorted; how many, or -errno. */
int ctl_fault_list(char (*names)[16], int max, const char **step);

#endif /* R2CC_CTL_H */

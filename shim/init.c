/* SPDX-License-Identifier: MIT */
/*
 * init.c - one-time start-up of the shim (pthread_once): configuration,
 * logging, the real libibverbs, the rail inventory. Anything that fails
 * switches the whole process to passthrough, with one line in the log.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "shim_int.h"

extern char **environ;

struct r2cc_shim_state r2cc_shim = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};
static pthread_once_t once = PTHREAD_ONCE_INIT;
__thread int r2cc_nest;

/* One rail per libibverbs device that policy/ found (and R2CC_RAILS
 * allows) in sysfs, in libibverbs' order. */
static void map_rails(const struct r2cc_rail_info *ri, int nri)
{
	char line[256];
	int i, j, n = 0;

	for (j = 0; j < nri; j++)
		if (r2cc_rail_format(&ri[j], line, sizeof(line)) >= 0)
			r2cc_dbg("inventory: %s", line);
	for (i = 0; i < r2cc_shim.ndev && n < R2CC_MAX_RAILS; i++) {
		const char *name = ibv_get_device_name(r2cc_shim.devs[i]);

		for (j = 0; name && j < nri; j++) {
			if (strcmp(ri[j].dev, name))
				continue;
			r2cc_shim.dev[n].dev = r2cc_shim.devs[i];
			r2cc_shim.dev[n].ll = ri[j].link_layer;
			memcpy(r2cc_shim.dev[n].netdev, ri[j].netdev,
			       sizeof(ri[j].netdev));
			r2cc_place_rail_init(&r2cc_shim.dev[n].place, &ri[j], n,
					     "/sys");
			r2cc_shim.dev[n].usable = true;
			n++;
			break;
		}
	}
	r2cc_shim.nrail = n;
}

static int start(void)
{
	struct r2cc_rail_info ri[R2CC_MAX_RAILS * 2];
	int nri, ret;

	ret = r2cc_real_resolve();
	if (ret) {
		r2cc_err("libibverbs entry points missing: passthrough");
		return ret;
	}
	if (r2cc_shim.cfg.disable) {
		r2cc_info("R2CC_DISABLE is set: passthrough");
		return -ECANCELED;
	}
	if (r2cc_map_init(&r2cc_shim.reg) || r2cc_map_init(&r2cc_shim.qpn)) {
		r2cc_err("out of memory at start-up: passthrough");
		return -ENOMEM;
	}
	r2cc_shim.devs = r2cc_real.ibv_get_device_list(&r2cc_shim.ndev);
	if (!r2cc_shim.devs || !r2cc_shim.ndev) {
		r2cc_info("no RDMA devices: passthrough");
		return -ENODEV;
	}
	nri = r2cc_rail_scan("/sys", &r2cc_shim.cfg, ri,
			     (int)(sizeof(ri) / sizeof(ri[0])));
	if (nri < 0) {
		r2cc_err("cannot list the rails in sysfs: %s: passthrough",
			 strerror(-nri));
		return nri;
	}
	if (nri > (int)(sizeof(ri) / sizeof(ri[0])))
		nri = (int)(sizeof(ri) / sizeof(ri[0]));
	map_rails(ri, nri);
	r2cc_info("%d RDMA device(s), %d rail(s) usable", r2cc_shim.ndev,
		  r2cc_shim.nrail);
	ret = r2cc_status_open();
	if (ret)
		r2cc_warn("no status record for r2cc-ctl: %s", strerror(-ret));
	r2cc_shim_health_start();
	r2cc_shim_protect_start();
	return 0;
}

static void init_once(void)
{
	/* A set-uid program must not be steered by its caller's env. */
	char *empty[] = { NULL };
	char **envp = getauxval(AT_SECURE) ? empty : environ;

	r2cc_config_load(&r2cc_shim.cfg, envp);
	r2cc_log_set_level(r2cc_shim.cfg.log_level);
	if (r2cc_shim.cfg.log_file[0] &&
	    r2cc_log_open_file(r2cc_shim.cfg.log_file))
		r2cc_err("cannot open R2CC_LOG_FILE %s: logging to stderr",
			 r2cc_shim.cfg.log_file);
	r2cc_shim.active = start() == 0;
}

void r2cc_shim_init(void)
{
	int saved = errno;

	pthread_once(&once, init_once);
	errno = saved;
}

/* At exit: the statistics file, if one was asked for. */
__attribute__((destructor)) static void r2cc_shim_exit(void)
{
	int saved = errno;

	if (!r2cc_shim.active)
		goto out;
	r2cc_mig_stop();
	r2cc_health_stop();
	if (r2cc_shim.cfg.stats_file[0])
		r2cc_stats_write();
	r2cc_status_close();
out:
	errno = saved;
}

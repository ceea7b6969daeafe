/* SPDX-License-Identifier: MIT */
/*
 * test_gpu.c - GPU locality through a scripted CUDA driver table (device
 * memory on GPU 1 at 0000:41:00.0, host memory, driver errors), without
 * libcuda, and with the real one where a GPU is present (skipped if not).
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy.h"

#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define MEM_HOST 1
#define MEM_DEVICE 2

/* What the fake driver answers, and what it was asked */
static struct {
	int type_rc, ord_rc, bus_rc;
	unsigned int type;
	int ord;
	const char *busid;
	int type_calls, ord_calls, bus_calls, odd_calls, bus_dev;
	unsigned long long last_ptr;
} sc;

static int fake_attr(void *data, int attr, unsigned long long ptr)
{
	__atomic_store_n(&sc.last_ptr, ptr, __ATOMIC_RELAXED);
	if (attr == 2) { /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */
		__atomic_add_fetch(&sc.type_calls, 1, __ATOMIC_RELAXED);
		if (!sc.type_rc)
			*(unsigned int *)data = sc.type;
		return sc.type_rc;
	}
	if (attr == 9) { /* CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL */
		__atomic_add_fetch(&sc.ord_calls, 1, __ATOMIC_RELAXED);
		if (!sc.ord_rc)
			*(int *)data = sc.ord;
		return sc.ord_rc;
	}
	sc.odd_calls++;
	return CUDA_ERROR_INVALID_VALUE;
}

static int fake_busid(char *buf, int len, int dev)
{
	__atomic_add_fetch(&sc.bus_calls, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&sc.bus_dev, dev, __ATOMIC_RELAXED);
	if (!sc.bus_rc)
		snprintf(buf, (size_t)len, "%s", sc.busid);
	return sc.bus_rc;
}

static const struct r2cc_cuda_ops fake_ops = {
	.pointer_get_attribute = fake_attr,
	.device_get_pci_bus_id = fake_busid,
};

#define NLOG 16
static char logs[NLOG][R2CC_LOG_LINE_MAX];
static int nlog;

static void on_log(enum r2cc_log_level level, const char *line, size_t len)
{
	(void)level;
	(void)len;
	if (nlog < NLOG)
		snprintf(logs[nlog], sizeof(logs[0]), "%s", line);
	__atomic_add_fetch(&nlog, 1, __ATOMIC_RELAXED);
}

static char buf[4096]; /* "host memory" for every case */

/* GPU 1, device memory, at 0000:41:00.0: what a case then changes */
static void scripted(void)
{
	memset(&sc, 0, sizeof(sc));
	sc.type = MEM_DEVICE;
	sc.ord = 1;
	sc.busid = "0000:41:00.0";
	nlog = 0;
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_DEBUG);
	cr_assert_eq(r2cc_gpu_set_driver(&fake_ops, NULL), 0);
}

static void dirty(struct r2cc_mem_loc *loc)
{
	memset(loc, 0x5a, sizeof(*loc));
}

Test(gpu, device_memory, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_eq(loc.gpu, 1);
	cr_assert_str_eq(loc.gpu_busid, "0000:41:00.0");
	cr_assert_eq(sc.bus_dev, 1);
	cr_assert_eq(sc.last_ptr, (unsigned long long)(uintptr_t)buf);
	cr_assert_eq(sc.odd_calls, 0);
}

Test(gpu, host_memory, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.type = MEM_HOST;
	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_str_eq(loc.gpu_busid, "");
	cr_assert_eq(sc.type_calls, 1);
	cr_assert_eq(sc.ord_calls, 0);
	cr_assert_eq(sc.bus_calls, 0);
}

Test(gpu, cuda_not_initialised, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.type_rc = CUDA_ERROR_NOT_INITIALIZED;
	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_str_eq(loc.gpu_busid, "");
	cr_assert_eq(sc.ord_calls, 0);
}

Test(gpu, not_a_cuda_pointer, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.type_rc = CUDA_ERROR_INVALID_VALUE;
	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_str_eq(loc.gpu_busid, "");
}

Test(gpu, ordinal_error, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.ord_rc = CUDA_ERROR_INVALID_VALUE;
	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_eq(sc.bus_calls, 0);
	sc.ord_rc = 0;
	sc.ord = -3;
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
}

/* The GPU is known, its PCI id not: GPU memory of unknown position */
Test(gpu, bus_id_error, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.bus_rc = CUDA_ERROR_NOT_INITIALIZED;
	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_eq(loc.gpu, 1);
	cr_assert_str_eq(loc.gpu_busid, "");
	sc.bus_rc = 0;
	sc.busid = "GPU-4d2a";
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_str_eq(loc.gpu_busid, "");
	sc.busid = "0000:41:00.0junk";
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_str_eq(loc.gpu_busid, "");
}

/* Newer drivers write an 8-digit domain, in upper case; sysfs does not */
Test(gpu, bus_id_in_sysfs_form, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.busid = "00000000:B1:00.0";
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_str_eq(loc.gpu_busid, "0000:b1:00.0");
	sc.busid = "10000:0A:1F.7"; /* a VMD domain */
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_str_eq(loc.gpu_busid, "10000:0a:1f.7");
}

Test(gpu, bad_arguments, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	cr_assert_eq(r2cc_gpu_locate(buf, NULL), -EINVAL);
	cr_assert_eq(r2cc_gpu_locate(NULL, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_eq(sc.type_calls, 0);
	cr_assert_eq(r2cc_mem_locate("/sys", buf, 1, NULL), -EINVAL);
}

Test(gpu, driver_fixed_once_loaded, .init = scripted, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	cr_assert_eq(r2cc_gpu_set_driver(NULL, "libnothing.so"), 0);
	cr_assert_eq(r2cc_gpu_set_driver(&fake_ops, NULL), 0);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
	cr_assert_eq(r2cc_gpu_set_driver(NULL, NULL), -EBUSY);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 1);
}

static void *locate_thread(void *arg)
{
	struct r2cc_mem_loc loc;

	(void)arg;
	return (void *)(intptr_t)r2cc_gpu_locate(buf, &loc);
}

/* The first calls race into the lazy load: each gets the driver */
Test(gpu, first_use_from_many_threads, .init = scripted, .timeout = 5.)
{
	pthread_t t[8];
	void *ret;
	int i;

	for (i = 0; i < 8; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, locate_thread, NULL),
			     0);
	for (i = 0; i < 8; i++) {
		cr_assert_eq(pthread_join(t[i], &ret), 0);
		cr_assert_eq((intptr_t)ret, 1);
	}
	cr_assert_eq(sc.type_calls, 8);
}

static void no_libcuda(void)
{
	nlog = 0;
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_INFO);
	cr_assert_eq(r2cc_gpu_set_driver(NULL, "libr2cc-test-no-cuda.so.1"), 0);
}

Test(gpu, libcuda_absent, .init = no_libcuda, .timeout = 5.)
{
	struct r2cc_mem_loc loc;
	int i, n = 0;

	for (i = 0; i < 3; i++) {
		dirty(&loc);
		cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
		cr_assert_eq(loc.gpu, -1);
		cr_assert_str_eq(loc.gpu_busid, "");
	}
	for (i = 0; i < nlog && i < NLOG; i++)
		n += !!strstr(logs[i], "libr2cc-test-no-cuda.so.1");
	cr_assert_eq(n, 1, "%d lines name the library, %d in all", n, nlog);
	cr_assert_eq(nlog, 1, "%s", logs[0]);
}

/* A library without the entry points counts as absent, too */
Test(gpu, libcuda_without_symbols, .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	nlog = 0;
	r2cc_log_set_fn(on_log);
	r2cc_log_set_level(R2CC_LOG_INFO);
	cr_assert_eq(r2cc_gpu_set_driver(NULL, "libm.so.6"), 0);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_eq(nlog, 1);
	cr_assert(strstr(logs[0], "libm.so.6"), "%s", logs[0]);
}

static char tree[64];

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void mkdirs(const char *rel)
{
	char path[256], *p;

	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	for (p = path + strlen(tree) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		mkdir(path, 0755);
		*p = '/';
	}
	cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "%s", path);
}

static void put(const char *rel, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tree, rel);
	f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

#define GPU_DIR "devices/pci0000:40/0000:40:01.0/0000:41:00.0"

/* A sysfs tree with GPU 1 at 0000:41:00.0 on NUMA node 1 */
static void gpu_tree(void)
{
	char path[256];

	scripted();
	snprintf(tree, sizeof(tree), "/tmp/r2cc-test-gpu-XXXXXX");
	cr_assert_not_null(mkdtemp(tree));
	mkdirs(GPU_DIR);
	put(GPU_DIR "/numa_node", "1\n");
	mkdirs("bus/pci/devices");
	snprintf(path, sizeof(path), "%s/bus/pci/devices/0000:41:00.0", tree);
	cr_assert_eq(symlink("../../../" GPU_DIR, path), 0);
}

static void gpu_tree_fini(void)
{
	nftw(tree, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

Test(gpu, locate_feeds_placement, .init = gpu_tree, .fini = gpu_tree_fini,
     .timeout = 5.)
{
	struct r2cc_place_rail r[3];
	struct r2cc_mem_loc loc;
	uint64_t salt;
	int i;

	dirty(&loc);
	cr_assert_eq(r2cc_mem_locate(tree, buf, sizeof(buf), &loc), 0);
	cr_assert_eq(loc.gpu, 1);
	cr_assert_str_eq(loc.gpu_busid, "0000:41:00.0");
	cr_assert_str_eq(loc.gpu_path, "pci0000:40/0000:40:01.0/0000:41:00.0");
	cr_assert_eq(loc.numa_node, 1);
	/* The NIC on the GPU's root port wins over the NUMA-local one */
	memset(r, 0, sizeof(r));
	for (i = 0; i < 3; i++) {
		r[i].index = i;
		r[i].up = true;
		r[i].link_layer = R2CC_LL_IB;
		r[i].cap_mbps = 200000;
	}
	r[1].numa_node = 1;
	snprintf(r[1].pci_path, sizeof(r[1].pci_path),
		 "pci0000:c0/0000:c0:01.0/0000:c1:00.0");
	snprintf(r[2].pci_path, sizeof(r[2].pci_path),
		 "pci0000:40/0000:40:01.0/0000:42:00.0");
	for (salt = 0; salt < 32; salt++)
		cr_assert_eq(r2cc_place_choose(r, 3, 0, &loc, salt), 2);
}

Test(gpu, locate_without_sysfs_entry, .init = gpu_tree, .fini = gpu_tree_fini,
     .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.busid = "0000:99:00.0";
	cr_assert_eq(r2cc_mem_locate(tree, buf, sizeof(buf), &loc), 0);
	cr_assert_eq(loc.gpu, 1);
	cr_assert_str_eq(loc.gpu_path, "");
	cr_assert_eq(loc.numa_node, -1);
}

Test(gpu, locate_host_memory, .init = gpu_tree, .fini = gpu_tree_fini,
     .timeout = 5.)
{
	struct r2cc_mem_loc loc;

	sc.type = MEM_HOST;
	memset(buf, 1, sizeof(buf));
	dirty(&loc);
	cr_assert_eq(r2cc_mem_locate(tree, buf, sizeof(buf), &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_str_eq(loc.gpu_path, "");
	cr_assert_eq(loc.numa_node, r2cc_mem_numa_node(buf, sizeof(buf)));
}

/* Whatever libcuda this host has (none, or one in a process that never
 * called cuInit): host memory is host memory, and nothing crashes. */
Test(gpu, real_driver_host_memory, .timeout = 10.)
{
	struct r2cc_mem_loc loc;

	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(loc.gpu, -1);
	cr_assert_str_eq(loc.gpu_busid, "");
}

/* The real driver on a real GPU; skipped where there is none */
Test(gpu, real_driver_device_memory, .timeout = 60.)
{
	int (*cu_init)(unsigned int), (*dev_get)(int *, int);
	int (*ctx_retain)(void **, int), (*ctx_set)(void *);
	int (*mem_alloc)(unsigned long long *, size_t);
	int (*alloc_host)(void **, size_t);
	int (*busid_of)(char *, int, int);
	char want[64], norm[32];
	unsigned int dom, bus, dv, fn;
	unsigned long long dptr = 0;
	struct r2cc_mem_loc loc;
	void *h, *ctx, *pinned;
	int dev;

	h = dlopen("libcuda.so.1", RTLD_NOW);
	if (!h) {
		cr_skip_test("no libcuda.so.1");
		return;
	}
	/* Before the program initialises CUDA: NOT_INITIALIZED, host */
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	*(void **)&cu_init = dlsym(h, "cuInit");
	*(void **)&dev_get = dlsym(h, "cuDeviceGet");
	*(void **)&ctx_retain = dlsym(h, "cuDevicePrimaryCtxRetain");
	*(void **)&ctx_set = dlsym(h, "cuCtxSetCurrent");
	*(void **)&mem_alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&alloc_host = dlsym(h, "cuMemAllocHost_v2");
	*(void **)&busid_of = dlsym(h, "cuDeviceGetPCIBusId");
	cr_assert(cu_init && dev_get && ctx_retain && ctx_set && mem_alloc &&
		  alloc_host && busid_of);
	if (cu_init(0) || dev_get(&dev, 0)) {
		cr_skip_test("libcuda but no usable GPU");
		return;
	}
	cr_assert_eq(ctx_retain(&ctx, dev), 0);
	cr_assert_eq(ctx_set(ctx), 0);
	cr_assert_eq(mem_alloc(&dptr, 1 << 20), 0);
	cr_assert_eq(alloc_host(&pinned, 1 << 20), 0);
	cr_assert_eq(busid_of(want, sizeof(want), dev), 0);
	cr_assert_eq(sscanf(want, "%x:%x:%x.%x", &dom, &bus, &dv, &fn), 4);
	snprintf(norm, sizeof(norm), "%04x:%02x:%02x.%x", dom, bus, dv, fn);

	dirty(&loc);
	cr_assert_eq(r2cc_gpu_locate((void *)(uintptr_t)dptr, &loc), 1);
	cr_assert_eq(loc.gpu, 0);
	cr_assert_str_eq(loc.gpu_busid, norm, "driver said %s", want);
	cr_assert_eq(r2cc_gpu_locate(pinned, &loc), 0);
	cr_assert_eq(r2cc_gpu_locate(buf, &loc), 0);
	cr_assert_eq(r2cc_mem_locate("/sys", (void *)(uintptr_t)dptr, 1, &loc),
		     0);
	cr_assert(strstr(loc.gpu_path, norm), "path %s", loc.gpu_path);
	cr_log_info("GPU %s at %s, NUMA node %d", norm, loc.gpu_path,
		    loc.numa_node);
}

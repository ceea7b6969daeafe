/* SPDX-License-Identifier: MIT */
/*
 * gpu.c - GPU locality of an address through the CUDA driver API, which is
 * dlopen()ed at run time (never linked): which GPU holds it, at which PCI id.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy.h"

/* The few values of <cuda.h> used here; checked against it when present */
#define R2CC_CU_OK 0
#define R2CC_CU_ATTR_TYPE 2 /* data: unsigned int */
#define R2CC_CU_ATTR_ORDINAL 9 /* data: int */
#define R2CC_CU_MEM_DEVICE 2
#define CUDA_SONAME "libcuda.so.1"

typedef int (*get_attr_fn)(void *, int, unsigned long long);
typedef int (*get_busid_fn)(char *, int, int);

#if R2CC_HAVE_CUDA_H
#include <cuda.h>
_Static_assert(CUDA_SUCCESS == R2CC_CU_OK, "cuda.h");
_Static_assert(CU_POINTER_ATTRIBUTE_MEMORY_TYPE == R2CC_CU_ATTR_TYPE, "cuda.h");
_Static_assert(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL == R2CC_CU_ATTR_ORDINAL,
	       "cuda.h");
_Static_assert(CU_MEMORYTYPE_DEVICE == R2CC_CU_MEM_DEVICE, "cuda.h");
_Static_assert(sizeof(CUdeviceptr) == sizeof(unsigned long long), "cuda.h");
_Static_assert(sizeof(CUresult) == sizeof(int), "cuda.h");
#endif

/*
 * cuInit() is never called. A process that holds GPU memory has initialised
 * CUDA already (it allocated or registered that memory), so the pointer
 * query answers for every address that matters without it. In a process
 * that has not, the query returns CUDA_ERROR_NOT_INITIALIZED, which is the
 * right answer ("not GPU memory"); calling cuInit there would cost hundreds
 * of milliseconds and a driver context's memory and threads in a host
 * program that never asked for CUDA, and break it across fork().
 */
static struct {
	pthread_once_t once;
	atomic_bool started; /* load() ran: no more r2cc_gpu_set_driver() */
	/* Before the once: set by r2cc_gpu_set_driver() only */
	const struct r2cc_cuda_ops *inject; /* borrowed */
	const char *soname; /* borrowed */
	/* Written in load() only; pthread_once() publishes them */
	struct r2cc_cuda_ops dl;
	const struct r2cc_cuda_ops *ops; /* NULL = no driver */
	void *handle; /* owned; never closed: the driver stays loaded */
} gpu = {
	.once = PTHREAD_ONCE_INIT,
};

int r2cc_gpu_set_driver(const struct r2cc_cuda_ops *ops, const char *soname)
{
	if (atomic_load_explicit(&gpu.started, memory_order_acquire))
		return -EBUSY;
	gpu.inject = ops;
	gpu.soname = soname;
	return 0;
}

static void load(void)
{
	const char *soname = gpu.soname ? gpu.soname : CUDA_SONAME;
	void *h;

	atomic_store_explicit(&gpu.started, true, memory_order_release);
	if (gpu.inject) {
		gpu.ops = gpu.inject;
		return;
	}
	h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		r2cc_info("no %s (%s): all memory counts as host memory",
			  soname, dlerror());
		return;
	}
	gpu.dl.pointer_get_attribute =
		(get_attr_fn)dlsym(h, "cuPointerGetAttribute");
	gpu.dl.device_get_pci_bus_id =
		(get_busid_fn)dlsym(h, "cuDeviceGetPCIBusId");
	if (!gpu.dl.pointer_get_attribute || !gpu.dl.device_get_pci_bus_id) {
		r2cc_info("%s: no pointer queries: all memory is host memory",
			  soname);
		dlclose(h);
		return;
	}
	gpu.handle = h;
	gpu.ops = &gpu.dl;
}

/*
 * The driver writes "0000:41:00.0", newer ones an 8-digit domain
 * ("00000000:41:00.0"), in upper case; sysfs names it "0000:41:00.0".
 */
static int busid_to_sysfs(const char *in, char *out, size_t size)
{
	unsigned int dom, bus, dev, fn;
	int end = 0, n;

	if (sscanf(in, "%x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &end) != 4 ||
	    in[end] || bus > 0xff || dev > 0x1f || fn > 7)
		return -EINVAL;
	n = snprintf(out, size, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

int r2cc_gpu_locate(const void *addr, struct r2cc_mem_loc *loc)
{
	const struct r2cc_cuda_ops *ops;
	unsigned long long ptr = (unsigned long long)(uintptr_t)addr;
	unsigned int type = 0;
	char busid[64];
	int rc, dev = -1;

	if (!loc)
		return -EINVAL;
	loc->gpu = -1;
	loc->gpu_busid[0] = '\0';
	pthread_once(&gpu.once, load);
	ops = gpu.ops;
	if (!ops || !addr)
		return 0;
	rc = ops->pointer_get_attribute(&type, R2CC_CU_ATTR_TYPE, ptr);
	if (rc != R2CC_CU_OK) {
		/* NOT_INITIALIZED: no CUDA here; INVALID_VALUE: not CUDA's */
		r2cc_dbg("%p: cuPointerGetAttribute: CUresult %d: host memory",
			 addr, rc);
		return 0;
	}
	if (type != R2CC_CU_MEM_DEVICE)
		return 0;
	rc = ops->pointer_get_attribute(&dev, R2CC_CU_ATTR_ORDINAL, ptr);
	if (rc != R2CC_CU_OK || dev < 0) {
		r2cc_dbg("%p: device memory, ordinal unknown (CUresult %d)",
			 addr, rc);
		return 0;
	}
	loc->gpu = dev;
	memset(busid, 0, sizeof(busid));
	rc = ops->device_get_pci_bus_id(busid, (int)sizeof(busid) - 1, dev);
	if (rc != R2CC_CU_OK ||
	    busid_to_sysfs(busid, loc->gpu_busid, sizeof(loc->gpu_busid))) {
		loc->gpu_busid[0] = '\0';
		r2cc_dbg("GPU %d: PCI id unknown (CUresult %d, \"%.20s\")", dev,
			 rc, busid);
	}
	return 1;
}

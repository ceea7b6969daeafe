/* SPDX-License-Identifier: MIT */
/*
 * test_dl.c - run with LD_PRELOAD=libr2cc-shim.so: a program that loads
 * libibverbs by handle (as NCCL does) must get the shim's entry points, and
 * everything else about dlsym/dlvsym must behave as without the shim.
 */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <string.h>

static const char *where(void *p)
{
	Dl_info i;

	if (!p || !dladdr(p, &i) || !i.dli_fname)
		return "(none)";
	return strrchr(i.dli_fname, '/') ? strrchr(i.dli_fname, '/') + 1 :
					   i.dli_fname;
}

static void *ibv(void)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW);

	cr_assert_not_null(h, "dlopen: %s", dlerror());
	return h;
}

Test(dl, preloaded, .timeout = 10)
{
	const char *p = getenv("LD_PRELOAD");

	cr_assert(p && strstr(p, "libr2cc-shim.so"), "run under the shim");
}

Test(dl, dlvsym_on_libibverbs_handle_reaches_the_shim, .timeout = 10)
{
	void *h = ibv();

	cr_assert_str_eq(where(dlvsym(h, "ibv_create_qp", "IBVERBS_1.1")),
			 "libr2cc-shim.so");
	cr_assert_str_eq(where(dlvsym(h, "ibv_reg_mr_iova2", "IBVERBS_1.8")),
			 "libr2cc-shim.so");
	cr_assert_str_eq(where(dlsym(h, "ibv_open_device")), "libr2cc-shim.so");
}

Test(dl, other_versions_and_symbols_stay_real, .timeout = 10)
{
	void *h = ibv();

	/* The IBVERBS_1.0 ABI of ibv_create_qp is not the shim's. */
	cr_assert_str_eq(where(dlvsym(h, "ibv_create_qp", "IBVERBS_1.0")),
			 "libibverbs.so.1");
	cr_assert_str_eq(where(dlsym(h, "ibv_get_device_name")),
			 "libibverbs.so.1");
	cr_assert_null(dlsym(h, "r2cc_no_such_symbol"));
	cr_assert_not_null(dlerror());
	cr_assert_null(dlvsym(h, "ibv_create_qp", "IBVERBS_9.9"));
}

Test(dl, rtld_next_is_relative_to_the_caller, .timeout = 10)
{
	/* After this program comes the preloaded shim, not libibverbs:
	 * only a tail call from the shim's dlsym keeps that right. */
	cr_assert_str_eq(where(dlsym(RTLD_NEXT, "ibv_open_device")),
			 "libr2cc-shim.so");
	cr_assert_str_eq(where(dlsym(RTLD_DEFAULT, "ibv_open_device")),
			 "libr2cc-shim.so");
	cr_assert_eq(dlsym(RTLD_DEFAULT, "strlen"), (void *)strlen);
}

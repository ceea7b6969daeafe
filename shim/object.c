/* SPDX-License-Identifier: MIT */
/*
 * object.c - the life of r2cc's object for one of the program's handles:
 * registered once it is complete, unregistered and freed once the real
 * destroy succeeded. Neither touches errno as the program sees it.
 */
#include <errno.h>
#include <stdlib.h>

#include "shim_int.h"

static const char *const names[] = {
	[R2CC_OBJ_CTX] = "context", [R2CC_OBJ_PD] = "PD",
	[R2CC_OBJ_MR] = "MR",	    [R2CC_OBJ_CQ] = "CQ",
	[R2CC_OBJ_QP] = "QP",	    [R2CC_OBJ_SRQ] = "SRQ",
};

void *r2cc_obj_add(const void *handle, void *obj, enum r2cc_obj_type type,
		   void (*fin)(void *))
{
	int saved = errno;

	if (obj && r2cc_map_insert(&r2cc_shim.reg, (uintptr_t)handle, obj)) {
		fin(obj);
		obj = NULL;
	}
	if (!obj)
		r2cc_err("out of memory: %s %p not tracked, unprotected",
			 names[type], handle);
	errno = saved;
	return obj;
}

void r2cc_obj_del(const void *handle, void *obj, void (*fin)(void *))
{
	int saved = errno;

	r2cc_map_remove(&r2cc_shim.reg, (uintptr_t)handle);
	fin(obj);
	errno = saved;
}

/* SPDX-License-Identifier: MIT */
/*
 * fuzz_status.c - libFuzzer target for the status record reader that
 * r2cc-ctl and the node's rendezvous trust: the input is a record, written
 * to a file of this process's (mode 0600) with its pid, start time and
 * uid made this process's (else it is refused as stale before anything is
 * read) and its seqlock even. What r2cc_status_read() accepts must be safe
 * to print: every string terminated, every count within its array.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void terminated(const char *s, size_t size)
{
	if (!memchr(s, '\0', size))
		__builtin_trap();
}

static void check(const struct r2cc_status_snap *s)
{
	uint32_t i;

	terminated(s->hdr.comm, sizeof(s->hdr.comm));
	if (s->hdr.nrails > R2CC_STATUS_RAILS || s->nev > R2CC_STATUS_EVENTS ||
	    s->nqps > s->hdr.nqps)
		__builtin_trap();
	for (i = 0; i < s->hdr.nrails; i++) {
		terminated(s->rails[i].dev, sizeof(s->rails[i].dev));
		terminated(s->rails[i].netdev, sizeof(s->rails[i].netdev));
	}
	for (i = 0; i < s->nqps; i++)
		terminated(s->qps[i].dev, sizeof(s->qps[i].dev));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[64];
	struct r2cc_status_hdr h;
	struct r2cc_status_snap s;
	uint8_t *rec;
	int fd;

	if (!path[0])
		snprintf(path, sizeof(path), "/tmp/r2cc-fuzz-status.%d",
			 (int)getpid());
	rec = malloc(size > sizeof(h) ? size : sizeof(h));
	if (!rec)
		return 0;
	memset(rec, 0, sizeof(h));
	memcpy(rec, data, size);
	memcpy(&h, rec, sizeof(h));
	h.pid = (int32_t)getpid();
	h.uid = (uint32_t)getuid();
	h.starttime = r2cc_proc_starttime(getpid());
	atomic_store(&h.gen, atomic_load(&h.gen) & ~1u);
	memcpy(rec, &h, sizeof(h));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, rec, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		free(rec);
		return 0;
	}
	close(fd);
	free(rec);
	if (!r2cc_status_read(path, &s)) {
		check(&s);
		r2cc_status_snap_free(&s);
	}
	unlink(path);
	return 0;
}

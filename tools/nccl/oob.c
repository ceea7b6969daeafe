/* SPDX-License-Identifier: MIT */
/*
 * oob.c - r2cc-nccl's TCP connection to its peer (NCCL's bootstrap plays
 * this part): the QPs' addresses at setup, the end-of-run counts after.
 * Every wait is bounded.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nccl.h"

#define OOB_WAIT_MS 120000

static void oob_die(const char *what)
{
	fprintf(stderr, "r2cc-nccl: %s: %s\n", what,
		errno ? strerror(errno) : "timed out");
	exit(2);
}

static int dial(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM },
			*ai;
	char ps[16];
	int fd, i;

	snprintf(ps, sizeof(ps), "%d", port);
	if (getaddrinfo(host, ps, &hints, &ai))
		return -1;
	/* The server may still be setting up: 60 tries, 0.5 s apart */
	for (i = 0; i < 60; i++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			freeaddrinfo(ai);
			return fd;
		}
		if (fd >= 0)
			close(fd);
		usleep(500000);
	}
	freeaddrinfo(ai);
	return -1;
}

static int listen_once(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	struct pollfd p;
	int l, fd, one = 1;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 ||
	    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1))
		return -1;
	p = (struct pollfd){ .fd = l, .events = POLLIN };
	errno = 0;
	fd = poll(&p, 1, OOB_WAIT_MS) == 1 ? accept(l, NULL, NULL) : -1;
	close(l);
	return fd;
}

void nc_oob_open(struct nc *n)
{
	int one = 1;

	errno = 0;
	n->sock = n->server ? listen_once(n->tcp_port) :
			      dial(n->peer_host, n->tcp_port);
	if (n->sock < 0)
		oob_die(n->server ? "no client" : "cannot reach the server");
	setsockopt(n->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void xfer(int fd, void *buf, size_t len, int out)
{
	struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
	char *b = buf;
	ssize_t k;

	while (len) {
		errno = 0;
		if (poll(&p, 1, OOB_WAIT_MS) != 1)
			oob_die("the peer");
		k = out ? send(fd, b, len, MSG_NOSIGNAL) : recv(fd, b, len, 0);
		if (k <= 0) {
			if (!k)
				errno = ECONNRESET;
			oob_die("the peer");
		}
		b += k;
		len -= (size_t)k;
	}
}

void nc_oob_swap(struct nc *n, const void *mine, void *theirs, size_t len)
{
	xfer(n->sock, (void *)mine, len, 1);
	xfer(n->sock, theirs, len, 0);
}

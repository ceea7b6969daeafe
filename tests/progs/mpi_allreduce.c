/* SPDX-License-Identifier: MIT */
/*
 * mpi_allreduce: a small, self-checking MPI job for the soft-RoCE lab.
 *
 * Every rank fills a buffer of int64 with values derived from its rank, the
 * iteration and the index, MPI_Allreduce()s it (MPI_SUM) and checks every
 * element against the sum it can compute alone. Then rank 0 and each other
 * rank exchange a few large point-to-point messages (both directions) whose
 * contents are checked as well. Prints one summary line,
 *
 *   mpi_allreduce: ranks=2 iters=N bytes=M errors=0
 *
 * on rank 0 (bytes: payload each rank sent and checked), and exits non-zero on
 * any mismatch on any rank.
 *
 * usage: mpi_allreduce [-n ITERS] [-s BYTES] [-p P2P_MSGS] [-m P2P_BYTES]
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t ar_value(int rank, int iter, size_t i)
{
	return (int64_t)rank * 1000003 + (int64_t)iter * 7919 + (int64_t)i;
}

/* The sum over all ranks of ar_value(r, iter, i). */
static int64_t ar_expect(int nranks, int iter, size_t i)
{
	int64_t n = nranks;

	return 1000003 * (n * (n - 1) / 2) +
	       n * ((int64_t)iter * 7919 + (int64_t)i);
}

static int64_t p2p_value(int from, int to, int msg, size_t i)
{
	return ((int64_t)from << 48) ^ ((int64_t)to << 40) ^
	       ((int64_t)msg << 32) ^ (int64_t)(i * 2654435761u);
}

static long arg_long(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*s == '\0' || *end != '\0' || v <= 0) {
		fprintf(stderr, "mpi_allreduce: bad %s `%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* Fill, send to and receive from PEER; check what came back. */
static long p2p_exchange(int rank, int peer, int msgs, size_t count,
			 int64_t *sbuf, int64_t *rbuf)
{
	long errors = 0;
	int m;
	size_t i;

	for (m = 0; m < msgs; m++) {
		for (i = 0; i < count; i++)
			sbuf[i] = p2p_value(rank, peer, m, i);
		memset(rbuf, 0, count * sizeof(*rbuf));
		MPI_Sendrecv(sbuf, (int)count, MPI_INT64_T, peer, m, rbuf,
			     (int)count, MPI_INT64_T, peer, m, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
		for (i = 0; i < count; i++) {
			if (rbuf[i] == p2p_value(peer, rank, m, i))
				continue;
			if (errors < 5)
				fprintf(stderr,
					"mpi_allreduce: rank %d p2p %d from %d "
					"[%zu] = %" PRId64 ", want %" PRId64
					"\n",
					rank, m, peer, i, rbuf[i],
					p2p_value(peer, rank, m, i));
			errors++;
		}
	}
	return errors;
}

int main(int argc, char **argv)
{
	long iters = 32, bytes = 1 << 20, p2p_msgs = 4, p2p_bytes = 4 << 20;
	long errors = 0, total_errors = 0, sent = 0;
	int rank, nranks, it, opt, peer;
	int64_t *sbuf, *rbuf;
	size_t count, p2p_count, n, i;
	char host[64] = "?";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);

	while ((opt = getopt(argc, argv, "n:s:p:m:")) != -1) {
		switch (opt) {
		case 'n':
			iters = arg_long(optarg, "iteration count");
			break;
		case 's':
			bytes = arg_long(optarg, "allreduce size");
			break;
		case 'p':
			p2p_msgs = arg_long(optarg, "message count");
			break;
		case 'm':
			p2p_bytes = arg_long(optarg, "message size");
			break;
		default:
			if (rank == 0)
				fprintf(stderr,
					"usage: mpi_allreduce [-n ITERS] "
					"[-s BYTES] [-p P2P_MSGS] "
					"[-m P2P_BYTES]\n");
			MPI_Finalize();
			return 2;
		}
	}
	count = (size_t)bytes / sizeof(int64_t);
	p2p_count = (size_t)p2p_bytes / sizeof(int64_t);
	if (count == 0 || p2p_count == 0 || count > INT32_MAX ||
	    p2p_count > INT32_MAX) {
		if (rank == 0)
			fprintf(stderr, "mpi_allreduce: sizes out of range\n");
		MPI_Finalize();
		return 2;
	}
	n = count > p2p_count ? count : p2p_count;
	sbuf = malloc(n * sizeof(*sbuf));
	rbuf = malloc(n * sizeof(*rbuf));
	if (!sbuf || !rbuf) {
		fprintf(stderr, "mpi_allreduce: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	gethostname(host, sizeof(host) - 1);
	printf("mpi_allreduce: rank %d of %d on %s\n", rank, nranks, host);
	fflush(stdout);

	for (it = 0; it < iters; it++) {
		for (i = 0; i < count; i++)
			sbuf[i] = ar_value(rank, it, i);
		memset(rbuf, 0, count * sizeof(*rbuf));
		MPI_Allreduce(sbuf, rbuf, (int)count, MPI_INT64_T, MPI_SUM,
			      MPI_COMM_WORLD);
		for (i = 0; i < count; i++) {
			if (rbuf[i] == ar_expect(nranks, it, i))
				continue;
			if (errors < 5)
				fprintf(stderr,
					"mpi_allreduce: rank %d iter %d [%zu] "
					"= %" PRId64 ", want %" PRId64 "\n",
					rank, it, i, rbuf[i],
					ar_expect(nranks, it, i));
			errors++;
		}
		sent += (long)(count * sizeof(int64_t));
	}

	/* Large messages between rank 0 and every other rank, both ways. */
	if (rank == 0) {
		for (peer = 1; peer < nranks; peer++) {
			errors += p2p_exchange(rank, peer, (int)p2p_msgs,
					       p2p_count, sbuf, rbuf);
			sent += p2p_msgs * (long)(p2p_count * sizeof(int64_t));
		}
	} else {
		errors += p2p_exchange(rank, 0, (int)p2p_msgs, p2p_count, sbuf,
				       rbuf);
		sent += p2p_msgs * (long)(p2p_count * sizeof(int64_t));
	}

	MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM,
		      MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_allreduce: ranks=%d iters=%ld bytes=%ld "
		       "errors=%ld\n",
		       nranks, iters, sent, total_errors);
	free(sbuf);
	free(rbuf);
	MPI_Finalize();
	return total_errors ? 1 : 0;
}

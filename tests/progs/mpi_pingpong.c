/* SPDX-License-Identifier: MIT */
/*
 * mpi_pingpong: checked point-to-point traffic for as long as it is told,
 * for the failover lab (a rail dies while it runs).
 *
 * Ranks pair up (0-1, 2-3, ...). Every iteration each rank sends its partner
 * one message of every size in the list and receives one of each (both ways
 * at once, MPI_Irecv/MPI_Isend), and checks the length and every 64-bit word
 * of what arrived against what the partner must have sent in that iteration.
 * Small sizes go eager (sends), large ones by the MPI's rendezvous protocol
 * (RDMA, where the transport has it). Rank 0 decides when to stop (after -t
 * seconds, but not before -n iterations) and tells everyone with each
 * iteration's MPI_Bcast. Prints, on rank 0, a progress line now and then and
 * one summary line,
 *
 *   mpi_pingpong: ranks=2 iters=N msgs=M bytes=B checksum=0x... errors=0
 *
 * (msgs, bytes: received and checked, all ranks; checksum: of every word
 * received, all ranks) and exits non-zero on any mismatch on any rank.
 * With -a, every iteration also MPI_Allreduce()s (MPI_SUM) a buffer of
 * every size and checks each word of the result against the sum of what
 * every rank must have contributed (counted in msgs and bytes too).
 *
 * usage: mpi_pingpong [-a] [-t SECONDS] [-n MIN_ITERS] [-s SIZE,SIZE,...]
 */
#include <inttypes.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 8

static uint64_t pp_value(int from, long iter, int msg, size_t i)
{
	uint64_t x = ((uint64_t)from << 56) ^ ((uint64_t)msg << 48) ^
		     ((uint64_t)iter << 24) ^ (uint64_t)i;

	/* splitmix64's finaliser: neighbours and iterations differ a lot */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static long arg_long(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*s == '\0' || *end != '\0' || v <= 0) {
		fprintf(stderr, "mpi_pingpong: bad %s `%s'\n", what, s);
		exit(2);
	}
	return v;
}

/* Parse "64,4096,..." into words (sizes in bytes, multiples of 8). */
static int parse_sizes(char *s, size_t *words)
{
	char *tok, *save = NULL;
	int n = 0;
	long v;

	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		v = arg_long(tok, "size");
		if (n == MAX_SIZES || v % 8 || v / 8 > INT32_MAX) {
			fprintf(stderr,
				"mpi_pingpong: sizes: at most %d, each a "
				"multiple of 8 (`%s')\n",
				MAX_SIZES, tok);
			exit(2);
		}
		words[n++] = (size_t)v / 8;
	}
	return n;
}

/* Check message MSG of iteration IT from FROM; returns the mismatches. */
static long check_msg(int rank, int from, long it, int msg, const uint64_t *buf,
		      size_t words, int got, uint64_t *sum)
{
	long errors = 0;
	size_t i;

	if (got != (int)words) {
		fprintf(stderr,
			"mpi_pingpong: rank %d iter %ld msg %d from %d: %d "
			"words, want %zu\n",
			rank, it, msg, from, got, words);
		return 1;
	}
	for (i = 0; i < words; i++) {
		*sum = (*sum ^ buf[i]) * 0x100000001b3ull;
		if (buf[i] == pp_value(from, it, msg, i))
			continue;
		if (errors < 5)
			fprintf(stderr,
				"mpi_pingpong: rank %d iter %ld msg %d from "
				"%d [%zu] = %#" PRIx64 ", want %#" PRIx64 "\n",
				rank, it, msg, from, i, buf[i],
				pp_value(from, it, msg, i));
		errors++;
	}
	return errors;
}

/* Check the MPI_SUM of buffer MSG of iteration IT over NRANKS ranks;
 * returns the mismatches. */
static long check_sum(int rank, int nranks, long it, int msg,
		      const uint64_t *buf, size_t words, uint64_t *sum)
{
	long errors = 0;
	uint64_t want;
	size_t i;
	int r;

	for (i = 0; i < words; i++) {
		*sum = (*sum ^ buf[i]) * 0x100000001b3ull;
		for (want = 0, r = 0; r < nranks; r++)
			want += pp_value(r, it, msg, i);
		if (buf[i] == want)
			continue;
		if (errors < 5)
			fprintf(stderr,
				"mpi_pingpong: rank %d iter %ld allreduce %d "
				"[%zu] = %#" PRIx64 ", want %#" PRIx64 "\n",
				rank, it, msg, i, buf[i], want);
		errors++;
	}
	return errors;
}

int main(int argc, char **argv)
{
	char def[] = "64,4096,65536,1048576";
	size_t words[MAX_SIZES], i;
	uint64_t *sbuf[MAX_SIZES], *rbuf[MAX_SIZES];
	uint64_t sum = 0, sums[2], total_sums[2];
	long min_iters = 10, it, errors = 0, total_errors = 0;
	long counts[2] = { 0, 0 }, totals[2];
	double seconds = 20, start, last;
	int rank, nranks, peer, nsizes, opt, m, go, got, allreduce = 0;
	MPI_Request req[2 * MAX_SIZES];
	MPI_Status st[2 * MAX_SIZES];
	char host[64] = "?";

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	nsizes = parse_sizes(def, words);
	while ((opt = getopt(argc, argv, "at:n:s:")) != -1) {
		switch (opt) {
		case 'a':
			allreduce = 1;
			break;
		case 't':
			seconds = (double)arg_long(optarg, "time");
			break;
		case 'n':
			min_iters = arg_long(optarg, "iteration count");
			break;
		case 's':
			nsizes = parse_sizes(optarg, words);
			break;
		default:
			if (rank == 0)
				fprintf(stderr,
					"usage: mpi_pingpong [-a] [-t SECONDS] "
					"[-n MIN_ITERS] [-s SIZE,...]\n");
			MPI_Finalize();
			return 2;
		}
	}
	if (nranks % 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_pingpong: needs an even number of "
					"ranks\n");
		MPI_Finalize();
		return 2;
	}
	peer = rank ^ 1;
	for (m = 0; m < nsizes; m++) {
		sbuf[m] = malloc(words[m] * 8);
		rbuf[m] = malloc(words[m] * 8);
		if (!sbuf[m] || !rbuf[m]) {
			fprintf(stderr, "mpi_pingpong: out of memory\n");
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	gethostname(host, sizeof(host) - 1);
	printf("mpi_pingpong: rank %d of %d on %s, partner %d\n", rank, nranks,
	       host, peer);
	fflush(stdout);

	start = last = MPI_Wtime();
	for (it = 0;; it++) {
		go = rank != 0 || it < min_iters ||
		     MPI_Wtime() - start < seconds;
		MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (!go)
			break;
		for (m = 0; m < nsizes; m++) {
			for (i = 0; i < words[m]; i++)
				sbuf[m][i] = pp_value(rank, it, m, i);
			memset(rbuf[m], 0xa5, words[m] * 8);
			MPI_Irecv(rbuf[m], (int)words[m], MPI_UINT64_T, peer, m,
				  MPI_COMM_WORLD, &req[2 * m]);
			MPI_Isend(sbuf[m], (int)words[m], MPI_UINT64_T, peer, m,
				  MPI_COMM_WORLD, &req[2 * m + 1]);
		}
		MPI_Waitall(2 * nsizes, req, st);
		for (m = 0; m < nsizes; m++) {
			MPI_Get_count(&st[2 * m], MPI_UINT64_T, &got);
			errors += check_msg(rank, peer, it, m, rbuf[m],
					    words[m], got, &sum);
			counts[0]++;
			counts[1] += (long)(words[m] * 8);
		}
		for (m = 0; allreduce && m < nsizes; m++) {
			memset(rbuf[m], 0xa5, words[m] * 8);
			MPI_Allreduce(sbuf[m], rbuf[m], (int)words[m],
				      MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
			errors += check_sum(rank, nranks, it, m, rbuf[m],
					    words[m], &sum);
			counts[0]++;
			counts[1] += (long)(words[m] * 8);
		}
		if (rank == 0 && MPI_Wtime() - last >= 2) {
			last = MPI_Wtime();
			printf("mpi_pingpong: progress iter=%ld t=%.1f "
			       "errors=%ld\n",
			       it + 1, last - start, errors);
			fflush(stdout);
		}
	}

	MPI_Allreduce(&errors, &total_errors, 1, MPI_LONG, MPI_SUM,
		      MPI_COMM_WORLD);
	MPI_Allreduce(counts, totals, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	/* the checksum of all ranks: an XOR and a sum of their own */
	sums[0] = sum;
	sums[1] = sum;
	MPI_Allreduce(&sums[0], &total_sums[0], 1, MPI_UINT64_T, MPI_BXOR,
		      MPI_COMM_WORLD);
	MPI_Allreduce(&sums[1], &total_sums[1], 1, MPI_UINT64_T, MPI_SUM,
		      MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_pingpong: ranks=%d iters=%ld msgs=%ld bytes=%ld "
		       "checksum=%016" PRIx64 "%016" PRIx64 " errors=%ld\n",
		       nranks, it, totals[0], totals[1], total_sums[0],
		       total_sums[1], total_errors);
	for (m = 0; m < nsizes; m++) {
		free(sbuf[m]);
		free(rbuf[m]);
	}
	MPI_Finalize();
	return total_errors ? 1 : 0;
}

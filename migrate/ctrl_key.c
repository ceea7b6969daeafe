/* SPDX-License-Identifier: MIT */
/*
 * ctrl_key.c - what makes a control frame trusted: the job key derived
 * from the shared secret (HMAC-SHA-256, libsodium), the random process
 * ids, each sender's replay window, and the count of frames by outcome.
 */
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>
#include <unistd.h>

#include "ctrl_key.h"
#include "policy.h"

static const char kdf_label[] = "r2cc-ctrl-v1";

_Static_assert(R2CC_CTRL_KEY_LEN == crypto_auth_hmacsha256_KEYBYTES,
	       "key is an HMAC-SHA-256 key");

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_rc; /* written once under sodium_once */

static void sodium_setup(void)
{
	sodium_rc = sodium_init();
}

int r2cc_ctrl_crypto_ready(void)
{
	pthread_once(&sodium_once, sodium_setup);
	return sodium_rc < 0 ? -EIO : 0;
}

uint64_t r2cc_ctrl_new_id(void)
{
	uint64_t id = 0;

	if (r2cc_ctrl_crypto_ready())
		return 0;
	while (!id)
		randombytes_buf(&id, sizeof(id));
	return id;
}

/* Bit @d (distance below top) of @w's window */
static uint64_t *replay_word(struct r2cc_ctrl_replay *w, uint64_t d,
			     uint64_t *bit)
{
	*bit = 1ULL << (d % 64);
	return &w->seen[d / 64];
}

/* The window moved up by @d: what was d below top is now 0 below it. */
static void replay_slide(struct r2cc_ctrl_replay *w, uint64_t d)
{
	const unsigned int n = R2CC_CTRL_REPLAY_WINDOW / 64;
	unsigned int words = (unsigned int)(d / 64), bits = d % 64, i;

	if (d >= R2CC_CTRL_REPLAY_WINDOW) {
		memset(w->seen, 0, sizeof(w->seen));
		return;
	}
	for (i = n; i-- > 0;) {
		uint64_t v = i >= words ? w->seen[i - words] << bits : 0;

		if (bits && i > words)
			v |= w->seen[i - words - 1] >> (64 - bits);
		w->seen[i] = v;
	}
}

int r2cc_ctrl_replay_accept(struct r2cc_ctrl_replay *w, uint64_t seq)
{
	uint64_t d, bit, *word;

	if (!seq)
		return -EINVAL;
	if (seq > w->top) {
		replay_slide(w, seq - w->top);
		w->seen[0] |= 1;
		w->top = seq;
		return 0;
	}
	d = w->top - seq;
	if (d >= R2CC_CTRL_REPLAY_WINDOW)
		return -ESTALE;
	word = replay_word(w, d, &bit);
	if (*word & bit)
		return -EALREADY;
	*word |= bit;
	return 0;
}

void r2cc_ctrl_count(struct r2cc_ctrl_stats *st, int rc)
{
	switch (rc) {
	case 0:
		st->accepted++;
		break;
	case -EBADMSG:
		st->malformed++;
		break;
	case -EPROTO:
		st->unsupported++;
		break;
	case -EACCES:
		st->unauthentic++;
		break;
	case -EMSGSIZE:
		st->oversize++;
		break;
	case -EALREADY:
		st->replayed++;
		break;
	case -ESTALE:
		st->stale++;
		break;
	default:
		st->other++;
	}
}

int r2cc_ctrl_key_derive(struct r2cc_ctrl_key *key, const uint8_t *secret,
			 size_t len, uint64_t job)
{
	crypto_auth_hmacsha256_state st;
	uint8_t job_le[8];
	size_t i;
	int rc;

	rc = r2cc_ctrl_crypto_ready();
	if (rc)
		return rc;
	if (len < R2CC_SECRET_MIN || len > R2CC_SECRET_MAX)
		return -EINVAL;
	for (i = 0; i < sizeof(job_le); i++)
		job_le[i] = (uint8_t)(job >> (8 * i));
	crypto_auth_hmacsha256_init(&st, secret, len);
	crypto_auth_hmacsha256_update(&st, (const uint8_t *)kdf_label,
				      sizeof(kdf_label) - 1);
	crypto_auth_hmacsha256_update(&st, job_le, sizeof(job_le));
	crypto_auth_hmacsha256_final(&st, key->k);
	sodium_memzero(&st, sizeof(st));
	key->job = job;
	key->self = 0; /* the caller sets its own id */
	return 0;
}

void r2cc_ctrl_key_wipe(struct r2cc_ctrl_key *key)
{
	sodium_memzero(key, sizeof(*key));
}

/* A job id every holder of the secret computes alike: its SHA-256's first
 * 8 bytes (never 0). */
static uint64_t job_of(const uint8_t *secret, size_t len)
{
	uint8_t h[crypto_hash_sha256_BYTES];
	uint64_t job = 0;
	size_t i;

	crypto_hash_sha256(h, secret, len);
	for (i = 0; i < 8; i++)
		job |= (uint64_t)h[i] << (8 * i);
	sodium_memzero(h, sizeof(h));
	return job ? job : 1;
}

/* Up to @size bytes of @fd: the count, or -errno */
static ssize_t read_all(int fd, uint8_t *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;

	while (got < size) {
		n = read(fd, buf + got, size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (!n)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

int r2cc_ctrl_key_load(struct r2cc_ctrl_key *key, const char *path,
		       uint64_t job)
{
	uint8_t secret[R2CC_SECRET_MAX + 1];
	ssize_t n;
	int fd, rc = 0;

	/* The file's rules are policy's; each refusal is logged there */
	fd = r2cc_secret_open(path, NULL, NULL, NULL);
	if (fd < 0)
		return fd;
	n = read_all(fd, secret, sizeof(secret));
	if (n < 0)
		rc = (int)n;
	else if (n < R2CC_SECRET_MIN || n > R2CC_SECRET_MAX)
		rc = -EINVAL; /* it changed since fstat() */
	if (rc)
		r2cc_err("secret file %s: cannot read %d..%d bytes", path,
			 R2CC_SECRET_MIN, R2CC_SECRET_MAX);
	close(fd);
	if (!rc)
		rc = r2cc_ctrl_key_derive(key, secret, (size_t)n,
					  job ? job :
						job_of(secret, (size_t)n));
	sodium_memzero(secret, sizeof(secret));
	return rc;
}

/* SPDX-License-Identifier: MIT */
/*
 * ctrl_key.h - the job key, process ids, replay windows and frame counts
 * of the control protocol (ctrl_key.c). Pure logic, no I/O except
 * r2cc_ctrl_key_load(). Locks: none (caller's).
 */
#ifndef R2CC_CTRL_KEY_H
#define R2CC_CTRL_KEY_H

#include <stddef.h>
#include <stdint.h>

#define R2CC_CTRL_KEY_LEN 32

/* libsodium, initialised once: 0, or -EIO when it is unusable */
int r2cc_ctrl_crypto_ready(void);

/* The per-job HMAC key as one process holds it; wipe it with
 * r2cc_ctrl_key_wipe(). */
struct r2cc_ctrl_key {
	uint64_t job;
	/* This process's id (r2cc_ctrl_new_id()): decode refuses frames
	 * for anyone else. 0: no check (tools, fuzzing). */
	uint64_t self;
	uint8_t k[R2CC_CTRL_KEY_LEN];
};

/**
 * r2cc_ctrl_new_id() - a random, non-zero 64-bit process id (sender and
 * receiver ids): new at every start, so that a restarted process is not
 * mistaken for its predecessor by the peers' replay windows.
 * Return: the id, or 0 if libsodium is unusable.
 */
uint64_t r2cc_ctrl_new_id(void);

/**
 * r2cc_ctrl_key_derive() - the key of job @job from the shared secret
 * @key: filled with HMAC-SHA-256(@secret, "r2cc-ctrl-v1" | @job)
 * @secret: the job's secret, @len bytes (R2CC_SECRET_MIN..MAX, policy.h)
 * @len: its length
 * @job: the job id every frame carries
 * Return: 0, -EINVAL (@len out of range) or -EIO (libsodium unusable).
 */
int r2cc_ctrl_key_derive(struct r2cc_ctrl_key *key, const uint8_t *secret,
			 size_t len, uint64_t job);
/**
 * r2cc_ctrl_key_load() - r2cc_ctrl_key_derive() from a secret file
 * @key: the key
 * @path: R2CC_SECRET_FILE, opened by r2cc_secret_open() (policy.h), which
 *        holds the rules; its bytes are used verbatim
 * @job: the job id; 0: derived from the secret (the same for every
 *       process holding it)
 * Logs why a file is refused. Return: 0, -EPERM (type, owner or mode),
 * -EINVAL (size), -EIO, or open(2)'s -errno.
 */
int r2cc_ctrl_key_load(struct r2cc_ctrl_key *key, const char *path,
		       uint64_t job);
void r2cc_ctrl_key_wipe(struct r2cc_ctrl_key *key);

/* Seqs a window remembers below its top: a sender's frames to one
 * receiver may come over several connections (its channels, a lookup's
 * answer), each in order, interleaved by as many frames as it sent to
 * anyone meanwhile. */
#define R2CC_CTRL_REPLAY_WINDOW 1024
struct r2cc_ctrl_replay {
	uint64_t top; /* highest accepted seq; 0: none yet */
	uint64_t seen[R2CC_CTRL_REPLAY_WINDOW / 64]; /* bit top - d: seen */
};
/**
 * r2cc_ctrl_replay_accept() - take @seq of an authenticated frame once
 * @w: the sender's window (zero-initialised for a new sender)
 * @seq: hdr.seq (>= 1)
 * Keep one window per sender id; a sender restarts its seqs at 1 only
 * under a new sender id. A seq above top moves the window (any distance:
 * only a keyed sender can make one); R2CC_CTRL_REPLAY_WINDOW seqs are
 * remembered.
 * Return: 0 (recorded), -EALREADY (seen), -ESTALE (older than the window)
 * or -EINVAL (seq 0).
 */
int r2cc_ctrl_replay_accept(struct r2cc_ctrl_replay *w, uint64_t seq);

/* Frames received, by outcome; the caller owns and serialises it */
struct r2cc_ctrl_stats {
	uint64_t accepted;
	uint64_t malformed; /* -EBADMSG */
	uint64_t unsupported; /* -EPROTO */
	uint64_t unauthentic; /* -EACCES */
	uint64_t oversize; /* -EMSGSIZE */
	uint64_t replayed; /* -EALREADY */
	uint64_t stale; /* -ESTALE */
	uint64_t other;
};
/* r2cc_ctrl_count() - count one frame that decode + accept ended with @rc */
void r2cc_ctrl_count(struct r2cc_ctrl_stats *st, int rc);

#endif /* R2CC_CTRL_KEY_H */

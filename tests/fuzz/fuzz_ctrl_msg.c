/* SPDX-License-Identifier: MIT */
/*
 * fuzz_ctrl_msg.c - libFuzzer target for the control message codec: raw
 * bytes through frame_len and decode, then the same bytes sealed with the
 * key so the body parsers are reached; what decodes must re-encode exactly.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl_msg.h"

#define JOB 0x1122334455667788ULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct r2cc_ctrl_key key;
static uint8_t again[R2CC_CTRL_FRAME_MAX];

static void put_le(uint8_t *b, uint64_t v, size_t width)
{
	for (size_t i = 0; i < width; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

/* Whatever decodes encodes back to the same bytes (decoding is strict) */
static void check(const uint8_t *f, size_t len)
{
	static struct r2cc_ctrl_replay w;
	struct r2cc_ctrl_msg m;

	if (r2cc_ctrl_decode(&key, f, len, &m))
		return;
	if (r2cc_ctrl_encode(&key, &m, again, sizeof(again)) != (int)len ||
	    memcmp(again, f, len))
		__builtin_trap();
	r2cc_ctrl_replay_accept(&w, m.hdr.seq);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t secret[32] = "fuzz secret, 32 bytes long.....";
	const size_t fixed = R2CC_CTRL_HDR_LEN + R2CC_CTRL_MAC_LEN;
	uint8_t *f;
	int n;

	if (!key.job && r2cc_ctrl_key_derive(&key, secret, 32, JOB))
		__builtin_trap();
	n = r2cc_ctrl_frame_len(data, size);
	if (n > R2CC_CTRL_FRAME_MAX)
		__builtin_trap();
	check(data, n > 0 && (size_t)n <= size ? (size_t)n : size);

	/* sealed: a consistent header and a good MAC, the body as given */
	if (size < fixed || size - fixed > R2CC_CTRL_BODY_MAX)
		return 0;
	f = malloc(size);
	if (!f)
		return 0;
	memcpy(f, data, size);
	memcpy(f, "R2CC", 4);
	f[4] = R2CC_CTRL_VERSION;
	put_le(f + 8, size - fixed, 4);
	put_le(f + 12, JOB, 8);
	crypto_auth_hmacsha256(f + size - R2CC_CTRL_MAC_LEN, f,
			       size - R2CC_CTRL_MAC_LEN, key.k);
	if (r2cc_ctrl_frame_len(f, size) != (int)size)
		__builtin_trap();
	check(f, size);
	free(f);
	return 0;
}

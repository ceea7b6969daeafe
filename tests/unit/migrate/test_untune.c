/* SPDX-License-Identifier: MIT */
/*
 * test_untune.c - a QP r2cc gives up gets the program's ACK timeout and
 * retry counts back (migrate/untune.c) through SQD, at its next post;
 * what it posts while its send queue drains is held and goes, in order,
 * once the tick has it at RTS again.
 */
#include <criterion/criterion.h>

#include "fo_fixture.h"
#include "tick.h"

/* Protected, at RTS with r2cc's lowered values; one send posted */
static void lowered(void)
{
	setup();
	prim.state = IBV_QPS_RTS;
	prim.timeout = 8;
	prim.retry_cnt = 6;
	r2cc_mig_lowered(mq);
	post(1);
}

static void given_up(void)
{
	r2cc_mig_refuse(mq, "a test gives it up");
	cr_assert_eq(r2cc_mig_state(mq), R2CC_PROT_NONE);
}

static void programs_values(void)
{
	cr_expect_eq(prim.state, IBV_QPS_RTS);
	cr_expect_eq(prim.timeout, FO_TIMEOUT);
	cr_expect_eq(prim.retry_cnt, 7);
	cr_expect_eq(prim.rnr_retry, 7);
	cr_expect_not(r2cc_mig_untuning(mq));
}

static void sent(int n, const uint64_t *ids)
{
	int i;

	cr_assert_eq(prim.nsent, n);
	for (i = 0; i < n; i++)
		cr_expect_eq(prim.sent[i], ids[i], "send %d", i);
}

TestSuite(untune, .fini = teardown);

Test(untune, a_given_up_qp_gets_the_programs_values_at_its_next_post,
     .init = lowered)
{
	r2cc_mig_tick();
	given_up();
	r2cc_mig_tick();
	cr_expect_eq(prim.timeout, 8, "not before a post");
	post(2);
	programs_values();
	sent(2, (uint64_t[]){ 1, 2 });
	cr_expect(r2cc_mig_sqd_event(mq), "its SQ_DRAINED event is r2cc's");
	cr_expect_not(r2cc_mig_sqd_event(mq), "and only that one");
	prim.nmodify = 0;
	post(3);
	cr_expect_eq(prim.nmodify, 0, "once");
}

Test(untune, posts_wait_in_r2cc_while_the_send_queue_drains, .init = lowered)
{
	prim.draining = true;
	given_up();
	post(2);
	post(3);
	cr_assert_eq(prim.state, IBV_QPS_SQD);
	cr_expect(r2cc_mig_untuning(mq), "the program is shown its RTS");
	cr_expect_eq(prim.timeout, 8, "not set before it drained");
	sent(1, (uint64_t[]){ 1 });
	r2cc_mig_tick();
	cr_assert_eq(prim.state, IBV_QPS_SQD, "still draining");
	prim.draining = false;
	post(4);
	r2cc_mig_tick();
	programs_values();
	sent(4, (uint64_t[]){ 1, 2, 3, 4 });
}

Test(untune, an_inline_send_is_held_as_it_was_posted, .init = lowered)
{
	char data[8] = "abc";
	struct ibv_sge sge = { .addr = (uintptr_t)data, .length = 3 };
	struct ibv_send_wr wr = { .wr_id = 9,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE },
			   *bad;

	prim.draining = true;
	given_up();
	cr_assert_eq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
	data[0] = 'z'; /* the program's buffer is its own again */
	prim.draining = false;
	r2cc_mig_tick();
	sent(2, (uint64_t[]){ 1, 9 });
	cr_expect_eq(prim.inl[1], 'a');
}

Test(untune, a_held_reads_destination_stays_the_programs, .init = lowered)
{
	char data[8] = "abc";
	struct ibv_sge sge = { .addr = (uintptr_t)data, .length = 3 };
	struct ibv_send_wr wr = { .wr_id = 9,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_INLINE },
			   *bad;

	prim.draining = true;
	given_up();
	cr_assert_eq(r2cc_mig_post_send(mq, &wr, &bad, f_post_send, NULL), 0);
	data[0] = 'z'; /* what the READ would land on */
	prim.draining = false;
	r2cc_mig_tick();
	sent(2, (uint64_t[]){ 1, 9 });
	cr_expect_eq(prim.inl[1], 'z', "posted with the program's SGE");
}

Test(untune, a_send_the_queue_could_not_take_is_refused_not_held,
     .init = lowered)
{
	struct ibv_sge sge[2] = { { .addr = 0x1000, .length = 8 },
				  { .addr = 0x2000, .length = 8 } };
	struct ibv_send_wr two = { .wr_id = 8,
				   .sg_list = sge,
				   .num_sge = 2,
				   .opcode = IBV_WR_SEND },
			   one = { .wr_id = 7,
				   .sg_list = sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_SEND,
				   .next = &two },
			   *bad = NULL;

	prim.draining = true;
	given_up();
	cr_expect_eq(r2cc_mig_post_send(mq, &one, &bad, f_post_send, NULL),
		     EINVAL, "max_send_sge is 1");
	cr_expect_eq(bad, &two);
	prim.draining = false;
	r2cc_mig_tick();
	sent(2, (uint64_t[]){ 1, 7 });
}

Test(untune, a_qp_r2cc_never_lowered_is_left_alone, .init = setup)
{
	prim.state = IBV_QPS_RTS;
	given_up();
	prim.nmodify = 0;
	post(2);
	r2cc_mig_tick();
	cr_expect_eq(prim.nmodify, 0);
	cr_expect_eq(prim.state, IBV_QPS_RTS);
}

Test(untune, a_qp_the_program_ended_is_not_touched, .init = lowered)
{
	prim.state = IBV_QPS_ERR;
	given_up();
	prim.nmodify = 0;
	post(2);
	post(3);
	cr_expect_eq(prim.nmodify, 0);
	cr_expect_eq(prim.state, IBV_QPS_ERR);
	sent(3, (uint64_t[]){ 1, 2, 3 });
	cr_expect_not(r2cc_mig_sqd_event(mq), "no trip through SQD");
}

Test(untune, a_provider_without_sqd_keeps_r2ccs_values_tried_once,
     .init = lowered)
{
	prim.no_sqd = true;
	given_up();
	prim.nmodify = 0;
	post(2);
	cr_expect_eq(prim.state, IBV_QPS_RTS, "left running");
	cr_expect_eq(prim.timeout, 8);
	prim.no_sqd = false;
	post(3);
	cr_expect_eq(prim.nmodify, 0, "not tried again");
	sent(3, (uint64_t[]){ 1, 2, 3 });
	cr_expect_not(r2cc_mig_sqd_event(mq), "no SQ_DRAINED owed");
}

Test(untune, a_protected_qp_keeps_r2ccs_values, .init = lowered)
{
	prim.nmodify = 0;
	post(2);
	r2cc_mig_tick();
	cr_expect_eq(prim.nmodify, 0);
	cr_expect_eq(prim.timeout, 8);
}

Test(untune, a_qp_destroyed_in_sqd_drops_what_it_held, .init = lowered)
{
	prim.draining = true;
	given_up();
	post(2);
	/* teardown releases it: ASan says whether the held send leaked */
}

/* SPDX-License-Identifier: MIT */
/*
 * api_rc_ops.c - every RC operation moves the right bytes, in one process:
 * SEND (+IMM), RDMA WRITE (+IMM), RDMA READ, compare-and-swap and
 * fetch-and-add, across MTU boundaries, with SGE lists, inline data and
 * unsignalled work requests.
 */
#include "harness.h"
#include "traffic.h"

/* test: timeout=240 */

#define BUF (4u << 20)
#define HALF (BUF / 2)

static struct t_ep a, b;
static const uint32_t sizes[] = {0, 1, 255, 1023, 1024, 1025, 2048, 4097, 65536, 1u << 20};

static int wait_one(struct ibv_cq *cq, struct ibv_wc *wc, const char *what)
{
	int n = t_poll(cq, wc, 1, 30000);

	if (!CHECK_MSG(n == 1, "%s: no completion", what))
		return -1;
	if (!CHECK_MSG(wc->status == IBV_WC_SUCCESS, "%s: status %s", what,
		       ibv_wc_status_str(wc->status)))
		return -1;
	return 0;
}

static void case_send(void)
{
	struct ibv_wc wc;

	t_case("SEND/RECV at every size, with and without immediate");
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];
		bool imm = i & 1;

		t_fill(a.buf, n, (unsigned int)i);
		memset(b.buf, 0, n + 16);
		CHECK(t_post_recv(&b, 1000 + i, 0, BUF) == 0);
		{
			struct ibv_sge sge = {(uintptr_t)a.buf, n, a.mr->lkey};
			struct ibv_send_wr wr = {.wr_id = i,
						 .sg_list = &sge,
						 .num_sge = n ? 1 : 0,
						 .opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED},
					   *bad;

			wr.imm_data = htonl(0xabc00000u + (uint32_t)i);
			CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
		}
		/* one CQ per endpoint: a sees its send, b its receive */
		if (!wait_one(a.cq, &wc, "send"))
			CHECK(wc.wr_id == i && wc.opcode == IBV_WC_SEND);
		if (!wait_one(b.cq, &wc, "recv")) {
			CHECK(wc.wr_id == 1000 + i && wc.opcode == IBV_WC_RECV);
			CHECK_EQ_INT(wc.byte_len, n);
			CHECK_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
			if (imm)
				CHECK_EQ_INT(ntohl(wc.imm_data), 0xabc00000u + (uint32_t)i);
			CHECK_EQ_INT(wc.qp_num, b.qp->qp_num);
		}
		CHECK_MSG(memcmp(a.buf, b.buf, n) == 0, "payload of %u bytes differs", n);
		CHECK(b.buf[n] == 0);
	}
}

static void case_write(void)
{
	struct ibv_wc wc;

	t_case("RDMA WRITE at every size; WRITE with immediate consumes a receive");
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];

		t_fill(a.buf, n, (unsigned int)i + 50);
		memset(b.buf + HALF, 0, n + 16);
		CHECK(t_post(&a, IBV_WR_RDMA_WRITE, i, 0, n, (uintptr_t)b.buf + HALF, b.mr->rkey,
			     IBV_SEND_SIGNALED) == 0);
		if (!wait_one(a.cq, &wc, "write"))
			CHECK(wc.opcode == IBV_WC_RDMA_WRITE);
		CHECK_MSG(memcmp(a.buf, b.buf + HALF, n) == 0, "write of %u bytes differs", n);
		CHECK(b.buf[HALF + n] == 0);
	}
	CHECK(t_post_recv(&b, 77, 0, 16) == 0);
	t_fill(a.buf, 5000, 9);
	{
		struct ibv_sge sge = {(uintptr_t)a.buf, 5000, a.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 78,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.imm_data = htonl(0x1234);
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + HALF;
		wr.wr.rdma.rkey = b.mr->rkey;
		CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
	}
	wait_one(a.cq, &wc, "write imm");
	if (!wait_one(b.cq, &wc, "write imm recv")) {
		CHECK(wc.wr_id == 77 && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		CHECK_EQ_INT(ntohl(wc.imm_data), 0x1234);
		CHECK_EQ_INT(wc.byte_len, 5000);
	}
	CHECK(memcmp(a.buf, b.buf + HALF, 5000) == 0);
}

static void case_read(void)
{
	struct ibv_wc wc;

	t_case("RDMA READ at every size");
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];

		t_fill(b.buf + HALF, n, (unsigned int)i + 90);
		memset(a.buf, 0, n + 16);
		CHECK(t_post(&a, IBV_WR_RDMA_READ, i, 0, n, (uintptr_t)b.buf + HALF, b.mr->rkey,
			     IBV_SEND_SIGNALED) == 0);
		if (!wait_one(a.cq, &wc, "read")) {
			CHECK(wc.opcode == IBV_WC_RDMA_READ);
			CHECK_EQ_INT(wc.byte_len, n);
		}
		CHECK_MSG(memcmp(a.buf, b.buf + HALF, n) == 0, "read of %u bytes differs", n);
		CHECK(a.buf[n] == 0);
	}
}

static void post_atomic(enum ibv_wr_opcode op, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = {(uintptr_t)a.buf, 8, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;

	wr.wr.atomic.remote_addr = (uintptr_t)b.buf + HALF;
	wr.wr.atomic.rkey = b.mr->rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
}

static void case_atomics(void)
{
	uint64_t *remote = (uint64_t *)(void *)(b.buf + HALF), *local = (uint64_t *)(void *)a.buf;
	struct ibv_wc wc;

	t_case("compare-and-swap and fetch-and-add return the old value");
	*remote = 41;
	post_atomic(IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0);
	if (!wait_one(a.cq, &wc, "fetch-add"))
		CHECK(wc.opcode == IBV_WC_FETCH_ADD);
	CHECK_EQ_INT(*local, 41);
	CHECK_EQ_INT(*remote, 42);
	post_atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 42, 0x1122334455667788ull);
	if (!wait_one(a.cq, &wc, "cmp-swap"))
		CHECK(wc.opcode == IBV_WC_COMP_SWAP);
	CHECK_EQ_INT(*local, 42);
	CHECK(*remote == 0x1122334455667788ull);
	post_atomic(IBV_WR_ATOMIC_CMP_AND_SWP, 7, 9); /* compare fails: no swap */
	wait_one(a.cq, &wc, "cmp-swap miss");
	CHECK(*local == 0x1122334455667788ull);
	CHECK(*remote == 0x1122334455667788ull);
}

static void case_sgl_inline_unsignalled(void)
{
	struct ibv_sge s[3] = {{(uintptr_t)a.buf, 100, a.mr->lkey},
			       {(uintptr_t)a.buf + 1000, 3000, a.mr->lkey},
			       {(uintptr_t)a.buf + 9000, 1, a.mr->lkey}};
	struct ibv_sge r[3] = {{(uintptr_t)b.buf, 50, b.mr->lkey},
			       {(uintptr_t)b.buf + 500, 2000, b.mr->lkey},
			       {(uintptr_t)b.buf + 8000, 2000, b.mr->lkey}};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = s,
				 .num_sge = 3,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_recv_wr rw = {.wr_id = 2, .sg_list = r, .num_sge = 3}, *rbad;
	uint8_t expect[3101];
	struct ibv_wc wc[40];
	char msg[40];

	t_case("gather and scatter lists, inline data, unsignalled requests");
	t_fill(a.buf, 10000, 3);
	memcpy(expect, a.buf, 100);
	memcpy(expect + 100, a.buf + 1000, 3000);
	expect[3100] = a.buf[9000];
	memset(b.buf, 0, 10000);
	CHECK(ibv_post_recv(b.qp, &rw, &rbad) == 0);
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
	wait_one(a.cq, wc, "sgl send");
	if (!wait_one(b.cq, wc, "sgl recv"))
		CHECK_EQ_INT(wc[0].byte_len, 3101);
	CHECK(memcmp(b.buf, expect, 50) == 0);
	CHECK(memcmp(b.buf + 500, expect + 50, 2000) == 0);
	CHECK(memcmp(b.buf + 8000, expect + 2050, 1051) == 0);

	/* inline: the buffer may change right after posting */
	snprintf(msg, sizeof(msg), "inline payload");
	CHECK(t_post_recv(&b, 3, 0, 64) == 0);
	{
		struct ibv_sge is = {(uintptr_t)msg, (uint32_t)strlen(msg) + 1, 0};
		struct ibv_send_wr iw = {.wr_id = 4,
					 .sg_list = &is,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};

		CHECK(ibv_post_send(a.qp, &iw, &bad) == 0);
		memset(msg, 'x', sizeof(msg));
	}
	wait_one(a.cq, wc, "inline send");
	wait_one(b.cq, wc, "inline recv");
	CHECK(strcmp((char *)b.buf, "inline payload") == 0);

	/* 30 writes, only the last signalled: one completion, all data there */
	for (int i = 0; i < 30; i++) {
		a.buf[i] = (uint8_t)(i + 1);
		CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 100 + (uint64_t)i, (size_t)i, 1,
			     (uintptr_t)b.buf + HALF + (size_t)i, b.mr->rkey,
			     i == 29 ? IBV_SEND_SIGNALED : 0) == 0);
	}
	CHECK_EQ_INT(t_poll(a.cq, wc, 40, 300), 1);
	CHECK_EQ_INT(wc[0].wr_id, 129);
	for (int i = 0; i < 30; i++)
		CHECK_EQ_INT(b.buf[HALF + (size_t)i], i + 1);
}

int main(void)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;

	t_start("api_rc_ops");
	if (t_ep_init(&a, NULL, IBV_QPT_RC, BUF, access, 64) ||
	    t_ep_init(&b, NULL, IBV_QPT_RC, BUF, access, 64) || t_connect(&a, &b, IBV_MTU_1024))
		return t_finish();
	case_send();
	case_write();
	case_read();
	case_atomics();
	case_sgl_inline_unsignalled();
	t_ep_destroy(&a, true);
	t_ep_destroy(&b, true);
	return t_finish();
}

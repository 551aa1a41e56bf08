/* SPDX-License-Identifier: MIT */
/*
 * api_traffic_sge.c - work requests beyond one SGE and one signal:
 *
 *   - SGE lists of up to max_sge entries on both sides (SEND, WRITE, READ);
 *   - signalled and unsignalled mixes, and sq_sig_all;
 *   - IBV_SEND_FENCE: a WRITE fenced behind READs / an atomic carries the
 *     data they fetched;
 *   - ibv_qp_ex sessions (ibv_wr_start .. ibv_wr_complete) moving data.
 * Every received byte is compared, and the bytes after each target range
 * must be untouched. The endpoints and helpers are in traffic_ep.h; the
 * other api_traffic_* programs cover sizes (api_traffic_sizes), events,
 * SRQs and errors (api_traffic_events), and two processes
 * (api_traffic_2proc).
 */
#include "harness.h"
#include "traffic.h"
#include "traffic_ep.h"

/* ---- SGE lists ---- */

/* `n` SGEs over `base` with irregular lengths summing to `total`, at gaps. */
static uint32_t make_sgl(struct ibv_sge *sg, uint32_t n, uint8_t *base, uint32_t lkey,
			 uint32_t total, unsigned int salt)
{
	uint32_t left = total, off = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t len = i == n - 1 ? left : (total / n) + ((i * 37 + salt) % 97) - 48;

		if (len > left)
			len = left;
		sg[i].addr = (uintptr_t)base + off;
		sg[i].length = len;
		sg[i].lkey = lkey;
		off += len + 1 + (i % 5); /* a gap the data must skip */
		left -= len;
	}
	return off;
}

/* Concatenate an SGE list's bytes. */
static void sgl_collect(const struct ibv_sge *sg, uint32_t n, uint8_t *out)
{
	for (uint32_t i = 0; i < n; i++) {
		memcpy(out, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
		out += sg[i].length;
	}
}

static void case_sge_lists(void)
{
	struct ibv_device_attr da;
	struct ep a, b;
	struct ep_opts o = {.len = 4 * MiB, .depth = 8};
	struct ibv_sge ss[64], rs[64];
	uint8_t *flat = malloc(MiB);
	struct ibv_wc wc;

	t_case("SGE lists of up to max_sge entries: SEND, WRITE, READ across packets");
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!CHECK(flat) || !CHECK_RET(ibv_query_device(ctx, &da), 0))
		goto out;
	o.sge = (uint32_t)da.max_sge < 64 ? (uint32_t)da.max_sge : 64;
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (uint32_t nsge = 1; nsge <= o.sge;
	     nsge = nsge < o.sge && nsge * 2 > o.sge ? o.sge : nsge * 2) {
		uint32_t total = 300 * nsge + 5000; /* crosses 1 KiB packets inside SGEs */
		struct ibv_send_wr wr;
		struct ibv_recv_wr rwr, *rbad;
		long bad;

		/* SEND: nsge gather entries into a receive of o.sge scatter entries */
		make_sgl(ss, nsge, a.buf, a.mr->lkey, total, nsge);
		make_sgl(rs, o.sge, b.buf, b.mr->lkey, total, nsge + 3);
		for (uint32_t i = 0; i < nsge; i++)
			t_fill((uint8_t *)(uintptr_t)ss[i].addr, ss[i].length, nsge * 100 + i);
		memset(b.buf, 0, MiB);
		memset(&rwr, 0, sizeof(rwr));
		rwr.sg_list = rs;
		rwr.num_sge = (int)o.sge;
		CHECK_RET(ibv_post_recv(b.qp, &rwr, &rbad), 0);
		memset(&wr, 0, sizeof(wr));
		wr.sg_list = ss;
		wr.num_sge = (int)nsge;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl send") || wait1(b.cq, &wc, "sgl recv"))
			goto out;
		CHECK_EQ_INT(wc.byte_len, total);
		{
			uint8_t *x = malloc(total), *y = malloc(total);

			if (CHECK(x && y)) {
				sgl_collect(ss, nsge, x);
				sgl_collect(rs, o.sge, y);
				CHECK_MSG(!memcmp(x, y, total), "SEND with %u SGEs: data differs",
					  nsge);
			}
			free(x);
			free(y);
		}
		/* WRITE: nsge gather entries to one contiguous remote range */
		memset(b.buf + 2 * MiB, 0, total + 16);
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 2 * MiB;
		wr.wr.rdma.rkey = b.mr->rkey;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl write"))
			goto out;
		sgl_collect(ss, nsge, flat);
		CHECK_MSG(!memcmp(flat, b.buf + 2 * MiB, total) && b.buf[2 * MiB + total] == 0,
			  "WRITE with %u SGEs: data differs", nsge);
		/* READ: one contiguous remote range into nsge scatter entries */
		t_fill(b.buf + 3 * MiB, total, nsge + 9);
		make_sgl(ss, nsge, a.buf + MiB, a.mr->lkey, total, nsge + 7);
		memset(a.buf + MiB, 0, MiB);
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = (uintptr_t)b.buf + 3 * MiB;
		if (post(&a, &wr) || wait1(a.cq, &wc, "sgl read"))
			goto out;
		sgl_collect(ss, nsge, flat);
		bad = pattern_diff(flat, total, nsge + 9);
		CHECK_MSG(bad < 0, "READ with %u SGEs: byte %ld differs", nsge, bad);
		n_msgs += 3;
		n_bytes += 3ull * total;
		if (nsge == o.sge)
			break;
	}
out:
	free(flat);
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- signalled / unsignalled ---- */

static void case_signalled(void)
{
	struct ep_opts o = {.len = 2 * MiB, .depth = 128};
	struct ep a, b, c, d;
	struct ibv_wc wc[128];
	int got;

	t_case("signalled and unsignalled mixes; sq_sig_all signals everything");
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_2048))
		goto out;
	/* 100 WRITEs and SENDs, every 7th and the last signalled */
	for (int i = 0; i < 100; i++) {
		uint32_t len = 1000 + (uint32_t)i * 97;
		bool sig = i % 7 == 6 || i == 99;

		t_fill(a.buf + (size_t)i * 12000, len, (unsigned int)i);
		if (i % 4 == 3) {
			if (recv1(&b, (uint64_t)i, b.buf + (size_t)i * 12000, len))
				goto out;
			if (post1(&a, IBV_WR_SEND, (uint64_t)i, a.buf + (size_t)i * 12000, len, 0,
				  0, sig ? IBV_SEND_SIGNALED : 0, 0))
				goto out;
		} else if (post1(&a, IBV_WR_RDMA_WRITE, (uint64_t)i, a.buf + (size_t)i * 12000, len,
				 (uintptr_t)b.buf + (size_t)i * 12000, b.mr->rkey,
				 sig ? IBV_SEND_SIGNALED : 0, 0)) {
			goto out;
		}
	}
	/* the 25 receive completions are on b's CQ; a gets only the signalled ones */
	got = t_poll(a.cq, wc, 100 / 7 + 1, 10000);
	CHECK_EQ_INT(got, 100 / 7 + 1);
	for (int i = 0; i < got; i++)
		CHECK_MSG(wc[i].status == IBV_WC_SUCCESS &&
				  (wc[i].wr_id % 7 == 6 || wc[i].wr_id == 99) &&
				  (i == 0 || wc[i].wr_id > wc[i - 1].wr_id),
			  "completion %d: wr_id %llu status %s", i, (unsigned long long)wc[i].wr_id,
			  ibv_wc_status_str(wc[i].status));
	CHECK_EQ_INT(t_poll(b.cq, wc, 25, 5000), 25);
	CHECK_EQ_INT(t_poll(a.cq, wc, 1, 50), 0);
	for (int i = 0; i < 100; i++) {
		long bad = pattern_diff(b.buf + (size_t)i * 12000, 1000 + (size_t)i * 97,
					(unsigned int)i);

		if (!CHECK_MSG(bad < 0, "message %d: byte %ld differs", i, bad))
			break;
	}
	/* sq_sig_all: unsignalled requests complete too */
	o.sig_all = true;
	if (ep_init(&c, &o) || ep_init(&d, &o) || ep_connect(&c, &d, IBV_MTU_512))
		goto out;
	for (int i = 0; i < 20; i++)
		if (post1(&c, IBV_WR_RDMA_WRITE, (uint64_t)i, c.buf, 3000, (uintptr_t)d.buf,
			  d.mr->rkey, 0, 0))
			goto out;
	CHECK_EQ_INT(t_poll(c.cq, wc, 20, 10000), 20);
	CHECK_EQ_INT(t_poll(c.cq, wc, 1, 50), 0);
out:
	ep_fini(&a);
	ep_fini(&b);
	ep_fini(&c);
	ep_fini(&d);
}

/* ---- fence ---- */

static void case_fence(void)
{
	struct ep_opts o = {.len = 4 * MiB, .depth = 64};
	struct ep a, b;
	struct ibv_wc wc[8];

	t_case("IBV_SEND_FENCE: a WRITE behind READs and an atomic sends what they fetched");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	for (unsigned int round = 0; round < 10; round++) {
		const uint32_t n = 256 * 1024;
		uint64_t *word = (uint64_t *)(void *)(b.buf + 3 * MiB);
		struct ibv_sge sge = {(uintptr_t)a.buf + 2 * MiB, 8, a.mr->lkey};
		struct ibv_send_wr wr;
		long bad;

		/* b holds a fresh pattern; a's landing zone is stale */
		t_fill(b.buf, n, round + 40);
		memset(a.buf, 0xee, n);
		memset(b.buf + MiB, 0, n);
		*word = 5000 + round;
		memset(a.buf + 2 * MiB, 0, 8);
		/* two READs of halves, then a fenced WRITE of what they fetched */
		if (post1(&a, IBV_WR_RDMA_READ, 1, a.buf, n / 2, (uintptr_t)b.buf, b.mr->rkey, 0,
			  0) ||
		    post1(&a, IBV_WR_RDMA_READ, 2, a.buf + n / 2, n / 2, (uintptr_t)b.buf + n / 2,
			  b.mr->rkey, 0, 0) ||
		    post1(&a, IBV_WR_RDMA_WRITE, 3, a.buf, n, (uintptr_t)b.buf + MiB, b.mr->rkey,
			  IBV_SEND_FENCE | IBV_SEND_SIGNALED, 0))
			goto out;
		/* an atomic, then a fenced WRITE of the value it fetched */
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 4;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = (uintptr_t)word;
		wr.wr.atomic.rkey = b.mr->rkey;
		wr.wr.atomic.compare_add = 1;
		if (post(&a, &wr) || post1(&a, IBV_WR_RDMA_WRITE, 5, a.buf + 2 * MiB, 8,
					   (uintptr_t)b.buf + 3 * MiB + 64, b.mr->rkey,
					   IBV_SEND_FENCE | IBV_SEND_SIGNALED, 0))
			goto out;
		if (!CHECK_EQ_INT(t_poll(a.cq, wc, 2, 10000), 2))
			goto out;
		CHECK(wc[0].status == IBV_WC_SUCCESS && wc[0].wr_id == 3);
		CHECK(wc[1].status == IBV_WC_SUCCESS && wc[1].wr_id == 5);
		bad = pattern_diff(b.buf + MiB, n, round + 40);
		CHECK_MSG(bad < 0, "round %u: the fenced WRITE sent stale byte %ld", round, bad);
		CHECK_MSG(*(uint64_t *)(void *)(b.buf + 3 * MiB + 64) == 5000 + round,
			  "round %u: the fenced WRITE did not carry the fetched value", round);
		CHECK_EQ_INT(*word, 5001 + round);
	}
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* ---- ibv_qp_ex ---- */

static void case_qp_ex(void)
{
	struct ep_opts o = {.len = 4 * MiB,
			    .depth = 32,
			    .sge = 4,
			    .ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				   IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD};
	struct ep a, b;
	struct ibv_wc wc[16];
	struct ibv_qp_ex *x;
	uint64_t *word;
	int got;

	t_case("ibv_qp_ex sessions move data: every opcode in one ibv_wr_complete");
	if (ep_init(&a, &o) || ep_init(&b, &o) || ep_connect(&a, &b, IBV_MTU_1024))
		goto out;
	x = a.qpx;
	word = (uint64_t *)(void *)(b.buf + 3 * MiB);
	*word = 40;
	t_fill(a.buf, 200000, 1);
	t_fill(b.buf + 2 * MiB, 300000, 2);
	if (recv1(&b, 100, b.buf + MiB, 100000) || recv1(&b, 101, b.buf + MiB + 100000, 100) ||
	    recv1(&b, 102, NULL, 0))
		goto out;
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf + 5);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 150001);
	x->wr_id = 2;
	ibv_wr_send(x);
	{
		struct ibv_sge sl[3] = {{(uintptr_t)a.buf, 30000, a.mr->lkey},
					{(uintptr_t)a.buf + 40000, 1, a.mr->lkey},
					{(uintptr_t)a.buf + 50000, 69999, a.mr->lkey}};

		ibv_wr_set_sge_list(x, 3, sl);
	}
	x->wr_id = 3;
	ibv_wr_send_imm(x, htonl(0xfeed));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 7, 100);
	x->wr_id = 4;
	ibv_wr_rdma_write_imm(x, b.mr->rkey, (uintptr_t)b.buf + 1500000, htonl(0xbeef));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 1, 4097);
	x->wr_id = 5;
	ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf + 2 * MiB);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 2 * MiB, 300000);
	x->wr_id = 6;
	ibv_wr_atomic_fetch_add(x, b.mr->rkey, (uintptr_t)word, 2);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 3 * MiB, 8);
	x->wr_id = 7;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	ibv_wr_atomic_cmp_swp(x, b.mr->rkey, (uintptr_t)word, 42, 99);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 3 * MiB + 8, 8);
	if (!CHECK_RET(ibv_wr_complete(x), 0))
		goto out;
	n_msgs += 7;
	got = t_poll(a.cq, wc, 7, 10000);
	CHECK_EQ_INT(got, 7);
	for (int i = 0; i < got; i++)
		CHECK_MSG(wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == (uint64_t)i + 1,
			  "qp_ex completion %d: wr_id %llu %s", i, (unsigned long long)wc[i].wr_id,
			  ibv_wc_status_str(wc[i].status));
	got = t_poll(b.cq, wc, 3, 5000);
	if (CHECK_EQ_INT(got, 3)) {
		CHECK(wc[0].wr_id == 100 && wc[0].byte_len == 100000);
		CHECK(wc[1].wr_id == 101 && wc[1].byte_len == 100 &&
		      ntohl(wc[1].imm_data) == 0xfeed);
		CHECK(wc[2].wr_id == 102 && wc[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      wc[2].byte_len == 4097 && ntohl(wc[2].imm_data) == 0xbeef);
	}
	CHECK(!memcmp(b.buf + 5, a.buf, 150001));
	CHECK(!memcmp(b.buf + MiB, a.buf, 30000) && b.buf[MiB + 30000] == a.buf[40000] &&
	      !memcmp(b.buf + MiB + 30001, a.buf + 50000, 69999));
	CHECK(!memcmp(b.buf + MiB + 100000, a.buf + 7, 100));
	CHECK(!memcmp(b.buf + 1500000, a.buf + 1, 4097));
	CHECK(!memcmp(a.buf + 2 * MiB, b.buf + 2 * MiB, 300000));
	CHECK_EQ_INT(*(uint64_t *)(void *)(a.buf + 3 * MiB), 40);
	CHECK_EQ_INT(*(uint64_t *)(void *)(a.buf + 3 * MiB + 8), 42);
	CHECK_EQ_INT(*word, 99);
out:
	ep_fini(&a);
	ep_fini(&b);
}

int main(void)
{
	t_start("api_traffic_sge");
	if (!tr_open())
		return t_finish();

	case_sge_lists();
	case_signalled();
	case_fence();
	case_qp_ex();

	return tr_finish();
}

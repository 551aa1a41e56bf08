/* SPDX-License-Identifier: MIT */
/*
 * api_traffic_sizes.c - the data path across message sizes:
 *
 *   - every RC opcode (SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM,
 *     RDMA READ) at sizes from 0 to several MiB around every multiple of
 *     the path MTU, for each path MTU 256..4096, at odd buffer offsets;
 *     atomics at every MTU;
 *   - UD SENDs up to the port MTU.
 * Every received byte is compared, and the bytes after each target range
 * must be untouched. The endpoints and helpers are in traffic_ep.h; the
 * other api_traffic_* programs cover SGE lists, signalling, fences
 * and ibv_qp_ex (api_traffic_sge), events, SRQs and errors
 * (api_traffic_events), and two processes (api_traffic_2proc). Existing
 * single-size cases live in api_rc_ops.c and api_rc_2proc.c; these sweep.
 */
#include "harness.h"
#include "traffic.h"
#include "traffic_ep.h"

/* test: timeout=300 */

static bool under_valgrind;

/* ---- sizes x MTUs x opcodes ---- */

#define SZ_BUF (8u * MiB)
#define CANARY 0x5a

static uint32_t sizes_for(uint32_t m, uint32_t *s)
{
	uint32_t n = 0;

	s[n++] = 0;
	s[n++] = 1;
	s[n++] = m - 1;
	s[n++] = m;
	s[n++] = m + 1;
	s[n++] = 2 * m - 1;
	s[n++] = 2 * m;
	s[n++] = 2 * m + 1;
	s[n++] = 7 * m + 13;
	s[n++] = 65536 + 3;
	if (!under_valgrind || m == 4096) {
		s[n++] = MiB - 1;
		s[n++] = 3 * MiB + 5; /* several MiB: thousands of packets at MTU 256 */
	}
	return n;
}

static void sweep_one(struct ep *a, struct ep *b, enum ibv_wr_opcode op, uint32_t n, uint32_t mtu,
		      unsigned int seed)
{
	/* odd offsets: the data is not aligned on either side */
	size_t soff = 3 + (n % 61), roff = 5 + (n % 53);
	bool imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool recv = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || imm;
	uint8_t *dst, *src;
	struct ibv_wc wc;
	long bad;

	if (op == IBV_WR_RDMA_READ) { /* a reads b's pattern */
		src = b->buf + roff;
		dst = a->buf + soff;
	} else {
		src = a->buf + soff;
		dst = b->buf + roff;
	}
	t_fill(src, n, seed);
	memset(dst, CANARY, n + 64);
	if (recv && recv1(b, 7, dst, op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : n + 64))
		return;
	if (op == IBV_WR_RDMA_READ) {
		if (post1(a, op, 1, dst, n, (uintptr_t)src, b->mr->rkey, IBV_SEND_SIGNALED, 0))
			return;
	} else if (post1(a, op, 1, src, n, (uintptr_t)dst, b->mr->rkey, IBV_SEND_SIGNALED,
			 0x1000000u + n)) {
		return;
	}
	if (wait1(a->cq, &wc, "requester"))
		return;
	if (op == IBV_WR_RDMA_READ)
		CHECK_EQ_INT(wc.byte_len, n);
	if (recv) {
		if (wait1(b->cq, &wc, "responder"))
			return;
		CHECK_EQ_INT(wc.byte_len, n);
		CHECK_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
		if (imm)
			CHECK_EQ_INT(ntohl(wc.imm_data), 0x1000000u + n);
		CHECK(wc.opcode ==
		      (op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV));
	}
	bad = pattern_diff(dst, n, seed);
	CHECK_MSG(bad < 0, "op %d, %u bytes, MTU %u: byte %ld differs", op, n, mtu, bad);
	for (int i = 0; i < 64; i++)
		if (!CHECK_MSG(dst[n + (size_t)i] == CANARY,
			       "op %d, %u bytes, MTU %u: wrote past "
			       "the end (+%d)",
			       op, n, mtu, i))
			break;
}

static void case_sizes(void)
{
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
						 IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
						 IBV_WR_RDMA_READ};
	struct ep_opts o = {.len = SZ_BUF, .depth = 8};
	struct ep a, b;
	uint32_t s[16];

	t_case("every opcode at sizes across the MTU, for each path MTU 256..4096");
	if (ep_init(&a, &o) || ep_init(&b, &o))
		goto out;
	for (size_t k = 0; k < SV_ARRAY_N(mtus); k++) {
		uint32_t m = mtu_bytes(mtus[k]), ns = sizes_for(m, s);
		struct ibv_qp_attr reset = {.qp_state = IBV_QPS_RESET};

		if (k && (!CHECK_RET(ibv_modify_qp(a.qp, &reset, IBV_QP_STATE), 0) ||
			  !CHECK_RET(ibv_modify_qp(b.qp, &reset, IBV_QP_STATE), 0) ||
			  t_qp_init(a.qp, ACC_ALL) || t_qp_init(b.qp, ACC_ALL)))
			break;
		if (ep_connect(&a, &b, mtus[k]))
			break;
		for (size_t o2 = 0; o2 < SV_ARRAY_N(ops); o2++)
			for (uint32_t i = 0; i < ns; i++)
				sweep_one(&a, &b, ops[o2], s[i], m,
					  (unsigned int)(k * 1000 + o2 * 50 + i));
		/* atomics at this MTU: CAS then FAA on an 8-aligned word of b */
		{
			uint64_t *word = (uint64_t *)(void *)(b.buf + 4096), got;
			struct ibv_send_wr wr;
			struct ibv_sge sge = {(uintptr_t)a.buf, 8, a.mr->lkey};
			struct ibv_wc wc;

			*word = 1000 + k;
			memset(&wr, 0, sizeof(wr));
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.send_flags = IBV_SEND_SIGNALED;
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.remote_addr = (uintptr_t)word;
			wr.wr.atomic.rkey = b.mr->rkey;
			wr.wr.atomic.compare_add = 1000 + k;
			wr.wr.atomic.swap = 77;
			if (!post(&a, &wr) && !wait1(a.cq, &wc, "cmp-and-swap")) {
				memcpy(&got, a.buf, 8);
				CHECK_EQ_INT(got, 1000 + k);
				CHECK_EQ_INT(*word, 77);
			}
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = 23;
			if (!post(&a, &wr) && !wait1(a.cq, &wc, "fetch-and-add")) {
				memcpy(&got, a.buf, 8);
				CHECK_EQ_INT(got, 77);
				CHECK_EQ_INT(*word, 100);
			}
		}
	}
out:
	ep_fini(&a);
	ep_fini(&b);
}

/* UD SENDs at sizes up to the port's MTU, payload after the 40-byte GRH. */
static void case_ud_sizes(void)
{
	struct ep_opts o = {.len = 3 * 4096 + 128, .depth = 8, .type = IBV_QPT_UD};
	struct ibv_port_attr pa;
	struct ep a, b;
	struct ibv_ah *ah = NULL;
	struct ibv_ah_attr aa = t_ah_attr(&gid);

	t_case("UD SEND at sizes up to the port MTU");
	if (!CHECK_RET(ibv_query_port(ctx, 1, &pa), 0) || ep_init(&a, &o) || ep_init(&b, &o) ||
	    t_qp_rts(a.qp, 0, NULL, 0, 0, pa.active_mtu) ||
	    t_qp_rts(b.qp, 0, NULL, 0, 0, pa.active_mtu))
		goto out;
	ah = ibv_create_ah(gpd, &aa);
	if (!CHECK(ah))
		goto out;
	for (uint32_t m = 256; m <= mtu_bytes(pa.active_mtu); m *= 2) {
		uint32_t sz[] = {0, 1, m - 1, m};

		for (size_t i = 0; i < SV_ARRAY_N(sz); i++) {
			uint32_t n = sz[i];
			struct ibv_sge sge = {(uintptr_t)a.buf + 8, n, a.mr->lkey};
			struct ibv_send_wr wr = {.wr_id = n,
						 .sg_list = &sge,
						 .num_sge = n ? 1 : 0,
						 .opcode = IBV_WR_SEND,
						 .send_flags = IBV_SEND_SIGNALED};
			struct ibv_wc wc;
			long bad;

			wr.wr.ud.ah = ah;
			wr.wr.ud.remote_qpn = b.qp->qp_num;
			wr.wr.ud.remote_qkey = 0x11111111;
			t_fill(a.buf + 8, n, n);
			memset(b.buf, CANARY, n + 40 + 64);
			if (recv1(&b, n, b.buf, n + 40) || post(&a, &wr) ||
			    wait1(a.cq, &wc, "UD send") || wait1(b.cq, &wc, "UD recv"))
				goto out;
			n_msgs++;
			n_bytes += n;
			CHECK_EQ_INT(wc.byte_len, n + 40);
			CHECK(wc.src_qp == a.qp->qp_num && (wc.wc_flags & IBV_WC_GRH));
			bad = pattern_diff(b.buf + 40, n, n);
			CHECK_MSG(bad < 0, "UD %u bytes: byte %ld differs", n, bad);
			CHECK(b.buf[n + 40] == CANARY);
		}
	}
out:
	if (ah)
		CHECK_RET(ibv_destroy_ah(ah), 0);
	ep_fini(&a);
	ep_fini(&b);
}

int main(void)
{
	const char *pre = getenv("LD_PRELOAD");

	t_start("api_traffic_sizes");
	/* valgrind's preload: keep the multi-MiB sizes to MTU 4096 there */
	under_valgrind = pre && strstr(pre, "vgpreload");
	if (under_valgrind)
		printf("# under valgrind: multi-MiB messages at MTU 4096 only\n");
	if (!tr_open())
		return t_finish();

	case_sizes();
	case_ud_sizes();

	return tr_finish();
}

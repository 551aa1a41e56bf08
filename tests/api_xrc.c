/* SPDX-License-Identifier: MIT */
/*
 * api_xrc.c - XRC through the verbs, in one process (two contexts of the
 * device, A sending, B receiving):
 *   - ibv_open_xrcd / ibv_close_xrcd: rdma-core's comp_mask rules
 *     (EOPNOTSUPP, EINVAL), the kernel's fd rules (EBADF, EAGAIN without
 *     O_CREAT, EINVAL with O_EXCL on an existing domain), one domain per
 *     inode shared by every context and counted, EBUSY while an SRQ or
 *     TGT QP of the handle exists;
 *   - XRC SRQs: a domain and a CQ required (EINVAL), a 24-bit number,
 *     the CQ held (EBUSY), never an RC QP's SRQ (EINVAL);
 *   - XRC QPs: TGT needs a domain and has no PD, CQs or capacities; INI
 *     needs a PD and a send CQ and has no receive side; no receives on
 *     either, no sends on TGT (EINVAL); the INI and TGT modify masks;
 *   - traffic: SEND (1 B to 64 KiB, with immediate), RDMA WRITE with
 *     immediate, READ and atomics from an INI QP through a TGT QP, the
 *     receives taken from the XRC SRQ the sender names and completed on
 *     that SRQ's CQ with the TGT QP's number; ibv_wr_set_xrc_srqn;
 *   - an SRQ number of another domain: the sender's WQE fails with
 *     IBV_WC_REM_INV_REQ_ERR and nothing lands;
 *   - ibv_open_qp: its rules (EOPNOTSUPP, EINVAL), and a TGT QP opened
 *     through another handle outlives its creator's destroy.
 */
#include "harness.h"
#include "traffic.h"
#include "xrc_util.h"

#include <stdlib.h>
#include <sys/stat.h>

/* test: timeout=120 */

#define BUF (256u << 10)
#define HALF (BUF / 2)

static struct x_side a, b; /* a sends to b */

/* Contract: the next completion on `cq` within 10 s, with `status`; 0 or -1. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc, enum ibv_wc_status status,
		   const char *what)
{
	if (!CHECK_MSG(t_poll(cq, wc, 1, 10000) == 1, "%s: no completion", what))
		return -1;
	return CHECK_MSG(wc->status == status, "%s: status %s, want %s", what,
			 ibv_wc_status_str(wc->status), ibv_wc_status_str(status)) ?
		       0 :
		       -1;
}

/* Contract: a temporary file's fd (its name already unlinked), or -1. */
static int tmp_fd(void)
{
	char name[] = "/tmp/api_xrc_XXXXXX";
	int fd = mkstemp(name);

	if (fd >= 0)
		unlink(name);
	return fd;
}

static void case_xrcd(void)
{
	struct ibv_xrcd_init_attr attr = {0};
	struct ibv_context *ctx2 = t_open_dev();
	struct ibv_xrcd *x1, *x2, *x3;
	struct ibv_qp *tgt, *h;
	struct ibv_srq *srq;
	struct ibv_cq *cq;
	int fd = tmp_fd(), fd2 = tmp_fd();

	t_case("ibv_open_xrcd / ibv_close_xrcd: comp_mask, fd and oflags rules, sharing, EBUSY");
	if (!CHECK(ctx2 && fd >= 0 && fd2 >= 0))
		return;
	attr.comp_mask =
		IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED;
	attr.fd = -1;
	attr.oflags = O_CREAT;
	CHECK_ERRNO_PTR(ibv_open_xrcd(a.ctx, &attr), EOPNOTSUPP);
	attr.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	CHECK_ERRNO_PTR(ibv_open_xrcd(a.ctx, &attr), EINVAL);
	attr.comp_mask = IBV_XRCD_INIT_ATTR_OFLAGS;
	CHECK_ERRNO_PTR(ibv_open_xrcd(a.ctx, &attr), EINVAL);
	CHECK_ERRNO_PTR(x_open_xrcd(a.ctx, 1000000, O_CREAT), EBADF);
	CHECK_ERRNO_PTR(x_open_xrcd(a.ctx, fd, 0), EAGAIN);
	x1 = x_open_xrcd(a.ctx, fd, O_CREAT | O_EXCL);
	if (!CHECK(x1))
		return;
	CHECK_ERRNO_PTR(x_open_xrcd(a.ctx, fd, O_CREAT | O_EXCL), EINVAL);
	/* the same inode through another context and another fd: the same domain */
	x2 = x_open_xrcd(ctx2, fd, 0);
	x3 = x_open_xrcd(a.ctx, -1, 0); /* fd -1: private, O_CREAT or not */
	if (!CHECK(x2 && x3 && x2 != x1))
		return;
	tgt = x_tgt(a.ctx, x1);
	if (!CHECK(tgt))
		return;
	{
		struct ibv_qp_open_attr oa = {0};

		oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
		oa.qp_num = tgt->qp_num;
		oa.qp_type = IBV_QPT_XRC_RECV;
		oa.xrcd = x2; /* the shared domain: found */
		h = ibv_open_qp(ctx2, &oa);
		CHECK_MSG(h && h->qp_num == tgt->qp_num, "open through the shared domain: %s",
			  t_errname(errno));
		oa.xrcd = x3; /* a private domain: not there */
		CHECK_ERRNO_PTR(ibv_open_qp(a.ctx, &oa), EINVAL);
	}
	CHECK_RET(ibv_close_xrcd(x1), EBUSY); /* its TGT QP */
	if (h) {
		CHECK_RET(ibv_close_xrcd(x2), EBUSY); /* the opened handle */
		CHECK_RET(ibv_destroy_qp(h), 0);
	}
	CHECK_RET(ibv_close_xrcd(x2), 0);
	CHECK_RET(ibv_destroy_qp(tgt), 0);
	cq = ibv_create_cq(a.ctx, 4, NULL, NULL, 0);
	srq = cq ? x_srq(a.ctx, a.pd, x1, cq, 4) : NULL;
	if (CHECK(srq)) {
		CHECK_RET(ibv_close_xrcd(x1), EBUSY); /* its SRQ */
		CHECK_RET(ibv_destroy_cq(cq), EBUSY); /* the SRQ's CQ */
		CHECK_RET(ibv_destroy_srq(srq), 0);
	}
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_close_xrcd(x1), 0);
	/* the last handle of the inode's domain closed: it is gone */
	CHECK_ERRNO_PTR(x_open_xrcd(a.ctx, fd, 0), EAGAIN);
	CHECK_ERRNO_PTR(x_open_xrcd(a.ctx, fd2, O_RDONLY), EAGAIN);
	CHECK_RET(ibv_close_xrcd(x3), 0);
	ibv_close_device(ctx2);
	close(fd);
	close(fd2);
}

static void case_srq(void)
{
	struct ibv_srq_init_attr_ex x = {0};
	struct ibv_srq_attr sa;
	struct ibv_qp_init_attr qa = {0};
	struct ibv_srq *s2;
	uint32_t n2 = 0;

	t_case("XRC SRQ: XRC domain and CQ required, its number, never an RC QP's SRQ");
	x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	x.srq_type = IBV_SRQT_XRC;
	x.pd = b.pd;
	x.cq = b.rcq;
	x.attr.max_wr = 4;
	x.attr.max_sge = 1;
	CHECK_ERRNO_PTR(ibv_create_srq_ex(b.ctx, &x), EINVAL); /* no XRCD */
	x.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD;
	x.xrcd = b.xrcd;
	CHECK_ERRNO_PTR(ibv_create_srq_ex(b.ctx, &x), EINVAL); /* no CQ */
	x.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	x.xrcd = a.xrcd; /* another context's handle */
	CHECK_ERRNO_PTR(ibv_create_srq_ex(b.ctx, &x), EINVAL);
	CHECK_ERRNO_PTR(x_tgt(b.ctx, a.xrcd), EINVAL);
	CHECK(b.srqn != 0 && b.srqn <= 0xffffff);
	s2 = x_srq(b.ctx, b.pd, b.xrcd, b.rcq, 4);
	if (CHECK(s2)) {
		CHECK(ibv_get_srq_num(s2, &n2) == 0 && n2 != b.srqn && n2 <= 0xffffff);
		CHECK(ibv_query_srq(s2, &sa) == 0 && sa.max_wr >= 4 && sa.max_sge == 1);
		qa.qp_type = IBV_QPT_RC;
		qa.send_cq = b.scq;
		qa.recv_cq = b.scq;
		qa.srq = s2;
		qa.cap.max_send_wr = 1;
		qa.cap.max_send_sge = 1;
		CHECK_ERRNO_PTR(ibv_create_qp(b.pd, &qa), EINVAL);
		CHECK_RET(ibv_destroy_srq(s2), 0);
	}
}

static void case_qp_rules(void)
{
	struct ibv_qp_init_attr_ex x = {0};
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	struct ibv_recv_wr rwr = {0}, *rbad;
	struct ibv_send_wr swr = {0}, *sbad;
	struct ibv_qp *q;

	t_case("XRC QPs: what INI and TGT need and ignore; no receives, no TGT sends");
	x.qp_type = IBV_QPT_XRC_RECV; /* no XRCD */
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = b.pd;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(b.ctx, &x), EINVAL);
	x.comp_mask = IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	x.xrcd = b.xrcd;
	x.send_ops_flags = IBV_QP_EX_WITH_SEND;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(b.ctx, &x), EOPNOTSUPP);
	memset(&x, 0, sizeof(x));
	x.qp_type = IBV_QPT_XRC_SEND; /* no send CQ */
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = a.pd;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(a.ctx, &x), EINVAL);
	x.comp_mask = IBV_QP_INIT_ATTR_XRCD; /* no PD */
	x.xrcd = a.xrcd;
	x.send_cq = a.scq;
	CHECK_ERRNO_PTR(ibv_create_qp_ex(a.ctx, &x), EINVAL);
	/* INI: the receive CQ and receive capacities ignored */
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.recv_cq = a.rcq;
	x.cap.max_send_wr = 2;
	x.cap.max_recv_wr = 100000;
	x.cap.max_recv_sge = 1000;
	q = ibv_create_qp_ex(a.ctx, &x);
	if (CHECK(q)) {
		CHECK(!q->recv_cq && !q->srq && q->send_cq == a.scq && q->pd == a.pd);
		CHECK(x.cap.max_recv_wr == 0 && x.cap.max_recv_sge == 0 && x.cap.max_send_wr >= 2);
		CHECK(ibv_query_qp(q, &qa, IBV_QP_CAP, &init) == 0 &&
		      init.qp_type == IBV_QPT_XRC_SEND && !init.recv_cq &&
		      init.cap.max_recv_wr == 0);
		CHECK_RET(ibv_destroy_qp(q), 0);
	}
	/* TGT: no PD, no CQs, no capacities */
	CHECK(!b.tgt->pd && !b.tgt->send_cq && !b.tgt->recv_cq && !b.tgt->srq);
	CHECK(ibv_query_qp(b.tgt, &qa, IBV_QP_CAP, &init) == 0 &&
	      init.qp_type == IBV_QPT_XRC_RECV && init.cap.max_send_wr == 0 &&
	      init.cap.max_recv_wr == 0);
	CHECK_RET(ibv_post_recv(a.ini, &rwr, &rbad), EINVAL);
	CHECK_RET(ibv_post_recv(b.tgt, &rwr, &rbad), EINVAL);
	swr.opcode = IBV_WR_SEND;
	CHECK_RET(ibv_post_send(b.tgt, &swr, &sbad), EINVAL); /* (and not in RTS either) */
}

static void case_modify(void)
{
	struct ibv_qp_attr qa = {0};
	struct ibv_qp *ini = x_ini(a.ctx, a.pd, a.scq, 4, 0), *tgt = x_tgt(b.ctx, b.xrcd);

	t_case("ibv_modify_qp: the XRC INI and TGT attribute masks");
	if (!CHECK(ini && tgt))
		return;
	qa.qp_state = IBV_QPS_INIT;
	qa.port_num = 1;
	CHECK_RET(ibv_modify_qp(tgt, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	CHECK(t_qp_init(ini, 0) == 0 && t_qp_init(tgt, IBV_ACCESS_REMOTE_WRITE) == 0);
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = IBV_MTU_1024;
	qa.dest_qp_num = 5;
	qa.ah_attr = t_ah_attr(&b.gid);
	qa.min_rnr_timer = 1;
	qa.max_dest_rd_atomic = 1;
	/* INI: RTR takes neither MIN_RNR_TIMER nor MAX_DEST_RD_ATOMIC; TGT needs both */
	CHECK_RET(ibv_modify_qp(ini, &qa,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER),
		  EINVAL);
	CHECK_RET(ibv_modify_qp(tgt, &qa,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN),
		  EINVAL);
	CHECK(x_ini_rts(ini, 5, &b.gid, 1) == 0);
	qa.qp_state = IBV_QPS_RTR;
	CHECK_RET(ibv_modify_qp(tgt, &qa,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER |
					IBV_QP_MAX_DEST_RD_ATOMIC),
		  0);
	/* TGT: RTS needs SQ_PSN and TIMEOUT, and takes no RETRY_CNT */
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTS;
	qa.timeout = 14;
	CHECK_RET(ibv_modify_qp(tgt, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	CHECK_RET(ibv_modify_qp(tgt, &qa,
				IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT),
		  EINVAL);
	CHECK_RET(ibv_modify_qp(tgt, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT), 0);
	/* RTS->RTS: MIN_RNR_TIMER for TGT, not for INI */
	CHECK_RET(ibv_modify_qp(tgt, &qa, IBV_QP_MIN_RNR_TIMER), 0);
	CHECK_RET(ibv_modify_qp(ini, &qa, IBV_QP_MIN_RNR_TIMER), EINVAL);
	CHECK_RET(ibv_destroy_qp(ini), 0);
	CHECK_RET(ibv_destroy_qp(tgt), 0);
}

/* Contract: the receive completion of a message to b's TGT QP is as an XRC one must be. */
static void check_recv_wc(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_opcode op,
			  uint32_t len)
{
	CHECK_EQ_INT(wc->wr_id, wr_id);
	CHECK_EQ_INT(wc->opcode, op);
	CHECK_EQ_INT(wc->byte_len, len);
	CHECK_EQ_INT(wc->qp_num, b.tgt->qp_num); /* the TGT QP's, not the SRQ's */
	CHECK_EQ_INT(wc->src_qp, a.ini->qp_num);
}

static void case_traffic(void)
{
	static const uint32_t sizes[] = {1, 255, 1024, 1025, 4097, 65536};
	struct ibv_srq *s2 = x_srq(b.ctx, b.pd, b.xrcd, b.scq, 8); /* completes on b.scq */
	uint32_t n2 = 0;
	struct ibv_wc wc;
	uint64_t *word;

	t_case("INI -> TGT -> XRC SRQ: SEND, WRITE with imm, READ, atomics; steering by SRQ number");
	if (!CHECK(s2) || !CHECK(ibv_get_srq_num(s2, &n2) == 0))
		return;
	for (size_t i = 0; i < SV_ARRAY_N(sizes); i++) {
		uint32_t n = sizes[i];
		bool imm = i & 1;

		t_fill(a.buf, n, (unsigned int)i);
		memset(b.buf, 0, n + 16);
		CHECK(x_recv(&b, b.srq, 100 + i, 0, HALF) == 0);
		CHECK(x_post(&a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, i, 0, n, b.srqn, 0, 0,
			     0x5e0 + (uint32_t)i) == 0);
		if (!wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "send"))
			CHECK(wc.wr_id == i && wc.opcode == IBV_WC_SEND &&
			      wc.qp_num == a.ini->qp_num);
		if (!wait_wc(b.rcq, &wc, IBV_WC_SUCCESS, "recv")) {
			check_recv_wc(&wc, 100 + i, IBV_WC_RECV, n);
			CHECK_EQ_INT(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
			if (imm)
				CHECK_EQ_INT(ntohl(wc.imm_data), 0x5e0 + (uint32_t)i);
		}
		CHECK_MSG(memcmp(a.buf, b.buf, n) == 0, "payload of %u bytes differs", n);
		CHECK(b.buf[n] == 0);
	}
	/* the second SRQ of the domain, by its number: its own WQE and CQ */
	t_fill(a.buf, 300, 9);
	CHECK(x_recv(&b, s2, 7, 1000, 4096) == 0);
	CHECK(x_post(&a, IBV_WR_SEND, 50, 0, 300, n2, 0, 0, 0) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "send to SRQ 2") == 0);
	if (!wait_wc(b.scq, &wc, IBV_WC_SUCCESS, "recv on SRQ 2"))
		check_recv_wc(&wc, 7, IBV_WC_RECV, 300);
	CHECK(memcmp(a.buf, b.buf + 1000, 300) == 0);
	CHECK(ibv_poll_cq(b.rcq, 1, &wc) == 0);
	/* WRITE with immediate: the data at the rkey, a WQE of the named SRQ */
	t_fill(a.buf, 5000, 3);
	CHECK(x_recv(&b, b.srq, 300, 0, 0) == 0);
	CHECK(x_post(&a, IBV_WR_RDMA_WRITE_WITH_IMM, 51, 0, 5000, b.srqn, (uintptr_t)b.buf + HALF,
		     b.mr->rkey, 77) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "write imm") == 0);
	if (!wait_wc(b.rcq, &wc, IBV_WC_SUCCESS, "write imm recv")) {
		check_recv_wc(&wc, 300, IBV_WC_RECV_RDMA_WITH_IMM, 5000);
		CHECK(ntohl(wc.imm_data) == 77);
	}
	CHECK(memcmp(a.buf, b.buf + HALF, 5000) == 0);
	/* READ back and fetch-and-add: no receive side involved */
	memset(a.buf + HALF, 0, 5000);
	CHECK(x_post(&a, IBV_WR_RDMA_READ, 52, HALF, 5000, b.srqn, (uintptr_t)b.buf + HALF,
		     b.mr->rkey, 0) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "read") == 0);
	CHECK(memcmp(a.buf + HALF, b.buf + HALF, 5000) == 0);
	word = (uint64_t *)(void *)(b.buf + BUF - 8);
	*word = 40;
	CHECK(x_post(&a, IBV_WR_ATOMIC_FETCH_AND_ADD, 53, 8, 8, b.srqn, (uintptr_t)word, b.mr->rkey,
		     0) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "fetch-add") == 0);
	CHECK(*word == 45 && *(uint64_t *)(void *)(a.buf + 8) == 40);
	CHECK_RET(ibv_destroy_srq(s2), 0);
}

static void case_wr_api(void)
{
	struct ibv_qp *ini = x_ini(a.ctx, a.pd, a.scq, 4, IBV_QP_EX_WITH_SEND);
	struct ibv_qp *tgt = x_tgt(b.ctx, b.xrcd);
	struct ibv_qp_ex *qx = ini ? ibv_qp_to_qp_ex(ini) : NULL;
	union ibv_gid ag = a.gid;
	struct ibv_wc wc;

	t_case("ibv_wr_* on an INI QP: ibv_wr_set_xrc_srqn names the SRQ");
	if (!CHECK(ini && tgt && qx))
		return;
	CHECK(t_qp_init(ini, 0) == 0 && t_qp_init(tgt, 0) == 0);
	CHECK(x_tgt_rts(tgt, ini->qp_num, &ag, 7) == 0 &&
	      x_ini_rts(ini, tgt->qp_num, &b.gid, 7) == 0);
	t_fill(a.buf, 100, 11);
	CHECK(x_recv(&b, b.srq, 900, 0, 4096) == 0);
	ibv_wr_start(qx);
	qx->wr_id = 901;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_xrc_srqn(qx, b.srqn);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 100);
	CHECK_RET(ibv_wr_complete(qx), 0);
	if (!wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "wr send"))
		CHECK(wc.wr_id == 901);
	if (!wait_wc(b.rcq, &wc, IBV_WC_SUCCESS, "wr recv"))
		CHECK(wc.wr_id == 900 && wc.byte_len == 100 && wc.qp_num == tgt->qp_num &&
		      wc.src_qp == ini->qp_num);
	CHECK(memcmp(a.buf, b.buf, 100) == 0);
	CHECK_RET(ibv_destroy_qp(ini), 0);
	CHECK_RET(ibv_destroy_qp(tgt), 0);
}

static void case_foreign_srq(void)
{
	struct ibv_xrcd *other = x_open_xrcd(b.ctx, -1, 0);
	struct ibv_srq *fs = other ? x_srq(b.ctx, b.pd, other, b.scq, 4) : NULL;
	struct ibv_qp *ini = x_ini(a.ctx, a.pd, a.scq, 4, 0), *tgt = x_tgt(b.ctx, b.xrcd);
	union ibv_gid ag = a.gid;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	uint32_t fn = 0;

	t_case("an XRC SRQ of another domain: invalid request NAK, nothing lands");
	if (!other || !CHECK(fs && ini && tgt) || !CHECK(ibv_get_srq_num(fs, &fn) == 0))
		return;
	CHECK(t_qp_init(ini, 0) == 0 && t_qp_init(tgt, 0) == 0);
	CHECK(x_tgt_rts(tgt, ini->qp_num, &ag, 1) == 0 &&
	      x_ini_rts(ini, tgt->qp_num, &b.gid, 1) == 0);
	CHECK(x_recv(&b, fs, 1, 0, 4096) == 0);
	memset(b.buf, 0, 64);
	t_fill(a.buf, 64, 5);
	CHECK(x_post_on(ini, &a, IBV_WR_SEND, 1, 0, 64, fn, 0, 0, 0) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_REM_INV_REQ_ERR, "send to a foreign SRQ") == 0);
	CHECK(ibv_poll_cq(b.scq, 1, &wc) == 0 && b.buf[0] == 0);
	CHECK(ibv_query_qp(tgt, &qa, IBV_QP_STATE, &init) == 0 && qa.qp_state == IBV_QPS_ERR);
	CHECK_RET(ibv_destroy_qp(ini), 0);
	CHECK_RET(ibv_destroy_qp(tgt), 0);
	CHECK_RET(ibv_destroy_srq(fs), 0);
	CHECK_RET(ibv_close_xrcd(other), 0);
}

static void case_open_qp(void)
{
	struct ibv_qp_open_attr oa = {0};
	struct ibv_qp *ini = x_ini(a.ctx, a.pd, a.scq, 4, 0), *tgt = x_tgt(b.ctx, b.xrcd), *h;
	struct ibv_context *ctx3 = t_open_dev();
	union ibv_gid ag = a.gid;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;
	uint32_t tgt_qpn;

	t_case("ibv_open_qp: rules; an opened TGT QP outlives its creator's destroy");
	if (!CHECK(ini && tgt && ctx3))
		return;
	tgt_qpn = tgt->qp_num;
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE |
		       IBV_QP_OPEN_ATTR_RESERVED;
	oa.qp_num = tgt_qpn;
	oa.xrcd = b.xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	CHECK_ERRNO_PTR(ibv_open_qp(b.ctx, &oa), EOPNOTSUPP);
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD;
	CHECK_ERRNO_PTR(ibv_open_qp(b.ctx, &oa), EINVAL);
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE |
		       IBV_QP_OPEN_ATTR_CONTEXT;
	CHECK_ERRNO_PTR(ibv_open_qp(ctx3, &oa), EINVAL); /* b.xrcd is not ctx3's */
	oa.qp_type = IBV_QPT_RC;
	CHECK_ERRNO_PTR(ibv_open_qp(b.ctx, &oa), EINVAL);
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.qp_num = ini->qp_num; /* not a TGT QP */
	CHECK_ERRNO_PTR(ibv_open_qp(b.ctx, &oa), EINVAL);
	oa.qp_num = tgt_qpn;
	oa.qp_context = &oa;
	h = ibv_open_qp(b.ctx, &oa);
	if (!CHECK_MSG(h, "ibv_open_qp: %s", t_errname(errno)))
		return;
	CHECK(h != tgt && h->qp_num == tgt_qpn && h->qp_type == IBV_QPT_XRC_RECV &&
	      h->qp_context == &oa && h->context == b.ctx);
	/* the handle moves and reports the QP */
	CHECK(t_qp_init(ini, 0) == 0 && t_qp_init(h, 0) == 0);
	CHECK(x_tgt_rts(h, ini->qp_num, &ag, 3) == 0 && x_ini_rts(ini, tgt_qpn, &b.gid, 3) == 0);
	CHECK(ibv_query_qp(tgt, &qa, IBV_QP_STATE, &init) == 0 && qa.qp_state == IBV_QPS_RTS);
	/* the creator's destroy leaves the QP to the other handle */
	CHECK_RET(ibv_destroy_qp(tgt), 0);
	t_fill(a.buf, 200, 4);
	CHECK(x_recv(&b, b.srq, 33, 0, 4096) == 0);
	CHECK(x_post_on(ini, &a, IBV_WR_SEND, 35, 0, 200, b.srqn, 0, 0, 0) == 0);
	if (!wait_wc(a.scq, &wc, IBV_WC_SUCCESS, "send through the opened QP"))
		CHECK(wc.wr_id == 35);
	if (!wait_wc(b.rcq, &wc, IBV_WC_SUCCESS, "recv through the opened QP"))
		CHECK(wc.wr_id == 33 && wc.qp_num == tgt_qpn && wc.byte_len == 200);
	/* an error of the QP raises no event for the creator's destroyed handle */
	CHECK(x_post_on(ini, &a, IBV_WR_SEND, 36, 0, 8, 0, 0, 0, 0) == 0);
	CHECK(wait_wc(a.scq, &wc, IBV_WC_REM_INV_REQ_ERR, "send to SRQ 0") == 0);
	CHECK(ibv_query_qp(h, &qa, IBV_QP_STATE, &init) == 0 && qa.qp_state == IBV_QPS_ERR);
	{
		struct pollfd pfd = {.fd = b.ctx->async_fd, .events = POLLIN};

		CHECK_MSG(poll(&pfd, 1, 100) == 0, "an async event for a destroyed handle");
	}
	CHECK_RET(ibv_destroy_qp(h), 0);
	/* gone with its last handle */
	oa.qp_num = tgt_qpn;
	CHECK_ERRNO_PTR(ibv_open_qp(b.ctx, &oa), EINVAL);
	CHECK_RET(ibv_destroy_qp(ini), 0);
	ibv_close_device(ctx3);
}

int main(void)
{
	struct x_addr aa, ba;
	struct ibv_wc wc;

	t_start("api_xrc");
	if (x_side_init(&a, NULL, BUF) || x_side_init(&b, NULL, BUF))
		return t_finish();
	aa = x_addr_of(&a);
	ba = x_addr_of(&b);
	if (x_tgt_rts(b.tgt, aa.ini, &aa.gid, 0xfffff0) ||
	    x_ini_rts(a.ini, ba.tgt, &ba.gid, 0xfffff0))
		return t_finish();
	case_xrcd();
	case_srq();
	case_qp_rules();
	case_modify();
	case_traffic();
	case_wr_api();
	case_open_qp();
	case_foreign_srq();
	while (ibv_poll_cq(a.scq, 1, &wc) > 0 || ibv_poll_cq(b.rcq, 1, &wc) > 0)
		;
	x_side_destroy(&a, true);
	x_side_destroy(&b, true);
	return t_finish();
}

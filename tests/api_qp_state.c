/* SPDX-License-Identifier: MIT */
/*
 * api_qp_state: ibv_modify_qp's state machine for RC, UC and UD QPs.
 *
 * The oracle is the IBTA transition table (the same facts as Linux's
 * ib_modify_qp_is_ok), written out below independently of the device:
 * every legal transition succeeds with exactly its required mask and with
 * required | optional; dropping any required bit or adding any bit
 * outside required | optional gives EINVAL and changes nothing; illegal
 * transitions give EINVAL; without IBV_QP_STATE the QP stays put with
 * the cur->cur optional set; IBV_QP_CUR_STATE must match. Value ranges
 * (access flags have none: any bits are accepted, as with rdma-core),
 * ERR and RESET from every state, the attributes ibv_query_qp reports,
 * and IBV_EVENT_SQ_DRAINED with ibv_destroy_qp waiting for its ack.
 */
/* test: label=mt */
#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "qp_util.h"

#define S(x) IBV_QPS_##x
#define B(x) IBV_QP_##x

static struct q_env env;

struct legal {
	enum ibv_qp_state from, to;
	int rc_req, rc_opt, ud_req, ud_opt, uc_req, uc_opt;
};

#define RTS_OPT_RC                                                                                 \
	(B(CUR_STATE) | B(ACCESS_FLAGS) | B(ALT_PATH) | B(PATH_MIG_STATE) | B(MIN_RNR_TIMER))
#define RTS_OPT_UD (B(CUR_STATE) | B(QKEY))
#define RTS_OPT_UC (B(CUR_STATE) | B(ACCESS_FLAGS) | B(ALT_PATH) | B(PATH_MIG_STATE))

/* The legal transitions the API can reach (SQE is entered only by the device). */
static const struct legal legal[] = {
	{S(RESET), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(RESET), S(INIT), B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS), 0,
	 B(PKEY_INDEX) | B(PORT) | B(QKEY), 0, B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS), 0},
	{S(RESET), S(ERR), 0, 0, 0, 0, 0, 0},
	{S(INIT), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(INIT), S(INIT), 0, B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS), 0,
	 B(PKEY_INDEX) | B(PORT) | B(QKEY), 0, B(PKEY_INDEX) | B(PORT) | B(ACCESS_FLAGS)},
	{S(INIT), S(RTR),
	 B(AV) | B(PATH_MTU) | B(DEST_QPN) | B(RQ_PSN) | B(MAX_DEST_RD_ATOMIC) | B(MIN_RNR_TIMER),
	 B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX), 0, B(PKEY_INDEX) | B(QKEY),
	 B(AV) | B(PATH_MTU) | B(DEST_QPN) | B(RQ_PSN),
	 B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX)},
	{S(INIT), S(ERR), 0, 0, 0, 0, 0, 0},
	{S(RTR), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(RTR), S(RTS), B(SQ_PSN) | B(MAX_QP_RD_ATOMIC) | B(RETRY_CNT) | B(RNR_RETRY) | B(TIMEOUT),
	 B(CUR_STATE) | B(ALT_PATH) | B(ACCESS_FLAGS) | B(MIN_RNR_TIMER) | B(PATH_MIG_STATE),
	 B(SQ_PSN), RTS_OPT_UD, B(SQ_PSN), RTS_OPT_UC},
	{S(RTR), S(ERR), 0, 0, 0, 0, 0, 0},
	{S(RTS), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(RTS), S(RTS), 0, RTS_OPT_RC, 0, RTS_OPT_UD, 0, RTS_OPT_UC},
	{S(RTS), S(SQD), 0, B(EN_SQD_ASYNC_NOTIFY), 0, B(EN_SQD_ASYNC_NOTIFY), 0,
	 B(EN_SQD_ASYNC_NOTIFY)},
	{S(RTS), S(ERR), 0, 0, 0, 0, 0, 0},
	{S(SQD), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(SQD), S(RTS), 0, RTS_OPT_RC, 0, RTS_OPT_UD, 0, RTS_OPT_UC},
	{S(SQD), S(SQD), 0,
	 B(PORT) | B(AV) | B(TIMEOUT) | B(RETRY_CNT) | B(RNR_RETRY) | B(MAX_QP_RD_ATOMIC) |
		 B(MAX_DEST_RD_ATOMIC) | B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX) |
		 B(MIN_RNR_TIMER) | B(PATH_MIG_STATE),
	 0, B(PKEY_INDEX) | B(QKEY), 0,
	 B(AV) | B(ALT_PATH) | B(ACCESS_FLAGS) | B(PKEY_INDEX) | B(PATH_MIG_STATE)},
	{S(SQD), S(ERR), 0, 0, 0, 0, 0, 0},
	{S(ERR), S(RESET), 0, 0, 0, 0, 0, 0},
	{S(ERR), S(ERR), 0, 0, 0, 0, 0, 0},
};

static const char *sname(enum ibv_qp_state s)
{
	static const char *const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};

	return (unsigned int)s < Q_ARRAY(n) ? n[s] : "?";
}

/* A fresh QP of `type` in state `st` (RESET .. RTS, SQD, ERR), or NULL. */
static struct ibv_qp *qp_in(enum ibv_qp_type type, enum ibv_qp_state st)
{
	struct ibv_qp *qp = q_create(&env, type);
	struct ibv_qp_attr a;
	int ret = 0;

	if (!qp)
		return NULL;
	memset(&a, 0, sizeof(a));
	if (st == S(SQD)) {
		ret = q_bring_up(&env, qp, S(RTS), 0x42);
		a.qp_state = S(SQD);
		if (!ret)
			ret = ibv_modify_qp(qp, &a, B(STATE));
	} else if (st == S(ERR)) {
		a.qp_state = S(ERR);
		ret = ibv_modify_qp(qp, &a, B(STATE));
	} else {
		ret = q_bring_up(&env, qp, st, 0x42);
	}
	if (ret || q_state(qp) != (int)st) {
		printf("# could not bring a QP to %s: %s\n", sname(st), t_errname(ret));
		ibv_destroy_qp(qp);
		return NULL;
	}
	return qp;
}

/* Contract: one legal transition for one type, every mask variation. */
static void one_transition(enum ibv_qp_type type, const struct legal *l)
{
	bool rc = type == IBV_QPT_RC, uc = type == IBV_QPT_UC;
	int req = rc ? l->rc_req : uc ? l->uc_req : l->ud_req;
	int opt = rc ? l->rc_opt : uc ? l->uc_opt : l->ud_opt;
	const char *tn = rc ? "RC" : uc ? "UC" : "UD";
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	int bit, st = B(STATE);

	qp = qp_in(type, l->from);
	if (!CHECK_MSG(qp, "%s %s->%s: no QP", tn, sname(l->from), sname(l->to)))
		return;
	a = q_attr(&env, l->to, 0x42);
	a.cur_qp_state = l->from;
	/* each required bit dropped */
	for (bit = 1; bit <= 20; bit++) {
		if (!(req & (1 << bit)))
			continue;
		CHECK_MSG(ibv_modify_qp(qp, &a, st | (req & ~(1 << bit))) == EINVAL,
			  "%s %s->%s without bit %d: want EINVAL", tn, sname(l->from), sname(l->to),
			  bit);
	}
	/* each bit outside required | optional added */
	for (bit = 1; bit <= 20; bit++) {
		if ((req | opt) & (1 << bit))
			continue;
		CHECK_MSG(ibv_modify_qp(qp, &a, st | req | (1 << bit)) == EINVAL,
			  "%s %s->%s with extra bit %d: want EINVAL", tn, sname(l->from),
			  sname(l->to), bit);
	}
	CHECK_MSG(q_state(qp) == (int)l->from, "%s->%s: failures changed the state", sname(l->from),
		  sname(l->to));
	/* exactly the required mask */
	CHECK_MSG(ibv_modify_qp(qp, &a, st | req) == 0, "%s %s->%s with the required mask", tn,
		  sname(l->from), sname(l->to));
	CHECK_MSG(q_state(qp) == (int)l->to && qp->state == l->to, "%s->%s: state after",
		  sname(l->from), sname(l->to));
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* required | optional, on a fresh QP */
	if (!opt)
		return;
	qp = qp_in(type, l->from);
	if (!CHECK(qp))
		return;
	CHECK_MSG(ibv_modify_qp(qp, &a, st | req | opt) == 0, "%s %s->%s with every optional bit",
		  tn, sname(l->from), sname(l->to));
	CHECK_EQ_INT(q_state(qp), l->to);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_legal(enum ibv_qp_type type)
{
	size_t i;

	t_case(type == IBV_QPT_RC ? "RC: every legal transition, every mask" :
	       type == IBV_QPT_UC ? "UC: every legal transition, every mask" :
				    "UD: every legal transition, every mask");
	for (i = 0; i < Q_ARRAY(legal); i++)
		one_transition(type, &legal[i]);
}

/* True if from->to appears in the legal list. */
static bool is_legal(enum ibv_qp_state from, enum ibv_qp_state to)
{
	size_t i;

	for (i = 0; i < Q_ARRAY(legal); i++)
		if (legal[i].from == from && legal[i].to == to)
			return true;
	return false;
}

static void test_illegal(enum ibv_qp_type type)
{
	static const enum ibv_qp_state reach[] = {S(RESET), S(INIT), S(RTR),
						  S(RTS),   S(SQD),  S(ERR)};
	size_t f;
	int to, n = 0;

	t_case(type == IBV_QPT_RC ? "RC: illegal transitions" :
	       type == IBV_QPT_UC ? "UC: illegal transitions" :
				    "UD: illegal transitions");
	for (f = 0; f < Q_ARRAY(reach); f++) {
		for (to = S(RESET); to <= S(ERR) + 2; to++) {
			struct ibv_qp_attr a;
			struct ibv_qp *qp;
			int masks[2], m;

			if (to <= S(ERR) && is_legal(reach[f], (enum ibv_qp_state)to))
				continue;
			qp = qp_in(type, reach[f]);
			if (!CHECK(qp))
				return;
			a = q_attr(&env, (enum ibv_qp_state)to, 0x42);
			/* the bare state, and every bit a forward step could need */
			masks[0] = B(STATE);
			masks[1] = B(STATE) | q_required(type, S(RESET), S(INIT)) |
				   q_required(type, S(INIT), S(RTR)) |
				   q_required(type, S(RTR), S(RTS));
			for (m = 0; m < 2; m++)
				CHECK_MSG(ibv_modify_qp(qp, &a, masks[m]) == EINVAL,
					  "%s->%s (mask %#x): want EINVAL", sname(reach[f]),
					  sname((enum ibv_qp_state)to), masks[m]);
			CHECK_EQ_INT(q_state(qp), reach[f]);
			CHECK_RET(ibv_destroy_qp(qp), 0);
			n++;
		}
	}
	CHECK(n >= 20);
}

static void test_no_state_and_cur_state(void)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	t_case("no IBV_QP_STATE; IBV_QP_CUR_STATE");
	qp = q_create(&env, IBV_QPT_RC);
	if (!CHECK(qp))
		return;
	a = q_attr(&env, S(RESET), 0x42);
	CHECK_RET(ibv_modify_qp(qp, &a, 0), 0); /* RESET -> RESET */
	CHECK_RET(ibv_modify_qp(qp, &a, B(PKEY_INDEX)), EINVAL);
	CHECK_RET(q_bring_up(&env, qp, S(INIT), 0x42), 0);
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	CHECK_RET(ibv_modify_qp(qp, &a, B(ACCESS_FLAGS)), 0); /* INIT -> INIT */
	CHECK_RET(ibv_modify_qp(qp, &a, B(QKEY)), EINVAL); /* RC has no qkey */
	CHECK_RET(ibv_modify_qp(qp, &a, B(AV)), EINVAL);
	CHECK_EQ_INT(q_state(qp), S(INIT));
	CHECK_RET(q_step(&env, qp, S(INIT), S(RTR), 0x42), 0);
	CHECK_RET(ibv_modify_qp(qp, &a, 0), EINVAL); /* RTR -> RTR is not a transition */
	CHECK_RET(ibv_modify_qp(qp, &a, B(MIN_RNR_TIMER)), EINVAL);

	/* CUR_STATE must match, and is allowed only where the table says so */
	a = q_attr(&env, S(RTS), 0x42);
	a.cur_qp_state = S(INIT);
	CHECK_RET(ibv_modify_qp(qp, &a,
				B(STATE) | B(CUR_STATE) | q_required(IBV_QPT_RC, S(RTR), S(RTS))),
		  EINVAL);
	a.cur_qp_state = (enum ibv_qp_state)99;
	CHECK_RET(ibv_modify_qp(qp, &a,
				B(STATE) | B(CUR_STATE) | q_required(IBV_QPT_RC, S(RTR), S(RTS))),
		  EINVAL);
	CHECK_EQ_INT(q_state(qp), S(RTR));
	a.cur_qp_state = S(RTR);
	CHECK_RET(ibv_modify_qp(qp, &a,
				B(STATE) | B(CUR_STATE) | q_required(IBV_QPT_RC, S(RTR), S(RTS))),
		  0);
	CHECK_EQ_INT(q_state(qp), S(RTS));
	a.min_rnr_timer = 3;
	a.cur_qp_state = S(RTS);
	CHECK_RET(ibv_modify_qp(qp, &a, B(MIN_RNR_TIMER) | B(CUR_STATE)), 0); /* RTS -> RTS */
	CHECK_RET(ibv_modify_qp(qp, &a, B(SQ_PSN)), EINVAL);
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* CUR_STATE on RESET -> INIT is outside the table even when it matches */
	qp = q_create(&env, IBV_QPT_UD);
	if (!CHECK(qp))
		return;
	a = q_attr(&env, S(INIT), 0);
	a.cur_qp_state = S(RESET);
	CHECK_RET(
		ibv_modify_qp(qp, &a,
			      B(STATE) | B(CUR_STATE) | q_required(IBV_QPT_UD, S(RESET), S(INIT))),
		EINVAL);
	CHECK_RET(q_bring_up(&env, qp, S(RTS), 0), 0);
	a.qkey = 0x777;
	CHECK_RET(ibv_modify_qp(qp, &a, B(QKEY)), 0); /* UD RTS -> RTS */
	{
		struct ibv_qp_attr q;
		struct ibv_qp_init_attr i;

		CHECK_RET(ibv_query_qp(qp, &q, B(QKEY), &i), 0);
		CHECK_EQ_INT(q.qkey, 0x777);
	}
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

/* Modify `qp` with `a` and `mask` expecting `want`; the line names the case. */
#define EXPECT(qp, a, mask, want)                                                                  \
	CHECK_MSG(ibv_modify_qp((qp), &(a), (mask)) == (want), "line %d: want %s", __LINE__,       \
		  t_errname(want))

static void test_values(void)
{
	const int init_m = B(STATE) | q_required(IBV_QPT_RC, S(RESET), S(INIT));
	const int rtr_m = B(STATE) | q_required(IBV_QPT_RC, S(INIT), S(RTR));
	const int rts_m = B(STATE) | q_required(IBV_QPT_RC, S(RTR), S(RTS));
	struct ibv_qp_init_attr i;
	struct ibv_qp_attr a, q;
	struct ibv_qp *qp;

	t_case("attribute values out of range: EINVAL, nothing changes");
	qp = q_create(&env, IBV_QPT_RC);
	if (!CHECK(qp))
		return;
	a = q_attr(&env, S(INIT), 0x42);
	a.port_num = 2;
	EXPECT(qp, a, init_m, EINVAL);
	a.port_num = 0;
	EXPECT(qp, a, init_m, EINVAL);
	a = q_attr(&env, S(INIT), 0x42);
	a.pkey_index = 1;
	EXPECT(qp, a, init_m, EINVAL);
	CHECK_EQ_INT(q_state(qp), S(RESET));
	/* access flags are not range-checked (rdma-core and the kernel pass them; drivers ignore
	 * what they do not use) */
	a = q_attr(&env, S(INIT), 0x42);
	a.qp_access_flags =
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING;
	EXPECT(qp, a, init_m, 0);

	a = q_attr(&env, S(RTR), 0x42);
	a.path_mtu = (enum ibv_mtu)0;
	EXPECT(qp, a, rtr_m, EINVAL);
	a.path_mtu = (enum ibv_mtu)6;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.dest_qp_num = 1u << 24;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.min_rnr_timer = 32;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.max_dest_rd_atomic = 129;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.ah_attr.is_global = 0;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.ah_attr.port_num = 2;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.ah_attr.grh.sgid_index = 1;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	memset(&a.ah_attr.grh.dgid, 0, sizeof(a.ah_attr.grh.dgid));
	a.ah_attr.grh.dgid.raw[0] = 0xfe; /* link-local IPv6: not RoCE v2 over IPv4 */
	a.ah_attr.grh.dgid.raw[1] = 0x80;
	EXPECT(qp, a, rtr_m, EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.alt_port_num = 2;
	EXPECT(qp, a, rtr_m | B(ALT_PATH), EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.alt_timeout = 32;
	EXPECT(qp, a, rtr_m | B(ALT_PATH), EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.alt_pkey_index = 1;
	EXPECT(qp, a, rtr_m | B(ALT_PATH), EINVAL);
	a = q_attr(&env, S(RTR), 0x42);
	a.alt_ah_attr.is_global = 0;
	EXPECT(qp, a, rtr_m | B(ALT_PATH), EINVAL);
	/* bits no modify-QP command knows */
	a = q_attr(&env, S(RTR), 0x42);
	EXPECT(qp, a, rtr_m | (1 << 21), EOPNOTSUPP);
	EXPECT(qp, a, rtr_m | B(RATE_LIMIT), EOPNOTSUPP);
	CHECK_RET(ibv_modify_qp(qp, NULL, rtr_m), EINVAL);
	/* nothing of the failed requests stuck */
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE) | B(DEST_QPN), &i), 0);
	CHECK_EQ_INT(q.qp_state, S(INIT));
	CHECK_EQ_INT(q.dest_qp_num, 0);
	CHECK_EQ_INT(q.rq_psn, 0);
	/* the largest values are fine */
	a = q_attr(&env, S(RTR), 0xffffff);
	a.path_mtu = IBV_MTU_4096;
	a.min_rnr_timer = 31;
	a.max_dest_rd_atomic = 128;
	a.rq_psn = 0xff000001; /* taken modulo 2^24 */
	EXPECT(qp, a, rtr_m, 0);

	a = q_attr(&env, S(RTS), 0);
	a.timeout = 32;
	EXPECT(qp, a, rts_m, EINVAL);
	a = q_attr(&env, S(RTS), 0);
	a.retry_cnt = 8;
	EXPECT(qp, a, rts_m, EINVAL);
	a = q_attr(&env, S(RTS), 0);
	a.rnr_retry = 8;
	EXPECT(qp, a, rts_m, EINVAL);
	a = q_attr(&env, S(RTS), 0);
	a.max_rd_atomic = 129;
	EXPECT(qp, a, rts_m, EINVAL);
	a = q_attr(&env, S(RTS), 0);
	a.path_mig_state = (enum ibv_mig_state)3;
	EXPECT(qp, a, rts_m | B(PATH_MIG_STATE), EINVAL);
	CHECK_EQ_INT(q_state(qp), S(RTR));
	a = q_attr(&env, S(RTS), 0);
	a.timeout = 31;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 128;
	a.sq_psn = 0xabcdef12;
	EXPECT(qp, a, rts_m, 0);
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE), &i), 0);
	CHECK_EQ_INT(q.qp_state, S(RTS));
	CHECK_EQ_INT(q.dest_qp_num, 0xffffff);
	CHECK_EQ_INT(q.path_mtu, IBV_MTU_4096);
	CHECK_EQ_INT(q.rq_psn, 0x000001);
	CHECK_EQ_INT(q.sq_psn, 0xcdef12);
	CHECK_EQ_INT(q.min_rnr_timer, 31);
	CHECK_EQ_INT(q.max_dest_rd_atomic, 128);
	CHECK_EQ_INT(q.max_rd_atomic, 128);
	CHECK_EQ_INT(q.timeout, 31);
	CHECK_EQ_INT(q.retry_cnt, 7);
	CHECK_EQ_INT(q.rnr_retry, 7);
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_query_attrs(void)
{
	struct ibv_qp_init_attr i;
	struct ibv_qp_attr a, q;
	struct ibv_qp *qp;

	t_case("query_qp reports what modify_qp set");
	qp = q_create(&env, IBV_QPT_RC);
	if (!CHECK(qp))
		return;
	a = q_attr(&env, S(INIT), 0);
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | q_required(IBV_QPT_RC, S(RESET), S(INIT))), 0);
	a = q_attr(&env, S(RTR), 0x1234);
	a.path_mtu = IBV_MTU_2048;
	a.ah_attr.grh.hop_limit = 9;
	a.ah_attr.grh.traffic_class = 3;
	a.ah_attr.sl = 2;
	CHECK_RET(ibv_modify_qp(qp, &a,
				B(STATE) | B(ALT_PATH) | q_required(IBV_QPT_RC, S(INIT), S(RTR))),
		  0);
	a = q_attr(&env, S(RTS), 0);
	a.path_mig_state = IBV_MIG_REARM;
	CHECK_RET(ibv_modify_qp(qp, &a,
				B(STATE) | B(PATH_MIG_STATE) |
					q_required(IBV_QPT_RC, S(RTR), S(RTS))),
		  0);
	memset(&q, 0x5a, sizeof(q));
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE), &i), 0);
	CHECK_EQ_INT(q.qp_state, S(RTS));
	CHECK_EQ_INT(q.cur_qp_state, S(RTS));
	CHECK_EQ_INT(q.qp_access_flags, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	CHECK_EQ_INT(q.pkey_index, 0);
	CHECK_EQ_INT(q.port_num, 1);
	CHECK_EQ_INT(q.path_mtu, IBV_MTU_2048);
	CHECK_EQ_INT(q.dest_qp_num, 0x1234);
	CHECK_EQ_INT(q.rq_psn, 0x123456);
	CHECK_EQ_INT(q.sq_psn, 0x654321);
	CHECK_EQ_INT(q.max_dest_rd_atomic, 4);
	CHECK_EQ_INT(q.max_rd_atomic, 4);
	CHECK_EQ_INT(q.min_rnr_timer, 12);
	CHECK_EQ_INT(q.timeout, 14);
	CHECK_EQ_INT(q.retry_cnt, 7);
	CHECK_EQ_INT(q.rnr_retry, 7);
	CHECK_EQ_INT(q.ah_attr.is_global, 1);
	CHECK_EQ_INT(q.ah_attr.port_num, 1);
	CHECK_EQ_INT(q.ah_attr.grh.hop_limit, 9);
	CHECK_EQ_INT(q.ah_attr.grh.traffic_class, 3);
	CHECK_EQ_INT(q.ah_attr.sl, 2);
	CHECK(!memcmp(&q.ah_attr.grh.dgid, &env.gid, sizeof(env.gid)));
	CHECK_EQ_INT(q.alt_port_num, 1);
	CHECK_EQ_INT(q.alt_timeout, 14);
	CHECK_EQ_INT(q.alt_ah_attr.is_global, 1);
	CHECK_EQ_INT(q.path_mig_state, IBV_MIG_REARM);
	CHECK_EQ_INT(q.sq_draining, 0);
	CHECK_EQ_INT(q.en_sqd_async_notify, 0);

	/* RESET forgets them */
	a.qp_state = S(RESET);
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE)), 0);
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE), &i), 0);
	CHECK_EQ_INT(q.qp_state, S(RESET));
	CHECK_EQ_INT(q.dest_qp_num, 0);
	CHECK_EQ_INT(q.sq_psn, 0);
	CHECK_EQ_INT(q.qp_access_flags, 0);
	CHECK_EQ_INT(q.ah_attr.is_global, 0);
	/* and the QP comes up again */
	CHECK_RET(q_bring_up(&env, qp, S(RTS), 0x99), 0);
	CHECK_EQ_INT(q_state(qp), S(RTS));
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* UD: qkey, and the port's MTU as its path MTU */
	qp = q_create(&env, IBV_QPT_UD);
	if (!CHECK(qp))
		return;
	CHECK_RET(q_bring_up(&env, qp, S(RTS), 0), 0);
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE) | B(QKEY), &i), 0);
	CHECK_EQ_INT(q.qkey, 0x11111111);
	CHECK_EQ_INT(q.sq_psn, 0x654321);
	{
		struct ibv_port_attr pa;

		if (CHECK_RET(ibv_query_port(env.ctx, 1, &pa), 0))
			CHECK_EQ_INT(q.path_mtu, pa.active_mtu);
	}
	CHECK_RET(ibv_destroy_qp(qp), 0);
}

static void test_err_reset_everywhere(void)
{
	static const enum ibv_qp_state reach[] = {S(RESET), S(INIT), S(RTR),
						  S(RTS),   S(SQD),  S(ERR)};
	static const enum ibv_qp_type types[] = {IBV_QPT_RC, IBV_QPT_UD, IBV_QPT_UC};
	size_t f, t;
	int to;

	t_case("ERR and RESET from every state");
	for (t = 0; t < Q_ARRAY(types); t++)
		for (f = 0; f < Q_ARRAY(reach); f++)
			for (to = S(RESET); to <= S(ERR); to += S(ERR) - S(RESET)) {
				struct ibv_qp *qp = qp_in(types[t], reach[f]);
				struct ibv_qp_attr a;

				if (!CHECK(qp))
					return;
				a = q_attr(&env, (enum ibv_qp_state)to, 0x42);
				/* nothing but the state is allowed */
				CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | B(PKEY_INDEX)), EINVAL);
				CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | B(QKEY)), EINVAL);
				CHECK_RET(ibv_modify_qp(qp, &a, B(STATE)), 0);
				CHECK_EQ_INT(q_state(qp), to);
				CHECK_EQ_INT(qp->state, to);
				CHECK_RET(ibv_destroy_qp(qp), 0);
			}
}

/* Wait up to `ms` for an async event; 1 with *ev filled, 0 on timeout. */
static int wait_event(int ms, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = env.ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, ms) != 1)
		return 0;
	return ibv_get_async_event(env.ctx, ev) == 0;
}

struct destroyer {
	struct ibv_qp *qp;
	int ret;
	atomic_bool done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	d->ret = ibv_destroy_qp(d->qp);
	atomic_store(&d->done, true);
	return NULL;
}

static void test_sqd(void)
{
	struct ibv_async_event ev;
	struct ibv_qp_init_attr i;
	struct ibv_qp_attr a, q;
	struct destroyer d;
	pthread_t th;
	struct ibv_qp *qp;
	int flags;

	t_case("SQD: SQ_DRAINED when asked; destroy waits for its ack");
	qp = qp_in(IBV_QPT_RC, S(RTS));
	if (!CHECK(qp))
		return;
	/* not asked: no event */
	a = q_attr(&env, S(SQD), 0x42);
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE)), 0);
	CHECK_EQ_INT(wait_event(50, &ev), 0);
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE), &i), 0);
	CHECK_EQ_INT(q.qp_state, S(SQD));
	CHECK_EQ_INT(q.sq_draining, 0);
	/* SQD -> SQD with the path attributes */
	a = q_attr(&env, S(SQD), 0x42);
	a.timeout = 20;
	a.retry_cnt = 3;
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | B(TIMEOUT) | B(RETRY_CNT) | B(AV)), 0);
	CHECK_RET(ibv_query_qp(qp, &q, B(TIMEOUT), &i), 0);
	CHECK_EQ_INT(q.timeout, 20);
	CHECK_EQ_INT(q.retry_cnt, 3);
	a.qp_state = S(RTS);
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE)), 0);

	/* asked: the event names the QP */
	a.qp_state = S(SQD);
	a.en_sqd_async_notify = 1;
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | B(EN_SQD_ASYNC_NOTIFY)), 0);
	if (!CHECK(wait_event(2000, &ev))) {
		ibv_destroy_qp(qp);
		return;
	}
	CHECK_EQ_INT(ev.event_type, IBV_EVENT_SQ_DRAINED);
	CHECK(ev.element.qp == qp);
	CHECK_RET(ibv_query_qp(qp, &q, B(STATE), &i), 0);
	CHECK_EQ_INT(q.en_sqd_async_notify, 1);

	/* destroy blocks until the event is acknowledged */
	d.qp = qp;
	d.ret = -1;
	atomic_init(&d.done, false);
	if (!CHECK_EQ_INT(pthread_create(&th, NULL, destroy_thread, &d), 0)) {
		ibv_ack_async_event(&ev);
		ibv_destroy_qp(qp);
		return;
	}
	usleep(100 * 1000);
	CHECK_MSG(!atomic_load(&d.done), "destroy returned before the event was acknowledged");
	ibv_ack_async_event(&ev);
	pthread_join(th, NULL);
	CHECK(atomic_load(&d.done));
	CHECK_EQ_INT(d.ret, 0);

	/* an event never read does not hold destroy back: it is dropped */
	qp = qp_in(IBV_QPT_RC, S(RTS));
	if (!CHECK(qp))
		return;
	a.qp_state = S(SQD);
	a.en_sqd_async_notify = 1;
	CHECK_RET(ibv_modify_qp(qp, &a, B(STATE) | B(EN_SQD_ASYNC_NOTIFY)), 0);
	CHECK_RET(ibv_destroy_qp(qp), 0); /* a hang here is a failure (timeout) */
	flags = fcntl(env.ctx->async_fd, F_GETFL);
	CHECK_EQ_INT(fcntl(env.ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	errno = 0;
	CHECK_EQ_INT(ibv_get_async_event(env.ctx, &ev), -1);
	CHECK_EQ_INT(errno, EAGAIN);
	CHECK_EQ_INT(fcntl(env.ctx->async_fd, F_SETFL, flags), 0);
}

int main(void)
{
	t_start("api_qp_state");
	q_env_open(&env, 16);
	test_legal(IBV_QPT_RC);
	test_legal(IBV_QPT_UD);
	test_legal(IBV_QPT_UC);
	test_illegal(IBV_QPT_RC);
	test_illegal(IBV_QPT_UD);
	test_illegal(IBV_QPT_UC);
	test_no_state_and_cur_state();
	test_values();
	test_query_attrs();
	test_err_reset_everywhere();
	test_sqd();
	t_case("teardown");
	q_env_close(&env);
	return t_finish();
}

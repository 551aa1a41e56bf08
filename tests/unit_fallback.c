/* SPDX-License-Identifier: MIT */
/*
 * unit_fallback: sv_ops_fill_fallbacks() leaves no NULL slot, every
 * fallback fails the way its slot's convention says, and a slot the
 * device set is never replaced.
 *
 * struct sv_ops is walked as an array of function pointers, so a slot
 * added to core.h is covered by the NULL and keep-set checks at once; the
 * slot count below then also fails until the call checks name the slot.
 */
#include "harness.h"

#include "core/core.h"

typedef void (*any_fn)(void);

#define NSLOTS (sizeof(struct sv_ops) / sizeof(any_fn))

/* The slots called by check_returns(); update when sv_ops grows. */
#define SLOTS_CALLED 67

_Static_assert(sizeof(struct sv_ops) % sizeof(any_fn) == 0,
	       "struct sv_ops must be nothing but function pointers");

static any_fn slot_get(const struct sv_ops *ops, size_t i)
{
	any_fn f;

	memcpy(&f, (const char *)ops + i * sizeof(f), sizeof(f));
	return f;
}

static void slot_set(struct sv_ops *ops, size_t i, any_fn f)
{
	memcpy((char *)ops + i * sizeof(f), &f, sizeof(f));
}

static void marker_a(void)
{
}

static void marker_b(void)
{
}

static int calls;

/* A fallback of the core convention: -EOPNOTSUPP. */
#define CHECK_NEG(call)                                                                            \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		calls++;                                                                           \
		CHECK_MSG(r_ == -EOPNOTSUPP, "%s: want -EOPNOTSUPP, got %d", #call, r_);           \
	} while (0)

/* A data-path fallback of the ABI convention: positive EOPNOTSUPP. */
#define CHECK_POS(call)                                                                            \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		calls++;                                                                           \
		CHECK_MSG(r_ == EOPNOTSUPP, "%s: want EOPNOTSUPP, got %d", #call, r_);             \
	} while (0)

static void check_returns(const struct sv_ops *o)
{
	struct ibv_qp_ex *qpx = (struct ibv_qp_ex *)(uintptr_t)0x1000;
	struct ibv_send_wr *bad_send = NULL;
	struct ibv_recv_wr *bad_recv = NULL;
	struct ibv_ops_wr *bad_op = NULL;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL;
	int r;

	calls = 0;

	/* device and port */
	CHECK_NEG(o->query_device_ex(NULL, NULL));
	CHECK_NEG(o->query_port(NULL, 1, NULL));
	CHECK_NEG(o->query_gid_ex(NULL, 1, 0, NULL));
	CHECK_NEG(o->query_pkey(NULL, 1, 0, NULL));
	CHECK_NEG(o->query_rt_values(NULL, NULL));
	/* PDs and TDs */
	CHECK_NEG(o->alloc_pd(NULL, &pd));
	CHECK_NEG(o->dealloc_pd(NULL));
	CHECK_NEG(o->alloc_parent_domain(NULL, NULL, &pd));
	CHECK_NEG(o->alloc_td(NULL, NULL, NULL));
	CHECK_NEG(o->dealloc_td(NULL));
	/* MRs */
	CHECK_NEG(o->reg_mr(NULL, NULL, false, &mr));
	CHECK_NEG(o->rereg_mr(NULL, 0, NULL, NULL, 0, 0));
	CHECK_NEG(o->dereg_mr(NULL));
	CHECK_NEG(o->alloc_null_mr(NULL, &mr));
	CHECK_NEG(o->advise_mr(NULL, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, NULL, 0));
	/* buffers and DMA handles */
	CHECK_NEG(o->alloc_buf(NULL, 4096, NULL, NULL));
	o->free_buf(NULL); /* void: must simply return */
	calls++;
	CHECK_NEG(o->alloc_dmah(NULL, NULL, NULL));
	CHECK_NEG(o->dealloc_dmah(NULL));
	/* MWs and device memory */
	CHECK_NEG(o->alloc_mw(NULL, IBV_MW_TYPE_1, NULL));
	CHECK_NEG(o->dealloc_mw(NULL));
	CHECK_NEG(o->alloc_dm(NULL, NULL, NULL));
	CHECK_NEG(o->free_dm(NULL));
	CHECK_NEG(o->reg_dm_mr(NULL, NULL, 0, 0, 0, &mr));
	CHECK_NEG(o->dm_export_dmabuf_fd(NULL));
	/* CQs */
	CHECK_NEG(o->create_cq_ex(NULL, NULL, NULL));
	CHECK_NEG(o->destroy_cq(NULL));
	CHECK_NEG(o->resize_cq(NULL, 1));
	CHECK_NEG(o->modify_cq(NULL, NULL));
	/* QPs */
	CHECK_NEG(o->create_qp_ex(NULL, NULL, NULL));
	CHECK_NEG(o->open_qp(NULL, NULL, NULL));
	CHECK_NEG(o->modify_qp(NULL, NULL, 0));
	CHECK_NEG(o->query_qp(NULL, NULL, 0, NULL));
	CHECK_NEG(o->destroy_qp(NULL));
	/* qp_to_qp_ex: "not an extended QP" is success with a NULL result */
	r = o->qp_to_qp_ex(NULL, &qpx);
	calls++;
	CHECK_MSG(r == 0 && qpx == NULL, "qp_to_qp_ex: want 0 and NULL, got %d and %p", r,
		  (void *)qpx);
	CHECK_NEG(o->query_ece(NULL, NULL));
	CHECK_NEG(o->set_ece(NULL, NULL));
	CHECK_NEG(o->query_qp_data_in_order(NULL, IBV_WR_SEND, 0));
	CHECK_NEG(o->modify_qp_rate_limit(NULL, NULL));
	CHECK_NEG(o->attach_mcast(NULL, NULL, 0));
	CHECK_NEG(o->detach_mcast(NULL, NULL, 0));
	/* SRQs */
	CHECK_NEG(o->create_srq_ex(NULL, NULL, NULL));
	CHECK_NEG(o->modify_srq(NULL, NULL, 0));
	CHECK_NEG(o->query_srq(NULL, NULL));
	CHECK_NEG(o->destroy_srq(NULL));
	CHECK_NEG(o->get_srq_num(NULL, NULL));
	/* AHs */
	CHECK_NEG(o->create_ah(NULL, NULL, NULL));
	CHECK_NEG(o->destroy_ah(NULL));
	/* XRC, WQs, RSS, flows, counters */
	CHECK_NEG(o->open_xrcd(NULL, NULL, NULL));
	CHECK_NEG(o->close_xrcd(NULL));
	CHECK_NEG(o->create_wq(NULL, NULL, NULL));
	CHECK_NEG(o->modify_wq(NULL, NULL));
	CHECK_NEG(o->destroy_wq(NULL));
	CHECK_NEG(o->create_rwq_ind_table(NULL, NULL, NULL));
	CHECK_NEG(o->destroy_rwq_ind_table(NULL));
	CHECK_NEG(o->create_flow(NULL, NULL, NULL));
	CHECK_NEG(o->destroy_flow(NULL));
	CHECK_NEG(o->create_counters(NULL, NULL, NULL));
	CHECK_NEG(o->destroy_counters(NULL));
	o->close_context(NULL); /* void: must simply return */
	calls++;

	/* data path */
	r = o->poll_cq(NULL, 1, NULL);
	calls++;
	CHECK_MSG(r < 0, "poll_cq: want a negative value, got %d", r);
	CHECK_POS(o->req_notify_cq(NULL, 0));
	CHECK_POS(o->post_send(NULL, NULL, &bad_send));
	CHECK_POS(o->post_recv(NULL, NULL, &bad_recv));
	CHECK_POS(o->post_srq_recv(NULL, NULL, &bad_recv));
	CHECK_POS(o->post_srq_ops(NULL, NULL, &bad_op));
	CHECK_POS(o->bind_mw(NULL, NULL, NULL));

	/* Fallbacks that fail hand out nothing. */
	CHECK(pd == NULL);
	CHECK(mr == NULL);

	CHECK_MSG(calls == SLOTS_CALLED && calls == (int)NSLOTS,
		  "called %d slots, SLOTS_CALLED is %d, struct sv_ops has %zu", calls, SLOTS_CALLED,
		  NSLOTS);
}

int main(void)
{
	struct sv_ops ops, before;
	size_t i, nnull;

	t_start("unit_fallback");

	t_case("no NULL slot after filling a zeroed table");
	CHECK_EQ_INT(sizeof(struct sv_ops) % sizeof(any_fn), 0);
	CHECK(NSLOTS > 0);
	memset(&ops, 0, sizeof(ops));
	for (i = 0, nnull = 0; i < NSLOTS; i++)
		nnull += slot_get(&ops, i) == NULL;
	CHECK_MSG(nnull == NSLOTS, "zeroed table: %zu of %zu slots NULL", nnull, NSLOTS);
	sv_ops_fill_fallbacks(&ops);
	for (i = 0, nnull = 0; i < NSLOTS; i++)
		if (!CHECK_MSG(slot_get(&ops, i) != NULL, "slot %zu (byte offset %zu) is NULL", i,
			       i * sizeof(any_fn)))
			nnull++;

	t_case("fallback return values");
	if (CHECK_MSG(nnull == 0, "not calling through a table with %zu NULL slots", nnull))
		check_returns(&ops);

	t_case("filling twice changes nothing");
	before = ops;
	sv_ops_fill_fallbacks(&ops);
	CHECK(memcmp(&before, &ops, sizeof(ops)) == 0);

	t_case("slots already set are left alone");
	/* every slot set: nothing may change */
	for (i = 0; i < NSLOTS; i++)
		slot_set(&ops, i, i % 2 ? marker_a : marker_b);
	sv_ops_fill_fallbacks(&ops);
	for (i = 0; i < NSLOTS; i++)
		CHECK_MSG(slot_get(&ops, i) == (i % 2 ? marker_a : marker_b),
			  "slot %zu was replaced", i);
	/* every other slot set: those stay, the others get fallbacks */
	memset(&ops, 0, sizeof(ops));
	for (i = 0; i < NSLOTS; i += 2)
		slot_set(&ops, i, marker_a);
	sv_ops_fill_fallbacks(&ops);
	for (i = 0; i < NSLOTS; i++) {
		any_fn f = slot_get(&ops, i);

		if (i % 2 == 0)
			CHECK_MSG(f == marker_a, "set slot %zu was replaced", i);
		else
			CHECK_MSG(f == slot_get(&before, i),
				  "unset slot %zu not given its fallback", i);
	}

	return t_finish();
}

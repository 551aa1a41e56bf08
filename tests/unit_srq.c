/* SPDX-License-Identifier: MIT */
/*
 * unit_srq: the software device's SRQs, white-box.
 *
 * sw_srq_take() (the responder's side) returns the WQEs posted with
 * ibv_post_srq_recv in order with their SGEs and total length, -EAGAIN
 * when empty; the armed limit raises exactly one
 * IBV_EVENT_SRQ_LIMIT_REACHED when the count drops below it and disarms;
 * a resize keeps queued WQEs in order across the ring's wrap-around;
 * destroy is EBUSY while a QP uses the SRQ.
 */
/* test: timeout=60 */
#include "harness.h"

#include <fcntl.h>
#include <stdlib.h>

#include "sw/queue.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static struct ibv_srq *make_srq(uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_init_attr a;

	memset(&a, 0, sizeof(a));
	a.attr.max_wr = max_wr;
	a.attr.max_sge = max_sge;
	return ibv_create_srq(pd, &a);
}

/* Posts one WR with `nsge` SGEs derived from id. */
static int post(struct ibv_srq *srq, uint64_t id, int nsge)
{
	struct ibv_sge sge[4];
	struct ibv_recv_wr wr, *bad = NULL;
	int i;

	for (i = 0; i < nsge && i < 4; i++) {
		sge[i].addr = 0x10000 * (id + 1) + (uint64_t)i * 0x100;
		sge[i].length = (uint32_t)(10 * (id + 1) + (uint64_t)i);
		sge[i].lkey = (uint32_t)(0xa000 + id * 4 + (uint64_t)i);
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* Takes one WQE and checks it against what post(id, nsge) queued. */
static int take_check(struct sw_srq *s, struct sw_recv_wqe *out, uint64_t id, int nsge)
{
	uint32_t len = 0;
	int i, ok;

	memset(out, 0xa5, sw_recv_wqe_size(s->max_sge));
	if (!CHECK_EQ_INT(sw_srq_take(s, out), 0))
		return 0;
	ok = CHECK_EQ_INT(out->wr_id, id);
	ok &= CHECK_EQ_INT(out->num_sge, nsge);
	for (i = 0; i < nsge && i < (int)out->num_sge; i++) {
		ok &= CHECK_EQ_INT(out->sge[i].addr, 0x10000 * (id + 1) + (uint64_t)i * 0x100);
		ok &= CHECK_EQ_INT(out->sge[i].length, 10 * (id + 1) + (uint64_t)i);
		ok &= CHECK_EQ_INT(out->sge[i].lkey, 0xa000 + id * 4 + (uint64_t)i);
		len += out->sge[i].length;
	}
	ok &= CHECK_EQ_INT(out->length, len);
	return ok;
}

static void case_take(void)
{
	struct sw_recv_wqe *out;
	struct ibv_srq *srq;
	struct sw_srq *s;
	uint64_t i;

	t_case("sw_srq_take: order, SGEs, length, empty");
	srq = make_srq(8, 3);
	if (!CHECK(srq != NULL))
		return;
	s = sw_srq(srq);
	out = malloc(sw_recv_wqe_size(s->max_sge));
	if (!CHECK(out != NULL))
		goto done;
	CHECK_EQ_INT(sw_srq_take(s, out), -EAGAIN);
	for (i = 0; i < 8; i++)
		CHECK_RET(post(srq, i, (int)(i % 4)), 0);
	CHECK_RET(post(srq, 99, 1), ENOMEM);
	for (i = 0; i < 5; i++)
		take_check(s, out, i, (int)(i % 4));
	/* refill past the ring's end, then drain */
	for (i = 8; i < 13; i++)
		CHECK_RET(post(srq, i, (int)(i % 4)), 0);
	CHECK_RET(post(srq, 99, 1), ENOMEM);
	for (i = 5; i < 13; i++)
		take_check(s, out, i, (int)(i % 4));
	CHECK_EQ_INT(sw_srq_take(s, out), -EAGAIN);
	free(out);
done:
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void case_limit(void)
{
	struct ibv_async_event ev;
	struct ibv_srq_attr m, q;
	struct sw_recv_wqe *out;
	struct ibv_srq *srq;
	struct sw_srq *s;
	uint64_t i;

	t_case("limit event: once, below the limit, disarms");
	srq = make_srq(16, 1);
	if (!CHECK(srq != NULL))
		return;
	s = sw_srq(srq);
	out = malloc(sw_recv_wqe_size(s->max_sge));
	if (!CHECK(out != NULL))
		goto done;
	for (i = 0; i < 10; i++)
		post(srq, i, 1);
	m.srq_limit = 5;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	/* 10 -> 5 queued: not below the limit yet */
	for (i = 0; i < 5; i++)
		take_check(s, out, i, 1);
	CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), -1);
	CHECK_EQ_INT(errno, EAGAIN);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_EQ_INT(q.srq_limit, 5);
	/* 4 queued: below */
	take_check(s, out, 5, 1);
	if (CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0)) {
		CHECK_EQ_INT(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
		CHECK(ev.element.srq == srq);
		ibv_ack_async_event(&ev);
		CHECK_EQ_INT(srq->events_completed, 1);
	}
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK_EQ_INT(q.srq_limit, 0);
	/* disarmed: no more events */
	take_check(s, out, 6, 1);
	take_check(s, out, 7, 1);
	CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), -1);

	/* re-armed above the count: the next take fires */
	m.srq_limit = 10;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_LIMIT), 0);
	CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), -1); /* arming alone does not */
	take_check(s, out, 8, 1);
	if (CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0)) {
		CHECK_EQ_INT(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
		ibv_ack_async_event(&ev);
	}
	take_check(s, out, 9, 1);
	CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), -1);
	free(out);
done:
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void case_resize(void)
{
	struct ibv_srq_attr m;
	struct sw_recv_wqe *out;
	struct ibv_srq *srq;
	struct sw_srq *s;
	uint64_t i;

	t_case("resize keeps the queued WQEs in order");
	srq = make_srq(4, 2);
	if (!CHECK(srq != NULL))
		return;
	s = sw_srq(srq);
	out = malloc(sw_recv_wqe_size(s->max_sge));
	if (!CHECK(out != NULL))
		goto done;
	for (i = 0; i < 3; i++)
		post(srq, i, 2);
	for (i = 0; i < 3; i++)
		take_check(s, out, i, 2);
	for (i = 3; i < 7; i++) /* wraps around the 4-slot ring */
		CHECK_RET(post(srq, i, 2), 0);
	m.max_wr = 20;
	CHECK_RET(ibv_modify_srq(srq, &m, IBV_SRQ_MAX_WR), 0);
	CHECK_EQ_INT(s->max_wr, m.max_wr);
	for (i = 7; i < 20; i++)
		CHECK_RET(post(srq, i, 2), 0);
	for (i = 3; i < 20; i++)
		take_check(s, out, i, 2);
	CHECK_EQ_INT(sw_srq_take(s, out), -EAGAIN);
	free(out);
done:
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

static void case_busy(void)
{
	struct ibv_srq *srq;

	t_case("destroy_srq EBUSY while a QP uses it");
	srq = make_srq(4, 1);
	if (!CHECK(srq != NULL))
		return;
	atomic_fetch_add(&sw_srq(srq)->usecnt, 1);
	CHECK_RET(ibv_destroy_srq(srq), EBUSY);
	atomic_fetch_sub(&sw_srq(srq)->usecnt, 1);
	CHECK_RET(ibv_destroy_srq(srq), 0);
}

int main(void)
{
	int fl;

	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	t_start("unit_srq");
	t_open_first(&ctx);
	fl = fcntl(ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK))
		t_skip_all("cannot make async_fd non-blocking");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		t_skip_all("ibv_alloc_pd failed");
	case_take();
	case_limit();
	case_resize();
	case_busy();
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	ibv_close_device(ctx);
	return t_finish();
}

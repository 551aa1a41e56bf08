/* SPDX-License-Identifier: MIT */
/*
 * unit_cq: the software device's CQs, white-box.
 *
 * Completions are injected with sw_cq_push() (as the transport does) and
 * read back through ibv_poll_cq and the ibv_cq_ex iterator, field by
 * field and in order. Also: overflow (one CQ_ERR async event, the
 * completion dropped), req_notify_cq with a completion channel (one event
 * per arm; a solicited-only arm ignores unsolicited successes), a
 * blocked ibv_get_cq_event woken by another thread, O_NONBLOCK, destroy
 * waiting for ibv_ack_cq_events, destroy dropping unread events,
 * EBUSY while the CQ is in use or its channel is, resize keeping the
 * queued completions, and a CQ ring in shared memory on a CC parent
 * domain of a bounce device.
 */
/* test: timeout=60 */
/* test: label=mt */
#include "harness.h"

#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "sw/queue.h"

static struct ibv_context *ctx;

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* revents of a zero-timeout poll for POLLIN, or -1. */
static int poll_now(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, 0);

	return n < 0 ? -1 : n ? p.revents : 0;
}

static int set_nonblock(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	return fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A distinct completion for index i; every field differs from its neighbours. */
static struct ibv_wc make_wc(uint32_t i)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = 0x1000000000ULL + i;
	wc.status = i % 3 == 2 ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS;
	wc.opcode = i % 2 ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RDMA_WRITE;
	wc.vendor_err = 0x100 + i;
	wc.byte_len = 1000 + i;
	wc.imm_data = htobe32(0xabc00000u + i);
	wc.qp_num = 0x10 + i;
	wc.src_qp = 0x20 + i;
	wc.wc_flags = i % 2 ? IBV_WC_WITH_IMM | IBV_WC_GRH : 0;
	wc.pkey_index = (uint16_t)(i & 1);
	wc.slid = (uint16_t)(0x30 + i);
	wc.sl = (uint8_t)(i & 0xf);
	wc.dlid_path_bits = (uint8_t)(0x40 + i);
	return wc;
}

/* Records a failed check for every field of `got` that differs from `want`. */
static int wc_equal(const struct ibv_wc *got, const struct ibv_wc *want)
{
	int ok = 1;

	ok &= CHECK_EQ_INT(got->wr_id, want->wr_id);
	ok &= CHECK_EQ_INT(got->status, want->status);
	ok &= CHECK_EQ_INT(got->opcode, want->opcode);
	ok &= CHECK_EQ_INT(got->vendor_err, want->vendor_err);
	ok &= CHECK_EQ_INT(got->byte_len, want->byte_len);
	ok &= CHECK_EQ_INT(got->imm_data, want->imm_data);
	ok &= CHECK_EQ_INT(got->qp_num, want->qp_num);
	ok &= CHECK_EQ_INT(got->src_qp, want->src_qp);
	ok &= CHECK_EQ_INT(got->wc_flags, want->wc_flags);
	ok &= CHECK_EQ_INT(got->pkey_index, want->pkey_index);
	ok &= CHECK_EQ_INT(got->slid, want->slid);
	ok &= CHECK_EQ_INT(got->sl, want->sl);
	ok &= CHECK_EQ_INT(got->dlid_path_bits, want->dlid_path_bits);
	return ok;
}

static struct ibv_cq_ex *make_cq_ex(uint32_t cqe, uint64_t wc_flags, struct ibv_comp_channel *ch,
				    void *cq_context)
{
	struct ibv_cq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.cqe = cqe;
	a.wc_flags = wc_flags;
	a.channel = ch;
	a.cq_context = cq_context;
	return ibv_create_cq_ex(ctx, &a);
}

static struct sw_cq *swcq(struct ibv_cq *cq)
{
	return sw_cq(cq);
}

static void case_poll_cq(void)
{
	struct ibv_wc want[10], got[16];
	struct ibv_cq *cq;
	uint32_t i;
	int n;

	t_case("sw_cq_push then ibv_poll_cq: order and every field");
	cq = ibv_create_cq(ctx, 10, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	CHECK_EQ_INT(ibv_poll_cq(cq, 4, got), 0);
	for (i = 0; i < 10; i++) {
		want[i] = make_wc(i);
		CHECK_EQ_INT(sw_cq_push(swcq(cq), &want[i], false), 0);
	}
	memset(got, 0xa5, sizeof(got));
	n = ibv_poll_cq(cq, 3, got);
	CHECK_EQ_INT(n, 3);
	for (i = 0; i < 3 && (int)i < n; i++)
		CHECK_MSG(wc_equal(&got[i], &want[i]), "completion %u", i);
	CHECK_EQ_INT(ibv_poll_cq(cq, 0, got), 0);
	CHECK_MSG(ibv_poll_cq(cq, -1, got) < 0, "negative num_entries must fail");
	n = ibv_poll_cq(cq, 16, got);
	CHECK_EQ_INT(n, 7);
	for (i = 0; i < 7 && (int)i < n; i++)
		CHECK_MSG(wc_equal(&got[i], &want[3 + i]), "completion %u", 3 + i);
	CHECK_EQ_INT(ibv_poll_cq(cq, 16, got), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

static void case_cq_ex(void)
{
	const uint64_t all = IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			     IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	struct ibv_poll_cq_attr pa = {0};
	struct ibv_wc want[6];
	struct ibv_cq_ex *cq;
	uint64_t t0, t1, w0, w1, prev_ts = 0;
	uint32_t i;
	int ret;

	t_case("ibv_cq_ex iterator and every read_* accessor");
	cq = make_cq_ex(8, all, NULL, NULL);
	if (!CHECK(cq != NULL))
		return;
	CHECK(cq->start_poll && cq->next_poll && cq->end_poll && cq->read_opcode &&
	      cq->read_vendor_err && cq->read_byte_len && cq->read_imm_data && cq->read_qp_num &&
	      cq->read_src_qp && cq->read_wc_flags && cq->read_slid && cq->read_sl &&
	      cq->read_dlid_path_bits && cq->read_completion_ts &&
	      cq->read_completion_wallclock_ns);
	CHECK(!cq->read_cvlan && !cq->read_flow_tag && !cq->read_tm_info);
	CHECK_EQ_INT(ibv_start_poll(cq, &pa), ENOENT);

	t0 = now_ns(CLOCK_MONOTONIC);
	w0 = now_ns(CLOCK_REALTIME);
	for (i = 0; i < 6; i++) {
		want[i] = make_wc(i);
		CHECK_EQ_INT(sw_cq_push(swcq(ibv_cq_ex_to_cq(cq)), &want[i], false), 0);
	}
	t1 = now_ns(CLOCK_MONOTONIC);
	w1 = now_ns(CLOCK_REALTIME);

	/* first batch: three completions, ended on the third */
	ret = ibv_start_poll(cq, &pa);
	if (!CHECK_EQ_INT(ret, 0))
		goto out;
	for (i = 0; i < 6; i++) {
		uint64_t ts, wall;

		if (i == 3) {
			ibv_end_poll(cq); /* consumes the third */
			if (!CHECK_EQ_INT(ibv_start_poll(cq, &pa), 0))
				goto out;
		} else if (i) {
			if (!CHECK_EQ_INT(ibv_next_poll(cq), 0))
				break;
		}
		CHECK_EQ_INT(cq->wr_id, want[i].wr_id);
		CHECK_EQ_INT(cq->status, want[i].status);
		CHECK_EQ_INT(ibv_wc_read_opcode(cq), want[i].opcode);
		CHECK_EQ_INT(ibv_wc_read_vendor_err(cq), want[i].vendor_err);
		CHECK_EQ_INT(ibv_wc_read_byte_len(cq), want[i].byte_len);
		CHECK_EQ_INT(ibv_wc_read_imm_data(cq), want[i].imm_data);
		CHECK_EQ_INT(ibv_wc_read_invalidated_rkey(cq), want[i].imm_data);
		CHECK_EQ_INT(ibv_wc_read_qp_num(cq), want[i].qp_num);
		CHECK_EQ_INT(ibv_wc_read_src_qp(cq), want[i].src_qp);
		CHECK_EQ_INT(ibv_wc_read_wc_flags(cq), want[i].wc_flags);
		CHECK_EQ_INT(ibv_wc_read_slid(cq), want[i].slid);
		CHECK_EQ_INT(ibv_wc_read_sl(cq), want[i].sl);
		CHECK_EQ_INT(ibv_wc_read_dlid_path_bits(cq), want[i].dlid_path_bits);
		ts = ibv_wc_read_completion_ts(cq);
		wall = ibv_wc_read_completion_wallclock_ns(cq);
		CHECK_MSG(ts >= t0 && ts <= t1 && ts >= prev_ts,
			  "completion_ts %llu outside [%llu, %llu] or before %llu",
			  (unsigned long long)ts, (unsigned long long)t0, (unsigned long long)t1,
			  (unsigned long long)prev_ts);
		CHECK_MSG(wall >= w0 && wall <= w1, "wallclock %llu outside [%llu, %llu]",
			  (unsigned long long)wall, (unsigned long long)w0, (unsigned long long)w1);
		prev_ts = ts;
	}
	CHECK_EQ_INT(ibv_next_poll(cq), ENOENT);
	ibv_end_poll(cq);
	CHECK_EQ_INT(ibv_start_poll(cq, &pa), ENOENT);
	/* an unknown poll attribute is refused without taking the CQ */
	pa.comp_mask = 1;
	CHECK_EQ_INT(ibv_start_poll(cq, &pa), EINVAL);
	pa.comp_mask = 0;
	CHECK_EQ_INT(ibv_start_poll(cq, NULL), ENOENT);
out:
	CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);

	/* only the requested accessors are installed */
	cq = make_cq_ex(4, IBV_WC_EX_WITH_BYTE_LEN, NULL, NULL);
	if (!CHECK(cq != NULL))
		return;
	CHECK(cq->read_opcode && cq->read_vendor_err && cq->read_wc_flags && cq->read_byte_len);
	CHECK(!cq->read_imm_data && !cq->read_qp_num && !cq->read_src_qp && !cq->read_slid &&
	      !cq->read_sl && !cq->read_dlid_path_bits && !cq->read_completion_ts &&
	      !cq->read_completion_wallclock_ns);
	CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

static void case_poll_mixed(void)
{
	struct ibv_wc w = make_wc(7), got[2];
	struct ibv_cq_ex *cq;

	t_case("poll_cq and the iterator share one consumer");
	cq = make_cq_ex(4, IBV_WC_STANDARD_FLAGS, NULL, NULL);
	if (!CHECK(cq != NULL))
		return;
	w.wr_id = 1;
	sw_cq_push(swcq(ibv_cq_ex_to_cq(cq)), &w, false);
	w.wr_id = 2;
	sw_cq_push(swcq(ibv_cq_ex_to_cq(cq)), &w, false);
	if (CHECK_EQ_INT(ibv_start_poll(cq, NULL), 0)) {
		CHECK_EQ_INT(cq->wr_id, 1);
		ibv_end_poll(cq);
	}
	CHECK_EQ_INT(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 2, got), 1);
	CHECK_EQ_INT(got[0].wr_id, 2);
	CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

/* Reads one async event if there is one (async_fd is non-blocking here). */
static int read_async(struct ibv_async_event *ev)
{
	return ibv_get_async_event(ctx, ev);
}

static void case_overflow(void)
{
	struct ibv_async_event ev;
	struct ibv_wc w, got[8];
	struct ibv_cq *cq;
	int i, n, cap;

	t_case("overflow: one CQ_ERR, completion dropped");
	cq = ibv_create_cq(ctx, 3, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	cap = cq->cqe;
	CHECK_MSG(cap >= 3, "cqe %d < 3", cap);
	for (i = 0; i < cap; i++) {
		w = make_wc((uint32_t)i);
		CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), 0);
	}
	CHECK_EQ_INT(read_async(&ev), -1);
	CHECK_EQ_INT(errno, EAGAIN);
	w = make_wc(100);
	CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), -ENOSPC);
	CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), -ENOSPC);
	if (CHECK_EQ_INT(read_async(&ev), 0)) {
		CHECK_EQ_INT(ev.event_type, IBV_EVENT_CQ_ERR);
		CHECK(ev.element.cq == cq);
		ibv_ack_async_event(&ev);
		CHECK_EQ_INT(cq->async_events_completed, 1);
	}
	CHECK_EQ_INT(read_async(&ev), -1); /* exactly one */
	n = ibv_poll_cq(cq, 8, got);
	CHECK_EQ_INT(n, cap);
	for (i = 0; i < n; i++)
		CHECK_EQ_INT(got[i].wr_id, make_wc((uint32_t)i).wr_id);
	/* room again: new completions are taken, no second event */
	CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), 0);
	for (i = 1; i < cap; i++)
		sw_cq_push(swcq(cq), &w, false);
	CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), -ENOSPC);
	CHECK_EQ_INT(read_async(&ev), -1);
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

/* 1 if a completion event is queued on ch (fd non-blocking), with *cq set. */
static int take_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cctx)
{
	return ibv_get_cq_event(ch, cq, cctx) == 0;
}

static void case_notify(void)
{
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq, *ecq = NULL;
	struct ibv_wc ok = make_wc(0), bad = make_wc(2);
	void *ectx = NULL;
	int cookie, acks = 0;

	t_case("req_notify_cq: one event per arm, solicited-only rules");
	ch = ibv_create_comp_channel(ctx);
	if (!CHECK(ch != NULL))
		return;
	CHECK(ch->fd >= 0 && ch->context == ctx);
	CHECK_EQ_INT(set_nonblock(ch->fd, true), 0);
	cq = ibv_create_cq(ctx, 64, &cookie, ch, 0);
	if (!CHECK(cq != NULL))
		goto out_ch;
	CHECK(cq->channel == ch && cq->cq_context == &cookie);
	CHECK_EQ_INT(ch->refcnt, 1);

	/* not armed: no event */
	sw_cq_push(swcq(cq), &ok, false);
	CHECK(!take_event(ch, &ecq, &ectx) && errno == EAGAIN);
	CHECK_EQ_INT(poll_now(ch->fd), 0);

	/* armed for any: the next completion gives one event */
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	CHECK_EQ_INT(poll_now(ch->fd), 0);
	sw_cq_push(swcq(cq), &ok, false);
	CHECK(poll_now(ch->fd) & POLLIN);
	if (CHECK(take_event(ch, &ecq, &ectx))) {
		CHECK(ecq == cq && ectx == &cookie);
		acks++;
	}
	sw_cq_push(swcq(cq), &ok, false);
	CHECK(!take_event(ch, &ecq, &ectx)); /* disarmed */

	/* solicited only: unsolicited successes do not count */
	CHECK_RET(ibv_req_notify_cq(cq, 1), 0);
	sw_cq_push(swcq(cq), &ok, false);
	CHECK(!take_event(ch, &ecq, &ectx));
	sw_cq_push(swcq(cq), &ok, true);
	acks += CHECK(take_event(ch, &ecq, &ectx) && ecq == cq);
	CHECK(!take_event(ch, &ecq, &ectx));

	/* ... but error completions do */
	CHECK_RET(ibv_req_notify_cq(cq, 1), 0);
	sw_cq_push(swcq(cq), &bad, false);
	acks += CHECK(take_event(ch, &ecq, &ectx) && ecq == cq);

	/* solicited then any: widened */
	CHECK_RET(ibv_req_notify_cq(cq, 1), 0);
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	sw_cq_push(swcq(cq), &ok, false);
	acks += CHECK(take_event(ch, &ecq, &ectx));

	/* any then solicited: not narrowed */
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	CHECK_RET(ibv_req_notify_cq(cq, 1), 0);
	sw_cq_push(swcq(cq), &ok, false);
	acks += CHECK(take_event(ch, &ecq, &ectx));

	/* arming twice still gives one event */
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	sw_cq_push(swcq(cq), &ok, false);
	sw_cq_push(swcq(cq), &ok, false);
	acks += CHECK(take_event(ch, &ecq, &ectx));
	CHECK(!take_event(ch, &ecq, &ectx));

	CHECK_EQ_INT(acks, 6);
	ibv_ack_cq_events(cq, (unsigned int)acks);
	CHECK_EQ_INT(cq->comp_events_completed, (unsigned int)acks);
	CHECK_RET(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_EQ_INT(ch->refcnt, 0);
out_ch:
	CHECK_RET(ibv_destroy_comp_channel(ch), 0);
}

struct waiter {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	void *cq_context;
	int ret, err;
	atomic_int done;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;

	w->ret = ibv_get_cq_event(w->ch, &w->cq, &w->cq_context);
	w->err = errno;
	atomic_store(&w->done, 1);
	return NULL;
}

static void case_blocking(void)
{
	struct waiter w;
	struct ibv_wc ok = make_wc(0);
	struct ibv_cq *cq, *ecq;
	struct timespec deadline;
	void *ectx;
	pthread_t th;
	int cookie;

	t_case("blocking ibv_get_cq_event woken by another thread; O_NONBLOCK");
	memset(&w, 0, sizeof(w));
	w.ch = ibv_create_comp_channel(ctx);
	if (!CHECK(w.ch != NULL))
		return;
	CHECK_EQ_INT(fcntl(w.ch->fd, F_GETFL) & O_NONBLOCK, 0);
	cq = ibv_create_cq(ctx, 8, &cookie, w.ch, 0);
	if (!CHECK(cq != NULL))
		goto out;
	atomic_init(&w.done, 0);
	if (!CHECK_EQ_INT(pthread_create(&th, NULL, waiter_main, &w), 0))
		goto out_cq;
	sleep_ms(100);
	CHECK_MSG(!atomic_load(&w.done), "ibv_get_cq_event returned without an event");
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	sw_cq_push(swcq(cq), &ok, false);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	if (!CHECK_EQ_INT(pthread_timedjoin_np(th, NULL, &deadline), 0)) {
		/* unblock it with a second event so that it can be joined */
		CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
		sw_cq_push(swcq(cq), &ok, false);
		pthread_join(th, NULL);
	}
	if (CHECK_EQ_INT(w.ret, 0) && CHECK(w.cq == cq && w.cq_context == &cookie))
		ibv_ack_cq_events(cq, 1);

	CHECK_EQ_INT(set_nonblock(w.ch->fd, true), 0);
	errno = 0;
	CHECK_EQ_INT(ibv_get_cq_event(w.ch, &ecq, &ectx), -1);
	CHECK_EQ_INT(errno, EAGAIN);
out_cq:
	CHECK_RET(ibv_destroy_cq(cq), 0);
out:
	CHECK_RET(ibv_destroy_comp_channel(w.ch), 0);
}

struct acker {
	struct ibv_cq *cq;
	atomic_int acked;
};

static void *acker_main(void *arg)
{
	struct acker *a = arg;

	sleep_ms(200);
	atomic_store(&a->acked, 1);
	ibv_ack_cq_events(a->cq, 1);
	return NULL;
}

static void case_destroy_waits(void)
{
	struct ibv_comp_channel *ch;
	struct ibv_wc ok = make_wc(0);
	struct ibv_cq *cq, *ecq;
	struct acker a;
	uint64_t t0, dt;
	void *ectx;
	pthread_t th;

	t_case("destroy_cq waits for acks and drops unread events");
	ch = ibv_create_comp_channel(ctx);
	if (!CHECK(ch != NULL))
		return;
	CHECK_EQ_INT(set_nonblock(ch->fd, true), 0);
	cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	if (!CHECK(cq != NULL))
		goto out;
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	sw_cq_push(swcq(cq), &ok, false);
	if (!CHECK(take_event(ch, &ecq, &ectx) && ecq == cq)) {
		CHECK_RET(ibv_destroy_cq(cq), 0);
		goto out;
	}
	a.cq = cq;
	atomic_init(&a.acked, 0);
	if (!CHECK_EQ_INT(pthread_create(&th, NULL, acker_main, &a), 0)) {
		ibv_ack_cq_events(cq, 1);
		CHECK_RET(ibv_destroy_cq(cq), 0);
		goto out;
	}
	t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	dt = now_ns(CLOCK_MONOTONIC) - t0;
	CHECK_MSG(atomic_load(&a.acked), "destroy returned before the ack");
	CHECK_MSG(dt >= 150000000ULL, "destroy returned after %llu ns", (unsigned long long)dt);
	pthread_join(th, NULL);

	/* an event nobody read is dropped: destroy does not wait for it */
	cq = ibv_create_cq(ctx, 8, NULL, ch, 0);
	if (!CHECK(cq != NULL))
		goto out;
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	sw_cq_push(swcq(cq), &ok, false);
	CHECK(poll_now(ch->fd) & POLLIN);
	t0 = now_ns(CLOCK_MONOTONIC);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	dt = now_ns(CLOCK_MONOTONIC) - t0;
	CHECK_MSG(dt < 1000000000ULL, "destroy took %llu ns", (unsigned long long)dt);
	/* the dropped event's count is skipped by the reader */
	errno = 0;
	CHECK_EQ_INT(ibv_get_cq_event(ch, &ecq, &ectx), -1);
	CHECK_EQ_INT(errno, EAGAIN);
	CHECK_EQ_INT(poll_now(ch->fd), 0);

	/* a blocking reader passes over a dropped event's count and waits for a real one */
	{
		struct ibv_cq *gone = ibv_create_cq(ctx, 8, NULL, ch, 0);
		struct ibv_cq *live = ibv_create_cq(ctx, 8, NULL, ch, 0);
		struct timespec deadline;
		struct waiter w;

		memset(&w, 0, sizeof(w));
		w.ch = ch;
		atomic_init(&w.done, 0);
		if (CHECK(gone && live) && CHECK_EQ_INT(set_nonblock(ch->fd, false), 0)) {
			ibv_req_notify_cq(gone, 0);
			sw_cq_push(swcq(gone), &ok, false);
			CHECK_RET(ibv_destroy_cq(gone), 0);
			gone = NULL;
			if (CHECK_EQ_INT(pthread_create(&th, NULL, waiter_main, &w), 0)) {
				sleep_ms(100);
				CHECK_MSG(!atomic_load(&w.done), "returned for a dropped event");
				ibv_req_notify_cq(live, 0);
				sw_cq_push(swcq(live), &ok, false);
				clock_gettime(CLOCK_REALTIME, &deadline);
				deadline.tv_sec += 10;
				if (!CHECK_EQ_INT(pthread_timedjoin_np(th, NULL, &deadline), 0)) {
					ibv_req_notify_cq(live, 0);
					sw_cq_push(swcq(live), &ok, false);
					pthread_join(th, NULL);
				}
				if (CHECK_EQ_INT(w.ret, 0) && CHECK(w.cq == live))
					ibv_ack_cq_events(live, 1);
			}
			set_nonblock(ch->fd, true);
		}
		if (gone)
			ibv_destroy_cq(gone);
		if (live)
			CHECK_RET(ibv_destroy_cq(live), 0);
	}

	/* two CQs on one channel: destroying one keeps the other's events in order */
	{
		struct ibv_cq *c1 = ibv_create_cq(ctx, 8, NULL, ch, 0);
		struct ibv_cq *c2 = ibv_create_cq(ctx, 8, NULL, ch, 0);

		if (CHECK(c1 && c2)) {
			ibv_req_notify_cq(c1, 0);
			ibv_req_notify_cq(c2, 0);
			sw_cq_push(swcq(c1), &ok, false);
			sw_cq_push(swcq(c2), &ok, false);
			ibv_req_notify_cq(c1, 0);
			sw_cq_push(swcq(c1), &ok, false);
			CHECK_RET(ibv_destroy_cq(c1), 0);
			c1 = NULL;
			if (CHECK(take_event(ch, &ecq, &ectx)))
				CHECK(ecq == c2);
			CHECK(!take_event(ch, &ecq, &ectx));
			ibv_ack_cq_events(c2, 1);
			ibv_req_notify_cq(c2, 0);
			sw_cq_push(swcq(c2), &ok, false);
			if (CHECK(take_event(ch, &ecq, &ectx)))
				CHECK(ecq == c2);
			ibv_ack_cq_events(c2, 1);
		}
		if (c1)
			ibv_destroy_cq(c1);
		if (c2)
			CHECK_RET(ibv_destroy_cq(c2), 0);
	}
out:
	CHECK_RET(ibv_destroy_comp_channel(ch), 0);
}

static void case_busy(void)
{
	struct ibv_cq *cq;

	t_case("destroy_cq EBUSY while the CQ is in use");
	cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	atomic_fetch_add(&swcq(cq)->usecnt, 1);
	CHECK_RET(ibv_destroy_cq(cq), EBUSY);
	atomic_fetch_sub(&swcq(cq)->usecnt, 1);
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

static void case_resize(void)
{
	struct ibv_wc w, got[64];
	struct ibv_cq *cq;
	int i, n;

	t_case("resize keeps the queued completions");
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!CHECK(cq != NULL))
		return;
	/* move the consumer so that the queued entries wrap around the ring */
	for (i = 0; i < 3; i++) {
		w = make_wc(50);
		sw_cq_push(swcq(cq), &w, false);
	}
	CHECK_EQ_INT(ibv_poll_cq(cq, 3, got), 3);
	for (i = 0; i < 4; i++) {
		w = make_wc((uint32_t)i);
		CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), 0);
	}
	CHECK_RET(ibv_resize_cq(cq, 3), EINVAL); /* fewer than queued */
	CHECK_RET(ibv_resize_cq(cq, 0), EINVAL);
	CHECK_RET(ibv_resize_cq(cq, 40), 0);
	CHECK_MSG(cq->cqe >= 40, "cqe %d after resize to 40", cq->cqe);
	for (i = 4; i < 40; i++) {
		w = make_wc((uint32_t)i);
		CHECK_EQ_INT(sw_cq_push(swcq(cq), &w, false), 0);
	}
	n = ibv_poll_cq(cq, 64, got);
	CHECK_EQ_INT(n, 40);
	for (i = 0; i < n; i++) {
		w = make_wc((uint32_t)i);
		CHECK_MSG(wc_equal(&got[i], &w), "completion %d", i);
	}
	/* shrink to exactly what is queued */
	for (i = 0; i < 4; i++)
		sw_cq_push(swcq(cq), &w, false);
	CHECK_RET(ibv_resize_cq(cq, 4), 0);
	CHECK_MSG(cq->cqe >= 4 && cq->cqe < 40, "cqe %d after resize to 4", cq->cqe);
	CHECK_EQ_INT(ibv_poll_cq(cq, 64, got), 4);
	CHECK_RET(ibv_destroy_cq(cq), 0);
}

static void case_cc_ring(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_cq_init_attr_ex a;
	struct ibv_pd *pd = NULL, *parent = NULL;
	struct ibv_context *c;
	struct ibv_cq_ex *cq;
	struct ibv_wc w = make_wc(1), got;

	t_case("CQ on a CC parent domain: ring in shared memory");
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	c = t_open_dev();
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	if (!CHECK(c != NULL))
		return;
	pd = ibv_alloc_pd(c);
	if (!CHECK(pd != NULL))
		goto out;
	memset(&pa, 0, sizeof(pa));
	pa.pd = pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	parent = ibv_alloc_parent_domain(c, &pa);
	if (!CHECK(parent != NULL))
		goto out;
	memset(&a, 0, sizeof(a));
	a.cqe = 100;
	a.wc_flags = IBV_WC_STANDARD_FLAGS;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	a.parent_domain = parent;
	cq = ibv_create_cq_ex(c, &a);
	if (CHECK_MSG(cq != NULL, "create on CC parent: %s", t_errname(errno))) {
		struct sw_cq *s = swcq(ibv_cq_ex_to_cq(cq));

		CHECK(s->ring.shm_fd >= 0);
		CHECK_EQ_INT(s->ring.buf_len % (size_t)sysconf(_SC_PAGESIZE), 0);
		CHECK(s->ring.buf_len >= (size_t)s->ring.nslots * s->ring.stride);
		CHECK_EQ_INT(sw_cq_push(s, &w, false), 0);
		CHECK_EQ_INT(ibv_poll_cq(ibv_cq_ex_to_cq(cq), 1, &got), 1);
		CHECK_EQ_INT(got.wr_id, w.wr_id);
		CHECK_RET(ibv_resize_cq(ibv_cq_ex_to_cq(cq), 200), EOPNOTSUPP);
		CHECK_RET(ibv_dealloc_pd(parent), EBUSY);
		CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	}
	/* and in ordinary memory on a device without bounce */
	cq = make_cq_ex(100, IBV_WC_STANDARD_FLAGS, NULL, NULL);
	if (CHECK(cq != NULL)) {
		CHECK(swcq(ibv_cq_ex_to_cq(cq))->ring.shm_fd < 0);
		CHECK_RET(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
	}
out:
	if (parent)
		CHECK_RET(ibv_dealloc_pd(parent), 0);
	if (pd)
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	ibv_close_device(c);
}

int main(void)
{
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	t_start("unit_cq");
	t_open_first(&ctx);
	if (set_nonblock(ctx->async_fd, true))
		t_skip_all("cannot make async_fd non-blocking");
	case_poll_cq();
	case_cq_ex();
	case_poll_mixed();
	case_overflow();
	case_notify();
	case_blocking();
	case_destroy_waits();
	case_busy();
	case_resize();
	case_cc_ring();
	ibv_close_device(ctx);
	return t_finish();
}

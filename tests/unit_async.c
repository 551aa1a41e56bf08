/* SPDX-License-Identifier: MIT */
/*
 * unit_async: the async event queue behind ctx->async_fd.
 *
 * Events are injected with the core's sv_async_post() on a context opened
 * through the public API, then read back with ibv_get_async_event():
 * pollability, FIFO order, O_NONBLOCK, a blocked reader woken by another
 * thread, independence of two contexts, acknowledgement counting on the
 * object an event names, and unread events freed on close (the memcheck
 * and ASan runs report a leak otherwise).
 */
/* test: timeout=60 */
/* test: label=mt */
#include "harness.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "core/core.h"

/* revents of a zero-timeout poll for POLLIN, or -1 if poll failed. */
static int poll_now(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, 0);

	if (n < 0)
		return -1;
	return n ? p.revents : 0;
}

static int post_port_event(struct ibv_context *ctx, enum ibv_event_type type, int port)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = type;
	ev.element.port_num = port;
	return sv_async_post(ctx, &ev);
}

static void case_single(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	CHECK(ctx->async_fd >= 0);
	CHECK_EQ_INT(poll_now(ctx->async_fd), 0);
	CHECK_EQ_INT(post_port_event(ctx, IBV_EVENT_PORT_ACTIVE, 1), 0);
	CHECK_MSG(poll_now(ctx->async_fd) & POLLIN, "no POLLIN after posting (revents %#x)",
		  poll_now(ctx->async_fd));

	memset(&ev, 0xa5, sizeof(ev));
	if (!CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0))
		return;
	CHECK_EQ_INT(ev.event_type, IBV_EVENT_PORT_ACTIVE);
	CHECK_EQ_INT(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
	CHECK_EQ_INT(poll_now(ctx->async_fd), 0);
}

static void case_fifo(struct ibv_context *ctx)
{
	static const struct {
		enum ibv_event_type type;
		int port;
	} seq[] = {
		{IBV_EVENT_PORT_ERR, 1},	  {IBV_EVENT_LID_CHANGE, 2},
		{IBV_EVENT_GID_CHANGE, 3},	  {IBV_EVENT_PORT_ACTIVE, 4},
		{IBV_EVENT_PKEY_CHANGE, 5},	  {IBV_EVENT_DEVICE_FATAL, 0},
		{IBV_EVENT_CLIENT_REREGISTER, 7},
	};
	struct ibv_async_event ev;
	size_t i;

	for (i = 0; i < SV_ARRAY_SIZE(seq); i++)
		CHECK_EQ_INT(post_port_event(ctx, seq[i].type, seq[i].port), 0);
	for (i = 0; i < SV_ARRAY_SIZE(seq); i++) {
		CHECK_MSG(poll_now(ctx->async_fd) & POLLIN, "no POLLIN with %zu events queued",
			  SV_ARRAY_SIZE(seq) - i);
		memset(&ev, 0, sizeof(ev));
		if (!CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0))
			return;
		CHECK_MSG(ev.event_type == seq[i].type && ev.element.port_num == seq[i].port,
			  "event %zu: got type %d port %d, want type %d port %d", i,
			  (int)ev.event_type, ev.element.port_num, (int)seq[i].type, seq[i].port);
		ibv_ack_async_event(&ev);
	}
	CHECK_EQ_INT(poll_now(ctx->async_fd), 0);
}

static void case_nonblock(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	int flags = fcntl(ctx->async_fd, F_GETFL);
	int ret;

	if (!CHECK(flags >= 0))
		return;
	CHECK_EQ_INT(flags & O_NONBLOCK, 0); /* blocking by default */
	if (!CHECK_EQ_INT(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0))
		return;

	errno = 0;
	ret = ibv_get_async_event(ctx, &ev);
	CHECK_MSG(ret == -1 && errno == EAGAIN, "empty queue: got %d / %s, want -1 / EAGAIN", ret,
		  t_errname(errno));

	/* an event still comes through, and then it is empty again */
	CHECK_EQ_INT(post_port_event(ctx, IBV_EVENT_SM_CHANGE, 1), 0);
	memset(&ev, 0, sizeof(ev));
	CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0);
	CHECK_EQ_INT(ev.event_type, IBV_EVENT_SM_CHANGE);
	ibv_ack_async_event(&ev);
	errno = 0;
	ret = ibv_get_async_event(ctx, &ev);
	CHECK_MSG(ret == -1 && errno == EAGAIN, "drained queue: got %d / %s, want -1 / EAGAIN", ret,
		  t_errname(errno));

	CHECK_EQ_INT(fcntl(ctx->async_fd, F_SETFL, flags), 0);
}

struct reader {
	struct ibv_context *ctx;
	struct ibv_async_event ev;
	int ret;
	atomic_int done;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->ret = ibv_get_async_event(r->ctx, &r->ev);
	atomic_store(&r->done, 1);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void case_blocking_wakeup(struct ibv_context *ctx)
{
	struct reader r;
	struct timespec deadline;
	pthread_t th;
	int ret;

	memset(&r, 0, sizeof(r));
	r.ctx = ctx;
	r.ret = -2;
	atomic_init(&r.done, 0);
	if (!CHECK_EQ_INT(pthread_create(&th, NULL, reader_main, &r), 0))
		return;

	/* the reader must still be waiting: nothing was posted */
	sleep_ms(100);
	CHECK_MSG(!atomic_load(&r.done), "ibv_get_async_event returned %d on an empty queue",
		  r.ret);

	CHECK_EQ_INT(post_port_event(ctx, IBV_EVENT_PORT_ERR, 1), 0);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	ret = pthread_timedjoin_np(th, NULL, &deadline);
	if (!CHECK_MSG(ret == 0, "reader not woken within 10 s (%s)", t_errname(ret))) {
		/* unblock it with a second event so that the test can end */
		post_port_event(ctx, IBV_EVENT_PORT_ERR, 1);
		pthread_join(th, NULL);
		return;
	}
	CHECK_EQ_INT(r.ret, 0);
	CHECK_EQ_INT(r.ev.event_type, IBV_EVENT_PORT_ERR);
	CHECK_EQ_INT(r.ev.element.port_num, 1);
	ibv_ack_async_event(&r.ev);
	CHECK_EQ_INT(poll_now(ctx->async_fd), 0);
}

static void case_two_contexts(struct ibv_context *ctx)
{
	struct ibv_context *other;
	struct ibv_async_event ev;

	t_open_first(&other);
	CHECK(other->async_fd != ctx->async_fd);
	CHECK_EQ_INT(post_port_event(other, IBV_EVENT_LID_CHANGE, 1), 0);
	CHECK_EQ_INT(poll_now(ctx->async_fd), 0);
	CHECK_MSG(poll_now(other->async_fd) & POLLIN, "event not on the context it was posted to");
	memset(&ev, 0, sizeof(ev));
	CHECK_EQ_INT(ibv_get_async_event(other, &ev), 0);
	CHECK_EQ_INT(ev.event_type, IBV_EVENT_LID_CHANGE);
	ibv_ack_async_event(&ev);
	CHECK_EQ_INT(ibv_close_device(other), 0);
}

/*
 * Objects named by events. Only the members the acknowledgement touches
 * are set up; the events are injected, so no device object is needed.
 */
struct waiter {
	struct ibv_qp *qp;
	atomic_int waiting;
	int seen;
};

/* Waits like a destroy would, until the QP's event is acknowledged. */
static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct timespec deadline;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 10;
	pthread_mutex_lock(&w->qp->mutex);
	atomic_store(&w->waiting, 1);
	while (w->qp->events_completed < 1)
		if (pthread_cond_timedwait(&w->qp->cond, &w->qp->mutex, &deadline))
			break;
	w->seen = (int)w->qp->events_completed;
	pthread_mutex_unlock(&w->qp->mutex);
	return NULL;
}

static void ack_one(struct ibv_context *ctx, struct ibv_async_event *post, enum ibv_event_type type)
{
	struct ibv_async_event ev;

	post->event_type = type;
	CHECK_EQ_INT(sv_async_post(ctx, post), 0);
	memset(&ev, 0, sizeof(ev));
	if (!CHECK_EQ_INT(ibv_get_async_event(ctx, &ev), 0))
		return;
	CHECK_EQ_INT(ev.event_type, type);
	CHECK_MSG(ev.element.qp == post->element.qp, "event %d names %p, posted with %p", (int)type,
		  (void *)ev.element.qp, (void *)post->element.qp);
	ibv_ack_async_event(&ev);
}

static void case_ack_counts(struct ibv_context *ctx)
{
	static const enum ibv_event_type qp_events[] = {
		IBV_EVENT_QP_FATAL,	IBV_EVENT_QP_REQ_ERR,	       IBV_EVENT_QP_ACCESS_ERR,
		IBV_EVENT_COMM_EST,	IBV_EVENT_SQ_DRAINED,	       IBV_EVENT_PATH_MIG,
		IBV_EVENT_PATH_MIG_ERR, IBV_EVENT_QP_LAST_WQE_REACHED,
	};
	struct ibv_async_event post;
	struct ibv_qp qp;
	struct ibv_cq cq;
	struct ibv_srq srq;
	struct ibv_wq wq;
	struct waiter w;
	pthread_t th;
	size_t i;
	int spins;

	memset(&qp, 0, sizeof(qp));
	memset(&cq, 0, sizeof(cq));
	memset(&srq, 0, sizeof(srq));
	memset(&wq, 0, sizeof(wq));
	pthread_mutex_init(&qp.mutex, NULL);
	pthread_cond_init(&qp.cond, NULL);
	pthread_mutex_init(&cq.mutex, NULL);
	pthread_cond_init(&cq.cond, NULL);
	pthread_mutex_init(&srq.mutex, NULL);
	pthread_cond_init(&srq.cond, NULL);
	pthread_mutex_init(&wq.mutex, NULL);
	pthread_cond_init(&wq.cond, NULL);
	qp.context = cq.context = srq.context = wq.context = ctx;

	/* the first QP event wakes a thread waiting for its acknowledgement */
	memset(&w, 0, sizeof(w));
	w.qp = &qp;
	w.seen = -1;
	atomic_init(&w.waiting, 0);
	memset(&post, 0, sizeof(post));
	post.element.qp = &qp;
	if (CHECK_EQ_INT(pthread_create(&th, NULL, waiter_main, &w), 0)) {
		for (spins = 0; !atomic_load(&w.waiting) && spins < 1000; spins++)
			sleep_ms(1);
		ack_one(ctx, &post, IBV_EVENT_QP_FATAL);
		pthread_join(th, NULL);
		CHECK_MSG(w.seen == 1, "waiter saw events_completed = %d, want 1", w.seen);
	}
	CHECK_EQ_INT(qp.events_completed, 1);

	/* every QP event type counts on the QP, and only there */
	for (i = 1; i < SV_ARRAY_SIZE(qp_events); i++)
		ack_one(ctx, &post, qp_events[i]);
	CHECK_EQ_INT(qp.events_completed, SV_ARRAY_SIZE(qp_events));

	memset(&post, 0, sizeof(post));
	post.element.cq = &cq;
	ack_one(ctx, &post, IBV_EVENT_CQ_ERR);
	CHECK_EQ_INT(cq.async_events_completed, 1);
	CHECK_EQ_INT(cq.comp_events_completed, 0);

	memset(&post, 0, sizeof(post));
	post.element.srq = &srq;
	ack_one(ctx, &post, IBV_EVENT_SRQ_ERR);
	ack_one(ctx, &post, IBV_EVENT_SRQ_LIMIT_REACHED);
	CHECK_EQ_INT(srq.events_completed, 2);

	memset(&post, 0, sizeof(post));
	post.element.wq = &wq;
	ack_one(ctx, &post, IBV_EVENT_WQ_FATAL);
	CHECK_EQ_INT(wq.events_completed, 1);

	/* port and device events name no object: nothing is counted */
	CHECK_EQ_INT(post_port_event(ctx, IBV_EVENT_PORT_ACTIVE, 1), 0);
	memset(&post, 0, sizeof(post));
	CHECK_EQ_INT(ibv_get_async_event(ctx, &post), 0);
	ibv_ack_async_event(&post);
	CHECK_EQ_INT(qp.events_completed, SV_ARRAY_SIZE(qp_events));
	CHECK_EQ_INT(cq.async_events_completed, 1);
	CHECK_EQ_INT(srq.events_completed, 2);
	CHECK_EQ_INT(wq.events_completed, 1);

	pthread_cond_destroy(&qp.cond);
	pthread_mutex_destroy(&qp.mutex);
	pthread_cond_destroy(&cq.cond);
	pthread_mutex_destroy(&cq.mutex);
	pthread_cond_destroy(&srq.cond);
	pthread_mutex_destroy(&srq.mutex);
	pthread_cond_destroy(&wq.cond);
	pthread_mutex_destroy(&wq.mutex);
}

static void case_unread_on_close(void)
{
	struct ibv_context *ctx;
	int i;

	t_open_first(&ctx);
	for (i = 0; i < 5; i++)
		CHECK_EQ_INT(post_port_event(ctx, IBV_EVENT_PORT_ERR, 1), 0);
	CHECK_MSG(poll_now(ctx->async_fd) & POLLIN, "no POLLIN with 5 events queued");
	/* the queue's five entries must not leak (memcheck / ASan) */
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
}

int main(void)
{
	struct ibv_context *ctx;

	t_start("unit_async");
	t_open_first(&ctx);

	t_case("one event: POLLIN, get, ack");
	case_single(ctx);

	t_case("several events come out in order");
	case_fifo(ctx);

	t_case("O_NONBLOCK on an empty queue gives EAGAIN");
	case_nonblock(ctx);

	t_case("a blocked reader wakes up when another thread posts");
	case_blocking_wakeup(ctx);

	t_case("two contexts have separate queues");
	case_two_contexts(ctx);

	t_case("ack counts on the object the event names");
	case_ack_counts(ctx);

	t_case("unread events are freed on close");
	case_unread_on_close();

	CHECK_EQ_INT(ibv_close_device(ctx), 0);
	return t_finish();
}

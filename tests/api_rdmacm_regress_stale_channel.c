/* SPDX-License-Identifier: MIT */
/* test: timeout=60 */
/*
 * api_rdmacm_regress_stale_channel: a call on an event channel that was
 * destroyed never reads the channel's freed memory.
 *
 * rping (rdmacm-utils 44) destroys its channel and returns from main()
 * while its CM thread, just back from handling DISCONNECTED, may not yet
 * have entered rdma_get_cm_event() again; that call then came with a
 * pointer to freed memory, read the free list's mangled pointer as the
 * first event and died of SIGBUS (about once in 60 runs under load).
 * Such a call now blocks for ever, as one that was already waiting when
 * the channel went does (docs/rdmacm.md), and a second destroy does
 * nothing. Cases:
 *
 *   1. get_cm_event after destroy: still blocked 300 ms later;
 *   2. destroy while a thread waits in get_cm_event: it stays blocked;
 *   3. destroy twice: nothing happens;
 *   4. a channel made afterwards works (a non-blocking get is EAGAIN).
 *
 * The blocked threads are left behind; the process exits with them.
 */
#include "harness.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include <rdma/rdma_cma.h>

struct waiter {
	struct rdma_event_channel *ch;
	atomic_bool started, returned;
	int ret;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev;

	atomic_store(&w->started, true);
	w->ret = rdma_get_cm_event(w->ch, &ev);
	atomic_store(&w->returned, true);
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/* Start a detached thread waiting on `w->ch`; 0 on success. */
static int start_waiter(struct waiter *w)
{
	pthread_t t;
	pthread_attr_t a;
	int ret;

	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	ret = pthread_create(&t, &a, wait_event, w);
	pthread_attr_destroy(&a);
	while (!ret && !atomic_load(&w->started))
		sleep_ms(1);
	return ret;
}

int main(void)
{
	static struct waiter after, during;
	struct rdma_event_channel *ch, *ch2;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	t_start("api_rdmacm_regress_stale_channel");

	t_case("get_cm_event on a destroyed channel blocks");
	ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	CHECK_RET(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	CHECK_RET(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	/*
	 * The library keeps its devices and thread open from its first id on;
	 * the channel destroyed under a waiter below keeps its eventfd (the
	 * waiter would free it): count from here, plus that one.
	 */
	t_st()->fd_start = t_count_fds() + 1;
	after.ch = ch; /* stale from here on */
	CHECK_RET(start_waiter(&after), 0);
	sleep_ms(300);
	CHECK_MSG(!atomic_load(&after.returned), "the call returned (%d)", after.ret);

	t_case("destroy while a thread waits");
	ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	during.ch = ch;
	CHECK_RET(start_waiter(&during), 0);
	sleep_ms(50); /* let it reach the wait */
	rdma_destroy_event_channel(ch);
	sleep_ms(300);
	CHECK_MSG(!atomic_load(&during.returned), "the call returned (%d)", during.ret);

	t_case("destroy twice");
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(after.ch);
	CHECK(1);

	t_case("a new channel works");
	ch2 = rdma_create_event_channel();
	CHECK(ch2 != NULL);
	CHECK(fcntl(ch2->fd, F_SETFL, O_NONBLOCK) == 0);
	errno = 0;
	CHECK_EQ_INT(rdma_get_cm_event(ch2, &ev), -1);
	CHECK_EQ_INT(errno, EAGAIN);
	rdma_destroy_event_channel(ch2);

	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/*
 * async.c - asynchronous events: the context's async_fd and its queue.
 *
 * async_fd is an eventfd in semaphore mode: each queued event adds one,
 * each ibv_get_async_event() takes one. It is pollable, blocks by default
 * and honours O_NONBLOCK set by the application, like the kernel's fd.
 */
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/core.h"

/* Contract: create the queue and ctx->async_fd; 0 or -errno. */
int sv_async_init(struct sv_context *sctx)
{
	int fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);

	if (fd < 0)
		return -errno;
	sctx->vctx.context.async_fd = fd;
	sctx->async_head = sctx->async_tail = NULL;
	pthread_mutex_init(&sctx->async_lock, NULL);
	return 0;
}

/* Contract: drop unread events and close async_fd. */
void sv_async_destroy(struct sv_context *sctx)
{
	struct sv_async_entry *e, *next;

	struct sv_async_count *c, *cnext;

	for (e = sctx->async_head; e; e = next) {
		next = e->next;
		free(e);
	}
	for (c = sctx->async_counts; c; c = cnext) {
		cnext = c->next;
		free(c);
	}
	sctx->async_counts = NULL;
	sctx->async_head = sctx->async_tail = NULL;
	pthread_mutex_destroy(&sctx->async_lock);
	close(sctx->vctx.context.async_fd);
	sctx->vctx.context.async_fd = -1;
}

/* Contract: see core.h. The entry is visible before the fd becomes readable. */
int sv_async_post(struct ibv_context *ctx, const struct ibv_async_event *event)
{
	struct sv_context *sctx = sv_ctx(ctx);
	struct sv_async_entry *e = malloc(sizeof(*e));
	uint64_t one = 1;

	if (!e)
		return -ENOMEM;
	e->event = *event;
	e->next = NULL;
	pthread_mutex_lock(&sctx->async_lock);
	if (sctx->async_tail)
		sctx->async_tail->next = e;
	else
		sctx->async_head = e;
	sctx->async_tail = e;
	/* Count it while still holding the lock, so a failure can unlink it. */
	if (write(ctx->async_fd, &one, sizeof(one)) != sizeof(one)) {
		int ret = -errno;
		struct sv_async_entry **pp = &sctx->async_head;

		while (*pp != e)
			pp = &(*pp)->next;
		*pp = NULL;
		sctx->async_tail =
			sctx->async_head ? sv_container_of(pp, struct sv_async_entry, next) : NULL;
		pthread_mutex_unlock(&sctx->async_lock);
		free(e);
		return ret;
	}
	pthread_mutex_unlock(&sctx->async_lock);
	return 0;
}

/* The kinds of object an event can name (event.element's member). */
enum event_kind {
	EV_NONE, /* device and port events */
	EV_CQ,
	EV_QP,
	EV_SRQ,
	EV_WQ
};

/* Contract: which kind of object an event of type `t` names. */
static enum event_kind event_kind(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_CQ_ERR:
		return EV_CQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EV_QP;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EV_SRQ;
	case IBV_EVENT_WQ_FATAL:
		return EV_WQ;
	default:
		return EV_NONE;
	}
}

/* The object an event names, or NULL for device and port events. */
static const void *event_object(const struct ibv_async_event *ev)
{
	switch (event_kind(ev->event_type)) {
	case EV_CQ:
		return ev->element.cq;
	case EV_QP:
		return ev->element.qp;
	case EV_SRQ:
		return ev->element.srq;
	case EV_WQ:
		return ev->element.wq;
	default:
		return NULL;
	}
}

/* Count one delivered event of `obj`. Caller holds async_lock. */
static void count_delivered(struct sv_context *sctx, const void *obj)
{
	struct sv_async_count *c;

	for (c = sctx->async_counts; c; c = c->next)
		if (c->obj == obj) {
			c->delivered++;
			return;
		}
	c = malloc(sizeof(*c));
	if (!c)
		return; /* destroy then cannot wait for this event's ack */
	c->obj = obj;
	c->delivered = 1;
	c->next = sctx->async_counts;
	sctx->async_counts = c;
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct sv_context *sctx = sv_ctx(ctx);
	struct sv_async_entry *e;
	uint64_t n;

	for (;;) {
		if (read(ctx->async_fd, &n, sizeof(n)) != sizeof(n))
			return -1; /* errno from read: EAGAIN when O_NONBLOCK and empty */
		pthread_mutex_lock(&sctx->async_lock);
		e = sctx->async_head;
		if (e) {
			sctx->async_head = e->next;
			if (!sctx->async_head)
				sctx->async_tail = NULL;
			if (event_object(&e->event))
				count_delivered(sctx, event_object(&e->event));
		}
		pthread_mutex_unlock(&sctx->async_lock);
		if (e)
			break;
		/* the event behind this count was dropped by a destroy: next */
	}
	*event = e->event;
	free(e);
	return 0;
}

/* Contract: see core.h. */
void sv_async_forget(struct ibv_context *ctx, const void *obj)
{
	struct sv_context *sctx = sv_ctx(ctx);
	struct sv_async_entry **pp, *e;

	pthread_mutex_lock(&sctx->async_lock);
	sctx->async_tail = NULL;
	for (pp = &sctx->async_head; (e = *pp);) {
		if (event_object(&e->event) == obj) {
			*pp = e->next;
			free(e);
			continue;
		}
		sctx->async_tail = e;
		pp = &e->next;
	}
	pthread_mutex_unlock(&sctx->async_lock);
}

/* Contract: see core.h. */
void sv_async_wait_acked(struct ibv_context *ctx, const void *obj, pthread_mutex_t *mutex,
			 pthread_cond_t *cond, const uint32_t *completed)
{
	struct sv_context *sctx = sv_ctx(ctx);
	struct sv_async_count **pp, *c;
	uint32_t delivered = 0;

	pthread_mutex_lock(&sctx->async_lock);
	for (pp = &sctx->async_counts; (c = *pp); pp = &c->next)
		if (c->obj == obj) {
			delivered = c->delivered;
			*pp = c->next;
			free(c);
			break;
		}
	pthread_mutex_unlock(&sctx->async_lock);
	pthread_mutex_lock(mutex);
	while (*completed < delivered)
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}

/* Count an acknowledged event on its object and wake a waiting destroy. */
#define ACK_ON(obj, field)                                                                         \
	do {                                                                                       \
		pthread_mutex_lock(&(obj)->mutex);                                                 \
		(obj)->field++;                                                                    \
		pthread_cond_signal(&(obj)->cond);                                                 \
		pthread_mutex_unlock(&(obj)->mutex);                                               \
	} while (0)

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event_kind(event->event_type)) {
	case EV_CQ:
		ACK_ON(event->element.cq, async_events_completed);
		break;
	case EV_QP:
		ACK_ON(event->element.qp, events_completed);
		break;
	case EV_SRQ:
		ACK_ON(event->element.srq, events_completed);
		break;
	case EV_WQ:
		ACK_ON(event->element.wq, events_completed);
		break;
	default:
		break; /* device and port events name no object */
	}
}

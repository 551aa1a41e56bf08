/* SPDX-License-Identifier: MIT */
/*
 * comp_channel.c - completion channels and ibv_get_cq_event().
 *
 * A channel is an eventfd in semaphore mode plus a locked FIFO of CQ
 * pointers, like the context's async queue: each queued event adds one
 * to the fd, each ibv_get_cq_event() takes one and then the oldest entry.
 * The fd blocks by default and honours O_NONBLOCK set by the application.
 *
 * Destroying a CQ removes its unread entries but cannot take their counts
 * back from the fd (a reader may already hold one). A count without an
 * entry is therefore legal: the reader just goes back to the fd.
 */
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/core.h"

struct sv_cq_event {
	struct ibv_cq *cq;
	struct sv_cq_event *next;
};

struct sv_comp_channel {
	struct ibv_comp_channel ibv;
	pthread_mutex_t lock; /* guards head and tail */
	struct sv_cq_event *head, *tail;
};

static struct sv_comp_channel *sv_chan(struct ibv_comp_channel *ch)
{
	return sv_container_of(ch, struct sv_comp_channel, ibv);
}

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_comp_channel *ch = calloc(1, sizeof(*ch));
	int fd;

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (fd < 0) {
		free(ch);
		return NULL; /* errno from eventfd */
	}
	pthread_mutex_init(&ch->lock, NULL);
	ch->ibv.context = context;
	ch->ibv.fd = fd;
	ch->ibv.refcnt = 0;
	return &ch->ibv;
}

/* EBUSY while a CQ uses the channel (ibv_comp_channel.refcnt, context mutex). */
SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_comp_channel *ch = sv_chan(channel);
	struct ibv_context *ctx = channel->context;
	struct sv_cq_event *e, *next;

	pthread_mutex_lock(&ctx->mutex);
	if (channel->refcnt) {
		pthread_mutex_unlock(&ctx->mutex);
		return EBUSY;
	}
	pthread_mutex_unlock(&ctx->mutex);
	for (e = ch->head; e; e = next) {
		next = e->next;
		free(e);
	}
	pthread_mutex_destroy(&ch->lock);
	close(channel->fd);
	free(ch);
	return 0;
}

/* Contract: see core.h. The entry is queued before the fd counts it. */
int sv_comp_channel_post(struct ibv_comp_channel *channel, struct ibv_cq *cq)
{
	struct sv_comp_channel *ch = sv_chan(channel);
	struct sv_cq_event *e = malloc(sizeof(*e)), *prev;
	uint64_t one = 1;
	int ret = 0;

	if (!e)
		return -ENOMEM;
	e->cq = cq;
	e->next = NULL;
	pthread_mutex_lock(&ch->lock);
	prev = ch->tail;
	if (prev)
		prev->next = e;
	else
		ch->head = e;
	ch->tail = e;
	if (write(channel->fd, &one, sizeof(one)) != sizeof(one)) {
		/* e is still the tail: nobody can take it before it is counted */
		ret = -errno;
		if (prev)
			prev->next = NULL;
		else
			ch->head = NULL;
		ch->tail = prev;
		free(e);
	}
	pthread_mutex_unlock(&ch->lock);
	return ret;
}

/* Contract: see core.h. The fd keeps the dropped entries' counts. */
unsigned int sv_comp_channel_forget(struct ibv_comp_channel *channel, struct ibv_cq *cq)
{
	struct sv_comp_channel *ch = sv_chan(channel);
	struct sv_cq_event **pp, *e, *last = NULL;
	unsigned int n = 0;

	pthread_mutex_lock(&ch->lock);
	pp = &ch->head;
	while ((e = *pp)) {
		if (e->cq == cq) {
			*pp = e->next;
			free(e);
			n++;
		} else {
			last = e;
			pp = &e->next;
		}
	}
	ch->tail = last;
	pthread_mutex_unlock(&ch->lock);
	return n;
}

/*
 * 0 with *cq and *cq_context of the oldest event, or -1 with errno from
 * read(2): EAGAIN when the application set O_NONBLOCK and none is queued.
 */
SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct sv_comp_channel *ch = sv_chan(channel);
	struct sv_cq_event *e;
	uint64_t n;

	for (;;) {
		if (read(channel->fd, &n, sizeof(n)) != sizeof(n))
			return -1;
		pthread_mutex_lock(&ch->lock);
		e = ch->head;
		if (e) {
			ch->head = e->next;
			if (!ch->head)
				ch->tail = NULL;
		}
		pthread_mutex_unlock(&ch->lock);
		if (e)
			break;
		/* the count of an entry that destroy_cq removed: wait for the next */
	}
	*cq = e->cq;
	*cq_context = e->cq->cq_context;
	free(e);
	return 0;
}

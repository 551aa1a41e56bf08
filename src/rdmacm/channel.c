/* SPDX-License-Identifier: MIT */
/*
 * channel.c - event channels and events.
 *
 * A channel is a FIFO of events and an eventfd whose counter is nonzero
 * exactly while the FIFO is not empty: the fd is readable (POLLIN) while
 * events wait. Both change only under cm.lock: the first event queued
 * writes the counter, taking the last one (or removing it: destroy,
 * migrate) reads it back, which never blocks since it is known to be
 * nonzero. A reader that finds the FIFO empty waits in poll(2) on the fd
 * without the lock, or fails with EAGAIN when the application set
 * O_NONBLOCK on it. Several threads may read one channel; each event
 * goes to one of them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmacm/cm.h"

/* Contract: see cm.h. */
int cm_channel_create(bool private_sync, struct cm_channel **out)
{
	struct cm_channel *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		int ret = -errno;

		free(c);
		return ret;
	}
	c->private_sync = private_sync;
	pthread_mutex_lock(&cm.lock);
	c->next = cm.channels;
	if (cm.channels)
		cm.channels->prev = c;
	cm.channels = c;
	c->linked = true;
	pthread_mutex_unlock(&cm.lock);
	*out = c;
	return 0;
}

/* Take `c` out of cm.channels (lock held): from here on it is not live. */
static void unlink_channel(struct cm_channel *c)
{
	if (!c->linked)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		cm.channels = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	c->linked = false;
}

/* Contract: see cm.h. */
bool cm_channel_live(const struct cm_channel *c)
{
	for (const struct cm_channel *i = cm.channels; i; i = i->next)
		if (i == c)
			return true;
	return false;
}

/* Contract: see cm.h. Queued events are freed with it. */
void cm_channel_free(struct cm_channel *c)
{
	struct cm_event *e, *n;

	if (!c)
		return;
	unlink_channel(c);
	for (e = c->head; e; e = n) {
		n = e->next;
		free(e);
	}
	close(c->ch.fd);
	free(c);
}

/* The FIFO became empty: clear the counter (nonzero until now, so no wait). */
static void clear_ready(struct cm_channel *c)
{
	uint64_t v;

	if (read(c->ch.fd, &v, sizeof(v)) < 0)
		(void)0;
}

/* An event is appended: the first one sets the counter. */
static void append(struct cm_channel *c, struct cm_event *e)
{
	uint64_t one = 1;

	e->next = NULL;
	e->chan = c;
	if (c->tail) {
		c->tail->next = e;
	} else {
		c->head = e;
		if (write(c->ch.fd, &one, sizeof(one)) < 0)
			(void)0; /* cannot overflow at 1 */
	}
	c->tail = e;
}

/* Contract: see cm.h. */
struct cm_event *cm_queue_event(struct cm_id *owner, enum rdma_cm_event_type type, int status,
				const void *pdata, size_t len)
{
	struct cm_channel *c = cm_chan_of(&owner->id);
	struct cm_event *e;

	if (!c) /* an orphan (cm_deliver and the API calls never get here with one) */
		return NULL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->owner = owner;
	e->ev.id = &owner->id;
	e->ev.event = type;
	e->ev.status = status;
	if (len > CM_PDATA_MAX)
		len = CM_PDATA_MAX;
	if (pdata && len)
		memcpy(e->pdata, pdata, len);
	e->ev.param.conn.private_data = len ? e->pdata : NULL;
	e->ev.param.conn.private_data_len = (uint8_t)len;
	append(c, e);
	return e;
}

/* Remove the events of `id` (as owner, or as the new id of a request) from its channel. */
static struct cm_event *unlink_events(struct cm_id *id)
{
	struct cm_channel *c = cm_chan_of(&id->id);
	struct cm_event **pp = &c->head, *taken = NULL, **tp = &taken, *e;
	bool had = c->head != NULL;

	c->tail = NULL;
	while ((e = *pp)) {
		if (e->owner == id || e->ev.id == &id->id) {
			*pp = e->next;
			e->next = NULL;
			*tp = e;
			tp = &e->next;
		} else {
			c->tail = e;
			pp = &e->next;
		}
	}
	if (had && !c->head)
		clear_ready(c);
	return taken;
}

/*
 * Free a queued event. A request nobody retrieved is refused and its id
 * freed, unless that id is `keep` (the one being destroyed). Lock held.
 */
static void drop_event(struct cm_event *e, const struct cm_id *keep)
{
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct cm_id *nid = cm_id_of(e->ev.id);

		if (e->owner->queued_reqs > 0)
			e->owner->queued_reqs--;
		if (nid != e->owner && nid != keep) {
			nid->listener = NULL;
			cm_id_abort(nid);
			cm_id_free(nid);
		}
	}
	free(e);
}

/* Contract: see cm.h. */
void cm_drop_events(struct cm_id *id)
{
	struct cm_event *e = unlink_events(id), *n;

	for (; e; e = n) {
		n = e->next;
		drop_event(e, id);
	}
}

/* Contract: see cm.h. The events keep their order. */
void cm_move_events(struct cm_id *id, struct cm_channel *to)
{
	struct cm_event *e = unlink_events(id), *n;

	for (; e; e = n) {
		n = e->next;
		append(to, e);
	}
}

/* Contract: see cm.h. */
void cm_wait_acked(struct cm_id *id)
{
	pthread_mutex_lock(&cm.lock);
	while (id->acked < id->reported)
		pthread_cond_wait(&cm.cond, &cm.lock);
	pthread_mutex_unlock(&cm.lock);
}

/*
 * A thread that waits on a destroyed channel, or calls on it afterwards,
 * never returns: as a read blocked on the kernel's rdma_cm descriptor
 * stays blocked when another thread closes it. The last waiter frees a
 * channel destroyed under it (`c`; NULL: a call after the destroy, on
 * memory that is gone). Lock held.
 */
static _Noreturn void park_dead(struct cm_channel *c)
{
	if (c && !c->waiters)
		cm_channel_free(c);
	pthread_mutex_unlock(&cm.lock);
	for (;;)
		pause();
}

/* Contract: see cm.h. */
int cm_get_event(struct cm_channel *c, struct rdma_cm_event **out)
{
	struct cm_event *e;
	int ret;

	pthread_mutex_lock(&cm.lock);
	if (!cm_channel_live(c))
		park_dead(NULL); /* destroyed before this call: docs/rdmacm.md */
	for (;;) {
		if (c->dead)
			park_dead(c);
		e = c->head;
		if (e) {
			c->head = e->next;
			if (!c->head) {
				c->tail = NULL;
				clear_ready(c);
			}
			e->next = NULL;
			e->owner->reported++;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				struct cm_id *nid = cm_id_of(e->ev.id);

				if (e->owner->queued_reqs > 0)
					e->owner->queued_reqs--;
				nid->listener = NULL;
				nid->req_retrieved = true;
			}
			pthread_mutex_unlock(&cm.lock);
			*out = &e->ev;
			return 0;
		}
		int fd = c->ch.fd;

		c->waiters++;
		pthread_mutex_unlock(&cm.lock);
		int fl = fcntl(fd, F_GETFL);
		struct pollfd p = {.fd = fd, .events = POLLIN};

		ret = 0;
		if (fl < 0)
			ret = -errno;
		else if (fl & O_NONBLOCK)
			ret = -EAGAIN;
		else if (poll(&p, 1, -1) < 0)
			ret = -errno; /* EINTR */
		pthread_mutex_lock(&cm.lock);
		c->waiters--;
		if (c->dead)
			park_dead(c);
		if (ret) {
			pthread_mutex_unlock(&cm.lock);
			return ret;
		}
	}
}

/* Contract: see cm.h. */
void cm_ack_event_locked(struct rdma_cm_event *ev)
{
	struct cm_event *e = (struct cm_event *)ev;

	e->owner->acked++;
	pthread_cond_broadcast(&cm.cond);
	free(e);
}

/* Contract: see cm.h. */
int cm_ack_event(struct rdma_cm_event *ev)
{
	pthread_mutex_lock(&cm.lock);
	cm_ack_event_locked(ev);
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

/* Contract: see cm.h. rdma-core's mapping of an event to a return value. */
int cm_sync_wait(struct cm_id *id)
{
	struct rdma_cm_event *ev;
	int ret;

	if (id->id.event) {
		cm_ack_event(id->id.event);
		id->id.event = NULL;
	}
	do
		ret = cm_get_event(cm_chan_of(&id->id), &ev);
	while (ret == -EINTR);
	if (ret)
		return ret;
	id->id.event = ev;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return -ECONNREFUSED;
	if (ev->status < 0)
		return ev->status;
	if (ev->status > 0)
		return -ev->status;
	return 0;
}

/* ---- exported ---- */

CM_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *c = NULL;
	int ret = cm_init();

	if (!ret)
		ret = cm_channel_create(false, &c);
	if (ret || !c) {
		errno = ret ? -ret : ENOMEM;
		return NULL;
	}
	return &c->ch;
}

/*
 * The ids still on a channel being destroyed (the application's error):
 * as the kernel destroys the ids of a closed rdma_cm descriptor, their
 * connections end, listeners stop, ports are free again, queued events
 * go (requests nobody retrieved are refused) and the ids no longer point
 * at the channel. Only rdma_destroy_id works on them from here on. Lock held.
 */
static void orphan_ids(struct cm_channel *c)
{
	struct cm_event *e = c->head, *n;

	if (e)
		clear_ready(c);
	c->head = c->tail = NULL;
	for (; e; e = n) {
		n = e->next;
		drop_event(e, NULL);
	}
	for (struct cm_id *i = cm.ids; i; i = i->next) {
		if (cm_chan_of(&i->id) != c)
			continue;
		cm_id_abort(i);
		i->state = CMA_DESTROYING; /* cm_deliver drops, find_listener skips */
		i->bound = false;
		i->orphan = true;
		i->id.channel = NULL;
	}
}

CM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *c = (struct cm_channel *)channel;

	if (!c)
		return;
	pthread_mutex_lock(&cm.lock);
	if (!cm_channel_live(c)) { /* destroyed already, or not ours: nothing to do */
		pthread_mutex_unlock(&cm.lock);
		return;
	}
	unlink_channel(c);
	orphan_ids(c);
	if (c->waiters) /* a thread in rdma_get_cm_event frees it (cm_get_event) */
		c->dead = true;
	else
		cm_channel_free(c);
	pthread_mutex_unlock(&cm.lock);
}

CM_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event)
		return cm_ret(-EINVAL);
	return cm_ret(cm_get_event((struct cm_channel *)channel, event));
}

CM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cm_ret(-EINVAL);
	return cm_ret(cm_ack_event(event));
}

/* SPDX-License-Identifier: MIT */
/*
 * rs_poll.c - rpoll and rselect over rsockets and ordinary descriptors.
 *
 * An rsocket's readiness comes from its CQ and its CM events: rpoll
 * processes both without blocking and reports POLLIN (data queued, or the
 * stream ended), POLLOUT (a send would proceed), POLLHUP (disconnected)
 * and POLLERR. With nothing ready it arms the CQs and sleeps in poll(2)
 * on their completion channels, the rsockets' event channels and the
 * ordinary descriptors, then looks again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>

#include "rdmacm/rs.h"

static short poll_one(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};

	return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

/* What the rsocket is ready for (lock taken here). */
static short rs_revents(struct rsocket *rs, short events)
{
	short r = 0;

	if (rs->type == SOCK_DGRAM)
		return ds_revents(rs, events);
	pthread_mutex_lock(&rs->lock);
	switch (rs->state) {
	case RS_LISTENING:
		r = poll_one(rs->ch->fd, POLLIN) & POLLIN;
		break;
	case RS_RESOLVING:
	case RS_CONNECTING:
		if (rs_connect_step(rs, false) != -EINPROGRESS)
			r = rs->state == RS_CONNECTED ? POLLOUT : POLLOUT | POLLERR;
		break;
	case RS_CONNECTED:
		rs_poll_cq(rs);
		rs_cm_events(rs);
		if (rs_have_rdata(rs) || !rs->readable || rs->state != RS_CONNECTED)
			r |= POLLIN;
		if (rs_can_send(rs))
			r |= POLLOUT;
		/* the hang-up shows once the data that came before it is read */
		if (rs->state == RS_DISCONNECTED && !rs_have_rdata(rs))
			r |= POLLHUP;
		else if (rs->state == RS_ERROR)
			r |= POLLERR;
		break;
	case RS_DISCONNECTED:
		rs_poll_cq(rs);
		r = POLLIN | (rs_have_rdata(rs) ? 0 : POLLHUP);
		break;
	case RS_ERROR:
		r = POLLIN | POLLERR | POLLHUP;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&rs->lock);
	return r & (events | POLLERR | POLLHUP);
}

/* One pass: every descriptor's revents; the number ready. */
static int scan(struct pollfd *fds, nfds_t nfds)
{
	int ready = 0;

	for (nfds_t i = 0; i < nfds; i++) {
		struct rsocket *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

		if (fds[i].fd < 0)
			fds[i].revents = 0;
		else if (rs)
			fds[i].revents = rs_revents(rs, fds[i].events);
		else
			fds[i].revents = poll_one(fds[i].fd, fds[i].events);
		ready += fds[i].revents != 0;
	}
	return ready;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	long long end = timeout > 0 ? now_ms() + timeout : 0;
	struct pollfd *set;
	int ready;

	set = calloc((2 + DS_MAX_QPS) * nfds + 1, sizeof(*set));
	if (!set)
		return (errno = ENOMEM, -1);
	for (;;) {
		nfds_t n = 0;
		int ms;

		ready = scan(fds, nfds);
		if (ready || !timeout)
			break;
		for (nfds_t i = 0; i < nfds; i++) {
			struct rsocket *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;

			if (fds[i].fd < 0)
				continue;
			if (!rs) {
				set[n++] =
					(struct pollfd){.fd = fds[i].fd, .events = fds[i].events};
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			if (rs->type == SOCK_DGRAM) {
				n += (nfds_t)ds_wait_fds(rs, set + n);
				pthread_mutex_unlock(&rs->lock);
				continue;
			}
			if (rs->cq && rs->state == RS_CONNECTED) {
				ibv_req_notify_cq(rs->cq, 0);
				set[n++] = (struct pollfd){.fd = rs->cch->fd, .events = POLLIN};
			}
			set[n++] = (struct pollfd){.fd = rs->ch->fd, .events = POLLIN};
			pthread_mutex_unlock(&rs->lock);
		}
		/* anything that came in while arming shows in the next scan */
		ready = scan(fds, nfds);
		if (ready)
			break;
		ms = timeout < 0 ? -1 : (int)(end - now_ms());
		if (timeout > 0 && ms <= 0)
			break;
		if (poll(set, n, ms) < 0) {
			ready = -1;
			break;
		}
		for (nfds_t i = 0; i < nfds; i++) { /* take the CQ events the wake-up left */
			struct rsocket *rs = fds[i].fd >= 0 ? rs_get(fds[i].fd) : NULL;
			struct ibv_cq *cq;
			void *ctx;

			if (!rs)
				continue;
			pthread_mutex_lock(&rs->lock);
			if (rs->type == SOCK_DGRAM)
				ds_ack_events(rs);
			while (rs->cch && !ibv_get_cq_event(rs->cch, &cq, &ctx))
				ibv_ack_cq_events(cq, 1);
			pthread_mutex_unlock(&rs->lock);
		}
	}
	free(set);
	return ready;
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	struct pollfd *p = calloc((size_t)(nfds > 0 ? nfds : 1), sizeof(*p));
	int n = 0, ret, ms;

	if (!p)
		return (errno = ENOMEM, -1);
	for (int fd = 0; fd < nfds; fd++) {
		short ev = 0;

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (ev || (exceptfds && FD_ISSET(fd, exceptfds)))
			p[n++] = (struct pollfd){.fd = fd, .events = ev};
	}
	ms = timeout ? (int)(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
	ret = rpoll(p, (nfds_t)n, ms);
	if (ret >= 0) {
		ret = 0;
		if (readfds)
			FD_ZERO(readfds);
		if (writefds)
			FD_ZERO(writefds);
		if (exceptfds)
			FD_ZERO(exceptfds);
		for (int i = 0; i < n; i++) {
			if (readfds && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				FD_SET(p[i].fd, readfds), ret++;
			if (writefds && (p[i].revents & POLLOUT))
				FD_SET(p[i].fd, writefds), ret++;
			if (exceptfds && (p[i].revents & POLLERR))
				FD_SET(p[i].fd, exceptfds), ret++;
		}
	}
	free(p);
	return ret;
}

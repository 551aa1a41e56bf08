/* SPDX-License-Identifier: MIT */
/*
 * ds_api.c - datagram rsockets (SOCK_DGRAM): making and freeing one, and
 * the calls rs_api.c hands over for them (contract in rs.h).
 *
 * The socket's number is the fd of a real UDP socket, kept non-blocking
 * (the application's O_NONBLOCK is rs->nonblock). Binding binds it, and
 * a specific address gets its QP at once (the device opens then);
 * rconnect only records the peer (rsend and rrecv then need no address).
 * Socket options other than SOL_RDMA go to the UDP socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/rs.h"

/* Contract: see rs.h. */
int ds_socket(int domain, int flags)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));
	int ret = -ENOMEM;

	if (!rs)
		return -ENOMEM;
	rs->fd = socket(domain, SOCK_DGRAM | SOCK_NONBLOCK | (flags & SOCK_CLOEXEC), 0);
	if (rs->fd < 0) {
		ret = -errno;
		free(rs);
		return ret;
	}
	rs->type = SOCK_DGRAM;
	rs->nonblock = flags & SOCK_NONBLOCK;
	rs->sq_size = DS_SQ;
	rs->rq_size = DS_RQ;
	pthread_mutex_init(&rs->lock, NULL);
	rs->ds_rx = calloc(DS_MAX_QPS * DS_RQ + 2, sizeof(*rs->ds_rx));
	rs->ds_udp_msg = malloc(DS_UDP6 + DS_MSG_MAX);
	if (rs->ds_rx && rs->ds_udp_msg)
		ret = rs_insert(rs);
	if (ret) {
		close(rs->fd);
		free(rs->ds_rx);
		free(rs->ds_udp_msg);
		pthread_mutex_destroy(&rs->lock);
		free(rs);
		return ret;
	}
	return rs->fd;
}

/* Contract: see rs.h. */
void ds_free(struct rsocket *rs)
{
	rs_remove(rs);
	ds_free_qps(rs);
	close(rs->fd);
	free(rs->ds_rx);
	free(rs->ds_udp_msg);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static bool is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any,
			       sizeof(in6addr_any));
	return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
}

/* Contract: see rs.h. */
int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	struct ds_qp *qp;
	int ret;

	pthread_mutex_lock(&rs->lock);
	ret = bind(rs->fd, addr, len) ? -errno : 0;
	if (!ret && !is_any(addr))
		ret = ds_get_qp(rs, addr, &qp);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* Contract: see rs.h. */
int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len)
{
	struct ds_dest *d;
	int ret;

	if (!addr || len < sizeof(struct sockaddr_in))
		return -EINVAL;
	pthread_mutex_lock(&rs->lock);
	ret = ds_get_dest(rs, addr, &d);
	if (!ret)
		rs->ds_conn = d;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* Contract: see rs.h. */
ssize_t ds_sendto(struct rsocket *rs, const void *buf, size_t len, int flags,
		  const struct sockaddr *to, socklen_t dstlen)
{
	struct ds_dest *d = NULL;
	ssize_t ret = 0;

	if (to && dstlen < sizeof(struct sockaddr_in))
		return -EINVAL;
	pthread_mutex_lock(&rs->lock);
	if (to)
		ret = ds_get_dest(rs, to, &d);
	else
		d = rs->ds_conn;
	if (!ret)
		ret = ds_send(rs, buf, len, flags, d);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* Contract: see rs.h. */
ssize_t ds_recvfrom(struct rsocket *rs, void *buf, size_t len, int flags, struct sockaddr *src,
		    socklen_t *srclen)
{
	ssize_t ret;

	pthread_mutex_lock(&rs->lock);
	ret = ds_recv(rs, buf, len, flags, src, srclen);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* Contract: see rs.h. */
int ds_setsockopt(struct rsocket *rs, int level, int name, const void *val, socklen_t len)
{
	if (level != SOL_RDMA)
		return setsockopt(rs->fd, level, name, val, len) ? -errno : 0;
	if (!val || len < sizeof(int))
		return -EINVAL;
	/* the queues have fixed sizes (DS_SQ, DS_RQ): accepted, kept as they are */
	switch (name) {
	case RDMA_SQSIZE:
	case RDMA_RQSIZE:
	case RDMA_INLINE:
		return 0;
	default:
		return -ENOTSUP;
	}
}

/* Contract: see rs.h. */
int ds_getsockopt(struct rsocket *rs, int level, int name, void *val, socklen_t *len)
{
	int v;

	if (level != SOL_RDMA)
		return getsockopt(rs->fd, level, name, val, len) ? -errno : 0;
	if (name == RDMA_SQSIZE)
		v = DS_SQ;
	else if (name == RDMA_RQSIZE)
		v = DS_RQ;
	else if (name == RDMA_INLINE)
		v = 0;
	else
		return -ENOTSUP;
	if (!val || !len || *len < sizeof(int))
		return -EINVAL;
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}

/* Contract: see rs.h. */
int ds_peername(struct rsocket *rs, struct sockaddr *addr, socklen_t *len)
{
	socklen_t n;

	if (!rs->ds_conn)
		return -ENOTCONN;
	n = ds_addr_len((struct sockaddr *)&rs->ds_conn->addr);
	if (addr && len) {
		memcpy(addr, &rs->ds_conn->addr, *len < n ? *len : n);
		*len = n;
	}
	return 0;
}

/* Contract: see rs.h. Readiness for rpoll (lock taken here). */
short ds_revents(struct rsocket *rs, short events)
{
	short r = 0;

	pthread_mutex_lock(&rs->lock);
	if (ds_poll(rs))
		r |= POLLERR;
	if (ds_readable(rs))
		r |= POLLIN;
	if (ds_writable(rs))
		r |= POLLOUT;
	pthread_mutex_unlock(&rs->lock);
	return r & (events | POLLERR);
}

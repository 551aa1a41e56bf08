/* SPDX-License-Identifier: MIT */
/*
 * rs_api.c - the rsockets calls: socket numbers, binding, listening,
 * accepting, connecting, data calls, shutdown and close, options, rfcntl.
 *
 * Socket numbers are the fds of the rsockets' event channels, so they are
 * unique among the process's descriptors; a table indexed by fd finds the
 * rsocket. A datagram rsocket (SOCK_DGRAM) is numbered by its UDP socket's
 * fd and its calls go to ds_api.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/rs.h"

static pthread_mutex_t tbl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsocket **tbl;
static int tbl_len;

/* Contract: see rs.h. */
struct rsocket *rs_get(int fd)
{
	struct rsocket *rs = NULL;

	pthread_mutex_lock(&tbl_lock);
	if (fd >= 0 && fd < tbl_len)
		rs = tbl[fd];
	pthread_mutex_unlock(&tbl_lock);
	return rs;
}

/* Contract: see rs.h. */
int rs_insert(struct rsocket *rs)
{
	pthread_mutex_lock(&tbl_lock);
	if (rs->fd >= tbl_len) {
		int n = tbl_len ? tbl_len : 64;
		struct rsocket **t;

		while (n <= rs->fd)
			n *= 2;
		t = realloc(tbl, (size_t)n * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&tbl_lock);
			return -ENOMEM;
		}
		memset(t + tbl_len, 0, (size_t)(n - tbl_len) * sizeof(*t));
		tbl = t;
		tbl_len = n;
	}
	tbl[rs->fd] = rs;
	pthread_mutex_unlock(&tbl_lock);
	return 0;
}

/* Contract: see rs.h. */
void rs_remove(struct rsocket *rs)
{
	pthread_mutex_lock(&tbl_lock);
	if (rs->fd >= 0 && rs->fd < tbl_len && tbl[rs->fd] == rs)
		tbl[rs->fd] = NULL;
	pthread_mutex_unlock(&tbl_lock);
}

/* Contract: see rs.h. The channel (its fd is the number) and defaults; no id. */
int rs_alloc(int type, struct rsocket **out)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));
	int ret;

	if (!rs)
		return -ENOMEM;
	rs->type = type;
	rs->sq_size = RS_SQ_SIZE;
	rs->rq_size = RS_RQ_SIZE;
	rs->inline_size = RS_INLINE;
	rs->sbuf_size = rs->rbuf_size = RS_BUF_SIZE;
	rs->readable = rs->writable = true;
	pthread_mutex_init(&rs->lock, NULL);
	rs->ch = rdma_create_event_channel();
	if (!rs->ch) {
		ret = -errno;
		free(rs);
		return ret;
	}
	/* the library waits itself; the application's O_NONBLOCK is rs->nonblock */
	fcntl(rs->ch->fd, F_SETFL, fcntl(rs->ch->fd, F_GETFL) | O_NONBLOCK);
	rs->fd = rs->ch->fd;
	ret = rs_insert(rs);
	if (ret) {
		rdma_destroy_event_channel(rs->ch);
		free(rs);
		return ret;
	}
	*out = rs;
	return 0;
}

/* Contract: see rs.h. Frees everything, the id (a DREQ if connected) last. */
void rs_free(struct rsocket *rs)
{
	if (rs->type == SOCK_DGRAM) {
		ds_free(rs);
		return;
	}
	rs_remove(rs);
	rs_free_resources(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->pending_dst)
		rdma_freeaddrinfo(rs->pending_dst);
	rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static int set_err(int ret)
{
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

static ssize_t set_err_sz(ssize_t ret)
{
	if (ret < 0) {
		errno = (int)-ret;
		return -1;
	}
	return ret;
}

CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	int flags = type & (SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rsocket *rs = NULL;
	int ret;

	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if ((domain == AF_INET || domain == AF_INET6) && type == SOCK_DGRAM &&
	    (!protocol || protocol == IPPROTO_UDP))
		return set_err(ds_socket(domain, flags));
	if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) || type != SOCK_STREAM ||
	    (protocol && protocol != IPPROTO_TCP))
		return set_err(-ENOTSUP);
	ret = rs_alloc(type, &rs);
	if (ret || !rs)
		return set_err(ret ? ret : -ENOMEM);
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
		ret = -errno;
		rs_free(rs);
		return set_err(ret);
	}
	rs->nonblock = flags & SOCK_NONBLOCK;
	if (!(flags & SOCK_CLOEXEC))
		fcntl(rs->fd, F_SETFD, 0);
	return rs->fd;
}

CM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return set_err(-EBADF);
	if (!addr || addrlen < sizeof(struct sockaddr_in))
		return set_err(-EINVAL);
	if (rs->type == SOCK_DGRAM)
		return set_err(ds_bind(rs, addr, addrlen));
	pthread_mutex_lock(&rs->lock);
	ret = rdma_bind_addr(rs->id, (struct sockaddr *)addr) ? -errno : 0;
	if (!ret)
		rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return set_err(ret);
}

CM_EXPORT int rlisten(int socket, int backlog)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return set_err(-EOPNOTSUPP);
	pthread_mutex_lock(&rs->lock);
	ret = rdma_listen(rs->id, backlog) ? -errno : 0;
	if (!ret)
		rs->state = RS_LISTENING;
	pthread_mutex_unlock(&rs->lock);
	return set_err(ret);
}

static void copy_addr(const struct sockaddr *sa, struct sockaddr *addr, socklen_t *len)
{
	socklen_t n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						  sizeof(struct sockaddr_in);

	if (!addr || !len)
		return;
	memcpy(addr, sa, *len < n ? *len : n);
	*len = n;
}

CM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *l = rs_get(socket), *rs;
	int ret;

	if (!l)
		return set_err(-EBADF);
	if (l->type == SOCK_DGRAM)
		return set_err(-EOPNOTSUPP);
	if (l->state != RS_LISTENING)
		return set_err(-EINVAL);
	pthread_mutex_lock(&l->lock);
	ret = rs_accept(l, &rs);
	pthread_mutex_unlock(&l->lock);
	if (ret)
		return set_err(ret);
	copy_addr(rdma_get_peer_addr(rs->id), addr, addrlen);
	return rs->fd;
}

CM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_get(socket);
	int ret;

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return set_err(ds_connect(rs, addr, addrlen));
	pthread_mutex_lock(&rs->lock);
	ret = rs_connect(rs, addr, addrlen);
	pthread_mutex_unlock(&rs->lock);
	return set_err(ret);
}

/* Connected, or a connect in progress driven one step; lock held. */
static int ready(struct rsocket *rs)
{
	if (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING) {
		int ret = rs_connect_step(rs, !rs->nonblock);

		return ret == -EINPROGRESS ? -EAGAIN : ret;
	}
	return 0;
}

/*
 * Contract: the start of rrecv and rsend: the rsocket of `socket` with its
 * lock held, a pending connect driven one step (ready) and its CM events
 * taken in. NULL when it cannot move data: *err is then -EBADF (no
 * rsocket) or ready's error, and the lock is not held.
 */
static struct rsocket *lock_ready(int socket, ssize_t *err)
{
	struct rsocket *rs = rs_get(socket);

	if (!rs) {
		*err = -EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	*err = ready(rs);
	if (*err) {
		pthread_mutex_unlock(&rs->lock);
		return NULL;
	}
	rs_cm_events(rs);
	return rs;
}

CM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return rrecvfrom(socket, buf, len, flags, NULL, NULL);
}

static ssize_t stream_recv(int socket, void *buf, size_t len, int flags)
{
	ssize_t ret;
	struct rsocket *rs = lock_ready(socket, &ret);

	if (!rs)
		return set_err_sz(ret);
	ret = rs_recv(rs, buf, len, flags);
	pthread_mutex_unlock(&rs->lock);
	return set_err_sz(ret);
}

CM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen)
{
	struct rsocket *rs = rs_get(socket);
	ssize_t ret;

	if (rs && rs->type == SOCK_DGRAM)
		return set_err_sz(ds_recvfrom(rs, buf, len, flags, src_addr, addrlen));
	ret = stream_recv(socket, buf, len, flags);
	if (ret >= 0 && rs && src_addr)
		copy_addr(rdma_get_peer_addr(rs->id), src_addr, addrlen);
	return ret;
}

CM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return set_err_sz(-ENOTSUP);
	if (!msg->msg_iovlen)
		return 0;
	return rrecv(socket, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len, flags);
}

CM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

CM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	if (iovcnt <= 0)
		return 0;
	return rrecv(socket, iov[0].iov_base, iov[0].iov_len, 0);
}

CM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct rsocket *rs = rs_get(socket);
	ssize_t ret;

	if (rs && rs->type == SOCK_DGRAM)
		return set_err_sz(ds_sendto(rs, buf, len, flags, NULL, 0));
	rs = lock_ready(socket, &ret);
	if (!rs)
		return set_err_sz(ret);
	ret = rs_send(rs, buf, len, flags);
	pthread_mutex_unlock(&rs->lock);
	return set_err_sz(ret);
}

CM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_get(socket);

	if (rs && rs->type == SOCK_DGRAM)
		return set_err_sz(ds_sendto(rs, buf, len, flags, dest_addr, addrlen));
	if (dest_addr)
		return set_err_sz(-EISCONN);
	return rsend(socket, buf, len, flags);
}

static ssize_t sendv(int socket, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t total = 0;

	for (int i = 0; i < iovcnt; i++) {
		ssize_t n = rsend(socket, iov[i].iov_base, iov[i].iov_len, flags);

		if (n < 0)
			return total ? total : n;
		total += n;
		if ((size_t)n < iov[i].iov_len)
			break;
	}
	return total;
}

CM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (msg->msg_control && msg->msg_controllen)
		return set_err_sz(-ENOTSUP);
	return sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

CM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

CM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return sendv(socket, iov, iovcnt, 0);
}

CM_EXPORT int rshutdown(int socket, int how)
{
	struct rsocket *rs = rs_get(socket);
	uint32_t ctrl;
	bool send = true;

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return 0;
	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_CONNECTED) {
		pthread_mutex_unlock(&rs->lock);
		return set_err(rs->state == RS_DISCONNECTED || rs->state == RS_ERROR ? 0 :
										       -ENOTCONN);
	}
	if (how == SHUT_RDWR) {
		ctrl = RS_CTRL_DISCONNECT;
		rs->readable = rs->writable = false;
	} else if (how == SHUT_WR) {
		ctrl = rs->readable ? RS_CTRL_SHUTDOWN : RS_CTRL_DISCONNECT;
		rs->writable = false;
	} else {
		rs->readable = false;
		ctrl = RS_CTRL_DISCONNECT;
		send = !rs->writable;
	}
	if (send) {
		rs_send_ctrl(rs, ctrl);
		rs_drain_sends(rs);
		if (ctrl == RS_CTRL_DISCONNECT) {
			struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

			rs->state = RS_DISCONNECTED;
			ibv_modify_qp(rs->id->qp, &a, IBV_QP_STATE); /* wake pollers */
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

CM_EXPORT int rclose(int socket)
{
	struct rsocket *rs = rs_get(socket);

	if (!rs)
		return EBADF;
	if (rs->state == RS_CONNECTED)
		rshutdown(socket, SHUT_RDWR);
	rs_free(rs);
	return 0;
}

CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_get(socket);

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return set_err(ds_peername(rs, addr, addrlen));
	if (rs->state < RS_CONNECTED)
		return set_err(-ENOTCONN);
	copy_addr(rdma_get_peer_addr(rs->id), addr, addrlen);
	return 0;
}

CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_get(socket);

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return getsockname(socket, addr, addrlen);
	copy_addr(rdma_get_local_addr(rs->id), addr, addrlen);
	return 0;
}

static int opt_int(const void *v, socklen_t len, int *out)
{
	if (!v || len < sizeof(int))
		return -EINVAL;
	memcpy(out, v, sizeof(int));
	return 0;
}

CM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	struct rsocket *rs = rs_get(socket);
	bool before = false;
	int v = 0, ret;

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return set_err(ds_setsockopt(rs, level, optname, optval, optlen));
	if (optname == SO_LINGER && level == SOL_SOCKET) {
		if (!optval || optlen < sizeof(rs->linger))
			return set_err(-EINVAL);
		memcpy(&rs->linger, optval, sizeof(rs->linger));
		return 0;
	}
	ret = opt_int(optval, optlen, &v);
	if (ret)
		return set_err(ret);
	before = rs->state < RS_RESOLVING && !rs->cq;
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v,
					sizeof(v));
			rs->reuseaddr = v;
			return 0;
		case SO_RCVBUF:
			if (before && v > 0)
				rs->rbuf_size = (uint32_t)v * 2 < 2 * RS_SNDLOWAT ?
							2 * RS_SNDLOWAT :
							(uint32_t)v * 2 & ~7u;
			return 0;
		case SO_SNDBUF:
			if (before && v > 0)
				rs->sbuf_size = (uint32_t)v * 2 < 2 * RS_SNDLOWAT ?
							2 * RS_SNDLOWAT :
							(uint32_t)v * 2 & ~7u;
			return 0;
		case SO_KEEPALIVE:
			rs->keepalive = v;
			return 0;
		case SO_OOBINLINE:
			rs->oobinline = v;
			return 0;
		default:
			break;
		}
		break;
	case IPPROTO_IP:
		if (optname == IP_TOS) {
			uint8_t tos = (uint8_t)v;

			return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos,
					       1) ?
				       -1 :
				       0;
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			rs->nodelay = v;
			return 0;
		case TCP_KEEPIDLE:
			return v > 0 ? 0 : set_err(-EINVAL);
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
		case TCP_CONGESTION:
			return 0;
		default:
			break;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			return rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v,
					       sizeof(v));
		break;
	case SOL_RDMA:
		if (!before)
			return set_err(-EINVAL);
		if (v < 0 || v > RS_MAX_QUEUE)
			return set_err(-EINVAL);
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint32_t)v;
			return 0;
		case RDMA_RQSIZE:
			rs->rq_size = (uint32_t)v;
			return 0;
		case RDMA_INLINE:
			rs->inline_size = (uint32_t)v;
			return 0;
		case RDMA_IOMAPSIZE:
			rs->iomap_size = v <= 128 ? (uint32_t)v : ((uint32_t)v + 255) & ~255u;
			return 0;
		default:
			break;
		}
		break;
	default:
		break;
	}
	return set_err(-ENOTSUP);
}

static int put_int(void *optval, socklen_t *optlen, int v)
{
	if (!optval || !optlen || *optlen < sizeof(int))
		return set_err(-EINVAL);
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	struct rsocket *rs = rs_get(socket);
	int v;

	if (!rs)
		return set_err(-EBADF);
	if (rs->type == SOCK_DGRAM)
		return set_err(ds_getsockopt(rs, level, optname, optval, optlen));
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_ERROR:
			pthread_mutex_lock(&rs->lock);
			if (rs->state == RS_RESOLVING || rs->state == RS_CONNECTING)
				rs_connect_step(rs, false);
			v = rs->err;
			rs->err = 0;
			pthread_mutex_unlock(&rs->lock);
			return put_int(optval, optlen, v);
		case SO_RCVBUF:
			return put_int(optval, optlen, (int)rs->rbuf_size);
		case SO_SNDBUF:
			return put_int(optval, optlen, (int)rs->sbuf_size);
		case SO_REUSEADDR:
			return put_int(optval, optlen, rs->reuseaddr);
		case SO_KEEPALIVE:
			return put_int(optval, optlen, rs->keepalive);
		case SO_OOBINLINE:
			return put_int(optval, optlen, rs->oobinline);
		case SO_LINGER:
			if (!optval || !optlen || *optlen < sizeof(rs->linger))
				return set_err(-EINVAL);
			memcpy(optval, &rs->linger, sizeof(rs->linger));
			*optlen = sizeof(rs->linger);
			return 0;
		default:
			break;
		}
		break;
	case IPPROTO_TCP:
		if (optname == TCP_NODELAY)
			return put_int(optval, optlen, rs->nodelay);
		if (optname == TCP_MAXSEG)
			return put_int(optval, optlen,
				       rs->id->route.num_paths ?
					       1 << (7 + rs->id->route.path_rec->mtu) :
					       2048);
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			return put_int(optval, optlen, (int)rs->sq_size);
		case RDMA_RQSIZE:
			return put_int(optval, optlen, (int)rs->rq_size);
		case RDMA_INLINE:
			return put_int(optval, optlen, (int)rs->inline_size);
		case RDMA_IOMAPSIZE:
			return put_int(optval, optlen, (int)rs->iomap_size);
		default:
			break;
		}
		break;
	default:
		break;
	}
	return set_err(-ENOTSUP);
}

CM_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rsocket *rs = rs_get(socket);
	va_list ap;
	long arg;

	if (!rs)
		return set_err(-EBADF);
	arg = 0;
	if (cmd == F_SETFL || cmd == F_SETFD) {
		va_start(ap, cmd);
		arg = va_arg(ap, long);
		va_end(ap);
	}
	switch (cmd) {
	case F_GETFL:
		return O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
	case F_SETFL:
		rs->nonblock = (arg & O_NONBLOCK) != 0;
		return 0;
	case F_GETFD:
	case F_SETFD:
		return fcntl(socket, cmd, (int)arg);
	default:
		return set_err(-ENOTSUP);
	}
}

/* repoll (rdma-core 65): not implemented. */
CM_EXPORT int repoll_create(int flags)
{
	(void)flags;
	return set_err(-ENOSYS);
}

CM_EXPORT int repoll_ctl(int epfd, int op, int fd, struct epoll_event *event)
{
	(void)epfd, (void)op, (void)fd, (void)event;
	return ENOSYS;
}

CM_EXPORT int repoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
	(void)epfd, (void)events, (void)maxevents, (void)timeout;
	return ENOSYS;
}

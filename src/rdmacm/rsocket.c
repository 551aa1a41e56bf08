/* SPDX-License-Identifier: MIT */
/*
 * rsocket.c - rsockets. Not implemented yet: the socket calls fail with
 * ENOSYS; rpoll and rselect work on ordinary descriptors (the CM examples
 * poll event channels with them); repoll_* fail with ENOSYS.
 */
#include <errno.h>
#include <stdarg.h>
#include <sys/select.h>

#include <rdma/rsocket.h>

#include "rdmacm/cm.h"

static int nosys(void)
{
	errno = ENOSYS;
	return -1;
}

CM_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	return nosys();
}

CM_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)addr, (void)addrlen;
	return socket < 0 ? nosys() : (errno = EBADF, -1);
}

CM_EXPORT int rlisten(int socket, int backlog)
{
	(void)socket, (void)backlog;
	errno = EBADF;
	return -1;
}

CM_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rshutdown(int socket, int how)
{
	(void)socket, (void)how;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rclose(int socket)
{
	(void)socket;
	return EBADF;
}

static ssize_t badf(void)
{
	errno = EBADF;
	return -1;
}

CM_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	(void)socket, (void)buf, (void)len, (void)flags;
	return badf();
}

CM_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
			    socklen_t *addrlen)
{
	(void)socket, (void)buf, (void)len, (void)flags, (void)src_addr, (void)addrlen;
	return badf();
}

CM_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	(void)socket, (void)msg, (void)flags;
	return badf();
}

CM_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	(void)socket, (void)buf, (void)len, (void)flags;
	return badf();
}

CM_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	(void)socket, (void)buf, (void)len, (void)flags, (void)dest_addr, (void)addrlen;
	return badf();
}

CM_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	(void)socket, (void)msg, (void)flags;
	return badf();
}

CM_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	(void)socket, (void)buf, (void)count;
	return badf();
}

CM_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket, (void)iov, (void)iovcnt;
	return badf();
}

CM_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	(void)socket, (void)buf, (void)count;
	return badf();
}

CM_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket, (void)iov, (void)iovcnt;
	return badf();
}

CM_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

CM_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}

CM_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)socket, (void)level, (void)optname, (void)optval, (void)optlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)socket, (void)level, (void)optname, (void)optval, (void)optlen;
	errno = EBADF;
	return -1;
}

CM_EXPORT int rfcntl(int socket, int cmd, ...)
{
	(void)socket, (void)cmd;
	errno = EBADF;
	return -1;
}

CM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)socket, (void)buf, (void)len, (void)prot, (void)flags, (void)offset;
	errno = EBADF;
	return -1;
}

CM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	(void)socket, (void)buf, (void)len;
	errno = EBADF;
	return -1;
}

CM_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	(void)socket, (void)buf, (void)count, (void)offset, (void)flags;
	errno = EBADF;
	return 0;
}

CM_EXPORT int repoll_create(int flags)
{
	(void)flags;
	return nosys();
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

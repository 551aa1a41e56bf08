/* SPDX-License-Identifier: MIT */
/*
 * rendezvous.c - the same-host rendezvous: a connection to a loopback
 * address reaches the process that listens there.
 *
 * On a host with a kernel RDMA device, 127.0.0.1 belongs to every
 * process, and rdma_cm delivers a request for 127.0.0.1:P to whichever
 * process listens on that address and port. Here each process has a
 * device of its own, with its own address, so a listener bound to
 * 127.0.0.1 in one process and a client resolving 127.0.0.1 in another
 * would each talk to their own device (rdma-core's Python tests bind
 * and connect both sides to the address of the device's interface).
 *
 * A listener bound to a specific 127/8 address A publishes itself under
 * the abstract AF_UNIX seqpacket name "softverbs-cm/<uid>/<ps>/<A>:<P>"
 * (ps: the port space, P: the port), for as long as it listens. The
 * name is host-wide (per network namespace) and goes with the process,
 * so a second listener on A:P in another process of the user fails with
 * EADDRINUSE, as two binds of one IP port do. The CM thread answers each
 * connection to the name with the 16-byte GID of the listener's device
 * and closes it. rdma_connect for a 127/8 destination asks the name of
 * its port space, address and port first: when a listener of our user
 * answers (SO_PEERCRED), the request goes to that GID; when none does,
 * to the device at the address as before. The question is asked at
 * connect time because the listener may start after the client
 * resolved the address (pyverbs' active side resolves first).
 *
 * Locking: the published sockets are this file's own, under reg_lock,
 * which is taken after cm.lock (publish, withdraw) or alone (the CM
 * thread, lookups), never before it. A socket is closed only under
 * reg_lock, and the CM thread accepts on a descriptor only while it is
 * still published, so it never touches a descriptor reused for
 * something else.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "rdmacm/cm.h"

enum {
	RDV_MAX = CM_RDV_POLL_MAX, /* published listeners per process */
	RDV_WAIT_MS = 1000, /* a listener that does not answer by then is ignored */
};

struct rdv_entry {
	int fd; /* the listening socket, -1 when free */
	uint8_t gid[16]; /* the listener's device */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdv_entry reg[RDV_MAX] = {[0 ... RDV_MAX - 1] = {.fd = -1}};
static bool atfork_set;

/* Contract: the abstract name of (ps, a, port) into *sun; returns its length. */
static socklen_t rdv_name(struct sockaddr_un *sun, int ps, struct in_addr a, uint16_t port)
{
	char ip[INET_ADDRSTRLEN];
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "softverbs-cm/%u/%d/%s:%u",
		     (unsigned)getuid(), ps, ip, port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* Contract: is `a` an address this file publishes and looks up (127/8)? */
bool cm_rdv_addr(struct in_addr a)
{
	return (ntohl(a.s_addr) >> 24) == 127;
}

static void rdv_atfork_prepare(void)
{
	pthread_mutex_lock(&reg_lock);
}

static void rdv_atfork_parent(void)
{
	pthread_mutex_unlock(&reg_lock);
}

/* A forked child has no CM thread: it must not keep the names of its parent's listeners. */
static void rdv_atfork_child(void)
{
	for (int i = 0; i < RDV_MAX; i++) {
		if (reg[i].fd >= 0)
			close(reg[i].fd);
		reg[i].fd = -1;
	}
	pthread_mutex_unlock(&reg_lock);
}

/* Contract: see cm.h. */
int cm_rdv_publish(struct cm_id *cid)
{
	struct in_addr a = cm_src_v4(cid);
	struct sockaddr_un sun;
	socklen_t len;
	int fd, i, ret;

	if (cid->rdv_fd >= 0 || !cid->dev || !cm_rdv_addr(a))
		return 0;
	len = rdv_name(&sun, cid->id.ps, a, ntohs(rdma_get_src_port(&cid->id)));
	pthread_mutex_lock(&reg_lock);
	if (!atfork_set && !pthread_atfork(rdv_atfork_prepare, rdv_atfork_parent, rdv_atfork_child))
		atfork_set = true;
	for (i = 0; i < RDV_MAX && reg[i].fd >= 0; i++)
		;
	if (i == RDV_MAX) {
		pthread_mutex_unlock(&reg_lock);
		return 0; /* out of slots: reachable at the device's own address only */
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		ret = -errno;
		pthread_mutex_unlock(&reg_lock);
		return ret;
	}
	if (bind(fd, (struct sockaddr *)&sun, len) || listen(fd, 64)) {
		ret = -errno;
		close(fd);
		pthread_mutex_unlock(&reg_lock);
		return ret;
	}
	reg[i].fd = fd;
	memcpy(reg[i].gid, cid->dev->gid.raw, 16);
	cid->rdv_fd = fd;
	pthread_mutex_unlock(&reg_lock);
	cm_wake(); /* the CM thread polls it from now on */
	return 0;
}

/* Contract: see cm.h. */
void cm_rdv_withdraw(struct cm_id *cid)
{
	if (cid->rdv_fd < 0)
		return;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < RDV_MAX; i++) {
		if (reg[i].fd == cid->rdv_fd) {
			close(reg[i].fd);
			reg[i].fd = -1;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	cid->rdv_fd = -1;
	cm_wake();
}

/* Contract: see cm.h. */
int cm_rdv_lookup(int ps, struct in_addr a, uint16_t port, uint8_t gid[16])
{
	struct timeval tv = {.tv_sec = RDV_WAIT_MS / 1000};
	struct sockaddr_un sun;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct pollfd p;
	ssize_t n;
	socklen_t slen = rdv_name(&sun, ps, a, port);
	int fd, ret = -ENOENT;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a full backlog makes connect wait: not longer than an answer may take */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, slen))
		goto out;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.uid != getuid())
		goto out; /* somebody else's name: not a listener of ours */
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&p, 1, RDV_WAIT_MS) != 1)
		goto out;
	n = recv(fd, gid, 16, MSG_DONTWAIT);
	if (n == 16)
		ret = 0;
out:
	close(fd);
	return ret;
}

/* Contract: see cm.h. */
int cm_rdv_pollfds(struct pollfd *p, int max)
{
	int n = 0;

	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < RDV_MAX && n < max; i++)
		if (reg[i].fd >= 0)
			p[n++] = (struct pollfd){.fd = reg[i].fd, .events = POLLIN};
	pthread_mutex_unlock(&reg_lock);
	return n;
}

/* Contract: see cm.h. */
void cm_rdv_serve(const struct pollfd *p, int n)
{
	pthread_mutex_lock(&reg_lock);
	for (int k = 0; k < n; k++) {
		if (!(p[k].revents & POLLIN))
			continue;
		for (int i = 0; i < RDV_MAX; i++) {
			int c;

			if (reg[i].fd != p[k].fd)
				continue; /* withdrawn since the poll */
			while ((c = accept4(reg[i].fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >=
			       0) {
				if (send(c, reg[i].gid, 16, MSG_NOSIGNAL) != 16)
					(void)0; /* the asker gave up: it goes to the address */
				close(c);
			}
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

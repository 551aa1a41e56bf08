/* SPDX-License-Identifier: MIT */
/*
 * net.c - the transport's network interface: UDP, or the same-host link
 * (shm.c) for a peer device that has one.
 *
 * Everything the requester, responder and completer send goes through
 * sw_net_send() or sw_net_send_batch(); everything received comes from
 * the progress thread's batch receive. Fault injection (SOFTVERBS_FAULT,
 * fault.c) sits above the choice of link on both sides.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

enum {
	SOCK_BUF_BYTES = 8 << 20
};

/* Set one buffer size, forcing past the sysctl cap where we may. */
static void set_buf(int fd, int opt, int force_opt, int bytes)
{
	if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)))
		setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

/*
 * Contract: large socket buffers (a window of full-size packets must fit
 * in the peer's receive buffer), DF on every packet (the ICRC covers the
 * IP header the kernel builds: DF with ID 0), and the destination
 * address of received packets. 0 or -errno.
 */
int sw_net_setup(int fd)
{
	int pmtu = IP_PMTUDISC_DO, pmtu6 = IPV6_PMTUDISC_DO, one = 1, domain = AF_INET;
	socklen_t dl = sizeof(domain);

	set_buf(fd, SO_SNDBUF, SO_SNDBUFFORCE, SOCK_BUF_BYTES);
	set_buf(fd, SO_RCVBUF, SO_RCVBUFFORCE, SOCK_BUF_BYTES);
	/* the kernel's count of datagrams our full buffer dropped, on every receive */
	if (setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one)))
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl))
		return -errno;
	if (domain == AF_INET6) {
		if (setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu6, sizeof(pmtu6)) ||
		    setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)))
			return -errno;
		return 0;
	}
	if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)))
		return -errno;
	if (setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)))
		return -errno;
	return 0;
}

/* Contract: see transport_priv.h. */
void sw_net_icrc_out(const struct sw_engine *eng, const struct sw_av *av, struct sw_icrc_ctx *c)
{
	const struct sw_port *port = &eng->dev->port;

	sw_icrc_ctx_set(c, sw_port_addr_of(port, sw_port_gid(port, av->sgid_index)), &av->dst);
}

/* Contract: see transport_priv.h. */
int sw_net_send_raw(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av)
{
	/* multicast always goes to the kernel, which fans it out (mcast.c) */
	int r = sw_sa_is_multicast(&av->dst) ? -ENOTCONN :
					       sw_shm_send(eng, &pkt, &len, NULL, 1, &av->dst);
	ssize_t n;

	if (r != -ENOTCONN)
		return r == 1 ? 0 : -EAGAIN; /* the link took it, or its ring is full */
	n = sendto(sw_net_fd(eng, av), pkt, len, 0, &av->dst.sa, sw_sa_len(&av->dst));
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
			atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
			return -EAGAIN;
		}
		return -errno;
	}
	atomic_fetch_add_explicit(&eng->cnt.tx_pkts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&eng->cnt.tx_bytes, len, memory_order_relaxed);
	return 0;
}

/* Contract: see transport_priv.h. Fault injection (fault.c) may drop, duplicate or delay. */
int sw_net_send(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av)
{
	if (eng->fault.cfg.on_tx)
		return sw_fault_send(eng, pkt, len, av);
	return sw_net_send_raw(eng, pkt, len, av);
}

static pthread_key_t tx_key;
static pthread_once_t tx_once = PTHREAD_ONCE_INIT;
static bool tx_key_ok;

static void tx_key_init(void)
{
	tx_key_ok = pthread_key_create(&tx_key, free) == 0;
}

/* Contract: see transport_priv.h. */
struct sw_tx_batch *sw_net_tx_batch(void)
{
	struct sw_tx_batch *b;

	pthread_once(&tx_once, tx_key_init);
	if (!tx_key_ok)
		return NULL;
	b = pthread_getspecific(tx_key);
	if (!b) {
		b = malloc(sizeof(*b));
		if (b && pthread_setspecific(tx_key, b)) {
			free(b);
			b = NULL;
		}
	}
	return b;
}

/*
 * A batch with packets by reference for a destination that has no link
 * any more: those never go on a wire (they count as sent and are lost:
 * the requester sends them again as copies), the rest go one by one.
 */
static uint32_t send_unref(struct sw_engine *eng, const struct sw_tx_batch *b,
			   const struct sw_av *av)
{
	uint32_t i;

	for (i = 0; i < b->n; i++)
		if (!b->ref[i].n && sw_net_send_raw(eng, b->buf[i], b->len[i], av) == -EAGAIN)
			break;
	return i;
}

/* Contract: see transport_priv.h. Without send-side faults: sendmmsg(2). */
uint32_t sw_net_send_batch(struct sw_engine *eng, const struct sw_tx_batch *b,
			   const struct sw_av *av)
{
	struct mmsghdr msg[SW_TX_BATCH];
	struct iovec iov[SW_TX_BATCH];
	const struct sw_fault *f = &eng->fault.cfg;
	uint32_t sent = 0, n = b->n, i;

	if (f->on_tx && (f->drop_ppm || f->dup_ppm || f->reorder_ppm)) {
		while (sent < n && sw_net_send(eng, b->buf[sent], b->len[sent], av) != -EAGAIN)
			sent++;
		return sent;
	}
	if (f->on_tx && f->again_ppm) {
		/* a full socket part-way through the batch */
		n = sw_fault_batch_room(eng, n);
		if (!n) {
			atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
			return 0;
		}
	}
	if (!sw_sa_is_multicast(&av->dst)) { /* multicast: always UDP (mcast.c) */
		const uint8_t *pkts[SW_TX_BATCH] = {NULL};
		int r;

		for (i = 0; i < n; i++)
			pkts[i] = b->buf[i];
		r = sw_shm_send(eng, pkts, b->len, b->ref, n, &av->dst);
		if (r != -ENOTCONN)
			return (uint32_t)r;
	}
	/* the link closed since these were built: lost, sent again as copies */
	for (i = 0; i < n; i++)
		if (b->ref[i].n)
			return send_unref(eng, b, av);
	memset(msg, 0, sizeof(msg));
	for (i = 0; i < n; i++) {
		iov[i].iov_base = (void *)(uintptr_t)b->buf[i];
		iov[i].iov_len = b->len[i];
		msg[i].msg_hdr.msg_name = (void *)(uintptr_t)&av->dst;
		msg[i].msg_hdr.msg_namelen = sw_sa_len(&av->dst);
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
	}
	while (sent < n) {
		int r = sendmmsg(sw_net_fd(eng, av), msg + sent, n - sent, 0);

		if (r > 0) {
			for (i = sent; i < sent + (uint32_t)r; i++)
				atomic_fetch_add_explicit(&eng->cnt.tx_bytes, b->len[i],
							  memory_order_relaxed);
			atomic_fetch_add_explicit(&eng->cnt.tx_pkts, (unsigned)r,
						  memory_order_relaxed);
			sent += (uint32_t)r;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) {
			atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
			break;
		} else {
			sent++; /* this one is lost, as sw_net_send() treats such errors */
		}
	}
	return sent;
}

/*
 * Contract: see transport_priv.h. Waits up to ~20 ms in all for socket room.
 * A full same-host ring leaves the socket writable: a send that fails
 * again after poll(2) said so sleeps 200 us before the next try.
 */
int sw_net_send_wait(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av)
{
	bool writable = false;
	int tries = 20, ret;

	while ((ret = sw_net_send(eng, pkt, len, av)) == -EAGAIN && tries--) {
		struct pollfd pfd = {.fd = sw_net_fd(eng, av), .events = POLLOUT};

		if (writable)
			usleep(200);
		writable = poll(&pfd, 1, 1) > 0;
	}
	return ret;
}

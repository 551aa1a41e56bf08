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
#include <netinet/udp.h>
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
void sw_net_offload(struct sw_engine *eng)
{
	int fd = eng->dev->port.fd, zero = 0, one = 1;

	atomic_store(&eng->gso, false);
	eng->gro = false;
	if (!eng->dev->cfg.gso)
		return;
	/* size 0: no default segmentation, only whether the kernel knows the option */
	if (!setsockopt(fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)))
		atomic_store(&eng->gso, true);
	eng->gro = !setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
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
	uint8_t sealed[SW_PKT_MAX];
	struct sw_icrc_ctx ic;
	ssize_t n;

	if (r != -ENOTCONN)
		return r == 1 ? 0 : -EAGAIN; /* the link took it, or its ring is full */
	if (len < SW_BTH_LEN + SW_ICRC_LEN || len > sizeof(sealed))
		return -EMSGSIZE;
	/* a wire: the ICRC now (the builders leave it to the socket; the link has none) */
	memcpy(sealed, pkt, len);
	sw_net_icrc_out(eng, av, &ic);
	sw_pkt_seal(sealed, len, &ic);
	n = sendto(sw_net_fd(eng, av), sealed, len, 0, &av->dst.sa, sw_sa_len(&av->dst));
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

/*
 * The threads' batches. Each stays on one list, never freed: a thread
 * that exits marks its own unused (the key's destructor) and the next
 * thread that needs one takes it. No lock, so a forked child can take
 * one whatever its parent's threads were doing; and from the list a
 * child's copies stay reachable (valgrind) after their threads are gone.
 */
static pthread_key_t tx_key;
static pthread_once_t tx_once = PTHREAD_ONCE_INIT;
static bool tx_key_ok;
static _Atomic(struct sw_tx_batch *) tx_all;

static void tx_batch_exit(void *p)
{
	struct sw_tx_batch *b = p;

	atomic_store_explicit(&b->used, false, memory_order_release);
}

static void tx_key_init(void)
{
	tx_key_ok = pthread_key_create(&tx_key, tx_batch_exit) == 0;
}

/* Contract: an unused batch of the list, now the caller's, or NULL. */
static struct sw_tx_batch *tx_batch_reuse(void)
{
	for (struct sw_tx_batch *b = atomic_load_explicit(&tx_all, memory_order_acquire); b;
	     b = b->next_all) {
		bool idle = false;

		if (atomic_compare_exchange_strong(&b->used, &idle, true))
			return b;
	}
	return NULL;
}

/* Contract: see transport_priv.h. */
struct sw_tx_batch *sw_net_tx_batch(void)
{
	struct sw_tx_batch *b;

	pthread_once(&tx_once, tx_key_init);
	if (!tx_key_ok)
		return NULL;
	b = pthread_getspecific(tx_key);
	if (b)
		return b;
	b = tx_batch_reuse();
	if (!b) {
		b = malloc(sizeof(*b));
		if (!b)
			return NULL;
		atomic_init(&b->used, true);
		b->next_all = atomic_load_explicit(&tx_all, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(
			&tx_all, &b->next_all, b, memory_order_release, memory_order_relaxed))
			;
	}
	if (pthread_setspecific(tx_key, b)) {
		tx_batch_exit(b);
		return NULL;
	}
	return b;
}

/*
 * Packets [from, end) of a batch, some by reference, for a destination
 * that has no link any more: those never go on a wire (they count as
 * sent and are lost: the requester sends them again as copies), the rest
 * go one by one. Returns the index of the first not sent.
 */
static uint32_t send_unref(struct sw_engine *eng, const struct sw_tx_batch *b, uint32_t from,
			   uint32_t end, const struct sw_av *av)
{
	uint32_t i;

	for (i = from; i < end; i++)
		if (!sw_ref_on(&b->ref[i]) &&
		    sw_net_send_raw(eng, b->buf[i], b->len[i], av) == -EAGAIN)
			break;
	return i;
}

/*
 * A wire: the ICRCs of packets [from, end) of `b` now (for IPv4 ID 0:
 * GSO changes them for the IDs of its segments). The builders leave them
 * to the socket, and the same-host link carries none.
 */
static void seal_batch(struct sw_engine *eng, struct sw_tx_batch *b, uint32_t from, uint32_t end,
		       const struct sw_av *av)
{
	struct sw_icrc_ctx ic;

	sw_net_icrc_out(eng, av, &ic);
	for (uint32_t i = from; i < end; i++)
		sw_pkt_seal(b->buf[i], b->len[i], &ic);
}

/*
 * One sendmmsg(2) worth of a batch: each message one packet, or, with
 * UDP GSO, a run of packets the kernel cuts at `gso_size` into one
 * datagram each (all of that size but the last, which may be shorter).
 */
struct net_msgs {
	struct mmsghdr msg[SW_TX_BATCH];
	struct iovec iov[SW_TX_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} cm[SW_TX_BATCH];
	uint32_t first[SW_TX_BATCH], npkt[SW_TX_BATCH]; /* each message's packets */
	uint32_t nmsg;
};

/*
 * Contract: how many packets from b->buf[i] one GSO send can carry: a
 * run of equal lengths, then at most one shorter packet, all within one
 * UDP datagram's payload. 1 when no run starts there.
 */
static uint32_t gso_run(const struct sw_tx_batch *b, uint32_t i, uint32_t n)
{
	size_t seg = b->len[i], total = seg;
	uint32_t k = 1;

	while (i + k < n && b->len[i + k] == seg && total + seg <= SW_MAX_UDP_PAYLOAD) {
		total += seg;
		k++;
	}
	if (i + k < n && b->len[i + k] < seg && total + b->len[i + k] <= SW_MAX_UDP_PAYLOAD)
		k++;
	return k;
}

/*
 * Contract: give the packets of GSO message `m` the ICRCs for the IPv4
 * IDs the kernel puts on its segments (an unconnected socket with DF:
 * 0 for the first, then 1, 2, ...), or back to ID 0's: the change is
 * its own inverse. Nothing for IPv6 or a one-packet message.
 */
static void gso_ids(struct sw_tx_batch *b, const struct net_msgs *m, uint32_t msg, bool v4)
{
	if (!v4)
		return;
	for (uint32_t j = 1; j < m->npkt[msg]; j++) {
		uint32_t p = m->first[msg] + j;

		sw_icrc_set_ip_id(b->buf[p], b->len[p], (uint16_t)j);
	}
}

/* Contract: the messages for packets [from, n) of `b` to `av`; GSO runs if `gso`. */
static void net_msgs_build(struct net_msgs *m, struct sw_tx_batch *b, uint32_t from, uint32_t n,
			   const struct sw_av *av, bool gso)
{
	uint32_t i = from;

	m->nmsg = 0;
	while (i < n) {
		struct msghdr *h = &m->msg[m->nmsg].msg_hdr;
		uint32_t k = gso ? gso_run(b, i, n) : 1;

		memset(h, 0, sizeof(*h));
		h->msg_name = (void *)(uintptr_t)&av->dst;
		h->msg_namelen = sw_sa_len(&av->dst);
		h->msg_iov = &m->iov[i];
		h->msg_iovlen = k;
		for (uint32_t j = 0; j < k; j++) {
			m->iov[i + j].iov_base = b->buf[i + j];
			m->iov[i + j].iov_len = b->len[i + j];
		}
		if (k > 1) {
			struct cmsghdr *c = &m->cm[m->nmsg].align;
			uint16_t seg = (uint16_t)b->len[i];

			memset(m->cm[m->nmsg].buf, 0, sizeof(m->cm[m->nmsg].buf));
			h->msg_control = m->cm[m->nmsg].buf;
			h->msg_controllen = sizeof(m->cm[m->nmsg].buf);
			c->cmsg_level = SOL_UDP;
			c->cmsg_type = UDP_SEGMENT;
			c->cmsg_len = CMSG_LEN(sizeof(seg));
			memcpy(CMSG_DATA(c), &seg, sizeof(seg));
		}
		m->first[m->nmsg] = i;
		m->npkt[m->nmsg] = k;
		gso_ids(b, m, m->nmsg, !sw_sa_is_v6(&av->dst));
		m->nmsg++;
		i += k;
	}
}

/* Contract: count the first `r` messages of `m` as sent; returns their packets. */
static uint32_t net_msgs_sent(struct sw_engine *eng, const struct net_msgs *m,
			      const struct sw_tx_batch *b, uint32_t r)
{
	uint32_t pkts = 0;

	for (uint32_t i = 0; i < r; i++) {
		for (uint32_t j = 0; j < m->npkt[i]; j++)
			atomic_fetch_add_explicit(&eng->cnt.tx_bytes, b->len[m->first[i] + j],
						  memory_order_relaxed);
		if (m->npkt[i] > 1) {
			atomic_fetch_add_explicit(&eng->cnt.gso_sends, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&eng->cnt.gso_pkts, m->npkt[i],
						  memory_order_relaxed);
		}
		pkts += m->npkt[i];
	}
	atomic_fetch_add_explicit(&eng->cnt.tx_pkts, pkts, memory_order_relaxed);
	if (r && m->npkt[r - 1] > 1)
		atomic_store_explicit(&eng->gso_strikes, 0, memory_order_relaxed);
	return pkts;
}

/*
 * Contract: the kernel refused GSO message `m->msg[0]` with `err`: an
 * old kernel (no UDP_SEGMENT), a route through a device that cannot
 * take it (EIO) or a size it will not cut (EINVAL, EMSGSIZE). True when
 * the packets should go again one by one; GSO goes off for the device
 * after SW_GSO_STRIKES such refusals in a row.
 */
static bool gso_refused(struct sw_engine *eng, const struct net_msgs *m, int err)
{
	if (m->npkt[0] < 2 || (err != EINVAL && err != EIO && err != EMSGSIZE &&
			       err != ENOPROTOOPT && err != EOPNOTSUPP))
		return false;
	atomic_fetch_add_explicit(&eng->cnt.gso_refused, 1, memory_order_relaxed);
	if (atomic_fetch_add_explicit(&eng->gso_strikes, 1, memory_order_relaxed) + 1 >=
	    SW_GSO_STRIKES)
		atomic_store_explicit(&eng->gso, false, memory_order_relaxed);
	return true;
}

/*
 * Packets [from, end) of `b`: over the link if there is one, else in
 * sendmmsg(2) calls, with runs of equal-size packets as UDP GSO sends if
 * `gso`. Returns the index of the first packet not sent (`end`: all).
 */
static uint32_t send_range(struct sw_engine *eng, struct sw_tx_batch *b, uint32_t from,
			   uint32_t end, const struct sw_av *av, bool gso)
{
	struct net_msgs m;
	uint32_t sent = from;

	if (!sw_sa_is_multicast(&av->dst)) { /* multicast: always UDP (mcast.c) */
		const uint8_t *pkts[SW_TX_BATCH] = {NULL};
		int r;

		for (uint32_t i = from; i < end; i++)
			pkts[i - from] = b->buf[i];
		r = sw_shm_send(eng, pkts, b->len + from, b->ref + from, end - from, &av->dst);
		if (r != -ENOTCONN)
			return from + (uint32_t)r;
	} else {
		gso = false;
	}
	/* the link closed since these were built: lost, sent again as copies */
	for (uint32_t i = from; i < end; i++)
		if (sw_ref_on(&b->ref[i]))
			return send_unref(eng, b, from, end, av);
	seal_batch(eng, b, from, end, av);
	while (sent < end) {
		int r, err;

		net_msgs_build(&m, b, sent, end, av, gso);
		r = sendmmsg(sw_net_fd(eng, av), m.msg, m.nmsg, 0);
		err = errno;
		for (uint32_t i = r > 0 ? (uint32_t)r : 0; i < m.nmsg; i++)
			gso_ids(b, &m, i, !sw_sa_is_v6(&av->dst)); /* back to ID 0: not sent */
		if (r > 0) {
			sent += net_msgs_sent(eng, &m, b, (uint32_t)r);
		} else if (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS) {
			atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
			break;
		} else if (gso_refused(eng, &m, err)) {
			gso = false; /* this batch's rest one by one */
		} else {
			sent += m.npkt[0]; /* lost, as sw_net_send() treats such errors */
		}
	}
	return sent;
}

/*
 * Send-side loss alone (drop=F): the batch goes as for no faults, in the
 * stretches between the packets drawn to be lost, so that a lossy stream
 * keeps the link's references and runs and the socket's GSO. Returns the
 * index of the first packet not sent; the lost ones before it count.
 */
static uint32_t send_lossy(struct sw_engine *eng, struct sw_tx_batch *b, uint32_t n,
			   const struct sw_av *av, bool gso)
{
	uint32_t i = 0;

	while (i < n) {
		uint32_t j = i, got;

		while (j < n && (b->fate[j] == SW_FATE_KEEP ||
				 (b->fate[j] == SW_FATE_DRAW &&
				  sw_fault_tx_kept(eng, b->ref[j].pkts) == b->ref[j].pkts)))
			j++;
		got = j > i ? send_range(eng, b, i, j, av, gso) : i;
		if (got < j)
			return got; /* socket or ring full: packet j goes another time */
		if (j < n)
			sw_fault_count_drops(eng, b->ref[j].pkts);
		i = j + 1;
	}
	return n;
}

/*
 * Contract: see transport_priv.h. Without send-side packet faults:
 * sw_shm_send() or sendmmsg(2), with runs of equal-size packets as UDP
 * GSO sends while the device has GSO (never to multicast). Drops alone
 * keep that (send_lossy); duplicates or reordering send one by one.
 */
uint32_t sw_net_send_batch(struct sw_engine *eng, struct sw_tx_batch *b, const struct sw_av *av)
{
	const struct sw_fault *f = &eng->fault.cfg;
	uint32_t sent = 0, n = b->n;
	bool gso = atomic_load_explicit(&eng->gso, memory_order_relaxed);

	if (sw_fault_one_by_one(f)) {
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
	if (f->on_tx && f->drop_ppm)
		return send_lossy(eng, b, n, av, gso);
	return send_range(eng, b, 0, n, av, gso);
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

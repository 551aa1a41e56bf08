/* SPDX-License-Identifier: MIT */
/*
 * progress.c - the device's progress thread.
 *
 * It is what lets RDMA WRITE, READ and atomics complete while the target
 * process makes no verbs call at all: it receives every packet for the
 * device, hands requests to the responder and responses to the
 * completer of the QP they name, waits at the end of each batch for the
 * copies it queued on CPU_ID placement workers (place_worker.c), sends
 * the ACKs owed, and runs the retransmit and RNR timers.
 *
 * Who receives. While it sleeps, an application thread that finds a CQ
 * empty takes a receive pass itself (sw_transport_poll): the receive
 * side is guarded by eng->rx_token, which this thread releases only
 * around poll(2). So an application that polls its CQs is served in its
 * own thread, without a cross-CPU wake-up (tens of microseconds on a
 * VM). What no CQ poll serves is the passive side: a WRITE or READ
 * target that waits on memory or computes. For that, after its own last
 * packet or a post, this thread keeps looking for SOFTVERBS_SPIN_US
 * (default 50), calling sched_yield(2) between empty polls, unless an
 * application thread found a CQ empty in that time (it receives itself;
 * two spinners per process would only share the cores: spin_now). Idle
 * longer than that, it sleeps in poll(2) until a packet, a wake-up or
 * the next timer (at most 100 ms), so it costs nothing measurable. With
 * SOFTVERBS_BUSY_POLL=1 it never sleeps.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/gsi.h"
#include "sw/transport/transport_priv.h"

enum {
	IDLE_SLEEP_NS = 100 * 1000 * 1000,
	SW_TIMER_BATCHES = 64, /* a full socket buffer of MTU packets, about */
	LEASE_NS = 200 * 1000, /* a leased sleep, at most */
	LEASE_FRESH_NS = 20 * 1000, /* a pass this recent: the packets found did not wait */
	LEASE_OFF_NS = 10 * 1000 * 1000, /* no lease after one that kept a packet waiting */
	LEASE_OFF_SHORT_NS = 2 * 1000 * 1000, /* ... after LEASE_CLEAN clean leased sleeps */
	LEASE_CLEAN = 16,
	RX_SETS = 8, /* slot sets of SW_RX_BATCH: batches taken before one fence */
	RX_SLOTS = RX_SETS * SW_RX_BATCH,
	PFD_SHM = 4, /* poll(2): the same-host links' descriptors start here */
	/*
	 * UDP GRO (SOFTVERBS_GSO): the address socket's datagrams go into
	 * RX_GRO_BUFS buffers of RX_GRO_BYTES per set, in the first
	 * RX_GRO_SETS sets only: 4 MiB of address space per device, of which
	 * only what coalesced datagrams fill becomes resident.
	 */
	RX_GRO_BUFS = SW_RX_BATCH,
	RX_GRO_BYTES = 64 << 10,
	RX_GRO_SETS = 2,
	RX_TOUCHED = 1024, /* QPs that may owe an ACK at the end of one batch */
};

/* socks_due() */
#define SOCK_IDLE_NS (1000 * 1000ull) /* sockets idle, links not: pace the sockets' reads */
#define SOCK_PACE_NS (50 * 1000ull) /* ... to one per this */

/* A receive buffer for the address socket when it delivers GRO datagrams. */
struct rx_big {
	uint8_t *buf; /* RX_GRO_BYTES, in rx_batch.gro_mem */
	union sw_sa src;
	struct {
		/* as rx_slot's, and the UDP_GRO segment size's 24 */
		_Alignas(size_t) char cbuf[128];
	} c;
	struct iovec iov;
};

struct rx_slot {
	uint8_t buf[SW_PKT_MAX];
	union sw_sa src;
	struct {
		/*
		 * CMSG_SPACE(sizeof(struct in6_pktinfo)) is 40, the SO_RXQ_OVFL
		 * count's 24; cmsghdr wants size_t alignment
		 */
		_Alignas(size_t) char cbuf[96];
	} c;
	struct iovec iov;
};

/*
 * The receive slots, in RX_SETS sets of SW_RX_BATCH. A batch fills one
 * set; the next set is used only while copies queued on CPU_ID placement
 * workers still read the earlier ones (rx_batch).
 */
struct rx_batch {
	struct rx_slot slot[RX_SLOTS];
	struct mmsghdr msg[RX_SLOTS];
	struct rx_big big[RX_GRO_SETS * RX_GRO_BUFS];
	struct mmsghdr big_msg[RX_GRO_SETS * RX_GRO_BUFS];
	uint8_t *gro_mem; /* the big buffers' memory; NULL without GRO */
	struct sw_qp *touched[RX_TOUCHED];
	unsigned int ntouched;
	unsigned int set; /* the set the next batch fills */
	unsigned int nreq; /* of this batch's packets, requests (lease_decide) */
	/* socket pacing (socks_due): when the sockets last gave packets, were read; links gave */
	uint64_t socks_seen_ns, socks_read_ns, links_seen_ns;
};

uint64_t sw_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void rx_batch_init(struct rx_batch *b)
{
	b->ntouched = 0;
	b->set = 0;
	b->socks_seen_ns = b->socks_read_ns = b->links_seen_ns = 0;
	for (unsigned int i = 0; i < RX_SLOTS; i++) {
		struct rx_slot *s = &b->slot[i];
		struct msghdr *h = &b->msg[i].msg_hdr;

		s->iov.iov_base = s->buf;
		s->iov.iov_len = sizeof(s->buf);
		memset(h, 0, sizeof(*h));
		h->msg_name = &s->src;
		h->msg_namelen = sizeof(s->src);
		h->msg_iov = &s->iov;
		h->msg_iovlen = 1;
		h->msg_control = s->c.cbuf;
		h->msg_controllen = sizeof(s->c.cbuf);
	}
	for (unsigned int i = 0; b->gro_mem && i < RX_GRO_SETS * RX_GRO_BUFS; i++) {
		struct rx_big *s = &b->big[i];
		struct msghdr *h = &b->big_msg[i].msg_hdr;

		s->buf = b->gro_mem + (size_t)i * RX_GRO_BYTES;
		s->iov.iov_base = s->buf;
		s->iov.iov_len = RX_GRO_BYTES;
		memset(h, 0, sizeof(*h));
		h->msg_name = &s->src;
		h->msg_iov = &s->iov;
		h->msg_iovlen = 1;
		h->msg_control = s->c.cbuf;
	}
}

/*
 * The local address a packet was sent to (IP_PKTINFO, IPV6_PKTINFO) at
 * the socket's port, else the socket's own: `bound`. *ovfl: the socket's
 * count of datagrams dropped at a full receive buffer (SO_RXQ_OVFL), if
 * the kernel attached it. *seg: the size of the segments of a GRO
 * datagram (UDP_GRO), untouched for a plain one.
 */
static union sw_sa rx_dst(const union sw_sa *bound, struct msghdr *h, uint32_t *ovfl, int *seg)
{
	union sw_sa d = *bound;
	struct cmsghdr *c;

	for (c = CMSG_FIRSTHDR(h); c; c = CMSG_NXTHDR(h, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
			memcpy(ovfl, CMSG_DATA(c), sizeof(*ovfl));
		} else if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO &&
			   c->cmsg_len >= CMSG_LEN(sizeof(*seg))) {
			memcpy(seg, CMSG_DATA(c), sizeof(*seg));
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO &&
			   !sw_sa_is_v6(&d)) {
			struct in_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			d.v4.sin_addr = pi.ipi_addr;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO &&
			   sw_sa_is_v6(&d)) {
			struct in6_pktinfo pi;

			memcpy(&pi, CMSG_DATA(c), sizeof(pi));
			d.v6.sin6_addr = pi.ipi6_addr;
		}
	}
	return d;
}

/* Remember a QP that may owe an ACK at the end of the batch (one ref each). */
static void touch(struct rx_batch *b, struct sw_qp *qp)
{
	for (unsigned int i = 0; i < b->ntouched; i++)
		if (b->touched[i] == qp)
			return;
	sw_qp_get(qp);
	b->touched[b->ntouched++] = qp;
}

/*
 * Does a QP of this type take the packet? Each type takes its own group;
 * an XRC INI QP takes only responses (it has no receive side), an XRC TGT
 * QP only requests (it sends nothing of its own).
 */
static bool qp_type_accepts(const struct sw_qp *qp, const struct sw_pkt *pkt)
{
	uint8_t cls = pkt->opcode & SW_OP_CLASS_MASK;

	switch (qp->ibv.qp_base.qp_type) {
	case IBV_QPT_UD:
		return cls == SW_OP_UD;
	case IBV_QPT_UC:
		return cls == SW_OP_UC;
	case IBV_QPT_XRC_SEND:
		return cls == SW_OP_XRC && (pkt->info->flags & SW_F_RESP);
	case IBV_QPT_XRC_RECV:
		return cls == SW_OP_XRC && (pkt->info->flags & SW_F_REQ);
	default:
		return cls == SW_OP_RC;
	}
}

/*
 * A connected QP takes packets only from its peer's IP address, as rxe
 * checks (qp->lock held). The UDP source port is not checked: RoCE v2
 * senders choose it per flow for ECMP entropy (rxe: per QP).
 */
static bool from_peer(const struct sw_qp *qp, const union sw_sa *src)
{
	enum ibv_qp_state st = qp->ibv.qp_base.state;

	if (qp->ibv.qp_base.qp_type == IBV_QPT_UD || st == IBV_QPS_RESET || st == IBV_QPS_INIT)
		return true;
	return sw_sa_same_addr(src, &qp->attr.av.dst);
}

/*
 * A packet whose ICRC matched only with a sender's own IPv4 ID or DF bit
 * (icrc.c): is the ID plausible for its sender (ipid.c)? Counted.
 */
static bool ip_id_ok(struct sw_engine *eng, const union sw_sa *src, const struct sw_pkt *pkt)
{
	bool gave_up, ok;

	ok = sw_ipid_plausible(&eng->ipid, src->v4.sin_addr.s_addr, pkt->ipv.ip_id, pkt->ipv.df,
			       sw_now_ns(), &gave_up);
	if (gave_up)
		atomic_fetch_add_explicit(&eng->cnt.ip_id_random, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(ok ? &eng->cnt.rx_ip_id : &eng->cnt.drops_ip_id, 1,
				  memory_order_relaxed);
	return ok;
}

/*
 * A checked packet to a multicast address: a UD SEND to QPN 0xffffff, for
 * every QP attached to the group (mcast.c); anything else is malformed.
 */
static void rx_mcast(struct sw_engine *eng, const struct sw_pkt *pkt, size_t len,
		     const union sw_sa *src, const union sw_sa *dst)
{
	if (pkt->dqpn != SW_QPN_MCAST || (pkt->opcode & SW_OP_CLASS_MASK) != SW_OP_UD) {
		atomic_fetch_add_explicit(&eng->cnt.drops_malformed, 1, memory_order_relaxed);
		return;
	}
	sw_mcast_deliver(eng, pkt, len, src, dst);
}

/*
 * Validate, find the QP, dispatch the packet of `len` bytes at `buf`
 * from `src`. Every drop is counted. `buf` stays untouched until the
 * batch's fence (placement workers may still read it). ref: NULL, or
 * where a same-host link's record came from (sw_shm_recv); ref->pid
 * nonzero for a record by reference (-1 when we never allowed it).
 */
static void rx_one(struct sw_engine *eng, struct rx_batch *b, const uint8_t *buf,
		   const union sw_sa *src, size_t len, const union sw_sa *dst,
		   const struct sw_ref_src *ref)
{
	struct sw_icrc_ctx ic;
	struct sw_pkt pkt;
	struct sw_qp *qp;
	int ret;

	sw_count_own(&eng->cnt.rx_pkts, 1);
	sw_count_own(&eng->cnt.rx_bytes, len);
	if (src->sa.sa_family != dst->sa.sa_family) {
		atomic_fetch_add_explicit(&eng->cnt.drops_malformed, 1, memory_order_relaxed);
		return;
	}
	sw_icrc_ctx_set(&ic, src, dst);
	if (ref && ref->pid) { /* no ICRC: it never was on a wire (shm_format.h) */
		ret = sw_pkt_parse_ref(&pkt, buf, len);
		ret = ret ? ret : sw_pkt_take_ref(&pkt, ref);
	} else {
		const struct sw_icrc_ctx *check = ref ? NULL : &ic; /* the link's carry no ICRC */

		ret = sw_pkt_parse(&pkt, buf, len, check);
		if (ret == -EPROTO && (buf[0] & SW_OP_CLASS_MASK) == SW_OP_RC)
			ret = sw_pkt_parse_bth(&pkt, buf, len, check); /* the responder NAKs */
		if (!ret && !pkt.ipv.recovered && !ic.v6)
			sw_ipid_zero(&eng->ipid, src->v4.sin_addr.s_addr);
		else if (!ret && pkt.ipv.recovered && !ip_id_ok(eng, src, &pkt)) /* never IPv6 */
			ret = -EILSEQ;
	}
	if (!ret && (pkt.pkey & 0x7fff) != (SW_DEFAULT_PKEY & 0x7fff))
		ret = -EACCES; /* another partition: the P_Key table holds only the default */
	if (ret) {
		atomic_fetch_add_explicit(ret == -EILSEQ ? &eng->cnt.drops_icrc :
							   &eng->cnt.drops_malformed,
					  1, memory_order_relaxed);
		return;
	}
	if (pkt.ref_pkts > 1) /* a run counts as the packets it stands for */
		sw_count_own(&eng->cnt.rx_pkts, pkt.ref_pkts - 1);
	sw_resp_held_before(&pkt); /* held READs are answered before it (resp_hold.c) */
	if (sw_sa_is_multicast(dst)) {
		b->nreq++;
		rx_mcast(eng, &pkt, len, src, dst);
		return;
	}
	if (pkt.dqpn == SV_GSI_QPN) { /* the general services QP: librdmacm's, if open */
		b->nreq++;
		sw_gsi_rx(eng, &pkt, src, dst);
		return;
	}
	qp = sw_qp_table_lookup(eng->dev, pkt.dqpn);
	if (!qp) {
		atomic_fetch_add_explicit(&eng->cnt.drops_no_qp, 1, memory_order_relaxed);
		return;
	}
	if (!qp_type_accepts(qp, &pkt)) {
		SW_COUNT(eng, qp, drops_malformed);
		sw_qp_put(qp);
		return;
	}
	if ((pkt.opcode & SW_OP_CLASS_MASK) == SW_OP_XRC)
		pkt.opcode &=
			(uint8_t)~SW_OP_CLASS_MASK; /* RC's operation; info keeps the XRCETH */
	pthread_mutex_lock(&qp->lock);
	if (!from_peer(qp, src)) { /* not this QP's packet: counted as no QP */
		atomic_fetch_add_explicit(&eng->cnt.drops_no_qp, 1, memory_order_relaxed);
	} else {
		bool req = !pkt.info || (pkt.info->flags & SW_F_REQ);

		SW_QP_COUNT(qp, rx_pkts, pkt.ref_pkts); /* the QP's: from its peer, of its type */
		SW_QP_COUNT(qp, rx_bytes, len);
		b->nreq += req;
		if (pkt.ref && pkt.ref_pkts > 1)
			sw_resp_handle_run(qp, &pkt, src, dst); /* by reference: a request */
		else if (pkt.placed && pkt.ref_pkts > 1)
			sw_comp_handle_run(qp, &pkt); /* placed READ responses */
		else if (req)
			sw_resp_handle(qp, &pkt, src, dst);
		else
			sw_comp_handle(qp, &pkt);
	}
	pthread_mutex_unlock(&qp->lock);
	if (b->ntouched < RX_TOUCHED)
		touch(b, qp);
	sw_qp_put(qp);
}

/* A datagram larger than any packet of ours: never a valid one cut short. */
static void rx_drop_oversize(struct sw_engine *eng)
{
	sw_count_own(&eng->cnt.rx_pkts, 1);
	atomic_fetch_add_explicit(&eng->cnt.drops_malformed, 1, memory_order_relaxed);
}

/* Send the ACKs the batch's QPs owe and drop their references. */
static void rx_flush_acks(struct rx_batch *b)
{
	sw_place_fence(); /* nothing acknowledged before it is placed */
	for (unsigned int t = 0; t < b->ntouched; t++) {
		struct sw_qp *qp = b->touched[t];

		pthread_mutex_lock(&qp->lock);
		sw_resp_flush_ack(qp);
		pthread_mutex_unlock(&qp->lock);
		sw_qp_put(qp);
	}
	b->ntouched = 0;
}

/*
 * Take up to the slots [first, end) off socket `fd`, bound to `bound`,
 * and handle them; returns how many were taken.
 */
static int rx_socket(struct sw_engine *eng, struct rx_batch *b, int first, int end, int fd,
		     const union sw_sa *bound, uint32_t *ovfl_seen)
{
	uint32_t ovfl = *ovfl_seen;
	int n, i, seg = 0;

	for (i = first; i < end; i++) {
		b->msg[i].msg_hdr.msg_namelen = sizeof(union sw_sa);
		b->msg[i].msg_hdr.msg_controllen = sizeof(b->slot[i].c.cbuf);
	}
	n = recvmmsg(fd, b->msg + first, (unsigned int)(end - first), MSG_DONTWAIT, NULL);
	if (n <= 0)
		return 0;
	for (i = first; i < first + n; i++) {
		union sw_sa dst;

		if (sw_fault_rx_drop(eng))
			continue;
		if (b->msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
			rx_drop_oversize(eng);
			continue;
		}
		dst = rx_dst(bound, &b->msg[i].msg_hdr, &ovfl, &seg);
		rx_one(eng, b, b->slot[i].buf, &b->slot[i].src, b->msg[i].msg_len, &dst, NULL);
	}
	if (ovfl != *ovfl_seen) { /* the kernel's count only grows (mod 2^32) */
		atomic_fetch_add_explicit(&eng->cnt.sock_overflows, (uint32_t)(ovfl - *ovfl_seen),
					  memory_order_relaxed);
		*ovfl_seen = ovfl;
	}
	return n;
}

/*
 * Contract: split a datagram of `len` bytes at `buf` into the packets a
 * GRO datagram holds (each `seg` bytes but the last; `seg` <= 0: one
 * packet) and handle each as if received alone, from the same source to
 * the same address. A packet larger than SW_PKT_MAX is dropped as the
 * plain path's truncation would.
 */
static void rx_split(struct sw_engine *eng, struct rx_batch *b, const uint8_t *buf, size_t len,
		     int seg, const union sw_sa *src, const union sw_sa *dst)
{
	size_t step = seg > 0 && (size_t)seg < len ? (size_t)seg : len, pkts = 0;

	if (!len) { /* an empty datagram: one malformed packet, as on the plain path */
		if (!sw_fault_rx_drop(eng))
			rx_one(eng, b, buf, src, 0, dst, NULL);
		return;
	}
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step;

		pkts++;
		if (sw_fault_rx_drop(eng))
			continue;
		if (n > SW_PKT_MAX)
			rx_drop_oversize(eng);
		else
			rx_one(eng, b, buf + off, src, n, dst, NULL);
	}
	if (pkts > 1) {
		atomic_fetch_add_explicit(&eng->cnt.gro_recvs, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&eng->cnt.gro_pkts, pkts, memory_order_relaxed);
	}
}

/*
 * Contract: take up to RX_GRO_BUFS datagrams off the address socket (UDP
 * GRO on) into set `set`'s big buffers and handle their packets; returns
 * the number of packets, *full whether every buffer was used. `probe`:
 * look with one buffer first (below).
 */
static int rx_gro(struct sw_engine *eng, struct rx_batch *b, unsigned int set, bool probe,
		  bool *full)
{
	const struct sw_port *port = &eng->dev->port;
	unsigned int first = set * RX_GRO_BUFS;
	uint32_t ovfl = eng->rx_ovfl[0];
	int n, pkts = 0;

	for (unsigned int i = first; i < first + RX_GRO_BUFS; i++) {
		b->big_msg[i].msg_hdr.msg_namelen = sizeof(union sw_sa);
		b->big_msg[i].msg_hdr.msg_controllen = sizeof(b->big[i].c.cbuf);
	}
	/*
	 * An application thread's pass (`probe`), made at every empty CQ
	 * poll, offers one buffer first and the others only when it filled:
	 * an empty look then hands the kernel 64 KiB instead of 2 MiB of
	 * buffers (valgrind checks all of them on every call). The progress
	 * thread looks after a wake-up or while traffic flows: one call.
	 */
	n = recvmmsg(port->fd, b->big_msg + first, probe ? 1 : RX_GRO_BUFS, MSG_DONTWAIT, NULL);
	if (probe && n == 1) {
		int more = recvmmsg(port->fd, b->big_msg + first + 1, RX_GRO_BUFS - 1, MSG_DONTWAIT,
				    NULL);

		n += more > 0 ? more : 0;
	}
	*full = n == RX_GRO_BUFS;
	for (int i = 0; i < n; i++) {
		struct mmsghdr *m = &b->big_msg[first + (unsigned int)i];
		int seg = 0;
		union sw_sa dst = rx_dst(&port->local, &m->msg_hdr, &ovfl, &seg);

		if (m->msg_hdr.msg_flags & MSG_TRUNC) { /* larger than any GRO datagram */
			rx_drop_oversize(eng);
			continue;
		}
		rx_split(eng, b, b->big[first + (unsigned int)i].buf, m->msg_len, seg,
			 &b->big[first + (unsigned int)i].src, &dst);
		pkts += seg > 0 && m->msg_len ?
				(int)((m->msg_len + (unsigned int)seg - 1) / (unsigned int)seg) :
				1;
	}
	if (ovfl != eng->rx_ovfl[0]) { /* as rx_socket() */
		atomic_fetch_add_explicit(&eng->cnt.sock_overflows,
					  (uint32_t)(ovfl - eng->rx_ovfl[0]), memory_order_relaxed);
		eng->rx_ovfl[0] = ovfl;
	}
	return pkts;
}

/* Where the group sockets' packets go in a batch (rx_group). */
struct rx_groups {
	struct sw_engine *eng;
	struct rx_batch *b;
	int next, end; /* the next free slot, the end of the set */
};

/* sw_mcast_rx_fn: one group socket's packets into the batch's free slots. */
static int rx_group(void *arg, int fd, const union sw_sa *bound, uint32_t *ovfl)
{
	struct rx_groups *g = arg;
	int n;

	if (g->next >= g->end)
		return -1;
	n = rx_socket(g->eng, g->b, g->next, g->end, fd, bound, ovfl);
	g->next += n;
	return n;
}

/*
 * Socket pacing, for a progress thread that busy-polls
 * (SOFTVERBS_BUSY_POLL=1). Each of its passes reads the sockets (the
 * address's, the link-local one, the multicast groups') with a system
 * call each, found empty nearly always where the traffic is on the
 * same-host links: in a busy-polled ping-pong, where four spinning
 * threads share two cores, the longest part of a progress thread's turn
 * on a core it shares with the application thread that waits for the
 * answer. So while the links gave packets in the last SOCK_IDLE_NS and
 * the sockets none, a pass reads them only if they were not read in the
 * last SOCK_PACE_NS: a packet arriving then waits that much more, once,
 * and from then on the sockets are read at every pass again. Passes of
 * application threads and of a progress thread that may sleep read them
 * every time (without the system call's pause, a thread that polls a CQ
 * in a WRITE 1 MiB stream cost the stream a tenth or more).
 */
static bool socks_due(struct rx_batch *b, uint64_t now)
{
	if (now - b->links_seen_ns >= SOCK_IDLE_NS || now - b->socks_seen_ns < SOCK_IDLE_NS ||
	    now - b->socks_read_ns >= SOCK_PACE_NS) {
		b->socks_read_ns = now;
		return true;
	}
	return false;
}

/*
 * One receive batch into the next slot set (eng->rx_token held); returns
 * the number of packets taken off the sockets and links. It ends by
 * waiting for the placements it queued (sw_place_fence) and sending the
 * ACKs owed, but, if `defer`, for a full batch with copies still queued
 * and a set left: then the next batch fills the next set while the
 * worker (kicked) copies, and the fence and the ACKs come after it (at
 * most RX_SETS batches, so one fence per RX_SLOTS packets of a stream
 * into a CPU_ID MR). The queued copies are this thread's: only the
 * progress thread defers, and it keeps the token until a batch that did not.
 * With `links_only` the sockets are left alone (no system call): what
 * they hold wakes the progress thread, which polls them in its sleep.
 */
static int rx_batch(struct sw_engine *eng, struct rx_batch *b, bool defer, bool links_only)
{
	const struct sw_port *port = &eng->dev->port;
	int first = (int)b->set * SW_RX_BATCH, end = first + SW_RX_BATCH, n = first, gro = 0, nsock;
	bool gro_full = false, more, pace = defer && eng->busy_poll;
	uint64_t now = pace ? sw_now_ns() : 0;

	b->nreq = 0;
	if (!links_only && pace && !socks_due(b, now))
		atomic_fetch_add_explicit(&eng->cnt.socks_paced, 1, memory_order_relaxed);
	else if (!links_only) {
		if (b->gro_mem)
			gro = rx_gro(eng, b, b->set, !defer, &gro_full);
		else
			n += rx_socket(eng, b, first, end, port->fd, &port->local,
				       &eng->rx_ovfl[0]);
		if (port->ll_fd >= 0 && n < end)
			n += rx_socket(eng, b, n, end, port->ll_fd, &port->ll, &eng->rx_ovfl[1]);
		if (n < end) {
			struct rx_groups g = {eng, b, n, end};

			n += sw_mcast_rx(eng, rx_group, &g);
		}
		if (pace && (n > first || gro))
			b->socks_seen_ns = now;
	}
	/* then the same-host links, into the slots left */
	nsock = n;
	for (; n < end; n++) {
		struct rx_slot *s = &b->slot[n];
		struct sw_ref_src ref = {0};
		int len = sw_shm_recv(eng, s->buf, sizeof(s->buf), &s->src, &ref);

		if (len <= 0)
			break;
		if (!sw_fault_rx_drop(eng))
			rx_one(eng, b, s->buf, &s->src, (size_t)len, &port->local, &ref);
	}
	sw_resp_held_flush(); /* nothing is held across batches (resp_hold.c) */
	if (pace && n > nsock)
		b->links_seen_ns = now;
	n -= first;
	more = n == SW_RX_BATCH || gro_full; /* the sockets may hold more */
	n += gro;
	/* copies still to land (CPU_ID workers, pulls): take another set first */
	if (defer && more && b->set + 1 < (b->gro_mem ? RX_GRO_SETS : RX_SETS) &&
	    (sw_place_pending() || sw_place_pull_pending())) {
		sw_place_kick();
		b->set++;
		return n;
	}
	b->set = 0;
	sw_place_fence();
	if (!n && !b->ntouched)
		return 0;
	/*
	 * Busy polling: an application thread that shares this core and spins
	 * on memory for what was just placed runs now, before the ACKs go out
	 * (a system call each): in a ping-pong its answer then leaves first.
	 */
	if (eng->busy_poll && defer && b->ntouched)
		sched_yield();
	rx_flush_acks(b);
	sw_shm_handled(eng);
	return n;
}

/* Contract: see transport_priv.h. */
int sw_rx_inject(struct sw_engine *eng, const uint8_t *buf, size_t len, const union sw_sa *src,
		 const union sw_sa *dst)
{
	struct rx_batch *b = malloc(sizeof(*b));

	if (!b)
		return -ENOMEM;
	if (len > sizeof(b->slot[0].buf)) {
		rx_drop_oversize(eng); /* as rx_batch() */
		free(b);
		return 0;
	}
	memcpy(b->slot[0].buf, buf, len);
	b->slot[0].src = *src;
	b->ntouched = 0;
	b->nreq = 0;
	rx_one(eng, b, b->slot[0].buf, &b->slot[0].src, len, dst, NULL);
	sw_resp_held_flush();
	rx_flush_acks(b); /* fences first, as rx_batch() */
	free(b);
	return 0;
}

/* Run the moderated CQs' timers (cq_mod.c); lowers *next to the earliest still pending. */
static void run_cq_timers(struct sw_engine *eng, uint64_t now, uint64_t *next)
{
	pthread_mutex_lock(&eng->cqmod_lock);
	for (struct sw_cq *cq = eng->cqmod; cq; cq = cq->mod_next) {
		uint64_t d = sw_cq_mod_tick(cq, now);

		if (d && d < *next)
			*next = d;
	}
	pthread_mutex_unlock(&eng->cqmod_lock);
}

/*
 * Run every active QP's timers and the moderated CQs'; returns the
 * earliest deadline still armed (or now + IDLE_SLEEP_NS).
 */
static uint64_t run_timers(struct sw_engine *eng, uint64_t now)
{
	uint64_t next = now + IDLE_SLEEP_NS;
	struct sw_qp **snap;
	uint32_t n, i;

	run_cq_timers(eng, now, &next);

	pthread_mutex_lock(&eng->active_lock);
	n = eng->nactive;
	if (n > eng->cap_snap) { /* rare: the active list grew past the copy */
		snap = realloc(eng->snap, eng->cap_active * sizeof(*snap));
		if (snap) {
			eng->snap = snap;
			eng->cap_snap = eng->cap_active;
		}
	}
	snap = n <= eng->cap_snap ? eng->snap : NULL;
	if (snap)
		for (i = 0; i < n; i++) {
			snap[i] = eng->active[i];
			sw_qp_get(snap[i]);
		}
	pthread_mutex_unlock(&eng->active_lock);
	if (!snap || !n)
		return next;
	for (i = 0; i < n; i++) {
		struct sw_qp *qp = snap[i];

		pthread_mutex_lock(&qp->lock);
		if (qp->req) {
			uint64_t probe;

			sw_req_timer(qp, now);
			probe = sw_probe_due_ns(qp);
			if (qp->req->deadline_ns && qp->req->deadline_ns < next)
				next = qp->req->deadline_ns;
			if (probe && probe < next)
				next = probe;
			if (qp->req->rnr_until_ns && qp->req->rnr_until_ns < next)
				next = qp->req->rnr_until_ns;
			if (qp->req->wait_writable && now + SW_TICK_NS < next)
				next = now + SW_TICK_NS;
		}
		pthread_mutex_unlock(&qp->lock);
		sw_qp_put(qp);
	}
	return next;
}

/* Contract: see transport_priv.h. */
int sw_progress_init(struct sw_engine *eng)
{
	eng->rx = malloc(sizeof(*eng->rx));
	if (!eng->rx)
		return -ENOMEM;
	eng->rx->gro_mem = NULL;
	if (eng->gro) {
		/* untouched pages cost nothing: malloc maps this size lazily */
		eng->rx->gro_mem = malloc((size_t)RX_GRO_SETS * RX_GRO_BUFS * RX_GRO_BYTES);
		if (!eng->rx->gro_mem) {
			free(eng->rx);
			eng->rx = NULL;
			return -ENOMEM;
		}
	}
	rx_batch_init(eng->rx);
	return 0;
}

/* Contract: see transport_priv.h. */
void sw_progress_fini(struct sw_engine *eng)
{
	if (eng->rx)
		free(eng->rx->gro_mem);
	free(eng->rx);
	free(eng->snap);
	eng->rx = NULL;
	eng->snap = NULL;
	eng->cap_snap = 0;
}

/*
 * Spin rather than sleep: this thread had work (packets, or a post that
 * woke it) within the last spin_ns, and, where application threads
 * receive themselves (app_rx), none of them found a CQ empty in that
 * time. One that polls takes the packets while this thread sleeps
 * (sw_transport_poll), and a second spinner in the process would only
 * take a core from it, or from the peer's on a host with as many
 * spinners as cores. What is left is the passive side: an application
 * that waits on memory for a WRITE, or computes, and needs this thread
 * awake for the next packet.
 */
static bool spin_now(const struct sw_engine *eng, uint64_t now, uint64_t worked_ns,
		     uint64_t polled_ns)
{
	if (now - worked_ns >= eng->spin_ns)
		return false;
	return !eng->app_rx || now - polled_ns >= eng->spin_ns;
}

/* The progress thread's view of its leases (lease_decide). */
struct lease_state {
	uint64_t off_until; /* no lease before */
	unsigned int clean; /* leased wake-ups in a row that found no packet waiting */
};

/*
 * Leased sleeps. While an application thread polls its CQs it takes the
 * packets itself (sw_transport_poll), and a doorbell that wakes this
 * thread for a link's packet only makes it find them gone, contend for
 * the receive token, and go back to sleep, which announces the next
 * sleep and so asks for the next doorbell: one system call on the
 * sending side and one wake-up here per batch of packets (a fifth of
 * the sending thread's time in a WRITE stream whose initiator polls).
 * So after a wake-up at which an application thread had taken a pass
 * in the last LEASE_FRESH_NS, the next sleep is leased: it does not
 * announce itself, so the links' producers do not ring, and it lasts at
 * most LEASE_NS. A lease goes on while application threads keep taking
 * passes. An application that stops polling leaves a packet waiting at
 * most that long (twice at the boundary), and once in a while: a leased
 * wake-up that finds packets no pass took (sw_lease_stalled: none since
 * the sleep began, or requests and none in the last SW_LEASE_STALE_NS)
 * counts a stall and ends leases for LEASE_OFF_NS. That is the ping-pong
 * whose application polls its CQ for its own completion, then watches
 * memory for the peer's WRITE: at most one stall per LEASE_OFF_NS.
 * req_notify_cq ends a lease at once (sw_transport_unlease): an
 * application arms a CQ to wait without polling. The UDP socket and the
 * wake-up descriptor wake this thread as ever; only the links' doorbells
 * are spared.
 *
 * `passes` and `notifies` are the counts when the thread went to sleep;
 * `n` what the first pass after the wake-up took, `reqs` how many of
 * them were requests.
 */
static void lease_decide(struct sw_engine *eng, int n, unsigned int reqs, uint64_t passes,
			 unsigned int notifies, uint64_t now, struct lease_state *ls)
{
	bool polled = atomic_load_explicit(&eng->cnt.app_passes, memory_order_relaxed) != passes;
	bool leased = atomic_load_explicit(&eng->leased, memory_order_relaxed);
	int64_t age = (int64_t)(now - atomic_load_explicit(&eng->pass_ns, memory_order_relaxed));

	if (leased && sw_lease_stalled(n, reqs, polled, age)) {
		atomic_fetch_add_explicit(&eng->cnt.lease_stalls, 1, memory_order_relaxed);
		ls->off_until =
			now + (ls->clean >= LEASE_CLEAN ? LEASE_OFF_SHORT_NS : LEASE_OFF_NS);
		ls->clean = 0;
		atomic_store_explicit(&eng->leased, false, memory_order_relaxed);
		return;
	}
	if (leased)
		ls->clean++;
	if (!polled) {
		atomic_store_explicit(&eng->leased, false, memory_order_relaxed);
		ls->clean = 0;
		return;
	}
	if (age > LEASE_FRESH_NS || now < ls->off_until || !eng->shm)
		return;
	/* store, then load, against sw_transport_unlease's add, then load */
	atomic_store(&eng->leased, true);
	if (atomic_load(&eng->notifies) != notifies)
		atomic_store(&eng->leased, false);
}

/* Contract: the progress thread's body; returns when eng->stop is set. */
void *sw_progress_main(void *arg)
{
	struct sw_engine *eng = arg;
	struct rx_batch *b = eng->rx;
	/* when it last had work, and last saw an application poll an empty CQ */
	uint64_t next_timer = 0, worked_ns = 0, polled_ns = 0;
	unsigned int busy = 0; /* nonempty batches since the timers last ran */
	/* leased sleeps: passes and notifies at the last sleep; lease_decide()'s state */
	uint64_t slept_passes = 0;
	unsigned int slept_notifies = 0;
	struct lease_state ls = {0};
	bool woke = false; /* the next batch is the first after a sleep */

	sem_post(&eng->started);
	pthread_mutex_lock(&eng->rx_token); /* released only to sleep */
	while (!atomic_load(&eng->stop)) {
		int n = rx_batch(eng, b, true, false);
		uint64_t now;

		atomic_fetch_add_explicit(&eng->sweeps, 1, memory_order_release);

		/* the ACKs just handled may have freed budget: serve the line */
		if (atomic_load_explicit(&eng->budget.nwait, memory_order_relaxed))
			sw_budget_serve(eng);
		now = sw_now_ns();
		if (n > 0)
			worked_ns = now;
		if (woke) {
			woke = false;
			lease_decide(eng, n, b->nreq, slept_passes, slept_notifies, now, &ls);
		}

		/*
		 * Timers only once the socket is empty: after a stall (this
		 * thread not scheduled for longer than a retransmit timeout)
		 * the ACKs that retire the work are still queued, or are about
		 * to be sent by this very batch, and a timer run now would
		 * retransmit what they acknowledge. A receive flood delays the
		 * timers by at most SW_TIMER_BATCHES batches.
		 */
		if (n > 0 && ++busy < SW_TIMER_BATCHES)
			continue;
		busy = 0;
		if (now >= next_timer) {
			atomic_store(&eng->timers_at, UINT64_MAX);
			next_timer = run_timers(eng, now);
			atomic_store(&eng->timers_at, next_timer);
			sw_shm_service(eng, now);
		} else {
			/*
			 * Links asking to be accepted (at most every 1 ms): a
			 * target with no timer of its own, kept awake by UDP
			 * traffic, took them only at its 100 ms idle tick, so a
			 * new same-host flow went over UDP that long.
			 */
			sw_shm_accept_due(eng, now);
		}
		if (n > 0)
			continue;
		if (atomic_load_explicit(&eng->dev->app_polls, memory_order_relaxed)) {
			atomic_store_explicit(&eng->dev->app_polls, false, memory_order_relaxed);
			polled_ns = now;
		}
		if (eng->busy_poll || spin_now(eng, now, worked_ns, polled_ns)) {
			/*
			 * Spin, but let another thread that waits for this core
			 * run: with more busy threads than cores (two processes
			 * on two cores, each with a polling application thread)
			 * a spinner that never yields holds its core for a whole
			 * time slice. Alone on its core, sched_yield returns at once.
			 */
			if (atomic_exchange(&eng->wake_pending, false)) {
				next_timer = 0; /* someone armed a timer or queued work */
				worked_ns = now;
			}
			sched_yield();
			continue;
		}

		/*
		 * the address's socket, the wake-up, the link-local socket (or -1:
		 * ignored), the multicast groups' sockets, links
		 */
		struct pollfd pfd[PFD_SHM + SW_SHM_POLL_MAX] = {
			{.fd = eng->dev->port.fd, .events = POLLIN},
			{.fd = eng->wake_fd, .events = POLLIN},
			{.fd = eng->dev->port.ll_fd, .events = POLLIN},
			{.fd = sw_mcast_pollfd(eng), .events = POLLIN},
		};
		uint64_t wait_ns = next_timer > now ? next_timer - now : 0;
		bool lease = atomic_load_explicit(&eng->leased, memory_order_relaxed);
		struct timespec ts;
		int ready;
		int nshm = sw_shm_pollfds(eng, pfd + PFD_SHM, SW_SHM_POLL_MAX);

		if (lease && wait_ns > LEASE_NS)
			wait_ns = LEASE_NS;
		ts.tv_sec = (time_t)(wait_ns / 1000000000);
		ts.tv_nsec = (long)(wait_ns % 1000000000);
		/*
		 * Announce the sleep (but for a leased one), then look for a
		 * wake-up once more: a sw_engine_wake() before the announcement
		 * left no eventfd count (see there). The same for the links'
		 * producers.
		 */
		if (!sw_shm_sleep_begin(eng, !lease))
			continue;
		atomic_store(&eng->sleeping, true);
		if (atomic_exchange(&eng->wake_pending, false)) {
			atomic_store(&eng->sleeping, false);
			sw_shm_sleep_end(eng);
			next_timer = 0; /* someone armed a timer or queued work */
			worked_ns = now;
			continue;
		}
		atomic_fetch_add_explicit(&eng->cnt.sleeps, 1, memory_order_relaxed);
		if (lease)
			atomic_fetch_add_explicit(&eng->cnt.leased_sleeps, 1, memory_order_relaxed);
		slept_passes = atomic_load_explicit(&eng->cnt.app_passes, memory_order_relaxed);
		slept_notifies = atomic_load(&eng->notifies);
		woke = true;
		/*
		 * Asleep, the receive side is free for the application threads
		 * that poll their CQs (sw_transport_poll). A link's descriptor
		 * that one of them closes meanwhile only ends the poll early.
		 */
		pthread_mutex_unlock(&eng->rx_token);
		ready = ppoll(pfd, (nfds_t)(PFD_SHM + nshm), &ts, NULL);
		pthread_mutex_lock(&eng->rx_token);
		atomic_store(&eng->sleeping, false);
		sw_shm_sleep_end(eng);
		if (ready > 0 && nshm)
			sw_shm_ready(eng, pfd + PFD_SHM, nshm, sw_now_ns());
		if (ready > 0 && (pfd[1].revents & POLLIN)) {
			uint64_t v;

			if (read(eng->wake_fd, &v, sizeof(v)) < 0)
				(void)0;
			atomic_store(&eng->wake_pending, false);
			next_timer = 0; /* someone armed a timer or queued work */
			worked_ns = sw_now_ns();
		}
	}
	rx_flush_acks(b); /* what a last deferred batch still owes */
	pthread_mutex_unlock(&eng->rx_token);
	return NULL;
}

static atomic_uint fork_gen;
static atomic_bool fork_tracked; /* the handler below is registered */

static void fork_child(void)
{
	atomic_fetch_add_explicit(&fork_gen, 1, memory_order_relaxed);
}

static void fork_gen_setup(void)
{
	/* out of memory: no receive pass in an application thread at all */
	atomic_store(&fork_tracked, !pthread_atfork(NULL, NULL, fork_child));
}

/* Contract: see transport_priv.h. */
unsigned int sw_fork_gen_now(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fork_gen_setup);
	return atomic_load_explicit(&fork_gen, memory_order_relaxed);
}

/* Contract: see sw/transport.h. Store-then-load against lease_decide(). */
void sw_transport_unlease(struct sw_dev *dev)
{
	struct sw_engine *eng = dev->eng;

	if (!eng)
		return;
	atomic_fetch_add(&eng->notifies, 1);
	if (atomic_load(&eng->leased) && atomic_exchange(&eng->leased, false))
		sw_engine_wake(eng); /* a leased sleep: sleep again, announced */
}

/*
 * Contract: see sw/transport.h. Only while the progress thread sleeps:
 * awake, it takes the packets itself, and a second thread at the
 * sockets would only contend with it. The pass fences and sends its
 * ACKs before it returns the token (no deferral: the copies it queues
 * are this thread's); the timers stay the progress thread's.
 */
bool sw_transport_poll(struct sw_dev *dev, bool links_only)
{
	struct sw_engine *eng = dev->eng;
	int n;

	/* sleeping, read before the trylock too: no write to the token's line while it is awake */
	if (!eng || !eng->app_rx || (links_only && !eng->shm) ||
	    !atomic_load_explicit(&eng->sleeping, memory_order_relaxed) ||
	    !atomic_load_explicit(&fork_tracked, memory_order_relaxed) ||
	    eng->fork_gen != atomic_load_explicit(&fork_gen, memory_order_relaxed) ||
	    pthread_mutex_trylock(&eng->rx_token))
		return false;
	if (!atomic_load_explicit(&eng->sleeping, memory_order_relaxed)) {
		pthread_mutex_unlock(&eng->rx_token); /* not in poll(2): starting or ending */
		return false;
	}
	n = rx_batch(eng, eng->rx, false, links_only);
	atomic_fetch_add_explicit(&eng->sweeps, 1, memory_order_release);
	if (atomic_load_explicit(&eng->budget.nwait, memory_order_relaxed))
		sw_budget_serve(eng);
	atomic_store_explicit(&eng->pass_ns, sw_now_ns(), memory_order_relaxed);
	pthread_mutex_unlock(&eng->rx_token);
	atomic_fetch_add_explicit(&eng->cnt.app_passes, 1, memory_order_relaxed);
	if (n > 0)
		atomic_fetch_add_explicit(&eng->cnt.app_pkts, (unsigned int)n,
					  memory_order_relaxed);
	return n > 0;
}

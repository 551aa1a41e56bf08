/* SPDX-License-Identifier: MIT */
/*
 * gsi.c - the general services endpoint (QP 1) of the device: a queue of
 * received MADs filled by the progress thread and a send path that
 * builds RoCE v2 UD packets from QP 1 to QP 1. Contract in sw/gsi.h.
 *
 * The endpoint hangs off the engine (eng->gsi), guarded by one lock of
 * this file: the progress thread takes it per GSI packet (CM traffic
 * only), open, close and detach take it to change the pointer.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sw/gsi.h"
#include "sw/transport/transport_priv.h"

struct gsi_entry {
	struct softverbs_gsi_addr addr;
	uint8_t mad[SV_GSI_MAD_LEN];
};

struct softverbs_gsi {
	struct sw_engine *eng; /* NULL once detached */
	int efd; /* eventfd counting queued MADs (semaphore mode) */
	uint32_t psn; /* next BTH PSN to send */
	uint32_t head, count; /* ring of queued MADs */
	struct gsi_entry q[SV_GSI_QUEUE_MAX];
};

static pthread_mutex_t gsi_lock = PTHREAD_MUTEX_INITIALIZER;

static void gid_of(uint8_t gid[16], const union sw_sa *a)
{
	union ibv_gid g;

	sw_sa_gid(a, &g);
	memcpy(gid, g.raw, 16);
}

/* Contract: see sw/gsi.h. */
SV_EXPORT int softverbs_gsi_open(struct ibv_context *ctx, struct softverbs_gsi **out)
{
	struct softverbs_gsi *g;
	struct sw_engine *eng;

	if (!ctx || ctx->device->transport_type != IBV_TRANSPORT_IB)
		return -ENODEV;
	eng = sw_dev_of(ctx)->eng;
	if (!eng)
		return -ENODEV;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK | EFD_SEMAPHORE);
	if (g->efd < 0) {
		int ret = -errno;

		free(g);
		return ret;
	}
	g->psn = sw_key_random() & SW_PSN_MASK;
	pthread_mutex_lock(&gsi_lock);
	if (eng->gsi) {
		pthread_mutex_unlock(&gsi_lock);
		close(g->efd);
		free(g);
		return -EBUSY;
	}
	g->eng = eng;
	eng->gsi = g;
	pthread_mutex_unlock(&gsi_lock);
	*out = g;
	return 0;
}

/* Contract: see sw/gsi.h. */
SV_EXPORT void softverbs_gsi_close(struct softverbs_gsi *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&gsi_lock);
	if (g->eng && g->eng->gsi == g)
		g->eng->gsi = NULL;
	pthread_mutex_unlock(&gsi_lock);
	close(g->efd);
	free(g);
}

/* Contract: see transport_priv.h. */
void sw_gsi_detach(struct sw_engine *eng)
{
	pthread_mutex_lock(&gsi_lock);
	if (eng->gsi)
		eng->gsi->eng = NULL;
	eng->gsi = NULL;
	pthread_mutex_unlock(&gsi_lock);
}

/* Contract: see sw/gsi.h. */
SV_EXPORT int softverbs_gsi_fd(struct softverbs_gsi *g)
{
	return g->efd;
}

/* Contract: see transport_priv.h. The filter of sw/gsi.h, each drop counted. */
void sw_gsi_rx(struct sw_engine *eng, const struct sw_pkt *pkt, const union sw_sa *src,
	       const union sw_sa *dst)
{
	atomic_ullong *drop = NULL;
	struct softverbs_gsi *g;
	struct gsi_entry *e;
	uint64_t one = 1;

	pthread_mutex_lock(&gsi_lock);
	g = eng->gsi;
	if (!g) { /* nobody has QP 1 open: dropped as for any QP that does not exist */
		pthread_mutex_unlock(&gsi_lock);
		atomic_fetch_add_explicit(&eng->cnt.drops_no_qp, 1, memory_order_relaxed);
		return;
	}
	if (pkt->opcode != (SW_OP_UD | SW_OP_SEND_ONLY) || pkt->paylen != SV_GSI_MAD_LEN)
		drop = &eng->cnt.drops_malformed;
	else if (pkt->qkey != SV_GSI_QKEY)
		drop = &eng->cnt.drops_qkey;
	else if (g->count == SV_GSI_QUEUE_MAX)
		drop = &eng->cnt.drops_no_recv; /* the CM retransmits */
	if (drop) {
		pthread_mutex_unlock(&gsi_lock);
		atomic_fetch_add_explicit(drop, 1, memory_order_relaxed);
		return;
	}
	e = &g->q[(g->head + g->count) % SV_GSI_QUEUE_MAX];
	memset(&e->addr, 0, sizeof(e->addr));
	gid_of(e->addr.peer_gid, src);
	gid_of(e->addr.local_gid, dst);
	e->addr.peer_udp_port = sw_sa_port(src);
	e->addr.pkey = pkt->pkey;
	e->addr.src_qp = pkt->sqpn;
	e->addr.hop_limit = 64;
	memcpy(e->mad, pkt->payload, SV_GSI_MAD_LEN);
	g->count++;
	if (write(g->efd, &one, sizeof(one)) < 0)
		(void)0; /* cannot overflow: at most SV_GSI_QUEUE_MAX counts */
	pthread_mutex_unlock(&gsi_lock);
}

/* Contract: see sw/gsi.h. */
SV_EXPORT int softverbs_gsi_recv(struct softverbs_gsi *g, struct softverbs_gsi_addr *src,
				 uint8_t mad[SV_GSI_MAD_LEN])
{
	uint64_t v;

	pthread_mutex_lock(&gsi_lock);
	if (!g->count) {
		pthread_mutex_unlock(&gsi_lock);
		return -EAGAIN;
	}
	*src = g->q[g->head].addr;
	memcpy(mad, g->q[g->head].mad, SV_GSI_MAD_LEN);
	g->head = (g->head + 1) % SV_GSI_QUEUE_MAX;
	g->count--;
	if (read(g->efd, &v, sizeof(v)) < 0)
		(void)0; /* the count matched the queue */
	pthread_mutex_unlock(&gsi_lock);
	return 0;
}

/* Contract: see sw/gsi.h. */
SV_EXPORT int softverbs_gsi_send(struct softverbs_gsi *g, const struct softverbs_gsi_addr *dst,
				 const uint8_t mad[SV_GSI_MAD_LEN])
{
	uint8_t buf[SW_BTH_LEN + SW_DETH_LEN + SV_GSI_MAD_LEN + SW_ICRC_LEN + 4];
	struct sw_pkt p = {
		.opcode = SW_OP_UD | SW_OP_SEND_ONLY,
		.pkey = SW_DEFAULT_PKEY,
		.dqpn = SV_GSI_QPN,
		.qkey = SV_GSI_QKEY,
		.sqpn = SV_GSI_QPN,
	};
	struct sw_engine *eng;
	struct sw_av av;
	size_t hl, len;

	pthread_mutex_lock(&gsi_lock);
	eng = g->eng;
	p.psn = g->psn;
	g->psn = sw_psn_add(g->psn, 1);
	pthread_mutex_unlock(&gsi_lock);
	if (!eng)
		return -ENODEV;
	memset(&av, 0, sizeof(av));
	memcpy(av.dgid.raw, dst->peer_gid, 16);
	/* the device speaks one family: an IPv4 device reaches IPv4 peers only, and so on */
	if (sw_gid_is_v4mapped(&av.dgid) != !sw_sa_is_v6(&eng->dev->port.local))
		return -EAFNOSUPPORT;
	sw_sa_from_gid(&av.dst, &av.dgid, eng->dev->cfg.udp_port, eng->dev->port.ifindex);
	av.hop_limit = dst->hop_limit ? dst->hop_limit : 64;
	av.traffic_class = dst->tclass;
	av.flow_label = dst->flow_label & 0xfffff;
	hl = sw_pkt_write_hdrs(buf, &p);
	memcpy(buf + hl, mad, SV_GSI_MAD_LEN);
	len = sw_pkt_finish(buf, hl + SV_GSI_MAD_LEN, NULL); /* the ICRC at the socket (net.c) */
	return sw_net_send_wait(eng, buf, len, &av);
}

/* SPDX-License-Identifier: MIT */
/*
 * mcast.c - UD multicast: the device's groups, attach and detach, and the
 * delivery of a multicast datagram to every QP attached to its group.
 *
 * A group is a multicast GID: ff00::/8, or an IPv4-mapped 224.0.0.0/4
 * address. RoCE v2 sends a multicast datagram to that IP address, so
 * the kernel's IP multicast is the host-wide registry of members: the
 * device opens one UDP socket per group it has QPs in, bound to the
 * group's address at the device's port and joined to the group on the
 * interface of the device's address (mcast_sock.c). Every such socket on
 * the host, of any softverbs device and any process, receives its own
 * copy of a datagram sent to the group (IP_MULTICAST_LOOP), and so do
 * members on other hosts where the network carries multicast. The
 * progress thread reads the group sockets (epoll) and hands each packet,
 * checked like every other one (progress.c), to sw_mcast_deliver(),
 * which passes it to each attached QP as a normal UD receive (Q_Key,
 * receive WQE, GRH area: resp_ud.c). The same-host link (shm.c) never
 * carries multicast.
 *
 * Rules, as the kernel's core, uverbs and rxe give them: only UD QPs and
 * multicast GIDs (else EINVAL); on the InfiniBand link layer the LID must
 * be a multicast LID (0xc000-0xfffe); attaching a (GID, LID) pair the QP
 * has is a no-op that succeeds; detaching one it has not is EINVAL;
 * max_mcast_grp groups, max_mcast_qp_attach attachments per group and
 * max_total_mcast_qp_attach in all (ENOMEM beyond). A destroyed QP
 * leaves every group.
 *
 * Locking: eng->mc->lock (recursive) guards the groups. The progress
 * thread holds it while it reads the group sockets and delivers, and
 * takes each QP's lock inside it; attach and detach take it with no QP
 * lock held. A QP is detached before it is destroyed, so the members
 * need no reference.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

enum {
	MC_IB_LID_FIRST = 0xc000, /* the first multicast LID */
	MC_IB_LID_PERMISSIVE = 0xffff,
};

/* Contract: see transport_priv.h. The table and its epoll set; 0 or -errno. */
int sw_mcast_init(struct sw_engine *eng)
{
	struct sw_mcast *mc = calloc(1, sizeof(*mc));
	pthread_mutexattr_t ma;

	if (!mc)
		return -ENOMEM;
	mc->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (mc->epfd < 0) {
		int ret = -errno;

		free(mc);
		return ret;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&mc->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	sw_mcast_port_setup(&eng->dev->port);
	eng->mc = mc;
	return 0;
}

/* Contract: see transport_priv.h. Closes every group socket (the thread has ended). */
void sw_mcast_fini(struct sw_engine *eng)
{
	struct sw_mcast *mc = eng->mc;

	if (!mc)
		return;
	for (unsigned int i = 0; i < mc->ngrp; i++) {
		close(mc->grp[i]->fd);
		free(mc->grp[i]);
	}
	free(mc->grp);
	close(mc->epfd);
	pthread_mutex_destroy(&mc->lock);
	free(mc);
	eng->mc = NULL;
}

/* The group of `gid`, or NULL (lock held). */
static struct sw_mcg *group_find(struct sw_mcast *mc, const union ibv_gid *gid)
{
	for (unsigned int i = 0; i < mc->ngrp; i++)
		if (!memcmp(mc->grp[i]->gid.raw, gid->raw, sizeof(gid->raw)))
			return mc->grp[i];
	return NULL;
}

/* The index of (qp, lid) among g's members, or -1 (lock held). */
static int member_find(const struct sw_mcg *g, const struct sw_qp *qp, uint16_t lid)
{
	for (unsigned int i = 0; i < g->n; i++)
		if (g->m[i].qp == qp && g->m[i].lid == lid)
			return (int)i;
	return -1;
}

/*
 * A new group for `gid` with its joined socket, in the table and the
 * epoll set (lock held). -ENOMEM past max_mcast_grp or out of memory or
 * descriptors; the socket's own errors otherwise.
 */
static int group_add(struct sw_engine *eng, const union ibv_gid *gid, struct sw_mcg **out)
{
	struct sw_mcast *mc = eng->mc;
	struct epoll_event ev = {.events = EPOLLIN};
	struct sw_mcg *g;
	int ret;

	if (mc->ngrp >= SW_MAX_MCAST_GRP)
		return -ENOMEM;
	if (mc->ngrp == mc->cap) {
		unsigned int cap = mc->cap ? 2 * mc->cap : 8;
		struct sw_mcg **grp = realloc(mc->grp, cap * sizeof(*grp));

		if (!grp)
			return -ENOMEM;
		mc->grp = grp;
		mc->cap = cap;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->gid = *gid;
	ret = sw_mcast_sock_open(&eng->dev->port, gid, &g->addr);
	if (ret < 0) {
		free(g);
		return ret == -EMFILE || ret == -ENFILE || ret == -ENOBUFS ? -ENOMEM : ret;
	}
	g->fd = ret;
	ev.data.ptr = g;
	if (epoll_ctl(mc->epfd, EPOLL_CTL_ADD, g->fd, &ev)) {
		ret = -errno;
		close(g->fd);
		free(g);
		return ret == -ENOSPC ? -ENOMEM : ret;
	}
	mc->grp[mc->ngrp++] = g;
	atomic_store_explicit(&mc->active, mc->ngrp, memory_order_relaxed);
	*out = g;
	return 0;
}

/* Take group `g` out of the table and close its socket (lock held, no members). */
static void group_del(struct sw_mcast *mc, struct sw_mcg *g)
{
	for (unsigned int i = 0; i < mc->ngrp; i++)
		if (mc->grp[i] == g) {
			mc->grp[i] = mc->grp[--mc->ngrp];
			break;
		}
	atomic_store_explicit(&mc->active, mc->ngrp, memory_order_relaxed);
	epoll_ctl(mc->epfd, EPOLL_CTL_DEL, g->fd, NULL);
	close(g->fd); /* leaves the IP group */
	free(g);
}

/* Remove member `i` of `g`, and `g` with its last member (lock held). */
static void member_del(struct sw_mcast *mc, struct sw_mcg *g, unsigned int i)
{
	g->m[i] = g->m[--g->n];
	mc->nattach--;
	if (!g->n)
		group_del(mc, g);
}

/*
 * The kernel core's checks, in its order: a multicast GID, a UD QP, and
 * on the InfiniBand link layer a multicast LID (RoCE ignores the LID).
 */
static int check_args(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	if (!gid || !sw_gid_is_multicast(gid) || ibqp->qp_type != IBV_QPT_UD)
		return -EINVAL;
	if (sw_dev_is_ib(sw_dev_of(ibqp->context)) &&
	    (lid < MC_IB_LID_FIRST || lid == MC_IB_LID_PERMISSIVE))
		return -EINVAL;
	return 0;
}

/* Contract: sv_ops.attach_mcast; the rules at the top of this file. 0 or -errno. */
int sw_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct sw_qp *qp = sw_qp(ibqp);
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_mcast *mc = eng->mc;
	struct sw_mcg *g;
	int ret = 0;

	pthread_mutex_lock(&mc->lock);
	g = gid ? group_find(mc, gid) : NULL;
	if (g && member_find(g, qp, lid) >= 0)
		goto out; /* uverbs: an attachment the QP has already */
	ret = check_args(ibqp, gid, lid);
	if (ret)
		goto out;
	if ((g && g->n >= SW_MAX_MCAST_QP_ATTACH) || mc->nattach >= SW_MAX_TOTAL_MCAST_QP_ATTACH) {
		ret = -ENOMEM;
		goto out;
	}
	if (!g)
		ret = group_add(eng, gid, &g);
	if (!ret && g) {
		g->m[g->n].qp = qp;
		g->m[g->n].lid = lid;
		g->n++;
		mc->nattach++;
	}
out:
	pthread_mutex_unlock(&mc->lock);
	return ret;
}

/* Contract: sv_ops.detach_mcast. -EINVAL for a (GID, LID) the QP is not attached to. */
int sw_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	struct sw_qp *qp = sw_qp(ibqp);
	struct sw_mcast *mc = sw_engine_of(qp)->mc;
	struct sw_mcg *g;
	int i, ret = -EINVAL;

	pthread_mutex_lock(&mc->lock);
	g = gid ? group_find(mc, gid) : NULL;
	i = g ? member_find(g, qp, lid) : -1;
	if (i >= 0) {
		member_del(mc, g, (unsigned int)i);
		ret = 0;
	}
	pthread_mutex_unlock(&mc->lock);
	return ret;
}

/* Contract: see sw/transport.h. */
void sw_mcast_qp_gone(struct sw_qp *qp)
{
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_mcast *mc = eng ? eng->mc : NULL;

	if (!mc || qp->ibv.qp_base.qp_type != IBV_QPT_UD)
		return;
	pthread_mutex_lock(&mc->lock);
	for (unsigned int gi = mc->ngrp; gi-- > 0;) {
		struct sw_mcg *g = mc->grp[gi];

		for (unsigned int i = g->n; i-- > 0;)
			if (g->m[i].qp == qp)
				member_del(mc, g, i); /* may free g: its last member */
	}
	pthread_mutex_unlock(&mc->lock);
}

/* True if member `i` of `g` is a QP that an earlier member names too (one copy per QP). */
static bool member_seen(const struct sw_mcg *g, unsigned int i)
{
	for (unsigned int j = 0; j < i; j++)
		if (g->m[j].qp == g->m[i].qp)
			return true;
	return false;
}

/* Contract: see transport_priv.h. */
void sw_mcast_deliver(struct sw_engine *eng, const struct sw_pkt *pkt, size_t len,
		      const union sw_sa *src, const union sw_sa *dst)
{
	struct sw_mcast *mc = eng->mc;
	union ibv_gid gid;
	struct sw_mcg *g;

	if (!mc) { /* no engine of ours started (a test's or fuzzer's): no groups */
		atomic_fetch_add_explicit(&eng->cnt.drops_no_qp, 1, memory_order_relaxed);
		return;
	}
	sw_sa_gid(dst, &gid);
	pthread_mutex_lock(&mc->lock);
	g = group_find(mc, &gid);
	if (!g)
		atomic_fetch_add_explicit(&eng->cnt.drops_no_qp, 1, memory_order_relaxed);
	for (unsigned int i = 0; g && i < g->n; i++) {
		struct sw_qp *qp = g->m[i].qp;

		if (member_seen(g, i))
			continue;
		pthread_mutex_lock(&qp->lock);
		SW_QP_COUNT(qp, rx_pkts, 1);
		SW_QP_COUNT(qp, rx_bytes, len);
		sw_resp_handle(qp, pkt, src, dst);
		pthread_mutex_unlock(&qp->lock);
	}
	pthread_mutex_unlock(&mc->lock);
}

/* Contract: see transport_priv.h. */
int sw_mcast_rx(struct sw_engine *eng, sw_mcast_rx_fn *rx, void *arg)
{
	struct sw_mcast *mc = eng->mc;
	struct epoll_event ev[8];
	int n, i, taken = 0;

	if (!mc || !atomic_load_explicit(&mc->active, memory_order_relaxed))
		return 0;
	pthread_mutex_lock(&mc->lock);
	n = epoll_wait(mc->epfd, ev, (int)(sizeof(ev) / sizeof(ev[0])), 0);
	for (i = 0; i < n; i++) {
		struct sw_mcg *g = ev[i].data.ptr;
		int r = rx(arg, g->fd, &g->addr, &g->ovfl);

		if (r < 0)
			break; /* the batch is full */
		taken += r;
	}
	pthread_mutex_unlock(&mc->lock);
	return taken;
}

/* Contract: see transport_priv.h. */
int sw_mcast_pollfd(const struct sw_engine *eng)
{
	return eng->mc ? eng->mc->epfd : -1;
}

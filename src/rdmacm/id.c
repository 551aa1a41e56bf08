/* SPDX-License-Identifier: MIT */
/*
 * id.c - rdma_cm_ids: creation, destruction, binding, address and route
 * resolution, listening, options and migration.
 *
 * Address mapping (docs/rdmacm.md, "Addresses"): every softverbs device
 * has one IPv4 address D. A bind to D (or ::ffff:D) binds the id to that
 * device; 0.0.0.0 and :: are wildcards (no device until a connection
 * needs one); any other 127/8 address, and ::1, is a loopback bind to
 * the process's first device on loopback (a 127/8 address, the default);
 * when every device is on a real interface, it binds no device, as the
 * wildcard does (libfabric's verbs provider binds "localhost" for a
 * passive endpoint and, finding no device on the id, takes the address
 * of its device's interface instead). Another address fails with
 * EADDRNOTAVAIL, or ENODEV when a local interface has it (it has no
 * softverbs device: libfabric's address enumeration skips it).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rdmacm/cm.h"

/* Contract: see cm.h. */
void cm_gid_v4(uint8_t gid[16], struct in_addr a)
{
	memset(gid, 0, 16);
	gid[10] = 0xff;
	gid[11] = 0xff;
	memcpy(gid + 12, &a, 4);
}

static bool v4mapped(const struct in6_addr *a)
{
	return IN6_IS_ADDR_V4MAPPED(a);
}

/* The IPv4 address of an AF_INET or v4-mapped AF_INET6 address (else 0). */
static struct in_addr sa_v4(const struct sockaddr *sa)
{
	struct in_addr a = {0};

	if (sa->sa_family == AF_INET) {
		a = ((const struct sockaddr_in *)(const void *)sa)->sin_addr;
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;

		if (v4mapped(&s6->sin6_addr))
			memcpy(&a, s6->sin6_addr.s6_addr + 12, 4);
	}
	return a;
}

static uint16_t sa_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	return 0;
}

static void sa_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)(void *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)(void *)sa)->sin6_port = htons(port);
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Contract: see cm.h. */
bool cm_family_ok(const struct sockaddr *sa)
{
	return sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6);
}

/* Contract: see cm.h. */
struct in_addr cm_src_v4(const struct cm_id *cid)
{
	return sa_v4(&cid->id.route.addr.src_addr);
}

/* Contract: see cm.h. */
struct in_addr cm_dst_v4(const struct cm_id *cid)
{
	return sa_v4(&cid->id.route.addr.dst_addr);
}

static bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr == 0;
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
}

static bool sa_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET6 &&
	    IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr))
		return true;
	return (ntohl(sa_v4(sa).s_addr) >> 24) == 127;
}

/* The first device whose own address is a loopback one (127/8), or NULL. */
static struct cm_dev *loopback_dev(void)
{
	for (int i = 0; i < cm.ndev; i++)
		if ((ntohl(cm.dev[i].addr.s_addr) >> 24) == 127)
			return &cm.dev[i];
	return NULL;
}

/* Contract: see cm.h. */
int cm_id_alloc(struct cm_channel *chan, void *context, enum rdma_port_space ps,
		enum ibv_qp_type qpt, struct cm_id **out)
{
	struct cm_id *cid = calloc(1, sizeof(*cid));

	if (!cid)
		return -ENOMEM;
	cid->id.channel = &chan->ch;
	cid->id.context = context;
	cid->id.ps = ps;
	cid->id.qp_type = qpt;
	cid->sync = chan->private_sync;
	cid->afonly = -1; /* by family at bind */
	cid->rdv_fd = -1;
	cid->next = cm.ids;
	if (cm.ids)
		cm.ids->prev = cid;
	cm.ids = cid;
	*out = cid;
	return 0;
}

/* Contract: see cm.h. */
void cm_id_free(struct cm_id *cid)
{
	if (cid->prev)
		cid->prev->next = cid->next;
	else
		cm.ids = cid->next;
	if (cid->next)
		cid->next->prev = cid->prev;
	if (cid->pd_ref)
		cm_dev_put_pd(cid->dev);
	free(cid->ep_qp_attr);
	cm_mc_free_all(cid);
	if (cid->pending_ai)
		rdma_freeaddrinfo(cid->pending_ai);
	free(cid);
}

/* Contract: see cm.h. */
int cm_id_check(const struct rdma_cm_id *id)
{
	for (const struct cm_id *i = cm.ids; i; i = i->next)
		if (&i->id == id)
			return i->destroying ? -EINVAL : i->orphan ? -EBADF : 0;
	return -EINVAL;
}

/* Contract: see cm.h. */
int cm_lock_id(struct rdma_cm_id *id)
{
	int ret;

	pthread_mutex_lock(&cm.lock);
	ret = cm_id_check(id);
	if (ret)
		pthread_mutex_unlock(&cm.lock);
	return ret;
}

/* Contract: see cm.h. */
int cm_id_attach_dev(struct cm_id *cid, struct cm_dev *d)
{
	struct ibv_pd *pd;
	int ret;

	if (cid->dev)
		return cid->dev == d ? 0 : -EINVAL;
	ret = cm_dev_get_pd(d, &pd);
	if (ret)
		return ret;
	cid->dev = d;
	cid->pd_ref = true;
	cid->id.verbs = d->ctx;
	if (!cid->id.pd)
		cid->id.pd = pd;
	cid->id.port_num = 1;
	cid->id.route.addr.addr.ibaddr.sgid = d->gid;
	cid->id.route.addr.addr.ibaddr.pkey = htobe16(0xffff);
	return 0;
}

/* Contract: see cm.h. */
struct cm_event *cm_deliver(struct cm_id *cid, enum rdma_cm_event_type type, int status,
			    const void *pdata, size_t len)
{
	if (cid->state == CMA_DESTROYING)
		return NULL;
	if (cid->passive && !cid->app_owned && type != RDMA_CM_EVENT_CONNECT_REQUEST)
		return NULL;
	if (cid->connect_error &&
	    (type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED))
		return NULL;
	return cm_queue_event(cid, type, status, pdata, len);
}

/* Contract: see cm.h. Timewait lasts ms(packet lifetime + 1). */
void cm_enter_timewait(struct cm_id *cid)
{
	cid->conn.state = CM_TIMEWAIT;
	cid->conn.mad_armed = false;
	cid->conn.deadline_ms = cm_now_ms() + cm_timeout_ms(CM_PACKET_LIFETIME + 1);
	if (cid->state == CMA_CONNECT)
		cid->state = CMA_DISCONNECT;
	cm_wake();
}

/* Contract: see cm.h. What destroying the id sends, by connection state. */
void cm_id_abort(struct cm_id *cid)
{
	uint8_t guid[8];

	switch (cid->conn.state) {
	case CM_REQ_SENT:
	case CM_MRA_REQ_RCVD:
		for (int i = 0; i < 8; i++)
			guid[i] = (uint8_t)(cid->dev->guid >> (56 - 8 * i));
		cm_send_rej(cid, CM_REJ_TIMEOUT, guid, 8, NULL, 0);
		break;
	case CM_REQ_RCVD:
	case CM_MRA_REQ_SENT:
	case CM_REP_RCVD:
	case CM_MRA_REP_SENT:
	case CM_REP_SENT:
	case CM_MRA_REP_RCVD:
		cm_send_rej(cid, CM_REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0);
		break;
	case CM_ESTABLISHED:
		cm_send_dreq(cid);
		break;
	case CM_DREQ_RCVD:
		cm_send_drep(cid);
		break;
	case CM_SIDR_REQ_RCVD:
		cm_send_sidr_rep(cid, CM_SIDR_REJECT, 0, NULL, 0);
		break;
	default:
		break;
	}
	cm_rdv_withdraw(cid);
	cm_disarm(cid);
	cid->conn.state = CM_IDLE;
}

/* Does `port` in `ps` conflict with an id bound there (the kernel's rules)? */
static int port_check(struct cm_id *cid, const struct sockaddr *sa, uint16_t port)
{
	for (struct cm_id *o = cm.ids; o; o = o->next) {
		const struct sockaddr *osa = &o->id.route.addr.src_addr;

		if (o == cid || !o->bound || o->id.ps != cid->id.ps || sa_port(osa) != port)
			continue;
		if (cid->reuseaddr && o->reuseaddr && o->state != CMA_LISTEN)
			continue;
		if (o->afonly > 0 && cid->afonly > 0 && osa->sa_family != sa->sa_family)
			continue;
		if (sa_is_any(sa) || sa_is_any(osa))
			return -EADDRNOTAVAIL;
		if (sa_v4(sa).s_addr == sa_v4(osa).s_addr)
			return -EADDRINUSE;
	}
	return 0;
}

/* An ephemeral port in ip_local_port_range, free in the id's port space. */
static int pick_port(struct cm_id *cid, const struct sockaddr *sa, uint16_t *port)
{
	unsigned int lo = 32768, hi = 60999, n, start;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo > hi || hi > 65535 || !lo)
			lo = 32768, hi = 60999;
		fclose(f);
	}
	n = hi - lo + 1;
	start = cm_random32() % n;
	for (unsigned int i = 0; i < n; i++) {
		uint16_t p = (uint16_t)(lo + (start + i) % n);

		if (!port_check(cid, sa, p)) {
			*port = p;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

/* A local interface has this address (getifaddrs), but no softverbs device does. */
static bool host_has_addr(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != sa->sa_family)
			continue;
		if (sa->sa_family == AF_INET)
			found = sa_v4(i->ifa_addr).s_addr == sa_v4(sa).s_addr;
		else
			found = !memcmp(&((struct sockaddr_in6 *)(void *)i->ifa_addr)->sin6_addr,
					&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
					16);
	}
	freeifaddrs(ifa);
	return found;
}

/* Bind per the mapping at the top of this file; lock held, state IDLE. */
static int do_bind(struct cm_id *cid, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	struct cm_dev *d = NULL;
	uint16_t port;
	int ret;

	if (!cm_family_ok(sa))
		return -EINVAL;
	if (cid->state != CMA_IDLE)
		return -EINVAL;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, sa, sa_len(sa));
	if (!sa_is_any(sa)) {
		d = cm_dev_by_addr(sa_v4(sa));
		if (d && sa->sa_family == AF_INET6 &&
		    !v4mapped(&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr))
			d = NULL;
		if (!d && sa_is_loopback(sa))
			d = loopback_dev(); /* NULL: bound without a device */
		else if (!d)
			return host_has_addr(sa) ? -ENODEV : -EADDRNOTAVAIL;
	}
	if (cid->afonly < 0)
		cid->afonly = sa->sa_family == AF_INET;
	port = sa_port(sa);
	if (!port) {
		ret = pick_port(cid, (struct sockaddr *)&ss, &port);
		if (ret)
			return ret;
	} else {
		if (port < 1024 && geteuid() != 0)
			return -EACCES;
		ret = port_check(cid, (struct sockaddr *)&ss, port);
		if (ret)
			return ret;
	}
	if (d) {
		ret = cm_id_attach_dev(cid, d);
		if (ret)
			return ret;
	}
	sa_set_port((struct sockaddr *)&ss, port);
	memcpy(&cid->id.route.addr.src_storage, &ss, sizeof(ss));
	cid->bound = true;
	cid->state = CMA_ADDR_BOUND;
	return 0;
}

/* The source address for a destination when the id is unbound: wildcard, port 0. */
static void any_of(const struct sockaddr *dst, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = dst->sa_family;
}

/* Resolution: the device, the source address's IP, the GIDs; lock held. */
static int do_resolve_addr(struct cm_id *cid, const struct sockaddr *dst)
{
	struct sockaddr *src = &cid->id.route.addr.src_addr;
	struct in_addr t = sa_v4(dst);
	struct cm_dev *d = cid->dev;
	int ret;

	if (dst->sa_family == AF_INET6 && !sa_is_any(dst) &&
	    !v4mapped(&((const struct sockaddr_in6 *)(const void *)dst)->sin6_addr))
		return -EHOSTUNREACH; /* the device is IPv4 only */
	if (!d) {
		d = t.s_addr ? cm_dev_by_addr(t) : NULL;
		if (!d)
			d = &cm.dev[0];
		ret = cm_id_attach_dev(cid, d);
		if (ret)
			return ret;
	}
	memcpy(&cid->id.route.addr.dst_storage, dst, sa_len(dst));
	if (sa_is_any(src)) { /* the route chooses the source: the device's address */
		if (src->sa_family == AF_INET) {
			((struct sockaddr_in *)(void *)src)->sin_addr = d->addr;
		} else {
			struct sockaddr_in6 *s6 = (void *)src;

			cm_gid_v4(s6->sin6_addr.s6_addr, d->addr);
		}
	}
	if (!t.s_addr || t.s_addr == d->addr.s_addr) /* loopback to the own device */
		cid->id.route.addr.addr.ibaddr.dgid = d->gid;
	else
		cm_gid_v4(cid->id.route.addr.addr.ibaddr.dgid.raw, t);
	return 0;
}

/* ---- exported ---- */

CM_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct cm_channel *c = (struct cm_channel *)channel;
	enum ibv_qp_type qpt;
	struct cm_id *cid;
	int ret;

	if (!id)
		return cm_ret(-EINVAL);
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_IB:
		qpt = IBV_QPT_RC;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		qpt = IBV_QPT_UD;
		break;
	default:
		return cm_ret(-EINVAL);
	}
	ret = cm_init();
	if (ret)
		return cm_ret(ret);
	if (!c) {
		ret = cm_channel_create(true, &c);
		if (ret)
			return cm_ret(ret);
	}
	pthread_mutex_lock(&cm.lock);
	if (channel && !cm_channel_live(c))
		ret = -EBADF; /* destroyed */
	else
		ret = cm_id_alloc(c, context, ps, qpt, &cid);
	if (ret && !channel)
		cm_channel_free(c);
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return cm_ret(ret);
	*id = &cid->id;
	return 0;
}

/* An orphan (its channel destroyed) is freed too: only a stale or foreign id fails. */
CM_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *cid = cm_id_of(id);
	int ret;

	pthread_mutex_lock(&cm.lock);
	ret = cm_id_check(id);
	if (ret == -EINVAL) {
		pthread_mutex_unlock(&cm.lock);
		return cm_ret(ret);
	}
	cid->destroying = true; /* a second destroy from here on is EINVAL */
	if (cid->state == CMA_LISTEN)
		cm_listener_gone(cid);
	if (id->event) {
		cm_ack_event_locked(id->event);
		id->event = NULL;
	}
	cid->state = CMA_DESTROYING;
	if (!cid->orphan)
		cm_drop_events(cid); /* a listener's queued requests are refused here */
	cm_id_abort(cid);
	for (struct cm_id *o = cm.ids; o; o = o->next)
		if (o->listener == cid)
			o->listener = NULL;
	pthread_mutex_unlock(&cm.lock);
	cm_wait_acked(cid);
	pthread_mutex_lock(&cm.lock);
	if (cid->sync && !cid->orphan && cm_chan_of(id)->private_sync)
		cm_channel_free(cm_chan_of(id));
	cm_id_free(cid);
	pthread_mutex_unlock(&cm.lock);
	return 0;
}

CM_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	int ret;

	if (!cm_family_ok(addr))
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	ret = do_bind(cm_id_of(id), addr);
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

/*
 * Contract: the end of rdma_resolve_addr and rdma_resolve_route, with
 * cm.lock held: if `ret` is 0, the id enters `state` and `event` is
 * queued (-ENOMEM when it cannot be); then the lock is dropped and a
 * synchronous id waits for its event. Returns as librdmacm does: 0, or
 * -1 and errno.
 */
static int resolved(struct cm_id *cid, int ret, enum cma_state state, enum rdma_cm_event_type event)
{
	if (!ret) {
		cid->state = state;
		if (!cm_queue_event(cid, event, 0, NULL, 0))
			ret = -ENOMEM;
	}
	pthread_mutex_unlock(&cm.lock);
	if (!ret && cid->sync)
		ret = cm_sync_wait(cid);
	return cm_ret(ret);
}

CM_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *cid = cm_id_of(id);
	struct sockaddr_storage any;
	int ret;

	(void)timeout_ms; /* no ARP: resolution is immediate */
	if (!cm_family_ok(dst_addr) || (src_addr && !cm_family_ok(src_addr)) ||
	    (src_addr && src_addr->sa_family != dst_addr->sa_family))
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (cid->state == CMA_IDLE) {
		if (!src_addr) {
			any_of(dst_addr, &any);
			src_addr = (struct sockaddr *)&any;
		}
		ret = do_bind(cid, src_addr);
	}
	if (!ret && cid->state != CMA_ADDR_BOUND)
		ret = -EINVAL;
	if (!ret)
		ret = do_resolve_addr(cid, dst_addr);
	return resolved(cid, ret, CMA_ADDR_RESOLVED, RDMA_CM_EVENT_ADDR_RESOLVED);
}

/* The active side's path record on RoCE. */
static void build_route(struct cm_id *cid)
{
	struct ibv_sa_path_rec *p = &cid->path;
	uint16_t sport = sa_port(&cid->id.route.addr.src_addr);
	uint16_t dport = sa_port(&cid->id.route.addr.dst_addr);

	memset(p, 0, sizeof(*p));
	p->sgid = cid->id.route.addr.addr.ibaddr.sgid;
	p->dgid = cid->id.route.addr.addr.ibaddr.dgid;
	p->flow_label = htobe32(((uint32_t)sport * 31 + dport) & 0xfffff);
	p->hop_limit = CM_HOP_LIMIT;
	p->traffic_class = cid->tos;
	p->reversible = 1;
	p->pkey = htobe16(0xffff);
	p->mtu_selector = 2;
	p->mtu = (uint8_t)cid->dev->mtu;
	p->rate_selector = 2;
	p->packet_life_time_selector = 2;
	p->packet_life_time = cid->ack_timeout_set && cid->ack_timeout > 0 ?
				      (uint8_t)(cid->ack_timeout - 1) :
				      CM_PACKET_LIFETIME;
	cid->has_path = true;
	cid->id.route.path_rec = p;
	cid->id.route.num_paths = 1;
}

CM_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *cid = cm_id_of(id);
	int ret;

	(void)timeout_ms;
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	if (cid->state != CMA_ADDR_RESOLVED)
		ret = -EINVAL;
	else
		build_route(cid);
	return resolved(cid, ret, CMA_ROUTE_RESOLVED, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

CM_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *cid = cm_id_of(id);
	struct sockaddr_in any = {.sin_family = AF_INET};
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (cid->state == CMA_IDLE)
		ret = do_bind(cid, (struct sockaddr *)&any);
	if (!ret && cid->state != CMA_ADDR_BOUND)
		ret = -EINVAL;
	if (!ret)
		ret = cm_rdv_publish(cid);
	if (!ret) {
		cid->backlog = backlog <= 0 || backlog >= CM_MAX_BACKLOG ? CM_MAX_BACKLOG : backlog;
		cid->state = CMA_LISTEN;
		cm_replay_held(); /* requests kept since a listener on its port went */
	}
	pthread_mutex_unlock(&cm.lock);
	return cm_ret(ret);
}

/* Check and apply one option (lock held). */
static int set_option(struct cm_id *cid, int level, int name, const void *val, size_t len)
{
	int v;

	if (level == RDMA_OPTION_ID) {
		switch (name) {
		case RDMA_OPTION_ID_TOS:
			if (len != 1)
				return -EINVAL;
			cid->tos = *(const uint8_t *)val;
			cid->tos_set = true;
			return 0;
		case RDMA_OPTION_ID_REUSEADDR:
			if (len != sizeof(int))
				return -EINVAL;
			memcpy(&v, val, sizeof(v));
			if (!((v && cid->state != CMA_LISTEN) || cid->state == CMA_IDLE))
				return -EINVAL;
			cid->reuseaddr = v != 0;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			if (len != sizeof(int))
				return -EINVAL;
			if (cid->state != CMA_IDLE && cid->state != CMA_ADDR_BOUND)
				return -EINVAL;
			memcpy(&v, val, sizeof(v));
			cid->afonly = v != 0;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (len != 1 || cid->id.qp_type != IBV_QPT_RC)
				return -EINVAL;
			cid->ack_timeout = *(const uint8_t *)val;
			cid->ack_timeout_set = true;
			return 0;
		default:
			return -ENOSYS;
		}
	}
	if (level == RDMA_OPTION_IB && name == RDMA_OPTION_IB_PATH) {
		const struct ibv_path_data *pd = val;
		size_t n = len / sizeof(*pd), i;
		const uint32_t want =
			IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;

		if (!len || len % sizeof(*pd) || !val)
			return -EINVAL;
		for (i = 0; i < n && pd[i].flags != want; i++)
			;
		if (i == n || cid->state != CMA_ADDR_RESOLVED)
			return -EINVAL;
		build_route(cid);
		cid->state = CMA_ROUTE_RESOLVED;
		return cm_queue_event(cid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0) ? 0 : -ENOMEM;
	}
	return -ENOSYS;
}

CM_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	int ret;

	if (!optval)
		return cm_ret(-EINVAL);
	ret = cm_lock_id(id);
	if (ret)
		return cm_ret(ret);
	ret = set_option(cm_id_of(id), level, optname, optval, optlen);
	pthread_mutex_unlock(&cm.lock);
	if (!ret && level == RDMA_OPTION_IB && cm_id_of(id)->sync)
		ret = cm_sync_wait(cm_id_of(id));
	return cm_ret(ret);
}

CM_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *cid = cm_id_of(id);
	struct cm_channel *to = (struct cm_channel *)channel, *old;
	int ret = cm_lock_id(id);

	if (ret)
		return cm_ret(ret);
	if (to && !cm_channel_live(to))
		ret = -EBADF;
	else if (!to && cid->sync)
		ret = -EINVAL;
	pthread_mutex_unlock(&cm.lock);
	if (ret)
		return cm_ret(ret);
	if (!to) {
		ret = cm_channel_create(true, &to);
		if (ret)
			return cm_ret(ret);
	}
	old = cm_chan_of(id);
	if (old->private_sync && id->event) {
		cm_ack_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm.lock);
	cm_move_events(cid, to);
	id->channel = &to->ch;
	cid->sync = to->private_sync;
	pthread_mutex_unlock(&cm.lock);
	cm_wait_acked(cid);
	if (old->private_sync && old != to) {
		pthread_mutex_lock(&cm.lock);
		cm_channel_free(old);
		pthread_mutex_unlock(&cm.lock);
	}
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * init.c - the process-wide state of the connection manager.
 *
 * On the first call that needs it, the library opens every softverbs
 * device once (the contexts that rdma_get_devices returns and every id's
 * `verbs`), reads each device's address from its GID 0, opens its general
 * services endpoint (QP1) and starts the CM thread. All of it lives until
 * the process exits; the exit hook sends a DREQ or REJ for every
 * connection still open, as the kernel does when a process dies.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "rdmacm/cm.h"

struct cm_global cm = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.wake_fd = -1,
};

static pthread_once_t cm_once = PTHREAD_ONCE_INIT;

/* Contract: see cm.h. */
uint64_t cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Contract: see cm.h. With SOFTVERBS_CM_TIMEOUT=US each unit of 4.096 us becomes US us. */
uint32_t cm_timeout_ms(uint8_t t)
{
	uint32_t ms = t > 8 ? 1u << (t > 31 ? 23 : t - 8) : 1;

	if (cm.timeout_scale_us) /* tests: scale down (or up) every CM timer */
		ms = (uint32_t)(((uint64_t)ms * cm.timeout_scale_us + 4095) / 4096);
	return ms ? ms : 1;
}

/* Contract: see cm.h. */
uint32_t cm_random32(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)(cm_now_ms() * 2654435761u) ^ (uint32_t)getpid();
	return v;
}

/* Contract: see cm.h. Cyclic from a random start, skipping IDs in use. */
uint32_t cm_new_cid(void)
{
	for (;;) {
		uint32_t c = cm.next_cid++;
		struct cm_id *i;

		if (!c)
			continue;
		for (i = cm.ids; i && i->conn.lcid != c; i = i->next)
			;
		if (!i)
			return c;
	}
}

/* Contract: see cm.h. */
void cm_wake(void)
{
	uint64_t one = 1;

	if (cm.wake_fd >= 0 && write(cm.wake_fd, &one, sizeof(one)) < 0)
		(void)0; /* an overflowing counter still wakes the thread */
}

/* Contract: see cm.h. */
struct cm_dev *cm_dev_by_addr(struct in_addr a)
{
	for (int i = 0; i < cm.ndev; i++)
		if (cm.dev[i].addr.s_addr == a.s_addr)
			return &cm.dev[i];
	return NULL;
}

/* Contract: see cm.h. */
int cm_dev_get_pd(struct cm_dev *d, struct ibv_pd **pd)
{
	if (!d->pd) {
		d->pd = ibv_alloc_pd(d->ctx);
		if (!d->pd)
			return errno ? -errno : -ENOMEM;
	}
	d->pd_refs++;
	*pd = d->pd;
	return 0;
}

/* Contract: see cm.h. The PD stays while applications may still use it. */
void cm_dev_put_pd(struct cm_dev *d)
{
	if (d->pd_refs > 0 && --d->pd_refs == 0 && ibv_dealloc_pd(d->pd) == 0)
		d->pd = NULL;
}

/* Contract: see cm.h. Here, apart from send.c, so that tests can wrap it. */
int cm_send_mad(struct cm_dev *d, const uint8_t peer_gid[16], const uint8_t mad[CM_MAD_LEN])
{
	struct softverbs_gsi_addr to;

	memset(&to, 0, sizeof(to));
	memcpy(to.peer_gid, peer_gid, 16);
	to.hop_limit = CM_HOP_LIMIT;
	return softverbs_gsi_send(d->gsi, &to, mad);
}

/* Open one device: its context, address, limits and GSI endpoint. */
static int open_dev(struct ibv_device *ibdev, struct cm_dev *d)
{
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	int ret;

	memset(d, 0, sizeof(*d));
	d->ctx = ibv_open_device(ibdev);
	if (!d->ctx)
		return -ENODEV;
	if (ibv_query_device(d->ctx, &attr) || ibv_query_port(d->ctx, 1, &port) ||
	    ibv_query_gid(d->ctx, 1, 0, &d->gid)) {
		ret = -ENODEV;
		goto err;
	}
	memcpy(&d->addr, d->gid.raw + 12, 4);
	d->guid = be64toh(attr.node_guid);
	d->mtu = port.active_mtu;
	d->max_qp_wr = (uint32_t)attr.max_qp_wr;
	d->max_rd_atom = (uint8_t)(attr.max_qp_rd_atom > 255 ? 255 : attr.max_qp_rd_atom);
	d->max_init_rd_atom =
		(uint8_t)(attr.max_qp_init_rd_atom > 255 ? 255 : attr.max_qp_init_rd_atom);
	ret = softverbs_gsi_open(d->ctx, &d->gsi);
	if (ret)
		goto err;
	return 0;
err:
	ibv_close_device(d->ctx);
	d->ctx = NULL;
	return ret;
}

/* The exit hook: one DREQ or REJ per open connection, no waiting. */
static void cm_atexit(void)
{
	pthread_mutex_lock(&cm.lock);
	for (struct cm_id *i = cm.ids; i; i = i->next)
		cm_id_abort(i);
	pthread_mutex_unlock(&cm.lock);
}

static void cm_do_init(void)
{
	struct ibv_device **list;
	const char *env;
	int n = 0, ret;

	env = getenv("SOFTVERBS_CM_TIMEOUT");
	if (env && *env)
		cm.timeout_scale_us = (uint32_t)strtoul(env, NULL, 10);
	cm.tid_hi = cm_random32();
	cm.next_cid = cm_random32();
	list = ibv_get_device_list(&n);
	if (!list) {
		cm.init_err = -ENODEV;
		return;
	}
	for (int i = 0; i < n && cm.ndev < CM_MAX_DEVICES; i++) {
		ret = open_dev(list[i], &cm.dev[cm.ndev]);
		if (!ret)
			cm.ndev++;
	}
	ibv_free_device_list(list);
	if (!cm.ndev) {
		cm.init_err = -ENODEV;
		return;
	}
	cm.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cm.wake_fd < 0) {
		cm.init_err = -errno;
		return;
	}
	ret = pthread_create(&cm.thread, NULL, cm_thread_main, NULL);
	if (ret) {
		cm.init_err = -ret;
		return;
	}
	pthread_setname_np(cm.thread, "sv-cm");
	pthread_detach(cm.thread);
	atexit(cm_atexit);
}

/* Contract: see cm.h. */
int cm_init(void)
{
	pthread_once(&cm_once, cm_do_init);
	return cm.init_err;
}

/* SPDX-License-Identifier: MIT */
/*
 * context.c - opening and closing a context, and the device's ops table.
 *
 * All contexts of one device share its UDP port: the first context binds
 * it, the last one to close releases it (dev->lock guards both).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw/queue.h"
#include "sw/ctrl.h"
#include "sw/transport.h"

/* Every op the software device implements; the core fills in the rest. */
const struct sv_ops sw_ops = {
	.query_device_ex = sw_query_device_ex,
	.query_port = sw_query_port,
	.query_gid_ex = sw_query_gid_ex,
	.query_pkey = sw_query_pkey,
	.query_rt_values = sw_query_rt_values,
	.alloc_pd = sw_alloc_pd,
	.dealloc_pd = sw_dealloc_pd,
	.alloc_parent_domain = sw_alloc_parent_domain,
	.alloc_td = sw_alloc_td,
	.dealloc_td = sw_dealloc_td,
	.reg_mr = sw_reg_mr,
	.rereg_mr = sw_rereg_mr,
	.dereg_mr = sw_dereg_mr,
	.advise_mr = sw_advise_mr,
	.alloc_mw = sw_alloc_mw,
	.dealloc_mw = sw_dealloc_mw,
	.bind_mw = sw_bind_mw,
	.alloc_dm = sw_alloc_dm,
	.free_dm = sw_free_dm,
	.reg_dm_mr = sw_reg_dm_mr,
	.alloc_buf = sw_alloc_buf,
	.free_buf = sw_free_buf,
	.alloc_dmah = sw_alloc_dmah,
	.dealloc_dmah = sw_dealloc_dmah,
	.create_cq_ex = sw_create_cq_ex,
	.destroy_cq = sw_destroy_cq,
	.resize_cq = sw_resize_cq,
	.modify_cq = sw_modify_cq,
	.poll_cq = sw_poll_cq,
	.req_notify_cq = sw_req_notify_cq,
	.create_srq_ex = sw_create_srq_ex,
	.modify_srq = sw_modify_srq,
	.query_srq = sw_query_srq,
	.destroy_srq = sw_destroy_srq,
	.get_srq_num = sw_get_srq_num,
	.post_srq_recv = sw_post_srq_recv,
	.create_ah = sw_create_ah,
	.destroy_ah = sw_destroy_ah,
	.create_qp_ex = sw_create_qp_ex,
	.open_qp = sw_open_qp,
	.open_xrcd = sw_open_xrcd,
	.close_xrcd = sw_close_xrcd,
	.modify_qp = sw_modify_qp,
	.query_qp = sw_query_qp,
	.destroy_qp = sw_destroy_qp,
	.attach_mcast = sw_attach_mcast,
	.detach_mcast = sw_detach_mcast,
	.qp_to_qp_ex = sw_qp_to_qp_ex,
	.query_qp_data_in_order = sw_query_qp_data_in_order,
	.post_send = sw_post_send,
	.post_recv = sw_post_recv,
	.close_context = sw_close_context,
};

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static char reported[sizeof(((struct sw_config *)0)->error)]; /* last message printed */

/*
 * Contract: print a configuration problem to stderr, once per distinct
 * message in this process (repeated opens stay quiet).
 */
static void report_config_error(const char *msg)
{
	pthread_mutex_lock(&report_lock);
	if (strcmp(reported, msg)) {
		fprintf(stderr, "softverbs: %s\n", msg);
		snprintf(reported, sizeof(reported), "%s", msg);
	}
	pthread_mutex_unlock(&report_lock);
}

/*
 * Contract: see sw/ctrl.h. Binds the device's port if this is its first
 * context. -EINVAL if the configuration is malformed, the bind error
 * (e.g. -EADDRINUSE) or -ENOMEM otherwise.
 */
int sw_context_open(struct sv_device *core, struct sv_context **ctx, const struct sv_ops **ops)
{
	struct sw_dev *dev = sv_container_of(core, struct sw_dev, core);
	struct sw_context *c;
	int ret = 0;

	if (dev->cfg.error[0]) {
		report_config_error(dev->cfg.error);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	pthread_mutex_lock(&dev->lock);
	if (dev->nctx == 0) {
		ret = sw_port_open(&dev->port, &dev->cfg);
		if (!ret) {
			/* the node GUID of the bound address and port (lid.c) */
			__atomic_store_n(&dev->core.guid,
					 sw_guid_of(&dev->port.local, dev->port.udp_port),
					 __ATOMIC_RELAXED);
			ret = sw_engine_start(dev);
			if (ret)
				sw_port_close(&dev->port);
		}
	}
	if (!ret)
		dev->nctx++;
	pthread_mutex_unlock(&dev->lock);
	if (ret) {
		free(c);
		return ret;
	}
	pthread_mutex_init(&c->dm_lock, NULL);
	*ctx = &c->core;
	*ops = &sw_ops;
	return 0;
}

/*
 * Contract: free the context: its leftover MRs are deregistered and its
 * leftover device memory freed, and the
 * last context of the device stops the transport and unbinds the port.
 */
void sw_close_context(struct ibv_context *ctx)
{
	struct sw_context *c = sv_container_of(sv_ctx(ctx), struct sw_context, core);
	struct sw_dev *dev = sw_dev_of(ctx);

	sw_mem_ctx_close(ctx); /* MRs left registered stop resolving now */
	sw_dm_ctx_close(ctx); /* then the device memory they used goes */
	pthread_mutex_lock(&dev->lock);
	if (--dev->nctx == 0) {
		sw_engine_stop(dev);
		sw_port_close(&dev->port);
	}
	pthread_mutex_unlock(&dev->lock);
	pthread_mutex_destroy(&c->dm_lock);
	free(c);
}

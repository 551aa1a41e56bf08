/* SPDX-License-Identifier: MIT */
/*
 * core.h - the contract between the libibverbs core and a device.
 *
 * The core owns what every device shares: the device list, the context
 * wrapper with its verbs_context ABI, dispatch with EOPNOTSUPP fallbacks,
 * async events, completion channels, fork protection and the argument
 * rules that rdma-core applies before a provider sees a call.
 *
 * A device owns its objects. It implements `struct sv_ops`; every slot it
 * leaves NULL is filled by the core with a fallback that fails with
 * EOPNOTSUPP, so no call ever goes through NULL.
 *
 * Error convention: every internal function returns 0 or -errno, and
 * hands objects back through an out-parameter. Only the public API turns
 * that into NULL + errno or a positive errno. The data-path slots at the
 * end of sv_ops are the exception: their signature is the ABI of
 * struct ibv_context_ops, because applications call them inline.
 */
#ifndef SV_CORE_H
#define SV_CORE_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include <infiniband/verbs.h>

#define SV_EXPORT __attribute__((visibility("default")))

/* clang-format 14 would glue the minus to the cast: */
/* clang-format off */
#define sv_container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))
/* clang-format on */

#define SV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Hand an internal 0/-errno result to a pointer-returning API: NULL with
 * errno, or `obj`. A macro, so that `call` (which usually fills `obj`
 * through an out-parameter) is evaluated before `obj` is read.
 */
#define SV_RET_PTR(call, obj)                                                                      \
	({                                                                                         \
		int sv_ret_ = (call);                                                              \
		sv_ret_ ? (errno = -sv_ret_, NULL) : (obj);                                        \
	})

/* Hand an internal 0/-errno result to an int verb (positive errno). */
static inline int sv_ret_int(int ret)
{
	return ret < 0 ? -ret : ret;
}

/* The same for a verb that also sets errno on failure: 0, or the positive errno. */
static inline int sv_ret_errno(int ret)
{
	if (!ret)
		return 0;
	errno = -ret;
	return -ret;
}

struct sv_context;

/*
 * The one internal ops table. Context-level slots take the context;
 * object-level slots take the object. Create ops return the new object
 * through the last argument.
 */
struct sv_ops {
	/* device and port */
	int (*query_device_ex)(struct ibv_context *ctx, struct ibv_device_attr_ex *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid_ex)(struct ibv_context *ctx, uint8_t port, uint32_t index,
			    struct ibv_gid_entry *entry);
	int (*query_pkey)(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);
	int (*query_rt_values)(struct ibv_context *ctx, struct ibv_values_ex *values);

	/* protection domains and thread domains */
	int (*alloc_pd)(struct ibv_context *ctx, struct ibv_pd **pd);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*alloc_parent_domain)(struct ibv_context *ctx,
				   struct ibv_parent_domain_init_attr *attr, struct ibv_pd **pd);
	int (*alloc_td)(struct ibv_context *ctx, struct ibv_td_init_attr *attr, struct ibv_td **td);
	int (*dealloc_td)(struct ibv_td *td);

	/*
	 * Memory regions. The core has already applied rdma-core's own rules
	 * (BUF translation, fork protection); `attr` is the final request, its
	 * comp_mask one of ADDR[|IOVA][|DMAH] or FD|FD_OFFSET|IOVA[|DMAH].
	 * `legacy_dmabuf` marks ibv_reg_dmabuf_mr, whose method takes no DMAH.
	 * The device fills lkey, rkey and handle; the core fills context, pd,
	 * addr and length. Every MR a device returns (here, alloc_null_mr,
	 * reg_dm_mr) embeds a zeroed struct sv_mr first.
	 */
	int (*reg_mr)(struct ibv_pd *pd, const struct ibv_mr_init_attr *attr, bool legacy_dmabuf,
		      struct ibv_mr **mr);
	int (*rereg_mr)(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
			int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	int (*alloc_null_mr)(struct ibv_pd *pd, struct ibv_mr **mr);
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
			 struct ibv_sge *sg_list, uint32_t num_sge);

	/* provider-aware buffers and DMA handles */
	int (*alloc_buf)(struct ibv_pd *pd, size_t size, struct ibv_buf **buf, void **addr);
	void (*free_buf)(struct ibv_buf *buf);
	int (*alloc_dmah)(struct ibv_context *ctx, struct ibv_dmah_init_attr *attr,
			  struct ibv_dmah **dmah);
	int (*dealloc_dmah)(struct ibv_dmah *dmah);

	/* memory windows and device memory */
	int (*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw **mw);
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*alloc_dm)(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr,
			struct ibv_dm **dm);
	int (*free_dm)(struct ibv_dm *dm);
	int (*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset, size_t length,
			 unsigned int access, struct ibv_mr **mr);
	int (*dm_export_dmabuf_fd)(struct ibv_dm *dm);

	/* completion queues */
	int (*create_cq_ex)(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr,
			    struct ibv_cq_ex **cq);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);

	/* queue pairs */
	int (*create_qp_ex)(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr,
			    struct ibv_qp **qp);
	int (*open_qp)(struct ibv_context *ctx, struct ibv_qp_open_attr *attr, struct ibv_qp **qp);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			struct ibv_qp_init_attr *init);
	int (*destroy_qp)(struct ibv_qp *qp);
	/* NULL result with 0 means "not an extended QP" */
	int (*qp_to_qp_ex)(struct ibv_qp *qp, struct ibv_qp_ex **qpx);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp, struct ibv_qp_rate_limit_attr *attr);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);

	/* shared receive queues */
	int (*create_srq_ex)(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr,
			     struct ibv_srq **srq);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);

	/* address handles */
	int (*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr, struct ibv_ah **ah);
	int (*destroy_ah)(struct ibv_ah *ah);

	/* XRC domains, work queues, RSS tables, flows, counters */
	int (*open_xrcd)(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr,
			 struct ibv_xrcd **xrcd);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	int (*create_wq)(struct ibv_context *ctx, struct ibv_wq_init_attr *attr,
			 struct ibv_wq **wq);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *attr);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*create_rwq_ind_table)(struct ibv_context *ctx,
				    struct ibv_rwq_ind_table_init_attr *attr,
				    struct ibv_rwq_ind_table **tbl);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *tbl);
	int (*create_flow)(struct ibv_qp *qp, struct ibv_flow_attr *attr, struct ibv_flow **flow);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*create_counters)(struct ibv_context *ctx, struct ibv_counters_init_attr *attr,
			       struct ibv_counters **counters);
	int (*destroy_counters)(struct ibv_counters *counters);

	/* tear-down of the device-private part of a context */
	void (*close_context)(struct ibv_context *ctx);

	/*
	 * Data path: ABI signatures of struct ibv_context_ops, installed
	 * directly into ctx->ops. post_* return a positive errno; poll_cq
	 * returns the number of completions or a negative value on error.
	 */
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op, struct ibv_ops_wr **bad);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);
};

/*
 * The core's part of every MR (rdma-core's verbs_mr). A device MR embeds
 * it first and zeroes it at allocation; the fields after `ibv` belong to
 * the core, which sets them after a successful registration.
 */
enum sv_mr_type {
	SV_MR_TYPE_OTHER, /* null MR, device-memory MR: not re-registrable */
	SV_MR_TYPE_VA, /* registered by address */
	SV_MR_TYPE_DMABUF, /* registered by fd and offset */
};

struct sv_mr {
	struct ibv_mr ibv;
	enum sv_mr_type type;
	bool dontfork; /* [ibv.addr, +ibv.length) holds one sv_dontfork_range() */
};

static inline struct sv_mr *sv_mr_of(struct ibv_mr *mr)
{
	return sv_container_of(mr, struct sv_mr, ibv);
}

/*
 * A device as the core lists it. `ibv` is what applications see; a device
 * embeds this struct and opens contexts through `open`.
 */
struct sv_device {
	struct ibv_device ibv;
	__be64 guid;
	uint32_t index;
	/*
	 * Allocate a device context (which embeds struct sv_context) and fill
	 * `*ops` with the device's ops. The core finishes the ABI setup.
	 */
	int (*open)(struct sv_device *dev, struct sv_context **ctx, const struct sv_ops **ops);
	/* last reference gone: free the device */
	void (*release)(struct sv_device *dev);
	atomic_int refcnt; /* one for each list that holds it, one per context */
};

/* Queued async event, owned by the core's per-context queue. */
struct sv_async_entry {
	struct ibv_async_event event;
	struct sv_async_entry *next;
};

/* Events delivered by ibv_get_async_event() per object, for destroy. */
struct sv_async_count {
	const void *obj;
	uint32_t delivered;
	struct sv_async_count *next;
};

/*
 * The core's part of every context. A device context embeds it; the
 * application sees only &vctx.context.
 */
struct sv_context {
	struct verbs_context vctx;
	struct sv_ops ops; /* device ops with fallbacks filled in */
	struct sv_device *dev;
	pthread_mutex_t async_lock;
	struct sv_async_entry *async_head, *async_tail;
	struct sv_async_count *async_counts;
};

static inline struct sv_context *sv_ctx(struct ibv_context *ctx)
{
	return sv_container_of(ctx, struct sv_context, vctx.context);
}

static inline const struct sv_ops *sv_ops_of(struct ibv_context *ctx)
{
	return &sv_ctx(ctx)->ops;
}

/* fallback.c: fill every NULL slot with an EOPNOTSUPP fallback */
void sv_ops_fill_fallbacks(struct sv_ops *ops);

/* device_list.c */
void sv_device_get(struct sv_device *dev);
void sv_device_put(struct sv_device *dev);

/* async.c: the per-context async event queue behind ctx->async_fd */
int sv_async_init(struct sv_context *ctx);
void sv_async_destroy(struct sv_context *ctx);
/* Queue an event for ibv_get_async_event(); safe from any thread. */
int sv_async_post(struct ibv_context *ctx, const struct ibv_async_event *event);
/*
 * For the destroy of a CQ, QP, SRQ or WQ `obj`: drop its unread events,
 * then wait until the application acknowledged every event of it that
 * ibv_get_async_event() delivered (*completed counts the acks, under
 * mutex/cond: the object's own), as rdma-core's destroy verbs do.
 */
void sv_async_forget(struct ibv_context *ctx, const void *obj);
void sv_async_wait_acked(struct ibv_context *ctx, const void *obj, pthread_mutex_t *mutex,
			 pthread_cond_t *cond, const uint32_t *completed);

/*
 * cq.c: the core's bookkeeping of a CQ, for devices. sv_cq_init() fills
 * the ibv_cq prefix (context, channel, cq_context, mutex, cond, event
 * counters) and counts the CQ on its channel; sv_cq_fini() undoes it. A
 * device calls them from create_cq_ex / destroy_cq.
 */
void sv_cq_init(struct ibv_cq *cq, struct ibv_context *ctx, struct ibv_comp_channel *channel,
		void *cq_context);
void sv_cq_fini(struct ibv_cq *cq);
/*
 * Block until the application has acknowledged (ibv_ack_cq_events)
 * `comp_reported` completion events of `cq`, as ibv_destroy_cq must.
 */
void sv_cq_wait_acks(struct ibv_cq *cq, uint32_t comp_reported);

/*
 * comp_channel.c: completion channels. sv_comp_channel_post() queues a
 * completion event of `cq` for ibv_get_cq_event(); safe from any thread;
 * 0 or -errno. sv_comp_channel_forget() drops the unread events of `cq`
 * (destroy) and returns how many it dropped.
 */
int sv_comp_channel_post(struct ibv_comp_channel *ch, struct ibv_cq *cq);
unsigned int sv_comp_channel_forget(struct ibv_comp_channel *ch, struct ibv_cq *cq);

/* fork.c: refcounted MADV_DONTFORK ranges (0 or -errno) */
int sv_dontfork_range(void *base, size_t size);
int sv_dofork_range(void *base, size_t size);

/*
 * Exported but absent from the public header (rdma-core declares them in
 * its driver header; librdmacm and the providers import them).
 */
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

/* Drivers the core probes, in order. Each returns 0 or -errno. */
int sv_sw_probe(struct sv_device ***devs, int *ndevs);
/*
 * The library is being unloaded (dlclose) or the process exits
 * (core/unload.c): each driver ends every thread it started, so that
 * none runs once the library is unmapped. Safe while the program's
 * threads still use its objects (nothing is freed or closed).
 */
void sv_sw_unload(void);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * ctrl.h - the software RoCE v2 device's control layer (src/sw/ctrl):
 * limits, configuration, the device and its contexts, PDs, parent and
 * thread domains, address handles and the HCA clock; and the layout of
 * the device's parts:
 *
 *   ctrl/       configuration, device, context, PD / parent domain / TD, AH
 *   mem/        MRs, keys, access rules, registration, buffers, DMA
 *               handles, placement                  (sw/mem.h)
 *   queue/      CQ, QP and SRQ rings, posting, QP state changes
 *                                                   (sw/queue.h)
 *   transport/  wire format, requester, responder, completer, network
 *                                                   (sw/transport.h)
 *
 * Objects embed the public struct first, so a cast from the public
 * pointer is a container_of at offset 0. Every function follows the core
 * convention: 0 or -errno.
 */
#ifndef SV_SW_CTRL_H
#define SV_SW_CTRL_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "core/core.h"
#include "sw/addr.h"
#include "sw/mem.h"
#include "sw/transport.h"

/* Limits the device reports and enforces. */
enum {
	SW_MAX_PD = 1 << 16,
	SW_MAX_MR = 1 << 18,
	SW_MAX_MW = 1 << 16,
	SW_MAX_TD = 1 << 12,
	SW_MAX_DMAH = 1 << 12,
	SW_MAX_QP = 1 << 14,
	SW_MAX_QP_WR = 1 << 14,
	SW_MAX_SGE = 32,
	SW_MAX_SGE_RD = 32,
	SW_MAX_CQ = 1 << 14,
	SW_MAX_CQE = (1 << 20) - 1,
	SW_MAX_SRQ = 1 << 12,
	SW_MAX_SRQ_WR = 1 << 14,
	SW_MAX_SRQ_SGE = 32,
	SW_MAX_AH = 1 << 16,
	/* multicast, as rxe reports it: groups, QPs per group, attachments in all */
	SW_MAX_MCAST_GRP = 8192,
	SW_MAX_MCAST_QP_ATTACH = 56,
	SW_MAX_TOTAL_MCAST_QP_ATTACH = 0x70000,
	SW_MAX_INLINE = 512,
	SW_MAX_QP_RD_ATOM = 128,
	SW_MAX_RES_RD_ATOM = SW_MAX_QP_RD_ATOM * SW_MAX_QP,
	SW_MAX_PKEYS = 1,
	SW_UDP_PORT = 4791,
	SW_SPIN_US_DEFAULT = 50, /* SOFTVERBS_SPIN_US; see docs/performance.md */
	SW_VENDOR_ID = 0xFFFFFF, /* not Mellanox (0x02c9), not Amazon (0x1d0f) */
	SW_VENDOR_PART_ID = 0,
	SW_HW_VER = 1,
};

#define SW_MAX_MSG_SZ (1ULL << 31)
#define SW_MAX_MR_SIZE (~0ULL)
#define SW_MAX_DM_SIZE (256ULL << 10) /* device memory, emulated in host memory */
#define SW_DEFAULT_PKEY 0xffff

enum sw_cc_heap {
	SW_CC_HEAP_AUTO, /* the kernel heap if present, else the built-in pool */
	SW_CC_HEAP_KERNEL, /* the kernel heap only */
	SW_CC_HEAP_BUILTIN, /* always the built-in pool */
};

/* Fault injection (SOFTVERBS_FAULT): packets per million affected. */
struct sw_fault {
	uint32_t drop_ppm, dup_ppm, reorder_ppm;
	uint32_t again_ppm; /* sends refused as if the socket were full (tx) */
	bool on_tx, on_rx;
	uint64_t seed;
};

/* SOFTVERBS_GID_TABLE: the order of the port's GID table (ctrl/gid.c). */
enum sw_gid_layout {
	SW_GIDS_SINGLE, /* 0: the address */
	SW_GIDS_RXE, /* 0: IPv6 link-local, 1: the address (as the kernel's rxe) */
	SW_GIDS_MLX5, /* 1: link-local, 3: the address (RoCE v2 where mlx5 has it) */
};

/* ctrl/config.c: SOFTVERBS_* settings, read once per device probe. */
struct sw_config {
	char name[64]; /* SOFTVERBS_DEV_NAME, default "softverbs0" */
	bool have_addr; /* SOFTVERBS_ADDR given */
	union sw_sa addr; /* address to bind when have_addr (port 0) */
	enum sw_gid_layout gid_layout; /* SOFTVERBS_GID_TABLE */
	uint16_t udp_port; /* SOFTVERBS_UDP_PORT, default 4791 */
	enum ibv_mtu mtu; /* SOFTVERBS_MTU; 0 = by address (lo: 4096, else 1024) */
	bool cc_dma_bounce; /* SOFTVERBS_CC_DMA_BOUNCE */
	enum sw_cc_heap cc_heap; /* SOFTVERBS_CC_HEAP */
	bool busy_poll; /* SOFTVERBS_BUSY_POLL */
	uint32_t spin_us; /* SOFTVERBS_SPIN_US: polling after the last work, then sleep */
	int progress_cpu; /* SOFTVERBS_PROGRESS_CPU; -1 = not pinned */
	bool stats; /* SOFTVERBS_STATS: counters at exit */
	bool shm; /* SOFTVERBS_SHM: same-host link (default 1) */
	bool single_copy; /* SOFTVERBS_SINGLE_COPY: pulls over the link (default 1) */
	bool gso; /* SOFTVERBS_GSO: UDP GSO and GRO where the kernel has them (default 1) */
	bool app_progress; /* SOFTVERBS_APP_PROGRESS: empty CQ polls receive (default 1) */
	/* SOFTVERBS_LINK_LAYER: IBV_LINK_LAYER_ETHERNET (eth, default) or _INFINIBAND (ib) */
	uint8_t link_layer;
	struct sw_fault fault; /* SOFTVERBS_FAULT */
	char error[256]; /* non-empty: a malformed setting; open fails */
};

/*
 * Parse the environment into `cfg`. Never fails: a malformed value is
 * recorded in cfg->error (with the variable's name) and the device then
 * refuses to open with EINVAL.
 */
void sw_config_load(struct sw_config *cfg);

/* ctrl/gid.c: fill port->gid and gid_tbl_len per layout (the sockets are open). */
void sw_port_lay_out_gids(struct sw_port *port, enum sw_gid_layout layout);
/*
 * ctrl/gid.c: the GID slot `index` of the port, NULL if out of range or
 * empty (the verbs refuse it with EINVAL).
 */
const struct sw_gid_slot *sw_port_gid(const struct sw_port *port, unsigned int index);

struct sw_qp_table;
struct sw_engine;

/* The device: one per process and configured name. */
struct sw_dev {
	struct sv_device core;
	struct sw_config cfg;
	pthread_mutex_t lock; /* guards port and nctx */
	int nctx; /* open contexts sharing `port` */
	struct sw_port port;
	struct sw_mr_table mrs;
	pthread_mutex_t mw_lock; /* memory windows' binds (mem/mw.c) */
	atomic_uint nmw; /* memory windows, against SW_MAX_MW */
	struct sw_qp_table *qps; /* QPN -> QP (queue/qp_table.c) */
	struct sw_engine *eng; /* transport engine while the port is open */
	atomic_uint npd, ntd, ndmah; /* counts against the limits */
	atomic_ullong dm_bytes; /* device memory allocated, against SW_MAX_DM_SIZE */
	pid_t pid; /* creator: a forked child probes its own device */
	atomic_ullong wc_errors, wc_flushed; /* error completions of all its QPs */
	/*
	 * An application thread found one of its CQs empty since the
	 * progress thread last looked: someone polls for completions, and
	 * receives itself while the progress thread sleeps, so that thread
	 * need not spin (transport/progress.c, spin_now).
	 */
	atomic_bool app_polls;
	struct sw_dev *next_live, **pprev_live; /* every device not yet freed (ctrl/unload.c) */
};

static inline struct sw_dev *sw_dev_of(struct ibv_context *ctx)
{
	return sv_container_of(ctx->device, struct sw_dev, core.ibv);
}

/*
 * ctrl/lid.c: identities derived from an address (rules in lid.c).
 * sw_lid_of: the LID of a device at `addr` (0x0001-0x8000).
 * sw_addr_of_lid: the address of the peer with `lid`, seen from a device
 * at `own` (the same /17); -EINVAL for a LID that names no device.
 * sw_guid_of: the node GUID of a device at addr:udp_port.
 */
uint16_t sw_lid_of(const union sw_sa *addr);
int sw_addr_of_lid(const union sw_sa *own, uint16_t lid, union sw_sa *peer);
__be64 sw_guid_of(const union sw_sa *addr, uint16_t udp_port);

static inline bool sw_dev_is_ib(const struct sw_dev *dev)
{
	return dev->cfg.link_layer == IBV_LINK_LAYER_INFINIBAND;
}

/*
 * ctrl/unload.c: the list of live devices, which sv_sw_unload() walks.
 * A device is added when created and removed when freed.
 */
void sw_live_add(struct sw_dev *dev);
void sw_live_remove(struct sw_dev *dev);

/*
 * Take one unit of a limit counter: -ENOMEM if `count` is at `max`
 * already, else it grows by one (the owner gives it back with
 * atomic_fetch_sub when the object goes). Any thread.
 */
static inline int sw_limit_take(atomic_uint *count, unsigned int max)
{
	unsigned int cur = atomic_load(count);

	do {
		if (cur >= max)
			return -ENOMEM;
	} while (!atomic_compare_exchange_weak(count, &cur, cur + 1));
	return 0;
}

/*
 * Take one unit of `count` (sw_limit_take) for a new object of `size`
 * zeroed bytes. Returns the object, or NULL when `count` is at `max` or
 * memory is short (the unit is then given back). Any thread.
 */
static inline void *sw_limit_calloc(atomic_uint *count, unsigned int max, size_t size)
{
	void *obj;

	if (sw_limit_take(count, max))
		return NULL;
	obj = calloc(1, size);
	if (!obj)
		atomic_fetch_sub(count, 1);
	return obj;
}

/* ctrl/device.c */
void sw_device_fill_attr(const struct sw_dev *dev, struct ibv_device_attr_ex *attr);
void sw_device_fill_port(const struct sw_dev *dev, struct ibv_port_attr *attr);

/* ctrl/context.c */
struct sw_dm;

struct sw_context {
	struct sv_context core;
	pthread_mutex_t dm_lock; /* guards dms */
	struct sw_dm *dms; /* device memory allocated through it (mem/dm.c) */
};

extern const struct sv_ops sw_ops;

/* sv_device.open: a context sharing the device's port; EINVAL on a bad config */
int sw_context_open(struct sv_device *dev, struct sv_context **ctx, const struct sv_ops **ops);
void sw_close_context(struct ibv_context *ctx);

/* ctrl/query.c: the sv_ops query slots (port 1 only) */
int sw_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr);
int sw_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
int sw_query_gid_ex(struct ibv_context *ctx, uint8_t port, uint32_t index,
		    struct ibv_gid_entry *entry);
int sw_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey);

/* ctrl/pd.c: PDs and parent domains share one object. */
struct sw_td {
	struct ibv_td ibv;
	atomic_int refcnt; /* 1 + parent domains using it */
};

struct sw_pd {
	struct ibv_pd ibv;
	atomic_int usecnt; /* objects that depend on this PD */
	bool is_parent;
	struct sw_pd *base; /* parent domain: its protection domain */
	struct sw_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
		       uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
	void *pd_context;
	bool cc_alloc; /* ALLOW_CC_UNPROTECTED_ALLOC took effect (bounce device) */
	int heap_fd; /* kernel DMA-buf heap, or -1 */
};

static inline struct sw_pd *sw_pd(struct ibv_pd *pd)
{
	return (struct sw_pd *)pd;
}

/* The protection domain proper: a parent domain's base, else itself. */
static inline struct sw_pd *sw_pd_base(struct ibv_pd *pd)
{
	struct sw_pd *p = sw_pd(pd);

	return p->is_parent ? p->base : p;
}

int sw_alloc_pd(struct ibv_context *ctx, struct ibv_pd **pd);
int sw_dealloc_pd(struct ibv_pd *pd);
int sw_alloc_parent_domain(struct ibv_context *ctx, struct ibv_parent_domain_init_attr *attr,
			   struct ibv_pd **pd);
int sw_alloc_td(struct ibv_context *ctx, struct ibv_td_init_attr *attr, struct ibv_td **td);
int sw_dealloc_td(struct ibv_td *td);

/* ---- address vectors and address handles (ctrl/ah.c) ---- */

/* Where packets for a peer go: resolved from an ibv_ah_attr. */
struct sw_av {
	union sw_sa dst; /* peer's address and UDP port */
	union ibv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sl;
};

/*
 * Resolve `attr` for a port of `ctx`: port 1, and is_global with a listed
 * sgid_index and a unicast dgid of the source GID's family; on the
 * InfiniBand link layer also no GRH and a DLID that names a device
 * (ctrl/lid.c). 0 or -EINVAL.
 */
int sw_av_from_attr(struct ibv_context *ctx, const struct ibv_ah_attr *attr, struct sw_av *av);

struct sw_ah {
	struct ibv_ah ibv;
	struct sw_av av;
	struct ibv_ah_attr attr; /* as created, for ibv_query_ah-style use */
	struct sw_pd *pd; /* protection domain proper; holds a reference */
};

static inline struct sw_ah *sw_ah(struct ibv_ah *ah)
{
	return (struct sw_ah *)ah;
}

/* ctrl/ah.c: the sv_ops AH slots */
int sw_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr, struct ibv_ah **ah);
int sw_destroy_ah(struct ibv_ah *ah);

/* ---- the HCA clock (ctrl/clock.c) ---- */

/*
 * The device's "HCA clock" for completion timestamps is CLOCK_MONOTONIC
 * in nanoseconds: a 64-bit counter running at 1 GHz (1,000,000 kHz).
 */
#define SW_CQ_TS_CLOCK CLOCK_MONOTONIC
#define SW_HCA_CORE_CLOCK_KHZ 1000000ULL
#define SW_COMPLETION_TS_MASK UINT64_MAX

/* ctrl/clock.c: the sv_ops query_rt_values slot */
int sw_query_rt_values(struct ibv_context *ctx, struct ibv_values_ex *values);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * sw.h - the software RoCE v2 device: shared types of its parts.
 *
 *   ctrl/       configuration, device, context, PD / parent domain / TD
 *   mem/        MR table, keys, access rules, registration, buffers, DMA handles
 *   queue/      CQ, QP and SRQ rings                        (data path)
 *   transport/  wire format, requester, responder, completer, network
 *
 * Objects embed the public struct first, so a cast from the public
 * pointer is a container_of at offset 0. Every function follows the core
 * convention: 0 or -errno.
 */
#ifndef SV_SW_H
#define SV_SW_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include "core/core.h"
#include "sw/addr.h"
#include "sw/mem/place.h"
#include "sw/transport.h"

/* Limits the device reports and enforces. */
enum {
	SW_MAX_PD = 1 << 16,
	SW_MAX_MR = 1 << 18,
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
	SW_MAX_INLINE = 512,
	SW_MAX_QP_RD_ATOM = 128,
	SW_MAX_RES_RD_ATOM = SW_MAX_QP_RD_ATOM * SW_MAX_QP,
	SW_MAX_PKEYS = 1,
	SW_UDP_PORT = 4791,
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
	int progress_cpu; /* SOFTVERBS_PROGRESS_CPU; -1 = not pinned */
	bool stats; /* SOFTVERBS_STATS: counters at exit */
	bool shm; /* SOFTVERBS_SHM: same-host link (default 1) */
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

struct sw_mr;
struct sw_qp_table;
struct sw_engine;

/*
 * mem/mr_table.c: key -> MR, an open-addressed hash table. Keys are
 * 32-bit random values, nonzero and unique among live MRs, so a peer
 * cannot guess one. Lookups take a reference so that the transport can
 * use an MR while the application deregisters it; the last put frees it.
 * Safe from any thread.
 */
struct sw_mr_table {
	pthread_rwlock_t lock;
	struct sw_mr **slots; /* power-of-two sized; NULL or a tombstone */
	uint32_t nslots;
	uint32_t used; /* live entries */
	uint32_t tombs; /* deleted entries */
	uint32_t max;
};

int sw_mr_table_init(struct sw_mr_table *t, uint32_t max);
/* Frees the slots; MRs still in the table lose their registration reference. */
void sw_mr_table_destroy(struct sw_mr_table *t);
/*
 * Insert and assign mr->key == mr->ibv.lkey == mr->ibv.rkey (a fresh
 * random key). -ENOMEM at the limit or when the table cannot grow.
 */
int sw_mr_table_insert(struct sw_mr_table *t, struct sw_mr *mr);
/* Remove a registered MR; its key no longer resolves. No reference is dropped. */
void sw_mr_table_remove(struct sw_mr_table *t, struct sw_mr *mr);
/* Returns a referenced MR or NULL; release with sw_mr_put(). */
struct sw_mr *sw_mr_table_lookup(struct sw_mr_table *t, uint32_t key);
/*
 * Quiesce a registered MR so that its fields may be rewritten (rereg):
 * lookups of its key fail from now on, and the call returns once every
 * reference taken by an earlier lookup has been put. The caller must not
 * hold such a reference. sw_mr_table_unblock() makes the key resolve again.
 */
void sw_mr_table_block(struct sw_mr_table *t, struct sw_mr *mr);
/*
 * Wait until the caller's reference is the only one left on an MR whose
 * key no longer resolves (removed or blocked): every transfer that
 * looked it up earlier is done with its memory.
 */
void sw_mr_wait_idle(struct sw_mr *mr);
void sw_mr_table_unblock(struct sw_mr_table *t, struct sw_mr *mr);
/*
 * Remove up to `max` MRs for which match(mr, arg) holds, scanning from
 * slot *cursor on (start with 0; it advances), into out[]. Returns how
 * many; their registration references pass to the caller.
 */
size_t sw_mr_table_remove_matching(struct sw_mr_table *t,
				   bool (*match)(const struct sw_mr *mr, const void *arg),
				   const void *arg, uint32_t *cursor, struct sw_mr **out,
				   size_t max);

/* The device: one per process and configured name. */
struct sw_dev {
	struct sv_device core;
	struct sw_config cfg;
	pthread_mutex_t lock; /* guards port and nctx */
	int nctx; /* open contexts sharing `port` */
	struct sw_port port;
	struct sw_mr_table mrs;
	struct sw_qp_table *qps; /* QPN -> QP (queue/qp_table.c) */
	struct sw_engine *eng; /* transport engine while the port is open */
	atomic_uint npd, ntd, ndmah; /* counts against the limits */
	atomic_ullong dm_bytes; /* device memory allocated, against SW_MAX_DM_SIZE */
	pid_t pid; /* creator: a forked child probes its own device */
	atomic_ullong wc_errors, wc_flushed; /* error completions of all its QPs */
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

/* mem/: memory regions */
struct sw_dmah;

/*
 * A registered MR. `ibv` and `core.ibv` are the same object: the core's
 * struct sv_mr starts with the public struct ibv_mr. While a reference is
 * held, the fields below `key` stay constant (rereg quiesces the MR first).
 */
struct sw_mr {
	union {
		struct ibv_mr ibv;
		struct sv_mr core;
	};
	atomic_int refcnt; /* table lookups in flight + 1 while registered */
	uint32_t key; /* lkey == rkey; our copy, the app may scribble on ibv */
	bool blocked; /* rereg in progress: lookups fail (table lock) */
	struct sw_pd *pd; /* the protection domain proper (never a parent) */
	uint64_t iova; /* first byte's address as peers name it */
	uint64_t length;
	uint8_t *host; /* where iova maps in this process */
	int access;
	int fd; /* fd path: our dup of the caller's fd, else -1 */
	void *map; /* fd path: our mapping */
	size_t map_len;
	struct sw_dmah *dmah;
	struct sw_place_hint hint; /* copy of the DMA handle's hints */
	bool has_hint;
	struct sw_dm *dm; /* device-memory MR: its DM (holds a use), else NULL */
};

static inline struct sw_mr *sw_mr(struct ibv_mr *mr)
{
	return (struct sw_mr *)mr;
}

/* Take another reference on an MR the caller already holds one on. */
void sw_mr_get(struct sw_mr *mr);
/* Drop a reference; the last one unmaps, closes and frees the MR. */
void sw_mr_put(struct sw_mr *mr);

/*
 * mem/mr.c: the device's memory state. The device code calls
 * sw_mem_dev_init() once when it creates a struct sw_dev (before any
 * context opens) and sw_mem_dev_fini() when it frees it.
 */
int sw_mem_dev_init(struct sw_dev *dev);
void sw_mem_dev_fini(struct sw_dev *dev);

/*
 * queue/qp_table.c: the device's queue state (its QPN table), set up
 * and torn down next to sw_mem_dev_init()/_fini(). 0 or -errno.
 */
int sw_queue_dev_init(struct sw_dev *dev);
void sw_queue_dev_fini(struct sw_dev *dev);
/*
 * Deregister every MR still registered through `ctx` (closed without
 * ibv_dereg_mr), so that their keys stop resolving. close_context calls
 * it before it frees the context's PDs.
 */
void sw_mem_ctx_close(struct ibv_context *ctx);

/*
 * mem/prot.c: check that the pages of [addr, +len) are mapped, readable
 * and, if `write`, writable, as pinning them would require (the span
 * does not wrap). 0, -EFAULT (a hole, or a page without the protection),
 * or another -errno.
 */
int sw_mem_check_mapped(uintptr_t addr, uint64_t len, bool write);

/* mem/access.c */
/* Validate access bits for a registration; `fd_path` narrows the set. */
int sw_access_check(int access, bool fd_path);

/*
 * Check that [iova, iova + len) lies inside the MR and that `need`
 * (IBV_ACCESS_* bits) is granted. Returns 0, -EINVAL (range) or -EACCES.
 */
int sw_mr_check_range(const struct sw_mr *mr, uint64_t iova, uint64_t len, int need);

/*
 * The MR that `key` names, for [va, va + len) with `need` access, as one
 * use of it (an SGE, an rkey of a request, advice) sees it. Checked in
 * this order: a live MR has the key and belongs to protection domain
 * `pd` (a parent domain's base), else -ENOENT; it grants every bit of
 * `need`, else -EACCES; the range lies inside it, else -EINVAL. 0 with a
 * referenced MR in *out (release with sw_mr_put()). Any thread.
 */
int sw_mr_resolve(struct sw_dev *dev, uint32_t key, const struct sw_pd *pd, uint64_t va,
		  uint64_t len, int need, struct sw_mr **out);

/* Where address `va` of a resolved range of `mr` lies in this process. */
static inline uint8_t *sw_mr_host(const struct sw_mr *mr, uint64_t va)
{
	return mr->host + (va - mr->iova);
}

/* mem/keys.c: unpredictable nonzero 32-bit key candidates */
uint32_t sw_key_random(void);

/* mem/mr.c */
int sw_reg_mr(struct ibv_pd *pd, const struct ibv_mr_init_attr *attr, bool legacy_dmabuf,
	      struct ibv_mr **mr);
int sw_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		int access);
int sw_dereg_mr(struct ibv_mr *mr);

/* mem/dm.c: device memory, emulated in host memory */
struct sw_dm {
	struct ibv_dm ibv;
	uint8_t *buf; /* page-aligned, zeroed */
	uint64_t length; /* as asked */
	size_t alloc_len; /* page-rounded, counted in dev->dm_bytes */
	atomic_int usecnt; /* MRs registered on it */
	struct sw_dm *prev, *next; /* in its context's list */
};

int sw_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr, struct ibv_dm **dm);
int sw_free_dm(struct ibv_dm *dm);
int sw_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t offset, size_t length,
		 unsigned int access, struct ibv_mr **mr);
/* Free the DMs a closing context still has (its MRs were deregistered first). */
void sw_dm_ctx_close(struct ibv_context *ctx);

/* mem/advise.c: the sv_ops advise_mr slot (ODP prefetch) */
int sw_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
		 struct ibv_sge *sg, uint32_t num_sge);

/* mem/dmah.c: DMA handles (TPH hints) */
struct sw_dmah {
	struct ibv_dmah ibv;
	atomic_int usecnt; /* MRs registered with this handle */
	struct sw_place_hint hint; /* what placement into its MRs honours */
};

static inline struct sw_dmah *sw_dmah(struct ibv_dmah *d)
{
	return (struct sw_dmah *)d;
}

int sw_alloc_dmah(struct ibv_context *ctx, struct ibv_dmah_init_attr *attr, struct ibv_dmah **dmah);
int sw_dealloc_dmah(struct ibv_dmah *dmah);

/* mem/buf.c: provider-aware buffers; mem/shmem.c: CC shared memory */
int sw_alloc_buf(struct ibv_pd *pd, size_t size, struct ibv_buf **buf, void **addr);
void sw_free_buf(struct ibv_buf *buf);
int sw_shmem_alloc(int heap_fd, size_t len, void **addr, int *fd);
void sw_shmem_free(void *addr, size_t len, int fd);

#endif

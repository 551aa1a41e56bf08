/* SPDX-License-Identifier: MIT */
/*
 * device.c - the software device: discovery, identity and attributes.
 *
 * There is one device per process. The probe keeps it in a process-wide
 * cache (which holds one reference) and hands out a new reference each
 * time. If the SOFTVERBS_* configuration changed since the last probe, a
 * new device replaces the cached one, the way a hot-plugged HCA would
 * appear; the old one lives on for whoever still holds it.
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/compat.h"
#include "sw/queue.h"
#include "sw/ctrl.h"

#define SW_FW_VER "softverbs 0.1"
#define SW_LOCAL_CA_ACK_DELAY 15 /* 4.096 us * 2^15 = 134 ms */

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_dev *cached; /* guarded by probe_lock; holds one reference */
static uint32_t next_index; /* guarded by probe_lock */

/* Contract: FNV-1a over `len` bytes of `p`, continuing from `h`. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/*
 * Contract: fill `buf` with this host's identity: the first line of
 * /etc/machine-id, else the host name, else the empty string.
 */
static void host_identity(char *buf, size_t size)
{
	FILE *f = fopen("/etc/machine-id", "re");

	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)size, f))
			buf[0] = '\0';
		fclose(f);
		buf[strcspn(buf, "\r\n")] = '\0';
	}
	if (!buf[0] && gethostname(buf, size - 1))
		buf[0] = '\0';
	buf[size - 1] = '\0';
}

/*
 * Contract: the node GUID a new device reports before its port is bound,
 * in network byte order. With SOFTVERBS_ADDR it is already the GUID of
 * its address and port (lid.c). Otherwise the address is chosen when the
 * first context opens (which then sets the address GUID, context.c);
 * until then a nonzero value of this host, device name and process
 * stands in, so that no two processes' devices share one.
 */
static __be64 device_guid(const struct sw_config *cfg)
{
	char host[256];
	uint64_t h = 0xcbf29ce484222325ULL;
	pid_t pid = getpid();

	if (cfg->have_addr)
		return sw_guid_of(&cfg->addr, cfg->udp_port);
	host_identity(host, sizeof(host));
	h = hash_bytes(h, host, strlen(host) + 1);
	h = hash_bytes(h, cfg->name, strlen(cfg->name));
	h = hash_bytes(h, &pid, sizeof(pid));
	/* spread the bits (splitmix64 finaliser) */
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	h ^= h >> 31;
	if (!h)
		h = 1;
	return htobe64(h);
}

/* Contract: true if two configurations describe the same device. */
static bool config_equal(const struct sw_config *a, const struct sw_config *b)
{
	return !strcmp(a->name, b->name) && a->have_addr == b->have_addr &&
	       (!a->have_addr || (sw_sa_same_addr(&a->addr, &b->addr) &&
				  a->addr.v6.sin6_scope_id == b->addr.v6.sin6_scope_id)) &&
	       a->gid_layout == b->gid_layout && a->udp_port == b->udp_port && a->mtu == b->mtu &&
	       a->cc_dma_bounce == b->cc_dma_bounce && a->cc_heap == b->cc_heap &&
	       a->busy_poll == b->busy_poll && a->spin_us == b->spin_us &&
	       a->app_progress == b->app_progress && a->single_copy == b->single_copy &&
	       a->progress_cpu == b->progress_cpu && a->stats == b->stats && a->shm == b->shm &&
	       a->gso == b->gso && a->link_layer == b->link_layer &&
	       !memcmp(&a->fault, &b->fault, sizeof(a->fault)) && !strcmp(a->error, b->error);
}

/* Contract: sv_device.release: free a device nobody refers to any more. */
static void sw_device_release(struct sv_device *core)
{
	struct sw_dev *dev = sv_container_of(core, struct sw_dev, core);

	sw_live_remove(dev);
	sw_port_close(&dev->port);
	sw_queue_dev_fini(dev);
	sw_mem_dev_fini(dev);
	pthread_mutex_destroy(&dev->lock);
	free(dev);
}

/*
 * Contract: fill the struct ibv_device names and paths of `dev`. The
 * paths are under ibv_get_sysfs_path() ($SYSFS_PATH or /sys), as
 * rdma-core makes them; softverbs-run mounts its tree there. A path that
 * would not fit is left empty.
 */
static void device_fill_ibv(struct sw_dev *dev)
{
	struct ibv_device *ibv = &dev->core.ibv;
	const char *sysfs = ibv_get_sysfs_path();
	int n;

	ibv->node_type = IBV_NODE_CA;
	ibv->transport_type = IBV_TRANSPORT_IB;
	snprintf(ibv->name, sizeof(ibv->name), "%s", dev->cfg.name);
	snprintf(ibv->dev_name, sizeof(ibv->dev_name), "uverbs%u", dev->core.index);
	n = snprintf(ibv->dev_path, sizeof(ibv->dev_path), "%s/class/infiniband_verbs/%s", sysfs,
		     ibv->dev_name);
	if (n < 0 || (size_t)n >= sizeof(ibv->dev_path))
		ibv->dev_path[0] = '\0';
	n = snprintf(ibv->ibdev_path, sizeof(ibv->ibdev_path), "%s/class/infiniband/%s", sysfs,
		     ibv->name);
	if (n < 0 || (size_t)n >= sizeof(ibv->ibdev_path))
		ibv->ibdev_path[0] = '\0';
}

/*
 * Contract: a new device for `cfg` with index `index` and one reference,
 * in *out; 0 or -errno.
 */
static int device_new(const struct sw_config *cfg, uint32_t index, struct sw_dev **out)
{
	struct sw_dev *dev = calloc(1, sizeof(*dev));
	int ret;

	if (!dev)
		return -ENOMEM;
	dev->cfg = *cfg;
	ret = sw_mem_dev_init(dev);
	if (ret) {
		free(dev);
		return ret;
	}
	ret = sw_queue_dev_init(dev);
	if (ret) {
		sw_mem_dev_fini(dev);
		free(dev);
		return ret;
	}
	pthread_mutex_init(&dev->lock, NULL);
	dev->port.fd = dev->port.ll_fd = -1;
	dev->core.index = index;
	dev->pid = getpid();
	dev->core.guid = device_guid(cfg);
	dev->core.open = sw_context_open;
	dev->core.release = sw_device_release;
	atomic_init(&dev->core.refcnt, 1);
	atomic_init(&dev->npd, 0);
	atomic_init(&dev->ntd, 0);
	atomic_init(&dev->ndmah, 0);
	device_fill_ibv(dev);
	sw_live_add(dev);
	*out = dev;
	return 0;
}

/*
 * Contract: see core.h. One device: the cached one if the configuration
 * is unchanged and this process created it, else a new one that becomes
 * the cached one.
 */
int sv_sw_probe(struct sv_device ***devs, int *ndevs)
{
	struct sv_device **arr = malloc(sizeof(*arr));
	struct sw_dev *old = NULL, *dev;
	struct sw_config cfg;
	int ret;

	if (!arr)
		return -ENOMEM;
	sw_config_load(&cfg);
	pthread_mutex_lock(&probe_lock);
	/*
	 * A forked child never reuses its parent's device: that one's port,
	 * progress thread and QPs belong to the parent.
	 */
	if (!cached || cached->pid != getpid() || !config_equal(&cached->cfg, &cfg)) {
		ret = device_new(&cfg, next_index, &dev);
		if (ret) {
			pthread_mutex_unlock(&probe_lock);
			free(arr);
			return ret;
		}
		next_index++;
		old = cached;
		cached = dev;
	}
	sv_device_get(&cached->core);
	arr[0] = &cached->core;
	pthread_mutex_unlock(&probe_lock);
	if (old)
		sv_device_put(&old->core);
	*devs = arr;
	*ndevs = 1;
	return 0;
}

/* Contract: see sw/ctrl.h. Fields the device has no use for stay as given (zero). */
void sw_device_fill_attr(const struct sw_dev *dev, struct ibv_device_attr_ex *attr)
{
	struct ibv_device_attr *a = &attr->orig_attr;
	long page = sysconf(_SC_PAGESIZE);

	if (page <= 0)
		page = 4096;
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", SW_FW_VER);
	a->node_guid = __atomic_load_n(&dev->core.guid, __ATOMIC_RELAXED);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = SW_MAX_MR_SIZE;
	a->page_size_cap = ~((uint64_t)page - 1);
	a->vendor_id = SW_VENDOR_ID;
	a->vendor_part_id = SW_VENDOR_PART_ID;
	a->hw_ver = SW_HW_VER;
	a->max_qp = SW_MAX_QP;
	a->max_qp_wr = SW_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_XRC |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = SW_MAX_SGE;
	a->max_sge_rd = SW_MAX_SGE_RD;
	a->max_cq = SW_MAX_CQ;
	a->max_cqe = SW_MAX_CQE;
	a->max_mr = SW_MAX_MR;
	a->max_mw = SW_MAX_MW;
	a->max_pd = SW_MAX_PD;
	a->max_qp_rd_atom = SW_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = SW_MAX_RES_RD_ATOM;
	a->max_qp_init_rd_atom = SW_MAX_QP_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = SW_MAX_AH;
	a->max_mcast_grp = SW_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SW_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = SW_MAX_TOTAL_MCAST_QP_ATTACH;
	a->max_srq = SW_MAX_SRQ;
	a->max_srq_wr = SW_MAX_SRQ_WR;
	a->max_srq_sge = SW_MAX_SRQ_SGE;
	a->max_pkeys = SW_MAX_PKEYS;
	a->local_ca_ack_delay = SW_LOCAL_CA_ACK_DELAY;
	a->phys_port_cnt = 1;

	attr->comp_mask = 0;
	attr->completion_timestamp_mask = SW_COMPLETION_TS_MASK;
	attr->hca_core_clock = SW_HCA_CORE_CLOCK_KHZ;
	/* IBTA 1.5 RDMA ATOMIC WRITE and FLUSH (RC), as rxe */
	attr->device_cap_flags_ex = a->device_cap_flags | IBV_DEVICE_ATOMIC_WRITE |
				    IBV_DEVICE_FLUSH_GLOBAL | IBV_DEVICE_FLUSH_PERSISTENT;
	if (dev->cfg.cc_dma_bounce)
		attr->device_cap_flags_ex |= IBV_DEVICE_CC_DMA_BOUNCE;
	attr->phys_port_cnt_ex = 1;
	/* CQ moderation (queue/cq_mod.c): any uint16_t count, periods as mlx5 */
	attr->cq_mod_caps.max_cq_count = UINT16_MAX;
	attr->cq_mod_caps.max_cq_period = 4095;
	attr->max_dm_size = SW_MAX_DM_SIZE; /* emulated in host memory (mem/dm.c) */
	/*
	 * Explicit ODP for RC, UD and XRC: the device never pins (mem/access.c).
	 * A bounce device registers no addresses at all, so no ODP there.
	 */
	if (dev->cfg.cc_dma_bounce)
		return;
	attr->odp_caps.general_caps = IBV_ODP_SUPPORT;
	attr->odp_caps.per_transport_caps.rc_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
		IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV |
		IBV_ODP_SUPPORT_ATOMIC_WRITE | IBV_ODP_SUPPORT_FLUSH;
	attr->odp_caps.per_transport_caps.ud_odp_caps =
		IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	/* XRC: INI sends and TGT answers as RC does; receives only from XRC SRQs */
	attr->xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			     IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
}

/* Link width and speed codes of the IB PortInfo attribute. */
enum {
	SW_WIDTH_4X = 2,
	SW_SPEED_EDR = 32, /* 25 Gb/s per lane: 4X EDR = 100 Gb/s */
	SW_PHYS_STATE_LINK_UP = 5,
};

/*
 * Contract: see sw/ctrl.h. Valid while a context is open (the port is bound).
 * RoCE (Ethernet link layer, the default): LID 0 and IP-based GIDs. The
 * InfiniBand link layer: the LID of the bound address (lid.c), no subnet
 * manager (SM LID 0), GIDs that are not IP-based.
 */
void sw_device_fill_port(const struct sw_dev *dev, struct ibv_port_attr *attr)
{
	bool ib = sw_dev_is_ib(dev);

	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = dev->port.active_mtu;
	attr->gid_tbl_len = (int)dev->port.gid_tbl_len;
	attr->port_cap_flags = IBV_PORT_CM_SUP | (ib ? 0 : IBV_PORT_IP_BASED_GIDS);
	attr->max_msg_sz = (uint32_t)SW_MAX_MSG_SZ;
	attr->bad_pkey_cntr = 0;
	attr->qkey_viol_cntr = 0;
	attr->pkey_tbl_len = SW_MAX_PKEYS;
	attr->lid = ib ? sw_lid_of(&dev->port.local) : 0;
	attr->sm_lid = 0;
	attr->lmc = 0;
	attr->max_vl_num = 1;
	attr->sm_sl = 0;
	attr->subnet_timeout = 0;
	attr->init_type_reply = 0;
	attr->active_width = SW_WIDTH_4X;
	attr->active_speed = SW_SPEED_EDR;
	attr->phys_state = SW_PHYS_STATE_LINK_UP;
	attr->link_layer = dev->cfg.link_layer;
	attr->flags = 0;
	attr->port_cap_flags2 = 0;
	attr->active_speed_ex = 0;
}

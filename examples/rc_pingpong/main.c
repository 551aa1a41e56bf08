/* SPDX-License-Identifier: MIT */
/*
 * sv_rc_pingpong - an RC ping-pong between two processes that shows the
 * rdma-core 65 memory APIs at work:
 *
 *   - the data buffer comes from ibv_alloc_buf() and is registered with
 *     ibv_reg_buf_mr(), or with ibv_reg_mr_ex(BUF|ADDR|DMAH) under -H;
 *   - -U puts the buffer, the CQ (ibv_create_cq_ex + MASK_PD) and the QP
 *     on a parent domain with ALLOW_CC_UNPROTECTED_ALLOC, which is what a
 *     program must do on a device that needs DMA bounce (CoCo guests);
 *   - -E exports the buffer's fd (ibv_export_buf_dmabuf_fd) to a helper
 *     process, which maps it and reports what it reads;
 *   - -H / --dmah registers the buffer with a DMA handle (ibv_alloc_dmah)
 *     carrying TPH hints: CPU id, processing hint and memory type.
 *
 * Without a host argument it is the server, with one the client. The two
 * sides swap QPN, PSN, GID, rkey and buffer address over TCP, run -n
 * SEND ping-pongs of -s bytes (the client times them), optionally RDMA
 * WRITE, RDMA READ and fetch-and-add on each other's buffer (-o), check
 * everything, and each prints a short report. Exit status: 0 when every
 * check passed on both sides, 1 on any failure, 2 for a bad command line.
 *
 * Uses nothing but the public verbs API.
 *
 * This file is the verbs part, in the order a run uses it: setup (device,
 * PD or parent domain, buffer, MR, CQ, QP), the data path (ping-pongs,
 * WRITE, READ, atomics, checks), run(), teardown and main(). The rest:
 * args.c (command line), tcp.c (the connection to the peer), export.c
 * (-E), report.c (failures and the report); pp.h declares what they share.
 */
#include "pp.h"

static const char *const wr_kind_name[WR_KINDS] = {"SEND", "RECV", "RDMA WRITE", "RDMA READ",
						   "fetch-and-add"};

/* ------------------------------------------------------------------ */
/* verbs setup                                                        */

static const char *errhint(const struct pp *p, int e)
{
	if (e == EOPNOTSUPP && p->bounce && !p->o.cc)
		return " (the device needs DMA bounce: ordinary memory and queues are refused; "
		       "use -U)";
	return "";
}

static int open_device(struct pp *p)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list) {
		fail(p, "ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!p->o.dev || !strcmp(ibv_get_device_name(list[i]), p->o.dev)) {
			dev = list[i];
			break;
		}
	if (!dev) {
		fail(p, p->o.dev ? "no device called %s" : "no RDMA device found%s",
		     p->o.dev ? p->o.dev : "");
		ibv_free_device_list(list);
		return -1;
	}
	p->ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!p->ctx) {
		fail(p, "ibv_open_device: %s", strerror(errno));
		return -1;
	}
	if (ibv_query_device_ex(p->ctx, NULL, &p->dattr) ||
	    ibv_query_port(p->ctx, p->o.ib_port, &p->pattr) ||
	    ibv_query_gid(p->ctx, p->o.ib_port, p->o.gid_idx, &p->gid)) {
		fail(p, "querying %s port %u GID %d: %s", ibv_get_device_name(p->ctx->device),
		     p->o.ib_port, p->o.gid_idx, strerror(errno));
		return -1;
	}
	p->bounce = (p->dattr.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE) != 0;
	if (p->pattr.state != IBV_PORT_ACTIVE) {
		fail(p, "port %u is not active", p->o.ib_port);
		return -1;
	}
	if (p->o.size > p->pattr.max_msg_sz) {
		fail(p, "-s %zu is above the port's largest message (%u B)", p->o.size,
		     p->pattr.max_msg_sz);
		return -1;
	}
	return 0;
}

static int alloc_pd(struct pp *p)
{
	struct ibv_parent_domain_init_attr pa;

	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd) {
		fail(p, "ibv_alloc_pd: %s", strerror(errno));
		return -1;
	}
	if (!p->o.cc)
		return 0;
	p->base_pd = p->pd;
	memset(&pa, 0, sizeof(pa));
	pa.pd = p->base_pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC;
	p->pd = ibv_alloc_parent_domain(p->ctx, &pa);
	if (!p->pd) {
		fail(p, "ibv_alloc_parent_domain(ALLOW_CC_UNPROTECTED_ALLOC): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Find out how the buffer is backed: an exported fd says it all. */
static int probe_backing(struct pp *p)
{
	char path[64], target[128];
	ssize_t n;
	int fd = ibv_export_buf_dmabuf_fd(p->ibuf);

	if (fd < 0) {
		if (errno == ENODATA)
			return 0; /* ordinary memory */
		fail(p, "ibv_export_buf_dmabuf_fd: %s", strerror(errno));
		return -1;
	}
	p->fd_backed = true;
	p->fd_size = lseek(fd, 0, SEEK_END);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	if (!strncmp(target, "/memfd:", 7))
		snprintf(p->fd_kind, sizeof(p->fd_kind), "memfd from softverbs' built-in CC pool");
	else if (strstr(target, "dmabuf"))
		snprintf(p->fd_kind, sizeof(p->fd_kind), "DMA-buf");
	else
		snprintf(p->fd_kind, sizeof(p->fd_kind), "%.60s", n > 0 ? target : "fd");
	close(fd);
	return 0;
}

static int alloc_buffer(struct pp *p)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned int nslots = p->o.ops ? SL_COUNT : SL_WSRC;

	p->slot = align_up(p->o.size, 64);
	p->len = align_up(HDR_BYTES + nslots * p->slot, page);
	p->buf = ibv_alloc_buf(p->pd, p->len, &p->ibuf);
	if (!p->buf) {
		fail(p, "ibv_alloc_buf(%zu): %s", p->len, strerror(errno));
		return -1;
	}
	if (probe_backing(p))
		return -1;
	if (p->o.export && !p->fd_backed) {
		fail(p,
		     "-E: ibv_export_buf_dmabuf_fd: %s (the buffer is ordinary memory; an "
		     "fd-backed one comes from -U on a CC DMA bounce device)",
		     strerror(ENODATA));
		return -1;
	}
	memset(p->buf, 0, p->len);
	snprintf((char *)p->buf + LABEL_OFF, LABEL_LEN, PROG " %s pid %d",
		 p->server ? "server" : "client", (int)getpid());
	store64(p->buf + COUNTER_OFF, counter_init(p->seed));
	if (p->o.ops) {
		fill(slot_ptr(p, SL_WSRC), p->o.size, p->seed, TAG_WRITE);
		fill(slot_ptr(p, SL_RSRC), p->o.size, p->seed, TAG_READ);
	}
	return 0;
}

static int register_buffer(struct pp *p)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_dmah_init_attr da;
	struct ibv_mr_init_attr ma;

	if (!p->o.dmah) {
		p->reg_verb = "ibv_reg_buf_mr";
		p->mr = ibv_reg_buf_mr(p->pd, p->ibuf, p->buf, p->len, access);
		if (!p->mr) {
			int e = errno;

			fail(p, "ibv_reg_buf_mr: %s%s", strerror(e), errhint(p, e));
			return -1;
		}
		return 0;
	}
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_DMAH_INIT_ATTR_MASK_PH;
	da.ph = p->o.dmah_ph;
	if (p->o.dmah_st) {
		da.comp_mask |=
			IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
		da.cpu_id = p->o.dmah_cpu;
		da.tph_mem_type = p->o.dmah_mem;
	}
	p->dmah = ibv_alloc_dmah(p->ctx, &da);
	if (!p->dmah) {
		int e = errno;

		fail(p, "ibv_alloc_dmah(cpu %u, ph %u, mem %s): %s%s", p->o.dmah_cpu, p->o.dmah_ph,
		     p->o.dmah_mem == IBV_TPH_MEM_TYPE_PM ? "pm" : "vm", strerror(e),
		     e == EPERM	 ? " (the CPU is outside this process's affinity mask)" :
		     e == EINVAL ? " (no such CPU, or a processing hint above 3)" :
				   "");
		return -1;
	}
	memset(&ma, 0, sizeof(ma));
	ma.length = p->len;
	ma.access = access;
	ma.comp_mask = IBV_REG_MR_MASK_BUF | IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
	ma.addr = p->buf;
	ma.buf = p->ibuf;
	ma.dmah = p->dmah;
	p->reg_verb = "ibv_reg_mr_ex(BUF|ADDR|DMAH)";
	p->mr = ibv_reg_mr_ex(p->pd, &ma);
	if (!p->mr) {
		int e = errno;

		fail(p, "ibv_reg_mr_ex(BUF|ADDR|DMAH): %s%s", strerror(e), errhint(p, e));
		return -1;
	}
	return 0;
}

static int create_queues(struct pp *p)
{
	struct ibv_cq_init_attr_ex ca;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	int e;

	memset(&ca, 0, sizeof(ca));
	ca.cqe = 64;
	ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
	if (p->o.cc) {
		ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
		ca.parent_domain = p->pd;
	}
	p->cq = ibv_create_cq_ex(p->ctx, &ca);
	if (!p->cq) {
		e = errno;
		fail(p, "ibv_create_cq_ex%s: %s%s", p->o.cc ? "(MASK_PD)" : "", strerror(e),
		     errhint(p, e));
		return -1;
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = ibv_cq_ex_to_cq(p->cq);
	qa.recv_cq = ibv_cq_ex_to_cq(p->cq);
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	p->qp = ibv_create_qp(p->pd, &qa);
	if (!p->qp) {
		e = errno;
		fail(p, "ibv_create_qp: %s%s", strerror(e), errhint(p, e));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = p->o.ib_port;
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		fail(p, "ibv_modify_qp(INIT): %s", strerror(errno));
		return -1;
	}
	p->psn = (uint32_t)lrand48() & 0xffffff;
	return 0;
}

static int connect_qp(struct pp *p)
{
	unsigned int rd = p->dattr.orig_attr.max_qp_rd_atom;
	unsigned int init_rd = p->dattr.orig_attr.max_qp_init_rd_atom;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->pattr.active_mtu;
	a.dest_qp_num = p->peer.qpn;
	a.rq_psn = p->peer.psn;
	a.max_dest_rd_atomic = (uint8_t)(rd > 16 ? 16 : rd ? rd : 1);
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = p->peer.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)p->o.gid_idx;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = p->o.ib_port;
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER)) {
		fail(p, "ibv_modify_qp(RTR): %s", strerror(errno));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = p->psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = (uint8_t)(init_rd > 16 ? 16 : init_rd ? init_rd : 1);
	if (ibv_modify_qp(p->qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
		fail(p, "ibv_modify_qp(RTS): %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* data path                                                          */

static int post_recv(struct pp *p)
{
	struct ibv_sge sge = {.addr = (uintptr_t)slot_ptr(p, SL_RECV),
			      .length = (uint32_t)p->o.size,
			      .lkey = p->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = WR_RECV, .sg_list = &sge, .num_sge = 1}, *bad;
	int r = ibv_post_recv(p->qp, &wr, &bad);

	if (r)
		fail(p, "ibv_post_recv: %s", strerror(r));
	return r ? -1 : 0;
}

/* Post one signaled work request of one SGE at `local` (`len` bytes). */
static int post_send(struct pp *p, enum wr_kind kind, uint8_t *local, uint32_t len,
		     uint64_t remote_off, uint64_t add)
{
	struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = p->mr->lkey};
	struct ibv_send_wr wr, *bad;
	int r;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = kind;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	switch (kind) {
	case WR_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case WR_WRITE:
	case WR_READ:
		wr.opcode = kind == WR_WRITE ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = p->peer.va + remote_off;
		wr.wr.rdma.rkey = p->peer.rkey;
		break;
	default:
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = p->peer.va + remote_off;
		wr.wr.atomic.rkey = p->peer.rkey;
		wr.wr.atomic.compare_add = add;
		break;
	}
	r = ibv_post_send(p->qp, &wr, &bad);
	if (r)
		fail(p, "ibv_post_send(%s): %s", wr_kind_name[kind], strerror(r));
	return r ? -1 : 0;
}

/* Take every completion the CQ has; -1 after a failed one. */
static int drain_cq(struct pp *p)
{
	struct ibv_poll_cq_attr attr = {.comp_mask = 0};
	int r, bad = 0;

	r = ibv_start_poll(p->cq, &attr);
	if (r == ENOENT)
		return 0;
	if (r) {
		fail(p, "ibv_start_poll: %s", strerror(r));
		return -1;
	}
	do {
		uint64_t id = p->cq->wr_id;

		if (p->cq->status != IBV_WC_SUCCESS) {
			fail(p, "%s completed with %s (vendor error 0x%x)",
			     id < WR_KINDS ? wr_kind_name[id] : "?",
			     ibv_wc_status_str(p->cq->status), ibv_wc_read_vendor_err(p->cq));
			bad = 1;
		} else if (id >= WR_KINDS) {
			fail(p, "completion with an unknown wr_id %" PRIu64, id);
			bad = 1;
		} else {
			if (id == WR_RECV)
				p->last_recv_len = ibv_wc_read_byte_len(p->cq);
			p->done[id]++;
		}
		r = ibv_next_poll(p->cq);
	} while (!r);
	ibv_end_poll(p->cq);
	if (r != ENOENT) {
		fail(p, "ibv_next_poll: %s", strerror(r));
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* Poll until `count` completions of `kind` arrived. */
static int wait_for(struct pp *p, enum wr_kind kind, unsigned long count)
{
	uint64_t deadline = p->o.timeout ? now_ns() + (uint64_t)p->o.timeout * 1000000000u : 0;
	unsigned int idle = 0;

	while (p->done[kind] < count) {
		if (drain_cq(p))
			return -1;
		if (p->done[kind] >= count)
			break;
		/* spin a little, then let the progress thread have the CPU */
		if (++idle < 64)
			continue;
		sched_yield();
		if ((idle & 1023) == 0 && deadline && now_ns() > deadline) {
			fail(p, "no %s completion within %d s (-t)", wr_kind_name[kind],
			     p->o.timeout);
			return -1;
		}
	}
	return 0;
}

/* The received message `i` against the peer's pattern. */
static void check_recv(struct pp *p, unsigned int i)
{
	size_t at;

	if (p->last_recv_len != p->o.size) {
		if (!p->bad_msgs++)
			fail(p, "message %u: %u B received, %zu expected", i, p->last_recv_len,
			     p->o.size);
		return;
	}
	if (!p->o.check)
		return;
	at = mismatch(slot_ptr(p, SL_RECV), p->o.size, p->peer_seed, i);
	if (at < p->o.size && !p->bad_msgs++)
		fail(p, "message %u, byte %zu: 0x%02x received, 0x%02x expected", i, at,
		     slot_ptr(p, SL_RECV)[at], pattern(p->peer_seed, i, at));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int pingpong_client(struct pp *p)
{
	uint64_t *rtt = calloc(p->o.iters, sizeof(*rtt));
	uint64_t start, sum = 0;
	unsigned int i;
	size_t k;

	if (!rtt) {
		fail(p, "out of memory");
		return -1;
	}
	start = now_ns();
	for (i = 0; i < p->o.iters; i++) {
		uint64_t t0;

		if (wait_for(p, WR_SEND, i))
			goto err;
		if (p->o.check)
			fill(slot_ptr(p, SL_SEND), p->o.size, p->seed, i);
		t0 = now_ns();
		if (post_send(p, WR_SEND, slot_ptr(p, SL_SEND), (uint32_t)p->o.size, 0, 0) ||
		    wait_for(p, WR_RECV, i + 1ul))
			goto err;
		rtt[i] = now_ns() - t0;
		check_recv(p, i);
		if (i + 1 < p->o.iters && post_recv(p))
			goto err;
	}
	if (wait_for(p, WR_SEND, p->o.iters))
		goto err;
	p->elapsed_ns = now_ns() - start;
	for (i = 0; i < p->o.iters; i++)
		sum += rtt[i];
	qsort(rtt, p->o.iters, sizeof(*rtt), cmp_u64);
	k = ((size_t)p->o.iters * 99 + 99) / 100; /* ceil(0.99 n) */
	p->avg_ns = sum / p->o.iters;
	p->p99_ns = rtt[k - 1];
	free(rtt);
	return 0;
err:
	free(rtt);
	return -1;
}

static int pingpong_server(struct pp *p)
{
	uint64_t start = 0;
	unsigned int i;

	for (i = 0; i < p->o.iters; i++) {
		if (wait_for(p, WR_RECV, i + 1ul))
			return -1;
		if (!i)
			start = now_ns();
		check_recv(p, i);
		if (i + 1 < p->o.iters && post_recv(p))
			return -1;
		if (wait_for(p, WR_SEND, i)) /* the previous pong left the send slot */
			return -1;
		if (p->o.check)
			fill(slot_ptr(p, SL_SEND), p->o.size, p->seed, i);
		if (post_send(p, WR_SEND, slot_ptr(p, SL_SEND), (uint32_t)p->o.size, 0, 0))
			return -1;
	}
	if (wait_for(p, WR_SEND, p->o.iters))
		return -1;
	p->elapsed_ns = now_ns() - start;
	return 0;
}

/* WRITE, READ and fetch-and-adds against the peer's buffer. */
static int run_ops(struct pp *p)
{
	if (p->o.ops & OP_WRITE) {
		p->stage = "RDMA WRITE";
		if (post_send(p, WR_WRITE, slot_ptr(p, SL_WSRC), (uint32_t)p->o.size,
			      slot_off(p, SL_WDST), 0) ||
		    wait_for(p, WR_WRITE, 1))
			return -1;
		p->write_out = V_OK; /* the peer checks the data */
	}
	if (p->o.ops & OP_READ) {
		size_t at;

		p->stage = "RDMA READ";
		if (post_send(p, WR_READ, slot_ptr(p, SL_RDST), (uint32_t)p->o.size,
			      slot_off(p, SL_RSRC), 0) ||
		    wait_for(p, WR_READ, 1))
			return -1;
		at = mismatch(slot_ptr(p, SL_RDST), p->o.size, p->peer_seed, TAG_READ);
		p->read_out = at == p->o.size ? V_OK : V_BAD;
		if (p->read_out == V_BAD)
			fail(p, "RDMA READ: byte %zu is 0x%02x, the peer has 0x%02x", at,
			     slot_ptr(p, SL_RDST)[at], pattern(p->peer_seed, TAG_READ, at));
	}
	if ((p->o.ops & OP_ATOMIC) && p->dattr.orig_attr.atomic_cap != IBV_ATOMIC_NONE) {
		uint64_t expect = counter_init(p->peer_seed);

		p->stage = "fetch-and-add";
		p->atomic_out = V_OK;
		p->atomic_first = expect;
		for (unsigned int k = 0; k < N_ATOMICS; k++) {
			uint64_t got;

			store64(p->buf + FETCHED_OFF, ~0ull);
			if (post_send(p, WR_ATOMIC, p->buf + FETCHED_OFF, 8, COUNTER_OFF, k + 1) ||
			    wait_for(p, WR_ATOMIC, k + 1ul))
				return -1;
			got = load64(p->buf + FETCHED_OFF);
			if (got != expect && p->atomic_out == V_OK) {
				p->atomic_out = V_BAD;
				fail(p,
				     "fetch-and-add %u returned 0x%" PRIx64 ", expected 0x%" PRIx64,
				     k, got, expect);
			}
			expect += k + 1;
		}
		p->atomic_last = expect;
	}
	return 0;
}

/* After the peer's ops: what landed in our buffer. */
static void check_incoming(struct pp *p)
{
	if (p->o.ops & OP_WRITE) {
		size_t at = mismatch(slot_ptr(p, SL_WDST), p->o.size, p->peer_seed, TAG_WRITE);

		p->mine.write_in = at == p->o.size ? V_OK : V_BAD;
		if (p->mine.write_in == V_BAD)
			fail(p, "the peer's RDMA WRITE: byte %zu is 0x%02x, 0x%02x expected", at,
			     slot_ptr(p, SL_WDST)[at], pattern(p->peer_seed, TAG_WRITE, at));
	}
	if ((p->o.ops & OP_ATOMIC) && p->dattr.orig_attr.atomic_cap != IBV_ATOMIC_NONE) {
		uint64_t want = counter_init(p->seed) + N_ATOMICS * (N_ATOMICS + 1) / 2;
		uint64_t got = load64(p->buf + COUNTER_OFF);

		p->mine.atomic_in = got == want ? V_OK : V_BAD;
		if (p->mine.atomic_in == V_BAD)
			fail(p,
			     "our counter is 0x%" PRIx64
			     " after the peer's fetch-and-adds, 0x%" PRIx64 " expected",
			     got, want);
	}
}

static int run(struct pp *p)
{
	p->stage = "setup";
	if (p->o.export && start_helper(p))
		return -1;
	if (open_device(p) || alloc_pd(p) || alloc_buffer(p) || register_buffer(p) ||
	    create_queues(p) || post_recv(p))
		return -1;
	p->stage = "connection";
	if (p->server ? tcp_server(p) : tcp_client(p))
		return -1;
	if (exchange_hello(p) || connect_qp(p) || barrier(p, PROTO "-GO"))
		return -1;
	p->stage = "ping-pong";
	if (p->server ? pingpong_server(p) : pingpong_client(p))
		return -1;
	p->pingpong_done = true;
	if (p->o.ops) {
		if (run_ops(p) || barrier(p, PROTO "-OPS"))
			return -1;
		check_incoming(p);
	}
	p->stage = "results";
	if (exchange_results(p))
		return -1;
	if (p->o.export && run_export(p))
		return -1;
	return 0;
}

static void teardown(struct pp *p)
{
	int r;

	if (p->qp && (r = ibv_destroy_qp(p->qp)))
		fail(p, "ibv_destroy_qp: %s", strerror(r));
	if (p->mr && (r = ibv_dereg_mr(p->mr)))
		fail(p, "ibv_dereg_mr: %s", strerror(r));
	if (p->dmah && (r = ibv_dealloc_dmah(p->dmah)))
		fail(p, "ibv_dealloc_dmah: %s", strerror(r));
	if (p->cq && (r = ibv_destroy_cq(ibv_cq_ex_to_cq(p->cq))))
		fail(p, "ibv_destroy_cq: %s", strerror(r));
	if (p->ibuf)
		ibv_free_buf(p->ibuf);
	if (p->pd && (r = ibv_dealloc_pd(p->pd)))
		fail(p, "ibv_dealloc_pd: %s", strerror(r));
	if (p->base_pd && (r = ibv_dealloc_pd(p->base_pd)))
		fail(p, "ibv_dealloc_pd(base): %s", strerror(r));
	if (p->ctx && (r = ibv_close_device(p->ctx)))
		fail(p, "ibv_close_device: %s", strerror(errno));
	if (p->sock >= 0)
		close(p->sock);
	stop_helper(p);
}

int main(int argc, char **argv)
{
	static struct pp pp;
	struct pp *p = &pp;
	char *body = NULL;
	size_t body_len = 0;
	FILE *out;
	int r;

	r = parse_args(&p->o, argc, argv);
	if (r)
		return r;
	p->server = !p->o.host;
	p->seed = p->server ? 'S' : 'C';
	p->peer_seed = p->server ? 'C' : 'S';
	p->sock = -1;
	p->helper_sock = -1;
	p->write_out = p->read_out = p->atomic_out = V_NONE;
	p->mine.write_in = p->mine.atomic_in = V_NONE;
	p->theirs.write_in = p->theirs.atomic_in = V_NONE;
	srand48((long)(getpid() ^ now_ns()));

	run(p);
	/* the report names objects that the teardown frees: keep it until then */
	out = open_memstream(&body, &body_len);
	if (out) {
		report(p, out);
		fclose(out);
	}
	p->stage = "teardown";
	teardown(p);
	if (body)
		fputs(body, stdout);
	free(body);
	verdict(p, stdout);
	return p->failures || !p->have_theirs || p->theirs.failures ? 1 : 0;
}

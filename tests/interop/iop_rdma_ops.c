/* SPDX-License-Identifier: MIT */
/*
 * iop_rdma_ops - memory windows, ATOMIC WRITE and FLUSH between two hosts,
 * for the interop matrix against the kernel's rxe (tests/interop/runs.sh)
 * and for softverbs against itself (tests/interop_ops_self.sh).
 *
 * A plain libibverbs program: built against include/ and linked against
 * libibverbs.so.1 by soname only, so that in the guest it runs on Debian's
 * libibverbs and rxe provider and on the host on softverbs. It uses only
 * what rdma-core 44 (Debian 12) exports.
 *
 *   server:  iop_rdma_ops -d DEV -g GIDX -p PORT -t TEST
 *   client:  iop_rdma_ops -d DEV -g GIDX -p PORT -t TEST SERVER_ADDRESS
 *
 * One RC QP each side over RoCE v2 (MTU 1024); the two sides exchange QP
 * number, PSN, GID, what their device supports and the server's keys over
 * TCP (like ibv_rc_pingpong), then step through TEST, each step checked
 * on the side that can see it, the sides kept in step over the same TCP
 * connection. The server owns the memory; the client is the requester.
 *
 *   mw2     the server binds a type 2 window (IBV_WR_BIND_MW, a new key
 *           from ibv_inc_rkey) over the middle of an MR; the client WRITEs
 *           and READs through it (data checked on both sides, nothing
 *           outside the window changed), then sends SEND with Invalidate
 *           of the window's rkey: the server's receive completes with
 *           IBV_WC_WITH_INV and that rkey; a WRITE with the invalidated
 *           rkey then fails at the client with IBV_WC_REM_ACCESS_ERR and
 *           the server's memory is unchanged.
 *   mw1     the same with a type 1 window (ibv_bind_mw), which the server
 *           then deallocates instead of the invalidation.
 *   awrite  the client's RDMA ATOMIC WRITE of 8 bytes lands (READ back and
 *           checked on the server).
 *   flush   an ATOMIC WRITE then an RDMA FLUSH (global visibility) of the
 *           range, through the ibv_wr_* API.
 *
 * Every check prints "iop_rdma_ops: ok - WHAT" or "not ok - WHAT"; the last
 * line is "iop_rdma_ops: all N checks passed" (exit 0), or "N of M checks
 * failed" (exit 1). The client's last lines also say how many error
 * completions it expected ("expected error completions: N": the WRITE
 * with the dead key). A device (either side's) that lacks what TEST needs
 * ends both sides with "iop_rdma_ops: SKIP: DEVICE lacks WHAT" and exit 77. Exit 2:
 * usage, setup or connection failure.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

enum {
	BUF_LEN = 8192,
	WIN_OFF = 2048, /* the window covers [WIN_OFF, WIN_OFF + WIN_LEN) of the server's MR */
	WIN_LEN = 4096,
	WR_LEN = 512, /* the client's WRITE through the window */
	AW_OFF = 64, /* the ATOMIC WRITE's target */
	EXIT_SKIP = 77,
	TIMEOUT_MS = 20000,
};

/* Capabilities a side announces (bits of the exchange's caps field). */
enum {
	CAP_MW1 = 1 << 0,
	CAP_MW2 = 1 << 1,
	CAP_AWRITE = 1 << 2,
	CAP_FLUSH = 1 << 3,
};

static const uint64_t AW_VALUE = 0x1122334455667788ULL;

struct peer {
	uint32_t qpn, psn, caps, rkey;
	uint64_t addr;
	union ibv_gid gid;
	char dev[65]; /* the device's name */
};

static struct {
	const char *dev, *test, *server;
	int gidx, port, sock;
	bool is_server;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx; /* flush: the ibv_wr_* API */
	struct ibv_mr *mr;
	uint8_t *buf;
	uint8_t shadow[BUF_LEN]; /* server: what buf must hold */
	struct peer me, them;
	int checks, failed, expected_errors;
} g;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Contract: print "iop_rdma_ops: " and the message, flushed (the runs read it live). */
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("iop_rdma_ops: ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
}

/* Contract: count one check; its line says ok or not ok. Returns `ok`. */
static bool check(bool ok, const char *what)
{
	g.checks++;
	if (!ok)
		g.failed++;
	say("%s - %s", ok ? "ok" : "not ok", what);
	return ok;
}

static void die(const char *what)
{
	say("error: %s%s%s", what, errno ? ": " : "", errno ? strerror(errno) : "");
	exit(2);
}

/* ---- the TCP side channel ---- */

static void tcp_connect(void)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *r;
	char port[16];
	int one = 1;

	snprintf(port, sizeof(port), "%d", g.port);
	if (g.is_server) {
		int ls = -1;

		hints.ai_flags = AI_PASSIVE;
		hints.ai_family = AF_INET6;
		if (getaddrinfo(NULL, port, &hints, &res))
			die("getaddrinfo");
		ls = socket(res->ai_family, SOCK_STREAM, 0);
		if (ls < 0)
			die("socket");
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(ls, res->ai_addr, res->ai_addrlen) || listen(ls, 1))
			die("bind/listen");
		freeaddrinfo(res);
		g.sock = accept(ls, NULL, NULL);
		close(ls);
		if (g.sock < 0)
			die("accept");
		return;
	}
	if (getaddrinfo(g.server, port, &hints, &res))
		die("getaddrinfo (server address)");
	for (int tries = 0; tries < 100; tries++) {
		for (r = res; r; r = r->ai_next) {
			g.sock = socket(r->ai_family, SOCK_STREAM, 0);
			if (g.sock >= 0 && connect(g.sock, r->ai_addr, r->ai_addrlen) == 0) {
				freeaddrinfo(res);
				return;
			}
			if (g.sock >= 0)
				close(g.sock);
		}
		usleep(100000);
	}
	die("connect");
}

/* Contract: send one text line (at most 255 bytes). */
static void tcp_send(const char *line)
{
	char b[256];
	size_t n = (size_t)snprintf(b, sizeof(b), "%s\n", line);

	if (n >= sizeof(b) || write(g.sock, b, n) != (ssize_t)n)
		die("send on the side channel");
}

/* Contract: receive one text line into b (without its newline); dies on EOF or timeout. */
static void tcp_recv(char *b, size_t len)
{
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd p = {.fd = g.sock, .events = POLLIN};

		if (poll(&p, 1, TIMEOUT_MS) != 1)
			die("the peer went quiet on the side channel");
		if (read(g.sock, b + n, 1) != 1)
			die("the peer closed the side channel");
		if (b[n] == '\n')
			break;
		n++;
	}
	b[n] = '\0';
}

/* Contract: wait for the peer's line `want` (the two sides keep in step). */
static void tcp_expect(const char *want)
{
	char b[256];

	tcp_recv(b, sizeof(b));
	if (strcmp(b, want) != 0) {
		errno = 0;
		say("error: the peer said \"%s\", expected \"%s\"", b, want);
		exit(2);
	}
}

/* ---- verbs ---- */

/* Contract: what the device offers, as CAP_* bits. */
static uint32_t probe_caps(void)
{
	struct ibv_device_attr_ex a;
	uint32_t caps = 0;

	memset(&a, 0, sizeof(a));
	if (ibv_query_device_ex(g.ctx, NULL, &a))
		die("ibv_query_device_ex");
	if (a.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW) {
		caps |= CAP_MW1;
		if (a.orig_attr.device_cap_flags &
		    (IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B))
			caps |= CAP_MW2;
	}
	if (a.device_cap_flags_ex & IBV_DEVICE_ATOMIC_WRITE)
		caps |= CAP_AWRITE;
	if ((a.device_cap_flags_ex & IBV_DEVICE_FLUSH_GLOBAL) && (caps & CAP_AWRITE))
		caps |= CAP_FLUSH;
	return caps;
}

/* Contract: the cap bit TEST needs, and how to name it in a SKIP line. */
static uint32_t need_of(const char **name)
{
	if (!strcmp(g.test, "mw2")) {
		*name = "type 2 memory windows (IBV_DEVICE_MEM_WINDOW_TYPE_2A/2B)";
		return CAP_MW2;
	}
	if (!strcmp(g.test, "mw1")) {
		*name = "memory windows (IBV_DEVICE_MEM_WINDOW)";
		return CAP_MW1;
	}
	if (!strcmp(g.test, "awrite")) {
		*name = "RDMA ATOMIC WRITE (IBV_DEVICE_ATOMIC_WRITE, device_cap_flags_ex bit 40)";
		return CAP_AWRITE;
	}
	if (!strcmp(g.test, "flush")) {
		*name = "RDMA FLUSH (IBV_DEVICE_FLUSH_GLOBAL, device_cap_flags_ex bit 38) with "
			"ATOMIC WRITE";
		return CAP_FLUSH;
	}
	errno = 0;
	die("unknown test (mw2, mw1, awrite, flush)");
	return 0;
}

static void open_device(void)
{
	struct ibv_device **list;
	int n;

	list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list");
	for (int i = 0; i < n && !g.ctx; i++)
		if (!g.dev || !strcmp(ibv_get_device_name(list[i]), g.dev))
			g.ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!g.ctx)
		die("no such device");
	g.pd = ibv_alloc_pd(g.ctx);
	g.cq = ibv_create_cq(g.ctx, 16, NULL, NULL, 0);
	if (!g.pd || !g.cq)
		die("PD/CQ");
	if (ibv_query_gid(g.ctx, 1, g.gidx, &g.me.gid))
		die("ibv_query_gid");
	snprintf(g.me.dev, sizeof(g.me.dev), "%s", ibv_get_device_name(g.ctx->device));
}

/* Contract: the RC QP (a QP with the ibv_wr_* FLUSH and ATOMIC WRITE ops for flush). */
static void create_qp(void)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = IBV_QPT_RC,
		.send_cq = g.cq,
		.recv_cq = g.cq,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = g.pd,
	};

	if (!strcmp(g.test, "flush") && !g.is_server) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH |
				   IBV_QP_EX_WITH_RDMA_READ;
	}
	g.qp = ibv_create_qp_ex(g.ctx, &a);
	if (!g.qp)
		die("ibv_create_qp_ex");
	if (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		g.qpx = ibv_qp_to_qp_ex(g.qp);
		if (!g.qpx)
			die("ibv_qp_to_qp_ex");
	}
}

/* Contract: RESET -> INIT -> RTR -> RTS towards g.them. */
static void connect_qp(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (!strcmp(g.test, "flush"))
		a.qp_access_flags |= IBV_ACCESS_FLUSH_GLOBAL;
	if (ibv_modify_qp(g.qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = g.them.qpn;
	a.rq_psn = g.them.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = g.them.gid;
	a.ah_attr.grh.sgid_index = (uint8_t)g.gidx;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(g.qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = g.me.psn;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(g.qp, &a,
			  IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* Contract: one completion (TIMEOUT_MS at most) into *wc; false on timeout. */
static bool poll_one(struct ibv_wc *wc)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(g.cq, 1, wc);

		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > TIMEOUT_MS)
			return false;
	}
}

/* Contract: the next completion is `wr_id` with `status` (and `opcode` on success). */
static bool expect_wc(uint64_t wr_id, enum ibv_wc_status status, enum ibv_wc_opcode opcode,
		      const char *what, struct ibv_wc *out)
{
	struct ibv_wc wc;
	char b[256];

	memset(&wc, 0, sizeof(wc));
	if (!poll_one(&wc)) {
		snprintf(b, sizeof(b), "%s: no completion within %d ms", what, TIMEOUT_MS);
		return check(false, b);
	}
	if (out)
		*out = wc;
	snprintf(b, sizeof(b), "%s: completion wr_id %llu status %s opcode %d", what,
		 (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), (int)wc.opcode);
	return check(wc.wr_id == wr_id && wc.status == status &&
			     (status != IBV_WC_SUCCESS || wc.opcode == opcode),
		     b);
}

/* Contract: post one signaled WR of `opcode` with one SGE of the local buffer. */
static void post(enum ibv_wr_opcode opcode, uint64_t wr_id, uint32_t off, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint32_t inv)
{
	struct ibv_sge sge = {(uintptr_t)g.buf + off, len, g.mr->lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = opcode;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (opcode == IBV_WR_SEND_WITH_INV)
		wr.invalidate_rkey = inv;
	if (ibv_post_send(g.qp, &wr, &bad))
		die("ibv_post_send");
}

static void post_recv(uint64_t wr_id, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)g.buf + off, len, g.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;

	if (ibv_post_recv(g.qp, &wr, &bad))
		die("ibv_post_recv");
}

static void fill(uint8_t *p, size_t len, uint8_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* ---- the exchange ---- */

static void exchange(void)
{
	char b[256], gid[40];
	struct peer *m = &g.me, *t = &g.them;
	unsigned int q, p, c, k;
	unsigned long long addr;

	for (int i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", m->gid.raw[i]);
	snprintf(b, sizeof(b), "qpn %u psn %u caps %u rkey %u addr %llu gid %s dev %.64s", m->qpn,
		 m->psn, m->caps, m->rkey, (unsigned long long)m->addr, gid, m->dev);
	tcp_send(b);
	tcp_recv(b, sizeof(b));
	if (sscanf(b, "qpn %u psn %u caps %u rkey %u addr %llu gid %32s dev %64s", &q, &p, &c, &k,
		   &addr, gid, t->dev) != 7 ||
	    strlen(gid) != 32) {
		errno = 0;
		die("the peer's exchange line");
	}
	t->qpn = q;
	t->psn = p;
	t->caps = c;
	t->rkey = k;
	t->addr = addr;
	for (int i = 0; i < 16; i++) {
		unsigned int v;

		sscanf(gid + 2 * i, "%2x", &v);
		t->gid.raw[i] = (uint8_t)v;
	}
}

/* ---- the tests: server side ---- */

/* Contract: the server's memory is what the shadow says (a check named `what`). */
static void check_server_memory(const char *what)
{
	check(memcmp(g.buf, g.shadow, BUF_LEN) == 0, what);
}

/* Contract: a type 2 window over the window range bound on the QP; its rkey. */
static uint32_t bind_type2(struct ibv_mw *mw)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = g.mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)g.buf + WIN_OFF;
	wr.bind_mw.bind_info.length = WIN_LEN;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_post_send(g.qp, &wr, &bad))
		die("ibv_post_send (BIND_MW)");
	expect_wc(1, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "server: type 2 bind", NULL);
	return wr.bind_mw.rkey;
}

/* Contract: a type 1 window over the window range (ibv_bind_mw); its rkey. */
static uint32_t bind_type1(struct ibv_mw *mw)
{
	struct ibv_mw_bind b;

	memset(&b, 0, sizeof(b));
	b.wr_id = 1;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = g.mr;
	b.bind_info.addr = (uintptr_t)g.buf + WIN_OFF;
	b.bind_info.length = WIN_LEN;
	b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_bind_mw(g.qp, mw, &b))
		die("ibv_bind_mw");
	expect_wc(1, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "server: type 1 bind (ibv_bind_mw)", NULL);
	return mw->rkey;
}

/*
 * Contract: the receive of a SEND with Invalidate says so: invalidated_rkey
 * is the window's and wc_flags has IBV_WC_WITH_INV. rxe (kernel 6.1 with
 * rdma-core 44) writes the kernel's IB_WC_WITH_INVALIDATE, 1 << 2, which
 * libibverbs reads as IBV_WC_IP_CSUM_OK; on an rxe device that bit is
 * taken instead, and the line says so (docs/compatibility.md).
 */
static void check_with_inv(const struct ibv_wc *wc, uint32_t rkey)
{
	bool rxe = !strncmp(g.me.dev, "rxe", 3);
	bool flag = wc->wc_flags & IBV_WC_WITH_INV;
	char b[256];

	if (!flag && rxe && (wc->wc_flags & (1u << 2)))
		flag = true;
	snprintf(b, sizeof(b), "server: invalidated_rkey %#x (window %#x), wc_flags %#x%s",
		 wc->invalidated_rkey, rkey, (unsigned int)wc->wc_flags,
		 flag && !(wc->wc_flags & IBV_WC_WITH_INV) ?
			 " (rxe: the kernel's IB_WC_WITH_INVALIDATE bit, not IBV_WC_WITH_INV)" :
			 "");
	check(flag && wc->invalidated_rkey == rkey, b);
}

static void server_mw(int type)
{
	struct ibv_mw *mw = ibv_alloc_mw(g.pd, type == 2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
	struct ibv_wc wc;
	char line[64];
	uint32_t rkey;

	if (!mw)
		die("ibv_alloc_mw");
	fill(g.buf, BUF_LEN, 0x30);
	memcpy(g.shadow, g.buf, BUF_LEN);
	rkey = type == 2 ? bind_type2(mw) : bind_type1(mw);
	if (type == 2)
		post_recv(2, 0, 64);
	snprintf(line, sizeof(line), "window %u %llu", rkey,
		 (unsigned long long)(uintptr_t)(g.buf + WIN_OFF));
	tcp_send(line);
	tcp_expect("written");
	/* the client wrote WR_LEN bytes of fill(.., 0x90) at the window's start */
	fill(g.shadow + WIN_OFF, WR_LEN, 0x90);
	check_server_memory("server: the WRITE through the window landed, nothing else changed");
	tcp_send("checked");
	if (type == 2) {
		tcp_expect("invalidating");
		if (expect_wc(2, IBV_WC_SUCCESS, IBV_WC_RECV,
			      "server: SEND with Invalidate received", &wc))
			check_with_inv(&wc, rkey);
		memcpy(g.shadow, g.buf, 64); /* the SEND's bytes landed in the receive buffer */
	} else {
		check(ibv_dealloc_mw(mw) == 0, "server: the type 1 window deallocated");
		mw = NULL;
	}
	tcp_send("dead");
	tcp_expect("done");
	check_server_memory("server: the WRITE with the dead rkey changed nothing");
	if (mw)
		ibv_dealloc_mw(mw);
}

static void server_awrite(void)
{
	memset(g.buf, 0x5a, BUF_LEN);
	memcpy(g.shadow, g.buf, BUF_LEN);
	tcp_send("ready");
	tcp_expect("written");
	memcpy(g.shadow + AW_OFF, &AW_VALUE, sizeof(AW_VALUE));
	check_server_memory("server: the ATOMIC WRITE's 8 bytes landed, nothing else changed");
	tcp_send("checked");
	tcp_expect("done");
}

/* ---- the tests: client side ---- */

static void client_mw(int type)
{
	char b[256];
	unsigned int rkey;
	unsigned long long va;
	uint8_t want[WR_LEN];

	tcp_recv(b, sizeof(b));
	if (sscanf(b, "window %u %llu", &rkey, &va) != 2)
		die("the server's window line");
	fill(g.buf, WR_LEN, 0x90);
	post(IBV_WR_RDMA_WRITE, 10, 0, WR_LEN, va, rkey, 0);
	expect_wc(10, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, "client: RDMA WRITE through the window",
		  NULL);
	memset(g.buf + 4096, 0, WIN_LEN);
	post(IBV_WR_RDMA_READ, 11, 4096, WIN_LEN, va, rkey, 0);
	if (expect_wc(11, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "client: RDMA READ of the whole window",
		      NULL)) {
		fill(want, WR_LEN, 0x90);
		check(memcmp(g.buf + 4096, want, WR_LEN) == 0,
		      "client: READ gives back the bytes written");
		/* the server's fill(buf, .., 0x30): byte i of the window is byte WIN_OFF + i */
		{
			uint8_t all[BUF_LEN];

			fill(all, BUF_LEN, 0x30);
			check(memcmp(g.buf + 4096 + WR_LEN, all + WIN_OFF + WR_LEN,
				     WIN_LEN - WR_LEN) == 0,
			      "client: READ gives the server's bytes past the written ones");
		}
	}
	tcp_send("written");
	tcp_expect("checked");
	if (type == 2) {
		tcp_send("invalidating");
		memset(g.buf, 0x77, 64);
		post(IBV_WR_SEND_WITH_INV, 12, 0, 64, 0, 0, rkey);
		expect_wc(12, IBV_WC_SUCCESS, IBV_WC_SEND, "client: SEND with Invalidate", NULL);
	}
	tcp_expect("dead");
	post(IBV_WR_RDMA_WRITE, 13, 0, 64, va, rkey, 0);
	g.expected_errors = 1;
	expect_wc(13, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE,
		  type == 2 ?
			  "client: WRITE with the invalidated rkey: remote access error" :
			  "client: WRITE with the deallocated window's rkey: remote access error",
		  NULL);
	tcp_send("done");
}

static void client_awrite(bool flush)
{
	uint64_t v = AW_VALUE, got[2];

	tcp_expect("ready");
	if (!flush) {
		memcpy(g.buf, &v, sizeof(v));
		post(IBV_WR_ATOMIC_WRITE, 20, 0, sizeof(v), g.them.addr + AW_OFF, g.them.rkey, 0);
	} else {
		ibv_wr_start(g.qpx);
		g.qpx->wr_id = 20;
		g.qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_write(g.qpx, g.them.rkey, g.them.addr + AW_OFF, &v);
		g.qpx->wr_id = 21;
		g.qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_flush(g.qpx, g.them.rkey, g.them.addr, BUF_LEN, IBV_FLUSH_GLOBAL,
			     IBV_FLUSH_RANGE);
		if (ibv_wr_complete(g.qpx))
			die("ibv_wr_complete");
	}
	expect_wc(20, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE, "client: RDMA ATOMIC WRITE of 8 bytes",
		  NULL);
	if (flush)
		expect_wc(21, IBV_WC_SUCCESS, IBV_WC_FLUSH, "client: RDMA FLUSH (global, range)",
			  NULL);
	memset(g.buf + 64, 0, 16);
	post(IBV_WR_RDMA_READ, 22, 64, 16, g.them.addr + AW_OFF, g.them.rkey, 0);
	if (expect_wc(22, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, "client: READ back", NULL)) {
		memcpy(got, g.buf + 64, sizeof(got));
		check(got[0] == AW_VALUE && got[1] == 0x5a5a5a5a5a5a5a5aULL,
		      "client: READ gives the value written and the bytes after it unchanged");
	}
	tcp_send("written");
	tcp_expect("checked");
	tcp_send("done");
}

static void usage(void)
{
	fprintf(stderr, "usage: iop_rdma_ops -d DEV -g GIDX -p PORT -t mw2|mw1|awrite|flush "
			"[-s SIZE] [-n ITERS] [SERVER]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *need_name;
	uint32_t need;
	int access, opt;

	g.port = 18515;
	while ((opt = getopt(argc, argv, "d:g:p:t:s:n:")) != -1) {
		switch (opt) {
		case 'd':
			g.dev = optarg;
			break;
		case 'g':
			g.gidx = atoi(optarg);
			break;
		case 'p':
			g.port = atoi(optarg);
			break;
		case 't':
			g.test = optarg;
			break;
		case 's':
		case 'n':
			break; /* accepted for the matrix's common arguments; the sizes are fixed */
		default:
			usage();
		}
	}
	if (!g.test || optind + 1 < argc)
		usage();
	g.server = optind < argc ? argv[optind] : NULL;
	g.is_server = !g.server;
	need = need_of(&need_name);

	open_device();
	g.me.caps = probe_caps();
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		 IBV_ACCESS_REMOTE_ATOMIC;
	if (need & (CAP_MW1 | CAP_MW2))
		access |= IBV_ACCESS_MW_BIND;
	if ((need & CAP_FLUSH) && (g.me.caps & CAP_FLUSH))
		access |= IBV_ACCESS_FLUSH_GLOBAL;
	g.buf = aligned_alloc(4096, BUF_LEN);
	if (!g.buf)
		die("buffer");
	memset(g.buf, 0, BUF_LEN);
	g.mr = ibv_reg_mr(g.pd, g.buf, BUF_LEN, access);
	if (!g.mr)
		die("ibv_reg_mr");
	if ((g.me.caps & need) == need)
		create_qp();
	g.me.qpn = g.qp ? g.qp->qp_num : 0;
	srand48(getpid() * (long)time(NULL));
	g.me.psn = (uint32_t)lrand48() & 0xffffff;
	g.me.rkey = g.mr->rkey;
	g.me.addr = (uintptr_t)g.buf;

	tcp_connect();
	exchange();
	if ((g.me.caps & need) != need || (g.them.caps & need) != need) {
		say("SKIP: %s lacks %s", (g.me.caps & need) != need ? g.me.dev : g.them.dev,
		    need_name);
		say("device caps: this side %#x, the peer %#x", g.me.caps, g.them.caps);
		return EXIT_SKIP;
	}
	connect_qp();
	tcp_send("rts");
	tcp_expect("rts");
	say("%s of %s on %s, QP %#x, peer QP %#x", g.is_server ? "server" : "client", g.test,
	    ibv_get_device_name(g.ctx->device), g.me.qpn, g.them.qpn);

	if (!strcmp(g.test, "mw2") || !strcmp(g.test, "mw1")) {
		if (g.is_server)
			server_mw(g.test[2] - '0');
		else
			client_mw(g.test[2] - '0');
	} else if (g.is_server) {
		server_awrite();
	} else {
		client_awrite(!strcmp(g.test, "flush"));
	}
	if (!g.is_server)
		say("expected error completions: %d", g.expected_errors);
	if (g.failed) {
		say("%d of %d checks failed", g.failed, g.checks);
		return 1;
	}
	say("all %d checks passed", g.checks);
	ibv_destroy_qp(g.qp);
	ibv_dereg_mr(g.mr);
	ibv_destroy_cq(g.cq);
	ibv_dealloc_pd(g.pd);
	ibv_close_device(g.ctx);
	free(g.buf);
	return 0;
}

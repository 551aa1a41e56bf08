/* SPDX-License-Identifier: MIT */
/*
 * api_wire_sequence: a known sequence of RoCE v2 traffic between two
 * processes, one operation at a time, every byte checked:
 *
 *   client -> server RC: SEND 3000, RDMA WRITE 5000 (RETH), RDMA READ 2500,
 *   FETCH_AND_ADD, CMP_AND_SWP; server -> client RC: SEND 100;
 *   client -> server UD: SEND 500 (DETH).
 *
 * The RC path MTU is 1024, so SEND, WRITE and READ span several packets.
 *
 * Without arguments (ctest) it forks: the child is the server, joined by
 * a socketpair. tests/wire_capture.sh and tests/netns_two_hosts.sh run the
 * roles separately, joined by a Unix socket at PATH:
 *   api_wire_sequence --server PATH
 *   api_wire_sequence --client PATH [--manifest FILE]
 * The client's manifest lists every request packet the sequence must put
 * on the wire (opcode, destination QPN, PSN, RETH / AtomicETH / DETH
 * fields) and the responses it expects, for wire_capture.py.
 */
#include "harness.h"
#include "traffic.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#define BUF 65536
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)
#define C_PSN 0x100u
#define S_PSN 0x200u
#define UD_PSN 0x300u
#define QKEY 0x11111111u
#define MTU_BYTES 1024u

struct peer {
	uint32_t rc_qpn, ud_qpn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct side {
	struct t_ep rc, ud;
	struct ibv_ah *ah;
	struct peer me, other;
};

static int setup(struct side *s, int sock, bool server)
{
	struct ibv_context *ctx = t_open_dev();

	if (!CHECK(ctx) || t_ep_init(&s->rc, ctx, IBV_QPT_RC, BUF, ACC, 16) ||
	    t_ep_init(&s->ud, ctx, IBV_QPT_UD, BUF, IBV_ACCESS_LOCAL_WRITE, 16))
		return -1;
	memset(&s->me, 0, sizeof(s->me));
	s->me.rc_qpn = s->rc.qp->qp_num;
	s->me.ud_qpn = s->ud.qp->qp_num;
	s->me.rkey = s->rc.mr->rkey;
	s->me.addr = (uintptr_t)s->rc.buf;
	s->me.gid = s->rc.gid;
	if (server)
		t_fill(s->rc.buf + 32768, 4096, 9); /* what the client READs */
	if (!CHECK(t_xfer(sock, &s->me, sizeof(s->me), true) == 0) ||
	    !CHECK(t_xfer(sock, &s->other, sizeof(s->other), false) == 0))
		return -1;
	if (t_qp_rts(s->rc.qp, s->other.rc_qpn, &s->other.gid, server ? C_PSN : S_PSN,
		     server ? S_PSN : C_PSN, IBV_MTU_1024) ||
	    t_qp_rts(s->ud.qp, 0, NULL, 0, UD_PSN, IBV_MTU_1024))
		return -1;
	{
		struct ibv_ah_attr aa = t_ah_attr(&s->other.gid);

		s->ah = ibv_create_ah(s->ud.pd, &aa);
	}
	return CHECK(s->ah) ? 0 : -1;
}

static void teardown(struct side *s)
{
	struct ibv_context *ctx = s->rc.ctx;

	if (s->ah)
		CHECK_RET(ibv_destroy_ah(s->ah), 0);
	t_ep_destroy(&s->ud, false);
	t_ep_destroy(&s->rc, false);
	if (ctx)
		ibv_close_device(ctx);
}

static int wait_ok(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;

	if (!CHECK_MSG(t_poll(cq, &wc, 1, 5000) == 1, "%s: no completion", what))
		return -1;
	return CHECK_MSG(wc.status == IBV_WC_SUCCESS, "%s: %s", what,
			 ibv_wc_status_str(wc.status)) ?
		       0 :
		       -1;
}

static int sync_byte(int sock, char c)
{
	char got = 0;

	if (t_xfer(sock, &c, 1, true) || t_xfer(sock, &got, 1, false))
		return -1;
	return got == c ? 0 : -1;
}

static int server(int sock)
{
	struct side s;
	int ret = 1;

	memset(&s, 0, sizeof(s));
	if (setup(&s, sock, true))
		goto out;
	/* receives for the client's SEND and UD SEND */
	if (t_post_recv(&s.rc, 1, 0, 4096) || t_post_recv(&s.ud, 2, 0, 1024))
		goto out;
	if (sync_byte(sock, 'a')) /* ready */
		goto out;
	if (wait_ok(s.rc.cq, "server: recv"))
		goto out;
	{
		uint8_t want[3000];

		t_fill(want, 3000, 1);
		CHECK_MSG(!memcmp(s.rc.buf, want, 3000), "server: SEND data differs");
	}
	if (sync_byte(sock, 'b')) /* the client's WRITE, READ and atomics are done */
		goto out;
	{
		uint8_t want[5000];
		uint64_t w;

		t_fill(want, 5000, 2);
		CHECK_MSG(!memcmp(s.rc.buf + 8192, want, 5000), "server: WRITE data differs");
		memcpy(&w, s.rc.buf + 49152, 8);
		CHECK_MSG(w == 77, "server: atomic word %llu, want 77", (unsigned long long)w);
	}
	/* SEND back */
	memcpy(s.rc.buf + 16384, "server says hello to the client", 32);
	if (t_post(&s.rc, IBV_WR_SEND, 3, 16384, 100, 0, 0, IBV_SEND_SIGNALED) ||
	    wait_ok(s.rc.cq, "server: send"))
		goto out;
	{
		static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
		bool v4 = !memcmp(s.other.gid.raw, mapped, 12);
		struct ibv_wc wc;
		uint8_t want[500];

		if (!CHECK_MSG(t_poll(s.ud.cq, &wc, 1, 5000) == 1 && wc.status == IBV_WC_SUCCESS,
			       "server: UD recv") ||
		    sync_byte(sock, 'c'))
			goto out;
		t_fill(want, 500, 4);
		CHECK_MSG(!memcmp(s.ud.buf + 40, want, 500), "server: UD data differs");
		/* the GRH area and wc.sl as RoCE hardware fills them: IPv4 or IPv6 header */
		CHECK_MSG((wc.wc_flags & IBV_WC_GRH) && wc.sl == (v4 ? 0xa : 0x9),
			  "server: UD wc_flags %#x sl %#x", wc.wc_flags, wc.sl);
		if (v4)
			CHECK_MSG(s.ud.buf[20] == 0x45 &&
					  !memcmp(s.ud.buf + 32, &s.other.gid.raw[12], 4),
				  "server: GRH area has no IPv4 header from the client");
		else
			CHECK_MSG((s.ud.buf[0] >> 4) == 6 && s.ud.buf[6] == 17 &&
					  !memcmp(s.ud.buf + 8, s.other.gid.raw, 16),
				  "server: GRH area has no IPv6 header from the client");
	}
	ret = sync_byte(sock, 'd') ? 1 : 0;
out:
	teardown(&s);
	return ret || t_st()->failed;
}

/* The text of a GID's address: dotted IPv4 when IPv4-mapped, else IPv6. */
static const char *gid_text(const union ibv_gid *g, char buf[INET6_ADDRSTRLEN])
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

	if (!memcmp(g->raw, mapped, 12))
		return inet_ntop(AF_INET, &g->raw[12], buf, INET6_ADDRSTRLEN);
	return inet_ntop(AF_INET6, g->raw, buf, INET6_ADDRSTRLEN);
}

static int client(int sock, const char *manifest)
{
	char a1[INET6_ADDRSTRLEN], a2[INET6_ADDRSTRLEN];
	struct side s;
	FILE *m = NULL;
	int ret = 1;

	memset(&s, 0, sizeof(s));
	if (setup(&s, sock, false) || t_post_recv(&s.rc, 10, 40000, 1024) || sync_byte(sock, 'a'))
		goto out;
	if (manifest) {
		m = fopen(manifest, "w");
		if (!CHECK(m))
			goto out;
		/* addresses: client and server (dotted IPv4 for IPv4-mapped GIDs) */
		fprintf(m, "hosts %s %s\n", gid_text(&s.me.gid, a1), gid_text(&s.other.gid, a2));
		fprintf(m, "qpns %u %u\n", s.me.rc_qpn, s.other.rc_qpn);
	}
	/* 1: SEND 3000 = FIRST, MIDDLE, LAST */
	t_fill(s.rc.buf, 3000, 1);
	if (t_post(&s.rc, IBV_WR_SEND, 1, 0, 3000, 0, 0, IBV_SEND_SIGNALED) ||
	    wait_ok(s.rc.cq, "client: send"))
		goto out;
	/* 2: WRITE 5000 = FIRST (RETH), 3 MIDDLE, LAST */
	t_fill(s.rc.buf + 8192, 5000, 2);
	if (t_post(&s.rc, IBV_WR_RDMA_WRITE, 2, 8192, 5000, s.other.addr + 8192, s.other.rkey,
		   IBV_SEND_SIGNALED) ||
	    wait_ok(s.rc.cq, "client: write"))
		goto out;
	/* 3: READ 2500 = one request, three responses */
	if (t_post(&s.rc, IBV_WR_RDMA_READ, 3, 20000, 2500, s.other.addr + 32768, s.other.rkey,
		   IBV_SEND_SIGNALED) ||
	    wait_ok(s.rc.cq, "client: read"))
		goto out;
	{
		uint8_t want[2500];

		t_fill(want, 2500, 9);
		CHECK_MSG(!memcmp(s.rc.buf + 20000, want, 2500), "client: READ data differs");
	}
	/* 4, 5: FETCH_AND_ADD 70 to 0, CMP_AND_SWP 70 -> 77 */
	for (int k = 0; k < 2; k++) {
		struct ibv_sge sge = {(uintptr_t)s.rc.buf + 30000 + 8 * k, 8, s.rc.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 4u + (unsigned)k,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;
		uint64_t got;

		wr.opcode = k ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = s.other.addr + 49152;
		wr.wr.atomic.rkey = s.other.rkey;
		wr.wr.atomic.compare_add = 70;
		wr.wr.atomic.swap = 77;
		if (!CHECK_RET(ibv_post_send(s.rc.qp, &wr, &bad), 0) || wait_ok(s.rc.cq, "atomic"))
			goto out;
		memcpy(&got, s.rc.buf + 30000 + 8 * k, 8);
		CHECK_EQ_INT(got, k ? 70 : 0);
	}
	if (m) {
		uint64_t va = s.other.addr;
		uint32_t q = s.other.rc_qpn, cq = s.me.rc_qpn, p = C_PSN, rk = s.other.rkey;

		/* req OPCODE DQPN PSN VA RKEY DMALEN ; resp OPCODE DQPN PSN */
		fprintf(m, "req 0x00 %u %u 0 0 0\nreq 0x01 %u %u 0 0 0\nreq 0x02 %u %u 0 0 0\n", q,
			p, q, p + 1, q, p + 2);
		fprintf(m, "req 0x06 %u %u %llu %u 5000\n", q, p + 3,
			(unsigned long long)(va + 8192), rk);
		for (uint32_t i = 4; i < 7; i++)
			fprintf(m, "req 0x07 %u %u 0 0 0\n", q, p + i);
		fprintf(m, "req 0x08 %u %u 0 0 0\n", q, p + 7);
		fprintf(m, "req 0x0c %u %u %llu %u 2500\n", q, p + 8,
			(unsigned long long)(va + 32768), rk);
		fprintf(m, "resp 0x0d %u %u\nresp 0x0e %u %u\nresp 0x0f %u %u\n", cq, p + 8, cq,
			p + 9, cq, p + 10);
		fprintf(m, "req 0x14 %u %u %llu %u 0\nresp 0x12 %u %u\n", q, p + 11,
			(unsigned long long)(va + 49152), rk, cq, p + 11);
		fprintf(m, "req 0x13 %u %u %llu %u 0\nresp 0x12 %u %u\n", q, p + 12,
			(unsigned long long)(va + 49152), rk, cq, p + 12);
		fprintf(m, "req 0x04 %u %u 0 0 0\n", cq, S_PSN);
		fprintf(m, "ud 0x64 %u %u %u %u\n", s.other.ud_qpn, UD_PSN, QKEY, s.me.ud_qpn);
		fprintf(m, "acks %u %u %u %u\n", q, S_PSN, cq, C_PSN);
	}
	if (sync_byte(sock, 'b') || wait_ok(s.rc.cq, "client: recv"))
		goto out;
	CHECK_MSG(!memcmp(s.rc.buf + 40000, "server says hello", 17), "client: SEND data differs");
	/* 7: UD SEND 500 */
	{
		struct ibv_sge sge = {(uintptr_t)s.ud.buf, 500, s.ud.mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 7,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED},
				   *bad;

		wr.wr.ud.ah = s.ah;
		wr.wr.ud.remote_qpn = s.other.ud_qpn;
		wr.wr.ud.remote_qkey = QKEY;
		t_fill(s.ud.buf, 500, 4);
		if (!CHECK_RET(ibv_post_send(s.ud.qp, &wr, &bad), 0) ||
		    wait_ok(s.ud.cq, "client: UD send"))
			goto out;
	}
	if (sync_byte(sock, 'c') || sync_byte(sock, 'd'))
		goto out;
	ret = 0;
out:
	if (m)
		fclose(m);
	teardown(&s);
	return ret || t_st()->failed;
}

static int unix_sock(const char *path, bool listen_side)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0)
		return -1;
	if (listen_side) {
		unlink(path);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1))
			return -1;
		c = accept(fd, NULL, NULL);
		close(fd);
		return c;
	}
	for (int i = 0; i < 100; i++) { /* the server may not listen yet */
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		usleep(50000);
	}
	close(fd);
	return -1;
}

int main(int argc, char **argv)
{
	int sv[2], st, ret;
	pid_t pid;

	if (argc >= 3) {
		bool srv = !strcmp(argv[1], "--server");
		const char *man = argc >= 5 && !strcmp(argv[3], "--manifest") ? argv[4] : NULL;
		int fd;

		t_start(srv ? "api_wire_sequence server" : "api_wire_sequence client");
		fd = unix_sock(argv[2], srv);
		if (!CHECK(fd >= 0))
			return t_finish();
		ret = srv ? server(fd) : client(fd, man);
		close(fd);
		if (srv)
			unlink(argv[2]);
		CHECK_EQ_INT(ret, 0);
		return t_finish();
	}
	t_start("api_wire_sequence");
	if (!CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0))
		return t_finish();
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		_exit(server(sv[1]));
	}
	close(sv[1]);
	CHECK_EQ_INT(client(sv[0], NULL), 0);
	close(sv[0]);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/*
 * udp.c - the loopback baselines softverbs depends on, measured in the
 * same run: one stream of 4 KiB datagrams (a sender blasting with
 * send(2), a receiver counting bytes with recvmmsg(2), both with 8 MiB
 * socket buffers like the device's), and an 8-byte ping-pong with both
 * sides spinning on a non-blocking recv(2) (one-way = half a round trip):
 * unpinned, pinned to CPUs 0 and 1, yielding between looks like the
 * verbs ping-pong, and handed over by a receive thread (see handoff_main).
 */
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

enum {
	LAT_WARMUP = 1000,
	LAT_MAX_ITERS = 100000
};

enum {
	UDP_BW_SIZE = 4096,
	UDP_BATCH = 32
};

/* A UDP socket on 127.0.0.1 with 8 MiB buffers; its port in *port. */
static int udp_socket_lo(uint16_t *port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), bytes = 8 << 20;

	if (fd < 0)
		die("socket: %s", strerror(errno));
	/* the same buffer sizes the software device asks for */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    getsockname(fd, (struct sockaddr *)&sin, &sl))
		die("bind: %s", strerror(errno));
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Swap ports over the socketpair and connect the UDP socket to the peer's. */
static int udp_pair(int sock)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	uint16_t mine, peer;
	int fd = udp_socket_lo(&mine);

	if (xfer(sock, &mine, sizeof(mine), true) || xfer(sock, &peer, sizeof(peer), false))
		die("port exchange failed");
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(peer);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		die("connect: %s", strerror(errno));
	return fd;
}

/* The sender blasts 4 KiB datagrams until told to stop. */
void udp_bw_client(const struct role_args *ra)
{
	static uint8_t buf[UDP_BW_SIZE];
	int fd = udp_pair(ra->sock);
	char c;

	memset(buf, 0xa5, sizeof(buf));
	for (uint32_t i = 0;; i++) {
		if (send(fd, buf, sizeof(buf), 0) < 0 && errno != ENOBUFS && errno != EAGAIN &&
		    errno != ECONNREFUSED)
			die("send: %s", strerror(errno));
		if (i % 64 == 0 && ctl_ready(ra->sock))
			break;
	}
	xfer(ra->sock, &c, 1, false);
	close(fd);
}

/* The receiver counts bytes for `secs` after a warm-up, then stops the sender. */
void udp_bw_server(const struct role_args *ra)
{
	static uint8_t bufs[UDP_BATCH][UDP_BW_SIZE];
	struct mmsghdr msg[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	int fd = udp_pair(ra->sock);
	uint64_t bytes = 0, pkts = 0, all = 0, t, t_start = 0, t_end = 0;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
	bool measuring = false;
	char c = 'd';

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(msg, 0, sizeof(msg));
	for (int i = 0; i < UDP_BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = UDP_BW_SIZE;
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		int n = recvmmsg(fd, msg, UDP_BATCH, MSG_WAITFORONE, NULL);

		t = now_ns();
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			die("recvmmsg: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			all += msg[i].msg_len;
		if (!t_start && n > 0) /* first datagram: warm up from here */
			t_start = t + (uint64_t)(ra->secs * 2e8);
		if (!measuring && t_start && t >= t_start) {
			measuring = true;
			t_start = t;
			t_end = t + (uint64_t)(ra->secs * 1e9);
			continue; /* count from the next batch on */
		}
		if (measuring) {
			for (int i = 0; i < n; i++)
				bytes += msg[i].msg_len;
			pkts += n > 0 ? (uint64_t)n : 0;
			if (t >= t_end && pkts)
				break;
		}
	}
	report(ra->out, "bw msgs=%" PRIu64 " bytes=%" PRIu64 " ns=%" PRIu64 " total=%" PRIu64 "\n",
	       pkts, bytes, t - t_start, all);
	xfer(ra->sock, &c, 1, true);
	close(fd);
}

/*
 * The hand-off variant (SV_BENCH_UDP_HANDOFF, mmode.udp_handoff): a
 * receive thread spins on the socket (yielding when it is empty) and
 * publishes each datagram through memory to the application thread,
 * which polls that memory and yields between looks. That is the shape
 * of a device whose progress thread places data for an application
 * that makes no calls, without any of the RoCE work: the floor of such
 * a design on this machine.
 */
static struct {
	pthread_t thread;
	int fd;
	atomic_bool stop;
	atomic_uint seq; /* datagrams received */
	uint8_t data[64]; /* the latest one, written before seq moves */
} ho;

static void *handoff_main(void *arg)
{
	uint8_t buf[64];

	(void)arg;
	while (!atomic_load(&ho.stop)) {
		if (recv(ho.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
			memcpy(ho.data, buf, sizeof(buf));
			atomic_fetch_add(&ho.seq, 1);
		} else {
			sched_yield();
		}
	}
	return NULL;
}

/* Start the receive thread on `fd` if the variant is on; true if started. */
static bool handoff_start(int fd)
{
	if (!getenv("SV_BENCH_UDP_HANDOFF"))
		return false;
	ho.fd = fd;
	if (pthread_create(&ho.thread, NULL, handoff_main, NULL))
		die("pthread_create failed");
	return true;
}

static void handoff_stop(bool started)
{
	if (!started)
		return;
	atomic_store(&ho.stop, true);
	pthread_join(ho.thread, NULL);
}

/*
 * Busy ping-pong: spin on a non-blocking recv; false if told to stop.
 * With SV_BENCH_UDP_YIELD (mmode.udp_yield) it yields between looks as
 * the verbs ping-pong does; without, it is the pure spin the latency
 * target is measured against. With the hand-off thread running it
 * watches the thread's counter instead (`seen`: datagrams taken so far).
 */
static bool udp_spin_recv(int fd, uint8_t *buf, int ctl, bool handoff, unsigned int *seen)
{
	static int yield = -1;
	uint32_t spins = 0;

	if (yield < 0)
		yield = getenv("SV_BENCH_UDP_YIELD") != NULL;
	if (handoff) {
		while (atomic_load(&ho.seq) == *seen) {
			sched_yield();
			if (ctl >= 0 && ++spins % 8192 == 0 && ctl_ready(ctl))
				return false;
		}
		(*seen)++;
		memcpy(buf, ho.data, 8);
		return true;
	}
	while (recv(fd, buf, 64, MSG_DONTWAIT) < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			die("recv: %s", strerror(errno));
		if (yield)
			sched_yield();
		if (ctl >= 0 && ++spins % 8192 == 0 && ctl_ready(ctl))
			return false;
	}
	return true;
}

/* Ping-pong rounds for ra->secs after the warm-up; reports median and p99. */
void udp_lat_client(const struct role_args *ra)
{
	uint64_t *rtt = malloc(LAT_MAX_ITERS * sizeof(*rtt));
	int fd = udp_pair(ra->sock);
	uint8_t buf[64] = {0};
	uint64_t end = 0, t0, t_start;
	bool handoff = handoff_start(fd);
	unsigned int seen = 0;
	size_t n = 0;
	double med, p99;
	char c;

	if (!rtt || xfer(ra->sock, &c, 1, false))
		die("setup failed");
	t_start = now_ns();
	for (uint32_t k = 0;; k++) {
		t0 = now_ns();
		if (send(fd, buf, 8, 0) != 8)
			die("send: %s", strerror(errno));
		udp_spin_recv(fd, buf, -1, handoff, &seen);
		if (!end) {
			if (!warm_up_done(k, LAT_WARMUP, t_start, ra->secs))
				continue;
			end = now_ns() + (uint64_t)(ra->secs * 1e9);
			continue;
		}
		rtt[n++] = now_ns() - t0;
		if (n == LAT_MAX_ITERS || now_ns() >= end)
			break;
	}
	rtt_stats(rtt, n, &med, &p99);
	report(ra->out, "lat n=%zu med_us=%.3f p99_us=%.3f\n", n, med, p99);
	c = 'd';
	xfer(ra->sock, &c, 1, true);
	xfer(ra->sock, &c, 1, false);
	handoff_stop(handoff);
	free(rtt);
	close(fd);
}

/* Echo every datagram until the client says stop. */
void udp_lat_server(const struct role_args *ra)
{
	int fd = udp_pair(ra->sock);
	bool handoff = handoff_start(fd);
	unsigned int seen = 0;
	uint8_t buf[64];
	char c = 'r';

	xfer(ra->sock, &c, 1, true);
	while (udp_spin_recv(fd, buf, ra->sock, handoff, &seen))
		if (send(fd, buf, 8, 0) != 8)
			die("send: %s", strerror(errno));
	xfer(ra->sock, &c, 1, false);
	xfer(ra->sock, &c, 1, true);
	handoff_stop(handoff);
	close(fd);
}

/* ---- orchestrator side ---- */

double plan_udp(void)
{
	return 5 * (opt.secs * 1.2 + 0.3);
}

/* The ping-pong's variants, in the order run_udp() measures them. */
static const struct {
	const char *variant, *what;
} pingpongs[] = {
	{"busy_poll", "spinning"},
	{"busy_poll_pinned", "spinning, pinned to CPUs 0 and 1"},
	{"busy_poll_yield", "yielding between looks"},
	{"handoff", "through a receive thread (the hand-off floor)"},
};

/* Contract: see bench.h. An unknown variant dies. */
void udp_pingpong_point(const char *variant)
{
	struct rec *r;
	char res[256];
	double cpu;
	size_t v = 0;

	while (v < N_OF(pingpongs) && strcmp(pingpongs[v].variant, variant))
		v++;
	if (v == N_OF(pingpongs))
		die("no UDP ping-pong variant %s", variant);
	r = rec_add("udp", "pingpong", pingpongs[v].variant, 8);
	mmode.pin = v == 1;
	mmode.udp_yield = v == 2;
	mmode.udp_handoff = v == 3;
	measure("udp", T_WRITE_LAT, 8, false, MR_PLAIN, res, sizeof(res), &cpu);
	rec_set(r, "median_us", field(res, "med_us"));
	rec_set(r, "p99_us", field(res, "p99_us"));
}

/* Contract: see bench.h. The stream, then the ping-pong. */
void run_udp(void)
{
	struct rec *r;
	char res[256];
	double ns, cpu;

	progress_step(opt.secs * 1.2 + 0.3, "UDP loopback, one stream of 4 KiB datagrams");
	r = rec_add("udp", "stream", "", UDP_BW_SIZE);
	measure("udp", T_WRITE_BW, UDP_BW_SIZE, false, MR_PLAIN, res, sizeof(res), &cpu);
	ns = field(res, "ns");
	rec_set(r, "gbps", field(res, "bytes") / ns);
	rec_set(r, "mpps", field(res, "msgs") / ns * 1e3);
	rec_set(r, "cpu_s_per_gb", cpu / (field(res, "total") / 1e9));
	for (size_t v = 0; v < N_OF(pingpongs); v++) {
		progress_step(opt.secs * 1.2 + 0.3, "UDP loopback, 8-byte busy ping-pong, %s",
			      pingpongs[v].what);
		udp_pingpong_point(pingpongs[v].variant);
	}
}

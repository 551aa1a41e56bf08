/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_SHM=0 */
/* test: timeout=60 */
/*
 * api_rdmacm_regress_rs_hup: rpoll must not report a stream rsocket hung
 * up (POLLHUP) while data the peer sent before it closed is still to be
 * read, whatever moment the peer's DREQ arrives at.
 *
 * rpoll used to look at the CQ first and at the CM events second. Our
 * device acknowledges the peer's last bytes once they are in our CQ, and
 * only then does the peer's close (after its sends completed) send the
 * DREQ, so whatever came before a DISCONNECTED event is in the CQ by the
 * time the event is on the channel. A poller preempted between its
 * CQ pass (found nothing yet) and its CM pass (found DISCONNECTED) saw a
 * disconnected socket with nothing queued: POLLHUP and no POLLIN, though
 * the bytes were in the CQ. rstream -T a (nonblocking, rpoll with timeout
 * 0, stops on POLLHUP) then exited 16 before its last transfer, while the
 * server had sent everything and exited 0 (seen once in CI, two network
 * namespaces, a loaded machine).
 *
 * Here the preemption is made certain: the device context's poll_cq is
 * wrapped, and the first time it finds the client's CQ empty during the
 * test, the client thread lets the server send and close, and waits until
 * the DISCONNECTED event is on its channel before returning. The first
 * readiness rpoll reports must then be POLLIN without POLLHUP, every byte
 * must be read, and the end of the stream must follow.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

enum {
	PORT = 6203,
	TOTAL = 3 * 4096,
	WAIT_MS = 5000,
};

static struct sockaddr_in me;
static int (*orig_poll_cq)(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static pthread_t client_thread;
static atomic_bool armed, go, listening, hooked;
static atomic_int client_fd = -1;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 13 + (i >> 8));
}

/* The client's first empty CQ pass: the peer sends and closes before it returns. */
static int hooked_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int ret = orig_poll_cq(cq, n, wc);
	struct pollfd p = {.fd = atomic_load(&client_fd), .events = POLLIN};

	if (ret || !pthread_equal(pthread_self(), client_thread) || !atomic_exchange(&armed, false))
		return ret;
	atomic_store(&go, true);
	/* the socket number is the event channel's fd: readable once DISCONNECTED is queued */
	poll(&p, 1, WAIT_MS);
	atomic_store(&hooked, (p.revents & POLLIN) != 0);
	return ret;
}

static void *server(void *arg)
{
	struct sockaddr_in sin = me;
	static uint8_t data[TOTAL];
	size_t sent = 0;
	uint64_t start;
	int l, s;

	(void)arg;
	for (size_t i = 0; i < TOTAL; i++)
		data[i] = pattern(i);
	sin.sin_port = htons(PORT);
	l = rsocket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || rbind(l, (struct sockaddr *)&sin, sizeof(sin)) || rlisten(l, 1)) {
		atomic_store(&listening, true);
		return (void *)"listen failed";
	}
	atomic_store(&listening, true);
	s = raccept(l, NULL, NULL);
	if (s < 0) {
		rclose(l);
		return (void *)"raccept failed";
	}
	start = now_ms();
	while (!atomic_load(&go) && now_ms() - start < WAIT_MS)
		usleep(1000);
	while (sent < TOTAL) { /* blocking: the credits cover it */
		ssize_t n = rsend(s, data + sent, TOTAL - sent, 0);

		if (n <= 0)
			break;
		sent += (size_t)n;
	}
	rshutdown(s, SHUT_RDWR);
	rclose(s);
	rclose(l);
	return sent == TOTAL ? NULL : (void *)"rsend failed";
}

/* rpoll with timeout 0 until something is ready, as rstream -T a does. */
static short spin_poll(int s)
{
	uint64_t start = now_ms();
	struct pollfd p = {.fd = s, .events = POLLIN};

	do {
		p.revents = 0;
		if (rpoll(&p, 1, 0) < 0)
			return -1;
	} while (!p.revents && now_ms() - start < WAIT_MS);
	return p.revents;
}

int main(void)
{
	struct ibv_context **devs;
	struct sockaddr_in dst;
	static uint8_t buf[TOTAL + 1];
	union ibv_gid gid;
	size_t got = 0, bad_at = (size_t)-1;
	pthread_t th;
	void *why = NULL;
	short rev;
	ssize_t k = -1;
	int n, s;

	devs = rdma_get_devices(&n); /* the library's device stays open: before the fd count */
	t_start("api_rdmacm_regress_rs_hup");
	if (!devs || !n)
		t_skip_all("no softverbs device");
	CHECK_EQ_INT(ibv_query_gid(devs[0], 1, 0, &gid), 0);
	me.sin_family = AF_INET;
	memcpy(&me.sin_addr, gid.raw + 12, 4);
	client_thread = pthread_self();
	orig_poll_cq = devs[0]->ops.poll_cq;
	devs[0]->ops.poll_cq = hooked_poll_cq;

	CHECK_EQ_INT(pthread_create(&th, NULL, server, NULL), 0);
	while (!atomic_load(&listening))
		usleep(1000);
	dst = me;
	dst.sin_port = htons(PORT);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	CHECK_EQ_INT(rconnect(s, (struct sockaddr *)&dst, sizeof(dst)), 0);
	rfcntl(s, F_SETFL, O_NONBLOCK);
	usleep(100 * 1000); /* the credit updates of the connection complete */
	{
		struct pollfd p = {.fd = s, .events = POLLIN};

		CHECK_EQ_INT(rpoll(&p, 1, 0), 0); /* takes their completions */
	}
	atomic_store(&client_fd, s);
	atomic_store(&armed, true);

	rev = spin_poll(s);
	CHECK_MSG(atomic_load(&hooked), "the DISCONNECTED event did not come within %d ms",
		  WAIT_MS);
	CHECK_MSG(rev == POLLIN, "first readiness 0x%x (POLLIN 0x%x, POLLHUP 0x%x), data unread",
		  (unsigned)rev, POLLIN, POLLHUP);
	for (uint64_t start = now_ms(); now_ms() - start < WAIT_MS;) {
		k = rrecv(s, buf + got, sizeof(buf) - got, 0);
		if (k > 0)
			got += (size_t)k;
		else if (k == 0 || errno != EAGAIN)
			break;
		else if (spin_poll(s) < 0)
			break;
	}
	CHECK_MSG(got == TOTAL, "read %zu of %d bytes", got, TOTAL);
	CHECK_MSG(k == 0, "no end of stream after the data (rrecv %zd, %s)", k,
		  k < 0 ? t_errname(errno) : "");
	for (size_t i = 0; i < got && bad_at == (size_t)-1; i++)
		if (buf[i] != pattern(i))
			bad_at = i;
	CHECK_MSG(bad_at == (size_t)-1, "data differ at byte %zu", bad_at);
	rev = spin_poll(s);
	CHECK_MSG(rev & POLLHUP, "no POLLHUP at the end (0x%x)", (unsigned)rev);
	CHECK_EQ_INT(pthread_join(th, &why), 0);
	CHECK_MSG(!why, "server: %s", why ? (const char *)why : "");
	rclose(s);
	devs[0]->ops.poll_cq = orig_poll_cq;
	rdma_free_devices(devs);
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_SHM=0 */
/* test: timeout=60 */
/*
 * api_rdmacm_regress_rs_target: a stream rsocket's sender must take the
 * bytes of a DATA write out of its target SGL entry before the write is
 * posted, not after.
 *
 * The peer writes a fresh entry into the same memory (its SGL update)
 * once it has consumed what the entry described. A sender that posted
 * the write and only then advanced the entry (address += n, length -= n)
 * could, when preempted in between long enough for the data to arrive,
 * be read and the half re-advertised, subtract the old write from the
 * new entry: a 64 KiB write that filled the entry left the fresh entry at
 * length 0, the sender waited on it forever and the receiver waited for
 * data (rcopy and rstream hung about once in 60 runs under load over UDP).
 *
 * Here the preemption is made certain: the device context's post_send is
 * wrapped, and after each full-entry DATA write the sending thread waits
 * until the receiving thread (same process) has consumed every byte
 * posted and its SGL update has had time to land. 1 MiB then goes
 * through with every byte checked; a stall of 5 s fails the test.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

enum {
	PORT = 6201,
	TOTAL = 1 << 20,
	ENTRY = 1 << 16, /* half of the default 128 KiB receive buffer */
	STALL_MS = 5000,
};

static struct sockaddr_in me;
static int (*orig_post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static atomic_ulong posted, consumed;
static atomic_int delayed;
static atomic_bool listening;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 12));
}

/* After a full-entry DATA write: wait until the reader consumed it, then a little more. */
static int hooked_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int ret = orig_post_send(qp, wr, bad);
	uint32_t imm, len;
	uint64_t start;

	if (ret || wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
		return ret;
	imm = be32toh(wr->imm_data);
	if (imm >> 29 != 0) /* not DATA: an SGL update or CTRL */
		return ret;
	len = imm & 0x1fffffff;
	atomic_fetch_add(&posted, len);
	if (len != ENTRY)
		return ret;
	start = now_ms();
	while (atomic_load(&consumed) < atomic_load(&posted) && now_ms() - start < 2000)
		usleep(1000);
	usleep(50 * 1000); /* the SGL update travels back and is placed */
	atomic_fetch_add(&delayed, 1);
	return ret;
}

static void *reader(void *arg)
{
	struct sockaddr_in sin = me;
	static uint8_t buf[ENTRY];
	size_t got = 0, bad_at = (size_t)-1;
	int l, s = -1;
	uint64_t last = now_ms();

	(void)arg;
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
	rfcntl(s, F_SETFL, O_NONBLOCK);
	while (got < TOTAL && now_ms() - last < STALL_MS) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		ssize_t n;

		if (rpoll(&p, 1, 100) <= 0)
			continue;
		n = rrecv(s, buf, sizeof(buf), 0);
		if (n <= 0) {
			if (n < 0 && errno == EAGAIN)
				continue;
			break;
		}
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != pattern(got + (size_t)i) && bad_at == (size_t)-1)
				bad_at = got + (size_t)i;
		got += (size_t)n;
		atomic_store(&consumed, got);
		last = now_ms();
	}
	rclose(s);
	rclose(l);
	if (bad_at != (size_t)-1)
		return (void *)"data differ";
	return got == TOTAL ? NULL : (void *)"the stream stalled";
}

int main(void)
{
	struct ibv_context **devs;
	struct sockaddr_in dst;
	static uint8_t data[TOTAL];
	pthread_t th;
	union ibv_gid gid;
	size_t sent = 0;
	uint64_t last;
	void *why = NULL;
	int n, s;

	devs = rdma_get_devices(&n); /* the library's device stays open: before the fd count */
	t_start("api_rdmacm_regress_rs_target");
	if (!devs || !n)
		t_skip_all("no softverbs device");
	CHECK_EQ_INT(ibv_query_gid(devs[0], 1, 0, &gid), 0);
	me.sin_family = AF_INET;
	memcpy(&me.sin_addr, gid.raw + 12, 4);
	for (size_t i = 0; i < TOTAL; i++)
		data[i] = pattern(i);
	orig_post_send = devs[0]->ops.post_send;
	devs[0]->ops.post_send = hooked_post_send;

	CHECK_EQ_INT(pthread_create(&th, NULL, reader, NULL), 0);
	while (!atomic_load(&listening))
		usleep(1000);
	dst = me;
	dst.sin_port = htons(PORT);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0);
	CHECK_EQ_INT(rconnect(s, (struct sockaddr *)&dst, sizeof(dst)), 0);
	rfcntl(s, F_SETFL, O_NONBLOCK);
	last = now_ms();
	while (sent < TOTAL && now_ms() - last < STALL_MS) {
		struct pollfd p = {.fd = s, .events = POLLOUT};
		ssize_t k;

		if (rpoll(&p, 1, 100) <= 0)
			continue;
		k = rsend(s, data + sent, TOTAL - sent, 0);
		if (k < 0) {
			if (errno == EAGAIN)
				continue;
			CHECK_MSG(0, "rsend: %s", t_errname(errno));
			break;
		}
		sent += (size_t)k;
		last = now_ms();
	}
	CHECK_MSG(sent == TOTAL, "the sender stalled after %zu of %d bytes", sent, TOTAL);
	CHECK_EQ_INT(pthread_join(th, &why), 0);
	CHECK_MSG(!why, "reader: %s after %lu bytes", why ? (const char *)why : "",
		  atomic_load(&consumed));
	/*
	 * The defect hangs at the first full-entry write delayed; where rsend
	 * cuts its writes depends on timing (6 of the 16 were full-entry in
	 * one CI run under ASan, 1 in one of stop 39's, 15 usually), so one
	 * is enough.
	 */
	printf("# %d of the DATA writes filled their entry and were delayed\n",
	       atomic_load(&delayed));
	CHECK_MSG(atomic_load(&delayed) >= 1, "no full-entry write was delayed");
	rclose(s);
	devs[0]->ops.post_send = orig_post_send;
	rdma_free_devices(devs);
	return t_finish();
}

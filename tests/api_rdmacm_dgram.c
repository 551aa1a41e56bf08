/* SPDX-License-Identifier: MIT */
/* test: env=SOFTVERBS_SHM=0 */
/* test: timeout=60 */
/*
 * api_rdmacm_dgram: datagram rsockets between two processes, each with
 * its own device. The child binds a SOCK_DGRAM rsocket and echoes what
 * it receives, each byte plus one, to the address rrecvfrom gave; the
 * parent sends with rsendto (the first message goes over UDP, the rest
 * over the UD QPs once the child's CTRL message named its QP) and checks
 * every reply's data and source. Errors: a message longer than 2048
 * bytes with its ds_header is EMSGSIZE, rlisten is EOPNOTSUPP, and the
 * socket's number is a real (UDP) descriptor. Over UDP (SOFTVERBS_SHM=0):
 * a same-host link to the child's device would stay open in the device
 * and count as a leaked descriptor.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

enum {
	PORT = 6207,
	MSGS = 20,
	LEN = 1500
};

static int my_addr(struct sockaddr_in *a)
{
	struct ibv_context **devs;
	union ibv_gid gid;
	int n;

	devs = rdma_get_devices(&n);
	if (!devs || !n || ibv_query_gid(devs[0], 1, 0, &gid))
		return -1;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	memcpy(&a->sin_addr, gid.raw + 12, 4);
	a->sin_port = htons(PORT);
	rdma_free_devices(devs);
	return 0;
}

/* The child: echo MSGS messages, each byte plus one. Exit status 0 when all went. */
static int echo(int to_parent)
{
	struct sockaddr_in me;
	uint8_t buf[LEN];
	int s;

	if (my_addr(&me))
		return 77;
	s = rsocket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0 || rbind(s, (struct sockaddr *)&me, sizeof(me)))
		return 2;
	if (write(to_parent, &me, sizeof(me)) != sizeof(me))
		return 3;
	for (int i = 0; i < MSGS; i++) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n;

		if (rpoll(&p, 1, 10000) != 1)
			return 4;
		n = rrecvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
		if (n != LEN || flen != sizeof(from))
			return 5;
		for (int k = 0; k < LEN; k++)
			buf[k]++;
		if (rsendto(s, buf, (size_t)n, 0, (struct sockaddr *)&from, flen) != n)
			return 6;
	}
	rclose(s);
	return 0;
}

int main(void)
{
	struct sockaddr_in peer, me;
	static uint8_t big[2048];
	uint8_t out[LEN], in[LEN];
	int fds[2], st = 0, s;
	pid_t pid;

	if (pipe(fds))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		_exit(echo(fds[1]));
	}
	close(fds[1]);
	if (read(fds[0], &peer, sizeof(peer)) != sizeof(peer)) {
		waitpid(pid, &st, 0);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
			t_skip_all("no softverbs device");
		fprintf(stderr, "the child failed (status %d)\n", st);
		return 1;
	}
	close(fds[0]);
	if (my_addr(&me)) /* the library's device stays open: before the fd count */
		t_skip_all("no softverbs device");
	t_start("api_rdmacm_dgram");

	s = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0);
	CHECK(fcntl(s, F_GETFD) >= 0);
	errno = 0;
	CHECK(rlisten(s, 1) == -1 && errno == EOPNOTSUPP);
	errno = 0;
	CHECK(rsendto(s, big, sizeof(big) - 7, 0, (struct sockaddr *)&peer, sizeof(peer)) == -1 &&
	      errno == EMSGSIZE);
	for (int i = 0; i < MSGS; i++) {
		struct pollfd p = {.fd = s, .events = POLLIN};
		struct sockaddr_in from;
		socklen_t flen = sizeof(from);
		ssize_t n;

		for (int k = 0; k < LEN; k++)
			out[k] = (uint8_t)(i * 7 + k);
		CHECK_MSG(rsendto(s, out, LEN, 0, (struct sockaddr *)&peer, sizeof(peer)) == LEN,
			  "rsendto %d: %s", i, strerror(errno));
		if (!CHECK_MSG(rpoll(&p, 1, 10000) == 1, "no reply to message %d", i))
			break;
		n = rrecvfrom(s, in, sizeof(in), 0, (struct sockaddr *)&from, &flen);
		CHECK_MSG(n == LEN, "reply %d: %zd bytes", i, n);
		CHECK(from.sin_addr.s_addr == peer.sin_addr.s_addr &&
		      from.sin_port == peer.sin_port);
		for (int k = 0; k < LEN; k++)
			out[k]++;
		CHECK_MSG(!memcmp(in, out, LEN), "reply %d differs", i);
	}
	errno = 0;
	CHECK(rrecv(s, in, sizeof(in), MSG_DONTWAIT) == -1 && errno == EAGAIN);
	CHECK(rclose(s) == 0);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's status %d", st);
	return t_finish();
}

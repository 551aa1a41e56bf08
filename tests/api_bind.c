/* SPDX-License-Identifier: MIT */
/*
 * api_bind: the device's UDP endpoint.
 *
 * Contexts of one process share one socket, held while any is open.
 * Without SOFTVERBS_ADDR each process takes the first 127.0.0.N whose
 * bind succeeds, so a second process gets another address, and when all
 * 254 are taken the open fails with EADDRINUSE. An explicit address that
 * is taken fails the open with EADDRINUSE. The bound pair is checked by
 * trying to bind it ourselves.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define NADDR 254

static struct sockaddr_in sin_of(uint32_t host_addr, int port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(host_addr);
	sin.sin_port = htons((uint16_t)port);
	return sin;
}

/* Our own socket bound to addr:port (port 0: kernel's choice), or -errno. */
static int bind_udp(uint32_t host_addr, int port)
{
	struct sockaddr_in sin = sin_of(host_addr, port);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), e;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int bound_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	if (getsockname(fd, (struct sockaddr *)&sin, &len))
		return -1;
	return ntohs(sin.sin_port);
}

/* True if someone holds addr:port (our bind fails with EADDRINUSE). */
static int in_use(uint32_t host_addr, int port)
{
	int fd = bind_udp(host_addr, port);

	if (fd >= 0)
		close(fd);
	return fd == -EADDRINUSE;
}

static struct ibv_context *open_dev(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int e;

	if (!list || !list[0]) {
		ibv_free_device_list(list);
		errno = ENODEV;
		return NULL;
	}
	errno = 0;
	ctx = ibv_open_device(list[0]);
	e = errno;
	ibv_free_device_list(list);
	errno = e;
	return ctx;
}

/* The host-order IPv4 address in the context's GID 0, or 0. */
static uint32_t gid_addr(struct ibv_context *ctx)
{
	union ibv_gid gid;
	uint32_t a;

	if (ibv_query_gid(ctx, 1, 0, &gid))
		return 0;
	memcpy(&a, &gid.raw[12], 4);
	return ntohl(a);
}

static void set_port(int port)
{
	char s[16];

	snprintf(s, sizeof(s), "%d", port);
	setenv("SOFTVERBS_UDP_PORT", s, 1);
}

static void case_shared(void)
{
	struct ibv_context *a = NULL, *b = NULL;
	uint32_t addr;
	int fd, port;

	t_case("contexts share one binding");
	/* a port of our own, so that no parallel test takes the pair once freed */
	fd = bind_udp(0x7f000001, 0);
	if (!CHECK(fd >= 0))
		return;
	port = bound_port(fd);
	close(fd);
	set_port(port);
	a = open_dev();
	b = open_dev();
	if (!CHECK(a && b))
		goto out;
	addr = gid_addr(a);
	CHECK((addr >> 24) == 127);
	CHECK(gid_addr(b) == addr);
	CHECK(in_use(addr, port));
	ibv_close_device(a);
	a = NULL;
	CHECK(in_use(addr, port)); /* b still holds it */
	ibv_close_device(b);
	b = NULL;
	CHECK(!in_use(addr, port)); /* the last close releases it */
out:
	if (a)
		ibv_close_device(a);
	if (b)
		ibv_close_device(b);
	unsetenv("SOFTVERBS_UDP_PORT");
}

/* Child mode: open, report the address on stdout, wait for stdin to close. */
static int child(void)
{
	struct ibv_context *ctx = open_dev();
	char c;

	if (!ctx)
		return 1;
	printf("%u\n", gid_addr(ctx));
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	ibv_close_device(ctx);
	return 0;
}

static void case_two_processes(const char *self)
{
	int to_child[2], from_child[2], status;
	struct ibv_context *ctx;
	char buf[32] = "";
	unsigned int other = 0;
	ssize_t n;
	pid_t pid;

	t_case("another process gets another address");
	ctx = open_dev();
	if (!CHECK(ctx != NULL))
		return;
	if (!CHECK(pipe(to_child) == 0 && pipe(from_child) == 0))
		goto out;
	pid = fork();
	if (pid == 0) {
		dup2(to_child[0], STDIN_FILENO);
		dup2(from_child[1], STDOUT_FILENO);
		close(to_child[0]);
		close(to_child[1]);
		close(from_child[0]);
		close(from_child[1]);
		execl(self, self, "--child", (char *)NULL);
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	n = read(from_child[0], buf, sizeof(buf) - 1);
	if (CHECK(n > 0 && sscanf(buf, "%u", &other) == 1)) {
		CHECK((other >> 24) == 127);
		CHECK_MSG(other != gid_addr(ctx), "both processes got %u.%u.%u.%u", other >> 24,
			  (other >> 16) & 0xff, (other >> 8) & 0xff, other & 0xff);
		CHECK(in_use(other, 4791));
	}
	close(to_child[1]); /* lets the child close its context and exit */
	close(from_child[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
out:
	ibv_close_device(ctx);
}

static void case_explicit_taken(void)
{
	struct ibv_context *ctx;
	uint32_t addr = 0x7f0000c9; /* 127.0.0.201 */
	int fd, port;

	t_case("SOFTVERBS_ADDR taken: EADDRINUSE");
	fd = bind_udp(addr, 0);
	if (!CHECK(fd >= 0))
		return;
	port = bound_port(fd);
	set_port(port);
	setenv("SOFTVERBS_ADDR", "127.0.0.201", 1);
	ctx = open_dev();
	CHECK_MSG(!ctx && errno == EADDRINUSE, "open: %s/%s", ctx ? "context" : "NULL",
		  t_errname(errno));
	if (ctx)
		ibv_close_device(ctx);
	close(fd);
	/* once free, the same configuration opens and holds the pair */
	ctx = open_dev();
	if (CHECK_MSG(ctx != NULL, "open: %s", t_errname(errno))) {
		CHECK(gid_addr(ctx) == addr);
		CHECK(in_use(addr, port));
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_ADDR");
	unsetenv("SOFTVERBS_UDP_PORT");
}

static void case_first_free(void)
{
	struct ibv_context *ctx;
	int fds[NADDR + 1], port, probe, i;

	t_case("first free 127.0.0.N; all taken: EADDRINUSE");
	/* a port nobody uses on 127.0.0.1, then hold it on every 127.0.0.N */
	probe = bind_udp(0x7f000001, 0);
	if (!CHECK(probe >= 0))
		return;
	port = bound_port(probe);
	fds[1] = probe;
	for (i = 2; i <= NADDR; i++)
		fds[i] = bind_udp(0x7f000000u | (uint32_t)i, port);
	set_port(port);

	/* N = 1..254 all held (by us, or by someone else) */
	ctx = open_dev();
	CHECK_MSG(!ctx && errno == EADDRINUSE, "open: %s/%s", ctx ? "context" : "NULL",
		  t_errname(errno));
	if (ctx)
		ibv_close_device(ctx);

	/* free 127.0.0.3 and 127.0.0.200: the device takes the lower one */
	if (CHECK(fds[3] >= 0 && fds[200] >= 0)) {
		close(fds[3]);
		close(fds[200]);
		fds[3] = fds[200] = -1;
		ctx = open_dev();
		if (CHECK_MSG(ctx != NULL, "open: %s", t_errname(errno))) {
			CHECK_EQ_INT(gid_addr(ctx), 0x7f000003);
			ibv_close_device(ctx);
		}
	}
	for (i = 1; i <= NADDR; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	unsetenv("SOFTVERBS_UDP_PORT");
}

int main(int argc, char **argv)
{
	unsetenv("SOFTVERBS_ADDR");
	unsetenv("SOFTVERBS_UDP_PORT");
	if (argc > 1 && !strcmp(argv[1], "--child"))
		return child();
	t_start("api_bind");
	case_shared();
	case_two_processes(argv[0]);
	case_explicit_taken();
	case_first_free();
	return t_finish();
}

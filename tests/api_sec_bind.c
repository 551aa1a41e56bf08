/* SPDX-License-Identifier: MIT */
/*
 * api_sec_bind.c - the device listens on loopback unless told otherwise.
 *
 * Every IPv4 socket this process holds is found through /proc/self/fd
 * and getsockname(2). With no configuration, opening the device adds
 * exactly one, a UDP socket on 127.0.0.0/8 (the GID says the same), and
 * nothing bound to the wildcard address: no other host can reach it.
 * SOFTVERBS_ADDR moves it to exactly the address given (here another
 * loopback address: tests never listen on the network), and 0.0.0.0
 * (every interface) is refused with EINVAL rather than bound.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <sys/socket.h>

#define MAX_SOCKS 16

/* The local addresses of this process's IPv4 sockets (at most max); how many. */
static int ipv4_socks(struct sockaddr_in *out, int max)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) && n < max) {
		struct sockaddr_in sin;
		socklen_t len = sizeof(sin);
		int fd = atoi(e->d_name);

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		if (getsockname(fd, (struct sockaddr *)&sin, &len) == 0 &&
		    sin.sin_family == AF_INET)
			out[n++] = sin;
	}
	closedir(d);
	return n;
}

static bool is_loopback(struct in_addr a)
{
	return (ntohl(a.s_addr) >> 24) == 127;
}

/* Open the first device as configured now, or NULL. */
static struct ibv_context *open_now(void)
{
	return t_open_dev();
}

/* The single socket the device added, which must be bound to `want` (any 127/8 if 0). */
static void check_socket(int before, uint32_t want)
{
	struct sockaddr_in s[MAX_SOCKS];
	char text[INET_ADDRSTRLEN];
	int n = ipv4_socks(s, MAX_SOCKS);

	if (!CHECK_MSG(n == before + 1, "%d IPv4 sockets, %d before opening", n, before))
		return;
	for (int i = 0; i < n; i++) {
		inet_ntop(AF_INET, &s[i].sin_addr, text, sizeof(text));
		printf("# socket %d: %s:%u\n", i, text, ntohs(s[i].sin_port));
		CHECK_MSG(s[i].sin_addr.s_addr != htonl(INADDR_ANY), "bound to the wildcard");
		if (want)
			CHECK_MSG(s[i].sin_addr.s_addr == want, "bound to %s", text);
		else
			CHECK_MSG(is_loopback(s[i].sin_addr), "bound to %s, not loopback", text);
	}
}

static void case_default(void)
{
	struct sockaddr_in s[MAX_SOCKS];
	struct ibv_context *ctx;
	union ibv_gid gid;
	int before = ipv4_socks(s, MAX_SOCKS);

	t_case("default: one UDP socket, on 127.0.0.0/8, none on the wildcard");
	ctx = open_now();
	if (!CHECK(ctx))
		return;
	check_socket(before, 0);
	if (CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0))
		CHECK_MSG(gid.raw[10] == 0xff && gid.raw[11] == 0xff && gid.raw[12] == 127,
			  "GID is not an IPv4-mapped 127/8 address");
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
}

static void case_explicit(void)
{
	struct sockaddr_in s[MAX_SOCKS];
	struct ibv_context *ctx;
	const char *text = "127.0.0.99";
	int before = ipv4_socks(s, MAX_SOCKS);
	struct in_addr want;

	t_case("SOFTVERBS_ADDR binds exactly the address given; 0.0.0.0 is refused");
	inet_pton(AF_INET, text, &want);
	setenv("SOFTVERBS_ADDR", text, 1);
	ctx = open_now();
	if (CHECK_MSG(ctx, "SOFTVERBS_ADDR=%s: %s", text, t_errname(errno))) {
		check_socket(before, want.s_addr);
		CHECK_EQ_INT(ibv_close_device(ctx), 0);
	}
	setenv("SOFTVERBS_ADDR", "0.0.0.0", 1);
	fflush(stdout);
	CHECK_ERRNO_PTR(open_now(), EINVAL); /* (with a message on stderr) */
	unsetenv("SOFTVERBS_ADDR");
	CHECK_EQ_INT(ipv4_socks(s, MAX_SOCKS), before);
}

int main(void)
{
	t_start("api_sec_bind");
	case_default();
	case_explicit();
	return t_finish();
}

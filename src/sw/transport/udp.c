/* SPDX-License-Identifier: MIT */
/*
 * udp.c - the device's UDP endpoint.
 *
 * RoCE v2 runs over UDP; the device's GID is the IPv4-mapped address of
 * this socket. With SOFTVERBS_ADDR the socket binds exactly that address.
 * Without it, every process gets its own loopback address: the first
 * 127.0.0.N whose bind() succeeds, so that several processes on one host
 * can all use the standard port. The kernel decides what is free; nothing
 * is guessed.
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/sw.h"

/* Contract: true for 127.0.0.0/8 (network byte order argument). */
static bool addr_is_loopback(struct in_addr a)
{
	return (ntohl(a.s_addr) >> 24) == 127;
}

/*
 * Contract: the index of the interface that owns `a`: the one carrying
 * exactly that address, else for 127/8 the loopback interface (Linux
 * routes all of 127/8 to it); 0 if there is none or on error.
 */
static uint32_t addr_ifindex(struct in_addr a)
{
	struct ifaddrs *list, *ifa;
	const char *exact = NULL, *lo = NULL;
	uint32_t index = 0;

	if (getifaddrs(&list))
		return 0;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		const struct sockaddr_in *sin;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET)
			continue;
		sin = (const struct sockaddr_in *)(const void *)ifa->ifa_addr;
		if (sin->sin_addr.s_addr == a.s_addr && !exact)
			exact = ifa->ifa_name;
		if ((ifa->ifa_flags & IFF_LOOPBACK) && !lo)
			lo = ifa->ifa_name;
	}
	if (exact)
		index = if_nametoindex(exact);
	else if (lo && addr_is_loopback(a))
		index = if_nametoindex(lo);
	freeifaddrs(list);
	return index;
}

/* Contract: a fresh non-blocking close-on-exec UDP socket, or -errno. */
static int udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	return fd < 0 ? -errno : fd;
}

/* Contract: bind `fd` to addr:port; 0 or -errno. */
static int udp_bind(int fd, struct in_addr addr, uint16_t port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr = addr;
	sin.sin_port = htons(port);
	return bind(fd, (const struct sockaddr *)&sin, sizeof(sin)) ? -errno : 0;
}

/*
 * Contract: bind `fd` to the first 127.0.0.N:port (N = 1..254) that the
 * kernel accepts, storing the address in *out. An address in use or not
 * available moves on to the next N; any other error is returned at once.
 * All taken: -EADDRINUSE.
 */
static int udp_bind_loopback(int fd, uint16_t port, struct in_addr *out)
{
	struct in_addr a;
	uint32_t n;
	int ret;

	for (n = 1; n <= 254; n++) {
		a.s_addr = htonl(0x7f000000u | n);
		ret = udp_bind(fd, a, port);
		if (!ret) {
			*out = a;
			return 0;
		}
		if (ret != -EADDRINUSE && ret != -EADDRNOTAVAIL)
			return ret;
	}
	return -EADDRINUSE;
}

/*
 * Contract: see sw.h. On success port->fd is the bound socket and addr,
 * udp_port, ifindex and active_mtu describe it; on error port->fd is -1
 * and nothing is left open.
 */
int sw_port_open(struct sw_port *port, const struct sw_config *cfg)
{
	struct in_addr addr;
	int fd, ret;

	port->fd = -1;
	fd = udp_socket();
	if (fd < 0)
		return fd;
	if (cfg->have_addr) {
		addr = cfg->addr;
		ret = udp_bind(fd, addr, cfg->udp_port);
	} else {
		ret = udp_bind_loopback(fd, cfg->udp_port, &addr);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	port->fd = fd;
	port->addr = addr;
	port->udp_port = cfg->udp_port;
	port->ifindex = addr_ifindex(addr);
	if (cfg->mtu)
		port->active_mtu = cfg->mtu;
	else
		port->active_mtu = addr_is_loopback(addr) ? IBV_MTU_4096 : IBV_MTU_1024;
	return 0;
}

/* Contract: close the socket if open; safe to call twice. */
void sw_port_close(struct sw_port *port)
{
	if (port->fd >= 0)
		close(port->fd);
	port->fd = -1;
}

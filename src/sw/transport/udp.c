/* SPDX-License-Identifier: MIT */
/*
 * udp.c - the device's UDP endpoint.
 *
 * RoCE v2 runs over UDP; the device's GID is the address of this socket
 * (IPv4-mapped for IPv4). With SOFTVERBS_ADDR the socket binds exactly
 * that address, IPv4 or IPv6. A GID table layout other than "single"
 * (SOFTVERBS_GID_TABLE) also lists the IPv6 link-local address of the
 * address's interface, through a second socket bound to it.
 * Without it, every process gets its own loopback address: the first
 * 127.0.0.N whose bind() succeeds, so that several processes on one host
 * can all use the standard port. The kernel decides what is free; nothing
 * is guessed.
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

/*
 * Contract: the index of the interface that owns address `a`: the one
 * carrying exactly that address (for IPv6 link-local, its scope), else
 * for 127/8 and ::1 the loopback interface (Linux routes all of 127/8 to
 * it); 0 if there is none or on error.
 */
static uint32_t addr_ifindex(const union sw_sa *a)
{
	struct ifaddrs *list, *ifa;
	const char *exact = NULL, *lo = NULL;
	uint32_t index = 0;

	if (sw_sa_is_v6(a) && a->v6.sin6_scope_id)
		return a->v6.sin6_scope_id;
	if (getifaddrs(&list))
		return 0;
	for (ifa = list; ifa; ifa = ifa->ifa_next) {
		if (!ifa->ifa_addr)
			continue;
		if ((ifa->ifa_flags & IFF_LOOPBACK) && !lo)
			lo = ifa->ifa_name;
		if (ifa->ifa_addr->sa_family == a->sa.sa_family && !exact &&
		    sw_sa_same_addr((const union sw_sa *)(const void *)ifa->ifa_addr, a))
			exact = ifa->ifa_name;
	}
	if (exact)
		index = if_nametoindex(exact);
	else if (lo && sw_sa_is_loopback(a))
		index = if_nametoindex(lo);
	freeifaddrs(list);
	return index;
}

/*
 * Contract: the IPv6 link-local address of interface `ifindex` into *out
 * (scope set, port 0); false if it has none.
 */
static bool ifindex_link_local(uint32_t ifindex, union sw_sa *out)
{
	struct ifaddrs *list, *ifa;
	bool found = false;

	if (!ifindex || getifaddrs(&list))
		return false;
	for (ifa = list; ifa && !found; ifa = ifa->ifa_next) {
		const struct sockaddr_in6 *s6;

		if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET6 ||
		    if_nametoindex(ifa->ifa_name) != ifindex)
			continue;
		s6 = (const struct sockaddr_in6 *)(const void *)ifa->ifa_addr;
		if (!IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			continue;
		memset(out, 0, sizeof(*out));
		out->v6.sin6_family = AF_INET6;
		out->v6.sin6_addr = s6->sin6_addr;
		out->v6.sin6_scope_id = ifindex;
		found = true;
	}
	freeifaddrs(list);
	return found;
}

/*
 * Contract: see transport_priv.h. A fresh non-blocking close-on-exec UDP socket of `family`,
 * or -errno. An IPv6 socket carries IPv6 only, and takes datagrams with
 * a zero UDP checksum: rxe sends those, and the ICRC covers the packet.
 */
int sw_udp_socket(int family)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

	if (fd < 0)
		return -errno;
	if (family == AF_INET6 && (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) ||
				   setsockopt(fd, SOL_UDP, UDP_NO_CHECK6_RX, &one, sizeof(one)))) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return fd;
}

/* Contract: bind `fd` to `addr` at `port`; 0 or -errno. */
static int udp_bind(int fd, const union sw_sa *addr, uint16_t port)
{
	union sw_sa a = *addr;

	sw_sa_set_port(&a, port);
	return bind(fd, &a.sa, sw_sa_len(&a)) ? -errno : 0;
}

/*
 * Contract: bind `fd` to the first 127.0.0.N:port (N = 1..254) that the
 * kernel accepts, storing the address in *out. An address in use or not
 * available moves on to the next N; any other error is returned at once.
 * All taken: -EADDRINUSE.
 */
static int udp_bind_loopback(int fd, uint16_t port, union sw_sa *out)
{
	union sw_sa a;
	uint32_t n;
	int ret;

	memset(&a, 0, sizeof(a));
	a.v4.sin_family = AF_INET;
	for (n = 1; n <= 254; n++) {
		a.v4.sin_addr.s_addr = htonl(0x7f000000u | n);
		ret = udp_bind(fd, &a, port);
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
 * Contract: for a GID table that lists one, open the link-local socket
 * of the address's interface (unless the address is link-local itself).
 * Not finding one, or finding it taken by another device on the same
 * interface, leaves ll_fd at -1: the slot stays empty.
 */
static void open_link_local(struct sw_port *port, const struct sw_config *cfg)
{
	union sw_sa ll;
	int fd;

	if (cfg->gid_layout == SW_GIDS_SINGLE || !ifindex_link_local(port->ifindex, &ll))
		return;
	if (sw_sa_same_addr(&ll, &port->local))
		return;
	fd = sw_udp_socket(AF_INET6);
	if (fd < 0)
		return;
	if (udp_bind(fd, &ll, port->udp_port) || sw_net_setup(fd)) {
		close(fd);
		return;
	}
	sw_sa_set_port(&ll, port->udp_port);
	port->ll_fd = fd;
	port->ll = ll;
}

/*
 * Contract: see sw/transport.h. On success port->fd is the bound socket and local,
 * udp_port, ifindex, active_mtu and the GID table describe it; on error
 * port->fd is -1 and nothing is left open. The socket options are set
 * by the caller (sw_net_setup()), the link-local socket's here.
 */
int sw_port_open(struct sw_port *port, const struct sw_config *cfg)
{
	union sw_sa addr;
	int fd, ret;

	port->fd = port->ll_fd = -1;
	fd = sw_udp_socket(cfg->have_addr ? cfg->addr.sa.sa_family : AF_INET);
	if (fd < 0)
		return fd;
	if (cfg->have_addr) {
		addr = cfg->addr;
		ret = udp_bind(fd, &addr, cfg->udp_port);
	} else {
		ret = udp_bind_loopback(fd, cfg->udp_port, &addr);
	}
	if (ret) {
		close(fd);
		return ret;
	}
	sw_sa_set_port(&addr, cfg->udp_port);
	port->fd = fd;
	port->local = addr;
	port->udp_port = cfg->udp_port;
	port->ifindex = addr_ifindex(&addr);
	if (cfg->mtu)
		port->active_mtu = cfg->mtu;
	else
		port->active_mtu = sw_sa_is_loopback(&addr) ? IBV_MTU_4096 : IBV_MTU_1024;
	open_link_local(port, cfg);
	sw_port_lay_out_gids(port, cfg->gid_layout);
	return 0;
}

/* Contract: close the sockets if open; safe to call twice. */
void sw_port_close(struct sw_port *port)
{
	if (port->fd >= 0)
		close(port->fd);
	if (port->ll_fd >= 0)
		close(port->ll_fd);
	port->fd = port->ll_fd = -1;
}

/* SPDX-License-Identifier: MIT */
/*
 * mcast_sock.c - the sockets of UD multicast (mcast.c).
 *
 * Sending: the port's sockets send multicast datagrams out of the
 * interface of the device's address (IP_MULTICAST_IF, IPV6_MULTICAST_IF;
 * without it the kernel would pick the default route's), with the
 * kernel's default TTL / hop limit of 1 (the local link), and loop them
 * back to the host's own members (IP_MULTICAST_LOOP).
 *
 * Receiving: one socket per group, bound to the group's address at the
 * device's UDP port (so it receives that group's datagrams and nothing
 * else) with SO_REUSEADDR (every device on the host that is a member
 * binds the same address and gets its own copy), and joined to the
 * group on the port's interface.
 */
#include <net/if.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

/* Send multicast from `fd` (family `v6`) out of the port's interface, looped back. */
static void send_options(int fd, bool v6, const struct sw_port *port)
{
	int one = 1;

	if (v6) {
		int ifindex = (int)port->ifindex;

		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, &ifindex, sizeof(ifindex));
		setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &one, sizeof(one));
	} else {
		struct ip_mreqn mr = {.imr_address = port->local.v4.sin_addr,
				      .imr_ifindex = (int)port->ifindex};

		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr));
		setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one));
	}
}

/* Contract: see transport_priv.h. Failures leave the kernel's defaults. */
void sw_mcast_port_setup(const struct sw_port *port)
{
	send_options(port->fd, sw_sa_is_v6(&port->local), port);
	if (port->ll_fd >= 0)
		send_options(port->ll_fd, true, port);
}

/* Join `fd` to the group at `addr` on the port's interface; 0 or -errno. */
static int join(int fd, const union sw_sa *addr, const struct sw_port *port)
{
	int ret;

	if (sw_sa_is_v6(addr)) {
		struct ipv6_mreq mr = {.ipv6mr_multiaddr = addr->v6.sin6_addr,
				       .ipv6mr_interface = port->ifindex};

		ret = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &mr, sizeof(mr));
	} else {
		struct ip_mreqn mr = {.imr_multiaddr = addr->v4.sin_addr,
				      .imr_ifindex = (int)port->ifindex};

		if (!sw_sa_is_v6(&port->local))
			mr.imr_address = port->local.v4.sin_addr;
		ret = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr));
	}
	return ret ? -errno : 0;
}

/* Contract: see transport_priv.h. */
int sw_mcast_sock_open(const struct sw_port *port, const union ibv_gid *gid, union sw_sa *addr)
{
	union sw_sa a;
	int fd, one = 1, ret;

	sw_sa_from_gid(&a, gid, port->udp_port, 0);
	if (sw_sa_is_v6(&a))
		a.v6.sin6_scope_id = port->ifindex; /* ff02::/16 and the like need it */
	fd = sw_udp_socket(a.sa.sa_family);
	if (fd < 0)
		return fd;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, &a.sa, sw_sa_len(&a))) {
		ret = -errno;
		goto err;
	}
	ret = sw_net_setup(fd);
	if (!ret)
		ret = join(fd, &a, port);
	if (ret)
		goto err;
	*addr = a;
	return fd;
err:
	close(fd);
	return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * addr.h - RoCE v2 addresses: IPv4 or IPv6 socket addresses and GIDs.
 *
 * A RoCE v2 GID is an IPv6 address: an IPv4 endpoint's GID is its
 * IPv4-mapped form ::ffff:a.b.c.d. Inside the device an address is a
 * union sw_sa, the socket address in the family the packet travels in
 * (AF_INET for a mapped GID, AF_INET6 otherwise), port in network
 * order, ready for sendto(2). All static inline: these run per packet.
 */
#ifndef SV_SW_ADDR_H
#define SV_SW_ADDR_H

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>

union sw_sa {
	struct sockaddr sa;
	struct sockaddr_in v4;
	struct sockaddr_in6 v6;
};

/* Text of an address with its scope ("fe80::1%eth0"), without the port. */
enum {
	SW_ADDR_STRLEN = INET6_ADDRSTRLEN + IF_NAMESIZE + 1
};

static inline bool sw_gid_is_v4mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

static inline bool sw_gid_is_zero(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return !memcmp(g->raw, zero, sizeof(zero));
}

/*
 * A multicast GID, as the kernel's core tells one: ff00::/8, or an
 * IPv4-mapped address in 224.0.0.0/4.
 */
static inline bool sw_gid_is_multicast(const union ibv_gid *g)
{
	return g->raw[0] == 0xff || (sw_gid_is_v4mapped(g) && (g->raw[12] & 0xf0) == 0xe0);
}

static inline bool sw_sa_is_v6(const union sw_sa *a)
{
	return a->sa.sa_family == AF_INET6;
}

static inline socklen_t sw_sa_len(const union sw_sa *a)
{
	return sw_sa_is_v6(a) ? sizeof(a->v6) : sizeof(a->v4);
}

/* The UDP port, host order. */
static inline uint16_t sw_sa_port(const union sw_sa *a)
{
	return ntohs(sw_sa_is_v6(a) ? a->v6.sin6_port : a->v4.sin_port);
}

static inline void sw_sa_set_port(union sw_sa *a, uint16_t port)
{
	if (sw_sa_is_v6(a))
		a->v6.sin6_port = htons(port);
	else
		a->v4.sin_port = htons(port);
}

/* The GID naming `a`: its IPv6 address, or the IPv4-mapped form. */
static inline void sw_sa_gid(const union sw_sa *a, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (sw_sa_is_v6(a)) {
		memcpy(g->raw, &a->v6.sin6_addr, 16);
	} else {
		g->raw[10] = g->raw[11] = 0xff;
		memcpy(&g->raw[12], &a->v4.sin_addr, 4);
	}
}

/*
 * The socket address of GID `g` at `port` (host order): AF_INET for an
 * IPv4-mapped GID, else AF_INET6 with scope `scope` (an interface index,
 * for link-local destinations).
 */
static inline void sw_sa_from_gid(union sw_sa *a, const union ibv_gid *g, uint16_t port,
				  uint32_t scope)
{
	memset(a, 0, sizeof(*a));
	if (sw_gid_is_v4mapped(g)) {
		a->v4.sin_family = AF_INET;
		memcpy(&a->v4.sin_addr, &g->raw[12], 4);
		a->v4.sin_port = htons(port);
	} else {
		a->v6.sin6_family = AF_INET6;
		memcpy(&a->v6.sin6_addr, g->raw, 16);
		a->v6.sin6_port = htons(port);
		if (IN6_IS_ADDR_LINKLOCAL(&a->v6.sin6_addr))
			a->v6.sin6_scope_id = scope;
	}
}

/* True if `a` and `b` name the same host address (family and address; not port or scope). */
static inline bool sw_sa_same_addr(const union sw_sa *a, const union sw_sa *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (sw_sa_is_v6(a))
		return !memcmp(&a->v6.sin6_addr, &b->v6.sin6_addr, 16);
	return a->v4.sin_addr.s_addr == b->v4.sin_addr.s_addr;
}

/* True if the addresses and the ports are the same. */
static inline bool sw_sa_same(const union sw_sa *a, const union sw_sa *b)
{
	return sw_sa_same_addr(a, b) && sw_sa_port(a) == sw_sa_port(b);
}

/* True for an IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) multicast address. */
static inline bool sw_sa_is_multicast(const union sw_sa *a)
{
	if (sw_sa_is_v6(a))
		return IN6_IS_ADDR_MULTICAST(&a->v6.sin6_addr);
	return (ntohl(a->v4.sin_addr.s_addr) >> 28) == 0xe;
}

static inline bool sw_sa_is_loopback(const union sw_sa *a)
{
	if (sw_sa_is_v6(a))
		return IN6_IS_ADDR_LOOPBACK(&a->v6.sin6_addr);
	return (ntohl(a->v4.sin_addr.s_addr) >> 24) == 127;
}

/* Text of the address (not the port) into buf[SW_ADDR_STRLEN]; returns buf. */
static inline char *sw_sa_str(const union sw_sa *a, char *buf)
{
	if (!sw_sa_is_v6(a)) {
		inet_ntop(AF_INET, &a->v4.sin_addr, buf, SW_ADDR_STRLEN);
		return buf;
	}
	inet_ntop(AF_INET6, &a->v6.sin6_addr, buf, INET6_ADDRSTRLEN);
	if (a->v6.sin6_scope_id) {
		size_t n = strlen(buf);
		char name[IF_NAMESIZE];

		if (if_indextoname(a->v6.sin6_scope_id, name))
			snprintf(buf + n, SW_ADDR_STRLEN - n, "%%%s", name);
		else
			snprintf(buf + n, SW_ADDR_STRLEN - n, "%%%u", a->v6.sin6_scope_id);
	}
	return buf;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * lid.c - the device's identities derived from its address: the LID of
 * the optional InfiniBand link layer and the node GUID.
 *
 * LID (SOFTVERBS_LINK_LAYER=ib). A LID names a port inside one subnet;
 * softverbs has no subnet manager and no lookup service, so a device's
 * LID encodes the low 15 bits of its IPv4 address, plus one so that it is
 * never 0:
 *
 *     LID = 1 + (address & 0x7fff)            0x0001 to 0x8000
 *
 * and a peer's address is found back from its LID by replacing the low 15
 * bits of our own address:
 *
 *     peer = (our address & ~0x7fff) | (LID - 1)
 *
 * So LIDs are unique among the devices of one /17 network (127.0.0.0/17
 * holds every default loopback address), and only peers in our own /17
 * can be reached by LID; a peer elsewhere needs a GRH (is_global, its
 * GID). LIDs 0x8001 to 0xbfff are valid unicast LIDs but name nothing
 * here (EINVAL); 0, the multicast range and the permissive LID are refused
 * as on any fabric.
 *
 * Node GUID: 0x0253 ("locally administered", then 'S'), the UDP port and
 * the IPv4 address, 16 + 16 + 32 bits, so it differs for every device
 * that can exist at the same time and is the same wherever the device is
 * seen. ibv_devinfo shows 127.0.0.1:4791 as 0253:12b7:7f00:0001. For an
 * IPv6 address the low 48 bits are a hash of the address and port.
 *
 * On IPv6 the LID takes the low 15 bits of the address the same way, and
 * the peer's address is ours with those bits replaced.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <string.h>

#include "sw/ctrl.h"

#define LID_HOST_MASK 0x7fffu
#define GUID_PREFIX 0x0253ULL

/* Contract: the low 32 bits of the address `a`, host order (IPv4: all of it). */
static uint32_t addr_low32(const union sw_sa *a)
{
	uint32_t v;

	if (!sw_sa_is_v6(a))
		return ntohl(a->v4.sin_addr.s_addr);
	memcpy(&v, &a->v6.sin6_addr.s6_addr[12], 4);
	return ntohl(v);
}

/* Contract: see sw/ctrl.h. */
uint16_t sw_lid_of(const union sw_sa *addr)
{
	return (uint16_t)(1 + (addr_low32(addr) & LID_HOST_MASK));
}

/* Contract: see sw/ctrl.h. */
int sw_addr_of_lid(const union sw_sa *own, uint16_t lid, union sw_sa *peer)
{
	uint32_t a = (addr_low32(own) & ~LID_HOST_MASK) | (uint32_t)(lid - 1);

	if (lid < 1 || lid > LID_HOST_MASK + 1)
		return -EINVAL;
	*peer = *own;
	if (sw_sa_is_v6(peer)) {
		a = htonl(a);
		memcpy(&peer->v6.sin6_addr.s6_addr[12], &a, 4);
	} else {
		peer->v4.sin_addr.s_addr = htonl(a);
	}
	return 0;
}

/* Contract: see sw/ctrl.h. */
__be64 sw_guid_of(const union sw_sa *addr, uint16_t udp_port)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	if (!sw_sa_is_v6(addr))
		return htobe64(GUID_PREFIX << 48 | (uint64_t)udp_port << 32 | addr_low32(addr));
	/* IPv6: 48 bits of an FNV-1a hash of the address and port */
	for (int i = 0; i < 16; i++)
		h = (h ^ addr->v6.sin6_addr.s6_addr[i]) * 0x100000001b3ULL;
	h = (h ^ (udp_port >> 8)) * 0x100000001b3ULL;
	h = (h ^ (udp_port & 0xff)) * 0x100000001b3ULL;
	return htobe64(GUID_PREFIX << 48 | ((h ^ h >> 48) & 0xffffffffffffULL));
}

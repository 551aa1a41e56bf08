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
 * seen. ibv_devinfo shows 127.0.0.1:4791 as 0253:12b7:7f00:0001.
 */
#include <arpa/inet.h>
#include <endian.h>

#include "sw/sw.h"

#define LID_HOST_MASK 0x7fffu
#define GUID_PREFIX 0x0253ULL

/* Contract: see sw.h. */
uint16_t sw_lid_of(struct in_addr addr)
{
	return (uint16_t)(1 + (ntohl(addr.s_addr) & LID_HOST_MASK));
}

/* Contract: see sw.h. */
int sw_addr_of_lid(struct in_addr own, uint16_t lid, struct in_addr *peer)
{
	uint32_t a = ntohl(own.s_addr);

	if (lid < 1 || lid > LID_HOST_MASK + 1)
		return -EINVAL;
	peer->s_addr = htonl((a & ~LID_HOST_MASK) | (uint32_t)(lid - 1));
	return 0;
}

/* Contract: see sw.h. */
__be64 sw_guid_of(struct in_addr addr, uint16_t udp_port)
{
	return htobe64(GUID_PREFIX << 48 | (uint64_t)udp_port << 32 | ntohl(addr.s_addr));
}

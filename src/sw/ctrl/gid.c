/* SPDX-License-Identifier: MIT */
/*
 * gid.c - the port's GID table, in the layout SOFTVERBS_GID_TABLE asks.
 *
 * Programs written for hardware often hard-code a GID index: perftest's
 * `-x 3` and NCCL_IB_GID_INDEX=3 on mlx5, `-g 1` on the kernel's rxe.
 * Every layout lists only entries that work (a socket is bound to each
 * address listed); the other slots are empty (all-zero GID), as a real
 * device's unused slots are. All entries are RoCE v2.
 *
 *   single (default)  0: the device's address
 *   rxe               0: the IPv6 link-local address of its interface,
 *                     1: the address                  (rxe's order)
 *   mlx5              1: the link-local address, 3: the address; 0 and 2,
 *                     where mlx5 lists the same addresses as RoCE v1,
 *                     stay empty: RoCE v1 is not IP and a UDP device
 *                     cannot carry it.
 *
 * The link-local entry exists only where the address's interface has a
 * link-local address that this device could bind (one device per
 * interface; none on lo). A device whose own address is link-local
 * lists it in the address's slot.
 */
#include <string.h>

#include "sw/ctrl.h"

/* Contract: put the address of socket `sock` into slot `i`. */
static void slot_set(struct sw_port *port, unsigned int i, int sock)
{
	sw_sa_gid(sock ? &port->ll : &port->local, &port->gid[i].gid);
	port->gid[i].sock = sock;
	if (!sock)
		port->addr_slot = i;
}

/* Contract: see sw/ctrl.h. */
void sw_port_lay_out_gids(struct sw_port *port, enum sw_gid_layout layout)
{
	bool ll = port->ll_fd >= 0;

	memset(port->gid, 0, sizeof(port->gid));
	for (unsigned int i = 0; i < SW_GID_TBL_MAX; i++)
		port->gid[i].sock = -1;
	switch (layout) {
	case SW_GIDS_SINGLE:
		port->gid_tbl_len = 1;
		slot_set(port, 0, 0);
		break;
	case SW_GIDS_RXE:
		port->gid_tbl_len = SW_GID_TBL_MAX;
		if (ll)
			slot_set(port, 0, 1);
		slot_set(port, 1, 0);
		break;
	case SW_GIDS_MLX5:
		port->gid_tbl_len = SW_GID_TBL_MAX;
		if (ll)
			slot_set(port, 1, 1);
		slot_set(port, 3, 0);
		break;
	}
}

/* Contract: see sw/ctrl.h. */
const struct sw_gid_slot *sw_port_gid(const struct sw_port *port, unsigned int index)
{
	if (index >= port->gid_tbl_len || port->gid[index].sock < 0)
		return NULL;
	return &port->gid[index];
}

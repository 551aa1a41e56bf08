/* SPDX-License-Identifier: MIT */
/*
 * query.c - what the library reports about each device, through the
 * public verbs only: the device is opened, queried and closed again.
 *
 * Opening the device binds its address, so a device without
 * SOFTVERBS_ADDR takes the first free 127.0.0.N for as long as the
 * query lasts; the GIDs recorded are those of that address.
 */
#include <endian.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

/* Contract: port `p` (1-based) of `ctx` into *port; 0 or -errno. */
static int query_port(struct ibv_context *ctx, uint8_t p, struct run_port *port, char *err,
		      size_t errsz)
{
	int i, ret;

	ret = ibv_query_port(ctx, p, &port->attr);
	if (ret) {
		snprintf(err, errsz, "ibv_query_port(%u): %s", p, strerror(ret));
		return -ret;
	}
	port->ngids = port->attr.gid_tbl_len > 0 ? port->attr.gid_tbl_len : 0;
	port->npkeys = port->attr.pkey_tbl_len > 0 ? port->attr.pkey_tbl_len : 0;
	port->gids = calloc((size_t)port->ngids + 1, sizeof(*port->gids));
	port->pkeys = calloc((size_t)port->npkeys + 1, sizeof(*port->pkeys));
	if (!port->gids || !port->pkeys) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < port->ngids; i++) {
		struct ibv_gid_entry e;
		struct run_gid *g = &port->gids[i];

		memset(&e, 0, sizeof(e));
		ret = ibv_query_gid_ex(ctx, p, (uint32_t)i, &e, 0);
		if (ret == ENODATA || ret == EINVAL)
			continue; /* an empty entry: the kernel shows zeros */
		if (ret) {
			snprintf(err, errsz, "ibv_query_gid_ex(%u, %d): %s", p, i, strerror(ret));
			return -ret;
		}
		g->valid = true;
		g->gid = e.gid;
		g->type = e.gid_type;
		if (e.ndev_ifindex && !if_indextoname(e.ndev_ifindex, g->ndev))
			g->ndev[0] = '\0';
	}
	for (i = 0; i < port->npkeys; i++) {
		__be16 pk;

		ret = ibv_query_pkey(ctx, p, i, &pk);
		if (ret) {
			snprintf(err, errsz, "ibv_query_pkey(%u, %d): %s", p, i, strerror(ret));
			return -ret;
		}
		port->pkeys[i] = be16toh(pk);
	}
	return 0;
}

/* Contract: open `ibv` and fill *dev from its queries; 0 or -errno. */
static int query_dev(struct ibv_device *ibv, struct run_dev *dev, char *err, size_t errsz)
{
	struct ibv_context *ctx;
	int p, ret;

	snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(ibv));
	snprintf(dev->dev_name, sizeof(dev->dev_name), "%s", ibv->dev_name);
	snprintf(dev->ibdev_path, sizeof(dev->ibdev_path), "%s", ibv->ibdev_path);
	snprintf(dev->dev_path, sizeof(dev->dev_path), "%s", ibv->dev_path);
	dev->node_type = ibv->node_type;
	ctx = ibv_open_device(ibv);
	if (!ctx) {
		ret = errno ? errno : EIO;
		snprintf(err, errsz, "cannot open %s: %s", dev->name, strerror(ret));
		return -ret;
	}
	ret = ibv_query_device(ctx, &dev->attr);
	if (ret) {
		snprintf(err, errsz, "ibv_query_device(%s): %s", dev->name, strerror(ret));
		ibv_close_device(ctx);
		return -ret;
	}
	dev->nports = dev->attr.phys_port_cnt;
	if (dev->nports > RUN_MAX_PORTS)
		dev->nports = RUN_MAX_PORTS;
	for (p = 0; p < dev->nports; p++) {
		ret = query_port(ctx, (uint8_t)(p + 1), &dev->ports[p], err, errsz);
		if (ret) {
			ibv_close_device(ctx);
			return ret;
		}
	}
	ibv_close_device(ctx);
	return run_locality(dev, err, errsz);
}

/* Contract: see run.h. */
int run_query(struct run_dev **devs, int *ndevs, char *err, size_t errsz)
{
	struct ibv_device **list;
	struct run_dev *arr;
	int n, i, ret = 0;

	*devs = NULL;
	*ndevs = 0;
	list = ibv_get_device_list(&n);
	if (!list) {
		ret = errno ? errno : EIO;
		snprintf(err, errsz, "ibv_get_device_list: %s", strerror(ret));
		return -ret;
	}
	arr = calloc((size_t)n + 1, sizeof(*arr));
	if (!arr) {
		ibv_free_device_list(list);
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < n && !ret; i++)
		ret = query_dev(list[i], &arr[i], err, errsz);
	ibv_free_device_list(list);
	if (ret) {
		run_free(arr, n);
		return ret;
	}
	*devs = arr;
	*ndevs = n;
	return 0;
}

/* Contract: see run.h. */
void run_free(struct run_dev *devs, int ndevs)
{
	int i, p;

	if (!devs)
		return;
	for (i = 0; i < ndevs; i++) {
		for (p = 0; p < RUN_MAX_PORTS; p++) {
			free(devs[i].ports[p].gids);
			free(devs[i].ports[p].pkeys);
		}
	}
	free(devs);
}

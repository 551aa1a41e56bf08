/* SPDX-License-Identifier: MIT */
/*
 * device_list.c - the device list and per-device accessors.
 *
 * Each ibv_get_device_list() call asks the drivers again, so a changed
 * configuration shows up as a new device, as a hot-plugged HCA would. A
 * device lives while a list or a context refers to it.
 */
#include <stdlib.h>

#include "core/core.h"

/* Contract: take a reference on `dev`. */
void sv_device_get(struct sv_device *dev)
{
	atomic_fetch_add(&dev->refcnt, 1);
}

/* Contract: drop a reference; the last one releases the device. */
void sv_device_put(struct sv_device *dev)
{
	if (atomic_fetch_sub(&dev->refcnt, 1) == 1)
		dev->release(dev);
}

static struct sv_device *sv_dev(struct ibv_device *ibdev)
{
	return sv_container_of(ibdev, struct sv_device, ibv);
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct sv_device **devs = NULL;
	struct ibv_device **list;
	int n = 0, ret, i;

	ret = sv_sw_probe(&devs, &n);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	list = calloc((size_t)n + 1, sizeof(*list));
	if (!list) {
		for (i = 0; i < n; i++)
			sv_device_put(devs[i]);
		free(devs);
		errno = ENOMEM;
		return NULL;
	}
	for (i = 0; i < n; i++)
		list[i] = &devs[i]->ibv; /* the probe's reference moves to the list */
	free(devs);
	if (num_devices)
		*num_devices = n;
	return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	struct ibv_device **p;

	if (!list)
		return;
	for (p = list; *p; p++)
		sv_device_put(sv_dev(*p));
	free(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	/* a device sets its GUID when its address is bound (first open) */
	return __atomic_load_n(&sv_dev(device)->guid, __ATOMIC_RELAXED);
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return (int)sv_dev(device)->index;
}

/* SPDX-License-Identifier: MIT */
/*
 * unload.c - the software device when the library goes away.
 *
 * A program may dlclose() libibverbs.so.1, or exit, with contexts still
 * open (libfabric's verbs provider under Open MPI does the first). The
 * device's threads, the progress thread of every device with an open
 * context and the placement workers of DMA handles, run library code:
 * after dlclose() they would run in unmapped memory. sv_sw_unload(),
 * called by the library's destructor (core/unload.c) in both cases, ends
 * each of them and waits for it, and prints the SOFTVERBS_STATS device
 * totals of devices that were never closed.
 *
 * Nothing is freed or closed: at exit the program's other threads may
 * still be inside a verb, using the device's sockets, rings and memory,
 * and freeing under them would crash an exit that is otherwise clean.
 * Without a progress thread nothing more arrives; posting still works
 * (the requester runs in the caller's thread). After dlclose() the
 * objects the program left open stay allocated, with their descriptors,
 * until the process exits, as rdma-core's providers leave theirs.
 *
 * Devices of another process (this one is a fork child that inherited
 * them) have no threads here and are skipped.
 */
#include <unistd.h>

#include "sw/mem/place.h"
#include "sw/ctrl.h"
#include "sw/transport.h"

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_dev *live; /* guarded by live_lock */

/* Contract: see sw/ctrl.h. */
void sw_live_add(struct sw_dev *dev)
{
	pthread_mutex_lock(&live_lock);
	dev->next_live = live;
	dev->pprev_live = &live;
	if (live)
		live->pprev_live = &dev->next_live;
	live = dev;
	pthread_mutex_unlock(&live_lock);
}

/* Contract: see sw/ctrl.h. */
void sw_live_remove(struct sw_dev *dev)
{
	pthread_mutex_lock(&live_lock);
	*dev->pprev_live = dev->next_live;
	if (dev->next_live)
		dev->next_live->pprev_live = dev->pprev_live;
	pthread_mutex_unlock(&live_lock);
}

/* Contract: see core.h. Lock order: live_lock, then each dev->lock. */
void sv_sw_unload(void)
{
	pid_t self = getpid();
	struct sw_dev *dev;

	pthread_mutex_lock(&live_lock);
	for (dev = live; dev; dev = dev->next_live) {
		if (dev->pid != self)
			continue;
		pthread_mutex_lock(&dev->lock);
		if (dev->nctx > 0)
			sw_engine_quiesce(dev);
		pthread_mutex_unlock(&dev->lock);
	}
	pthread_mutex_unlock(&live_lock);
	sw_place_quiesce();
}

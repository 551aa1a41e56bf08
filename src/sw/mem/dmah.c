/* SPDX-License-Identifier: MIT */
/*
 * dmah.c - DMA handles: PCIe TPH hints for memory regions.
 *
 * Validation runs in the order the mlx5 provider and the kernel apply it
 * on real hardware, so every errno matches:
 *   provider: 1. comp_mask bits outside CPU_ID|PH|TPH_MEM_TYPE  EOPNOTSUPP
 *             2. PH missing                                     EINVAL
 *             3. exactly one of CPU_ID and TPH_MEM_TYPE         EINVAL
 *             4. allocation                                     ENOMEM
 *   kernel:   5. memory type >= 2 (attribute parsing)           EOPNOTSUPP
 *             6. cpu_id >= number of possible CPUs              EINVAL
 *             7. cpu_id outside the caller's affinity mask      EPERM
 *             8. ph > 3                                         EINVAL
 * Steering tags need no table here. A handle with a CPU id starts (or
 * shares) a placement worker pinned to that CPU (mem/place.c).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sw/ctrl.h"
#include "sw/mem.h"

#define DMAH_KNOWN_MASK                                                                            \
	(IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |                             \
	 IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE)

/* Possible CPUs, as the kernel's nr_cpu_ids: highest id in "possible" + 1. */
static unsigned int possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "re");
	unsigned int lo, hi, n = 0;
	int c;

	if (f) {
		while (fscanf(f, "%u", &lo) == 1) {
			hi = lo;
			c = fgetc(f);
			if (c == '-' && fscanf(f, "%u", &hi) == 1)
				c = fgetc(f);
			if (hi + 1 > n)
				n = hi + 1;
			if (c != ',')
				break;
		}
		fclose(f);
	}
	if (!n) {
		long conf = sysconf(_SC_NPROCESSORS_CONF);

		n = conf > 0 ? (unsigned int)conf : 1;
	}
	return n;
}

/* 0 if the calling thread may run on `cpu`, else -EPERM (or -errno). */
static int cpu_allowed(uint32_t cpu)
{
	cpu_set_t *set;
	size_t size;
	int ncpus = 1024, ret;

	for (;;) {
		set = CPU_ALLOC((size_t)ncpus);
		if (!set)
			return -ENOMEM;
		size = CPU_ALLOC_SIZE((size_t)ncpus);
		CPU_ZERO_S(size, set);
		if (!sched_getaffinity(0, size, set))
			break;
		ret = errno;
		CPU_FREE(set);
		if (ret != EINVAL || ncpus >= (1 << 20))
			return -ret;
		ncpus *= 2;
	}
	ret = (cpu < (uint32_t)ncpus && CPU_ISSET_S(cpu, size, set)) ? 0 : -EPERM;
	CPU_FREE(set);
	return ret;
}

/* Contract: see sw/mem.h; the order of checks is the one above. */
int sw_alloc_dmah(struct ibv_context *ctx, struct ibv_dmah_init_attr *attr, struct ibv_dmah **out)
{
	struct sw_dev *dev = sw_dev_of(ctx);
	bool has_cpu = attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_CPU_ID;
	bool has_mem = attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	struct sw_dmah *d;
	int ret;

	if (attr->comp_mask & ~(uint32_t)DMAH_KNOWN_MASK)
		return -EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_DMAH_INIT_ATTR_MASK_PH))
		return -EINVAL;
	if (has_cpu != has_mem)
		return -EINVAL;
	d = sw_limit_calloc(&dev->ndmah, SW_MAX_DMAH, sizeof(*d));
	if (!d)
		return -ENOMEM;
	ret = -EOPNOTSUPP;
	if (has_mem && attr->tph_mem_type >= 2)
		goto err;
	if (has_cpu) {
		ret = -EINVAL;
		if (attr->cpu_id >= possible_cpus())
			goto err;
		ret = cpu_allowed(attr->cpu_id);
		if (ret)
			goto err;
	}
	ret = -EINVAL;
	if (attr->ph & 0xFC)
		goto err;

	if (has_cpu) {
		ret = sw_place_worker_get(attr->cpu_id);
		if (ret)
			goto err;
	}
	d->ibv.context = ctx;
	d->hint.has_cpu = has_cpu;
	d->hint.cpu_id = attr->cpu_id;
	d->hint.ph = attr->ph;
	d->hint.mem_type = has_mem ? attr->tph_mem_type : IBV_TPH_MEM_TYPE_VM;
	atomic_init(&d->usecnt, 0);
	*out = &d->ibv;
	return 0;
err:
	free(d);
	atomic_fetch_sub(&dev->ndmah, 1);
	return ret;
}

/* Contract: -EBUSY (handle still valid) while an MR uses it, else free. */
int sw_dealloc_dmah(struct ibv_dmah *ibdmah)
{
	struct sw_dmah *d = sw_dmah(ibdmah);

	if (atomic_load(&d->usecnt))
		return -EBUSY;
	if (d->hint.has_cpu)
		sw_place_worker_put(d->hint.cpu_id);
	atomic_fetch_sub(&sw_dev_of(ibdmah->context)->ndmah, 1);
	free(d);
	return 0;
}

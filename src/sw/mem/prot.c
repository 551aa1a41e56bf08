/* SPDX-License-Identifier: MIT */
/*
 * prot.c - is a span of this process's memory mapped, readable and (for
 * writable access) writable, as the kernel's page pinning would demand
 * of a registration?
 *
 * Three ways, fastest first: the PROCMAP_QUERY ioctl on /proc/self/maps
 * (Linux 6.11 and later: one query per mapping the span crosses), the
 * text of /proc/self/maps (any Linux with procfs), and without procfs
 * mincore(2), which can only tell mapped from unmapped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sw/ctrl.h"
#include "sw/mem.h"

/* The PROCMAP_QUERY ABI (linux/fs.h, 6.11); older headers lack it. */
struct sw_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start, vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor;
	uint32_t vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};

enum {
	SW_PROCMAP_READABLE = 0x01,
	SW_PROCMAP_WRITABLE = 0x02,
};

#define SW_PROCMAP_QUERY _IOWR('f', 17, struct sw_procmap_query)

/* Set once the kernel has refused the ioctl: the text is read from then on. */
static atomic_bool no_query;

/*
 * The mappings covering [pos, end) through PROCMAP_QUERY on the maps
 * file `fd`: 0, -EFAULT (a hole, or a mapping without the protection),
 * -ENOTTY when the kernel has no such ioctl, or -EAGAIN when it failed
 * otherwise (the caller reads the text instead, this time).
 */
static int prot_query(int fd, uintptr_t pos, uintptr_t end, bool write)
{
	while (pos < end) {
		struct sw_procmap_query q = {.size = sizeof(q), .query_addr = pos};

		if (ioctl(fd, SW_PROCMAP_QUERY, &q)) {
			if (errno == ENOENT)
				return -EFAULT; /* nothing covers pos */
			if (errno == ENOTTY || errno == EINVAL || errno == EOPNOTSUPP)
				return -ENOTTY;
			return -EAGAIN;
		}
		if (q.vma_start > pos || q.vma_end <= pos || !(q.vma_flags & SW_PROCMAP_READABLE) ||
		    (write && !(q.vma_flags & SW_PROCMAP_WRITABLE)))
			return -EFAULT;
		pos = (uintptr_t)q.vma_end;
	}
	return 0;
}

/*
 * The same from the text of the maps file `fd` (sorted by address, one
 * line per mapping, so a huge span costs no more than a small one).
 * Takes ownership of fd.
 */
static int prot_text(int fd, uintptr_t pos, uintptr_t end, bool write)
{
	FILE *f = fdopen(fd, "r");
	bool line_start = true;
	char line[256];

	if (!f) {
		close(fd);
		return -ENOSYS;
	}
	while (pos < end && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[5];
		bool at_start = line_start;

		line_start = strchr(line, '\n') != NULL; /* long path: the rest follows */
		if (!at_start || sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= pos)
			continue;
		if (lo > pos || perms[0] != 'r' || (write && perms[1] != 'w'))
			break;
		pos = hi;
	}
	fclose(f);
	return pos < end ? -EFAULT : 0;
}

/* Without procfs: mapped is all that can be told, page by page. */
static int prot_mincore(uintptr_t pos, uintptr_t end, uintptr_t page)
{
	unsigned char vec[1024];

	while (pos < end) {
		uintptr_t n = (end - pos) / page;

		if (n > sizeof(vec))
			n = sizeof(vec);
		if (mincore((void *)pos, n * page, vec))
			return errno == ENOMEM ? -EFAULT : -errno;
		pos += n * page;
	}
	return 0;
}

/*
 * Contract: see sw/mem.h. The page-rounded span of [addr, +len) (which the
 * caller has checked does not wrap): 0, -EFAULT (a hole or a page
 * without the protection), or mincore's errno.
 */
int sw_mem_check_mapped(uintptr_t addr, uint64_t len, bool write)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t pos = addr & ~(page - 1);
	uintptr_t end = (addr + len + page - 1) & ~(page - 1);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), ret;

	if (fd < 0)
		return prot_mincore(pos, end, page);
	if (!atomic_load_explicit(&no_query, memory_order_relaxed)) {
		ret = prot_query(fd, pos, end, write);
		if (ret != -ENOTTY && ret != -EAGAIN) {
			close(fd);
			return ret;
		}
		if (ret == -ENOTTY)
			atomic_store_explicit(&no_query, true, memory_order_relaxed);
	}
	ret = prot_text(fd, pos, end, write);
	return ret == -ENOSYS ? prot_mincore(pos, end, page) : ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * unit_prot: sw_mem_check_mapped(), the check behind every address-path
 * registration that the pages are mapped, readable and (for writable
 * access) writable: plain memory, read-only, PROT_NONE, holes, spans
 * over several mappings, a span far past any mapping. Run twice: with
 * the kernel's PROCMAP_QUERY ioctl where it exists, then with ioctl()
 * made to fail with ENOTTY, as on kernels before 6.11, so that the
 * /proc/self/maps text path gives the same answers.
 */
#include "harness.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sw/ctrl.h"

/* test: wrap=ioctl */

int __real_ioctl(int fd, unsigned long req, void *arg);
int __wrap_ioctl(int fd, unsigned long req, void *arg);

static bool fake_old_kernel;
static unsigned long ioctls; /* PROCMAP_QUERY calls that reached the kernel */

int __wrap_ioctl(int fd, unsigned long req, void *arg)
{
	if ((req & 0xffff) == (('f' << 8) | 17)) { /* PROCMAP_QUERY, any size */
		if (fake_old_kernel) {
			errno = ENOTTY;
			return -1;
		}
		ioctls++;
	}
	return __real_ioctl(fd, req, arg);
}

static void cases(const char *how)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, 6 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uintptr_t a = (uintptr_t)m;

	t_case(how);
	if (!CHECK(m != MAP_FAILED))
		return;
	/* pages: 0-1 rw, 2 ro, 3 none, 4 hole, 5 rw (its own mapping: prot differs from 4's) */
	CHECK(mprotect(m + 2 * pg, pg, PROT_READ) == 0);
	CHECK(mprotect(m + 3 * pg, pg, PROT_NONE) == 0);
	CHECK(munmap(m + 4 * pg, pg) == 0);

	CHECK_EQ_INT(sw_mem_check_mapped(a, 2 * pg, true), 0);
	CHECK_EQ_INT(sw_mem_check_mapped(a + 1, 1, true), 0);
	CHECK_EQ_INT(sw_mem_check_mapped(a + 100, 2 * pg - 200, false), 0);
	/* read-only: fine to read, not to write */
	CHECK_EQ_INT(sw_mem_check_mapped(a + 2 * pg, pg, false), 0);
	CHECK_EQ_INT(sw_mem_check_mapped(a + 2 * pg, pg, true), -EFAULT);
	/* rw then ro: two mappings, readable throughout, not writable */
	CHECK_EQ_INT(sw_mem_check_mapped(a, 3 * pg, false), 0);
	CHECK_EQ_INT(sw_mem_check_mapped(a + pg, 2 * pg, true), -EFAULT);
	/* PROT_NONE, alone or at the end of a good span */
	CHECK_EQ_INT(sw_mem_check_mapped(a + 3 * pg, 1, false), -EFAULT);
	CHECK_EQ_INT(sw_mem_check_mapped(a, 4 * pg, false), -EFAULT);
	/* the hole, and spans across it */
	CHECK_EQ_INT(sw_mem_check_mapped(a + 4 * pg, pg, false), -EFAULT);
	CHECK_EQ_INT(sw_mem_check_mapped(a + 5 * pg, pg, true), 0);
	CHECK_EQ_INT(sw_mem_check_mapped(a + 3 * pg + 1, 2 * pg, false), -EFAULT);
	/* a span that starts on good memory and runs 1 TiB past it */
	CHECK_EQ_INT(sw_mem_check_mapped(a + 5 * pg, 1ull << 40, false), -EFAULT);
	/* this program's own code: readable, not writable */
	CHECK_EQ_INT(sw_mem_check_mapped((uintptr_t)&cases, 64, false), 0);
	CHECK_EQ_INT(sw_mem_check_mapped((uintptr_t)&cases, 64, true), -EFAULT);
	munmap(m, 4 * pg);
	munmap(m + 5 * pg, pg);
}

int main(void)
{
	t_start("unit_prot");
	cases("with PROCMAP_QUERY where the kernel has it");
	printf("# PROCMAP_QUERY calls: %lu (0: the kernel lacks it, the text was read)\n", ioctls);
	fake_old_kernel = true;
	cases("ioctl fails with ENOTTY: the text of /proc/self/maps");
	return t_finish();
}

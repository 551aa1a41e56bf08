/* SPDX-License-Identifier: MIT */
/*
 * topo.c - the locality a software device reports: device/numa_node,
 * device/local_cpus and device/local_cpulist.
 *
 * A software device does its work on its progress thread. Pinned
 * (SOFTVERBS_PROGRESS_CPU=N), it sits on CPU N's node; otherwise it sits
 * on the machine's only node when there is one node, and nowhere (-1,
 * like a device without NUMA affinity) on a machine of several nodes.
 * local_cpus lists the CPUs of that node, or every online CPU for -1,
 * in the kernel's bitmap format: 32-bit hex words separated by commas,
 * the most significant first, as wide as the possible CPUs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

#define SYS_NODE "/sys/devices/system/node"
#define SYS_CPU "/sys/devices/system/cpu"
#define MAX_CPUS 8192

/* Contract: the first line of `path` into buf (newline dropped); 0 or -errno. */
static int read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (!fgets(buf, (int)size, f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/*
 * Contract: set the bits of a CPU list ("0-3,8") in `bits` (MAX_CPUS
 * wide); the highest CPU named plus one in *top; 0 or -EINVAL.
 */
static int parse_list(const char *s, unsigned char *bits, int *top)
{
	*top = 0;
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s || a < 0 || a >= MAX_CPUS)
			return -EINVAL;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a || b >= MAX_CPUS)
				return -EINVAL;
		}
		for (; a <= b; a++)
			bits[a / 8] |= (unsigned char)(1u << (a % 8));
		if (b + 1 > *top)
			*top = (int)b + 1;
		s = end;
		if (*s == ',')
			s++;
		else if (*s)
			return -EINVAL;
	}
	return 0;
}

/* Contract: `bits` of `width` CPUs in the kernel's bitmap format into out. */
static void format_mask(const unsigned char *bits, int width, char *out, size_t size)
{
	int word, nwords = (width + 31) / 32;
	size_t len = 0;

	out[0] = '\0';
	for (word = nwords - 1; word >= 0 && len < size; word--) {
		unsigned int v = 0;
		int b, digits = 8;

		for (b = 0; b < 32; b++) {
			int cpu = word * 32 + b;

			if (cpu < width && (bits[cpu / 8] >> (cpu % 8)) & 1)
				v |= 1u << b;
		}
		if (word == nwords - 1 && width % 32)
			digits = (width % 32 + 3) / 4;
		len += (size_t)snprintf(out + len, size - len, "%s%0*x",
					word == nwords - 1 ? "" : ",", digits, v);
	}
}

/* Contract: the node of CPU `cpu` (its cpuN/nodeM entry), or -1. */
static int cpu_node(long cpu)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int node = -1;

	snprintf(path, sizeof(path), SYS_CPU "/cpu%ld", cpu);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "node", 4) && e->d_name[4] >= '0' && e->d_name[4] <= '9')
			node = atoi(e->d_name + 4);
	closedir(d);
	return node;
}

/* Contract: the only node of the machine, or -1 with none or several. */
static int only_node(void)
{
	char buf[64];
	unsigned char bits[MAX_CPUS / 8] = {0};
	int top, i, node = -1, count = 0;

	if (read_line(SYS_NODE "/online", buf, sizeof(buf)) || parse_list(buf, bits, &top))
		return -1;
	for (i = 0; i < top; i++) {
		if ((bits[i / 8] >> (i % 8)) & 1) {
			node = i;
			count++;
		}
	}
	return count == 1 ? node : -1;
}

/* Contract: see run.h. */
int run_locality(struct run_dev *dev, char *err, size_t errsz)
{
	unsigned char bits[MAX_CPUS / 8] = {0};
	const char *pin = getenv("SOFTVERBS_PROGRESS_CPU");
	char path[128], list[RUN_CPUMAP_MAX], possible[64];
	int width, top, ret;

	dev->numa_node = pin && *pin ? cpu_node(strtol(pin, NULL, 10)) : only_node();
	if (dev->numa_node >= 0)
		snprintf(path, sizeof(path), SYS_NODE "/node%d/cpulist", dev->numa_node);
	else
		snprintf(path, sizeof(path), SYS_CPU "/online");
	ret = read_line(path, list, sizeof(list));
	if (!ret)
		ret = parse_list(list, bits, &top);
	if (!ret)
		ret = read_line(SYS_CPU "/possible", possible, sizeof(possible));
	if (!ret) {
		unsigned char all[MAX_CPUS / 8] = {0};

		ret = parse_list(possible, all, &width);
	}
	if (ret) {
		snprintf(err, errsz, "cannot read the CPUs of the device's node (%s): %s", path,
			 strerror(-ret));
		return ret;
	}
	if (top > width)
		width = top;
	snprintf(dev->local_cpulist, sizeof(dev->local_cpulist), "%s", list);
	format_mask(bits, width, dev->local_cpus, sizeof(dev->local_cpus));
	return 0;
}

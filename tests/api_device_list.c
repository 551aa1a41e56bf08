/* SPDX-License-Identifier: MIT */
/*
 * api_device_list: ibv_get_device_list and the per-device accessors.
 *
 * The software device is listed once, as a CA with the IB transport,
 * under its configured name, with a nonzero GUID that is the same in every
 * list, but differs in another process and for another device name; with
 * SOFTVERBS_ADDR it is the GUID of that address and port (0253:port:addr)
 * in every process, and an opened device reports the GUID of the address
 * it bound (docs/compatibility.md, "Device and environment"). The
 * index and the device object are stable while the configuration is; a
 * changed configuration gives a new device while the old one stays valid
 * for the lists that hold it.
 */
#include "harness.h"

#include <endian.h>
#include <inttypes.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs this program again with "--print-guid" and reads the GUID it prints. */
static int guid_from_other_process(const char *self, uint64_t *guid)
{
	int fds[2], status;
	char buf[64] = "";
	ssize_t n;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		close(fds[0]);
		close(fds[1]);
		execl(self, self, "--print-guid", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	if (n <= 0 || sscanf(buf, "%" SCNx64, guid) != 1)
		return -1;
	return 0;
}

/* Child mode: print the first device's GUID (host order, hex) and exit. */
static int print_guid(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list || !list[0])
		return 1;
	printf("%" PRIx64 "\n", be64toh(ibv_get_device_guid(list[0])));
	ibv_free_device_list(list);
	return 0;
}

static void case_list(void)
{
	struct ibv_device **list;
	struct ibv_device *d;
	char want[300];
	int n = -1;

	t_case("list");
	errno = 0;
	list = ibv_get_device_list(&n);
	if (!CHECK(list != NULL))
		return;
	CHECK_EQ_INT(n, 1);
	CHECK(list[0] != NULL);
	CHECK(list[1] == NULL);
	d = list[0];
	if (d) {
		CHECK(!strcmp(ibv_get_device_name(d), "softverbs0"));
		CHECK(ibv_get_device_name(d) == d->name);
		CHECK_EQ_INT(d->node_type, IBV_NODE_CA);
		CHECK_EQ_INT(d->transport_type, IBV_TRANSPORT_IB);
		CHECK(!strncmp(d->dev_name, "uverbs", 6));
		/* under ibv_get_sysfs_path(), "/sys" here (run_test.sh sets no SYSFS_PATH) */
		snprintf(want, sizeof(want), "/sys/class/infiniband/%s", d->name);
		CHECK(!strcmp(d->ibdev_path, want));
		snprintf(want, sizeof(want), "/sys/class/infiniband_verbs/%s", d->dev_name);
		CHECK(!strcmp(d->dev_path, want));
		CHECK(ibv_get_device_guid(d) != 0);
		CHECK(ibv_get_device_index(d) >= 0);
	}
	ibv_free_device_list(list);

	/* the count pointer is optional; freeing NULL is a no-op */
	list = ibv_get_device_list(NULL);
	CHECK(list != NULL && list[0] != NULL);
	ibv_free_device_list(list);
	ibv_free_device_list(NULL);
}

static void case_stable(const char *self)
{
	struct ibv_device **a, **b;
	uint64_t other;

	t_case("stable identity");
	a = ibv_get_device_list(NULL);
	b = ibv_get_device_list(NULL);
	if (!CHECK(a && b && a[0] && b[0]))
		goto out;
	/* unchanged configuration: the same device, hence the same identity */
	CHECK(a[0] == b[0]);
	CHECK(ibv_get_device_guid(a[0]) == ibv_get_device_guid(b[0]));
	CHECK_EQ_INT(ibv_get_device_index(a[0]), ibv_get_device_index(b[0]));
	/* another process has another device instance, with another GUID */
	if (CHECK(guid_from_other_process(self, &other) == 0))
		CHECK(htobe64(other) != ibv_get_device_guid(a[0]));
out:
	ibv_free_device_list(a);
	ibv_free_device_list(b);
}

static void case_reconfigure(void)
{
	struct ibv_device **old, **renamed, **back;
	__be64 guid0;

	t_case("reconfigured device");
	old = ibv_get_device_list(NULL);
	if (!CHECK(old && old[0]))
		return;
	guid0 = ibv_get_device_guid(old[0]);

	setenv("SOFTVERBS_DEV_NAME", "sv_other-1", 1);
	renamed = ibv_get_device_list(NULL);
	unsetenv("SOFTVERBS_DEV_NAME");
	if (CHECK(renamed && renamed[0] && !renamed[1])) {
		CHECK(!strcmp(ibv_get_device_name(renamed[0]), "sv_other-1"));
		CHECK(renamed[0] != old[0]);
		/* the GUID depends on the name */
		CHECK(ibv_get_device_guid(renamed[0]) != 0);
		CHECK(ibv_get_device_guid(renamed[0]) != guid0);
		CHECK(ibv_get_device_index(renamed[0]) != ibv_get_device_index(old[0]));
	}
	/* the old device is still intact for the list that holds it */
	CHECK(!strcmp(ibv_get_device_name(old[0]), "softverbs0"));
	CHECK(ibv_get_device_guid(old[0]) == guid0);

	back = ibv_get_device_list(NULL);
	if (CHECK(back && back[0])) {
		CHECK(!strcmp(ibv_get_device_name(back[0]), "softverbs0"));
		CHECK(ibv_get_device_guid(back[0]) == guid0);
	}
	ibv_free_device_list(back);
	ibv_free_device_list(renamed);
	ibv_free_device_list(old);
}

/* The GUID of a device at 127.0.0.N:4791, host order. */
static uint64_t addr_guid(unsigned int n)
{
	return 0x0253ULL << 48 | 4791ULL << 32 | 0x7f000000ULL | n;
}

static void case_addr_guid(const char *self)
{
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	union ibv_gid gid;
	uint64_t other;

	t_case("the GUID of the address: configured, and bound at open");
	setenv("SOFTVERBS_ADDR", "127.0.0.77", 1);
	list = ibv_get_device_list(NULL);
	if (CHECK(list && list[0]))
		CHECK_EQ_INT(be64toh(ibv_get_device_guid(list[0])), addr_guid(77));
	if (CHECK(guid_from_other_process(self, &other) == 0))
		CHECK_EQ_INT(other, addr_guid(77));
	ibv_free_device_list(list);
	unsetenv("SOFTVERBS_ADDR");

	list = ibv_get_device_list(NULL);
	ctx = list && list[0] ? ibv_open_device(list[0]) : NULL;
	if (CHECK(ctx) && CHECK_RET(ibv_query_gid(ctx, 1, 0, &gid), 0) &&
	    CHECK_RET(ibv_query_device(ctx, &da), 0)) {
		uint64_t ip = (uint64_t)gid.raw[12] << 24 | (uint64_t)gid.raw[13] << 16 |
			      (uint64_t)gid.raw[14] << 8 | gid.raw[15];

		CHECK_EQ_INT(be64toh(da.node_guid), (addr_guid(0) & ~0xffffffffULL) | ip);
		CHECK(da.node_guid == ibv_get_device_guid(list[0]));
		CHECK(da.sys_image_guid == da.node_guid);
	}
	if (ctx)
		CHECK_RET(ibv_close_device(ctx), 0);
	ibv_free_device_list(list);
}

int main(int argc, char **argv)
{
	unsetenv("SOFTVERBS_DEV_NAME");
	if (argc > 1 && !strcmp(argv[1], "--print-guid"))
		return print_guid();

	t_start("api_device_list");
	case_list();
	case_stable(argv[0]);
	case_reconfigure();
	case_addr_guid(argv[0]);
	return t_finish();
}

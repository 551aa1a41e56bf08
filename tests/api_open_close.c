/* SPDX-License-Identifier: MIT */
/*
 * api_open_close: ibv_open_device / ibv_close_device.
 *
 * Opening and closing many times leaks no descriptor (the harness counts
 * them at the end, and each round is checked too); contexts open at the
 * same time share the device's port and so its GID; a context outlives
 * the device list it was opened from.
 */
#include "harness.h"

static struct ibv_device **get_list(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list || !list[0]) {
		printf("Bail out! no device (errno %s)\n", t_errname(errno));
		exit(1);
	}
	return list;
}

static void case_many(struct ibv_device *dev)
{
	int fds = t_count_fds(), i, bad = 0;

	t_case("open and close 200 times");
	for (i = 0; i < 200; i++) {
		struct ibv_context *ctx = ibv_open_device(dev);

		if (!ctx) {
			bad++;
			continue;
		}
		if (ctx->device != dev || ctx->async_fd < 0)
			bad++;
		if (ibv_close_device(ctx))
			bad++;
		if (t_count_fds() != fds)
			bad++;
	}
	CHECK_MSG(bad == 0, "%d of 200 rounds failed or leaked", bad);
	CHECK_EQ_INT(t_count_fds(), fds);
}

static void case_shared_gid(struct ibv_device *dev)
{
	struct ibv_context *a, *b, *c;
	union ibv_gid ga, gb, gc;

	t_case("contexts share the GID");
	a = ibv_open_device(dev);
	b = ibv_open_device(dev);
	if (!CHECK(a && b))
		goto out;
	CHECK(a != b);
	CHECK(a->async_fd != b->async_fd);
	if (CHECK(ibv_query_gid(a, 1, 0, &ga) == 0 && ibv_query_gid(b, 1, 0, &gb) == 0))
		CHECK(!memcmp(&ga, &gb, sizeof(ga)));
	/* the port survives the first close while another context uses it */
	CHECK_RET(ibv_close_device(b), 0);
	b = NULL;
	c = ibv_open_device(dev);
	if (CHECK(c != NULL)) {
		if (CHECK(ibv_query_gid(c, 1, 0, &gc) == 0))
			CHECK(!memcmp(&ga, &gc, sizeof(ga)));
		ibv_close_device(c);
	}
	if (CHECK(ibv_query_gid(a, 1, 0, &gb) == 0))
		CHECK(!memcmp(&ga, &gb, sizeof(ga)));
out:
	if (a)
		ibv_close_device(a);
	if (b)
		ibv_close_device(b);
}

static void case_outlives_list(void)
{
	struct ibv_device **list = get_list();
	struct ibv_context *ctx = ibv_open_device(list[0]);
	struct ibv_device_attr attr;

	t_case("context outlives its list");
	ibv_free_device_list(list);
	if (!CHECK(ctx != NULL))
		return;
	CHECK_RET(ibv_query_device(ctx, &attr), 0);
	CHECK(!strcmp(ibv_get_device_name(ctx->device), "softverbs0"));
	CHECK_RET(ibv_close_device(ctx), 0);
}

int main(void)
{
	struct ibv_device **list;

	unsetenv("SOFTVERBS_DEV_NAME");
	unsetenv("SOFTVERBS_ADDR");
	t_start("api_open_close");
	list = get_list();
	case_many(list[0]);
	case_shared_gid(list[0]);
	ibv_free_device_list(list);
	case_outlives_list();
	return t_finish();
}

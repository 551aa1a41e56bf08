/* SPDX-License-Identifier: MIT */
/* Smoke test: the library lists at least one device. */
#include "harness.h"

int main(void)
{
	struct ibv_device **list;
	int n = -1;

	t_start("api_smoke");
	list = ibv_get_device_list(&n);
	if (CHECK(list != NULL)) {
		CHECK_MSG(n >= 1, "ibv_get_device_list: n=%d, want >= 1", n);
		CHECK(n < 0 || list[n] == NULL);
		ibv_free_device_list(list);
	}
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/*
 * api_fork_env: RDMAV_FORK_SAFE and IBV_FORK_SAFE turn fork protection
 * on without ibv_fork_init(), as in rdma-core: with either set,
 * ibv_is_fork_initialized() reports IBV_FORK_ENABLED; with neither (and
 * no ibv_fork_init() call) it reports IBV_FORK_UNNEEDED, since the
 * software device never pins memory. The variables are read at each call.
 */
#include "harness.h"

#include <stdlib.h>

#include <infiniband/verbs.h>

int main(void)
{
	t_start("api_fork_env");
	unsetenv("RDMAV_FORK_SAFE");
	unsetenv("IBV_FORK_SAFE");
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	setenv("RDMAV_FORK_SAFE", "1", 1);
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	unsetenv("RDMAV_FORK_SAFE");
	setenv("IBV_FORK_SAFE", "", 1); /* set, even empty */
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_ENABLED);
	unsetenv("IBV_FORK_SAFE");
	CHECK_EQ_INT(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/*
 * softverbs.h - softverbs' own additions to the verbs API.
 *
 * Nothing here is part of rdma-core. Everything is static inline, so
 * including this header adds no symbol dependency on softverbs and a
 * program that uses it still runs on rdma-core's libibverbs.
 */
#ifndef SOFTVERBS_SOFTVERBS_H
#define SOFTVERBS_SOFTVERBS_H

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes in a path MTU: 256 for IBV_MTU_256 ... 4096 for IBV_MTU_4096, else -1. */
static inline int softverbs_mtu_to_bytes(enum ibv_mtu mtu)
{
	if (mtu < IBV_MTU_256 || mtu > IBV_MTU_4096)
		return -1;
	return 128 << mtu;
}

/* The enum for an MTU in bytes (256, 512, 1024, 2048 or 4096), else 0. */
static inline enum ibv_mtu softverbs_bytes_to_mtu(int bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 1024:
		return IBV_MTU_1024;
	case 2048:
		return IBV_MTU_2048;
	case 4096:
		return IBV_MTU_4096;
	default:
		return (enum ibv_mtu)0;
	}
}

#ifdef __cplusplus
}
#endif

#endif

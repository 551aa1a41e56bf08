/* SPDX-License-Identifier: MIT */
/*
 * context.c - ibv_open_device / ibv_close_device and the context ABI.
 *
 * The device allocates its context (embedding struct sv_context, which
 * embeds struct verbs_context); the core then makes it look like an
 * rdma-core context: abi_compat, sz, the inline data-path ops and every
 * verbs_context slot, none of them NULL.
 *
 * cmd_fd is a valid descriptor, as on rdma-core, so that programs may
 * dup() or poll it (pyverbs' shared-PD test dups it before asking
 * ibv_import_device): an empty close-on-exec memfd that carries no
 * commands, since there is no kernel. ibv_import_device refuses it.
 */
#define _GNU_SOURCE /* memfd_create */
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "core/vctx.h"

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sv_device *dev = sv_container_of(device, struct sv_device, ibv);
	const struct sv_ops *dev_ops;
	struct sv_context *sctx = NULL;
	struct ibv_context *ctx;
	int ret;

	ret = dev->open(dev, &sctx, &dev_ops);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	sctx->ops = *dev_ops;
	sv_ops_fill_fallbacks(&sctx->ops);
	sctx->dev = dev;

	ctx = &sctx->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = memfd_create("softverbs-cmd", MFD_CLOEXEC);
	if (ctx->cmd_fd < 0) {
		ret = -errno;
		sctx->ops.close_context(ctx);
		errno = -ret;
		return NULL;
	}
	ctx->num_comp_vectors = 1;
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	sctx->vctx.sz = sizeof(struct verbs_context);
	pthread_mutex_init(&ctx->mutex, NULL);

	ret = sv_async_init(sctx);
	if (ret) {
		pthread_mutex_destroy(&ctx->mutex);
		close(ctx->cmd_fd);
		sctx->ops.close_context(ctx);
		errno = -ret;
		return NULL;
	}
	sv_vctx_install(sctx);
	sv_device_get(dev);
	return ctx;
}

SV_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sv_context *sctx = sv_ctx(ctx);
	struct sv_device *dev = sctx->dev;

	sv_async_destroy(sctx);
	pthread_mutex_destroy(&ctx->mutex);
	close(ctx->cmd_fd);
	sctx->ops.close_context(ctx); /* frees sctx */
	sv_device_put(dev);
	return 0;
}

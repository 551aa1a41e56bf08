/* SPDX-License-Identifier: MIT */
/* vctx.h - installs the ABI entry points of a context (vctx.c). */
#ifndef SV_VCTX_H
#define SV_VCTX_H

#include "core/core.h"

/*
 * Point ctx->ops at the device's data-path ops and every verbs_context
 * slot at a core shim that converts 0/-errno to the libibverbs
 * convention. Requires sctx->ops to be complete (fallbacks filled).
 */
void sv_vctx_install(struct sv_context *sctx);

#endif

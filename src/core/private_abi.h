/* SPDX-License-Identifier: MIT */
/*
 * private_abi.h - versioned exports of rdma-core's private nodes.
 *
 * rdma-core names its private node IBVERBS_PRIVATE_<N> and moves to a new
 * N in some releases: 34 (rdma-core 34 to 56), 57 (57, 58), 59 (59 to 63),
 * 64 and 65. The nodes have no parent and mostly the same names, so a
 * binary built against any of those releases asks for NAME@IBVERBS_PRIVATE_N
 * with its own N, and the loader refuses to start it when that node is
 * missing, even if the name is never called.
 *
 * softverbs defines each such name once, under an internal name, and
 * exports it once per node that has it: the newest node as the default
 * version (NAME@@IBVERBS_PRIVATE_65, what the link editor picks), every
 * older one as a non-default alias (NAME@IBVERBS_PRIVATE_34, ...). The
 * version script lists each name at its default node only.
 *
 * GNU ld drops the default version of a name whose plain definition sits
 * next to .symver aliases of it, so the definition must not carry the
 * exported name itself: define `impl` (static is fine), then
 *
 *   SV_PRIVATE_SINCE_34(impl, name)   name in every node, 34 to 65
 *   SV_PRIVATE_SINCE_57(impl, name)   added in 57 (57 to 65), and so on
 *   SV_PRIVATE_ONLY(impl, name, N)    in node N only, its default there
 *
 * in the same translation unit (an alias must name a definition of its
 * own unit). Calls from inside the library use `impl`. The node lists are
 * tests/abi_private_nodes.txt, checked by the ctest test abi_exports.
 */
#ifndef SV_PRIVATE_ABI_H
#define SV_PRIVATE_ABI_H

/* name@IBVERBS_PRIVATE_<tag> (`at` is "@") or its default (`at` "@@"). */
#define SV_PRIVATE_VERSION(impl, name, tag, at)                                                    \
	extern __typeof__(impl) sv_pv##tag##_##name                                                \
		__attribute__((alias(#impl), visibility("default")));                              \
	__asm__(".symver sv_pv" #tag "_" #name ", " #name at "IBVERBS_PRIVATE_" #tag)

#define SV_PRIVATE_SINCE_65(impl, name) SV_PRIVATE_VERSION(impl, name, 65, "@@")
#define SV_PRIVATE_SINCE_64(impl, name)                                                            \
	SV_PRIVATE_VERSION(impl, name, 64, "@");                                                   \
	SV_PRIVATE_SINCE_65(impl, name)
#define SV_PRIVATE_SINCE_59(impl, name)                                                            \
	SV_PRIVATE_VERSION(impl, name, 59, "@");                                                   \
	SV_PRIVATE_SINCE_64(impl, name)
#define SV_PRIVATE_SINCE_57(impl, name)                                                            \
	SV_PRIVATE_VERSION(impl, name, 57, "@");                                                   \
	SV_PRIVATE_SINCE_59(impl, name)
#define SV_PRIVATE_SINCE_34(impl, name)                                                            \
	SV_PRIVATE_VERSION(impl, name, 34, "@");                                                   \
	SV_PRIVATE_SINCE_57(impl, name)
#define SV_PRIVATE_ONLY(impl, name, tag) SV_PRIVATE_VERSION(impl, name, tag, "@@")

#endif

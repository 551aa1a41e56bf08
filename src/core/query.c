/* SPDX-License-Identifier: MIT */
/*
 * query.c - the exported device, port, GID and P_Key queries.
 *
 * Each verb dispatches to the device's sv_ops slot and converts its
 * 0/-errno into the convention rdma-core documents for that verb: a
 * positive errno (ibv_query_device, ibv_query_port, _ibv_query_gid_ex),
 * -1 with errno (ibv_query_gid, ibv_query_pkey, ibv_get_pkey_index,
 * ibv_query_gid_type), or a count / negative errno (_ibv_query_gid_table).
 */
#include <string.h>

#include "core/core.h"
#include "core/private.h"
#include "core/private_abi.h"

/* Contract: a -errno result as -1 with errno set; 0 stays 0. */
static int ret_minus_one(int ret)
{
	if (!ret)
		return 0;
	errno = -ret;
	return -1;
}

/* Contract: the full extended attributes of the device into *attr; 0 or -errno. */
static int query_device_full(struct ibv_context *ctx, struct ibv_device_attr_ex *attr)
{
	memset(attr, 0, sizeof(*attr));
	return sv_ops_of(ctx)->query_device_ex(ctx, attr);
}

SV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	struct ibv_device_attr_ex full;
	int ret = query_device_full(context, &full);

	if (!ret)
		*device_attr = full.orig_attr;
	return sv_ret_int(ret);
}

/*
 * Contract: query the port into a full struct ibv_port_attr and copy the
 * first `len` bytes to `out`; 0 or -errno (out untouched on error).
 */
static int query_port_copy(struct ibv_context *ctx, uint8_t port, void *out, size_t len)
{
	struct ibv_port_attr full;
	int ret;

	memset(&full, 0, sizeof(full));
	ret = sv_ops_of(ctx)->query_port(ctx, port, &full);
	if (!ret)
		memcpy(out, &full, len < sizeof(full) ? len : sizeof(full));
	return ret;
}

/*
 * The exported symbol: old binaries call it directly with the 48-byte
 * compat struct, new ones through the inline wrapper's fallback. Writes
 * exactly sizeof(struct _compat_ibv_port_attr) bytes.
 */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
			     struct _compat_ibv_port_attr *port_attr)
{
	return sv_ret_int(query_port_copy(context, port_num, port_attr, sizeof(*port_attr)));
}

/*
 * Contract: GID entry `index` of `port` into *entry; 0 or -errno. Ports
 * beyond the uint8_t range of the device op are -EINVAL, never truncated.
 */
static int query_gid_entry(struct ibv_context *ctx, uint32_t port, uint32_t index,
			   struct ibv_gid_entry *entry)
{
	if (port > UINT8_MAX)
		return -EINVAL;
	memset(entry, 0, sizeof(*entry));
	return sv_ops_of(ctx)->query_gid_ex(ctx, (uint8_t)port, index, entry);
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
			    union ibv_gid *gid)
{
	struct ibv_gid_entry entry;
	int ret;

	if (index < 0)
		return ret_minus_one(-EINVAL);
	ret = query_gid_entry(context, port_num, (uint32_t)index, &entry);
	if (ret == -ENODATA) {
		/* an empty slot reads as the zero GID, as in rdma-core */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (!ret)
		*gid = entry.gid;
	return ret_minus_one(ret);
}

/*
 * rdma-core's ibv_query_gid_ex() passes its struct size; a larger size
 * (a newer caller) is fine, a smaller one cannot hold the entry.
 */
SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int ret;

	if (flags || entry_size < sizeof(*entry))
		return EINVAL;
	ret = query_gid_entry(context, port_num, gid_index, &e);
	if (!ret)
		*entry = e;
	return sv_ret_int(ret);
}

/*
 * Contract: the valid GIDs of every port into entries[] (stride
 * entry_size). Empty slots (-ENODATA) are skipped. More valid entries
 * than max_entries: -EINVAL, as the man page requires.
 */
SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	struct ibv_device_attr_ex dev;
	struct ibv_port_attr port;
	struct ibv_gid_entry e;
	size_t n = 0;
	uint32_t p;
	int i, ret;

	if (flags || entry_size < sizeof(*entries) || !max_entries)
		return -EINVAL;
	ret = query_device_full(context, &dev);
	if (ret)
		return ret;
	for (p = 1; p <= dev.orig_attr.phys_port_cnt; p++) {
		ret = query_port_copy(context, (uint8_t)p, &port, sizeof(port));
		if (ret)
			return ret;
		for (i = 0; i < port.gid_tbl_len; i++) {
			ret = query_gid_entry(context, p, (uint32_t)i, &e);
			if (ret == -ENODATA)
				continue;
			if (ret)
				return ret;
			if (n == max_entries)
				return -EINVAL;
			memcpy((char *)entries + n * entry_size, &e, sizeof(e));
			n++;
		}
	}
	return (ssize_t)n;
}

/*
 * ibv_query_gid_type, of every private node (34 to 65), used by
 * ibv_devinfo: the sysfs view of a GID's type (RoCE v2, or IB / RoCE v1).
 */
static int query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
			  enum ibv_gid_type_sysfs *type)
{
	struct ibv_gid_entry e;
	int ret = query_gid_entry(context, port_num, index, &e);

	if (ret == -ENODATA) {
		/* an empty slot: the kernel's file refuses it, which rdma-core reads as IB */
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret)
		return ret_minus_one(ret);
	if (e.gid_type == IBV_GID_TYPE_ROCE_V2)
		*type = IBV_GID_TYPE_SYSFS_ROCE_V2;
	else
		*type = IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
	return 0;
}

SV_PRIVATE_SINCE_34(query_gid_type, ibv_query_gid_type);

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	return ret_minus_one(sv_ops_of(context)->query_pkey(context, port_num, index, pkey));
}

/*
 * Contract: the index of `pkey` in the port's table, or -1 with errno:
 * the query's errno (e.g. EINVAL for a bad port), ENOENT if absent.
 */
SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
	const struct sv_ops *ops = sv_ops_of(context);
	__be16 k;
	int i, ret;

	for (i = 0;; i++) {
		ret = ops->query_pkey(context, port_num, i, &k);
		if (ret == -EINVAL && i > 0)
			return ret_minus_one(-ENOENT); /* ran off the end of the table */
		if (ret)
			return ret_minus_one(ret);
		if (k == pkey)
			return i;
	}
}

/* SPDX-License-Identifier: MIT */
/*
 * api_compat: the exported names that librdmacm, ibv_devinfo and the
 * providers import besides the verbs proper, through the public library:
 *
 *  - ibv_get_sysfs_path (SYSFS_PATH without trailing slashes) and
 *    ibv_read_sysfs_file (length, NUL, one newline stripped, truncation,
 *    -1 with errno; the device's ibdev_path and dev_path are under the
 *    sysfs path, and ibdev_path has no board_id);
 *  - the ibv_copy_*_kern conversions, against the kernel's own uapi
 *    structs (<rdma/ib_user_verbs.h>, <rdma/ib_user_sa.h>) when the
 *    system has them: every field lands where it belongs;
 *  - ibv_query_port_speed (4X EDR: 1000, in units of 100 Mb/s), ibv_dm_export_dmabuf_fd
 *    dispatch, object import, completion counters and
 *    ibv_resolve_eth_l2_from_gid: the documented results.
 */
#include "harness.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#if __has_include(<rdma/ib_user_verbs.h>) && __has_include(<rdma/ib_user_sa.h>)
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#define HAVE_KERN_UAPI 1
#else
#define HAVE_KERN_UAPI 0
#endif

/* Declared by rdma-core outside verbs.h (driver.h and marshall.h). */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

/* rdma-core's struct ibv_sa_path_rec (<infiniband/sa.h>), by layout. */
struct t_sa_path_rec {
	union ibv_gid dgid;
	union ibv_gid sgid;
	__be16 dlid;
	__be16 slid;
	int raw_traffic;
	__be32 flow_label;
	uint8_t hop_limit;
	uint8_t traffic_class;
	int reversible;
	uint8_t numb_path;
	__be16 pkey;
	uint8_t sl;
	uint8_t mtu_selector;
	uint8_t mtu;
	uint8_t rate_selector;
	uint8_t rate;
	uint8_t packet_life_time_selector;
	uint8_t packet_life_time;
	uint8_t preference;
};
_Static_assert(sizeof(struct t_sa_path_rec) == 64, "ibv_sa_path_rec is 64 bytes");

#if HAVE_KERN_UAPI
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_path_rec_from_kern(struct t_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct t_sa_path_rec *src);
#endif

static struct ibv_context *ctx;
static char tmpdir[64];

static void write_file(const char *name, const char *data)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!CHECK(f))
		return;
	fputs(data, f);
	fclose(f);
}

static void case_sysfs(void)
{
	char buf[8], want[512];

	t_case("ibv_get_sysfs_path and ibv_read_sysfs_file");
	/* SYSFS_PATH was set to tmpdir + "///" before the first call */
	CHECK_MSG(strcmp(ibv_get_sysfs_path(), tmpdir) == 0, "sysfs path '%s', want '%s'",
		  ibv_get_sysfs_path(), tmpdir);
	CHECK(ibv_get_sysfs_path() == ibv_get_sysfs_path());

	write_file("nl", "abc\n");
	write_file("plain", "xyz");
	write_file("long", "0123456789abcdef\n");
	write_file("empty", "");
	memset(buf, 'Z', sizeof(buf));
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "nl", buf, sizeof(buf)), 3);
	CHECK(strcmp(buf, "abc") == 0);
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "plain", buf, sizeof(buf)), 3);
	CHECK(strcmp(buf, "xyz") == 0);
	/* truncated to size - 1 bytes, always terminated */
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "long", buf, sizeof(buf)), 7);
	CHECK(strcmp(buf, "0123456") == 0);
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "empty", buf, sizeof(buf)), 0);
	CHECK(buf[0] == '\0');

	errno = 0;
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "missing", buf, sizeof(buf)), -1);
	CHECK_EQ_INT(errno, ENOENT);
	errno = 0;
	CHECK_EQ_INT(ibv_read_sysfs_file(tmpdir, "nl", buf, 0), -1);
	CHECK_EQ_INT(errno, EINVAL);
	/* the device's sysfs paths are under that path, as rdma-core makes them */
	snprintf(want, sizeof(want), "%s/class/infiniband/%s", tmpdir, ctx->device->name);
	CHECK_MSG(strcmp(ctx->device->ibdev_path, want) == 0, "ibdev_path '%s', want '%s'",
		  ctx->device->ibdev_path, want);
	snprintf(want, sizeof(want), "%s/class/infiniband_verbs/%s", tmpdir, ctx->device->dev_name);
	CHECK_MSG(strcmp(ctx->device->dev_path, want) == 0, "dev_path '%s', want '%s'",
		  ctx->device->dev_path, want);
	/* what ibv_devinfo reads: the software device has no sysfs directory */
	errno = 0;
	CHECK_EQ_INT(ibv_read_sysfs_file(ctx->device->ibdev_path, "board_id", buf, sizeof(buf)),
		     -1);
	CHECK_EQ_INT(errno, ENOENT);
}

#if HAVE_KERN_UAPI
static void fill_bytes(void *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)(seed + i * 7);
}

static int ah_matches(const struct ibv_ah_attr *a, const struct ib_uverbs_ah_attr *k)
{
	return !memcmp(a->grh.dgid.raw, k->grh.dgid, 16) &&
	       a->grh.flow_label == k->grh.flow_label && a->grh.sgid_index == k->grh.sgid_index &&
	       a->grh.hop_limit == k->grh.hop_limit &&
	       a->grh.traffic_class == k->grh.traffic_class && a->dlid == k->dlid &&
	       a->sl == k->sl && a->src_path_bits == k->src_path_bits &&
	       a->static_rate == k->static_rate && a->is_global == k->is_global &&
	       a->port_num == k->port_num;
}

static void case_kern_copies(void)
{
	struct ib_uverbs_qp_attr kq;
	struct ib_uverbs_ah_attr ka;
	struct ib_user_path_rec kp, kp2;
	struct ibv_qp_attr q;
	struct ibv_ah_attr a;
	struct t_sa_path_rec p;

	t_case("ibv_copy_*_kern against the kernel uapi structs");
	fill_bytes(&ka, sizeof(ka), 1);
	memset(&a, 0, sizeof(a));
	ibv_copy_ah_attr_from_kern(&a, &ka);
	CHECK(ah_matches(&a, &ka));

	fill_bytes(&kq, sizeof(kq), 3);
	memset(&q, 0xee, sizeof(q));
	ibv_copy_qp_attr_from_kern(&q, &kq);
	CHECK_EQ_INT(q.qp_state, kq.qp_state);
	CHECK_EQ_INT(q.cur_qp_state, kq.cur_qp_state);
	CHECK_EQ_INT(q.path_mtu, kq.path_mtu);
	CHECK_EQ_INT(q.path_mig_state, kq.path_mig_state);
	CHECK_EQ_INT(q.qkey, kq.qkey);
	CHECK_EQ_INT(q.rq_psn, kq.rq_psn);
	CHECK_EQ_INT(q.sq_psn, kq.sq_psn);
	CHECK_EQ_INT(q.dest_qp_num, kq.dest_qp_num);
	CHECK_EQ_INT(q.qp_access_flags, kq.qp_access_flags);
	CHECK_EQ_INT(q.cap.max_send_wr, kq.max_send_wr);
	CHECK_EQ_INT(q.cap.max_recv_wr, kq.max_recv_wr);
	CHECK_EQ_INT(q.cap.max_send_sge, kq.max_send_sge);
	CHECK_EQ_INT(q.cap.max_recv_sge, kq.max_recv_sge);
	CHECK_EQ_INT(q.cap.max_inline_data, kq.max_inline_data);
	CHECK(ah_matches(&q.ah_attr, &kq.ah_attr));
	CHECK(ah_matches(&q.alt_ah_attr, &kq.alt_ah_attr));
	CHECK_EQ_INT(q.pkey_index, kq.pkey_index);
	CHECK_EQ_INT(q.alt_pkey_index, kq.alt_pkey_index);
	CHECK_EQ_INT(q.en_sqd_async_notify, kq.en_sqd_async_notify);
	CHECK_EQ_INT(q.sq_draining, kq.sq_draining);
	CHECK_EQ_INT(q.max_rd_atomic, kq.max_rd_atomic);
	CHECK_EQ_INT(q.max_dest_rd_atomic, kq.max_dest_rd_atomic);
	CHECK_EQ_INT(q.min_rnr_timer, kq.min_rnr_timer);
	CHECK_EQ_INT(q.port_num, kq.port_num);
	CHECK_EQ_INT(q.timeout, kq.timeout);
	CHECK_EQ_INT(q.retry_cnt, kq.retry_cnt);
	CHECK_EQ_INT(q.rnr_retry, kq.rnr_retry);
	CHECK_EQ_INT(q.alt_port_num, kq.alt_port_num);
	CHECK_EQ_INT(q.alt_timeout, kq.alt_timeout);
	CHECK_EQ_INT(q.rate_limit, 0);

	fill_bytes(&kp, sizeof(kp), 5);
	kp.raw_traffic = 1;
	kp.reversible = 1;
	kp.mtu = IBV_MTU_4096;
	memset(&p, 0, sizeof(p));
	ibv_copy_path_rec_from_kern(&p, &kp);
	CHECK(!memcmp(p.dgid.raw, kp.dgid, 16) && !memcmp(p.sgid.raw, kp.sgid, 16));
	CHECK(p.dlid == kp.dlid && p.slid == kp.slid && p.pkey == kp.pkey);
	CHECK(p.flow_label == kp.flow_label);
	CHECK(p.raw_traffic == 1 && p.reversible == 1 && p.mtu == IBV_MTU_4096);
	CHECK(p.hop_limit == kp.hop_limit && p.traffic_class == kp.traffic_class);
	CHECK(p.numb_path == kp.numb_path && p.sl == kp.sl);
	CHECK(p.mtu_selector == kp.mtu_selector && p.rate_selector == kp.rate_selector);
	CHECK(p.rate == kp.rate && p.preference == kp.preference);
	CHECK(p.packet_life_time_selector == kp.packet_life_time_selector);
	CHECK(p.packet_life_time == kp.packet_life_time);

	/* and back: the kernel record comes out byte for byte */
	memset(&kp2, 0xee, sizeof(kp2));
	ibv_copy_path_rec_to_kern(&kp2, &p);
	CHECK(!memcmp(&kp, &kp2, sizeof(kp)));
}
#endif

static void case_port_speed(void)
{
	uint64_t speed = 0;

	t_case("ibv_query_port_speed");
	CHECK_RET(ibv_query_port_speed(ctx, 1, &speed), 0);
	CHECK_EQ_INT(speed, 1000); /* 4X EDR: 100 Gb/s in units of 100 Mb/s */
	CHECK_RET(ibv_query_port_speed(ctx, 0, &speed), EINVAL);
	CHECK_RET(ibv_query_port_speed(ctx, 2, &speed), EINVAL);
	CHECK_RET(ibv_query_port_speed(ctx, 256, &speed), EINVAL);
}

static void case_unsupported(void)
{
	struct ibv_comp_cntr_init_attr cattr = {.type = IBV_COMP_CNTR_TYPE_WRS};
	struct ibv_qp_attach_comp_cntr_attr qattr = {.op_mask = IBV_QP_ATTACH_COMP_CNTR_OP_SEND};
	struct ibv_comp_cntr fake_cntr = {.context = ctx};
	struct ibv_comp_cntr_caps caps;
	struct ibv_context fake_ctx;
	struct ibv_dm dm;
	struct ibv_ah_attr ah;
	struct ibv_pd *pd;
	uint8_t mac[ETHERNET_LL_SIZE] = {1, 2, 3, 4, 5, 6};
	uint16_t vid = 7;
	uint64_t v;
	int dupfd;

	t_case("import, completion counters, DM export, L2 resolution");
	/* cmd_fd is a real close-on-exec fd (pyverbs dups it), never importable */
	CHECK(ctx->cmd_fd >= 0 && (fcntl(ctx->cmd_fd, F_GETFD) & FD_CLOEXEC));
	dupfd = dup(ctx->cmd_fd);
	if (CHECK(dupfd >= 0)) {
		CHECK_ERRNO_PTR(ibv_import_device(dupfd), EOPNOTSUPP);
		CHECK(close(dupfd) == 0); /* a failed import leaves the fd to the caller */
	}
	CHECK_ERRNO_PTR(ibv_import_device(ctx->cmd_fd), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_import_device(0), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_import_pd(ctx, 1), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_import_dm(ctx, 1), EOPNOTSUPP);
	pd = ibv_alloc_pd(ctx);
	if (CHECK(pd)) {
		CHECK_ERRNO_PTR(ibv_import_mr(pd, 1), EOPNOTSUPP);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}

	CHECK_RET(ibv_query_comp_cntr_caps(ctx, &caps), EOPNOTSUPP);
	CHECK_ERRNO_PTR(ibv_create_comp_cntr(ctx, &cattr), EOPNOTSUPP);
	CHECK_RET(ibv_destroy_comp_cntr(&fake_cntr), EOPNOTSUPP);
	CHECK_RET(ibv_set_comp_cntr(&fake_cntr, 1), EOPNOTSUPP);
	CHECK_RET(ibv_set_err_comp_cntr(&fake_cntr, 1), EOPNOTSUPP);
	CHECK_RET(ibv_inc_comp_cntr(&fake_cntr, 1), EOPNOTSUPP);
	CHECK_RET(ibv_inc_err_comp_cntr(&fake_cntr, 1), EOPNOTSUPP);
	CHECK_RET(ibv_read_comp_cntr(&fake_cntr, &v), EOPNOTSUPP);
	CHECK_RET(ibv_read_err_comp_cntr(&fake_cntr, &v), EOPNOTSUPP);
	CHECK_RET(ibv_qp_attach_comp_cntr(NULL, &fake_cntr, &qattr), EOPNOTSUPP);

	/* no DM is exported as a DMA-buf; a DM of our context reaches the device's op */
	memset(&dm, 0, sizeof(dm));
	dm.context = ctx;
	errno = 0;
	CHECK_EQ_INT(ibv_dm_export_dmabuf_fd(&dm), -1);
	CHECK_EQ_INT(errno, EOPNOTSUPP);
	/* a context without the extended ABI has no op at all */
	memset(&fake_ctx, 0, sizeof(fake_ctx));
	dm.context = &fake_ctx;
	errno = 0;
	CHECK_EQ_INT(ibv_dm_export_dmabuf_fd(&dm), -1);
	CHECK_EQ_INT(errno, EOPNOTSUPP);

	memset(&ah, 0, sizeof(ah));
	ah.port_num = 1;
	CHECK_RET(ibv_resolve_eth_l2_from_gid(ctx, &ah, mac, &vid), EINVAL);
	ah.is_global = 1;
	CHECK_RET(ibv_query_gid(ctx, 1, 0, &ah.grh.dgid), 0);
	CHECK_RET(ibv_resolve_eth_l2_from_gid(ctx, &ah, mac, &vid), EOPNOTSUPP);
	CHECK(mac[0] == 1 && mac[5] == 6 && vid == 7);
}

int main(void)
{
	char path[128];
	const char *names[] = {"nl", "plain", "long", "empty"};
	size_t i;

	t_start("api_compat");
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/api_compat.XXXXXX");
	if (!mkdtemp(tmpdir))
		t_skip_all("mkdtemp failed");
	snprintf(path, sizeof(path), "%s///", tmpdir);
	setenv("SYSFS_PATH", path, 1); /* before the library's first look */
	t_open_first(&ctx);

	case_sysfs();
#if HAVE_KERN_UAPI
	case_kern_copies();
#else
	printf("# no <rdma/ib_user_verbs.h>: kernel struct conversions not checked\n");
#endif
	case_port_speed();
	case_unsupported();

	CHECK_RET(ibv_close_device(ctx), 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
	return t_finish();
}

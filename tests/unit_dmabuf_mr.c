/* SPDX-License-Identifier: MIT */
/*
 * unit_dmabuf_mr: what a registration records in the device, white-box.
 *
 * fd path: the MR's host pointer maps the fd at the registered offset
 * (bytes written through either side are seen by the other), it survives
 * the caller closing the fd, and deregistration returns only once an
 * in-flight lookup put its reference (the mapping stays until then). Address path: host == addr.
 * Both: iova, length, access without optional bits, the base PD, and rereg updates.
 */
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "sw/ctrl.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static size_t page;

static struct sw_mr *lookup(uint32_t key)
{
	return sw_mr_table_lookup(&sw_dev_of(ctx)->mrs, key);
}

static atomic_int dereg_done; /* 1: ibv_dereg_mr returned 0; 2: it failed */

static void *dereg_thread(void *mr)
{
	atomic_store(&dereg_done, ibv_dereg_mr(mr) ? 2 : 1);
	return NULL;
}

static void test_fd_data(void)
{
	int fd = memfd_create("unit_dmabuf_mr", MFD_CLOEXEC);
	const uint64_t off = page + 10;
	struct ibv_mr *mr;
	struct sw_mr *m, *ref;
	uint8_t pattern[3 * 4096], back[64];
	size_t i;
	int bad = 0;

	t_case("fd path: the MR maps the fd's bytes at the offset");
	if (!CHECK(fd >= 0) || !CHECK_EQ_INT(ftruncate(fd, (off_t)(3 * page)), 0))
		return;
	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7 + 3);
	CHECK_EQ_INT(pwrite(fd, pattern, 3 * page, 0), (long long)(3 * page));

	mr = ibv_reg_dmabuf_mr(pd, off, 100, 0x5000 + 10, fd,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
				       IBV_ACCESS_RELAXED_ORDERING);
	if (!CHECK(mr)) {
		close(fd);
		return;
	}
	m = sw_mr(mr);
	CHECK_EQ_INT(m->iova, 0x5000 + 10);
	CHECK_EQ_INT(m->length, 100);
	CHECK_EQ_INT(m->access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK(m->pd == sw_pd(pd));
	CHECK(m->fd >= 0 && m->fd != fd);
	CHECK(m->map != NULL && m->host == (uint8_t *)m->map + (off % page));
	CHECK_EQ_INT(m->key, mr->lkey);
	CHECK_EQ_INT(mr->handle, mr->lkey);
	CHECK_EQ_INT(m->core.type, SV_MR_TYPE_DMABUF);
	CHECK(!m->core.dontfork);
	for (i = 0; i < 100; i++)
		bad += m->host[i] != pattern[off + i];
	CHECK_EQ_INT(bad, 0);

	/* the caller's fd goes away; the MR's mapping stays shared with the file */
	close(fd);
	memset(m->host, 0xab, 64);
	CHECK_EQ_INT(pread(m->fd, back, 64, (off_t)off), 64);
	bad = 0;
	for (i = 0; i < 64; i++)
		bad += back[i] != 0xab;
	CHECK_EQ_INT(bad, 0);
	back[0] = 0x5a;
	CHECK_EQ_INT(pwrite(m->fd, back, 1, (off_t)(off + 99)), 1);
	CHECK_EQ_INT(m->host[99], 0x5a);

	/* the core refuses rereg of fd MRs; the device does too */
	CHECK_EQ_INT(sw_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0), -EOPNOTSUPP);
	CHECK_EQ_INT(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, 0),
		     IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ_INT(m->access, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);

	t_case("fd path: dereg waits for a lookup's reference, which keeps the mapping");
	ref = lookup(mr->lkey);
	CHECK(ref == m);
	CHECK_EQ_INT(sw_mr_check_range(m, 0x5000 + 10, 100, IBV_ACCESS_REMOTE_READ), 0);
	CHECK_EQ_INT(sw_mr_check_range(m, 0x5000 + 10, 101, 0), -EINVAL);
	CHECK_EQ_INT(sw_mr_check_range(m, 0x5000 + 10, 8, IBV_ACCESS_REMOTE_WRITE), -EACCES);
	if (ref) {
		pthread_t t;
		struct timespec ts = {0, 50 * 1000 * 1000};

		atomic_store(&dereg_done, 0);
		if (!CHECK(pthread_create(&t, NULL, dereg_thread, mr) == 0)) {
			sw_mr_put(ref);
			return;
		}
		nanosleep(&ts, NULL);
		CHECK_EQ_INT(atomic_load(&dereg_done), 0); /* still waiting for us */
		CHECK(lookup(m->key) == NULL); /* but the key is gone already */
		CHECK_EQ_INT(ref->host[0], 0xab); /* still mapped: ASan/valgrind would complain */
		CHECK_EQ_INT(ref->host[99], 0x5a);
		sw_mr_put(ref);
		pthread_join(t, NULL);
		CHECK_EQ_INT(atomic_load(&dereg_done), 1);
	} else {
		CHECK_RET(ibv_dereg_mr(mr), 0);
	}
}

static void test_va(void)
{
	uint8_t *buf =
		mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_parent_domain_init_attr pa = {.pd = pd};
	struct ibv_pd *parent, *pd2;
	struct ibv_mr *mr;
	struct sw_mr *m;
	uint32_t key;

	t_case("address path: host is the caller's memory");
	if (!CHECK(buf != MAP_FAILED))
		return;
	mr = ibv_reg_mr_iova(pd, buf + 16, 2 * page, 0x900010, IBV_ACCESS_LOCAL_WRITE);
	if (CHECK(mr)) {
		m = sw_mr(mr);
		CHECK(m->host == buf + 16);
		CHECK_EQ_INT(m->iova, 0x900010);
		CHECK_EQ_INT(m->length, 2 * page);
		CHECK(m->map == NULL && m->fd == -1);
		CHECK_EQ_INT(m->core.type, SV_MR_TYPE_VA);
		CHECK_EQ_INT(atomic_load(&sw_pd(pd)->usecnt), 1);

		t_case("rereg: fields change, keys stay");
		pd2 = ibv_alloc_pd(ctx);
		key = mr->lkey;
		if (CHECK(pd2)) {
			CHECK_EQ_INT(
				ibv_rereg_mr(mr,
					     IBV_REREG_MR_CHANGE_TRANSLATION |
						     IBV_REREG_MR_CHANGE_PD |
						     IBV_REREG_MR_CHANGE_ACCESS,
					     pd2, buf + page, page,
					     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING),
				0);
			CHECK(m->host == buf + page);
			CHECK_EQ_INT(m->iova, (uintptr_t)(buf + page));
			CHECK_EQ_INT(m->length, page);
			CHECK_EQ_INT(m->access, IBV_ACCESS_REMOTE_READ);
			CHECK(m->pd == sw_pd(pd2));
			CHECK_EQ_INT(atomic_load(&sw_pd(pd)->usecnt), 0);
			CHECK_EQ_INT(atomic_load(&sw_pd(pd2)->usecnt), 1);
			CHECK_EQ_INT(mr->lkey, key);
			CHECK_EQ_INT(m->key, key);
			CHECK(lookup(key) == m);
			sw_mr_put(m);
			/* a failed rereg changes nothing */
			CHECK_EQ_INT(
				ibv_rereg_mr(mr,
					     IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS,
					     pd, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
				IBV_REREG_MR_ERR_CMD);
			CHECK(m->pd == sw_pd(pd2));
			CHECK_EQ_INT(m->access, IBV_ACCESS_REMOTE_READ);
			CHECK(lookup(key) == m); /* not left blocked */
			sw_mr_put(m);
		}
		CHECK_RET(ibv_dereg_mr(mr), 0);
		if (pd2)
			CHECK_RET(ibv_dealloc_pd(pd2), 0);
	}

	t_case("a parent domain's MR counts on the base PD");
	parent = ibv_alloc_parent_domain(ctx, &pa);
	if (CHECK(parent)) {
		mr = ibv_reg_mr(parent, buf, page, IBV_ACCESS_LOCAL_WRITE);
		if (CHECK(mr)) {
			CHECK(sw_mr(mr)->pd == sw_pd(pd));
			CHECK(mr->pd == parent);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
		CHECK_RET(ibv_dealloc_pd(parent), 0);
	}
	munmap(buf, 4 * page);
}

/* Closing a context without deregistering: its MRs go, other contexts' stay. */
static void test_ctx_close(void)
{
	enum {
		N = 200
	}; /* more than one batch */
	static uint32_t keys[N];
	struct ibv_context *ctx2 = ibv_open_device(ctx->device);
	struct ibv_pd *pd2 = ctx2 ? ibv_alloc_pd(ctx2) : NULL;
	uint8_t *buf = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *keep;
	struct sw_mr *m;
	int i, n = 0, alive = 0;

	t_case("sw_mem_ctx_close drops the context's MRs only");
	if (!CHECK(ctx2 && pd2 && buf != MAP_FAILED))
		return;
	keep = ibv_reg_mr(pd, buf, page, IBV_ACCESS_LOCAL_WRITE);
	CHECK(keep);
	for (i = 0; i < N; i++) {
		struct ibv_mr *mr = ibv_reg_mr(pd2, buf, page, IBV_ACCESS_LOCAL_WRITE);

		keys[i] = mr ? mr->lkey : 0; /* the MR itself is freed by the close */
		n += mr != NULL;
	}
	CHECK_EQ_INT(n, N);
	CHECK_EQ_INT(atomic_load(&sw_pd(pd2)->usecnt), n);
	sw_mem_ctx_close(ctx2);
	CHECK_EQ_INT(atomic_load(&sw_pd(pd2)->usecnt), 0);
	for (i = 0; i < N; i++) {
		m = lookup(keys[i]);
		alive += m != NULL;
		if (m)
			sw_mr_put(m);
	}
	CHECK_EQ_INT(alive, 0);
	if (keep) {
		m = lookup(keep->lkey);
		CHECK(m == sw_mr(keep));
		if (m)
			sw_mr_put(m);
		CHECK_RET(ibv_dereg_mr(keep), 0);
	}
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
	CHECK_RET(ibv_close_device(ctx2), 0);
	munmap(buf, page);
}

int main(void)
{
	t_start("unit_dmabuf_mr");
	page = (size_t)sysconf(_SC_PAGESIZE);
	if (page > 4096)
		t_skip_all("page size above 4096");
	t_open_first(&ctx);
	pd = ibv_alloc_pd(ctx);
	if (!pd) {
		printf("Bail out! ibv_alloc_pd: %s\n", t_errname(errno));
		return 1;
	}
	test_fd_data();
	test_va();
	test_ctx_close();

	t_case("teardown");
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}

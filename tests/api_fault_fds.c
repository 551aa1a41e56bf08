/* SPDX-License-Identifier: MIT */
/*
 * api_fault_fds.c - out of file descriptors (RLIMIT_NOFILE).
 *
 * Each verb that needs descriptors is called with exactly k free, for
 * k = 0, 1, ... until it succeeds: ibv_open_device() (socket, eventfds,
 * the progress thread), ibv_create_comp_channel(), and on a CC DMA
 * bounce device (SOFTVERBS_CC_DMA_BOUNCE=1, whose memory is fd-backed)
 * ibv_alloc_buf(), ibv_create_cq() and ibv_create_qp() on a CC parent
 * domain. Every failure is NULL with errno EMFILE and leaves no fd (and,
 * for valgrind and ASan, no memory) behind; once the limit is back, the
 * same calls work and data moves over the device that ran out.
 */
#include "harness.h"
#include "traffic.h"

#include <fcntl.h>
#include <sys/resource.h>

/*
 * A port of its own: a device of another test that ran at this test's
 * address before may still have a QP sending to it, whose same-host link
 * would open and close descriptors in this process (limit_to, below).
 */
/* test: env=SOFTVERBS_UDP_PORT=4797 */

#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC
#define MAX_FDS 16 /* no verb needs more */

static struct rlimit saved;

/* How many fds can be opened right now (at most max + 1); all are closed again. */
static int free_fds(int max)
{
	int fds[MAX_FDS + 2], n = 0;

	while (n <= max) {
		int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);

		if (fd < 0)
			break;
		fds[n++] = fd;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return n;
}

static void unlimit(void)
{
	setrlimit(RLIMIT_NOFILE, &saved);
}

/* One try of limit_to(): from the lowest free fd up; 0 or -1. */
static int limit_once(int k)
{
	struct rlimit r = saved;
	int lowest = fcntl(0, F_DUPFD_CLOEXEC, 0);

	if (lowest < 0)
		return -1;
	close(lowest);
	for (r.rlim_cur = (rlim_t)lowest; r.rlim_cur < saved.rlim_cur; r.rlim_cur++) {
		if (setrlimit(RLIMIT_NOFILE, &r))
			return -1;
		if (free_fds(k) == k)
			return 0;
	}
	return -1;
}

/*
 * Lower the soft RLIMIT_NOFILE until exactly k fds are free; 0 or -1.
 * Tried again after a pause: an fd that another thread of the process
 * closed meanwhile (a progress thread taking a link's ring, whose
 * descriptor it closes once mapped) leaves a hole below the limit, and
 * then no limit leaves exactly k free (CI's ASan stage, once).
 */
static int limit_to(int k)
{
	for (int i = 0; i < 20; i++) {
		if (limit_once(k) == 0)
			return 0;
		unlimit();
		usleep(10000);
	}
	return -1;
}

/* One call that needs fds: make() returns the object or NULL; undo() releases it. */
struct verb {
	const char *name;
	void *(*make)(void *arg);
	void (*undo)(void *obj);
	void *arg;
};

/*
 * Call v with 0, 1, ... free fds until it succeeds. Every failure must be
 * EMFILE with the fd count unchanged. Returns the object made with the
 * limit back in place (NULL if that failed too).
 */
static void *exhaust(const struct verb *v)
{
	void *obj = NULL;
	int k, fds = t_count_fds(), e = 0;

	for (k = 0; k < MAX_FDS && !obj; k++) {
		if (!CHECK_MSG(limit_to(k) == 0, "%s: cannot leave exactly %d fds free", v->name,
			       k))
			break;
		errno = 0;
		obj = v->make(v->arg);
		e = errno;
		unlimit();
		if (obj)
			break;
		CHECK_MSG(e == EMFILE, "%s with %d free fds: want NULL/EMFILE, got NULL/%s",
			  v->name, k, t_errname(e));
		CHECK_MSG(t_count_fds() == fds, "%s with %d free fds: %d fds open, %d before",
			  v->name, k, t_count_fds(), fds);
	}
	CHECK_MSG(obj && k > 0, "%s: k=%d", v->name, k);
	printf("# %s: needs %d fds\n", v->name, k);
	if (obj) {
		v->undo(obj);
		CHECK_MSG(t_count_fds() == fds, "%s: fds after undo", v->name);
	}
	obj = v->make(v->arg); /* and with the limit back, it works */
	CHECK_MSG(obj, "%s after the limit is back: %s", v->name, t_errname(errno));
	return obj;
}

/* ---- the verbs ---- */

static struct ibv_device *dev_plain, *dev_bounce;

static void *open_dev(void *arg)
{
	return ibv_open_device(arg);
}

static void close_dev(void *obj)
{
	CHECK_EQ_INT(ibv_close_device(obj), 0);
}

static void *make_channel(void *arg)
{
	return ibv_create_comp_channel(arg);
}

static void undo_channel(void *obj)
{
	CHECK_EQ_INT(ibv_destroy_comp_channel(obj), 0);
}

struct buf_obj {
	struct ibv_buf *b;
};

static struct buf_obj the_buf;

static void *make_buf(void *arg)
{
	return ibv_alloc_buf(arg, 65536, &the_buf.b) ? &the_buf : NULL;
}

static void undo_buf(void *obj)
{
	ibv_free_buf(((struct buf_obj *)obj)->b);
}

static void *make_cq(void *arg)
{
	struct ibv_cq_init_attr_ex ca = {0};

	ca.cqe = 64;
	ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	ca.parent_domain = arg;
	return ibv_create_cq_ex(((struct ibv_pd *)arg)->context, &ca);
}

static void undo_cq(void *obj)
{
	CHECK_EQ_INT(ibv_destroy_cq(obj), 0);
}

static struct ibv_cq *qp_cq;

static void *make_qp(void *arg)
{
	struct ibv_qp_init_attr ia = {0};

	ia.send_cq = qp_cq;
	ia.recv_cq = qp_cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(arg, &ia);
}

static void undo_qp(void *obj)
{
	CHECK_EQ_INT(ibv_destroy_qp(obj), 0);
}

/* ---- cases ---- */

/* A WRITE between two endpoints of `ctx`: the device still moves data. */
static void check_traffic(struct ibv_context *ctx)
{
	struct t_ep a, b;
	struct ibv_wc wc;
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	if (t_ep_init(&a, ctx, IBV_QPT_RC, 65536, acc, 4) ||
	    t_ep_init(&b, ctx, IBV_QPT_RC, 65536, acc, 4) || t_connect(&a, &b, IBV_MTU_1024))
		goto out;
	t_fill(a.buf, 65536, 3);
	CHECK(t_post(&a, IBV_WR_RDMA_WRITE, 1, 0, 65536, (uintptr_t)b.buf, b.mr->rkey,
		     IBV_SEND_SIGNALED) == 0);
	CHECK(t_poll(a.cq, &wc, 1, 10000) == 1 && wc.status == IBV_WC_SUCCESS);
	CHECK(memcmp(a.buf, b.buf, 65536) == 0);
out:
	t_ep_destroy(&a, false);
	t_ep_destroy(&b, false);
}

static void case_plain(void)
{
	struct verb v_open = {"ibv_open_device", open_dev, close_dev, dev_plain};
	struct verb v_chan = {"ibv_create_comp_channel", make_channel, undo_channel, NULL};
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;

	t_case("plain device: ibv_open_device, ibv_create_comp_channel");
	ctx = exhaust(&v_open);
	if (!ctx)
		return;
	v_chan.arg = ctx;
	ch = exhaust(&v_chan);
	if (ch)
		CHECK_EQ_INT(ibv_destroy_comp_channel(ch), 0);
	check_traffic(ctx);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
}

static void case_bounce(void)
{
	struct ibv_parent_domain_init_attr pa = {0};
	struct verb v_open = {"ibv_open_device (CC bounce)", open_dev, close_dev, dev_bounce};
	struct verb v_buf = {"ibv_alloc_buf (CC bounce)", make_buf, undo_buf, NULL};
	struct verb v_cq = {"ibv_create_cq_ex (CC bounce)", make_cq, undo_cq, NULL};
	struct verb v_qp = {"ibv_create_qp (CC bounce)", make_qp, undo_qp, NULL};
	struct ibv_context *ctx;
	struct ibv_pd *pd = NULL, *par = NULL;
	struct ibv_qp *qp;

	t_case("CC bounce device: ibv_open_device, ibv_alloc_buf, CQ and QP rings");
	ctx = exhaust(&v_open);
	if (!ctx)
		return;
	pd = ibv_alloc_pd(ctx);
	pa.pd = pd;
	pa.comp_mask = CC_FLAG;
	par = pd ? ibv_alloc_parent_domain(ctx, &pa) : NULL;
	if (!CHECK_MSG(par, "CC parent domain: %s", t_errname(errno)))
		goto out;
	v_buf.arg = v_cq.arg = v_qp.arg = par;
	if (exhaust(&v_buf))
		ibv_free_buf(the_buf.b);
	qp_cq = exhaust(&v_cq);
	if (qp_cq) {
		qp = exhaust(&v_qp);
		if (qp)
			CHECK_EQ_INT(ibv_destroy_qp(qp), 0);
		CHECK_EQ_INT(ibv_destroy_cq(qp_cq), 0);
	}
out:
	if (par)
		CHECK_EQ_INT(ibv_dealloc_pd(par), 0);
	if (pd)
		CHECK_EQ_INT(ibv_dealloc_pd(pd), 0);
	CHECK_EQ_INT(ibv_close_device(ctx), 0);
}

int main(void)
{
	struct ibv_device **plain, **bounce;

	t_start("api_fault_fds");
	if (getrlimit(RLIMIT_NOFILE, &saved))
		t_skip_all("getrlimit(RLIMIT_NOFILE) fails");
	/* each list call reads SOFTVERBS_*: two devices, listed before any limit */
	plain = ibv_get_device_list(NULL);
	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	bounce = ibv_get_device_list(NULL);
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	if (!plain || !plain[0] || !bounce || !bounce[0]) {
		printf("Bail out! no device: %s\n", t_errname(errno));
		return 1;
	}
	dev_plain = plain[0];
	dev_bounce = bounce[0];
	case_plain();
	case_bounce();
	ibv_free_device_list(plain);
	ibv_free_device_list(bounce);
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/* test: label=no_tsan */ /* forks with threads running: TSan cannot follow such a child */
/*
 * api_unload: no softverbs thread runs after the library is unmapped,
 * whatever the program forgot to close (Open MPI over libfabric unloads
 * libibverbs.so.1 with a context open).
 *
 * Each case runs in a child process, which dlopen()s libibverbs.so.1
 * (this program is not linked with it), opens a device, connects two RC
 * QPs, registers one buffer plainly and one with a DMA handle pinned to
 * a CPU (a placement worker thread), and moves WRITEs into both, data
 * checked. Then:
 *  1. dlclose() with everything open: the library is unmapped, the
 *     progress and worker threads are gone, and the process keeps
 *     running (the old code crashed here, its progress thread waking in
 *     unmapped code); a second dlopen() works again, and a second
 *     dlclose() too.
 *  2. exit() with everything open while another thread keeps posting and
 *     polling: the exit is clean and prompt, and with SOFTVERBS_STATS=1
 *     the device's totals are printed although it was never closed.
 */
/* test: dlopen */
/* test: no-valgrind */
/* test: timeout=120 */
#define _GNU_SOURCE
#include "harness.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF (64u << 10)
#define ACC                                                                                        \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* The exported verbs the child calls, from dlsym(). */
struct verbs {
	void *lib;
	__typeof__(ibv_get_device_list) *get_device_list;
	__typeof__(ibv_open_device) *open_device;
	__typeof__(ibv_alloc_pd) *alloc_pd;
	__typeof__(ibv_reg_mr) *reg_mr;
	__typeof__(ibv_reg_mr_ex) *reg_mr_ex;
	__typeof__(ibv_alloc_dmah) *alloc_dmah;
	__typeof__(ibv_create_cq) *create_cq;
	__typeof__(ibv_create_qp) *create_qp;
	__typeof__(ibv_modify_qp) *modify_qp;
	__typeof__(ibv_query_gid) *query_gid;
};

/* What the child set up; all left open on purpose. */
struct rig {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr, *mr_pinned;
	uint8_t *buf, *pinned;
	union ibv_gid gid;
};

static int load(struct verbs *v)
{
	memset(v, 0, sizeof(*v));
	v->lib = dlopen(SV_LIBIBVERBS_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!v->lib)
		return -1;
#define SYM(f)                                                                                     \
	do {                                                                                       \
		*(void **)(void *)&v->f = dlsym(v->lib, "ibv_" #f);                                \
		if (!v->f)                                                                         \
			return -1;                                                                 \
	} while (0)
	SYM(get_device_list);
	SYM(open_device);
	SYM(alloc_pd);
	SYM(reg_mr);
	SYM(reg_mr_ex);
	SYM(alloc_dmah);
	SYM(create_cq);
	SYM(create_qp);
	SYM(modify_qp);
	SYM(query_gid);
#undef SYM
	return 0;
}

/* Threads of this process, and whether one is named sv-progress. */
static int threads(bool *progress)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	*progress = false;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		n++;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "re");
		if (f) {
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "sv-progress", 11))
				*progress = true;
			fclose(f);
		}
	}
	closedir(d);
	return n;
}

static int qp_up(const struct verbs *v, struct rig *r, struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ACC;
	if (v->modify_qp(qp, &a,
			 IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = r->gid;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (v->modify_qp(qp, &a,
			 IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	return v->modify_qp(qp, &a,
			    IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) ?
		       -1 :
		       0;
}

static int rig_up(const struct verbs *v, struct rig *r)
{
	struct ibv_qp_init_attr ia;
	struct ibv_dmah_init_attr da;
	struct ibv_mr_init_attr ma;
	struct ibv_dmah *dmah;
	int i;

	memset(r, 0, sizeof(*r));
	r->list = v->get_device_list(NULL); /* never freed either */
	r->ctx = r->list && r->list[0] ? v->open_device(r->list[0]) : NULL;
	if (!r->ctx || v->query_gid(r->ctx, 1, 0, &r->gid))
		return -1;
	r->pd = v->alloc_pd(r->ctx);
	r->cq = v->create_cq(r->ctx, 64, NULL, NULL, 0);
	r->buf = aligned_alloc(4096, BUF);
	r->pinned = aligned_alloc(4096, BUF);
	if (!r->pd || !r->cq || !r->buf || !r->pinned)
		return -1;
	memset(r->buf, 0, BUF);
	memset(r->pinned, 0, BUF);
	r->mr = v->reg_mr(r->pd, r->buf, BUF, ACC);
	/* a DMA handle with a CPU: placements into its MR run on a worker thread */
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |
		       IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	da.cpu_id = (uint32_t)sched_getcpu();
	da.ph = 0;
	da.tph_mem_type = IBV_TPH_MEM_TYPE_VM;
	dmah = v->alloc_dmah(r->ctx, &da);
	memset(&ma, 0, sizeof(ma));
	ma.length = BUF;
	ma.access = ACC;
	ma.comp_mask = IBV_REG_MR_MASK_ADDR | IBV_REG_MR_MASK_DMAH;
	ma.addr = r->pinned;
	ma.dmah = dmah;
	r->mr_pinned = dmah ? v->reg_mr_ex(r->pd, &ma) : NULL;
	if (!r->mr || !r->mr_pinned)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = r->cq;
	ia.recv_cq = r->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	for (i = 0; i < 2; i++)
		if (!(r->qp[i] = v->create_qp(r->pd, &ia)))
			return -1;
	if (qp_up(v, r, r->qp[0], r->qp[1]->qp_num) || qp_up(v, r, r->qp[1], r->qp[0]->qp_num))
		return -1;
	return 0;
}

/* One signalled WRITE of `len` bytes from buf+off to `dst` (in `mr`) on qp 0; 0 or -1. */
static int write_one(struct rig *r, size_t off, uint8_t *dst, struct ibv_mr *mr, uint32_t len)
{
	struct ibv_sge sge = {(uintptr_t)r->buf + off, len, r->mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	time_t end = time(NULL) + 20;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = mr->rkey;
	if (ibv_post_send(r->qp[0], &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(r->cq, 1, &wc)) == 0 && time(NULL) < end)
		usleep(100);
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* Four WRITEs, two into each MR, every byte checked. 0 or a step number. */
static int traffic(struct rig *r, unsigned int seed)
{
	const uint32_t len = BUF / 4;
	int i;

	for (i = 0; i < (int)len; i++)
		r->buf[i] = (uint8_t)(i * 7 + seed);
	if (write_one(r, 0, r->buf + BUF / 2, r->mr, len) ||
	    write_one(r, 0, r->buf + BUF / 2 + len, r->mr, len))
		return 1;
	if (write_one(r, 0, r->pinned, r->mr_pinned, len) ||
	    write_one(r, 0, r->pinned + len, r->mr_pinned, len))
		return 2;
	if (memcmp(r->buf, r->buf + BUF / 2, len) || memcmp(r->buf, r->buf + BUF / 2 + len, len) ||
	    memcmp(r->buf, r->pinned, len) || memcmp(r->buf, r->pinned + len, len))
		return 3;
	return 0;
}

/* Case 1, in the child: load, work, dlclose, check, live on; twice. Exit status: 0 or a step. */
static int child_dlclose(void)
{
	struct verbs v;
	struct rig r;
	bool progress;
	int round, n0 = 0;

	alarm(60);
	for (round = 0; round < 2; round++) {
		if (load(&v))
			return 10;
		if (rig_up(&v, &r))
			return 11;
		if (traffic(&r, (unsigned int)round))
			return 12;
		if (round == 0)
			n0 = 1; /* this process had one thread before the library */
		if (threads(&progress) < n0 + 2 || !progress)
			return 13; /* a progress thread and a placement worker */
		if (dlclose(v.lib))
			return 14;
		if (dlopen(SV_LIBIBVERBS_PATH, RTLD_NOW | RTLD_NOLOAD))
			return 15; /* still mapped */
		if (threads(&progress) != n0 || progress)
			return 16;
		/* keep running: the old progress thread woke within 100 ms, in unmapped code */
		usleep(300 * 1000);
		if (memcmp(r.buf, r.pinned, BUF / 4))
			return 17;
	}
	return 0;
}

static atomic_bool poster_started;

/* Posts WRITEs and polls until the process exits under it. */
static void *poster(void *arg)
{
	struct rig *r = arg;
	struct ibv_sge sge = {(uintptr_t)r->buf, 64, r->mr->lkey};
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc[8];

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)r->buf + BUF / 2;
	wr.wr.rdma.rkey = r->mr->rkey;
	for (;;) {
		(void)ibv_post_send(r->qp[0], &wr, &bad);
		(void)ibv_poll_cq(r->cq, 8, wc);
		atomic_store(&poster_started, true);
	}
	return NULL;
}

/* Case 2, in the child: load, work, exit() with a thread still in the verbs. */
static int child_exit(void)
{
	static struct rig r;
	struct verbs v;
	pthread_t t;

	alarm(60);
	if (load(&v) || rig_up(&v, &r) || traffic(&r, 3))
		return 20;
	if (pthread_create(&t, NULL, poster, &r))
		return 21;
	while (!atomic_load(&poster_started))
		usleep(1000);
	usleep(50 * 1000);
	exit(0);
}

/* Run `fn` in a child; its exit status, or 128 + the signal; stderr into `err`. */
static int in_child(int (*fn)(void), char *err, size_t size)
{
	int p[2], status;
	ssize_t n, got = 0;
	pid_t pid;

	if (pipe(p))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], STDERR_FILENO);
		close(p[1]);
		_exit(fn());
	}
	close(p[1]);
	while (got < (ssize_t)size - 1 && (n = read(p[0], err + got, size - 1 - (size_t)got)) > 0)
		got += n;
	err[got] = '\0';
	close(p[0]);
	if (waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int main(void)
{
	static char err[16384];
	int st;

	t_start("api_unload");

	t_case("dlclose with a device, QPs, MRs and a DMA handle open; the process lives on");
	st = in_child(child_dlclose, err, sizeof(err));
	CHECK_MSG(st == 0, "child: %d (>128: killed by signal %d)%s%s", st, st - 128,
		  err[0] ? ", stderr: " : "", err);

	t_case("exit with everything open and a thread inside the verbs; device totals printed");
	setenv("SOFTVERBS_STATS", "1", 1);
	st = in_child(child_exit, err, sizeof(err));
	unsetenv("SOFTVERBS_STATS");
	CHECK_MSG(st == 0, "child: %d (>128: killed by signal %d)", st, st - 128);
	CHECK_MSG(strstr(err, "softverbs: softverbs0 127.") && strstr(err, ": tx ") &&
			  strstr(err, "completions errors"),
		  "no device totals in: %s", err);
	return t_finish();
}

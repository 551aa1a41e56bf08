/* SPDX-License-Identifier: MIT */
/*
 * unit_dmah_stream: a stream of multi-packet RDMA WRITEs into an MR whose
 * DMA handle names a CPU (mem/place_worker.c, place_queue.c,
 * progress.c; docs/cc-and-tph.md).
 *
 * The receive path queues each packet's copy on the worker pinned to the
 * handle's CPU and waits for the copies only at its placement fence. So:
 *   - every byte lands, each WRITE's pattern replacing the last one's,
 *     and every copy ran on a worker on that CPU (sw_place_stats);
 *   - nothing that shows the data comes before it: a WRITE's send
 *     completion (the ACK), the receive completion of a WRITE with
 *     immediate, a READ of the bytes just written, and an atomic on them
 *     each find the new bytes there when they are seen;
 *   - a reader polling the last byte of a WRITE never sees it before the
 *     bytes before it.
 * QP a writes to QP b on the same device, MTU 1024, so a 64 KiB WRITE is
 * 64 packets and a stream fills whole receive batches.
 */
#include "harness.h"

#include <endian.h>
#include <sched.h>
#include <stdatomic.h>

#include "place_util.h"
#include "qp_util.h"
#include "sw/ctrl.h"

/* test: timeout=180 */

enum {
	CHUNK = 64 << 10, /* one WRITE: 64 packets */
	NCHUNK = 8, /* WRITEs per round, all in flight */
	LEN = CHUNK * NCHUNK,
	ROUNDS = 3,
	TAIL_LEN = 256 << 10, /* the last-byte case's message */
	TAIL_ROUNDS = 40,
};

#define RACCESS                                                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static struct q_env env;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *smr, *dmr, *rmr;
static uint8_t *src, *dst, *rd; /* a's source, b's CPU_ID target, a's READ buffer */

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed * 13 + 1);
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t id, void *buf, uint32_t lkey,
		uint32_t len, uint64_t raddr)
{
	struct ibv_sge sge = {(uintptr_t)buf, len, lkey};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = dmr->rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = dmr->rkey;
		wr.imm_data = htobe32(0x5eed);
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* One completion of `cq`, waiting up to about 10 s; its status or -1. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec ts = {0, 1000 * 1000};

	for (int i = 0; i < 10000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : (int)wc->status;
		nanosleep(&ts, NULL);
	}
	return -1;
}

static void case_stream(int cpu)
{
	size_t bytes = atomic_load(&sw_place_stats.pinned_bytes);
	size_t off = atomic_load(&sw_place_stats.pinned_off_cpu);
	int bad = 0;

	t_case("a stream of 64 KiB WRITEs lands whole on the handle's CPU, before each ACK");
	for (int r = 0; r < ROUNDS; r++) {
		fill(src, LEN, (unsigned int)r);
		for (int k = 0; k < NCHUNK; k++)
			CHECK_RET(post(qa, IBV_WR_RDMA_WRITE, (uint64_t)k, src + k * CHUNK,
				       smr->lkey, CHUNK, (uintptr_t)dst + k * CHUNK),
				  0);
		for (int k = 0; k < NCHUNK; k++) {
			struct ibv_wc wc;

			if (!CHECK_EQ_INT(poll_one(env.scq, &wc), IBV_WC_SUCCESS))
				return;
			/* the ACK that completed it came after its bytes */
			bad += memcmp(dst + wc.wr_id * CHUNK, src + wc.wr_id * CHUNK, CHUNK) != 0;
		}
	}
	CHECK_EQ_INT(bad, 0);
	/* every byte placed by the pinned worker (single copy pulls a run in one job) */
	CHECK(atomic_load(&sw_place_stats.pinned_bytes) - bytes >= (size_t)ROUNDS * LEN);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.pinned_off_cpu) - off, 0);
	CHECK_EQ_INT(atomic_load(&sw_place_stats.last_cpu), cpu);
}

static void case_imm(void)
{
	int bad = 0;

	t_case("a WRITE with immediate: its receive completion comes after the data");
	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_recv_wr rw = {.wr_id = 77}, *rbad;
		struct ibv_wc wc;

		fill(src, LEN, (unsigned int)r + 100);
		CHECK_RET(ibv_post_recv(qb, &rw, &rbad), 0);
		CHECK_RET(post(qa, IBV_WR_RDMA_WRITE_WITH_IMM, 1, src, smr->lkey, LEN,
			       (uintptr_t)dst),
			  0);
		if (!CHECK_EQ_INT(poll_one(env.rcq, &wc), IBV_WC_SUCCESS))
			return;
		bad += memcmp(dst, src, LEN) != 0;
		CHECK_EQ_INT(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK_EQ_INT(wc.byte_len, LEN);
		CHECK_EQ_INT(poll_one(env.scq, &wc), IBV_WC_SUCCESS);
	}
	CHECK_EQ_INT(bad, 0);
}

static void case_read_atomic(void)
{
	uint64_t word, *orig = (uint64_t *)(void *)(rd + CHUNK);
	struct ibv_wc wc;

	t_case("a READ and an atomic right behind WRITEs find the written bytes");
	fill(src, LEN, 200);
	memcpy(&word, src + CHUNK - 8, 8);
	memset(rd, 0, 2 * CHUNK);
	/* none waits for the one before: the responder takes them in order */
	CHECK_RET(post(qa, IBV_WR_RDMA_WRITE, 1, src, smr->lkey, CHUNK, (uintptr_t)dst), 0);
	CHECK_RET(post(qa, IBV_WR_RDMA_READ, 2, rd, rmr->lkey, CHUNK, (uintptr_t)dst), 0);
	CHECK_RET(post(qa, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, orig, rmr->lkey, 8,
		       (uintptr_t)dst + CHUNK - 8),
		  0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(poll_one(env.scq, &wc), IBV_WC_SUCCESS);
	CHECK(!memcmp(rd, src, CHUNK));
	CHECK(*orig == word);
	word++;
	CHECK(!memcmp(dst + CHUNK - 8, &word, 8));
}

static void case_last_byte(void)
{
	struct pu_reader tail;

	t_case("a reader polling a WRITE's last byte never sees it before the rest");
	memset(dst, 0, TAIL_LEN);
	if (!CHECK(pu_reader_start(&tail, dst, TAIL_LEN) == 0))
		return;
	for (int r = 1; r <= TAIL_ROUNDS; r++) {
		struct ibv_wc wc;

		memset(src, r, TAIL_LEN);
		atomic_store(&tail.round, r);
		CHECK_RET(post(qa, IBV_WR_RDMA_WRITE, (uint64_t)r, src, smr->lkey, TAIL_LEN,
			       (uintptr_t)dst),
			  0);
		if (!CHECK_EQ_INT(poll_one(env.scq, &wc), IBV_WC_SUCCESS))
			break;
	}
	CHECK_EQ_INT(pu_reader_stop(&tail), 0);
}

/* `qp` to RTS towards `dest`, sending from the PSN its peer expects. 0 or an errno. */
static int connect_to(struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a;

	if (q_bring_up(&env, qp, IBV_QPS_RTR, dest))
		return -1;
	a = q_attr(&env, IBV_QPS_RTS, dest);
	a.sq_psn = a.rq_psn;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | q_required(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS));
}

int main(void)
{
	struct ibv_dmah_init_attr da;
	struct ibv_qp_init_attr ia;
	struct ibv_dmah *d;
	cpu_set_t set;
	int cpu = -1;

	t_start("unit_dmah_stream");
	if (sched_getaffinity(0, sizeof(set), &set)) {
		printf("Bail out! sched_getaffinity: %s\n", t_errname(errno));
		return 1;
	}
	for (int c = CPU_SETSIZE - 1; c >= 0; c--)
		if (CPU_ISSET(c, &set))
			cpu = c; /* the lowest allowed CPU */
	q_env_open(&env, 64);
	memset(&da, 0, sizeof(da));
	da.comp_mask = IBV_DMAH_INIT_ATTR_MASK_CPU_ID | IBV_DMAH_INIT_ATTR_MASK_PH |
		       IBV_DMAH_INIT_ATTR_MASK_TPH_MEM_TYPE;
	da.cpu_id = (uint32_t)cpu;
	da.tph_mem_type = IBV_TPH_MEM_TYPE_VM;
	d = ibv_alloc_dmah(env.ctx, &da);
	src = aligned_alloc(4096, LEN);
	dst = aligned_alloc(4096, LEN);
	rd = aligned_alloc(4096, 2 * CHUNK);
	ia = q_init_attr(&env, IBV_QPT_RC);
	ia.cap.max_send_wr = 2 * NCHUNK;
	qa = ibv_create_qp(env.pd, &ia);
	qb = ibv_create_qp(env.pd, &ia);
	if (cpu < 0 || !d || !src || !dst || !rd || !qa || !qb) {
		printf("Bail out! setup: %s\n", t_errname(errno));
		return 1;
	}
	smr = ibv_reg_mr(env.pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
	rmr = ibv_reg_mr(env.pd, rd, 2 * CHUNK, IBV_ACCESS_LOCAL_WRITE);
	dmr = pu_reg(env.pd, dst, LEN, RACCESS, d);
	if (!smr || !rmr || !dmr || connect_to(qa, qb->qp_num) || connect_to(qb, qa->qp_num)) {
		printf("Bail out! MRs or QPs: %s\n", t_errname(errno));
		return 1;
	}
	if (CHECK(sw_mr(dmr)->hint.has_cpu)) {
		case_stream(cpu);
		case_imm();
		case_read_atomic();
		case_last_byte();
	}

	t_case("teardown");
	CHECK_RET(ibv_destroy_qp(qa), 0);
	CHECK_RET(ibv_destroy_qp(qb), 0);
	CHECK_RET(ibv_dereg_mr(dmr), 0);
	CHECK_RET(ibv_dereg_mr(rmr), 0);
	CHECK_RET(ibv_dereg_mr(smr), 0);
	CHECK_RET(ibv_dealloc_dmah(d), 0);
	q_env_close(&env);
	free(src);
	free(dst);
	free(rd);
	return t_finish();
}

/* SPDX-License-Identifier: MIT */
/*
 * resp_hold.c - READs by reference of one QP written into their
 * requester with one system call (single copy, docs/single-copy.md).
 *
 * A READ by reference (the requester named where its responses would be
 * copied) is answered by writing the bytes there, then sending placed
 * responses (resp.c, push_read). Each write is a process_vm_writev(2),
 * and at 64 KiB most of its cost is the call, not the copy: looking up
 * the process, the access check, pinning its pages. A stream of READs on
 * one QP therefore gets its new READs of up to HOLD_ONE held here, up
 * to HOLD_MAX of them or HOLD_BYTES, and written together: one call, then
 * each READ's responses in order. (A larger READ's call is a small part
 * of its copy; holding it would only delay its answer.)
 *
 * What a READ's answer may not be passed by waits for the write:
 *   - the QP's other responses: any response of the held QP flushes
 *     first (sw_resp_held_first, from resp.c's senders);
 *   - whatever the thread does next with a packet: the receive loop
 *     flushes before every packet but the next READ request by reference
 *     of the held QP (sw_resp_held_before), and at the end of every
 *     batch, before the fence, the ACKs and the ring's done index
 *     (progress.c). So a READ still reads the MR before any later request
 *     of its QP changes it, and the requester's holds of the memory named
 *     (transport/shm_hold.c) cannot end before the write: they end when
 *     done passes the records.
 * Held READs keep references on their QP and MR; nothing is held across
 * receive batches, so a thread that gives up the receive token or goes
 * to sleep holds nothing.
 *
 * A write that fails part-way leaves the READs after the first that did
 * not land whole to be answered with bytes, as push_read's fallback.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/uio.h>

#include "sw/mem/place.h"
#include "sw/transport/transport_priv.h"

enum {
	HOLD_MAX = 32, /* READs held */
	HOLD_IOV = 512, /* the requester's pieces they name, at most (IOV_MAX is 1024) */
	HOLD_BYTES = 1 << 20, /* a READ that would pass this is written first */
	HOLD_ONE = 256 << 10, /* a larger READ is written at once: its call costs little */
};

struct held_read {
	struct sw_rd_res res; /* a copy: resp->res[] is reused */
	uint32_t msn; /* as the READ left it */
	struct sw_mr *mr; /* a reference */
	uint64_t pos; /* the request record's place in the link's ring */
};

static _Thread_local struct {
	struct sw_qp *qp; /* a reference; NULL when nothing is held */
	uint32_t n, nrem;
	size_t bytes;
	pid_t pid;
	void *link;
	uint64_t gen;
	struct held_read r[HOLD_MAX];
	struct iovec loc[HOLD_MAX];
	struct iovec rem[HOLD_IOV];
} held;

/*
 * Write what is held with one call and send each READ's responses, the
 * ones that landed whole as placed; forget them. qp->lock held. The
 * QP's reference is the caller's to drop (returned).
 */
static struct sw_qp *flush_locked(void)
{
	struct sw_qp *qp = held.qp;
	struct sw_engine *eng = sw_engine_of(qp);
	struct sw_pkt first = {
		.ref_link = held.link, .ref_gen = held.gen, .ref_pos = held.r[0].pos};
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	bool live = st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD;
	uint32_t n = held.n, landed = 0;
	ssize_t put = -1;

	held.qp = NULL; /* the senders below must not flush again */
	held.n = 0;
	if (live) {
		sw_place_fence(); /* what this thread placed before lands before it is read */
		if (sw_shm_push_begin(eng, &first)) { /* the oldest record: covers the others */
			put = sw_place_pushv(held.pid, held.loc, n, held.rem, held.nrem);
			sw_shm_push_end(eng, &first);
		}
		for (size_t left = put > 0 ? (size_t)put : 0;
		     landed < n && left >= held.loc[landed].iov_len; landed++)
			left -= held.loc[landed].iov_len;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (live)
			sw_resp_send_read(qp, &held.r[i].res, 0, held.r[i].mr, i < landed,
					  held.r[i].msn);
		sw_mr_put(held.r[i].mr);
	}
	held.nrem = 0;
	held.bytes = 0;
	return qp;
}

/* Contract: see transport_priv.h. */
void sw_resp_held_first(struct sw_qp *qp)
{
	if (held.qp == qp)
		sw_qp_put(flush_locked()); /* the caller holds a reference too */
}

/* Contract: see transport_priv.h. */
void sw_resp_held_flush(void)
{
	struct sw_qp *qp = held.qp;

	if (!qp)
		return;
	sw_qp_get(qp);
	pthread_mutex_lock(&qp->lock);
	sw_qp_put(flush_locked());
	pthread_mutex_unlock(&qp->lock);
	sw_qp_put(qp);
}

/* Contract: see transport_priv.h. */
void sw_resp_held_before(const struct sw_pkt *pkt)
{
	if (!held.qp)
		return;
	if (pkt->opcode == SW_OP_READ_REQ && pkt->ref && pkt->dqpn == held.qp->ibv.qp_base.qp_num)
		return; /* it may be held too (sw_resp_read_hold) */
	sw_resp_held_flush();
}

/* Contract: see transport_priv.h. */
bool sw_resp_read_hold(struct sw_qp *qp, const struct sw_pkt *pkt, const struct sw_rd_res *res,
		       struct sw_mr *mr, uint32_t msn)
{
	size_t sum = 0;

	if (!pkt->ref || !mr || !res->len || res->len > HOLD_ONE || pkt->dma_len != res->len ||
	    !pkt->ref_n || pkt->ref_n > SW_REF_PIECES || !sw_net_tx_batch())
		return false;
	if (held.qp && held.qp != qp)
		return false; /* another QP's are held: this one goes at once */
	if (held.qp && (held.link != pkt->ref_link || held.gen != pkt->ref_gen ||
			held.pid != pkt->ref_pid || held.n == HOLD_MAX ||
			held.nrem + pkt->ref_n > HOLD_IOV || held.bytes + res->len > HOLD_BYTES))
		sw_resp_held_first(qp);
	for (uint32_t i = 0; i < pkt->ref_n; i++) {
		struct sw_ref_piece pc;

		memcpy(&pc, pkt->ref + i * sizeof(pc), sizeof(pc));
		held.rem[held.nrem + i] =
			(struct iovec){.iov_base = (void *)(uintptr_t)pc.addr, .iov_len = pc.len};
		sum += pc.len;
	}
	if (sum != res->len)
		return false; /* push_read's write refuses it and the bytes go in the responses */
	if (!held.qp) {
		sw_qp_get(qp);
		held.qp = qp;
		held.pid = pkt->ref_pid;
		held.link = pkt->ref_link;
		held.gen = pkt->ref_gen;
	}
	sw_mr_get(mr);
	held.loc[held.n] = (struct iovec){.iov_base = sw_mr_host(mr, res->va), .iov_len = res->len};
	held.r[held.n++] =
		(struct held_read){.res = *res, .msn = msn, .mr = mr, .pos = pkt->ref_pos};
	held.nrem += pkt->ref_n;
	held.bytes += res->len;
	return true;
}

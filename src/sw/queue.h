/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the software device's queue objects: CQs, SRQs, QPs, their
 * rings and WQEs. The transport's hooks they call are in sw/transport.h;
 * address handles are control objects (sw/ctrl.h).
 *
 * Ownership and locking:
 *   - A ring is a power-of-two array of fixed-size slots with free-running
 *     32-bit producer/consumer counters.
 *   - A CQ is guarded by cq->lock. Producers are the progress thread and
 *     posting threads (flush and local errors); the consumer is poll_cq.
 *   - A QP is guarded by qp->lock: its SQ and RQ rings, its attributes
 *     and its transport state. post_send/post_recv, modify_qp and the
 *     progress thread all take it. Lock order: qp->lock, then srq->lock,
 *     then cq->lock; never the other way round.
 *   - Lookups by QPN from the transport take a reference (sw_qp_get/put),
 *     so a QP is freed only after the last packet handler is done.
 *
 * Rings live in ordinary memory, or, when the object's PD is a CC parent
 * domain on a CC DMA bounce device, in shared memory from the same source
 * as ibv_alloc_buf (sw_ring_alloc).
 */
#ifndef SV_SW_QUEUE_H
#define SV_SW_QUEUE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sw/ctrl.h"

/* ---- the device's queue state ---- */

/*
 * queue/qp_table.c: the device's queue state (its QPN table), set up
 * and torn down next to sw_mem_dev_init()/_fini(). 0 or -errno.
 */
int sw_queue_dev_init(struct sw_dev *dev);
void sw_queue_dev_fini(struct sw_dev *dev);

/* ---- rings ---- */

struct sw_ring {
	uint8_t *buf;
	size_t buf_len; /* bytes mapped or allocated */
	int shm_fd; /* >= 0: shared memory (CC), else ordinary memory */
	uint32_t nslots; /* power of two */
	uint32_t stride; /* bytes per slot */
	uint32_t prod, cons; /* free-running; used = prod - cons */
};

/*
 * Allocate `nslots` (rounded up to a power of two) slots of `stride`
 * bytes for an object on `pd` (NULL: no PD, e.g. a plain CQ). On a
 * bounce device only a CC parent domain gets memory (shared); anything
 * else is -EOPNOTSUPP, as the kernel refuses VA rings. 0 or -errno.
 */
int sw_ring_alloc(struct sw_ring *r, struct ibv_context *ctx, struct sw_pd *pd, uint32_t nslots,
		  uint32_t stride);
void sw_ring_free(struct sw_ring *r);

static inline uint32_t sw_ring_used(const struct sw_ring *r)
{
	return r->prod - r->cons;
}

static inline void *sw_ring_slot(const struct sw_ring *r, uint32_t idx)
{
	return r->buf + (size_t)(idx & (r->nslots - 1)) * r->stride;
}

/* ---- completion queues ---- */

struct sw_cqe {
	struct ibv_wc wc;
	uint64_t ts_ns; /* completion timestamp, CLOCK_MONOTONIC ns */
	uint64_t wallclock_ns; /* the same instant, CLOCK_REALTIME ns */
};

/* wc_flags a CQ may ask for (anything else is EOPNOTSUPP) */
#define SW_CQ_WC_FLAGS                                                                             \
	((uint64_t)IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                   \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

struct sw_cq {
	struct ibv_cq_ex ibv; /* ibv_cq is its prefix */
	pthread_mutex_t lock;
	struct sw_ring ring; /* struct sw_cqe slots, nslots > cqe */
	/*
	 * Completions in the ring: written under lock after each change of
	 * it (sw_cq_avail_set), read without it by ibv_poll_cq, so that a
	 * poll of an empty CQ takes no lock the receiving thread may hold
	 * (in a stream of small messages, each collision was two futex
	 * calls).
	 */
	atomic_uint avail;
	uint64_t wc_flags; /* ibv_create_cq_wc_flags the CQ reports */
	struct sw_pd *pd; /* parent domain given at creation, or NULL */
	atomic_int usecnt; /* QPs and SRQs using it */
	int armed; /* 0, or 1 + solicited_only */
	bool overflow; /* an overflow was reported */
	uint32_t events_reported; /* completion events delivered to the channel */
	struct sw_cqe *cur; /* cq_ex polling: current entry, or NULL */
	/* CQ moderation (cq_mod.c), under lock; 0/0: none */
	uint16_t mod_count, mod_period_us;
	uint32_t mod_pending; /* completions that met the arm, event held back */
	uint64_t mod_deadline_ns; /* CLOCK_MONOTONIC: the held event is due; 0: none */
	struct sw_cq *mod_next; /* the engine's list of moderated CQs (its lock) */
	bool mod_listed; /* on that list (the engine's lock) */
};

static inline struct sw_cq *sw_cq(struct ibv_cq *cq)
{
	return (struct sw_cq *)cq;
}

/* Publish the ring's fill after a change (cq->lock held). */
static inline void sw_cq_avail_set(struct sw_cq *cq)
{
	atomic_store_explicit(&cq->avail, sw_ring_used(&cq->ring), memory_order_relaxed);
}

/*
 * Add one completion. Raises a completion event if the CQ is armed for
 * it (solicited or error completions satisfy a solicited-only arm). On
 * a full CQ the completion is dropped, IBV_EVENT_CQ_ERR is raised once,
 * and -ENOSPC returned. Any thread; takes cq->lock.
 */
int sw_cq_push(struct sw_cq *cq, const struct ibv_wc *wc, bool solicited);

/*
 * Raise the completion event of an armed CQ now: disarm it, queue the
 * event on its channel, forget any event moderation held back
 * (cq->lock held).
 */
void sw_cq_fire_locked(struct sw_cq *cq);

/* cq_mod.c: CQ moderation (ibv_modify_cq) */

/* Contract: sv_ops.modify_cq. 0, -EINVAL or -EOPNOTSUPP (cq_mod.c). */
int sw_modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);

/*
 * A completion met the CQ's arm (cq->lock held): true if moderation
 * holds its event back (the count not reached, the period not over),
 * false if the event is due now.
 */
bool sw_cq_mod_hold(struct sw_cq *cq);

/*
 * The progress thread's timer for `cq` at `now`: raise a held event
 * whose period is over. Returns the deadline still pending, 0 if none.
 * Takes cq->lock.
 */
uint64_t sw_cq_mod_tick(struct sw_cq *cq, uint64_t now);

/*
 * Drop every queued completion of QP `qp_num` from `cq` (NULL: nothing),
 * keeping the others in order: a QP entering RESET takes its unread
 * completions with it, as mlx5 does. Any thread; takes cq->lock.
 */
void sw_cq_clean(struct sw_cq *cq, uint32_t qp_num);

/* queue/cq.c: the sv_ops CQ slots */
int sw_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr,
		    struct ibv_cq_ex **cq);
int sw_destroy_cq(struct ibv_cq *cq);
int sw_resize_cq(struct ibv_cq *cq, int cqe);
int sw_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
/*
 * cq.c: the calling thread found a CQ of `ctx` empty. Notes it for the
 * progress thread (dev->app_polls), then takes a receive pass while that
 * thread sleeps (sw_transport_poll): true when packets were handled, so
 * that the CQ is worth a second look; else it yields the CPU (the
 * progress thread, or the peer's on a host with as many spinners as
 * CPUs, may need it) and returns false.
 */
bool sw_cq_empty_poll(struct ibv_context *ctx);
int sw_req_notify_cq(struct ibv_cq *cq, int solicited_only);

/* queue/cq_ex.c: point the ibv_cq_ex polling ops of `cq` at the device's */
void sw_cq_ex_install(struct sw_cq *cq);

/* ---- shared receive queues ---- */

struct sw_recv_wqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length; /* sum of the SGE lengths */
	struct ibv_sge sge[]; /* num_sge entries */
};

struct sw_xrcd;

struct sw_srq {
	struct ibv_srq ibv;
	pthread_mutex_t lock;
	struct sw_ring ring; /* struct sw_recv_wqe slots */
	uint32_t max_wr, max_sge;
	uint32_t limit; /* armed when nonzero */
	uint32_t srq_num;
	atomic_int usecnt; /* QPs attached */
	struct sw_pd *pd; /* protection domain proper; holds a reference */
	/* XRC SRQs only (NULL otherwise): */
	struct sw_xrcd *xrcd; /* the handle it was created on; holds a reference */
	struct sw_cq *cq; /* where its receives complete; holds a reference */
	struct sw_srq *xnext; /* the domain's list of XRC SRQs */
};

static inline struct sw_srq *sw_srq(struct ibv_srq *srq)
{
	return (struct sw_srq *)srq;
}

/* Bytes of one receive WQE slot with room for `max_sge` SGEs. */
static inline uint32_t sw_recv_wqe_size(uint32_t max_sge)
{
	return (uint32_t)(sizeof(struct sw_recv_wqe) + (size_t)max_sge * sizeof(struct ibv_sge));
}

/*
 * Take the oldest receive WQE of the SRQ into `out`, which has room for
 * srq->max_sge SGEs (sw_recv_wqe_size(srq->max_sge) bytes). If the SRQ
 * is armed and now holds fewer WQEs than its limit, it is disarmed and
 * IBV_EVENT_SRQ_LIMIT_REACHED is raised. Takes srq->lock (callers may
 * hold qp->lock). 0, or -EAGAIN when the SRQ is empty.
 */
int sw_srq_take(struct sw_srq *srq, struct sw_recv_wqe *out);

/* queue/srq.c: the sv_ops SRQ slots */
int sw_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr,
		     struct ibv_srq **srq);
int sw_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask);
int sw_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int sw_destroy_srq(struct ibv_srq *srq);
int sw_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
int sw_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

/* ---- XRC domains (queue/xrcd.c) ---- */

/*
 * An XRC domain. ibv_open_xrcd() hands out a handle (struct sw_xrcd) per
 * call; handles of one device that name the same inode share the domain
 * (an fd of -1 makes a private one). `lock` guards the list of the
 * domain's XRC SRQs: creating and destroying one writes, the responder
 * reads while it uses an SRQ it found there.
 */
struct sw_xrcd_dom {
	struct sw_dev *dev;
	bool has_inode;
	dev_t ino_dev;
	ino_t ino;
	int nopen; /* handles on it, under the table's lock */
	pthread_rwlock_t lock;
	struct sw_srq *srqs;
	struct sw_xrcd_dom *next; /* the process's table of domains */
};

struct sw_xrcd {
	struct ibv_xrcd ibv;
	struct sw_xrcd_dom *dom;
	atomic_int usecnt; /* XRC SRQs and TGT QPs created on this handle */
};

static inline struct sw_xrcd *sw_xrcd(struct ibv_xrcd *x)
{
	return (struct sw_xrcd *)x;
}

/* The sv_ops slots: open (0, -EBADF, -EAGAIN, -EINVAL, -EOPNOTSUPP, -ENOMEM), close (-EBUSY). */
int sw_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr, struct ibv_xrcd **out);
int sw_close_xrcd(struct ibv_xrcd *x);

/* Add (on create) or take out (on destroy) an XRC SRQ of the domain of srq->xrcd. */
void sw_xrcd_srq_add(struct sw_srq *srq);
void sw_xrcd_srq_remove(struct sw_srq *srq);

/*
 * The XRC SRQ numbered `srqn` in `dom`, or NULL. The caller holds
 * dom->lock for reading for as long as it uses the SRQ.
 */
struct sw_srq *sw_xrcd_srq_find(struct sw_xrcd_dom *dom, uint32_t srqn);

struct sw_qp;
/*
 * One handle of XRC TGT QP `real` (the creator's or an ibv_open_qp()
 * one) goes away; true when it was the last, and the QP itself goes.
 */
bool sw_xrcd_qp_close(struct sw_qp *real);
/* Free ibv_open_qp() handle `h` (its reference on the QP and its XRC domain handle go). */
void sw_xrcd_qp_handle_free(struct sw_qp *h);

/* ---- queue pairs ---- */

struct sw_send_wqe {
	uint64_t wr_id;
	uint32_t opcode; /* enum ibv_wr_opcode */
	uint32_t send_flags; /* enum ibv_send_flags; SIGNALED also under sq_sig_all,
				INLINE only when data[] holds the payload */
	__be32 imm_data; /* SEND_WITH_INV, LOCAL_INV: the rkey to invalidate */
	uint32_t num_sge; /* 0 when the payload is inline */
	uint32_t length; /* payload bytes */
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct sw_av av;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
		struct sw_mw_bind bind; /* BIND_MW */
	} wr;
	/* requester state */
	uint32_t first_psn; /* PSN of the first packet, once sent */
	uint32_t npkts; /* packets (PSNs) the message takes */
	uint16_t state; /* transport-private; 0 when posted */
	uint8_t fail_status; /* transport-private: an enum ibv_wc_status */
	uint8_t pushed; /* transport-private: a READ asked by reference, or a WRITE
			   written into the target (single copy) */
	uint32_t xrc_srqn; /* XRC INI: the remote XRC SRQ (also keeps data[] 8-byte aligned) */
	uint8_t data[]; /* struct ibv_sge[num_sge], or inline bytes */
};

/* QP attributes kept after modify_qp (the transport reads them). */
struct sw_qp_attr {
	enum ibv_mtu path_mtu;
	uint32_t mtu; /* path MTU in bytes */
	uint32_t dest_qp_num;
	uint32_t qkey;
	uint32_t sq_psn, rq_psn;
	unsigned int access; /* qp_access_flags */
	struct ibv_ah_attr ah_attr;
	struct sw_av av; /* resolved ah_attr (RC) */
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
	/*
	 * SQD: modify_qp sets it on RTS->SQD while send WQEs are outstanding.
	 * The transport clears it once no WQE is in progress any more (also
	 * checking when it sees the SQD transition) and then, if
	 * en_sqd_async_notify, raises IBV_EVENT_SQ_DRAINED with sw_qp_event().
	 * With no WQE outstanding, modify_qp raises the event itself.
	 */
	uint8_t sq_draining;
	uint16_t pkey_index;
	uint8_t port_num;
	bool en_sqd_async_notify; /* as given on the last RTS->SQD */
	/* alternate path: validated, stored and reported; never used (no APM) */
	struct ibv_ah_attr alt_ah_attr;
	uint16_t alt_pkey_index;
	uint8_t alt_port_num, alt_timeout;
	enum ibv_mig_state path_mig_state;
};

struct sw_req; /* transport/req.c: requester and completer state */
struct sw_resp; /* transport/resp.c: responder state */

/*
 * Per-QP counters of the diagnostics view (SOFTVERBS_STATS=1), printed
 * when the QP is destroyed (queue/qp_stats.c). The names match the
 * device's (transport/transport_priv.h, struct sw_counters), so SW_COUNT() there bumps
 * both. tx counts every packet the QP handed to the network, including
 * those fault injection then lost.
 */
struct sw_qp_counters {
	atomic_ullong tx_pkts, tx_bytes, rx_pkts, rx_bytes;
	atomic_ullong retransmits, timeouts, duplicates;
	atomic_ullong seq_naks_rx, rnr_naks_rx, err_naks_rx;
	atomic_ullong seq_naks_tx, rnr_naks_tx, err_naks_tx;
	atomic_ullong drops_malformed, drops_state, drops_qkey, drops_no_recv;
	atomic_ullong drops_out_of_window;
	atomic_ullong wc_ok, wc_errors, wc_flushed; /* completions, by status */
};

/* Add `n` to the QP's counter `field` (relaxed: a diagnostic). */
#define SW_QP_COUNT(qp, field, n)                                                                  \
	atomic_fetch_add_explicit(&(qp)->cnt.field, (n), memory_order_relaxed)

struct sw_qp {
	struct ibv_qp_ex ibv; /* ibv_qp is its prefix */
	pthread_mutex_t lock;
	atomic_int refcnt; /* 1 while it exists + transport lookups */
	struct sw_pd *pd; /* as given (may be a parent domain); NULL for XRC TGT */
	struct sw_cq *scq, *rcq; /* NULL where the type has none (XRC: rcq; TGT: both) */
	struct sw_srq *srq;
	/*
	 * XRC TGT: the XRC domain handle it was created on (holds a reference),
	 * and the handles that share it (queue/xrcd.c): `nopen` counts the
	 * creator's and every ibv_open_qp() handle; the QP goes with the last.
	 * An ibv_open_qp() handle is a struct sw_qp of its own whose `real` is
	 * the QP; every verb on it acts on `real`.
	 */
	struct sw_xrcd *xrcd;
	struct sw_qp *real;
	int nopen; /* guarded by the XRC domain table's lock */
	bool creator_gone; /* TGT: its creator's handle was destroyed: no more events */
	bool sq_sig_all;
	bool is_ex; /* created with send_ops_flags: ibv_qp_to_qp_ex works */
	uint64_t send_ops_flags;
	/*
	 * As granted. With an SRQ, max_recv_wr is 0 and max_recv_sge is the
	 * SRQ's max_sge (the room a receive WQE taken from it needs); the
	 * API reports 0 for both, as the kernel does.
	 */
	struct ibv_qp_cap cap;
	struct sw_qp_attr attr;
	struct sw_ring sq; /* struct sw_send_wqe slots */
	struct sw_ring rq; /* struct sw_recv_wqe slots (unused with an SRQ) */
	struct sw_req *req;
	struct sw_resp *resp;
	/* a copy pulled for the responder failed (transport/sge.c): -errno, else 0 */
	atomic_int pull_err;
	uint32_t qpn; /* our copy of qp_num (the QPN table's key) */
	uint64_t uid; /* never reused in the process: names the QP a type 2 window is bound to */
	/* ibv_wr_* session state */
	struct sw_send_wqe *wr_cur;
	uint32_t wr_prod; /* producer index while a session is open */
	int wr_err;
	uint32_t wr_cur_set; /* setters the current WQE has had (qp_ex.c) */
	struct sw_qp_counters cnt; /* SOFTVERBS_STATS */
};

static inline struct sw_qp *sw_qp(struct ibv_qp *qp)
{
	return (struct sw_qp *)qp;
}

/* queue/qp_table.c: take another reference on a QP the caller holds one on */
void sw_qp_get(struct sw_qp *qp);
/* Drop a reference; the last one frees the rings and the QP. */
void sw_qp_put(struct sw_qp *qp);

/*
 * queue/qp.c: raise async event `type` on the QP (IBV_EVENT_SQ_DRAINED,
 * _COMM_EST, _QP_FATAL, ...) through the core's queue, which lets
 * ibv_destroy_qp drop it unread or wait for its ack. Any thread (may
 * hold qp->lock). 0 or -errno.
 */
int sw_qp_event(struct sw_qp *qp, enum ibv_event_type type);

/*
 * The queue layer's half of entering IBV_QPS_ERR: the state becomes ERR
 * and the rings are flushed: every posted send and receive WQE completes
 * with IBV_WC_WR_FLUSH_ERR (receives only without an SRQ), signalled or
 * not, oldest first, and the rings end up empty. It calls nothing of the
 * transport: the caller first lets the transport drop what it holds
 * (sw_transport_qp_error below), so that a receive WQE the responder had
 * taken completes before those still in the ring. Caller holds qp->lock.
 */
void sw_qp_error_locked(struct sw_qp *qp);

/*
 * Start completion `wc` of work request `wr_id` on `qp`: every field zero
 * but these, the QP named by its own number (qp->qpn). The builders of
 * completions add byte_len, flags and the receive fields.
 */
static inline void sw_wc_init(struct ibv_wc *wc, const struct sw_qp *qp, uint64_t wr_id,
			      enum ibv_wc_status status, enum ibv_wc_opcode opcode)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = status;
	wc->opcode = opcode;
	wc->qp_num = qp->qpn;
}

/*
 * queue/qp_stats.c: push `wc` of `qp` to `cq` (sw_cq_push), counting it
 * by status for the QP and its device.
 */
int sw_qp_cq_push(struct sw_qp *qp, struct sw_cq *cq, const struct ibv_wc *wc, bool solicited);
/* SOFTVERBS_STATS=1: the QP's counters on stderr (at destroy). */
void sw_qp_stats_report(struct sw_qp *qp);

/* The completion opcode of a send work request opcode (queue/qp_flush.c). */
enum ibv_wc_opcode sw_send_wc_opcode(uint32_t wr_opcode);

/*
 * Take the next receive WQE for an incoming SEND (from the SRQ if the QP
 * has one), copying it to `out` (room for qp->cap.max_recv_sge SGEs).
 * Raises the SRQ limit event when the SRQ drops below its armed limit.
 * Caller holds qp->lock. 0, or -EAGAIN when none is posted (RNR).
 */
int sw_qp_take_recv(struct sw_qp *qp, struct sw_recv_wqe *out);

/*
 * QPN space of the device (queue/qp_table.c): register / unregister a QP
 * for incoming packets. Insert assigns qp->qpn and ibv.qp_base.qp_num: a
 * 24-bit QPN, never 0, 1 or 0xffffff, counting up from a random base and
 * unique among live QPs; -ENOMEM beyond SW_MAX_QP QPs. Any thread.
 */
int sw_qp_table_insert(struct sw_dev *dev, struct sw_qp *qp);
void sw_qp_table_remove(struct sw_dev *dev, struct sw_qp *qp);
/* Returns a referenced QP (release with sw_qp_put) or NULL. */
struct sw_qp *sw_qp_table_lookup(struct sw_dev *dev, uint32_t qpn);

/* queue/qp.c, queue/post.c, queue/qp_modify.c: the sv_ops QP slots */
int sw_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr, struct ibv_qp **qp);
int sw_destroy_qp(struct ibv_qp *qp);
int sw_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int sw_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
int sw_qp_to_qp_ex(struct ibv_qp *qp, struct ibv_qp_ex **qpx);
int sw_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags);
int sw_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sw_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sw_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);

/* BIND_MW and LOCAL_INV: work requests the requester executes itself, sending nothing. */
static inline bool sw_wr_is_local(uint32_t op)
{
	return op == IBV_WR_BIND_MW || op == IBV_WR_LOCAL_INV;
}

int sw_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *attr, struct ibv_qp **qp);

/* The QP a verb acts on: itself, or for an ibv_open_qp() handle the TGT QP it opened. */
static inline struct sw_qp *sw_qp_real(struct ibv_qp *qp)
{
	struct sw_qp *q = (struct sw_qp *)qp;

	return q->real ? q->real : q;
}

#endif

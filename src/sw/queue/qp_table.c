/* SPDX-License-Identifier: MIT */
/*
 * qp_table.c - the device's QPN space: QPN -> QP for incoming packets.
 *
 * QPNs are 24-bit and handed out counting up from a random base, so that
 * a restarted process does not reuse the QPNs its peers may still send
 * to. QPN 0 and 1 (the special QPs) and 0xffffff (multicast) are never
 * used. The table has twice as many slots as the device allows QPs and
 * a QP lives in slot qpn % nslots: allocation skips candidates whose
 * slot is taken, so a lookup is one probe, a QPN is unique among live
 * QPs, and a freed QPN comes back only after the counter wraps.
 *
 * Lookups (the progress thread) take the read lock and a reference;
 * insert and remove (create / destroy) take the write lock. The QP's
 * reference count lives here too: the last sw_qp_put() frees the QP.
 */
#include <stdlib.h>

#include "sw/queue/qp_priv.h"
#include "sw/wire.h"

/* Contract: see queue.h. Allocates the QPN table with a random first QPN. */
int sw_queue_dev_init(struct sw_dev *dev)
{
	struct sw_qp_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->slot = calloc(SW_QP_TABLE_SLOTS, sizeof(*t->slot));
	if (!t->slot) {
		free(t);
		return -ENOMEM;
	}
	pthread_rwlock_init(&t->lock, NULL);
	t->next = sw_key_random() & SW_QPN_MASK;
	dev->qps = t;
	return 0;
}

/* Contract: see queue.h. QPs still in the table are not freed (they belong to contexts). */
void sw_queue_dev_fini(struct sw_dev *dev)
{
	struct sw_qp_table *t = dev->qps;

	if (!t)
		return;
	pthread_rwlock_destroy(&t->lock);
	free(t->slot);
	free(t);
	dev->qps = NULL;
}

/* Contract: true for QPNs the allocator must never hand out. */
static bool qpn_reserved(uint32_t qpn)
{
	return qpn <= 1 || qpn == SW_QPN_MCAST;
}

/* Contract: see queue.h. */
int sw_qp_table_insert(struct sw_dev *dev, struct sw_qp *qp)
{
	struct sw_qp_table *t = dev->qps;
	uint32_t qpn;

	pthread_rwlock_wrlock(&t->lock);
	if (t->count >= SW_MAX_QP) {
		pthread_rwlock_unlock(&t->lock);
		return -ENOMEM;
	}
	/* At most half the slots are taken, so this ends within a few probes on average. */
	for (;;) {
		qpn = t->next;
		t->next = (t->next + 1) & SW_QPN_MASK;
		if (!qpn_reserved(qpn) && !t->slot[qpn & (SW_QP_TABLE_SLOTS - 1)])
			break;
	}
	qp->qpn = qpn;
	qp->ibv.qp_base.qp_num = qpn;
	t->slot[qpn & (SW_QP_TABLE_SLOTS - 1)] = qp;
	t->count++;
	pthread_rwlock_unlock(&t->lock);
	return 0;
}

/* Contract: see queue.h. Its QPN no longer resolves once this returns. */
void sw_qp_table_remove(struct sw_dev *dev, struct sw_qp *qp)
{
	struct sw_qp_table *t = dev->qps;
	struct sw_qp **s = &t->slot[qp->qpn & (SW_QP_TABLE_SLOTS - 1)];

	pthread_rwlock_wrlock(&t->lock);
	if (*s == qp) {
		*s = NULL;
		t->count--;
	}
	pthread_rwlock_unlock(&t->lock);
}

/* Contract: see queue.h. */
struct sw_qp *sw_qp_table_lookup(struct sw_dev *dev, uint32_t qpn)
{
	struct sw_qp_table *t = dev->qps;
	struct sw_qp *qp;

	if (qpn > SW_QPN_MASK)
		return NULL;
	pthread_rwlock_rdlock(&t->lock);
	qp = t->slot[qpn & (SW_QP_TABLE_SLOTS - 1)];
	if (qp && qp->qpn == qpn)
		sw_qp_get(qp);
	else
		qp = NULL;
	pthread_rwlock_unlock(&t->lock);
	return qp;
}

/* Contract: take another reference on a QP the caller holds one on. */
void sw_qp_get(struct sw_qp *qp)
{
	atomic_fetch_add_explicit(&qp->refcnt, 1, memory_order_relaxed);
}

/* Contract: see queue.h. */
void sw_qp_put(struct sw_qp *qp)
{
	if (atomic_fetch_sub_explicit(&qp->refcnt, 1, memory_order_acq_rel) != 1)
		return;
	sw_ring_free(&qp->sq);
	sw_ring_free(&qp->rq);
	pthread_mutex_destroy(&qp->lock);
	pthread_cond_destroy(&qp->ibv.qp_base.cond);
	pthread_mutex_destroy(&qp->ibv.qp_base.mutex);
	free(qp);
}

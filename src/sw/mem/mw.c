/* SPDX-License-Identifier: MIT */
/*
 * mw.c - memory windows, type 1 and type 2B, as rxe has them.
 *
 * A window lives in the MR table under its own key, which always names
 * it: an unbound window has an entry that resolves nothing. Entries are
 * never changed in place; a bind or an invalidation builds a new entry
 * and swaps it in (sw_mr_table_swap), so a transfer that resolved the
 * old one finishes with what it saw, and the next lookup sees the new.
 * A bound entry holds a reference on the MR beneath and counts in its
 * nmw, which makes ibv_dereg_mr refuse (mr.c).
 *
 * Keys: SW_KEY_MW | index << 8 | key part. The 23-bit index is drawn at
 * random, free among the device's windows (no key of its 256 is in the
 * table: the window's own entry always is one, so a later window never
 * takes the index); the key part is random at allocation and what the
 * bind asks afterwards (the low 8 bits of the new rkey, ibv_inc_rkey).
 *
 * Bind rules (rxe's rxe_check_bind_mw, IBTA 10.6.7), any failure
 * -EINVAL, which the requester turns into IBV_WC_MW_BIND_ERR:
 *   - the window's current key is the one the request names (mw->rkey
 *     at post time), and the MR's key names an MR (nonzero length);
 *   - access flags within the supported set;
 *   - type 1: not zero-based;
 *   - type 2: unbound; the QP's PD is the window's; an MR and a nonzero
 *     length (a type 2 window is unbound by invalidation only);
 *   - the MR: not zero-based, has IBV_ACCESS_MW_BIND, has LOCAL_WRITE if
 *     the window grants REMOTE_WRITE or REMOTE_ATOMIC, and holds the
 *     range [addr, addr + length), zero-based or not (a zero-based
 *     window's address 0 is addr: rxe checks only its length then).
 * A type 1 bind of length 0 unbinds. A type 2 window is bound to the QP
 * that bound it: only that QP's requests resolve through it.
 *
 * Invalidation (LOCAL_INV, SEND with Invalidate), failures -EINVAL: the
 * key names a window (an application's MR cannot be invalidated, as rxe
 * refuses user MRs), of type 2, bound, of the QP's PD; remotely, bound
 * to the QP the SEND arrived on (type 2B).
 */
#include <stdlib.h>
#include <string.h>

#include "sw/ctrl.h"
#include "sw/mem.h"

/* Access bits a bind may name: the registration set and ZERO_BASED. */
#define MW_ACCESS_OK                                                                               \
	((((unsigned int)IBV_ACCESS_FLUSH_PERSISTENT << 1) - 1) |                                  \
	 (unsigned int)IBV_ACCESS_OPTIONAL_RANGE)

/* A new unbound entry for `mw` under `key`; NULL if out of memory. */
static struct sw_mr *entry_new(struct sw_mw *mw, uint32_t key)
{
	struct sw_mr *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	atomic_init(&e->refcnt, 1); /* the table's */
	atomic_init(&e->nmw, 0);
	e->key = key;
	e->mw = mw;
	e->pd = mw->pd;
	e->fd = -1;
	return e;
}

/* Swap `e` in for the window's current entry and release that one. Caller holds mw_lock. */
static int entry_swap(struct sw_dev *dev, struct sw_mw *mw, struct sw_mr *e)
{
	struct sw_mr *old = mw->entry;
	int ret = sw_mr_table_swap(&dev->mrs, old, e);

	if (ret)
		return ret;
	mw->entry = e;
	if (old) {
		if (old->parent)
			atomic_fetch_sub(&old->parent->nmw, 1);
		sw_mr_put(old);
	}
	return 0;
}

/* A free key for a new window: an index none of whose keys is live. Caller holds mw_lock. */
static uint32_t free_key(struct sw_dev *dev)
{
	for (;;) {
		uint32_t base = SW_KEY_MW | (sw_key_random() & 0x7fffff00u);
		uint32_t k;

		for (k = 0; k < 256; k++) {
			struct sw_mr *e = sw_mr_table_lookup(&dev->mrs, base | k);

			if (e) {
				sw_mr_put(e);
				break;
			}
		}
		if (k == 256)
			return base | (sw_key_random() & 0xffu);
	}
}

/* Contract: the sv_ops alloc_mw slot: type 1 or 2 (else -EINVAL); -ENOMEM at SW_MAX_MW. */
int sw_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type, struct ibv_mw **out)
{
	struct sw_dev *dev = sw_dev_of(ibpd->context);
	struct sw_mw *mw;
	struct sw_mr *e;
	int ret;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return -EINVAL;
	if (atomic_fetch_add(&dev->nmw, 1) >= SW_MAX_MW) {
		atomic_fetch_sub(&dev->nmw, 1);
		return -ENOMEM;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		atomic_fetch_sub(&dev->nmw, 1);
		return -ENOMEM;
	}
	mw->pd = sw_pd_base(ibpd);
	mw->ibv.context = ibpd->context;
	mw->ibv.pd = ibpd;
	mw->ibv.type = type;
	pthread_mutex_lock(&dev->mw_lock);
	e = entry_new(mw, free_key(dev));
	ret = e ? entry_swap(dev, mw, e) : -ENOMEM;
	pthread_mutex_unlock(&dev->mw_lock);
	if (ret) {
		free(e);
		free(mw);
		atomic_fetch_sub(&dev->nmw, 1);
		return ret;
	}
	mw->ibv.rkey = e->key;
	mw->ibv.handle = e->key;
	atomic_fetch_add(&mw->pd->usecnt, 1);
	*out = &mw->ibv;
	return 0;
}

/* Take the window's entry out of the table (if still in) and free the window. Caller holds mw_lock.
 */
static void mw_destroy(struct sw_dev *dev, struct sw_mw *mw)
{
	struct sw_mr *e = mw->entry;

	sw_mr_table_remove(&dev->mrs, e);
	if (e->parent)
		atomic_fetch_sub(&e->parent->nmw, 1);
	sw_mr_put(e);
	atomic_fetch_sub(&mw->pd->usecnt, 1);
	atomic_fetch_sub(&dev->nmw, 1);
	free(mw);
}

/*
 * Contract: the sv_ops dealloc_mw slot. A bound window is unbound first
 * (rxe does the same): its key stops resolving at once. Always 0.
 */
int sw_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sw_dev *dev = sw_dev_of(ibmw->context);

	pthread_mutex_lock(&dev->mw_lock);
	mw_destroy(dev, sw_mw(ibmw));
	pthread_mutex_unlock(&dev->mw_lock);
	return 0;
}

/* The window whose current key is `rkey`, or NULL. Caller holds mw_lock (the window stays). */
static struct sw_mw *mw_by_key(struct sw_dev *dev, uint32_t rkey)
{
	struct sw_mr *e;
	struct sw_mw *mw;

	if (!(rkey & SW_KEY_MW))
		return NULL;
	e = sw_mr_table_lookup(&dev->mrs, rkey);
	if (!e)
		return NULL;
	mw = e->mw;
	sw_mr_put(e);
	return mw;
}

/* The rules on the MR beneath (see the top); 0 or -EINVAL. */
static int check_mr(const struct sw_mr *mr, const struct sw_mw_bind *b)
{
	unsigned int a = (unsigned int)mr->access;

	if ((a & IBV_ACCESS_ZERO_BASED) || !(a & IBV_ACCESS_MW_BIND))
		return -EINVAL;
	if ((b->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(a & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return sw_mr_check_range(mr, b->addr, b->length, 0);
}

/* The rules on the window and the request (see the top); 0 or -EINVAL. */
static int check_bind(const struct sw_mw *mw, const struct sw_pd *qp_pd, const struct sw_mr *mr,
		      const struct sw_mw_bind *b)
{
	if (b->access & ~MW_ACCESS_OK)
		return -EINVAL;
	if (mw->ibv.type == IBV_MW_TYPE_1) {
		if (b->access & IBV_ACCESS_ZERO_BASED)
			return -EINVAL;
	} else if (mw->entry->parent || qp_pd != mw->pd || !mr || !b->length) {
		return -EINVAL;
	}
	return mr ? check_mr(mr, b) : 0;
}

/* Contract: see sw/mem.h and the rules at the top. */
int sw_mw_bind(struct sw_dev *dev, const struct sw_pd *qp_pd, uint64_t qp_uid,
	       const struct sw_mw_bind *b)
{
	struct sw_mr *mr = NULL, *e = NULL;
	struct sw_mw *mw;
	int ret = -EINVAL;

	pthread_mutex_lock(&dev->mw_lock);
	mw = mw_by_key(dev, b->mw_rkey);
	if (!mw)
		goto out;
	if (b->length) {
		mr = sw_mr_table_lookup(&dev->mrs, b->mr_lkey);
		if (!mr || mr->mw)
			goto out;
	}
	ret = check_bind(mw, qp_pd, mr, b);
	if (ret)
		goto out;
	ret = -ENOMEM;
	e = entry_new(mw, (mw->entry->key & ~0xffu) | (b->new_rkey & 0xffu));
	if (!e)
		goto out;
	if (mr) {
		e->parent = mr; /* the lookup's reference passes to the entry */
		atomic_fetch_add(&mr->nmw, 1);
		e->host = sw_mr_host(mr, b->addr);
		e->buf_tag = mr->buf_tag; /* inside the MR, so inside its buffer */
		e->iova = (b->access & IBV_ACCESS_ZERO_BASED) ? 0 : b->addr;
		e->length = b->length;
		e->access = (int)(b->access & ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE);
		e->hint = mr->hint;
		e->has_hint = mr->has_hint;
		if (mw->ibv.type == IBV_MW_TYPE_2)
			e->qp_uid = qp_uid;
		mr = NULL;
	}
	ret = entry_swap(dev, mw, e);
	if (ret)
		sw_mr_put(e); /* drops the MR with it */
out:
	pthread_mutex_unlock(&dev->mw_lock);
	if (mr)
		sw_mr_put(mr);
	return ret;
}

/* Contract: see sw/mem.h and the rules at the top. */
int sw_mw_invalidate(struct sw_dev *dev, uint32_t rkey, const struct sw_pd *qp_pd, uint64_t qp_uid,
		     bool remote)
{
	struct sw_mw *mw;
	struct sw_mr *e;
	int ret = -EINVAL;

	pthread_mutex_lock(&dev->mw_lock);
	mw = mw_by_key(dev, rkey);
	if (!mw || mw->ibv.type != IBV_MW_TYPE_2 || !mw->entry->parent || mw->pd != qp_pd)
		goto out;
	if (remote && mw->entry->qp_uid != qp_uid)
		goto out;
	e = entry_new(mw, rkey);
	ret = e ? entry_swap(dev, mw, e) : -ENOMEM;
	if (ret)
		free(e);
out:
	pthread_mutex_unlock(&dev->mw_lock);
	return ret;
}

static bool mw_of_ctx(const struct sw_mr *e, const void *ctx)
{
	return e->mw && e->mw->ibv.context == ctx;
}

/* Contract: see sw/mem.h. */
void sw_mw_ctx_close(struct ibv_context *ctx)
{
	struct sw_dev *dev = sw_dev_of(ctx);
	struct sw_mr *batch[64];
	uint32_t cursor = 0;
	size_t n, i;

	pthread_mutex_lock(&dev->mw_lock);
	do {
		n = sw_mr_table_remove_matching(&dev->mrs, mw_of_ctx, ctx, &cursor, batch,
						SV_ARRAY_SIZE(batch));
		for (i = 0; i < n; i++)
			mw_destroy(dev, batch[i]->mw); /* its entry is out already */
	} while (n == SV_ARRAY_SIZE(batch));
	pthread_mutex_unlock(&dev->mw_lock);
}

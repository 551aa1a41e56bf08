/* SPDX-License-Identifier: MIT */
/*
 * xrcd.c - XRC domains: ibv_open_xrcd, ibv_close_xrcd, and the list of
 * XRC SRQs each domain keeps for the responder.
 *
 * Every ibv_open_xrcd() returns a handle of its own (struct sw_xrcd), as
 * rdma-core does; the handle points at a domain (struct sw_xrcd_dom).
 * With an fd, the domain is the one of the fd's inode on that device
 * (any context of it): the first open with O_CREAT makes it, later ones
 * share it, each counted, and the last close frees it. With fd -1 the
 * domain is private to the handle. The rules are the kernel's
 * (ib_uverbs_open_xrcd) after rdma-core's:
 *   comp_mask beyond FD | OFLAGS                    EOPNOTSUPP
 *   comp_mask without FD or without OFLAGS          EINVAL
 *   fd not open                                     EBADF
 *   no domain for the inode and no O_CREAT          EAGAIN
 *   a domain for the inode and O_EXCL               EINVAL
 * Other oflags bits are ignored. ibv_close_xrcd of a handle with XRC SRQs
 * or XRC TGT QPs created on it gives EBUSY.
 *
 * The device is one per process, so the table is the process's: two
 * processes that open the same file get a domain each
 * (docs/compatibility.md, "XRC").
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "sw/queue.h"

#define SW_XRCD_COMP_MASK (IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sw_xrcd_dom *table; /* domains with an inode */

/* Contract: the domain of (dev, inode), or NULL (table_lock held). */
static struct sw_xrcd_dom *dom_find(const struct sw_dev *dev, const struct stat *st)
{
	struct sw_xrcd_dom *d;

	for (d = table; d; d = d->next)
		if (d->dev == dev && d->ino_dev == st->st_dev && d->ino == st->st_ino)
			return d;
	return NULL;
}

/* Contract: a new domain of `dev` for the inode of `st` (NULL: private), or NULL. */
static struct sw_xrcd_dom *dom_new(struct sw_dev *dev, const struct stat *st)
{
	struct sw_xrcd_dom *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->dev = dev;
	pthread_rwlock_init(&d->lock, NULL);
	if (st) {
		d->has_inode = true;
		d->ino_dev = st->st_dev;
		d->ino = st->st_ino;
		d->next = table;
		table = d;
	}
	return d;
}

/* Contract: drop one handle's count of `d`; the last frees it (table_lock held). */
static void dom_put(struct sw_xrcd_dom *d)
{
	struct sw_xrcd_dom **pp;

	if (--d->nopen > 0)
		return;
	if (d->has_inode) {
		for (pp = &table; *pp != d; pp = &(*pp)->next)
			;
		*pp = d->next;
	}
	pthread_rwlock_destroy(&d->lock);
	free(d);
}

/*
 * Contract: the domain an open request names, counted for one more
 * handle (table_lock held). 0 or -errno per the rules at the top.
 */
static int dom_get(struct sw_dev *dev, const struct ibv_xrcd_init_attr *attr,
		   struct sw_xrcd_dom **out)
{
	struct sw_xrcd_dom *d = NULL;
	struct stat st;

	if (attr->fd != -1) {
		if (fstat(attr->fd, &st))
			return -EBADF;
		d = dom_find(dev, &st);
		if (!d && !(attr->oflags & O_CREAT))
			return -EAGAIN;
		if (d && (attr->oflags & O_EXCL))
			return -EINVAL;
	}
	if (!d)
		d = dom_new(dev, attr->fd != -1 ? &st : NULL);
	if (!d)
		return -ENOMEM;
	d->nopen++;
	*out = d;
	return 0;
}

/* Contract: sv_ops.open_xrcd (see the top). */
int sw_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *attr, struct ibv_xrcd **out)
{
	struct sw_xrcd *x;
	int ret;

	if (!attr)
		return -EINVAL;
	if (attr->comp_mask & ~(uint32_t)SW_XRCD_COMP_MASK)
		return -EOPNOTSUPP;
	if ((attr->comp_mask & SW_XRCD_COMP_MASK) != SW_XRCD_COMP_MASK)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	pthread_mutex_lock(&table_lock);
	ret = dom_get(sw_dev_of(ctx), attr, &x->dom);
	pthread_mutex_unlock(&table_lock);
	if (ret) {
		free(x);
		return ret;
	}
	x->ibv.context = ctx;
	atomic_init(&x->usecnt, 0);
	*out = &x->ibv;
	return 0;
}

/* Contract: sv_ops.close_xrcd: -EBUSY while SRQs or TGT QPs of the handle exist. */
int sw_close_xrcd(struct ibv_xrcd *ibx)
{
	struct sw_xrcd *x = sw_xrcd(ibx);

	if (atomic_load(&x->usecnt) > 0)
		return -EBUSY;
	pthread_mutex_lock(&table_lock);
	dom_put(x->dom);
	pthread_mutex_unlock(&table_lock);
	free(x);
	return 0;
}

/* Contract: see queue.h. */
void sw_xrcd_srq_add(struct sw_srq *srq)
{
	struct sw_xrcd_dom *d = srq->xrcd->dom;

	pthread_rwlock_wrlock(&d->lock);
	srq->xnext = d->srqs;
	d->srqs = srq;
	pthread_rwlock_unlock(&d->lock);
}

/* Contract: see queue.h. Waits for a responder using the SRQ. */
void sw_xrcd_srq_remove(struct sw_srq *srq)
{
	struct sw_xrcd_dom *d = srq->xrcd->dom;
	struct sw_srq **pp;

	pthread_rwlock_wrlock(&d->lock);
	for (pp = &d->srqs; *pp; pp = &(*pp)->xnext) {
		if (*pp == srq) {
			*pp = srq->xnext;
			break;
		}
	}
	pthread_rwlock_unlock(&d->lock);
}

/* Contract: see queue.h. */
struct sw_srq *sw_xrcd_srq_find(struct sw_xrcd_dom *dom, uint32_t srqn)
{
	struct sw_srq *s;

	for (s = dom->srqs; s; s = s->xnext)
		if (s->srq_num == srqn)
			return s;
	return NULL;
}

/* Contract: see queue.h. */
bool sw_xrcd_qp_close(struct sw_qp *real)
{
	bool last;

	pthread_mutex_lock(&table_lock);
	last = --real->nopen == 0;
	pthread_mutex_unlock(&table_lock);
	return last;
}

/* Contract: count one more handle of TGT QP `real`; -EINVAL once its last one went. */
static int qp_open_ref(struct sw_qp *real)
{
	int ret = 0;

	pthread_mutex_lock(&table_lock);
	if (real->nopen > 0)
		real->nopen++;
	else
		ret = -EINVAL;
	pthread_mutex_unlock(&table_lock);
	return ret;
}

/*
 * Contract: the XRC TGT QP numbered `qpn` on the device of `ctx` whose
 * domain is that of `x`, referenced (sw_qp_put), or NULL.
 */
static struct sw_qp *tgt_lookup(struct ibv_context *ctx, uint32_t qpn, const struct sw_xrcd *x)
{
	struct sw_qp *qp = sw_qp_table_lookup(sw_dev_of(ctx), qpn);

	if (qp && (qp->real || qp->ibv.qp_base.qp_type != IBV_QPT_XRC_RECV || !qp->xrcd ||
		   qp->xrcd->dom != x->dom)) {
		sw_qp_put(qp);
		qp = NULL;
	}
	return qp;
}

/*
 * Contract: sv_ops.open_qp: a new handle on an existing XRC TGT QP of the
 * same XRC domain, as rdma-core and the kernel give it: comp_mask beyond
 * NUM | XRCD | CONTEXT | TYPE -> EOPNOTSUPP; without XRCD, NUM or TYPE, or
 * an XRC domain handle of another context -> EINVAL; a type other than
 * XRC_RECV, or no TGT QP of that number in the domain -> EINVAL. The handle holds a reference on
 * `attr->xrcd` and keeps the QP alive; every verb on it acts on the QP.
 */
int sw_open_qp(struct ibv_context *ctx, struct ibv_qp_open_attr *attr, struct ibv_qp **out)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
	struct sw_qp *real, *h;
	struct ibv_qp *ibh;

	if (!attr)
		return -EINVAL;
	if (attr->comp_mask & ~(uint32_t)(need | IBV_QP_OPEN_ATTR_CONTEXT))
		return -EOPNOTSUPP;
	if ((attr->comp_mask & need) != need || !attr->xrcd || attr->xrcd->context != ctx ||
	    attr->qp_type != IBV_QPT_XRC_RECV)
		return -EINVAL;
	real = tgt_lookup(ctx, attr->qp_num, sw_xrcd(attr->xrcd));
	if (!real)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h || qp_open_ref(real)) {
		free(h);
		sw_qp_put(real);
		return h ? -EINVAL : -ENOMEM;
	}
	atomic_init(&h->refcnt, 1);
	pthread_mutex_init(&h->lock, NULL);
	h->real = real; /* the lookup's reference stays with the handle */
	h->xrcd = sw_xrcd(attr->xrcd);
	atomic_fetch_add(&h->xrcd->usecnt, 1);
	h->qpn = real->qpn;
	ibh = &h->ibv.qp_base;
	ibh->context = ctx;
	ibh->qp_context = (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : NULL;
	ibh->qp_num = real->qpn;
	ibh->handle = real->qpn;
	ibh->qp_type = IBV_QPT_XRC_RECV;
	ibh->state = real->ibv.qp_base.state;
	pthread_mutex_init(&ibh->mutex, NULL);
	pthread_cond_init(&ibh->cond, NULL);
	*out = ibh;
	return 0;
}

/* Contract: see queue.h. */
void sw_xrcd_qp_handle_free(struct sw_qp *h)
{
	struct sw_qp *real = h->real;

	atomic_fetch_sub(&h->xrcd->usecnt, 1);
	sw_qp_put(h);
	sw_qp_put(real);
}

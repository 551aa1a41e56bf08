/* SPDX-License-Identifier: MIT */
/*
 * sge.c - local memory access through scatter/gather lists.
 *
 * Every SGE is checked against the MR its lkey names before a byte
 * moves: the key must resolve, the MR must belong to the QP's protection
 * domain (an XRC TGT QP's: its XRC SRQ's, sw_qp_mem_pd), the range must lie inside it and, for
 * writes, the MR must allow local writes. Writes go through the placement layer (TPH hints); the
 * _rx variant lets a CPU_ID placement run behind (sw_place_mr).
 *
 * Single copy (docs/single-copy.md): the requester can name a packet's
 * payload by the addresses of its pieces instead of gathering it
 * (sw_sge_refs), and the responder places such a packet by pulling the
 * pieces from the sender's memory (sw_place_mr_ref, sw_sge_scatter_ref).
 */
#include <string.h>

#include "sw/transport/transport_priv.h"

/*
 * Resolve `sge` for `len` bytes at `off` inside it (sw_mr_resolve: key,
 * PD, `need`, range): a referenced MR and the host address, or -EACCES
 * whichever check failed.
 */
static int sge_resolve(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t off, uint32_t len,
		       int need, struct sw_mr **out, uint8_t **host)
{
	struct sw_pd *pd = sw_qp_mem_pd(qp);
	uint64_t va = sge->addr + off;

	if (!pd ||
	    sw_mr_resolve(sw_dev_of(qp->ibv.qp_base.context), sge->lkey, pd, va, len, need, out))
		return -EACCES;
	*host = sw_mr_host(*out, va);
	return 0;
}

/*
 * Walk the SGE list from byte `off` for `len` bytes, calling `fn` for
 * each contiguous piece. -EINVAL if the list is shorter than off + len.
 */
static int sge_walk(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		    uint32_t len, int need,
		    int (*fn)(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg), void *arg)
{
	uint32_t i;

	for (i = 0; i < nsge && len; i++) {
		uint32_t take;
		struct sw_mr *mr;
		uint8_t *host;
		int ret;

		if (off >= sge[i].length) {
			off -= sge[i].length;
			continue;
		}
		take = sge[i].length - off;
		if (take > len)
			take = len;
		ret = sge_resolve(qp, &sge[i], off, take, need, &mr, &host);
		if (ret)
			return ret;
		ret = fn(mr, host, take, arg);
		sw_mr_put(mr);
		if (ret)
			return ret;
		off = 0;
		len -= take;
	}
	return len ? -EINVAL : 0;
}

struct cursor {
	uint8_t *p;
	const uint8_t *cp;
};

static int gather_piece(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg)
{
	struct cursor *c = arg;

	sw_fetch(c->p, host, n);
	c->p += n;
	return 0;
}

static int scatter_piece(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg)
{
	struct cursor *c = arg;
	int ret = sw_place(mr->has_hint ? &mr->hint : NULL, host, c->cp, n);

	c->cp += n;
	return ret;
}

static void mr_put_cb(void *mr)
{
	sw_mr_put(mr);
}

/* Contract: see transport_priv.h. */
int sw_place_mr(struct sw_mr *mr, uint8_t *host, const uint8_t *src, uint32_t len)
{
	int ret;

	if (!mr->has_hint || !mr->hint.has_cpu)
		return sw_place(mr->has_hint ? &mr->hint : NULL, host, src, len);
	sw_mr_get(mr); /* for the job: deregistration waits for it */
	ret = sw_place_defer(&mr->hint, host, src, len, mr_put_cb, mr);
	if (ret)
		sw_mr_put(mr);
	return ret;
}

static int scatter_piece_rx(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg)
{
	struct cursor *c = arg;
	int ret = sw_place_mr(mr, host, c->cp, n);

	c->cp += n;
	return ret;
}

/* Contract: see transport_priv.h. -EACCES (key/PD/range) or -EINVAL (list too short). */
int sw_sge_gather(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		  uint8_t *dst, uint32_t len)
{
	struct cursor c = {.p = dst};

	return sge_walk(qp, sge, nsge, off, len, 0, gather_piece, &c);
}

/* Contract: see transport_priv.h. */
int sw_sge_scatter(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		   const uint8_t *src, uint32_t len)
{
	struct cursor c = {.cp = src};

	return sge_walk(qp, sge, nsge, off, len, IBV_ACCESS_LOCAL_WRITE, scatter_piece, &c);
}

/* Contract: see transport_priv.h. */
int sw_sge_scatter_rx(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		      const uint8_t *src, uint32_t len)
{
	struct cursor c = {.cp = src};

	return sge_walk(qp, sge, nsge, off, len, IBV_ACCESS_LOCAL_WRITE, scatter_piece_rx, &c);
}

/* ---- single copy ---- */

struct ref_list {
	struct sw_ref_piece *out;
	uint32_t n, max;
	struct sw_ref_hold *hold;
};

static int ref_piece(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg)
{
	struct ref_list *l = arg;
	struct sw_ref_piece *last = l->n ? &l->out[l->n - 1] : NULL;
	struct sw_ref_hold *h = l->hold;

	if (!h->n || h->mr[h->n - 1] != mr) { /* at most one per piece */
		if (h->n == SW_REF_PIECES || (h->sink && mr->has_hint))
			return -E2BIG;
		sw_mr_get(mr);
		h->mr[h->n++] = mr;
	}
	if (last && last->addr + last->len == (uintptr_t)host && last->buf == mr->buf_tag) {
		last->len += n; /* SGEs that continue each other */
		return 0;
	}
	if (!l->out || l->n == l->max)
		return -E2BIG;
	l->out[l->n++] =
		(struct sw_ref_piece){.addr = (uintptr_t)host, .len = n, .buf = mr->buf_tag};
	return 0;
}

/* Contract: see transport_priv.h. */
int sw_sge_refs(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		uint32_t len, struct sw_ref_piece *out, uint32_t max, struct sw_ref_hold *hold)
{
	struct ref_list l = {.out = out, .max = max, .hold = hold};
	int ret;

	hold->n = 0;
	ret = sge_walk(qp, sge, nsge, off, len, hold->sink ? IBV_ACCESS_LOCAL_WRITE : 0, ref_piece,
		       &l);
	if (ret)
		sw_ref_hold_put(hold);
	return ret ? ret : (int)l.n;
}

/* Contract: see transport_priv.h. */
void sw_ref_hold_put(struct sw_ref_hold *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		sw_mr_put(h->mr[i]);
	h->n = 0;
}

/* A pulled copy landed or failed: drop its holds; a failure marks the QP. */
static void pull_done(void *mr, void *qp, int err)
{
	struct sw_qp *q = qp;
	int none = 0;

	if (err) /* the first error stays (sw_resp_pull_failed) */
		atomic_compare_exchange_strong(&q->pull_err, &none, err);
	sw_mr_put(mr);
	sw_qp_put(q);
}

/* Where the next byte of a packet by reference is in its sender. */
struct ref_src {
	struct sw_qp *qp;
	const struct sw_pkt *pkt;
	uint32_t idx; /* piece */
	uint32_t off; /* within it */
};

/*
 * Place the next `n` bytes of the packet into `host` of `mr`: copied at
 * once from the sender's shared buffer where the piece names one this
 * device can map (sw_shm_map), else queued as a pull (sw_place_pull),
 * the MR and the QP held until it landed. The caller never asks for
 * more than the packet holds.
 */
static int pull_piece(struct sw_mr *mr, uint8_t *host, uint32_t n, void *arg)
{
	struct ref_src *r = arg;

	while (n) {
		struct sw_ref_piece pc;
		uint32_t take;
		struct sw_pull_owner own = {.done = pull_done, .a = mr, .b = r->qp};
		const uint8_t *mapped = NULL;

		memcpy(&pc, r->pkt->ref + r->idx * sizeof(pc), sizeof(pc));
		take = pc.len - r->off < n ? pc.len - r->off : n;
		if (pc.buf && !mr->has_hint)
			mapped = sw_shm_map(sw_engine_of(r->qp), r->pkt, pc.buf, pc.addr + r->off,
					    take);
		if (mapped) { /* a memcpy, after what this thread placed before */
			sw_place(NULL, host, mapped, take);
			atomic_fetch_add_explicit(&sw_place_stats.map_bytes, take,
						  memory_order_relaxed);
		} else {
			sw_mr_get(mr);
			sw_qp_get(r->qp);
			sw_place_pull(mr->has_hint ? &mr->hint : NULL, host, r->pkt->ref_pid,
				      pc.addr + r->off, take, &own);
		}
		host += take;
		n -= take;
		r->off += take;
		if (r->off == pc.len) {
			r->idx++;
			r->off = 0;
		}
	}
	return 0;
}

/* Contract: see transport_priv.h. */
void sw_place_mr_ref(struct sw_qp *qp, struct sw_mr *mr, uint8_t *host, const struct sw_pkt *pkt)
{
	struct ref_src r = {.qp = qp, .pkt = pkt};

	pull_piece(mr, host, pkt->paylen, &r);
}

/* Contract: see transport_priv.h. */
int sw_sge_scatter_ref(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		       const struct sw_pkt *pkt)
{
	struct ref_src r = {.qp = qp, .pkt = pkt};

	return sge_walk(qp, sge, nsge, off, pkt->paylen, IBV_ACCESS_LOCAL_WRITE, pull_piece, &r);
}

/* Contract: see transport_priv.h. */
int sw_resp_pull_failed(struct sw_qp *qp, bool now)
{
	if (now)
		sw_place_pull_flush();
	return atomic_load_explicit(&qp->pull_err, memory_order_acquire);
}

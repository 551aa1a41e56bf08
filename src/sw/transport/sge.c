/* SPDX-License-Identifier: MIT */
/*
 * sge.c - local memory access through scatter/gather lists.
 *
 * Every SGE is checked against the MR its lkey names before a byte
 * moves: the key must resolve, the MR must belong to the QP's protection
 * domain (an XRC TGT QP's: its XRC SRQ's, sw_qp_mem_pd), the range must lie inside it and, for
 * writes, the MR must allow local writes. Writes go through the placement layer (TPH hints); the
 * _rx variant lets a CPU_ID placement run behind (sw_place_mr).
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

/* SPDX-License-Identifier: MIT */
/*
 * rs_data.c - the rsockets data path (contract in rs.h).
 *
 * Every message is an RDMA WRITE WITH IMMEDIATE into memory the peer
 * advertised; the immediate says what it is (DATA with its length, SGL
 * with a new credit limit, IOMAP_SGL, CTRL). Receives carry no SGE: the
 * completion only announces what the write placed. The receive buffer is
 * handed to the peer half at a time (an SGL message fills one of the two
 * entries of its target SGL); the sender writes through its current
 * entry and moves to the other when it is used up. Credits count DATA
 * messages: the sender may have `credit limit - sseq_no` outstanding.
 * Control messages (SGL, CTRL) use their own RS_CTRL_SLOTS send slots.
 */
#define _GNU_SOURCE
#include <byteswap.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdmacm/rs.h"

#define RS_WR_RECV (1ull << 63)
#define RS_WR_SBUF (1ull << 62) /* the send used sbuf bytes */

static struct rs_sge *tsgl(struct rsocket *rs)
{
	return (struct rs_sge *)rs->target;
}

static struct rs_iomap *tiomap(struct rsocket *rs)
{
	return (struct rs_iomap *)(void *)((uint8_t *)rs->target + 2 * sizeof(struct rs_sge));
}

static void *page_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static uint32_t clamp_q(uint32_t v, uint32_t max)
{
	if (max > RS_MAX_QUEUE)
		max = RS_MAX_QUEUE;
	return v < 16 ? 16 : v > max ? max : v;
}

/* Contract: see rs.h. QP, CQ, buffers; the receives are posted at once. */
int rs_create_resources(struct rsocket *rs)
{
	struct rdma_cm_id *id = rs->id;
	struct cm_dev *d = cm_id_of(id)->dev;
	struct ibv_qp_init_attr qa;
	int ret;

	if (!d || !id->verbs)
		return -ENODEV;
	rs->sq_size = clamp_q(rs->sq_size, d->max_qp_wr);
	rs->rq_size = clamp_q(rs->rq_size, d->max_qp_wr);
	rs->cch = ibv_create_comp_channel(id->verbs);
	if (!rs->cch)
		return -ENOMEM;
	fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(id->verbs, (int)(rs->sq_size + rs->rq_size), id, rs->cch, 0);
	if (!rs->cq)
		return -ENOMEM;
	rs->sbuf = page_alloc(rs->sbuf_size + RS_CTRL_SLOTS * sizeof(struct rs_sge));
	rs->rbuf = page_alloc(rs->rbuf_size);
	rs->target_len = 2 * sizeof(struct rs_sge) + rs->iomap_size * sizeof(struct rs_iomap);
	rs->target = page_alloc(rs->target_len);
	rs->rmsg_size = rs->rq_size + 1;
	rs->rmsg = calloc(rs->rmsg_size, sizeof(*rs->rmsg));
	if (!rs->sbuf || !rs->rbuf || !rs->target || !rs->rmsg)
		return -ENOMEM;
	rs->smr =
		ibv_reg_mr(id->pd, rs->sbuf, rs->sbuf_size + RS_CTRL_SLOTS * sizeof(struct rs_sge),
			   IBV_ACCESS_LOCAL_WRITE);
	rs->rmr = ibv_reg_mr(id->pd, rs->rbuf, rs->rbuf_size,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rs->tmr = ibv_reg_mr(id->pd, rs->target, rs->target_len,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!rs->smr || !rs->rmr || !rs->tmr)
		return -ENOMEM;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = rs;
	qa.send_cq = qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 2;
	qa.cap.max_recv_sge = 1;
	qa.cap.max_inline_data = rs->inline_size;
	if (rdma_create_qp(id, id->pd, &qa))
		return -errno;
	rs->inline_size = qa.cap.max_inline_data;
	rs->sqe_avail = rs->sq_size - RS_CTRL_SLOTS;
	rs->ctrl_seqno = 0;
	rs->ctrl_max_seqno = RS_CTRL_SLOTS;
	rs->sbuf_bytes_avail = rs->sbuf_size;
	ret = ibv_req_notify_cq(rs->cq, 0);
	if (ret)
		return -ret;
	return rs_post_recvs(rs);
}

/* Contract: see rs.h. */
void rs_free_resources(struct rsocket *rs)
{
	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	if (rs->smr)
		ibv_dereg_mr(rs->smr);
	if (rs->rmr)
		ibv_dereg_mr(rs->rmr);
	if (rs->tmr)
		ibv_dereg_mr(rs->tmr);
	for (struct rs_local_iomap *m = rs->iomaps, *n; m; m = n) {
		n = m->next;
		ibv_dereg_mr(m->mr);
		free(m);
	}
	rs->iomaps = NULL;
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	if (rs->sbuf)
		munmap(rs->sbuf, rs->sbuf_size + RS_CTRL_SLOTS * sizeof(struct rs_sge));
	if (rs->rbuf)
		munmap(rs->rbuf, rs->rbuf_size);
	if (rs->target)
		munmap(rs->target, rs->target_len);
	free(rs->rmsg);
	rs->smr = rs->rmr = rs->tmr = NULL;
	rs->cq = NULL;
	rs->cch = NULL;
	rs->sbuf = rs->rbuf = NULL;
	rs->target = NULL;
	rs->rmsg = NULL;
}

static void put_be16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint32_t get_be32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* Contract: see rs.h. The 40 bytes of rs_conn_data. */
void rs_format_conn_data(struct rsocket *rs, uint8_t out[RS_CONN_DATA_LEN])
{
	uint32_t n = rs->iomap_size;

	memset(out, 0, RS_CONN_DATA_LEN);
	out[0] = RS_CONN_VERSION;
	out[1] = RS_CONN_FLAG_IOMAP | (__BYTE_ORDER == __BIG_ENDIAN ? RS_CONN_FLAG_NET : 0);
	put_be16(out + 2, (uint16_t)rs->rq_size);
	out[7] = (uint8_t)(n <= 128 ? n : 0x80 | (n >> 8));
	put_be64(out + 8, (uintptr_t)rs->target);
	put_be32(out + 16, rs->tmr->rkey);
	put_be32(out + 20, 2);
	put_be64(out + 24, (uintptr_t)rs->rbuf);
	put_be32(out + 32, rs->rmr->rkey);
	put_be32(out + 36, rs->rbuf_size / 2);
}

/* Contract: see rs.h. -ENOTSUP for another protocol version. */
int rs_save_conn_data(struct rsocket *rs, const uint8_t *in)
{
	bool big = __BYTE_ORDER == __BIG_ENDIAN;
	uint8_t n = in[7];

	if (in[0] != RS_CONN_VERSION)
		return -ENOTSUP;
	rs->swap = ((in[1] & RS_CONN_FLAG_NET) != 0) != big;
	rs->remote_sgl.addr = get_be64(in + 8);
	rs->remote_sgl.key = get_be32(in + 16);
	rs->remote_sgl.length = get_be32(in + 20);
	if (rs->remote_sgl.length < 1 || rs->remote_sgl.length > 2)
		rs->remote_sgl.length = 2;
	rs->remote_sge = 1 % (int)rs->remote_sgl.length;
	rs->remote_iomap_addr = rs->remote_sgl.addr + 2 * sizeof(struct rs_sge);
	rs->remote_iomap_size = n & 0x80 ? (uint32_t)(n & 0x7f) << 8 : n;
	tsgl(rs)[0].addr = get_be64(in + 24);
	tsgl(rs)[0].key = get_be32(in + 32);
	tsgl(rs)[0].length = get_be32(in + 36);
	/*
	 * Entry 1 is left alone: it is zero from the allocation, and the
	 * peer's first SGL update (its second buffer half) may already have
	 * been written into it when the active side gets here.
	 */
	rs->target_sge = 0;
	rs->sseq_comp = (uint16_t)(in[2] << 8 | in[3]);
	rs->sseq_no = 0;
	rs->rbuf_free_offset = rs->rbuf_bytes_avail = rs->rbuf_size / 2;
	rs->rbuf_offset = 0;
	rs->rseq_no = 0;
	rs->rseq_comp = (uint16_t)(rs->rq_size / 2);
	return 0;
}

static int post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = {.wr_id = RS_WR_RECV, .num_sge = 0}, *bad;

	return -ibv_post_recv(rs->id->qp, &wr, &bad);
}

/* Contract: see rs.h. */
int rs_post_recvs(struct rsocket *rs)
{
	for (uint32_t i = 0; i < rs->rq_size; i++) {
		int ret = post_recv(rs);

		if (ret)
			return ret;
	}
	return 0;
}

/* One WRITE WITH IMMEDIATE (or plain WRITE) of `sge` to (addr, key). */
static int post_write(struct rsocket *rs, uint64_t wr_id, enum ibv_wr_opcode op, uint32_t imm,
		      struct ibv_sge *sge, int nsge, bool inl, uint64_t addr, uint32_t key)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.imm_data = htobe32(imm);
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.send_flags = inl ? IBV_SEND_INLINE : 0;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = key;
	rs->unacked_sends++;
	return -ibv_post_send(rs->id->qp, &wr, &bad);
}

static bool ctrl_free(const struct rsocket *rs)
{
	return rs->ctrl_seqno != rs->ctrl_max_seqno;
}

/* Contract: see rs.h. One credit / buffer update if one is due. */
void rs_send_credits(struct rsocket *rs)
{
	uint32_t half = rs->rbuf_size / 2, imm;
	struct ibv_sge sge;

	if (rs->state != RS_CONNECTED || !ctrl_free(rs))
		return;
	if (rs->rbuf_bytes_avail < half && (int16_t)(rs->rseq_no - rs->rseq_comp) < 0)
		return;
	rs->ctrl_seqno++;
	rs->rseq_comp = (uint16_t)(rs->rseq_no + rs->rq_size / 2);
	imm = rs_imm(RS_OP_SGL, (uint16_t)(rs->rseq_no + rs->rq_size));
	if (rs->rbuf_bytes_avail >= half) {
		struct rs_sge *slot = (struct rs_sge *)(void *)(rs->sbuf + rs->sbuf_size) +
				      rs->ctrl_seqno % RS_CTRL_SLOTS;
		struct rs_sge e = {(uintptr_t)(rs->rbuf + rs->rbuf_free_offset), rs->rmr->rkey,
				   half};

		if (rs->swap) {
			e.addr = bswap_64(e.addr);
			e.key = bswap_32(e.key);
			e.length = bswap_32(e.length);
		}
		*slot = e;
		sge = (struct ibv_sge){(uintptr_t)slot, sizeof(*slot), rs->smr->lkey};
		post_write(rs, imm, IBV_WR_RDMA_WRITE_WITH_IMM, imm, &sge, 1,
			   rs->inline_size >= sizeof(*slot),
			   rs->remote_sgl.addr + (uint64_t)rs->remote_sge * sizeof(struct rs_sge),
			   rs->remote_sgl.key);
		rs->rbuf_bytes_avail -= half;
		rs->rbuf_free_offset = (rs->rbuf_free_offset + half) % rs->rbuf_size;
		rs->remote_sge = (rs->remote_sge + 1) % (int)rs->remote_sgl.length;
	} else {
		post_write(rs, imm, IBV_WR_RDMA_WRITE_WITH_IMM, imm, NULL, 0, false,
			   rs->remote_sgl.addr, rs->remote_sgl.key);
	}
}

/* Contract: see rs.h. A zero-length write with the CTRL immediate. */
int rs_send_ctrl(struct rsocket *rs, uint32_t ctrl)
{
	uint32_t imm = rs_imm(RS_OP_CTRL, ctrl);
	int tries = 0;

	while (!ctrl_free(rs) && rs->state == RS_CONNECTED && tries++ < 100) {
		rs_poll_cq(rs);
		if (!ctrl_free(rs))
			rs_wait_cq(rs, 10);
	}
	if (!ctrl_free(rs))
		return -EAGAIN;
	rs->ctrl_seqno++;
	return post_write(rs, imm, IBV_WR_RDMA_WRITE_WITH_IMM, imm, NULL, 0, false,
			  rs->remote_sgl.addr, rs->remote_sgl.key);
}

static void rs_error(struct rsocket *rs, int err)
{
	if (rs->state == RS_CONNECTED) {
		rs->state = RS_ERROR;
		rs->err = err;
	}
}

/* Contract: see rs.h. */
int rs_poll_cq(struct rsocket *rs)
{
	struct ibv_wc wc[16];
	int n, total = 0;

	if (!rs->cq)
		return 0;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		total += n;
		for (int i = 0; i < n; i++) {
			struct ibv_wc *w = &wc[i];

			if (w->wr_id & RS_WR_RECV) {
				uint32_t imm, data;

				if (w->status != IBV_WC_SUCCESS) {
					if (w->status != IBV_WC_WR_FLUSH_ERR)
						rs_error(rs, ECONNRESET);
					continue;
				}
				imm = be32toh(w->imm_data);
				data = imm & 0x1fffffff;
				switch (imm >> 29) {
				case RS_OP_DATA:
					rs->rmsg[rs->rmsg_tail] = data;
					rs->rmsg_tail = (rs->rmsg_tail + 1) % rs->rmsg_size;
					break;
				case RS_OP_SGL:
					rs->sseq_comp = (uint16_t)data;
					break;
				case RS_OP_CTRL:
					if (data == RS_CTRL_DISCONNECT) {
						rs->readable = false;
						if (rs->state == RS_CONNECTED)
							rs->state = RS_DISCONNECTED;
					} else if (data == RS_CTRL_SHUTDOWN) {
						rs->readable = false;
						if (!rs->writable && rs->state == RS_CONNECTED)
							rs->state = RS_DISCONNECTED;
					}
					break;
				default: /* IOMAP_SGL: the entry is already in place */
					break;
				}
				if (rs->state == RS_CONNECTED && post_recv(rs))
					rs_error(rs, ENOMEM);
				continue;
			}
			/* a send */
			if (rs->unacked_sends)
				rs->unacked_sends--;
			if (w->status != IBV_WC_SUCCESS && w->status != IBV_WC_WR_FLUSH_ERR)
				rs_error(rs, ECONNRESET);
			switch ((uint32_t)w->wr_id >> 29) {
			case RS_OP_DATA:
			case RS_OP_WRITE:
				rs->sqe_avail++;
				if (w->wr_id & RS_WR_SBUF)
					rs->sbuf_bytes_avail += (uint32_t)w->wr_id & 0x1fffffff;
				break;
			default:
				rs->ctrl_max_seqno++;
				break;
			}
		}
	}
	/* a credit update deferred for want of a control slot goes out now */
	if (total)
		rs_send_credits(rs);
	return total;
}

/* Contract: see rs.h. */
int rs_wait_cq(struct rsocket *rs, int ms)
{
	struct pollfd p[2];
	struct ibv_cq *cq;
	void *ctx;
	int n;

	if (!rs->cq)
		return -ENOTCONN;
	if (ibv_req_notify_cq(rs->cq, 0))
		return -EIO;
	if (rs_poll_cq(rs) > 0)
		return 0;
	p[0] = (struct pollfd){.fd = rs->cch->fd, .events = POLLIN};
	p[1] = (struct pollfd){.fd = rs->ch->fd, .events = POLLIN};
	pthread_mutex_unlock(&rs->lock);
	n = poll(p, 2, ms);
	pthread_mutex_lock(&rs->lock);
	if (n < 0)
		return -errno;
	if (p[0].revents & POLLIN)
		while (!ibv_get_cq_event(rs->cch, &cq, &ctx))
			ibv_ack_cq_events(cq, 1);
	if (p[1].revents & POLLIN)
		rs_cm_events(rs);
	rs_poll_cq(rs);
	return 0;
}

/* Contract: see rs.h. */
bool rs_can_send(struct rsocket *rs)
{
	return rs->state == RS_CONNECTED && rs->writable && rs->sqe_avail &&
	       rs->sbuf_bytes_avail >= RS_SNDLOWAT && rs->sseq_no != rs->sseq_comp &&
	       tsgl(rs)[rs->target_sge].length;
}

/* Contract: see rs.h. */
bool rs_have_rdata(struct rsocket *rs)
{
	return rs->rmsg && rs->rmsg_head != rs->rmsg_tail;
}

/* Copy `len` bytes of `buf` into sbuf (wrapping): the SGEs, 1 or 2. */
static int stage(struct rsocket *rs, const uint8_t *buf, uint32_t len, struct ibv_sge sge[2])
{
	uint32_t off = rs->ssgl_off, first = rs->sbuf_size - off;
	int n = 1;

	if (first > len)
		first = len;
	memcpy(rs->sbuf + off, buf, first);
	sge[0] = (struct ibv_sge){(uintptr_t)(rs->sbuf + off), first, rs->smr->lkey};
	if (first < len) {
		memcpy(rs->sbuf, buf + first, len - first);
		sge[1] = (struct ibv_sge){(uintptr_t)rs->sbuf, len - first, rs->smr->lkey};
		n = 2;
	}
	rs->ssgl_off = (off + len) % rs->sbuf_size;
	rs->sbuf_bytes_avail -= len;
	return n;
}

/* The size of the next chunk of at most `len` bytes: inline, or what sbuf has room for. */
static uint32_t chunk_len(const struct rsocket *rs, size_t len)
{
	uint32_t n = (uint32_t)len;

	if (n > rs->inline_size && n > rs->sbuf_bytes_avail)
		n = rs->sbuf_bytes_avail;
	return n;
}

/* One DATA (or riowrite WRITE) chunk of up to `len` bytes; returns its size or -errno. */
static ssize_t write_chunk(struct rsocket *rs, const uint8_t *buf, size_t len, enum rs_op op,
			   uint64_t addr, uint32_t key)
{
	struct ibv_sge sge[2];
	uint32_t n = chunk_len(rs, len), imm;
	uint64_t wr_id;
	bool inl = n <= rs->inline_size;
	int nsge, ret;

	imm = rs_imm(op, n);
	wr_id = imm;
	if (inl) {
		sge[0] = (struct ibv_sge){(uintptr_t)buf, n, 0};
		nsge = n ? 1 : 0;
	} else {
		nsge = stage(rs, buf, n, sge);
		wr_id |= RS_WR_SBUF;
	}
	ret = post_write(rs, wr_id,
			 op == RS_OP_DATA ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, imm,
			 sge, nsge, inl, addr, key);
	if (ret)
		return ret;
	rs->sqe_avail--;
	return n;
}

/* Contract: see rs.h. Blocking unless nonblocking or MSG_DONTWAIT. */
ssize_t rs_send(struct rsocket *rs, const void *vbuf, size_t len, int flags)
{
	const uint8_t *buf = vbuf;
	bool nb = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t left = len, xfer = RS_SNDLOWAT;

	while (left) {
		struct rs_sge *t;
		uint64_t addr;
		uint32_t key;
		ssize_t n;
		size_t want;
		int sge_idx;

		rs_poll_cq(rs);
		if (rs->state != RS_CONNECTED || !rs->writable) {
			if (len != left)
				break;
			return rs->state == RS_ERROR ? -(rs->err ? rs->err : ECONNRESET) :
			       rs->state == RS_DISCONNECTED || !rs->writable ? -EPIPE :
									       -ENOTCONN;
		}
		if (!rs_can_send(rs)) {
			if (nb) {
				if (len != left)
					break;
				return -EAGAIN;
			}
			rs_wait_cq(rs, 1000);
			continue;
		}
		t = &tsgl(rs)[rs->target_sge];
		want = left < xfer ? left : xfer;
		if (want > t->length)
			want = t->length;
		/*
		 * The entry gives up the chunk's bytes before the write is
		 * posted: once the write is out, the peer may consume it and
		 * write a fresh entry here (its SGL update) before this thread
		 * runs again, and advancing afterwards would eat into that.
		 */
		want = chunk_len(rs, want);
		addr = t->addr;
		key = t->key;
		t->addr += (uint64_t)want;
		t->length -= (uint32_t)want;
		sge_idx = rs->target_sge;
		if (!t->length)
			rs->target_sge = (rs->target_sge + 1) % 2;
		n = write_chunk(rs, buf + (len - left), want, RS_OP_DATA, addr, key);
		if (n < 0) {
			/* nothing went out: the entry is as it was */
			t->addr = addr;
			t->length += (uint32_t)want;
			rs->target_sge = sge_idx;
			return len != left ? (ssize_t)(len - left) : n;
		}
		left -= (size_t)n;
		rs->sseq_no++;
		if (xfer < RS_MAX_XFER)
			xfer <<= 1;
	}
	return (ssize_t)(len - left);
}

/* Copy out of the receive ring, consuming unless `peek`. Returns bytes copied. */
static size_t take(struct rsocket *rs, uint8_t *buf, size_t len, bool peek)
{
	uint32_t head = rs->rmsg_head, done = rs->rmsg_done, off = rs->rbuf_offset;
	size_t got = 0;

	while (got < len && head != rs->rmsg_tail) {
		uint32_t m = rs->rmsg[head] - done, n = m, first;

		if (n > len - got)
			n = (uint32_t)(len - got);
		first = rs->rbuf_size - off < n ? rs->rbuf_size - off : n;
		memcpy(buf + got, rs->rbuf + off, first);
		if (first < n)
			memcpy(buf + got + first, rs->rbuf, n - first);
		off = (off + n) % rs->rbuf_size;
		got += n;
		done += n;
		if (done == rs->rmsg[head]) {
			head = (head + 1) % rs->rmsg_size;
			done = 0;
			if (!peek)
				rs->rseq_no++;
		}
	}
	if (!peek) {
		rs->rmsg_head = head;
		rs->rmsg_done = done;
		rs->rbuf_offset = off;
		rs->rbuf_bytes_avail += (uint32_t)got;
	}
	return got;
}

/* Contract: see rs.h. 0 at end of stream. */
ssize_t rs_recv(struct rsocket *rs, void *vbuf, size_t len, int flags)
{
	uint8_t *buf = vbuf;
	bool nb = rs->nonblock || (flags & MSG_DONTWAIT);
	size_t got = 0;

	if (rs->state < RS_CONNECTED)
		return -ENOTCONN;
	for (;;) {
		rs_poll_cq(rs);
		/* zero-length DATA messages at the head are consumed as they come */
		while (rs_have_rdata(rs) && !rs->rmsg[rs->rmsg_head] && !(flags & MSG_PEEK)) {
			rs->rmsg_head = (rs->rmsg_head + 1) % rs->rmsg_size;
			rs->rseq_no++;
		}
		if (rs_have_rdata(rs)) {
			got += take(rs, buf + got, len - got, flags & MSG_PEEK);
			rs_send_credits(rs);
			if (got == len || !(flags & MSG_WAITALL) || (flags & MSG_PEEK))
				return (ssize_t)got;
			continue;
		}
		if (got && !(flags & MSG_WAITALL))
			return (ssize_t)got;
		if (rs->state != RS_CONNECTED || !rs->readable)
			return rs->state == RS_ERROR && !got ? -(rs->err ? rs->err : ECONNRESET) :
							       (ssize_t)got;
		if (nb)
			return got ? (ssize_t)got : -EAGAIN;
		rs_wait_cq(rs, 1000);
	}
}

/* Contract: see rs.h. */
void rs_drain_sends(struct rsocket *rs)
{
	for (int i = 0; i < 500 && rs->unacked_sends && rs->cq; i++) {
		rs_poll_cq(rs);
		if (rs->unacked_sends)
			rs_wait_cq(rs, 10);
	}
}

/* ---- iomap ---- */

CM_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rsocket *rs = rs_get(socket);
	struct rs_local_iomap *m;
	struct rs_iomap e;
	struct ibv_sge sge;
	uint32_t imm, idx;
	off_t ret;

	if (!rs)
		return (errno = EBADF, -1);
	(void)flags;
	if (!(prot & PROT_WRITE) || rs->state != RS_CONNECTED)
		return (errno = EINVAL, -1);
	pthread_mutex_lock(&rs->lock);
	idx = rs->iomap_next;
	if (idx >= rs->remote_iomap_size) {
		pthread_mutex_unlock(&rs->lock);
		return (errno = ENOMEM, -1);
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->mr = ibv_reg_mr(rs->id->pd, buf, len,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE))) {
		free(m);
		pthread_mutex_unlock(&rs->lock);
		return (errno = ENOMEM, -1);
	}
	m->buf = buf;
	m->len = len;
	m->index = (int)idx;
	m->next = rs->iomaps;
	rs->iomaps = m;
	rs->iomap_next++;
	ret = offset == -1 ? (off_t)(uintptr_t)buf : offset;
	e.offset = (uint64_t)ret;
	e.sge.addr = (uintptr_t)buf;
	e.sge.key = m->mr->rkey;
	e.sge.length = (uint32_t)len;
	if (rs->swap) {
		e.offset = bswap_64(e.offset);
		e.sge.addr = bswap_64(e.sge.addr);
		e.sge.key = bswap_32(e.sge.key);
		e.sge.length = bswap_32(e.sge.length);
	}
	while (!ctrl_free(rs) && rs->state == RS_CONNECTED)
		rs_wait_cq(rs, 100);
	rs->ctrl_seqno++;
	imm = rs_imm(RS_OP_IOMAP_SGL, idx);
	sge = (struct ibv_sge){(uintptr_t)&e, sizeof(e), 0};
	if (post_write(rs, imm, IBV_WR_RDMA_WRITE_WITH_IMM, imm, &sge, 1, true,
		       rs->remote_iomap_addr + idx * sizeof(struct rs_iomap), rs->remote_sgl.key))
		ret = (errno = EIO, -1);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

CM_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rsocket *rs = rs_get(socket);
	struct rs_local_iomap **pp, *m;

	if (!rs)
		return (errno = EBADF, -1);
	pthread_mutex_lock(&rs->lock);
	for (pp = &rs->iomaps; (m = *pp); pp = &m->next)
		if (m->buf == buf && m->len == len) {
			*pp = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			pthread_mutex_unlock(&rs->lock);
			return 0;
		}
	pthread_mutex_unlock(&rs->lock);
	return (errno = EINVAL, -1);
}

CM_EXPORT size_t riowrite(int socket, const void *vbuf, size_t count, off_t offset, int flags)
{
	struct rsocket *rs = rs_get(socket);
	const uint8_t *buf = vbuf;
	size_t left = count;

	if (!rs)
		return (errno = EBADF, 0);
	if (rs->type != SOCK_STREAM)
		return (errno = EOPNOTSUPP, 0);
	pthread_mutex_lock(&rs->lock);
	while (left) {
		struct rs_iomap *e = NULL;
		uint64_t off = (uint64_t)offset + (count - left);
		ssize_t n;
		size_t want;

		rs_poll_cq(rs);
		if (rs->state != RS_CONNECTED) {
			errno = ECONNRESET;
			break;
		}
		for (uint32_t i = 0; i < rs->iomap_size; i++) {
			struct rs_iomap *c = &tiomap(rs)[i];

			if (c->sge.length && off >= c->offset && off < c->offset + c->sge.length) {
				e = c;
				break;
			}
		}
		if (!e) {
			errno = EINVAL;
			break;
		}
		if (!rs->sqe_avail || rs->sbuf_bytes_avail < RS_SNDLOWAT) {
			if (rs->nonblock || (flags & MSG_DONTWAIT)) {
				errno = EAGAIN;
				break;
			}
			rs_wait_cq(rs, 1000);
			continue;
		}
		want = left < RS_MAX_XFER ? left : RS_MAX_XFER;
		if (want > e->offset + e->sge.length - off)
			want = (size_t)(e->offset + e->sge.length - off);
		n = write_chunk(rs, buf + (count - left), want, RS_OP_WRITE,
				e->sge.addr + (off - e->offset), e->sge.key);
		if (n < 0) {
			errno = (int)-n;
			break;
		}
		left -= (size_t)n;
	}
	pthread_mutex_unlock(&rs->lock);
	return count - left;
}

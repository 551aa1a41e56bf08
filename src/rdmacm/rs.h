/* SPDX-License-Identifier: MIT */
/*
 * rs.h - rsockets: stream sockets over RC QPs and the CM, speaking
 * rdma-core's rsockets protocol (docs/rdmacm.md, "rsockets").
 *
 *   rs_api.c    socket numbers, rsocket/rbind/rlisten/rclose, options, rfcntl
 *   rs_conn.c   connecting and accepting: resources, connection data
 *   rs_data.c   the data path: sends, completions, credits, receives, iomap
 *   rs_poll.c   rpoll and rselect
 *
 * A stream rsocket's number is the fd of its CM id's event channel, a
 * real descriptor. Each rsocket has one mutex (rs->lock) over its state;
 * blocking waits (poll(2) on the completion or event channel) release it.
 * Internal functions return 0 or -errno; the exported calls set errno.
 */
#ifndef SV_RDMACM_RS_H
#define SV_RDMACM_RS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <rdma/rsocket.h>

#include "rdmacm/cm.h"

enum {
	RS_SQ_SIZE = 384, /* default queue sizes (rdma-core's defaults) */
	RS_RQ_SIZE = 384,
	RS_INLINE = 64,
	RS_BUF_SIZE = 1 << 17, /* send and receive buffers */
	RS_SNDLOWAT = 2048,
	RS_MAX_XFER = 1 << 16,
	RS_CTRL_SLOTS = 4,
	RS_CONN_DATA_LEN = 40,
	RS_CONN_VERSION = 1,
	RS_CONN_FLAG_NET = 1 << 0,
	RS_CONN_FLAG_IOMAP = 1 << 1,
	RS_MAX_QUEUE = 65534,
};

/* The 32-bit immediate: op in bits 31-29, data in bits 28-0. */
enum rs_op {
	RS_OP_DATA = 0,
	RS_OP_WRITE = 2, /* riowrite, local only */
	RS_OP_SGL = 4,
	RS_OP_IOMAP_SGL = 6,
	RS_OP_CTRL = 7,
};

enum {
	RS_CTRL_DISCONNECT = 0,
	RS_CTRL_KEEPALIVE = 1,
	RS_CTRL_SHUTDOWN = 2,
};

static inline uint32_t rs_imm(enum rs_op op, uint32_t data)
{
	return (uint32_t)op << 29 | (data & 0x1fffffff);
}

/* A scatter entry as the peer writes it (its byte order; ours when NET is equal). */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};

enum rs_state {
	RS_INIT,
	RS_BOUND,
	RS_LISTENING,
	RS_RESOLVING, /* rconnect: address, route */
	RS_CONNECTING, /* REQ sent */
	RS_CONNECTED,
	RS_DISCONNECTED,
	RS_ERROR,
};

struct rs_local_iomap { /* riomap registrations */
	struct ibv_mr *mr;
	void *buf;
	size_t len;
	int index;
	struct rs_local_iomap *next;
};

struct rsocket {
	int fd; /* the socket number: the event channel's fd */
	int type; /* SOCK_STREAM */
	enum rs_state state;
	bool nonblock, cloexec;
	bool readable, writable; /* no SHUTDOWN received / sent */
	int err; /* SO_ERROR */
	pthread_mutex_t lock;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_addrinfo *pending_dst; /* rconnect in progress */
	/* options */
	uint32_t sq_size, rq_size, inline_size, iomap_size;
	int reuseaddr, keepalive, nodelay, oobinline;
	struct linger linger;
	uint32_t sbuf_size, rbuf_size;
	/* listening: requests taken from the channel, not yet accepted */
	int backlog;
	/* verbs resources */
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	struct ibv_mr *smr, *rmr, *tmr;
	uint8_t *sbuf, *rbuf;
	void *target; /* 2 rs_sge + iomap_size rs_iomap, the peer writes here */
	size_t target_len;
	uint32_t cq_armed;
	/* sender */
	uint16_t sseq_no, sseq_comp;
	uint32_t sqe_avail;
	uint32_t sbuf_bytes_avail, ssgl_off; /* free sbuf bytes, next sbuf offset */
	int target_sge; /* our target_sgl entry we write data through */
	struct rs_sge remote_sgl; /* the peer's target SGL array */
	int remote_sge; /* its entry our next SGL update fills */
	uint64_t remote_iomap_addr; /* peer's iomap array (remote_sgl.addr + 32) */
	uint32_t remote_iomap_size; /* entries the peer has */
	bool swap; /* the peer's byte order differs */
	uint16_t ctrl_seqno, ctrl_max_seqno;
	uint32_t unacked_sends;
	/* receiver */
	uint16_t rseq_no, rseq_comp;
	uint32_t rbuf_offset, rbuf_bytes_avail, rbuf_free_offset;
	uint32_t *rmsg; /* queued DATA lengths (ring of rq_size + 1) */
	uint32_t rmsg_head, rmsg_tail, rmsg_size;
	uint32_t rmsg_done; /* bytes of the head message already consumed */
	struct rs_local_iomap *iomaps;
	uint32_t iomap_next;
};

/* rs_api.c: the socket table */
struct rsocket *rs_get(int fd); /* NULL: not an rsocket (EBADF) */
int rs_insert(struct rsocket *rs);
void rs_remove(struct rsocket *rs);
int rs_alloc(int type, struct rsocket **out);
void rs_free(struct rsocket *rs);

/* rs_conn.c */
int rs_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
/* Drive a connect in progress (lock held): 0 when done, -EINPROGRESS, -errno. */
int rs_connect_step(struct rsocket *rs, bool wait);
int rs_accept(struct rsocket *l, struct rsocket **out);
/* CM events on a connected socket (DISCONNECTED): lock held, never blocks. */
void rs_cm_events(struct rsocket *rs);

/* rs_data.c */
int rs_create_resources(struct rsocket *rs);
void rs_free_resources(struct rsocket *rs);
void rs_format_conn_data(struct rsocket *rs, uint8_t out[RS_CONN_DATA_LEN]);
int rs_save_conn_data(struct rsocket *rs, const uint8_t *in);
int rs_post_recvs(struct rsocket *rs);
/* Process completions without blocking; lock held. */
int rs_poll_cq(struct rsocket *rs);
/* Block until the CQ has something or `ms` passes (lock released meanwhile). */
int rs_wait_cq(struct rsocket *rs, int ms);
bool rs_can_send(struct rsocket *rs);
bool rs_have_rdata(struct rsocket *rs);
void rs_send_credits(struct rsocket *rs);
ssize_t rs_send(struct rsocket *rs, const void *buf, size_t len, int flags);
ssize_t rs_recv(struct rsocket *rs, void *buf, size_t len, int flags);
int rs_send_ctrl(struct rsocket *rs, uint32_t ctrl);
/* Wait until every send completed (shutdown, close); lock held. */
void rs_drain_sends(struct rsocket *rs);

#endif

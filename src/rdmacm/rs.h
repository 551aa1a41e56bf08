/* SPDX-License-Identifier: MIT */
/*
 * rs.h - rsockets: stream sockets over RC QPs and the CM, speaking
 * rdma-core's rsockets protocol (docs/rdmacm.md, "rsockets").
 *
 *   rs_api.c    socket numbers, rsocket/rbind/rlisten/rclose, options, rfcntl
 *   rs_conn.c   connecting and accepting: resources, connection data
 *   rs_data.c   the data path: sends, completions, credits, receives, iomap
 *   rs_poll.c   rpoll and rselect
 *   ds_api.c    datagram rsockets: the calls (SOCK_DGRAM)
 *   ds_qp.c     datagram rsockets: UD QPs per source address, peers, AHs
 *   ds_data.c   datagram rsockets: sends, receives, UDP discovery, waits
 *
 * A stream rsocket's number is the fd of its CM id's event channel, a
 * real descriptor; a datagram rsocket's is the fd of its UDP socket. Each rsocket has one mutex
 * (rs->lock) over its state; blocking waits (poll(2) on the completion or event channel) release
 * it. Internal functions return 0 or -errno; the exported calls set errno.
 */
#ifndef SV_RDMACM_RS_H
#define SV_RDMACM_RS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <poll.h>
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

/* Datagram rsockets (docs/rdmacm.md, "Datagram rsockets"). */
enum {
	DS_MSG_MAX = RS_SNDLOWAT, /* ds_header + data in one UD message */
	DS_GRH = 40,
	DS_SLOT = DS_GRH + DS_MSG_MAX, /* a receive slot */
	DS_HDR4 = 8, /* ds_header lengths */
	DS_HDR6 = 24,
	DS_UDP4 = 16, /* ds_udp_header lengths */
	DS_UDP6 = 28,
	DS_UDP_TAG = 0x55555555,
	DS_RQ = 256, /* receive slots per QP */
	DS_SQ = 64, /* send slots per QP */
	DS_MAX_QPS = 4, /* source addresses per socket */
};

/* One UD QP, for one local source address, with its own CM id. */
struct ds_qp {
	struct rdma_cm_id *id; /* RDMA_PS_UDP, bound to `src` */
	struct sockaddr_storage src; /* its IP, the UDP socket's port */
	struct ibv_pd *pd;
	struct ibv_comp_channel *cch;
	struct ibv_cq *cq; /* sends and receives */
	struct ibv_mr *mr; /* rbuf then sbuf */
	uint8_t *buf; /* DS_RQ receive slots, then DS_SQ send slots */
	uint32_t sfree; /* free send slots */
	uint32_t snext; /* next send slot (a ring: completions come in order) */
	struct ds_qp *next;
};

/* A peer, by its address (an IP and the port of its UDP socket). */
struct ds_dest {
	struct sockaddr_storage addr;
	struct ds_qp *qp; /* ours that reaches it */
	struct ibv_ah *ah;
	uint32_t qpn; /* its QP; 0 until its CTRL or first DATA says */
	struct ds_dest *next;
};

/* A received message waiting for rrecv: a receive slot or a UDP message. */
struct ds_rx {
	struct ds_qp *qp; /* NULL: the UDP message in rsocket.ds_udp_msg */
	uint32_t slot, len; /* slot index; bytes after the GRH */
};

struct rsocket {
	int fd; /* the socket number: the event channel's fd (UDP socket's for SOCK_DGRAM) */
	int type; /* SOCK_STREAM or SOCK_DGRAM */
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
	/* datagram */
	struct ds_qp *ds_qps;
	struct ds_dest *ds_dests, *ds_conn; /* peers; rconnect's */
	struct ds_rx *ds_rx; /* ring of DS_MAX_QPS * DS_RQ + 2 */
	uint32_t ds_rx_head, ds_rx_tail;
	uint8_t *ds_udp_msg; /* one UDP DATA message taken in (DS_MSG_MAX) */
	struct sockaddr_storage ds_udp_src; /* its sender */
	bool ds_udp_held; /* ds_udp_msg is queued in ds_rx */
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

/* ds_api.c */
int ds_socket(int domain, int flags); /* a new datagram rsocket's number or -errno */
void ds_free(struct rsocket *rs);
/* The calls on a datagram rsocket (lock taken inside; 0 or -errno). */
int ds_bind(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
int ds_connect(struct rsocket *rs, const struct sockaddr *addr, socklen_t len);
ssize_t ds_sendto(struct rsocket *rs, const void *buf, size_t len, int flags,
		  const struct sockaddr *to, socklen_t dstlen);
ssize_t ds_recvfrom(struct rsocket *rs, void *buf, size_t len, int flags, struct sockaddr *src,
		    socklen_t *srclen);
int ds_setsockopt(struct rsocket *rs, int level, int name, const void *val, socklen_t len);
int ds_getsockopt(struct rsocket *rs, int level, int name, void *val, socklen_t *len);
int ds_peername(struct rsocket *rs, struct sockaddr *addr, socklen_t *len);
short ds_revents(struct rsocket *rs, short events);

/* ds_qp.c (lock held) */
/* The QP for local IP `ip` (port ignored), made (and the UDP socket bound) if new. */
int ds_get_qp(struct rsocket *rs, const struct sockaddr *ip, struct ds_qp **out);
/* The peer at `addr`, made with its AH (address and route resolved) if new. */
int ds_get_dest(struct rsocket *rs, const struct sockaddr *addr, struct ds_dest **out);
void ds_free_qps(struct rsocket *rs);
/* Post receive slot `slot` of `qp` again. */
int ds_post_recv(struct ds_qp *qp, uint32_t slot);
socklen_t ds_addr_len(const struct sockaddr *sa);

/* ds_data.c (lock held) */
ssize_t ds_send(struct rsocket *rs, const void *buf, size_t len, int flags, struct ds_dest *dest);
ssize_t ds_recv(struct rsocket *rs, void *buf, size_t len, int flags, struct sockaddr *src,
		socklen_t *srclen);
/* Take in completions and UDP messages without blocking; 0 or -errno. */
int ds_poll(struct rsocket *rs);
bool ds_readable(struct rsocket *rs);
bool ds_writable(struct rsocket *rs);
/* Arm the CQs; the descriptors that wake a wait (up to 1 + DS_MAX_QPS) into `p`. */
int ds_wait_fds(struct rsocket *rs, struct pollfd *p);
/* Take the CQ events the wake-up left. */
void ds_ack_events(struct rsocket *rs);

#endif

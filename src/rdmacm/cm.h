/* SPDX-License-Identifier: MIT */
/*
 * cm.h - softverbs' librdmacm: the connection manager's internal types.
 *
 *   init.c      the process-wide state: devices (one context, GSI endpoint
 *               and shared PD each), the CM thread, the lock
 *   channel.c   event channels (eventfd + FIFO), events, synchronous waits
 *   id.c        ids: create, destroy, bind, resolve, listen, options, migrate
 *   conn.c      connect, accept, reject, establish, notify, disconnect
 *   recv.c      the CM thread: MADs received, timers, retransmission
 *   send.c      building and sending the CM MADs of a connection
 *   qp.c        QPs, CQs and SRQs made for the application, QP attributes
 *   addrinfo.c  rdma_getaddrinfo, rdma_create_ep, rdma_get_request
 *   misc.c      the small exported calls
 *   mad.c       the MAD codec (mad.h)
 *   rendezvous.c  listeners on 127/8 addresses found by other processes
 *
 * Locking: one mutex, cm.lock, guards every id, channel FIFO and
 * connection. API calls take it, change state, send MADs and arm timers
 * (deadlines the CM thread looks at), and release it before they block on
 * a channel. The CM thread takes it per MAD and per timer pass. Verbs
 * calls made under it (QP transitions) never wait for the CM.
 *
 * Internal functions return 0 or -errno; the exported ones (marked
 * CM_EXPORT) turn that into -1 and errno as librdmacm does.
 *
 * Stale handles: the exported calls look an id or a channel up among the
 * live ones (cm.ids, cm.channels) by its pointer, under the lock, before
 * anything reads it. One destroyed already, or never made here, is
 * EINVAL (an id) or EBADF (a channel; a second destroy does nothing), as
 * the kernel's librdmacm fails them (a stale handle, a closed rdma_cm
 * descriptor). perftest 4.5's -R client retries a rejected connection
 * with the ids and channel it has just destroyed. Destroying a channel
 * first orphans its ids, as closing the kernel's descriptor destroys
 * them: they stop listening and connecting, lose their events and
 * ports, and every call but rdma_destroy_id (which frees them) is EBADF.
 */
#ifndef SV_RDMACM_CM_H
#define SV_RDMACM_CM_H

#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "rdmacm/mad.h"
#include "sw/gsi.h"

#define CM_EXPORT __attribute__((visibility("default")))

#ifndef AF_IB
#define AF_IB 27
#endif

enum {
	CM_MAX_DEVICES = 16,
	CM_MAX_BACKLOG = 1024,
	CM_PDATA_MAX = 256, /* room for an event's private data */
	CM_RESPONSE_TIMEOUT = 20, /* CM response timeout (4.096 us << 20) */
	CM_MAX_CM_RETRIES = 15,
	CM_PACKET_LIFETIME = 16,
	CM_MRA_TIMEOUT = 24,
	CM_LOCAL_ACK_DELAY = 15, /* what the software device reports */
	CM_HOP_LIMIT = 64,
	CM_RDV_POLL_MAX = 64, /* published listeners per process (rendezvous.c) */
};

/* The connection manager's view of one softverbs device. */
struct cm_dev {
	struct ibv_context *ctx;
	struct softverbs_gsi *gsi;
	struct in_addr addr; /* the device's IPv4 address (GID 0 is ::ffff:addr) */
	union ibv_gid gid;
	uint64_t guid; /* node GUID, host order */
	enum ibv_mtu mtu; /* active MTU of port 1 */
	uint32_t max_qp_wr;
	uint8_t max_rd_atom, max_init_rd_atom;
	struct ibv_pd *pd; /* shared by the ids bound here, while pd_refs > 0 */
	int pd_refs;
};

/* States of an rdma_cm_id (the kernel's rdma_cm states). */
enum cma_state {
	CMA_IDLE,
	CMA_ADDR_QUERY,
	CMA_ADDR_RESOLVED,
	CMA_ROUTE_QUERY,
	CMA_ROUTE_RESOLVED,
	CMA_CONNECT,
	CMA_DISCONNECT,
	CMA_ADDR_BOUND,
	CMA_LISTEN,
	CMA_DESTROYING,
};

/* States of the IB CM connection under an id. */
enum cm_state {
	CM_IDLE,
	CM_REQ_SENT,
	CM_MRA_REQ_RCVD,
	CM_REQ_RCVD,
	CM_MRA_REQ_SENT,
	CM_REP_SENT,
	CM_MRA_REP_RCVD,
	CM_REP_RCVD,
	CM_MRA_REP_SENT,
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DREQ_RCVD,
	CM_TIMEWAIT,
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
};

/* An IB CM connection (or SIDR exchange): what both sides agreed on. */
struct cm_conn {
	enum cm_state state;
	uint32_t lcid, rcid; /* local and remote communication IDs */
	uint64_t rguid; /* the peer's CA GUID */
	uint64_t tid; /* of the REQ / SIDR_REQ (responses echo it) */
	uint64_t dreq_tid; /* of the DREQ we answer */
	uint32_t rqpn; /* the peer's QPN */
	uint32_t lpsn, rpsn; /* our starting PSN (what we receive), the peer's */
	uint8_t resp_res; /* our max_dest_rd_atomic */
	uint8_t init_depth; /* our max_rd_atomic */
	uint8_t retry, rnr_retry; /* our QP's RTS counts */
	uint8_t ack_timeout; /* our QP's local ACK timeout */
	uint8_t mtu; /* enum ibv_mtu */
	bool srq, flow_control;
	uint8_t peer_gid[16];
	uint32_t rqkey; /* UD: the peer's Q_Key */
	uint64_t sid; /* service ID of the request */
	/* the message that is retransmitted until answered */
	uint8_t mad[CM_MAD_LEN];
	bool mad_armed;
	int retries_left;
	uint64_t deadline_ms; /* CLOCK_MONOTONIC ms, 0 when no timer */
	uint32_t timeout_ms;
	uint8_t max_cm_retries; /* the peer's, for our REP */
	uint8_t peer_response_timeout; /* the peer's CM response timeout (REP timer) */
};

struct cm_event;

struct cm_channel {
	struct rdma_event_channel ch; /* ch.fd: eventfd, one count per queued event */
	struct cm_channel *prev, *next; /* every live channel (cm.channels) */
	bool linked; /* in cm.channels: not destroyed */
	struct cm_event *head, *tail;
	bool private_sync; /* a synchronous id's own channel */
	int waiters; /* threads inside cm_get_event between lock and poll */
	bool dead; /* destroyed while waited on: the last waiter frees it */
};

struct cm_id {
	struct rdma_cm_id id; /* first: a cast from the public pointer */
	struct cm_id *prev, *next; /* every live id (cm.ids) */
	enum cma_state state;
	struct cm_dev *dev; /* NULL while unbound or bound to a wildcard */
	bool sync;
	bool destroying; /* inside rdma_destroy_id: no longer a live id */
	bool orphan; /* its channel was destroyed: id.channel is NULL */
	bool bound; /* src_addr holds a bound address and port */
	int reported, acked; /* events handed out and acknowledged */
	/* options */
	uint8_t tos;
	bool tos_set;
	int reuseaddr, afonly;
	uint8_t ack_timeout;
	bool ack_timeout_set;
	/* listening */
	int backlog, queued_reqs;
	int rdv_fd; /* published for the same-host rendezvous, -1 when not */
	/* passive ids */
	bool passive; /* made by a received request */
	struct cm_id *listener; /* while its CONNECT_REQUEST is unretrieved */
	bool app_owned; /* accepted or rejected: its events reach the application */
	bool req_retrieved;
	/* the path (one entry; route.path_rec points here when set) */
	struct ibv_sa_path_rec path;
	bool has_path;
	struct cm_conn conn;
	bool connect_error; /* CONNECT_ERROR reported: later events suppressed */
	/* library-made objects */
	bool own_cqs;
	bool pd_ref; /* holds a reference on dev's shared PD */
	struct ibv_qp_init_attr *ep_qp_attr; /* rdma_create_ep passive: for get_request */
	struct ibv_ece local_ece, remote_ece;
	struct rdma_addrinfo *pending_ai; /* rdma_resolve_addrinfo result */
	bool ai_pending;
	struct cm_mc *mcs; /* multicast groups joined (mcast.c) */
};

/* mcast.c: one multicast join of an id. */
struct cm_mc {
	struct cm_mc *next;
	struct sockaddr_storage addr; /* as the application gave it */
	socklen_t addrlen;
	union ibv_gid mgid;
	uint8_t join_flags;
	bool attached; /* its QP is attached to mgid */
	void *context;
};

/* mcast.c: forget an id's joins (its QP leaves the groups with it); lock held. */
void cm_mc_free_all(struct cm_id *cid);
/*
 * mcast.c: the id's QP was made or destroyed: a new QP is attached to the
 * groups of the id's joins (not send-only), as librdmacm attaches a QP
 * made before the join's event is read; lock held.
 */
void cm_mc_qp_changed(struct cm_id *cid);

static inline struct cm_id *cm_id_of(struct rdma_cm_id *id)
{
	return (struct cm_id *)id;
}

struct cm_event {
	struct rdma_cm_event ev; /* first: a cast from the public pointer */
	struct cm_event *next;
	struct cm_id *owner; /* counts reported / acked */
	struct cm_channel *chan;
	uint8_t pdata[CM_PDATA_MAX];
};

/* init.c: the process-wide state. */
struct cm_global {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* acks, destroy waits */
	struct cm_dev dev[CM_MAX_DEVICES];
	int ndev;
	struct cm_id *ids;
	struct cm_channel *channels; /* the live ones */
	pthread_t thread;
	int wake_fd; /* eventfd: the CM thread re-reads its deadlines */
	uint64_t tid_hi; /* random high half of our TIDs */
	uint32_t next_cid; /* communication ID allocator */
	int init_err; /* -errno of the one-time initialisation */
	uint32_t timeout_scale_us; /* SOFTVERBS_CM_TIMEOUT: test knob, 0 = off */
};

extern struct cm_global cm;

/* Initialise once (devices, GSI endpoints, thread): 0 or -errno (-ENODEV: no device). */
int cm_init(void);
/* Wake the CM thread after arming a timer (lock held or not). */
void cm_wake(void);
/* Milliseconds of CLOCK_MONOTONIC. */
uint64_t cm_now_ms(void);
/* 4.096 us << t, in ms as the kernel approximates it: 2^max(t-8, 0). */
uint32_t cm_timeout_ms(uint8_t t);
/* The device whose address is `a`, or NULL. */
struct cm_dev *cm_dev_by_addr(struct in_addr a);
/* A fresh nonzero communication ID unused by any live id; lock held. */
uint32_t cm_new_cid(void);
/* A random value (the starting PSN uses 24 bits of it). */
uint32_t cm_random32(void);
/* The shared PD of a device: take / drop a reference (lock held). */
int cm_dev_get_pd(struct cm_dev *d, struct ibv_pd **pd);
void cm_dev_put_pd(struct cm_dev *d);

/* channel.c */
/* A new channel, linked into cm.channels (lock NOT held). */
int cm_channel_create(bool private_sync, struct cm_channel **out);
/* Unlink (if still linked) and free a channel and its queued events; lock held. */
void cm_channel_free(struct cm_channel *c);
/* Is `c` a live channel (compares pointers only)? Lock held. */
bool cm_channel_live(const struct cm_channel *c);
/*
 * Queue an event for `owner` (on its channel). `pdata` (len bytes, may be
 * NULL) is copied into the event. Returns the event, so that the caller can
 * fill param, or NULL when out of memory. Lock held.
 */
struct cm_event *cm_queue_event(struct cm_id *owner, enum rdma_cm_event_type type, int status,
				const void *pdata, size_t len);
/* Drop the unretrieved events of `id` from its channel (lock held). */
void cm_drop_events(struct cm_id *id);
/* Move the unretrieved events of `id` to channel `to` (lock held). */
void cm_move_events(struct cm_id *id, struct cm_channel *to);
/* Wait, lock NOT held, until every event reported for `id` was acked. */
void cm_wait_acked(struct cm_id *id);
/*
 * Synchronous ids: ack id->event, wait for the next event of the id's
 * channel into id->event and map its status (rdma-core's rules).
 * Lock NOT held. 0 or -errno.
 */
int cm_sync_wait(struct cm_id *id);
/*
 * The next event of channel `c` (blocking unless its fd is O_NONBLOCK:
 * -EAGAIN). A channel destroyed while a thread waits here is freed by the
 * last such thread, which then never returns, as a read of the kernel's
 * closed rdma_cm descriptor never does (rping's event thread is still in
 * rdma_get_cm_event when rping destroys its channel). Lock NOT held.
 */
int cm_get_event(struct cm_channel *c, struct rdma_cm_event **ev);
int cm_ack_event(struct rdma_cm_event *ev);
/* cm_ack_event with the lock held. */
void cm_ack_event_locked(struct rdma_cm_event *ev);

static inline struct cm_channel *cm_chan_of(struct rdma_cm_id *id)
{
	return (struct cm_channel *)id->channel;
}

/* id.c */
/* Allocate an id on `chan` (lock held); linked into cm.ids. */
int cm_id_alloc(struct cm_channel *chan, void *context, enum rdma_port_space ps,
		enum ibv_qp_type qpt, struct cm_id **out);
/* Unlink and free the id's memory; its state is already torn down (lock held). */
void cm_id_free(struct cm_id *cid);
/*
 * Is `id` a live id (lock held)? 0, -EINVAL when it is not one (NULL,
 * destroyed, being destroyed, never made here), -EBADF when its channel
 * was destroyed. Only pointers are compared: a stale `id` is not read.
 */
int cm_id_check(const struct rdma_cm_id *id);
/* Take cm.lock and cm_id_check(id): 0 with the lock held, or the error without it. */
int cm_lock_id(struct rdma_cm_id *id);
/* Bind the id to device `d` (verbs, pd, port_num, sgid, pkey); lock held. */
int cm_id_attach_dev(struct cm_id *cid, struct cm_dev *d);
/*
 * Queue an event to the application unless the rules drop it: the id is
 * being destroyed, a passive id not yet accepted or rejected (only its
 * CONNECT_REQUEST goes out), or after CONNECT_ERROR. Lock held.
 */
struct cm_event *cm_deliver(struct cm_id *cid, enum rdma_cm_event_type type, int status,
			    const void *pdata, size_t len);
/* Enter timewait: the timer, then TIMEWAIT_EXIT (lock held). */
void cm_enter_timewait(struct cm_id *cid);
/* Tear the connection down as destroy does (REJ / DREQ / DREP); lock held. */
void cm_id_abort(struct cm_id *cid);
/* The id's local or remote IPv4 address (0 for other families). */
struct in_addr cm_src_v4(const struct cm_id *cid);
struct in_addr cm_dst_v4(const struct cm_id *cid);
/* IPv4-mapped GID of `a`. */
void cm_gid_v4(uint8_t gid[16], struct in_addr a);
/* Is `sa` an address this library takes (AF_INET, AF_INET6)? */
bool cm_family_ok(const struct sockaddr *sa);

/* send.c: the MADs (lock held). */
uint64_t cm_new_tid(uint32_t cid);
int cm_send_mad(struct cm_dev *d, const uint8_t peer_gid[16], const uint8_t mad[CM_MAD_LEN]);
/*
 * Send, once and unarmed, an RTU or a DREP (`attr_id`: the same body, the
 * two comm IDs and no private data) with transaction id `tid` to
 * `peer_gid` through `d`. 0 or -errno (cm_send_mad's).
 */
int cm_send_comm_ids(struct cm_dev *d, const uint8_t peer_gid[16], uint16_t attr_id, uint64_t tid,
		     uint32_t lcid, uint32_t rcid);
/* Send conn->mad and arm its retransmission (timeout_ms, retries). */
int cm_send_armed(struct cm_id *cid, uint32_t timeout_ms, int retries);
void cm_disarm(struct cm_id *cid);
int cm_send_req(struct cm_id *cid, const struct rdma_conn_param *p);
int cm_send_rep(struct cm_id *cid, const struct rdma_conn_param *p);
int cm_send_rtu(struct cm_id *cid);
int cm_send_dreq(struct cm_id *cid);
int cm_send_drep(struct cm_id *cid);
/* A REJ for the id's connection (`msg` REJected, ARI and private data). */
int cm_send_rej(struct cm_id *cid, uint16_t reason, const void *ari, uint8_t ari_len,
		const void *pdata, uint8_t len);
int cm_send_mra(struct cm_id *cid, uint8_t msg);
int cm_send_sidr_req(struct cm_id *cid, const struct rdma_conn_param *p);
int cm_send_sidr_rep(struct cm_id *cid, uint8_t status, uint32_t qpn, const void *pdata,
		     uint8_t len);
/* The REQ's retransmission timeout: 2 * ms(lifetime) + ms(response timeout). */
uint32_t cm_req_timeout_ms(void);
/* cm_ack_timeout(delay, life): the local ACK timeout of the kernel's formula. */
uint8_t cm_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life);

/* recv.c */
void *cm_thread_main(void *arg);
/* One received MAD (lock held): the state machines. Exposed for tests. */
void cm_handle_mad(struct cm_dev *d, const struct softverbs_gsi_addr *src,
		   const uint8_t mad[CM_MAD_LEN]);
/* Run expired timers; returns the next deadline (ms) or 0 (lock held). */
uint64_t cm_run_timers(uint64_t now);

/*
 * held.c: requests kept between two listeners on one port (lock held).
 * cm_listener_gone: the listening id `l` goes away. cm_hold_req: a REQ
 * (`sid`, requester's ID `rcid`) found no listener on `d`; true when it
 * is kept (or was already) instead of refused. cm_replay_held: a new
 * listener; the kept requests are handled again. cm_held_timers: the
 * kept requests whose time ran out are handled again (refused); returns
 * the next deadline (ms, 0: none).
 */
void cm_listener_gone(struct cm_id *l);
bool cm_hold_req(struct cm_dev *d, const struct softverbs_gsi_addr *src,
		 const uint8_t mad[CM_MAD_LEN], uint64_t sid, uint32_t rcid);
void cm_replay_held(void);
uint64_t cm_held_timers(uint64_t now);

/* rendezvous.c: the same-host rendezvous */
/* Is `a` an address listeners publish and connects look up (127/8)? */
bool cm_rdv_addr(struct in_addr a);
/*
 * Publish a listener bound to a 127/8 address with a device (others are
 * left alone): 0, -EADDRINUSE when a process already listens on that
 * address and port in the id's port space, or another -errno. Lock held.
 */
int cm_rdv_publish(struct cm_id *cid);
/* Withdraw the listener's name, if published (lock held). */
void cm_rdv_withdraw(struct cm_id *cid);
/*
 * The GID of the device whose process (of our user) listens on a:port
 * in port space `ps`: 0, or -ENOENT when none answers within a second.
 * Lock NOT needed (may block while a listener answers).
 */
int cm_rdv_lookup(int ps, struct in_addr a, uint16_t port, uint8_t gid[16]);
/* The CM thread: the published sockets to poll (up to max), and serving those ready. */
int cm_rdv_pollfds(struct pollfd *p, int max);
void cm_rdv_serve(const struct pollfd *p, int n);

/* qp.c */
/* Move the id's QP through INIT (access), RTR, RTS with the connection's values. */
int cm_qp_to_rts(struct cm_id *cid);
int cm_qp_to_err(struct cm_id *cid);
int cm_init_qp_attr(struct cm_id *cid, struct ibv_qp_attr *attr, int *mask);
void cm_destroy_lib_cqs(struct cm_id *cid);

/* Set errno from a -errno result and return -1, or 0. */
static inline int cm_ret(int ret)
{
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return 0;
}

#endif

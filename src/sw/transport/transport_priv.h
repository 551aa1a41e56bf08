/* SPDX-License-Identifier: MIT */
/*
 * transport_priv.h - the software device's RoCE v2 transport engine, private
 * to src/sw/transport.
 *
 *   net.c       the network interface: send a packet or a batch (UDP, or
 *               the same-host link when the peer has one)
 *   shm.c       the same-host link: packets through shared-memory rings
 *   progress.c  the device's progress thread: receives, dispatches by
 *               QPN, runs timers, sends deferred ACKs
 *   req.c       requester: turns send WQEs into request packets, within
 *               the window, and retransmits (go-back-N)
 *   comp.c      completer: ACKs, NAKs, read responses and atomic ACKs
 *               retire send WQEs into completions
 *   resp.c      responder: validates requests, places data, answers
 *               with ACKs, NAKs, read responses and atomic ACKs, and
 *               replays answers to duplicates (resp_ud.c: UD receives)
 *   budget.c    the device-wide send budget and the line of waiting QPs
 *   engine.c    the engine's life cycle and the queue layer's hooks
 *               (the public surface: sw/transport.h)
 *
 * All per-QP state here is guarded by qp->lock.
 */
#ifndef SV_SW_TRANSPORT_PRIV_H
#define SV_SW_TRANSPORT_PRIV_H

#include <poll.h>
#include <semaphore.h>
#include <time.h>

#include "sw/queue.h"
#include "sw/wire.h"

enum {
	SW_PKT_MAX = 4096 + 256, /* largest packet: MTU payload + headers */
	SW_RX_BATCH = 32,
	SW_WINDOW_MIN = 8, /* congestion window bounds, in packets */
	SW_WINDOW_INIT = 128,
	SW_WINDOW_MAX = 1024,
	SW_ACK_EVERY = 16, /* request an ACK at least this often */
	SW_BUDGET_PKTS = 512, /* PSNs a device may have in flight, all QPs (budget.c) */
	SW_BUDGET_REF_PKTS = 2048, /* the same while a packet by reference is taken (budget.c) */
	SW_TICK_NS = 1000 * 1000, /* timer granularity when idle: 1 ms */
	SW_BACKOFF_MAX = 3, /* retransmit timeout back-off: at most 8x */
	SW_PROBE_MIN_NS = 1000 * 1000, /* tail-loss probe timeout floor (probe.c) */
	SW_PROBE_LINK_NS = 50 * 1000, /* the probe's wait on the same-host link (probe.c) */
	SW_LINK_LOSSY_NS = 100 * 1000 * 1000, /* ... while a loss showed this recently */
	SW_LINK_STALLS = 4, /* timer deferrals in a row without the link's peer moving (req.c) */
	SW_STASH_SLOTS = 1024, /* PSNs ahead of a gap an RC responder keeps, per QP (stash.c) */
	SW_STASH_DEV_MAX = 4096, /* packets kept that way, all QPs of a device */
	SW_GSO_STRIKES = 16, /* GSO sends refused in a row before GSO is off (net.c) */
};

/* ---- counters (per device; printed by the diagnostics view) ---- */

struct sw_counters {
	/* written by posting threads, per send call */
	atomic_ullong tx_pkts, tx_bytes, shm_tx_pkts, ref_tx_pkts;
	/*
	 * written by the receive token's holder alone (sw_count_own), on a
	 * line of their own: one per received packet
	 */
	_Alignas(64) atomic_ullong rx_pkts, rx_bytes, shm_rx_pkts, ref_rx_pkts;
	_Alignas(64) atomic_ullong retransmits, timeouts, rnr_naks_rx, rnr_naks_tx;
	atomic_ullong seq_naks_rx, seq_naks_tx, err_naks_rx, err_naks_tx;
	atomic_ullong duplicates, drops_malformed, drops_icrc, drops_no_qp;
	atomic_ullong drops_state, drops_qkey, drops_no_recv, drops_out_of_window;
	atomic_ullong tx_again; /* sends that found the socket full */
	/*
	 * packets the requester sent again (go-back-N), datagrams the kernel
	 * dropped at a full receive buffer of ours (SO_RXQ_OVFL), QPs that
	 * queued for the device's budget, ring or socket (budget.c), tail-loss
	 * probes sent (probe.c)
	 */
	atomic_ullong resent_pkts, sock_overflows, budget_waits, probes;
	/* retransmit timeouts not taken: the link still held packets its consumer was reading */
	atomic_ullong timer_deferrals;
	/* packets kept after a gap (stash.c); NAKs answered by one packet (sw_req_selective) */
	atomic_ullong stashed, selective;
	/*
	 * times the progress thread went to sleep in poll(2) (progress.c); of
	 * them leased (without the links' doorbells); leased wake-ups that
	 * found packets waiting
	 */
	atomic_ullong sleeps, leased_sleeps, lease_stalls;
	atomic_ullong app_passes, app_pkts; /* receive passes by application threads */
	atomic_ullong socks_paced; /* busy-poll passes that left the sockets alone (progress.c) */
	/* packets fault injection (SOFTVERBS_FAULT) dropped, sent twice, held back */
	atomic_ullong fault_drops, fault_dups, fault_reorders;
	/* the same-host link (shm.c): packets each way, links accepted, corrupt rings closed */
	atomic_ullong shm_links, shm_corrupt; /* (shm_tx_pkts, shm_rx_pkts: above) */
	/* small WRITEs the requester wrote into a peer itself (req_push.c), tries refused */
	atomic_ullong dir_pushes, dir_refused;
	/* (single copy: packets by reference, ref_tx_pkts and ref_rx_pkts: above) */
	/*
	 * IPv4 IDs (ipid.c): packets whose ICRC matched a non-zero ID or a
	 * clear DF, those whose ID the sender's window refused (also counted
	 * in drops_icrc), senders found to use random IDs
	 */
	atomic_ullong rx_ip_id, drops_ip_id, ip_id_random;
	/*
	 * UDP offloads (net.c, progress.c): GSO sends and the packets they
	 * carried, GSO sends the kernel refused (sent again one by one);
	 * GRO datagrams received and the packets they held
	 */
	atomic_ullong gso_sends, gso_pkts, gso_refused, gro_recvs, gro_pkts;
};

/*
 * Count `n` on a counter only the receive token's holder writes: a plain
 * relaxed load and store, no locked instruction (the token's mutex orders
 * one holder's counts before the next's; readers only print totals).
 */
static inline void sw_count_own(atomic_ullong *c, unsigned long long n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Count one event on the device's counter `field` and on the QP's (queue.h). */
#define SW_COUNT(eng, qp, field)                                                                   \
	do {                                                                                       \
		atomic_fetch_add_explicit(&(eng)->cnt.field, 1, memory_order_relaxed);             \
		SW_QP_COUNT(qp, field, 1);                                                         \
	} while (0)

/* ---- the device's engine ---- */

struct sw_shm;

/* fault.c: fault injection, the configuration and its state. */
struct sw_fault_state {
	struct sw_fault cfg;
	pthread_mutex_t lock; /* the send side: tx_rng and the held packet */
	uint64_t tx_rng;
	uint64_t rx_rng; /* the receive side's, under eng->rx_token */
	uint8_t *held; /* a packet held back for reordering, or NULL */
	size_t held_len;
	struct sw_av held_av;
};

/* ipid.c: the IPv4 ID windows of the senders seen; under eng->rx_token. */
enum {
	SW_IPID_PEERS_LOG2 = 6
};
struct sw_ipid_peer {
	bool used, random;
	bool zero; /* seen with ID 0 and DF only */
	bool df, cand_df; /* the DF bit of `last`, of `cand` */
	uint8_t strikes; /* refused in a row */
	uint16_t last, cand; /* newest ID accepted; the last one refused */
	uint32_t addr; /* IPv4 source, network order */
	uint64_t last_ns; /* when `last` was accepted */
};
struct sw_ipid_tab {
	struct sw_ipid_peer peer[1u << SW_IPID_PEERS_LOG2];
};

/*
 * ipid.c: are `id` and `df`, recovered from the ICRC of a packet from IPv4
 * source `addr` (network order), plausible for that sender at `now_ns`? Updates
 * the sender's window. *gave_up: this packet made the table stop judging
 * the sender (random IDs; count it).
 */
bool sw_ipid_plausible(struct sw_ipid_tab *t, uint32_t addr, uint16_t id, bool df, uint64_t now_ns,
		       bool *gave_up);
/* ipid.c: a packet from `addr` matched with ID 0 and DF (the hot path: one load, rarely a store).
 */
void sw_ipid_zero(struct sw_ipid_tab *t, uint32_t addr);

/* budget.c: the device-wide send budget and the line of QPs waiting for it. */
struct sw_budget {
	atomic_uint used; /* PSNs in flight, all QPs (the sum of their req->held) */
	atomic_uint nwait; /* QPs in line (n, readable without the lock) */
	pthread_mutex_t lock; /* guards the line */
	struct sw_qp **q; /* ring of waiting QPs, one reference each */
	uint32_t head, n, cap;
};

struct sw_engine {
	struct sw_dev *dev;
	pthread_t thread;
	/*
	 * Posted by the thread as its body begins: sw_engine_start() returns
	 * only then, so that a fork() in the program never happens while the
	 * thread is still being set up (a sanitizer's thread setup
	 * allocates, and its fork child would find the allocator locked).
	 */
	sem_t started;
	bool running;
	bool joined; /* the thread has ended (stop, or quiesce at unload) */
	bool reported; /* SOFTVERBS_STATS totals printed */
	atomic_bool stop;
	int wake_fd; /* eventfd: post_send asks for attention */
	atomic_bool wake_pending; /* sw_engine_wake() since the thread last looked */
	atomic_bool sleeping; /* the thread is in (or about to enter) poll(2) */
	/*
	 * Leased sleeps (progress.c): the thread sleeps without ringing
	 * producers' doorbells because an application thread polls; `notifies`
	 * counts req_notify_cq calls, which end a lease (sw_transport_unlease).
	 */
	atomic_bool leased;
	atomic_uint notifies;
	atomic_ullong pass_ns; /* when an application thread's receive pass last ended */
	/*
	 * When the thread next runs the timers (ns, CLOCK_MONOTONIC);
	 * UINT64_MAX while it scans them. A timer armed for later needs no
	 * wake-up (sw_engine_wake_for).
	 */
	atomic_ullong timers_at;
	atomic_uint sweeps; /* receive passes finished, by any thread (progress.c) */
	/*
	 * The receive side: the sockets, the links' rings and eng->rx, with
	 * all they lead to. The progress thread holds it but while it sleeps
	 * in poll(2); an application thread polling an empty CQ takes a pass
	 * under it then (sw_transport_poll).
	 */
	pthread_mutex_t rx_token;
	unsigned int fork_gen; /* sw_fork_gen when started: a fork child's copy never receives */
	bool busy_poll; /* SOFTVERBS_BUSY_POLL: spin instead of sleeping */
	bool pull; /* SOFTVERBS_SINGLE_COPY and not a CC bounce device */
	/*
	 * UDP GSO (net.c): on while the kernel takes UDP_SEGMENT sends;
	 * switched off after SW_GSO_STRIKES refusals in a row. GRO: the
	 * address socket delivers coalesced datagrams (progress.c).
	 */
	atomic_bool gso;
	atomic_uint gso_strikes;
	bool gro;
	bool app_rx; /* SOFTVERBS_APP_PROGRESS: sw_transport_poll may receive */
	uint64_t spin_ns; /* SOFTVERBS_SPIN_US: keep polling this long after work */
	pthread_mutex_t cqmod_lock; /* guards the list of moderated CQs (before any cq->lock) */
	struct sw_cq *cqmod; /* moderated CQs, through sw_cq.mod_next */
	pthread_mutex_t active_lock; /* guards the active list */
	struct sw_qp **active; /* QPs with timers or deferred work */
	uint32_t nactive, cap_active;
	/*
	 * The progress thread's own memory, so that an idle thread allocates
	 * nothing (a fork() in the program should not find it inside
	 * malloc): its receive batch, allocated before it starts
	 * (sw_progress_init), and the timer scan's copy of `active`, grown
	 * only when the active list outgrows it.
	 */
	struct rx_batch *rx;
	struct sw_qp **snap;
	uint32_t cap_snap;
	struct sw_counters cnt;
	struct sw_fault_state fault; /* SOFTVERBS_FAULT (fault.c) */
	struct sw_shm *shm; /* the same-host link, NULL when off (SOFTVERBS_SHM=0) */
	struct sw_ipid_tab ipid; /* the receive path's (progress thread) */
	struct softverbs_gsi *gsi; /* QP1 while librdmacm has it open (gsi.c) */
	struct sw_budget budget; /* budget.c */
	uint32_t rx_ovfl[2]; /* SO_RXQ_OVFL as last seen: address socket, link-local one */
	struct sw_mcast *mc; /* multicast groups (mcast.c) */
	atomic_uint stash_pkts; /* packets the responders keep (stash.c) */
	atomic_uint stash_cached[2]; /* free entries the responders' stashes hold, per size class */
};

/*
 * progress.c's leased sleeps: did the first pass after a leased wake-up
 * find packets that an application's pass should have taken (a stall,
 * which ends leases for a while)? `n` packets found, `reqs` of them
 * requests; `polled`: an application thread took a pass since the sleep
 * began, the last one ending `age_ns` ago. Packets with no pass at all
 * are a stall; after an older pass only requests are, which an
 * application may be waiting for on memory. ACKs and responses complete
 * work of an application that polls its CQs, and one that posts a batch
 * between its polls leaves them longer than that.
 */
enum {
	SW_LEASE_STALE_NS = 100 * 1000
};

static inline bool sw_lease_stalled(int n, unsigned int reqs, bool polled, int64_t age_ns)
{
	return n > 0 && (!polled || (reqs && age_ns > SW_LEASE_STALE_NS));
}

static inline struct sw_engine *sw_engine_of(struct sw_qp *qp)
{
	return sw_dev_of(qp->ibv.qp_base.context)->eng;
}

/* Make the progress thread run its timers soon. */
void sw_engine_wake(struct sw_engine *eng);
/*
 * A timer was armed for `deadline` (with the QP's lock held): wake the
 * thread only if it would otherwise look at its timers too late.
 */
void sw_engine_wake_for(struct sw_engine *eng, uint64_t deadline);

uint64_t sw_now_ns(void);

/*
 * progress.c: the progress thread's memory (eng->rx), before the thread
 * starts (0 or -ENOMEM), and after it ended (sw_progress_fini).
 */
int sw_progress_init(struct sw_engine *eng);
void sw_progress_fini(struct sw_engine *eng);
/* progress.c: the progress thread's body; returns when eng->stop is set. */
void *sw_progress_main(void *arg);
/*
 * progress.c: this process's fork generation (0, one more in each fork
 * child): an engine started in another generation is a copy whose thread
 * does not run here, and its sockets are the parent's.
 */
unsigned int sw_fork_gen_now(void);

/*
 * progress.c: handle `len` bytes from `src` to local address `dst` as one
 * packet off the socket (validation, dispatch, the ACK owed), without
 * the socket: for tests and fuzzing. Any thread holding no QP lock.
 * 0 or -ENOMEM.
 */
int sw_rx_inject(struct sw_engine *eng, const uint8_t *buf, size_t len, const union sw_sa *src,
		 const union sw_sa *dst);
/* The same, as a packet that came over the same-host link (stash.c keeps those). */
int sw_rx_inject_link(struct sw_engine *eng, const uint8_t *buf, size_t len, const union sw_sa *src,
		      const union sw_sa *dst);

/* ---- mcast.c, mcast_sock.c: UD multicast ---- */

/* One QP's attachment to a group: the LID it gave (uverbs tells attachments by GID and LID). */
struct sw_mcast_member {
	struct sw_qp *qp;
	uint16_t lid;
};

/* A group the device has QPs in, and its socket. */
struct sw_mcg {
	union ibv_gid gid;
	union sw_sa addr; /* the group's address at the device's port */
	int fd; /* bound to addr, joined to the group */
	uint32_t ovfl; /* SO_RXQ_OVFL as last seen */
	unsigned int n;
	struct sw_mcast_member m[SW_MAX_MCAST_QP_ATTACH];
};

/* The device's groups. */
struct sw_mcast {
	pthread_mutex_t lock; /* recursive: the progress thread delivers while it reads */
	int epfd; /* the group sockets, for the progress thread */
	unsigned int ngrp, cap, nattach;
	struct sw_mcg **grp;
	atomic_uint active; /* ngrp, for a look without the lock */
};

/* mcast.c: the engine's groups at start (0 or -errno) and stop (sockets closed). */
int sw_mcast_init(struct sw_engine *eng);
void sw_mcast_fini(struct sw_engine *eng);
/*
 * mcast.c, progress thread (no QP lock held): a checked multicast packet
 * (DQPN 0xffffff, a UD opcode) of `len` bytes from `src` to group address
 * `dst`: a UD receive at every QP attached to the group, once per QP.
 * Counted as drops_no_qp when the device has no such group.
 */
void sw_mcast_deliver(struct sw_engine *eng, const struct sw_pkt *pkt, size_t len,
		      const union sw_sa *src, const union sw_sa *dst);
/*
 * A receive from one group socket: `fd` bound to `bound`, *ovfl its drop
 * count; returns the packets taken, or -1 when the batch has no room.
 */
typedef int sw_mcast_rx_fn(void *arg, int fd, const union sw_sa *bound, uint32_t *ovfl);
/*
 * mcast.c, progress thread: call `rx` for each group socket with data,
 * under the groups' lock; returns the packets taken (0 without groups).
 */
int sw_mcast_rx(struct sw_engine *eng, sw_mcast_rx_fn *rx, void *arg);
/* mcast.c: the epoll descriptor of the group sockets, for poll(2); -1 without. */
int sw_mcast_pollfd(const struct sw_engine *eng);
/*
 * mcast_sock.c: the port's sockets send multicast from the port's
 * interface and loop it back to the host's other members (best effort).
 */
void sw_mcast_port_setup(const struct sw_port *port);
/*
 * mcast_sock.c: a socket bound to group `gid` at the port's UDP port and
 * joined to it on the port's interface, its address in *addr; the
 * descriptor, or -errno.
 */
int sw_mcast_sock_open(const struct sw_port *port, const union ibv_gid *gid, union sw_sa *addr);
/* udp.c: a fresh non-blocking UDP socket of `family` (udp_socket's rules); fd or -errno. */
int sw_udp_socket(int family);

/* ---- net.c ---- */

/* fault.c: set up from the configuration / free the held packet. */
void sw_fault_init(struct sw_fault_state *s, const struct sw_fault *cfg);
void sw_fault_fini(struct sw_fault_state *s);
/* fault.c, progress thread: true if this received packet is to be lost (counted). */
bool sw_fault_rx_drop(struct sw_engine *eng);
/*
 * fault.c, any thread: sw_net_send() with send-side faults on: the packet
 * may be refused (-EAGAIN), lost, held back until the next one, or sent
 * twice; otherwise as sw_net_send_raw().
 */
int sw_fault_send(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av);
/* fault.c: how many of a batch of `n` may go before the socket "fills" (again=F). */
uint32_t sw_fault_batch_room(struct sw_engine *eng, uint32_t n);
/*
 * Send-side duplicates or reordering: packets go one at a time, copied,
 * through sw_fault_send() (no batch, no references, no runs). Loss and
 * refused sends alone keep the batch.
 */
static inline bool sw_fault_one_by_one(const struct sw_fault *f)
{
	return f->on_tx && (f->dup_ppm || f->reorder_ppm);
}
/*
 * What send-side loss (drop=F without dup or reorder) does to a packet of
 * a batch (struct sw_tx_batch.fate): drawn when it is sent, one draw per
 * PSN it stands for; or already drawn by the requester for a run.
 */
enum sw_fate {
	SW_FATE_DRAW = 0,
	SW_FATE_KEEP,
	SW_FATE_LOSE,
};
/*
 * fault.c, any thread: draw loss for up to `n` PSNs in a row; returns how
 * many come before the first one lost (`n`: none lost). Counts nothing:
 * the sender counts what it skips with sw_fault_count_drops().
 */
uint32_t sw_fault_tx_kept(struct sw_engine *eng, uint32_t n);
void sw_fault_count_drops(struct sw_engine *eng, uint32_t pkts);
/*
 * fault.c, requester (qp->lock held): a run of up to `n` PSNs from
 * req->psn under send-side loss. Each PSN is drawn once: the run ends
 * before the first one lost, which then goes alone (*fate SW_FATE_LOSE)
 * when the requester comes to it, so that loss stays per packet and a
 * run never turns one loss into a burst. Returns the run's length;
 * without send-side loss `n` and SW_FATE_DRAW.
 */
uint32_t sw_fault_run_cut(struct sw_qp *qp, uint32_t n, uint8_t *fate);

/* Configure the device socket (buffers, DF). 0 or -errno. */
int sw_net_setup(int fd);

/*
 * With SOFTVERBS_GSO (default on): eng->gso when the kernel knows
 * UDP_SEGMENT, eng->gro when the device's address socket took UDP_GRO.
 * Either stays off where the kernel refuses it; never an error.
 */
void sw_net_offload(struct sw_engine *eng);

/*
 * Send one packet of `len` bytes along `av`, through fault injection.
 * 0, -EAGAIN (socket full: the caller keeps the work and retries), or
 * another -errno (counted and treated as a loss).
 */
int sw_net_send(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av);

/* Send one packet along `av` over its link or UDP, without fault injection; as sw_net_send(). */
int sw_net_send_raw(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av);

/* The socket packets along `av` leave by: the one of its source GID. */
static inline int sw_net_fd(const struct sw_engine *eng, const struct sw_av *av)
{
	const struct sw_port *port = &eng->dev->port;

	return sw_port_fd_of(port, sw_port_gid(port, av->sgid_index));
}

/* Packets built and sent together with sw_net_send_batch(). */
enum {
	SW_TX_BATCH = 16
};
/*
 * A packet by reference (single copy): the MRs its pieces lie in, each
 * referenced by the builder; the link keeps them until its consumer has
 * read the packet (shm_hold.c), so that deregistering one waits for that.
 */
struct sw_ref_hold {
	uint32_t n; /* MRs held; 0 and !placed: not by reference */
	bool sink; /* a READ request's: the consumer may write into these MRs */
	bool placed; /* a placed READ response (wire.h): no MR, the link only */
	uint32_t pkts; /* PSNs the record stands for (a run: wire.h), else 1 */
	struct sw_mr *mr[SW_REF_PIECES];
};

/* A packet that carries its bytes: no hold. */
static inline void sw_ref_none(struct sw_ref_hold *h)
{
	h->n = 0;
	h->sink = false;
	h->placed = false;
	h->pkts = 1;
}

/* Is a built packet with hold `h` a by-reference record (the same-host link only)? */
static inline bool sw_ref_on(const struct sw_ref_hold *h)
{
	return h->n || h->placed;
}
struct sw_tx_batch {
	uint32_t n; /* packets built so far */
	uint32_t psn[SW_TX_BATCH]; /* each packet's PSN (a run's first) */
	uint32_t npsn[SW_TX_BATCH]; /* the requester's: PSNs each stands for (ref[].pkts) */
	size_t len[SW_TX_BATCH];
	struct sw_ref_hold
		ref[SW_TX_BATCH]; /* sw_ref_on(): by reference, the same-host link only */
	uint8_t fate[SW_TX_BATCH]; /* enum sw_fate: send-side loss (fault.c) */
	uint8_t buf[SW_TX_BATCH][SW_PKT_MAX];
	struct sw_tx_batch *next_all; /* net.c's list of every batch ever made */
	atomic_bool used; /* a live thread's (net.c) */
};

/*
 * The calling thread's batch buffer (taken on first use, given back for
 * another thread when this one exits), or NULL when out of memory.
 */
struct sw_tx_batch *sw_net_tx_batch(void);

/*
 * Send the `b->n` packets of `b` along `av` in as few system calls as the
 * socket allows (one sendmmsg(2) when there is room), through fault
 * injection. Over UDP with GSO (net.c), runs of equal-size packets go as
 * one send each, their ICRCs rewritten for the IPv4 IDs the kernel gives
 * the segments (packets not sent are left as built). Returns how many
 * went out (lost ones count as sent); fewer than b->n means the socket
 * was full at the first one not sent.
 */
uint32_t sw_net_send_batch(struct sw_engine *eng, struct sw_tx_batch *b, const struct sw_av *av);

/* ICRC context for a packet from this device along `av` (its source GID's address). */
void sw_net_icrc_out(const struct sw_engine *eng, const struct sw_av *av, struct sw_icrc_ctx *c);

/* ---- shm.c: the same-host link ---- */

/*
 * Listen for links from other devices of this user in this network
 * namespace (a taken name only means nobody links to us). 0 or -ENOMEM.
 */
int sw_shm_start(struct sw_engine *eng);
/* Close every link; the progress thread has stopped. */
void sw_shm_stop(struct sw_engine *eng);
/*
 * Send the `n` packets pkt[i] (len[i] bytes) to `dst` over its link:
 * the number that went (fewer than n: the ring is full, as a full
 * socket), or -ENOTCONN when `dst` has no link (yet): use UDP. Any thread.
 */
int sw_shm_send(struct sw_engine *eng, const uint8_t *const *pkt, const size_t *len,
		const struct sw_ref_hold *ref, uint32_t n, const union sw_sa *dst);
/*
 * May packets to `dst` go by reference (single copy)? True once the link
 * is open and its consumer could read our memory (shm_format.h). Any thread.
 */
bool sw_shm_pull_ok(struct sw_engine *eng, const union sw_sa *dst);
/*
 * Write `len` bytes from `src` into the peer at `dst` as RDMA WRITE
 * (QP `qpn`, `rkey`, `va`) through its push directory (shm_dir.h,
 * shm_dir_push): 0 when they landed, else -errno (-EAGAIN: no link, no
 * directory, or its entries do not allow it). Any thread.
 */
int sw_shm_push_write(struct sw_engine *eng, const union sw_sa *dst, uint32_t qpn, uint32_t rkey,
		      uint64_t va, const void *src, uint32_t len);
/*
 * The push directory's owner side: publish QP `qp`'s state (qp->lock
 * held) or MR `mr` (as registered; `live` false: taken away, returning
 * once no peer can still write through it). Any thread.
 */
void sw_shm_dir_qp(struct sw_engine *eng, const struct sw_qp *qp, bool live);
void sw_shm_dir_mr(struct sw_engine *eng, const struct sw_mr *mr, bool live);
/*
 * Does the link to `dst` hold packets its consumer has not handled yet
 * (read and answered)? *done gets how far it has (bytes, only compared
 * with an earlier value). false when `dst` has no link. Any thread.
 */
bool sw_shm_backlog(struct sw_engine *eng, const union sw_sa *dst, uint64_t *done);
/*
 * Does the link from `peer` into this device hold records not read yet
 * (its answers may be among them)? false when there is none. The
 * progress thread only (the in-links are its own).
 */
bool sw_shm_unread(struct sw_engine *eng, const union sw_sa *peer);
/* Is `dst` reached over an open same-host link (a softverbs device, then)? Any thread. */
bool sw_shm_linked(struct sw_engine *eng, const union sw_sa *dst);
/*
 * The same, and how far the link to `dst` is: *head, bytes this device
 * has put in the ring; *done, bytes the consumer has handled (read,
 * and answered: its ACKs are on their way back). Both only ever grow.
 */
bool sw_shm_progress(struct sw_engine *eng, const union sw_sa *dst, uint64_t *done, uint64_t *head);
/*
 * Progress thread, after a receive batch was handled and its answers
 * sent: tell every link's producer how far it was read (hdr->done).
 */
void sw_shm_handled(struct sw_engine *eng);
/*
 * Progress thread: take one packet from the links into `buf` (at most
 * `cap` bytes), with the sender's address in *src; its length, or 0 when
 * every ring is empty. Corrupt rings are closed and counted. ref->pid:
 * 0, or for a record by reference the sender's process (-1 if this link
 * never allowed those: a malformed packet), and the rest of *ref where
 * it came from (for sw_pkt_take_ref).
 */
int sw_shm_recv(struct sw_engine *eng, uint8_t *buf, size_t cap, union sw_sa *src,
		struct sw_ref_src *ref);
/*
 * Single copy, READ by reference: may the responder write the bytes of
 * READ request `pkt` (by reference) into its requester now? False when
 * the record's link is gone or the requester stopped holding the record's
 * memory (it waited SHM_HOLD_NS): then the responses carry the bytes. On
 * true, the requester keeps its holds until sw_shm_push_end(). The
 * receive token's holder only.
 */
bool sw_shm_push_begin(struct sw_engine *eng, const struct sw_pkt *pkt);
void sw_shm_push_end(struct sw_engine *eng, const struct sw_pkt *pkt);
/*
 * The `len` bytes at `addr` in the sender of packet by reference `pkt`,
 * in its shared buffer `tag` (a piece's, wire.h), as mapped here
 * (shm_map.c): valid until the caller releases the receive token, NULL
 * when they cannot be read that way (no tag, the link is gone, not
 * mappable, outside the buffer): then pull them. The receive token's
 * holder only.
 */
const uint8_t *sw_shm_map(struct sw_engine *eng, const struct sw_pkt *pkt, uint32_t tag,
			  uint64_t addr, uint32_t len);
/*
 * Progress thread, before poll(2): announce the sleep to every producer
 * (unless !announce: a leased sleep, progress.c); false (and nothing
 * announced) if a ring already holds a packet.
 */
bool sw_shm_sleep_begin(struct sw_engine *eng, bool announce);
/* After poll(2) returned. */
void sw_shm_sleep_end(struct sw_engine *eng);
/* The descriptors the progress thread polls for the links (at most `max`); their count. */
enum {
	SW_SHM_POLL_MAX = 72
};
int sw_shm_pollfds(struct sw_engine *eng, struct pollfd *p, int max);
/*
 * Progress thread, whenever the timers run: accept links, take their
 * rings, drain doorbells, close links whose other end hung up (these
 * system calls at most once per SHM_IO_NS, 1 ms, so that a thread woken
 * often does not pay them at each wake-up); age mappings, release holds.
 */
void sw_shm_service(struct sw_engine *eng, uint64_t now);
/*
 * Progress thread, between timer runs: the first part of
 * sw_shm_service alone (accepts, rings, doorbells, hang-ups), at most
 * once per SHM_IO_NS.
 */
void sw_shm_accept_due(struct sw_engine *eng, uint64_t now);
/*
 * After poll(2): the `n` descriptors sw_shm_pollfds() gave, with their
 * revents. Accepts if the listener was ready, serves the links if one
 * of theirs was; releases holds.
 */
void sw_shm_ready(struct sw_engine *eng, const struct pollfd *p, int n, uint64_t now);

/* ---- gsi.c: the general services endpoint (QP1, sw/gsi.h) ---- */

/*
 * Progress thread: a valid packet for QP 1 (`pkt` parsed, from `src` to
 * local address `dst`). Queued for the open endpoint, or counted and dropped.
 */
void sw_gsi_rx(struct sw_engine *eng, const struct sw_pkt *pkt, const union sw_sa *src,
	       const union sw_sa *dst);
/* The engine stops: an endpoint still open is detached (its sends fail). */
void sw_gsi_detach(struct sw_engine *eng);

/* ---- requester / completer (req.c, comp.c) ---- */

struct sw_req {
	uint32_t psn; /* next PSN to send */
	uint32_t una_psn; /* oldest PSN not yet acknowledged */
	uint32_t send_idx; /* SQ index of the next WQE (or part) to send */
	uint32_t send_off; /* packets of that WQE already sent */
	uint32_t started_idx; /* SQ index past the last WQE that ever started: a
				 draining QP (SQD) still resends those before it */
	uint32_t window; /* packets allowed in flight */
	uint32_t since_ackreq; /* packets sent since the last AckReq */
	uint32_t ackreq_psn; /* the newest packet built with AckReq (or one before the
				rewind point): while it is unacknowledged, an ACK is coming */
	uint32_t lose_psn; /* fault injection: the PSN a run was cut before (fault.c) */
	bool lose_set; /* lose_psn is drawn lost and not yet sent */

	uint32_t rd_atomic; /* READs and atomics in flight */
	uint64_t deadline_ns; /* retransmit timer, 0 when off */
	uint64_t rnr_until_ns; /* RNR back-off: send nothing before this */
	uint8_t retries, rnr_retries;
	uint8_t backoff; /* consecutive timeouts: the timeout is doubled this often */
	bool wait_writable; /* the socket was full */
	uint32_t read_rx_pkts; /* READ response packets received for the head READ */
	bool resp_asked; /* the head READ/atomic's missing response was asked for again */
	uint32_t high_psn; /* past the newest PSN ever sent: below it, a send is a resend */
	uint32_t grow_acc; /* packets acknowledged towards the next window increase */
	uint32_t acked_since_cut; /* packets acknowledged since the window was last cut */
	uint32_t recover_psn; /* the send frontier at the last cut (sw_req_cut_at) */
	bool recovering; /* recover_psn not yet acknowledged */
	uint32_t held; /* PSNs counted against the device's budget (budget.c) */
	bool queued; /* in the budget's line */
	bool serving; /* being served from the line (the progress thread) */
	/* round trip and tail-loss probe (probe.c) */
	uint64_t last_act_ns; /* the last send or acknowledgement */
	uint64_t rtt_t0; /* when the timed packet went out */
	uint32_t rtt_psn; /* the timed packet, while rtt_on */
	uint32_t probe_psn; /* the packet the outstanding probe resent */
	uint32_t srtt_ns, rttvar_ns; /* smoothed RTT and its variation, 0: no sample yet */
	bool rtt_on; /* a packet is being timed */
	bool probed; /* a probe went out and nothing answered it yet */
	uint8_t probes_out; /* probes sent since the last acknowledgement */
	bool probe_back; /* an answer to the probe came: go back if packets remain */
	bool sel_on; /* sel_psn is valid */
	bool sel_due; /* sel_psn is still to be sent (req_run) */
	bool sel_wait; /* ... or was sent, and nothing acknowledged it yet */
	uint32_t sel_hi; /* req->psn when it was chosen: packets sent before it went */
	uint8_t sel_next; /* NAKs in a row of the packet after sel_psn */
	bool sel_never; /* the responder keeps nothing after a gap: go-back-N only */
	bool sel_kept; /* the responder was seen to keep packets after a gap */
	bool on_link; /* the peer was on the same-host link when last looked (NAK, probe) */
	bool link_marked; /* link_mark is set for the current last_act_ns (mark_act) */
	uint64_t link_mark, mark_act; /* the ring's head when the probe was first due (probe.c) */
	uint64_t probe_hold_ns; /* no probe before this: the link's consumer is behind */
	uint64_t lossy_until_ns; /* a loss showed: the link's short PTO until then (probe.c) */
	uint32_t sel_psn; /* the packet sw_req_selective sent again last */
	uint64_t link_done; /* how far the link's consumer had handled, at the last deferral */
	uint8_t link_stalls; /* deferrals in a row without the consumer handling more */
	/* req_push.c: the packets up to push_psn were written into the peer (push_chain) */
	bool push_chain;
	uint32_t push_psn;
	/* the last message started with fewer than SW_PUSH_AHEAD PSNs in flight */
	bool calm;
};

enum {
	/*
	 * req_push.c: pushed WRITEs not yet acknowledged, at most, before the
	 * next one goes in its packet: enough for a ping-pong, whose answer
	 * may come before the ACK of what it answers.
	 */
	SW_PUSH_AHEAD = 2,
};

/*
 * Packets (PSNs) the requester has sent and not yet seen acknowledged:
 * what the retransmit timer guards. A WQE partly sent with all of its
 * sent packets acknowledged has none, however long it then waits for
 * the window, the budget's line or ring space.
 */
static inline bool sw_req_in_flight(const struct sw_req *req)
{
	return sw_psn_diff(req->psn, req->una_psn) > 0;
}

/*
 * budget.c, all with qp->lock held. take: may the QP put `npsn` more PSNs
 * in flight? Counts them if so (with `force`, always: req.c's one packet
 * past the line; with `ref`, for a packet by reference, against the larger
 * SW_BUDGET_REF_PKTS). sync: give back what acknowledgements
 * (or a rewind) took out of flight; call after anything that moves
 * una_psn or psn. release: give back all (error, reset, destroy).
 * wait: join the line (once) and have the progress thread serve it.
 * must_wait: the QP is in line, or others are and it is not being
 * served: it sends nothing now.
 */
bool sw_budget_take(struct sw_qp *qp, uint32_t npsn, bool force, bool ref);
void sw_budget_sync(struct sw_qp *qp);
void sw_budget_release(struct sw_qp *qp);
void sw_budget_wait(struct sw_qp *qp);
bool sw_budget_must_wait(struct sw_qp *qp);
/* budget.c, progress thread, no lock held: serve the line front first while budget lasts. */
void sw_budget_serve(struct sw_engine *eng);
/* budget.c: empty the line and free it (the progress thread has stopped). */
void sw_budget_fini(struct sw_engine *eng);
/*
 * req.c: a loss was seen (sequence NAK or timeout): halve the window,
 * not below SW_WINDOW_MIN, nor below one message of the oldest WQE when
 * at least that many packets were acknowledged since the last cut.
 */
void sw_req_cut(struct sw_qp *qp);
/*
 * req.c: packet `psn` was lost (a sequence NAK answered selectively):
 * sw_req_cut() once per round trip of losses, as TCP's fast recovery
 * does: not again for a packet sent before the last cut, which that cut
 * already answered.
 */
void sw_req_cut_at(struct sw_qp *qp, uint32_t psn);
/*
 * req.c: `n` more packets were acknowledged (by an ACK, or by READ or
 * atomic responses, comp.c): the window grows by one
 * packet per window's worth acknowledged (additive increase, once per
 * round trip), up to SW_WINDOW_MAX (a selective NAK on the same-host
 * link may open it at once: sw_req_selective).
 */
void sw_req_grow(struct sw_qp *qp, uint32_t n);

/*
 * Send from a thread other than the caller's own posting path (the
 * progress thread): on a full socket wait briefly for room instead of
 * giving up. 0 or -errno.
 */
int sw_net_send_wait(struct sw_engine *eng, const uint8_t *pkt, size_t len, const struct sw_av *av);

/* sw_send_wqe.state, owned by the requester (post zeroes it: NEW). */
enum {
	SW_WQE_NEW = 0,
	SW_WQE_STARTED = 1, /* its first packet went out */
	SW_WQE_FAILED = 2, /* a local error; completes with fail_status */
};

/*
 * RDMA READ, the atomics and RDMA FLUSH: the work requests max_rd_atomic
 * counts and a fence waits for, which complete only with their response
 * (a FLUSH's is an empty READ response).
 */
static inline bool sw_wr_is_rd_atomic(uint32_t opcode)
{
	return opcode == IBV_WR_RDMA_READ || opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || opcode == IBV_WR_FLUSH;
}

/* Send what the window, fences and RNR back-off allow. */
void sw_req_run(struct sw_qp *qp);
/*
 * req.c: the packets (PSNs) WQE `w` takes on `qp`: one for an atomic or
 * on UD, else one per MTU of its length (at least one).
 */
uint32_t sw_wqe_npkts(const struct sw_qp *qp, const struct sw_send_wqe *w);

/*
 * req.c: build packet `k` of WQE `w` into `buf` (its ICRC left to the
 * socket: net.c), asking for an ACK if `ack_req` (RC; the last packet of
 * a message always asks, and every ack_every-th one). Its length, or -EACCES / -EINVAL for a bad
 * local SGE. `ref` (NULL: never): the packet may go by reference
 * (single copy: an RC SEND or WRITE of at least SW_REF_MIN_MSG bytes from
 * SGEs then names its payload's pieces instead of carrying them,
 * wire.h); ref->n says whether it does, and ref then holds its MRs (the
 * caller drops them, sw_ref_hold_put, once it was sent or not). With
 * `npk` > 1 (only with `ref`, and only for packets before the message's
 * last) the record may stand for packets k to k + npk - 1, all full: then
 * ref->pkts is npk (else 1), and ack_req asks for an ACK of the last.
 */
int sw_req_build(struct sw_qp *qp, struct sw_send_wqe *w, uint32_t k, uint32_t npk, uint8_t *buf,
		 bool ack_req, struct sw_ref_hold *ref);
/*
 * req_push.c (docs/single-copy.md): may WQE `w`, next to start, be
 * written into the target by this thread (a small RC RDMA WRITE, one
 * packet, nothing of the QP before it that may still be on its way)?
 */
bool sw_req_may_push(const struct sw_qp *qp, const struct sw_send_wqe *w);
/*
 * req_push.c: sw_req_build() for such a WQE, which then writes its bytes
 * into the target through the link's push directory (shm_dir.c) and, if
 * they landed, makes the packet a placed WRITE (wire.h, ref->placed).
 * The packet's length (placed or not), or the errors of sw_req_build.
 */
int sw_req_push(struct sw_qp *qp, struct sw_send_wqe *w, uint8_t *buf, bool ack_req,
		struct sw_ref_hold *ref);
/*
 * req_uc.c: sw_req_run() for a UC QP: each WQE's packets in order, no
 * window, no budget, no timer; a WQE completes once its last packet is
 * out. A full socket or ring leaves the rest for the progress thread.
 */
void sw_req_uc_run(struct sw_qp *qp);
/*
 * req_local.c: execute local operation `w` (BIND_MW or LOCAL_INV, the
 * rules of mem/mw.c) for `qp`; the status its completion takes.
 */
enum ibv_wc_status sw_req_local_op(struct sw_qp *qp, const struct sw_send_wqe *w);
/*
 * Start the retransmit timer (sw_req_timeout_ns from now) unless it runs
 * already or the QP has none (timeout 0); the caller knows something is
 * in flight.
 */
void sw_req_arm_timer(struct sw_qp *qp);
/* Timers: retransmit on timeout, resume after RNR back-off. */
void sw_req_timer(struct sw_qp *qp, uint64_t now);
/* Restart sending at `psn` (go-back-N after NAK or timeout). */
void sw_req_rewind(struct sw_qp *qp, uint32_t psn);
/*
 * A sequence NAK of una_psn (RC): send that one packet again, with
 * AckReq, and return true, for a responder that keeps what comes after a
 * gap (softverbs', stash.c); false when go-back-N must answer it instead
 * (not RC, a READ or atomic there, a responder seen to keep nothing, or
 * NAKs of the packet right after the one this sent again, twice in a row).
 */
bool sw_req_selective(struct sw_qp *qp, uint32_t psn);
/*
 * An ACK moved una_psn: if it answers the packet sw_req_selective sent,
 * and shows the responder has nothing after it, go back (go-back-N).
 */
void sw_req_sel_acked(struct sw_qp *qp);
/*
 * The retransmit timeout of the QP in ns (0: infinite): 4.096 us <<
 * attr.timeout, doubled for each consecutive timeout up to SW_BACKOFF_MAX
 * times, so that a peer that is merely slow (a loaded host) is not
 * declared dead after retry_cnt short waits.
 */
uint64_t sw_req_timeout_ns(const struct sw_qp *qp);
/* The peer acknowledged something: the retry and RNR retry counts and back-off start over. */
void sw_req_acked(struct sw_qp *qp);

/*
 * probe.c, all with qp->lock held. pto: the probe timeout (0: no probe
 * for this QP now). sent: packets up to `psn` went out (`fresh`: never
 * before, so it may be timed). acked: una_psn moved (an RTT sample,
 * the probe answered). rewound: the requester went back (no sample from
 * resent packets, no probe outstanding). loss: a loss showed at `now`
 * (a sequence NAK, a gap in READ responses, a probe that filled a gap or
 * that the link let go, a timeout): on the same-host link the short PTO
 * applies for SW_LINK_LOSSY_NS. due: when the probe would fire (0:
 * none). should_fire: it is due at `now` and allowed.
 */
uint64_t sw_probe_pto_ns(const struct sw_qp *qp);
void sw_probe_sent(struct sw_qp *qp, uint32_t psn, bool fresh);
void sw_probe_acked(struct sw_qp *qp);
void sw_probe_rewound(struct sw_qp *qp);
void sw_probe_loss(struct sw_qp *qp, uint64_t now);
uint64_t sw_probe_due_ns(const struct sw_qp *qp);
bool sw_probe_should_fire(struct sw_qp *qp, uint64_t now);

/*
 * SQD: once no started send WQE is outstanding, clear attr.sq_draining
 * and raise IBV_EVENT_SQ_DRAINED if the application asked for it.
 */
void sw_comp_check_drained(struct sw_qp *qp);
/* A response packet for this QP (ACK, NAK, read response, atomic ACK). */
void sw_comp_handle(struct sw_qp *qp, const struct sw_pkt *pkt);
/*
 * Retire the head send WQE with `status` (a completion if signalled or
 * not successful). On error the QP moves to ERR (sw_transport_fail) and
 * everything after it is flushed.
 */
void sw_comp_retire(struct sw_qp *qp, enum ibv_wc_status status);

/* ---- responder (resp.c) ---- */

struct sw_rd_res { /* a READ or atomic the responder answered */
	bool used;
	bool atomic;
	uint32_t psn, npkts; /* PSNs the request covered */
	uint64_t va;
	uint32_t rkey, len;
	uint64_t orig; /* atomic: the value returned */
};

struct sw_resp {
	uint32_t epsn; /* expected PSN */
	uint32_t msn; /* completed requests, mod 2^24 */
	bool nak_seq_sent; /* one sequence NAK per gap */
	bool ack_pending; /* an ACK is owed at the end of the batch */
	uint32_t ack_psn; /* PSN that ACK acknowledges */
	uint32_t unacked; /* packets since the last ACK */
	/* the message in progress */
	bool in_send, in_write;
	struct sw_recv_wqe *wqe; /* receive WQE of the SEND in progress (room for max_sge) */
	bool have_wqe;
	uint32_t offset; /* bytes placed so far */
	uint64_t wr_va; /* WRITE: next address, key, bytes left */
	uint32_t wr_rkey;
	uint64_t wr_left;
	uint32_t wr_total;
	/* READ/atomic resources, max_dest_rd_atomic entries */
	struct sw_rd_res *res;
	uint32_t nres, res_next;
	/*
	 * XRC TGT: the XRC SRQ the packet being handled names, found in the
	 * QP's domain (NULL: none there); valid only while the responder
	 * holds the domain's lock, i.e. inside sw_resp_handle(). xsrqn: the
	 * SRQ of the message in progress (its later packets must name it).
	 */
	struct sw_srq *xsrq;
	uint32_t xsrqn;
	struct sw_stash *stash; /* link packets ahead of a gap (stash.c), NULL until one */
};

/*
 * The protection domain proper the QP's memory accesses check MRs
 * against: the QP's, or for an XRC TGT QP that of the XRC SRQ of the
 * packet being handled (NULL when there is none). qp->lock held.
 */
static inline struct sw_pd *sw_qp_mem_pd(const struct sw_qp *qp)
{
	if (qp->ibv.qp_base.qp_type == IBV_QPT_XRC_RECV)
		return qp->resp && qp->resp->xsrq ? qp->resp->xsrq->pd : NULL;
	return sw_pd_base(qp->ibv.qp_base.pd);
}

/*
 * engine.c: the transport found an error that ends the QP (qp->lock
 * held): sw_transport_qp_error(), then sw_qp_error_locked() (queue.h),
 * the one order every way into ERR follows.
 */
void sw_transport_fail(struct sw_qp *qp);

/* A request packet for this QP, from `src` to our address `dst`. */
void sw_resp_handle(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		    const union sw_sa *dst);
/*
 * run.c: a run by reference (pkt->ref_pkts > 1, wire.h) for this QP:
 * each of its packets to sw_resp_handle() in turn; a run whose bytes are
 * not its packet count times the path MTU is dropped as malformed.
 */
void sw_resp_handle_run(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
			const union sw_sa *dst);
/* run.c: the same for a placed run of READ responses, to sw_comp_handle(). */
void sw_comp_handle_run(struct sw_qp *qp, const struct sw_pkt *pkt);
/*
 * run.c, while the responder drains its stash (resp.c, qp->lock held):
 * the kept WRITE MIDDLEs by reference from the expected PSN on, two or
 * more in a row, placed, acknowledged and forgotten in one step when
 * each would be handled alike (as a run's, write_middles). Returns how
 * many; 0: none taken, the caller goes packet by packet.
 */
uint32_t sw_resp_drain_middles(struct sw_qp *qp);
/*
 * comp.c: the `n` placed READ response MIDDLEs of a run from PSN `psn`
 * on, in one step, if each would be taken alike: the head WQE is a READ
 * asked by reference and started, a response before them was taken and
 * one after them is still owed, and `psn` is the next it waits for. The
 * state they leave is that of n responses taken one by one. False
 * (nothing done) otherwise. qp->lock held.
 */
bool sw_comp_placed_middles(struct sw_qp *qp, uint32_t psn, uint32_t n);
/* Send the ACK owed at the end of a receive batch, if any. */
void sw_resp_flush_ack(struct sw_qp *qp);
/*
 * stash.c, all with qp->lock held. put: keep a copy of `pkt`, a SEND or
 * WRITE packet from the link ahead of the expected PSN of an RC QP
 * (true: kept, now or before); else false, and nothing more is kept
 * until the gap is filled. next: the kept packet at the expected PSN,
 * or NULL (and the gap counts as filled). peek: the kept packet at
 * `psn`, or NULL; nothing changes. drop: forget one returned by next or
 * peek (after its payload was placed: the caller's sw_place_fence).
 * count: packets kept. clear: forget them all. free: clear, and the QP's
 * stash goes (reset, destroy).
 */
bool sw_stash_put(struct sw_qp *qp, const struct sw_pkt *pkt);
const struct sw_pkt *sw_stash_next(struct sw_qp *qp);
const struct sw_pkt *sw_stash_peek(const struct sw_qp *qp, uint32_t psn);
void sw_stash_drop(struct sw_qp *qp, const struct sw_pkt *pkt);
uint32_t sw_stash_count(const struct sw_qp *qp);
void sw_stash_clear(struct sw_qp *qp);
void sw_stash_free(struct sw_qp *qp);
/*
 * resp.c: finish completion `wc` of the receive WQE the responder holds
 * and push it to the receive CQ: the immediate data of a successful
 * message that carries one, the WQE released (have_wqe), solicited as
 * the packet asks.
 */
void sw_resp_push_recv(struct sw_qp *qp, struct ibv_wc *wc, const struct sw_pkt *pkt);
/*
 * resp.c: the target of an RDMA request: `rkey` for [va, va + len) with
 * `need` (one IBV_ACCESS_REMOTE_* bit). Checked in this order: the QP
 * grants `need` (qp_access_flags); a zero-length request needs no MR and
 * names none (0, *mr NULL); otherwise sw_rkey_resolve(): the key names a
 * live MR of the QP's protection domain, the MR grants `need`, and the
 * range lies inside it, or the same of a bound memory window (and a
 * type 2 window is bound to this QP). 0 with a referenced MR (or NULL) in *mr, or
 * -EACCES for any failed check: RC answers all of them with one remote
 * access NAK, so a peer learns nothing about which check failed.
 */
int sw_resp_rkey(struct sw_qp *qp, uint32_t rkey, uint64_t va, uint64_t len, int need,
		 struct sw_mr **mr);
/* Drop the reference sw_resp_rkey() took, if it took one. */
static inline void sw_resp_put_mr(struct sw_mr *mr)
{
	if (mr)
		sw_mr_put(mr);
}
/*
 * resp.c: complete the receive WQE held for the current RC or UC message
 * (from the peer's QP) with `status`, `op` and `byte_len`.
 */
void sw_resp_complete_recv(struct sw_qp *qp, enum ibv_wc_status status, enum ibv_wc_opcode op,
			   uint32_t byte_len, const struct sw_pkt *pkt);
/*
 * resp.c: may this packet's payload belong to the WRITE in progress? At
 * most one MTU and what is left of the RETH length; exactly one MTU but
 * on the last packet, which ends the RETH length.
 */
bool sw_resp_write_size_ok(const struct sw_qp *qp, const struct sw_pkt *pkt, uint32_t flags);
/*
 * resp.c: send READ `res`'s responses from packet `from` on, read from
 * `mr` (NULL only for a zero-length READ), or placed ones (`placed`: the
 * bytes were written into the requester), each with `msn`. qp->lock held.
 */
void sw_resp_send_read(struct sw_qp *qp, const struct sw_rd_res *res, uint32_t from,
		       const struct sw_mr *mr, bool placed, uint32_t msn);
/*
 * resp_hold.c: READs by reference of one QP, written with one system
 * call. read_hold: hold READ `pkt` (by reference), executed as `res` on
 * `mr` (a reference of its own is taken) and leaving the MSN `msn`, to
 * be written and answered with the QP's other held READs; false if it
 * cannot be (the caller answers it now). held_first: if this QP's READs
 * are held, write and answer them now (qp->lock held, as for
 * read_hold; every response of the QP calls it first). held_before: the
 * receive loop, for each packet before it is handled (no QP lock held):
 * write and answer what is held unless `pkt` may be held with it.
 * held_flush: the same unconditionally (no QP lock held), at the end of
 * a receive batch.
 */
bool sw_resp_read_hold(struct sw_qp *qp, const struct sw_pkt *pkt, const struct sw_rd_res *res,
		       struct sw_mr *mr, uint32_t msn);
void sw_resp_held_first(struct sw_qp *qp);
void sw_resp_held_before(const struct sw_pkt *pkt);
void sw_resp_held_flush(void);
/* resp_uc.c: a request packet for this UC QP in RTR or later (sw_resp_handle passes it on). */
void sw_resp_uc(struct sw_qp *qp, const struct sw_pkt *pkt);
/* resp_ud.c: a request packet for this UD QP (sw_resp_handle passes it on). */
void sw_resp_ud(struct sw_qp *qp, const struct sw_pkt *pkt, const union sw_sa *src,
		const union sw_sa *dst);

/* Copy `len` bytes from the SGE list into `dst` (requester gather). */
int sw_sge_gather(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		  uint8_t *dst, uint32_t len);
/*
 * Place `len` bytes at byte `off` of the SGE list (local scatter), with
 * `need` access on each MR (LOCAL_WRITE). 0, or -EACCES / -EINVAL
 * (protection / length).
 */
int sw_sge_scatter(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		   const uint8_t *src, uint32_t len);
/*
 * As sw_sge_scatter, for a payload in a receive buffer that stays until
 * the caller's sw_place_fence(): an MR whose DMA handle names a CPU gets
 * its piece through sw_place_mr (queued on that CPU's worker).
 */
int sw_sge_scatter_rx(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		      const uint8_t *src, uint32_t len);
/*
 * Place `len` bytes from `src` at `host` inside `mr`, as its hint asks.
 * A hint with a CPU id queues the copy (sw_place_defer) with a reference
 * on `mr` that the worker drops once the bytes landed, so `src` must stay
 * until the caller's sw_place_fence(); any other placement is done when
 * this returns. 0 or -errno (no worker: -ENODEV).
 */
int sw_place_mr(struct sw_mr *mr, uint8_t *host, const uint8_t *src, uint32_t len);

/*
 * Single copy (sge.c, docs/single-copy.md). The pieces of `len` bytes at
 * byte `off` of the SGE list, as host addresses, checked as
 * sw_sge_gather checks them, merged where they continue each other, at
 * most `max`, and in `hold` a reference on each MR they lie in: their
 * count, or -EACCES / -EINVAL as sw_sge_gather, or -E2BIG (more pieces:
 * gather instead); on an error `hold` holds nothing. With hold->sink set
 * (a READ's responses go there) the MRs must grant local write, as for
 * sw_sge_scatter, and have no placement hint (-E2BIG: the hint decides
 * how the stores are made, so the bytes come in the responses).
 */
int sw_sge_refs(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		uint32_t len, struct sw_ref_piece *out, uint32_t max, struct sw_ref_hold *hold);
/* Drop the MR references of `h` (its n becomes 0). */
void sw_ref_hold_put(struct sw_ref_hold *h);
/*
 * Place packet `pkt` (by reference: pkt->ref) at `host` inside `mr` by
 * pulling it from its sender (sw_place_pull): it lands by the caller's
 * next sw_place_fence(); a failure marks the QP (sw_resp_pull_failed).
 */
void sw_place_mr_ref(struct sw_qp *qp, struct sw_mr *mr, uint8_t *host, const struct sw_pkt *pkt);
/* As sw_sge_scatter_rx for a packet by reference; the same errors. */
int sw_sge_scatter_ref(struct sw_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		       const struct sw_pkt *pkt);
/*
 * Did a copy pulled for this QP fail? -errno or 0. `now`: land this
 * thread's queued pulls first.
 */
int sw_resp_pull_failed(struct sw_qp *qp, bool now);

#endif

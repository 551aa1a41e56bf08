/* SPDX-License-Identifier: MIT */
/*
 * transport.h - the transport's public surface: what the rest of the
 * software device (ctrl/, queue/) may call in src/sw/transport. The
 * transport's own types and functions are in transport/transport_priv.h,
 * which nothing outside that folder includes (white-box tests aside).
 *
 *   - the device's UDP endpoint (struct sw_port, transport/udp.c);
 *   - the engine's life cycle (engine.c): started with the port by the
 *     first context, stopped by the last, quiesced at unload;
 *   - the queue layer's hooks (engine.c): per-QP transport state, the
 *     state changes the transport must see, the way into ERR, new WQEs.
 *
 * The hooks run one way: the queue layer calls them; the queue functions
 * the transport uses in turn (pushing completions, flushing rings) never
 * call back into the transport, so no path re-enters it.
 */
#ifndef SV_SW_TRANSPORT_H
#define SV_SW_TRANSPORT_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include "sw/addr.h"

struct sw_config;
struct sw_dev;
struct sw_qp;
struct sw_cq;

/* ---- the device's UDP endpoint ---- */

/* One entry of the port's GID table (ctrl/gid.c). */
struct sw_gid_slot {
	union ibv_gid gid; /* all zero: an empty slot */
	int sock; /* the port's socket of this address: 0 or 1; -1 for an empty slot */
};

enum {
	SW_PORT_SOCKS = 2, /* the address, and an IPv6 link-local one */
	SW_GID_TBL_MAX = 16, /* entries of a table other than "single" */
};

/* transport/udp.c: the device's UDP endpoint, shared by its contexts. */
struct sw_port {
	int fd; /* bound UDP socket of the address (sock 0), -1 when closed */
	union sw_sa local; /* its address and port */
	/* sock 1: an IPv6 link-local socket for the GID table, fd -1 if none */
	int ll_fd;
	union sw_sa ll;
	uint16_t udp_port;
	enum ibv_mtu active_mtu;
	uint32_t ifindex; /* interface owning the address, 0 if none */
	uint32_t gid_tbl_len;
	uint32_t addr_slot; /* the GID index of the address (sock 0) */
	struct sw_gid_slot gid[SW_GID_TBL_MAX];
};

/* Bind per config (explicit address, or the first free 127.0.0.N); lay out the GIDs. */
int sw_port_open(struct sw_port *port, const struct sw_config *cfg);
void sw_port_close(struct sw_port *port);

/* The socket and local address of a GID slot. */
static inline int sw_port_fd_of(const struct sw_port *port, const struct sw_gid_slot *g)
{
	return g && g->sock == 1 ? port->ll_fd : port->fd;
}
static inline const union sw_sa *sw_port_addr_of(const struct sw_port *port,
						 const struct sw_gid_slot *g)
{
	return g && g->sock == 1 ? &port->ll : &port->local;
}

/* ---- the engine (engine.c) ---- */

/* engine.c: start/stop with the device's port (first/last context). */
int sw_engine_start(struct sw_dev *dev);
void sw_engine_stop(struct sw_dev *dev);
/*
 * engine.c: at unload or exit (ctrl/unload.c): end the progress thread
 * and print the SOFTVERBS_STATS totals, freeing and closing nothing (the
 * program may still hold the device's objects). dev->lock held. A later
 * sw_engine_stop() finishes the job.
 */
void sw_engine_quiesce(struct sw_dev *dev);

/* ---- the queue layer's hooks (engine.c) ---- */

/*
 * Per-QP transport state: create on QP creation (context, type, caps and
 * rings are set; no lock needed), destroy on QP destroy (out of the QPN
 * table already; qp->lock held, so a packet handler that still holds a
 * reference sees qp->req == NULL afterwards).
 */
int sw_transport_qp_init(struct sw_qp *qp);
void sw_transport_qp_fini(struct sw_qp *qp);

/*
 * State transitions the transport must see (qp->lock held), after the
 * state changed: entering RTR/RTS (set up PSNs from qp->attr), SQD, and
 * RESET (forget everything). Not ERR: see sw_transport_qp_error.
 */
void sw_transport_qp_state(struct sw_qp *qp, enum ibv_qp_state old_state);

/*
 * The same-host link's push directory (transport/shm_dir.c): publish
 * what peers may write into directly. sw_transport_qp_dir after every
 * successful modify_qp (qp->lock held: its state and access flags);
 * sw_transport_mr_dir once an MR is registered or changed (`live`), and
 * with `live` false before it is deregistered or changed: that call
 * returns once no peer can still write through the old entry.
 */
void sw_transport_qp_dir(struct sw_qp *qp);
void sw_transport_mr_dir(struct sw_dev *dev, const struct sw_mr *mr, bool live);

/*
 * The QP is about to enter ERR (qp->lock held; the state is still the
 * old one): the transport stops its timers, gives back its share of the
 * device's send budget and completes, with IBV_WC_WR_FLUSH_ERR, the
 * receive WQE the responder took for a message in progress. Nothing if
 * the QP is in ERR already or has no transport state. The caller then
 * calls sw_qp_error_locked(). This is the one order for every way into
 * ERR: modify_qp calls the two itself; an error the transport finds goes
 * through sw_transport_fail() (transport/transport_priv.h), which calls
 * both.
 */
void sw_transport_qp_error(struct sw_qp *qp);

/*
 * An application thread is about to move the QP to ERR (qp->lock not
 * held): when the QP has requests in flight, let the progress thread
 * take in what has already arrived for the device first (two receive
 * passes, at most 50 ms). An ACK that was on its way before the modify then
 * completes its request instead of the flush doing so, as on a real
 * device, whose receive pipeline is ahead of any command the driver
 * gives it. (dtest: the peer saw the data of the last RDMA WRITE and
 * disconnected over TCP, and that reached the CM before the progress
 * thread reached the WRITE's ACK: the WRITE was flushed.)
 */
void sw_transport_settle(struct sw_qp *qp);

/*
 * An application thread found a CQ of `dev` empty (no lock held). While
 * the progress thread sleeps, take one receive pass here instead of
 * waiting for it to wake (transport/progress.c): true when packets were
 * handled, so that polling the CQ again may find what they completed.
 * `links_only` (a CQ that had fewer completions than asked for): the
 * same-host links only, no system call; the sockets wake the thread.
 */
bool sw_transport_poll(struct sw_dev *dev, bool links_only);

/*
 * A CQ of `dev` was armed (req_notify_cq): its application is about to
 * wait without polling, so the progress thread must not sleep leased
 * (transport/progress.c) any longer. Any thread, no lock held.
 */
void sw_transport_unlease(struct sw_dev *dev);

/* New send WQEs were posted: send what the window allows (qp->lock held). */
void sw_transport_kick(struct sw_qp *qp);

/*
 * CQ moderation's timers (engine.c): the progress thread runs
 * sw_cq_mod_tick() on every watched CQ with its other timers. Watch
 * (idempotent) once a CQ is moderated; unwatch before it is freed.
 */
void sw_engine_cq_watch(struct sw_dev *dev, struct sw_cq *cq);
void sw_engine_cq_unwatch(struct sw_dev *dev, struct sw_cq *cq);
/* A moderated CQ holds an event due at `deadline` (ns): see it in time. */
void sw_engine_cq_deadline(struct sw_dev *dev, uint64_t deadline);

/*
 * transport/mcast.c: sv_ops.attach_mcast and detach_mcast (rules there),
 * and the QP's attachments dropped as it is destroyed (qp->lock not held).
 */
int sw_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
int sw_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid);
void sw_mcast_qp_gone(struct sw_qp *qp);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * held.c - connection requests held between two listeners on one port.
 *
 * A REQ for a service nobody listens on draws REJ "invalid service ID"
 * (8) at once, as the kernel's CM answers. One case turns that into a
 * failure nobody meant: a server that destroys its listener and listens
 * again on the same port (perftest -R: its control connection, then the
 * test's) while its client's next REQ is already on the way. Over a
 * network the REQ takes long enough; on one host it often wins the race,
 * and the client gives up on the REJ.
 *
 * So for CM_GONE_MS after a listener on a device and service went away,
 * a REQ for that service that finds no listener is kept instead of
 * refused (up to CM_HELD_MAX of them; a retransmission of a kept REQ is
 * dropped). rdma_listen() hands the kept ones to the new listener
 * (cm_replay_held); once CM_GONE_MS has passed they draw the REJ after
 * all (cm_held_timers). Nothing else changes: a REQ for a port that had
 * no listener, or whose listener went long ago, is refused at once.
 * All under cm.lock.
 */
#include <string.h>

#include "rdmacm/cm.h"

enum {
	CM_HELD_MAX = 8, /* requests kept at once, and listeners remembered */
	CM_GONE_MS = 1000, /* how long after a listener went its requests wait */
};

struct gone {
	struct cm_dev *d; /* NULL: a listener on every device */
	uint64_t sid;
	uint64_t at_ms; /* 0: free */
};

struct held {
	struct cm_dev *d;
	struct softverbs_gsi_addr src;
	uint8_t mad[CM_MAD_LEN];
	uint32_t rcid; /* the requester's communication ID */
	uint64_t until_ms; /* 0: free */
};

static struct gone gone[CM_HELD_MAX];
static struct held held[CM_HELD_MAX];
static unsigned int gone_next;

/* The service ID a listener answers (find_listener in recv.c reads it back). */
static uint64_t listener_sid(struct cm_id *l)
{
	return 0x01000000ull | (uint64_t)(uint16_t)l->id.ps << 16 |
	       ntohs(rdma_get_src_port(&l->id));
}

/* Contract: see cm.h (lock held). */
void cm_listener_gone(struct cm_id *l)
{
	struct gone *g = &gone[gone_next++ % CM_HELD_MAX];

	g->d = l->dev;
	g->sid = listener_sid(l);
	g->at_ms = cm_now_ms();
}

/* When requests for `sid` on `d` stop waiting (0: they do not wait). */
static uint64_t gone_until(const struct cm_dev *d, uint64_t sid, uint64_t now)
{
	uint64_t until = 0;

	for (unsigned int i = 0; i < CM_HELD_MAX; i++) {
		const struct gone *g = &gone[i];

		if (g->at_ms && g->sid == sid && (!g->d || g->d == d) &&
		    now < g->at_ms + CM_GONE_MS && g->at_ms + CM_GONE_MS > until)
			until = g->at_ms + CM_GONE_MS;
	}
	return until;
}

/* Contract: see cm.h (lock held). */
bool cm_hold_req(struct cm_dev *d, const struct softverbs_gsi_addr *src,
		 const uint8_t mad[CM_MAD_LEN], uint64_t sid, uint32_t rcid)
{
	uint64_t until = gone_until(d, sid, cm_now_ms());
	struct held *free_slot = NULL;

	if (!until)
		return false;
	for (unsigned int i = 0; i < CM_HELD_MAX; i++) {
		struct held *h = &held[i];

		if (!h->until_ms) {
			if (!free_slot)
				free_slot = h;
		} else if (h->d == d && h->rcid == rcid) {
			return true; /* a retransmission of one kept already */
		}
	}
	if (!free_slot)
		return false;
	free_slot->d = d;
	free_slot->src = *src;
	memcpy(free_slot->mad, mad, CM_MAD_LEN);
	free_slot->rcid = rcid;
	free_slot->until_ms = until;
	cm_wake(); /* the CM thread's next deadline may be this one */
	return true;
}

/*
 * Handle the kept requests again (`now`: only those due by then; 0: all):
 * each is freed first, then goes through cm_handle_mad as if just
 * received, to a listener, kept again (while its listener's window
 * lasts) or refused.
 */
static void replay(uint64_t now)
{
	for (unsigned int i = 0; i < CM_HELD_MAX; i++) {
		struct held h = held[i];

		if (!h.until_ms || (now && h.until_ms > now))
			continue;
		held[i].until_ms = 0;
		cm_handle_mad(h.d, &h.src, h.mad);
	}
}

/* Contract: see cm.h (lock held). */
void cm_replay_held(void)
{
	replay(0);
}

/* Contract: see cm.h (lock held). */
uint64_t cm_held_timers(uint64_t now)
{
	uint64_t next = 0;

	replay(now);
	for (unsigned int i = 0; i < CM_HELD_MAX; i++)
		if (held[i].until_ms && (!next || held[i].until_ms < next))
			next = held[i].until_ms;
	return next;
}

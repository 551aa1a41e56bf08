/* SPDX-License-Identifier: MIT */
/*
 * shm.c - the same-host link: RoCE v2 packets between two software
 * devices of one user in one network namespace go through shared memory
 * instead of the kernel's UDP stack (SOFTVERBS_SHM, on by default).
 *
 * Each device listens on an abstract AF_UNIX seqpacket socket named after
 * its uid and RoCE address, "softverbs/<uid>/<ip>:<port>". The first
 * packet for an address looks that name up; when a device of the same
 * user answers, the sender creates a ring (a memfd: struct shm_hdr, then
 * a byte ring of records), passes it over the connection with a hello
 * naming its own address, and goes on sending over UDP until the
 * receiver marks the ring accepted. From then on each packet to that
 * address is a record in the ring. A record holds exactly the UDP
 * payload (BTH to ICRC), so the requester, responder and completer
 * cannot tell the difference, and fault injection applies as on UDP;
 * only its ICRC is left zero and never checked (net.c computes it for a
 * wire alone).
 *
 * One ring per direction and pair of devices: one producer (the sending
 * device, under the link's lock) and one consumer (the receiving
 * device's progress thread), which copies each record into its own
 * buffer before it parses it (the producer could change it meanwhile).
 * A consumer about to sleep sets `sleeping` in its rings; the first
 * producer that sees it after publishing clears it and writes one byte
 * on the connection, which the consumer polls. A busy-polling consumer never sleeps, so its
 * producers make no system call at all.
 *
 * Trust: both ends check that the other end of the connection runs as
 * our uid (SO_PEERCRED); a ring's indices and record lengths are checked
 * before use and a corrupt ring closes the link. A connection that hangs
 * up (the other process exited or closed its device) closes the link,
 * and sending falls back to UDP.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "sw/transport/shm_dir.h"
#include "sw/transport/shm_format.h"
#include "sw/transport/shm_hold.h"
#include "sw/transport/shm_map.h"
#include "sw/transport/transport_priv.h"

struct shm_out { /* a destination we send to */
	pthread_mutex_t lock; /* serialises producers */
	union sw_sa dst;
	bool used;
	int fd; /* the connection; -1: no link */
	struct shm_hdr *hdr; /* the ring, NULL when no link */
	uint64_t head; /* our copy of hdr->head */
	uint64_t tail_seen; /* hdr->tail when we last looked: room is read again only when short */
	uint64_t retry_at; /* no link: look again from then on */
	struct shm_holds holds; /* MRs named by records not yet read (shm_hold.c) */
	pid_t pid; /* the receiver's process (SO_PEERCRED) */
	int dir_state; /* its push directory: 0 not looked at yet, 1 mapped, -1 none */
	struct shm_dir *dir; /* mapped (shm_dir.c) */
	uint32_t dir_slot;
	uint64_t dir_tag;
};

struct shm_in { /* a link into this device */
	int fd;
	pid_t pid; /* the sender's process (SO_PEERCRED), for pulls */
	bool pull; /* we set pull_ok: by-reference records are welcome */
	struct shm_hdr *hdr; /* NULL until the hello came */
	uint64_t tail; /* our copy of hdr->tail */
	uint64_t done; /* our copy of hdr->done */
	union sw_sa src; /* the address the hello named */
	bool hup; /* the sender is gone: close once the ring is empty */
	uint64_t hello_by; /* no hello by then: the connection is closed */
	uint64_t gen; /* which link this is: slots are reused (sw_shm_push_begin) */
	uint64_t bufs_addr; /* the sender's table of shared buffers (hello) */
	uint32_t bufs_n;
	struct shm_maps maps; /* what we mapped of them (shm_map.c) */
	int dir_slot; /* the sender's pusher slot in our directory, -1: none */
};

struct sw_shm {
	int lfd; /* listening socket, -1 if the name was taken */
	uid_t uid;
	pthread_mutex_t lock; /* the out table */
	struct shm_out out[SHM_MAX_OUT];
	struct shm_in in[SHM_MAX_IN]; /* the progress thread's alone */
	uint32_t nin, rr; /* links in use; next to look at */
	uint64_t sweep_at;
	uint64_t accept_at; /* out of descriptors: the listener rests until then */
	uint64_t io_at; /* sw_shm_service without a ready descriptor: accept and drain from then */
	uint64_t gens; /* links accepted so far: each one's gen */
	atomic_uint holding; /* out links with holds (shm_release) */
	struct shm_dir_own dir; /* our push directory (shm_dir.c) */
	bool forked; /* a fork child closes its copy: the shared words stay the parent's */
};

/* The ring's data, after its header. */
static uint8_t *ring_data(struct shm_hdr *h)
{
	return (uint8_t *)h + SHM_HDR_BYTES;
}

/* The abstract socket name of the device at addr:port; its length for bind/connect. */
static socklen_t shm_name(struct sockaddr_un *sun, uid_t uid, const union sw_sa *addr)
{
	char ip[SW_ADDR_STRLEN];
	uint16_t port = sw_sa_port(addr);
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	sw_sa_str(addr, ip);
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "softverbs/%u/%s:%u",
		     (unsigned)uid, ip, port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/*
 * True if the other end of the connected socket `fd` runs as `uid`; its
 * process id in *pid (NULL: not wanted).
 */
static bool shm_peer_is(int fd, uid_t uid, pid_t *pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || cr.uid != uid)
		return false;
	if (pid)
		*pid = cr.pid;
	return true;
}

/* Contract: see transport_priv.h. */
int sw_shm_start(struct sw_engine *eng)
{
	struct sw_shm *s = calloc(1, sizeof(*s));
	struct sockaddr_un sun;
	socklen_t len;

	if (!s)
		return -ENOMEM;
	s->uid = geteuid();
	pthread_mutex_init(&s->lock, NULL);
	for (int i = 0; i < SHM_MAX_OUT; i++) {
		pthread_mutex_init(&s->out[i].lock, NULL);
		s->out[i].fd = -1;
	}
	for (int i = 0; i < SHM_MAX_IN; i++) {
		s->in[i].fd = -1;
		s->in[i].dir_slot = -1;
	}
	shm_dir_create(&s->dir);
	len = shm_name(&sun, s->uid, &eng->dev->port.local);
	s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* a name already taken (by anyone) only means nobody links to us */
	if (s->lfd >= 0 && (bind(s->lfd, (struct sockaddr *)&sun, len) || listen(s->lfd, 64))) {
		close(s->lfd);
		s->lfd = -1;
	}
	eng->shm = s;
	return 0;
}

static void out_close(struct sw_shm *s, struct shm_out *o, uint64_t retry_at)
{
	if (o->holds.n)
		atomic_fetch_sub_explicit(&s->holding, 1, memory_order_relaxed);
	shm_hold_clear(&o->holds);
	if (o->hdr)
		munmap(o->hdr, SHM_MAP_BYTES);
	if (o->fd >= 0)
		close(o->fd);
	shm_dir_unmap(o->dir);
	o->dir = NULL;
	o->dir_state = 0;
	o->hdr = NULL;
	o->fd = -1;
	o->retry_at = retry_at;
}

static void in_close(struct sw_shm *s, uint32_t i)
{
	struct shm_in *l = &s->in[i];

	if (l->hdr && l->dir_slot >= 0 && !s->forked) {
		/* the sender's writes stop, then its slot goes (shm_dir.c) */
		atomic_store(&l->hdr->dir_ok, 0);
		shm_dir_slot_drop(&s->dir, l->dir_slot);
	}
	if (l->hdr)
		munmap(l->hdr, SHM_MAP_BYTES);
	close(l->fd);
	shm_maps_close(&l->maps);
	s->in[i] = s->in[--s->nin];
	s->in[s->nin].fd = -1;
	s->in[s->nin].hdr = NULL;
	s->in[s->nin].dir_slot = -1;
}

/* Contract: see transport_priv.h. The progress thread has stopped. */
void sw_shm_stop(struct sw_engine *eng)
{
	struct sw_shm *s = eng->shm;

	if (!s)
		return;
	s->forked = eng->fork_gen != sw_fork_gen_now();
	while (s->nin)
		in_close(s, s->nin - 1);
	for (int i = 0; i < SHM_MAX_OUT; i++) {
		out_close(s, &s->out[i], 0);
		pthread_mutex_destroy(&s->out[i].lock);
	}
	if (s->lfd >= 0)
		close(s->lfd);
	shm_dir_destroy(&s->dir);
	pthread_mutex_destroy(&s->lock);
	free(s);
	eng->shm = NULL;
}

/*
 * Connect `o` to the device at o->dst and hand it a new ring. 0, or
 * -errno (no such device here, another user's, out of resources).
 */
static int out_connect(struct sw_engine *eng, struct shm_out *o)
{
	struct sw_shm *s = eng->shm;
	struct shm_hello hello = {
		.magic = SHM_MAGIC,
		.version = SHM_VERSION,
		.ring_bytes = SHM_RING_BYTES,
		.port = eng->dev->port.udp_port,
	};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = &hello, .iov_len = sizeof(hello)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	struct sockaddr_un sun;
	socklen_t len = shm_name(&sun, s->uid, &o->dst);
	struct shm_hdr *h;
	struct cmsghdr *c;
	union ibv_gid me;
	int fd, mfd, ret;

	sw_sa_gid(&eng->dev->port.local, &me);
	memcpy(hello.gid, me.raw, sizeof(hello.gid));
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, len)) {
		ret = -errno;
		goto err_fd;
	}
	if (!shm_peer_is(fd, s->uid, &o->pid)) {
		ret = -EPERM;
		goto err_fd;
	}
	mfd = memfd_create("softverbs-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0) {
		ret = -errno;
		goto err_fd;
	}
	/* sealed at its size: the receiver cannot shrink it under our feet (SIGBUS) */
	h = ftruncate(mfd, (off_t)SHM_MAP_BYTES) ||
			    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ?
		    MAP_FAILED :
		    mmap(NULL, SHM_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (h == MAP_FAILED) {
		ret = -errno;
		close(mfd);
		goto err_fd;
	}
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->ring_bytes = SHM_RING_BYTES;
	h->pull_addr = (uint64_t)(uintptr_t)&h->pull_cookie;
	h->pull_cookie = (sw_now_ns() * 0x9e3779b97f4a7c15ull) ^ h->pull_addr;
	h->bufs_addr = (uint64_t)(uintptr_t)sw_buf_share_table(&h->bufs_n);
	memset(cm.buf, 0, sizeof(cm.buf));
	c = (struct cmsghdr *)(void *)cm.buf; /* CMSG_FIRSTHDR(&mh), never NULL here */
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &mfd, sizeof(int));
	ret = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(hello) ? 0 : -EIO;
	close(mfd); /* the mapping and the receiver's copy keep the memory */
	if (ret) {
		munmap(h, SHM_MAP_BYTES);
		goto err_fd;
	}
	o->fd = fd;
	o->hdr = h;
	o->head = 0;
	o->tail_seen = 0;
	return 0;
err_fd:
	close(fd);
	return ret;
}

/*
 * The out entry for `dst` with its lock held, trying to link if it has
 * none and it is time; NULL when the table is full of live links.
 */
static struct shm_out *out_get(struct sw_engine *eng, const union sw_sa *dst)
{
	struct sw_shm *s = eng->shm;
	struct shm_out *o = NULL, *spare = NULL;
	uint64_t now;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < SHM_MAX_OUT; i++) {
		struct shm_out *e = &s->out[i];

		if (e->used && sw_sa_same(&e->dst, dst)) {
			o = e;
			break;
		}
		if (!spare && (!e->used || e->fd < 0))
			spare = e; /* free, or only a failed try: reusable */
	}
	if (!o && spare) {
		o = spare;
		pthread_mutex_lock(&o->lock);
		out_close(s, o, 0);
		o->used = true;
		o->dst = *dst;
		pthread_mutex_unlock(&o->lock);
	}
	if (o) {
		pthread_mutex_lock(&o->lock);
		if (o->fd < 0 && (now = sw_now_ns()) >= o->retry_at && out_connect(eng, o))
			o->retry_at = now + SHM_RETRY_NS;
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}

/*
 * Append one record (o->lock held); 0, -EAGAIN (no room) or -EPROTO (the
 * consumer's index is impossible: a corrupt ring).
 */
static int ring_put(struct shm_out *o, const uint8_t *pkt, size_t len, uint32_t flags)
{
	uint64_t used = o->head - o->tail_seen, pos = o->head % SHM_RING_BYTES;
	uint64_t rec = SHM_REC_HDR + ((len + 7) & ~(size_t)7), need = rec;
	uint32_t l32 = (uint32_t)len;

	if (pos + rec > SHM_RING_BYTES)
		need += SHM_RING_BYTES - pos; /* the rest of the ring is skipped */
	if (SHM_RING_BYTES - used < need) {
		/* short by the last look: look again (the consumer's line, written per record) */
		o->tail_seen = atomic_load_explicit(&o->hdr->tail, memory_order_acquire);
		used = o->head - o->tail_seen;
		if (used > SHM_RING_BYTES)
			return -EPROTO;
		if (SHM_RING_BYTES - used < need)
			return -EAGAIN;
	}
	if (pos + rec > SHM_RING_BYTES) {
		uint32_t wrap = SHM_REC_WRAP;

		memcpy(ring_data(o->hdr) + pos, &wrap, sizeof(wrap));
		o->head += SHM_RING_BYTES - pos;
		pos = 0;
	}
	memcpy(ring_data(o->hdr) + pos, &l32, sizeof(l32));
	memcpy(ring_data(o->hdr) + pos + sizeof(l32), &flags, sizeof(flags));
	memcpy(ring_data(o->hdr) + pos + SHM_REC_HDR, pkt, len);
	o->head += rec;
	return 0;
}

/* Publish what was appended; ring the consumer if it may be asleep (o->lock held). */
static void ring_publish(struct shm_out *o)
{
	/*
	 * Store head, then load sleeping; the consumer stores sleeping, then
	 * loads head. All four are sequentially consistent, so at least one
	 * side sees the other's store. The producer that rings clears the
	 * mark: one doorbell per sleep, however many packets follow.
	 */
	atomic_store(&o->hdr->head, o->head);
	if (atomic_load(&o->hdr->sleeping) && atomic_exchange(&o->hdr->sleeping, 0)) {
		char c = 0;

		if (send(o->fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
			(void)0; /* full: a doorbell is pending anyway; gone: the sweep sees it */
	}
}

/*
 * A record by reference went into `o`'s ring: keep its MRs until the
 * consumer has read past it (o->lock held). Out of memory, a hold is
 * lost: deregistration then does not wait for that record.
 */
static void out_hold(struct sw_shm *s, struct shm_out *o, const struct sw_ref_hold *h)
{
	bool had = o->holds.n;
	uint64_t now = sw_now_ns();

	for (uint32_t k = 0; k < h->n; k++)
		(void)shm_hold_add(&o->holds, o->head, h->mr[k], h->sink, now);
	if (!had && o->holds.n)
		atomic_fetch_add_explicit(&s->holding, 1, memory_order_relaxed);
}

/* Drop the holds of `o` its consumer has read past (o->lock held). */
static void out_release(struct sw_shm *s, struct shm_out *o, uint64_t now)
{
	if (!o->holds.n)
		return;
	shm_hold_release(&o->holds, o->hdr, now);
	if (!o->holds.n)
		atomic_fetch_sub_explicit(&s->holding, 1, memory_order_relaxed);
}

/* Contract: see transport_priv.h. */
int sw_shm_send(struct sw_engine *eng, const uint8_t *const *pkt, const size_t *len,
		const struct sw_ref_hold *ref, uint32_t n, const union sw_sa *dst)
{
	struct shm_out *o;
	uint64_t bytes = 0;
	uint32_t i, refs = 0, pkts = 0;
	int ret = 0;

	if (!eng->shm)
		return -ENOTCONN;
	o = out_get(eng, dst);
	if (!o)
		return -ENOTCONN;
	if (!o->hdr || !atomic_load_explicit(&o->hdr->accepted, memory_order_acquire)) {
		pthread_mutex_unlock(&o->lock);
		return -ENOTCONN;
	}
	if (o->holds.n) /* the clock only when there is something to let go */
		out_release(eng->shm, o, sw_now_ns());
	for (i = 0; i < n; i++) {
		bool by_ref = ref && sw_ref_on(&ref[i]);

		ret = ring_put(o, pkt[i], len[i], by_ref ? SHM_REC_REF : 0);
		if (ret)
			break;
		if (ref && ref[i].n)
			out_hold(eng->shm, o, &ref[i]);
		bytes += len[i];
		refs += by_ref;
		pkts += by_ref ? ref[i].pkts : 1; /* a run: its packets */
	}
	if (i) { /* counted once per call: posting threads share these lines */
		ring_publish(o);
		atomic_fetch_add_explicit(&eng->cnt.tx_pkts, pkts, memory_order_relaxed);
		atomic_fetch_add_explicit(&eng->cnt.tx_bytes, bytes, memory_order_relaxed);
		atomic_fetch_add_explicit(&eng->cnt.shm_tx_pkts, i, memory_order_relaxed);
		if (refs)
			atomic_fetch_add_explicit(&eng->cnt.ref_tx_pkts, refs,
						  memory_order_relaxed);
	}
	if (ret == -EPROTO) {
		out_close(eng->shm, o, sw_now_ns() + SHM_RETRY_NS);
		atomic_fetch_add_explicit(&eng->cnt.shm_corrupt, 1, memory_order_relaxed);
	} else if (ret == -EAGAIN) {
		atomic_fetch_add_explicit(&eng->cnt.tx_again, 1, memory_order_relaxed);
	}
	pthread_mutex_unlock(&o->lock);
	if (!i && ret == -EPROTO)
		return -ENOTCONN; /* nothing went: UDP takes it */
	return (int)i;
}

/* Progress thread: drop the holds every link's consumer has read past. */
static void shm_release(struct sw_shm *s, uint64_t now)
{
	if (!atomic_load_explicit(&s->holding, memory_order_relaxed))
		return;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < SHM_MAX_OUT; i++) {
		struct shm_out *o = &s->out[i];

		pthread_mutex_lock(&o->lock);
		if (o->hdr)
			out_release(s, o, now);
		pthread_mutex_unlock(&o->lock);
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * The link to `dst`: -1 when there is none (or it is not open), else
 * whether its ring holds packets the consumer has not handled yet (1) or
 * not (0), with *done and *head as in sw_shm_progress, and in *pull
 * whether it takes packets by reference (sw_shm_pull_ok).
 */
/*
 * The out entry for `dst` with its lock held, never linking (NULL when
 * there is none, or no link table).
 */
static struct shm_out *out_find(struct sw_shm *s, const union sw_sa *dst)
{
	struct shm_out *o = NULL;

	if (!s)
		return NULL;
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < SHM_MAX_OUT; i++) {
		if (s->out[i].used && sw_sa_same(&s->out[i].dst, dst)) {
			o = &s->out[i];
			pthread_mutex_lock(&o->lock);
			break;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return o;
}

static int out_peek(struct sw_engine *eng, const union sw_sa *dst, uint64_t *done, uint64_t *head,
		    bool *pull)
{
	struct shm_out *o = out_find(eng->shm, dst);
	int state = -1;

	if (!o)
		return -1;
	if (o->hdr) {
		*done = atomic_load_explicit(&o->hdr->done, memory_order_acquire);
		*head = o->head;
		state = *done != o->head;
		*pull = atomic_load_explicit(&o->hdr->accepted, memory_order_acquire) &&
			atomic_load_explicit(&o->hdr->pull_ok, memory_order_acquire);
	}
	pthread_mutex_unlock(&o->lock);
	return state;
}

/* Contract: see transport_priv.h. */
bool sw_shm_backlog(struct sw_engine *eng, const union sw_sa *dst, uint64_t *done)
{
	uint64_t head;
	bool pull;

	return out_peek(eng, dst, done, &head, &pull) > 0;
}

/* Contract: see transport_priv.h. */
bool sw_shm_unread(struct sw_engine *eng, const union sw_sa *peer)
{
	struct sw_shm *s = eng->shm;

	if (!s)
		return false;
	for (uint32_t i = 0; i < s->nin; i++) {
		struct shm_in *l = &s->in[i];

		if (l->hdr && sw_sa_same(&l->src, peer))
			return atomic_load_explicit(&l->hdr->head, memory_order_acquire) != l->tail;
	}
	return false;
}

/* Contract: see transport_priv.h. */
bool sw_shm_progress(struct sw_engine *eng, const union sw_sa *dst, uint64_t *done, uint64_t *head)
{
	bool pull;

	return out_peek(eng, dst, done, head, &pull) >= 0;
}

/* Contract: see transport_priv.h. */
bool sw_shm_pull_ok(struct sw_engine *eng, const union sw_sa *dst)
{
	uint64_t done, head;
	bool pull = false;

	return out_peek(eng, dst, &done, &head, &pull) >= 0 && pull;
}

/* Contract: see transport_priv.h. */
int sw_shm_push_write(struct sw_engine *eng, const union sw_sa *dst, uint32_t qpn, uint32_t rkey,
		      uint64_t va, const void *src, uint32_t len)
{
	struct shm_out *o = out_find(eng->shm, dst);
	int ret = -EAGAIN;

	if (!o)
		return -EAGAIN;
	if (o->hdr && !o->dir_state &&
	    atomic_load_explicit(&o->hdr->accepted, memory_order_acquire)) {
		/* the consumer wrote these before `accepted` */
		o->dir_slot = o->hdr->dir_slot;
		o->dir_tag = o->hdr->dir_tag;
		o->dir = o->dir_slot < SHM_MAX_IN ? shm_dir_map(o->pid, o->hdr->dir_fd) : NULL;
		o->dir_state = o->dir ? 1 : -1;
	}
	if (o->hdr && o->dir_state > 0) {
		ret = shm_dir_push(o->dir, o->dir_slot, o->dir_tag, &o->hdr->dir_ok, o->pid, qpn,
				   rkey, va, src, len);
		if (ret && ret != -EAGAIN && ret != -EFAULT)
			o->dir_state = -1; /* the kernel will not let us (EPERM, ESRCH, ENOSYS) */
	}
	pthread_mutex_unlock(&o->lock);
	return ret;
}

/* Contract: see transport_priv.h. */
void sw_shm_dir_qp(struct sw_engine *eng, const struct sw_qp *qp, bool live)
{
	enum ibv_qp_state st = qp->ibv.qp_base.state;
	uint32_t access = 0;
	uint64_t pd = 0;

	if (!eng || !eng->shm || eng->fork_gen != sw_fork_gen_now() ||
	    qp->ibv.qp_base.qp_type != IBV_QPT_RC)
		return; /* a fork child's copy writes nothing into its parent's; RC QPs only */
	if (live &&
	    (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD || st == IBV_QPS_SQE)) {
		access = qp->attr.access;
		pd = (uintptr_t)sw_pd_base(qp->ibv.qp_base.pd);
	}
	shm_dir_qp_set(&eng->shm->dir, qp->qpn, pd, access);
}

/* Contract: see transport_priv.h. */
void sw_shm_dir_mr(struct sw_engine *eng, const struct sw_mr *mr, bool live)
{
	uint32_t access = 0;

	if (!eng || !eng->shm || eng->fork_gen != sw_fork_gen_now())
		return;
	/* an MR whose placement follows a hint is written by its own responder only */
	if (live && !mr->mw && !mr->has_hint && !mr->blocked)
		access = (uint32_t)mr->access;
	shm_dir_mr_set(&eng->shm->dir, mr->key, (uintptr_t)mr->pd, access, mr->iova, mr->length,
		       (uintptr_t)mr->host);
}

/* Contract: see sw/transport.h. */
void sw_transport_qp_dir(struct sw_qp *qp)
{
	sw_shm_dir_qp(sw_engine_of(qp), qp, true);
}

/* Contract: see sw/transport.h. */
void sw_transport_mr_dir(struct sw_dev *dev, const struct sw_mr *mr, bool live)
{
	sw_shm_dir_mr(dev->eng, mr, live);
}

/* Contract: see transport_priv.h. */
bool sw_shm_linked(struct sw_engine *eng, const union sw_sa *dst)
{
	uint64_t done, head;
	bool pull;

	return out_peek(eng, dst, &done, &head, &pull) >= 0;
}

/*
 * Take one record from link `l` into buf; its length, 0 if the ring is
 * empty, -EPROTO if it is corrupt.
 */
static int ring_take(struct shm_in *l, uint8_t *buf, size_t cap, uint32_t *flags)
{
	uint64_t head = atomic_load_explicit(&l->hdr->head, memory_order_acquire);

	for (;;) {
		uint64_t avail = head - l->tail, pos = l->tail % SHM_RING_BYTES, rec;
		uint32_t len;

		if (!avail)
			return 0;
		if (avail > SHM_RING_BYTES || avail % 8)
			return -EPROTO;
		len = __atomic_load_n((uint32_t *)(void *)(ring_data(l->hdr) + pos),
				      __ATOMIC_RELAXED);
		if (len == SHM_REC_WRAP) {
			if (SHM_RING_BYTES - pos > avail)
				return -EPROTO;
			l->tail += SHM_RING_BYTES - pos;
			continue;
		}
		rec = SHM_REC_HDR + (((uint64_t)len + 7) & ~7ull);
		if (!len || len > cap || rec > avail || pos + rec > SHM_RING_BYTES)
			return -EPROTO;
		memcpy(flags, ring_data(l->hdr) + pos + sizeof(len), sizeof(*flags));
		memcpy(buf, ring_data(l->hdr) + pos + SHM_REC_HDR, len);
		l->tail += rec;
		atomic_store_explicit(&l->hdr->tail, l->tail, memory_order_release);
		return (int)len;
	}
}

/* Contract: see transport_priv.h. The receive token's holder only (progress.c). */
void sw_shm_handled(struct sw_engine *eng)
{
	struct sw_shm *s = eng->shm;

	for (uint32_t i = 0; s && i < s->nin; i++) {
		struct shm_in *l = &s->in[i];

		if (l->hdr && l->done != l->tail) {
			l->done = l->tail;
			atomic_store_explicit(&l->hdr->done, l->done, memory_order_release);
		}
	}
}

/* Contract: see transport_priv.h. The receive token's holder only (progress.c). */
int sw_shm_recv(struct sw_engine *eng, uint8_t *buf, size_t cap, union sw_sa *src,
		struct sw_ref_src *ref)
{
	struct sw_shm *s = eng->shm;

	if (!s)
		return 0;
	for (uint32_t k = 0; k < s->nin; k++) {
		uint32_t i = (s->rr + k) % s->nin;
		struct shm_in *l = &s->in[i];
		uint32_t flags = 0;
		int n;

		if (!l->hdr)
			continue;
		n = ring_take(l, buf, cap, &flags);
		if (!n && l->hup) {
			in_close(s, i); /* what a sender sent before it left is delivered first */
			k--;
			continue;
		}
		if (n > 0) {
			/* by reference only where we said so: else -1, a malformed packet */
			*ref = (struct sw_ref_src){
				.pid = !(flags & SHM_REC_REF) ? 0 :
				       l->pull		      ? l->pid :
								-1,
				.link = l,
				.gen = l->gen,
				.pos = l->tail,
			};
			if (flags & SHM_REC_REF)
				sw_count_own(&eng->cnt.ref_rx_pkts, 1);
			*src = l->src;
			s->rr = i + 1;
			sw_count_own(&eng->cnt.shm_rx_pkts, 1);
			return n;
		}
		if (n < 0) {
			atomic_fetch_add_explicit(&eng->cnt.shm_corrupt, 1, memory_order_relaxed);
			in_close(s, i);
			k--; /* slot i now holds another link */
		}
	}
	return 0;
}

/*
 * The link packet by reference `pkt` came on, if it is still that link
 * and takes references; else NULL. The receive token's holder only:
 * links close under it (in_close), so pkt->ref_link is a slot of s->in,
 * its gen telling whether it still is the record's link.
 */
static struct shm_in *ref_link(struct sw_engine *eng, const struct sw_pkt *pkt)
{
	struct shm_in *l = pkt->ref_link;

	return eng->shm && l && l->gen == pkt->ref_gen && l->hdr && l->pull ? l : NULL;
}

/* Contract: see transport_priv.h. The receive token's holder only (ref_link). */
bool sw_shm_push_begin(struct sw_engine *eng, const struct sw_pkt *pkt)
{
	struct shm_in *l = ref_link(eng, pkt);

	if (!l)
		return false;
	atomic_store(&l->hdr->pushing, pkt->ref_pos);
	if (atomic_load(&l->hdr->expired) >= pkt->ref_pos) {
		atomic_store(&l->hdr->pushing, 0);
		return false;
	}
	return true;
}

/* Contract: see transport_priv.h. */
void sw_shm_push_end(struct sw_engine *eng, const struct sw_pkt *pkt)
{
	struct shm_in *l = pkt->ref_link;

	atomic_store_explicit(&l->hdr->pushing, 0, memory_order_release);
}

/*
 * Contract: see transport_priv.h. The receive token's holder only, as
 * sw_shm_push_begin: the mapping cannot go while the caller copies.
 */
const uint8_t *sw_shm_map(struct sw_engine *eng, const struct sw_pkt *pkt, uint32_t tag,
			  uint64_t addr, uint32_t len)
{
	struct shm_in *l = tag ? ref_link(eng, pkt) : NULL;

	if (!l)
		return NULL;
	return shm_maps_find(&l->maps, l->pid, l->bufs_addr, l->bufs_n, tag, addr, len);
}

/* Contract: see transport_priv.h. The receive token's holder only (progress.c). */
bool sw_shm_sleep_begin(struct sw_engine *eng, bool announce)
{
	struct sw_shm *s = eng->shm;
	bool ready = false;

	if (!s)
		return true; /* no links: nothing to announce */
	for (uint32_t i = 0; i < s->nin && announce; i++)
		if (s->in[i].hdr)
			atomic_store(&s->in[i].hdr->sleeping, 1); /* see ring_publish() */
	for (uint32_t i = 0; i < s->nin && !ready; i++)
		if (s->in[i].hdr && atomic_load(&s->in[i].hdr->head) != s->in[i].tail)
			ready = true;
	if (ready)
		sw_shm_sleep_end(eng);
	return !ready;
}

/* Contract: see transport_priv.h. */
void sw_shm_sleep_end(struct sw_engine *eng)
{
	struct sw_shm *s = eng->shm;

	for (uint32_t i = 0; s && i < s->nin; i++)
		if (s->in[i].hdr)
			atomic_store_explicit(&s->in[i].hdr->sleeping, 0, memory_order_relaxed);
}

/* Contract: see transport_priv.h. */
int sw_shm_pollfds(struct sw_engine *eng, struct pollfd *p, int max)
{
	struct sw_shm *s = eng->shm;
	int n = 0;

	if (!s)
		return 0;
	if (s->lfd >= 0 && n < max && sw_now_ns() >= s->accept_at)
		p[n++] = (struct pollfd){.fd = s->lfd, .events = POLLIN};
	for (uint32_t i = 0; i < s->nin && n < max; i++)
		if (!s->in[i].hup) /* at EOF: it would always be ready */
			p[n++] = (struct pollfd){.fd = s->in[i].fd, .events = POLLIN};
	return n;
}

/*
 * Single copy: can this process read the sender's memory? The sender put
 * a random value in the ring's header and its own address for it; read
 * it from the sender (the kernel's ptrace access rules, a seccomp filter
 * or another pid namespace may refuse) and compare.
 */
static bool in_pull_test(struct shm_in *l)
{
	uint64_t v = 0, want = l->hdr->pull_cookie;
	struct iovec loc = {.iov_base = &v, .iov_len = sizeof(v)};
	struct iovec rem = {.iov_base = (void *)(uintptr_t)l->hdr->pull_addr, .iov_len = sizeof(v)};

	return l->pid > 0 && process_vm_readv(l->pid, &loc, 1, &rem, 1, 0) == sizeof(v) &&
	       v == want;
}

/*
 * Take the hello (and the ring) of link `l`: 1 done, 0 not arrived yet,
 * -EPROTO a bad one (the link is to be closed).
 */
static int in_hello(struct sw_shm *s, struct shm_in *l, bool pull)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct shm_hello hello;
	struct iovec iov = {.iov_base = &hello, .iov_len = sizeof(hello)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	struct cmsghdr *c;
	struct stat st;
	ssize_t n = recvmsg(l->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	int mfd = -1, nfds = 0, ret = -EPROTO, seals;
	void *map;

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -EPROTO;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0; (k + 1) * sizeof(int) <= c->cmsg_len - CMSG_LEN(0); k++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + k * sizeof(int), sizeof(fd));
			nfds++;
			if (mfd < 0)
				mfd = fd;
			else
				close(fd); /* one ring per hello; more is nonsense */
		}
	}
	if (n != (ssize_t)sizeof(hello) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || nfds != 1 ||
	    hello.magic != SHM_MAGIC || hello.version != SHM_VERSION ||
	    hello.ring_bytes != SHM_RING_BYTES || fstat(mfd, &st) ||
	    st.st_size != (off_t)SHM_MAP_BYTES)
		goto out;
	/* only a ring sealed against shrinking: one that shrank would fault (SIGBUS) our reads */
	seals = fcntl(mfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		goto out;
	map = mmap(NULL, SHM_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (map == MAP_FAILED)
		goto out;
	l->hdr = map;
	l->tail = atomic_load(&l->hdr->tail);
	if (l->tail % 8) { /* records would straddle the ring's end */
		munmap(map, SHM_MAP_BYTES);
		l->hdr = NULL;
		goto out;
	}
	{
		union ibv_gid g;

		memcpy(g.raw, hello.gid, sizeof(g.raw));
		sw_sa_from_gid(&l->src, &g, hello.port, 0);
	}
	l->pull = pull && in_pull_test(l);
	l->bufs_addr = l->hdr->bufs_addr;
	l->bufs_n = l->hdr->bufs_n;
	if (l->pull)
		atomic_store_explicit(&l->hdr->pull_ok, 1, memory_order_release);
	l->dir_slot = l->pull ? shm_dir_slot_take(&s->dir, l->pid) : -1;
	l->hdr->dir_fd = -1;
	if (l->dir_slot >= 0) {
		l->hdr->dir_fd = s->dir.fd;
		l->hdr->dir_slot = (uint32_t)l->dir_slot;
		l->hdr->dir_tag = shm_dir_slot_tag(&s->dir, l->dir_slot, (uint32_t)l->gen);
		atomic_store(&l->hdr->dir_ok, 1);
	}
	atomic_store_explicit(&l->hdr->accepted, 1, memory_order_release);
	ret = 1;
out:
	if (mfd >= 0)
		close(mfd);
	return ret;
}

/*
 * Accept every waiting connection from our own user, while there is
 * room. Out of descriptors or memory, the listener rests for a while
 * (polling it meanwhile would spin): the senders keep to UDP.
 */
static void shm_accept(struct sw_engine *eng, uint64_t now)
{
	struct sw_shm *s = eng->shm;
	int fd;

	if (now < s->accept_at)
		return;
	while ((fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0 ||
	       errno == ECONNABORTED) {
		if (fd < 0)
			continue;
		pid_t pid = 0;

		if (s->nin == SHM_MAX_IN || !shm_peer_is(fd, s->uid, &pid)) {
			close(fd); /* the sender sees the hang-up and keeps to UDP */
			continue;
		}
		/* a slot held without a hello would keep honest peers out */
		s->in[s->nin++] = (struct shm_in){.fd = fd,
						  .pid = pid,
						  .hello_by = now + SHM_HELLO_NS,
						  .gen = ++s->gens,
						  .dir_slot = -1};
		shm_maps_init(&s->in[s->nin - 1].maps);
		atomic_fetch_add_explicit(&eng->cnt.shm_links, 1, memory_order_relaxed);
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		s->accept_at = now + SHM_SWEEP_NS;
}

/* Drop the doorbells of link i; false if its connection hung up. */
static bool in_drain(struct shm_in *l)
{
	char buf[64];
	ssize_t n;

	while ((n = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/*
 * Close every outgoing link whose connection hung up. A link that was
 * refused (never accepted) is looked up again only after SHM_RETRY_NS.
 */
static void shm_sweep(struct sw_shm *s, uint64_t now)
{
	struct pollfd p[SHM_MAX_OUT];
	int idx[SHM_MAX_OUT], n = 0;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < SHM_MAX_OUT; i++)
		if (s->out[i].fd >= 0) {
			p[n] = (struct pollfd){.fd = s->out[i].fd, .events = POLLIN};
			idx[n++] = i;
		}
	if (n && poll(p, (nfds_t)n, 0) > 0)
		for (int k = 0; k < n; k++) {
			struct shm_out *o = &s->out[idx[k]];

			if (!p[k].revents)
				continue;
			pthread_mutex_lock(&o->lock);
			/* an accepted link's peer may be back already: look again at once */
			out_close(s, o,
				  o->hdr && atomic_load(&o->hdr->accepted) ? 0 :
									     now + SHM_RETRY_NS);
			pthread_mutex_unlock(&o->lock);
		}
	pthread_mutex_unlock(&s->lock);
}

/*
 * Take the rings of links whose hello came, drain doorbells, close links
 * that hung up or never said hello. The receive token's holder only
 * (progress.c), as everything below.
 */
static void shm_serve_links(struct sw_engine *eng, uint64_t now)
{
	struct sw_shm *s = eng->shm;

	for (uint32_t i = 0; i < s->nin;) {
		struct shm_in *l = &s->in[i];
		int r = l->hdr ? 1 : in_hello(eng->shm, l, eng->pull);

		if (r < 0 || (!r && now >= l->hello_by)) {
			in_close(s, i);
			continue;
		}
		if (r > 0 && !l->hup && !in_drain(l))
			l->hup = true; /* sw_shm_recv() closes it when it is empty */
		i++;
	}
}

/* Contract: see transport_priv.h. */
void sw_shm_ready(struct sw_engine *eng, const struct pollfd *p, int n, uint64_t now)
{
	struct sw_shm *s = eng->shm;
	bool links = false;

	if (!s)
		return;
	for (int k = 0; k < n; k++) {
		if (!p[k].revents)
			continue;
		if (p[k].fd == s->lfd)
			shm_accept(eng, now);
		else
			links = true;
	}
	if (links)
		shm_serve_links(eng, now);
	shm_release(s, now);
}

/* Contract: see transport_priv.h. */
void sw_shm_accept_due(struct sw_engine *eng, uint64_t now)
{
	struct sw_shm *s = eng->shm;

	if (!s || now < s->io_at)
		return;
	s->io_at = now + SHM_IO_NS;
	if (s->lfd >= 0)
		shm_accept(eng, now);
	shm_serve_links(eng, now);
}

/* Contract: see transport_priv.h. */
void sw_shm_service(struct sw_engine *eng, uint64_t now)
{
	struct sw_shm *s = eng->shm;

	if (!s)
		return;
	sw_shm_accept_due(eng, now);
	if (now >= s->sweep_at) {
		s->sweep_at = now + SHM_SWEEP_NS;
		shm_sweep(s, now);
		for (uint32_t i = 0; i < s->nin; i++)
			shm_maps_age(&s->in[i].maps);
	}
	shm_release(s, now);
}

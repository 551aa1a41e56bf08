/* SPDX-License-Identifier: MIT */
/*
 * unit_hostile_shm: this process plays a hostile producer of the
 * same-host link (src/sw/transport/shm_format.h) against a live device
 * opened in it (tests/hostile.h): it connects to the device's abstract
 * name itself and hands it bad hellos, corrupt rings and garbage records.
 *
 *   - bad hellos (magic, version, ring size, message length, no fd, two
 *     or five fds, an fd of the wrong size, read-only, not sealed against
 *     shrinking, a ring whose tail is not a multiple of 8, a hang-up before
 *     the hello, no hello within SHM_HELLO_NS): the device accepts the connection, then closes it
 * (EOF here), never sets `accepted` and keeps no descriptor;
 *   - corrupt rings after a good hello (head - tail beyond the ring, head
 *     not a multiple of 8, record lengths 0 and > SW_PKT_MAX, a record
 *     past the ring's end or past head, a wrap marker skipping more than
 *     was produced): each closes the link and counts one `corrupt`; the
 *     ring's bytes are never written;
 *   - garbage records of plausible length (random bytes, a WRITE with a
 *     bad rkey): dropped or NAKed as over UDP, the drop and NAK counters
 *     move, the link stays up and carries a verified WRITE after them; a
 *     WRITE with a wrong ICRC lands (the link checks none: its records
 *     never were on a wire);
 *   - a listener of our uid on a name the device sends to gets a ring it
 *     cannot shrink (sealed), and a hello that names the device;
 *   - as root, another uid's process (65534): its hello is refused
 *     (SO_PEERCRED), and the device does not hand a ring to a listener
 *     of another uid that took the name of an address it sends to.
 *
 * The device's answers come back over UDP (nobody listens on the peer's
 * name), so the probe technique of hostile.h proves each drop. The device
 * sends to itself over its own link too: an honest RC pair moves verified
 * data through all of this.
 */
#include "harness.h"

#include "qp_util.h"
#include "hostile.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "sw/transport/shm_format.h"

/* test: timeout=120 */

enum {
	PSN0 = 0x2000
};

static struct h_env H, *h = &H;
static struct h_arena ar;
static uint8_t data[1024];
static struct ibv_qp *v; /* the RC victim */
static uint32_t e = PSN0; /* its expected PSN */

/* A hostile producer: its connection and ring. */
struct prod {
	int fd, mfd;
	struct shm_hdr *hdr;
	uint8_t *data;
	uint64_t head;
};

/* ---- the producer's tools ---- */

/* The abstract name of the device at a (uid: ours). */
static socklen_t shm_name_of(struct sockaddr_un *sun, uid_t uid, const struct sockaddr_in *a)
{
	char ip[INET_ADDRSTRLEN];
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "softverbs/%u/%s:%u",
		     (unsigned)uid, ip, ntohs(a->sin_port));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* A connection to the device's name; -1 on failure. */
static int dial(uid_t uid)
{
	struct sockaddr_un sun;
	socklen_t len = shm_name_of(&sun, uid, &h->dev);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, len)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* A memfd of `bytes`, sealed against shrinking and growing if `seal`, mapped if full-size. */
static int ring_make(struct prod *p, size_t bytes, bool seal)
{
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->mfd = memfd_create("hostile-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->mfd < 0 || ftruncate(p->mfd, (off_t)bytes) ||
	    (seal && fcntl(p->mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW)))
		return -1;
	if (bytes != SHM_MAP_BYTES)
		return 0;
	p->hdr = mmap(NULL, SHM_MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, p->mfd, 0);
	if (p->hdr == MAP_FAILED) {
		p->hdr = NULL;
		return -1;
	}
	p->data = (uint8_t *)p->hdr + SHM_HDR_BYTES;
	p->hdr->magic = SHM_MAGIC;
	p->hdr->version = SHM_VERSION;
	p->hdr->ring_bytes = SHM_RING_BYTES;
	return 0;
}

static void prod_close(struct prod *p)
{
	if (p->hdr)
		munmap(p->hdr, SHM_MAP_BYTES);
	if (p->mfd >= 0)
		close(p->mfd);
	if (p->fd >= 0)
		close(p->fd);
	memset(p, 0, sizeof(*p));
	p->fd = p->mfd = -1;
}

/* A hello naming the peer's address. */
static struct shm_hello hello_good(void)
{
	struct shm_hello m = {
		.magic = SHM_MAGIC,
		.version = SHM_VERSION,
		.ring_bytes = SHM_RING_BYTES,
		.port = ntohs(h->me.sin_port),
	};

	m.gid[10] = m.gid[11] = 0xff; /* ::ffff:a.b.c.d */
	memcpy(&m.gid[12], &h->me.sin_addr, 4);
	return m;
}

/* Send `len` bytes of msg with `nfds` descriptors; 0 or -1. */
static int send_hello(int fd, const void *msg, size_t len, const int *fds, int nfds)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = (void *)(uintptr_t)msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (nfds) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/*
 * The device closed the connection within H_WAIT_MS: EOF, or ECONNRESET
 * if it closed without reading what we sent; nothing was sent to us.
 */
static bool wait_eof(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	ssize_t n;
	char c;

	if (poll(&pfd, 1, H_WAIT_MS) != 1)
		return false;
	n = recv(fd, &c, 1, MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* The connection is still open (no EOF, no hang-up) right now. */
static bool still_open(int fd)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, 0) == 0;
}

/* This process's open descriptors come back to `want` within H_WAIT_MS. */
static bool wait_fds(int want)
{
	int n = -1;

	for (int i = 0; i < H_WAIT_MS && (n = t_count_fds()) != want; i++)
		usleep(1000);
	return CHECK_MSG(n == want, "open fds: %d, want %d", n, want);
}

static bool wait_accepted(struct prod *p)
{
	for (int i = 0; i < H_WAIT_MS && !atomic_load(&p->hdr->accepted); i++)
		usleep(1000);
	return atomic_load(&p->hdr->accepted) == 1;
}

/* Make the device look at the ring now (a doorbell byte; it drains them). */
static void ring_bell(struct prod *p)
{
	char c = 0;

	if (send(p->fd, &c, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		(void)0; /* a closed link: the caller's checks tell */
}

/* Publish head (whatever it is) and ring. */
static void publish(struct prod *p)
{
	atomic_store_explicit(&p->hdr->head, p->head, memory_order_release);
	ring_bell(p);
}

/* Append a record of `len` bytes (no wrap needed in this test) and publish it. */
static void put(struct prod *p, const void *pkt, uint32_t len)
{
	uint64_t pos = p->head % SHM_RING_BYTES, rec = SHM_REC_HDR + ((len + 7ull) & ~7ull);

	if (!CHECK(pos + rec <= SHM_RING_BYTES))
		return;
	memcpy(p->data + pos, &len, 4);
	memcpy(p->data + pos + SHM_REC_HDR, pkt, len);
	p->head += rec;
	publish(p);
}

/*
 * A good link: ring (tail and head at `start`), hello, accepted. 0 or -1
 * (a failed CHECK says why).
 */
static int link_up(struct prod *p, uint64_t start)
{
	struct shm_hello m = hello_good();

	if (!CHECK(ring_make(p, SHM_MAP_BYTES, true) == 0))
		return -1;
	atomic_store(&p->hdr->tail, start);
	atomic_store(&p->hdr->head, start);
	p->head = start;
	p->fd = dial(geteuid());
	if (!CHECK(p->fd >= 0) || !CHECK(send_hello(p->fd, &m, sizeof(m), &p->mfd, 1) == 0))
		return -1;
	return CHECK_MSG(wait_accepted(p), "good hello not accepted") ? 0 : -1;
}

/* ---- bad hellos ---- */

enum fd_kind {
	FD_RING,
	FD_NONE,
	FD_TWO,
	FD_FIVE,
	FD_SMALL,
	FD_RDONLY,
	FD_UNSEALED,
	FD_HANGUP,
	FD_SILENT
};

/*
 * Connect, send hello `m` (`len` bytes) with the descriptors of `kind`
 * and ring tail `tail`: the device takes the connection (links in + 1),
 * closes it, never accepts the ring and keeps no descriptor.
 */
static void bad_hello(const char *name, const struct shm_hello *m, size_t len, enum fd_kind kind,
		      uint64_t tail)
{
	unsigned long long links0 = H_CNT(h, shm_links), corrupt0 = H_CNT(h, shm_corrupt);
	int n0 = t_count_fds(), fds[5] = {-1, -1, -1, -1, -1}, nfds = 1;
	uint8_t buf[sizeof(*m) + 16] = {0};
	struct prod p;

	t_case(name);
	if (!CHECK(ring_make(&p, kind == FD_SMALL ? SHM_MAP_BYTES - 4096 : SHM_MAP_BYTES,
			     kind != FD_UNSEALED) == 0))
		goto out;
	if (p.hdr)
		atomic_store(&p.hdr->tail, tail), atomic_store(&p.hdr->head, tail);
	fds[0] = p.mfd;
	if (kind == FD_NONE) {
		nfds = 0;
	} else if (kind == FD_TWO || kind == FD_FIVE) {
		nfds = kind == FD_TWO ? 2 : 5;
		for (int i = 1; i < nfds; i++)
			fds[i] = memfd_create("hostile-extra", MFD_CLOEXEC);
	} else if (kind == FD_RDONLY) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", p.mfd);
		fds[0] = open(path, O_RDONLY | O_CLOEXEC);
	}
	p.fd = dial(geteuid());
	if (!CHECK(p.fd >= 0))
		goto out;
	memcpy(buf, m, sizeof(*m));
	if (kind == FD_HANGUP) {
		close(p.fd); /* the device accepts a connection already hung up */
		p.fd = -1;
	} else if (kind == FD_SILENT) {
		uint64_t t0 = sw_now_ns();

		/* no hello at all: the slot is given back after SHM_HELLO_NS */
		CHECK_MSG(wait_eof(p.fd), "the device kept a connection that sent no hello");
		CHECK_MSG(sw_now_ns() - t0 >= SHM_HELLO_NS / 2,
			  "closed after %llu ms, before the hello was due",
			  (unsigned long long)((sw_now_ns() - t0) / 1000000));
	} else {
		CHECK(send_hello(p.fd, buf, len, fds, nfds) == 0);
		CHECK_MSG(wait_eof(p.fd), "the device kept the connection");
	}
	H_WAIT_CNT(h, shm_links, links0 + 1);
	if (p.hdr)
		CHECK_EQ_INT(atomic_load(&p.hdr->accepted), 0);
out:
	for (int i = 0; i < 5; i++)
		if (fds[i] >= 0 && fds[i] != p.mfd)
			close(fds[i]);
	prod_close(&p);
	wait_fds(n0); /* the device's end, its copies of our fds: all closed */
	CHECK_EQ_INT(H_CNT(h, shm_corrupt), corrupt0);
}

static void bad_hellos(void)
{
	struct shm_hello m = hello_good(), x;
	size_t n = sizeof(m);

	x = m, x.magic ^= 1;
	bad_hello("hello: wrong magic", &x, n, FD_RING, 0);
	x = m, x.version = SHM_VERSION + 1;
	bad_hello("hello: wrong version", &x, n, FD_RING, 0);
	x = m, x.ring_bytes = SHM_RING_BYTES / 2;
	bad_hello("hello: wrong ring_bytes", &x, n, FD_RING, 0);
	bad_hello("hello: a message one byte short", &m, n - 1, FD_RING, 0);
	bad_hello("hello: a message 8 bytes long", &m, n + 8, FD_RING, 0);
	bad_hello("hello: no descriptor", &m, n, FD_NONE, 0);
	bad_hello("hello: two descriptors", &m, n, FD_TWO, 0);
	bad_hello("hello: five descriptors (more than the device takes)", &m, n, FD_FIVE, 0);
	bad_hello("hello: a memfd 4 KiB short of a ring", &m, n, FD_SMALL, 0);
	bad_hello("hello: a read-only descriptor of a ring", &m, n, FD_RDONLY, 0);
	/* regression: accepted, it could be shrunk under the device (SIGBUS) */
	bad_hello("hello: a ring not sealed against shrinking", &m, n, FD_UNSEALED, 0);
	/* regression: a record length read across the ring's end */
	bad_hello("hello: a ring whose tail is not a multiple of 8", &m, n, FD_RING,
		  SHM_RING_BYTES - 4);
	bad_hello("a hang-up before the hello", &m, n, FD_HANGUP, 0);
	bad_hello("a connection that never sends its hello", &m, n, FD_SILENT, 0);
}

/* ---- corrupt rings ---- */

/*
 * A good link with tail and head at `start`; `corrupt` writes something
 * to the ring and publishes it: the device closes the link (EOF here),
 * counts one `corrupt`, writes nothing into the ring and keeps no fd.
 */
static void corrupt_case(const char *name, uint64_t start, void (*corrupt)(struct prod *))
{
	unsigned long long c0 = H_CNT(h, shm_corrupt);
	int n0 = t_count_fds();
	struct prod p;
	uint8_t *copy = malloc(64 << 10);
	uint64_t pos = start % SHM_RING_BYTES;
	size_t span = pos + (32 << 10) <= SHM_RING_BYTES ? 32 << 10 : SHM_RING_BYTES - pos;

	t_case(name);
	if (!CHECK(copy) || link_up(&p, start))
		goto out;
	for (size_t i = 0; i < span; i++) /* recognisable bytes where the records go */
		p.data[pos + i] = (uint8_t)(i * 29 + 3);
	memcpy(p.data, p.data + pos, 64); /* and at the ring's start (wraps land there) */
	corrupt(&p);
	memcpy(copy, p.data + pos, span);
	memcpy(copy + span, p.data, 64);
	H_WAIT_CNT(h, shm_corrupt, c0 + 1);
	CHECK_MSG(wait_eof(p.fd), "the device kept a corrupt link");
	CHECK_MSG(!memcmp(copy, p.data + pos, span) && !memcmp(copy + span, p.data, 64),
		  "the device wrote into the ring");
	CHECK_EQ_INT(atomic_load(&p.hdr->tail), start); /* nothing consumed */
out:
	free(copy);
	prod_close(&p);
	wait_fds(n0);
}

static void c_too_far(struct prod *p)
{
	p->head += SHM_RING_BYTES + 8;
	publish(p);
}

static void c_unaligned(struct prod *p)
{
	uint32_t len = 8;

	memcpy(p->data + p->head % SHM_RING_BYTES, &len, 4);
	p->head += 12;
	publish(p);
}

static void c_rec_len(struct prod *p, uint32_t len, uint64_t avail)
{
	memcpy(p->data + p->head % SHM_RING_BYTES, &len, 4);
	p->head += avail;
	publish(p);
}

static void c_len0(struct prod *p)
{
	c_rec_len(p, 0, 64);
}

static void c_len_big(struct prod *p)
{
	c_rec_len(p, SW_PKT_MAX + 1, 8 + SW_PKT_MAX + 8);
}

static void c_len_huge(struct prod *p)
{
	c_rec_len(p, 0x7ffffff0u, 4096);
}

static void c_past_head(struct prod *p)
{
	c_rec_len(p, 100, 16);
}

static void c_past_end(struct prod *p) /* tail 64 bytes before the end */
{
	c_rec_len(p, 100, 112);
}

static void c_wrap_short(struct prod *p) /* skips 64, only 32 produced */
{
	c_rec_len(p, SHM_REC_WRAP, 32);
}

static void corrupt_rings(void)
{
	uint64_t end64 = 3ull * SHM_RING_BYTES - 64; /* 64 bytes before an end, indices wrapped */

	corrupt_case("ring: head - tail larger than the ring", 0, c_too_far);
	corrupt_case("ring: head not a multiple of 8", 0, c_unaligned);
	corrupt_case("ring: a record of length 0", 0, c_len0);
	corrupt_case("ring: a record of SW_PKT_MAX + 1 bytes", 0, c_len_big);
	corrupt_case("ring: a record of 2 GiB", 4096, c_len_huge);
	corrupt_case("ring: a record running past head", 0, c_past_head);
	corrupt_case("ring: a record running past the ring's end", end64, c_past_end);
	corrupt_case("ring: a wrap skipping more than was produced", end64, c_wrap_short);
}

/* ---- garbage on a good link ---- */

static unsigned long long drops(void)
{
	return H_CNT(h, drops_malformed) + H_CNT(h, drops_icrc) + H_CNT(h, drops_no_qp);
}

/* A WRITE ONLY of 8 bytes of data at arena offset `off` to `qp` at `psn`, into buf. */
static size_t build_write(uint8_t *buf, struct ibv_qp *qp, uint32_t psn, uint32_t off,
			  uint32_t rkey)
{
	struct sw_pkt pk = h_req(qp, SW_OP_WRITE_ONLY, psn);

	pk.va = h_va(&ar, off);
	pk.rkey = rkey;
	pk.dma_len = 8;
	return h_build(h, buf, &pk, data, 8);
}

static void garbage(void)
{
	static uint8_t buf[SW_PKT_MAX + 64];
	unsigned long long d0, icrc0, naks0, c0 = H_CNT(h, shm_corrupt);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	struct ibv_qp *v2;
	struct prod p;
	size_t n;
	int n0 = t_count_fds();

	t_case("garbage records: random bytes of plausible lengths dropped, the link stays");
	if (link_up(&p, 0))
		goto out;
	d0 = drops();
	for (int i = 0; i < 32; i++) {
		uint32_t len = 12 + (uint32_t)(x % 2000);

		for (uint32_t k = 0; k < len; k++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			buf[k] = (uint8_t)x;
		}
		buf[0] = (uint8_t)(buf[0] & 0x1f); /* an RC opcode: the responder's parser */
		put(&p, buf, len);
	}
	/* the probe through the ring (a zero-length WRITE): its ACK (over UDP) comes next */
	{
		struct sw_pkt pk = h_req(v, SW_OP_WRITE_ONLY, e);

		n = h_build(h, buf, &pk, NULL, 0);
	}
	put(&p, buf, (uint32_t)n);
	H_EXPECT_ACK(h, H_ACK, e);
	e++;
	CHECK_EQ_INT(drops() - d0, 32);
	CHECK(still_open(p.fd));

	/*
	 * The link's records carry no ICRC (never on a wire; a process of
	 * our uid could write a right one as easily): whatever is in those
	 * four bytes, the WRITE lands and is acknowledged. (Not followed by a
	 * copy at the same PSN: that duplicate's re-ACK would come in the same
	 * receive batch or in the next one, one ACK or two.)
	 */
	t_case("a WRITE with a wrong ICRC through the link: the link checks none, it lands");
	icrc0 = H_CNT(h, drops_icrc);
	n = build_write(buf, v, e, 0, ar.mr->rkey);
	buf[n - 1] ^= 0x40;
	put(&p, buf, (uint32_t)n);
	H_EXPECT_ACK(h, H_ACK, e);
	e++;
	memcpy(ar.shadow + H_SLACK + 0, data, 8);
	h_sync(v);
	CHECK(h_arena_intact(&ar));
	CHECK_EQ_INT(H_CNT(h, drops_icrc) - icrc0, 0);

	t_case("a WRITE with a bad rkey through the link: NAKed, the QP in error, the link stays");
	v2 = h_rc_victim(h, PSN0);
	naks0 = H_CNT(h, err_naks_tx);
	if (CHECK(v2)) {
		n = build_write(buf, v2, PSN0, 0, ar.mr->rkey ^ 0x100);
		put(&p, buf, (uint32_t)n);
		H_EXPECT_ACK(h, SW_AETH_NAK_REM_ACCESS, PSN0);
		H_WAIT_CNT(h, err_naks_tx, naks0 + 1);
		CHECK_EQ_INT(q_state(v2), IBV_QPS_ERR);
		H_EXPECT_EVENT(h, v2, IBV_EVENT_QP_ACCESS_ERR);
		CHECK_RET(ibv_destroy_qp(v2), 0);
	}
	n = build_write(buf, v, e, 16, ar.mr->rkey);
	put(&p, buf, (uint32_t)n);
	H_EXPECT_ACK(h, H_ACK, e);
	e++;
	memcpy(ar.shadow + H_SLACK + 16, data, 8);
	h_sync(v);
	CHECK(h_arena_intact(&ar));
	CHECK(still_open(p.fd));
	CHECK_EQ_INT(H_CNT(h, shm_corrupt), c0);
	CHECK_EQ_INT(atomic_load(&p.hdr->tail), p.head); /* every record consumed */
out:
	prod_close(&p);
	wait_fds(n0);
}

/* ---- a hostile consumer ---- */

/* A signaled zero-length RDMA WRITE (no key needed). */
static int post_zero_write(struct ibv_qp *qp)
{
	struct ibv_send_wr w = {.wr_id = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED},
			   *bad;

	return ibv_post_send(qp, &w, &bad);
}

/*
 * This process listens on the name of an address the device sends to:
 * the device's hello names the device and carries one memfd of the ring's
 * size, sealed so that the receiver cannot shrink it (which would crash
 * the device with SIGBUS on its next write).
 */
static void hostile_consumer(void)
{
	struct sockaddr_in other = h->me;
	struct sockaddr_un sun;
	socklen_t len;
	struct q_env pe = h->e;
	struct shm_hello m;
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	struct cmsghdr *c;
	struct pollfd pfd;
	struct ibv_qp *v4 = NULL;
	struct ibv_wc wc;
	struct stat st;
	int n0 = t_count_fds(), lfd, fd = -1, mfd = -1, seals;

	t_case("a listener of our uid gets a ring sealed against shrinking, names the device");
	other.sin_addr.s_addr = htonl(0x7ffb0000u | ((uint32_t)getpid() & 0xfffe) | 1);
	len = shm_name_of(&sun, geteuid(), &other);
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (!CHECK(lfd >= 0 && !bind(lfd, (struct sockaddr *)&sun, len) && !listen(lfd, 4)))
		goto out;
	pe.gid = h->gid;
	memcpy(&pe.gid.raw[12], &other.sin_addr, 4);
	v4 = q_create(&h->e, IBV_QPT_RC);
	if (!CHECK(v4) || !CHECK_RET(h_connect(&pe, v4, H_PEER_QPN, 0, 0x10, 31), 0) ||
	    !CHECK_RET(post_zero_write(v4), 0))
		goto out;
	pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
	if (!CHECK(poll(&pfd, 1, H_WAIT_MS) == 1) || !CHECK((fd = accept(lfd, NULL, NULL)) >= 0))
		goto out;
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	if (!CHECK(poll(&pfd, 1, H_WAIT_MS) == 1) ||
	    !CHECK(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC) == (ssize_t)sizeof(m)))
		goto out;
	c = CMSG_FIRSTHDR(&mh);
	if (!CHECK(c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))))
		goto out;
	memcpy(&mfd, CMSG_DATA(c), sizeof(int));
	CHECK(m.magic == SHM_MAGIC && m.version == SHM_VERSION && m.ring_bytes == SHM_RING_BYTES);
	CHECK(m.gid[10] == 0xff && m.gid[11] == 0xff && !memcmp(&m.gid[12], &h->dev.sin_addr, 4) &&
	      m.port == ntohs(h->dev.sin_port));
	CHECK(fstat(mfd, &st) == 0 && st.st_size == SHM_MAP_BYTES);
	seals = fcntl(mfd, F_GET_SEALS);
	CHECK_MSG(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW), "seals %#x",
		  seals);
	errno = 0;
	CHECK_MSG(ftruncate(mfd, SHM_HDR_BYTES) != 0 && errno == EPERM,
		  "the device's ring could be shrunk (%s)", t_errname(errno));
out:
	if (mfd >= 0)
		close(mfd);
	if (fd >= 0)
		close(fd); /* never accepted: the device keeps to UDP, and drops the link */
	if (lfd >= 0)
		close(lfd);
	if (v4) {
		CHECK_RET(ibv_destroy_qp(v4), 0);
		while (ibv_poll_cq(h->e.scq, 1, &wc) > 0)
			;
	}
	wait_fds(n0);
}

/* ---- another uid ---- */

/* In a child: become uid 65534. */
static int become_nobody(void)
{
	return setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ? -1 : 0;
}

/* Child: another uid's good hello is refused (EOF, never accepted). Exit code 0 if so. */
static int foreign_producer(void)
{
	struct shm_hello m = hello_good();
	struct prod p;
	bool eof;

	if (become_nobody() || ring_make(&p, SHM_MAP_BYTES, true))
		return 2;
	p.fd = dial(0); /* the device's name carries its uid, 0 */
	if (p.fd < 0)
		return 3;
	/* the device may hang up before the hello is even sent: EPIPE then */
	eof = send_hello(p.fd, &m, sizeof(m), &p.mfd, 1) ? errno == EPIPE || errno == ECONNRESET :
							   wait_eof(p.fd);
	return eof && !atomic_load(&p.hdr->accepted) ? 0 : 4;
}

/*
 * Child: as uid 65534, listen on uid 0's name for `a` (tell `ready`),
 * then take the device's connection: it must hang up without a hello.
 */
static int foreign_listener(const struct sockaddr_in *a, int ready)
{
	struct sockaddr_un sun;
	socklen_t len = shm_name_of(&sun, 0, a);
	struct pollfd pfd;
	struct shm_hello m;
	int lfd, fd, fdbuf[4] = {-1, -1, -1, -1};
	union {
		char buf[CMSG_SPACE(sizeof(fdbuf))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cm.buf,
			    .msg_controllen = sizeof(cm.buf)};
	char c = 'r';

	if (become_nobody())
		return 2;
	lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sun, len) || listen(lfd, 4) ||
	    write(ready, &c, 1) != 1)
		return 3;
	pfd = (struct pollfd){.fd = lfd, .events = POLLIN};
	if (poll(&pfd, 1, H_WAIT_MS) != 1 || (fd = accept(lfd, NULL, NULL)) < 0)
		return 4; /* the device never came */
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pfd, 1, H_WAIT_MS) != 1)
		return 5;
	return recvmsg(fd, &mh, 0) == 0 && mh.msg_controllen == 0 ? 0 : 6;
}

/*
 * A child's end: its result through the pipe, then SIGKILL (no exit
 * handlers, no valgrind leak pass over the parent's threads' memory).
 */
__attribute__((noreturn)) static void child_end(int fd, int code)
{
	char c = (char)code;

	if (write(fd, &c, 1) != 1)
		(void)0; /* the parent sees no result */
	kill(getpid(), SIGKILL);
	_exit(code);
}

/* The result the child `pid` wrote into `fd` before it killed itself; -1 if none. */
static int child_result(pid_t pid, int fd)
{
	int st = -1;
	char c;
	ssize_t n = read(fd, &c, 1);

	close(fd);
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	CHECK_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %#x", st);
	return n == 1 ? c : -1;
}

static void other_uid(void)
{
	unsigned long long links0 = H_CNT(h, shm_links);
	struct sockaddr_in other = h->me;
	struct q_env pe = h->e;
	struct ibv_qp *v3;
	struct ibv_wc wc;
	int n0 = t_count_fds(), pp[2], rp[2], st;
	pid_t pid;
	char c;

	t_case("another uid's hello is refused (SO_PEERCRED)");
	if (geteuid() != 0) {
		printf("# skip: not root, cannot setresuid to another uid (CAP_SETUID)\n");
		return;
	}
	if (!CHECK(pipe2(rp, O_CLOEXEC) == 0))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		child_end(rp[1], foreign_producer());
	close(rp[1]);
	st = child_result(pid, rp[0]);
	CHECK_MSG(st == 0, "foreign producer: %d (2 setup, 3 connect, 4 accepted or kept)", st);
	CHECK_EQ_INT(H_CNT(h, shm_links), links0); /* refused before it was a link */
	wait_fds(n0);

	t_case("another uid listening on a name the device sends to gets no ring");
	/* an address no device or test uses: 127.250.x.y */
	other.sin_addr.s_addr = htonl(0x7ffa0000u | ((uint32_t)getpid() & 0xfffe) | 1);
	if (!CHECK(pipe2(pp, O_CLOEXEC) == 0))
		return;
	if (!CHECK(pipe2(rp, O_CLOEXEC) == 0))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		child_end(rp[1], foreign_listener(&other, pp[1]));
	close(pp[1]);
	close(rp[1]);
	CHECK(read(pp[0], &c, 1) == 1);
	close(pp[0]);
	/* a QP towards `other`: its first packet makes the device look that name up */
	pe.gid = h->gid;
	memcpy(&pe.gid.raw[12], &other.sin_addr, 4);
	v3 = q_create(&h->e, IBV_QPT_RC);
	if (CHECK(v3) && CHECK_RET(h_connect(&pe, v3, H_PEER_QPN, 0, 0x10, 31), 0))
		CHECK_RET(post_zero_write(v3), 0);
	st = child_result(pid, rp[0]);
	CHECK_MSG(st == 0, "foreign listener: %d (3 setup, 4 never connected to, 5/6 got a hello)",
		  st);
	if (v3) {
		CHECK_RET(ibv_destroy_qp(v3), 0);
		while (ibv_poll_cq(h->e.scq, 1, &wc) > 0)
			;
	}
	wait_fds(n0);
}

int main(void)
{
	struct h_honest honest;

	t_start("unit_hostile_shm");
	setenv("SOFTVERBS_SHM", "1", 1); /* whatever the caller's environment says */
	{
		/*
		 * An address of its own, outside 127.0.0.N where the other
		 * tests' devices live: the link counts below would otherwise
		 * also count another test dialing this device (seen once in a
		 * clang stage: 16 links where the case made 15).
		 */
		char addr[32];

		snprintf(addr, sizeof(addr), "127.99.%u.%u", (unsigned int)(getpid() >> 8) & 255,
			 ((unsigned int)getpid() & 254) + 1);
		setenv("SOFTVERBS_ADDR", addr, 1);
	}
	h_open(h);
	h_arena_open(&ar, h->e.pd, 4096,
		     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(0x5a ^ (i * 11));
	v = h_rc_victim(h, PSN0);
	if (!CHECK(v))
		return t_finish();
	h_honest_start(h, &honest);
	/* the pair's device sends to itself: over its own link, once accepted */
	for (int i = 0; i < H_WAIT_MS && !H_CNT(h, shm_rx_pkts); i++)
		usleep(1000);
	CHECK_MSG(H_CNT(h, shm_links) == 1 && H_CNT(h, shm_rx_pkts) > 0,
		  "the honest pair is not on the device's link to itself: links %llu rx %llu",
		  H_CNT(h, shm_links), H_CNT(h, shm_rx_pkts));

	bad_hellos();
	h_honest_tick(&honest);
	corrupt_rings();
	h_honest_tick(&honest);
	garbage();
	h_honest_tick(&honest);
	hostile_consumer();
	h_honest_tick(&honest);
	other_uid();
	h_honest_tick(&honest);

	t_case("the victim is unharmed, the honest pair carried on over the link");
	{
		unsigned long long rx0 = H_CNT(h, shm_rx_pkts);

		H_PROBE(h, v, e); /* over UDP this time */
		e++;
		CHECK_EQ_INT(q_state(v), IBV_QPS_RTS);
		H_EXPECT_EVENT(h, NULL, 0);
		h_honest_stop(&honest);
		CHECK_MSG(H_CNT(h, shm_rx_pkts) > rx0,
			  "the honest pair's last round not over the link");
	}
	h_sync(v);
	CHECK(h_arena_intact(&ar));
	printf("# counters: link tx %llu rx %llu links %llu corrupt %llu; drops malformed %llu "
	       "icrc %llu no_qp %llu; err NAKs %llu\n",
	       H_CNT(h, shm_tx_pkts), H_CNT(h, shm_rx_pkts), H_CNT(h, shm_links),
	       H_CNT(h, shm_corrupt), H_CNT(h, drops_malformed), H_CNT(h, drops_icrc),
	       H_CNT(h, drops_no_qp), H_CNT(h, err_naks_tx));
	CHECK_RET(ibv_destroy_qp(v), 0);
	h_arena_close(&ar);
	h_close(h);
	return t_finish();
}

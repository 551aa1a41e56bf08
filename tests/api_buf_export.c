/* SPDX-License-Identifier: MIT */
/*
 * api_buf_export: a CC buffer exported with ibv_export_buf_dmabuf_fd()
 * and used by another process (docs/seed-apis.md 1.3, 1.6, 3.7).
 *
 * The parent runs a CC DMA bounce device (built-in pool), allocates 3
 * pages with ibv_alloc_buf() on a CC parent domain, fills them, exports
 * the buffer and passes the fd over a Unix socket (SCM_RIGHTS) to a
 * child that was forked before any verbs call and opens its own plain
 * device. The child registers the fd with ibv_reg_dmabuf_mr(), maps it,
 * checks the parent's bytes and writes its own, which the parent then
 * finds in its ibv_alloc_buf() memory. After the parent's ibv_free_buf()
 * the child maps and registers the fd again and still reads the last
 * bytes the parent wrote. The child reports every result over the
 * socket; the parent asserts them.
 */
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define CC_FLAG IBV_PARENT_DOMAIN_INIT_ATTR_ALLOW_CC_UNPROTECTED_ALLOC
#define NPAGES 3
#define CHILD_IOVA 0x7f0000000000ULL /* page aligned, like offset 0 */

/* What the child found before the parent freed its buffer. */
struct report1 {
	int got_fd; /* an fd arrived with the message */
	int open_errno; /* 0: the child's own device opened and a PD was allocated */
	int reg_errno; /* ibv_reg_dmabuf_mr: 0 or errno */
	int mr_addr; /* mr->addr == (void *)0, the offset */
	int mr_length; /* mr->length == NPAGES pages */
	int mr_keys; /* lkey nonzero and == rkey */
	int map_errno; /* mmap of the received fd: 0 or errno */
	int size_ok; /* fstat size == NPAGES pages */
	int pattern_a; /* the parent's bytes, every one */
};

/* What the child found after the parent's ibv_free_buf(). */
struct report2 {
	int old_map_c; /* the mapping from before shows pattern C */
	int remap_errno; /* a fresh mmap of the fd: 0 or errno */
	int remap_c; /* ... shows pattern C */
	int reg_errno; /* a second ibv_reg_dmabuf_mr: 0 or errno */
	int dereg; /* both MRs deregistered */
	int teardown; /* PD deallocated and device closed */
};

static size_t page;

static uint8_t pat(char which, size_t i)
{
	return (uint8_t)(which + i * 7 + i / 251);
}

static void fill(uint8_t *p, size_t len, char which)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(which, i);
}

static int matches(const uint8_t *p, size_t len, char which)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat(which, i))
			return 0;
	return 1;
}

/* Send `len` bytes of `msg`, with `fd` attached when fd >= 0. 0 or -1. */
static int send_msg(int sock, const void *msg, size_t len, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Receive exactly `len` bytes; *fd gets an attached fd or -1. 0 or -1. */
static int recv_msg(int sock, void *msg, size_t len, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;
	ssize_t n;

	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = sizeof(u.buf);
	if (fd)
		*fd = -1;
	n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	if (n != (ssize_t)len)
		return -1;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			int got;

			memcpy(&got, CMSG_DATA(cm), sizeof(int));
			if (fd)
				*fd = got;
			else
				close(got);
		}
	}
	return 0;
}

/* ---- the child: a separate process with its own plain device ---- */

static void child_main(int sock)
{
	struct ibv_context *ctx = NULL;
	struct ibv_device **list;
	struct ibv_pd *pd = NULL;
	struct ibv_mr *mr = NULL, *mr2;
	struct report1 r1;
	struct report2 r2;
	size_t len = NPAGES * page;
	uint8_t *map = MAP_FAILED, *map2;
	struct stat st;
	char go;
	int fd = -1;

	memset(&r1, 0, sizeof(r1));
	memset(&r2, 0, sizeof(r2));
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	list = ibv_get_device_list(NULL);
	if (list && list[0])
		ctx = ibv_open_device(list[0]);
	if (ctx)
		pd = ibv_alloc_pd(ctx);
	r1.open_errno = pd ? 0 : (errno ? errno : -1);
	ibv_free_device_list(list);

	if (recv_msg(sock, &go, 1, &fd))
		goto out;
	r1.got_fd = fd >= 0;
	if (pd && fd >= 0) {
		errno = 0;
		mr = ibv_reg_dmabuf_mr(pd, 0, len, CHILD_IOVA, fd, LW | RW | RR);
		r1.reg_errno = mr ? 0 : (errno ? errno : -1);
		if (mr) {
			r1.mr_addr = mr->addr == NULL;
			r1.mr_length = mr->length == len;
			r1.mr_keys = mr->lkey != 0 && mr->lkey == mr->rkey;
		}
	}
	if (fd >= 0) {
		r1.size_ok = !fstat(fd, &st) && st.st_size == (off_t)len;
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		r1.map_errno = map == MAP_FAILED ? errno : 0;
		if (map != MAP_FAILED) {
			r1.pattern_a = matches(map, len, 'A');
			fill(map, len, 'B');
		}
	}
	if (send_msg(sock, &r1, sizeof(r1), -1))
		goto out;

	/* the parent writes C and frees its buffer */
	if (recv_msg(sock, &go, 1, NULL))
		goto out;
	if (map != MAP_FAILED)
		r2.old_map_c = matches(map, len, 'C');
	if (fd >= 0) {
		map2 = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		r2.remap_errno = map2 == MAP_FAILED ? errno : 0;
		if (map2 != MAP_FAILED) {
			r2.remap_c = matches(map2, len, 'C');
			munmap(map2, len);
		}
	}
	if (pd && fd >= 0) {
		errno = 0;
		mr2 = ibv_reg_dmabuf_mr(pd, page, page, CHILD_IOVA + page, fd, LW);
		r2.reg_errno = mr2 ? 0 : (errno ? errno : -1);
		r2.dereg = (!mr2 || !ibv_dereg_mr(mr2)) && (!mr || !ibv_dereg_mr(mr));
		mr = NULL;
	}
	if (pd)
		r2.teardown = !ibv_dealloc_pd(pd) && !ibv_close_device(ctx);
	send_msg(sock, &r2, sizeof(r2), -1);
out:
	/* die at once: no exit handlers, no valgrind leak pass over the parent's copy */
	fflush(stdout);
	kill(getpid(), SIGKILL);
	_exit(1);
}

/* ---- the parent ---- */

static struct ibv_context *open_bounce_builtin(void)
{
	struct ibv_device **list;
	struct ibv_context *c = NULL;

	setenv("SOFTVERBS_CC_DMA_BOUNCE", "1", 1);
	setenv("SOFTVERBS_CC_HEAP", "builtin", 1);
	list = ibv_get_device_list(NULL);
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	if (list && list[0])
		c = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	return c;
}

int main(void)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_context *ctx;
	struct ibv_pd *pd = NULL, *par = NULL;
	struct ibv_buf *b = NULL;
	struct ibv_mr *mr;
	struct report1 r1;
	struct report2 r2;
	uint8_t *p = NULL;
	size_t len;
	int sv[2], fd = -1, status = 0;
	pid_t pid;
	char go = 'g';

	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");
	unsetenv("SOFTVERBS_CC_HEAP");
	t_start("api_buf_export");
	page = (size_t)sysconf(_SC_PAGESIZE);
	len = NPAGES * page;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		printf("Bail out! socketpair: %s\n", t_errname(errno));
		return 1;
	}
	/* fork before any verbs call: the child shares no library state */
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("Bail out! fork: %s\n", t_errname(errno));
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(sv[1]);
	}
	close(sv[1]);

	t_case("parent: a CC buffer of 3 pages, exported");
	ctx = open_bounce_builtin();
	if (CHECK_MSG(ctx != NULL, "open bounce device: %s", t_errname(errno)))
		pd = ibv_alloc_pd(ctx);
	if (CHECK(pd)) {
		memset(&pa, 0, sizeof(pa));
		pa.pd = pd;
		pa.comp_mask = CC_FLAG;
		par = ibv_alloc_parent_domain(ctx, &pa);
		CHECK_MSG(par != NULL, "CC parent domain: %s", t_errname(errno));
	}
	if (par) {
		p = ibv_alloc_buf(par, len, &b);
		CHECK_MSG(p != NULL, "ibv_alloc_buf: %s", t_errname(errno));
	}
	if (p) {
		fill(p, len, 'A');
		fd = ibv_export_buf_dmabuf_fd(b);
		CHECK_MSG(fd >= 0, "export: %s", t_errname(errno));
	}
	/* the parent's own registration goes down the fd path as well */
	if (p) {
		mr = ibv_reg_buf_mr(par, b, p, len, LW | RW);
		if (CHECK(mr)) {
			CHECK(mr->addr == NULL && mr->length == len);
			CHECK_RET(ibv_dereg_mr(mr), 0);
		}
	}
	/* the child gets the fd (or, on failure above, none) */
	CHECK_EQ_INT(send_msg(sv[0], &go, 1, fd), 0);
	if (fd >= 0)
		CHECK_EQ_INT(close(fd), 0); /* the child holds its own reference now */

	t_case("child: registers the fd, sees the parent's bytes, writes its own");
	memset(&r1, 0, sizeof(r1));
	if (CHECK_MSG(!recv_msg(sv[0], &r1, sizeof(r1), NULL), "no report from the child")) {
		CHECK_EQ_INT(r1.open_errno, 0);
		CHECK(r1.got_fd);
		CHECK_MSG(r1.reg_errno == 0, "child ibv_reg_dmabuf_mr: %s",
			  t_errname(r1.reg_errno));
		CHECK(r1.mr_addr);
		CHECK(r1.mr_length);
		CHECK(r1.mr_keys);
		CHECK_MSG(r1.map_errno == 0, "child mmap: %s", t_errname(r1.map_errno));
		CHECK(r1.size_ok);
		CHECK(r1.pattern_a);
	}

	t_case("parent: sees the child's bytes in its ibv_alloc_buf memory");
	if (p) {
		CHECK(matches(p, len, 'B'));
		fill(p, len, 'C');
		ibv_free_buf(b);
		p = NULL;
	}
	CHECK_EQ_INT(send_msg(sv[0], &go, 1, -1), 0);

	t_case("child: the exported fd outlives ibv_free_buf");
	memset(&r2, 0, sizeof(r2));
	if (CHECK_MSG(!recv_msg(sv[0], &r2, sizeof(r2), NULL), "no second report")) {
		CHECK(r2.old_map_c);
		CHECK_MSG(r2.remap_errno == 0, "child mmap after free: %s",
			  t_errname(r2.remap_errno));
		CHECK(r2.remap_c);
		CHECK_MSG(r2.reg_errno == 0, "child second ibv_reg_dmabuf_mr: %s",
			  t_errname(r2.reg_errno));
		CHECK(r2.dereg);
		CHECK(r2.teardown);
	}
	close(sv[0]);
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status 0x%x", status);

	t_case("teardown");
	if (par)
		CHECK_RET(ibv_dealloc_pd(par), 0);
	if (pd)
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	if (ctx)
		CHECK_RET(ibv_close_device(ctx), 0);
	return t_finish();
}

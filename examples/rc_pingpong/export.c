/* SPDX-License-Identifier: MIT */
/*
 * export.c - -E: a helper process receives the buffer's exported fd
 * (ibv_export_buf_dmabuf_fd) over a Unix socket, maps it, reads the
 * owner's label, writes its own tag and reports what it saw.
 */
#include "pp.h"

/* ------------------------------------------------------------------ */
/* -E: the helper process that maps the exported fd                   */

struct export_req {
	uint64_t len;
};

/* Room for one SCM_RIGHTS fd, aligned for struct cmsghdr. */
union fd_cmsg {
	struct cmsghdr hdr;
	char bytes[CMSG_SPACE(sizeof(int))];
};

struct export_reply {
	int32_t err; /* errno of the step that failed, or 0 */
	int32_t pid;
	int64_t fd_size;
	uint64_t sum;
	char label[LABEL_LEN];
};

/* The helper: gets an fd, maps it, reads, writes its tag, reports. */
static int helper_main(int s)
{
	union fd_cmsg cbuf;
	struct export_req req;
	struct export_reply rep;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.bytes,
			    .msg_controllen = sizeof(cbuf.bytes)};
	struct cmsghdr *cm;
	ssize_t r;
	uint8_t *m;
	int fd = -1;

	memset(&rep, 0, sizeof(rep));
	rep.pid = getpid();
	do
		r = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return 0; /* nothing was exported */
	if (r != (ssize_t)sizeof(req))
		return 1;
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	if (fd < 0) {
		rep.err = EBADF;
		goto out;
	}
	rep.fd_size = lseek(fd, 0, SEEK_END);
	m = mmap(NULL, req.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		rep.err = errno;
		goto out;
	}
	memcpy(rep.label, m + LABEL_OFF, LABEL_LEN);
	rep.label[LABEL_LEN - 1] = '\0';
	rep.sum = fnv1a(m, req.len);
	snprintf((char *)m + TAG_OFF, TAG_LEN, "written by helper pid %d", (int)getpid());
	munmap(m, req.len);
out:
	if (fd >= 0)
		close(fd);
	return send(s, &rep, sizeof(rep), MSG_NOSIGNAL) == (ssize_t)sizeof(rep) ? 0 : 1;
}

/* Fork the helper now, while the process has a single thread. */
int start_helper(struct pp *p)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
		fail(p, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	p->helper = fork();
	if (p->helper < 0) {
		fail(p, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (p->helper == 0) {
		close(sv[0]);
		_exit(helper_main(sv[1]));
	}
	close(sv[1]);
	p->helper_sock = sv[0];
	return 0;
}

/* Export the buffer's fd to the helper and check what it saw. */
int run_export(struct pp *p)
{
	union fd_cmsg cbuf;
	struct export_req req = {.len = p->len};
	struct export_reply rep;
	struct iovec iov = {.iov_base = &req, .iov_len = sizeof(req)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf.bytes,
			    .msg_controllen = sizeof(cbuf.bytes)};
	char tag[TAG_LEN], want[TAG_LEN];
	uint64_t sum;
	ssize_t r;
	int fd;

	p->stage = "export";
	fd = ibv_export_buf_dmabuf_fd(p->ibuf);
	if (fd < 0) {
		int e = errno;

		fail(p, "ibv_export_buf_dmabuf_fd: %s", strerror(e));
		return -1;
	}
	memset(&cbuf, 0, sizeof(cbuf));
	cbuf.hdr.cmsg_level = SOL_SOCKET;
	cbuf.hdr.cmsg_type = SCM_RIGHTS;
	cbuf.hdr.cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(&cbuf.hdr), &fd, sizeof(fd));
	sum = fnv1a(p->buf, p->len); /* nothing writes into the buffer any more */
	r = sendmsg(p->helper_sock, &mh, MSG_NOSIGNAL);
	if (r != (ssize_t)sizeof(req)) {
		fail(p, "passing the fd to the helper: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (wait_fd(p->helper_sock, POLLIN, p->o.timeout) ||
	    recv(p->helper_sock, &rep, sizeof(rep), MSG_WAITALL) != (ssize_t)sizeof(rep)) {
		fail(p, "no answer from the helper");
		close(fd);
		return -1;
	}
	if (rep.err) {
		fail(p, "the helper could not map fd %d: %s", fd, strerror(rep.err));
		close(fd);
		return -1;
	}
	memcpy(tag, p->buf + TAG_OFF, TAG_LEN);
	tag[TAG_LEN - 1] = '\0';
	snprintf(want, sizeof(want), "written by helper pid %d", (int)rep.pid);
	snprintf(p->export_line, sizeof(p->export_line),
		 "helper pid %d mapped the fd (SCM_RIGHTS, %lld B): read \"%s\", checksums %s, "
		 "its write %s",
		 (int)rep.pid, (long long)rep.fd_size, rep.label,
		 rep.sum == sum ? "match" : "DIFFER",
		 strcmp(tag, want) ? "NOT seen here" : "seen here");
	if (rep.sum != sum || strcmp(tag, want))
		fail(p, "the helper's view of the exported buffer differs from ours");
	close(fd);
	return 0;
}

void stop_helper(struct pp *p)
{
	int st;

	if (p->helper <= 0)
		return;
	close(p->helper_sock); /* a helper still waiting sees EOF and exits */
	p->helper_sock = -1;
	if (waitpid(p->helper, &st, 0) == p->helper && (!WIFEXITED(st) || WEXITSTATUS(st)))
		fail(p, "the export helper failed (status 0x%x)", st);
	p->helper = 0;
}

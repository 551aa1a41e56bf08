/* SPDX-License-Identifier: MIT */
/*
 * tcp.c - the TCP connection between the two sides: one text line per
 * message, each starting with PROTO; the hello (QPN, PSN, GID, rkey,
 * buffer), barriers, and the results at the end.
 */
#include "pp.h"

/* ------------------------------------------------------------------ */
/* TCP exchange                                                       */

/* Wait until `fd` is ready for `events`; -1 with errno ETIMEDOUT after the timeout. */
int wait_fd(int fd, short events, int timeout_s)
{
	struct pollfd pfd = {.fd = fd, .events = events};
	int r;

	do
		r = poll(&pfd, 1, timeout_s ? timeout_s * 1000 : -1);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	return r > 0 ? 0 : -1;
}

int send_line(struct pp *p, const char *line)
{
	size_t n = strlen(line), done = 0;

	while (done < n) {
		ssize_t r = send(p->sock, line + done, n - done, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fail(p, "sending to the peer: %s", strerror(errno));
			return -1;
		}
		done += (size_t)r;
	}
	return 0;
}

/* One line (without its newline) that starts with `word`. */
int recv_line(struct pp *p, const char *word, char *out, size_t n)
{
	size_t len = 0;

	for (;;) {
		char ch;
		ssize_t r;

		if (wait_fd(p->sock, POLLIN, p->o.timeout)) {
			fail(p, "waiting for the peer (%s): %s", word, strerror(errno));
			return -1;
		}
		r = recv(p->sock, &ch, 1, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r < 0)
				fail(p, "receiving %s from the peer: %s", word, strerror(errno));
			else
				fail(p, "the peer closed the connection while we waited for %s",
				     word);
			return -1;
		}
		if (ch == '\n')
			break;
		if (len + 1 >= n) {
			fail(p, "over-long line from the peer");
			return -1;
		}
		out[len++] = ch;
	}
	out[len] = '\0';
	if (strncmp(out, word, strlen(word)) || (out[strlen(word)] != ' ' && out[strlen(word)])) {
		fail(p, "unexpected line from the peer: '%.60s' (expected %s)", out, word);
		return -1;
	}
	return 0;
}

/* Both sides say `word` and wait for the other's. */
int barrier(struct pp *p, const char *word)
{
	char line[64];

	snprintf(line, sizeof(line), "%s\n", word);
	if (send_line(p, line))
		return -1;
	return recv_line(p, word, line, sizeof(line));
}

static void name_peer(struct pp *p, const struct sockaddr *sa, socklen_t salen)
{
	char host[NI_MAXHOST], serv[NI_MAXSERV];

	if (getnameinfo(sa, salen, host, sizeof(host), serv, sizeof(serv),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(p->peer_name, sizeof(p->peer_name), "?");
	else
		snprintf(p->peer_name, sizeof(p->peer_name), "%.64s port %.8s", host, serv);
}

int tcp_server(struct pp *p)
{
	struct addrinfo hints = {.ai_flags = AI_PASSIVE,
				 .ai_family = AF_UNSPEC,
				 .ai_socktype = SOCK_STREAM},
			*res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int lfd = -1, one = 1, r;

	r = getaddrinfo(NULL, p->o.port, &hints, &res);
	if (r) {
		fail(p, "TCP port %s: %s", p->o.port, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai; ai = ai->ai_next) {
		lfd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (lfd < 0)
			continue;
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (!bind(lfd, ai->ai_addr, ai->ai_addrlen) && !listen(lfd, 1))
			break;
		close(lfd);
		lfd = -1;
	}
	freeaddrinfo(res);
	if (lfd < 0) {
		fail(p, "cannot listen on TCP port %s: %s", p->o.port, strerror(errno));
		return -1;
	}
	if (getsockname(lfd, (struct sockaddr *)&ss, &sl) == 0) {
		char serv[NI_MAXSERV] = "?";

		getnameinfo((struct sockaddr *)&ss, sl, NULL, 0, serv, sizeof(serv),
			    NI_NUMERICSERV);
		printf(PROG ": server waiting for a client on TCP port %s\n", serv);
		fflush(stdout);
	}
	if (wait_fd(lfd, POLLIN, p->o.timeout)) {
		fail(p, "no client came within %d s (-t): %s", p->o.timeout, strerror(errno));
		close(lfd);
		return -1;
	}
	sl = sizeof(ss);
	p->sock = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
	if (p->sock < 0) {
		fail(p, "accept: %s", strerror(errno));
		close(lfd);
		return -1;
	}
	name_peer(p, (struct sockaddr *)&ss, sl);
	close(lfd);
	return 0;
}

int tcp_client(struct pp *p)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
	uint64_t end = now_ns() + (uint64_t)p->o.timeout * 1000000000u;
	int r, err = 0;

	r = getaddrinfo(p->o.host, p->o.port, &hints, &res);
	if (r) {
		fail(p, "%s port %s: %s", p->o.host, p->o.port, gai_strerror(r));
		return -1;
	}
	/* the server may still be setting up: retry refused connections */
	for (;;) {
		for (ai = res; ai; ai = ai->ai_next) {
			p->sock = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
					 ai->ai_protocol);
			if (p->sock < 0) {
				err = errno;
				continue;
			}
			if (!connect(p->sock, ai->ai_addr, ai->ai_addrlen))
				break;
			err = errno;
			close(p->sock);
			p->sock = -1;
		}
		if (p->sock >= 0 || err != ECONNREFUSED || (p->o.timeout && now_ns() > end))
			break;
		usleep(100000);
	}
	if (p->sock >= 0)
		name_peer(p, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (p->sock < 0) {
		fail(p, "cannot connect to %s port %s: %s", p->o.host, p->o.port, strerror(err));
		return -1;
	}
	return 0;
}

int exchange_hello(struct pp *p)
{
	char line[256], gid[33];
	unsigned long long va, len, size;
	struct hello *h = &p->peer;
	int n;

	for (int i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", p->gid.raw[i]);
	snprintf(line, sizeof(line),
		 PROTO " qpn=%06x psn=%06x rkey=%08x va=%016llx len=%llu gid=%s size=%llu "
		       "iters=%u ops=%u\n",
		 p->qp->qp_num, p->psn, p->mr->rkey, (unsigned long long)(uintptr_t)p->buf,
		 (unsigned long long)p->len, gid, (unsigned long long)p->o.size, p->o.iters,
		 p->o.ops);
	if (send_line(p, line) || recv_line(p, PROTO, line, sizeof(line)))
		return -1;
	n = sscanf(line,
		   PROTO " qpn=%x psn=%x rkey=%x va=%llx len=%llu gid=%32s size=%llu "
			 "iters=%u ops=%u",
		   &h->qpn, &h->psn, &h->rkey, &va, &len, gid, &size, &h->iters, &h->ops);
	if (n != 9 || strlen(gid) != 32) {
		fail(p, "malformed address from the peer: '%.80s'", line);
		return -1;
	}
	h->va = va;
	h->len = len;
	h->size = size;
	for (int i = 0; i < 16; i++) {
		unsigned int byte;

		if (sscanf(gid + 2 * i, "%2x", &byte) != 1) {
			fail(p, "malformed GID from the peer");
			return -1;
		}
		h->gid.raw[i] = (uint8_t)byte;
	}
	if (h->size != p->o.size || h->iters != p->o.iters || h->ops != p->o.ops) {
		fail(p,
		     "the peer runs -s %llu -n %u with ops 0x%x, we run -s %zu -n %u with ops "
		     "0x%x: both sides need the same -s, -n and -o",
		     size, h->iters, h->ops, p->o.size, p->o.iters, p->o.ops);
		return -1;
	}
	if (h->len < p->len) {
		fail(p, "the peer's buffer is too small (%llu B)", len);
		return -1;
	}
	return 0;
}

/* Both sides swap their findings (and the client's timing). */
int exchange_results(struct pp *p)
{
	char line[256];
	struct result *r = &p->mine, *t = &p->theirs;
	unsigned long long e, a, q;

	r->failures = p->failures;
	r->elapsed_ns = p->elapsed_ns;
	r->avg_ns = p->avg_ns;
	r->p99_ns = p->p99_ns;
	snprintf(line, sizeof(line),
		 PROTO "-DONE failures=%u write=%d atomic=%d elapsed=%llu avg=%llu p99=%llu\n",
		 r->failures, r->write_in, r->atomic_in, (unsigned long long)r->elapsed_ns,
		 (unsigned long long)r->avg_ns, (unsigned long long)r->p99_ns);
	if (send_line(p, line) || recv_line(p, PROTO "-DONE", line, sizeof(line)))
		return -1;
	if (sscanf(line,
		   PROTO "-DONE failures=%u write=%d atomic=%d elapsed=%llu avg=%llu p99=%llu",
		   &t->failures, &t->write_in, &t->atomic_in, &e, &a, &q) != 6) {
		fail(p, "malformed result from the peer: '%.80s'", line);
		return -1;
	}
	t->elapsed_ns = e;
	t->avg_ns = a;
	t->p99_ns = q;
	p->have_theirs = true;
	if (!p->server)
		return 0;
	/* the client timed the ping-pongs */
	p->avg_ns = t->avg_ns;
	p->p99_ns = t->p99_ns;
	if (t->elapsed_ns)
		p->elapsed_ns = t->elapsed_ns;
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * report.c - what went wrong (fail) and the report each side prints at
 * the end: about 25 lines, then the verdict.
 */
#include "pp.h"

/* ------------------------------------------------------------------ */
/* failures                                                           */

/* Contract: see pp.h. */
__attribute__((format(printf, 2, 3))) void fail(struct pp *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (p && !p->failures++)
		p->fail_stage = p->stage ? p->stage : "setup";
}

/* ------------------------------------------------------------------ */
/* report                                                             */

static const char *verdict_str(int v, const char *ok)
{
	return v == V_OK ? ok : v == V_BAD ? "FAILED" : "not checked";
}

#define ROW(k, ...)                                                                                \
	do {                                                                                       \
		fprintf(out, "%-11s", k);                                                          \
		fprintf(out, __VA_ARGS__);                                                         \
		fputc('\n', out);                                                                  \
	} while (0)

/* Every line of the report but the verdict; written before the teardown. */
void report(struct pp *p, FILE *out)
{
	char g[INET6_ADDRSTRLEN], pg[INET6_ADDRSTRLEN];

	ROW("role", "%s%s%s", p->server ? "server" : "client", p->peer_name[0] ? ", peer " : "",
	    p->peer_name);
	if (!p->ctx)
		return;
	ROW("device", "%s port %u, MTU %d, GID %s, CC DMA bounce %s",
	    ibv_get_device_name(p->ctx->device), p->o.ib_port, 128 << p->pattr.active_mtu,
	    gid_str(&p->gid, g, sizeof(g)), p->bounce ? "on" : "off");
	if (p->qp && p->peer.qpn)
		ROW("qp", "RC QPN 0x%06x PSN 0x%06x <-> peer QPN 0x%06x GID %s", p->qp->qp_num,
		    p->psn, p->peer.qpn, gid_str(&p->peer.gid, pg, sizeof(pg)));
	if (p->pd)
		ROW("pd", "%s",
		    p->o.cc ?
			    (p->bounce ? "parent domain (ALLOW_CC_UNPROTECTED_ALLOC); CQ "
					 "(MASK_PD) and QP on it" :
					 "parent domain (ALLOW_CC_UNPROTECTED_ALLOC, no effect: "
					 "the device does not bounce); CQ (MASK_PD) and QP on it") :
			    "ordinary PD");
	if (p->buf) {
		if (p->fd_backed)
			ROW("buffer", "ibv_alloc_buf %zu B: fd-backed shared memory, a %lld B %s",
			    p->len, (long long)p->fd_size, p->fd_kind);
		else
			ROW("buffer", "ibv_alloc_buf %zu B: ordinary memory", p->len);
	}
	if (p->mr) {
		bool fd_path = (uintptr_t)p->mr->addr != (uintptr_t)p->buf;

		char where[48] = "mr->addr = VA";

		if (fd_path)
			snprintf(where, sizeof(where),
				 "mr->addr 0x%" PRIxPTR " = offset, iova = VA",
				 (uintptr_t)p->mr->addr);
		ROW("mr", "%s, %s path: lkey 0x%08x rkey 0x%08x, %s", p->reg_verb,
		    fd_path ? "fd" : "addr", p->mr->lkey, p->mr->rkey, where);
	}
	if (p->dmah) {
		char st[48] = ", no steering tag";

		if (p->o.dmah_st)
			snprintf(st, sizeof(st), ", cpu %u, mem %s", p->o.dmah_cpu,
				 p->o.dmah_mem == IBV_TPH_MEM_TYPE_PM ? "pm" : "vm");
		ROW("dmah", "ibv_alloc_dmah: ph %u (%s)%s", p->o.dmah_ph, ph_name(p->o.dmah_ph),
		    st);
	}
	if (p->export_line[0])
		ROW("export", "%s", p->export_line);
	if (p->pingpong_done) {
		if (p->bad_msgs)
			ROW("send", "%u ping-pongs of %zu B: %u message%s FAILED the check",
			    p->o.iters, p->o.size, p->bad_msgs, p->bad_msgs == 1 ? "" : "s");
		else if (p->o.check)
			ROW("send", "%u ping-pongs of %zu B: every message verified", p->o.iters,
			    p->o.size);
		else
			ROW("send", "%u ping-pongs of %zu B: lengths verified (-c checks the data)",
			    p->o.iters, p->o.size);
	}
	if (p->o.ops & OP_WRITE && p->write_out != V_NONE)
		ROW("write", "%zu B into the peer's buffer: %s", p->o.size,
		    p->have_theirs ? verdict_str(p->theirs.write_in, "verified by the peer") :
				     "not confirmed by the peer");
	if (p->o.ops & OP_READ && p->read_out != V_NONE)
		ROW("read", "%zu B from the peer's buffer: %s", p->o.size,
		    verdict_str(p->read_out, "verified"));
	if (p->o.ops & OP_ATOMIC) {
		if (p->dattr.orig_attr.atomic_cap == IBV_ATOMIC_NONE)
			ROW("atomic", "skipped: the device has no atomics");
		else if (p->atomic_out != V_NONE)
			ROW("atomic",
			    "%d fetch-and-adds on the peer's counter (0x%" PRIx64 " -> 0x%" PRIx64
			    "): %s",
			    N_ATOMICS, p->atomic_first, p->atomic_last,
			    p->atomic_out == V_OK && p->have_theirs ?
				    verdict_str(p->theirs.atomic_in, "verified, and by the peer") :
				    verdict_str(p->atomic_out, "verified"));
	}
	if (p->o.ops & (OP_WRITE | OP_ATOMIC) &&
	    (p->mine.write_in != V_NONE || p->mine.atomic_in != V_NONE))
		ROW("incoming", "the peer's%s%s%s into this buffer: %s",
		    p->mine.write_in != V_NONE ? " write" : "",
		    p->mine.write_in != V_NONE && p->mine.atomic_in != V_NONE ? " and" : "",
		    p->mine.atomic_in != V_NONE ? " atomics" : "",
		    p->mine.write_in != V_BAD && p->mine.atomic_in != V_BAD ? "verified" :
									      "FAILED");
	if (p->pingpong_done && p->elapsed_ns && p->avg_ns) {
		double s = (double)p->elapsed_ns / 1e9;
		double bytes = 2.0 * p->o.iters * (double)p->o.size;

		ROW("throughput", "%.1f MB/s (%.0f B both ways in %.3f s)", bytes / s / 1e6, bytes,
		    s);
		ROW("latency", "avg %.1f us, p99 %.1f us (round trip of %zu B, client's clock)",
		    (double)p->avg_ns / 1e3, (double)p->p99_ns / 1e3, p->o.size);
	}
}

/* The last line, after the teardown. */
void verdict(struct pp *p, FILE *out)
{
	unsigned int here = p->failures;

	if (!here && p->have_theirs && !p->theirs.failures)
		ROW("result", "PASS");
	else if (here)
		ROW("result", "FAIL (%u problem%s here, in %s; see stderr)", here,
		    here == 1 ? "" : "s", p->fail_stage ? p->fail_stage : "setup");
	else if (p->have_theirs)
		ROW("result", "FAIL (the peer found %u problem%s)", p->theirs.failures,
		    p->theirs.failures == 1 ? "" : "s");
	else
		ROW("result", "FAIL (no result from the peer)");
}

#undef ROW

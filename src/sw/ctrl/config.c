/* SPDX-License-Identifier: MIT */
/*
 * config.c - the SOFTVERBS_* environment variables of the software device.
 *
 * Every variable is optional. A variable that is set must be well formed:
 * a bad value never silently falls back to the default. Instead the first
 * problem is described in cfg->error, the device is still listed, and
 * opening it fails with EINVAL (see context.c).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <net/if.h>
#include <sched.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sw/addr.h"
#include "sw/ctrl.h"

#define SW_DEFAULT_NAME "softverbs0"

/*
 * Contract: record a formatted problem in cfg->error unless an earlier
 * problem is already recorded (the first one is the one reported).
 */
static void cfg_fail(struct sw_config *cfg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void cfg_fail(struct sw_config *cfg, const char *fmt, ...)
{
	va_list ap;

	if (cfg->error[0])
		return;
	va_start(ap, fmt);
	vsnprintf(cfg->error, sizeof(cfg->error), fmt, ap);
	va_end(ap);
}

/*
 * Contract: copy at most 48 characters of `value` into `out` (size >= 52)
 * for quoting in a message, replacing unprintable bytes with '?' and
 * marking truncation with "...".
 */
static void cfg_quote(char *out, size_t size, const char *value)
{
	size_t i, max = size - 4;

	for (i = 0; i < max && value[i]; i++)
		out[i] = isprint((unsigned char)value[i]) ? value[i] : '?';
	if (value[i])
		memcpy(out + i, "...", 4);
	else
		out[i] = '\0';
}

/* A keyword a variable may be set to, and the value it stands for. */
struct cfg_word {
	const char *text;
	int value;
};

/*
 * Contract: variable `name`, one of the `n` keywords `words`: its value,
 * or `dflt` when unset. Anything else is recorded as a problem naming
 * what was `expected`, and gives `dflt`.
 */
static int cfg_load_word(struct sw_config *cfg, const char *name, const struct cfg_word *words,
			 size_t n, int dflt, const char *expected)
{
	const char *v = getenv(name);
	char q[52];

	if (!v)
		return dflt;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v, words[i].text))
			return words[i].value;
	cfg_quote(q, sizeof(q), v);
	cfg_fail(cfg, "%s=\"%s\" is invalid: expected %s", name, q, expected);
	return dflt;
}

/* Contract: true if `s` is 1..63 characters of [A-Za-z0-9_-]. */
static bool cfg_name_ok(const char *s)
{
	size_t n = strlen(s), i;

	if (n < 1 || n > 63)
		return false;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!isalnum(c) && c != '_' && c != '-')
			return false;
	}
	return true;
}

/* Contract: SOFTVERBS_DEV_NAME into cfg->name (default on absence or error). */
static void cfg_load_name(struct sw_config *cfg)
{
	const char *v = getenv("SOFTVERBS_DEV_NAME");
	char q[52];

	snprintf(cfg->name, sizeof(cfg->name), "%s", SW_DEFAULT_NAME);
	if (!v)
		return;
	if (!cfg_name_ok(v)) {
		cfg_quote(q, sizeof(q), v);
		cfg_fail(cfg,
			 "SOFTVERBS_DEV_NAME=\"%s\" is invalid: expected 1 to 63 characters "
			 "of A-Z, a-z, 0-9, '_' and '-'",
			 q);
		return;
	}
	snprintf(cfg->name, sizeof(cfg->name), "%s", v);
}

/*
 * Contract: true if the host-order IPv4 address can name this host as a
 * unicast endpoint: not 0.0.0.0/8, not multicast (224/4), not reserved or
 * broadcast (240/4).
 */
static bool cfg_addr_unicast(uint32_t a)
{
	return (a >> 24) != 0 && (a >> 28) != 0xe && (a >> 28) != 0xf;
}

static bool cfg_parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out);

/*
 * Contract: true if the IPv6 address can name this host as a unicast
 * endpoint: not ::, not multicast (ff00::/8). (IPv4-mapped and IPv4
 * forms are handled as IPv4 by the caller.)
 */
static bool cfg_addr6_unicast(const struct in6_addr *a)
{
	return !IN6_IS_ADDR_UNSPECIFIED(a) && !IN6_IS_ADDR_MULTICAST(a);
}

/*
 * Contract: parse an IPv6 address with an optional "%scope" (interface
 * name or index, required for a link-local address) into *out; false if
 * malformed, not unicast, or the scope names no interface.
 */
static bool cfg_parse_addr6(const char *v, struct sockaddr_in6 *out)
{
	char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 1], *pct;
	unsigned long idx;

	if (strlen(v) >= sizeof(buf))
		return false;
	strcpy(buf, v);
	pct = strchr(buf, '%');
	if (pct)
		*pct++ = '\0';
	memset(out, 0, sizeof(*out));
	out->sin6_family = AF_INET6;
	if (inet_pton(AF_INET6, buf, &out->sin6_addr) != 1 || !cfg_addr6_unicast(&out->sin6_addr))
		return false;
	if (pct) {
		idx = if_nametoindex(pct);
		if (!idx && !cfg_parse_uint(pct, 1, UINT32_MAX, &idx))
			return false;
		out->sin6_scope_id = (uint32_t)idx;
	}
	return !IN6_IS_ADDR_LINKLOCAL(&out->sin6_addr) || out->sin6_scope_id;
}

/* Contract: SOFTVERBS_ADDR into cfg->have_addr / cfg->addr. */
static void cfg_load_addr(struct sw_config *cfg)
{
	const char *v = getenv("SOFTVERBS_ADDR");
	struct in_addr a;
	char q[52];

	if (!v)
		return;
	memset(&cfg->addr, 0, sizeof(cfg->addr));
	/* inet_pton accepts exactly four decimal octets for IPv4, nothing else */
	if (inet_pton(AF_INET, v, &a) == 1 && cfg_addr_unicast(ntohl(a.s_addr))) {
		cfg->addr.v4.sin_family = AF_INET;
		cfg->addr.v4.sin_addr = a;
	} else if (cfg_parse_addr6(v, &cfg->addr.v6)) {
		union ibv_gid g;

		memcpy(g.raw, &cfg->addr.v6.sin6_addr, 16);
		if (sw_gid_is_v4mapped(&g)) /* ::ffff:a.b.c.d is IPv4 */
			sw_sa_from_gid(&cfg->addr, &g, 0, 0);
		if (!sw_sa_is_v6(&cfg->addr) &&
		    !cfg_addr_unicast(ntohl(cfg->addr.v4.sin_addr.s_addr)))
			goto bad;
	} else {
		goto bad;
	}
	cfg->have_addr = true;
	return;
bad:
	cfg_quote(q, sizeof(q), v);
	cfg_fail(cfg,
		 "SOFTVERBS_ADDR=\"%s\" is invalid: expected an IPv4 unicast address such as "
		 "127.0.0.1 (not 0.x.x.x, multicast or broadcast) or an IPv6 unicast address "
		 "such as fd00::1 (link-local with its interface: fe80::1%%eth0)",
		 q);
}

/* Contract: SOFTVERBS_GID_TABLE into cfg->gid_layout (default single). */
static void cfg_load_gid_table(struct sw_config *cfg)
{
	static const struct cfg_word words[] = {
		{"single", SW_GIDS_SINGLE},
		{"rxe", SW_GIDS_RXE},
		{"mlx5", SW_GIDS_MLX5},
	};

	cfg->gid_layout = (enum sw_gid_layout)cfg_load_word(cfg, "SOFTVERBS_GID_TABLE", words,
							    SV_ARRAY_SIZE(words), SW_GIDS_SINGLE,
							    "single, rxe or mlx5");
}

/*
 * Contract: parse a plain decimal number (digits only, no sign or spaces)
 * in [min, max] into *out; false if malformed or out of range.
 */
static bool cfg_parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (!s[0])
		return false;
	for (i = 0; s[i]; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
		if (v > max)
			return false;
	}
	if (v < min)
		return false;
	*out = v;
	return true;
}

/*
 * Contract: the decimal number in variable `name`, from `min` to `max`,
 * into *out, which keeps its value when the variable is unset or
 * malformed (then recorded with `what`, the kind of number expected).
 */
static void cfg_load_uint(struct sw_config *cfg, const char *name, unsigned long min,
			  unsigned long max, const char *what, unsigned long *out)
{
	const char *v = getenv(name);
	char q[52];

	if (v && !cfg_parse_uint(v, min, max, out)) {
		cfg_quote(q, sizeof(q), v);
		cfg_fail(cfg, "%s=\"%s\" is invalid: expected %s from %lu to %lu", name, q, what,
			 min, max);
	}
}

/* Contract: SOFTVERBS_UDP_PORT into cfg->udp_port (default 4791). */
static void cfg_load_udp_port(struct sw_config *cfg)
{
	unsigned long port = SW_UDP_PORT;

	cfg_load_uint(cfg, "SOFTVERBS_UDP_PORT", 1, 65535, "a decimal port number", &port);
	cfg->udp_port = (uint16_t)port;
}

/*
 * Contract: SOFTVERBS_SPIN_US into cfg->spin_us (default SW_SPIN_US_DEFAULT):
 * how long the progress thread keeps polling after its last work before
 * it sleeps; 0 to 1000000 microseconds.
 */
static void cfg_load_spin_us(struct sw_config *cfg)
{
	unsigned long us = SW_SPIN_US_DEFAULT;

	cfg_load_uint(cfg, "SOFTVERBS_SPIN_US", 0, 1000000, "a decimal number of microseconds",
		      &us);
	cfg->spin_us = (uint32_t)us;
}

/*
 * Contract: SOFTVERBS_PROGRESS_CPU into cfg->progress_cpu (-1 when unset):
 * the number of one of the machine's CPUs. The calling thread's own
 * affinity does not matter (an application may pin itself elsewhere);
 * a CPU outside the process's cpuset fails later, at open.
 */
static void cfg_load_progress_cpu(struct sw_config *cfg)
{
	const char *v = getenv("SOFTVERBS_PROGRESS_CPU");
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	unsigned long cpu;
	char q[52];

	cfg->progress_cpu = -1;
	if (!v)
		return;
	if (ncpu < 1 || ncpu > CPU_SETSIZE)
		ncpu = CPU_SETSIZE;
	if (!cfg_parse_uint(v, 0, (unsigned long)ncpu - 1, &cpu)) {
		cfg_quote(q, sizeof(q), v);
		cfg_fail(cfg,
			 "SOFTVERBS_PROGRESS_CPU=\"%s\" is invalid: expected the decimal number "
			 "of one of this machine's CPUs, 0 to %ld",
			 q, ncpu - 1);
		return;
	}
	cfg->progress_cpu = (int)cpu;
}

/* Contract: SOFTVERBS_MTU into cfg->mtu (0 = chosen by address). */
static void cfg_load_mtu(struct sw_config *cfg)
{
	static const struct cfg_word words[] = {
		{"256", IBV_MTU_256},	{"512", IBV_MTU_512},	{"1024", IBV_MTU_1024},
		{"2048", IBV_MTU_2048}, {"4096", IBV_MTU_4096},
	};

	cfg->mtu = (enum ibv_mtu)cfg_load_word(cfg, "SOFTVERBS_MTU", words, SV_ARRAY_SIZE(words), 0,
					       "256, 512, 1024, 2048 or 4096");
}

/* Contract: a 0|1 variable `name` into *out (`dflt` when unset). */
static void cfg_load_bool(struct sw_config *cfg, const char *name, bool *out, bool dflt)
{
	static const struct cfg_word words[] = {{"0", 0}, {"1", 1}};

	*out = cfg_load_word(cfg, name, words, SV_ARRAY_SIZE(words), dflt, "0 or 1") != 0;
}

/*
 * Contract: parse one "key=value" of SOFTVERBS_FAULT into `f`; false if
 * the key is unknown or the value malformed.
 */
static bool cfg_fault_item(char *item, struct sw_fault *f)
{
	char *eq = strchr(item, '='), *end;
	double v;

	if (!eq || eq == item || !eq[1])
		return false;
	*eq++ = '\0';
	if (!strcmp(item, "side")) {
		f->on_tx = !strcmp(eq, "tx") || !strcmp(eq, "both");
		f->on_rx = !strcmp(eq, "rx") || !strcmp(eq, "both");
		return f->on_tx || f->on_rx;
	}
	if (!strcmp(item, "seed")) {
		f->seed = strtoull(eq, &end, 0);
		return !*end && isdigit((unsigned char)eq[0]);
	}
	v = strtod(eq, &end);
	if (*end || !(v >= 0 && v <= 1))
		return false;
	if (!strcmp(item, "drop"))
		f->drop_ppm = (uint32_t)(v * 1e6);
	else if (!strcmp(item, "dup"))
		f->dup_ppm = (uint32_t)(v * 1e6);
	else if (!strcmp(item, "reorder"))
		f->reorder_ppm = (uint32_t)(v * 1e6);
	else if (!strcmp(item, "again"))
		f->again_ppm = (uint32_t)(v * 1e6);
	else
		return false;
	return true;
}

/*
 * Contract: SOFTVERBS_FAULT into cfg->fault (default: no faults). The
 * value is comma-separated key=value: drop, dup and reorder take a
 * fraction 0..1 of packets, again a fraction of sends refused as if the
 * socket were full (send side only); side is tx (default), rx or both;
 * seed an integer for the pseudo-random sequence.
 */
static void cfg_load_fault(struct sw_config *cfg)
{
	const char *v = getenv("SOFTVERBS_FAULT");
	struct sw_fault *f = &cfg->fault;
	char buf[256], q[52], *item, *save = NULL;
	bool ok = true;

	memset(f, 0, sizeof(*f));
	f->on_tx = true;
	f->seed = 0x9E3779B97F4A7C15ULL;
	if (!v)
		goto none;
	if (strlen(v) >= sizeof(buf))
		ok = false;
	else {
		strcpy(buf, v);
		for (item = strtok_r(buf, ",", &save); item && ok;
		     item = strtok_r(NULL, ",", &save))
			ok = cfg_fault_item(item, f);
	}
	if (!ok || !v[0]) {
		cfg_quote(q, sizeof(q), v);
		cfg_fail(cfg,
			 "SOFTVERBS_FAULT=\"%s\" is invalid: expected drop=F,dup=F,reorder=F,"
			 "again=F (F from 0 to 1), side=tx|rx|both, seed=N",
			 q);
	}
	if (f->drop_ppm || f->dup_ppm || f->reorder_ppm || f->again_ppm)
		return;
none:
	f->on_tx = f->on_rx = false;
}

/* Contract: SOFTVERBS_CC_HEAP into cfg->cc_heap (default auto). */
static void cfg_load_heap(struct sw_config *cfg)
{
	static const struct cfg_word words[] = {
		{"auto", SW_CC_HEAP_AUTO},
		{"kernel", SW_CC_HEAP_KERNEL},
		{"builtin", SW_CC_HEAP_BUILTIN},
	};

	cfg->cc_heap = (enum sw_cc_heap)cfg_load_word(cfg, "SOFTVERBS_CC_HEAP", words,
						      SV_ARRAY_SIZE(words), SW_CC_HEAP_AUTO,
						      "auto, kernel or builtin");
}

/* Contract: SOFTVERBS_LINK_LAYER into cfg->link_layer (default eth). */
static void cfg_load_link_layer(struct sw_config *cfg)
{
	static const struct cfg_word words[] = {
		{"eth", IBV_LINK_LAYER_ETHERNET},
		{"ib", IBV_LINK_LAYER_INFINIBAND},
	};

	cfg->link_layer =
		(uint8_t)cfg_load_word(cfg, "SOFTVERBS_LINK_LAYER", words, SV_ARRAY_SIZE(words),
				       IBV_LINK_LAYER_ETHERNET, "eth or ib");
}

/* Contract: see sw/ctrl.h. Unset variables give the defaults. */
void sw_config_load(struct sw_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg_load_name(cfg);
	cfg_load_addr(cfg);
	cfg_load_gid_table(cfg);
	cfg_load_udp_port(cfg);
	cfg_load_mtu(cfg);
	cfg_load_bool(cfg, "SOFTVERBS_CC_DMA_BOUNCE", &cfg->cc_dma_bounce, false);
	cfg_load_heap(cfg);
	cfg_load_bool(cfg, "SOFTVERBS_BUSY_POLL", &cfg->busy_poll, false);
	cfg_load_spin_us(cfg);
	cfg_load_progress_cpu(cfg);
	cfg_load_bool(cfg, "SOFTVERBS_STATS", &cfg->stats, false);
	cfg_load_bool(cfg, "SOFTVERBS_SHM", &cfg->shm, true);
	cfg_load_bool(cfg, "SOFTVERBS_SINGLE_COPY", &cfg->single_copy, true);
	cfg_load_bool(cfg, "SOFTVERBS_GSO", &cfg->gso, true);
	cfg_load_bool(cfg, "SOFTVERBS_APP_PROGRESS", &cfg->app_progress, true);
	cfg_load_link_layer(cfg);
	cfg_load_fault(cfg);
}

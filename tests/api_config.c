/* SPDX-License-Identifier: MIT */
/*
 * api_config: the SOFTVERBS_* environment variables.
 *
 * A malformed value of any variable keeps the device listed (under the
 * default name if the name was the bad value) but makes ibv_open_device
 * fail with EINVAL, after one "softverbs: ..." line on stderr naming the
 * variable and the value. Well-formed values take effect: device name,
 * address, UDP port, MTU, the CC DMA bounce capability and the progress
 * thread's CPU.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const vars[] = {
	"SOFTVERBS_DEV_NAME",	  "SOFTVERBS_ADDR",	     "SOFTVERBS_UDP_PORT",
	"SOFTVERBS_MTU",	  "SOFTVERBS_CC_DMA_BOUNCE", "SOFTVERBS_CC_HEAP",
	"SOFTVERBS_BUSY_POLL",	  "SOFTVERBS_STATS",	     "SOFTVERBS_FAULT",
	"SOFTVERBS_PROGRESS_CPU", "SOFTVERBS_SHM",	     "SOFTVERBS_GID_TABLE",
	"SOFTVERBS_LINK_LAYER",	  "SOFTVERBS_SPIN_US",
};

static void clear_env(void)
{
	size_t i;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

/*
 * Lists the device and opens it with `name`=`value` set. Returns the
 * context or NULL (errno kept); *listed_name gets the device name ("" if
 * none was listed).
 */
static struct ibv_context *open_with(const char *name, const char *value, char *listed_name,
				     size_t size)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int n = 0, e;

	listed_name[0] = '\0';
	if (name)
		setenv(name, value, 1);
	list = ibv_get_device_list(&n);
	if (!list || n != 1) {
		e = errno;
		ibv_free_device_list(list);
		errno = e ? e : ENODEV;
		return NULL;
	}
	snprintf(listed_name, size, "%s", ibv_get_device_name(list[0]));
	errno = 0;
	ctx = ibv_open_device(list[0]);
	e = errno;
	ibv_free_device_list(list);
	errno = e;
	return ctx;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void check_bad(const char *name, const char *value)
{
	struct ibv_context *ctx, *again;
	char listed[64], text[1024];
	struct t_capture cap;
	int e;

	if (!CHECK(t_capture_begin(&cap) == 0))
		return;
	ctx = open_with(name, value, listed, sizeof(listed));
	e = errno;
	again = open_with(NULL, NULL, listed, sizeof(listed)); /* same config, repeat */
	t_capture_end(&cap, text, sizeof(text));
	unsetenv(name);

	CHECK_MSG(listed[0] != '\0', "%s=\"%s\": the device is no longer listed", name, value);
	CHECK_MSG(!ctx && e == EINVAL, "%s=\"%s\": open gave %s/%s, want NULL/EINVAL", name, value,
		  ctx ? "a context" : "NULL", t_errname(e));
	CHECK_MSG(!again, "%s=\"%s\": the second open succeeded", name, value);
	if (!strcmp(name, "SOFTVERBS_DEV_NAME"))
		CHECK_MSG(!strcmp(listed, "softverbs0"), "listed as \"%s\" with a bad name",
			  listed);
	CHECK_MSG(!strncmp(text, "softverbs: ", 11) && strstr(text, name),
		  "%s=\"%s\": stderr was \"%s\"", name, value, text);
	if (value[0] && strlen(value) < 40)
		CHECK_MSG(strstr(text, value) != NULL, "message does not quote \"%s\": %s", value,
			  text);
	CHECK_MSG(count_lines(text) == 1, "%s=\"%s\": %d lines on stderr, want 1", name, value,
		  count_lines(text));
	if (ctx)
		ibv_close_device(ctx);
	if (again)
		ibv_close_device(again);
}

static void case_malformed(void)
{
	static const char *const bad[][2] = {
		{"SOFTVERBS_DEV_NAME", ""},
		{"SOFTVERBS_DEV_NAME", "has space"},
		{"SOFTVERBS_DEV_NAME", "dot.name"},
		{"SOFTVERBS_DEV_NAME", "slash/name"},
		{"SOFTVERBS_DEV_NAME",
		 "a123456789b123456789c123456789d123456789e123456789f123456789abcd"}, /* 64 */
		{"SOFTVERBS_ADDR", ""},
		{"SOFTVERBS_ADDR", "localhost"},
		{"SOFTVERBS_ADDR", "127.1"},
		{"SOFTVERBS_ADDR", "127.0.0.256"},
		{"SOFTVERBS_ADDR", "1.2.3.4.5"},
		{"SOFTVERBS_ADDR", "0.0.0.0"},
		{"SOFTVERBS_ADDR", "255.255.255.255"},
		{"SOFTVERBS_ADDR", "224.0.0.1"},
		{"SOFTVERBS_ADDR", "239.255.255.250"},
		{"SOFTVERBS_ADDR", "::"},
		{"SOFTVERBS_ADDR", "ff02::1"},
		{"SOFTVERBS_ADDR", "fe80::1"}, /* link-local needs its interface */
		{"SOFTVERBS_ADDR", "fe80::1%nosuchif0"},
		{"SOFTVERBS_ADDR", "1::2::3"},
		{"SOFTVERBS_ADDR", "::ffff:224.0.0.1"},
		{"SOFTVERBS_ADDR", "::1%"},
		{"SOFTVERBS_GID_TABLE", ""},
		{"SOFTVERBS_GID_TABLE", "mlx4"},
		{"SOFTVERBS_GID_TABLE", "RXE"},
		{"SOFTVERBS_UDP_PORT", ""},
		{"SOFTVERBS_UDP_PORT", "0"},
		{"SOFTVERBS_UDP_PORT", "65536"},
		{"SOFTVERBS_UDP_PORT", "-1"},
		{"SOFTVERBS_UDP_PORT", "+80"},
		{"SOFTVERBS_UDP_PORT", " 80"},
		{"SOFTVERBS_UDP_PORT", "80x"},
		{"SOFTVERBS_UDP_PORT", "99999999999999999999999"},
		{"SOFTVERBS_MTU", ""},
		{"SOFTVERBS_MTU", "1500"},
		{"SOFTVERBS_MTU", "4096 "},
		{"SOFTVERBS_MTU", "128"},
		{"SOFTVERBS_MTU", "8192"},
		{"SOFTVERBS_CC_DMA_BOUNCE", ""},
		{"SOFTVERBS_CC_DMA_BOUNCE", "2"},
		{"SOFTVERBS_CC_DMA_BOUNCE", "yes"},
		{"SOFTVERBS_CC_DMA_BOUNCE", "01"},
		{"SOFTVERBS_CC_HEAP", ""},
		{"SOFTVERBS_CC_HEAP", "Kernel"},
		{"SOFTVERBS_CC_HEAP", "none"},
		{"SOFTVERBS_BUSY_POLL", "2"},
		{"SOFTVERBS_BUSY_POLL", ""},
		{"SOFTVERBS_STATS", "yes"},
		{"SOFTVERBS_SHM", "2"},
		{"SOFTVERBS_SHM", "off"},
		{"SOFTVERBS_LINK_LAYER", ""},
		{"SOFTVERBS_LINK_LAYER", "IB"},
		{"SOFTVERBS_LINK_LAYER", "infiniband"},
		{"SOFTVERBS_LINK_LAYER", "ethernet"},
		{"SOFTVERBS_LINK_LAYER", "ib "},
		{"SOFTVERBS_SPIN_US", ""},
		{"SOFTVERBS_SPIN_US", "-1"},
		{"SOFTVERBS_SPIN_US", "1000001"},
		{"SOFTVERBS_SPIN_US", "200us"},
		{"SOFTVERBS_PROGRESS_CPU", ""},
		{"SOFTVERBS_PROGRESS_CPU", "-1"},
		{"SOFTVERBS_PROGRESS_CPU", "cpu0"},
		{"SOFTVERBS_PROGRESS_CPU", "99999"},
		{"SOFTVERBS_PROGRESS_CPU", "1023"},
		{"SOFTVERBS_FAULT", ""},
		{"SOFTVERBS_FAULT", "drop"},
		{"SOFTVERBS_FAULT", "drop=2"},
		{"SOFTVERBS_FAULT", "drop=-0.1"},
		{"SOFTVERBS_FAULT", "loss=0.1"},
		{"SOFTVERBS_FAULT", "drop=0.1,side=up"},
		{"SOFTVERBS_FAULT", "drop=0.1,seed=x"},
		{"SOFTVERBS_FAULT", "again=1.5"},
	};
	size_t i;

	t_case("malformed values: listed, open fails with EINVAL");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		check_bad(bad[i][0], bad[i][1]);
}

static void case_message_once(void)
{
	char listed[64], text[1024];
	struct ibv_context *ctx;
	struct t_capture cap;
	int i;

	t_case("the message is printed once");
	if (!CHECK(t_capture_begin(&cap) == 0))
		return;
	setenv("SOFTVERBS_MTU", "9000", 1);
	for (i = 0; i < 5; i++) {
		ctx = open_with(NULL, NULL, listed, sizeof(listed));
		CHECK(!ctx && errno == EINVAL);
		if (ctx)
			ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_MTU");
	t_capture_end(&cap, text, sizeof(text));
	CHECK_MSG(count_lines(text) == 1, "%d lines: %s", count_lines(text), text);
	/* once the configuration is fixed, the device opens again */
	ctx = open_with(NULL, NULL, listed, sizeof(listed));
	CHECK(ctx != NULL);
	if (ctx)
		ibv_close_device(ctx);
}

/* A UDP port that is free on addr right now (the kernel picks it). */
static int free_udp_port(const char *addr)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM, 0), port = -1;

	inet_pton(AF_INET, addr, &sin.sin_addr);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
	    !getsockname(fd, (struct sockaddr *)&sin, &len))
		port = ntohs(sin.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Binding addr:port ourselves fails with EADDRINUSE iff someone holds it. */
static int udp_in_use(const char *addr, int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_DGRAM, 0), busy;

	inet_pton(AF_INET, addr, &sin.sin_addr);
	busy = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) && errno == EADDRINUSE;
	close(fd);
	return busy;
}

/* An IPv6 address: the GID is the address itself, RoCE v2, and the socket holds it. */
static void case_addr6(void)
{
	struct sockaddr_in6 probe = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct ibv_gid_entry ent;
	struct ibv_context *ctx;
	union ibv_gid gid;
	char listed[64];
	int fd = socket(AF_INET6, SOCK_DGRAM, 0);
	bool have6 = fd >= 0 && !bind(fd, (struct sockaddr *)&probe, sizeof(probe));

	if (fd >= 0)
		close(fd);
	if (!have6) {
		printf("# SKIP the IPv6 address: this host cannot bind ::1 (%s)\n",
		       t_errname(errno));
		return;
	}
	ctx = open_with("SOFTVERBS_ADDR", "::1", listed, sizeof(listed));
	if (CHECK_MSG(ctx != NULL, "SOFTVERBS_ADDR=::1: %s", t_errname(errno))) {
		static const uint8_t lo6[16] = {[15] = 1};

		if (CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0))
			CHECK(!memcmp(gid.raw, lo6, 16));
		if (CHECK_RET(ibv_query_gid_ex(ctx, 1, 0, &ent, 0), 0))
			CHECK(ent.gid_type == IBV_GID_TYPE_ROCE_V2 &&
			      !memcmp(ent.gid.raw, lo6, 16));
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_ADDR");
}

/*
 * SOFTVERBS_GID_TABLE: the address in slot 0 (single), 1 (rxe) or 3
 * (mlx5); on lo there is no link-local address, so the other slots are
 * empty: the zero GID, ENODATA, and not in ibv_query_gid_table().
 */
static void case_gid_tables(void)
{
	static const struct {
		const char *layout;
		int slot, len;
	} t[] = {{"single", 0, 1}, {"rxe", 1, 16}, {"mlx5", 3, 16}};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ibv_gid_entry ent, all[4];
		struct ibv_context *ctx;
		struct ibv_port_attr p;
		union ibv_gid gid;
		char listed[64];

		setenv("SOFTVERBS_ADDR", "127.0.0.78", 1);
		ctx = open_with("SOFTVERBS_GID_TABLE", t[i].layout, listed, sizeof(listed));
		if (!CHECK_MSG(ctx != NULL, "SOFTVERBS_GID_TABLE=%s: %s", t[i].layout,
			       t_errname(errno)))
			continue;
		if (CHECK(ibv_query_port(ctx, 1, &p) == 0))
			CHECK_EQ_INT(p.gid_tbl_len, t[i].len);
		for (int k = 0; k < t[i].len; k++) {
			int r = ibv_query_gid_ex(ctx, 1, (uint32_t)k, &ent, 0);

			CHECK(ibv_query_gid(ctx, 1, k, &gid) == 0);
			if (k == t[i].slot)
				CHECK_MSG(r == 0 && gid.raw[11] == 0xff && gid.raw[15] == 78 &&
						  ent.gid_index == (uint32_t)k,
					  "%s slot %d: %s", t[i].layout, k, t_errname(r));
			else
				CHECK_MSG(r == ENODATA && gid.raw[11] == 0 && gid.raw[15] == 0,
					  "%s empty slot %d: %s", t[i].layout, k, t_errname(r));
		}
		CHECK_RET(ibv_query_gid_ex(ctx, 1, (uint32_t)t[i].len, &ent, 0), EINVAL);
		if (CHECK_EQ_INT(ibv_query_gid_table(ctx, all, 4, 0), 1))
			CHECK_EQ_INT(all[0].gid_index, t[i].slot);
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_ADDR");
	unsetenv("SOFTVERBS_GID_TABLE");
}

static void case_good(void)
{
	struct ibv_device_attr_ex ex;
	struct ibv_port_attr p;
	struct ibv_context *ctx;
	union ibv_gid gid;
	char listed[64], portstr[16];
	static const struct {
		const char *text;
		enum ibv_mtu mtu;
	} mtus[] = {
		{"256", IBV_MTU_256},	{"512", IBV_MTU_512},	{"1024", IBV_MTU_1024},
		{"2048", IBV_MTU_2048}, {"4096", IBV_MTU_4096},
	};
	static const char *const heaps[] = {"auto", "kernel", "builtin"};
	size_t i;
	int port;

	t_case("well-formed values take effect");
	/* device name: 1..63 of [A-Za-z0-9_-] */
	ctx = open_with("SOFTVERBS_DEV_NAME", "My_dev-63", listed, sizeof(listed));
	CHECK(!strcmp(listed, "My_dev-63"));
	if (CHECK(ctx != NULL)) {
		CHECK(!strcmp(ibv_get_device_name(ctx->device), "My_dev-63"));
		ibv_close_device(ctx);
	}
	ctx = open_with("SOFTVERBS_DEV_NAME",
			"a123456789b123456789c123456789d123456789e123456789f123456789abc", listed,
			sizeof(listed));
	CHECK(ctx != NULL && strlen(listed) == 63);
	if (ctx)
		ibv_close_device(ctx);
	unsetenv("SOFTVERBS_DEV_NAME");

	/* MTU */
	for (i = 0; i < sizeof(mtus) / sizeof(mtus[0]); i++) {
		ctx = open_with("SOFTVERBS_MTU", mtus[i].text, listed, sizeof(listed));
		if (CHECK_MSG(ctx != NULL, "SOFTVERBS_MTU=%s: %s", mtus[i].text,
			      t_errname(errno))) {
			if (CHECK(ibv_query_port(ctx, 1, &p) == 0))
				CHECK_EQ_INT(p.active_mtu, mtus[i].mtu);
			ibv_close_device(ctx);
		}
	}
	unsetenv("SOFTVERBS_MTU");

	/* address and UDP port: the GID follows, and the socket holds the pair */
	port = free_udp_port("127.0.0.77");
	if (CHECK(port > 0)) {
		snprintf(portstr, sizeof(portstr), "%d", port);
		setenv("SOFTVERBS_UDP_PORT", portstr, 1);
		ctx = open_with("SOFTVERBS_ADDR", "127.0.0.77", listed, sizeof(listed));
		if (CHECK_MSG(ctx != NULL, "open: %s", t_errname(errno))) {
			if (CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0)) {
				CHECK(gid.raw[10] == 0xff && gid.raw[11] == 0xff);
				CHECK(gid.raw[12] == 127 && gid.raw[13] == 0 && gid.raw[14] == 0 &&
				      gid.raw[15] == 77);
			}
			CHECK(udp_in_use("127.0.0.77", port));
			ibv_close_device(ctx);
			CHECK(!udp_in_use("127.0.0.77", port));
		}
		unsetenv("SOFTVERBS_ADDR");
		unsetenv("SOFTVERBS_UDP_PORT");
	}

	case_addr6();
	case_gid_tables();

	/* CC DMA bounce: reported in device_cap_flags_ex only when set */
	ctx = open_with("SOFTVERBS_CC_DMA_BOUNCE", "1", listed, sizeof(listed));
	if (CHECK(ctx != NULL)) {
		if (CHECK_RET(ibv_query_device_ex(ctx, NULL, &ex), 0))
			CHECK(ex.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE);
		ibv_close_device(ctx);
	}
	ctx = open_with("SOFTVERBS_CC_DMA_BOUNCE", "0", listed, sizeof(listed));
	if (CHECK(ctx != NULL)) {
		if (CHECK_RET(ibv_query_device_ex(ctx, NULL, &ex), 0))
			CHECK(!(ex.device_cap_flags_ex & IBV_DEVICE_CC_DMA_BOUNCE));
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_CC_DMA_BOUNCE");

	for (i = 0; i < sizeof(heaps) / sizeof(heaps[0]); i++) {
		ctx = open_with("SOFTVERBS_CC_HEAP", heaps[i], listed, sizeof(listed));
		CHECK_MSG(ctx != NULL, "SOFTVERBS_CC_HEAP=%s: %s", heaps[i], t_errname(errno));
		if (ctx)
			ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_CC_HEAP");

	/* the link layer: eth (RoCE, LID 0) or ib (a LID) */
	ctx = open_with("SOFTVERBS_LINK_LAYER", "ib", listed, sizeof(listed));
	if (CHECK(ctx != NULL)) {
		if (CHECK(ibv_query_port(ctx, 1, &p) == 0)) {
			CHECK_EQ_INT(p.link_layer, IBV_LINK_LAYER_INFINIBAND);
			CHECK(p.lid >= 1 && p.lid <= 0x8000);
		}
		ibv_close_device(ctx);
	}
	ctx = open_with("SOFTVERBS_LINK_LAYER", "eth", listed, sizeof(listed));
	if (CHECK(ctx != NULL)) {
		if (CHECK(ibv_query_port(ctx, 1, &p) == 0)) {
			CHECK_EQ_INT(p.link_layer, IBV_LINK_LAYER_ETHERNET);
			CHECK_EQ_INT(p.lid, 0);
		}
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_LINK_LAYER");
}

static void case_transport_settings(void)
{
	static const char *const good_fault[] = {"drop=0.01", "dup=0.5,reorder=0.001,side=both",
						 "drop=0,side=rx,seed=42", "drop=1", "again=0.2"};
	struct ibv_context *ctx;
	char listed[64], text[1024];
	struct t_capture cap;

	t_case("SOFTVERBS_BUSY_POLL, SOFTVERBS_FAULT and SOFTVERBS_STATS take effect");
	for (size_t i = 0; i < sizeof(good_fault) / sizeof(good_fault[0]); i++) {
		ctx = open_with("SOFTVERBS_FAULT", good_fault[i], listed, sizeof(listed));
		CHECK_MSG(ctx, "SOFTVERBS_FAULT=%s: open failed: %s", good_fault[i],
			  t_errname(errno));
		if (ctx)
			ibv_close_device(ctx);
		unsetenv("SOFTVERBS_FAULT");
	}
	ctx = open_with("SOFTVERBS_BUSY_POLL", "1", listed, sizeof(listed));
	CHECK(ctx);
	if (ctx)
		ibv_close_device(ctx);
	unsetenv("SOFTVERBS_BUSY_POLL");
	/* counters are printed when the last context of the device closes */
	if (!CHECK(t_capture_begin(&cap) == 0))
		return;
	ctx = open_with("SOFTVERBS_STATS", "1", listed, sizeof(listed));
	if (ctx)
		ibv_close_device(ctx);
	t_capture_end(&cap, text, sizeof(text));
	unsetenv("SOFTVERBS_STATS");
	CHECK(ctx);
	CHECK_MSG(strstr(text, "softverbs: softverbs0") && strstr(text, "retransmits"),
		  "no counters on stderr: \"%s\"", text);
}

/* The affinity list of this process's thread named `comm`, or "" if none. */
static void thread_cpus(const char *comm, char *out, size_t size)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	out[0] = '\0';
	while (d && (de = readdir(d))) {
		char path[300], line[256];
		FILE *f;
		bool match = false;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
		f = fopen(path, "r");
		if (f && fgets(line, sizeof(line), f))
			match = !strncmp(line, comm, strlen(comm)) && line[strlen(comm)] == '\n';
		if (f)
			fclose(f);
		if (!match)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "Cpus_allowed_list:", 18)) {
				snprintf(out, size, "%s", line + 18 + strspn(line + 18, " \t"));
				out[strcspn(out, "\n")] = '\0';
			}
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
}

static void case_progress_cpu(void)
{
	char listed[64], want[16], got[256];
	struct ibv_context *ctx;
	cpu_set_t set;
	int cpu = -1;

	t_case("SOFTVERBS_PROGRESS_CPU pins the progress thread (sv-progress)");
	if (!CHECK(sched_getaffinity(0, sizeof(set), &set) == 0))
		return;
	for (int i = CPU_SETSIZE - 1; i >= 0 && cpu < 0; i--)
		if (CPU_ISSET(i, &set))
			cpu = i; /* the last allowed CPU: not what an unpinned thread shows */
	snprintf(want, sizeof(want), "%d", cpu);
	ctx = open_with("SOFTVERBS_PROGRESS_CPU", want, listed, sizeof(listed));
	if (CHECK(ctx)) {
		thread_cpus("sv-progress", got, sizeof(got));
		CHECK_MSG(!strcmp(got, want), "sv-progress runs on \"%s\", want \"%s\"", got, want);
		ibv_close_device(ctx);
	}
	unsetenv("SOFTVERBS_PROGRESS_CPU");
	/* unpinned: the thread may run wherever the process may */
	ctx = open_with(NULL, NULL, listed, sizeof(listed));
	if (CHECK(ctx)) {
		thread_cpus("sv-progress", got, sizeof(got));
		CHECK_MSG(got[0] && (CPU_COUNT(&set) == 1 || strcmp(got, want)),
			  "unpinned sv-progress runs on \"%s\"", got);
		ibv_close_device(ctx);
	}
}

static void case_defaults(void)
{
	struct ibv_port_attr p;
	struct ibv_context *ctx;
	char listed[64];

	t_case("defaults");
	clear_env();
	ctx = open_with(NULL, NULL, listed, sizeof(listed));
	CHECK(!strcmp(listed, "softverbs0"));
	if (!CHECK(ctx != NULL))
		return;
	/* a loopback address: MTU 4096; RoCE: Ethernet link layer, LID 0 */
	if (CHECK(ibv_query_port(ctx, 1, &p) == 0)) {
		CHECK_EQ_INT(p.active_mtu, IBV_MTU_4096);
		CHECK_EQ_INT(p.link_layer, IBV_LINK_LAYER_ETHERNET);
		CHECK_EQ_INT(p.lid, 0);
	}
	ibv_close_device(ctx);
}

int main(void)
{
	clear_env();
	t_start("api_config");
	case_defaults();
	case_malformed();
	case_transport_settings();
	case_progress_cpu();
	case_message_once();
	case_good();
	return t_finish();
}

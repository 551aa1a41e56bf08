/* SPDX-License-Identifier: MIT */
/*
 * api_devinfo: runs the sv_devinfo tool (built next to the tests, in
 * ../tools/) and checks its output and exit status: the default report,
 * -v, -l, -d, -h, a bad option, a missing device and a device that fails
 * to open. Skipped when the tool has not been built.
 */
#include "harness.h"

#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

static char tool[PATH_MAX];

struct run {
	int status; /* exit status, or 128 + signal */
	char out[65536];
	char err[4096];
};

/* Reads all of `f` (from its start) into buf. */
static void slurp(FILE *f, char *buf, size_t size)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
}

/*
 * Runs the tool with argv[1..] = args and NAME=VALUE pairs from env
 * (NULL-terminated, may be NULL). Returns 0 if it could be run.
 */
static int run_tool(struct run *r, const char *const *args, const char *const *env)
{
	const char *argv[16] = {tool};
	FILE *out = tmpfile(), *err = tmpfile();
	int i, st;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->status = -1;
	for (i = 0; args && args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	if (!out || !err)
		goto fail;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0) {
		for (i = 0; env && env[i]; i++)
			putenv((char *)(uintptr_t)env[i]);
		if (dup2(fileno(out), 1) < 0 || dup2(fileno(err), 2) < 0)
			_exit(126);
		execv(tool, (char *const *)(uintptr_t)argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		goto fail;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	slurp(out, r->out, sizeof(r->out));
	slurp(err, r->err, sizeof(r->err));
	fclose(out);
	fclose(err);
	return 0;
fail:
	if (out)
		fclose(out);
	if (err)
		fclose(err);
	return -1;
}

/* Number of lines of s that start with `prefix` after leading blanks. */
static int count_lines(const char *s, const char *prefix)
{
	size_t len = strlen(prefix);
	int n = 0;

	while (*s) {
		const char *p = s;

		while (*p == ' ')
			p++;
		n += !strncmp(p, prefix, len);
		s = strchr(s, '\n');
		if (!s)
			break;
		s++;
	}
	return n;
}

/* The value of the first line "label   value" (leading blanks allowed). */
static const char *value_of(const char *s, const char *label, char *buf, size_t size)
{
	size_t len = strlen(label);

	while (*s) {
		const char *p = s, *end;

		while (*p == ' ')
			p++;
		if (!strncmp(p, label, len) && p[len] == ' ') {
			p += len;
			while (*p == ' ')
				p++;
			end = strchr(p, '\n');
			if (!end)
				end = p + strlen(p);
			snprintf(buf, size, "%.*s", (int)(end - p), p);
			return buf;
		}
		s = strchr(s, '\n');
		if (!s)
			break;
		s++;
	}
	buf[0] = '\0';
	return buf;
}

/* A dump of what the tool said when a check on it failed. */
static void show(const struct run *r)
{
	printf("# exit %d\n# stdout:\n%s# stderr:\n%s", r->status, r->out, r->err);
}

static struct run r;

static void case_default(void)
{
	const char *const none[] = {NULL};
	char v[256];
	int ok = 1;

	if (!CHECK(run_tool(&r, none, NULL) == 0))
		return;
	ok &= CHECK_EQ_INT(r.status, 0);
	ok &= CHECK_MSG(r.err[0] == '\0', "unexpected stderr");
	ok &= CHECK_MSG(!strncmp(r.out, "softverbs0\n", 11), "first line is not the device name");
	ok &= CHECK_EQ_INT(count_lines(r.out, "port 1"), 1);
	ok &= CHECK(!strcmp(value_of(r.out, "transport", v, sizeof(v)), "InfiniBand (0)"));
	ok &= CHECK(!strcmp(value_of(r.out, "node_type", v, sizeof(v)),
			    "InfiniBand channel adapter (1)"));
	ok &= CHECK(!strcmp(value_of(r.out, "state", v, sizeof(v)), "PORT_ACTIVE (4)"));
	ok &= CHECK(!strcmp(value_of(r.out, "link_layer", v, sizeof(v)), "Ethernet"));
	ok &= CHECK(!strcmp(value_of(r.out, "gid_tbl_len", v, sizeof(v)), "1"));
	ok &= CHECK(strlen(value_of(r.out, "node_guid", v, sizeof(v))) == 19);
	ok &= CHECK(value_of(r.out, "fw_ver", v, sizeof(v))[0] != '\0');
	/* a RoCE v2 GID, IPv4-mapped, shown with its address */
	value_of(r.out, "gid[0]", v, sizeof(v));
	ok &= CHECK_MSG(!strncmp(v, "0000:0000:0000:0000:0000:ffff:", 30), "gid[0]: %s", v);
	ok &= CHECK_MSG(strstr(v, "  RoCE v2  ipv4 ") != NULL, "gid[0]: %s", v);
	ok &= CHECK(!strcmp(value_of(r.out, "pkey[0]", v, sizeof(v)), "0xffff"));
	ok &= CHECK_EQ_INT(count_lines(r.out, "pkey["), 1);
	/* the device limits are for -v only */
	ok &= CHECK_EQ_INT(count_lines(r.out, "max_qp "), 0);
	if (!ok)
		show(&r);
}

static void case_mtu(void)
{
	const char *const env[] = {"SOFTVERBS_MTU=1024", NULL};
	const char *const none[] = {NULL};
	char v[256];

	if (!CHECK(run_tool(&r, none, env) == 0))
		return;
	CHECK_EQ_INT(r.status, 0);
	if (!CHECK(!strcmp(value_of(r.out, "active_mtu", v, sizeof(v)), "1024 (3)")))
		show(&r);
}

static void case_verbose(void)
{
	const char *const env[] = {"SOFTVERBS_CC_DMA_BOUNCE=1", NULL};
	const char *const args[] = {"-v", NULL};
	char v[256];
	int ok = 1;

	if (!CHECK(run_tool(&r, args, env) == 0))
		return;
	ok &= CHECK_EQ_INT(r.status, 0);
	ok &= CHECK_MSG(r.err[0] == '\0', "unexpected stderr");
	ok &= CHECK(atoi(value_of(r.out, "max_qp", v, sizeof(v))) > 0);
	ok &= CHECK(atoi(value_of(r.out, "max_qp_wr", v, sizeof(v))) > 0);
	ok &= CHECK(atoi(value_of(r.out, "max_sge", v, sizeof(v))) > 0);
	ok &= CHECK(atoi(value_of(r.out, "max_cqe", v, sizeof(v))) > 0);
	ok &= CHECK(atoi(value_of(r.out, "max_pd", v, sizeof(v))) > 0);
	ok &= CHECK(atoi(value_of(r.out, "max_srq", v, sizeof(v))) > 0);
	ok &= CHECK(value_of(r.out, "max_mr_size", v, sizeof(v))[0] != '\0');
	ok &= CHECK(value_of(r.out, "atomic_cap", v, sizeof(v))[0] != '\0');
	/* bit 41, wrapped or not, is named; so are 38-40 (FLUSH_GLOBAL, _PERSISTENT, ATOMIC_WRITE)
	 */
	ok &= CHECK(
		!strncmp(value_of(r.out, "device_cap_flags_ex", v, sizeof(v)), "0x000003c0", 10));
	ok &= CHECK(strstr(r.out, " FLUSH_PERSISTENT") != NULL && strstr(r.out, " ATOMIC_WRITE"));
	ok &= CHECK(strstr(r.out, " CC_DMA_BOUNCE") != NULL);
	ok &= CHECK(strstr(r.out, "bit41") == NULL);
	ok &= CHECK(value_of(r.out, "phys_state", v, sizeof(v))[0] != '\0');
	if (!ok)
		show(&r);

	/* without the setting the bit is clear */
	if (!CHECK(run_tool(&r, args, NULL) == 0))
		return;
	CHECK_EQ_INT(r.status, 0);
	if (!CHECK(strstr(r.out, "CC_DMA_BOUNCE") == NULL))
		show(&r);
}

static void case_list_and_select(void)
{
	const char *const env[] = {"SOFTVERBS_DEV_NAME=svtest7", NULL};
	const char *const l[] = {"-l", NULL};
	const char *const d[] = {"-d", "svtest7", NULL};
	const char *const bad[] = {"-d", "no-such-device", NULL};

	if (!CHECK(run_tool(&r, l, env) == 0))
		return;
	CHECK_EQ_INT(r.status, 0);
	if (!CHECK(!strcmp(r.out, "svtest7\n")))
		show(&r);

	if (!CHECK(run_tool(&r, d, env) == 0))
		return;
	CHECK_EQ_INT(r.status, 0);
	if (!CHECK(!strncmp(r.out, "svtest7\n", 8) && count_lines(r.out, "port 1") == 1))
		show(&r);

	if (!CHECK(run_tool(&r, bad, env) == 0))
		return;
	CHECK_EQ_INT(r.status, 1);
	CHECK_EQ_INT(r.out[0], '\0');
	if (!CHECK(strstr(r.err, "no-such-device") && strstr(r.err, "svtest7")))
		show(&r);
}

static void case_usage(void)
{
	const char *const h[] = {"-h", NULL};
	const char *const x[] = {"-x", NULL};
	const char *const extra[] = {"stray", NULL};

	if (!CHECK(run_tool(&r, h, NULL) == 0))
		return;
	CHECK_EQ_INT(r.status, 0);
	CHECK(strstr(r.out, "usage:") != NULL);
	CHECK_EQ_INT(r.err[0], '\0');

	if (!CHECK(run_tool(&r, x, NULL) == 0))
		return;
	CHECK_EQ_INT(r.status, 2);
	CHECK(strstr(r.err, "usage:") != NULL);
	CHECK_EQ_INT(r.out[0], '\0');

	if (!CHECK(run_tool(&r, extra, NULL) == 0))
		return;
	CHECK_EQ_INT(r.status, 2);
}

static void case_open_fails(void)
{
	const char *const env[] = {"SOFTVERBS_MTU=bogus", NULL};
	const char *const none[] = {NULL};

	if (!CHECK(run_tool(&r, none, env) == 0))
		return;
	CHECK_EQ_INT(r.status, 1);
	if (!CHECK(strstr(r.err, "ibv_open_device") && strstr(r.err, "errno 22")))
		show(&r);
}

int main(void)
{
	char self[PATH_MAX], *slash;
	ssize_t n;

	t_start("api_devinfo");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		t_skip_all("cannot find this program's directory");
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(tool, sizeof(tool), "%.*s/../tools/sv_devinfo", (int)(sizeof(tool) - 24), self);
	if (access(tool, X_OK))
		t_skip_all("sv_devinfo not built");

	t_case("default report");
	case_default();

	t_case("active MTU in bytes");
	case_mtu();

	t_case("-v shows limits and CC_DMA_BOUNCE");
	case_verbose();

	t_case("-l and -d");
	case_list_and_select();

	t_case("-h and bad command lines");
	case_usage();

	t_case("a device that cannot be opened");
	case_open_fails();

	return t_finish();
}

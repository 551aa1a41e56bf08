/* SPDX-License-Identifier: MIT */
/*
 * args.c - the command line of sv_rc_pingpong (usage in usage() and
 * man/sv_rc_pingpong.1).
 */
#include "pp.h"

/* ------------------------------------------------------------------ */
/* command line                                                       */

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " [options]         (server)\n"
		   "       " PROG " [options] HOST    (client)\n"
		   "An RC ping-pong over the verbs API between a server and a client.\n"
		   "  -p, --port=PORT        TCP port of the exchange (default " DEFAULT_PORT
		   "; a server\n"
		   "                         given 0 takes a free one and prints it)\n"
		   "  -d, --ib-dev=NAME      device to use (default: the first one)\n"
		   "  -i, --ib-port=N        port of the device (default 1)\n"
		   "  -g, --gid-idx=N        local GID index (default 0)\n"
		   "  -s, --size=BYTES       message size (default 4096)\n"
		   "  -n, --iters=N          number of ping-pongs (default 1000)\n"
		   "  -c, --chk              check the data of every message received\n"
		   "  -o, --ops=LIST         also write, read, atomic (comma-separated) or all\n"
		   "                         against the peer's buffer\n"
		   "  -U, --allow-cc-unprotected\n"
		   "                         buffer, CQ and QP on a parent domain with\n"
		   "                         ALLOW_CC_UNPROTECTED_ALLOC (needed on a CC DMA\n"
		   "                         bounce device)\n"
		   "  -E, --export           export the buffer's fd to a helper process that\n"
		   "                         maps it (needs an fd-backed buffer: -U on a bounce\n"
		   "                         device)\n"
		   "  -H, --dmah[=CPU,PH,MEM]\n"
		   "                         register with a DMA handle: CPU id, processing hint\n"
		   "                         0-3 and memory type vm or pm; PH alone gives no\n"
		   "                         steering tag (default: first allowed CPU,0,vm)\n"
		   "  -t, --timeout=SEC      give up on any one wait after SEC s (default 60;\n"
		   "                         0: wait forever)\n"
		   "  -h, --help             this help\n"
		   "Both sides must use the same -s, -n and -o.\n");
}

static int first_allowed_cpu(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			return c;
	return 0;
}

static bool parse_ulong(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* "CPU,PH,MEM" or "PH". */
static bool parse_dmah(struct opts *o, const char *arg)
{
	char tmp[64], *f[3] = {NULL, NULL, NULL}, *save = NULL;
	unsigned long v;
	int n = 0;

	o->dmah = true;
	o->dmah_st = true;
	o->dmah_cpu = (uint32_t)first_allowed_cpu();
	o->dmah_ph = 0;
	o->dmah_mem = IBV_TPH_MEM_TYPE_VM;
	if (!arg)
		return true;
	if (strlen(arg) >= sizeof(tmp))
		return false;
	strcpy(tmp, arg);
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == 3)
			return false;
		f[n++] = t;
	}
	if (n == 1) { /* PH only */
		o->dmah_st = false;
		if (!parse_ulong(f[0], 255, &v))
			return false;
		o->dmah_ph = (uint8_t)v;
		return true;
	}
	if (n != 3 || !parse_ulong(f[0], UINT32_MAX, &v))
		return false;
	o->dmah_cpu = (uint32_t)v;
	if (!parse_ulong(f[1], 255, &v))
		return false;
	o->dmah_ph = (uint8_t)v;
	if (!strcmp(f[2], "vm"))
		o->dmah_mem = IBV_TPH_MEM_TYPE_VM;
	else if (!strcmp(f[2], "pm"))
		o->dmah_mem = IBV_TPH_MEM_TYPE_PM;
	else
		return false;
	return true;
}

static bool parse_ops(struct opts *o, const char *arg)
{
	char tmp[64], *save = NULL;

	if (strlen(arg) >= sizeof(tmp))
		return false;
	strcpy(tmp, arg);
	o->ops = 0;
	for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "write"))
			o->ops |= OP_WRITE;
		else if (!strcmp(t, "read"))
			o->ops |= OP_READ;
		else if (!strcmp(t, "atomic"))
			o->ops |= OP_ATOMIC;
		else if (!strcmp(t, "all"))
			o->ops |= OP_ALL;
		else
			return false;
	}
	return o->ops != 0;
}

/* 0, or 2 after a message on stderr. */
int parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"port", required_argument, NULL, 'p'},
		{"ib-dev", required_argument, NULL, 'd'},
		{"ib-port", required_argument, NULL, 'i'},
		{"gid-idx", required_argument, NULL, 'g'},
		{"size", required_argument, NULL, 's'},
		{"iters", required_argument, NULL, 'n'},
		{"chk", no_argument, NULL, 'c'},
		{"ops", required_argument, NULL, 'o'},
		{"allow-cc-unprotected", no_argument, NULL, 'U'},
		{"export", no_argument, NULL, 'E'},
		{"dmah", optional_argument, NULL, 'D'},
		{"timeout", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	unsigned long v;
	int c;

	memset(o, 0, sizeof(*o));
	o->port = DEFAULT_PORT;
	o->ib_port = 1;
	o->size = 4096;
	o->iters = 1000;
	o->timeout = 60;

	while ((c = getopt_long(argc, argv, "p:d:i:g:s:n:co:UEH:t:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (!parse_ulong(optarg, 65535, &v))
				goto bad;
			o->port = optarg;
			break;
		case 'd':
			o->dev = optarg;
			break;
		case 'i':
			if (!parse_ulong(optarg, 255, &v) || v == 0)
				goto bad;
			o->ib_port = (uint8_t)v;
			break;
		case 'g':
			if (!parse_ulong(optarg, INT_MAX, &v))
				goto bad;
			o->gid_idx = (int)v;
			break;
		case 's':
			if (!parse_ulong(optarg, 1ul << 30, &v) || v == 0)
				goto bad;
			o->size = v;
			break;
		case 'n':
			if (!parse_ulong(optarg, 100000000, &v) || v == 0)
				goto bad;
			o->iters = (unsigned int)v;
			break;
		case 'c':
			o->check = true;
			break;
		case 'o':
			if (!parse_ops(o, optarg))
				goto bad;
			break;
		case 'U':
			o->cc = true;
			break;
		case 'E':
			o->export = true;
			break;
		case 'H':
		case 'D':
			if (!parse_dmah(o, optarg))
				goto bad;
			break;
		case 't':
			if (!parse_ulong(optarg, 86400, &v))
				goto bad;
			o->timeout = (int)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		o->host = argv[optind++];
	if (optind < argc) {
		fprintf(stderr, PROG ": one host at most\n");
		usage(stderr);
		return 2;
	}
	if (o->host && !strcmp(o->port, "0")) {
		fprintf(stderr, PROG ": a client needs the server's port, not 0\n");
		return 2;
	}
	return 0;
bad:
	fprintf(stderr, PROG ": invalid value for -%c: '%s'\n", c == 'D' ? 'H' : c,
		optarg ? optarg : "");
	usage(stderr);
	return 2;
}

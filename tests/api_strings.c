/* SPDX-License-Identifier: MIT */
/*
 * api_strings: the enum-to-string helpers, the link-rate conversions and
 * softverbs' MTU helpers.
 *
 * Names: every value of each enum maps to a non-empty string that is not
 * the fallback and differs from every other name of the same enum; values
 * outside the enum (including holes) give "unknown", never NULL.
 * Rates: multiples and Mb/s round-trip for every rate, and the Mb/s value
 * lies between the nominal speed and 7% above it (the 64b/66b and
 * 256b/257b line codings).
 */
#include "harness.h"

#include <limits.h>

#include <softverbs/softverbs.h>

#define SV_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

typedef const char *(*name_fn)(int value);

/* Adapters so that one loop can check every *_str() helper. */
static const char *wc_status_name(int v)
{
	return ibv_wc_status_str((enum ibv_wc_status)v);
}

static const char *event_name(int v)
{
	return ibv_event_type_str((enum ibv_event_type)v);
}

static const char *node_name(int v)
{
	return ibv_node_type_str((enum ibv_node_type)v);
}

static const char *port_state_name(int v)
{
	return ibv_port_state_str((enum ibv_port_state)v);
}

static const char *wr_opcode_name(int v)
{
	return ibv_wr_opcode_str((enum ibv_wr_opcode)v);
}

static const int wc_statuses[] = {
	IBV_WC_SUCCESS,
	IBV_WC_LOC_LEN_ERR,
	IBV_WC_LOC_QP_OP_ERR,
	IBV_WC_LOC_EEC_OP_ERR,
	IBV_WC_LOC_PROT_ERR,
	IBV_WC_WR_FLUSH_ERR,
	IBV_WC_MW_BIND_ERR,
	IBV_WC_BAD_RESP_ERR,
	IBV_WC_LOC_ACCESS_ERR,
	IBV_WC_REM_INV_REQ_ERR,
	IBV_WC_REM_ACCESS_ERR,
	IBV_WC_REM_OP_ERR,
	IBV_WC_RETRY_EXC_ERR,
	IBV_WC_RNR_RETRY_EXC_ERR,
	IBV_WC_LOC_RDD_VIOL_ERR,
	IBV_WC_REM_INV_RD_REQ_ERR,
	IBV_WC_REM_ABORT_ERR,
	IBV_WC_INV_EECN_ERR,
	IBV_WC_INV_EEC_STATE_ERR,
	IBV_WC_FATAL_ERR,
	IBV_WC_RESP_TIMEOUT_ERR,
	IBV_WC_GENERAL_ERR,
	IBV_WC_TM_ERR,
	IBV_WC_TM_RNDV_INCOMPLETE,
};
static const int wc_status_bad[] = {-1, IBV_WC_TM_RNDV_INCOMPLETE + 1, 100, INT_MAX, INT_MIN};

static const int events[] = {
	IBV_EVENT_CQ_ERR,
	IBV_EVENT_QP_FATAL,
	IBV_EVENT_QP_REQ_ERR,
	IBV_EVENT_QP_ACCESS_ERR,
	IBV_EVENT_COMM_EST,
	IBV_EVENT_SQ_DRAINED,
	IBV_EVENT_PATH_MIG,
	IBV_EVENT_PATH_MIG_ERR,
	IBV_EVENT_DEVICE_FATAL,
	IBV_EVENT_PORT_ACTIVE,
	IBV_EVENT_PORT_ERR,
	IBV_EVENT_LID_CHANGE,
	IBV_EVENT_PKEY_CHANGE,
	IBV_EVENT_SM_CHANGE,
	IBV_EVENT_SRQ_ERR,
	IBV_EVENT_SRQ_LIMIT_REACHED,
	IBV_EVENT_QP_LAST_WQE_REACHED,
	IBV_EVENT_CLIENT_REREGISTER,
	IBV_EVENT_GID_CHANGE,
	IBV_EVENT_WQ_FATAL,
	IBV_EVENT_DEVICE_SPEED_CHANGE,
};
static const int event_bad[] = {-1, IBV_EVENT_DEVICE_SPEED_CHANGE + 1, 1000, INT_MAX, INT_MIN};

/* IBV_NODE_UNKNOWN (-1) names no node: it belongs to the "unknown" side. */
static const int nodes[] = {
	IBV_NODE_CA,	IBV_NODE_SWITCH,    IBV_NODE_ROUTER,	  IBV_NODE_RNIC,
	IBV_NODE_USNIC, IBV_NODE_USNIC_UDP, IBV_NODE_UNSPECIFIED,
};
static const int node_bad[] = {IBV_NODE_UNKNOWN, 0, IBV_NODE_UNSPECIFIED + 1, INT_MAX, INT_MIN};

static const int port_states[] = {
	IBV_PORT_NOP,	IBV_PORT_DOWN,	 IBV_PORT_INIT,
	IBV_PORT_ARMED, IBV_PORT_ACTIVE, IBV_PORT_ACTIVE_DEFER,
};
static const int port_state_bad[] = {-1, IBV_PORT_ACTIVE_DEFER + 1, 255, INT_MAX, INT_MIN};

static const int wr_opcodes[] = {
	IBV_WR_RDMA_WRITE,
	IBV_WR_RDMA_WRITE_WITH_IMM,
	IBV_WR_SEND,
	IBV_WR_SEND_WITH_IMM,
	IBV_WR_RDMA_READ,
	IBV_WR_ATOMIC_CMP_AND_SWP,
	IBV_WR_ATOMIC_FETCH_AND_ADD,
	IBV_WR_LOCAL_INV,
	IBV_WR_BIND_MW,
	IBV_WR_SEND_WITH_INV,
	IBV_WR_TSO,
	IBV_WR_DRIVER1,
	IBV_WR_FLUSH,
	IBV_WR_ATOMIC_WRITE,
};
/* 12 and 13 are holes of the enum. */
static const int wr_opcode_bad[] = {-1, 12, 13, IBV_WR_ATOMIC_WRITE + 1, 64, INT_MAX, INT_MIN};

static void check_names(const char *what, name_fn fn, const int *vals, size_t n, const int *bad,
			size_t nbad)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		const char *s = fn(vals[i]);

		if (!CHECK_MSG(s != NULL, "%s(%d) is NULL", what, vals[i]))
			continue;
		CHECK_MSG(s[0] != '\0', "%s(%d) is empty", what, vals[i]);
		CHECK_MSG(strcmp(s, "unknown") != 0, "%s(%d) is \"unknown\"", what, vals[i]);
		for (j = 0; j < i; j++) {
			const char *o = fn(vals[j]);

			CHECK_MSG(!o || strcmp(s, o) != 0, "%s(%d) and %s(%d) are both \"%s\"",
				  what, vals[i], what, vals[j], s);
		}
	}
	for (i = 0; i < nbad; i++) {
		const char *s = fn(bad[i]);

		CHECK_MSG(s && strcmp(s, "unknown") == 0, "%s(%d): want \"unknown\", got %s%s%s",
			  what, bad[i], s ? "\"" : "", s ? s : "NULL", s ? "\"" : "");
	}
}

#define CHECK_NAMES(fn, vals, bad)                                                                 \
	check_names(#fn, fn, vals, SV_ARRAY_SIZE(vals), bad, SV_ARRAY_SIZE(bad))

/*
 * Every rate with its nominal speed in tenths of Gb/s and, where the rate
 * is one, its multiple of 2.5 Gb/s (0: not a multiple rate). 28 Gb/s
 * counts as 11 x 2.5 although 11 x 2.5 is 27.5.
 */
static const struct {
	enum ibv_rate rate;
	int gbps10;
	int mult;
} rate_tab[] = {
	{IBV_RATE_2_5_GBPS, 25, 1},	  {IBV_RATE_5_GBPS, 50, 2},
	{IBV_RATE_10_GBPS, 100, 4},	  {IBV_RATE_20_GBPS, 200, 8},
	{IBV_RATE_30_GBPS, 300, 12},	  {IBV_RATE_40_GBPS, 400, 16},
	{IBV_RATE_60_GBPS, 600, 24},	  {IBV_RATE_80_GBPS, 800, 32},
	{IBV_RATE_120_GBPS, 1200, 48},	  {IBV_RATE_14_GBPS, 140, 0},
	{IBV_RATE_56_GBPS, 560, 0},	  {IBV_RATE_112_GBPS, 1120, 0},
	{IBV_RATE_168_GBPS, 1680, 0},	  {IBV_RATE_25_GBPS, 250, 0},
	{IBV_RATE_100_GBPS, 1000, 0},	  {IBV_RATE_200_GBPS, 2000, 0},
	{IBV_RATE_300_GBPS, 3000, 0},	  {IBV_RATE_28_GBPS, 280, 11},
	{IBV_RATE_50_GBPS, 500, 20},	  {IBV_RATE_400_GBPS, 4000, 160},
	{IBV_RATE_600_GBPS, 6000, 240},	  {IBV_RATE_800_GBPS, 8000, 320},
	{IBV_RATE_1200_GBPS, 12000, 480},
};

static void check_rates(void)
{
	static const int bad_rates[] = {IBV_RATE_MAX, 1, IBV_RATE_1200_GBPS + 1, 100, -1, INT_MAX};
	static const int bad_mults[] = {0, -1, 3, 5, 49, 1000, INT_MAX, INT_MIN};
	static const int bad_mbps[] = {0, -1, 1, 2499, 2501, 100000, INT_MAX, INT_MIN};
	size_t i, j;
	int nmult = 0;

	/* the table covers the whole enum: every value 2..24 once */
	CHECK_EQ_INT(SV_ARRAY_SIZE(rate_tab), IBV_RATE_1200_GBPS - 1);

	for (i = 0; i < SV_ARRAY_SIZE(rate_tab); i++) {
		enum ibv_rate r = rate_tab[i].rate;
		int mult = ibv_rate_to_mult(r);
		int mbps = ibv_rate_to_mbps(r);
		long lo = rate_tab[i].gbps10 * 100L, hi = lo + lo * 7 / 100;

		if (rate_tab[i].mult) {
			nmult++;
			CHECK_MSG(mult == rate_tab[i].mult, "ibv_rate_to_mult(%d): want %d, got %d",
				  (int)r, rate_tab[i].mult, mult);
			CHECK_MSG(mult_to_ibv_rate(mult) == r,
				  "mult_to_ibv_rate(ibv_rate_to_mult(%d) = %d) = %d", (int)r, mult,
				  (int)mult_to_ibv_rate(mult));
		} else {
			CHECK_MSG(mult == -1, "ibv_rate_to_mult(%d): want -1, got %d", (int)r,
				  mult);
		}
		CHECK_MSG(mbps >= lo && mbps <= hi, "ibv_rate_to_mbps(%d) = %d, want %ld..%ld",
			  (int)r, mbps, lo, hi);
		CHECK_MSG(mbps_to_ibv_rate(mbps) == r,
			  "mbps_to_ibv_rate(ibv_rate_to_mbps(%d) = %d) = %d", (int)r, mbps,
			  (int)mbps_to_ibv_rate(mbps));
		for (j = 0; j < i; j++)
			CHECK_MSG(ibv_rate_to_mbps(rate_tab[j].rate) != mbps,
				  "rates %d and %d both have %d Mb/s", (int)r,
				  (int)rate_tab[j].rate, mbps);
	}
	CHECK_EQ_INT(nmult, 15);

	for (i = 0; i < SV_ARRAY_SIZE(bad_rates); i++) {
		enum ibv_rate r = (enum ibv_rate)bad_rates[i];

		CHECK_MSG(ibv_rate_to_mult(r) == -1, "ibv_rate_to_mult(%d) = %d, want -1",
			  bad_rates[i], ibv_rate_to_mult(r));
		CHECK_MSG(ibv_rate_to_mbps(r) == -1, "ibv_rate_to_mbps(%d) = %d, want -1",
			  bad_rates[i], ibv_rate_to_mbps(r));
	}
	for (i = 0; i < SV_ARRAY_SIZE(bad_mults); i++)
		CHECK_MSG(mult_to_ibv_rate(bad_mults[i]) == IBV_RATE_MAX,
			  "mult_to_ibv_rate(%d) = %d, want IBV_RATE_MAX", bad_mults[i],
			  (int)mult_to_ibv_rate(bad_mults[i]));
	for (i = 0; i < SV_ARRAY_SIZE(bad_mbps); i++)
		CHECK_MSG(mbps_to_ibv_rate(bad_mbps[i]) == IBV_RATE_MAX,
			  "mbps_to_ibv_rate(%d) = %d, want IBV_RATE_MAX", bad_mbps[i],
			  (int)mbps_to_ibv_rate(bad_mbps[i]));
}

static void check_mtu(void)
{
	static const int bad_mtus[] = {0, -1, IBV_MTU_4096 + 1, 100, INT_MAX, INT_MIN};
	static const int bad_bytes[] = {0,    -1,   128,  255,	   257,	   1000,
					1500, 8192, 9000, INT_MAX, INT_MIN};
	int m, bytes = 256;
	size_t i;

	for (m = IBV_MTU_256; m <= IBV_MTU_4096; m++, bytes *= 2) {
		CHECK_MSG(softverbs_mtu_to_bytes((enum ibv_mtu)m) == bytes,
			  "softverbs_mtu_to_bytes(%d) = %d, want %d", m,
			  softverbs_mtu_to_bytes((enum ibv_mtu)m), bytes);
		CHECK_MSG(softverbs_bytes_to_mtu(bytes) == (enum ibv_mtu)m,
			  "softverbs_bytes_to_mtu(%d) = %d, want %d", bytes,
			  (int)softverbs_bytes_to_mtu(bytes), m);
	}
	CHECK_EQ_INT(bytes, 8192);
	for (i = 0; i < SV_ARRAY_SIZE(bad_mtus); i++)
		CHECK_MSG(softverbs_mtu_to_bytes((enum ibv_mtu)bad_mtus[i]) == -1,
			  "softverbs_mtu_to_bytes(%d) = %d, want -1", bad_mtus[i],
			  softverbs_mtu_to_bytes((enum ibv_mtu)bad_mtus[i]));
	for (i = 0; i < SV_ARRAY_SIZE(bad_bytes); i++)
		CHECK_MSG(softverbs_bytes_to_mtu(bad_bytes[i]) == (enum ibv_mtu)0,
			  "softverbs_bytes_to_mtu(%d) = %d, want 0", bad_bytes[i],
			  (int)softverbs_bytes_to_mtu(bad_bytes[i]));
}

int main(void)
{
	t_start("api_strings");

	t_case("ibv_wc_status_str");
	CHECK_EQ_INT(SV_ARRAY_SIZE(wc_statuses), IBV_WC_TM_RNDV_INCOMPLETE + 1);
	CHECK_NAMES(wc_status_name, wc_statuses, wc_status_bad);

	t_case("ibv_event_type_str");
	CHECK_EQ_INT(SV_ARRAY_SIZE(events), IBV_EVENT_DEVICE_SPEED_CHANGE + 1);
	CHECK_NAMES(event_name, events, event_bad);

	t_case("ibv_node_type_str");
	CHECK_NAMES(node_name, nodes, node_bad);

	t_case("ibv_port_state_str");
	CHECK_NAMES(port_state_name, port_states, port_state_bad);

	t_case("ibv_wr_opcode_str");
	CHECK_NAMES(wr_opcode_name, wr_opcodes, wr_opcode_bad);

	t_case("rates");
	check_rates();

	t_case("softverbs mtu helpers");
	check_mtu();

	return t_finish();
}

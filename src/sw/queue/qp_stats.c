/* SPDX-License-Identifier: MIT */
/*
 * qp_stats.c - the per-QP half of the diagnostics view
 * (SOFTVERBS_STATS=1): completions counted by status as they are
 * pushed, and each QP's counters printed on stderr when it is destroyed.
 * The transport bumps the packet counters (SW_COUNT, transport/transport_priv.h); the
 * device's own totals are printed when its engine stops (engine.c).
 */
#include <stdio.h>

#include "sw/queue/qp_priv.h"

/*
 * Contract: see queue.h. Returns what sw_cq_push() returns. The bytes
 * this thread placed before land first (sw_place_fence): a completion
 * never shows before its data.
 */
int sw_qp_cq_push(struct sw_qp *qp, struct sw_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	struct sw_dev *dev = sw_dev_of(qp->ibv.qp_base.context);

	sw_place_fence();
	if (wc->status == IBV_WC_SUCCESS) {
		SW_QP_COUNT(qp, wc_ok, 1);
	} else if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		SW_QP_COUNT(qp, wc_flushed, 1);
		atomic_fetch_add_explicit(&dev->wc_flushed, 1, memory_order_relaxed);
	} else {
		SW_QP_COUNT(qp, wc_errors, 1);
		atomic_fetch_add_explicit(&dev->wc_errors, 1, memory_order_relaxed);
	}
	return sw_cq_push(cq, wc, solicited);
}

static const char *type_str(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_XRC_SEND:
		return "XRC_INI";
	case IBV_QPT_XRC_RECV:
		return "XRC_TGT";
	default:
		return "other";
	}
}

static unsigned long long rd(atomic_ullong *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

/*
 * Contract: see queue.h. Two lines per QP, each starting with
 * "softverbs: NAME QP 0xQPN TYPE:" so that they never read as the
 * device's own report (engine.c); nothing unless the device was
 * configured with SOFTVERBS_STATS=1.
 */
void sw_qp_stats_report(struct sw_qp *qp)
{
	struct sw_dev *dev = sw_dev_of(qp->ibv.qp_base.context);
	struct sw_qp_counters *c = &qp->cnt;
	char who[96];

	if (!dev->cfg.stats)
		return;
	snprintf(who, sizeof(who), "softverbs: %s QP 0x%06x %s:", dev->core.ibv.name, qp->qpn,
		 type_str(qp->ibv.qp_base.qp_type));
	fprintf(stderr,
		"%s tx %llu pkts %llu bytes, rx %llu pkts %llu bytes, retransmits %llu "
		"timeouts %llu duplicates %llu\n"
		"%s naks rx seq %llu rnr %llu err %llu, tx seq %llu rnr %llu err %llu; drops "
		"malformed %llu state %llu qkey %llu no_recv %llu out_of_window %llu; "
		"completions ok %llu errors %llu flushed %llu\n",
		who, rd(&c->tx_pkts), rd(&c->tx_bytes), rd(&c->rx_pkts), rd(&c->rx_bytes),
		rd(&c->retransmits), rd(&c->timeouts), rd(&c->duplicates), who, rd(&c->seq_naks_rx),
		rd(&c->rnr_naks_rx), rd(&c->err_naks_rx), rd(&c->seq_naks_tx), rd(&c->rnr_naks_tx),
		rd(&c->err_naks_tx), rd(&c->drops_malformed), rd(&c->drops_state),
		rd(&c->drops_qkey), rd(&c->drops_no_recv), rd(&c->drops_out_of_window),
		rd(&c->wc_ok), rd(&c->wc_errors), rd(&c->wc_flushed));
}

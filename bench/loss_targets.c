/* SPDX-License-Identifier: MIT */
/*
 * loss_targets.c - the targets of the loss family (issue 13), reported
 * after the others, never enforced:
 *
 *   WRITE 64 KiB at 0.5% loss >= 0.50 of lossless, at 2% >= 0.25, over
 *   UDP and over the same-host link (family "loss", same run);
 *   1024 QPs x 4 processes over UDP: 0 error completions and 0 socket
 *   overflows, at 0% and 1% loss (the device's "socket overflows", else
 *   the namespace's UDP RcvbufErrors, which counts the same drops);
 *   packets resent per packet lost <= 16 at 1% loss, the worst point
 *   ("resent pkts" of the device; without that line: not measured, and
 *   the requester QPs' excess packets are shown instead).
 */
#include "loss.h"

#define TARGET_LOSS_05 0.50
#define TARGET_LOSS_2 0.25
#define TARGET_RESENT_PER_LOST 16.0

struct loss_tgt loss_tgt;

static const struct {
	const char *json, *text, *variant;
	double goal;
} ratios[] = {
	{"loss_write64k_0p5pct_udp", "at 0.5% loss, over UDP", "udp 0.5%", TARGET_LOSS_05},
	{"loss_write64k_0p5pct_shm", "at 0.5% loss, over the link", "shm 0.5%", TARGET_LOSS_05},
	{"loss_write64k_2pct_udp", "at 2% loss, over UDP", "udp 2%", TARGET_LOSS_2},
	{"loss_write64k_2pct_shm", "at 2% loss, over the link", "shm 2%", TARGET_LOSS_2},
};

/* A value of the 64 KiB point of `variant`. */
static double sweep(const char *variant, const char *key)
{
	return rec_get("loss", "WRITE", variant, 64 * KIB, key);
}

/* Contract: see loss.h. */
void loss_targets_print(bool heading)
{
	double clean = loss_tgt.clean_errs + loss_tgt.clean_overflows;

	if (!loss_tgt.ran)
		return;
	if (heading)
		printf("\ntargets:\n");
	for (size_t i = 0; i < N_OF(ratios); i++) {
		double r = sweep(ratios[i].variant, "vs_lossless");

		printf("  loss: WRITE 64 KiB %-28s >= %.2f of lossless: %6.3g  %s%s\n",
		       ratios[i].text, ratios[i].goal, r, verdict(r, ratios[i].goal, true),
		       sweep(ratios[i].variant, "stalled") > 0 ? " (stalled)" : "");
	}
	printf("  loss: 1024 QPs x 4 processes over UDP, 0 error completions and 0 socket "
	       "overflows: %g and %g  %s%s\n",
	       loss_tgt.clean_errs, loss_tgt.clean_overflows, verdict(clean, 0, false),
	       loss_tgt.overflows_from_kernel ? " (overflows: kernel RcvbufErrors; the device "
						"printed no socket overflows line)" :
						"");
	if (loss_tgt.resent_missing)
		printf("  loss: packets resent per packet lost at 1%% <= %.0f: not measured (the "
		       "device printed no \"resent pkts\" line); requester QPs' excess packets "
		       "per lost, worst 1%% point: %.2f\n",
		       TARGET_RESENT_PER_LOST, loss_tgt.worst_excess);
	else
		printf("  loss: packets resent per packet lost at 1%% <= %.0f (worst point): %5.2f  "
		       "%s\n",
		       TARGET_RESENT_PER_LOST, loss_tgt.worst_resent,
		       verdict(loss_tgt.worst_resent, TARGET_RESENT_PER_LOST, false));
}

/* Contract: see loss.h. */
void loss_targets_json(FILE *f)
{
	double clean = loss_tgt.clean_errs + loss_tgt.clean_overflows;
	double rs = loss_tgt.resent_missing ? nan_d() : loss_tgt.worst_resent;

	if (!loss_tgt.ran)
		return;
	for (size_t i = 0; i < N_OF(ratios); i++) {
		double r = sweep(ratios[i].variant, "vs_lossless");

		fprintf(f, ",\n    \"%s\": {\"ratio\": ", ratios[i].json);
		json_num(f, r);
		fprintf(f, ", \"goal_min\": %.2f, \"met\": %s, \"stalled\": %s}", ratios[i].goal,
			r == r && r >= ratios[i].goal ? "true" : "false",
			sweep(ratios[i].variant, "stalled") > 0 ? "true" : "false");
	}
	fprintf(f, ",\n    \"loss_1024qp_x4_udp_clean\": {\"ratio\": ");
	json_num(f, clean);
	fprintf(f, ", \"errors\": ");
	json_num(f, loss_tgt.clean_errs);
	fprintf(f, ", \"overflows\": ");
	json_num(f, loss_tgt.clean_overflows);
	fprintf(f, ", \"overflows_source\": \"%s\", \"goal_max\": 0, \"met\": %s}",
		loss_tgt.overflows_from_kernel ? "kernel RcvbufErrors" : "device",
		clean == 0 ? "true" : "false");
	fprintf(f, ",\n    \"loss_resent_per_lost_1pct\": {\"ratio\": ");
	json_num(f, rs);
	fprintf(f,
		", \"goal_max\": %.0f, \"met\": %s, \"excess_per_lost\": ", TARGET_RESENT_PER_LOST,
		rs == rs && rs <= TARGET_RESENT_PER_LOST ? "true" : "false");
	json_num(f, loss_tgt.worst_excess);
	fprintf(f, "}");
}

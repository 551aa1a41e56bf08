/* SPDX-License-Identifier: MIT */
/* test: wrap=cm_send_mad */
/*
 * unit_rdmacm_hostile: what the connection manager does with hostile or
 * stray MADs, fed straight into its state machines (cm_handle_mad) with
 * the replies it sends captured (cm_send_mad is wrapped):
 *   - a REQ for no listener gets REJ 8, with the TID echoed and the
 *     REQ's communication ID as the remote one; a malformed service ID too;
 *   - at a listener: a wrong primary GID gets REJ 12 (ARI = our GID), a bad
 *     rdma_cm IP header or a UC REQ REJ 28; a valid REQ a CONNECT_REQUEST
 *     event, its duplicate an MRA; destroying the listener refuses it (REJ 28);
 *   - a DREQ for no connection gets a DREP with the IDs swapped;
 *   - a SIDR_REQ for no listener gets SIDR_REP status 1;
 *   - REP, RTU, MRA, REJ, DREP, SIDR_REP, LAP, APR and ClassPortInfo for
 *     nobody, bad headers and impossible lengths are dropped silently;
 *   - 20000 random MADs change nothing and crash nothing.
 */
#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include "rdmacm/cm.h"

static uint8_t last[CM_MAD_LEN];
static int sent;

int __real_cm_send_mad(struct cm_dev *d, const uint8_t gid[16], const uint8_t mad[CM_MAD_LEN]);
int __wrap_cm_send_mad(struct cm_dev *d, const uint8_t gid[16], const uint8_t mad[CM_MAD_LEN]);

int __wrap_cm_send_mad(struct cm_dev *d, const uint8_t gid[16], const uint8_t mad[CM_MAD_LEN])
{
	(void)d, (void)gid;
	memcpy(last, mad, CM_MAD_LEN);
	sent++;
	return 0;
}

static struct softverbs_gsi_addr src;

static void feed(const uint8_t *mad)
{
	pthread_mutex_lock(&cm.lock);
	cm_handle_mad(&cm.dev[0], &src, mad);
	pthread_mutex_unlock(&cm.lock);
}

static uint16_t last_attr(void)
{
	return (uint16_t)(last[16] << 8 | last[17]);
}

static void make_req(uint8_t *mad, uint32_t lcid, uint64_t sid, bool good_gid)
{
	struct cm_req r;
	struct cma_hdr h = {.cma_version = 0, .ip_version = 4, .src_port = 40000};
	struct in_addr peer = {htonl(0x7f0000fa)};

	memset(&r, 0, sizeof(r));
	r.local_comm_id = lcid;
	r.service_id = sid;
	r.local_ca_guid = 0x0102030405060708ull;
	r.local_qpn = 0x1234;
	r.starting_psn = 0x55;
	r.pkey = 0xffff;
	r.path_mtu = IBV_MTU_1024;
	r.max_cm_retries = 15;
	r.local_cm_response_timeout = 20;
	cm_gid_v4(r.primary.local_gid, peer);
	if (good_gid)
		memcpy(r.primary.remote_gid, cm.dev[0].gid.raw, 16);
	memcpy(h.src_ip + 12, &peer, 4);
	memcpy(h.dst_ip + 12, &cm.dev[0].addr, 4);
	cma_hdr_encode(r.pdata, &h);
	cm_mad_init(mad, CM_ATTR_REQ, 0xabcdef0000000000ull | lcid, 0);
	cm_encode_req(mad, &r);
}

static void expect_rej(uint16_t reason, uint32_t rcid)
{
	struct cm_rej j;

	CHECK_EQ_INT(sent, 1);
	CHECK_EQ_INT(last_attr(), CM_ATTR_REJ);
	CHECK_EQ_INT(cm_decode_rej(last, &j), 0);
	CHECK_EQ_INT(j.reason, reason);
	CHECK_EQ_INT(j.remote_comm_id, rcid);
}

static void test_no_listener(void)
{
	uint8_t mad[CM_MAD_LEN];

	t_case("REQ for nobody: REJ 8");
	make_req(mad, 0x1111, 0x0000000001060001ull, true);
	sent = 0;
	feed(mad);
	expect_rej(CM_REJ_INVALID_SERVICE_ID, 0x1111);
	CHECK(memcmp(last + 8, mad + 8, 8) == 0); /* TID echoed */
	make_req(mad, 0x1112, 0x0000000002060001ull, true); /* not an IP service ID */
	sent = 0;
	feed(mad);
	expect_rej(CM_REJ_INVALID_SERVICE_ID, 0x1112);
}

static void test_listener(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(5000)};
	uint8_t mad[CM_MAD_LEN];
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *l;
	uint64_t sid = 0x0000000001061388ull; /* TCP port 5000 */
	struct cm_rej j;
	int fl;

	t_case("REQs at a listener: REJ 12, REJ 28, CONNECT_REQUEST, MRA, REJ 28 on destroy");
	ch = rdma_create_event_channel();
	CHECK(ch != NULL);
	if (!ch)
		return;
	CHECK_EQ_INT(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
	sin.sin_addr = cm.dev[0].addr;
	CHECK_EQ_INT(rdma_bind_addr(l, (struct sockaddr *)&sin), 0);
	CHECK_EQ_INT(rdma_listen(l, 4), 0);

	make_req(mad, 0x2221, sid, false);
	sent = 0;
	feed(mad);
	expect_rej(CM_REJ_INVALID_GID, 0x2221);
	CHECK_EQ_INT(cm_decode_rej(last, &j), 0);
	CHECK_EQ_INT(j.ari_len, 16);
	CHECK(!memcmp(j.ari, cm.dev[0].gid.raw, 16));

	make_req(mad, 0x2222, sid, true);
	mad[CM_HDR_LEN + 140] = 1; /* CMA version 1 */
	sent = 0;
	feed(mad);
	expect_rej(CM_REJ_CONSUMER_DEFINED, 0x2222);

	make_req(mad, 0x2223, sid, true);
	mad[CM_HDR_LEN + 43] |= 1 << 1; /* UC */
	sent = 0;
	feed(mad);
	expect_rej(CM_REJ_CONSUMER_DEFINED, 0x2223);

	make_req(mad, 0x2224, sid, true);
	sent = 0;
	feed(mad);
	CHECK_EQ_INT(sent, 0);
	fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	CHECK_EQ_INT(rdma_get_cm_event(ch, &ev), 0);
	if (!ev)
		return;
	CHECK_EQ_INT(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST);
	CHECK(ev->listen_id == l);
	CHECK_EQ_INT(ev->param.conn.private_data_len, 56);
	CHECK_EQ_INT(ev->param.conn.qp_num, 0x1234);
	CHECK_EQ_INT(ntohs(rdma_get_src_port(ev->id)), 5000);
	CHECK_EQ_INT(ntohs(rdma_get_dst_port(ev->id)), 40000);
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);
	feed(mad); /* the duplicate */
	CHECK_EQ_INT(sent, 1);
	CHECK_EQ_INT(last_attr(), CM_ATTR_MRA);
	rdma_ack_cm_event(ev);
	/* one more request, left queued: destroying the listener refuses it */
	make_req(mad, 0x2225, sid, true);
	feed(mad);
	sent = 0;
	CHECK_EQ_INT(rdma_destroy_id(l), 0);
	CHECK_EQ_INT(sent, 1);
	CHECK_EQ_INT(last_attr(), CM_ATTR_REJ);
	CHECK_EQ_INT(cm_decode_rej(last, &j), 0);
	CHECK_EQ_INT(j.reason, CM_REJ_CONSUMER_DEFINED);
	CHECK_EQ_INT(j.remote_comm_id, 0x2225);
	CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN);
	/* the accepted-nowhere id of 0x2224 is the application's to destroy */
	for (struct cm_id *i = cm.ids; i;) {
		struct cm_id *nx = i->next;

		if (i->conn.rcid == 0x2224)
			rdma_destroy_id(&i->id);
		i = nx;
	}
	rdma_destroy_event_channel(ch);
}

static void test_unknown(void)
{
	static const uint16_t quiet[] = {CM_ATTR_REP, CM_ATTR_RTU,  CM_ATTR_MRA,
					 CM_ATTR_REJ, CM_ATTR_DREP, CM_ATTR_SIDR_REP,
					 CM_ATTR_LAP, CM_ATTR_APR,  CM_ATTR_CLASS_PORT_INFO,
					 0x0099};
	uint8_t mad[CM_MAD_LEN];
	struct cm_dreq q = {.local_comm_id = 0x3331, .remote_comm_id = 0x3332};
	struct cm_sidr_req s = {.request_id = 0x4441, .service_id = 0x0000000001110001ull};
	struct cm_rtu r;
	struct cm_sidr_rep p;

	t_case("unknown connections: DREP, SIDR_REP 1, silence");
	cm_mad_init(mad, CM_ATTR_DREQ, 77, 0);
	cm_encode_dreq(mad, &q);
	sent = 0;
	feed(mad);
	CHECK_EQ_INT(sent, 1);
	CHECK_EQ_INT(last_attr(), CM_ATTR_DREP);
	cm_decode_drep(last, &r);
	CHECK_EQ_INT(r.local_comm_id, 0x3332);
	CHECK_EQ_INT(r.remote_comm_id, 0x3331);

	cm_mad_init(mad, CM_ATTR_SIDR_REQ, 78, 0);
	cm_encode_sidr_req(mad, &s);
	sent = 0;
	feed(mad);
	CHECK_EQ_INT(sent, 1);
	CHECK_EQ_INT(last_attr(), CM_ATTR_SIDR_REP);
	cm_decode_sidr_rep(last, &p);
	CHECK_EQ_INT(p.status, CM_SIDR_UNSUPPORTED);
	CHECK_EQ_INT(p.request_id, 0x4441);

	sent = 0;
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		memset(mad, 0, sizeof(mad));
		cm_mad_init(mad, quiet[i], 1, 0);
		for (int b = CM_HDR_LEN; b < CM_MAD_LEN; b++)
			mad[b] = (uint8_t)(b * 7);
		feed(mad);
	}
	cm_mad_init(mad, CM_ATTR_REQ, 1, 0);
	mad[2] = 1; /* class version 1 */
	feed(mad);
	cm_mad_init(mad, CM_ATTR_REJ, 1, 0);
	mad[CM_HDR_LEN + 9] = 0xfe; /* ARI length 127 */
	feed(mad);
	CHECK_EQ_INT(sent, 0);
}

static void test_random(void)
{
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t mad[CM_MAD_LEN];
	int before = 0, after = 0;

	t_case("20000 random MADs");
	for (struct cm_id *i = cm.ids; i; i = i->next)
		before++;
	for (int n = 0; n < 20000; n++) {
		for (int b = 0; b < CM_MAD_LEN; b++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			mad[b] = (uint8_t)x;
		}
		if (n & 1) { /* a valid header half of the time */
			mad[0] = 1, mad[1] = 7, mad[2] = 2, mad[3] = 3, mad[16] = 0;
			mad[17] = (uint8_t)(0x10 + (x >> 40) % 11);
		}
		feed(mad);
	}
	for (struct cm_id *i = cm.ids; i; i = i->next)
		after++;
	CHECK_EQ_INT(after, before); /* no listener: nothing was created */
}

int main(void)
{
	int ret;

	ret = cm_init(); /* its device, endpoint and thread stay: before the fd count */
	t_start("unit_rdmacm_hostile");
	if (ret)
		t_skip_all("no softverbs device for the connection manager");
	cm_gid_v4(src.peer_gid, (struct in_addr){htonl(0x7f0000fa)});
	src.hop_limit = 64;
	test_no_listener();
	test_listener();
	test_unknown();
	test_random();
	return t_finish();
}

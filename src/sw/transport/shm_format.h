/* SPDX-License-Identifier: MIT */
/*
 * shm_format.h - what two software devices share over the same-host link
 * (shm.c): the connection's name, the hello, the ring's header and its
 * records. Shared by shm.c and the tests that play a hostile producer.
 *
 * Name: the abstract AF_UNIX seqpacket socket "softverbs/<uid>/<ip>:<port>"
 * (uid decimal, ip dotted quad, port decimal: the device's RoCE address).
 * Hello: the first message on a connection, sizeof(struct shm_hello)
 * bytes, with exactly one descriptor (SCM_RIGHTS): a memfd of
 * SHM_HDR_BYTES + SHM_RING_BYTES bytes, sealed against shrinking
 * (F_SEAL_SHRINK; the sender also seals growing and sealing).
 * Ring: struct shm_hdr at offset 0, the data (SHM_RING_BYTES) at
 * SHM_HDR_BYTES. head and tail count bytes ever produced and consumed
 * (multiples of 8; tail may start anywhere such, head with it); a
 * record at data[head % SHM_RING_BYTES] is a u32 length, a u32 of
 * flags, and that many bytes of packet, padded to 8. A record never
 * wraps: a length of SHM_REC_WRAP says the rest of the ring is skipped.
 * Flag SHM_REC_REF: the packet is a SEND or WRITE packet whose payload
 * stays in the producer's memory, or a READ request that names where its
 * responses go there (wire.h, struct sw_ref_piece); only after the
 * consumer set `pull_ok`, having read `pull_cookie` at `pull_addr` in the
 * producer with process_vm_readv(2) (single copy, docs/single-copy.md).
 * The same flag on a READ response: it is placed (wire.h), its bytes
 * already written into the consumer's memory by the producer.
 * A piece's buffer tag names a slot of the producer's table of shared
 * buffers at `bufs_addr` (`bufs_n` struct sw_buf_slot, sw/mem.h): the
 * consumer may read the slot, take the memfd it names with
 * pidfd_getfd(2) and map it read-only (shm_map.c).
 * The consumer's push directory (struct shm_dir, shm_dir.c): the memfd
 * numbered `dir_fd` in the consumer, which the producer may take with
 * pidfd_getfd(2) and map; `dir_slot` names the producer's pusher word in
 * it, `dir_tag` the value its high half must hold, and `dir_ok` says it may still be used (the
 * consumer clears it before it lets the slot go). Written before `accepted`.
 */
#ifndef SV_SW_TRANSPORT_SHM_FORMAT_H
#define SV_SW_TRANSPORT_SHM_FORMAT_H

#include <stdatomic.h>
#include <stdint.h>

enum {
	SHM_MAGIC = 0x53564c4b, /* "SVLK" */
	SHM_VERSION = 8, /* 2: IPv6 in the hello; 3: hdr.done; 4: pulls; 5: pushes; 6: runs; 7:
			    maps; 8: push directory */
	SHM_HDR_BYTES = 512, /* the ring's data starts here */
	SHM_RING_BYTES = 8 << 20, /* as much as the UDP socket buffer */
	SHM_MAP_BYTES = SHM_HDR_BYTES + SHM_RING_BYTES, /* the memfd: header, then ring */
	SHM_MAX_OUT = 64, /* destinations with a link (or a failed try) */
	SHM_MAX_IN = 64, /* links into this device */
	SHM_REC_HDR = 8, /* u32 length, u32 flags */
	SHM_REC_REF = 1, /* flags: the payload is by reference */
	SHM_REC_WRAP = 0xffffffffu, /* length of a record that says "go to 0" */
};

#define SHM_RETRY_NS (1000ull * 1000 * 1000) /* a failed look-up is tried again after 1 s */
/* a connection without a hello is closed after 1 s */
#define SHM_HELLO_NS (1000ull * 1000 * 1000)
/* hung-up outgoing links are looked for every 100 ms */
#define SHM_SWEEP_NS (100ull * 1000 * 1000)
/* accepts and doorbell drains that no ready descriptor asked for: at most every 1 ms */
#define SHM_IO_NS (1000ull * 1000)

/* The shared header; the consumer trusts none of it but what it checks. */
struct shm_hdr {
	uint32_t magic, version;
	uint32_t ring_bytes;
	_Alignas(64) _Atomic uint64_t head; /* bytes produced; written by the producer */
	_Alignas(64) _Atomic uint64_t tail; /* bytes consumed; written by the consumer */
	/*
	 * bytes consumed and handled (answered), written by the consumer after
	 * each receive batch: how far a sender's timer may count the peer as
	 * working through the ring (transport/req.c)
	 */
	_Atomic uint64_t done;
	_Alignas(64) atomic_uint sleeping; /* the consumer may be in poll(2): ring */
	atomic_uint accepted; /* the consumer has the ring */
	/* single copy: the producer's proof that its memory can be read */
	uint64_t pull_addr; /* the address of pull_cookie in the producer's mapping */
	uint64_t pull_cookie; /* a random value */
	atomic_uint pull_ok; /* the consumer read it: SHM_REC_REF records are welcome */
	/*
	 * READ by reference: the consumer writes into the producer's memory
	 * (docs/single-copy.md). `pushing`, written by the consumer, is the
	 * position after the record it is writing for (0: none); `expired`,
	 * written by the producer, the position up to which it stopped
	 * holding the memory (it waited too long). Each stores its own, then
	 * loads the other's (sequentially consistent): the consumer writes
	 * only if expired is below its record, the producer lets the memory
	 * go only if pushing is 0 or past it.
	 */
	_Atomic uint64_t expired;
	_Atomic uint64_t pushing;
	/* the producer's table of shared buffers (written before the hello) */
	uint64_t bufs_addr;
	uint32_t bufs_n;
	/* the consumer's push directory (written before `accepted`; dir_fd -1: none) */
	int32_t dir_fd;
	uint32_t dir_slot;
	uint64_t dir_tag; /* the slot's busy word's high half (shm_dir.h) */
	atomic_uint dir_ok;
};

_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR_BYTES, "ring header too large");

/*
 * The push directory (shm_dir.c, docs/single-copy.md): what a device's
 * peers on the same host need to write a small RDMA WRITE straight into
 * its memory. Entries are seqlocked: the owner makes `seq` odd, writes
 * the fields, makes it even; a reader takes the fields only between two
 * equal even reads. A QP entry's `key` is its QPN, `access` its
 * qp_access_flags (0 unless the QP is in RTR, RTS, SQD or SQE); an MR
 * entry's `key` the rkey, `iova`/`len` what peers name, `host` where it
 * lies in the owner. `pd` ties an MR to the QPs that may use it. A
 * pusher bumps its `busy` word to odd before it reads an entry and back
 * to even when its write is over; an owner that takes an entry away
 * (odd seq, sequentially consistent) then waits while any busy word it
 * sees odd stays unchanged, so no write it did not see is still going.
 */
enum {
	SHM_DIR_MAGIC = 0x53564452, /* "SVDR" */
	SHM_DIR_QPS = 512, /* power of two: a QP at qpn's hash, if free */
	SHM_DIR_MRS = 2048, /* power of two: an MR at its key's hash, if free */
};

struct shm_dir_ent {
	_Atomic uint32_t seq;
	uint32_t key;
	uint32_t access;
	uint32_t pad;
	uint64_t pd, iova, len, host;
};

struct shm_dir_pusher {
	_Alignas(64) _Atomic uint64_t busy;
};

struct shm_dir {
	uint32_t magic, version;
	struct shm_dir_pusher pushers[SHM_MAX_IN];
	struct shm_dir_ent qps[SHM_DIR_QPS];
	struct shm_dir_ent mrs[SHM_DIR_MRS];
};

/* The first message on a connection (with the ring's memfd attached). */
struct shm_hello {
	uint32_t magic, version;
	uint32_t ring_bytes;
	uint8_t gid[16]; /* the sender's RoCE address as a GID (IPv4-mapped for IPv4) */
	uint16_t port; /* and UDP port, host order */
	uint16_t pad;
};

#endif

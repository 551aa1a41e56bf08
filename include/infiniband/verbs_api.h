/*
 * softverbs - public verbs API, part 1: values that rdma-core takes from the
 * kernel uverbs ioctl headers.
 *
 * softverbs does not depend on kernel rdma/ headers, so every value that
 * rdma-core's verbs_api.h re-exports from <infiniband/ib_user_ioctl_verbs.h>
 * is defined here directly, under its libibverbs (ibv_ / IBV_) name.
 */
#ifndef VERBS_API_H
#define VERBS_API_H

#include <stdint.h>
#include <linux/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A pointer member that always occupies 64 bits, so that the structure has
 * the same layout for 32- and 64-bit user space.
 */
#ifndef RDMA_UAPI_PTR
#if UINTPTR_MAX == UINT64_MAX
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                              \
		_type _name;                                                 \
		__aligned_u64 _name##_data_u64;                              \
	}
#elif UINTPTR_MAX == UINT32_MAX
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                              \
		struct {                                                     \
			__u32 _name##_reserved;                              \
			_type _name;                                         \
		};                                                           \
		__aligned_u64 _name##_data_u64;                              \
	}
#else
#define RDMA_UAPI_PTR(_type, _name)                                          \
	union {                                                              \
		struct {                                                     \
			_type _name;                                         \
			__u32 _name##_reserved;                              \
		};                                                           \
		__aligned_u64 _name##_data_u64;                              \
	}
#endif
#else
#error "softverbs: unsupported pointer width"
#endif
#endif /* RDMA_UAPI_PTR */

/*
 * rdma-core makes the constants below macros (aliases of kernel names), so
 * applications may test them with #ifdef.  They are enum constants here;
 * each one is also #defined to itself to keep such tests working.
 */

/* Memory-registration access bits 20..29 are "optional": a device that
 * does not know one of them ignores it instead of failing the call. */
#define IBV_ACCESS_OPTIONAL_FIRST	(1 << 20)
#define IBV_ACCESS_OPTIONAL_RANGE	0x3ff00000	/* bits 20..29 */

/* Flag of struct ibv_port_attr.flags */
#define IBV_QPF_GRH_REQUIRED		(1 << 0)

/* ibv_advise_mr() */
enum ibv_advise_mr_advice {
	IBV_ADVISE_MR_ADVICE_PREFETCH = 0,
	IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE = 1,
	IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT = 2,
};
#define IBV_ADVISE_MR_ADVICE_PREFETCH IBV_ADVISE_MR_ADVICE_PREFETCH
#define IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE
#define IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT

#define IBV_ADVISE_MR_FLAG_FLUSH	(1 << 0)

/* IPsec ESP flow actions */
enum ibv_flow_action_esp_keymat {
	IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM = 0,
};
#define IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM IBV_FLOW_ACTION_ESP_KEYMAT_AES_GCM

enum ibv_flow_action_esp_keymat_aes_gcm_iv_algo {
	IBV_FLOW_ACTION_IV_ALGO_SEQ = 0,
};
#define IBV_FLOW_ACTION_IV_ALGO_SEQ IBV_FLOW_ACTION_IV_ALGO_SEQ

struct ibv_flow_action_esp_keymat_aes_gcm {
	__aligned_u64 iv;
	__u32 iv_algo;		/* enum ibv_flow_action_esp_keymat_aes_gcm_iv_algo */
	__u32 salt;
	__u32 icv_len;
	__u32 key_len;
	__u32 aes_key[8];	/* up to 256 key bits */
};

enum ibv_flow_action_esp_replay {
	IBV_FLOW_ACTION_ESP_REPLAY_NONE = 0,
	IBV_FLOW_ACTION_ESP_REPLAY_BMP = 1,
};
#define IBV_FLOW_ACTION_ESP_REPLAY_NONE IBV_FLOW_ACTION_ESP_REPLAY_NONE
#define IBV_FLOW_ACTION_ESP_REPLAY_BMP IBV_FLOW_ACTION_ESP_REPLAY_BMP

struct ibv_flow_action_esp_replay_bmp {
	__u32 size;
};

/* Bits with value 0 name the default of a two-way choice. */
enum ibv_flow_action_esp_flags {
	IBV_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO = 0,
	IBV_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD = 1 << 0,
	IBV_FLOW_ACTION_ESP_FLAGS_TUNNEL = 0,
	IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT = 1 << 1,
	IBV_FLOW_ACTION_ESP_FLAGS_DECRYPT = 0,
	IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT = 1 << 2,
	IBV_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW = 1 << 3,
};
#define IBV_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO IBV_FLOW_ACTION_ESP_FLAGS_INLINE_CRYPTO
#define IBV_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD IBV_FLOW_ACTION_ESP_FLAGS_FULL_OFFLOAD
#define IBV_FLOW_ACTION_ESP_FLAGS_TUNNEL IBV_FLOW_ACTION_ESP_FLAGS_TUNNEL
#define IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT IBV_FLOW_ACTION_ESP_FLAGS_TRANSPORT
#define IBV_FLOW_ACTION_ESP_FLAGS_DECRYPT IBV_FLOW_ACTION_ESP_FLAGS_DECRYPT
#define IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT IBV_FLOW_ACTION_ESP_FLAGS_ENCRYPT
#define IBV_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW IBV_FLOW_ACTION_ESP_FLAGS_ESN_NEW_WINDOW

/* One link of a list of flow filters that wrap the payload (tunnel mode). */
struct ibv_flow_action_esp_encap {
	RDMA_UAPI_PTR(void *, val_ptr);
	RDMA_UAPI_PTR(struct ibv_flow_action_esp_encap *, next_ptr);
	__u16 len;		/* size of the filter at val_ptr */
	__u16 type;		/* enum ibv_flow_spec_type */
};

struct ibv_flow_action_esp {
	__u32 spi;
	__u32 seq;
	__u32 tfc_pad;
	__u32 flags;		/* enum ibv_flow_action_esp_flags */
	__aligned_u64 hard_limit_pkts;
};

#ifdef __cplusplus
}
#endif

#endif /* VERBS_API_H */

/* SPDX-License-Identifier: MIT */
/*
 * keys.c - unpredictable 32-bit MR keys.
 *
 * A peer names remote memory by rkey alone, so keys must not be
 * guessable from earlier ones. Candidates come from the kernel's CSPRNG
 * (getrandom(2), or /dev/urandom where that syscall is missing), drawn
 * a pool at a time so that registration does not cost a syscall per key.
 * A forked child discards the inherited pool, so it never repeats the
 * parent's keys.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sw/mem.h"

enum {
	POOL_WORDS = 64
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t pool[POOL_WORDS];
static unsigned int pool_left; /* unused words at the start of pool[] */
static uint64_t fallback_state;

/* Fill `len` bytes from /dev/urandom; 0 or -errno. */
static int read_urandom(void *buf, size_t len)
{
	uint8_t *p = buf;
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return n < 0 ? -errno : -EIO;
		}
		p += n;
		len -= (size_t)n;
	}
	close(fd);
	return 0;
}

/* Fill `len` bytes from getrandom(2), falling back to /dev/urandom. */
static int read_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return read_urandom(p, len);
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Last resort when the kernel gives no randomness at all (no getrandom,
 * no /dev/urandom): a splitmix64 sequence seeded from clocks, the pid
 * and an address. Not cryptographic, but never repeats within 2^64 draws.
 */
static uint32_t fallback_word(void)
{
	uint64_t z;

	if (!fallback_state) {
		struct timespec a, b;

		clock_gettime(CLOCK_REALTIME, &a);
		clock_gettime(CLOCK_MONOTONIC, &b);
		fallback_state = ((uint64_t)a.tv_sec << 32) ^ (uint64_t)a.tv_nsec ^
				 ((uint64_t)b.tv_nsec << 20) ^ ((uint64_t)getpid() << 40) ^
				 (uint64_t)(uintptr_t)&fallback_state;
	}
	fallback_state += 0x9e3779b97f4a7c15ULL;
	z = fallback_state;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)(z ^ (z >> 31));
}

/* fork: hold the lock across it; the child must never reuse the parent's pool. */
static void pool_prepare(void)
{
	pthread_mutex_lock(&pool_lock);
}

static void pool_parent(void)
{
	pthread_mutex_unlock(&pool_lock);
}

static void pool_child(void)
{
	memset(pool, 0, sizeof(pool));
	pool_left = 0;
	fallback_state = 0;
	pthread_mutex_unlock(&pool_lock);
}

static void pool_once(void)
{
	pthread_atfork(pool_prepare, pool_parent, pool_child);
}

/* Contract: a random nonzero 32-bit value; thread-safe, never fails. */
uint32_t sw_key_random(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uint32_t v = 0;

	pthread_once(&once, pool_once);
	pthread_mutex_lock(&pool_lock);
	while (!v) {
		if (!pool_left) {
			if (read_random(pool, sizeof(pool)) == 0) {
				pool_left = POOL_WORDS;
			} else {
				v = fallback_word();
				continue;
			}
		}
		v = pool[--pool_left];
		pool[pool_left] = 0; /* a used key never lingers in memory */
	}
	pthread_mutex_unlock(&pool_lock);
	return v;
}

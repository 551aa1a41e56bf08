/* SPDX-License-Identifier: MIT */
/*
 * unit_mr_table: the key -> MR table of the software device.
 *
 * Insert/lookup/remove, the key properties (nonzero, lkey == rkey, unique
 * among 100k live MRs), the limit, growth, tombstone reuse, references
 * that keep a removed MR alive, quiescing for rereg, and a multi-threaded
 * lookup-versus-register/deregister stress.
 */
/* test: timeout=300 */
/* test: label=mt */
#include "harness.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "sw/ctrl.h"

/* A bare MR as the registration code would hand it to the table. */
static struct sw_mr *new_mr(void)
{
	struct sw_mr *mr = calloc(1, sizeof(*mr));

	if (!mr) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	atomic_init(&mr->refcnt, 1);
	mr->fd = -1;
	mr->host = (uint8_t *)mr; /* a self-check readers can verify */
	return mr;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static bool is_pow2(uint32_t v)
{
	return v && !(v & (v - 1));
}

static void test_basic(void)
{
	struct sw_mr_table t;
	struct sw_mr *mr, *a, *b;
	uint32_t key;

	t_case("insert, lookup, remove");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, 16), 0))
		return;
	CHECK(sw_mr_table_lookup(&t, 0) == NULL);
	CHECK(sw_mr_table_lookup(&t, 0x12345678) == NULL);

	mr = new_mr();
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr), 0);
	key = mr->key;
	CHECK(key != 0);
	CHECK_EQ_INT(mr->ibv.lkey, key);
	CHECK_EQ_INT(mr->ibv.rkey, key);
	CHECK_EQ_INT(t.used, 1);

	a = sw_mr_table_lookup(&t, key);
	CHECK(a == mr);
	CHECK_EQ_INT(atomic_load(&mr->refcnt), 2);
	b = sw_mr_table_lookup(&t, key);
	CHECK(b == mr);
	CHECK_EQ_INT(atomic_load(&mr->refcnt), 3);
	if (a)
		sw_mr_put(a);
	if (b)
		sw_mr_put(b);
	CHECK_EQ_INT(atomic_load(&mr->refcnt), 1);
	CHECK(sw_mr_table_lookup(&t, key ^ 1) == NULL);
	CHECK(sw_mr_table_lookup(&t, 0) == NULL);

	/* the app may scribble on the public keys: the table uses its own copy */
	mr->ibv.lkey = 0;
	mr->ibv.rkey = ~key;
	a = sw_mr_table_lookup(&t, key);
	CHECK(a == mr);
	if (a)
		sw_mr_put(a);

	sw_mr_table_remove(&t, mr);
	CHECK_EQ_INT(t.used, 0);
	CHECK(sw_mr_table_lookup(&t, key) == NULL);
	/* removing twice is harmless */
	sw_mr_table_remove(&t, mr);
	CHECK_EQ_INT(t.used, 0);
	CHECK_EQ_INT(atomic_load(&mr->refcnt), 1);
	sw_mr_put(mr);
	sw_mr_table_destroy(&t);

	CHECK_EQ_INT(sw_mr_table_init(&t, 0), -EINVAL);
	/* destroy of a table that still holds MRs drops their registration references */
	CHECK_EQ_INT(sw_mr_table_init(&t, 4), 0);
	CHECK_EQ_INT(sw_mr_table_insert(&t, new_mr()), 0);
	CHECK_EQ_INT(sw_mr_table_insert(&t, new_mr()), 0);
	sw_mr_table_destroy(&t); /* valgrind/ASan: nothing leaks */
}

static void test_limit(void)
{
	struct sw_mr_table t;
	struct sw_mr *mr[4];
	int i;

	t_case("limit");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, 3), 0))
		return;
	for (i = 0; i < 4; i++)
		mr[i] = new_mr();
	for (i = 0; i < 3; i++)
		CHECK_EQ_INT(sw_mr_table_insert(&t, mr[i]), 0);
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr[3]), -ENOMEM);
	CHECK_EQ_INT(mr[3]->key, 0);
	CHECK_EQ_INT(t.used, 3);
	sw_mr_table_remove(&t, mr[1]);
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr[3]), 0);
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr[1]), -ENOMEM);
	sw_mr_put(mr[1]);
	for (i = 0; i < 4; i++) {
		struct sw_mr *m;

		if (i == 1)
			continue;
		m = sw_mr_table_lookup(&t, mr[i]->key);
		CHECK(m == mr[i]);
		if (m)
			sw_mr_put(m);
	}
	sw_mr_table_destroy(&t);
}

enum {
	MANY = 100000
};

static void test_many(void)
{
	struct sw_mr_table t;
	struct sw_mr **mrs = calloc(MANY, sizeof(*mrs));
	uint32_t *keys = calloc(MANY, sizeof(*keys));
	uint32_t grown_from = 0;
	int i, dups = 0, zero = 0, bad = 0;

	t_case("100k unique keys, growth");
	if (!CHECK(mrs && keys) || !CHECK_EQ_INT(sw_mr_table_init(&t, MANY), 0)) {
		free(mrs);
		free(keys);
		return;
	}
	grown_from = t.nslots;
	for (i = 0; i < MANY; i++) {
		mrs[i] = new_mr();
		if (sw_mr_table_insert(&t, mrs[i])) {
			CHECK_MSG(0, "insert %d failed", i);
			sw_mr_put(mrs[i]);
			mrs[i] = NULL;
			break;
		}
		keys[i] = mrs[i]->key;
		zero += !keys[i];
		bad += mrs[i]->ibv.lkey != keys[i] || mrs[i]->ibv.rkey != keys[i];
	}
	CHECK_EQ_INT(t.used, i);
	CHECK(is_pow2(t.nslots));
	CHECK_MSG(t.nslots > grown_from, "table did not grow: %u slots", t.nslots);
	CHECK_MSG((uint64_t)t.used * 4 <= (uint64_t)t.nslots * 3, "load too high: %u/%u", t.used,
		  t.nslots);
	CHECK_EQ_INT(zero, 0);
	CHECK_EQ_INT(bad, 0);
	qsort(keys, (size_t)i, sizeof(*keys), cmp_u32);
	for (int j = 1; j < i; j++)
		dups += keys[j] == keys[j - 1];
	CHECK_EQ_INT(dups, 0);
	/* keys are spread over the whole 31-bit space of MR keys, not sequential */
	CHECK(i < 2 || keys[i - 1] - keys[0] > 0x40000000U);
	CHECK(i < 2 || keys[i - 1] < 0x80000000U); /* bit 31 marks memory windows */
	{
		struct sw_mr *extra = new_mr();

		CHECK_EQ_INT(sw_mr_table_insert(&t, extra), -ENOMEM); /* max is MANY */
		sw_mr_put(extra);
	}

	bad = 0;
	for (int j = 0; j < i; j++) {
		struct sw_mr *m = sw_mr_table_lookup(&t, mrs[j]->key);

		bad += m != mrs[j];
		if (m)
			sw_mr_put(m);
	}
	CHECK_EQ_INT(bad, 0);
	/* remove every other one; the rest still resolve */
	for (int j = 0; j < i; j += 2) {
		sw_mr_table_remove(&t, mrs[j]);
		sw_mr_put(mrs[j]);
	}
	bad = 0;
	for (int j = 1; j < i; j += 2) {
		struct sw_mr *m = sw_mr_table_lookup(&t, mrs[j]->key);

		bad += m != mrs[j];
		if (m)
			sw_mr_put(m);
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(t.used, i / 2);
	sw_mr_table_destroy(&t);
	free(mrs);
	free(keys);
}

/*
 * Churn with few live entries: tombstones are reused or swept, so the
 * table never grows and dead slots stay bounded.
 */
static void test_tombstones(void)
{
	struct sw_mr_table t;
	struct sw_mr *live[8] = {0};
	struct sw_mr *keep;
	uint32_t slots0;
	unsigned int reused = 0, max_tombs = 0;
	int i, round, bad = 0;

	t_case("tombstone reuse");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, 1000), 0))
		return;
	keep = new_mr();
	CHECK_EQ_INT(sw_mr_table_insert(&t, keep), 0);

	/* many dead slots, then inserts: some land on a tombstone */
	for (round = 0; round < 20; round++) {
		struct sw_mr *tmp[39];
		uint32_t before;

		for (i = 0; i < 39; i++) {
			tmp[i] = new_mr();
			CHECK_EQ_INT(sw_mr_table_insert(&t, tmp[i]), 0);
		}
		for (i = 0; i < 39; i++) {
			sw_mr_table_remove(&t, tmp[i]);
			sw_mr_put(tmp[i]);
		}
		before = t.tombs;
		for (i = 0; i < 8; i++) {
			uint32_t tb = t.tombs;

			live[i] = new_mr();
			CHECK_EQ_INT(sw_mr_table_insert(&t, live[i]), 0);
			reused += t.tombs < tb && t.tombs != 0;
		}
		CHECK(t.tombs <= before);
		for (i = 0; i < 8; i++) {
			sw_mr_table_remove(&t, live[i]);
			sw_mr_put(live[i]);
		}
	}
	CHECK_MSG(reused > 0, "no insert ever reused a tombstone");

	/* long churn: bounded tombstones, no growth */
	slots0 = t.nslots;
	for (round = 0; round < 20000; round++) {
		struct sw_mr *m = new_mr();

		if (sw_mr_table_insert(&t, m)) {
			bad++;
			sw_mr_put(m);
			continue;
		}
		sw_mr_table_remove(&t, m);
		sw_mr_put(m);
		if (t.tombs > max_tombs)
			max_tombs = t.tombs;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_MSG(t.nslots == slots0, "table grew from %u to %u slots with 1 live MR", slots0,
		  t.nslots);
	CHECK_MSG((uint64_t)max_tombs * 4 <= (uint64_t)t.nslots * 3, "%u tombstones in %u slots",
		  max_tombs, t.nslots);
	CHECK_EQ_INT(t.used, 1);
	{
		struct sw_mr *m = sw_mr_table_lookup(&t, keep->key);

		CHECK(m == keep);
		if (m)
			sw_mr_put(m);
	}
	/* the last removal clears every dead slot */
	sw_mr_table_remove(&t, keep);
	sw_mr_put(keep);
	CHECK_EQ_INT(t.used, 0);
	CHECK_EQ_INT(t.tombs, 0);
	sw_mr_table_destroy(&t);
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

static void test_ref_keeps_alive(void)
{
	struct sw_mr_table t;
	struct sw_mr *mr, *ref;
	int p[2];
	uint32_t key;

	t_case("a lookup reference keeps a removed MR alive");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, 8), 0))
		return;
	if (!CHECK_EQ_INT(pipe(p), 0))
		return;
	close(p[1]);
	mr = new_mr();
	mr->fd = p[0]; /* sw_mr_put closes it with the MR */
	mr->length = 4242;
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr), 0);
	key = mr->key;

	ref = sw_mr_table_lookup(&t, key);
	CHECK(ref == mr);
	sw_mr_table_remove(&t, mr); /* deregistration: */
	sw_mr_put(mr); /* drop the registration reference */
	CHECK(sw_mr_table_lookup(&t, key) == NULL);
	if (ref) {
		CHECK(fd_open(p[0]));
		CHECK_EQ_INT(ref->length, 4242);
		CHECK_EQ_INT(ref->key, key);
		CHECK_EQ_INT(atomic_load(&ref->refcnt), 1);
		sw_mr_get(ref);
		CHECK_EQ_INT(atomic_load(&ref->refcnt), 2);
		sw_mr_put(ref);
		CHECK(fd_open(p[0]));
		sw_mr_put(ref); /* the last reference frees it */
	}
	CHECK(!fd_open(p[0]));
	sw_mr_table_destroy(&t);
}

struct holder {
	struct sw_mr *ref;
	atomic_int released;
};

static void *hold_then_put(void *arg)
{
	struct holder *h = arg;
	struct timespec ts = {0, 200 * 1000 * 1000};

	nanosleep(&ts, NULL);
	atomic_store(&h->released, 1);
	sw_mr_put(h->ref);
	return NULL;
}

static void test_block(void)
{
	struct sw_mr_table t;
	struct holder h;
	struct sw_mr *mr, *m;
	pthread_t th;

	t_case("block waits for references, unblock restores lookups");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, 8), 0))
		return;
	mr = new_mr();
	CHECK_EQ_INT(sw_mr_table_insert(&t, mr), 0);

	/* no reference outstanding: returns at once */
	sw_mr_table_block(&t, mr);
	CHECK(sw_mr_table_lookup(&t, mr->key) == NULL);
	sw_mr_table_unblock(&t, mr);
	m = sw_mr_table_lookup(&t, mr->key);
	CHECK(m == mr);

	/* a reference held by another thread: block returns only after its put */
	h.ref = m;
	atomic_init(&h.released, 0);
	if (m && CHECK_EQ_INT(pthread_create(&th, NULL, hold_then_put, &h), 0)) {
		sw_mr_table_block(&t, mr);
		CHECK_MSG(atomic_load(&h.released) == 1,
			  "block returned while a reference was held");
		CHECK_EQ_INT(atomic_load(&mr->refcnt), 1);
		CHECK(sw_mr_table_lookup(&t, mr->key) == NULL);
		pthread_join(th, NULL);
		sw_mr_table_unblock(&t, mr);
		m = sw_mr_table_lookup(&t, mr->key);
		CHECK(m == mr);
		if (m)
			sw_mr_put(m);
	}
	sw_mr_table_remove(&t, mr);
	sw_mr_put(mr);
	sw_mr_table_destroy(&t);
}

static bool length_is(const struct sw_mr *mr, const void *arg)
{
	return mr->length == *(const uint64_t *)arg;
}

static void test_remove_matching(void)
{
	enum {
		N = 300
	};
	static struct sw_mr *mrs[N];
	struct sw_mr *out[64];
	struct sw_mr_table t;
	const uint64_t one = 1;
	uint32_t cursor = 0;
	size_t n, total = 0;
	int i, bad = 0, passes = 0;

	t_case("remove_matching in batches");
	if (!CHECK_EQ_INT(sw_mr_table_init(&t, N), 0))
		return;
	for (i = 0; i < N; i++) {
		mrs[i] = new_mr();
		mrs[i]->length = (uint64_t)(i & 1);
		CHECK_EQ_INT(sw_mr_table_insert(&t, mrs[i]), 0);
	}
	do {
		n = sw_mr_table_remove_matching(&t, length_is, &one, &cursor, out, 64);
		for (size_t j = 0; j < n; j++) {
			bad += out[j]->length != 1;
			sw_mr_put(out[j]);
		}
		total += n;
		passes++;
	} while (n == 64);
	CHECK_EQ_INT(total, N / 2);
	CHECK_EQ_INT(passes, N / 2 / 64 + 1);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(t.used, N / 2);
	for (i = 0; i < N; i += 2) {
		struct sw_mr *m = sw_mr_table_lookup(&t, mrs[i]->key);

		bad += m != mrs[i];
		if (m)
			sw_mr_put(m);
	}
	CHECK_EQ_INT(bad, 0);
	cursor = 0;
	CHECK_EQ_INT(sw_mr_table_remove_matching(&t, length_is, &one, &cursor, out, 64), 0);
	sw_mr_table_destroy(&t);
}

/* Keys: nonzero, and a forked child does not replay the parent's pool. */
static void test_keys_fork(void)
{
	uint32_t mine[8], theirs[8];
	int p[2], i, j, status, same = 0, zero = 0;
	pid_t pid;

	t_case("a forked child never repeats the parent's keys");
	(void)sw_key_random(); /* the pool is filled now */
	if (!CHECK_EQ_INT(pipe(p), 0))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		for (i = 0; i < 8; i++)
			theirs[i] = sw_key_random();
		_exit(write(p[1], theirs, sizeof(theirs)) == sizeof(theirs) ? 0 : 1);
	}
	close(p[1]);
	for (i = 0; i < 8; i++)
		mine[i] = sw_key_random();
	CHECK_EQ_INT(read(p[0], theirs, sizeof(theirs)), (long long)sizeof(theirs));
	close(p[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0);
	for (i = 0; i < 8; i++) {
		zero += !mine[i] + !theirs[i];
		for (j = 0; j < 8; j++)
			same += mine[i] == theirs[j];
	}
	CHECK_EQ_INT(zero, 0);
	CHECK_EQ_INT(same, 0);
}

/* ---- concurrency stress ------------------------------------------------ */

enum {
	NPUB = 256,
	NREADERS = 4,
	NWRITERS = 2
};

struct stress {
	struct sw_mr_table t;
	_Atomic uint32_t pub[NPUB]; /* keys of live MRs, 0 = none */
	atomic_bool stop;
	atomic_long found, misses, errors, regs;
	atomic_long progress; /* lookups that found an MR, so far (in steps of 256) */
};

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static void *reader(void *arg)
{
	struct stress *st = arg;
	uint64_t rnd = (uint64_t)(uintptr_t)&rnd | 1;
	long found = 0, misses = 0, errors = 0;

	while (!atomic_load(&st->stop)) {
		uint64_t r = xorshift(&rnd);

		if (!(r & 4095))
			sched_yield(); /* let a serialising scheduler (valgrind) run main */
		/* mostly published keys, sometimes a random one */
		uint32_t key =
			(r & 15) ? atomic_load(&st->pub[(r >> 8) % NPUB]) : (uint32_t)(r >> 32);
		struct sw_mr *mr = sw_mr_table_lookup(&st->t, key);

		if (!mr) {
			misses++;
			continue;
		}
		found++;
		if (!(found & 255))
			atomic_fetch_add(&st->progress, 256);
		/* the MR must be intact while referenced */
		if (mr->key != key || mr->host != (uint8_t *)mr || atomic_load(&mr->refcnt) < 1)
			errors++;
		sw_mr_put(mr);
	}
	atomic_fetch_add(&st->found, found);
	atomic_fetch_add(&st->misses, misses);
	atomic_fetch_add(&st->errors, errors);
	return NULL;
}

struct writer_arg {
	struct stress *st;
	int first; /* owns pub[first], pub[first + NWRITERS], ... */
};

static void *writer(void *arg)
{
	struct writer_arg *w = arg;
	struct stress *st = w->st;
	struct sw_mr *mine[NPUB] = {0};
	uint64_t rnd = (uint64_t)(uintptr_t)&rnd | 1;
	long regs = 0;
	int i;

	while (!atomic_load(&st->stop)) {
		int slot = w->first + NWRITERS * (int)(xorshift(&rnd) % (NPUB / NWRITERS));

		if (!(rnd & (4095ULL << 32)))
			sched_yield();

		if (mine[slot]) {
			atomic_store(&st->pub[slot], 0);
			sw_mr_table_remove(&st->t, mine[slot]);
			sw_mr_put(mine[slot]);
			mine[slot] = NULL;
		} else {
			struct sw_mr *mr = new_mr();

			if (sw_mr_table_insert(&st->t, mr)) {
				atomic_fetch_add(&st->errors, 1);
				sw_mr_put(mr);
				continue;
			}
			mine[slot] = mr;
			atomic_store(&st->pub[slot], mr->key);
			regs++;
		}
	}
	for (i = 0; i < NPUB; i++) {
		if (mine[i]) {
			sw_mr_table_remove(&st->t, mine[i]);
			sw_mr_put(mine[i]);
		}
	}
	atomic_fetch_add(&st->regs, regs);
	return NULL;
}

static void test_stress(void)
{
	static struct stress st;
	struct writer_arg wa[NWRITERS];
	pthread_t rd[NREADERS], wr[NWRITERS];
	struct timespec step = {0, 100 * 1000 * 1000};
	int i, ms, nr = 0, nw = 0;

	t_case("concurrent lookups vs register/deregister");
	memset(&st, 0, sizeof(st));
	if (!CHECK_EQ_INT(sw_mr_table_init(&st.t, 100000), 0))
		return;
	for (i = 0; i < NREADERS; i++)
		nr += !pthread_create(&rd[nr], NULL, reader, &st);
	for (i = 0; i < NWRITERS; i++) {
		wa[i].st = &st;
		wa[i].first = i;
		nw += !pthread_create(&wr[nw], NULL, writer, &wa[i]);
	}
	CHECK_EQ_INT(nr, NREADERS);
	CHECK_EQ_INT(nw, NWRITERS);
	/*
	 * At least 2 s, and until readers have found MRs while writers churn:
	 * a serialising scheduler (valgrind) may need longer. At most 60 s.
	 */
	for (ms = 0; ms < 60000; ms += 100) {
		if (ms >= 2000 && atomic_load(&st.progress) >= 1024)
			break;
		nanosleep(&step, NULL);
	}
	atomic_store(&st.stop, true);
	for (i = 0; i < nr; i++)
		pthread_join(rd[i], NULL);
	for (i = 0; i < nw; i++)
		pthread_join(wr[i], NULL);
	printf("# %ld registrations, %ld lookups found, %ld missed\n", atomic_load(&st.regs),
	       atomic_load(&st.found), atomic_load(&st.misses));
	CHECK_EQ_INT(atomic_load(&st.errors), 0);
	CHECK(atomic_load(&st.found) >= 1024);
	CHECK(atomic_load(&st.regs) > 0);
	CHECK_EQ_INT(st.t.used, 0);
	sw_mr_table_destroy(&st.t);
}

int main(void)
{
	t_start("unit_mr_table");
	test_basic();
	test_limit();
	test_many();
	test_tombstones();
	test_ref_keeps_alive();
	test_block();
	test_remove_matching();
	test_keys_fork();
	test_stress();
	return t_finish();
}

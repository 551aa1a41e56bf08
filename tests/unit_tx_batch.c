/* SPDX-License-Identifier: MIT */
/*
 * unit_tx_batch: the threads' send batches (sw_net_tx_batch, net.c).
 *
 *   - a thread gets the same batch on every call; two live threads get
 *     two batches;
 *   - a thread that exits gives its batch back: the next thread that
 *     asks gets that one, not a new allocation;
 *   - fork while another thread holds a batch: the child (one thread)
 *     gets a batch of its own and exits cleanly. Under valgrind
 *     (unit_tx_batch.memcheck) the child's leak check must find nothing
 *     lost: the other thread's batch, whose thread does not exist in the
 *     child, stays reachable from the list. Before the list, that batch
 *     was "definitely lost" in every forked child whose parent's
 *     progress thread had sent (api_single_copy's fork case failed so
 *     under load).
 */
#include "harness.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sw/transport/transport_priv.h"

/*
 * The batches the threads saw, complemented: no word here may point at a
 * batch, or valgrind would find the batches reachable through us.
 */
static uintptr_t seen[2];

static uintptr_t hide(const struct sw_tx_batch *b)
{
	return ~(uintptr_t)b;
}
static pthread_barrier_t held; /* both threads hold their batch */
static pthread_barrier_t done; /* the main thread has finished looking */

static void *hold_one(void *arg)
{
	int i = (int)(intptr_t)arg;

	seen[i] = hide(sw_net_tx_batch());
	pthread_barrier_wait(&held);
	pthread_barrier_wait(&done);
	return NULL;
}

static void *take_one(void *arg)
{
	(void)arg;
	seen[0] = hide(sw_net_tx_batch());
	return NULL;
}

int main(void)
{
	struct sw_tx_batch *mine;
	uintptr_t gone[2];
	pthread_t t[2];
	int st = 0;
	pid_t pid;

	t_start("unit_tx_batch");

	t_case("one batch per thread, the same on every call");
	mine = sw_net_tx_batch();
	CHECK(mine != NULL);
	CHECK(sw_net_tx_batch() == mine);
	pthread_barrier_init(&held, NULL, 3);
	pthread_barrier_init(&done, NULL, 3);
	CHECK(!pthread_create(&t[0], NULL, hold_one, (void *)(intptr_t)0));
	CHECK(!pthread_create(&t[1], NULL, hold_one, (void *)(intptr_t)1));
	pthread_barrier_wait(&held);
	CHECK(seen[0] != hide(NULL) && seen[1] != hide(NULL) && seen[0] != seen[1] &&
	      seen[0] != hide(mine) && seen[1] != hide(mine));

	t_case("fork while another thread holds a batch: the child takes its own");
	pid = fork();
	if (pid == 0) {
		struct sw_tx_batch *b = sw_net_tx_batch();

		/* the parent's main thread is this one: its batch carries over */
		_exit(b == mine ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "child status %#x (99: valgrind found an error, a leak)", st);
	pthread_barrier_wait(&done);
	CHECK(!pthread_join(t[0], NULL) && !pthread_join(t[1], NULL));

	t_case("a thread that exits gives its batch to the next one");
	gone[0] = seen[0];
	gone[1] = seen[1];
	seen[0] = hide(NULL);
	CHECK(!pthread_create(&t[0], NULL, take_one, NULL));
	CHECK(!pthread_join(t[0], NULL));
	/* either exited thread's batch, whichever the list gives first */
	CHECK_MSG(seen[0] == gone[0] || seen[0] == gone[1],
		  "got %#lx, not %#lx or %#lx (a new allocation)", (unsigned long)~seen[0],
		  (unsigned long)~gone[0], (unsigned long)~gone[1]);
	pthread_barrier_destroy(&held);
	pthread_barrier_destroy(&done);
	return t_finish();
}

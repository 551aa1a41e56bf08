/* SPDX-License-Identifier: MIT */
/*
 * exit_report.c - SOFTVERBS_STATS=1 also for programs that exit without
 * closing their device (perftest and others do, on some paths).
 *
 * Every engine started with stats on is noted in a process-wide list.
 * Its totals (sw_engine_report(), engine.c) are printed exactly once:
 * when the engine stops (last context closed), or, if it never does,
 * when the library is finalised (exit(), or dlclose() of the library).
 * The exit-time report is followed by a line saying so. It reads only
 * counters, which are atomics, and frees nothing, so it is safe while the
 * device's progress thread still runs. A forked child inherits the list
 * but never prints its parent's devices (each entry names the process
 * that started it); the list's lock is held across fork() so that the
 * child never finds it taken.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sw/transport/transport.h"

struct live_eng {
	struct sw_engine *eng;
	pid_t pid; /* the process that started it */
	bool reported;
	struct live_eng *next;
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct live_eng *live;
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void live_prepare(void)
{
	pthread_mutex_lock(&live_lock);
}

static void live_release(void)
{
	pthread_mutex_unlock(&live_lock);
}

static void live_setup(void)
{
	pthread_atfork(live_prepare, live_release, live_release);
}

/* Contract: see transport.h. */
void sw_engine_report_track(struct sw_engine *eng)
{
	struct live_eng *l;

	if (!eng->dev->cfg.stats)
		return;
	pthread_once(&live_once, live_setup);
	l = calloc(1, sizeof(*l));
	if (!l)
		return; /* reported at close only */
	l->eng = eng;
	l->pid = getpid();
	pthread_mutex_lock(&live_lock);
	l->next = live;
	live = l;
	pthread_mutex_unlock(&live_lock);
}

/* Contract: see transport.h. */
void sw_engine_report_final(struct sw_engine *eng)
{
	struct live_eng **pp, *l = NULL;
	bool done = false;

	pthread_mutex_lock(&live_lock);
	for (pp = &live; *pp; pp = &(*pp)->next)
		if ((*pp)->eng == eng) {
			l = *pp;
			*pp = l->next;
			done = l->reported;
			break;
		}
	if (!done)
		sw_engine_report(eng);
	pthread_mutex_unlock(&live_lock);
	free(l);
}

/* At exit (or dlclose): the totals of every device of this process still open. */
__attribute__((destructor)) static void engine_report_at_exit(void)
{
	pid_t me = getpid();

	pthread_mutex_lock(&live_lock);
	for (struct live_eng *l = live; l; l = l->next) {
		if (l->reported || l->pid != me)
			continue;
		l->reported = true;
		sw_engine_report(l->eng);
		fprintf(stderr, "softverbs:   (printed at exit: %s was still open)\n",
			l->eng->dev->core.ibv.name);
	}
	pthread_mutex_unlock(&live_lock);
	fflush(stderr);
}

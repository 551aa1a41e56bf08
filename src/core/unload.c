/* SPDX-License-Identifier: MIT */
/*
 * unload.c - the library's destructor, the one place where softverbs
 * reacts to being unloaded.
 *
 * It runs when the last dlclose() unmaps libibverbs.so.1 and when the
 * process exits (exit(), or a return from main; not _exit()). Either way
 * every thread the library started must be gone before its code is: the
 * devices end them (sv_sw_unload) without freeing anything the program
 * may still hold.
 */
#include "core/core.h"

__attribute__((destructor)) static void sv_library_unload(void)
{
	sv_sw_unload();
}

/*
 * lines.h - cache-line placement of data that several threads share.
 *
 * A field one thread writes often evicts every other field of its cache
 * line from the caches of the threads that read them: producers reading a
 * flag next to a counter the scheduler thread increments miss on every
 * read. Structs shared that way start each group of fields written by one
 * thread (or read on every op and rarely written) on a line of its own
 * (NXV_LINE_ALIGNED) and are allocated with nxv_lines_alloc, which honours
 * that alignment.
 */
#ifndef NXV_SCHED_LINES_H
#define NXV_SCHED_LINES_H

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

/* Cache line size assumed for placement (x86-64 and most arm64 cores;
 * adjacent-line prefetchers make 128 better on some, at twice the space). */
#define NXV_CACHE_LINE 64

/* Starts the member it qualifies on a cache line of its own. */
#define NXV_LINE_ALIGNED alignas(NXV_CACHE_LINE)

/* size zeroed bytes aligned to NXV_CACHE_LINE (its size rounded up to
 * whole lines), for a struct with NXV_LINE_ALIGNED members; NULL when out
 * of memory. Free with free(). Thread-safe. */
static inline void *nxv_lines_alloc(size_t size) {
  size_t rounded = (size + NXV_CACHE_LINE - 1) & ~(size_t)(NXV_CACHE_LINE - 1);
  void *p = aligned_alloc(NXV_CACHE_LINE, rounded);
  if (p) memset(p, 0, rounded);
  return p;
}

#endif

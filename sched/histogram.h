/*
 * histogram.h - a fixed-bucket latency histogram that any thread may add to
 * and read at any time, without locks.
 *
 * Buckets (NXV_HISTOGRAM_BUCKETS, the same for every histogram, see nxv.h):
 * bucket 0 counts values below 256 ns, bucket i (1 .. 30) values in
 * [2^(i+7), 2^(i+8)) ns, bucket 31 values of 2^38 ns (about 275 s) and
 * more. Alongside: the count, the sum and the largest value.
 *
 * A snapshot taken while values are added is consistent per field, not
 * across fields: every value its count includes is in its buckets, sum and
 * max, which may also include values added since.
 */
#ifndef NXV_SCHED_HISTOGRAM_H
#define NXV_SCHED_HISTOGRAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "nxv.h"

typedef struct nxv_hist {
  atomic_uint_fast64_t buckets[NXV_HISTOGRAM_BUCKETS]; /* values per bucket */
  atomic_uint_fast64_t count;  /* values added */
  atomic_uint_fast64_t sum_ns; /* their sum */
  atomic_uint_fast64_t max_ns; /* the largest */
} nxv_hist;

/* Zeroes h. Not thread-safe (call before sharing h). */
void nxv_hist_init(nxv_hist *h);

/* Adds one value. Thread-safe, lock-free (the count is added last, with
 * release order; see nxv_hist_snapshot). */
void nxv_hist_add(nxv_hist *h, uint64_t ns);

/* Gathers one value into l, a plain histogram owned by the calling
 * thread (no atomics), to be added to an nxv_hist later in one step. */
void nxv_hist_local_add(nxv_histogram *l, uint64_t ns);

/* Adds everything l gathered to h: one atomic add per non-empty bucket
 * instead of three per value. Thread-safe for h (l belongs to the
 * caller); l is left unchanged. */
void nxv_hist_merge(nxv_hist *h, const nxv_histogram *l);

/* The bucket ns falls in. Pure function. */
uint32_t nxv_hist_bucket(uint64_t ns);

/* Copies h into out. Thread-safe. */
void nxv_hist_snapshot(const nxv_hist *h, nxv_histogram *out);

#endif

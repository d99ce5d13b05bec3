/*
 * histogram.c - fixed-bucket latency histograms (see histogram.h).
 */
#include "sched/histogram.h"

#include <string.h>

void nxv_hist_init(nxv_hist *h) {
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++) atomic_init(&h->buckets[i], 0);
  atomic_init(&h->count, 0);
  atomic_init(&h->sum_ns, 0);
  atomic_init(&h->max_ns, 0);
}

uint32_t nxv_hist_bucket(uint64_t ns) {
  if (ns < 256) return 0;
  uint32_t log2 = 63u - (uint32_t)__builtin_clzll(ns); /* >= 8 */
  uint32_t b = log2 - 7u;
  return b < NXV_HISTOGRAM_BUCKETS - 1 ? b : NXV_HISTOGRAM_BUCKETS - 1;
}

uint64_t nxv_histogram_bucket_limit(uint32_t bucket) {
  if (bucket >= NXV_HISTOGRAM_BUCKETS - 1) return UINT64_MAX;
  return 256ull << bucket;
}

void nxv_hist_add(nxv_hist *h, uint64_t ns) {
  atomic_fetch_add_explicit(&h->buckets[nxv_hist_bucket(ns)], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
  uint_fast64_t max = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
  while (ns > max && !atomic_compare_exchange_weak_explicit(&h->max_ns, &max, ns,
                                                            memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
  atomic_fetch_add_explicit(&h->count, 1, memory_order_release);
}

void nxv_hist_local_add(nxv_histogram *l, uint64_t ns) {
  l->buckets[nxv_hist_bucket(ns)]++;
  l->count++;
  l->sum_ns += ns;
  if (ns > l->max_ns) l->max_ns = ns;
}

void nxv_hist_merge(nxv_hist *h, const nxv_histogram *l) {
  if (!l->count) return;
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++)
    if (l->buckets[i])
      atomic_fetch_add_explicit(&h->buckets[i], l->buckets[i], memory_order_relaxed);
  atomic_fetch_add_explicit(&h->sum_ns, l->sum_ns, memory_order_relaxed);
  uint_fast64_t max = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
  while (l->max_ns > max &&
         !atomic_compare_exchange_weak_explicit(&h->max_ns, &max, l->max_ns,
                                                memory_order_relaxed, memory_order_relaxed)) {
  }
  atomic_fetch_add_explicit(&h->count, l->count, memory_order_release);
}

void nxv_hist_snapshot(const nxv_hist *h, nxv_histogram *out) {
  memset(out, 0, sizeof *out);
  /* count first (acquire): every value it counts is in the other fields. */
  out->count = atomic_load_explicit(&h->count, memory_order_acquire);
  for (uint32_t i = 0; i < NXV_HISTOGRAM_BUCKETS; i++)
    out->buckets[i] = atomic_load_explicit(&h->buckets[i], memory_order_relaxed);
  out->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
  out->max_ns = atomic_load_explicit(&h->max_ns, memory_order_relaxed);
}

#include "pool/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sched/status.h"

#define NXV_POOL_CLASSES (1 + 4 * 56)
#define NXV_SLAB_MIN_BYTES (256u << 10)
#define NXV_SLAB_MAX_BYTES (8u << 20)

struct nxv_block {
  VkDeviceMemory mem;        /* owned */
  VkBuffer buf;              /* owned */
  VkDeviceAddress addr;      /* device address of buf */
  VkDeviceSize size;         /* bytes */
  void *host;                /* persistent mapping of mem, or NULL */
  uint32_t class_idx;
  uint32_t slots;            /* buffers the block can hold (1 if dedicated) */
  uint32_t carved;           /* slots handed out at least once */
  uint32_t free_slots;       /* carved slots now on the free list */
  struct nxv_block *next;    /* all blocks of the pool */
};

struct nxv_pool {
  const nxv_vk *vk;          /* not owned */
  pthread_mutex_t mutex;     /* guards everything below */
  uint32_t memory_type;
  uint32_t heap;
  int32_t mapped_type;       /* host-visible device-local type, -1: none */
  uint32_t mapped_heap;
  uint64_t mapped;           /* bytes reserved in mapped blocks */
  uint64_t limit_config;     /* 0 = derive from the budget */
  uint64_t max_buffer;       /* largest single buffer */
  nxv_buffer *free_lists[NXV_POOL_CLASSES];
  nxv_block *slab_open[NXV_POOL_CLASSES]; /* slab being carved */
  nxv_block *blocks;
  uint64_t reserved, in_use, peak, hits, misses, allocations, frees, trims;
  uint64_t live;
};

uint32_t nxv_pool_class_of(uint64_t bytes) {
  if (bytes <= 256) return 0;
  uint64_t s = bytes - 1;
  uint32_t k = 63u - (uint32_t)__builtin_clzll(s); /* 2^k <= s < 2^(k+1) */
  uint32_t sub = (uint32_t)((s - (1ull << k)) >> (k - 2));
  return (k - 8) * 4 + sub + 1;
}

uint64_t nxv_pool_class_size(uint32_t c) {
  if (c == 0) return 256;
  uint32_t k = (c - 1) / 4 + 8, sub = (c - 1) % 4;
  return (1ull << k) + (uint64_t)(sub + 1) * (1ull << (k - 2));
}

static const VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
    VK_BUFFER_USAGE_TRANSFER_DST_BIT |
    VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;

nxv_status nxv_pool_create(const nxv_vk *vk, uint64_t limit_bytes,
                           bool map_small, nxv_pool **out_pool) {
  /* Learn which memory types a storage buffer may use. */
  VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            .size = 256,
                            .usage = kUsage,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer probe;
  NXV_VK_TRY(vkCreateBuffer(vk->device, &bci, NULL, &probe));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(vk->device, probe, &req);
  vkDestroyBuffer(vk->device, probe, NULL);
  int32_t type = nxv_vk_find_memory(vk, req.memoryTypeBits,
                                    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                                    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  if (type < 0)
    type = nxv_vk_find_memory(vk, req.memoryTypeBits, 0, 0, 0);
  if (type < 0)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "no memory type can back a storage buffer");
  nxv_pool *p = calloc(1, sizeof *p);
  if (!p) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "allocating the pool");
  p->vk = vk;
  p->memory_type = (uint32_t)type;
  p->heap = vk->mem.memoryTypes[type].heapIndex;
  const VkMemoryPropertyFlags mapped_flags =
      VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  p->mapped_type = -1;
  if (map_small) {
    /* Prefer the pool's own type when it qualifies (unified memory). */
    if ((vk->mem.memoryTypes[type].propertyFlags & mapped_flags) == mapped_flags)
      p->mapped_type = type;
    else
      p->mapped_type = nxv_vk_find_memory(vk, req.memoryTypeBits, mapped_flags,
                                          0, 0);
    if (p->mapped_type >= 0)
      p->mapped_heap = vk->mem.memoryTypes[p->mapped_type].heapIndex;
  }
  p->limit_config = limit_bytes;
  uint64_t m = vk->info.max_memory_allocation_size;
  if (vk->info.max_storage_buffer_range < m) m = vk->info.max_storage_buffer_range;
  if (vk->info.max_buffer_size && vk->info.max_buffer_size < m)
    m = vk->info.max_buffer_size;
  p->max_buffer = m;
  pthread_mutex_init(&p->mutex, NULL);
  *out_pool = p;
  return NXV_OK;
}

static void block_free(nxv_pool *p, nxv_block *b) {
  vkDestroyBuffer(p->vk->device, b->buf, NULL);
  vkFreeMemory(p->vk->device, b->mem, NULL); /* also unmaps */
  p->reserved -= b->size;
  if (b->host) p->mapped -= b->size;
  p->frees++;
  free(b);
}

static void unlink_block(nxv_pool *p, nxv_block *b) {
  for (nxv_block **pp = &p->blocks; *pp; pp = &(*pp)->next)
    if (*pp == b) {
      *pp = b->next;
      return;
    }
}

/* Frees free memory; pool mutex held. Returns bytes released. */
static uint64_t trim_locked(nxv_pool *p) {
  uint64_t before = p->reserved;
  for (uint32_t c = 0; c < NXV_POOL_CLASSES; c++) {
    nxv_buffer **pp = &p->free_lists[c];
    while (*pp) {
      nxv_buffer *buf = *pp;
      nxv_block *b = buf->block;
      if (b->slots == 1) { /* dedicated */
        *pp = buf->next;
        unlink_block(p, b);
        block_free(p, b);
        free(buf);
        continue;
      }
      /* A slab goes only when every slot it carved is free. */
      if (b->free_slots == b->carved) {
        if (p->slab_open[c] == b) p->slab_open[c] = NULL;
        *pp = buf->next;
        free(buf);
        if (--b->free_slots == 0) {
          b->carved = 0;
          unlink_block(p, b);
          block_free(p, b);
        } else {
          b->carved--; /* keep the counts consistent while draining */
        }
        continue;
      }
      pp = &buf->next;
    }
  }
  p->trims++;
  return before - p->reserved;
}

uint64_t nxv_pool_trim(nxv_pool *p) {
  pthread_mutex_lock(&p->mutex);
  uint64_t r = trim_locked(p);
  pthread_mutex_unlock(&p->mutex);
  return r;
}

static uint64_t limit_locked(nxv_pool *p) {
  if (p->limit_config) return p->limit_config;
  return nxv_vk_heap_budget(p->vk, p->heap) / 10 * 9;
}

/* Cap on mapped bytes: NXV_POOL_MAPPED_CAP or a quarter of the mapped
 * heap's budget (a small BAR window must stay available to others). */
static uint64_t mapped_limit_locked(nxv_pool *p) {
  uint64_t quarter = nxv_vk_heap_budget(p->vk, p->mapped_heap) / 4;
  return quarter < NXV_POOL_MAPPED_CAP ? quarter : NXV_POOL_MAPPED_CAP;
}

/* New block of size bytes for class c; pool mutex held. mapped: in the
 * mapped memory type, persistently mapped (a failure there is returned
 * without trimming: the caller falls back to ordinary memory). */
static nxv_status block_new(nxv_pool *p, uint32_t c, uint64_t size,
                            uint32_t slots, bool mapped, nxv_block **out) {
  uint32_t memory_type = mapped ? (uint32_t)p->mapped_type : p->memory_type;
  for (int attempt = 0;; attempt++) {
    uint64_t limit = limit_locked(p);
    if (p->reserved + size > limit) {
      if (!mapped && attempt == 0 && trim_locked(p) > 0) continue;
      return nxv_fail(NXV_ERR_OUT_OF_DEVICE_MEMORY,
                      "device memory pool: %llu bytes requested, %llu "
                      "reserved, limit %llu (heap budget)",
                      (unsigned long long)size,
                      (unsigned long long)p->reserved,
                      (unsigned long long)limit);
    }
    VkDevice dev = p->vk->device;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                              .size = size,
                              .usage = kUsage,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkBuffer buf;
    VkResult r = vkCreateBuffer(dev, &bci, NULL, &buf);
    if (r != VK_SUCCESS) return nxv_fail_vk(r, "vkCreateBuffer (pool block)");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev, buf, &req);
    VkMemoryDedicatedAllocateInfo ded = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
        .buffer = buf};
    VkMemoryAllocateFlagsInfo flags = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
        .pNext = &ded,
        .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                .pNext = &flags,
                                .allocationSize = req.size,
                                .memoryTypeIndex = memory_type};
    VkDeviceMemory mem;
    void *host = NULL;
    const char *what = "vkAllocateMemory (pool block)";
    if (!((req.memoryTypeBits >> memory_type) & 1u)) {
      vkDestroyBuffer(dev, buf, NULL);
      return nxv_fail(NXV_ERR_UNSUPPORTED,
                      "pool block: memory type %u cannot back this buffer",
                      memory_type);
    }
    r = vkAllocateMemory(dev, &mai, NULL, &mem);
    if (r == VK_SUCCESS) {
      what = "vkBindBufferMemory (pool block)";
      r = vkBindBufferMemory(dev, buf, mem, 0);
      if (r == VK_SUCCESS && mapped) {
        what = "vkMapMemory (pool block)";
        r = vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &host);
      }
    } else {
      mem = VK_NULL_HANDLE;
    }
    if (r != VK_SUCCESS) {
      vkDestroyBuffer(dev, buf, NULL);
      if (mem) vkFreeMemory(dev, mem, NULL);
      if ((r == VK_ERROR_OUT_OF_DEVICE_MEMORY ||
           r == VK_ERROR_OUT_OF_HOST_MEMORY) &&
          !mapped && attempt == 0 && trim_locked(p) > 0)
        continue;
      return nxv_fail_vk(r, what);
    }
    nxv_block *b = calloc(1, sizeof *b);
    if (!b) {
      vkDestroyBuffer(dev, buf, NULL);
      vkFreeMemory(dev, mem, NULL);
      return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pool block");
    }
    VkBufferDeviceAddressInfo ai = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = buf};
    b->mem = mem;
    b->buf = buf;
    b->addr = vkGetBufferDeviceAddress(dev, &ai);
    b->size = req.size;
    b->host = host;
    b->class_idx = c;
    b->slots = slots;
    b->next = p->blocks;
    p->blocks = b;
    p->reserved += req.size;
    if (host) p->mapped += req.size;
    p->allocations++;
    *out = b;
    return NXV_OK;
  }
}

nxv_status nxv_pool_alloc(nxv_pool *p, uint64_t bytes,
                          nxv_buffer **out_buffer) {
  if (bytes > p->max_buffer)
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "a buffer of %llu bytes exceeds the device's limit of "
                    "%llu bytes (maxMemoryAllocationSize, "
                    "maxStorageBufferRange, maxBufferSize)",
                    (unsigned long long)bytes,
                    (unsigned long long)p->max_buffer);
  uint32_t c = nxv_pool_class_of(bytes);
  uint64_t csize = nxv_pool_class_size(c);
  if (csize > p->max_buffer) csize = (bytes + 255) & ~255ull;
  pthread_mutex_lock(&p->mutex);
  nxv_buffer *buf = p->free_lists[c];
  if (buf) {
    p->free_lists[c] = buf->next;
    buf->block->free_slots--;
    p->hits++;
  } else {
    p->misses++;
    nxv_block *b = NULL;
    nxv_status s = NXV_OK;
    if (csize <= NXV_POOL_SLAB_MAX) {
      b = p->slab_open[c];
      if (!b || b->carved == b->slots) {
        uint64_t slab = csize * 16;
        if (slab < NXV_SLAB_MIN_BYTES) slab = NXV_SLAB_MIN_BYTES;
        if (slab > NXV_SLAB_MAX_BYTES) slab = NXV_SLAB_MAX_BYTES;
        s = NXV_ERR_UNSUPPORTED;
        if (csize <= NXV_POOL_MAPPED_MAX && p->mapped_type >= 0 &&
            p->mapped + slab <= mapped_limit_locked(p))
          s = block_new(p, c, slab, (uint32_t)(slab / csize), true, &b);
        if (s != NXV_OK) /* no mapped memory left: ordinary memory */
          s = block_new(p, c, slab, (uint32_t)(slab / csize), false, &b);
        if (s == NXV_OK) p->slab_open[c] = b;
      }
    } else {
      s = block_new(p, c, csize, 1, false, &b);
    }
    if (s == NXV_OK && !(buf = calloc(1, sizeof *buf))) {
      s = nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pool buffer");
      if (b->slots == 1) {
        unlink_block(p, b);
        block_free(p, b);
      }
    }
    if (s != NXV_OK) {
      pthread_mutex_unlock(&p->mutex);
      return s;
    }
    buf->class_idx = c;
    buf->pool = p;
    buf->block = b;
    buf->vk = b->buf;
    buf->offset = (VkDeviceSize)b->carved * csize;
    buf->size = csize;
    buf->addr = b->addr + buf->offset;
    buf->host = b->host ? (uint8_t *)b->host + buf->offset : NULL;
    b->carved++;
  }
  p->in_use += buf->size;
  if (p->in_use > p->peak) p->peak = p->in_use;
  p->live++;
  pthread_mutex_unlock(&p->mutex);
  atomic_store_explicit(&buf->refs, 1, memory_order_relaxed);
  buf->next = NULL;
  *out_buffer = buf;
  return NXV_OK;
}

void nxv_buffer_release(nxv_buffer *buf) {
  if (atomic_fetch_sub_explicit(&buf->refs, 1, memory_order_acq_rel) != 1)
    return;
  nxv_pool *p = buf->pool;
  pthread_mutex_lock(&p->mutex);
  buf->next = p->free_lists[buf->class_idx];
  p->free_lists[buf->class_idx] = buf;
  buf->block->free_slots++;
  p->in_use -= buf->size;
  p->live--;
  pthread_mutex_unlock(&p->mutex);
}

void nxv_pool_stats(nxv_pool *p, nxv_stats *st) {
  pthread_mutex_lock(&p->mutex);
  st->pool_bytes_reserved = p->reserved;
  st->pool_bytes_in_use = p->in_use;
  st->pool_bytes_peak = p->peak;
  st->pool_hits = p->hits;
  st->pool_misses = p->misses;
  st->pool_allocations = p->allocations;
  st->pool_frees = p->frees;
  st->pool_trims = p->trims;
  st->pool_live_buffers = p->live;
  st->pool_bytes_mapped = p->mapped;
  pthread_mutex_unlock(&p->mutex);
}

void nxv_pool_destroy(nxv_pool *p, uint64_t *out_leaked) {
  if (!p) return;
  if (out_leaked) *out_leaked = p->live;
  for (uint32_t c = 0; c < NXV_POOL_CLASSES; c++) {
    nxv_buffer *b = p->free_lists[c];
    while (b) {
      nxv_buffer *n = b->next;
      free(b);
      b = n;
    }
  }
  nxv_block *b = p->blocks;
  while (b) {
    nxv_block *n = b->next;
    block_free(p, b);
    b = n;
  }
  pthread_mutex_destroy(&p->mutex);
  free(p);
}

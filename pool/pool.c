#include "pool/pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sched/lines.h"
#include "sched/status.h"

#define NXV_POOL_CLASSES (1 + 4 * 56)
#define NXV_SLAB_MIN_BYTES (256u << 10)
#define NXV_SLAB_MAX_BYTES (8u << 20)
/* Offsets and sizes of blocks in chunks are multiples of this. */
#define NXV_CHUNK_ALIGN 256u

/* A free byte range of a chunk: a node of the chunk's list. */
typedef struct nxv_range {
  VkDeviceSize off;          /* first byte, from the chunk's start */
  VkDeviceSize size;         /* bytes */
  struct nxv_range *next;    /* the next free range, at a higher offset */
} nxv_range;

/* A device allocation that blocks are carved from. */
typedef struct nxv_chunk {
  VkDeviceMemory mem;        /* owned */
  VkBuffer buf;              /* owned; spans the allocation */
  VkDeviceAddress addr;      /* device address of buf */
  VkDeviceSize size;         /* bytes */
  VkDeviceSize used;         /* bytes in blocks carved from it */
  bool slabs;                /* holds slabs (else single buffers' blocks) */
  nxv_range *free;           /* its free ranges by offset, no two adjacent;
                                owned */
  struct nxv_chunk *next;    /* all chunks of the pool */
} nxv_chunk;

struct nxv_block {
  VkDeviceMemory mem;        /* owned; VK_NULL_HANDLE for a chunk's block */
  VkBuffer buf;              /* owned, or the chunk's */
  VkDeviceAddress addr;      /* device address of the block's first byte */
  VkDeviceSize offset;       /* the block's first byte in buf */
  VkDeviceSize size;         /* bytes */
  void *host;                /* persistent mapping of mem, or NULL */
  nxv_chunk *chunk;          /* the chunk it lies in, or NULL (not owned) */
  nxv_range *spare;          /* a chunk's block: the range node its return
                                may need, so that returning allocates
                                nothing; owned */
  uint32_t class_idx;
  uint32_t slots;            /* buffers the block can hold (1 if a single
                                buffer's) */
  uint32_t carved;           /* slots handed out at least once */
  uint32_t free_slots;       /* carved slots now on the free list */
  struct nxv_block *prev;    /* all blocks of the pool, doubly linked */
  struct nxv_block *next;
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
  uint64_t chunk_bytes;      /* size of a new chunk */
  nxv_buffer *free_lists[NXV_POOL_CLASSES];
  nxv_block *slab_open[NXV_POOL_CLASSES]; /* slab being carved */
  nxv_block *blocks;         /* owned */
  nxv_chunk *chunks;         /* owned */
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
                           uint64_t chunk_bytes, bool map_small,
                           nxv_pool **out_pool) {
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
  if (!chunk_bytes) chunk_bytes = NXV_POOL_CHUNK_DEFAULT;
  if (chunk_bytes > m) chunk_bytes = m;
  chunk_bytes = (chunk_bytes + 0xFFFFull) & ~0xFFFFull;
  p->chunk_bytes = chunk_bytes <= m ? chunk_bytes : m & ~(uint64_t)(NXV_CHUNK_ALIGN - 1);
  pthread_mutex_init(&p->mutex, NULL);
  *out_pool = p;
  return NXV_OK;
}

/* Returns bytes [off, off + size) to ch, merging them with the free
 * ranges next to them; spare is a node for them when they merge with
 * neither (freed otherwise). */
static void chunk_return(nxv_chunk *ch, VkDeviceSize off, VkDeviceSize size,
                         nxv_range *spare) {
  nxv_range *prev = NULL, *r = ch->free;
  while (r && r->off < off) {
    prev = r;
    r = r->next;
  }
  bool join_prev = prev && prev->off + prev->size == off;
  bool join_next = r && off + size == r->off;
  if (join_prev && join_next) {
    prev->size += size + r->size;
    prev->next = r->next;
    free(r);
    free(spare);
  } else if (join_prev) {
    prev->size += size;
    free(spare);
  } else if (join_next) {
    r->off = off;
    r->size += size;
    free(spare);
  } else {
    spare->off = off;
    spare->size = size;
    spare->next = r;
    if (prev) prev->next = spare;
    else ch->free = spare;
  }
  ch->used -= size;
}

/* Frees the device allocation of a chunk and the chunk; pool mutex held. */
static void chunk_free(nxv_pool *p, nxv_chunk *ch) {
  vkDestroyBuffer(p->vk->device, ch->buf, NULL);
  vkFreeMemory(p->vk->device, ch->mem, NULL);
  p->reserved -= ch->size;
  p->frees++;
  while (ch->free) {
    nxv_range *n = ch->free->next;
    free(ch->free);
    ch->free = n;
  }
  free(ch);
}

static void unlink_block(nxv_pool *p, nxv_block *b) {
  if (b->prev) b->prev->next = b->next;
  else p->blocks = b->next;
  if (b->next) b->next->prev = b->prev;
}

static void link_block(nxv_pool *p, nxv_block *b) {
  b->prev = NULL;
  b->next = p->blocks;
  if (p->blocks) p->blocks->prev = b;
  p->blocks = b;
}

/* Frees a block (unlinked): a chunk's goes back to its chunk, another's
 * memory is freed. Pool mutex held. */
static void block_free(nxv_pool *p, nxv_block *b) {
  if (b->chunk) {
    chunk_return(b->chunk, b->offset, b->size, b->spare);
  } else {
    vkDestroyBuffer(p->vk->device, b->buf, NULL);
    vkFreeMemory(p->vk->device, b->mem, NULL); /* also unmaps */
    p->reserved -= b->size;
    if (b->host) p->mapped -= b->size;
    p->frees++;
  }
  free(b);
}

/* Takes free buffers off the free lists: single buffers' blocks and
 * wholly free slabs go back to their chunks, and with release those of
 * their own and then wholly free chunks are freed as well. Pool mutex
 * held. Returns the device bytes freed. */
static uint64_t trim_locked(nxv_pool *p, bool release) {
  uint64_t before = p->reserved;
  for (uint32_t c = 0; c < NXV_POOL_CLASSES; c++) {
    nxv_buffer **pp = &p->free_lists[c];
    while (*pp) {
      nxv_buffer *buf = *pp;
      nxv_block *b = buf->block;
      if (!release && !b->chunk) {
        pp = &buf->next;
        continue;
      }
      if (b->slots == 1) {
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
  if (release) {
    for (nxv_chunk **cp = &p->chunks; *cp;) {
      nxv_chunk *ch = *cp;
      if (ch->used == 0) {
        *cp = ch->next;
        chunk_free(p, ch);
      } else {
        cp = &ch->next;
      }
    }
    p->trims++;
  }
  return before - p->reserved;
}

uint64_t nxv_pool_trim(nxv_pool *p) {
  pthread_mutex_lock(&p->mutex);
  uint64_t r = trim_locked(p, true);
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

/* A device allocation of the pool (memory_new's result). */
typedef struct {
  VkDeviceMemory mem;  /* the allocation */
  VkBuffer buf;        /* spans mem */
  VkDeviceAddress addr; /* device address of buf */
  VkDeviceSize size;   /* bytes allocated (>= the request) */
  void *host;          /* persistent mapping, or NULL */
} pool_memory;

/* New device allocation of size bytes, counted in reserved; pool mutex
 * held. mapped: in the mapped memory type, persistently mapped. trim:
 * when it would pass the limit or the driver is out of memory, trim the
 * pool once and try again (never for mapped memory, whose caller falls
 * back to ordinary memory). */
static nxv_status memory_new(nxv_pool *p, uint64_t size, bool mapped, bool trim,
                             pool_memory *out) {
  uint32_t memory_type = mapped ? (uint32_t)p->mapped_type : p->memory_type;
  trim = trim && !mapped;
  for (int attempt = 0;; attempt++) {
    uint64_t limit = limit_locked(p);
    if (p->reserved + size > limit) {
      if (trim && attempt == 0 && trim_locked(p, true) > 0) continue;
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
          trim && attempt == 0 && trim_locked(p, true) > 0)
        continue;
      return nxv_fail_vk(r, what);
    }
    VkBufferDeviceAddressInfo ai = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = buf};
    out->mem = mem;
    out->buf = buf;
    out->addr = vkGetBufferDeviceAddress(dev, &ai);
    out->size = req.size;
    out->host = host;
    p->reserved += req.size;
    if (host) p->mapped += req.size;
    p->allocations++;
    return NXV_OK;
  }
}

/* The best-fitting free range for size bytes among the chunks of slabs
 * (slabs) or of single buffers: its chunk and the node before it (NULL
 * when it is its chunk's first). false when none is large enough. */
static bool best_fit(nxv_pool *p, VkDeviceSize size, bool slabs,
                     nxv_chunk **out_chunk, nxv_range **out_prev) {
  nxv_range *best = NULL;
  for (nxv_chunk *ch = p->chunks; ch; ch = ch->next) {
    if (ch->slabs != slabs) continue;
    nxv_range *prev = NULL;
    for (nxv_range *r = ch->free; r; prev = r, r = r->next)
      if (r->size >= size && (!best || r->size < best->size)) {
        best = r;
        *out_chunk = ch;
        *out_prev = prev;
        if (r->size == size) return true;
      }
  }
  return best != NULL;
}

/* A new chunk with room for need bytes: chunk_bytes when that is larger
 * and stays within the limit, else (or when the driver cannot allocate
 * it) need bytes. Pool mutex held. */
static nxv_status chunk_new(nxv_pool *p, VkDeviceSize need, bool slabs,
                            nxv_chunk **out) {
  nxv_chunk *ch = calloc(1, sizeof *ch);
  nxv_range *r = calloc(1, sizeof *r);
  if (!ch || !r) {
    free(ch);
    free(r);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pool chunk");
  }
  pool_memory m;
  nxv_status st = NXV_ERR_OUT_OF_DEVICE_MEMORY;
  if (p->chunk_bytes > need && p->reserved + p->chunk_bytes <= limit_locked(p))
    st = memory_new(p, p->chunk_bytes, false, false, &m);
  if (st != NXV_OK) st = memory_new(p, need, false, true, &m);
  if (st != NXV_OK) {
    free(ch);
    free(r);
    return st;
  }
  ch->mem = m.mem;
  ch->buf = m.buf;
  ch->addr = m.addr;
  ch->size = m.size & ~(VkDeviceSize)(NXV_CHUNK_ALIGN - 1);
  ch->slabs = slabs;
  p->reserved -= m.size - ch->size; /* reserved counts what chunk_free returns */
  r->off = 0;
  r->size = ch->size;
  ch->free = r;
  ch->next = p->chunks;
  p->chunks = ch;
  *out = ch;
  return NXV_OK;
}

/* Carves size bytes (a multiple of NXV_CHUNK_ALIGN) into b from a chunk
 * of slabs (slabs) or of single buffers: the best-fitting free range;
 * else, after the free lists' blocks of chunks went back to them, the
 * best-fitting again; else a new chunk. Slabs and single buffers keep to
 * chunks of their own kind, so that small long-lived tensors do not keep
 * chunks of large transient ones from being freed. Pool mutex held. */
static nxv_status carve(nxv_pool *p, VkDeviceSize size, bool slabs, nxv_block *b) {
  nxv_range *spare = calloc(1, sizeof *spare);
  if (!spare) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pool range");
  nxv_chunk *ch = NULL;
  nxv_range *prev = NULL;
  if (!best_fit(p, size, slabs, &ch, &prev)) {
    trim_locked(p, false);
    if (!best_fit(p, size, slabs, &ch, &prev)) {
      nxv_status st = chunk_new(p, size, slabs, &ch);
      if (st != NXV_OK) {
        free(spare);
        return st;
      }
      prev = NULL;
    }
  }
  nxv_range *r = prev ? prev->next : ch->free;
  b->offset = r->off;
  r->off += size;
  r->size -= size;
  if (r->size == 0) {
    if (prev) prev->next = r->next;
    else ch->free = r->next;
    free(r);
  }
  ch->used += size;
  b->chunk = ch;
  b->spare = spare;
  b->mem = VK_NULL_HANDLE;
  b->buf = ch->buf;
  b->addr = ch->addr + b->offset;
  b->size = size;
  b->host = NULL;
  return NXV_OK;
}

/* New block of size bytes for class c, linked; pool mutex held. A block
 * of at most NXV_POOL_CARVE_MAX bytes in ordinary memory is carved from a
 * chunk; others are device allocations of their own. mapped: in the
 * mapped memory type, persistently mapped (a failure there is returned
 * without trimming: the caller falls back to ordinary memory). */
static nxv_status block_new(nxv_pool *p, uint32_t c, uint64_t size,
                            uint32_t slots, bool mapped, nxv_block **out) {
  nxv_block *b = calloc(1, sizeof *b);
  if (!b) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pool block");
  nxv_status st;
  if (!mapped && size <= NXV_POOL_CARVE_MAX) {
    st = carve(p, (size + NXV_CHUNK_ALIGN - 1) & ~(uint64_t)(NXV_CHUNK_ALIGN - 1),
               slots > 1, b);
  } else {
    pool_memory m;
    st = memory_new(p, size, mapped, true, &m);
    if (st == NXV_OK) {
      b->mem = m.mem;
      b->buf = m.buf;
      b->addr = m.addr;
      b->size = m.size;
      b->host = m.host;
    }
  }
  if (st != NXV_OK) {
    free(b);
    return st;
  }
  b->class_idx = c;
  b->slots = slots;
  link_block(p, b);
  *out = b;
  return NXV_OK;
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
    /* On whole lines of its own: its first line (the reference counts and
     * what producers read) apart from the scheduler's bookkeeping. */
    if (s == NXV_OK && !(buf = nxv_lines_alloc(sizeof *buf))) {
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
    VkDeviceSize at = (VkDeviceSize)b->carved * csize; /* in the block */
    buf->offset = b->offset + at;
    buf->size = csize;
    buf->addr = b->addr + at;
    buf->host = b->host ? (uint8_t *)b->host + at : NULL;
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

/* Puts buf, unreferenced, on its pool's free list. Under p->mutex. */
static void return_locked(nxv_pool *p, nxv_buffer *buf) {
  buf->next = p->free_lists[buf->class_idx];
  p->free_lists[buf->class_idx] = buf;
  buf->block->free_slots++;
  p->in_use -= buf->size;
  p->live--;
}

void nxv_buffer_release(nxv_buffer *buf) {
  if (atomic_fetch_sub_explicit(&buf->refs, 1, memory_order_acq_rel) != 1)
    return;
  nxv_pool *p = buf->pool;
  pthread_mutex_lock(&p->mutex);
  return_locked(p, buf);
  pthread_mutex_unlock(&p->mutex);
}

void nxv_buffer_release_into(nxv_buffer *buf, nxv_buffer **list) {
  if (atomic_fetch_sub_explicit(&buf->refs, 1, memory_order_acq_rel) != 1)
    return;
  buf->next = *list;
  *list = buf;
}

void nxv_pool_return_list(nxv_buffer *list) {
  while (list) {
    nxv_pool *p = list->pool;
    pthread_mutex_lock(&p->mutex);
    while (list && list->pool == p) {
      nxv_buffer *next = list->next;
      return_locked(p, list);
      list = next;
    }
    pthread_mutex_unlock(&p->mutex);
  }
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
  nxv_chunk *ch = p->chunks;
  while (ch) {
    nxv_chunk *n = ch->next;
    chunk_free(p, ch);
    ch = n;
  }
  pthread_mutex_destroy(&p->mutex);
  free(p);
}

#include "pool/hostring.h"

#include <pthread.h>
#include <stdlib.h>

#include "sched/status.h"

#define NXV_RING_RECORDS 8192u

struct nxv_host_block {
  VkBuffer buf;           /* owned */
  VkDeviceMemory mem;     /* owned, persistently mapped */
  void *ptr;
  VkDeviceAddress addr;
  uint64_t size;
};

typedef struct ring_record {
  uint64_t end;   /* absolute end offset of the allocation */
  bool freed;
} ring_record;

struct nxv_hostring {
  const nxv_vk *vk;        /* not owned */
  bool device_local;
  nxv_host_block block;    /* the ring's memory */
  pthread_mutex_t mutex;   /* guards everything below */
  uint64_t head, tail;     /* absolute byte offsets: next free, oldest live */
  uint64_t head_seq, tail_seq;
  ring_record records[NXV_RING_RECORDS];
  uint64_t dedicated;
};

static nxv_status block_create(const nxv_vk *vk, uint64_t size,
                               bool device_local, nxv_host_block *out) {
  VkDevice dev = vk->device;
  VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  NXV_VK_TRY(vkCreateBuffer(dev, &bci, NULL, &out->buf));
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, out->buf, &req);
  VkMemoryPropertyFlags need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                               VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int32_t type = device_local
      ? nxv_vk_find_memory(vk, req.memoryTypeBits, need,
                           VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
      : nxv_vk_find_memory(vk, req.memoryTypeBits, need,
                           VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                           VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type >= 0 && device_local &&
      (vk->mem.memoryTypes[type].propertyFlags &
       VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) &&
      vk->mem.memoryHeaps[vk->mem.memoryTypes[type].heapIndex].size < size * 4)
    /* A small BAR heap: leave it, use plain host memory. */
    type = nxv_vk_find_memory(vk, req.memoryTypeBits, need, 0,
                              VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  if (type < 0) {
    vkDestroyBuffer(dev, out->buf, NULL);
    return nxv_fail(NXV_ERR_UNSUPPORTED,
                    "no host-visible coherent memory type for staging");
  }
  VkMemoryAllocateFlagsInfo flags = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
      .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                              .pNext = &flags,
                              .allocationSize = req.size,
                              .memoryTypeIndex = (uint32_t)type};
  VkResult r = vkAllocateMemory(dev, &mai, NULL, &out->mem);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, out->buf, NULL);
    return nxv_fail_vk(r, "vkAllocateMemory (host-visible staging)");
  }
  r = vkBindBufferMemory(dev, out->buf, out->mem, 0);
  if (r == VK_SUCCESS) r = vkMapMemory(dev, out->mem, 0, VK_WHOLE_SIZE, 0, &out->ptr);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, out->buf, NULL);
    vkFreeMemory(dev, out->mem, NULL);
    return nxv_fail_vk(r, "binding or mapping staging memory");
  }
  VkBufferDeviceAddressInfo ai = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = out->buf};
  out->addr = vkGetBufferDeviceAddress(dev, &ai);
  out->size = size;
  return NXV_OK;
}

static void block_destroy(const nxv_vk *vk, nxv_host_block *b) {
  vkDestroyBuffer(vk->device, b->buf, NULL);
  vkUnmapMemory(vk->device, b->mem);
  vkFreeMemory(vk->device, b->mem, NULL);
}

nxv_status nxv_hostring_create(const nxv_vk *vk, uint64_t bytes,
                               bool device_local, nxv_hostring **out_ring) {
  nxv_hostring *r = calloc(1, sizeof *r);
  if (!r) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "host ring");
  r->vk = vk;
  r->device_local = device_local;
  nxv_status s = block_create(vk, bytes, device_local, &r->block);
  if (s != NXV_OK) {
    free(r);
    return s;
  }
  pthread_mutex_init(&r->mutex, NULL);
  *out_ring = r;
  return NXV_OK;
}

void nxv_hostring_destroy(nxv_hostring *r) {
  if (!r) return;
  block_destroy(r->vk, &r->block);
  pthread_mutex_destroy(&r->mutex);
  free(r);
}

nxv_status nxv_hostring_alloc(nxv_hostring *r, uint64_t bytes, uint64_t align,
                              bool allow_dedicated, nxv_host_alloc *out) {
  uint64_t cap = r->block.size;
  if (bytes == 0) bytes = 1;
  pthread_mutex_lock(&r->mutex);
  if (bytes <= cap && r->head_seq - r->tail_seq < NXV_RING_RECORDS) {
    uint64_t start = (r->head + align - 1) & ~(align - 1);
    if (start % cap + bytes > cap) start = (start / cap + 1) * cap;
    uint64_t end = start + bytes;
    if (end - r->tail <= cap) {
      uint64_t seq = r->head_seq++;
      r->records[seq % NXV_RING_RECORDS] = (ring_record){end, false};
      r->head = end;
      pthread_mutex_unlock(&r->mutex);
      uint64_t off = start % cap;
      out->ptr = (char *)r->block.ptr + off;
      out->buf = r->block.buf;
      out->offset = off;
      out->addr = r->block.addr + off;
      out->size = bytes;
      out->seq = seq;
      out->dedicated = NULL;
      return NXV_OK;
    }
  }
  if (!allow_dedicated) {
    pthread_mutex_unlock(&r->mutex);
    return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "host ring full");
  }
  r->dedicated++;
  pthread_mutex_unlock(&r->mutex);
  nxv_host_block *b = calloc(1, sizeof *b);
  if (!b) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "staging buffer");
  nxv_status s = block_create(r->vk, bytes, r->device_local, b);
  if (s != NXV_OK) {
    free(b);
    return s;
  }
  out->ptr = b->ptr;
  out->buf = b->buf;
  out->offset = 0;
  out->addr = b->addr;
  out->size = bytes;
  out->seq = UINT64_MAX;
  out->dedicated = b;
  return NXV_OK;
}

void nxv_hostring_free(nxv_hostring *r, const nxv_host_alloc *a) {
  if (a->dedicated) {
    block_destroy(r->vk, a->dedicated);
    free(a->dedicated);
    return;
  }
  pthread_mutex_lock(&r->mutex);
  r->records[a->seq % NXV_RING_RECORDS].freed = true;
  while (r->tail_seq < r->head_seq &&
         r->records[r->tail_seq % NXV_RING_RECORDS].freed) {
    r->tail = r->records[r->tail_seq % NXV_RING_RECORDS].end;
    r->tail_seq++;
  }
  if (r->tail_seq == r->head_seq) r->tail = r->head;
  pthread_mutex_unlock(&r->mutex);
}

void nxv_hostring_stats(nxv_hostring *r, uint64_t *out_bytes,
                        uint64_t *out_dedicated) {
  pthread_mutex_lock(&r->mutex);
  *out_bytes = r->block.size;
  *out_dedicated = r->dedicated;
  pthread_mutex_unlock(&r->mutex);
}

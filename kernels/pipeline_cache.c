#include "kernels/pipeline_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sched/status.h"

static const char kMagic[8] = {'N', 'X', 'V', 'K', 'P', 'C', 'C', 'H'};

struct nxv_pcache {
  const nxv_vk *vk;          /* not owned */
  VkPipelineCache cache;     /* owned */
  bool disabled;
  pthread_mutex_t mu;        /* guards the fields below and saving */
  char path[512];            /* "" when there is no usable directory */
  char dir[384];
  bool loaded, rejected;
  char reason[128];
};

uint64_t nxv_fnv1a64(const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void default_dir(const char *dir, char *out, size_t cap) {
  const char *env;
  out[0] = 0;
  if (dir && dir[0]) snprintf(out, cap, "%s", dir);
  else if ((env = getenv("NX_VULKAN_CACHE_DIR")) && env[0])
    snprintf(out, cap, "%s", env);
  else if ((env = getenv("XDG_CACHE_HOME")) && env[0])
    snprintf(out, cap, "%s/nx_vulkan", env);
  else if ((env = getenv("HOME")) && env[0])
    snprintf(out, cap, "%s/.cache/nx_vulkan", env);
}

/* mkdir -p */
static int make_dirs(const char *path) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

/* Validates file bytes; on success points *payload at the driver data. */
static const char *validate(const nxv_vk *vk, const unsigned char *d,
                            size_t n, const unsigned char **payload,
                            size_t *payload_size) {
  const nxv_device_info *info = &vk->info;
  if (n < NXV_PCACHE_HEADER_SIZE) return "truncated header";
  if (memcmp(d, kMagic, 8) != 0) return "bad magic";
  if (get32(d + 8) != NXV_PCACHE_VERSION) return "format version mismatch";
  if (get32(d + 12) != NXV_PCACHE_HEADER_SIZE) return "header size mismatch";
  if (get32(d + 16) != info->vendor_id) return "vendor id mismatch";
  if (get32(d + 20) != info->device_id) return "device id mismatch";
  if (get32(d + 24) != info->driver_version) return "driver version mismatch";
  if (memcmp(d + 28, info->pipeline_cache_uuid, 16) != 0)
    return "pipeline cache UUID mismatch";
  uint64_t size = get64(d + 44);
  if (size != n - NXV_PCACHE_HEADER_SIZE) return "payload size mismatch";
  const unsigned char *p = d + NXV_PCACHE_HEADER_SIZE;
  if (nxv_fnv1a64(p, (size_t)size) != get64(d + 52)) return "payload hash mismatch";
  /* Vulkan's own header: VkPipelineCacheHeaderVersionOne. */
  if (size < 32) return "driver header truncated";
  if (get32(p) < 32 || get32(p) > size) return "driver header size invalid";
  if (get32(p + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
    return "driver header version mismatch";
  if (get32(p + 8) != info->vendor_id || get32(p + 12) != info->device_id)
    return "driver header device mismatch";
  if (memcmp(p + 16, info->pipeline_cache_uuid, 16) != 0)
    return "driver header UUID mismatch";
  *payload = p;
  *payload_size = (size_t)size;
  return NULL;
}

static unsigned char *read_file(const char *path, size_t *out_n,
                                const char **why) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    *why = errno == ENOENT ? NULL : "cannot open file";
    return NULL;
  }
  unsigned char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > (1u << 30)) {
        *why = "file too large";
        break;
      }
      unsigned char *nb = realloc(buf, cap);
      if (!nb) {
        *why = "out of memory reading file";
        break;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) *why = "read error";
      else *why = NULL;
      fclose(f);
      *out_n = n;
      return buf;
    }
  }
  fclose(f);
  free(buf);
  return NULL;
}

nxv_status nxv_pcache_open(const nxv_vk *vk, const char *dir, bool disabled,
                           nxv_pcache **out_cache) {
  nxv_pcache *c = calloc(1, sizeof *c);
  if (!c) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pipeline cache");
  c->vk = vk;
  c->disabled = disabled;
  pthread_mutex_init(&c->mu, NULL);
  const unsigned char *payload = NULL;
  size_t payload_size = 0;
  unsigned char *file = NULL;
  if (!disabled) {
    default_dir(dir, c->dir, sizeof c->dir);
    if (c->dir[0]) {
      const nxv_device_info *i = &vk->info;
      char uuid[33];
      for (int k = 0; k < 16; k++)
        snprintf(uuid + 2 * k, 3, "%02x", i->pipeline_cache_uuid[k]);
      snprintf(c->path, sizeof c->path, "%s/pipelines-%04x-%04x-%08x-%s.bin",
               c->dir, i->vendor_id, i->device_id, i->driver_version, uuid);
      size_t n = 0;
      const char *why = NULL;
      file = read_file(c->path, &n, &why);
      if (file) {
        why = validate(vk, file, n, &payload, &payload_size);
        if (why) payload = NULL;
      }
      if (why) {
        c->rejected = true;
        snprintf(c->reason, sizeof c->reason, "%s", why);
      }
    }
  }
  VkPipelineCacheCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
      .initialDataSize = payload ? payload_size : 0,
      .pInitialData = payload};
  VkResult r = vkCreatePipelineCache(vk->device, &ci, NULL, &c->cache);
  if (r != VK_SUCCESS && payload) {
    /* The driver refused data that passed our checks: still only a miss. */
    c->rejected = true;
    snprintf(c->reason, sizeof c->reason, "driver rejected data: %s",
             nxv_vk_result_name(r));
    payload = NULL;
    ci.initialDataSize = 0;
    ci.pInitialData = NULL;
    r = vkCreatePipelineCache(vk->device, &ci, NULL, &c->cache);
  }
  free(file);
  if (r != VK_SUCCESS) {
    pthread_mutex_destroy(&c->mu);
    free(c);
    return nxv_fail_vk(r, "vkCreatePipelineCache");
  }
  c->loaded = payload != NULL;
  *out_cache = c;
  return NXV_OK;
}

VkPipelineCache nxv_pcache_handle(nxv_pcache *c) { return c->cache; }

nxv_status nxv_pcache_save(nxv_pcache *c) {
  if (c->disabled || !c->path[0]) return NXV_OK;
  size_t size = 0;
  NXV_VK_TRY(vkGetPipelineCacheData(c->vk->device, c->cache, &size, NULL));
  unsigned char *buf = malloc(NXV_PCACHE_HEADER_SIZE + size);
  if (!buf) return nxv_fail(NXV_ERR_OUT_OF_HOST_MEMORY, "pipeline cache data");
  VkResult r = vkGetPipelineCacheData(c->vk->device, c->cache, &size,
                                      buf + NXV_PCACHE_HEADER_SIZE);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(buf);
    return nxv_fail_vk(r, "vkGetPipelineCacheData");
  }
  const nxv_device_info *i = &c->vk->info;
  memset(buf, 0, NXV_PCACHE_HEADER_SIZE);
  memcpy(buf, kMagic, 8);
  put32(buf + 8, NXV_PCACHE_VERSION);
  put32(buf + 12, NXV_PCACHE_HEADER_SIZE);
  put32(buf + 16, i->vendor_id);
  put32(buf + 20, i->device_id);
  put32(buf + 24, i->driver_version);
  memcpy(buf + 28, i->pipeline_cache_uuid, 16);
  put64(buf + 44, size);
  put64(buf + 52, nxv_fnv1a64(buf + NXV_PCACHE_HEADER_SIZE, size));

  pthread_mutex_lock(&c->mu);
  nxv_status st = NXV_OK;
  char tmp[640];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", c->path, (long)getpid(),
           (void *)&tmp);
  if (make_dirs(c->dir) != 0) {
    st = nxv_fail(NXV_ERR_IO, "creating cache directory %s: %s", c->dir,
                  strerror(errno));
  } else {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      st = nxv_fail(NXV_ERR_IO, "creating %s: %s", tmp, strerror(errno));
    } else {
      size_t total = NXV_PCACHE_HEADER_SIZE + size, off = 0;
      while (off < total) {
        ssize_t w = write(fd, buf + off, total - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
      }
      int werr = off == total ? 0 : errno ? errno : EIO;
      if (close(fd) != 0 && !werr) werr = errno;
      if (werr) {
        st = nxv_fail(NXV_ERR_IO, "writing %s: %s", tmp, strerror(werr));
        unlink(tmp);
      } else if (rename(tmp, c->path) != 0) {
        st = nxv_fail(NXV_ERR_IO, "renaming %s to %s: %s", tmp, c->path,
                      strerror(errno));
        unlink(tmp);
      }
    }
  }
  pthread_mutex_unlock(&c->mu);
  free(buf);
  return st;
}

void nxv_pcache_destroy(nxv_pcache *c) {
  if (!c) return;
  vkDestroyPipelineCache(c->vk->device, c->cache, NULL);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

void nxv_pcache_stats(nxv_pcache *c, nxv_stats *st) {
  pthread_mutex_lock(&c->mu);
  st->cache_file_loaded = c->loaded;
  st->cache_file_rejected = c->rejected;
  snprintf(st->cache_reject_reason, sizeof st->cache_reject_reason, "%s",
           c->reason);
  snprintf(st->cache_path, sizeof st->cache_path, "%s", c->path);
  pthread_mutex_unlock(&c->mu);
}

/* hn-vk.c — the Vulkan backend (see hn-vk.h and docs/vulkan.md).
 *
 * Every dispatch binds its buffers with push descriptors (VK_KHR_push_descriptor), so a
 * micro-batch is recorded into one command buffer without descriptor pools, submitted
 * once and waited for once: no host round trip between the layers.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-vk.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <vulkan/vulkan.h>

#include "hn-model-internal.h"
#include "hn-quants.h"
#include "hn-vk-shaders.h"

/* A submission that has not finished after this long is treated as a hung device. */
#define FENCE_TIMEOUT_NS (120ull * 1000000000ull)
#define STAGING_BYTES ((VkDeviceSize) 16 << 20)
#define MAX_BINDINGS 6
/* The matrix products (see docs/vulkan.md): batches of up to MATVEC_TOKENS tokens (decode)
 * go through matvec.comp, MATVEC_ROWS rows and MATVEC_TOKENS tokens per workgroup; larger
 * batches through matmul.comp's tiles of TILE_ROWS rows × TILE_TOKENS tokens.  These
 * must match the shaders' ROWS/TOKENS and BM/BN. */
#define MATVEC_ROWS 4
#define MATVEC_TOKENS 4
#define TILE_ROWS 64
#define TILE_TOKENS 32
#define TILE_INVOCATIONS 256 /* matmul.comp's local size: more than Vulkan guarantees (128) */
#define TILE_SHARED_BYTES ((32 * (TILE_ROWS + 1) + 32 * (TILE_TOKENS + 1)) * 4)
#define MATVEC_OF(pipe) ((pipe) - HN_VK_SHADER_MATMUL_F32 + HN_VK_SHADER_MATVEC_F32)
#define MAX_HEAD_DIM 256 /* attention.comp keeps 4 dimensions per thread */

enum {
  OP_ADD = 0, OP_SILU_GATE = 1, OP_GELU_GATE = 2, OP_ADD_BIAS = 3, /* eltwise.comp */
};

typedef struct {
  VkBuffer buf;
  VkDeviceMemory mem;
  void *map; /* non-NULL when host-visible */
  VkDeviceSize size;
} VkBuf;

/* One weight matrix inside its layer's buffer. */
typedef struct {
  VkDeviceSize off, size;
  int pipe;
  uint32_t K, N, row_bytes;
} VkMatrix;

/* One vector (norm weights, biases) inside its layer's buffer; size 0: absent. */
typedef struct {
  VkDeviceSize off, size;
} VkVector;

typedef struct {
  VkBuf buf;
  VkMatrix wq, wk, wv, wo, gate, up, down;
  VkVector attn_norm, ffn_norm, q_norm, k_norm, bq, bk, bv;
} VkLayer;

struct HnVkOffload {
  const HnModel *model;
  HnVkOffloadParams params;
  char device_name[256];
  VkInstance instance;
  VkPhysicalDevice phys;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  VkPhysicalDeviceMemoryProperties mem_props;
  VkDeviceSize align, max_range;
  bool unified; /* integrated or software: device memory is the processor's memory */
  bool tiled;   /* the device runs matmul.comp's workgroups; else matvec.comp takes every batch */
  uint32_t max_groups;
  PFN_vkCmdPushDescriptorSetKHR push_descriptors;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipe_layout;
  VkPipeline pipes[HN_VK_SHADER_COUNT];
  VkCommandPool cmd_pool;
  VkCommandBuffer cmd;
  VkFence fence;
  uint64_t allocated, limit; /* limit 0: none */
  unsigned long long n_runs; /* for the lost:N and timeout:N test seams */
  HnVkCounts counts;
  VkLayer *layers;           /* n_layer - first_layer */
  VkBuf kv_k, kv_v;          /* host-visible, every layer's rows */
  VkBuf x, xn, q, k, v, attn, gate, up; /* device scratch */
  VkBuf io;                  /* host-visible: x in/out, angles, tokens, cells */
  VkDeviceSize io_x, io_angles, io_tokens, io_cells;
  VkBuf staging;             /* for devices whose memory the host cannot map */
};

static bool
vk_fail(HnError *err, HnStatus code, VkResult r, const char *what)
{
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    return hn_error_set(err, HN_ERR_NOMEM, "The graphics device ran out of memory while %s.", what);
  if (r == VK_ERROR_DEVICE_LOST)
    return hn_error_set(err, code, "The graphics device stopped working while %s.", what);
  return hn_error_set(err, code, "The graphics driver failed while %s (Vulkan error %d).", what, (int) r);
}

/* ---- the HANASHI_VULKAN_FAIL test seam (hn-vk.h, docs/vulkan.md) ---- */

/* The value of the item "key:VALUE" of HANASHI_VULKAN_FAIL (copied into value), or of the
 * bare item "key" (value empty); false when the list does not have it. */
static bool
seam_item(const char *key, char *value, size_t value_size)
{
  const char *list = getenv("HANASHI_VULKAN_FAIL");
  size_t key_len = strlen(key);
  for (const char *item = list; item && *item; item = strchr(item, ',') ? strchr(item, ',') + 1 : NULL) {
    size_t len = strcspn(item, ",");
    if (len < key_len || strncmp(item, key, key_len) != 0 || (len > key_len && item[key_len] != ':'))
      continue;
    const char *v = len > key_len ? item + key_len + 1 : item + len;
    size_t n = (size_t) (item + len - v);
    n = n < value_size - 1 ? n : value_size - 1;
    memcpy(value, v, n);
    value[n] = '\0';
    return true;
  }
  return false;
}

static bool
seam_number(const char *key, unsigned long long *out)
{
  char value[32];
  char *end = NULL;
  if (!seam_item(key, value, sizeof value) || !value[0])
    return false;
  *out = strtoull(value, &end, 10);
  return *end == '\0';
}

static bool
seam_shader_fails(const char *name)
{
  char value[64];
  return seam_item("shader", value, sizeof value) && strcasecmp(value, name) == 0;
}

/* unbuilt: the backend answers as a build without Vulkan does (hn-vk-none.c) */
static bool
seam_unbuilt(void)
{
  char unused[2];
  return seam_item("unbuilt", unused, sizeof unused);
}

bool hn_vk_built(void) { return !seam_unbuilt(); }

static VkInstance
create_instance(HnError *err)
{
  if (seam_unbuilt()) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "This build of Hanashi has no Vulkan support.");
    return VK_NULL_HANDLE;
  }
  VkApplicationInfo app = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "Hanashi",
    .pEngineName = "Hanashi", .apiVersion = VK_API_VERSION_1_2,
  };
  VkInstanceCreateInfo info = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app };
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = vkCreateInstance(&info, NULL, &instance);
  if (r != VK_SUCCESS) {
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      hn_error_set(err, HN_ERR_UNSUPPORTED, "No Vulkan driver is installed.");
    else
      vk_fail(err, HN_ERR_UNSUPPORTED, r, "starting Vulkan");
    return VK_NULL_HANDLE;
  }
  return instance;
}

static const char *
type_name(VkPhysicalDeviceType t)
{
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
  default: return "other";
  }
}

/* Higher is preferred when no device was named: real GPUs before software ones. */
static int
type_rank(VkPhysicalDeviceType t)
{
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
  default: return 0;
  }
}

static void
describe(VkPhysicalDevice phys, HnVkDeviceInfo *info)
{
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(phys, &props);
  snprintf(info->name, sizeof info->name, "%s", props.deviceName);
  info->type = type_name(props.deviceType);
  info->api_version = props.apiVersion;
  snprintf(info->driver, sizeof info->driver, "unknown");
  if (props.apiVersion >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceDriverProperties drv = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES };
    VkPhysicalDeviceProperties2 p2 = { .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv };
    vkGetPhysicalDeviceProperties2(phys, &p2);
    snprintf(info->driver, sizeof info->driver, "%.120s%s%.120s", drv.driverName, drv.driverInfo[0] ? " " : "",
             drv.driverInfo);
  }
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(phys, &mem);
  info->memory = 0;
  for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info->memory += mem.memoryHeaps[h].size;
}

int
hn_vk_list_devices(HnVkDeviceInfo *out, int max, HnError *err)
{
  VkInstance instance = create_instance(err);
  if (!instance)
    return -1;
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(instance, &n, NULL);
  VkPhysicalDevice *devs = n ? calloc(n, sizeof *devs) : NULL;
  if (r == VK_SUCCESS && n)
    r = devs ? vkEnumeratePhysicalDevices(instance, &n, devs) : VK_ERROR_OUT_OF_HOST_MEMORY;
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
    free(devs);
    vkDestroyInstance(instance, NULL);
    vk_fail(err, HN_ERR_UNSUPPORTED, r, "listing the graphics devices");
    return -1;
  }
  for (uint32_t i = 0; i < n && (int) i < max; i++)
    describe(devs[i], &out[i]);
  free(devs);
  vkDestroyInstance(instance, NULL);
  return (int) n;
}

/* ---- buffers ---- */

static int
memory_type(const HnVkOffload *o, uint32_t bits, VkMemoryPropertyFlags want)
{
  for (uint32_t i = 0; i < o->mem_props.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (o->mem_props.memoryTypes[i].propertyFlags & want) == want)
      return (int) i;
  return -1;
}

/* host: the processor must map it (KV cache, inputs and outputs); otherwise device-local,
 * mapped too when the device shares memory with the processor. */
static bool
buf_new(HnVkOffload *o, VkBuf *b, VkDeviceSize size, bool host, const char *what, HnError *err)
{
  memset(b, 0, sizeof *b);
  size = size ? size : 4;
  if (o->limit && o->allocated + size > o->limit)
    return hn_error_set(err, HN_ERR_NOMEM,
                        "The graphics device ran out of memory for the %s (%.1f MB of %.1f MB allowed).",
                        what, (double) (o->allocated + size) / 1e6, (double) o->limit / 1e6);
  VkBufferCreateInfo info = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size,
    .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = vkCreateBuffer(o->device, &info, NULL, &b->buf);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, what);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(o->device, b->buf, &req);
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const VkMemoryPropertyFlags mapped = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  /* In order of preference; a heap that is full (a discrete card's small mappable window)
   * passes on to the next.  Weights and scratch on a discrete card go to plain device
   * memory through staging, leaving the mappable window to the KV cache. */
  VkMemoryPropertyFlags choices[3];
  int n_choices = 0;
  if (host) {
    choices[n_choices++] = local | mapped;
    choices[n_choices++] = mapped | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    choices[n_choices++] = mapped;
  } else if (o->unified) {
    choices[n_choices++] = local | mapped;
    choices[n_choices++] = local;
  } else {
    choices[n_choices++] = local;
  }
  int type = -1;
  r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  for (int i = 0; i < n_choices && r != VK_SUCCESS; i++) {
    int t = memory_type(o, req.memoryTypeBits, choices[i]);
    if (t < 0)
      continue;
    VkMemoryAllocateInfo alloc = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = (uint32_t) t,
    };
    r = vkAllocateMemory(o->device, &alloc, NULL, &b->mem);
    if (r == VK_SUCCESS)
      type = t;
    else if (r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
      break;
  }
  if (type < 0 && r == VK_ERROR_OUT_OF_DEVICE_MEMORY && memory_type(o, req.memoryTypeBits, host ? mapped : local) < 0)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics device offers no memory for the %s.", what);
  if (r == VK_SUCCESS)
    r = vkBindBufferMemory(o->device, b->buf, b->mem, 0);
  if (r == VK_SUCCESS && (o->mem_props.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
    r = vkMapMemory(o->device, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
  if (r != VK_SUCCESS) {
    char doing[96];
    snprintf(doing, sizeof doing, "allocating the %s", what);
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, doing);
  }
  b->size = size;
  o->allocated += req.size;
  return true;
}

static void
buf_free(HnVkOffload *o, VkBuf *b)
{
  if (b->buf)
    vkDestroyBuffer(o->device, b->buf, NULL);
  if (b->mem)
    vkFreeMemory(o->device, b->mem, NULL);
  memset(b, 0, sizeof *b);
}

static bool wait_succeeded(VkResult r, const char *what, HnError *err);

static bool
submit_and_wait(HnVkOffload *o, const char *what, HnError *err)
{
  VkSubmitInfo submit = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &o->cmd };
  VkResult r = vkResetFences(o->device, 1, &o->fence);
  if (r == VK_SUCCESS) {
    r = vkQueueSubmit(o->queue, 1, &submit, o->fence);
    o->counts.submissions++;
  }
  if (r == VK_SUCCESS) {
    r = vkWaitForFences(o->device, 1, &o->fence, VK_TRUE, FENCE_TIMEOUT_NS);
    o->counts.fence_waits++;
  }
  return wait_succeeded(r, what, err);
}

static bool
wait_succeeded(VkResult r, const char *what, HnError *err)
{
  if (r == VK_TIMEOUT)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics device did not finish %s within %d seconds.", what,
                        (int) (FENCE_TIMEOUT_NS / 1000000000ull));
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, what);
  return true;
}

/* Copies bytes from the host into a device buffer: directly where it is mapped, else
 * through the staging buffer. */
static bool
upload(HnVkOffload *o, VkBuf *dst, VkDeviceSize off, const void *src, VkDeviceSize bytes, HnError *err)
{
  if (dst->map) {
    memcpy((char *) dst->map + off, src, bytes);
    return true;
  }
  if (!o->staging.buf && !buf_new(o, &o->staging, STAGING_BYTES, true, "upload buffer", err))
    return false;
  for (VkDeviceSize done = 0; done < bytes; done += STAGING_BYTES) {
    VkDeviceSize n = bytes - done < STAGING_BYTES ? bytes - done : STAGING_BYTES;
    memcpy(o->staging.map, (const char *) src + done, n);
    VkCommandBufferBeginInfo begin = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
    vkResetCommandBuffer(o->cmd, 0);
    vkBeginCommandBuffer(o->cmd, &begin);
    VkBufferCopy region = { .srcOffset = 0, .dstOffset = off + done, .size = n };
    vkCmdCopyBuffer(o->cmd, o->staging.buf, dst->buf, 1, &region);
    vkEndCommandBuffer(o->cmd);
    if (!submit_and_wait(o, "uploading the weights", err))
      return false;
  }
  return true;
}

/* ---- weights ---- */

static int
matmul_pipe(uint32_t type)
{
  /* a regrouped layout is put back in file layout at upload (upload_matrix) */
  switch (hn_type_file_layout((HnType) type)) {
  case HN_TYPE_F32: return HN_VK_SHADER_MATMUL_F32;
  case HN_TYPE_F16: return HN_VK_SHADER_MATMUL_F16;
  case HN_TYPE_BF16: return HN_VK_SHADER_MATMUL_BF16;
  case HN_TYPE_Q4_0: return HN_VK_SHADER_MATMUL_Q4_0;
  case HN_TYPE_Q8_0: return HN_VK_SHADER_MATMUL_Q8_0;
  case HN_TYPE_Q4_K: return HN_VK_SHADER_MATMUL_Q4_K;
  case HN_TYPE_Q5_K: return HN_VK_SHADER_MATMUL_Q5_K;
  case HN_TYPE_Q6_K: return HN_VK_SHADER_MATMUL_Q6_K;
  default: return -1; /* converted to F16 at upload */
  }
}

static VkDeviceSize
align_up(VkDeviceSize v, VkDeviceSize a)
{
  return (v + a - 1) / a * a;
}

/* Places a matrix in the layer's buffer (*end grows); only the layout, no copy yet. */
static bool
plan_matrix(HnVkOffload *o, const HnGgufTensor *t, VkMatrix *mx, VkDeviceSize *end, HnError *err)
{
  int pipe = matmul_pipe(t->type);
  mx->K = (uint32_t) t->ne[0];
  mx->N = (uint32_t) t->ne[1];
  mx->pipe = pipe >= 0 ? pipe : HN_VK_SHADER_MATMUL_F16;
  mx->row_bytes = pipe >= 0 ? (uint32_t) hn_type_row_bytes(t->type, t->ne[0]) : (uint32_t) t->ne[0] * 2u;
  mx->size = (VkDeviceSize) mx->row_bytes * mx->N;
  if (pipe != HN_VK_SHADER_MATMUL_F32 && pipe != HN_VK_SHADER_MATMUL_F16 && pipe != HN_VK_SHADER_MATMUL_BF16 &&
      pipe >= 0 && mx->K % 32u != 0)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The tensor %s has rows the graphics kernels cannot split.", t->name);
  if ((mx->N + MATVEC_ROWS - 1) / MATVEC_ROWS > o->max_groups || mx->size > o->max_range)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The tensor %s is larger than the graphics device can address at once.",
                        t->name);
  mx->off = *end;
  *end = align_up(*end + mx->size, o->align);
  return true;
}

static void
plan_vector(HnVkOffload *o, const float *data, int n, VkVector *vec, VkDeviceSize *end)
{
  vec->size = data ? (VkDeviceSize) n * sizeof(float) : 0;
  vec->off = *end;
  if (data)
    *end = align_up(*end + vec->size, o->align);
}

static bool
upload_matrix(HnVkOffload *o, VkBuf *b, const HnGgufTensor *t, const VkMatrix *mx, HnError *err)
{
  if (hn_type_file_layout(t->type) != t->type && matmul_pipe(t->type) >= 0) {
    /* regrouped at load for the CPU's decode kernel; the shaders read file layout (a
     * type without a shader is converted below, through its own type) */
    uint8_t *rows = malloc((size_t) mx->size);
    if (!rows)
      return hn_error_set(err, HN_ERR_NOMEM, "out of memory converting %s for the graphics device", t->name);
    for (uint32_t r = 0; r < mx->N; r++)
      hn_type_ungroup_row(t->type, (const uint8_t *) t->data + (size_t) r * mx->row_bytes,
                          rows + (size_t) r * mx->row_bytes, mx->K);
    bool ok = upload(o, b, mx->off, rows, mx->size, err);
    free(rows);
    return ok;
  }
  if (matmul_pipe(t->type) >= 0)
    return upload(o, b, mx->off, t->data, mx->size, err);
  /* other types: dequantized once, stored as half floats */
  float *row = malloc((size_t) mx->K * sizeof(float));
  uint16_t *half = malloc((size_t) mx->size);
  if (!row || !half) {
    free(row);
    free(half);
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory converting %s for the graphics device", t->name);
  }
  size_t src_row = hn_type_row_bytes(t->type, t->ne[0]);
  for (uint32_t r = 0; r < mx->N; r++) {
    hn_dequantize_row((HnType) t->type, (const uint8_t *) t->data + (size_t) r * src_row, row, mx->K);
    for (uint32_t i = 0; i < mx->K; i++)
      half[(size_t) r * mx->K + i] = hn_fp32_to_fp16(row[i]);
  }
  bool ok = upload(o, b, mx->off, half, mx->size, err);
  free(row);
  free(half);
  return ok;
}

static bool
upload_vector(HnVkOffload *o, VkBuf *b, const float *data, const VkVector *vec, HnError *err)
{
  return !data || upload(o, b, vec->off, data, vec->size, err);
}

/* Lays out a layer's tensors in its buffer; *end becomes the buffer's size. */
static bool
plan_layer(HnVkOffload *o, const HnLayer *L, VkLayer *V, VkDeviceSize *end_out, HnError *err)
{
  const HnModel *m = o->model;
  VkDeviceSize end = 0;
  const HnGgufTensor *mats[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
  VkMatrix *dst[7] = { &V->wq, &V->wk, &V->wv, &V->wo, &V->gate, &V->up, &V->down };
  for (int i = 0; i < 7; i++)
    if (!plan_matrix(o, mats[i], dst[i], &end, err))
      return false;
  plan_vector(o, L->attn_norm, m->n_embd, &V->attn_norm, &end);
  plan_vector(o, L->ffn_norm, m->n_embd, &V->ffn_norm, &end);
  plan_vector(o, L->q_norm, m->head_dim, &V->q_norm, &end);
  plan_vector(o, L->k_norm, m->head_dim, &V->k_norm, &end);
  plan_vector(o, L->bq, m->n_head * m->head_dim, &V->bq, &end);
  plan_vector(o, L->bk, m->n_head_kv * m->head_dim, &V->bk, &end);
  plan_vector(o, L->bv, m->n_head_kv * m->head_dim, &V->bv, &end);
  *end_out = end;
  return true;
}

static bool
load_layer(HnVkOffload *o, const HnLayer *L, VkLayer *V, int il, HnError *err)
{
  VkDeviceSize end = 0;
  const HnGgufTensor *mats[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
  VkMatrix *dst[7] = { &V->wq, &V->wk, &V->wv, &V->wo, &V->gate, &V->up, &V->down };
  if (!plan_layer(o, L, V, &end, err))
    return false;
  char what[64];
  snprintf(what, sizeof what, "weights of layer %d", il);
  if (!buf_new(o, &V->buf, end, false, what, err))
    return false;
  for (int i = 0; i < 7; i++)
    if (!upload_matrix(o, &V->buf, mats[i], dst[i], err))
      return false;
  return upload_vector(o, &V->buf, L->attn_norm, &V->attn_norm, err) &&
         upload_vector(o, &V->buf, L->ffn_norm, &V->ffn_norm, err) &&
         upload_vector(o, &V->buf, L->q_norm, &V->q_norm, err) &&
         upload_vector(o, &V->buf, L->k_norm, &V->k_norm, err) &&
         upload_vector(o, &V->buf, L->bq, &V->bq, err) &&
         upload_vector(o, &V->buf, L->bk, &V->bk, err) &&
         upload_vector(o, &V->buf, L->bv, &V->bv, err);
}

/* ---- setup ---- */

/* Why the device path cannot run this model, or NULL. */
static const char *
unsupported_reason(const HnModel *m)
{
  if (m->traits->moe)
    return "mixture-of-experts layers";
  if (m->traits->post_norms)
    return "post-norms";
  if (m->attn_softcap > 0.0f)
    return "attention soft-capping";
  if (m->n_sliding > 0 && m->swa_window > 0)
    return "sliding-window attention";
  if (m->head_dim > MAX_HEAD_DIM || m->head_dim % 2 != 0 || m->rope.n_rot % 2 != 0)
    return "its head size";
  return NULL;
}

/* want < 0: the best device; with hardware_only, never a software driver. */
static bool
pick_device(HnVkOffload *o, int want, bool hardware_only, HnError *err)
{
  uint32_t n = 0;
  VkResult r = vkEnumeratePhysicalDevices(o->instance, &n, NULL);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, "listing the graphics devices");
  if (n == 0)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "No Vulkan device was found.");
  VkPhysicalDevice *devs = calloc(n, sizeof *devs);
  if (!devs)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  vkEnumeratePhysicalDevices(o->instance, &n, devs);
  if (want >= (int) n) {
    free(devs);
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "There is no Vulkan device number %d (%u found).", want, n);
  }
  int best = want;
  if (best < 0) {
    int best_rank = -1;
    for (uint32_t i = 0; i < n; i++) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(devs[i], &p);
      if (type_rank(p.deviceType) > best_rank && (!hardware_only || type_rank(p.deviceType) >= 2)) {
        best_rank = type_rank(p.deviceType);
        best = (int) i;
      }
    }
    if (best < 0) {
      free(devs);
      return hn_error_set(err, HN_ERR_UNSUPPORTED,
                          "No graphics device was found, only a software Vulkan driver, which is slower than the "
                          "processor.");
    }
  }
  o->phys = devs[best];
  free(devs);
  return true;
}

/* What planning needs to know of the picked device. */
static void
read_limits(HnVkOffload *o)
{
  VkPhysicalDeviceProperties props;
  vkGetPhysicalDeviceProperties(o->phys, &props);
  snprintf(o->device_name, sizeof o->device_name, "%s", props.deviceName);
  o->unified = props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU || props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  o->align = props.limits.minStorageBufferOffsetAlignment > 256 ? props.limits.minStorageBufferOffsetAlignment : 256;
  o->max_range = props.limits.maxStorageBufferRange;
  unsigned long long range = 0;
  if (seam_number("range", &range) && range < o->max_range)
    o->max_range = (VkDeviceSize) range;
  o->max_groups = props.limits.maxComputeWorkGroupCount[0] < props.limits.maxComputeWorkGroupCount[1]
                    ? props.limits.maxComputeWorkGroupCount[0] : props.limits.maxComputeWorkGroupCount[1];
  vkGetPhysicalDeviceMemoryProperties(o->phys, &o->mem_props);
  char unused[2];
  o->tiled = props.limits.maxComputeWorkGroupInvocations >= TILE_INVOCATIONS &&
             props.limits.maxComputeWorkGroupSize[0] >= TILE_INVOCATIONS &&
             props.limits.maxComputeSharedMemorySize >= TILE_SHARED_BYTES &&
             !seam_item("small-workgroups", unused, sizeof unused);
}

static bool
has_extension(VkPhysicalDevice phys, const char *name)
{
  uint32_t n_ext = 0;
  vkEnumerateDeviceExtensionProperties(phys, NULL, &n_ext, NULL);
  VkExtensionProperties *exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
  if (!exts)
    return false;
  vkEnumerateDeviceExtensionProperties(phys, NULL, &n_ext, exts);
  bool found = false;
  for (uint32_t i = 0; i < n_ext; i++)
    found |= strcmp(exts[i].extensionName, name) == 0;
  free(exts);
  return found;
}

static bool
create_device(HnVkOffload *o, HnError *err)
{
  read_limits(o);
  char unused[2];
  bool has_push = has_extension(o->phys, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME) &&
                  !seam_item("push-descriptors", unused, sizeof unused);
  if (!has_push)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics driver of %s lacks %s, which Hanashi needs.",
                        o->device_name, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
  uint32_t n_fam = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(o->phys, &n_fam, NULL);
  VkQueueFamilyProperties fams[16];
  n_fam = n_fam > 16 ? 16 : n_fam;
  vkGetPhysicalDeviceQueueFamilyProperties(o->phys, &n_fam, fams);
  int family = -1;
  for (uint32_t i = 0; i < n_fam && family < 0; i++)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
      family = (int) i;
  if (family < 0)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "%s has no compute queue.", o->device_name);
  o->queue_family = (uint32_t) family;
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qinfo = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = o->queue_family,
    .queueCount = 1, .pQueuePriorities = &priority,
  };
  const char *ext_names[] = { VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME };
  VkDeviceCreateInfo dinfo = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .queueCreateInfoCount = 1, .pQueueCreateInfos = &qinfo,
    .enabledExtensionCount = 1, .ppEnabledExtensionNames = ext_names,
  };
  VkResult r = vkCreateDevice(o->phys, &dinfo, NULL, &o->device);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, "opening the graphics device");
  vkGetDeviceQueue(o->device, o->queue_family, 0, &o->queue);
  o->push_descriptors = (PFN_vkCmdPushDescriptorSetKHR) vkGetDeviceProcAddr(o->device, "vkCmdPushDescriptorSetKHR");
  if (!o->push_descriptors)
    return hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics driver of %s does not provide push descriptors.",
                        o->device_name);
  VkCommandPoolCreateInfo pinfo = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, .queueFamilyIndex = o->queue_family,
    .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
  };
  r = vkCreateCommandPool(o->device, &pinfo, NULL, &o->cmd_pool);
  VkCommandBufferAllocateInfo cinfo = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = o->cmd_pool,
    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1,
  };
  if (r == VK_SUCCESS)
    r = vkAllocateCommandBuffers(o->device, &cinfo, &o->cmd);
  VkFenceCreateInfo finfo = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  if (r == VK_SUCCESS)
    r = vkCreateFence(o->device, &finfo, NULL, &o->fence);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, "preparing the graphics device");
  return true;
}

/* Builds the shaders the offloaded layers need (drivers compile SPIR-V to machine code
 * here, which takes seconds on a software driver: matrix kernels of absent weight types
 * are not built at all). */
static bool
create_pipelines(HnVkOffload *o, const bool *needed, HnError *err)
{
  VkDescriptorSetLayoutBinding bindings[MAX_BINDINGS];
  for (int i = 0; i < MAX_BINDINGS; i++)
    bindings[i] = (VkDescriptorSetLayoutBinding) {
      .binding = (uint32_t) i, .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1,
      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
    };
  VkDescriptorSetLayoutCreateInfo sinfo = {
    .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
    .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
    .bindingCount = MAX_BINDINGS, .pBindings = bindings,
  };
  VkResult r = vkCreateDescriptorSetLayout(o->device, &sinfo, NULL, &o->set_layout);
  VkPushConstantRange range = { .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = 32 };
  VkPipelineLayoutCreateInfo linfo = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1, .pSetLayouts = &o->set_layout,
    .pushConstantRangeCount = 1, .pPushConstantRanges = &range,
  };
  if (r == VK_SUCCESS)
    r = vkCreatePipelineLayout(o->device, &linfo, NULL, &o->pipe_layout);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, "preparing the shaders");
  for (int i = 0; i < HN_VK_SHADER_COUNT; i++) {
    if (!needed[i])
      continue;
    const HnVkShader *s = &hn_vk_shaders[i];
    VkShaderModuleCreateInfo minfo = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = s->n_words * 4, .pCode = s->words,
    };
    VkShaderModule module;
    r = seam_shader_fails(s->name) ? VK_ERROR_INITIALIZATION_FAILED : vkCreateShaderModule(o->device, &minfo, NULL, &module);
    if (r == VK_SUCCESS) {
      VkComputePipelineCreateInfo cinfo = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                   .module = module, .pName = "main" },
        .layout = o->pipe_layout,
      };
      r = vkCreateComputePipelines(o->device, VK_NULL_HANDLE, 1, &cinfo, NULL, &o->pipes[i]);
      vkDestroyShaderModule(o->device, module, NULL);
    }
    if (r != VK_SUCCESS)
      return hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics driver could not build the %s shader (Vulkan error %d).",
                          s->name, (int) r);
  }
  return true;
}

static uint64_t
memory_limit(void)
{
  const char *env = getenv("HANASHI_VULKAN_MEMORY_LIMIT");
  if (!env || !*env)
    return 0;
  char *end = NULL;
  unsigned long long v = strtoull(env, &end, 10);
  return end && *end == '\0' ? (uint64_t) v : 0;
}

/* Places the inputs and outputs in their buffer; returns its size. */
static VkDeviceSize
plan_io(HnVkOffload *o)
{
  const HnModel *m = o->model;
  size_t E = (size_t) m->n_embd, nb = (size_t) o->params.n_batch, half = (size_t) m->rope.n_rot / 2;
  o->io_x = 0;
  o->io_angles = align_up(nb * E * sizeof(float), o->align);
  o->io_tokens = align_up(o->io_angles + nb * (half ? half : 1) * 2 * sizeof(float), o->align);
  o->io_cells = align_up(o->io_tokens + nb * 4 * sizeof(int32_t), o->align);
  return o->io_cells + (VkDeviceSize) o->params.n_ctx * 2 * sizeof(int32_t);
}

/* What every offload allocates, however many layers it takes: the KV cache of every layer,
 * the inputs and outputs, the activations (as hn_vk_offload_new allocates them) and the
 * upload buffer where the processor cannot map the device's memory. */
static uint64_t
fixed_bytes(HnVkOffload *o)
{
  const HnModel *m = o->model;
  uint64_t E = (uint64_t) m->n_embd, Q = (uint64_t) m->n_head * (uint64_t) m->head_dim;
  uint64_t KV = (uint64_t) m->n_head_kv * (uint64_t) m->head_dim, F = (uint64_t) m->n_ff;
  uint64_t nb = (uint64_t) o->params.n_batch;
  uint64_t kv_bytes = (uint64_t) m->n_layer * (uint64_t) o->params.n_ctx * KV * sizeof(uint16_t);
  uint64_t scratch = nb * 4 * (2 * E + 2 * Q + 2 * KV + 2 * F);
  return 2 * kv_bytes + plan_io(o) + scratch + (o->unified ? 0 : STAGING_BYTES);
}

/* The memory the device offers this process: the budget of its device-local heaps where
 * the driver reports one (it leaves out what other programs use), else their size. */
static uint64_t
device_memory(HnVkOffload *o)
{
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT,
  };
  bool has_budget = has_extension(o->phys, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  if (has_budget) {
    VkPhysicalDeviceMemoryProperties2 props2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &budget,
    };
    vkGetPhysicalDeviceMemoryProperties2(o->phys, &props2);
  }
  uint64_t total = 0;
  for (uint32_t h = 0; h < o->mem_props.memoryHeapCount; h++)
    if (o->mem_props.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      total += has_budget && budget.heapBudget[h] ? budget.heapBudget[h] : o->mem_props.memoryHeaps[h].size;
  return total;
}

int
hn_vk_fit_layers(const HnModel *m, const HnVkOffloadParams *params, HnError *err)
{
  if (params->n_ctx <= 0 || params->n_batch <= 0) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "invalid context of %d cells for the graphics device", params->n_ctx);
    return -1;
  }
  HnVkOffload o = { .model = m, .params = *params };
  o.params.first_layer = 0;
  if (!(o.instance = create_instance(err)))
    return -1;
  int fit = -1;
  if (!pick_device(&o, params->device, params->device < 0, err))
    goto done;
  read_limits(&o);
  fit = 0;
  const char *why = unsupported_reason(m);
  if (why) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics device cannot run %s models yet (%s).", m->arch, why);
    goto done;
  }
  uint64_t memory = device_memory(&o), limit = memory_limit();
  if (limit && limit < memory)
    memory = limit;
  uint64_t margin = memory / 100 * HN_VK_FIT_MARGIN_PERCENT;
  if (margin > HN_VK_FIT_MARGIN_MAX)
    margin = HN_VK_FIT_MARGIN_MAX;
  uint64_t used = fixed_bytes(&o) + margin;
  HnError plan_err = { 0 };
  for (int il = m->n_layer - 1; il >= 0 && used <= memory; il--) {
    VkLayer layer;
    VkDeviceSize size = 0;
    if (!plan_layer(&o, &m->layers[il], &layer, &size, &plan_err))
      break; /* a tensor the device cannot bind: the layers after it still fit */
    used += size;
    if (used <= memory)
      fit++;
  }
  if (fit == 0 && plan_err.message[0])
    hn_error_set(err, plan_err.code, "%s", plan_err.message);
  else if (fit == 0)
    hn_error_set(err, HN_ERR_NOMEM, "Not even one layer of this model fits in the memory of %s (%.1f MB).",
                 o.device_name, (double) memory / 1e6);
done:
  vkDestroyInstance(o.instance, NULL);
  return fit;
}

HnVkOffload *
hn_vk_offload_new(const HnModel *m, const HnVkOffloadParams *params, HnError *err)
{
  const char *why = unsupported_reason(m);
  if (why) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "The graphics device cannot run %s models yet (%s).", m->arch, why);
    return NULL;
  }
  if (params->first_layer < 0 || params->first_layer >= m->n_layer || params->n_ctx <= 0 || params->n_batch <= 0) {
    hn_error_set(err, HN_ERR_INVALID_ARG, "invalid offload of layers %d.. of %d", params->first_layer, m->n_layer);
    return NULL;
  }
  HnVkOffload *o = calloc(1, sizeof *o);
  if (!o) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    return NULL;
  }
  o->model = m;
  o->params = *params;
  o->limit = memory_limit();
  int n_off = m->n_layer - params->first_layer;
  o->layers = calloc((size_t) n_off, sizeof *o->layers);
  if (!o->layers) {
    hn_error_set(err, HN_ERR_NOMEM, "out of memory");
    goto fail;
  }
  bool needed[HN_VK_SHADER_COUNT];
  for (int i = 0; i < HN_VK_SHADER_COUNT; i++)
    needed[i] = i >= HN_VK_SHADER_RMSNORM;
  for (int il = params->first_layer; il < m->n_layer; il++) {
    const HnLayer *L = &m->layers[il];
    const HnGgufTensor *mats[7] = { L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down };
    for (int i = 0; i < 7; i++) {
      int pipe = matmul_pipe(mats[i]->type);
      pipe = pipe >= 0 ? pipe : HN_VK_SHADER_MATMUL_F16;
      needed[MATVEC_OF(pipe)] = true;
      /* the tiled kernel only serves batches larger than the matrix-vector one takes */
      needed[pipe] = params->n_batch > MATVEC_TOKENS;
    }
  }
  if (!(o->instance = create_instance(err)) || !pick_device(o, params->device, false, err) || !create_device(o, err))
    goto fail;
  for (int i = HN_VK_SHADER_MATMUL_F32; i <= HN_VK_SHADER_MATMUL_Q6_K; i++)
    needed[i] = needed[i] && o->tiled;
  if (!create_pipelines(o, needed, err))
    goto fail;
  size_t E = (size_t) m->n_embd, Q = (size_t) m->n_head * (size_t) m->head_dim;
  size_t KV = (size_t) m->n_head_kv * (size_t) m->head_dim, F = (size_t) m->n_ff, nb = (size_t) params->n_batch;
  size_t kv_bytes = (size_t) m->n_layer * (size_t) params->n_ctx * KV * sizeof(uint16_t);
  if (kv_bytes > o->max_range) {
    hn_error_set(err, HN_ERR_UNSUPPORTED, "A KV cache of %d tokens is larger than %s can address; use a smaller context.",
                 params->n_ctx, o->device_name);
    goto fail;
  }
  VkDeviceSize io_bytes = plan_io(o);
  if (!buf_new(o, &o->kv_k, kv_bytes, true, "key cache", err) || !buf_new(o, &o->kv_v, kv_bytes, true, "value cache", err) ||
      !buf_new(o, &o->io, io_bytes, true, "inputs and outputs", err) ||
      !buf_new(o, &o->x, nb * E * 4, false, "activations", err) || !buf_new(o, &o->xn, nb * E * 4, false, "activations", err) ||
      !buf_new(o, &o->q, nb * Q * 4, false, "activations", err) || !buf_new(o, &o->attn, nb * Q * 4, false, "activations", err) ||
      !buf_new(o, &o->k, nb * KV * 4, false, "activations", err) || !buf_new(o, &o->v, nb * KV * 4, false, "activations", err) ||
      !buf_new(o, &o->gate, nb * F * 4, false, "activations", err) || !buf_new(o, &o->up, nb * F * 4, false, "activations", err))
    goto fail;
  memset(o->kv_k.map, 0, kv_bytes);
  memset(o->kv_v.map, 0, kv_bytes);
  for (int i = 0; i < n_off; i++)
    if (!load_layer(o, &m->layers[params->first_layer + i], &o->layers[i], params->first_layer + i, err))
      goto fail;
  /* the weights are in; the staging buffer is not needed any more */
  buf_free(o, &o->staging);
  return o;
fail:
  hn_vk_offload_free(o);
  return NULL;
}

void
hn_vk_offload_free(HnVkOffload *o)
{
  if (!o)
    return;
  if (o->device) {
    vkDeviceWaitIdle(o->device);
    int n_off = o->model ? o->model->n_layer - o->params.first_layer : 0;
    for (int i = 0; o->layers && i < n_off; i++)
      buf_free(o, &o->layers[i].buf);
    VkBuf *bufs[] = { &o->kv_k, &o->kv_v, &o->io, &o->x, &o->xn, &o->q, &o->attn, &o->k, &o->v, &o->gate, &o->up,
                      &o->staging };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
      buf_free(o, bufs[i]);
    for (int i = 0; i < HN_VK_SHADER_COUNT; i++)
      if (o->pipes[i])
        vkDestroyPipeline(o->device, o->pipes[i], NULL);
    if (o->pipe_layout)
      vkDestroyPipelineLayout(o->device, o->pipe_layout, NULL);
    if (o->set_layout)
      vkDestroyDescriptorSetLayout(o->device, o->set_layout, NULL);
    if (o->fence)
      vkDestroyFence(o->device, o->fence, NULL);
    if (o->cmd_pool)
      vkDestroyCommandPool(o->device, o->cmd_pool, NULL);
    vkDestroyDevice(o->device, NULL);
  }
  if (o->instance)
    vkDestroyInstance(o->instance, NULL);
  free(o->layers);
  free(o);
}

uint16_t *hn_vk_offload_k_storage(HnVkOffload *o) { return o->kv_k.map; }
uint16_t *hn_vk_offload_v_storage(HnVkOffload *o) { return o->kv_v.map; }
const char *hn_vk_offload_device_name(const HnVkOffload *o) { return o->device_name; }
uint64_t hn_vk_offload_device_bytes(const HnVkOffload *o) { return o->allocated; }

/* ---- recording ---- */

typedef struct {
  const VkBuf *buf;
  VkDeviceSize off, size; /* size 0: to the end */
} Binding;

static Binding whole(const VkBuf *b) { return (Binding) { b, 0, 0 }; }
static Binding in_layer(const VkLayer *L, VkDeviceSize off, VkDeviceSize size) { return (Binding) { &L->buf, off, size }; }

static void
dispatch(HnVkOffload *o, int pipe, const Binding *b, int n_bind, const void *pc, size_t pc_size, uint32_t gx,
         uint32_t gy)
{
  VkDescriptorBufferInfo infos[MAX_BINDINGS];
  VkWriteDescriptorSet writes[MAX_BINDINGS];
  for (int i = 0; i < n_bind; i++) {
    infos[i] = (VkDescriptorBufferInfo) { b[i].buf->buf, b[i].off, b[i].size ? b[i].size : VK_WHOLE_SIZE };
    writes[i] = (VkWriteDescriptorSet) {
      .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = (uint32_t) i, .descriptorCount = 1,
      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &infos[i],
    };
  }
  vkCmdBindPipeline(o->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, o->pipes[pipe]);
  o->push_descriptors(o->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, o->pipe_layout, 0, (uint32_t) n_bind, writes);
  vkCmdPushConstants(o->cmd, o->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t) pc_size, pc);
  vkCmdDispatch(o->cmd, gx, gy, 1);
  o->counts.dispatches++;
}

/* Every step reads what the one before wrote. */
static void
barrier(HnVkOffload *o)
{
  VkMemoryBarrier mb = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT,
  };
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vkCmdPipelineBarrier(o->cmd, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
  o->counts.barriers++;
}

/* Element-wise shaders loop over their items with a grid stride, so a large batch never
 * asks for more workgroups than every device allows. */
#define MAX_STRIDE_GROUPS 4096u

static uint32_t
groups(size_t n, size_t per)
{
  return (uint32_t) ((n + per - 1) / per);
}

static uint32_t
stride_groups(size_t n)
{
  uint32_t g = groups(n, 64);
  return g < MAX_STRIDE_GROUPS ? (g ? g : 1) : MAX_STRIDE_GROUPS;
}

/* y[nt][N] = x[nt][K] · Wᵀ from a weight matrix at off in buf; a device whose workgroups
 * cannot hold a tile runs every batch through the matrix-vector kernel.  The binding is rounded up
 * to whole words: the shaders read weights as 32-bit words, and every tensor starts
 * aligned, so the word holding a matrix's last byte lies inside the buffer. */
static void
matmul_at(HnVkOffload *o, const VkBuf *buf, const VkMatrix *w, const VkBuf *x, const VkBuf *y, int nt)
{
  struct { uint32_t K, N, nt, row_bytes; } pc = { w->K, w->N, (uint32_t) nt, w->row_bytes };
  Binding b[3] = { { buf, w->off, align_up(w->size, 4) }, whole(x), whole(y) };
  if (nt <= MATVEC_TOKENS || !o->tiled) {
    dispatch(o, MATVEC_OF(w->pipe), b, 3, &pc, sizeof pc, groups(w->N, MATVEC_ROWS), groups((size_t) nt, MATVEC_TOKENS));
    o->counts.matvec_dispatches++;
  } else {
    dispatch(o, w->pipe, b, 3, &pc, sizeof pc, groups(w->N, TILE_ROWS), groups((size_t) nt, TILE_TOKENS));
    o->counts.tiled_dispatches++;
  }
}

static void
matmul(HnVkOffload *o, const VkLayer *L, const VkMatrix *w, const VkBuf *x, const VkBuf *y, int nt)
{
  matmul_at(o, &L->buf, w, x, y, nt);
}

static void
rms_norm(HnVkOffload *o, const VkLayer *L, const VkVector *w, const VkBuf *x, const VkBuf *y, int rows, int n)
{
  struct { uint32_t n; float eps; } pc = { (uint32_t) n, o->model->rms_eps };
  Binding b[3] = { whole(x), in_layer(L, w->off, w->size), whole(y) };
  dispatch(o, HN_VK_SHADER_RMSNORM, b, 3, &pc, sizeof pc, (uint32_t) rows, 1);
}

static void
eltwise(HnVkOffload *o, uint32_t op, const VkBuf *a, Binding bb, size_t n, uint32_t width)
{
  struct { uint32_t op, n, width; } pc = { op, (uint32_t) n, width };
  Binding b[2] = { whole(a), bb };
  dispatch(o, HN_VK_SHADER_ELTWISE, b, 2, &pc, sizeof pc, stride_groups(n), 1);
}

static void
rope(HnVkOffload *o, const VkBuf *x, int n_head, int nt)
{
  const HnModel *m = o->model;
  struct { uint32_t n_head, head_dim, n_rot, neox, row_stride, nt; } pc = {
    (uint32_t) n_head, (uint32_t) m->head_dim, (uint32_t) m->rope.n_rot, m->rope.neox ? 1u : 0u,
    (uint32_t) (n_head * m->head_dim), (uint32_t) nt,
  };
  Binding b[2] = { whole(x), { &o->io, o->io_angles, o->io_tokens - o->io_angles } };
  dispatch(o, HN_VK_SHADER_ROPE, b, 2, &pc, sizeof pc, stride_groups((size_t) nt * n_head * (m->rope.n_rot / 2)), 1);
}

static void
record_layer(HnVkOffload *o, int il, int nt, uint32_t n_cells)
{
  const HnModel *m = o->model;
  const VkLayer *L = &o->layers[il - o->params.first_layer];
  int E = m->n_embd, Q = m->n_head * m->head_dim, KV = m->n_head_kv * m->head_dim, F = m->n_ff;
  Binding tokens = { &o->io, o->io_tokens, o->io_cells - o->io_tokens };
  rms_norm(o, L, &L->attn_norm, &o->x, &o->xn, nt, E);
  barrier(o);
  matmul(o, L, &L->wq, &o->xn, &o->q, nt);
  matmul(o, L, &L->wk, &o->xn, &o->k, nt);
  matmul(o, L, &L->wv, &o->xn, &o->v, nt);
  barrier(o);
  if (L->bq.size) {
    eltwise(o, OP_ADD_BIAS, &o->q, in_layer(L, L->bq.off, L->bq.size), (size_t) nt * Q, (uint32_t) Q);
    eltwise(o, OP_ADD_BIAS, &o->k, in_layer(L, L->bk.off, L->bk.size), (size_t) nt * KV, (uint32_t) KV);
    eltwise(o, OP_ADD_BIAS, &o->v, in_layer(L, L->bv.off, L->bv.size), (size_t) nt * KV, (uint32_t) KV);
    barrier(o);
  }
  if (L->q_norm.size) {
    rms_norm(o, L, &L->q_norm, &o->q, &o->q, nt * m->n_head, m->head_dim);
    rms_norm(o, L, &L->k_norm, &o->k, &o->k, nt * m->n_head_kv, m->head_dim);
    barrier(o);
  }
  rope(o, &o->q, m->n_head, nt);
  rope(o, &o->k, m->n_head_kv, nt);
  barrier(o);
  VkDeviceSize layer_halves = (VkDeviceSize) il * (VkDeviceSize) o->params.n_ctx * (VkDeviceSize) KV;
  struct { uint32_t kv_dim, nt, layer_base; } kpc = { (uint32_t) KV, (uint32_t) nt, (uint32_t) (layer_halves / 2) };
  Binding kb[5] = { whole(&o->k), whole(&o->v), whole(&o->kv_k), whole(&o->kv_v), tokens };
  dispatch(o, HN_VK_SHADER_KVSTORE, kb, 5, &kpc, sizeof kpc, stride_groups((size_t) nt * KV / 2), 1);
  barrier(o);
  struct { uint32_t head_dim, n_head, group, kv_dim, n_cells, layer_base; float scale; } apc = {
    (uint32_t) m->head_dim, (uint32_t) m->n_head, (uint32_t) (m->n_head / m->n_head_kv), (uint32_t) KV, n_cells,
    (uint32_t) layer_halves, m->query_scale,
  };
  Binding ab[6] = { whole(&o->q), whole(&o->kv_k), whole(&o->kv_v), { &o->io, o->io_cells, 0 }, tokens, whole(&o->attn) };
  dispatch(o, HN_VK_SHADER_ATTENTION, ab, 6, &apc, sizeof apc, (uint32_t) m->n_head, (uint32_t) nt);
  barrier(o);
  matmul(o, L, &L->wo, &o->attn, &o->xn, nt);
  barrier(o);
  eltwise(o, OP_ADD, &o->x, whole(&o->xn), (size_t) nt * E, 0);
  barrier(o);
  rms_norm(o, L, &L->ffn_norm, &o->x, &o->xn, nt, E);
  barrier(o);
  matmul(o, L, &L->gate, &o->xn, &o->gate, nt);
  matmul(o, L, &L->up, &o->xn, &o->up, nt);
  barrier(o);
  eltwise(o, m->traits->act == HN_ACT_GELU_TANH ? OP_GELU_GATE : OP_SILU_GATE, &o->gate, whole(&o->up), (size_t) nt * F, 0);
  barrier(o);
  matmul(o, L, &L->down, &o->gate, &o->xn, nt);
  barrier(o);
  eltwise(o, OP_ADD, &o->x, whole(&o->xn), (size_t) nt * E, 0);
  barrier(o);
}

bool
hn_vk_offload_run(HnVkOffload *o, float *x, int nt, const int32_t *pos, const int32_t *seq, const int32_t *cells,
                  const HnKvCache *kv, const HnRope *rp, HnError *err)
{
  const HnModel *m = o->model;
  if (nt <= 0 || nt > o->params.n_batch)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "a batch of %d tokens for a device prepared for %d", nt,
                        o->params.n_batch);
  size_t E = (size_t) m->n_embd;
  char *io = o->io.map;
  memcpy(io + o->io_x, x, (size_t) nt * E * sizeof(float));
  /* the rotation angles of each token, in double like hn_rope_apply */
  int half = rp->n_rot / 2;
  float *angles = (float *) (io + o->io_angles);
  float mscale = rp->attn_factor > 0.0f ? rp->attn_factor : 1.0f;
  for (int t = 0; t < nt; t++)
    for (int i = 0; i < half; i++) {
      double freq = pow((double) rp->freq_base, -2.0 * i / rp->n_rot) * rp->freq_scale;
      if (rp->freq_factors)
        freq /= rp->freq_factors[i];
      double theta = (double) pos[t] * freq;
      angles[((size_t) t * half + i) * 2] = (float) cos(theta) * mscale;
      angles[((size_t) t * half + i) * 2 + 1] = (float) sin(theta) * mscale;
    }
  int32_t *tok = (int32_t *) (io + o->io_tokens);
  for (int t = 0; t < nt; t++) {
    tok[t * 4] = cells[t];
    tok[t * 4 + 1] = pos[t];
    tok[t * 4 + 2] = (int32_t) ((uint32_t) 1u << seq[t]);
    tok[t * 4 + 3] = 0;
  }
  /* the cell table; attention walks it only up to the last cell in use */
  const HnKvCell *table = hn_kv_cache_cells(kv);
  int32_t *cell_info = (int32_t *) (io + o->io_cells);
  uint32_t n_cells = 0;
  for (int c = 0; c < hn_kv_cache_n_cells(kv); c++) {
    cell_info[c * 2] = table[c].pos;
    cell_info[c * 2 + 1] = (int32_t) table[c].seq_mask;
    if (table[c].pos >= 0)
      n_cells = (uint32_t) c + 1;
  }
  VkCommandBufferBeginInfo begin = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                     .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
  vkResetCommandBuffer(o->cmd, 0);
  vkBeginCommandBuffer(o->cmd, &begin);
  VkBufferCopy in = { .srcOffset = o->io_x, .dstOffset = 0, .size = (VkDeviceSize) nt * E * sizeof(float) };
  vkCmdCopyBuffer(o->cmd, o->io.buf, o->x.buf, 1, &in);
  barrier(o);
  for (int il = o->params.first_layer; il < m->n_layer; il++)
    record_layer(o, il, nt, n_cells);
  VkBufferCopy out = { .srcOffset = 0, .dstOffset = o->io_x, .size = in.size };
  vkCmdCopyBuffer(o->cmd, o->x.buf, o->io.buf, 1, &out);
  /* the processor reads the result and the new keys and values after the fence */
  VkMemoryBarrier to_host = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
    .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
  };
  vkCmdPipelineBarrier(o->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0, NULL, 0, NULL);
  VkResult r = vkEndCommandBuffer(o->cmd);
  if (r != VK_SUCCESS)
    return vk_fail(err, HN_ERR_UNSUPPORTED, r, "recording the layers");
  o->n_runs++;
  unsigned long long fail_at = 0;
  if (seam_number("lost", &fail_at) && fail_at == o->n_runs)
    return wait_succeeded(VK_ERROR_DEVICE_LOST, "evaluating the layers", err);
  if (seam_number("timeout", &fail_at) && fail_at == o->n_runs)
    return wait_succeeded(VK_TIMEOUT, "evaluating the layers", err);
  if (!submit_and_wait(o, "evaluating the layers", err))
    return false;
  o->counts.runs++;
  memcpy(x, io + o->io_x, (size_t) nt * E * sizeof(float));
  return true;
}

void
hn_vk_offload_counts(const HnVkOffload *o, HnVkCounts *out)
{
  *out = o->counts;
}

/* ---- one product, for kernel tests (hn_vk_matmul) ---- */

bool
hn_vk_matmul(int device, uint32_t type, const void *weights, int n_cols, int n_rows, const float *x, int nt, float *y,
             HnError *err)
{
  if (n_cols <= 0 || n_rows <= 0 || nt <= 0)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "invalid product of %d × %d weights with %d tokens", n_rows, n_cols, nt);
  HnVkOffload *o = calloc(1, sizeof *o);
  if (!o)
    return hn_error_set(err, HN_ERR_NOMEM, "out of memory");
  HnGgufTensor t = {
    .name = "the test matrix", .type = type, .n_dims = 2, .ne = { n_cols, n_rows, 1, 1 }, .data = weights,
  };
  VkMatrix mx = { 0 };
  VkBuf w = { 0 }, xb = { 0 }, yb = { 0 };
  VkDeviceSize end = 0;
  bool needed[HN_VK_SHADER_COUNT] = { false };
  bool ok = (o->instance = create_instance(err)) && pick_device(o, device, false, err) && create_device(o, err) &&
            plan_matrix(o, &t, &mx, &end, err);
  if (ok) {
    needed[mx.pipe] = o->tiled;
    needed[MATVEC_OF(mx.pipe)] = true;
    size_t x_bytes = (size_t) nt * (size_t) n_cols * sizeof(float), y_bytes = (size_t) nt * (size_t) n_rows * sizeof(float);
    ok = create_pipelines(o, needed, err) && buf_new(o, &w, end, false, "test matrix", err) &&
         buf_new(o, &xb, x_bytes, true, "test input", err) && buf_new(o, &yb, y_bytes, true, "test output", err) &&
         upload_matrix(o, &w, &t, &mx, err);
    if (ok) {
      memcpy(xb.map, x, x_bytes);
      VkCommandBufferBeginInfo begin = { .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                         .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT };
      vkResetCommandBuffer(o->cmd, 0);
      vkBeginCommandBuffer(o->cmd, &begin);
      matmul_at(o, &w, &mx, &xb, &yb, nt);
      VkMemoryBarrier to_host = { .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                  .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT, .dstAccessMask = VK_ACCESS_HOST_READ_BIT };
      vkCmdPipelineBarrier(o->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &to_host, 0,
                           NULL, 0, NULL);
      VkResult r = vkEndCommandBuffer(o->cmd);
      ok = r == VK_SUCCESS ? submit_and_wait(o, "multiplying the test matrix", err)
                           : vk_fail(err, HN_ERR_UNSUPPORTED, r, "recording the test product");
      if (ok)
        memcpy(y, yb.map, y_bytes);
    }
  }
  if (o->device) {
    vkDeviceWaitIdle(o->device);
    buf_free(o, &w);
    buf_free(o, &xb);
    buf_free(o, &yb);
  }
  hn_vk_offload_free(o);
  return ok;
}

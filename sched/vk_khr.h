/*
 * vk_khr.h - VK_KHR_cooperative_matrix, VK_KHR_shader_bfloat16 and
 * VK_NV_cooperative_matrix2 postdate the Vulkan headers some distributions
 * ship (Debian 12: 1.3.239): their structures and enumerants as the Vulkan
 * registry defines them.
 * Definitions only (no code, no runtime dependency): the runtime (vk.c) and
 * the raw benchmarks (bench/floor/) both use them.
 */
#ifndef NXV_SCHED_VK_KHR_H
#define NXV_SCHED_VK_KHR_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#define NXV_STYPE_COOPMAT_FEATURES_KHR ((VkStructureType)1000506000)
#define NXV_STYPE_COOPMAT_PROPERTIES_KHR ((VkStructureType)1000506001)
#define NXV_STYPE_BFLOAT16_FEATURES_KHR ((VkStructureType)1000141000)
#define NXV_COMPONENT_FLOAT16_KHR 0
#define NXV_COMPONENT_FLOAT32_KHR 1
#define NXV_COMPONENT_BFLOAT16_KHR 1000141000
#define NXV_SCOPE_WORKGROUP_KHR 2
#define NXV_SCOPE_SUBGROUP_KHR 3
#define NXV_STYPE_COOPMAT2_FEATURES_NV ((VkStructureType)1000593000)
#define NXV_STYPE_COOPMAT_FLEXIBLE_PROPERTIES_NV ((VkStructureType)1000593001)

typedef struct nxv_coopmat_features_khr {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrix;
  VkBool32 cooperativeMatrixRobustBufferAccess;
} nxv_coopmat_features_khr;

typedef struct nxv_bfloat16_features_khr {
  VkStructureType sType;
  void *pNext;
  VkBool32 shaderBFloat16Type;
  VkBool32 shaderBFloat16DotProduct;
  VkBool32 shaderBFloat16CooperativeMatrix;
} nxv_bfloat16_features_khr;

typedef struct nxv_coopmat_properties_khr {
  VkStructureType sType;
  void *pNext;
  uint32_t MSize, NSize, KSize;
  int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  int32_t scope;                           /* VkScopeKHR */
} nxv_coopmat_properties_khr;

typedef VkResult(VKAPI_PTR *nxv_pfn_coopmat_properties_khr)(
    VkPhysicalDevice, uint32_t *, nxv_coopmat_properties_khr *);

/* VK_NV_cooperative_matrix2 (only the raw benchmarks use it). */
typedef struct nxv_coopmat2_features_nv {
  VkStructureType sType;
  void *pNext;
  VkBool32 cooperativeMatrixWorkgroupScope;
  VkBool32 cooperativeMatrixFlexibleDimensions;
  VkBool32 cooperativeMatrixReductions;
  VkBool32 cooperativeMatrixConversions;
  VkBool32 cooperativeMatrixPerElementOperations;
  VkBool32 cooperativeMatrixTensorAddressing;
  VkBool32 cooperativeMatrixBlockLoads;
} nxv_coopmat2_features_nv;

/* One entry of vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensions-
 * PropertiesNV: the types above with granularities instead of sizes, and
 * the workgroup size a workgroup-scope entry requires. */
typedef struct nxv_coopmat_flexible_properties_nv {
  VkStructureType sType;
  void *pNext;
  uint32_t MGranularity, NGranularity, KGranularity;
  int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
  VkBool32 saturatingAccumulation;
  int32_t scope;                           /* VkScopeKHR */
  uint32_t workgroupInvocations;
} nxv_coopmat_flexible_properties_nv;

typedef VkResult(VKAPI_PTR *nxv_pfn_coopmat_flexible_properties_nv)(
    VkPhysicalDevice, uint32_t *, nxv_coopmat_flexible_properties_nv *);

#endif

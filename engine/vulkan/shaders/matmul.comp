#version 450
#extension GL_GOOGLE_include_directive : require
/* Y = X·Wᵀ for prompt batches, in tiles of BM rows × BN tokens per workgroup.  Per step of
 * BK values along the rows, the workgroup dequantizes the tile's weights once into shared
 * memory and stages the tokens' activations beside them; each invocation then accumulates
 * a register block of RM rows × RN tokens from shared memory.  So the weights are read
 * once per BN tokens instead of once per token, and every value read from shared memory
 * feeds RN (or RM) products. */
#define BM 64u
#define BN 32u
#define BK 32u
#define THREADS 256u
#define RM 4u /* BM / 16 */
#define RN 2u /* BN / 16 */
layout(local_size_x = 256) in;
#include "dequant.glsl"
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint K;         /* row length */
  uint N;         /* rows (output width) */
  uint nt;        /* tokens */
  uint row_bytes; /* bytes of one weight row */
} pc;

/* k-major, so that the compute loop reads consecutive rows (tokens) in consecutive
 * invocations; the +1 keeps the staging writes of one row's values off a single bank */
shared float w_tile[BK][BM + 1u];
shared float x_tile[BK][BN + 1u];

void main()
{
  uint tid = gl_LocalInvocationID.x;
  uint r0 = gl_WorkGroupID.x * BM, t0 = gl_WorkGroupID.y * BN;
  uint tr = tid % 16u, tc = tid / 16u; /* rows tr + 16i, tokens tc + 16j */
  float acc[RM][RN];
  for (uint i = 0u; i < RM; i++)
    for (uint j = 0u; j < RN; j++)
      acc[i][j] = 0.0;
  for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
    /* BM rows × BK/4 groups of four weights: two groups per invocation */
    for (uint p = 0u; p < BM * BK / 4u / THREADS; p++) {
      uint item = tid + p * THREADS, r = item / (BK / 4u), j4 = item % (BK / 4u);
      vec4 v = vec4(0.0);
      if (r0 + r < pc.N && k0 + 4u * j4 < pc.K)
        v = group4((r0 + r) * pc.row_bytes, k0 / 4u + j4, pc.K);
      for (uint e = 0u; e < 4u; e++)
        w_tile[4u * j4 + e][r] = v[e];
    }
    /* BN tokens × BK activations: four per invocation, consecutive along the row */
    for (uint p = 0u; p < BN * BK / THREADS; p++) {
      uint item = tid + p * THREADS, t = item / BK, k = item % BK;
      x_tile[k][t] = t0 + t < pc.nt && k0 + k < pc.K ? x[(t0 + t) * pc.K + k0 + k] : 0.0;
    }
    barrier();
    for (uint k = 0u; k < BK; k++) {
      float a[RM], b[RN];
      for (uint i = 0u; i < RM; i++)
        a[i] = w_tile[k][tr + 16u * i];
      for (uint j = 0u; j < RN; j++)
        b[j] = x_tile[k][tc + 16u * j];
      for (uint i = 0u; i < RM; i++)
        for (uint j = 0u; j < RN; j++)
          acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  for (uint i = 0u; i < RM; i++)
    for (uint j = 0u; j < RN; j++) {
      uint row = r0 + tr + 16u * i, t = t0 + tc + 16u * j;
      if (row < pc.N && t < pc.nt)
        y[t * pc.N + row] = acc[i][j];
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
/* y[t][row] = dot(W[row], x[t]) for decode and other batches of a few tokens: ROWS rows
 * per workgroup, LANES invocations per row walking it four values (one 32-bit word of
 * weights or more) at a time, then one reduction in shared memory, which needs no
 * subgroup operations.  Up to TOKENS tokens share each dequantized group. */
#define ROWS 4u
#define LANES 32u
#define TOKENS 4u
layout(local_size_x = 128) in; /* ROWS * LANES */
#include "dequant.glsl"
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint K;         /* row length */
  uint N;         /* rows (output width) */
  uint nt;        /* tokens */
  uint row_bytes; /* bytes of one weight row */
} pc;

shared float partial[TOKENS][ROWS * LANES];

void main()
{
  uint tid = gl_LocalInvocationID.x, lane = tid % LANES;
  uint row = gl_WorkGroupID.x * ROWS + tid / LANES, t0 = gl_WorkGroupID.y * TOKENS;
  uint n_tok = min(TOKENS, pc.nt - t0);
  float acc[TOKENS];
  for (uint t = 0u; t < TOKENS; t++)
    acc[t] = 0.0;
  if (row < pc.N) {
    uint base = row * pc.row_bytes;
    for (uint g = lane; 4u * g < pc.K; g += LANES) {
      vec4 v = group4(base, g, pc.K);
      for (uint t = 0u; t < n_tok; t++) {
        uint xo = (t0 + t) * pc.K + 4u * g;
        if (4u * g + 4u <= pc.K)
          acc[t] += dot(v, vec4(x[xo], x[xo + 1u], x[xo + 2u], x[xo + 3u]));
        else
          for (uint e = 0u; 4u * g + e < pc.K; e++)
            acc[t] += v[e] * x[xo + e];
      }
    }
  }
  for (uint t = 0u; t < TOKENS; t++)
    partial[t][tid] = acc[t];
  barrier();
  for (uint s = LANES / 2u; s > 0u; s >>= 1) {
    if (lane < s)
      for (uint t = 0u; t < TOKENS; t++)
        partial[t][tid] += partial[t][tid + s];
    barrier();
  }
  if (lane == 0u && row < pc.N)
    for (uint t = 0u; t < n_tok; t++)
      y[(t0 + t) * pc.N + row] = partial[t][tid];
}

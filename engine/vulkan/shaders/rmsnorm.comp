#version 450
/* y = x / rms(x) * w for rows of n values (a token's embedding, or one head for the
 * q/k norms); x and y may be the same buffer. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float w[]; };
layout(std430, binding = 2) buffer Output { float y[]; };
layout(push_constant) uniform Params { uint n; float eps; } pc;
shared float partial[64];

void main()
{
  uint row = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, base = row * pc.n;
  float s = 0.0;
  for (uint i = tid; i < pc.n; i += 64u)
    s += x[base + i] * x[base + i];
  partial[tid] = s;
  barrier();
  for (uint k = 32u; k > 0u; k >>= 1) {
    if (tid < k)
      partial[tid] += partial[tid + k];
    barrier();
  }
  float scale = inversesqrt(partial[0] / float(pc.n) + pc.eps);
  for (uint i = tid; i < pc.n; i += 64u)
    y[base + i] = x[base + i] * scale * w[i];
}

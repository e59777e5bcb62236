#version 450
/* Element-wise steps: residual adds, bias adds (b repeats every `width` values) and the
 * gated activations of the feed-forward. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(push_constant) uniform Params { uint op, n, width; } pc;

#define OP_ADD 0u
#define OP_SILU_GATE 1u
#define OP_GELU_GATE 2u
#define OP_ADD_BIAS 3u

void main()
{
  for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * 64u) {
    float x = a[i];
    if (pc.op == OP_ADD)
      a[i] = x + b[i];
    else if (pc.op == OP_SILU_GATE)
      a[i] = x / (1.0 + exp(-x)) * b[i];
    else if (pc.op == OP_GELU_GATE)
      a[i] = 0.5 * x * (1.0 + tanh(0.79788456080286535588 * x * (1.0 + 0.044715 * x * x))) * b[i];
    else
      a[i] = x + b[i % pc.width];
  }
}

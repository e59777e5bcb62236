#version 450
/* Rotates the first n_rot dimensions of every head in place; the host computes each
 * token's cos and sin (in double, as the CPU engine does) so both paths agree. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Data { float x[]; };
layout(std430, binding = 1) readonly buffer Angles { vec2 cs[]; }; /* [token][half] */
layout(push_constant) uniform Params {
  uint n_head, head_dim, n_rot, neox, row_stride, nt;
} pc;

void main()
{
  uint half_rot = pc.n_rot / 2u;
  for (uint id = gl_GlobalInvocationID.x; id < pc.nt * pc.n_head * half_rot; id += gl_NumWorkGroups.x * 64u) {
    uint i = id % half_rot, h = (id / half_rot) % pc.n_head, t = id / (half_rot * pc.n_head);
    vec2 c = cs[t * half_rot + i];
    uint base = t * pc.row_stride + h * pc.head_dim;
    uint a = pc.neox != 0u ? i : 2u * i, b = pc.neox != 0u ? i + half_rot : 2u * i + 1u;
    float x0 = x[base + a], x1 = x[base + b];
    x[base + a] = x0 * c.x - x1 * c.y;
    x[base + b] = x0 * c.y + x1 * c.x;
  }
}

#version 450
/* Writes the batch's keys and values as half floats into their cells of the cache. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Keys { float k[]; };
layout(std430, binding = 1) readonly buffer Values { float v[]; };
layout(std430, binding = 2) buffer KCache { uint kc[]; };
layout(std430, binding = 3) buffer VCache { uint vc[]; };
layout(std430, binding = 4) readonly buffer Tokens { ivec4 tok[]; }; /* cell, pos, seq bit, - */
layout(push_constant) uniform Params { uint kv_dim, nt, layer_base; } pc;

void main()
{
  uint pairs = pc.kv_dim / 2u;
  for (uint id = gl_GlobalInvocationID.x; id < pc.nt * pairs; id += gl_NumWorkGroups.x * 64u) {
    uint t = id / pairs, i = id % pairs, src = t * pc.kv_dim + 2u * i;
    uint dst = pc.layer_base + uint(tok[t].x) * pairs + i;
    kc[dst] = packHalf2x16(vec2(k[src], k[src + 1u]));
    vc[dst] = packHalf2x16(vec2(v[src], v[src + 1u]));
  }
}

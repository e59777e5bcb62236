#version 450
/* One workgroup per (query head, token): walks the visible cells 64 at a time with an
 * online softmax (running maximum and sum), so no row of scores is ever stored whole. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Query { float q[]; };
layout(std430, binding = 1) readonly buffer KCache { uint kc[]; };
layout(std430, binding = 2) readonly buffer VCache { uint vc[]; };
layout(std430, binding = 3) readonly buffer Cells { ivec2 cells[]; }; /* pos (-1 free), sequence mask */
layout(std430, binding = 4) readonly buffer Tokens { ivec4 tok[]; };  /* cell, pos, seq bit, - */
layout(std430, binding = 5) writeonly buffer Output { float o[]; };
layout(push_constant) uniform Params {
  uint head_dim, n_head, group, kv_dim, n_cells, layer_base; /* layer_base in halves */
  float scale;
} pc;

#define NONE -1e30
shared float qh[256];
shared float prob[64];
shared float partial[64];

float half_at(uint base, uint i, bool values)
{
  uint word = values ? vc[(base + i) >> 1] : kc[(base + i) >> 1];
  vec2 pair = unpackHalf2x16(word);
  return ((base + i) & 1u) != 0u ? pair.y : pair.x;
}

void main()
{
  uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x;
  uint hd = pc.head_dim, q_dim = pc.n_head * hd, kvh = h / pc.group;
  /* the query is rounded to half precision, as the CPU engine does */
  for (uint i = tid; i < hd; i += 64u)
    qh[i] = unpackHalf2x16(packHalf2x16(vec2(q[t * q_dim + h * hd + i], 0.0))).x;
  barrier();
  int p = tok[t].y;
  uint bit = uint(tok[t].z);
  float m = NONE, l = 0.0;
  float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
  for (uint c0 = 0u; c0 < pc.n_cells; c0 += 64u) {
    uint c = c0 + tid;
    float s = NONE;
    if (c < pc.n_cells) {
      ivec2 cell = cells[c];
      if (cell.x >= 0 && cell.x <= p && (uint(cell.y) & bit) != 0u) {
        uint kb = (pc.layer_base + c * pc.kv_dim + kvh * hd) >> 1;
        float d = 0.0;
        for (uint i = 0u; i < hd; i += 2u) {
          vec2 kk = unpackHalf2x16(kc[kb + (i >> 1)]);
          d += qh[i] * kk.x + qh[i + 1u] * kk.y;
        }
        s = d * pc.scale;
      }
    }
    partial[tid] = s;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
      if (tid < k)
        partial[tid] = max(partial[tid], partial[tid + k]);
      barrier();
    }
    float chunk_max = partial[0];
    barrier();
    if (chunk_max <= 0.5 * NONE)
      continue; /* nothing visible in this chunk (uniform across the workgroup) */
    float m_new = max(m, chunk_max);
    float alpha = exp(m - m_new);
    float pj = s <= 0.5 * NONE ? 0.0 : exp(s - m_new);
    prob[tid] = pj;
    partial[tid] = pj;
    barrier();
    for (uint k = 32u; k > 0u; k >>= 1) {
      if (tid < k)
        partial[tid] += partial[tid + k];
      barrier();
    }
    l = l * alpha + partial[0];
    uint n_here = min(64u, pc.n_cells - c0);
    for (uint r = 0u; r < 4u; r++) {
      uint d = tid + 64u * r;
      if (d >= hd)
        break;
      float a = acc[r] * alpha;
      for (uint j = 0u; j < n_here; j++)
        if (prob[j] != 0.0)
          a += prob[j] * half_at(pc.layer_base + (c0 + j) * pc.kv_dim + kvh * hd, d, true);
      acc[r] = a;
    }
    m = m_new;
    barrier();
  }
  for (uint r = 0u; r < 4u; r++) {
    uint d = tid + 64u * r;
    if (d < hd)
      o[t * q_dim + h * hd + d] = l > 0.0 ? acc[r] / l : 0.0;
  }
}

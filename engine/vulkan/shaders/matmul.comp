#version 450
/* y[t][row] = dot(W[row], x[t]) for a tile of up to TILE tokens per workgroup: one shader
 * for decode (one token) and prompts (many), the weight row dequantized once per tile.
 * Compiled once per weight type (-DTYPE_...); weights are read as bytes from a uint
 * array so that every block layout can be addressed without 8/16-bit storage features. */
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
layout(push_constant) uniform Params {
  uint K;         /* row length */
  uint N;         /* rows (output width) */
  uint nt;        /* tokens */
  uint row_bytes; /* bytes of one weight row */
} pc;

#define TILE 8
shared float partial[64 * TILE];

uint rd8(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
uint rd16(uint b) { return (w[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu; }
float rdf16(uint b) { return unpackHalf2x16(rd16(b)).x; }
int rds8(uint b) { return int(rd8(b) << 24) >> 24; }

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#define ELEMENTWISE 1
float weight(uint base, uint i)
{
#if defined(TYPE_F32)
  return uintBitsToFloat(w[(base >> 2) + i]);
#elif defined(TYPE_F16)
  return rdf16(base + 2u * i);
#else
  return uintBitsToFloat(rd16(base + 2u * i) << 16);
#endif
}
#else
/* the 32 values of unit u (a block of 32, or a sub-block of a 256-value super-block) */
void dequant32(uint base, uint u, out float v[32])
{
#if defined(TYPE_Q4_0)
  uint blk = base + u * 18u;
  float d = rdf16(blk);
  for (uint j = 0u; j < 16u; j++) {
    uint q = rd8(blk + 2u + j);
    v[j] = (float(q & 15u) - 8.0) * d;
    v[j + 16u] = (float(q >> 4) - 8.0) * d;
  }
#elif defined(TYPE_Q8_0)
  uint blk = base + u * 34u;
  float d = rdf16(blk);
  for (uint j = 0u; j < 32u; j++)
    v[j] = float(rds8(blk + 2u + j)) * d;
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
  const uint block_bytes = 144u, qs_at = 16u;
#else
  const uint block_bytes = 176u, qs_at = 48u;
#endif
  uint j = u & 7u, blk = base + (u >> 3) * block_bytes;
  float d = rdf16(blk), dmin = rdf16(blk + 2u);
  uint sc_at = blk + 4u, sc, m;
  if (j < 4u) {
    sc = rd8(sc_at + j) & 63u;
    m = rd8(sc_at + j + 4u) & 63u;
  } else {
    sc = (rd8(sc_at + j + 4u) & 15u) | ((rd8(sc_at + j - 4u) >> 6) << 4);
    m = (rd8(sc_at + j + 4u) >> 4) | ((rd8(sc_at + j) >> 6) << 4);
  }
  float d1 = d * float(sc), m1 = dmin * float(m);
  uint qs = blk + qs_at + 32u * (j >> 1), shift = (j & 1u) * 4u;
  for (uint l = 0u; l < 32u; l++) {
    float q = float((rd8(qs + l) >> shift) & 15u);
#if defined(TYPE_Q5_K)
    q += float((rd8(blk + 16u + l) >> j) & 1u) * 16.0;
#endif
    v[l] = d1 * q - m1;
  }
#elif defined(TYPE_Q6_K)
  uint j = u & 7u, blk = base + (u >> 3) * 210u;
  uint h = j >> 2, k = j & 3u;
  float d = rdf16(blk + 208u);
  uint ql = blk + 64u * h + (k & 1u) * 32u, qh = blk + 128u + 32u * h, shift = (k >> 1) * 4u;
  for (uint l = 0u; l < 32u; l++) {
    uint q = ((rd8(ql + l) >> shift) & 15u) | (((rd8(qh + l) >> (2u * k)) & 3u) << 4);
    float s = float(rds8(blk + 192u + 8u * h + (l >> 4) + 2u * k));
    v[l] = d * s * float(int(q) - 32);
  }
#else
#error "no weight type"
#endif
}
#endif

void main()
{
  uint row = gl_WorkGroupID.x, t0 = gl_WorkGroupID.y * TILE, tid = gl_LocalInvocationID.x;
  uint n_tile = min(uint(TILE), pc.nt - t0);
  float acc[TILE];
  for (uint t = 0u; t < TILE; t++)
    acc[t] = 0.0;
  uint base = row * pc.row_bytes;
#ifdef ELEMENTWISE
  for (uint i = tid; i < pc.K; i += 64u) {
    float wv = weight(base, i);
    for (uint t = 0u; t < n_tile; t++)
      acc[t] += wv * x[(t0 + t) * pc.K + i];
  }
#else
  float v[32];
  for (uint u = tid; u < pc.K / 32u; u += 64u) {
    dequant32(base, u, v);
    for (uint t = 0u; t < n_tile; t++) {
      uint xo = (t0 + t) * pc.K + u * 32u;
      float s = 0.0;
      for (uint j = 0u; j < 32u; j++)
        s += v[j] * x[xo + j];
      acc[t] += s;
    }
  }
#endif
  for (uint t = 0u; t < TILE; t++)
    partial[t * 64u + tid] = acc[t];
  barrier();
  for (uint s = 32u; s > 0u; s >>= 1) {
    if (tid < s)
      for (uint t = 0u; t < TILE; t++)
        partial[t * 64u + tid] += partial[t * 64u + tid + s];
    barrier();
  }
  if (tid < n_tile)
    y[(t0 + tid) * pc.N + row] = partial[tid * 64u];
}

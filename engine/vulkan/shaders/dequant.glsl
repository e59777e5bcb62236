/* dequant.glsl — the weights of one matrix and their dequantization four values at a time,
 * shared by matvec.comp and matmul.comp (compiled once per weight type, -DTYPE_...).
 *
 * Weights are read as 32-bit words (two words where a block starts off a word boundary,
 * as Q4_0's 18-byte and Q6_K's 210-byte blocks do), never byte by byte, and without the
 * 8/16-bit storage features that not every driver has.  "Group" g of a row holds values
 * 4g..4g+3: four values never straddle a quantization block or one of its scales. */
layout(std430, binding = 0) readonly buffer Weights { uint w[]; };

/* four bytes from byte offset b, which need not be a multiple of 4 */
uint rd32(uint b)
{
  uint shift = (b & 3u) * 8u, lo = w[b >> 2];
  return shift == 0u ? lo : (lo >> shift) | (w[(b >> 2) + 1u] << (32u - shift));
}
uint rd8(uint b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 0xffu; }
float rdf16(uint b) { return unpackHalf2x16((w[b >> 2] >> ((b & 2u) * 8u)) & 0xffffu).x; }
/* byte e of word q as an unsigned or signed number */
uint byte_of(uint q, uint e) { return (q >> (8u * e)) & 0xffu; }
int sbyte_of(uint q, uint e) { return int(q << (24u - 8u * e)) >> 24; }

#if defined(TYPE_F32) || defined(TYPE_F16) || defined(TYPE_BF16)
#define ELEMENTWISE 1
float weight1(uint base, uint i)
{
#if defined(TYPE_F32)
  return uintBitsToFloat(w[(base >> 2) + i]);
#elif defined(TYPE_F16)
  return rdf16(base + 2u * i);
#else
  return uintBitsToFloat(((w[(base + 2u * i) >> 2] >> (((base + 2u * i) & 2u) * 8u)) & 0xffffu) << 16);
#endif
}
#endif

/* Values 4g..4g+3 of the row at byte offset base, zero past the row's K values (only the
 * unquantized types can have rows that are not a multiple of 32 long). */
vec4 group4(uint base, uint g, uint K)
{
#if defined(ELEMENTWISE)
  if (4u * g + 4u > K) {
    vec4 v = vec4(0.0);
    for (uint e = 0u; e < 4u; e++)
      if (4u * g + e < K)
        v[e] = weight1(base, 4u * g + e);
    return v;
  }
#if defined(TYPE_F32)
  uint o = (base >> 2) + 4u * g;
  return vec4(uintBitsToFloat(w[o]), uintBitsToFloat(w[o + 1u]), uintBitsToFloat(w[o + 2u]),
              uintBitsToFloat(w[o + 3u]));
#elif defined(TYPE_F16)
  uint b = base + 8u * g;
  return vec4(unpackHalf2x16(rd32(b)), unpackHalf2x16(rd32(b + 4u)));
#else
  uint b = base + 8u * g, lo = rd32(b), hi = rd32(b + 4u);
  return vec4(uintBitsToFloat(lo << 16), uintBitsToFloat(lo & 0xffff0000u), uintBitsToFloat(hi << 16),
              uintBitsToFloat(hi & 0xffff0000u));
#endif
#elif defined(TYPE_Q4_0)
  /* 18-byte blocks of 32: a half scale, then 16 bytes whose low nibbles are values 0..15
   * and high nibbles 16..31 */
  uint blk = base + (g >> 3) * 18u, j4 = g & 7u;
  float d = rdf16(blk);
  uint q = rd32(blk + 2u + 4u * (j4 & 3u)), shift = (j4 >> 2) * 4u;
  vec4 v;
  for (uint e = 0u; e < 4u; e++)
    v[e] = (float((byte_of(q, e) >> shift) & 15u) - 8.0) * d;
  return v;
#elif defined(TYPE_Q8_0)
  uint blk = base + (g >> 3) * 34u;
  float d = rdf16(blk);
  uint q = rd32(blk + 2u + 4u * (g & 7u));
  return vec4(float(sbyte_of(q, 0u)), float(sbyte_of(q, 1u)), float(sbyte_of(q, 2u)), float(sbyte_of(q, 3u))) * d;
#elif defined(TYPE_Q4_K) || defined(TYPE_Q5_K)
#if defined(TYPE_Q4_K)
  const uint block_bytes = 144u, qs_at = 16u;
#else
  const uint block_bytes = 176u, qs_at = 48u;
#endif
  /* super-blocks of 256 in 8 sub-blocks of 32, each with a 6-bit scale and minimum */
  uint u = g >> 3, j = u & 7u, l0 = 4u * (g & 7u), blk = base + (u >> 3) * block_bytes;
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
  uint q = rd32(blk + qs_at + 32u * (j >> 1) + l0), shift = (j & 1u) * 4u;
#if defined(TYPE_Q5_K)
  uint qh = rd32(blk + 16u + l0);
#endif
  vec4 v;
  for (uint e = 0u; e < 4u; e++) {
    float x = float((byte_of(q, e) >> shift) & 15u);
#if defined(TYPE_Q5_K)
    x += float((byte_of(qh, e) >> j) & 1u) * 16.0;
#endif
    v[e] = d1 * x - m1;
  }
  return v;
#elif defined(TYPE_Q6_K)
  /* 210-byte super-blocks: low 4 bits, high 2 bits, 16 signed scales, a half scale */
  uint u = g >> 3, j = u & 7u, l0 = 4u * (g & 7u), blk = base + (u >> 3) * 210u;
  uint h = j >> 2, k = j & 3u;
  float d = rdf16(blk + 208u);
  uint ql = rd32(blk + 64u * h + (k & 1u) * 32u + l0), qh = rd32(blk + 128u + 32u * h + l0);
  uint shift = (k >> 1) * 4u;
  float s = d * float(int(rd8(blk + 192u + 8u * h + (l0 >> 4) + 2u * k) << 24) >> 24);
  vec4 v;
  for (uint e = 0u; e < 4u; e++) {
    uint q = ((byte_of(ql, e) >> shift) & 15u) | (((byte_of(qh, e) >> (2u * k)) & 3u) << 4);
    v[e] = s * float(int(q) - 32);
  }
  return v;
#else
#error "no weight type"
#endif
}

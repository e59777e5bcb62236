/* hn-type-traits.c — names and block geometry of every ggml type id.
 *
 * Unknown and unsupported ids still get a name so that an error can say
 * "tensor 'x' has type IQ2_XXS, which Hanashi does not support".
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-quants.h"

typedef struct {
  const char *name;
  int64_t block_elems; /* 0: layout unknown to this engine */
  size_t block_bytes;
  bool weight_type;
} TypeTraits;

static const TypeTraits type_traits[HN_TYPE_COUNT] = {
  [HN_TYPE_F32] = { "F32", 1, 4, true },
  [HN_TYPE_F16] = { "F16", 1, 2, true },
  [HN_TYPE_Q4_0] = { "Q4_0", 32, 2 + 16, true },
  [HN_TYPE_Q4_1] = { "Q4_1", 32, 2 + 2 + 16, true },
  [4] = { "Q4_2 (removed)", 0, 0, false },
  [5] = { "Q4_3 (removed)", 0, 0, false },
  [HN_TYPE_Q5_0] = { "Q5_0", 32, 2 + 4 + 16, true },
  [HN_TYPE_Q5_1] = { "Q5_1", 32, 2 + 2 + 4 + 16, true },
  [HN_TYPE_Q8_0] = { "Q8_0", 32, 2 + 32, true },
  [HN_TYPE_Q8_1] = { "Q8_1", 32, 2 + 2 + 32, false },
  [HN_TYPE_Q2_K] = { "Q2_K", HN_QK_K, HN_QK_K / 16 + HN_QK_K / 4 + 2 + 2, true },
  [HN_TYPE_Q3_K] = { "Q3_K", HN_QK_K, HN_QK_K / 8 + HN_QK_K / 4 + 12 + 2, true },
  [HN_TYPE_Q4_K] = { "Q4_K", HN_QK_K, 2 + 2 + 12 + HN_QK_K / 2, true },
  [HN_TYPE_Q5_K] = { "Q5_K", HN_QK_K, 2 + 2 + 12 + HN_QK_K / 8 + HN_QK_K / 2, true },
  [HN_TYPE_Q6_K] = { "Q6_K", HN_QK_K, HN_QK_K / 2 + HN_QK_K / 4 + HN_QK_K / 16 + 2, true },
  [HN_TYPE_Q8_K] = { "Q8_K", HN_QK_K, 4 + HN_QK_K + HN_QK_K / 16 * 2, false },
  [16] = { "IQ2_XXS", 0, 0, false },
  [17] = { "IQ2_XS", 0, 0, false },
  [18] = { "IQ3_XXS", 0, 0, false },
  [19] = { "IQ1_S", 0, 0, false },
  [20] = { "IQ4_NL", 0, 0, false },
  [21] = { "IQ3_S", 0, 0, false },
  [22] = { "IQ2_S", 0, 0, false },
  [23] = { "IQ4_XS", 0, 0, false },
  [24] = { "I8", 0, 0, false },
  [25] = { "I16", 0, 0, false },
  [26] = { "I32", 0, 0, false },
  [27] = { "I64", 0, 0, false },
  [28] = { "F64", 0, 0, false },
  [29] = { "IQ1_M", 0, 0, false },
  [HN_TYPE_BF16] = { "BF16", 1, 2, true },
  [31] = { "Q4_0_4_4 (removed)", 0, 0, false },
  [32] = { "Q4_0_4_8 (removed)", 0, 0, false },
  [33] = { "Q4_0_8_8 (removed)", 0, 0, false },
  [34] = { "TQ1_0", 0, 0, false },
  [35] = { "TQ2_0", 0, 0, false },
  [36] = { "IQ4_NL_4_4 (removed)", 0, 0, false },
  [37] = { "IQ4_NL_4_8 (removed)", 0, 0, false },
  [38] = { "IQ4_NL_8_8 (removed)", 0, 0, false },
  [39] = { "MXFP4", 0, 0, false },
  [HN_TYPE_Q4_0_GROUPED] = { "Q4_0_GROUPED", 32, 2 + 16, false },
  [HN_TYPE_Q8_0_GROUPED] = { "Q8_0_GROUPED", 32, 2 + 32, false },
  [HN_TYPE_Q5_0_GROUPED] = { "Q5_0_GROUPED", 32, 2 + 4 + 16, false },
  [HN_TYPE_Q4_1_GROUPED] = { "Q4_1_GROUPED", 32, 2 + 2 + 16, false },
  [HN_TYPE_Q5_1_GROUPED] = { "Q5_1_GROUPED", 32, 2 + 2 + 4 + 16, false },
  [HN_TYPE_Q4_K_GROUPED] = { "Q4_K_GROUPED", HN_QK_K, 2 + 2 + 12 + HN_QK_K / 2, false },
};

const char *
hn_type_name(uint32_t type)
{
  if (type < HN_TYPE_COUNT && type_traits[type].name != NULL)
    return type_traits[type].name;
  return "unknown";
}

bool
hn_type_is_known(uint32_t type)
{
  return type < HN_TYPE_COUNT && type_traits[type].block_elems > 0;
}

bool
hn_type_is_weight_type(uint32_t type)
{
  return type < HN_TYPE_COUNT && type_traits[type].weight_type;
}

int64_t
hn_type_block_elems(uint32_t type)
{
  return hn_type_is_known(type) ? type_traits[type].block_elems : 0;
}

size_t
hn_type_block_bytes(uint32_t type)
{
  return hn_type_is_known(type) ? type_traits[type].block_bytes : 0;
}

size_t
hn_type_row_bytes(uint32_t type, int64_t n)
{
  if (!hn_type_is_known(type) || n < 0)
    return 0;
  int64_t block = type_traits[type].block_elems;
  if (n % block != 0)
    return 0;
  size_t bytes;
  if (!hn_mul_size((size_t)(n / block), type_traits[type].block_bytes, &bytes))
    return 0;
  return bytes;
}

/* hn-params.c — the sampler parameter table and everything derived from it in the engine:
 * defaults, validation, clamping and access by key.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "hn-params.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* Marks a string for the app's translation template; the engine never translates. */
#define N_(text) (text)

#define FIELD(name) offsetof(HnSamplerParams, name)

static const char *const mirostat_choices[] = { N_("Off"), N_("Mirostat"), N_("Mirostat 2.0"), NULL };

/* clang-format off */
static const HnParamDesc table[] = {
  { .key = "temperature", .option = "--temp", .label = N_("Temperature"),
    .hint = N_("0 always picks the most likely token"), .help = "temperature, 0 = greedy",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_TEMPERATURE, .offset = FIELD(temperature),
    .def = 0.8, .min = 0, .max = 10, .ui_min = 0, .ui_max = 5, .step = 0.05, .digits = 2,
    .has_off = true, .off = 0 },
  { .key = "top_k", .option = "--top-k", .label = N_("Top-K"), .hint = N_("0 turns it off"),
    .help = "keep the K most likely tokens, 0 = off",
    .type = HN_PARAM_INT, .group = HN_PARAM_GROUP_TRUNCATION, .offset = FIELD(top_k),
    .def = 40, .min = 0, .max = 1 << 24, .ui_min = 0, .ui_max = 1000, .step = 1, .digits = 0,
    .has_off = true, .off = 0 },
  { .key = "top_p", .option = "--top-p", .label = N_("Top-P"), .hint = N_("1.0 turns it off"),
    .help = "nucleus: smallest set with this mass, 1 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_TRUNCATION, .offset = FIELD(top_p),
    .def = 0.95, .min = 0, .max = 1, .ui_min = 0, .ui_max = 1, .step = 0.01, .digits = 2,
    .has_off = true, .off = 1 },
  { .key = "min_p", .option = "--min-p", .label = N_("Min-P"), .hint = N_("0 turns it off"),
    .help = "drop tokens below P x the best one, 0 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_TRUNCATION, .offset = FIELD(min_p),
    .def = 0.05, .min = 0, .max = 1, .ui_min = 0, .ui_max = 1, .step = 0.01, .digits = 2,
    .has_off = true, .off = 0 },
  { .key = "typical_p", .option = "--typical", .label = N_("Typical-P"), .hint = N_("1.0 turns it off"),
    .help = "locally typical sampling mass, 1 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_TRUNCATION, .offset = FIELD(typical_p),
    .def = 1.0, .min = 0, .max = 1, .ui_min = 0, .ui_max = 1, .step = 0.01, .digits = 2,
    .has_off = true, .off = 1 },
  { .key = "repeat_penalty", .option = "--repeat-penalty", .label = N_("Repeat Penalty"),
    .hint = N_("1.0 turns it off"), .help = "penalty on repeated tokens, 1 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_PENALTIES, .offset = FIELD(repeat_penalty),
    .def = 1.0, .min = 0.01, .max = 10, .ui_min = 0.5, .ui_max = 3, .step = 0.01, .digits = 2,
    .has_off = true, .off = 1 },
  { .key = "repeat_last_n", .option = "--repeat-last-n", .label = N_("Repeat Window"),
    .hint = N_("Tokens looked back at; −1 is the whole context"),
    .help = "penalty window in tokens, -1 = whole context, 0 = penalties off",
    .type = HN_PARAM_INT, .group = HN_PARAM_GROUP_PENALTIES, .offset = FIELD(repeat_last_n),
    .def = 64, .min = -1, .max = 1 << 20, .ui_min = -1, .ui_max = 8192, .step = 1, .digits = 0,
    .has_off = true, .off = 0 },
  { .key = "frequency_penalty", .option = "--frequency-penalty", .label = N_("Frequency Penalty"),
    .help = "subtract count x F, 0 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_PENALTIES, .offset = FIELD(frequency_penalty),
    .def = 0, .min = -2, .max = 2, .ui_min = -2, .ui_max = 2, .step = 0.05, .digits = 2,
    .has_off = true, .off = 0 },
  { .key = "presence_penalty", .option = "--presence-penalty", .label = N_("Presence Penalty"),
    .help = "subtract P once a token appeared, 0 = off",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_PENALTIES, .offset = FIELD(presence_penalty),
    .def = 0, .min = -2, .max = 2, .ui_min = -2, .ui_max = 2, .step = 0.05, .digits = 2,
    .has_off = true, .off = 0 },
  { .key = "penalize_nl", .option = "--penalize-nl", .label = N_("Penalize Newlines"),
    .hint = N_("Apply the penalties to line breaks too"),
    .help = "apply the penalties to newline tokens too",
    .type = HN_PARAM_BOOL, .group = HN_PARAM_GROUP_PENALTIES, .offset = FIELD(penalize_nl),
    .def = 0, .min = 0, .max = 1, .ui_min = 0, .ui_max = 1, .step = 1, .digits = 0,
    .has_off = true, .off = 0 },
  { .key = "mirostat", .option = "--mirostat", .label = N_("Mirostat"),
    .hint = N_("Replaces top-k, top-p, min-p and typical-p"),
    .help = "mirostat version 1 or 2, 0 = off",
    .type = HN_PARAM_INT, .group = HN_PARAM_GROUP_MIROSTAT, .offset = FIELD(mirostat),
    .def = 0, .min = 0, .max = 2, .ui_min = 0, .ui_max = 2, .step = 1, .digits = 0,
    .has_off = true, .off = 0, .choices = mirostat_choices },
  { .key = "mirostat_tau", .option = "--mirostat-tau", .label = N_("Mirostat τ"),
    .hint = N_("Target surprise"), .help = "mirostat target surprise in bits",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_MIROSTAT, .offset = FIELD(mirostat_tau),
    .def = 5.0, .min = 0, .max = 20, .ui_min = 0, .ui_max = 20, .step = 0.1, .digits = 1 },
  { .key = "mirostat_eta", .option = "--mirostat-eta", .label = N_("Mirostat η"),
    .hint = N_("Learning rate"), .help = "mirostat learning rate",
    .type = HN_PARAM_FLOAT, .group = HN_PARAM_GROUP_MIROSTAT, .offset = FIELD(mirostat_eta),
    .def = 0.1, .min = 0, .max = 1, .ui_min = 0, .ui_max = 1, .step = 0.01, .digits = 2 },
  /* The app offers 32-bit seeds: they fit a spin button and a JSON number exactly. */
  { .key = "seed", .option = "--seed", .label = N_("Seed"), .help = "random seed, -1 = random",
    .type = HN_PARAM_SEED, .group = HN_PARAM_GROUP_OUTPUT, .offset = FIELD(seed),
    .def = -1, .min = -1, .max = 18446744073709551614.0, .ui_min = -1, .ui_max = 4294967295.0,
    .step = 1, .digits = 0, .has_off = true, .off = -1 },
  /* No option here: hanashi-cli generate's own required -n/--n-predict sets it (it also
   * sizes generate's output buffer). */
  { .key = "max_new_tokens", .option = NULL, .label = N_("Maximum New Tokens"),
    .hint = N_("−1 writes until the context is full"),
    .help = "tokens to generate, -1 = until the context is full",
    .type = HN_PARAM_INT, .group = HN_PARAM_GROUP_OUTPUT, .offset = FIELD(max_new_tokens),
    .def = -1, .min = -1, .max = 1 << 24, .ui_min = -1, .ui_max = 131072, .step = 1, .digits = 0,
    .has_off = true, .off = -1 },
};
/* clang-format on */

const HnParamDesc *
hn_params_table(size_t *n_out)
{
  *n_out = HN_ARRAY_LEN(table);
  return table;
}

const HnParamDesc *
hn_params_find(const char *key)
{
  for (size_t i = 0; key && i < HN_ARRAY_LEN(table); i++)
    if (strcmp(table[i].key, key) == 0)
      return &table[i];
  return NULL;
}

const HnParamDesc *
hn_params_find_option(const char *option)
{
  for (size_t i = 0; option && i < HN_ARRAY_LEN(table); i++)
    if (table[i].option && strcmp(table[i].option, option) == 0)
      return &table[i];
  return NULL;
}

double
hn_param_get(const HnParamDesc *d, const HnSamplerParams *p)
{
  const char *field = (const char *) p + d->offset;
  switch (d->type) {
  case HN_PARAM_FLOAT: return (double) *(const float *) field;
  case HN_PARAM_INT: return (double) *(const int32_t *) field;
  case HN_PARAM_BOOL: return *(const bool *) field ? 1.0 : 0.0;
  case HN_PARAM_SEED: {
    uint64_t seed = *(const uint64_t *) field;
    return seed == HN_SAMPLER_SEED_RANDOM ? -1.0 : (double) seed;
  }
  }
  return 0;
}

void
hn_param_set(const HnParamDesc *d, HnSamplerParams *p, double v)
{
  char *field = (char *) p + d->offset;
  switch (d->type) {
  /* Wild values saturate instead of wrapping around (or being undefined, for a float
   * beyond FLT_MAX); validation then names them. */
  case HN_PARAM_FLOAT:
    *(float *) field = v > FLT_MAX ? INFINITY : v < -FLT_MAX ? -INFINITY : (float) v;
    break;
  case HN_PARAM_INT:
    *(int32_t *) field = isnan(v) ? (int32_t) d->def
                         : v >= 2147483647.0 ? INT32_MAX
                         : v <= -2147483648.0 ? INT32_MIN : (int32_t) lround(v);
    break;
  case HN_PARAM_BOOL: *(bool *) field = v != 0; break;
  case HN_PARAM_SEED:
    /* 2^64 - 1 is the random marker; the largest double below 2^64 is a valid seed */
    *(uint64_t *) field = v < 0 || isnan(v) ? HN_SAMPLER_SEED_RANDOM
                          : v >= 18446744073709551615.0 ? HN_SAMPLER_SEED_RANDOM - 1
                                                        : (uint64_t) floor(v + 0.5);
    break;
  }
}

bool
hn_param_check(const HnParamDesc *d, double v, HnError *err)
{
  bool whole = d->type != HN_PARAM_FLOAT;
  double lo = d->min, hi = d->max;
  if (!whole) {
    /* compared as the float the field holds: 0.01 stored is 0.0099999998 */
    v = (float) v;
    lo = (float) lo;
    hi = (float) hi;
  }
  if (!(v >= lo && v <= hi) || (whole && v != floor(v)))
    return hn_error_set(err, HN_ERR_INVALID_ARG, "%s must be %s between %.10g and %.10g", d->key,
                        whole ? "an integer" : "a number", d->min, d->max);
  return true;
}

double
hn_param_clamp_to(const HnParamDesc *d, double v, double lo, double hi)
{
  if (isnan(v))
    v = d->def;
  v = v < lo ? lo : v > hi ? hi : v;
  if (d->type == HN_PARAM_SEED)
    return v < 0 ? -1 : floor(v);
  return d->type == HN_PARAM_FLOAT ? v : (double) llround(v);
}

/* ---- HnSamplerParams (declared in hn-sampler.h) ------------------------------------ */

void
hn_sampler_params_init(HnSamplerParams *p)
{
  memset(p, 0, sizeof *p);
  for (size_t i = 0; i < HN_ARRAY_LEN(table); i++)
    hn_param_set(&table[i], p, table[i].def);
}

bool
hn_sampler_params_validate(const HnSamplerParams *p, int32_t n_vocab, HnError *err)
{
  if (p == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "no sampler parameters");
  for (size_t i = 0; i < HN_ARRAY_LEN(table); i++)
    if (table[i].type != HN_PARAM_SEED && table[i].type != HN_PARAM_BOOL &&
        !hn_param_check(&table[i], hn_param_get(&table[i], p), err))
      return false;
  if (p->n_logit_bias > HN_SAMPLER_MAX_LOGIT_BIAS)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "at most %d logit biases",
                        HN_SAMPLER_MAX_LOGIT_BIAS);
  if (p->n_logit_bias > 0 && p->logit_bias == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "logit_bias is NULL");
  for (size_t i = 0; i < p->n_logit_bias; i++) {
    const HnLogitBias *b = &p->logit_bias[i];
    if (b->token < 0 || (n_vocab > 0 && b->token >= n_vocab))
      return hn_error_set(err, HN_ERR_INVALID_ARG, "logit bias token %d is not in the vocabulary",
                          b->token);
    if (!(b->bias >= -100.0f && b->bias <= 100.0f) && !(isinf(b->bias) && b->bias < 0))
      return hn_error_set(err, HN_ERR_INVALID_ARG,
                          "logit bias for token %d must be between -100 and 100 (or -inf)",
                          b->token);
  }
  if (p->n_stop > HN_SAMPLER_MAX_STOP)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "at most %d stop strings", HN_SAMPLER_MAX_STOP);
  if (p->n_stop > 0 && p->stop == NULL)
    return hn_error_set(err, HN_ERR_INVALID_ARG, "stop is NULL");
  for (size_t i = 0; i < p->n_stop; i++) {
    size_t len = p->stop[i] ? strlen(p->stop[i]) : 0;
    if (len == 0 || len > HN_SAMPLER_MAX_STOP_LEN)
      return hn_error_set(err, HN_ERR_INVALID_ARG, "stop string %zu must be 1 to %d bytes", i + 1,
                          HN_SAMPLER_MAX_STOP_LEN);
  }
  return true;
}

void
hn_sampler_params_clamp(HnSamplerParams *p, int32_t n_vocab)
{
  (void) n_vocab;
  for (size_t i = 0; i < HN_ARRAY_LEN(table); i++)
    if (table[i].type != HN_PARAM_SEED && table[i].type != HN_PARAM_BOOL)
      hn_param_set(&table[i], p,
                   hn_param_clamp_to(&table[i], hn_param_get(&table[i], p), table[i].min, table[i].max));
}

bool
hn_sampler_params_set(HnSamplerParams *p, const char *key, double value, HnError *err)
{
  const HnParamDesc *d = hn_params_find(key);
  if (d == NULL)
    return hn_error_set(err, HN_ERR_NOT_FOUND, "unknown sampler parameter '%s'", key ? key : "");
  if (!hn_param_check(d, value, err))
    return false;
  hn_param_set(d, p, value);
  return true;
}

bool
hn_sampler_params_get(const HnSamplerParams *p, const char *key, double *value)
{
  const HnParamDesc *d = hn_params_find(key);
  if (d == NULL)
    return false;
  *value = hn_param_get(d, p);
  return true;
}

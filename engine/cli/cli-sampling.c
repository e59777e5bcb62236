/* cli-sampling.c — parses the sampling options of `hanashi-cli generate`.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-sampling.h"
#include "hn-array.h"

#include "hn-cfg.h"
#include "hn-json-schema.h"
#include "hn-params.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The CLI's own defaults, where they differ from the engine's table.  generate is greedy
 * unless --temp is given: its output is then reproducible and comparable with reference
 * runs (tests/engine/test-engine-model.c and docs/engine-parity.md rely on it).  --help
 * prints the values after these overrides, so help and behaviour cannot disagree. */
static const struct {
  const char *key;
  double value;
} cli_defaults[] = {
  { "temperature", 0.0 },
};

void
cli_sampling_init(CliSamplingOptions *o)
{
  memset(o, 0, sizeof *o);
  hn_sampler_params_init(&o->params);
  for (size_t i = 0; i < HN_ARRAY_LEN(cli_defaults); i++)
    hn_param_set(hn_params_find(cli_defaults[i].key), &o->params, cli_defaults[i].value);
  o->cfg_scale = 1.0f;
}

void
cli_sampling_clear(CliSamplingOptions *o)
{
  free(o->bias);
  free(o->stops);
  memset(o, 0, sizeof *o);
}

/* The options that are not sampler parameters of the hn-params.h table (those are
 * parsed from the table itself). */
typedef enum { OPT_BIAS, OPT_STOP, OPT_PATH, OPT_TEXT, OPT_CFG_SCALE } OptKind;

typedef struct {
  const char *name;
  OptKind kind;
  size_t offset; /* into CliSamplingOptions */
  const char *help;
} OptSpec;

#define O(field) offsetof(CliSamplingOptions, field)

static const OptSpec options[] = {
  { "--logit-bias", OPT_BIAS, 0, "ID=BIAS, add BIAS to token ID (-inf bans it); repeatable" },
  { "--stop", OPT_STOP, 0, "stop when TEXT is generated; repeatable" },
  { "--grammar-file", OPT_PATH, O(grammar_file), "constrain output to a GBNF grammar" },
  { "--json-schema", OPT_PATH, O(json_schema_file), "constrain output to a JSON Schema" },
  { "--cfg-negative-prompt", OPT_TEXT, O(cfg_negative_prompt), "negative prompt for guidance" },
  { "--cfg-scale", OPT_CFG_SCALE, O(cfg_scale), "guidance strength, 1 = off (1.0)" },
};

void
cli_sampling_format_value(const HnParamDesc *d, const HnSamplerParams *p, char *buf, size_t size)
{
  double v = hn_param_get(d, p);
  if (d->type == HN_PARAM_SEED) {
    uint64_t seed = *(const uint64_t *) ((const char *) p + d->offset);
    if (seed == HN_SAMPLER_SEED_RANDOM)
      snprintf(buf, size, "-1");
    else
      snprintf(buf, size, "%llu", (unsigned long long) seed);
    return;
  }
  if (d->type != HN_PARAM_FLOAT) {
    snprintf(buf, size, "%.0f", v);
    return;
  }
  /* The shortest text that reads back as the same float: 0.95, not 0.949999988. */
  for (int digits = 1; digits <= 9; digits++) {
    snprintf(buf, size, "%.*g", digits, v);
    if ((float) strtod(buf, NULL) == (float) v)
      return;
  }
}

void
cli_sampling_print_help(FILE *out, const CliSamplingOptions *defaults)
{
  size_t n;
  const HnParamDesc *table = hn_params_table(&n);
  for (size_t i = 0; i < n; i++) {
    const HnParamDesc *d = &table[i];
    if (d->option == NULL)
      continue;
    char left[64], def[40];
    snprintf(left, sizeof left, "%s%s", d->option,
             d->type == HN_PARAM_BOOL ? "" : d->type == HN_PARAM_FLOAT ? " X" : " N");
    if (d->type == HN_PARAM_BOOL)
      snprintf(def, sizeof def, "%s", hn_param_get(d, &defaults->params) != 0 ? "on" : "off");
    else
      cli_sampling_format_value(d, &defaults->params, def, sizeof def);
    fprintf(out, "  %-28s %s (default %s)\n", left, d->help, def);
  }
  for (size_t i = 0; i < HN_ARRAY_LEN(options); i++) {
    const char *arg = options[i].kind == OPT_BIAS ? " ID=BIAS" :
                      options[i].kind == OPT_STOP || options[i].kind == OPT_TEXT ? " TEXT" :
                      options[i].kind == OPT_PATH ? " FILE" : " X";
    char left[64];
    snprintf(left, sizeof left, "%s%s", options[i].name, arg);
    fprintf(out, "  %-28s %s\n", left, options[i].help);
  }
}

static bool
parse_bias(CliSamplingOptions *o, const char *text)
{
  const char *eq = strchr(text, '=');
  if (eq == NULL)
    return false;
  char id_text[32];
  size_t id_len = (size_t) (eq - text);
  if (id_len == 0 || id_len >= sizeof id_text)
    return false;
  memcpy(id_text, text, id_len);
  id_text[id_len] = '\0';
  long long id;
  if (!cli_parse_int(id_text, 0, INT32_MAX, &id))
    return false;
  double bias;
  const char *b = eq + 1;
  if (strcmp(b, "-inf") == 0 || strcmp(b, "-infinity") == 0)
    bias = -INFINITY;
  else if (!cli_parse_float(b, &bias) || !(bias >= -100 && bias <= 100))
    return false;
  if (o->n_bias >= HN_SAMPLER_MAX_LOGIT_BIAS)
    return false;
  if (!HN_ARRAY_RESIZE(o->bias, (size_t)o->n_bias + 1))
    return false;
  o->bias[o->n_bias++] = (HnLogitBias){ (int32_t) id, (float) bias };
  return true;
}

/* Matches `--name` or `--name=value`; NULL when argv[*i] is not this option. */
static bool
option_matches(const char *arg, const char *name, const char **inline_value)
{
  size_t nl = strlen(name);
  if (strncmp(arg, name, nl) != 0 || (arg[nl] != '\0' && arg[nl] != '='))
    return false;
  *inline_value = arg[nl] == '=' ? arg + nl + 1 : NULL;
  return true;
}

/* The option's value (after '=' or the next argument); NULL after printing the error. */
static const char *
option_value(const char *name, const char *inline_value, int argc, char **argv, int *i, int *used)
{
  if (inline_value) {
    *used = 1;
    return inline_value;
  }
  if (*i + 1 >= argc) {
    cli_fail("option %s needs a value", name);
    return NULL;
  }
  *used = 2;
  return argv[*i + 1];
}

static int
parse_table_option(CliSamplingOptions *o, const HnParamDesc *d, const char *inline_value, int argc,
                   char **argv, int *i)
{
  if (d->type == HN_PARAM_BOOL) {
    if (inline_value)
      return cli_fail("option %s takes no value", d->option), -1;
    hn_param_set(d, &o->params, 1);
    *i += 1;
    return 1;
  }
  int used;
  const char *value = option_value(d->option, inline_value, argc, argv, i, &used);
  if (value == NULL)
    return -1;
  switch (d->type) {
  case HN_PARAM_FLOAT: {
    double v;
    if (!cli_parse_float(value, &v) || !(v >= d->min && v <= d->max))
      return cli_fail("%s must be a number between %g and %g, not '%s'", d->option, d->min, d->max,
                      value),
             -1;
    hn_param_set(d, &o->params, v);
    break;
  }
  case HN_PARAM_INT: {
    long long v;
    if (!cli_parse_int(value, (long long) d->min, (long long) d->max, &v))
      return cli_fail("%s must be an integer between %.0f and %.0f, not '%s'", d->option, d->min,
                      d->max, value),
             -1;
    hn_param_set(d, &o->params, (double) v);
    break;
  }
  case HN_PARAM_SEED: {
    /* Parsed as an integer, not through a double: every 64-bit seed is exact. */
    uint64_t seed;
    if (strcmp(value, "-1") == 0) {
      seed = HN_SAMPLER_SEED_RANDOM;
    } else {
      char *end = NULL;
      if (value[0] < '0' || value[0] > '9')
        return cli_fail("%s must be -1 or a non-negative integer, not '%s'", d->option, value), -1;
      errno = 0;
      seed = strtoull(value, &end, 10);
      if (*end != '\0' || errno != 0 || seed == HN_SAMPLER_SEED_RANDOM)
        return cli_fail("%s must be -1 or a non-negative integer, not '%s'", d->option, value), -1;
    }
    *(uint64_t *) ((char *) &o->params + d->offset) = seed;
    break;
  }
  case HN_PARAM_BOOL:
    break;
  }
  *i += used;
  return 1;
}

int
cli_sampling_parse_arg(CliSamplingOptions *o, int argc, char **argv, int *i)
{
  const char *arg = argv[*i];
  const char *inline_value;
  size_t n;
  const HnParamDesc *table = hn_params_table(&n);
  for (size_t k = 0; k < n; k++)
    if (table[k].option && option_matches(arg, table[k].option, &inline_value))
      return parse_table_option(o, &table[k], inline_value, argc, argv, i);

  for (size_t k = 0; k < HN_ARRAY_LEN(options); k++) {
    const OptSpec *spec = &options[k];
    if (!option_matches(arg, spec->name, &inline_value))
      continue;
    int used;
    const char *value = option_value(spec->name, inline_value, argc, argv, i, &used);
    if (value == NULL)
      return -1;
    char *base = (char *) o;
    switch (spec->kind) {
    case OPT_CFG_SCALE: {
      double v;
      if (!cli_parse_float(value, &v) || !(v >= HN_CFG_SCALE_MIN && v <= HN_CFG_SCALE_MAX))
        return cli_fail("%s must be a number between %g and %g, not '%s'", spec->name,
                        (double) HN_CFG_SCALE_MIN, (double) HN_CFG_SCALE_MAX, value),
               -1;
      *(float *) (base + spec->offset) = (float) v;
      break;
    }
    case OPT_BIAS:
      if (!parse_bias(o, value))
        return cli_fail("--logit-bias must be ID=BIAS with BIAS between -100 and 100 or -inf, "
                        "not '%s'",
                        value),
               -1;
      break;
    case OPT_STOP: {
      size_t len = strlen(value);
      if (len == 0 || len > HN_SAMPLER_MAX_STOP_LEN)
        return cli_fail("--stop text must be 1 to %d bytes", HN_SAMPLER_MAX_STOP_LEN), -1;
      if (o->n_stops >= HN_SAMPLER_MAX_STOP)
        return cli_fail("at most %d --stop options", HN_SAMPLER_MAX_STOP), -1;
      if (!HN_ARRAY_RESIZE(o->stops, (size_t)o->n_stops + 1))
        return cli_fail("out of memory"), -1;
      o->stops[o->n_stops++] = value;
      break;
    }
    case OPT_PATH:
    case OPT_TEXT:
      if (spec->kind == OPT_PATH && value[0] == '\0')
        return cli_fail("%s needs a file name", spec->name), -1;
      *(const char **) (base + spec->offset) = value;
      break;
    }
    *i += used;
    return 1;
  }
  return 0;
}

void
cli_sampling_print_params(FILE *out, const CliSamplingOptions *o)
{
  size_t n;
  const HnParamDesc *table = hn_params_table(&n);
  fprintf(out, "sampling:");
  for (size_t i = 0; i < n; i++) {
    char value[40];
    cli_sampling_format_value(&table[i], &o->params, value, sizeof value);
    fprintf(out, " %s=%s", table[i].key, value);
  }
  fprintf(out, "\n");
}

bool
cli_sampling_finish(CliSamplingOptions *o, int32_t n_vocab)
{
  o->params.logit_bias = o->bias;
  o->params.n_logit_bias = o->n_bias;
  o->params.stop = o->stops;
  o->params.n_stop = o->n_stops;
  if (o->grammar_file && o->json_schema_file) {
    cli_fail("--grammar-file and --json-schema cannot be combined");
    return false;
  }
  HnError err = { 0 };
  if (!hn_sampler_params_validate(&o->params, n_vocab, &err)) {
    cli_fail_error(&err);
    return false;
  }
  return true;
}

bool
cli_sampling_load_grammar(const CliSamplingOptions *o, HnGrammar **out)
{
  *out = NULL;
  const char *path = o->grammar_file ? o->grammar_file : o->json_schema_file;
  if (path == NULL)
    return true;
  HnError err = { 0 };
  size_t len = 0;
  char *text = cli_read_file(path, &len, &err);
  if (text == NULL) {
    cli_fail_error(&err);
    return false;
  }
  if (o->json_schema_file) {
    char *gbnf = hn_json_schema_to_gbnf(text, len, &err);
    free(text);
    if (gbnf == NULL) {
      hn_error_prefix(&err, "%s", path);
      cli_fail_error(&err);
      return false;
    }
    text = gbnf;
    len = strlen(gbnf);
  }
  *out = hn_grammar_parse(text, len, NULL, &err);
  free(text);
  if (*out == NULL) {
    hn_error_prefix(&err, "%s", path);
    cli_fail_error(&err);
    return false;
  }
  return true;
}

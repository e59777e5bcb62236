/* cli-sampling.c — parses the sampling options of `hanashi-cli generate`. */
#include "cli-sampling.h"
#include "hn-array.h"

#include "hn-cfg.h"
#include "hn-json-schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void
cli_sampling_init(CliSamplingOptions *o)
{
  memset(o, 0, sizeof *o);
  hn_sampler_params_init(&o->params);
  o->cfg_scale = 1.0f;
}

void
cli_sampling_clear(CliSamplingOptions *o)
{
  free(o->bias);
  free(o->stops);
  memset(o, 0, sizeof *o);
}

typedef enum { OPT_FLOAT, OPT_INT, OPT_SEED, OPT_BIAS, OPT_STOP, OPT_PATH, OPT_TEXT, OPT_FLAG } OptKind;

typedef struct {
  const char *name;
  OptKind kind;
  size_t offset; /* into CliSamplingOptions */
  double min, max;
  const char *help;
} OptSpec;

#define P(field) offsetof(CliSamplingOptions, params.field)
#define O(field) offsetof(CliSamplingOptions, field)

static const OptSpec options[] = {
  { "--temp", OPT_FLOAT, P(temperature), 0, 10, "temperature, 0 = greedy (0.8)" },
  { "--top-k", OPT_INT, P(top_k), 0, 1 << 24, "keep the K most likely tokens, 0 = off (40)" },
  { "--top-p", OPT_FLOAT, P(top_p), 0, 1, "nucleus: smallest set with this mass, 1 = off (0.95)" },
  { "--min-p", OPT_FLOAT, P(min_p), 0, 1, "drop tokens below P x the best one, 0 = off (0.05)" },
  { "--typical", OPT_FLOAT, P(typical_p), 0, 1, "locally typical sampling mass, 1 = off (1.0)" },
  { "--repeat-penalty", OPT_FLOAT, P(repeat_penalty), 0.01, 10, "penalty on repeated tokens, 1 = off (1.0)" },
  { "--repeat-last-n", OPT_INT, P(repeat_last_n), -1, 1 << 20, "penalty window in tokens, -1 = whole context (64)" },
  { "--frequency-penalty", OPT_FLOAT, P(frequency_penalty), -2, 2, "subtract count x F (0)" },
  { "--presence-penalty", OPT_FLOAT, P(presence_penalty), -2, 2, "subtract P once a token appeared (0)" },
  { "--penalize-nl", OPT_FLAG, P(penalize_nl), 0, 1, "apply the penalties to newline tokens too" },
  { "--mirostat", OPT_INT, P(mirostat), 0, 2, "mirostat version 1 or 2, 0 = off (0)" },
  { "--mirostat-tau", OPT_FLOAT, P(mirostat_tau), 0, 20, "mirostat target surprise in bits (5.0)" },
  { "--mirostat-eta", OPT_FLOAT, P(mirostat_eta), 0, 1, "mirostat learning rate (0.1)" },
  { "--seed", OPT_SEED, P(seed), -1, 18446744073709551614.0, "random seed, -1 = random (-1)" },
  { "--logit-bias", OPT_BIAS, 0, -100, 100, "ID=BIAS, add BIAS to token ID (-inf bans it); repeatable" },
  { "--stop", OPT_STOP, 0, 0, 0, "stop when TEXT is generated; repeatable" },
  { "--grammar-file", OPT_PATH, O(grammar_file), 0, 0, "constrain output to a GBNF grammar" },
  { "--json-schema", OPT_PATH, O(json_schema_file), 0, 0, "constrain output to a JSON Schema" },
  { "--cfg-negative-prompt", OPT_TEXT, O(cfg_negative_prompt), 0, 0, "negative prompt for guidance" },
  { "--cfg-scale", OPT_FLOAT, O(cfg_scale), HN_CFG_SCALE_MIN, HN_CFG_SCALE_MAX, "guidance strength, 1 = off (1.0)" },
};

void
cli_sampling_print_help(FILE *out)
{
  for (size_t i = 0; i < HN_ARRAY_LEN(options); i++) {
    const char *arg = options[i].kind == OPT_FLAG ? "" :
                      options[i].kind == OPT_BIAS ? " ID=BIAS" :
                      options[i].kind == OPT_STOP || options[i].kind == OPT_TEXT ? " TEXT" :
                      options[i].kind == OPT_PATH ? " FILE" :
                      options[i].kind == OPT_INT || options[i].kind == OPT_SEED ? " N" : " X";
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

int
cli_sampling_parse_arg(CliSamplingOptions *o, int argc, char **argv, int *i)
{
  const char *arg = argv[*i];
  for (size_t k = 0; k < HN_ARRAY_LEN(options); k++) {
    const OptSpec *spec = &options[k];
    size_t nl = strlen(spec->name);
    if (strncmp(arg, spec->name, nl) != 0 || (arg[nl] != '\0' && arg[nl] != '='))
      continue;
    if (spec->kind == OPT_FLAG) {
      if (arg[nl] == '=')
        return cli_fail("option %s takes no value", spec->name), -1;
      *(bool *) ((char *) o + spec->offset) = true;
      *i += 1;
      return 1;
    }
    const char *value;
    int used;
    if (arg[nl] == '=') {
      value = arg + nl + 1;
      used = 1;
    } else {
      if (*i + 1 >= argc)
        return cli_fail("option %s needs a value", spec->name), -1;
      value = argv[*i + 1];
      used = 2;
    }
    char *base = (char *) o;
    switch (spec->kind) {
    case OPT_FLOAT: {
      double v;
      if (!cli_parse_float(value, &v) || !(v >= spec->min && v <= spec->max))
        return cli_fail("%s must be a number between %g and %g, not '%s'", spec->name, spec->min,
                        spec->max, value),
               -1;
      *(float *) (base + spec->offset) = (float) v;
      break;
    }
    case OPT_INT: {
      long long v;
      if (!cli_parse_int(value, (long long) spec->min, (long long) spec->max, &v))
        return cli_fail("%s must be an integer between %.0f and %.0f, not '%s'", spec->name,
                        spec->min, spec->max, value),
               -1;
      *(int32_t *) (base + spec->offset) = (int32_t) v;
      break;
    }
    case OPT_SEED: {
      uint64_t seed;
      if (strcmp(value, "-1") == 0) {
        seed = HN_SAMPLER_SEED_RANDOM;
      } else {
        char *end = NULL;
        if (value[0] < '0' || value[0] > '9')
          return cli_fail("--seed must be -1 or a non-negative integer, not '%s'", value), -1;
        seed = strtoull(value, &end, 10);
        if (*end != '\0' || seed == HN_SAMPLER_SEED_RANDOM)
          return cli_fail("--seed must be -1 or a non-negative integer, not '%s'", value), -1;
      }
      *(uint64_t *) (base + spec->offset) = seed;
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
    case OPT_FLAG:
      break;
    }
    *i += used;
    return 1;
  }
  return 0;
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

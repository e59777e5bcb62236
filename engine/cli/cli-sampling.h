/* cli-sampling.h — the sampling, grammar and guidance options that `hanashi-cli generate`
 * accepts, parsed into engine parameters.  Kept apart from cli-generate.c so that the
 * option set has one home.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "cli-common.h"
#include "hn-grammar.h"
#include "hn-params.h"
#include "hn-sampler.h"

typedef struct CliSamplingOptions {
  HnSamplerParams params;
  HnLogitBias *bias;
  size_t n_bias;
  const char **stops;
  size_t n_stops;
  const char *grammar_file;
  const char *json_schema_file;
  const char *cfg_negative_prompt;
  float cfg_scale;
} CliSamplingOptions;

/* The engine's defaults (hn-params.h) with the CLI's own documented overrides: generate
 * is greedy (temperature 0) unless --temp is given. */
void cli_sampling_init(CliSamplingOptions *opts);
void cli_sampling_clear(CliSamplingOptions *opts);

/* If argv[*i] is one of the options below, consumes it (and its value, given as the next
 * argument or after '='), advances *i past it and returns 1.  Returns 0 when argv[*i] is
 * not a sampling option, -1 after printing the error line for a bad value. */
int cli_sampling_parse_arg(CliSamplingOptions *opts, int argc, char **argv, int *i);

/* Fills params.logit_bias / stop from the collected lists and validates everything
 * against the vocabulary size.  Returns false after printing the error line. */
bool cli_sampling_finish(CliSamplingOptions *opts, int32_t n_vocab);

/* The grammar from --grammar-file or --json-schema, or NULL (and no error) for neither.
 * Returns false after printing the error line. */
bool cli_sampling_load_grammar(const CliSamplingOptions *opts, HnGrammar **grammar_out);

/* One line per option; the sampler options come from the hn-params.h table and show
 * the defaults in `defaults` (as set by cli_sampling_init). */
void cli_sampling_print_help(FILE *out, const CliSamplingOptions *defaults);
/* A parameter's value as --help and --print-params print it: the shortest text that
 * reads back as the same value (-1 for a random seed, 0/1 for flags). */
void cli_sampling_format_value(const HnParamDesc *desc, const HnSamplerParams *params, char *buf,
                                 size_t size);
/* "sampling: temperature=0.7 top_k=40 …": every table parameter as it goes to the
 * sampler (for --print-params). */
void cli_sampling_print_params(FILE *out, const CliSamplingOptions *opts);

/* hn-params.h — the one description of every sampler parameter.
 *
 * Each row of the table says what a parameter is called (in JSON, settings and the app:
 * `key`; on the command line: `option`), its type, default, range, the value that turns
 * it off, where it lives in HnSamplerParams, and how a person edits it (label, hint,
 * slider range, step, digits).  Everything else is derived from it:
 *
 *   - hn_sampler_params_init / _validate / _clamp / _set / _get (hn-params.c);
 *   - the options of `hanashi-cli generate` and their --help lines (cli-sampling.c);
 *   - the GLib layer, which carries HnSamplerParams itself (hanashi-engine.h);
 *   - the app's view of the rows, in GLib types (engine/glib/hanashi-param-table.h), and
 *     through it the app's JSON keys, stored-value ranges, panel rows and presets
 *     (app/hanashi-params.c, hanashi-params-panel.c, hanashi-presets.c); the GSettings
 *     default is "use the table".
 *
 * Adding a sampler parameter is one row here plus its field and sampler code.
 *
 * Labels and hints are English; they are marked with N_() so that the app's translation
 * template picks them up (po/POTFILES.in lists hn-params.c) and the app shows them through
 * gettext.  The engine itself never translates.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include "hn-sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HN_PARAM_FLOAT, /* float field */
  HN_PARAM_INT,   /* int32_t field */
  HN_PARAM_BOOL,  /* bool field: 0 or 1 */
  HN_PARAM_SEED,  /* uint64_t field; -1 stands for HN_SAMPLER_SEED_RANDOM */
} HnParamType;

/* Where a parameter acts, which also says how a UI groups it. */
typedef enum {
  HN_PARAM_GROUP_TEMPERATURE, /* applies in every mode */
  HN_PARAM_GROUP_TRUNCATION,  /* top-k … min-p: replaced by mirostat when it is on */
  HN_PARAM_GROUP_PENALTIES,
  HN_PARAM_GROUP_MIROSTAT,    /* the mode itself and what only mirostat reads */
  HN_PARAM_GROUP_OUTPUT,      /* seed and length */
} HnParamGroup;

typedef struct {
  const char *key;     /* "top_k": JSON, settings and HnError messages */
  const char *option;  /* "--top-k": hanashi-cli generate's option (a contract) */
  const char *label;   /* "Top-K" (English, N_-marked) */
  const char *hint;    /* one line under the label in the panel, N_-marked; may be NULL */
  const char *help;    /* the CLI's help line, without the default (added from `def`) */
  HnParamType type;
  HnParamGroup group;
  size_t offset;       /* of the field in HnSamplerParams */
  double def;          /* the engine's default */
  double min, max;     /* what hn_sampler_params_validate accepts */
  double ui_min, ui_max; /* what the app offers and stores: a slider over 2^24 is useless */
  double step;
  int digits;
  bool has_off;
  double off;          /* the value that turns the stage off (when has_off) */
  const char *const *choices; /* INT parameters with named values (N_-marked), NULL-ended */
} HnParamDesc;

/* The table, in the order a UI lists the parameters. */
const HnParamDesc *hn_params_table(size_t *n_out);
/* By key ("top_k") or by CLI option ("--top-k"); NULL when there is none. */
const HnParamDesc *hn_params_find(const char *key);
const HnParamDesc *hn_params_find_option(const char *option);

/* The value as a double (seed: -1 for random; seeds above 2^53 lose precision). */
double hn_param_get(const HnParamDesc *desc, const HnSamplerParams *params);
/* Stores `value` as the field's type without checking it (ints are rounded; a negative
 * seed means random). */
void hn_param_set(const HnParamDesc *desc, HnSamplerParams *params, double value);
/* Is `value` allowed by the engine?  The message names the key and the range. */
bool hn_param_check(const HnParamDesc *desc, double value, HnError *err);
/* `value` pulled into [lo, hi] (NaN: the default; ints and bools rounded). */
double hn_param_clamp_to(const HnParamDesc *desc, double value, double lo, double hi);

#ifdef __cplusplus
}
#endif

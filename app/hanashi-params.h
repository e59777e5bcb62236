/* hanashi-params.h: one complete set of generation parameters as plain data, with its JSON
 * form (stored per conversation, in presets and in GSettings) and range clamping.
 *
 * JSON keys are the keys of the engine's parameter table (hanashi-param-table.h: temperature …
 * seed, max_new_tokens) plus "stop", "cfg_negative_prompt", "cfg_scale", "grammar_mode",
 * "grammar_name", "grammar" and "json_schema".  Input is never trusted: a missing or
 * malformed value keeps its default and a numeric one is pulled into the table's app
 * range (ui_min … ui_max).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <gio/gio.h>

#include "hanashi-engine.h"
#include "hanashi-param-table.h"

G_BEGIN_DECLS

typedef enum {
  HANASHI_GRAMMAR_MODE_NONE,
  HANASHI_GRAMMAR_MODE_SHIPPED,
  HANASHI_GRAMMAR_MODE_CUSTOM,
  HANASHI_GRAMMAR_MODE_JSON_SCHEMA,
} HanashiGrammarMode;

#define HANASHI_PARAMS_MAX_STOP HANASHI_SAMPLING_MAX_STOP

typedef struct {
  HnSamplerParams       sampling;          /* every table parameter, max_new_tokens included;
                                            * logit_bias and stop unused (NULL) */
  GStrv                 stop;              /* never NULL */
  char                 *cfg_negative;      /* never NULL */
  double                cfg_scale;         /* 1.0 = off */
  HanashiGrammarMode    grammar_mode;
  char                 *grammar_name;      /* shipped grammar's base name, e.g. "json" */
  char                 *grammar;           /* custom GBNF text, never NULL */
  char                 *json_schema;       /* never NULL */
} HanashiParams;

void      hanashi_params_init_default (HanashiParams *params);
void      hanashi_params_clear        (HanashiParams *params);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (HanashiParams, hanashi_params_clear)
void      hanashi_params_copy         (HanashiParams *dest, const HanashiParams *src);
/* Pulls every number into its range; NaN becomes the default. */
void      hanashi_params_clamp        (HanashiParams *params);

/* Overlays the keys present in `json` onto `params` (then clamps).  FALSE only when the
 * text is not a JSON object; `params` is then unchanged. */
gboolean  hanashi_params_update_from_json (HanashiParams *params, const char *json, GError **error);
char     *hanashi_params_to_json          (const HanashiParams *params);

/* The app defaults: the "default-params" GSettings key over the engine defaults. */
void      hanashi_params_load_defaults    (HanashiParams *params, GSettings *settings);

/* The shipped grammars (base names, sorted) and their text from the resources. */
GStrv     hanashi_params_list_shipped_grammars (void);
char     *hanashi_params_dup_shipped_grammar   (const char *name);

/* The grammar or schema the params select, converted and parsed: the one place the app
 * checks it.  *grammar_out is NULL when there is none (mode "none").  FALSE with
 * "…: line L, column C: …" when it does not parse. */
gboolean  hanashi_params_compile_grammar  (const HanashiParams *params, HanashiGrammar **grammar_out,
                                           GError **error);
/* The same, keeping only the verdict. */
gboolean  hanashi_params_validate_grammar (const HanashiParams *params, GError **error);
/* Compiles the grammar, then copies every value into the request. */
gboolean  hanashi_params_apply_to_request (const HanashiParams *params, HanashiGenerateRequest *req,
                                           GError **error);
/* The same with a grammar compiled already (by hanashi_params_compile_grammar of the same
 * params; NULL = let the engine parse the text): it goes to the engine as it is. */
void      hanashi_params_apply_checked_to_request (const HanashiParams *params, HanashiGrammar *compiled,
                                                   HanashiGenerateRequest *req);

/* A numeric knob's range for settings UIs: the table's app range (or our own for CFG). */
gboolean  hanashi_params_get_range (const char *key, double *min, double *max, double *def);
/* Numeric access by JSON key (seed as a double; -1 = random; flags 0 or 1). */
gboolean  hanashi_params_get_number (const HanashiParams *params, const char *key, double *value);
gboolean  hanashi_params_set_number (HanashiParams *params, const char *key, double value);

G_END_DECLS

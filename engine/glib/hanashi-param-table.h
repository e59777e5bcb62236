/* hanashi-param-table.h: the engine's sampler parameter table (hn-params.h) as the app sees
 * it, in GLib types, so that the app never includes an engine header.
 *
 * Each row says what a parameter is called (`key`: JSON, GSettings and the panel), how a
 * person edits it (label, hint, the app's range, step, digits, named choices) and its
 * default.  The rows, their order and their values are the engine's: there is no second
 * list here, and a row added to hn-params.c appears in the app without a change to this
 * file.  Values live in the engine's own sampling struct (HnSamplerParams, the type that
 * HanashiGenerateRequest carries); read and write them only through the functions below.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

#include "hanashi-engine.h"

G_BEGIN_DECLS

typedef enum {
  HANASHI_PARAM_FLOAT,
  HANASHI_PARAM_INT,
  HANASHI_PARAM_BOOL,   /* 0 or 1 */
  HANASHI_PARAM_SEED,   /* -1 stands for a random seed */
} HanashiParamType;

/* Where a parameter acts, which also says how a UI groups it. */
typedef enum {
  HANASHI_PARAM_GROUP_TEMPERATURE, /* applies in every mode */
  HANASHI_PARAM_GROUP_TRUNCATION,  /* top-k … min-p: replaced by mirostat when it is on */
  HANASHI_PARAM_GROUP_PENALTIES,
  HANASHI_PARAM_GROUP_MIROSTAT,    /* the mode itself and what only mirostat reads */
  HANASHI_PARAM_GROUP_OUTPUT,      /* seed and length */
} HanashiParamGroup;

typedef struct {
  const char               *key;      /* "top_k" */
  const char               *label;    /* English; translate with gettext */
  const char               *hint;     /* English, or NULL */
  HanashiParamType          type;
  HanashiParamGroup         group;
  double                    def;      /* the engine's default */
  double                    ui_min;   /* what the app offers and stores */
  double                    ui_max;
  double                    step;
  int                       digits;
  const char *const        *choices;  /* INT parameters with named values, NULL-ended; or NULL */
} HanashiParamInfo;

/* The rows in the order a UI lists them; borrowed, valid for the life of the process. */
const HanashiParamInfo *hanashi_param_table (guint *n_out);
/* By key; NULL when the engine has no such parameter. */
const HanashiParamInfo *hanashi_param_find  (const char *key);

/* The engine's defaults for every row. */
void   hanashi_sampling_init         (HnSamplerParams *sampling);
/* The value as a double (seed: -1 for random). */
double hanashi_param_get_value       (const HanashiParamInfo *param, const HnSamplerParams *sampling);
/* Stores `value` pulled into [ui_min, ui_max] (NaN: the default; ints and bools rounded). */
void   hanashi_param_set_value       (const HanashiParamInfo *param, HnSamplerParams *sampling, double value);

/* What the engine accepts beside the table: stop strings (how many, how long in bytes) and
 * the classifier-free guidance scale (1 = off). */
#define HANASHI_SAMPLING_MAX_STOP     16
#define HANASHI_SAMPLING_MAX_STOP_LEN 256
#define HANASHI_CFG_SCALE_MIN         0.0
#define HANASHI_CFG_SCALE_MAX         10.0

G_END_DECLS

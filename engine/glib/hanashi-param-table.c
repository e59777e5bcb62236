/* hanashi-param-table.c: the GLib view of the engine's parameter table (hn-params.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-param-table.h"

#include "hn-cfg.h"
#include "hn-params.h"
#include "hn-sampler.h"

/* The view repeats the engine's enums and limits by value; these keep them from drifting. */
G_STATIC_ASSERT ((int) HANASHI_PARAM_FLOAT == (int) HN_PARAM_FLOAT);
G_STATIC_ASSERT ((int) HANASHI_PARAM_INT == (int) HN_PARAM_INT);
G_STATIC_ASSERT ((int) HANASHI_PARAM_BOOL == (int) HN_PARAM_BOOL);
G_STATIC_ASSERT ((int) HANASHI_PARAM_SEED == (int) HN_PARAM_SEED);
G_STATIC_ASSERT ((int) HANASHI_PARAM_GROUP_TEMPERATURE == (int) HN_PARAM_GROUP_TEMPERATURE);
G_STATIC_ASSERT ((int) HANASHI_PARAM_GROUP_TRUNCATION == (int) HN_PARAM_GROUP_TRUNCATION);
G_STATIC_ASSERT ((int) HANASHI_PARAM_GROUP_PENALTIES == (int) HN_PARAM_GROUP_PENALTIES);
G_STATIC_ASSERT ((int) HANASHI_PARAM_GROUP_MIROSTAT == (int) HN_PARAM_GROUP_MIROSTAT);
G_STATIC_ASSERT ((int) HANASHI_PARAM_GROUP_OUTPUT == (int) HN_PARAM_GROUP_OUTPUT);
G_STATIC_ASSERT (HANASHI_SAMPLING_MAX_STOP == HN_SAMPLER_MAX_STOP);
G_STATIC_ASSERT (HANASHI_SAMPLING_MAX_STOP_LEN == HN_SAMPLER_MAX_STOP_LEN);
/* Whole numbers both: a cast of a floating constant is what an integer constant
 * expression may hold (clang refuses a floating comparison in a static assertion). */
G_STATIC_ASSERT ((int) HANASHI_CFG_SCALE_MIN == (int) HN_CFG_SCALE_MIN);
G_STATIC_ASSERT ((int) HANASHI_CFG_SCALE_MAX == (int) HN_CFG_SCALE_MAX);

typedef struct {
  HanashiParamInfo  *infos;   /* row i describes engine row i */
  const HnParamDesc *rows;
  guint              n;
} ParamTable;

static gpointer
build_table (gpointer unused)
{
  ParamTable *table = g_new0 (ParamTable, 1);
  size_t n = 0;
  table->rows = hn_params_table (&n);
  table->n = (guint) n;
  table->infos = g_new0 (HanashiParamInfo, n);
  for (size_t i = 0; i < n; i++)
    {
      const HnParamDesc *row = &table->rows[i];
      table->infos[i] = (HanashiParamInfo) {
        .key = row->key, .label = row->label, .hint = row->hint,
        .type = (HanashiParamType) row->type, .group = (HanashiParamGroup) row->group,
        .def = row->def, .ui_min = row->ui_min, .ui_max = row->ui_max,
        .step = row->step, .digits = row->digits, .choices = row->choices,
      };
    }
  return table;
}

/* Built once and kept for the life of the process, as the engine's table is. */
static const ParamTable *
get_table (void)
{
  static GOnce once = G_ONCE_INIT;
  return g_once (&once, build_table, NULL);
}

static const HnParamDesc *
engine_row (const HanashiParamInfo *param)
{
  const ParamTable *table = get_table ();
  g_return_val_if_fail (param >= table->infos && param < table->infos + table->n, NULL);
  return &table->rows[param - table->infos];
}

const HanashiParamInfo *
hanashi_param_table (guint *n_out)
{
  const ParamTable *table = get_table ();
  *n_out = table->n;
  return table->infos;
}

const HanashiParamInfo *
hanashi_param_find (const char *key)
{
  const ParamTable *table = get_table ();
  const HnParamDesc *row = hn_params_find (key);
  return row != NULL ? &table->infos[row - table->rows] : NULL;
}

void
hanashi_sampling_init (HnSamplerParams *sampling)
{
  hn_sampler_params_init (sampling);
}

double
hanashi_param_get_value (const HanashiParamInfo *param, const HnSamplerParams *sampling)
{
  const HnParamDesc *row = engine_row (param);
  g_return_val_if_fail (row != NULL, 0);
  return hn_param_get (row, sampling);
}

void
hanashi_param_set_value (const HanashiParamInfo *param, HnSamplerParams *sampling, double value)
{
  const HnParamDesc *row = engine_row (param);
  g_return_if_fail (row != NULL);
  hn_param_set (row, sampling, hn_param_clamp_to (row, value, row->ui_min, row->ui_max));
}

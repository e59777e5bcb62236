/* hanashi-model-file.c: what a model file says about itself, without loading it.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine"

#include "hanashi-model-file.h"
#include "hanashi-engine.h"

#include "hn-gguf.h"
#include "hn-quants.h"

/* Longest metadata text kept: enough for any real name or licence, not a megabyte. */
#define MAX_META_TEXT 256

static HnGguf *
open_gguf (const char *path, GError **error)
{
  HnError err = { 0 };
  HnGguf *gguf = hn_gguf_open (path, &err);
  if (gguf == NULL)
    {
      /* the same codes as a failed load of the file */
      int code = err.code == HN_ERR_IO ? HANASHI_ENGINE_ERROR_MODEL_UNREADABLE
                 : err.code == HN_ERR_TRUNCATED ? HANASHI_ENGINE_ERROR_MODEL_TRUNCATED
                 : err.code == HN_ERR_UNSUPPORTED ? HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH
                 : HANASHI_ENGINE_ERROR_NOT_GGUF;
      g_set_error_literal (error, HANASHI_ENGINE_ERROR, code, err.message);
    }
  return gguf;
}

static char *
dup_weight_type (const HnGguf *gguf)
{
  uint32_t type = hn_gguf_main_weight_type (gguf);
  return type < HN_TYPE_COUNT ? g_strdup (hn_type_name (type)) : NULL;
}

char *
hanashi_model_file_dup_weight_type (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  HnGguf *gguf = open_gguf (path, error);
  if (gguf == NULL)
    return NULL;
  char *type = dup_weight_type (gguf);
  hn_gguf_close (gguf);
  return type;
}

static char *
dup_meta_string (const HnGguf *gguf, const char *key)
{
  HnStr value;
  if (hn_gguf_find_key (gguf, key) < 0 || !hn_gguf_get_str (gguf, key, &value, NULL))
    return NULL;
  char *text = g_utf8_make_valid (value.data, (gssize) MIN (value.len, MAX_META_TEXT));
  return g_strstrip (text);
}

HanashiModelFileFacts *
hanashi_model_file_read_facts (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

  HnGguf *gguf = open_gguf (path, error);
  if (gguf == NULL)
    return NULL;
  HanashiModelFileFacts *facts = g_new0 (HanashiModelFileFacts, 1);
  facts->name = dup_meta_string (gguf, "general.name");
  facts->arch = dup_meta_string (gguf, "general.architecture");
  facts->license = dup_meta_string (gguf, "general.license");
  if (facts->arch != NULL)
    {
      g_autofree char *ctx_key = g_strconcat (facts->arch, ".context_length", NULL);
      uint32_t n_ctx = 0;
      if (hn_gguf_get_u32_or (gguf, ctx_key, 0, &n_ctx, NULL))
        facts->n_ctx_train = n_ctx;
    }
  for (int64_t i = 0; i < hn_gguf_n_tensors (gguf); i++)
    {
      const HnGgufTensor *t = hn_gguf_tensor (gguf, i);
      guint64 n = 1;
      for (uint32_t d = 0; d < t->n_dims; d++)
        n *= (guint64) t->ne[d];
      facts->n_params += n;
    }
  facts->weight_type = dup_weight_type (gguf);
  hn_gguf_close (gguf);
  return facts;
}

void
hanashi_model_file_facts_free (HanashiModelFileFacts *facts)
{
  if (facts == NULL)
    return;
  g_free (facts->name);
  g_free (facts->arch);
  g_free (facts->license);
  g_free (facts->weight_type);
  g_free (facts);
}

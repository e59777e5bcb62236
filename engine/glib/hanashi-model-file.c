/* hanashi-model-file.c: what a model file says about itself, without loading it. */
#include "hanashi-model-file.h"
#include "hanashi-engine.h"

#include "hn-gguf.h"
#include "hn-quants.h"

char *
hanashi_model_file_weight_type (const char *path, GError **error)
{
  g_return_val_if_fail (path != NULL, NULL);
  g_return_val_if_fail (error == NULL || *error == NULL, NULL);

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
      return NULL;
    }
  uint32_t type = hn_gguf_main_weight_type (gguf);
  hn_gguf_close (gguf);
  return type < HN_TYPE_COUNT ? g_strdup (hn_type_name (type)) : NULL;
}

/* hanashi-engine-errors.c — engine errors as sentences in the user's language
 *
 * The engine's own messages are English and technical ("tensor 'blk.3.attn_q.weight'
 * extends past end of file"); the window shows what they mean for the person instead.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-engine-errors"

#include "config.h"

#include <glib/gi18n.h>

#include "hanashi-engine-errors.h"
#include "hanashi-engine.h"
#include "hanashi-remote-endpoints.h"

char *
hanashi_describe_engine_error (const GError *error)
{
  g_return_val_if_fail (error != NULL, NULL);

  if (error->domain == HANASHI_REMOTE_ERROR)
    return hanashi_describe_remote_error (error);

  if (error->domain == HANASHI_ENGINE_ERROR)
    switch ((HanashiEngineError) error->code)
      {
      case HANASHI_ENGINE_ERROR_MODEL_UNREADABLE:
        return g_strdup (_("The model file could not be read."));
      case HANASHI_ENGINE_ERROR_NOT_GGUF:
        return g_strdup (_("This file is not a GGUF model."));
      case HANASHI_ENGINE_ERROR_UNSUPPORTED_ARCH:
        return g_strdup (_("This kind of model is not supported."));
      case HANASHI_ENGINE_ERROR_OUT_OF_MEMORY:
        return g_strdup (_("There is not enough memory for this context size. Choose a smaller one in Preferences."));
      case HANASHI_ENGINE_ERROR_GRAMMAR_INVALID:
        /* Translators: %s says where the grammar is wrong */
        return g_strdup_printf (_("The grammar is not valid: %s"), error->message);
      case HANASHI_ENGINE_ERROR_NO_MODEL:
        return g_strdup (_("No model is loaded."));
      case HANASHI_ENGINE_ERROR_TEMPLATE_FAILED:
        return g_strdup (_("The model’s chat template could not be used."));
      case HANASHI_ENGINE_ERROR_MODEL_TRUNCATED:
        return g_strdup (_("The model file is incomplete, probably because a download or copy was interrupted. Download it again."));
      case HANASHI_ENGINE_ERROR_INVALID_NUMBERS:
        return g_strdup (_("The model produced invalid numbers, so it cannot continue. The model file may be damaged."));
      case HANASHI_ENGINE_ERROR_PROMPT_TOO_LONG:
        return g_strdup (_("The message is too long for this model’s context. Shorten it, or choose a larger context size in Preferences."));
      case HANASHI_ENGINE_ERROR_GRAMMAR_TOO_COMPLEX:
        return g_strdup (_("The grammar or JSON Schema is too complex to follow. Simplify it."));
      case HANASHI_ENGINE_ERROR_GPU_FAILED:
        return g_strdup (_("The graphics card stopped working, so the processor writes the rest of the reply and runs the model from now on."));
      case HANASHI_ENGINE_ERROR_PARAM_UNAVAILABLE:
        return g_strdup (_("Some settings were not sent: this server is not a Hanashi server, so it takes only OpenAI’s parameters."));
      case HANASHI_ENGINE_ERROR_FAILED:
      case HANASHI_ENGINE_ERROR_CANCELLED:
      case HANASHI_ENGINE_ERROR_INVALID_ARGUMENT:
      case HANASHI_ENGINE_ERROR_CONTEXT_CLAMPED:
      default:
        break;
      }
  return g_strdup (error->message);
}

/* hanashi-model-file.h: facts about a GGUF model file read from its header alone, without
 * loading the model (the app's model list asks them of every file in its folders), and
 * answered exactly as the engine answers them once the model is loaded. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The model's main weight type, e.g. "Q4_K": the same text as the weight_type of the
 * HanashiModelInfo the engine emits after loading this file (the type holding the most
 * bytes of the layer weight matrices; see hn_gguf_main_weight_type()).  NULL with `error`
 * set (HANASHI_ENGINE_ERROR) when the file cannot be read as a GGUF; NULL with `error`
 * untouched when it holds no weight matrix. */
char *hanashi_model_file_weight_type (const char *path, GError **error);

G_END_DECLS

/* hanashi-model-file.h: facts about a GGUF model file read from its header alone, without
 * loading the model (the app's model list asks them of every file in its folders), and
 * answered exactly as the engine answers them once the model is loaded.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The model's main weight type, e.g. "Q4_K": the same text as the weight_type of the
 * HanashiModelInfo the engine emits after loading this file (the type holding the most
 * bytes of the layer weight matrices; see hn_gguf_main_weight_type()).  NULL with `error`
 * set (HANASHI_ENGINE_ERROR) when the file cannot be read as a GGUF; NULL with `error`
 * untouched when it holds no weight matrix. */
char *hanashi_model_file_dup_weight_type (const char *path, GError **error);

/* What the app's model list shows of a file, read from one opening of its header.  Texts
 * from the file's metadata are untrusted bytes: they come back as valid UTF-8 of at most
 * 256 bytes, stripped, or NULL when the key is missing. */
typedef struct {
  char    *name;          /* general.name, or NULL */
  char    *arch;          /* general.architecture, or NULL */
  char    *license;       /* general.license, or NULL */
  char    *weight_type;   /* as hanashi_model_file_dup_weight_type(), or NULL */
  guint64  n_params;      /* elements of every tensor */
  guint32  n_ctx_train;   /* <arch>.context_length, 0 when unknown */
} HanashiModelFileFacts;

/* NULL with `error` set as for hanashi_model_file_dup_weight_type() when the file cannot be
 * read as a GGUF (the message is the engine's sentence about the file). */
HanashiModelFileFacts *hanashi_model_file_read_facts (const char *path, GError **error);
void                   hanashi_model_file_facts_free (HanashiModelFileFacts *facts);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HanashiModelFileFacts, hanashi_model_file_facts_free)

G_END_DECLS

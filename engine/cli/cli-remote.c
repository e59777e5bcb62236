/* cli-remote.c — the CLI's side of remote servers (see cli-remote.h).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-remote.h"

#include "hanashi-remote.h"

#include <stdlib.h>
#include <string.h>

struct CliRemote {
  HanashiRemote *remote;
  char *model;
  gboolean is_hanashi;
  char *grammar;       /* GBNF text, or NULL */
  char *json_schema;   /* JSON schema text, or NULL */
};

static void
fail_gerror(const GError *error)
{
  cli_fail("%s", error->message);
}

CliRemote *
cli_remote_open(const char *url, const char *api_key, const char *model)
{
  g_autoptr(GError) error = NULL;
  HanashiRemote *remote = hanashi_remote_new(url, api_key, &error);
  if (!remote) {
    fail_gerror(error);
    return NULL;
  }
  gboolean is_hanashi = FALSE;
  g_auto(GStrv) ids = hanashi_remote_list_models(remote, &is_hanashi, NULL, &error);
  if (!ids) {
    fail_gerror(error);
    hanashi_remote_unref(remote);
    return NULL;
  }
  const char *chosen = NULL;
  for (char **id = ids; *id; id++)
    if (!model || strcmp(*id, model) == 0) {
      chosen = *id;
      break;
    }
  if (!chosen) {
    g_autofree char *listed = ids[0] ? g_strjoinv(", ", ids) : g_strdup("none");
    if (model)
      cli_fail("the server at %s does not serve the model '%s' (it lists: %s)", url, model, listed);
    else
      cli_fail("the server at %s lists no models", url);
    hanashi_remote_unref(remote);
    return NULL;
  }
  CliRemote *r = g_new0(CliRemote, 1);
  r->remote = remote;
  r->model = g_strdup(chosen);
  r->is_hanashi = is_hanashi;
  return r;
}

void
cli_remote_close(CliRemote *r)
{
  if (!r)
    return;
  hanashi_remote_unref(r->remote);
  g_free(r->model);
  free(r->grammar);
  free(r->json_schema);
  g_free(r);
}

bool
cli_remote_prepare(CliRemote *r, CliSamplingOptions *opts)
{
  /* n_vocab 0: the logit-bias ids are the server's, it checks them. */
  HnGrammar *grammar = NULL;
  if (!cli_sampling_finish(opts, 0) || !cli_sampling_load_grammar(opts, &grammar))
    return false;
  hn_grammar_free(grammar);   /* parsed only to refuse a broken file here rather than there */
  const char *path = opts->grammar_file ? opts->grammar_file : opts->json_schema_file;
  if (path) {
    HnError err = { 0 };
    char *text = cli_read_file(path, NULL, &err);
    if (!text) {
      cli_fail_error(&err);
      return false;
    }
    if (opts->grammar_file)
      r->grammar = text;
    else
      r->json_schema = text;
  }
  return true;
}

static void
on_delta(gpointer data, const char *text, gsize len)
{
  GString *reply = data;
  g_string_append_len(reply, text, (gssize) len);
  /* every byte, NUL included, as the local generate and chat write them */
  fwrite(text, 1, len, stdout);
  fflush(stdout);
}

static void
on_left_out(gpointer data, const char *message)
{
  (void) data;
  cli_notice(message);
}

bool
cli_remote_reply(CliRemote *r, const char *system, const HnChatMessage *messages, size_t n_messages,
                 HnChatThinking thinking, const CliSamplingOptions *opts, char **reply_out)
{
  g_autoptr(HanashiGenerateRequest) req = hanashi_generate_request_new("cli");
  hanashi_generate_request_set_system_prompt(req, system);
  for (size_t i = 0; i < n_messages; i++) {
    const char *role = messages[i].role;
    HanashiRole r_role = strcmp(role, "assistant") == 0 ? HANASHI_ROLE_ASSISTANT
                         : strcmp(role, "system") == 0  ? HANASHI_ROLE_SYSTEM
                                                        : HANASHI_ROLE_USER;
    hanashi_generate_request_add_message(req, r_role, messages[i].content);
  }
  hanashi_generate_request_set_sampling(req, &opts->params);
  for (size_t i = 0; i < opts->n_stops; i++)
    hanashi_generate_request_add_stop_string(req, opts->stops[i]);
  if (r->grammar)
    hanashi_generate_request_set_grammar(req, r->grammar);
  if (r->json_schema)
    hanashi_generate_request_set_json_schema(req, r->json_schema);
  hanashi_generate_request_set_cfg(req, opts->cfg_negative_prompt, opts->cfg_scale);
  hanashi_generate_request_set_thinking(req, thinking == HN_CHAT_THINKING_ON    ? HANASHI_THINKING_ON
                                             : thinking == HN_CHAT_THINKING_OFF ? HANASHI_THINKING_OFF
                                                                                : HANASHI_THINKING_DEFAULT);
  HanashiRemoteChat chat = { .model = r->model, .request = req, .logit_bias = opts->bias,
                             .n_logit_bias = opts->n_bias, .is_hanashi = r->is_hanashi };
  GString *reply = g_string_new(NULL);
  HanashiRemoteCallbacks callbacks = { on_delta, on_left_out, reply };
  HanashiRemoteResult result;
  g_autoptr(GError) error = NULL;
  if (!hanashi_remote_chat_stream(r->remote, &chat, &callbacks, &result, NULL, &error)) {
    if (reply->len > 0)
      putchar('\n');   /* the error line starts on its own line */
    fflush(stdout);
    fail_gerror(error);
    g_string_free(reply, TRUE);
    return false;
  }
  if (reply_out)
    *reply_out = strdup(reply->str);
  g_string_free(reply, TRUE);
  return true;
}

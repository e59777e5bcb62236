/* hanashi-cli chat-template — renders a chat template for a conversation.
 *
 *   hanashi-cli chat-template [-m MODEL] [--template FILE] [--bos-token S] [--eos-token S]
 *                             --messages FILE.json [--no-generation-prompt]
 *                             [--enable-thinking true|false]
 *
 * Prints the prompt exactly (no added newline).  The template and the BOS/EOS token texts
 * come from the model's GGUF metadata unless given.  --enable-thinking defines the template
 * variable enable_thinking (Qwen3 switches its thinking with it); without it, it is undefined.  Hidden options for tests:
 * --now YYYY-MM-DD fixes the date strftime_now() sees (also env HANASHI_NOW), and
 * --extra FILE.json passes further variables (tools, documents, ...).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "cli-common.h"
#include "hn-chat-template.h"
#include "hn-gguf.h"
#include "hn-json.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
usage(void)
{
  fprintf(stderr, "Usage: hanashi-cli chat-template [-m MODEL] [--template FILE] [--bos-token S] [--eos-token S]\n"
                  "                                 --messages FILE.json [--no-generation-prompt]\n"
                  "                                 [--enable-thinking true|false]\n");
}

/* Copies the text of token `key`'s id out of tokenizer.ggml.tokens, or NULL. */
static char *
token_text(HnGguf *g, const char *key)
{
  uint32_t id;
  HnError err = { 0 };
  if (!hn_gguf_get_u32(g, key, &id, &err))
    return NULL;
  HnGgufArray tokens;
  if (!hn_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens, &err) || tokens.type != HN_GGUF_STRING ||
      id >= tokens.count)
    return NULL;
  HnStr *all = malloc(tokens.count * sizeof(HnStr));
  if (!all)
    return NULL;
  hn_gguf_array_strings(&tokens, all);
  char *s = strndup(all[id].data, all[id].len);
  free(all);
  return s;
}

static bool
parse_date(const char *s, time_t *out)
{
  int y, m, d;
  char tail;
  if (sscanf(s, "%d-%d-%d%c", &y, &m, &d, &tail) != 3 || y < 1900 || y > 9999 || m < 1 || m > 12 || d < 1 || d > 31)
    return false;
  struct tm tm = { 0 };
  tm.tm_year = y - 1900;
  tm.tm_mon = m - 1;
  tm.tm_mday = d;
  tm.tm_hour = 12;
  tm.tm_isdst = -1;
  *out = mktime(&tm);
  return *out != (time_t)-1;
}

int cli_chat_template(int argc, char **argv);

int
cli_chat_template(int argc, char **argv)
{
  const char *model = NULL, *template_path = NULL, *bos = NULL, *eos = NULL, *messages_path = NULL;
  const char *now_text = getenv("HANASHI_NOW"), *extra_path = NULL;
  bool generation_prompt = true;
  HnChatThinking thinking = HN_CHAT_THINKING_UNSET;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_value)
      model = argv[++i];
    else if (!strcmp(a, "--template") && has_value)
      template_path = argv[++i];
    else if (!strcmp(a, "--bos-token") && has_value)
      bos = argv[++i];
    else if (!strcmp(a, "--eos-token") && has_value)
      eos = argv[++i];
    else if (!strcmp(a, "--messages") && has_value)
      messages_path = argv[++i];
    else if (!strcmp(a, "--no-generation-prompt"))
      generation_prompt = false;
    else if (!strcmp(a, "--enable-thinking") && has_value) {
      const char *v = argv[++i];
      if (!strcmp(v, "true"))
        thinking = HN_CHAT_THINKING_ON;
      else if (!strcmp(v, "false"))
        thinking = HN_CHAT_THINKING_OFF;
      else {
        usage();
        return cli_fail("chat-template: --enable-thinking takes true or false, not '%s'", v);
      }
    }
    else if (!strcmp(a, "--now") && has_value)
      now_text = argv[++i];
    else if (!strcmp(a, "--extra") && has_value)
      extra_path = argv[++i];
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else {
      usage();
      return cli_fail("chat-template: unknown option or missing value: '%s'", a);
    }
  }
  if (!messages_path)
    return cli_fail("chat-template: --messages FILE.json is required");
  if (!model && !template_path)
    return cli_fail("chat-template: give -m MODEL or --template FILE");

  int status = 1;
  HnError err = { 0 };
  HnGguf *g = NULL;
  char *tsrc = NULL, *msgs_text = NULL, *extra_text = NULL, *bos_owned = NULL, *eos_owned = NULL, *out = NULL;
  HnJson *messages = NULL, *extra = NULL;
  HnChatTemplate *t = NULL;
  size_t tlen = 0, mlen = 0, out_len = 0;

  msgs_text = cli_read_file(messages_path, &mlen, &err);
  if (!msgs_text) {
    status = cli_fail_error(&err);
    goto done;
  }
  messages = hn_json_parse(msgs_text, mlen, &err);
  if (!messages) {
    status = cli_fail("%s: %s", messages_path, err.message);
    goto done;
  }
  if (!hn_json_is_array(messages)) {
    status = cli_fail("%s: expected a JSON array of messages", messages_path);
    goto done;
  }
  for (size_t k = 0; k < hn_json_length(messages); k++)
    if (!hn_json_is_object(hn_json_array_get(messages, k)) ||
        !hn_json_is_string(hn_json_object_get(hn_json_array_get(messages, k), "role"))) {
      status = cli_fail("%s: message %zu is not an object with a string \"role\"", messages_path, k);
      goto done;
    }
  if (extra_path) {
    size_t elen;
    extra_text = cli_read_file(extra_path, &elen, &err);
    if (!extra_text) {
      status = cli_fail_error(&err);
      goto done;
    }
    extra = hn_json_parse(extra_text, elen, &err);
    if (!extra || !hn_json_is_object(extra)) {
      status = cli_fail("%s: %s", extra_path, extra ? "expected a JSON object" : err.message);
      goto done;
    }
  }
  if (model) {
    g = hn_gguf_open(model, &err);
    if (!g) {
      status = cli_fail_error(&err);
      goto done;
    }
    if (!template_path) {
      HnStr s;
      if (hn_gguf_get_str(g, "tokenizer.chat_template", &s, &err)) {
        tsrc = strndup(s.data, s.len);
        tlen = s.len;
      }
    }
    if (!bos)
      bos = bos_owned = token_text(g, "tokenizer.ggml.bos_token_id");
    if (!eos)
      eos = eos_owned = token_text(g, "tokenizer.ggml.eos_token_id");
  }
  if (template_path) {
    tsrc = cli_read_file(template_path, &tlen, &err);
    if (!tsrc) {
      status = cli_fail_error(&err);
      goto done;
    }
  }
  if (!tsrc) {
    fprintf(stderr, "hanashi-cli: warning: the model has no chat template; using the built-in ChatML format\n");
    out = hn_chat_render_fallback(messages, generation_prompt, &out_len, &err);
  } else {
    t = hn_chat_template_new(tsrc, tlen, &err);
    if (!t) {
      status = cli_fail("chat template: %s", err.message);
      goto done;
    }
    HnChatRenderOptions o = { 0 };
    o.messages = messages;
    o.bos_token = bos;
    o.eos_token = eos;
    o.add_generation_prompt = generation_prompt;
    o.extra = extra;
    o.enable_thinking = thinking;
    if (now_text) {
      if (!parse_date(now_text, &o.now)) {
        status = cli_fail("chat-template: --now expects YYYY-MM-DD, got '%s'", now_text);
        goto done;
      }
      o.has_now = true;
    }
    out = hn_chat_template_render(t, &o, &out_len, &err);
  }
  if (!out) {
    status = cli_fail("chat template: %s", err.message);
    goto done;
  }
  if (fwrite(out, 1, out_len, stdout) != out_len || fflush(stdout) != 0) {
    status = cli_fail("cannot write to stdout");
    goto done;
  }
  status = 0;
done:
  free(out);
  hn_chat_template_free(t);
  hn_json_free(messages);
  hn_json_free(extra);
  free(msgs_text);
  free(extra_text);
  free(tsrc);
  free(bos_owned);
  free(eos_owned);
  hn_gguf_close(g);
  return status;
}

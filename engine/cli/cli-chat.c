/* hanashi-cli chat -m MODEL [--system TEXT] [--messages FILE.json] [-f FILE] [--session FILE]
 *   [-n N] [--ids] [-t THREADS] [-c CTX] [-ngl N|auto] [--enable-thinking true|false] [sampling options]
 *
 * A conversation through the conversation core (hn-chat.h), the same code the app's engine
 * thread runs: the model's chat template (or ChatML), old turns dropped to fit the context,
 * the KV cache reused from turn to turn and, with --session, from the session file, which is
 * saved after every reply.  Greedy unless a sampling option says otherwise.
 *
 * User turns: one per line from stdin, or from FILE with -f (empty lines are skipped).
 * --messages FILE.json gives a conversation in the chat-template message format (a JSON
 * array of {"role", "content"} objects; a leading "system" message is the system prompt): if
 * it ends with a user message, it is answered; then the turns from -f follow, if given
 * (stdin is read only when neither --messages nor -f is).
 *
 * Output: each reply streamed to stdout and ended with a newline, or with --ids one JSON
 * array of its token ids per line.  On stderr, with --session, before every reply:
 * "session: reused N of M prompt tokens" (N prompt tokens were already in the KV cache),
 * preceded on the first one by "session: file not used (why)" when the file is missing or
 * unusable; notices when turns were left out, the template failed or the context filled up.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "cli-sampling.h"
#include "hn-chat.h"
#include "hn-json.h"
#ifdef HN_CLI_REMOTE
#include "cli-remote.h"
#endif

int cli_chat(int argc, char **argv);

/* The conversation so far (owned copies). */
typedef struct {
  HnChatMessage *items;
  size_t n, cap;
} Conversation;

static bool
conversation_add(Conversation *c, const char *role, const char *content, size_t len)
{
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    HnChatMessage *items = realloc(c->items, cap * sizeof *items);
    if (!items)
      return false;
    c->items = items;
    c->cap = cap;
  }
  char *r = strdup(role), *t = malloc(len + 1);
  if (!r || !t) {
    free(r);
    free(t);
    return false;
  }
  memcpy(t, content, len);
  t[len] = '\0';
  c->items[c->n++] = (HnChatMessage) { r, t };
  return true;
}

static void
conversation_clear(Conversation *c)
{
  for (size_t i = 0; i < c->n; i++) {
    free((char *) c->items[i].role);
    free((char *) c->items[i].content);
  }
  free(c->items);
  memset(c, 0, sizeof *c);
}

/* What one reply produced, and what the callbacks must know. */
typedef struct {
  bool ids, session;
  char *reply;
  size_t reply_len, reply_cap;
  bool out_of_memory;
  char *save_error;
} Turn;

static bool
on_text(void *user_data, const char *text, size_t len, int32_t token)
{
  Turn *t = user_data;
  (void) token;
  if (t->reply_len + len + 1 > t->reply_cap) {
    size_t cap = t->reply_cap ? t->reply_cap : 256;
    while (cap < t->reply_len + len + 1)
      cap *= 2;
    char *r = realloc(t->reply, cap);
    if (!r) {
      t->out_of_memory = true;
      return false;
    }
    t->reply = r;
    t->reply_cap = cap;
  }
  memcpy(t->reply + t->reply_len, text, len);
  t->reply_len += len;
  t->reply[t->reply_len] = '\0';
  if (!t->ids) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
  }
  return true;
}

static void
on_warning(void *user_data, HnChatWarning code, const char *message)
{
  Turn *t = user_data;
  switch (code) {
  case HN_CHAT_WARNING_SESSION_MISSING:
  case HN_CHAT_WARNING_SESSION_NOT_USED:
    fprintf(stderr, "session: file not used (%s)\n", message);
    break;
  case HN_CHAT_WARNING_SESSION_NOT_SAVED:
    free(t->save_error);
    t->save_error = strdup(message);
    break;
  case HN_CHAT_WARNING_TEMPLATE_FALLBACK:
  case HN_CHAT_WARNING_SESSION_CACHE_NOT_TRIMMED:
  default:
    cli_notice(message);
    break;
  }
}

static void
on_context_dropped(void *user_data, size_t n_messages, size_t n_tokens)
{
  (void) user_data;
  char notice[160];
  snprintf(notice, sizeof notice, "the oldest %zu messages (%zu tokens) were left out to fit the context",
           n_messages, n_tokens);
  cli_notice(notice);
}

static void
on_reuse(void *user_data, const HnChatReuse *reuse)
{
  Turn *t = user_data;
  if (t->session)
    fprintf(stderr, "session: reused %zu of %zu prompt tokens\n", reuse->n_cached, reuse->n_prompt);
}

typedef struct {
  HnChat *chat;
  CliChatModel *model;
  HnChatRequest req;
  Conversation conv;
  bool ids, session;
#ifdef HN_CLI_REMOTE
  CliRemote *remote;                   /* --remote: replies come from the server */
  const CliSamplingOptions *sopts;
#endif
} Chat;

#ifdef HN_CLI_REMOTE
static bool
reply_remote(Chat *c)
{
  char *text = NULL;
  if (!cli_remote_reply(c->remote, c->req.system, c->conv.items, c->conv.n, c->req.thinking, c->sopts, &text))
    return false;
  putchar('\n');
  fflush(stdout);
  bool ok = conversation_add(&c->conv, "assistant", text, strlen(text));
  free(text);
  if (!ok)
    cli_fail("out of memory");
  return ok;
}
#endif

/* Answers the conversation as it stands and appends the reply.  False after printing the
 * error line. */
static bool
reply(Chat *c)
{
#ifdef HN_CLI_REMOTE
  if (c->remote)
    return reply_remote(c);
#endif
  Turn turn = { .ids = c->ids, .session = c->session };
  HnChatCallbacks callbacks = { .on_text = on_text, .on_warning = on_warning, .on_context_dropped = on_context_dropped,
                                .on_reuse = on_reuse, .user_data = &turn };
  HnChatStats stats;
  HnError err = { 0 };
  bool ok = false;
  c->req.messages = c->conv.items;
  c->req.n_messages = c->conv.n;
  if (!hn_chat_generate(c->chat, &c->req, &callbacks, &stats, &err)) {
    cli_fail_error(&err);
    goto out;
  }
  if (turn.out_of_memory) {
    cli_fail("out of memory");
    goto out;
  }
  if (c->ids) {
    size_t n = 0;
    const int32_t *ids = hn_chat_reply_tokens(c->chat, &n);
    putchar('[');
    for (size_t i = 0; i < n; i++)
      printf(i ? ",%d" : "%d", ids[i]);
    printf("]\n");
  } else {
    putchar('\n');
  }
  fflush(stdout);
  if (stats.grammar_truncated_steps > 0) {
    char notice[200];
    snprintf(notice, sizeof notice,
             "the grammar was too ambiguous to follow in full at %zu steps; some continuations "
             "it allows may have been refused",
             stats.grammar_truncated_steps);
    cli_notice(notice);
  }
  if (stats.stop_reason == HN_GEN_STOP_CONTEXT_FULL)
    cli_notice("the reply stopped because the context is full");
  cli_chat_model_notice_device(c->model);
  if (turn.save_error) {
    cli_fail("cannot save the session: %s", turn.save_error);
    goto out;
  }
  if (!conversation_add(&c->conv, "assistant", turn.reply ? turn.reply : "", turn.reply_len)) {
    cli_fail("out of memory");
    goto out;
  }
  ok = true;
out:
  free(turn.reply);
  free(turn.save_error);
  return ok;
}

/* One user turn from a line (without its line end); empty lines are skipped. */
static bool
user_turn(Chat *c, const char *line, size_t len)
{
  while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
    len--;
  if (len == 0)
    return true;
  if (!conversation_add(&c->conv, "user", line, len)) {
    cli_fail("out of memory");
    return false;
  }
  return reply(c);
}

/* --messages: the conversation in the chat-template format.  *system_out takes a leading
 * system message's content (owned). */
static bool
load_messages(Chat *c, const char *path, bool have_system, char **system_out)
{
  HnError err = { 0 };
  size_t len = 0;
  char *text = cli_read_file(path, &len, &err);
  HnJson *messages = NULL;
  bool ok = false;
  if (!text) {
    cli_fail_error(&err);
    goto out;
  }
  if (!(messages = hn_json_parse(text, len, &err))) {
    cli_fail("%s: %s", path, err.message);
    goto out;
  }
  if (!hn_json_is_array(messages)) {
    cli_fail("%s: expected a JSON array of messages", path);
    goto out;
  }
  for (size_t k = 0; k < hn_json_length(messages); k++) {
    const HnJson *m = hn_json_array_get(messages, k);
    const HnJson *role = hn_json_object_get(m, "role"), *content = hn_json_object_get(m, "content");
    if (!hn_json_is_object(m) || !hn_json_is_string(role)) {
      cli_fail("%s: message %zu is not an object with a string \"role\"", path, k);
      goto out;
    }
    if (!hn_json_is_string(content)) {
      cli_fail("%s: message %zu has no string \"content\"", path, k);
      goto out;
    }
    if (k == 0 && strcmp(hn_json_get_string(role), "system") == 0) {
      if (have_system) {
        cli_fail("%s starts with a system message and --system gives another: use one of them", path);
        goto out;
      }
      *system_out = strdup(hn_json_get_string(content));
      if (!*system_out) {
        cli_fail("out of memory");
        goto out;
      }
      continue;
    }
    if (!conversation_add(&c->conv, hn_json_get_string(role), hn_json_get_string(content),
                          hn_json_get_string_len(content))) {
      cli_fail("out of memory");
      goto out;
    }
  }
  ok = true;
out:
  hn_json_free(messages);
  free(text);
  return ok;
}

enum { OPT_MODEL, OPT_FILE, OPT_MESSAGES, OPT_SYSTEM, OPT_N, OPT_THREADS, OPT_CTX, OPT_SESSION, OPT_THINKING,
       OPT_REMOTE, OPT_API_KEY, OPT_GPU_LAYERS, OPT_GPU_DEVICE };
static const CliValueOption value_options[] = {
  { "-m", "--model", OPT_MODEL },
  { "-f", "--file", OPT_FILE },
  { NULL, "--messages", OPT_MESSAGES },
  { NULL, "--system", OPT_SYSTEM },
  { "-n", "--n-predict", OPT_N },
  { "-t", "--threads", OPT_THREADS },
  { "-c", "--ctx-size", OPT_CTX },
  { NULL, "--session", OPT_SESSION },
  { NULL, "--enable-thinking", OPT_THINKING },
  { NULL, "--remote", OPT_REMOTE },
  { NULL, "--api-key", OPT_API_KEY },
  { "-ngl", "--gpu-layers", OPT_GPU_LAYERS },
  { NULL, "--gpu-device", OPT_GPU_DEVICE },
};

static void
usage(const CliSamplingOptions *defaults)
{
  fprintf(stderr,
          "usage: hanashi-cli chat -m MODEL [--system TEXT] [--messages FILE.json] [-f FILE] [--session FILE]\n"
          "                        [-n N] [--ids] [-t THREADS] [-c CTX] [--enable-thinking true|false]\n"
          "                        [sampling options]\n"
          "  user turns are read from stdin, one per line, unless --messages or -f is given\n"
          "  -f, --file FILE       read the user turns from FILE, one per line\n"
          "  --messages FILE.json  a conversation to answer: [{\"role\": ..., \"content\": ...}, ...]\n"
          "  --system TEXT         the system prompt\n"
          "  -n, --n-predict N     at most N tokens per reply (-1 = no limit, the default)\n"
          "  --ids                 print each reply's token ids as a JSON array instead of its text\n"
          "  --session FILE        reuse and save the conversation's KV cache in FILE\n"
          "  -t, --threads N       threads (default: the physical cores)\n"
          "  -c, --ctx-size N      context size in tokens (default: the model's)\n"
          "  -ngl, --gpu-layers N  run the last N layers on the Vulkan device (default 0;\n"
          "                        auto: as many as fit its memory)\n"
          "  --gpu-device N        the Vulkan device numbered N by 'info --devices' (default: the\n"
          "                        best one)\n"
          "  --enable-thinking B   true or false: the template's enable_thinking (default: unset)\n"
          "  --remote URL          chat with an OpenAI-compatible server instead (-m is the server's\n"
          "                        model, default its first; not with --ids or --session)\n"
          "  --api-key KEY         the server's API key (with --remote)\n"
          "  sampling (greedy unless --temp says otherwise, as for generate):\n");
  cli_sampling_print_help(stderr, defaults);
}

int
cli_chat(int argc, char **argv)
{
  const char *model_path = NULL, *turns_path = NULL, *messages_path = NULL, *system = NULL;
  const char *session_path = NULL, *remote_url = NULL, *api_key = NULL;
  long long n_predict = -1, threads = 0, n_ctx = 0, gpu_layers = 0, gpu_device = -1;
  HnChatThinking thinking = HN_CHAT_THINKING_UNSET;
  bool ids = false;
  CliSamplingOptions sopts;
  cli_sampling_init(&sopts); /* greedy unless --temp is given (see cli-sampling.c) */
  int status = 1;
  CliChatModel cm = { 0 };
  char *system_owned = NULL, *turns = NULL, *line = NULL;
  Chat c = { 0 };
  HnError err = { 0 };

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ids") == 0) {
      ids = true;
      continue;
    }
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(&sopts);
      status = 0;
      goto out;
    }
    const char *val = NULL;
    int found = cli_next_option(argc, argv, &i, value_options, HN_ARRAY_LEN(value_options), &sopts, "chat", &val);
    if (found == CLI_OPTION_ERROR)
      goto out;
    if (found == CLI_OPTION_SAMPLING)
      continue;
    switch (found) {
    case OPT_MODEL: model_path = val; break;
    case OPT_FILE: turns_path = val; break;
    case OPT_MESSAGES: messages_path = val; break;
    case OPT_SYSTEM: system = val; break;
    case OPT_SESSION: session_path = val; break;
    case OPT_REMOTE: remote_url = val; break;
    case OPT_API_KEY: api_key = val; break;
    case OPT_N:
      if (!cli_parse_int(val, -1, 1 << 24, &n_predict)) {
        cli_fail("invalid token count '%s'", val);
        goto out;
      }
      break;
    case OPT_THREADS:
      if (!cli_parse_run_option(CLI_RUN_THREADS, val, &threads))
        goto out;
      break;
    case OPT_GPU_DEVICE:
      if (!cli_parse_run_option(CLI_RUN_GPU_DEVICE, val, &gpu_device))
        goto out;
      break;
    case OPT_GPU_LAYERS:
      if (!cli_parse_run_option(CLI_RUN_GPU_LAYERS, val, &gpu_layers))
        goto out;
      break;
    case OPT_CTX:
      if (!cli_parse_run_option(CLI_RUN_CTX, val, &n_ctx))
        goto out;
      break;
    case OPT_THINKING:
      if (strcmp(val, "true") == 0)
        thinking = HN_CHAT_THINKING_ON;
      else if (strcmp(val, "false") == 0)
        thinking = HN_CHAT_THINKING_OFF;
      else {
        cli_fail("--enable-thinking takes true or false, not '%s'", val);
        goto out;
      }
      break;
    default: break;
    }
  }
  if (api_key && !remote_url) {
    cli_fail("--api-key needs --remote URL");
    goto out;
  }
  if (remote_url && (ids || session_path)) {
    cli_fail("%s is not available with --remote: a server's tokens and cache are its own",
             ids ? "--ids" : "--session");
    goto out;
  }
#ifndef HN_CLI_REMOTE
  if (remote_url) {
    cli_fail("this hanashi-cli was built without libsoup: --remote is not available");
    goto out;
  }
#endif
  if (!model_path && !remote_url) {
    cli_fail("usage: hanashi-cli chat -m MODEL [--system TEXT] [--messages FILE.json] [-f FILE] [--session FILE]");
    goto out;
  }
  size_t turns_len = 0;
  if (turns_path && !(turns = cli_read_file(turns_path, &turns_len, &err))) {
    cli_fail_error(&err);
    goto out;
  }
  if (messages_path && !load_messages(&c, messages_path, system != NULL, &system_owned))
    goto out;
  if (system_owned)
    system = system_owned;
#ifdef HN_CLI_REMOTE
  if (remote_url) {
    sopts.params.max_new_tokens = (int32_t) n_predict;
    if (!(c.remote = cli_remote_open(remote_url, api_key, model_path)) || !cli_remote_prepare(c.remote, &sopts))
      goto out;
    c.sopts = &sopts;
    hn_chat_request_init(&c.req);
    c.req.system = system;
    c.req.thinking = thinking;
    goto converse;
  }
#endif
  if (!cli_chat_model_load(&cm, model_path) || !cli_chat_model_start(&cm, &sopts, n_predict, n_ctx, threads, gpu_layers, gpu_device, false))
    goto out;
  c.chat = cm.chat;
  c.model = &cm;

  c.ids = ids;
  c.session = session_path != NULL;
  hn_chat_request_init(&c.req);
  c.req.system = system;
  c.req.thinking = thinking;
  c.req.sampler = &sopts.params;
  c.req.grammar = cm.grammar;
  c.req.cfg_negative = sopts.cfg_negative_prompt;
  c.req.cfg_scale = sopts.cfg_scale;
  c.req.conversation = "chat"; /* a new chat holds none: the session file is read */
  c.req.session_path = session_path;

#ifdef HN_CLI_REMOTE
converse:
#endif
  if (c.conv.n > 0 && strcmp(c.conv.items[c.conv.n - 1].role, "user") == 0 && !reply(&c))
    goto out;
  if (turns) {
    for (size_t from = 0; from < turns_len;) {
      const char *end = memchr(turns + from, '\n', turns_len - from);
      size_t len = end ? (size_t) (end - (turns + from)) : turns_len - from;
      if (!user_turn(&c, turns + from, len))
        goto out;
      from += len + 1;
    }
  } else if (!messages_path) {
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, stdin)) >= 0)
      if (!user_turn(&c, line, (size_t) len))
        goto out;
  }
  status = 0;
out:
  free(line);
  free(turns);
  free(system_owned);
  conversation_clear(&c.conv);
#ifdef HN_CLI_REMOTE
  cli_remote_close(c.remote);
#endif
  cli_chat_model_clear(&cm);
  cli_sampling_clear(&sopts);
  return status;
}

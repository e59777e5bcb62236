/* hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N [--ids | --probs K]
 *   [-t THREADS] [-c CTX] [--session FILE] [--print-params] [sampling options] — greedy
 *   unless --temp says otherwise.  -f reads the prompt from a file, byte for byte.  Any prompt that
 *   fits the context is accepted; a longer one is refused with its length and the context's.  With --session, the KV state of an earlier run is reused for the common
 *   prefix of its tokens and this prompt, and the new state is saved after.  The prompt
 *   runs through the conversation core (hn-chat.h) as tokens, so reuse and what the saved
 *   session holds are the core's, the same as for `chat` and the app.
 *
 * --probs K prints, instead of the text, one JSON object per sampled token and line (the
 * end-of-generation token included):
 *   {"token": ID, "text": "…", "candidates": [{"token": ID, "logprob": L, "p": P,
 *    "removed_by": STAGE}, …]}
 * the K most likely candidates of the model's raw distribution, highest first: logprob
 * the raw log-softmax, p the probability after the whole sampler chain (0 when removed),
 * removed_by the stage's name (hn_sampler_stage_name) or null.  A contract, like the
 * other outputs: see docs/cli.md.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "cli-sampling.h"
#include "hn-chat.h"
#ifdef HN_CLI_REMOTE
#include "cli-remote.h"
#endif
#include "hn-json.h"

int cli_generate(int argc, char **argv);

typedef struct {
  bool ids;
  bool probs;
  const HnVocab *vocab;
  bool session;
  char *save_error; /* why the session file could not be written */
} Output;

static bool
on_text(void *user_data, const char *text, size_t len, int32_t token)
{
  Output *o = user_data;
  (void) token;
  if (!o->ids && !o->probs) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
  }
  return true;
}

/* One JSON line per sampled token; the token's own bytes, with whatever is not whole
 * UTF-8 in them shown as U+FFFD (a JSON string cannot hold raw bytes). */
static void
on_probs(void *user_data, const HnTokenProbs *probs)
{
  Output *o = user_data;
  size_t len = 0;
  const char *bytes = hn_token_bytes(o->vocab, probs->token, &len);
  char *text = hn_json_quote(bytes ? bytes : "", bytes ? len : 0, false, NULL);
  printf("{\"token\": %d, \"text\": %s, \"candidates\": [", probs->token, text ? text : "\"\"");
  free(text);
  for (uint32_t i = 0; i < probs->n_candidates; i++) {
    const HnProbCandidate *c = &probs->candidates[i];
    const char *stage = hn_sampler_stage_name((HnSamplerStage) c->removed_by);
    printf("%s{\"token\": %d, \"logprob\": %.9g, \"p\": %.9g, \"removed_by\": ", i ? ", " : "", c->id,
           (double) c->logprob, (double) c->p);
    if (stage)
      printf("\"%s\"}", stage);
    else
      fputs("null}", stdout);
  }
  fputs("]}\n", stdout);
  fflush(stdout);
}

static void
on_warning(void *user_data, HnChatWarning code, const char *message)
{
  Output *o = user_data;
  switch (code) {
  case HN_CHAT_WARNING_SESSION_MISSING:
  case HN_CHAT_WARNING_SESSION_NOT_USED:
    /* an unusable file is not an error: say why and evaluate everything */
    fprintf(stderr, "session: file not used (%s)\n", message);
    break;
  case HN_CHAT_WARNING_SESSION_NOT_SAVED:
    free(o->save_error);
    o->save_error = strdup(message);
    break;
  default:
    cli_notice(message);
    break;
  }
}

static void
on_reuse(void *user_data, const HnChatReuse *reuse)
{
  Output *o = user_data;
  if (o->session)
    fprintf(stderr, "session: reused %zu of %zu prompt tokens\n", reuse->n_cached, reuse->n_prompt);
}

/* Options taking a value; the sampling options are parsed by cli-sampling.c. */
enum { OPT_MODEL, OPT_PROMPT, OPT_FILE, OPT_N, OPT_TOKENS, OPT_THREADS, OPT_CTX, OPT_SESSION, OPT_REMOTE, OPT_API_KEY,
       OPT_PROBS, OPT_GPU_LAYERS, OPT_GPU_DEVICE };
static const CliValueOption value_options[] = {
  { "-m", "--model", OPT_MODEL },
  { "-p", "--prompt", OPT_PROMPT },
  { "-f", "--file", OPT_FILE },
  { "-n", "--n-predict", OPT_N },
  { NULL, "--tokens", OPT_TOKENS },
  { "-t", "--threads", OPT_THREADS },
  { "-c", "--ctx-size", OPT_CTX },
  { NULL, "--session", OPT_SESSION },
  { NULL, "--remote", OPT_REMOTE },
  { NULL, "--api-key", OPT_API_KEY },
  { NULL, "--probs", OPT_PROBS },
  { "-ngl", "--gpu-layers", OPT_GPU_LAYERS },
  { NULL, "--gpu-device", OPT_GPU_DEVICE },
};

static void
usage(const CliSamplingOptions *defaults)
{
  fprintf(stderr, "usage: hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N "
                  "[--ids | --probs K] [-t THREADS] [-c CTX] [-ngl N|auto] [--gpu-device N] [--session FILE] [--print-params] [sampling options]\n"
                  "  -ngl, --gpu-layers N         run the last N layers on the Vulkan device (default 0;\n"
                  "                               auto: as many as fit its memory)\n"
                  "  --gpu-device N               the Vulkan device numbered N by 'info --devices' (default:\n"
                  "                               the best one)\n"
                  "  -f, --file FILE              read the prompt from FILE (exactly its bytes)\n"
                  "  --probs K                    instead of the text, one JSON line per token with its K (1-%d) most\n"
                  "                               likely candidates and what the sampler did to them\n"
                  "  --print-params               print the sampling parameters in use to stderr first\n"
                  "  --remote URL                 generate on an OpenAI-compatible server instead (the prompt is\n"
                  "                               sent as one user message; -m is the server's model, default its\n"
                  "                               first; not with --tokens, --ids, --probs or --session)\n"
                  "  --api-key KEY                the server's API key (with --remote)\n",
          HN_PROBS_MAX_K);
  cli_sampling_print_help(stderr, defaults);
}

/* The generation needs room for at least one new token after the prompt.  When the prompt
 * does not fit, say exactly how long it is, how much the context holds and what would help. */
static bool
prompt_fits(size_t n_tokens, const char *what, const HnContext *ctx, const HnModel *model)
{
  int n_ctx = hn_context_n_ctx(ctx), n_ctx_train = hn_model_n_ctx_train(model);
  if (n_tokens < (size_t) n_ctx)
    return true;
  if (n_ctx < n_ctx_train)
    cli_fail("the %s is %zu tokens long, but the context holds %d tokens and needs room for at least one new "
             "token: give a larger context with -c (this model supports up to %d tokens) or a shorter %s",
             what, n_tokens, n_ctx, n_ctx_train, what);
  else
    cli_fail("the %s is %zu tokens long, but the context holds %d tokens (the most this model supports) and "
             "needs room for at least one new token: shorten the %s to at most %d tokens",
             what, n_tokens, n_ctx, what, n_ctx - 1);
  return false;
}

/* generate --remote: the prompt as one user message to the server's chat completions. */
static int
generate_remote(const char *url, const char *api_key, const char *model, const char *prompt, const char *prompt_file,
                const char *tokens, bool ids, const char *session_path, int32_t n_predict, CliSamplingOptions *sopts,
                bool print_params)
{
#ifdef HN_CLI_REMOTE
  if (!url)
    return cli_fail("--api-key needs --remote URL");
  if (tokens || ids || session_path)
    return cli_fail("%s is not available with --remote: a server's tokens and cache are its own",
                    tokens ? "--tokens" : ids ? "--ids" : "--session");
  if ((!!prompt + !!prompt_file) != 1 || n_predict < 0)
    return cli_fail("usage: hanashi-cli generate --remote URL [--api-key KEY] [-m MODEL] (-p PROMPT | -f FILE) -n N");
  char *file_text = NULL;
  if (prompt_file) {
    HnError err = { 0 };
    if (!(file_text = cli_read_file(prompt_file, NULL, &err)))
      return cli_fail_error(&err);
    prompt = file_text;
  }
  int status = 1;
  sopts->params.max_new_tokens = n_predict;
  CliRemote *remote = cli_remote_open(url, api_key, model);
  if (remote && cli_remote_prepare(remote, sopts)) {
    if (print_params)
      cli_sampling_print_params(stderr, sopts);
    HnChatMessage message = { "user", prompt };
    if (cli_remote_reply(remote, NULL, &message, 1, HN_CHAT_THINKING_UNSET, sopts, NULL)) {
      putchar('\n');
      status = 0;
    }
  }
  cli_remote_close(remote);
  free(file_text);
  return status;
#else
  (void) url; (void) api_key; (void) model; (void) prompt; (void) prompt_file; (void) tokens; (void) ids;
  (void) session_path; (void) n_predict; (void) sopts; (void) print_params;
  return cli_fail("this hanashi-cli was built without libsoup: --remote is not available");
#endif
}

int
cli_generate(int argc, char **argv)
{
  const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *tokens = NULL, *session_path = NULL;
  const char *remote_url = NULL, *api_key = NULL;
  char *file_text = NULL;
  size_t prompt_len = 0;
  long long n_predict = -1, threads = 0, n_ctx = 0, probs_k = 0, gpu_layers = 0, gpu_device = -1;
  bool ids = false;
  CliSamplingOptions sopts;
  cli_sampling_init(&sopts); /* greedy unless --temp is given (see cli-sampling.c) */
  bool print_params = false;
  int status = 1;
  CliChatModel cm = { 0 };
  int32_t *prompt_ids = NULL, *negative = NULL;
  size_t n_prompt = 0;
  Output out = { 0 };
  HnError err = { 0 };

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ids") == 0) {
      ids = true;
      continue;
    }
    if (strcmp(argv[i], "--print-params") == 0) {
      print_params = true;
      continue;
    }
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(&sopts);
      status = 0;
      goto out;
    }
    const char *val = NULL;
    int found = cli_next_option(argc, argv, &i, value_options, HN_ARRAY_LEN(value_options), &sopts, "generate", &val);
    if (found == CLI_OPTION_ERROR)
      goto out;
    if (found == CLI_OPTION_SAMPLING)
      continue;
    switch (found) {
    case OPT_MODEL: model_path = val; break;
    case OPT_PROMPT: prompt = val; break;
    case OPT_FILE: prompt_file = val; break;
    case OPT_TOKENS: tokens = val; break;
    case OPT_SESSION: session_path = val; break;
    case OPT_REMOTE: remote_url = val; break;
    case OPT_API_KEY: api_key = val; break;
    case OPT_N:
      if (!cli_parse_int(val, 0, 1 << 24, &n_predict)) {
        cli_fail("invalid token count '%s'", val);
        goto out;
      }
      break;
    case OPT_THREADS:
      if (!cli_parse_run_option(CLI_RUN_THREADS, val, &threads))
        goto out;
      break;
    case OPT_PROBS:
      if (!cli_parse_int(val, 1, HN_PROBS_MAX_K, &probs_k)) {
        cli_fail("invalid candidate count '%s' for --probs: give a number from 1 to %d", val, HN_PROBS_MAX_K);
        goto out;
      }
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
    default: break;
    }
  }
  if ((remote_url || api_key) && probs_k > 0) {
    cli_fail("--probs is not available with --remote: the sampler's record stays on the server");
    goto out;
  }
  if (remote_url || api_key) {
    status = generate_remote(remote_url, api_key, model_path, prompt, prompt_file, tokens, ids, session_path,
                             (int32_t) n_predict, &sopts, print_params);
    goto out;
  }
  if (!model_path || (!!prompt + !!prompt_file + !!tokens) != 1 || n_predict < 0) {
    cli_fail("usage: hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N [--ids]");
    goto out;
  }
  if (ids && probs_k > 0) {
    cli_fail("--ids and --probs cannot be combined: --probs already prints every token id");
    goto out;
  }
  if (prompt_file) {
    if (!(file_text = cli_read_file(prompt_file, &prompt_len, &err))) {
      cli_fail_error(&err);
      goto out;
    }
    prompt = file_text;
  } else if (prompt) {
    prompt_len = strlen(prompt);
  }
  if (!cli_chat_model_load(&cm, model_path))
    goto out;
  const HnModel *model = cm.model;
  const HnVocab *vocab = cm.vocab;
  if (tokens) {
    if (!cli_parse_ids(tokens, &prompt_ids, &n_prompt) || n_prompt == 0) {
      cli_fail("invalid token list '%s'", tokens);
      goto out;
    }
    for (size_t i = 0; i < n_prompt; i++)
      if (prompt_ids[i] < 0 || prompt_ids[i] >= hn_model_n_vocab(model)) {
        cli_fail("token id %d out of range (vocabulary of %d)", prompt_ids[i], hn_model_n_vocab(model));
        goto out;
      }
  } else {
    if (!cli_tokenize_all(vocab, prompt, prompt_len, &prompt_ids, &n_prompt, &err)) {
      cli_fail_error(&err);
      goto out;
    }
    if (n_prompt == 0) {
      cli_fail("the prompt gives no tokens");
      goto out;
    }
  }
  if (!cli_chat_model_start(&cm, &sopts, n_predict, n_ctx, threads, gpu_layers, gpu_device, print_params))
    goto out;
  HnChat *chat = cm.chat;
  const HnContext *ctx = hn_chat_context(chat);
  if (!prompt_fits(n_prompt, "prompt", ctx, model))
    goto out;
  size_t n_negative = 0;
  if (sopts.cfg_negative_prompt && sopts.cfg_scale != 1.0f) {
    if (!cli_tokenize_all(vocab, sopts.cfg_negative_prompt, strlen(sopts.cfg_negative_prompt), &negative,
                          &n_negative, &err)) {
      cli_fail_error(&err);
      goto out;
    }
    if (!prompt_fits(n_negative, "negative prompt", ctx, model))
      goto out;
  }
  out.ids = ids;
  out.probs = probs_k > 0;
  out.vocab = vocab;
  out.session = session_path != NULL;
  HnChatRequest req;
  hn_chat_request_init(&req);
  req.prompt_tokens = prompt_ids;
  req.n_prompt_tokens = n_prompt;
  req.negative_tokens = negative;
  req.n_negative_tokens = n_negative;
  req.cfg_scale = sopts.cfg_scale;
  req.sampler = &sopts.params;
  req.grammar = cm.grammar;
  req.conversation = "generate"; /* a new chat holds none: the session file is read */
  req.session_path = session_path;
  req.probs_k = (int32_t) probs_k;
  HnChatCallbacks callbacks = { .on_text = on_text, .on_warning = on_warning, .on_reuse = on_reuse,
                                .on_probs = probs_k > 0 ? on_probs : NULL, .user_data = &out };
  HnChatStats result;
  bool generated = hn_chat_generate(chat, &req, &callbacks, &result, &err);
  cli_chat_model_notice_device(&cm);
  if (!generated) {
    cli_fail_error(&err);
    goto out;
  }
  if (result.grammar_truncated_steps > 0) {
    char notice[200];
    snprintf(notice, sizeof notice,
             "the grammar was too ambiguous to follow in full at %zu steps; some continuations "
             "it allows may have been refused",
             result.grammar_truncated_steps);
    cli_notice(notice);
  }
  if (out.save_error) {
    cli_fail("cannot save the session: %s", out.save_error);
    goto out;
  }
  if (ids) {
    size_t n_reply = 0;
    const int32_t *reply = hn_chat_reply_tokens(chat, &n_reply);
    putchar('[');
    for (size_t i = 0; i < n_reply; i++)
      printf(i ? ",%d" : "%d", reply[i]);
    printf("]\n");
  } else if (!out.probs) {
    putchar('\n');
  }
  status = 0;
out:
  free(out.save_error);
  free(prompt_ids);
  free(negative);
  free(file_text);
  cli_chat_model_clear(&cm);
  cli_sampling_clear(&sopts);
  return status;
}

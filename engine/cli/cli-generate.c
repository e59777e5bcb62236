/* hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N [--ids]
 *   [-t THREADS] [-c CTX] [--session FILE] [--print-params] [sampling options] — greedy
 *   unless --temp says otherwise.  -f reads the prompt from a file, byte for byte.  Any prompt that
 *   fits the context is accepted; a longer one is refused with its length and the context's.  With --session, the KV state of an earlier run is reused for the common
 *   prefix of its tokens and this prompt, and the new state is saved after.  The prompt
 *   runs through the conversation core (hn-chat.h) as tokens, so reuse and what the saved
 *   session holds are the core's, the same as for `chat` and the app. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "cli-sampling.h"
#include "hn-chat.h"

int cli_generate(int argc, char **argv);

typedef struct {
  bool ids;
  bool session;
  char *save_error; /* why the session file could not be written */
} Output;

static bool
on_text(void *user_data, const char *text, size_t len, int32_t token)
{
  Output *o = user_data;
  (void) token;
  if (!o->ids) {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
  }
  return true;
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
enum { OPT_MODEL, OPT_PROMPT, OPT_FILE, OPT_N, OPT_TOKENS, OPT_THREADS, OPT_CTX, OPT_SESSION, OPT_GPU_LAYERS };
static const struct {
  const char *short_name, *long_name;
  int id;
} value_options[] = {
  { "-m", "--model", OPT_MODEL },
  { "-p", "--prompt", OPT_PROMPT },
  { "-f", "--file", OPT_FILE },
  { "-n", "--n-predict", OPT_N },
  { NULL, "--tokens", OPT_TOKENS },
  { "-t", "--threads", OPT_THREADS },
  { "-c", "--ctx-size", OPT_CTX },
  { NULL, "--session", OPT_SESSION },
  { "-ngl", "--gpu-layers", OPT_GPU_LAYERS },
};

static void
usage(const CliSamplingOptions *defaults)
{
  fprintf(stderr, "usage: hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N [--ids] "
                  "[-t THREADS] [-c CTX] [-ngl N] [--session FILE] [--print-params] [sampling options]\n"
                  "  -ngl, --gpu-layers N         run the last N layers on the Vulkan device (default 0)\n"
                  "  -f, --file FILE              read the prompt from FILE (exactly its bytes)\n"
                  "  --print-params               print the sampling parameters in use to stderr first\n");
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

int
cli_generate(int argc, char **argv)
{
  const char *model_path = NULL, *prompt = NULL, *prompt_file = NULL, *tokens = NULL, *session_path = NULL;
  char *file_text = NULL;
  size_t prompt_len = 0;
  long long n_predict = -1, threads = 0, n_ctx = 0, gpu_layers = 0;
  bool ids = false;
  CliSamplingOptions sopts;
  cli_sampling_init(&sopts); /* greedy unless --temp is given (see cli-sampling.c) */
  bool print_params = false;
  int status = 1;
  HnModel *model = NULL;
  HnVocab *vocab = NULL;
  HnChatModel *chat_model = NULL;
  HnChat *chat = NULL;
  HnGrammar *grammar = NULL;
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
    int found = -1;
    for (size_t k = 0; k < HN_ARRAY_LEN(value_options); k++)
      if ((value_options[k].short_name && strcmp(argv[i], value_options[k].short_name) == 0) ||
          strcmp(argv[i], value_options[k].long_name) == 0)
        found = value_options[k].id;
    if (found < 0) {
      int r = cli_sampling_parse_arg(&sopts, argc, argv, &i);
      if (r < 0)
        goto out;
      if (r == 0) {
        cli_fail("unknown option '%s' (try 'hanashi-cli generate --help')", argv[i]);
        goto out;
      }
      i--; /* the sampling parser moved past its option */
      continue;
    }
    if (i + 1 >= argc) {
      cli_fail("option '%s' needs a value", argv[i]);
      goto out;
    }
    const char *val = argv[++i];
    switch (found) {
    case OPT_MODEL: model_path = val; break;
    case OPT_PROMPT: prompt = val; break;
    case OPT_FILE: prompt_file = val; break;
    case OPT_TOKENS: tokens = val; break;
    case OPT_SESSION: session_path = val; break;
    case OPT_N:
      if (!cli_parse_int(val, 0, 1 << 24, &n_predict)) {
        cli_fail("invalid token count '%s'", val);
        goto out;
      }
      break;
    case OPT_THREADS:
      if (!cli_parse_int(val, 1, 1024, &threads)) {
        cli_fail("invalid thread count '%s'", val);
        goto out;
      }
      break;
    case OPT_GPU_LAYERS:
      if (!cli_parse_int(val, 0, 1 << 20, &gpu_layers)) {
        cli_fail("invalid layer count '%s'", val);
        goto out;
      }
      break;
    case OPT_CTX:
      if (!cli_parse_int(val, 1, 1 << 24, &n_ctx)) {
        cli_fail("invalid context size '%s'", val);
        goto out;
      }
      break;
    default: break;
    }
  }
  if (!model_path || (!!prompt + !!prompt_file + !!tokens) != 1 || n_predict < 0) {
    cli_fail("usage: hanashi-cli generate -m MODEL (-p PROMPT | -f FILE | --tokens 1,2,3) -n N [--ids]");
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
  if (!(model = hn_model_load(model_path, NULL, &err)) ||
      !(vocab = hn_vocab_load(hn_model_gguf(model), &err))) {
    cli_fail_error(&err);
    goto out;
  }
  cli_notice(hn_vocab_notice(vocab));
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
  sopts.params.max_new_tokens = (int32_t) n_predict;
  if (!cli_sampling_finish(&sopts, hn_model_n_vocab(model)) || !cli_sampling_load_grammar(&sopts, &grammar))
    goto out;
  if (print_params)
    cli_sampling_print_params(stderr, &sopts);
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = (int) n_ctx;
  cp.n_threads = (int) threads;
  cp.n_seq_max = 2;
  cp.n_gpu_layers = (int) gpu_layers;
  if (!(chat_model = hn_chat_model_new(model, vocab, &err)) || !(chat = hn_chat_new(chat_model, &cp, &err)) ||
      (grammar && !hn_chat_model_grammar_vocab(chat_model, &err))) {
    cli_fail_error(&err);
    goto out;
  }
  const HnContext *ctx = hn_chat_context(chat);
  cli_notice(hn_context_notice(ctx));
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
  out.session = session_path != NULL;
  HnChatRequest req;
  hn_chat_request_init(&req);
  req.prompt_tokens = prompt_ids;
  req.n_prompt_tokens = n_prompt;
  req.negative_tokens = negative;
  req.n_negative_tokens = n_negative;
  req.cfg_scale = sopts.cfg_scale;
  req.sampler = &sopts.params;
  req.grammar = grammar;
  req.conversation = "generate"; /* a new chat holds none: the session file is read */
  req.session_path = session_path;
  HnChatCallbacks callbacks = { .on_text = on_text, .on_warning = on_warning, .on_reuse = on_reuse,
                                .user_data = &out };
  HnChatStats result;
  if (!hn_chat_generate(chat, &req, &callbacks, &result, &err)) {
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
  } else {
    putchar('\n');
  }
  status = 0;
out:
  free(out.save_error);
  free(prompt_ids);
  free(negative);
  free(file_text);
  hn_chat_free(chat);
  hn_chat_model_free(chat_model);
  hn_grammar_free(grammar);
  hn_vocab_free(vocab);
  hn_model_free(model);
  cli_sampling_clear(&sopts);
  return status;
}

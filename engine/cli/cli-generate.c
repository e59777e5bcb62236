/* hanashi-cli generate -m MODEL (-p PROMPT | --tokens 1,2,3) -n N [--ids] [-t THREADS]
 *   [-c CTX] [sampling options] — greedy unless a sampling option says otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-common.h"
#include "cli-sampling.h"
#include "hn-generate-model.h"

int cli_generate(int argc, char **argv);

typedef struct {
  bool ids;
  int32_t *out;
  size_t n_out, cap;
} Output;

static bool
on_token(int32_t token, const char *text, size_t len, void *user_data)
{
  Output *o = user_data;
  if (o->ids) {
    if (token >= 0 && o->n_out < o->cap)
      o->out[o->n_out++] = token;
  } else {
    fwrite(text, 1, len, stdout);
    fflush(stdout);
  }
  return true;
}

/* Options taking a value; the sampling options are parsed by cli-sampling.c. */
enum { OPT_MODEL, OPT_PROMPT, OPT_N, OPT_TOKENS, OPT_THREADS, OPT_CTX };
static const struct {
  const char *short_name, *long_name;
  int id;
} value_options[] = {
  { "-m", "--model", OPT_MODEL },
  { "-p", "--prompt", OPT_PROMPT },
  { "-n", "--n-predict", OPT_N },
  { NULL, "--tokens", OPT_TOKENS },
  { "-t", "--threads", OPT_THREADS },
  { "-c", "--ctx-size", OPT_CTX },
};

static void
usage(void)
{
  fprintf(stderr, "usage: hanashi-cli generate -m MODEL (-p PROMPT | --tokens 1,2,3) -n N [--ids] "
                  "[-t THREADS] [-c CTX] [sampling options]\n");
  cli_sampling_print_help(stderr);
}

int
cli_generate(int argc, char **argv)
{
  const char *model_path = NULL, *prompt = NULL, *tokens = NULL;
  long long n_predict = -1, threads = 0, n_ctx = 0;
  bool ids = false;
  CliSamplingOptions sopts;
  cli_sampling_init(&sopts);
  sopts.params.temperature = 0.0f; /* greedy by default */
  int status = 1;
  HnModel *model = NULL;
  HnVocab *vocab = NULL;
  HnContext *ctx = NULL;
  HnGrammar *grammar = NULL;
  HnGrammarVocab *gvocab = NULL;
  int32_t *prompt_ids = NULL;
  size_t n_prompt = 0;
  HnGenModelBackend backend = { 0 };
  Output out = { 0 };
  HnError err = { 0 };

  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ids") == 0) {
      ids = true;
      continue;
    }
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage();
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
    case OPT_TOKENS: tokens = val; break;
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
    case OPT_CTX:
      if (!cli_parse_int(val, 1, 1 << 24, &n_ctx)) {
        cli_fail("invalid context size '%s'", val);
        goto out;
      }
      break;
    default: break;
    }
  }
  if (!model_path || (!prompt == !tokens) || n_predict < 0) {
    cli_fail("usage: hanashi-cli generate -m MODEL (-p PROMPT | --tokens 1,2,3) -n N [--ids]");
    goto out;
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
    size_t len = strlen(prompt);
    int32_t cap = (int32_t) (len + 8 < (size_t) hn_model_n_ctx_train(model) * 4 ? len + 8 : (size_t) hn_model_n_ctx_train(model) * 4);
    prompt_ids = malloc((size_t) cap * sizeof *prompt_ids);
    int32_t n = prompt_ids ? hn_tokenize(vocab, prompt, len, true, true, prompt_ids, cap, &err) : -1;
    if (n < 0) {
      cli_fail_error(&err);
      goto out;
    }
    n_prompt = (size_t) n;
    if (n_prompt == 0) {
      cli_fail("the prompt gives no tokens");
      goto out;
    }
  }
  sopts.params.max_new_tokens = (int32_t) n_predict;
  if (!cli_sampling_finish(&sopts, hn_model_n_vocab(model)) || !cli_sampling_load_grammar(&sopts, &grammar))
    goto out;
  HnContextParams cp = hn_context_default_params();
  cp.n_ctx = (int) n_ctx;
  cp.n_threads = (int) threads;
  cp.n_seq_max = 2;
  if (!(ctx = hn_context_new(model, &cp, &err)) || !hn_gen_model_backend_init(&backend, ctx, vocab, &err) ||
      (grammar && !(gvocab = hn_gen_grammar_vocab_new(vocab, &err)))) {
    cli_fail_error(&err);
    goto out;
  }
  cli_notice(hn_context_notice(ctx));
  int32_t *negative = NULL;
  size_t n_negative = 0;
  if (sopts.cfg_negative_prompt && sopts.cfg_scale != 1.0f) {
    size_t len = strlen(sopts.cfg_negative_prompt);
    negative = malloc((len + 8) * sizeof *negative);
    int32_t n = negative ? hn_tokenize(vocab, sopts.cfg_negative_prompt, len, true, true, negative,
                                       (int32_t) (len + 8), &err) : -1;
    if (n < 0) {
      free(negative);
      cli_fail_error(&err);
      goto out;
    }
    n_negative = (size_t) n;
  }
  out.ids = ids;
  out.cap = (size_t) n_predict;
  out.out = malloc((out.cap ? out.cap : 1) * sizeof *out.out);
  HnGenRequest req;
  hn_gen_request_init(&req);
  req.prompt = prompt_ids;
  req.n_prompt = n_prompt;
  req.negative = negative;
  req.n_negative = n_negative;
  req.cfg_scale = sopts.cfg_scale;
  req.sampler = &sopts.params;
  req.grammar = grammar;
  req.grammar_vocab = gvocab;
  req.on_token = on_token;
  req.user_data = &out;
  HnGenResult result;
  bool ok = out.out && hn_generate_with_backend(&backend.backend, &req, &result, &err);
  free(negative);
  if (!ok) {
    if (!out.out)
      cli_fail("out of memory");
    else
      cli_fail_error(&err);
    goto out;
  }
  if (ids) {
    putchar('[');
    for (size_t i = 0; i < out.n_out; i++)
      printf(i ? ",%d" : "%d", out.out[i]);
    printf("]\n");
  } else {
    putchar('\n');
  }
  status = 0;
out:
  free(out.out);
  free(prompt_ids);
  hn_gen_model_backend_clear(&backend);
  hn_grammar_vocab_free(gvocab);
  hn_grammar_free(grammar);
  hn_context_free(ctx);
  hn_vocab_free(vocab);
  hn_model_free(model);
  cli_sampling_clear(&sopts);
  return status;
}

/* Several conversations decoded together (hn_chat_batch_*): on several test models, four
 * requests with different prompts, lengths, seeds and samplers (greedy, sampled, with
 * penalties, with CFG), joining at different steps and with prompts longer than a pass,
 * must give token for token what each gives alone on a fresh HnChat of the same context.
 * Then the same requests again on other sequences (their prefixes copied from the
 * sequences that hold them), and once more with one of them cancelled midway: the others
 * are not disturbed.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <string.h>

#include "hn-chat.h"

#define N_CTX 256 /* or the model's own, when smaller */
#define N_BATCH 32 /* small, so that long prompts take several passes */
#define N_REQ 4

typedef struct {
  const char *system;
  const char *user;
  float temperature;
  uint64_t seed;
  int32_t top_k;
  float repeat_penalty;
  float presence_penalty;
  const char *cfg_negative;
  int32_t max_tokens;
  int join_step; /* the batch step at which the request starts */
} Case;

/* A long user message: more tokens than one pass takes. */
#define LONG_TEXT \
  "Once upon a time there was a little dog who lived by the sea. Every morning he ran " \
  "along the beach."

static const Case cases[N_REQ] = {
  { NULL, "Hello there", 0.0f, 1, 0, 1.0f, 0.0f, NULL, 20, 0 },
  { "You are kind.", "Tell me a story about a cat.", 0.8f, 7, 40, 1.1f, 0.0f, NULL, 24, 0 },
  { NULL, LONG_TEXT, 1.0f, 42, 0, 1.0f, 0.5f, NULL, 16, 3 },
  { "Be brief.", "What is the sea?", 0.7f, 1234, 20, 1.0f, 0.0f, "Be long.", 18, 7 },
};

typedef struct {
  GString *text;
  GArray *tokens;
  int n_texts;
  int cancel_after; /* 0: never */
  HnChatReuse reuse;
} Sink;

static bool
sink_text (void *data, const char *text, size_t len, int32_t token)
{
  Sink *s = data;
  g_string_append_len (s->text, text, (gssize) len);
  (void) token;
  s->n_texts++;
  return true;
}

static bool
sink_cancelled (void *data)
{
  Sink *s = data;
  return s->cancel_after > 0 && s->n_texts >= s->cancel_after;
}

static void
sink_reuse (void *data, const HnChatReuse *reuse)
{
  ((Sink *) data)->reuse = *reuse;
}

/* CFG doubles what a prompt takes; stories260K's context (128) is too small for it */
static bool use_cfg;

typedef struct {
  HnSamplerParams sp;
  HnChatMessage msg;
  HnChatRequest req;
} Request;

static void
request_init (Request *r, const Case *c)
{
  hn_sampler_params_init (&r->sp);
  r->sp.temperature = c->temperature;
  r->sp.seed = c->seed;
  r->sp.top_k = c->top_k;
  r->sp.repeat_penalty = c->repeat_penalty;
  r->sp.presence_penalty = c->presence_penalty;
  r->sp.max_new_tokens = c->max_tokens;
  r->msg = (HnChatMessage) { "user", c->user };
  hn_chat_request_init (&r->req);
  r->req.system = c->system;
  r->req.messages = &r->msg;
  r->req.n_messages = 1;
  r->req.sampler = &r->sp;
  if (c->cfg_negative && use_cfg)
    {
      r->req.cfg_negative = c->cfg_negative;
      r->req.cfg_scale = 1.5f;
    }
}

static HnContextParams
context_params (void)
{
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = N_CTX;
  cp.n_batch = N_BATCH;
  cp.n_threads = 2;
  return cp;
}

/* Each request alone on a fresh chat: the reference. */
static void
reference_replies (HnChatModel *cm, GArray *tokens[N_REQ], GString *texts[N_REQ], HnGenStopReason reasons[N_REQ])
{
  HnContextParams cp = context_params ();
  for (int i = 0; i < N_REQ; i++)
    {
      HnError err = { 0 };
      HnChat *chat = hn_chat_new (cm, &cp, &err);
      g_assert_nonnull (chat);
      Request r;
      request_init (&r, &cases[i]);
      Sink sink = { g_string_new (NULL), NULL, 0, 0, { 0 } };
      HnChatCallbacks cb = { .on_text = sink_text, .user_data = &sink };
      HnChatStats stats;
      if (!hn_chat_generate (chat, &r.req, &cb, &stats, &err))
        g_error ("request %d alone: %s", i, err.message);
      size_t n;
      const int32_t *t = hn_chat_reply_tokens (chat, &n);
      g_assert_cmpuint (n, >, 0);
      tokens[i] = g_array_new (FALSE, FALSE, sizeof (int32_t));
      g_array_append_vals (tokens[i], t, (guint) n);
      texts[i] = sink.text;
      reasons[i] = stats.stop_reason;
      hn_chat_free (chat);
    }
}

/* Runs the cases on the batch, request i on sequence seq_of[i]; cancel_case (or -1) is
 * cancelled after its third piece of text.  Checks every other reply against the
 * reference; returns the stats. */
static void
run_batch (HnChatBatch *batch, const int seq_of[N_REQ], int cancel_case, GArray *ref_tokens[N_REQ],
           GString *ref_texts[N_REQ], const HnGenStopReason ref_reasons[N_REQ], HnChatStats stats[N_REQ],
           Sink sinks[N_REQ])
{
  Request reqs[N_REQ];
  HnChatCallbacks cbs[N_REQ];
  bool started[N_REQ] = { false }, finished[N_REQ] = { false };
  int n_finished = 0, step = 0, max_running = 0;
  for (int i = 0; i < N_REQ; i++)
    {
      request_init (&reqs[i], &cases[i]);
      sinks[i] = (Sink) { g_string_new (NULL), NULL, 0, i == cancel_case ? 3 : 0, { 0 } };
      cbs[i] = (HnChatCallbacks) { .on_text = sink_text, .is_cancelled = sink_cancelled,
                                   .on_reuse = sink_reuse, .user_data = &sinks[i] };
    }
  while (n_finished < N_REQ)
    {
      for (int i = 0; i < N_REQ; i++)
        if (!started[i] && step >= cases[i].join_step)
          {
            HnError err = { 0 };
            g_assert_false (hn_chat_batch_busy (batch, seq_of[i]));
            if (!hn_chat_batch_start (batch, seq_of[i], &reqs[i].req, &cbs[i], &err))
              g_error ("request %d in the batch: %s", i, err.message);
            started[i] = true;
          }
      int running = hn_chat_batch_n_running (batch);
      max_running = MAX (max_running, running);
      HnError err = { 0 };
      if (!hn_chat_batch_step (batch, &err))
        g_error ("step %d: %s", step, err.message);
      step++;
      g_assert_cmpint (step, <, 1000);
      for (int i = 0; i < N_REQ; i++)
        {
          if (!started[i] || finished[i])
            continue;
          bool done = false;
          HnError rerr = { 0 };
          bool ok = hn_chat_batch_take_result (batch, seq_of[i], &done, &stats[i], &rerr);
          if (!done)
            continue;
          if (!ok)
            g_error ("request %d in the batch: %s", i, rerr.message);
          finished[i] = true;
          n_finished++;
        }
    }
  /* they did run together */
  g_assert_cmpint (max_running, >=, 3);
  for (int i = 0; i < N_REQ; i++)
    {
      if (i == cancel_case)
        {
          g_assert_cmpint (stats[i].stop_reason, ==, HN_GEN_STOP_CANCELLED);
          g_assert_cmpuint (stats[i].n_generated, <, ref_tokens[i]->len);
          continue;
        }
      size_t n;
      const int32_t *t = hn_chat_batch_reply_tokens (batch, seq_of[i], &n);
      g_assert_cmpuint (n, ==, ref_tokens[i]->len);
      for (size_t k = 0; k < n; k++)
        if (t[k] != g_array_index (ref_tokens[i], int32_t, k))
          g_error ("request %d: token %zu is %d in the batch, %d alone", i, k, t[k],
                   g_array_index (ref_tokens[i], int32_t, k));
      g_assert_cmpstr (sinks[i].text->str, ==, ref_texts[i]->str);
      g_assert_cmpint (stats[i].stop_reason, ==, ref_reasons[i]);
    }
}

static void
sinks_clear (Sink sinks[N_REQ])
{
  for (int i = 0; i < N_REQ; i++)
    g_string_free (sinks[i].text, TRUE);
}

static void
test_model (gconstpointer data)
{
  const char *file = data;
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  g_autofree char *path = g_build_filename (dir, file, NULL);
  HnError err = { 0 };
  HnModel *model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  HnVocab *vocab = hn_vocab_load (hn_model_gguf (model), &err);
  g_assert_nonnull (vocab);
  HnChatModel *cm = hn_chat_model_new (model, vocab, &err);
  g_assert_nonnull (cm);
  use_cfg = hn_model_n_ctx_train (model) >= N_CTX;

  GArray *ref_tokens[N_REQ];
  GString *ref_texts[N_REQ];
  HnGenStopReason ref_reasons[N_REQ];
  reference_replies (cm, ref_tokens, ref_texts, ref_reasons);
  /* the requests differ from each other (else the comparison proves little) */
  g_assert_false (ref_tokens[0]->len == ref_tokens[1]->len &&
                  memcmp (ref_tokens[0]->data, ref_tokens[1]->data, ref_tokens[0]->len * sizeof (int32_t)) == 0);

  HnContextParams cp = context_params ();
  HnChatBatch *batch = hn_chat_batch_new (cm, &cp, N_REQ + 2, &err);
  g_assert_nonnull (batch);
  HnChatStats stats[N_REQ];
  Sink sinks[N_REQ];

  /* first round: a fresh cache */
  const int first[N_REQ] = { 0, 1, 2, 3 };
  run_batch (batch, first, -1, ref_tokens, ref_texts, ref_reasons, stats, sinks);
  for (int i = 0; i < N_REQ; i++)
    g_assert_cmpuint (stats[i].n_reused, ==, 0);
  sinks_clear (sinks);

  /* second round: every request on another sequence (the first two on the two that were
   * left idle); its prompt is held by the sequence it ran on before, and is copied from
   * there */
  const int rotated[N_REQ] = { 4, 5, 0, 1 };
  run_batch (batch, rotated, -1, ref_tokens, ref_texts, ref_reasons, stats, sinks);
  /* (a sliding-window cache hands on the rows of old tokens, so a prefix can only be
   * taken over while they are all there: not after these replies) */
  bool windowed = hn_kv_cache_window (hn_context_kv (hn_chat_batch_context (batch))) > 0;
  for (int i = 0; i < N_REQ && !windowed; i++)
    g_assert_cmpuint (stats[i].n_reused, ==, stats[i].n_prompt - 1);
  sinks_clear (sinks);

  /* third round: the second request is cancelled midway, the others go on unchanged */
  const int third[N_REQ] = { 1, 0, 3, 2 };
  run_batch (batch, third, 1, ref_tokens, ref_texts, ref_reasons, stats, sinks);
  sinks_clear (sinks);

  /* a session file is refused */
  Request r;
  request_init (&r, &cases[0]);
  r.req.session_path = "/nonexistent/session";
  g_assert_false (hn_chat_batch_start (batch, 0, &r.req, NULL, &err));
  g_assert_false (hn_chat_batch_busy (batch, 0));

  hn_chat_batch_free (batch);
  for (int i = 0; i < N_REQ; i++)
    {
      g_array_unref (ref_tokens[i]);
      g_string_free (ref_texts[i], TRUE);
    }
  hn_chat_model_free (cm);
  hn_vocab_free (vocab);
  hn_model_free (model);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  if (g_getenv ("HANASHI_TESTDATA") == NULL)
    {
      g_test_message ("HANASHI_TESTDATA is not set");
      return 77;
    }
  /* a trained F32 model, quantized ones of the panel and tile kernels (Q8_0, the K-quant
   * mix), another architecture and tokenizer, and a sliding window (gemma2) */
  static const char *const models[] = {
    "models/stories260K-f32.gguf",
    "models/quant-llama-v512-q8_0.gguf",
    "models/quant-llama-v512-q4_k_m.gguf",
    "models/tiny-qwen2-gpt2-q8_0.gguf",
    "arch/models/arch-gemma2-v512-q8_0.gguf",
  };
  for (size_t i = 0; i < G_N_ELEMENTS (models); i++)
    {
      g_autofree char *name = g_path_get_basename (models[i]);
      g_autofree char *test = g_strdup_printf ("/chat-batch/same-as-alone/%s", name);
      g_test_add_data_func (test, models[i], test_model);
    }
  return g_test_run ();
}

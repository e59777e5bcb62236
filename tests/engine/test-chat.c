/* The conversation core (hn-chat.h) on its own, on the tiny LLaMA test model: ChatML with
 * message ranges from the one ChatML writer; what a chat holds after a reply; two chats over
 * one chat model kept apart (the server's case); prefix reuse in token mode; session files;
 * stop reasons from the callbacks; errors with their codes; a forced reply prefix (a branch).
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

#include "hn-chat.h"
#include "hn-json.h"

#define MODEL "tiny-llama-spm-q8_0.gguf"

static HnModel *model;
static HnVocab *vocab;

static HnChatModel *
chat_model (void)
{
  HnError err = { 0 };
  HnChatModel *cm = hn_chat_model_new (model, vocab, &err);
  g_assert_nonnull (cm);
  return cm;
}

static HnChat *
new_chat (HnChatModel *cm, int n_ctx)
{
  HnError err = { 0 };
  HnContextParams cp = hn_context_default_params ();
  cp.n_ctx = n_ctx;
  cp.n_threads = 1;
  HnChat *chat = hn_chat_new (cm, &cp, &err);
  g_assert_nonnull (chat);
  return chat;
}

typedef struct {
  GString *text;
  int cancel_after;         /* is_cancelled says yes after this many texts (0: never) */
  int stop_after;           /* on_text says stop after this many texts (0: never) */
  int n_texts;
  GArray *warnings;         /* HnChatWarning */
  HnChatReuse reuse;
} Sink;

static bool
sink_text (void *data, const char *text, size_t len, int32_t token)
{
  Sink *s = data;
  g_assert_cmpint (token, >=, 0);
  g_string_append_len (s->text, text, (gssize) len);
  s->n_texts++;
  return s->stop_after == 0 || s->n_texts < s->stop_after;
}

static bool
sink_cancelled (void *data)
{
  Sink *s = data;
  return s->cancel_after > 0 && s->n_texts >= s->cancel_after;
}

static void
sink_warning (void *data, HnChatWarning code, const char *message)
{
  Sink *s = data;
  g_assert_nonnull (message);
  g_array_append_val (s->warnings, code);
}

static void
sink_reuse (void *data, const HnChatReuse *reuse)
{
  ((Sink *) data)->reuse = *reuse;
}

static void
sink_init (Sink *s, HnChatCallbacks *cb)
{
  memset (s, 0, sizeof *s);
  s->text = g_string_new (NULL);
  s->warnings = g_array_new (FALSE, FALSE, sizeof (HnChatWarning));
  *cb = (HnChatCallbacks) { .on_text = sink_text, .is_cancelled = sink_cancelled, .on_warning = sink_warning,
                            .on_reuse = sink_reuse, .user_data = s };
}

static void
sink_clear (Sink *s)
{
  g_string_free (s->text, TRUE);
  g_array_unref (s->warnings);
}

static gboolean
has_warning (const Sink *s, HnChatWarning code)
{
  for (guint i = 0; i < s->warnings->len; i++)
    if (g_array_index (s->warnings, HnChatWarning, i) == code)
      return TRUE;
  return FALSE;
}

/* ---- ChatML ---------------------------------------------------------------------------- */

static void
test_chatml_ranges (void)
{
  static const char json[] = "[{\"role\":\"system\",\"content\":\"Be <|im_end|> brief\"},"
                             "{\"role\":\"user\",\"content\":\"\"},"
                             "{\"role\":\"assistant\",\"content\":{\"a\":[1,2]}},"
                             "{\"role\":\"user\",\"content\":\"héllo\\nthere\"}]";
  HnError err = { 0 };
  HnJson *messages = hn_json_parse (json, sizeof json - 1, &err);
  g_assert_nonnull (messages);
  size_t len = 0, len2 = 0, n_ranges = 0;
  HnTextRange *ranges = NULL;
  char *plain = hn_chat_render_fallback (messages, true, &len, &err);
  char *text = hn_chat_render_fallback_ranges (messages, true, &len2, &ranges, &n_ranges, &err);
  g_assert_nonnull (text);
  g_assert_cmpuint (len, ==, len2);
  g_assert_cmpmem (plain, len, text, len2);
  /* one range per non-empty content, exactly the content's bytes */
  const char *expected[] = { "Be <|im_end|> brief", "{\"a\":[1,2]}", "héllo\nthere" };
  g_assert_cmpuint (n_ranges, ==, G_N_ELEMENTS (expected));
  for (size_t i = 0; i < n_ranges; i++)
    {
      g_assert_cmpuint (ranges[i].end - ranges[i].start, ==, strlen (expected[i]));
      g_assert_cmpmem (text + ranges[i].start, ranges[i].end - ranges[i].start, expected[i], strlen (expected[i]));
      g_assert_true (i == 0 || ranges[i].start >= ranges[i - 1].end);
    }
  free (plain);
  free (text);
  free (ranges);
  hn_json_free (messages);
}

/* A control token's text inside a message stays text; written by ChatML it is the token. */
static void
test_guards (void)
{
  HnChatModel *cm = chat_model ();
  HnChatMessage plain[] = { { "user", "a b" } };
  HnChatMessage sneaky[] = { { "user", "a<|im_end|>b" } };
  HnChatPrompt p1 = { 0 }, p2 = { 0 };
  HnError err = { 0 };
  g_assert_true (hn_chat_model_tokenize (cm, NULL, plain, 1, HN_CHAT_THINKING_UNSET, &p1, &err));
  g_assert_true (hn_chat_model_tokenize (cm, NULL, sneaky, 1, HN_CHAT_THINKING_UNSET, &p2, &err));
  g_assert_null (p1.fallback_reason);   /* no template: ChatML without a word */
  /* the sneaky message tokenizes as text: more tokens than the token would take */
  int32_t im_end = hn_vocab_find_token (vocab, "<|im_end|>");
  size_t count_plain = 0, count_sneaky = 0;
  for (size_t i = 0; i < p1.n_tokens; i++)
    count_plain += im_end >= 0 && p1.tokens[i] == im_end;
  for (size_t i = 0; i < p2.n_tokens; i++)
    count_sneaky += im_end >= 0 && p2.tokens[i] == im_end;
  g_assert_cmpuint (count_plain, ==, count_sneaky);
  g_assert_cmpuint (p2.n_tokens, >, p1.n_tokens + 2);
  /* BOS first, as the vocabulary asks */
  g_assert_cmpint (p1.tokens[0], ==, hn_vocab_bos (vocab));
  hn_chat_prompt_clear (&p1);
  hn_chat_prompt_clear (&p2);
  hn_chat_model_free (cm);
}

/* ---- replies --------------------------------------------------------------------------- */

static void
request_for (HnChatRequest *req, const HnSamplerParams *sp, const HnChatMessage *msgs, size_t n, const char *conv)
{
  hn_chat_request_init (req);
  req->system = "You are terse.";
  req->messages = msgs;
  req->n_messages = n;
  req->sampler = sp;
  req->conversation = conv;
}

static void
greedy (HnSamplerParams *sp, int max)
{
  hn_sampler_params_init (sp);
  sp->temperature = 0;
  sp->max_new_tokens = max;
}

/* After a reply the chat holds the prompt and every decoded reply token; the next turn of
 * the same conversation evaluates only what is new. */
static void
test_held_and_reuse (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 256);
  HnSamplerParams sp;
  greedy (&sp, 8);
  HnChatMessage msgs[3] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  request_for (&req, &sp, msgs, 1, "a");
  Sink s;
  HnChatCallbacks cb;
  sink_init (&s, &cb);
  HnChatStats st;
  HnError err = { 0 };
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpint (st.stop_reason, ==, HN_GEN_STOP_MAX_TOKENS);
  g_assert_cmpuint (st.n_generated, ==, 8);
  g_assert_cmpuint (st.n_reused, ==, 0);
  g_assert_cmpuint (st.n_evaluated, ==, st.n_prompt);
  g_assert_cmpuint (s.reuse.n_prompt, ==, st.n_prompt);
  g_assert_false (s.reuse.restored);   /* no session path */
  size_t n_held = 0, n_reply = 0;
  const int32_t *held = hn_chat_tokens_held (chat, &n_held);
  const int32_t *reply = hn_chat_reply_tokens (chat, &n_reply);
  g_assert_cmpuint (n_reply, ==, 8);
  /* the last sampled token never went through the model */
  g_assert_cmpuint (n_held, ==, st.n_prompt + n_reply - 1);
  g_assert_cmpmem (held + st.n_prompt, (n_reply - 1) * 4, reply, (n_reply - 1) * 4);
  g_autofree char *first_reply = g_strdup (s.text->str);

  /* the same request again: everything but the last prompt token is reused, same reply */
  g_string_truncate (s.text, 0);
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpuint (st.n_reused, ==, st.n_prompt - 1);
  g_assert_cmpuint (st.n_evaluated, ==, 1);
  g_assert_cmpstr (s.text->str, ==, first_reply);

  /* the next turn: prompt and reply are reused */
  msgs[1] = (HnChatMessage) { "assistant", first_reply };
  msgs[2] = (HnChatMessage) { "user", "And then?" };
  size_t n_prev_prompt = st.n_prompt;
  request_for (&req, &sp, msgs, 3, "a");
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpuint (st.n_reused, >=, n_prev_prompt);
  g_assert_cmpuint (st.n_evaluated, ==, st.n_prompt - st.n_reused);

  /* another conversation starts from an empty cache */
  request_for (&req, &sp, msgs, 1, "b");
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpuint (st.n_reused, ==, 0);
  hn_chat_forget (chat);
  hn_chat_tokens_held (chat, &n_held);
  g_assert_cmpuint (n_held, ==, 0);
  sink_clear (&s);
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

/* Two chats over one chat model (one model, two contexts), interleaved, give what each
 * gives alone: nothing is shared but the read-only model. */
static void
test_two_chats (void)
{
  HnChatModel *cm = chat_model ();
  HnSamplerParams sp;
  hn_sampler_params_init (&sp);
  sp.temperature = 0.8f;
  sp.seed = 7;
  sp.max_new_tokens = 6;
  const char *texts[2] = { "Once upon a time", "The weather today" };
  char *alone[2];
  for (int i = 0; i < 2; i++)
    {
      HnChat *chat = new_chat (cm, 128);
      HnChatMessage m[] = { { "user", texts[i] } };
      HnChatRequest req;
      request_for (&req, &sp, m, 1, NULL);
      Sink s;
      HnChatCallbacks cb;
      sink_init (&s, &cb);
      HnChatStats st;
      HnError err = { 0 };
      g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
      alone[i] = g_strdup (s.text->str);
      sink_clear (&s);
      hn_chat_free (chat);
    }
  HnChat *chats[2] = { new_chat (cm, 128), new_chat (cm, 128) };
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < 2; i++)
      {
        HnChatMessage m[] = { { "user", texts[i] } };
        HnChatRequest req;
        request_for (&req, &sp, m, 1, NULL);
        Sink s;
        HnChatCallbacks cb;
        sink_init (&s, &cb);
        HnChatStats st;
        HnError err = { 0 };
        g_assert_true (hn_chat_generate (chats[i], &req, &cb, &st, &err));
        g_assert_cmpstr (s.text->str, ==, alone[i]);
        if (round == 1)
          g_assert_cmpuint (st.n_reused, ==, st.n_prompt - 1);
        sink_clear (&s);
      }
  for (int i = 0; i < 2; i++)
    {
      hn_chat_free (chats[i]);
      g_free (alone[i]);
    }
  hn_chat_model_free (cm);
}

/* Token mode (hanashi-cli generate): the prompt as it is; a longer prompt that extends the
 * held tokens evaluates only its tail. */
static void
test_token_mode (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 128);
  int32_t prompt[12];
  int32_t n = hn_tokenize (vocab, "Once upon a time there was a cat", 32, true, false, prompt, 12, NULL);
  g_assert_cmpint (n, >, 4);
  HnSamplerParams sp;
  greedy (&sp, 4);
  HnChatRequest req;
  hn_chat_request_init (&req);
  req.prompt_tokens = prompt;
  req.n_prompt_tokens = (size_t) n - 2;
  req.sampler = &sp;
  HnChatStats st;
  HnError err = { 0 };
  g_assert_true (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpuint (st.n_prompt, ==, (size_t) n - 2);
  g_assert_cmpuint (st.n_evaluated, ==, (size_t) n - 2);
  req.n_prompt_tokens = (size_t) n;
  g_assert_true (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpuint (st.n_reused, ==, (size_t) n - 2);
  g_assert_cmpuint (st.n_evaluated, ==, 2);
  /* guidance without a negative prompt is refused by the loop, as before */
  req.cfg_scale = 2.0f;
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

/* Session files: missing, saved (directories created), restored in a new chat, damaged. */
static void
test_session (void)
{
  g_autofree char *dir = g_dir_make_tmp ("hanashi-chat-XXXXXX", NULL);
  g_autofree char *path = g_build_filename (dir, "a", "b", "conv.hnsession", NULL);
  HnChatModel *cm = chat_model ();
  HnSamplerParams sp;
  greedy (&sp, 6);
  HnChatMessage m[] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  request_for (&req, &sp, m, 1, "conv");
  req.session_path = path;
  Sink s;
  HnChatCallbacks cb;
  sink_init (&s, &cb);
  HnChatStats st;
  HnError err = { 0 };

  HnChat *chat = new_chat (cm, 128);
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_true (has_warning (&s, HN_CHAT_WARNING_SESSION_MISSING));
  g_assert_true (s.reuse.restored);
  g_assert_cmpuint (s.reuse.n_restored, ==, 0);
  g_assert_true (st.session_saved);
  g_assert_true (g_file_test (path, G_FILE_TEST_IS_REGULAR));
  g_autofree char *reply = g_strdup (s.text->str);
  hn_chat_free (chat);

  chat = new_chat (cm, 128);
  g_array_set_size (s.warnings, 0);
  g_string_truncate (s.text, 0);
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpuint (s.warnings->len, ==, 0);
  g_assert_cmpuint (s.reuse.n_restored, ==, st.n_prompt);
  g_assert_cmpuint (st.n_reused, ==, st.n_prompt - 1);
  g_assert_cmpstr (s.text->str, ==, reply);
  hn_chat_free (chat);

  g_assert_true (g_file_set_contents (path, "HNSESSN\0junk", 12, NULL));
  chat = new_chat (cm, 128);
  g_string_truncate (s.text, 0);
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_true (has_warning (&s, HN_CHAT_WARNING_SESSION_NOT_USED));
  g_assert_cmpuint (st.n_reused, ==, 0);
  g_assert_cmpstr (s.text->str, ==, reply);
  g_assert_true (st.session_saved);

  /* a file where a directory should be: not saved, said so, the reply still comes */
  g_autofree char *blocked = g_build_filename (dir, "file", "conv.hnsession", NULL);
  g_autofree char *file = g_build_filename (dir, "file", NULL);
  g_assert_true (g_file_set_contents (file, "x", 1, NULL));
  req.session_path = blocked;
  req.conversation = "other";
  g_array_set_size (s.warnings, 0);
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_false (st.session_saved);
  g_assert_true (has_warning (&s, HN_CHAT_WARNING_SESSION_NOT_SAVED));
  hn_chat_free (chat);
  sink_clear (&s);
  hn_chat_model_free (cm);
  g_unlink (path);
  g_unlink (file);
  g_autofree char *b = g_path_get_dirname (path);
  g_rmdir (b);
  g_autofree char *a = g_path_get_dirname (b);
  g_rmdir (a);
  g_rmdir (dir);
}

static void
test_stop_reasons (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 128);
  HnSamplerParams sp;
  greedy (&sp, 20);
  HnChatMessage m[] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  request_for (&req, &sp, m, 1, NULL);
  Sink s;
  HnChatCallbacks cb;
  sink_init (&s, &cb);
  HnChatStats st;
  HnError err = { 0 };
  s.cancel_after = 2;
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpint (st.stop_reason, ==, HN_GEN_STOP_CANCELLED);
  g_assert_cmpuint (st.n_generated, <, 20);
  s.cancel_after = 0;
  s.n_texts = 0;
  s.stop_after = 3;
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpint (st.stop_reason, ==, HN_GEN_STOP_CALLBACK);
  /* a context too small for the reply's reserve (a quarter of it without a limit): the
   * reply runs until the context is full */
  sp.max_new_tokens = -1;
  s.stop_after = 0;
  HnChat *small = new_chat (cm, 64);
  g_assert_true (hn_chat_generate (small, &req, &cb, &st, &err));
  g_assert_cmpint (st.stop_reason, ==, HN_GEN_STOP_CONTEXT_FULL);
  size_t n_held = 0;
  hn_chat_tokens_held (small, &n_held);
  g_assert_cmpuint (n_held, <=, 64);
  g_assert_cmpuint (st.n_prompt + st.n_generated, >=, 64);
  hn_chat_free (small);
  sink_clear (&s);
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

static void
test_errors (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 64);
  HnSamplerParams sp;
  greedy (&sp, 4);
  HnChatMessage m[] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  HnChatStats st;
  HnError err = { 0 };

  request_for (&req, &sp, m, 0, NULL);
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);

  HnSamplerParams bad = sp;
  bad.top_p = 2.0f;
  request_for (&req, &bad, m, 1, NULL);
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);

  request_for (&req, &sp, m, 1, NULL);
  req.gbnf = "root ::= \"a\"\nfoo ::= (";
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_GRAMMAR);
  g_assert_nonnull (strstr (err.message, "line 2"));
  req.gbnf = NULL;
  req.json_schema = "{\"type\": 5}";
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_true (g_str_has_prefix (err.message, "JSON schema: "));

  GString *longer = g_string_new (NULL);
  for (int i = 0; i < 40; i++)
    g_string_append (longer, "once upon a time ");
  HnChatMessage big[] = { { "user", "hi" }, { "assistant", "hello" }, { "user", longer->str } };
  request_for (&req, &sp, big, 3, NULL);
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_TOO_LONG);
  g_string_free (longer, TRUE);
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

static void
collect_probs (void *data, const HnTokenProbs *probs)
{
  g_array_append_val ((GArray *) data, *probs);
}

/* A forced reply prefix (a branch of an answer at one token): the reply goes on after
 * exactly those tokens, the cells of the answer it branches from are reused up to the
 * branch, and the continuation is what the model gives for conversation + prefix. */
/* Under a grammar, a reply that starts with the first tokens of its own greedy answer goes
 * on exactly as that answer did: the grammar continues after the forced tokens instead of
 * starting over (which would demand the leading "X" again).  A start the grammar rejects
 * is refused with a sentence. */
static void
test_reply_prefix_grammar (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 256);
  HnSamplerParams sp;
  greedy (&sp, 8);
  HnChatMessage msgs[] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  request_for (&req, &sp, msgs, 1, "grammar-branch");
  req.gbnf = "root ::= \"X\" [a-z ]+ \".\"";
  HnChatStats st;
  HnError err = { 0 };
  g_assert_true (hn_chat_generate (chat, &req, NULL, &st, &err));
  size_t n_reply = 0;
  const int32_t *got = hn_chat_reply_tokens (chat, &n_reply);
  g_assert_cmpuint (n_reply, >=, 5);
  g_autofree int32_t *reply = g_memdup2 (got, n_reply * sizeof *reply);

  enum { KEPT = 3 };
  req.reply_prefix = reply;
  req.n_reply_prefix = KEPT;
  greedy (&sp, (int) (n_reply - KEPT));
  g_assert_true (hn_chat_generate (chat, &req, NULL, &st, &err));
  size_t n_continued = 0;
  const int32_t *continued = hn_chat_reply_tokens (chat, &n_continued);
  g_assert_cmpmem (continued, n_continued * sizeof *continued, reply + KEPT, (n_reply - KEPT) * sizeof *reply);

  /* a start without the "X" the grammar begins with */
  int32_t wrong[1] = { reply[1] };
  req.reply_prefix = wrong;
  req.n_reply_prefix = 1;
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
  g_assert_nonnull (strstr (err.message, "does not follow the grammar"));
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

static void
test_reply_prefix (void)
{
  HnChatModel *cm = chat_model ();
  HnChat *chat = new_chat (cm, 256);
  HnSamplerParams sp;
  greedy (&sp, 8);
  HnChatMessage msgs[] = { { "user", "Once upon a time" } };
  HnChatRequest req;
  request_for (&req, &sp, msgs, 1, "branch");
  req.probs_k = 4;
  g_autoptr (GArray) records = g_array_new (FALSE, FALSE, sizeof (HnTokenProbs));
  HnChatCallbacks cb = { .on_probs = collect_probs, .user_data = records };
  HnChatStats st;
  HnError err = { 0 };
  g_assert_true (hn_chat_generate (chat, &req, &cb, &st, &err));
  g_assert_cmpuint (st.n_generated, ==, 8);
  size_t n_conversation = st.n_prompt, n_reply = 0;
  g_autofree int32_t *reply = g_memdup2 (hn_chat_reply_tokens (chat, &n_reply), 8 * sizeof (int32_t));
  g_assert_cmpuint (n_reply, ==, 8);
  size_t n_held = 0;
  g_autofree int32_t *conversation = g_memdup2 (hn_chat_tokens_held (chat, &n_held), n_conversation * sizeof (int32_t));

  /* branch at the fourth token: the first three as they were, then the runner-up */
  enum { BRANCH = 3 };
  const HnTokenProbs *at = &g_array_index (records, HnTokenProbs, BRANCH);
  g_assert_cmpint (at->token, ==, reply[BRANCH]);
  g_assert_cmpint (at->candidates[0].id, ==, reply[BRANCH]);
  int32_t prefix[BRANCH + 1];
  memcpy (prefix, reply, BRANCH * sizeof *prefix);
  prefix[BRANCH] = at->candidates[1].id;
  g_assert_cmpint (prefix[BRANCH], !=, reply[BRANCH]);
  greedy (&sp, 5);
  req.probs_k = 0;
  req.reply_prefix = prefix;
  req.n_reply_prefix = BRANCH + 1;
  Sink s;
  HnChatCallbacks text_cb;
  sink_init (&s, &text_cb);
  g_assert_true (hn_chat_generate (chat, &req, &text_cb, &st, &err));
  g_assert_cmpuint (st.n_prompt, ==, n_conversation + BRANCH + 1);
  /* everything up to the branch was already in the cache: only the new token is evaluated */
  g_assert_cmpuint (st.n_reused, ==, n_conversation + BRANCH);
  g_assert_cmpuint (st.n_evaluated, ==, 1);
  const int32_t *held = hn_chat_tokens_held (chat, &n_held);
  g_assert_cmpuint (n_held, >=, n_conversation + BRANCH + 1);
  g_assert_cmpmem (held, n_conversation * sizeof *held, conversation, n_conversation * sizeof *held);
  g_assert_cmpmem (held + n_conversation, sizeof prefix, prefix, sizeof prefix);
  size_t n_continued = 0;
  g_autofree int32_t *continued = g_memdup2 (hn_chat_reply_tokens (chat, &n_continued), 5 * sizeof (int32_t));
  g_assert_cmpuint (n_continued, ==, 5);
  g_autofree char *continued_text = g_strdup (s.text->str);
  sink_clear (&s);

  /* the same continuation from scratch: conversation + prefix as a raw prompt */
  HnChat *fresh = new_chat (cm, 256);
  g_autofree int32_t *whole = g_new (int32_t, n_conversation + BRANCH + 1);
  memcpy (whole, conversation, n_conversation * sizeof *whole);
  memcpy (whole + n_conversation, prefix, sizeof prefix);
  HnChatRequest raw;
  hn_chat_request_init (&raw);
  raw.prompt_tokens = whole;
  raw.n_prompt_tokens = n_conversation + BRANCH + 1;
  raw.sampler = &sp;
  g_assert_true (hn_chat_generate (fresh, &raw, NULL, &st, &err));
  size_t n_fresh = 0;
  const int32_t *fresh_reply = hn_chat_reply_tokens (fresh, &n_fresh);
  g_assert_cmpmem (fresh_reply, n_fresh * sizeof *fresh_reply, continued, n_continued * sizeof *continued);
  g_assert_cmpuint (strlen (continued_text), >, 0);
  hn_chat_free (fresh);

  /* a token the model does not have is refused with a sentence */
  prefix[0] = hn_model_n_vocab (model);
  g_assert_false (hn_chat_generate (chat, &req, NULL, &st, &err));
  g_assert_cmpint (err.code, ==, HN_ERR_INVALID_ARG);
  g_assert_nonnull (strstr (err.message, "reply prefix"));
  hn_chat_free (chat);
  hn_chat_model_free (cm);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  const char *dir = g_getenv ("HANASHI_TESTDATA");
  if (dir == NULL)
    {
      g_test_message ("HANASHI_TESTDATA is not set");
      return 77;
    }
  g_autofree char *path = g_build_filename (dir, "models", MODEL, NULL);
  HnError err = { 0 };
  model = hn_model_load (path, NULL, &err);
  g_assert_nonnull (model);
  vocab = hn_vocab_load (hn_model_gguf (model), &err);
  g_assert_nonnull (vocab);
  g_test_add_func ("/chat/chatml-ranges", test_chatml_ranges);
  g_test_add_func ("/chat/guards", test_guards);
  g_test_add_func ("/chat/held-and-reuse", test_held_and_reuse);
  g_test_add_func ("/chat/two-chats", test_two_chats);
  g_test_add_func ("/chat/token-mode", test_token_mode);
  g_test_add_func ("/chat/session", test_session);
  g_test_add_func ("/chat/stop-reasons", test_stop_reasons);
  g_test_add_func ("/chat/errors", test_errors);
  g_test_add_func ("/chat/reply-prefix", test_reply_prefix);
  g_test_add_func ("/chat/reply-prefix-grammar", test_reply_prefix_grammar);
  int r = g_test_run ();
  hn_vocab_free (vocab);
  hn_model_free (model);
  return r;
}

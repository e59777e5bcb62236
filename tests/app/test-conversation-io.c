/* test-conversation-io.c — JSON round trip, Markdown snapshot, every malformed import
 * rejected without touching the store, titles from the first message (no display)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "config.h"

#include <glib/gstdio.h>

#include "hanashi-conversation-io.h"
#include "hanashi-store.h"
#include "hanashi-token-probs.h"
#include "test-xdg.h"

static HanashiStore *
new_store (const char *name)
{
  g_autofree char *path = g_build_filename (g_get_user_data_dir (), name, "hanashi.db", NULL);
  g_autoptr(GError) error = NULL;
  HanashiStore *store = hanashi_store_new (path, &error);
  g_assert_no_error (error);
  return store;
}

/* A conversation with a system prompt, parameters, stats and an assistant alternative. */
static gint64
fill_store (HanashiStore *store)
{
  g_autoptr(GError) error = NULL;
  gint64 c = hanashi_store_create_conversation (store, "Ramen \"tips\"", &error);
  g_assert_no_error (error);
  g_assert_true (hanashi_store_set_system_prompt (store, c, "Be brief.\nAnswer in English.", &error));
  g_assert_true (hanashi_store_set_conversation_params (store, c, "{\"temperature\":0.5,\"top_k\":40}", &error));
  gint64 u1 = hanashi_store_add_message (store, c, 0, 0, "user", "Where is good ramen?", TRUE, &error);
  gint64 a1 = hanashi_store_add_message (store, c, u1, 0, "assistant", "Try **Ichiran**.", TRUE, &error);
  g_assert_true (hanashi_store_update_message (store, a1, "Try **Ichiran**.", 5, 0.25, "{\"seed\":7}", TRUE, &error));
  /* what the sampler saw for the answer's first two tokens */
  HnTokenProbs recs[2] = {
    { .token = 21, .logprob = -0.25f, .p = 0.875f, .n_candidates = 2,
      .candidates = { { 21, -0.25f, 0.875f, HN_STAGE_NONE }, { 7, -1.5f, 0.125f, HN_STAGE_NONE } } },
    { .token = 9, .logprob = -2.0f, .p = 1.0f, .n_candidates = 3,
      .candidates = { { 4, -0.5f, 0.0f, HN_STAGE_GRAMMAR }, { 9, -2.0f, 1.0f, HN_STAGE_NONE },
                      { 11, -3.0f, 0.0f, HN_STAGE_MIN_P } } },
  };
  g_autoptr(GBytes) probs = hanashi_token_probs_pack (recs, 2);
  g_assert_true (hanashi_store_set_token_probs (store, a1, probs, &error));
  gint64 a2 = hanashi_store_add_message (store, c, u1, a1, "assistant", "Try Fuunji — 日本語も。", FALSE, &error);
  g_assert_true (hanashi_store_update_message (store, a2, "Try Fuunji — 日本語も。", 9, 1.5, NULL, FALSE, &error));
  gint64 u2 = hanashi_store_add_message (store, c, a2, 0, "user", "Thanks!", TRUE, &error);
  g_assert_no_error (error);
  g_assert_cmpint (u2, ==, 4);
  return c;
}

static void
test_round_trip (void)
{
  g_autoptr(HanashiStore) a = new_store ("round-a");
  g_autoptr(HanashiStore) b = new_store ("round-b");
  g_autoptr(GError) error = NULL;
  gint64 id = fill_store (a);
  /* the older answer is the one shown: the file keeps that */
  g_assert_true (hanashi_store_show_alternative (a, 2, &error));
  g_autofree char *json = hanashi_conversation_export_json (a, id, &error);
  g_assert_no_error (error);
  g_assert_true (g_str_has_suffix (json, "}\n"));
  /* the probabilities are in the file, with the stages by name */
  g_assert_nonnull (strstr (json, "\"token_probs\""));
  g_assert_nonnull (strstr (json, "\"removed_by\" : \"grammar\""));
  g_assert_nonnull (strstr (json, "\"removed_by\" : \"min_p\""));
  g_assert_nonnull (strstr (json, "\"removed_by\" : null"));

  gint64 imported = hanashi_conversation_import_json (b, json, strlen (json), &error);
  g_assert_no_error (error);
  g_assert_cmpint (imported, ==, 1);
  /* Fresh stores give the same ids, so the second export must be byte-identical. */
  g_autofree char *again = hanashi_conversation_export_json (b, imported, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (again, ==, json);

  /* Importing into a store that already has ids moves every reference along. */
  gint64 second = hanashi_conversation_import_json (b, json, strlen (json), &error);
  g_assert_no_error (error);
  g_assert_cmpint (second, ==, 2);
  g_autoptr(GPtrArray) messages = hanashi_store_list_messages (b, second, &error);
  g_assert_cmpuint (messages->len, ==, 4);
  HanashiStoredMessage *m[4];
  for (guint i = 0; i < 4; i++)
    m[i] = g_ptr_array_index (messages, i);
  g_assert_cmpint (m[0]->id, ==, 5);
  g_assert_cmpint (m[0]->parent_id, ==, 0);
  g_assert_cmpint (m[0]->alternative_group, ==, 5);
  g_assert_cmpint (m[1]->parent_id, ==, 5);
  g_assert_cmpint (m[2]->parent_id, ==, 5);
  g_assert_cmpint (m[2]->alternative_group, ==, m[1]->id);
  g_assert_cmpint (m[3]->parent_id, ==, m[2]->id);
  g_assert_cmpint (m[2]->token_count, ==, 9);
  g_assert_cmpfloat (m[2]->generation_seconds, ==, 1.5);
  g_assert_false (m[2]->complete);
  g_assert_cmpstr (m[1]->params_json, ==, "{\"seed\":7}");
  g_assert_nonnull (m[1]->token_probs);
  g_autoptr(GArray) back = hanashi_token_probs_unpack (m[1]->token_probs, &error);
  g_assert_cmpuint (back->len, ==, 2);
  g_assert_cmpint (g_array_index (back, HnTokenProbs, 1).candidates[2].removed_by, ==, HN_STAGE_MIN_P);
  g_assert_cmpfloat (g_array_index (back, HnTokenProbs, 0).candidates[1].p, ==, 0.125f);
  g_assert_null (m[2]->token_probs);
  g_assert_true (m[0]->shown && m[1]->shown && !m[2]->shown && m[3]->shown);
  g_autoptr(GPtrArray) alternatives = hanashi_store_list_alternatives (b, m[2]->id, &error);
  g_assert_cmpuint (alternatives->len, ==, 2);
  g_autoptr(HanashiStoredConversation) c = hanashi_store_dup_conversation (b, second, &error);
  g_assert_cmpstr (c->title, ==, "Ramen \"tips\"");
  g_assert_cmpstr (c->system_prompt, ==, "Be brief.\nAnswer in English.");
  g_assert_cmpstr (c->params_json, ==, "{\"temperature\":0.5,\"top_k\":40}");

  /* Without the field the newest of each group is shown; of two marked, the later wins. */
  const char *older_file =
    "{\"format\":\"hanashi-conversation\",\"version\":1,\"messages\":["
    "{\"id\":1,\"role\":\"user\",\"text\":\"q\"},"
    "{\"id\":2,\"parent\":1,\"role\":\"assistant\",\"text\":\"a\"},"
    "{\"id\":3,\"parent\":1,\"group\":2,\"role\":\"assistant\",\"text\":\"b\"}]}";
  g_autoptr(HanashiConversationData) older = hanashi_conversation_import_json_data (older_file, strlen (older_file), &error);
  g_assert_no_error (error);
  HanashiStoredMessage *o1 = g_ptr_array_index (older->messages, 1), *o2 = g_ptr_array_index (older->messages, 2);
  g_assert_true (!o1->shown && o2->shown);
  const char *twice_file =
    "{\"format\":\"hanashi-conversation\",\"version\":1,\"messages\":["
    "{\"id\":1,\"role\":\"user\",\"text\":\"q\",\"shown\":false},"
    "{\"id\":2,\"parent\":1,\"role\":\"assistant\",\"text\":\"a\",\"shown\":true},"
    "{\"id\":3,\"parent\":1,\"group\":2,\"role\":\"assistant\",\"text\":\"b\",\"shown\":true},"
    "{\"id\":4,\"parent\":1,\"group\":2,\"role\":\"assistant\",\"text\":\"c\",\"shown\":false}]}";
  g_autoptr(HanashiConversationData) twice = hanashi_conversation_import_json_data (twice_file, strlen (twice_file), &error);
  g_assert_no_error (error);
  gboolean shown[4];
  for (guint i = 0; i < 4; i++)
    shown[i] = ((HanashiStoredMessage *) g_ptr_array_index (twice->messages, i))->shown;
  g_assert_true (shown[0] && !shown[1] && shown[2] && !shown[3]);
}

static void
test_markdown (void)
{
  g_autoptr(HanashiStore) store = new_store ("markdown");
  g_autoptr(GError) error = NULL;
  gint64 id = fill_store (store);
  g_autofree char *md = hanashi_conversation_export_markdown (store, id, &error);
  g_assert_no_error (error);
  /* The thread to the newest message: the first answer is an older alternative, left out. */
  g_assert_cmpstr (md, ==,
    "# Ramen \"tips\"\n"
    "\n## System Prompt\n\nBe brief.\nAnswer in English.\n"
    "\n## User\n\nWhere is good ramen?\n"
    "\n## Assistant\n\nTry Fuunji — 日本語も。\n"
    "\n## User\n\nThanks!\n");

  gint64 empty = hanashi_store_create_conversation (store, "", &error);
  g_autofree char *md_empty = hanashi_conversation_export_markdown (store, empty, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (md_empty, ==, "# Untitled Chat\n");

  g_assert_null (hanashi_conversation_export_markdown (store, 999, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
}

typedef struct {
  const char *json;
  int code;
  const char *message; /* exact, or a prefix when it ends in "…" */
} BadCase;

#define OK_HEAD "{\"format\":\"hanashi-conversation\",\"version\":1,"
#define MSG(fields) OK_HEAD "\"messages\":[" fields "]}"

static const BadCase bad_cases[] = {
  { "", 0, "The file is empty." },
  { " \n ", 0, "The file is empty." },
  { "not json", 0, "The file is not valid JSON: …" },
  { "{\"format\":", 0, "The file is not valid JSON: …" },
  { "{\"format\":\"hanashi-conversation\",\"version\":1,\"title\":\"\xff\xfe\",\"messages\":[]}", 0,
    "The file is not valid JSON: …" },
  { "[]", 0, "The file does not hold a conversation (expected a JSON object)." },
  { "{}", 0, "The field “format” is missing in the conversation." },
  { "{\"format\":7}", 0, "The field “format” in the conversation must be text." },
  { "{\"format\":\"chatgpt\",\"version\":1}", 1, "The file is not a Hanashi conversation (format “chatgpt”)." },
  { "{\"format\":\"hanashi-conversation\"}", 0, "The field “version” is missing in the conversation." },
  { "{\"format\":\"hanashi-conversation\",\"version\":\"1\"}", 0,
    "The field “version” in the conversation must be a whole number." },
  { "{\"format\":\"hanashi-conversation\",\"version\":1.0}", 0,
    "The field “version” in the conversation must be a whole number." },
  { "{\"format\":\"hanashi-conversation\",\"version\":0}", 0,
    "The field “version” in the conversation is out of range (0)." },
  { "{\"format\":\"hanashi-conversation\",\"version\":2}", 1,
    "The conversation was saved by a newer Hanashi (format version 2)." },
  { OK_HEAD "\"title\":5,\"messages\":[]}", 0, "The field “title” in the conversation must be text." },
  /* lone surrogates: json-glib passes them on as invalid UTF-8 (found by fuzz-import) */
  { OK_HEAD "\"title\":\"a\\ud800b\",\"messages\":[]}", 0,
    "The field “title” in the conversation contains characters that are not valid Unicode." },
  { OK_HEAD "\"parameters\":{\"stop\":\"\\ud800x\"},\"messages\":[]}", 0,
    "The field “parameters” in the conversation contains characters that are not valid Unicode." },
  { OK_HEAD "\"system_prompt\":null,\"messages\":[]}", 0, "The field “system_prompt” in the conversation must be text." },
  { OK_HEAD "\"created\":-5,\"messages\":[]}", 0, "The field “created” in the conversation is out of range (-5)." },
  { OK_HEAD "\"updated\":true,\"messages\":[]}", 0, "The field “updated” in the conversation must be a whole number." },
  { OK_HEAD "\"parameters\":\"hot\",\"messages\":[]}", 0, "The field “parameters” in the conversation must be an object." },
  { OK_HEAD "\"title\":\"x\"}", 0, "The field “messages” is missing in the conversation." },
  { OK_HEAD "\"messages\":{}}", 0, "The field “messages” in the conversation must be a list." },
  { MSG ("1"), 0, "Message 1 is not an object." },
  { MSG ("{\"role\":\"user\",\"text\":\"hi\"}"), 0, "The field “id” is missing in message 1." },
  { MSG ("{\"id\":\"1\",\"role\":\"user\",\"text\":\"hi\"}"), 0, "The field “id” in message 1 must be a whole number." },
  { MSG ("{\"id\":0,\"role\":\"user\",\"text\":\"hi\"}"), 0, "The field “id” in message 1 is out of range (0)." },
  { MSG ("{\"id\":1,\"text\":\"hi\"}"), 0, "The field “role” is missing in message 1." },
  { MSG ("{\"id\":1,\"role\":\"robot\",\"text\":\"hi\"}"), 0,
    "The role of message 1 must be “user”, “assistant” or “system”." },
  { MSG ("{\"id\":1,\"role\":\"user\"}"), 0, "The field “text” is missing in message 1." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":[\"hi\"]}"), 0, "The field “text” in message 1 must be text." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"token_count\":-1}"), 0,
    "The field “token_count” in message 1 is out of range (-1)." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"token_count\":1.5}"), 0,
    "The field “token_count” in message 1 must be a whole number." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"token_count\":3000000000}"), 0,
    "The field “token_count” in message 1 is out of range (3000000000)." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"generation_seconds\":\"1\"}"), 0,
    "The field “generation_seconds” in message 1 must be a number." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"generation_seconds\":-1.0}"), 0,
    "The field “generation_seconds” in message 1 must be a number." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"complete\":\"yes\"}"), 0,
    "The field “complete” in message 1 must be true or false." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"shown\":1}"), 0,
    "The field “shown” in message 1 must be true or false." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"parameters\":[]}"), 0,
    "The field “parameters” in message 1 must be an object." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\",\"created\":\"today\"}"), 0,
    "The field “created” in message 1 must be a whole number." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"a\"},{\"id\":1,\"role\":\"assistant\",\"text\":\"b\"}"), 0,
    "The id of message 2 is used by an earlier message." },
  { MSG ("{\"id\":1,\"parent\":2,\"role\":\"user\",\"text\":\"a\"},{\"id\":2,\"role\":\"assistant\",\"text\":\"b\"}"), 0,
    "The parent of message 1 is not an earlier message." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"a\"},{\"id\":2,\"group\":9,\"role\":\"assistant\",\"text\":\"b\"}"), 0,
    "The group of message 2 is neither its own id nor an earlier message." },
  { MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"a\"},{\"id\":2,\"parent\":-1,\"role\":\"assistant\",\"text\":\"b\"}"), 0,
    "The field “parent” in message 2 is out of range (-1)." },
  { MSG ("{\"id\":1,\"role\":\"assistant\",\"text\":\"a\",\"token_probs\":{}}"), 0,
    "The field “token_probs” in message 1 is not a list of token probabilities." },
  { MSG ("{\"id\":1,\"role\":\"assistant\",\"text\":\"a\",\"token_probs\":[{\"token\":1,\"logprob\":-1,\"p\":2,\"candidates\":[]}]}"), 0,
    "The field “token_probs” in message 1 is not a list of token probabilities." },
  { MSG ("{\"id\":1,\"role\":\"assistant\",\"text\":\"a\",\"token_probs\":[{\"token\":1,\"logprob\":-1,\"p\":0.5,\"candidates\":"
         "[{\"token\":1,\"logprob\":-1,\"p\":0.5,\"removed_by\":\"magic\"}]}]}"), 0,
    "The field “token_probs” in message 1 is not a list of token probabilities." },
};

static void
count_rows (HanashiStore *store, guint *conversations, guint *messages)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = hanashi_store_list_conversations (store, NULL, &error);
  g_assert_no_error (error);
  *conversations = list->len;
  *messages = 0;
  for (guint i = 0; i < list->len; i++) {
    HanashiStoredConversation *c = g_ptr_array_index (list, i);
    g_autoptr(GPtrArray) m = hanashi_store_list_messages (store, c->id, &error);
    *messages += m->len;
  }
}

static void
test_malformed (void)
{
  g_autoptr(HanashiStore) store = new_store ("malformed");
  fill_store (store);
  guint conversations, messages;
  count_rows (store, &conversations, &messages);
  g_assert_cmpuint (conversations, ==, 1);
  g_assert_cmpuint (messages, ==, 4);

  for (guint i = 0; i < G_N_ELEMENTS (bad_cases); i++) {
    const BadCase *bc = &bad_cases[i];
    g_autoptr(GError) error = NULL;
    /* TAP output must be UTF-8: the invalid case is shown with replacement characters */
    g_autofree char *shown = g_utf8_make_valid (bc->json, -1);
    g_test_message ("case %u: %s", i, shown);
    g_assert_cmpint (hanashi_conversation_import_json (store, bc->json, strlen (bc->json), &error), ==, 0);
    g_assert_error (error, HANASHI_CONVERSATION_IO_ERROR, bc->code);
    if (g_str_has_suffix (bc->message, "…")) {
      g_autofree char *prefix = g_strndup (bc->message, strlen (bc->message) - strlen ("…"));
      if (!g_str_has_prefix (error->message, prefix))
        g_error ("case %u: got “%s”", i, error->message);
    } else {
      g_assert_cmpstr (error->message, ==, bc->message);
    }
    guint c2, m2;
    count_rows (store, &c2, &m2);
    g_assert_cmpuint (c2, ==, conversations);
    g_assert_cmpuint (m2, ==, messages);
  }

  /* Bytes after the text must not be read: the length is what counts. */
  const char *good = MSG ("{\"id\":1,\"role\":\"user\",\"text\":\"hi\"}") "garbage";
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiConversationData) data =
    hanashi_conversation_import_json_data (good, strlen (good) - strlen ("garbage"), &error);
  g_assert_no_error (error);
  g_assert_cmpuint (data->messages->len, ==, 1);
  g_assert_cmpstr (data->conversation->title, ==, "");
  g_assert_cmpstr (data->conversation->params_json, ==, "{}");
}

/* The store's own transaction: a reference it cannot resolve rolls back the conversation row too. */
static void
test_store_insert_atomic (void)
{
  g_autoptr(HanashiStore) store = new_store ("atomic");
  g_autoptr(GError) error = NULL;
  HanashiStoredConversation c = { .title = (char *) "x", .created = 1, .updated = 1 };
  g_autoptr(GPtrArray) messages = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_stored_message_free);
  HanashiStoredMessage *m = g_new0 (HanashiStoredMessage, 1);
  m->id = 1; m->alternative_group = 1; m->role = g_strdup ("user"); m->text = g_strdup ("a");
  g_ptr_array_add (messages, m);
  m = g_new0 (HanashiStoredMessage, 1);
  m->id = 2; m->parent_id = 5; m->alternative_group = 2; m->role = g_strdup ("assistant"); m->text = g_strdup ("b");
  g_ptr_array_add (messages, m);
  g_assert_cmpint (hanashi_store_insert_conversation (store, &c, messages, FALSE, &error), ==, 0);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_FAILED);
  g_assert_cmpstr (error->message, ==, "Message 2 refers to message 5, which does not come before it");
  guint conversations, count;
  count_rows (store, &conversations, &count);
  g_assert_cmpuint (conversations, ==, 0);
  g_assert_cmpuint (count, ==, 0);
}

static gint64
summary_titles (HanashiStore *store, const char *query, char **out)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) list = hanashi_store_list_summaries (store, query, &error);
  g_assert_no_error (error);
  GString *s = g_string_new (NULL);
  for (guint i = 0; i < list->len; i++) {
    HanashiConversationSummary *summary = g_ptr_array_index (list, i);
    g_string_append_printf (s, "%s%s", i ? "|" : "", summary->title);
  }
  *out = g_string_free (s, FALSE);
  return list->len;
}

/* Sidebar rows: snippet of the newest message (120 characters at most), search by literal substring. */
static void
test_store_summaries (void)
{
  g_autoptr(HanashiStore) store = new_store ("summaries");
  g_autoptr(GError) error = NULL;
  gint64 a = hanashi_store_create_conversation (store, "snake_case names", &error);
  gint64 b = hanashi_store_create_conversation (store, "snakeXcase", &error);
  gint64 c = hanashi_store_create_conversation (store, "Windows paths", &error);
  hanashi_store_create_conversation (store, "empty", &error);
  hanashi_store_add_message (store, b, 0, 0, "user", "first", TRUE, &error);
  hanashi_store_add_message (store, c, 0, 0, "user", "C:\\temp and 100%", TRUE, &error);
  g_autoptr(GString) long_text = g_string_new (NULL);
  for (int i = 0; i < 50; i++)
    g_string_append (long_text, "あいう");
  hanashi_store_add_message (store, a, 0, 0, "user", long_text->str, TRUE, &error);
  g_assert_no_error (error);

  g_autoptr(GPtrArray) all = hanashi_store_list_summaries (store, "", &error);
  g_assert_no_error (error);
  g_assert_cmpuint (all->len, ==, 4);
  for (guint i = 0; i < all->len; i++) {
    HanashiConversationSummary *s = g_ptr_array_index (all, i);
    if (s->id == a)
      g_assert_cmpint (g_utf8_strlen (s->snippet, -1), ==, 120);
    else if (s->id == b)
      g_assert_cmpstr (s->snippet, ==, "first");
    else if (s->id == c)
      g_assert_cmpstr (s->snippet, ==, "C:\\temp and 100%");
    else
      g_assert_cmpstr (s->snippet, ==, "");
  }

  g_autofree char *t1 = NULL, *t2 = NULL, *t3 = NULL, *t4 = NULL, *t5 = NULL;
  g_assert_cmpint (summary_titles (store, "_", &t1), ==, 1);
  g_assert_cmpstr (t1, ==, "snake_case names");
  g_assert_cmpint (summary_titles (store, "e_c", &t2), ==, 1);
  g_assert_cmpint (summary_titles (store, "\\t", &t3), ==, 1);
  g_assert_cmpstr (t3, ==, "Windows paths");
  g_assert_cmpint (summary_titles (store, "%", &t4), ==, 1);
  g_assert_cmpint (summary_titles (store, "SNAKE", &t5), ==, 2);
}

static void
test_title_from_text (void)
{
  const struct { const char *text; guint max; const char *title; } cases[] = {
    { "Hello", 40, "Hello" },
    { "  Hello\n\n  world \t ", 40, "Hello world" },
    { "", 40, "" },
    { " \n\t", 40, "" },
    { "a\x01" "b", 40, "ab" },
    { "Please explain how the attention mechanism in transformers works", 40, "Please explain how the attention…" },
    { "Supercalifragilisticexpialidociousness!", 20, "Supercalifragilisti…" },
    { "exactly twenty chars", 20, "exactly twenty chars" },
    { "twenty one characters", 20, "twenty one…" },
    { "東京でおすすめのラーメン屋を教えてください。できれば駅から近いところ", 20, "東京でおすすめのラーメン屋を教えてくだ…" },
    { "はい、わかりました。それでは始めましょう。", 12, "はい、わかりました。…" },
    { "请帮我写一首关于秋天的诗，要有月亮和桂花", 12, "请帮我写一首关于秋天的…" },
    { "日本語　と\u3000全角スペース", 40, "日本語 と 全角スペース" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *title = hanashi_conversation_title_from_text (cases[i].text, cases[i].max);
    g_assert_cmpstr (title, ==, cases[i].title);
    g_assert_cmpint (g_utf8_strlen (title, -1), <=, cases[i].max);
  }
  g_autofree char *null_title = hanashi_conversation_title_from_text (NULL, 40);
  g_assert_cmpstr (null_title, ==, "");
  g_autofree char *bad_utf8 = hanashi_conversation_title_from_text ("\xff\xfe", 40);
  g_assert_cmpstr (bad_utf8, ==, "");
}

static void
test_title_strip_markdown (void)
{
  const struct { const char *text; const char *plain; } cases[] = {
    { "Plain words", "Plain words" },
    { "**Bold** question", "Bold question" },
    { "Why is *this* __so__ ~~very~~ hard?", "Why is this so very hard?" },
    { "Run `make install` now", "Run make install now" },
    { "# A heading", "A heading" },
    { "> quoted text", "quoted text" },
    { "- list item", "list item" },
    { "1. first step", "first step" },
    { "See [the docs](https://example.org) and ![a chart](c.png)", "See the docs and a chart" },
    { "Line one\nline **two**", "Line one line two" },
    /* A title stored cut short keeps an unpaired delimiter; it goes too. */
    { "**How do I write a very long…", "How do I write a very long…" },
    { "Explain `std::vector…", "Explain std::vector…" },
    { "ends in bold**", "ends in bold" },
    { "~~struck", "struck" },
    /* Inside a word or standing alone it is text, not markup. */
    { "snake_case_name and 2*3 = 6", "snake_case_name and 2*3 = 6" },
    { "a * b and c _ d", "a * b and c _ d" },
    { "~/notes and ~5 minutes", "~/notes and ~5 minutes" },
    { "C# and C++ tips", "C# and C++ tips" },
    { "日本語の**太字**タイトル", "日本語の太字タイトル" },
    { "", "" },
    { "`code` **", "code **" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *plain = hanashi_conversation_title_strip_markdown (cases[i].text);
    g_assert_cmpstr (plain, ==, cases[i].plain);
  }
  g_autofree char *null_plain = hanashi_conversation_title_strip_markdown (NULL);
  g_assert_cmpstr (null_plain, ==, "");
  g_autofree char *bad_utf8 = hanashi_conversation_title_strip_markdown ("\xff**x**");
  g_assert_cmpstr (bad_utf8, ==, "");
}

static void
test_export_file_name (void)
{
  const struct { const char *title; const char *extension; const char *name; } cases[] = {
    { "Ramen tips", ".md", "Ramen tips.md" },
    { "**Bold** plans for `main.c`", ".json", "Bold plans for main.c.json" },
    { "Windows \\ and unix / paths", ".md", "Windows - and unix - paths.md" },
    { "# .hidden notes", ".md", "hidden notes.md" },
    { "...dots", ".md", "dots.md" },
    { "", ".md", "New Chat.md" },
    { "**", ".json", "**.json" },
    { "東京の**ラーメン**", ".md", "東京のラーメン.md" },
  };
  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *name = hanashi_conversation_export_file_name (cases[i].title, cases[i].extension);
    g_assert_cmpstr (name, ==, cases[i].name);
  }
  g_autofree char *none = hanashi_conversation_export_file_name (NULL, ".md");
  g_assert_cmpstr (none, ==, "New Chat.md");
}

int
main (int argc, char **argv)
{
  test_xdg_setup ();
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/conversation-io/round-trip", test_round_trip);
  g_test_add_func ("/conversation-io/markdown", test_markdown);
  g_test_add_func ("/conversation-io/malformed", test_malformed);
  g_test_add_func ("/conversation-io/store-insert-atomic", test_store_insert_atomic);
  g_test_add_func ("/conversation-io/store-summaries", test_store_summaries);
  g_test_add_func ("/conversation-io/title-from-text", test_title_from_text);
  g_test_add_func ("/conversation-io/title-strip-markdown", test_title_strip_markdown);
  g_test_add_func ("/conversation-io/export-file-name", test_export_file_name);
  return g_test_run ();
}

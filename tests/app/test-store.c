/* test-store.c — HanashiStore: migrations, CRUD, search, alternatives, incomplete flag (no display)
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include <glib/gstdio.h>
#include <sqlite3.h>

#include "hanashi-store.h"
#include "hanashi-token-probs.h"

typedef struct {
  char *dir;
  char *path;
} Fixture;

static void
fixture_setup (Fixture *f, gconstpointer data)
{
  (void) data;
  f->dir = g_dir_make_tmp ("hanashi-store-XXXXXX", NULL);
  g_assert_nonnull (f->dir);
  f->path = g_build_filename (f->dir, "sub", "hanashi.db", NULL);
}

static void
remove_tree (const char *path)
{
  GDir *dir = g_dir_open (path, 0, NULL);
  if (dir) {
    const char *name;
    while ((name = g_dir_read_name (dir))) {
      g_autofree char *child = g_build_filename (path, name, NULL);
      remove_tree (child);
    }
    g_dir_close (dir);
  }
  g_remove (path);
}

static void
fixture_teardown (Fixture *f, gconstpointer data)
{
  (void) data;
  remove_tree (f->dir);
  g_free (f->dir);
  g_free (f->path);
}

static void
test_migrations (Fixture *f, gconstpointer data)
{
  (void) data;
  /* A version-1 database made by hand must gain the complete column and keep its rows. */
  g_autofree char *dir = g_path_get_dirname (f->path);
  g_assert_cmpint (g_mkdir_with_parents (dir, 0700), ==, 0);
  sqlite3 *db = NULL;
  g_assert_cmpint (sqlite3_open (f->path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db,
    "CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (1);"
    "CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL DEFAULT '',"
    " created INTEGER NOT NULL, updated INTEGER NOT NULL, system_prompt TEXT NOT NULL DEFAULT '',"
    " params TEXT NOT NULL DEFAULT '{}');"
    "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation INTEGER NOT NULL"
    " REFERENCES conversations(id) ON DELETE CASCADE, parent INTEGER NOT NULL DEFAULT 0,"
    " alternative_group INTEGER NOT NULL DEFAULT 0, role TEXT NOT NULL, text TEXT NOT NULL DEFAULT '',"
    " created INTEGER NOT NULL, token_count INTEGER NOT NULL DEFAULT 0,"
    " generation_seconds REAL NOT NULL DEFAULT 0, params TEXT NOT NULL DEFAULT '{}');"
    "CREATE INDEX messages_by_conversation ON messages(conversation, id);"
    "INSERT INTO conversations (title, created, updated) VALUES ('old', 1, 1);"
    "INSERT INTO messages (conversation, alternative_group, role, text, created) VALUES (1, 1, 'user', 'hello', 1);"
    "INSERT INTO messages (conversation, parent, alternative_group, role, text, created) VALUES (1, 1, 2, 'assistant', 'a', 1);"
    "INSERT INTO messages (conversation, parent, alternative_group, role, text, created) VALUES (1, 1, 2, 'assistant', 'b', 1);",
    NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (db);

  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hanashi_store_get_schema_version (store), ==, HANASHI_STORE_SCHEMA_VERSION);
  g_autoptr(HanashiStoredMessage) m = hanashi_store_dup_message (store, 1, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (m->text, ==, "hello");
  g_assert_true (m->complete);
  g_assert_true (m->shown);
  /* v3: of an existing group of alternatives, the newest is the one shown. */
  g_autoptr(HanashiStoredMessage) first = hanashi_store_dup_message (store, 2, &error);
  g_autoptr(HanashiStoredMessage) second = hanashi_store_dup_message (store, 3, &error);
  g_assert_false (first->shown);
  g_assert_true (second->shown);
  /* v4: no thinking in older replies, and older chats keep the Think switch on. */
  g_assert_cmpstr (second->thinking, ==, "");
  g_assert_cmpfloat (second->thinking_seconds, ==, 0);
  g_autoptr(HanashiStoredConversation) old_chat = hanashi_store_dup_conversation (store, 1, &error);
  g_assert_no_error (error);
  g_assert_false (old_chat->thinking_off);
  /* v6: older replies have no token probabilities */
  g_assert_null (second->token_probs);
  g_clear_object (&store);

  /* Reopening is a no-op; a newer schema is refused with a clear error. */
  store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  g_clear_object (&store);
  g_assert_cmpint (sqlite3_open (f->path, &db), ==, SQLITE_OK);
  g_assert_cmpint (sqlite3_exec (db, "INSERT INTO schema_version VALUES (99);", NULL, NULL, NULL), ==, SQLITE_OK);
  sqlite3_close (db);
  store = hanashi_store_new (f->path, &error);
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_TOO_NEW);
  g_assert_null (store);
}

static void
test_crud_and_search (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);

  gint64 a = hanashi_store_create_conversation (store, "Cooking", &error);
  g_assert_no_error (error);
  gint64 b = hanashi_store_create_conversation (store, "Travel", &error);
  g_assert_no_error (error);
  g_assert_cmpint (a, >, 0);
  g_assert_cmpint (b, >, a);

  gint64 m1 = hanashi_store_add_message (store, a, 0, 0, "user", "How long to boil an egg?", TRUE, &error);
  g_assert_no_error (error);
  gint64 m2 = hanashi_store_add_message (store, a, m1, 0, "assistant", "About", FALSE, &error);
  g_assert_no_error (error);
  g_assert_true (hanashi_store_update_message (store, m2, "About nine minutes.", 5, 0.5, "{\"temperature\":0.7}", TRUE, &error));
  g_assert_no_error (error);

  g_autoptr(HanashiStoredMessage) reply = hanashi_store_dup_message (store, m2, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (reply->text, ==, "About nine minutes.");
  g_assert_cmpint (reply->token_count, ==, 5);
  g_assert_cmpfloat (reply->generation_seconds, ==, 0.5);
  g_assert_cmpstr (reply->params_json, ==, "{\"temperature\":0.7}");
  g_assert_cmpint (reply->parent_id, ==, m1);
  g_assert_true (reply->complete);

  g_assert_true (hanashi_store_rename_conversation (store, b, "Trip to Kyoto", &error));
  g_assert_true (hanashi_store_set_system_prompt (store, b, "Be brief.", &error));
  g_assert_true (hanashi_store_set_conversation_params (store, b, "{\"top_k\":40}", &error));
  g_assert_no_error (error);
  g_autoptr(HanashiStoredConversation) conv = hanashi_store_dup_conversation (store, b, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (conv->title, ==, "Trip to Kyoto");
  g_assert_cmpstr (conv->system_prompt, ==, "Be brief.");
  g_assert_cmpstr (conv->params_json, ==, "{\"top_k\":40}");
  g_assert_false (hanashi_store_rename_conversation (store, 9999, "x", &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);

  g_autoptr(GPtrArray) all = hanashi_store_list_conversations (store, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (all->len, ==, 2);

  /* Search matches message text case-insensitively and titles. */
  g_autoptr(GPtrArray) eggs = hanashi_store_list_conversations (store, "EGG", &error);
  g_assert_cmpuint (eggs->len, ==, 1);
  g_assert_cmpint (((HanashiStoredConversation *) eggs->pdata[0])->id, ==, a);
  g_autoptr(GPtrArray) kyoto = hanashi_store_list_conversations (store, "kyoto", &error);
  g_assert_cmpuint (kyoto->len, ==, 1);
  g_assert_cmpint (((HanashiStoredConversation *) kyoto->pdata[0])->id, ==, b);
  g_autoptr(GPtrArray) none = hanashi_store_list_conversations (store, "zebra", &error);
  g_assert_cmpuint (none->len, ==, 0);

  g_autoptr(GPtrArray) msgs = hanashi_store_list_messages (store, a, &error);
  g_assert_cmpuint (msgs->len, ==, 2);
  g_assert_true (hanashi_store_delete_message (store, m2, &error));
  g_clear_pointer (&msgs, g_ptr_array_unref);
  msgs = hanashi_store_list_messages (store, a, &error);
  g_assert_cmpuint (msgs->len, ==, 1);

  /* Deleting a conversation removes its messages. */
  g_assert_true (hanashi_store_delete_conversation (store, a, &error));
  g_clear_pointer (&msgs, g_ptr_array_unref);
  msgs = hanashi_store_list_messages (store, a, &error);
  g_assert_cmpuint (msgs->len, ==, 0);
  g_clear_pointer (&all, g_ptr_array_unref);
  all = hanashi_store_list_conversations (store, NULL, &error);
  g_assert_cmpuint (all->len, ==, 1);
  g_assert_no_error (error);
}

static void
test_alternatives_and_incomplete (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  gint64 c = hanashi_store_create_conversation (store, "", &error);
  gint64 q = hanashi_store_add_message (store, c, 0, 0, "user", "Hi", TRUE, &error);
  gint64 r1 = hanashi_store_add_message (store, c, q, 0, "assistant", "Hello!", TRUE, &error);
  gint64 r2 = hanashi_store_add_message (store, c, q, r1, "assistant", "Hey", FALSE, &error);
  gint64 other = hanashi_store_add_message (store, c, r2, 0, "user", "More", TRUE, &error);
  g_assert_no_error (error);

  g_autoptr(GPtrArray) alts = hanashi_store_list_alternatives (store, r2, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (alts->len, ==, 2);
  g_assert_cmpint (((HanashiStoredMessage *) alts->pdata[0])->id, ==, r1);
  g_assert_cmpint (((HanashiStoredMessage *) alts->pdata[1])->id, ==, r2);
  g_autoptr(GPtrArray) single = hanashi_store_list_alternatives (store, other, &error);
  g_assert_cmpuint (single->len, ==, 1);

  /* The streaming reply left incomplete survives a reopen, flagged. */
  g_clear_object (&store);
  store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  g_autoptr(GPtrArray) incomplete = hanashi_store_list_incomplete (store, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (incomplete->len, ==, 1);
  HanashiStoredMessage *m = incomplete->pdata[0];
  g_assert_cmpint (m->id, ==, r2);
  g_assert_cmpstr (m->text, ==, "Hey");
  g_assert_false (m->complete);

  g_assert_null (hanashi_store_dup_message (store, 12345, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
}

/* Which alternative is shown, closing the thread around a deleted message, deleting a branch. */
static void
test_branches (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  gint64 c = hanashi_store_create_conversation (store, "t", &error);
  gint64 q = hanashi_store_add_message (store, c, 0, 0, "user", "q", TRUE, &error);
  gint64 a1 = hanashi_store_add_message (store, c, q, 0, "assistant", "a1", TRUE, &error);
  gint64 a2 = hanashi_store_add_message (store, c, q, a1, "assistant", "a2", TRUE, &error);
  gint64 follow = hanashi_store_add_message (store, c, a1, 0, "user", "on a1", TRUE, &error);
  gint64 reply = hanashi_store_add_message (store, c, follow, 0, "assistant", "deep", TRUE, &error);
  g_assert_no_error (error);

  /* A new alternative is shown and hides the others; showing one back works both ways. */
  g_autoptr(HanashiStoredMessage) m1 = hanashi_store_dup_message (store, a1, NULL);
  g_autoptr(HanashiStoredMessage) m2 = hanashi_store_dup_message (store, a2, NULL);
  g_assert_false (m1->shown);
  g_assert_true (m2->shown);
  g_assert_true (hanashi_store_show_alternative (store, a1, &error));
  g_clear_pointer (&m1, hanashi_stored_message_free);
  g_clear_pointer (&m2, hanashi_stored_message_free);
  m1 = hanashi_store_dup_message (store, a1, NULL);
  m2 = hanashi_store_dup_message (store, a2, NULL);
  g_assert_true (m1->shown);
  g_assert_false (m2->shown);
  g_assert_false (hanashi_store_show_alternative (store, 9999, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* Deleting a1's branch takes its descendants and leaves a2 and the question. */
  g_assert_true (hanashi_store_delete_branch (store, a1, &error));
  g_assert_no_error (error);
  g_autoptr(GPtrArray) left = hanashi_store_list_messages (store, c, &error);
  g_assert_cmpuint (left->len, ==, 2);
  g_assert_cmpint (((HanashiStoredMessage *) g_ptr_array_index (left, 0))->id, ==, q);
  g_assert_cmpint (((HanashiStoredMessage *) g_ptr_array_index (left, 1))->id, ==, a2);
  g_assert_null (hanashi_store_dup_message (store, reply, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);
  (void) follow;

  /* Reparenting moves a2's follow-up under the question. */
  gint64 next = hanashi_store_add_message (store, c, a2, 0, "user", "on a2", TRUE, &error);
  g_assert_true (hanashi_store_reparent_children (store, a2, q, c, &error));
  g_autoptr(HanashiStoredMessage) moved = hanashi_store_dup_message (store, next, NULL);
  g_assert_cmpint (moved->parent_id, ==, q);

  /* A damaged tree with a cycle (next becomes its own parent, a2 its child) does not hang
   * the branch delete. */
  g_assert_true (hanashi_store_reparent_children (store, q, next, c, &error));
  g_assert_true (hanashi_store_delete_branch (store, next, &error));
  g_assert_no_error (error);
  g_clear_pointer (&left, g_ptr_array_unref);
  left = hanashi_store_list_messages (store, c, &error);
  g_assert_cmpuint (left->len, ==, 1);
  g_assert_cmpint (((HanashiStoredMessage *) g_ptr_array_index (left, 0))->id, ==, q);
}

/* A reply's thinking is stored beside its text; later plain updates leave it alone, and
 * Undo (replace_messages) and imports carry it. */
static HnTokenProbs
made_up_record (int i)
{
  HnTokenProbs r = { .token = 100 + i, .logprob = -0.5f - (float) i, .p = 0.75f, .n_candidates = 3 };
  for (int k = 0; k < 3; k++)
    r.candidates[k] = (HnProbCandidate){ .id = 100 + i + k, .logprob = -0.5f * (float) (k + 1),
                                         .p = k == 2 ? 0.0f : 0.5f, .removed_by = k == 2 ? HN_STAGE_TOP_P : HN_STAGE_NONE };
  return r;
}

/* A reply's token probabilities: stored as a compact blob, read back the same, carried by
 * a conversation copied whole (undo, import), cleared with NULL; a damaged blob is refused. */
static void
test_token_probs (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  gint64 c = hanashi_store_create_conversation (store, "Probs", &error);
  gint64 q = hanashi_store_add_message (store, c, 0, 0, "user", "hi", TRUE, &error);
  gint64 a = hanashi_store_add_message (store, c, q, 0, "assistant", "ho ho", TRUE, &error);
  g_assert_no_error (error);
  HnTokenProbs recs[4];
  for (int i = 0; i < 4; i++)
    recs[i] = made_up_record (i);
  g_autoptr(GBytes) blob = hanashi_token_probs_pack (recs, 4);
  /* compact: 13 bytes per token header, 13 per candidate, plus the magic */
  g_assert_cmpuint (g_bytes_get_size (blob), ==, 4 + 4 * (13 + 3 * 13));
  g_assert_true (hanashi_store_set_token_probs (store, a, blob, &error));
  g_assert_no_error (error);

  g_autoptr(HanashiStoredMessage) m = hanashi_store_dup_message (store, a, &error);
  g_assert_nonnull (m->token_probs);
  g_assert_true (g_bytes_equal (m->token_probs, blob));
  g_autoptr(GArray) back = hanashi_token_probs_unpack (m->token_probs, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (back->len, ==, 4);
  for (int i = 0; i < 4; i++)
    {
      const HnTokenProbs *r = &g_array_index (back, HnTokenProbs, i);
      g_assert_cmpint (r->token, ==, recs[i].token);
      g_assert_cmpfloat (r->logprob, ==, recs[i].logprob);
      g_assert_cmpfloat (r->p, ==, recs[i].p);
      g_assert_cmpuint (r->n_candidates, ==, 3);
      for (int k = 0; k < 3; k++)
        {
          g_assert_cmpint (r->candidates[k].id, ==, recs[i].candidates[k].id);
          g_assert_cmpfloat (r->candidates[k].p, ==, recs[i].candidates[k].p);
          g_assert_cmpint (r->candidates[k].removed_by, ==, recs[i].candidates[k].removed_by);
        }
    }
  g_autoptr(HanashiStoredMessage) user = hanashi_store_dup_message (store, q, &error);
  g_assert_null (user->token_probs);

  /* a whole conversation copied keeps them */
  g_autoptr(HanashiStoredConversation) conv = hanashi_store_dup_conversation (store, c, &error);
  g_autoptr(GPtrArray) msgs = hanashi_store_list_messages (store, c, &error);
  gint64 copy = hanashi_store_insert_conversation (store, conv, msgs, FALSE, &error);
  g_assert_no_error (error);
  g_autoptr(GPtrArray) copied = hanashi_store_list_messages (store, copy, &error);
  const HanashiStoredMessage *copied_reply = g_ptr_array_index (copied, 1);
  g_assert_true (g_bytes_equal (copied_reply->token_probs, blob));

  g_assert_true (hanashi_store_set_token_probs (store, a, NULL, &error));
  g_clear_pointer (&m, hanashi_stored_message_free);
  m = hanashi_store_dup_message (store, a, &error);
  g_assert_null (m->token_probs);
  g_assert_false (hanashi_store_set_token_probs (store, 999, blob, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* damaged: cut short, or not ours */
  gsize size = 0;
  const guint8 *data_bytes = g_bytes_get_data (blob, &size);
  g_autoptr(GBytes) cut = g_bytes_new (data_bytes, size - 5);
  g_assert_null (hanashi_token_probs_unpack (cut, &error));
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  g_autoptr(GBytes) foreign = g_bytes_new_static ("JUNKJUNKJUNK", 12);
  g_assert_null (hanashi_token_probs_unpack (foreign, &error));
  g_clear_error (&error);
}

static void
test_thinking (Fixture *f, gconstpointer data)
{
  (void) data;
  g_autoptr(GError) error = NULL;
  g_autoptr(HanashiStore) store = hanashi_store_new (f->path, &error);
  g_assert_no_error (error);
  gint64 c = hanashi_store_create_conversation (store, "Sums", &error);
  gint64 q = hanashi_store_add_message (store, c, 0, 0, "user", "2+2?", TRUE, &error);
  gint64 a = hanashi_store_add_message (store, c, q, 0, "assistant", "", FALSE, &error);
  g_assert_no_error (error);
  g_assert_true (hanashi_store_update_reply (store, a, "", "Adding", 0, 2, 0.1, NULL, FALSE, &error));
  g_assert_true (hanashi_store_update_reply (store, a, "4", "Adding two and two.", 3.5, 9, 1.0, "{}", TRUE, &error));
  g_autoptr(HanashiStoredMessage) m = hanashi_store_dup_message (store, a, &error);
  g_assert_cmpstr (m->text, ==, "4");
  g_assert_cmpstr (m->thinking, ==, "Adding two and two.");
  g_assert_cmpfloat (m->thinking_seconds, ==, 3.5);
  g_assert_true (m->complete);
  g_assert_true (hanashi_store_update_message (store, a, "4!", 10, 1.1, NULL, TRUE, &error));
  g_clear_pointer (&m, hanashi_stored_message_free);
  m = hanashi_store_dup_message (store, a, &error);
  g_assert_cmpstr (m->text, ==, "4!");
  g_assert_cmpstr (m->thinking, ==, "Adding two and two.");
  g_assert_cmpfloat (m->thinking_seconds, ==, 3.5);
  g_assert_false (hanashi_store_update_reply (store, 999, "x", "y", 1, 1, 1, NULL, TRUE, &error));
  g_assert_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND);
  g_clear_error (&error);

  /* The Think switch per chat. */
  g_autoptr(HanashiStoredConversation) conv = hanashi_store_dup_conversation (store, c, &error);
  g_assert_false (conv->thinking_off);
  g_assert_true (hanashi_store_set_conversation_thinking (store, c, FALSE, &error));
  g_clear_pointer (&conv, hanashi_stored_conversation_free);
  conv = hanashi_store_dup_conversation (store, c, &error);
  g_assert_true (conv->thinking_off);

  /* Undo of a deletion and a copy of the chat keep thinking, time and switch. */
  g_autoptr(GPtrArray) before = hanashi_store_list_messages (store, c, &error);
  g_assert_true (hanashi_store_delete_message (store, a, &error));
  g_assert_true (hanashi_store_replace_messages (store, c, before, &error));
  g_clear_pointer (&m, hanashi_stored_message_free);
  m = hanashi_store_dup_message (store, a, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (m->thinking, ==, "Adding two and two.");
  g_assert_cmpfloat (m->thinking_seconds, ==, 3.5);
  gint64 copy = hanashi_store_insert_conversation (store, conv, before, FALSE, &error);
  g_assert_no_error (error);
  g_autoptr(GPtrArray) copied = hanashi_store_list_messages (store, copy, &error);
  g_assert_cmpstr (((HanashiStoredMessage *) g_ptr_array_index (copied, 1))->thinking, ==, "Adding two and two.");
  g_autoptr(HanashiStoredConversation) copy_conv = hanashi_store_dup_conversation (store, copy, &error);
  g_assert_true (copy_conv->thinking_off);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/store/migrations", Fixture, NULL, fixture_setup, test_migrations, fixture_teardown);
  g_test_add ("/store/crud-search", Fixture, NULL, fixture_setup, test_crud_and_search, fixture_teardown);
  g_test_add ("/store/token-probs", Fixture, NULL, fixture_setup, test_token_probs, fixture_teardown);
  g_test_add ("/store/thinking", Fixture, NULL, fixture_setup, test_thinking, fixture_teardown);
  g_test_add ("/store/branches", Fixture, NULL, fixture_setup, test_branches, fixture_teardown);
  g_test_add ("/store/alternatives-incomplete", Fixture, NULL, fixture_setup, test_alternatives_and_incomplete, fixture_teardown);
  return g_test_run ();
}

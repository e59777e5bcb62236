/* hanashi-store.c — SQLite storage; every message is committed when it exists so a crash
 * loses only the unfinished tail of a streaming reply.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-store"

#include "config.h"

#include <glib/gi18n.h>
#include <glib/gstdio.h>
#include <sqlite3.h>

#include "hanashi-store.h"

G_DEFINE_QUARK (hanashi-store-error-quark, hanashi_store_error)

struct _HanashiStore {
  GObject parent_instance;
  sqlite3 *db;
  int schema_version;
  gboolean read_only;   /* opened with hanashi_store_new_read_only() */
};

G_DEFINE_FINAL_TYPE (HanashiStore, hanashi_store, G_TYPE_OBJECT)

/* Each entry migrates from version i to i + 1; never edit a shipped entry, append. */
static const char *const migrations[] = {
  "CREATE TABLE conversations ("
  "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
  "  title TEXT NOT NULL DEFAULT '',"
  "  created INTEGER NOT NULL,"
  "  updated INTEGER NOT NULL,"
  "  system_prompt TEXT NOT NULL DEFAULT '',"
  "  params TEXT NOT NULL DEFAULT '{}');"
  "CREATE TABLE messages ("
  "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
  "  conversation INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,"
  "  parent INTEGER NOT NULL DEFAULT 0,"
  "  alternative_group INTEGER NOT NULL DEFAULT 0,"
  "  role TEXT NOT NULL,"
  "  text TEXT NOT NULL DEFAULT '',"
  "  created INTEGER NOT NULL,"
  "  token_count INTEGER NOT NULL DEFAULT 0,"
  "  generation_seconds REAL NOT NULL DEFAULT 0,"
  "  params TEXT NOT NULL DEFAULT '{}');"
  "CREATE INDEX messages_by_conversation ON messages(conversation, id);",
  /* v2: the incomplete flag for replies cut off by a crash or Stop */
  "ALTER TABLE messages ADD COLUMN complete INTEGER NOT NULL DEFAULT 1;"
  "CREATE INDEX messages_by_group ON messages(alternative_group);",
  /* v3: which alternative of a group is shown (the thread continues from it); the newest
   * member of each existing group starts out shown */
  "ALTER TABLE messages ADD COLUMN shown INTEGER NOT NULL DEFAULT 0;"
  "UPDATE messages SET shown = 1 WHERE id IN (SELECT MAX(id) FROM messages GROUP BY alternative_group);"
  "CREATE INDEX messages_by_parent ON messages(conversation, parent);",
  /* v4: a reasoning model's thinking and how long it took, kept apart from the answer
   * (text); the per-chat Think switch (stored as off, so older chats keep the default on) */
  "ALTER TABLE messages ADD COLUMN thinking TEXT NOT NULL DEFAULT '';"
  "ALTER TABLE messages ADD COLUMN thinking_seconds REAL NOT NULL DEFAULT 0;"
  "ALTER TABLE conversations ADD COLUMN thinking_off INTEGER NOT NULL DEFAULT 0;",
  /* v5: the engine a conversation talks to ('' = the local model; see
   * hanashi_stored_conversation's engine) */
  "ALTER TABLE conversations ADD COLUMN engine TEXT NOT NULL DEFAULT '';",
  /* v6: the sampler's record of each token of a reply (top candidates, their probabilities
   * and what removed them), a compact blob (hanashi-token-probs.h); NULL = not recorded */
  "ALTER TABLE messages ADD COLUMN token_probs BLOB;",
};
G_STATIC_ASSERT (G_N_ELEMENTS (migrations) == HANASHI_STORE_SCHEMA_VERSION);

static HanashiStoreError
error_code_for_sqlite (int rc)
{
  switch (rc & 0xff)
    {
    case SQLITE_FULL:
      return HANASHI_STORE_ERROR_NO_SPACE;
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return HANASHI_STORE_ERROR_READ_ONLY;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      return HANASHI_STORE_ERROR_IO;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return HANASHI_STORE_ERROR_CORRUPT;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return HANASHI_STORE_ERROR_BUSY;
    default:
      return HANASHI_STORE_ERROR_FAILED;
    }
}

static const char *
error_sentence (HanashiStoreError code)
{
  switch (code)
    {
    case HANASHI_STORE_ERROR_NO_SPACE:
      return _("The disk is full, so the conversation could not be saved. Free some space and try again.");
    case HANASHI_STORE_ERROR_READ_ONLY:
      return _("The conversation database is read-only, so nothing can be saved.");
    case HANASHI_STORE_ERROR_IO:
      return _("The disk reported an error while reading or writing the conversation database.");
    case HANASHI_STORE_ERROR_CORRUPT:
      return _("The conversation database is damaged and could not be read.");
    case HANASHI_STORE_ERROR_BUSY:
      return _("The conversation database is in use by another program. Try again in a moment.");
    case HANASHI_STORE_ERROR_FAILED:
    case HANASHI_STORE_ERROR_NOT_FOUND:
    case HANASHI_STORE_ERROR_TOO_NEW:
    default:
      return _("The conversation database reported an unexpected error.");
    }
}

/* People get a sentence that says what to do; SQLite's own words go to the debug log. */
static gboolean
set_sqlite_error_rc (HanashiStore *self, int rc, const char *detail, GError **error)
{
  HanashiStoreError code = error_code_for_sqlite (rc);
  g_debug ("SQLite error %d: %s", rc, detail ? detail : sqlite3_errmsg (self->db));
  g_set_error_literal (error, HANASHI_STORE_ERROR, code, error_sentence (code));
  return FALSE;
}

static gboolean
set_sqlite_error (HanashiStore *self, GError **error)
{
  return set_sqlite_error_rc (self, sqlite3_extended_errcode (self->db), NULL, error);
}

static gboolean
exec_sql (HanashiStore *self, const char *sql, GError **error)
{
  char *message = NULL;
  int rc = sqlite3_exec (self->db, sql, NULL, NULL, &message);
  if (rc != SQLITE_OK)
    {
      set_sqlite_error_rc (self, sqlite3_extended_errcode (self->db), message, error);
      sqlite3_free (message);
      return FALSE;
    }
  return TRUE;
}

static sqlite3_stmt *
prepare (HanashiStore *self, const char *sql, GError **error)
{
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2 (self->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
    set_sqlite_error (self, error);
    return NULL;
  }
  return stmt;
}

static gboolean
step_done (HanashiStore *self, sqlite3_stmt *stmt, GError **error)
{
  int rc = sqlite3_step (stmt);
  sqlite3_finalize (stmt);
  if (rc != SQLITE_DONE)
    return set_sqlite_error_rc (self, rc, NULL, error);
  return TRUE;
}

/* Runs an UPDATE that must touch a row: none touched means the row is gone. */
static gboolean
step_changed (HanashiStore *self, sqlite3_stmt *stmt, const char *gone_message, GError **error)
{
  if (!step_done (self, stmt, error))
    return FALSE;
  if (sqlite3_changes (self->db) == 0) {
    g_set_error_literal (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND, gone_message);
    return FALSE;
  }
  return TRUE;
}

/* Ends a read loop: anything but SQLITE_DONE means rows were lost to an error. */
static gboolean
finish_rows (HanashiStore *self, sqlite3_stmt *stmt, int rc, GError **error)
{
  sqlite3_finalize (stmt);
  if (rc != SQLITE_DONE)
    return set_sqlite_error_rc (self, rc, NULL, error);
  return TRUE;
}

/* A failed statement may leave the transaction open (or SQLite may have rolled it back
 * itself); either way nothing of it must reach the file. */
static void
rollback (HanashiStore *self)
{
  if (!sqlite3_get_autocommit (self->db))
    sqlite3_exec (self->db, "ROLLBACK;", NULL, NULL, NULL);
}

static gboolean
migrate (HanashiStore *self, GError **error)
{
  if (!exec_sql (self, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);", error))
    return FALSE;
  sqlite3_stmt *stmt = prepare (self, "SELECT MAX(version) FROM schema_version;", error);
  if (!stmt)
    return FALSE;
  int version = 0;
  int rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    {
      version = sqlite3_column_int (stmt, 0);
      rc = sqlite3_step (stmt);
    }
  if (!finish_rows (self, stmt, rc, error))
    return FALSE;

  if (version > HANASHI_STORE_SCHEMA_VERSION) {
    g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_TOO_NEW,
                 _("The conversation database was written by a newer version of Hanashi (schema %d)."), version);
    return FALSE;
  }
  for (; version < HANASHI_STORE_SCHEMA_VERSION; version++) {
    g_autofree char *sql = g_strdup_printf ("BEGIN; %s INSERT INTO schema_version VALUES (%d); COMMIT;",
                                            migrations[version], version + 1);
    if (!exec_sql (self, sql, error)) {
      rollback (self);
      return FALSE;
    }
  }
  self->schema_version = version;
  return TRUE;
}

static void
hanashi_store_finalize (GObject *object)
{
  HanashiStore *self = HANASHI_STORE (object);
  if (self->db)
    sqlite3_close (self->db);
  G_OBJECT_CLASS (hanashi_store_parent_class)->finalize (object);
}

static void
hanashi_store_class_init (HanashiStoreClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = hanashi_store_finalize;
}

static void
hanashi_store_init (HanashiStore *self)
{
  (void) self;
}

char *
hanashi_store_dup_default_path (void)
{
  return g_build_filename (g_get_user_data_dir (), "hanashi", "hanashi.db", NULL);
}

HanashiStore *
hanashi_store_new (const char *path, GError **error)
{
  g_autoptr(HanashiStore) self = g_object_new (HANASHI_TYPE_STORE, NULL);
  g_autofree char *dir = g_path_get_dirname (path);

  if (g_mkdir_with_parents (dir, 0700) != 0) {
    g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_IO,
                 _("Could not create the folder %s."), dir);
    return NULL;
  }
  int rc = sqlite3_open_v2 (path, &self->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
  if (rc != SQLITE_OK) {
    set_sqlite_error_rc (self, rc, self->db ? sqlite3_errmsg (self->db) : NULL, error);
    return NULL;
  }
  /* SQLite opens a write-protected file for reading only without saying so; the first save
   * would fail much later.  Refuse now, so the caller can open it read-only on purpose. */
  if (sqlite3_db_readonly (self->db, "main") == 1) {
    set_sqlite_error_rc (self, SQLITE_READONLY, "the file is write-protected", error);
    return NULL;
  }
  sqlite3_extended_result_codes (self->db, 1);
  sqlite3_busy_timeout (self->db, 2000);
  /* WAL keeps each small per-message commit cheap and readers unblocked. */
  if (!exec_sql (self, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", error))
    return NULL;
  if (!migrate (self, error))
    return NULL;
  return g_steal_pointer (&self);
}

/* Opens the database for reading only, without creating, migrating or writing anything.
 * A WAL database in a folder that cannot be written has no "-shm" file to coordinate
 * readers through, and SQLite then refuses even to read it; the second attempt opens it as
 * immutable, which is safe only because nobody can write it either. */
HanashiStore *
hanashi_store_new_read_only (const char *path, GError **error)
{
  g_autofree char *uri = g_filename_to_uri (path, NULL, NULL);
  const char *modes[] = { "mode=ro", "immutable=1" };
  g_autoptr(GError) last_error = NULL;

  if (uri == NULL) {
    g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_IO, "%s", error_sentence (HANASHI_STORE_ERROR_IO));
    return NULL;
  }
  for (gsize i = 0; i < G_N_ELEMENTS (modes); i++) {
    g_autoptr(HanashiStore) self = g_object_new (HANASHI_TYPE_STORE, NULL);
    g_autofree char *full = g_strconcat (uri, "?", modes[i], NULL);
    g_clear_error (&last_error);
    int rc = sqlite3_open_v2 (full, &self->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    if (rc != SQLITE_OK) {
      set_sqlite_error_rc (self, rc, self->db ? sqlite3_errmsg (self->db) : NULL, &last_error);
      continue;
    }
    sqlite3_extended_result_codes (self->db, 1);
    sqlite3_busy_timeout (self->db, 2000);
    self->read_only = TRUE;
    sqlite3_stmt *stmt = prepare (self, "SELECT MAX(version) FROM schema_version;", &last_error);
    if (!stmt)
      continue;
    int version = 0;
    rc = sqlite3_step (stmt);
    if (rc == SQLITE_ROW) {
      version = sqlite3_column_int (stmt, 0);
      rc = sqlite3_step (stmt);
    }
    if (!finish_rows (self, stmt, rc, &last_error))
      continue;
    if (version > HANASHI_STORE_SCHEMA_VERSION) {
      g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_TOO_NEW,
                   _("The conversation database was written by a newer version of Hanashi (schema %d)."), version);
      return NULL;
    }
    if (version < HANASHI_STORE_SCHEMA_VERSION) {
      /* Reading an older schema needs its migration, which is a write. */
      g_set_error_literal (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_READ_ONLY,
                           error_sentence (HANASHI_STORE_ERROR_READ_ONLY));
      return NULL;
    }
    self->schema_version = version;
    return g_steal_pointer (&self);
  }
  g_propagate_error (error, g_steal_pointer (&last_error));
  return NULL;
}

gboolean
hanashi_store_is_read_only (HanashiStore *self)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), TRUE);
  return self->read_only;
}

int
hanashi_store_get_schema_version (HanashiStore *self)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), 0);
  return self->schema_version;
}

static gboolean
touch_conversation (HanashiStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "UPDATE conversations SET updated = ? WHERE id = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, g_get_real_time () / G_USEC_PER_SEC);
  sqlite3_bind_int64 (stmt, 2, id);
  return step_done (self, stmt, error);
}

gint64
hanashi_store_create_conversation (HanashiStore *self, const char *title, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), 0);
  sqlite3_stmt *stmt = prepare (self, "INSERT INTO conversations (title, created, updated) VALUES (?, ?, ?);", error);
  if (!stmt)
    return 0;
  gint64 now = g_get_real_time () / G_USEC_PER_SEC;
  sqlite3_bind_text (stmt, 1, title ? title : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64 (stmt, 2, now);
  sqlite3_bind_int64 (stmt, 3, now);
  if (!step_done (self, stmt, error))
    return 0;
  return sqlite3_last_insert_rowid (self->db);
}

static gboolean
update_conversation_text (HanashiStore *self, const char *sql, gint64 id, const char *value, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, sql, error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_text (stmt, 1, value ? value : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64 (stmt, 2, id);
  return step_changed (self, stmt, _("The conversation no longer exists."), error);
}

gboolean
hanashi_store_rename_conversation (HanashiStore *self, gint64 id, const char *title, GError **error)
{
  return update_conversation_text (self, "UPDATE conversations SET title = ? WHERE id = ?;", id, title, error);
}

gboolean
hanashi_store_set_system_prompt (HanashiStore *self, gint64 id, const char *prompt, GError **error)
{
  return update_conversation_text (self, "UPDATE conversations SET system_prompt = ? WHERE id = ?;", id, prompt, error);
}

gboolean
hanashi_store_set_conversation_params (HanashiStore *self, gint64 id, const char *params_json, GError **error)
{
  return update_conversation_text (self, "UPDATE conversations SET params = ? WHERE id = ?;", id,
                                   params_json ? params_json : "{}", error);
}

gboolean
hanashi_store_set_conversation_thinking (HanashiStore *self, gint64 id, gboolean enabled, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "UPDATE conversations SET thinking_off = ? WHERE id = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int (stmt, 1, enabled ? 0 : 1);
  sqlite3_bind_int64 (stmt, 2, id);
  return step_changed (self, stmt, _("The conversation no longer exists."), error);
}

gboolean
hanashi_store_set_conversation_engine (HanashiStore *self, gint64 id, const char *engine, GError **error)
{
  return update_conversation_text (self, "UPDATE conversations SET engine = ? WHERE id = ?;", id,
                                   engine ? engine : "", error);
}

gboolean
hanashi_store_delete_conversation (HanashiStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "DELETE FROM conversations WHERE id = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, id);
  return step_done (self, stmt, error);
}

void
hanashi_stored_conversation_free (HanashiStoredConversation *c)
{
  if (!c)
    return;
  g_free (c->title);
  g_free (c->system_prompt);
  g_free (c->params_json);
  g_free (c->engine);
  g_free (c);
}

void
hanashi_stored_message_free (HanashiStoredMessage *m)
{
  if (!m)
    return;
  g_free (m->role);
  g_free (m->text);
  g_free (m->thinking);
  g_free (m->params_json);
  g_clear_pointer (&m->token_probs, g_bytes_unref);
  g_free (m);
}

#define CONVERSATION_COLUMNS "c.id, c.title, c.created, c.updated, c.system_prompt, c.params, c.thinking_off, c.engine"

static HanashiStoredConversation *
read_conversation (sqlite3_stmt *stmt)
{
  HanashiStoredConversation *c = g_new0 (HanashiStoredConversation, 1);
  c->id = sqlite3_column_int64 (stmt, 0);
  c->title = g_strdup ((const char *) sqlite3_column_text (stmt, 1));
  c->created = sqlite3_column_int64 (stmt, 2);
  c->updated = sqlite3_column_int64 (stmt, 3);
  c->system_prompt = g_strdup ((const char *) sqlite3_column_text (stmt, 4));
  c->params_json = g_strdup ((const char *) sqlite3_column_text (stmt, 5));
  c->thinking_off = sqlite3_column_int (stmt, 6) != 0;
  c->engine = g_strdup ((const char *) sqlite3_column_text (stmt, 7));
  return c;
}

HanashiStoredConversation *
hanashi_store_dup_conversation (HanashiStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "SELECT " CONVERSATION_COLUMNS " FROM conversations c WHERE c.id = ?;", error);
  if (!stmt)
    return NULL;
  sqlite3_bind_int64 (stmt, 1, id);
  int rc = sqlite3_step (stmt);
  if (rc == SQLITE_ROW)
    {
      HanashiStoredConversation *c = read_conversation (stmt);
      sqlite3_finalize (stmt);
      return c;
    }
  if (finish_rows (self, stmt, rc, error))
    g_set_error_literal (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND, _("The conversation no longer exists."));
  return NULL;
}

GPtrArray *
hanashi_store_list_conversations (HanashiStore *self, const char *query, GError **error)
{
  gboolean filtered = query && *query;
  const char *sql = filtered
    ? "SELECT " CONVERSATION_COLUMNS " FROM conversations c WHERE instr(lower(c.title), lower(?1)) > 0"
      " OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation = c.id AND instr(lower(m.text), lower(?1)) > 0)"
      " ORDER BY c.updated DESC, c.id DESC;"
    : "SELECT " CONVERSATION_COLUMNS " FROM conversations c ORDER BY c.updated DESC, c.id DESC;";
  sqlite3_stmt *stmt = prepare (self, sql, error);
  if (!stmt)
    return NULL;
  if (filtered)
    sqlite3_bind_text (stmt, 1, query, -1, SQLITE_TRANSIENT);
  g_autoptr(GPtrArray) result = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_stored_conversation_free);
  int rc;
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    g_ptr_array_add (result, read_conversation (stmt));
  if (!finish_rows (self, stmt, rc, error))
    return NULL;
  return g_steal_pointer (&result);
}

static gint64
insert_message (HanashiStore *self, gint64 conversation_id, gint64 parent_id,
                gint64 alternative_of, const char *role, const char *text,
                gboolean complete, GError **error)
{
  gint64 group = 0;
  if (alternative_of > 0) {
    g_autoptr(HanashiStoredMessage) other = hanashi_store_dup_message (self, alternative_of, error);
    if (!other)
      return 0;
    group = other->alternative_group;
  }
  sqlite3_stmt *stmt = prepare (self,
    "INSERT INTO messages (conversation, parent, alternative_group, role, text, created, complete)"
    " VALUES (?, ?, ?, ?, ?, ?, ?);", error);
  if (!stmt)
    return 0;
  sqlite3_bind_int64 (stmt, 1, conversation_id);
  sqlite3_bind_int64 (stmt, 2, parent_id);
  sqlite3_bind_int64 (stmt, 3, group);
  sqlite3_bind_text (stmt, 4, role, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text (stmt, 5, text ? text : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64 (stmt, 6, g_get_real_time () / G_USEC_PER_SEC);
  sqlite3_bind_int (stmt, 7, complete ? 1 : 0);
  if (!step_done (self, stmt, error))
    return 0;
  gint64 id = sqlite3_last_insert_rowid (self->db);
  if (group == 0) {
    /* A new group is named after its first member. */
    stmt = prepare (self, "UPDATE messages SET alternative_group = id WHERE id = ?;", error);
    if (!stmt)
      return 0;
    sqlite3_bind_int64 (stmt, 1, id);
    if (!step_done (self, stmt, error))
      return 0;
  }
  /* The newest alternative is the one shown. */
  if (!hanashi_store_show_alternative (self, id, error))
    return 0;
  if (!touch_conversation (self, conversation_id, error))
    return 0;
  return id;
}

/* The insert, its group and the conversation's timestamp are one transaction: after a
 * failure the file holds none of them, and the caller still owns @text (the composer keeps
 * it for another try). */
gint64
hanashi_store_add_message (HanashiStore *self, gint64 conversation_id, gint64 parent_id,
                           gint64 alternative_of, const char *role, const char *text,
                           gboolean complete, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), 0);
  g_return_val_if_fail (role != NULL, 0);
  if (!exec_sql (self, "BEGIN IMMEDIATE;", error))
    return 0;
  gint64 id = insert_message (self, conversation_id, parent_id, alternative_of, role, text, complete, error);
  if (id == 0 || !exec_sql (self, "COMMIT;", error)) {
    rollback (self);
    return 0;
  }
  return id;
}

gboolean
hanashi_store_update_message (HanashiStore *self, gint64 id, const char *text,
                              int token_count, double generation_seconds,
                              const char *params_json, gboolean complete, GError **error)
{
  return hanashi_store_update_reply (self, id, text, NULL, 0, token_count, generation_seconds,
                                     params_json, complete, error);
}

gboolean
hanashi_store_update_reply (HanashiStore *self, gint64 id, const char *text,
                            const char *thinking, double thinking_seconds,
                            int token_count, double generation_seconds,
                            const char *params_json, gboolean complete, GError **error)
{
  sqlite3_stmt *stmt = prepare (self,
    "UPDATE messages SET text = ?, token_count = ?, generation_seconds = ?,"
    " params = COALESCE(?, params), complete = ?,"
    " thinking = COALESCE(?7, thinking), thinking_seconds = CASE WHEN ?7 IS NULL THEN thinking_seconds ELSE ?8 END"
    " WHERE id = ?6;", error);
  if (!stmt)
    return FALSE;
  if (thinking)
    sqlite3_bind_text (stmt, 7, thinking, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null (stmt, 7);
  sqlite3_bind_double (stmt, 8, thinking_seconds);
  sqlite3_bind_text (stmt, 1, text ? text : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int (stmt, 2, token_count);
  sqlite3_bind_double (stmt, 3, generation_seconds);
  if (params_json)
    sqlite3_bind_text (stmt, 4, params_json, -1, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null (stmt, 4);
  sqlite3_bind_int (stmt, 5, complete ? 1 : 0);
  sqlite3_bind_int64 (stmt, 6, id);
  return step_changed (self, stmt, _("The message no longer exists."), error);
}

static void
bind_token_probs (sqlite3_stmt *stmt, int index, GBytes *token_probs)
{
  gsize size = 0;
  const void *data = token_probs ? g_bytes_get_data (token_probs, &size) : NULL;
  if (size > 0)
    sqlite3_bind_blob (stmt, index, data, (int) size, SQLITE_TRANSIENT);
  else
    sqlite3_bind_null (stmt, index);
}

gboolean
hanashi_store_set_token_probs (HanashiStore *self, gint64 id, GBytes *token_probs, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "UPDATE messages SET token_probs = ? WHERE id = ?;", error);
  if (!stmt)
    return FALSE;
  bind_token_probs (stmt, 1, token_probs);
  sqlite3_bind_int64 (stmt, 2, id);
  return step_changed (self, stmt, _("The message no longer exists."), error);
}

gboolean
hanashi_store_delete_message (HanashiStore *self, gint64 id, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "DELETE FROM messages WHERE id = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, id);
  return step_done (self, stmt, error);
}

#define MESSAGE_COLUMNS "id, conversation, parent, alternative_group, role, text, created," \
                        " token_count, generation_seconds, params, complete, shown, thinking," \
                        " thinking_seconds, token_probs"

static HanashiStoredMessage *
read_message (sqlite3_stmt *stmt)
{
  HanashiStoredMessage *m = g_new0 (HanashiStoredMessage, 1);
  m->id = sqlite3_column_int64 (stmt, 0);
  m->conversation_id = sqlite3_column_int64 (stmt, 1);
  m->parent_id = sqlite3_column_int64 (stmt, 2);
  m->alternative_group = sqlite3_column_int64 (stmt, 3);
  m->role = g_strdup ((const char *) sqlite3_column_text (stmt, 4));
  m->text = g_strdup ((const char *) sqlite3_column_text (stmt, 5));
  m->created = sqlite3_column_int64 (stmt, 6);
  m->token_count = sqlite3_column_int (stmt, 7);
  m->generation_seconds = sqlite3_column_double (stmt, 8);
  m->params_json = g_strdup ((const char *) sqlite3_column_text (stmt, 9));
  m->complete = sqlite3_column_int (stmt, 10) != 0;
  m->shown = sqlite3_column_int (stmt, 11) != 0;
  m->thinking = g_strdup ((const char *) sqlite3_column_text (stmt, 12));
  m->thinking_seconds = sqlite3_column_double (stmt, 13);
  if (sqlite3_column_type (stmt, 14) == SQLITE_BLOB)
    m->token_probs = g_bytes_new (sqlite3_column_blob (stmt, 14), (gsize) sqlite3_column_bytes (stmt, 14));
  return m;
}

static GPtrArray *
list_messages_where (HanashiStore *self, const char *sql, gint64 arg, gboolean bind, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, sql, error);
  if (!stmt)
    return NULL;
  if (bind)
    sqlite3_bind_int64 (stmt, 1, arg);
  g_autoptr(GPtrArray) result = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_stored_message_free);
  int rc;
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW)
    g_ptr_array_add (result, read_message (stmt));
  if (!finish_rows (self, stmt, rc, error))
    return NULL;
  return g_steal_pointer (&result);
}

HanashiStoredMessage *
hanashi_store_dup_message (HanashiStore *self, gint64 id, GError **error)
{
  g_autoptr(GPtrArray) rows = list_messages_where (self, "SELECT " MESSAGE_COLUMNS " FROM messages WHERE id = ?;",
                                                   id, TRUE, error);
  if (!rows)
    return NULL;
  if (rows->len == 0) {
    g_set_error_literal (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_NOT_FOUND, _("The message no longer exists."));
    return NULL;
  }
  return g_ptr_array_steal_index (rows, 0);
}

GPtrArray *
hanashi_store_list_messages (HanashiStore *self, gint64 conversation_id, GError **error)
{
  return list_messages_where (self, "SELECT " MESSAGE_COLUMNS " FROM messages WHERE conversation = ? ORDER BY id;",
                              conversation_id, TRUE, error);
}

GPtrArray *
hanashi_store_list_alternatives (HanashiStore *self, gint64 message_id, GError **error)
{
  return list_messages_where (self,
    "SELECT " MESSAGE_COLUMNS " FROM messages WHERE alternative_group ="
    " (SELECT alternative_group FROM messages WHERE id = ?) ORDER BY id;", message_id, TRUE, error);
}

GPtrArray *
hanashi_store_list_incomplete (HanashiStore *self, GError **error)
{
  return list_messages_where (self, "SELECT " MESSAGE_COLUMNS " FROM messages WHERE complete = 0 ORDER BY id;",
                              0, FALSE, error);
}

gboolean
hanashi_store_show_alternative (HanashiStore *self, gint64 message_id, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), FALSE);
  sqlite3_stmt *stmt = prepare (self,
    "UPDATE messages SET shown = (id = ?1) WHERE alternative_group ="
    " (SELECT alternative_group FROM messages WHERE id = ?1);", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, message_id);
  return step_changed (self, stmt, _("The message no longer exists."), error);
}

gboolean
hanashi_store_reparent_children (HanashiStore *self, gint64 old_parent, gint64 new_parent,
                                 gint64 conversation_id, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), FALSE);
  sqlite3_stmt *stmt = prepare (self, "UPDATE messages SET parent = ? WHERE parent = ? AND conversation = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, new_parent);
  sqlite3_bind_int64 (stmt, 2, old_parent);
  sqlite3_bind_int64 (stmt, 3, conversation_id);
  return step_done (self, stmt, error);
}

static gboolean
collect_descendants (HanashiStore *self, gint64 id, GArray *ids, GError **error)
{
  sqlite3_stmt *stmt = prepare (self, "SELECT id FROM messages WHERE parent = ?;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, id);
  guint first = ids->len;
  while (sqlite3_step (stmt) == SQLITE_ROW) {
    gint64 child = sqlite3_column_int64 (stmt, 0);
    gboolean seen = FALSE;
    /* A damaged database may hold a cycle; each message is taken once. */
    for (guint i = 0; i < ids->len && !seen; i++)
      seen = g_array_index (ids, gint64, i) == child;
    if (!seen)
      g_array_append_val (ids, child);
  }
  sqlite3_finalize (stmt);
  guint last = ids->len;
  for (guint i = first; i < last; i++)
    if (!collect_descendants (self, g_array_index (ids, gint64, i), ids, error))
      return FALSE;
  return TRUE;
}

gboolean
hanashi_store_delete_branch (HanashiStore *self, gint64 message_id, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), FALSE);
  g_autoptr(GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint64));
  g_array_append_val (ids, message_id);
  if (!collect_descendants (self, message_id, ids, error))
    return FALSE;
  if (!exec_sql (self, "BEGIN IMMEDIATE;", error))
    return FALSE;
  for (guint i = 0; i < ids->len; i++) {
    sqlite3_stmt *stmt = prepare (self, "DELETE FROM messages WHERE id = ?;", error);
    if (!stmt) {
      rollback (self);
      return FALSE;
    }
    sqlite3_bind_int64 (stmt, 1, g_array_index (ids, gint64, i));
    if (!step_done (self, stmt, error)) {
      rollback (self);
      return FALSE;
    }
  }
  if (!exec_sql (self, "COMMIT;", error)) {
    rollback (self);
    return FALSE;
  }
  return TRUE;
}

void
hanashi_conversation_summary_free (HanashiConversationSummary *summary)
{
  if (!summary)
    return;
  g_free (summary->title);
  g_free (summary->snippet);
  g_free (summary);
}

/* LIKE treats % and _ as wildcards; a search for "50%" must find only "50%". */
static char *
like_pattern (const char *query)
{
  GString *pattern = g_string_new ("%");
  for (const char *p = query; *p; p++) {
    if (*p == '%' || *p == '_' || *p == '\\')
      g_string_append_c (pattern, '\\');
    g_string_append_c (pattern, *p);
  }
  g_string_append_c (pattern, '%');
  return g_string_free (pattern, FALSE);
}

GPtrArray *
hanashi_store_list_summaries (HanashiStore *self, const char *query, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), NULL);
  gboolean filtered = query && *query;
  const char *sql = filtered
    ? "SELECT c.id, c.title, c.updated, (SELECT substr(m.text, 1, 120) FROM messages m"
      "  WHERE m.conversation = c.id ORDER BY m.id DESC LIMIT 1)"
      " FROM conversations c WHERE c.title LIKE ?1 ESCAPE '\\'"
      " OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation = c.id AND m.text LIKE ?1 ESCAPE '\\')"
      " ORDER BY c.updated DESC, c.id DESC;"
    : "SELECT c.id, c.title, c.updated, (SELECT substr(m.text, 1, 120) FROM messages m"
      "  WHERE m.conversation = c.id ORDER BY m.id DESC LIMIT 1)"
      " FROM conversations c ORDER BY c.updated DESC, c.id DESC;";
  sqlite3_stmt *stmt = prepare (self, sql, error);
  if (!stmt)
    return NULL;
  g_autofree char *pattern = filtered ? like_pattern (query) : NULL;
  if (filtered)
    sqlite3_bind_text (stmt, 1, pattern, -1, SQLITE_TRANSIENT);
  GPtrArray *result = g_ptr_array_new_with_free_func ((GDestroyNotify) hanashi_conversation_summary_free);
  int rc;
  while ((rc = sqlite3_step (stmt)) == SQLITE_ROW) {
    HanashiConversationSummary *s = g_new0 (HanashiConversationSummary, 1);
    s->id = sqlite3_column_int64 (stmt, 0);
    s->title = g_strdup ((const char *) sqlite3_column_text (stmt, 1));
    s->updated = sqlite3_column_int64 (stmt, 2);
    const char *snippet = (const char *) sqlite3_column_text (stmt, 3);
    s->snippet = g_strdup (snippet ? snippet : "");
    g_ptr_array_add (result, s);
  }
  if (rc != SQLITE_DONE) {
    set_sqlite_error (self, error);
    sqlite3_finalize (stmt);
    g_ptr_array_unref (result);
    return NULL;
  }
  sqlite3_finalize (stmt);
  return result;
}

static gint64
map_reference (GHashTable *ids, gint64 reference, gint64 message_id, GError **error)
{
  if (reference == 0)
    return 0;
  gpointer value;
  if (!g_hash_table_lookup_extended (ids, &reference, NULL, &value)) {
    g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_FAILED,
                 "Message %" G_GINT64_FORMAT " refers to message %" G_GINT64_FORMAT
                 ", which does not come before it", message_id, reference);
    return -1;
  }
  return *(gint64 *) value;
}

static gboolean insert_message_rows (HanashiStore *self, gint64 conversation_id, GPtrArray *messages,
                                     gboolean keep_ids, GError **error);

static gint64
insert_conversation_rows (HanashiStore *self, const HanashiStoredConversation *c,
                          GPtrArray *messages, gboolean keep_ids, GError **error)
{
  sqlite3_stmt *stmt = prepare (self,
    "INSERT INTO conversations (id, title, created, updated, system_prompt, params, thinking_off, engine)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?);", error);
  if (!stmt)
    return 0;
  if (keep_ids)
    sqlite3_bind_int64 (stmt, 1, c->id);
  else
    sqlite3_bind_null (stmt, 1);
  sqlite3_bind_text (stmt, 2, c->title ? c->title : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64 (stmt, 3, c->created);
  sqlite3_bind_int64 (stmt, 4, c->updated);
  sqlite3_bind_text (stmt, 5, c->system_prompt ? c->system_prompt : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_text (stmt, 6, c->params_json ? c->params_json : "{}", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int (stmt, 7, c->thinking_off ? 1 : 0);
  sqlite3_bind_text (stmt, 8, c->engine ? c->engine : "", -1, SQLITE_TRANSIENT);
  if (!step_done (self, stmt, error))
    return 0;
  gint64 conversation_id = sqlite3_last_insert_rowid (self->db);
  return insert_message_rows (self, conversation_id, messages, keep_ids, error) ? conversation_id : 0;
}

/* Inserts messages into a conversation, in order; parent and group ids are references to
 * earlier messages of the list, rewritten to the new ids unless @keep_ids. */
static gboolean
insert_message_rows (HanashiStore *self, gint64 conversation_id, GPtrArray *messages,
                     gboolean keep_ids, GError **error)
{
  g_autoptr(GHashTable) ids = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, g_free);
  sqlite3_stmt *stmt = prepare (self,
    "INSERT INTO messages (id, conversation, parent, alternative_group, role, text, created,"
    " token_count, generation_seconds, params, complete, shown, thinking, thinking_seconds, token_probs)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);", error);
  if (!stmt)
    return FALSE;
  for (guint i = 0; messages && i < messages->len; i++) {
    const HanashiStoredMessage *m = g_ptr_array_index (messages, i);
    gint64 parent = map_reference (ids, m->parent_id, m->id, error);
    if (parent < 0)
      goto fail;
    /* The first member of a group names it, so a group may name the message itself. */
    gint64 group = m->alternative_group == m->id ? 0 : map_reference (ids, m->alternative_group, m->id, error);
    if (group < 0)
      goto fail;
    sqlite3_reset (stmt);
    if (keep_ids)
      sqlite3_bind_int64 (stmt, 1, m->id);
    else
      sqlite3_bind_null (stmt, 1);
    sqlite3_bind_int64 (stmt, 2, conversation_id);
    sqlite3_bind_int64 (stmt, 3, parent);
    sqlite3_bind_int64 (stmt, 4, group);
    sqlite3_bind_text (stmt, 5, m->role ? m->role : "user", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text (stmt, 6, m->text ? m->text : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64 (stmt, 7, m->created);
    sqlite3_bind_int (stmt, 8, m->token_count);
    sqlite3_bind_double (stmt, 9, m->generation_seconds);
    sqlite3_bind_text (stmt, 10, m->params_json ? m->params_json : "{}", -1, SQLITE_TRANSIENT);
    sqlite3_bind_int (stmt, 11, m->complete ? 1 : 0);
    /* Undo keeps which version was shown; an import without that knowledge shows the newest. */
    sqlite3_bind_int (stmt, 12, m->shown ? 1 : 0);
    sqlite3_bind_text (stmt, 13, m->thinking ? m->thinking : "", -1, SQLITE_TRANSIENT);
    sqlite3_bind_double (stmt, 14, m->thinking_seconds);
    bind_token_probs (stmt, 15, m->token_probs);
    if (sqlite3_step (stmt) != SQLITE_DONE) {
      set_sqlite_error (self, error);
      goto fail;
    }
    gint64 new_id = sqlite3_last_insert_rowid (self->db);
    if (g_hash_table_contains (ids, &m->id)) {
      g_set_error (error, HANASHI_STORE_ERROR, HANASHI_STORE_ERROR_FAILED,
                   "Message id %" G_GINT64_FORMAT " appears twice", m->id);
      goto fail;
    }
    g_hash_table_insert (ids, g_memdup2 (&m->id, sizeof m->id), g_memdup2 (&new_id, sizeof new_id));
  }
  sqlite3_finalize (stmt);
  /* Groups started by a message inside this insert are named after it, as add_message does. */
  stmt = prepare (self, "UPDATE messages SET alternative_group = id WHERE conversation = ? AND alternative_group = 0;", error);
  if (!stmt)
    return FALSE;
  sqlite3_bind_int64 (stmt, 1, conversation_id);
  return step_done (self, stmt, error);

fail:
  sqlite3_finalize (stmt);
  return FALSE;
}

gboolean
hanashi_store_replace_messages (HanashiStore *self, gint64 conversation_id, GPtrArray *messages,
                                GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), FALSE);
  if (!exec_sql (self, "BEGIN IMMEDIATE;", error))
    return FALSE;
  sqlite3_stmt *stmt = prepare (self, "DELETE FROM messages WHERE conversation = ?;", error);
  gboolean ok = stmt != NULL;
  if (ok) {
    sqlite3_bind_int64 (stmt, 1, conversation_id);
    ok = step_done (self, stmt, error);
  }
  ok = ok && insert_message_rows (self, conversation_id, messages, TRUE, error)
       && exec_sql (self, "COMMIT;", error);
  if (!ok)
    exec_sql (self, "ROLLBACK;", NULL);
  return ok;
}

gint64
hanashi_store_insert_conversation (HanashiStore *self, const HanashiStoredConversation *conversation,
                                   GPtrArray *messages, gboolean keep_ids, GError **error)
{
  g_return_val_if_fail (HANASHI_IS_STORE (self), 0);
  g_return_val_if_fail (conversation != NULL, 0);
  if (!exec_sql (self, "BEGIN IMMEDIATE;", error))
    return 0;
  gint64 id = insert_conversation_rows (self, conversation, messages, keep_ids, error);
  if (id == 0 || !exec_sql (self, "COMMIT;", error)) {
    exec_sql (self, "ROLLBACK;", NULL);
    return 0;
  }
  return id;
}

/* hanashi-message.c — a GObject per message so list rows can bind to property changes
 * while a reply streams in.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-message"

#include "config.h"

#include "hanashi-message.h"
#include "hanashi-token-probs.h"

#include <string.h>

struct _HanashiMessage {
  GObject parent_instance;
  gint64 id;
  char *role;
  GString *text;
  GString *thinking;
  double thinking_seconds;
  /* While a reply streams: its output is split into thinking and answer. */
  HanashiThinkSplitter *splitter;
  gint64 output_started;      /* monotonic time of the first output, 0 before */
  gboolean thinking_active;
  gboolean complete;
  int token_count;
  double generation_seconds;
  gint64 parent_id;
  guint alternative_index;
  guint n_alternatives;
  GArray *token_probs;        /* HnTokenProbs, or NULL */
};

G_DEFINE_FINAL_TYPE (HanashiMessage, hanashi_message, G_TYPE_OBJECT)

enum {
  PROP_0,
  PROP_ID,
  PROP_ROLE,
  PROP_TEXT,
  PROP_COMPLETE,
  PROP_TOKEN_COUNT,
  PROP_GENERATION_SECONDS,
  PROP_ALTERNATIVE_INDEX,
  PROP_N_ALTERNATIVES,
  PROP_THINKING,
  PROP_THINKING_SECONDS,
  PROP_THINKING_ACTIVE,
  N_PROPS
};

static GParamSpec *properties[N_PROPS];

static void
hanashi_message_get_property (GObject *object, guint prop_id, GValue *value, GParamSpec *pspec)
{
  HanashiMessage *self = HANASHI_MESSAGE (object);
  switch (prop_id) {
  case PROP_ID: g_value_set_int64 (value, self->id); break;
  case PROP_ROLE: g_value_set_string (value, self->role); break;
  case PROP_TEXT: g_value_set_string (value, self->text->str); break;
  case PROP_COMPLETE: g_value_set_boolean (value, self->complete); break;
  case PROP_TOKEN_COUNT: g_value_set_int (value, self->token_count); break;
  case PROP_GENERATION_SECONDS: g_value_set_double (value, self->generation_seconds); break;
  case PROP_ALTERNATIVE_INDEX: g_value_set_uint (value, self->alternative_index); break;
  case PROP_N_ALTERNATIVES: g_value_set_uint (value, self->n_alternatives); break;
  case PROP_THINKING: g_value_set_string (value, self->thinking->str); break;
  case PROP_THINKING_SECONDS: g_value_set_double (value, self->thinking_seconds); break;
  case PROP_THINKING_ACTIVE: g_value_set_boolean (value, self->thinking_active); break;
  default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
hanashi_message_set_property (GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec)
{
  HanashiMessage *self = HANASHI_MESSAGE (object);
  switch (prop_id) {
  case PROP_ID: self->id = g_value_get_int64 (value); break;
  case PROP_ROLE: g_free (self->role); self->role = g_value_dup_string (value); break;
  case PROP_TEXT: hanashi_message_set_text (self, g_value_get_string (value)); break;
  case PROP_COMPLETE: hanashi_message_set_complete (self, g_value_get_boolean (value)); break;
  default: G_OBJECT_WARN_INVALID_PROPERTY_ID (object, prop_id, pspec);
  }
}

static void
hanashi_message_finalize (GObject *object)
{
  HanashiMessage *self = HANASHI_MESSAGE (object);
  g_free (self->role);
  g_string_free (self->text, TRUE);
  g_string_free (self->thinking, TRUE);
  g_clear_pointer (&self->splitter, hanashi_think_splitter_free);
  g_clear_pointer (&self->token_probs, g_array_unref);
  G_OBJECT_CLASS (hanashi_message_parent_class)->finalize (object);
}

static void
hanashi_message_class_init (HanashiMessageClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);
  object_class->get_property = hanashi_message_get_property;
  object_class->set_property = hanashi_message_set_property;
  object_class->finalize = hanashi_message_finalize;

  properties[PROP_ID] = g_param_spec_int64 ("id", NULL, NULL, 0, G_MAXINT64, 0,
    G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  properties[PROP_ROLE] = g_param_spec_string ("role", NULL, NULL, "user",
    G_PARAM_READWRITE | G_PARAM_CONSTRUCT_ONLY | G_PARAM_STATIC_STRINGS);
  properties[PROP_TEXT] = g_param_spec_string ("text", NULL, NULL, "",
    G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_COMPLETE] = g_param_spec_boolean ("complete", NULL, NULL, TRUE,
    G_PARAM_READWRITE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_TOKEN_COUNT] = g_param_spec_int ("token-count", NULL, NULL, 0, G_MAXINT, 0,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_GENERATION_SECONDS] = g_param_spec_double ("generation-seconds", NULL, NULL, 0, G_MAXDOUBLE, 0,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_ALTERNATIVE_INDEX] = g_param_spec_uint ("alternative-index", NULL, NULL, 0, G_MAXUINT, 0,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_N_ALTERNATIVES] = g_param_spec_uint ("n-alternatives", NULL, NULL, 1, G_MAXUINT, 1,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_THINKING] = g_param_spec_string ("thinking", NULL, NULL, "",
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_THINKING_SECONDS] = g_param_spec_double ("thinking-seconds", NULL, NULL, 0, G_MAXDOUBLE, 0,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  properties[PROP_THINKING_ACTIVE] = g_param_spec_boolean ("thinking-active", NULL, NULL, FALSE,
    G_PARAM_READABLE | G_PARAM_EXPLICIT_NOTIFY | G_PARAM_STATIC_STRINGS);
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
hanashi_message_init (HanashiMessage *self)
{
  self->text = g_string_new (NULL);
  self->thinking = g_string_new (NULL);
  self->complete = TRUE;
  self->n_alternatives = 1;
}

HanashiMessage *
hanashi_message_new (gint64 id, const char *role, const char *text)
{
  return g_object_new (HANASHI_TYPE_MESSAGE, "id", id, "role", role, "text", text ? text : "", NULL);
}

HanashiMessage *
hanashi_message_new_from_stored (const HanashiStoredMessage *stored)
{
  HanashiMessage *self = hanashi_message_new (stored->id, stored->role, stored->text);
  self->complete = stored->complete;
  self->token_count = stored->token_count;
  self->generation_seconds = stored->generation_seconds;
  self->parent_id = stored->parent_id;
  g_string_assign (self->thinking, stored->thinking ? stored->thinking : "");
  self->thinking_seconds = stored->thinking_seconds;
  if (stored->token_probs != NULL)
    {
      /* a damaged blob costs the shading, not the message */
      self->token_probs = hanashi_token_probs_unpack (stored->token_probs, NULL);
      if (self->token_probs != NULL && self->token_probs->len == 0)
        g_clear_pointer (&self->token_probs, g_array_unref);
    }
  return self;
}

void
hanashi_message_append_token_probs (HanashiMessage *self, GBytes *records)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  gsize size = 0;
  const HnTokenProbs *recs = g_bytes_get_data (records, &size);
  if (size < sizeof *recs)
    return;
  if (self->token_probs == NULL)
    self->token_probs = g_array_new (FALSE, FALSE, sizeof (HnTokenProbs));
  g_array_append_vals (self->token_probs, recs, size / sizeof *recs);
}

GBytes *
hanashi_message_dup_token_probs_blob (HanashiMessage *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE (self), NULL);
  if (self->token_probs == NULL)
    return NULL;
  return hanashi_token_probs_pack ((const HnTokenProbs *) (void *) self->token_probs->data, self->token_probs->len);
}

GArray *
hanashi_message_get_token_probs (HanashiMessage *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE (self), NULL);
  return self->token_probs;
}

gint64 hanashi_message_get_id (HanashiMessage *self) { return self->id; }
const char *hanashi_message_get_role (HanashiMessage *self) { return self->role; }
gboolean hanashi_message_is_user (HanashiMessage *self) { return g_strcmp0 (self->role, "user") == 0; }
const char *hanashi_message_get_text (HanashiMessage *self) { return self->text->str; }
gboolean hanashi_message_get_complete (HanashiMessage *self) { return self->complete; }
int hanashi_message_get_token_count (HanashiMessage *self) { return self->token_count; }
double hanashi_message_get_generation_seconds (HanashiMessage *self) { return self->generation_seconds; }

void
hanashi_message_set_text (HanashiMessage *self, const char *text)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  if (g_strcmp0 (self->text->str, text ? text : "") == 0)
    return;
  g_string_assign (self->text, text ? text : "");
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TEXT]);
}

void
hanashi_message_append_text (HanashiMessage *self, const char *piece)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  if (!piece || !*piece)
    return;
  g_string_append (self->text, piece);
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TEXT]);
}

void
hanashi_message_set_complete (HanashiMessage *self, gboolean complete)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  complete = !!complete;
  if (self->complete == complete)
    return;
  self->complete = complete;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_COMPLETE]);
}

void
hanashi_message_set_stats (HanashiMessage *self, int token_count, double generation_seconds)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  g_object_freeze_notify (G_OBJECT (self));
  if (self->token_count != token_count) {
    self->token_count = MAX (token_count, 0);
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TOKEN_COUNT]);
  }
  if (self->generation_seconds != generation_seconds) {
    self->generation_seconds = MAX (generation_seconds, 0.0);
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_GENERATION_SECONDS]);
  }
  g_object_thaw_notify (G_OBJECT (self));
}

double
hanashi_message_get_tokens_per_second (HanashiMessage *self)
{
  g_return_val_if_fail (HANASHI_IS_MESSAGE (self), 0.0);
  if (self->generation_seconds <= 0.0 || self->token_count <= 0)
    return 0.0;
  return self->token_count / self->generation_seconds;
}

gint64 hanashi_message_get_parent_id (HanashiMessage *self) { return self->parent_id; }
void hanashi_message_set_parent_id (HanashiMessage *self, gint64 parent_id) { self->parent_id = parent_id; }
guint hanashi_message_get_alternative_index (HanashiMessage *self) { return self->alternative_index; }
guint hanashi_message_get_n_alternatives (HanashiMessage *self) { return self->n_alternatives; }

void
hanashi_message_set_alternatives (HanashiMessage *self, guint index, guint n_alternatives)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  n_alternatives = MAX (n_alternatives, 1);
  index = MIN (index, n_alternatives - 1);
  g_object_freeze_notify (G_OBJECT (self));
  if (self->alternative_index != index) {
    self->alternative_index = index;
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_ALTERNATIVE_INDEX]);
  }
  if (self->n_alternatives != n_alternatives) {
    self->n_alternatives = n_alternatives;
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_N_ALTERNATIVES]);
  }
  g_object_thaw_notify (G_OBJECT (self));
}

/* ---- a reasoning model's thinking ------------------------------------------------------ */

const char *hanashi_message_get_thinking (HanashiMessage *self) { return self->thinking->str; }
double hanashi_message_get_thinking_seconds (HanashiMessage *self) { return self->thinking_seconds; }
gboolean hanashi_message_get_thinking_active (HanashiMessage *self) { return self->thinking_active; }

void
hanashi_message_set_thinking (HanashiMessage *self, const char *thinking, double seconds)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  g_object_freeze_notify (G_OBJECT (self));
  if (g_strcmp0 (self->thinking->str, thinking ? thinking : "") != 0)
    {
      g_string_assign (self->thinking, thinking ? thinking : "");
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING]);
    }
  if (self->thinking_seconds != seconds)
    {
      self->thinking_seconds = MAX (seconds, 0.0);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING_SECONDS]);
    }
  g_object_thaw_notify (G_OBJECT (self));
}

static void
set_thinking_active (HanashiMessage *self, gboolean active)
{
  if (self->thinking_active == active)
    return;
  if (!active)
    {
      /* The thinking is over: how long it took, and no trailing blank lines. */
      g_strchomp (self->thinking->str);
      self->thinking->len = strlen (self->thinking->str);
      self->thinking_seconds = (g_get_monotonic_time () - self->output_started) / (double) G_USEC_PER_SEC;
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING]);
      g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING_SECONDS]);
    }
  self->thinking_active = active;
  g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING_ACTIVE]);
}

typedef struct {
  HanashiMessage *self;
  gboolean text_changed, thinking_changed;
} Output;

static void
receive_part (gpointer data, HanashiThinkPart part, const char *text, gsize len)
{
  Output *out = data;
  HanashiMessage *self = out->self;
  switch (part)
    {
    case HANASHI_THINK_PART_THINKING:
      g_string_append_len (self->thinking, text, (gssize) len);
      out->thinking_changed = TRUE;
      break;
    case HANASHI_THINK_PART_ANSWER:
      g_string_append_len (self->text, text, (gssize) len);
      out->text_changed = TRUE;
      break;
    case HANASHI_THINK_PART_ANSWER_WAS_THINKING:
      /* Only the end marker came (the prompt had opened the thinking): what looked like
       * the answer was thinking. */
      g_string_append (self->thinking, self->text->str);
      g_string_truncate (self->text, 0);
      out->text_changed = out->thinking_changed = TRUE;
      break;
    }
}

void
hanashi_message_begin_output (HanashiMessage *self, HanashiThinkStart start)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  g_clear_pointer (&self->splitter, hanashi_think_splitter_free);
  self->splitter = hanashi_think_splitter_new (start);
  self->output_started = 0;
}

static void
after_output (HanashiMessage *self, Output *out)
{
  g_object_freeze_notify (G_OBJECT (self));
  if (out->thinking_changed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING]);
  if (hanashi_think_splitter_is_thinking (self->splitter))
    set_thinking_active (self, TRUE);
  else if (self->thinking_active || (out->thinking_changed && self->thinking_seconds == 0))
    {
      self->thinking_active = TRUE;   /* a lone end marker: the thinking ends here too */
      set_thinking_active (self, FALSE);
    }
  if (out->text_changed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TEXT]);
  g_object_thaw_notify (G_OBJECT (self));
}

void
hanashi_message_append_output (HanashiMessage *self, const char *piece)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  if (self->splitter == NULL)
    {
      hanashi_message_append_text (self, piece);
      return;
    }
  if (piece == NULL || *piece == '\0')
    return;
  if (self->output_started == 0)
    self->output_started = g_get_monotonic_time ();
  Output out = { self, FALSE, FALSE };
  hanashi_think_splitter_feed (self->splitter, piece, strlen (piece), receive_part, &out);
  after_output (self, &out);
}

void
hanashi_message_end_output (HanashiMessage *self)
{
  g_return_if_fail (HANASHI_IS_MESSAGE (self));
  if (self->splitter == NULL)
    return;
  Output out = { self, FALSE, FALSE };
  hanashi_think_splitter_finish (self->splitter, receive_part, &out);
  g_clear_pointer (&self->splitter, hanashi_think_splitter_free);
  g_object_freeze_notify (G_OBJECT (self));
  if (out.thinking_changed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_THINKING]);
  if (self->thinking_active)
    set_thinking_active (self, FALSE);
  if (out.text_changed)
    g_object_notify_by_pspec (G_OBJECT (self), properties[PROP_TEXT]);
  g_object_thaw_notify (G_OBJECT (self));
}

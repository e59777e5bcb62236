/* hanashi-message.c — a GObject per message so list rows can bind to property changes
 * while a reply streams in. */
#include "hanashi-message.h"

struct _HanashiMessage {
  GObject parent_instance;
  gint64 id;
  char *role;
  GString *text;
  gboolean complete;
  int token_count;
  double generation_seconds;
  gint64 parent_id;
  guint alternative_index;
  guint n_alternatives;
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
  g_object_class_install_properties (object_class, N_PROPS, properties);
}

static void
hanashi_message_init (HanashiMessage *self)
{
  self->text = g_string_new (NULL);
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
  return self;
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

/* hanashi-token-probs.c — see the header for the formats.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#define G_LOG_DOMAIN "hanashi-token-probs"

#include "hanashi-token-probs.h"

#include <glib/gi18n.h>
#include <string.h>

static const char blob_magic[4] = { 'H', 'N', 'P', '1' };

static void
put_u32 (GByteArray *out, guint32 v)
{
  guint32 le = GUINT32_TO_LE (v);
  g_byte_array_append (out, (const guint8 *) &le, 4);
}

static void
put_f32 (GByteArray *out, float v)
{
  guint32 bits;
  memcpy (&bits, &v, 4);
  put_u32 (out, bits);
}

GBytes *
hanashi_token_probs_pack (const HnTokenProbs *records, gsize n_records)
{
  GByteArray *out = g_byte_array_sized_new (4 + (guint) n_records * 143);
  g_byte_array_append (out, (const guint8 *) blob_magic, 4);
  for (gsize i = 0; i < n_records; i++)
    {
      const HnTokenProbs *r = &records[i];
      guint8 n = (guint8) MIN (r->n_candidates, HN_PROBS_MAX_K);
      put_u32 (out, (guint32) r->token);
      put_f32 (out, r->logprob);
      put_f32 (out, r->p);
      g_byte_array_append (out, &n, 1);
      for (guint k = 0; k < n; k++)
        {
          const HnProbCandidate *c = &r->candidates[k];
          put_u32 (out, (guint32) c->id);
          put_f32 (out, c->logprob);
          put_f32 (out, c->p);
          g_byte_array_append (out, &c->removed_by, 1);
        }
    }
  return g_byte_array_free_to_bytes (out);
}

typedef struct {
  const guint8 *p;
  gsize left;
} Reader;

static gboolean
get_u32 (Reader *r, guint32 *v)
{
  if (r->left < 4)
    return FALSE;
  guint32 le;
  memcpy (&le, r->p, 4);
  *v = GUINT32_FROM_LE (le);
  r->p += 4;
  r->left -= 4;
  return TRUE;
}

static gboolean
get_f32 (Reader *r, float *v)
{
  guint32 bits;
  if (!get_u32 (r, &bits))
    return FALSE;
  memcpy (v, &bits, 4);
  return TRUE;
}

static gboolean
get_u8 (Reader *r, guint8 *v)
{
  if (r->left < 1)
    return FALSE;
  *v = *r->p++;
  r->left--;
  return TRUE;
}

GArray *
hanashi_token_probs_unpack (GBytes *blob, GError **error)
{
  GArray *records = g_array_new (FALSE, TRUE, sizeof (HnTokenProbs));
  gsize size = 0;
  const guint8 *data = blob ? g_bytes_get_data (blob, &size) : NULL;
  if (size == 0)
    return records;
  Reader r = { data, size };
  if (size < 4 || memcmp (data, blob_magic, 4) != 0)
    goto bad;
  r.p += 4;
  r.left -= 4;
  while (r.left > 0)
    {
      HnTokenProbs rec = { 0 };
      guint32 token;
      guint8 n;
      if (!get_u32 (&r, &token) || !get_f32 (&r, &rec.logprob) || !get_f32 (&r, &rec.p) || !get_u8 (&r, &n)
          || n > HN_PROBS_MAX_K)
        goto bad;
      rec.token = (gint32) token;
      rec.n_candidates = n;
      for (guint k = 0; k < n; k++)
        {
          HnProbCandidate *c = &rec.candidates[k];
          guint32 id;
          if (!get_u32 (&r, &id) || !get_f32 (&r, &c->logprob) || !get_f32 (&r, &c->p) || !get_u8 (&r, &c->removed_by)
              || c->removed_by >= HN_STAGE_COUNT)
            goto bad;
          c->id = (gint32) id;
        }
      g_array_append_val (records, rec);
    }
  return records;
bad:
  g_array_unref (records);
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       _("The stored token probabilities are damaged."));
  return NULL;
}

static void
add_candidate_members (JsonBuilder *b, gint32 token, float logprob, float p)
{
  json_builder_set_member_name (b, "token");
  json_builder_add_int_value (b, token);
  json_builder_set_member_name (b, "logprob");
  json_builder_add_double_value (b, logprob);
  json_builder_set_member_name (b, "p");
  json_builder_add_double_value (b, p);
}

JsonNode *
hanashi_token_probs_to_json (GBytes *blob)
{
  g_autoptr (GArray) records = hanashi_token_probs_unpack (blob, NULL);
  g_autoptr (JsonBuilder) b = json_builder_new ();
  json_builder_begin_array (b);
  for (guint i = 0; records && i < records->len; i++)
    {
      const HnTokenProbs *r = &g_array_index (records, HnTokenProbs, i);
      json_builder_begin_object (b);
      add_candidate_members (b, r->token, r->logprob, r->p);
      json_builder_set_member_name (b, "candidates");
      json_builder_begin_array (b);
      for (guint k = 0; k < r->n_candidates; k++)
        {
          const HnProbCandidate *c = &r->candidates[k];
          json_builder_begin_object (b);
          add_candidate_members (b, c->id, c->logprob, c->p);
          json_builder_set_member_name (b, "removed_by");
          const char *stage = hn_sampler_stage_name ((HnSamplerStage) c->removed_by);
          if (stage)
            json_builder_add_string_value (b, stage);
          else
            json_builder_add_null_value (b);
          json_builder_end_object (b);
        }
      json_builder_end_array (b);
      json_builder_end_object (b);
    }
  json_builder_end_array (b);
  return json_builder_get_root (b);
}

static gboolean
read_candidate (JsonNode *node, gint32 *token, float *logprob, float *p)
{
  if (!JSON_NODE_HOLDS_OBJECT (node))
    return FALSE;
  JsonObject *o = json_node_get_object (node);
  JsonNode *t = json_object_get_member (o, "token"), *l = json_object_get_member (o, "logprob"),
           *pn = json_object_get_member (o, "p");
  if (!t || !l || !pn || json_node_get_value_type (t) != G_TYPE_INT64
      || !JSON_NODE_HOLDS_VALUE (l) || !JSON_NODE_HOLDS_VALUE (pn))
    return FALSE;
  gint64 id = json_node_get_int (t);
  if (id < 0 || id > G_MAXINT32)
    return FALSE;
  *token = (gint32) id;
  *logprob = (float) json_node_get_double (l);
  *p = (float) json_node_get_double (pn);
  /* a little slack: float rounding can put a sure token at 1.0000001 or a logprob at +1e-7 */
  return *p >= 0.0f && *p <= 1.0001f && *logprob <= 1e-4f;
}

GBytes *
hanashi_token_probs_from_json (JsonNode *node, GError **error)
{
  g_autoptr (GArray) records = g_array_new (FALSE, TRUE, sizeof (HnTokenProbs));
  if (!JSON_NODE_HOLDS_ARRAY (node))
    goto bad;
  JsonArray *array = json_node_get_array (node);
  for (guint i = 0; i < json_array_get_length (array); i++)
    {
      HnTokenProbs rec = { 0 };
      JsonNode *item = json_array_get_element (array, i);
      if (!read_candidate (item, &rec.token, &rec.logprob, &rec.p))
        goto bad;
      JsonObject *o = json_node_get_object (item);
      JsonNode *cands = json_object_get_member (o, "candidates");
      if (!cands || !JSON_NODE_HOLDS_ARRAY (cands))
        goto bad;
      JsonArray *ca = json_node_get_array (cands);
      if (json_array_get_length (ca) > HN_PROBS_MAX_K)
        goto bad;
      rec.n_candidates = json_array_get_length (ca);
      for (guint k = 0; k < rec.n_candidates; k++)
        {
          HnProbCandidate *c = &rec.candidates[k];
          JsonNode *cn = json_array_get_element (ca, k);
          if (!read_candidate (cn, &c->id, &c->logprob, &c->p))
            goto bad;
          JsonNode *stage = json_object_get_member (json_node_get_object (cn), "removed_by");
          if (stage == NULL || JSON_NODE_HOLDS_NULL (stage))
            c->removed_by = HN_STAGE_NONE;
          else if (json_node_get_value_type (stage) == G_TYPE_STRING
                   && hn_sampler_stage_from_name (json_node_get_string (stage)) != HN_STAGE_NONE)
            c->removed_by = (guint8) hn_sampler_stage_from_name (json_node_get_string (stage));
          else
            goto bad;
        }
      g_array_append_val (records, rec);
    }
  return hanashi_token_probs_pack ((const HnTokenProbs *) (void *) records->data, records->len);
bad:
  g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                       _("The token probabilities in the file are not in the expected form."));
  return NULL;
}

/* The last occurrence of needle in haystack, or NULL. */
static const char *
find_last (const char *haystack, gsize haystack_len, const char *needle, gsize needle_len)
{
  if (needle_len == 0 || needle_len > haystack_len)
    return NULL;
  for (gsize at = haystack_len - needle_len + 1; at-- > 0;)
    if (memcmp (haystack + at, needle, needle_len) == 0)
      return haystack + at;
  return NULL;
}

GArray *
hanashi_token_spans_map (const char *text, GBytes *const *pieces, guint n_pieces)
{
  g_return_val_if_fail (text != NULL, NULL);
  gsize text_len = strlen (text);
  g_autoptr (GByteArray) written = g_byte_array_new ();
  for (guint i = 0; i < n_pieces; i++)
    if (pieces[i] != NULL)
      {
        gsize len = 0;
        const guint8 *data = g_bytes_get_data (pieces[i], &len);
        g_byte_array_append (written, data, (guint) len);
      }
  const char *found = find_last ((const char *) written->data, written->len, text, text_len);
  if (found == NULL)
    return NULL;
  gsize base = (gsize) (found - (const char *) written->data);

  /* chars_before[b]: how many characters of the text start before byte b, so a character
   * cut over tokens goes to the token holding its first byte */
  g_autofree int *chars_before = g_new (int, text_len + 1);
  int n_chars = 0;
  for (gsize b = 0; b <= text_len; b++)
    {
      chars_before[b] = n_chars;
      if (b < text_len && ((guchar) text[b] & 0xC0) != 0x80)
        n_chars++;
    }
  GArray *spans = g_array_sized_new (FALSE, FALSE, sizeof (HanashiTokenSpan), n_pieces);
  gsize at = 0;
  for (guint i = 0; i < n_pieces; i++)
    {
      gsize len = pieces[i] != NULL ? g_bytes_get_size (pieces[i]) : 0;
      gsize from = CLAMP (at, base, base + text_len) - base;
      gsize to = CLAMP (at + len, base, base + text_len) - base;
      HanashiTokenSpan span = { chars_before[from], chars_before[to] };
      g_array_append_val (spans, span);
      at += len;
    }
  return spans;
}

int
hanashi_token_shade_level (float p)
{
  if (p >= 0.9f)
    return 0;
  if (p >= 0.6f)
    return 1;
  if (p >= 0.3f)
    return 2;
  if (p >= 0.1f)
    return 3;
  return 4;
}

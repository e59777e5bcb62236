/* jinja-lexer.c — turns template source into tokens, applying Jinja's whitespace rules
 * ({%- -%}, trim_blocks, lstrip_blocks) and {% raw %}.
 *
 * SPDX-License-Identifier: GPL-3.0-or-later
 */
#include "jinja-private.h"

static void
pos_of(const char *src, size_t at, int *line, int *col)
{
  int l = 1, co = 1;
  for (size_t k = 0; k < at; k++) {
    if (src[k] == '\n') {
      l++;
      co = 1;
    } else if (((unsigned char)src[k] & 0xC0) != 0x80) {
      co++;
    }
  }
  *line = l;
  *col = co;
}

static _Noreturn void
lex_fail(Lexer *lx, size_t at, const char *fmt, ...) HN_PRINTF(3, 4);

static _Noreturn void
lex_fail(Lexer *lx, size_t at, const char *fmt, ...)
{
  char msg[HN_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int line, col;
  pos_of(lx->src, at, &line, &col);
  jinja_fail_at(lx->c, line, col, "%s", msg);
}

static Token *
lex_push(Lexer *lx, TokKind kind, size_t at)
{
  JINJA_ARENA_RESERVE(lx->c, lx->toks, lx->n, lx->cap, lx->n + 1, 256);
  Token *t = &lx->toks[lx->n++];
  memset(t, 0, sizeof *t);
  t->kind = kind;
  t->at = at;
  return t;
}

static bool
is_name_start(char ch)
{
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

static bool
is_name_char(char ch)
{
  return is_name_start(ch) || (ch >= '0' && ch <= '9');
}

static int
hexval(char ch)
{
  if (ch >= '0' && ch <= '9')
    return ch - '0';
  if (ch >= 'a' && ch <= 'f')
    return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F')
    return ch - 'A' + 10;
  return -1;
}

/* A string literal with Python's escapes (as Jinja decodes them). */
static void
lex_string(Lexer *lx)
{
  size_t start = lx->pos;
  char q = lx->src[lx->pos++];
  Buf b = { 0 };
  for (;;) {
    if (lx->pos >= lx->len)
      lex_fail(lx, start, "unterminated string literal");
    char ch = lx->src[lx->pos];
    if (ch == q) {
      lx->pos++;
      break;
    }
    if (ch != '\\') {
      jinja_buf_addc(lx->c, &b, ch);
      lx->pos++;
      continue;
    }
    if (lx->pos + 1 >= lx->len)
      lex_fail(lx, start, "unterminated string literal");
    char e = lx->src[lx->pos + 1];
    lx->pos += 2;
    int digits = 0;
    switch (e) {
    case '\n': break;
    case '\\': jinja_buf_addc(lx->c, &b, '\\'); break;
    case '\'': jinja_buf_addc(lx->c, &b, '\''); break;
    case '"': jinja_buf_addc(lx->c, &b, '"'); break;
    case 'a': jinja_buf_addc(lx->c, &b, '\a'); break;
    case 'b': jinja_buf_addc(lx->c, &b, '\b'); break;
    case 'f': jinja_buf_addc(lx->c, &b, '\f'); break;
    case 'n': jinja_buf_addc(lx->c, &b, '\n'); break;
    case 'r': jinja_buf_addc(lx->c, &b, '\r'); break;
    case 't': jinja_buf_addc(lx->c, &b, '\t'); break;
    case 'v': jinja_buf_addc(lx->c, &b, '\v'); break;
    case 'x': digits = 2; break;
    case 'u': digits = 4; break;
    case 'U': digits = 8; break;
    default:
      if (e >= '0' && e <= '7') {
        uint32_t v = (uint32_t)(e - '0');
        for (int k = 0; k < 2 && lx->pos < lx->len && lx->src[lx->pos] >= '0' && lx->src[lx->pos] <= '7'; k++)
          v = v * 8 + (uint32_t)(lx->src[lx->pos++] - '0');
        char tmp[4];
        jinja_buf_add(lx->c, &b, tmp, jinja_utf8_put(v, tmp));
      } else {
        /* unknown escapes stay as written */
        jinja_buf_addc(lx->c, &b, '\\');
        lx->pos--;
      }
    }
    if (digits) {
      uint32_t v = 0;
      for (int k = 0; k < digits; k++) {
        int h = lx->pos < lx->len ? hexval(lx->src[lx->pos]) : -1;
        if (h < 0)
          lex_fail(lx, lx->pos, "truncated \\%c escape in string literal", e);
        v = v * 16 + (uint32_t)h;
        lx->pos++;
      }
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        lex_fail(lx, lx->pos, "escape \\%c%0*X is not a valid character", e, digits, v);
      char tmp[4];
      jinja_buf_add(lx->c, &b, tmp, jinja_utf8_put(v, tmp));
    }
  }
  Token *t = lex_push(lx, K_STRING, start);
  t->s = jinja_str_new(lx->c, b.data ? b.data : "", b.len);
}

static void
lex_number(Lexer *lx)
{
  size_t start = lx->pos;
  const char *s = lx->src;
  size_t k = lx->pos;
  bool is_float = false;
  while (k < lx->len && ((s[k] >= '0' && s[k] <= '9') || (s[k] == '_' && k + 1 < lx->len && s[k + 1] >= '0' && s[k + 1] <= '9')))
    k++;
  if (k + 1 < lx->len && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
    is_float = true;
    k++;
    while (k < lx->len && ((s[k] >= '0' && s[k] <= '9') || s[k] == '_'))
      k++;
  }
  if (k < lx->len && (s[k] == 'e' || s[k] == 'E')) {
    size_t e = k + 1;
    if (e < lx->len && (s[e] == '+' || s[e] == '-'))
      e++;
    if (e < lx->len && s[e] >= '0' && s[e] <= '9') {
      is_float = true;
      k = e;
      while (k < lx->len && s[k] >= '0' && s[k] <= '9')
        k++;
    }
  }
  char tmp[128];
  size_t n = 0;
  for (size_t j = start; j < k && n < sizeof tmp - 1; j++)
    if (s[j] != '_')
      tmp[n++] = s[j];
  tmp[n] = '\0';
  if (k - start >= sizeof tmp - 1)
    lex_fail(lx, start, "number literal too long");
  Token *t = lex_push(lx, is_float ? K_FLOAT : K_INT, start);
  if (is_float) {
    t->f = jinja_c_strtod(tmp, NULL);
  } else {
    uint64_t v = 0;
    for (size_t j = 0; j < n; j++) {
      if (v > (UINT64_MAX - 9) / 10 || v * 10 + (uint64_t)(tmp[j] - '0') > (uint64_t)INT64_MAX)
        lex_fail(lx, start, "integer literal too large");
      v = v * 10 + (uint64_t)(tmp[j] - '0');
    }
    t->i = (int64_t)v;
  }
  lx->pos = k;
}

static const char *const OPS2[] = { "//", "**", "==", "!=", "<=", ">=", NULL };
static const char OPS1[] = "()[]{}.,:|~+-*/%=<>!";

/* Lexes the inside of a {{ }} or {% %} tag up to and including its end delimiter.
 * Returns the end's strip sign: '-', '+' or 0. */
static char
lex_tag(Lexer *lx, bool is_block, size_t tag_start)
{
  int depth = 0;
  for (;;) {
    while (lx->pos < lx->len && (lx->src[lx->pos] == ' ' || lx->src[lx->pos] == '\t' || lx->src[lx->pos] == '\n' ||
                                 lx->src[lx->pos] == '\r' || lx->src[lx->pos] == '\f' || lx->src[lx->pos] == '\v'))
      lx->pos++;
    if (lx->pos >= lx->len)
      lex_fail(lx, tag_start, "unclosed %s", is_block ? "'{%' tag" : "'{{' expression");
    const char *p = lx->src + lx->pos;
    size_t left = lx->len - lx->pos;
    if (depth == 0) {
      char end0 = is_block ? '%' : '}';
      char sign = 0;
      size_t skip = 0;
      if (left >= 3 && (p[0] == '-' || p[0] == '+') && p[1] == end0 && p[2] == '}') {
        sign = p[0];
        skip = 3;
      } else if (left >= 2 && p[0] == end0 && p[1] == '}') {
        skip = 2;
      }
      if (skip && !(sign == '+' && !is_block)) {
        lex_push(lx, is_block ? K_BLOCK_END : K_VAR_END, lx->pos);
        lx->pos += skip;
        return sign;
      }
    }
    char ch = p[0];
    if (ch == '"' || ch == '\'') {
      lex_string(lx);
      continue;
    }
    if (ch >= '0' && ch <= '9') {
      lex_number(lx);
      continue;
    }
    if (is_name_start(ch)) {
      size_t k = 1;
      while (k < left && is_name_char(p[k]))
        k++;
      Token *t = lex_push(lx, K_NAME, lx->pos);
      t->s = jinja_str_new(lx->c, p, k);
      lx->pos += k;
      continue;
    }
    size_t oplen = 0;
    for (int k = 0; OPS2[k]; k++)
      if (left >= 2 && p[0] == OPS2[k][0] && p[1] == OPS2[k][1])
        oplen = 2;
    if (!oplen && strchr(OPS1, ch) && ch)
      oplen = 1;
    if (!oplen || (ch == '!' && oplen == 1)) {
      if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
        lex_fail(lx, lx->pos, "unexpected character '%c'", ch);
      lex_fail(lx, lx->pos, "unexpected byte 0x%02X", (unsigned char)ch);
    }
    if (oplen == 1) {
      if (ch == '(' || ch == '[' || ch == '{')
        depth++;
      else if (ch == ')' || ch == ']' || ch == '}') {
        if (depth == 0)
          lex_fail(lx, lx->pos, "unexpected '%c'", ch);
        depth--;
      }
    }
    Token *t = lex_push(lx, K_OP, lx->pos);
    t->s = jinja_str_new(lx->c, p, oplen);
    lx->pos += oplen;
  }
}

static void
lex_text(Lexer *lx, size_t at, const char *s, size_t n)
{
  if (n == 0)
    return;
  Token *t = lex_push(lx, K_TEXT, at);
  t->s = jinja_str_new(lx->c, s, n);
}

/* Finds "{% endraw %}" (any strip signs/spaces); returns its start or len. */
static size_t
find_endraw(Lexer *lx, size_t from, size_t *tag_end, char *lsign, char *rsign)
{
  for (size_t k = from; k + 1 < lx->len; k++) {
    if (lx->src[k] != '{' || lx->src[k + 1] != '%')
      continue;
    size_t p = k + 2;
    *lsign = 0;
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
      *lsign = lx->src[p++];
    while (p < lx->len && (lx->src[p] == ' ' || lx->src[p] == '\t' || lx->src[p] == '\n'))
      p++;
    if (lx->len - p < 6 || memcmp(lx->src + p, "endraw", 6) != 0)
      continue;
    p += 6;
    while (p < lx->len && (lx->src[p] == ' ' || lx->src[p] == '\t' || lx->src[p] == '\n'))
      p++;
    *rsign = 0;
    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
      *rsign = lx->src[p++];
    if (lx->len - p >= 2 && lx->src[p] == '%' && lx->src[p + 1] == '}') {
      *tag_end = p + 2;
      return k;
    }
  }
  return lx->len;
}

void
jinja_lex_all(Lexer *lx)
{
  bool line_starting = true;
  size_t text_start = 0;
  const char *src = lx->src;
  while (text_start <= lx->len) {
    size_t k = text_start;
    while (k + 1 < lx->len && !(src[k] == '{' && (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#')))
      k++;
    if (k + 1 >= lx->len) {
      lex_text(lx, text_start, src + text_start, lx->len - text_start);
      break;
    }
    char kind = src[k + 1];
    char sign = k + 2 < lx->len && (src[k + 2] == '-' || src[k + 2] == '+') ? src[k + 2] : 0;
    if (kind == '{' && sign == '+')
      sign = 0; /* "{{+" is not a strip marker; '+' is then a unary plus */
    size_t text_len = k - text_start;
    const char *text = src + text_start;
    if (sign == '-') {
      text_len -= jinja_trailing_space(text, text_len);
    } else if (sign != '+' && kind != '{') {
      /* lstrip_blocks */
      size_t l_pos = 0;
      for (size_t j = text_len; j > 0; j--)
        if (text[j - 1] == '\n') {
          l_pos = j;
          break;
        }
      if ((l_pos > 0 || line_starting) && text_len > l_pos &&
          jinja_leading_space(text + l_pos, text_len - l_pos) == text_len - l_pos)
        text_len = l_pos;
    }
    lex_text(lx, text_start, text, text_len);
    lx->pos = k + 2 + (sign ? 1 : 0);
    char end_sign;
    bool is_block = kind == '%';
    if (kind == '#') {
      size_t e = lx->pos;
      while (e + 1 < lx->len && !(src[e] == '#' && src[e + 1] == '}'))
        e++;
      if (e + 1 >= lx->len)
        lex_fail(lx, k, "unclosed comment");
      end_sign = e > lx->pos && (src[e - 1] == '-' || src[e - 1] == '+') ? src[e - 1] : 0;
      lx->pos = e + 2;
      is_block = true;
    } else {
      size_t first_tok = lx->n;
      lex_push(lx, is_block ? K_BLOCK_BEGIN : K_VAR_BEGIN, k);
      end_sign = lex_tag(lx, is_block, k);
      /* {% raw %} ... {% endraw %}: the body is text, untouched by the lexer */
      if (is_block && lx->n == first_tok + 3 && lx->toks[first_tok + 1].kind == K_NAME &&
          strcmp(lx->toks[first_tok + 1].s->s, "raw") == 0) {
        lx->n = first_tok;
        size_t tag_end;
        char ls, rs;
        size_t r = find_endraw(lx, lx->pos, &tag_end, &ls, &rs);
        if (r == lx->len)
          lex_fail(lx, k, "missing {%% endraw %%}");
        size_t body = lx->pos;
        if (end_sign == '-')
          body += jinja_leading_space(src + body, r - body);
        else if (end_sign != '+' && body < r && src[body] == '\n')
          body++;
        size_t body_len = r - body;
        if (ls == '-')
          body_len -= jinja_trailing_space(src + body, body_len);
        else if (ls != '+') {
          size_t l_pos = 0;
          for (size_t j = body_len; j > 0; j--)
            if (src[body + j - 1] == '\n') {
              l_pos = j;
              break;
            }
          if (l_pos > 0 && body_len > l_pos && jinja_leading_space(src + body + l_pos, body_len - l_pos) == body_len - l_pos)
            body_len = l_pos;
        }
        lex_text(lx, body, src + body, body_len);
        lx->pos = tag_end;
        end_sign = rs;
      }
    }
    if (end_sign == '-')
      lx->pos += jinja_leading_space(src + lx->pos, lx->len - lx->pos);
    else if (is_block && end_sign != '+' && lx->pos < lx->len && src[lx->pos] == '\n')
      lx->pos++; /* trim_blocks */
    line_starting = lx->pos > 0 && src[lx->pos - 1] == '\n';
    text_start = lx->pos;
    if (text_start == lx->len)
      break;
  }
  lex_push(lx, K_EOF, lx->len);
  /* resolve byte offsets into line:column in one pass */
  int line = 1, col = 1;
  size_t at = 0;
  for (size_t t = 0; t < lx->n; t++) {
    size_t target = lx->toks[t].at;
    for (; at < target && at < lx->len; at++) {
      if (src[at] == '\n') {
        line++;
        col = 1;
      } else if (((unsigned char)src[at] & 0xC0) != 0x80) {
        col++;
      }
    }
    lx->toks[t].line = line;
    lx->toks[t].col = col;
  }
}

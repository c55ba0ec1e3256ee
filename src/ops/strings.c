/* String operators: StringConcat, StringSplit, StringNormalizer, RegexFullMatch (ai.onnx) and
 * CategoryMapper (ai.onnx.ml), TfIdfVectorizer. Elements are core.h's interned handles: a kernel
 * reads alma__str_ptr/len and writes handles made by alma__str_make. Behaviour follows the ONNX spec;
 * where it leaves room, ONNX Runtime 1.32 (what tests/ops_string compares against), and the
 * comment says where onnx.reference differs. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r, towlower_l */
#endif
#include <ctype.h>
#include <locale.h>
#include <wctype.h>

#include "ops/ml_common.h"
#include "ops/nn_util.h"
#include "ops/op_args.h"

#ifdef ALMA_HAVE_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

static alma_status need_strings(const alma_node *n, const alma_tensor *t, const char *what) {
  if (!t || t->dtype != ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_TYPE, "%s must be a string tensor, got %s", what,
                          t ? alma_dtype_name(t->dtype) : "nothing");
  return ALMA_OK;
}

/* ---- StringConcat (20): Y = X + Y elementwise, numpy broadcasting --------------------------- */
static alma_status sconcat_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  ALMA_TRY(need_strings(n, in[0], "X"));
  ALMA_TRY(need_strings(n, in[1], "Y"));
  int r;
  int64_t d[ALMA_MAX_RANK];
  alma_status st = alma__broadcast_shape(in[0]->rank, in[0]->dims, in[1]->rank, in[1]->dims, &r, d);
  if (st != ALMA_OK) return alma__error_prefix(st, "node '%s' (%s): ", n->name, n->op_type);
  alma__set_shape(&out[0], ALMA_DTYPE_STRING, r, d);
  return ALMA_OK;
}

static alma_status sconcat_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  int64_t total = alma_tensor_numel(&out[0]);
  char *buf = NULL;
  size_t cap = 0;
  alma_status st = ALMA_OK;
  for (int64_t i = 0; i < total && st == ALMA_OK; i++) {
    const alma__str *a = alma__strs(in[0])[alma__broadcast_index(i, out[0].rank, out[0].dims, in[0]->rank, in[0]->dims)];
    const alma__str *b = alma__strs(in[1])[alma__broadcast_index(i, out[0].rank, out[0].dims, in[1]->rank, in[1]->dims)];
    size_t la = alma__str_len(a), lb = alma__str_len(b);
    if (la + lb > cap) {
      char *nb = realloc(buf, la + lb);
      if (!nb) {
        st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
        break;
      }
      buf = nb, cap = la + lb;
    }
    if (la) memcpy(buf, alma__str_ptr(a), la);
    if (lb) memcpy(buf + la, alma__str_ptr(b), lb);
    st = alma__str_make(buf, la + lb, &alma__strs(&out[0])[i]);
  }
  free(buf);
  return st;
}

const alma_op_def alma__op_StringConcat = {.name = "StringConcat", .domain = "", .versions = {20},
                                           .flags = ALMA_OP_STRINGS, .min_inputs = 2, .max_inputs = 2,
                                           .min_outputs = 1, .max_outputs = 1, .infer = sconcat_infer,
                                           .exec = sconcat_exec};

/* ---- StringSplit (20): Y = X.shape + [most parts] (padded with ""), Z = parts per element ------
 * With a delimiter: Python's str.split(delimiter, maxsplit) (consecutive delimiters give empty
 * parts). Without one (absent or ""): runs of whitespace separate, leading and trailing whitespace
 * is dropped (str.split()). Whitespace is ASCII's (space, \t \n \v \f \r) and \x1c-\x1f, which
 * Python's str.isspace also counts; Unicode spaces (U+00A0, U+2003, ...) are not split on. */
typedef struct split_part {
  size_t off, len;
} split_part;

static int is_ws(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

/* Parts of s into *parts (grown as needed); returns the count or -1 on OOM. */
static int64_t split_one(const char *s, size_t len, const char *delim, size_t dlen, int64_t maxsplit, split_part **parts,
                         int64_t *cap) {
  int64_t cnt = 0;
#define PUSH(o, l)                                                                           \
  do {                                                                                       \
    if (cnt == *cap) {                                                                       \
      int64_t nc = *cap ? *cap * 2 : 16;                                                     \
      split_part *np = realloc(*parts, sizeof *np * (size_t)nc);                             \
      if (!np) return -1;                                                                    \
      *parts = np, *cap = nc;                                                                \
    }                                                                                        \
    (*parts)[cnt].off = (o), (*parts)[cnt].len = (l), cnt++;                                 \
  } while (0)
  if (dlen) {
    size_t start = 0, i = 0;
    while (i + dlen <= len && (maxsplit < 0 || cnt < maxsplit)) {
      if (!memcmp(s + i, delim, dlen)) {
        PUSH(start, i - start);
        i += dlen;
        start = i;
      } else {
        i++;
      }
    }
    PUSH(start, len - start);
  } else {
    size_t i = 0;
    while (i < len && is_ws((unsigned char)s[i])) i++;
    while (i < len) {
      if (maxsplit >= 0 && cnt == maxsplit) { /* the rest, trailing whitespace dropped */
        size_t e = len;
        while (e > i && is_ws((unsigned char)s[e - 1])) e--;
        PUSH(i, e - i);
        break;
      }
      size_t b = i;
      while (i < len && !is_ws((unsigned char)s[i])) i++;
      PUSH(b, i - b);
      while (i < len && is_ws((unsigned char)s[i])) i++;
    }
  }
#undef PUSH
  return cnt;
}

static alma_status ssplit_args(const alma_node *n, const char **delim, size_t *dlen, int64_t *maxsplit) {
  const alma_attr *d = alma__node_attr(n, "delimiter");
  *delim = d && d->s ? d->s : "";
  *dlen = d && d->s ? d->s_len : 0;
  const alma_attr *m = alma__node_attr(n, "maxsplit");
  *maxsplit = m ? m->i : -1;
  if (m && m->i < 0) *maxsplit = -1; /* Python: a negative maxsplit means no limit */
  return ALMA_OK;
}

/* The most parts of any element (the last axis of Y). */
static alma_status ssplit_count(const alma_node *n, const alma_tensor *x, int64_t *most, int64_t *counts) {
  const char *delim;
  size_t dlen;
  int64_t maxsplit, cap = 0;
  ALMA_TRY(ssplit_args(n, &delim, &dlen, &maxsplit));
  split_part *parts = NULL;
  *most = 0;
  int64_t total = alma_tensor_numel(x);
  for (int64_t i = 0; i < total; i++) {
    const alma__str *e = alma__strs(x)[i];
    int64_t c = split_one(alma__str_ptr(e), alma__str_len(e), delim, dlen, maxsplit, &parts, &cap);
    if (c < 0) {
      free(parts);
      return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
    }
    if (counts) counts[i] = c;
    if (c > *most) *most = c;
  }
  free(parts);
  return ALMA_OK;
}

static alma_status ssplit_infer(INFER_ARGS) {
  (void)nin;
  ALMA_TRY(need_strings(n, in[0], "X"));
  if (in[0]->rank >= ALMA_MAX_RANK)
    return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "input rank %d (Y adds an axis; alma holds up to %d)", in[0]->rank,
                          ALMA_MAX_RANK);
  if (!in[0]->data && alma_tensor_numel(in[0]) > 0) return alma__need_value(); /* Y's last axis is data-dependent */
  int64_t most = 0;
  if (in[0]->data) ALMA_TRY(ssplit_count(n, in[0], &most, NULL));
  int64_t d[ALMA_MAX_RANK];
  memcpy(d, in[0]->dims, sizeof(int64_t) * (size_t)in[0]->rank);
  d[in[0]->rank] = most;
  alma__set_shape(&out[0], ALMA_DTYPE_STRING, in[0]->rank + 1, d);
  if (nout > 1) alma__set_shape(&out[1], ALMA_DTYPE_INT64, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status ssplit_exec(EXEC_ARGS) {
  (void)ctx, (void)nin;
  const alma_tensor *x = in[0];
  const char *delim;
  size_t dlen;
  int64_t maxsplit, cap = 0;
  ALMA_TRY(ssplit_args(n, &delim, &dlen, &maxsplit));
  int64_t total = alma_tensor_numel(x), most = out[0].dims[out[0].rank - 1];
  split_part *parts = NULL;
  alma_status st = ALMA_OK;
  for (int64_t i = 0; i < total && st == ALMA_OK; i++) {
    const alma__str *e = alma__strs(x)[i];
    const char *s = alma__str_ptr(e);
    int64_t c = split_one(s, alma__str_len(e), delim, dlen, maxsplit, &parts, &cap);
    if (c < 0 || c > most) {
      st = alma__op_error(n, c < 0 ? ALMA_ERR_NOMEM : ALMA_ERR_INTERNAL, "split count");
      break;
    }
    for (int64_t k = 0; k < c && st == ALMA_OK; k++)
      st = alma__str_make(s + parts[k].off, parts[k].len, &alma__strs(&out[0])[i * most + k]);
    if (nout > 1 && out[1].data) ((int64_t *)out[1].data)[i] = c;
  }
  free(parts);
  return st;
}

const alma_op_def alma__op_StringSplit = {.name = "StringSplit", .domain = "", .versions = {20},
                                          .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                          .min_outputs = 1, .max_outputs = 2, .infer = ssplit_infer,
                                          .exec = ssplit_exec};

/* ---- StringNormalizer (10) -------------------------------------------------------------------
 * Input [C] or [1, C]. Elements equal to a stopword are removed (compared case-insensitively
 * unless is_case_sensitive), then the rest is lowercased/uppercased (case_change_action). An
 * all-removed input gives [""] ([1, 1] for [1, C]). As ONNX Runtime: case changes and
 * case-insensitive matching are Unicode-aware (UTF-8 decoded, towlower/towupper of the C.UTF-8
 * locale, which covers Latin, Greek, Cyrillic, ...); bytes that are not valid UTF-8 are kept as
 * they are. The `locale` attribute is accepted but does not select language-specific rules (such
 * as Turkish dotted i). onnx.reference differs from the spec here: it also strips accents and
 * removes stopwords as words inside elements. */
static locale_t utf8_locale(void) {
  static locale_t loc;
  static int tried;
  if (!tried) { /* benign race: both threads get an equivalent locale */
    loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    tried = 1;
  }
  return loc;
}

/* Decodes one UTF-8 code point at s[*i]; -1 (and one byte consumed) when invalid. */
static int32_t utf8_next(const unsigned char *s, size_t len, size_t *i) {
  unsigned char c = s[*i];
  int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (!n || *i + (size_t)n > len) {
    (*i)++;
    return -1;
  }
  int32_t cp = n == 1 ? c : c & (0x7f >> n);
  for (int k = 1; k < n; k++) {
    if ((s[*i + (size_t)k] & 0xc0) != 0x80) {
      (*i)++;
      return -1;
    }
    cp = (cp << 6) | (s[*i + (size_t)k] & 0x3f);
  }
  *i += (size_t)n;
  return cp;
}

static size_t utf8_put(int32_t cp, char *o) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | (cp >> 12)), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  o[0] = (char)(0xf0 | (cp >> 18)), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f)), o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* s with its case changed (mode 'L' or 'U') into out (at least 4 * len + 1 bytes); its length. */
static size_t change_case(const char *s, size_t len, int mode, char *out) {
  locale_t loc = utf8_locale();
  size_t i = 0, o = 0;
  while (i < len) {
    size_t at = i;
    int32_t cp = utf8_next((const unsigned char *)s, len, &i);
    if (cp < 0) {
      out[o++] = s[at];
      continue;
    }
    wint_t w = (wint_t)cp;
    if (loc) w = mode == 'L' ? towlower_l(w, loc) : towupper_l(w, loc);
    else if (cp < 0x80) w = (wint_t)(mode == 'L' ? tolower(cp) : toupper(cp));
    o += utf8_put((int32_t)w, out + o);
  }
  return o;
}

typedef struct snorm_args {
  int mode; /* 'L', 'U' or 0 */
  int case_sensitive;
  const alma_attr *stop;
} snorm_args;

static alma_status snorm_args_get(const alma_node *n, snorm_args *a) {
  const char *m = alma__attr_s(n, "case_change_action", "NONE");
  a->mode = !strcmp(m, "LOWER") ? 'L' : !strcmp(m, "UPPER") ? 'U' : 0;
  if (!a->mode && strcmp(m, "NONE"))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "case_change_action '%s' (LOWER, UPPER or NONE expected)", m);
  a->case_sensitive = (int)alma__attr_i(n, "is_case_sensitive", 0);
  a->stop = alma__node_attr(n, "stopwords");
  if (a->stop && a->stop->type != ALMA_ATTR_STRINGS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "stopwords must be a list of strings");
  return ALMA_OK;
}

/* 1 when element e is a stopword. */
static int snorm_is_stop(const snorm_args *a, const alma__str *e, char *b1, char *b2) {
  if (!a->stop) return 0;
  const char *s = alma__str_ptr(e);
  size_t len = alma__str_len(e);
  size_t l1 = a->case_sensitive ? len : change_case(s, len, 'L', b1);
  const char *k1 = a->case_sensitive ? s : b1;
  for (int k = 0; k < a->stop->n; k++) {
    const char *w = a->stop->strings[k];
    size_t wl = strlen(w);
    if (a->case_sensitive) {
      if (wl == len && !memcmp(w, s, len)) return 1;
    } else {
      if (wl > 4 * len + 4) continue;
      size_t l2 = change_case(w, wl, 'L', b2);
      if (l2 == l1 && !memcmp(b2, k1, l1)) return 1;
    }
  }
  return 0;
}

static alma_status snorm_shape(const alma_node *n, const alma_tensor *x, int64_t *c) {
  if (x->rank == 1) *c = x->dims[0];
  else if (x->rank == 2 && x->dims[0] == 1) *c = x->dims[1];
  else {
    char sh[96];
    return alma__op_error(n, ALMA_ERR_SHAPE, "input shape %s ([C] or [1, C] expected)",
                          alma__shape_str(x->rank, x->dims, sh, sizeof sh));
  }
  return ALMA_OK;
}

static size_t max_len(const alma_tensor *x) {
  size_t m = 0;
  for (int64_t i = 0; i < alma_tensor_numel(x); i++)
    if (alma__str_len(alma__strs(x)[i]) > m) m = alma__str_len(alma__strs(x)[i]);
  return m;
}

static size_t max_stop_len(const snorm_args *a) {
  size_t m = 0;
  for (int k = 0; a->stop && k < a->stop->n; k++)
    if (strlen(a->stop->strings[k]) > m) m = strlen(a->stop->strings[k]);
  return m;
}

static alma_status snorm_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  ALMA_TRY(need_strings(n, in[0], "X"));
  snorm_args a;
  ALMA_TRY(snorm_args_get(n, &a));
  int64_t c;
  ALMA_TRY(snorm_shape(n, in[0], &c));
  int64_t kept = c;
  if (a.stop && a.stop->n) {
    if (!in[0]->data && c > 0) return alma__need_value();
    size_t bl = 4 * (max_len(in[0]) + max_stop_len(&a)) + 8;
    char *b1 = malloc(bl), *b2 = malloc(bl);
    if (!b1 || !b2) {
      free(b1), free(b2);
      return alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
    }
    kept = 0;
    for (int64_t i = 0; i < c; i++) kept += !snorm_is_stop(&a, alma__strs(in[0])[i], b1, b2);
    free(b1), free(b2);
  }
  if (kept == 0) kept = 1; /* [""] */
  int64_t d[2] = {1, kept};
  if (in[0]->rank == 1) alma__set_shape(&out[0], ALMA_DTYPE_STRING, 1, &kept);
  else alma__set_shape(&out[0], ALMA_DTYPE_STRING, 2, d);
  return ALMA_OK;
}

static alma_status snorm_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  snorm_args a;
  ALMA_TRY(snorm_args_get(n, &a));
  int64_t c, o = 0;
  ALMA_TRY(snorm_shape(n, in[0], &c));
  size_t bl = 4 * (max_len(in[0]) + max_stop_len(&a)) + 8;
  char *b1 = malloc(bl), *b2 = malloc(bl);
  alma_status st = ALMA_OK;
  if (!b1 || !b2) st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  int64_t cap = alma_tensor_numel(&out[0]);
  for (int64_t i = 0; i < c && st == ALMA_OK; i++) {
    const alma__str *e = alma__strs(in[0])[i];
    if (snorm_is_stop(&a, e, b1, b2)) continue;
    if (o >= cap) {
      st = alma__op_error(n, ALMA_ERR_INTERNAL, "more elements kept than inferred");
      break;
    }
    if (!a.mode) alma__strs(&out[0])[o++] = e;
    else {
      size_t l = change_case(alma__str_ptr(e), alma__str_len(e), a.mode, b1);
      st = alma__str_make(b1, l, &alma__strs(&out[0])[o++]);
    }
  }
  free(b1), free(b2);
  return st; /* an all-removed input leaves the one zeroed element: "" */
}

const alma_op_def alma__op_StringNormalizer = {.name = "StringNormalizer", .domain = "", .versions = {10},
                                               .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                               .min_outputs = 1, .max_outputs = 1, .infer = snorm_infer,
                                               .exec = snorm_exec};

/* ---- RegexFullMatch (20): Y[i] = whether the whole of X[i] matches `pattern` -----------------
 * The spec names RE2's syntax; alma compiles the pattern with PCRE2 (libpcre2-dev, optional) in
 * UTF mode, anchored at both ends. RE2's syntax is, for what it shares, a subset of PCRE2's, with
 * two differences that matter: PCRE2 also accepts backreferences and lookaround (RE2 rejects such
 * patterns; alma runs them), and \C, \pN-style one-letter classes without braces and (?P=name) are
 * read the Perl way. Matching is not linear-time as RE2's: a match limit stops runaway patterns
 * with an error instead of hanging. */
static alma_status regex_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  ALMA_TRY(need_strings(n, in[0], "X"));
  const alma_attr *p = alma__node_attr(n, "pattern");
  if (!p || p->type != ALMA_ATTR_STRING) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "the string attribute 'pattern' is required");
#ifndef ALMA_HAVE_PCRE2
  return alma__op_error(n, ALMA_ERR_UNSUPPORTED,
                        "unsupported: alma was built without PCRE2 (install libpcre2-dev and reconfigure), which it "
                        "uses for RegexFullMatch's patterns");
#else
  int err;
  PCRE2_SIZE eoff;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)p->s, p->s_len, PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &eoff, NULL);
  if (!re) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "pattern '%s' does not compile at offset %zu: %s", p->s, (size_t)eoff,
                          (const char *)msg);
  }
  pcre2_code_free(re);
  alma__set_shape(&out[0], ALMA_DTYPE_BOOL, in[0]->rank, in[0]->dims);
  return ALMA_OK;
#endif
}

static alma_status regex_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
#ifndef ALMA_HAVE_PCRE2
  (void)in, (void)out;
  return alma__op_error(n, ALMA_ERR_UNSUPPORTED, "unsupported: built without PCRE2");
#else
  const alma_attr *p = alma__node_attr(n, "pattern");
  int err;
  PCRE2_SIZE eoff;
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)p->s, p->s_len, PCRE2_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &eoff, NULL);
  if (!re) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "pattern '%s' does not compile", p->s);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  pcre2_match_context *mc = pcre2_match_context_create(NULL);
  alma_status st = ALMA_OK;
  if (!md || !mc) st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  else pcre2_set_match_limit(mc, 10000000);
  int64_t total = alma_tensor_numel(in[0]);
  for (int64_t i = 0; i < total && st == ALMA_OK; i++) {
    const alma__str *e = alma__strs(in[0])[i];
    int rc = pcre2_match(re, (PCRE2_SPTR)alma__str_ptr(e), alma__str_len(e), 0, 0, md, mc);
    if (rc == PCRE2_ERROR_NOMATCH || rc == PCRE2_ERROR_UTF8_ERR1 || (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21))
      ((uint8_t *)out[0].data)[i] = 0; /* invalid UTF-8 never matches (RE2 in UTF-8 mode likewise fails) */
    else if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      st = alma__op_error(n, ALMA_ERR_INVALID_ARG, "matching element %lld: %s", (long long)i, (const char *)msg);
    } else ((uint8_t *)out[0].data)[i] = 1;
  }
  pcre2_match_context_free(mc);
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return st;
#endif
}

const alma_op_def alma__op_RegexFullMatch = {.name = "RegexFullMatch", .domain = "", .versions = {20},
                                             .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                             .min_outputs = 1, .max_outputs = 1, .infer = regex_infer,
                                             .exec = regex_exec};

/* ---- CategoryMapper (ai.onnx.ml 1): string -> int64 through cats_strings/cats_int64s, or back --
 * The two lists pair up; a string not listed gives default_int64 (-1), an integer not listed
 * default_string ("_Unused"). A key listed twice maps to its first pairing (ONNX Runtime builds
 * its maps with emplace, which keeps the first). */
typedef struct cm_args {
  const alma_attr *s, *i;
} cm_args;

static alma_status cm_get(const alma_node *n, cm_args *a) {
  a->s = alma__node_attr(n, "cats_strings");
  a->i = alma__node_attr(n, "cats_int64s");
  if (!a->s || !a->i || a->s->type != ALMA_ATTR_STRINGS || a->i->type != ALMA_ATTR_INTS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "cats_strings (strings) and cats_int64s (ints) are required");
  if (a->s->n != a->i->n)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%d cats_strings and %d cats_int64s (the same number expected)",
                          a->s->n, a->i->n);
  return ALMA_OK;
}

static alma_status cm_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  cm_args a;
  ALMA_TRY(cm_get(n, &a));
  alma_dtype t = in[0]->dtype;
  if (t != ALMA_DTYPE_STRING && t != ALMA_DTYPE_INT64)
    return alma__op_error(n, ALMA_ERR_TYPE, "input must be string or int64, got %s", alma_dtype_name(t));
  alma__set_shape(&out[0], t == ALMA_DTYPE_STRING ? ALMA_DTYPE_INT64 : ALMA_DTYPE_STRING, in[0]->rank, in[0]->dims);
  return ALMA_OK;
}

static alma_status cm_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  cm_args a;
  ALMA_TRY(cm_get(n, &a));
  int64_t total = alma_tensor_numel(in[0]), nc = a.s->n;
  alma_status st = ALMA_OK;
  /* first pairing wins, as ONNX Runtime builds its maps with emplace */
  if (in[0]->dtype == ALMA_DTYPE_STRING) {
    int64_t dflt = alma__attr_i(n, "default_int64", -1);
    for (int64_t i = 0; i < total; i++) {
      const alma__str *e = alma__strs(in[0])[i];
      int64_t v = dflt;
      for (int64_t k = 0; k < nc; k++)
        if (strlen(a.s->strings[k]) == alma__str_len(e) && !memcmp(a.s->strings[k], alma__str_ptr(e), alma__str_len(e))) {
          v = a.i->ints[k];
          break;
        }
      ((int64_t *)out[0].data)[i] = v;
    }
  } else {
    const char *dflt = alma__attr_s(n, "default_string", "_Unused");
    for (int64_t i = 0; i < total && st == ALMA_OK; i++) {
      int64_t x = ((const int64_t *)in[0]->data)[i];
      const char *v = dflt;
      for (int64_t k = 0; k < nc; k++)
        if (a.i->ints[k] == x) {
          v = a.s->strings[k];
          break;
        }
      st = alma__str_make(v, strlen(v), &alma__strs(&out[0])[i]);
    }
  }
  return st;
}

const alma_op_def alma__op_MlCategoryMapper = {.name = "CategoryMapper", .domain = ALMA_ML_DOMAIN, .versions = {1},
                                               .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                               .min_outputs = 1, .max_outputs = 1, .infer = cm_infer,
                                               .exec = cm_exec};

/* ---- TfIdfVectorizer (9) ----------------------------------------------------------------------
 * Counts, per row of X ([C] or [B, C]; int32, int64 or string), the pool's n-grams of lengths
 * min_gram_length..max_gram_length with items skip+1 apart for skip = 0..max_skip_count (unigrams
 * once), into Y[row, ngram_indexes[id]]; then TF (counts), IDF (weight, or 1, where the count is
 * nonzero) or TFIDF (weight * count, or the count). This is ONNX Runtime's algorithm (and
 * onnx.reference's copy of it), including the pool's numbering: n-grams of lengths outside the
 * range still take ids, and an n-gram listed twice counts under its last id. */
typedef struct tfidf_gram {
  int k;           /* length */
  int64_t at;      /* first item in the key pool */
  int64_t out;     /* output column */
  int64_t order;   /* id, for duplicates: the last one wins */
} tfidf_gram;

typedef struct tfidf {
  int mode; /* 1 TF, 2 IDF, 3 TFIDF */
  int64_t minn, maxn, skip, out_size;
  const int64_t *idx;
  int64_t nidx;
  const float *w;
  int64_t nw;
  int64_t *keys;   /* pool items as int64 (strings: their handles) */
  tfidf_gram *grams;
  int64_t ngrams;
} tfidf;

static int gram_cmp_keys(const int64_t *ka, int la, const int64_t *kb, int lb) {
  if (la != lb) return la < lb ? -1 : 1;
  for (int i = 0; i < la; i++)
    if (ka[i] != kb[i]) return ka[i] < kb[i] ? -1 : 1;
  return 0;
}

static alma_status tfidf_attrs(const alma_node *n, tfidf *t, const alma_attr **pi, const alma_attr **ps,
                               const alma_attr **cnt) {
  memset(t, 0, sizeof *t);
  const char *m = alma__attr_s(n, "mode", "");
  t->mode = !strcmp(m, "TF") ? 1 : !strcmp(m, "IDF") ? 2 : !strcmp(m, "TFIDF") ? 3 : 0;
  if (!t->mode) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "mode '%s' (TF, IDF or TFIDF expected)", m);
  t->minn = alma__attr_i(n, "min_gram_length", 0);
  t->maxn = alma__attr_i(n, "max_gram_length", 0);
  t->skip = alma__attr_i(n, "max_skip_count", 0);
  if (t->minn < 1 || t->maxn < t->minn || t->skip < 0)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "min_gram_length %lld, max_gram_length %lld, max_skip_count %lld "
                          "(1 <= min <= max, skip >= 0 expected)", (long long)t->minn, (long long)t->maxn, (long long)t->skip);
  const alma_attr *ix = alma__node_attr(n, "ngram_indexes");
  *cnt = alma__node_attr(n, "ngram_counts");
  if (!ix || ix->type != ALMA_ATTR_INTS || !*cnt || (*cnt)->type != ALMA_ATTR_INTS)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ngram_indexes and ngram_counts (ints) are required");
  t->idx = ix->ints, t->nidx = ix->n;
  t->out_size = 0;
  for (int64_t i = 0; i < t->nidx; i++) {
    if (t->idx[i] < 0) return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ngram_indexes[%lld] is negative", (long long)i);
    if (t->idx[i] + 1 > t->out_size) t->out_size = t->idx[i] + 1;
  }
  const alma_attr *w = alma__node_attr(n, "weights");
  if (w && w->type == ALMA_ATTR_FLOATS) t->w = w->floats, t->nw = w->n;
  if (t->nw && t->nw < t->out_size)
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "%lld weights for %lld output columns", (long long)t->nw,
                          (long long)t->out_size);
  *pi = alma__node_attr(n, "pool_int64s");
  *ps = alma__node_attr(n, "pool_strings");
  if ((*pi && (*pi)->n) == (*ps && (*ps)->n) && !(!*pi && !*ps))
    return alma__op_error(n, ALMA_ERR_INVALID_MODEL, "exactly one of pool_int64s and pool_strings expected");
  return ALMA_OK;
}

static alma_status tfidf_infer(INFER_ARGS) {
  (void)nin, (void)nout;
  tfidf t;
  const alma_attr *pi, *ps, *cnt;
  ALMA_TRY(tfidf_attrs(n, &t, &pi, &ps, &cnt));
  alma_dtype dt = in[0]->dtype;
  if (dt != ALMA_DTYPE_INT32 && dt != ALMA_DTYPE_INT64 && dt != ALMA_DTYPE_STRING)
    return alma__op_error(n, ALMA_ERR_TYPE, "input must be int32, int64 or string, got %s", alma_dtype_name(dt));
  if ((dt == ALMA_DTYPE_STRING) != (ps && ps->n > 0) && ((pi && pi->n) || (ps && ps->n)))
    return alma__op_error(n, ALMA_ERR_TYPE, "a %s input needs %s", alma_dtype_name(dt),
                          dt == ALMA_DTYPE_STRING ? "pool_strings" : "pool_int64s");
  if (in[0]->rank > 2 || (in[0]->rank == 2 && in[0]->dims[0] < 1))
    return alma__op_error(n, ALMA_ERR_SHAPE, "input must be [C] or [B, C] with B > 0");
  int64_t d[2] = {in[0]->rank == 2 ? in[0]->dims[0] : t.out_size, t.out_size};
  if (in[0]->rank == 2) alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 2, d);
  else alma__set_shape(&out[0], ALMA_DTYPE_FLOAT32, 1, &t.out_size);
  return ALMA_OK;
}

static int gram_qsort(const void *pa, const void *pb, void *keys) {
  const tfidf_gram *a = pa, *b = pb;
  const int64_t *kk = keys;
  int c = gram_cmp_keys(kk + a->at, a->k, kk + b->at, b->k);
  return c ? c : (a->order < b->order ? -1 : a->order > b->order);
}

/* The column of the n-gram keys[0..k), -1 if it is not in the pool (the last duplicate wins). */
static int64_t tfidf_find(const tfidf *t, const int64_t *key, int k) {
  int64_t lo = 0, hi = t->ngrams;
  while (lo < hi) { /* first gram > key */
    int64_t mid = lo + (hi - lo) / 2;
    if (gram_cmp_keys(t->keys + t->grams[mid].at, t->grams[mid].k, key, k) <= 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && !gram_cmp_keys(t->keys + t->grams[lo - 1].at, t->grams[lo - 1].k, key, k)) return t->grams[lo - 1].out;
  return -1;
}

static alma_status tfidf_exec(EXEC_ARGS) {
  (void)ctx, (void)nin, (void)nout;
  tfidf t;
  const alma_attr *pi, *ps, *cnt;
  ALMA_TRY(tfidf_attrs(n, &t, &pi, &ps, &cnt));
  const alma_tensor *x = in[0];
  int strs = x->dtype == ALMA_DTYPE_STRING;
  int64_t pool = strs ? (ps ? ps->n : 0) : (pi ? pi->n : 0);
  t.keys = malloc(sizeof(int64_t) * (size_t)(pool + 1));
  t.grams = malloc(sizeof(tfidf_gram) * (size_t)(pool + 1));
  int64_t *row = malloc(sizeof(int64_t) * (size_t)(t.maxn + 1));
  int64_t *freq = NULL;
  alma_status st = ALMA_OK;
  if (!t.keys || !t.grams || !row) st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  for (int64_t i = 0; i < pool && st == ALMA_OK; i++) {
    if (strs) {
      const alma__str *h;
      st = alma__str_make(ps->strings[i], strlen(ps->strings[i]), &h);
      t.keys[i] = (int64_t)(intptr_t)h;
    } else {
      t.keys[i] = pi->ints[i];
    }
  }
  /* n-grams of length k+1 start at ngram_counts[k]; ids count from 1 over every length */
  int64_t id = 0;
  for (int64_t k = 0; k < cnt->n && st == ALMA_OK; k++) {
    int64_t b = cnt->ints[k], e = k + 1 < cnt->n ? cnt->ints[k + 1] : pool, len = k + 1;
    if (b < 0 || e > pool || b > e) {
      st = alma__op_error(n, ALMA_ERR_INVALID_MODEL, "ngram_counts[%lld] = %lld is outside the pool of %lld", (long long)k,
                          (long long)b, (long long)pool);
      break;
    }
    int64_t cntk = (e - b) / len;
    for (int64_t g = 0; g < cntk; g++, id++) {
      if (len < t.minn || len > t.maxn) continue;
      if (id >= t.nidx) {
        st = alma__op_error(n, ALMA_ERR_INVALID_MODEL, "n-gram %lld has no entry in ngram_indexes (%lld given)",
                            (long long)id, (long long)t.nidx);
        break;
      }
      t.grams[t.ngrams++] = (tfidf_gram){(int)len, b + g * len, t.idx[id], id};
    }
  }
  if (st == ALMA_OK) {
    qsort_r(t.grams, (size_t)t.ngrams, sizeof *t.grams, gram_qsort, t.keys);
  }
  int64_t rows = x->rank == 2 ? x->dims[0] : 1, c = x->rank == 2 ? x->dims[1] : x->rank == 1 ? x->dims[0] : 1;
  if (st == ALMA_OK) {
    freq = calloc((size_t)(rows * t.out_size + 1), sizeof *freq);
    if (!freq) st = alma__op_error(n, ALMA_ERR_NOMEM, "out of memory");
  }
  for (int64_t r = 0; r < rows && st == ALMA_OK && t.ngrams; r++) {
    int64_t start = t.minn;
    for (int64_t d = 1; d <= t.skip + 1; d++) {
      for (int64_t s = 0; s < c; s++) {
        if (s + d * (start - 1) >= c) break;
        for (int64_t k = 1; k <= t.maxn && s + (k - 1) * d < c; k++) {
          int64_t i = r * c + s + (k - 1) * d;
          row[k - 1] = strs ? (int64_t)(intptr_t)alma__strs(x)[i] : alma__get_i64(x->data, x->dtype, i);
          if (k < start) continue;
          int64_t col = tfidf_find(&t, row, (int)k);
          if (col >= 0) freq[r * t.out_size + col]++;
        }
      }
      if (start == 1) { /* unigrams are counted once, not once per skip */
        start = 2;
        if (start > t.maxn) break;
      }
    }
  }
  float *y = out[0].data;
  for (int64_t r = 0; r < rows && st == ALMA_OK; r++)
    for (int64_t i = 0; i < t.out_size; i++) {
      int64_t f = freq[r * t.out_size + i];
      float v = (float)f;
      if (t.mode == 2) v = f > 0 ? (t.nw ? t.w[i] : 1.0f) : 0.0f;
      else if (t.mode == 3 && t.nw) v = t.w[i] * (float)f;
      y[r * t.out_size + i] = v;
    }
  free(freq), free(row), free(t.keys), free(t.grams);
  return st;
}

const alma_op_def alma__op_TfIdfVectorizer = {.name = "TfIdfVectorizer", .domain = "", .versions = {9},
                                              .flags = ALMA_OP_STRINGS, .min_inputs = 1, .max_inputs = 1,
                                              .min_outputs = 1, .max_outputs = 1, .infer = tfidf_infer,
                                              .exec = tfidf_exec};

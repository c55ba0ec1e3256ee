/* Run-time containers for ONNX sequences and optionals (see core.h). */
#include "core/core.h"

void alma__set_container_type(alma_tensor *t, alma_dtype kind, alma_dtype elem, int elem_is_seq) {
  t->dtype = kind;
  t->rank = 0;
  memset(t->dims, 0, sizeof t->dims);
  t->dims[0] = elem;
  t->dims[1] = elem_is_seq ? 1 : 0;
}

alma_status alma__container_alloc(alma_tensor *t, alma_dtype kind, alma_dtype elem, int elem_is_seq) {
  alma__seq *s = calloc(1, sizeof *s);
  if (!s) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  memset(t, 0, sizeof *t);
  alma__set_container_type(t, kind, elem, elem_is_seq);
  t->data = s;
  t->nbytes = sizeof *s;
  t->owns_data = 1;
  return ALMA_OK;
}

void alma__container_free(alma__seq *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) alma_tensor_free_data(&s->items[i]);
  free(s->items);
  free(s);
}

alma_status alma__container_insert(alma_tensor *t, int64_t pos, alma_tensor *item) {
  alma__seq *s = alma__container(t);
  if (!s) return alma__errorf(ALMA_ERR_INTERNAL, "container has no storage");
  if (pos < 0) pos = s->n;
  if (pos > s->n) return alma__errorf(ALMA_ERR_INTERNAL, "container position %lld past its end", (long long)pos);
  if (t->dtype == ALMA__DTYPE_OPTIONAL && s->n >= 1)
    return alma__errorf(ALMA_ERR_INTERNAL, "an optional holds at most one element");
  alma_tensor own;
  if (item->owns_data || !item->data) {
    own = *item;
  } else {
    ALMA_TRY(alma__tensor_copy(&own, item));
  }
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 4;
    alma_tensor *ni = realloc(s->items, sizeof *ni * (size_t)cap);
    if (!ni) {
      if (own.data != item->data) alma_tensor_free_data(&own);
      return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
    s->items = ni;
    s->cap = cap;
  }
  memmove(&s->items[pos + 1], &s->items[pos], sizeof *s->items * (size_t)(s->n - pos));
  s->items[pos] = own;
  s->n++;
  item->owns_data = 0; /* moved (or copied) into the container */
  return ALMA_OK;
}

alma_status alma__map_alloc(alma_tensor *t, alma_dtype key, alma_dtype value, int64_t n) {
  ALMA_TRY(alma__container_alloc(t, ALMA__DTYPE_MAP, ALMA_DTYPE_UNDEFINED, 0));
  t->dims[2] = key;
  t->dims[3] = value;
  alma_tensor kv[2];
  alma_status st = alma__tensor_alloc(&kv[0], key, 1, &n);
  if (st == ALMA_OK && (st = alma__tensor_alloc(&kv[1], value, 1, &n)) != ALMA_OK) alma_tensor_free_data(&kv[0]);
  for (int i = 0; i < 2 && st == ALMA_OK; i++) {
    st = alma__container_insert(t, -1, &kv[i]);
    if (st != ALMA_OK)
      for (int j = i; j < 2; j++) alma_tensor_free_data(&kv[j]);
  }
  if (st != ALMA_OK) alma_tensor_free_data(t);
  return st;
}

const char *alma__container_type_str(const alma_tensor *t, char *buf, size_t n) {
  const char *el = alma_dtype_name(alma__container_elem(t));
  if (t->dtype == ALMA__DTYPE_MAP || (t->dtype == ALMA__DTYPE_SEQUENCE && alma__container_elem(t) == ALMA__DTYPE_MAP)) {
    const char *k = alma_dtype_name((alma_dtype)t->dims[2]), *v = alma_dtype_name((alma_dtype)t->dims[3]);
    if (t->dtype == ALMA__DTYPE_MAP) snprintf(buf, n, "map(%s,tensor(%s))", k, v);
    else snprintf(buf, n, "seq(map(%s,tensor(%s)))", k, v);
    return buf;
  }
  if (t->dtype == ALMA__DTYPE_SEQUENCE) snprintf(buf, n, "seq(tensor(%s))", el);
  else if (alma__container_elem_is_seq(t)) snprintf(buf, n, "optional(seq(tensor(%s)))", el);
  else snprintf(buf, n, "optional(tensor(%s))", el);
  return buf;
}

/* ONNX ModelProto -> alma graph IR. Every malformed field is reported with the tensor/node/value
 * it belongs to; nothing here trusts sizes from the file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onnx/functions.h"
#include "onnx/onnx.h"
#include "onnx/onnx.pb-c.h"

/* The value names of each graph being parsed (the current one and those enclosing it), hashed:
 * a linear scan per name made loading quadratic in the number of values. */
typedef struct name_scope {
  alma_graph *g;
  alma_strmap names;
} name_scope;

typedef struct load_ctx {
  const char *base_dir;
  alma_arena *arena;
  int depth;
  name_scope scopes[66]; /* parse_graph refuses more than 64 levels */
  int n_scopes;
} load_ctx;

/* ---- tensors ----------------------------------------------------------------------------------- */

static int dtype_supported(int32_t t) {
  switch (t) {
    case ALMA_DTYPE_FLOAT32: case ALMA_DTYPE_UINT8: case ALMA_DTYPE_INT8: case ALMA_DTYPE_UINT16:
    case ALMA_DTYPE_INT16: case ALMA_DTYPE_INT32: case ALMA_DTYPE_INT64: case ALMA_DTYPE_BOOL:
    case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_FLOAT64: case ALMA_DTYPE_UINT32: case ALMA_DTYPE_UINT64:
    case ALMA_DTYPE_BFLOAT16: case ALMA_DTYPE_STRING:
      return 1;
    default:
      return alma__dtype_is_lowbit((alma_dtype)t);
  }
}

/* Rejects absolute paths and '..' so a model cannot read files outside its directory. */
static int external_path_ok(const char *loc) {
  if (!loc || !loc[0] || loc[0] == '/') return 0;
  const char *p = loc;
  while (*p) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') return 0;
    if (!e) break;
    p = e + 1;
  }
  return 1;
}

/* The real path of an open descriptor (what was actually opened, whatever links led to it). */
static int fd_real_path(int fd, const char *path, char *out, size_t n) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
  ssize_t len = readlink(proc, out, n - 1);
  if (len > 0 && (size_t)len < n - 1) {
    out[len] = 0;
    return 0;
  }
  /* no /proc: resolve the name instead (a link swapped between open and here goes unseen) */
  char *r = realpath(path, NULL);
  if (!r || strlen(r) >= n) {
    free(r);
    return -1;
  }
  strcpy(out, r);
  free(r);
  return 0;
}

/* Opens `path` (base_dir/location) read-only so that what is opened is a regular file whose real
 * path lies inside base_dir's real path. The lexical check (external_path_ok) alone let a symlink
 * in the model's directory (`w.bin -> /etc/shadow`, `root -> /`) read any file the user can read,
 * as tensor values (ONNX's CVE-2024-27318 class). The containment check runs on the opened
 * descriptor, so a link swapped between check and open changes nothing; alma__open_regular keeps
 * a FIFO from blocking the open and refuses it (and devices, directories) before any read. */
static alma_status open_inside(const char *base_dir, const char *path, const char *tname, int *fd_out) {
  *fd_out = -1;
  char *base = realpath(base_dir, NULL);
  if (!base)
    return alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot resolve the model's directory '%s': %s", tname, base_dir,
                        strerror(errno));
  int fd = -1;
  alma_status st = alma__open_regular(path, O_RDONLY | O_NOCTTY, &fd, NULL);
  if (st != ALMA_OK) {
    free(base);
    return alma__error_prefix(st, "tensor '%s': external data: ", tname);
  }
  char real[PATH_MAX];
  if (fd_real_path(fd, path, real, sizeof real) != 0) {
    st = alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot resolve the real path of external data '%s'", tname, path);
  } else {
    size_t bl = strlen(base);
    int inside = !strcmp(base, "/") ? real[0] == '/' : !strncmp(real, base, bl) && real[bl] == '/';
    if (!inside)
      st = alma__errorf(ALMA_ERR_INVALID_MODEL,
                        "tensor '%s': external data '%s' resolves to '%s', outside the model's directory '%s' "
                        "(a symbolic link leads out of it; copy the file into the model's directory)",
                        tname, path, real, base);
  }
  free(base);
  if (st != ALMA_OK) {
    close(fd);
    return st;
  }
  *fd_out = fd;
  return ALMA_OK;
}

/* Opens a tensor's external data file positioned at its offset, after checking that the file holds
 * all `nbytes`: the caller allocates only then, so a header declaring a huge shape over a missing or
 * short file cannot make the loader allocate (fuzz: a 4 GiB tensor whose location key was wrong). */
static alma_status open_external(const Onnx__TensorProto *tp, const char *tname, const char *base_dir, size_t nbytes,
                                 FILE **out) {
  *out = NULL;
  const char *loc = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < tp->n_external_data; i++) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    if (!e->key || !e->value) continue;
    char *end = NULL;
    if (!strcmp(e->key, "location")) loc = e->value;
    else if (!strcmp(e->key, "offset") || !strcmp(e->key, "length")) {
      errno = 0;
      long long v = strtoll(e->value, &end, 10);
      if (errno || !end || *end || v < 0)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': external data %s '%s' is not a valid number", tname,
                            e->key, e->value);
      if (!strcmp(e->key, "offset")) offset = v;
      else length = v;
    }
  }
  if (!loc) return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': external data has no location", tname);
  if (!external_path_ok(loc))
    return alma__errorf(ALMA_ERR_INVALID_MODEL,
                        "tensor '%s': external data location '%s' must be a relative path inside the model's directory",
                        tname, loc);
  if (length >= 0 && (uint64_t)length != nbytes)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': external data length %lld does not match its %zu bytes",
                        tname, (long long)length, nbytes);
  char path[4096];
  int w = snprintf(path, sizeof path, "%s/%s", base_dir && base_dir[0] ? base_dir : ".", loc);
  if (w < 0 || (size_t)w >= sizeof path)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': external data path too long", tname);
  int fd = -1;
  ALMA_TRY(open_inside(base_dir && base_dir[0] ? base_dir : ".", path, tname, &fd));
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return alma__errorf(ALMA_ERR_NOMEM, "tensor '%s': cannot open external data file '%s': %s", tname, path,
                        strerror(errno));
  }
  struct stat sb;
  alma_status st = ALMA_OK;
  if (fstat(fileno(f), &sb) != 0) {
    st = alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot stat external data '%s': %s", tname, path, strerror(errno));
  } else if ((uint64_t)offset > (uint64_t)sb.st_size || nbytes > (uint64_t)sb.st_size - (uint64_t)offset) {
    st = alma__errorf(ALMA_ERR_IO, "tensor '%s': external data file '%s' is too short (needs %zu bytes at offset %lld)",
                      tname, path, nbytes, (long long)offset);
  } else if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
    st = alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot seek to offset %lld in '%s'", tname, (long long)offset, path);
  }
  if (st != ALMA_OK) fclose(f);
  else *out = f;
  return st;
}

/* A string TensorProto: string_data only (ONNX keeps strings out of raw_data and external files);
 * each element becomes an interned handle (core.h). */
static alma_status string_tensor_from_proto(const Onnx__TensorProto *tp, const char *tname, int64_t numel,
                                            alma_arena *arena, alma_tensor *out) {
  if (tp->has_raw_data || (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': string tensors keep their data in string_data, not %s", tname,
                        tp->has_raw_data ? "raw_data" : "external files");
  if ((int64_t)tp->n_string_data != numel)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': string_data has %zu elements, its shape needs %lld", tname,
                        tp->n_string_data, (long long)numel);
  out->dtype = ALMA_DTYPE_STRING;
  out->rank = (int)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) out->dims[i] = tp->dims[i];
  size_t nbytes = (size_t)numel * alma_dtype_size(ALMA_DTYPE_STRING);
  void *data = arena ? alma__arena_alloc(arena, nbytes ? nbytes : 1) : calloc(nbytes ? nbytes : 1, 1);
  if (!data) return alma__errorf(ALMA_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", tname, nbytes);
  out->data = data;
  out->nbytes = nbytes;
  out->owns_data = arena ? 0 : 1;
  for (int64_t i = 0; i < numel; i++) {
    alma_status st = alma__str_make((const char *)tp->string_data[i].data, tp->string_data[i].len, &((const alma__str **)data)[i]);
    if (st != ALMA_OK) {
      if (!arena) free(data);
      out->data = NULL;
      return st;
    }
  }
  return ALMA_OK;
}

/* Converts a TensorProto into `out`. Data goes into the arena when one is given (owned by the
 * graph), otherwise into a malloc'd buffer owned by the tensor. */
static alma_status tensor_from_proto(const Onnx__TensorProto *tp, const char *base_dir, alma_arena *arena,
                                     alma_tensor *out) {
  const char *tname = tp->name && tp->name[0] ? tp->name : "<unnamed>";
  memset(out, 0, sizeof *out);
  int32_t dt = tp->has_data_type ? tp->data_type : 0;
  if (!dtype_supported(dt))
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "tensor '%s': dtype %s (%d) is not supported by alma", tname,
                        alma__onnx_type_name(dt), (int)dt);
  if (tp->n_dims > ALMA_MAX_RANK)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds alma's maximum of %d", tname, tp->n_dims,
                        ALMA_MAX_RANK);
  if (tp->segment) return alma__errorf(ALMA_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", tname);
  int64_t numel = 1;
  for (size_t i = 0; i < tp->n_dims; i++) {
    if (tp->dims[i] < 0)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': negative dimension %lld", tname, (long long)tp->dims[i]);
    if (alma__mul_overflow_i64(numel, tp->dims[i], &numel) || numel > ((int64_t)1 << 40))
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': implausibly large shape", tname);
  }
  if (dt == ALMA_DTYPE_STRING) return string_tensor_from_proto(tp, tname, numel, arena, out);
  size_t esz = alma_dtype_size((alma_dtype)dt);
  size_t nbytes = (size_t)numel * esz;
  /* int4/uint4/float4e2m1 and int2/uint2 are packed in the file (two or four a byte, low bits first,
   * the last byte padded) and one a byte in memory: fbytes is the file's size */
  int packed = alma__dtype_packed_bits((alma_dtype)dt) < 8;
  size_t fbytes = packed ? alma__packed_size((alma_dtype)dt, numel) : nbytes;
  out->dtype = (alma_dtype)dt;
  out->rank = (int)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; i++) out->dims[i] = tp->dims[i];
  out->nbytes = nbytes;

  int external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  /* Validate the element count (or the external file's size) before allocating, so a lying header
   * cannot make us allocate. */
  size_t have = 0;
  const char *field = "raw_data";
  FILE *ext = NULL;
  if (external) {
    ALMA_TRY(open_external(tp, tname, base_dir, fbytes, &ext));
  } else {
    if (tp->has_raw_data) {
      have = tp->raw_data.len;
      if (have != fbytes) {
        char shp[256];
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': raw_data has %zu bytes, shape %s of %s needs %zu%s",
                            tname, have, alma__shape_str(out->rank, out->dims, shp, sizeof shp),
                            alma_dtype_name(out->dtype), fbytes,
                            packed ? (alma__dtype_packed_bits((alma_dtype)dt) == 4 ? " (packed two a byte)"
                                                                                  : " (packed four a byte)")
                                   : "");
      }
    } else if (alma__dtype_is_lowbit((alma_dtype)dt)) {
      /* int32_data holds one byte a value: a float8 code, or packed 4-bit/2-bit elements */
      have = tp->n_int32_data;
      field = "int32_data";
      if (have != fbytes)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': int32_data has %zu values, shape of %lld %s elements needs %zu%s",
                            tname, have, (long long)numel, alma_dtype_name(out->dtype), fbytes,
                            packed ? " (packed bytes)" : "");
      for (size_t i = 0; i < have; i++)
        if (tp->int32_data[i] < 0 || tp->int32_data[i] > 255)
          return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': int32_data[%zu] = %d is not a byte of %s data", tname,
                              i, (int)tp->int32_data[i], alma_dtype_name(out->dtype));
    } else {
      switch (dt) {
        case ALMA_DTYPE_FLOAT32: have = tp->n_float_data; field = "float_data"; break;
        case ALMA_DTYPE_FLOAT64: have = tp->n_double_data; field = "double_data"; break;
        case ALMA_DTYPE_INT64: have = tp->n_int64_data; field = "int64_data"; break;
        case ALMA_DTYPE_UINT32: case ALMA_DTYPE_UINT64: have = tp->n_uint64_data; field = "uint64_data"; break;
        default: have = tp->n_int32_data; field = "int32_data"; break;
      }
      if ((int64_t)have != numel)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "tensor '%s': %s has %zu elements, its shape needs %lld", tname,
                            field, have, (long long)numel);
    }
  }
  void *data = arena ? alma__arena_alloc(arena, nbytes ? nbytes : 1) : calloc(nbytes ? nbytes : 1, 1);
  if (!data) {
    if (ext) fclose(ext);
    return alma__errorf(ALMA_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", tname, nbytes);
  }
  out->data = data;
  out->owns_data = arena ? 0 : 1;
  alma_status st = ALMA_OK;
  if (external && packed) {
    uint8_t *buf = malloc(fbytes ? fbytes : 1);
    if (!buf) st = alma__errorf(ALMA_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", tname, fbytes);
    else if (fbytes && fread(buf, 1, fbytes, ext) != fbytes)
      st = alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot read %zu bytes of external data", tname, fbytes);
    else alma__unpack_lowbit(out->dtype, buf, numel, data);
    free(buf);
    fclose(ext);
  } else if (external) {
    if (nbytes && fread(data, 1, nbytes, ext) != nbytes)
      st = alma__errorf(ALMA_ERR_IO, "tensor '%s': cannot read %zu bytes of external data", tname, nbytes);
    fclose(ext);
  } else if (tp->has_raw_data) {
    if (packed) alma__unpack_lowbit(out->dtype, tp->raw_data.data, numel, data);
    else if (nbytes) memcpy(data, tp->raw_data.data, nbytes);
  } else if (alma__dtype_is_lowbit(out->dtype)) {
    uint8_t *buf = malloc(fbytes ? fbytes : 1);
    if (!buf) {
      st = alma__errorf(ALMA_ERR_NOMEM, "tensor '%s': out of memory for %zu bytes", tname, fbytes);
    } else {
      for (size_t i = 0; i < fbytes; i++) buf[i] = (uint8_t)tp->int32_data[i];
      alma__unpack_lowbit(out->dtype, buf, numel, data);
    }
    free(buf);
  } else {
    for (int64_t i = 0; i < numel; i++) {
      switch (dt) {
        case ALMA_DTYPE_FLOAT32: ((float *)data)[i] = tp->float_data[i]; break;
        case ALMA_DTYPE_FLOAT64: ((double *)data)[i] = tp->double_data[i]; break;
        case ALMA_DTYPE_INT64: ((int64_t *)data)[i] = tp->int64_data[i]; break;
        case ALMA_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)tp->uint64_data[i]; break;
        case ALMA_DTYPE_UINT64: ((uint64_t *)data)[i] = tp->uint64_data[i]; break;
        case ALMA_DTYPE_FLOAT16: case ALMA_DTYPE_BFLOAT16: case ALMA_DTYPE_UINT16:
          ((uint16_t *)data)[i] = (uint16_t)tp->int32_data[i];
          break;
        default: alma__set_i64(data, out->dtype, i, tp->int32_data[i]); break;
      }
    }
  }
  if (st != ALMA_OK && !arena) {
    free(data);
    out->data = NULL;
  }
  return st;
}

alma_status alma__onnx_load_tensor_file(const char *path, alma_tensor *out, char **name_out) {
  uint8_t *bytes;
  size_t n;
  memset(out, 0, sizeof *out);
  if (name_out) *name_out = NULL;
  ALMA_TRY(alma__read_file(path, &bytes, &n));
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, n, bytes);
  free(bytes);
  if (!tp) return alma__errorf(ALMA_ERR_PARSE, "'%s' is not a valid serialized ONNX TensorProto", path);
  alma_status st = tensor_from_proto(tp, NULL, NULL, out);
  if (st == ALMA_OK && name_out && tp->name) *name_out = alma__strdup(tp->name);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  if (st != ALMA_OK) return alma__error_prefix(st, "'%s': ", path);
  return ALMA_OK;
}

/* ---- SequenceProto / OptionalProto (onnx-data.proto; test data files) -------------------------
 * The generated protobuf-c code covers onnx.proto only, and these two messages are small: read
 * their wire format here and hand the embedded TensorProtos to protobuf-c. */
typedef struct wire {
  const uint8_t *p, *end;
} wire;

static int wire_varint(wire *w, uint64_t *v) {
  *v = 0;
  for (int sh = 0; sh < 64 && w->p < w->end; sh += 7) {
    uint8_t b = *w->p++;
    *v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) return 1;
  }
  return 0;
}

/* Next field: number, wire type, and for length-delimited ones the bytes. 0 at the end, -1 on a
 * malformed message. */
static int wire_field(wire *w, uint32_t *field, int *wt, const uint8_t **data, size_t *len) {
  uint64_t key, v;
  if (w->p >= w->end) return 0;
  if (!wire_varint(w, &key)) return -1;
  *field = (uint32_t)(key >> 3);
  *wt = (int)(key & 7);
  switch (*wt) {
    case 0: return wire_varint(w, &v) ? 1 : -1;
    case 1: if (w->end - w->p < 8) return -1; w->p += 8; return 1;
    case 5: if (w->end - w->p < 4) return -1; w->p += 4; return 1;
    case 2:
      if (!wire_varint(w, &v) || v > (uint64_t)(w->end - w->p)) return -1;
      *data = w->p;
      *len = (size_t)v;
      w->p += v;
      return 1;
    default: return -1;
  }
}

static alma_status container_from_wire(const uint8_t *bytes, size_t n, alma_dtype kind, int depth, alma_tensor *out) {
  if (depth > 8) return alma__errorf(ALMA_ERR_UNSUPPORTED, "sequences nested too deeply");
  ALMA_TRY(alma__container_alloc(out, kind, ALMA_DTYPE_UNDEFINED, 0));
  wire w = {bytes, bytes + n};
  uint32_t field;
  int wt, r;
  const uint8_t *data = NULL;
  size_t len = 0;
  alma_status st = ALMA_OK;
  while (st == ALMA_OK && (r = wire_field(&w, &field, &wt, &data, &len)) > 0) {
    if (wt != 2 || (field != 3 && field != 5)) {
      if (wt == 2 && (field == 4 || field == 6 || field == 7))
        st = alma__errorf(ALMA_ERR_UNSUPPORTED, "sparse tensors, maps and optionals inside a %s are not supported",
                          kind == ALMA__DTYPE_SEQUENCE ? "sequence" : "optional");
      continue; /* name, elem_type */
    }
    alma_tensor item;
    memset(&item, 0, sizeof item);
    if (field == 3) {
      Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, data);
      if (!tp) {
        st = alma__errorf(ALMA_ERR_PARSE, "an element is not a valid TensorProto");
        break;
      }
      st = tensor_from_proto(tp, NULL, NULL, &item);
      onnx__tensor_proto__free_unpacked(tp, NULL);
      if (st == ALMA_OK) out->dims[0] = item.dtype;
    } else {
      if (kind == ALMA__DTYPE_SEQUENCE) {
        st = alma__errorf(ALMA_ERR_UNSUPPORTED, "sequences of sequences are not supported");
        break;
      }
      st = container_from_wire(data, len, ALMA__DTYPE_SEQUENCE, depth + 1, &item);
      if (st == ALMA_OK) out->dims[0] = item.dims[0], out->dims[1] = 1;
    }
    if (st == ALMA_OK && (st = alma__container_insert(out, -1, &item)) != ALMA_OK) alma_tensor_free_data(&item);
  }
  if (st == ALMA_OK && r < 0) st = alma__errorf(ALMA_ERR_PARSE, "malformed %s message", kind == ALMA__DTYPE_SEQUENCE ? "SequenceProto" : "OptionalProto");
  if (st != ALMA_OK) alma_tensor_free_data(out);
  return st;
}

alma_status alma__onnx_load_container_file(const char *path, alma_dtype kind, alma_tensor *out) {
  uint8_t *bytes;
  size_t n;
  memset(out, 0, sizeof *out);
  if (!alma__dtype_is_container(kind)) return alma__errorf(ALMA_ERR_INVALID_ARG, "not a sequence or optional kind");
  ALMA_TRY(alma__read_file(path, &bytes, &n));
  alma_status st = container_from_wire(bytes, n, kind, 0, out);
  free(bytes);
  if (st != ALMA_OK) return alma__error_prefix(st, "'%s': ", path);
  return ALMA_OK;
}

/* ---- graphs ------------------------------------------------------------------------------------ */

static alma_status parse_graph(load_ctx *c, const Onnx__GraphProto *gp, alma_graph *g);

/* map(K, tensor(V)) as alma holds it (core.h): K int64 or string, V float (ZipMap's). key and val
 * the dtypes; anything else is refused naming the value. */
static alma_status map_types(const alma_value *v, const Onnx__TypeProto *tp, int64_t *key, int64_t *val) {
  const Onnx__TypeProto__Map *mt = tp->map_type;
  const Onnx__TypeProto *vt = mt ? mt->value_type : NULL;
  int k = mt && mt->has_key_type ? mt->key_type : 0;
  int e = vt && vt->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && vt->tensor_type && vt->tensor_type->has_elem_type
              ? vt->tensor_type->elem_type
              : -1;
  if ((k != ALMA_DTYPE_INT64 && k != ALMA_DTYPE_STRING) || e != ALMA_DTYPE_FLOAT32)
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "value '%s': only maps of int64 or string keys to float values (ZipMap's) are supported, not "
                        "map(%s, %s)", v->name, alma__onnx_type_name(k), e >= 0 ? alma__onnx_type_name(e) : "non-tensor");
  *key = k;
  *val = e;
  return ALMA_OK;
}

/* seq(tensor(T)), optional(tensor(T)) and optional(seq(tensor(T))): the value gets the container
 * encoding of core.h (element shapes are not kept: they may differ between elements); seq(map(K, V))
 * and map(K, V) the map encoding. */
static alma_status set_container_type(alma_value *v, const Onnx__TypeProto *tp) {
  if (tp->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE) {
    int64_t k, e;
    ALMA_TRY(map_types(v, tp, &k, &e));
    v->dtype = ALMA__DTYPE_MAP;
    v->rank = 0;
    memset(v->dims, 0, sizeof v->dims);
    v->dims[2] = k, v->dims[3] = e;
    return ALMA_OK;
  }
  alma_dtype kind = tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ? ALMA__DTYPE_SEQUENCE : ALMA__DTYPE_OPTIONAL;
  const Onnx__TypeProto *el = kind == ALMA__DTYPE_SEQUENCE ? (tp->sequence_type ? tp->sequence_type->elem_type : NULL)
                                                           : (tp->optional_type ? tp->optional_type->elem_type : NULL);
  int elem_is_seq = 0;
  if (kind == ALMA__DTYPE_OPTIONAL && el && el->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
    elem_is_seq = 1;
    el = el->sequence_type ? el->sequence_type->elem_type : NULL;
  }
  if (kind == ALMA__DTYPE_SEQUENCE && el && el->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE) {
    int64_t k, e;
    ALMA_TRY(map_types(v, el, &k, &e));
    v->dtype = kind;
    v->rank = 0;
    memset(v->dims, 0, sizeof v->dims);
    v->dims[0] = ALMA__DTYPE_MAP;
    v->dims[2] = k, v->dims[3] = e;
    return ALMA_OK;
  }
  if (el && el->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) el = NULL; /* element type unknown */
  if (el && el->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return alma__errorf(ALMA_ERR_UNSUPPORTED,
                        "value '%s': only sequences and optionals of tensors (and optionals of sequences of tensors), "
                        "and sequences of maps, are supported, not optionals of maps, sparse tensors or nested sequences",
                        v->name);
  alma_dtype elem = ALMA_DTYPE_UNDEFINED;
  if (el && el->tensor_type && el->tensor_type->has_elem_type) {
    if (!dtype_supported(el->tensor_type->elem_type))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "value '%s': element dtype %s is not supported by alma", v->name,
                          alma__onnx_type_name(el->tensor_type->elem_type));
    elem = (alma_dtype)el->tensor_type->elem_type;
  }
  v->dtype = kind;
  v->rank = 0;
  memset(v->dims, 0, sizeof v->dims);
  v->dims[0] = elem;
  v->dims[1] = elem_is_seq;
  return ALMA_OK;
}

static alma_status set_declared_type(alma_value *v, const Onnx__ValueInfoProto *vi, alma_arena *a) {
  /* An empty TypeProto (no value case; spox and torch write them for some If-branch outputs) says
   * nothing: the value stays unknown and shape inference types it, as ONNX Runtime does. */
  if (!vi->type || vi->type->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET) return ALMA_OK;
  if (vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ||
      vi->type->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE ||
      vi->type->value_case == ONNX__TYPE_PROTO__VALUE_MAP_TYPE)
    return set_container_type(v, vi->type);
  if (vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "value '%s': only tensor, sequence, optional and map types are supported "
                        "(%s types are not)", v->name,
                        vi->type->value_case == ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE ? "sparse tensor" : "opaque");
  const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type;
  if (!tt) return ALMA_OK;
  if (tt->has_elem_type) {
    if (!dtype_supported(tt->elem_type))
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "value '%s': dtype %s is not supported by alma", v->name,
                          alma__onnx_type_name(tt->elem_type));
    v->dtype = (alma_dtype)tt->elem_type;
  }
  if (tt->shape) {
    if (tt->shape->n_dim > ALMA_MAX_RANK)
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "value '%s': rank %zu exceeds alma's maximum of %d", v->name,
                          tt->shape->n_dim, ALMA_MAX_RANK);
    v->rank = (int)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      v->dims[i] = ALMA_DIM_UNKNOWN;
      v->dim_params[i] = NULL;
      if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE && d->dim_value >= 0)
        v->dims[i] = d->dim_value;
      else if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param &&
               d->dim_param[0] && strcmp(d->dim_param, "?"))
        /* "" and "?" (paddle2onnx's [-1,3,?,?]) mean unknown, not one size shared by every such dim */
        v->dim_params[i] = alma__arena_strdup(a, d->dim_param);
    }
  }
  return ALMA_OK;
}

/* Finds `name` in g, or (for subgraphs) in an enclosing graph, creating the outer reference in
 * every graph between. Returns -1 if it is nowhere. */
static alma_strmap *names_of(load_ctx *c, const alma_graph *g) {
  for (int i = c->n_scopes - 1; i >= 0; i--)
    if (c->scopes[i].g == g) return &c->scopes[i].names;
  return NULL;
}

static int find_value(load_ctx *c, const alma_graph *g, const char *name) {
  alma_strmap *m = names_of(c, g);
  return m ? alma__strmap_get(m, name) : alma__graph_find_value(g, name);
}

/* alma__graph_add_value, kept in the graph's name index; -1 out of memory */
static int add_value(load_ctx *c, alma_graph *g, const char *name) {
  int v = alma__graph_add_value(g, name);
  alma_strmap *m = names_of(c, g);
  if (v >= 0 && m && alma__strmap_put(m, g->values[v].name, v) != 0) return -1;
  return v;
}

static int resolve_name(load_ctx *c, alma_graph *g, const char *name) {
  int v = find_value(c, g, name);
  if (v >= 0 || !g->parent) return v;
  if (resolve_name(c, g->parent, name) < 0) return -1;
  v = add_value(c, g, name);
  if (v >= 0) g->values[v].is_outer = 1;
  return v;
}

static alma_status parse_attr(load_ctx *c, alma_graph *g, const Onnx__AttributeProto *ap, alma_attr *at,
                              const char *node_name) {
  alma_arena *a = c->arena;
  at->name = alma__arena_strdup(a, ap->name ? ap->name : "");
  if (ap->ref_attr_name && ap->ref_attr_name[0])
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': attribute '%s' refers to a function attribute", node_name,
                        at->name);
  at->type = ap->has_type ? (alma_attr_type)ap->type : ALMA_ATTR_UNDEFINED;
  if (at->type == ALMA_ATTR_UNDEFINED) { /* IR < 2 files leave type out: infer it from what is set */
    if (ap->has_f) at->type = ALMA_ATTR_FLOAT;
    else if (ap->has_i) at->type = ALMA_ATTR_INT;
    else if (ap->has_s) at->type = ALMA_ATTR_STRING;
    else if (ap->t) at->type = ALMA_ATTR_TENSOR;
    else if (ap->g) at->type = ALMA_ATTR_GRAPH;
    else if (ap->n_floats) at->type = ALMA_ATTR_FLOATS;
    else if (ap->n_ints) at->type = ALMA_ATTR_INTS;
    else if (ap->n_strings) at->type = ALMA_ATTR_STRINGS;
    else if (ap->n_tensors) at->type = ALMA_ATTR_TENSORS;
    else if (ap->n_graphs) at->type = ALMA_ATTR_GRAPHS;
  }
  switch (at->type) {
    case ALMA_ATTR_FLOAT: at->f = ap->f; break;
    case ALMA_ATTR_INT: at->i = ap->i; break;
    case ALMA_ATTR_STRING:
      at->s = alma__arena_strndup(a, (const char *)ap->s.data, ap->s.len);
      at->s_len = ap->s.len;
      break;
    case ALMA_ATTR_TENSOR:
      if (!ap->t) return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': tensor attribute '%s' has no tensor", node_name, at->name);
      at->t = alma__arena_alloc(a, sizeof(alma_tensor));
      if (!at->t) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      ALMA_TRY(tensor_from_proto(ap->t, c->base_dir, a, at->t));
      break;
    case ALMA_ATTR_GRAPH:
      if (!ap->g) return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': graph attribute '%s' has no graph", node_name, at->name);
      at->g = alma__graph_new(a);
      if (!at->g) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      at->g->parent = g;
      at->g->opsets = g->opsets;
      at->g->n_opsets = g->n_opsets;
      ALMA_TRY(parse_graph(c, ap->g, at->g));
      break;
    case ALMA_ATTR_FLOATS:
      at->n = (int)ap->n_floats;
      at->floats = alma__arena_alloc(a, ap->n_floats * sizeof(float) + 1);
      if (!at->floats) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      if (ap->n_floats) memcpy(at->floats, ap->floats, ap->n_floats * sizeof(float));
      break;
    case ALMA_ATTR_INTS:
      at->n = (int)ap->n_ints;
      at->ints = alma__arena_alloc(a, ap->n_ints * sizeof(int64_t) + 1);
      if (!at->ints) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      if (ap->n_ints) memcpy(at->ints, ap->ints, ap->n_ints * sizeof(int64_t));
      break;
    case ALMA_ATTR_STRINGS:
      at->n = (int)ap->n_strings;
      at->strings = alma__arena_alloc(a, ap->n_strings * sizeof(char *) + 1);
      if (!at->strings) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      for (size_t i = 0; i < ap->n_strings; i++)
        at->strings[i] = alma__arena_strndup(a, (const char *)ap->strings[i].data, ap->strings[i].len);
      break;
    case ALMA_ATTR_TENSORS:
      at->n = (int)ap->n_tensors;
      at->tensors = alma__arena_alloc(a, ap->n_tensors * sizeof(alma_tensor) + 1);
      if (!at->tensors) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      for (size_t i = 0; i < ap->n_tensors; i++) ALMA_TRY(tensor_from_proto(ap->tensors[i], c->base_dir, a, &at->tensors[i]));
      break;
    case ALMA_ATTR_GRAPHS:
      at->n = (int)ap->n_graphs;
      at->graphs = alma__arena_alloc(a, ap->n_graphs * sizeof(alma_graph *) + 1);
      if (!at->graphs) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      for (size_t i = 0; i < ap->n_graphs; i++) {
        at->graphs[i] = alma__graph_new(a);
        if (!at->graphs[i]) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
        at->graphs[i]->parent = g;
        at->graphs[i]->opsets = g->opsets;
        at->graphs[i]->n_opsets = g->n_opsets;
        ALMA_TRY(parse_graph(c, ap->graphs[i], at->graphs[i]));
      }
      break;
    case ALMA_ATTR_TYPE_PROTO: {
      if (!ap->tp) return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s': type attribute '%s' has no type", node_name, at->name);
      alma_value tmp = {.name = at->name};
      if (ap->tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) {
        const Onnx__TypeProto__Tensor *tt = ap->tp->tensor_type;
        if (tt && tt->has_elem_type && !dtype_supported(tt->elem_type))
          return alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': type attribute '%s': dtype %s is not supported by alma",
                              node_name, at->name, alma__onnx_type_name(tt->elem_type));
        tmp.dtype = tt && tt->has_elem_type ? (alma_dtype)tt->elem_type : ALMA_DTYPE_UNDEFINED;
      } else if (ap->tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE ||
                 ap->tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
        ALMA_TRY(set_container_type(&tmp, ap->tp));
      } else {
        return alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': type attribute '%s' is a map or sparse tensor type",
                            node_name, at->name);
      }
      at->n = 3;
      at->ints = alma__arena_alloc(a, 3 * sizeof(int64_t));
      if (!at->ints) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
      at->ints[0] = tmp.dtype;
      at->ints[1] = tmp.dtype == ALMA__DTYPE_SEQUENCE || tmp.dtype == ALMA__DTYPE_OPTIONAL ? tmp.dims[0] : 0;
      at->ints[2] = tmp.dtype == ALMA__DTYPE_SEQUENCE || tmp.dtype == ALMA__DTYPE_OPTIONAL ? tmp.dims[1] : 0;
      break;
    }
    default:
      return alma__errorf(ALMA_ERR_UNSUPPORTED, "node '%s': attribute '%s' has unsupported type %d", node_name, at->name,
                          (int)at->type);
  }
  if (!at->name) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  return ALMA_OK;
}

/* Collects the outer references of a subgraph as this graph's value indices (deduplicated). */
static alma_status add_implicit(load_ctx *c, alma_graph *g, alma_node *n, const alma_graph *sub) {
  for (int v = 0; v < sub->n_values; v++) {
    if (!sub->values[v].is_outer) continue;
    int pv = find_value(c, g, sub->values[v].name);
    if (pv < 0) return alma__errorf(ALMA_ERR_INTERNAL, "outer value '%s' not found", sub->values[v].name);
    int dup = 0;
    for (int k = 0; k < n->n_implicit; k++) dup |= n->implicit_inputs[k] == pv;
    if (dup) continue;
    int *ni = realloc(n->implicit_inputs, (size_t)(n->n_implicit + 1) * sizeof(int));
    if (!ni) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    n->implicit_inputs = ni;
    n->implicit_inputs[n->n_implicit++] = pv;
  }
  return ALMA_OK;
}

static alma_status parse_graph_body(load_ctx *c, const Onnx__GraphProto *gp, alma_graph *g);

static alma_status parse_graph(load_ctx *c, const Onnx__GraphProto *gp, alma_graph *g) {
  if (c->n_scopes >= (int)(sizeof c->scopes / sizeof c->scopes[0]))
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "subgraphs nested more than 64 deep");
  name_scope *sc = &c->scopes[c->n_scopes++];
  sc->g = g;
  alma__strmap_init(&sc->names);
  alma_status st = ALMA_OK;
  for (int v = 0; v < g->n_values && st == ALMA_OK; v++)
    if (alma__strmap_put(&sc->names, g->values[v].name, v) != 0) st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  if (st == ALMA_OK) st = parse_graph_body(c, gp, g);
  alma__strmap_free(&sc->names);
  c->n_scopes--;
  return st;
}

static alma_status parse_graph_body(load_ctx *c, const Onnx__GraphProto *gp, alma_graph *g) {
  if (++c->depth > 64) return alma__errorf(ALMA_ERR_INVALID_MODEL, "subgraphs nested more than 64 deep");
  alma_arena *a = c->arena;
  g->name = alma__arena_strdup(a, gp->name ? gp->name : "");
  if (gp->n_sparse_initializer)
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "graph '%s': sparse initializers are not supported", g->name);
  if (gp->n_node > INT_MAX / 2 || gp->n_input > INT_MAX / 2 || gp->n_output > INT_MAX / 2)
    return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s' is too large", g->name);

  /* 1. initializers */
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *tp = gp->initializer[i];
    const char *name = tp->name ? tp->name : "";
    if (!name[0]) return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': initializer %zu has no name", g->name, i);
    if (find_value(c, g, name) >= 0)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': initializer '%s' is defined twice", g->name, name);
    int v = add_value(c, g, name);
    if (v < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    alma_tensor *t = alma__arena_alloc(a, sizeof *t);
    if (!t) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    ALMA_TRY(tensor_from_proto(tp, c->base_dir, a, t));
    g->values[v].init = t;
    g->values[v].dtype = t->dtype;
    g->values[v].rank = t->rank;
    for (int k = 0; k < t->rank; k++) g->values[v].dims[k] = t->dims[k];
  }
  /* 2. inputs; an input that also has an initializer is a constant with a default (IR < 4 style) */
  g->inputs = alma__calloc(gp->n_input, sizeof(int));
  if (!g->inputs) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = vi->name ? vi->name : "";
    if (!name[0]) return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': input %zu has no name", g->name, i);
    int v = find_value(c, g, name);
    if (v >= 0 && g->values[v].init) continue;
    if (v >= 0) return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': input '%s' is declared twice", g->name, name);
    v = add_value(c, g, name);
    if (v < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    g->values[v].is_input = 1;
    ALMA_TRY(set_declared_type(&g->values[v], vi, a));
    g->inputs[g->n_inputs++] = v;
  }
  /* 3. node outputs, so names resolve whatever the order of nodes in the file */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_output; k++) {
      const char *name = np->output[k];
      if (!name || !name[0]) continue;
      int v = find_value(c, g, name);
      if (v >= 0)
        return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): output '%s' is already defined elsewhere",
                            np->name ? np->name : "", np->op_type ? np->op_type : "?", name);
      if (add_value(c, g, name) < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    }
  }
  /* 4. nodes */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    const char *op = np->op_type ? np->op_type : "";
    if (!op[0]) return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': node %zu has no op_type", g->name, i);
    char autoname[160];
    const char *nname = np->name && np->name[0] ? np->name : (snprintf(autoname, sizeof autoname, "%.100s_%zu", op, i), autoname);
    if (np->n_input > 4096 || np->n_output > 4096 || np->n_attribute > 4096)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "node '%s' (%s): too many inputs, outputs or attributes", nname, op);
    int ins[4096], outs[4096];
    for (size_t k = 0; k < np->n_input; k++) {
      const char *name = np->input[k];
      if (!name || !name[0]) {
        ins[k] = -1;
        continue;
      }
      ins[k] = resolve_name(c, g, name);
      if (ins[k] < 0)
        return alma__errorf(ALMA_ERR_INVALID_MODEL,
                            "node '%s' (%s): input '%s' is not produced by any node, initializer or graph input", nname, op,
                            name);
    }
    for (size_t k = 0; k < np->n_output; k++)
      outs[k] = np->output[k] && np->output[k][0] ? find_value(c, g, np->output[k]) : -1;
    int ni = alma__graph_add_node(g, op, np->domain, nname, ins, (int)np->n_input, outs, (int)np->n_output);
    if (ni < 0) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    alma_attr *attrs = alma__arena_alloc(a, (np->n_attribute + 1) * sizeof(alma_attr));
    if (!attrs) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    g->nodes[ni].attrs = attrs;
    for (size_t k = 0; k < np->n_attribute; k++) {
      alma_status st = parse_attr(c, g, np->attribute[k], &attrs[k], nname);
      g->nodes[ni].n_attrs = (int)k + 1; /* so cleanup frees parsed subgraphs, even a half-parsed one */
      if (st != ALMA_OK) return st;
      if (attrs[k].g) ALMA_TRY(add_implicit(c, g, &g->nodes[ni], attrs[k].g));
      for (int q = 0; q < attrs[k].n && attrs[k].graphs; q++) ALMA_TRY(add_implicit(c, g, &g->nodes[ni], attrs[k].graphs[q]));
    }
  }
  /* maps come only from ZipMap: a graph input of a map type (DictVectorizer's, CastMap's) is
   * refused, naming the first node that reads it */
  for (int i = 0; i < g->n_inputs; i++) {
    const alma_value *iv = &g->values[g->inputs[i]];
    if (iv->dtype != ALMA__DTYPE_MAP && !(iv->dtype == ALMA__DTYPE_SEQUENCE && iv->dims[0] == ALMA__DTYPE_MAP)) continue;
    char ty[96];
    alma__container_type_str(&(alma_tensor){.dtype = iv->dtype, .dims = {iv->dims[0], 0, iv->dims[2], iv->dims[3]}}, ty,
                             sizeof ty);
    for (int k = 0; k < g->n_nodes; k++)
      for (int q = 0; q < g->nodes[k].n_inputs; q++)
        if (g->nodes[k].inputs[q] == g->inputs[i])
          return alma__errorf(ALMA_ERR_UNSUPPORTED,
                              "node '%s' (%s) reads graph input '%s' of type %s: alma takes no map inputs (maps exist "
                              "only as ZipMap's output)", g->nodes[k].name, g->nodes[k].op_type, iv->name, ty);
    return alma__errorf(ALMA_ERR_UNSUPPORTED, "graph input '%s' is of type %s: alma takes no map inputs (maps exist only as "
                        "ZipMap's output)", iv->name, ty);
  }
  /* 5. outputs */
  g->outputs = alma__calloc(gp->n_output, sizeof(int));
  if (!g->outputs) return alma__errorf(ALMA_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *name = vi->name ? vi->name : "";
    int v = name[0] ? resolve_name(c, g, name) : -1;
    if (v < 0)
      return alma__errorf(ALMA_ERR_INVALID_MODEL, "graph '%s': output '%s' is not produced by any node, initializer or input",
                          g->name, name);
    alma_value *val = &g->values[v];
    /* Keep a copy of the declared output type: inference may refine it but the API reports both. */
    if (val->producer >= 0 || (!val->init && !val->is_input)) ALMA_TRY(set_declared_type(val, vi, a));
    val->is_output = 1;
    g->outputs[g->n_outputs++] = v;
  }
  c->depth--;
  ALMA_TRY(alma__graph_toposort(g));
  return alma__graph_validate(g);
}

/* protobuf-c answers NULL both for a malformed message and for a failed allocation: an allocator
 * that notes the latter, so that a memory limit is not reported as a corrupt file. */
static void *pb_alloc(void *failed, size_t n) {
  void *p = malloc(n);
  if (!p && n) *(int *)failed = 1;
  return p;
}
static void pb_free(void *failed, void *p) { free(p); }

alma_status alma__onnx_parse_model(const uint8_t *bytes, size_t n, const char *base_dir, alma_graph **g_out,
                                   alma_onnx_meta *meta_out) {
  *g_out = NULL;
  memset(meta_out, 0, sizeof *meta_out);
  if (n == 0) return alma__errorf(ALMA_ERR_PARSE, "the file is empty");
  ALMA_TRY(alma__pb_check_nesting(&onnx__model_proto__descriptor, bytes, n, ALMA_ONNX_MAX_NESTING, "the model"));
  int alloc_failed = 0;
  ProtobufCAllocator pb_allocator = {pb_alloc, pb_free, &alloc_failed};
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pb_allocator, n, bytes);
  if (!mp && alloc_failed)
    return alma__errorf(ALMA_ERR_NOMEM, "out of memory parsing the model (%zu bytes of protobuf)", n);
  if (!mp) return alma__errorf(ALMA_ERR_PARSE, "not a valid ONNX model (protobuf parse failed: truncated or corrupt)");
  alma_status st = ALMA_OK;
  alma_graph *g = NULL;
  if (!mp->graph) {
    st = alma__errorf(ALMA_ERR_PARSE, "not an ONNX model: no graph (is it a different protobuf message?)");
    goto out;
  }
  if (!mp->has_ir_version || mp->ir_version < 1) {
    st = alma__errorf(ALMA_ERR_PARSE, "not an ONNX model: ir_version is missing");
    goto out;
  }
  g = alma__graph_new(NULL);
  if (!g) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  g->opsets = alma__arena_alloc(g->arena, (mp->n_opset_import + 1) * sizeof(alma_opset_import));
  if (!g->opsets) {
    st = alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    g->opsets[i].domain = alma__arena_strdup(g->arena, mp->opset_import[i]->domain ? mp->opset_import[i]->domain : "");
    g->opsets[i].version = mp->opset_import[i]->has_version ? mp->opset_import[i]->version : 0;
  }
  g->n_opsets = (int)mp->n_opset_import;
  meta_out->ir_version = mp->ir_version;
  meta_out->producer_name = alma__arena_strdup(g->arena, mp->producer_name ? mp->producer_name : "");
  meta_out->producer_version = alma__arena_strdup(g->arena, mp->producer_version ? mp->producer_version : "");
  meta_out->domain = alma__arena_strdup(g->arena, mp->domain ? mp->domain : "");
  {
    load_ctx c = {.base_dir = base_dir, .arena = g->arena, .depth = 0};
    alma_arena *tmp = alma__arena_new();
    const Onnx__GraphProto *gp = NULL;
    st = tmp ? alma__onnx_inline_functions(mp, g, tmp, &gp) : alma__errorf(ALMA_ERR_NOMEM, "out of memory");
    if (st == ALMA_OK) st = parse_graph(&c, gp, g);
    alma__arena_free(tmp);
  }
out:
  onnx__model_proto__free_unpacked(mp, NULL);
  if (st != ALMA_OK) {
    alma__graph_free(g);
    return st;
  }
  *g_out = g;
  return ALMA_OK;
}

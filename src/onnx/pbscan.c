/* A nesting bound for protobuf-c: protobuf_c_message_unpack recurses once per nested message, so
 * a small file of deeply nested messages (subgraphs inside subgraphs, sequence types inside
 * sequence types) would overflow the stack before any check on the unpacked result could run.
 * This walks the wire format with protobuf-c's own descriptors, iteratively, and measures how
 * deep the messages protobuf-c would build go. */
#include "onnx/onnx.h"

#include <protobuf-c/protobuf-c.h>

typedef struct {
  const ProtobufCMessageDescriptor *desc;
  const uint8_t *p, *end;
} pb_frame;

/* 1 and the value, 0 if the varint runs past the end or beyond 10 bytes */
static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  *v = 0;
  for (int sh = 0; sh < 70 && *p < end; sh += 7) {
    uint8_t b = *(*p)++;
    if (sh < 64) *v |= (uint64_t)(b & 0x7f) << sh;
    if (!(b & 0x80)) return 1;
  }
  return 0;
}

alma_status alma__pb_check_nesting(const ProtobufCMessageDescriptor *desc, const uint8_t *bytes, size_t n, int max_depth,
                                   const char *what) {
  pb_frame stack[ALMA_ONNX_MAX_NESTING + 1];
  if (max_depth > ALMA_ONNX_MAX_NESTING) max_depth = ALMA_ONNX_MAX_NESTING;
  int top = 0;
  stack[0] = (pb_frame){desc, bytes, bytes + n};
  while (top >= 0) {
    pb_frame *f = &stack[top];
    if (f->p >= f->end) {
      top--;
      continue;
    }
    uint64_t key, v;
    /* Malformed framing: protobuf-c checks every field of a message before it unpacks any
     * submessage, so it refuses this message without going deeper; leave the report to it. */
    if (!pb_varint(&f->p, f->end, &key)) return ALMA_OK;
    switch (key & 7) {
      case 0:
        if (!pb_varint(&f->p, f->end, &v)) return ALMA_OK;
        break;
      case 1:
        if (f->end - f->p < 8) return ALMA_OK;
        f->p += 8;
        break;
      case 5:
        if (f->end - f->p < 4) return ALMA_OK;
        f->p += 4;
        break;
      case 2: {
        if (!pb_varint(&f->p, f->end, &v) || v > (uint64_t)(f->end - f->p)) return ALMA_OK;
        const uint8_t *data = f->p;
        f->p += v;
        uint64_t id = key >> 3;
        const ProtobufCFieldDescriptor *fd =
            id <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(f->desc, (unsigned)id) : NULL;
        if (!fd || fd->type != PROTOBUF_C_TYPE_MESSAGE || !fd->descriptor) break;
        if (top + 1 >= max_depth)
          return alma__errorf(ALMA_ERR_INVALID_MODEL,
                              "%s: messages nested more than %d deep (at %s.%s, byte %zu); alma refuses such files "
                              "before parsing them",
                              what, max_depth, f->desc->short_name, fd->name, (size_t)(data - bytes));
        stack[++top] = (pb_frame){(const ProtobufCMessageDescriptor *)fd->descriptor, data, data + v};
        break;
      }
      default: return ALMA_OK; /* groups: protobuf-c refuses them */
    }
  }
  return ALMA_OK;
}

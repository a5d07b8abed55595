/* fuzz_proto.c: the control messages (proto/gradsync.proto) as a receiver
 * unpacks them: gradsync__envelope__unpack of arbitrary bytes.
 *
 * An unpacked envelope must be whole (every string terminated, every
 * repeated field as long as its count, the oneof's case naming the member
 * that is set: walked through the descriptors, so new fields are covered
 * without changes here), pack back to a message that unpacks and packs to
 * the same bytes, and a size it announces for a payload (count x dtype of
 * push, params, chunk) must not wrap: gs_wire_expect_payload accepts an
 * absent payload only for a count of 0. */
#include <protobuf-c/protobuf-c.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/proto.h"

static volatile size_t sink;
/* protobuf-c 1.4 keeps an unknown field numbered 0 when its tag is spelled
 * in two bytes (0x82 0x00), packs it in one (0x02), and refuses that: a
 * library quirk, harmless here (gradsync never forwards what it received),
 * so such envelopes skip the round trip. */
static bool field_zero;

static void walk(const ProtobufCMessage *msg, int depth);

static void walk_value(const ProtobufCFieldDescriptor *f, const void *p, int depth) {
  switch (f->type) {
  case PROTOBUF_C_TYPE_STRING: {
    const char *s = *(char *const *)p;
    FUZZ_CHECK(s != NULL, "string %s is NULL", f->name);
    sink += strlen(s);
    break;
  }
  case PROTOBUF_C_TYPE_BYTES: {
    const ProtobufCBinaryData *b = p;
    FUZZ_CHECK(b->len == 0 || b->data, "bytes %s: %zu bytes at NULL", f->name, b->len);
    if (b->len) sink += b->data[0] + b->data[b->len - 1];
    break;
  }
  case PROTOBUF_C_TYPE_MESSAGE: {
    const ProtobufCMessage *m = *(ProtobufCMessage *const *)p;
    if (m) walk(m, depth + 1);
    break;
  }
  default: break;
  }
}

static void walk(const ProtobufCMessage *msg, int depth) {
  FUZZ_CHECK(depth < 8, "messages nested %d deep", depth);
  const ProtobufCMessageDescriptor *d = msg->descriptor;
  const uint8_t *base = (const uint8_t *)msg;
  for (unsigned i = 0; i < msg->n_unknown_fields; i++)
    field_zero |= msg->unknown_fields[i].tag == 0;
  for (unsigned i = 0; i < d->n_fields; i++) {
    const ProtobufCFieldDescriptor *f = &d->fields[i];
    const void *member = base + f->offset;
    if (f->label == PROTOBUF_C_LABEL_REPEATED) {
      size_t n = *(const size_t *)(base + f->quantifier_offset);
      const uint8_t *arr = *(void *const *)member;
      FUZZ_CHECK(n == 0 || arr, "repeated %s: %zu items at NULL", f->name, n);
      size_t esz = f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE
                       ? sizeof(void *)
                   : f->type == PROTOBUF_C_TYPE_BYTES ? sizeof(ProtobufCBinaryData)
                   : f->type == PROTOBUF_C_TYPE_UINT64 || f->type == PROTOBUF_C_TYPE_INT64 ||
                           f->type == PROTOBUF_C_TYPE_SINT64 || f->type == PROTOBUF_C_TYPE_FIXED64 ||
                           f->type == PROTOBUF_C_TYPE_SFIXED64 || f->type == PROTOBUF_C_TYPE_DOUBLE
                       ? 8
                   : f->type == PROTOBUF_C_TYPE_BOOL ? sizeof(protobuf_c_boolean)
                                                     : 4;
      for (size_t j = 0; j < n; j++) {
        walk_value(f, arr + j * esz, depth);
        sink += arr[j * esz + esz - 1];
      }
      continue;
    }
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
      uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
      if (which != f->id) continue;
      FUZZ_CHECK(f->type != PROTOBUF_C_TYPE_MESSAGE || *(void *const *)member,
                 "oneof case %u names %s, which is NULL", which, f->name);
    }
    walk_value(f, member, depth);
  }
}

/* The payload a message announces: count elements of dtype. */
static bool announced(const Gradsync__Envelope *env, uint64_t *count, Gradsync__DType *dt) {
  switch (env->body_case) {
  case GRADSYNC__ENVELOPE__BODY_PUSH: *count = env->push->count; *dt = env->push->dtype; return true;
  case GRADSYNC__ENVELOPE__BODY_PARAMS: *count = env->params->count; *dt = env->params->dtype; return true;
  case GRADSYNC__ENVELOPE__BODY_CHUNK: *count = env->chunk->count; *dt = env->chunk->dtype; return true;
  default: return false;
  }
}

/* pack(x) unpacks, and packs again to the same bytes and the same header */
static void round_trip(const Gradsync__Envelope *env) {
  size_t n = gradsync__envelope__get_packed_size(env);
  uint8_t *buf = malloc(n ? n : 1);
  FUZZ_CHECK(buf != NULL, "out of memory%s", "");
  FUZZ_CHECK(gradsync__envelope__pack(env, buf) == n, "pack wrote another size than announced%s",
             "");
  Gradsync__Envelope *again = gradsync__envelope__unpack(NULL, n, buf);
  FUZZ_CHECK(again != NULL, "a packed envelope of %zu bytes does not unpack", n);
  size_t n2 = gradsync__envelope__get_packed_size(again);
  uint8_t *buf2 = malloc(n2 ? n2 : 1);
  FUZZ_CHECK(buf2 != NULL, "out of memory%s", "");
  gradsync__envelope__pack(again, buf2);
  FUZZ_CHECK(n2 == n && !memcmp(buf, buf2, n), "pack(unpack(pack(x))) differs from pack(x)%s", "");
  FUZZ_CHECK(again->body_case == env->body_case && again->job == env->job &&
                 again->rank == env->rank && again->version == env->version,
             "the round trip changed the header%s", "");
  gradsync__envelope__free_unpacked(again, NULL);
  free(buf);
  free(buf2);
}

/* a payload the message announces, checked as its receiver would when
 * none came */
static void check_payload(Gradsync__Envelope *env) {
  uint64_t count;
  Gradsync__DType dt;
  if (!announced(env, &count, &dt)) return;
  gs_wire_msg m = {.env = env};
  gs_err e = {0};
  int rc = gs_wire_expect_payload(&m, count, gs_wire_dtype(dt), &e);
  fuzz_check_err(rc, &e, "gs_wire_expect_payload");
  FUZZ_CHECK((rc == 0) == (count == 0), "a %s announcing %llu elements and no payload: verdict %d",
             gs_wire_kind(env), (unsigned long long)count, rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Gradsync__Envelope *env = gradsync__envelope__unpack(NULL, size, data);
  fuzz_verdict(env ? 0 : GS_EPROTO, &(gs_err){.code = GS_EPROTO, .msg = "does not unpack"},
               "gradsync__envelope__unpack");
  if (!env) return 0;
  FUZZ_CHECK(protobuf_c_message_check(&env->base), "an unpacked envelope fails its own check%s",
             "");
  field_zero = false;
  walk(&env->base, 0);
  FUZZ_CHECK(strlen(gs_wire_kind(env)) > 0, "a kind without a name%s", "");
  check_payload(env);
  if (!field_zero) round_trip(env);
  gradsync__envelope__free_unpacked(env, NULL);
  return 0;
}

/* msgs.c: valid control messages, packed, for the seed writer and for the
 * rendezvous harness's own traffic (fuzz.h). */
#include "fuzz.h"
#include "proto/proto.h"

size_t fuzz_register_msg(uint8_t *out, uint32_t rank, uint32_t world, const char *model) {
  Gradsync__Setting a = GRADSYNC__SETTING__INIT, b = GRADSYNC__SETTING__INIT;
  a.key = "mode";
  a.value = "ps";
  b.key = "model";
  b.value = (char *)model;
  Gradsync__Setting *set[2] = {&a, &b};
  Gradsync__Register rg = GRADSYNC__REGISTER__INIT;
  rg.world = world;
  rg.host = "fuzzhost";
  rg.endpoint = "tcp://127.0.0.1:1";
  rg.n_settings = 2;
  rg.settings = set;
  Gradsync__Envelope env;
  gs_wire_env(&env, 0, rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_REG;
  env.reg = &rg;
  return gradsync__envelope__pack(&env, out);
}

size_t fuzz_error_msg(uint8_t *out, uint64_t job, uint32_t rank, const char *message) {
  Gradsync__Error er = GRADSYNC__ERROR__INIT;
  er.phase = "rendezvous";
  er.message = (char *)message;
  Gradsync__Envelope env;
  gs_wire_env(&env, job, rank);
  env.body_case = GRADSYNC__ENVELOPE__BODY_ERROR;
  env.error = &er;
  return gradsync__envelope__pack(&env, out);
}

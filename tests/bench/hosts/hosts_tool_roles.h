/* hosts_tool_roles.h: what hosts_tool runs inside an emulated host
 * (hosts_tool_roles.c):
 *
 *   --role echo  --fd F --arg ADDR                 REP on ADDR:*, writes
 *       "ADDR:PORT" to F, answers each request with the sender's address;
 *   --role probe --fd F --arg SELF,EP1,EP2,...     three requests to each
 *       endpoint; fails unless every reply names SELF as the sender; writes
 *       the slowest endpoint's fastest round trip (seconds) to F;
 *   --role pull  --fd F --arg ADDR,COUNT,SIZE,TIMEOUT_S   PULL on ADDR:*,
 *       writes "ADDR:PORT", receives COUNT messages of SIZE bytes, writes
 *       "BYTES T_FIRST T_LAST" (monotonic seconds, which every namespace
 *       of the machine shares);
 *   --role push  --fd -1 --arg tcp://ADDR:PORT,COUNT,SIZE,TIMEOUT_S.
 * Every wait is bounded by TIMEOUT_S (echo: 60 s idle). */
#ifndef GS_TESTS_HOSTS_ROLES_H
#define GS_TESTS_HOSTS_ROLES_H

#include <stddef.h>

int role_main(int argc, char **argv);

#endif

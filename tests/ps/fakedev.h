/* fakedev.h: a checking fake GPU for the ps device paths (see fakedev.c). */
#ifndef GS_TEST_PS_FAKEDEV_H
#define GS_TEST_PS_FAKEDEV_H

#include "kernels/kernels.h"
#include "worker/sync.h"

gs_kernels *fakedev_create(gs_err *e);
/* Ops that got a pointer of the wrong kind, over all tables so far. */
int fakedev_violations(void);

#endif

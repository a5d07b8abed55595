/* version.h: the revision mark every bench output names (--version, the
 * console header, report.json's git_revision and git_dirty). Its value is
 * bench/version.c, which the build writes anew at every build. */
#ifndef GS_BENCH_VERSION_H
#define GS_BENCH_VERSION_H

extern const char gs_git_revision[];
#define GS_GIT_REVISION gs_git_revision

#endif

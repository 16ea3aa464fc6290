/* golog.c: the Go loader's way to NCCL's variadic logger (cgo cannot call
 * a variadic function pointer). */
#include "shim/tuner.h"

void gin_log(gin_logger_t fn, int level, unsigned long flags, const char *msg) {
  if (fn == NULL || msg == NULL) return;
  fn(level, flags, "ncclplugin", 0, "%s", msg);
}

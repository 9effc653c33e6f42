/* The host services table of strategy tp: set once by the entry point
 * (tp.c) before the strategy is created, read by every other file. It sits
 * in a file of its own, below them all, so that the files that use it do
 * not depend on the entry point that names their vtable. */
#include "tp_impl.h"

const weft_host *g_host;

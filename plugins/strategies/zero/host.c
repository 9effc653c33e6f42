/* The host services table of the ZeRO strategies plugin: set once by the entry
 * point (entry.c) before any strategy is created, read by every other file.
 * It sits in a file of its own, below them all, so that the files that use
 * it do not depend on the entry point that names their vtables. */
#include "zero.h"

const weft_host *g_host;

/* The library's version string. */
#include "weft/weft.h"

const char *weft_version(void)
{
	return WEFT_VERSION_STRING;
}

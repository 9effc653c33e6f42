/* A library for the checker's self-test: it exports its SDK function
 * (fx_sdk/weft/fx.h) and, by mistake, an internal one that no SDK header
 * declares, which check_sdk_boundary.py must name. */
#include "weft/fx.h"

__attribute__((visibility("default"))) int weft_structure_fx_internal(int x);

__attribute__((visibility("default"))) int weft_structure_fx_internal(int x)
{
	return x + 1;
}

int weft_structure_fx_api(int x)
{
	return weft_structure_fx_internal(x) * 2;
}

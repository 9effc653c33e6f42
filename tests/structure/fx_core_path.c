/* A plugin that reaches into the core by a relative path, with sdk/include
 * as its only include directory: check_sdk_boundary.py must refuse it.
 * Built for the checker's self-test only, never loaded. */
#include "../../core/pipeline/sim.h"
#include "weft/plugin.h"

WEFT_PLUGIN_EXPORT int structure_fx_core_path(void);

WEFT_PLUGIN_EXPORT int structure_fx_core_path(void)
{
	weft_pp_sim_cost cost = { .forward = 1.0, .backward = 2.0 };

	return (int)(cost.forward * cost.backward);
}

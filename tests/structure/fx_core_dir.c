/* A plugin that reaches into the core through an include directory
 * (CMakeLists.txt gives it core/): check_sdk_boundary.py must refuse it.
 * Built for the checker's self-test only, never loaded. */
#include "pipeline/sim.h"
#include "weft/plugin.h"

WEFT_PLUGIN_EXPORT int structure_fx_core_dir(void);

WEFT_PLUGIN_EXPORT int structure_fx_core_dir(void)
{
	weft_pp_sim_cost cost = { .forward = 1.0, .backward = 2.0 };

	return (int)(cost.forward + cost.backward);
}

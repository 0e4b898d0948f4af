/* A descriptor whose declared size ends 4 bytes into its after_layer pointer, as a
 * plugin with a miscounted struct_size declares it. The host keeps whole fields only: it
 * never sees half of after_layer, so the stage is not implemented and never called
 * (copying those 4 bytes would make the host call half a pointer). */
#include "c_plugin_parts.h"

static const ember_plugin_descriptor descriptor = {
    {EMBER_PLUGIN_MAGIC, 1, 0, (uint32_t)(offsetof(ember_plugin_descriptor, after_layer) + 4)},
    "mid-field",
    "1.0.0",
    "a descriptor size ending inside a function pointer",
    c_create,
    c_destroy,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    c_after_layer,
    NULL,
    NULL,
    c_poison_generation,
    c_poison_error,
};

EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) { return &descriptor; }

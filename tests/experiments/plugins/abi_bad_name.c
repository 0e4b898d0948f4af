/* A descriptor whose name breaks the [a-z0-9._-] rule. */
#include "c_plugin_parts.h"

static const ember_plugin_descriptor descriptor = {
    {EMBER_PLUGIN_MAGIC, 1, 0, (uint32_t)sizeof(ember_plugin_descriptor)},
    "Bad Name",
    "1.0.0",
    "",
    c_create,
    c_destroy,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) { return &descriptor; }

/* A descriptor declaring fewer bytes than ABI 1.0 requires (it stops before create). */
#include "c_plugin_parts.h"

static const ember_plugin_descriptor descriptor = {
    {EMBER_PLUGIN_MAGIC, 1, 0, (uint32_t)offsetof(ember_plugin_descriptor, create)},
    "too-small",
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

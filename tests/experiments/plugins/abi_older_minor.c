/* A plugin as an older 1.x header would have built it: its descriptor ends before
 * on_generation_complete. Minor 0 is the first minor of ABI 1, so "older" is shown by the
 * declared size: the fields beyond it hold functions that abort if the host ever calls
 * them, which it must not (it reads only what the plugin declared). */
#include "c_plugin_parts.h"

static const ember_plugin_descriptor descriptor = {
    {EMBER_PLUGIN_MAGIC, 1, 0, (uint32_t)offsetof(ember_plugin_descriptor, on_generation_complete)},
    "older-minor",
    "0.1.0",
    "a descriptor shorter than this host's",
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

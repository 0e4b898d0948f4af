/* Exports the entry symbol but its descriptor does not start with Ember's magic. */
#include <ember/plugin.h>

static const ember_abi_header descriptor = {0xDEADBEEFu, 1, 0, 16};

EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) {
    return (const ember_plugin_descriptor*)(const void*)&descriptor;
}

/* A plugin of a future major ABI: only its ABI block can be trusted. The rest is laid out
 * differently (here: garbage where a 1.x host expects strings), so the host must refuse
 * it from the block alone. */
#include <ember/plugin.h>

typedef struct major2_descriptor {
    ember_abi_header abi;
    uint64_t something_else[8];
} major2_descriptor;

static const major2_descriptor descriptor = {
    {EMBER_PLUGIN_MAGIC, 2, 0, (uint32_t)sizeof(major2_descriptor)},
    {1, 2, 3, 4, 5, 6, 7, 8},
};

EMBER_PLUGIN_EXPORT const ember_plugin_descriptor* ember_plugin_entry(void) {
    return (const ember_plugin_descriptor*)(const void*)&descriptor;
}

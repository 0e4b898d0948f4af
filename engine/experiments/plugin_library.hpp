// One experiment plugin loaded into the process: the shared object (Boost.DLL, absolute
// path, RTLD_NOW | RTLD_LOCAL) and a validated copy of its descriptor.
//
// Checks, in this order, each failure an ember::Error naming the plugin's path:
//   the file exists; it loads (the dlerror text); it exports ember_plugin_entry; the
//   entry returns a descriptor; the magic is Ember's; the ABI major is ours (reported
//   first and alone: nothing else of a foreign major is read); the declared size holds
//   at least ABI 1.0's required fields; the name is [a-z0-9._-]{1,63}; create and
//   destroy are set.
// Any minor of our major loads: the descriptor is copied up to the size the plugin
// declared, so fields an older plugin does not have read as null, and fields a newer one
// added are ignored.
//
// The library handle lives as long as the PluginLibrary, which every instance created
// from it holds through a shared_ptr: no pointer taken from the .so outlives it.
#pragma once

#include <boost/dll/shared_library.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ember/plugin.h"
#include "hooks/hooks.hpp"

namespace ember::experiments {

// Every call the host makes into a plugin: the stages of ember/stages.h.
using StageId = hooks::Stage;
using hooks::kStageCount;

std::string_view stage_id_name(StageId stage);  // "create", "on_model_loaded", "before_layer", ...

class PluginLibrary {
public:
    // Loads and validates the plugin at `path` (made absolute against the current
    // directory). Throws ember::Error naming the path on any of the checks above.
    static std::shared_ptr<const PluginLibrary> load(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return path_; }
    const std::string& name() const { return name_; }
    const std::string& version() const { return version_; }
    const std::string& description() const { return description_; }
    std::uint32_t abi_major() const { return abi_major_; }
    std::uint32_t abi_minor() const { return abi_minor_; }
    std::uint32_t declared_size() const { return declared_size_; }

    // The descriptor as the host sees it: the plugin's bytes up to its declared size,
    // zero beyond. Function pointers in it are valid while this object lives.
    const ember_plugin_descriptor& descriptor() const { return descriptor_; }

    // Whether instances may run at the same time in one process (1.1's
    // EMBER_PLUGIN_FLAG_CONCURRENT; a 1.0 plugin never declares it).
    bool concurrent() const { return (descriptor_.flags & EMBER_PLUGIN_FLAG_CONCURRENT) != 0; }

    // The stages (not create/destroy) whose function pointer is set, in firing order.
    std::vector<StageId> implemented_stages() const;
    bool implements(StageId stage) const;
    // The function pointer of a stage (null when not implemented), as `Fn`.
    template <class Fn>
    Fn function(StageId stage) const {
        Fn fn = nullptr;
        std::memcpy(&fn, reinterpret_cast<const std::byte*>(&descriptor_) + hooks::stage_info(stage).descriptor_offset,
                    sizeof fn);
        return fn;
    }

    PluginLibrary(const PluginLibrary&) = delete;
    PluginLibrary& operator=(const PluginLibrary&) = delete;

private:
    PluginLibrary() = default;

    boost::dll::shared_library library_;
    std::filesystem::path path_;
    ember_plugin_descriptor descriptor_{};
    std::string name_;
    std::string version_;
    std::string description_;
    std::uint32_t abi_major_ = 0;
    std::uint32_t abi_minor_ = 0;
    std::uint32_t declared_size_ = 0;
};

// A plugin name as the descriptor rules allow it: 1..63 bytes of [a-z0-9._-].
bool is_valid_plugin_name(std::string_view name);

}  // namespace ember::experiments

#include "extract/capture_entry.hpp"

#include <fmt/format.h>

#include <boost/json/value_from.hpp>

#include "record/manifest.hpp"

namespace ember::extract {
namespace {

namespace json = boost::json;

// What the columns of a stage's rows are (ember/stages.h).
std::string column_meaning(hooks::Stage stage) { return hooks::stage_info(stage).meaning; }

}  // namespace

std::string capture_file_name(const Capture& c) {
    std::string name(hooks::stage_name(c.stage));
    if (c.layer) name += fmt::format(".layer{}", *c.layer);
    return name + ".npy";
}

json::object tensor_entry(const Capture& c, const record::FileRecord& file) {
    json::object entry{
        {"file", file.name},
        {"stage", hooks::stage_name(c.stage)},
        {"layer", c.layer ? json::value(*c.layer) : json::value(nullptr)},
        {"phase", "prefill"},
        {"positions", json::value_from(c.positions)},
        {"shape", json::value_from(c.shape())},
        {"dtype", "float32"},
        {"rows", c.stage == hooks::Stage::AttentionPattern
                     ? "prompt positions, in the order of 'positions': [i, h] is head h of positions[i]"
                     : "prompt positions, in the order of 'positions'"},
        {"columns", c.stage == hooks::Stage::AttentionPattern
                        ? "prompt positions 0 .. n_tokens - 1: the post-softmax weight of each (0 where masked)"
                        : column_meaning(c.stage)},
        {"values_sha256", record::values_sha256(c.values)},
    };
    if (c.stage == hooks::Stage::AttentionPattern) entry["layout"] = "[positions, n_head, n_kv]";
    return entry;
}

}  // namespace ember::extract

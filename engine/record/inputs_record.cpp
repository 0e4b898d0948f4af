#include "record/inputs_record.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <boost/json/parse.hpp>

#include <fstream>
#include <iterator>
#include <map>

#include "common/digest_cache.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "record/run_directory.hpp"
#include "record/verify.hpp"

namespace ember::record {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

fs::path absolute_normal(const fs::path& p) { return fs::absolute(p).lexically_normal(); }

// A string of an experiment's config that names an input: a file, or a directory with a
// manifest (recorded as that manifest).
void scan_config(const json::value& v, const std::string& key, const fs::path& base, std::vector<InputFile>& out) {
    if (v.is_object()) {
        for (const auto& [k, member] : v.as_object()) scan_config(member, key + "." + std::string(k), base, out);
    } else if (v.is_array()) {
        for (std::size_t i = 0; i < v.as_array().size(); ++i)
            scan_config(v.as_array()[i], fmt::format("{}[{}]", key, i), base, out);
    } else if (v.is_string() && !v.as_string().empty()) {
        const fs::path named(std::string(v.as_string()));
        const fs::path path = absolute_normal(named.is_absolute() ? named : base / named);
        std::error_code ec;
        const bool is_dir = fs::is_directory(path, ec);
        const fs::path file = is_dir ? path / kManifestName : path;
        if (!fs::is_regular_file(file, ec)) return;
        InputFile input = input_file(is_dir || file.filename() == kManifestName ? "experiment_source" : "experiment_file", file);
        input.key = key;
        if (input.role == "experiment_source") {
            std::ifstream in(file, std::ios::binary);
            const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
            json::error_code jec;
            const json::value m = json::parse(text, jec);
            if (!jec && m.is_object()) {
                const json::object& o = m.as_object();
                if (const auto* id = o.if_contains("run_id"); id && id->is_string()) input.run_id = std::string(id->as_string());
                if (const auto* seal = o.if_contains("manifest_sha256"); seal && seal->is_string())
                    input.manifest_seal = std::string(seal->as_string());
            }
        }
        out.push_back(std::move(input));
    }
}

std::string describe(const json::object& o) {
    const auto text = [&](const char* k) {
        const json::value* v = o.if_contains(k);
        return v && v->is_string() ? std::string(v->as_string()) : std::string();
    };
    return fmt::format("{} {}{}", text("role"), text("path"), text("key").empty() ? "" : " (" + text("key") + ")");
}

}  // namespace

InputFile input_file(const std::string& role, const fs::path& path) {
    InputFile f;
    f.role = role;
    f.path = absolute_normal(path);
    // Refused as read_input_file refuses it (the same words, whichever comes first): an
    // input is a regular file, never /dev/zero, a FIFO or a directory.
    std::string what = role;
    std::replace(what.begin(), what.end(), '_', ' ');
    std::error_code ec;
    const fs::file_status status = fs::status(f.path, ec);
    if (!ec && fs::is_directory(status)) throw Error(fmt::format("{}: is a directory, not a {}", f.path.string(), what));
    if (!ec && !fs::is_regular_file(status))
        throw Error(fmt::format("{}: not a regular file (a {} must be one)", f.path.string(), what));
    f.bytes = fs::file_size(f.path, ec);
    if (ec) throw Error(fmt::format("{}: cannot read the {} ({})", f.path.string(), role, ec.message()));
    FileDigest digest = cached_file_digest(f.path);
    f.sha256 = std::move(digest.sha256);
    f.state = digest.state;
    return f;
}

std::vector<InputFile> collect_inputs(const config::RunConfig& config, const std::optional<std::string>& model_sha256,
                                      const std::optional<FileState>& model_state) {
    std::vector<InputFile> out;
    if (model_sha256) {
        InputFile model;
        model.role = "model";
        model.path = absolute_normal(config.model.path);
        std::error_code ec;
        model.bytes = fs::file_size(model.path, ec);
        model.sha256 = *model_sha256;
        model.state = model_state ? *model_state : file_state(model.path);
        out.push_back(std::move(model));
    } else {
        out.push_back(input_file("model", config.model.path));
    }
    if (config.prompt.file) out.push_back(input_file("prompt_file", *config.prompt.file));
    if (config.dataset.path) out.push_back(input_file("dataset", *config.dataset.path));
    if (config.defaults_file) out.push_back(input_file("defaults_file", *config.defaults_file));
    for (std::size_t i = 0; i < config.experiments.size(); ++i) {
        const config::ExperimentEntry& e = config.experiments[i];
        InputFile plugin = input_file("plugin", e.plugin);
        plugin.key = fmt::format("experiments[{}].plugin", i);
        out.push_back(std::move(plugin));
        json::error_code ec;
        const json::value settings = json::parse(e.config_json, ec);
        if (!ec) scan_config(settings, fmt::format("experiments[{}].config", i), e.base_dir, out);
    }
    return out;
}

void check_inputs_unchanged(const std::vector<InputFile>& inputs, const MappedFile* model_mapping) {
    if (model_mapping != nullptr && model_mapping->truncated()) {
        throw Error(fmt::format("{}: the model file was truncated while the run read it (byte {} was gone); nothing "
                                "is recorded",
                                model_mapping->path().string(), model_mapping->truncated_at()));
    }
    for (const InputFile& f : inputs) {
        FileState now;
        try {
            now = file_state(f.path);
        } catch (const Error&) {
            throw Error(fmt::format("{}: the {} was removed during the run; nothing is recorded", f.path.string(), f.role));
        }
        if (now == f.state) continue;
        const std::string digest = cached_sha256_file_hex(f.path);
        if (digest != f.sha256) {
            throw Error(fmt::format("{}: the {} changed during the run (sha256 {}, the run read {}); nothing is recorded",
                                    f.path.string(), f.role, digest, f.sha256));
        }
    }
}

std::vector<fs::path> input_paths(const config::RunConfig& config) {
    std::vector<fs::path> out{config.model.path};
    if (!config.source.empty()) out.push_back(config.source);
    if (config.prompt.file) out.push_back(*config.prompt.file);
    if (config.dataset.path) out.push_back(*config.dataset.path);
    if (config.defaults_file) out.push_back(*config.defaults_file);
    for (const config::ExperimentEntry& e : config.experiments) out.push_back(e.plugin);
    return out;
}

void check_run_outputs(const config::RunConfig& config, bool overwrite) {
    check_output_directory("[output] dir", config.output.dir);
    if (config.tracing.enabled) check_output_file("[tracing] path", config.tracing.path);
    if (!overwrite && !config.output.overwrite) return;
    for (const fs::path& input : input_paths(config))
        if (is_within(input, config.output.dir))
            throw Error(fmt::format("[output] dir {} holds {}, an input of this run; overwrite never replaces a "
                                    "directory with the run's inputs in it (choose another output.dir)",
                                    config.output.dir.string(), input.string()));
}

json::array inputs_json(const std::vector<InputFile>& inputs) {
    json::array out;
    for (const InputFile& f : inputs) {
        json::object o{{"role", f.role}, {"path", f.path.string()}, {"bytes", f.bytes}, {"sha256", f.sha256}};
        if (!f.key.empty()) o["key"] = f.key;
        if (f.role == "experiment_source") {
            o["run_id"] = f.run_id ? json::value(*f.run_id) : json::value(nullptr);
            o["manifest_sha256"] = f.manifest_seal ? json::value(*f.manifest_seal) : json::value(nullptr);
        }
        out.push_back(std::move(o));
    }
    return out;
}

void add_read_inputs(json::array& inputs, const experiments::RunnerSnapshot& snapshot) {
    std::vector<InputFile> files;
    for (std::size_t i = 0; i < snapshot.records.size(); ++i) {
        for (const experiments::ReadInput& read : snapshot.records[i].read_inputs) {
            InputFile f;
            f.role = std::string(kExperimentReadRole);
            f.path = read.path;
            f.sha256 = read.sha256;
            f.bytes = read.bytes;
            f.key = fmt::format("experiments[{}]", i);
            files.push_back(std::move(f));
        }
    }
    for (json::value& v : inputs_json(files)) inputs.push_back(std::move(v));
}

std::string inputs_difference(const json::array& recorded, const std::vector<InputFile>& current) {
    // (role, path, key) -> sha256
    std::map<std::string, std::pair<std::string, std::string>> before;  // id -> (sha256, description)
    for (const json::value& v : recorded) {
        if (!v.is_object()) return "the recorded inputs are malformed";
        const json::object& o = v.as_object();
        const json::value* sha = o.if_contains("sha256");
        const std::string recorded_sha = sha && sha->is_string() ? std::string(sha->as_string()) : "";
        if (const json::value* role = o.if_contains("role"); role && role->is_string() && role->get_string() == kExperimentReadRole) {
            // A file an experiment read through the host: no config names it, so it is
            // compared with what is at its path now.
            const json::value* path = o.if_contains("path");
            if (!path || !path->is_string()) return "the recorded inputs are malformed";
            std::string now;
            try {
                now = cached_sha256_file_hex(std::string(path->as_string()));
            } catch (const Error&) {
                return fmt::format("{} was an input of the recorded run and is gone", describe(o));
            }
            if (now != recorded_sha)
                return fmt::format("{} changed (sha256 {}, the recorded run read {})", describe(o), now, recorded_sha);
            continue;
        }
        before[describe(o)] = {recorded_sha, describe(o)};
    }
    for (const InputFile& f : current) {
        const std::string id = describe(json::object{{"role", f.role}, {"path", f.path.string()}, {"key", f.key}});
        const auto it = before.find(id);
        if (it == before.end()) return fmt::format("{} was not an input of the recorded run", id);
        if (it->second.first != f.sha256)
            return fmt::format("{} changed (sha256 {}, the recorded run read {})", id, f.sha256, it->second.first);
        before.erase(it);
    }
    if (!before.empty()) return fmt::format("{} was an input of the recorded run and is no longer", before.begin()->first);
    return "";
}

std::optional<std::string> current_result(const config::RunConfig& config, const std::string& config_hash) {
    std::error_code ec;
    if (!fs::exists(config.output.dir / kManifestName, ec)) return std::nullopt;
    const VerifyReport report = verify_run_directory(config.output.dir);
    if (!report.ok() || report.config_hash != config_hash) return std::nullopt;
    try {
        if (!inputs_difference(report.inputs, collect_inputs(config)).empty()) return std::nullopt;
    } catch (const std::exception&) {
        return std::nullopt;  // an input cannot be read: the run will say so
    }
    return fmt::format("run {} in the output directory verifies and has this config hash and these inputs (--force "
                       "reruns it)",
                       report.run_id);
}

}  // namespace ember::record

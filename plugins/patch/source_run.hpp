// patch's source named by run name (`source_run = "clean"`) instead of by path.
//
// A run is a directory holding the run.json `ember run` (or a sweep's run) writes; its
// name is the directory's name, the name patch.json records as the source's run_name.
// The runs searched are those in the runs root: `source_runs = "DIR"` (relative to the
// TOML file), else the directory holding this run's output directory, so the sibling runs
// of a sweep (`<output.dir>/<name>`) and the runs of one `runs/` directory find each other.
//
// The name is looked up as:
//   1. the run whose directory name is exactly NAME;
//   2. else the run whose name, with every hash suffix a sweep adds to a label's slug
//      (`~` and 8 hex digits: `text=ذهب_الولد_إلى~f346fd21`) left out, is NAME; two or
//      more such runs are ambiguous, refused naming them.
// No run of that name is refused naming the runs root and the runs it holds; a name that
// is this run itself too. In the run, the capture is the one directory below it (at most
// three levels down) whose manifest.json is an `ember.capture` of that run's run_id;
// several are refused naming them (`source_capture = "SUBDIR"` picks one, relative to the
// run's directory), none too.
#pragma once

#include <ember/experiment.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember_plugins {

struct NamedSourceRun {
    std::filesystem::path runs_root;  // where the name was looked up
    std::filesystem::path run_dir;    // the run's directory
    std::filesystem::path capture;    // its capture directory
};

namespace source_run_detail {

namespace fs = std::filesystem;

inline std::optional<std::string> read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The run_id of a run.json, or nullopt when the file is missing or not a run's record.
inline std::optional<std::string> run_id_of(const fs::path& run_dir) {
    const auto text = read_text(run_dir / "run.json");
    if (!text) return std::nullopt;
    try {
        const ember::JsonValue report = ember::JsonValue::parse(*text);
        const ember::JsonValue* id = report.is_object() ? report.find("run_id") : nullptr;
        if (id && id->is_string()) return std::string(id->as_string());
    } catch (const std::exception&) {
    }
    return std::nullopt;
}

// A name without the sweep's hash suffixes: every "~" followed by 8 hex digits that ends
// a label (at a ',' or the end).
inline std::string without_hashes(const std::string& name) {
    std::string out;
    for (std::size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '~' && i + 9 <= name.size() && (i + 9 == name.size() || name[i + 9] == ',') &&
            std::all_of(name.begin() + static_cast<std::ptrdiff_t>(i) + 1, name.begin() + static_cast<std::ptrdiff_t>(i) + 9,
                        [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); })) {
            i += 8;
            continue;
        }
        out += name[i];
    }
    return out;
}

inline std::string quoted_list(const std::vector<std::string>& names, std::size_t max = 12) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < max; ++i) out += (i ? ", '" : "'") + names[i] + "'";
    if (names.size() > max) out += ", ... (" + std::to_string(names.size()) + " in all)";
    return out.empty() ? "none" : out;
}

// The captures of the run `run_id` below `run_dir`, relative paths in name order.
inline std::vector<std::string> captures_of(const fs::path& run_dir, const std::string& run_id) {
    std::vector<std::string> found;
    std::error_code ec;
    fs::recursive_directory_iterator it(run_dir, fs::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        if (it.depth() >= 3) it.disable_recursion_pending();
        if (!it->is_directory(ec)) continue;
        const auto text = read_text(it->path() / "manifest.json");
        if (!text) continue;
        try {
            const ember::JsonValue m = ember::JsonValue::parse(*text);
            const ember::JsonValue* kind = m.is_object() ? m.find("kind") : nullptr;
            const ember::JsonValue* id = m.is_object() ? m.find("run_id") : nullptr;
            if (kind && kind->is_string() && kind->as_string() == "ember.capture" && id && id->is_string() &&
                id->as_string() == run_id)
                found.push_back(fs::relative(it->path(), run_dir).string());
        } catch (const std::exception&) {
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace source_run_detail

// Resolves `name` as the header says. `runs_root` empty: the directory holding
// `this_output_dir`. Throws ember::ConfigError naming what is wrong.
inline NamedSourceRun resolve_source_run(const std::string& name, std::filesystem::path runs_root,
                                         const std::filesystem::path& this_output_dir, const std::string& capture) {
    namespace fs = std::filesystem;
    using namespace source_run_detail;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
        throw ember::ConfigError("config key 'source_run' = '" + name + "' is not a run name (a directory name, no '/')");
    if (runs_root.empty()) {
        if (this_output_dir.empty())
            throw ember::ConfigError("config key 'source_run' = '" + name + "': this run has no output directory to look "
                                     "beside; give source_runs = \"DIR\" (the directory holding the runs)");
        runs_root = fs::absolute(this_output_dir).lexically_normal().parent_path();
    }
    runs_root = fs::absolute(runs_root).lexically_normal();
    std::error_code ec;
    if (!fs::is_directory(runs_root, ec))
        throw ember::ConfigError("config key 'source_run' = '" + name + "': the runs root " + runs_root.string() +
                                 " is not a directory");
    std::vector<std::string> runs, matches;
    for (const auto& entry : fs::directory_iterator(runs_root, ec)) {
        if (!entry.is_directory(ec) || !run_id_of(entry.path())) continue;
        const std::string run = entry.path().filename().string();
        runs.push_back(run);
        if (run != name && without_hashes(run) == name) matches.push_back(run);
    }
    std::sort(runs.begin(), runs.end());
    std::sort(matches.begin(), matches.end());
    NamedSourceRun out;
    out.runs_root = runs_root;
    if (std::find(runs.begin(), runs.end(), name) != runs.end()) {
        out.run_dir = runs_root / name;
    } else if (matches.size() == 1) {
        out.run_dir = runs_root / matches.front();
    } else if (matches.empty()) {
        throw ember::ConfigError("config key 'source_run' = '" + name + "': no run of that name in " + runs_root.string() +
                                 " (a run is a directory holding run.json; the runs there: " + quoted_list(runs) + ")");
    } else {
        throw ember::ConfigError("config key 'source_run' = '" + name + "' is ambiguous in " + runs_root.string() +
                                 ": it names " + quoted_list(matches) + " (give the whole name)");
    }
    if (!this_output_dir.empty() && fs::absolute(this_output_dir).lexically_normal() == out.run_dir)
        throw ember::ConfigError("config key 'source_run' = '" + name + "' is this run itself (" + out.run_dir.string() +
                                 "): name the run that captured the source");
    const std::string run_id = *run_id_of(out.run_dir);
    const std::string where = "run '" + out.run_dir.filename().string() + "' (" + out.run_dir.string() + ")";
    if (!capture.empty()) {
        const fs::path chosen = (out.run_dir / capture).lexically_normal();
        const std::string rel = fs::relative(chosen, out.run_dir).string();
        if (rel.empty() || rel.starts_with(".."))
            throw ember::ConfigError("config key 'source_capture' = '" + capture + "' is not inside " + where);
        out.capture = chosen;
        return out;
    }
    const std::vector<std::string> captures = captures_of(out.run_dir, run_id);
    if (captures.empty())
        throw ember::ConfigError(where + " holds no capture of its run (id " + run_id +
                                 "): run it with a capture experiment, or give source = \"DIR\"");
    if (captures.size() > 1)
        throw ember::ConfigError(where + " holds " + std::to_string(captures.size()) + " captures (" +
                                 quoted_list(captures) + "): choose one with source_capture = \"SUBDIR\"");
    out.capture = out.run_dir / captures.front();
    return out;
}

}  // namespace ember_plugins

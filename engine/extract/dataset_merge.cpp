#include "extract/dataset_merge.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include "common/error.hpp"
#include "common/output_path.hpp"
#include "common/sha256_file.hpp"
#include "config/run_config.hpp"
#include "config/toml_reader.hpp"
#include "extract/shard_files.hpp"
#include "record/run_directory.hpp"
#include "record/strict_parse.hpp"
#include "record/verify.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

// `o` without `key`, the other members in their order (json::object::erase may reorder).
json::object without(const json::object& o, std::string_view key) {
    json::object out;
    for (const auto& kv : o)
        if (kv.key() != key) out[kv.key()] = kv.value();
    return out;
}

std::string read_shard_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot read", path.string()));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A shard directory, its manifest read after it verified.
struct ShardDir {
    fs::path dir;
    json::object manifest;
    config::Shard shard;
    std::size_t begin = 0, end = 0;  // its samples
    std::size_t dataset_samples = 0;
    std::size_t first_row = 0;
    std::size_t samples = 0, rows = 0, tokens = 0, evaluated_tokens = 0, skipped = 0;  // its own
};

std::size_t count_member(const json::object& o, std::string_view key, const ShardDir& s, std::string_view where) {
    const json::value* v = o.if_contains(key);
    if (v && v->is_int64() && v->as_int64() >= 0) return static_cast<std::size_t>(v->as_int64());
    if (v && v->is_uint64()) return static_cast<std::size_t>(v->as_uint64());
    throw Error(fmt::format("ember merge: {}: manifest.json's {}.{} is not a count", s.dir.string(), where, key));
}

const json::object& object_member(const json::object& o, std::string_view key, const ShardDir& s) {
    const json::value* v = o.if_contains(key);
    if (!v || !v->is_object())
        throw Error(fmt::format("ember merge: {}: manifest.json has no {} object", s.dir.string(), key));
    return v->as_object();
}

ShardDir read_shard(const fs::path& dir) {
    ShardDir s;
    s.dir = dir;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(fmt::format("ember merge: {}: no such directory", dir.string()));
    if (!fs::exists(dir / record::kManifestName, ec))
        throw Error(fmt::format("ember merge: {}: no manifest.json: the shard is unfinished (run it again: it resumes) "
                                "or this is not a run directory",
                                dir.string()));
    const record::VerifyReport report = record::verify_run_directory(dir);
    if (!report.ok()) {
        const record::VerifyProblem& p = report.problems.front();
        throw Error(fmt::format("ember merge: {}: the shard does not verify: {}: {} (ember verify {} lists every problem)",
                                dir.string(), p.file, p.message, dir.string()));
    }
    const std::string text = read_shard_file(dir / record::kManifestName);
    s.manifest = parse_strict_json(text, (dir / record::kManifestName).string()).as_object();  // it verified: a sealed JSON object
    const json::value* kind = s.manifest.if_contains("kind");
    if (!kind || *kind != "ember.dataset_extraction")
        throw Error(fmt::format("ember merge: {}: not a dataset run (manifest kind {}): ember merge joins the shards of "
                                "`ember extract --dataset ... --shard K/N`",
                                dir.string(), kind ? json::serialize(*kind) : "none"));
    if (!s.manifest.if_contains("shard") || !s.manifest.at("shard").is_object())
        throw Error(fmt::format("ember merge: {}: not a shard: its manifest has no \"shard\" record (an unsharded dataset "
                                "run is already whole)",
                                dir.string()));
    const json::object& shard = s.manifest.at("shard").as_object();
    s.shard.index = count_member(shard, "index", s, "shard");
    s.shard.count = count_member(shard, "count", s, "shard");
    s.dataset_samples = count_member(shard, "dataset_samples", s, "shard");
    s.first_row = count_member(shard, "first_row", s, "shard");
    const json::value* range = shard.if_contains("samples");
    if (!range || !range->is_array() || range->as_array().size() != 2 || !range->as_array()[0].is_int64() ||
        !range->as_array()[1].is_int64())
        throw Error(fmt::format("ember merge: {}: manifest.json's shard.samples is not [first, end]", dir.string()));
    s.begin = static_cast<std::size_t>(range->as_array()[0].as_int64());
    s.end = static_cast<std::size_t>(range->as_array()[1].as_int64());
    if (s.shard.count == 0 || s.shard.index >= s.shard.count)
        throw Error(fmt::format("ember merge: {}: shard {} of {} is no shard", dir.string(), s.shard.index, s.shard.count));
    const json::object& dataset = object_member(s.manifest, "dataset", s);
    s.samples = count_member(dataset, "samples", s, "dataset");
    s.rows = count_member(dataset, "rows", s, "dataset");
    s.tokens = count_member(dataset, "tokens", s, "dataset");
    s.evaluated_tokens = count_member(dataset, "evaluated_tokens", s, "dataset");
    s.skipped = count_member(dataset, "skipped", s, "dataset");
    object_member(s.manifest, "files", s);
    // The merged manifest is written from these values: they must write back to these bytes.
    if (record::seal_manifest(s.manifest) != text)
        throw Error(fmt::format("ember merge: {}: manifest.json does not write back to its own bytes (it was not written "
                                "by ember extract), so a merged manifest could not be exact",
                                dir.string()));
    return s;
}

// The objects of a dataset manifest that describe one array each ("shape" first dimension: rows).
std::vector<json::object*> array_entries(json::object& m) {
    std::vector<json::object*> out;
    const auto add = [&](json::value* v) {
        if (v && v->is_object()) out.push_back(&v->as_object());
    };
    if (json::value* t = m.if_contains("tensors"); t && t->is_array())
        for (json::value& e : t->as_array()) add(&e);
    add(m.if_contains("logits"));
    if (json::value* lens = m.if_contains("logit_lens"); lens && lens->is_object())
        if (json::value* layers = lens->as_object().if_contains("layers"); layers && layers->is_array())
            for (json::value& e : layers->as_array()) add(&e);
    add(m.if_contains("targets"));
    if (json::value* saes = m.if_contains("sae_features"); saes && saes->is_array())
        for (json::value& e : saes->as_array()) add(&e);
    return out;
}

void set_rows(json::object& entry, std::size_t rows, std::size_t nnz = 0) {
    json::value* shape = entry.if_contains("shape");
    if (shape && shape->is_array() && !shape->as_array().empty()) shape->as_array()[0] = rows;
    if (entry.contains("nnz")) entry["nnz"] = nnz;  // sparse SAE features
}

// A sparse SAE features entry's file `part` ("indptr", "indices", "values"), or nullptr.
const json::value* sparse_file(const json::object& entry, std::string_view part) {
    const json::value* files = entry.if_contains("files");
    if (!files || !files->is_object()) return nullptr;
    const json::value* file = files->as_object().if_contains(part);
    return file && file->is_string() ? file : nullptr;
}

// What must be equal in every shard of one run: the manifest without its seal, its file
// list, the threads, the config hash (the config is compared without what is each
// shard's own), the counts and row numbers that are each shard's own.
json::object run_identity(const json::object& manifest) {
    json::object out;
    for (const auto& kv : manifest) {
        const std::string_view key = kv.key();
        if (key == "files" || key == "manifest_sha256" || key == "threads" || key == "config_hash") continue;
        json::value v = kv.value();
        if (key == "config" && v.is_object()) v = unsharded_identity(v.as_object());
        if (key == "dataset" && v.is_object())
            for (const char* own : {"samples", "skipped", "rows", "tokens", "evaluated_tokens"}) v.as_object().erase(own);
        if (key == "shard" && v.is_object()) {
            const json::object record = v.as_object();
            json::object same;
            for (const char* k : {"count", "dataset_samples", "dataset_batches", "run_hash"})
                if (const json::value* m = record.if_contains(k)) same[k] = *m;
            v = std::move(same);
        }
        out[key] = std::move(v);
    }
    for (json::object* e : array_entries(out)) set_rows(*e, 0);
    return out;
}

struct Difference {
    std::string path;
    const json::value* a = nullptr;  // nullptr: absent
    const json::value* b = nullptr;
};

std::string member_path(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// The first place (in `a`'s member order) where `a` and `b` differ.
std::optional<Difference> first_difference(const json::value& a, const json::value& b, const std::string& path) {
    if (a.is_object() && b.is_object()) {
        for (const auto& kv : a.get_object()) {
            const json::value* other = b.get_object().if_contains(kv.key());
            if (!other) return Difference{member_path(path, kv.key()), &kv.value(), nullptr};
            if (auto d = first_difference(kv.value(), *other, member_path(path, kv.key()))) return d;
        }
        for (const auto& kv : b.get_object())
            if (!a.get_object().contains(kv.key())) return Difference{member_path(path, kv.key()), nullptr, &kv.value()};
        return std::nullopt;
    }
    if (a.is_array() && b.is_array() && a.get_array().size() == b.get_array().size()) {
        for (std::size_t i = 0; i < a.get_array().size(); ++i)
            if (auto d = first_difference(a.get_array()[i], b.get_array()[i], fmt::format("{}[{}]", path, i))) return d;
        return std::nullopt;
    }
    if (a == b) return std::nullopt;
    return Difference{path, &a, &b};
}

std::string describe(const json::value* v) {
    if (!v) return "absent";
    std::string text = json::serialize(*v);
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    return text;
}

// Every shard read its SAEs from files with the same digests: the first that differs named
// (the generic comparison would find it too, less plainly).
void check_same_saes(const std::vector<ShardDir>& shards) {
    const auto list = [](const ShardDir& s) {
        std::vector<std::pair<std::string, std::string>> out;  // (name, sha256) of each SAE
        const json::value* saes = s.manifest.if_contains("sae_features");
        if (saes && saes->is_array())
            for (const json::value& e : saes->as_array()) {
                const json::value* sae = e.is_object() ? e.as_object().if_contains("sae") : nullptr;
                if (!sae || !sae->is_object()) continue;
                out.emplace_back(describe(sae->as_object().if_contains("name")), describe(sae->as_object().if_contains("sha256")));
            }
        return out;
    };
    const auto first = list(shards.front());
    for (std::size_t k = 1; k < shards.size(); ++k) {
        const auto other = list(shards[k]);
        for (std::size_t i = 0; i < std::max(first.size(), other.size()); ++i) {
            if (i < first.size() && i < other.size() && first[i] == other[i]) continue;
            const auto text = [&](const auto& l) {
                return i < l.size() ? fmt::format("SAE {} (sha256 {})", l[i].first, l[i].second) : std::string("no SAE");
            };
            throw Error(fmt::format("ember merge: {} and {} are shards of different runs: sae_features[{}] is {} in {} and "
                                    "{} in {}",
                                    shards.front().dir.string(), shards[k].dir.string(), i, text(first),
                                    shards.front().dir.string(), text(other), shards[k].dir.string()));
        }
    }
}

// Every shard holds the same files, each one ember merge joins.
std::vector<std::string> joined_files(const std::vector<const ShardDir*>& shards) {
    const json::object& files = shards.front()->manifest.at("files").as_object();
    std::vector<std::string> names;
    for (const auto& kv : files) {
        const std::string name(kv.key());
        if (!name.ends_with(".npy") && !name.ends_with(".jsonl"))
            throw Error(fmt::format("ember merge: {}: {} is not a file ember merge joins (only a dataset run's .npy "
                                    "arrays and .jsonl records; an experiment's output?)",
                                    shards.front()->dir.string(), name));
        names.push_back(name);
    }
    for (const ShardDir* s : shards) {
        const json::object& own = s->manifest.at("files").as_object();
        for (const std::string& name : names)
            if (!own.contains(name))
                throw Error(fmt::format("ember merge: {} has no {}, which {} has", s->dir.string(), name,
                                        shards.front()->dir.string()));
        for (const auto& kv : own)
            if (!files.contains(kv.key()))
                throw Error(fmt::format("ember merge: {} has {}, which {} has not", s->dir.string(),
                                        std::string(kv.key()), shards.front()->dir.string()));
    }
    return names;
}

}  // namespace

json::object unsharded_identity(const json::object& config_json) {
    json::object c = config_json;
    const auto strip = [&](const char* section, const char* key) {
        if (json::value* s = c.if_contains(section); s && s->is_object()) s->as_object().erase(key);
    };
    strip("model", "threads");
    strip("output", "dir");
    strip("output", "overwrite");
    strip("tracing", "path");
    strip("dataset", "shard");
    return c;
}

json::object shard_record(config::Shard shard, std::size_t dataset_samples, std::pair<std::size_t, std::size_t> samples,
                          std::size_t dataset_batches, std::pair<std::size_t, std::size_t> batches, std::size_t first_row,
                          const json::object& config_json, const std::string& dataset_sha256,
                          const std::string& model_sha256) {
    const std::string key = config::canonical_json(json::value(unsharded_identity(config_json))) + "\n" +
                            dataset_sha256 + "\n" + model_sha256;
    return {{"index", shard.index},
            {"count", shard.count},
            {"samples", json::array{samples.first, samples.second}},
            {"dataset_samples", dataset_samples},
            {"batches", json::array{batches.first, batches.second}},
            {"dataset_batches", dataset_batches},
            {"first_row", first_row},
            {"run_hash", sha256_hex(key)}};
}

namespace {

// Each directory read as a shard, after the checks that --out is none of them, lies in
// none of them and holds none of them.
std::vector<ShardDir> read_shards(const std::vector<fs::path>& dirs, const fs::path& out) {
    const auto same_dir = [](fs::path a, fs::path b) {
        if (a.filename().empty()) a = a.parent_path();
        if (b.filename().empty()) b = b.parent_path();
        return a == b;
    };
    std::vector<ShardDir> shards;
    for (const fs::path& d : dirs) {
        const fs::path dir = fs::absolute(d).lexically_normal();
        if (same_dir(dir, out) || same_file(dir, out))
            throw Error(fmt::format("ember merge: --out {} is one of the shards", out.string()));
        // Writing inside a sealed shard would change it; replacing a directory holding a
        // shard would delete this merge's own input.
        if (is_within(out, dir))
            throw Error(fmt::format("ember merge: --out {} lies inside the shard {}; merge beside the shards",
                                    out.string(), dir.string()));
        if (is_within(dir, out))
            throw Error(fmt::format("ember merge: --out {} holds the shard {}, an input of this merge; merge into "
                                    "another directory",
                                    out.string(), dir.string()));
        shards.push_back(read_shard(dir));
    }
    return shards;
}

// The shards in order, after the checks that they are of one run (everything but each
// shard's own counts is the same), each of the N exactly once, each right after the one
// before and the last at the dataset's end. `rows`: the rows of all of them.
std::vector<const ShardDir*> ordered_shards(const std::vector<ShardDir>& shards, std::size_t& rows) {
    check_same_saes(shards);
    const json::value reference = run_identity(shards.front().manifest);  // (values: a Difference points into them)
    for (std::size_t i = 1; i < shards.size(); ++i) {
        const json::value other = run_identity(shards[i].manifest);
        if (auto d = first_difference(reference, other, "")) {
            throw Error(fmt::format("ember merge: {} and {} are shards of different runs: {} is {} in {} and {} in {}",
                                    shards.front().dir.string(), shards[i].dir.string(), d->path, describe(d->a),
                                    shards.front().dir.string(), describe(d->b), shards[i].dir.string()));
        }
    }
    const std::size_t n = shards.front().shard.count;
    std::vector<const ShardDir*> ordered(n, nullptr);
    for (const ShardDir& s : shards) {
        if (const ShardDir* twice = ordered[s.shard.index])
            throw Error(fmt::format("ember merge: {} and {} are both shard {} of {}", twice->dir.string(), s.dir.string(),
                                    s.shard.index, n));
        ordered[s.shard.index] = &s;
    }
    std::vector<std::string> missing, given;
    for (std::size_t k = 0; k < n; ++k) (ordered[k] ? given : missing).push_back(std::to_string(k));
    if (!missing.empty()) {
        throw Error(fmt::format("ember merge: shard{} {} of {} {} missing (given: {}); the merge needs shards 0 to {}",
                                missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), n,
                                missing.size() > 1 ? "are" : "is", fmt::join(given, ", "), n - 1));
    }
    std::size_t row = 0, sample = 0;
    for (const ShardDir* s : ordered) {
        if (s->begin != sample || s->end < s->begin || s->samples != s->end - s->begin || s->first_row != row)
            throw Error(fmt::format("ember merge: {}: its shard record (samples [{}, {}), first row {}) does not follow "
                                    "the shards before it (sample {}, row {})",
                                    s->dir.string(), s->begin, s->end, s->first_row, sample, row));
        sample = s->end;
        row += s->rows;
    }
    if (sample != ordered.back()->dataset_samples)
        throw Error(fmt::format("ember merge: the shards hold samples [0, {}) of {}", sample,
                                ordered.back()->dataset_samples));
    rows = row;
    return ordered;
}

// The unsharded run's manifest: shard 0's, its counts summed, its config without the
// shard (and its output directory `out`), each array's row count the joined file's.
json::object merged_manifest(const std::vector<const ShardDir*>& ordered, const fs::path& out, std::size_t total_rows,
                             const std::map<std::string, std::size_t>& rows, std::size_t& samples) {
    const ShardDir& first = *ordered.front();
    json::object manifest = without(without(without(first.manifest, "manifest_sha256"), "files"), "shard");
    json::object config = manifest.at("config").as_object();
    json::object& output = config["output"].as_object();
    json::object& tracing = config["tracing"].as_object();
    if (output.contains("dir") && tracing.contains("path") && tracing["path"].is_string() && output["dir"].is_string() &&
        tracing["path"].as_string() == (fs::path(std::string(output["dir"].as_string())) / "trace.jsonl").string())
        tracing["path"] = (out / "trace.jsonl").string();
    output["dir"] = out.string();
    config["dataset"] = without(config["dataset"].as_object(), "shard");
    manifest["config_hash"] = config::config_hash(config);
    manifest["config"] = std::move(config);
    json::object& dataset = manifest["dataset"].as_object();
    std::size_t skipped = 0, tokens = 0, evaluated_tokens = 0;
    samples = 0;
    for (const ShardDir* s : ordered) {
        samples += s->samples;
        skipped += s->skipped;
        tokens += s->tokens;
        evaluated_tokens += s->evaluated_tokens;
    }
    dataset["samples"] = samples;
    dataset["skipped"] = skipped;
    dataset["rows"] = total_rows;
    dataset["tokens"] = tokens;
    dataset["evaluated_tokens"] = evaluated_tokens;
    for (json::object* e : array_entries(manifest)) {
        if (const json::value* indptr = sparse_file(*e, "indptr")) {  // sparse SAE features: R + 1 entries, nnz values
            const json::value* values = sparse_file(*e, "values");
            if (!values || !rows.contains(std::string(indptr->as_string())) || !rows.contains(std::string(values->as_string())))
                throw Error(fmt::format("ember merge: {}: manifest.json lists SAE features that are not in its files",
                                        first.dir.string()));
            set_rows(*e, rows.at(std::string(indptr->as_string())) - 1, rows.at(std::string(values->as_string())));
            continue;
        }
        const json::value* file = e->if_contains("file");
        if (!file) file = e->if_contains("ids_file");
        if (!file || !file->is_string() || !rows.contains(std::string(file->as_string())))
            throw Error(fmt::format("ember merge: {}: manifest.json lists an array that is not in its files",
                                    first.dir.string()));
        set_rows(*e, rows.at(std::string(file->as_string())));
    }
    return manifest;
}

}  // namespace

MergeResult merge_dataset_shards(const std::vector<fs::path>& dirs, const fs::path& out_arg, const MergeOptions& options) {
    if (dirs.empty()) throw Error("ember merge: give the shard directories");
    const fs::path out = fs::absolute(out_arg).lexically_normal();
    check_output_directory("--out", out);
    const std::vector<ShardDir> shards = read_shards(dirs, out);
    std::size_t total_rows = 0;
    const std::vector<const ShardDir*> ordered = ordered_shards(shards, total_rows);
    const std::vector<std::string> names = joined_files(ordered);

    record::RunDirectoryOptions directory_options;
    directory_options.overwrite = options.overwrite;
    directory_options.holder = "ember merge";
    directory_options.inputs = dirs;
    record::RunDirectoryWriter writer(out, directory_options);
    MergeResult result;
    result.dir = writer.output_dir();
    result.shards = ordered.size();
    std::map<std::string, std::size_t> rows;  // of each array
    std::vector<char> buffer(kBufferBytes);
    std::map<std::string, std::string> indptrs;  // a sparse SAE array's indptr file -> its values file
    if (const json::value* saes = ordered.front()->manifest.if_contains("sae_features"); saes && saes->is_array())
        for (const json::value& e : saes->as_array())
            if (e.is_object())
                if (const json::value* indptr = sparse_file(e.as_object(), "indptr"))
                    if (const json::value* values = sparse_file(e.as_object(), "values"))
                        indptrs[std::string(indptr->as_string())] = std::string(values->as_string());
    std::vector<fs::path> shard_dirs;  // in shard order
    for (const ShardDir* s : ordered) shard_dirs.push_back(s->dir);
    for (const std::string& name : names) {
        JoinedFile j = indptrs.contains(name)   ? join_indptr(shard_dirs, name, indptrs.at(name), writer.dir())
                       : name.ends_with(".npy") ? join_npy(shard_dirs, name, writer.dir(), buffer)
                                                : join_lines(shard_dirs, name, writer.dir(), buffer);
        rows[name] = j.rows;
        result.bytes += j.record.bytes;
        writer.add_file(std::move(j.record));
    }
    result.files = names.size();
    writer.commit(merged_manifest(ordered, out, total_rows, rows, result.samples));
    result.rows = total_rows;
    return result;
}

}  // namespace ember::extract

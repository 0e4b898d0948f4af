#include "extract/dataset_outputs.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <fstream>
#include <iterator>
#include <map>

#include "record/strict_json.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

struct Progress {
    RunPoint point;
    std::map<std::string, std::uint64_t> bytes;
};

// The progress of an earlier run with the same key, if any.
std::optional<Progress> read_progress(const fs::path& dir, const std::string& run_key) {
    std::ifstream in(dir / kProgressName, std::ios::binary);
    if (!in) return std::nullopt;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    json::error_code ec;
    const json::value v = json::parse(text, ec);
    if (ec || !v.is_object()) return std::nullopt;
    const json::object& o = v.as_object();
    const json::value* key = o.if_contains("run_key");
    if (!key || !key->is_string() || key->as_string() != run_key) return std::nullopt;
    // written before a fresh run's first file: nothing to keep yet
    if (const json::value* fresh = o.if_contains("fresh"); fresh && fresh->is_bool() && fresh->as_bool()) return std::nullopt;
    try {
        Progress p;
        p.point.samples = o.at("samples").to_number<std::size_t>();
        p.point.rows = o.at("rows").to_number<std::size_t>();
        p.point.tokens = o.at("tokens").to_number<std::size_t>();
        p.point.evaluated = o.at("evaluated").to_number<std::size_t>();
        p.point.skipped = o.at("skipped").to_number<std::size_t>();
        for (const auto& [name, bytes] : o.at("bytes").as_object()) p.bytes[std::string(name)] = bytes.to_number<std::uint64_t>();
        return p;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace

DatasetOutputs::DatasetOutputs(fs::path dir, std::vector<ArrayPlan> arrays, bool targets, std::string run_key)
    : dir_(std::move(dir)), plans_(std::move(arrays)), run_key_(std::move(run_key)) {
    const std::optional<Progress> progress = read_progress(dir_, run_key_);
    // A fresh run records its key before it creates a file, so a process killed before
    // the first checkpoint below leaves a directory the same command resumes (from nothing).
    if (!progress) write_file_atomically(dir_ / kProgressName, strict_json(json::object{{"run_key", run_key_}, {"fresh", true}}) + "\n");
    auto resume = [&](const std::string& name) -> std::optional<std::uint64_t> {
        if (!progress) return std::nullopt;
        const auto it = progress->bytes.find(name);
        if (it == progress->bytes.end())
            throw Error(fmt::format("{}: {} does not list {}; remove the directory to start over",
                                    (dir_ / kProgressName).string(), kProgressName, name));
        return it->second;
    };
    if (progress) resumed_ = progress->point;
    for (const ArrayPlan& plan : plans_)
        arrays_.push_back(std::make_unique<record::NpyAppender>(dir_ / plan.name, plan.descr, plan.row_shape(), resume(plan.name)));
    rows_ = std::make_unique<record::PartialFile>(dir_ / "rows.jsonl", resume("rows.jsonl"));
    samples_ = std::make_unique<record::PartialFile>(dir_ / "samples.jsonl", resume("samples.jsonl"));
    if (targets) {
        targets_jsonl_ = std::make_unique<record::PartialFile>(dir_ / "targets.jsonl", resume("targets.jsonl"));
        targets_npy_ = std::make_unique<record::NpyAppender>(dir_ / "targets.npy", "<f8", std::vector<std::size_t>{}, resume("targets.npy"));
    }
    if (!progress) checkpoint({});  // a fresh run's files are empty: that is its first resume point
}

std::vector<std::string> DatasetOutputs::file_names() const {
    std::vector<std::string> names;
    for (const ArrayPlan& plan : plans_) names.push_back(plan.name);
    names.push_back("rows.jsonl");
    names.push_back("samples.jsonl");
    if (targets_jsonl_) {
        names.push_back("targets.jsonl");
        names.push_back("targets.npy");
    }
    return names;
}

void DatasetOutputs::checkpoint(const RunPoint& point) {
    json::object bytes;
    for (auto& a : arrays_) {
        a->flush();
        bytes[a->file().name()] = a->file().size();
    }
    for (record::PartialFile* f : {rows_.get(), samples_.get(), targets_jsonl_.get()}) {
        if (!f) continue;
        f->flush();
        bytes[f->name()] = f->size();
    }
    if (targets_npy_) {
        targets_npy_->flush();
        bytes[targets_npy_->file().name()] = targets_npy_->file().size();
    }
    const json::object progress{{"run_key", run_key_},
                                {"samples", point.samples},
                                {"rows", point.rows},
                                {"tokens", point.tokens},
                                {"evaluated", point.evaluated},
                                {"skipped", point.skipped},
                                {"bytes", std::move(bytes)}};
    write_file_atomically(dir_ / kProgressName, strict_json(progress) + "\n");
}

void DatasetOutputs::finish() {
    for (auto& a : arrays_) a->finish();
    rows_->finish();
    samples_->finish();
    if (targets_jsonl_) targets_jsonl_->finish();
    if (targets_npy_) targets_npy_->finish();
    std::error_code ec;
    fs::remove(dir_ / kProgressName, ec);
    // A process killed while it replaced progress.json leaves that write's temporary.
    const std::string stale = std::string(kProgressName) + ".tmp.";
    for (const auto& e : fs::directory_iterator(dir_, ec))
        if (e.path().filename().string().starts_with(stale)) fs::remove(e.path(), ec);
}

RunPoint operator-(const RunPoint& a, const RunPoint& b) {
    return {a.samples - b.samples, a.rows - b.rows, a.tokens - b.tokens, a.evaluated - b.evaluated, a.skipped - b.skipped};
}

RunPoint& operator+=(RunPoint& a, const RunPoint& b) {
    a.samples += b.samples;
    a.rows += b.rows;
    a.tokens += b.tokens;
    a.evaluated += b.evaluated;
    a.skipped += b.skipped;
    return a;
}

}  // namespace ember::extract

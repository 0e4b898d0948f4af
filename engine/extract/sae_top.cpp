#include "extract/sae_top.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <ember/npy.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "common/error.hpp"
#include "record/strict_parse.hpp"
#include "record/manifest.hpp"

namespace ember::extract {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

std::string read_manifest_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open", path.string()));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A manifest value read with an error naming the manifest and the key.
const json::value& at(const json::object& o, std::string_view key, const fs::path& manifest) {
    const json::value* v = o.if_contains(key);
    if (!v) throw Error(fmt::format("{}: key '{}' missing", manifest.string(), key));
    return *v;
}

std::size_t count(const json::value& v, std::string_view key, const fs::path& manifest) {
    if (!v.is_uint64() && !(v.is_int64() && v.get_int64() >= 0))
        throw Error(fmt::format("{}: key '{}': not a count", manifest.string(), key));
    return v.to_number<std::size_t>();
}

// A .npy file in the run, its header checked against what the manifest says.
struct NpyFile {
    std::ifstream in;
    npy::Header header;
};

NpyFile open_npy(const fs::path& path, std::string_view descr, const std::vector<std::size_t>& shape) {
    NpyFile f{std::ifstream(path, std::ios::binary), {}};
    if (!f.in) throw Error(fmt::format("{}: cannot open", path.string()));
    try {
        f.header = npy::read_header(f.in, path);
    } catch (const std::exception& e) {
        throw Error(e.what());
    }
    if (f.header.descr != descr || f.header.fortran_order || f.header.shape != shape)
        throw Error(fmt::format("{}: a {} array {}, the manifest says {} {}", path.string(), f.header.descr,
                                npy::shape_text(f.header.shape), descr, npy::shape_text(shape)));
    const std::size_t width = descr == "<i8" ? 8 : 4;
    const std::uintmax_t bytes = fs::file_size(path);
    if (bytes < f.header.data_offset || (bytes - f.header.data_offset) / width < f.header.count())
        throw Error(fmt::format("{}: holds fewer values than its shape {} says", path.string(), npy::shape_text(shape)));
    return f;
}

template <class T>
std::vector<T> read_values(const fs::path& path, std::string_view descr, std::size_t n) {
    NpyFile f = open_npy(path, descr, {n});
    std::vector<T> out(n);
    f.in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * sizeof(T)));
    if (!f.in) throw Error(fmt::format("{}: holds fewer values than its shape says", path.string()));
    return out;
}

// Column `feature` of every row: from a dense [R, d_sae] array (one value read per row),
// or from the CSR arrays.
std::vector<float> feature_column(const fs::path& dir, const json::object& entry, std::size_t R, std::size_t d_sae,
                                  std::size_t feature, const fs::path& manifest) {
    std::vector<float> column(R, 0.0f);
    const json::value& layout = at(entry, "layout", manifest);
    if (layout == "dense") {
        const fs::path path = dir / std::string(at(entry, "file", manifest).as_string());
        NpyFile f = open_npy(path, "<f4", {R, d_sae});
        for (std::size_t r = 0; r < R; ++r) {
            f.in.seekg(static_cast<std::streamoff>(f.header.data_offset + (r * d_sae + feature) * 4));
            f.in.read(reinterpret_cast<char*>(&column[r]), 4);
            if (!f.in) throw Error(fmt::format("{}: cannot read row {}", path.string(), r));
        }
        return column;
    }
    if (layout != "sparse") throw Error(fmt::format("{}: layout {} is neither dense nor sparse", manifest.string(),
                                                    json::serialize(layout)));
    const json::object& files = at(entry, "files", manifest).as_object();
    const std::size_t nnz = count(at(entry, "nnz", manifest), "nnz", manifest);
    const auto file = [&](std::string_view key) { return dir / std::string(at(files, key, manifest).as_string()); };
    const std::vector<std::int64_t> indptr = read_values<std::int64_t>(file("indptr"), "<i8", R + 1);
    const std::vector<std::int32_t> indices = read_values<std::int32_t>(file("indices"), "<i4", nnz);
    const std::vector<float> values = read_values<float>(file("values"), "<f4", nnz);
    for (std::size_t r = 0; r < R; ++r) {
        const std::int64_t begin = indptr[r], end = indptr[r + 1];
        if (begin < 0 || end < begin || static_cast<std::size_t>(end) > nnz)
            throw Error(fmt::format("{}: indptr[{}..{}] = {}..{} is not within the {} values", file("indptr").string(), r,
                                    r + 1, begin, end, nnz));
        for (std::int64_t i = begin; i < end; ++i)
            if (static_cast<std::size_t>(indices[i]) == feature) column[r] = values[i];
    }
    return column;
}

// The SAE entry the request names: the only one, or by index or name.
std::size_t choose_sae(const json::array& entries, const TopRequest& request, const fs::path& manifest) {
    const auto name_of = [](const json::value& e) { return std::string(e.at("sae").at("name").as_string()); };
    if (!request.sae) {
        if (entries.size() == 1) return 0;
        std::string names;
        for (std::size_t i = 0; i < entries.size(); ++i) names += fmt::format("{}{} ({})", i ? ", " : "", i, name_of(entries[i]));
        throw UsageError(fmt::format("{}: the run has {} SAEs: choose one with --sae (index or name: {})", manifest.string(),
                                     entries.size(), names));
    }
    for (std::size_t i = 0; i < entries.size(); ++i)
        if (*request.sae == std::to_string(i) || *request.sae == name_of(entries[i])) return i;
    throw Error(fmt::format("{}: the run has no SAE '{}'", manifest.string(), *request.sae));
}

void fill_token(TopRow& row, const json::object& token) {
    if (const json::value* id = token.if_contains("id"); id && id->is_number()) row.token = id->to_number<std::int64_t>();
    if (const json::value* id = token.if_contains("token"); id && id->is_number()) row.token = id->to_number<std::int64_t>();
    const json::value* piece = token.if_contains("piece");
    if (piece && piece->is_string()) row.piece = std::string(piece->as_string());
    else if (const json::value* hex = token.if_contains("piece_hex"); hex && hex->is_string())
        row.piece = fmt::format("<bytes {}>", std::string(hex->as_string()));
}

}  // namespace

TopRows top_feature_rows(const fs::path& dir, const TopRequest& request) {
    const fs::path manifest_path = dir / record::kManifestName;
    if (!fs::exists(manifest_path)) throw Error(fmt::format("{}: no {}: not a finished run directory", dir.string(), record::kManifestName));
    const json::value parsed = parse_strict_json(read_manifest_text(manifest_path), manifest_path.string());
    if (!parsed.is_object()) throw Error(fmt::format("{}: not a JSON object", manifest_path.string()));
    const json::object& manifest = parsed.as_object();
    const json::value* list = manifest.if_contains("sae_features");
    if (!list || !list->is_array() || list->as_array().empty())
        throw Error(fmt::format("{}: the run has no SAE features (extract them with ember extract --sae DIR)", dir.string()));
    const json::array& entries = list->as_array();

    TopRows out;
    out.sae_index = choose_sae(entries, request, manifest_path);
    const json::object& entry = entries[out.sae_index].as_object();
    out.sae_name = std::string(entry.at("sae").at("name").as_string());
    const json::array& shape = at(entry, "shape", manifest_path).as_array();
    out.rows = count(shape.at(0), "shape", manifest_path);
    out.d_sae = count(shape.at(1), "shape", manifest_path);
    if (request.feature >= out.d_sae)
        throw Error(fmt::format("{}: feature {} is past the SAE's {} features (0-{})", out.sae_name, request.feature,
                                out.d_sae, out.d_sae - 1));

    const std::vector<float> column = feature_column(dir, entry, out.rows, out.d_sae, request.feature, manifest_path);
    std::vector<std::size_t> firing;
    for (std::size_t r = 0; r < column.size(); ++r)
        if (column[r] != 0.0f) firing.push_back(r);
    out.firing = firing.size();
    const std::size_t k = std::min(request.k, firing.size());
    std::partial_sort(firing.begin(), firing.begin() + static_cast<std::ptrdiff_t>(k), firing.end(),
                      [&](std::size_t a, std::size_t b) { return column[a] != column[b] ? column[a] > column[b] : a < b; });
    firing.resize(k);
    for (std::size_t r : firing) out.top.push_back({r, column[r]});

    // The rows' tokens: a prompt's positions in the tokenizer record, a dataset's rows.jsonl lines.
    if (const json::value* positions = entry.if_contains("positions")) {
        const json::array& tokens = at(at(manifest, "tokenizer", manifest_path).as_object(), "tokens", manifest_path).as_array();
        for (TopRow& row : out.top) {
            row.position = count(positions->as_array().at(row.row), "positions", manifest_path);
            const json::object& token = tokens.at(row.position).as_object();
            fill_token(row, token);
            row.byte_start = count(at(token, "start", manifest_path), "start", manifest_path);
            row.byte_end = count(at(token, "end", manifest_path), "end", manifest_path);
        }
        return out;
    }
    std::set<std::size_t> wanted;
    for (const TopRow& row : out.top) wanted.insert(row.row);
    std::ifstream rows(dir / "rows.jsonl", std::ios::binary);
    if (!rows) throw Error(fmt::format("{}: cannot open (the dataset run's rows)", (dir / "rows.jsonl").string()));
    std::string line;
    for (std::size_t r = 0; !wanted.empty() && std::getline(rows, line); ++r) {
        if (!wanted.erase(r)) continue;
        const json::value v = parse_strict_json(line, fmt::format("{}:{}", (dir / "rows.jsonl").string(), r + 1));
        const json::object& o = v.as_object();
        for (TopRow& row : out.top) {
            if (row.row != r) continue;
            row.sample = count(at(o, "sample", manifest_path), "sample", manifest_path);
            if (const json::value* id = o.if_contains("id")) row.sample_id = id->is_string() ? std::string(id->as_string()) : json::serialize(*id);
            row.position = count(at(o, "position", manifest_path), "position", manifest_path);
            fill_token(row, o);
            row.byte_start = count(at(o, "byte_start", manifest_path), "byte_start", manifest_path);
            row.byte_end = count(at(o, "byte_end", manifest_path), "byte_end", manifest_path);
        }
    }
    if (!wanted.empty())
        throw Error(fmt::format("{}: has no line for row {}", (dir / "rows.jsonl").string(), *wanted.begin()));
    return out;
}

}  // namespace ember::extract

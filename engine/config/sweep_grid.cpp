#include "config/sweep_grid.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "config/run_config_toml.hpp"
#include "config/toml_reader.hpp"

namespace ember::config {
namespace fs = std::filesystem;
namespace json = boost::json;
namespace {

// One grid key as the file writes it: its dotted name, where its list is, its values.
struct GridKey {
    std::string name;                 // "output.layers"
    std::optional<std::size_t> zip;   // the [[grid.zip]] group it belongs to
    std::vector<std::string> path;    // the TOML keys leading to its list inside [grid] (or inside its zip group)
    toml::source_region where;        // the key
    std::vector<json::value> values;  // as JSON, in file order
};

// The keys that vary together (one product key, or one zip group) and how many values they take.
struct Dimension {
    std::vector<std::size_t> keys;  // indices into the keys
    std::size_t size = 0;
};

[[noreturn]] void fail_at(const std::string& file, const toml::source_region& where, std::string_view message) {
    throw Error(located(file, where, message));
}

std::vector<std::string> split_key(const std::string& name) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (std::size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1)
        parts.push_back(name.substr(start, dot - start));
    parts.push_back(name.substr(start));
    return parts;
}

// "an integer", "a string": a node's type for a message.
std::string a_type(const toml::node& node) {
    const std::string_view type = toml_type_name(node.type());
    return fmt::format("{} {}", type.front() == 'a' || type.front() == 'i' ? "an" : "a", type);
}

std::string hash8(std::string_view text) { return sha256_hex(text).substr(0, 8); }

bool safe_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

// The length of the UTF-8 sequence at s[i] and its code point; 0 when the bytes there are
// not one well-formed sequence (overlong, a surrogate, beyond U+10FFFF, cut short).
std::size_t utf8_sequence(const std::string& s, std::size_t i, char32_t& cp) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned char lead = b(0);
    const std::size_t n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    cp = n == 1 ? lead : lead & (0x7F >> n);
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(k) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b(k) & 0x3F);
    }
    constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

// A character beyond ASCII that may stand in a file name: not a C1 control, no-break or
// other space, general punctuation (bidirectional controls, zero-width characters), a
// variation selector, the BOM, a private-use character or a noncharacter.
bool readable_code_point(char32_t cp) {
    if (cp < 0xA1) return false;
    if (cp >= 0x2000 && cp <= 0x206F) return false;
    if (cp == 0x3000 || cp == 0xFEFF || (cp >= 0xFE00 && cp <= 0xFE0F) || (cp >= 0xFFF0 && cp <= 0xFFFF)) return false;
    if ((cp >= 0xE000 && cp <= 0xF8FF) || cp >= 0xF0000 || (cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE)
        return false;
    return true;
}

// A string value in run names: itself when short and plain ASCII, else a readable slug (the
// safe ASCII characters and the readable characters beyond ASCII, so Arabic stays Arabic;
// every run of other bytes one '_'), at most kReadable bytes cut between characters, then
// '~' and the hash of the whole value, so two values never share a name.
std::string string_text(const std::string& s) {
    constexpr std::size_t kWhole = 32, kReadable = 24;
    if (!s.empty() && s.size() <= kWhole && s.front() != '.' && std::all_of(s.begin(), s.end(), safe_char)) return s;
    std::string readable;
    for (std::size_t i = 0; i < s.size();) {
        char32_t cp = 0;
        const std::size_t n = utf8_sequence(s, i, cp);
        const bool keep = n == 1 ? safe_char(s[i]) : n > 1 && readable_code_point(cp);
        const std::size_t width = keep ? n : std::max<std::size_t>(n, 1);
        if (keep && readable.size() + n <= kReadable) readable.append(s, i, n);
        else if (!keep && !readable.empty() && readable.back() != '_' && readable.size() < kReadable) readable += '_';
        else if (keep) break;  // full: never half a character
        i += width;
    }
    while (!readable.empty() && (readable.front() == '.' || readable.front() == '_')) readable.erase(0, 1);
    while (!readable.empty() && readable.back() == '_') readable.pop_back();
    return readable + "~" + hash8(s);
}

// Collects the lists under `table` (nested tables stand for dotted keys).
void collect_keys(const toml::table& table, const std::string& prefix, std::vector<std::string>& path,
                  std::optional<std::size_t> zip, const std::string& file, std::vector<GridKey>& out) {
    for (const auto& [key, node] : table) {
        if (prefix.empty() && !zip && key.str() == "zip") continue;
        const std::string name = prefix.empty() ? std::string(key.str()) : fmt::format("{}.{}", prefix, key.str());
        path.emplace_back(key.str());
        if (node.is_table()) {
            collect_keys(*node.as_table(), name, path, zip, file, out);
        } else if (node.is_array() && !node.as_array()->empty()) {
            GridKey k{name, zip, path, key.source(), {}};
            for (const toml::node& value : *node.as_array()) k.values.push_back(toml_to_json(value, file));
            out.push_back(std::move(k));
        } else {
            fail_at(file, node.source(),
                    node.is_array() ? fmt::format("grid key '{}' has no values", name)
                                    : fmt::format("grid key '{}' must be a list of values, not {}", name, a_type(node)));
        }
        path.pop_back();
    }
}

// The keys of [grid] and its [[grid.zip]] groups, checked, and the dimensions they make.
std::pair<std::vector<GridKey>, std::vector<Dimension>> read_grid(const toml::table& root, const std::string& file) {
    const toml::node* grid = root.get("grid");
    if (!grid->is_table()) fail_at(file, grid->source(), "grid must be a table ([grid])");
    std::vector<GridKey> keys;
    std::vector<std::string> path;
    collect_keys(*grid->as_table(), "", path, std::nullopt, file, keys);
    std::vector<Dimension> dims;
    for (std::size_t i = 0; i < keys.size(); ++i) dims.push_back({{i}, keys[i].values.size()});

    if (const toml::node* zip = grid->as_table()->get("zip")) {
        if (!zip->is_array()) fail_at(file, zip->source(), "grid.zip must be written [[grid.zip]] (an array of tables)");
        for (std::size_t g = 0; g < zip->as_array()->size(); ++g) {
            const toml::node& group = *zip->as_array()->get(g);
            if (!group.is_table()) fail_at(file, group.source(), "grid.zip must be written [[grid.zip]] (an array of tables)");
            const std::size_t first = keys.size();
            collect_keys(*group.as_table(), "", path, g, file, keys);
            if (keys.size() == first) fail_at(file, group.source(), "this [[grid.zip]] group has no keys");
            Dimension d{{}, keys[first].values.size()};
            for (std::size_t i = first; i < keys.size(); ++i) {
                if (keys[i].values.size() != d.size)
                    fail_at(file, keys[i].where,
                            fmt::format("grid key '{}' has {} values but '{}' in the same [[grid.zip]] group has {} (the "
                                        "keys of a group vary together)",
                                        keys[i].name, keys[i].values.size(), keys[first].name, d.size));
                d.keys.push_back(i);
            }
            dims.push_back(std::move(d));
        }
    }
    if (keys.empty()) fail_at(file, grid->source(), "[grid] has no keys: give it at least one config key with a list of values");

    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const GridKey& k = keys[i];
        const std::vector<std::string> parts = split_key(k.name);
        if (std::any_of(parts.begin(), parts.end(), [](const std::string& p) { return p.empty(); }))
            fail_at(file, k.where, fmt::format("grid key '{}' is not a dotted config key such as \"output.layers\"", k.name));
        if (parts.front() == "grid") fail_at(file, k.where, fmt::format("grid key '{}' cannot vary the grid itself", k.name));
        if (k.name == "output.dir")
            fail_at(file, k.where,
                    "output.dir cannot be a grid key: each run writes to output.dir/NAME, NAME made of its grid values");
        if (const auto [it, fresh] = seen.emplace(k.name, i); !fresh)
            fail_at(file, k.where, fmt::format("grid key '{}' is given twice", k.name));
    }
    // A run given twice would write one directory twice.
    for (const Dimension& d : dims) {
        std::map<std::string, std::size_t> tuples;
        for (std::size_t v = 0; v < d.size; ++v) {
            std::string tuple;
            for (std::size_t k : d.keys) tuple += canonical_json(keys[k].values[v]) + "\n";
            if (const auto [it, fresh] = tuples.emplace(tuple, v); !fresh) {
                const GridKey& k = keys[d.keys.front()];
                fail_at(file, k.where,
                        fmt::format("grid key '{}': value {} is the same as value {}{} (a run would be given twice)",
                                    k.name, v + 1, it->second + 1, d.keys.size() > 1 ? " in every key of its group" : ""));
            }
        }
    }
    return {std::move(keys), std::move(dims)};
}

// The list node of `key` in a freshly parsed document.
toml::array& list_of(toml::table& root, const GridKey& key) {
    toml::table* t = root.get("grid")->as_table();
    if (key.zip) t = t->get("zip")->as_array()->get(*key.zip)->as_table();
    for (std::size_t i = 0; i + 1 < key.path.size(); ++i) t = t->get(key.path[i])->as_table();
    return *t->get(key.path.back())->as_array();
}

std::string plugin_name(const toml::node* plugin) {
    if (!plugin || !plugin->is_string()) return "";
    std::string stem = fs::path(plugin->as_string()->get()).stem().string();
    return stem.starts_with("lib") ? stem.substr(3) : stem;
}

// The [[experiment]] entry a key `experiment.SELECTOR....` names: by index or by plugin name.
toml::table& experiment_entry(toml::table& root, const std::string& selector, const GridKey& key,
                              const std::string& file) {
    toml::array* entries = root.get("experiment") ? root.get("experiment")->as_array() : nullptr;
    if (!entries) fail_at(file, key.where, fmt::format("grid key '{}': the base config has no [[experiment]]", key.name));
    std::vector<std::string> names;
    std::vector<std::size_t> matches;
    for (std::size_t i = 0; i < entries->size(); ++i) {
        const toml::table* entry = entries->get(i)->as_table();
        names.push_back(entry ? plugin_name(entry->get("plugin")) : "");
        if (names.back() == selector || std::to_string(i) == selector) matches.push_back(i);
    }
    if (matches.size() > 1)
        fail_at(file, key.where,
                fmt::format("grid key '{}': {} [[experiment]] entries load '{}'; name one by its index (experiment.0...)",
                            key.name, matches.size(), selector));
    if (matches.empty() || !entries->get(matches[0])->is_table()) {
        std::string list;
        for (std::size_t i = 0; i < names.size(); ++i) list += fmt::format("{}{} ({})", i ? ", " : "", i, names[i]);
        fail_at(file, key.where,
                fmt::format("grid key '{}': no [[experiment]] '{}' in the base config (there: {})", key.name, selector,
                            list));
    }
    return *entries->get(matches[0])->as_table();
}

// Puts `value` at the key's place in the run's document. Keys of an [[experiment]] entry
// must be in the base (an experiment's config keys are the plugin's; a grid replaces them).
void put(toml::table& root, const GridKey& key, toml::node&& value, const std::string& file) {
    const std::vector<std::string> parts = split_key(key.name);
    toml::table* table = &root;
    std::size_t i = 0;
    bool must_exist = false;
    if (parts.front() == "experiment") {
        if (parts.size() < 3)
            fail_at(file, key.where,
                    fmt::format("grid key '{}' must name an experiment and a key in it: experiment.NAME.config.KEY "
                                "(NAME: the plugin file without lib and .so, or the entry's index)",
                                key.name));
        table = &experiment_entry(root, parts[1], key, file);
        i = 2;
        must_exist = true;
    }
    for (; i < parts.size(); ++i) {
        toml::node* node = table->get(parts[i]);
        const bool last = i + 1 == parts.size();
        if (!node && must_exist)
            fail_at(file, key.where,
                    fmt::format("grid key '{}': the base [[experiment]] '{}' has no '{}' (a grid varies keys the base "
                                "experiment sets; give it a value there)",
                                key.name, parts[1], fmt::join(parts.begin() + 2, parts.begin() + i + 1, ".")));
        if (last) break;
        if (!node) node = table->insert(toml::key(parts[i], key.where), toml::table{}).first->second.as_table();
        if (!node->is_table())
            fail_at(file, key.where,
                    fmt::format("grid key '{}': {} is {} in the base config, not a table", key.name,
                                fmt::join(parts.begin(), parts.begin() + i + 1, "."), a_type(*node)));
        table = node->as_table();
    }
    table->insert_or_assign(toml::key(parts.back(), key.where), std::move(value));
}

// Each key's label in run names: the shortest dotted suffix no other key shares.
std::vector<std::string> labels_of(const std::vector<std::string>& keys) {
    std::vector<std::vector<std::string>> parts;
    for (const auto& k : keys) parts.push_back(split_key(k));
    const auto suffix = [](const std::vector<std::string>& p, std::size_t n) {
        return fmt::format("{}", fmt::join(p.end() - static_cast<std::ptrdiff_t>(std::min(n, p.size())), p.end(), "."));
    };
    std::vector<std::string> out;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        for (std::size_t n = 1;; ++n) {
            const std::string mine = suffix(parts[i], n);
            bool unique = true;
            for (std::size_t j = 0; j < keys.size() && unique; ++j) unique = j == i || suffix(parts[j], n) != mine;
            if (unique || n >= parts[i].size()) {
                out.push_back(mine);
                break;
            }
        }
    }
    return out;
}

std::string run_name(const std::vector<std::string>& labels, const std::vector<GridValue>& values) {
    constexpr std::size_t kMaxName = 200;  // well under the 255 bytes a file name may have
    std::string name;
    for (std::size_t i = 0; i < values.size(); ++i)
        name += fmt::format("{}{}={}", i ? "," : "", labels[i], grid_value_text(values[i].value));
    if (name.size() > kMaxName) {
        std::size_t cut = kMaxName - 9;  // not inside a character: back to the start of the one it would split
        while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
        name = name.substr(0, cut) + "~" + hash8(name);
    }
    return name;
}

}  // namespace

std::string grid_value_text(const json::value& value) {
    switch (value.kind()) {
        case json::kind::int64: return fmt::format("{}", value.get_int64());
        case json::kind::uint64: return fmt::format("{}", value.get_uint64());
        case json::kind::double_: return fmt::format("{}", value.get_double());
        case json::kind::bool_: return value.get_bool() ? "true" : "false";
        case json::kind::string: return string_text(std::string(value.get_string()));
        case json::kind::array: {
            std::string out;
            for (const json::value& item : value.get_array()) {
                if (!out.empty()) out.push_back('+');
                out.append(grid_value_text(item));
            }
            return out.empty() ? "none" : out;
        }
        case json::kind::object: return fmt::format("~{}", hash8(canonical_json(value)));
        case json::kind::null: break;
    }
    return "null";
}

bool is_grid_file(const fs::path& file) {
    try {
        return parse_config_file(file).contains("grid");
    } catch (const std::exception&) {
        return false;
    }
}

Grid expand_grid(const fs::path& file, const LoadOptions& options) {
    const std::string display = file.string();
    const toml::table first = parse_config_file(file);
    const auto [keys, dims] = read_grid(first, display);

    Grid grid;
    grid.file = file;
    std::vector<std::size_t> order(keys.size());  // keys in name order
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&keys = keys](std::size_t a, std::size_t b) { return keys[a].name < keys[b].name; });
    for (std::size_t i : order) grid.keys.push_back(keys[i].name);
    const std::vector<std::string> labels = labels_of(grid.keys);

    if (const toml::node* trace = first.at_path("tracing.path").node();
        trace && std::find(grid.keys.begin(), grid.keys.end(), "tracing.path") == grid.keys.end())
        fail_at(display, trace->source(),
                "tracing.path in a grid's base would name one journal for every run; leave it out (each run's journal "
                "goes to its own output directory) or make it a grid key");

    std::size_t total = 1;
    for (const Dimension& d : dims) {
        if (total > kMaxGridRuns / d.size)
            fail_at(display, first.get("grid")->source(),
                    fmt::format("the grid expands to more than {} runs; split it into several grid files", kMaxGridRuns));
        total *= d.size;
    }
    std::map<std::string, std::size_t> names;
    for (std::size_t r = 0; r < total; ++r) {
        // The value index of each dimension: the last dimension varies fastest.
        std::vector<std::size_t> index(dims.size());
        for (std::size_t d = dims.size(), rest = r; d-- > 0; rest /= dims[d].size) index[d] = rest % dims[d].size;

        GridRun run;
        std::vector<std::size_t> value_of(keys.size());
        for (std::size_t d = 0; d < dims.size(); ++d)
            for (std::size_t k : dims[d].keys) value_of[k] = index[d];
        for (std::size_t k : order) run.values.push_back({keys[k].name, keys[k].values[value_of[k]]});
        run.name = run_name(labels, run.values);
        if (const auto [it, fresh] = names.emplace(run.name, r); !fresh)
            fail_at(display, first.get("grid")->source(),
                    fmt::format("runs {} and {} would both be named '{}' (their values are written alike)", it->second, r,
                                run.name));

        // The document parsed again for each run: nodes moved from [grid] keep their line:column.
        toml::table doc = parse_config_file(file);
        for (std::size_t k = 0; k < keys.size(); ++k)
            put(doc, keys[k], std::move(*list_of(doc, keys[k]).get(value_of[k])), display);
        doc.erase("grid");
        toml::node* dir = doc.at_path("output.dir").node();
        if (dir && dir->is_string()) {
            dir->as_string()->get() = (fs::path(dir->as_string()->get()) / run.name).string();
        } else if (!dir) {
            if (!doc.get("output")) doc.insert("output", toml::table{});
            if (toml::table* output = doc.get("output")->as_table())
                output->insert("dir", (fs::path("runs") / file.stem() / run.name).string());
        }
        run.config = run_config_from_toml(doc, file, options);
        if (r == 0) grid.base_dir = run.config.output.dir.parent_path();
        grid.runs.push_back(std::move(run));
    }
    return grid;
}

}  // namespace ember::config

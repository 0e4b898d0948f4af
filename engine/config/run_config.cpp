#include "config/run_config.hpp"

#include <fmt/format.h>

#include <boost/json/parse.hpp>
#include <boost/json/value_from.hpp>

#include <ember/selection.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>

#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "config/run_config_toml.hpp"
#include "config/toml_limits.hpp"
#include "config/toml_reader.hpp"
#include "hooks/hooks.hpp"

namespace ember::config {
namespace fs = std::filesystem;
namespace {

// Every tensor stage can be extracted (ember/stages.h) but sae_features, whose width is an
// SAE's (SAE features extraction is not implemented yet).
constexpr auto kTensorStageNames = [] {
    std::array<std::string_view, hooks::kTensorStageCount - 1> names{};
    std::size_t n = 0;
    for (hooks::Stage s : hooks::kTensorStages)
        if (s != hooks::Stage::SaeFeatures) names[n++] = hooks::stage_name(s);
    return names;
}();

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

toml::table parse_toml_file(const fs::path& file) { return parse_toml_file_within_limits(file); }

[[noreturn]] void missing_table(const std::string& file, std::string_view message) {
    throw Error(fmt::format("{}:1:1: {}", file, message));
}

ModelSection parse_model(const toml::table& table, const std::string& file, const fs::path& base) {
    ModelSection m;
    TableReader r(table, "model", file);
    auto path = r.path("path", base);
    if (auto v = r.choice("arch", {"auto", "llama", "qwen3", "gemma4"})) m.arch = *v;
    if (auto v = r.choice("route", {"reference", "fast"})) m.route = *v;
    if (auto v = r.choice("kv_type", {"f32", "f16"})) m.kv_type = *v;
    if (auto v = r.integer("threads", 0, kMaxThreads)) m.threads = static_cast<std::uint32_t>(*v);
    if (auto v = r.integer("ctx", 0, kMaxInt32)) m.ctx = static_cast<std::uint32_t>(*v);
    r.finish();
    if (!path) r.fail_here("[model] needs path = \"model.gguf\"");
    m.path = *path;
    return m;
}

// [prompt] messages = [{role = "user", content = "..."}], with add_generation_prompt,
// enable_thinking, tools and template / template_name: the chat template's variables.
void parse_chat(TableReader& r, const toml::table& table, PromptSection& p, const fs::path& base) {
    const toml::node* messages = r.node("messages");
    const auto add_generation_prompt = r.boolean("add_generation_prompt");
    const auto enable_thinking = r.boolean("enable_thinking");
    const toml::node* tools = r.node("tools");
    p.chat_template = r.path("template", base);
    p.chat_template_name = r.string("template_name");
    if (!messages) {
        for (const char* key : {"add_generation_prompt", "enable_thinking", "tools", "template", "template_name"})
            if (const toml::node* n = table.get(key)) r.fail(*n, fmt::format("prompt.{} goes with prompt.messages", key));
        return;
    }
    const toml::array* list = messages->as_array();
    if (!list) r.fail(*messages, "prompt.messages must be an array of {role = \"...\", content = \"...\"} tables");
    for (const toml::node& m : *list) {
        const toml::table* t = m.as_table();
        if (!t || !t->get_as<std::string>("role"))
            r.fail(m, "each of prompt.messages must be a table with a string role");
    }
    if (p.chat_template && p.chat_template_name) r.fail(*table.get("template_name"), "prompt.template and prompt.template_name exclude each other");
    if (const toml::node* n = table.get("add_bos")) r.fail(*n, "prompt.add_bos does not go with messages: the template writes BOS");
    boost::json::object chat;
    chat["messages"] = toml_to_json(*messages, r.file());
    if (add_generation_prompt) chat["add_generation_prompt"] = *add_generation_prompt;
    if (enable_thinking) chat["enable_thinking"] = *enable_thinking;
    if (tools) chat["tools"] = toml_to_json(*tools, r.file());
    p.chat = std::move(chat);
}

PromptSection parse_prompt(const toml::table& table, const std::string& file, const fs::path& base) {
    PromptSection p;
    TableReader r(table, "prompt", file);
    p.text = r.string("text");
    p.file = r.path("file", base);
    if (const toml::node* n = r.node("add_bos")) {
        if (n->is_boolean()) p.add_bos = n->as_boolean()->get() ? AddBos::Yes : AddBos::No;
        else if (n->is_string() && n->as_string()->get() == "auto") p.add_bos = AddBos::Auto;
        else r.fail(*n, "prompt.add_bos must be true, false or \"auto\"");
    }
    parse_chat(r, table, p, base);
    if (const toml::node* n = r.node("ids")) {
        const toml::array* list = n->as_array();
        if (!list || list->empty()) r.fail(*n, "prompt.ids must be a non-empty array of token ids");
        std::vector<std::int32_t> ids;
        for (const toml::node& id : *list) {
            const auto v = id.value<std::int64_t>();
            if (!id.is_integer() || !v || *v < 0 || *v > kMaxInt32) r.fail(id, "prompt.ids: each id must be an integer >= 0");
            ids.push_back(static_cast<std::int32_t>(*v));
        }
        p.ids = std::move(ids);
    }
    if (auto special = r.boolean("special")) p.special = *special;
    p.target = r.string("target");
    r.finish();
    if (p.ids && (p.text || p.file || p.chat)) r.fail(*table.get("ids"), "[prompt] takes ids, text, file or messages: one of them");
    if (p.text && p.file) r.fail(*table.get("file"), "[prompt] takes text or file, not both");
    if (p.chat && (p.text || p.file)) r.fail(*table.get("messages"), "[prompt] takes messages, text or file: one of them");
    if (!p.text && !p.file && !p.chat && !p.ids)
        r.fail_here("[prompt] needs text = \"...\", file = \"prompt.txt\", ids = [...] or messages = [...]");
    return p;
}

GenerationSection parse_generation(const toml::table& table, const std::string& file) {
    GenerationSection g;
    TableReader r(table, "generation", file);
    if (auto v = r.integer("max_tokens", 1, kMaxInt32)) g.max_tokens = static_cast<std::uint32_t>(*v);
    if (auto v = r.number("temperature", 0.0, 1e6)) g.temperature = *v;
    if (auto v = r.integer("top_k", 0, kMaxInt32)) g.top_k = static_cast<std::uint32_t>(*v);
    if (auto v = r.number("top_p", 0.0, 1.0)) g.top_p = *v;
    if (auto v = r.integer("seed", 0, kMaxSeed)) g.seed = static_cast<std::uint64_t>(*v);
    r.finish();
    return g;
}

TracingSection parse_tracing(const toml::table& table, const std::string& file, const fs::path& base) {
    TracingSection t;
    TableReader r(table, "tracing", file);
    if (auto v = r.boolean("enabled")) t.enabled = *v;
    if (auto v = r.path("path", base)) t.path = *v;
    r.finish();
    return t;
}

// A selection spec (ember/selection.hpp) in its text form, checked.
std::string checked_spec(const TableReader& r, const toml::node& node, std::string_view key) {
    const auto* text = node.as_string();
    if (!text) r.fail(node, fmt::format("{} must be a selection spec string (all, last, 3,-1, substring:TEXT...)", key));
    try {
        return selection::parse(text->get()).to_string();
    } catch (const selection::SpecError& e) {
        r.fail(node, fmt::format("{}: {}", key, e.what()));
    }
}

DatasetSection parse_dataset(const toml::table& table, const std::string& file, const fs::path& base) {
    DatasetSection d;
    TableReader r(table, "dataset", file);
    d.path = r.path("path", base);
    if (!d.path) r.fail_here("dataset.path is required (a JSONL or .txt file)");
    if (const toml::node* node = r.node("select")) d.select = checked_spec(r, *node, "dataset.select");
    if (auto v = r.integer("batch_tokens", 0, kMaxInt32)) d.batch_tokens = static_cast<std::uint32_t>(*v);
    if (auto v = r.choice("on_empty", {"error", "skip"})) d.skip_empty = *v == "skip";
    if (auto v = r.choice("evaluate", {"needed", "whole"})) d.evaluate_whole = *v == "whole";
    if (const toml::node* node = r.node("shard")) {
        const auto* text = node->as_string();
        d.shard = text ? parse_shard(text->get()) : std::nullopt;
        if (!d.shard)
            r.fail(*node, fmt::format("dataset.shard must be \"K/N\" with 0 <= K < N <= {} (K counts from 0)", kMaxShards));
    }
    if (auto v = r.integer("shards", 1, static_cast<std::int64_t>(kMaxShards))) d.shards = static_cast<std::uint32_t>(*v);
    if (d.shard && d.shards > 1 && d.shard->count != d.shards)
        r.fail_here(fmt::format("dataset.shard {} is not one of dataset.shards = {}", shard_text(*d.shard), d.shards));
    r.finish();
    return d;
}

OutputSection parse_output(const toml::table& table, const std::string& file, const fs::path& base) {
    OutputSection o;
    TableReader r(table, "output", file);
    if (auto v = r.path("dir", base)) o.dir = *v;
    if (auto v = r.boolean("extract")) o.extract = *v;
    if (auto v = r.choice_list("stages", kTensorStageNames)) o.stages = *v;
    if (auto v = r.word_or_indices("layers", {"all"}, kMaxInt32)) {
        if (v->word.empty()) o.layers.emplace(v->indices.begin(), v->indices.end());
    }
    if (auto v = r.word_or_indices("positions", {"all", "last"}, kMaxInt32)) {
        if (v->word == "all") o.positions.kind = PositionSelection::Kind::All;
        else if (v->word == "last") o.positions.kind = PositionSelection::Kind::Last;
        else o.positions = {PositionSelection::Kind::List, {v->indices.begin(), v->indices.end()}, {}};
    }
    if (const toml::node* node = r.node("select")) {
        if (table.contains("positions")) r.fail(*node, "output.select and output.positions are two spellings of one key: give one");
        o.positions = {PositionSelection::Kind::Spec, {}, checked_spec(r, *node, "output.select")};
    }
    if (auto v = r.choice("logits", {"none", "last", "all", "selected"})) {
        o.logits = *v == "none"   ? LogitsDump::None
                   : *v == "last" ? LogitsDump::Last
                   : *v == "all"  ? LogitsDump::All
                                  : LogitsDump::Selected;
    }
    if (auto v = r.integer("logit_lens", 0, 1 << 20)) o.logit_lens = static_cast<std::uint32_t>(*v);
    if (auto v = r.boolean("overwrite")) o.overwrite = *v;
    if (auto v = r.choice("sae_output", {"dense", "sparse"})) o.sae_output = *v == "dense" ? SaeOutput::Dense : SaeOutput::Sparse;
    r.finish();
    return o;
}

// [attribute] (docs/attribution.md). Gradients are the reference route's: a [model] route
// of "fast" written in the file is refused, as `ember attribute --route fast` is.
AttributeSection parse_attribute(const toml::table& table, const toml::table* model, const std::string& file) {
    AttributeSection a;
    TableReader r(table, "attribute", file);
    const auto target = r.string("target");
    if (auto v = r.choice("metric", {"logprob", "logit-diff", "prob"})) a.metric = *v;
    a.contrast = r.string("contrast");
    a.corrupt = r.string("corrupt");
    if (const toml::node* node = r.node("corrupt_select")) a.corrupt_select = checked_spec(r, *node, "attribute.corrupt_select");
    if (auto v = r.choice("method", {"atp", "ig"})) a.method = *v;
    if (auto v = r.integer("steps", 1, 4096)) a.steps = static_cast<std::uint32_t>(*v);
    if (auto v = r.integer("verify_top", 0, 1000000)) a.verify_top = static_cast<std::uint32_t>(*v);
    r.finish();
    if (target) a.target = *target;
    if (a.metric == "logit-diff" && !a.contrast) r.fail_here("attribute.metric = \"logit-diff\" needs attribute.contrast");
    if (a.contrast && a.metric != "logit-diff") r.fail(*table.get("contrast"), "attribute.contrast goes with metric = \"logit-diff\"");
    if (model)
        if (const toml::node* route = model->get("route"); route && route->value_or(std::string_view{}) == "fast")
            throw Error(located(file, route->source(),
                                "model.route = \"fast\" is refused with [attribute]: gradients are defined on the "
                                "reference route (the one an attribution runs); leave model.route out or write \"reference\""));
    return a;
}

HooksSection parse_hooks(const toml::table& table, const std::string& file) {
    HooksSection h;
    TableReader r(table, "hooks", file);
    if (auto v = r.choice("failure", {"strict", "fail_open"}))
        h.failure = *v == "strict" ? FailurePolicy::Strict : FailurePolicy::FailOpen;
    if (auto v = r.integer("timeout_ms", 0, kMaxInt32)) h.timeout_ms = static_cast<std::uint32_t>(*v);
    if (auto v = r.integer("run_timeout_s", 0, kMaxInt32)) h.run_timeout_s = static_cast<std::uint32_t>(*v);
    if (auto v = r.boolean("defaults")) h.defaults = *v;
    r.finish();
    return h;
}

// An experiment's config is read back with Boost.JSON's parser (the run record, the inputs
// record, the worker's copy), which takes 32 levels of arrays and objects: a deeper one is
// refused here, where the file and line are known, not later with "too deep".
constexpr std::size_t kMaxExperimentConfigDepth = 32;

std::size_t json_depth(const boost::json::value& v) {
    std::size_t deepest = 0;
    if (v.is_array())
        for (const boost::json::value& item : v.get_array()) deepest = std::max(deepest, json_depth(item));
    else if (v.is_object())
        for (const auto& member : v.get_object()) deepest = std::max(deepest, json_depth(member.value()));
    else
        return 0;
    return deepest + 1;
}

// The [[experiment]] entries of `top` (the document's root table), in file order.
std::vector<ExperimentEntry> parse_experiments(TableReader& top, const std::string& file, const fs::path& base) {
    std::vector<ExperimentEntry> out;
    const toml::node* node = top.node("experiment");
    if (!node) return out;
    if (node->is_table()) top.fail(*node, "experiment must be written [[experiment]] (an array of tables)");
    if (!node->is_array()) top.fail(*node, "experiment must be written [[experiment]] (an array of tables)");
    for (const toml::node& item : *node->as_array()) {
        if (!item.is_table()) top.fail(item, "experiment must be written [[experiment]] (an array of tables)");
        const toml::table& table = *item.as_table();
        TableReader r(table, "experiment", file);
        ExperimentEntry e;
        auto plugin = r.path("plugin", base);
        const toml::table* config = r.table("config");
        r.finish();
        if (!plugin) r.fail_here("[[experiment]] needs plugin = \"path/to/libname.so\"");
        e.plugin = *plugin;
        if (config) {
            const boost::json::value settings = toml_to_json(*config, file);
            if (const std::size_t depth = json_depth(settings); depth > kMaxExperimentConfigDepth)
                throw Error(located(file, config->source(),
                                    fmt::format("[experiment.config] nests {} levels of tables and arrays, more than the "
                                                "{} an experiment's config may have",
                                                depth, kMaxExperimentConfigDepth)));
            e.config_json = canonical_json(settings);
        }
        e.base_dir = base;
        e.origin = fmt::format("{}:{}", file, table.source().begin.line);
        out.push_back(std::move(e));
    }
    return out;
}

// The [[sae]] entries of `top`, in file order.
std::vector<SaeEntry> parse_saes(TableReader& top, const std::string& file, const fs::path& base) {
    std::vector<SaeEntry> out;
    const toml::node* node = top.node("sae");
    if (!node) return out;
    if (!node->is_array()) top.fail(*node, "sae must be written [[sae]] (an array of tables)");
    for (const toml::node& item : *node->as_array()) {
        if (!item.is_table()) top.fail(item, "sae must be written [[sae]] (an array of tables)");
        TableReader r(*item.as_table(), "sae", file);
        SaeEntry e;
        auto path = r.path("path", base);
        e.site = r.string("site");
        if (auto v = r.boolean("splice")) e.splice = *v;
        r.finish();
        if (!path) r.fail_here("[[sae]] needs path = \"path/to/sae\"");
        e.path = *path;
        out.push_back(std::move(e));
    }
    return out;
}

fs::path absolute_normal(const fs::path& p) { return fs::absolute(p).lexically_normal(); }

}  // namespace

std::string_view logits_dump_name(LogitsDump dump) {
    switch (dump) {
        case LogitsDump::None: return "none";
        case LogitsDump::Last: return "last";
        case LogitsDump::All: return "all";
        case LogitsDump::Selected: return "selected";
    }
    return "none";
}

boost::json::object extraction_json(const OutputSection& o) {
    namespace json = boost::json;
    json::array stages;
    for (const auto& s : o.stages) stages.push_back(json::value(s));
    json::value layers = "all";
    if (o.layers) layers = json::value_from(*o.layers);
    json::value positions = o.positions.kind == PositionSelection::Kind::All    ? json::value("all")
                            : o.positions.kind == PositionSelection::Kind::Last ? json::value("last")
                            : o.positions.kind == PositionSelection::Kind::Spec ? json::value(o.positions.spec)
                                                                                : json::value_from(o.positions.list);
    json::object out{{"stages", std::move(stages)},
                     {"layers", std::move(layers)},
                     {"positions", std::move(positions)},
                     {"logits", logits_dump_name(o.logits)},
                     {"logit_lens", o.logit_lens}};
    if (o.sae_output == SaeOutput::Sparse) out["sae_output"] = "sparse";  // only then: other hashes stay
    return out;
}

std::string_view failure_policy_name(FailurePolicy policy) {
    return policy == FailurePolicy::Strict ? "strict" : "fail_open";
}

std::vector<ExperimentEntry> load_defaults_file(const fs::path& file) {
    const std::string display = file.string();
    const toml::table root = parse_toml_file(file);
    TableReader top(root, "", display);
    auto entries = parse_experiments(top, display, absolute_normal(file).parent_path());
    top.finish();
    for (auto& e : entries) e.origin = "defaults " + e.origin;
    return entries;
}

RunConfig load_run_config(const fs::path& file, const LoadOptions& options) {
    return run_config_from_toml(parse_toml_file(file), file, options);
}

toml::table parse_config_file(const fs::path& file) { return parse_toml_file(file); }

RunConfig run_config_from_toml(const toml::table& root, const fs::path& file, const LoadOptions& options) {
    const std::string display = file.string();
    RunConfig c;
    c.source = absolute_normal(file);
    const fs::path base = c.source.parent_path();

    TableReader top(root, "", display);
    const toml::table* model = top.table("model");
    const toml::table* prompt = top.table("prompt");
    const toml::table* generation = top.table("generation");
    const toml::table* tracing = top.table("tracing");
    const toml::table* output = top.table("output");
    const toml::table* hooks = top.table("hooks");
    const toml::table* dataset = top.table("dataset");
    const toml::table* attribute = top.table("attribute");
    std::vector<ExperimentEntry> own = parse_experiments(top, display, base);
    c.saes = parse_saes(top, display, base);
    top.finish();

    if (!model) missing_table(display, "missing [model] (model.path is required)");
    if (!prompt && !dataset) missing_table(display, "missing [prompt] (prompt.text, prompt.file or prompt.messages is required)");
    if (prompt && dataset) missing_table(display, "[prompt] and [dataset] cannot both be given: a run has one prompt or a dataset");
    c.model = parse_model(*model, display, base);
    if (prompt) c.prompt = parse_prompt(*prompt, display, base);
    if (dataset) c.dataset = parse_dataset(*dataset, display, base);
    if (generation) c.generation = parse_generation(*generation, display);
    if (tracing) c.tracing = parse_tracing(*tracing, display, base);
    if (output) c.output = parse_output(*output, display, base);
    if (hooks) c.hooks = parse_hooks(*hooks, display);
    if (attribute) {
        c.attribute = parse_attribute(*attribute, model, display);
        if (c.attribute->target.empty() && !dataset)
            missing_table(display, "[attribute] needs target = \"...\" (the continuation the metric scores)");
        if (!own.empty() || !c.saes.empty())
            missing_table(display, "[attribute] runs the gradient model alone: [[experiment]] and [[sae]] do not go with it");
        if (prompt && c.prompt.chat) missing_table(display, "[attribute] takes prompt.text or prompt.file, not messages");
        if (c.dataset.shard || c.dataset.shards > 1)
            missing_table(display, "[attribute] with [dataset] runs in one process: dataset.shard and dataset.shards do not go with it");
    }
    if (c.output.dir.empty()) c.output.dir = base / "runs" / c.source.stem();
    if (c.tracing.path.empty()) c.tracing.path = c.output.dir / "trace.jsonl";

    if (options.no_defaults) c.hooks.defaults = false;
    if (options.defaults_file && c.hooks.defaults) {
        c.experiments = load_defaults_file(*options.defaults_file);
        c.defaults_file = absolute_normal(*options.defaults_file);
    }
    for (auto& e : own) c.experiments.push_back(std::move(e));
    std::size_t n = 0;
    for (const auto& plugin : options.command_line_experiments) {
        ExperimentEntry e;
        e.plugin = absolute_normal(plugin);
        e.base_dir = fs::current_path();
        if (n < options.command_line_configs.size()) e.config_json = options.command_line_configs[n];
        e.origin = fmt::format("--experiment {}", ++n);
        c.experiments.push_back(std::move(e));
    }
    return c;
}

std::optional<fs::path> find_defaults_file() {
    if (const char* env = std::getenv("EMBER_DEFAULTS"); env && *env) {
        const fs::path p(env);
        std::error_code ec;
        if (!fs::is_regular_file(p, ec))
            throw Error(fmt::format("{}: no such defaults file (named by $EMBER_DEFAULTS)", p.string()));
        return p;
    }
    fs::path p;
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) p = fs::path(xdg) / "ember" / "defaults.toml";
    else if (const char* home = std::getenv("HOME"); home && *home) p = fs::path(home) / ".config" / "ember" / "defaults.toml";
    else return std::nullopt;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
    return std::nullopt;
}

namespace {

boost::json::object output_json(const OutputSection& o) {
    boost::json::object out = extraction_json(o);
    out["dir"] = o.dir.string();
    out["extract"] = o.extract;
    out["overwrite"] = o.overwrite;
    return out;
}

}  // namespace

// "defaults" appears only when false, so configs that never mention it keep their hash.
static boost::json::object hooks_json(const HooksSection& h) {
    boost::json::object o{
        {"failure", failure_policy_name(h.failure)}, {"timeout_ms", h.timeout_ms}, {"run_timeout_s", h.run_timeout_s}};
    if (!h.defaults) o["defaults"] = false;
    return o;
}

boost::json::object to_json(const RunConfig& c) {
    namespace json = boost::json;
    json::object prompt;
    if (c.prompt.text) prompt["text"] = *c.prompt.text;
    if (c.prompt.file) prompt["file"] = c.prompt.file->string();
    if (c.prompt.add_bos == AddBos::Auto) prompt["add_bos"] = "auto";
    else prompt["add_bos"] = c.prompt.add_bos == AddBos::Yes;
    if (c.prompt.chat) prompt["chat"] = *c.prompt.chat;  // only a chat run has these: other hashes stay
    if (c.prompt.chat_template) prompt["template"] = c.prompt.chat_template->string();
    if (c.prompt.chat_template_name) prompt["template_name"] = *c.prompt.chat_template_name;
    // Only a run that sets them has these keys, so other configs keep their hashes.
    if (c.prompt.ids) prompt["ids"] = json::value_from(*c.prompt.ids);
    if (c.prompt.special) prompt["special"] = true;
    if (c.prompt.target) prompt["target"] = *c.prompt.target;

    json::array experiments;
    for (const auto& e : c.experiments) {
        experiments.push_back(json::object{
            {"plugin", e.plugin.string()}, {"config", json::parse(e.config_json)}, {"base_dir", e.base_dir.string()}});
    }
    json::object out{
        {"model",
         {{"path", c.model.path.string()},
          {"arch", c.model.arch},
          {"route", c.model.route},
          {"kv_type", c.model.kv_type},
          {"threads", c.model.threads},
          {"ctx", c.model.ctx}}},
        {"prompt", std::move(prompt)},
        {"generation",
         {{"max_tokens", c.generation.max_tokens},
          {"temperature", c.generation.temperature},
          {"top_k", c.generation.top_k},
          {"top_p", c.generation.top_p},
          {"seed", c.generation.seed}}},
        {"tracing", {{"enabled", c.tracing.enabled}, {"path", c.tracing.path.string()}}},
        {"output", output_json(c.output)},
        {"hooks", hooks_json(c.hooks)},
        {"experiments", std::move(experiments)},
    };
    // Only a run with SAEs has the key, so other configs keep their hashes.
    if (!c.saes.empty()) {
        json::array saes;
        for (const SaeEntry& s : c.saes)
            saes.push_back({{"path", s.path.string()},
                            {"site", s.site ? json::value(*s.site) : json::value(nullptr)},
                            {"splice", s.splice}});
        out["saes"] = std::move(saes);
    }
    // Only an attribution run has the key, so other configs keep their hashes.
    if (const auto& a = c.attribute) {
        out["attribute"] = {{"target", a->target},
                            {"metric", a->metric},
                            {"contrast", a->contrast ? json::value(*a->contrast) : json::value(nullptr)},
                            {"corrupt", a->corrupt ? json::value(*a->corrupt) : json::value(nullptr)},
                            {"corrupt_select", a->corrupt_select ? json::value(*a->corrupt_select) : json::value(nullptr)},
                            {"method", a->method},
                            {"steps", a->steps},
                            {"verify_top", a->verify_top}};
    }
    // Only a dataset run has the key, so single-prompt configs keep their hashes.
    if (c.dataset.path) {
        out["dataset"] = {{"path", c.dataset.path->string()},
                          {"select", c.dataset.select},
                          {"batch_tokens", c.dataset.batch_tokens},
                          {"on_empty", c.dataset.skip_empty ? "skip" : "error"}};
        // Only when whole (the values are the same either way), so earlier runs keep their hashes.
        if (c.dataset.evaluate_whole) out["dataset"].as_object()["evaluate"] = "whole";
        // Only a shard has it (last, so a merge can take it off), so unsharded runs keep their hashes.
        if (c.dataset.shard)
            out["dataset"].as_object()["shard"] = {{"index", c.dataset.shard->index}, {"count", c.dataset.shard->count}};
    }
    return out;
}

// The settings that cannot change a result left out.
static boost::json::object hashed_part(boost::json::object config_json) {
    config_json["model"].as_object().erase("threads");
    config_json["output"].as_object().erase("overwrite");
    return config_json;
}

std::string canonical_json(const RunConfig& config) { return canonical_json(boost::json::value(hashed_part(to_json(config)))); }

std::string config_hash(const RunConfig& config) { return sha256_hex(canonical_json(config)); }

std::string config_hash(const boost::json::object& config_json) {
    return sha256_hex(canonical_json(boost::json::value(hashed_part(config_json))));
}

}  // namespace ember::config

#include "worker_protocol.hpp"

#include <fmt/format.h>

#include <bit>

#include "common/error.hpp"
#include "ember/utf8.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

std::string text(const json::value& v, std::string_view key) { return std::string(v.at(key).as_string()); }
template <class T>
T number(const json::value& v, std::string_view key) {
    return v.at(key).to_number<T>();
}

std::vector<std::uint32_t> u32_list(const json::value& v) {
    std::vector<std::uint32_t> out;
    for (const auto& x : v.as_array()) out.push_back(x.to_number<std::uint32_t>());
    return out;
}

// The config as run.json records it (config::to_json), plus what that leaves out.
json::object config_json(const config::RunConfig& c) {
    json::object out = config::to_json(c);
    out["source"] = c.source.string();
    json::array entries;
    for (const auto& e : c.experiments) entries.push_back({{"config_json", e.config_json}, {"origin", e.origin}});
    out["experiment_entries"] = std::move(entries);
    out["defaults_file"] = c.defaults_file ? json::value(c.defaults_file->string()) : json::value(nullptr);
    return out;
}

// The reverse of config_json; worker_input_from_json checks the result's hash.
config::RunConfig config_from_json(const json::value& v) {
    config::RunConfig c;
    c.source = text(v, "source");
    const json::value& m = v.at("model");
    c.model = {text(m, "path"),
               text(m, "arch"),
               text(m, "route"),
               text(m, "kv_type"),
               number<std::uint32_t>(m, "threads"),
               number<std::uint32_t>(m, "ctx")};
    const json::value& p = v.at("prompt");
    if (p.as_object().contains("text")) c.prompt.text = text(p, "text");
    if (p.as_object().contains("file")) c.prompt.file = fs::path(text(p, "file"));
    const json::value& bos = p.at("add_bos");
    c.prompt.add_bos = bos.is_string() ? config::AddBos::Auto : bos.as_bool() ? config::AddBos::Yes : config::AddBos::No;
    if (const auto* chat = p.as_object().if_contains("chat")) c.prompt.chat = chat->as_object();
    if (p.as_object().contains("template")) c.prompt.chat_template = fs::path(text(p, "template"));
    if (p.as_object().contains("template_name")) c.prompt.chat_template_name = text(p, "template_name");
    const json::value& g = v.at("generation");
    c.generation = {number<std::uint32_t>(g, "max_tokens"), number<double>(g, "temperature"),
                    number<std::uint32_t>(g, "top_k"), number<double>(g, "top_p"), number<std::uint64_t>(g, "seed")};
    const json::value& t = v.at("tracing");
    c.tracing = {t.at("enabled").as_bool(), text(t, "path")};
    const json::value& o = v.at("output");
    c.output.dir = text(o, "dir");
    c.output.extract = o.at("extract").as_bool();
    c.output.stages.clear();
    for (const auto& s : o.at("stages").as_array()) c.output.stages.emplace_back(s.as_string());
    if (o.at("layers").is_array()) c.output.layers = u32_list(o.at("layers"));
    const json::value& positions = o.at("positions");
    if (positions.is_array()) c.output.positions = {config::PositionSelection::Kind::List, u32_list(positions)};
    else if (positions.as_string() == "last") c.output.positions.kind = config::PositionSelection::Kind::Last;
    const std::string logits = text(o, "logits");
    c.output.logits = logits == "last" ? config::LogitsDump::Last
                      : logits == "all" ? config::LogitsDump::All
                                        : config::LogitsDump::None;
    c.output.logit_lens = number<std::uint32_t>(o, "logit_lens");
    c.output.overwrite = o.at("overwrite").as_bool();
    if (v.at("defaults_file").is_string()) c.defaults_file = fs::path(text(v, "defaults_file"));
    const json::value& h = v.at("hooks");
    c.hooks = {text(h, "failure") == "fail_open" ? config::FailurePolicy::FailOpen : config::FailurePolicy::Strict,
               number<std::uint32_t>(h, "timeout_ms"), number<std::uint32_t>(h, "run_timeout_s"),
               !h.as_object().contains("defaults")};  // recorded only when false
    const json::array& experiments = v.at("experiments").as_array();
    const json::array& entries = v.at("experiment_entries").as_array();
    for (std::size_t i = 0; i < experiments.size(); ++i) {
        c.experiments.push_back({text(experiments[i], "plugin"), text(entries.at(i), "config_json"),
                                 text(experiments[i], "base_dir"), text(entries.at(i), "origin")});
    }
    return c;
}

std::string from_hex(std::string_view hex) {
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        throw std::invalid_argument("a hex text holds a character that is not a lowercase hex digit");
    };
    if (hex.size() % 2 != 0) throw std::invalid_argument("a hex text has an odd length");
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
    return out;
}

// Floats travel as their bits: a logit may be infinite, which JSON cannot hold.
std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(const json::value& v) { return std::bit_cast<float>(v.to_number<std::uint32_t>()); }

}  // namespace

json::object worker_input_json(const WorkerInput& input) {
    return {{"config", config_json(input.config)},
            {"config_hash", input.config_hash},
            {"run_id", input.run_id},
            {"model_path", input.model_path},
            {"model_sha256", input.model_sha256},
            {"model_load_ms", input.model_load_ms},
            {"overwrite", input.overwrite},
            {"skip_if_current", input.skip_if_current}};
}

WorkerInput worker_input_from_json(const json::value& v) {
    try {
        WorkerInput input{config_from_json(v.at("config")), text(v, "config_hash"), text(v, "run_id"),
                          text(v, "model_path"), text(v, "model_sha256"), number<double>(v, "model_load_ms"),
                          v.at("overwrite").as_bool(), v.at("skip_if_current").as_bool()};
        if (config::config_hash(input.config) != input.config_hash)
            throw Error("the config the worker rebuilt does not hash as the supervisor's (a field it does not carry?)");
        return input;
    } catch (const std::out_of_range& e) {
        throw Error(fmt::format("the supervisor's message to the worker is malformed: {}", e.what()));
    } catch (const std::invalid_argument& e) {
        throw Error(fmt::format("the supervisor's message to the worker is malformed: {}", e.what()));
    } catch (const boost::system::system_error& e) {
        throw Error(fmt::format("the supervisor's message to the worker is malformed: {}", e.what()));
    }
}

json::object outcome_json(const RunOutcome& o) {
    json::array steps;
    for (const auto& s : o.result.steps) steps.push_back({s.token, bits(s.logit), bits(s.margin)});
    const runtime::GenerationTimings& t = o.result.timings;
    json::value trace = nullptr;
    if (o.trace) {
        trace = json::object{{"path", o.trace->path.string()},
                             {"operations", o.trace->operations},
                             {"evaluations", o.trace->evaluations},
                             {"traced_ns", o.trace->traced_ns},
                             {"fingerprint", o.trace->fingerprint}};
    }
    return {{"run_id", o.run_id},
            {"prompt_tokens", json::array(o.prompt_tokens.begin(), o.prompt_tokens.end())},
            {"tokens", json::array(o.result.tokens.begin(), o.result.tokens.end())},
            {"steps", std::move(steps)},
            {"stop_reason", static_cast<int>(o.result.stop_reason)},
            {"timings",
             {{"prefill_ms", t.prefill_ms},
              {"decode_ms", t.decode_ms},
              {"decode_evaluations", t.decode_evaluations},
              {"sampling_ms", t.sampling_ms}}},
            {"experiment_failures", json::array(o.experiment_failures.begin(), o.experiment_failures.end())},
            {"report", o.report.string()},
            {"threads", o.threads},
            {"route", o.route},
            {"variant", o.variant},
            {"trace", std::move(trace)},
            {"arrays", o.arrays},
            {"manifest", o.manifest.string()},
            {"config_hash", o.config_hash},
            {"lifecycle", lifecycle_message(o.lifecycle)}};
}

// The prompts travel as hex: a prompt file need not be UTF-8, which a JSON parser refuses.
json::object lifecycle_message(const Lifecycle& l) {
    return {{"skipped_by", l.skipped_by},
            {"rewritten_by", l.rewritten_by},
            {"original_prompt_hex", utf8::hex(l.original_prompt)},
            {"prompt_hex", utf8::hex(l.prompt)}};
}

Lifecycle lifecycle_from_message(const json::value& v) {
    return {text(v, "skipped_by"), text(v, "rewritten_by"), from_hex(text(v, "original_prompt_hex")),
            from_hex(text(v, "prompt_hex"))};
}

RunOutcome outcome_from_json(const json::value& v) {
    RunOutcome o;
    o.run_id = text(v, "run_id");
    for (const auto& x : v.at("prompt_tokens").as_array()) o.prompt_tokens.push_back(x.to_number<std::int32_t>());
    for (const auto& x : v.at("tokens").as_array()) o.result.tokens.push_back(x.to_number<std::int32_t>());
    for (const auto& s : v.at("steps").as_array()) {
        const auto& a = s.as_array();
        o.result.steps.push_back({a.at(0).to_number<std::int32_t>(), from_bits(a.at(1)), from_bits(a.at(2))});
    }
    o.result.stop_reason = static_cast<runtime::StopReason>(number<int>(v, "stop_reason"));
    const json::value& t = v.at("timings");
    o.result.timings = {number<double>(t, "prefill_ms"), number<double>(t, "decode_ms"),
                        number<std::size_t>(t, "decode_evaluations"), number<double>(t, "sampling_ms")};
    for (const auto& f : v.at("experiment_failures").as_array()) o.experiment_failures.emplace_back(f.as_string());
    o.report = text(v, "report");
    o.threads = number<std::size_t>(v, "threads");
    o.route = text(v, "route");
    o.variant = text(v, "variant");
    if (const json::value& trace = v.at("trace"); !trace.is_null()) {
        o.trace = trace::JournalSummary{text(trace, "path"), number<std::size_t>(trace, "operations"),
                                        number<std::size_t>(trace, "evaluations"),
                                        number<std::uint64_t>(trace, "traced_ns"), text(trace, "fingerprint")};
    }
    o.arrays = number<std::size_t>(v, "arrays");
    o.manifest = text(v, "manifest");
    o.config_hash = text(v, "config_hash");
    o.lifecycle = lifecycle_from_message(v.at("lifecycle"));
    return o;
}

}  // namespace ember::app

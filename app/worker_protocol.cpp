#include "worker_protocol.hpp"

#include <fmt/format.h>

#include <boost/json.hpp>

#include <bit>
#include <cstring>
#include <random>

#include "common/error.hpp"
#include "record/strict_json.hpp"
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
    out["dataset_shards"] = c.dataset.shards;  // how a sweep splits it: not in the record
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
    if (const auto* ids = p.as_object().if_contains("ids")) {
        c.prompt.ids.emplace();
        for (const auto& id : ids->as_array()) c.prompt.ids->push_back(id.to_number<std::int32_t>());
    }
    if (const auto* special = p.as_object().if_contains("special")) c.prompt.special = special->as_bool();
    if (p.as_object().contains("target")) c.prompt.target = text(p, "target");
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
    if (o.as_object().contains("sae_output"))  // written only when sparse (config::to_json)
        c.output.sae_output = text(o, "sae_output") == "sparse" ? config::SaeOutput::Sparse : config::SaeOutput::Dense;
    if (const json::value* d = v.as_object().if_contains("dataset")) {
        c.dataset.path = fs::path(text(*d, "path"));
        c.dataset.select = text(*d, "select");
        c.dataset.batch_tokens = number<std::uint32_t>(*d, "batch_tokens");
        c.dataset.skip_empty = text(*d, "on_empty") == "skip";
        c.dataset.evaluate_whole = d->as_object().contains("evaluate");
        if (const json::value* shard = d->as_object().if_contains("shard"))
            c.dataset.shard = config::Shard{number<std::size_t>(*shard, "index"), number<std::size_t>(*shard, "count")};
    }
    c.dataset.shards = number<std::uint32_t>(v, "dataset_shards");
    if (v.at("defaults_file").is_string()) c.defaults_file = fs::path(text(v, "defaults_file"));
    const json::value& h = v.at("hooks");
    c.hooks = {text(h, "failure") == "fail_open" ? config::FailurePolicy::FailOpen : config::FailurePolicy::Strict,
               number<std::uint32_t>(h, "timeout_ms"), number<std::uint32_t>(h, "run_timeout_s"),
               !h.as_object().contains("defaults")};  // recorded only when false
    if (const json::value* saes = v.as_object().if_contains("saes"))
        for (const json::value& s : saes->as_array()) {
            config::SaeEntry e{text(s, "path"), std::nullopt, s.at("splice").as_bool()};
            if (s.at("site").is_string()) e.site = text(s, "site");
            c.saes.push_back(std::move(e));
        }
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
    return {{"job", input.job == WorkerJob::Dataset ? "dataset" : "generation"},
            {"config", config_json(input.config)},
            {"config_hash", input.config_hash},
            {"run_id", input.run_id},
            {"model_path", input.model_path},
            {"model_sha256", input.model_sha256},
            {"model_load_ms", input.model_load_ms},
            {"overwrite", input.overwrite},
            {"skip_if_current", input.skip_if_current},
            {"progress", input.progress},
            {"nonce", input.nonce}};
}

WorkerInput worker_input_from_json(const json::value& v) {
    try {
        WorkerInput input{text(v, "job") == "dataset" ? WorkerJob::Dataset : WorkerJob::Generation,
                          config_from_json(v.at("config")),
                          text(v, "config_hash"),
                          text(v, "run_id"),
                          text(v, "model_path"),
                          text(v, "model_sha256"),
                          number<double>(v, "model_load_ms"),
                          v.at("overwrite").as_bool(),
                          v.at("skip_if_current").as_bool(),
                          v.at("progress").as_bool(),
                          text(v, "nonce")};
        if (config::config_hash(input.config) != input.config_hash)
            throw Error("the config the worker rebuilt does not hash as the supervisor's (a field it does not carry?)");
        return input;
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        throw Error(fmt::format("the supervisor's message to the worker is malformed: {}", e.what()));
    }
}

std::string make_nonce() {
    std::random_device random;
    return fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
}

std::string encode_frame(std::string_view nonce, std::string_view kind, const json::value& body) {
    const std::string payload = json::serialize(json::object{{"nonce", nonce}, {"kind", kind}, {"body", body}});
    const auto n = static_cast<std::uint32_t>(payload.size());
    std::string frame(4, '\0');
    for (int i = 0; i < 4; ++i) frame[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    return frame + payload;
}

std::optional<std::string> FrameReader::next() {
    if (pending_.size() < 4) return std::nullopt;
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n |= std::uint32_t{static_cast<unsigned char>(pending_[i])} << (8 * i);
    if (n == 0 || n > kMaxFrameBytes)
        throw ProtocolError(fmt::format("a frame declares {} bytes (1 to {} allowed)", n, kMaxFrameBytes));
    if (pending_.size() < 4 + std::size_t{n}) return std::nullopt;
    std::string payload = pending_.substr(4, n);
    pending_.erase(0, 4 + std::size_t{n});
    return payload;
}

namespace {

// Every message whose body is {"message": TEXT}.
bool is_message_kind(std::string_view kind) {
    return kind == "failed" || kind == "refused" || kind == "in_use" || kind == "not_needed";
}

// A few bytes of what was sent, printable, for the error.
std::string excerpt(std::string_view bytes) {
    std::string out;
    for (char c : bytes.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    return bytes.size() > 40 ? out + "..." : out;
}

}  // namespace

WorkerMessage parse_message(std::string_view payload, std::string_view nonce, std::uint64_t vocab_size) {
    boost::system::error_code ec;
    json::value v = json::parse(payload, ec);
    if (ec || !v.is_object()) throw ProtocolError(fmt::format("a frame is not a JSON object: '{}'", excerpt(payload)));
    const json::object& o = v.as_object();
    const json::value* their_nonce = o.if_contains("nonce");
    if (!their_nonce || !their_nonce->is_string() || their_nonce->as_string() != nonce)
        throw ProtocolError(fmt::format("a frame does not carry this worker's nonce: '{}'", excerpt(payload)));
    const json::value* kind = o.if_contains("kind");
    const json::value* body = o.if_contains("body");
    if (!kind || !kind->is_string() || !body) throw ProtocolError("a frame has no kind or no body");
    WorkerMessage m{std::string(kind->as_string()), *body};
    if (m.kind == "token") {
        const json::value* id = body->is_object() ? body->as_object().if_contains("id") : nullptr;
        if (!id || !id->is_int64() || id->as_int64() < 0 || static_cast<std::uint64_t>(id->as_int64()) >= vocab_size)
            throw ProtocolError(fmt::format("a token frame's id is not a token of the vocabulary ({} tokens): '{}'",
                                            vocab_size, excerpt(payload)));
    } else if (is_message_kind(m.kind)) {
        const json::value* message = body->is_object() ? body->as_object().if_contains("message") : nullptr;
        if (!message || !message->is_string()) throw ProtocolError(fmt::format("a {} frame has no message", m.kind));
    } else if (m.kind != "lifecycle" && m.kind != "done") {
        throw ProtocolError(fmt::format("a frame of unknown kind '{}'", excerpt(m.kind)));
    } else if (!body->is_object()) {
        throw ProtocolError(fmt::format("a {} frame's body is not an object", m.kind));
    }
    return m;
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
            {"stop_reason", runtime::stop_reason_name(o.result.stop_reason)},
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
            {"lifecycle", lifecycle_message(o.lifecycle)},
            // As strict JSON text: a score may be infinite (a hostile model's logits), which JSON cannot hold.
            {"target", o.target ? json::value(strict_json(*o.target)) : json::value(nullptr)},
            {"effect", o.effect ? json::value(strict_json(*o.effect)) : json::value(nullptr)}};
}

// The prompts travel as hex: a prompt file need not be UTF-8, which a JSON parser refuses.
json::object lifecycle_message(const Lifecycle& l) {
    return {{"skipped_by", l.skipped_by},
            {"rewritten_by", l.rewritten_by},
            {"original_prompt_hex", utf8::hex(l.original_prompt)},
            {"prompt_hex", utf8::hex(l.prompt)}};
}

namespace {

// Reads a message body with `read`, every shape error a ProtocolError naming `what`.
template <class Read>
auto checked(std::string_view what, Read&& read) -> decltype(read()) {
    try {
        return read();
    } catch (const std::exception& e) {
        throw ProtocolError(fmt::format("the worker's {} message is malformed: {}", what, e.what()));
    }
}

// A name of the one stop-reason list (hooks/stop_reason.hpp) that ends a generation; any
// other is refused, never read as max_tokens.
runtime::StopReason stop_reason_from_name(std::string_view name) {
    const std::optional<runtime::StopReason> r = hooks::stop_reason_from_name(name);
    if (!r || *r == runtime::StopReason::Error || *r == runtime::StopReason::ContextFull)
        throw std::invalid_argument(fmt::format("unknown stop reason '{}'", name));
    return *r;
}

}  // namespace

Lifecycle lifecycle_from_message(const json::value& v) {
    return checked("lifecycle", [&] {
        return Lifecycle{text(v, "skipped_by"), text(v, "rewritten_by"), from_hex(text(v, "original_prompt_hex")),
                         from_hex(text(v, "prompt_hex"))};
    });
}

RunOutcome outcome_from_json(const json::value& v) {
    return checked("done", [&] {
        RunOutcome o;
        o.run_id = text(v, "run_id");
        for (const auto& x : v.at("prompt_tokens").as_array()) o.prompt_tokens.push_back(x.to_number<std::int32_t>());
        for (const auto& x : v.at("tokens").as_array()) o.result.tokens.push_back(x.to_number<std::int32_t>());
        for (const auto& s : v.at("steps").as_array()) {
            const auto& a = s.as_array();
            o.result.steps.push_back({a.at(0).to_number<std::int32_t>(), from_bits(a.at(1)), from_bits(a.at(2))});
        }
        o.result.stop_reason = stop_reason_from_name(text(v, "stop_reason"));
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
        if (const json::value& target = v.at("target"); !target.is_null()) o.target = json::parse(text(v, "target")).as_object();
        if (const json::value& effect = v.at("effect"); !effect.is_null()) o.effect = json::parse(text(v, "effect")).as_object();
        return o;
    });
}

json::object dataset_result_json(const extract::DatasetResult& r) {
    return {{"dir", r.dir.string()},
            {"samples", r.samples},
            {"skipped", r.skipped},
            {"rows", r.rows},
            {"tokens", r.tokens},
            {"tokens_this_run", r.tokens_this_run},
            {"evaluated", r.evaluated},
            {"evaluated_this_run", r.evaluated_this_run},
            {"arrays", r.arrays},
            {"batches", r.batches},
            {"resumed_samples", r.resumed_samples},
            {"seconds", r.seconds}};
}

extract::DatasetResult dataset_result_from_json(const json::value& v) {
    return checked("done", [&] {
        extract::DatasetResult r;
        r.dir = text(v, "dir");
        r.samples = number<std::size_t>(v, "samples");
        r.skipped = number<std::size_t>(v, "skipped");
        r.rows = number<std::size_t>(v, "rows");
        r.tokens = number<std::size_t>(v, "tokens");
        r.tokens_this_run = number<std::size_t>(v, "tokens_this_run");
        r.evaluated = number<std::size_t>(v, "evaluated");
        r.evaluated_this_run = number<std::size_t>(v, "evaluated_this_run");
        r.arrays = number<std::size_t>(v, "arrays");
        r.batches = number<std::size_t>(v, "batches");
        r.resumed_samples = number<std::size_t>(v, "resumed_samples");
        r.seconds = number<double>(v, "seconds");
        return r;
    });
}

}  // namespace ember::app

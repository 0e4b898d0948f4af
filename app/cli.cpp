#include "cli.hpp"

#include "chat/chat_prompt.hpp"

#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <algorithm>
#include <climits>

#include "common/error.hpp"
#include "config/command_line_config.hpp"
#include "common/input_file.hpp"
#include "record/json_pretty.hpp"
#include "kernels/kv_rows.hpp"
#include "models/family.hpp"
#include "runtime/session.hpp"

namespace ember::app {

bool parse_options(const std::string& command, const std::vector<std::string>& args,
                   const po::options_description& options, const po::positional_options_description& positional,
                   po::variables_map& vm) {
    po::options_description all(options);
    all.add_options()("help,h", "show this help");
    try {
        po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
        if (vm.count("help")) {
            std::cout << "usage: ember " << command << " [options]\n" << all << "\n";
            return false;
        }
        po::notify(vm);
    } catch (const po::error& e) {
        throw UsageError(fmt::format("ember {}: {}", command, e.what()));
    }
    return true;
}

std::optional<models::Family> parse_arch(const std::string& arch) {
    if (arch == "auto") return std::nullopt;
    if (auto family = models::family_from_name(arch)) return family;
    throw UsageError(fmt::format("--arch '{}' is not one of auto, {}", arch, models::family_names(", ")));
}

std::string arch_help() { return fmt::format("expected architecture: auto|{}", models::family_names("|")); }

po::options_description model_options() {
    const config::ModelSection defaults;
    po::options_description options("model options");
    options.add_options()
        ("model", po::value<std::string>(), "the GGUF model file")
        ("route", po::value<std::string>()->default_value(defaults.route),
         has_fast_route() ? "kernels: fast|reference" : "kernels: reference (this build has no fast route)")
        ("threads", po::value<long long>()->default_value(defaults.threads), "threads (0: every hardware thread)")
        ("ctx", po::value<long long>()->default_value(defaults.ctx),
         "context length in tokens, the KV cache's size (0: min(4096, the training context))")
        ("kv-type", po::value<std::string>()->default_value(defaults.kv_type), "KV cache element type: f32|f16")
        ("arch", po::value<std::string>()->default_value(defaults.arch), arch_help().c_str());
    return options;
}

void apply_model_options(const po::variables_map& vm, config::ModelSection& model, bool only_given) {
    const auto given = [&](const char* name) { return vm.count(name) && !(only_given && vm[name].defaulted()); };
    if (given("model")) model.path = absolute_path(vm["model"].as<std::string>());
    if (given("route")) {
        const std::string& name = vm["route"].as<std::string>();
        const auto route = runtime::route_from_name(name);
        if (!route) throw UsageError(fmt::format("--route '{}' is not one of reference, fast", name));
        if (!runtime::has_route(*route)) {
            throw UsageError(fmt::format("--route {}: this build of ember has no {} route (configured with "
                                         "-DEMBER_FAST=OFF); use --route reference", name, name));
        }
        model.route = name;
    }
    if (given("threads")) {
        const long long threads = vm["threads"].as<long long>();
        if (threads < 0 || threads > config::kMaxThreads) {
            throw UsageError(fmt::format("--threads {} must be in [0, {}] (0: every hardware thread)", threads, config::kMaxThreads));
        }
        model.threads = static_cast<std::uint32_t>(threads);
    }
    if (given("ctx")) {
        const long long ctx = vm["ctx"].as<long long>();
        if (ctx < 0 || ctx > INT32_MAX) throw UsageError("--ctx must be >= 0 (0: min(4096, the training context))");
        model.ctx = static_cast<std::uint32_t>(ctx);
    }
    if (given("kv-type")) {
        const std::string& name = vm["kv-type"].as<std::string>();
        if (!kernels::kv_type_from_name(name)) throw UsageError(fmt::format("--kv-type '{}' is not one of f32, f16", name));
        model.kv_type = name;
    }
    if (given("arch")) {
        parse_arch(vm["arch"].as<std::string>());
        model.arch = vm["arch"].as<std::string>();
    }
}

po::options_description prompt_options(const std::string& ids_option) {
    po::options_description options("prompt options");
    options.add_options()
        ("prompt", po::value<std::string>(), "the prompt text")
        ("file", po::value<std::string>(), "a file whose bytes are the prompt")
        (ids_option.c_str(), po::value<std::string>(), "the prompt as token ids, comma-separated (1,2,3), checked against "
                                                       "the vocabulary; no BOS is added")
        ("no-bos", po::bool_switch(), "do not add the BOS token even if the model asks for it")
        ("special", po::bool_switch(), "parse special-token texts (<|im_start|>, <s>...) in the prompt text");
    return options;
}

std::vector<std::int32_t> parse_ids(const std::string& text, const std::string& option) {
    std::vector<std::int32_t> ids;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, comma - start);
        long long id = -1;
        std::size_t used = 0;
        try {
            id = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || item.front() == '+' || item.front() == ' ' || id < 0 || id > INT32_MAX)
            throw UsageError(fmt::format("--{} {}: '{}' (item {}) is not a token id (an integer >= 0)", option, text, item,
                                         ids.size()));
        ids.push_back(static_cast<std::int32_t>(id));
        start = comma + 1;
    }
    return ids;
}

void apply_prompt_options(const po::variables_map& vm, config::PromptSection& prompt, bool required,
                          const std::string& ids_option) {
    const std::size_t given = vm.count("prompt") + vm.count("file") + vm.count(ids_option);
    if (given > 1 || (required && given == 0))
        throw UsageError(fmt::format("give exactly one of --prompt TEXT, --file PATH or --{} 1,2,3", ids_option));
    if (given == 1) {
        const config::PromptSection before = prompt;
        prompt = {};
        prompt.target = before.target;
        prompt.special = before.special;
        prompt.add_bos = before.add_bos;
    }
    if (vm.count("prompt")) prompt.text = vm["prompt"].as<std::string>();
    if (vm.count("file")) prompt.file = absolute_path(vm["file"].as<std::string>());
    const bool no_bos = vm.count("no-bos") && vm["no-bos"].as<bool>();
    if (vm.count(ids_option)) {
        if (no_bos) throw UsageError(fmt::format("--no-bos does not apply to --{}: the ids are the sequence as given", ids_option));
        prompt.ids = parse_ids(vm[ids_option].as<std::string>(), ids_option);
        prompt.add_bos = config::AddBos::Auto;
    }
    if (no_bos) prompt.add_bos = config::AddBos::No;
    if (vm.count("special") && vm["special"].as<bool>()) prompt.special = true;
    if (vm.count("target")) prompt.target = vm["target"].as<std::string>();
}

po::options_description target_options() {
    po::options_description options("target options");
    options.add_options()
        ("target", po::value<std::string>(), "score this continuation of the prompt by teacher forcing: its summed "
                                             "log-probability and per-token log-probabilities (docs/extraction.md)");
    return options;
}

std::string read_prompt(const po::variables_map& vm) {
    const bool has_text = vm.count("prompt") > 0;
    const bool has_file = vm.count("file") > 0;
    if (has_text == has_file) throw UsageError("give exactly one of --prompt TEXT or --file PATH");
    if (has_text) return vm["prompt"].as<std::string>();
    return read_input_file(vm["file"].as<std::string>(), "prompt file");
}

po::options_description chat_options() {
    po::options_description options("chat options");
    options.add_options()
        ("chat", po::value<std::string>(), "a conversation (JSON: messages, add_generation_prompt, tools...) rendered "
                                           "with the model's chat template instead of --prompt/--file")
        ("template", po::value<std::string>(), "with --chat: this Jinja template instead of the model's")
        ("template-name", po::value<std::string>(), "with --chat: the model's tokenizer.chat_template.NAME");
    return options;
}

bool chat_requested(const po::variables_map& vm) {
    const bool chat = vm.count("chat") > 0;
    if (chat && (vm.count("prompt") || vm.count("file"))) throw UsageError("--chat replaces --prompt and --file: give one");
    if (!chat && (vm.count("template") || vm.count("template-name")))
        throw UsageError("--template and --template-name go with --chat VARS.json");
    if (vm.count("template") && vm.count("template-name")) throw UsageError("give --template or --template-name, not both");
    if (chat && vm.count("no-bos") && vm["no-bos"].as<bool>())
        throw UsageError("--no-bos does not apply to --chat: the template decides (docs/chat.md)");
    return chat;
}

void apply_chat_options(const po::variables_map& vm, config::PromptSection& prompt) {
    const std::optional<std::string> target = prompt.target;  // --target continues the rendered conversation
    prompt = {};
    prompt.target = target;
    prompt.chat = chat::read_vars_file(vm["chat"].as<std::string>());
    if (vm.count("template")) prompt.chat_template = absolute_path(vm["template"].as<std::string>());
    if (vm.count("template-name")) prompt.chat_template_name = vm["template-name"].as<std::string>();
}

po::options_description experiment_config_options() {
    po::options_description options("experiment config");
    options.add_options()
        ("experiment-config", po::value<std::vector<std::string>>()->composing(),
         "KEY=VALUE (VALUE typed as TOML types it; dotted keys; else a string) or FILE.toml: the config of the "
         "--experiment before it (repeatable)");
    return options;
}

std::vector<std::string> experiment_configs(const std::vector<std::string>& args, const po::variables_map& vm) {
    // program_options keeps each option's values apart: their order against each other is the arguments'.
    std::vector<std::vector<std::string>> items;
    std::size_t seen = 0;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        const bool experiment = a == "--experiment" || a.starts_with("--experiment=");
        const bool config = a == "--experiment-config" || a.starts_with("--experiment-config=");
        if (!experiment && !config) continue;
        const bool inline_value = a.find('=') != std::string::npos;
        const std::string value = inline_value ? a.substr(a.find('=') + 1) : (i + 1 < args.size() ? args[i + 1] : "");
        if (!inline_value) ++i;
        if (experiment) {
            items.emplace_back();
            continue;
        }
        if (items.empty())
            throw UsageError(fmt::format("--experiment-config {} comes before any --experiment: give it after the "
                                         "--experiment PLUGIN.so it configures", value));
        items.back().push_back(value);
        ++seen;
    }
    const std::size_t given = vm.count("experiment-config") ? vm["experiment-config"].as<std::vector<std::string>>().size() : 0;
    const std::size_t experiments = vm.count("experiment") ? vm["experiment"].as<std::vector<std::string>>().size() : 0;
    if (seen != given || items.size() != experiments)
        throw UsageError("spell out --experiment and --experiment-config in full (their order says which config is whose)");
    std::vector<std::string> out;
    for (const auto& list : items) out.push_back(config::experiment_config_from_items(list));
    return out;
}

std::string read_file(const std::filesystem::path& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(fmt::format("{}: cannot open {}", path.string(), what));
    std::string bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
    if (in.bad()) throw Error(fmt::format("{}: cannot read {}", path.string(), what));
    return bytes;
}


void print_json(const boost::json::value& value) { std::cout << pretty_json(value) << "\n"; }

std::filesystem::path absolute_path(const std::string& path) { return std::filesystem::absolute(path).lexically_normal(); }

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ember::app

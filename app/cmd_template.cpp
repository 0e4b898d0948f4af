// ember template (--template FILE.jinja | --model MODEL [--name NAME]) --vars VARS.json [--json]
// Renders a chat template with the variables of VARS.json and prints exactly the rendered
// text (no newline added). With --model the template is the GGUF's
// tokenizer.chat_template (tokenizer.chat_template.NAME with --name) and bos_token /
// eos_token are the vocabulary's unless VARS sets them. --json prints the provenance
// record instead: the template's source and SHA-256, the variables, the text, and the
// byte ranges of every message's text in it (docs/chat.md).
#include <fmt/format.h>

#include <optional>

#include "chat/chat_prompt.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "record/strict_json.hpp"
#include "gguf/gguf_file.hpp"
#include "pieces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {

int run_template(const std::vector<std::string>& args) {
    po::options_description options("template options");
    options.add_options()
        ("template", po::value<std::string>(), "a Jinja chat template file")
        ("model", po::value<std::string>(), "a GGUF model: its tokenizer.chat_template and BOS/EOS texts")
        ("name", po::value<std::string>(), "with --model: the variant tokenizer.chat_template.NAME")
        ("vars", po::value<std::string>(), "the template variables (JSON object: messages, add_generation_prompt, tools...)")
        ("json", po::bool_switch(), "print the provenance record and message ranges as JSON instead of the text");
    po::positional_options_description positional;
    po::variables_map vm;
    if (!parse_options("template", args, options, positional, vm)) return kExitOk;
    if (!vm.count("vars")) throw UsageError("ember template: give --vars VARS.json");
    if (!vm.count("template") && !vm.count("model")) throw UsageError("ember template: give --template FILE or --model MODEL");
    if (vm.count("name") && (!vm.count("model") || vm.count("template")))
        throw UsageError("ember template: --name NAME picks a template of --model, without --template");

    auto vars = chat::read_vars_file(vm["vars"].as<std::string>());
    std::optional<gguf::File> file;
    std::optional<tokenizer::Tokenizer> tok;
    const std::string model_path = vm.count("model") ? vm["model"].as<std::string>() : std::string();
    if (vm.count("model")) {
        file.emplace(gguf::File::open(model_path));
        tok.emplace(tokenizer::Tokenizer::from_gguf(*file));
    }
    chat::TemplateChoice choice;
    if (vm.count("template")) choice.file = vm["template"].as<std::string>();
    if (vm.count("name")) choice.name = vm["name"].as<std::string>();
    const auto loaded = chat::load_template(choice, file ? &*file : nullptr, model_path);
    const chat::ChatPrompt prompt = chat::render_prompt(loaded, std::move(vars), tok ? &*tok : nullptr);

    fmt::memory_buffer out;
    if (!vm["json"].as<bool>()) {
        out.append(prompt.text.data(), prompt.text.data() + prompt.text.size());
        write_stdout_or_throw(out);
        return kExitOk;
    }
    boost::json::object record = chat::prompt_record(prompt);
    record.erase("bos");  // decided when a model's tokenizer reads the text (tokenize, generate)
    boost::json::array ranges;
    for (const auto& o : prompt.origins)
        ranges.push_back({{"message", o.message}, {"role", prompt.roles.at(static_cast<std::size_t>(o.message))},
                          {"start", o.begin}, {"end", o.end}});
    record["message_ranges"] = std::move(ranges);
    const std::string text = strict_json(record) + "\n";
    out.append(text.data(), text.data() + text.size());
    write_stdout_or_throw(out);
    return kExitOk;
}

}  // namespace ember::app

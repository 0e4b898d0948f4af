// ember attribute --model MODEL (--prompt TEXT | --file PATH | --ids 1,2,3) --target TEXT --out DIR
//                 [--metric logprob|logit-diff|prob] [--contrast TEXT]
//                 [--stages S,...[,sae_features --sae DIR]] [--layers all|N,M] [--positions all|last|N,M | --select SPEC]
//                 [(--corrupt TEXT | --corrupt-ids 1,2,3) [--corrupt-select SPEC] [--method atp|ig [--steps N]] [--verify-top K]] [--no-bos] [--overwrite] [--json] [--threads N]
// One forward and one backward pass on the reference route: per chosen stage, layer and
// prompt position, d(metric)/d(activation) and the activation, as .npy files in a run
// directory with a sealed manifest (docs/attribution.md). Gradients are defined on the
// reference route only: --route fast is refused by name.
#include <fmt/format.h>

#include <filesystem>

#include "attribution/attribution.hpp"
#include "cli.hpp"
#include "commands.hpp"
#include "common/error.hpp"
#include "extract/extraction.hpp"
#include "extract/resolved_selection.hpp"
#include "features/sae_loader.hpp"
#include "runtime/threads.hpp"

namespace ember::app {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_commas(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1)
        out.push_back(text.substr(start, comma - start));
    out.push_back(text.substr(start));
    return out;
}

attribution::AttributeRequest request_from_options(const po::variables_map& vm, bool& wants_sae_features) {
    if (!vm.count("model")) throw UsageError("ember attribute: give --model MODEL.gguf");
    if (!vm.count("out")) throw UsageError("ember attribute: give --out DIR");
    if (!vm.count("target")) throw UsageError("ember attribute: give --target TEXT (the continuation the metric scores)");
    attribution::AttributeRequest r;
    if (vm.count("ids")) {
        // The ids are the sequence (no BOS added); the target is tokenized after their text.
        if (vm.count("prompt") || vm.count("file"))
            throw UsageError("ember attribute: give exactly one of --prompt TEXT, --file PATH or --ids 1,2,3");
        if (vm["no-bos"].as<bool>()) throw UsageError("--no-bos does not apply to --ids: the ids are the sequence as given");
        r.ids = parse_ids(vm["ids"].as<std::string>(), "ids");
    } else {
        r.prompt = read_prompt(vm);
    }
    r.special = vm["special"].as<bool>();
    if (vm["no-bos"].as<bool>()) r.add_bos = config::AddBos::No;
    const std::string metric = vm["metric"].as<std::string>();
    const auto kind = attribution::metric_from_name(metric);
    if (!kind) throw UsageError(fmt::format("--metric '{}' is not one of logprob, logit-diff, prob", metric));
    r.metric = *kind;
    r.target = vm["target"].as<std::string>();
    if (vm.count("contrast")) r.contrast = vm["contrast"].as<std::string>();
    if (vm.count("corrupt") && vm.count("corrupt-ids")) throw UsageError("give --corrupt TEXT or --corrupt-ids 1,2,3, not both");
    if (vm.count("corrupt")) r.corrupt = vm["corrupt"].as<std::string>();
    if (vm.count("corrupt-ids")) r.corrupt_ids = parse_ids(vm["corrupt-ids"].as<std::string>(), "corrupt-ids");
    if (vm.count("corrupt-select")) {
        if (!r.has_corrupt()) throw UsageError("--corrupt-select SPEC goes with --corrupt TEXT");
        r.corrupt_select = extract::parse_spec(vm["corrupt-select"].as<std::string>(), "--corrupt-select");
    }
    const long long top = vm["verify-top"].as<long long>();
    if (top < 0 || top > 1000000) throw UsageError("--verify-top K must be in [0, 1000000]");
    if (top > 0 && !r.has_corrupt()) throw UsageError("--verify-top K goes with --corrupt TEXT");
    r.verify_top = static_cast<std::size_t>(top);
    const std::string method = vm["method"].as<std::string>();
    if (method != "atp" && method != "ig") throw UsageError(fmt::format("--method '{}' is not one of atp, ig", method));
    if (method == "ig" && !r.has_corrupt()) throw UsageError("--method ig integrates from the clean to the --corrupt run: give --corrupt TEXT");
    r.integrated_gradients = method == "ig";
    const long long steps = vm["steps"].as<long long>();
    if (steps < 1 || steps > 4096) throw UsageError("--steps N must be in [1, 4096]");
    r.ig_steps = static_cast<std::size_t>(steps);

    r.output.dir = fs::absolute(vm["out"].as<std::string>()).lexically_normal();
    r.output.overwrite = vm["overwrite"].as<bool>();
    // sae_features is the SAE's stage (--sae), not one of the model's: taken out here.
    std::string stages;
    for (const std::string& name : split_commas(vm["stages"].as<std::string>())) {
        if (name == "sae_features") wants_sae_features = true;
        else stages += (stages.empty() ? "" : ",") + name;
    }
    if (wants_sae_features != (vm.count("sae") > 0))
        throw UsageError(wants_sae_features ? "--stages sae_features needs --sae DIR (the SAE whose features they are)"
                                            : "--sae DIR goes with --stages ...,sae_features (the gradient at its features)");
    if (stages.empty()) r.output.stages.clear();
    else extract::parse_stages(stages, r.output);
    extract::parse_layers(vm["layers"].as<std::string>(), r.output);
    if (vm.count("select") && !vm["positions"].defaulted())
        throw UsageError("ember attribute: --select and --positions are two spellings of one request: give one");
    if (vm.count("select")) extract::parse_select(vm["select"].as<std::string>(), r.output);
    else extract::parse_positions(vm["positions"].as<std::string>(), r.output);

    boost::json::object record;
    for (const char* option : {"metric", "target", "contrast", "stages", "layers", "positions", "select", "corrupt", "corrupt-select", "method", "sae"}) {
        if (vm.count(option)) record[option] = vm[option].as<std::string>();
    }
    // Only when given: earlier requests keep their records.
    if (r.ids) record["ids"] = boost::json::value_from(*r.ids);
    if (r.corrupt_ids) record["corrupt_ids"] = boost::json::value_from(*r.corrupt_ids);
    record["verify_top"] = r.verify_top;
    if (r.integrated_gradients) record["steps"] = r.ig_steps;
    record["add_bos"] = r.add_bos == config::AddBos::No ? "no" : "auto";
    if (r.special) record["special"] = true;  // only when given: earlier requests keep their records
    r.request_record = std::move(record);
    return r;
}

}  // namespace

int run_attribute(const std::vector<std::string>& args) {
    po::options_description options("attribute options");
    options.add(model_options()).add(prompt_options());
    options.add_options()
        ("target", po::value<std::string>(), "the continuation the metric scores (its bytes follow the prompt's)")
        ("metric", po::value<std::string>()->default_value("logprob"),
         "logprob (the target's summed log-probability), logit-diff (target minus --contrast), prob (one token)")
        ("contrast", po::value<std::string>(), "logit-diff: the token or continuation subtracted")
        ("out", po::value<std::string>(), "the run directory to write")
        ("stages", po::value<std::string>()->default_value("after_layer"),
         "comma-separated: before_layer, attention_pattern, head_outputs, after_attention, residual_mid, mlp_input, "
         "mlp_activation, after_mlp, after_layer, before_logits; sae_features with --sae")
        ("layers", po::value<std::string>()->default_value("all"), "all, or comma-separated layer indices")
        ("positions", po::value<std::string>()->default_value("all"), "all, last, or comma-separated prompt positions")
        ("select", po::value<std::string>(),
         "a selection spec: all, first, last, 3,-1, bytes:A-B, chars:A-B, substring:TEXT[#K], each [:first|:last]")
        ("corrupt", po::value<std::string>(), "attribution patching: the corrupted prompt (same number of tokens)")
        ("corrupt-ids", po::value<std::string>(), "attribution patching: the corrupted prompt as token ids (1,2,3; no BOS added)")
        ("sae", po::value<std::string>(), "an SAE directory spliced at its site: --stages sae_features has its features' gradient")
        ("corrupt-select", po::value<std::string>(),
         "with --corrupt: the corrupted prompt's rows patched onto the selected ones, the k-th onto the k-th (a "
         "selection spec: substring:TEXT...); without it the prompts align position for position")
        ("verify-top", po::value<long long>()->default_value(0), "with --corrupt: patch the K top sites for real")
        ("method", po::value<std::string>()->default_value("atp"),
         "with --corrupt: atp (the gradient at the clean run) or ig (integrated gradients along the path)")
        ("steps", po::value<long long>()->default_value(16), "--method ig: steps of the path (midpoint rule)")
        ("json", po::bool_switch(), "print a JSON summary")
        ("overwrite", po::bool_switch(), "replace an earlier run in the output directory");
    po::variables_map vm;
    if (!parse_options("attribute", args, options, {}, vm)) return kExitOk;

    config::ModelSection model_section;
    if (!vm["route"].defaulted() && vm["route"].as<std::string>() != "reference")
        throw Error(fmt::format("ember attribute: --route {} is refused: gradients are defined on the reference route "
                                "(the one attribute runs); leave --route out or give --route reference",
                                vm["route"].as<std::string>()));
    apply_model_options(vm, model_section, false);
    bool wants_sae_features = false;
    attribution::AttributeRequest request = request_from_options(vm, wants_sae_features);
    request.threads = runtime::effective_threads(model_section.threads);

    const runtime::LoadedModel model(model_section.path, parse_arch(model_section.arch));
    const attribution::GradientModel gradient_model(model.file, model.model->config());
    std::optional<features::Sae> sae;
    if (wants_sae_features) {
        sae = features::load_sae(fs::absolute(vm["sae"].as<std::string>()).lexically_normal());
        features::fit_sae_to_model(*sae, features::site_widths(model.model->config()));
        request.sae = &*sae;
    }
    const attribution::AttributeResult r = attribution::run_attribution(model, gradient_model, request);

    if (vm["json"].as<bool>()) {
        print_json(boost::json::object{{"dir", r.dir.string()},
                                       {"manifest", (r.dir / record::kManifestName).string()},
                                       {"metric", attribution::metric_name(request.metric)},
                                       {"value", r.metric},
                                       {"prompt_tokens", r.prompt_tokens},
                                       {"evaluated_tokens", r.evaluated_tokens},
                                       {"arrays", r.arrays},
                                       {"forward_ms", r.forward_ms},
                                       {"backward_ms", r.backward_ms}});
    } else {
        fmt::print(stderr, "ember: {} = {:.6g} over {} prompt tokens ({} evaluated); {} arrays in {} (forward {:.1f} ms, "
                           "backward {:.1f} ms)\n",
                   attribution::metric_name(request.metric), r.metric, r.prompt_tokens, r.evaluated_tokens, r.arrays,
                   r.dir.string(), r.forward_ms, r.backward_ms);
    }
    return kExitOk;
}

}  // namespace ember::app

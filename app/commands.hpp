// The subcommands of `ember`. Each takes its arguments without the subcommand name and
// returns an exit code; errors are thrown (ember::Error -> 1, ember::UsageError -> 2).
#pragma once

#include <string>
#include <vector>

namespace ember::app {

int run_inspect(const std::vector<std::string>& args);
int run_tokenize(const std::vector<std::string>& args);
int run_template(const std::vector<std::string>& args);
int run_detokenize(const std::vector<std::string>& args);
int run_vocab(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_plugins(const std::vector<std::string>& args);
int run_trace(const std::vector<std::string>& args);
int run_extract(const std::vector<std::string>& args);
int run_attribute(const std::vector<std::string>& args);
int run_sae(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_merge(const std::vector<std::string>& args);
int run_quantize(const std::vector<std::string>& args);
int run_synth(const std::vector<std::string>& args);
int run_run(const std::vector<std::string>& args);
int run_sweep(const std::vector<std::string>& args);
int run_bench(const std::vector<std::string>& args);

}  // namespace ember::app

#include "runtime/loaded_model.hpp"

#include "models/block_scales.hpp"

namespace ember::runtime {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

std::string checked_sha256(const gguf::File& file, std::optional<std::string> known_sha256) {
    if (!known_sha256) return models::hash_and_check_block_scales(file);
    models::check_block_scales(file);
    return std::move(*known_sha256);
}

}  // namespace

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected)
    : LoadedModel(model_path, expected, Clock::now(), std::nullopt) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, std::string known_sha256)
    : LoadedModel(model_path, expected, Clock::now(), std::move(known_sha256)) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, Clock::time_point start,
                         std::optional<std::string> known_sha256)
    : path(fs::absolute(model_path).lexically_normal()),
      file(gguf::File::open(path)),
      model(models::load_model(file, expected, models::ScaleCheck::by_caller)),
      sha256(checked_sha256(file, std::move(known_sha256))),
      tokenizer(tokenizer::Tokenizer::from_gguf(file)),
      load_ms(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) {}

}  // namespace ember::runtime

#include "runtime/loaded_model.hpp"

#include "common/sha256.hpp"

namespace ember::runtime {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected)
    : LoadedModel(model_path, expected, Clock::now(), std::nullopt) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, std::string known_sha256)
    : LoadedModel(model_path, expected, Clock::now(), std::move(known_sha256)) {}

LoadedModel::LoadedModel(const fs::path& model_path, std::optional<models::Family> expected, Clock::time_point start,
                         std::optional<std::string> known_sha256)
    : path(fs::absolute(model_path).lexically_normal()),
      file(gguf::File::open(path)),
      model(models::load_model(file, expected)),
      tokenizer(tokenizer::Tokenizer::from_gguf(file)),
      sha256(known_sha256 ? std::move(*known_sha256) : sha256_file_hex(path)),
      load_ms(std::chrono::duration<double, std::milli>(Clock::now() - start).count()) {}

}  // namespace ember::runtime

#include "utf8_stream.hpp"

#include "record/strict_json.hpp"

namespace ember::app {

std::string valid_utf8(std::string_view bytes) { return replace_invalid_utf8(bytes); }

}  // namespace ember::app

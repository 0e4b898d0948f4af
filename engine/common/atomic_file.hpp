// Writing a whole file so that a reader never sees half of it: the bytes go to a
// temporary name in the same directory, which is renamed over the target only once
// everything was written. On any failure the temporary file is removed and the target
// is left as it was.
#pragma once

#include <filesystem>
#include <string_view>

namespace ember {

// Throws ember::Error naming the path when the file cannot be created, written or renamed.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace ember

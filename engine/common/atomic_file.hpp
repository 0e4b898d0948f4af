// Writing a whole file so that a reader never sees half of it: the bytes go to a
// temporary name in the same directory, which is renamed over the target only once
// everything was written. On any failure the temporary file is removed and the target
// is left as it was.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace ember {

// Throws ember::Error naming the path when the file cannot be created, written or renamed.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

// The same for a file written piece by piece: `write` streams the contents into `out`
// (an exception from it, or a failed stream, removes the temporary file).
void write_file_atomically(const std::filesystem::path& path, const std::function<void(std::ostream& out)>& write);

}  // namespace ember

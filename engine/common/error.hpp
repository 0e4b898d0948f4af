// The one error type the engine throws. Every message names what was wrong and where
// (file, key, tensor, byte offset, line:column); the app prints it and exits 1.
#pragma once

#include <stdexcept>
#include <string>

namespace ember {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A command line that cannot be understood: the app exits 2 instead of 1.
class UsageError : public Error {
public:
    explicit UsageError(const std::string& message) : Error(message) {}
};

}  // namespace ember

// A research dataset (docs/extraction.md, "Datasets"): one sample per line, read as a
// stream so that memory does not grow with the number of samples.
//
// - JSONL (any name but *.txt): one object per line with `text` (a string) or `messages`
//   (a conversation: a list of {role, content}, with the line's own add_generation_prompt,
//   enable_thinking and tools, rendered with the chat template: docs/chat.md),
//   `id` (a string or an integer; default: the line number), `select` (a selection spec,
//   ember/selection.hpp: a string or an object; default: the run's), `target` (a string:
//   a continuation to score) and any other members, kept as the sample's metadata.
// - .txt: every line is one prompt (its id is the line number).
// Blank lines are skipped in both (they are no sample, and keep no index). Every error
// names the file and the 1-based line.
//
//   const DatasetInfo info = scan_dataset(path);      // validates every line first
//   DatasetReader reader(path);
//   Sample s;
//   while (reader.next(s)) ...
#pragma once

#include <ember/selection.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace ember::extract {

struct Sample {
    std::size_t index = 0;  // 0-based, in dataset order
    std::size_t line = 0;   // 1-based line of the file
    boost::json::value id;  // as written, or the line number
    std::string text;                        // a conversation's: its rendering (dataset_extraction)
    std::optional<boost::json::object> chat;  // a conversation: messages and the line's chat variables
    std::optional<selection::Spec> select;  // the sample's own spec
    std::optional<std::string> target;
    boost::json::object metadata;           // every other member

    std::string id_text() const;  // the id for messages: "line 7" style ids print as written
};

class DatasetReader {
public:
    // ember::Error naming the file when it cannot be opened.
    explicit DatasetReader(std::filesystem::path path);
    // The next sample, false at the end. ember::Error naming file:line for a bad line.
    bool next(Sample& sample);
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    std::ifstream in_;
    bool text_lines_ = false;  // a .txt file
    std::size_t line_ = 0;
    std::size_t index_ = 0;
};

struct DatasetInfo {
    std::size_t samples = 0;
    std::size_t bytes = 0;
    std::string sha256;  // of the file's bytes
};

// Reads the whole file once: every line parsed (the first bad one is an ember::Error
// naming file:line), the samples counted, the bytes hashed.
DatasetInfo scan_dataset(const std::filesystem::path& path);

}  // namespace ember::extract

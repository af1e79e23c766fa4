// Client side of Server-Sent Events: splits a byte stream into the payloads of its
// "data: " lines, one per event (vlkv bench-serve and the server tests read streams).
#pragma once

#include <string>
#include <vector>

namespace vlkv::server {

class SseReader {
 public:
  // Appends received bytes; returns the data payloads of the events completed by them
  // ("[DONE]" included as such). Lines other than "data:" (comments, event names) are skipped.
  std::vector<std::string> feed(const char* data, size_t n) {
    buffer_.append(data, n);
    std::vector<std::string> events;
    for (size_t end; (end = buffer_.find("\n\n")) != std::string::npos;) {
      std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      if (event.rfind("data:", 0) != 0) continue;
      event.erase(0, event.size() > 5 && event[5] == ' ' ? 6 : 5);
      events.push_back(std::move(event));
    }
    return events;
  }

 private:
  std::string buffer_;
};

}  // namespace vlkv::server

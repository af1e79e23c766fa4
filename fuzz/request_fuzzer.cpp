// libFuzzer target: vlkv serve's request path on arbitrary bytes - the JSON body through
// both endpoints' parsers (messages, content parts, sampling fields, logprobs,
// response_format schemas, data: URIs decoded into images under small limits), the input
// as a data: URI and as base64, the stop-string / UTF-8 text stream over the input's bytes,
// and the response_format recognizer (json_object over the input, a request's own schema
// over its last message). Any crash, leak or UB is a bug;
// every bad input must come back as a Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/data_uri.h"
#include "server/json_recognizer.h"
#include "server/openai_request.h"
#include "server/text_stream.h"

namespace {

volatile size_t g_sink;

// response_format's recognizer: whatever bytes it takes whole and calls complete are a JSON
// document nlohmann parses (an object under json_object).
void check_recognizer(const vlkv::server::JsonGrammar& g, std::string_view text, bool object) {
  vlkv::server::JsonRecognizer r(g);
  size_t n = 0;
  while (n < text.size() && r.feed(static_cast<uint8_t>(text[n]))) ++n;
  if (n < text.size() || !r.complete()) return;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || (object && !j.is_object())) std::abort();
}  // keeps results from being optimized away

vlkv::server::RequestLimits small_limits() {
  vlkv::server::RequestLimits l;
  l.max_images = 4;
  l.media.max_file_bytes = 1 << 20;
  l.media.max_pixels = 1 << 16;
  l.media.max_side = 1024;
  return l;  // media_path "": file:// URLs refused (no file access while fuzzing)
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlkv::server;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const RequestLimits limits = small_limits();
  for (Endpoint e : {Endpoint::kChat, Endpoint::kCompletion}) {
    vlkv::Result<ApiRequest> r = parse_request(text, e, limits);
    if (!r.is_ok()) {
      if (r.status().message().empty()) std::abort();  // every refusal says why
      continue;
    }
    size_t n = r->prompt.size() + r->stop.size();
    size_t markers = 0;
    for (const vlkv::ChatTurn& t : r->conversation) {
      n += t.content.size();
      for (size_t at = t.content.find(vlkv::kMediaMarker); at != std::string::npos;
           at = t.content.find(vlkv::kMediaMarker, at + 1))
        ++markers;
    }
    for (const vlkv::server::RequestImage& m : r->images) {
      // Headers read within the limits; decoding (as the server does once the count fits)
      // gives that size or an error, never a larger image.
      if (m.info.width <= 0 || m.info.height <= 0 ||
          static_cast<int64_t>(m.info.width) * m.info.height > limits.media.max_pixels)
        std::abort();
      if (m.is_video) continue;  // probed by FFmpeg while parsing; decoding frames is the video loader's own tests'
      vlkv::Result<vlkv::Image> img = vlkv::server::decode_request_image(m, limits);
      if (img.is_ok() && (!img->valid() || img->width != m.info.width || img->height != m.info.height)) std::abort();
      if (img.is_ok()) n += img->pixels.size();
    }
    // A schema the request compiled, on the text of its last message (or its prompt).
    if (r->response_format) {
      const std::string& doc = r->conversation.empty() ? r->prompt : r->conversation.back().content;
      check_recognizer(*r->response_format, doc, false);
    }
    // Each image part left one marker (a text part may hold more of its own).
    if (e == Endpoint::kChat && markers < r->images.size()) std::abort();
    if (r->images.size() > static_cast<size_t>(limits.max_images)) std::abort();
    g_sink = g_sink + n;
  }
  static const JsonGrammar any_object = json_object_grammar();
  check_recognizer(any_object, text, true);
  vlkv::Result<DataUri> uri = parse_data_uri(text, 1 << 16);
  if (uri.is_ok()) g_sink = g_sink + uri->data.size();
  vlkv::Result<std::vector<uint8_t>> b64 = decode_base64(text, 1 << 16);
  if (b64.is_ok()) {
    // Round trip: what decodes re-encodes to bytes that decode the same.
    const std::string again = encode_base64(b64->data(), b64->size());
    vlkv::Result<std::vector<uint8_t>> back = decode_base64(again, 1 << 16);
    if (!back.is_ok() || *back != *b64) std::abort();
  }
  // The input's first bytes as a stop string, the rest streamed in 3-byte pieces: what
  // comes out is the input up to the first stop, never more.
  if (size >= 2) {
    const size_t stop_len = 1 + data[0] % 4;
    if (size > stop_len) {
      const std::string stop(text.substr(1, stop_len));
      const std::string body(text.substr(1 + stop_len));
      TextStream stream({stop});
      std::string out;
      for (size_t i = 0; i < body.size(); i += 3) out += stream.feed(body.substr(i, 3));
      out += stream.finish();
      const size_t cut = body.find(stop);
      if (out != body.substr(0, cut)) std::abort();
    }
  }
  return 0;
}

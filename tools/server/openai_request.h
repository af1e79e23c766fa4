// Parsing OpenAI request bodies (/v1/chat/completions, /v1/completions) into what the
// server hands the engine: the conversation with one media marker per image, the images
// (encoded, with their headers' sizes: decoded only once the prompt's token count fits),
// sampling and the vlkv extensions. Everything a client sends is checked here;
// any problem is an InvalidArgument whose message goes back as a 400.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vlkv/engine.h"
#include "vlkv/media.h"
#include "server/json_schema.h"
#include "vlkv/status.h"

namespace vlkv::server {

struct RequestLimits {
  int32_t max_images = 8;    // images and videos in one request
  int32_t video_frames = 8;  // frames sampled uniformly from each video
  double video_fps = 0;      // > 0: frames sampled at this rate instead (a model trained on one, as tinyvideo at 2)
  MediaLimits media;         // per image: file bytes, pixels, side
  std::string media_path;    // file:// URLs are read only under this directory ("" = refused)
  int32_t max_stop = 16;     // stop strings
};

enum class Endpoint { kChat, kCompletion };

// An image as the request carried it. Its header was read (and checked against the limits)
// while parsing; its pixels are decoded by decode_request_image once the prompt's token
// count, known from the headers, fits the context and the KV budget.
struct RequestImage {
  std::vector<uint8_t> bytes;  // an image data: URI's payload ("" for file:// and videos)
  std::string path;            // a file:// URL's resolved path, or a video data: URI's temp file
  bool is_video = false;       // a video_url part (its frames sampled by limits.video_frames)
  std::shared_ptr<const void> owned_file;  // removes a video data: URI's temp file with the last copy
  MediaInfo info;              // from the header (probe_image_data / probe_image)
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                   // as given (informational: one model per server)
  std::vector<ChatTurn> conversation;  // kChat: contents with kMediaMarker where images were
  // kChat, per turn: the offsets in its content of the markers put there for images (a
  // marker the client typed is text: chat_prompt.h).
  std::vector<std::vector<size_t>> media_at;
  std::string prompt;                  // kCompletion: the text as given
  std::vector<RequestImage> images;    // in marker order, not decoded
  int64_t max_tokens = -1;             // -1: not given (until end of text or context)
  SamplerParams sampling;              // defaults as vlkv run's
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  std::string kv_method;               // the "kv" extension ("" = the server's default)
  // -1: no logprobs; else the most likely tokens to list per generated token (chat:
  // logprobs true + top_logprobs 0-20; completions: logprobs 0-5).
  int32_t logprobs = -1;
  std::shared_ptr<const JsonGrammar> response_format;  // null: free text
  // vLLM's cache_salt: salts this request's cache keys further than its tenant does (requests
  // with different salts share no prefix-cache or encoder-cache entry). "": none.
  std::string cache_salt;
};

constexpr size_t kMaxCacheSaltBytes = 256;

// body: the raw request body. InvalidArgument names the offending field; a field the server
// does not implement (tools, n_probs, logit_bias, ...) is refused by name unless it holds
// the value that asks for nothing (false, 0, []).
Result<ApiRequest> parse_request(std::string_view body, Endpoint endpoint, const RequestLimits& limits);

// A file:// path under dir (--media-path): both resolved (symlinks, ..) and compared by prefix + '/'.
Result<std::string> resolve_under(const std::string& path, const std::string& dir);

// One image_url: a data: URI (base64 PNG, JPEG, ...) or file:// under limits.media_path;
// its header read, no pixel decoded.
Result<RequestImage> read_image_url(const std::string& url, const RequestLimits& limits);
// The image's pixels (load_image / decode_image under limits.media).
Result<Image> decode_request_image(const RequestImage& image, const RequestLimits& limits);
// One video_url (tools/server/request_video.cpp): a data: URI (video/*; written to a private
// temp file, as FFmpeg reads files) or file:// under limits.media_path; its container probed
// (probe_video: frames and sizes), no frame decoded.
Result<RequestImage> read_video_url(const std::string& url, const RequestLimits& limits);
// An image's or a video's decoded media item (video: limits.video_frames sampled frames).
Result<MediaItem> decode_request_media(const RequestImage& media, const RequestLimits& limits);

}  // namespace vlkv::server

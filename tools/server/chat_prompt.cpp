// Each message's text is replaced by a placeholder before the template runs (its leading and
// trailing whitespace kept outside, so a template that trims a message still does), then
// put back where the placeholder landed, recording its bytes. The templates copy content
// verbatim or trimmed (src/text/chat_template.cpp); one that did not would lose a
// placeholder, which is refused rather than guessed at.
#include "server/chat_prompt.h"

#include <cctype>
#include <string_view>

namespace vlkv::server {
namespace {

// No message text can reach the templated output (it is replaced), so a fixed form is safe.
constexpr std::string_view kOpen = "\x01vlkv-text-", kClose = "\x01";

std::string placeholder(size_t i) { return std::string(kOpen) + std::to_string(i) + std::string(kClose); }

bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

Result<ChatPromptText> chat_prompt_text(const Engine& model, const std::vector<ChatTurn>& conversation,
                                        const std::vector<std::vector<size_t>>& media_at, size_t n_media) {
  std::vector<std::string> texts;  // the messages' text pieces, by placeholder number
  std::vector<ChatTurn> turns;
  const size_t marker = std::string_view(kMediaMarker).size();
  for (size_t t = 0; t < conversation.size(); ++t) {
    const std::string& content = conversation[t].content;
    std::string out;
    size_t from = 0;
    auto add_text = [&](size_t end) {
      std::string_view piece(content.data() + from, end - from);
      size_t b = 0, e = piece.size();
      while (b < e && space(piece[b])) ++b;
      while (e > b && space(piece[e - 1])) --e;
      out.append(piece.substr(0, b));
      if (e > b) {
        out += placeholder(texts.size());
        texts.emplace_back(piece.substr(b, e - b));
      }
      out.append(piece.substr(e));
    };
    if (t < media_at.size())
      for (size_t at : media_at[t]) {
        if (at < from || at + marker > content.size()) return Status(StatusCode::kInternal, "chat prompt: bad media offset");
        add_text(at);
        out += kMediaMarker;
        from = at + marker;
      }
    add_text(content.size());
    turns.push_back({conversation[t].role, std::move(out)});
  }
  // One user message: Engine::user_prompt's case (markers in front when the text has none).
  const std::string templated = turns.size() == 1 && turns[0].role == "user"
                                    ? model.apply_chat_template(with_media_markers(turns[0].content, n_media))
                                    : model.apply_chat_template(turns);
  ChatPromptText r;
  std::vector<bool> seen(texts.size(), false);
  size_t from = 0;
  for (size_t at = templated.find(kOpen); at != std::string::npos; at = templated.find(kOpen, from)) {
    const size_t close = templated.find(kClose, at + kOpen.size());
    if (close == std::string::npos) break;
    const std::string number = templated.substr(at + kOpen.size(), close - at - kOpen.size());
    size_t i = 0;
    for (char c : number) i = c >= '0' && c <= '9' && i < texts.size() ? i * 10 + static_cast<size_t>(c - '0') : texts.size();
    if (number.empty() || i >= texts.size() || seen[i])
      return Status(StatusCode::kInternal, "chat prompt: the chat template repeated or altered a message");
    seen[i] = true;
    r.text.append(templated, from, at - from);
    r.plain_spans.emplace_back(r.text.size(), r.text.size() + texts[i].size());
    r.text += texts[i];
    from = close + kClose.size();
  }
  r.text.append(templated, from, std::string::npos);
  for (bool s : seen)
    if (!s) return Status(StatusCode::kInternal, "chat prompt: the chat template dropped a message's text");
  return r;
}

}  // namespace vlkv::server

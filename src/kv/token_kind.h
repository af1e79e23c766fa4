// What a cached token is: compression methods treat text, visual and special
// tokens differently (e.g. keep text tokens at higher precision).
#pragma once

#include <cstdint>

namespace vlkv {

enum class TokenKind : uint8_t { kText = 0, kVisual = 1, kSpecial = 2 };

}  // namespace vlkv

// The integer codec's grouping / layout classes, one file each (int_codec.h lists them);
// make_int_codec picks one from the parameters.
#pragma once

#include <memory>

#include "kv/codecs/int_codec_core.h"

namespace vlkv::intc {

std::shared_ptr<const Codec> make_int_token_rows_codec(const IntCodecParams& p);
std::shared_ptr<const Codec> make_int_token_tiles_codec(const IntCodecParams& p);
std::shared_ptr<const Codec> make_int_channel_codec(const IntCodecParams& p);

}  // namespace vlkv::intc

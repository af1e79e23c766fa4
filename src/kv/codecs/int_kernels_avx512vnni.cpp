// The AVX-512 VNNI variant of IntTileKernels (int_kernels.h): the kernels of
// int_tile_kernels_avx512.h, which carry their own target attributes.
#include "kv/codecs/int_kernels.h"
#include "kv/codecs/int_tile_kernels_avx512.h"

namespace vlkv::intk {

const IntTileKernels kIntTileKernelsAvx512Vnni{
    {{tilek::scores<2, false>, tilek::scores<2, true>}, {tilek::scores<4, false>, tilek::scores<4, true>},
     {tilek::scores<8, false>, tilek::scores<8, true>}},
    {{tilek::accumulate<2, false>, tilek::accumulate<2, true>}, {tilek::accumulate<4, false>, tilek::accumulate<4, true>},
     {tilek::accumulate<8, false>, tilek::accumulate<8, true>}},
};

}  // namespace vlkv::intk

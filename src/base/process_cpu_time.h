// CPU time of the whole process (every thread), for benchmarks: on a shared machine it is
// steadier than wall time, as time spent descheduled is not counted.
#pragma once

#include <ctime>

namespace vlkv {

inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace vlkv

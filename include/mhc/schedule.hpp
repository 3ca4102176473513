// The schedule layer: the two-stream schedule, the stack's launches per layout, the stack
// executor (native and overlap, CUDA graphs), the validated stack run and the trace. (The
// benchmark's stand-in decoder is in bench/, mhc/bench/decoder_standin.hpp.)
#pragma once
#include "mhc/cuda.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "mhc/schedule/stack_launches.hpp"
#include "mhc/schedule/stack_run.hpp"
#include "mhc/schedule/trace.hpp"
#include "mhc/schedule/two_stream.hpp"

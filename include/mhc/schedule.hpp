// The schedule layer: the two-stream schedule, the stack's launches per layout, the stack
// executor (native and overlap, CUDA graphs), the validated stack run, the trace and the
// stand-in decoder.
#pragma once
#include "mhc/cuda.hpp"
#include "mhc/schedule/decoder_standin.hpp"
#include "mhc/schedule/stack_executor.hpp"
#include "mhc/schedule/stack_launches.hpp"
#include "mhc/schedule/stack_run.hpp"
#include "mhc/schedule/trace.hpp"
#include "mhc/schedule/two_stream.hpp"
